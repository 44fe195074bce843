/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf serve`'s HTTP side (libmicrohttpd, a thread per connection):
 * GET /metrics answers the text the tracer last published. A scrape copies
 * that text under a lock the tracer takes only to swap it, so no scrape
 * can hold the tracer up, and none touches the model.
 */
#ifndef TB_EXPORTER_H
#define TB_EXPORTER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "http_guard.h"

struct listener;		/* one MHD daemon and the web config it serves with */
struct web_config;

/* Daemons a SIGHUP superseded that still answer what they had accepted. */
#define EXPORTER_DRAINING 4u

struct exporter {
	struct listener *cur;	/* the daemon answering now */
	struct listener *old[EXPORTER_DRAINING];	/* superseded, answering what they accepted */
	struct guard guard;	/* deadlines, failed auth (http_guard.h) */
	pthread_mutex_t bcrypt_lock;	/* one bcrypt at a time: guesses take one core at most */
	pthread_mutex_t lock;	/* text, len, scrapes */
	char *text;
	size_t len;
	uint64_t gen;		/* texts published so far */
	char *gz;		/* a gzip'ed copy of the text of gz_gen (gzip.h), or NULL */
	size_t gzlen;
	uint64_t gz_gen;
	uint64_t scrapes;
};

/*
 * "HOST:PORT", "[V6]:PORT" or "PORT" (loopback; PORT 1-65535), with wc's
 * TLS and basic auth (the exporter's from then on; NULL: none); says where
 * it listens (one line on stderr, and a warning for every interface). -1
 * and one line if not (wc is still the caller's).
 */
int exporter_start(struct exporter *x, const char *listen, struct web_config *wc);
/*
 * The same address with another web config (the exporter's if it starts),
 * on the same listening socket: the old daemon answers until the new one
 * runs, and then what it had accepted. On failure the old one goes on (-1,
 * said); there is a listener all along.
 */
int exporter_reconfigure(struct exporter *x, const char *listen, struct web_config *wc);
/* Old daemons whose connections have all ended (or whose time is up) stop: call it often. */
void exporter_reap(struct exporter *x);
/* From now on scrapes get text (len bytes, malloc'ed; the exporter frees it). */
void exporter_publish(struct exporter *x, char *text, size_t len);
void exporter_stop(struct exporter *x);

#endif
