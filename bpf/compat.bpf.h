/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * What the programs need of the kernel that vmlinux.h does not carry, or
 * that changed between the kernels they load on, in one place and each
 * with where it comes from (in the manner of libbpf-tools' core_fixes.bpf.h):
 *
 * - Constants of the kernel's interfaces. They are macros, which BTF does
 *   not describe; the uapi ones are part of the ABI and never change. The
 *   programs read x86-64 registers (wait_reason.bpf.h), so the arch's
 *   values are x86-64's.
 * - Fields some kernels lack, read through bpf_core_field_exists so that
 *   one object loads on all of them.
 *
 * Included first by trainbpf.bpf.c.
 */
#ifndef COMPAT_BPF_H
#define COMPAT_BPF_H

/*
 * One access the compiler keeps where it is, as the kernel's READ_ONCE and
 * WRITE_ONCE (include/asm-generic/rwonce.h): another CPU reads or writes
 * it (a waker's slot), or it is read twice on purpose (critpath.bpf.h).
 */
#define TB_READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define TB_WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

/* include/uapi/asm-generic/errno.h: a syscall's return before it ran. */
#define TB_ENOSYS 38
/* include/uapi/asm-generic/errno-base.h: a full preallocated BPF hash map's update. */
#define TB_E2BIG 7

/* include/uapi/linux/stat.h: a file's type in i_mode. */
#define TB_S_IFMT 0170000
#define TB_S_IFSOCK 0140000
#define TB_S_IFREG 0100000
#define TB_S_IFBLK 0060000

/* include/linux/socket.h */
#define TB_AF_UNIX 1

/* include/uapi/asm-generic/fcntl.h (x86-64 keeps the generic values) */
#define TB_O_APPEND 02000
#define TB_O_TRUNC 01000
/* include/uapi/linux/fcntl.h */
#define TB_AT_FDCWD -100

/* include/uapi/asm-generic/mman-common.h */
#define TB_PROT_EXEC 0x4

/* include/linux/sched/signal.h: signal_struct.flags, a group exit under way. */
#define TB_SIGNAL_GROUP_EXIT 0x4

/*
 * arch/x86/include/asm/page_64_types.h: THREAD_SIZE is PAGE_SIZE <<
 * THREAD_SIZE_ORDER, 16 KiB (32 KiB with KASAN, which only widens what
 * counts as the task's stack: a frame on the IRQ stack still falls out).
 */
#define TB_THREAD_SIZE 16384

/*
 * Linux 6.12, kernel/sched/features.h DELAY_DEQUEUE (kernel/sched/fair.c):
 * a task that sleeps may stay on its runqueue until its next pick, with
 * se.sched_delayed set. Before, on_rq meant runnable, and the field does
 * not exist.
 */
static __always_inline int tb_sched_delayed(struct task_struct *p)
{
	return bpf_core_field_exists(p->se.sched_delayed) &&
	       BPF_CORE_READ(p, se.sched_delayed);
}

#endif
