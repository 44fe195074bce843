// SPDX-License-Identifier: BSD-3-Clause
/* The classification rules shared by BPF and user space (include/). */
#include <check.h>
#include <stdlib.h>
#include "trainbpf.h"
#include "syscall_class.h"

/* Shorthand: a waker that is not traced carries no role/proc/net data. */
/* The classifier with a traced waker described field by field. */
static __u32 wcat(__u32 wait, __u32 wk, __u32 role, int same, int is_main, int net)
{
	struct tb_waker_info w = { .role = role, .same_proc = same,
				   .is_main = is_main, .net = net };

	return tb_wait_category(wait, wk, &w);
}

static int wholesale(__u32 role, int same, int net)
{
	struct tb_waker_info w = { .role = role, .same_proc = same, .net = net };

	return tb_waker_is_wholesale(&w);
}

static __u32 cat(__u32 wait, __u32 wk)
{
	return wcat(wait, wk, TB_ROLE_OTHER, 0, 0, 0);
}

/*
 * Every wait kind x waker kind. The TRACED column is a plain traced thread
 * (role other, another process, not a network thread).
 */
START_TEST(every_wait_by_every_waker)
{
	static const __u32 want[8][5] = {
		/*              NONE     TIMER    IRQ      UNTRACED TRACED */
		[TB_W_OTHER]  = { TB_IDLE, TB_IDLE, TB_IDLE, TB_IDLE, TB_LOCK },
		[TB_W_IOWAIT] = { TB_IO,   TB_IO,   TB_IO,   TB_IO,   TB_IO },
		[TB_W_FILE]   = { TB_IO,   TB_IO,   TB_IO,   TB_IO,   TB_IO },
		[TB_W_SOCKET] = { TB_COMM, TB_COMM, TB_COMM, TB_COMM, TB_COMM },
		[TB_W_POLL]   = { TB_IDLE, TB_IDLE, TB_COMM, TB_IDLE, TB_LOCK },
		[TB_W_FUTEX]  = { TB_IDLE, TB_IDLE, TB_IDLE, TB_LOCK, TB_LOCK },
		[TB_W_SLEEP]  = { TB_IDLE, TB_IDLE, TB_IDLE, TB_IDLE, TB_IDLE },
		[TB_W_PIPE]   = { TB_IDLE, TB_IDLE, TB_IDLE, TB_IDLE, TB_LOCK },
	};

	for (__u32 w = TB_W_OTHER; w <= TB_W_PIPE; w++)
		for (__u32 k = TB_WK_NONE; k <= TB_WK_TRACED; k++)
			ck_assert_msg(cat(w, k) == want[w][k],
				      "wait %u waker %u: got %u want %u",
				      w, k, cat(w, k), want[w][k]);
}
END_TEST

START_TEST(file_and_iowait_are_io_whoever_woke)
{
	for (__u32 k = TB_WK_NONE; k <= TB_WK_TRACED; k++) {
		ck_assert_uint_eq(wcat(TB_W_FILE, k, TB_ROLE_WORKER, 0, 0, 1), TB_IO);
		ck_assert_uint_eq(wcat(TB_W_IOWAIT, k, TB_ROLE_WORKER, 0, 0, 1), TB_IO);
	}
}
END_TEST

START_TEST(socket_is_comm_whoever_woke)
{
	for (__u32 k = TB_WK_NONE; k <= TB_WK_TRACED; k++)
		ck_assert_uint_eq(wcat(TB_W_SOCKET, k, TB_ROLE_WORKER, 0, 0, 0), TB_COMM);
}
END_TEST

START_TEST(poll_woken_by_irq_is_comm)
{
	ck_assert_uint_eq(cat(TB_W_POLL, TB_WK_IRQ), TB_COMM);
	ck_assert_uint_eq(cat(TB_W_PIPE, TB_WK_IRQ), TB_IDLE);
}
END_TEST

START_TEST(timer_wakeup_is_idle)
{
	ck_assert_uint_eq(cat(TB_W_POLL, TB_WK_TIMER), TB_IDLE);
	ck_assert_uint_eq(cat(TB_W_FUTEX, TB_WK_TIMER), TB_IDLE);
	ck_assert_uint_eq(cat(TB_W_PIPE, TB_WK_TIMER), TB_IDLE);
}
END_TEST

START_TEST(traced_worker_of_other_process_is_data_wait)
{
	ck_assert_uint_eq(wcat(TB_W_PIPE, TB_WK_TRACED, TB_ROLE_WORKER, 0, 0, 0), TB_DATA_WAIT);
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_WORKER, 0, 0, 0), TB_DATA_WAIT);
	ck_assert_uint_eq(wcat(TB_W_POLL, TB_WK_TRACED, TB_ROLE_WORKER, 0, 0, 0), TB_DATA_WAIT);
	/* The worker wins over the network flag. */
	ck_assert_uint_eq(wcat(TB_W_POLL, TB_WK_TRACED, TB_ROLE_WORKER, 0, 0, 1), TB_DATA_WAIT);
}
END_TEST

START_TEST(traced_worker_thread_of_same_process_is_lock)
{
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_WORKER, 1, 0, 0), TB_LOCK);
	ck_assert_uint_eq(wcat(TB_W_PIPE, TB_WK_TRACED, TB_ROLE_WORKER, 1, 0, 0), TB_LOCK);
}
END_TEST

START_TEST(traced_comm_thread_is_comm)
{
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_TRAINER, 1, 0, 1), TB_COMM);
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_OTHER, 0, 0, 1), TB_COMM);
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_WORKER, 1, 0, 1), TB_COMM);
}
END_TEST

START_TEST(traced_trainer_thread_is_lock)
{
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_TRAINER, 1, 0, 0), TB_LOCK);
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_TRAINER, 0, 0, 0), TB_LOCK);
}
END_TEST

START_TEST(work_from_own_main_thread_is_idle)
{
	/* A pool thread handed work by its process's main thread was idle. */
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_TRAINER, 1, 1, 0), TB_IDLE);
	ck_assert_uint_eq(wcat(TB_W_PIPE, TB_WK_TRACED, TB_ROLE_TRAINER, 1, 1, 0), TB_IDLE);
	/* Another process's main thread: still a wait on the job. */
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_TRAINER, 0, 1, 0), TB_LOCK);
	/* A non-main thread of the same process: lock. */
	ck_assert_uint_eq(wcat(TB_W_FUTEX, TB_WK_TRACED, TB_ROLE_TRAINER, 1, 0, 0), TB_LOCK);
}
END_TEST

START_TEST(untraced_futex_is_lock_untraced_pipe_is_idle)
{
	ck_assert_uint_eq(cat(TB_W_FUTEX, TB_WK_UNTRACED), TB_LOCK);
	ck_assert_uint_eq(cat(TB_W_PIPE, TB_WK_UNTRACED), TB_IDLE);
	/* Nobody woke it (yet): a pool thread waiting for work. */
	ck_assert_uint_eq(cat(TB_W_FUTEX, TB_WK_NONE), TB_IDLE);
	ck_assert_uint_eq(cat(TB_W_PIPE, TB_WK_NONE), TB_IDLE);
}
END_TEST

START_TEST(sleep_is_idle_even_if_traced_woke)
{
	ck_assert_uint_eq(wcat(TB_W_SLEEP, TB_WK_TRACED, TB_ROLE_WORKER, 0, 0, 1), TB_IDLE);
}
END_TEST

START_TEST(waker_wholesale_for_foreign_worker_or_net)
{
	ck_assert(wholesale(TB_ROLE_WORKER, 0, 0));
	ck_assert(!wholesale(TB_ROLE_WORKER, 1, 0));
	ck_assert(wholesale(TB_ROLE_WORKER, 1, 1));
	ck_assert(wholesale(TB_ROLE_TRAINER, 0, 1));
	ck_assert(!wholesale(TB_ROLE_TRAINER, 0, 0));
	ck_assert(!wholesale(TB_ROLE_OTHER, 1, 0));
}
END_TEST

START_TEST(net_thread_thresholds)
{
	ck_assert(!tb_is_net_thread(0, 0, 0, 0));	/* never blocked */
	ck_assert(!tb_is_net_thread(0, 100, 0, 0));	/* never on the net */
	ck_assert(tb_is_net_thread(50, 100, 64, 0));	/* exactly half */
	ck_assert(!tb_is_net_thread(49, 100, 64, 0));	/* just under half */
	ck_assert(tb_is_net_thread(100, 100, 64, 0));
	ck_assert(tb_is_net_thread(1, 0, 64, 0));
	/* A rendezvous's few socket waits do not make a comm thread. */
	ck_assert(!tb_is_net_thread(100, 100, TB_NET_MIN_WAITS - 1, 0));
	/* The main thread runs the training loop, whatever it waits on. */
	ck_assert(!tb_is_net_thread(100, 100, 1000, 1));
}
END_TEST

START_TEST(syscall_fd_kinds)
{
	ck_assert_uint_eq(tb_syscall_wait(__NR_read), TB_W_FD);
	ck_assert_uint_eq(tb_syscall_wait(__NR_pread64), TB_W_FD);
	ck_assert_uint_eq(tb_syscall_wait(__NR_recvfrom), TB_W_FD);
	ck_assert_uint_eq(tb_syscall_wait(__NR_pwrite64), TB_W_FD);
	ck_assert_uint_eq(tb_syscall_wait(__NR_sendto), TB_W_FD);
}
END_TEST

START_TEST(syscall_file_kinds)
{
	ck_assert_uint_eq(tb_syscall_wait(__NR_openat), TB_W_FILE);
	ck_assert_uint_eq(tb_syscall_wait(__NR_fsync), TB_W_FILE);
}
END_TEST

START_TEST(syscall_poll_futex_sleep_other)
{
	ck_assert_uint_eq(tb_syscall_wait(__NR_epoll_wait), TB_W_POLL);
	ck_assert_uint_eq(tb_syscall_wait(__NR_futex), TB_W_FUTEX);
	ck_assert_uint_eq(tb_syscall_wait(__NR_clock_nanosleep), TB_W_SLEEP);
	ck_assert_uint_eq(tb_syscall_wait(__NR_getpid), TB_W_OTHER);
	ck_assert_uint_eq(tb_syscall_wait(-1), TB_W_OTHER);
}
END_TEST

/* Storage waits in these are output (checkpoints, logs), the rest input. */
START_TEST(syscall_writes_are_output)
{
	ck_assert(tb_syscall_writes(__NR_write));
	ck_assert(tb_syscall_writes(__NR_pwrite64));
	ck_assert(tb_syscall_writes(__NR_fsync));
	ck_assert(tb_syscall_writes(__NR_fdatasync));
	ck_assert(!tb_syscall_writes(__NR_read));
	ck_assert(!tb_syscall_writes(__NR_openat));
	ck_assert(!tb_syscall_writes(__NR_mmap));
	ck_assert(!tb_syscall_writes(-1));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("classify");
	TCase *tc = tcase_create("classify");
	SRunner *sr;
	int nfail;

	tcase_add_test(tc, every_wait_by_every_waker);
	tcase_add_test(tc, file_and_iowait_are_io_whoever_woke);
	tcase_add_test(tc, socket_is_comm_whoever_woke);
	tcase_add_test(tc, poll_woken_by_irq_is_comm);
	tcase_add_test(tc, timer_wakeup_is_idle);
	tcase_add_test(tc, traced_worker_of_other_process_is_data_wait);
	tcase_add_test(tc, traced_worker_thread_of_same_process_is_lock);
	tcase_add_test(tc, traced_comm_thread_is_comm);
	tcase_add_test(tc, traced_trainer_thread_is_lock);
	tcase_add_test(tc, work_from_own_main_thread_is_idle);
	tcase_add_test(tc, untraced_futex_is_lock_untraced_pipe_is_idle);
	tcase_add_test(tc, sleep_is_idle_even_if_traced_woke);
	tcase_add_test(tc, waker_wholesale_for_foreign_worker_or_net);
	tcase_add_test(tc, net_thread_thresholds);
	tcase_add_test(tc, syscall_fd_kinds);
	tcase_add_test(tc, syscall_file_kinds);
	tcase_add_test(tc, syscall_poll_futex_sleep_other);
	tcase_add_test(tc, syscall_writes_are_output);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail ? EXIT_FAILURE : EXIT_SUCCESS;
}
