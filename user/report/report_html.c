// SPDX-License-Identifier: BSD-3-Clause
/*
 * The HTML report: one page, nothing fetched and no script, that opens in
 * any browser offline. On top what to do (the verdict, the findings with
 * their evidence and advice), then the charts (html_charts.c), then the
 * full tables. A view of the same model the text and JSON reports read,
 * through the same functions: phases_job, epoch_headline, the findings.
 */
#include <string.h>
#include "diagnosis.h"
#include "epochs.h"
#include "html.h"
#include "phases.h"
#include "report_write.h"
#include "sections.h"

/* System fonts only: a font from the network is a request the page must not make. */
static const char style[] =
	"body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;"
	"max-width:1100px;padding:0 16px;color:#222;background:#fff}"
	"h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
	".verdict{font-size:16px;background:#f4f7fb;border-left:4px solid #4e79a7;"
	"padding:10px 14px}"
	".finding{margin:10px 0;padding:8px 12px;border:1px solid #e3e3e3;border-radius:4px}"
	".finding .sev{display:inline-block;min-width:3em;font-weight:bold;color:#b03030}"
	".finding p{margin:4px 0 0 0}.finding .k{color:#666}"
	"table{border-collapse:collapse;font-size:13px;margin:8px 0}"
	"th,td{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}"
	"th{background:#f6f6f6}td.l,th.l{text-align:left}"
	".legend span{margin-right:12px;white-space:nowrap}"
	".legend i{display:inline-block;width:11px;height:11px;margin-right:4px;"
	"vertical-align:-1px}"
	"svg{display:block;margin:6px 0}svg text{font-size:11px;fill:#444}"
	"svg .axis{stroke:#999}svg .mark{stroke:#888;stroke-dasharray:3 3}"
	"svg .steps{fill:none;stroke:#4e79a7;stroke-width:1.2}"
	".note{color:#666;font-size:13px}";

void html_page_open(FILE *f, const char *title)
{
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		"<meta name=\"viewport\" content=\"width=device-width\">\n"
		"<title>%s</title>\n<style>%s</style></head><body>\n", title, style);
}

void html_page_close(FILE *f)
{
	fputs("</body></html>\n", f);
}

/* The verdict (report_verdict.c), as the text report has it, in HTML. */
static void verdict(FILE *f, const struct session *ses, const struct dg_finding *fs, int n)
{
	struct report_verdict v;

	report_verdict(ses, fs, n, &v);
	fputs("<section id=\"verdict\"><h2>Verdict</h2><p class=\"verdict\">", f);
	if (v.phase >= 0) {
		fprintf(f, "<b>Largest phase: %s</b>, %.1f%% of the trainers' time "
			"(%.1f ms per step)%s%s", ph_names[v.phase], v.share, v.ms_per_step,
			*v.made_of ? "; made of " : "", v.made_of);
		if (*v.of_which) {
			fputs("; of which in ", f);
			html_esc(f, v.of_which);
		}
		fputc('.', f);
	} else if (v.cat >= 0)
		fprintf(f, "<b>Most of the trainers' time: %s</b>, %.1f%% of the critical path of "
			"%d trainer thread%s (%.2f s); no training phases were seen.",
			tb_cat_names[v.cat], v.share, v.trainers, v.trainers == 1 ? "" : "s",
			v.total_s);
	else
		fputs("<b>No trainer time was traced.</b>", f);
	if (v.top) {
		fputs("<br><b>Top finding:</b> ", f);
		html_esc(f, v.top->summary);
		fputs(". <b>Try:</b> ", f);
		html_esc(f, v.advice);
	} else if (!v.findings) {
		fputs("<br>The diagnosis found no bottleneck.", f);
	}
	fputs("</p></section>\n", f);
}

static void findings(FILE *f, const struct dg_finding *fs, int n)
{
	fputs("<section id=\"findings\"><h2>Findings</h2>\n", f);
	if (n <= 0)
		fputs("<p class=\"note\">No bottleneck found.</p>\n", f);
	for (int i = 0; i < n; i++) {
		fprintf(f, "<div class=\"finding\" data-id=\"%s\"><span class=\"sev\">%.2f</span> ",
			diag_id_name(fs[i].id), fs[i].severity);
		html_esc(f, fs[i].summary);
		fputs("<p><span class=\"k\">why:</span> ", f);
		html_esc(f, fs[i].evidence);
		fputs("</p><p><span class=\"k\">fix:</span> ", f);
		html_esc(f, fs[i].advice);
		fputs("</p></div>\n", f);
	}
	fputs("<p class=\"note\">Ranked by the share of the trainers' time each costs, largest "
	      "first (those that name no time after, by severity); severity 0 at the rule's "
	      "threshold, 1 when severe.</p></section>\n", f);
}

/* A row's shares per category, as table cells. */
static void pct_cells(FILE *f, const uint64_t c[TB_NCAT])
{
	uint64_t total = sum_cats(c);

	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, "<td>%.1f</td>", total ? 100.0 * c[i] / total : 0.0);
}

static void cat_heads(FILE *f)
{
	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, "<th>%s %%</th>", tb_cat_names[i]);
}

static void process_table(FILE *f, const struct job *job)
{
	uint64_t tot[TB_NCAT];
	char name[64];

	fputs("<section id=\"processes\"><h2>Processes</h2><p class=\"note\">% of each process's "
	      "thread time</p>\n<table><tr><th>pid</th><th class=\"l\">role</th>"
	      "<th class=\"l\">comm</th><th>threads</th><th>time s</th>", f);
	cat_heads(f);
	fputs("</tr>\n", f);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		proc_totals(p, tot);
		report_proc_name(name, sizeof(name), p);
		if (p->folded)
			fputs("<tr><td>-</td>", f);
		else
			fprintf(f, "<tr><td>%d</td>", p->pid);
		fprintf(f, "<td class=\"l\">%s</td><td class=\"l\">", role_name(p->role));
		html_esc(f, name);
		fprintf(f, "</td><td>%d</td><td>%.2f</td>", proc_nthreads(p), sum_cats(tot) / 1e9);
		pct_cells(f, tot);
		fputs("</tr>\n", f);
	}
	fputs("</table></section>\n", f);
}

static void thread_row(FILE *f, const struct proc_rec *p, const struct thread_rec *t,
		       uint64_t now)
{
	fputs("<tr>", f);
	fprintf(f, p->folded ? "<td>-</td>" : "<td>%d</td>", p->pid);
	fprintf(f, t->folded ? "<td>-</td><td class=\"l\">%d exited" :
		"<td>%d</td><td class=\"l\">", t->folded ? t->folded : t->tid);
	if (!t->folded)
		html_esc(f, t->comm);
	fprintf(f, "</td><td>%.2f</td>", thread_lifetime(t, now) / 1e9);
	pct_cells(f, t->own);
	fputs("</tr>\n", f);
}

static void thread_table(FILE *f, const struct job *job, uint64_t now)
{
	fputs("<section id=\"threads\"><h2>Threads</h2><p class=\"note\">% of each thread's "
	      "lifetime</p>\n<table><tr><th>pid</th><th>tid</th><th class=\"l\">comm</th>"
	      "<th>lifetime s</th>", f);
	cat_heads(f);
	fputs("</tr>\n", f);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads; j++)
			if (!p->folded || p->threads[j].folded)	/* an aggregate's empty half */
				thread_row(f, p, &p->threads[j], now);
	}
	fputs("</table></section>\n", f);
}

static void counters(FILE *f, const struct run_counters *c)
{
	char rb[32], wb[32];

	fmt_bytes(rb, sizeof(rb), c->io_rbytes);
	fmt_bytes(wb, sizeof(wb), c->io_wbytes);
	fprintf(f, "<p class=\"note\" id=\"counters\">Storage read %s, written %s; %llu context "
		"switches; %llu events lost.</p>\n", rb, wb, (unsigned long long)c->switches,
		(unsigned long long)c->bpf.events_lost);
}

static void title(FILE *f, const struct job *job, uint64_t now)
{
	int nprocs = 0, nthreads = 0;

	for (int i = 0; i < job->nprocs; i++) {
		nprocs += proc_count(&job->procs[i]);
		nthreads += proc_nthreads(&job->procs[i]);
	}
	fprintf(f, "<h1>trainbpf %s: %.2f s traced, %d processes, %d threads</h1>\n", TB_VERSION,
		(now - job->window_start_ns) / 1e9, nprocs, nthreads);
}

void report_html(FILE *f, const struct session *ses, const struct run_counters *c, uint64_t now)
{
	const struct job *job = &ses->job;
	struct dg_finding fs[DG_MAX_FINDINGS];
	int n = report_run_findings(ses, now, fs);

	html_page_open(f, "trainbpf report");
	title(f, job, now);
	verdict(f, ses, fs, n);
	findings(f, fs, n);
	html_chart_headline(f, ses);
	html_chart_phases(f, ses);
	html_chart_epochs(f, ses);
	html_chart_steps(f, ses);
	html_chart_ranks(f, ses, now);
	html_chart_gpu(f, ses, now);
	html_worker_gens(f, ses);
	report_functions_html(f, ses);
	process_table(f, job);
	thread_table(f, job, now);
	counters(f, c);
	html_page_close(f);
}
