// SPDX-License-Identifier: BSD-3-Clause
/*
 * Two recordings side by side: did a change (a flag, more workers, a new
 * library) move the time where it was meant to? Shares, not seconds: runs
 * of different lengths compare by the part of the time each category took.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "phases.h"
#include "pystacks.h"
#include "report.h"
#include "sections.h"

/* A finding's severity moves "better" or "worse" past this much. */
#define SEVERITY_STEP 0.05

static void shares(const int64_t c[TB_NCAT], double pct[TB_NCAT])
{
	int64_t total = 0;

	for (int i = 0; i < TB_NCAT; i++)
		total += c[i];
	for (int i = 0; i < TB_NCAT; i++)
		pct[i] = total > 0 ? 100.0 * c[i] / total : 0.0;
}

void diff_headline_shares(const struct recording *r, double pct[TB_NCAT])
{
	uint64_t hl[TB_NCAT];
	int64_t s[TB_NCAT];

	job_headline(&r->ses.job, hl);
	for (int i = 0; i < TB_NCAT; i++)
		s[i] = (int64_t)hl[i];
	shares(s, pct);
}

static void headline(FILE *f, const struct recording *a, const struct recording *b)
{
	double pa[TB_NCAT], pb[TB_NCAT];

	diff_headline_shares(a, pa);
	diff_headline_shares(b, pb);
	fprintf(f, "Headline (trainers' critical path, %% of its time)\n");
	fprintf(f, "  %-16s %7s %7s %9s\n", "", "A", "B", "B-A (pt)");
	for (int r = 0; r < TB_NROLLUP; r++) {
		const int *g = tb_rollup_cats[r];
		double sa = 0, sb = 0;

		for (int k = 0; g[k] >= 0; k++) {
			sa += pa[g[k]];
			sb += pb[g[k]];
		}
		fprintf(f, "  %-16s %6.1f%% %6.1f%% %+9.1f\n", tb_rollup_names[r], sa, sb, sb - sa);
		for (int k = 0; g[k] >= 0; k++) {
			int c = g[k];

			fprintf(f, "    %-14s %6.1f%% %6.1f%% %+9.1f\n", tb_cat_names[c], pa[c],
				pb[c], pb[c] - pa[c]);
		}
	}
}

static double run_steps(const struct recording *r)
{
	struct ep_steps s;

	epochs_run_steps(&r->ses.ep, r->start_ns, r->end_ns, &s);
	return ep_steps_per_s(&s);
}

static double rel_pct(double a, double b)
{
	return a > 0 ? 100.0 * (b / a - 1) : 0.0;
}

static void steps_line(FILE *f, const struct recording *a, const struct recording *b)
{
	double sa = run_steps(a), sb = run_steps(b);

	if (!sa && !sb) {
		fprintf(f, "Steps: none seen in either run\n\n");
		return;
	}
	fprintf(f, "Steps/s: A %.2f, B %.2f", sa, sb);
	if (sa && sb)
		fprintf(f, " (%+.1f%%)", rel_pct(sa, sb));
	fprintf(f, "\n\n");
}

bool diff_phase_shares(const struct recording *r, double pct[PH_NSHOWN], double *ms)
{
	const struct phases *ph = ses_phases(&r->ses);
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum s;
	double wall = 0;

	if (!ph || ph->source == PH_SRC_NONE)
		return false;
	phases_job(ph, &r->ses.job, rows, &s);
	for (int p = 0; p < PH_NSHOWN; p++)
		wall += s.wall_ms[p];
	for (int p = 0; p < PH_NSHOWN; p++)
		pct[p] = wall > 0 ? 100.0 * s.wall_ms[p] / wall : 0.0;
	*ms = s.steps.steps ? s.steps.step_ms / s.steps.steps : 0.0;
	return wall > 0;
}

/* Training phases side by side, when either run has them. */
static void phases_table(FILE *f, const struct recording *a, const struct recording *b)
{
	double pa[PH_NSHOWN] = { 0 }, pb[PH_NSHOWN] = { 0 }, ma = 0, mb = 0;
	bool ha = diff_phase_shares(a, pa, &ma), hb = diff_phase_shares(b, pb, &mb);

	if (!ha && !hb)
		return;
	fprintf(f, "Phases (trainer threads, %% of their lives)\n");
	fprintf(f, "  %-16s %7s %7s %9s\n", "", "A", "B", "B-A (pt)");
	for (int k = 0; k < PH_NSHOWN; k++) {
		int p = ph_order[k];

		fprintf(f, "  %-16s %6.1f%% %6.1f%% %+9.1f\n", ph_names[p], pa[p], pb[p], pb[p] - pa[p]);
	}
	fprintf(f, "  %-16s %7.1f %7.1f", "ms/step", ma, mb);
	if (ma > 0 && mb > 0)
		fprintf(f, " %+8.1f%%", rel_pct(ma, mb));
	fprintf(f, "\n%s\n", !ha || !hb ? "  (one run has no phases: no libtorch, or recorded "
		"by an older trainbpf)\n" : "");
}

static int by_move(const void *x, const void *y)
{
	double dx = ((const struct fn_move *)x)->b - ((const struct fn_move *)x)->a;
	double dy = ((const struct fn_move *)y)->b - ((const struct fn_move *)y)->a;

	return fabs(dx) < fabs(dy) ? 1 : fabs(dx) > fabs(dy) ? -1 : 0;
}

static int run_training_steps(const struct recording *r)
{
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum s;

	if (!ses_phases(&r->ses))
		return 0;
	phases_job(ses_phases(&r->ses), &r->ses.job, rows, &s);
	return s.steps.steps;
}

static int by_name(const void *x, const void *y)
{
	const struct fn_move *a = x, *b = y;
	int c = strcmp(a->name, b->name);

	return c ? c : strcmp(a->file, b->file);
}

/* Adjacent rows of one function (sorted by name and file) into one. */
static int merge_same(struct fn_move *m, int n)
{
	int out = 0;

	for (int k = 0; k < n; k++) {
		if (out && !by_name(&m[out - 1], &m[k])) {
			m[out - 1].a += m[k].a;
			m[out - 1].b += m[k].b;
			m[out - 1].everywhere |= m[k].everywhere;
		} else {
			m[out++] = m[k];
		}
	}
	return out;
}

/*
 * A's and B's functions matched by name and file (a line that moved is
 * the same function edited), those on every stack in either run (the loop
 * and its callers: the step's own change) left out, the largest change
 * first; n, or -1. The names point into the recordings' models.
 */
int diff_fn_moves(const struct recording *a, const struct recording *b, struct fn_move **out)
{
	struct fn_loop_total *ta = NULL, *tb = NULL;
	int na = report_fn_loop_totals(&a->ses, &ta), nb = report_fn_loop_totals(&b->ses, &tb);
	int sa = run_training_steps(a), sb = run_training_steps(b), n = 0, kept = 0;
	struct fn_move *m = na >= 0 && nb >= 0 ? calloc(na + nb + 1, sizeof(*m)) : NULL;

	for (int i = 0; m && sa && sb && i < na + nb; i++) {
		const struct fn_loop_total *x = i < na ? &ta[i] : &tb[i - na];

		if (!x->ns)
			continue;
		m[n] = (struct fn_move){ x->name, x->file, x->line, .everywhere = x->everywhere };
		if (i < na)
			m[n++].a = x->ns / 1e6 / sa;
		else
			m[n++].b = x->ns / 1e6 / sb;
	}
	if (m) {
		qsort(m, n, sizeof(*m), by_name);
		n = merge_same(m, n);
	}
	for (int k = 0; k < n; k++)
		if (!m[k].everywhere)
			m[kept++] = m[k];
	if (m)
		qsort(m, kept, sizeof(*m), by_move);
	free(ta);
	free(tb);
	*out = m;
	return m ? kept : -1;
}

static void functions_table(FILE *f, const struct recording *a, const struct recording *b)
{
	bool pa = ses_py(&a->ses), pb = ses_py(&b->ses);
	struct fn_move *m = NULL;
	int n;

	if (!pa && !pb)
		return;
	fprintf(f, "Python functions (the training loops', ms per training step; "
		"the largest changes)\n");
	if (!pa || !pb) {
		fprintf(f, "  (only %s was recorded with --functions)\n\n", pa ? "A" : "B");
		return;
	}
	n = diff_fn_moves(a, b, &m);
	fprintf(f, "  %-52s %8s %8s %8s\n", "function", "A", "B", "B-A");
	for (int i = 0; i < n && i < DIFF_FUNCS; i++) {
		char label[PY_NAME_LEN + PY_FILE_LEN + 16];

		report_fn_label_of(label, sizeof(label), m[i].name, m[i].file, m[i].line);
		fprintf(f, "  %-52.52s %8.2f %8.2f %+8.2f\n", label, m[i].a, m[i].b,
			m[i].b - m[i].a);
	}
	if (n < 0)
		fprintf(f, "  (out of memory)\n");
	else if (!n)
		fprintf(f, "  (none to compare: no training step, or no function off the loop's "
			"own stack, in one run)\n");
	fputc('\n', f);
	free(m);
}

static const struct ep_stream *stream(const struct recording *r)
{
	enum ep_source s = epochs_source(&r->ses.ep);

	return s == EP_NSRC ? NULL : &r->ses.ep.src[s];
}

static const struct epoch *epoch_by_label(const struct ep_stream *st, long label)
{
	for (int i = 0; st && i < st->n; i++)
		if (st->list[i].label == label)
			return &st->list[i];
	return NULL;
}

static void epoch_row(FILE *f, const struct recording *a, const struct epoch *ea,
		      const struct recording *b, const struct epoch *eb)
{
	int64_t ha[TB_NCAT], hb[TB_NCAT];
	double pa[TB_NCAT], pb[TB_NCAT], da = (ea->end - ea->start) / 1e9,
	       db = (eb->end - eb->start) / 1e9;

	epoch_headline(&a->ses.job, ea, ha);
	epoch_headline(&b->ses.job, eb, hb);
	shares(ha, pa);
	shares(hb, pb);
	fprintf(f, "  %5ld %8.2f %8.2f %+7.1f%% %8.2f %8.2f", ea->label, da, db,
		rel_pct(da, db), ep_steps_per_s(&ea->steps), ep_steps_per_s(&eb->steps));
	for (int c = 0; c < TB_NCAT; c++)
		fprintf(f, " %+5.1f", pb[c] - pa[c]);
	fputc('\n', f);
}

static void epochs_table(FILE *f, const struct recording *a, const struct recording *b)
{
	const struct ep_stream *sa = stream(a), *sb = stream(b);
	int matched = 0;

	fprintf(f, "Epochs (matched by label; category columns: B-A in points of the headline)\n");
	fprintf(f, "  %5s %8s %8s %8s %8s %8s", "EPOCH", "A_S", "B_S", "TIME", "A_STEP/S",
		"B_STEP/S");
	for (int c = 0; c < TB_NCAT; c++)
		fprintf(f, " %5s", tb_cat_short[c]);
	fputc('\n', f);
	for (int i = 0; sa && i < sa->n; i++) {
		const struct epoch *eb = epoch_by_label(sb, sa->list[i].label);

		if (!eb) {
			fprintf(f, "  %5ld %8.2f %8s (only in A)\n", sa->list[i].label,
				(sa->list[i].end - sa->list[i].start) / 1e9, "-");
			continue;
		}
		epoch_row(f, a, &sa->list[i], b, eb);
		matched++;
	}
	for (int i = 0; sb && i < sb->n; i++)
		if (!epoch_by_label(sa, sb->list[i].label))
			fprintf(f, "  %5ld %8s %8.2f (only in B)\n", sb->list[i].label, "-",
				(sb->list[i].end - sb->list[i].start) / 1e9);
	if (!matched)
		fprintf(f, "  (no epoch in both runs)\n");
	fputc('\n', f);
}

const struct dg_finding *diff_finding(const struct recording *r, enum dg_id id)
{
	for (int i = 0; i < r->nsaved; i++)
		if (r->saved[i].run && r->saved[i].f.id == id)
			return &r->saved[i].f;
	return NULL;
}

const char *diff_finding_change(const struct dg_finding *fa, const struct dg_finding *fb)
{
	if (!fa)
		return "appeared";
	if (!fb)
		return "gone";
	if (fb->severity < fa->severity - SEVERITY_STEP)
		return "better";
	if (fb->severity > fa->severity + SEVERITY_STEP)
		return "worse";
	return "same";
}

static void diagnosis(FILE *f, const struct recording *a, const struct recording *b)
{
	int shown = 0;

	fprintf(f, "Diagnosis (severity 0-1, A -> B)\n");
	for (int id = 0; id <= DG_NIDS; id++) {
		const struct dg_finding *fa = diff_finding(a, id), *fb = diff_finding(b, id);

		if (!fa && !fb)
			continue;
		fprintf(f, "  %-9s %-18s ", diff_finding_change(fa, fb), diag_id_name(id));
		if (fa)
			fprintf(f, "%.2f", fa->severity);
		else
			fprintf(f, "  - ");
		fprintf(f, " -> ");
		if (fb)
			fprintf(f, "%.2f", fb->severity);
		else
			fprintf(f, "  - ");
		fprintf(f, "  %s\n", (fb ? fb : fa)->summary);
		shown++;
	}
	if (!shown)
		fprintf(f, "  no finding in either run\n");
}

double diff_steps_per_s(const struct recording *r)
{
	return run_steps(r);
}

double diff_slower_pct(const struct recording *a, const struct recording *b)
{
	double sa = run_steps(a), sb = run_steps(b);

	return sa > 0 && sb > 0 ? 100.0 * (1 - sb / sa) : NAN;
}

/* The phase whose share moved most between the runs; -1 if neither has phases. */
static int moved_phase(const struct recording *a, const struct recording *b,
		       double pa[PH_NSHOWN], double pb[PH_NSHOWN])
{
	double ma, mb;
	int best = -1;

	if (!diff_phase_shares(a, pa, &ma) || !diff_phase_shares(b, pb, &mb))
		return -1;
	/* The loop's phases: a setup or teardown that moved is no change to the loop. */
	for (int p = 0; p < PH_NLOOP; p++)
		if (best < 0 || fabs(pb[p] - pa[p]) > fabs(pb[best] - pa[best]))
			best = p;
	return best;
}

/* A share that moved less than this many points is no news in the verdict. */
#define VERDICT_MIN_PT 1.0

/* The roll-up whose share of the headline moved most (no phases in a run); its move. */
static double moved_rollup(const struct recording *a, const struct recording *b,
			   double *from, double *to, int *which)
{
	double pa[TB_NCAT], pb[TB_NCAT];

	diff_headline_shares(a, pa);
	diff_headline_shares(b, pb);
	*which = -1;
	for (int r = 0; r < TB_NROLLUP; r++) {
		double sa = 0, sb = 0;

		for (int k = 0; tb_rollup_cats[r][k] >= 0; k++) {
			sa += pa[tb_rollup_cats[r][k]];
			sb += pb[tb_rollup_cats[r][k]];
		}
		if (*which < 0 || fabs(sb - sa) > fabs(*to - *from))
			*which = r, *from = sa, *to = sb;
	}
	return fabs(*to - *from);
}

/* The share that moved most: a phase where both runs have phases, else a roll-up. */
static void moved_share(FILE *f, const struct recording *a, const struct recording *b)
{
	double pa[PH_NSHOWN], pb[PH_NSHOWN], from, to;
	int p = moved_phase(a, b, pa, pb), r;

	if (p >= 0 && fabs(pb[p] - pa[p]) >= VERDICT_MIN_PT) {
		fprintf(f, "%s phase %.1f%% -> %.1f%%", ph_names[p], pa[p], pb[p]);
		return;
	}
	if (p < 0 && moved_rollup(a, b, &from, &to, &r) >= VERDICT_MIN_PT) {
		fprintf(f, "%s %.1f%% -> %.1f%% of the trainers' time", tb_rollup_labels[r], from,
			to);
		return;
	}
	fprintf(f, "no %s moved by %.0f point or more", p >= 0 ? "phase" : "share",
		VERDICT_MIN_PT);
}

void diff_verdict(FILE *f, const struct recording *a, const struct recording *b)
{
	double sa = run_steps(a), sb = run_steps(b);

	if (sa > 0 && sb > 0)
		fprintf(f, "B %s (%.1f%% %s steps/s); ",
			fabs(sb / sa - 1) < 0.01 ? "as fast as A" : sb > sa ? "faster" : "slower",
			fabs(rel_pct(sa, sb)), sb >= sa ? "more" : "fewer");
	moved_share(f, a, b);
}

/* Processes of a role among a recording's, folded ones counted. */
static int procs_of(const struct recording *r, enum tb_role role)
{
	int n = 0;

	for (int i = 0; i < r->ses.job.nprocs; i++)
		if (r->ses.job.procs[i].role == role)
			n += proc_count(&r->ses.job.procs[i]);
	return n;
}

/* What the runs were: their commands, and the job's shape where it differs. */
static void what_ran(FILE *f, const struct recording *a, const struct recording *b)
{
	char ca[4 * sizeof(a->command)], cb[4 * sizeof(b->command)];
	int ta = procs_of(a, TB_ROLE_TRAINER), tb = procs_of(b, TB_ROLE_TRAINER),
	    wa = procs_of(a, TB_ROLE_WORKER), wb = procs_of(b, TB_ROLE_WORKER);

	fprintf(f, "  A ran: %s\n", a->command[0] ? report_esc(ca, sizeof(ca), a->command) :
		"(not recorded)");
	fprintf(f, "  B ran: %s%s\n", b->command[0] ? report_esc(cb, sizeof(cb), b->command) :
		"(not recorded)", strcmp(a->command, b->command) ? "" : " (the same)");
	if (ta != tb)
		fprintf(f, "  trainers: A %d, B %d\n", ta, tb);
	if (wa != wb)
		fprintf(f, "  worker processes (all the run's, each fork counted): A %d, B %d\n",
			wa, wb);
}

void diff_text(FILE *f, const struct recording *a, const struct recording *b)
{
	char pa[4096], pb[4096];

	fprintf(f, "trainbpf diff\nVerdict: ");
	diff_verdict(f, a, b);
	fputc('\n', f);
	fprintf(f, "  A: %s (%.2f s)\n  B: %s (%.2f s)\n",
		report_esc(pa, sizeof(pa), a->path), (a->end_ns - a->start_ns) / 1e9,
		report_esc(pb, sizeof(pb), b->path), (b->end_ns - b->start_ns) / 1e9);
	what_ran(f, a, b);
	fputc('\n', f);
	headline(f, a, b);
	fputc('\n', f);
	steps_line(f, a, b);
	diff_gpu(f, a, b);
	phases_table(f, a, b);
	functions_table(f, a, b);
	epochs_table(f, a, b);
	diagnosis(f, a, b);
}
