// SPDX-License-Identifier: BSD-3-Clause
/*
 * bottleneck.c - trainbpf test workload: a training loop with one known
 * bottleneck (or none), for the diagnosis tests. The main thread loops
 * "compute, then wait for what the mode makes it wait for", marking an
 * epoch ("TRAINBPF epoch N", trainbpf_mark.h) every --epoch-s seconds.
 *
 *   -m balanced    compute 10 ms, then take an item a forked worker made
 *                  in 2 ms of CPU (ready long before: no wait); a worker
 *                  makes an item per request and keeps 2 requested ahead
 *   -m data-cpu    compute 5 ms, take an item a worker makes in 15 ms of CPU
 *   -m data-io     compute 5 ms, take an item a worker makes in 15 ms of
 *                  O_DIRECT reads (a 64 MiB file in --dir, a disk)
 *   -m contention  compute 10 ms steps beside 3 spinning threads per CPU
 *   -m lock        take a mutex that another thread holds 8 ms of every 10
 *                  (sleeping), compute 1 ms inside, release
 *   -m leak        compute 10 ms steps; each epoch keeps --leak-mb more MiB
 *   -m ranks-slow  two ranks (exec'd, RANK=0/1 in their environment) that
 *   -m ranks-even  exchange a byte over loopback TCP after each step:
 *                  4 and 16 ms of compute (rank 1 is slow), or each 5 ms of
 *                  compute and 5 ms asleep (the GPU's part, say)
 *
 * Usage: bottleneck -m MODE -d SECONDS -o OUT.json [--epoch-s S]
 *                   [--dir DIR] [--leak-mb N]
 * Ground truth: the main loop's wall time (loop_ns), its time waiting in
 * the mode's wait (wait_ns: the read of an item, the mutex, the exchange),
 * its run time and run-queue wait (cpu_ns, rq_ns: schedstat deltas),
 * steps; ranks modes: one object per rank. RANK mode internals:
 * --rank R --fd FD --port P (rank 0 listens on FD, rank 1 connects to P).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "workload.h"
#include "../../include/trainbpf_mark.h"

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "bottleneck: %s\n", msg);
	exit(1);
}

static struct {
	const char *mode, *out, *dir;
	double duration_s, epoch_s;
	int leak_mb, rank, fd, port;
} opt = { .dir = "/var/tmp", .epoch_s = 1.0, .leak_mb = 100, .rank = -1, .fd = -1 };

struct loop {
	int64_t start, end, wait_ns, next_epoch;
	int64_t cpu0, rq0, cpu_ns, rq_ns;	/* schedstat over the loop */
	long steps, epoch;
};

static void spin_ns(int64_t ns)
{
	int64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;

	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		;
}

/* The loop's end: its wall time and schedstat deltas, once. */
static void loop_done(struct loop *l, int64_t now)
{
	if (l->end)
		return;
	l->end = now;
	read_schedstat(gettid_(), &l->cpu_ns, &l->rq_ns);
	l->cpu_ns -= l->cpu0;
	l->rq_ns -= l->rq0;
}

static bool loop_next(struct loop *l)
{
	int64_t now = mono_ns();

	if (!l->start) {
		l->start = l->next_epoch = now;
		read_schedstat(gettid_(), &l->cpu0, &l->rq0);
	}
	if (now >= l->next_epoch) {
		/* Ranks: rank 0 speaks for the job, as training scripts do. */
		if (opt.rank <= 0)
			trainbpf_mark_epoch(l->epoch + 1);
		l->epoch++;
		l->next_epoch += opt.epoch_s * NS_PER_S;
	}
	if (now - l->start >= opt.duration_s * NS_PER_S) {
		loop_done(l, now);
		return false;
	}
	l->steps++;
	return true;
}

/* --- data: a forked worker makes items, the main thread reads them --- */

static int io_fd = -1;
static char *io_buf;

static void io_setup(void)
{
	char path[512];
	size_t sz = 64 << 20;
	int fd;

	snprintf(path, sizeof(path), "%s/tb_bottleneck.%d.dat", opt.dir, getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die(path);
	if (posix_memalign((void **)&io_buf, 4096, 1 << 20))
		die_msg("out of memory");
	memset(io_buf, 7, 1 << 20);
	for (size_t off = 0; off < sz; off += 1 << 20)
		if (write(fd, io_buf, 1 << 20) != 1 << 20)
			die("write");
	fsync(fd);
	close(fd);
	io_fd = open(path, O_RDONLY | O_DIRECT);
	unlink(path);
	if (io_fd < 0)
		die("O_DIRECT open");
}

static void make_item(int64_t ns, bool io)
{
	int64_t end = mono_ns() + ns;

	if (!io) {
		spin_ns(ns);
		return;
	}
	while (mono_ns() < end)
		if (pread(io_fd, io_buf, 1 << 20, (int64_t)(rand() % 64) << 20) < 0)
			die("pread");
}

/* Makes an item per request, like a DataLoader worker with prefetching. */
static void worker(int qfd, int wfd, int64_t ns, bool io)
{
	char c = 1;

	while (read(qfd, &c, 1) == 1) {
		make_item(ns, io);
		if (write(wfd, &c, 1) != 1)
			break;
	}
	_exit(0);	/* the trainer is gone */
}

#define PREFETCH 2

static pid_t start_worker(int *rfd, int *qfd, int64_t ns, bool io)
{
	int p[2], q[2];
	pid_t pid;
	char c = 1;

	if (pipe(p) || pipe(q))
		die("pipe");
	if (io)
		io_setup();
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		close(p[0]);
		close(q[1]);
		worker(q[0], p[1], ns, io);
	}
	close(p[1]);
	close(q[0]);
	*rfd = p[0];
	*qfd = q[1];
	for (int i = 0; i < PREFETCH; i++)
		if (write(*qfd, &c, 1) != 1)
			die("write");
	return pid;
}

static void run_data(struct loop *l, int64_t compute, int64_t make, bool io)
{
	int rfd, qfd;
	pid_t w = start_worker(&rfd, &qfd, make, io);
	char c;

	while (loop_next(l)) {
		int64_t t;

		spin_ns(compute);
		t = mono_ns();
		if (read(rfd, &c, 1) != 1 || write(qfd, &c, 1) != 1)
			die_msg("the worker died");
		l->wait_ns += mono_ns() - t;
	}
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
}

/* --- contention and locks --- */

static volatile bool stop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *spinner(void *arg)
{
	while (!stop)
		;
	return arg;
}

static void *holder(void *arg)
{
	while (!stop) {
		pthread_mutex_lock(&mu);
		sleep_ns(8000000);
		pthread_mutex_unlock(&mu);
		sleep_ns(2000000);
	}
	return arg;
}

static void run_threads(struct loop *l, void *(*fn)(void *), int n)
{
	pthread_t t[64];

	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, fn, NULL);
	while (loop_next(l)) {
		int64_t w;

		if (fn == spinner) {
			spin_ns(10000000);
			continue;
		}
		w = mono_ns();
		pthread_mutex_lock(&mu);
		l->wait_ns += mono_ns() - w;
		spin_ns(1000000);
		pthread_mutex_unlock(&mu);
		sleep_ns(100000);	/* let the holder take it again */
	}
	stop = true;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* --- memory --- */

static void touch(char *p, size_t len)
{
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
}

static void run_leak(struct loop *l)
{
	long kept = 0;

	while (loop_next(l)) {
		spin_ns(10000000);
		if (l->epoch > kept) {
			size_t len = (size_t)opt.leak_mb << 20;
			char *p = malloc(len);

			if (!p)
				die_msg("out of memory");
			touch(p, len);	/* never freed: the leak */
			kept = l->epoch;
		}
	}
}

/* --- ranks --- */

static int connect_peer(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(opt.port) };
	int fd = -1, one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (opt.rank == 0)
		fd = accept(opt.fd, NULL, NULL);
	else if ((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0 &&
		 connect(fd, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	if (fd < 0)
		die("socket");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void run_rank(struct loop *l, int64_t compute, int64_t sleep)
{
	int fd = connect_peer();
	char c = 1;

	while (loop_next(l)) {
		int64_t t;

		spin_ns(compute);
		if (sleep)
			sleep_ns(sleep);	/* a GPU's share of the step */
		t = mono_ns();
		if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1) {
			/*
			 * The other rank finished first (it started its clock
			 * earlier): this loop ends here, its last wait no step's.
			 */
			loop_done(l, mono_ns());
			break;
		}
		l->wait_ns += mono_ns() - t;
	}
	close(fd);
}

static pid_t spawn_rank(int rank, int lfd, int port, const char *out)
{
	char r[16], f[16], p[16], d[32], e[32];
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid)
		return pid;
	snprintf(r, sizeof(r), "%d", rank);
	snprintf(f, sizeof(f), "%d", lfd);
	snprintf(p, sizeof(p), "%d", port);
	snprintf(d, sizeof(d), "%g", opt.duration_s);
	snprintf(e, sizeof(e), "%g", opt.epoch_s);
	setenv("RANK", r, 1);
	execl("/proc/self/exe", "bottleneck", "-m", opt.mode, "-d", d, "--epoch-s", e,
	      "-o", out, "--rank", r, "--fd", f, "--port", p, (char *)NULL);
	die("exec");
	return -1;
}

/* The launcher: a listening socket for rank 0, both ranks, their truths. */
static void run_launcher(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	char out0[512], out1[512];
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	pid_t r0, r1;
	int st0, st1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen))
		die("listen");
	snprintf(out0, sizeof(out0), "%s.rank0", opt.out);
	snprintf(out1, sizeof(out1), "%s.rank1", opt.out);
	r0 = spawn_rank(0, lfd, ntohs(a.sin_port), out0);
	r1 = spawn_rank(1, lfd, ntohs(a.sin_port), out1);
	close(lfd);
	waitpid(r0, &st0, 0);
	waitpid(r1, &st1, 0);
	if (!WIFEXITED(st0) || WEXITSTATUS(st0) || !WIFEXITED(st1) || WEXITSTATUS(st1))
		die_msg("a rank failed");
}

static void write_truth(const char *out, const struct loop *l)
{
	char tmp[512];
	FILE *f = truth_open(out, tmp, sizeof(tmp));

	fprintf(f, "{\"mode\":\"%s\",\"pid\":%d,\"rank\":%d,\"loop_ns\":%lld,"
		"\"wait_ns\":%lld,\"cpu_ns\":%lld,\"rq_ns\":%lld,\"steps\":%ld,"
		"\"epochs\":%ld}\n", opt.mode, getpid(),
		opt.rank, (long long)(l->end - l->start), (long long)l->wait_ns,
		(long long)l->cpu_ns, (long long)l->rq_ns, l->steps,
		l->epoch);
	truth_commit(f, tmp, out);
}

static void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "epoch-s", 1, 0, 'e' }, { "dir", 1, 0, 'D' }, { "leak-mb", 1, 0, 'L' },
		{ "rank", 1, 0, 'R' }, { "fd", 1, 0, 'F' }, { "port", 1, 0, 'P' }, {},
	};
	int c;

	while ((c = getopt_long(argc, argv, "m:d:o:", lo, NULL)) != -1) {
		switch (c) {
		case 'm': opt.mode = optarg; break;
		case 'd': opt.duration_s = atof(optarg); break;
		case 'o': opt.out = optarg; break;
		case 'e': opt.epoch_s = atof(optarg); break;
		case 'D': opt.dir = optarg; break;
		case 'L': opt.leak_mb = atoi(optarg); break;
		case 'R': opt.rank = atoi(optarg); break;
		case 'F': opt.fd = atoi(optarg); break;
		case 'P': opt.port = atoi(optarg); break;
		default: exit(2);
		}
	}
	if (!opt.mode || !opt.out || opt.duration_s <= 0)
		die_msg("usage: bottleneck -m MODE -d SECONDS -o OUT.json");
}

int main(int argc, char **argv)
{
	struct loop l = {};
	const char *m;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	parse(argc, argv);
	m = opt.mode;
	if (!strncmp(m, "ranks-", 6) && opt.rank < 0) {
		run_launcher();
		return 0;
	}
	if (!strcmp(m, "balanced"))
		run_data(&l, 10000000, 2000000, false);
	else if (!strcmp(m, "data-cpu"))
		run_data(&l, 5000000, 15000000, false);
	else if (!strcmp(m, "data-io"))
		run_data(&l, 5000000, 15000000, true);
	else if (!strcmp(m, "contention"))
		run_threads(&l, spinner, ncpu * 3 > 64 ? 64 : ncpu * 3);
	else if (!strcmp(m, "lock"))
		run_threads(&l, holder, 1);
	else if (!strcmp(m, "leak"))
		run_leak(&l);
	else if (!strcmp(m, "ranks-slow"))
		run_rank(&l, opt.rank == 1 ? 16000000 : 4000000, 0);
	else if (!strcmp(m, "ranks-even"))
		run_rank(&l, 5000000, 5000000);
	else
		die_msg("unknown mode");
	write_truth(opt.out, &l);
	return 0;
}
