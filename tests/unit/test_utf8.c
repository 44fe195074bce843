// SPDX-License-Identifier: BSD-3-Clause
/* user/util/utf8.c: sequences checked, labels cleaned and cut on a boundary. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "utf8.h"

#define R UTF8_REPLACEMENT

START_TEST(valid_sequences_have_their_length)
{
	ck_assert_int_eq(utf8_seq((const unsigned char *)"a", 1), 1);
	ck_assert_int_eq(utf8_seq((const unsigned char *)"\xc3\xa9", 2), 2);	/* é */
	ck_assert_int_eq(utf8_seq((const unsigned char *)"\xe2\x82\xac", 3), 3);	/* € */
	ck_assert_int_eq(utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
	ck_assert_int_eq(utf8_seq((const unsigned char *)"\xf4\x8f\xbf\xbf", 4), 4);	/* U+10FFFF */
}
END_TEST

START_TEST(invalid_sequences_have_none)
{
	static const char *const bad[] = {
		"\x80",			/* a continuation byte alone */
		"\xc0\xaf",		/* overlong '/' */
		"\xe0\x80\xaf",		/* overlong */
		"\xed\xa0\x80",		/* a surrogate */
		"\xf4\x90\x80\x80",	/* past U+10FFFF */
		"\xf5\x80\x80\x80",
		"\xff",
		"\xc3",			/* cut by the end */
		"\xe2\x82",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!utf8_seq((const unsigned char *)bad[i], strlen(bad[i])), "%zu", i);
}
END_TEST

START_TEST(clean_replaces_bad_bytes_and_controls)
{
	char out[64];

	ck_assert_uint_eq(utf8_clean(out, sizeof(out), "ok-é", 64), 5);
	ck_assert_str_eq(out, "ok-é");
	utf8_clean(out, sizeof(out), "a\xff" "b\x1b[31m\xc2\x85", 64);
	ck_assert_str_eq(out, "a" R "b" R "[31m" R);
}
END_TEST

START_TEST(clean_cuts_on_a_boundary)
{
	char src[80], out[64];

	/* 62 ASCII bytes and é: cut to 63 bytes it was half a character */
	memset(src, 'x', 62);
	strcpy(src + 62, "é");
	ck_assert_uint_eq(utf8_clean(out, sizeof(out), src, sizeof(src)), 62);
	ck_assert_uint_eq(strlen(out), 62);
	/* a replacement that does not fit is left out whole */
	memset(src, 'x', 61);
	strcpy(src + 61, "\xff");
	ck_assert_uint_eq(utf8_clean(out, sizeof(out), src, sizeof(src)), 61);
	ck_assert_uint_eq(utf8_clean(out, 1, "abc", 3), 0);
	ck_assert_str_eq(out, "");
	/* n bounds the source as well as a NUL does */
	ck_assert_uint_eq(utf8_clean(out, sizeof(out), "abcdef", 3), 3);
	ck_assert_str_eq(out, "abc");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("utf8");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, valid_sequences_have_their_length);
	tcase_add_test(tc, invalid_sequences_have_none);
	tcase_add_test(tc, clean_replaces_bad_bytes_and_controls);
	tcase_add_test(tc, clean_cuts_on_a_boundary);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
