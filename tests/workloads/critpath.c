/*
 * critpath.c - trainbpf test workload: a trainer-like main thread that
 * waits on a helper thread, to test critical-path attribution.
 *
 * cp_main loops: asks cp_helper (pthread condvar) for an item, waits on
 * the condvar for it, repeats until the duration passes. cp_helper makes
 * each item either
 *   -m data:    by writing a request byte to a forked child (cp_worker, no
 *               exec) and blocking in read() on a second pipe; the child
 *               sleeps 20 ms and answers with 1 byte. Main's wait is thus
 *               really a wait on another process (data_wait).
 *   -m compute: by burning 20 ms of its own CPU (CLOCK_THREAD_CPUTIME_ID).
 *               Main's wait is a wait on an on-CPU thread of ours.
 *
 * Usage: critpath -m data|compute -d SECONDS -o OUT.json
 *
 * Ground truth: main {tid, start_ns, end_ns (main loop, CLOCK_MONOTONIC),
 * wait_ns (wall time in the condvar wait), items, cpu_ns, rq_ns
 * (schedstat deltas over the loop)}; helper {tid, start_ns, end_ns,
 * cpu_ns, rq_ns (schedstat deltas over the helper's life), produce_ns
 * (wall time producing items: read() or spinning), items}; worker_pid
 * (0 in compute mode).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

#define ITEM_NS (20 * 1000000LL)

struct stats {
	long tid;
	int64_t start_ns, end_ns, cpu_ns, rq_ns, wait_ns, produce_ns, items;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv_req = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_cv_done = PTHREAD_COND_INITIALIZER;
static int g_requested, g_ready, g_stop;
static int g_data_mode;
static int g_req_wr = -1, g_data_rd = -1;   /* helper's pipe ends */
static struct stats g_main, g_helper;

static void die(const char *what)
{
	fprintf(stderr, "critpath: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "critpath: %s\n", msg);
	exit(1);
}

/* Child: answers each request byte with one byte after 20 ms. */
static void worker_loop(int req_rd, int data_wr)
{
	struct timespec ts = { 0, ITEM_NS };
	char c;

	prctl(PR_SET_NAME, "cp_worker", 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		ssize_t n = read(req_rd, &c, 1);

		if (n == 0)
			_exit(0);             /* parent closed the request pipe */
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			_exit(1);
		nanosleep(&ts, NULL);
		if (write(data_wr, "d", 1) != 1)
			_exit(errno == EPIPE ? 0 : 1);
	}
}

static pid_t start_worker(void)
{
	int req[2], data[2];
	pid_t pid;

	if (pipe2(req, O_CLOEXEC) != 0 || pipe2(data, O_CLOEXEC) != 0)
		die("pipe");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(req[1]);
		close(data[0]);
		worker_loop(req[0], data[1]);
	}
	close(req[0]);
	close(data[1]);
	g_req_wr = req[1];
	g_data_rd = data[0];
	return pid;
}

static void produce_data(void)
{
	char c;
	ssize_t n;

	if (write(g_req_wr, "r", 1) != 1)
		die("write request");
	do
		n = read(g_data_rd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die("read data");
	if (n == 0)
		die_msg("worker exited early");
}

static void produce_compute(void)
{
	int64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ITEM_NS;
	volatile uint64_t x = 1;

	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		for (int i = 0; i < 1024; i++)
			x = x * 6364136223846793005ULL + 1;
}

/* Returns 1 with a request taken, 0 when told to stop. */
static int helper_take_request(void)
{
	int got;

	pthread_mutex_lock(&g_mu);
	while (!g_requested && !g_stop)
		pthread_cond_wait(&g_cv_req, &g_mu);
	got = g_requested && !g_stop;
	g_requested = 0;
	pthread_mutex_unlock(&g_mu);
	return got;
}

static void *helper_main(void *arg)
{
	struct stats *s = &g_helper;
	int64_t cpu0, rq0, cpu1, rq1;

	(void)arg;
	s->start_ns = mono_ns();
	s->tid = gettid_();
	read_schedstat(s->tid, &cpu0, &rq0);
	prctl(PR_SET_NAME, "cp_helper", 0, 0, 0);
	while (helper_take_request()) {
		int64_t t0 = mono_ns();

		if (g_data_mode)
			produce_data();
		else
			produce_compute();
		s->produce_ns += mono_ns() - t0;
		s->items++;
		pthread_mutex_lock(&g_mu);
		g_ready = 1;
		pthread_cond_signal(&g_cv_done);
		pthread_mutex_unlock(&g_mu);
	}
	read_schedstat(s->tid, &cpu1, &rq1);
	s->cpu_ns = cpu1 - cpu0;
	s->rq_ns = rq1 - rq0;
	s->end_ns = mono_ns();
	return NULL;
}

/* The trainer loop: request an item, wait for it, repeat. */
static void main_loop(double dur)
{
	struct stats *s = &g_main;
	int64_t deadline, cpu0, rq0, cpu1, rq1;

	s->start_ns = mono_ns();
	read_schedstat(s->tid, &cpu0, &rq0);
	deadline = s->start_ns + (int64_t)(dur * NS_PER_S);
	while (mono_ns() < deadline) {
		int64_t t0;

		pthread_mutex_lock(&g_mu);
		g_requested = 1;
		pthread_cond_signal(&g_cv_req);
		t0 = mono_ns();
		while (!g_ready)
			pthread_cond_wait(&g_cv_done, &g_mu);
		s->wait_ns += mono_ns() - t0;
		g_ready = 0;
		pthread_mutex_unlock(&g_mu);
		s->items++;
	}
	read_schedstat(s->tid, &cpu1, &rq1);
	s->cpu_ns = cpu1 - cpu0;
	s->rq_ns = rq1 - rq0;
	s->end_ns = mono_ns();
}

static void write_json(const char *out, pid_t worker)
{
	const struct stats *m = &g_main, *h = &g_helper;
	char tmp[4096];
	FILE *f;

	f = truth_open(out, tmp, sizeof(tmp));
	fprintf(f, "{\"pid\":%d,\"mode\":\"%s\",\n \"main\":{\"tid\":%ld,"
		"\"name\":\"cp_main\",\"start_ns\":%lld,\"end_ns\":%lld,"
		"\"wait_ns\":%lld,\"items\":%lld,\"cpu_ns\":%lld,\"rq_ns\":%lld},\n",
		(int)getpid(), g_data_mode ? "data" : "compute", m->tid,
		(long long)m->start_ns, (long long)m->end_ns,
		(long long)m->wait_ns, (long long)m->items,
		(long long)m->cpu_ns, (long long)m->rq_ns);
	fprintf(f, " \"helper\":{\"tid\":%ld,\"name\":\"cp_helper\",\"start_ns\":%lld,"
		"\"end_ns\":%lld,\"cpu_ns\":%lld,\"rq_ns\":%lld,\"produce_ns\":%lld,"
		"\"items\":%lld},\n \"worker_pid\":%d}\n",
		h->tid, (long long)h->start_ns, (long long)h->end_ns,
		(long long)h->cpu_ns, (long long)h->rq_ns,
		(long long)h->produce_ns, (long long)h->items, (int)worker);
	truth_commit(f, tmp, out);
}

static void usage(void)
{
	fprintf(stderr, "usage: critpath -m data|compute -d SECONDS -o OUT.json\n");
	exit(1);
}

static void parse_args(int argc, char **argv, double *dur, const char **out)
{
	const char *mode = NULL;
	char *end;
	int c;

	while ((c = getopt(argc, argv, "m:d:o:")) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'o': *out = optarg; break;
		case 'd':
			*dur = strtod(optarg, &end);
			if (*end || *dur <= 0)
				die_msg("-d needs a positive number of seconds");
			break;
		default: usage();
		}
	}
	if (!mode || *dur <= 0 || !*out || optind != argc)
		usage();
	if (strcmp(mode, "data") == 0)
		g_data_mode = 1;
	else if (strcmp(mode, "compute") != 0)
		die_msg("-m must be data or compute");
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	double dur = 0;
	pid_t worker = 0;
	pthread_t helper;
	int status;

	parse_args(argc, argv, &dur, &out);
	prctl(PR_SET_NAME, "cp_main", 0, 0, 0);
	g_main.tid = gettid_();
	if (g_data_mode)
		worker = start_worker();
	errno = pthread_create(&helper, NULL, helper_main, NULL);
	if (errno)
		die("pthread_create");
	main_loop(dur);

	pthread_mutex_lock(&g_mu);
	g_stop = 1;
	pthread_cond_signal(&g_cv_req);
	pthread_mutex_unlock(&g_mu);
	pthread_join(helper, NULL);
	if (worker > 0) {
		close(g_req_wr);   /* worker sees EOF and exits */
		close(g_data_rd);
		if (waitpid(worker, &status, 0) < 0)
			die("waitpid worker");
	}
	write_json(out, worker);
	return 0;
}
