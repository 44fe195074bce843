/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf serve`'s HTTP side (libmicrohttpd, in a thread of its own):
 * GET /metrics answers the text the tracer last published. A scrape copies
 * that text under a lock the tracer takes only to swap it, so no scrape
 * can hold the tracer up, and none touches the model.
 */
#ifndef TB_EXPORTER_H
#define TB_EXPORTER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Daemon;
struct web_config;

struct exporter {
	struct MHD_Daemon *d;
	const struct web_config *wc;	/* TLS, basic auth, headers; NULL: none */
	pthread_mutex_t lock;
	char *text;
	size_t len;
	uint64_t scrapes;
	/* The last user and password bcrypt passed: a scrape every second costs no hash. */
	char ok_user[128], ok_pass[128];
};

/*
 * "HOST:PORT", "[V6]:PORT" or "PORT" (loopback), with wc's TLS and basic
 * auth (the caller keeps it). -1 and one line on stderr if not.
 */
int exporter_start(struct exporter *x, const char *listen, const struct web_config *wc);
/* The same address with another web config; on failure the old one goes on (-1, said). */
int exporter_reconfigure(struct exporter *x, const char *listen, const struct web_config *wc);
/* From now on scrapes get text (len bytes, malloc'ed; the exporter frees it). */
void exporter_publish(struct exporter *x, char *text, size_t len);
void exporter_stop(struct exporter *x);

#endif
