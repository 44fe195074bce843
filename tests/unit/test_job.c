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
	proc(10, 1, "root", 0, 5 * S, 0)->root = true;
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

int main(void)
{
	Suite *s = suite_create("job");
	TCase *tc = tcase_create("job");
	SRunner *sr;
	int nfail;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, forked_not_execed_child_is_worker);
	tcase_add_test(tc, forked_child_with_worker_children_is_trainer);
	tcase_add_test(tc, execed_process_with_worker_child_is_trainer);
	tcase_add_test(tc, idle_launcher_other_busy_ranks_trainers);
	tcase_add_test(tc, pt_data_worker_is_worker_even_if_execed);
	tcase_add_test(tc, busy_threshold_is_one_fifth);
	tcase_add_test(tc, nothing_qualifies_root_is_trainer);
	tcase_add_test(tc, classify_reports_changes_once);
	tcase_add_test(tc, headline_sums_trainer_main_threads_cp);
	tcase_add_test(tc, headline_empty_job_is_zero);
	tcase_add_test(tc, lifetime_of_live_thread_runs_to_now);
	tcase_add_test(tc, lifetime_of_ended_thread_stops_at_end);
	tcase_add_test(tc, lifetime_never_negative);
	tcase_add_test(tc, proc_totals_sums_threads);
	tcase_add_test(tc, many_procs_and_threads_grow);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail ? EXIT_FAILURE : EXIT_SUCCESS;
}
