// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exporter.h"

#ifdef TB_NO_HTTP
/* The static build (Makefile): no libmicrohttpd to link statically. */
int exporter_start(struct exporter *x, const char *listen)
{
	memset(x, 0, sizeof(*x));
	fprintf(stderr, "trainbpf: serve is not in this static build (libmicrohttpd's GnuTLS has "
		"no static libraries in Debian): use the dynamic build\n");
	return -1;
}

void exporter_publish(struct exporter *x, char *text, size_t len)
{
	free(text);
}

void exporter_stop(struct exporter *x)
{
}
#else
#include <microhttpd.h>
#include <netdb.h>

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static const char index_page[] =
	"trainbpf serve: the metrics are at /metrics (docs/metrics.md)\n";

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *type,
			     void *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The published text, copied under the lock: the tracer's swap waits a memcpy at most. */
static enum MHD_Result metrics(struct exporter *x, struct MHD_Connection *c)
{
	char *copy;
	size_t len;

	pthread_mutex_lock(&x->lock);
	len = x->len;
	copy = malloc(len ? len : 1);
	if (copy && len)
		memcpy(copy, x->text, len);
	x->scrapes++;
	pthread_mutex_unlock(&x->lock);
	if (!copy)
		return MHD_NO;
	return reply(c, MHD_HTTP_OK, CONTENT_TYPE, copy, len, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_len, void **state)
{
	static const char not_found[] = "not found: the metrics are at /metrics\n";
	static const char not_allowed[] = "only GET and HEAD\n";

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", (void *)not_allowed,
			     sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
	if (!strcmp(url, "/metrics"))
		return metrics(cls, c);
	if (!strcmp(url, "/"))
		return reply(c, MHD_HTTP_OK, "text/plain", (void *)index_page,
			     sizeof(index_page) - 1, MHD_RESPMEM_PERSISTENT);
	return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", (void *)not_found,
		     sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT);
}

/* listen into host and port: "HOST:PORT", "[V6]:PORT", "PORT". */
static int split_listen(const char *listen, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(listen, ':');
	size_t n;

	if (!colon) {
		snprintf(host, hlen, "127.0.0.1");
		snprintf(port, plen, "%s", listen);
		return 0;
	}
	n = colon - listen;
	if (n >= 2 && listen[0] == '[' && listen[n - 1] == ']') {
		listen++;
		n -= 2;
	}
	if (!n || n >= hlen || !colon[1])
		return -1;
	memcpy(host, listen, n);
	host[n] = 0;
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

int exporter_start(struct exporter *x, const char *listen)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM }, *ai = NULL;
	char host[128], port[16];
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD;
	int err;

	memset(x, 0, sizeof(*x));
	pthread_mutex_init(&x->lock, NULL);
	if (split_listen(listen, host, sizeof(host), port, sizeof(port)) ||
	    (err = getaddrinfo(host, port, &hints, &ai))) {
		fprintf(stderr, "trainbpf: invalid --listen '%s' (HOST:PORT, [IPV6]:PORT or PORT, "
			"numeric)\n", listen);
		return -1;
	}
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* Few, short connections: a scraper or two, and a stuck client cut off. */
	x->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, x,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)16,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
				MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!x->d) {
		fprintf(stderr, "trainbpf: cannot listen on %s (in use, or not an address of this "
			"machine)\n", listen);
		return -1;
	}
	return 0;
}

void exporter_publish(struct exporter *x, char *text, size_t len)
{
	char *old;

	pthread_mutex_lock(&x->lock);
	old = x->text;
	x->text = text;
	x->len = len;
	pthread_mutex_unlock(&x->lock);
	free(old);
}

void exporter_stop(struct exporter *x)
{
	if (x->d)
		MHD_stop_daemon(x->d);
	x->d = NULL;
	free(x->text);
	x->text = NULL;
	pthread_mutex_destroy(&x->lock);
}
#endif
