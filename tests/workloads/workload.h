/*
 * workload.h - helpers shared by trainbpf's C test workloads: clocks and
 * the thread's own schedstat, the ground truth each workload reports.
 * Each workload defines die() and die_msg() (how it fails and cleans up).
 */
#ifndef WORKLOAD_H
#define WORKLOAD_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL

static void die(const char *what);
static void die_msg(const char *msg);

static int64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static inline int64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static inline void sleep_ns(int64_t ns)
{
	struct timespec ts = { ns / NS_PER_S, ns % NS_PER_S };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static inline long gettid_(void)
{
	return syscall(SYS_gettid);
}

/* Reads run time and run-queue wait (ns) of thread tid. */
static inline void read_schedstat(long tid, int64_t *cpu, int64_t *rq)
{
	char path[64], buf[128];
	long long a = 0, b = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		die(path);
	buf[n] = '\0';
	if (sscanf(buf, "%lld %lld", &a, &b) != 2)
		die_msg("cannot parse schedstat");
	*cpu = a;
	*rq = b;
}

/*
 * Ground truth goes to OUT.tmp and is renamed to OUT once complete, so a
 * test never reads half a file.
 */
static inline FILE *truth_open(const char *out, char *tmp, size_t len)
{
	FILE *f;

	snprintf(tmp, len, "%s.tmp", out);
	f = fopen(tmp, "w");
	if (!f)
		die(tmp);
	return f;
}

static inline void truth_commit(FILE *f, const char *tmp, const char *out)
{
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)
		die(tmp);
	if (fclose(f) != 0)
		die(tmp);
	if (rename(tmp, out) != 0)
		die("rename output");
}

#endif
