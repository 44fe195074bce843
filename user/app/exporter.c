// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exporter.h"

#ifdef TB_NO_HTTP
/* The static build (Makefile): no libmicrohttpd to link statically. */
int exporter_start(struct exporter *x, const char *listen, struct web_config *wc)
{
	memset(x, 0, sizeof(*x));
	fprintf(stderr, "trainbpf: serve is not in this static build (libmicrohttpd's GnuTLS has "
		"no static libraries in Debian): use the dynamic build\n");
	return -1;
}

int exporter_reconfigure(struct exporter *x, const char *listen, struct web_config *wc)
{
	return -1;
}

void exporter_reap(struct exporter *x)
{
}

void exporter_publish(struct exporter *x, char *text, size_t len)
{
	free(text);
}

void exporter_stop(struct exporter *x)
{
}
#else
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <unistd.h>
#include "gzip.h"
#include "web_config.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/*
 * Connections (docs/metrics.md, "HTTP side"). An address may hold
 * PER_ADDR_CONNS, all of them CONNS: a second client is let in while one
 * holds all it may (CONNS / PER_ADDR_CONNS = 4 such addresses). Loopback
 * clients all share 127.0.0.1, a node's Prometheus and local tools alike:
 * 32 leaves them room beside a tool that opens 16. Past CONNS a new
 * connection waits in the kernel's queue until one closes, which
 * GUARD_HEADER_MS bounds for a client that sends no request.
 */
#define CONNS 128u
#define PER_ADDR_CONNS 32u
#define IDLE_S 10u	/* no byte either way for this long: closed (MHD's timeout) */
/*
 * After a SIGHUP the old daemon answers what it accepted before it stopped
 * accepting; past this it stops anyway (IDLE_S closes any connection that
 * is not talking, http_guard.h's deadlines one that talks too slowly).
 */
#define DRAIN_S (2 * IDLE_S)

struct listener {
	struct exporter *x;
	struct MHD_Daemon *d;
	struct web_config *wc;	/* its own: freed with it */
	atomic_uint open;	/* its connections now (on_connection) */
	uint64_t drain_end;	/* superseded: stopped once open is 0, or at this time */
	/* The last user and password bcrypt passed, and from where: a scrape every second costs no hash. */
	pthread_mutex_t ok_lock;
	struct sockaddr_storage ok_addr;
	char ok_user[128], ok_pass[128];
};

static const char index_page[] =
	"trainbpf serve: the metrics are at /metrics (docs/metrics.md)\n";

static void add_headers(const struct listener *l, struct MHD_Response *r, const char *type)
{
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	for (int i = 0; l->wc && i < l->wc->nheaders; i++)
		MHD_add_response_header(r, l->wc->headers[i][0], l->wc->headers[i][1]);
}

static enum MHD_Result reply(const struct listener *l, struct MHD_Connection *c,
			     unsigned int status, const char *type, void *body, size_t len,
			     enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	add_headers(l, r, type);
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

static const struct sockaddr *client_addr(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	return ci ? ci->client_addr : NULL;
}

/* Equal strings, in time that does not tell where they differ. */
static bool same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return !d;
}

/* The same IP (any port): the cache serves only the address it passed for. */
static bool same_ip(const struct sockaddr *a, const struct sockaddr_storage *b)
{
	if (!a || a->sa_family != b->ss_family)
		return false;
	if (a->sa_family == AF_INET)
		return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			       &((const struct sockaddr_in *)b)->sin_addr, 4);
	return a->sa_family == AF_INET6 &&
	       !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

static bool cached(struct listener *l, const struct sockaddr *from, const char *user,
		   const char *pass)
{
	bool ok;

	pthread_mutex_lock(&l->ok_lock);
	ok = l->ok_user[0] && same_ip(from, &l->ok_addr) && same(user, l->ok_user) &
	     same(pass, l->ok_pass);
	pthread_mutex_unlock(&l->ok_lock);
	return ok;
}

static void cache(struct listener *l, const struct sockaddr *from, const char *user,
		  const char *pass)
{
	size_t alen = from->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
			sizeof(struct sockaddr_in);

	if (strlen(user) >= sizeof(l->ok_user) || strlen(pass) >= sizeof(l->ok_pass))
		return;
	pthread_mutex_lock(&l->ok_lock);
	memcpy(&l->ok_addr, from, alen);
	snprintf(l->ok_user, sizeof(l->ok_user), "%s", user);
	snprintf(l->ok_pass, sizeof(l->ok_pass), "%s", pass);
	pthread_mutex_unlock(&l->ok_lock);
}

enum auth { AUTH_OK, AUTH_NO, AUTH_LIMITED };

/*
 * basic_auth_users: the user and password, checked by bcrypt unless they
 * just passed from the same address. An address past its failures gets
 * no bcrypt (http_guard.h); one bcrypt runs at a time.
 */
static enum auth authorized(struct listener *l, struct MHD_Connection *c)
{
	struct exporter *x = l->x;
	const struct sockaddr *from = client_addr(c);
	char *pass = NULL, *user = MHD_basic_auth_get_username_password(c, &pass);
	enum auth ret = AUTH_NO;

	if (!user || !pass || !from)
		goto cleanup;	/* no credentials: no bcrypt, not a failure */
	if (cached(l, from, user, pass)) {
		ret = AUTH_OK;
		goto cleanup;
	}
	if (!guard_auth_take(&x->guard, from)) {
		ret = AUTH_LIMITED;
		goto cleanup;
	}
	pthread_mutex_lock(&x->bcrypt_lock);
	ret = web_config_check(l->wc, user, pass) ? AUTH_OK : AUTH_NO;
	pthread_mutex_unlock(&x->bcrypt_lock);
	if (ret == AUTH_OK) {
		cache(l, from, user, pass);
		guard_auth_passed(&x->guard, from);
	}
cleanup:
	MHD_free(user);
	MHD_free(pass);
	return ret;
}

/* A short static text of ours as a response, with the configured headers. */
static struct MHD_Response *plain(const struct listener *l, const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
								 MHD_RESPMEM_PERSISTENT);

	if (r)
		add_headers(l, r, "text/plain");
	return r;
}

static enum MHD_Result unauthorized(struct listener *l, struct MHD_Connection *c)
{
	struct MHD_Response *r = plain(l, "unauthorized\n");
	enum MHD_Result ret = MHD_NO;

	if (r)
		ret = MHD_queue_basic_auth_fail_response(c, "trainbpf", r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result too_many(struct listener *l, struct MHD_Connection *c)
{
	struct MHD_Response *r = plain(l, "too many failed logins from this address: try later\n");
	enum MHD_Result ret = MHD_NO;

	if (r) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
		ret = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, r);
	}
	MHD_destroy_response(r);
	return ret;
}

/* The published text, copied under the lock: the tracer's swap waits a memcpy at most. */
static char *text_copy(struct exporter *x, size_t *len, uint64_t *gen)
{
	char *copy;

	pthread_mutex_lock(&x->lock);
	*len = x->len;
	*gen = x->gen;
	copy = malloc(*len ? *len : 1);
	if (copy && *len)
		memcpy(copy, x->text, *len);
	x->scrapes++;
	pthread_mutex_unlock(&x->lock);
	return copy;
}

/*
 * The text gzip'ed: compressed once per published text, by the first
 * scrape that asks (outside the lock), and kept for the others until the
 * next text. NULL: none (no memory, or zlib failed): the plain text goes.
 */
static char *gz_copy(struct exporter *x, size_t *len)
{
	char *copy = NULL, *plain, *gz;
	size_t n, gzn;
	uint64_t gen;

	pthread_mutex_lock(&x->lock);
	if (x->gz && x->gz_gen == x->gen && (copy = malloc(x->gzlen))) {
		memcpy(copy, x->gz, x->gzlen);
		*len = x->gzlen;
		x->scrapes++;
	}
	pthread_mutex_unlock(&x->lock);
	if (copy)
		return copy;
	plain = text_copy(x, &n, &gen);
	if (!plain || gz_compress(plain, n, &gz, &gzn)) {
		free(plain);
		return NULL;
	}
	free(plain);
	copy = malloc(gzn ? gzn : 1);
	if (copy)
		memcpy(copy, gz, gzn);
	pthread_mutex_lock(&x->lock);
	if (x->gen == gen) {	/* still the text it was made of: kept for the next scrapes */
		free(x->gz);
		x->gz = gz;
		x->gzlen = gzn;
		x->gz_gen = gen;
		gz = NULL;
	}
	pthread_mutex_unlock(&x->lock);
	free(gz);
	*len = gzn;
	return copy;
}

static enum MHD_Result metrics(struct listener *l, struct MHD_Connection *c)
{
	const char *ae = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_ACCEPT_ENCODING);
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body = NULL;
	bool gz = gz_accepted(ae);
	uint64_t gen;
	size_t len;

	if (gz)
		body = gz_copy(l->x, &len);
	gz = body != NULL;
	if (!body)
		body = text_copy(l->x, &len, &gen);
	if (!body)
		return MHD_NO;
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	add_headers(l, r, CONTENT_TYPE);
	MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	if (gz)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* Who may ask: a client certificate, basic auth. MHD_YES: answered already. */
static enum MHD_Result refused(struct listener *l, struct MHD_Connection *c, bool *answered)
{
	static const char no_cert[] = "a client certificate signed by client_ca_file is needed\n";
	enum auth a;

	*answered = true;
	if (l->wc && l->wc->client_ca_pem && !client_verified(c))
		return reply(l, c, MHD_HTTP_FORBIDDEN, "text/plain", (void *)no_cert,
			     sizeof(no_cert) - 1, MHD_RESPMEM_PERSISTENT);
	a = l->wc && l->wc->nusers ? authorized(l, c) : AUTH_OK;
	if (a == AUTH_LIMITED)
		return too_many(l, c);
	if (a == AUTH_NO)
		return unauthorized(l, c);
	*answered = false;
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_len, void **state)
{
	static const char not_found[] = "not found: the metrics are at /metrics\n";
	static const char not_allowed[] = "only GET and HEAD\n";
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct listener *l = cls;
	enum MHD_Result ret;
	bool answered;

	/* Its headers came: the deadline stops until it is answered (on_completed). */
	guard_busy(&l->x->guard, ci ? ci->socket_context : NULL);
	ret = refused(l, c, &answered);
	if (answered)
		return ret;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(l, c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", (void *)not_allowed,
			     sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
	if (!strcmp(url, "/metrics"))
		return metrics(l, c);
	if (!strcmp(url, "/"))
		return reply(l, c, MHD_HTTP_OK, "text/plain", (void *)index_page,
			     sizeof(index_page) - 1, MHD_RESPMEM_PERSISTENT);
	return reply(l, c, MHD_HTTP_NOT_FOUND, "text/plain", (void *)not_found,
		     sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **ctx,
			  enum MHD_ConnectionNotificationCode code)
{
	struct listener *l = cls;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		guard_closed(&l->x->guard, ctx);
		atomic_fetch_sub(&l->open, 1);
		return;
	}
	atomic_fetch_add(&l->open, 1);
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		guard_opened(&l->x->guard, ci->connect_fd, ctx);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode why)
{
	struct listener *l = cls;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	guard_answered(&l->x->guard, ci ? ci->socket_context : NULL);
}

/* listen into host and port: "HOST:PORT", "[V6]:PORT", "PORT"; the port 1-65535. */
static int split_listen(const char *listen, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(listen, ':');
	const char *p = colon ? colon + 1 : listen;
	size_t n;

	/* digits only: getaddrinfo would take 99999 modulo 65536, and 0 as "any port" */
	if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) || !atoi(p) ||
	    atoi(p) > 65535)
		return -1;
	snprintf(port, plen, "%s", p);
	if (!colon) {
		snprintf(host, hlen, "127.0.0.1");
		return 0;
	}
	n = colon - listen;
	if (n >= 2 && listen[0] == '[' && listen[n - 1] == ']') {
		listen++;
		n -= 2;
	}
	if (!n || n >= hlen)
		return -1;
	memcpy(host, listen, n);
	host[n] = 0;
	return 0;
}

/* 0.0.0.0 or [::]: every interface of the machine. */
static bool every_interface(const struct sockaddr *a)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &any6, sizeof(any6));
}

/* listen as a numeric address; NULL and one line on stderr if it is not one. */
static struct addrinfo *parse_listen(const char *listen)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM }, *ai = NULL;
	char host[128], port[16];

	if (split_listen(listen, host, sizeof(host), port, sizeof(port)) ||
	    getaddrinfo(host, port, &hints, &ai)) {
		fprintf(stderr, "trainbpf: invalid --listen '%s' (HOST:PORT, [IPV6]:PORT or PORT, "
			"numeric, PORT 1-65535)\n", listen);
		return NULL;
	}
	if (every_interface(ai->ai_addr))
		fprintf(stderr, "trainbpf: warning: --listen %s serves /metrics on every interface "
			"of this machine (--web.config.file for TLS and basic auth)\n", listen);
	return ai;
}

/*
 * An MHD daemon for l (l->wc's TLS), on addr, or on the listening socket fd
 * when fd >= 0 (MHD owns fd then, and closes it if it fails). NULL if not.
 */
static struct MHD_Daemon *daemon_for(struct listener *l, const struct sockaddr *addr, int fd)
{
	const struct web_config *wc = l->wc;
	/* A thread per connection: a bcrypt (60 ms) or a slow client holds only its own. */
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_AUTO | MHD_USE_ITC;
	struct MHD_OptionItem tls[] = {
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, wc ? wc->key_pem : NULL },
		{ MHD_OPTION_HTTPS_MEM_CERT, 0, wc ? wc->cert_pem : NULL },
		{ MHD_OPTION_HTTPS_PRIORITIES, 0, wc ? (void *)wc->priorities : NULL },
		{ wc && wc->client_ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0,
		  wc ? wc->client_ca_pem : NULL },
		{ MHD_OPTION_END, 0, NULL },
	};
	struct MHD_OptionItem where[] = {
		{ fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR, fd, (void *)addr },
		{ MHD_OPTION_END, 0, NULL },
	};

	if (addr && addr->sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (wc && wc->tls)
		flags |= MHD_USE_TLS;
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, l,
				MHD_OPTION_ARRAY, where,
				MHD_OPTION_CONNECTION_LIMIT, CONNS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, PER_ADDR_CONNS,
				MHD_OPTION_CONNECTION_TIMEOUT, IDLE_S,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, l,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, l,
				MHD_OPTION_ARRAY, wc && wc->tls ? tls : &tls[4],
				MHD_OPTION_END);
}

static struct listener *listener_new(struct exporter *x, struct web_config *wc)
{
	struct listener *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->x = x;
	l->wc = wc;
	pthread_mutex_init(&l->ok_lock, NULL);
	return l;
}

static void listener_free(struct listener *l)
{
	if (!l)
		return;
	if (l->d)
		MHD_stop_daemon(l->d);
	web_config_drop(l->wc);
	pthread_mutex_destroy(&l->ok_lock);
	free(l);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* old stops accepting; exporter_reap stops it once its connections end. */
static void drain(struct exporter *x, struct listener *old)
{
	unsigned int slot = 0;
	int quiet = MHD_quiesce_daemon(old->d);

	if (quiet >= 0)
		close(quiet);	/* the new daemon listens on its own copy */
	old->drain_end = now_ns() + DRAIN_S * 1000000000ull;
	for (unsigned int i = 0; i < EXPORTER_DRAINING; i++) {
		if (!x->old[i]) {
			slot = i;
			break;
		}
		if (x->old[i]->drain_end < x->old[slot]->drain_end)
			slot = i;
	}
	/* SIGHUPs faster than connections end: the oldest one's end now */
	listener_free(x->old[slot]);
	x->old[slot] = old;
}

void exporter_reap(struct exporter *x)
{
	uint64_t now = now_ns();

	for (unsigned int i = 0; i < EXPORTER_DRAINING; i++) {
		if (x->old[i] && (!atomic_load(&x->old[i]->open) || now >= x->old[i]->drain_end)) {
			listener_free(x->old[i]);
			x->old[i] = NULL;
		}
	}
}

static int listen_fd(const struct listener *l)
{
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->d, MHD_DAEMON_INFO_LISTEN_FD);

	return di ? di->listen_fd : -1;
}

/* One line: where it listens, as the kernel says (a port of 0 would be its choice). */
static void say_where(const struct listener *l)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN], port[8];
	int fd = listen_fd(l);

	if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV))
		return;
	fprintf(stderr, "trainbpf: serving /metrics on %s://%s%s%s:%s\n",
		l->wc && l->wc->tls ? "https" : "http", ss.ss_family == AF_INET6 ? "[" : "",
		host, ss.ss_family == AF_INET6 ? "]" : "", port);
}

int exporter_start(struct exporter *x, const char *listen, struct web_config *wc)
{
	struct addrinfo *ai;
	int rc = -1;

	memset(x, 0, sizeof(*x));
	pthread_mutex_init(&x->lock, NULL);
	pthread_mutex_init(&x->bcrypt_lock, NULL);
	if (!(ai = parse_listen(listen)))
		return -1;
	if (guard_start(&x->guard) || !(x->cur = listener_new(x, wc)) ||
	    !(x->cur->d = daemon_for(x->cur, ai->ai_addr, -1))) {
		fprintf(stderr, "trainbpf: cannot listen on %s (in use, not an address of this "
			"machine%s)\n", listen, wc && wc->tls ? ", or a key that is not the "
			"certificate's" : "");
		goto cleanup;
	}
	say_where(x->cur);
	rc = 0;
cleanup:
	freeaddrinfo(ai);
	if (rc) {
		if (x->cur)
			x->cur->wc = NULL;	/* the caller's still */
		listener_free(x->cur);
		x->cur = NULL;
		guard_stop(&x->guard);
	}
	return rc;
}

/*
 * The new daemon on a copy of the old one's listening socket: the port is
 * never free for another to take, and connections queue meanwhile. The old
 * daemon stops accepting once the new one runs, and answers the
 * connections it accepted before (drain): stopping it now would close them
 * unanswered.
 */
int exporter_reconfigure(struct exporter *x, const char *listen, struct web_config *wc)
{
	struct listener *old = x->cur, *fresh;
	int fd = old ? listen_fd(old) : -1;

	if (fd < 0 || (fd = dup(fd)) < 0 || !(fresh = listener_new(x, wc))) {
		fprintf(stderr, "trainbpf: SIGHUP: cannot share the listening socket: %s\n",
			strerror(errno ? errno : ENOMEM));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!(fresh->d = daemon_for(fresh, NULL, fd))) {
		fprintf(stderr, "trainbpf: SIGHUP: no daemon starts with the new web config on "
			"%s%s\n", listen, wc && wc->tls ? " (a key that is not the certificate's?)" :
			"");
		fresh->wc = NULL;	/* the caller's still */
		listener_free(fresh);
		return -1;
	}
	exporter_reap(x);
	drain(x, old);
	x->cur = fresh;
	fprintf(stderr, "trainbpf: SIGHUP: the new web config serves on %s\n", listen);
	return 0;
}

void exporter_publish(struct exporter *x, char *text, size_t len)
{
	char *old;

	pthread_mutex_lock(&x->lock);
	old = x->text;
	x->text = text;
	x->len = len;
	x->gen++;		/* the gzip'ed copy is of the old text now */
	pthread_mutex_unlock(&x->lock);
	free(old);
}

void exporter_stop(struct exporter *x)
{
	listener_free(x->cur);
	x->cur = NULL;
	for (unsigned int i = 0; i < EXPORTER_DRAINING; i++) {
		listener_free(x->old[i]);
		x->old[i] = NULL;
	}
	guard_stop(&x->guard);
	free(x->text);
	x->text = NULL;
	free(x->gz);
	x->gz = NULL;
	pthread_mutex_destroy(&x->bcrypt_lock);
	pthread_mutex_destroy(&x->lock);
}
#endif
