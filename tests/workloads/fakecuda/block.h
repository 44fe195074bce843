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

static inline long long fake_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void fake_block_for(const struct fake_block *b)
{
	struct timespec ts = { b->ns / 1000000000LL, b->ns % 1000000000LL };
	long long end;

	if (b->ns <= 0)
		return;
	if (b->mode == FAKE_SLEEP) {
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		return;
	}
	end = fake_now() + b->ns;
	while (fake_now() < end)
		;
}

#endif
