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

#define TB_ENOSYS 38
#define TB_S_IFMT 0170000
#define TB_S_IFSOCK 0140000
#define TB_S_IFREG 0100000
#define TB_S_IFBLK 0060000

#define TB_AF_UNIX 1

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

/*
 * What kind of context is waking a task right now. The kernel's
 * preempt_count is a per-CPU variable that needs CONFIG_KALLSYMS_ALL to be
 * resolved, so instead: a BPF frame lives on the current kernel stack,
 * which is the task's own stack in process context and the per-CPU IRQ
 * stack in hard and soft interrupts (x86-64 runs softirqs there too).
 * Timer callbacks are marked per CPU by the timer expire tracepoints.
 */
#define TB_THREAD_SIZE 16384

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} in_timer SEC(".maps");

static __always_inline int on_task_stack(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 base = (__u64)t->stack;
	volatile char marker = 0;
	__u64 sp = (__u64)&marker;

	return sp >= base && sp < base + TB_THREAD_SIZE;
}

static __always_inline __u32 irq_context(void)
{
	__u32 zero = 0, *depth = bpf_map_lookup_elem(&in_timer, &zero);

	if (depth && *depth)
		return TB_WK_TIMER;
	return on_task_stack() ? TB_WK_NONE : TB_WK_IRQ;
}

static __always_inline void timer_mark(int delta)
{
	__u32 zero = 0, *depth = bpf_map_lookup_elem(&in_timer, &zero);

	if (!depth)
		return;
	if (delta > 0)
		*depth += 1;
	else if (*depth)	/* attached mid-callback: no underflow */
		*depth -= 1;
}

#endif /* WAIT_REASON_BPF_H */
