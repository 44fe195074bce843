/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU's side, read through NVML (nvml.h) on trainbpf's own clock:
 * every device at each 200 ms tick, and at an epoch boundary, into the
 * model (gpu_util.h). Nothing runs in the job: the driver answers these
 * from its own counters, as it does nvidia-smi and DCGM.
 *
 * The job's processes on each device are NVML's process list, matched to
 * the job by pid: the same pid, or (trainbpf and the job in different pid
 * namespaces) a job process whose NSpid names it in its own namespace.
 */
#ifndef TB_GPU_SAMPLER_H
#define TB_GPU_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "gpu_util.h"
#include "job.h"
#include "nvml.h"

#define GS_PERIOD_NS 200000000ull	/* the tick: NVML averages over 1/6 s to 1 s */
#define GS_MIN_GAP_NS 10000000ull	/* boundaries: at most this often (a marker storm) */
#define GS_MAX_LISTED 256		/* processes read from one device at once */
#define GS_NS_CACHE 1024		/* the job's processes whose NSpid is known */

/* A job process's pids in its namespaces (procfs_nspid), read once. */
struct gs_nspid {
	pid_t pid;
	uint64_t start;
	pid_t ns[4];
	int n;
};

struct gpu_sampler {
	struct nvml lib;
	struct gpu_util *gu;
	nvmlDevice_t handle[GU_MAX_DEVS];
	unsigned long long util_seen[GU_MAX_DEVS];	/* per-process utilization read up to */
	uint64_t last;			/* the last sample */
	struct gs_nspid *cache;
	int ncache;
	/* This tick's table of the job's processes in namespaces of their own (gu_match_pid) */
	pid_t *ns_pid;
	pid_t (*ns)[4];
	int *nns;
	int nns_n, ns_cap;
	uint64_t ns_tick;		/* the tick it was built at; 0: never */
};

/*
 * Loads NVML and lists its devices into gu, opening gu's run window at
 * window_start. Without a library, an nvmlInit that fails, or no device,
 * gu says why (gu->state GU_UNAVAILABLE) and the sampler does nothing.
 */
void gpu_sampler_open(struct gpu_sampler *s, struct gpu_util *gu, uint64_t window_start);
/*
 * At a refresh: every device, when a tick's period has passed (force: an
 * epoch boundary waits for its totals, at most every GS_MIN_GAP_NS).
 */
void gpu_sampler_tick(struct gpu_sampler *s, const struct job *job, uint64_t now, bool force);
void gpu_sampler_close(struct gpu_sampler *s);

#endif
