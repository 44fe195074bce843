/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The live view: while the job runs, a table every -i seconds of the
 * interval since the previous one, each epoch's block as it ends, and with
 * --step-blocks a block every N steps. What it has shown already is its
 * own state, here; the job is only read.
 */
#ifndef TB_LIVE_H
#define TB_LIVE_H

#include <stdint.h>
#include <stdio.h>
#include "epochs.h"
#include "job.h"
#include "session.h"
#include "phases.h"

/* The GPUs' readings at the last table (report_gpu_util.c): the next shows what came since. */
struct live_gu {
	struct gu_agg prev[GU_MAX_DEVS];
};

#define LIVE_HIST 24	/* step times kept for the panel's history */

struct live {
	uint64_t (*shown)[TB_NCAT];	/* per job->procs[i]: totals at the last table */
	int nshown;
	uint64_t headline[TB_NCAT];	/* the headline then */
	long epochs[EP_NSRC];		/* epochs of each source printed (ep_stream.closed) */
	uint64_t steps_ns;		/* the last steps line; 0: none yet */
	struct {
		uint64_t ns, syncs, ops, bytes, launches;
	} gpu;				/* CUDA/NCCL totals at the last table */
	struct {
		double wall_ms[PH_NSHOWN];
		int steps;
		double step_ms;
	} ph;				/* the trainers' phases at the last table */
	struct {
		uint64_t from, ts;	/* its first step's start; the tick it began */
		int64_t hl[TB_NCAT];	/* the headline then */
		long done;		/* steps in earlier blocks */
	} block;			/* --step-blocks: the block under way */
	struct live_gu gu;		/* the GPUs' (NVML) at the last table */
	double hist[LIVE_HIST];		/* mean step time of each table's interval, ms */
	long nhist;
	struct live_gu block_gu;	/* and where the step block began */
};

void live_init(struct live *lv);
void live_free(struct live *lv);
/* The job folded rows (job_fold): what was shown follows them. */
void live_on_fold(struct live *lv, const struct job_fold *f);
/* One table of the interval since the previous one; 80 columns. */
void live_table(FILE *f, struct live *lv, const struct session *ses, uint64_t now);
/*
 * The panel a terminal shows in place (live_screen.c): the interval since
 * the last one in a dozen lines (the headline, phases, each rank's phases,
 * steps with the step time's history, the GPU, the top finding).
 */
void live_panel(FILE *f, struct live *lv, const struct session *ses, uint64_t now);
/* The blocks of epochs that ended since the last call. */
void live_epochs(FILE *f, struct live *lv, const struct session *ses);
/* --step-blocks: a block when n more steps have completed since the last. */
void live_step_blocks(FILE *f, struct live *lv, const struct session *ses, int n, uint64_t now);

#endif
