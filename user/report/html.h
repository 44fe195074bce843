/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pieces the HTML page (report_html.c) is drawn with: escaping, the
 * colours, and inline SVG (html_svg.c). No script: a part's hover text is
 * its SVG <title>, which every browser shows as a tooltip.
 */
#ifndef TB_HTML_H
#define TB_HTML_H

#include <stdint.h>
#include <stdio.h>
#include "categories.h"
#include "job.h"
#include "session.h"
#include "phase_spans.h"

/*
 * s as HTML text or attribute value: & < > " ' as entities, bytes that
 * start no valid UTF-8 sequence and control characters as U+FFFD. The job
 * names its processes and paths: the page must stay valid UTF-8, and a
 * name must never become markup.
 */
void html_esc(FILE *f, const char *s);

/* A page's head (its style: system fonts, nothing fetched) and its end; title is no markup. */
void html_page_open(FILE *f, const char *title);
void html_page_close(FILE *f);

/* One colour per category and per phase, the same in every chart. */
extern const char *const html_cat_color[TB_NCAT];
extern const char *const html_ph_color[PH_NSHOWN];

/*
 * A part of a stacked bar: px its size (not drawn unless > 0), key its
 * data-key (what the part stands for: a category or phase name), its
 * colour, and its hover text.
 */
struct svg_part {
	double px;
	const char *key;
	const char *color;
	char title[256];
};

/* <svg> of w x h px, aria-label label; attrs: more attributes, or "". */
void svg_open(FILE *f, const char *cls, double w, double h, const char *label,
	      const char *attrs);
void svg_close(FILE *f);
/* Parts left to right from x on a row at y, h tall; returns where they end. */
double svg_hstack(FILE *f, double x, double y, double h, const struct svg_part *p, int n);
/* Parts bottom to top from base at x, w wide; returns the top. */
double svg_vstack(FILE *f, double x, double base, double w, const struct svg_part *p, int n);
void svg_text(FILE *f, double x, double y, const char *anchor, const char *text);
void svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *cls);
/* A legend: a swatch and a name each, as HTML. */
void html_legend(FILE *f, const char *const *names, const char *const *colors, int n);

/* The categories' names as a legend takes them. */
extern const char *const html_cat_names[TB_NCAT];
/*
 * The parts of a bar px long, split by category: each its share of total
 * (below 0: not drawn; an epoch's category can be, docs/json.md); hover
 * text "LEADcpu: 30.2% (1.20 s)".
 */
void html_cat_parts(struct svg_part *p, const double v[TB_NCAT], double total, double px,
		    const char *lead);
void html_cat_legend(FILE *f);
/* The epochs the reports use (epochs_source); NULL if none. An epoch's label ("3", "5-8"). */
struct ep_stream;
struct epoch;
const struct ep_stream *html_stream(const struct session *ses);
void html_epoch_label(char *buf, size_t len, const struct epoch *e);

/*
 * The page's charts (html_charts.c), each a <section> or nothing when the
 * model has none of it: the headline's categories, the phases, epochs
 * (split by phase, by category without phases), step time over time,
 * ranks by epoch, the GPUs' readings per epoch, worker generations.
 */
void html_chart_headline(FILE *f, const struct session *ses);
void html_chart_phases(FILE *f, const struct session *ses);
void html_chart_epochs(FILE *f, const struct session *ses);
void html_chart_steps(FILE *f, const struct session *ses);
void html_chart_ranks(FILE *f, const struct session *ses, uint64_t now);
void html_chart_gpu(FILE *f, const struct session *ses, uint64_t now);
void html_worker_gens(FILE *f, const struct session *ses);

#endif
