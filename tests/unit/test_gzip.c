// SPDX-License-Identifier: BSD-3-Clause
/* user/util/gzip.c: which Accept-Encoding takes gzip; a round trip through zlib. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "gzip.h"

START_TEST(accept_encoding_parsed)
{
	ck_assert(gz_accepted("gzip"));
	ck_assert(gz_accepted("deflate, gzip;q=1.0, *;q=0.5"));
	ck_assert(gz_accepted(" GZIP ; q=0.001"));
	ck_assert(gz_accepted("br, *"));
	ck_assert(!gz_accepted(NULL));
	ck_assert(!gz_accepted(""));
	ck_assert(!gz_accepted("identity"));
	ck_assert(!gz_accepted("gzip;q=0"));
	ck_assert(!gz_accepted("gzip; q=0.0, br"));
	ck_assert(!gz_accepted("x-gzip2, gzipped"));
}
END_TEST

START_TEST(round_trip)
{
	char in[20000], back[20000], *gz;
	size_t n;
	z_stream z = { 0 };

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = "trainbpf_time_seconds_total{}\n"[i % 30];
	ck_assert_int_eq(gz_compress(in, sizeof(in), &gz, &n), 0);
	ck_assert(n < sizeof(in) / 10);
	ck_assert_int_eq((unsigned char)gz[0], 0x1f);	/* gzip's magic */
	ck_assert_int_eq((unsigned char)gz[1], 0x8b);
	ck_assert_int_eq(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)gz;
	z.avail_in = n;
	z.next_out = (Bytef *)back;
	z.avail_out = sizeof(back);
	ck_assert_int_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
	ck_assert_uint_eq(z.total_out, sizeof(in));
	ck_assert(!memcmp(in, back, sizeof(in)));
	inflateEnd(&z);
	free(gz);
	ck_assert_int_eq(gz_compress("", 0, &gz, &n), 0);
	free(gz);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gzip");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, accept_encoding_parsed);
	tcase_add_test(tc, round_trip);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
