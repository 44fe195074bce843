/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A thread's phase events (TB_EV_PHASE) as spans of the phases shown,
 * each pending span resolved as its step turned out (docs/phases.md): a
 * backward makes a step's pending fetch and forward data and forward; the
 * next fetch with none in between holds them, or makes them validation; a
 * backward after a held step makes it other. The one place user space
 * follows BPF's resolution: the phase table (phases.c) and the trace
 * (trace_export.c) both take their spans from here.
 */
#ifndef TB_PHASE_SPANS_H
#define TB_PHASE_SPANS_H

#include <stdbool.h>
#include <stdint.h>
#include "probes.h"
#include "trainbpf.h"

/*
 * The phases shown. The first PH_NLOOP are the loop's, from the phase
 * events (spans, steps, epochs); setup and teardown are a trainer
 * thread's life before its first phase event and after its last
 * (docs/phases.md, "The share"), from its rows alone: no step, no epoch.
 */
enum ph_shown {
	PH_DATA, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_CHECKPOINT, PH_VALIDATION,
	PH_COMM, PH_OTHER, PH_NLOOP,
	PH_SETUP = PH_NLOOP, PH_TEARDOWN, PH_NSHOWN,
};
/* The order tables show them in: setup first, teardown last. */
extern const int ph_order[PH_NSHOWN];

extern const char *const ph_names[PH_NSHOWN];
/* The same, short, for narrow tables: data fwd bwd opt ckpt val comm other setup teardown. */
extern const char *const ph_short[PH_NSHOWN];
/* BPF's phases, pending ones included (the recording's phase_times rows). */
extern const char *const tb_phase_names[TB_NPHASE];
/* Where a BPF phase shows; a pending one, as it most often turns out. */
int ph_shown_of(unsigned int tb_phase);

struct ph_span {
	uint64_t start, end;
	int phase;			/* enum ph_shown */
	bool startup;			/* data: the workers' start-up (TB_PH_WSTART) */
};

typedef void (*ph_span_fn)(void *arg, const struct ph_span *s);

/* Spans waiting for their step to say what they were; older ones go as folded. */
#define PH_MAX_PENDING 32

/*
 * Pending kinds: a step's fetch, what followed it, a step held (lone);
 * a worker start-up under way (to its fetch), one held with its fetch's step.
 */
enum { PH_PEND_DATA, PH_PEND_FWD, PH_PEND_HELD, PH_PEND_START, PH_PEND_SHELD, PH_NPEND };

struct ph_spans {
	unsigned int phase;		/* enum tb_phase from since on */
	uint64_t since;			/* 0: no event yet */
	struct {
		uint64_t start, end;
		unsigned int phase;	/* TB_PH_PEND_* */
	} pend[PH_MAX_PENDING];
	int npend;
	uint64_t pend_ns[PH_NPEND];	/* the pending spans' time, by kind */
	unsigned int start_from;	/* the phase a start-up under way interrupted */
	bool st_held;			/* the step under way holds a start-up */
	bool in_val;			/* the last step resolved was validation */
	bool fetcher;			/* it fetched from a DataLoader */
};

/* A BPF phase still waiting for its step to say what it was. */
bool ph_is_pending(unsigned int tb_phase);

/* The span the event ends, and those its resolution settles, to fn. */
void ph_spans_event(struct ph_spans *s, const struct tb_phase_event *e, ph_span_fn fn,
		    void *arg);
/*
 * The end of a thread that never fetched (batches from a queue, a loop of
 * its own): what is pending came after its last backward and met none,
 * the loop's end and the job's teardown: out as teardown, to fn.
 */
void ph_spans_unfetched_end(struct ph_spans *s, ph_span_fn fn, void *arg);
/*
 * The end of the thread's trace: its open span, then what is pending,
 * folded: as validation after a validation batch (a pass's last batch and
 * its end), as other in a thread that never fetched, else as data and
 * forward.
 */
void ph_spans_end(struct ph_spans *s, uint64_t end, ph_span_fn fn, void *arg);

#endif
