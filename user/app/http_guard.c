// SPDX-License-Identifier: BSD-3-Clause
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "http_guard.h"

struct guard_conn {
	struct guard_conn *prev, *next;
	int fd;
	bool busy;		/* between its headers and its answer */
	bool cut;		/* shut down already */
	uint64_t since_ms;	/* waiting for headers since */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ull + ts.tv_nsec / 1000000;
}

/*
 * Every GUARD_TICK_MS: a connection that has waited for its headers past
 * GUARD_HEADER_MS is shut down. Under g->lock, so the socket is still the
 * connection's: MHD notifies its close (guard_closed, which takes the
 * lock) before it closes the socket.
 */
static void cut_late(struct guard *g)
{
	uint64_t now = now_ms();

	for (struct guard_conn *c = g->conns; c; c = c->next)
		if (!c->busy && !c->cut && now - c->since_ms > GUARD_HEADER_MS) {
			shutdown(c->fd, SHUT_RDWR);	/* MHD reads the end and closes */
			c->cut = true;
		}
}

static void *watchdog(void *arg)
{
	struct guard *g = arg;
	struct timespec at;

	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		cut_late(g);
		clock_gettime(CLOCK_REALTIME, &at);
		at.tv_nsec += GUARD_TICK_MS * 1000000l;
		at.tv_sec += at.tv_nsec / 1000000000l;
		at.tv_nsec %= 1000000000l;
		pthread_cond_timedwait(&g->wake, &g->lock, &at);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int guard_start(struct guard *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->wake, NULL);
	if (pthread_create(&g->thread, NULL, watchdog, g))
		return -1;
	g->running = true;
	return 0;
}

/* After the daemons have stopped: no connection is left. */
void guard_stop(struct guard *g)
{
	if (g->running) {
		pthread_mutex_lock(&g->lock);
		g->stop = true;
		pthread_cond_signal(&g->wake);
		pthread_mutex_unlock(&g->lock);
		pthread_join(g->thread, NULL);
		g->running = false;
	}
	pthread_cond_destroy(&g->wake);
	pthread_mutex_destroy(&g->lock);
}

void guard_opened(struct guard *g, int fd, void **ctx)
{
	struct guard_conn *c = calloc(1, sizeof(*c));

	*ctx = c;
	if (!c)
		return;		/* not watched: MHD's idle timeout still holds */
	c->fd = fd;
	c->since_ms = now_ms();
	pthread_mutex_lock(&g->lock);
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	pthread_mutex_unlock(&g->lock);
}

void guard_closed(struct guard *g, void **ctx)
{
	struct guard_conn *c = *ctx;

	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&g->lock);
	free(c);
	*ctx = NULL;
}

void guard_busy(struct guard *g, void *ctx)
{
	struct guard_conn *c = ctx;

	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	c->busy = true;
	pthread_mutex_unlock(&g->lock);
}

/* A kept-alive connection waits for its next request's headers from now. */
void guard_answered(struct guard *g, void *ctx)
{
	struct guard_conn *c = ctx;

	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	c->busy = false;
	c->since_ms = now_ms();
	pthread_mutex_unlock(&g->lock);
}

/* addr's IP (not its port) into ip; its family, 0 if neither IPv4 nor IPv6. */
static int addr_key(const struct sockaddr *addr, unsigned char ip[16])
{
	memset(ip, 0, 16);
	if (addr && addr->sa_family == AF_INET) {
		memcpy(ip, &((const struct sockaddr_in *)addr)->sin_addr, 4);
		return AF_INET;
	}
	if (addr && addr->sa_family == AF_INET6) {
		memcpy(ip, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
		return AF_INET6;
	}
	return 0;
}

/*
 * addr's row, brought up to date (tokens refilled); with add, a new row
 * if it has none, in place of the row least recently failed from when
 * the table is full (the least recently seen row goes). NULL: none.
 * Under g->lock.
 */
static struct guard_addr *find(struct guard *g, const struct sockaddr *addr, bool add)
{
	struct guard_addr *row = NULL, *oldest = &g->addrs[0];
	unsigned char ip[16];
	int family = addr_key(addr, ip);
	uint64_t now = now_ms();

	for (int i = 0; i < GUARD_ADDRS && !row; i++) {
		struct guard_addr *a = &g->addrs[i];

		if (a->family == family && !memcmp(a->ip, ip, 16))
			row = a;
		else if (!a->family || (oldest->family && a->last_ms < oldest->last_ms))
			oldest = a;
	}
	if (!row && add) {
		row = oldest;
		memcpy(row->ip, ip, 16);
		row->family = family;
		row->tokens = GUARD_AUTH_BURST;
		row->last_ms = now;
	}
	if (!row)
		return NULL;
	row->tokens += (now - row->last_ms) / 1000.0 * GUARD_AUTH_PER_S;
	if (row->tokens > GUARD_AUTH_BURST)
		row->tokens = GUARD_AUTH_BURST;
	row->last_ms = now;
	return row;
}

bool guard_auth_take(struct guard *g, const struct sockaddr *addr)
{
	struct guard_addr *row;
	bool ok;

	pthread_mutex_lock(&g->lock);
	row = find(g, addr, true);
	ok = row->tokens >= 1;
	if (ok)
		row->tokens -= 1;
	pthread_mutex_unlock(&g->lock);
	return ok;
}

void guard_auth_passed(struct guard *g, const struct sockaddr *addr)
{
	struct guard_addr *row;

	pthread_mutex_lock(&g->lock);
	row = find(g, addr, false);
	if (row && row->tokens + 1 <= GUARD_AUTH_BURST)
		row->tokens += 1;
	pthread_mutex_unlock(&g->lock);
}
