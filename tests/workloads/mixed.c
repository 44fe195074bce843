/*
 * mixed.c - trainbpf test workload of known composition.
 *
 * Runs one thread per wait category the profiler distinguishes, so its
 * per-thread accounting can be compared against ground truth measured
 * here by the threads themselves:
 *   tb_spin   busy loop                           -> cpu
 *   tb_hog    (-c N extra spinners)               -> cpu + runqueue
 *   tb_io     O_DIRECT 1 MiB preads, random offs  -> io
 *   tb_sleep  nanosleep(20 ms) loop               -> idle
 *   tb_pipe   read() on a pipe fed by a forked
 *             child (tb_feeder, 1 byte / 50 ms)   -> data_wait
 *   tb_futex  FUTEX_WAIT_PRIVATE, woken by
 *             tb_waker every 50 ms                -> lock
 *   tb_waker  nanosleep(50 ms) + FUTEX_WAKE       -> idle
 *   tb_net    poll() on a loopback TCP socket,
 *             1 byte / 50 ms from tb_sender       -> comm
 *   tb_sender nanosleep(50 ms) + send()          -> idle
 *   tb_timeout poll() with a 20 ms timeout on a
 *             pipe that never becomes readable   -> idle
 *
 * Usage: mixed -d SECONDS -o OUT.json [-D DIR] [-c NSPIN]
 * DIR (default ".") must be disk-backed: a 64 MiB scratch file is made there
 * and removed at the end; tmpfs/ramfs and filesystems refusing O_DIRECT
 * are rejected with an error.
 *
 * Per thread: start_ns/end_ns (CLOCK_MONOTONIC, first/last instruction of
 * the thread function), cpu_ns/rq_ns (delta of fields 1 and 2 of
 * /proc/self/task/TID/schedstat), cpu_clock_ns (CLOCK_THREAD_CPUTIME_ID
 * delta, exact; schedstat of a running task can lag by up to one tick),
 * call_ns/calls (wall time in, and number of, the thread's blocking calls:
 * pread, nanosleep, read, futex wait; tb_waker counts its nanosleeps),
 * bytes (pread bytes, tb_io only).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

#define MIB (1024L * 1024L)
#define IO_FILE_SIZE (64 * MIB)
#define IO_BLOCK MIB
#define MS 1000000LL
#define FEEDER_MARGIN_NS (5 * NS_PER_S)
#define MAX_HOGS 1024

struct thr {
	const char *name;
	void *(*fn)(void *);
	pthread_t handle;
	long tid;
	int64_t start_ns, end_ns;
	int64_t cpu_ns, rq_ns, cpu_clock_ns;
	int64_t call_ns, calls, bytes;
	/* private bookkeeping */
	int64_t cpu0, rq0, clk0;
};

static pthread_barrier_t g_barrier;
static int64_t g_deadline_ns;     /* written by main before the barrier */
static int g_io_fd = -1;
static int g_pipe_rd = -1;
static atomic_int g_futex_word;
static atomic_int g_futex_done;   /* set by tb_futex when it leaves */
static char g_io_path[4096];
static int g_net_rx = -1, g_net_tx = -1;   /* loopback TCP pair */
static int g_never_rd = -1;                /* pipe nobody writes */

static void die(const char *what)
{
	fprintf(stderr, "mixed: %s: %s\n", what, strerror(errno));
	if (g_io_path[0])
		unlink(g_io_path);
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "mixed: %s\n", msg);
	if (g_io_path[0])
		unlink(g_io_path);
	exit(1);
}

/* First thing every thread does: timestamps, name, schedstat, barrier. */
static void thr_begin(struct thr *t)
{
	t->start_ns = mono_ns();
	t->tid = gettid_();
	read_schedstat(t->tid, &t->cpu0, &t->rq0);
	t->clk0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	prctl(PR_SET_NAME, t->name, 0, 0, 0);
	pthread_barrier_wait(&g_barrier);
}

/* Last thing every thread does. */
static void *thr_end(struct thr *t)
{
	int64_t cpu1, rq1;

	t->cpu_clock_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t->clk0;
	read_schedstat(t->tid, &cpu1, &rq1);
	t->cpu_ns = cpu1 - t->cpu0;
	t->rq_ns = rq1 - t->rq0;
	t->end_ns = mono_ns();
	return NULL;
}

static void *spin_main(void *arg)
{
	struct thr *t = arg;
	volatile uint64_t x = 0;

	thr_begin(t);
	while (mono_ns() < g_deadline_ns)
		for (int i = 0; i < 4096; i++)
			x = x * 6364136223846793005ULL + 1;
	return thr_end(t);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *io_main(void *arg)
{
	struct thr *t = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
	void *buf;
	int err;

	thr_begin(t);
	err = posix_memalign(&buf, 4096, IO_BLOCK);
	if (err) {
		errno = err;
		die("posix_memalign");
	}
	while (mono_ns() < g_deadline_ns) {
		off_t off = (off_t)(xorshift(&rng) % (IO_FILE_SIZE / IO_BLOCK)) * IO_BLOCK;
		int64_t t0 = mono_ns();
		ssize_t n = pread(g_io_fd, buf, IO_BLOCK, off);

		t->call_ns += mono_ns() - t0;
		t->calls++;
		if (n < 0)
			die("pread (O_DIRECT)");
		t->bytes += n;
	}
	free(buf);
	return thr_end(t);
}

static void *sleep_main(void *arg)
{
	struct thr *t = arg;

	thr_begin(t);
	while (mono_ns() < g_deadline_ns) {
		struct timespec ts = { 0, 20 * MS };
		int64_t t0 = mono_ns();

		nanosleep(&ts, NULL);
		t->call_ns += mono_ns() - t0;
		t->calls++;
	}
	return thr_end(t);
}

static void *pipe_main(void *arg)
{
	struct thr *t = arg;
	char c;

	thr_begin(t);
	while (mono_ns() < g_deadline_ns) {
		int64_t t0 = mono_ns();
		ssize_t n = read(g_pipe_rd, &c, 1);

		t->call_ns += mono_ns() - t0;
		t->calls++;
		if (n < 0 && errno != EINTR)
			die("read (pipe)");
		if (n == 0)
			die_msg("feeder closed the pipe early");
	}
	return thr_end(t);
}

static long futex(atomic_int *uaddr, int op, int val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

static void *futex_main(void *arg)
{
	struct thr *t = arg;

	thr_begin(t);
	while (mono_ns() < g_deadline_ns) {
		int seen = atomic_load(&g_futex_word);
		int64_t t0 = mono_ns();

		/* Wait until the waker bumps the word past what we saw. */
		while (atomic_load(&g_futex_word) == seen) {
			if (futex(&g_futex_word, FUTEX_WAIT_PRIVATE, seen) < 0 &&
			    errno != EAGAIN && errno != EINTR)
				die("futex wait");
			t->calls++;
		}
		t->call_ns += mono_ns() - t0;
	}
	atomic_store(&g_futex_done, 1);
	return thr_end(t);
}

/* Wakes tb_futex every 50 ms; runs until tb_futex has left its loop. */
static void *waker_main(void *arg)
{
	struct thr *t = arg;

	thr_begin(t);
	while (!atomic_load(&g_futex_done)) {
		int64_t t0 = mono_ns();

		sleep_ns(50 * MS);
		t->call_ns += mono_ns() - t0;
		t->calls++;
		atomic_fetch_add(&g_futex_word, 1);
		if (futex(&g_futex_word, FUTEX_WAKE_PRIVATE, 1) < 0)
			die("futex wake");
	}
	return thr_end(t);
}

/*
 * Waits in poll() on a loopback TCP socket: the packet's arrival (softirq,
 * not a thread) wakes it, so this is network time.
 */
static void *net_main(void *arg)
{
	struct thr *t = arg;
	struct pollfd pfd = { .fd = g_net_rx, .events = POLLIN };
	char c;

	thr_begin(t);
	while (mono_ns() < g_deadline_ns) {
		int64_t t0 = mono_ns();

		if (poll(&pfd, 1, 200) < 0 && errno != EINTR)
			die("poll (net)");
		t->call_ns += mono_ns() - t0;
		t->calls++;
		if ((pfd.revents & POLLIN) && recv(g_net_rx, &c, 1, 0) < 0)
			die("recv");
	}
	return thr_end(t);
}

/* Sends tb_net one byte every 50 ms until the deadline. */
static void *sender_main(void *arg)
{
	struct thr *t = arg;
	char c = 'x';

	thr_begin(t);
	while (mono_ns() < g_deadline_ns) {
		int64_t t0 = mono_ns();

		sleep_ns(50 * MS);
		t->call_ns += mono_ns() - t0;
		t->calls++;
		if (send(g_net_tx, &c, 1, 0) < 0)
			die("send");
	}
	return thr_end(t);
}

/* poll() that always times out: the timer wakes it, so it is idle. */
static void *timeout_main(void *arg)
{
	struct thr *t = arg;
	struct pollfd pfd = { .fd = g_never_rd, .events = POLLIN };

	thr_begin(t);
	while (mono_ns() < g_deadline_ns) {
		int64_t t0 = mono_ns();

		if (poll(&pfd, 1, 20) < 0 && errno != EINTR)
			die("poll (timeout)");
		t->call_ns += mono_ns() - t0;
		t->calls++;
	}
	return thr_end(t);
}

static void setup_net(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1, lfd, p[2];

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&a, &len))
		die("listen (loopback)");
	g_net_tx = socket(AF_INET, SOCK_STREAM, 0);
	if (g_net_tx < 0 || connect(g_net_tx, (struct sockaddr *)&a, sizeof(a)))
		die("connect (loopback)");
	g_net_rx = accept(lfd, NULL, NULL);
	if (g_net_rx < 0)
		die("accept");
	setsockopt(g_net_tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(lfd);
	if (pipe(p))
		die("pipe");
	g_never_rd = p[0];	/* p[1] stays open, unused: never readable */
}

/*
 * Refuses memory-backed filesystems: since Linux 6.6 tmpfs accepts O_DIRECT,
 * and its "direct" reads are memcpy on CPU, not I/O waits.
 */
static void check_io_dir(const char *dir)
{
	struct statfs sf;

	if (statfs(dir, &sf) != 0)
		die(dir);
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)
		die_msg("-D DIR is tmpfs/ramfs: no real I/O there; use a disk-backed dir");
}

/* Creates DIR/tb_mixed_io.XXXXXX (64 MiB, fsync'ed), opens it O_DIRECT and
 * unlinks it at once: a job killed by SIGKILL leaves no file behind, and a
 * later job that reuses its PID finds no name taken. */
static void setup_io_file(const char *dir)
{
	char *chunk = malloc(IO_BLOCK);
	uint64_t rng = 88172645463325252ULL;
	int fd;

	if (!chunk)
		die("malloc");
	check_io_dir(dir);
	snprintf(g_io_path, sizeof(g_io_path), "%s/tb_mixed_io.XXXXXX", dir);
	fd = mkostemp(g_io_path, O_CLOEXEC);
	if (fd < 0) {
		g_io_path[0] = '\0';  /* not ours: do not unlink */
		die("create io file");
	}
	for (long off = 0; off < IO_FILE_SIZE; off += IO_BLOCK) {
		for (size_t i = 0; i < IO_BLOCK / sizeof(uint64_t); i++)
			((uint64_t *)chunk)[i] = xorshift(&rng);
		if (write(fd, chunk, IO_BLOCK) != IO_BLOCK)
			die("write io file");
	}
	if (fsync(fd) != 0)
		die("fsync io file");
	close(fd);
	free(chunk);
	g_io_fd = open(g_io_path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (g_io_fd < 0 && errno == EINVAL)
		die_msg("O_DIRECT refused by the filesystem of -D DIR (tmpfs?); use a disk-backed dir");
	if (g_io_fd < 0)
		die("open io file O_DIRECT");
	if (unlink(g_io_path) != 0)
		die("unlink io file");
	g_io_path[0] = '\0';
}

/* Child: writes 1 byte every 50 ms until EPIPE or the deadline. */
static void feeder_loop(int wr, double duration_s)
{
	int64_t end = mono_ns() + (int64_t)(duration_s * NS_PER_S) + FEEDER_MARGIN_NS;

	prctl(PR_SET_NAME, "tb_feeder", 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	while (mono_ns() < end) {
		sleep_ns(50 * MS);
		if (write(wr, "x", 1) != 1)
			_exit(errno == EPIPE ? 0 : 1);
	}
	_exit(0);
}

static pid_t start_feeder(double duration_s)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		die("pipe");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(p[0]);
		if (g_io_fd >= 0)
			close(g_io_fd);
		feeder_loop(p[1], duration_s);
	}
	close(p[1]);
	g_pipe_rd = p[0];
	return pid;
}

static void write_json(const char *out, pid_t feeder, double dur,
		       const struct thr *t, int n)
{
	char tmp[4096];
	FILE *f;

	f = truth_open(out, tmp, sizeof(tmp));
	fprintf(f, "{\"pid\":%d,\"feeder_pid\":%d,\"duration_s\":%.6f,\"threads\":[",
		(int)getpid(), (int)feeder, dur);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s\n {\"tid\":%ld,\"name\":\"%s\",\"start_ns\":%lld,"
			"\"end_ns\":%lld,\"cpu_ns\":%lld,\"rq_ns\":%lld,"
			"\"cpu_clock_ns\":%lld,\"call_ns\":%lld,\"calls\":%lld,"
			"\"bytes\":%lld}",
			i ? "," : "", t[i].tid, t[i].name,
			(long long)t[i].start_ns, (long long)t[i].end_ns,
			(long long)t[i].cpu_ns, (long long)t[i].rq_ns,
			(long long)t[i].cpu_clock_ns, (long long)t[i].call_ns,
			(long long)t[i].calls, (long long)t[i].bytes);
	fprintf(f, "\n]}\n");
	truth_commit(f, tmp, out);
}

static void usage(void)
{
	fprintf(stderr, "usage: mixed -d SECONDS -o OUT.json [-D DIR] [-c NSPIN]\n");
	exit(1);
}

static void parse_args(int argc, char **argv, double *dur, const char **out,
		       const char **dir, int *nspin)
{
	int c;
	char *end;

	while ((c = getopt(argc, argv, "d:o:D:c:")) != -1) {
		switch (c) {
		case 'd':
			*dur = strtod(optarg, &end);
			if (*end || *dur <= 0)
				die_msg("-d needs a positive number of seconds");
			break;
		case 'o': *out = optarg; break;
		case 'D': *dir = optarg; break;
		case 'c':
			*nspin = (int)strtol(optarg, &end, 10);
			if (*end || *nspin < 0 || *nspin > MAX_HOGS)
				die_msg("-c needs an integer in 0..1024");
			break;
		default: usage();
		}
	}
	if (*dur <= 0 || !*out || optind != argc)
		usage();
}

int main(int argc, char **argv)
{
	static const struct { const char *name; void *(*fn)(void *); } base[] = {
		{ "tb_spin", spin_main }, { "tb_io", io_main },
		{ "tb_sleep", sleep_main }, { "tb_pipe", pipe_main },
		{ "tb_futex", futex_main }, { "tb_waker", waker_main },
		{ "tb_net", net_main }, { "tb_sender", sender_main },
		{ "tb_timeout", timeout_main },
	};
	const int nbase = sizeof(base) / sizeof(base[0]);
	double dur = 0;
	const char *out = NULL, *dir = ".";
	int nspin = 0, n, status;
	struct thr *t;
	pid_t feeder;

	parse_args(argc, argv, &dur, &out, &dir, &nspin);
	n = nbase + nspin;
	t = calloc(n, sizeof(*t));
	if (!t)
		die("calloc");
	for (int i = 0; i < n; i++) {
		t[i].name = i < nbase ? base[i].name : "tb_hog";
		t[i].fn = i < nbase ? base[i].fn : spin_main;
	}
	setup_io_file(dir);
	setup_net();
	feeder = start_feeder(dur);
	if (pthread_barrier_init(&g_barrier, NULL, n + 1) != 0)
		die_msg("pthread_barrier_init failed");
	for (int i = 0; i < n; i++) {
		errno = pthread_create(&t[i].handle, NULL, t[i].fn, &t[i]);
		if (errno)
			die("pthread_create");
	}
	g_deadline_ns = mono_ns() + (int64_t)(dur * NS_PER_S);
	pthread_barrier_wait(&g_barrier);
	for (int i = 0; i < n; i++)
		pthread_join(t[i].handle, NULL);

	close(g_pipe_rd);  /* feeder gets EPIPE and exits */
	if (waitpid(feeder, &status, 0) < 0)
		die("waitpid feeder");
	close(g_io_fd);
	write_json(out, feeder, dur, t, n);
	free(t);
	return 0;
}
