// SPDX-License-Identifier: BSD-3-Clause
/* user/util/json_writer.c: separators, nesting, escaping, numbers. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json_writer.h"

static char *buf;
static size_t len;
static FILE *f;
static struct jw w;

static void setup(void)
{
	f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	jw_init(&w, f);
}

static const char *text(void)
{
	fflush(f);
	return buf;
}

static void teardown(void)
{
	fclose(f);
	free(buf);
}

START_TEST(commas_between_members_and_elements_only)
{
	jw_object(&w);
	jw_uint_field(&w, "a", 1);
	jw_name(&w, "b");
	jw_array(&w);
	jw_int(&w, -2);
	jw_object(&w);
	jw_end_object(&w);
	jw_array(&w);
	jw_end_array(&w);
	jw_null(&w);
	jw_end_array(&w);
	jw_bool_field(&w, "c", false);
	jw_null_field(&w, "d");
	jw_end_object(&w);
	ck_assert_str_eq(text(), "{\"a\":1,\"b\":[-2,{},[],null],\"c\":false,\"d\":null}");
}
END_TEST

START_TEST(strings_escaped_as_characters)
{
	/* é stays é (it was \u00c3\u00a9: Ã©); a stray byte, a cut sequence: U+FFFD */
	jw_array(&w);
	jw_string(&w, "q\"x\\y\n\001\x7f\xc3\xa9 ok \xff\xe2\x82");
	jw_end_array(&w);
	ck_assert_str_eq(text(), "[\"q\\\"x\\\\y\\u000a\\u0001\\u007f\xc3\xa9 ok \\ufffd\\ufffd\\ufffd\"]");
}
END_TEST

START_TEST(names_escaped_too)
{
	jw_object(&w);
	jw_string_field(&w, "a\"b", "");
	jw_end_object(&w);
	ck_assert_str_eq(text(), "{\"a\\\"b\":\"\"}");
}
END_TEST

START_TEST(fixed_decimals_and_significant_digits)
{
	jw_array(&w);
	jw_float(&w, 1.5, 3);
	jw_float(&w, 2.0 / 3, 9);
	jw_float(&w, -0.25, 0);
	jw_sig(&w, 0.0749969123, 6);
	jw_sig(&w, 1.0, 6);
	jw_uint(&w, 18446744073709551615ull);
	jw_end_array(&w);
	ck_assert_str_eq(text(), "[1.500,0.666666667,-0,0.0749969,1,18446744073709551615]");
}
END_TEST

START_TEST(not_finite_is_null)
{
	jw_array(&w);
	jw_float(&w, NAN, 3);
	jw_float(&w, INFINITY, 1);
	jw_sig(&w, -INFINITY, 6);
	jw_end_array(&w);
	ck_assert_str_eq(text(), "[null,null,null]");
}
END_TEST

START_TEST(array_lines_put_each_element_on_a_line)
{
	jw_object(&w);
	jw_name(&w, "ev");
	jw_array_lines(&w);
	jw_object(&w);
	jw_uint_field(&w, "x", 1);
	jw_end_object(&w);
	jw_object(&w);
	jw_end_object(&w);
	jw_end_array(&w);
	jw_name(&w, "empty");
	jw_array_lines(&w);
	jw_end_array(&w);
	jw_end_object(&w);
	ck_assert_str_eq(text(), "{\"ev\":[\n{\"x\":1},\n{}\n],\"empty\":[\n]}");
}
END_TEST

START_TEST(deeper_than_tracked_balanced_and_flagged)
{
	jw_array(&w);
	for (int i = 0; i < JW_MAX_DEPTH + 4; i++)
		jw_array(&w);
	for (int i = 0; i < JW_MAX_DEPTH + 4; i++)
		jw_end_array(&w);
	ck_assert(w.bad);
	jw_uint(&w, 7);	/* tracking is back once out of the deep part */
	jw_end_array(&w);
	ck_assert_int_eq(strspn(text(), "["), JW_MAX_DEPTH + 5);
	ck_assert_str_eq(text() + 2 * (JW_MAX_DEPTH + 5) - 1, ",7]");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json_writer");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, commas_between_members_and_elements_only);
	tcase_add_test(tc, strings_escaped_as_characters);
	tcase_add_test(tc, names_escaped_too);
	tcase_add_test(tc, fixed_decimals_and_significant_digits);
	tcase_add_test(tc, not_finite_is_null);
	tcase_add_test(tc, array_lines_put_each_element_on_a_line);
	tcase_add_test(tc, deeper_than_tracked_balanced_and_flagged);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
