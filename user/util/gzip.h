/* SPDX-License-Identifier: BSD-3-Clause */
/* gzip (RFC 1952) of a buffer in memory, with zlib: serve's scrapes. */
#ifndef TB_GZIP_H
#define TB_GZIP_H

#include <stdbool.h>
#include <stddef.h>

/* in's n bytes gzip'ed into *out (malloc'ed, *outn bytes); -1 on error. */
int gz_compress(const char *in, size_t n, char **out, size_t *outn);
/*
 * Whether an Accept-Encoding header value takes gzip: "gzip" or "*"
 * among its codings, not with q=0 (RFC 9110).
 */
bool gz_accepted(const char *accept_encoding);

#endif
