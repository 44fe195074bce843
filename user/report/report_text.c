// SPDX-License-Identifier: BSD-3-Clause
/* The final text report: headline, diagnosis, epochs, tables, CUDA/NCCL, counters. */
#include <string.h>
#include "diagnosis.h"
#include "report.h"
#include "sections.h"

static void headline_block(FILE *f, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	uint64_t hl[TB_NCAT], total;
	double pct[TB_NCAT];
	int ntr = job_headline(job, hl);

	total = sum_cats(hl);
	for (int c = 0; c < TB_NCAT; c++)
		pct[c] = total ? 100.0 * hl[c] / total : 0.0;
	fprintf(f, "Headline: critical path of %d trainer thread%s (%.2f s)\n",
		ntr, ntr == 1 ? "" : "s", total / 1e9);
	report_rollup_rows(f, pct, true);
	fprintf(f, "  (host view: GPU kernels are not seen; gpu_wait = host blocked on the GPU)\n");
	report_gpu_util_headline(f, ses, now);	/* what the GPUs did, as NVML says */
	fputc('\n', f);
}

static uint64_t proc_time(const struct proc_rec *p)
{
	uint64_t tot[TB_NCAT];

	proc_totals(p, tot);
	return sum_cats(tot);
}

static void process_table(FILE *f, const struct job *job)
{
	uint64_t tot[TB_NCAT];

	fprintf(f, "Processes (%% of each process's thread time)\n");
	fprintf(f, "%7s %-7s %-15s %4s %8s", "PID", "ROLE", "COMM", "THR", "TIME_S");
	report_cat_head(f);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		proc_totals(p, tot);
		report_proc_head(f, p, proc_nthreads(p));
		fprintf(f, " %8.2f", sum_cats(tot) / 1e9);
		report_pct_cells(f, tot);
	}
	fputc('\n', f);
}

/* What a "-" row is, once, under the tables that have one. */
static void folded_note(FILE *f, const struct job *job)
{
	int procs = 0, threads = 0;

	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		procs += p->folded;
		for (int j = 0; j < p->nthreads && !p->folded; j++)
			threads += p->threads[j].folded;
	}
	if (!procs && !threads)
		return;
	fprintf(f, "(\"-\": %d processes and %d more threads that exited over %.0f s before\n"
		" the end, summed per parent and role; the JSON report names the parent)\n\n",
		procs, threads, JOB_FOLD_AGE_NS / 1e9);
}

static void thread_table(FILE *f, const struct job *job, uint64_t now)
{
	fprintf(f, "Threads (%% of each thread's lifetime)\n");
	fprintf(f, "%7s %7s %-15s %8s", "PID", "TID", "COMM", "TIME_S");
	report_cat_head(f);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads; j++) {
			const struct thread_rec *t = &p->threads[j];
			char pid[16], tid[16], name[32];

			if (p->folded && !t->folded)
				continue;	/* an aggregate's empty half */
			snprintf(pid, sizeof(pid), p->folded ? "-" : "%d", p->pid);
			snprintf(tid, sizeof(tid), t->folded ? "-" : "%d", t->tid);
			if (t->folded)
				snprintf(name, sizeof(name), "%d exited", t->folded);
			else
				report_esc(name, sizeof(name), t->comm);
			fprintf(f, "%7s %7s %-15.15s %8.2f", pid, tid, name,
				thread_lifetime(t, now) / 1e9);
			report_pct_cells(f, t->own);
		}
	}
	fputc('\n', f);
}

static void title(FILE *f, const struct job *job, uint64_t now)
{
	int nprocs = 0, nthreads = 0;
	uint64_t all = 0;

	for (int i = 0; i < job->nprocs; i++) {
		nprocs += proc_count(&job->procs[i]);
		nthreads += proc_nthreads(&job->procs[i]);
		all += proc_time(&job->procs[i]);
	}
	fprintf(f, "trainbpf %s: %.2f s traced, %d processes, %d threads (%.2f thread-s)\n",
		TB_VERSION, (now - job->window_start_ns) / 1e9, nprocs,
		nthreads, all / 1e9);
}

static void counters_line(FILE *f, const struct run_counters *c)
{
	char rb[32], wb[32];

	fmt_bytes(rb, sizeof(rb), c->io_rbytes);
	fmt_bytes(wb, sizeof(wb), c->io_wbytes);
	fprintf(f, "Counters: storage read %s, written %s; %llu context switches; "
		"%llu events lost\n", rb, wb, (unsigned long long)c->switches,
		(unsigned long long)c->bpf.events_lost);
}

void report_text(FILE *f, const struct session *ses,
		 const struct run_counters *c, uint64_t now)
{
	const struct job *job = &ses->job;

	report_stall_text(f, ses);
	title(f, job, now);
	fputc('\n', f);
	headline_block(f, ses, now);
	if (ses_phases(ses))
		report_phases_text(f, ses, c);
	report_functions_text(f, ses);
	report_diagnosis_text(f, ses, now);
	report_epochs_text(f, ses);
	process_table(f, job);
	thread_table(f, job, now);
	folded_note(f, job);
	report_gpu_text(f, ses, now);
	report_gpu_util_text(f, ses, now);
	counters_line(f, c);
}

/* The findings one line each, ranked by cost: their evidence and advice are --detail's. */
static void findings_lines(FILE *f, const struct dg_finding *fs, int n)
{
	if (n < 0)
		return;
	if (!n) {
		fprintf(f, "Findings: none (no bottleneck found)\n\n");
		return;
	}
	fprintf(f, "Findings (by the share of time they cost, largest first; severity 0-1)\n");
	for (int i = 0; i < n; i++)
		fprintf(f, "  [%.2f] %s\n", fs[i].severity, fs[i].summary);
	fputc('\n', f);
}

void report_summary(FILE *f, const struct session *ses, const struct run_counters *c,
		    uint64_t now)
{
	const struct job *job = &ses->job;
	struct dg_finding fs[DG_MAX_FINDINGS];
	int n = report_run_findings(ses, now, fs);
	struct report_verdict v;

	report_stall_text(f, ses);
	title(f, job, now);
	report_verdict(ses, fs, n, &v);
	report_verdict_text(f, &v);
	fputc('\n', f);
	headline_block(f, ses, now);
	if (ses_phases(ses))
		report_phases_text(f, ses, c);
	report_functions_text(f, ses);
	findings_lines(f, fs, n);
	report_epochs_lines(f, ses);
	counters_line(f, c);
	fprintf(f, "(--detail: the findings' evidence and advice, epoch blocks, processes and "
		"threads, CUDA/NCCL, the GPUs)\n");
}
