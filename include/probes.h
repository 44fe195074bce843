/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The protocol of the uprobes on user-space libraries, shared by BPF and
 * user space: the CUDA runtime and driver and NCCL (bpf/cuda_nccl.bpf.h),
 * libtorch's brackets and the interpreter's lock wait (bpf/torch.bpf.h).
 * User space finds the functions (user/model/probe_table.c lists them,
 * user/acquire/lib_probes.c attaches them) and attaches one BPF program to
 * many of them; the attach cookie tells the program which function fired
 * and how to read its arguments.
 */
#ifndef TB_PROBES_H
#define TB_PROBES_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#include "trainbpf.h"	/* enum tb_ev_type: its records' types */
#include "pystack.h"	/* struct tb_py_scope_name */
#endif

/* What a probed function is; decides its category and what is counted. */
enum tb_api_kind {
	TB_AK_SYNC = 0,		/* stream/event/device/context synchronize */
	TB_AK_MEMCPY,		/* blocking copy: returns when the GPU is done */
	TB_AK_COLL,		/* NCCL collective */
	TB_AK_P2P,		/* ncclSend / ncclRecv */
	TB_AK_GROUP,		/* ncclGroupStart / End: grouped ops run in End */
	TB_AK_COMM_INIT,	/* communicator creation */
	TB_AK_COMM_DESTROY,
	TB_AK_LAUNCH,		/* kernel or graph launch: entry only, opt-in */
	/* PyTorch's brackets (bpf/torch.bpf.h): phases, not counted calls */
	TB_AK_TORCH_OPEN,	/* record_function_enter_new: a named bracket opens (entry) */
	TB_AK_TORCH_OP,		/* invokeOperatorFromPython: a torch.ops call (entry) */
	TB_AK_TORCH_CLOSE,	/* DisableTorchFunctionSubclass.__exit__: one may close */
	TB_AK_TORCH_BACKWARD,	/* THPEngine_run_backward: entry and return */
	TB_AK_TORCH_SAVE,	/* PyTorchStreamWriter constructor (entry) */
	TB_AK_TORCH_SAVED,	/* PyTorchStreamWriter destructor (return) */
	TB_AK_TORCH_OP_RET,	/* where a torch.ops call returns (torch < 2.0) */
	/*
	 * CPython's blocking lock wait (entry and return): a trainer's wait
	 * for a batch from a thread of its own (bpf/torch.bpf.h, py_lock).
	 * Cookie il 1: the GIL is taken back after it returns (Python < 3.13).
	 */
	TB_AK_PYLOCK,
	TB_AK_NKINDS,
};

/* How a communicator-creating call passes its arguments (x86-64 SysV). */
enum tb_init_layout {
	TB_IL_RANK = 0,		/* (comm*, nranks, ncclUniqueId by value, rank, ...) */
	TB_IL_ALL,		/* (comm*, ndev, devlist) */
	TB_IL_SCALABLE,		/* (comm*, nranks, rank, nId, ncclUniqueId *ids, config) */
	TB_IL_SPLIT,		/* (comm, color, key, newcomm*, config) */
	TB_IL_SHRINK,		/* (comm, exclude*, nexclude, newcomm*, config, flags) */
};

/*
 * The attach cookie: api index (bits 0-7), kind (8-11), 1-based argument
 * holding the element count (12-14) and the ncclDataType_t (15-17), 0 if
 * none, the init layout (18-21), and the 1-based argument holding an NCCL
 * data call's communicator (24-26; 7: the first one passed on the stack,
 * ncclReduce's).
 */
/* The kind is 4 bits of the cookie. */
_Static_assert(TB_AK_NKINDS <= 16, "the kind is 4 bits of the cookie");
#define TB_COOKIE(api, kind, cnt, dt, il, cm) \
	((__u64)(api) | (__u64)(kind) << 8 | (__u64)(cnt) << 12 | \
	 (__u64)(dt) << 15 | (__u64)(il) << 18 | (__u64)(cm) << 24)
#define TB_COOKIE_API(c)	((c) & 0xff)
#define TB_COOKIE_KIND(c)	(((c) >> 8) & 0xf)
#define TB_COOKIE_CNT(c)	(((c) >> 12) & 0x7)
#define TB_COOKIE_DT(c)		(((c) >> 15) & 0x7)
#define TB_COOKIE_IL(c)		(((c) >> 18) & 0xf)
#define TB_COOKIE_CM(c)		(((c) >> 24) & 0x7)
/*
 * On invokeOperatorFromPython (TB_AK_TORCH_OP): the library's
 * record_function opens and closes through torch.ops calls whose
 * arguments name the bracket (torch < 2.0, bpf/torch.bpf.h).
 */
#define TB_COOKIE_LEGACY	(1ULL << 22)
/* And the call's return site is probed (TB_AK_TORCH_OP_RET): exits close there. */
#define TB_COOKIE_RET_SITE	(1ULL << 23)

#define TB_MAX_APIS 256
#define TB_NCCL_NTYPES 12	/* ncclInt8 .. ncclFloat8e5m2 */

/* Per process and function: what its calls did. */
struct tb_api_key {
	__u32 tgid;
	__u32 api;
};

struct tb_api_stat {
	__u64 calls;		/* outermost calls */
	__u64 nested;		/* calls made inside another probed call */
	__u64 bytes;		/* count x datatype size, NCCL data calls */
	__u64 ns;		/* wall time of the outermost calls, entry to return */
};

/*
 * Address ranges of CUDA runtime code in a process (user space fills them):
 * a driver launch called from there is the runtime's own, already counted.
 * Launch probes have no return probe, so nesting depth cannot tell.
 */
#define TB_MAX_RT_RANGES 4
struct tb_rt_ranges {
	__u64 lo[TB_MAX_RT_RANGES];
	__u64 hi[TB_MAX_RT_RANGES];
};

/* A communicator call seen between entry and return (keyed by tid). */
struct tb_comm_pending {
	__u64 out;		/* where the new ncclComm_t is written */
	__u64 parent;		/* split/shrink: the parent communicator */
	__s32 rank, nranks;
	__s32 color;		/* split: its color (members of one child share it) */
	__u32 pad;
	__u8 id[16];		/* first bytes of the ncclUniqueId */
};

/*
 * Per process and communicator: the outermost NCCL data calls made on it
 * (collectives, sends and receives), counted at entry. Ranks of one
 * communicator enter the same sequence, so the one with fewer is behind.
 */
struct tb_comm_key {
	__u32 tgid;
	__u32 pad;
	__u64 comm;		/* the ncclComm_t handle */
};

struct tb_comm_stat {
	__u64 calls;
	__u64 bytes;
};

struct tb_comm_event {
	__u32 type;
	__u32 pid;
	__u32 tid;
	__u32 api;
	__s32 rank;		/* -1: unknown (split, shrink, init-all) */
	__s32 nranks;
	__u64 ts;
	__u64 comm;		/* the ncclComm_t handle */
	__u64 parent;
	__u8 id[16];
	__s32 color;		/* split: its color; else 0 */
	__u32 pad;
};

/*
 * TB_EV_CALL: the calls whose sequence repeats once per training step
 * (kinds TB_AK_SYNC to TB_AK_GROUP), for user/model/steps.c to find the period.
 */
struct tb_call_event {
	__u32 type;
	__u32 pid;
	__u32 tid;
	__u16 api;
	__u8 kind;		/* enum tb_api_kind */
	__u8 pad;
	__u64 entry;		/* bpf_ktime_get_ns at entry and at return */
	__u64 ret;
};

/*
 * TB_EV_SCOPE (recording only): a record_function bracket of no phase (the
 * user's own, DistributedDataParallel.forward) opened (with its name) or
 * closed, at depth among the thread's open brackets; brackets nest, so a
 * close is the innermost open one's at its depth.
 */
struct tb_scope_event {
	__u32 type;
	__u32 pid;
	__u32 tid;
	__u8 open;
	__u8 depth;
	__u16 pad;
	__u64 ts;
	struct tb_py_scope_name name;	/* open only */
};

/* TB_EV_PHASE: a thread's phase from ts on (no wakeup: read at the next tick). */
struct tb_phase_event {
	__u32 type;
	__u32 pid;
	__u32 tid;
	__u8 phase;		/* enum tb_phase (trainbpf.h), from ts */
	__u8 cls;		/* enum tb_bracket_cls of the bracket that changed it */
	__u8 resolved;		/* a fetch or backward: what the step before was (TB_RS_*) */
	__u8 seq;		/* the thread's count of events, this one's included, mod 256 */
	__u64 ts;
	/*
	 * The thread's row of phase at ts (critical path per category, ns,
	 * the TB_NCAT of trainbpf.h): what the last event's phase gains
	 * after it is the time after the thread's last bracket.
	 */
	__u64 row[8];
};

/*
 * How pending time was resolved (tb_phase_event.resolved), at a backward
 * or at the fetch that ends a step with no backward.
 */
enum tb_resolved {
	TB_RS_NONE = 0,		/* nothing was pending */
	TB_RS_TRAINED,		/* a backward: the step's data and forward */
	TB_RS_LONE,		/* no backward: held until the next step tells */
	TB_RS_VALIDATION,	/* no backward, in a row: the held step and this one */
	TB_RS_HOW = 0x07,
	TB_RS_START_UNDO = 0x08,	/* and first, a start-up (TB_PH_PEND_START) was no
					 * worker's: back to the phase it interrupted */
	TB_RS_HELD_OTHER = 0x10,	/* and, a backward after a held step: it was other */
	TB_RS_END_DATA = 0x20,	/* and, lone after a training step: the fetch that
				 * ends a pass, its own time data */
	TB_RS_FED = 0x40,	/* no fetch: a thread that takes no batch from a DataLoader
				 * waited for its input; its pending forward so far is data */
	TB_RS_START_HELD = 0x80,	/* and last, a fetch ended a start-up: it is held
					 * with this fetch's step (TB_PH_PEND_SHELD) */
};

#endif /* TB_PROBES_H */
