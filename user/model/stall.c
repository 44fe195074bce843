// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "stall.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t stall_threshold(uint64_t floor_ns, const uint64_t *hist, long nhist)
{
	uint64_t s[STALL_HIST], med;
	int n = nhist < STALL_HIST ? (int)nhist : STALL_HIST;

	if (!floor_ns)
		floor_ns = STALL_FLOOR_NS;
	if (!n)
		return floor_ns;
	memcpy(s, hist, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u64);
	med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	return STALL_STEPS_X * med > floor_ns ? STALL_STEPS_X * med : floor_ns;
}

/* Phases that wait for a batch: a fetch, and the DataLoader's start-up. */
static bool data_phase(int ph)
{
	return ph == TB_PH_DATA || ph == TB_PH_PEND_DATA || ph == TB_PH_WSTART ||
	       ph == TB_PH_PEND_START || ph == TB_PH_PEND_SHELD;
}

static bool comm_phase(int ph)
{
	return ph == TB_PH_BACKWARD || ph == TB_PH_COMM || ph == TB_PH_PEND_COMM;
}

/*
 * A wait on another process of the job through IPC: a queue, a pipe, a
 * lock. An idle DataLoader worker polls its index queue (and wakes every
 * 5 s to see its trainer alive).
 */
static bool ipc_wait(const struct stall_thread_obs *t)
{
	return t->state == TB_ST_BLOCKED && !t->depth &&
	       (t->wait == TB_W_POLL || t->wait == TB_W_PIPE || t->wait == TB_W_FUTEX);
}

/* A worker that is not waiting for its trainer: it is on (or stuck in) a batch. */
static bool worker_busy(const struct stall_thread_obs *t)
{
	return t->state != TB_ST_FREE && t->state != TB_ST_EXITED && !ipc_wait(t);
}

/* The busy worker whose state has lasted longest; -1 if none is busy. */
static int busy_worker(const struct stall_obs *o)
{
	int best = -1;

	for (int i = 0; i < o->nworkers; i++)
		if (worker_busy(&o->workers[i].main) &&
		    (best < 0 || o->workers[i].main.since < o->workers[best].main.since))
			best = i;
	return best;
}

int stall_wait_kind(const struct stall_obs *o)
{
	const struct stall_thread_obs *t = &o->tr;

	if (t->depth)
		return t->region;
	if (t->state == TB_ST_ONCPU)
		return TB_CPU;
	if (t->state == TB_ST_RUNNABLE)
		return TB_RUNQUEUE;
	switch (t->wait) {
	case TB_W_IOWAIT:
	case TB_W_FILE:
		return TB_IO;
	case TB_W_SOCKET:
		return TB_COMM;
	case TB_W_SLEEP:
		return TB_IDLE;
	}
	/* Blocked on IPC in a fetch: on its workers. */
	if (o->nworkers && data_phase(t->phase))
		return TB_DATA_WAIT;
	/* Its collective's threads wait on the network (gloo), it on them. */
	if (o->net_blocked && comm_phase(t->phase))
		return TB_COMM;
	/* Elsewhere (phases unnamed), beside a worker stuck in a batch. */
	if (o->nworkers && busy_worker(o) >= 0)
		return TB_DATA_WAIT;
	if (o->net_blocked && t->wait == TB_W_FUTEX)
		return TB_COMM;
	return t->wait == TB_W_FUTEX ? TB_LOCK : TB_IDLE;
}

static struct stall_job *job_of(struct stall *st, const char *name)
{
	struct stall_job *j;

	for (int i = 0; i < st->njobs; i++)
		if (!strcmp(st->jobs[i].job, name))
			return &st->jobs[i];
	j = tb_grow(st->jobs, &st->cap, st->njobs + 1, sizeof(*j));
	if (!j)
		return NULL;
	st->jobs = j;
	j = &st->jobs[st->njobs++];
	memset(j, 0, sizeof(*j));
	strncpy(j->job, name, sizeof(j->job) - 1);
	return j;
}

static struct stall_mem *mem_of(struct stall_job *j, const struct stall_obs *o)
{
	for (int i = 0; i < j->nmem; i++)
		if (j->mem[i].pid == o->pid)
			return &j->mem[i];
	if (j->nmem >= STALL_MAX_RANKS)
		return NULL;
	j->mem[j->nmem] = (struct stall_mem){ .pid = o->pid };
	return &j->mem[j->nmem++];
}

/*
 * A rank's progress since the last refresh: true if it made some. Its
 * steps' times go to the median: k steps seen over dt are k of dt / k.
 */
static bool take_progress(struct stall_job *j, struct stall_mem *m,
			  const struct stall_obs *o, uint64_t now)
{
	bool first = !m->seen, moved;

	m->seen = true;
	if (o->progress < m->progress || o->steps < m->steps)	/* a pid reused */
		first = true;
	if (first) {
		memcpy(m->cp0, o->cp, sizeof(m->cp0));
		moved = o->progress > 0 && !j->progress_ns;
		m->progress = o->progress;
		m->steps = o->steps;
		m->steps_ns = now;
		return moved;
	}
	if (o->steps > m->steps) {
		uint64_t k = o->steps - m->steps, dt = now - m->steps_ns;

		for (uint64_t i = 0; i < k && i < STALL_HIST; i++)
			j->hist[j->nhist++ % STALL_HIST] = dt / k;
		m->steps = o->steps;
		m->steps_ns = now;
	}
	moved = o->progress > m->progress;
	m->progress = o->progress;
	return moved;
}

/* The category a rank spent the most in since the stall began. */
static void since_stall(const struct stall_mem *m, const struct stall_obs *o,
			struct stall_rank *r)
{
	r->cat = TB_IDLE;
	r->cat_ns = 0;
	for (int c = 0; c < TB_NCAT; c++) {
		uint64_t d = o->cp[c] > m->cp0[c] ? o->cp[c] - m->cp0[c] : 0;

		if (d > r->cat_ns) {
			r->cat = c;
			r->cat_ns = d;
		}
	}
}

/*
 * What it waits on, and since when: a wait a timeout wakes every few
 * seconds (a DataLoader's 5 s check of its workers) is one wait. A refresh
 * that lands in the wake-up itself sees the thread on a CPU or waiting for
 * one; the wait goes on if the next refresh sees it again (a hung
 * DataLoader's trainer read "waiting 2.6 s" 7.5 s into the stall).
 */
static void track_wait(struct stall_mem *m, const struct stall_obs *o, uint64_t now)
{
	int w = stall_wait_kind(o);
	uint64_t from = o->tr.since && o->tr.since < now ? o->tr.since : now;
	bool running = w == TB_CPU || w == TB_RUNQUEUE;

	if (m->wait_from && w != m->wait && running && !m->woke) {
		m->woke = true;
		return;
	}
	m->woke = false;
	if (!m->wait_from || w != m->wait) {
		m->wait = w;
		m->wait_from = from;
	} else if (from < m->wait_from) {
		m->wait_from = from;
	}
}

static void rank_of(const struct stall_mem *m, const struct stall_obs *o, uint64_t now,
		    struct stall_rank *r)
{
	int w;

	memset(r, 0, sizeof(*r));
	r->pid = o->pid;
	r->rank = o->rank;
	r->phase = o->tr.phase;
	r->wait = m->wait;
	r->wait_ns = now > m->wait_from ? now - m->wait_from : 0;
	r->in_api = o->tr.depth;
	r->api = o->tr.depth ? o->tr.api : 0;
	r->api_bytes = o->tr.depth ? o->tr.api_bytes : 0;
	since_stall(m, o, r);
	if (r->wait == TB_IO)
		memcpy(r->object, o->tr.object, sizeof(r->object));
	w = r->wait == TB_DATA_WAIT ? busy_worker(o) : -1;
	if (w < 0)
		return;
	r->worker = o->workers[w].pid;
	r->worker_state = o->workers[w].main.state;
	r->worker_wait = o->workers[w].main.wait;
	r->worker_ns = now > o->workers[w].main.since ? now - o->workers[w].main.since : 0;
}

/* Whether a beats b as the culprit among ranks of one kind: longer wait, lower rank. */
static bool longer(const struct stall_rank *a, const struct stall_rank *b)
{
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns > b->wait_ns;
	return a->rank < b->rank;
}

/* All ranks in communication: the one with fewest collectives, if they differ. */
static int fewest_collectives(const struct stall_obs *const *o, int n)
{
	int best = 0;
	bool differ = false;

	for (int i = 0; i < n; i++)
		if (!o[i]->has_coll)
			return -1;
	for (int i = 1; i < n; i++) {
		differ |= o[i]->coll != o[0]->coll;
		if (o[i]->coll < o[best]->coll)
			best = i;
	}
	return differ ? best : -1;
}

/* The most calls any rank of o entered on communicator key, and how many ranks have it. */
static uint64_t comm_max(const struct stall_obs *const *o, int n, uint64_t key, int *members)
{
	uint64_t most = 0;

	*members = 0;
	for (int i = 0; i < n; i++)
		for (int c = 0; c < o[i]->ncomms; c++)
			if (o[i]->comms[c].key == key) {
				++*members;
				most = o[i]->comms[c].calls > most ? o[i]->comms[c].calls : most;
			}
	return most;
}

/*
 * Each rank's lag on the communicators it shares with another rank seen
 * (r[i].behind, behind_comm: its largest); returns whether any
 * communicator is shared.
 */
static bool comm_lags(struct stall_rank *r, const struct stall_obs *const *o, int n)
{
	bool shared = false;
	int members;

	for (int i = 0; i < n; i++)
		for (int c = 0; c < o[i]->ncomms; c++) {
			uint64_t most = comm_max(o, n, o[i]->comms[c].key, &members);
			uint64_t lag = most - o[i]->comms[c].calls;

			shared |= members > 1;
			if (members > 1 && lag > r[i].behind) {
				r[i].behind = lag;
				r[i].behind_comm = o[i]->comms[c].key;
			}
		}
	return shared;
}

/* The rank furthest behind on a communicator; -1 if none is. */
static int furthest_behind(const struct stall_rank *r, int n)
{
	int best = -1;

	for (int i = 0; i < n; i++)
		if (r[i].behind && (best < 0 || r[i].behind > r[best].behind ||
				    (r[i].behind == r[best].behind && longer(&r[i], &r[best]))))
			best = i;
	return best;
}

/* The rank whose wait has no peer (see stall.h); -1: none to tell. */
static int choose_culprit(struct stall_rank *r, const struct stall_obs *const *o, int n)
{
	int ncomm = 0, best = -1;
	bool shared = comm_lags(r, o, n);

	if ((best = furthest_behind(r, n)) >= 0)
		return best;
	for (int i = 0; i < n; i++)
		ncomm += r[i].wait == TB_COMM;
	/* Counts of shared communicators agree: totals over others would mislead. */
	if (ncomm == n)
		return shared ? -1 : fewest_collectives(o, n);
	for (int i = 0; i < n; i++)
		if (r[i].wait != TB_COMM && (best < 0 || longer(&r[i], &r[best])))
			best = i;
	return best;
}

static int by_rank(const void *a, const void *b)
{
	const struct stall_rank *x = a, *y = b;

	if (x->culprit != y->culprit)
		return y->culprit - x->culprit;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void judge(struct stall_job *j, const struct stall_obs *const *o, int n, uint64_t now)
{
	const struct stall_obs *seen[STALL_MAX_RANKS];	/* o of each of j->ranks */
	int c;

	j->nranks = 0;
	j->culprit = false;
	for (int i = 0; i < n; i++) {
		const struct stall_mem *m = mem_of(j, o[i]);

		if (!m)
			continue;
		seen[j->nranks] = o[i];
		rank_of(m, o[i], now, &j->ranks[j->nranks++]);
	}
	c = choose_culprit(j->ranks, seen, j->nranks);
	if (c >= 0) {
		j->ranks[c].culprit = true;
		j->culprit = true;
	}
	qsort(j->ranks, j->nranks, sizeof(*j->ranks), by_rank);
}

/* One job's refresh, its ranks' observations in o[0..n). */
static void update_job(struct stall *st, struct stall_job *j, const struct stall_obs *const *o,
		       int n, uint64_t now)
{
	uint64_t at = 0;
	bool moved = false;

	for (int i = 0; i < n; i++) {
		struct stall_mem *m = mem_of(j, o[i]);

		if (!m)
			continue;
		if (take_progress(j, m, o[i], now)) {
			moved = true;
			/* the progress's own time, not this refresh's (a late one under load) */
			at = o[i]->progress_at && o[i]->progress_at <= now &&
			     o[i]->progress_at > at ? o[i]->progress_at : at;
		}
		track_wait(m, o[i], now);
	}
	j->now = now;
	j->threshold_ns = stall_threshold(st->floor_ns, j->hist, j->nhist);
	if (moved) {
		/* The stall, if any, is over; what comes next is measured from here. */
		j->progress_ns = at ? at : now;
		j->stalled = false;
		for (int i = 0; i < j->nmem; i++)
			for (int k = 0; k < n; k++)
				if (o[k]->pid == j->mem[i].pid)
					memcpy(j->mem[i].cp0, o[k]->cp, sizeof(j->mem[i].cp0));
		return;
	}
	/*
	 * Not before a step's time is known: a job whose steps are longer than
	 * the floor would be called stalled in its first one (a large model's
	 * 40 s steps under the 30 s floor), and nothing yet says how long a
	 * step takes. A hang in the first step is the dump's to show.
	 */
	j->stalled = j->progress_ns && j->nhist && now - j->progress_ns > j->threshold_ns;
	if (!j->stalled)
		return;
	j->since = j->progress_ns;
	judge(j, o, n, now);
}

/* Ranks gone (exited) are forgotten: a pid reused is another rank. */
static void drop_unseen(struct stall_job *j, const struct stall_obs *const *o, int n)
{
	int k = 0;

	for (int i = 0; i < j->nmem; i++) {
		bool alive = false;

		for (int x = 0; x < n && !alive; x++)
			alive = o[x]->pid == j->mem[i].pid;
		if (alive)
			j->mem[k++] = j->mem[i];
	}
	j->nmem = k;
}

void stall_update(struct stall *st, const struct stall_obs *obs, int n, uint64_t now)
{
	const struct stall_obs **o = calloc(n ? n : 1, sizeof(*o));
	int k = 0;

	if (!o)
		return;
	for (int i = 0; i < n; i++)
		job_of(st, obs[i].job);
	for (int ji = 0; ji < st->njobs; ji++) {
		struct stall_job *j = &st->jobs[ji];
		int m = 0;

		for (int i = 0; i < n; i++)
			if (!strcmp(obs[i].job, j->job))
				o[m++] = &obs[i];
		if (!m)
			continue;
		drop_unseen(j, o, m);
		update_job(st, j, o, m, now);
		st->jobs[k++] = *j;
	}
	st->njobs = k;	/* jobs with no rank alive now are gone */
	free(o);
}

const struct stall_job *stall_job(const struct stall *st, const char *job)
{
	for (int i = 0; i < st->njobs; i++)
		if (!strcmp(st->jobs[i].job, job))
			return &st->jobs[i];
	return NULL;
}

bool stall_pid_stalled(const struct stall *st, pid_t pid)
{
	for (int i = 0; i < st->njobs; i++)
		for (int k = 0; st->jobs[i].stalled && k < st->jobs[i].nmem; k++)
			if (st->jobs[i].mem[k].pid == pid)
				return true;
	return false;
}

const struct stall_rank *stall_culprit(const struct stall *st, pid_t pid)
{
	for (int i = 0; i < st->njobs; i++) {
		const struct stall_job *j = &st->jobs[i];

		if (j->stalled && j->culprit && j->nranks && j->ranks[0].pid == pid)
			return &j->ranks[0];
	}
	return NULL;
}

const struct stall_job *stall_any(const struct stall *st)
{
	for (int i = 0; i < st->njobs; i++)
		if (st->jobs[i].stalled)
			return &st->jobs[i];
	return NULL;
}

void stall_free(struct stall *st)
{
	free(st->jobs);
	st->jobs = NULL;
	st->njobs = st->cap = 0;
}

const char *stall_state_words(int state, int wait)
{
	static const char *const waits[] = {
		[TB_W_OTHER] = "blocked", [TB_W_IOWAIT] = "in storage I/O",
		[TB_W_FILE] = "in a file syscall", [TB_W_SOCKET] = "on a socket",
		[TB_W_POLL] = "polling", [TB_W_FUTEX] = "on a futex",
		[TB_W_SLEEP] = "sleeping", [TB_W_PIPE] = "on a pipe",
	};

	if (state == TB_ST_ONCPU)
		return "on CPU";
	if (state == TB_ST_RUNNABLE)
		return "runnable";
	if (state == TB_ST_BLOCKED && wait >= 0 && wait <= TB_W_PIPE)
		return waits[wait];
	return "unseen";
}
