// SPDX-License-Identifier: BSD-3-Clause
/*
 * gpu_step.c - a synthetic training loop on the CUDA/NCCL stand-ins, at
 * the call rates of a PyTorch DDP loop on an H100, for bench/gpu_overhead.sh.
 *
 * One step (defaults: 50 ms):
 *   L kernel launches (cudaLaunchKernel, which calls the driver's
 *   cuLaunchKernel, as the real runtime does), with a fixed amount of CPU
 *   work before each (the host-side work of the framework);
 *   C ncclAllReduce calls spread over the step (gradient buckets), 25 MiB
 *   each; C alternates between -n and -n minus 1 (17.5 per step);
 *   one cudaStreamSynchronize at the end (runtime -> driver) that blocks
 *   SYNC_MS, spinning as CUDA's default does.
 *
 * The stand-ins return at once except the synchronize. The CPU work is a
 * fixed number of iterations (-k: iterations per microsecond, measured
 * once with -c by the script and given to every run), never "spin until",
 * so whatever slows the host down lengthens the step: the host-bound worst
 * case, where no GPU work absorbs it.
 *
 *   gpu_step -c                       print iterations of work per microsecond
 *   gpu_step -k K [-s STEPS] [-W WARMUP] [-t STEP_MS] [-S SYNC_MS]
 *            [-L LAUNCHES] [-n NCCL] [-w] [-l]
 *
 * -w: wait until the sync and NCCL functions carry trainbpf's uprobes (and
 * with -l the launch functions too), then do the handshake of probe_wait.h
 * with the script, before the first step.
 * Prints RESULT {"step_time_median_s": ..., "steps": ..., "calls": {...}}:
 * the median over the STEPS measured steps, and every call made to each
 * outer function, warm-up steps included, to check trainbpf's counts with.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "standin.h"
#include "probe_wait.h"

static unsigned long long work_state = 1;

static void work(long iters)
{
	unsigned long long x = work_state;

	for (long i = 0; i < iters; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
	}
	work_state = x;
}

/* Iterations per microsecond: the best of 20 runs of 10 ms or so. */
static double calibrate(void)
{
	const long iters = 10000000;
	long long best = -1;

	work(iters);
	for (int i = 0; i < 20; i++) {
		long long t0 = now_ns(), d;

		work(iters);
		d = now_ns() - t0;
		if (best < 0 || d < best)
			best = d;
	}
	return iters * 1000.0 / best;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int steps = 120, warm = 5, launches = 1250, nccl = 18, opt, wait = 0, wait_launch = 0;
	double k = 0, step_ms = 50, sync_ms = 5;
	unsigned long long n_sync = 0, n_nccl = 0, n_launch = 0;
	static float grad[1];
	static int comm_obj, kernel_obj;
	dim3 g = { 1024, 1, 1 }, b = { 256, 1, 1 };
	long long *t;
	long gap;
	int bad = 0;

	while ((opt = getopt(argc, argv, "ck:s:W:t:S:L:n:wl")) != -1) {
		switch (opt) {
		case 'c': printf("%.3f\n", calibrate()); return 0;
		case 'k': k = atof(optarg); break;
		case 's': steps = atoi(optarg); break;
		case 'W': warm = atoi(optarg); break;
		case 't': step_ms = atof(optarg); break;
		case 'S': sync_ms = atof(optarg); break;
		case 'L': launches = atoi(optarg); break;
		case 'n': nccl = atoi(optarg); break;
		case 'w': wait = 1; break;
		case 'l': wait_launch = 1; break;
		default: goto usage;
		}
	}
	if (k <= 0 || steps <= 0 || warm < 0 || launches <= 0 || nccl < 1 || sync_ms >= step_ms)
		goto usage;
	/* The CPU work: what is left of the step after the sync, before each launch. */
	gap = (long)((step_ms - sync_ms) * 1000.0 * k / launches);
	standin_set_block((long long)(sync_ms * 1e6));
	if (wait) {
		long long deadline = now_ns() + 10000000000LL;
		const char *fns[] = { "cudaStreamSynchronize", "cuStreamSynchronize",
				      "ncclAllReduce", "cudaLaunchKernel", "cuLaunchKernel" };

		for (int i = 0; i < (wait_launch ? 5 : 3); i++)
			if (wait_probe(fns[i], deadline))
				return 2;
		if (wait_go())
			return 2;
		usleep(300000);
	}
	t = calloc(steps, sizeof(*t));
	if (!t)
		return 1;
	for (int s = -warm; s < steps; s++) {
		int c = nccl - (s & 1), every = launches / c, done = 0;
		long long t0 = now_ns();

		for (int i = 0; i < launches; i++) {
			work(gap);
			bad |= cudaLaunchKernel(&kernel_obj, g, b, NULL, 0, NULL);
			n_launch++;
			if ((i + 1) % every == 0 && done < c) {
				bad |= ncclAllReduce(grad, grad, 25 << 18, ncclFloat, ncclSum,
						     (ncclComm_t)&comm_obj, NULL);
				n_nccl++;
				done++;
			}
		}
		bad |= cudaStreamSynchronize(NULL);
		n_sync++;
		if (s >= 0)
			t[s] = now_ns() - t0;
	}
	if (bad) {
		fprintf(stderr, "gpu_step: a call returned an error\n");
		return 1;
	}
	qsort(t, steps, sizeof(*t), cmp_ll);
	printf("RESULT {\"step_time_median_s\": %.9f, \"step_time_min_s\": %.9f, "
	       "\"steps\": %d, \"calls\": {\"cudaStreamSynchronize\": %llu, "
	       "\"ncclAllReduce\": %llu, \"cudaLaunchKernel\": %llu}}\n",
	       (steps % 2 ? t[steps / 2] : (t[steps / 2 - 1] + t[steps / 2]) / 2) / 1e9,
	       t[0] / 1e9, steps, n_sync, n_nccl, n_launch);
	return 0;
usage:
	fprintf(stderr, "usage: gpu_step -c | gpu_step -k ITERS_PER_US [-s STEPS] [-W WARMUP] "
		"[-t STEP_MS] [-S SYNC_MS] [-L LAUNCHES] [-n NCCL] [-w] [-l]\n");
	return 2;
}
