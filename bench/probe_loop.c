// SPDX-License-Identifier: BSD-3-Clause
/*
 * probe_loop.c - calls one CUDA/NCCL stand-in function N times in a loop
 * and times the loop (CLOCK_MONOTONIC): what one call costs, probed or not.
 * For bench/probe_cost.sh.
 *
 *   probe_loop [-w] [-n N] [-W WARMUP] MODE...
 *
 * MODE (what one iteration calls, through the PLT, as a real job does):
 *   sync     cuStreamSynchronize (libcuda.so.1): one entry + return probe
 *   nccl     ncclAllReduce (libnccl.so.2), 1M floats: one entry + return
 *            probe that also reads count and datatype (bytes)
 *   launch   cudaLaunchKernel (libcudart.so.13), which calls the driver's
 *            cuLaunchKernel: with --launches two entry-only probes, the
 *            second one recognised as the runtime's own (return address)
 *   drvlaunch cuLaunchKernel called directly: one entry-only probe
 *   nested   cudaStreamSynchronize -> cuStreamSynchronize: two entry +
 *            return probe pairs, the inner one counted as nested
 *
 * The stand-ins (bench/standin.c) return at once, so a call costs a few
 * ns untraced and the difference traced is the probes. Modes run one
 * after the other, each WARMUP (1000) untimed calls then N (200000) timed.
 *
 * -w: first wait (up to 10 s) until every function the modes call carries
 *     a breakpoint (int3, 0xcc, as first byte: a uprobe is installed in
 *     this process), then do the handshake of probe_wait.h (wait_go) with
 *     the script, then 0.3 s more. Without it the loop could start before
 *     trainbpf has attached, or while it is still attaching.
 *
 * Prints, per mode, one line "MODE ns_per_call=X calls=C" where C counts
 * every call made to the mode's outer function (warm-up included), for
 * checking against trainbpf's own call counts.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "standin.h"
#include "probe_wait.h"

static float sendbuf[1], recvbuf[1];
static int fake_comm_obj, kernel_obj;
#define COMM ((ncclComm_t)&fake_comm_obj)	/* the stand-in only checks != NULL */
#define KERNEL ((const void *)&kernel_obj)

static int bad;		/* calls that returned an error */

static void call_sync(void) { bad |= cuStreamSynchronize(NULL); }
static void call_nccl(void)
{
	bad |= ncclAllReduce(sendbuf, recvbuf, 1 << 20, ncclFloat, ncclSum, COMM, NULL);
}
static void call_launch(void)
{
	dim3 g = { 1, 1, 1 }, b = { 128, 1, 1 };

	bad |= cudaLaunchKernel(KERNEL, g, b, NULL, 0, NULL);
}
static void call_drvlaunch(void)
{
	bad |= cuLaunchKernel((CUfunction)KERNEL, 1, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL);
}
static void call_nested(void) { bad |= cudaStreamSynchronize(NULL); }

static const struct mode {
	const char *name;
	void (*call)(void);
	const char *fn[2];	/* the functions whose probes it hits */
} modes[] = {
	{ "sync", call_sync, { "cuStreamSynchronize" } },
	{ "nccl", call_nccl, { "ncclAllReduce" } },
	{ "launch", call_launch, { "cudaLaunchKernel", "cuLaunchKernel" } },
	{ "drvlaunch", call_drvlaunch, { "cuLaunchKernel" } },
	{ "nested", call_nested, { "cudaStreamSynchronize", "cuStreamSynchronize" } },
};
#define NMODES (int)(sizeof(modes) / sizeof(modes[0]))

static const struct mode *find_mode(const char *name)
{
	for (int i = 0; i < NMODES; i++)
		if (!strcmp(modes[i].name, name))
			return &modes[i];
	return NULL;
}

int main(int argc, char **argv)
{
	long n = 200000, warm = 1000;
	int opt, wait = 0;

	while ((opt = getopt(argc, argv, "wn:W:")) != -1) {
		switch (opt) {
		case 'w': wait = 1; break;
		case 'n': n = atol(optarg); break;
		case 'W': warm = atol(optarg); break;
		default: goto usage;
		}
	}
	if (optind >= argc || n <= 0 || warm < 0)
		goto usage;
	for (int i = optind; i < argc; i++)
		if (!find_mode(argv[i])) {
			fprintf(stderr, "probe_loop: unknown mode %s\n", argv[i]);
			goto usage;
		}
	if (wait) {
		long long deadline = now_ns() + 10000000000LL;

		for (int i = optind; i < argc; i++) {
			const struct mode *m = find_mode(argv[i]);

			for (int f = 0; f < 2 && m->fn[f]; f++)
				if (wait_probe(m->fn[f], deadline))
					return 2;
		}
		if (wait_go())
			return 2;
		usleep(300000);
	}
	for (int i = optind; i < argc; i++) {
		const struct mode *m = find_mode(argv[i]);
		long long t0, t1;

		for (long k = 0; k < warm; k++)
			m->call();
		t0 = now_ns();
		for (long k = 0; k < n; k++)
			m->call();
		t1 = now_ns();
		if (bad) {
			fprintf(stderr, "probe_loop: %s: a call returned an error\n", m->name);
			return 1;
		}
		printf("%s ns_per_call=%.2f calls=%ld\n", m->name, (double)(t1 - t0) / n, n + warm);
		fflush(stdout);
	}
	return 0;
usage:
	fprintf(stderr, "usage: probe_loop [-w] [-n N] [-W WARMUP] "
		"sync|nccl|launch|drvlaunch|nested...\n");
	return 2;
}
