// SPDX-License-Identifier: BSD-3-Clause
/*
 * What /proc alone tells (memory, RSS, ranks: sampled by memory.c), and the
 * windows the rules judge: the whole run, or one epoch. The rules are in
 * diagnosis_rules.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "job.h"
#include "phases.h"
#include "session.h"

#define BOUNDARY_LAG_NS 250000000ull	/* a tick, and some */
#define RSS_MAX_SAMPLES 4096	/* 1 s apart: an hour; then halved */

void diag_init(struct diag *d)
{
	memset(d, 0, sizeof(*d));
}

void diag_set_saved(struct diag *d, const struct dg_saved *saved, int n)
{
	d->saved = saved;
	d->nsaved = n;
}

void diag_free(struct diag *d)
{
	for (int i = 0; i < d->nprocs; i++) {
		free(d->procs[i].ts);
		free(d->procs[i].kb);
	}
	free(d->procs);
	memset(d, 0, sizeof(*d));
}

void diag_add_memory(struct diag *d, uint64_t total_kb, uint64_t avail_kb, uint64_t ts)
{
	d->mem_total_kb = total_kb;
	if (!d->mem_min_ts || avail_kb < d->mem_min_avail_kb) {
		d->mem_min_avail_kb = avail_kb;
		d->mem_min_ts = ts;
	}
}

static struct dg_pinfo *pinfo(struct diag *d, pid_t pid, bool add)
{
	struct dg_pinfo *p;

	for (int i = 0; i < d->nprocs; i++)
		if (d->procs[i].pid == pid)
			return &d->procs[i];
	if (!add)
		return NULL;
	if (d->nprocs == d->cap) {
		int cap = d->cap ? 2 * d->cap : 16;

		p = realloc(d->procs, cap * sizeof(*p));
		if (!p)
			return NULL;
		d->procs = p;
		d->cap = cap;
	}
	p = &d->procs[d->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->rank = -1;
	return p;
}

/* Keeps the time span at half the resolution when the buffer is full. */
void diag_add_rss(struct dg_pinfo *p, uint64_t ts, uint64_t kb)
{
	if (p->n == RSS_MAX_SAMPLES) {
		for (int i = 0; i < p->n / 2; i++) {
			p->ts[i] = p->ts[2 * i + 1];
			p->kb[i] = p->kb[2 * i + 1];
		}
		p->n /= 2;
	}
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 4;	/* most processes live seconds */
		uint64_t *ts = realloc(p->ts, cap * sizeof(*ts)), *kb;

		if (!ts)
			return;
		p->ts = ts;
		kb = realloc(p->kb, cap * sizeof(*kb));
		if (!kb)
			return;
		p->kb = kb;
		p->cap = cap;
	}
	p->ts[p->n] = ts;
	p->kb[p->n++] = kb;
}

struct dg_pinfo *diag_pinfo(struct diag *d, pid_t pid)
{
	return pinfo(d, pid, true);
}

static int by_seen(const void *a, const void *b)
{
	const struct dg_pinfo *x = a, *y = b;

	return x->seen_ns > y->seen_ns ? -1 : x->seen_ns < y->seen_ns;
}

void diag_forget_gone(struct diag *d, uint64_t now)
{
	int gone = 0;

	for (int i = 0; i < d->nprocs; i++)
		gone += d->procs[i].seen_ns < now;
	if (gone <= DG_MAX_GONE)
		return;
	/* Newest first; the ones gone longest are past the end. */
	qsort(d->procs, d->nprocs, sizeof(*d->procs), by_seen);
	for (int i = d->nprocs - (gone - DG_MAX_GONE); i < d->nprocs; i++) {
		free(d->procs[i].ts);
		free(d->procs[i].kb);
	}
	d->nprocs -= gone - DG_MAX_GONE;
}

int diag_proc_rank(const struct session *ses, pid_t pid)
{
	const struct dg_pinfo *pi = pinfo((struct diag *)&ses->diag, pid, false);
	const struct gpu_proc *gp = gpu_proc_find(&ses->gpu, pid);
	const struct proc_rec *p = job_proc_const(&ses->job, pid);

	if (pi && pi->rank >= 0)
		return pi->rank;
	if (p && p->labels.rank >= 0)	/* its labels (serve), a recording's rank */
		return p->labels.rank;
	for (int i = 0; gp && i < gp->ncomms; i++)
		if (gp->comms[i].rank >= 0)
			return gp->comms[i].rank;
	return -1;
}

static bool phases_known(const struct session *ses);

static int view_alloc(struct dg_view *v, const struct session *ses, int n)
{
	memset(v, 0, sizeof(*v));
	v->p = calloc(n ? n : 1, sizeof(*v->p));
	if (!v->p)
		return -1;
	v->ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	v->gpu = gpu_any_library(&ses->gpu);
	v->phases = phases_known(ses);
	v->gens = ses->ep.gens;
	v->ngens = ses->ep.ngens;
	return 0;
}

/*
 * Whether a thread ran training phases: steps, or backward time in its
 * rows. With no phase event in the job, nothing says: every one did.
 */
/* Phase events came (live), or a recording says where its rows came from. */
/*
 * The job's phases say who trained: libtorch is probed (live, the scan
 * found it; read back, the recording says its source). Not phase events
 * alone: a thread that forks outside any bracket gets worker start-up
 * events in any process (bpf/torch.bpf.h start_mark), and a C job's
 * launcher forking its ranks made every rank "untrained" (slow_rank and
 * the rank rules fell silent: test_slow_rank_and_comm_bound).
 */
static bool phases_known(const struct session *ses)
{
	const struct phases *ph = ses_phases(ses);

	return ph && (ph->source > PH_SRC_NONE || gpu_has_torch(&ses->gpu));
}

static bool trained(const struct session *ses, const struct thread_rec *t)
{
	const struct ph_thread *pt;

	if (!phases_known(ses))
		return true;
	if (!t)
		return false;
	pt = phases_thread(&ses->phases, t->tid);
	if (pt && (pt->steps.steps > 0 || pt->trained))
		return true;
	for (int c = 0; c < TB_NCAT; c++)
		if (t->ph[TB_PH_BACKWARD][c])
			return true;
	return false;
}

/*
 * The main thread's storage bytes (the process's life: an epoch splits
 * reads from writes by their ratio) and whether it trained.
 */
static void io_and_phases(const struct session *ses, struct dg_proc *p)
{
	const struct proc_rec *pr = job_proc_const(&ses->job, p->pid);
	const struct thread_rec *mt = pr ? job_trainer_thread(pr) : NULL;

	p->rbytes = mt ? mt->io_rbytes : 0;
	p->wbytes = mt ? mt->io_wbytes : 0;
	p->trained = trained(ses, mt);
}

/* A worker's busiest thread (most time not idle): the one doing its work. */
static void busiest_thread(const struct proc_rec *pr, int64_t out[TB_NCAT])
{
	int64_t best = -1;

	for (int i = 0; i < pr->nthreads; i++) {
		const struct thread_rec *t = &pr->threads[i];
		int64_t busy = 0;

		if (t->folded)
			continue;	/* many threads summed: no one thread */
		for (int c = 0; c < TB_NCAT; c++)
			busy += c == TB_IDLE ? 0 : (int64_t)t->own[c];
		if (busy <= best)
			continue;
		best = busy;
		for (int c = 0; c < TB_NCAT; c++)
			out[c] = t->own[c];
	}
}

/* A process, or folded ones (pid 0), with its times in the window. */
static void view_proc(struct dg_view *v, const struct session *ses, const struct dg_proc *who,
		      const int64_t own[TB_NCAT], const int64_t main_cp[TB_NCAT],
		      const int64_t main_own[TB_NCAT])
{
	struct dg_proc *p = &v->p[v->n++];

	*p = *who;
	p->rank = who->folded ? -1 : diag_proc_rank(ses, who->pid);
	memcpy(p->own, own, sizeof(p->own));
	memcpy(p->main_cp, main_cp, sizeof(p->main_cp));
	memcpy(p->main_own, main_own, sizeof(p->main_own));
	if (!who->folded)
		io_and_phases(ses, p);
	if (p->role == TB_ROLE_TRAINER) {
		for (int c = 0; c < TB_NCAT; c++) {
			v->hl[c] += main_cp[c];
			v->hl_own[c] += main_own[c];
		}
		v->rbytes += p->rbytes;
		v->wbytes += p->wbytes;
	}
}

/* The selected source's epochs (NULL, 0 when none). */
static const struct ep_stream *stream(const struct epochs *ep)
{
	enum ep_source s = epochs_source(ep);

	return s == EP_NSRC ? NULL : &ep->src[s];
}

/* RSS of each process at the end of each complete epoch. */
static void view_rss(struct dg_view *v, const struct session *ses)
{
	const struct diag *d = &ses->diag;
	const struct ep_stream *st = stream(&ses->ep);

	v->rss = calloc(d->nprocs ? d->nprocs : 1, sizeof(*v->rss));
	if (!v->rss || !st)
		return;
	for (int i = 0; i < d->nprocs; i++) {
		const struct dg_pinfo *pi = &d->procs[i];
		const struct proc_rec *pr = job_proc_const(&ses->job, pi->pid);
		struct dg_rss_at *r = &v->rss[v->nrss];

		r->pid = pi->pid;
		r->role = pr ? pr->role : TB_ROLE_OTHER;
		for (int e = 0, k = 0; e < st->n && r->n < 64; e++) {
			const struct epoch *ep = &st->list[e];

			if (!ep->complete)
				continue;
			/* A boundary is sampled on the refresh that places it. */
			uint64_t until = ep->end + BOUNDARY_LAG_NS;

			while (k + 1 < pi->n && pi->ts[k + 1] <= until)
				k++;
			/* No sample near the end: it was not alive then. */
			if (!pi->n || pi->ts[k] > until || ep->end > pi->ts[k] + 2 * DG_SAMPLE_NS)
				continue;
			r->kb[r->n] = pi->kb[k];
			r->label[r->n++] = ep->label;
		}
		v->nrss += r->n > 0;
	}
}

/*
 * The trainers' main threads by phase: the data phase counts when they
 * named a bracket (a DataLoader fetch, an optimizer call) and waited for
 * input (a fetch, or a queue with no DataLoader), the checkpoint phase
 * whenever torch.save ran.
 */
static void view_phases(struct dg_view *v, const struct session *ses)
{
	const struct phases *ph = ses_phases(ses);
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum sum;
	int64_t data = 0, ckpt = 0;

	if (!phases_known(ses))
		return;
	phases_job(ph, &ses->job, rows, &sum);
	for (int p = 0; p < PH_NSHOWN; p++)
		for (int c = 0; c < TB_NCAT; c++)
			v->ph[p][c] = (int64_t)rows[p][c];
	for (int c = 0; c < TB_NCAT; c++) {
		data += v->ph[PH_DATA][c];
		ckpt += v->ph[PH_CHECKPOINT][c];
	}
	v->data_phase = (ph->named || ph->source == PH_SRC_BRACKETS) && data > 0;
	v->ckpt_phase = ckpt > 0;
	v->data_fetched = sum.step_source != PH_STEPS_BACKWARD;
}

/* The trainers' main threads' storage waits that were writes, by phase. */
static void view_writes(struct dg_view *v, const struct session *ses)
{
	uint64_t w[PH_NSHOWN];

	v->wio_known = !ses->job.wio_unknown;
	phases_job_writes(ses_phases(ses), &ses->job, w);
	for (int p = 0; p < PH_NSHOWN; p++)
		v->wio[p] = (int64_t)w[p];
}

int diag_view_run(struct dg_view *v, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	const struct diag *d = &ses->diag;
	const struct ep_stream *st = stream(&ses->ep);

	if (view_alloc(v, ses, job->nprocs))
		return -1;
	v->start = job->window_start_ns;
	v->end = now;
	v->wall_s = (now - job->window_start_ns) / 1e9;
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *pr = &job->procs[i];
		const struct thread_rec *mt = job_trainer_thread(pr);
		struct dg_proc who = { .pid = pr->pid, .ppid = pr->ppid, .role = pr->role,
				       .folded = pr->folded, .tally = pr->tally };
		uint64_t tot[TB_NCAT];
		int64_t own[TB_NCAT], cp[TB_NCAT], mown[TB_NCAT];

		proc_totals(pr, tot);
		for (int c = 0; c < TB_NCAT; c++) {
			own[c] = tot[c];
			cp[c] = mt ? mt->cp[c] : 0;
			mown[c] = mt ? mt->own[c] : 0;
		}
		view_proc(v, ses, &who, own, cp, mown);
		if (pr->role == TB_ROLE_WORKER && !pr->folded)
			busiest_thread(pr, v->p[v->n - 1].work);
	}
	view_phases(v, ses);
	view_writes(v, ses);
	for (int i = 0; st && i < st->n; i++) {
		v->steps += st->list[i].steps.count;
		v->syncs += st->list[i].steps.syncs;
	}
	v->mem_total_kb = d->mem_total_kb;
	v->mem_min_avail_kb = d->mem_min_avail_kb;
	v->mem_min_at_s = d->mem_min_ts > job->window_start_ns ?
		(d->mem_min_ts - job->window_start_ns) / 1e9 : 0;
	view_rss(v, ses);
	diag_gpu_view_run(v, ses, now);
	return 0;
}

int diag_view_epoch(struct dg_view *v, const struct session *ses, const struct epoch *e)
{
	if (view_alloc(v, ses, e->n))
		return -1;
	v->start = e->start;
	v->end = e->end;
	v->wall_s = (e->end - e->start) / 1e9;
	for (int i = 0; i < e->n; i++) {
		const struct ep_proc *r = &e->d[i];
		struct dg_proc who = { .pid = r->pid, .ppid = r->ppid,
				       .role = ep_row_role(&ses->job, r), .folded = r->folded,
				       .tally = r->tally };

		view_proc(v, ses, &who, r->own, r->main_cp, r->main_own);
		memcpy(v->p[v->n - 1].work, r->main_own, sizeof(r->main_own));
	}
	v->steps = e->steps.count;
	v->syncs = e->steps.syncs;
	diag_gpu_view_epoch(v, ses, e);
	return 0;
}

static void merge_sums(struct dg_view *out, const struct dg_view *v)
{
	for (int c = 0; c < TB_NCAT; c++) {
		out->hl[c] += v->hl[c];
		out->hl_own[c] += v->hl_own[c];
	}
	for (int p = 0; p < PH_NSHOWN; p++) {
		for (int c = 0; c < TB_NCAT; c++)
			out->ph[p][c] += v->ph[p][c];
		out->wio[p] += v->wio[p];
	}
	out->rbytes += v->rbytes;
	out->wbytes += v->wbytes;
	out->steps += v->steps;
	out->syncs += v->syncs;
}

/* The flags: any node's phases say what the job ran; writes known only if everywhere. */
static void merge_flags(struct dg_view *out, const struct dg_view *v, bool first)
{
	out->gpu |= v->gpu;
	out->phases |= v->phases;
	out->data_phase |= v->data_phase;
	out->ckpt_phase |= v->ckpt_phase;
	out->data_fetched = first ? v->data_fetched : out->data_fetched && v->data_fetched;
	out->wio_known = first ? v->wio_known : out->wio_known && v->wio_known;
	if (v->wall_s > out->wall_s)
		out->wall_s = v->wall_s;
	if (v->ncpus > out->ncpus)
		out->ncpus = v->ncpus;
}

/* The node with the least memory available, by its share. */
static void merge_memory(struct dg_view *out, const struct dg_view *v)
{
	double mine = v->mem_total_kb ? (double)v->mem_min_avail_kb / v->mem_total_kb : 2;
	double theirs = out->mem_total_kb ? (double)out->mem_min_avail_kb / out->mem_total_kb : 2;

	if (mine < theirs) {
		out->mem_total_kb = v->mem_total_kb;
		out->mem_min_avail_kb = v->mem_min_avail_kb;
		out->mem_min_at_s = v->mem_min_at_s;
	}
}

int diag_view_merge(struct dg_view *out, const struct dg_view *in, int n,
		    const char *const *where)
{
	int np = 0;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < n; i++)
		np += in[i].n;
	out->p = calloc(np ? np : 1, sizeof(*out->p));
	if (!out->p)
		return -1;
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < in[i].n; k++) {
			out->p[out->n] = in[i].p[k];
			snprintf(out->p[out->n].where, sizeof(out->p[out->n].where), "%s",
				 where[i]);
			out->n++;
		}
		merge_sums(out, &in[i]);
		merge_flags(out, &in[i], i == 0);
		merge_memory(out, &in[i]);
	}
	return 0;
}

void diag_view_free(struct dg_view *v)
{
	free(v->p);
	free(v->rss);
	memset(v, 0, sizeof(*v));
}
