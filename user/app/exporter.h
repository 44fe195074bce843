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

struct exporter {
	struct MHD_Daemon *d;
	pthread_mutex_t lock;
	char *text;
	size_t len;
	uint64_t scrapes;
};

/* "HOST:PORT", "[V6]:PORT" or "PORT" (loopback). -1 and one line on stderr if not. */
int exporter_start(struct exporter *x, const char *listen);
/* From now on scrapes get text (len bytes, malloc'ed; the exporter frees it). */
void exporter_publish(struct exporter *x, char *text, size_t len);
void exporter_stop(struct exporter *x);

#endif
