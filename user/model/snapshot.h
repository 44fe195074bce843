/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf dump`: every thread of a job and its descendants at one
 * instant, read from /proc alone (user/acquire/snapshot.c), with nothing
 * attached: what each thread waits on now and for how long. No phase: a
 * snapshot has no history, and the phase comes from the events of a
 * trace (the live tool's STALLED line has it).
 */
#ifndef TB_SNAPSHOT_H
#define TB_SNAPSHOT_H

#include <stdint.h>
#include <sys/types.h>
#include "trainbpf.h"

#define SNAP_TARGET_LEN 128
#define SNAP_MAX_PROCS 4096	/* processes of one dump: the rest are counted, not shown */
#define SNAP_MAX_THREADS 4096	/* threads of one process */

enum snap_role {
	SNAP_ROOT,	/* named by -p */
	SNAP_FORKED,	/* forked by its parent, not exec'ed: a DataLoader worker, most likely */
	SNAP_SPAWNED,	/* started by multiprocessing's spawn or forkserver */
	SNAP_CHILD,	/* any other descendant (it exec'ed a program) */
};

struct snap_thread {
	pid_t tid;
	char comm[TB_COMM_LEN];
	char state;		/* /proc's: R (running or runnable), S, D, T, t, Z, I */
	long syscall;		/* the one it is in; -1: none (running, in user space) */
	long arg0;		/* its first argument: an fd, a futex word's address */
	unsigned int wait;	/* enum tb_wait of that syscall, its fd's kind for I/O calls */
	char wchan[48];		/* the kernel function it sleeps in; "" running */
	char target[SNAP_TARGET_LEN];	/* what its fd names (a path, pipe:[N], socket:[N]) */
	uint64_t waited_ns;	/* asleep: since it last ran (the kernel's exec_start) */
	uint64_t cpu_ns;	/* on a CPU in its life (schedstat) */
};

struct snap_proc {
	pid_t pid, ppid;
	char comm[TB_COMM_LEN];
	int role;		/* enum snap_role */
	int rank;		/* its rank as serve labels it (RANK, else SLURM_PROCID); -1: none */
	struct snap_thread *threads;
	int nthreads;
	int threads_over;	/* past SNAP_MAX_THREADS: not read */
};

struct snapshot {
	struct snap_proc *procs;
	int nprocs;
	int procs_over;		/* past SNAP_MAX_PROCS: not read */
	double taken_unix_s;
	uint64_t read_ns;	/* how long reading /proc took */
};

const char *snap_role_name(int role);
/* Words for what t waits on now: "on CPU", "sleeping", "reading a pipe" ... */
const char *snap_wait_words(const struct snap_thread *t);
void snapshot_free(struct snapshot *s);

#endif
