// SPDX-License-Identifier: BSD-3-Clause
/* user/report/report_text.c, report_json.c: roll-up, JSON and text reports. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "sections.h"
#include "session.h"
#include "trace_py.h"

#define S 1000000000ull
#define W0 (100 * S)		/* window start, CLOCK_MONOTONIC */
#define NOW (W0 + 10 * S)

static struct session ses;
static struct run_counters ctr;

static void setup(void)
{
	session_init(&ses);
	memset(&ctr, 0, sizeof(ctr));
	ses.job.window_start_ns = W0;
	ses.job.window_start_unix = 1700000000.0;
}

static void teardown(void)
{
	session_free(&ses);
}

/*
 * The small job: a live trainer (pid 100, threads 100 and 101) and a
 * worker (pid 200) that ended at W0 + 4 s, whose comm needs escaping.
 */
#define ODD_COMM "q\"x\\y\n\001"
static void small_job(void)
{
	struct proc_rec *p;
	struct thread_rec *t;

	p = job_add_proc(&ses.job, 100, 1, "trainer", W0);
	p->role = TB_ROLE_TRAINER;
	p->root = true;
	t = job_add_thread(p, 100, "trainer", W0);
	t->own[TB_CPU] = t->cp[TB_CPU] = 6 * S;
	t->own[TB_COMM] = t->cp[TB_COMM] = 2 * S;
	t->own[TB_IO] = t->cp[TB_IO] = 1 * S;
	t->own[TB_IDLE] = t->cp[TB_IDLE] = 1 * S;
	t = job_add_thread(p, 101, "helper", W0 + S);
	t->own[TB_LOCK] = 3 * S + 123456789;
	t->own[TB_CPU] = 250000001;

	p = job_add_proc(&ses.job, 200, 100, ODD_COMM, W0 + S);
	p->role = TB_ROLE_WORKER;
	p->end_ns = W0 + 4 * S;
	t = job_add_thread(p, 200, ODD_COMM, W0 + S);
	t->end_ns = W0 + 4 * S;
	t->own[TB_CPU] = 2 * S;
	t->own[TB_DATA_WAIT] = S / 2;
}

static char *render(void (*fn)(FILE *, const struct session *,
			       const struct run_counters *, uint64_t))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	fn(f, &ses, &ctr, NOW);
	fclose(f);
	return buf;
}

static int count(const char *hay, const char *needle, const char *end)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) && p < end; p++)
		n++;
	return n;
}

/* The 8 values of the "time_s":{...} object that follows from. */
static void times_after(const char *from, double out[TB_NCAT])
{
	const char *o = strstr(from, "\"time_s\":{");
	const char *end;

	ck_assert_ptr_nonnull(o);
	end = strchr(o, '}');
	for (int c = 0; c < TB_NCAT; c++) {
		char key[32];
		const char *k;

		snprintf(key, sizeof(key), "\"%s\":", tb_cat_names[c]);
		k = strstr(o, key);
		ck_assert_msg(k && k < end, "no %s in time_s", key);
		ck_assert_int_eq(sscanf(k + strlen(key), "%lf", &out[c]), 1);
	}
}

static const char *find(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);

	ck_assert_msg(p != NULL, "missing %s", needle);
	return p;
}

START_TEST(rollup_groups_categories)
{
	uint64_t c[TB_NCAT] = {
		[TB_CPU] = 10, [TB_GPU_WAIT] = 20, [TB_COMM] = 30,
		[TB_DATA_WAIT] = 5, [TB_IO] = 15, [TB_RUNQUEUE] = 5,
		[TB_LOCK] = 5, [TB_IDLE] = 10,
	};
	double pct[TB_NROLLUP];

	rollup_pct(c, pct);
	ck_assert_double_eq_tol(pct[TB_R_COMPUTATION], 30.0, 1e-9);
	ck_assert_double_eq_tol(pct[TB_R_COMMUNICATION], 30.0, 1e-9);
	ck_assert_double_eq_tol(pct[TB_R_IO_DATA], 20.0, 1e-9);
	ck_assert_double_eq_tol(pct[TB_R_OTHER], 20.0, 1e-9);
}
END_TEST

START_TEST(rollup_each_category_in_its_group)
{
	static const int group[TB_NCAT] = {
		[TB_CPU] = TB_R_COMPUTATION, [TB_GPU_WAIT] = TB_R_COMPUTATION,
		[TB_COMM] = TB_R_COMMUNICATION, [TB_DATA_WAIT] = TB_R_IO_DATA,
		[TB_IO] = TB_R_IO_DATA, [TB_RUNQUEUE] = TB_R_OTHER,
		[TB_LOCK] = TB_R_OTHER, [TB_IDLE] = TB_R_OTHER,
	};

	for (int c = 0; c < TB_NCAT; c++) {
		uint64_t cats[TB_NCAT] = { 0 };
		double pct[TB_NROLLUP];

		cats[c] = 7;
		rollup_pct(cats, pct);
		ck_assert_msg(pct[group[c]] == 100.0, "%s not in group %d",
			      tb_cat_names[c], group[c]);
	}
}
END_TEST

START_TEST(rollup_sums_to_100)
{
	uint64_t c[TB_NCAT] = { 1, 3, 7, 11, 13, 17, 19, 23 };
	double pct[TB_NROLLUP], sum = 0;

	rollup_pct(c, pct);
	for (int r = 0; r < TB_NROLLUP; r++)
		sum += pct[r];
	ck_assert_double_eq_tol(sum, 100.0, 1e-9);
}
END_TEST

START_TEST(rollup_empty_is_all_zero)
{
	uint64_t c[TB_NCAT] = { 0 };
	double pct[TB_NROLLUP] = { 1, 2, 3, 4 };

	rollup_pct(c, pct);
	for (int r = 0; r < TB_NROLLUP; r++)
		ck_assert(pct[r] == 0.0);
}
END_TEST

START_TEST(json_starts_with_tool)
{
	char *out;

	small_job();
	out = render(report_json);
	ck_assert_msg(!strncmp(out, "{\"tool\":\"trainbpf\"", 18), "starts %.30s", out);
	free(out);
}
END_TEST

START_TEST(json_categories_each_once)
{
	char *out, *a, *end;

	small_job();
	out = render(report_json);
	a = strstr(out, "\"categories\":[");
	ck_assert_ptr_nonnull(a);
	end = strchr(a, ']');
	ck_assert_ptr_nonnull(end);
	for (int c = 0; c < TB_NCAT; c++) {
		char q[32];

		snprintf(q, sizeof(q), "\"%s\"", tb_cat_names[c]);
		ck_assert_msg(count(a, q, end) == 1, "%s not once", q);
	}
	ck_assert_int_eq(count(a, ",", end), TB_NCAT - 1);
	free(out);
}
END_TEST

START_TEST(json_process_time_is_sum_of_threads)
{
	static const struct { const char *proc; const char *tids[2]; } procs[] = {
		{ "{\"pid\":100,", { "{\"tid\":100,", "{\"tid\":101," } },
		{ "{\"pid\":200,", { "{\"tid\":200,", NULL } },
	};
	char *out;

	small_job();
	out = render(report_json);
	for (int i = 0; i < 2; i++) {
		const char *p = find(out, procs[i].proc);
		double pt[TB_NCAT], sum[TB_NCAT] = { 0 }, tt[TB_NCAT];

		times_after(p, pt);
		for (int j = 0; j < 2 && procs[i].tids[j]; j++) {
			times_after(find(p, procs[i].tids[j]), tt);
			for (int c = 0; c < TB_NCAT; c++)
				sum[c] += tt[c];
		}
		for (int c = 0; c < TB_NCAT; c++)
			ck_assert_msg(fabs(pt[c] - sum[c]) < 2e-9,
				      "%s %s: %.9f != %.9f", procs[i].proc,
				      tb_cat_names[c], pt[c], sum[c]);
	}
	/* And the values themselves, not just their consistency. */
	{
		double pt[TB_NCAT];

		times_after(find(out, "{\"pid\":100,"), pt);
		ck_assert_double_eq_tol(pt[TB_CPU], 6.250000001, 1e-10);
		ck_assert_double_eq_tol(pt[TB_LOCK], 3.123456789, 1e-10);
	}
	free(out);
}
END_TEST

START_TEST(json_end_s_null_when_live_number_when_ended)
{
	char *out;
	const char *e;
	double end;

	small_job();
	out = render(report_json);
	e = find(find(out, "{\"pid\":100,"), "\"end_s\":");
	ck_assert_msg(!strncmp(e + 8, "null", 4), "live end_s: %.20s", e);
	e = find(find(out, "{\"pid\":200,"), "\"end_s\":");
	ck_assert_int_eq(sscanf(e + 8, "%lf", &end), 1);
	ck_assert_double_eq_tol(end, 4.0, 1e-6);
	free(out);
}
END_TEST

START_TEST(json_end_s_from_threads_when_all_exited)
{
	struct proc_rec *p;
	char *out;
	const char *e;
	double end;

	p = job_add_proc(&ses.job, 300, 1, "gone", W0);
	job_add_thread(p, 300, "gone", W0)->end_ns = W0 + 2 * S;
	job_add_thread(p, 301, "gone", W0)->end_ns = W0 + 3 * S;
	out = render(report_json);
	e = find(find(out, "{\"pid\":300,"), "\"end_s\":");
	ck_assert_int_eq(sscanf(e + 8, "%lf", &end), 1);
	ck_assert_double_eq_tol(end, 3.0, 1e-6);
	free(out);
}
END_TEST

START_TEST(json_escapes_comm)
{
	char *out, *nl;

	small_job();
	out = render(report_json);
	ck_assert_int_eq(count(out, "\"comm\":\"q\\\"x\\\\y\\u000a\\u0001\"",
			       out + strlen(out)), 2);	/* process + thread */
	nl = strchr(out, '\n');
	ck_assert_msg(nl && nl[1] == '\0', "raw newline inside the JSON");
	ck_assert_ptr_null(strchr(out, '\001'));
	free(out);
}
END_TEST

START_TEST(json_headline_rollup)
{
	char *out;
	const char *h;
	double v;

	small_job();
	out = render(report_json);
	h = find(out, "\"rollup_pct\":{");
	ck_assert_int_eq(sscanf(find(h, "\"computation\":") + 14, "%lf", &v), 1);
	ck_assert_double_eq_tol(v, 60.0, 1e-3);
	ck_assert_int_eq(sscanf(find(h, "\"communication\":") + 16, "%lf", &v), 1);
	ck_assert_double_eq_tol(v, 20.0, 1e-3);
	ck_assert_int_eq(sscanf(find(h, "\"io_data\":") + 10, "%lf", &v), 1);
	ck_assert_double_eq_tol(v, 10.0, 1e-3);
	ck_assert_int_eq(sscanf(find(h, "\"other\":") + 8, "%lf", &v), 1);
	ck_assert_double_eq_tol(v, 10.0, 1e-3);
	free(out);
}
END_TEST

START_TEST(json_balanced_braces_and_brackets)
{
	char *out;
	int brace = 0, bracket = 0, in_str = 0;

	small_job();
	out = render(report_json);
	for (const char *p = out; *p; p++) {
		if (in_str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_str = 0;
			continue;
		}
		brace += (*p == '{') - (*p == '}');
		bracket += (*p == '[') - (*p == ']');
		in_str = *p == '"';
		ck_assert(brace >= 0 && bracket >= 0);
	}
	ck_assert_int_eq(brace, 0);
	ck_assert_int_eq(bracket, 0);
	ck_assert(!in_str);
	free(out);
}
END_TEST

START_TEST(esc_control_characters_and_backslash)
{
	char buf[ESC_LEN(16)];

	ck_assert_str_eq(report_esc(buf, sizeof(buf), "python3"), "python3");
	ck_assert_str_eq(report_esc(buf, sizeof(buf), "a\nb\tc\rd\\e"), "a\\nb\\tc\\rd\\\\e");
	ck_assert_str_eq(report_esc(buf, sizeof(buf), "\x1b[2J\x7f\x01"), "\\033[2J\\177\\001");
	/* UTF-8 stays; C1 (U+009B, CSI) in UTF-8 is escaped whole. */
	ck_assert_str_eq(report_esc(buf, sizeof(buf), "\xc3\xa9t\xc2\x9b"), "\xc3\xa9t\\302\\233");
	ck_assert_str_eq(report_esc(buf, sizeof(buf), "\xc2\xa0"), "\xc2\xa0");
}
END_TEST

/* A full buffer ends before an escape, never inside one. */
START_TEST(esc_cuts_between_escapes)
{
	char buf[6];

	ck_assert_str_eq(report_esc(buf, sizeof(buf), "ab\x1b"), "ab");
	ck_assert_str_eq(report_esc(buf, sizeof(buf), "a\x1b"), "a\\033");
	ck_assert_str_eq(report_esc(buf, sizeof(buf), "abcdefg"), "abcde");
	ck_assert_str_eq(report_esc(buf, sizeof(buf), "\xc2\x9b"), "");
}
END_TEST

START_TEST(text_has_headline_rollup_lines)
{
	char *out;

	small_job();
	out = render(report_text);
	find(out, "Headline: critical path of 1 trainer thread (10.00 s)\n");
	find(out, "  computation     60.0%   cpu 60.0% gpu_wait 0.0%\n");
	find(out, "  communication   20.0%   comm 20.0%\n");
	find(out, "  io & data       10.0%   data_wait 0.0% io 10.0%\n");
	find(out, "  other           10.0%   runqueue 0.0% lock 0.0% idle 10.0%\n");
	free(out);
}
END_TEST

START_TEST(text_empty_job_headline_is_zero)
{
	char *out = render(report_text);

	find(out, "Headline: critical path of 0 trainer threads (0.00 s)\n");
	find(out, "  computation      0.0%");
	free(out);
}
END_TEST

/* What a Python track wrote: "B3@0" per frame event, in order. */
struct frames_seen {
	char buf[512];
};

static void frame_seen(void *ctx, int key, uint64_t ts, bool begin)
{
	struct frames_seen *f = ctx;
	size_t n = strlen(f->buf);

	snprintf(f->buf + n, sizeof(f->buf) - n, "%s%c%d@%llu", n ? " " : "", begin ? 'B' : 'E',
		 key, (unsigned long long)ts);
}

/*
 * trace_py.c: frames open where a span's stack first has them and close
 * where one no longer does; a gap longer than the period closes them all;
 * a span that begins before the last ended begins at its end.
 */
START_TEST(python_track_nests_frames_in_time_order)
{
	struct frames_seen f = { "" };
	struct py_track t = { .gap_ns = 10, .frame = frame_seen, .ctx = &f };

	py_track_span(&t, 0, 5, (int[]){ 1, 2, 3 }, 3);
	py_track_span(&t, 5, 8, (int[]){ 1, 2, 4 }, 3);
	py_track_span(&t, 12, 15, (int[]){ 1, 2, 4 }, 3);	/* 4 short of a period: spans it */
	py_track_span(&t, 30, 31, (int[]){ 1, 5 }, 2);		/* 15: closes all at 15 */
	py_track_span(&t, 29, 33, (int[]){ 1, 5, 6 }, 3);	/* a sample's period, cut at 31 */
	py_track_span(&t, 30, 33, (int[]){ 2 }, 1);		/* all before 33: no time */
	py_track_span(&t, 33, 40, (int[]){ 1 }, 1);
	py_track_end(&t);
	ck_assert_str_eq(f.buf, "B1@0 B2@0 B3@0 E3@5 B4@5 E4@15 E2@15 E1@15 B1@30 B5@30 "
			 "B6@31 E6@33 E5@33 E1@40");
}
END_TEST

/* A stack's frames as a track's keys: outermost first, what was not read in its place. */
START_TEST(python_track_keys_say_what_was_not_read)
{
	int fn[TB_PY_INNER + 2], keys[PY_KEYS_MAX], n;
	struct py_stack st = { .depth = TB_PY_INNER + 2, .cut = 7 | TB_PY_CUT_OUTER, .fn = fn };

	for (int i = 0; i < st.depth; i++)
		fn[i] = 100 + i;	/* innermost first */
	n = py_track_keys(&st, keys);
	ck_assert_int_eq(n, st.depth + 2);
	ck_assert_int_eq(keys[0], PY_KEY_OUTER);
	ck_assert_int_eq(keys[1], 100 + TB_PY_INNER + 1);
	ck_assert_int_eq(keys[2], 100 + TB_PY_INNER);
	ck_assert_int_eq(keys[3], PY_KEY_CUT(7));
	ck_assert_int_eq(keys[4], 100 + TB_PY_INNER - 1);
	ck_assert_int_eq(keys[n - 1], 100);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("report");
	TCase *tc = tcase_create("report");
	SRunner *sr;
	int nfail;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, rollup_groups_categories);
	tcase_add_test(tc, rollup_each_category_in_its_group);
	tcase_add_test(tc, rollup_sums_to_100);
	tcase_add_test(tc, rollup_empty_is_all_zero);
	tcase_add_test(tc, json_starts_with_tool);
	tcase_add_test(tc, json_categories_each_once);
	tcase_add_test(tc, json_process_time_is_sum_of_threads);
	tcase_add_test(tc, json_end_s_null_when_live_number_when_ended);
	tcase_add_test(tc, json_end_s_from_threads_when_all_exited);
	tcase_add_test(tc, json_escapes_comm);
	tcase_add_test(tc, json_headline_rollup);
	tcase_add_test(tc, json_balanced_braces_and_brackets);
	tcase_add_test(tc, esc_control_characters_and_backslash);
	tcase_add_test(tc, esc_cuts_between_escapes);
	tcase_add_test(tc, text_has_headline_rollup_lines);
	tcase_add_test(tc, text_empty_job_headline_is_zero);
	tcase_add_test(tc, python_track_nests_frames_in_time_order);
	tcase_add_test(tc, python_track_keys_say_what_was_not_read);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail ? EXIT_FAILURE : EXIT_SUCCESS;
}
