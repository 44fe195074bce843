// SPDX-License-Identifier: BSD-3-Clause
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include "gzip.h"

/* Fast over small: an exposition shrinks to a tenth or less at level 1 already. */
#define GZ_LEVEL 1

int gz_compress(const char *in, size_t n, char **out, size_t *outn)
{
	z_stream z = { 0 };
	size_t cap;
	char *buf;
	int rc;

	/* windowBits 15 + 16: a gzip header and trailer, not zlib's */
	if (deflateInit2(&z, GZ_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	cap = deflateBound(&z, n);
	buf = malloc(cap ? cap : 1);
	if (!buf) {
		deflateEnd(&z);
		return -1;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = n;
	z.next_out = (Bytef *)buf;
	z.avail_out = cap;
	rc = deflate(&z, Z_FINISH);
	*outn = z.total_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}

/* Whether one coding ("gzip;q=0.5") names gzip or * with a q above 0. */
static bool coding_takes_gzip(const char *s, size_t n)
{
	const char *semi = memchr(s, ';', n), *q;
	size_t name = semi ? (size_t)(semi - s) : n;

	while (name && isspace((unsigned char)s[name - 1]))
		name--;
	if (!((name == 4 && !strncasecmp(s, "gzip", 4)) || (name == 1 && s[0] == '*')))
		return false;
	if (!semi)
		return true;
	for (q = semi + 1; q < s + n && isspace((unsigned char)*q); q++)
		;
	if (q + 2 > s + n || strncasecmp(q, "q=", 2))
		return true;
	return strtod(q + 2, NULL) > 0;
}

bool gz_accepted(const char *v)
{
	while (v && *v) {
		size_t n = strcspn(v, ",");

		while (n && isspace((unsigned char)*v))
			v++, n--;
		if (coding_takes_gzip(v, n))
			return true;
		v += n;
		if (*v == ',')
			v++;
	}
	return false;
}
