// SPDX-License-Identifier: BSD-3-Clause
/* The CUDA/NCCL parts of the reports: libraries found, calls, communicators. */
#include <inttypes.h>
#include <string.h>
#include "gpu.h"
#include "sections.h"

static double per_s(uint64_t n, uint64_t ns)
{
	return ns ? n * 1e9 / ns : 0.0;
}

static void text_libraries(FILE *f, const struct gpu *g)
{
	char path[ESC_LEN(sizeof(g->objs->path))], version[ESC_LEN(sizeof(g->objs->version[0]))];

	for (int i = 0; i < g->nprocs; i++) {
		const struct gpu_proc *p = &g->procs[i];

		/* By kind, not by when each was found: that varies from run to run. */
		for (int fam = 0; fam < LIB_PYTHON; fam++) {	/* not the interpreter */
			for (int m = 0; m < p->nmaps; m++) {
				const struct gpu_object *o = &g->objs[p->maps[m].obj];

				if (!(o->families & (1u << fam)))
					continue;
				fprintf(f, "  %-6s %-12s %s pid %-7d %s\n", probe_family_names[fam],
					o->version[fam][0] ?
					report_esc(version, sizeof(version), o->version[fam]) : "-",
					o->is_static[fam] ? "static in" : "        ", p->pid,
					report_esc(path, sizeof(path), o->path));
			}
		}
	}
}

/* 16 bytes as 32 hex digits; 8 as 16 (the text report's short form). */
static void hex_id(char *out, const unsigned char *id, int n)
{
	for (int b = 0; b < n; b++)
		sprintf(out + 2 * b, "%02x", id[b]);
}

static void text_comms(FILE *f, const struct gpu *g)
{
	char id[40];

	for (int i = 0; i < g->nprocs; i++) {
		const struct gpu_proc *p = &g->procs[i];

		for (int c = 0; c < p->ncomms; c++) {
			const struct gpu_comm *k = &p->comms[c];

			fprintf(f, "  communicator pid %d: ", p->pid);
			if (k->rank >= 0)
				fprintf(f, "rank %d of %d, ", k->rank, k->nranks);
			hex_id(id, k->id, 8);
			if (k->api >= 0)
				fprintf(f, "id %s (%s)", id, probe_fns[k->api].name);
			else
				fprintf(f, "id unknown (made before tracing)");
			/* 0: none, or a recording older than the count (schema 11) */
			if (k->calls)
				fprintf(f, ", %" PRIu64 " data calls", k->calls);
			fprintf(f, "%s\n", k->destroyed ? ", destroyed" : "");
		}
	}
	if (g->comms_dropped)
		fprintf(f, "  communicators not listed: %" PRIu64 " (a process keeps %d, "
			"its oldest destroyed ones go first)\n", g->comms_dropped, GPU_MAX_COMMS);
}

void report_gpu_text(FILE *f, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	const struct gpu *g = &ses->gpu;
	struct tb_api_stat tot[TB_MAX_APIS];
	uint64_t win = now - job->window_start_ns;
	struct gpu_sums s;
	char b[32];

	if (!gpu_any_library(g)) {
		fprintf(f, "CUDA/NCCL: no CUDA library mapped in the traced processes: no gpu_wait, no NCCL calls to see\n\n");
		return;
	}
	gpu_totals(g, tot);
	gpu_sum_kinds(tot, &s);
	fprintf(f, "CUDA/NCCL%s\n", g->launches ? "" : " (launches not counted: --launches)");
	text_libraries(f, g);
	fprintf(f, "  %-30s %9s %9s %8s %9s %8s\n", "FUNCTION", "CALLS", "PER S",
		"NESTED", "BYTES", "TIME S");
	for (int a = 0; a < probe_nfns; a++) {
		if (!tot[a].calls && !tot[a].nested)
			continue;
		fmt_bytes(b, sizeof(b), tot[a].bytes);
		fprintf(f, "  %-30s %9llu %9.1f %8llu %9s %8.3f\n", probe_fns[a].name,
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

static void json_apis(struct jw *w, const struct tb_api_stat st[TB_MAX_APIS])
{
	jw_name(w, "apis");
	jw_array(w);
	for (int a = 0; a < probe_nfns; a++) {
		if (!st[a].calls && !st[a].nested)
			continue;
		jw_object(w);
		jw_string_field(w, "name", probe_fns[a].name);
		jw_string_field(w, "kind", probe_kind_names[probe_fns[a].kind]);
		jw_uint_field(w, "calls", st[a].calls);
		jw_uint_field(w, "nested", st[a].nested);
		jw_uint_field(w, "bytes", st[a].bytes);
		jw_float_field(w, "time_s", st[a].ns / 1e9, 9);
		jw_end_object(w);
	}
	jw_end_array(w);
}

static void json_missing(struct jw *w, const struct gpu_object *o, enum probe_family fam)
{
	jw_name(w, "missing");
	jw_array(w);
	for (int a = 0; a < probe_nfns; a++)
		if (gpu_lacks(o, a, fam))
			jw_string(w, probe_fns[a].name);
	jw_end_array(w);
}

static void json_library(struct jw *w, const struct gpu_proc *p, const struct gpu_mapping *m,
			 const struct gpu_object *o, enum probe_family fam)
{
	jw_object(w);
	jw_int_field(w, "pid", p->pid);
	jw_string_field(w, "kind", probe_family_names[fam]);
	jw_string_field(w, "path", o->path);
	jw_string_field(w, "version", o->version[fam]);
	jw_bool_field(w, "static", o->is_static[fam]);
	jw_int_field(w, "probes", m->probes[fam]);
	json_missing(w, o, fam);
	jw_end_object(w);
}

static void json_libraries(struct jw *w, const struct gpu *g)
{
	jw_name(w, "libraries");
	jw_array(w);
	for (int i = 0; i < g->nprocs; i++) {
		const struct gpu_proc *p = &g->procs[i];

		for (int fam = 0; fam < LIB_PYTHON; fam++) {	/* not the interpreter */
			for (int m = 0; m < p->nmaps; m++) {
				const struct gpu_object *o = &g->objs[p->maps[m].obj];

				if (o->families & (1u << fam))
					json_library(w, p, &p->maps[m], o, fam);
			}
		}
	}
	jw_end_array(w);
}

void report_gpu_json(struct jw *w, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	const struct gpu *g = &ses->gpu;
	struct tb_api_stat tot[TB_MAX_APIS];
	uint64_t win = now - job->window_start_ns;
	struct gpu_sums s;

	gpu_totals(g, tot);
	gpu_sum_kinds(tot, &s);
	jw_name(w, "gpu");
	jw_object(w);
	jw_string_field(w, "launches", g->launches ? "on" : "off");
	json_libraries(w, g);
	json_apis(w, tot);
	jw_float_field(w, "syncs_per_s", per_s(s.syncs, win), 3);
	jw_float_field(w, "nccl_ops_per_s", per_s(s.ops, win), 3);
	jw_float_field(w, "nccl_bytes_per_s", per_s(s.bytes, win), 1);
	jw_name(w, "notes");
	jw_array(w);
	if (!gpu_any_library(g))
		jw_string(w, "no CUDA library mapped in the traced processes");
	jw_end_array(w);
	jw_end_object(w);
}

static void json_comm(struct jw *w, const struct gpu_comm *k)
{
	char buf[40];

	jw_object(w);
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)k->comm);
	jw_string_field(w, "comm", buf);
	jw_int_field(w, "rank", k->rank);
	jw_int_field(w, "nranks", k->nranks);
	hex_id(buf, k->id, 16);
	jw_string_field(w, "id", buf);
	if (k->api >= 0)
		jw_string_field(w, "init", probe_fns[k->api].name);
	else
		jw_null_field(w, "init");
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)k->parent);
	jw_string_field(w, "parent", buf);
	jw_bool_field(w, "destroyed", k->destroyed);
	jw_uint_field(w, "calls", k->calls);
	jw_uint_field(w, "bytes", k->bytes);
	jw_end_object(w);
}

void report_gpu_json_proc(struct jw *w, const struct session *ses, pid_t pid)
{
	const struct gpu_proc *p = gpu_proc_find(&ses->gpu, pid);
	static const struct tb_api_stat none[TB_MAX_APIS];

	jw_name(w, "gpu");
	jw_object(w);
	json_apis(w, p ? p->stat : none);
	jw_name(w, "nccl_comms");
	jw_array(w);
	for (int c = 0; p && c < p->ncomms; c++)
		json_comm(w, &p->comms[c]);
	jw_end_array(w);
	jw_end_object(w);
}
