// SPDX-License-Identifier: BSD-3-Clause
/*
 * --format csv: one row per process (its threads summed), then one per
 * thread, seconds per category: what a spreadsheet or pandas wants. Then,
 * for each thread that ran training phases, one row per phase: its
 * critical path while in the phase (the phase table's "made of"). With
 * --functions, one row per named section under a phase (the loop's own
 * call in comm, as the phase table names it).
 */
#include "phases.h"
#include "pysections.h"
#include "report.h"
#include "sections.h"

/*
 * RFC 4180: quoted, quotes doubled; comm is bytes the job chose. CR and LF
 * stay (a quoted field may hold them); the other control characters, which
 * no field may hold, become '?', as ps shows them.
 */
static void csv_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"')
			fputc('"', f);
		if ((*p < 0x20 && *p != '\n' && *p != '\r') || *p == 0x7f)
			fputc('?', f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/*
 * The times, and the phase column (empty but on phase rows); the GPU's
 * columns, when the run has them, empty (report_gpu_util_csv_rows).
 */
static void csv_times(FILE *f, uint64_t total, const uint64_t c[TB_NCAT], const char *phase,
		      bool gpu)
{
	fprintf(f, ",%.9f", total / 1e9);
	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, ",%.9f", c[i] / 1e9);
	fprintf(f, ",%s%s\n", phase, gpu ? ",,,,," : "");
}

/* A thread's phase rows, if it ran any phase (not all its time is other). */
static void phase_rows(FILE *f, const struct session *ses, const struct proc_rec *p,
		       const struct thread_rec *t)
{
	const struct ph_thread *pt = ses_phase_thread(ses, t->tid);
	uint64_t rows[PH_NSHOWN][TB_NCAT], in_phases = 0;

	phases_fold_ends(t->ph, t->ends, pt && pt->sp.in_val, rows);
	for (int ph = 0; ph < PH_OTHER; ph++)
		in_phases += sum_cats(rows[ph]);
	if (!in_phases)
		return;
	for (int k = 0; k < PH_NSHOWN; k++) {
		int ph = ph_order[k];

		fprintf(f, "phase,%d,%d,", p->pid, t->tid);
		csv_str(f, t->comm);
		fprintf(f, ",%s", role_name(p->role));
		csv_times(f, sum_cats(rows[ph]), rows[ph], ph_names[ph],
			  report_gpu_util_csv_on(ses));
	}
}

struct csv_sec {
	FILE *f;
	const char *phase;
	bool gpu;
};

static void section_row(void *arg, const char *label, double ms, const uint64_t cat[TB_NCAT],
			int rest)
{
	const struct csv_sec *x = arg;

	fputs("section,,,", x->f);
	csv_str(x->f, label);
	fprintf(x->f, ",%s", role_name(TB_ROLE_TRAINER));
	csv_times(x->f, (uint64_t)(ms * 1e6), cat, x->phase, x->gpu);
}

/* The trainers' phases' named sections (--functions), as the phase table has them. */
static void section_rows(FILE *f, const struct session *ses, bool gpu)
{
	struct py_sections secs[PH_NSHOWN];
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum sum;
	double table = 0;

	if (!ses_py(ses) || !ses_phases(ses))
		return;
	phases_job(ses_phases(ses), &ses->job, rows, &sum);
	for (int p = 0; p < PH_NSHOWN; p++)
		table += sum.wall_ms[p];
	if (!sum.steps.steps || table <= 0 || pysections_make(ses_py(ses), secs))
		return;
	for (int k = 0; k < PH_NSHOWN; k++) {
		struct csv_sec x = { f, ph_names[ph_order[k]], gpu };

		report_sections_each(ses_py(ses), &secs[ph_order[k]], ph_order[k],
				     sum.wall_ms[ph_order[k]], table, section_row, &x);
	}
	pysections_free(secs);
}

void report_csv(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	uint64_t tot[TB_NCAT];
	bool gpu = report_gpu_util_csv_on(ses);

	/* Folded rows (job.h): pid (and tid) 0, comm "N exited". */
	fprintf(f, "kind,pid,tid,comm,role,time_s");
	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, ",%s_s", tb_cat_names[i]);
	fprintf(f, ",phase%s\n",
		gpu ? ",gpu,gpu_util_pct,gpu_mem_peak_bytes,gpu_energy_j,gpu_power_w" : "");
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		char name[32];

		report_proc_name(name, sizeof(name), p);
		proc_totals(p, tot);
		fprintf(f, "process,%d,,", p->pid);
		csv_str(f, name);
		fprintf(f, ",%s", role_name(p->role));
		csv_times(f, sum_cats(tot), tot, "", gpu);
	}
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads; j++) {
			const struct thread_rec *t = &p->threads[j];
			char name[32];

			if (p->folded && !t->folded)
				continue;
			if (t->folded)
				snprintf(name, sizeof(name), "%d exited", t->folded);
			else
				snprintf(name, sizeof(name), "%s", t->comm);
			fprintf(f, "thread,%d,%d,", p->pid, t->tid);
			csv_str(f, name);
			fprintf(f, ",%s", role_name(p->role));
			csv_times(f, sum_cats(t->own), t->own, "", gpu);
		}
	}
	for (int i = 0; ses_phases(ses) && i < job->nprocs; i++)
		for (int j = 0; j < job->procs[i].nthreads; j++)
			phase_rows(f, ses, &job->procs[i], &job->procs[i].threads[j]);
	section_rows(f, ses, gpu);
	/* The whole window: its last reading is the report's (UINT64_MAX: all of them). */
	report_gpu_util_csv_rows(f, ses, UINT64_MAX, csv_str);
}
