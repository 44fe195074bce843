// SPDX-License-Identifier: BSD-3-Clause
/*
 * The Python stacks of a recording as slices (trace_py.h). Where a
 * thread's stack is known (docs/functions.md, "What is read, and when"):
 *
 *   - off a CPU, for the whole of each interval (states.stack: the stack
 *     read at the switch-out before it, which it was charged to);
 *   - on a CPU, at each sample (py_samples): its span is the time it
 *     charged before it (a period, or the time since the sample before in
 *     the same run when the sampler skipped periods: pystack.bpf.h), from
 *     the end of the span before it at the earliest (the thread's
 *     wake-up, the sample before).
 *
 * Off a CPU every interval is a span, so a time between two spans is the
 * thread's own on a CPU that no sample charged: the rest of a run after
 * its last sample. The frames both sides share span such a time, as a
 * sampling profiler's timeline draws them; past PY_GAP_PERIODS periods it
 * is taken for time whose stack was not read (a stack not named), and
 * every frame closes there.
 *
 * Each frame is a begin and an end event on the thread's Python track
 * (B/E, not X: a frame's end is the very timestamp its successor begins
 * at, with no sum of doubles to round past it), so they nest as the
 * stack did and the track loads flat.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include "report.h"
#include "sections.h"
#include "trace_events.h"
#include "trace_py.h"

/* A thread's Python track, beside its own (trace_export.c's tracks: bits 29, 30). */
#define PY_TID(tid) ((int)((unsigned int)(tid) | 0x10000000u))
#define PY_GAP_PERIODS 10

int py_track_keys(const struct py_stack *st, int keys[PY_KEYS_MAX])
{
	int n = 0;

	if (py_stack_outer_lost(st))
		keys[n++] = PY_KEY_OUTER;
	for (int k = st->depth - 1; k >= 0 && n < PY_KEYS_MAX; k--) {
		keys[n++] = st->fn[k];
		if (k == TB_PY_INNER && py_stack_cut(st) && n < PY_KEYS_MAX)
			keys[n++] = PY_KEY_CUT(py_stack_cut(st));
	}
	return n;
}

/* Frames from the depth'th out close at ts, innermost first. */
static void close_to(struct py_track *t, int depth, uint64_t ts)
{
	while (t->nopen > depth) {
		t->nopen--;
		t->frame(t->ctx, t->open[t->nopen], ts, false);
	}
}

void py_track_span(struct py_track *t, uint64_t start, uint64_t end, const int *keys, int n)
{
	int common = 0;

	if (start < t->end)	/* never before the last span ended */
		start = t->end;
	if (end <= start)	/* a sample right after the span before: no time of its own */
		return;
	if (t->nopen && start - t->end > t->gap_ns)
		close_to(t, 0, t->end);
	while (common < t->nopen && common < n && t->open[common] == keys[common])
		common++;
	close_to(t, common, t->end);
	for (; t->nopen < n && t->nopen < PY_KEYS_MAX; t->nopen++) {
		t->open[t->nopen] = keys[t->nopen];
		t->frame(t->ctx, keys[t->nopen], start, true);
	}
	t->end = end;
}

void py_track_end(struct py_track *t)
{
	close_to(t, 0, t->end);
}

struct tp {
	struct jw *j;
	uint64_t t0;
	const struct pystacks *m;
	struct recording *r;
	pid_t pid, tid;
	struct py_track tr;
	long spans, unnamed;
};

static void frame_label(const struct pystacks *m, int key, char *buf, size_t len)
{
	if (key == PY_KEY_OUTER)
		snprintf(buf, len, "(outer frames not read)");
	else if (key < PY_KEY_OUTER)
		snprintf(buf, len, "(%d frames not read)", -(key + 2));
	else
		report_fn_label(buf, len, m, key);
}

static void frame_event(void *ctx, int key, uint64_t ts, bool begin)
{
	struct tp *w = ctx;
	char label[PY_NAME_LEN + PY_FILE_LEN + 32];

	frame_label(w->m, key, label, sizeof(label));
	trace_event(w->j, begin ? "B" : "E", NULL, label, "python", w->pid, PY_TID(w->tid));
	jw_float_field(w->j, "ts", ((double)ts - (double)w->t0) / 1e3, 3);
	jw_end_object(w->j);
}

static void thread_start(struct tp *w, pid_t pid, pid_t tid)
{
	const char *comm = trace_thread_comm(w->r, pid, tid);
	char buf[TB_COMM_LEN + 16];

	py_track_end(&w->tr);
	w->pid = pid;
	w->tid = tid;
	w->tr.nopen = 0;
	w->tr.end = 0;
	snprintf(buf, sizeof(buf), "%s python", comm ? comm : "");
	trace_meta_name(w->j, "thread_name", pid, PY_TID(tid), buf);
}

/* An interval off a CPU (sample 0) or a sample at end (1), a thread's in time order. */
static void span_row(sqlite3_stmt *st, void *arg)
{
	struct tp *w = arg;
	pid_t tid = sqlite3_column_int(st, 0), pid = sqlite3_column_int(st, 1);
	int64_t start = sqlite3_column_int64(st, 2), end = sqlite3_column_int64(st, 3);
	int s = pystacks_find(w->m, pid, (uint64_t)sqlite3_column_int64(st, 4));
	int keys[PY_KEYS_MAX], n;

	if (tid != w->tid || pid != w->pid)
		thread_start(w, pid, tid);
	if (s < 0) {
		w->unnamed++;
		return;
	}
	if (sqlite3_column_int(st, 5))	/* a sample: start is the time it charged */
		start = end > start ? end - start : 0;
	n = py_track_keys(&w->m->st[s], keys);
	/* py_track_span drops a span that ends where it starts, or before */
	py_track_span(&w->tr, start > 0 ? (uint64_t)start : 0, end > 0 ? (uint64_t)end : 0,
		      keys, n);
	w->spans++;
}

int trace_py_tracks(struct jw *j, struct recording *r, uint64_t t0, long *spans,
		    long *unnamed, bool *has, char *err, size_t errlen)
{
	struct tp w = { .j = j, .t0 = t0, .m = ses_py(&r->ses), .r = r };
	bool samples;

	*spans = *unnamed = 0;
	*has = false;
	if (trace_has_table(r, "py_samples", &samples, err, errlen))
		return -1;
	if (!samples || !w.m)
		return 0;
	*has = true;
	w.tr = (struct py_track){ .gap_ns = PY_GAP_PERIODS * w.m->period_ns,
				  .frame = frame_event, .ctx = &w };
	/*
	 * In time order (the last column): a sample by its own time, its start
	 * column the time it charged (span_row makes it a start); at one time,
	 * a sample (the run it ends) before the interval off a CPU it begins.
	 */
	if (rec_query(r, "SELECT tid, pid, start_ns, end_ns, stack, 0, start_ns FROM states "
		      "WHERE stack IS NOT NULL UNION ALL "
		      "SELECT tid, pid, ns, ts_ns, stack, 1, ts_ns FROM py_samples "
		      "ORDER BY 2, 1, 7, 6 DESC", span_row, &w, err, errlen))
		return -1;
	py_track_end(&w.tr);
	*spans = w.spans;
	*unnamed = w.unnamed;
	return 0;
}
