// SPDX-License-Identifier: BSD-3-Clause
/*
 * Epochs without BPF: which printed lines start an epoch, markers, how a
 * boundary between two refreshes splits the totals, step statistics.
 */
#include <check.h>
#include <string.h>
#include "epochs.h"
#include "job.h"

#define MS 1000000ull

static struct tb_text_event text(uint32_t type, uint64_t ts, const char *s)
{
	struct tb_text_event e = { .type = type, .ts = ts, .fd = 1 };

	e.len = strlen(s);
	memcpy(e.text, s, e.len);
	return e;
}

static void feed(struct epochs *ep, uint32_t type, uint64_t ts, const char *s)
{
	struct tb_text_event e = text(type, ts, s);

	epochs_on_event(ep, &e);
}

static void init(struct epochs *ep, enum ep_source src, const char *re)
{
	char why[128];

	ck_assert_int_eq(epochs_init(ep, src, 1.0, re, 0, why, sizeof(why)), 0);
}

/* One process whose main thread spends its time as cpu at rate 1. */
static void job_at(struct job *job, struct proc_rec *p, struct thread_rec *t,
		   uint64_t cpu_ns)
{
	memset(job, 0, sizeof(*job));
	memset(p, 0, sizeof(*p));
	memset(t, 0, sizeof(*t));
	p->pid = t->tid = 100;
	p->role = TB_ROLE_TRAINER;
	p->threads = t;
	p->nthreads = 1;
	t->own[TB_CPU] = t->cp[TB_CPU] = cpu_ns;
	job->procs = p;
	job->nprocs = 1;
}

START_TEST(default_regex_forms)
{
	static const struct { const char *line; long label; } yes[] = {
		{ "Epoch 3", 3 }, { "Epoch 4/10", 4 }, { "epoch=5 loss=1.0", 5 },
		{ "Epoch 6: 45%|####  | 9/20 [00:01<00:02]", 6 },
		{ "{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 7.0}", 7 },
		{ "[rank0] EPOCH [8/10]", 8 },
	};
	static const char *const no[] = {
		"num_epochs=10", "epochs: 10", "loss 0.5", "preepoch 3",
	};
	struct epochs ep;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		init(&ep, EP_REGEX, NULL);
		feed(&ep, TB_EV_TEXT, 10, yes[i].line);
		ck_assert_msg(ep.src[EP_REGEX].npend == 1, "no match: %s", yes[i].line);
		ck_assert_int_eq(ep.src[EP_REGEX].pend[0].label, yes[i].label);
		epochs_free(&ep);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		init(&ep, EP_REGEX, NULL);
		feed(&ep, TB_EV_TEXT, 10, no[i]);
		ck_assert_msg(ep.src[EP_REGEX].npend == 0, "matched: %s", no[i]);
		epochs_free(&ep);
	}
}
END_TEST

START_TEST(repeated_lines_are_one_boundary)
{
	struct epochs ep;

	init(&ep, EP_REGEX, NULL);
	/* tqdm redraws the same epoch's bar with \r, several per write. */
	feed(&ep, TB_EV_TEXT, 10, "\rEpoch 1: 10%\rEpoch 1: 20%");
	feed(&ep, TB_EV_TEXT, 20, "\rEpoch 1: 90%\n");
	feed(&ep, TB_EV_TEXT, 30, "\rEpoch 2: 0%");
	ck_assert_int_eq(ep.src[EP_REGEX].npend, 2);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[0].ts, 10);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[1].ts, 30);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[1].label, 2);
	epochs_free(&ep);
}
END_TEST

START_TEST(regex_without_number_counts)
{
	struct epochs ep;

	init(&ep, EP_REGEX, "^=== new round");
	feed(&ep, TB_EV_TEXT, 10, "=== new round\n");
	feed(&ep, TB_EV_TEXT, 20, "=== new round\n");
	ck_assert_int_eq(ep.src[EP_REGEX].npend, 2);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[1].label, 2);
	epochs_free(&ep);
}
END_TEST

START_TEST(markers_and_source_choice)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;

	init(&ep, EP_AUTO, NULL);
	job_at(&job, &p, &t, 0);
	feed(&ep, TB_EV_TEXT, 5 * MS, "Epoch 1/2\n");
	epochs_tick(&ep, &job, 10 * MS);
	ck_assert_int_eq(epochs_source(&ep), EP_REGEX);
	feed(&ep, TB_EV_MARK, 20 * MS, "TRAINBPF epoch 1\n");
	feed(&ep, TB_EV_MARK, 25 * MS, "TRAINBPF step 0\n");
	epochs_tick(&ep, &job, 30 * MS);
	ck_assert_int_eq(epochs_source(&ep), EP_MARKER);	/* a marker outranks lines */
	ck_assert_int_eq(ep.nsteps, 1);
	feed(&ep, TB_EV_MARK, 40 * MS, "TRAINBPF bogus\n");
	ck_assert(!epochs_pending(&ep));
	epochs_free(&ep);
}
END_TEST

START_TEST(boundary_interpolated_between_refreshes)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	const struct epoch *e;

	init(&ep, EP_MARKER, NULL);
	job_at(&job, &p, &t, 100 * MS);
	epochs_tick(&ep, &job, 100 * MS);
	feed(&ep, TB_EV_MARK, 150 * MS, "TRAINBPF epoch 1\n");
	job_at(&job, &p, &t, 200 * MS);
	epochs_tick(&ep, &job, 200 * MS);	/* totals at 150: 150 ms */
	feed(&ep, TB_EV_MARK, 260 * MS, "TRAINBPF epoch 2\n");
	job_at(&job, &p, &t, 300 * MS);
	epochs_tick(&ep, &job, 300 * MS);	/* at 260: 260 ms */
	ck_assert_int_eq(ep.src[EP_MARKER].n, 1);
	e = &ep.src[EP_MARKER].list[0];
	ck_assert_int_eq(e->label, 1);
	ck_assert(e->complete);
	ck_assert_int_eq(e->start, 150 * MS);
	ck_assert_int_eq(e->end, 260 * MS);
	ck_assert_int_eq(e->n, 1);
	ck_assert_int_eq(e->d[0].own[TB_CPU], 110 * MS);
	ck_assert_int_eq(e->d[0].main_cp[TB_CPU], 110 * MS);
	job_at(&job, &p, &t, 400 * MS);
	epochs_finish(&ep, &job, 400 * MS);
	ck_assert_int_eq(ep.src[EP_MARKER].n, 2);
	e = &ep.src[EP_MARKER].list[1];
	ck_assert(!e->complete);
	ck_assert_int_eq(e->d[0].own[TB_CPU], 140 * MS);
	epochs_free(&ep);
}
END_TEST

START_TEST(step_statistics)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	const struct ep_steps *s;

	init(&ep, EP_MARKER, NULL);
	job_at(&job, &p, &t, 0);
	feed(&ep, TB_EV_MARK, 0, "TRAINBPF epoch 1\n");
	feed(&ep, TB_EV_MARK, 10 * MS, "TRAINBPF step 1\n");
	feed(&ep, TB_EV_MARK, 20 * MS, "TRAINBPF step 2\n");
	feed(&ep, TB_EV_MARK, 50 * MS, "TRAINBPF step 3\n");
	feed(&ep, TB_EV_MARK, 60 * MS, "TRAINBPF epoch 2\n");
	epochs_tick(&ep, &job, 70 * MS);
	s = &ep.src[EP_MARKER].list[0].steps;
	ck_assert_int_eq(s->count, 3);	/* 10, 30 and 10 ms: the last ends with the epoch */
	ck_assert_double_eq_tol(s->total_ms, 50.0, 1e-9);
	ck_assert_double_eq_tol(s->min_ms, 10.0, 1e-9);
	ck_assert_double_eq_tol(s->max_ms, 30.0, 1e-9);
	epochs_free(&ep);
}
END_TEST

START_TEST(parse_sources)
{
	enum ep_source s;
	double iv = 0;

	ck_assert_int_eq(epochs_parse_source("auto", &s, &iv), 0);
	ck_assert_int_eq(s, EP_AUTO);
	ck_assert_int_eq(epochs_parse_source("interval:2.5", &s, &iv), 0);
	ck_assert_int_eq(s, EP_INTERVAL);
	ck_assert_double_eq(iv, 2.5);
	ck_assert_int_ne(epochs_parse_source("interval", &s, &iv), 0);
	ck_assert_int_ne(epochs_parse_source("interval:0", &s, &iv), 0);
	ck_assert_int_eq(epochs_parse_source("workers", &s, &iv), 0);
	ck_assert_int_eq(s, EP_WORKERS);
	ck_assert_int_ne(epochs_parse_source("worker", &s, &iv), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("epochs");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, default_regex_forms);
	tcase_add_test(tc, repeated_lines_are_one_boundary);
	tcase_add_test(tc, regex_without_number_counts);
	tcase_add_test(tc, markers_and_source_choice);
	tcase_add_test(tc, boundary_interpolated_between_refreshes);
	tcase_add_test(tc, step_statistics);
	tcase_add_test(tc, parse_sources);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
