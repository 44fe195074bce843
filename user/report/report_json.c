// SPDX-License-Identifier: BSD-3-Clause
/* The --format json document; its contract is docs/json.md: add keys only. */
#include <string.h>
#include "diagnosis.h"
#include "report.h"
#include "sections.h"

/* Totals (unsigned) as report_json_times writes deltas. */
static void json_times(struct jw *w, const char *name, const uint64_t c[TB_NCAT])
{
	int64_t s[TB_NCAT];

	for (int i = 0; i < TB_NCAT; i++)
		s[i] = (int64_t)c[i];
	report_json_times(w, name, s);
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

static void json_thread(struct jw *w, const struct job *job,
			const struct thread_rec *t, uint64_t now)
{
	jw_object(w);
	jw_int_field(w, "tid", t->tid);
	jw_string_field(w, "comm", t->comm);
	json_times(w, "time_s", t->own);
	json_times(w, "critical_path_s", t->cp);
	jw_float_field(w, "start_s", rel_s(job, t->start_ns), 6);
	jw_float_field(w, "lifetime_s", thread_lifetime(t, now) / 1e9, 9);
	jw_uint_field(w, "io_bytes_read", t->io_rbytes);
	jw_uint_field(w, "context_switches", t->nswitch);
	if (t->folded)
		jw_int_field(w, "folded", t->folded);
	jw_end_object(w);
}

static void json_process(struct jw *w, const struct session *ses,
			 const struct proc_rec *p, uint64_t now)
{
	const struct job *job = &ses->job;
	uint64_t tot[TB_NCAT], end = proc_end(p);

	proc_totals(p, tot);
	jw_object(w);
	jw_int_field(w, "pid", p->pid);
	jw_int_field(w, "ppid", p->ppid);
	jw_string_field(w, "comm", p->comm);
	jw_string_field(w, "role", role_name(p->role));
	jw_float_field(w, "start_s", rel_s(job, p->start_ns), 6);
	if (end)
		jw_float_field(w, "end_s", rel_s(job, end), 6);
	else
		jw_null_field(w, "end_s");
	json_times(w, "time_s", tot);
	/* Folded processes' calls are in the totals, not under any one of them. */
	report_gpu_json_proc(w, ses, p->folded ? -1 : p->pid);
	if (p->folded)
		jw_int_field(w, "folded", p->folded);
	if (ses_phases(ses))
		report_phases_json_proc(w, ses, p);
	jw_name(w, "threads");
	jw_array(w);
	for (int j = 0; j < p->nthreads; j++)
		if (!p->folded || p->threads[j].folded)	/* an aggregate's empty half: none */
			json_thread(w, job, &p->threads[j], now);
	jw_end_array(w);
	jw_end_object(w);
}

static void json_headline(struct jw *w, const struct job *job)
{
	uint64_t hl[TB_NCAT];
	double pct[TB_NROLLUP];

	job_headline(job, hl);
	rollup_pct(hl, pct);
	jw_name(w, "headline");
	jw_object(w);
	json_times(w, "time_s", hl);
	jw_name(w, "rollup_pct");
	jw_object(w);
	for (int r = 0; r < TB_NROLLUP; r++)
		jw_float_field(w, tb_rollup_names[r], pct[r], 3);
	jw_end_object(w);
	jw_end_object(w);
}

static void json_counters(struct jw *w, const struct run_counters *c, const struct gpu *g)
{
	jw_name(w, "counters");
	jw_object(w);
	jw_uint_field(w, "events_lost", c->bpf.events_lost);
	jw_uint_field(w, "io_bytes_read", c->io_rbytes);
	jw_uint_field(w, "io_bytes_written", c->io_wbytes);
	jw_uint_field(w, "context_switches", c->switches);
	jw_uint_field(w, "threads_untraced", c->bpf.slots_exhausted + c->bpf.storage_failed);
	jw_uint_field(w, "sched_events_missed", c->bpf.sched_missed);
	jw_uint_field(w, "gpu_stats_full", c->bpf.api_stats_full);
	jw_uint_field(w, "gpu_probe_preempted", c->bpf.api_preempted);
	jw_uint_field(w, "nccl_comms_not_listed", g->comms_dropped);
	jw_uint_field(w, "states_lost", c->bpf.states_lost);
	jw_end_object(w);
}

void report_json(FILE *f, const struct session *ses,
		 const struct run_counters *c, uint64_t now)
{
	const struct job *job = &ses->job;
	struct jw w;

	jw_init(&w, f);
	jw_object(&w);
	jw_string_field(&w, "tool", "trainbpf");
	jw_string_field(&w, "version", TB_VERSION);
	jw_name(&w, "window");
	jw_object(&w);
	jw_float_field(&w, "start_unix_s", job->window_start_unix, 6);
	jw_float_field(&w, "duration_s", (now - job->window_start_ns) / 1e9, 6);
	jw_end_object(&w);
	report_stall_json(&w, ses);
	jw_name(&w, "categories");
	jw_array(&w);
	for (int i = 0; i < TB_NCAT; i++)
		jw_string(&w, tb_cat_names[i]);
	jw_end_array(&w);
	jw_name(&w, "processes");
	jw_array(&w);
	for (int i = 0; i < job->nprocs; i++)
		json_process(&w, ses, &job->procs[i], now);
	jw_end_array(&w);
	json_headline(&w, job);
	if (ses_phases(ses))
		report_phases_json(&w, ses, c);
	report_functions_json(&w, ses);
	report_epochs_json(&w, ses);
	report_diagnosis_json(&w, ses, now);
	report_gpu_json(&w, ses, now);
	report_gpu_util_json(&w, ses, now);
	json_counters(&w, c, &ses->gpu);
	jw_end_object(&w);
	fputc('\n', f);
}
