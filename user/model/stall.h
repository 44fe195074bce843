/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stalled job (docs/phases.md, "A stalled job"): no rank of it has made
 * progress (a training step, or a DataLoader fetch: validation counts)
 * for longer than its threshold, max(the floor, STALL_STEPS_X times its
 * median step). The floor is 30 s unless --stall-after says otherwise.
 * A job is judged once one of its step times is known (after the first
 * step that completes once the job is seen): one that hangs before is
 * never called stalled, and a job of steps longer than the floor is not
 * called stalled in its first. The next progress clears it.
 *
 * What each rank's trainer thread waits on now comes from its BPF slot
 * (state, wait, phase, probed call) and its DataLoader workers' slots, fed
 * in per refresh as struct stall_obs (user/acquire/stall_observe.c): no
 * I/O here. The culprit is the rank whose wait has no peer: when some
 * ranks wait in communication and others do not, the one not in it that
 * waits longest; when all wait in communication, the one that entered
 * fewer NCCL collectives, where they are counted; when none do, the one
 * that waits longest.
 */
#ifndef TB_STALL_H
#define TB_STALL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "job.h"

#define STALL_FLOOR_NS 30000000000ull	/* the threshold's floor by default */
#define STALL_STEPS_X 10		/* the threshold, in median steps */
#define STALL_HIST 64			/* step times kept per job for the median */
#define STALL_MAX_RANKS 64		/* ranks of a job followed (the rest unseen) */
#define STALL_MAX_WORKERS 16		/* DataLoader workers of a rank looked at */
#define STALL_MAX_COMMS 8		/* communicators of a rank compared (known ids) */
#define STALL_OBJECT_LEN 160		/* a storage wait's file, cut */

/* One thread as its slot says now. */
struct stall_thread_obs {
	pid_t tid;
	uint8_t state;		/* enum tb_state */
	uint8_t wait;		/* enum tb_wait */
	uint8_t phase;		/* enum tb_phase */
	uint8_t depth;		/* inside a probed CUDA/NCCL call */
	uint8_t region;		/* its category when depth */
	uint16_t api;		/* its enum tb_api when depth */
	uint64_t api_bytes;	/* and that call's bytes (NCCL data calls) */
	uint64_t since;		/* its current state began */
	/* blocked in storage: the file its syscall's fd names (/proc), "" if none */
	char object[STALL_OBJECT_LEN];
};

/* One rank at one refresh. */
struct stall_obs {
	char job[JOB_ID_LEN];	/* serve: the training job; "" in a run of its own */
	pid_t pid;
	int rank;		/* -1: unknown */
	uint64_t progress;	/* training steps plus DataLoader fetches so far */
	uint64_t progress_at;	/* when the last of them began (its event's time); 0: unknown */
	uint64_t steps;		/* training steps so far (the median's) */
	struct stall_thread_obs tr;	/* its trainer thread */
	uint64_t cp[TB_NCAT];	/* the trainer thread's critical-path totals now */
	int net_blocked;	/* its other threads blocked on the network now */
	bool has_coll;		/* NCCL collectives are counted (probes on) */
	uint64_t coll;		/* NCCL collectives it entered, all communicators */
	struct {
		uint64_t key;	/* gpu_comm_key: the same on every rank of it */
		uint64_t calls;	/* data calls it entered on it */
	} comms[STALL_MAX_COMMS];
	int ncomms;
	struct {
		pid_t pid;
		struct stall_thread_obs main;	/* the worker's main thread */
	} workers[STALL_MAX_WORKERS];
	int nworkers;
};

/* One rank of a stalled job: what it does since the stall. */
struct stall_rank {
	pid_t pid;
	int rank;
	int phase;		/* enum tb_phase now */
	int wait;		/* enum tb_cat: what it waits on now (stall_wait_kind) */
	uint64_t wait_ns;	/* how long it has waited so: from the first refresh that saw
				 * it, or its slot's state's start if earlier */
	int cat;		/* enum tb_cat it spent the most in since the stall */
	uint64_t cat_ns;	/* and how long */
	uint16_t api;		/* wait in a probed call: which (TB_API_*); else 0 */
	uint64_t api_bytes;	/* its bytes (an NCCL data call's); 0 none */
	bool in_api;
	pid_t worker;		/* data_wait: the worker it waits on; 0 none found */
	uint8_t worker_state, worker_wait;	/* that worker's main thread (tb_state, tb_wait) */
	uint64_t worker_ns;	/* how long it has been in it */
	uint64_t behind;	/* NCCL data calls fewer than a peer's on one communicator */
	uint64_t behind_comm;	/* that communicator (gpu_comm_key); 0: behind none */
	char object[STALL_OBJECT_LEN];	/* io: the file it waits on ("" unknown) */
	bool culprit;
};

/* A job's memory of a rank between refreshes. */
struct stall_mem {
	pid_t pid;
	uint64_t progress, steps, steps_ns;
	uint64_t cp0[TB_NCAT];	/* its critical path at the job's last progress */
	int wait;		/* stall_wait_kind at the last refresh */
	uint64_t wait_from;	/* it has waited so since (a timeout's wake-up aside) */
	bool woke;		/* the last refresh saw it run, in the middle of that wait */
	bool seen;
};

struct stall_job {
	char job[JOB_ID_LEN];
	uint64_t progress_ns;	/* the job's last progress (0: none yet) */
	uint64_t hist[STALL_HIST];	/* step times, ns */
	long nhist;
	struct stall_mem mem[STALL_MAX_RANKS];
	int nmem;
	uint64_t threshold_ns;
	bool stalled;
	uint64_t since;		/* stalled: the last progress, the stall's start */
	struct stall_rank ranks[STALL_MAX_RANKS];	/* stalled: culprit first, then by rank */
	int nranks;
	bool culprit;		/* ranks[0] is the culprit */
	uint64_t now;		/* the refresh judged */
};

struct stall {
	uint64_t floor_ns;	/* 0: STALL_FLOOR_NS */
	struct stall_job *jobs;
	int njobs, cap;
};

/* The threshold of a job: max(floor, STALL_STEPS_X x its median step). */
uint64_t stall_threshold(uint64_t floor_ns, const uint64_t *hist, long nhist);
/* What a rank waits on now, as a category (the rule in docs/phases.md). */
int stall_wait_kind(const struct stall_obs *o);
/*
 * One refresh: obs[0..n) are the ranks alive now, of any job. A job none
 * of whose ranks is alive is forgotten.
 */
void stall_update(struct stall *st, const struct stall_obs *obs, int n, uint64_t now);
/* The job named job ("" in a run of its own); NULL if none. */
const struct stall_job *stall_job(const struct stall *st, const char *job);
/* Whether pid is a rank of a stalled job. */
bool stall_pid_stalled(const struct stall *st, pid_t pid);
/* pid's rank if it is the culprit of a stalled job; NULL if not. */
const struct stall_rank *stall_culprit(const struct stall *st, pid_t pid);
/* The first stalled job; NULL if none. */
const struct stall_job *stall_any(const struct stall *st);
void stall_free(struct stall *st);

/* Words for a thread's state and wait ("sleeping", "on CPU", ...). */
const char *stall_state_words(int state, int wait);

#endif
