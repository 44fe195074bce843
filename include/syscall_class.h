/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * What a thread blocked in syscall nr waits for (x86-64 numbers), shared by
 * the BPF programs and by user space, which classifies threads that never
 * produced an event from /proc/PID/task/TID/syscall instead.
 */
#ifndef SYSCALL_CLASS_H
#define SYSCALL_CLASS_H

#include <asm/unistd_64.h>

#define TB_W_FD 0xff	/* depends on the type of the fd in the first argument */

static inline __u32 tb_syscall_wait(long nr)
{
	switch (nr) {
	case __NR_read: case __NR_write: case __NR_pread64:
	case __NR_pwrite64: case __NR_readv: case __NR_writev:
	case __NR_preadv: case __NR_pwritev: case __NR_preadv2:
	case __NR_pwritev2: case __NR_recvfrom: case __NR_recvmsg:
	case __NR_recvmmsg: case __NR_sendto: case __NR_sendmsg:
	case __NR_sendmmsg: case __NR_accept: case __NR_accept4:
	case __NR_connect: case __NR_splice: case __NR_flock:
		return TB_W_FD;
	/* These wait for a filesystem whatever their arguments. */
	case __NR_open: case __NR_openat: case __NR_openat2: case __NR_creat:
	case __NR_close: case __NR_stat: case __NR_lstat: case __NR_fstat:
	case __NR_newfstatat: case __NR_statx: case __NR_statfs:
	case __NR_fstatfs: case __NR_access: case __NR_faccessat:
	case __NR_faccessat2: case __NR_getdents: case __NR_getdents64:
	case __NR_fsync: case __NR_fdatasync: case __NR_sync:
	case __NR_syncfs: case __NR_sync_file_range: case __NR_msync:
	case __NR_truncate: case __NR_ftruncate: case __NR_fallocate:
	case __NR_unlink: case __NR_unlinkat: case __NR_rename:
	case __NR_renameat: case __NR_renameat2: case __NR_mkdir:
	case __NR_mkdirat: case __NR_rmdir: case __NR_link:
	case __NR_linkat: case __NR_readahead: case __NR_fadvise64:
	case __NR_copy_file_range: case __NR_sendfile: case __NR_readlink:
	case __NR_readlinkat: case __NR_io_getevents: case __NR_io_pgetevents:
	case __NR_io_uring_enter: case __NR_mmap:
		return TB_W_FILE;
	case __NR_poll: case __NR_ppoll: case __NR_select:
	case __NR_pselect6: case __NR_epoll_wait: case __NR_epoll_pwait:
	case __NR_epoll_pwait2:
		return TB_W_POLL;
	case __NR_futex: case __NR_futex_waitv:
#ifdef __NR_futex_wait
	case __NR_futex_wait:
#endif
		return TB_W_FUTEX;
	case __NR_nanosleep: case __NR_clock_nanosleep: case __NR_pause:
	case __NR_rt_sigsuspend: case __NR_rt_sigtimedwait: case __NR_wait4:
	case __NR_waitid: case __NR_sched_yield:
		return TB_W_SLEEP;
	}
	return TB_W_OTHER;
}

/*
 * A storage wait in one of these is the thread's own output going out
 * (checkpoints, logs), not its input: fsync and friends, writes throttled
 * behind dirty pages. What is not here (reads, opens, page faults) is a
 * read: the diagnosis keeps the two apart (docs/model.md, "I/O").
 */
static inline int tb_syscall_writes(long nr)
{
	switch (nr) {
	case __NR_write: case __NR_pwrite64: case __NR_writev:
	case __NR_pwritev: case __NR_pwritev2: case __NR_fsync:
	case __NR_fdatasync: case __NR_sync: case __NR_syncfs:
	case __NR_sync_file_range: case __NR_msync: case __NR_ftruncate:
	case __NR_truncate: case __NR_fallocate: case __NR_copy_file_range:
	case __NR_sendfile:
		return 1;
	}
	return 0;
}

#endif /* SYSCALL_CLASS_H */
