/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU side seen from the host: finding the CUDA runtime, CUDA driver
 * and NCCL code each traced process has mapped (its own /proc/PID/maps, by
 * the functions an object defines, not by its file name), attaching the
 * uprobes of gpu_api.bpf.h to it, and collecting what they counted.
 */
#ifndef TB_GPU_H
#define TB_GPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "gpu_api_table.h"
#include "job.h"

struct tracer;
struct bpf_link;

/* One ELF file (by device and inode), as its symbols told us. */
struct gpu_object {
	uint64_t dev, ino;
	char path[512];		/* as the first process that mapped it names it */
	uint64_t offs[TB_MAX_APIS];	/* file offset per api; 0: absent */
	bool alias[TB_MAX_APIS];	/* same code as an earlier api: probed once */
	unsigned int families;	/* 1 << enum gpu_family found in it */
	bool is_static[GF_NFAMILIES];	/* code linked into another object */
	char version[GF_NFAMILIES][32];
};

/* An object mapped by one process, and the probes attached to it there. */
struct gpu_mapping {
	int obj;		/* index into gpu.objs */
	uint64_t lo, hi;	/* its executable addresses in the process */
	struct bpf_link **links;	/* perf-event uprobes, one per function */
	int nlinks;
	int multi_fds[3];	/* or uprobe_multi links: return, entry, launch; -1 none */
	int probes[GF_NFAMILIES];	/* functions probed per family */
};

struct gpu_comm {
	uint64_t comm, parent;
	int rank, nranks;
	unsigned char id[16];
	int api;
	bool destroyed;
};

struct gpu_proc {
	pid_t pid;
	uint64_t first_ns, next_scan_ns;
	uint64_t code_kb;	/* procfs_code_kb at the last maps scan */
	uint64_t scan_ns;	/* when that scan began */
	bool detached;		/* exited: probes gone, counts final */
	struct gpu_mapping *maps;
	int nmaps;
	struct tb_api_stat stat[TB_MAX_APIS];
	struct gpu_comm *comms;
	int ncomms;
};

struct gpu {
	struct tracer *tr;
	bool launches;		/* --launches: probe every launch path too */
	bool verbose;		/* say what is probed, and when */
	uint64_t t0;
	struct gpu_object *objs;
	int nobjs;
	struct gpu_proc *procs;
	int nprocs;
};

void gpu_init(struct gpu *g, struct tracer *tr, bool launches, bool verbose);
void gpu_free(struct gpu *g);
/*
 * Finds new CUDA/NCCL code in the job's processes and probes it: each new
 * process at once and every tick for its first seconds (the dynamic loader
 * is still at work), then once a second (dlopen). Detaches from exited ones.
 */
void gpu_tick(struct gpu *g, const struct job *job, uint64_t now);
/*
 * A process exec'd at ts: its old probes went with its old address space.
 * A scan that began after ts saw the new one already: its probes stay
 * (removing a return probe while a call is in progress would lose the
 * return, and leave the thread inside the call).
 */
void gpu_on_exec(struct gpu *g, pid_t pid, uint64_t ts);
/* A communicator event from the ring buffer. */
void gpu_on_event(struct gpu *g, const void *data, size_t len);
/* Reads the per-process call counts from BPF. */
void gpu_refresh(struct gpu *g);

const struct gpu_proc *gpu_proc_find(const struct gpu *g, pid_t pid);
/* Call counts summed over all processes. */
void gpu_totals(const struct gpu *g, struct tb_api_stat out[TB_MAX_APIS]);

/* Calls of one table summed by what they are (gpu_kind_is_sync, _op). */
struct gpu_sums {
	uint64_t syncs, ops, bytes, launches;
};
void gpu_sum_kinds(const struct tb_api_stat st[TB_MAX_APIS], struct gpu_sums *s);
/* A core function of family f that o does not define. */
bool gpu_lacks(const struct gpu_object *o, int api, enum gpu_family f);
/* Core functions of family f missing from obj (names into out, ", "-joined). */
int gpu_missing(const struct gpu_object *obj, enum gpu_family f, char *out, size_t len);
bool gpu_any_library(const struct gpu *g);

struct map_line {
	uint64_t lo, hi, dev, ino;
	char path[512];
};

/* An executable mapping of a file, from one line of /proc/PID/maps. */
bool gpu_parse_map_line(const char *line, struct map_line *m);
/* "libcuda.so.580.95.05" -> "580.95.05"; "" when the name has none. */
void gpu_so_version(const char *name, char *out, size_t len);

#endif
