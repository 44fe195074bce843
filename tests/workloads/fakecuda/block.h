// SPDX-License-Identifier: BSD-3-Clause
/* block.h - how the stand-ins block: spin on CLOCK_MONOTONIC, or sleep. */
#ifndef FAKECUDA_BLOCK_H
#define FAKECUDA_BLOCK_H

#include <errno.h>
#include <time.h>

struct fake_block {
	int mode;		/* FAKE_SPIN or FAKE_SLEEP */
	long long ns;
};

/*
 * Per thread, read inside the library, so after a call's entry probes and
 * before its return probes: when the latest block began, and the time
 * spent blocking so far. A workload brackets what the probes see with
 * them and its own clock reads around the call.
 */
static __thread long long fake_last_start, fake_blocked;

static inline long long fake_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void fake_block_for(struct fake_block *b)
{
	struct timespec ts = { b->ns / 1000000000LL, b->ns % 1000000000LL };
	long long start = fake_now(), end = start + b->ns;

	fake_last_start = start;
	if (b->ns <= 0)
		return;
	if (b->mode == FAKE_SLEEP) {
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	} else {
		while (fake_now() < end)
			;
	}
	fake_blocked += fake_now() - start;
}

#endif
