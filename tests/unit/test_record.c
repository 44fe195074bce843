// SPDX-License-Identifier: BSD-3-Clause
/* user/record/record*.c: the file's header, samples as gains, idle rows, events. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "record.h"
#include "session.h"

#define S 1000000000ull

static struct session ses;
static struct recorder rec;
static char path[] = "/tmp/test_record_XXXXXX";

static int64_t one(const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	ck_assert_int_eq(sqlite3_prepare_v2(rec.db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void setup(void)
{
	struct record_meta m = { "train --fast", "auto" };
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	session_init(&ses);
	ses.job.window_start_ns = 10 * S;
	ck_assert_int_eq(record_open(&rec, path, false, &m, &ses), 0);
}

static void teardown(void)
{
	char side[64];

	record_close(&rec);
	session_free(&ses);
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	strcpy(path, "/tmp/test_record_XXXXXX");
}

/* record_job in its own transaction, as a flush does. */
static void flush_job(uint64_t now, bool last)
{
	ck_assert_int_eq(sqlite3_exec(rec.db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(record_job(&rec, &ses, now, last), 0);
	ck_assert_int_eq(sqlite3_exec(rec.db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
}

START_TEST(header_and_start_meta)
{
	sqlite3_stmt *st;

	ck_assert_int_eq(one("PRAGMA application_id"), REC_APP_ID);
	ck_assert_int_eq(one("PRAGMA user_version"), REC_SCHEMA_VERSION);
	ck_assert_int_eq(one("SELECT count(*) FROM meta WHERE key = 'complete'"), 0);
	ck_assert_int_eq(one("SELECT value FROM meta WHERE key = 'start_mono_ns'"), 10 * S);
	sqlite3_prepare_v2(rec.db, "SELECT value FROM meta WHERE key = 'command'", -1, &st, NULL);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "train --fast");
	sqlite3_finalize(st);
}
END_TEST

START_TEST(samples_are_gains_and_sum_to_totals)
{
	struct proc_rec *p = job_add_proc(&ses.job, 100, 1, "train", 10 * S);
	struct thread_rec *t = job_add_thread(p, 100, "train", 10 * S);

	t->own[TB_CPU] = t->cp[TB_CPU] = 600;
	t->own[TB_IDLE] = t->cp[TB_IDLE] = 400;
	flush_job(11 * S, false);
	/* The open wait closed as data_wait: idle gives time back. */
	t->own[TB_CPU] = t->cp[TB_CPU] = 900;
	t->own[TB_IDLE] = t->cp[TB_IDLE] = 100;
	t->own[TB_DATA_WAIT] = t->cp[TB_DATA_WAIT] = 1000;
	flush_job(12 * S, false);
	flush_job(13 * S, false);	/* nothing gained: no row */
	ck_assert_int_eq(one("SELECT count(*) FROM samples"), 2);
	ck_assert_int_eq(one("SELECT idle FROM samples WHERE ts_ns = 12000000000"), -300);
	ck_assert_int_eq(one("SELECT sum(cpu) FROM samples"), 900);
	ck_assert_int_eq(one("SELECT sum(idle) FROM samples"), 100);
	ck_assert_int_eq(one("SELECT sum(cp_data_wait) FROM samples"), 1000);
	ck_assert_int_eq(one("SELECT count(*) FROM threads"), 1);
	ck_assert_int_eq(one("SELECT count(*) FROM processes"), 1);
}
END_TEST

START_TEST(a_thread_not_read_at_a_flush_waits_for_the_next)
{
	struct proc_rec *p = job_add_proc(&ses.job, 100, 1, "train", 10 * S);
	struct thread_rec *t = job_add_thread(p, 100, "train", 10 * S);

	t->slot = 3;
	t->own[TB_CPU] = t->cp[TB_CPU] = S;
	t->read_ns = 11 * S;
	flush_job(11 * S, false);
	/* Its slot was held by BPF all through the 12 s read: totals of 11 s. */
	flush_job(12 * S, false);
	ck_assert_int_eq(one("SELECT count(*) FROM samples"), 1);
	t->own[TB_CPU] = t->cp[TB_CPU] = 3 * S;
	t->read_ns = 13 * S;
	flush_job(13 * S, false);
	ck_assert_int_eq(one("SELECT count(*) FROM samples"), 2);
	ck_assert_int_eq(one("SELECT cpu FROM samples WHERE ts_ns = 13000000000"), 2 * S);
	/* Exited: final totals, whenever they were read. */
	t->slot = -1;
	t->end_ns = 13 * S + 5;
	t->own[TB_CPU] = t->cp[TB_CPU] = 3 * S + 5;
	flush_job(14 * S, true);
	ck_assert_int_eq(one("SELECT sum(cpu) FROM samples"), 3 * S + 5);
}
END_TEST

START_TEST(idle_only_thread_gets_a_row_a_minute_and_at_the_end)
{
	struct proc_rec *p = job_add_proc(&ses.job, 100, 1, "train", 10 * S);
	struct thread_rec *t = job_add_thread(p, 101, "pool", 10 * S);

	for (uint64_t s = 1; s <= 70; s++) {
		t->own[TB_IDLE] = t->cp[TB_IDLE] = s * S;
		flush_job((10 + s) * S, false);
	}
	ck_assert_int_eq(one("SELECT count(*) FROM samples"), 1);
	ck_assert_int_eq(one("SELECT ts_ns FROM samples"), 71 * S);
	flush_job(80 * S, true);
	ck_assert_int_eq(one("SELECT count(*) FROM samples"), 2);
	ck_assert_int_eq(one("SELECT sum(idle) FROM samples"), 70 * S);
}
END_TEST

START_TEST(process_end_and_moved_start_update_one_row)
{
	struct proc_rec *p = job_add_proc(&ses.job, 100, 1, "train", 10 * S);

	job_add_thread(p, 100, "train", 10 * S);
	flush_job(11 * S, false);
	p->start_ns = 9 * S;	/* the fork event came after the slot */
	p->end_ns = 12 * S;
	p->exit_code = 256;
	flush_job(12 * S, false);
	ck_assert_int_eq(one("SELECT count(*) FROM processes"), 1);
	ck_assert_int_eq(one("SELECT start_ns FROM processes"), 9 * S);
	ck_assert_int_eq(one("SELECT exit_code FROM processes"), 256);
}
END_TEST

START_TEST(lifecycle_events_are_queued_until_a_flush)
{
	struct tb_event fork = { .type = TB_EV_FORK, .pid = 200, .ppid = 100, .ts = 11 * S };
	struct tb_event exit = { .type = TB_EV_EXIT, .pid = 200, .exit_code = 9, .ts = 12 * S };

	record_on_lifecycle(&rec, &fork);
	record_on_lifecycle(&rec, &exit);
	ck_assert_int_eq(one("SELECT count(*) FROM events"), 0);
	ck_assert_int_eq(sqlite3_exec(rec.db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(record_events(&rec, &ses), 0);
	ck_assert_int_eq(sqlite3_exec(rec.db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(one("SELECT ppid FROM events WHERE type = 'fork'"), 100);
	ck_assert_int_eq(one("SELECT code FROM events WHERE type = 'exit'"), 9);
	ck_assert_int_eq(one("SELECT count(*) FROM events WHERE type = 'fork' AND code IS NULL"), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("record");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nfail;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, header_and_start_meta);
	tcase_add_test(tc, samples_are_gains_and_sum_to_totals);
	tcase_add_test(tc, a_thread_not_read_at_a_flush_waits_for_the_next);
	tcase_add_test(tc, idle_only_thread_gets_a_row_a_minute_and_at_the_end);
	tcase_add_test(tc, process_end_and_moved_start_update_one_row);
	tcase_add_test(tc, lifecycle_events_are_queued_until_a_flush);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail ? EXIT_FAILURE : EXIT_SUCCESS;
}
