/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf serve`'s metrics (docs/metrics.md): per training job and rank,
 * counters of where the time went (category, training phase), steps,
 * storage bytes and CUDA/NCCL calls, in the Prometheus text format.
 *
 * Counters must never go down while a series lives, yet processes come
 * and go (workers are re-forked every epoch, exited ones are folded away
 * by the job model): so each process adds what it gained since the last
 * update to its series, and a series keeps what its processes gave. A
 * series whose processes have all been gone for the grace period goes.
 * Labels are bounded: training_job, rank, local_rank, world_size and
 * role, never a pid or a step.
 */
#ifndef TB_METRICS_H
#define TB_METRICS_H

#include <stdint.h>
#include <stdio.h>
#include "diagnosis.h"
#include "gpu_util.h"
#include "job.h"
#include "session.h"
#include "phase_spans.h"

/*
 * Label sets kept; past it new ones are counted, not kept. And per user
 * (the uid of the process whose environment names the job): past
 * MX_MAX_SERIES_PER_UID a user's new label sets go to that user's overflow
 * series (job "overflow~uid<N>"), so that no one user's processes can take
 * the node's series, and the scrape's size, from everyone else's jobs.
 */
#define MX_MAX_SERIES 1024
#define MX_MAX_SERIES_PER_UID 128
/* Processes followed at once (the job model's own bounds are below it). */
#define MX_MAX_PROCS 65536

/*
 * NCCL data calls per communicator (its id, gpu_comm_key): the first
 * MX_COMMS ids a series meets keep a sample of their own, later ones go
 * to MX_COMM_OTHER; MX_COMM_UNKNOWN: made before tracing, no id.
 */
#define MX_COMMS 8
#define MX_COMM_UNKNOWN 0
#define MX_COMM_OTHER UINT64_MAX
struct mx_comm {
	uint64_t key;
	uint64_t calls;
};

struct mx_values {
	uint64_t cat_ns[TB_NCAT];
	uint64_t phase_ns[PH_NSHOWN];
	uint64_t steps;
	double step_ms;
	uint64_t epochs;		/* DataLoader passes completed */
	uint64_t rbytes, wbytes;
	uint64_t syncs, nccl_ops, nccl_bytes;
	struct mx_comm comm[MX_COMMS + 1];	/* the last: MX_COMM_OTHER */
	int ncomm;
};

struct mx_series {
	char job[JOB_ID_LEN];
	unsigned int uid;		/* the user its processes run as */
	int rank, local_rank, world_size;	/* -1: "unknown" */
	int role;			/* enum tb_role */
	struct mx_values v;
	int live;			/* its processes alive at the last update */
	bool phases;			/* a trainer whose phases are probed */
	uint64_t alive_ns;		/* when one of its processes was last alive */
	double step_now_ms;		/* the steps completed at the last update that had any */
	bool stalled;			/* a trainer of it is a rank of a stalled job (stall.h) */
	/* stalled, and its trainer is the culprit: its phase (PH_*), its wait (tb_cat); else -1 */
	int culprit_phase, culprit_wait;
};

/*
 * A training job's findings (diagnosis.h): judged on its processes alone,
 * over their time since the daemon found them. Severity -1: not found.
 */
struct mx_job {
	char job[JOB_ID_LEN];
	double severity[DG_NIDS];
	bool live;			/* among the series at the last judgement */
};

/*
 * The GPU's own side (metrics_gpu.c): a label set on one device. Counters
 * add what the device did while the set's processes were on it.
 */
#define MX_MAX_GPU_SERIES 1024
struct mx_gpu_series {
	int series;			/* index into metrics.series */
	int dev, gpu;			/* gpu_util.dev's index; NVML's */
	double energy_j, busy_s, thr_power_s, thr_thermal_s;
	uint64_t mem_used;		/* its processes' memory on it at the last update */
	bool on;			/* one of its processes was on it then */
};

struct mx_gpu {
	struct mx_gpu_series *s;
	int n;
	uint64_t dropped;		/* past MX_MAX_GPU_SERIES */
	struct gu_agg last[GU_MAX_DEVS];	/* each device's sums at the last update */
	uint64_t updated;
	const struct gpu_util *g;	/* NULL: NVML not read, no GPU series */
};

/* A process followed: what it had given at the last update, and where. */
struct mx_proc {
	pid_t pid;
	uint64_t start_ns;
	int series;
	struct mx_values last;
};

struct metrics {
	uint64_t grace_ns;
	struct mx_series *series;
	int nseries;
	struct mx_proc *procs;
	int nprocs;
	int *index;			/* open addressing over procs by (pid, start) */
	int index_cap;
	uint64_t series_dropped;	/* label sets past a bound: dropped, or to an overflow series */
	uint64_t procs_dropped;		/* processes past MX_MAX_PROCS */
	struct mx_job *jobs;		/* one per job among the series */
	int njobs;
	struct mx_gpu gpu;		/* metrics_gpu.c */
};

/* What the daemon itself costs and lost. */
struct mx_self {
	double cpu_s;
	uint64_t rss_bytes;
	uint64_t events_lost;		/* BPF's ring buffer was full */
	uint64_t threads_untraced;	/* no BPF slot free (--max-threads) */
	uint64_t libraries_refused;	/* mappings not probed (lib_probes.h) */
	uint64_t processes;		/* processes traced now */
	double start_unix;
};

void metrics_init(struct metrics *m, uint64_t grace_ns);
/* Adds what each process of job gained since the last call; 0, or -1 (out of memory). */
int metrics_update(struct metrics *m, const struct session *ses, uint64_t now);
/*
 * Judges each job of the live series on its own processes (the node's
 * share of it); 0, or -1 (out of memory: the last findings stay).
 */
int metrics_judge(struct metrics *m, const struct session *ses, uint64_t now);
/* The exposition (text format 0.0.4) of the series and of self. */
void metrics_write(const struct metrics *m, const struct mx_self *self, FILE *f);
void metrics_free(struct metrics *m);
/* The series of a process followed at the last update, or -1. */
int metrics_series_of(const struct metrics *m, const struct proc_rec *p);
/* A family's HELP and TYPE lines. */
void metrics_family(FILE *f, const char *name, const char *type, const char *help);
/* A label value, escaped (backslash, double quote, newline). */
void metrics_put_value(FILE *f, const char *v);
/* name{training_job=...,rank=...,role=...[,extra="val"]} and a space. */
void metrics_put_series(FILE *f, const char *name, const struct mx_series *s,
			const char *extra, const char *val);
/*
 * metrics_gpu.c: after metrics_update, the GPU series; after metrics_write,
 * their families (none when NVML is not read).
 */
void metrics_gpu_update(struct metrics *m, const struct session *ses, uint64_t now);
void metrics_gpu_write(const struct metrics *m, FILE *f);
/* metrics_ras.c: the last NCCL RAS reports of the jobs (nccl_ras.h); none: no family. */
struct ras_report;
void metrics_ras_write(const struct ras_report *r, int n, FILE *f);

#endif
