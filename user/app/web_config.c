// SPDX-License-Identifier: BSD-3-Clause
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>
#include "web_config.h"

#define WC_MAX_FILE (1 << 20)

struct parse {
	yaml_document_t *doc;
	const char *dir;
	struct web_config *wc;
	char *err;
	size_t len;
	char *client_ca_file;
	int tls_lo, tls_hi;	/* TLS versions, 0 (1.0) to 3 (1.3) */
	bool require_cert;
};

/* One line into p->err; -1. */
static int fail(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct parse *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, p->len, fmt, ap);
	va_end(ap);
	return -1;
}

static yaml_node_t *node(yaml_document_t *d, int id)
{
	return yaml_document_get_node(d, id);
}

static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A YAML null (an empty value): the setting is not given. */
static bool is_null(const yaml_node_t *n)
{
	const char *s = scalar(n);

	return !n || (s && (!*s || !strcmp(s, "~") || !strcmp(s, "null")) &&
		      n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE);
}

/*
 * path opened for reading if it can be trusted with the metrics' auth and
 * keys: a regular file, not a link (O_NOFOLLOW: one planted in a shared
 * directory is refused, not followed), owned by root or by trainbpf's own
 * user, and writable by no one else (anyone who could write it could turn
 * auth off at the next SIGHUP, or swap the key). -1 and why if not.
 */
static int open_trusted(const char *path, char *why, size_t len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

	if (fd < 0) {
		snprintf(why, len, "%s", errno == ELOOP ? "a symbolic link, not followed: name "
			 "the file itself" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		snprintf(why, len, "not a regular file");
	else if (st.st_uid != 0 && st.st_uid != geteuid())
		snprintf(why, len, "owned by uid %u, not root: refused", (unsigned int)st.st_uid);
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		snprintf(why, len, "writable by group or others (mode %04o): refused",
			 (unsigned int)(st.st_mode & 07777));
	else
		return fd;
	close(fd);
	return -1;
}

/* name's contents, relative to the config file's directory; NULL and err if not. */
static char *read_file(struct parse *p, const char *what, const char *name)
{
	char path[4096], why[128];
	char *buf = NULL;
	size_t n = 0;
	ssize_t got = 1;
	int fd;

	if (name[0] == '/')
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "%s/%s", p->dir, name);
	if ((fd = open_trusted(path, why, sizeof(why))) < 0) {
		fail(p, "%s %s: %s", what, path, why);
		return NULL;
	}
	buf = malloc(WC_MAX_FILE + 1);
	while (buf && n <= WC_MAX_FILE && (got = read(fd, buf + n, WC_MAX_FILE + 1 - n)) > 0)
		n += got;
	close(fd);
	if (!buf || got < 0 || !n || n > WC_MAX_FILE) {
		fail(p, "%s %s: %s", what, path, !buf ? "out of memory" : got < 0 ?
		     strerror(errno) : !n ? "empty" : "over 1 MiB");
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

static int tls_version(struct parse *p, const char *key, const char *v, int *out)
{
	static const char *const names[] = { "TLS10", "TLS11", "TLS12", "TLS13" };

	for (int i = 0; i < 4; i++)
		if (v && !strcmp(v, names[i]))
			return *out = i, 0;
	return fail(p, "tls_server_config.%s: '%s' (TLS10, TLS11, TLS12 or TLS13)", key,
		    v ? v : "");
}

/* GnuTLS's priorities for the versions from lo to hi (0: TLS 1.0 .. 3: TLS 1.3). */
static void priorities(struct web_config *wc, int lo, int hi)
{
	static const char *const vers[] = { "+VERS-TLS1.0", "+VERS-TLS1.1", "+VERS-TLS1.2",
					    "+VERS-TLS1.3" };
	int n = snprintf(wc->priorities, sizeof(wc->priorities), "NORMAL:-VERS-ALL");

	for (int v = hi; v >= lo; v--)
		n += snprintf(wc->priorities + n, sizeof(wc->priorities) - n, ":%s", vers[v]);
}

static int client_auth(struct parse *p, const char *v)
{
	if (v && !strcmp(v, "NoClientCert"))
		return p->require_cert = false, 0;
	if (v && !strcmp(v, "RequireAndVerifyClientCert"))
		return p->require_cert = true, 0;
	return fail(p, "tls_server_config.client_auth_type: '%s' is not supported (NoClientCert "
		    "or RequireAndVerifyClientCert)", v ? v : "");
}

/* One setting of a section: its key (a string) and value. */
typedef int (*pair_fn)(struct parse *p, const char *key, yaml_node_t *value);

/* fn for each setting of map, a mapping named what (or null: none). */
static int each_pair(struct parse *p, const char *what, yaml_node_t *map, pair_fn fn)
{
	if (is_null(map))
		return 0;
	if (map->type != YAML_MAPPING_NODE)
		return fail(p, "%s: not a mapping", what);
	for (yaml_node_pair_t *kv = map->data.mapping.pairs.start;
	     kv < map->data.mapping.pairs.top; kv++) {
		const char *k = scalar(node(p->doc, kv->key));

		if (!k)
			return fail(p, "%s: a key that is not a string", what);
		if (fn(p, k, node(p->doc, kv->value)))
			return -1;
	}
	return 0;
}

static int tls_pair(struct parse *p, const char *k, yaml_node_t *v)
{
	struct web_config *wc = p->wc;
	const char *s = scalar(v);

	if (is_null(v))
		return 0;
	if (!strcmp(k, "cert_file") && s)
		return (wc->cert_pem = read_file(p, "tls_server_config.cert_file", s)) ? 0 : -1;
	if (!strcmp(k, "key_file") && s)
		return (wc->key_pem = read_file(p, "tls_server_config.key_file", s)) ? 0 : -1;
	if (!strcmp(k, "client_ca_file") && s)
		return (p->client_ca_file = strdup(s)) ? 0 : fail(p, "out of memory");
	if (!strcmp(k, "client_auth_type"))
		return client_auth(p, s);
	if (!strcmp(k, "min_version"))
		return tls_version(p, k, s, &p->tls_lo);
	if (!strcmp(k, "max_version"))
		return tls_version(p, k, s, &p->tls_hi);
	return fail(p, "tls_server_config.%s: not supported by trainbpf serve (cert_file, "
		    "key_file, client_auth_type, client_ca_file, min_version, max_version)", k);
}

static int tls_section(struct parse *p, yaml_node_t *map)
{
	struct web_config *wc = p->wc;

	if (is_null(map))
		return 0;
	p->tls_lo = 2;	/* TLS 1.2 and up, as exporter-toolkit's default */
	p->tls_hi = 3;
	if (each_pair(p, "tls_server_config", map, tls_pair))
		return -1;
	if (!wc->cert_pem || !wc->key_pem)
		return fail(p, "tls_server_config: cert_file and key_file are both needed");
	if (p->tls_lo > p->tls_hi)
		return fail(p, "tls_server_config: min_version is above max_version");
	if (p->require_cert != (p->client_ca_file != NULL))
		return fail(p, "tls_server_config: client_ca_file goes with client_auth_type "
			    "RequireAndVerifyClientCert, and it with client_ca_file");
	if (p->require_cert &&
	    !(wc->client_ca_pem = read_file(p, "tls_server_config.client_ca_file",
					    p->client_ca_file)))
		return -1;
	wc->tls = true;
	priorities(wc, p->tls_lo, p->tls_hi);
	return 0;
}

/* A header's name and value: printable, no line breaks (they would split the response). */
static bool header_text(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int header_pair(struct parse *p, const char *k, yaml_node_t *value)
{
	struct web_config *wc = p->wc;
	const char *v = scalar(value);

	if (!v || !*k || !header_text(k) || !header_text(v) ||
	    strlen(k) >= sizeof(wc->headers[0][0]) || strlen(v) >= sizeof(wc->headers[0][1]))
		return fail(p, "http_server_config.headers: '%s' is not a header line", k);
	if (wc->nheaders == WC_MAX_HEADERS)
		return fail(p, "http_server_config.headers: %d at most", WC_MAX_HEADERS);
	snprintf(wc->headers[wc->nheaders][0], sizeof(wc->headers[0][0]), "%s", k);
	snprintf(wc->headers[wc->nheaders][1], sizeof(wc->headers[0][1]), "%s", v);
	wc->nheaders++;
	return 0;
}

static int http_pair(struct parse *p, const char *k, yaml_node_t *v)
{
	if (!strcmp(k, "headers"))
		return each_pair(p, "http_server_config.headers", v, header_pair);
	/* http2 is a wish: HTTP/1.1 serves Prometheus as well. */
	if (!strcmp(k, "http2"))
		return 0;
	return fail(p, "http_server_config.%s: not supported (headers, http2)", k);
}

static bool bcrypt_hash(const char *h)
{
	return (!strncmp(h, "$2a$", 4) || !strncmp(h, "$2b$", 4) || !strncmp(h, "$2y$", 4)) &&
	       strlen(h) == 60;
}

static int user_pair(struct parse *p, const char *k, yaml_node_t *value)
{
	struct web_config *wc = p->wc;
	const char *v = scalar(value);

	if (!*k || strlen(k) >= sizeof(wc->users[0].name) || strchr(k, ':'))
		return fail(p, "basic_auth_users: a user name that is not one");
	if (!v || !bcrypt_hash(v))
		return fail(p, "basic_auth_users.%s: not a bcrypt hash ($2y$..., as "
			    "htpasswd -nBC 10 '' makes one)", k);
	if (wc->nusers == WC_MAX_USERS)
		return fail(p, "basic_auth_users: %d users at most", WC_MAX_USERS);
	snprintf(wc->users[wc->nusers].name, sizeof(wc->users[0].name), "%s", k);
	snprintf(wc->users[wc->nusers].hash, sizeof(wc->users[0].hash), "%s", v);
	wc->nusers++;
	return 0;
}

static int top_pair(struct parse *p, const char *k, yaml_node_t *v)
{
	if (!strcmp(k, "tls_server_config"))
		return tls_section(p, v);
	if (!strcmp(k, "http_server_config"))
		return each_pair(p, "http_server_config", v, http_pair);
	if (!strcmp(k, "basic_auth_users"))
		return each_pair(p, "basic_auth_users", v, user_pair);
	return fail(p, "unknown setting '%s' (tls_server_config, http_server_config, "
		    "basic_auth_users)", k);
}

int web_config_load(struct web_config *wc, const char *path, char *err, size_t len)
{
	char dir[4096], msg[256];
	struct parse p = { .wc = wc, .err = msg, .len = sizeof(msg) };
	yaml_parser_t parser;
	yaml_document_t doc;
	FILE *f;
	int fd, rc = -1;

	memset(wc, 0, sizeof(*wc));
	snprintf(dir, sizeof(dir), "%s", path);
	p.dir = dirname(dir);
	fd = open_trusted(path, msg, sizeof(msg));
	if (fd < 0 || !(f = fdopen(fd, "r"))) {
		snprintf(err, len, "--web.config.file %s: %s", path, fd < 0 ? msg : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(err, len, "--web.config.file %s: line %zu: %s", path,
			 parser.problem_mark.line + 1, parser.problem ? parser.problem : "bad YAML");
		goto cleanup;
	}
	p.doc = &doc;
	/* An empty file is plain HTTP with no auth. */
	rc = each_pair(&p, "the file", yaml_document_get_root_node(&doc), top_pair);
	if (rc)
		snprintf(err, len, "--web.config.file %s: %s", path, msg);
	yaml_document_delete(&doc);
cleanup:
	yaml_parser_delete(&parser);
	fclose(f);
	free(p.client_ca_file);
	if (rc)
		web_config_free(wc);
	return rc;
}

void web_config_free(struct web_config *wc)
{
	free(wc->cert_pem);
	free(wc->key_pem);
	free(wc->client_ca_pem);
	memset(wc, 0, sizeof(*wc));
}

struct web_config *web_config_read(const char *path)
{
	struct web_config *wc = malloc(sizeof(*wc));
	char err[512];

	if (!wc) {
		fprintf(stderr, "trainbpf: --web.config.file %s: out of memory\n", path);
		return NULL;
	}
	if (web_config_load(wc, path, err, sizeof(err))) {
		fprintf(stderr, "trainbpf: %s\n", err);
		free(wc);
		return NULL;
	}
	return wc;
}

void web_config_drop(struct web_config *wc)
{
	if (!wc)
		return;
	web_config_free(wc);
	free(wc);
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

/*
 * An unknown user costs the same bcrypt as a known one (the first user's
 * hash, the one cost a file usually has): how long a refusal takes does
 * not tell which users exist. Every name is compared, none skipped.
 */
bool web_config_check(const struct web_config *wc, const char *user, const char *password)
{
	const char *hash, *h;
	void *data = NULL;
	int size = 0, found = -1;
	bool ok;

	if (!wc->nusers)
		return false;
	for (int i = 0; i < wc->nusers; i++)
		if (same(wc->users[i].name, user) && found < 0)
			found = i;
	hash = wc->users[found < 0 ? 0 : found].hash;
	h = crypt_ra(password, hash, &data, &size);
	ok = h && h[0] != '*' && same(h, hash) && found >= 0;
	free(data);
	return ok;
}
