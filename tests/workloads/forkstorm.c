/*
 * forkstorm.c - trainbpf test workload: a burst of short-lived processes.
 *
 * Forks N children as fast as possible; each child _exit(0)s at once (no
 * exec). The parent keeps at most 64 children outstanding, reaping as it
 * goes, then prints "forked N". Used to overflow the profiler's
 * process-event ring buffer and check that it copes (counts drops, keeps
 * its tables consistent).
 *
 * Usage: forkstorm -n N
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_OUTSTANDING 64

static void die(const char *what)
{
	fprintf(stderr, "forkstorm: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Reaps one child; exits on error or if it did not _exit(0). */
static void reap_one(void)
{
	int status;
	pid_t pid;

	do
		pid = wait(&status);
	while (pid < 0 && errno == EINTR);
	if (pid < 0)
		die("wait");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "forkstorm: child %d did not exit 0\n", (int)pid);
		exit(1);
	}
}

/* Forks one child that exits at once; retries after reaping on EAGAIN. */
static void fork_one(long *outstanding)
{
	pid_t pid;

	for (;;) {
		pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid > 0)
			break;
		if (errno != EAGAIN || *outstanding == 0)
			die("fork");
		reap_one();
		(*outstanding)--;
	}
	(*outstanding)++;
}

static void usage(void)
{
	fprintf(stderr, "usage: forkstorm -n N\n");
	exit(1);
}

static long parse_n(int argc, char **argv)
{
	long n = -1;
	char *end;
	int c;

	while ((c = getopt(argc, argv, "n:")) != -1) {
		if (c != 'n')
			usage();
		n = strtol(optarg, &end, 10);
		if (*end || n < 0) {
			fprintf(stderr, "forkstorm: -n needs a non-negative integer\n");
			exit(1);
		}
	}
	if (n < 0 || optind != argc)
		usage();
	return n;
}

int main(int argc, char **argv)
{
	long n = parse_n(argc, argv), outstanding = 0;

	fflush(NULL);
	for (long i = 0; i < n; i++) {
		if (outstanding >= MAX_OUTSTANDING) {
			reap_one();
			outstanding--;
		}
		fork_one(&outstanding);
	}
	while (outstanding > 0) {
		reap_one();
		outstanding--;
	}
	printf("forked %ld\n", n);
	return 0;
}
