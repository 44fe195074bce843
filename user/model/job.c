// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"

static void *grow(void *arr, int *cap, size_t elem)
{
	int ncap = *cap ? *cap * 2 : 8;
	void *n = realloc(arr, ncap * elem);

	if (!n)
		abort();	/* a profiler out of memory has nothing left to say */
	memset((char *)n + *cap * elem, 0, (ncap - *cap) * elem);
	*cap = ncap;
	return n;
}

struct proc_rec *job_proc(struct job *job, pid_t pid)
{
	/* Newest first: a recycled pid belongs to the latest process. */
	for (int i = job->nprocs - 1; i >= 0; i--)
		if (job->procs[i].pid == pid)
			return &job->procs[i];
	return NULL;
}

const struct proc_rec *job_proc_const(const struct job *job, pid_t pid)
{
	return job_proc((struct job *)job, pid);
}

struct proc_rec *job_add_proc(struct job *job, pid_t pid, pid_t ppid,
			      const char *comm, uint64_t start_ns)
{
	struct proc_rec *p;

	if (job->nprocs == job->cap)
		job->procs = grow(job->procs, &job->cap, sizeof(*p));
	p = &job->procs[job->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ppid = ppid;
	p->start_ns = start_ns;
	strncpy(p->comm, comm, sizeof(p->comm) - 1);
	return p;
}

struct thread_rec *job_add_thread(struct proc_rec *p, pid_t tid,
				  const char *comm, uint64_t start_ns)
{
	struct thread_rec *t;

	if (p->nthreads == p->cap)
		p->threads = grow(p->threads, &p->cap, sizeof(*t));
	t = &p->threads[p->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->slot = -1;
	t->start_ns = start_ns;
	strncpy(t->comm, comm, sizeof(t->comm) - 1);
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
	if (p->end_ns)
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
	memset(job, 0, sizeof(*job));
}

uint64_t thread_lifetime(const struct thread_rec *t, uint64_t now)
{
	uint64_t end = t->end_ns ? t->end_ns : now;

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

const struct thread_rec *job_main_thread(const struct proc_rec *p)
{
	for (int i = p->nthreads - 1; i >= 0; i--)
		if (p->threads[i].tid == p->pid)
			return &p->threads[i];
	return NULL;
}

/* PyTorch >= 2 names its data-loader worker processes. */
static bool named_worker(const struct proc_rec *p)
{
	return !strncmp(p->comm, "pt_data_worker", 14);
}

static bool looks_like_worker(const struct proc_rec *p)
{
	if (named_worker(p))
		return true;
	return (p->flags & TB_PF_FORKED) && !(p->flags & TB_PF_EXECED);
}

static bool has_child_with_role(const struct job *job, pid_t pid,
				enum tb_role role)
{
	for (int i = 0; i < job->nprocs; i++)
		if (job->procs[i].ppid == pid && job->procs[i].pid != pid &&
		    job->procs[i].role == role)
			return true;
	return false;
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

static bool has_trainer_descendant(const struct job *job, pid_t pid, int depth)
{
	for (int i = 0; i < job->nprocs && depth < 16; i++) {
		const struct proc_rec *c = &job->procs[i];

		if (c->ppid != pid || c->pid == pid)
			continue;
		if (c->role == TB_ROLE_TRAINER ||
		    has_trainer_descendant(job, c->pid, depth + 1))
			return true;
	}
	return false;
}

bool job_classify_roles(struct job *job)
{
	enum tb_role *old = calloc(job->nprocs ? job->nprocs : 1, sizeof(*old));
	bool *parent_of_workers = calloc(job->nprocs ? job->nprocs : 1, sizeof(bool));
	bool changed = false, any_trainer = false;
	int i;

	if (!old || !parent_of_workers)
		abort();
	for (i = 0; i < job->nprocs; i++) {
		old[i] = job->procs[i].role;
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
	for (i = 0; i < job->nprocs; i++)
		parent_of_workers[i] = job->procs[i].role == TB_ROLE_WORKER &&
			!named_worker(&job->procs[i]) &&
			has_child_with_role(job, job->procs[i].pid, TB_ROLE_WORKER);
	for (i = 0; i < job->nprocs; i++)
		if (parent_of_workers[i])
			job->procs[i].role = TB_ROLE_TRAINER;
	for (i = 0; i < job->nprocs; i++)
		parent_of_workers[i] = has_child_with_role(job, job->procs[i].pid,
							   TB_ROLE_WORKER);
	for (i = 0; i < job->nprocs; i++)
		if (parent_of_workers[i] && !named_worker(&job->procs[i]))
			job->procs[i].role = TB_ROLE_TRAINER;
	for (i = 0; i < job->nprocs; i++)
		if (job->procs[i].role == TB_ROLE_OTHER && main_thread_busy(&job->procs[i]))
			job->procs[i].role = TB_ROLE_TRAINER;
	for (i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (p->role == TB_ROLE_TRAINER && !parent_of_workers[i] &&
		    has_trainer_descendant(job, p->pid, 0))
			p->role = TB_ROLE_OTHER;
		any_trainer |= p->role == TB_ROLE_TRAINER;
	}
	for (i = 0; i < job->nprocs && !any_trainer; i++)
		if (job->procs[i].root && job->procs[i].role == TB_ROLE_OTHER)
			job->procs[i].role = TB_ROLE_TRAINER;
	for (i = 0; i < job->nprocs; i++)
		changed |= old[i] != job->procs[i].role;
	free(old);
	free(parent_of_workers);
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
		t = job_main_thread(&job->procs[i]);
		if (!t)
			continue;
		for (int c = 0; c < TB_NCAT; c++)
			cp[c] += t->cp[c];
		n++;
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
