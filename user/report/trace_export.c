// SPDX-License-Identifier: BSD-3-Clause
/*
 * A recording as a Chrome trace (the JSON trace-event format that Perfetto
 * and chrome://tracing open): a track per thread with its states as
 * complete events named by category, the epochs and steps on a track of
 * their own (process 0, which no traced process can be), and a counter
 * track per process: its category shares at each flush, and a phase
 * track beside each thread that ran PyTorch's phases: its spans as the
 * phase table resolved them (phase_spans.h). Times are microseconds from
 * the recording's start.
 */
#include <sqlite3.h>
#include <string.h>
#include "json_writer.h"
#include "report.h"
#include "trace_gpu.h"

#define MARK_PID 0
#define EPOCH_TID 1
#define STEP_TID 2
/* A thread's phase track: beside its own, a tid no thread has. */
#define PHASE_TID(tid) ((int)((unsigned int)(tid) | 0x40000000u))

/* The thread whose phase events are being replayed. */
struct tw_phases {
	pid_t pid, tid;
	struct ph_spans sp;
	long spans;
	uint64_t dropped;	/* counters.phase_events_dropped */
	bool has;		/* the recording has phase_events */
};

struct tw {
	struct jw j;
	uint64_t t0;
	long states;
	long gpu_rows;		/* the GPU's readings (trace_gpu.c) */
	const struct recording *r;
	struct tw_phases ph;
};

static double us(const struct tw *w, uint64_t ns)
{
	return ((double)ns - (double)w->t0) / 1e3;
}

/* The fields every event starts with. */
static void event(struct tw *w, const char *ph, const char *scope, const char *name,
		  const char *cat, int pid, int tid)
{
	jw_object(&w->j);
	jw_string_field(&w->j, "ph", ph);
	if (scope)
		jw_string_field(&w->j, "s", scope);
	jw_string_field(&w->j, "name", name);
	if (cat)
		jw_string_field(&w->j, "cat", cat);
	jw_int_field(&w->j, "pid", pid);
	jw_int_field(&w->j, "tid", tid);
}

static void meta_name(struct tw *w, const char *what, int pid, int tid, const char *name)
{
	event(w, "M", NULL, what, NULL, pid, tid);
	jw_int_field(&w->j, "ts", 0);
	jw_name(&w->j, "args");
	jw_object(&w->j);
	jw_string_field(&w->j, "name", name);
	jw_end_object(&w->j);
	jw_end_object(&w->j);
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

	event(w, "X", NULL, cat_name(sqlite3_column_int64(st, 4)), "state",
	      sqlite3_column_int(st, 1), sqlite3_column_int(st, 0));
	jw_float_field(&w->j, "ts", us(w, start > 0 ? start : 0), 3);
	jw_float_field(&w->j, "dur", end > start ? (end - start) / 1e3 : 0.0, 3);
	jw_name(&w->j, "args");
	jw_object(&w->j);
	jw_string_field(&w->j, "critical_path", cat_name(sqlite3_column_int64(st, 5)));
	jw_end_object(&w->j);
	jw_end_object(&w->j);
	w->states++;
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
		jw_float_field(&w->j, "dur", (e->end - e->start) / 1e3, 3);
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

	event(w, "X", NULL, ph_names[s->phase], "phase", w->ph.pid, PHASE_TID(w->ph.tid));
	jw_float_field(&w->j, "ts", us(w, s->start), 3);
	jw_float_field(&w->j, "dur", (s->end - s->start) / 1e3, 3);
	jw_end_object(&w->j);
	w->ph.spans++;
}

/* When the thread's phase track ends: the thread's end, else the recording's. */
static uint64_t thread_end(const struct recording *r, pid_t pid, pid_t tid)
{
	const struct proc_rec *p = job_proc_const(&r->job, pid);

	for (int j = 0; p && j < p->nthreads; j++)
		if (p->threads[j].tid == tid && p->threads[j].end_ns)
			return p->threads[j].end_ns;
	return r->end_ns;
}

/* The thread replayed so far: its open span and what is pending, out. */
static void phase_thread_end(struct tw *w)
{
	if (w->ph.tid)
		ph_spans_end(&w->ph.sp, thread_end(w->r, w->ph.pid, w->ph.tid), phase_span, w);
}

static void phase_thread_start(struct tw *w, pid_t pid, pid_t tid)
{
	const struct proc_rec *p = job_proc_const(&w->r->job, pid);
	char buf[TB_COMM_LEN + 16] = "phases";

	memset(&w->ph.sp, 0, sizeof(w->ph.sp));
	w->ph.pid = pid;
	w->ph.tid = tid;
	for (int j = 0; p && j < p->nthreads; j++)
		if (p->threads[j].tid == tid)
			snprintf(buf, sizeof(buf), "%s phases", p->threads[j].comm);
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
	uint64_t n = 0;

	if (rec_query(r, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
		      "name = 'phase_events'", count_row, &n, err, errlen))
		return -1;
	if (!n)
		return 0;
	w->ph.has = true;
	if (rec_query(r, "SELECT value FROM counters WHERE key = 'phase_events_dropped'",
		      count_row, &w->ph.dropped, err, errlen) ||
	    rec_query(r, "SELECT tid, pid, ts_ns, phase, resolved FROM phase_events "
		      "ORDER BY pid, tid, ts_ns, rowid", phase_row, w, err, errlen))
		return -1;
	phase_thread_end(w);
	return 0;
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
	names(&w, &r->job);
	epoch_events(&w, &r->ep);
	if (rec_query(r, "SELECT source, pid, ts_ns FROM steps ORDER BY ts_ns", step_row, &w,
		      err, errlen) ||
	    rec_query(r, "SELECT pid, ts_ns, sum(cpu), sum(gpu_wait), sum(comm), "
		      "sum(data_wait), sum(io), sum(runqueue), sum(lock), sum(idle) FROM samples "
		      "GROUP BY pid, ts_ns ORDER BY pid, ts_ns", counter_row, &w, err, errlen) ||
	    rec_query(r, "SELECT tid, pid, start_ns, end_ns, cat, cp_cat FROM states",
		      state_row, &w, err, errlen) ||
	    phase_tracks(&w, r, err, errlen) ||
	    (w.gpu_rows = trace_gpu_tracks(&w.j, r, w.t0, err, errlen)) < 0)
		return -1;
	jw_end_array(&w.j);
	jw_name(&w.j, "otherData");
	jw_object(&w.j);
	jw_string_field(&w.j, "tool", "trainbpf");
	jw_string_field(&w.j, "version", TB_VERSION);
	jw_int_field(&w.j, "states", w.states);
	jw_uint_field(&w.j, "states_lost", r->states_lost);
	if (w.ph.has) {
		jw_int_field(&w.j, "phase_spans", w.ph.spans);
		jw_uint_field(&w.j, "phase_events_dropped", w.ph.dropped);
	}
	if (r->gu.state == GU_ACTIVE)
		jw_int_field(&w.j, "gpu_readings", w.gpu_rows);
	jw_end_object(&w.j);
	jw_end_object(&w.j);
	fputc('\n', f);
	return w.states > 0;
}
