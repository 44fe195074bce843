// SPDX-License-Identifier: BSD-3-Clause
/*
 * The rules on the GPU's own side (NVML, gpu_util.h), beside the host's
 * (diagnosis_rules.c): a GPU that idles while the host is the bottleneck
 * (named by what the host measured: data, syncs, launches), GPU memory
 * near the device's size, and clocks held down (power or thermal) when
 * the steps are slower for it. docs/model.md lists the thresholds.
 */
#include <stdio.h>
#include <string.h>
#include "diagnosis.h"
#include "diagnosis_rule.h"
#include "epochs.h"
#include "job.h"
#include "session.h"

#define UTIL_LOW 0.50		/* under half the time a kernel ran */
#define HOST_WAITS_GPU 0.30	/* the host blocked on the GPU at least this: not host-bound */
#define MEM_HIGH 0.90
#define THR_MIN 0.05		/* throttled at least this share of the window */
#define THR_NONE 0.01		/* an epoch under this is not throttled */
#define THR_SLOWER 0.05		/* its steps slower than the others' by this */

/* ---- the view: what the window's GPUs did ---- */

/* ms per step of the epochs with their GPUs throttled (or not), of the reported source. */
static void throttle_epochs(const struct session *ses, struct dg_gpu *g)
{
	const struct epochs *ep = &ses->ep;
	enum ep_source s = epochs_source(ep);
	double thr_ms = 0, unthr_ms = 0;

	for (int i = 0; s != EP_NSRC && i < ep->src[s].n; i++) {
		const struct epoch *e = &ep->src[s].list[i];
		struct gu_summary es;
		double t;

		if (!e->gpu || !e->steps.count || !gu_win_summary(&ses->gu, e->gpu, &es))
			continue;
		t = es.thr_power + es.thr_thermal;
		if (t >= THR_MIN) {
			thr_ms += ep_steps_avg(&e->steps);
			g->thr_n++;
		} else if (t < THR_NONE) {
			unthr_ms += ep_steps_avg(&e->steps);
			g->unthr_n++;
		}
	}
	g->thr_ms = g->thr_n ? thr_ms / g->thr_n : 0;
	g->unthr_ms = g->unthr_n ? unthr_ms / g->unthr_n : 0;
}

/* The process with the most memory on device d in w: the one to name. */
static void biggest_on(const struct gu_win *w, int d, struct dg_gpu *g)
{
	for (int i = 0; i < w->nproc; i++)
		if (w->procs[i].dev == d && w->procs[i].pid &&
		    w->procs[i].a.mem_peak > g->mem_pid_peak) {
			g->mem_pid = w->procs[i].pid;
			g->mem_pid_peak = w->procs[i].a.mem_peak;
		}
}

static void fill(struct dg_gpu *g, const struct gpu_util *gu, const struct gu_win *w)
{
	g->read = gu_win_summary(gu, w, &g->s) > 0 && g->s.util_devs > 0;
	if (g->s.mem_dev >= 0) {
		g->mem_gpu = gu->dev[g->s.mem_dev].index;
		g->mem_total = gu->dev[g->s.mem_dev].mem_total;
		biggest_on(w, g->s.mem_dev, g);
	}
	if (g->s.util_min_dev >= 0)
		g->util_min_gpu = gu->dev[g->s.util_min_dev].index;
	if (g->s.thr_dev >= 0)
		g->thr_gpu = gu->dev[g->s.thr_dev].index;
}

void diag_gpu_view_run(struct dg_view *v, const struct session *ses, uint64_t now)
{
	struct gu_win w;

	memset(&v->nvml, 0, sizeof(v->nvml));
	if (ses->gu.state != GU_ACTIVE)
		return;
	gu_run_window(&ses->gu, now, &w);
	fill(&v->nvml, &ses->gu, &w);
	gu_win_free(&w);
	throttle_epochs(ses, &v->nvml);
	v->nvml.own_ms = 0;	/* the run: throttled epochs against the others */
}

void diag_gpu_view_epoch(struct dg_view *v, const struct session *ses, const struct epoch *e)
{
	memset(&v->nvml, 0, sizeof(v->nvml));
	if (ses->gu.state != GU_ACTIVE || !e->gpu)
		return;
	fill(&v->nvml, &ses->gu, e->gpu);
	throttle_epochs(ses, &v->nvml);
	v->nvml.own_ms = e->steps.count ? ep_steps_avg(&e->steps) : 0;
}

/* ---- the rules ---- */

static double hl_share(const struct dg_view *v, int cat)
{
	int64_t t = 0;

	for (int c = 0; c < TB_NCAT; c++)
		t += v->hl[c] > 0 ? v->hl[c] : 0;
	return t > 0 && v->hl[cat] > 0 ? (double)v->hl[cat] / t : 0.0;
}

/* The host-side cause, the largest the host measured; its evidence and advice. */
static void host_cause(const struct dg_view *v, struct dg_finding *f)
{
	double data = hl_share(v, TB_DATA_WAIT) + hl_share(v, TB_IO);
	double cpu = hl_share(v, TB_CPU), comm = hl_share(v, TB_COMM);
	double syncs = v->steps ? (double)v->syncs / v->steps : 0;

	if (data >= 0.15) {
		DG_PUT(f, summary, ": data loading");
		DG_PUT(f, evidence, "the trainers wait for data %.1f%% of their time (workers and "
		    "storage): the GPU has nothing to run meanwhile", 100 * data);
		DG_PUT(f, advice, "fix the data pipeline first (more DataLoader workers, "
		    "pin_memory=True, faster storage or decoding); then a bigger batch");
	} else if (syncs >= 1.0) {
		DG_PUT(f, summary, ": host-device syncs");
		DG_PUT(f, evidence, "%.1f host-device syncs per step: each one drains the GPU's "
		    "queue, which idles until the host queues more", syncs);
		DG_PUT(f, advice, "keep values on the GPU (no .item(), .cpu() or print(tensor) in "
		    "the step); then a bigger batch");
	} else if (cpu >= 0.50) {
		DG_PUT(f, summary, ": launches and Python");
		DG_PUT(f, evidence, "the trainers run on the CPU %.1f%% of their time: they do not "
		    "queue kernels fast enough", 100 * cpu);
		DG_PUT(f, advice, "bigger batches (more work per launch), CUDA graphs or "
		    "torch.compile to fuse small kernels, less Python in the step");
	} else if (comm >= 0.20) {
		DG_PUT(f, summary, ": communication");
		DG_PUT(f, evidence, "the trainers are in communication %.1f%% of their time",
		    100 * comm);
		DG_PUT(f, advice, "overlap communication with compute (DDP bucket sizes, "
		    "gradient accumulation with no_sync), a faster interconnect; then a bigger batch");
	} else {
		DG_PUT(f, evidence, "no single host-side cause: the trainers' time is spread "
		    "(cpu %.1f%%, data %.1f%%, communication %.1f%%)", 100 * cpu, 100 * data,
		    100 * comm);
		DG_PUT(f, advice, "a bigger batch gives the GPU more work per step");
	}
}

static void rule_idle(const struct dg_view *v, struct dg_out *o)
{
	double util = v->nvml.s.util_avg / 100;
	struct dg_finding *f;

	if (!v->nvml.read || util >= UTIL_LOW || hl_share(v, TB_GPU_WAIT) >= HOST_WAITS_GPU ||
	    !(f = dg_add(o, DG_GPU_IDLE, util, UTIL_LOW, dg_ramp(1 - util, 1 - UTIL_LOW, 0.9))))
		return;
	DG_PUT(f, summary, "GPU busy %.1f%% of the time (< %.0f%%), held back by the host",
	    100 * util, 100 * UTIL_LOW);
	host_cause(v, f);
	DG_PUT(f, evidence, "; NVML: a kernel ran %.1f%% of the time on average over %d GPU%s "
	    "(%.1f%% on GPU %d), and the host waited for the GPU only %.1f%%", 100 * util,
	    v->nvml.s.ndev, v->nvml.s.ndev == 1 ? "" : "s", v->nvml.s.util_min, v->nvml.util_min_gpu,
	    100 * hl_share(v, TB_GPU_WAIT));
}

static void rule_memory(const struct dg_view *v, struct dg_out *o)
{
	double frac = v->nvml.s.mem_frac;
	struct dg_finding *f;

	if (!v->nvml.read || frac < MEM_HIGH ||
	    !(f = dg_add(o, DG_GPU_MEMORY, frac, MEM_HIGH, dg_ramp(frac, MEM_HIGH, 0.99))))
		return;
	f->pid = v->nvml.mem_pid;
	DG_PUT(f, summary, "GPU memory pressure: GPU %d at %.1f%% of its memory (>= %.0f%%)",
	    v->nvml.mem_gpu, 100 * frac, 100 * MEM_HIGH);
	DG_PUT(f, evidence, "peak %.2f GiB used of %.2f GiB on GPU %d", v->nvml.s.mem_peak / 1073741824.0,
	    v->nvml.mem_total / 1073741824.0, v->nvml.mem_gpu);
	if (v->nvml.mem_pid)
		DG_PUT(f, evidence, "; PID %d held %.2f GiB of it", v->nvml.mem_pid,
		    v->nvml.mem_pid_peak / 1073741824.0);
	DG_PUT(f, evidence, " (PyTorch's cache counts as used: torch.cuda.max_memory_reserved)");
	DG_PUT(f, advice, "a smaller batch (gradient accumulation keeps the effective batch), "
	    "activation checkpointing (torch.utils.checkpoint), mixed precision (torch.autocast "
	    "with bf16 or fp16); an out-of-memory error, or the allocator's retries, are next");
}

/*
 * Throttling that costs time: the window's GPUs held their clocks down
 * (power or thermal) for THR_MIN of it, and its steps (the run: the
 * throttled epochs' steps) were THR_SLOWER slower than those of the
 * epochs that were not throttled.
 */
static void rule_throttle(const struct dg_view *v, struct dg_out *o)
{
	double thr = v->nvml.s.thr_power + v->nvml.s.thr_thermal;
	double ms = v->nvml.own_ms ? v->nvml.own_ms : v->nvml.thr_ms, slower;
	struct dg_finding *f;

	if (!v->nvml.read || thr < THR_MIN || !ms || !v->nvml.unthr_ms)
		return;
	slower = ms / v->nvml.unthr_ms - 1;
	if (slower < THR_SLOWER ||
	    !(f = dg_add(o, DG_GPU_THROTTLE, slower, THR_SLOWER, dg_ramp(slower, THR_SLOWER, 0.5))))
		return;
	/* Of a throttled step's time, what the unthrottled clocks would not take. */
	f->cost = slower / (1 + slower);
	DG_PUT(f, summary, "GPU %d throttled %.0f%% of the time (%s), steps %.0f%% slower",
	    v->nvml.thr_gpu, 100 * thr, v->nvml.s.thr_power >= v->nvml.s.thr_thermal ?
	    "power cap" : "thermal", 100 * slower);
	DG_PUT(f, evidence, "clocks held down by the power cap %.1f%% and by heat %.1f%% of the "
	    "time; %.1f ms/step against %.1f ms/step in the %d epoch%s without throttling",
	    100 * v->nvml.s.thr_power, 100 * v->nvml.s.thr_thermal, ms, v->nvml.unthr_ms,
	    v->nvml.unthr_n, v->nvml.unthr_n == 1 ? "" : "s");
	DG_PUT(f, advice, "power: the board's power limit (nvidia-smi -q -d POWER; another job "
	    "on the same board or node draws too); thermal: cooling and airflow, the GPU's "
	    "temperature (nvidia-smi -q -d TEMPERATURE); compare with the other nodes");
}

int diag_gpu_rules(const struct dg_view *v, struct dg_finding *out, int n, int max)
{
	struct dg_out o = { out, n, max };

	rule_idle(v, &o);
	rule_memory(v, &o);
	rule_throttle(v, &o);
	return o.n;
}
