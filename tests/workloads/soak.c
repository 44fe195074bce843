/*
 * soak.c - trainbpf test workload: births at a steady rate, for as long as
 * asked, as an always-on monitor sees a node: short-lived processes forked
 * without exec (what a DataLoader worker looks like), threads of the main
 * process that come and go (a thread pool that does not keep its threads),
 * and optionally subprocesses that exec.
 *
 * Births are spread evenly over each second. A forked child spins 1 ms
 * (less if LIFE_MS is shorter) and sleeps the rest of LIFE_MS, then
 * _exit(0)s; a thread spins 0.2 ms and exits. The main thread reaps children as it goes.
 * Writes {"procs":N,"threads":N,"execs":N,"seconds":S} to FILE at the end.
 *
 * Usage: soak -d SECONDS [-p PROCS_PER_S] [-t THREADS_PER_S] [-x EXECS_PER_S]
 *             [-l LIFE_MS] [-o FILE]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "workload.h"

#define THREAD_SPIN_NS 200000
#define CHILD_SPIN_NS 1000000

static void die(const char *what)
{
	fprintf(stderr, "soak: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "soak: %s\n", msg);
	exit(1);
}

static void spin(int64_t ns)
{
	int64_t end = mono_ns() + ns;

	while (mono_ns() < end)
		;
}

static void *thread_main(void *arg)
{
	(void)arg;
	spin(THREAD_SPIN_NS);
	return NULL;
}

static void start_thread(void)
{
	pthread_attr_t a;
	pthread_t t;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	errno = pthread_create(&t, &a, thread_main, NULL);
	if (errno)
		die("pthread_create");
	pthread_attr_destroy(&a);
}

static void fork_child(int64_t life_ns, bool exec)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid)
		return;
	if (exec) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int64_t busy = life_ns < CHILD_SPIN_NS ? life_ns : CHILD_SPIN_NS;

	spin(busy);
	sleep_ns(life_ns - busy);
	_exit(0);
}

static void reap(void)
{
	int status;

	while (waitpid(-1, &status, WNOHANG) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			die_msg("a child failed");
}

struct kind {
	double rate;		/* births per second */
	long done;
};

/* Births of kind k due by elapsed time t (evenly spread). */
static long due(const struct kind *k, double t)
{
	return (long)(k->rate * t);
}

int main(int argc, char **argv)
{
	const char *usage = "usage: soak -d SECONDS [-p PROCS_PER_S] [-t THREADS_PER_S] "
			    "[-x EXECS_PER_S] [-l LIFE_MS] [-o FILE]";
	struct kind procs = { 25, 0 }, threads = { 25, 0 }, execs = { 0, 0 };
	const char *path = NULL;
	double secs = -1, life_ms = 20, t;
	int64_t start, end;
	FILE *f;
	int c;

	while ((c = getopt(argc, argv, "d:p:t:x:l:o:")) != -1) {
		if (c == 'd')
			secs = atof(optarg);
		else if (c == 'p')
			procs.rate = atof(optarg);
		else if (c == 't')
			threads.rate = atof(optarg);
		else if (c == 'x')
			execs.rate = atof(optarg);
		else if (c == 'l')
			life_ms = atof(optarg);
		else if (c == 'o')
			path = optarg;
		else
			die_msg(usage);
	}
	if (secs <= 0 || procs.rate < 0 || threads.rate < 0 || execs.rate < 0 || life_ms < 0)
		die_msg(usage);
	start = mono_ns();
	end = start + (int64_t)(secs * NS_PER_S);
	while (mono_ns() < end) {
		t = (mono_ns() - start) / (double)NS_PER_S;
		for (; procs.done < due(&procs, t); procs.done++)
			fork_child((int64_t)(life_ms * 1e6), false);
		for (; execs.done < due(&execs, t); execs.done++)
			fork_child(0, true);
		for (; threads.done < due(&threads, t); threads.done++)
			start_thread();
		reap();
		sleep_ns(NS_PER_S / 200);
	}
	while (wait(NULL) > 0)
		;
	spin(THREAD_SPIN_NS * 10);	/* the last threads end */
	if (!path)
		return 0;
	f = fopen(path, "w");
	if (!f)
		die(path);
	fprintf(f, "{\"procs\":%ld,\"threads\":%ld,\"execs\":%ld,\"seconds\":%.3f}\n",
		procs.done, threads.done, execs.done, (mono_ns() - start) / (double)NS_PER_S);
	if (fclose(f))
		die(path);
	return 0;
}
