// SPDX-License-Identifier: BSD-3-Clause
/*
 * The phase table: per training phase of the trainers' main threads, its
 * share of the steps' wall time, ms per step, and what it was made of (its
 * critical-path categories), as in-process profilers print it.
 */
#include <string.h>
#include "epochs.h"
#include "gpu.h"
#include "phases.h"
#include "pysections.h"
#include "sections.h"

static const char *source(const struct phases *ph)
{
	return ph_source_names[ph->source];
}

static const char *const step_source_text[] = {
	[PH_STEPS_NONE] = "nothing", [PH_STEPS_FETCH] = "DataLoader fetches",
	[PH_STEPS_BACKWARD] = "one backward to the next",
	[PH_STEPS_MIXED] = "DataLoader fetches and backwards",
};
static const char *const step_source_key[] = {
	[PH_STEPS_NONE] = "none", [PH_STEPS_FETCH] = "fetch",
	[PH_STEPS_BACKWARD] = "backward", [PH_STEPS_MIXED] = "mixed",
};

static uint64_t row_total(const uint64_t row[TB_NCAT])
{
	return sum_cats(row);
}

/* "data_wait 80% cpu 15% io 5%": the row's three largest categories. */
static void made_of(FILE *f, const uint64_t row[TB_NCAT])
{
	uint64_t total = row_total(row);
	int top[3], n = report_top_cats(row, 3, false, top);

	if (!total)
		fputc('-', f);
	for (int k = 0; k < n; k++)
		fprintf(f, "%s%s %.0f%%", k ? " " : "", tb_cat_names[top[k]],
			100.0 * row[top[k]] / total);
}

/*
 * "  made of: data data_wait 69% cpu 14%, fwd cpu 75% runqueue 24%, ...":
 * each phase of at least 5% of wall with its two largest categories (1% and
 * up) on the critical path, wrapped at 80 columns under lead.
 */
#define MADE_OF_MIN 0.05
#define MADE_OF_COLS 80

static int made_of_item(char *buf, size_t len, int p, const uint64_t row[TB_NCAT])
{
	uint64_t total = row_total(row);
	int n = snprintf(buf, len, "%s", ph_short[p]);
	int top[2], ntop = report_top_cats(row, 2, true, top);

	for (int k = 0; k < ntop; k++)
		n += snprintf(buf + n, len - n, " %s %.0f%%", tb_cat_names[top[k]],
			      100.0 * row[top[k]] / total);
	return n;
}

void report_phases_made_of(FILE *f, const char *lead, const double wall[PH_NSHOWN],
			   const uint64_t cp[PH_NSHOWN][TB_NCAT])
{
	double all = 0;
	int col = 0, indent = (int)strlen(lead);
	char item[96];

	for (int p = 0; p < PH_NSHOWN; p++)
		all += wall[p];
	for (int p = 0; p < PH_NSHOWN && all > 0; p++) {
		int n;

		if (wall[p] < MADE_OF_MIN * all || !row_total(cp[p]))
			continue;
		n = made_of_item(item, sizeof(item), p, cp[p]);
		if (!col) {
			col = fprintf(f, "%s%s", lead, item);
		} else if (col + 2 + n + 1 > MADE_OF_COLS) {	/* and its comma */
			col = fprintf(f, ",\n%*s%s", indent, "", item) - 2;
		} else {
			col += fprintf(f, ", %s", item);
		}
	}
	if (col)
		fputc('\n', f);
}

static double wall_total(const struct ph_sum *sum)
{
	double t = 0;

	for (int p = 0; p < PH_NSHOWN; p++)
		t += sum->wall_ms[p];
	return t;
}

/*
 * Under data, its DataLoader workers' start-up (iter(loader) to the first
 * batch, docs/phases.md), where there was any: what persistent workers save.
 */
static void text_startup(FILE *f, const uint64_t cp[TB_NCAT], const struct ph_sum *sum,
			 double wall)
{
	if (sum->startup_ms <= 0)
		return;
	fprintf(f, "  %-13s %5.1f%% %8.1f %7s %7s %7s  of which worker start-up: ", "",
		100.0 * sum->startup_ms / wall, sum->startup_ms / sum->steps.steps, "", "", "");
	made_of(f, cp);
	fputc('\n', f);
}

/* The rows; how many named sections were under them (--functions). */
static int text_rows(FILE *f, uint64_t rows[PH_NSHOWN][TB_NCAT], const uint64_t startup[TB_NCAT],
		     const struct ph_sum *sum, const struct pystacks *m,
		     const struct py_sections *secs)
{
	const struct ph_stat *st = &sum->steps;
	double wall = wall_total(sum);
	int named = 0;

	fprintf(f, "  %-13s %6s %8s %7s %7s %7s  %s\n", "PHASE", "SHARE", "MS/STEP", "MIN",
		"MAX", "STD", "MADE OF (critical path)");
	for (int k = 0; k < PH_NSHOWN; k++) {
		int p = ph_order[k];

		fprintf(f, "  %-13s %5.1f%% ", ph_names[p],
			wall > 0 ? 100.0 * sum->wall_ms[p] / wall : 0.0);
		if (p < PH_NLOOP)
			fprintf(f, "%8.1f ", sum->wall_ms[p] / st->steps);
		else
			fprintf(f, "%8s ", "-");	/* before the first step, after the last */
		if (ph_stat_defined(st, p))
			fprintf(f, "%7.1f %7.1f %7.1f  ", st->min_ms[p], st->max_ms[p],
				ph_stat_std(st, p));
		else
			fprintf(f, "%7s %7s %7s  ", "-", "-", "-");
		made_of(f, rows[p]);
		fputc('\n', f);
		if (p == PH_DATA)
			text_startup(f, startup, sum, wall);
		if (secs)
			named += report_sections_text(f, m, &secs[p], p, sum->wall_ms[p], wall,
						      st->steps);
	}
	return named;
}

/* The head of a table of ms per step in each phase, a row per `by`. */
static void side_head(FILE *f, const char *by, const char *key)
{
	fprintf(f, "  by %s (ms/step):\n  %7s %6s", by, key, "STEPS");
	for (int p = 0; p < PH_NLOOP; p++)
		fprintf(f, " %8s", ph_short[p]);
	fputc('\n', f);
}

/* Each trainer's phases of 5% and up, what they were made of. */
static void rank_made_of(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	char lead[32];

	fprintf(f, "  by trainer, made of (critical path; phases of 5%% and up):\n");
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *pr = &job->procs[i];
		const struct thread_rec *t = job_trainer_thread(pr);
		const struct ph_thread *pt;
		uint64_t rows[PH_NSHOWN][TB_NCAT];
		struct ph_sum s = { 0 };

		if (pr->role != TB_ROLE_TRAINER || pr->folded || !t ||
		    !(pt = ses_phase_thread(ses, t->tid)) || !pt->steps.steps)
			continue;
		phases_thread_sum(pt, &s);
		phases_fold_ends(t->ph, t->ends, pt->sp.in_val, rows);
		snprintf(lead, sizeof(lead), "  %7d  ", pr->pid);
		report_phases_made_of(f, lead, s.wall_ms, rows);
	}
}

/*
 * With more than one trainer: each one's ms per step in each phase, side
 * by side, so that a rank slow in one phase (its data, its backward) shows
 * which. Ranks that ran no training step are left out.
 */
static void rank_rows(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;

	side_head(f, "trainer", "PID");
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *pr = &job->procs[i];
		const struct thread_rec *t = job_trainer_thread(pr);
		const struct ph_thread *pt;
		struct ph_sum s = { 0 };

		if (pr->role != TB_ROLE_TRAINER || pr->folded || !t ||
		    !(pt = ses_phase_thread(ses, t->tid)) || !pt->steps.steps)
			continue;
		phases_thread_sum(pt, &s);
		fprintf(f, "  %7d %6d", pr->pid, s.steps.steps);
		for (int p = 0; p < PH_NLOOP; p++)
			fprintf(f, " %8.1f", s.wall_ms[p] / s.steps.steps);
		fputc('\n', f);
	}
	rank_made_of(f, ses);
}

static bool epoch_has_rows(const struct epoch *e)
{
	return epoch_phase_ns(e) && e->steps.count;
}

/*
 * With more than one epoch: each one's ms per step in each phase (the
 * ranks' mean, over the epoch's steps: its validation and end spread over
 * them), so that an epoch that slowed shows in which phase.
 */
static void epoch_rows(FILE *f, const struct session *ses, int nranks)
{
	enum ep_source s = epochs_source(&ses->ep);
	const struct ep_stream *st = s == EP_NSRC ? NULL : &ses->ep.src[s];
	int n = 0;
	char label[32];

	for (int i = 0; st && i < st->n; i++)
		n += epoch_has_rows(&st->list[i]);
	if (n < 2 || nranks < 1)
		return;
	side_head(f, "epoch", "EPOCH");
	for (int i = 0; i < st->n; i++) {
		const struct epoch *e = &st->list[i];
		double per = (double)nranks * e->steps.count * 1e6;

		if (!epoch_has_rows(e))
			continue;
		if (e->last != e->label)
			snprintf(label, sizeof(label), "%ld-%ld", e->label, e->last);
		else
			snprintf(label, sizeof(label), "%ld", e->label);
		fprintf(f, "  %7s %6d", label, e->steps.count);
		for (int p = 0; p < PH_NLOOP; p++)
			fprintf(f, " %8.1f", e->ph[p] / per);
		fputc('\n', f);
	}
}

/* Micro-batches per optimizer step: "4", or "3.75" where they varied. */
static void per_step(char *buf, size_t len, const struct ph_sum *sum)
{
	double k = (double)sum->micro_in / sum->steps.steps;

	if (sum->micro_in % sum->steps.steps)
		snprintf(buf, len, "%.2f", k);
	else
		snprintf(buf, len, "%d", sum->micro_in / sum->steps.steps);
}

/*
 * "120 training steps", or with gradient accumulation "30 optimizer steps
 * of 120 micro-batches (4 per step)": the steps are optimizer steps where
 * the optimizer was seen, the same ones the Steps line counts.
 */
static void text_count(FILE *f, const struct ph_sum *sum, int n)
{
	char k[16];

	if (sum->micro == sum->steps.steps)
		fprintf(f, "%d training steps", sum->steps.steps);
	else
		fprintf(f, "%d optimizer steps", sum->steps.steps);
	/* Ranks step together: the count a user knows is one rank's (the Steps line's). */
	if (n > 1 && sum->each_min == sum->each_max)
		fprintf(f, " (%d each)", sum->each_max);
	else if (n > 1)
		fprintf(f, " (%d-%d each)", sum->each_min, sum->each_max);
	if (sum->micro == sum->steps.steps)
		return;
	per_step(k, sizeof(k), sum);
	fprintf(f, " of %d micro-batches (%s per step)", sum->micro, k);
}

void report_phases_text(FILE *f, const struct session *ses, const struct run_counters *c)
{
	const struct job *job = &ses->job;
	const struct phases *ph = ses_phases(ses);
	uint64_t rows[PH_NSHOWN][TB_NCAT], startup[TB_NCAT];
	struct py_sections secs[PH_NSHOWN];
	bool secs_ok;
	struct ph_sum sum;
	const char *src = source(ph);
	int n = phases_job(ph, job, rows, &sum), named;
	const char *unit = sum.micro == sum.steps.steps ? "training step" : "optimizer step";

	phases_job_startup(ph, job, startup);
	if (!strcmp(src, "none")) {
		fprintf(f, "Phases: no PyTorch library (libtorch_cpu) in the traced processes\n\n");
		return;
	}
	if (!sum.steps.steps) {
		fprintf(f, "Phases: no training step (no backward) seen\n\n");
		return;
	}
	fprintf(f, "Phases (PyTorch's own brackets; %d trainer thread%s, ", n, n == 1 ? "" : "s");
	text_count(f, &sum, n);
	fprintf(f, " from %s, %.1f ms/step)\n", step_source_text[sum.step_source],
		sum.steps.step_ms / sum.steps.steps);
	if (strcmp(src, "brackets"))
		fprintf(f, "  (%s: data, forward and optimizer are in other)\n",
			!strcmp(src, "unnamed") ? "torch < 2.0 closes its brackets out of sight" :
			"no named bracket seen");
	else if (sum.step_source != PH_STEPS_FETCH)
		fprintf(f, "  (no DataLoader fetch%s: data is the wait for input before each "
			"forward, forward the rest up to the backward; the first step's in other)\n",
			sum.step_source == PH_STEPS_MIXED ? " on some threads" : "");
	secs_ok = ses_py(ses) && !pysections_make(ses_py(ses), secs);
	named = text_rows(f, rows, startup, &sum, ses_py(ses), secs_ok ? secs : NULL);
	fprintf(f, "  (share: of the trainer threads' lives, setup before the first phase and "
		"teardown after the last;\n   ms/step: per %s, validation and epoch ends "
		"spread over them; min/max/std: within %ss)\n", unit, unit);
	if (named)
		fprintf(f, "  (in NAME: the loop's own call the phase's time was in, from the Python "
			"stacks read, --functions)\n");
	if (secs_ok)
		pysections_free(secs);
	if (n > 1)
		rank_rows(f, ses);
	epoch_rows(f, ses, n);
	if (c->bpf.brackets_deep)
		fprintf(f, "  %llu brackets nested more than %d deep were not followed: their time "
			"is the enclosing bracket's\n", (unsigned long long)c->bpf.brackets_deep,
			TB_NBRACKET);
	if (ph->threads_over)
		fprintf(f, "  threads past the first %d that ran phases: their steps were not "
			"kept (%llu events)\n", PH_MAX_THREADS,
			(unsigned long long)ph->threads_over);
	fputc('\n', f);
}

static void json_row(struct jw *w, int p, uint64_t row[TB_NCAT], const struct ph_sum *sum,
		     const struct pystacks *m, const struct py_sections *secs)
{
	const struct ph_stat *st = &sum->steps;
	double wall = wall_total(sum);
	int64_t ns[TB_NCAT];

	for (int c = 0; c < TB_NCAT; c++)
		ns[c] = (int64_t)row[c];
	jw_object(w);
	jw_string_field(w, "phase", ph_names[p]);
	jw_float_field(w, "wall_s", sum->wall_ms[p] / 1e3, 6);
	jw_float_field(w, "share", wall > 0 ? sum->wall_ms[p] / wall : 0.0, 4);
	if (p < PH_NLOOP)
		jw_float_field(w, "ms_per_step", st->steps ? sum->wall_ms[p] / st->steps : 0.0, 4);
	else
		jw_null_field(w, "ms_per_step");	/* before the first step, after the last */
	if (ph_stat_defined(st, p)) {
		jw_float_field(w, "step_avg_ms", ph_stat_avg(st, p), 4);
		jw_float_field(w, "step_min_ms", st->min_ms[p], 4);
		jw_float_field(w, "step_max_ms", st->max_ms[p], 4);
		jw_float_field(w, "step_std_ms", ph_stat_std(st, p), 4);
	} else {
		jw_null_field(w, "step_avg_ms");
		jw_null_field(w, "step_min_ms");
		jw_null_field(w, "step_max_ms");
		jw_null_field(w, "step_std_ms");
	}
	report_json_times(w, "critical_path_s", ns);
	if (secs)
		report_sections_json(w, m, &secs[p], p, sum->wall_ms[p], wall, st->steps);
	jw_end_object(w);
}

/* Of data, the workers' start-up: its wall time, share, ms per step, critical path. */
static void json_startup(struct jw *w, const struct session *ses, const struct ph_sum *sum)
{
	const struct job *job = &ses->job;
	uint64_t cp[TB_NCAT];
	int64_t ns[TB_NCAT];
	double wall = wall_total(sum);

	phases_job_startup(ses_phases(ses), job, cp);
	for (int c = 0; c < TB_NCAT; c++)
		ns[c] = (int64_t)cp[c];
	jw_name(w, "worker_startup");
	jw_object(w);
	jw_float_field(w, "wall_s", sum->startup_ms / 1e3, 6);
	jw_float_field(w, "share", wall > 0 ? sum->startup_ms / wall : 0.0, 4);
	jw_float_field(w, "ms_per_step", sum->steps.steps ? sum->startup_ms / sum->steps.steps : 0.0,
		       4);
	report_json_times(w, "critical_path_s", ns);
	jw_end_object(w);
}

void report_phases_json(struct jw *w, const struct session *ses, const struct run_counters *c)
{
	const struct job *job = &ses->job;
	const struct phases *ph = ses_phases(ses);
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct py_sections secs[PH_NSHOWN];
	bool secs_ok;
	struct ph_sum sum;
	int n = phases_job(ph, job, rows, &sum);
	const char *src = source(ph);

	jw_name(w, "phases");
	jw_object(w);
	jw_string_field(w, "source", src);
	jw_uint_field(w, "deep_brackets", c->bpf.brackets_deep);
	jw_int_field(w, "threads", n);
	jw_uint_field(w, "threads_over_events", ph->threads_over);
	jw_int_field(w, "steps", sum.steps.steps);
	jw_int_field(w, "steps_per_trainer", sum.each_max);
	jw_int_field(w, "micro_batches", sum.micro);
	jw_string_field(w, "step_unit", sum.optim ? "optimizer" : "micro_batch");
	jw_string_field(w, "step_source", step_source_key[sum.step_source]);
	jw_float_field(w, "step_ms", sum.steps.steps ? sum.steps.step_ms / sum.steps.steps : 0.0, 4);
	jw_name(w, "list");
	jw_array(w);
	/* No libtorch: no rows of zeros that look like a measurement. */
	secs_ok = ses_py(ses) && !pysections_make(ses_py(ses), secs);
	for (int k = 0; k < PH_NSHOWN && strcmp(src, "none"); k++)
		json_row(w, ph_order[k], rows[ph_order[k]], &sum, ses_py(ses),
			 secs_ok ? secs : NULL);
	if (secs_ok)
		pysections_free(secs);
	jw_end_array(w);
	json_startup(w, ses, &sum);
	jw_end_object(w);
}

/*
 * A process whose main thread ran phases: its own steps, wall time per
 * phase and what each was made of (the rank's rows of the job's table).
 */
void report_phases_json_proc(struct jw *w, const struct session *ses, const struct proc_rec *p)
{
	const struct thread_rec *t = job_trainer_thread(p);
	const struct ph_thread *pt = t ? ses_phase_thread(ses, t->tid) : NULL;
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum sum = { 0 };

	if (!pt)
		return;
	phases_thread_sum(pt, &sum);
	phases_fold_ends(t->ph, t->ends, pt->sp.in_val, rows);
	jw_name(w, "phases");
	jw_object(w);
	jw_int_field(w, "steps", sum.steps.steps);
	jw_int_field(w, "micro_batches", sum.micro);
	jw_name(w, "wall_s");
	jw_object(w);
	for (int ph = 0; ph < PH_NSHOWN; ph++)
		jw_float_field(w, ph_names[ph], sum.wall_ms[ph] / 1e3, 6);
	jw_end_object(w);
	jw_name(w, "critical_path_s");
	jw_object(w);
	for (int ph = 0; ph < PH_NSHOWN; ph++) {
		int64_t ns[TB_NCAT];

		for (int c = 0; c < TB_NCAT; c++)
			ns[c] = (int64_t)rows[ph][c];
		report_json_times(w, ph_names[ph], ns);
	}
	jw_end_object(w);
	jw_float_field(w, "worker_startup_s", sum.startup_ms / 1e3, 6);
	{
		uint64_t cp[TB_NCAT] = { 0 };
		int64_t ns[TB_NCAT];

		phases_startup_rows(t->ph, pt->sp.in_val, cp);
		for (int c = 0; c < TB_NCAT; c++)
			ns[c] = (int64_t)cp[c];
		report_json_times(w, "worker_startup_critical_path_s", ns);
	}
	jw_end_object(w);
}
