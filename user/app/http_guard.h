/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What keeps `trainbpf serve`'s HTTP side answering scrapes while other
 * clients misbehave (exporter.h, docs/metrics.md "HTTP side"):
 * - a deadline for each request's headers (and the TLS handshake before
 *   them): libmicrohttpd's own timeout counts from the last byte, so a
 *   client sending a byte every few seconds would hold its connection for
 *   ever. A watchdog thread shuts such a connection down;
 * - failed basic auth counted per client address (a bounded table): past
 *   a burst, that address gets 429 with no bcrypt for a while.
 */
#ifndef TB_HTTP_GUARD_H
#define TB_HTTP_GUARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define GUARD_HEADER_MS 5000	/* a scraper sends its request in one packet */
#define GUARD_TICK_MS 250	/* how often the watchdog looks */
#define GUARD_ADDRS 256		/* addresses whose failures are remembered */
#define GUARD_AUTH_BURST 10	/* failures an address may have at once... */
#define GUARD_AUTH_PER_S 1.0	/* ...and then this many a second */

struct guard_conn;

struct guard_addr {
	unsigned char ip[16];	/* IPv4 in its first 4 bytes */
	int family;		/* 0: a free row */
	double tokens;		/* failures it may still have now */
	uint64_t last_ms;	/* when tokens was last brought up to date */
};

struct guard {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stop;
	struct guard_conn *conns;	/* open connections (a list) */
	struct guard_addr addrs[GUARD_ADDRS];
};

int guard_start(struct guard *g);
void guard_stop(struct guard *g);
/* A connection opened on socket fd (MHD's NOTIFY_STARTED); *ctx is its entry. */
void guard_opened(struct guard *g, int fd, void **ctx);
/* Before its socket is closed (MHD's NOTIFY_CLOSED): no shutdown may reach it after. */
void guard_closed(struct guard *g, void **ctx);
/* Its request's headers came: no deadline until the answer is sent (guard_answered). */
void guard_busy(struct guard *g, void *ctx);
void guard_answered(struct guard *g, void *ctx);
/*
 * A bcrypt for addr, taken from its allowance before the hash runs (so
 * that 16 connections at once cannot all pass one check): false if it has
 * none left. A login that passes gives it back (guard_auth_passed).
 */
bool guard_auth_take(struct guard *g, const struct sockaddr *addr);
void guard_auth_passed(struct guard *g, const struct sockaddr *addr);

#endif
