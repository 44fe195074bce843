/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading /proc: the kernel's own view of processes and threads. */
#ifndef TB_PROCFS_H
#define TB_PROCFS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_stat {
	char comm[16];
	char state;
	pid_t ppid;
	unsigned int flags;	/* PF_* */
	unsigned long long starttime;	/* clock ticks after boot; 0 if unread */
};

/* A small file whole (NUL-terminated); its length, or -1. */
ssize_t procfs_read_file(const char *path, char *buf, size_t len);
int procfs_stat(pid_t pid, pid_t tid, struct proc_stat *st);
bool procfs_is_kthread(const struct proc_stat *st);
/* The process a thread id belongs to (Tgid), or -1. */
pid_t procfs_tgid(pid_t tid);
/* Fields 1 and 2 of schedstat: ns on CPU, ns waiting on a runqueue. */
int procfs_schedstat(pid_t pid, pid_t tid, uint64_t *cpu_ns, uint64_t *rq_ns);
/* read_bytes / write_bytes of /proc/PID/task/TID/io. */
int procfs_io(pid_t pid, pid_t tid, uint64_t *rbytes, uint64_t *wbytes);
/* Syscall a thread is blocked in, -1 if running or not in one. */
long procfs_syscall(pid_t pid, pid_t tid, long *arg0);
/* enum tb_wait of an fd: file, socket or other. */
unsigned int procfs_fd_wait(pid_t pid, long fd);
/* What pid's fd names (its /proc link, not followed), into out; 0, or -1 ("" in out). */
int procfs_fd_target(pid_t pid, long fd, char *out, size_t len);
/* The thread ids of pid; returns the count, -1 if pid is gone. */
int procfs_tasks(pid_t pid, pid_t *tids, int max);
/*
 * Whether process pid has ended: reaped, or a zombie with no thread left
 * (a leader that is a zombie while other threads run is no end). *code is
 * its exit status as wait(2) reads it, -1 once reaped.
 */
bool procfs_exited(pid_t pid, int *code);
int procfs_cmdline(pid_t pid, char *buf, size_t len);
/*
 * Field (from 3, after comm) of /proc/PID[/task/TID]/stat as a number
 * (39: the CPU it last ran on; 52: its exit status); -1 if unread.
 */
long procfs_stat_field(pid_t pid, pid_t tid, int field);
/* a and b run the same command line: a forked from b and did not exec. */
bool procfs_same_cmdline(pid_t a, pid_t b);
/* Started by multiprocessing's spawn or forkserver: python -c '...' --multiprocessing-fork. */
bool procfs_mp_spawned(pid_t pid);
/*
 * NAME's value in an environment block (/proc/PID/environ: len bytes of
 * NUL-terminated NAME=VALUE strings), or NULL.
 */
const char *procfs_env_get(const char *env, ssize_t len, const char *name);
/*
 * VmExe + VmLib of /proc/PID/status, in kB: the size of its executable
 * mappings. It changes when code is mapped or unmapped (dlopen), and costs
 * a hundredth of reading /proc/PID/maps. 0 if pid is gone.
 */
uint64_t procfs_code_kb(pid_t pid);
/* MemTotal and MemAvailable of a /proc/meminfo text, in kB; -1 if absent. */
int procfs_parse_meminfo(const char *text, uint64_t *total_kb, uint64_t *avail_kb);
/*
 * pid's NSpid (/proc/PID/status): its pid in each pid namespace it is in,
 * ours first, its own last; at most max. The count (1 outside containers),
 * or -1 if pid is gone.
 */
int procfs_nspid(pid_t pid, pid_t *out, int max);
/* Every process on the machine with its parent, for descendant scans. */
int procfs_all(pid_t *pids, pid_t *ppids, int max);

#endif
