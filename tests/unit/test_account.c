// SPDX-License-Identifier: BSD-3-Clause
/* user/acquire/account.c: splitting time that BPF has not closed yet. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "account.h"

static uint64_t own[TB_NCAT], cp[TB_NCAT];

static void reset(void)
{
	memset(own, 0, sizeof(own));
	memset(cp, 0, sizeof(cp));
}

static uint64_t total(const uint64_t c[TB_NCAT])
{
	uint64_t s = 0;

	for (int i = 0; i < TB_NCAT; i++)
		s += c[i];
	return s;
}

/* A slot in state st whose open interval started at 1000. */
static struct tb_slot slot(enum tb_state st, enum tb_wait wait)
{
	struct tb_slot s;

	memset(&s, 0, sizeof(s));
	s.state = st;
	s.wait = wait;
	s.since = 1000;
	s.tgid = 100;
	s.tid = 101;	/* not the main thread, unless a test says so */
	return s;
}

START_TEST(unknown_splits_cpu_rq_and_wait)
{
	reset();
	account_unknown(1000, 300, 100, TB_W_FILE, own, cp);
	ck_assert_uint_eq(own[TB_CPU], 300);
	ck_assert_uint_eq(own[TB_RUNQUEUE], 100);
	ck_assert_uint_eq(own[TB_IO], 600);
	ck_assert_uint_eq(total(own), 1000);
	ck_assert_mem_eq(own, cp, sizeof(own));
}
END_TEST

START_TEST(unknown_sum_exact_when_cpu_plus_rq_exceed_elapsed)
{
	reset();
	account_unknown(1000, 800, 400, TB_W_FUTEX, own, cp);
	ck_assert_uint_eq(own[TB_CPU], 800);
	ck_assert_uint_eq(own[TB_RUNQUEUE], 200);
	ck_assert_uint_eq(own[TB_LOCK], 0);
	ck_assert_uint_eq(total(own), 1000);
	ck_assert_uint_eq(total(cp), 1000);
}
END_TEST

START_TEST(unknown_sum_exact_when_cpu_alone_exceeds_elapsed)
{
	reset();
	account_unknown(1000, 1500, 50, TB_W_PIPE, own, cp);
	ck_assert_uint_eq(own[TB_CPU], 1000);
	ck_assert_uint_eq(own[TB_RUNQUEUE], 0);
	ck_assert_uint_eq(total(own), 1000);
	ck_assert_uint_eq(total(cp), 1000);
}
END_TEST

START_TEST(unknown_remainder_goes_to_wait_category)
{
	static const struct { unsigned int wait; int cat; } cases[] = {
		{ TB_W_FILE, TB_IO }, { TB_W_IOWAIT, TB_IO },
		{ TB_W_SOCKET, TB_COMM }, { TB_W_SLEEP, TB_IDLE },
		{ TB_W_PIPE, TB_IDLE }, { TB_W_OTHER, TB_IDLE },
		/* nobody has woken it yet: a pool thread waiting for work */
		{ TB_W_POLL, TB_IDLE }, { TB_W_FUTEX, TB_IDLE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		reset();
		account_unknown(1000, 100, 0, cases[i].wait, own, cp);
		ck_assert_msg(own[cases[i].cat] == 900 && cp[cases[i].cat] == 900,
			      "wait %u: remainder not in category %d",
			      cases[i].wait, cases[i].cat);
	}
}
END_TEST

START_TEST(unknown_adds_to_existing_totals)
{
	reset();
	own[TB_CPU] = cp[TB_CPU] = 7;
	account_unknown(10, 3, 0, TB_W_SLEEP, own, cp);
	ck_assert_uint_eq(own[TB_CPU], 10);
	ck_assert_uint_eq(own[TB_IDLE], 7);
	ck_assert_uint_eq(cp[TB_CPU], 10);
}
END_TEST

START_TEST(open_oncpu_is_cpu)
{
	struct tb_slot s = slot(TB_ST_ONCPU, 0);

	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_CPU], 500);
	ck_assert_uint_eq(cp[TB_CPU], 500);
	ck_assert_uint_eq(total(own), 500);
	ck_assert_uint_eq(total(cp), 500);
}
END_TEST

START_TEST(open_oncpu_comm_thread_is_own_cpu_cp_comm)
{
	struct tb_slot s = slot(TB_ST_ONCPU, 0);

	s.net_ns = 80;
	s.blk_ns = 100;
	s.net_waits = TB_NET_MIN_WAITS;
	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_CPU], 500);
	ck_assert_uint_eq(cp[TB_COMM], 500);
	ck_assert_uint_eq(cp[TB_CPU], 0);
	ck_assert_uint_eq(total(cp), 500);
}
END_TEST

START_TEST(open_oncpu_main_thread_is_never_comm)
{
	struct tb_slot s = slot(TB_ST_ONCPU, 0);

	s.tid = s.tgid;
	s.net_ns = 80;
	s.blk_ns = 100;
	s.net_waits = 10 * TB_NET_MIN_WAITS;
	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(cp[TB_CPU], 500);
	ck_assert_uint_eq(cp[TB_COMM], 0);
}
END_TEST

START_TEST(open_oncpu_inside_socket_call_is_cp_comm)
{
	struct tb_slot s = slot(TB_ST_ONCPU, 0);

	s.flags = TB_SF_IN_SOCKET;
	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_CPU], 500);
	ck_assert_uint_eq(cp[TB_COMM], 500);
}
END_TEST

/* The CUDA runtime spins while it waits for the GPU: that is not compute. */
START_TEST(open_oncpu_inside_cuda_sync_is_gpu_wait)
{
	struct tb_slot s = slot(TB_ST_ONCPU, 0);

	s.depth = 1;
	s.region = TB_GPU_WAIT;
	s.flags = TB_SF_IN_SOCKET;	/* the probed call wins */
	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_GPU_WAIT], 500);
	ck_assert_uint_eq(cp[TB_GPU_WAIT], 500);
	ck_assert_uint_eq(total(own), 500);
}
END_TEST

/* Preempted while it spins for the GPU: still waiting for the GPU. */
START_TEST(open_runnable_inside_cuda_sync_is_gpu_wait)
{
	struct tb_slot s = slot(TB_ST_RUNNABLE, 0);

	s.depth = 1;
	s.region = TB_GPU_WAIT;
	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_GPU_WAIT], 500);
	ck_assert_uint_eq(own[TB_RUNQUEUE], 0);
	ck_assert_uint_eq(cp[TB_GPU_WAIT], 500);
}
END_TEST

START_TEST(open_blocked_inside_nccl_call_is_comm)
{
	struct tb_slot s = slot(TB_ST_BLOCKED, 0);

	s.wait = TB_W_FUTEX;	/* would be lock or idle outside the call */
	s.depth = 2;
	s.region = TB_COMM;
	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_COMM], 500);
	ck_assert_uint_eq(cp[TB_COMM], 500);
	ck_assert_uint_eq(total(cp), 500);
}
END_TEST

START_TEST(open_runnable_is_runqueue)
{
	struct tb_slot s = slot(TB_ST_RUNNABLE, 0);

	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_RUNQUEUE], 500);
	ck_assert_uint_eq(cp[TB_RUNQUEUE], 500);
	ck_assert_uint_eq(total(own), 500);
}
END_TEST

START_TEST(open_blocked_uses_wait_category)
{
	static const struct { unsigned int wait; int cat; } cases[] = {
		{ TB_W_FILE, TB_IO }, { TB_W_SOCKET, TB_COMM },
		{ TB_W_FUTEX, TB_IDLE }, { TB_W_PIPE, TB_IDLE },
		{ TB_W_SLEEP, TB_IDLE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tb_slot s = slot(TB_ST_BLOCKED, cases[i].wait);

		reset();
		account_open_interval(&s, 1500, own, cp);
		ck_assert_msg(own[cases[i].cat] == 500 && cp[cases[i].cat] == 500 &&
			      total(own) == 500 && total(cp) == 500,
			      "wait %u: not all in category %d",
			      cases[i].wait, cases[i].cat);
	}
}
END_TEST

START_TEST(open_blocked_comm_thread_cp_follows_wait)
{
	/* The net flag only changes on-CPU time, not a blocked interval. */
	struct tb_slot s = slot(TB_ST_BLOCKED, TB_W_FUTEX);

	s.net_ns = 100;
	s.blk_ns = 100;
	s.net_waits = TB_NET_MIN_WAITS;
	reset();
	account_open_interval(&s, 1500, own, cp);
	ck_assert_uint_eq(own[TB_IDLE], 500);
	ck_assert_uint_eq(cp[TB_IDLE], 500);
}
END_TEST

START_TEST(open_unknown_exited_free_add_nothing)
{
	const enum tb_state sts[] = { TB_ST_UNKNOWN, TB_ST_EXITED, TB_ST_FREE };

	for (size_t i = 0; i < 3; i++) {
		struct tb_slot s = slot(sts[i], TB_W_FUTEX);

		reset();
		account_open_interval(&s, 1500, own, cp);
		ck_assert_msg(total(own) == 0 && total(cp) == 0,
			      "state %d added time", sts[i]);
	}
}
END_TEST

START_TEST(open_now_before_since_adds_nothing)
{
	struct tb_slot s = slot(TB_ST_ONCPU, 0);

	reset();
	account_open_interval(&s, 900, own, cp);
	ck_assert_uint_eq(total(own), 0);
	ck_assert_uint_eq(total(cp), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("account");
	TCase *tc = tcase_create("account");
	SRunner *sr;
	int nfail;

	tcase_add_test(tc, unknown_splits_cpu_rq_and_wait);
	tcase_add_test(tc, unknown_sum_exact_when_cpu_plus_rq_exceed_elapsed);
	tcase_add_test(tc, unknown_sum_exact_when_cpu_alone_exceeds_elapsed);
	tcase_add_test(tc, unknown_remainder_goes_to_wait_category);
	tcase_add_test(tc, unknown_adds_to_existing_totals);
	tcase_add_test(tc, open_oncpu_is_cpu);
	tcase_add_test(tc, open_oncpu_comm_thread_is_own_cpu_cp_comm);
	tcase_add_test(tc, open_oncpu_main_thread_is_never_comm);
	tcase_add_test(tc, open_oncpu_inside_socket_call_is_cp_comm);
	tcase_add_test(tc, open_oncpu_inside_cuda_sync_is_gpu_wait);
	tcase_add_test(tc, open_blocked_inside_nccl_call_is_comm);
	tcase_add_test(tc, open_runnable_inside_cuda_sync_is_gpu_wait);
	tcase_add_test(tc, open_runnable_is_runqueue);
	tcase_add_test(tc, open_blocked_uses_wait_category);
	tcase_add_test(tc, open_blocked_comm_thread_cp_follows_wait);
	tcase_add_test(tc, open_unknown_exited_free_add_nothing);
	tcase_add_test(tc, open_now_before_since_adds_nothing);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail ? EXIT_FAILURE : EXIT_SUCCESS;
}
