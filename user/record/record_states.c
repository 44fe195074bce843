// SPDX-License-Identifier: BSD-3-Clause
/*
 * The recording's `states` table, from the state stream (states.h): one
 * row per closed interval, for the trace. The stream makes 1-3 rows per
 * context switch (docs/recording.md, "The states table"), far more than
 * the samples, so it is bounded: the first REC_STATES_MAX_ROWS rows are
 * kept, later ones counted (states_dropped) and dropped. BPF's own losses
 * (its ring full) are counted apart (states_lost). With --functions an
 * interval off a CPU keeps the hash of the Python stack it was charged to
 * (py_stacks.hash), and the stream's on-CPU samples go to py_samples; the
 * bound is on both together.
 */
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include "record.h"

static int insert_sample(struct recorder *r, const struct tb_state_rec *s)
{
	rec_bind_int(r, RS_PY_SAMPLE, 1, s->tid);
	rec_bind_int(r, RS_PY_SAMPLE, 2, s->pid);
	rec_bind_int(r, RS_PY_SAMPLE, 3, s->end_ns);
	rec_bind_int(r, RS_PY_SAMPLE, 4, (int64_t)s->py_stack);
	rec_bind_int(r, RS_PY_SAMPLE, 5, s->end_ns - s->start_ns);	/* the time it charged */
	return rec_step(r, RS_PY_SAMPLE);
}

static int insert_one(struct recorder *r, const struct tb_state_rec *s)
{
	if (s->flags & TB_SR_PY_SAMPLE)
		return insert_sample(r, s);
	rec_bind_int(r, RS_STATE, 1, s->tid);
	rec_bind_int(r, RS_STATE, 2, s->pid);
	rec_bind_int(r, RS_STATE, 3, s->start_ns);
	rec_bind_int(r, RS_STATE, 4, s->end_ns);
	rec_bind_int(r, RS_STATE, 5, s->cat);
	rec_bind_int(r, RS_STATE, 6, s->cp_cat);
	if (s->py_stack)	/* as py_stacks.hash keeps it */
		rec_bind_int(r, RS_STATE, 7, (int64_t)s->py_stack);
	else
		rec_bind_null(r, RS_STATE, 7);
	return rec_step(r, RS_STATE);
}

/*
 * A batch of drained rows, in a transaction of its own: they come on every
 * tick, between flushes, and one commit per row would cost a write each.
 */
int record_insert_states(void *ctx, const struct tb_state_rec *recs, size_t n)
{
	struct recorder *r = ctx;
	size_t i;

	if (r->failed)
		return -1;
	if (r->states_rows >= REC_STATES_MAX_ROWS) {
		r->states_dropped += n;
		return 0;
	}
	if (rec_exec(r, "BEGIN", "write"))
		return -1;
	for (i = 0; i < n && r->states_rows < REC_STATES_MAX_ROWS; i++) {
		if (insert_one(r, &recs[i]))
			goto err;
		r->states_rows++;
	}
	r->states_dropped += n - i;
	if (rec_exec(r, "COMMIT", "write"))
		goto err;
	return 0;
err:
	/* The batch goes; the file keeps the commits before it. */
	sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}
