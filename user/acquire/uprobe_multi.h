/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uprobe_multi links (Linux 6.6+): many functions of one file, one link.
 * Our libbpf (Debian 12's 1.1) predates them, so this is the raw syscall.
 * Removing a perf-event uprobe waits for a grace period, one at a time
 * (~0.2 s each here: 13 s for one process's 66 probes); a multi link waits
 * once for all its functions.
 */
#ifndef TB_UPROBE_MULTI_H
#define TB_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TB_BPF_TRACE_UPROBE_MULTI 48	/* enum bpf_attach_type */

/* Does the kernel (or the BTF file given) know uprobe_multi links? */
bool uprobe_multi_supported(const char *btf_path);

/*
 * Attaches prog_fd to offs[0..n) of the file at path, in process pid only,
 * with one cookie per offset; ret: return probes. Returns the link fd, or
 * -errno.
 */
int uprobe_multi_attach(int prog_fd, pid_t pid, const char *path,
			const uint64_t *offs, const uint64_t *cookies, int n, bool ret);

#endif
