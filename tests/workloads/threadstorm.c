/*
 * threadstorm.c - trainbpf test workload: threads and processes that live
 * a fraction of a millisecond, as a data loader or a thread pool makes
 * them, each born and dead between two of the profiler's refreshes.
 *
 * Each round the main thread forks a child that starts 4 threads, and
 * starts 8 threads itself; every thread spins about 0.1 ms and exits.
 * Rounds go on for SECONDS. Writes {"rounds":N,"threads":N} to FILE:
 * every thread it made, its own included.
 *
 * Usage: threadstorm -d SECONDS -o FILE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "workload.h"

#define CHILD_THREADS 4
#define MAIN_THREADS 8
#define SPIN_NS 100000

static void die(const char *what)
{
	fprintf(stderr, "threadstorm: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "threadstorm: %s\n", msg);
	exit(1);
}

static void *spin(void *arg)
{
	int64_t end = mono_ns() + SPIN_NS;

	(void)arg;
	while (mono_ns() < end)
		;
	return NULL;
}

/* Starts n spinning threads and waits for them all. */
static void burst(int n)
{
	pthread_t t[MAIN_THREADS];

	for (int i = 0; i < n; i++) {
		errno = pthread_create(&t[i], NULL, spin, NULL);
		if (errno)
			die("pthread_create");
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

static void round_once(void)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		burst(CHILD_THREADS);
		_exit(0);
	}
	burst(MAIN_THREADS);
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		die_msg("child failed");
}

int main(int argc, char **argv)
{
	const char *usage = "usage: threadstorm -d SECONDS -o FILE";
	const char *path = NULL;
	double secs = -1;
	long rounds = 0;
	int64_t end;
	FILE *f;
	int c;

	while ((c = getopt(argc, argv, "d:o:")) != -1) {
		if (c == 'd')
			secs = atof(optarg);
		else if (c == 'o')
			path = optarg;
		else
			die_msg(usage);
	}
	if (secs <= 0 || !path)
		die_msg(usage);
	end = mono_ns() + (int64_t)(secs * NS_PER_S);
	while (mono_ns() < end) {
		round_once();
		rounds++;
	}
	f = fopen(path, "w");
	if (!f)
		die(path);
	fprintf(f, "{\"rounds\":%ld,\"threads\":%ld}\n", rounds,
		1 + rounds * (CHILD_THREADS + MAIN_THREADS + 1));
	if (fclose(f))
		die(path);
	return 0;
}
