// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "epochs_fold.h"

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p)
		abort();	/* as job.c: out of memory, nothing left to say */
	return p;
}

int ep_snap_alloc(struct epochs *ep, struct ep_snap *s, int n)
{
	int best = -1;

	if (n < 1)
		n = 1;
	for (int i = 0; i < ep->npool; i++)
		if (ep->pool[i].cap >= n && (best < 0 || ep->pool[i].cap < ep->pool[best].cap))
			best = i;
	if (best >= 0) {
		s->p = ep->pool[best].p;
		s->cap = ep->pool[best].cap;
		ep->pool[best] = ep->pool[--ep->npool];
	} else {
		s->cap = n + n / 4;	/* room for the job to grow a little */
		s->p = malloc(s->cap * sizeof(*s->p));
		if (!s->p)
			return -1;
	}
	s->n = n;
	return 0;
}

void ep_snap_release(struct epochs *ep, struct ep_snap *s)
{
	if (!s->p)
		return;
	if (ep->npool < EP_POOL) {
		ep->pool[ep->npool++] = (struct ep_snap){ .p = s->p, .cap = s->cap };
	} else {
		int small = 0;	/* the pool keeps the largest arrays */

		for (int i = 1; i < ep->npool; i++)
			if (ep->pool[i].cap < ep->pool[small].cap)
				small = i;
		if (ep->pool[small].cap < s->cap) {
			free(ep->pool[small].p);
			ep->pool[small] = (struct ep_snap){ .p = s->p, .cap = s->cap };
		} else {
			free(s->p);
		}
	}
	s->p = NULL;
	s->n = s->cap = 0;
}

void ep_pool_free(struct epochs *ep)
{
	for (int i = 0; i < ep->npool; i++)
		free(ep->pool[i].p);
	ep->npool = 0;
}

const struct ep_tot *ep_tot_at(const struct ep_snap *s, int i)
{
	return s->p && i < s->n && !s->p[i].absent ? &s->p[i] : NULL;
}

static void tot_identity(struct ep_tot *t, const struct proc_rec *p)
{
	memset(t, 0, sizeof(*t));
	t->pid = p->pid;
	t->ppid = p->ppid;
	t->role = p->role;
	t->folded = p->folded;
	t->start = p->start_ns;
	t->end = p->end_ns;
}

/* Nothing of p's totals can change: it ended, and no thread has a slot left. */
static bool tot_final(const struct proc_rec *p)
{
	if (p->folded || !p->end_ns)
		return false;
	for (int i = 0; i < p->nthreads; i++)
		if (p->threads[i].slot >= 0)
			return false;
	return true;
}

/*
 * A snapshot is taken at every tick and soon after every fork: its reads
 * of each process's thread rows, most of them long ended in a job that
 * churns processes, were a quarter of a soak's CPU (cache misses). A final
 * entry is copied on; a thread row added since (read late) reads again.
 */
bool ep_tot_reusable(const struct ep_tot *before, const struct proc_rec *p)
{
	return before && before->final && !before->absent && before->pid == p->pid &&
	       before->start == p->start_ns && before->nthreads == p->nthreads && !p->folded;
}

void ep_tot_of(struct ep_tot *t, const struct proc_rec *p, const struct thread_rec *mt,
	       const struct ep_tot *before)
{
	uint64_t own[TB_NCAT];

	tot_identity(t, p);	/* a role may change after the end */
	if (ep_tot_reusable(before, p)) {
		memcpy(t->own, before->own, sizeof(t->own));
		memcpy(t->main_cp, before->main_cp, sizeof(t->main_cp));
		memcpy(t->main_own, before->main_own, sizeof(t->main_own));
		t->final = true;
		t->nthreads = before->nthreads;
		return;
	}
	proc_totals(p, own);
	for (int c = 0; c < TB_NCAT; c++) {
		t->own[c] = own[c];
		t->main_cp[c] = mt ? mt->cp[c] : 0;
		t->main_own[c] = mt ? mt->own[c] : 0;
	}
	t->final = tot_final(p);
	t->nthreads = p->nthreads;
}

void ep_row_of(struct ep_proc *d, const struct ep_tot *t)
{
	memset(d, 0, sizeof(*d));
	d->pid = t->pid;
	d->ppid = t->ppid;
	d->role = t->role;
	d->folded = t->folded;
	d->start = t->start;
	d->end = t->end;
}

static void add_times(int64_t *dst_own, int64_t *dst_cp, int64_t *dst_mown,
		      const int64_t *own, const int64_t *cp, const int64_t *mown)
{
	for (int c = 0; c < TB_NCAT; c++) {
		dst_own[c] += own[c];
		dst_cp[c] += cp[c];
		dst_mown[c] += mown[c];
	}
}

void ep_snap_remap(struct epochs *ep, struct ep_snap *s, const struct job *job,
		   const struct job_fold *f)
{
	int n = s->n < f->nold ? s->n : f->nold;
	struct ep_snap out = { .ts = s->ts };
	struct ep_tot *np;

	if (!s->p)
		return;
	if (ep_snap_alloc(ep, &out, f->nnew))
		abort();	/* as job.c: out of memory, nothing left to say */
	np = out.p;
	memset(np, 0, f->nnew * sizeof(*np));
	for (int k = 0; k < f->nnew; k++)
		np[k].absent = true;
	/* The rows that moved first: an aggregate may be one of them. */
	for (int i = 0; i < n; i++)
		if (!f->merged[i])
			np[f->to[i]] = s->p[i];
	for (int i = 0; i < n; i++) {
		const struct ep_tot *o = &s->p[i];
		struct ep_tot *d = &np[f->to[i]];

		if (!f->merged[i] || o->absent)
			continue;
		if (d->absent)
			tot_identity(d, &job->procs[f->to[i]]);
		add_times(d->own, d->main_cp, d->main_own, o->own, o->main_cp, o->main_own);
	}
	/* The phases are the loop threads', not the processes': they stay. */
	memcpy(out.ph, s->ph, sizeof(out.ph));
	memcpy(out.ph_set, s->ph_set, sizeof(out.ph_set));
	memcpy(out.ph_cp, s->ph_cp, sizeof(out.ph_cp));
	ep_snap_release(ep, s);
	*s = out;
	s->n = f->nnew;
}

static bool any_time(const int64_t own[TB_NCAT], const int64_t cp[TB_NCAT])
{
	for (int c = 0; c < TB_NCAT; c++)
		if (own[c] || cp[c])
			return true;
	return false;
}

static struct ep_fold_tally *fold_entry(struct ep_stream *st, int proc)
{
	struct ep_fold_tally *e;

	for (int i = 0; i < st->nfolds; i++)
		if (st->folds[i].proc == proc)
			return &st->folds[i];
	e = realloc(st->folds, (st->nfolds + 1) * sizeof(*e));
	if (!e)
		abort();
	st->folds = e;
	e = &st->folds[st->nfolds++];
	memset(e, 0, sizeof(*e));
	e->proc = proc;
	return e;
}

void ep_folds_on_fold(struct ep_stream *st, const struct ep_snap *prev,
		      const struct job_fold *f)
{
	struct ep_fold_tally *old = st->folds;
	int nold = st->nfolds;

	/* The aggregates' entries follow them (two merged: one entry). */
	st->folds = NULL;
	st->nfolds = 0;
	for (int i = 0; i < nold; i++) {
		struct ep_fold_tally *e = fold_entry(st, f->to[old[i].proc]);

		e->n += old[i].n;
		worker_tally_merge(&e->tally, &old[i].tally);
	}
	free(old);
	/* A process folded now: its time in the open epoch is final. */
	for (int i = 0; i < f->nold; i++) {
		const struct ep_tot *b = f->merged[i] ? ep_tot_at(prev, i) : NULL;
		const struct ep_tot *a = ep_tot_at(&st->open, i);
		int64_t own[TB_NCAT], cp[TB_NCAT];
		struct ep_fold_tally *e;

		if (!b || b->folded)
			continue;	/* an aggregate's own entry says it */
		for (int c = 0; c < TB_NCAT; c++) {
			own[c] = b->own[c] - (a ? a->own[c] : 0);
			cp[c] = b->main_cp[c] - (a ? a->main_cp[c] : 0);
		}
		if (!any_time(own, cp))
			continue;
		e = fold_entry(st, f->to[i]);
		e->n++;
		if (b->role == TB_ROLE_WORKER)
			worker_tally_add(&e->tally, b->pid, own);
	}
}

void ep_folds_into_rows(struct ep_stream *st, struct ep_proc *d, int n)
{
	for (int i = 0; i < n; i++)
		if (d[i].folded)
			d[i].folded = 1;	/* none counted: at least one */
	for (int i = 0; i < st->nfolds; i++) {
		const struct ep_fold_tally *e = &st->folds[i];

		if (e->proc < n && d[e->proc].folded && e->n) {
			d[e->proc].folded = e->n;
			d[e->proc].tally = e->tally;
		}
	}
}

/* ---- an epoch's rows ---- */

static void add_row(struct ep_proc *g, const struct ep_proc *d)
{
	if (!g->folded || d->start < g->start)
		g->start = d->start;
	if (d->end > g->end)
		g->end = d->end;
	add_times(g->own, g->main_cp, g->main_own, d->own, d->main_cp, d->main_own);
	if (d->folded)
		worker_tally_merge(&g->tally, &d->tally);
	else if (d->role == TB_ROLE_WORKER)
		worker_tally_add(&g->tally, d->pid, d->own);
	g->folded += d->folded ? d->folded : 1;
}

static struct ep_proc *group(struct ep_proc *g, int *ng, pid_t ppid, enum tb_role role)
{
	for (int i = 0; i < *ng; i++)
		if (g[i].ppid == ppid && g[i].role == role)
			return &g[i];
	memset(&g[*ng], 0, sizeof(g[0]));
	g[*ng].ppid = ppid;
	g[*ng].role = role;
	return &g[(*ng)++];
}

/* Rows of processes that ended in the epoch (or all but trainers) per parent and role. */
static void fold_rows(struct epoch *e, bool all)
{
	struct ep_proc *g = xcalloc(e->n, sizeof(*g));
	int k = 0, ng = 0;

	for (int i = 0; i < e->n; i++) {
		const struct ep_proc *d = &e->d[i];
		bool fold = d->folded || (d->end && d->end <= e->end) ||
			    (all && d->role != TB_ROLE_TRAINER);

		if (fold)
			add_row(group(g, &ng, d->ppid, d->role), d);
		else
			e->d[k++] = *d;
	}
	memcpy(&e->d[k], g, ng * sizeof(*g));
	e->n = k + ng;
	free(g);
}

void epoch_fold_rows(struct epoch *e)
{
	if (e->n > EP_MAX_ROWS)
		fold_rows(e, false);
	if (e->n > EP_MAX_ROWS)
		fold_rows(e, true);
}

/* ---- merging the older half ---- */

static void merge_steps(struct ep_steps *a, const struct ep_steps *b)
{
	if (!b->count)
		return;
	if (!a->count) {
		*a = *b;
		return;
	}
	if (b->min_ms < a->min_ms)
		a->min_ms = b->min_ms;
	if (b->max_ms > a->max_ms)
		a->max_ms = b->max_ms;
	a->total_ms += b->total_ms;
	a->sum_sq += b->sum_sq;
	a->syncs += b->syncs;
	a->count += b->count;
}

static bool same_row(const struct ep_proc *x, const struct ep_proc *y)
{
	if (x->folded || y->folded)
		return x->folded && y->folded && x->ppid == y->ppid && x->role == y->role;
	return x->pid == y->pid && x->start == y->start;
}

/* b's time into a: one epoch from a's start to b's end. */
static void merge_epochs(struct epoch *a, struct epoch *b)
{
	struct ep_proc *d = xcalloc(a->n + b->n, sizeof(*d));
	int n = a->n;

	memcpy(d, a->d, a->n * sizeof(*d));
	for (int j = 0; j < b->n; j++) {
		int i;

		for (i = 0; i < n && !same_row(&d[i], &b->d[j]); i++)
			;
		if (i == n) {
			d[n++] = b->d[j];
			continue;
		}
		if (d[i].folded) {
			d[i].folded += b->d[j].folded;
			worker_tally_merge(&d[i].tally, &b->d[j].tally);
		}
		if (b->d[j].end > d[i].end || !b->d[j].end)
			d[i].end = b->d[j].end;
		add_times(d[i].own, d[i].main_cp, d[i].main_own, b->d[j].own, b->d[j].main_cp,
			  b->d[j].main_own);
	}
	free(a->d);
	free(b->d);
	a->d = d;
	a->n = n;
	a->last = b->last;
	a->end = b->end;
	a->complete = a->complete && b->complete;
	for (int p = 0; p < PH_NSHOWN; p++) {
		a->ph[p] += b->ph[p];
		for (int c = 0; c < TB_NCAT; c++)
			a->ph_cp[p][c] += b->ph_cp[p][c];
	}
	merge_steps(&a->steps, &b->steps);
	gu_win_join(&a->gpu, &b->gpu);
	fold_rows(a, false);	/* an old stretch: the processes that ended, summed */
	epoch_fold_rows(a);
	d = realloc(a->d, (a->n ? a->n : 1) * sizeof(*d));
	if (d)
		a->d = d;
}

void ep_stream_merge_older(struct ep_stream *st)
{
	int half = st->n / 2 & ~1, k = 0;

	if (half < 2)
		half = st->n & ~1;	/* rows past the budget in very few epochs */

	for (int i = 0; i < half; i += 2) {
		merge_epochs(&st->list[i], &st->list[i + 1]);
		st->list[k++] = st->list[i];
	}
	memmove(&st->list[k], &st->list[half], (st->n - half) * sizeof(st->list[0]));
	st->n = k + st->n - half;
}

/* Which generations are their parent's first and last. */
static void firsts_lasts(const struct epochs *ep, bool *first, bool *last)
{
	for (int g = 0; g < ep->ngens; g++) {
		first[g] = last[g] = true;
		for (int h = 0; h < ep->ngens && (first[g] || last[g]); h++) {
			if (ep->gens[h].parent != ep->gens[g].parent || h == g)
				continue;
			if (h < g)
				first[g] = false;
			else
				last[g] = false;
		}
	}
}

static int gen_count(const struct ep_worker_gen *g)
{
	return g->merged ? g->merged : 1;
}

static void merge_gen(struct ep_worker_gen *a, const struct ep_worker_gen *b)
{
	a->nworkers += b->nworkers;
	a->stall_s += b->stall_s;
	a->stall_err_s += b->stall_err_s;
	a->merged = gen_count(a) + gen_count(b);
}

/*
 * A parent's first generation (no re-fork) and last (its workers may
 * still join it) stay; so does one whose stall is still being measured.
 * Re-forks merge with the next of the same parent, or, if that is not
 * enough, with the next re-fork of any parent (the parent is the first's).
 * A node daemon sees parents come and go by the thousand, each with a
 * first and a last: when even that is not enough, the generations of
 * parents that have ended merge too, first and last alike.
 */
enum gen_pass { GP_SAME_PARENT, GP_ANY_PARENT, GP_ENDED };

static bool parent_ended(const struct job *job, pid_t parent)
{
	const struct proc_rec *p = job ? job_proc_const(job, parent) : NULL;

	return !p || !job_proc_alive(p);
}

static bool mergeable(const struct epochs *ep, const struct job *job, const bool *first,
		      const bool *last, int g, enum gen_pass pass)
{
	if (ep->gens[g].stall_s < 0)
		return false;
	if (pass == GP_ENDED)
		return parent_ended(job, ep->gens[g].parent);
	return !first[g] && !last[g];
}

/* Merges each mergeable g with the next one (of the same parent if so passed); how many went. */
static int merge_pass(struct epochs *ep, const struct job *job, const bool *first,
		      const bool *last, bool *gone, int *map, int half, enum gen_pass pass)
{
	int merged = 0;

	for (int g = 0; g < half; g++) {
		int h;

		if (gone[g] || !mergeable(ep, job, first, last, g, pass))
			continue;
		for (h = g + 1; h < half; h++)
			if (!gone[h] && mergeable(ep, job, first, last, h, pass) &&
			    (pass != GP_SAME_PARENT || ep->gens[h].parent == ep->gens[g].parent))
				break;
		if (h >= half)
			continue;
		merge_gen(&ep->gens[g], &ep->gens[h]);
		gone[h] = true;
		map[h] = g;
		merged++;
	}
	return merged;
}

void ep_gens_merge_older(struct epochs *ep, const struct job *job)
{
	int n = ep->ngens, half = n / 2, k = 0, left = n, *map = xcalloc(n, sizeof(int));
	bool *first = xcalloc(n, sizeof(bool)), *last = xcalloc(n, sizeof(bool));
	bool *gone = xcalloc(n, sizeof(bool));

	firsts_lasts(ep, first, last);
	for (enum gen_pass pass = GP_SAME_PARENT; pass <= GP_ENDED && left > EP_MAX_GENS; pass++)
		left -= merge_pass(ep, job, first, last, gone, map, half, pass);
	for (int g = 0; g < n; g++)
		if (!gone[g]) {
			ep->gens[k] = ep->gens[g];
			map[g] = k++;
		}
	for (int g = 0; g < n; g++)
		if (gone[g])
			map[g] = map[map[g]];
	for (int i = 0; i < ep->nworkers; i++)
		ep->workers[i].gen = map[ep->workers[i].gen];
	ep->ngens = k;
	free(map);
	free(first);
	free(last);
	free(gone);
}

/* ---- for the reports ---- */

enum tb_role ep_row_role(const struct job *job, const struct ep_proc *d)
{
	const struct proc_rec *p;

	if (d->folded)
		return d->role;
	/* The process that had started by the row's end: pids are reused. */
	p = job_proc_at((struct job *)job, d->pid, d->end ? d->end : UINT64_MAX);
	return p && !p->folded ? p->role : d->role;
}

const struct epoch *ep_stream_closed(const struct ep_stream *st, long k)
{
	long i = k - (st->closed - st->n);

	return i >= 0 && i < st->n ? &st->list[i] : NULL;
}
