// SPDX-License-Identifier: BSD-3-Clause
/*
 * Steps without BPF: the period finder on synthetic symbol sequences, the
 * phase, and the stream of call events turned into step starts and syncs.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "epochs.h"
#include "steps.h"

#define US 1000ull
#define MS 1000000ull
#define N 400

static struct st_sym sym(int api, int gap)
{
	return (struct st_sym){ .api = api, .gap = gap };
}

/* reps repetitions of pat[0..p) into s; returns the length. */
static int repeat(struct st_sym *s, const struct st_sym *pat, int p, int reps)
{
	for (int i = 0; i < p * reps; i++)
		s[i] = pat[i % p];
	return p * reps;
}

START_TEST(exact_period)
{
	struct st_sym pat[] = { sym(1, 9), sym(1, 0), sym(2, 4), sym(3, 2), sym(4, 6) };
	struct st_sym s[N];
	double score;
	int n = repeat(s, pat, 5, 20);

	ck_assert_int_eq(steps_find_period(s, n, &score), 5);
	ck_assert_double_eq_tol(score, 1.0, 1e-12);
	/* A step starts after the widest gap: position 0 (bucket 9). */
	ck_assert_int_eq(steps_phase(s, n, 5), 0);
	ck_assert_int_eq(steps_phase(s + 2, n - 2, 5), 3);
}
END_TEST

START_TEST(same_api_different_gaps)
{
	struct st_sym pat[] = { sym(7, 8), sym(7, 3), sym(7, 6) };
	struct st_sym s[N];
	int n = repeat(s, pat, 3, 30);

	ck_assert_int_eq(steps_find_period(s, n, NULL), 3);
	/* Gaps one bucket apart are the same gap: then the period is 1. */
	pat[1].gap = 7;
	pat[2].gap = 8;
	n = repeat(s, pat, 3, 30);
	ck_assert_int_eq(steps_find_period(s, n, NULL), 1);
}
END_TEST

START_TEST(noise_tolerated)
{
	struct st_sym pat[] = { sym(1, 9), sym(1, 0), sym(2, 4), sym(3, 2), sym(4, 6),
				sym(2, 5) };
	struct st_sym s[N];
	int n = repeat(s, pat, 6, 50);
	double score;

	srand(1);
	/* 2% of the calls disturbed (a preemption in a gap): ~4% of pairs miss. */
	for (int i = 0; i < n / 50; i++)
		s[rand() % n].gap = 20;
	ck_assert_int_eq(steps_find_period(s, n, &score), 6);
	ck_assert(score >= ST_MATCH && score < 1.0);
}
END_TEST

START_TEST(too_few_repetitions)
{
	struct st_sym pat[] = { sym(1, 9), sym(1, 0), sym(2, 4), sym(3, 2), sym(4, 6),
				sym(5, 1) };
	struct st_sym s[N];

	/* 3 periods of 6: fewer than ST_MIN_REPS. */
	ck_assert_int_eq(steps_find_period(s, repeat(s, pat, 6, 3), NULL), 0);
	ck_assert_int_eq(steps_find_period(s, repeat(s, pat, 6, 4), NULL), 6);
	/* Fewer than ST_MIN_CALLS calls, whatever the period. */
	ck_assert_int_eq(steps_find_period(s, repeat(s, pat, 1, 15), NULL), 0);
	ck_assert_int_eq(steps_find_period(s, repeat(s, pat, 1, 16), NULL), 1);
}
END_TEST

START_TEST(aperiodic)
{
	struct st_sym s[N];

	srand(2);
	for (int i = 0; i < N; i++)
		s[i] = sym(rand() % 5, rand() % 9);
	ck_assert_int_eq(steps_find_period(s, N, NULL), 0);
}
END_TEST

START_TEST(long_period_of_alike_calls)
{
	struct st_sym pat[20], s[N];
	double score;

	/* 19 alike all-reduces and a sync: lag 1 scores 0.9, lag 20 scores 1. */
	for (int i = 0; i < 19; i++)
		pat[i] = sym(1, 2);
	pat[19] = sym(2, 9);
	ck_assert_int_eq(steps_find_period(s, repeat(s, pat, 20, 10), &score), 20);
	ck_assert_double_eq_tol(score, 1.0, 1e-12);
}
END_TEST

START_TEST(gap_buckets)
{
	ck_assert_int_eq(steps_gap_bucket(0), 0);
	ck_assert_int_eq(steps_gap_bucket(15999), 0);
	ck_assert_int_eq(steps_gap_bucket(16 * US), 1);
	ck_assert_int_eq(steps_gap_bucket(100 * US), 3);
	ck_assert_int_eq(steps_gap_bucket(1 * MS), 6);
	ck_assert_int_eq(steps_gap_bucket(4 * MS), 8);
}
END_TEST

static void call(struct steps *st, pid_t tid, int api, int kind, uint64_t entry,
		 uint64_t dur)
{
	struct tb_call_event e = { .type = TB_EV_CALL, .pid = 100, .tid = tid, .api = api,
				   .kind = kind, .entry = entry, .ret = entry + dur };

	steps_on_event(st, &e);
}

/*
 * Steps of 10 ms starting at t0 + 10 ms * i: all-reduce, then 1 ms later
 * a sync, then 2 ms later a copy; 5 ms of compute to the next step.
 */
static uint64_t feed_steps(struct steps *st, uint64_t t0, int nsteps)
{
	for (int i = 0; i < nsteps; i++) {
		uint64_t t = t0 + i * 10 * MS;

		call(st, 100, 1, TB_AK_COLL, t, 1 * MS);
		call(st, 100, 2, TB_AK_SYNC, t + 2 * MS, 1 * MS);
		call(st, 100, 3, TB_AK_MEMCPY, t + 5 * MS, 100 * US);
	}
	return t0 + nsteps * 10 * MS;
}

START_TEST(stream_to_steps)
{
	struct steps st = {};
	struct epochs ep = { .calls = &st };
	struct ep_steps s;
	const uint64_t *b;
	uint64_t next, end;
	pid_t pid = 0;
	int n;

	end = feed_steps(&st, 1000 * MS, 10);
	steps_tick(&st);
	ck_assert_int_eq(st.th[0].period, 3);
	end = feed_steps(&st, end, 10);	/* followed as they come */
	b = steps_bounds(&st, 0, end, &n, &next, &pid);
	ck_assert_int_eq(n, 20);
	ck_assert_int_eq(pid, 100);
	for (int i = 0; i < n; i++)
		ck_assert_uint_eq(b[i], 1000 * MS + i * 10 * MS);
	/* Steps 5..14 of an epoch that ends where step 15 starts. */
	ck_assert_int_eq(epochs_step_stats(&ep, 1050 * MS, 1150 * MS, true, &s), 10);
	ck_assert_int_eq(s.source, EP_STEPS_CALLS);
	ck_assert_int_eq(s.count, 10);
	ck_assert_double_eq_tol(s.total_ms, 100.0, 1e-9);
	ck_assert_double_eq_tol(s.min_ms, 10.0, 1e-9);
	ck_assert_int_eq(s.syncs, 20);
	/* Not closed: the last step ends where the next starts, if known. */
	ck_assert_int_eq(epochs_step_stats(&ep, 1000 * MS, end, false, &s), 20);
	ck_assert_int_eq(s.count, 19);
	steps_free(&st);
}
END_TEST

/*
 * A host-bound loop of two collectives (stepjob's "collectives"): the gap
 * before the second is 200 us, stretched by 1-8 ms in about one step in 8
 * (a preemption in it, where no pattern says which). Each such call is one
 * miss, not two; a period found is its shortest: every step is counted.
 */
START_TEST(preempted_gaps)
{
	struct steps st = {};
	uint64_t t = 1000 * MS, tick = t + 200 * MS, next;
	uint32_t h = 2463534242u;	/* xorshift32: no period a step finder could lock on */
	pid_t pid;
	int n;

	for (int i = 0; i < 180; i++) {
		uint64_t gap = 200 * US;

		h ^= h << 13;
		h ^= h >> 17;
		h ^= h << 5;

		if ((h >> 13) % 8 == 0)
			gap += (1 + (h >> 20) % 8) * MS;
		call(&st, 100, 1, TB_AK_COLL, t, 300 * US);
		t += 300 * US + gap;
		call(&st, 100, 2, TB_AK_COLL, t, 20 * US);
		t += 20 * US + 3 * MS + (h >> 7) % 2500 * US;
		if (t >= tick) {
			steps_tick(&st);
			tick += 200 * MS;
		}
	}
	steps_tick(&st);
	ck_assert_ptr_nonnull(steps_bounds(&st, 0, t, &n, &next, &pid));
	ck_assert_int_eq(st.th[0].period, 2);
	ck_assert_int_eq(n, 180);
	steps_free(&st);
}
END_TEST

START_TEST(pattern_change_drops_the_period)
{
	struct steps st = {};
	uint64_t t;
	int before;

	t = feed_steps(&st, 0, 10);
	steps_tick(&st);
	ck_assert_int_eq(st.th[0].period, 3);
	before = st.th[0].nbounds;
	/* An evaluation loop: one sync every 2 ms. */
	for (int i = 0; i < 40; i++, t += 2 * MS)
		call(&st, 100, 2, TB_AK_SYNC, t, 100 * US);
	ck_assert_int_eq(st.th[0].period, 0);
	/* The steps from the first call that broke the pattern are taken back. */
	ck_assert_int_eq(st.th[0].nbounds, before);
	steps_tick(&st);
	ck_assert_int_eq(st.th[0].period, 1);
	steps_free(&st);
}
END_TEST

START_TEST(markers_win)
{
	struct steps st = {};
	struct epochs ep = { .calls = &st };
	struct ep_steps s;
	uint64_t end = feed_steps(&st, 0, 10);

	steps_tick(&st);
	ck_assert_int_eq(epochs_step_stats(&ep, 0, end, true, &s), 10);
	ck_assert_int_eq(s.source, EP_STEPS_CALLS);
	/* Backwards of a thread that has fetched nothing yet: over the call period. */
	epochs_add_loop_step(&ep, EP_STEPS_BACKWARD, 1 * MS, 100, 101);
	epochs_add_loop_step(&ep, EP_STEPS_BACKWARD, 3 * MS, 100, 101);
	ck_assert_int_eq(epochs_step_stats(&ep, 0, end, true, &s), 2);
	ck_assert_int_eq(s.source, EP_STEPS_BACKWARD);
	/* A training step's fetch every 25 ms: a warm-up's backwards give way. */
	epochs_add_loop_step(&ep, EP_STEPS_FETCH, 0, 100, 101);
	epochs_add_loop_step(&ep, EP_STEPS_FETCH, 25 * MS, 100, 101);
	epochs_add_loop_step(&ep, EP_STEPS_FETCH, 5 * MS, 100, 102);	/* another rank: not counted */
	epochs_add_loop_step(&ep, EP_STEPS_FETCH, 50 * MS, 100, 101);
	epochs_add_loop_step(&ep, EP_STEPS_FETCH, 75 * MS, 100, 101);
	/* The run's last one pending (no fetch closed it yet): left out, as the phase table does. */
	ck_assert_int_eq(epochs_step_stats(&ep, 0, end, false, &s), 4);
	ck_assert_int_eq(s.count, 3);
	/*
	 * An epoch closed by the next boundary while the run goes on: the step
	 * under way is cut there, although the next epoch's first fetch is not
	 * known yet (a boundary is placed at the tick after it; the fetch comes
	 * after iter() has started the workers).
	 */
	ck_assert_int_eq(epochs_step_stats(&ep, 0, end, true, &s), 4);
	ck_assert_int_eq(s.count, 4);
	ep.loop.done = 100 * MS;
	ck_assert_int_eq(epochs_step_stats(&ep, 0, end, false, &s), 4);
	ck_assert_int_eq(s.count, 4);
	ck_assert_int_eq(s.source, EP_STEPS_FETCH);
	ck_assert_double_eq_tol(s.max_ms, 25.0, 1e-9);
	ck_assert_int_eq(s.syncs, 20);
	ck_assert_uint_eq(epochs_step_start(&ep, 0, end, 1), 25 * MS);
	/* One marker, every other step: the markers are the steps. */
	for (int i = 0; i < 5; i++)
		epochs_add_step(&ep, i * 20 * MS, 100);
	ck_assert_int_eq(epochs_step_stats(&ep, 0, end, true, &s), 5);
	ck_assert_int_eq(s.source, EP_STEPS_MARKER);
	ck_assert_double_eq_tol(s.max_ms, 20.0, 1e-9);
	ck_assert_int_eq(s.syncs, 20);
	epochs_free(&ep);
	steps_free(&st);
}
END_TEST

/* Past the caps the older half is summed: the kept ones and the sum say it all. */
START_TEST(bounded_lists)
{
	struct steps st = { 0 };
	int n = ST_MAX_BOUNDS + 10;
	const struct st_thread *t;
	const struct st_proc *p;

	for (int i = 0; i < n; i++)
		steps_add_start(&st, 10, 10, (uint64_t)(i + 1) * MS);
	t = &st.th[0];
	ck_assert_int_eq(t->nbounds + t->folded.count, n);
	ck_assert_int_le(t->nbounds, ST_MAX_BOUNDS);
	ck_assert_uint_eq(t->folded.first, MS);
	ck_assert_uint_eq(t->folded.end, t->bounds[0]);
	ck_assert_double_eq_tol(t->folded.total_ms, t->folded.count, 1e-6);
	ck_assert_ptr_eq(steps_folded(&st, t->bounds + 3), &t->folded);
	for (int i = 0; i < ST_MAX_SYNCS + 10; i++)
		steps_add_sync(&st, 10, (uint64_t)(i + 1) * US);
	p = &st.pr[0];
	ck_assert_int_le(p->nsyncs, ST_MAX_SYNCS);
	/* A window that holds the folded ones counts them; one that cuts them does not. */
	ck_assert_int_eq(steps_syncs(&st, 10, 0, UINT64_MAX), ST_MAX_SYNCS + 10);
	ck_assert_int_eq(steps_syncs(&st, 10, 2 * US, UINT64_MAX), p->nsyncs);
	steps_free(&st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("steps");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, exact_period);
	tcase_add_test(tc, same_api_different_gaps);
	tcase_add_test(tc, noise_tolerated);
	tcase_add_test(tc, too_few_repetitions);
	tcase_add_test(tc, aperiodic);
	tcase_add_test(tc, long_period_of_alike_calls);
	tcase_add_test(tc, gap_buckets);
	tcase_add_test(tc, stream_to_steps);
	tcase_add_test(tc, pattern_change_drops_the_period);
	tcase_add_test(tc, preempted_gaps);
	tcase_add_test(tc, markers_win);
	tcase_add_test(tc, bounded_lists);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
