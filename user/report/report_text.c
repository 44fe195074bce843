// SPDX-License-Identifier: BSD-3-Clause
/* The final text report: headline, diagnosis, epochs, tables, CUDA/NCCL, counters. */
#include <string.h>
#include "diagnosis.h"
#include "report.h"
#include "sections.h"

static void headline_block(FILE *f, const struct job *job)
{
	uint64_t hl[TB_NCAT], total;
	double pct[TB_NCAT];
	int ntr = job_headline(job, hl);

	total = sum_cats(hl);
	for (int c = 0; c < TB_NCAT; c++)
		pct[c] = total ? 100.0 * hl[c] / total : 0.0;
	fprintf(f, "Headline: critical path of %d trainer main thread%s (%.2f s)\n",
		ntr, ntr == 1 ? "" : "s", total / 1e9);
	report_rollup_rows(f, pct, true);
	fprintf(f, "  (host view: GPU kernels are not seen; gpu_wait = host blocked on the GPU)\n\n");
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
	char comm[ESC_LEN(TB_COMM_LEN)];

	fprintf(f, "Processes (%% of each process's thread time)\n");
	fprintf(f, "%7s %-7s %-15s %4s %8s", "PID", "ROLE", "COMM", "THR", "TIME_S");
	report_cat_head(f);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		proc_totals(p, tot);
		fprintf(f, "%7d %-7s %-15.15s %4d %8.2f", p->pid, role_name(p->role),
			report_esc(comm, sizeof(comm), p->comm), p->nthreads, sum_cats(tot) / 1e9);
		report_pct_cells(f, tot);
	}
	fputc('\n', f);
}

static void thread_table(FILE *f, const struct job *job, uint64_t now)
{
	char comm[ESC_LEN(TB_COMM_LEN)];

	fprintf(f, "Threads (%% of each thread's lifetime)\n");
	fprintf(f, "%7s %7s %-15s %8s", "PID", "TID", "COMM", "TIME_S");
	report_cat_head(f);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads; j++) {
			const struct thread_rec *t = &p->threads[j];

			fprintf(f, "%7d %7d %-15.15s %8.2f", p->pid, t->tid,
				report_esc(comm, sizeof(comm), t->comm),
				thread_lifetime(t, now) / 1e9);
			report_pct_cells(f, t->own);
		}
	}
	fputc('\n', f);
}

void report_text(FILE *f, const struct job *job,
		 const struct run_counters *c, uint64_t now)
{
	char rb[32], wb[32];
	int nthreads = 0;
	uint64_t all = 0;

	for (int i = 0; i < job->nprocs; i++) {
		nthreads += job->procs[i].nthreads;
		all += proc_time(&job->procs[i]);
	}
	fprintf(f, "trainbpf %s: %.2f s traced, %d processes, %d threads (%.2f thread-s)\n\n",
		TB_VERSION, (now - job->window_start_ns) / 1e9, job->nprocs,
		nthreads, all / 1e9);
	headline_block(f, job);
	if (job->phases)
		report_phases_text(f, job, c);
	if (job->diag)
		report_diagnosis_text(f, job, now);
	if (job->epochs)
		report_epochs_text(f, job, job->epochs);
	process_table(f, job);
	thread_table(f, job, now);
	report_gpu_text(f, job, now);
	fmt_bytes(rb, sizeof(rb), c->io_rbytes);
	fmt_bytes(wb, sizeof(wb), c->io_wbytes);
	fprintf(f, "Counters: storage read %s, written %s; %llu context switches; "
		"%llu events lost\n", rb, wb, (unsigned long long)c->switches,
		(unsigned long long)c->bpf.events_lost);
}
