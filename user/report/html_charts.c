// SPDX-License-Identifier: BSD-3-Clause
/*
 * The HTML page's charts, inline SVG drawn from the model: each part's
 * size is its share of the same numbers the JSON report prints (the suite
 * reads the sizes back from the browser's DOM and compares,
 * tests/integration/test_html.py), its hover text the figures.
 */
#include <string.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu_util.h"
#include "html.h"
#include "phases.h"
#include "pysections.h"
#include "sections.h"

#define BAR_W 800.0		/* a whole-run bar */
#define EP_H 200.0		/* the longest epoch's bar */
#define LEFT 56.0		/* room for an axis's labels */
#define MAX_POINTS 1000		/* steps drawn: more are averaged in buckets */
#define MAX_RANKS 64

const char *const html_cat_names[TB_NCAT] = {
	"cpu", "gpu_wait", "comm", "data_wait", "io", "runqueue", "lock", "idle",
};

void html_cat_parts(struct svg_part *p, const double v[TB_NCAT], double total, double px,
		      const char *lead)
{
	for (int c = 0; c < TB_NCAT; c++) {
		double share = total > 0 ? v[c] / total : 0.0;

		p[c].px = share > 0 ? px * share : 0;
		p[c].key = tb_cat_names[c];
		p[c].color = html_cat_color[c];
		snprintf(p[c].title, sizeof(p[c].title), "%s%s: %.1f%% (%.2f s)", lead,
			 tb_cat_names[c], 100 * share, v[c] / 1e9);
	}
}

void html_cat_legend(FILE *f)
{
	html_legend(f, html_cat_names, html_cat_color, TB_NCAT);
}

static void ph_legend(FILE *f)
{
	html_legend(f, ph_names, html_ph_color, PH_NSHOWN);
}

void html_chart_headline(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	uint64_t hl[TB_NCAT];
	int ntr = job_headline(job, hl);
	double v[TB_NCAT], total = (double)sum_cats(hl);
	struct svg_part p[TB_NCAT];

	for (int c = 0; c < TB_NCAT; c++)
		v[c] = (double)hl[c];
	fprintf(f, "<section id=\"headline\"><h2>Where the trainers' time went</h2>\n"
		"<p class=\"note\">Critical path of %d trainer thread%s (%.2f s); a host "
		"view: gpu_wait is the host blocked on the GPU.</p>\n", ntr, ntr == 1 ? "" : "s",
		total / 1e9);
	if (total > 0) {
		html_cat_parts(p, v, total, BAR_W, "");
		svg_open(f, "bar", BAR_W, 28, "the trainers' critical path by category",
			 "data-chart=\"headline\" data-px=\"800\"");
		svg_hstack(f, 0, 0, 28, p, TB_NCAT);
		svg_close(f);
		html_cat_legend(f);
	}
	fputs("</section>\n", f);
}

/* A phase's row of the table: share, ms per step, min, max, std, made of. */
static void phase_row(FILE *f, int p, const uint64_t row[TB_NCAT], const struct ph_sum *s,
		      double wall)
{
	const struct ph_stat *st = &s->steps;
	char made[128];

	report_made_of(made, sizeof(made), row, 3);
	fprintf(f, "<tr><td class=\"l\">%s</td><td>%.1f</td>", ph_names[p],
		wall > 0 ? 100.0 * s->wall_ms[p] / wall : 0.0);
	if (p < PH_NLOOP)
		fprintf(f, "<td>%.1f</td>", s->wall_ms[p] / st->steps);
	else
		fputs("<td>-</td>", f);	/* before the first step, after the last */
	if (ph_stat_defined(st, p))
		fprintf(f, "<td>%.1f</td><td>%.1f</td><td>%.1f</td>", st->min_ms[p],
			st->max_ms[p], ph_stat_std(st, p));
	else
		fputs("<td>-</td><td>-</td><td>-</td>", f);
	fprintf(f, "<td class=\"l\">%s</td></tr>\n", made);
}

/* The table, with each phase's named sections under it where the stacks were read. */
static void phase_table(FILE *f, const struct session *ses, uint64_t rows[PH_NSHOWN][TB_NCAT],
			const struct ph_sum *s, double wall)
{
	struct py_sections secs[PH_NSHOWN];
	bool secs_ok = ses_py(ses) && !pysections_make(ses_py(ses), secs);
	int named = 0;

	fputs("<table><tr><th class=\"l\">phase</th><th>share %</th><th>ms/step</th>"
	      "<th>min</th><th>max</th><th>std</th><th class=\"l\">made of (critical path)</th>"
	      "</tr>\n", f);
	for (int k = 0; k < PH_NSHOWN; k++) {
		int p = ph_order[k];

		phase_row(f, p, rows[p], s, wall);
		if (secs_ok)
			named += report_sections_html(f, ses_py(ses), &secs[p], p, s->wall_ms[p],
						      wall, s->steps.steps);
	}
	fputs("</table>\n", f);
	if (named)
		fputs("<p class=\"note\">Under a phase, in NAME: the loop's own call its time was "
		      "in, from the Python stacks read (--functions).</p>\n", f);
	if (secs_ok)
		pysections_free(secs);
}

/* Each phase a row as long as its share, split by what it was made of. */
static void phase_rows_svg(FILE *f, uint64_t rows[PH_NSHOWN][TB_NCAT], const struct ph_sum *s,
			   double wall)
{
	struct svg_part p[TB_NCAT];
	double v[TB_NCAT], lead = 90, w = BAR_W - lead;
	char who[32];

	svg_open(f, "rows", BAR_W, PH_NSHOWN * 20 + 4, "each phase by what it was made of",
		 "data-chart=\"phase-rows\"");
	for (int k = 0; k < PH_NSHOWN; k++) {
		int ph = ph_order[k];
		double len = wall > 0 ? w * s->wall_ms[ph] / wall : 0;

		for (int c = 0; c < TB_NCAT; c++)
			v[c] = (double)rows[ph][c];
		snprintf(who, sizeof(who), "%s, ", ph_names[ph]);
		html_cat_parts(p, v, (double)sum_cats(rows[ph]), len, who);
		svg_text(f, lead - 6, k * 20 + 14, "end", ph_names[ph]);
		fprintf(f, "<g data-phase=\"%s\">\n", ph_names[ph]);
		svg_hstack(f, lead, k * 20 + 2, 16, p, TB_NCAT);
		fputs("</g>\n", f);
	}
	svg_close(f);
}

void html_chart_phases(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct svg_part p[PH_NSHOWN];
	struct ph_sum s;
	double wall = 0;
	int n;

	if (!ses_phases(ses) || ses_phases(ses)->source == PH_SRC_NONE)
		return;
	n = phases_job(ses_phases(ses), job, rows, &s);
	if (!s.steps.steps)
		return;
	for (int ph = 0; ph < PH_NSHOWN; ph++)
		wall += s.wall_ms[ph];
	for (int k = 0; k < PH_NSHOWN; k++) {
		int ph = ph_order[k];
		char made[128];

		report_made_of(made, sizeof(made), rows[ph], 3);
		p[k].px = wall > 0 ? BAR_W * s.wall_ms[ph] / wall : 0;
		p[k].key = ph_names[ph];
		p[k].color = html_ph_color[ph];
		if (ph < PH_NLOOP)
			snprintf(p[k].title, sizeof(p[k].title), "%s: %.1f%% (%.1f ms/step); made of %s",
				 ph_names[ph], wall > 0 ? 100 * s.wall_ms[ph] / wall : 0.0,
				 s.wall_ms[ph] / s.steps.steps, *made ? made : "-");
		else
			snprintf(p[k].title, sizeof(p[k].title), "%s: %.1f%% (%.2f s); made of %s",
				 ph_names[ph], wall > 0 ? 100 * s.wall_ms[ph] / wall : 0.0,
				 s.wall_ms[ph] / 1e3, *made ? made : "-");
	}
	fprintf(f, "<section id=\"phases\"><h2>Training phases</h2>\n<p class=\"note\">%d "
		"trainer thread%s, %d training steps, %.1f ms/step; share of the trainer "
		"threads' lives, setup and teardown included.</p>\n", n, n == 1 ? "" : "s", s.steps.steps,
		s.steps.step_ms / s.steps.steps);
	svg_open(f, "bar", BAR_W, 28, "the phases' shares of wall time",
		 "data-chart=\"phases\" data-px=\"800\"");
	svg_hstack(f, 0, 0, 28, p, PH_NSHOWN);
	svg_close(f);
	ph_legend(f);
	phase_rows_svg(f, rows, &s, wall);
	html_cat_legend(f);
	phase_table(f, ses, rows, &s, wall);
	fputs("</section>\n", f);
}

const struct ep_stream *html_stream(const struct session *ses)
{
	enum ep_source s = epochs_source(&ses->ep);

	return s == EP_NSRC || !ses->ep.src[s].n ? NULL : &ses->ep.src[s];
}

void html_epoch_label(char *buf, size_t len, const struct epoch *e)
{
	if (e->last != e->label)
		snprintf(buf, len, "%ld-%ld", e->label, e->last);
	else
		snprintf(buf, len, "%ld", e->label);
}

/* An epoch's bar split by phase: each its share of the ranks' phase time. */
static void epoch_phase_parts(struct svg_part *p, const struct epoch *e, double px,
			      const char *label)
{
	uint64_t t = epoch_phase_ns(e);

	for (int ph = 0; ph < PH_NSHOWN; ph++) {
		char made[128];

		report_made_of(made, sizeof(made), e->ph_cp[ph], 3);
		p[ph].px = px * e->ph[ph] / t;
		p[ph].key = ph_names[ph];
		p[ph].color = html_ph_color[ph];
		snprintf(p[ph].title, sizeof(p[ph].title), "epoch %s, %s: %.1f%% (%.2f s); made "
			 "of %s", label, ph_names[ph], 100.0 * e->ph[ph] / t, e->ph[ph] / 1e9,
			 *made ? made : "-");
	}
}

/* Split by category without phases: the epoch's headline, as its JSON "percent". */
static void epoch_cat_parts(struct svg_part *p, const struct job *job, const struct epoch *e,
			    double px, const char *label)
{
	int64_t hl[TB_NCAT], total = epoch_headline(job, e, hl);
	double v[TB_NCAT];
	char lead[64];

	for (int c = 0; c < TB_NCAT; c++)
		v[c] = (double)hl[c];
	snprintf(lead, sizeof(lead), "epoch %s, ", label);
	html_cat_parts(p, v, (double)total, px, lead);
}

static void epoch_bar(FILE *f, const struct job *job, const struct epoch *e, double x,
		      double bw, double px_per_s)
{
	struct svg_part p[TB_NCAT + PH_NSHOWN];	/* either */
	double dur = (e->end - e->start) / 1e9, base = 10 + EP_H;
	bool by_phase = epoch_phase_ns(e) > 0;
	char label[48];

	html_epoch_label(label, sizeof(label), e);
	if (by_phase)
		epoch_phase_parts(p, e, dur * px_per_s, label);
	else
		epoch_cat_parts(p, job, e, dur * px_per_s, label);
	fprintf(f, "<g class=\"epoch\" data-epoch=\"%s\" data-by=\"%s\" data-duration-s=\"%.6f\">"
		"\n", label, by_phase ? "phase" : "category", dur);
	svg_vstack(f, x, base, bw, p, by_phase ? PH_NSHOWN : TB_NCAT);
	fputs("</g>\n", f);
	svg_text(f, x + bw / 2, base + 14, "middle", label);
}

/* The y axis of the epochs chart: 0 and the longest epoch's seconds. */
static void epoch_axis(FILE *f, double max_s, double width)
{
	char t[32];

	svg_line(f, LEFT - 4, 10 + EP_H, width, 10 + EP_H, "axis");
	svg_line(f, LEFT - 4, 10, LEFT - 4, 10 + EP_H, "axis");
	snprintf(t, sizeof(t), "%.1f s", max_s);
	svg_text(f, LEFT - 8, 14, "end", t);
	svg_text(f, LEFT - 8, 10 + EP_H, "end", "0");
}

void html_chart_epochs(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	const struct ep_stream *st = html_stream(ses);
	double max_s = 0, bw, step, width;
	bool phases = false;
	char attrs[96];

	if (!st)
		return;
	for (int i = 0; i < st->n; i++) {
		const struct epoch *e = &st->list[i];

		if ((e->end - e->start) / 1e9 > max_s)
			max_s = (e->end - e->start) / 1e9;
		phases |= epoch_phase_ns(e) > 0;
	}
	if (max_s <= 0)
		return;
	step = st->n > 24 ? 900.0 / st->n : 40;	/* many epochs: narrower bars */
	bw = step * 0.7;
	width = LEFT + st->n * step + 10;
	fprintf(f, "<section id=\"epochs\"><h2>Epochs</h2>\n<p class=\"note\">%d epochs (%s); a "
		"bar's height is the epoch's duration, split %s. Hover a part for its figures."
		"</p>\n", st->n, epochs_source_name(epochs_source(&ses->ep)),
		phases ? "by training phase (the ranks' trainer threads)" :
		"by category (the trainers' critical path)");
	snprintf(attrs, sizeof(attrs), "data-chart=\"epochs\" data-px-per-s=\"%.6f\"",
		 EP_H / max_s);
	svg_open(f, "chart", width, EP_H + 30, "epochs split by phase or category", attrs);
	epoch_axis(f, max_s, width);
	for (int i = 0; i < st->n; i++)
		epoch_bar(f, job, &st->list[i], LEFT + i * step, bw, EP_H / max_s);
	svg_close(f);
	if (phases)
		ph_legend(f);
	html_cat_legend(f);
	fputs("</section>\n", f);
}

/* Step i's duration in ms: to the next step's start. */
static double step_ms(const struct epochs *ep, uint64_t a, uint64_t b, int i)
{
	return (epochs_step_end(ep, a, b, i) - epochs_step_start(ep, a, b, i)) / 1e6;
}

/*
 * Steps as a line, a point per step (per bucket of steps past MAX_POINTS,
 * their mean), at each step's start; epochs marked by dashed lines.
 */
static void steps_line(FILE *f, const struct session *ses, uint64_t a, uint64_t b, int n,
		       double ymax, double w, double h)
{
	const struct epochs *ep = &ses->ep;
	int per = (n + MAX_POINTS - 1) / MAX_POINTS;

	fputs("<polyline class=\"steps\" points=\"", f);
	for (int i = 0; i < n; i += per) {
		double sum = 0;
		int k = 0;

		for (; k < per && i + k < n; k++)
			sum += step_ms(ep, a, b, i + k);
		fprintf(f, "%.2f,%.2f ", LEFT + w * (epochs_step_start(ep, a, b, i) - a) / (b - a),
			10 + h * (1 - sum / k / ymax));
	}
	fputs("\"/>\n", f);
}

static void steps_marks(FILE *f, const struct session *ses, uint64_t a, uint64_t b, double w,
			double h)
{
	const struct ep_stream *st = html_stream(ses);
	char label[48];

	for (int i = 0; st && i < st->n; i++) {
		const struct epoch *e = &st->list[i];
		double x = LEFT + w * ((double)e->start - a) / (b - a);

		if (e->start < a || e->start > b)
			continue;
		svg_line(f, x, 10, x, 10 + h, "mark");
		html_epoch_label(label, sizeof(label), e);
		svg_text(f, x + 3, 20, "start", label);
	}
}

void html_chart_steps(FILE *f, const struct session *ses)
{
	const struct job *job = &ses->job;
	const struct epochs *ep = &ses->ep;
	uint64_t a = job->window_start_ns, b = ep->prev.ts;
	double w = BAR_W - LEFT, h = 160, ymax = 0;
	struct ep_steps s;
	char attrs[160], t[32];
	int n;

	if (b <= a || !epochs_run_steps(ep, a, b, &s))
		return;
	/*
	 * The starts kept (older ones may be folded into sums), the last one
	 * left out where its end is unknown (pending), as the Steps line does.
	 */
	for (n = 0; epochs_step_start(ep, a, b, n); n++)
		;
	if (n && !epochs_step_end(ep, a, b, n - 1))
		n--;
	if (n < 1)
		return;
	for (int i = 0; i < n; i++)
		if (step_ms(ep, a, b, i) > ymax)
			ymax = step_ms(ep, a, b, i);
	if (ymax <= 0)
		return;
	ymax *= 1.15;	/* headroom: the slowest step below the top, not on it */
	fprintf(f, "<section id=\"steps\"><h2>Step time</h2>\n<p class=\"note\">%d steps (%s), "
		"%.1f ms on average; each at its start, epochs dashed.</p>\n", n,
		epochs_step_source_name(s.source), ep_steps_avg(&s));
	snprintf(attrs, sizeof(attrs), "data-chart=\"steps\" data-steps=\"%d\" data-ymax-ms=\"%.4f\""
		 " data-per-point=\"%d\"", n, ymax, (n + MAX_POINTS - 1) / MAX_POINTS);
	svg_open(f, "chart", BAR_W, h + 34, "step time over time", attrs);
	svg_line(f, LEFT, 10 + h, BAR_W, 10 + h, "axis");
	svg_line(f, LEFT, 10, LEFT, 10 + h, "axis");
	snprintf(t, sizeof(t), "%.1f ms", ymax);
	svg_text(f, LEFT - 4, 16, "end", t);
	svg_text(f, LEFT - 4, 10 + h, "end", "0");
	snprintf(t, sizeof(t), "%.1f s", (b - a) / 1e9);
	svg_text(f, BAR_W, h + 26, "end", t);
	steps_marks(f, ses, a, b, w, h);
	steps_line(f, ses, a, b, n, ymax, w, h);
	svg_close(f);
	fputs("</section>\n", f);
}
