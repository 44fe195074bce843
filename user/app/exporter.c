// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exporter.h"

#ifdef TB_NO_HTTP
/* The static build (Makefile): no libmicrohttpd to link statically. */
int exporter_start(struct exporter *x, const char *listen, const struct web_config *wc)
{
	memset(x, 0, sizeof(*x));
	fprintf(stderr, "trainbpf: serve is not in this static build (libmicrohttpd's GnuTLS has "
		"no static libraries in Debian): use the dynamic build\n");
	return -1;
}

int exporter_reconfigure(struct exporter *x, const char *listen, const struct web_config *wc)
{
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
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include "web_config.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static const char index_page[] =
	"trainbpf serve: the metrics are at /metrics (docs/metrics.md)\n";

static void add_headers(const struct exporter *x, struct MHD_Response *r, const char *type)
{
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	for (int i = 0; x->wc && i < x->wc->nheaders; i++)
		MHD_add_response_header(r, x->wc->headers[i][0], x->wc->headers[i][1]);
}

static enum MHD_Result reply(const struct exporter *x, struct MHD_Connection *c,
			     unsigned int status, const char *type, void *body, size_t len,
			     enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	add_headers(x, r, type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The client's certificate, when the config wants one: signed by its CA. */
static bool client_verified(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	unsigned int status = 0;

	return ci && ci->tls_session &&
	       gnutls_certificate_verify_peers2(ci->tls_session, &status) == GNUTLS_E_SUCCESS &&
	       !status;
}

/* basic_auth_users: the user and password, checked by bcrypt unless they just passed. */
static bool authorized(struct exporter *x, struct MHD_Connection *c)
{
	char *pass = NULL, *user = MHD_basic_auth_get_username_password(c, &pass);
	bool ok = false;

	if (user && pass) {
		ok = x->ok_user[0] && !strcmp(user, x->ok_user) && !strcmp(pass, x->ok_pass);
		if (!ok && (ok = web_config_check(x->wc, user, pass)) &&
		    strlen(user) < sizeof(x->ok_user) && strlen(pass) < sizeof(x->ok_pass)) {
			snprintf(x->ok_user, sizeof(x->ok_user), "%s", user);
			snprintf(x->ok_pass, sizeof(x->ok_pass), "%s", pass);
		}
	}
	MHD_free(user);
	MHD_free(pass);
	return ok;
}

static enum MHD_Result unauthorized(struct exporter *x, struct MHD_Connection *c)
{
	static const char body[] = "unauthorized\n";
	struct MHD_Response *r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body,
								 MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	add_headers(x, r, "text/plain");
	ret = MHD_queue_basic_auth_fail_response(c, "trainbpf", r);
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
	return reply(x, c, MHD_HTTP_OK, CONTENT_TYPE, copy, len, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_len, void **state)
{
	static const char not_found[] = "not found: the metrics are at /metrics\n";
	static const char not_allowed[] = "only GET and HEAD\n";
	static const char no_cert[] = "a client certificate signed by client_ca_file is needed\n";
	struct exporter *x = cls;

	if (x->wc && x->wc->client_ca_pem && !client_verified(c))
		return reply(x, c, MHD_HTTP_FORBIDDEN, "text/plain", (void *)no_cert,
			     sizeof(no_cert) - 1, MHD_RESPMEM_PERSISTENT);
	if (x->wc && x->wc->nusers && !authorized(x, c))
		return unauthorized(x, c);
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(x, c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", (void *)not_allowed,
			     sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
	if (!strcmp(url, "/metrics"))
		return metrics(x, c);
	if (!strcmp(url, "/"))
		return reply(x, c, MHD_HTTP_OK, "text/plain", (void *)index_page,
			     sizeof(index_page) - 1, MHD_RESPMEM_PERSISTENT);
	return reply(x, c, MHD_HTTP_NOT_FOUND, "text/plain", (void *)not_found,
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

/* MHD on listen with x->wc; NULL and one line on stderr if it cannot. */
static struct MHD_Daemon *listen_on(struct exporter *x, const char *listen)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM }, *ai = NULL;
	const struct web_config *wc = x->wc;
	char host[128], port[16];
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD;
	struct MHD_OptionItem tls[] = {
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, wc ? wc->key_pem : NULL },
		{ MHD_OPTION_HTTPS_MEM_CERT, 0, wc ? wc->cert_pem : NULL },
		{ MHD_OPTION_HTTPS_PRIORITIES, 0, wc ? (void *)wc->priorities : NULL },
		{ wc && wc->client_ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0,
		  wc ? wc->client_ca_pem : NULL },
		{ MHD_OPTION_END, 0, NULL },
	};
	struct MHD_Daemon *d;

	if (split_listen(listen, host, sizeof(host), port, sizeof(port)) ||
	    getaddrinfo(host, port, &hints, &ai)) {
		fprintf(stderr, "trainbpf: invalid --listen '%s' (HOST:PORT, [IPV6]:PORT or PORT, "
			"numeric)\n", listen);
		return NULL;
	}
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (wc && wc->tls)
		flags |= MHD_USE_TLS;
	/* Few, short connections: a scraper or two, and a stuck client cut off. */
	d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, x,
			     MHD_OPTION_SOCK_ADDR, ai->ai_addr,
			     MHD_OPTION_CONNECTION_LIMIT, (unsigned int)16,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
			     MHD_OPTION_ARRAY, wc && wc->tls ? tls : &tls[4],
			     MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!d)
		fprintf(stderr, "trainbpf: cannot listen on %s (in use, not an address of this "
			"machine%s)\n", listen, wc && wc->tls ? ", or a key that is not the "
			"certificate's" : "");
	return d;
}

int exporter_start(struct exporter *x, const char *listen, const struct web_config *wc)
{
	memset(x, 0, sizeof(*x));
	pthread_mutex_init(&x->lock, NULL);
	x->wc = wc;
	x->d = listen_on(x, listen);
	return x->d ? 0 : -1;
}

int exporter_reconfigure(struct exporter *x, const char *listen, const struct web_config *wc)
{
	const struct web_config *old = x->wc;

	if (x->d)
		MHD_stop_daemon(x->d);
	x->wc = wc;
	x->ok_user[0] = x->ok_pass[0] = 0;
	x->d = listen_on(x, listen);
	if (x->d)
		return 0;
	x->wc = old;
	x->d = listen_on(x, listen);
	return -1;
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
