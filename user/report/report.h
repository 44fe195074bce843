/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the user reads after a run: the text, JSON (docs/json.md) and CSV
 * reports of a job, the Chrome trace and the diff of recordings. Each is
 * a read-only function of the model; the live view is live.h.
 */
#ifndef TB_REPORT_H
#define TB_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include "job.h"
#include "session.h"
#include "recording_read.h"

/* The full text report (--detail): every section. */
void report_text(FILE *f, const struct session *ses, const struct run_counters *c, uint64_t now);
/*
 * The default text report, one screen: the verdict, the headline, the
 * phase table, the findings one line each, steps, a line per epoch.
 */
void report_summary(FILE *f, const struct session *ses, const struct run_counters *c,
		    uint64_t now);
void report_json(FILE *f, const struct session *ses, const struct run_counters *c, uint64_t now);
/* One row per process, then one per thread; seconds per category. */
void report_csv(FILE *f, const struct session *ses);
/* --folded: every Python stack read, flame graphs' folded lines (ns); -1 if a write failed. */
int report_functions_folded(FILE *f, const struct session *ses);
/*
 * A recording as Chrome trace-event JSON. 1 if it has states, 0 if it has
 * none (counters and markers only), -1 and a line in err.
 */
int trace_export(struct recording *r, FILE *f, char *err, size_t errlen);
/*
 * Recordings of one job's ranks on several nodes as one job (report_merged.c):
 * merged_open checks they are one job (a line in err and -1 if not) and
 * judges them together; text or JSON; merged_close frees (m may be NULL).
 */
struct merged;
int merged_open(struct merged **m, struct recording *r, int n, char *err, size_t len);
void merged_text(FILE *f, const struct merged *m);
void merged_json(FILE *f, const struct merged *m);
void merged_close(struct merged *m);
/* Two recordings side by side. */
void diff_text(FILE *f, const struct recording *a, const struct recording *b);
/* How much slower B's steps are than A's, in % (negative: faster); NAN if either has none. */
double diff_slower_pct(const struct recording *a, const struct recording *b);
/*
 * The pieces of a diff that the text and the HTML page (diff_html.c) both
 * show. The verdict: one sentence that answers "what did the change do"
 * (steps/s, and the phase, else the roll-up, whose share moved most).
 */
void diff_verdict(FILE *f, const struct recording *a, const struct recording *b);
/* A run's steps per second (its epochs' steps); 0 if none. */
double diff_steps_per_s(const struct recording *r);
/* The trainers' critical path by category, % of it. */
void diff_headline_shares(const struct recording *r, double pct[TB_NCAT]);
/* The phases' shares (% of their wall time) and ms per step; false if the run has none. */
bool diff_phase_shares(const struct recording *r, double pct[PH_NSHOWN], double *ms);
/*
 * --functions in both runs: the training loops' functions matched by name
 * and file, ms per training step in A and B, the largest change first,
 * the loop and its callers left out; n (of *out, freed by the caller), or
 * -1 out of memory. DIFF_FUNCS of them are shown.
 */
#define DIFF_FUNCS 10
struct fn_move {
	const char *name, *file;	/* in the recordings' models */
	int line;
	double a, b;			/* ms per training step */
	bool everywhere;		/* the loop or its callers in either run */
};
int diff_fn_moves(const struct recording *a, const struct recording *b, struct fn_move **out);
/* The first run-level finding of r with id, or NULL. */
const struct dg_finding *diff_finding(const struct recording *r, enum dg_id id);
/* "appeared", "gone", "better", "worse" or "same": a finding from A to B. */
const char *diff_finding_change(const struct dg_finding *fa, const struct dg_finding *fb);
/* The diff as one self-contained HTML page (diff_html.c). */
void diff_html(FILE *f, const struct recording *a, const struct recording *b);
/* diff's GPU block (diff_gpu.c): utilization and energy per step; nothing without GPUs. */
void diff_gpu(FILE *f, const struct recording *a, const struct recording *b);
/* `trainbpf dump` (report_dump.c): a snapshot of a job's threads. */
struct snapshot;
void dump_text(FILE *f, const struct snapshot *s);
void dump_json(FILE *f, const struct snapshot *s);

#endif
