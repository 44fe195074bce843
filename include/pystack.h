/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The protocol of the Python stack reader (bpf/pystack.bpf.h, user space's
 * acquire/pystacks.c): where CPython keeps a thread's frames, per traced
 * process; which of its threads are Python threads; the stacks read; and
 * the time charged to each.
 *
 * BPF reads only code object addresses, innermost first: one read of a
 * frame's head per frame. User space names them (the code object's name,
 * file and first line), once per code object, from /proc/PID/mem.
 */
#ifndef TB_PYSTACK_H
#define TB_PYSTACK_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/*
 * Frames kept per stack. A training loop's Python stack is 10-30 frames
 * deep (the script, the loop, nn.Module's call, forward, a layer); a
 * deeper one (recursion, a framework's nested loops) keeps its innermost
 * TB_PY_INNER frames, where its time is spent, and its outermost
 * TB_PY_OUTER, where the loop and its callee are (the named sections):
 * the frames between are counted in cut. The walk follows TB_PY_WALK
 * frames at most: past that the outermost are not reached (TB_PY_CUT_OUTER).
 */
#define TB_PY_DEPTH 64
#define TB_PY_INNER 40
#define TB_PY_OUTER (TB_PY_DEPTH - TB_PY_INNER)
#define TB_PY_WALK 512
#define TB_PY_CUT_OUTER (1u << 31)	/* in cut: the outermost frames were not reached */
/* Bytes of a frame's head read at once: every field the layouts use. */
#define TB_PY_FRAME_HEAD 72

/* Where CPython keeps what the reader follows, in one process. */
struct tb_py_layout {
	__u16 tstate_frame;	/* PyThreadState: frame (<3.11), cframe (3.11, 3.12), current_frame */
	__s16 cframe_frame;	/* _PyCFrame.current_frame (3.11, 3.12); -1: none */
	__u16 frame_back;	/* f_back, or _PyInterpreterFrame.previous */
	__u16 frame_code;	/* f_code, or f_executable (3.13) */
	__s16 frame_owner;	/* _PyInterpreterFrame.owner; -1: none (<3.11) */
	__s16 owner_cstack;	/* FRAME_OWNED_BY_CSTACK, a C call's shim frame (3.12+); -1 */
};

/*
 * A Python thread of a traced process, by the id CPython keeps
 * (PyThreadState.thread_id: pthread_self(), glibc's thread pointer, which
 * is the task's fsbase on x86-64). Its value is the PyThreadState.
 */
struct tb_py_thread_key {
	__u32 tgid;
	__u32 pad;
	__u64 pthread;
};

/* A stack, by the hash of its code objects; 1 is a thread with no Python frame. */
#define TB_PY_EMPTY 1ull
struct tb_py_stack_key {
	__u32 tgid;
	__u32 pad;
	__u64 hash;
};

/*
 * code[0..TB_PY_INNER) the innermost frames, innermost first; past them,
 * once more than TB_PY_DEPTH were walked, a ring: frame k (from the
 * innermost, 0) at TB_PY_INNER + (k - TB_PY_INNER) % TB_PY_OUTER, so that
 * the last TB_PY_OUTER walked are there. User space puts them in order
 * (pyreader.c).
 */
struct tb_py_stack {
	__u32 depth;		/* frames in code[] */
	__u32 cut;		/* frames walked and not kept; | TB_PY_CUT_OUTER */
	__u64 code[TB_PY_DEPTH];
	__u64 scope;		/* the innermost record_function open then (tb_py_scope_key); 0 */
};

/*
 * The user's own record_function("name") brackets (TB_BC_OTHER), open
 * while a stack was read: a stack keeps the innermost, a scope its
 * enclosing one (parent). User space puts each in the stack as a frame
 * of its own, right inside the frame that opened it: the stack read as
 * it opened (stack, read inside record_function.__enter__) says which.
 */
#define TB_PY_SCOPE_NAME 64
struct tb_py_scope_name {
	char s[TB_PY_SCOPE_NAME];
};

struct tb_py_scope_key {
	__u32 tgid;
	__u32 pad;
	__u64 id;		/* of its name, stack and parent */
};

struct tb_py_scope {
	__u64 stack;		/* the stack read as it opened (tb_py_stack_key's hash) */
	__u64 parent;		/* the scope open around it then; 0 */
	struct tb_py_scope_name name;	/* NUL-terminated, cut to TB_PY_SCOPE_NAME - 1 bytes */
};

/* Where the f-th frame walked (0: the innermost) goes in code[]. */
static inline __u32 tb_py_slot(__u32 f)
{
	return f < TB_PY_INNER ? f : TB_PY_INNER + (f - TB_PY_INNER) % TB_PY_OUTER;
}

/* How the time of an entry was taken. */
enum tb_py_how {
	TB_PYH_WAIT,		/* off the CPU: whole intervals, read at the switch-out */
	TB_PYH_SAMPLE,		/* on it: one sample period per sample */
};

/*
 * Time is kept per span of the thread's phase events: seq is how many it
 * had sent (tb_slot.ph_seq), so the time belongs to the span from its
 * seq-th event to the next, which user space resolves to a phase as the
 * phase table does (model/phase_spans.c). A span's entries take no more
 * time once the next event is sent: user space then moves them out.
 */
struct tb_py_time_key {
	__u64 hash;
	__u32 tgid;
	__u32 tid;
	__u32 seq;
	__u8 phase;		/* enum tb_phase of the thread then, as BPF had it */
	__u8 cat;		/* enum tb_cat, on the critical path */
	__u8 how;		/* enum tb_py_how */
	__u8 own;		/* enum tb_cat, the thread's own state */
};

struct tb_py_time {
	__u64 ns;
	__u64 n;		/* intervals or samples */
};

/* What the reader could not do; user space says it. */
struct tb_py_counters {
	__u64 reads;		/* stacks read */
	__u64 read_failed;	/* a frame's memory could not be read (paged out, freed), or
				 * another read on its CPU took its scratch (pystack.bpf.h) */
	__u64 stacks_full;	/* new stacks not kept: py_stacks full */
	__u64 time_full;	/* time not charged: py_time full */
	__u64 samples;		/* on-CPU samples of a Python thread */
	__u64 scopes_full;	/* record_function brackets not kept: py_scopes full */
};

#endif
