/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef TB_PASSES_H
#define TB_PASSES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "probes.h"
#include "trainbpf.h"

/*
 * Where DataLoader passes begin, from one thread's phase events: the one
 * rule behind the epochs' `passes` source (epochs.c) and serve's
 * trainbpf_epochs_total (phases.c), so that a zip of loaders or a
 * validation loader every N steps is the same number of passes in both.
 */

/* A fetch kept: where a pass it begins begins, and whether a start-up was held with it. */
#define PASS_RING 8
struct pass_fetch {
	uint64_t from;
	bool held;
};

/*
 * A thread's passes so far: its last fetches, how many since its last
 * training step, the fewest a training step took (two for a zip of two
 * loaders), and whether a pass ran out (a lone fetch right after a
 * training step: TB_RS_END_DATA) since its last training step. The
 * per-fetch start (TB_RS_START_HELD: iter(loader) started workers for it).
 */
struct pass_thread {
	pid_t tid;
	uint64_t fetch;
	uint64_t from;		/* where a pass its fetch begins begins: the fetch, or
				 * the workers' start-up held with it (start) */
	uint64_t start;		/* the start-up under way began (TB_PH_PEND_START) */
	bool in_start;
	uint64_t stepped;	/* the fetch whose training step was counted (epochs.c) */
	bool ended;		/* a pass ran out since the last training step */
	bool val;		/* and validation ran (TB_RS_VALIDATION) */
	bool trained;		/* a training step seen */
	int since;		/* fetches since the last training step, its own included */
	int kmin;		/* fewest fetches a training step seen whole took; 0: none */
	long nfetch;		/* fetches ever: last[nfetch % PASS_RING] is the next */
	struct pass_fetch last[PASS_RING];
};

/* What a phase event was to the thread's passes. */
struct pass_step {
	bool trained;		/* a training step's backward (resolved TB_RS_TRAINED) */
	bool begins;		/* the step begins a pass */
	bool first;		/* the thread's first training step seen */
	uint64_t from;		/* where that pass begins */
};

/*
 * One phase event of t's thread. attached: traced from the middle (-p,
 * serve finding a running job), so its first training step seen is no
 * pass's first unless a validation loop came before it. Fills *out for
 * a training step's backward; returns whether the event was one.
 */
bool pass_on_phase(struct pass_thread *t, bool attached, const struct tb_phase_event *e,
		   struct pass_step *out);

#endif
