// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "grow.h"
#include "phases.h"
#include "procfs.h"
#include "session.h"
#include "stall_observe.h"
#include "syscall_class.h"
#include "steps.h"

/* A thread's slot as stall.h needs it; false if it has none (exited). */
static bool read_thread(const struct tracer *tr, const struct thread_rec *t,
			struct stall_thread_obs *o, struct tb_slot *s)
{
	if (!t || t->slot < 0 || t->end_ns || !tracer_read_slot(tr, t->slot, s) ||
	    s->tid != (__u32)t->tid)
		return false;
	o->tid = t->tid;
	o->state = s->state;
	o->wait = s->wait;
	o->phase = s->phase;
	o->depth = s->depth;
	o->region = s->region;
	o->api = s->api;
	o->api_bytes = s->api_bytes;
	o->since = s->since;
	return true;
}

/*
 * Its threads other than the trainer blocked on the network now: on a
 * socket, in a probed NCCL call, or a communication thread (gloo's, whose
 * collectives wait on its I/O loop) that is blocked. Read in place, no
 * seqlock: a process holds hundreds of threads, a slot is kilobytes, and
 * a torn read of one thread only moves a count the rule needs above 0.
 */
static int net_blocked(const struct tracer *tr, const struct proc_rec *p, pid_t trainer)
{
	int n = 0;

	for (int i = 0; i < p->nthreads; i++) {
		const struct thread_rec *t = &p->threads[i];
		const volatile struct tb_slot *s;

		if (t->tid == trainer || t->folded || t->slot < 0 || t->end_ns)
			continue;
		s = &tr->slots[t->slot];
		if (s->tid != (__u32)t->tid)
			continue;
		n += (s->depth && s->region == TB_COMM) ||
		     (s->state == TB_ST_BLOCKED &&
		      (s->wait == TB_W_SOCKET ||
		       tb_is_net_thread(s->net_ns, s->blk_ns, s->net_waits, t->tid == p->pid)));
	}
	return n;
}

static void add_workers(const struct tracer *tr, const struct job *job,
			const struct proc_rec *p, struct stall_obs *o)
{
	struct tb_slot s;

	for (int i = 0; i < job->nprocs && o->nworkers < STALL_MAX_WORKERS; i++) {
		const struct proc_rec *w = &job->procs[i];

		/* Its children: the roles may not have told its workers yet. */
		if (w->role == TB_ROLE_TRAINER || w->ppid != p->pid || w->folded ||
		    !job_proc_alive(w))
			continue;
		if (read_thread(tr, job_main_thread(w), &o->workers[o->nworkers].main, &s))
			o->workers[o->nworkers++].pid = w->pid;
	}
}

/* Steps from the call period (GPU jobs with no phases): its threads' most. */
static uint64_t call_steps(const struct steps *st, pid_t pid)
{
	uint64_t most = 0;

	for (int i = 0; i < st->nth; i++)
		if (st->th[i].pid == pid) {
			uint64_t n = st->th[i].nbounds + st->th[i].folded.count;

			most = n > most ? n : most;
		}
	return most;
}

static void progress(const struct session *ses, const struct proc_rec *p,
		     const struct ph_thread *pt, struct stall_obs *o)
{
	const struct gpu_proc *gp = gpu_proc_find(&ses->gpu, p->pid);
	struct gpu_sums g;

	o->steps = pt ? pt->steps.steps : 0;
	o->progress = o->steps + (pt ? pt->fetches : 0);
	o->progress_at = pt ? pt->start : 0;	/* the step under way began at the last */
	if (!o->progress)
		o->progress = o->steps = call_steps(&ses->steps, p->pid);
	if (!gp)
		return;
	gpu_sum_kinds(gp->stat, &g);
	o->has_coll = g.ops > 0;
	o->coll = g.ops;
	/* Its live communicators whose id is known: the ones peers can be compared on. */
	for (int c = gp->ncomms - 1; c >= 0 && o->ncomms < STALL_MAX_COMMS; c--) {
		const struct gpu_comm *k = &gp->comms[c];

		if (k->destroyed || !k->comm || !gpu_comm_key(k))
			continue;
		o->comms[o->ncomms].key = gpu_comm_key(k);
		o->comms[o->ncomms++].calls = k->calls;
	}
}

/*
 * serve: the training job, as its metrics name it (job_id_of), and the
 * user that speaks for it: another user's job of the same name is another.
 */
static void job_key(const struct job *job, const struct proc_rec *p, char *out, size_t len)
{
	char id[JOB_ID_LEN];
	unsigned int uid;
	int n;

	job_id_of(job, p, id, sizeof(id), &uid);
	n = snprintf(out, len, "%u/", uid);
	/* A key, cut if it must be (out is zeroed): ids of 50 bytes and more are rare. */
	if (n > 0 && (size_t)n < len)
		memcpy(out + n, id, strnlen(id, len - n - 1));
}

/*
 * Blocked in storage: the file of its syscall's fd (a read of a FUSE or NFS
 * file that never answers), from /proc; nothing for a page fault's wait.
 */
static void io_object(const struct proc_rec *p, struct stall_thread_obs *t)
{
	long fd = -1, nr;

	if (t->state != TB_ST_BLOCKED || t->depth ||
	    (t->wait != TB_W_IOWAIT && t->wait != TB_W_FILE))
		return;
	nr = procfs_syscall(p->pid, t->tid, &fd);
	if (nr >= 0 && tb_syscall_wait(nr) == TB_W_FD &&
	    !procfs_fd_target(p->pid, fd, t->object, sizeof(t->object)) && t->object[0] != '/')
		t->object[0] = '\0';	/* a file's path only */
}

/* One rank; false if its trainer thread cannot be read. */
static bool observe(const struct tracer *tr, const struct session *ses,
		    const struct proc_rec *p, bool labels, struct stall_obs *o)
{
	const struct job *job = &ses->job;
	const struct ph_thread *pt = phases_trainer(ses_phases(ses), p->pid);
	const struct thread_rec *t = pt ? NULL : job_trainer_thread(p);
	struct tb_slot s;

	memset(o, 0, sizeof(*o));
	for (int i = 0; pt && !t && i < p->nthreads; i++)
		if (p->threads[i].tid == pt->tid)
			t = &p->threads[i];
	progress(ses, p, pt, o);
	/* A rank is a process whose loop made progress: not a launcher, not a spawn's parent. */
	if (!o->progress || !read_thread(tr, t, &o->tr, &s))
		return false;
	if (labels)
		job_key(job, p, o->job, sizeof(o->job));
	o->pid = p->pid;
	/* Its labels (serve, a recording), else RANK or NCCL's rank as the diagnosis has them. */
	o->rank = p->labels.rank >= 0 ? p->labels.rank : diag_proc_rank(ses, p->pid);
	memcpy(o->cp, t->cp, sizeof(o->cp));
	o->net_blocked = net_blocked(tr, p, t->tid);
	io_object(p, &o->tr);
	add_workers(tr, job, p, o);
	return true;
}

int stall_observe(const struct tracer *tr, const struct session *ses, bool labels,
		  struct stall_obs **out, int *cap)
{
	const struct job *job = &ses->job;
	int n = 0;

	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];
		struct stall_obs *o;

		/*
		 * Any process but a worker: the roles can flip a spawn's ranks
		 * and their parent while workers start; progress tells (observe).
		 */
		if (p->role == TB_ROLE_WORKER || p->folded || !job_proc_alive(p))
			continue;
		o = tb_grow(*out, cap, n + 1, sizeof(*o));
		if (!o)
			break;
		*out = o;
		n += observe(tr, ses, p, labels, &o[n]);
	}
	return n;
}
