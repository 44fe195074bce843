/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The traced job as user space knows it: processes and their threads, with
 * each thread's category totals as of the last refresh. Fed by the BPF
 * slots (account.c) and lifecycle events (tracer.c); read by the reports.
 *
 * Bounded: processes and threads that exited long enough ago are folded
 * (job_fold) into one row per parent and role ("N exited"), whose totals
 * are their members' sums, so that every total stays exact while what is
 * kept stops growing (docs/model.md, "What trainbpf keeps").
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
	uint64_t read_ns;	/* while alive: the instant its totals are of */
	uint64_t own[TB_NCAT];
	uint64_t cp[TB_NCAT];
	uint64_t ph[TB_NPHASE][TB_NCAT];	/* cp by training phase (bpf/torch.bpf.h) */
	uint64_t wio[TB_NPHASE];	/* of ph's io: blocked in syscalls that write */
	/*
	 * Of ph[TB_PH_OTHER], a trainer thread's setup (before its first
	 * phase event) and teardown (after its last): docs/phases.md, "The
	 * share". Set live by phases_sync_ends / phases_settle_tail, read
	 * back from a recording (schema 8).
	 */
	uint64_t ends[2][TB_NCAT];
	uint64_t io_rbytes, io_wbytes;
	uint64_t nswitch;
	int64_t kskew_ns;	/* tb_slot.kskew_ns: the kernel's cpu minus ours */
	uint64_t fed;		/* wakes of a non-worker's thread in another process */
	/* schedstat at registration: splits the time of a thread with no event */
	uint64_t base_cpu, base_rq;
	int folded;		/* 0: one thread; N: N exited threads summed (tid 0) */
	bool found;		/* registered from /proc (running before, not seen born) */
};

/*
 * User space's own process flag, beside BPF's TB_PF_*: a multiprocessing
 * spawn child's command line (--multiprocessing-fork), found running at
 * the attach or seen at its exec: a DataLoader worker of a trainer by
 * spawn, or its Pool, however rarely its trainer waits for it.
 */
#define JOB_PF_MP_SPAWNED	0x100

/*
 * Where a process stands in a distributed job, from its environment and
 * cgroup (labels.c; read by `trainbpf serve` for its metrics' labels).
 */
#define JOB_ID_LEN 64
#define LABELS_NO_UID 0xffffffffu	/* proc_labels.uid of a process gone before its read */
struct proc_labels {
	char job[JOB_ID_LEN];	/* TORCHELASTIC_RUN_ID, SLURM_JOB_ID, a pod; "": none */
	int rank, local_rank, world_size;	/* -1: not in the environment */
	uint64_t start_unix;	/* its start by the kernel's clock: the same after a restart */
	unsigned int uid;	/* its effective uid when read: who speaks for the job */
	int reads;		/* times read: again while RANK is missing (fork, then exec) */
};

struct proc_rec {
	pid_t pid, ppid;
	char comm[TB_COMM_LEN];
	char exe[TB_PATH_LEN];
	enum tb_role role;
	unsigned int flags;	/* TB_PF_*, JOB_PF_* */
	bool root;		/* named by -p, or the launched command */
	uint64_t start_ns, end_ns;	/* end_ns 0 while alive */
	int exit_code;
	uint64_t reap_nswitch;	/* its threads' switches when /proc was last asked if it ended */
	struct thread_rec *threads;
	int nthreads, cap;
	int main_at;		/* 1 + the main thread's index; 0: unknown (job_main_thread) */
	/*
	 * 0: one process. N: N exited processes summed, all children of ppid
	 * with this role (pid 0; threads[0] their trainer threads, threads[1]
	 * the others; tally: what the diagnosis needs of folded workers).
	 */
	int folded;
	struct worker_tally tally;
	unsigned int child_roles;	/* JOB_CHILD_* of its children folded away */
	bool trainer_below;	/* a trainer among its descendants (roles) */
	bool backward;		/* a thread ran PyTorch's backward (roles) */
	struct proc_labels labels;
	int pid_prev;		/* the previous process with this pid; -1 */
};

/* proc_rec.child_roles: 1 << role of a folded child, and a trainer below it. */
#define JOB_CHILD_TRAINER_BELOW (1u << 8)

/*
 * Folding (job_fold): an exited process or thread keeps its own row while
 * it is one of the JOB_KEEP_EXITED_PROCS (_THREADS) that exited last, or
 * for JOB_FOLD_AGE_NS after its end; but at most JOB_MAX_EXITED_PROCS
 * exited processes and JOB_MAX_EXITED_THREADS exited threads keep theirs
 * (the oldest fold first). A job that does not churn processes keeps all
 * of them; a fork storm keeps its last seconds. A process's main thread
 * and its trainer thread (job_trainer_thread),
 * a root process, and anything not settled (its slots not yet freed, not
 * yet written by a recorder) are never folded.
 */
#define JOB_FOLD_AGE_NS 10000000000ull
#define JOB_KEEP_EXITED_PROCS 256
#define JOB_KEEP_EXITED_THREADS 1024
#define JOB_MAX_EXITED_PROCS 8192
#define JOB_MAX_EXITED_THREADS 131072
#define JOB_FOLD_PERIOD_NS 1000000000ull
/* Aggregates of one parent and role; past this many, parent 0 for new ones. */
#define JOB_MAX_AGGREGATES 256

/*
 * What one fold did to job->procs, for the arrays kept parallel to it
 * (the tracer's slot owners, the recorder's rows, the live view's totals,
 * the epochs' snapshots). Old process i is now process to[i]: the same
 * one moved (merged[i] false), or the aggregate it was summed into. Its
 * old thread j is now thread thr_to[thr_off[i] + j] of process to[i]:
 * itself moved, or the aggregate thread it was summed into.
 */
struct job_fold {
	int nold, nnew;
	int *to;
	bool *merged;
	int *thr_off;		/* [nold + 1] */
	int *thr_to;
	int procs, threads;	/* how many were folded */
};

/* The run's counters: BPF's own, and what the threads' totals add up to. */
struct run_counters {
	struct tb_counters bpf;
	uint64_t io_rbytes, io_wbytes, switches;
};

struct job {
	struct proc_rec *procs;
	int nprocs, cap;
	int *pid_ix;		/* pid -> newest process with it, open addressing */
	int pid_cap;
	uint64_t next_fold;
	uint64_t window_start_ns;	/* CLOCK_MONOTONIC */
	double window_start_unix;
	bool wio_unknown;	/* thread_rec.wio not measured: a recording of schema < 4 */
	/*
	 * Roots fold too (serve): the node's daemon makes a root of every job
	 * it finds, and watches job after job for months; no report of its
	 * own lists them one by one.
	 */
	bool fold_roots;
};

struct proc_rec *job_proc(struct job *job, pid_t pid);	/* NULL if unknown */
const struct proc_rec *job_proc_const(const struct job *job, pid_t pid);
/* The process pid that had started by ts (pids are reused), else its oldest. */
struct proc_rec *job_proc_at(struct job *job, pid_t pid, uint64_t ts);
/* Rebuilds the pid index after job->procs changed other than by job_add_proc. */
void job_reindex(struct job *job);
struct proc_rec *job_add_proc(struct job *job, pid_t pid, pid_t ppid,
			      const char *comm, uint64_t start_ns);
struct thread_rec *job_add_thread(struct proc_rec *p, pid_t tid,
				  const char *comm, uint64_t start_ns);
bool job_proc_alive(const struct proc_rec *p);
/*
 * A child forked without exec that exited within JOB_HELPER_LIFE_NS of
 * its fork: a helper (a failed exec such as torch.compile's `g++
 * --version` with no g++, a subshell's builtin), never a worker whatever
 * it woke. A DataLoader worker lives to start up and serve its batches:
 * torch 1.13's take about 50 ms of CPU to start alone.
 */
#define JOB_HELPER_LIFE_NS 50000000ull
bool job_died_young(const struct proc_rec *p);
/* Wakes by its threads of threads of other processes (roles: who feeds). */
uint64_t job_proc_fed(const struct proc_rec *p);
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
/*
 * The thread that trains (docs/phases.md, "The trainer thread"): of the
 * threads that ran PyTorch's backward (their thread_rec.ph backward rows),
 * the one with the most time in it, the main thread on a tie; if none
 * did, the main thread. A loop in a threading.Thread (Ray Train's
 * train_func) trains on that thread while the main thread waits. A pure
 * function of the rows, so a recording's report finds the same thread.
 * An aggregate: its members' trainer threads (job_fold), threads[0].
 */
const struct thread_rec *job_trainer_thread(const struct proc_rec *p);
int job_live_procs(const struct job *job);
/*
 * The training job a process belongs to (serve's training_job label):
 * what its launcher wrote (labels.c), else its topmost traced ancestor's
 * pid and start time (the same after a daemon's restart, as the kernel
 * keeps it); *uid, the user that speaks for it.
 */
void job_id_of(const struct job *job, const struct proc_rec *p, char *out, size_t len,
	       unsigned int *uid);
void job_free(struct job *job);

/*
 * Folds what nothing needs individually any more (see JOB_FOLD_AGE_NS):
 * settled is the instant before which every consumer has what it needs
 * of a thread that ended (the recorder's last flush). At most once per
 * JOB_FOLD_PERIOD_NS unless a cap is passed. Returns the number of rows
 * folded; when > 0, *f says where everything went (job_fold_free it).
 */
int job_fold(struct job *job, uint64_t now, uint64_t settled, struct job_fold *f);
void job_fold_free(struct job_fold *f);
/* How many processes (threads) a row stands for: 1, or its folded count. */
int proc_count(const struct proc_rec *p);
int thread_count(const struct thread_rec *t);
/* The threads a process row stands for, folded ones counted. */
int proc_nthreads(const struct proc_rec *p);

/* Lifetime of a thread inside the window, up to now for live threads. */
uint64_t thread_lifetime(const struct thread_rec *t, uint64_t now);
/* Sum of a process's threads' own categories. */
void proc_totals(const struct proc_rec *p, uint64_t out[TB_NCAT]);

/*
 * Roles, judged per tree of processes (a root and what it runs: serve
 * traces each job of a node as a root). When some process of the tree ran
 * PyTorch's backward (thread_rec.ph), the
 * processes that did are the trainers and no other; a worker is then a
 * process with no trainer below it that is named like a PyTorch
 * data-loader worker, forked without exec, or run by a trainer and keeps
 * waking other processes' threads (thread_rec.fed: spawn workers), unless
 * it starts workers itself (the forkserver); everything else (launchers,
 * helper subprocesses) is "other". Without backward (no libtorch, --no-phases),
 * as follows: a process forked (not exec'd) from a traced process, or named
 * like a PyTorch data-loader worker, is a worker, unless it forks workers
 * itself (then it is a rank started by fork). Other processes are trainers
 * when they have workers or their main thread is busy (>= 20% not idle);
 * a launcher waiting on its ranks is "other". If nothing qualifies, the
 * root processes are the trainers, so the headline is never empty.
 * Returns true if any role changed.
 */
bool job_classify_roles(struct job *job);
/* Its rows were read: p trains if t ran backward (before the next roles). */
void job_note_backward(struct proc_rec *p, const struct thread_rec *t);
const char *role_name(enum tb_role role);
/* The trainers' trainer threads (job_trainer_thread): the headline's critical path. */
int job_headline(const struct job *job, uint64_t cp[TB_NCAT]);
void job_counters(const struct job *job, const struct tb_counters *bpf,
		  struct run_counters *out);

#endif
