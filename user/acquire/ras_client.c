// SPDX-License-Identifier: BSD-3-Clause
/*
 * NCCL RAS queries (ras_client.h). The conversation is the one NCCL's own
 * client, ncclras, has (src/ras/client.cc): "CLIENT PROTOCOL 2" answered
 * "SERVER PROTOCOL 2", "TIMEOUT n" and "SET FORMAT json" (2.28.7 on; an
 * older server answers "ERROR: Unknown command") each answered "OK", then
 * "STATUS", whose reply runs until the server closes the connection
 * (client_support.cc, rasClientEventLoop).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "ras_client.h"
#include "procfs.h"

#define MAX_LISTENERS 64	/* sockets listening on the port, all families */
#define MAX_FDS 65536		/* a process's descriptors looked at */

struct listener {
	int family;
	unsigned char ip[16];
	unsigned long ino;
	bool owned;		/* one of the job's processes holds it */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ull + ts.tv_nsec / 1000000;
}

/* Where the job's RAS listens, from its environment (NCCL reads the same). */
static enum ras_result job_addr(pid_t pid, struct ras_addr *a, char *why, size_t len)
{
	char path[64], *env = malloc(65536);
	const char *on, *addr;
	enum ras_result r = RAS_GONE;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	if (!env || (n = procfs_read_file(path, env, 65536)) < 0) {
		snprintf(why, len, "pid %d's environment cannot be read", pid);
		goto cleanup;
	}
	on = procfs_env_get(env, n, "NCCL_RAS_ENABLE");
	addr = procfs_env_get(env, n, "NCCL_RAS_ADDR");
	if (on && !strcmp(on, "0")) {
		snprintf(why, len, "NCCL_RAS_ENABLE=0 in pid %d's environment", pid);
		r = RAS_OFF;
	} else
		r = ras_addr_parse(addr, a, why, len) ? RAS_BAD_ADDR : RAS_OK;
cleanup:
	free(env);
	return r;
}

/* A /proc/net/tcp{,6} address ("0100007F" or 32 digits: 32-bit words as the host stores them). */
static int hex_addr(const char *hex, unsigned char *ip)
{
	size_t words = strlen(hex) / 8;
	char w[9] = { 0 };

	if (words != 1 && words != 4)
		return -1;
	for (size_t i = 0; i < words; i++) {
		uint32_t v;

		memcpy(w, hex + 8 * i, 8);
		v = strtoul(w, NULL, 16);
		memcpy(ip + 4 * i, &v, 4);
	}
	return 0;
}

/* Sockets listening on port in pid's network namespace, appended to l; how many now, or -1. */
static int listeners_in(pid_t pid, const char *table, int family, int port,
			struct listener *l, int n)
{
	char path[64], line[512], hex[40];
	unsigned int lport, st;
	unsigned long ino;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, table);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT && family == AF_INET6 ? n : -1;	/* no IPv6 in the kernel */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*u %*u %lu",
			   hex, &lport, &st, &ino) == 4 && st == 0x0A && (int)lport == port &&
		    n < MAX_LISTENERS && !hex_addr(hex, l[n].ip)) {
			l[n].family = family;
			l[n].ino = ino;
			l[n++].owned = false;
		}
	fclose(f);
	return n;
}

static int listeners(pid_t pid, int port, struct listener *l)
{
	int n = listeners_in(pid, "tcp", AF_INET, port, l, 0);

	return n < 0 ? n : listeners_in(pid, "tcp6", AF_INET6, port, l, n);
}

static unsigned long netns_of(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	return stat(path, &st) ? 0 : st.st_ino;
}

/* Marks the listeners pid holds a descriptor of (socket:[inode]). */
static void mark_owned(pid_t pid, struct listener *l, int n)
{
	char path[64], link[64];
	unsigned long ino;
	struct dirent *d;
	int seen = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	if (!(dir = opendir(path)))
		return;
	while ((d = readdir(dir)) && seen++ < MAX_FDS) {
		ssize_t k = readlinkat(dirfd(dir), d->d_name, link, sizeof(link) - 1);

		if (k <= 0)
			continue;
		link[k] = 0;
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			continue;
		for (int i = 0; i < n; i++)
			if (l[i].ino == ino)
				l[i].owned = true;
	}
	closedir(dir);
}

static bool is_loopback(const struct listener *l)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (l->family == AF_INET)
		return l->ip[0] == 127;
	return !memcmp(l->ip, &in6addr_loopback, 16) ||
	       (!memcmp(l->ip, mapped, 12) && l->ip[12] == 127);
}

static bool is_any(const struct listener *l)
{
	static const unsigned char zero[16];

	return !memcmp(l->ip, zero, l->family == AF_INET ? 4 : 16);
}

/* Whether a connection to a lands on listener l. */
static bool reaches(const struct listener *l, const struct ras_addr *a)
{
	if (!a->family)		/* localhost: whichever family the job resolved it to */
		return is_loopback(l) || is_any(l);
	if (l->family != a->family)
		return false;
	return is_any(l) || !memcmp(l->ip, a->ip, a->family == AF_INET ? 4 : 16);
}

/*
 * The listener to connect to, into *to (its address: localhost is what
 * the job bound). Every socket listening on the port there must be one of
 * the job's processes' (in the same namespace as pids[0]).
 */
static enum ras_result verify(const struct ras_job *j, const struct ras_addr *a,
			      struct listener *to, char *why, size_t len)
{
	struct listener l[MAX_LISTENERS];
	unsigned long ns = netns_of(j->pids[0]);
	int n = listeners(j->pids[0], a->port, l), pick = -1;

	if (n < 0 || !ns) {
		snprintf(why, len, "pid %d's network namespace cannot be read", j->pids[0]);
		return RAS_GONE;
	}
	for (int i = 0; i < j->npids; i++)
		if (netns_of(j->pids[i]) == ns)
			mark_owned(j->pids[i], l, n);
	for (int i = 0; i < n; i++) {
		if (!l[i].owned) {
			snprintf(why, len, "socket %lu listening on port %d in pid %d's network "
				 "namespace is not the job's: not connected to", l[i].ino, a->port,
				 j->pids[0]);
			return RAS_NOT_JOBS;
		}
		if (pick < 0 && reaches(&l[i], a))
			pick = i;
	}
	if (pick < 0) {
		snprintf(why, len, "nothing listens on port %d's RAS address in pid %d's network "
			 "namespace", a->port, j->pids[0]);
		return RAS_NO_LISTENER;
	}
	*to = l[pick];
	return RAS_OK;
}

/* The listener's address, loopback for a wildcard one. */
static socklen_t sockaddr_of(const struct listener *l, const struct ras_addr *a,
			     struct sockaddr_storage *ss)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (l->family == AF_INET) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(a->port);
		if (is_any(l))
			s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else
			memcpy(&s4->sin_addr, l->ip, 4);
		return sizeof(*s4);
	}
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(a->port);
	memcpy(&s6->sin6_addr, is_any(l) ? (const void *)&in6addr_loopback : l->ip, 16);
	return sizeof(*s6);
}

/* A connection and what it has read. */
struct conn {
	int fd;
	uint64_t deadline;
	char *buf;
	size_t len, off;
	bool eof, cut;
};

/* Waits for ev on c->fd until the deadline; 0, or -1 (timed out, or an error). */
static int wait_for(struct conn *c, short ev)
{
	struct pollfd p = { .fd = c->fd, .events = ev };
	uint64_t t = now_ms();

	if (t >= c->deadline)
		return -1;
	return poll(&p, 1, c->deadline - t) == 1 ? 0 : -1;
}

static int send_all(struct conn *c, const char *s)
{
	size_t n = strlen(s), at = 0;

	while (at < n) {
		ssize_t k = send(c->fd, s + at, n - at, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k > 0)
			at += k;
		else if ((k < 0 && errno != EAGAIN && errno != EINTR) || wait_for(c, POLLOUT))
			return -1;
	}
	return 0;
}

/* More bytes into c->buf (up to RAS_REPLY_MAX); 0, or -1 (deadline). EOF sets c->eof. */
static int fill(struct conn *c)
{
	ssize_t k;

	if (c->len == RAS_REPLY_MAX) {
		c->cut = true;
		return 0;
	}
	if (wait_for(c, POLLIN))
		return -1;
	k = recv(c->fd, c->buf + c->len, RAS_REPLY_MAX - c->len, MSG_DONTWAIT);
	if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
		c->eof = true;
	else if (k > 0)
		c->len += k;
	return 0;
}

/* The next line's start (NUL-terminated in place); NULL at EOF or deadline. */
static const char *next_line(struct conn *c)
{
	char *nl;

	while (!(nl = memchr(c->buf + c->off, '\n', c->len - c->off))) {
		if (c->eof || c->cut || fill(c))
			return NULL;
	}
	*nl = 0;
	nl = c->buf + c->off;
	c->off += strlen(nl) + 1;
	return nl;
}

/* A command answered by one line; the line, or NULL. */
static const char *ask(struct conn *c, const char *cmd)
{
	return send_all(c, cmd) ? NULL : next_line(c);
}

static enum ras_result handshake(struct conn *c, bool *json, char *why, size_t len)
{
	char hello[32];
	const char *r;

	snprintf(hello, sizeof(hello), "CLIENT PROTOCOL %d\n", RAS_CLIENT_PROTOCOL);
	if (!(r = ask(c, hello)) || strncasecmp(r, "SERVER PROTOCOL ", 16)) {
		snprintf(why, len, "no SERVER PROTOCOL answer from RAS%s", r ? "" : " in time");
		return r ? RAS_PROTOCOL : RAS_TIMEOUT;
	}
	if (!(r = ask(c, "TIMEOUT 1\n")) || strcasecmp(r, "OK")) {
		snprintf(why, len, "RAS did not take TIMEOUT 1%s", r ? "" : " in time");
		return r ? RAS_PROTOCOL : RAS_TIMEOUT;
	}
	if (*json && (!(r = ask(c, "SET FORMAT json\n")) || strcasecmp(r, "OK"))) {
		if (!r) {
			snprintf(why, len, "no answer to SET FORMAT json in time");
			return RAS_TIMEOUT;
		}
		*json = false;	/* before 2.28.7: "ERROR: Unknown command" */
	}
	return RAS_OK;
}

/* The whole STATUS reply (the server closes when done), parsed into v. */
static enum ras_result status(struct conn *c, bool json, struct ras_view *v, char *why,
			      size_t len)
{
	size_t rest;

	if (send_all(c, "STATUS\n")) {
		snprintf(why, len, "RAS closed before STATUS");
		return RAS_PROTOCOL;
	}
	while (!c->eof && !c->cut)
		if (fill(c)) {
			snprintf(why, len, "RAS's reply not complete within %d ms (%zu bytes)",
				 RAS_BUDGET_MS, c->len - c->off);
			return RAS_TIMEOUT;
		}
	rest = c->len - c->off;
	if (json ? ras_parse_json(c->buf + c->off, rest, v, why, len) :
		   ras_parse_text(c->buf + c->off, rest, v, why, len))
		return c->cut ? RAS_TIMEOUT : RAS_PROTOCOL;
	v->truncated = c->cut;
	return RAS_OK;
}

/* What the thread in the job's namespace is given and gives back. */
struct visit {
	int pidfd;
	struct sockaddr_storage to;
	socklen_t tolen;
	bool json;
	struct ras_view *v;
	enum ras_result r;
	char why[200];
};

static enum ras_result connect_by(struct conn *c, const struct visit *vi, char *why, size_t len)
{
	int err = 0;
	socklen_t el = sizeof(err);

	c->fd = socket(vi->to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0 ||
	    (connect(c->fd, (const struct sockaddr *)&vi->to, vi->tolen) && errno != EINPROGRESS) ||
	    wait_for(c, POLLOUT) || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
		snprintf(why, len, "connecting to RAS failed: %s",
			 err ? strerror(err) : errno ? strerror(errno) : "timed out");
		return RAS_CONNECT;
	}
	return RAS_OK;
}

/*
 * In its own thread: setns moves this thread alone into the job's network
 * namespace, and the thread ends with the query, so no other thread of
 * the daemon ever is in it.
 */
static void *visit(void *arg)
{
	struct visit *vi = arg;
	struct conn c = { .fd = -1, .deadline = now_ms() + RAS_BUDGET_MS };

	if (setns(vi->pidfd, CLONE_NEWNET)) {
		snprintf(vi->why, sizeof(vi->why), "entering the job's network namespace: %s",
			 strerror(errno));
		vi->r = RAS_CONNECT;
		return NULL;
	}
	if (!(c.buf = malloc(RAS_REPLY_MAX + 1))) {
		snprintf(vi->why, sizeof(vi->why), "out of memory");
		vi->r = RAS_CONNECT;
		return NULL;
	}
	if ((vi->r = connect_by(&c, vi, vi->why, sizeof(vi->why))) == RAS_OK &&
	    (vi->r = handshake(&c, &vi->json, vi->why, sizeof(vi->why))) == RAS_OK)
		vi->r = status(&c, vi->json, vi->v, vi->why, sizeof(vi->why));
	if (c.fd >= 0)
		close(c.fd);
	free(c.buf);
	return NULL;
}

enum ras_result ras_query(const struct ras_job *j, struct ras_view *v, char *why, size_t len)
{
	struct visit vi = { .pidfd = -1, .json = j->json, .v = v };
	struct ras_addr a;
	struct listener to;
	enum ras_result r;
	pthread_t th;

	/* first: the process whose namespace is checked and entered cannot be another meanwhile */
	if ((vi.pidfd = syscall(SYS_pidfd_open, j->pids[0], 0)) < 0) {
		snprintf(why, len, "pid %d: %s", j->pids[0], strerror(errno));
		return RAS_GONE;
	}
	if ((r = job_addr(j->pids[0], &a, why, len)) || (r = verify(j, &a, &to, why, len)))
		goto cleanup;
	/* Still alive: what /proc/PID said above was its, not a reused pid's. */
	if (syscall(SYS_pidfd_send_signal, vi.pidfd, 0, NULL, 0)) {
		snprintf(why, len, "pid %d ended while its RAS address was checked", j->pids[0]);
		r = RAS_GONE;
		goto cleanup;
	}
	vi.tolen = sockaddr_of(&to, &a, &vi.to);
	if (pthread_create(&th, NULL, visit, &vi)) {
		snprintf(why, len, "no thread to enter the job's network namespace");
		r = RAS_CONNECT;
		goto cleanup;
	}
	pthread_join(th, NULL);
	r = vi.r;
	snprintf(why, len, "%s", vi.why);
cleanup:
	close(vi.pidfd);
	return r;
}
