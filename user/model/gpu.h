/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU side seen from the host, as numbers: the CUDA runtime, CUDA
 * driver and NCCL code each process mapped (found by lib_probes.c, or read
 * from a recording), each process's call counts, and its NCCL
 * communicators. No probes here: lib_probes.c attaches them and fills this.
 */
#ifndef TB_GPU_H
#define TB_GPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "probe_table.h"

/*
 * One ELF file, as its symbols told us. A file is what it was when read:
 * device and inode name where it is, and size, mtime and ctime (which no
 * user can set back) say it is still the same content. A file replaced
 * in place, or a new one on a reused inode, is another object.
 */
struct gpu_object {
	uint64_t dev, ino;
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
	uint32_t uid;		/* the file's owner */
	char path[512];		/* as the first process that mapped it names it */
	uint64_t offs[TB_MAX_APIS];	/* file offset per api; 0: absent */
	uint64_t probe_at[TB_MAX_APIS];	/* where its uprobe goes: offs, past an endbr64 */
	bool alias[TB_MAX_APIS];	/* same code as an earlier api: probed once */
	/* torch < 2.0's libtorch_python: brackets through torch.ops calls (TB_COOKIE_LEGACY) */
	bool torch_legacy;
	uint64_t op_returns[2];	/* there, where invokeOperatorFromPython returns */
	int nop_returns;
	unsigned int families;	/* 1 << enum probe_family found in it */
	bool refused;		/* not probed in a process (lib_probes.c said why, once) */
	bool is_static[LIB_NFAMILIES];	/* code linked into another object */
	char version[LIB_NFAMILIES][32];
};

/* An object one process mapped. */
struct gpu_mapping {
	int obj;		/* index into gpu.objs */
	int probes[LIB_NFAMILIES];	/* functions probed per family */
};

/*
 * A communicator of a process. id is the first 16 bytes of its
 * ncclUniqueId, the same on every rank; a split's is derived from its
 * parent's, the split's number on the parent and its color (the same on
 * every member: they split together, in the same order); all zero when
 * the call that made it was not seen (attached later: api -1).
 */
struct gpu_comm {
	uint64_t comm, parent;
	int rank, nranks;
	unsigned char id[16];
	int api;		/* the call that made it; -1: not seen */
	int color;		/* split: its color */
	bool destroyed;
	uint64_t calls, bytes;	/* outermost data calls on it (tb_comm_stat) */
};

struct gpu_proc {
	pid_t pid;		/* 0: exited processes summed (gpu_fold_exited) */
	bool exited;		/* its counts are final; the pid may come back */
	struct gpu_mapping *maps;
	int nmaps;
	struct tb_api_stat stat[TB_MAX_APIS];
	struct gpu_comm *comms;
	int ncomms;
};

struct gpu {
	bool launches;		/* launches were counted (--launches) */
	struct gpu_object *objs;
	int nobjs;
	struct gpu_proc *procs;	/* one per process, a pid reused gets another */
	int nprocs;
	/*
	 * Communicators not listed: a process keeps GPU_MAX_COMMS, a new one
	 * past them takes the place of its oldest destroyed one (or is not
	 * kept); the summed entry of exited processes keeps as many.
	 */
	uint64_t comms_dropped;
};

void gpu_free(struct gpu *g);
/* pid's entry that has not exited, made if there is none; NULL: out of memory. */
struct gpu_proc *gpu_proc_get(struct gpu *g, pid_t pid);
/* A new entry for pid (a recording's, in the live order); NULL: out of memory. */
struct gpu_proc *gpu_proc_add(struct gpu *g, pid_t pid);
/* pid's latest entry, or NULL. */
const struct gpu_proc *gpu_proc_find(const struct gpu *g, pid_t pid);
/* A new object, zeroed; its index, or -1. */
int gpu_object_add(struct gpu *g);
/* p maps object obj (once); NULL: out of memory. */
struct gpu_mapping *gpu_mapping_add(struct gpu_proc *p, int obj);
/* One more mapping of obj, even if p has one (files that share a stand-in object). */
struct gpu_mapping *gpu_mapping_append(struct gpu_proc *p, int obj);
/* Forgets what p mapped (an exec replaced it); its counts stay. */
void gpu_proc_forget_maps(struct gpu_proc *p);
/* An NCCL communicator made or destroyed (TB_EV_NCCL_*); bounded (gpu.comms_dropped). */
void gpu_on_comm(struct gpu *g, const struct tb_comm_event *e);
/* A new communicator of p, zeroed (a recording's); NULL: out of memory. */
struct gpu_comm *gpu_comm_add(struct gpu_proc *p);
/*
 * The counts of handle comm in p (BPF's comm_stats): the newest
 * communicator at that address, one with an unknown id made if the call
 * that made it was not seen (GPU_MAX_COMMS at most). Returns whether the
 * counts were kept.
 */
bool gpu_comm_count(struct gpu_proc *p, uint64_t comm, uint64_t calls, uint64_t bytes);
/* Its id as one number (the first 8 bytes, big-endian as printed); 0: unknown. */
uint64_t gpu_comm_key(const struct gpu_comm *c);
/*
 * Bounded: an exited process that mapped no CUDA/NCCL code, made no call
 * and no communicator is forgotten; past GPU_MAX_GONE exited ones that
 * did, the oldest are summed into one entry (pid 0): calls, libraries and
 * up to GPU_MAX_COMMS communicators. map[old index] gets the new one (the
 * summed entry's for those summed, -1 for those forgotten). Returns
 * whether anything moved.
 */
#define GPU_MAX_GONE 64
#define GPU_MAX_COMMS 64
bool gpu_fold_exited(struct gpu *g, int *map);

/* Call counts summed over all processes. */
void gpu_totals(const struct gpu *g, struct tb_api_stat out[TB_MAX_APIS]);

/* Calls of one table summed by what they are (probe_kind_is_sync, _op). */
struct gpu_sums {
	uint64_t syncs, ops, bytes, launches;
};
void gpu_sum_kinds(const struct tb_api_stat st[TB_MAX_APIS], struct gpu_sums *s);
/* A core function of family f that o does not define. */
bool gpu_lacks(const struct gpu_object *o, int api, enum probe_family f);
/* Core functions of family f missing from obj (names into out, ", "-joined). */
int gpu_missing(const struct gpu_object *obj, enum probe_family f, char *out, size_t len);
/* A CUDA runtime, driver or NCCL is mapped in the job (libtorch aside). */
bool gpu_any_library(const struct gpu *g);
/* libtorch is mapped and probed: training phases can be seen. */
bool gpu_has_torch(const struct gpu *g);
/* Whether a mapped libtorch_python closes named brackets where we see it (torch >= 2.0). */
bool gpu_torch_closes(const struct gpu *g);

#endif
