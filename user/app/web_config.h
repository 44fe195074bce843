/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf serve --web.config.file FILE`: TLS and basic auth for /metrics
 * in the file format of Prometheus' own exporters (exporter-toolkit's
 * web-config: tls_server_config, http_server_config, basic_auth_users with
 * bcrypt hashes), so that one file serves node_exporter and trainbpf alike.
 * What trainbpf cannot honour is refused, never ignored: a setting that
 * looks safer than what runs would be worse than none.
 */
#ifndef TB_WEB_CONFIG_H
#define TB_WEB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define WC_MAX_USERS 64
#define WC_MAX_HEADERS 16

struct wc_user {
	char name[128];
	char hash[128];		/* bcrypt: $2a$, $2b$ or $2y$ */
};

struct web_config {
	bool tls;
	char *cert_pem, *key_pem;	/* the files' contents */
	char *client_ca_pem;		/* client certificates required and verified; NULL: none */
	char priorities[96];		/* GnuTLS: the TLS versions allowed */
	struct wc_user users[WC_MAX_USERS];
	int nusers;			/* 0: no basic auth */
	char headers[WC_MAX_HEADERS][2][256];	/* response headers: name, value */
	int nheaders;
};

/*
 * Reads path (file names in it are relative to its directory); 0, or -1
 * with one line in err. Free with web_config_free.
 */
int web_config_load(struct web_config *wc, const char *path, char *err, size_t len);
void web_config_free(struct web_config *wc);
/* web_config_load into a new one; NULL and the line said on stderr. */
struct web_config *web_config_read(const char *path);
/* Frees one web_config_read made (NULL: nothing). */
void web_config_drop(struct web_config *wc);
/* Whether user and password pass basic_auth_users (bcrypt). */
bool web_config_check(const struct web_config *wc, const char *user, const char *password);

#endif
