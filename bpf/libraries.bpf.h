/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * When a traced process maps the code of a library trainbpf probes, user
 * space is woken to read its maps at once. Its own looks are paced (every
 * 200 ms, and at most every 800 ms while `import torch` maps hundreds of
 * files), and a job that trains within a few hundred ms of loading libtorch
 * lost its first fetches, even its first epoch, to that pace (CI, torch
 * 1.13). mmap's entry sees the file (by its fd) and marks the thread; its
 * exit, the mapping made, wakes user space. Every other task on the machine
 * pays a pointer test per mmap; a traced one, a storage lookup (and a name
 * read per executable mapping). Syscall tracepoints, as for writes
 * (output.bpf.h).
 * Included by trainbpf.bpf.c, after state.bpf.h.
 */

#include "lib_names.bpf.h"	/* probed_name */

SEC("tracepoint/syscalls/sys_enter_mmap")
int on_mmap(struct trace_event_raw_sys_enter *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	unsigned long prot = ctx->args[2];
	int fd = (int)ctx->args[4];
	struct tb_task *tt;
	struct file *f;
	char name[16] = {};

	if (!(prot & TB_PROT_EXEC) || fd < 0 || !t->bpf_storage)
		return 0;
	tt = bpf_task_storage_get(&tasks, t, 0, 0);
	if (!tt)
		return 0;
	f = fd_file(t, fd);	/* wait_reason.bpf.h */
	if (!f)
		return 0;
	if (bpf_probe_read_kernel_str(name, sizeof(name),
				      BPF_CORE_READ(f, f_path.dentry, d_name.name)) <= 0)
		return 0;
	if (probed_name(name))
		tt->flags |= TB_TF_LIB_MAP;
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int on_mmap_done(struct trace_event_raw_sys_exit *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct tb_task *tt;

	if (!t->bpf_storage)
		return 0;
	tt = bpf_task_storage_get(&tasks, t, 0, 0);
	if (!tt || !(tt->flags & TB_TF_LIB_MAP))
		return 0;
	tt->flags &= ~TB_TF_LIB_MAP;
	/* An address, or -errno (the last page of the address space). */
	if ((unsigned long)ctx->ret >= -4095UL)
		return 0;
	emit(TB_EV_LIBRARY, t, 0, NULL);
	return 0;
}
