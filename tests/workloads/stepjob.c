// SPDX-License-Identifier: BSD-3-Clause
/*
 * stepjob.c - trainbpf test workload: a training loop on the CUDA and NCCL
 * stand-ins (fakecuda/) whose steps have a known composition, with the
 * start of every step as ground truth, to check the steps trainbpf finds
 * from the period of the calls (user/model/steps.c).
 *
 * Each epoch writes "TRAINBPF epoch N" (trainbpf_mark.h), then runs its
 * steps; after the last epoch, "TRAINBPF epoch E+1" closes it. The stand-ins
 * sleep --block-us in every sync, copy and NCCL call. Patterns (--pattern):
 *   mixed     ncclAllReduce, ncclAllReduce (no gap), 200 us,
 *             cudaStreamSynchronize, 50 us, cudaMemcpy DtoH, 1 ms,
 *             cudaEventSynchronize, then a spin of 3 to 5.5 ms that varies
 *             by step: 5 calls, 3 syncs per step;
 *   same-api  cudaStreamSynchronize three times, after 100 us and 1 ms,
 *             then the varying spin: period 3, not 1;
 *   aperiodic each "step" 5 calls drawn at random from 5 apis, each after a
 *             random gap of 20 us to 5 ms (log-uniform): no period;
 *   collectives ncclAllReduce, 200 us, ncclBroadcast, then the varying
 *             spin: 2 calls and no sync per step (a host-bound loop).
 * --markers K: also "TRAINBPF step N" every K steps, just before the step.
 * The gaps are CPU spins on CLOCK_MONOTONIC.
 *
 * Usage: stepjob --truth OUT.json [--pattern P] [--epochs E] [--steps S]
 *          [--block-us U] [--markers K] [--wait-probes MS]
 * --wait-probes: before the first call, wait until every function called
 * carries a uprobe (0xcc at its entry), then 300 ms (see gpujob.c).
 *
 * Ground truth (JSON): pid, tid, pattern, syncs_per_step (outermost sync
 * and copy calls), calls_per_step, epochs[]: {epoch, start_ns (read before
 * its marker), end_ns (read before the next epoch's marker), end_after_ns
 * (read after that write returned), end_rq_ns
 * (run_delay growth across that read and write), steps[]:
 * {start_ns (read just before the step's first call), inside_ns (read
 * inside that call by the stand-in, after its entry probes), rq_ns (how much the
 * thread's schedstat run_delay grew from just before that clock read to
 * the return of the first call: bounds a preemption between the read
 * and the entry probe)}}. CLOCK_MONOTONIC, bpf_ktime_get_ns's clock.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakecuda/fakecuda.h"
#include "workload.h"
#include "../../include/trainbpf_mark.h"

#define MAX_EPOCHS 16
#define MAX_STEPS 1000
#define COPY_BYTES 4096

enum pattern { P_MIXED, P_SAME_API, P_APERIODIC, P_COLLECTIVES };
static const char *const pattern_names[] = {
	"mixed", "same-api", "aperiodic", "collectives",
};

static void die(const char *what)
{
	fprintf(stderr, "stepjob: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "stepjob: %s\n", msg);
	exit(1);
}

struct step_truth {
	int64_t start_ns, rq_ns;
	int64_t inside_ns;	/* read inside the call (steps) or after the write (marks) */
};

struct epoch_truth {
	struct step_truth mark;	/* read before its marker; rq_ns across the write */
	struct step_truth steps[MAX_STEPS];
};

static struct {
	const char *truth;
	enum pattern pattern;
	int epochs, steps, markers;
	long long block_ns, wait_probes_ms;
} g_opt = { .epochs = 3, .steps = 40, .block_ns = 300000 };

static struct epoch_truth g_ep[MAX_EPOCHS + 1];	/* + the closing marker */
static long g_tid;
static uint64_t g_rand = 88172645463325252ull;
static ncclComm_t g_comm;

/* Dummy handles: the stand-ins only check they are not NULL. */
static char g_stream_obj, g_event_obj;
#define STREAM ((cudaStream_t)&g_stream_obj)
#define EVENT ((cudaEvent_t)&g_event_obj)
static char g_host[COPY_BYTES], g_dev[COPY_BYTES], g_buf[1 << 16];

static uint64_t next_rand(void)
{
	g_rand ^= g_rand << 13;
	g_rand ^= g_rand >> 7;
	g_rand ^= g_rand << 17;
	return g_rand;
}

static void spin_ns(int64_t ns)
{
	int64_t end = mono_ns() + ns;

	while (mono_ns() < end)
		;
}

static int64_t run_delay(void)
{
	int64_t cpu, rq;

	read_schedstat(g_tid, &cpu, &rq);
	return rq;
}

static void check(int rc, const char *what)
{
	if (rc)
		die_msg(what);
}

static void allreduce(void)
{
	check(ncclAllReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, g_comm, STREAM),
	      "ncclAllReduce");
}

static void broadcast(void)
{
	check(ncclBroadcast(g_buf, g_buf, 512, ncclInt64, 0, g_comm, STREAM), "ncclBroadcast");
}

static void stream_sync(void)
{
	check(cudaStreamSynchronize(STREAM), "cudaStreamSynchronize");
}

static void memcpy_dtoh(void)
{
	check(cudaMemcpy(g_host, g_dev, COPY_BYTES, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

static void event_sync(void)
{
	check(cudaEventSynchronize(EVENT), "cudaEventSynchronize");
}

/* The step's compute: 3 to 5.5 ms, a different length each step. */
static void compute(void)
{
	spin_ns(3000000 + next_rand() % 2500000);
}

/* The step's first call, timed for the truth. */
/*
 * The step's first call, timed for the truth: its entry probe fires
 * between start_ns and inside_ns, whatever delays it (a preemption, an
 * interrupt, the hypervisor running another vCPU).
 */
static void first_call(struct step_truth *t, void (*call)(void), long long (*inside)(void))
{
	int64_t rq0 = run_delay();

	t->start_ns = mono_ns();
	call();
	t->inside_ns = inside();
	t->rq_ns = run_delay() - rq0;
}

static void step_mixed(struct step_truth *t)
{
	first_call(t, allreduce, fakenccl_last_block_ns);
	allreduce();
	spin_ns(200000);
	stream_sync();
	spin_ns(50000);
	memcpy_dtoh();
	spin_ns(1000000);
	event_sync();
	compute();
}

static void step_same_api(struct step_truth *t)
{
	first_call(t, stream_sync, fakecuda_last_block_ns);
	spin_ns(100000);
	stream_sync();
	spin_ns(1000000);
	stream_sync();
	compute();
}

static void step_aperiodic(struct step_truth *t)
{
	static void (*const calls[])(void) = {
		allreduce, broadcast, stream_sync, memcpy_dtoh, event_sync,
	};

	t->start_ns = mono_ns();
	for (int i = 0; i < 5; i++) {
		/* log-uniform in [20 us, 5 ms] */
		double u = (next_rand() % 1000000) / 1e6;

		spin_ns((int64_t)(20000 * exp(u * log(250.0))));
		calls[next_rand() % 5]();
	}
}

/* No host-device sync: the host only queues work (and communicates). */
static void step_collectives(struct step_truth *t)
{
	first_call(t, allreduce, fakenccl_last_block_ns);
	spin_ns(200000);
	broadcast();
	compute();
}

static void run(void)
{
	static void (*const step_fn[])(struct step_truth *) = {
		step_mixed, step_same_api, step_aperiodic, step_collectives,
	};
	long n = 0;

	for (int e = 0; e <= g_opt.epochs; e++) {
		int64_t rq0 = run_delay();

		g_ep[e].mark.start_ns = mono_ns();
		trainbpf_mark_epoch(e + 1);
		g_ep[e].mark.inside_ns = mono_ns();
		g_ep[e].mark.rq_ns = run_delay() - rq0;
		for (int s = 0; e < g_opt.epochs && s < g_opt.steps; s++, n++) {
			if (g_opt.markers && n % g_opt.markers == 0)
				trainbpf_mark_step(n);
			step_fn[g_opt.pattern](&g_ep[e].steps[s]);
		}
	}
}

/* Waits until the functions called carry a uprobe (see the top). */
static void wait_probes(void)
{
	const void *fns[] = {
		(const void *)ncclAllReduce, (const void *)ncclBroadcast,
		(const void *)cudaStreamSynchronize, (const void *)cudaMemcpy,
		(const void *)cudaEventSynchronize, (const void *)cuStreamSynchronize,
		(const void *)cuMemcpyDtoH_v2, (const void *)cuEventSynchronize,
	};
	int64_t deadline = mono_ns() + g_opt.wait_probes_ms * 1000000LL;

	for (;;) {
		int missing = 0;

		for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
			missing += *(const volatile unsigned char *)fns[i] != 0xcc;
		if (!missing) {
			sleep_ns(300 * 1000000LL);
			return;
		}
		if (mono_ns() > deadline)
			die_msg("functions still without a probe");
		sleep_ns(5 * 1000000LL);
	}
}

static void write_truth(void)
{
	static const int syncs[] = { 3, 3, -1, 0 }, calls[] = { 5, 3, -1, 2 };
	char tmp[4096];
	FILE *f = truth_open(g_opt.truth, tmp, sizeof(tmp));

	fprintf(f, "{\"pid\":%d,\"tid\":%ld,\"pattern\":\"%s\",\"syncs_per_step\":%d,"
		"\"calls_per_step\":%d,\"markers\":%d,\"epochs\":[", getpid(), g_tid,
		pattern_names[g_opt.pattern], syncs[g_opt.pattern], calls[g_opt.pattern],
		g_opt.markers);
	for (int e = 0; e < g_opt.epochs; e++) {
		fprintf(f, "%s{\"epoch\":%d,\"start_ns\":%lld,\"end_ns\":%lld,"
			"\"end_after_ns\":%lld,\"end_rq_ns\":%lld,\"steps\":[", e ? "," : "",
			e + 1, (long long)g_ep[e].mark.start_ns,
			(long long)g_ep[e + 1].mark.start_ns,
			(long long)g_ep[e + 1].mark.inside_ns,
			(long long)g_ep[e + 1].mark.rq_ns);
		for (int s = 0; s < g_opt.steps; s++)
			fprintf(f, "%s{\"start_ns\":%lld,\"inside_ns\":%lld,\"rq_ns\":%lld}",
				s ? "," : "", (long long)g_ep[e].steps[s].start_ns,
				(long long)g_ep[e].steps[s].inside_ns,
				(long long)g_ep[e].steps[s].rq_ns);
		fprintf(f, "]}");
	}
	fprintf(f, "]}\n");
	truth_commit(f, tmp, g_opt.truth);
}

static long long num(const char *s, const char *opt, long long lo, long long hi)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (*end || v < lo || v > hi) {
		fprintf(stderr, "stepjob: bad %s: %s\n", opt, s);
		exit(2);
	}
	return v;
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "truth", 1, 0, 't' }, { "pattern", 1, 0, 'p' }, { "epochs", 1, 0, 'e' },
		{ "steps", 1, 0, 's' }, { "block-us", 1, 0, 'b' }, { "markers", 1, 0, 'k' },
		{ "wait-probes", 1, 0, 'w' }, { 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': g_opt.truth = optarg; break;
		case 'p':
			for (g_opt.pattern = 0; g_opt.pattern <= P_COLLECTIVES; g_opt.pattern++)
				if (!strcmp(optarg, pattern_names[g_opt.pattern]))
					break;
			if (g_opt.pattern > P_COLLECTIVES)
				die_msg("--pattern: mixed, same-api, aperiodic or collectives");
			break;
		case 'e': g_opt.epochs = num(optarg, "--epochs", 1, MAX_EPOCHS); break;
		case 's': g_opt.steps = num(optarg, "--steps", 1, MAX_STEPS); break;
		case 'b': g_opt.block_ns = num(optarg, "--block-us", 0, 1000000) * 1000; break;
		case 'k': g_opt.markers = num(optarg, "--markers", 0, MAX_STEPS); break;
		case 'w': g_opt.wait_probes_ms = num(optarg, "--wait-probes", 0, 600000); break;
		default: exit(2);
		}
	}
	if (!g_opt.truth)
		die_msg("--truth OUT.json is required");
}

int main(int argc, char **argv)
{
	int dev = 0;

	parse_args(argc, argv);
	g_tid = gettid_();
	fakecuda_set_block(FAKE_SLEEP, g_opt.block_ns);
	fakenccl_set_block(FAKE_SLEEP, g_opt.block_ns);
	check(ncclCommInitAll(&g_comm, 1, &dev), "ncclCommInitAll");
	if (g_opt.wait_probes_ms)
		wait_probes();
	run();
	check(ncclCommDestroy(g_comm), "ncclCommDestroy");
	write_truth();
	return 0;
}
