/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf top`: serve's machinery (it finds every training process of
 * the node and follows its series) with no exporter, and the table of
 * report/top_view.h on the terminal every -i seconds instead, redrawn in
 * place (the alternate screen, as top and nvtop) when stdout is one, else
 * a table after another. Keys, when stdin is a terminal too: up/down (or
 * k/j) choose a row, enter opens that job's live view (trainbpf -p its
 * ranks, once top has let go of everything), q quits.
 */
#ifndef TB_TOP_H
#define TB_TOP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <termios.h>
#include "cli.h"
#include "metrics.h"
#include "top_view.h"

struct top {
	struct top_view view;
	FILE *out;
	bool tty;		/* stdout a terminal: in place */
	bool keys;		/* stdin a terminal, put in raw mode */
	struct termios saved;
	int sel;		/* the chosen row */
	uint64_t next_ns;	/* the next table */
	uint64_t period_ns;
	bool quit;
	pid_t chosen[TB_MAX_PIDS];	/* enter: the job's processes, for its live view */
	int nchosen;
	char seq[8];		/* an escape sequence being read */
	int nseq;
};

void top_start(struct top *t, double interval_s);
/* Keys read since the last call; false once top is to end (q, enter). */
bool top_keys(struct top *t, const struct metrics *m);
/* The table, if its time has come (or forced). */
void top_draw(struct top *t, const struct metrics *m, uint64_t now, bool force);
/* The terminal as it was. */
void top_end(struct top *t);
/* Enter was pressed: trainbpf -p the job's processes (exec; returns only on failure). */
int top_exec_live(const struct top *t, double interval_s);

#endif
