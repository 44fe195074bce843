/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * From BPF slots to per-thread totals at one instant: the closed intervals
 * the kernel side summed, plus the interval still open "now". Exited
 * threads are copied once, with their final totals, and their slots freed.
 */
#ifndef TB_ACCOUNT_H
#define TB_ACCOUNT_H

#include <stdint.h>
#include "tracer.h"

/*
 * Reads every slot into the job; returns the instant the totals are of,
 * taken after the reads (before: when the refresh began, for the
 * bookkeeping of exited slots).
 */
uint64_t account_refresh(struct tracer *tr, uint64_t before);

/*
 * Adds the open interval [s->since, now) of a live slot to own/cp, the way
 * BPF will close it if nothing happens before now. Threads that never
 * produced an event (UNKNOWN) are split with the kernel's schedstat instead.
 */
void account_open_interval(const struct tb_slot *s, uint64_t now,
			   uint64_t own[TB_NCAT], uint64_t cp[TB_NCAT]);
/* Same for a thread with no event yet, from schedstat deltas. */
void account_unknown(uint64_t elapsed, uint64_t dcpu, uint64_t drq,
		     unsigned int wait, uint64_t own[TB_NCAT],
		     uint64_t cp[TB_NCAT]);

#endif
