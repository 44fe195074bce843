/*
 * workers.c - trainbpf test workload: a "training loop" fed by worker
 * processes forked without exec, as PyTorch's DataLoader does.
 *
 * After 0.3 s of setup (sleep), runs EPOCHS epochs. At each epoch's start
 * the main process forks WORKERS workers (a new generation, like a
 * DataLoader with persistent_workers=False); each worker spins STARTUP ms
 * of CPU (its start-up: imports, dataset opening), then writes ITEMS
 * 8-byte items to its own pipe, each after ITEM ms of CPU, and exits. The
 * main process reads the items round-robin (blocking reads: data_wait),
 * spins CONSUME ms on each (the step), and reaps its workers before the
 * next epoch. With --persistent the workers are forked once and feed every
 * epoch (no start-up but the first).
 *
 * Usage: workers -e EPOCHS -w WORKERS -n ITEMS -o OUT.json
 *                [--startup MS] [--item MS] [--consume MS] [--persistent]
 *
 * Ground truth (OUT.json), CLOCK_MONOTONIC ns (bpf_ktime_get_ns's clock):
 *   pid; mono_at_unix [mono, realtime] read together, as in epochs.c;
 *   gens[]: one per generation forked: fork_before_ns / fork_after_ns
 *     around its first fork(2) (the kernel's fork time lies between),
 *     pids[] of its workers;
 *   epochs[]: start_ns (the clock before the epoch's first fork, or before
 *     its first read when persistent), end_ns (after its last item was
 *     consumed and, unless persistent, its workers reaped);
 *   waits[]: every blocking read of the main process: [t0, t1, blocked]
 *     with blocked = t1 - t0 less the main thread's on-CPU (its CPU-time
 *     clock) and run-queue
 *     time over the call (schedstat): the time it was off CPU waiting;
 *   reaps[]: the same for each waitpid(2) (a worker still exiting);
 *   first_item_ns[]: per generation, from fork_before_ns to the end of the
 *     read that returned its first item.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

#define SETUP_NS (300 * 1000000LL)
#define MAX_WORKERS 64
#define MAX_EPOCHS 100

struct wait_rec {
	int64_t t0, t1, blocked;
};

struct gen {
	int64_t fork_before, fork_after, first_item;
	pid_t pids[MAX_WORKERS];
};

struct opts {
	int epochs, workers, items, persistent;
	int64_t startup_ns, item_ns, consume_ns;
	const char *out;
};

static struct wait_rec *waits, *reaps;
static int nwaits, nreaps, capwaits;
static long main_tid;

static void die(const char *what)
{
	fprintf(stderr, "workers: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "workers: %s\n", msg);
	exit(1);
}

static void spin_ns(int64_t ns)
{
	volatile uint64_t x = 0;
	int64_t end = mono_ns() + ns;

	while (mono_ns() < end)
		for (int i = 0; i < 4096; i++)
			x = x * 6364136223846793005ULL + 1;
}

/* Spins on CPU time, not wall time: start-up is work, however contended. */
static void spin_cpu_ns(int64_t ns)
{
	int64_t cpu0, rq, cpu;

	read_schedstat(gettid_(), &cpu0, &rq);
	do {
		spin_ns(1000000);
		read_schedstat(gettid_(), &cpu, &rq);
	} while (cpu - cpu0 < ns);
}

static void worker(int fd, const struct opts *o, int items)
{
	uint64_t item = 0;

	spin_cpu_ns(o->startup_ns);
	for (int i = 0; i < items; i++) {
		spin_cpu_ns(o->item_ns);
		item++;
		if (write(fd, &item, sizeof(item)) != sizeof(item))
			_exit(1);
	}
	_exit(0);
}

/*
 * On-CPU time from CLOCK_THREAD_CPUTIME_ID, which counts the running slice
 * up to the read: schedstat's first field lags by up to a tick while the
 * thread runs, which made a wait look up to a tick shorter. Run-queue
 * wait from schedstat: run_delay is settled at each pick.
 */
static struct wait_rec *record(struct wait_rec **arr, int *n, int64_t t0, int64_t t1,
			       int64_t cpu0, int64_t cpu1, int64_t rq0)
{
	int64_t rq1, ignored;

	read_schedstat(main_tid, &ignored, &rq1);
	if (*n == capwaits)
		die_msg("too many waits");
	(*arr)[*n] = (struct wait_rec){ t0, t1, (t1 - t0) - (cpu1 - cpu0) - (rq1 - rq0) };
	return &(*arr)[(*n)++];
}

/* One item from fd; returns the clock after it arrived. */
static int64_t read_item(int fd)
{
	int64_t t0, cpu0, cpu1, rq0, t1, ignored;
	uint64_t item;
	ssize_t n;

	read_schedstat(main_tid, &ignored, &rq0);
	cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	t0 = mono_ns();
	do
		n = read(fd, &item, sizeof(item));
	while (n < 0 && errno == EINTR);
	t1 = mono_ns();
	cpu1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (n != sizeof(item))
		die_msg("short read from a worker");
	record(&waits, &nwaits, t0, t1, cpu0, cpu1, rq0);
	return t1;
}

static void reap(pid_t pid)
{
	int64_t t0, t1, cpu0, cpu1, rq0, ignored;
	int st;

	read_schedstat(main_tid, &ignored, &rq0);
	cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	t0 = mono_ns();
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	t1 = mono_ns();
	cpu1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	record(&reaps, &nreaps, t0, t1, cpu0, cpu1, rq0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die_msg("a worker failed");
}

static void fork_gen(struct gen *g, int *fds, const struct opts *o, int items)
{
	for (int w = 0; w < o->workers; w++) {
		int p[2];
		int64_t before;
		pid_t pid;

		if (pipe(p))
			die("pipe");
		before = mono_ns();
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid) {
			close(p[0]);
			worker(p[1], o, items);
		}
		if (!w) {
			g->fork_before = before;
			g->fork_after = mono_ns();
		}
		close(p[1]);
		fds[w] = p[0];
		g->pids[w] = pid;
	}
}

/* Round-robin over the workers, ITEMS from each. */
static void consume(struct gen *g, const int *fds, const struct opts *o)
{
	for (int i = 0; i < o->items; i++)
		for (int w = 0; w < o->workers; w++) {
			int64_t t = read_item(fds[w]);

			if (g && !g->first_item)
				g->first_item = t - g->fork_before;
			spin_ns(o->consume_ns);
		}
}

static void write_waits(FILE *f, const char *key, const struct wait_rec *w, int n)
{
	fprintf(f, ",\"%s\":[", key);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s[%lld,%lld,%lld]", i ? "," : "", (long long)w[i].t0,
			(long long)w[i].t1, (long long)w[i].blocked);
	fputc(']', f);
}

static void write_json(const struct opts *o, const struct gen *g, int ngens,
		       const int64_t (*ep)[2], int64_t mono0, int64_t unix0)
{
	char tmp[4096];
	FILE *f = truth_open(o->out, tmp, sizeof(tmp));

	fprintf(f, "{\"pid\":%d,\"mono_at_unix\":[%lld,%lld],\"workers\":%d,\"gens\":[",
		(int)getpid(), (long long)mono0, (long long)unix0, o->workers);
	for (int i = 0; i < ngens; i++) {
		fprintf(f, "%s{\"fork_before_ns\":%lld,\"fork_after_ns\":%lld,"
			"\"first_item_ns\":%lld,\"pids\":[", i ? "," : "",
			(long long)g[i].fork_before, (long long)g[i].fork_after,
			(long long)g[i].first_item);
		for (int w = 0; w < o->workers; w++)
			fprintf(f, "%s%d", w ? "," : "", (int)g[i].pids[w]);
		fprintf(f, "]}");
	}
	fprintf(f, "],\"epochs\":[");
	for (int k = 0; k < o->epochs; k++)
		fprintf(f, "%s{\"epoch\":%d,\"start_ns\":%lld,\"end_ns\":%lld}", k ? "," : "",
			k + 1, (long long)ep[k][0], (long long)ep[k][1]);
	fputc(']', f);
	write_waits(f, "waits", waits, nwaits);
	write_waits(f, "reaps", reaps, nreaps);
	fprintf(f, "}\n");
	truth_commit(f, tmp, o->out);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "startup", required_argument, NULL, 'S' },
		{ "item", required_argument, NULL, 'I' },
		{ "consume", required_argument, NULL, 'C' },
		{ "persistent", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .startup_ns = 300000000LL, .item_ns = 1000000LL,
			    .consume_ns = 25000000LL };
	while ((c = getopt_long(argc, argv, "e:w:n:o:", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': o->epochs = atoi(optarg); break;
		case 'w': o->workers = atoi(optarg); break;
		case 'n': o->items = atoi(optarg); break;
		case 'o': o->out = optarg; break;
		case 'S': o->startup_ns = atof(optarg) * 1e6; break;
		case 'I': o->item_ns = atof(optarg) * 1e6; break;
		case 'C': o->consume_ns = atof(optarg) * 1e6; break;
		case 'P': o->persistent = 1; break;
		default: die_msg("usage: workers -e EPOCHS -w WORKERS -n ITEMS -o OUT.json "
				 "[--startup MS] [--item MS] [--consume MS] [--persistent]");
		}
	}
	if (o->epochs < 1 || o->epochs > MAX_EPOCHS || o->workers < 1 ||
	    o->workers > MAX_WORKERS || o->items < 1 || !o->out || optind != argc)
		die_msg("need -e 1..100 -w 1..64 -n >= 1 -o OUT.json");
}

int main(int argc, char **argv)
{
	static struct gen gens[MAX_EPOCHS];
	static int64_t ep[MAX_EPOCHS][2];
	int fds[MAX_WORKERS], ngens = 0;
	int64_t t, mono0, unix0;
	struct opts o;

	parse(argc, argv, &o);
	main_tid = gettid_();
	capwaits = o.epochs * o.workers * (o.items + 1) + 16;
	waits = calloc(capwaits, sizeof(*waits));
	reaps = calloc(capwaits, sizeof(*reaps));
	if (!waits || !reaps)
		die("calloc");
	t = mono_ns();
	unix0 = clock_ns(CLOCK_REALTIME);
	mono0 = (t + mono_ns()) / 2;
	sleep_ns(SETUP_NS);
	for (int k = 0; k < o.epochs; k++) {
		struct gen *g = NULL;

		ep[k][0] = mono_ns();
		if (!o.persistent || !k) {
			g = &gens[ngens++];
			fork_gen(g, fds, &o, o.persistent ? o.items * o.epochs : o.items);
		}
		consume(g, fds, &o);
		if (!o.persistent || k == o.epochs - 1)
			for (int w = 0; w < o.workers; w++) {
				close(fds[w]);
				reap(gens[ngens - 1].pids[w]);
			}
		ep[k][1] = mono_ns();
	}
	write_json(&o, gens, ngens, (const int64_t (*)[2])ep, mono0, unix0);
	free(waits);
	free(reaps);
	return 0;
}
