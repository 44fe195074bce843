// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <linux/bpf.h>
#include "uprobe_multi.h"

#define TB_BPF_F_UPROBE_MULTI_RETURN 1

/* union bpf_attr's link_create, as Linux 6.6 extended it. */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t um_flags;
	uint32_t pid;
};

bool uprobe_multi_supported(const char *btf_path)
{
	struct btf *btf = btf_path ? btf__parse(btf_path, NULL) : btf__load_vmlinux_btf();
	bool ok;

	if (!btf)
		return false;
	ok = btf__find_by_name_kind(btf, "bpf_uprobe_multi_link", BTF_KIND_STRUCT) > 0;
	btf__free(btf);
	return ok;
}

int uprobe_multi_attach(int prog_fd, pid_t pid, const char *path,
			const uint64_t *offs, const uint64_t *cookies, int n, bool ret)
{
	union {
		struct link_create_uprobe_multi lc;
		char bytes[128];	/* the kernel wants the rest of bpf_attr zero */
	} attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.lc.prog_fd = prog_fd;
	attr.lc.attach_type = TB_BPF_TRACE_UPROBE_MULTI;
	attr.lc.path = (uintptr_t)path;
	attr.lc.offsets = (uintptr_t)offs;
	attr.lc.cookies = (uintptr_t)cookies;
	attr.lc.cnt = n;
	attr.lc.um_flags = ret ? TB_BPF_F_UPROBE_MULTI_RETURN : 0;
	attr.lc.pid = pid;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : (int)fd;
}
