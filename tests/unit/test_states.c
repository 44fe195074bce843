// SPDX-License-Identifier: BSD-3-Clause
/* user/acquire/states.c: batching of the state stream and its text form. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "states.h"

/* What a states_fn saw: batch sizes and the records in order. */
struct sink {
	size_t calls, total, max_batch;
	uint64_t next_start;	/* records must arrive in push order */
	int fail_at_call;	/* 1-based; 0: never */
};

static int collect(void *ctx, const struct tb_state_rec *recs, size_t n)
{
	struct sink *k = ctx;

	k->calls++;
	if (n > k->max_batch)
		k->max_batch = n;
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_eq(recs[i].start_ns, k->next_start);
		k->next_start = recs[i].end_ns;
	}
	k->total += n;
	return k->calls == (size_t)k->fail_at_call ? -EIO : 0;
}

static struct tb_state_rec rec(uint64_t i)
{
	struct tb_state_rec r = { .tid = 7, .pid = 7, .start_ns = i * 10,
				  .end_ns = i * 10 + 10, .cat = TB_CPU, .cp_cat = TB_CPU };
	return r;
}

START_TEST(batches_are_full_then_the_rest)
{
	struct sink k = {};
	struct states st;
	size_t n = 2 * TB_STATES_BATCH + 5;

	ck_assert_int_eq(states_init(&st, collect, &k), 0);
	for (size_t i = 0; i < n; i++) {
		struct tb_state_rec r = rec(i);

		ck_assert_int_eq(states_push(&st, &r), 0);
	}
	ck_assert_uint_eq(k.calls, 2);	/* full batches only, until a flush */
	ck_assert_int_eq(states_flush(&st), 0);
	ck_assert_int_eq(states_flush(&st), 0);	/* nothing left: no empty call */
	ck_assert_uint_eq(k.calls, 3);
	ck_assert_uint_eq(k.total, n);
	ck_assert_uint_eq(k.max_batch, TB_STATES_BATCH);
	ck_assert_uint_eq(st.delivered, n);
	states_close(&st);
}
END_TEST

START_TEST(a_failing_writer_stops_and_is_remembered)
{
	struct sink k = { .fail_at_call = 1 };
	struct states st;
	int err = 0;

	ck_assert_int_eq(states_init(&st, collect, &k), 0);
	for (size_t i = 0; i < TB_STATES_BATCH && !err; i++) {
		struct tb_state_rec r = rec(i);

		err = states_push(&st, &r);
	}
	ck_assert_int_eq(err, -EIO);
	ck_assert_int_eq(st.err, -EIO);
	ck_assert_uint_eq(st.n, 0);
	states_close(&st);
}
END_TEST

START_TEST(tsv_lines_name_the_categories)
{
	struct tb_state_rec r[2] = { rec(1), rec(2) };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	r[1].cat = TB_LOCK;
	r[1].cp_cat = TB_DATA_WAIT;
	ck_assert_int_eq(states_write_tsv(f, r, 2), 0);
	fclose(f);
	ck_assert_str_eq(buf, "7\t7\t10\t20\tcpu\tcpu\n7\t7\t20\t30\tlock\tdata_wait\n");
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("states");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, batches_are_full_then_the_rest);
	tcase_add_test(tc, a_failing_writer_stops_and_is_remembered);
	tcase_add_test(tc, tsv_lines_name_the_categories);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
