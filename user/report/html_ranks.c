// SPDX-License-Identifier: BSD-3-Clause
/*
 * The HTML page's per-rank and per-GPU views: ranks side by side in each
 * epoch (a straggler waits less than the others: its bar has less comm),
 * the GPUs' own readings per epoch (NVML), DataLoader worker generations.
 */
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu_util.h"
#include "html.h"
#include "sections.h"

#define MAX_RANKS 64
#define LABEL_W 150.0
#define ROW_H 22.0

struct rank_row {
	const struct proc_rec *p;
	int rank;		/* RANK, or NCCL's; -1 */
};

static int by_rank(const void *x, const void *y)
{
	const struct rank_row *a = x, *b = y;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return a->p->pid < b->p->pid ? -1 : a->p->pid > b->p->pid;
}

/* The trainers listed one by one (not folded), by rank, at most max. */
static int trainers(const struct session *ses, struct rank_row *out, int max)
{
	const struct job *job = &ses->job;
	int n = 0;

	for (int i = 0; i < job->nprocs && n < max; i++) {
		const struct proc_rec *p = &job->procs[i];

		if (p->role != TB_ROLE_TRAINER || p->folded || !job_trainer_thread(p))
			continue;
		out[n].p = p;
		out[n].rank = diag_proc_rank(ses, p->pid);
		n++;
	}
	qsort(out, n, sizeof(*out), by_rank);
	return n;
}

static const struct ep_proc *epoch_row(const struct epoch *e, pid_t pid)
{
	for (int i = 0; i < e->n; i++)
		if (!e->d[i].folded && e->d[i].pid == pid)
			return &e->d[i];
	return NULL;
}

/* One cell: the rank's main thread's critical path in a span, by category. */
static void cell(FILE *f, const int64_t cp[TB_NCAT], double x, double y, double w,
		 const char *lead, const char *col)
{
	struct svg_part parts[TB_NCAT];
	double v[TB_NCAT], total = 0;

	for (int c = 0; c < TB_NCAT; c++) {
		v[c] = (double)cp[c];
		total += v[c];
	}
	html_cat_parts(parts, v, total, w, lead);
	fprintf(f, "<g data-col=\"%s\">\n", col);
	svg_hstack(f, x, y, ROW_H - 6, parts, TB_NCAT);
	fputs("</g>\n", f);
}

static void rank_label(char *buf, size_t len, const struct rank_row *r)
{
	if (r->rank >= 0)
		snprintf(buf, len, "rank %d (pid %d)", r->rank, r->p->pid);
	else
		snprintf(buf, len, "pid %d", r->p->pid);
}

static void rank_cells(FILE *f, const struct ep_stream *st, const struct rank_row *r,
		       double y, double cw)
{
	const struct thread_rec *t = job_trainer_thread(r->p);
	char who[64], lead[128], col[48];
	int64_t run[TB_NCAT];
	int k = 0;

	rank_label(who, sizeof(who), r);
	for (int i = 0; st && i < st->n; i++, k++) {
		const struct ep_proc *d = epoch_row(&st->list[i], r->p->pid);

		html_epoch_label(col, sizeof(col), &st->list[i]);
		snprintf(lead, sizeof(lead), "%s, epoch %s, ", who, col);
		if (d)
			cell(f, d->main_cp, LABEL_W + k * cw, y, cw - 6, lead, col);
	}
	for (int c = 0; c < TB_NCAT; c++)
		run[c] = (int64_t)t->cp[c];
	snprintf(lead, sizeof(lead), "%s, whole run, ", who);
	cell(f, run, LABEL_W + k * cw, y, cw - 6, lead, "run");
}

static void rank_heads(FILE *f, const struct ep_stream *st, double cw)
{
	char col[48], t[64];
	int k = 0;

	for (int i = 0; st && i < st->n; i++, k++) {
		html_epoch_label(col, sizeof(col), &st->list[i]);
		snprintf(t, sizeof(t), "epoch %s", col);
		svg_text(f, LABEL_W + k * cw + (cw - 6) / 2, 12, "middle", t);
	}
	svg_text(f, LABEL_W + k * cw + (cw - 6) / 2, 12, "middle", "run");
}

void html_chart_ranks(FILE *f, const struct session *ses, uint64_t now)
{
	const struct ep_stream *st = html_stream(ses);
	struct rank_row rows[MAX_RANKS];
	int n = trainers(ses, rows, MAX_RANKS), cols = (st ? st->n : 0) + 1;
	double cw = cols > 8 ? 640.0 / cols : 80, w = LABEL_W + cols * cw;
	char who[64];

	if (!n)
		return;
	fprintf(f, "<section id=\"ranks\"><h2>Ranks by epoch</h2>\n<p class=\"note\">Each "
		"trainer thread, its critical path by category in each epoch: a rank "
		"the others wait for (a straggler) shows less comm and gpu_wait than they do."
		"%s</p>\n", n == MAX_RANKS ? " The first 64 trainers." : "");
	svg_open(f, "chart", w, 20 + n * ROW_H, "ranks side by side in each epoch",
		 "data-chart=\"ranks\"");
	rank_heads(f, st, cw);
	for (int i = 0; i < n; i++) {
		rank_label(who, sizeof(who), &rows[i]);
		svg_text(f, LABEL_W - 8, 20 + i * ROW_H + 13, "end", who);
		fprintf(f, "<g data-pid=\"%d\">\n", rows[i].p->pid);
		rank_cells(f, st, &rows[i], 20 + i * ROW_H + 2, cw);
		fputs("</g>\n", f);
	}
	svg_close(f);
	html_cat_legend(f);
	fputs("</section>\n", f);
}

/* A table row of a GPU window's summary: utilization, energy, power. */
static void gpu_row(FILE *f, const char *what, const struct gu_summary *s, double jps)
{
	fprintf(f, "<tr><td class=\"l\">%s</td><td>%d</td>", what, s->ndev);
	if (s->util_devs)
		fprintf(f, "<td>%.1f</td><td>%.1f</td>", s->util_avg, s->util_min);
	else
		fputs("<td>-</td><td>-</td>", f);
	if (s->energy_ok)
		fprintf(f, "<td>%.1f</td>", s->energy_j);
	else
		fputs("<td>-</td>", f);
	if (jps >= 0)
		fprintf(f, "<td>%.2f</td>", jps);
	else
		fputs("<td>-</td>", f);
	fprintf(f, "<td>%.1f</td><td>%.1f</td></tr>\n", s->power_w, 100 * s->mem_frac);
}

/* Utilization per epoch as bars: 100% is 120 px (the JSON's utilization_avg_pct). */
static void gpu_bars(FILE *f, const struct session *ses, const struct ep_stream *st)
{
	double step = st->n > 24 ? 900.0 / st->n : 40, bw = step * 0.7;
	struct gu_summary s;
	double jps;
	char label[48];

	svg_open(f, "chart", 56 + st->n * step + 10, 150, "GPU utilization per epoch",
		 "data-chart=\"gpu\" data-px-per-pct=\"1.2\"");
	svg_line(f, 52, 130, 56 + st->n * step, 130, "axis");
	svg_text(f, 48, 14, "end", "100%");
	svg_text(f, 48, 130, "end", "0");
	for (int i = 0; i < st->n; i++) {
		struct svg_part p = { .key = "utilization", .color = "#76b7b2" };

		html_epoch_label(label, sizeof(label), &st->list[i]);
		svg_text(f, 56 + i * step + bw / 2, 144, "middle", label);
		if (!report_gpu_util_epoch(ses, &st->list[i], &s, &jps) || !s.util_devs)
			continue;
		p.px = 1.2 * s.util_avg;
		snprintf(p.title, sizeof(p.title), "epoch %s: utilization %.1f%% (min %.1f%%)",
			 label, s.util_avg, s.util_min);
		fprintf(f, "<g data-epoch=\"%s\">\n", label);
		svg_vstack(f, 56 + i * step, 130, bw, &p, 1);
		fputs("</g>\n", f);
	}
	svg_close(f);
}

void html_chart_gpu(FILE *f, const struct session *ses, uint64_t now)
{
	const struct ep_stream *st = html_stream(ses);
	const struct gpu_util *g = &ses->gu;
	struct gu_summary s;
	double jps;
	char label[48];

	if (g->state == GU_NOT_TRIED)
		return;
	fputs("<section id=\"gpu\"><h2>GPUs (NVML)</h2>\n", f);
	if (g->state != GU_ACTIVE || !report_gpu_util_run(ses, now, &s, &jps)) {
		fputs("<p class=\"note\">No GPU readings: ", f);
		html_esc(f, g->state == GU_UNAVAILABLE ? g->why : "no GPU ran the job");
		fputs("</p></section>\n", f);
		return;
	}
	if (st)
		gpu_bars(f, ses, st);
	fputs("<table><tr><th class=\"l\">span</th><th>GPUs</th><th>util avg %</th>"
	      "<th>util min %</th><th>energy J</th><th>J/step</th><th>power W</th>"
	      "<th>memory peak %</th></tr>\n", f);
	gpu_row(f, "whole run", &s, jps);
	for (int i = 0; st && i < st->n; i++) {
		char what[64];

		if (!report_gpu_util_epoch(ses, &st->list[i], &s, &jps))
			continue;
		html_epoch_label(label, sizeof(label), &st->list[i]);
		snprintf(what, sizeof(what), "epoch %s", label);
		gpu_row(f, what, &s, jps);
	}
	fputs("</table></section>\n", f);
}

void html_worker_gens(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	const struct epochs *ep = &ses->ep;

	if (!ep->ngens)
		return;
	fputs("<section id=\"workers\"><h2>DataLoader worker generations</h2>\n<p class=\"note\">"
	      "Workers forked afresh (no persistent_workers); stall: the parent's wait for data "
	      "in the first 2 s.</p>\n<table><tr><th>parent</th><th>fork s</th><th>workers</th>"
	      "<th>epoch</th><th>stall s</th></tr>\n", f);
	for (int i = 0; i < ep->ngens; i++) {
		const struct ep_worker_gen *g = &ep->gens[i];

		fprintf(f, "<tr><td>%d</td><td>%.3f</td><td>%d</td><td>%ld</td>", g->parent,
			((double)g->fork_ts - job->window_start_ns) / 1e9, g->nworkers, g->epoch);
		if (g->stall_s >= 0)
			fprintf(f, "<td>%.3f</td></tr>\n", g->stall_s);
		else
			fputs("<td>-</td></tr>\n", f);
	}
	fputs("</table></section>\n", f);
}
