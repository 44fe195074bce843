/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The live view in place, on a terminal: the panel (live_panel) redrawn at
 * the top of the screen every -i seconds, as top and nvtop do, and the
 * job's own output scrolling in the rest of the screen below it (a scroll
 * region), never through the panel. Plain ANSI/VT100 sequences: every
 * terminal a user opens understands them, and nothing is linked for it.
 */
#ifndef TB_LIVE_SCREEN_H
#define TB_LIVE_SCREEN_H

#include <stdbool.h>
#include <stdio.h>
#include "live.h"

struct live_screen {
	bool on;
	int rows, cols;
	int height;		/* the panel's lines now, its rule included */
};

/* Takes the top of the screen (rows x cols) for the panel; the rest scrolls. */
void live_screen_start(FILE *f, struct live_screen *s, int rows, int cols);
/* The terminal's new size (SIGWINCH): the next draw lays it out again. */
void live_screen_resize(FILE *f, struct live_screen *s, int rows, int cols);
/* Draws the panel anew, in one write; the cursor goes back where the job left it. */
void live_screen_draw(FILE *f, struct live_screen *s, struct live *lv, const struct session *ses,
		      uint64_t now);
/* Gives the whole screen back (Ctrl-C, the job's end): the final report follows. */
void live_screen_end(FILE *f, struct live_screen *s);

#endif
