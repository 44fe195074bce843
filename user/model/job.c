// SPDX-License-Identifier: BSD-3-Clause
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"

static void *grow(void *arr, int *cap, int first, size_t elem)
{
	int ncap = *cap ? *cap * 2 : first;
	void *n = realloc(arr, ncap * elem);

	if (!n)
		abort();	/* a profiler out of memory has nothing left to say */
	memset((char *)n + *cap * elem, 0, (ncap - *cap) * elem);
	*cap = ncap;
	return n;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p)
		abort();
	return p;
}

/* ---- pid index: pid -> the newest process with it ---- */

static unsigned int pid_hash(pid_t pid, int cap)
{
	return ((uint32_t)pid * 2654435761u) & (cap - 1);
}

/* Where pid is in the index, or the empty slot where it would go. */
static int *pid_slot(const struct job *job, pid_t pid)
{
	unsigned int h = pid_hash(pid, job->pid_cap);

	while (job->pid_ix[h] >= 0 && job->procs[job->pid_ix[h]].pid != pid)
		h = (h + 1) & (job->pid_cap - 1);
	return &job->pid_ix[h];
}

static void pid_insert(struct job *job, int i)
{
	struct proc_rec *p = &job->procs[i];
	int *s;

	p->pid_prev = -1;
	if (p->folded)
		return;		/* an aggregate has no pid of its own */
	s = pid_slot(job, p->pid);
	p->pid_prev = *s;
	*s = i;
}

/* Sized for the processes there are (load under 1/2), in index order. */
static void pid_index_build(struct job *job)
{
	int cap = 64;

	while (cap < 2 * job->nprocs + 2)
		cap *= 2;
	if (cap != job->pid_cap) {
		free(job->pid_ix);
		job->pid_ix = xcalloc(cap, sizeof(*job->pid_ix));
		job->pid_cap = cap;
	}
	memset(job->pid_ix, 0xff, cap * sizeof(*job->pid_ix));
	for (int i = 0; i < job->nprocs; i++)
		pid_insert(job, i);
}

void job_reindex(struct job *job)
{
	pid_index_build(job);
}

struct proc_rec *job_proc(struct job *job, pid_t pid)
{
	int i;

	/* Newest first: a recycled pid belongs to the latest process. */
	if (pid <= 0)
		return NULL;
	if (!job->pid_cap) {	/* a job built by hand, without job_add_proc */
		for (i = job->nprocs - 1; i >= 0; i--)
			if (job->procs[i].pid == pid && !job->procs[i].folded)
				return &job->procs[i];
		return NULL;
	}
	i = *pid_slot(job, pid);
	return i >= 0 ? &job->procs[i] : NULL;
}

/* The process with the same pid before p, or NULL. */
static struct proc_rec *pid_before(struct job *job, struct proc_rec *p)
{
	if (job->pid_cap)
		return p->pid_prev >= 0 ? &job->procs[p->pid_prev] : NULL;
	for (struct proc_rec *q = p - 1; q >= job->procs; q--)
		if (q->pid == p->pid && !q->folded)
			return q;
	return NULL;
}

const struct proc_rec *job_proc_const(const struct job *job, pid_t pid)
{
	return job_proc((struct job *)job, pid);
}

struct proc_rec *job_proc_at(struct job *job, pid_t pid, uint64_t ts)
{
	struct proc_rec *p = job_proc(job, pid), *any = NULL;

	for (; p; p = pid_before(job, p)) {
		if (p->start_ns <= ts)
			return p;
		any = p;
	}
	return any;
}

struct proc_rec *job_add_proc(struct job *job, pid_t pid, pid_t ppid,
			      const char *comm, uint64_t start_ns)
{
	struct proc_rec *p;

	if (job->nprocs == job->cap)
		job->procs = grow(job->procs, &job->cap, 8, sizeof(*p));
	p = &job->procs[job->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ppid = ppid;
	p->start_ns = start_ns;
	p->labels.rank = p->labels.local_rank = p->labels.world_size = -1;
	strncpy(p->comm, comm, sizeof(p->comm) - 1);
	if (2 * job->nprocs + 2 > job->pid_cap)
		pid_index_build(job);
	else
		pid_insert(job, job->nprocs - 1);
	return p;
}

struct thread_rec *job_add_thread(struct proc_rec *p, pid_t tid,
				  const char *comm, uint64_t start_ns)
{
	struct thread_rec *t;

	/* Most processes of a fork storm have one thread: start small. */
	if (p->nthreads == p->cap)
		p->threads = grow(p->threads, &p->cap, 2, sizeof(*t));
	t = &p->threads[p->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->slot = -1;
	t->start_ns = start_ns;
	strncpy(t->comm, comm, sizeof(t->comm) - 1);
	if (tid == p->pid)
		p->main_at = p->nthreads;
	return t;
}

struct proc_rec *job_on_fork(struct job *job, pid_t pid, pid_t ppid, const char *comm,
			     uint64_t ts)
{
	struct proc_rec *p = job_proc(job, pid);

	if (!p || p->end_ns)
		p = job_add_proc(job, pid, ppid, comm, ts);
	p->ppid = ppid;
	p->start_ns = ts;
	p->flags |= TB_PF_FORKED;
	return p;
}

struct proc_rec *job_on_exec(struct job *job, pid_t pid, const char *comm, const char *path)
{
	struct proc_rec *p = job_proc(job, pid);

	if (!p)
		return NULL;
	p->flags |= TB_PF_EXECED;
	memcpy(p->comm, comm, sizeof(p->comm));
	snprintf(p->exe, sizeof(p->exe), "%s", path);
	return p;
}

struct proc_rec *job_on_exit(struct job *job, pid_t pid, uint64_t ts, int code)
{
	struct proc_rec *p = job_proc(job, pid);

	if (!p)
		return NULL;
	p->end_ns = ts;
	p->exit_code = code;
	return p;
}

bool job_proc_alive(const struct proc_rec *p)
{
	if (p->end_ns || p->folded)
		return false;
	for (int i = 0; i < p->nthreads; i++)
		if (!p->threads[i].end_ns)
			return true;
	return p->nthreads == 0;
}

int job_live_procs(const struct job *job)
{
	int n = 0;

	for (int i = 0; i < job->nprocs; i++)
		n += job_proc_alive(&job->procs[i]);
	return n;
}

void job_free(struct job *job)
{
	for (int i = 0; i < job->nprocs; i++)
		free(job->procs[i].threads);
	free(job->procs);
	free(job->pid_ix);
	memset(job, 0, sizeof(*job));
}

int proc_count(const struct proc_rec *p)
{
	return p->folded ? p->folded : 1;
}

int thread_count(const struct thread_rec *t)
{
	return t->folded ? t->folded : 1;
}

int proc_nthreads(const struct proc_rec *p)
{
	int n = 0;

	/* An aggregate's two threads may be empty: they count their members. */
	for (int i = 0; i < p->nthreads; i++)
		n += p->threads[i].folded ? p->threads[i].folded : !p->folded;
	return n;
}

uint64_t thread_lifetime(const struct thread_rec *t, uint64_t now)
{
	uint64_t end = t->end_ns ? t->end_ns : now;

	/* Folded threads: each one's categories summed to its lifetime. */
	if (t->folded)
		return sum_cats(t->own);
	return end > t->start_ns ? end - t->start_ns : 0;
}

void proc_totals(const struct proc_rec *p, uint64_t out[TB_NCAT])
{
	memset(out, 0, sizeof(uint64_t) * TB_NCAT);
	for (int i = 0; i < p->nthreads; i++)
		for (int c = 0; c < TB_NCAT; c++)
			out[c] += p->threads[i].own[c];
}

const char *role_name(enum tb_role role)
{
	switch (role) {
	case TB_ROLE_TRAINER:
		return "trainer";
	case TB_ROLE_WORKER:
		return "worker";
	default:
		return "other";
	}
}

/*
 * The newest thread with the process's pid (a thread that execs takes it
 * over from its leader). Each epoch snapshot asks it of every process, and
 * a process that churns threads keeps a thousand rows after the main
 * thread's: main_at, kept by whoever adds or moves rows, spares the search.
 */
const struct thread_rec *job_main_thread(const struct proc_rec *p)
{
	if (p->folded)	/* an aggregate: its members' main threads, summed */
		return p->nthreads && p->threads[0].folded ? &p->threads[0] : NULL;
	if (p->main_at > 0 && p->main_at <= p->nthreads) {
		const struct thread_rec *t = &p->threads[p->main_at - 1];

		if (t->tid == p->pid && !t->folded)
			return t;
	}
	for (int i = p->nthreads - 1; i >= 0; i--)
		if (p->threads[i].tid == p->pid && !p->threads[i].folded)
			return &p->threads[i];
	return NULL;
}

const struct thread_rec *job_trainer_thread(const struct proc_rec *p)
{
	const struct thread_rec *mt = job_main_thread(p), *best = mt;
	uint64_t most = mt ? sum_cats(mt->ph[TB_PH_BACKWARD]) : 0;

	/* Only a process that ran backward can have another (roles: p->backward). */
	if (p->folded || !p->backward)
		return mt;
	for (int i = 0; i < p->nthreads; i++) {
		const struct thread_rec *t = &p->threads[i];
		uint64_t b = sum_cats(t->ph[TB_PH_BACKWARD]);

		if (!t->folded && b > most) {
			best = t;
			most = b;
		}
	}
	return best;
}

/* ---- roles ---- */

/*
 * Wakes (of other processes' threads, by a process a trainer runs) that
 * make a worker: a DataLoader worker wakes its trainer for every batch
 * (hundreds); a helper such as git or ip wakes it as it writes its output
 * and exits (1-3), the forkserver once per worker it starts.
 */
#define JOB_FEED_MIN_WAKES 8

/*
 * A multiprocessing spawn child run by a trainer is made to serve it: a
 * wake seen is enough (a helper such as git is no multiprocessing child).
 * A worker faster than its trainer seldom wakes it (its batches wait in
 * the queue: fewer than JOB_FEED_MIN_WAKES in a short run, CI saw it),
 * and one found at the attach woke it before.
 */
static uint64_t feed_min(const struct proc_rec *p)
{
	return p->flags & JOB_PF_MP_SPAWNED ? 1 : JOB_FEED_MIN_WAKES;
}

/* PyTorch >= 2 names its data-loader worker processes. */
static bool named_worker(const struct proc_rec *p)
{
	return !strncmp(p->comm, "pt_data_worker", 14);
}

bool job_died_young(const struct proc_rec *p)
{
	const struct thread_rec *t = job_main_thread(p);
	uint64_t end = p->end_ns ? p->end_ns : t ? t->end_ns : 0;

	return (p->flags & TB_PF_FORKED) && !(p->flags & TB_PF_EXECED) && end &&
	       end - p->start_ns < JOB_HELPER_LIFE_NS && end >= p->start_ns;
}

static bool looks_like_worker(const struct proc_rec *p)
{
	if (named_worker(p))
		return true;
	return (p->flags & TB_PF_FORKED) && !(p->flags & TB_PF_EXECED) && !job_died_young(p);
}

/*
 * Main thread working (on a CPU, the GPU, the network, storage or data)
 * for at least a fifth of its life. Waiting on other threads or on
 * nothing is not work: launchers and helper daemons do only that.
 */
static bool main_thread_busy(const struct proc_rec *p)
{
	const struct thread_rec *t = job_main_thread(p);
	uint64_t total, work;

	if (!t)
		return false;
	total = sum_cats(t->own);
	work = t->own[TB_CPU] + t->own[TB_GPU_WAIT] + t->own[TB_COMM] +
	       t->own[TB_IO] + t->own[TB_DATA_WAIT];
	return total && work * 5 >= total;
}

/* Each process's parent in the job (the newest with its ppid), or -1. */
static void parents(const struct job *job, int *par)
{
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *c = &job->procs[i];
		const struct proc_rec *p = c->pid == c->ppid ? NULL :
			job_proc_const(job, c->ppid);

		par[i] = p ? (int)(p - job->procs) : -1;
	}
}

/*
 * 1 << role of each process's children. Those folded away told their
 * parent as they went (child_roles); an aggregate says nothing itself: it
 * may have moved up from a parent that folded.
 */
static void child_roles(const struct job *job, const int *par, unsigned int *bits)
{
	for (int i = 0; i < job->nprocs; i++)
		bits[i] = job->procs[i].child_roles;
	for (int i = 0; i < job->nprocs; i++)
		if (par[i] >= 0 && !job->procs[i].folded)
			bits[par[i]] |= 1u << job->procs[i].role;
}

/* Whether a trainer runs below each process, at most 16 levels down. */
static void trainers_below(struct job *job, const int *par)
{
	bool more = true;

	for (int i = 0; i < job->nprocs; i++)
		job->procs[i].trainer_below =
			job->procs[i].child_roles & JOB_CHILD_TRAINER_BELOW;
	for (int depth = 0; depth < 16 && more; depth++) {
		more = false;
		for (int i = 0; i < job->nprocs; i++) {
			const struct proc_rec *c = &job->procs[i];

			if (par[i] < 0 || c->folded || job->procs[par[i]].trainer_below ||
			    (c->role != TB_ROLE_TRAINER && !c->trainer_below))
				continue;
			job->procs[par[i]].trainer_below = true;
			more = true;
		}
	}
}

/*
 * A thread ran PyTorch's backward (THPEngine_run_backward): it trains.
 * Noted as its rows are read (job_note_backward): roles are judged at every
 * refresh, and a pass over every thread's rows was a fifth of a soak's CPU.
 */
static bool proc_trains(const struct proc_rec *p)
{
	return p->backward;
}

void job_note_backward(struct proc_rec *p, const struct thread_rec *t)
{
	if (!p->backward && sum_cats(t->ph[TB_PH_BACKWARD]))
		p->backward = true;
}

/* Wakes of another process's threads, workers' aside (bpf: slot.fed). */
uint64_t job_proc_fed(const struct proc_rec *p)
{
	uint64_t n = 0;

	for (int i = 0; i < p->nthreads; i++)
		n += p->threads[i].fed;
	return n;
}

/* Whether one of process i's ancestors (16 levels at most) is a trainer. */
static bool run_by_trainer(const struct job *job, const int *par, int i)
{
	for (int depth = 0; depth < 16 && par[i] >= 0; depth++) {
		i = par[i];
		if (!job->procs[i].folded && job->procs[i].role == TB_ROLE_TRAINER)
			return true;
	}
	return false;
}

/*
 * A program a trainer runs (git, ip, a shell and what it runs) is its
 * helper, busy or not: other, not a trainer, and not a reason to call the
 * trainer above it a launcher. Ranks are run by launchers, which wait.
 * Decided for all before any changes (pow: trainers by their workers).
 */
static void helpers_of_trainers(struct job *job, const int *par, const bool *pow)
{
	bool *helper = xcalloc(job->nprocs ? job->nprocs : 1, sizeof(bool));
	int i;

	for (i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		helper[i] = !p->folded && !pow[i] && p->role == TB_ROLE_TRAINER &&
			(p->flags & TB_PF_EXECED) && run_by_trainer(job, par, i);
	}
	for (i = 0; i < job->nprocs; i++)
		if (helper[i])
			job->procs[i].role = TB_ROLE_OTHER;
	free(helper);
}

/*
 * Roles from training phases (when some process ran a backward): the
 * processes that train are the trainers, and nothing else is. Above them,
 * their launchers (mp.spawn's parent, torchrun's agent) are other. A
 * worker is named like PyTorch's (>= 2), or forked without exec (fork
 * context, the forkserver's children), or anything else run by a trainer
 * that keeps waking threads of other processes (its trainer's: spawn
 * context, fork + exec of python, unnamed on torch < 2), unless it starts
 * workers itself (the forkserver). BPF counts wakes of any process but a
 * worker, as a trainer may not be known yet (attached, or before its
 * first backward). A short helper (git, ip, a shell) wakes its parent
 * once or twice, as it writes its output and exits: other.
 */
/*
 * A DataLoader starts its workers together (spawn: fork + exec each, one
 * after the other, without waiting for them); within this of a worker
 * sibling, a spawn child of the same trainer is of its generation.
 */
#define JOB_GENERATION_NS 1000000000ull

/*
 * A spawn child that never woke its trainer while traced, one of a
 * generation of workers: attached while it shuts down at an epoch's end,
 * its batches all given before (CI, a loaded machine: torch 1.13, spawn
 * workers, -p).
 */
static bool sibling_of_worker(const struct job *job, const int *par, int i)
{
	const struct proc_rec *p = &job->procs[i];

	if (!(p->flags & JOB_PF_MP_SPAWNED) || par[i] < 0)
		return false;
	for (int j = 0; j < job->nprocs; j++) {
		const struct proc_rec *s = &job->procs[j];
		uint64_t gap = s->start_ns > p->start_ns ? s->start_ns - p->start_ns :
			       p->start_ns - s->start_ns;

		if (j != i && par[j] == par[i] && !s->folded && s->role == TB_ROLE_WORKER &&
		    (s->flags & JOB_PF_MP_SPAWNED) && gap <= JOB_GENERATION_NS)
			return true;
	}
	return false;
}

static void roles_by_phases(struct job *job, const int *par, const bool *trains,
			    unsigned int *bits)
{
	int i;

	for (i = 0; i < job->nprocs; i++)
		if (!job->procs[i].folded)
			job->procs[i].role = trains[i] ? TB_ROLE_TRAINER : TB_ROLE_OTHER;
	trainers_below(job, par);
	for (i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (p->folded || trains[i] || p->trainer_below)
			continue;
		if (looks_like_worker(p) || (job_proc_fed(p) >= feed_min(p) &&
					     run_by_trainer(job, par, i) && !job_died_young(p)))
			p->role = TB_ROLE_WORKER;
	}
	for (i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (!p->folded && p->role == TB_ROLE_OTHER && !trains[i] &&
		    !p->trainer_below && run_by_trainer(job, par, i) &&
		    sibling_of_worker(job, par, i))
			p->role = TB_ROLE_WORKER;
	}
	child_roles(job, par, bits);
	for (i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (!p->folded && p->role == TB_ROLE_WORKER && !named_worker(p) &&
		    (bits[i] & 1u << TB_ROLE_WORKER))
			p->role = TB_ROLE_OTHER;
	}
}

/*
 * Roles from activity, when no process of the tree ran a backward: see
 * job.h. pow is scratch.
 */
static void roles_by_activity(struct job *job, const int *par, bool *pow, unsigned int *bits)
{
	bool any_trainer = false;
	int i;

	for (i = 0; i < job->nprocs; i++) {
		if (!job->procs[i].folded)	/* an aggregate's role is its key */
			job->procs[i].role = looks_like_worker(&job->procs[i]) ?
				TB_ROLE_WORKER : TB_ROLE_OTHER;
	}
	/*
	 * Whoever feeds on workers trains, including a "worker" that forks
	 * workers of its own (a rank started by fork; decided for all before
	 * any changes, so the order of processes does not matter). Failing
	 * that, a busy main thread makes a trainer, unless trainers run below
	 * it: then it is their launcher.
	 */
	child_roles(job, par, bits);
	for (i = 0; i < job->nprocs; i++)
		pow[i] = !job->procs[i].folded && job->procs[i].role == TB_ROLE_WORKER &&
			!named_worker(&job->procs[i]) && (bits[i] & 1u << TB_ROLE_WORKER);
	for (i = 0; i < job->nprocs; i++)
		if (pow[i])
			job->procs[i].role = TB_ROLE_TRAINER;
	child_roles(job, par, bits);
	for (i = 0; i < job->nprocs; i++)
		pow[i] = !job->procs[i].folded && (bits[i] & 1u << TB_ROLE_WORKER);
	for (i = 0; i < job->nprocs; i++)
		if (pow[i] && !named_worker(&job->procs[i]))
			job->procs[i].role = TB_ROLE_TRAINER;
	for (i = 0; i < job->nprocs; i++)
		if (!job->procs[i].folded && job->procs[i].role == TB_ROLE_OTHER &&
		    main_thread_busy(&job->procs[i]))
			job->procs[i].role = TB_ROLE_TRAINER;
	helpers_of_trainers(job, par, pow);
	trainers_below(job, par);
	for (i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (!p->folded && p->role == TB_ROLE_TRAINER && !pow[i] && p->trainer_below)
			p->role = TB_ROLE_OTHER;
		any_trainer |= p->role == TB_ROLE_TRAINER;
	}
	for (i = 0; i < job->nprocs && !any_trainer; i++)
		if (job->procs[i].root && job->procs[i].role == TB_ROLE_OTHER)
			job->procs[i].role = TB_ROLE_TRAINER;
}

/*
 * Each process's tree: its topmost traced ancestor. serve traces every
 * training job of a node at once, and a torch job's backward must not
 * decide how the roles of the CUDA job beside it are judged (its ranks
 * were all "other"). Returns whether some tree has no process that trains.
 */
static bool trees(const struct job *job, const int *par, const bool *trains, int *tree,
		  bool *tree_trains)
{
	bool idle_tree = false;
	int i;

	for (i = 0; i < job->nprocs; i++) {
		int r = i;

		/* Bounded: pids reused can make a loop of "parents". */
		for (int d = 0; d < 64 && par[r] >= 0; d++)
			r = par[r];
		tree[i] = r;
		tree_trains[i] = false;
	}
	for (i = 0; i < job->nprocs; i++)
		tree_trains[tree[i]] |= trains[i];
	for (i = 0; i < job->nprocs; i++)
		idle_tree |= !job->procs[i].folded && !tree_trains[tree[i]];
	return idle_tree;
}

/*
 * The trees where a process trains get their roles from phases, the
 * others from activity. Both passes are local to a tree (parents,
 * children, siblings): the second, run over all, is kept for the trees
 * without a trainer only.
 */
static void roles_by_tree(struct job *job, const int *par, const bool *trains,
			  unsigned int *bits)
{
	int n = job->nprocs ? job->nprocs : 1, *tree = xcalloc(n, sizeof(int));
	bool *tree_trains = xcalloc(n, sizeof(bool)), *pow = xcalloc(n, sizeof(bool));
	struct saved { enum tb_role role; bool below; } *by_phases = NULL;
	int i;

	roles_by_phases(job, par, trains, bits);
	if (!trees(job, par, trains, tree, tree_trains))
		goto cleanup;
	by_phases = xcalloc(n, sizeof(*by_phases));
	for (i = 0; i < job->nprocs; i++)
		by_phases[i] = (struct saved){ job->procs[i].role, job->procs[i].trainer_below };
	roles_by_activity(job, par, pow, bits);
	for (i = 0; i < job->nprocs; i++)
		if (tree_trains[tree[i]]) {
			job->procs[i].role = by_phases[i].role;
			job->procs[i].trainer_below = by_phases[i].below;
		}
cleanup:
	free(by_phases);
	free(pow);
	free(tree_trains);
	free(tree);
}

bool job_classify_roles(struct job *job)
{
	int n = job->nprocs ? job->nprocs : 1, *par = xcalloc(n, sizeof(int));
	enum tb_role *old = xcalloc(n, sizeof(*old));
	unsigned int *bits = xcalloc(n, sizeof(*bits));
	bool *pow = xcalloc(n, sizeof(bool));
	bool changed = false, any_trainer = false;
	int i;

	parents(job, par);
	for (i = 0; i < job->nprocs; i++) {
		old[i] = job->procs[i].role;
		pow[i] = !job->procs[i].folded && proc_trains(&job->procs[i]);
		any_trainer |= pow[i];
	}
	if (any_trainer)
		roles_by_tree(job, par, pow, bits);
	else
		roles_by_activity(job, par, pow, bits);
	for (i = 0; i < job->nprocs; i++)
		changed |= old[i] != job->procs[i].role;
	free(par);
	free(old);
	free(bits);
	free(pow);
	return changed;
}

int job_headline(const struct job *job, uint64_t cp[TB_NCAT])
{
	int n = 0;

	memset(cp, 0, sizeof(uint64_t) * TB_NCAT);
	for (int i = 0; i < job->nprocs; i++) {
		const struct thread_rec *t;

		if (job->procs[i].role != TB_ROLE_TRAINER)
			continue;
		t = job_trainer_thread(&job->procs[i]);
		if (!t)
			continue;
		for (int c = 0; c < TB_NCAT; c++)
			cp[c] += t->cp[c];
		n += thread_count(t);
	}
	return n;
}

void job_counters(const struct job *job, const struct tb_counters *bpf,
		  struct run_counters *out)
{
	memset(out, 0, sizeof(*out));
	out->bpf = *bpf;
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads; j++) {
			out->io_rbytes += p->threads[j].io_rbytes;
			out->io_wbytes += p->threads[j].io_wbytes;
			out->switches += p->threads[j].nswitch;
		}
	}
}

void job_id_of(const struct job *job, const struct proc_rec *p, char *out, size_t len,
	       unsigned int *uid)
{
	const struct proc_rec *q = p, *up;
	int hops = 0;

	while (!q->labels.job[0] && (up = job_proc_const(job, q->ppid)) && up != q &&
	       !up->folded && hops++ < 64)
		q = up;
	*uid = q->labels.reads ? q->labels.uid : p->labels.uid;
	if (q->labels.job[0])
		snprintf(out, len, "%s", q->labels.job);
	else
		snprintf(out, len, "%d-%" PRIu64, (int)q->pid, q->labels.start_unix);
}
