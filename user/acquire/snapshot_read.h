/* SPDX-License-Identifier: BSD-3-Clause */
/* `trainbpf dump`: a snapshot read from /proc (model/snapshot.h). */
#ifndef TB_SNAPSHOT_READ_H
#define TB_SNAPSHOT_READ_H

#include <stddef.h>
#include <sys/types.h>
#include "snapshot.h"

/*
 * Every thread of roots[0..n) and their descendants, now. -1 and a line in
 * err if a root is not a process (or out of memory).
 */
int snapshot_take(struct snapshot *s, const pid_t *roots, int n, char *err, size_t errlen);

#endif
