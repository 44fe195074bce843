// SPDX-License-Identifier: BSD-3-Clause
/* user/model/job.c: the job model, roles and the headline. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "job.h"

#define S 1000000000ull		/* one second in ns */

static struct job job;

static void setup(void)
{
	memset(&job, 0, sizeof(job));
}

static void teardown(void)
{
	job_free(&job);
}

/* A process with a main thread that spent busy s on CPU and idle s idle. */
static struct proc_rec *proc(pid_t pid, pid_t ppid, const char *comm,
			     unsigned int flags, uint64_t busy, uint64_t idle)
{
	struct proc_rec *p = job_add_proc(&job, pid, ppid, comm, 0);
	struct thread_rec *t = job_add_thread(p, pid, comm, 0);

	p->flags = flags;
	t->own[TB_CPU] = t->cp[TB_CPU] = busy;
	t->own[TB_IDLE] = t->cp[TB_IDLE] = idle;
	return p;
}

#define FORKED TB_PF_FORKED
#define EXECED (TB_PF_FORKED | TB_PF_EXECED)

/* job_proc pointers move when the array grows: look roles up by pid. */
static enum tb_role role(pid_t pid)
{
	return job_proc(&job, pid)->role;
}

START_TEST(forked_not_execed_child_is_worker)
{
	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	proc(11, 10, "python", FORKED, 1 * S, 9 * S);
	job_classify_roles(&job);
	ck_assert_int_eq(role(11), TB_ROLE_WORKER);
}
END_TEST

/*
 * A child forked and never exec'd that exited within JOB_HELPER_LIFE_NS
 * (torch.compile's `g++ --version` with no g++: the exec failed) is a
 * helper, never a worker, whatever it woke or computed, before and after
 * a backward is seen; one that lived past it is a worker.
 */
START_TEST(forked_child_that_dies_young_is_never_a_worker)
{
	struct proc_rec *t = proc(10, 1, "python", 0, 5 * S, 5 * S), *h, *w;

	t->root = true;
	h = proc(11, 10, "python", FORKED, 1000000, 40000000);
	h->start_ns = h->threads[0].start_ns = S;
	h->end_ns = h->threads[0].end_ns = S + JOB_HELPER_LIFE_NS - 1;
	h->threads[0].fed = 100;
	w = proc(12, 10, "python", FORKED, 20000000, 0);
	w->start_ns = w->threads[0].start_ns = S;
	w->end_ns = w->threads[0].end_ns = S + JOB_HELPER_LIFE_NS;
	job_classify_roles(&job);
	ck_assert_int_eq(role(11), TB_ROLE_OTHER);
	ck_assert_int_eq(role(12), TB_ROLE_WORKER);
	ck_assert(job_died_young(job_proc(&job, 11)));
	/* The trainer known from its backward: the same. */
	t = job_proc(&job, 10);
	t->threads[0].ph[TB_PH_BACKWARD][TB_CPU] = S / 10;
	job_note_backward(t, &t->threads[0]);
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(11), TB_ROLE_OTHER);
	ck_assert_int_eq(role(12), TB_ROLE_WORKER);
}
END_TEST

START_TEST(forked_child_with_worker_children_is_trainer)
{
	proc(10, 1, "launcher", 0, 0, 10 * S)->root = true;
	proc(11, 10, "python", FORKED, 0, 10 * S);
	proc(12, 11, "python", FORKED, S, 0);
	proc(13, 11, "python", FORKED, S, 0);
	job_classify_roles(&job);
	ck_assert_int_eq(role(11), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(12), TB_ROLE_WORKER);
	ck_assert_int_eq(role(13), TB_ROLE_WORKER);
	ck_assert_int_eq(role(10), TB_ROLE_OTHER);
}
END_TEST

START_TEST(execed_process_with_worker_child_is_trainer)
{
	/* Idle main thread: only the worker child makes it a trainer. */
	proc(10, 1, "launcher", 0, 0, 10 * S)->root = true;
	proc(20, 10, "python", EXECED, 0, 10 * S);
	proc(21, 20, "python", FORKED, S, 0);
	job_classify_roles(&job);
	ck_assert_int_eq(role(20), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(21), TB_ROLE_WORKER);
	ck_assert_int_eq(role(10), TB_ROLE_OTHER);
}
END_TEST

START_TEST(idle_launcher_other_busy_ranks_trainers)
{
	proc(10, 1, "torchrun", 0, S / 100, 10 * S)->root = true;
	proc(20, 10, "python", EXECED, 8 * S, 2 * S);
	proc(30, 10, "python", EXECED, 9 * S, 1 * S);
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_OTHER);
	ck_assert_int_eq(role(20), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(30), TB_ROLE_TRAINER);
}
END_TEST

START_TEST(pt_data_worker_is_worker_even_if_execed)
{
	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	proc(11, 10, "pt_data_worker", EXECED, 9 * S, 1 * S);
	proc(12, 11, "python", FORKED, S, 0);	/* even with worker children */
	job_classify_roles(&job);
	ck_assert_int_eq(role(11), TB_ROLE_WORKER);
}
END_TEST

START_TEST(busy_threshold_is_one_fifth)
{
	proc(10, 1, "root", 0, 0, 5 * S)->root = true;
	proc(20, 10, "at20", EXECED, 20, 80);
	proc(30, 10, "at19", EXECED, 19, 81);
	proc(40, 10, "nothreadtime", EXECED, 0, 0);
	job_classify_roles(&job);
	ck_assert_int_eq(role(20), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(30), TB_ROLE_OTHER);
	ck_assert_int_eq(role(40), TB_ROLE_OTHER);
}
END_TEST

START_TEST(nothing_qualifies_root_is_trainer)
{
	proc(10, 1, "sleepy", 0, 0, 10 * S)->root = true;
	proc(20, 10, "sleepy2", EXECED, 0, 10 * S);
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(20), TB_ROLE_OTHER);
}
END_TEST

START_TEST(classify_reports_changes_once)
{
	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	proc(11, 10, "python", FORKED, S, 0);
	ck_assert(job_classify_roles(&job));
	ck_assert(!job_classify_roles(&job));
}
END_TEST

/* Backward time on a process's main thread: it ran PyTorch's phases. */
static void trains(pid_t pid)
{
	struct proc_rec *p = job_proc(&job, pid);

	p->threads[0].ph[TB_PH_BACKWARD][TB_CPU] = S / 10;
	job_note_backward(p, &p->threads[0]);
}

static void fed(pid_t pid, uint64_t wakes)
{
	job_proc(&job, pid)->threads[0].fed = wakes;
}

START_TEST(phases_spawn_ranks_workers_helpers)
{
	/* mp.spawn on torch 1.13: every process exec'd, workers unnamed */
	proc(10, 1, "python3", 0, S / 10, 10 * S)->root = true;
	proc(20, 10, "python3", EXECED, 8 * S, 2 * S);
	proc(30, 10, "python3", EXECED, 8 * S, 2 * S);
	proc(21, 20, "python3", EXECED, 5 * S, 5 * S);	/* spawn worker */
	proc(22, 10, "python3", EXECED, 0, 10 * S);	/* resource tracker */
	proc(23, 20, "git", EXECED, S, 0);		/* short helper, busy */
	proc(24, 30, "python3", EXECED, 5 * S, 5 * S);	/* spawn worker, not yet fed */
	/* its command line says spawn_main: fed twice, its batches mostly waited */
	proc(25, 30, "python3", EXECED | JOB_PF_MP_SPAWNED, 5 * S, 5 * S);
	trains(20);
	trains(30);
	fed(21, 300);
	fed(23, 3);
	fed(24, 7);
	fed(25, 2);
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_OTHER);
	ck_assert_int_eq(role(20), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(30), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(21), TB_ROLE_WORKER);
	ck_assert_int_eq(role(22), TB_ROLE_OTHER);
	ck_assert_int_eq(role(23), TB_ROLE_OTHER);
	ck_assert_int_eq(role(24), TB_ROLE_OTHER);
	ck_assert_int_eq(role(25), TB_ROLE_WORKER);
	fed(24, 8);	/* evidence arrives: the roles follow */
	ck_assert(job_classify_roles(&job));
	ck_assert_int_eq(role(24), TB_ROLE_WORKER);
}
END_TEST

/*
 * Attached as an epoch's spawn workers shut down: one woke its trainer
 * once more, its sibling (same parent, started with it) never did. A
 * spawn child started long after, never waking it, is no worker.
 */
START_TEST(phases_spawn_worker_generation)
{
	proc(20, 10, "python3", EXECED, 8 * S, 2 * S);
	proc(21, 20, "python3", EXECED | JOB_PF_MP_SPAWNED, S, S)->start_ns = 100 * S;
	proc(22, 20, "python3", EXECED | JOB_PF_MP_SPAWNED, S, S)->start_ns = 100 * S + S / 20;
	proc(23, 20, "python3", EXECED | JOB_PF_MP_SPAWNED, S, S)->start_ns = 110 * S;
	trains(20);
	fed(21, 1);
	job_classify_roles(&job);
	ck_assert_int_eq(role(21), TB_ROLE_WORKER);
	ck_assert_int_eq(role(22), TB_ROLE_WORKER);
	ck_assert_int_eq(role(23), TB_ROLE_OTHER);
}
END_TEST

START_TEST(phases_forkserver_is_other_its_children_workers)
{
	proc(10, 1, "python3", 0, 8 * S, 2 * S)->root = true;
	proc(20, 10, "python3", EXECED, S, 9 * S);	/* the forkserver */
	proc(21, 20, "python3", FORKED, 5 * S, 5 * S);
	proc(22, 20, "python3", FORKED, 5 * S, 5 * S);
	trains(10);
	fed(20, 12);	/* a pid back for every worker it started */
	fed(21, 200);
	fed(22, 200);
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(20), TB_ROLE_OTHER);
	ck_assert_int_eq(role(21), TB_ROLE_WORKER);
	ck_assert_int_eq(role(22), TB_ROLE_WORKER);
}
END_TEST

START_TEST(phases_launcher_above_ranks_is_other)
{
	/* torchrun's agent: it may wake its ranks, it never feeds them */
	proc(10, 1, "python3", 0, 3 * S, 7 * S)->root = true;
	proc(20, 10, "python3", EXECED, 8 * S, 2 * S);
	proc(21, 20, "python3", FORKED, 5 * S, 5 * S);
	proc(30, 10, "logger", EXECED, S, 9 * S);	/* fed, but by no trainer */
	trains(20);
	fed(10, 50);
	fed(30, 50);
	job_classify_roles(&job);
	ck_assert_int_eq(role(30), TB_ROLE_OTHER);
	ck_assert_int_eq(role(10), TB_ROLE_OTHER);
	ck_assert_int_eq(role(20), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(21), TB_ROLE_WORKER);
}
END_TEST

/*
 * serve: the node's jobs side by side, each a root. A torch job's backward
 * decides its own roles by phases; the CUDA job beside it (no torch: a
 * busy rank with forked workers) and an MPI job (an idle launcher, busy
 * ranks) keep the roles their activity gives, as when alone. They were all
 * "other" once any process of the node ran a backward.
 */
START_TEST(phases_of_one_job_leave_the_jobs_beside_it)
{
	proc(100, 1, "python3", 0, 5 * S, 5 * S)->root = true;
	proc(101, 100, "pt_data_worker", FORKED, 3 * S, 7 * S);
	proc(200, 1, "cuda_app", 0, 8 * S, 2 * S)->root = true;
	proc(201, 200, "cuda_app", FORKED, 4 * S, 6 * S);
	proc(202, 200, "cuda_app", FORKED, 4 * S, 6 * S);
	proc(300, 1, "mpirun", 0, S / 100, 10 * S)->root = true;
	proc(301, 300, "solver", EXECED, 9 * S, 1 * S);
	proc(302, 300, "solver", EXECED, 9 * S, 1 * S);
	trains(100);
	job_classify_roles(&job);
	ck_assert_int_eq(role(100), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(101), TB_ROLE_WORKER);
	ck_assert_int_eq(role(200), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(201), TB_ROLE_WORKER);
	ck_assert_int_eq(role(202), TB_ROLE_WORKER);
	ck_assert_int_eq(role(300), TB_ROLE_OTHER);
	ck_assert_int_eq(role(301), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(302), TB_ROLE_TRAINER);
	/* The CUDA job starts training with torch: its own roles go by phases. */
	trains(201);
	job_classify_roles(&job);
	ck_assert_int_eq(role(201), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(200), TB_ROLE_OTHER);	/* its launcher, then */
	ck_assert_int_eq(role(301), TB_ROLE_TRAINER);
	ck_assert(!job_classify_roles(&job));	/* settled */
}
END_TEST

START_TEST(helpers_of_a_busy_trainer_are_other)
{
	/* No phases: a busy main thread trains, but not the git it runs */
	proc(10, 1, "train", 0, 8 * S, 2 * S)->root = true;
	proc(20, 10, "git", EXECED, S, 0);
	proc(30, 10, "sh", EXECED, 0, S);
	proc(31, 30, "ip", EXECED, S, 0);	/* by way of a shell */
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_TRAINER);
	ck_assert_int_eq(role(20), TB_ROLE_OTHER);
	ck_assert_int_eq(role(30), TB_ROLE_OTHER);
	ck_assert_int_eq(role(31), TB_ROLE_OTHER);
}
END_TEST

START_TEST(headline_sums_trainer_main_threads_cp)
{
	struct proc_rec *p;
	struct thread_rec *t;
	uint64_t cp[TB_NCAT];
	int n;

	p = proc(20, 1, "rank0", 0, 0, 0);
	p->role = TB_ROLE_TRAINER;
	p->threads[0].cp[TB_CPU] = 3;
	p->threads[0].cp[TB_COMM] = 4;
	t = job_add_thread(p, 21, "helper", 0);	/* not the main thread */
	t->cp[TB_CPU] = 1000;

	p = proc(30, 1, "rank1", 0, 0, 0);
	p->role = TB_ROLE_TRAINER;
	p->threads[0].cp[TB_CPU] = 5;
	p->threads[0].cp[TB_IO] = 6;

	p = proc(40, 20, "worker", 0, 0, 0);
	p->role = TB_ROLE_WORKER;
	p->threads[0].cp[TB_CPU] = 100000;

	p = job_add_proc(&job, 50, 1, "nomain", 0);	/* trainer, main gone */
	p->role = TB_ROLE_TRAINER;
	job_add_thread(p, 51, "t", 0)->cp[TB_CPU] = 7000;

	n = job_headline(&job, cp);
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(cp[TB_CPU], 8);
	ck_assert_uint_eq(cp[TB_COMM], 4);
	ck_assert_uint_eq(cp[TB_IO], 6);
	ck_assert_uint_eq(sum_cats(cp), 18);
}
END_TEST

/*
 * The trainer thread: the thread that ran the user's backward, main or not
 * (a loop in a threading.Thread: Ray Train's train_func). The main thread
 * that waits for it, a DataLoader pin-memory thread and an intra-op pool
 * thread (no backward rows: the bracket is on the calling thread) are
 * never it; two threads that ran backward: the one with the most.
 */
START_TEST(trainer_thread_is_the_one_that_ran_backward)
{
	struct proc_rec *p = proc(60, 1, "python3", 0, 0, 10 * S);	/* main: waits */
	struct thread_rec *t;
	uint64_t cp[TB_NCAT];

	p->role = TB_ROLE_TRAINER;
	t = job_add_thread(p, 61, "pt_pin_memory", 0);
	t->cp[TB_DATA_WAIT] = t->own[TB_CPU] = 5 * S;
	t = job_add_thread(p, 62, "python3", 0);	/* intra-op pool */
	t->cp[TB_CPU] = t->own[TB_CPU] = 6 * S;
	t->ph[TB_PH_OTHER][TB_CPU] = 6 * S;
	ck_assert_int_eq(job_trainer_thread(p)->tid, 60);	/* no backward yet: main */
	t = job_add_thread(p, 63, "train_func", 0);
	t->cp[TB_CPU] = 3 * S;
	t->cp[TB_RUNQUEUE] = 1 * S;
	t->ph[TB_PH_FORWARD][TB_CPU] = 2 * S;
	ck_assert_int_eq(job_trainer_thread(p)->tid, 60);	/* forward only: not yet */
	t->ph[TB_PH_BACKWARD][TB_CPU] = 1 * S;
	job_note_backward(p, t);
	ck_assert_int_eq(job_trainer_thread(p)->tid, 63);
	ck_assert_int_eq(job_main_thread(p)->tid, 60);	/* still the process's main thread */
	ck_assert_int_eq(job_headline(&job, cp), 1);
	ck_assert_uint_eq(cp[TB_CPU], 3 * S);
	ck_assert_uint_eq(cp[TB_RUNQUEUE], 1 * S);
	ck_assert_uint_eq(cp[TB_IDLE], 0);		/* not the main thread's 10 s */

	/* A second thread ran more backward: it trains; on a tie the main thread. */
	p = job_proc(&job, 60);
	t = job_add_thread(p, 64, "train2", 0);
	t->ph[TB_PH_BACKWARD][TB_RUNQUEUE] = 1 * S + 1;
	job_note_backward(p, t);
	ck_assert_int_eq(job_trainer_thread(p)->tid, 64);
	p->threads[0].ph[TB_PH_BACKWARD][TB_CPU] = 1 * S + 1;
	ck_assert_int_eq(job_trainer_thread(p)->tid, 60);
}
END_TEST

START_TEST(headline_empty_job_is_zero)
{
	uint64_t cp[TB_NCAT];

	memset(cp, 0xff, sizeof(cp));
	ck_assert_int_eq(job_headline(&job, cp), 0);
	ck_assert_uint_eq(sum_cats(cp), 0);
}
END_TEST

START_TEST(lifetime_of_live_thread_runs_to_now)
{
	struct thread_rec t = { .start_ns = 100 };

	ck_assert_uint_eq(thread_lifetime(&t, 1000), 900);
}
END_TEST

START_TEST(lifetime_of_ended_thread_stops_at_end)
{
	struct thread_rec t = { .start_ns = 100, .end_ns = 500 };

	ck_assert_uint_eq(thread_lifetime(&t, 1000), 400);
}
END_TEST

START_TEST(lifetime_never_negative)
{
	struct thread_rec t = { .start_ns = 100 };

	ck_assert_uint_eq(thread_lifetime(&t, 50), 0);
}
END_TEST

START_TEST(proc_totals_sums_threads)
{
	struct proc_rec *p = job_add_proc(&job, 10, 1, "p", 0);
	uint64_t out[TB_NCAT];

	job_add_thread(p, 10, "a", 0)->own[TB_CPU] = 1;
	job_add_thread(p, 11, "b", 0)->own[TB_CPU] = 2;
	p->threads[1].own[TB_LOCK] = 5;
	p->threads[0].cp[TB_COMM] = 99;	/* cp is not own */
	memset(out, 0xff, sizeof(out));
	proc_totals(p, out);
	ck_assert_uint_eq(out[TB_CPU], 3);
	ck_assert_uint_eq(out[TB_LOCK], 5);
	ck_assert_uint_eq(out[TB_COMM], 0);
	ck_assert_uint_eq(sum_cats(out), 8);
}
END_TEST

START_TEST(many_procs_and_threads_grow)
{
	for (int i = 0; i < 100; i++) {
		struct proc_rec *p = job_add_proc(&job, 1000 + i, 1, "p", 0);

		for (int j = 0; j < 20; j++)
			job_add_thread(p, 1000 + i * 100 + j, "t", 0)->own[TB_CPU] = 1;
	}
	ck_assert_int_eq(job.nprocs, 100);
	ck_assert_int_eq(job_proc(&job, 1099)->nthreads, 20);
	ck_assert_int_eq(job_proc(&job, 1050)->threads[19].tid, 1000 + 5000 + 19);
	ck_assert_ptr_null(job_proc(&job, 999));
}
END_TEST


/* ---- folding ---- */

#define AGE JOB_FOLD_AGE_NS
#define LATE (1000 * S)		/* the fillers' end: young at every "now" below */

/* An exited process: its one thread ended at end, slot freed. */
static struct proc_rec *gone(pid_t pid, pid_t ppid, unsigned int flags, uint64_t end,
			     uint64_t cpu, uint64_t idle)
{
	struct proc_rec *p = proc(pid, ppid, "w", flags, cpu, idle);

	/* Forked children that lived past JOB_HELPER_LIFE_NS: workers, not helpers. */
	p->start_ns = p->threads[0].start_ns = end - cpu - idle - JOB_HELPER_LIFE_NS;
	p->end_ns = p->threads[0].end_ns = end;
	return p;
}

/*
 * The floors: the last JOB_KEEP_EXITED_PROCS processes and
 * JOB_KEEP_EXITED_THREADS threads to exit stay whatever their age. These
 * exit last (at LATE) and belong to pid 1, outside the job.
 */
static void fillers(void)
{
	struct proc_rec *p;

	for (int i = 0; i < JOB_KEEP_EXITED_PROCS; i++)
		gone(50000 + i, 1, EXECED, LATE, 1, 1);
	p = proc(60000, 1, "pool", EXECED, 1, 1);
	p->threads[0].slot = 1;
	for (int i = 0; i < JOB_KEEP_EXITED_THREADS; i++)
		job_add_thread(p, 60001 + i, "t", 0)->end_ns = LATE;
}

static const struct proc_rec *agg_of(pid_t ppid, enum tb_role r)
{
	for (int i = 0; i < job.nprocs; i++)
		if (job.procs[i].folded && job.procs[i].ppid == ppid && job.procs[i].role == r)
			return &job.procs[i];
	return NULL;
}

static int index_of(const struct proc_rec *p)
{
	return p ? (int)(p - job.procs) : -1;
}

static void all_totals(uint64_t out[TB_NCAT], int *nprocs, int *nthreads)
{
	memset(out, 0, sizeof(uint64_t) * TB_NCAT);
	*nprocs = *nthreads = 0;
	for (int i = 0; i < job.nprocs; i++) {
		uint64_t t[TB_NCAT];

		proc_totals(&job.procs[i], t);
		for (int c = 0; c < TB_NCAT; c++)
			out[c] += t[c];
		*nprocs += proc_count(&job.procs[i]);
		*nthreads += proc_nthreads(&job.procs[i]);
	}
}

START_TEST(fold_sums_exited_children_per_parent_and_role)
{
	uint64_t before[TB_NCAT], after[TB_NCAT], hl0[TB_NCAT], hl1[TB_NCAT];
	struct job_fold f;
	int np0, nt0, np1, nt1, n;
	const struct proc_rec *a;

	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	for (int i = 0; i < 100; i++)
		gone(100 + i, 10, FORKED, S + i, 2 * i, 3 * i + 1);
	fillers();
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_TRAINER);
	all_totals(before, &np0, &nt0);
	job_headline(&job, hl0);
	/* Young, or within the floors: nothing. */
	ck_assert_int_eq(job_fold(&job, S + AGE - 1, S + 99, &f), 0);
	n = job_fold(&job, S + 99 + AGE + 2 * S, S + 99, &f);
	ck_assert_int_eq(n, 100);
	ck_assert_int_eq(f.procs, 100);
	ck_assert_int_eq(job.nprocs, 1 + JOB_KEEP_EXITED_PROCS + 1 + 1);
	a = agg_of(10, TB_ROLE_WORKER);
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a->folded, 100);
	ck_assert_int_eq(a->pid, 0);
	ck_assert_int_eq(a->threads[0].folded, 100);	/* their main threads */
	ck_assert_int_eq(a->threads[1].folded, 0);
	ck_assert_int_eq(worker_tally_count(&a->tally), 100);
	ck_assert_int_eq(a->tally.n[TB_WK_WAITING], 100);	/* idle more than busy */
	ck_assert_uint_eq(a->end_ns, S + 99);
	all_totals(after, &np1, &nt1);
	ck_assert_int_eq(np1, np0);
	ck_assert_int_eq(nt1, nt0);
	for (int c = 0; c < TB_NCAT; c++)
		ck_assert_uint_eq(after[c], before[c]);
	job_classify_roles(&job);	/* the folded workers still make it a trainer */
	ck_assert_int_eq(role(10), TB_ROLE_TRAINER);
	job_headline(&job, hl1);
	for (int c = 0; c < TB_NCAT; c++)
		ck_assert_uint_eq(hl1[c], hl0[c]);
	/* Where everything went. */
	ck_assert_int_eq(f.nold, 1 + 100 + JOB_KEEP_EXITED_PROCS + 1);
	ck_assert_int_eq(f.nnew, job.nprocs);
	ck_assert_int_eq(f.to[0], 0);
	ck_assert(!f.merged[0]);
	for (int i = 1; i <= 100; i++) {
		ck_assert_int_eq(f.to[i], index_of(a));
		ck_assert(f.merged[i]);
		ck_assert_int_eq(f.thr_to[f.thr_off[i]], 0);
	}
	ck_assert_int_eq(f.to[101], 1);	/* the first filler moved down */
	ck_assert(!f.merged[101]);
	ck_assert_ptr_null(job_proc(&job, 150));
	ck_assert_int_eq(index_of(job_proc(&job, 10)), 0);
	job_fold_free(&f);
	/* More of them later: into the same aggregate. */
	gone(300, 10, FORKED, 10 * S, S, 0);
	job_classify_roles(&job);
	ck_assert_int_eq(job_fold(&job, 10 * S + AGE, 10 * S, &f), 1);
	a = agg_of(10, TB_ROLE_WORKER);
	ck_assert_int_eq(a->folded, 101);
	ck_assert_int_eq(a->tally.n[TB_WK_CPU_BOUND], 1);
	ck_assert_int_eq(a->tally.busiest, 300);
	job_fold_free(&f);
}
END_TEST

START_TEST(fold_waits_for_age_settling_and_exit)
{
	struct job_fold f;

	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	gone(11, 10, FORKED, 10 * S, S, S);
	gone(12, 10, FORKED, 20 * S, S, S);
	gone(13, 10, FORKED, 20 * S, S, S)->threads[0].slot = 7;	/* not read yet */
	proc(14, 10, "live", FORKED, S, S);
	fillers();
	/* Young: nothing. 11 is old enough, but not settled yet. */
	ck_assert_int_eq(job_fold(&job, 10 * S + AGE - 1, 100 * S, &f), 0);
	ck_assert_int_eq(job_fold(&job, 10 * S + AGE + 2 * S, 10 * S - 1, &f), 0);
	ck_assert_int_eq(job_fold(&job, 10 * S + AGE + 4 * S, 10 * S, &f), 1);
	ck_assert_int_eq(f.to[1], index_of(agg_of(10, TB_ROLE_OTHER)));
	ck_assert_int_eq(f.to[2], 1);
	job_fold_free(&f);
	/* Later: 12 folds too, 13 (slot held) and the live 14 never. */
	ck_assert_int_eq(job_fold(&job, 500 * S, 500 * S, &f), 1);
	ck_assert_int_eq(agg_of(10, TB_ROLE_OTHER)->folded, 2);
	ck_assert_ptr_nonnull(job_proc(&job, 13));
	ck_assert_ptr_nonnull(job_proc(&job, 14));
	job_fold_free(&f);
	/* At most once a period unless a cap is passed. */
	job.procs[index_of(job_proc(&job, 13))].threads[0].slot = -1;
	ck_assert_int_eq(job_fold(&job, 500 * S + 1, 500 * S, &f), 0);
	ck_assert_int_eq(job_fold(&job, 501 * S, 501 * S, &f), 1);
	job_fold_free(&f);
}
END_TEST

START_TEST(fold_keeps_the_last_exited_whatever_their_age)
{
	struct job_fold f;

	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	for (int i = 0; i < JOB_KEEP_EXITED_PROCS + 3; i++)
		gone(100 + i, 10, FORKED, S + i, 1, 1);
	ck_assert_int_eq(job_fold(&job, 100000 * S, 100000 * S, &f), 3);
	ck_assert_ptr_null(job_proc(&job, 102));
	ck_assert_ptr_nonnull(job_proc(&job, 103));
	job_fold_free(&f);
}
END_TEST

/*
 * serve: every job the daemon finds is a root, and a month of jobs must not
 * pile up. Roots fold once job->fold_roots says so, but never one with a
 * live process below it (the job a process belongs to is its topmost
 * listed ancestor's), and never for -p.
 */
START_TEST(fold_roots_in_a_daemon_not_above_the_living)
{
	uint64_t before[TB_NCAT], after[TB_NCAT];
	struct job_fold f;
	struct proc_rec *w;
	int np, nt;

	for (int i = 0; i < JOB_KEEP_EXITED_PROCS + 5; i++)
		gone(100 + i, 1, EXECED, S + i, 1, 1)->root = true;
	gone(90, 1, EXECED, 1, 1, 1)->root = true;		/* its worker's child lives on */
	gone(91, 90, FORKED, 1, 1, 1);
	proc(92, 91, "w", FORKED, 1, 1);
	/* -p: roots stay; 91 stays too, above a live process. */
	ck_assert_int_eq(job_fold(&job, 100000 * S, 100000 * S, &f), 0);
	job.fold_roots = true;
	all_totals(before, &np, &nt);
	/* 263 exited, the last 256 kept: 7 may fold, and 90 and 91 may not. */
	ck_assert_int_eq(job_fold(&job, 100001 * S, 100000 * S, &f), 7);
	ck_assert_ptr_null(job_proc(&job, 100));
	ck_assert_ptr_null(job_proc(&job, 106));
	ck_assert_ptr_nonnull(job_proc(&job, 107));
	ck_assert_ptr_nonnull(job_proc(&job, 90));
	ck_assert_ptr_nonnull(job_proc(&job, 91));
	ck_assert_int_eq(agg_of(0, TB_ROLE_OTHER)->folded, 7);
	all_totals(after, &np, &nt);
	for (int c = 0; c < TB_NCAT; c++)
		ck_assert_uint_eq(after[c], before[c]);
	job_fold_free(&f);
	/* The last of it gone too, and 3 more exit: 90-92 fold, and the oldest kept, 107. */
	w = job_proc(&job, 92);
	w->end_ns = w->threads[0].end_ns = 2;
	for (int i = 0; i < 3; i++)
		gone(400 + i, 1, EXECED, 1000 * S, 1, 1)->root = true;
	ck_assert_int_eq(job_fold(&job, 100003 * S, 100002 * S, &f), 4);
	ck_assert_ptr_null(job_proc(&job, 107));
	ck_assert_ptr_nonnull(job_proc(&job, 108));
	ck_assert_ptr_null(job_proc(&job, 90));
	ck_assert_ptr_null(job_proc(&job, 91));
	ck_assert_ptr_null(job_proc(&job, 92));
	job_fold_free(&f);
}
END_TEST

START_TEST(fold_exited_threads_of_a_live_process)
{
	struct proc_rec *p = proc(10, 1, "python", 0, 5 * S, 5 * S);
	uint64_t before[TB_NCAT], after[TB_NCAT];
	struct job_fold f;
	int np0, nt0, np1, nt1;

	p->root = true;
	p->threads[0].slot = 0;
	for (int i = 0; i < 50; i++) {
		struct thread_rec *t = job_add_thread(p, 1000 + i, "pool", i);

		t->own[TB_CPU] = 10 + i;
		t->end_ns = S + i;
	}
	job_add_thread(p, 2000, "alive", 0)->slot = 3;
	fillers();
	p = &job.procs[0];
	all_totals(before, &np0, &nt0);
	ck_assert_int_eq(job_fold(&job, 2 * S + AGE, 2 * S, &f), 50);
	ck_assert_int_eq(f.threads, 50);
	p = &job.procs[0];
	ck_assert_int_eq(p->nthreads, 3);
	ck_assert_int_eq(p->threads[0].tid, 10);
	ck_assert_int_eq(p->threads[1].tid, 2000);
	ck_assert_int_eq(p->threads[2].folded, 50);
	ck_assert_int_eq(p->threads[2].tid, 0);
	ck_assert_uint_eq(thread_lifetime(&p->threads[2], 0), 50 * 10 + 49 * 50 / 2);
	ck_assert_int_eq(proc_nthreads(p), 52);
	ck_assert_int_eq(f.thr_to[0], 0);
	ck_assert_int_eq(f.thr_to[1], 2);
	ck_assert_int_eq(f.thr_to[51], 1);
	ck_assert(!f.merged[0]);
	all_totals(after, &np1, &nt1);
	ck_assert_int_eq(nt1, nt0);
	for (int c = 0; c < TB_NCAT; c++)
		ck_assert_uint_eq(after[c], before[c]);
	job_fold_free(&f);
}
END_TEST

/* A loop thread that ended in a process that lives on is its trainer thread: kept. */
START_TEST(fold_keeps_an_exited_trainer_thread)
{
	struct proc_rec *p = proc(10, 1, "python", 0, 0, 5 * S);
	struct job_fold f;

	p->root = true;
	p->threads[0].slot = 0;
	for (int i = 0; i < 50; i++) {
		struct thread_rec *t = job_add_thread(p, 1000 + i, i == 7 ? "train_func" : "pool", i);

		t->own[TB_CPU] = 10 + i;
		t->end_ns = S + i;
	}
	p->threads[8].ph[TB_PH_BACKWARD][TB_CPU] = 3;	/* tid 1007 */
	job_note_backward(p, &p->threads[8]);
	fillers();
	ck_assert_int_eq(job_fold(&job, 2 * S + AGE, 2 * S, &f), 49);
	p = &job.procs[0];
	ck_assert_int_eq(p->nthreads, 3);
	ck_assert_int_eq(job_trainer_thread(p)->tid, 1007);
	ck_assert_int_eq(job_main_thread(p)->tid, 10);
	job_fold_free(&f);
}
END_TEST

START_TEST(fold_caps_the_exited_kept)
{
	struct job_fold f;
	int n = JOB_MAX_EXITED_PROCS + 10;

	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	for (int i = 0; i < n; i++)
		gone(100 + i, 10, FORKED, S + i, 1, 1);
	/* Young, but 10 too many: the 10 oldest go. */
	ck_assert_int_eq(job_fold(&job, S + n, S + n, &f), 10);
	ck_assert_int_eq(job.nprocs, 1 + JOB_MAX_EXITED_PROCS + 1);
	ck_assert_ptr_null(job_proc(&job, 109));
	ck_assert_ptr_nonnull(job_proc(&job, 110));
	job_fold_free(&f);
}
END_TEST

START_TEST(fold_keeps_pid_reuse_apart)
{
	struct job_fold f;

	proc(10, 1, "python", 0, 5 * S, 5 * S)->root = true;
	gone(500, 10, FORKED, 2 * S, S, 0);
	proc(500, 10, "again", EXECED, S, S)->start_ns = 3 * S;
	ck_assert_str_eq(job_proc(&job, 500)->comm, "again");
	ck_assert_str_eq(job_proc_at(&job, 500, 2 * S)->comm, "w");
	ck_assert_str_eq(job_proc_at(&job, 500, 4 * S)->comm, "again");
	fillers();
	ck_assert_int_eq(job_fold(&job, 2 * S + AGE, 2 * S, &f), 1);
	ck_assert_str_eq(job_proc(&job, 500)->comm, "again");
	ck_assert_str_eq(job_proc_at(&job, 500, 2 * S)->comm, "again");
	job_fold_free(&f);
}
END_TEST

/* A launcher's exited helper with exited workers of its own: up to the launcher. */
START_TEST(fold_moves_up_when_the_parent_folds)
{
	struct job_fold f;
	uint64_t before[TB_NCAT], after[TB_NCAT];
	int np0, nt0, np1, nt1;
	const struct proc_rec *w;

	proc(10, 1, "launcher", 0, 0, 10 * S)->root = true;
	gone(20, 10, EXECED, 5 * S, S, S);
	gone(21, 20, FORKED, 4 * S, S, 0);
	gone(22, 20, FORKED, 4 * S, S, 0);
	fillers();
	job_classify_roles(&job);
	ck_assert_int_eq(role(20), TB_ROLE_TRAINER);
	all_totals(before, &np0, &nt0);
	/* The workers first: under their parent 20. */
	ck_assert_int_eq(job_fold(&job, 4 * S + AGE, 4 * S, &f), 2);
	w = agg_of(20, TB_ROLE_WORKER);
	ck_assert_ptr_nonnull(w);
	job_fold_free(&f);
	job_classify_roles(&job);
	ck_assert_int_eq(role(20), TB_ROLE_TRAINER);
	/* Then 20: it goes under 10, and its workers' aggregate moves up, whole. */
	ck_assert_int_eq(job_fold(&job, 5 * S + AGE, 5 * S, &f), 1);
	ck_assert_ptr_null(agg_of(20, TB_ROLE_WORKER));
	w = agg_of(10, TB_ROLE_WORKER);
	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(w->folded, 2);
	ck_assert_int_eq(agg_of(10, TB_ROLE_TRAINER)->folded, 1);
	ck_assert(!f.merged[f.nold - 1]);
	all_totals(after, &np1, &nt1);
	ck_assert_int_eq(np1, np0);
	for (int c = 0; c < TB_NCAT; c++)
		ck_assert_uint_eq(after[c], before[c]);
	job_classify_roles(&job);
	ck_assert_int_eq(role(10), TB_ROLE_OTHER);	/* a trainer ran below it */
	job_fold_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("job");
	TCase *tc = tcase_create("job");
	SRunner *sr;
	int nfail;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, forked_not_execed_child_is_worker);
	tcase_add_test(tc, forked_child_that_dies_young_is_never_a_worker);
	tcase_add_test(tc, forked_child_with_worker_children_is_trainer);
	tcase_add_test(tc, execed_process_with_worker_child_is_trainer);
	tcase_add_test(tc, idle_launcher_other_busy_ranks_trainers);
	tcase_add_test(tc, pt_data_worker_is_worker_even_if_execed);
	tcase_add_test(tc, busy_threshold_is_one_fifth);
	tcase_add_test(tc, nothing_qualifies_root_is_trainer);
	tcase_add_test(tc, classify_reports_changes_once);
	tcase_add_test(tc, phases_spawn_ranks_workers_helpers);
	tcase_add_test(tc, phases_spawn_worker_generation);
	tcase_add_test(tc, phases_forkserver_is_other_its_children_workers);
	tcase_add_test(tc, phases_launcher_above_ranks_is_other);
	tcase_add_test(tc, helpers_of_a_busy_trainer_are_other);
	tcase_add_test(tc, headline_sums_trainer_main_threads_cp);
	tcase_add_test(tc, phases_of_one_job_leave_the_jobs_beside_it);
	tcase_add_test(tc, trainer_thread_is_the_one_that_ran_backward);
	tcase_add_test(tc, fold_keeps_an_exited_trainer_thread);
	tcase_add_test(tc, headline_empty_job_is_zero);
	tcase_add_test(tc, lifetime_of_live_thread_runs_to_now);
	tcase_add_test(tc, lifetime_of_ended_thread_stops_at_end);
	tcase_add_test(tc, lifetime_never_negative);
	tcase_add_test(tc, proc_totals_sums_threads);
	tcase_add_test(tc, many_procs_and_threads_grow);
	tcase_add_test(tc, fold_sums_exited_children_per_parent_and_role);
	tcase_add_test(tc, fold_waits_for_age_settling_and_exit);
	tcase_add_test(tc, fold_keeps_the_last_exited_whatever_their_age);
	tcase_add_test(tc, fold_roots_in_a_daemon_not_above_the_living);
	tcase_add_test(tc, fold_exited_threads_of_a_live_process);
	tcase_add_test(tc, fold_caps_the_exited_kept);
	tcase_add_test(tc, fold_keeps_pid_reuse_apart);
	tcase_add_test(tc, fold_moves_up_when_the_parent_folds);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail ? EXIT_FAILURE : EXIT_SUCCESS;
}
