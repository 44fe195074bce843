// SPDX-License-Identifier: BSD-3-Clause
/*
 * The GPU's readings kept per series (a device, or one of the job's
 * processes on a device), and summed over windows: gpu_util.h says how a
 * reading is shared between the windows it touches.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu_util.h"

void gu_init(struct gpu_util *g)
{
	memset(g, 0, sizeof(*g));
	g->run = -1;
}

void gu_free(struct gpu_util *g)
{
	for (int d = 0; d < g->ndev; d++)
		free(g->dev[d].s.ring);
	for (int i = 0; i < g->nproc; i++)
		free(g->proc[i].s.ring);
	for (int h = 0; h < GU_MAX_WINS; h++)
		free(g->win[h]);
	if (g->saved_run) {
		gu_win_free(g->saved_run);
		free(g->saved_run);
	}
	gu_init(g);
}

void gu_unavailable(struct gpu_util *g, const char *fmt, ...)
{
	va_list ap;

	g->state = GU_UNAVAILABLE;
	va_start(ap, fmt);
	vsnprintf(g->why, sizeof(g->why), fmt, ap);
	va_end(ap);
}

int gu_add_dev(struct gpu_util *g, int index, const char *uuid, const char *name,
	       uint64_t mem_total)
{
	struct gu_dev *d;

	if (g->ndev == GU_MAX_DEVS) {
		g->devs_over++;
		return -1;
	}
	d = &g->dev[g->ndev];
	memset(d, 0, sizeof(*d));
	d->index = index;
	snprintf(d->uuid, sizeof(d->uuid), "%s", uuid ? uuid : "");
	snprintf(d->name, sizeof(d->name), "%s", name ? name : "");
	d->mem_total = mem_total;
	return g->ndev++;
}

/* ---- one reading's share of a window ---- */

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * s's part of the interval (prev, s] that lies in (lo, hi], in time and
 * kind. Utilization is NVML's average over the time before s: it is s's.
 * Power, clock, throttle reasons and the job's presence are states read at
 * an instant: prev's holds until s (sample and hold), so a state that
 * changes at an epoch boundary, where a reading is taken, splits there.
 */
static void add_interval(struct gu_agg *a, const struct gu_sample *prev,
			 const struct gu_sample *s, uint64_t ov)
{
	a->span_ns += ov;
	if (s->has & GU_HAS_UTIL) {
		a->util_ns += ov;
		a->util_pct_ns += (double)s->util * ov;
	}
	/* The counter: exact at both readings, linear between (a reset: nothing). */
	if ((s->has & prev->has & GU_HAS_ENERGY) && s->energy_mj >= prev->energy_mj) {
		a->energy_ns += ov;
		a->energy_mj += (double)(s->energy_mj - prev->energy_mj) * ov / (s->ts - prev->ts);
	}
	if (prev->has & GU_HAS_POWER) {
		a->power_ns += ov;
		a->power_mw_ns += (double)prev->power_mw * ov;
	}
	if (prev->has & GU_HAS_CLOCK) {
		a->clock_ns += ov;
		a->clock_mhz_ns += (double)prev->clock_mhz * ov;
	}
	if ((prev->has & GU_HAS_THROTTLE) && (prev->throttle & GU_THR_POWER))
		a->thr_power_ns += ov;
	if ((prev->has & GU_HAS_THROTTLE) && (prev->throttle & GU_THR_THERMAL))
		a->thr_thermal_ns += ov;
	if (prev->has & GU_JOB)
		a->job_ns += ov;
}

static void contrib(struct gu_agg *a, const struct gu_sample *prev, const struct gu_sample *s,
		    uint64_t lo, uint64_t hi)
{
	uint64_t from, to;

	if (s->ts > lo && s->ts <= hi) {
		a->samples++;
		if ((s->has & GU_HAS_MEM) && s->mem > a->mem_peak)
			a->mem_peak = s->mem;
	}
	if (!prev || s->ts <= prev->ts)
		return;
	from = max_u64(prev->ts, lo);
	to = min_u64(s->ts, hi);
	if (to > from)
		add_interval(a, prev, s, to - from);
}

void gu_agg_add(struct gu_agg *a, const struct gu_agg *b)
{
	a->samples += b->samples;
	a->span_ns += b->span_ns;
	a->util_ns += b->util_ns;
	a->util_pct_ns += b->util_pct_ns;
	a->energy_ns += b->energy_ns;
	a->energy_mj += b->energy_mj;
	a->power_ns += b->power_ns;
	a->power_mw_ns += b->power_mw_ns;
	a->clock_ns += b->clock_ns;
	a->clock_mhz_ns += b->clock_mhz_ns;
	a->thr_power_ns += b->thr_power_ns;
	a->thr_thermal_ns += b->thr_thermal_ns;
	a->job_ns += b->job_ns;
	if (b->mem_peak > a->mem_peak)
		a->mem_peak = b->mem_peak;
}

double gu_agg_util(const struct gu_agg *a)
{
	return a->util_ns ? a->util_pct_ns / a->util_ns : -1.0;
}

double gu_agg_power_w(const struct gu_agg *a)
{
	return a->power_ns ? a->power_mw_ns / a->power_ns / 1e3 : -1.0;
}

double gu_agg_clock(const struct gu_agg *a)
{
	return a->clock_ns ? a->clock_mhz_ns / a->clock_ns : -1.0;
}

/* ---- series ---- */

static const struct gu_sample *ring_at(const struct gu_series *s, int k)
{
	return &s->ring[(s->head + k) % GU_RING];
}

const struct gu_sample *gu_series_last(const struct gu_series *s)
{
	return s->n ? ring_at(s, s->n - 1) : NULL;
}

int gu_series_since(const struct gu_series *s, uint64_t ts, struct gu_sample *out, int max)
{
	int n = 0;

	for (int k = 0; k < s->n && n < max; k++)
		if (ring_at(s, k)->ts > ts)
			out[n++] = *ring_at(s, k);
	return n;
}

/* Where a tracker keeps series (dev, or proc when proc >= 0)'s part. */
static struct gu_agg *agg_of(struct gu_tracker *t, int dev, int proc)
{
	return proc >= 0 ? &t->proc[proc] : &t->dev[dev];
}

/* The oldest reading leaves the ring: every open tracker takes its part. */
static void evict(struct gpu_util *g, struct gu_series *s, int dev, int proc)
{
	const struct gu_sample *old = ring_at(s, 0);

	for (int h = 0; h < GU_MAX_WINS; h++) {
		struct gu_tracker *t = g->win[h];

		if (t && t->open)
			contrib(agg_of(t, dev, proc), s->has_gone ? &s->gone : NULL, old,
				t->start, UINT64_MAX);
	}
	s->gone = *old;
	s->has_gone = true;
	s->head = (s->head + 1) % GU_RING;
	s->n--;
}

/* Readings come in time order; an older or repeated one is dropped. */
static void push(struct gpu_util *g, struct gu_series *s, const struct gu_sample *x,
		 int dev, int proc)
{
	const struct gu_sample *last = gu_series_last(s);

	if ((last && x->ts <= last->ts) || (!last && s->has_gone && x->ts <= s->gone.ts))
		return;
	if (!s->ring && !(s->ring = calloc(GU_RING, sizeof(*s->ring))))
		return;		/* out of memory: this series stops, the others go on */
	if (s->n == GU_RING)
		evict(g, s, dev, proc);
	s->ring[(s->head + s->n) % GU_RING] = *x;
	s->n++;
}

void gu_dev_sample(struct gpu_util *g, int d, const struct gu_sample *s)
{
	if (d < 0 || d >= g->ndev || g->dev[d].lost)
		return;
	g->dev[d].has |= s->has & ~GU_JOB;
	push(g, &g->dev[d].s, s, d, -1);
}

void gu_dev_lost(struct gpu_util *g, int d, uint64_t ts, const char *why)
{
	if (d < 0 || d >= g->ndev || g->dev[d].lost)
		return;
	g->dev[d].lost = true;
	g->dev[d].lost_ts = ts;
	snprintf(g->dev[d].lost_why, sizeof(g->dev[d].lost_why), "%s", why);
}

/* ---- the job's processes on devices ---- */

static int find_proc(const struct gpu_util *g, pid_t pid, int d)
{
	for (int i = 0; i < g->nproc; i++)
		if (g->proc[i].pid == pid && g->proc[i].dev == d && !g->proc[i].folded)
			return i;
	return -1;
}

/* The series of a process gone longest (not listed for GU_GONE_NS), or -1. */
static int gone_longest(const struct gpu_util *g, uint64_t now)
{
	int best = -1;

	for (int i = 0; i < g->nproc; i++) {
		const struct gu_proc *p = &g->proc[i];

		if (p->last_ts + GU_GONE_NS < now && (best < 0 || p->last_ts < g->proc[best].last_ts))
			best = i;
	}
	return best;
}

/* Series i into its device's exited row of every open tracker; its slot is free. */
static void fold_proc(struct gpu_util *g, int i)
{
	struct gu_proc *p = &g->proc[i];

	while (p->s.n)
		evict(g, &p->s, p->dev, i);
	for (int h = 0; h < GU_MAX_WINS; h++) {
		struct gu_tracker *t = g->win[h];

		if (!t || !t->open)
			continue;
		if (t->proc[i].samples || t->proc[i].span_ns) {
			gu_agg_add(&t->exited[p->dev], &t->proc[i]);
			t->nexited[p->dev]++;
		}
		memset(&t->proc[i], 0, sizeof(t->proc[i]));
	}
	free(p->s.ring);
	memset(p, 0, sizeof(*p));
	g->procs_folded++;
}

static int new_proc(struct gpu_util *g, pid_t pid, int d, uint64_t now)
{
	int i = g->nproc;

	if (i == GU_MAX_PROCS) {
		i = gone_longest(g, now);
		if (i < 0)
			return -1;
		fold_proc(g, i);
	} else {
		g->nproc++;
	}
	memset(&g->proc[i], 0, sizeof(g->proc[i]));
	g->proc[i].pid = pid;
	g->proc[i].dev = d;
	g->proc[i].first_ts = now;
	for (int h = 0; h < GU_MAX_WINS; h++)
		if (g->win[h])
			memset(&g->win[h]->proc[i], 0, sizeof(g->win[h]->proc[i]));
	return i;
}

bool gu_proc_sample(struct gpu_util *g, pid_t pid, int d, const struct gu_sample *s)
{
	int i;

	if (d < 0 || d >= g->ndev || pid <= 0)
		return false;
	i = find_proc(g, pid, d);
	if (i < 0 && (i = new_proc(g, pid, d, s->ts)) < 0)
		return false;
	g->proc[i].last_ts = s->ts;
	push(g, &g->proc[i].s, s, d, i);
	return true;
}

/* ---- windows ---- */

int gu_open(struct gpu_util *g, uint64_t a)
{
	for (int h = 0; h < GU_MAX_WINS; h++) {
		struct gu_tracker *t = g->win[h];

		if (t && t->open)
			continue;
		if (!t && !(t = g->win[h] = malloc(sizeof(*t))))
			return -1;
		memset(t, 0, sizeof(*t));
		t->open = true;
		t->start = a;
		return h;
	}
	return -1;
}

/* A series' part of (start, b]: what left its ring, and its ring. */
static struct gu_agg series_window(const struct gu_series *s, const struct gu_agg *settled,
				   uint64_t start, uint64_t b)
{
	struct gu_agg a = *settled;

	for (int k = 0; k < s->n; k++) {
		const struct gu_sample *prev = k ? ring_at(s, k - 1) : s->has_gone ? &s->gone : NULL;

		contrib(&a, prev, ring_at(s, k), start, b);
	}
	return a;
}

static bool has_data(const struct gu_agg *a)
{
	return a->samples || a->span_ns;
}

static void win_alloc(struct gu_win *w)
{
	memset(w, 0, sizeof(*w));
	w->devs = calloc(GU_MAX_DEVS, sizeof(*w->devs));
	w->procs = calloc(GU_MAX_PROCS + GU_MAX_DEVS, sizeof(*w->procs));
	if (!w->devs || !w->procs)
		abort();	/* as job.c: out of memory, nothing left to say */
}

void gu_peek(const struct gpu_util *g, int h, uint64_t b, struct gu_win *w)
{
	const struct gu_tracker *t = h >= 0 && h < GU_MAX_WINS ? g->win[h] : NULL;

	win_alloc(w);
	if (!t || !t->open)
		return;
	for (int d = 0; d < g->ndev; d++) {
		struct gu_agg a = series_window(&g->dev[d].s, &t->dev[d], t->start, b);

		if (has_data(&a))
			w->devs[w->ndev++] = (struct gu_win_dev){ d, a };
	}
	for (int i = 0; i < g->nproc; i++) {
		struct gu_agg a = series_window(&g->proc[i].s, &t->proc[i], t->start, b);

		if (g->proc[i].pid && has_data(&a))
			w->procs[w->nproc++] = (struct gu_win_proc){ g->proc[i].pid,
								     g->proc[i].dev, 0, a };
	}
	for (int d = 0; d < g->ndev; d++)
		if (t->nexited[d])
			w->procs[w->nproc++] = (struct gu_win_proc){ 0, d, t->nexited[d],
								     t->exited[d] };
}

void gu_close(struct gpu_util *g, int h, uint64_t b, struct gu_win *w)
{
	gu_peek(g, h, b, w);
	if (h >= 0 && h < GU_MAX_WINS && g->win[h])
		g->win[h]->open = false;
}

struct gu_win *gu_close_new(struct gpu_util *g, int *h, uint64_t b)
{
	struct gu_win *w = NULL;

	if (g && *h >= 0 && *h < GU_MAX_WINS && g->win[*h] && g->win[*h]->open &&
	    (w = malloc(sizeof(*w))))
		gu_close(g, *h, b, w);
	gu_drop(g, h);
	return w;
}

void gu_drop(struct gpu_util *g, int *h)
{
	if (g && *h >= 0 && *h < GU_MAX_WINS && g->win[*h])
		g->win[*h]->open = false;
	*h = -1;
}

void gu_win_drop(struct gu_win **w)
{
	if (!*w)
		return;
	gu_win_free(*w);
	free(*w);
	*w = NULL;
}

void gu_win_join(struct gu_win **a, struct gu_win **b)
{
	if (!*b)
		return;
	if (!*a) {
		*a = *b;
		*b = NULL;
		return;
	}
	gu_win_merge(*a, *b);
	gu_win_drop(b);
}

void gu_run_window(const struct gpu_util *g, uint64_t now, struct gu_win *w)
{
	if (g->saved_run && gu_win_copy(w, g->saved_run) == 0)
		return;
	gu_peek(g, g->run, now, w);
}

void gu_win_free(struct gu_win *w)
{
	free(w->devs);
	free(w->procs);
	memset(w, 0, sizeof(*w));
}

int gu_win_copy(struct gu_win *dst, const struct gu_win *src)
{
	win_alloc(dst);
	if (src->ndev > GU_MAX_DEVS || src->nproc > GU_MAX_PROCS + GU_MAX_DEVS)
		return -1;
	memcpy(dst->devs, src->devs, src->ndev * sizeof(*src->devs));
	memcpy(dst->procs, src->procs, src->nproc * sizeof(*src->procs));
	dst->ndev = src->ndev;
	dst->nproc = src->nproc;
	return 0;
}

const struct gu_agg *gu_win_dev(const struct gu_win *w, int d)
{
	for (int i = 0; w && i < w->ndev; i++)
		if (w->devs[i].dev == d)
			return &w->devs[i].a;
	return NULL;
}

/* Rows of one process (pid 0: the folded ones) on one device merge. */
static struct gu_win_proc *win_proc(struct gu_win *w, pid_t pid, int dev)
{
	for (int i = 0; i < w->nproc; i++)
		if (w->procs[i].pid == pid && w->procs[i].dev == dev)
			return &w->procs[i];
	if (w->nproc == GU_MAX_PROCS + GU_MAX_DEVS)
		return NULL;
	memset(&w->procs[w->nproc], 0, sizeof(w->procs[0]));
	w->procs[w->nproc].pid = pid;
	w->procs[w->nproc].dev = dev;
	return &w->procs[w->nproc++];
}

void gu_win_merge(struct gu_win *a, const struct gu_win *b)
{
	if (!a->devs)
		win_alloc(a);
	for (int i = 0; i < b->ndev; i++) {
		int k;

		for (k = 0; k < a->ndev && a->devs[k].dev != b->devs[i].dev; k++)
			;
		if (k == a->ndev) {
			if (a->ndev == GU_MAX_DEVS)
				continue;
			a->devs[a->ndev++] = (struct gu_win_dev){ b->devs[i].dev, { 0 } };
		}
		gu_agg_add(&a->devs[k].a, &b->devs[i].a);
	}
	for (int i = 0; i < b->nproc; i++) {
		struct gu_win_proc *p = win_proc(a, b->procs[i].pid, b->procs[i].dev);

		if (!p)
			continue;
		p->folded += b->procs[i].folded;
		gu_agg_add(&p->a, &b->procs[i].a);
	}
}

/* ---- a window over the job's devices ---- */

static void summary_dev(const struct gpu_util *g, const struct gu_win_dev *wd,
			struct gu_summary *s)
{
	const struct gu_agg *a = &wd->a;
	double u = gu_agg_util(a), p = gu_agg_power_w(a);
	uint64_t total = wd->dev < g->ndev ? g->dev[wd->dev].mem_total : 0;

	if (u >= 0) {
		s->util_avg += u;
		if (!s->util_devs || u < s->util_min) {
			s->util_min = u;
			s->util_min_dev = wd->dev;
		}
		s->util_devs++;
	}
	s->energy_ok &= a->energy_ns > 0;
	s->energy_j += a->energy_mj / 1e3;
	if (p > 0)
		s->power_w += p;
	if (total && (double)a->mem_peak / total >= s->mem_frac) {
		s->mem_frac = (double)a->mem_peak / total;
		s->mem_dev = wd->dev;
		s->mem_peak = a->mem_peak;
	}
	if (a->span_ns && (double)(a->thr_power_ns + a->thr_thermal_ns) / a->span_ns >=
	    s->thr_power + s->thr_thermal) {
		s->thr_power = (double)a->thr_power_ns / a->span_ns;
		s->thr_thermal = (double)a->thr_thermal_ns / a->span_ns;
		s->thr_dev = wd->dev;
	}
}

int gu_win_summary(const struct gpu_util *g, const struct gu_win *w, struct gu_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->energy_ok = true;
	s->util_min_dev = s->mem_dev = s->thr_dev = -1;
	for (int i = 0; w && i < w->ndev; i++) {
		if (!w->devs[i].a.job_ns)
			continue;	/* no process of the job on it in the window */
		summary_dev(g, &w->devs[i], s);
		s->ndev++;
	}
	if (s->util_devs)
		s->util_avg /= s->util_devs;
	if (!s->ndev)
		s->energy_ok = false;
	return s->ndev;
}

/* ---- NVML's pids ---- */

pid_t gu_match_pid(pid_t nvml_pid, const pid_t *pids, int n, const pid_t (*nspid)[4],
		   const int *nns)
{
	pid_t found = 0;

	for (int i = 0; i < n; i++)
		if (pids[i] == nvml_pid)
			return nvml_pid;
	for (int i = 0; i < n; i++)
		for (int k = 1; k < nns[i] && k < 4; k++) {
			if (nspid[i][k] != nvml_pid)
				continue;
			if (found && found != pids[i])
				return 0;	/* two of the job's namespaces have it */
			found = pids[i];
		}
	return found;
}
