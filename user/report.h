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

struct report_counters {
	struct tb_counters bpf;
	uint64_t io_rbytes, io_wbytes, switches;
};

/*
 * Rows "computation 62.1%   cpu 30.2% gpu_wait 31.9%" from each category's
 * percent; lone: list a group's category beside it when it is the only one.
 */
void report_rollup_rows(FILE *f, const double pct[TB_NCAT], bool lone);
void job_counters(const struct job *job, const struct tb_counters *bpf,
		  struct report_counters *out);

/* "1.2 MB" */
void fmt_bytes(char *buf, size_t len, uint64_t b);

/* The CUDA/NCCL parts (report_gpu.c). */
void report_gpu_live(FILE *f, struct gpu *g, uint64_t now);
void report_gpu_text(FILE *f, const struct job *job, uint64_t now);
void report_gpu_json(struct jw *w, const struct job *job, uint64_t now);
void report_gpu_json_proc(struct jw *w, const struct job *job, pid_t pid);

/* Epochs (report_epochs.c): blocks as epochs end, the final list, JSON. */
struct epochs;
struct epoch;
/* An epoch's headline (trainers' main threads' critical path); its total. */
int64_t epoch_headline(const struct job *job, const struct epoch *e,
		       int64_t hl[TB_NCAT]);
void report_epoch_block(FILE *f, const struct job *job, const struct epoch *e,
			const char *source);
void report_epochs_live(FILE *f, const struct job *job, struct epochs *ep);
/* --step-blocks: a block when n more steps have completed since the last. */
void report_step_blocks(FILE *f, const struct job *job, struct epochs *ep, int n,
			uint64_t now);
void report_epochs_text(FILE *f, const struct job *job, const struct epochs *ep);
void report_epochs_json(struct jw *w, const struct job *job, const struct epochs *ep);
/* The steps of the interval since the previous call, one line. */
void report_steps_live(FILE *f, const struct job *job, uint64_t now);

/* One table of the interval since the previous call; 80 columns. */
void report_live(FILE *f, struct job *job, uint64_t now);
void report_text(FILE *f, const struct job *job,
		 const struct report_counters *c, uint64_t now);
void report_json(FILE *f, const struct job *job,
		 const struct report_counters *c, uint64_t now);

#endif
