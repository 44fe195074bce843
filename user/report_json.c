// SPDX-License-Identifier: BSD-3-Clause
/* The --format json document; its contract is docs/json.md: add keys only. */
#include <string.h>
#include "diagnosis.h"
#include "report.h"

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = *s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\u%04x", ch);	/* comm is bytes, not UTF-8 */
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_times(FILE *f, const uint64_t c[TB_NCAT])
{
	fputc('{', f);
	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, "%s\"%s\":%.9f", i ? "," : "", tb_cat_names[i], c[i] / 1e9);
	fputc('}', f);
}

static double rel_s(const struct job *job, uint64_t ns)
{
	return ns > job->window_start_ns ? (ns - job->window_start_ns) / 1e9 : 0.0;
}

static uint64_t proc_end(const struct proc_rec *p)
{
	uint64_t end = p->end_ns;

	if (end || job_proc_alive(p))
		return end;
	for (int i = 0; i < p->nthreads; i++)
		if (p->threads[i].end_ns > end)
			end = p->threads[i].end_ns;
	return end;
}

static void json_thread(FILE *f, const struct job *job,
			const struct thread_rec *t, uint64_t now)
{
	fprintf(f, "{\"tid\":%d,\"comm\":", t->tid);
	json_str(f, t->comm);
	fprintf(f, ",\"time_s\":");
	json_times(f, t->own);
	fprintf(f, ",\"critical_path_s\":");
	json_times(f, t->cp);
	fprintf(f, ",\"start_s\":%.6f,\"lifetime_s\":%.9f,\"io_bytes_read\":%llu,"
		"\"context_switches\":%llu}",
		rel_s(job, t->start_ns), thread_lifetime(t, now) / 1e9,
		(unsigned long long)t->io_rbytes, (unsigned long long)t->nswitch);
}

static void json_process(FILE *f, const struct job *job,
			 const struct proc_rec *p, uint64_t now)
{
	uint64_t tot[TB_NCAT], end = proc_end(p);

	proc_totals(p, tot);
	fprintf(f, "{\"pid\":%d,\"ppid\":%d,\"comm\":", p->pid, p->ppid);
	json_str(f, p->comm);
	fprintf(f, ",\"role\":\"%s\",\"start_s\":%.6f,\"end_s\":", role_name(p->role),
		rel_s(job, p->start_ns));
	if (end)
		fprintf(f, "%.6f", rel_s(job, end));
	else
		fprintf(f, "null");
	fprintf(f, ",\"time_s\":");
	json_times(f, tot);
	fputc(',', f);
	report_gpu_json_proc(f, job, p->pid);
	fprintf(f, ",\"threads\":[");
	for (int j = 0; j < p->nthreads; j++) {
		if (j)
			fputc(',', f);
		json_thread(f, job, &p->threads[j], now);
	}
	fprintf(f, "]}");
}

void report_json(FILE *f, const struct job *job,
		 const struct report_counters *c, uint64_t now)
{
	uint64_t hl[TB_NCAT];
	double pct[TB_NROLLUP];

	fprintf(f, "{\"tool\":\"trainbpf\",\"version\":\"%s\",", TB_VERSION);
	fprintf(f, "\"window\":{\"start_unix_s\":%.6f,\"duration_s\":%.6f},",
		job->window_start_unix, (now - job->window_start_ns) / 1e9);
	fprintf(f, "\"categories\":[");
	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, "%s\"%s\"", i ? "," : "", tb_cat_names[i]);
	fprintf(f, "],\"processes\":[");
	for (int i = 0; i < job->nprocs; i++) {
		if (i)
			fputc(',', f);
		json_process(f, job, &job->procs[i], now);
	}
	job_headline(job, hl);
	rollup_pct(hl, pct);
	fprintf(f, "],\"headline\":{\"time_s\":");
	json_times(f, hl);
	fprintf(f, ",\"rollup_pct\":{");
	for (int r = 0; r < TB_NROLLUP; r++)
		fprintf(f, "%s\"%s\":%.3f", r ? "," : "", tb_rollup_names[r], pct[r]);
	fprintf(f, "}},");
	if (job->epochs) {
		report_epochs_json(f, job, job->epochs);
		fputc(',', f);
	}
	if (job->diag) {
		report_diagnosis_json(f, job, now);
		fputc(',', f);
	}
	report_gpu_json(f, job, now);
	fprintf(f, ",\"counters\":{\"events_lost\":%llu,\"io_bytes_read\":%llu,"
		"\"io_bytes_written\":%llu,\"context_switches\":%llu,"
		"\"threads_untraced\":%llu,\"sched_events_missed\":%llu,"
		"\"gpu_stats_full\":%llu,\"gpu_probe_preempted\":%llu,"
		"\"states_lost\":%llu}}\n",
		(unsigned long long)c->bpf.events_lost,
		(unsigned long long)c->io_rbytes, (unsigned long long)c->io_wbytes,
		(unsigned long long)c->switches,
		(unsigned long long)(c->bpf.slots_exhausted + c->bpf.storage_failed),
		(unsigned long long)c->bpf.sched_missed,
		(unsigned long long)c->bpf.api_stats_full,
		(unsigned long long)c->bpf.api_preempted,
		(unsigned long long)c->bpf.states_lost);
}
