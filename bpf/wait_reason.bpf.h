/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Why did a thread block? Read from the task itself, with no syscall
 * tracepoints: a task blocked in a syscall has pt_regs->ax == -ENOSYS
 * (x86-64 entry stores it until the syscall returns) and the syscall
 * number in orig_ax; its first argument (the fd, for I/O calls) is in di.
 * Skipping sys_enter/sys_exit hooks keeps the cost for every other task on
 * the machine at zero.
 */
#ifndef WAIT_REASON_BPF_H
#define WAIT_REASON_BPF_H

#include "syscall_class.h"

static __always_inline struct file *fd_file(struct task_struct *task, long fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

/*
 * A socket is the network only if it is not a unix socket: those are
 * local IPC (multiprocessing's fd passing, managers), judged like pipes.
 */
static __always_inline __u32 fd_wait(struct task_struct *task, long fd)
{
	struct file *f = fd_file(task, fd);
	struct socket *sock;
	__u32 mode;

	if (!f)
		return TB_W_OTHER;
	mode = BPF_CORE_READ(f, f_inode, i_mode) & TB_S_IFMT;
	if (mode == TB_S_IFREG || mode == TB_S_IFBLK)
		return TB_W_FILE;
	if (mode != TB_S_IFSOCK)
		return TB_W_PIPE;
	sock = BPF_CORE_READ(f, private_data);
	if (BPF_CORE_READ(sock, sk, __sk_common.skc_family) == TB_AF_UNIX)
		return TB_W_PIPE;
	return TB_W_SOCKET;
}

static __always_inline __u32 syscall_wait(struct task_struct *task, long nr,
					  long arg0)
{
	__u32 w = tb_syscall_wait(nr);

	return w == TB_W_FD ? fd_wait(task, arg0) : w;
}

/* The reason task is (or is about to be) blocked. */
static __always_inline __u32 task_wait_reason(struct task_struct *task)
{
	struct pt_regs *regs;

	if (BPF_CORE_READ_BITFIELD_PROBED(task, in_iowait))
		return TB_W_IOWAIT;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (long)BPF_CORE_READ(regs, ax) != -TB_ENOSYS)
		return TB_W_OTHER;
	return syscall_wait(task, BPF_CORE_READ(regs, orig_ax),
			    BPF_CORE_READ(regs, di));
}

/* Whether task, blocked for storage, is in a syscall that writes. */
static __always_inline int task_writes(struct task_struct *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

	return regs && (long)BPF_CORE_READ(regs, ax) == -TB_ENOSYS &&
	       tb_syscall_writes(BPF_CORE_READ(regs, orig_ax));
}

/*
 * What kind of context is waking a task right now. The kernel's
 * preempt_count would say, but it is a per-CPU variable that BPF can only
 * resolve with CONFIG_KALLSYMS_ALL. Instead, the timer and softirq
 * tracepoints mark per CPU when a callback or a softirq runs, and a frame
 * off the task's stack means some other interrupt (x86-64 runs interrupts
 * that hit the kernel on the IRQ stack; ones that hit user mode run on
 * the task stack, hence the marks). The stack's size: compat.bpf.h.
 */

enum { TB_HRTIMER, TB_TIMER_LIST, TB_SOFTIRQ, TB_NCTX };

/*
 * Per CPU and kind: when the running callback or softirq started, 0 if
 * none. A timestamp, not a depth counter, so that an exit we never saw
 * (the programs attach one by one) cannot leave a CPU marked forever.
 */
struct tb_ctx_marks {
	__u64 start[TB_NCTX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tb_ctx_marks);
} in_ctx SEC(".maps");

/*
 * frame: the program's context, which the kernel builds on the stack it
 * runs on (bpf_trace_runN's args[]). Not an address on the program's own
 * stack: since Linux 6.13 a tracing program that needs 64 bytes of stack
 * or more runs on a per-CPU private stack, never on the task's.
 */
static __always_inline int on_task_stack(const void *frame)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 base = (__u64)t->stack;
	__u64 sp = (__u64)frame;

	return sp >= base && sp < base + TB_THREAD_SIZE;
}

/* No callback or softirq run lasts longer: a mark older is stale. */
static __always_inline int mark_live(__u64 start, __u64 now, __u64 max)
{
	return start && now - start < max;
}

static __always_inline __u32 irq_context(const void *ctx)
{
	__u32 zero = 0;
	struct tb_ctx_marks *m = bpf_map_lookup_elem(&in_ctx, &zero);
	__u64 now;

	if (m && (m->start[TB_HRTIMER] | m->start[TB_TIMER_LIST] | m->start[TB_SOFTIRQ])) {
		now = bpf_ktime_get_ns();
		if (mark_live(m->start[TB_HRTIMER], now, 1000000) ||
		    mark_live(m->start[TB_TIMER_LIST], now, 1000000))
			return TB_WK_TIMER;
		if (mark_live(m->start[TB_SOFTIRQ], now, 20000000))
			return TB_WK_IRQ;
	}
	return on_task_stack(ctx) ? TB_WK_NONE : TB_WK_IRQ;
}

static __always_inline void ctx_mark(__u32 kind, int entering)
{
	__u32 zero = 0;
	struct tb_ctx_marks *m = bpf_map_lookup_elem(&in_ctx, &zero);

	if (m && kind < TB_NCTX)
		m->start[kind] = entering ? bpf_ktime_get_ns() : 0;
}

#endif /* WAIT_REASON_BPF_H */
