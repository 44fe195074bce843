// SPDX-License-Identifier: BSD-3-Clause
/*
 * The rules on the GPU's own side (model/diagnosis_gpu.c), on windows
 * built by hand: each fires where it should, names the host-side cause it
 * was given, and stays quiet on the other side of its threshold.
 */
#include <check.h>
#include <string.h>
#include "diagnosis.h"

#define S 1000000000ll

/* A window whose trainers' critical path is cats (seconds), its GPUs read. */
static void view(struct dg_view *v, double util, double mem_frac, const double cats[TB_NCAT])
{
	memset(v, 0, sizeof(*v));
	v->wall_s = 10;
	for (int c = 0; c < TB_NCAT; c++)
		v->hl[c] = (int64_t)(cats[c] * S);
	v->nvml.read = true;
	v->nvml.s.ndev = 2;
	v->nvml.s.util_devs = 2;
	v->nvml.s.util_avg = util;
	v->nvml.s.util_min = util - 5;
	v->nvml.s.mem_frac = mem_frac;
	v->nvml.s.mem_peak = (uint64_t)(mem_frac * 80) << 30;
	v->nvml.mem_total = 80ull << 30;
	v->nvml.mem_gpu = 1;
	v->nvml.mem_pid = 4242;
	v->nvml.mem_pid_peak = 60ull << 30;
}

static const struct dg_finding *find(const struct dg_finding *fs, int n, enum dg_id id)
{
	for (int i = 0; i < n; i++)
		if (fs[i].id == id)
			return &fs[i];
	return NULL;
}

START_TEST(idle_gpu_names_data_loading)
{
	double cats[TB_NCAT] = { [TB_CPU] = 3, [TB_DATA_WAIT] = 6, [TB_IDLE] = 1 };
	struct dg_finding fs[DG_MAX_FINDINGS];
	const struct dg_finding *f;
	struct dg_view v;
	int n;

	view(&v, 20, 0.3, cats);
	n = diag_run(&v, fs, DG_MAX_FINDINGS);
	f = find(fs, n, DG_GPU_IDLE);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(f->summary, "GPU busy 20.0% of the time (< 50%), held back by the host: "
			 "data loading");
	ck_assert(strstr(f->advice, "data pipeline"));
	ck_assert(f->severity > 0.7 && f->severity < 0.8);	/* (0.8 - 0.5) / 0.4 */
	ck_assert_ptr_null(find(fs, n, DG_GPU_MEMORY));
}
END_TEST

START_TEST(idle_gpu_names_syncs_and_launches)
{
	double cats[TB_NCAT] = { [TB_CPU] = 8, [TB_IDLE] = 2 };
	struct dg_finding fs[DG_MAX_FINDINGS];
	const struct dg_finding *f;
	struct dg_view v;
	int n;

	view(&v, 30, 0.3, cats);
	v.steps = 10;
	v.syncs = 30;
	n = diag_run(&v, fs, DG_MAX_FINDINGS);
	f = find(fs, n, DG_GPU_IDLE);
	ck_assert_ptr_nonnull(f);
	ck_assert(strstr(f->summary, ": host-device syncs"));
	v.syncs = 0;
	n = diag_run(&v, fs, DG_MAX_FINDINGS);
	f = find(fs, n, DG_GPU_IDLE);
	ck_assert_ptr_nonnull(f);
	ck_assert(strstr(f->summary, ": launches and Python"));
	ck_assert(strstr(f->advice, "CUDA graphs"));
}
END_TEST

/* A busy GPU, or a host that waits for its GPU, is no host bottleneck. */
START_TEST(busy_or_waited_gpu_is_not_idle)
{
	double host[TB_NCAT] = { [TB_CPU] = 8, [TB_IDLE] = 2 };
	double waits[TB_NCAT] = { [TB_CPU] = 5, [TB_GPU_WAIT] = 5 };
	struct dg_finding fs[DG_MAX_FINDINGS];
	struct dg_view v;

	view(&v, 60, 0.3, host);
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_IDLE));
	view(&v, 20, 0.3, waits);
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_IDLE));
	view(&v, 20, 0.3, host);
	v.nvml.read = false;	/* NVML unavailable: nothing to judge */
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_IDLE));
}
END_TEST

START_TEST(memory_pressure)
{
	double cats[TB_NCAT] = { [TB_GPU_WAIT] = 8, [TB_CPU] = 2 };
	struct dg_finding fs[DG_MAX_FINDINGS];
	const struct dg_finding *f;
	struct dg_view v;

	view(&v, 95, 0.89, cats);
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_MEMORY));
	view(&v, 95, 0.95, cats);
	f = find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_MEMORY);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(f->pid, 4242);
	ck_assert_str_eq(f->summary, "GPU memory pressure: GPU 1 at 95.0% of its memory (>= 90%)");
	ck_assert(strstr(f->advice, "activation checkpointing") && strstr(f->advice, "mixed precision") &&
		  strstr(f->advice, "smaller batch"));
}
END_TEST

/* Throttling counts when the steps are slower for it, not otherwise. */
START_TEST(throttling_with_slower_steps)
{
	double cats[TB_NCAT] = { [TB_GPU_WAIT] = 8, [TB_CPU] = 2 };
	struct dg_finding fs[DG_MAX_FINDINGS];
	const struct dg_finding *f;
	struct dg_view v;

	view(&v, 95, 0.5, cats);
	v.nvml.s.thr_power = 0.4;
	v.nvml.thr_gpu = 0;
	v.nvml.own_ms = 120;
	v.nvml.unthr_ms = 100;
	v.nvml.unthr_n = 3;
	f = find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_THROTTLE);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(f->summary, "GPU 0 throttled 40% of the time (power cap), steps 20% slower");
	v.nvml.own_ms = 102;	/* not slower: clocks down, time the same */
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_THROTTLE));
	v.nvml.own_ms = 120;
	v.nvml.unthr_ms = 0;	/* nothing to compare with */
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, DG_MAX_FINDINGS), DG_GPU_THROTTLE));
}
END_TEST

START_TEST(names_round_trip)
{
	ck_assert_str_eq(diag_id_name(DG_GPU_IDLE), "gpu_underused");
	ck_assert_int_eq(diag_id_find("gpu_memory_pressure"), DG_GPU_MEMORY);
	ck_assert_int_eq(diag_id_find("gpu_throttling"), DG_GPU_THROTTLE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("diagnosis_gpu");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, idle_gpu_names_data_loading);
	tcase_add_test(tc, idle_gpu_names_syncs_and_launches);
	tcase_add_test(tc, busy_or_waited_gpu_is_not_idle);
	tcase_add_test(tc, memory_pressure);
	tcase_add_test(tc, throttling_with_slower_steps);
	tcase_add_test(tc, names_round_trip);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
