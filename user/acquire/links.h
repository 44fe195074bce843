/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef TB_LINKS_H
#define TB_LINKS_H

struct bpf_link;

/*
 * Destroys n links (NULL ones skipped) from several threads at once:
 * detaching a uprobe or a perf-event tracepoint waits for a grace period,
 * and waits that overlap share it.
 */
void links_destroy(struct bpf_link **links, int n);
/* The same for n link fds made without libbpf (uprobe_multi.c). */
void links_close_fds(int *fds, int n);

#endif
