// SPDX-License-Identifier: BSD-3-Clause
/*
 * The verdict every report opens with: where the time goes (the largest
 * training phase and what it was made of, else the headline's largest
 * category) and what to change (the top finding and its advice's first
 * sentence). Computed once here; the text and the HTML page each only
 * print it.
 */
#include <string.h>
#include "phases.h"
#include "pysections.h"
#include "report.h"
#include "sections.h"

#define VERDICT_SECTIONS 2	/* the largest phase's named sections the verdict names */

struct of_which {
	struct report_verdict *v;
	double table_ms;
	int n;
};

static void of_which_row(void *arg, const char *label, double ms, const uint64_t cat[TB_NCAT],
			 int rest)
{
	struct of_which *o = arg;
	size_t len = strlen(o->v->of_which);

	if (rest || o->n >= VERDICT_SECTIONS)
		return;
	snprintf(o->v->of_which + len, sizeof(o->v->of_which) - len, "%s%s %.1f%%",
		 o->n++ ? ", " : "", label, 100.0 * ms / o->table_ms);
}

/*
 * The largest phase's own calls, as the phase table names them under it
 * (report_sections.c; none where the table names none): "other 38%"
 * comes with the EMA and the sampling it was, a forward without a
 * DataLoader with the batch made on the training thread.
 */
static void verdict_sections(const struct session *ses, struct report_verdict *v,
			     double phase_ms, double table_ms)
{
	struct py_sections secs[PH_NSHOWN];
	struct of_which o = { v, table_ms, 0 };

	if (!ses_py(ses) || pysections_make(ses_py(ses), secs))
		return;
	report_sections_each(ses_py(ses), &secs[v->phase], v->phase, phase_ms, table_ms,
			     of_which_row, &o);
	pysections_free(secs);
}

/* The largest phase of the trainers' main threads; false without phases or steps. */
static bool largest_phase(const struct session *ses, struct report_verdict *v)
{
	const struct job *job = &ses->job;
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum sum;
	double wall = 0;
	int best = 0;

	if (!ses_phases(ses) || ses_phases(ses)->source == PH_SRC_NONE)
		return false;
	phases_job(ses_phases(ses), job, rows, &sum);
	if (!sum.steps.steps)
		return false;
	/* Of the trainers' lives, as the table's shares; the loop's phases only. */
	for (int p = 0; p < PH_NSHOWN; p++) {
		wall += sum.wall_ms[p];
		if (p < PH_NLOOP && sum.wall_ms[p] > sum.wall_ms[best])
			best = p;
	}
	if (wall <= 0)
		return false;
	v->phase = best;
	v->share = 100.0 * sum.wall_ms[best] / wall;
	v->ms_per_step = sum.wall_ms[best] / sum.steps.steps;
	report_made_of(v->made_of, sizeof(v->made_of), rows[best], 3);
	verdict_sections(ses, v, sum.wall_ms[best], wall);
	return true;
}

/* Without phases: the headline's largest category. */
static void largest_category(const struct job *job, struct report_verdict *v)
{
	uint64_t hl[TB_NCAT], total;
	int best = 0;

	v->trainers = job_headline(job, hl);
	total = sum_cats(hl);
	for (int c = 1; c < TB_NCAT; c++)
		if (hl[c] > hl[best])
			best = c;
	v->cat = total ? best : -1;
	v->share = total ? 100.0 * hl[best] / total : 0;
	v->total_s = total / 1e9;
}

void report_verdict(const struct session *ses, const struct dg_finding *fs, int n,
		    struct report_verdict *v)
{
	const struct job *job = &ses->job;
	const char *end, *semi;

	memset(v, 0, sizeof(*v));
	v->phase = -1;
	v->cat = -1;
	if (!largest_phase(ses, v))
		largest_category(job, v);
	v->findings = n;
	if (n <= 0)
		return;
	v->top = &fs[0];
	/* The advice's first clause: what a verdict line has room for. */
	end = strstr(fs[0].advice, ". ");
	semi = strstr(fs[0].advice, "; ");
	if (semi && (!end || semi < end))
		end = semi - 1;	/* the clause, without its semicolon */
	snprintf(v->advice, sizeof(v->advice), "%.*s",
		 (int)(end ? (size_t)(end - fs[0].advice) + 1 : strlen(fs[0].advice)),
		 fs[0].advice);
}

void report_verdict_text(FILE *f, const struct report_verdict *v)
{
	if (v->phase >= 0) {
		fprintf(f, "Verdict: %s is %.1f%% of the trainers' time (%.1f ms a step)%s%s\n",
			ph_names[v->phase], v->share, v->ms_per_step, *v->made_of ? ", made of " :
			"", v->made_of);
		if (*v->of_which)
			fprintf(f, "  of which in %s\n", v->of_which);
	} else if (v->cat >= 0)
		fprintf(f, "Verdict: %s is %.1f%% of the trainers' time (no training phases "
			"seen)\n", tb_cat_names[v->cat], v->share);
	else
		fprintf(f, "Verdict: no trainer time was traced\n");
	if (v->top)
		fprintf(f, "  top finding: %s; try: %s\n", v->top->summary, v->advice);
	else if (!v->findings)
		fprintf(f, "  no bottleneck found\n");
}
