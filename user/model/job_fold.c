// SPDX-License-Identifier: BSD-3-Clause
/*
 * Folding: exited processes and threads that nothing needs one by one any
 * more are summed into aggregates, so that what the job keeps stops
 * growing while every total stays exact (job.h says when). An exited
 * process goes into the aggregate of its parent and role; an exited
 * thread of a process that stays listed goes into that process's own
 * aggregate thread. An aggregate whose parent folds moves up to the
 * grandparent's (or to parent 0 when none is listed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"

struct cand {
	uint64_t end;
	int proc, thread;	/* thread -1: the whole process */
};

struct agg {
	pid_t ppid;
	enum tb_role role;
	int old;		/* its index before the fold; -1: made now */
	int new;
};

struct folding {
	struct job *job;
	uint64_t now;
	bool *proc;		/* [nold]: folds into an aggregate */
	bool *thr;		/* [thr_off]: an exited thread folds in its process */
	int *agg_of;		/* [nold]: its aggregate in aggs, -1 if none */
	struct agg *aggs;
	int naggs;
	struct job_fold f;
};

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p)
		abort();	/* as job.c: out of memory, nothing left to say */
	return p;
}

/* The latest end of a process and its threads. */
static uint64_t proc_end(const struct proc_rec *p)
{
	uint64_t end = p->end_ns;

	for (int i = 0; i < p->nthreads; i++)
		if (p->threads[i].end_ns > end)
			end = p->threads[i].end_ns;
	return end;
}

/*
 * Exited, every thread's totals final (its slot freed), not named by the
 * user (unless job->fold_roots), and no live process below it: the job a
 * process belongs to is its topmost listed ancestor's (metrics.c), and
 * must not change under it.
 */
static bool proc_final(const struct job *job, const bool *live_below, int i)
{
	const struct proc_rec *p = &job->procs[i];

	if (p->folded || job_proc_alive(p) || live_below[i])
		return false;
	if (p->root && !job->fold_roots)
		return false;
	for (int i = 0; i < p->nthreads; i++)
		if (p->threads[i].slot >= 0)
			return false;
	return true;
}

/*
 * An exited thread with final totals that may fold on its own: not a main
 * thread, nor the trainer thread (tt: a loop thread that ended in a process
 * that lives on, a Ray worker's, still stands for its process).
 */
static bool thread_final(const struct proc_rec *p, const struct thread_rec *t,
			 const struct thread_rec *tt)
{
	return t->end_ns && t->slot < 0 && !t->folded && t->tid != p->pid && t != tt;
}

static int by_end(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->end < y->end ? -1 : x->end > y->end;
}

static int exited_threads(const struct proc_rec *p)
{
	int n = 0;

	for (int j = 0; j < p->nthreads; j++)
		n += p->threads[j].end_ns && !p->threads[j].folded;
	return n;
}

/* How far the kept exited processes and threads are over their caps. */
static void overs(const struct job *job, int *procs_over, int *threads_over)
{
	*procs_over = -JOB_MAX_EXITED_PROCS;
	*threads_over = -JOB_MAX_EXITED_THREADS;
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		if (p->folded)
			continue;
		*procs_over += !job_proc_alive(p);
		*threads_over += exited_threads(p);
	}
}

/* [nprocs]: the processes with a live descendant listed (ppid chains). */
static bool *live_below(const struct job *job)
{
	bool *below = xcalloc(job->nprocs, sizeof(*below));

	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i], *up;
		int hops = 0;

		if (p->folded || !job_proc_alive(p))
			continue;
		/* Marked already: so is the rest of its chain. */
		while ((up = job_proc_const(job, p->ppid)) && up != p && !up->folded &&
		       !below[up - job->procs] && hops++ < 64) {
			below[up - job->procs] = true;
			p = up;
		}
	}
	return below;
}

/* What may fold (ended before settled), oldest end first. */
static struct cand *candidates(const struct job *job, uint64_t settled, int *n)
{
	bool *below = live_below(job);
	struct cand *c = NULL;
	int cap = 0;

	*n = 0;
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];
		bool final = proc_final(job, below, i);
		const struct thread_rec *tt;

		if (p->folded)
			continue;
		tt = job_trainer_thread(p);
		for (int j = final ? -1 : 0; j < (final ? 0 : p->nthreads); j++) {
			uint64_t end = j < 0 ? proc_end(p) : p->threads[j].end_ns;

			if (end > settled || (j >= 0 && !thread_final(p, &p->threads[j], tt)))
				continue;
			if (*n == cap) {
				cap = cap ? 2 * cap : 256;
				c = realloc(c, cap * sizeof(*c));
				if (!c)
					abort();
			}
			c[(*n)++] = (struct cand){ end, i, j };
		}
	}
	free(below);
	if (*n)		/* c is NULL with none: qsort's pointer must not be */
		qsort(c, *n, sizeof(*c), by_end);
	return c;
}

/*
 * Marks what folds: past the floor (the last exited kept whatever their
 * age) and older than the age; or, over a cap, the oldest whatever their
 * age.
 */
static int select_folds(struct folding *fo, uint64_t settled)
{
	struct job *job = fo->job;
	int n, procs_over, threads_over, procs_spare, threads_spare, taken = 0;
	struct cand *c;

	overs(job, &procs_over, &threads_over);
	if (fo->now < job->next_fold && procs_over <= 0 && threads_over <= 0)
		return 0;
	procs_spare = procs_over + JOB_MAX_EXITED_PROCS - JOB_KEEP_EXITED_PROCS;
	threads_spare = threads_over + JOB_MAX_EXITED_THREADS - JOB_KEEP_EXITED_THREADS;
	c = candidates(job, settled, &n);
	for (int k = 0; k < n; k++) {
		const struct proc_rec *p = &job->procs[c[k].proc];
		bool proc = c[k].thread < 0;
		bool capped = threads_over > 0 || (proc && procs_over > 0);
		bool young = c[k].end + JOB_FOLD_AGE_NS > fo->now;

		if (!capped && young)
			break;		/* the rest are younger still */
		if (!capped && (proc ? procs_spare : threads_spare) <= 0)
			continue;
		if (proc) {
			fo->proc[c[k].proc] = true;
			procs_over--;
			procs_spare--;
			threads_over -= exited_threads(p);
			threads_spare -= exited_threads(p);
		} else {
			fo->thr[fo->f.thr_off[c[k].proc] + c[k].thread] = true;
			threads_over--;
			threads_spare--;
		}
		taken++;
	}
	free(c);
	return taken;
}

/* Where the children of ppid fold: ppid while it is listed, else up; 0: none. */
static pid_t parent_key(const struct folding *fo, pid_t ppid)
{
	for (int depth = 0; depth < 16 && ppid > 0; depth++) {
		const struct proc_rec *p = job_proc_const(fo->job, ppid);

		if (!p)
			return 0;
		if (!fo->proc[p - fo->job->procs])
			return ppid;
		ppid = p->ppid;
	}
	return 0;
}

static int find_agg(struct folding *fo, pid_t ppid, enum tb_role role)
{
	int i;

	for (i = 0; i < fo->naggs; i++)
		if (fo->aggs[i].ppid == ppid && fo->aggs[i].role == role)
			return i;
	if (fo->naggs >= JOB_MAX_AGGREGATES && ppid)
		return find_agg(fo, 0, role);
	fo->aggs = realloc(fo->aggs, (fo->naggs + 1) * sizeof(*fo->aggs));
	if (!fo->aggs)
		abort();
	fo->aggs[fo->naggs] = (struct agg){ ppid, role, -1, -1 };
	return fo->naggs++;
}

/*
 * The aggregates: those there are, under their keys; then where each
 * folding process and each aggregate whose parent folds goes.
 */
static void assign_aggs(struct folding *fo)
{
	struct job *job = fo->job;
	int nold = fo->f.nold;

	for (int i = 0; i < nold; i++) {
		struct proc_rec *p = &job->procs[i];

		fo->agg_of[i] = -1;
		if (!p->folded)
			continue;
		fo->agg_of[i] = find_agg(fo, p->ppid, p->role);
		if (fo->aggs[fo->agg_of[i]].old < 0)
			fo->aggs[fo->agg_of[i]].old = i;
	}
	for (int i = 0; i < nold; i++) {
		struct proc_rec *p = &job->procs[i];
		pid_t key;
		int a;

		if (!fo->proc[i] && !p->folded)
			continue;
		key = parent_key(fo, p->ppid);
		if (p->folded && key == p->ppid)
			continue;	/* stays where it is */
		a = find_agg(fo, key, p->role);
		if (p->folded && fo->aggs[a].old < 0) {
			fo->aggs[fo->agg_of[i]].ppid = -1;	/* moves up, whole */
			fo->aggs[a].old = i;
			fo->agg_of[i] = a;
			p->ppid = key;
			continue;
		}
		if (p->folded)
			fo->proc[i] = true;	/* merges into another aggregate */
		fo->agg_of[i] = a;
	}
}

/* New indexes: kept processes in order, then the aggregates made now. */
static void number(struct folding *fo)
{
	int k = 0;

	for (int i = 0; i < fo->f.nold; i++) {
		if (fo->proc[i])
			continue;
		fo->f.to[i] = k++;
		if (fo->agg_of[i] >= 0)
			fo->aggs[fo->agg_of[i]].new = fo->f.to[i];
	}
	for (int a = 0; a < fo->naggs; a++)
		if (fo->aggs[a].old < 0 && fo->aggs[a].ppid >= 0)
			fo->aggs[a].new = k++;
	for (int i = 0; i < fo->f.nold; i++)
		if (fo->proc[i]) {
			fo->f.to[i] = fo->aggs[fo->agg_of[i]].new;
			fo->f.merged[i] = true;
		}
	fo->f.nnew = k;
}

static void add_thread(struct thread_rec *dst, const struct thread_rec *t)
{
	if (!dst->folded) {
		dst->start_ns = t->start_ns;
		memcpy(dst->comm, t->comm, sizeof(dst->comm));
	} else {
		if (t->start_ns < dst->start_ns)
			dst->start_ns = t->start_ns;
		if (strncmp(dst->comm, t->comm, sizeof(dst->comm)))
			snprintf(dst->comm, sizeof(dst->comm), "(various)");
	}
	if (t->end_ns > dst->end_ns)
		dst->end_ns = t->end_ns;
	for (int c = 0; c < TB_NCAT; c++) {
		dst->own[c] += t->own[c];
		dst->cp[c] += t->cp[c];
	}
	for (int ph = 0; ph < TB_NPHASE; ph++) {
		for (int c = 0; c < TB_NCAT; c++)
			dst->ph[ph][c] += t->ph[ph][c];
		dst->wio[ph] += t->wio[ph];
	}
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < TB_NCAT; c++)
			dst->ends[e][c] += t->ends[e][c];
	dst->io_rbytes += t->io_rbytes;
	dst->io_wbytes += t->io_wbytes;
	dst->nswitch += t->nswitch;
	dst->kskew_ns += t->kskew_ns;
	dst->fed += t->fed;
	dst->folded += thread_count(t);
}

static void new_agg(struct proc_rec *a, pid_t ppid, enum tb_role role)
{
	memset(a, 0, sizeof(*a));
	a->ppid = ppid;
	a->role = role;
	a->pid_prev = -1;
	a->labels.rank = a->labels.local_rank = a->labels.world_size = -1;
	a->threads = xcalloc(2, sizeof(*a->threads));
	a->nthreads = a->cap = 2;
	for (int t = 0; t < 2; t++)
		a->threads[t].slot = -1;
}

/* Process p (or an aggregate) into aggregate a; its trainer thread into threads[0]. */
static void add_proc(struct proc_rec *a, const struct proc_rec *p)
{
	const struct thread_rec *mt = job_trainer_thread(p);
	uint64_t end = p->end_ns;

	if (!a->folded) {
		memcpy(a->comm, p->comm, sizeof(a->comm));
		memcpy(a->exe, p->exe, sizeof(a->exe));
		a->flags = p->flags;
		a->start_ns = p->start_ns;
	} else {
		if (p->start_ns < a->start_ns)
			a->start_ns = p->start_ns;
		if (strncmp(a->comm, p->comm, sizeof(a->comm)))
			snprintf(a->comm, sizeof(a->comm), "(various)");
	}
	for (int j = 0; j < p->nthreads; j++) {
		const struct thread_rec *t = &p->threads[j];

		if (t->end_ns > end)
			end = t->end_ns;
		if (p->folded)
			add_thread(&a->threads[j < 2 ? j : 1], t);
		else
			add_thread(&a->threads[t == mt ? 0 : 1], t);
	}
	if (end > a->end_ns)
		a->end_ns = end;
	if (p->folded) {
		worker_tally_merge(&a->tally, &p->tally);
	} else if (p->role == TB_ROLE_WORKER) {
		int64_t own[TB_NCAT] = { 0 }, best = -1;

		/* Judged by its busiest thread, as the diagnosis judges live ones. */
		for (int j = 0; j < p->nthreads; j++) {
			const struct thread_rec *t = &p->threads[j];
			int64_t busy = 0;

			for (int c = 0; c < TB_NCAT; c++)
				busy += c == TB_IDLE ? 0 : (int64_t)t->own[c];
			if (t->folded || busy <= best)
				continue;
			best = busy;
			for (int c = 0; c < TB_NCAT; c++)
				own[c] = (int64_t)t->own[c];
		}
		worker_tally_add(&a->tally, p->pid, own);
	}
	a->folded += proc_count(p);
	a->child_roles |= p->child_roles;
	a->trainer_below |= p->trainer_below;
}

/* A kept process with its exited threads folded: the new thread array. */
static void compact_threads(struct folding *fo, int i, struct proc_rec *np)
{
	const struct proc_rec *p = &fo->job->procs[i];
	const bool *fold = fo->thr + fo->f.thr_off[i];
	int *to = fo->f.thr_to + fo->f.thr_off[i], agg = -1, k = 0, need = 0, main_at;
	struct thread_rec *nt;

	for (int j = 0; j < p->nthreads; j++) {
		need += !fold[j];
		if (p->threads[j].folded && agg < 0)
			agg = j;
	}
	for (int j = 0; j < p->nthreads; j++)
		if (fold[j])
			fo->f.threads++;
	if (need == p->nthreads) {
		for (int j = 0; j < p->nthreads; j++)
			to[j] = j;
		return;
	}
	nt = xcalloc(need + (agg < 0), sizeof(*nt));
	for (int j = 0; j < p->nthreads; j++)
		if (!fold[j]) {
			to[j] = k;
			nt[k++] = p->threads[j];
		}
	if (agg < 0) {
		nt[k].slot = -1;
		agg = k++;
	} else {
		agg = to[agg];
	}
	for (int j = 0; j < p->nthreads; j++)
		if (fold[j]) {
			to[j] = agg;
			add_thread(&nt[agg], &p->threads[j]);
		}
	main_at = p->main_at > 0 && p->main_at <= p->nthreads && !fold[p->main_at - 1] ?
		  to[p->main_at - 1] + 1 : 0;
	free(np->threads);
	np->threads = nt;
	np->nthreads = np->cap = k;
	np->main_at = main_at;
}

/* A folded child's roles, for its parent's roles (job_classify_roles). */
static void tell_parent(struct folding *fo, int i)
{
	const struct proc_rec *p = &fo->job->procs[i];
	const struct proc_rec *par = p->pid == p->ppid ? NULL :
		job_proc_const(fo->job, p->ppid);
	int pi = par ? (int)(par - fo->job->procs) : -1;

	if (pi < 0 || fo->proc[pi])
		return;		/* folding too: its own trainer_below says it */
	fo->job->procs[pi].child_roles |= 1u << p->role |
		(p->role == TB_ROLE_TRAINER || p->trainer_below ? JOB_CHILD_TRAINER_BELOW : 0);
}

/*
 * In place, so that a fold every second does not scatter the heap: the
 * members are added to their aggregates (kept ones where they are, the
 * new ones aside), then the kept rows move down (to[i] <= i: order is
 * kept) and the new aggregates follow them.
 */
static void rebuild(struct folding *fo)
{
	struct job *job = fo->job;
	int nkept = 0, nmade, *old_of = xcalloc(fo->f.nold, sizeof(int));
	struct proc_rec *made;

	for (int i = 0; i < fo->f.nold; i++)
		if (!fo->proc[i])
			old_of[nkept++] = i;
	nmade = fo->f.nnew - nkept;
	made = xcalloc(nmade, sizeof(*made));
	for (int a = 0; a < fo->naggs; a++)
		if (fo->aggs[a].old < 0 && fo->aggs[a].ppid >= 0)
			new_agg(&made[fo->aggs[a].new - nkept], fo->aggs[a].ppid, fo->aggs[a].role);
	for (int i = 0; i < fo->f.nold; i++) {
		struct proc_rec *p = &job->procs[i], *a;
		int *to = fo->f.thr_to + fo->f.thr_off[i], k = fo->f.to[i];
		const struct thread_rec *mt = job_trainer_thread(p);

		if (!fo->proc[i])
			continue;
		for (int j = 0; j < p->nthreads; j++)
			to[j] = p->folded ? (j < 2 ? j : 1) : &p->threads[j] == mt ? 0 : 1;
		a = k < nkept ? &job->procs[old_of[k]] : &made[k - nkept];
		add_proc(a, p);
		if (!p->folded) {
			tell_parent(fo, i);
			fo->f.procs++;
		}
	}
	for (int i = 0; i < fo->f.nold; i++)
		if (fo->proc[i])
			free(job->procs[i].threads);
	for (int i = 0; i < fo->f.nold; i++)
		if (!fo->proc[i]) {
			compact_threads(fo, i, &job->procs[i]);
			job->procs[fo->f.to[i]] = job->procs[i];
		}
	memcpy(&job->procs[nkept], made, nmade * sizeof(*made));
	job->nprocs = fo->f.nnew;
	job_reindex(job);
	free(made);
	free(old_of);
}

static void alloc_fold(struct folding *fo, struct job *job)
{
	int nold = job->nprocs, nthr = 0;

	fo->f.nold = nold;
	fo->f.to = xcalloc(nold, sizeof(int));
	fo->f.merged = xcalloc(nold, sizeof(bool));
	fo->f.thr_off = xcalloc(nold + 1, sizeof(int));
	for (int i = 0; i < nold; i++) {
		fo->f.thr_off[i] = nthr;
		nthr += job->procs[i].nthreads;
	}
	fo->f.thr_off[nold] = nthr;
	fo->f.thr_to = xcalloc(nthr, sizeof(int));
	fo->proc = xcalloc(nold, sizeof(bool));
	fo->thr = xcalloc(nthr, sizeof(bool));
	fo->agg_of = xcalloc(nold, sizeof(int));
}

void job_fold_free(struct job_fold *f)
{
	free(f->to);
	free(f->merged);
	free(f->thr_off);
	free(f->thr_to);
	memset(f, 0, sizeof(*f));
}

int job_fold(struct job *job, uint64_t now, uint64_t settled, struct job_fold *f)
{
	struct folding fo = { .job = job, .now = now };
	int n;

	alloc_fold(&fo, job);
	n = select_folds(&fo, settled);
	if (n) {
		assign_aggs(&fo);
		number(&fo);
		rebuild(&fo);
		job->next_fold = now + JOB_FOLD_PERIOD_NS;
	} else if (now >= job->next_fold) {
		job->next_fold = now + JOB_FOLD_PERIOD_NS;
	}
	free(fo.proc);
	free(fo.thr);
	free(fo.agg_of);
	free(fo.aggs);
	if (n && f)
		*f = fo.f;
	else
		job_fold_free(&fo.f);
	return n;
}
