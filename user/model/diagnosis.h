/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Naming the bottleneck: rules over what trainbpf measured, each with a
 * severity (0 just over its threshold, 1 severe), the evidence and advice.
 * A rule looks at a window, the whole run or one epoch: the trainers'
 * critical path (the headline), every process's own times, steps and the
 * CUDA syncs in them, DataLoader worker generations. Memory is sampled
 * here from /proc once a second, since no BPF program sees it.
 */
#ifndef TB_DIAGNOSIS_H
#define TB_DIAGNOSIS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "categories.h"
#include "gpu_util.h"
#include "phases.h"
#include "trainbpf.h"

struct job;
struct epoch;
struct ep_worker_gen;

/* Findings of one window at most (there are DG_NIDS rules). */
#define DG_MAX_FINDINGS 32

enum dg_id {
	DG_DATA_LOADING,
	DG_HOST_BOUND,
	DG_SYNCS,
	DG_WORKER_RESTARTS,
	DG_CPU_CONTENTION,
	DG_LOCK_CONTENTION,
	DG_IO_WORKERS,
	DG_COMM_BOUND,
	DG_SLOW_RANK,
	DG_MEMORY,
	DG_RSS_GROWTH,
	DG_CHECKPOINT,
	DG_GPU_IDLE,		/* diagnosis_gpu.c: the GPU's own side (NVML) */
	DG_GPU_MEMORY,
	DG_GPU_THROTTLE,
	DG_NIDS,
};

struct dg_finding {
	enum dg_id id;
	double severity;	/* 0..1 */
	/*
	 * The share of the trainers' time it names, what fixing it could
	 * save at most (data loading's share, the waits for a CPU...); 0: it
	 * names no time of the loop (memory, the GPU's own side). Findings
	 * are ranked by it (diag_rank).
	 */
	double cost;
	double value, threshold;	/* what fired, and where it fires */
	pid_t pid;		/* the process it names; 0: the job */
	char summary[96];	/* one line: "data loading 21.4% of ... (> 15%)" */
	char evidence[512];
	char advice[384];
};

/*
 * One process in a window: its own time and its main thread's path; or,
 * folded > 0, that many exited processes summed (their kinds as workers
 * in tally).
 */
struct dg_proc {
	pid_t pid, ppid;
	enum tb_role role;
	int folded;
	struct worker_tally tally;
	int rank;		/* RANK from its environment, or NCCL's; -1 */
	int64_t own[TB_NCAT];
	int64_t main_cp[TB_NCAT];
	int64_t main_own[TB_NCAT];	/* the main thread's own states */
	/*
	 * A worker's busiest thread's own states: the one that decodes (idle
	 * helper threads would dilute the process's totals). The run: its
	 * busiest thread; an epoch: its main thread (DataLoader workers run
	 * __getitem__ there).
	 */
	int64_t work[TB_NCAT];
	uint64_t rbytes, wbytes;	/* the main thread's storage reads, writes */
	bool trained;		/* ran training phases, or no phase is known */
	char where[64];		/* merged views: the node (or recording) it ran on */
};

/* A window's memory: the run's samples, or nothing for an epoch. */
struct dg_rss_at {
	pid_t pid;
	enum tb_role role;
	int n;
	uint64_t kb[64];	/* RSS at the end of complete epochs, in order */
	long label[64];
};

/* A window's GPUs as NVML read them (diagnosis_gpu.c); read false: none. */
struct dg_gpu {
	bool read;
	struct gu_summary s;		/* over the job's GPUs in the window */
	int util_min_gpu, mem_gpu, thr_gpu;	/* NVML's indexes */
	uint64_t mem_total;		/* of mem_gpu */
	pid_t mem_pid;			/* the process with the most memory on it */
	uint64_t mem_pid_peak;
	double own_ms;			/* an epoch: its ms/step; the run: 0 */
	double thr_ms, unthr_ms;	/* ms/step of the throttled epochs, of the others */
	int thr_n, unthr_n;
};

struct dg_view {
	double wall_s;
	int64_t hl[TB_NCAT];	/* the trainers' main threads' critical path */
	int64_t hl_own[TB_NCAT];	/* the same threads' own states */
	struct dg_proc *p;
	int n;
	int ncpus;
	bool gpu;		/* a CUDA library is mapped in the job */
	int steps;		/* steps in the window; 0: none known */
	int syncs;		/* outermost CUDA syncs and blocking copies in them */
	/*
	 * The trainers' main threads by training phase (phases.h), the run
	 * only: data_phase when they fetched from a DataLoader (named
	 * brackets), ckpt_phase when they ran torch.save.
	 */
	bool data_phase, ckpt_phase;
	/* Their data phase is DataLoader fetches; else waits for input (a queue). */
	bool data_fetched;
	bool phases;		/* training phase events came: a PyTorch loop */
	int64_t ph[PH_NSHOWN][TB_NCAT];
	/*
	 * Of their io, the waits in syscalls that write (checkpoints, logs),
	 * by phase (all in other without phases); unknown in recordings of
	 * schema < 4: then the rules split io by bytes read and written.
	 */
	int64_t wio[PH_NSHOWN];
	bool wio_known;
	uint64_t rbytes, wbytes;	/* the trainers' main threads' storage I/O */
	const struct ep_worker_gen *gens;	/* the run's, all of them */
	int ngens;
	uint64_t start, end;	/* the window: re-forks inside it count */
	/* memory: the run only */
	uint64_t mem_total_kb, mem_min_avail_kb;
	double mem_min_at_s;	/* when MemAvailable was lowest, into the window */
	struct dg_rss_at *rss;
	int nrss;
	struct dg_gpu nvml;	/* the GPU's own side (NVML) */
};

/* A finding read back from a recording: reported as it was judged. */
struct dg_saved {
	struct dg_finding f;
	bool run;		/* judged on the whole run (epoch NULL) */
	long epoch;		/* else the epoch's label */
};

/* Per process: what only /proc knows. */
struct dg_pinfo {
	pid_t pid;
	int rank;		/* RANK from its environment; -1 */
	int env_reads;		/* times its environment was read for RANK */
	uint64_t seen_ns;	/* the last sampling round that found it alive */
	uint64_t *ts, *kb;	/* RSS samples, bounded: halved when full */
	int n, cap;
};

/* Memory is sampled this often (memory.c), and at each epoch boundary. */
#define DG_SAMPLE_NS 1000000000ull
/*
 * Processes with RSS samples: every live one, and at most this many that
 * exited (the latest; an older one's samples go when it is forgotten).
 */
#define DG_MAX_GONE 256

struct diag {
	uint64_t mem_total_kb, mem_min_avail_kb, mem_min_ts;
	struct dg_pinfo *procs;
	int nprocs, cap;
	/* A recording's findings: the reports print these, judging nothing. */
	const struct dg_saved *saved;
	int nsaved;
};

void diag_init(struct diag *d);
/* The reports print these findings (a recording's), judging nothing. */
void diag_set_saved(struct diag *d, const struct dg_saved *saved, int n);
void diag_free(struct diag *d);
/*
 * What the sampler (memory.c) found: the machine's memory at ts (its low
 * point is kept), a process's entry (made if new), an RSS sample of it.
 */
void diag_add_memory(struct diag *d, uint64_t total_kb, uint64_t avail_kb, uint64_t ts);
struct dg_pinfo *diag_pinfo(struct diag *d, pid_t pid);
void diag_add_rss(struct dg_pinfo *p, uint64_t ts, uint64_t kb);
/*
 * After a sampling round at now: entries not sampled in it are gone; past
 * DG_MAX_GONE of those, the ones gone longest are forgotten.
 */
void diag_forget_gone(struct diag *d, uint64_t now);

/* A process's rank: its environment's RANK, else its first NCCL communicator's; -1. */
struct session;
int diag_proc_rank(const struct session *ses, pid_t pid);

/* Windows to judge. Free with diag_view_free. */
int diag_view_run(struct dg_view *v, const struct session *ses, uint64_t now);
int diag_view_epoch(struct dg_view *v, const struct session *ses, const struct epoch *e);
void diag_view_free(struct dg_view *v);
/*
 * The views of one job's recordings from several nodes as one, to judge
 * the job across them (the straggler among all its ranks): their
 * processes side by side, each named by where[i], their sums summed, the
 * node with the least memory left. Worker generations and RSS per epoch
 * are each node's clock's: left out. Free out with diag_view_free.
 */
int diag_view_merge(struct dg_view *out, const struct dg_view *in, int n,
		    const char *const *where);

/*
 * diagnosis_gpu.c: a window's GPU readings into v->gpu (called by the view
 * builders); its rules' findings appended to out[n..max), the new count.
 */
void diag_gpu_view_run(struct dg_view *v, const struct session *ses, uint64_t now);
void diag_gpu_view_epoch(struct dg_view *v, const struct session *ses, const struct epoch *e);
int diag_gpu_rules(const struct dg_view *v, struct dg_finding *out, int n, int max);

/* The findings of a window, ranked (diag_rank); returns how many. */
int diag_run(const struct dg_view *v, struct dg_finding *out, int max);
/*
 * Ranks findings: by the time they cost the job (cost), largest first;
 * those that name no time after them, by severity.
 */
void diag_rank(struct dg_finding *fs, int n);
/* A finding of a recording made before costs were kept: its cost from its value, or 0. */
double diag_cost_of_value(enum dg_id id, double value);
const char *diag_id_name(enum dg_id id);
/* The id of a name diag_id_name gives; DG_NIDS if unknown. */
enum dg_id diag_id_find(const char *name);



#endif
