/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The protocol between trainbpf's BPF programs and its user space: the
 * time categories, the per-thread accounting slot, the ring-buffer events,
 * and the rule that turns "why a thread blocked" plus "who woke it" into a
 * category. Both sides include this file, so the rule is one piece of code
 * that the unit tests exercise directly.
 */
#ifndef TRAINBPF_H
#define TRAINBPF_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The Python stack reader's part of the protocol (a slot holds a scope). */
#include "pystack.h"

#define TB_COMM_LEN 16
#define TB_NCKPT 12		/* critical-path checkpoints per thread... */
#define TB_CKPT_BASE_NS 1000000ull	/* ...aged ~1 ms, 2 ms, 4 ms ... 4 s */
#define TB_DEFAULT_SLOTS 8192	/* threads traced at once; --max-threads changes it */
#define TB_PATH_LEN 96

/* Where a thread's time goes. Every nanosecond lands in exactly one. */
enum tb_cat {
	TB_CPU,		/* on-CPU, computing */
	TB_GPU_WAIT,	/* host blocked on (or spinning for) the GPU */
	TB_COMM,	/* network / collective communication */
	TB_DATA_WAIT,	/* waiting for a data-loader worker process */
	TB_IO,		/* blocked in file or block I/O, any filesystem */
	TB_RUNQUEUE,	/* runnable, waiting for a CPU */
	TB_LOCK,	/* waiting for another thread or process of the job */
	TB_IDLE,	/* sleeping, timeouts, waits on nothing traced */
	TB_NCAT,
};

/*
 * Where in the training loop a thread is, beside its category. Set from
 * PyTorch's own brackets (bpf/torch.bpf.h): DataLoader fetches, optimizer
 * calls (named by torch >= 2.0, and by the legacy ops' arguments before),
 * backward (THPEngine_run_backward) and torch.save (PyTorchStreamWriter). A step's fetch and what follows it
 * wait in PEND_DATA and PEND_FWD until the step says what it was: a
 * backward makes them data and forward. A fetch with no backward after it
 * is validation when another such comes next (a loop over a loader with
 * no backward), and other when it stands alone (the fetch that ends an
 * epoch): it waits in PEND_LONE until its neighbour tells. The fetch
 * itself of a lone step right after a training step is data: the fetch
 * that ends a pass (StopIteration; it shuts down workers that do not
 * persist). A thread that has never fetched (batches from a queue, a
 * custom iterator) but names its optimizer calls is in PEND_FWD from a
 * backward's end to the next backward: the next step's input and forward. Each wait there for input
 * (storage, a thread that was itself waiting, or CPython's lock wait: a
 * producer thread's hand-off, tb_py_lock) makes what is pending so far
 * PEND_DATA; the next backward makes them data and
 * forward.
 *
 * Worker start-up: iter(loader) forks the workers (fork and spawn
 * contexts: the thread itself; forkserver: the forkserver it forked) and
 * the first batch takes their start-up. From such a fork outside any
 * bracket the thread is in PEND_START; its next fetch ends it: if the
 * process forked last is alive then, the span is held with that fetch's
 * step (PEND_SHELD) and goes where the step goes (a training step's:
 * WSTART, data, that first fetch, the wait for the first batch, with it;
 * validation's: validation); if it has exited (a helper
 * that ran and was waited for), the span goes back to the phase it
 * interrupted, as does a span that another bracket ends.
 */
enum tb_phase {
	TB_PH_OTHER = 0,	/* in no phase: setup, logging, threads that run none */
	TB_PH_DATA,
	TB_PH_FORWARD,
	TB_PH_BACKWARD,
	TB_PH_OPTIMIZER,
	TB_PH_CHECKPOINT,
	TB_PH_VALIDATION,
	TB_PH_PEND_DATA,	/* a fetch, not yet known to be training's */
	TB_PH_PEND_FWD,		/* after a fetch, until a backward or the next fetch;
				 * no fetch: from a backward to the next */
	TB_PH_PEND_LONE,	/* a fetch and what followed, no backward: validation or other */
	TB_PH_WSTART,		/* data: DataLoader workers' start-up, before a training step's fetch */
	TB_PH_PEND_START,	/* since the thread forked a process outside any bracket (or one
				 * it forked forked one: a forkserver), until its next fetch */
	TB_PH_PEND_SHELD,	/* a start-up, held with the step whose fetch ended it */
	/*
	 * Appended, so that the numbers recordings keep stay the same:
	 * communication outside any phase (a collective after a backward, a
	 * barrier between steps), from a wait on the network in other; and
	 * the stretch after such a wait, until the next one (communication)
	 * or anything else (back to other, from the wait's end).
	 */
	TB_PH_COMM,
	TB_PH_PEND_COMM,
	TB_NPHASE,
};

/*
 * The checkpoint syscalls' attach cookie (bpf/ckpt_files.bpf.h; set by
 * user/acquire/tracer.c, ckpt_attach_more): which call one program for a
 * kind of call is in. An fd's call (TB_CKC_OP), or a path as the first
 * argument, from the cwd (open, rename: TB_CKC_CWD).
 */
enum tb_ck_op { TB_CK_WRITE, TB_CK_SYNC, TB_CK_CLOSE };
#define TB_CKC_OP	0x3
#define TB_CKC_CWD	0x10

/* What a bracket is: from its name (record_function, torch >= 2.0), or its probe. */
enum tb_bracket_cls {
	TB_BC_NONE = 0,
	TB_BC_DATA,		/* enumerate(DataLoader)#...__next__ */
	TB_BC_OPTIM,		/* Optimizer.step#..., Optimizer.zero_grad#... */
	TB_BC_OTHER,		/* named, not a phase (DistributedDataParallel.forward, ...) */
	TB_BC_BACKWARD,		/* not a name: THPEngine_run_backward */
	TB_BC_SAVE,		/* not a name: a PyTorchStreamWriter's life */
	TB_BC_SAVE_IO,		/* not a name: a syscall on a file torch.save wrote, after it
				 * (write, fsync, close, rename: bpf/ckpt_files.bpf.h) */
	TB_BC_GRAD,		/* not a name: THPEngine_run_backward called by
				 * torch.autograd.grad (no phase: bpf/torch.bpf.h) */
};

/* An open bracket of a thread: what closes it, and the phase to go back to. */
#define TB_NBRACKET 4
struct tb_bracket {
	__u64 key;		/* the writer object; 0: named brackets and backward */
	__u8 cls;		/* enum tb_bracket_cls */
	__u8 restore;		/* enum tb_phase */
	__u8 pad[6];
	__u64 scope;		/* --functions, TB_BC_OTHER: its tb_py_scope_key's id; 0 */
};

/*
 * A file a thread's torch.save wrote to (bpf/ckpt_files.bpf.h): what it
 * then does to it (flush, fsync, close, rename) is the checkpoint too.
 */
#define TB_NCKFILE 4
struct tb_ckfile {
	__u64 inode;		/* the file's inode (a kernel address); 0: empty */
	__u64 dir;		/* its directory's dentry (a kernel address) */
	__u64 name;		/* hash of its name (ckpt_hash) */
	__u64 dir_name;		/* hash of its directory's name */
	__s32 fd;		/* -1: closed, kept for a rename of it */
	__u32 pad;
};

/* A thread's scheduling state as the BPF side last saw it. */
enum tb_state {
	TB_ST_FREE = 0,	/* slot unused */
	TB_ST_UNKNOWN,	/* registered from /proc at attach; no event seen yet */
	TB_ST_ONCPU,
	TB_ST_RUNNABLE,
	TB_ST_BLOCKED,
	TB_ST_EXITED,	/* final; user space reads it once, then frees it */
};

/* Why a thread blocked, read from its own context when it switched out. */
enum tb_wait {
	TB_W_OTHER = 0,	/* not in a syscall we know (page fault, ...) */
	TB_W_IOWAIT,	/* task->in_iowait: block-layer / page-cache I/O */
	TB_W_FILE,	/* file syscall on a regular file or block device */
	TB_W_SOCKET,	/* syscall on a socket */
	TB_W_POLL,	/* poll / select / epoll: what it waits for is unknown */
	TB_W_FUTEX,
	TB_W_SLEEP,	/* nanosleep, pause, wait4, ... */
	TB_W_PIPE,	/* read/write on a pipe, eventfd, char device, ... */
};

/* Who woke a blocked thread (captured at sched_waking, in the waker). */
enum tb_waker {
	TB_WK_NONE = 0,	/* no waking seen (attach race, lost) */
	TB_WK_TIMER,	/* a timer callback: a timeout expired */
	TB_WK_IRQ,	/* other interrupt work: network receive, mostly */
	TB_WK_UNTRACED,	/* a task outside the traced job */
	TB_WK_TRACED,	/* a traced thread: wk_slot says which */
};

/* Slot flags. */
#define TB_SF_IN_SOCKET 0x1	/* switched in while inside an inet-socket syscall */
#define TB_SF_WRITES	0x2	/* blocked in a syscall that writes (tb_syscall_writes) */
#define TB_SF_WOKEN	0x4	/* RUNNABLE since a waking closed its wait (wk_own, wk_cp) */

/*
 * A thread in CPython's blocking lock wait (tb_slot.py_lock; bpf/torch.bpf.h):
 * in it, in it and a wait there was the step's input, or just out of such a
 * one and taking the GIL back (Python < 3.13 takes it after the return).
 */
enum tb_py_lock {
	TB_PY_NONE = 0,
	TB_PY_WAIT,
	TB_PY_FED,
	TB_PY_GIL,
};

/* Process roles. BPF only needs WORKER (it makes waits data_wait). */
enum tb_role {
	TB_ROLE_OTHER = 0,
	TB_ROLE_TRAINER,
	TB_ROLE_WORKER,
};

/* Per-process flags (tb_proc.flags). */
#define TB_PF_FORKED	0x1	/* created by fork of a traced process */
#define TB_PF_EXECED	0x2	/* has exec'd since it was traced */
#define TB_PF_EXITED	0x4	/* its last thread exited */

/* A thread's cumulative critical-path times as they were at ts. */
struct tb_ckpt {
	__u64 ts;
	__u64 cp[TB_NCAT];
};

#define TB_NRECENT 4	/* recent wakers whose counters a blocking thread snapshots */

/* A recent waker, and its critical-path counters when this thread blocked. */
struct tb_waker_snap {
	__u32 slot;
	__u32 tid;	/* 0: empty; else must match the slot's tid (slots are reused) */
	__u64 cp[TB_NCAT];
};

/*
 * One traced thread. Lives in an mmap-able array map: BPF writes it, user
 * space reads it without syscalls. seq is odd while BPF updates the slot
 * (a seqlock), so a reader can retry instead of seeing half an update.
 */
struct tb_slot {
	__u32 seq;
	__u32 tid;
	__u32 tgid;
	__u8 state;		/* enum tb_state */
	__u8 wait;		/* enum tb_wait at the last switch-out */
	__u8 flags;		/* TB_SF_* */
	__u8 depth;		/* nesting of probed CUDA/NCCL calls (cuda_nccl.bpf.h) */
	__u64 start_ns;		/* first seen: fork, or registration at attach */
	__u64 end_ns;		/* exit; 0 while alive */
	__u64 since;		/* start of the current interval */
	__u64 own[TB_NCAT];	/* the thread's own states */
	__u64 cp[TB_NCAT];	/* same time, waits on traced threads resolved */
	__u64 wk_ts;		/* last sched_waking of this thread */
	__u32 wk_slot;		/* waker's slot when wk_kind == TB_WK_TRACED */
	__u8 wk_kind;		/* enum tb_waker */
	__u8 region;		/* while depth > 0: TB_GPU_WAIT or TB_COMM */
	__u16 api;		/* while depth > 0: the outermost call's enum tb_api */
	__u64 api_ts;		/* entry of the outermost probed call */
	__u64 api_bytes;	/* and its bytes (an NCCL data call's count x datatype size) */
	__u64 io_rbytes;	/* task->ioac at the last switch-out, minus base */
	__u64 io_wbytes;
	__u64 io_rbase;
	__u64 io_wbase;
	__u64 nswitch;		/* context switches out */
	/*
	 * CPU time the kernel's own counters (schedstat, the thread's CPU
	 * clock) give this thread beyond our cpu, its runqueue time short by
	 * as much: + as a woken task that preempted, - as the one preempted.
	 * See switch_at; --states-out tells it, to reconcile the two.
	 */
	__s64 kskew_ns;
	__u64 last_in;		/* last switch-in: a waking before it is stale */
	__u64 blk_ns;		/* blocked, except idle and waits for the main thread */
	__u64 net_ns;		/* blocked on communication (see tb_is_net_thread) */
	__u32 net_waits;	/* waits counted in net_ns */
	__u32 fed;		/* wakes of a non-worker's thread in another process (roles) */
	__u64 rq_delay0;	/* sched_info.run_delay on becoming RUNNABLE; TB_RQD_UNKNOWN */
	char comm[TB_COMM_LEN];
	__u8 phase;		/* enum tb_phase */
	__u8 nbr;		/* open brackets in br[] */
	__u8 op_seen;		/* a torch.ops call since the last bracket opened */
	__u8 fetched;		/* a fetch opened this step and no backward followed yet */
	__u8 lone;		/* the step before had no backward: held in PEND_LONE */
	__u8 in_val;		/* steps with no backward came in a row: validation */
	__u8 trained;		/* the step before had a backward */
	__u8 legacy_exit;	/* torch < 2.0: an exit op runs, the bracket closes at its return */
	__u8 fetcher;		/* it has fetched from a DataLoader: steps start at fetches */
	__u8 named;		/* a fetch or an optimizer call was named: phases are told */
	__u8 wk_own;		/* the categories of the wait the last waking closed: */
	__u8 wk_cp;		/* switch_in gives them the time until the enqueue */
	__u8 st_from;		/* in PEND_START: the phase the start-up interrupted */
	__u8 st_held;		/* the step under way holds a start-up: its fetch is one too */
	__u8 ck_n;		/* files in ckf[] */
	__u8 ck_io;		/* in a syscall on one of them: its TB_BC_SAVE_IO bracket is open */
	__u8 forked;		/* BPF gave it the slot at its fork and counts it (proc_forked) */
	__u8 ph_sent;		/* a phase event was sent: the first carries OTHER's row */
	__u32 ph_seq;		/* phase events sent (or lost): the span under way (pystack.h) */
	__u32 st_child;		/* in PEND_START: the process forked last (its tgid) */
	__u8 cm_on;		/* it ran a backward: its waits on the network in other
				 * are communication (torch.bpf.h, comm_wait) */
	__u8 cm_woke;		/* woken from a communication wait, not yet on a CPU */
	__u8 cm_from;		/* in PEND_COMM: the phase communication interrupted */
	__u8 py_lock;		/* in CPython's blocking lock wait (TB_PY_*; torch.bpf.h) */
	__u32 cm_waits;		/* waits a collective's thread of its process ended */
	__u64 cm_end;		/* in PEND_COMM: the end of the last communication wait */
	__u64 py_cpu;		/* TB_PY_GIL: own[TB_CPU] when the lock wait returned */
	__u64 py_stack;		/* --functions: the Python stack read at its last switch-out
				 * (include/pystack.h); 0: none read yet */
	__u64 py_sampled;	/* --functions: when the on-CPU sampler last fired on it */
	struct tb_bracket br[TB_NBRACKET];
	struct tb_ckfile ckf[TB_NCKFILE];	/* files torch.save wrote, not renamed yet */
	__u64 ph[TB_NPHASE][TB_NCAT];	/* critical-path time per phase */
	__u64 wio[TB_NPHASE];	/* of ph's io, blocked in syscalls that write */
	struct tb_ckpt ckpt[TB_NCKPT];	/* newest first, exponentially older */
	struct tb_waker_snap recent[TB_NRECENT];	/* most recent first */
	/*
	 * The user's record_function opening on this thread (torch.bpf.h):
	 * its name read here, and with --functions the scope built here, in
	 * the thread's own slot rather than on the stack: that probe's call
	 * chain goes on to the stack reader, and a chain may hold 512 bytes
	 * of stack in all (scripts/check_bpf_stack.py). Scratch: read by no
	 * one once the scope is kept (py_scopes) and its event sent.
	 */
	struct tb_py_scope scope_new;
};

/* rq_delay0 when the thread went RUNNABLE unseen (a missed wakeup). */
#define TB_RQD_UNKNOWN (~0ULL)

/* The value of the task-local storage: which slot a task owns. */
struct tb_task {
	__u32 slot;
	__u32 flags;		/* TB_TF_* */
};

/* Inside an mmap of a probed library's code (bpf/libraries.bpf.h). */
#define TB_TF_LIB_MAP 0x1

/* Per traced process, keyed by tgid. */
struct tb_proc {
	__u32 role;		/* enum tb_role */
	__u32 flags;		/* TB_PF_* */
};

/*
 * Every record of the event ring buffer starts with its type (a __u32).
 * One enum for all of them: the kernel's side, then the probes of
 * user-space libraries (probes.h's records), whose values have been 16 on.
 */
enum tb_ev_type {
	TB_EV_FORK = 1,	/* a traced process created a new process */
	TB_EV_EXEC,
	TB_EV_EXIT,	/* the last thread of a process exited */
	TB_EV_MARK,	/* a "TRAINBPF epoch|step N" write (trainbpf_mark.h) */
	TB_EV_TEXT,	/* the start of a write to stdout or stderr */
	TB_EV_LIBRARY,	/* a traced process mapped a probed library's code */
	TB_EV_NCCL_COMM = 16,	/* a communicator was created (struct tb_comm_event) */
	TB_EV_NCCL_DESTROY,	/* and destroyed */
	TB_EV_CALL,	/* an outermost sync, copy or NCCL call returned (tb_call_event) */
	TB_EV_PHASE,	/* a thread's training phase changed (tb_phase_event) */
	TB_EV_SCOPE,	/* a record_function of no phase opened or closed (tb_scope_event) */
};

/* The head of a write(2) by a traced thread (bpf/output.bpf.h). */
#define TB_TEXT_LEN 256	/* a power of two: the verifier bounds the copy by a mask */
#define TB_MARK_PREFIX "TRAINBPF "
struct tb_text_event {
	__u32 type;		/* TB_EV_MARK or TB_EV_TEXT */
	__u32 pid;
	__u32 tid;
	__u32 fd;
	__u64 ts;
	__u32 len;		/* bytes in text: the write's first TB_TEXT_LEN - 1 at most */
	__u32 pad;
	char text[TB_TEXT_LEN];
};

/* Rare lifecycle events, through the ring buffer. Losses are counted. */
struct tb_event {
	__u32 type;
	__u32 pid;
	__u32 ppid;
	__s32 exit_code;
	__u64 ts;
	char comm[TB_COMM_LEN];
	char path[TB_PATH_LEN];	/* exec: the file name */
};

/* Global counters, in the BPF object's .bss. */
struct tb_counters {
	__u64 events_lost;	/* ring buffer full */
	__u64 slots_exhausted;	/* more live threads than slots, or than a process's share */
	__u64 storage_failed;	/* task storage could not be created */
	__u64 sched_missed;	/* transitions that imply a missed scheduler event */
	__u64 api_stats_full;	/* CUDA/NCCL calls not counted: api_stats or comm_stats full */
	__u64 api_preempted;	/* a probe's slot update interrupted by a switch */
	__u64 states_lost;	/* state intervals dropped: states ring buffer full */
	__u64 brackets_deep;	/* brackets past TB_NBRACKET open at once: not tracked */
};

/*
 * One closed interval of one thread, through the dedicated `states` ring
 * buffer when the stream is on (tb_stream_states). A thread's records tile
 * its time: each starts where the previous one ended, and per category
 * they sum to the thread's counters. A lock wait whose critical path is
 * split over several categories comes as consecutive pieces, one per
 * critical-path category in enum order, all with cat TB_LOCK and
 * TB_SR_SPLIT: the split is exact in sum, not in order within the wait.
 */
#define TB_SR_SPLIT 0x1
/*
 * --functions: not an interval but an on-CPU sample of the thread's Python
 * stack at end_ns, which charged the CPU time from start_ns (pystack.bpf.h,
 * py_sample_ns: a sampler period, or more after periods the sampler
 * skipped): its stack in py_stack. The intervals off a
 * CPU carry the stack read at the switch-out before them, which they are
 * charged to whole; 0 on a CPU, and for a thread whose stack is not read.
 */
#define TB_SR_PY_SAMPLE 0x2

/* Nanoseconds per category (a global BPF function takes it by pointer). */
struct tb_cat_ns {
	__u64 ns[TB_NCAT];
};

struct tb_state_rec {
	__u32 tid;
	__u32 pid;
	__u64 start_ns;
	__u64 end_ns;
	__u64 py_stack;		/* --functions: its Python stack's hash (tb_py_stack_key); 0 */
	__u8 cat;		/* enum tb_cat: the thread's own state */
	__u8 cp_cat;		/* enum tb_cat: the same time on the critical path */
	__u8 flags;		/* TB_SR_* */
	__u8 pad[5];
};

/* What we know of a traced waker (TB_WK_TRACED). */
struct tb_waker_info {
	__u32 role;		/* enum tb_role of the waker's process */
	int same_proc;		/* in the wakee's own process */
	int is_main;		/* that process's main thread */
	int net;		/* a communication thread */
};

/*
 * The own category of a blocked interval: what the thread waited for,
 * judged first by the syscall it blocked in, then by who woke it (w
 * describes a TB_WK_TRACED waker).
 */
static inline __u32 tb_wait_category(__u32 wait, __u32 wk_kind,
				     const struct tb_waker_info *w)
{
	switch (wait) {
	case TB_W_IOWAIT:
	case TB_W_FILE:
		return TB_IO;
	case TB_W_SOCKET:
		return TB_COMM;
	case TB_W_SLEEP:
		return TB_IDLE;
	}
	switch (wk_kind) {
	case TB_WK_IRQ:
		/* Network receive wakes pollers from softirq context. */
		return wait == TB_W_POLL ? TB_COMM : TB_IDLE;
	case TB_WK_TRACED:
		if (w->role == TB_ROLE_WORKER && !w->same_proc)
			return TB_DATA_WAIT;
		if (w->net)
			return TB_COMM;
		/* A pool thread handed work by its main thread was idle. */
		if (w->same_proc && w->is_main)
			return TB_IDLE;
		return TB_LOCK;
	case TB_WK_UNTRACED:
		return wait == TB_W_FUTEX ? TB_LOCK : TB_IDLE;
	case TB_WK_NONE:	/* nobody (yet): a pool thread waiting for work */
		return TB_IDLE;
	default:		/* a timeout */
		return TB_IDLE;
	}
}

/*
 * A communication thread is one whose waits, idle ones (such as waiting for
 * work from its own process's main thread) aside, are mostly communication:
 * directly on the network (sockets, polls woken by packets: gloo's or a
 * TCP store's I/O loop), or on another communication thread (gloo's
 * worker threads, which run the collectives and wait on the I/O loop).
 * It takes a number of such waits, so that one rendezvous does not make
 * one. A process's main thread runs the training loop: never one.
 */
#define TB_NET_MIN_WAITS 8

static inline int tb_is_net_thread(__u64 net_ns, __u64 blk_ns, __u32 net_waits,
				   int is_main)
{
	return !is_main && net_waits >= TB_NET_MIN_WAITS && 2 * net_ns >= blk_ns;
}

/*
 * The critical-path category of a blocked interval when the waker's own
 * counters cannot split it: a worker stands for data loading and a
 * communication thread for communication, wholesale.
 */
static inline int tb_waker_is_wholesale(const struct tb_waker_info *w)
{
	return (w->role == TB_ROLE_WORKER && !w->same_proc) || w->net;
}

/*
 * A thread's running time inside a probed CUDA synchronisation or NCCL call
 * is that call's category (the CUDA runtime spins while it waits for the
 * GPU); elsewhere it is computation.
 */
static inline __u32 tb_oncpu_own(const struct tb_slot *s)
{
	return s->depth ? s->region : TB_CPU;
}

/*
 * Waiting for a CPU is contention, except inside a probed call: there it
 * is part of the call (a thread preempted while it spins for the GPU
 * still waits for the GPU), so the call's category is its wall time.
 */
static inline __u32 tb_runnable_cat(const struct tb_slot *s)
{
	return s->depth ? s->region : TB_RUNQUEUE;
}

/*
 * The critical-path category of a thread's running time: the probed call
 * it is inside of; communication while it runs inside a socket call from
 * switch-in on, or when it is a communication thread (its reductions are
 * part of the collective).
 */
static inline __u32 tb_oncpu_cp(const struct tb_slot *s)
{
	if (s->depth)
		return s->region;
	if (s->flags & TB_SF_IN_SOCKET)
		return TB_COMM;
	return tb_is_net_thread(s->net_ns, s->blk_ns, s->net_waits,
				s->tid == s->tgid) ? TB_COMM : TB_CPU;
}

#endif /* TRAINBPF_H */
