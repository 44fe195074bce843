// SPDX-License-Identifier: BSD-3-Clause
/*
 * probe_wait.h - for the bench programs: the clock, and waiting until
 * trainbpf's uprobes are in this process. A uprobe is a breakpoint (int3,
 * 0xcc) written over the first byte of the probed function in the traced
 * process's own copy of the page, so the process can see it.
 */
#ifndef BENCH_PROBE_WAIT_H
#define BENCH_PROBE_WAIT_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before any #include (RTLD_DEFAULT)"
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Waits until fn's first byte is a breakpoint, until deadline (ns); 0 if it is. */
static inline int wait_probe(const char *fn, long long deadline)
{
	const volatile unsigned char *p = dlsym(RTLD_DEFAULT, fn);

	if (!p) {
		fprintf(stderr, "%s not found: %s\n", fn, dlerror());
		return -1;
	}
	while (*p != 0xcc) {
		if (now_ns() > deadline) {
			fprintf(stderr, "no uprobe on %s after waiting\n", fn);
			return -1;
		}
		usleep(10000);
	}
	return 0;
}

/*
 * The handshake with the benchmark scripts (bench/gpu_lib.sh), once the
 * process has seen its probes: creates the file $BENCH_READY names, then
 * waits until the file $BENCH_GO names exists (up to 120 s; -1 if it never
 * does). The script creates it once trainbpf has stopped attaching probes,
 * so that attaching (slow: ~0.1 s a probe here, and it takes the traced
 * process's mmap lock) does not overlap the timed part. Without the
 * variables, returns at once.
 */
static inline int wait_go(void)
{
	const char *ready = getenv("BENCH_READY"), *go = getenv("BENCH_GO");
	long long deadline = now_ns() + 120000000000LL;
	FILE *f;

	if (ready && *ready) {
		f = fopen(ready, "w");
		if (!f) {
			perror(ready);
			return -1;
		}
		fclose(f);
	}
	if (!go || !*go)
		return 0;
	while (access(go, F_OK) != 0) {
		if (now_ns() > deadline) {
			fprintf(stderr, "%s never appeared\n", go);
			return -1;
		}
		usleep(10000);
	}
	return 0;
}

#endif
