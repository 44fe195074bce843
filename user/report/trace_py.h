/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Python stacks of a recording (--functions, schema 14) as slices of
 * the Chrome trace (trace_export.c): a track per thread beside its own,
 * each frame a slice, callers around callees, in time order.
 */
#ifndef TB_TRACE_PY_H
#define TB_TRACE_PY_H

#include <stdbool.h>
#include <stdint.h>
#include "json_writer.h"
#include "pystacks.h"
#include "recording_read.h"

/* A frame of a slice: a function's index, or one of these. */
#define PY_KEY_OUTER (-1)		/* the outermost frames were not reached */
#define PY_KEY_CUT(n) (-2 - (int)(n))	/* n frames not kept between */
#define PY_KEYS_MAX (PY_STACK_MAX + 2)

/*
 * One thread's frames as the spans of its stacks come, in time order:
 * a frame opens when a span's stack has it and the one before did not,
 * and closes when a span's stack no longer has it, or at a gap.
 */
struct py_track {
	int open[PY_KEYS_MAX];	/* outermost first */
	int nopen;
	uint64_t end;		/* where the last span ended */
	uint64_t gap_ns;	/* a longer time between spans closes every frame */
	/* A frame opens (begin) or closes, at ts. */
	void (*frame)(void *ctx, int key, uint64_t ts, bool begin);
	void *ctx;
};

/* Frames of stack st of m, outermost first, as keys; their number. */
int py_track_keys(const struct py_stack *st, int keys[PY_KEYS_MAX]);
/* The span [start, end) was in the stack of keys (n, outermost first). */
void py_track_span(struct py_track *t, uint64_t start, uint64_t end, const int *keys, int n);
/* The thread's last span is over: its frames close where it ended. */
void py_track_end(struct py_track *t);

/*
 * Writes the tracks into the open traceEvents array, times from t0:
 * their spans in *spans and those of stacks never named (not kept) in
 * *unnamed; 0, or -1 and a line in err. A recording without
 * py_samples (before schema 14, or no --functions) has none.
 */
int trace_py_tracks(struct jw *j, struct recording *r, uint64_t t0, long *spans,
		    long *unnamed, bool *has, char *err, size_t errlen);

#endif
