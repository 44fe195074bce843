// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include "snapshot.h"

const char *snap_role_name(int role)
{
	static const char *const names[] = {
		[SNAP_ROOT] = "named by -p", [SNAP_FORKED] = "forked (DataLoader worker?)",
		[SNAP_SPAWNED] = "spawned", [SNAP_CHILD] = "child",
	};

	return role >= 0 && role <= SNAP_CHILD ? names[role] : "?";
}

const char *snap_wait_words(const struct snap_thread *t)
{
	static const char *const waits[] = {
		[TB_W_OTHER] = "blocked", [TB_W_IOWAIT] = "in storage I/O",
		[TB_W_FILE] = "in a file syscall", [TB_W_SOCKET] = "on a socket",
		[TB_W_POLL] = "polling", [TB_W_FUTEX] = "on a futex",
		[TB_W_SLEEP] = "sleeping", [TB_W_PIPE] = "on a pipe or unix socket",
	};

	switch (t->state) {
	case 'R':
		return "on CPU or runnable";
	case 'D':
		return t->syscall >= 0 && t->wait <= TB_W_PIPE && t->wait != TB_W_OTHER ?
		       waits[t->wait] : "in storage I/O";
	case 'T':
	case 't':
		return "stopped";
	case 'Z':
		return "exited (zombie)";
	}
	if (t->syscall < 0)
		return "blocked (no syscall: a page fault?)";
	return t->wait <= TB_W_PIPE ? waits[t->wait] : "blocked";
}

void snapshot_free(struct snapshot *s)
{
	for (int i = 0; i < s->nprocs; i++)
		free(s->procs[i].threads);
	free(s->procs);
	memset(s, 0, sizeof(*s));
}
