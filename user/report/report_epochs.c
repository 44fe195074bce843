// SPDX-License-Identifier: BSD-3-Clause
/* Per-epoch blocks (live and final), the trend across epochs, and JSON. */
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "sections.h"
#include "steps.h"

static double pct_of(int64_t v, int64_t total)
{
	return total > 0 ? 100.0 * v / total : 0.0;
}

/*
 * "phases: data 11% fwd 46% ...": the ranks' main threads in it, as the
 * live table's line (80 columns with all seven; the exact figures are in
 * the table's epoch rows and the JSON).
 */
static void epoch_phases_line(FILE *f, const struct epoch *e)
{
	uint64_t t = epoch_phase_ns(e);
	double wall[PH_NSHOWN] = { 0 };

	if (!t)
		return;
	fprintf(f, "  phases:");
	for (int p = 0; p < PH_NLOOP; p++)
		if (200 * e->ph[p] >= t)	/* 0.5% and up */
			fprintf(f, " %s %.0f%%", ph_short[p], 100.0 * e->ph[p] / t);
	fputc('\n', f);
	for (int p = 0; p < PH_NLOOP; p++)
		wall[p] = (double)e->ph[p];
	report_phases_made_of(f, "  made of: ", wall, e->ph_cp);
}

static const char *span_note(const struct epoch *e)
{
	if (!e->complete)
		return e->late_start ? ", from its first line to the end of tracing" :
			", to the end of tracing";
	return e->late_start ? ", from its first line" : "";
}

void report_epoch_block(FILE *f, const struct session *ses, const struct epoch *e,
			const char *source)
{
	const struct job *job = &ses->job;
	int64_t hl[TB_NCAT], total = epoch_headline(job, e, hl);
	double pct[TB_NCAT];

	if (e->last != e->label)	/* merged (epochs.h, EP_MAX_EPOCHS) */
		fprintf(f, "=== Epochs %ld-%ld (%s) %.1f s%s", e->label, e->last, source,
			(e->end - e->start) / 1e9, span_note(e));
	else
		fprintf(f, "=== Epoch %ld (%s) %.1f s%s", e->label, source,
			(e->end - e->start) / 1e9, span_note(e));
	if (e->steps.count) {
		fprintf(f, ", ");
		report_text_steps(f, ses, &e->steps);
	}
	fprintf(f, " ===\n");
	for (int c = 0; c < TB_NCAT; c++)
		pct[c] = pct_of(hl[c], total);
	report_rollup_rows(f, pct, false);
	epoch_phases_line(f, e);
	report_gpu_util_epoch_line(f, ses, e);
	report_diagnosis_epoch_line(f, ses, e);
}

/* Over the epochs traced whole: not one begun at a line well into it. */
static void trend(FILE *f, const struct ep_stream *st)
{
	const struct epoch *first = NULL, *last = NULL;
	int n = 0;

	for (int i = 0; i < st->n; i++) {
		if (!st->list[i].complete || st->list[i].late_start)
			continue;
		if (!first)
			first = &st->list[i];
		last = &st->list[i];
		n++;
	}
	if (n < 2)
		return;
	fprintf(f, "Trend: epoch %ld took %.1f s, epoch %ld %.1f s (%+.1f%%) over %d complete epochs\n",
		first->label, (first->end - first->start) / 1e9, last->label,
		(last->end - last->start) / 1e9,
		100.0 * ((double)(last->end - last->start) / (first->end - first->start) - 1), n);
}

/* The whole window: steps/s over the time the steps cover. */
void report_steps_text(FILE *f, const struct session *ses)
{
	const struct epochs *ep = &ses->ep;
	const struct job *job = &ses->job;
	struct ep_steps s;

	epochs_run_steps(ep, job->window_start_ns, ep->prev.ts, &s);
	if (!s.count) {
		fprintf(f, "Steps: none seen (no step marker, no PyTorch training step, no periodic CUDA/NCCL calls)\n");
		return;
	}
	fprintf(f, "Steps: %.2f/s, ", ep_steps_per_s(&s));
	report_text_steps(f, ses, &s);
	/* Optimizer steps: the micro-batches they were made of (gradient accumulation). */
	if (s.micro && s.micro != s.count)
		fprintf(f, "; %d micro-batches, %.*f per step", s.micro,
			s.micro % s.count ? 2 : 0, (double)s.micro / s.count);
	fputc('\n', f);
}

/* The name of a row's process: the job's while it lists it, else "?". */
static const char *comm_of(const struct job *job, const struct ep_proc *d)
{
	const struct proc_rec *p = job_proc_at((struct job *)job, d->pid,
					       d->end ? d->end : UINT64_MAX);

	return p && !p->folded ? p->comm : "?";
}

static void proc_row(FILE *f, long label, bool first, const char *pid,
		     const char *role, const char *what, const int64_t cp[TB_NCAT])
{
	int64_t total = 0;

	for (int c = 0; c < TB_NCAT; c++)
		total += cp[c];
	if (first)
		fprintf(f, "  %5ld", label);
	else
		fprintf(f, "  %5s", "");
	fprintf(f, " %7s %-7s %-20.20s %7.2f", pid, role, what, total / 1e9);
	for (int r = 0; r < TB_NROLLUP; r++) {
		int64_t sum = 0;

		for (int k = 0; tb_rollup_cats[r][k] >= 0; k++)
			sum += cp[tb_rollup_cats[r][k]];
		fprintf(f, " %5.1f", pct_of(sum, total));
	}
	fputc('\n', f);
}

/* A row with its role as the report shows it. */
struct erow {
	const struct ep_proc *d;
	enum tb_role role;
	int order;
};

/* Workers by parent, in the order met; the others in theirs. */
static int by_parent(const void *x, const void *y)
{
	const struct erow *a = x, *b = y;
	bool wa = a->role == TB_ROLE_WORKER, wb = b->role == TB_ROLE_WORKER;

	if (wa != wb)
		return wa ? 1 : -1;
	if (wa && a->d->ppid != b->d->ppid)
		return a->d->ppid < b->d->ppid ? -1 : 1;
	return a->order - b->order;
}

/* The workers of one parent, rows w[0..n), summed into one row. */
static void workers_row(FILE *f, long label, bool first, const struct erow *w, int n)
{
	int64_t cp[TB_NCAT] = { 0 };
	char what[32];
	int count = 0;

	for (int i = 0; i < n; i++) {
		for (int c = 0; c < TB_NCAT; c++)
			cp[c] += w[i].d->main_own[c];
		count += w[i].d->folded ? w[i].d->folded : 1;
	}
	snprintf(what, sizeof(what), "workers of %d (%d)", (int)w[0].d->ppid, count);
	proc_row(f, label, first, "-", "worker", what, cp);
}

/* How many rows from w on are workers of the same parent. */
static int same_parent(const struct erow *w, int n)
{
	int k = 1;

	while (k < n && w[k].role == TB_ROLE_WORKER && w[k].d->ppid == w[0].d->ppid)
		k++;
	return k;
}

/* The first of the workers of pid in w[0..n) (sorted by parent), or -1. */
static int workers_of(const struct erow *w, int n, pid_t pid)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (w[mid].d->ppid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && w[lo].d->ppid == pid ? lo : -1;
}

static int by_order(const void *x, const void *y)
{
	const struct erow *const *a = x, *const *b = y;

	return (*a)->order - (*b)->order;
}

/* Workers whose parent has no row of its own: one row per parent, in the order met. */
static void orphans(FILE *f, long label, bool first, const struct erow *w, int nw,
		    const bool *shown)
{
	const struct erow **g = calloc(nw > 0 ? (size_t)nw : 1, sizeof(*g));
	int ng = 0;

	if (!g || !shown)
		goto out;
	for (int k = 0; k < nw; k += same_parent(&w[k], nw - k))
		if (!shown[k])
			g[ng++] = &w[k];
	qsort(g, ng, sizeof(*g), by_order);
	for (int i = 0; i < ng; i++) {
		workers_row(f, label, first, g[i], same_parent(g[i], nw - (g[i] - w)));
		first = false;
	}
out:
	free(g);
}

/*
 * Each process that is not a worker, its workers summed under it; then
 * the workers whose parent has no row of its own, one row per parent.
 */
static void epoch_proc_rows(FILE *f, const struct job *job, const struct epoch *e)
{
	struct erow *rows = calloc(e->n ? e->n : 1, sizeof(*rows)), *w;
	bool first = true, *shown;
	int nw, no;

	if (!rows)
		return;
	for (int i = 0; i < e->n; i++)
		rows[i] = (struct erow){ &e->d[i], ep_row_role(job, &e->d[i]), i };
	qsort(rows, e->n, sizeof(*rows), by_parent);
	for (no = 0; no < e->n && rows[no].role != TB_ROLE_WORKER; no++)
		;
	w = rows + no;
	nw = e->n - no;
	shown = calloc(nw > 0 ? (size_t)nw : 1, sizeof(bool));
	for (int i = 0; i < no && shown; i++) {
		const struct ep_proc *d = rows[i].d;
		char pid[16], name[ESC_LEN(TB_COMM_LEN)];
		int k = d->folded ? -1 : workers_of(w, nw, d->pid);

		snprintf(pid, sizeof(pid), d->folded ? "-" : "%d", (int)d->pid);
		if (d->folded)
			snprintf(name, sizeof(name), "%d exited", d->folded);
		else
			report_esc(name, sizeof(name), comm_of(job, d));
		proc_row(f, e->label, first, pid, role_name(rows[i].role), name, d->main_own);
		first = false;
		if (k < 0)
			continue;
		workers_row(f, e->label, false, &w[k], same_parent(&w[k], nw - k));
		for (int j = k; j < k + same_parent(&w[k], nw - k); j++)
			shown[j] = true;
	}
	orphans(f, e->label, first, w, nw, shown);
	free(shown);
	free(rows);
}

/*
 * Per epoch and process: each process's main thread by its own states, a
 * parent's workers summed into one row, so that many workers take one
 * line. Not the critical path: a long wait resolved through its waker
 * after a boundary moves its whole length into the next epoch (a launcher
 * waiting on its ranks showed 205% computation there).
 */
static void epoch_proc_table(FILE *f, const struct job *job, const struct ep_stream *st)
{
	fprintf(f, "Per epoch and process (main thread's own states; %% of MAIN_S)\n");
	fprintf(f, "  %5s %7s %-7s %-20s %7s %5s %5s %5s %5s\n", "EPOCH", "PID", "ROLE",
		"PROCESS", "MAIN_S", "comp", "comm", "data", "other");
	for (int i = 0; i < st->n; i++)
		epoch_proc_rows(f, job, &st->list[i]);
}

static void gens_line(FILE *f, const struct epochs *ep)
{
	double sum = 0, max = 0;
	int n = 0;

	for (int i = 0; i < ep->ngens; i++) {
		if (ep->gens[i].stall_s < 0)
			continue;
		sum += ep->gens[i].stall_s;
		if (ep->gens[i].stall_s > max)
			max = ep->gens[i].stall_s;
		n++;
	}
	if (!ep->ngens)
		return;
	fprintf(f, "Worker generations: %d (DataLoader workers forked afresh)\n"
		"  start-up stall (parent's data wait, first %.0f s): avg %.2f s, max %.2f s\n",
		ep->ngens, EP_GEN_STALL_S, n ? sum / n : 0.0, max);
}

/*
 * The time after the last epoch when it ended before tracing did (a tail:
 * epochs.c, is_tail); 0 while an epoch is open or the last one was cut.
 */
static double tail_s(const struct epochs *ep, const struct ep_stream *st)
{
	const struct epoch *last = st->n ? &st->list[st->n - 1] : NULL;

	if (!last || st->is_open || !last->complete || ep->prev.ts <= last->end)
		return 0.0;
	return (ep->prev.ts - last->end) / 1e9;
}

void report_epochs_text(FILE *f, const struct session *ses)
{
	const struct epochs *ep = &ses->ep;
	const struct job *job = &ses->job;
	enum ep_source s = epochs_source(ep);
	const struct ep_stream *st;
	double tail;

	if (s == EP_NSRC || !ep->src[s].n) {
		report_steps_text(f, ses);
		fprintf(f, "Epochs: none seen (%s%s)\n", epochs_source_name(ep->want),
			ep->want == EP_AUTO ? ": no marker, no epoch line, no worker generation" : "");
		gens_line(f, ep);
		fputc('\n', f);
		return;
	}
	st = &ep->src[s];
	report_steps_text(f, ses);
	fprintf(f, "Epochs (%s): %d, the first from %.2f s into the window\n", epochs_source_name(s),
		st->n, (st->list[0].start - job->window_start_ns) / 1e9);
	for (int i = 0; i < st->n; i++)
		report_epoch_block(f, ses, &st->list[i], epochs_source_name(s));
	tail = tail_s(ep, st);
	if (tail > 0)
		fprintf(f, "After the last epoch: %.2f s (the job's teardown: no epoch)\n", tail);
	trend(f, st);
	gens_line(f, ep);
	fputc('\n', f);
	epoch_proc_table(f, job, st);
	fputc('\n', f);
}

/* One line an epoch: its time, steps, ms/step and the headline's roll-up. */
static void epoch_line(FILE *f, const struct job *job, const struct epoch *e)
{
	int64_t hl[TB_NCAT], total = epoch_headline(job, e, hl);
	uint64_t cats[TB_NCAT];
	double pct[TB_NROLLUP];
	char label[32];

	for (int c = 0; c < TB_NCAT; c++)
		cats[c] = hl[c] > 0 ? hl[c] : 0;
	rollup_pct(cats, pct);
	if (e->last != e->label)
		snprintf(label, sizeof(label), "%ld-%ld", e->label, e->last);
	else
		snprintf(label, sizeof(label), "%ld", e->label);
	fprintf(f, "  %7s %8.1f %6ld", label, (e->end - e->start) / 1e9, (long)e->steps.count);
	if (e->steps.count)
		fprintf(f, " %8.1f", ep_steps_avg(&e->steps));
	else
		fprintf(f, " %8s", "-");
	if (total > 0)
		fprintf(f, " %5.1f %5.1f %5.1f %5.1f", pct[0], pct[1], pct[2], pct[3]);
	fprintf(f, "%s\n", e->complete ? "" : "  (to the end of tracing)");
}

void report_epochs_lines(FILE *f, const struct session *ses)
{
	const struct epochs *ep = &ses->ep;
	const struct job *job = &ses->job;
	enum ep_source s = epochs_source(ep);
	const struct ep_stream *st;

	report_steps_text(f, ses);
	if (s == EP_NSRC || !ep->src[s].n) {
		fprintf(f, "Epochs: none seen\n\n");
		return;
	}
	st = &ep->src[s];
	fprintf(f, "Epochs (%s): %d\n  %7s %8s %6s %8s %5s %5s %5s %5s\n", epochs_source_name(s),
		st->n, "EPOCH", "TIME_S", "STEPS", "MS/STEP", "comp", "comm", "data", "other");
	for (int i = 0; i < st->n; i++)
		epoch_line(f, job, &st->list[i]);
	fputc('\n', f);
}

static void json_steps(struct jw *w, const struct ep_steps *s)
{
	jw_name(w, "steps");
	if (!s->count) {
		jw_null(w);
		return;
	}
	jw_object(w);
	jw_int_field(w, "count", s->count);
	jw_float_field(w, "total_s", s->total_ms / 1e3, 6);
	jw_float_field(w, "avg_ms", ep_steps_avg(s), 4);
	jw_float_field(w, "min_ms", s->min_ms, 4);
	jw_float_field(w, "max_ms", s->max_ms, 4);
	jw_float_field(w, "std_ms", ep_steps_std(s), 4);
	jw_string_field(w, "source", epochs_step_source_name(s->source));
	jw_int_field(w, "syncs", s->syncs);
	jw_float_field(w, "syncs_per_step", ep_steps_syncs(s), 4);
	jw_end_object(w);
}

static void json_epoch_procs(struct jw *w, const struct job *job, const struct epoch *e)
{
	jw_name(w, "processes");
	jw_array(w);
	for (int i = 0; i < e->n; i++) {
		const struct ep_proc *d = &e->d[i];

		jw_object(w);
		jw_int_field(w, "pid", d->pid);
		jw_string_field(w, "role", role_name(ep_row_role(job, d)));
		report_json_times(w, "time_s", d->own);
		if (d->folded) {	/* exited processes of one parent, summed */
			jw_int_field(w, "ppid", d->ppid);
			jw_int_field(w, "folded", d->folded);
		}
		jw_end_object(w);
	}
	jw_end_array(w);
}

/*
 * Its phases: wall time (all ranks' main threads), share and what each
 * was made of (their critical path); null if none ran.
 */
static void json_epoch_phases(struct jw *w, const struct epoch *e)
{
	uint64_t t = epoch_phase_ns(e);

	if (!t) {
		jw_null_field(w, "phases");
		return;
	}
	jw_name(w, "phases");
	jw_object(w);
	jw_name(w, "wall_s");
	jw_object(w);
	for (int p = 0; p < PH_NLOOP; p++)
		jw_float_field(w, ph_names[p], e->ph[p] / 1e9, 6);
	jw_end_object(w);
	jw_name(w, "share");
	jw_object(w);
	for (int p = 0; p < PH_NLOOP; p++)
		jw_float_field(w, ph_names[p], (double)e->ph[p] / t, 4);
	jw_end_object(w);
	jw_name(w, "critical_path_s");
	jw_object(w);
	for (int p = 0; p < PH_NLOOP; p++) {
		int64_t ns[TB_NCAT];

		for (int c = 0; c < TB_NCAT; c++)
			ns[c] = (int64_t)e->ph_cp[p][c];
		report_json_times(w, ph_names[p], ns);
	}
	jw_end_object(w);
	jw_end_object(w);
}

static void json_epoch(struct jw *w, const struct session *ses, const struct epoch *e)
{
	const struct job *job = &ses->job;
	int64_t hl[TB_NCAT], total = epoch_headline(job, e, hl);
	uint64_t w0 = job->window_start_ns;

	jw_object(w);
	jw_int_field(w, "epoch", e->label);
	if (e->last != e->label)	/* merged (epochs.h, EP_MAX_EPOCHS) */
		jw_int_field(w, "last_epoch", e->last);
	jw_float_field(w, "start_s", (e->start - w0) / 1e9, 6);
	jw_float_field(w, "end_s", (e->end - w0) / 1e9, 6);
	jw_float_field(w, "duration_s", (e->end - e->start) / 1e9, 6);
	jw_bool_field(w, "complete", e->complete);
	jw_bool_field(w, "late_start", e->late_start);
	report_json_times(w, "time_s", hl);
	jw_name(w, "percent");
	jw_object(w);
	for (int c = 0; c < TB_NCAT; c++)
		jw_float_field(w, tb_cat_names[c], pct_of(hl[c], total), 3);
	jw_end_object(w);
	json_steps(w, &e->steps);
	json_epoch_phases(w, e);
	report_gpu_util_epoch_json(w, ses, e);
	report_diagnosis_epoch_json(w, ses, e);
	json_epoch_procs(w, job, e);
	jw_end_object(w);
}

/* The whole window's steps; source "none" and nulls when none were seen. */
static void json_steps_total(struct jw *w, const struct job *job, const struct epochs *ep)
{
	static const char *const nulls[] = { "per_s", "avg_ms", "min_ms", "max_ms", "std_ms",
					     "syncs_per_step" };
	struct ep_steps s;

	epochs_run_steps(ep, job->window_start_ns, ep->prev.ts, &s);
	jw_name(w, "steps");
	jw_object(w);
	if (!s.count) {
		jw_string_field(w, "source", "none");
		jw_int_field(w, "count", 0);
		jw_int_field(w, "micro_batches", 0);
		for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
			jw_null_field(w, nulls[i]);
		jw_end_object(w);
		return;
	}
	jw_string_field(w, "source", epochs_step_source_name(s.source));
	jw_int_field(w, "count", s.count);
	jw_int_field(w, "micro_batches", s.micro);
	jw_float_field(w, "per_s", ep_steps_per_s(&s), 4);
	jw_float_field(w, "avg_ms", ep_steps_avg(&s), 4);
	jw_float_field(w, "min_ms", s.min_ms, 4);
	jw_float_field(w, "max_ms", s.max_ms, 4);
	jw_float_field(w, "std_ms", ep_steps_std(&s), 4);
	jw_float_field(w, "syncs_per_step", ep_steps_syncs(&s), 4);
	jw_end_object(w);
}

/*
 * The generations' indexes by fork time (ties kept in order). The live
 * tool lists them as it judged them: two ranks' forks 80 ms apart can be
 * judged in the other order (a fork is a worker once it has lived its exec
 * grace), where a recording's reader loads them by fork time. NULL: none,
 * or no memory (then as listed).
 */
static int *gens_by_fork(const struct epochs *ep)
{
	int *ix = ep->ngens ? malloc(ep->ngens * sizeof(*ix)) : NULL;

	for (int i = 0; ix && i < ep->ngens; i++) {
		int k = i;

		for (; k > 0 && ep->gens[ix[k - 1]].fork_ts > ep->gens[i].fork_ts; k--)
			ix[k] = ix[k - 1];
		ix[k] = i;
	}
	return ix;
}

static void json_gens(struct jw *w, const struct job *job, const struct epochs *ep)
{
	int *ix = gens_by_fork(ep);

	jw_name(w, "worker_generations");
	jw_array(w);
	for (int i = 0; i < ep->ngens; i++) {
		const struct ep_worker_gen *g = &ep->gens[ix ? ix[i] : i];

		jw_object(w);
		jw_int_field(w, "parent", g->parent);
		jw_float_field(w, "fork_s", ((double)g->fork_ts - job->window_start_ns) / 1e9, 6);
		jw_int_field(w, "nworkers", g->nworkers);
		jw_int_field(w, "epoch", g->epoch);
		jw_float_field(w, "stall_s", g->stall_s, 6);
		jw_float_field(w, "stall_err_s", g->stall_err_s, 6);
		jw_end_object(w);
	}
	jw_end_array(w);
	free(ix);
}

void report_epochs_json(struct jw *w, const struct session *ses)
{
	const struct epochs *ep = &ses->ep;
	const struct job *job = &ses->job;
	enum ep_source s = epochs_source(ep);
	const struct ep_stream *st = s == EP_NSRC ? NULL : &ep->src[s];
	uint64_t first = st && st->n ? st->list[0].start : 0;

	jw_name(w, "epochs");
	jw_object(w);
	jw_string_field(w, "source", st && st->n ? epochs_source_name(s) : "none");
	jw_float_field(w, "before_first_s",
		       first > job->window_start_ns ? (first - job->window_start_ns) / 1e9 : 0.0, 6);
	jw_float_field(w, "after_last_s", st ? tail_s(ep, st) : 0.0, 6);
	jw_name(w, "list");
	jw_array(w);
	for (int i = 0; st && i < st->n; i++)
		json_epoch(w, ses, &st->list[i]);
	jw_end_array(w);
	json_gens(w, job, ep);
	jw_end_object(w);
	json_steps_total(w, job, ep);
}
