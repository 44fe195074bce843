// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "steps.h"

bool steps_sym_match(struct st_sym a, struct st_sym b)
{
	if (a.api != b.api)
		return false;
	if (a.gap == ST_GAP_NONE || b.gap == ST_GAP_NONE)
		return a.gap == b.gap;
	return abs((int)a.gap - (int)b.gap) <= 1;
}

uint8_t steps_gap_bucket(uint64_t gap_ns)
{
	uint64_t us = gap_ns / 1000;

	/* Below 16 us, about the probes' own cost, gaps are one bucket. */
	return us < 16 ? 0 : 64 - __builtin_clzll(us) - 4;
}

/*
 * The share of calls that match their phase a lag back or a lag on: a call
 * whose gap a preemption stretched is one miss, not two (the call a lag
 * after it matches the one after that), and one for every lag (all calls
 * are scored), so that a multiple of the period scores no better than it.
 * A wrong lag compares other phases both ways.
 */
static double lag_score(const struct st_sym *s, int n, int lag)
{
	int match = 0;

	for (int i = 0; i < n; i++)
		match += (i >= lag && steps_sym_match(s[i], s[i - lag])) ||
			 (i + lag < n && steps_sym_match(s[i], s[i + lag]));
	return (double)match / n;
}

int steps_find_period(const struct st_sym *s, int n, double *score)
{
	int max = n / ST_MIN_REPS, best = 0;
	double sc[ST_MAX_PERIOD + 1], top = 0;

	if (n < ST_MIN_CALLS)
		return 0;
	if (max > ST_MAX_PERIOD)
		max = ST_MAX_PERIOD;
	for (int lag = 1; lag <= max; lag++) {
		sc[lag] = lag_score(s, n, lag);
		if (sc[lag] > top)
			top = sc[lag];
	}
	/* Multiples of the period score as well as it: take the first. */
	for (int lag = 1; lag <= max && !best; lag++)
		if (sc[lag] >= ST_MATCH && sc[lag] >= top - ST_SLACK)
			best = lag;
	if (score)
		*score = best ? sc[best] : top;
	return best;
}

int steps_phase(const struct st_sym *s, int n, int p)
{
	double best = -1;
	int phase = 0;

	for (int k = 0; k < p; k++) {
		double sum = 0;
		int cnt = 0;

		for (int i = k; i < n; i += p) {
			if (s[i].gap == ST_GAP_NONE)
				continue;
			sum += s[i].gap;
			cnt++;
		}
		if (cnt && sum / cnt > best) {
			best = sum / cnt;
			phase = k;
		}
	}
	return phase;
}

void st_sum_fold(struct st_sum *sum, uint64_t *t, int *n, int keep)
{
	int k = *n - keep;

	for (int i = 0; i < k; i++) {
		double ms = (t[i + 1] - t[i]) / 1e6;

		if (!sum->count || ms < sum->min_ms)
			sum->min_ms = ms;
		if (!sum->count || ms > sum->max_ms)
			sum->max_ms = ms;
		if (!sum->count)
			sum->first = t[i];
		sum->total_ms += ms;
		sum->sum_sq += ms * ms;
		sum->count++;
	}
	if (k <= 0)
		return;
	sum->end = t[k];
	memmove(t, t + k, keep * sizeof(*t));
	*n = keep;
}

bool st_sum_inside(const struct st_sum *sum, uint64_t a, uint64_t b)
{
	return sum->count && a <= sum->first && sum->end <= b;
}

/* Past ST_MAX_SYNCS: the older half counted (first and last entry). */
static void fold_syncs(struct st_proc *p)
{
	int k = p->nsyncs / 2;

	if (!p->folded.count)
		p->folded.first = p->syncs[0];
	p->folded.count += k;
	p->folded.end = p->syncs[k - 1];
	memmove(p->syncs, p->syncs + k, (p->nsyncs - k) * sizeof(*p->syncs));
	p->nsyncs -= k;
}

/* Appends ts to a sorted list; events of different threads come nearly sorted. */
static void insert_sorted(uint64_t **list, int *n, int *cap, uint64_t ts)
{
	uint64_t *l = tb_grow(*list, cap, *n + 1, sizeof(*l));
	int i;

	if (!l)
		return;
	*list = l;
	for (i = *n; i > 0 && l[i - 1] > ts; i--)
		l[i] = l[i - 1];
	l[i] = ts;
	(*n)++;
}

static struct st_thread *thread_of(struct steps *st, pid_t pid, pid_t tid)
{
	struct st_thread *t;

	for (int i = st->nth - 1; i >= 0; i--)
		if (st->th[i].tid == tid && st->th[i].pid == pid)
			return &st->th[i];
	t = tb_grow(st->th, &st->capth, st->nth + 1, sizeof(*t));
	if (!t)
		return NULL;
	st->th = t;
	t = &st->th[st->nth++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	return t;
}

static struct st_proc *proc_of(struct steps *st, pid_t pid)
{
	struct st_proc *p;

	for (int i = 0; i < st->npr; i++)
		if (st->pr[i].pid == pid)
			return &st->pr[i];
	p = tb_grow(st->pr, &st->cappr, st->npr + 1, sizeof(*p));
	if (!p)
		return NULL;
	st->pr = p;
	p = &st->pr[st->npr++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

static const struct st_call *call_at(const struct st_thread *t, uint64_t i)
{
	return &t->ring[i % ST_RING];
}

static void add_bound(struct st_thread *t, uint64_t ts)
{
	/* Windows overlap a previous lock's: a start already taken is skipped. */
	if (t->nbounds && ts <= t->bounds[t->nbounds - 1])
		return;
	if (t->nbounds >= ST_MAX_BOUNDS)
		st_sum_fold(&t->folded, t->bounds, &t->nbounds, ST_MAX_BOUNDS / 2);
	insert_sorted(&t->bounds, &t->nbounds, &t->capbounds, ts);
}

/* Whether a period shorter than p, dividing it, explains calls [from, to). */
static bool shorter_period(const struct st_thread *t, uint64_t from, uint64_t to, int p)
{
	struct st_sym s[ST_RING];
	int n = to - from, q;

	for (int i = 0; i < n; i++)
		s[i] = call_at(t, from + i)->sym;
	q = steps_find_period(s, n, NULL);
	return q && q < p && p % q == 0;
}

/*
 * The loop changed at call from, at the latest: the steps that started
 * since are unproven, so they go, and detection starts again there.
 */
static void unlock(struct st_thread *t, uint64_t from)
{
	uint64_t ts = call_at(t, from)->entry;

	while (t->nbounds && t->bounds[t->nbounds - 1] >= ts)
		t->nbounds--;
	t->period = 0;
	t->since = from;
	t->tried = 0;
}

/*
 * Whether a shorter period explains every call since the window the period
 * was found in: found in a noisy window, period 10 was a loop of 2 calls
 * (each step counted once in 5), and those steps go too.
 */
static bool wrong_from_start(const struct st_thread *t, uint64_t to, int p)
{
	return to - t->locked_from <= ST_RING && shorter_period(t, t->locked_from, to, p);
}

/*
 * Call i of a thread with a locked period: a step starts at its phase. The
 * period is dropped at the end of a check block that matches less than
 * ST_KEEP, or that a shorter period explains (a loop of one sync also
 * repeats every 3 calls): the loop changed (evaluation, another phase of
 * training).
 */
/*
 * Call i matches its phase one period back, or two: a call whose gap a
 * preemption stretched is one miss, not a second one for the call a
 * period after it.
 */
static bool matches_back(const struct st_thread *t, uint64_t i, uint64_t p)
{
	struct st_sym s = call_at(t, i)->sym;

	return steps_sym_match(s, call_at(t, i - p)->sym) ||
	       (i >= 2 * p && steps_sym_match(s, call_at(t, i - 2 * p)->sym));
}

static void follow(struct st_thread *t, uint64_t i)
{
	uint64_t p = t->period, len;

	if (!matches_back(t, i, p) && !t->miss++)
		t->first_miss = i;
	if ((i - t->anchor) % p == 0)
		add_bound(t, call_at(t, i)->entry);
	len = i + 1 - t->block;
	if (len < ST_MIN_REPS * p || len < ST_MIN_CALLS)
		return;
	if (t->miss > (1 - ST_KEEP) * len)
		unlock(t, t->first_miss);
	else if (shorter_period(t, t->block, i + 1, p))
		unlock(t, wrong_from_start(t, i + 1, p) ? t->locked_from :
			  t->miss ? t->first_miss : t->block);
	t->block = i + 1;
	t->miss = 0;
}

void steps_on_event(struct steps *st, const struct tb_call_event *e)
{
	struct st_thread *t = thread_of(st, e->pid, e->tid);
	struct st_call *c;

	st->calls++;
	if (e->entry > st->latest)
		st->latest = e->entry;
	if (t)
		t->last_call = e->entry;
	if (t && !t->ring)
		t->ring = calloc(ST_RING, sizeof(*t->ring));
	if (!t || !t->ring)
		return;
	c = &t->ring[t->n % ST_RING];
	c->entry = e->entry;
	c->sym.api = e->api;
	c->sym.gap = t->n && e->entry >= t->last_ret ?
		steps_gap_bucket(e->entry - t->last_ret) : ST_GAP_NONE;
	t->last_ret = e->ret;
	if (t->period)
		follow(t, t->n);
	t->n++;
	if (e->kind == TB_AK_SYNC || e->kind == TB_AK_MEMCPY)
		steps_add_sync(st, e->pid, e->entry);
}

void steps_add_start(struct steps *st, pid_t pid, pid_t tid, uint64_t ts)
{
	struct st_thread *t = thread_of(st, pid, tid);

	if (t)
		add_bound(t, ts);
}

void steps_add_sync(struct steps *st, pid_t pid, uint64_t ts)
{
	struct st_proc *p = proc_of(st, pid);

	if (!p)
		return;
	if (p->nsyncs >= ST_MAX_SYNCS)
		fold_syncs(p);
	insert_sorted(&p->syncs, &p->nsyncs, &p->capsyncs, ts);
}

/* Locks period p found in calls [w0, n): the steps in the window too. */
static void lock(struct st_thread *t, const struct st_sym *s, uint64_t w0, int p)
{
	t->period = p;
	t->locked_from = w0;
	t->anchor = w0 + steps_phase(s, t->n - w0, p);
	for (uint64_t i = t->anchor; i < t->n; i += p)
		add_bound(t, call_at(t, i)->entry);
	t->block = t->n;
	t->miss = 0;
}

/*
 * Tries the whole window, then its newer half and quarter: a window that
 * starts in a stretch with no period (start-up, the previous loop) may
 * hold a period in its newer part.
 */
static void detect(struct st_thread *t, struct st_sym *s)
{
	uint64_t w0 = t->since, oldest = t->n > ST_RING ? t->n - ST_RING : 0;

	if (w0 < oldest)
		w0 = oldest;
	for (int part = 1; part <= 4; part *= 2) {
		uint64_t from = t->n - (t->n - w0) / part;
		int n = t->n - from, p;

		for (int i = 0; i < n; i++)
			s[i] = call_at(t, from + i)->sym;
		p = steps_find_period(s, n, NULL);
		if (p) {
			lock(t, s, from, p);
			return;
		}
	}
	t->tried = t->n;
}

/* An idle thread's ring goes back; detection starts over if it calls again. */
static void rest(struct st_thread *t)
{
	free(t->ring);
	t->ring = NULL;
	t->n = t->since = t->tried = t->anchor = t->block = t->first_miss = 0;
	t->period = t->miss = 0;
	t->last_ret = 0;
}

static uint64_t last_bound(const struct st_thread *t)
{
	return t->nbounds ? t->bounds[t->nbounds - 1] : 0;
}

static uint64_t last_sync(const struct st_proc *p)
{
	return p->nsyncs ? p->syncs[p->nsyncs - 1] : 0;
}

/*
 * Idle threads give their rings back; one with nothing else goes. Past
 * ST_MAX_SERIES idle threads with steps (ST_MAX_PROCS processes with
 * syncs), the one whose last step (sync) is oldest goes.
 */
static void prune(struct steps *st)
{
	int k = 0, series = 0, oldest;

	for (int i = 0; i < st->nth; i++) {
		struct st_thread *t = &st->th[i];

		if (t->ring && t->last_call + ST_IDLE_NS < st->latest)
			rest(t);
		if (!t->ring && !t->nbounds) {
			free(t->bounds);
			continue;
		}
		series += t->nbounds > 0;
		st->th[k++] = *t;
	}
	st->nth = k;
	for (; series > ST_MAX_SERIES; series--) {
		oldest = -1;
		for (int i = 0; i < st->nth; i++)
			if (!st->th[i].ring && st->th[i].nbounds &&
			    (oldest < 0 || last_bound(&st->th[i]) < last_bound(&st->th[oldest])))
				oldest = i;
		if (oldest < 0)
			break;
		free(st->th[oldest].bounds);
		st->th[oldest] = st->th[--st->nth];
	}
	while (st->npr > ST_MAX_PROCS) {
		oldest = 0;
		for (int i = 1; i < st->npr; i++)
			if (last_sync(&st->pr[i]) < last_sync(&st->pr[oldest]))
				oldest = i;
		free(st->pr[oldest].syncs);
		memmove(&st->pr[oldest], &st->pr[oldest + 1],
			(st->npr - oldest - 1) * sizeof(*st->pr));
		st->npr--;
	}
}

void steps_tick(struct steps *st)
{
	struct st_sym s[ST_RING];

	for (int i = 0; i < st->nth; i++) {
		struct st_thread *t = &st->th[i];

		if (!t->period && t->n > t->tried && t->n - t->since >= ST_MIN_CALLS)
			detect(t, s);
	}
	prune(st);
}

int st_lower_bound(const uint64_t *l, int n, uint64_t ts)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (l[mid] < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const uint64_t *steps_bounds(const struct steps *st, uint64_t a, uint64_t b,
			     int *n, uint64_t *next, pid_t *pid)
{
	const struct st_thread *best = NULL;
	int best_n = 0, best_from = 0;
	bool best_main = false;

	for (int i = 0; st && i < st->nth; i++) {
		const struct st_thread *t = &st->th[i];
		int from = st_lower_bound(t->bounds, t->nbounds, a);
		int cnt = st_lower_bound(t->bounds, t->nbounds, b) - from;
		bool is_main = t->tid == t->pid;

		if (!cnt || (best_main && !is_main))
			continue;
		if ((is_main && !best_main) || cnt > best_n) {
			best = t;
			best_n = cnt;
			best_from = from;
			best_main = is_main;
		}
	}
	*n = best_n;
	*next = 0;
	if (!best)
		return NULL;
	*pid = best->pid;
	if (best_from + best_n < best->nbounds)
		*next = best->bounds[best_from + best_n];
	return best->bounds + best_from;
}

int steps_syncs(const struct steps *st, pid_t pid, uint64_t a, uint64_t b)
{
	for (int i = 0; st && i < st->npr; i++) {
		const struct st_proc *p = &st->pr[i];

		if (p->pid == pid)
			return st_lower_bound(p->syncs, p->nsyncs, b) -
			       st_lower_bound(p->syncs, p->nsyncs, a) +
			       (p->folded.count && a <= p->folded.first && p->folded.end < b ?
				p->folded.count : 0);
	}
	return 0;
}

const struct st_sum *steps_folded(const struct steps *st, const uint64_t *bounds)
{
	for (int i = 0; st && bounds && i < st->nth; i++) {
		const struct st_thread *t = &st->th[i];

		if (bounds >= t->bounds && bounds < t->bounds + t->nbounds)
			return t->folded.count ? &t->folded : NULL;
	}
	return NULL;
}

void steps_free(struct steps *st)
{
	for (int i = 0; i < st->nth; i++) {
		free(st->th[i].ring);
		free(st->th[i].bounds);
	}
	for (int i = 0; i < st->npr; i++)
		free(st->pr[i].syncs);
	free(st->th);
	free(st->pr);
	memset(st, 0, sizeof(*st));
}
