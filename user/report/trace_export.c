// SPDX-License-Identifier: BSD-3-Clause
/*
 * A recording as a Chrome trace (the JSON trace-event format that Perfetto
 * and chrome://tracing open): a track per thread with its states as
 * complete events named by category, the epochs and steps on a track of
 * their own (process 0, which no traced process can be), and a counter
 * track per process: its category shares at each flush, and a phase
 * track beside each thread that ran PyTorch's phases: its spans as the
 * phase table resolved them (phase_spans.h), and beside it a track per
 * depth of its record_function brackets of no phase (schema 13), and a
 * track of its Python stacks' frames (--functions, schema 14: trace_py.c).
 * Times are microseconds from the recording's start.
 */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "json_writer.h"
#include "report.h"
#include "trace_gpu.h"
#include "trace_events.h"
#include "trace_py.h"

#define MARK_PID 0
#define EPOCH_TID 1
#define STEP_TID 2
/* A thread's phase track: beside its own, a tid no thread has. */
#define PHASE_TID(tid) ((int)((unsigned int)(tid) | 0x40000000u))
/* Its record_function brackets' tracks, one per depth (tids are under 2^22). */
#define SCOPE_TID(tid, depth) \
	((int)((unsigned int)(tid) | 0x20000000u | (unsigned int)(depth) << 24))
#define SCOPE_DEPTHS 8

/*
 * A complete event held back until the next one of its track is known:
 * tracks tile (a state ends where the next begins), and a viewer that
 * adds dur to ts in doubles can find the end a hair past the next start.
 * speedscope then takes the next slice for a child of this one and every
 * track becomes a staircase; equal times are no better (it opens the next
 * before it closes this one). So each slice ends strictly before the next
 * one's start as a reader parses them, and a state that only continues the
 * one before it (the same name and arguments) is merged into it.
 */
struct tw_slice {
	bool held;
	int pid, tid;
	uint64_t start, end;
	const char *name, *cat;
	const char *arg_name, *arg;	/* one string argument, or NULL */
	/*
	 * States merge; phase spans do not: the last one is the trace's own
	 * (the time after the last bracket, docs/phases.md), kept apart even
	 * when the phase before it is the same.
	 */
	bool merge;
};

/* The thread whose phase events are being replayed. */
struct tw_phases {
	pid_t pid, tid;
	struct ph_spans sp;
	long spans;
	uint64_t dropped;	/* counters.phase_events_dropped */
	bool has;		/* the recording has phase_events */
};

/* A record_function bracket of no phase, from its open to its close. */
struct tw_scope {
	int depth;
	uint64_t start, end;
	char name[200];
};

/* The thread whose brackets are being paired (schema 13). */
struct tw_scopes {
	pid_t pid, tid;
	struct tw_scope open[SCOPE_DEPTHS];
	bool is_open[SCOPE_DEPTHS];
	struct tw_scope *done;
	int ndone, cap;
	long slices;
	uint64_t dropped;	/* counters.scopes_dropped */
	bool has;		/* the recording has scopes */
};

struct tw {
	struct jw j;
	uint64_t t0;
	struct tw_slice held;	/* states, epochs, phases: one track at a time */
	/* The held slice's track, and its first ts as written (a viewer's rebase: slice_dur) */
	pid_t track_pid, track_tid;
	double track_first;
	long merged;		/* slices merged into the one before them */
	long states;
	long gpu_rows;		/* the GPU's readings (trace_gpu.c) */
	const struct recording *r;
	struct tw_phases ph;
	struct tw_scopes sc;
	long py_spans, py_unnamed;	/* trace_py.c */
	bool py_has;
};

static double us(const struct tw *w, uint64_t ns)
{
	return ((double)ns - (double)w->t0) / 1e3;
}

/* v as a reader gets it back from the 3 decimals written. */
static double printed(double v)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.3f", v);
	return strtod(buf, NULL);
}

/*
 * The duration to write for a slice from start to end, next being the
 * start of the slice after it on its track (0: none), in doubles as
 * speedscope adds them: the track's ts less its first one, plus dur. Its
 * end is then before next's ts, a nanosecond short at most, and not past
 * end's ts: a phase span the replay resolves later may start there, after
 * next. Else 3.0 + 0.1 > 3.1: speedscope ends the slice after the next one
 * began, and refuses the track.
 */
static double slice_dur(const struct tw *w, uint64_t start, uint64_t end, uint64_t next)
{
	double f = w->track_first, ts = printed(us(w, start)) - f;
	double nx = printed(us(w, next)) - f, e = printed(us(w, end)) - f;
	uint64_t d = end > start ? end - start : 0;

	if (next && d > (next > start ? next - start : 0))
		d = next > start ? next - start : 0;
	/* a few times at most: the error is in the last bits */
	while (next && d && ts + printed(d / 1e3) >= nx)
		d--;
	while (d && ts + printed(d / 1e3) > e)
		d--;
	return d / 1e3;
}

/*
 * The first ts of h's track as written, which a viewer subtracts: the
 * earliest of its slices so far (states come in time order, a thread's
 * phase spans from its setup on).
 */
static void track_of(struct tw *w, const struct tw_slice *h)
{
	double ts = printed(us(w, h->start));

	if (h->pid != w->track_pid || h->tid != w->track_tid || ts < w->track_first)
		w->track_first = ts;
	w->track_pid = h->pid;
	w->track_tid = h->tid;
}

static void event(struct tw *w, const char *ph, const char *scope, const char *name,
		  const char *cat, int pid, int tid)
{
	trace_event(&w->j, ph, scope, name, cat, pid, tid);
}

static void meta_name(struct tw *w, const char *what, int pid, int tid, const char *name)
{
	trace_meta_name(&w->j, what, pid, tid, name);
}

/* The held slice out, ending before next (the start of the one after it; 0: none). */
static void slice_flush(struct tw *w, uint64_t next)
{
	struct tw_slice *h = &w->held;

	if (!h->held)
		return;
	track_of(w, h);
	event(w, "X", NULL, h->name, h->cat, h->pid, h->tid);
	jw_float_field(&w->j, "ts", us(w, h->start), 3);
	jw_float_field(&w->j, "dur", slice_dur(w, h->start, h->end, next), 3);
	if (h->arg_name) {
		jw_name(&w->j, "args");
		jw_object(&w->j);
		jw_string_field(&w->j, h->arg_name, h->arg);
		jw_end_object(&w->j);
	}
	jw_end_object(&w->j);
	h->held = false;
}

/* A slice of a track, in time order: held until the next one of its track is known. */
static void slice(struct tw *w, const struct tw_slice *s)
{
	struct tw_slice *h = &w->held;
	bool same_track = h->held && h->pid == s->pid && h->tid == s->tid;

	if (same_track && s->merge && h->end == s->start && h->name == s->name &&
	    h->cat == s->cat && h->arg == s->arg) {
		h->end = s->end;	/* names are static strings: equal pointers, equal text */
		w->merged++;
		return;
	}
	/*
	 * Phase spans come as the replay resolves them, not always in time
	 * order: only a later one bounds the held one.
	 */
	slice_flush(w, same_track && s->start >= h->start ? s->start : 0);
	*h = *s;
	h->held = true;
}

static void names(struct tw *w, const struct job *job)
{
	char buf[64];

	meta_name(w, "process_name", MARK_PID, MARK_PID, "trainbpf markers");
	meta_name(w, "thread_name", MARK_PID, EPOCH_TID, "epochs");
	meta_name(w, "thread_name", MARK_PID, STEP_TID, "steps");
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		if (p->folded)
			continue;	/* a trace is read unfolded: rows have no track */
		snprintf(buf, sizeof(buf), "%s (%s)", p->comm, role_name(p->role));
		meta_name(w, "process_name", p->pid, p->pid, buf);
		for (int j = 0; j < p->nthreads; j++)
			meta_name(w, "thread_name", p->pid, p->threads[j].tid,
				  p->threads[j].comm);
	}
}

static const char *cat_name(int64_t c)
{
	return c >= 0 && c < TB_NCAT ? tb_cat_names[c] : "unknown";
}

static void state_row(sqlite3_stmt *st, void *arg)
{
	struct tw *w = arg;
	int64_t start = sqlite3_column_int64(st, 2), end = sqlite3_column_int64(st, 3);

	slice(w, &(struct tw_slice){
		.pid = sqlite3_column_int(st, 1), .tid = sqlite3_column_int(st, 0),
		.start = start > 0 ? start : 0, .end = end > start ? end : start,
		.name = cat_name(sqlite3_column_int64(st, 4)), .cat = "state",
		.arg_name = "critical_path", .arg = cat_name(sqlite3_column_int64(st, 5)),
		.merge = true });
	w->states++;
}

/* Each thread's states, a track at a time (the lookahead needs them in order). */
static int state_tracks(struct tw *w, struct recording *r, char *err, size_t errlen)
{
	if (rec_query(r, "SELECT tid, pid, start_ns, end_ns, cat, cp_cat FROM states "
		      "ORDER BY pid, tid, start_ns, rowid", state_row, w, err, errlen))
		return -1;
	slice_flush(w, 0);
	return 0;
}

/* Shares of one process's thread time in one flush, in percent. */
static void counter_row(sqlite3_stmt *st, void *arg)
{
	struct tw *w = arg;
	int64_t v[TB_NCAT], total = 0;

	for (int c = 0; c < TB_NCAT; c++) {
		v[c] = sqlite3_column_int64(st, 2 + c);
		v[c] = v[c] > 0 ? v[c] : 0;
		total += v[c];
	}
	if (total <= 0)
		return;
	event(w, "C", NULL, "category share %", NULL, sqlite3_column_int(st, 0),
	      sqlite3_column_int(st, 0));
	jw_float_field(&w->j, "ts", us(w, (uint64_t)sqlite3_column_int64(st, 1)), 3);
	jw_name(&w->j, "args");
	jw_object(&w->j);
	for (int c = 0; c < TB_NCAT; c++)
		jw_float_field(&w->j, tb_cat_names[c], 100.0 * v[c] / total, 2);
	jw_end_object(&w->j);
	jw_end_object(&w->j);
}

static void epoch_events(struct tw *w, const struct epochs *ep)
{
	enum ep_source s = epochs_source(ep);
	char name[32];

	for (int i = 0; s != EP_NSRC && i < ep->src[s].n; i++) {
		const struct epoch *e = &ep->src[s].list[i];

		snprintf(name, sizeof(name), "epoch %ld", e->label);
		event(w, "X", NULL, name, "epoch", MARK_PID, EPOCH_TID);
		jw_float_field(&w->j, "ts", us(w, e->start), 3);
		jw_float_field(&w->j, "dur", slice_dur(w, e->start, e->end, i + 1 <
			       ep->src[s].n ? ep->src[s].list[i + 1].start : 0), 3);
		jw_name(&w->j, "args");
		jw_object(&w->j);
		jw_string_field(&w->j, "source", epochs_source_name(s));
		jw_bool_field(&w->j, "complete", e->complete);
		jw_bool_field(&w->j, "late_start", e->late_start);
		jw_end_object(&w->j);
		jw_end_object(&w->j);
		event(w, "i", "g", name, "epoch", MARK_PID, EPOCH_TID);
		jw_float_field(&w->j, "ts", us(w, e->start), 3);
		jw_end_object(&w->j);
	}
}

static void phase_span(void *arg, const struct ph_span *s)
{
	struct tw *w = arg;

	slice(w, &(struct tw_slice){ .pid = w->ph.pid, .tid = PHASE_TID(w->ph.tid),
				     .start = s->start, .end = s->end,
				     .name = ph_names[s->phase], .cat = "phase" });
	w->ph.spans++;
}

/* When the thread's phase track ends: the thread's end, else the recording's. */
static uint64_t thread_end(const struct recording *r, pid_t pid, pid_t tid)
{
	const struct proc_rec *p = job_proc_const(&r->ses.job, pid);

	for (int j = 0; p && j < p->nthreads; j++)
		if (p->threads[j].tid == tid && p->threads[j].end_ns)
			return p->threads[j].end_ns;
	return r->end_ns;
}

/* The thread's steps as the table has them (its setup and teardown), or NULL. */
static const struct ph_thread *table_thread(const struct tw *w)
{
	return ses_phase_thread(&w->r->ses, w->ph.tid);
}

/*
 * The thread replayed so far: its open span and what is pending, out; its
 * teardown, where the recording has one (schema 8), from its last event on
 * (before: the last span ran to the thread's end).
 */
static void phase_thread_end(struct tw *w)
{
	const struct ph_thread *pt = table_thread(w);
	uint64_t end, last = w->ph.sp.since;

	if (!w->ph.tid)
		return;
	end = thread_end(w->r, w->ph.pid, w->ph.tid);
	if (!pt || !pt->ends_ns[1] || !last || last >= end) {
		ph_spans_end(&w->ph.sp, end, phase_span, w);
		return;
	}
	ph_spans_end(&w->ph.sp, last, phase_span, w);
	phase_span(w, &(struct ph_span){ .start = last, .end = end, .phase = PH_TEARDOWN });
}

/* Its setup, where the recording has one: the time before its first event. */
static void phase_thread_setup(struct tw *w, uint64_t first)
{
	const struct ph_thread *pt = table_thread(w);

	if (pt && pt->ends_ns[0] && pt->ends_ns[0] < first)
		phase_span(w, &(struct ph_span){ .start = first - pt->ends_ns[0], .end = first,
						 .phase = PH_SETUP });
}

static void phase_thread_start(struct tw *w, pid_t pid, pid_t tid)
{
	const char *comm = trace_thread_comm(w->r, pid, tid);
	char buf[TB_COMM_LEN + 16] = "phases";

	memset(&w->ph.sp, 0, sizeof(w->ph.sp));
	w->ph.pid = pid;
	w->ph.tid = tid;
	if (comm)
		snprintf(buf, sizeof(buf), "%s phases", comm);
	meta_name(w, "thread_name", pid, PHASE_TID(tid), buf);
}

static void phase_row(sqlite3_stmt *st, void *arg)
{
	struct tw *w = arg;
	struct tb_phase_event e = {
		.tid = sqlite3_column_int(st, 0), .pid = sqlite3_column_int(st, 1),
		.ts = (uint64_t)sqlite3_column_int64(st, 2),
		.phase = sqlite3_column_int(st, 3), .resolved = sqlite3_column_int(st, 4),
	};

	if ((pid_t)e.tid != w->ph.tid || (pid_t)e.pid != w->ph.pid) {
		phase_thread_end(w);
		phase_thread_start(w, e.pid, e.tid);
		phase_thread_setup(w, e.ts);
	}
	ph_spans_event(&w->ph.sp, &e, phase_span, w);
}

static void count_row(sqlite3_stmt *st, void *arg)
{
	*(uint64_t *)arg = (uint64_t)sqlite3_column_int64(st, 0);
}

/* Phase spans, a thread at a time, if the recording has them. */
static int phase_tracks(struct tw *w, struct recording *r, char *err, size_t errlen)
{
	if (trace_has_table(r, "phase_events", &w->ph.has, err, errlen))
		return -1;
	if (!w->ph.has)
		return 0;
	if (rec_query(r, "SELECT value FROM counters WHERE key = 'phase_events_dropped'",
		      count_row, &w->ph.dropped, err, errlen) ||
	    rec_query(r, "SELECT tid, pid, ts_ns, phase, resolved FROM phase_events "
		      "ORDER BY pid, tid, ts_ns, rowid", phase_row, w, err, errlen))
		return -1;
	phase_thread_end(w);
	slice_flush(w, 0);
	return 0;
}

static int by_depth_start(const void *a, const void *b)
{
	const struct tw_scope *x = a, *y = b;

	if (x->depth != y->depth)
		return x->depth - y->depth;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The bracket open at depth d ends at ts (kept for its track; dropped if out of memory). */
static void scope_close(struct tw_scopes *sc, int d, uint64_t ts)
{
	struct tw_scope *o = &sc->open[d];

	if (!sc->is_open[d])
		return;
	sc->is_open[d] = false;
	if (tb_grow_ptr((void **)&sc->done, &sc->cap, sc->ndone + 1, sizeof(*sc->done)))
		return;
	o->end = ts > o->start ? ts : o->start;
	sc->done[sc->ndone++] = *o;
}

/* The thread's brackets out, a track per depth, each in time order (they tile). */
static void scope_thread_end(struct tw *w)
{
	struct tw_scopes *sc = &w->sc;
	char buf[TB_COMM_LEN + 40];
	const char *comm;
	uint64_t end;
	int last = -1;

	if (!sc->tid)
		return;
	/* Still open at the end: to the thread's end. */
	end = thread_end(w->r, sc->pid, sc->tid);
	for (int d = 0; d < SCOPE_DEPTHS; d++)
		scope_close(sc, d, end);
	comm = trace_thread_comm(w->r, sc->pid, sc->tid);
	comm = comm ? comm : "";
	qsort(sc->done, sc->ndone, sizeof(*sc->done), by_depth_start);
	for (int i = 0; i < sc->ndone; i++) {
		const struct tw_scope *c = &sc->done[i];

		if (c->depth != last) {
			last = c->depth;
			/* depth among the thread's open brackets, PyTorch's of a phase too */
			if (last)
				snprintf(buf, sizeof(buf), "%s record_function depth %d", comm, last);
			else
				snprintf(buf, sizeof(buf), "%s record_function", comm);
			meta_name(w, "thread_name", sc->pid, SCOPE_TID(sc->tid, last), buf);
		}
		slice(w, &(struct tw_slice){ .pid = sc->pid, .tid = SCOPE_TID(sc->tid, c->depth),
					     .start = c->start, .end = c->end, .name = c->name,
					     .cat = "record_function" });
		sc->slices++;
	}
	/* Out before the names they point to are reused. */
	slice_flush(w, 0);
	sc->ndone = 0;
	sc->tid = 0;
}

/*
 * A bracket opened or closed at depth d: brackets nest, so whatever is
 * still open at d and deeper ended by then (a close lost: the ring
 * buffer full, a bracket left by an exception).
 */
static void scope_row(sqlite3_stmt *st, void *arg)
{
	struct tw *w = arg;
	struct tw_scopes *sc = &w->sc;
	pid_t tid = sqlite3_column_int(st, 0), pid = sqlite3_column_int(st, 1);
	uint64_t ts = (uint64_t)sqlite3_column_int64(st, 2);
	int open = sqlite3_column_int(st, 3), d = sqlite3_column_int(st, 4);
	const unsigned char *name = sqlite3_column_text(st, 5);
	struct tw_scope *o;

	if (tid != sc->tid || pid != sc->pid) {
		scope_thread_end(w);
		sc->pid = pid;
		sc->tid = tid;
	}
	if (d < 0 || d >= SCOPE_DEPTHS)
		return;
	for (int k = d; k < SCOPE_DEPTHS; k++)
		scope_close(sc, k, ts);
	if (!open)
		return;
	o = &sc->open[d];
	*o = (struct tw_scope){ .depth = d, .start = ts };
	snprintf(o->name, sizeof(o->name), "%s", name && *name ? (const char *)name : "(unnamed)");
	sc->is_open[d] = true;
}

/* record_function tracks, a thread at a time, if the recording has them (schema 13). */
static int scope_tracks(struct tw *w, struct recording *r, char *err, size_t errlen)
{
	int rc = 0;

	if (trace_has_table(r, "scopes", &w->sc.has, err, errlen))
		return -1;
	if (!w->sc.has)
		return 0;
	if (rec_query(r, "SELECT value FROM counters WHERE key = 'scopes_dropped'",
		      count_row, &w->sc.dropped, err, errlen) ||
	    rec_query(r, "SELECT tid, pid, ts_ns, open, depth, name FROM scopes "
		      "ORDER BY pid, tid, ts_ns, rowid", scope_row, w, err, errlen))
		rc = -1;
	if (!rc)
		scope_thread_end(w);
	free(w->sc.done);
	w->sc.done = NULL;
	return rc;
}

static void step_row(sqlite3_stmt *st, void *arg)
{
	struct tw *w = arg;
	const unsigned char *src = sqlite3_column_text(st, 0);

	event(w, "i", "t", "step", "step", MARK_PID, STEP_TID);
	jw_float_field(&w->j, "ts", us(w, (uint64_t)sqlite3_column_int64(st, 2)), 3);
	jw_name(&w->j, "args");
	jw_object(&w->j);
	jw_int_field(&w->j, "pid", sqlite3_column_int(st, 1));
	jw_string_field(&w->j, "source", src ? (const char *)src : "");
	jw_end_object(&w->j);
	jw_end_object(&w->j);
}

/* 1 if the recording had states, 0 if not, -1 on error. */
int trace_export(struct recording *r, FILE *f, char *err, size_t errlen)
{
	static const struct rec_filter all;
	struct tw w = { .t0 = 0, .r = r };

	if (rec_load(r, &all, err, errlen))
		return -1;
	w.t0 = r->start_ns;
	jw_init(&w.j, f);
	jw_object(&w.j);
	jw_string_field(&w.j, "displayTimeUnit", "ms");
	jw_name(&w.j, "traceEvents");
	jw_array_lines(&w.j);
	names(&w, &r->ses.job);
	epoch_events(&w, &r->ses.ep);
	if (rec_query(r, "SELECT source, pid, ts_ns FROM steps ORDER BY ts_ns", step_row, &w,
		      err, errlen) ||
	    rec_query(r, "SELECT pid, ts_ns, sum(cpu), sum(gpu_wait), sum(comm), "
		      "sum(data_wait), sum(io), sum(runqueue), sum(lock), sum(idle) FROM samples "
		      "GROUP BY pid, ts_ns ORDER BY pid, ts_ns", counter_row, &w, err, errlen) ||
	    state_tracks(&w, r, err, errlen) || phase_tracks(&w, r, err, errlen) ||
	    scope_tracks(&w, r, err, errlen) ||
	    trace_py_tracks(&w.j, r, w.t0, &w.py_spans, &w.py_unnamed, &w.py_has, err, errlen) ||
	    (w.gpu_rows = trace_gpu_tracks(&w.j, r, w.t0, err, errlen)) < 0)
		return -1;
	jw_end_array(&w.j);
	jw_name(&w.j, "otherData");
	jw_object(&w.j);
	jw_string_field(&w.j, "tool", "trainbpf");
	jw_string_field(&w.j, "version", TB_VERSION);
	jw_int_field(&w.j, "states", w.states);
	jw_int_field(&w.j, "slices_merged", w.merged);
	jw_uint_field(&w.j, "states_lost", r->states_lost);
	if (w.ph.has) {
		jw_int_field(&w.j, "phase_spans", w.ph.spans);
		jw_uint_field(&w.j, "phase_events_dropped", w.ph.dropped);
	}
	if (w.sc.has) {
		jw_int_field(&w.j, "record_function_slices", w.sc.slices);
		jw_uint_field(&w.j, "scopes_dropped", w.sc.dropped);
	}
	if (w.py_has) {
		jw_int_field(&w.j, "python_stack_spans", w.py_spans);
		jw_int_field(&w.j, "python_stack_spans_unnamed", w.py_unnamed);
	}
	if (r->ses.gu.state == GU_ACTIVE)
		jw_int_field(&w.j, "gpu_readings", w.gpu_rows);
	jw_end_object(&w.j);
	jw_end_object(&w.j);
	fputc('\n', f);
	return w.states > 0;
}
