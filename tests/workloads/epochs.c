/*
 * epochs.c - trainbpf test workload: epochs of known composition and
 * known boundaries, on the main thread only.
 *
 * After 0.3 s of setup (sleep), runs EPOCHS epochs of SEC seconds, each in
 * STEPS equal steps (absolute deadlines, so no drift): odd epochs spin on
 * CPU (cpu), even epochs sleep in clock_nanosleep (idle). Each epoch start
 * and each step start is announced, as --mode says:
 *   marker  trainbpf_mark_epoch(k), trainbpf_mark_step(g) (include/trainbpf_mark.h)
 *   print   printf(FMT, k, EPOCHS), a newline and fflush on stdout (FMT
 *           default "Epoch %d/%d"; --format "round %d" and the like);
 *           with -r the line is printed again at each step (same number)
 *   both    the marker, then the line
 * k is 1-based; g counts steps over the whole run from 1.
 *
 * Usage: epochs -e EPOCHS -d SEC -s STEPS -o OUT.json
 *               [--mode marker|print|both] [--format FMT] [-r]
 *
 * Ground truth (OUT.json), CLOCK_MONOTONIC ns unless said:
 *   pid, tid; mono_at_unix [mono, realtime] read together (realtime
 *   between two monotonic reads, which are averaged), to place monotonic
 *   times in the report's window (unix time);
 *   epochs[]: epoch, kind "spin"|"sleep",
 *     start_ns / mark_end_ns: the clock right before / right after the
 *       epoch's announcement (its write(2) lies between them),
 *     end_ns: the clock when its last step ended (= the next epoch's
 *       start_ns),
 *     step_start_ns[] / step_mark_end_ns[]: the same for each step marker,
 *     step_ns[]: each step from its step_start_ns to the next one's or to
 *       end_ns (marker and both modes; empty in print mode),
 *     cpu_ns, rq_ns: schedstat deltas (on CPU, run-queue wait) over the
 *       epoch, read before start_ns and before end_ns;
 *   start_unix_ns: the first epoch's start_ns in CLOCK_REALTIME (by
 *   mono_at_unix).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"
#include "../../include/trainbpf_mark.h"

#define SETUP_NS (300 * 1000000LL)
#define MAX_EPOCHS 1000
#define MAX_STEPS 1000

enum mode { MODE_MARKER = 1, MODE_PRINT = 2, MODE_BOTH = 3 };

struct epoch {
	int64_t start_ns, mark_end_ns, end_ns;
	int64_t cpu_ns, rq_ns;
	int64_t *step_start, *step_mark_end;
};

static void die(const char *what)
{
	fprintf(stderr, "epochs: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "epochs: %s\n", msg);
	exit(1);
}

static void sleep_until(int64_t t)
{
	struct timespec ts = { t / NS_PER_S, t % NS_PER_S };
	int err;

	while ((err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
		;
	if (err) {
		errno = err;
		die("clock_nanosleep");
	}
}

static void spin_until(int64_t t)
{
	volatile uint64_t x = 0;

	while (mono_ns() < t)
		for (int i = 0; i < 4096; i++)
			x = x * 6364136223846793005ULL + 1;
}

/* The epoch line, in print and both modes. */
static void print_line(const char *fmt, int k, int epochs)
{
	printf(fmt, k, epochs);
	putchar('\n');
	if (fflush(stdout) != 0)
		die("stdout");
}

static void write_ints(FILE *f, const char *key, const int64_t *v, int n)
{
	fprintf(f, ",\"%s\":[", key);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%lld", i ? "," : "", (long long)v[i]);
	fputc(']', f);
}

static void write_json(const char *out, const struct epoch *e, int n, int steps,
		       enum mode mode, int64_t mono0, int64_t unix0, int64_t start_unix)
{
	char tmp[4096];
	int64_t step_ns[MAX_STEPS];
	FILE *f;

	f = truth_open(out, tmp, sizeof(tmp));
	fprintf(f, "{\"pid\":%d,\"tid\":%ld,\"mono_at_unix\":[%lld,%lld],"
		"\"start_unix_ns\":%lld,\"epochs\":[",
		(int)getpid(), gettid_(), (long long)mono0, (long long)unix0,
		(long long)start_unix);
	for (int k = 0; k < n; k++) {
		int ns = (mode & MODE_MARKER) ? steps : 0;

		for (int i = 0; i < ns; i++)
			step_ns[i] = (i + 1 < steps ? e[k].step_start[i + 1] : e[k].end_ns)
				     - e[k].step_start[i];
		fprintf(f, "%s\n {\"epoch\":%d,\"kind\":\"%s\",\"start_ns\":%lld,"
			"\"mark_end_ns\":%lld,\"end_ns\":%lld,\"cpu_ns\":%lld,\"rq_ns\":%lld",
			k ? "," : "", k + 1, k % 2 ? "sleep" : "spin",
			(long long)e[k].start_ns, (long long)e[k].mark_end_ns,
			(long long)e[k].end_ns, (long long)e[k].cpu_ns, (long long)e[k].rq_ns);
		write_ints(f, "step_start_ns", e[k].step_start, steps);
		write_ints(f, "step_mark_end_ns", e[k].step_mark_end, steps);
		write_ints(f, "step_ns", step_ns, ns);
		fputc('}', f);
	}
	fprintf(f, "\n]}\n");
	truth_commit(f, tmp, out);
}

static void usage(void)
{
	fprintf(stderr, "usage: epochs -e EPOCHS -d SEC -s STEPS -o OUT.json "
		"[--mode marker|print|both] [--format FMT] [-r]\n");
	exit(1);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "format", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *fmt = "Epoch %d/%d";
	enum mode mode = MODE_MARKER;
	int n = 0, steps = 0, repeat = 0, c;
	int64_t mono0, unix0, start_unix = 0, t, cpu0, rq0, cpu1, rq1, step_len;
	double sec = 0;
	long tid = gettid_();
	struct epoch *e;
	char *end;
	long g = 0;

	while ((c = getopt_long(argc, argv, "e:d:s:o:m:f:r", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			n = (int)strtol(optarg, &end, 10);
			if (*end || n < 1 || n > MAX_EPOCHS)
				die_msg("-e needs an integer in 1..1000");
			break;
		case 'd':
			sec = strtod(optarg, &end);
			if (*end || sec <= 0)
				die_msg("-d needs a positive number of seconds");
			break;
		case 's':
			steps = (int)strtol(optarg, &end, 10);
			if (*end || steps < 1 || steps > MAX_STEPS)
				die_msg("-s needs an integer in 1..1000");
			break;
		case 'o': out = optarg; break;
		case 'm':
			if (!strcmp(optarg, "marker"))
				mode = MODE_MARKER;
			else if (!strcmp(optarg, "print"))
				mode = MODE_PRINT;
			else if (!strcmp(optarg, "both"))
				mode = MODE_BOTH;
			else
				die_msg("--mode needs marker, print or both");
			break;
		case 'f': fmt = optarg; break;
		case 'r': repeat = 1; break;
		default: usage();
		}
	}
	if (!n || sec <= 0 || !steps || !out || optind != argc)
		usage();
	e = calloc(n, sizeof(*e));
	if (!e)
		die("calloc");
	for (int k = 0; k < n; k++) {
		e[k].step_start = calloc(steps, sizeof(int64_t));
		e[k].step_mark_end = calloc(steps, sizeof(int64_t));
		if (!e[k].step_start || !e[k].step_mark_end)
			die("calloc");
	}
	step_len = (int64_t)(sec * NS_PER_S) / steps;

	t = mono_ns();
	unix0 = clock_ns(CLOCK_REALTIME);
	mono0 = (t + mono_ns()) / 2;
	sleep_until(t + SETUP_NS);

	read_schedstat(tid, &cpu0, &rq0);
	t = mono_ns();
	for (int k = 0; k < n; k++) {
		int spin = k % 2 == 0;

		if (k == 0)
			start_unix = unix0 + (t - mono0);
		e[k].start_ns = t;
		if (mode & MODE_MARKER)
			trainbpf_mark_epoch(k + 1);
		if (mode & MODE_PRINT)
			print_line(fmt, k + 1, n);
		e[k].mark_end_ns = mono_ns();
		for (int i = 0; i < steps; i++) {
			int64_t deadline = e[k].start_ns + (i + 1) * step_len;

			e[k].step_start[i] = mono_ns();
			if (mode & MODE_MARKER)
				trainbpf_mark_step(++g);
			if ((mode & MODE_PRINT) && repeat && i > 0)
				print_line(fmt, k + 1, n);
			e[k].step_mark_end[i] = mono_ns();
			if (spin)
				spin_until(deadline);
			else
				sleep_until(deadline);
		}
		read_schedstat(tid, &cpu1, &rq1);
		e[k].cpu_ns = cpu1 - cpu0;
		e[k].rq_ns = rq1 - rq0;
		cpu0 = cpu1;
		rq0 = rq1;
		t = mono_ns();
		e[k].end_ns = t;
	}
	write_json(out, e, n, steps, mode, mono0, unix0, start_unix);
	for (int k = 0; k < n; k++) {
		free(e[k].step_start);
		free(e[k].step_mark_end);
	}
	free(e);
	return 0;
}
