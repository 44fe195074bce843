/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UTF-8 checked, byte by byte: what other processes hand trainbpf (their
 * environment, their names) is bytes, and what it writes (Prometheus
 * labels, JSON) must be valid UTF-8, or the reader rejects the whole
 * document: one scrape with a bad label fails every series of the node.
 */
#ifndef TB_UTF8_H
#define TB_UTF8_H

#include <stddef.h>

/* U+FFFD, the replacement character, in UTF-8. */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"

/*
 * The length (1-4) of the valid UTF-8 sequence s starts with, of its n
 * bytes; 0 if there is none (a stray or overlong byte, a surrogate, past
 * U+10FFFF, or a sequence cut by the end).
 */
int utf8_seq(const unsigned char *s, size_t n);

/*
 * src's n bytes (or up to a NUL) as valid UTF-8 into dst, len bytes with
 * its NUL: a byte that starts no valid sequence, and a control character,
 * becomes U+FFFD; it ends on a character's boundary. The length written.
 */
size_t utf8_clean(char *dst, size_t len, const char *src, size_t n);

#endif
