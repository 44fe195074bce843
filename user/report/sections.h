/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sections the reports are made of, shared by the outputs in this
 * folder: text pieces (report_fmt.c), CUDA/NCCL (report_gpu.c), epochs and
 * steps (report_epochs.c), the diagnosis (report_diagnosis.c). JSON
 * sections write named members into the object the caller has open.
 */
#ifndef TB_SECTIONS_H
#define TB_SECTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "epochs.h"
#include "job.h"
#include "session.h"
#include "json_writer.h"

/*
 * Rows "computation 62.1%   cpu 30.2% gpu_wait 31.9%" from each category's
 * percent; lone: list a group's category beside it when it is the only one.
 */
void report_rollup_rows(FILE *f, const double pct[TB_NCAT], bool lone);
/* " cpu  gpu comm ..." heads, and a row of shares of c under them. */
void report_cat_head(FILE *f);
void report_pct_cells(FILE *f, const uint64_t c[TB_NCAT]);
/*
 * A process row's "PID ROLE COMM THR" cells; folded processes (job.h) show
 * as "- ROLE N exited" (their parent is in the JSON). Its name alone.
 */
void report_proc_head(FILE *f, const struct proc_rec *p, int nthreads);
void report_proc_name(char *buf, size_t len, const struct proc_rec *p);
/* "12 steps (calls), 81.0 ms/step (min ..., std ...), 3.0 syncs/step" */
void report_text_steps(FILE *f, const struct session *ses, const struct ep_steps *s);
/* "1.2 MiB" */
void fmt_bytes(char *buf, size_t len, uint64_t b);
/*
 * A name the job chose (comm, a path), as a terminal may be given it:
 * backslash and control characters (C0, DEL, C1 in UTF-8) as C escapes
 * ("\\", "\n", "\t", "\r", "\033"), other bytes as they are. JSON has its
 * own escapes. Returns buf, cut whole escapes at len; ESC_LEN(n) holds any
 * name of n bytes.
 */
#define ESC_LEN(n) (4 * (n) + 1)
const char *report_esc(char *buf, size_t len, const char *s);
/* name: {"cpu": seconds, ...} with 9 decimals, from ns. */
void report_json_times(struct jw *w, const char *name, const int64_t ns[TB_NCAT]);

/* CUDA/NCCL: libraries found, calls, communicators. */
void report_gpu_text(FILE *f, const struct session *ses, uint64_t now);
void report_gpu_json(struct jw *w, const struct session *ses, uint64_t now);
void report_gpu_json_proc(struct jw *w, const struct session *ses, pid_t pid);

/*
 * The GPU's own side (NVML, gpu_util.h): a line under the headline (or why
 * there is none), the section, a line per epoch block and live table, JSON
 * ("gpu_metrics", an epoch's "gpu"), CSV rows in columns of their own.
 */
struct live_gu;
void report_gpu_util_headline(FILE *f, const struct session *ses, uint64_t now);
void report_gpu_util_text(FILE *f, const struct session *ses, uint64_t now);
void report_gpu_util_epoch_line(FILE *f, const struct session *ses, const struct epoch *e);
void report_gpu_util_live(FILE *f, struct live_gu *lv, const struct session *ses, uint64_t now);
/* --step-blocks: the GPUs' sums where a block begins (tick ts); its line, steps in it. */
void report_gpu_util_block_start(struct live_gu *b, const struct session *ses, uint64_t ts);
void report_gpu_util_block_line(FILE *f, struct live_gu *b, const struct session *ses,
				uint64_t now, int steps);
void report_gpu_util_json(struct jw *w, const struct session *ses, uint64_t now);
void report_gpu_util_epoch_json(struct jw *w, const struct session *ses, const struct epoch *e);
bool report_gpu_util_csv_on(const struct session *ses);
/* The run's (an epoch's) summary over the job's GPUs and energy per step (-1: unknown). */
bool report_gpu_util_run(const struct session *ses, uint64_t now, struct gu_summary *s,
			 double *jps);
bool report_gpu_util_epoch(const struct session *ses, const struct epoch *e, struct gu_summary *s,
			   double *jps);
void report_gpu_util_csv_rows(FILE *f, const struct session *ses, uint64_t now,
			      void (*str)(FILE *, const char *));

/* Epochs: one block each, the list with trend and per-process table, JSON. */
void report_epoch_block(FILE *f, const struct session *ses, const struct epoch *e,
			const char *source);
void report_epochs_text(FILE *f, const struct session *ses);
/* The run's steps line, then one line per epoch (the summary report's). */
void report_steps_text(FILE *f, const struct session *ses);
void report_epochs_lines(FILE *f, const struct session *ses);
void report_epochs_json(struct jw *w, const struct session *ses);

/* Training phases: the table for the trainers' main threads. */
void report_phases_text(FILE *f, const struct session *ses, const struct run_counters *c);
/* "made of: data data_wait 69% cpu 14%, ...": phases of 5% of wall and up. */
void report_phases_made_of(FILE *f, const char *lead, const double wall[PH_NSHOWN],
			   const uint64_t cp[PH_NSHOWN][TB_NCAT]);
void report_phases_json(struct jw *w, const struct session *ses, const struct run_counters *c);
void report_phases_json_proc(struct jw *w, const struct session *ses, const struct proc_rec *p);

/* --functions: the Python functions of the training loops and the workers. */
void report_functions_text(FILE *f, const struct session *ses);
/* The same, as the JSON report's "functions" (docs/json.md). */
void report_functions_json(struct jw *w, const struct session *ses);
/* The same, as the HTML report's section. */
void report_functions_html(FILE *f, const struct session *ses);
/*
 * The training loops' time per function over the loop's phases (setup and
 * teardown left out), indexed as pystacks.fn; everywhere: on (nearly) all
 * of those stacks (the loop and its callers). The count, or -1 (none, or
 * out of memory); *out freed by the caller.
 */
struct fn_loop_total {
	const char *name, *file;
	int line;
	uint64_t ns;
	bool everywhere;
};
int report_fn_loop_totals(const struct session *ses, struct fn_loop_total **out);
/* "name (file.py:line)": a function of the stacks read, its file without its directory. */
struct pystacks;
void report_fn_label(char *buf, size_t len, const struct pystacks *m, int fn);
void report_fn_label_of(char *buf, size_t len, const char *name, const char *file, int line);

/*
 * The phase table's named sections under a phase (report_sections.c): its
 * time by the loop's callee, of the table's table_ms, per step; nothing
 * (text, HTML: 0 rows) or [] (JSON) where the phase is not split.
 */
struct py_sections;
int report_sections_text(FILE *f, const struct pystacks *m, const struct py_sections *ps,
			 int phase, double phase_ms, double table_ms, int steps);
void report_sections_json(struct jw *w, const struct pystacks *m, const struct py_sections *ps,
			  int phase, double phase_ms, double table_ms, int steps);
int report_sections_html(FILE *f, const struct pystacks *m, const struct py_sections *ps,
			 int phase, double phase_ms, double table_ms, int steps);
/*
 * The same rows through fn: the section's label, wall ms and critical path;
 * rest: 0, or the calls folded into this row ("N more calls").
 */
typedef void (*report_section_row_fn)(void *arg, const char *label, double ms,
				      const uint64_t cat[TB_NCAT], int rest);
void report_sections_each(const struct pystacks *m, const struct py_sections *ps, int phase,
			  double phase_ms, double table_ms, report_section_row_fn fn, void *arg);

/* The diagnosis: a section, "  slowest: gpu_wait; ..." under an epoch block, JSON. */
void report_diagnosis_text(FILE *f, const struct session *ses, uint64_t now);
/*
 * The run's findings (DG_MAX_FINDINGS at most), ranked by cost: a
 * recording's as saved, else judged now; -1 if they could not be judged.
 */
struct dg_finding;
int report_run_findings(const struct session *ses, uint64_t now, struct dg_finding *out);

/*
 * The indexes of row's k largest categories, largest first: of any time,
 * or of 1% of the row and up (pct1); how many.
 */
int report_top_cats(const uint64_t row[TB_NCAT], int k, bool pct1, int out[]);
/* "cpu 62%, idle 30%": a row's k largest categories of 1% and up. */
void report_made_of(char *buf, size_t len, const uint64_t row[TB_NCAT], int k);

/* Where the time goes and what to change: what every report opens with. */
struct report_verdict {
	int phase;			/* the largest phase; -1: no phases or steps */
	int cat;			/* else the headline's largest category; -1: no time */
	double share;			/* of the trainer threads' lives, or of the headline, % */
	double ms_per_step;		/* the phase's, per training step */
	double total_s;			/* the headline's critical path */
	int trainers;
	char made_of[128];		/* the phase's largest categories */
	char of_which[320];		/* its largest named sections (--functions), or "" */
	int findings;			/* the run's; -1: not judged */
	const struct dg_finding *top;	/* the first ranked (the costliest), or NULL */
	char advice[384];		/* its advice's first sentence */
};
void report_verdict(const struct session *ses, const struct dg_finding *fs, int n,
		    struct report_verdict *v);
/* Its two text lines. */
void report_verdict_text(FILE *f, const struct report_verdict *v);
/* Findings judged elsewhere (a merged job): the section under title; JSON "diagnosis". */
struct dg_finding;
/* more: what else was checked ("; GPU ...") when nothing was found */
void report_findings_text(FILE *f, const char *title, const char *more,
			  const struct dg_finding *fs, int n);
void report_findings_json(struct jw *w, const struct dg_finding *fs, int n);
void report_diagnosis_json(struct jw *w, const struct session *ses, uint64_t now);
void report_diagnosis_epoch_line(FILE *f, const struct session *ses, const struct epoch *e);
void report_diagnosis_epoch_json(struct jw *w, const struct session *ses, const struct epoch *e);

/*
 * A stalled job (stall.h), when the job is stalled now: the STALLED line
 * and a row per rank, culprit first; the JSON report's "stall" member.
 */
void report_stall_text(FILE *f, const struct session *ses);
void report_stall_json(struct jw *w, const struct session *ses);

#endif
