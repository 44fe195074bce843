// SPDX-License-Identifier: BSD-3-Clause
/*
 * The recording's `states` table, from the state stream (states.h): one
 * row per closed interval, for the trace. The stream makes 1-3 rows per
 * context switch (docs/recording.md, "The states table"), far more than
 * the samples, so it is bounded: the first REC_STATES_MAX_ROWS rows are
 * kept, later ones counted (states_dropped) and dropped. BPF's own losses
 * (its ring full) are counted apart (states_lost).
 */
#include <sqlite3.h>
#include <stddef.h>
#include "record.h"

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
		rec_bind_int(r, RS_STATE, 1, recs[i].tid);
		rec_bind_int(r, RS_STATE, 2, recs[i].pid);
		rec_bind_int(r, RS_STATE, 3, recs[i].start_ns);
		rec_bind_int(r, RS_STATE, 4, recs[i].end_ns);
		rec_bind_int(r, RS_STATE, 5, recs[i].cat);
		rec_bind_int(r, RS_STATE, 6, recs[i].cp_cat);
		if (rec_step(r, RS_STATE))
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
