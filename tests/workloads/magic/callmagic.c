// SPDX-License-Identifier: BSD-3-Clause
/*
 * callmagic SECONDS LIB...: maps each LIB (dlopen), then calls the first
 * one's magic() every 10 ms for SECONDS. Prints "ready" once mapped, and
 * "wrong 0x..." the first time magic returns anything but 0x91919190 (a
 * byte of its code was changed: a uprobe in the wrong place). Exit 0 if
 * every call was right, 3 if not, 2 on a bad start. CALLMAGIC_TICK_MS in
 * the environment sets the period (bench/serve_hostile.py runs thousands).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAGIC 0x91919190u

int main(int argc, char **argv)
{
	unsigned int (*magic)(void) = NULL;
	struct timespec tick = { 0, 10000000 };
	const char *ms = getenv("CALLMAGIC_TICK_MS");
	int wrong = 0, calls, period = 10;

	if (argc < 3)
		return 2;
	for (int i = 2; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);

		if (!h) {
			fprintf(stderr, "callmagic: %s\n", dlerror());
			return 2;
		}
		if (!magic)
			magic = (unsigned int (*)(void))dlsym(h, "magic");
	}
	if (!magic)
		return 2;
	printf("ready\n");
	fflush(stdout);
	if (ms && atoi(ms) > 0) {
		period = atoi(ms);
		tick.tv_sec = period / 1000;
		tick.tv_nsec = (period % 1000) * 1000000L;
	}
	calls = atoi(argv[1]) * 1000 / period;
	for (int i = 0; i < calls; i++) {
		unsigned int v = magic();

		if (v != MAGIC && !wrong++) {
			printf("wrong 0x%08x\n", v);
			fflush(stdout);
		}
		nanosleep(&tick, NULL);
	}
	printf("calls %d wrong %d\n", calls, wrong);
	return wrong ? 3 : 0;
}
