/* SPDX-License-Identifier: BSD-3-Clause */
/* What the user reads: the live table and the final report (text, JSON). */
#ifndef TB_REPORT_H
#define TB_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "job.h"
#include "json_writer.h"

struct gpu;

/*
 * Pieces the text outputs share. Rows "computation 62.1%   cpu 30.2%
 * gpu_wait 31.9%" from each category's percent; lone: list a group's
 * category beside it when it is the only one.
 */
void report_rollup_rows(FILE *f, const double pct[TB_NCAT], bool lone);
/* " cpu  gpu comm ..." heads, and a row of shares of c under them. */
void report_cat_head(FILE *f);
void report_pct_cells(FILE *f, const uint64_t c[TB_NCAT]);
struct ep_steps;
/* "12 steps (calls), 81.0 ms/step (min ..., std ...), 3.0 syncs/step" */
void report_text_steps(FILE *f, const struct job *job, const struct ep_steps *s);

/* "1.2 MB" */
void fmt_bytes(char *buf, size_t len, uint64_t b);

/* The CUDA/NCCL parts (report_gpu.c). */
void report_gpu_text(FILE *f, const struct job *job, uint64_t now);
void report_gpu_json(struct jw *w, const struct job *job, uint64_t now);
void report_gpu_json_proc(struct jw *w, const struct job *job, pid_t pid);

/* Epochs (report_epochs.c): blocks as epochs end, the final list, JSON. */
struct epochs;
struct epoch;
void report_epoch_block(FILE *f, const struct job *job, const struct epoch *e,
			const char *source);
void report_epochs_text(FILE *f, const struct job *job, const struct epochs *ep);
void report_epochs_json(struct jw *w, const struct job *job, const struct epochs *ep);
void report_text(FILE *f, const struct job *job,
		 const struct run_counters *c, uint64_t now);
void report_json(FILE *f, const struct job *job,
		 const struct run_counters *c, uint64_t now);

#endif
