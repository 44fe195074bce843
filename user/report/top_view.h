/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf top`'s table (user/app/top.c draws it): every training job the
 * node's daemon machinery follows (serve's series, metrics.h), a line per
 * rank's trainer: where its time went since the last table, by training
 * phase (by category where no phase is seen), its step time and steps per
 * second, and its job's top finding, or STALLED. A view of the series: it
 * keeps only what it showed last, to difference the counters.
 */
#ifndef TB_TOP_VIEW_H
#define TB_TOP_VIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "metrics.h"

#define TOP_MAX_ROWS 256	/* lines of the table (the rest said, not shown) */

/* One line: a trainer series, and what it had at the last table. */
struct top_row {
	int series;		/* index into metrics.series */
	char job[JOB_ID_LEN];
	int rank, role;
	struct mx_values was;	/* its values at the last table */
	uint64_t was_ns;	/* when; 0: first seen at this one */
};

struct top_view {
	struct top_row rows[TOP_MAX_ROWS];
	int nrows;
	int more;		/* trainer series past TOP_MAX_ROWS */
	uint64_t at_ns;		/* the last table's time */
};

/*
 * The table of m's live trainer series at now, into f: a title line, a
 * header, a line per row (row sel in reverse video when tty, and lines
 * cut to cols), then the rows' values are kept for the next. Returns the
 * number of rows.
 */
int top_view_draw(FILE *f, struct top_view *tv, const struct metrics *m, uint64_t now,
		  int sel, int cols, bool tty);
/* The processes of row's job followed now (up to max), for its live view; how many. */
int top_view_pids(const struct top_view *tv, const struct metrics *m, int row, pid_t *pids,
		  int max);

#endif
