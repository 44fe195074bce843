// SPDX-License-Identifier: BSD-3-Clause
/*
 * The GPU's readings over windows (model/gpu_util.c): a reading's share of
 * each window it touches, windows closed late, readings that left the
 * ring, exited processes summed, NVML's pids matched to the job's.
 */
#include <check.h>
#include <math.h>
#include <string.h>
#include "gpu_util.h"

#define MS 1000000ull
#define S (1000 * MS)

/* A device reading every 100 ms: util u, power p mW (energy integrates it), mem m. */
static uint64_t feed(struct gpu_util *g, int d, uint64_t from, uint64_t to, int u, int p,
		     uint64_t m, uint64_t energy)
{
	for (uint64_t t = from; t <= to; t += 100 * MS) {
		/* the counter at t includes the 100 ms before it, drawn at p */
		energy += (uint64_t)p * 100 / 1000;	/* mW x 100 ms = p/10 mJ */
		struct gu_sample s = {
			.ts = t, .util = u, .power_mw = p, .mem = m, .energy_mj = energy,
			.has = GU_HAS_UTIL | GU_HAS_POWER | GU_HAS_MEM | GU_HAS_ENERGY | GU_JOB,
		};

		gu_dev_sample(g, d, &s);
	}
	return energy;
}

START_TEST(window_of_constant_readings)
{
	struct gpu_util g;
	struct gu_win w;
	const struct gu_agg *a;
	int h, d;

	gu_init(&g);
	d = gu_add_dev(&g, 0, "GPU-x", "Fake", 80ull << 30);
	ck_assert_int_eq(d, 0);
	h = gu_open(&g, 0);
	/* 10 s at 40%, 200 W, 1 GiB; then 10 s at 90%, 400 W, 3 GiB */
	uint64_t e = feed(&g, d, 0, 10 * S, 40, 200000, 1ull << 30, 1000000);
	feed(&g, d, 10 * S + 100 * MS, 20 * S, 90, 400000, 3ull << 30, e);
	gu_peek(&g, h, 20 * S, &w);
	a = gu_win_dev(&w, d);
	ck_assert_ptr_nonnull(a);
	/* the first reading opens the series: 20 s are covered */
	ck_assert_uint_eq(a->span_ns, 20 * S);
	ck_assert(fabs(gu_agg_util(a) - 65.0) < 1e-9);
	ck_assert(fabs(a->energy_mj - (200000.0 * 10 + 400000.0 * 10)) < 1e-6);
	ck_assert_uint_eq(a->mem_peak, 3ull << 30);
	/* power is held from one reading to the next: 200 W until 10.1 s */
	ck_assert(fabs(gu_agg_power_w(a) - 299.0) < 1e-9);
	gu_win_free(&w);
	gu_free(&g);
}
END_TEST

/*
 * A boundary inside a reading's interval splits it by time; the energy
 * counter is interpolated; memory belongs to the window its reading is in.
 */
START_TEST(boundary_splits_a_reading)
{
	struct gpu_util g;
	struct gu_win w1, w2;
	struct gu_sample s0 = { .ts = 1 * S, .util = 0, .energy_mj = 1000, .mem = 5,
				.has = GU_HAS_UTIL | GU_HAS_ENERGY | GU_HAS_MEM | GU_JOB };
	struct gu_sample s1 = { .ts = 2 * S, .util = 80, .energy_mj = 2000, .mem = 7,
				.has = GU_HAS_UTIL | GU_HAS_ENERGY | GU_HAS_MEM | GU_JOB };
	int h1, h2, d;

	gu_init(&g);
	d = gu_add_dev(&g, 3, "GPU-y", "Fake", 100);
	h1 = gu_open(&g, 0);
	gu_dev_sample(&g, d, &s0);
	gu_dev_sample(&g, d, &s1);
	/* the boundary at 1.25 s is placed after the reading at 2 s came */
	gu_close(&g, h1, 1 * S + 250 * MS, &w1);
	h2 = gu_open(&g, 1 * S + 250 * MS);
	gu_peek(&g, h2, 2 * S, &w2);
	ck_assert_uint_eq(gu_win_dev(&w1, d)->span_ns, 250 * MS);
	ck_assert_uint_eq(gu_win_dev(&w2, d)->span_ns, 750 * MS);
	ck_assert(fabs(gu_win_dev(&w1, d)->energy_mj - 250.0) < 1e-9);
	ck_assert(fabs(gu_win_dev(&w2, d)->energy_mj - 750.0) < 1e-9);
	ck_assert_uint_eq(gu_win_dev(&w1, d)->mem_peak, 5);
	ck_assert_uint_eq(gu_win_dev(&w2, d)->mem_peak, 7);
	ck_assert(fabs(gu_agg_util(gu_win_dev(&w2, d)) - 80.0) < 1e-9);
	gu_win_free(&w1);
	gu_win_free(&w2);
	gu_free(&g);
}
END_TEST

/* Readings that left the ring count in the windows open then, as the ring does. */
START_TEST(evicted_readings_count)
{
	struct gpu_util g;
	struct gu_win all, late;
	int run, h, d;
	uint64_t t_end = (4 * GU_RING) * 100 * MS;

	gu_init(&g);
	d = gu_add_dev(&g, 0, "GPU-z", "Fake", 1000);
	run = gu_open(&g, 0);
	feed(&g, d, 0, t_end / 2, 10, 100000, 10, 0);
	h = gu_open(&g, t_end / 2);
	feed(&g, d, t_end / 2 + 100 * MS, t_end, 50, 100000, 20, 0);
	gu_peek(&g, run, t_end, &all);
	gu_close(&g, h, t_end, &late);
	ck_assert_uint_eq(gu_win_dev(&all, d)->span_ns, t_end);
	ck_assert(fabs(gu_agg_util(gu_win_dev(&all, d)) - 30.0) < 1e-9);
	ck_assert(fabs(gu_agg_util(gu_win_dev(&late, d)) - 50.0) < 1e-9);
	ck_assert_uint_eq(gu_win_dev(&all, d)->mem_peak, 20);
	ck_assert_uint_eq(gu_win_dev(&late, d)->mem_peak, 20);
	/* the reading at 0 opens the series, the window is (0, t_end] */
	ck_assert_uint_eq(gu_win_dev(&all, d)->samples, 4 * GU_RING);
	gu_win_free(&all);
	gu_win_free(&late);
	gu_free(&g);
}
END_TEST

/* Past GU_MAX_PROCS series, a process gone longest is summed into its device's row. */
START_TEST(gone_processes_fold)
{
	struct gpu_util g;
	struct gu_win w;
	int run, d, folded = 0;
	uint64_t peak = 0;

	gu_init(&g);
	d = gu_add_dev(&g, 0, "GPU-p", "Fake", 1000);
	run = gu_open(&g, 0);
	for (int i = 0; i < GU_MAX_PROCS; i++) {
		struct gu_sample s = { .ts = (uint64_t)(i + 1) * MS, .mem = 100 + i,
				       .has = GU_HAS_MEM };

		ck_assert(gu_proc_sample(&g, 1000 + i, d, &s));
	}
	/* all are listed within GU_GONE_NS: a new one cannot be followed */
	struct gu_sample soon = { .ts = 2 * S, .mem = 1, .has = GU_HAS_MEM };
	ck_assert(!gu_proc_sample(&g, 5000, d, &soon));
	struct gu_sample later = { .ts = GU_GONE_NS + 5 * S, .mem = 1, .has = GU_HAS_MEM };
	ck_assert(gu_proc_sample(&g, 5000, d, &later));
	ck_assert_int_eq(g.procs_folded, 1);
	gu_peek(&g, run, GU_GONE_NS + 5 * S, &w);
	for (int i = 0; i < w.nproc; i++) {
		if (w.procs[i].pid == 0) {
			folded = w.procs[i].folded;
			peak = w.procs[i].a.mem_peak;
		}
	}
	ck_assert_int_eq(folded, 1);
	ck_assert_uint_eq(peak, 100);	/* pid 1000, the first listed */
	ck_assert_int_eq(w.nproc, GU_MAX_PROCS + 1);
	gu_win_free(&w);
	gu_free(&g);
}
END_TEST

START_TEST(merge_and_summary)
{
	struct gpu_util g;
	struct gu_win a, b;
	struct gu_summary s;
	int h, d0, d1;

	gu_init(&g);
	d0 = gu_add_dev(&g, 0, "GPU-0", "Fake", 1000);
	d1 = gu_add_dev(&g, 1, "GPU-1", "Fake", 1000);
	h = gu_open(&g, 0);
	feed(&g, d0, 0, 2 * S, 20, 100000, 950, 0);
	feed(&g, d1, 0, 2 * S, 60, 300000, 400, 0);
	gu_close(&g, h, 1 * S, &a);
	h = gu_open(&g, 1 * S);
	gu_close(&g, h, 2 * S, &b);
	gu_win_merge(&a, &b);
	ck_assert_int_eq(gu_win_summary(&g, &a, &s), 2);
	ck_assert(fabs(s.util_avg - 40.0) < 1e-9);
	ck_assert(fabs(s.util_min - 20.0) < 1e-9);
	ck_assert_int_eq(s.util_min_dev, d0);
	ck_assert(s.energy_ok);
	ck_assert(fabs(s.energy_j - (100.0 * 2 + 300.0 * 2)) < 1e-9);
	ck_assert(fabs(s.mem_frac - 0.95) < 1e-12);
	ck_assert_int_eq(s.mem_dev, d0);
	ck_assert_int_eq(d1, 1);
	gu_win_free(&a);
	gu_win_free(&b);
	gu_free(&g);
}
END_TEST

/* A device with no reading of the job in a window is none of the job's there. */
START_TEST(devices_without_the_job)
{
	struct gpu_util g;
	struct gu_win w;
	struct gu_summary s;
	struct gu_sample x = { .ts = 1 * S, .util = 99, .has = GU_HAS_UTIL };
	struct gu_sample y = { .ts = 2 * S, .util = 99, .has = GU_HAS_UTIL };
	int h, d;

	gu_init(&g);
	d = gu_add_dev(&g, 0, "GPU-0", "Fake", 1000);
	h = gu_open(&g, 0);
	gu_dev_sample(&g, d, &x);
	gu_dev_sample(&g, d, &y);
	gu_peek(&g, h, 2 * S, &w);
	ck_assert_int_eq(w.ndev, 1);
	ck_assert_int_eq(gu_win_summary(&g, &w, &s), 0);
	ck_assert(!s.energy_ok);
	gu_win_free(&w);
	gu_free(&g);
}
END_TEST

START_TEST(lost_device_takes_no_reading)
{
	struct gpu_util g;
	struct gu_sample x = { .ts = 1 * S, .util = 10, .has = GU_HAS_UTIL };
	int d;

	gu_init(&g);
	d = gu_add_dev(&g, 0, "GPU-0", "Fake", 1000);
	gu_dev_lost(&g, d, 500 * MS, "GPU is lost");
	gu_dev_sample(&g, d, &x);
	ck_assert_ptr_null(gu_series_last(&g.dev[d].s));
	ck_assert(g.dev[d].lost);
	ck_assert_str_eq(g.dev[d].lost_why, "GPU is lost");
	gu_free(&g);
}
END_TEST

START_TEST(pids_across_namespaces)
{
	pid_t pids[3] = { 4000, 4001, 4002 };
	pid_t ns[3][4] = { { 4000, 1 }, { 4001, 7 }, { 4002, 7 } };
	int nns[3] = { 2, 2, 1 };

	ck_assert_int_eq(gu_match_pid(4001, pids, 3, ns, nns), 4001);	/* the same pid */
	ck_assert_int_eq(gu_match_pid(1, pids, 3, ns, nns), 4000);	/* its own namespace's */
	ck_assert_int_eq(gu_match_pid(7, pids, 3, ns, nns), 4001);	/* 4002 has no inner pid */
	ck_assert_int_eq(gu_match_pid(9, pids, 3, ns, nns), 0);
	nns[2] = 2;
	ck_assert_int_eq(gu_match_pid(7, pids, 3, ns, nns), 0);	/* two have it: none */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gpu_util");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, window_of_constant_readings);
	tcase_add_test(tc, boundary_splits_a_reading);
	tcase_add_test(tc, evicted_readings_count);
	tcase_add_test(tc, gone_processes_fold);
	tcase_add_test(tc, merge_and_summary);
	tcase_add_test(tc, devices_without_the_job);
	tcase_add_test(tc, lost_device_takes_no_reading);
	tcase_add_test(tc, pids_across_namespaces);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
