// SPDX-License-Identifier: BSD-3-Clause
/*
 * write_loop.c - makes one system call N times in a loop and times the
 * loop: what a write(2) (or a getpid) costs, with trainbpf's
 * sys_enter_write program attached or not. For bench/write_cost.sh.
 *
 *   write_loop [-f NULLDEV] [-n N] [-W WARMUP] MODE...
 *
 * MODE (what one iteration does):
 *   null    write(2) of 64 bytes (a log line) to a descriptor on NULLDEV
 *           (default /dev/null; opened once, fd >= 3: not stdout or stderr)
 *   stdout  the same 64 bytes to fd 1, which must be the null device too
 *   mark    write(2) of a 64-byte marker line, "TRAINBPF step K" padded
 *           with spaces, K counting up from 1, to the NULLDEV descriptor:
 *           what include/trainbpf_mark.h writes, at a fixed length
 *   getpid  syscall(SYS_getpid): a syscall that is not write(2)
 *
 * NULLDEV must be the null character device (1:3): a regular file there
 * would time a tmpfs write instead. Modes run one after the other, each WARMUP (1000) untimed calls then N
 * (1000000) timed. Prints, per mode, on stderr (stdout may be the subject):
 *   "MODE ns_per_call=X cpu_ns_per_call=Y calls=C"
 * X from CLOCK_MONOTONIC around the loop (wall time), Y from the thread's
 * CPU clock (CLOCK_THREAD_CPUTIME_ID: leaves out time this thread was not
 * running, e.g. preempted by others on a busy machine), C every call made,
 * warm-up included.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define LEN 64

static char line[LEN + 1] = "iter 000000 loss 0.1234 lr 3.0e-04 grad_norm 1.2345 tok/s 98765\n";
static char mark[LEN];
static int nullfd = -1, bad;

/* "TRAINBPF step 0000000001" + spaces + '\n': the number is updated in place. */
#define MARK_HEAD "TRAINBPF step "
#define MARK_DIGITS 10

static void mark_init(void)
{
	memset(mark, ' ', LEN);
	memcpy(mark, MARK_HEAD, sizeof(MARK_HEAD) - 1);
	memset(mark + sizeof(MARK_HEAD) - 1, '0', MARK_DIGITS);
	mark[LEN - 1] = '\n';
}

static void mark_next(void)
{
	char *d = mark + sizeof(MARK_HEAD) - 1 + MARK_DIGITS - 1;

	while (*d == '9')
		*d-- = '0';
	(*d)++;
}

static void do_null(void) { bad |= write(nullfd, line, LEN) != LEN; }
static void do_stdout(void) { bad |= write(1, line, LEN) != LEN; }
static void do_mark(void)
{
	mark_next();
	bad |= write(nullfd, mark, LEN) != LEN;
}
static void do_getpid(void) { bad |= syscall(SYS_getpid) <= 0; }

static const struct mode {
	const char *name;
	void (*call)(void);
} modes[] = {
	{ "null", do_null },
	{ "stdout", do_stdout },
	{ "mark", do_mark },
	{ "getpid", do_getpid },
};
#define NMODES (int)(sizeof(modes) / sizeof(modes[0]))

static const struct mode *find_mode(const char *name)
{
	for (int i = 0; i < NMODES; i++)
		if (!strcmp(modes[i].name, name))
			return &modes[i];
	return NULL;
}

static long long clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = 1000000, warm = 1000;
	const char *nulldev = "/dev/null";
	struct stat st;
	int opt;

	while ((opt = getopt(argc, argv, "f:n:W:")) != -1) {
		switch (opt) {
		case 'f': nulldev = optarg; break;
		case 'n': n = atol(optarg); break;
		case 'W': warm = atol(optarg); break;
		default: goto usage;
		}
	}
	if (optind >= argc || n <= 0 || warm < 0)
		goto usage;
	for (int i = optind; i < argc; i++)
		if (!find_mode(argv[i])) {
			fprintf(stderr, "write_loop: unknown mode %s\n", argv[i]);
			goto usage;
		}
	nullfd = open(nulldev, O_WRONLY | O_CLOEXEC);
	if (nullfd < 3 || fstat(nullfd, &st)) {
		perror(nulldev);
		return 1;
	}
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != 1 || minor(st.st_rdev) != 3) {
		fprintf(stderr, "write_loop: %s is not the null device (char 1:3)\n", nulldev);
		return 1;
	}
	for (int i = optind; i < argc; i++)
		if (!strcmp(argv[i], "stdout") &&
		    (fstat(1, &st) || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 1 ||
		     minor(st.st_rdev) != 3)) {
			fprintf(stderr, "write_loop: stdout is not the null device (char 1:3)\n");
			return 1;
		}
	mark_init();
	for (int i = optind; i < argc; i++) {
		const struct mode *m = find_mode(argv[i]);
		long long t0, t1, c0, c1;

		for (long k = 0; k < warm; k++)
			m->call();
		t0 = clock_ns(CLOCK_MONOTONIC);
		c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		for (long k = 0; k < n; k++)
			m->call();
		c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		t1 = clock_ns(CLOCK_MONOTONIC);
		if (bad) {
			fprintf(stderr, "write_loop: %s: a call failed\n", m->name);
			return 1;
		}
		fprintf(stderr, "%s ns_per_call=%.2f cpu_ns_per_call=%.2f calls=%ld\n", m->name,
			(double)(t1 - t0) / n, (double)(c1 - c0) / n, n + warm);
	}
	return 0;
usage:
	fprintf(stderr, "usage: write_loop [-f NULLDEV] [-n N] [-W WARMUP] "
		"null|stdout|mark|getpid...\n");
	return 2;
}
