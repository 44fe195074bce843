/*
 * pingpong.c - trainbpf test workload: wakeups across CPUs, as fast as
 * they come.
 *
 * A thread (tb_ping) and a child process (tb_pong, a worker: forked, never
 * exec'd) hand one byte back and forth through two pipes for SECONDS:
 * every byte wakes the other side, tens of thousands of times a second. With two CPUs or more, each is pinned to its own CPU, so every
 * wakeup crosses CPUs, often to an idle one, and many come while the
 * wakee is still on its way to sleep. What each thread waits for is known:
 *   tb_ping  read() on a pipe fed by its worker    -> data_wait
 *   tb_pong  read() on a pipe fed by its parent    -> lock
 *
 * Usage: pingpong -d SECONDS -o OUT.json
 *
 * Per thread: start_ns/end_ns (CLOCK_MONOTONIC, the first and last
 * instruction of the thread, or of the child after fork), cpu_ns/rq_ns
 * (fields 1 and 2 of its schedstat, read last: both start from zero, at
 * the clone or the fork), calls (blocking reads) and call_ns (wall time in
 * them). The child reports through a shared page; the main thread writes
 * OUT once both are done.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "workload.h"

struct side {
	long tid;
	int64_t start_ns, end_ns, cpu_ns, rq_ns, call_ns;
	long calls;
};

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "pingpong: %s\n", msg);
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		die("sched_setaffinity");
}

/* One blocking read of one byte, timed; returns the byte. */
static char get(int fd, struct side *s)
{
	int64_t t0 = mono_ns();
	char c;

	if (read(fd, &c, 1) != 1)
		die("read");
	s->call_ns += mono_ns() - t0;
	s->calls++;
	return c;
}

static void put(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		die("write");
}

static void begin(struct side *s, const char *name)
{
	s->start_ns = mono_ns();
	s->tid = gettid_();
	if (prctl(PR_SET_NAME, name) != 0)
		die("prctl");
}

static void end(struct side *s)
{
	read_schedstat(s->tid, &s->cpu_ns, &s->rq_ns);
	s->end_ns = mono_ns();
}

static void pong(int in, int out, struct side *s)
{
	begin(s, "tb_pong");
	pin(1);
	while (get(in, s) != 'q')
		put(out, 'x');
	end(s);
}

struct ping_args {
	int in, out;
	int64_t dur_ns;
	struct side s;
};

static void *ping(void *arg)
{
	struct ping_args *a = arg;
	int64_t deadline;

	begin(&a->s, "tb_ping");
	pin(0);
	deadline = a->s.start_ns + a->dur_ns;
	do {
		put(a->out, 'x');
		get(a->in, &a->s);
	} while (mono_ns() < deadline);
	put(a->out, 'q');
	end(&a->s);
	return NULL;
}

static void side_json(FILE *f, const struct side *s, const char *name, const char *sep)
{
	fprintf(f, "  {\"tid\":%ld,\"name\":\"%s\",\"start_ns\":%lld,\"end_ns\":%lld,"
		"\"cpu_ns\":%lld,\"rq_ns\":%lld,\"calls\":%ld,\"call_ns\":%lld}%s\n",
		s->tid, name, (long long)s->start_ns, (long long)s->end_ns,
		(long long)s->cpu_ns, (long long)s->rq_ns, s->calls,
		(long long)s->call_ns, sep);
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	double dur = 0;
	int a[2], b[2], opt, status;
	struct ping_args pa = { 0 };
	struct side *shared;
	pthread_t th;
	char tmp[4096];
	pid_t child;
	FILE *f;

	while ((opt = getopt(argc, argv, "d:o:")) != -1) {
		if (opt == 'd')
			dur = atof(optarg);
		else if (opt == 'o')
			out = optarg;
		else
			die_msg("usage: pingpong -d SECONDS -o OUT.json");
	}
	if (dur <= 0 || !out)
		die_msg("usage: pingpong -d SECONDS -o OUT.json");
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		die("mmap");
	if (pipe(a) != 0 || pipe(b) != 0)
		die("pipe");
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		pong(a[0], b[1], shared);
		_exit(0);
	}
	pa.in = b[0];
	pa.out = a[1];
	pa.dur_ns = (int64_t)(dur * NS_PER_S);
	if (pthread_create(&th, NULL, ping, &pa) != 0 || pthread_join(th, NULL) != 0)
		die_msg("tb_ping failed");
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		die_msg("tb_pong failed");
	f = truth_open(out, tmp, sizeof(tmp));
	fprintf(f, "{\"pid\":%d,\"child\":%d,\"threads\":[\n", getpid(), child);
	side_json(f, &pa.s, "tb_ping", ",");
	side_json(f, shared, "tb_pong", "");
	fprintf(f, "]}\n");
	truth_commit(f, tmp, out);
	return 0;
}
