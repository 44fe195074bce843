/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The traced job as user space knows it: processes and their threads, with
 * each thread's category totals as of the last refresh. Fed by the BPF
 * slots (account.c) and lifecycle events (tracer.c); read by the reports.
 */
#ifndef TB_JOB_H
#define TB_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "categories.h"

struct thread_rec {
	pid_t tid;
	int slot;		/* BPF slot, -1 once the thread's totals are final */
	char comm[TB_COMM_LEN];
	uint64_t start_ns, end_ns;	/* end_ns 0 while alive */
	uint64_t own[TB_NCAT];
	uint64_t cp[TB_NCAT];
	uint64_t ph[TB_NPHASE][TB_NCAT];	/* cp by training phase (bpf/torch.bpf.h) */
	uint64_t io_rbytes, io_wbytes;
	uint64_t nswitch;
	/* schedstat at registration: splits the time of a thread with no event */
	uint64_t base_cpu, base_rq;
};

struct proc_rec {
	pid_t pid, ppid;
	char comm[TB_COMM_LEN];
	char exe[TB_PATH_LEN];
	enum tb_role role;
	unsigned int flags;	/* TB_PF_* */
	bool root;		/* named by -p, or the launched command */
	uint64_t start_ns, end_ns;	/* end_ns 0 while alive */
	int exit_code;
	struct thread_rec *threads;
	int nthreads, cap;
};

struct gpu;
struct diag;
struct phases;

/* The run's counters: BPF's own, and what the threads' totals add up to. */
struct run_counters {
	struct tb_counters bpf;
	uint64_t io_rbytes, io_wbytes, switches;
};

struct job {
	struct proc_rec *procs;
	int nprocs, cap;
	uint64_t window_start_ns;	/* CLOCK_MONOTONIC */
	double window_start_unix;
	struct gpu *gpu;	/* CUDA/NCCL probes and their counts */
	struct epochs *epochs;	/* epoch and step boundaries */
	struct diag *diag;	/* memory samples for the diagnosis */
	struct phases *phases;	/* training phases per step (phases.h); may be NULL */
};

struct proc_rec *job_proc(struct job *job, pid_t pid);	/* NULL if unknown */
const struct proc_rec *job_proc_const(const struct job *job, pid_t pid);
struct proc_rec *job_add_proc(struct job *job, pid_t pid, pid_t ppid,
			      const char *comm, uint64_t start_ns);
struct thread_rec *job_add_thread(struct proc_rec *p, pid_t tid,
				  const char *comm, uint64_t start_ns);
bool job_proc_alive(const struct proc_rec *p);
/*
 * Lifecycle events. A fork makes the child's record (or updates the one a
 * /proc scan made first); exec and exit return NULL for a pid the job does
 * not know.
 */
struct proc_rec *job_on_fork(struct job *job, pid_t pid, pid_t ppid, const char *comm,
			     uint64_t ts);
struct proc_rec *job_on_exec(struct job *job, pid_t pid, const char *comm, const char *path);
struct proc_rec *job_on_exit(struct job *job, pid_t pid, uint64_t ts, int code);
/* Its main thread (tid == pid), the latest if exec'd; NULL if unknown. */
const struct thread_rec *job_main_thread(const struct proc_rec *p);
int job_live_procs(const struct job *job);
void job_free(struct job *job);

/* Lifetime of a thread inside the window, up to now for live threads. */
uint64_t thread_lifetime(const struct thread_rec *t, uint64_t now);
/* Sum of a process's threads' own categories. */
void proc_totals(const struct proc_rec *p, uint64_t out[TB_NCAT]);

/*
 * Roles: a process forked (not exec'd) from a traced process, or named
 * like a PyTorch data-loader worker, is a worker, unless it forks workers
 * itself (then it is a rank started by fork). Other processes are trainers
 * when they have workers or their main thread is busy (>= 20% not idle);
 * a launcher waiting on its ranks is "other". If nothing qualifies, the
 * root processes are the trainers, so the headline is never empty.
 * Returns true if any role changed.
 */
bool job_classify_roles(struct job *job);
const char *role_name(enum tb_role role);
/* The trainers' main threads: the headline's critical path. */
int job_headline(const struct job *job, uint64_t cp[TB_NCAT]);
void job_counters(const struct job *job, const struct tb_counters *bpf,
		  struct run_counters *out);

#endif
