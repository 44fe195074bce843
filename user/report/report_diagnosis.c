// SPDX-License-Identifier: BSD-3-Clause
/* The diagnosis in the reports: a section, a line per epoch, JSON. */
#include <string.h>
#include "diagnosis.h"
#include "epochs.h"
#include "sections.h"

static const char *const checked =
	"data loading, host-bound GPU, syncs per step, worker restarts, CPU and lock "
	"contention, I/O-bound workers, communication, slow rank, memory";

/* A recording's findings of the run (run) or of epoch label, in its order. */
static int saved_findings(const struct diag *d, bool run, long label,
			  struct dg_finding *out)
{
	int n = 0;

	for (int i = 0; i < d->nsaved && n < DG_MAX_FINDINGS; i++)
		if (d->saved[i].run == run && (run || d->saved[i].epoch == label))
			out[n++] = d->saved[i].f;
	return n;
}

int report_run_findings(const struct session *ses, uint64_t now, struct dg_finding *out)
{
	struct dg_view v;
	int n;

	if (ses->diag.saved)
		return saved_findings(&ses->diag, true, 0, out);
	if (diag_view_run(&v, ses, now))
		return -1;
	n = diag_run(&v, out, DG_MAX_FINDINGS);
	diag_view_free(&v);
	return n;
}

static int epoch_findings(const struct session *ses, const struct epoch *e,
			  struct dg_finding *out)
{
	struct dg_view v;
	int n;

	if (ses->diag.saved)
		return saved_findings(&ses->diag, false, e->label, out);
	if (diag_view_epoch(&v, ses, e))
		return -1;
	n = diag_run(&v, out, DG_MAX_FINDINGS);
	diag_view_free(&v);
	return n;
}

/* Wraps text at 78 columns under an indent. */
static void wrapped(FILE *f, const char *label, const char *text)
{
	const int width = 78, indent = 9;
	int col = fprintf(f, "%*s%s", indent, "", label);
	const char *p = text;

	while (*p) {
		const char *sp = strchr(p, ' ');
		int len = sp ? (int)(sp - p) : (int)strlen(p);

		if (col + 1 + len > width && col > indent + (int)strlen(label)) {
			fprintf(f, "\n%*s", indent + 2, "");
			col = indent + 2;
		} else if (p != text) {
			fputc(' ', f);
			col++;
		}
		col += fprintf(f, "%.*s", len, p);
		p += len;
		while (*p == ' ')
			p++;
	}
	fputc('\n', f);
}

void report_diagnosis_text(FILE *f, const struct session *ses, uint64_t now)
{
	struct dg_finding fs[DG_MAX_FINDINGS];
	int n = report_run_findings(ses, now, fs);

	if (n >= 0)
		report_findings_text(f, "Diagnosis", ses->gu.state == GU_ACTIVE ?
				     "; GPU utilization, memory and throttling" : "", fs, n);
}

void report_findings_text(FILE *f, const char *title, const char *more,
			  const struct dg_finding *fs, int n)
{
	if (!n) {
		fprintf(f, "%s: no bottleneck found (checked: %s%s)\n\n", title, checked, more);
		return;
	}
	fprintf(f, "%s (by the share of time they cost, largest first; severity 0-1)\n", title);
	for (int i = 0; i < n; i++) {
		fprintf(f, "  [%.2f] %s\n", fs[i].severity, fs[i].summary);
		wrapped(f, "why: ", fs[i].evidence);
		wrapped(f, "fix: ", fs[i].advice);
	}
	fputc('\n', f);
}

void report_diagnosis_epoch_line(FILE *f, const struct session *ses, const struct epoch *e)
{
	const struct job *job = &ses->job;
	struct dg_finding fs[DG_MAX_FINDINGS];
	int n = epoch_findings(ses, e, fs);

	if (n < 0)
		return;
	fprintf(f, "  slowest: %s", tb_cat_names[epoch_slowest(job, e)]);
	for (int i = 0; i < n; i++)
		fprintf(f, "; %s", fs[i].summary);
	fputc('\n', f);
}

static void json_finding(struct jw *w, const struct dg_finding *d)
{
	jw_object(w);
	jw_string_field(w, "id", diag_id_name(d->id));
	jw_float_field(w, "severity", d->severity, 3);
	jw_float_field(w, "cost", d->cost, 4);
	jw_name(w, "value");
	jw_sig(w, d->value, 6);
	jw_name(w, "threshold");
	jw_sig(w, d->threshold, 6);
	if (d->pid)
		jw_int_field(w, "pid", d->pid);
	else
		jw_null_field(w, "pid");
	jw_string_field(w, "summary", d->summary);
	jw_string_field(w, "evidence", d->evidence);
	jw_string_field(w, "advice", d->advice);
	jw_end_object(w);
}

void report_findings_json(struct jw *w, const struct dg_finding *fs, int n)
{
	jw_name(w, "diagnosis");
	jw_array(w);
	for (int i = 0; i < n; i++)
		json_finding(w, &fs[i]);
	jw_end_array(w);
}

void report_diagnosis_json(struct jw *w, const struct session *ses, uint64_t now)
{
	struct dg_finding fs[DG_MAX_FINDINGS];
	int n = report_run_findings(ses, now, fs);

	report_findings_json(w, fs, n > 0 ? n : 0);
}

void report_diagnosis_epoch_json(struct jw *w, const struct session *ses, const struct epoch *e)
{
	const struct job *job = &ses->job;
	struct dg_finding fs[DG_MAX_FINDINGS];
	int n = epoch_findings(ses, e, fs);

	jw_string_field(w, "slowest", tb_cat_names[epoch_slowest(job, e)]);
	report_findings_json(w, fs, n > 0 ? n : 0);
}
