// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include "job.h"

const char *const tb_cat_names[TB_NCAT] = {
	[TB_CPU] = "cpu", [TB_GPU_WAIT] = "gpu_wait", [TB_COMM] = "comm",
	[TB_DATA_WAIT] = "data_wait", [TB_IO] = "io",
	[TB_RUNQUEUE] = "runqueue", [TB_LOCK] = "lock", [TB_IDLE] = "idle",
};

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

struct thread_rec *job_thread(struct proc_rec *p, pid_t tid, int slot)
{
	for (int i = p->nthreads - 1; i >= 0; i--)
		if (p->threads[i].tid == tid && p->threads[i].slot == slot)
			return &p->threads[i];
	return NULL;
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

uint64_t sum_cats(const uint64_t c[TB_NCAT])
{
	uint64_t s = 0;

	for (int i = 0; i < TB_NCAT; i++)
		s += c[i];
	return s;
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

static const struct thread_rec *main_thread(const struct proc_rec *p)
{
	for (int i = p->nthreads - 1; i >= 0; i--)
		if (p->threads[i].tid == p->pid)
			return &p->threads[i];
	return NULL;
}

static bool looks_like_worker(const struct proc_rec *p)
{
	if (!strncmp(p->comm, "pt_data_worker", 14))
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

/* Main thread not idle for at least a fifth of its life. */
static bool main_thread_busy(const struct proc_rec *p)
{
	const struct thread_rec *t = main_thread(p);
	uint64_t total;

	if (!t)
		return false;
	total = sum_cats(t->own);
	return total && (total - t->own[TB_IDLE]) * 5 >= total;
}

bool job_classify_roles(struct job *job)
{
	enum tb_role *old = calloc(job->nprocs ? job->nprocs : 1, sizeof(*old));
	bool changed = false, any_trainer = false;
	int i;

	if (!old)
		abort();
	for (i = 0; i < job->nprocs; i++) {
		old[i] = job->procs[i].role;
		job->procs[i].role = looks_like_worker(&job->procs[i]) ?
			TB_ROLE_WORKER : TB_ROLE_OTHER;
	}
	/* A "worker" that forks workers of its own is a forked rank. */
	for (i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (p->role == TB_ROLE_WORKER &&
		    strncmp(p->comm, "pt_data_worker", 14) &&
		    has_child_with_role(job, p->pid, TB_ROLE_WORKER))
			p->role = TB_ROLE_TRAINER;
	}
	for (i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (p->role == TB_ROLE_OTHER &&
		    (has_child_with_role(job, p->pid, TB_ROLE_WORKER) ||
		     main_thread_busy(p)))
			p->role = TB_ROLE_TRAINER;
		any_trainer |= p->role == TB_ROLE_TRAINER;
	}
	for (i = 0; i < job->nprocs && !any_trainer; i++)
		if (job->procs[i].root && job->procs[i].role == TB_ROLE_OTHER)
			job->procs[i].role = TB_ROLE_TRAINER;
	for (i = 0; i < job->nprocs; i++)
		changed |= old[i] != job->procs[i].role;
	free(old);
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
		t = main_thread(&job->procs[i]);
		if (!t)
			continue;
		for (int c = 0; c < TB_NCAT; c++)
			cp[c] += t->cp[c];
		n++;
	}
	return n;
}
