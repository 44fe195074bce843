/*
 * threads.c - trainbpf benchmark workload: many context switches, little
 * CPU, to measure the profiler's per-switch overhead.
 *
 * NTHREADS threads in pairs (th_ping, th_pong) ping-pong one byte through
 * two pipes. th_ping paces each round with an absolute clock_nanosleep;
 * a round costs about 3 voluntary switches (ping's sleep, ping blocking in
 * read, pong blocking in read), so each pair runs SWITCHES_PER_SEC /
 * (3 * pairs) rounds per second. At very high rates the pacing falls
 * behind and the rate is whatever the machine manages. The result reports
 * the switches actually made, so callers should use switches/duration_s.
 *
 * Usage: threads -t NTHREADS -r SWITCHES_PER_SEC -d SECONDS
 * Prints: {"threads":N,"switches":N,"duration_s":F}
 * switches = sum over the worker threads of voluntary + involuntary
 * context switches (getrusage(RUSAGE_THREAD), read by each thread just
 * before it exits); duration_s = measured wall time of the run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL
#define SWITCHES_PER_ROUND 3
#define MAX_THREADS 4096

struct pair {
	pthread_t ping, pong;
	int ab[2];   /* ping -> pong */
	int ba[2];   /* pong -> ping */
};

static pthread_barrier_t g_barrier;
static int64_t g_deadline_ns;
static int64_t g_period_ns;
static atomic_llong g_switches;

static void die(const char *what)
{
	fprintf(stderr, "threads: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "threads: %s\n", msg);
	exit(1);
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
	struct timespec ts = { t / NS_PER_S, t % NS_PER_S };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Adds this thread's context switches to the total. */
static void count_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		die("getrusage");
	atomic_fetch_add(&g_switches, (long long)(ru.ru_nvcsw + ru.ru_nivcsw));
}

/* Reads one byte; returns 0 on EOF. */
static int read_byte(int fd)
{
	char c;
	ssize_t n;

	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die("read");
	return (int)n;
}

static void write_byte(int fd)
{
	if (write(fd, "p", 1) != 1)
		die("write");
}

static void *ping_main(void *arg)
{
	struct pair *p = arg;
	int64_t next;

	prctl(PR_SET_NAME, "th_ping", 0, 0, 0);
	pthread_barrier_wait(&g_barrier);
	next = mono_ns();
	while (mono_ns() < g_deadline_ns) {
		int64_t now = mono_ns();

		/* When saturated, do not try to catch up later in a burst. */
		next = next + g_period_ns < now ? now : next + g_period_ns;
		sleep_until(next);
		write_byte(p->ab[1]);
		if (!read_byte(p->ba[0]))
			die_msg("pong exited early");
	}
	close(p->ab[1]);   /* pong sees EOF */
	count_switches();
	return NULL;
}

static void *pong_main(void *arg)
{
	struct pair *p = arg;

	prctl(PR_SET_NAME, "th_pong", 0, 0, 0);
	pthread_barrier_wait(&g_barrier);
	while (read_byte(p->ab[0]))
		write_byte(p->ba[1]);
	count_switches();
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: threads -t NTHREADS -r SWITCHES_PER_SEC -d SECONDS\n");
	exit(1);
}

static void parse_args(int argc, char **argv, long *nthr, double *rate, double *dur)
{
	char *end;
	int c;

	while ((c = getopt(argc, argv, "t:r:d:")) != -1) {
		switch (c) {
		case 't':
			*nthr = strtol(optarg, &end, 10);
			if (*end || *nthr < 2 || *nthr % 2 || *nthr > MAX_THREADS)
				die_msg("-t needs an even number of threads in 2..4096");
			break;
		case 'r':
			*rate = strtod(optarg, &end);
			if (*end || *rate <= 0)
				die_msg("-r needs a positive rate");
			break;
		case 'd':
			*dur = strtod(optarg, &end);
			if (*end || *dur <= 0)
				die_msg("-d needs a positive number of seconds");
			break;
		default: usage();
		}
	}
	if (*nthr <= 0 || *rate <= 0 || *dur <= 0 || optind != argc)
		usage();
}

static void start_pair(struct pair *p)
{
	if (pipe(p->ab) != 0 || pipe(p->ba) != 0)
		die("pipe");
	errno = pthread_create(&p->ping, NULL, ping_main, p);
	if (errno)
		die("pthread_create");
	errno = pthread_create(&p->pong, NULL, pong_main, p);
	if (errno)
		die("pthread_create");
}

int main(int argc, char **argv)
{
	long nthr = 0, npairs;
	double rate = 0, dur = 0;
	struct pair *pairs;
	int64_t t0, t1;

	parse_args(argc, argv, &nthr, &rate, &dur);
	npairs = nthr / 2;
	g_period_ns = (int64_t)(SWITCHES_PER_ROUND * npairs * (double)NS_PER_S / rate);
	pairs = calloc(npairs, sizeof(*pairs));
	if (!pairs)
		die("calloc");
	if (pthread_barrier_init(&g_barrier, NULL, nthr + 1) != 0)
		die_msg("pthread_barrier_init failed");
	for (long i = 0; i < npairs; i++)
		start_pair(&pairs[i]);
	t0 = mono_ns();
	g_deadline_ns = t0 + (int64_t)(dur * NS_PER_S);
	pthread_barrier_wait(&g_barrier);
	for (long i = 0; i < npairs; i++) {
		pthread_join(pairs[i].ping, NULL);
		pthread_join(pairs[i].pong, NULL);
		close(pairs[i].ab[0]);
		close(pairs[i].ba[0]);
		close(pairs[i].ba[1]);
	}
	t1 = mono_ns();
	printf("{\"threads\":%ld,\"switches\":%lld,\"duration_s\":%.6f}\n",
	       nthr, (long long)atomic_load(&g_switches), (double)(t1 - t0) / NS_PER_S);
	free(pairs);
	return 0;
}
