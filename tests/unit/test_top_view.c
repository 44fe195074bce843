// SPDX-License-Identifier: BSD-3-Clause
/*
 * user/report/top_view.c, `trainbpf top`'s table, over series built by
 * hand: the shares are what each series' counters grew by since the last
 * table, rows come by job and rank, trainers only, a stalled rank says so,
 * a job's top finding is its most severe, a name is cut to its column on a
 * character's boundary, and the processes of a chosen row are its job's.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "top_view.h"

#define S 1000000000ull

static struct metrics m;
static struct top_view tv;

static struct mx_series *add(const char *job, int rank, int role)
{
	struct mx_series *s;

	m.series = realloc(m.series, (m.nseries + 1) * sizeof(*m.series));
	s = &m.series[m.nseries++];
	memset(s, 0, sizeof(*s));
	snprintf(s->job, sizeof(s->job), "%s", job);
	s->rank = rank;
	s->role = role;
	s->live = 1;
	s->alive_ns = 1;
	s->culprit_phase = s->culprit_wait = -1;
	return s;
}

static char *draw(uint64_t now, int sel, bool tty)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	top_view_draw(f, &tv, &m, now, sel, 0, tty);
	fclose(f);
	return text;
}

/* The line of job's rank (its first); NULL if none. */
static char *line_of(char *text, const char *start)
{
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		if (!strncmp(l, start, strlen(start)))
			return l;
	return NULL;
}

static void setup(void)
{
	memset(&m, 0, sizeof(m));
	memset(&tv, 0, sizeof(tv));
}

static void teardown(void)
{
	free(m.series);
	free(m.jobs);
	free(m.procs);
}

START_TEST(shares_of_the_last_interval)
{
	struct mx_series *a = add("run-b", 1, TB_ROLE_TRAINER), *b, *w;
	char *text, *l;

	b = add("run-a", 0, TB_ROLE_TRAINER);
	w = add("run-a", 0, TB_ROLE_WORKER);
	a->phases = b->phases = true;
	a->v.phase_ns[PH_DATA] = 10 * S;	/* before the first table: not in the shares */
	text = draw(10 * S, 0, false);
	ck_assert_ptr_nonnull(strstr(text, "trainbpf top: 2 training jobs, 2 ranks\n"));
	ck_assert_ptr_nonnull(strstr(text, "(first look)"));
	free(text);
	/* 2 s later: a's 1 s data, 0.5 s forward, 0.5 s backward; b stalled */
	a->v.phase_ns[PH_DATA] += 1 * S;
	a->v.phase_ns[PH_FORWARD] += S / 2;
	a->v.phase_ns[PH_BACKWARD] += S / 2;
	a->v.cat_ns[TB_DATA_WAIT] = 1 * S;
	a->v.cat_ns[TB_CPU] = 1 * S + 1;
	a->v.steps = 20;
	a->step_now_ms = 100;
	b->stalled = true;
	b->culprit_phase = PH_DATA;
	w->v.cat_ns[TB_CPU] = 5 * S;
	text = draw(12 * S, 0, false);
	/* rows by job: run-a first, then run-b; the worker has none */
	ck_assert_ptr_nonnull(strstr(text, "\nrun-a "));
	ck_assert(strstr(text, "\nrun-a ") < strstr(text, "\nrun-b "));
	l = line_of(text, "run-b");
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(l, "run-b                   1    100.0    10.0  50.0  25.0  25.0   0.0"
			    "   0.0   0.0   0.0   0.0  cpu 50%");
	free(text);
	text = draw(13 * S, 0, false);
	ck_assert_ptr_nonnull(strstr(text, "STALLED (the culprit)"));
	free(text);
}
END_TEST

START_TEST(the_jobs_top_finding)
{
	struct mx_series *a = add("run-a", 0, TB_ROLE_TRAINER);
	char *text;

	(void)a;
	m.jobs = calloc(1, sizeof(*m.jobs));
	m.njobs = 1;
	snprintf(m.jobs[0].job, sizeof(m.jobs[0].job), "run-a");
	for (int k = 0; k < DG_NIDS; k++)
		m.jobs[0].severity[k] = -1;
	m.jobs[0].severity[DG_DATA_LOADING] = 0.75;
	m.jobs[0].severity[DG_CPU_CONTENTION] = 0.5;
	text = draw(S, 0, false);
	ck_assert_ptr_nonnull(strstr(text, "  data_loading (0.75)\n"));
	free(text);
}
END_TEST

START_TEST(names_cut_whole_and_the_choice_shown)
{
	char *text;

	/* 19 bytes, then a 2-byte character across the 20th: cut before it */
	add("abcdefghijklmnopqrs\xc3\xa9xyz", 0, TB_ROLE_TRAINER);
	add("run-z", 3, TB_ROLE_TRAINER);
	text = draw(S, 1, true);
	ck_assert_ptr_nonnull(strstr(text, "abcdefghijklmnopqrs  "));
	ck_assert_ptr_null(strstr(text, "\xc3"));
	/* the chosen row in reverse video, each line cleared to its end */
	ck_assert_ptr_nonnull(strstr(text, "\033[7mrun-z"));
	ck_assert_ptr_nonnull(strstr(text, "\033[K"));
	free(text);
}
END_TEST

START_TEST(pids_of_the_chosen_job)
{
	pid_t pids[8];

	add("run-b", 0, TB_ROLE_TRAINER);
	add("run-a", 0, TB_ROLE_TRAINER);
	add("run-a", 1, TB_ROLE_TRAINER);
	m.procs = calloc(4, sizeof(*m.procs));
	m.nprocs = 4;
	m.procs[0] = (struct mx_proc){ .pid = 100, .series = 0 };
	m.procs[1] = (struct mx_proc){ .pid = 200, .series = 1 };
	m.procs[2] = (struct mx_proc){ .pid = 201, .series = 2 };
	m.procs[3] = (struct mx_proc){ .pid = 300, .series = -1 };
	free(draw(S, 0, false));
	/* row 0 is run-a (sorted): its two ranks */
	ck_assert_int_eq(top_view_pids(&tv, &m, 0, pids, 8), 2);
	ck_assert_int_eq(pids[0], 200);
	ck_assert_int_eq(pids[1], 201);
	ck_assert_int_eq(top_view_pids(&tv, &m, 2, pids, 8), 1);
	ck_assert_int_eq(pids[0], 100);
	ck_assert_int_eq(top_view_pids(&tv, &m, 3, pids, 8), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("top_view");
	TCase *tc = tcase_create("table");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, shares_of_the_last_interval);
	tcase_add_test(tc, the_jobs_top_finding);
	tcase_add_test(tc, names_cut_whole_and_the_choice_shown);
	tcase_add_test(tc, pids_of_the_chosen_job);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
