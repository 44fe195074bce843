/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The state-transition stream from user space: every closed interval of
 * every traced thread (struct tb_state_rec), drained from the `states`
 * ring buffer in batches. The recording's `states` table is written from
 * it; --states-out writes it as text, for debugging and tests.
 *
 * Life: set env->states_ring_kb before tracer_open (the ring is sized and
 * the stream switched on when the BPF object loads), then states_open,
 * states_drain on every tick and once after the final report, states_close.
 */
#ifndef TB_STATES_H
#define TB_STATES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "trainbpf.h"

struct tracer;
struct ring_buffer;

#define TB_STATES_RING_KB 16384	/* default ring; docs/recording.md sizes it */
#define TB_STATES_BATCH 4096	/* records per callback at most */

/*
 * Receives n (>= 1) records, in the order BPF closed them (per thread:
 * by time). Returns 0, or a negative errno to stop the drain.
 */
typedef int (*states_fn)(void *ctx, const struct tb_state_rec *recs, size_t n);

struct states {
	struct ring_buffer *rb;
	states_fn fn;
	void *ctx;
	struct tb_state_rec *batch;
	size_t n;
	int err;		/* the callback's first error */
	uint64_t delivered;	/* records handed to fn */
};

/*
 * Consumes tr's states ring (the tracer must have loaded with the stream
 * on). 0, or -1 with one line on stderr.
 */
int states_open(struct states *st, struct tracer *tr, states_fn fn, void *ctx);
/* Delivers what the ring holds now. Returns records delivered or -errno. */
int states_drain(struct states *st);
void states_close(struct states *st);
/* Intervals BPF dropped because the ring was full (counters.states_lost). */
uint64_t states_lost(const struct tracer *tr);

/*
 * The batching under states_drain, apart from the ring (unit tests):
 * states_init allocates, states_push queues one record and hands a full
 * batch to fn, states_flush hands over the rest. An error of fn stops the
 * ring's drain and stays in err; the batch is dropped, not retried.
 */
int states_init(struct states *st, states_fn fn, void *ctx);
int states_push(struct states *st, const struct tb_state_rec *r);
int states_flush(struct states *st);

/* A states_fn writing tab-separated lines to a FILE * (ctx). */
int states_write_tsv(void *ctx, const struct tb_state_rec *recs, size_t n);
void states_tsv_header(FILE *f);

#endif
