// SPDX-License-Identifier: BSD-3-Clause
/* `trainbpf top`'s table (top_view.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "categories.h"
#include "diagnosis.h"
#include "phase_spans.h"
#include "sections.h"
#include "top_view.h"

#define TOP_LINE 512

static bool row_is(const struct top_row *r, const struct mx_series *s, int i)
{
	return r->series == i && r->rank == s->rank && r->role == s->role &&
	       !strcmp(r->job, s->job);
}

/* The row a series had at the last table; NULL if it had none. */
static const struct top_row *was_row(const struct top_view *tv, const struct mx_series *s, int i)
{
	for (int k = 0; k < tv->nrows; k++)
		if (row_is(&tv->rows[k], s, i))
			return &tv->rows[k];
	return NULL;
}

static int by_job_rank(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;
	int c = strcmp(x->job, y->job);

	if (c)
		return c;
	return x->rank != y->rank ? (x->rank < y->rank ? -1 : 1) : x->series - y->series;
}

/* This table's rows: the live trainer series, by job and rank; their last values kept. */
static void take_rows(struct top_view *tv, const struct metrics *m)
{
	static struct top_row next[TOP_MAX_ROWS];
	int n = 0;

	tv->more = 0;
	for (int i = 0; i < m->nseries; i++) {
		const struct mx_series *s = &m->series[i];
		const struct top_row *old;

		if (!s->alive_ns || !s->live || s->role != TB_ROLE_TRAINER)
			continue;
		if (n == TOP_MAX_ROWS) {
			tv->more++;
			continue;
		}
		old = was_row(tv, s, i);
		if (old) {
			next[n] = *old;
		} else {
			memset(&next[n], 0, sizeof(next[n]));
			next[n].series = i;
			snprintf(next[n].job, sizeof(next[n].job), "%s", s->job);
			next[n].rank = s->rank;
			next[n].role = s->role;
		}
		n++;
	}
	qsort(next, n, sizeof(*next), by_job_rank);
	memcpy(tv->rows, next, n * sizeof(*next));
	tv->nrows = n;
}

/* The job's finding of most severity (metrics_judge's, over the job's time here). */
static const char *top_finding(const struct metrics *m, const char *job, double *sev)
{
	int best = -1;

	for (int i = 0; i < m->njobs; i++) {
		if (strcmp(m->jobs[i].job, job))
			continue;
		for (int k = 0; k < DG_NIDS; k++)
			if (m->jobs[i].severity[k] > 0 &&
			    (best < 0 || m->jobs[i].severity[k] > m->jobs[i].severity[best]))
				best = k;
		if (best >= 0) {
			*sev = m->jobs[i].severity[best];
			return diag_id_name(best);
		}
	}
	return NULL;
}

/* The shares of what grew of n parts since was, in percent; the total grown. */
static uint64_t shares(const uint64_t *now, const uint64_t *was, int n, double *pct)
{
	uint64_t tot = 0;

	for (int i = 0; i < n; i++)
		tot += now[i] > was[i] ? now[i] - was[i] : 0;
	for (int i = 0; i < n; i++)
		pct[i] = tot && now[i] > was[i] ? 100.0 * (now[i] - was[i]) / tot : 0;
	return tot;
}

/* The largest of n shares: "comm 51%". */
static void mostly(char *out, size_t len, const double *pct, const char *const *names, int n)
{
	int best = 0;

	for (int i = 1; i < n; i++)
		if (pct[i] > pct[best])
			best = i;
	snprintf(out, len, "%s %.0f%%", names[best], pct[best]);
}

/* The phase columns (the loop's phases) of one row, and what it mostly was. */
static void phase_cells(char *line, size_t len, const struct mx_series *s,
			const struct top_row *r, char *most, size_t mlen)
{
	double ph[PH_NSHOWN], cat[TB_NCAT];
	size_t at = strlen(line);

	if (!r->was_ns) {
		for (int p = 0; p < PH_NLOOP; p++, at = strlen(line))
			snprintf(line + at, len - at, " %5s", "-");
		snprintf(most, mlen, "(first look)");
		return;
	}
	shares(s->v.cat_ns, r->was.cat_ns, TB_NCAT, cat);
	if (!s->phases || !shares(s->v.phase_ns, r->was.phase_ns, PH_NSHOWN, ph)) {
		for (int p = 0; p < PH_NLOOP; p++, at = strlen(line))
			snprintf(line + at, len - at, " %5s", "-");
		mostly(most, mlen, cat, tb_cat_names, TB_NCAT);
		return;
	}
	for (int p = 0; p < PH_NLOOP; p++, at = strlen(line))
		snprintf(line + at, len - at, " %5.1f", ph[p]);
	mostly(most, mlen, cat, tb_cat_names, TB_NCAT);
}

/* s cut to at most n bytes, not inside a UTF-8 character. */
static void cut_column(char *s, size_t n)
{
	if (strlen(s) <= n)
		return;
	while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	s[n] = '\0';
}

/* One row's line (without its finding). */
static void row_line(char *line, size_t len, const struct metrics *m, const struct top_row *r,
		     double dt_s)
{
	const struct mx_series *s = &m->series[r->series];
	char job[ESC_LEN(24)], rank[16], most[32], steps[16];
	uint64_t dsteps = s->v.steps > r->was.steps ? s->v.steps - r->was.steps : 0;

	report_esc(job, sizeof(job), s->job);
	cut_column(job, 20);
	if (s->rank >= 0)
		snprintf(rank, sizeof(rank), "%d", s->rank);
	else
		snprintf(rank, sizeof(rank), "?");
	if (r->was_ns && dt_s > 0 && s->phases)
		snprintf(steps, sizeof(steps), "%.1f", dsteps / dt_s);
	else
		snprintf(steps, sizeof(steps), "-");
	if (s->phases && s->v.steps)
		snprintf(line, len, "%-20s %4s %8.1f %7s", job, rank, s->step_now_ms, steps);
	else	/* steps are counted from the phases only */
		snprintf(line, len, "%-20s %4s %8s %7s", job, rank, "-", steps);
	phase_cells(line, len, s, r, most, sizeof(most));
	snprintf(line + strlen(line), len - strlen(line), "  %-13s", most);
}

/* A line, its trailing blanks left out; on a terminal, cut to cols and cleared to its end. */
static void put_line(FILE *f, const char *line, int cols, bool tty, bool selected)
{
	int n = strlen(line);

	while (n && line[n - 1] == ' ')
		n--;
	if (!tty) {
		fprintf(f, "%.*s\n", n, line);
		return;
	}
	if (cols > 0 && n > cols)
		n = cols;	/* the view's own text: ASCII but for the job's name */
	fprintf(f, "%s%.*s\033[K%s\r\n", selected ? "\033[7m" : "", n, line,
		selected ? "\033[0m" : "");
}

static void header(FILE *f, const struct top_view *tv, int cols, bool tty)
{
	char line[TOP_LINE];
	int jobs = 0;

	for (int i = 0; i < tv->nrows; i++)
		jobs += !i || strcmp(tv->rows[i].job, tv->rows[i - 1].job);
	snprintf(line, sizeof(line), "trainbpf top: %d training job%s, %d rank%s%s", jobs,
		 jobs == 1 ? "" : "s", tv->nrows, tv->nrows == 1 ? "" : "s",
		 tty ? "   (up/down: choose, enter: its live view, q: quit)" : "");
	put_line(f, line, cols, tty, false);
	snprintf(line, sizeof(line), "%-20s %4s %8s %7s", "JOB", "RANK", "STEP_MS", "STEPS/S");
	for (int p = 0; p < PH_NLOOP; p++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), " %5s", ph_short[p]);
	snprintf(line + strlen(line), sizeof(line) - strlen(line), "  %-13s  %s", "MOSTLY",
		 "TOP FINDING (severity)");
	put_line(f, line, cols, tty, false);
}

int top_view_draw(FILE *f, struct top_view *tv, const struct metrics *m, uint64_t now,
		  int sel, int cols, bool tty)
{
	double dt_s = tv->at_ns && now > tv->at_ns ? (now - tv->at_ns) / 1e9 : 0;
	char line[TOP_LINE];

	take_rows(tv, m);
	header(f, tv, cols, tty);
	for (int i = 0; i < tv->nrows; i++) {
		struct top_row *r = &tv->rows[i];
		const struct mx_series *s = &m->series[r->series];
		const char *fd;
		double sev = 0;

		row_line(line, sizeof(line), m, r, dt_s);
		if (s->stalled)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "  STALLED%s",
				 s->culprit_phase >= 0 ? " (the culprit)" : "");
		else if ((fd = top_finding(m, s->job, &sev)))
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "  %s (%.2f)",
				 fd, sev);
		put_line(f, line, cols, tty, tty && i == sel);
		r->was = s->v;
		r->was_ns = now;
	}
	if (tv->more) {
		snprintf(line, sizeof(line), "(%d more ranks not shown)", tv->more);
		put_line(f, line, cols, tty, false);
	}
	if (!tv->nrows)
		put_line(f, "(no training process found yet: looking every 2 s)", cols, tty, false);
	tv->at_ns = now;
	return tv->nrows;
}

int top_view_pids(const struct top_view *tv, const struct metrics *m, int row, pid_t *pids,
		  int max)
{
	const char *job;
	int n = 0;

	if (row < 0 || row >= tv->nrows)
		return 0;
	job = tv->rows[row].job;
	for (int i = 0; i < m->nprocs && n < max; i++) {
		int si = m->procs[i].series;

		if (si >= 0 && si < m->nseries && m->series[si].role == TB_ROLE_TRAINER &&
		    !strcmp(m->series[si].job, job))
			pids[n++] = m->procs[i].pid;
	}
	return n;
}
