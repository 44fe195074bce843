/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The probes of user-space libraries, in one place: finding the code of
 * the CUDA runtime, CUDA driver, NCCL, libtorch and the Python interpreter
 * each traced process has mapped (its own /proc/PID/maps, by the functions
 * an object defines, not by its file name), attaching their uprobes
 * (bpf/cuda_nccl.bpf.h, bpf/torch.bpf.h) to it, and reading what they
 * counted into the model (gpu.h). The functions are probe_table.c's, the
 * protocol with BPF include/probes.h, and the mappings that wake user space
 * lib_names.bpf.h's (held to the table by tests/unit/test_libraries.c).
 */
#ifndef TB_LIB_PROBES_H
#define TB_LIB_PROBES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "gpu.h"
#include "job.h"

struct tracer;
struct bpf_link;

/*
 * The programs a function can get, in the order they go in: a return
 * probe before its entry probe (a return with no entry seen is ignored, an
 * entry with no return would leave the thread inside the call for good).
 */
enum lp_prog { LP_GPU_RET, LP_GPU_ENTRY, LP_LAUNCH, LP_TORCH_RET, LP_TORCH_ENTRY, LP_NPROGS };

/* A mapping's probes: parallel to gpu_proc.maps. */
struct lp_map {
	uint64_t lo, hi;	/* its executable addresses in the process */
	uint64_t dev, ino;	/* the file, as the process's maps name it */
	struct bpf_link **links;	/* perf-event uprobes, one per function */
	int nlinks;
	int multi_fds[LP_NPROGS];	/* or uprobe_multi links, one per program; -1 none */
};

/* One traced process's scans and probes. */
struct lp_proc {
	int proc;		/* its entry in gpu.procs */
	uint64_t first_ns, next_scan_ns;
	uint64_t code_kb;	/* procfs_code_kb at the last maps scan */
	uint64_t seen_kb;	/* procfs_code_kb at the last look */
	bool loading;		/* its code changed between the last two looks */
	uint64_t scan_ns;	/* when that scan began */
	bool detached;		/* exited: probes gone, counts final */
	struct lp_map *maps;
	int nmaps;
	int nprobed;		/* of its objects, those probed */
	bool said_max;		/* LP_MAX_PROBED reached: said */
};

/*
 * Objects probed in one process at most: a PyTorch process with CUDA has
 * six or so (libtorch_cpu and _python, libtorch_cuda, libcudart, libcuda,
 * libnccl). Past it a process mapping hundreds of look-alikes would take
 * the daemon's descriptors and links from every other job.
 */
#define LP_MAX_PROBED 32

/*
 * Files read kept (struct gpu_object, 5 KB each): past it, a file with
 * nothing to probe in it is not kept but read again by the next process
 * that maps it. Every executable file a traced process maps was kept for
 * the daemon's life: 20-28k files (one user's doing) took 111-116 MB.
 * A node's real jobs map a few thousand.
 */
#define LP_MAX_OBJECTS 4096

/*
 * Files with something to probe kept per owner other than root: a user can
 * make look-alikes of libtorch by the thousand (each kept, 5 KB, for the
 * daemon's life: LP_MAX_OBJECTS bounds only the rest). A user's real
 * environments hold ten or so each (libtorch_cpu and _python, CUDA's,
 * NCCL's). Past it, that user's new ones are not kept, nor probed.
 */
#define LP_MAX_USER_OBJECTS 256
#define LP_MAX_SAID_UIDS 64	/* owners told of it on stderr; past them counted only */

struct lib_probes {
	struct tracer *tr;
	struct gpu *gpu;	/* what is found and counted goes here */
	bool launches;		/* --launches: probe every launch path too */
	bool phases;		/* probe libtorch's brackets (not --no-phases) */
	bool verbose;		/* say what is probed, and when */
	uint64_t t0;
	uint64_t refused;	/* mappings not probed: their owner, LP_MAX_PROBED, LP_MAX_USER_OBJECTS */
	uint64_t unkept;	/* files past LP_MAX_OBJECTS read and not kept */
	int plain;		/* gpu.objs' stand-in for them; -1 none yet */
	unsigned int said_uid[LP_MAX_SAID_UIDS];	/* owners past LP_MAX_USER_OBJECTS, said */
	int nsaid_uid;
	struct lp_proc *procs;
	int nprocs;
};

void lib_probes_init(struct lib_probes *gp, struct tracer *tr, struct gpu *g,
		     bool launches, bool phases, bool verbose);
/* Removes every probe; the model keeps what was found and counted. */
void lib_probes_free(struct lib_probes *gp);
/*
 * Finds new CUDA/NCCL code in the job's processes and probes it: each new
 * process at once and every tick for its first seconds (the dynamic loader
 * is still at work), then once a second (dlopen), and at once when BPF says
 * a library was mapped (lib_probes_on_library). Detaches from exited ones.
 */
void lib_probes_tick(struct lib_probes *gp, const struct job *job, uint64_t now);
/*
 * pid mapped the code of a library named like one to probe (TB_EV_LIBRARY):
 * its maps are read now, not at its next look.
 */
void lib_probes_on_library(struct lib_probes *gp, const struct job *job, pid_t pid,
			   uint64_t now);
/*
 * A process exec'd at ts: its old probes went with its old address space.
 * A scan that began after ts saw the new one already: its probes stay
 * (removing a return probe while a call is in progress would lose the
 * return, and leave the thread inside the call).
 */
void lib_probes_on_exec(struct lib_probes *gp, pid_t pid, uint64_t ts);
/* Reads the per-process call counts from BPF into the model. */
void lib_probes_read(struct lib_probes *gp);

/* "libcuda.so.580.95.05" -> "580.95.05"; "" when the name has none. */
void lib_so_version(const char *name, char *out, size_t len);

#endif
