// SPDX-License-Identifier: BSD-3-Clause
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "epochs.h"
#include "epochs_fold.h"
#include "grow.h"
#include "job.h"
#include "phases.h"
#include "steps.h"

#define NS_PER_S 1000000000.0
#define MAX_GROUPS 10

static const char *const source_names[EP_NSRC + 1] = {
	"marker", "passes", "regex", "workers", "interval", "auto",
};

const char *epochs_source_name(enum ep_source s)
{
	return s <= EP_NSRC ? source_names[s] : "none";
}

int epochs_parse_source(const char *arg, enum ep_source *src, double *interval_s)
{
	char *end;

	for (int s = 0; s <= EP_NSRC; s++)
		if (s != EP_INTERVAL && !strcmp(arg, source_names[s])) {
			*src = s;
			return 0;
		}
	if (strncmp(arg, "interval:", 9))
		return -1;
	*interval_s = strtod(arg + 9, &end);
	if (end == arg + 9 || *end || !(*interval_s >= 0.01 && *interval_s <= 1e7))
		return -1;
	*src = EP_INTERVAL;
	return 0;
}

int epochs_init(struct epochs *ep, enum ep_source want, double interval_s,
		const char *re, uint64_t window_start, char *err, size_t errlen)
{
	int rc;

	memset(ep, 0, sizeof(*ep));
	ep->want = want;
	ep->interval_s = want == EP_INTERVAL ? interval_s : EP_AUTO_INTERVAL_S;
	ep->next_window = window_start;	/* the first window opens at once */
	ep->prev.ts = window_start;
	ep->window_start = window_start;
	for (int s = 0; s < EP_NSRC; s++)
		ep->src[s].gu_h = -1;
	rc = regcomp(&ep->re, re ? re : EP_DEFAULT_REGEX, REG_EXTENDED | REG_ICASE);
	if (rc) {
		regerror(rc, &ep->re, err, errlen);
		return -1;
	}
	ep->re_ok = true;
	return 0;
}

static bool tracks(const struct epochs *ep, enum ep_source s)
{
	return ep->want == EP_AUTO || ep->want == s;
}

static void add_pending(struct ep_stream *st, uint64_t ts, long label)
{
	struct ep_pending *p = tb_grow(st->pend, &st->cappend, st->npend + 1, sizeof(*p));
	int i;

	if (!p)
		return;
	st->pend = p;
	/* Marks of two threads can reach the ring buffer out of order. */
	for (i = st->npend; i > 0 && p[i - 1].ts > ts; i--)
		p[i] = p[i - 1];
	p[i] = (struct ep_pending){ ts, label };
	st->npend++;
}

static void add_step_pid(struct epochs *ep, pid_t pid)
{
	for (int i = 0; i < ep->nstep_pids; i++)
		if (ep->step_pids[i] == pid)
			return;
	if (ep->nstep_pids < EP_MAX_STEP_PIDS)
		ep->step_pids[ep->nstep_pids++] = pid;
}

static void add_step(struct ep_step_list *l, uint64_t ts)
{
	uint64_t *s = tb_grow(l->t, &l->cap, l->n + 1, sizeof(*s));
	int i;

	if (!s)
		return;
	l->t = s;
	l->seen++;
	l->last = ts;
	if (l->n >= ST_MAX_BOUNDS)
		st_sum_fold(&l->folded, s, &l->n, ST_MAX_BOUNDS / 2);
	/* Marks of two threads can reach the ring buffer out of order. */
	for (i = l->n; i > 0 && s[i - 1] > ts; i--)
		s[i] = s[i - 1];
	s[i] = ts;
	l->n++;
}

void epochs_add_step(struct epochs *ep, uint64_t ts, pid_t pid)
{
	add_step(&ep->marks, ts);
	if (pid)
		add_step_pid(ep, pid);
}

void epochs_add_loop_step(struct epochs *ep, enum ep_step_src src, uint64_t ts, pid_t pid,
			  pid_t tid)
{
	if (ep->loop_tid && tid != ep->loop_tid)
		return;
	/* Backwards before its first fetch (a warm-up): the fetches, once seen, win. */
	if (ep->loop_src && src != ep->loop_src) {
		if (src != EP_STEPS_FETCH)
			return;
		ep->loop.n = 0;
		ep->loop.folded = (struct st_sum){ 0 };
		ep->loop.done = 0;
		ep->optim.n = 0;
		ep->optim.folded = (struct st_sum){ 0 };
		ep->optim.done = ep->og_start = 0;
		ep->og_n = 0;
		ep->og_opt = ep->optim_multi = false;
	}
	ep->loop_tid = tid;
	ep->loop_pid = pid;
	ep->loop_src = src;
	add_step(&ep->loop, ts);
}

void epochs_add_optim_step(struct epochs *ep, uint64_t ts, pid_t pid, pid_t tid)
{
	if (ep->loop_tid && tid != ep->loop_tid)
		return;
	ep->loop_tid = tid;
	ep->loop_pid = pid;
	add_step(&ep->optim, ts);
}

static void on_mark(struct epochs *ep, const char *text, uint64_t ts, pid_t pid)
{
	char what[8];
	long n;

	if (sscanf(text + strlen(TB_MARK_PREFIX), "%7s %ld", what, &n) != 2)
		return;
	if (!strcmp(what, "epoch") && tracks(ep, EP_MARKER))
		add_pending(&ep->src[EP_MARKER], ts, n);
	else if (!strcmp(what, "step"))
		epochs_add_step(ep, ts, pid);
}

/*
 * The epoch number in a matching line: its first all-digit group. A
 * fraction after it (HF's 'epoch': 1.33, epochs done so far) names the
 * epoch under way, 2 (1.0 is the end of epoch 1, 0.0 the start of 1).
 */
static bool match_label(const char *line, const regmatch_t *m, long *label, bool *frac,
			bool *whole)
{
	for (int g = 1; g < MAX_GROUPS && m[g].rm_so >= 0; g++) {
		int len = m[g].rm_eo - m[g].rm_so;
		bool digits = len > 0 && len < 10;
		const char *end = line + m[g].rm_eo;

		for (int i = 0; digits && i < len; i++)
			digits = isdigit((unsigned char)line[m[g].rm_so + i]);
		if (!digits)
			continue;
		*label = strtol(line + m[g].rm_so, NULL, 10);
		*frac = end[0] == '.' && isdigit((unsigned char)end[1]);
		*whole = *frac;
		for (end++; *frac && isdigit((unsigned char)*end); end++)
			*whole &= *end == '0';
		return true;
	}
	return false;
}

/* Words of a line that sums up an epoch that has ended. */
static bool summary_words(const char *line)
{
	static const char *const words[] = {
		"done", "finish", "complete", "ended", "end of", "summary", "eval_",
		"val_loss", "100%",
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasestr(line, words[i]))
			return true;
	return false;
}

/*
 * A line names the epoch under way ("Epoch 2/3", a step line "Epoch [2/3],
 * Step [8/24]", HF's 'epoch': 1.33 for epoch 2): the first line naming a
 * new one starts it. A summary names the epoch that has just ended ("Epoch
 * 1 done", "Epoch [1/3] finished", Lightning's "Epoch 0: 100%", HF's
 * 'epoch': 1.0): the next one starts there, under the next number, until a
 * line names it (inferred); a second summary of the same epoch (HF's eval
 * line after its last step line) changes nothing. A summary with nothing
 * open before it: its epoch ran from the window's start.
 */
static void on_line(struct epochs *ep, struct ep_stream *st, long label, bool end,
		    uint64_t ts)
{
	if (!end) {
		if (!st->has_label)
			st->first_by_line = true;
		if (!st->has_label || label != st->last_label)
			add_pending(st, ts, label);
		st->last_label = label;
		st->has_label = true;
		st->inferred = false;
		return;
	}
	st->summed = true;
	if (st->has_label && st->last_label == label + 1)
		return;		/* a second summary, or the next epoch is named already */
	if (!st->has_label)
		add_pending(st, ep->window_start, label);
	add_pending(st, ts, label + 1);
	st->last_label = label + 1;
	st->has_label = true;
	st->inferred = true;
}

/* tqdm redraws with \r: every piece between \n and \r is a line. */
static void on_text(struct epochs *ep, char *buf, uint64_t ts)
{
	struct ep_stream *st = &ep->src[EP_REGEX];
	regmatch_t m[MAX_GROUPS];
	char *save = NULL;

	for (char *line = strtok_r(buf, "\r\n", &save); line;
	     line = strtok_r(NULL, "\r\n", &save)) {
		bool frac = false, whole = false, end;
		long label;

		if (regexec(&ep->re, line, MAX_GROUPS, m, 0))
			continue;
		if (!match_label(line, m, &label, &frac, &whole))
			label = st->has_label ? st->last_label + 1 : 1;
		if (frac && !whole)
			label++;			/* 1.33: epoch 2 under way */
		end = frac ? whole && label > 0 : summary_words(line);
		if (frac && whole && !label)
			label = 1;			/* 0.0: epoch 1 begins */
		on_line(ep, st, label, end, ts);
	}
}

static struct pass_thread *pass_thread(struct epochs *ep, pid_t tid)
{
	for (int i = 0; i < ep->npth; i++)
		if (ep->pth[i].tid == tid)
			return &ep->pth[i];
	if (ep->npth >= EP_PASS_THREADS)
		return NULL;
	ep->pth[ep->npth] = (struct pass_thread){ .tid = tid };
	return &ep->pth[ep->npth++];
}

/*
 * A training step begins at its fetch: the fetch a backward resolved as
 * trained (once, however many backwards it fed). A thread that has never
 * fetched from a DataLoader (a queue, torch < 2 naming no bracket) steps
 * at each backward, as the phase table does. One thread counts, the first
 * to train (the ranks of a DDP job step together).
 */
/*
 * The loop thread's micro-batch under way closed at ts (its next fetch, or
 * with no DataLoader its next backward): if it called the optimizer after
 * its backward, it ends the optimizer step under way there, as the phase
 * table closes it.
 */
static void optim_close(struct epochs *ep, uint64_t ts)
{
	if (ep->og_opt && ep->og_start) {
		ep->optim.done = ts;
		ep->optim_multi |= ep->og_n > 1;
		ep->og_start = 0;
		ep->og_n = 0;
	}
	ep->og_opt = ep->og_bwd = false;
}

/*
 * The loop thread's micro-batch that began at ts ran its backward. The
 * first after an optimizer step begins the next one, there and then (an
 * epoch closed before it ends ends where it starts); until an optimizer
 * call ends it, it is pending, as the step under way is.
 */
static void optim_micro(struct epochs *ep, pid_t tid, uint64_t ts)
{
	if (tid != ep->loop_tid)
		return;
	ep->og_bwd = true;
	ep->og_n++;
	if (!ep->og_start) {
		ep->og_start = ts;
		epochs_add_optim_step(ep, ts, ep->loop_pid, ep->loop_tid);
	}
}

static void loop_step(struct epochs *ep, struct pass_thread *t, const struct tb_phase_event *e)
{
	if (!t->fetch) {
		if ((pid_t)e->tid == ep->loop_tid)
			optim_close(ep, e->ts);
		epochs_add_loop_step(ep, EP_STEPS_BACKWARD, e->ts, e->pid, e->tid);
		optim_micro(ep, e->tid, e->ts);
		return;
	}
	if ((e->resolved & TB_RS_HOW) != TB_RS_TRAINED || t->fetch == t->stepped)
		return;
	t->stepped = t->fetch;
	epochs_add_loop_step(ep, EP_STEPS_FETCH, t->fetch, e->pid, e->tid);
	optim_micro(ep, e->tid, t->fetch);
}

/*
 * A fetch of the loop thread closes its last training step, as the phase
 * table closes it (phases.c): where that step ends when no step follows.
 */
static void loop_close_at(struct epochs *ep, uint64_t ts)
{
	struct ep_step_list *l = &ep->loop;

	if (l->n && l->done <= l->last && ts > l->last)
		l->done = ts;
	optim_close(ep, ts);
}

static void loop_closed(struct epochs *ep, const struct tb_phase_event *e)
{
	if ((pid_t)e->tid == ep->loop_tid && ep->loop_src == EP_STEPS_FETCH)
		loop_close_at(ep, e->ts);
}

/*
 * A pass over a DataLoader ends with the fetch that raises StopIteration:
 * a step with no backward (BPF resolves it lone at the next fetch, or
 * validation after an eval loop). A training step begins a pass as
 * passes.c says; the boundary is its first fetch's start, or, where
 * iter(loader) started workers for it, that start-up's (the first fork:
 * docs/phases.md), whose time is the step's data. One thread counts, the
 * first to begin a pass (the ranks of a DDP job begin theirs together).
 */
static void passes_on_phase(struct epochs *ep, const struct tb_phase_event *e)
{
	unsigned int how = e->resolved & TB_RS_HOW;
	struct pass_thread *t = pass_thread(ep, e->tid);
	struct pass_step st;

	if (!t)
		return;
	if (e->cls == TB_BC_DATA && e->phase == TB_PH_PEND_DATA) {
		if (how == TB_RS_LONE || how == TB_RS_VALIDATION)
			ep->pass_ended = true;
		loop_closed(ep, e);
	}
	/* An optimizer call after the micro-batch's backward ends its optimizer step. */
	if (e->cls == TB_BC_OPTIM && e->phase == TB_PH_OPTIMIZER && ep->og_bwd &&
	    (pid_t)e->tid == ep->loop_tid)
		ep->og_opt = true;
	if (e->cls == TB_BC_BACKWARD && e->phase == TB_PH_BACKWARD)
		loop_step(ep, t, e);
	if (!pass_on_phase(t, ep->attached, e, &st) || !st.begins)
		return;
	if (tracks(ep, EP_PASSES) && (!ep->pass_tid || (pid_t)e->tid == ep->pass_tid)) {
		ep->pass_tid = e->tid;
		add_pending(&ep->src[EP_PASSES], st.from, ++ep->passes);
	}
}

void epochs_on_event(struct epochs *ep, const struct tb_text_event *e)
{
	char buf[TB_TEXT_LEN + 1];
	size_t len = e->len < TB_TEXT_LEN ? e->len : TB_TEXT_LEN;

	memcpy(buf, e->text, len);
	buf[len] = '\0';
	if (e->type == TB_EV_MARK)
		on_mark(ep, buf, e->ts, e->pid);
	else if (e->type == TB_EV_TEXT && tracks(ep, EP_REGEX))
		on_text(ep, buf, e->ts);
}

/*
 * A process's loop thread as the phase events have shown it so far
 * (phases_trainer): the thread whose critical path its snapshots keep as
 * main_cp. Its main thread while none ran a phase, or if it is gone.
 */
static const struct thread_rec *loop_thread(const struct epochs *ep, const struct proc_rec *p)
{
	const struct ph_thread *pt = p->folded ? NULL : phases_trainer(ep->phases, p->pid);

	for (int i = p->nthreads - 1; pt && i >= 0; i--)
		if (p->threads[i].tid == pt->tid && !p->threads[i].folded)
			return &p->threads[i];
	return job_main_thread(p);
}

/*
 * The critical path per phase of the loop threads (the threads
 * phases_main_now sums): settled rows, or (final) with a step
 * still pending folded as the table folds it.
 */
static void main_phase_rows(const struct epochs *ep, const struct job *job, bool final,
			    uint64_t out[PH_NSHOWN][TB_NCAT])
{
	memset(out, 0, sizeof(uint64_t) * PH_NSHOWN * TB_NCAT);
	for (int i = 0; ep->phases && i < job->nprocs; i++) {
		const struct ph_thread *pt = phases_trainer(ep->phases, job->procs[i].pid);
		const struct thread_rec *t = pt ? loop_thread(ep, &job->procs[i]) : NULL;
		uint64_t rows[PH_NSHOWN][TB_NCAT];

		if (!t || t->tid != pt->tid)
			continue;
		if (final) {
			phases_fold(t->ph, pt->sp.in_val, rows);
		} else {
			memset(rows, 0, sizeof(rows));
			for (int p = 0; p < TB_NPHASE; p++)
				for (int c = 0; !ph_is_pending(p) && c < TB_NCAT; c++)
					rows[ph_shown_of(p)][c] += t->ph[p][c];
		}
		/* Setup and teardown belong to no epoch (docs/phases.md, "The share"). */
		phases_split_ends(rows, t->ends);
		for (int p = 0; p < PH_NSHOWN; p++)
			for (int c = 0; c < TB_NCAT; c++)
				out[p][c] += rows[p][c];
	}
}

static int take_snap(struct epochs *ep, struct ep_snap *s, const struct job *job,
		     uint64_t now, bool final)
{
	s->ts = now;
	if (ep_snap_alloc(ep, s, job->nprocs))
		return -1;
	s->n = job->nprocs;
	for (int i = 0; i < s->n; i++) {
		const struct proc_rec *p = &job->procs[i];
		const struct ep_tot *before = ep_tot_at(&ep->prev, i);

		/* An ended process's loop thread is a cache miss per snapshot. */
		ep_tot_of(&s->p[i], p, ep_tot_reusable(before, p) ? NULL : loop_thread(ep, p),
			  before);
	}
	phases_main_now(ep->phases, s->ph);
	if (final)
		memcpy(s->ph_set, s->ph, sizeof(s->ph_set));
	else
		phases_main_before(ep->phases, now, s->ph_set);
	main_phase_rows(ep, job, final, s->ph_cp);
	return 0;
}

/* Where ts lies between the ticks a (earlier) and b, from 0 to 1. */
static double frac(const struct ep_snap *a, const struct ep_snap *b, uint64_t ts)
{
	if (ts <= a->ts)
		return 0;
	if (ts >= b->ts)
		return 1;
	return (double)(ts - a->ts) / (b->ts - a->ts);
}

/*
 * The phases' critical path at ts, between the ticks a (at or before ts)
 * and b, the newest (the tick that places the boundary). A phase's rows
 * grow while the main threads are in it, as its steps settle, so each
 * phase's part of its growth before ts is the part of its wall time that
 * settled between the ticks and lies before ts: wt, its wall time before
 * ts (from the spans, as known now), so a phase that ended at ts falls
 * wholly before it, against the wall time the rows held at a and at b
 * (ph_set: what had settled then). b is the newest tick, not the one
 * right after ts: a fetch before ts that settles later (the last fetch of
 * a pass, other at the next pass's first fetch) has its rows only there.
 * Linear in time, a validation that ended at the next epoch's first fetch
 * put up to a quarter of a refresh's worth of itself in that epoch, per
 * rank (0.066 s of 0.311, test_phases.py in CI); against the wall time as
 * known now at the ticks around ts, 0.02 s of data and 0.013 s of other
 * went to the next epoch at each boundary of torch_job's checkpoint
 * variant. Linear where the phase had no wall time between the ticks.
 */
static void interp_phases(struct ep_snap *out, const struct ep_snap *a,
			  const struct ep_snap *b, uint64_t ts, const uint64_t wt[PH_NSHOWN])
{
	const uint64_t *wa = a->ph_set, *wb = b->ph_set;
	double lin = frac(a, b, ts);

	for (int p = 0; p < PH_NSHOWN; p++) {
		double f = lin;

		if (wb[p] > wa[p]) {
			f = ((double)wt[p] - (double)wa[p]) / (double)(wb[p] - wa[p]);
			f = f < 0 ? 0 : f > 1 ? 1 : f;
		}
		for (int c = 0; c < TB_NCAT; c++) {
			uint64_t lo = a->ph_cp[p][c], hi = b->ph_cp[p][c];

			out->ph_cp[p][c] = hi > lo ? lo + (uint64_t)((hi - lo) * f) : hi;
		}
	}
}

/*
 * Totals at ts, between the ticks a (earlier) and b; the phases' critical
 * path between a and newest (interp_phases). All index job->procs as it
 * is (epochs_on_fold keeps them so): a process added since a is past a's
 * end, or absent in a.
 */
static int interp(struct epochs *ep, struct ep_snap *out, const struct ep_snap *a,
		  const struct ep_snap *b, uint64_t ts, const struct ep_snap *newest)
{
	out->ts = ts;
	if (ep_snap_alloc(ep, out, b->n))
		return -1;
	out->n = b->n;
	for (int i = 0; i < b->n; i++) {
		const struct ep_tot *pa = ep_tot_at(a, i);
		const struct ep_tot *pb = &b->p[i];
		struct ep_snap lo = { .ts = a->ts }, hi = { .ts = b->ts };
		double fi;

		out->p[i] = *pb;
		if (pb->absent)
			continue;

		/*
		 * Workers come and go at the boundaries: one born since a has
		 * nothing before its birth, one dead before b nothing after.
		 */
		if (!pa && pb->start > lo.ts && pb->start < hi.ts)
			lo.ts = pb->start;
		if (pb->end > lo.ts && pb->end < hi.ts)
			hi.ts = pb->end;
		fi = frac(&lo, &hi, ts);
		for (int c = 0; c < TB_NCAT; c++) {
			int64_t oa = pa ? pa->own[c] : 0, ca = pa ? pa->main_cp[c] : 0;
			int64_t ma = pa ? pa->main_own[c] : 0;

			out->p[i].own[c] = oa + (int64_t)((pb->own[c] - oa) * fi);
			out->p[i].main_cp[c] = ca + (int64_t)((pb->main_cp[c] - ca) * fi);
			out->p[i].main_own[c] = ma + (int64_t)((pb->main_own[c] - ma) * fi);
		}
	}
	/* Phases: exact, from the spans (interpolated would move a step). */
	phases_main_before(ep->phases, ts, out->ph);
	memcpy(out->ph_set, out->ph, sizeof(out->ph_set));
	interp_phases(out, a, newest, ts, out->ph);
	return 0;
}

static bool changed(const struct ep_proc *d)
{
	for (int c = 0; c < TB_NCAT; c++)
		if (d->own[c] || d->main_cp[c])
			return true;
	return false;
}

const char *epochs_step_source_name(enum ep_step_src s)
{
	static const char *const names[] = { "none", "marker", "calls", "fetch", "backward",
					     "optimizer" };

	return s <= EP_STEPS_OPTIM ? names[s] : "none";
}

double ep_steps_avg(const struct ep_steps *s)
{
	return s->count ? s->total_ms / s->count : 0.0;
}

double ep_steps_std(const struct ep_steps *s)
{
	double avg = ep_steps_avg(s), var;

	if (s->count < 2)
		return 0.0;
	var = (s->sum_sq - s->count * avg * avg) / (s->count - 1);
	return var > 0 ? sqrt(var) : 0.0;
}

double ep_steps_syncs(const struct ep_steps *s)
{
	return s->count ? (double)s->syncs / s->count : 0.0;
}

double ep_steps_per_s(const struct ep_steps *s)
{
	return s->count && s->total_ms > 0 ? s->count / (s->total_ms / 1e3) : 0.0;
}

uint64_t epoch_phase_ns(const struct epoch *e)
{
	uint64_t t = 0;

	for (int p = 0; p < PH_NSHOWN; p++)
		t += e->ph[p];
	return t;
}

int64_t epoch_headline(const struct job *job, const struct epoch *e, int64_t hl[TB_NCAT])
{
	int64_t total = 0;

	memset(hl, 0, sizeof(int64_t) * TB_NCAT);
	for (int i = 0; i < e->n; i++) {
		if (ep_row_role(job, &e->d[i]) != TB_ROLE_TRAINER)
			continue;
		for (int c = 0; c < TB_NCAT; c++)
			hl[c] += e->d[i].main_cp[c];
	}
	for (int c = 0; c < TB_NCAT; c++)
		total += hl[c];
	return total;
}

int epoch_slowest(const struct job *job, const struct epoch *e)
{
	int64_t hl[TB_NCAT];
	int best = TB_CPU;

	epoch_headline(job, e, hl);
	for (int c = 1; c < TB_NCAT; c++)
		if (hl[c] > hl[best])
			best = c;
	return best;
}

/* Step i lasts until step i + 1 starts; the last one until end. */
static void step_times(const uint64_t *t, int n, uint64_t end, struct ep_steps *s)
{
	for (int i = 0; i < n; i++) {
		double ms = ((i + 1 < n ? t[i + 1] : end) - t[i]) / 1e6;

		if (!s->count || ms < s->min_ms)
			s->min_ms = ms;
		if (!s->count || ms > s->max_ms)
			s->max_ms = ms;
		s->total_ms += ms;
		s->sum_sq += ms * ms;
		s->count++;
	}
}

/* A list's steps in [a, b); *next the first at or after b, 0 if none. */
static const uint64_t *list_bounds(const struct ep_step_list *l, uint64_t a, uint64_t b,
				   int *n, uint64_t *next)
{
	int from = st_lower_bound(l->t, l->n, a);
	int to = st_lower_bound(l->t, l->n, b);

	if (to < from)
		to = from;
	*n = to - from;
	*next = to < l->n ? l->t[to] : 0;
	return l->t + from;
}

/* The steps of the source that wins (ep_step_src), in [a, b). */
static const uint64_t *bounds(const struct epochs *ep, uint64_t a, uint64_t b, int *n,
			      uint64_t *next, pid_t *pid, enum ep_step_src *src)
{
	*pid = 0;
	if (ep->marks.n) {
		*src = EP_STEPS_MARKER;
		return list_bounds(&ep->marks, a, b, n, next);
	}
	if (ep->optim.n && ep->optim_multi) {
		*src = EP_STEPS_OPTIM;
		*pid = ep->loop_pid;
		return list_bounds(&ep->optim, a, b, n, next);
	}
	if (ep->loop.n) {
		*src = ep->loop_src;
		*pid = ep->loop_pid;
		return list_bounds(&ep->loop, a, b, n, next);
	}
	*src = EP_STEPS_CALLS;
	return steps_bounds(ep->calls, a, b, n, next, pid);
}

/* Steps folded out of the list (steps.h), when [a, b) holds all of them. */
static int add_folded(const struct epochs *ep, const uint64_t *t, uint64_t a, uint64_t b,
		      struct ep_steps *s)
{
	const struct ep_step_list *l = s->source == EP_STEPS_MARKER ? &ep->marks :
				       s->source == EP_STEPS_OPTIM ? &ep->optim : &ep->loop;
	const struct st_sum *f = s->source == EP_STEPS_CALLS ? steps_folded(ep->calls, t) :
		l->folded.count ? &l->folded : NULL;

	if (!f || !st_sum_inside(f, a, b))
		return 0;
	if (!s->count || f->min_ms < s->min_ms)
		s->min_ms = f->min_ms;
	if (!s->count || f->max_ms > s->max_ms)
		s->max_ms = f->max_ms;
	s->total_ms += f->total_ms;
	s->sum_sq += f->sum_sq;
	s->count += f->count;
	return f->count;
}

/*
 * Where the last step starting before b ends (0: unknown, left out): at b
 * if b ends a span and a step follows; else where the next starts. With
 * none after it, a training loop's where the phase table closed it, a
 * marker's or the call period's at b if b ends a span before the run's
 * end (the teardown is no step's). An epoch that the next boundary closed
 * while the run goes on cuts its last step at b even before the step that
 * follows is known (an epoch closes at its boundary's tick; the next
 * epoch's first step is known at its backward, later): the job went on
 * past b.
 */
static uint64_t last_end(const struct epochs *ep, enum ep_step_src src, uint64_t last,
			 uint64_t b, uint64_t next, bool closed)
{
	uint64_t done = src == EP_STEPS_OPTIM ? ep->optim.done : ep->loop.done;

	if (next)
		return closed ? b : next;
	if (src != EP_STEPS_FETCH && src != EP_STEPS_BACKWARD && src != EP_STEPS_OPTIM)
		return closed && !(ep->ended && b >= ep->ended) ? b : 0;
	/* Closed while the run goes on (ended is set at its end only). */
	if (done <= last)
		return closed && !ep->ended ? b : 0;
	return closed && b < done ? b : done;
}

int epochs_step_stats(const struct epochs *ep, uint64_t a, uint64_t b, bool closed,
		      struct ep_steps *s)
{
	const uint64_t *t;
	uint64_t next, end, from;
	pid_t pid;
	int n, folded;

	memset(s, 0, sizeof(*s));
	t = bounds(ep, a, b, &n, &next, &pid, &s->source);
	if (!n) {
		s->source = EP_STEPS_NONE;
		return 0;
	}
	end = last_end(ep, s->source, t[n - 1], b, next, closed);
	step_times(t, end ? n : n - 1, end ? end : t[n - 1], s);
	folded = add_folded(ep, t, a, b, s);
	if (!s->count) {
		s->source = EP_STEPS_NONE;
		return n;
	}
	end = end ? end : t[n - 1];
	from = folded ? a : t[0];
	if (s->source == EP_STEPS_OPTIM)
		s->micro = st_lower_bound(ep->loop.t, ep->loop.n, end) -
			   st_lower_bound(ep->loop.t, ep->loop.n, from);
	if (s->source != EP_STEPS_MARKER)
		s->syncs = steps_syncs(ep->calls, pid, from, end);
	for (int i = 0; s->source == EP_STEPS_MARKER && i < ep->nstep_pids; i++)
		s->syncs += steps_syncs(ep->calls, ep->step_pids[i], from, end);
	return n + folded;
}

int epochs_run_steps(const struct epochs *ep, uint64_t a, uint64_t b, struct ep_steps *s)
{
	return epochs_step_stats(ep, a, b, false, s);
}

uint64_t epochs_step_start(const struct epochs *ep, uint64_t a, uint64_t b, int i)
{
	enum ep_step_src src;
	const uint64_t *t;
	uint64_t next;
	pid_t pid;
	int n;

	t = bounds(ep, a, b, &n, &next, &pid, &src);
	return i >= 0 && i < n ? t[i] : 0;
}

uint64_t epochs_step_end(const struct epochs *ep, uint64_t a, uint64_t b, int i)
{
	enum ep_step_src src;
	const uint64_t *t;
	uint64_t next;
	pid_t pid;
	int n;

	t = bounds(ep, a, b, &n, &next, &pid, &src);
	if (i < 0 || i >= n)
		return 0;
	if (i + 1 < n)
		return t[i + 1];
	return last_end(ep, src, t[i], b, next, false);
}

/* A new epoch at the end of st's list, zeroed; NULL if out of memory. */
static struct epoch *append(struct ep_stream *st)
{
	struct epoch *list = tb_grow(st->list, &st->cap, st->n + 1, sizeof(*list));

	if (!list)
		return NULL;
	st->list = list;
	memset(&list[st->n], 0, sizeof(list[0]));
	return &list[st->n];
}

/*
 * A wait still open at a refresh is counted under the category it has with
 * no waker (idle, lock: account_open_interval); when it closes, its waker
 * names it (data_wait, comm) and that total shrinks. Across a boundary
 * between the two, the epoch after it gets the first category below zero
 * ("other -8.6%") and the second with the wait's part before the boundary
 * too. That part is moved back: the epoch before counted it already, as it
 * was known then. It comes from the wait it turned into, the blocked
 * category that grew most (cpu and runqueue only if none did). The sum,
 * the epoch's time, stays as it was.
 */
static bool ran(int cat)
{
	return cat == TB_CPU || cat == TB_RUNQUEUE;
}

/* Where category c's deficit comes from: -1 if no other one is positive. */
static int settle_from(const int64_t v[TB_NCAT], int c)
{
	int from = -1;

	for (int k = 0; k < TB_NCAT; k++) {
		if (k == c || v[k] <= 0)
			continue;
		if (from < 0 || ran(from) > ran(k) || (ran(from) == ran(k) && v[k] > v[from]))
			from = k;
	}
	return from;
}

static void settle_waits(int64_t v[TB_NCAT])
{
	for (int c = 0; c < TB_NCAT; c++) {
		while (v[c] < 0) {
			int from = settle_from(v, c);
			int64_t take;

			if (from < 0)
				break;	/* nothing positive left: the sum is negative */
			take = v[from] < -v[c] ? v[from] : -v[c];
			v[from] -= take;
			v[c] += take;
		}
		if (v[c] < 0)
			v[c] = 0;
	}
}

void epoch_set_procs(const struct epochs *ep, struct epoch *e, struct ep_proc *d, int n)
{
	struct ep_proc *small;

	e->d = d;
	e->n = 0;
	for (int i = 0; i < n; i++) {
		settle_waits(d[i].own);
		settle_waits(d[i].main_cp);
		settle_waits(d[i].main_own);
	}
	for (int i = 0; i < n; i++)
		if (changed(&d[i]))
			d[e->n++] = d[i];
	epoch_fold_rows(e);
	/* d was as long as the job's list: keep the rows only. */
	small = realloc(e->d, (e->n ? e->n : 1) * sizeof(*d));
	if (small)
		e->d = small;
	epochs_step_stats(ep, e->start, e->end, true, &e->steps);
}

void epoch_set_recorded(struct epoch *e, struct ep_proc *d, int n, const struct ep_steps *s)
{
	e->d = d;
	e->n = n;
	e->steps = *s;
}

/* A new epoch of st is listed: past EP_MAX_EPOCHS (or rows), the older ones merge. */
static void listed(struct ep_stream *st)
{
	long rows = 0;

	st->n++;
	st->closed++;
	for (int i = 0; i < st->n; i++)
		rows += st->list[i].n;
	if (st->n > EP_MAX_EPOCHS || rows > EP_MAX_ALL_ROWS)
		ep_stream_merge_older(st);
}

static void close_epoch(struct epochs *ep, struct ep_stream *st,
			const struct ep_snap *end, bool complete)
{
	struct epoch *e = append(st);
	struct ep_proc *d;

	if (!e)
		return;
	e->label = e->last = st->open_label;
	e->start = st->open.ts;
	e->end = end->ts;
	e->complete = complete;
	/* A rank that began to run phases in it brought its earlier time too. */
	for (int p = 0; p < PH_NSHOWN; p++) {
		e->ph[p] = end->ph[p] > st->open.ph[p] ? end->ph[p] - st->open.ph[p] : 0;
		for (int c = 0; c < TB_NCAT; c++)
			e->ph_cp[p][c] = end->ph_cp[p][c] > st->open.ph_cp[p][c] ?
					 end->ph_cp[p][c] - st->open.ph_cp[p][c] : 0;
	}
	/*
	 * A job that sums its epochs up names each one's end; its first line
	 * naming the first one may be a step or progress line well into it.
	 */
	e->late_start = !st->closed && st->first_by_line && st->summed;
	e->gpu = gu_close_new(ep->gu, &st->gu_h, e->end);
	d = calloc(end->n ? end->n : 1, sizeof(*d));
	if (!d)
		return;
	for (int i = 0; i < end->n; i++) {
		const struct ep_tot *a = ep_tot_at(&st->open, i), *b = &end->p[i];

		if (b->absent)
			continue;
		ep_row_of(&d[i], b);
		for (int c = 0; c < TB_NCAT; c++) {
			d[i].own[c] = b->own[c] - (a ? a->own[c] : 0);
			d[i].main_cp[c] = b->main_cp[c] - (a ? a->main_cp[c] : 0);
			d[i].main_own[c] = b->main_own[c] - (a ? a->main_own[c] : 0);
		}
	}
	ep_folds_into_rows(st, d, end->n);
	epoch_set_procs(ep, e, d, end->n);
	listed(st);
}

struct epoch *epochs_add(struct epochs *ep, enum ep_source s, long label, uint64_t start,
			 uint64_t end, bool complete)
{
	struct epoch *e = append(&ep->src[s]);

	if (!e)
		return NULL;
	e->label = e->last = label;
	e->start = start;
	e->end = end > start ? end : start;
	e->complete = complete;
	listed(&ep->src[s]);
	/* Merging may have moved it: it is the last one either way. */
	return &ep->src[s].list[ep->src[s].n - 1];
}

static void free_stream(struct ep_stream *st)
{
	for (int i = 0; i < st->n; i++) {
		free(st->list[i].d);
		gu_win_drop(&st->list[i].gpu);
	}
	free(st->list);
	free(st->open.p);
	free(st->pend);
	free(st->folds);
	memset(st, 0, sizeof(*st));
}

void epochs_keep_source(struct epochs *ep, enum ep_source s)
{
	for (int i = 0; i < EP_NSRC; i++)
		if (i != (int)s)
			free_stream(&ep->src[i]);
}

bool epochs_keep_label(struct epochs *ep, enum ep_source s, long label)
{
	struct ep_stream *st = &ep->src[s];

	for (int i = 0; i < st->n; i++) {
		if (st->list[i].label != label)
			continue;
		for (int k = 0; k < st->n; k++)
			if (k != i) {
				free(st->list[k].d);
				gu_win_drop(&st->list[k].gpu);
			}
		st->list[0] = st->list[i];
		st->n = 1;
		return true;
	}
	return false;
}

void epochs_add_gen(struct epochs *ep, const struct ep_worker_gen *g)
{
	struct ep_worker_gen *n = tb_grow(ep->gens, &ep->capgens, ep->ngens + 1, sizeof(*n));

	if (!n)
		return;
	ep->gens = n;
	n[ep->ngens++] = *g;
	if (ep->ngens > EP_MAX_GENS)
		ep_gens_merge_older(ep, NULL);	/* a recording's: all ended */
}

/*
 * The two snapshots around ts: prev and cur, or older ones for a boundary
 * known late (a fork is judged a worker a few ticks after it).
 */
static void bracket(const struct epochs *ep, const struct ep_snap *cur, uint64_t ts,
		    const struct ep_snap **a, const struct ep_snap **b)
{
	const struct ep_snap *later = &ep->prev;

	*a = &ep->prev;
	*b = cur;
	if (ts >= ep->prev.ts)
		return;
	for (int i = ep->nhist - 1; i >= 0; i--) {
		if (ep->hist[i].ts <= ts) {
			*a = &ep->hist[i];
			*b = later;
			return;
		}
		later = &ep->hist[i];
	}
	*a = *b = later;	/* older than all we kept: the oldest */
}

static void place(struct epochs *ep, struct ep_stream *st, const struct ep_snap *cur)
{
	for (int i = 0; i < st->npend; i++) {
		const struct ep_snap *a, *b;
		struct ep_snap at;

		if (st->pend[i].ts <= ep->window_start && !st->is_open) {
			/* An epoch from the window's start: nothing counted before. */
			at = (struct ep_snap){ .ts = ep->window_start };
		} else {
			bracket(ep, cur, st->pend[i].ts, &a, &b);
			if (interp(ep, &at, a, b, st->pend[i].ts, cur))
				break;
		}
		if (st->is_open) {
			close_epoch(ep, st, &at, true);
			ep_snap_release(ep, &st->open);
		}
		st->nfolds = 0;		/* what folds from now on is the new epoch's */
		gu_drop(ep->gu, &st->gu_h);	/* never left open: a failed close */
		st->gu_h = ep->gu ? gu_open(ep->gu, at.ts) : -1;
		st->open = at;
		st->open_label = st->pend[i].label;
		st->is_open = true;
	}
	st->npend = 0;
}

/*
 * DataLoader worker generations. A child forked without exec is a worker
 * once it has lived EP_EXEC_GRACE_NS without exec'ing (or died so). A
 * parent's new worker starts a generation when none of its workers from
 * before is alive: PyTorch shuts an iterator's workers down before the
 * next epoch's iterator forks new ones.
 */

/* A batch came at ts, or a fetch began: for a fork (generation) before it. */
static void first_batch(uint64_t fork_ts, uint64_t *batch_ts, bool *in_data,
			unsigned int phase, uint64_t ts)
{
	bool data = phase == TB_PH_DATA || phase == TB_PH_PEND_DATA;

	if (*batch_ts || ts < fork_ts)
		return;
	if (data)
		*in_data = true;
	else if (*in_data || phase == TB_PH_BACKWARD)
		*batch_ts = ts;	/* the fetch ended; or, unnamed, the first backward */
}

/* Whether the parent's newest generation still waits for its first batch. */
static bool newest_waits(const struct epochs *ep, pid_t pid)
{
	for (int g = ep->ngens - 1; g >= 0; g--)
		if (ep->gens[g].parent == pid)
			return !ep->gens[g].batch_ts && ep->gens[g].merged <= 1;
	return false;
}

/* The training loop is its process's loop thread's (phases_trainer), else its main thread's. */
static bool is_loop_thread(const struct epochs *ep, pid_t pid, pid_t tid)
{
	const struct ph_thread *pt = phases_trainer(ep->phases, pid);

	return pt ? pt->tid == tid : pid == tid;
}

static void stall_on_phase(struct epochs *ep, pid_t pid, pid_t tid, unsigned int phase,
			   uint64_t ts)
{
	bool pending = false, waits;

	if (!is_loop_thread(ep, pid, tid))
		return;
	ep->phase_seen = true;
	waits = newest_waits(ep, pid);
	for (int i = 0; i < ep->nforks; i++)
		if (ep->forks[i].parent == pid) {
			/*
			 * An exec'd child waiting for its role (a spawn worker, or
			 * a daemon that is none) takes the batch only once the
			 * newest generation has had its own.
			 */
			pending |= !(ep->forks[i].waits_role && waits);
			first_batch(ep->forks[i].ts, &ep->forks[i].batch_ts,
				    &ep->forks[i].in_data, phase, ts);
		}
	/*
	 * The batch is a fork's not yet judged (its generation takes it):
	 * an older generation that has not served one by then (a validation
	 * loader's, with no backward to tell) is measured by its window.
	 * Else the newest generation's.
	 */
	if (pending)
		return;
	for (int g = ep->ngens - 1; g >= 0; g--) {
		struct ep_worker_gen *w = &ep->gens[g];

		if (w->parent != pid)
			continue;
		if (w->merged <= 1)
			first_batch(w->fork_ts, &w->batch_ts, &w->in_data, phase, ts);
		if (w->batch_ts && w->stall_s < 0) {
			w->stall_s = (w->batch_ts - w->fork_ts) / NS_PER_S;
			w->stall_err_s = 0;
		}
		break;
	}
}

void epochs_on_phase(struct epochs *ep, const struct tb_phase_event *e)
{
	if (is_loop_thread(ep, e->pid, e->tid) && e->ts > ep->loop_ev)
		ep->loop_ev = e->ts;
	passes_on_phase(ep, e);
	stall_on_phase(ep, e->pid, e->tid, e->phase, e->ts);
}

/*
 * Events are drained before the rows are read again: the rows are still
 * those of the last snapshot, so its entry for the process takes the new
 * loop thread's as they were then, and the deltas after it stay one
 * thread's. Older snapshots keep the thread before (docs/phases.md).
 */
void epochs_on_trainer(struct epochs *ep, const struct job *job, pid_t pid)
{
	const struct proc_rec *p = job_proc_const(job, pid);
	int i = p ? (int)(p - job->procs) : -1;
	struct ep_tot *t = i >= 0 && i < ep->prev.n && !ep->prev.p[i].absent ?
			   &ep->prev.p[i] : NULL;
	const struct thread_rec *mt;

	if (!t || t->pid != pid || t->final)
		return;
	mt = loop_thread(ep, p);
	for (int c = 0; c < TB_NCAT; c++) {
		t->main_cp[c] = mt ? mt->cp[c] : 0;
		t->main_own[c] = mt ? mt->own[c] : 0;
	}
	phases_main_before(ep->phases, ep->prev.ts, ep->prev.ph);
	memcpy(ep->prev.ph_set, ep->prev.ph, sizeof(ep->prev.ph_set));
	main_phase_rows(ep, job, false, ep->prev.ph_cp);
}

void epochs_on_fork(struct epochs *ep, pid_t pid, pid_t parent, uint64_t ts)
{
	struct ep_fork *f = tb_grow(ep->forks, &ep->capforks, ep->nforks + 1, sizeof(*f));
	int i;

	if (!f)
		return;
	ep->forks = f;
	if (ep->nforks >= EP_MAX_FORKS) {	/* a storm: the oldest goes unjudged */
		memmove(f, f + 1, (ep->nforks - 1) * sizeof(*f));
		ep->nforks--;
	}
	/* Forks on two CPUs can reach the ring buffer out of order. */
	for (i = ep->nforks; i > 0 && f[i - 1].ts > ts; i--)
		f[i] = f[i - 1];
	f[i] = (struct ep_fork){ pid, parent, ts, 0, false };
	ep->nforks++;
	ep->fork_seen = true;
}

void epochs_on_fold(struct epochs *ep, const struct job *job, const struct job_fold *f)
{
	for (int s = 0; s < EP_NSRC; s++) {
		struct ep_stream *st = &ep->src[s];

		if (st->is_open)	/* before the indexes change */
			ep_folds_on_fold(st, &ep->prev, f);
		ep_snap_remap(ep, &st->open, job, f);
	}
	ep_snap_remap(ep, &ep->prev, job, f);
	for (int i = 0; i < ep->nhist; i++)
		ep_snap_remap(ep, &ep->hist[i], job, f);
	if (ep->loop_end) {
		ep_snap_remap(ep, &ep->loop_a, job, f);
		ep_snap_remap(ep, &ep->loop_b, job, f);
	}
}

void epochs_on_exit(struct epochs *ep, pid_t pid, uint64_t ts)
{
	for (int i = ep->nworkers - 1; i >= 0; i--)
		if (ep->workers[i].pid == pid && !ep->workers[i].end) {
			ep->workers[i].end = ts;
			return;
		}
}

/* The main thread's critical-path data_wait of process pid at ts. */
static int64_t data_wait_at(const struct epochs *ep, const struct ep_snap *cur,
			    pid_t pid, uint64_t ts, double *err_s)
{
	const struct ep_snap *a, *b;
	int64_t va, vb;
	int i;

	bracket(ep, cur, ts, &a, &b);
	/* Interpolating can misplace at most what accrued from ts to b. */
	*err_s += b->ts > ts ? (b->ts - ts) / NS_PER_S : 0;
	for (i = b->n - 1; i >= 0 && b->p[i].pid != pid; i--)
		;
	if (i < 0)
		return 0;
	vb = b->p[i].main_cp[TB_DATA_WAIT];
	va = ep_tot_at(a, i) ? a->p[i].main_cp[TB_DATA_WAIT] : 0;
	return va + (int64_t)((vb - va) * frac(a, b, ts));
}

static int last_gen(const struct epochs *ep, pid_t parent)
{
	for (int g = ep->ngens - 1; g >= 0; g--)
		if (ep->gens[g].parent == parent)
			return g;
	return -1;
}

static bool alive_at(const struct proc_rec *p, uint64_t ts)
{
	return p->end_ns ? p->end_ns > ts : job_proc_alive(p);
}

/* Workers forked before tracing began (-p): found in /proc, not forked. */
static bool old_workers(const struct job *job, pid_t parent, pid_t self, uint64_t ts)
{
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *q = &job->procs[i];

		if (q->ppid == parent && q->pid != self && q->start_ns < ts &&
		    (q->flags & TB_PF_FORKED) && !(q->flags & TB_PF_EXECED) &&
		    alive_at(q, ts))
			return true;
	}
	return false;
}

static bool has_live_workers(const struct epochs *ep, const struct job *job,
			     pid_t parent, pid_t self, uint64_t ts)
{
	int g = last_gen(ep, parent);

	if (g < 0)
		return old_workers(job, parent, self, ts);
	for (int i = ep->nworkers - 1; i >= 0; i--) {
		const struct ep_worker *w = &ep->workers[i];

		if (w->gen == g && (!w->end || w->end > ts))
			return true;
	}
	return false;
}

/*
 * A generation opens an epoch, unless it is another parent's share of the
 * running one: each rank forks its own workers at about the same time, so
 * an epoch takes at most one generation from each parent.
 */
static int new_gen(struct epochs *ep, const struct job *job, const struct ep_snap *cur,
		   const struct ep_fork *f)
{
	struct ep_worker_gen *g = tb_grow(ep->gens, &ep->capgens, ep->ngens + 1, sizeof(*g));
	bool opens = !ep->gen_epochs;

	if (!g)
		return -1;
	ep->gens = g;
	for (int i = ep->ngens - 1; i >= 0 && g[i].epoch == ep->gen_epochs; i--)
		opens |= g[i].parent == f->parent;
	if (opens) {
		ep->gen_epochs++;
		if (tracks(ep, EP_WORKERS))
			add_pending(&ep->src[EP_WORKERS], f->ts, ep->gen_epochs);
	}
	g[ep->ngens] = (struct ep_worker_gen){
		.parent = f->parent, .fork_ts = f->ts, .nworkers = 1, .stall_s = -1,
		.epoch = ep->gen_epochs, .batch_ts = f->batch_ts, .in_data = f->in_data,
	};
	g[ep->ngens].dw_fork = data_wait_at(ep, cur, f->parent, f->ts, &g[ep->ngens].stall_err_s);
	if (f->batch_ts) {
		g[ep->ngens].stall_s = (f->batch_ts - f->ts) / NS_PER_S;
		g[ep->ngens].stall_err_s = 0;
	}
	if (++ep->ngens > EP_MAX_GENS)
		ep_gens_merge_older(ep, job);
	return ep->ngens - 1;	/* the newest: never merged, maybe moved */
}

static void add_worker(struct epochs *ep, const struct job *job,
		       const struct ep_snap *cur, const struct ep_fork *f, uint64_t end)
{
	struct ep_worker *w = tb_grow(ep->workers, &ep->capworkers, ep->nworkers + 1, sizeof(*w));
	int g;

	if (!w)
		return;
	ep->workers = w;
	if (has_live_workers(ep, job, f->parent, f->pid, f->ts)) {
		g = last_gen(ep, f->parent);
		if (g < 0)
			return;		/* joins workers forked before tracing */
		ep->gens[g].nworkers++;
		/* A batch that came while this fork waited to be judged. */
		if (!ep->gens[g].batch_ts && f->batch_ts && ep->gens[g].stall_s < 0) {
			ep->gens[g].batch_ts = f->batch_ts;
			ep->gens[g].stall_s = (f->batch_ts - ep->gens[g].fork_ts) / NS_PER_S;
			ep->gens[g].stall_err_s = 0;
		}
	} else {
		g = new_gen(ep, job, cur, f);
		if (g < 0)
			return;
	}
	w[ep->nworkers++] = (struct ep_worker){ f->pid, g, end };
}

/* When a process ended: its exit, else its last thread's; 0 while alive. */
static uint64_t ended(const struct proc_rec *p)
{
	uint64_t end = 0;

	if (p->end_ns || job_proc_alive(p))
		return p->end_ns;
	for (int i = 0; i < p->nthreads; i++)
		if (p->threads[i].end_ns > end)
			end = p->threads[i].end_ns;
	return end;
}

/*
 * A child that died within the grace without exec'ing: a helper (a
 * subshell running a builtin, a failed exec) wakes its parent as it exits
 * and has used a millisecond of CPU; a worker of an epoch shorter than
 * the grace starts up and makes batches (tens of ms), and wakes its
 * trainer for those the trainer waited on.
 */
static bool helper_died_young(const struct proc_rec *p)
{
	uint64_t tot[TB_NCAT];

	proc_totals(p, tot);
	return job_proc_fed(p) <= EP_HELPER_WAKES && tot[TB_CPU] < EP_HELPER_CPU_NS;
}

enum judged { JUDGE_WAIT, JUDGE_WORKER, JUDGE_NONE };

/*
 * A child that exec'd: a spawn-context worker once its role is (it fed
 * its trainer), else a subprocess (it ended, or runs as no worker: the
 * forkserver, a rank that ran a backward, a daemon). Not its role
 * trainer: before any backward, roles come from the process tree, where a
 * spawn worker busy importing torch for seconds is a trainer (its main
 * thread works; CI: the first pass's generations of mp.spawn ranks lost).
 */
static enum judged judge_execed(const struct ep_fork *f, const struct proc_rec *p,
				uint64_t now, bool final)
{
	if (p->role == TB_ROLE_WORKER)
		return JUDGE_WORKER;
	if (final || ended(p) || p->backward || now > f->ts + EP_SPAWN_ROLE_WAIT_NS)
		return JUDGE_NONE;
	return JUDGE_WAIT;
}

static enum judged judge(const struct ep_fork *f, const struct proc_rec *p, uint64_t now,
			 bool final)
{
	uint64_t end;

	if (!p)
		return JUDGE_NONE;
	if (p->flags & TB_PF_EXECED)
		return judge_execed(f, p, now, final);
	end = ended(p);
	if (!final && !end && now < f->ts + EP_EXEC_GRACE_NS)
		return JUDGE_WAIT;
	if (job_died_young(p) ||
	    (end && end < f->ts + EP_EXEC_GRACE_NS && helper_died_young(p)))
		return JUDGE_NONE;
	return JUDGE_WORKER;
}

/*
 * In fork order: a parent's workers join generations in the order it
 * forked them. A child that lives to serve batches is a worker; one that
 * died young may have been a helper. A fork in its exec grace holds those
 * after it; one that exec'd and waits for its role holds none.
 */
static void judge_forks(struct epochs *ep, const struct job *job,
			const struct ep_snap *cur, uint64_t now, bool final)
{
	bool held = false;
	int keep = 0;

	for (int i = 0; i < ep->nforks; i++) {
		struct ep_fork f = ep->forks[i];
		const struct proc_rec *p = job_proc_const(job, f.pid);
		enum judged v = held ? JUDGE_WAIT : judge(&f, p, now, final);

		if (v == JUDGE_WAIT) {
			f.waits_role = p && (p->flags & TB_PF_EXECED);
			held |= !f.waits_role;
			ep->forks[keep++] = f;
		} else if (v == JUDGE_WORKER) {
			add_worker(ep, job, cur, &f, ended(p));
		}
	}
	ep->nforks = keep;
}

/* The fork of the parent's next generation after gens[g]; 0 if none yet. */
static uint64_t next_gen_fork(const struct epochs *ep, int g)
{
	for (int i = g + 1; i < ep->ngens; i++)
		if (ep->gens[i].parent == ep->gens[g].parent)
			return ep->gens[i].fork_ts;
	return 0;
}

/*
 * With no batch to measure to (no training phases, or none came within
 * EP_GEN_BATCH_WAIT_NS), the parent's data wait in the first
 * EP_GEN_STALL_S after the fork, or until its next generation's fork.
 * At the end of tracing, a window cut short: over what there was.
 */
static void update_stalls(struct epochs *ep, const struct ep_snap *cur,
			  uint64_t now, bool final)
{
	uint64_t win = EP_GEN_STALL_S * NS_PER_S;

	for (int i = 0; i < ep->ngens; i++) {
		struct ep_worker_gen *g = &ep->gens[i];
		uint64_t end = g->fork_ts + win, next;

		/* Settled ones first: a daemon's generations run to thousands. */
		if (g->stall_s >= 0 || (now < end && !final))
			continue;
		next = next_gen_fork(ep, i);
		/* Its first batch will say, unless the parent forked again first. */
		if (ep->phase_seen && !final && !next && now < g->fork_ts + EP_GEN_BATCH_WAIT_NS)
			continue;
		if (next && next < end)
			end = next;	/* the next generation's stall is its own */
		if (end > now)
			end = now;
		g->stall_s = (data_wait_at(ep, cur, g->parent, end, &g->stall_err_s) -
			      g->dw_fork) / NS_PER_S;
		/* A wait open at fork_ts may since have turned out otherwise. */
		if (g->stall_s < 0)
			g->stall_s = 0;
	}
}

/*
 * Only the last generation of each parent is asked whether its workers
 * live (has_live_workers), and only about forks of the last second or so:
 * the other workers go, once a second.
 */
static void prune_workers(struct epochs *ep, uint64_t now)
{
	int k = 0;

	if (now < ep->next_prune)
		return;
	ep->next_prune = now + EP_HIST_NS;
	for (int i = 0; i < ep->nworkers; i++) {
		const struct ep_worker *w = &ep->workers[i];

		if (w->gen != last_gen(ep, ep->gens[w->gen].parent))
			continue;
		if (w->end && w->end + 2 * EP_HIST_NS < now)
			continue;
		ep->workers[k++] = *w;
	}
	ep->nworkers = k;
}

bool epochs_pending(const struct epochs *ep)
{
	for (int s = 0; s < EP_NSRC; s++)
		if (ep->src[s].npend)
			return true;
	return false;
}

uint64_t epochs_wake_at(const struct epochs *ep)
{
	uint64_t at = UINT64_MAX, win = EP_GEN_STALL_S * NS_PER_S;

	if (epochs_pending(ep))
		return 0;
	/* Totals soon after a fork: the generation's start splits them. */
	if (ep->fork_seen)
		at = ep->prev.ts + EP_FORK_REFRESH_NS;
	for (int i = 0; i < ep->ngens; i++) {
		uint64_t end = ep->gens[i].fork_ts + (ep->phase_seen ? EP_GEN_BATCH_WAIT_NS : win);

		if (ep->gens[i].stall_s < 0 && end < at)
			at = end;
	}
	return at;
}

/*
 * Keeps the snapshots a boundary judged late may fall between: the last
 * second's, at least EP_HIST_NS / EP_HIST_MAX apart (a fork storm
 * refreshes every few ms: closer ones would cover only the last 100 ms).
 */
static void push_hist(struct epochs *ep, uint64_t now)
{
	if (ep->nhist && ep->prev.ts < ep->hist[ep->nhist - 1].ts + EP_HIST_NS / EP_HIST_MAX)
		ep_snap_release(ep, &ep->hist[--ep->nhist]);
	while (ep->nhist) {
		uint64_t next = ep->nhist > 1 ? ep->hist[1].ts : ep->prev.ts;

		if (ep->nhist < EP_HIST_MAX && next + EP_HIST_NS > now)
			break;
		ep_snap_release(ep, &ep->hist[0]);
		ep->nhist--;
		memmove(ep->hist, ep->hist + 1, ep->nhist * sizeof(ep->hist[0]));
	}
	ep->hist[ep->nhist++] = ep->prev;
}

/* dst becomes a copy of src (its own array). */
static int snap_copy(struct epochs *ep, struct ep_snap *dst, const struct ep_snap *src)
{
	struct ep_tot *p;
	int cap;

	ep_snap_release(ep, dst);
	if (ep_snap_alloc(ep, dst, src->n))
		return -1;
	p = dst->p;
	cap = dst->cap;
	*dst = *src;
	dst->p = p;
	dst->cap = cap;
	memcpy(p, src->p, src->n * sizeof(*p));
	return 0;
}

/* The loop's last event came since the last tick: the ticks around it, kept. */
static void keep_loop_end(struct epochs *ep, const struct ep_snap *cur)
{
	if (ep->loop_ev <= ep->prev.ts || ep->loop_ev > cur->ts)
		return;
	if (snap_copy(ep, &ep->loop_a, &ep->prev) || snap_copy(ep, &ep->loop_b, cur)) {
		ep->loop_end = 0;	/* out of memory: the end of tracing, as before */
		return;
	}
	ep->loop_end = ep->loop_ev;
}

static void tick(struct epochs *ep, const struct job *job, uint64_t now, bool final)
{
	struct ep_snap cur;

	if (tracks(ep, EP_INTERVAL)) {
		uint64_t step = ep->interval_s * NS_PER_S;

		while (ep->next_window <= now) {
			add_pending(&ep->src[EP_INTERVAL], ep->next_window, ++ep->windows);
			ep->next_window += step;
		}
	}
	if (take_snap(ep, &cur, job, now, final))
		return;
	judge_forks(ep, job, &cur, now, final);
	update_stalls(ep, &cur, now, final);
	prune_workers(ep, now);
	for (int s = 0; s < EP_NSRC; s++)
		place(ep, &ep->src[s], &cur);
	keep_loop_end(ep, &cur);
	push_hist(ep, now);
	ep->prev = cur;
	ep->fork_seen = false;
}

void epochs_tick(struct epochs *ep, const struct job *job, uint64_t now)
{
	tick(ep, job, now, false);
}

/*
 * The label of the line epoch (closed or open) whose start is nearest ts,
 * within tol; 0 and false when none is, or it is merged (a range).
 */
static bool line_label_at(const struct ep_stream *l, uint64_t ts, uint64_t tol, long *label)
{
	uint64_t best = tol + 1;

	for (int i = 0; i <= l->n; i++) {
		bool open = i == l->n;
		uint64_t at = open ? l->open.ts : l->list[i].start;
		uint64_t d = at > ts ? at - ts : ts - at;

		if (open && !l->is_open)
			break;
		if (d >= best)
			continue;
		if (!open && l->list[i].last != l->list[i].label)
			return false;
		best = d;
		*label = open ? l->open_label : l->list[i].label;
	}
	return best <= tol;
}

/*
 * Passes number their epochs from 1, where the job's lines may number
 * them otherwise: attached mid-run, the first pass seen whole is the job's
 * epoch 2. Each pass that a line epoch starts near (within a quarter of
 * the pass) says how far apart the two numberings are; where every such
 * pass says the same, the passes take the job's numbers (epochs not yet
 * placed too). Any disagreement, or a merged range, leaves them as they
 * are. Once shifted, they agree: calling it again changes nothing. At the
 * end only (epochs_finish, a recording's reader): while the run goes on, a
 * later pass may disagree, and a label shown or recorded cannot be taken
 * back; the live view numbers passes from 1.
 */
void epochs_align_labels(struct epochs *ep, uint64_t now)
{
	struct ep_stream *p = &ep->src[EP_PASSES];
	const struct ep_stream *l = &ep->src[EP_REGEX];
	long off = 0, lab = 0;
	bool have = false;

	for (int i = 0; i <= p->n; i++) {
		bool open = i == p->n;
		uint64_t a = open ? p->open.ts : p->list[i].start;
		uint64_t b = open ? now : p->list[i].end;
		long mine = open ? p->open_label : p->list[i].label;

		if (open && !p->is_open)
			break;
		if (!open && p->list[i].last != p->list[i].label)
			return;
		if (b <= a || !line_label_at(l, a, (b - a) / 4, &lab))
			continue;
		if (have && lab - mine != off)
			return;
		off = lab - mine;
		have = true;
	}
	if (!off)
		return;
	for (int i = 0; i < p->n; i++) {
		p->list[i].label += off;
		p->list[i].last += off;
	}
	p->open_label += off;
	for (int i = 0; i < p->npend; i++)
		p->pend[i].label += off;
	ep->passes += off;
	ep->pass_label_off += off;
}


/*
 * What runs after the last epoch ended, no epoch of its own: the time after
 * a summary of the last epoch that no line has named since (the job's
 * teardown), or an open epoch shorter than EP_TAIL_S and than half the
 * complete one before (not the job's markers, not the windows asked for).
 * The reports show it as a tail line (the window's end minus the last
 * epoch's).
 */
static bool is_tail(const struct epochs *ep, const struct ep_stream *st, uint64_t now)
{
	const struct epoch *last = st->n ? &st->list[st->n - 1] : NULL;
	uint64_t len = now - st->open.ts;

	if (!last || !last->complete)
		return false;
	if (st->inferred)
		return true;
	/* The job's own marks and the windows asked for are epochs, however short. */
	if (st == &ep->src[EP_MARKER] || st == &ep->src[EP_INTERVAL])
		return false;
	return len < EP_TAIL_S * NS_PER_S && len < (last->end - last->start) / 2;
}

/*
 * Where the last epoch ends: at the loop threads' last phase event (the
 * job's last step, or the bracket after it), its processes' totals
 * between the ticks around it, its phases all of the loop's (they stop at
 * that event; a step pending then folded as the table folds it); at the
 * end of tracing when no loop ran, or it ran into it. The teardown after
 * it is no epoch's. Returns the end (at, or prev).
 */
static const struct ep_snap *last_epoch_end(struct epochs *ep, struct ep_snap *at)
{
	if (!ep->loop_end || ep->loop_end >= ep->prev.ts || ep->loop_a.ts > ep->loop_end ||
	    interp(ep, at, &ep->loop_a, &ep->loop_b, ep->loop_end, &ep->loop_b))
		return &ep->prev;
	memcpy(at->ph, ep->prev.ph, sizeof(at->ph));
	memcpy(at->ph_set, ep->prev.ph_set, sizeof(at->ph_set));
	memcpy(at->ph_cp, ep->prev.ph_cp, sizeof(at->ph_cp));
	return at;
}

/* Every trainer process has exited: the loop ended before tracing did. */
static bool trainers_ended(const struct job *job)
{
	int n = 0;

	for (int i = 0; i < job->nprocs; i++) {
		if (job->procs[i].role != TB_ROLE_TRAINER)
			continue;
		if (!job->procs[i].end_ns)
			return false;
		n++;
	}
	return n > 0;
}

/*
 * The loop thread's last step, that no fetch closed (a loop left with
 * `break`): where the phase table closed it at the thread's end
 * (ph_thread.ended_step), the same step count for both.
 */
static void close_ended_step(struct epochs *ep)
{
	if (ep->loop_src != EP_STEPS_FETCH || !ep->phases)
		return;
	for (int i = 0; i < ep->phases->nth; i++) {
		const struct ph_thread *pt = &ep->phases->th[i];

		if (pt->tid == ep->loop_tid && pt->ended_step)
			loop_close_at(ep, pt->ended_step);
	}
}

void epochs_finish(struct epochs *ep, const struct job *job, uint64_t now)
{
	struct ep_snap at = { 0 };
	const struct ep_snap *end;
	bool ended;

	close_ended_step(ep);
	tick(ep, job, now, true);
	end = last_epoch_end(ep, &at);
	/* Cut at the last step of a job that ended: complete, its teardown a tail. */
	ended = end == &at && trainers_ended(job);
	ep->ended = now;
	for (int s = 0; s < EP_NSRC; s++) {
		struct ep_stream *st = &ep->src[s];
		/* The windows asked for run to the end of tracing. */
		const struct ep_snap *e = s == EP_INTERVAL ? &ep->prev : end;

		/*
		 * A window that has just begun is no epoch, nor a tail (below),
		 * judged to the end of tracing as before the cut.
		 */
		if (st->is_open && e->ts > st->open.ts && !is_tail(ep, st, ep->prev.ts))
			close_epoch(ep, st, e, ended && e == end);
		ep_snap_release(ep, &st->open);
		gu_drop(ep->gu, &st->gu_h);	/* a tail, or one that just began */
		st->is_open = false;
	}
	ep_snap_release(ep, &at);
	epochs_align_labels(ep, now);
}

static long epochs_of(const struct epochs *ep, int s)
{
	return ep->src[s].n + ep->src[s].is_open;
}

/*
 * Passes and the job's own epoch lines disagree: the lines name more than
 * one epoch and passes closed a different number of them. Passes cannot
 * tell two training loaders apart (each one's end begins a pass), nor a
 * validation loader that starts no workers from the training loader's end;
 * the job's lines say what it calls an epoch. Closed epochs only: a line
 * and a pass begin the same epoch a few ms apart, and a summary's inferred
 * next epoch may be the teardown.
 */
static bool lines_disagree(const struct epochs *ep)
{
	const struct ep_stream *l = &ep->src[EP_REGEX];

	return tracks(ep, EP_REGEX) && epochs_of(ep, EP_REGEX) > 1 &&
	       l->closed != ep->src[EP_PASSES].closed;
}

/*
 * auto: the first source in enum ep_source's order that has an epoch.
 * Passes that never saw one end are one pass as far as they can tell: a
 * later source that sees more epochs (lines, worker generations of a loop
 * that breaks out of each pass) is taken instead; passes that disagree
 * with the job's lines yield to them.
 */
enum ep_source epochs_source(const struct epochs *ep)
{
	if (ep->want != EP_AUTO)
		return ep->want;
	for (int s = 0; s < EP_NSRC; s++) {
		if (!epochs_of(ep, s))
			continue;
		if (s == EP_PASSES && lines_disagree(ep))
			continue;
		if (s == EP_PASSES && !ep->pass_ended) {
			bool more = false;

			for (int l = s + 1; l < EP_NSRC; l++)
				more |= epochs_of(ep, l) > 1;
			if (more)
				continue;
		}
		return s;
	}
	return EP_NSRC;
}

void epochs_free(struct epochs *ep)
{
	for (int s = 0; s < EP_NSRC; s++)
		free_stream(&ep->src[s]);
	free(ep->prev.p);
	for (int i = 0; i < ep->nhist; i++)
		free(ep->hist[i].p);
	free(ep->loop_a.p);
	free(ep->loop_b.p);
	ep_pool_free(ep);
	free(ep->marks.t);
	free(ep->loop.t);
	free(ep->optim.t);
	free(ep->gens);
	free(ep->forks);
	free(ep->workers);
	if (ep->re_ok)
		regfree(&ep->re);
	memset(ep, 0, sizeof(*ep));
}
