/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Training steps found with no annotation: a training loop makes the same
 * sequence of synchronisation, copy and NCCL calls every step, so each
 * thread's call sequence is periodic and its period is one step. The
 * period is the smallest lag at which the sequence matches itself
 * (autocorrelation over symbols); a step starts at the entry of the call
 * at one fixed position (phase) of the period.
 *
 * A symbol is the api plus the log2 of the gap since the previous call
 * returned (us; gaps under 16 us, the order of the probes' own cost, are
 * one bucket): three cudaStreamSynchronize per step with different gaps
 * are a period of 3, not 1. Two symbols match when the api is the same and
 * the buckets differ by at most one, so a step time that varies by less
 * than a factor of 2-4 keeps its symbols.
 *
 * Memory: the last ST_RING calls per thread, plus the step starts found and
 * the entries of sync and copy calls (tens per second) for the reports.
 */
#ifndef TB_STEPS_H
#define TB_STEPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "probes.h"

#define ST_RING 2048		/* calls kept per thread: the detection window */
#define ST_MAX_PERIOD 256	/* the longest period looked for, in calls */
#define ST_MIN_REPS 4		/* periods a window must hold */
#define ST_MIN_CALLS 16		/* and calls */
#define ST_MATCH 0.9		/* fraction of calls that match one period back */
#define ST_SLACK 0.03		/* a shorter lag this close to the best wins */
#define ST_KEEP 0.75		/* a locked period with fewer matches is dropped */
#define ST_GAP_NONE 0xff	/* the first call of a thread: no gap */
/*
 * Bounds (docs/model.md, "What trainbpf keeps"). Past ST_MAX_BOUNDS step
 * starts of one thread (ST_MAX_SYNCS sync entries of one process), the
 * older half is summed (struct st_sum): a window that covers all of them
 * counts them, one that cuts into them sees the kept ones only. A thread
 * with no call for ST_IDLE_NS gives its call ring back; at most
 * ST_MAX_SERIES threads keep step starts, ST_MAX_PROCS processes sync
 * entries (the ones idle longest go).
 */
#define ST_MAX_BOUNDS 131072
#define ST_MAX_SYNCS 262144
#define ST_IDLE_NS 60000000000ull
#define ST_MAX_SERIES 256
#define ST_MAX_PROCS 256

/* Step starts folded out of a list: their count, times, and span. */
struct st_sum {
	int count;
	double total_ms, min_ms, max_ms, sum_sq;
	uint64_t first, end;	/* the first one's start, the last one's end */
};

/*
 * Folds the oldest of t[0..*n) into sum, keeping the last keep (step i
 * lasts until step i + 1 starts: the last folded one ends at the first
 * kept one).
 */
void st_sum_fold(struct st_sum *sum, uint64_t *t, int *n, int keep);
/* Index of the first of l[0..n) (ascending) at or after ts. */
int st_lower_bound(const uint64_t *l, int n, uint64_t ts);
/* Whether [a, b) holds every folded step. */
bool st_sum_inside(const struct st_sum *sum, uint64_t a, uint64_t b);

struct st_sym {
	uint16_t api;
	uint8_t gap;		/* steps_gap_bucket() of the gap */
};

struct st_call {
	uint64_t entry;
	struct st_sym sym;
};

struct st_thread {
	pid_t pid, tid;
	struct st_call *ring;	/* call i at ring[i % ST_RING]; NULL until a call */
	uint64_t n;		/* calls seen */
	uint64_t last_ret;
	uint64_t since;		/* first call the next detection may use */
	uint64_t tried;		/* n at the last detection that failed */
	int period;		/* calls per step; 0 while none is locked */
	uint64_t anchor;	/* a call at the step's phase */
	uint64_t locked_from;	/* first call of the window the period was found in */
	uint64_t block;		/* first call of the current check block */
	int miss;		/* calls of the block not matching one period back */
	uint64_t first_miss;	/* the first of them */
	uint64_t *bounds;	/* step starts (entry times), increasing */
	int nbounds, capbounds;
	struct st_sum folded;	/* the oldest step starts, past ST_MAX_BOUNDS */
	uint64_t last_call;	/* the last call's entry */
};

struct st_proc {
	pid_t pid;
	uint64_t *syncs;	/* entries of outermost sync and copy calls, sorted */
	int nsyncs, capsyncs;
	struct st_sum folded;	/* past ST_MAX_SYNCS: count, first and last entry */
};

struct steps {
	struct st_thread *th;
	int nth, capth;
	struct st_proc *pr;
	int npr, cappr;
	uint64_t calls;		/* TB_EV_CALL events seen */
	uint64_t latest;	/* the newest call's entry: "now" for idle threads */
};

/* Symbol similarity (see above). */
bool steps_sym_match(struct st_sym a, struct st_sym b);
/* The gap bucket of a gap in ns: 0 under 16 us, then log2(us) - 3. */
uint8_t steps_gap_bucket(uint64_t gap_ns);
/*
 * The period of s[0..n): the smallest lag <= n / ST_MIN_REPS (and
 * <= ST_MAX_PERIOD) whose match fraction is >= ST_MATCH and within
 * ST_SLACK of the best lag's; 0 if none or n < ST_MIN_CALLS. *score gets
 * its match fraction (may be NULL).
 */
int steps_find_period(const struct st_sym *s, int n, double *score);
/*
 * Where a step starts in s[0..n) of period p: the position (0..p-1) after
 * the widest gap on average, the quiet stretch between two steps' calls
 * (data loading, the forward pass).
 */
int steps_phase(const struct st_sym *s, int n, int p);

void steps_on_event(struct steps *st, const struct tb_call_event *e);
/*
 * What was found earlier (a recording): a step start of thread tid, and
 * an outermost sync or copy call of pid entered at ts.
 */
void steps_add_start(struct steps *st, pid_t pid, pid_t tid, uint64_t ts);
void steps_add_sync(struct steps *st, pid_t pid, uint64_t ts);
/*
 * Looks for periods in threads that have none; each tick. Threads idle
 * for ST_IDLE_NS (by the newest call seen) give their ring back.
 */
void steps_tick(struct steps *st);
/*
 * Step starts in [a, b) of one thread: the main thread of a process with
 * the most, else any thread with the most. NULL if none; *next the
 * thread's first step start at or after b (0 if none), *pid its process.
 */
const uint64_t *steps_bounds(const struct steps *st, uint64_t a, uint64_t b,
			     int *n, uint64_t *next, pid_t *pid);
/* The folded step starts of the series steps_bounds chose (tid, pid); NULL if none. */
const struct st_sum *steps_folded(const struct steps *st, const uint64_t *bounds);
/* Outermost sync and copy calls of pid entered in [a, b). */
int steps_syncs(const struct steps *st, pid_t pid, uint64_t a, uint64_t b);
void steps_free(struct steps *st);

#endif
