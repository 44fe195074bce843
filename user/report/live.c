// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "diagnosis.h"
#include "gpu.h"
#include "live.h"
#include "sections.h"

void live_init(struct live *lv)
{
	memset(lv, 0, sizeof(*lv));
}

void live_free(struct live *lv)
{
	free(lv->shown);
	memset(lv, 0, sizeof(*lv));
}

/* Room for every process of the job; a new one has shown nothing yet. */
static void grow_shown(struct live *lv, const struct job *job)
{
	uint64_t (*n)[TB_NCAT];

	if (lv->nshown >= job->nprocs)
		return;
	n = realloc(lv->shown, job->nprocs * sizeof(*n));
	if (!n)
		abort();	/* as job.c: out of memory, nothing left to say */
	memset(n + lv->nshown, 0, (job->nprocs - lv->nshown) * sizeof(*n));
	lv->shown = n;
	lv->nshown = job->nprocs;
}

static int live_threads(const struct proc_rec *p)
{
	int n = 0;

	for (int i = 0; i < p->nthreads; i++)
		n += !p->threads[i].end_ns && !p->threads[i].folded && !p->folded;
	return n;
}

void live_on_fold(struct live *lv, const struct job_fold *f)
{
	uint64_t (*n)[TB_NCAT] = calloc(f->nnew ? f->nnew : 1, sizeof(*n));

	if (!n)
		abort();	/* as job.c: out of memory, nothing left to say */
	/* What was shown of the folded is shown of their aggregate now. */
	for (int i = 0; i < lv->nshown && i < f->nold; i++)
		for (int c = 0; c < TB_NCAT; c++)
			n[f->to[i]][c] += lv->shown[i][c];
	free(lv->shown);
	lv->shown = n;
	lv->nshown = f->nnew;
}

static void delta(const uint64_t now[TB_NCAT], uint64_t prev[TB_NCAT],
		  uint64_t out[TB_NCAT])
{
	for (int c = 0; c < TB_NCAT; c++) {
		out[c] = now[c] >= prev[c] ? now[c] - prev[c] : 0;
		prev[c] = now[c];
	}
}

static void rollup_line(FILE *f, const uint64_t cats[TB_NCAT])
{
	double pct[TB_NROLLUP];

	rollup_pct(cats, pct);
	fprintf(f, "computation %.1f%% comm %.1f%% io&data %.1f%% other %.1f%%\n",
		pct[0], pct[1], pct[2], pct[3]);
}

static double per_s(uint64_t n, uint64_t ns)
{
	return ns ? n * 1e9 / ns : 0.0;
}

/* "cuda: 12.0 syncs/s  nccl: ..." since the last table; nothing the first time. */
static void gpu_line(FILE *f, struct live *lv, const struct gpu *g, uint64_t now)
{
	struct tb_api_stat tot[TB_MAX_APIS];
	struct gpu_sums s;
	uint64_t dt;
	char b[32];

	if (!g || !gpu_any_library(g))
		return;
	gpu_totals(g, tot);
	gpu_sum_kinds(tot, &s);
	dt = now - lv->gpu.ns;
	if (lv->gpu.ns) {
		fmt_bytes(b, sizeof(b), (uint64_t)per_s(s.bytes - lv->gpu.bytes, dt));
		fprintf(f, "cuda: %.1f syncs/s  nccl: %.1f ops/s, %s/s",
			per_s(s.syncs - lv->gpu.syncs, dt), per_s(s.ops - lv->gpu.ops, dt), b);
		if (g->launches)
			fprintf(f, "  launches: %.0f/s", per_s(s.launches - lv->gpu.launches, dt));
		fputc('\n', f);
	}
	lv->gpu.ns = now;
	lv->gpu.syncs = s.syncs;
	lv->gpu.ops = s.ops;
	lv->gpu.bytes = s.bytes;
	lv->gpu.launches = s.launches;
}

/* "steps: 8.3/s, 120.1 ms/step (calls)" for the interval since the last one. */
static void steps_line(FILE *f, struct live *lv, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	const struct epochs *ep = &ses->ep;
	struct ep_steps s;
	uint64_t from;
	int starts;

	if (!ep->calls)
		return;
	from = lv->steps_ns ? lv->steps_ns : job->window_start_ns;
	lv->steps_ns = now;
	starts = epochs_step_stats(ep, from, now, false, &s);
	if (!s.count || now <= from)
		return;
	lv->hist[lv->nhist++ % LIVE_HIST] = ep_steps_avg(&s);
	/* The rate counts every step that started; the times, those that ended. */
	fprintf(f, "steps: %.1f/s, ", starts / ((now - from) / 1e9));
	report_text_steps(f, ses, &s);
	fputc('\n', f);
}

/*
 * "phases: data 9% fwd 44% ...; 36 steps, 26.7 ms/step": the trainers'
 * main threads since the last table, the phases they ran in (80 columns);
 * nothing without libtorch or progress.
 */
static void phases_line(FILE *f, struct live *lv, const struct session *ses)
{
	const struct job *job = &ses->job;
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	double d[PH_NSHOWN], wall = 0;
	struct ph_sum s;
	int steps;

	if (!ses_phases(ses) || !gpu_has_torch(&ses->gpu))
		return;
	phases_job(ses_phases(ses), job, rows, &s);
	/* The interval's loop: a setup that became known in it ran before it. */
	for (int p = 0; p < PH_NLOOP; p++) {
		d[p] = s.wall_ms[p] - lv->ph.wall_ms[p];
		wall += d[p] > 0 ? d[p] : 0;
		lv->ph.wall_ms[p] = s.wall_ms[p];
	}
	steps = s.steps.steps - lv->ph.steps;
	if (wall > 0) {
		fprintf(f, "phases:");
		for (int p = 0; p < PH_NLOOP; p++)
			if (d[p] > 0)
				fprintf(f, " %s %.0f%%", ph_short[p], 100.0 * d[p] / wall);
		if (steps > 0)
			fprintf(f, "; %d steps, %.1f ms/step", steps,
				(s.steps.step_ms - lv->ph.step_ms) / steps);
		fputc('\n', f);
	}
	lv->ph.steps = s.steps.steps;
	lv->ph.step_ms = s.steps.step_ms;
}

void live_table(FILE *f, struct live *lv, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	uint64_t tot[TB_NCAT], d[TB_NCAT], hl[TB_NCAT];
	char stamp[16];
	time_t t = time(NULL);
	int ntr;

	grow_shown(lv, job);
	strftime(stamp, sizeof(stamp), "%H:%M:%S", localtime(&t));
	report_stall_text(f, ses);
	fprintf(f, "%s  %.1f s traced\n", stamp, (now - job->window_start_ns) / 1e9);
	fprintf(f, "%7s %-7s %-15s %4s", "PID", "ROLE", "COMM", "THR");
	report_cat_head(f);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		proc_totals(p, tot);
		delta(tot, lv->shown[i], d);
		if (!sum_cats(d))
			continue;	/* exited before this interval */
		report_proc_head(f, p, live_threads(p));
		report_pct_cells(f, d);
	}
	ntr = job_headline(job, hl);
	delta(hl, lv->headline, d);
	fprintf(f, "headline, %d trainer%s: ", ntr, ntr == 1 ? "" : "s");
	rollup_line(f, d);
	phases_line(f, lv, ses);
	gpu_line(f, lv, &ses->gpu, now);
	report_gpu_util_live(f, &lv->gu, ses, now);
	steps_line(f, lv, ses, now);
	fputc('\n', f);
	fflush(f);
}

void live_epochs(FILE *f, struct live *lv, const struct session *ses)
{
	const struct epochs *ep = &ses->ep;
	enum ep_source s = epochs_source(ep);
	const struct ep_stream *st;

	if (s == EP_NSRC)
		return;
	st = &ep->src[s];
	for (; lv->epochs[s] < st->closed; lv->epochs[s]++) {
		const struct epoch *e = ep_stream_closed(st, lv->epochs[s]);

		if (e)	/* merged away meanwhile: never, a tick or two is all it waits */
			report_epoch_block(f, ses, e, epochs_source_name(s));
	}
	fflush(f);
}

static void block_start(struct live *lv, const struct session *ses, uint64_t from, uint64_t ts)
{
	const struct job *job = &ses->job;
	uint64_t hl[TB_NCAT];

	job_headline(job, hl);
	lv->block.from = from;
	lv->block.ts = ts;
	report_gpu_util_block_start(&lv->block_gu, ses, ts);
	for (int c = 0; c < TB_NCAT; c++)
		lv->block.hl[c] = hl[c];
}

/* The block's headline shares since it began; the category with the most. */
static int block_shares(const struct live *lv, const struct job *job, double pct[TB_NCAT])
{
	uint64_t hl[TB_NCAT];
	int64_t d[TB_NCAT], total = 0;
	int best = TB_CPU;

	job_headline(job, hl);
	for (int c = 0; c < TB_NCAT; c++) {
		d[c] = (int64_t)hl[c] - lv->block.hl[c];
		total += d[c];
	}
	for (int c = 0; c < TB_NCAT; c++) {
		pct[c] = total > 0 ? 100.0 * d[c] / total : 0.0;
		if (d[c] > d[best])
			best = c;
	}
	return best;
}

/*
 * Every n completed steps, a block: their times, and the headline's shares
 * since the previous block. Steps are counted as they complete (the next
 * one has started); the shares run from tick to tick, so they cover the
 * block's steps give or take a tick and the step in progress.
 */
void live_step_blocks(FILE *f, struct live *lv, const struct session *ses, int n, uint64_t now)
{
	const struct job *job = &ses->job;
	const struct epochs *ep = &ses->ep;
	struct ep_steps s;
	double pct[TB_NCAT];
	int best;

	if (!lv->block.ts)
		block_start(lv, ses, job->window_start_ns, job->window_start_ns);
	epochs_step_stats(ep, lv->block.from, now, false, &s);
	if (s.count < n)
		return;
	best = block_shares(lv, job, pct);
	fprintf(f, "=== Steps %ld-%ld (%s) %.1f s, %.1f ms/step (min %.1f, max %.1f, std %.1f)",
		lv->block.done + 1, lv->block.done + s.count,
		epochs_step_source_name(s.source), (now - lv->block.ts) / 1e9,
		ep_steps_avg(&s), s.min_ms, s.max_ms, ep_steps_std(&s));
	if (gpu_any_library(&ses->gpu))
		fprintf(f, ", %.1f syncs/step", (double)s.syncs / s.count);
	fprintf(f, " ===\n");
	report_rollup_rows(f, pct, false);
	report_gpu_util_block_line(f, &lv->block_gu, ses, now, s.count);
	fprintf(f, "  slowest: %s\n", tb_cat_names[best]);
	fflush(f);
	lv->block.done += s.count;
	/* The next block starts with the step in progress, or after the last. */
	block_start(lv, ses, epochs_step_start(ep, lv->block.from, now, s.count), now);
	if (!lv->block.from)
		lv->block.from = now;
}

/* The step times of the last tables, oldest first, as a bar each (UTF-8). */
static void history(FILE *f, const struct live *lv)
{
	static const char *const bars[] = { "\u2581", "\u2582", "\u2583", "\u2584",
					    "\u2585", "\u2586", "\u2587", "\u2588" };
	int n = lv->nhist < LIVE_HIST ? lv->nhist : LIVE_HIST;
	double hi = 0;

	if (n < 2)
		return;
	for (int i = 0; i < n; i++)
		hi = lv->hist[i] > hi ? lv->hist[i] : hi;
	fprintf(f, "ms/step, last %d:  ", n);
	for (int i = lv->nhist - n; i < lv->nhist; i++) {
		double v = lv->hist[i % LIVE_HIST];

		fputs(bars[hi > 0 ? (int)(7.999 * v / hi) : 0], f);
	}
	fprintf(f, "  (max %.1f)\n", hi);
}

/* Each trainer's phases since its start, when there are several (ranks side by side). */
static void rank_rows(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	int ntr = 0;

	if (!ses_phases(ses))
		return;
	for (int i = 0; i < job->nprocs; i++)
		ntr += job->procs[i].role == TB_ROLE_TRAINER && job_proc_alive(&job->procs[i]);
	for (int i = 0; ntr > 1 && i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];
		const struct thread_rec *t = job_trainer_thread(p);
		const struct ph_thread *pt = t ? ses_phase_thread(ses, t->tid) : NULL;
		double wall = 0;

		if (p->role != TB_ROLE_TRAINER || !job_proc_alive(p) || !pt)
			continue;
		for (int ph = 0; ph < PH_NSHOWN; ph++)
			wall += pt->tot[ph];
		if (wall <= 0)
			continue;
		fprintf(f, "  rank %-3d pid %-7d", p->labels.rank, p->pid);
		for (int ph = 0; ph < PH_NSHOWN; ph++)
			fprintf(f, " %s %2.0f%%", ph_short[ph], 100.0 * pt->tot[ph] / wall);
		fputc('\n', f);
	}
}

/* The first ranked finding of the run so far (the costliest), one line. */
static void top_finding(FILE *f, const struct session *ses, uint64_t now)
{
	struct dg_finding fs[DG_MAX_FINDINGS];
	int n = report_run_findings(ses, now, fs);

	if (n > 0)
		fprintf(f, "top finding: [%.2f] %s\n", fs[0].severity, fs[0].summary);
	else if (!n)
		fprintf(f, "top finding: none so far\n");
}

void live_panel(FILE *f, struct live *lv, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	uint64_t hl[TB_NCAT], d[TB_NCAT];
	char stamp[16];
	time_t t = time(NULL);
	int ntr = job_headline(job, hl);

	strftime(stamp, sizeof(stamp), "%H:%M:%S", localtime(&t));
	report_stall_text(f, ses);
	fprintf(f, "trainbpf %s  %s  %.1f s traced, %d trainer%s, %d processes alive\n",
		TB_VERSION, stamp, (now - job->window_start_ns) / 1e9, ntr, ntr == 1 ? "" : "s",
		job_live_procs(job));
	delta(hl, lv->headline, d);
	fprintf(f, "headline: ");
	rollup_line(f, d);
	phases_line(f, lv, ses);
	rank_rows(f, ses);
	steps_line(f, lv, ses, now);
	history(f, lv);
	gpu_line(f, lv, &ses->gpu, now);
	report_gpu_util_live(f, &lv->gu, ses, now);
	top_finding(f, ses, now);
}
