/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The training loops' named sections (--functions): each phase's time on
 * the loop threads' stacks by the loop's own callee, the function one
 * level below the loop's frame (ema.update, sample_images, get_batch). A
 * view of model/pystacks.c, for the phase table's nested rows.
 */
#ifndef TB_PYSECTIONS_H
#define TB_PYSECTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include "phase_spans.h"
#include "pystacks.h"

/* A section that is no callee of the loop. */
#define PY_SEC_LOOP (-1)	/* the loop's own lines: no call below its frame */
#define PY_SEC_OUT (-2)		/* a stack without the loop's frame or its callers */
#define PY_SEC_NOFRAME (-3)	/* no Python frame: the interpreter starting or ending */
#define PY_SEC_CUT (-4)		/* in the frames a deeper stack did not keep (pystacks.h) */
#define PY_SEC_COMPILE (-5)	/* torch.compile compiling, under whichever call */

/* The phases of a training step: where the loop's frame is looked for. */
static inline bool pysections_training(int phase)
{
	return phase == PH_DATA || phase == PH_FORWARD || phase == PH_BACKWARD ||
	       phase == PH_OPTIMIZER;
}

/*
 * On (nearly) all of a loop's training time: 0.5% left for the samples of
 * its first and last instants. The loop's chain, and the functions the
 * functions table and diff leave out as being on every stack.
 */
static inline bool pysections_everywhere(uint64_t on, uint64_t train)
{
	return train && on >= train - train / 200;
}

struct py_section {
	int fn;			/* the callee (pystacks.fn), or PY_SEC_* */
	uint64_t ns;		/* its time on the stacks read */
	uint64_t cat[TB_NCAT];	/* the same, by critical-path category */
};

/* One phase's sections, largest first, and the phase's time on the stacks read. */
struct py_sections {
	struct py_section *s;
	int n;
	uint64_t read;
};

/*
 * Every shown phase's sections into out[PH_NSHOWN]. The loop's frame is
 * found per loop thread (a trainer's, pystacks_role): the innermost
 * function on (nearly) all of its stacks in data, forward, backward and
 * optimizer, the steps' common caller; the functions on all of them are
 * its chain, the loop and its callers. A stack's section is the function
 * right below the innermost chain function on it: below the loop's frame
 * its callee, below a caller of the loop the work beside it (evaluate()
 * from main). Setup's time (of the loop threads) is torch.compile's or
 * outside the loop's frame. 0, or -1 out of memory (out empty).
 */
int pysections_make(const struct pystacks *m, struct py_sections out[PH_NSHOWN]);
void pysections_free(struct py_sections out[PH_NSHOWN]);

#endif
