// SPDX-License-Identifier: BSD-3-Clause
/*
 * Processes, threads and samples of one flush. A sample row holds what a
 * thread's counters gained since its previous row. A category can also
 * lose: the open interval of a blocked thread is counted as what it looks
 * like now (idle) and may close as something else (data_wait) once the
 * waker is known; the next row then carries -x idle, +x data_wait, and the
 * sum of a thread's rows is still its totals.
 */
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "record.h"
#include "session.h"

static void *grow_zero(void *arr, int old, int need, size_t elem)
{
	void *n = realloc(arr, need * elem);

	if (!n)
		abort();	/* as job.c: a profiler out of memory has nothing left to say */
	memset((char *)n + old * elem, 0, (need - old) * elem);
	return n;
}

/* Keeps r->procs[i].th parallel to job->procs[i].threads. */
static void sync_shape(struct recorder *r, const struct job *job)
{
	if (r->nprocs < job->nprocs) {
		r->procs = grow_zero(r->procs, r->nprocs, job->nprocs, sizeof(*r->procs));
		r->nprocs = job->nprocs;
	}
	for (int i = 0; i < job->nprocs; i++) {
		struct rec_proc *rp = &r->procs[i];
		int n = job->procs[i].nthreads;

		if (rp->nth < n) {
			rp->th = grow_zero(rp->th, rp->nth, n, sizeof(*rp->th));
			rp->nth = n;
		}
	}
}

static bool proc_changed(const struct rec_proc *rp, const struct proc_rec *p, int rank)
{
	return !rp->known || rp->end_ns != p->end_ns || rp->ppid != p->ppid ||
	       rp->role != (int)p->role || rp->flags != p->flags || rp->rank != rank ||
	       strncmp(rp->comm, p->comm, sizeof(rp->comm)) ||
	       strncmp(rp->exe, p->exe, sizeof(rp->exe));
}

static void remember_proc(struct rec_proc *rp, const struct proc_rec *p, int rank)
{
	rp->known = true;
	rp->start_ns = p->start_ns;
	rp->end_ns = p->end_ns;
	rp->ppid = p->ppid;
	rp->role = p->role;
	rp->flags = p->flags;
	rp->rank = rank;
	memcpy(rp->comm, p->comm, sizeof(rp->comm));
	memcpy(rp->exe, p->exe, sizeof(rp->exe));
}

/* A fork event can move a process's start after its row was written. */
static int rekey_proc(struct recorder *r, struct rec_proc *rp, const struct proc_rec *p)
{
	if (!rp->known || rp->start_ns == p->start_ns)
		return 0;
	rec_bind_int(r, RS_PROC_REKEY, 1, p->pid);
	rec_bind_int(r, RS_PROC_REKEY, 2, rp->start_ns);
	rec_bind_int(r, RS_PROC_REKEY, 3, p->start_ns);
	rp->start_ns = p->start_ns;
	return rec_step(r, RS_PROC_REKEY);
}

static int write_proc(struct recorder *r, struct rec_proc *rp, const struct proc_rec *p,
		      const struct session *ses)
{
	int rank;

	/* An exited process's rank cannot change: no lookup every flush. */
	if (rp->known && !job_proc_alive(p))
		rank = rp->rank;
	else
		rank = diag_proc_rank(ses, p->pid);

	if (rekey_proc(r, rp, p))
		return -1;
	if (!proc_changed(rp, p, rank))
		return 0;
	rec_bind_int(r, RS_PROC, 1, p->pid);
	rec_bind_int(r, RS_PROC, 2, p->ppid);
	rec_bind_text(r, RS_PROC, 3, p->comm);
	if (p->exe[0])
		rec_bind_text(r, RS_PROC, 4, p->exe);
	rec_bind_text(r, RS_PROC, 5, role_name(p->role));
	rec_bind_int(r, RS_PROC, 6, p->flags);
	rec_bind_int(r, RS_PROC, 7, p->root);
	if (rank >= 0)
		rec_bind_int(r, RS_PROC, 8, rank);
	rec_bind_int(r, RS_PROC, 9, p->start_ns);
	if (p->end_ns) {
		rec_bind_int(r, RS_PROC, 10, p->end_ns);
		rec_bind_int(r, RS_PROC, 11, p->exit_code);
	}
	remember_proc(rp, p, rank);
	return rec_step(r, RS_PROC);
}

static int write_thread(struct recorder *r, struct rec_thread *rt,
			const struct thread_rec *t, pid_t pid)
{
	if (rt->known && rt->end_ns == t->end_ns &&
	    !strncmp(rt->comm, t->comm, sizeof(rt->comm)))
		return 0;
	rec_bind_int(r, RS_THREAD, 1, t->tid);
	rec_bind_int(r, RS_THREAD, 2, pid);
	rec_bind_text(r, RS_THREAD, 3, t->comm);
	rec_bind_int(r, RS_THREAD, 4, t->start_ns);
	if (t->end_ns)
		rec_bind_int(r, RS_THREAD, 5, t->end_ns);
	rt->known = true;
	rt->end_ns = t->end_ns;
	memcpy(rt->comm, t->comm, sizeof(rt->comm));
	return rec_step(r, RS_THREAD);
}

/* Gains since the thread's last row; false if there are none. */
static bool gains(const struct rec_thread *rt, const struct thread_rec *t,
		  int64_t own[TB_NCAT], int64_t cp[TB_NCAT], int64_t *idle_only)
{
	bool any = false;

	*idle_only = 1;
	for (int c = 0; c < TB_NCAT; c++) {
		own[c] = (int64_t)(t->own[c] - rt->own[c]);
		cp[c] = (int64_t)(t->cp[c] - rt->cp[c]);
		any |= own[c] || cp[c];
		if (c != TB_IDLE && (own[c] || cp[c]))
			*idle_only = 0;
	}
	if (t->io_rbytes != rt->rbytes || t->io_wbytes != rt->wbytes)
		any = true, *idle_only = 0;
	/* Switches without time elsewhere: waking to sleep again is idling. */
	return any || t->nswitch != rt->nswitch;
}

static int write_sample(struct recorder *r, struct rec_thread *rt,
			const struct thread_rec *t, pid_t pid, uint64_t now, bool last)
{
	int64_t own[TB_NCAT], cp[TB_NCAT], idle_only;

	/*
	 * A slot BPF held for the whole read keeps its totals of an earlier
	 * instant: a row stamped now would not sum to its life. Next flush.
	 */
	if (t->slot >= 0 && !t->end_ns && t->read_ns != now)
		return 0;
	if (!gains(rt, t, own, cp, &idle_only))
		return 0;
	if (idle_only && !last && !t->end_ns && now - rt->row_ns < REC_IDLE_ROW_NS)
		return 0;
	rec_bind_int(r, RS_SAMPLE, 1, now);
	rec_bind_int(r, RS_SAMPLE, 2, t->tid);
	rec_bind_int(r, RS_SAMPLE, 3, pid);
	for (int c = 0; c < TB_NCAT; c++) {
		rec_bind_int(r, RS_SAMPLE, 4 + c, own[c]);
		rec_bind_int(r, RS_SAMPLE, 4 + TB_NCAT + c, cp[c]);
	}
	rec_bind_int(r, RS_SAMPLE, 20, t->io_rbytes - rt->rbytes);
	rec_bind_int(r, RS_SAMPLE, 21, t->io_wbytes - rt->wbytes);
	rec_bind_int(r, RS_SAMPLE, 22, t->nswitch - rt->nswitch);
	memcpy(rt->own, t->own, sizeof(rt->own));
	memcpy(rt->cp, t->cp, sizeof(rt->cp));
	rt->rbytes = t->io_rbytes;
	rt->wbytes = t->io_wbytes;
	rt->nswitch = t->nswitch;
	rt->row_ns = now;
	r->rows++;
	return rec_step(r, RS_SAMPLE);
}

/*
 * Rows summed by job_fold are the file's already (a thread or process
 * folds only after the flush that wrote its last row): an aggregate has
 * no row of its own.
 */
int record_job(struct recorder *r, const struct session *ses, uint64_t now, bool last)
{
	const struct job *job = &ses->job;

	sync_shape(r, job);
	for (int i = 0; i < job->nprocs && !r->failed; i++) {
		const struct proc_rec *p = &job->procs[i];
		struct rec_proc *rp = &r->procs[i];

		if (p->folded)
			continue;
		write_proc(r, rp, p, ses);
		for (int j = 0; j < p->nthreads && !r->failed; j++) {
			struct rec_thread *rt = &rp->th[j];

			if (p->threads[j].folded)
				continue;

			if (!rt->known)
				rt->row_ns = now;	/* its first idle row comes a period on */
			write_thread(r, rt, &p->threads[j], p->pid);
			write_sample(r, rt, &p->threads[j], p->pid, now, last);
		}
	}
	return r->failed ? -1 : 0;
}

/* A moved process's thread rows follow its threads (folded ones: none). */
static void remap_threads(struct rec_proc *rp, const struct proc_rec *p, const int *tt, int nold)
{
	struct rec_thread *th;
	bool same = rp->nth <= p->nthreads;	/* sync_shape grows it later */

	for (int j = 0; j < rp->nth && j < nold && same; j++)
		same = tt[j] == j;
	if (same)
		return;
	th = grow_zero(NULL, 0, p->nthreads ? p->nthreads : 1, sizeof(*th));
	/* A folded thread maps to the aggregate's: never written. */
	for (int j = 0; j < rp->nth && j < nold; j++)
		if (!p->threads[tt[j]].folded)
			th[tt[j]] = rp->th[j];
	free(rp->th);
	rp->th = th;
	rp->nth = p->nthreads;
}

/*
 * The job folded rows: what was said of each one follows it (or goes), in
 * place as job_fold moves them (to[i] <= i); aggregates have no rows.
 */
void record_on_fold(struct recorder *r, const struct job *job, const struct job_fold *f)
{
	int n = r->nprocs < f->nold ? r->nprocs : f->nold, kept = 0;

	for (int i = 0; i < n; i++) {
		struct rec_proc *rp = &r->procs[i];

		if (f->merged[i]) {
			free(rp->th);
			continue;
		}
		remap_threads(rp, &job->procs[f->to[i]], f->thr_to + f->thr_off[i],
			      f->thr_off[i + 1] - f->thr_off[i]);
		r->procs[f->to[i]] = *rp;
		kept = f->to[i] + 1;
	}
	if (kept < r->nprocs)	/* past the kept: aggregates, or not seen yet */
		memset(&r->procs[kept], 0, (r->nprocs - kept) * sizeof(*r->procs));
	if (r->nprocs > f->nnew)
		r->nprocs = f->nnew;
}
