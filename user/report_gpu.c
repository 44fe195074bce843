// SPDX-License-Identifier: BSD-3-Clause
/* The CUDA/NCCL parts of the reports: libraries found, calls, communicators. */
#include <string.h>
#include "gpu.h"
#include "report.h"

struct gpu_sums {
	uint64_t syncs, ops, bytes, launches;
};

static void sums(const struct tb_api_stat st[TB_MAX_APIS], struct gpu_sums *s)
{
	memset(s, 0, sizeof(*s));
	for (int a = 0; a < gpu_napis; a++) {
		enum tb_api_kind k = gpu_apis[a].kind;

		if (gpu_kind_is_sync(k))
			s->syncs += st[a].calls;
		if (gpu_kind_is_op(k)) {
			s->ops += st[a].calls;
			s->bytes += st[a].bytes;
		}
		if (k == TB_AK_LAUNCH)
			s->launches += st[a].calls;
	}
}

/* A job read without tracing (unit tests, recordings) has no GPU side. */
static struct gpu no_gpu;

static double per_s(uint64_t n, uint64_t ns)
{
	return ns ? n * 1e9 / ns : 0.0;
}

void report_gpu_live(FILE *f, struct gpu *g, uint64_t now)
{
	struct tb_api_stat tot[TB_MAX_APIS];
	struct gpu_sums s;
	uint64_t dt;
	char b[32];

	if (!g || !gpu_any_library(g))
		return;
	dt = now - g->live_ns;
	gpu_refresh(g);
	gpu_totals(g, tot);
	sums(tot, &s);
	if (g->live_ns) {
		fmt_bytes(b, sizeof(b), (uint64_t)per_s(s.bytes - g->live_bytes, dt));
		fprintf(f, "cuda: %.1f syncs/s  nccl: %.1f ops/s, %s/s", per_s(s.syncs - g->live_syncs, dt),
			per_s(s.ops - g->live_ops, dt), b);
		if (g->launches)
			fprintf(f, "  launches: %.0f/s", per_s(s.launches - g->live_launches, dt));
		fputc('\n', f);
	}
	g->live_ns = now;
	g->live_syncs = s.syncs;
	g->live_ops = s.ops;
	g->live_bytes = s.bytes;
	g->live_launches = s.launches;
}

static void text_libraries(FILE *f, const struct gpu *g)
{
	for (int i = 0; i < g->nprocs; i++) {
		const struct gpu_proc *p = &g->procs[i];

		for (int m = 0; m < p->nmaps; m++) {
			const struct gpu_object *o = &g->objs[p->maps[m].obj];

			for (int fam = 0; fam < GF_NFAMILIES; fam++) {
				if (!(o->families & (1u << fam)))
					continue;
				fprintf(f, "  %-6s %-12s %s pid %-7d %s\n", gpu_family_names[fam],
					o->version[fam][0] ? o->version[fam] : "-",
					o->is_static[fam] ? "static in" : "        ", p->pid, o->path);
			}
		}
	}
}

static void text_comms(FILE *f, const struct gpu *g)
{
	for (int i = 0; i < g->nprocs; i++) {
		const struct gpu_proc *p = &g->procs[i];

		for (int c = 0; c < p->ncomms; c++) {
			const struct gpu_comm *k = &p->comms[c];

			fprintf(f, "  communicator pid %d: ", p->pid);
			if (k->rank >= 0)
				fprintf(f, "rank %d of %d, ", k->rank, k->nranks);
			fprintf(f, "id ");
			for (int b = 0; b < 8; b++)
				fprintf(f, "%02x", k->id[b]);
			fprintf(f, " (%s)%s\n", gpu_apis[k->api].name,
				k->destroyed ? ", destroyed" : "");
		}
	}
}

void report_gpu_text(FILE *f, const struct job *job, uint64_t now)
{
	struct gpu *g = job->gpu ? job->gpu : &no_gpu;
	struct tb_api_stat tot[TB_MAX_APIS];
	uint64_t win = now - job->window_start_ns;
	struct gpu_sums s;
	char b[32];

	if (!gpu_any_library(g)) {
		fprintf(f, "CUDA/NCCL: no CUDA library mapped in the traced processes: no gpu_wait, no NCCL calls to see\n\n");
		return;
	}
	gpu_refresh(g);
	gpu_totals(g, tot);
	sums(tot, &s);
	fprintf(f, "CUDA/NCCL%s\n", g->launches ? "" : " (launches not counted: --launches)");
	text_libraries(f, g);
	fprintf(f, "  %-30s %9s %9s %8s %9s %8s\n", "FUNCTION", "CALLS", "PER S",
		"NESTED", "BYTES", "TIME S");
	for (int a = 0; a < gpu_napis; a++) {
		if (!tot[a].calls && !tot[a].nested)
			continue;
		fmt_bytes(b, sizeof(b), tot[a].bytes);
		fprintf(f, "  %-30s %9llu %9.1f %8llu %9s %8.3f\n", gpu_apis[a].name,
			(unsigned long long)tot[a].calls, per_s(tot[a].calls, win),
			(unsigned long long)tot[a].nested, tot[a].bytes ? b : "-",
			tot[a].ns / 1e9);
	}
	fmt_bytes(b, sizeof(b), (uint64_t)per_s(s.bytes, win));
	fprintf(f, "  syncs %.1f/s; NCCL %.1f ops/s, %s/s\n", per_s(s.syncs, win),
		per_s(s.ops, win), b);
	text_comms(f, g);
	fputc('\n', f);
}

static void json_apis(FILE *f, const struct tb_api_stat st[TB_MAX_APIS])
{
	bool first = true;

	fprintf(f, "\"apis\":[");
	for (int a = 0; a < gpu_napis; a++) {
		if (!st[a].calls && !st[a].nested)
			continue;
		fprintf(f, "%s{\"name\":\"%s\",\"kind\":\"%s\",\"calls\":%llu,\"nested\":%llu,"
			"\"bytes\":%llu,\"time_s\":%.9f}", first ? "" : ",", gpu_apis[a].name,
			gpu_kind_names[gpu_apis[a].kind], (unsigned long long)st[a].calls,
			(unsigned long long)st[a].nested, (unsigned long long)st[a].bytes,
			st[a].ns / 1e9);
		first = false;
	}
	fputc(']', f);
}

static void json_missing(FILE *f, const struct gpu_object *o, enum gpu_family fam)
{
	bool first = true;

	fputc('[', f);
	for (int a = 0; a < gpu_napis; a++) {
		if (!gpu_lacks(o, a, fam))
			continue;
		fprintf(f, "%s\"%s\"", first ? "" : ",", gpu_apis[a].name);
		first = false;
	}
	fputc(']', f);
}

static void json_libraries(FILE *f, const struct gpu *g)
{
	bool first = true;

	fprintf(f, "\"libraries\":[");
	for (int i = 0; i < g->nprocs; i++) {
		const struct gpu_proc *p = &g->procs[i];

		for (int m = 0; m < p->nmaps; m++) {
			const struct gpu_object *o = &g->objs[p->maps[m].obj];

			for (int fam = 0; fam < GF_NFAMILIES; fam++) {
				if (!(o->families & (1u << fam)))
					continue;
				fprintf(f, "%s{\"pid\":%d,\"kind\":\"%s\",\"path\":", first ? "" : ",",
					p->pid, gpu_family_names[fam]);
				json_str(f, o->path);
				fprintf(f, ",\"version\":");
				json_str(f, o->version[fam]);
				fprintf(f, ",\"static\":%s,\"probes\":%d,\"missing\":",
					o->is_static[fam] ? "true" : "false", p->maps[m].probes[fam]);
				json_missing(f, o, fam);
				fputc('}', f);
				first = false;
			}
		}
	}
	fputc(']', f);
}

void report_gpu_json(FILE *f, const struct job *job, uint64_t now)
{
	struct gpu *g = job->gpu ? job->gpu : &no_gpu;
	struct tb_api_stat tot[TB_MAX_APIS];
	uint64_t win = now - job->window_start_ns;
	struct gpu_sums s;

	gpu_refresh(g);
	gpu_totals(g, tot);
	sums(tot, &s);
	fprintf(f, "\"gpu\":{\"launches\":\"%s\",", g->launches ? "on" : "off");
	json_libraries(f, g);
	fputc(',', f);
	json_apis(f, tot);
	fprintf(f, ",\"syncs_per_s\":%.3f,\"nccl_ops_per_s\":%.3f,\"nccl_bytes_per_s\":%.1f,\"notes\":[",
		per_s(s.syncs, win), per_s(s.ops, win), per_s(s.bytes, win));
	if (!gpu_any_library(g))
		fprintf(f, "\"no CUDA library mapped in the traced processes\"");
	fprintf(f, "]}");
}

void report_gpu_json_proc(FILE *f, const struct job *job, pid_t pid)
{
	const struct gpu_proc *p = gpu_proc_find(job->gpu ? job->gpu : &no_gpu, pid);
	static const struct tb_api_stat none[TB_MAX_APIS];

	fprintf(f, "\"gpu\":{");
	json_apis(f, p ? p->stat : none);
	fprintf(f, ",\"nccl_comms\":[");
	for (int c = 0; p && c < p->ncomms; c++) {
		const struct gpu_comm *k = &p->comms[c];

		fprintf(f, "%s{\"comm\":\"0x%llx\",\"rank\":%d,\"nranks\":%d,\"id\":\"",
			c ? "," : "", (unsigned long long)k->comm, k->rank, k->nranks);
		for (int b = 0; b < 16; b++)
			fprintf(f, "%02x", k->id[b]);
		fprintf(f, "\",\"init\":\"%s\",\"parent\":\"0x%llx\",\"destroyed\":%s}",
			gpu_apis[k->api].name, (unsigned long long)k->parent,
			k->destroyed ? "true" : "false");
	}
	fprintf(f, "]}");
}
