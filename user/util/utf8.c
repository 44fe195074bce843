// SPDX-License-Identifier: BSD-3-Clause
#include <stdbool.h>
#include <string.h>
#include "utf8.h"

static bool cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* The second byte's range for a lead byte (RFC 3629's table). */
static bool second_ok(unsigned char lead, unsigned char c)
{
	switch (lead) {
	case 0xe0:
		return c >= 0xa0 && c <= 0xbf;	/* no overlong forms */
	case 0xed:
		return c >= 0x80 && c <= 0x9f;	/* no surrogates */
	case 0xf0:
		return c >= 0x90 && c <= 0xbf;
	case 0xf4:
		return c >= 0x80 && c <= 0x8f;	/* up to U+10FFFF */
	default:
		return cont(c);
	}
}

int utf8_seq(const unsigned char *s, size_t n)
{
	int len;

	if (!n)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if ((size_t)len > n || !second_ok(s[0], s[1]))
		return 0;
	for (int i = 2; i < len; i++)
		if (!cont(s[i]))
			return 0;
	return len;
}

static bool control(const unsigned char *s, int len)
{
	return (len == 1 && (s[0] < 0x20 || s[0] == 0x7f)) ||
	       (len == 2 && s[0] == 0xc2 && s[1] < 0xa0);	/* C1: U+0080-U+009F */
}

size_t utf8_clean(char *dst, size_t len, const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t out = 0, i = 0;

	if (!len)
		return 0;
	while (i < n && s[i]) {
		int k = utf8_seq(s + i, strnlen(src + i, n - i));
		const char *put = src + i;
		size_t w = k;

		if (!k || control(s + i, k)) {
			put = UTF8_REPLACEMENT;
			w = sizeof(UTF8_REPLACEMENT) - 1;
		}
		if (out + w >= len)
			break;
		memcpy(dst + out, put, w);
		out += w;
		i += k ? k : 1;
	}
	dst[out] = 0;
	return out;
}
