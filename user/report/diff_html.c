// SPDX-License-Identifier: BSD-3-Clause
/*
 * `trainbpf diff A.db B.db -o diff.html`: the diff as one page, nothing
 * fetched and no script. The verdict and what each run ran on top, then A
 * and B as bars side by side (the trainers' time by category, the phases),
 * then the tables the text diff has. The same pieces as the text (diff.c):
 * diff_verdict, diff_headline_shares, diff_phase_shares, the findings.
 */
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "html.h"
#include "pystacks.h"
#include "report.h"
#include "sections.h"

#define BAR_W 800.0	/* px of a run's bar: 100% */
#define LEAD 30.0	/* px before it: "A", "B" */

/* The verdict sentence, escaped: written to memory first, as the text has it. */
static void verdict(FILE *f, const struct recording *a, const struct recording *b)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	fputs("<section id=\"verdict\"><h2>Verdict</h2><p class=\"verdict\">", f);
	if (m) {
		diff_verdict(m, a, b);
		if (!fclose(m))
			html_esc(f, buf);
		free(buf);
	}
	fputs("</p></section>\n", f);
}

static void run_row(FILE *f, const char *which, const struct recording *r)
{
	fprintf(f, "<tr><td class=\"l\">%s</td><td class=\"l\">", which);
	html_esc(f, r->path);
	fprintf(f, "</td><td>%.2f</td><td>%.2f</td><td class=\"l\">", (r->end_ns - r->start_ns) / 1e9,
		diff_steps_per_s(r));
	html_esc(f, r->command[0] ? r->command : "(not recorded)");
	fputs("</td></tr>\n", f);
}

static void runs(FILE *f, const struct recording *a, const struct recording *b)
{
	fputs("<section id=\"runs\"><h2>The runs</h2><table><tr><th class=\"l\">run</th>"
	      "<th class=\"l\">recording</th><th>traced s</th><th>steps/s</th>"
	      "<th class=\"l\">command</th></tr>\n", f);
	run_row(f, "A", a);
	run_row(f, "B", b);
	fprintf(f, "</table>%s</section>\n", strcmp(a->command, b->command) ? "" :
		"<p class=\"note\">The same command.</p>");
}

/* Run i's bar (A above, B below): its letter, then its parts from LEAD, in a group data-run. */
static void run_bar(FILE *f, int i, const struct svg_part *p, int n)
{
	svg_text(f, LEAD - 8, i * 26 + 17, "end", i ? "B" : "A");
	fprintf(f, "<g data-run=\"%s\">\n", i ? "B" : "A");
	svg_hstack(f, LEAD, i * 26 + 2, 22, p, n);
	fputs("</g>\n", f);
}

/* A table of n shares (%) side by side: A, B and B-A a row; the caller ends it. */
static void ab_rows(FILE *f, const char *what, const char *const *names, const double *a,
		    const double *b, int n)
{
	fprintf(f, "<table><tr><th class=\"l\">%s</th><th>A %%</th><th>B %%</th>"
		"<th>B-A (pt)</th></tr>\n", what);
	for (int k = 0; k < n; k++)
		fprintf(f, "<tr><td class=\"l\">%s</td><td>%.1f</td><td>%.1f</td><td>%+.1f</td>"
			"</tr>\n", names[k], a[k], b[k], b[k] - a[k]);
}

/* A and B as two bars of BAR_W px split by category (% of each run's critical path). */
static void headline(FILE *f, const struct recording *a, const struct recording *b)
{
	const struct recording *run[2] = { a, b };
	double pct[2][TB_NCAT];
	struct svg_part p[TB_NCAT];

	fputs("<section id=\"headline\"><h2>The trainers' time by category</h2>\n", f);
	html_cat_legend(f);
	svg_open(f, "diff", LEAD + BAR_W, 2 * 26 + 4, "A and B by category",
		 "data-chart=\"diff-headline\" data-px=\"800\"");
	for (int i = 0; i < 2; i++) {
		diff_headline_shares(run[i], pct[i]);
		html_cat_parts(p, pct[i], 100.0, BAR_W, i ? "B, " : "A, ");
		run_bar(f, i, p, TB_NCAT);
	}
	svg_close(f);
	ab_rows(f, "category", tb_cat_names, pct[0], pct[1], TB_NCAT);
	fputs("</table></section>\n", f);
}

static void phase_bar(FILE *f, int i, const double pct[PH_NSHOWN])
{
	struct svg_part p[PH_NSHOWN];

	for (int k = 0; k < PH_NSHOWN; k++) {
		int ph = ph_order[k];

		p[k].px = BAR_W * pct[ph] / 100;
		p[k].key = ph_names[ph];
		p[k].color = html_ph_color[ph];
		snprintf(p[k].title, sizeof(p[k].title), "%s, %s: %.1f%%", i ? "B" : "A",
			 ph_names[ph], pct[ph]);
	}
	run_bar(f, i, p, PH_NSHOWN);
}

/* The phases of A and B, when both have them; a table when either has. */
static void phases(FILE *f, const struct recording *a, const struct recording *b)
{
	double pct[2][PH_NSHOWN] = { { 0 } }, ms[2] = { 0 };
	bool has[2] = { diff_phase_shares(a, pct[0], &ms[0]), diff_phase_shares(b, pct[1], &ms[1]) };

	if (!has[0] && !has[1])
		return;
	fputs("<section id=\"phases\"><h2>Training phases (% of the trainer threads' lives)</h2>\n", f);
	html_legend(f, ph_names, html_ph_color, PH_NSHOWN);
	svg_open(f, "diff", LEAD + BAR_W, 2 * 26 + 4, "A and B by phase",
		 "data-chart=\"diff-phases\" data-px=\"800\"");
	for (int i = 0; i < 2; i++)
		if (has[i])
			phase_bar(f, i, pct[i]);
	svg_close(f);
	ab_rows(f, "phase", ph_names, pct[0], pct[1], PH_NSHOWN);
	fprintf(f, "<tr><td class=\"l\">ms/step</td><td>%.1f</td><td>%.1f</td><td></td></tr>"
		"</table>%s</section>\n", ms[0], ms[1], has[0] && has[1] ? "" :
		"<p class=\"note\">One run has no phases: no libtorch, or recorded by an older "
		"trainbpf.</p>");
}

/* The loop's functions whose ms per step moved most, when both runs have stacks. */
static void functions(FILE *f, const struct recording *a, const struct recording *b)
{
	struct fn_move *m = NULL;
	int n;

	if (!ses_py(&a->ses) || !ses_py(&b->ses))
		return;
	n = diff_fn_moves(a, b, &m);
	fputs("<section id=\"functions\"><h2>Python functions (the training loops', ms per "
	      "training step)</h2><table><tr><th class=\"l\">function</th><th>A</th><th>B</th>"
	      "<th>B-A</th></tr>\n", f);
	for (int i = 0; i < n && i < DIFF_FUNCS; i++) {
		char label[PY_NAME_LEN + PY_FILE_LEN + 16];

		report_fn_label_of(label, sizeof(label), m[i].name, m[i].file, m[i].line);
		fputs("<tr><td class=\"l\">", f);
		html_esc(f, label);
		fprintf(f, "</td><td>%.2f</td><td>%.2f</td><td>%+.2f</td></tr>\n", m[i].a, m[i].b,
			m[i].b - m[i].a);
	}
	fputs("</table><p class=\"note\">The largest changes first, matched by name and file; "
	      "the loop and its callers left out.</p></section>\n", f);
	free(m);
}

static void finding_row(FILE *f, enum dg_id id, const struct dg_finding *fa,
			const struct dg_finding *fb)
{
	fprintf(f, "<tr><td class=\"l\">%s</td><td class=\"l\">%s</td>",
		diff_finding_change(fa, fb), diag_id_name(id));
	fprintf(f, fa ? "<td>%.2f</td>" : "<td>-</td>", fa ? fa->severity : 0);
	fprintf(f, fb ? "<td>%.2f</td>" : "<td>-</td>", fb ? fb->severity : 0);
	fputs("<td class=\"l\">", f);
	html_esc(f, (fb ? fb : fa)->summary);
	fputs("</td></tr>\n", f);
}

static void findings(FILE *f, const struct recording *a, const struct recording *b)
{
	int shown = 0;

	fputs("<section id=\"findings\"><h2>Findings, A to B</h2><table><tr>"
	      "<th class=\"l\">change</th><th class=\"l\">finding</th><th>A</th><th>B</th>"
	      "<th class=\"l\">summary (B's, else A's)</th></tr>\n", f);
	for (int id = 0; id < DG_NIDS; id++) {
		const struct dg_finding *fa = diff_finding(a, id), *fb = diff_finding(b, id);

		if (fa || fb) {
			finding_row(f, id, fa, fb);
			shown++;
		}
	}
	fprintf(f, "</table><p class=\"note\">%s</p></section>\n", shown ?
		"Severity 0 at the rule's threshold, 1 when severe." :
		"No finding in either run.");
}

void diff_html(FILE *f, const struct recording *a, const struct recording *b)
{
	html_page_open(f, "trainbpf diff");
	fputs("<h1>trainbpf diff: A to B</h1>\n", f);
	verdict(f, a, b);
	runs(f, a, b);
	headline(f, a, b);
	phases(f, a, b);
	functions(f, a, b);
	findings(f, a, b);
	html_page_close(f);
}
