// SPDX-License-Identifier: BSD-3-Clause
/*
 * `trainbpf serve`'s GPU series (docs/metrics.md): the GPU's own side
 * (NVML, gpu_util.h) per job, rank and device. A series is one of
 * metrics.h's label sets on one device its processes were on, labelled
 * gpu="N" (NVML's index: bounded by the node's devices). Its counters
 * (energy, busy and throttled seconds) add what the device did between
 * two updates while one of the series' processes was on it; a device
 * shared by two series gives each its readings. Gauges: the device's
 * last utilization and power, the series' processes' memory on it.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "metrics.h"

/* The device's run window now: its sums since the daemon started. */
static void device_sums(const struct gpu_util *g, uint64_t now, struct gu_agg out[GU_MAX_DEVS])
{
	struct gu_win w;

	memset(out, 0, GU_MAX_DEVS * sizeof(out[0]));
	gu_run_window(g, now, &w);
	for (int i = 0; i < w.ndev; i++)
		out[w.devs[i].dev] = w.devs[i].a;
	gu_win_free(&w);
}

static struct mx_gpu_series *gpu_series(struct mx_gpu *x, int series, int dev)
{
	struct mx_gpu_series *s;

	for (int i = 0; i < x->n; i++)
		if (x->s[i].series == series && x->s[i].dev == dev)
			return &x->s[i];
	if (x->n == MX_MAX_GPU_SERIES) {
		x->dropped++;
		return NULL;
	}
	s = realloc(x->s, (x->n + 1) * sizeof(*s));
	if (!s)
		return NULL;
	x->s = s;
	s = &s[x->n++];
	memset(s, 0, sizeof(*s));
	s->series = series;
	s->dev = dev;
	return s;
}

/* Series whose label set is gone (metrics_update freed it) go too. */
static void forget_gone(struct mx_gpu *x, const struct metrics *m)
{
	int k = 0;

	for (int i = 0; i < x->n; i++)
		if (x->s[i].series < m->nseries && m->series[x->s[i].series].alive_ns)
			x->s[k++] = x->s[i];
	x->n = k;
}

/* What device d did since the last update, into s. */
static void add_delta(struct mx_gpu_series *s, const struct gu_agg *now, const struct gu_agg *then)
{
	if (now->energy_mj > then->energy_mj)
		s->energy_j += (now->energy_mj - then->energy_mj) / 1e3;
	if (now->util_pct_ns > then->util_pct_ns)
		s->busy_s += (now->util_pct_ns - then->util_pct_ns) / 100 / 1e9;
	if (now->thr_power_ns > then->thr_power_ns)
		s->thr_power_s += (now->thr_power_ns - then->thr_power_ns) / 1e9;
	if (now->thr_thermal_ns > then->thr_thermal_ns)
		s->thr_thermal_s += (now->thr_thermal_ns - then->thr_thermal_ns) / 1e9;
}

/* One of the job's processes on a device, read since the last update: its series gets the device. */
static void proc_on(struct metrics *m, const struct session *ses, const struct gu_proc *p,
		    const struct gu_agg *now, bool *seen)
{
	const struct job *job = &ses->job;
	const struct gpu_util *g = &ses->gu;
	const struct gu_sample *last = gu_series_last(&p->s);
	const struct proc_rec *pr = job_proc_const(job, p->pid);
	int series = pr ? metrics_series_of(m, pr) : -1;
	struct mx_gpu_series *s;

	if (!last || last->ts <= m->gpu.updated || series < 0 ||
	    !(s = gpu_series(&m->gpu, series, p->dev)))
		return;
	if (!seen[s - m->gpu.s]) {	/* the first of its processes on d: the device's share */
		seen[s - m->gpu.s] = true;
		add_delta(s, &now[p->dev], &m->gpu.last[p->dev]);
		s->mem_used = 0;
	}
	if (last->has & GU_HAS_MEM)
		s->mem_used += last->mem;
	s->gpu = g->dev[p->dev].index;
}

void metrics_gpu_update(struct metrics *m, const struct session *ses, uint64_t now)
{
	const struct gpu_util *g = &ses->gu;
	struct gu_agg sums[GU_MAX_DEVS];
	bool *seen;

	if (g->state != GU_ACTIVE)
		return;
	m->gpu.g = g;
	forget_gone(&m->gpu, m);
	device_sums(g, now, sums);
	seen = calloc(MX_MAX_GPU_SERIES, sizeof(*seen));
	if (!seen)
		return;
	for (int i = 0; i < m->gpu.n; i++)
		m->gpu.s[i].on = false;
	for (int i = 0; i < g->nproc; i++)
		if (g->proc[i].pid)
			proc_on(m, ses, &g->proc[i], sums, seen);
	for (int i = 0; i < m->gpu.n; i++)
		m->gpu.s[i].on = seen[i];
	free(seen);
	memcpy(m->gpu.last, sums, sizeof(sums));
	m->gpu.updated = now;
}

/* A sample's labels: the series' and gpu="N". */
static void put(FILE *f, const struct metrics *m, const char *name, const struct mx_gpu_series *s)
{
	char gpu[16];

	snprintf(gpu, sizeof(gpu), "%d", s->gpu);
	metrics_put_series(f, name, &m->series[s->series], "gpu", gpu);
}

static void counter(const struct metrics *m, FILE *f, const char *name, const char *help,
		    size_t off)
{
	metrics_family(f, name, "counter", help);
	for (int i = 0; i < m->gpu.n; i++) {
		const struct mx_gpu_series *s = &m->gpu.s[i];

		put(f, m, name, s);
		fprintf(f, "%.6f\n", *(const double *)((const char *)s + off));
	}
}

static void gauges(const struct metrics *m, FILE *f)
{
	const struct gpu_util *g = m->gpu.g;

	fprintf(f, "# HELP trainbpf_gpu_utilization_ratio The share of time a kernel ran on the GPU "
		"(any kernel: compute or NCCL), NVML's last reading; on the series' GPUs now.\n"
		"# TYPE trainbpf_gpu_utilization_ratio gauge\n");
	for (int i = 0; i < m->gpu.n; i++) {
		const struct gu_sample *last = gu_series_last(&g->dev[m->gpu.s[i].dev].s);

		if (!m->gpu.s[i].on || !last || !(last->has & GU_HAS_UTIL))
			continue;
		put(f, m, "trainbpf_gpu_utilization_ratio", &m->gpu.s[i]);
		fprintf(f, "%.2f\n", last->util / 100.0);
	}
	fprintf(f, "# HELP trainbpf_gpu_memory_used_bytes GPU memory the series' processes use "
		"on the GPU now.\n# TYPE trainbpf_gpu_memory_used_bytes gauge\n");
	for (int i = 0; i < m->gpu.n; i++) {
		if (!m->gpu.s[i].on)
			continue;
		put(f, m, "trainbpf_gpu_memory_used_bytes", &m->gpu.s[i]);
		fprintf(f, "%" PRIu64 "\n", m->gpu.s[i].mem_used);
	}
	fprintf(f, "# HELP trainbpf_gpu_memory_total_bytes The GPU's memory.\n"
		"# TYPE trainbpf_gpu_memory_total_bytes gauge\n");
	for (int i = 0; i < m->gpu.n; i++) {
		if (!m->gpu.s[i].on)
			continue;
		put(f, m, "trainbpf_gpu_memory_total_bytes", &m->gpu.s[i]);
		fprintf(f, "%" PRIu64 "\n", g->dev[m->gpu.s[i].dev].mem_total);
	}
}

void metrics_gpu_write(const struct metrics *m, FILE *f)
{
	if (!m->gpu.g)
		return;		/* NVML not read: no GPU series */
	counter(m, f, "trainbpf_gpu_energy_joules_total", "Energy the GPU used (its own counter) "
		"while the series' processes were on it.", offsetof(struct mx_gpu_series, energy_j));
	counter(m, f, "trainbpf_gpu_busy_seconds_total", "Seconds a kernel ran on the GPU "
		"(utilization times time) while the series' processes were on it.",
		offsetof(struct mx_gpu_series, busy_s));
	counter(m, f, "trainbpf_gpu_power_throttled_seconds_total", "Seconds the GPU's clocks "
		"were held down by a power cap.", offsetof(struct mx_gpu_series, thr_power_s));
	counter(m, f, "trainbpf_gpu_thermal_throttled_seconds_total", "Seconds the GPU's clocks "
		"were held down by heat.", offsetof(struct mx_gpu_series, thr_thermal_s));
	gauges(m, f);
}
