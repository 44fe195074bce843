// SPDX-License-Identifier: BSD-3-Clause
/*
 * A recording as a Chrome trace (the JSON trace-event format that Perfetto
 * and chrome://tracing open): a track per thread with its states as
 * complete events named by category, the epochs and steps on a track of
 * their own (process 0, which no traced process can be), and a counter
 * track per process: its category shares at each flush. Times are
 * microseconds from the recording's start.
 */
#include <sqlite3.h>
#include <string.h>
#include "cli_read.h"

#define MARK_PID 0
#define EPOCH_TID 1
#define STEP_TID 2

struct tw {
	FILE *f;
	uint64_t t0;
	long n;			/* events written: a comma before each but the first */
	long states;
};

static void sep(struct tw *w)
{
	fputs(w->n++ ? ",\n" : "\n", w->f);
}

static double us(const struct tw *w, uint64_t ns)
{
	return ((double)ns - (double)w->t0) / 1e3;
}

static void meta_name(struct tw *w, const char *what, int pid, int tid, const char *name)
{
	sep(w);
	fprintf(w->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":0,"
		"\"args\":{\"name\":", what, pid, tid);
	json_str(w->f, name);
	fputs("}}", w->f);
}

static void names(struct tw *w, const struct job *job)
{
	char buf[64];

	meta_name(w, "process_name", MARK_PID, MARK_PID, "trainbpf markers");
	meta_name(w, "thread_name", MARK_PID, EPOCH_TID, "epochs");
	meta_name(w, "thread_name", MARK_PID, STEP_TID, "steps");
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

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

	sep(w);
	fprintf(w->f, "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"state\",\"pid\":%d,\"tid\":%d,"
		"\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"critical_path\":\"%s\"}}",
		cat_name(sqlite3_column_int64(st, 4)), sqlite3_column_int(st, 1),
		sqlite3_column_int(st, 0), us(w, start > 0 ? start : 0),
		end > start ? (end - start) / 1e3 : 0.0, cat_name(sqlite3_column_int64(st, 5)));
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
	sep(w);
	fprintf(w->f, "{\"ph\":\"C\",\"name\":\"category share %%\",\"pid\":%d,\"tid\":%d,"
		"\"ts\":%.3f,\"args\":{", sqlite3_column_int(st, 0), sqlite3_column_int(st, 0),
		us(w, (uint64_t)sqlite3_column_int64(st, 1)));
	for (int c = 0; c < TB_NCAT; c++)
		fprintf(w->f, "%s\"%s\":%.2f", c ? "," : "", tb_cat_names[c], 100.0 * v[c] / total);
	fputs("}}", w->f);
}

static void epoch_events(struct tw *w, const struct epochs *ep)
{
	enum ep_source s = epochs_source(ep);

	for (int i = 0; s != EP_NSRC && i < ep->src[s].n; i++) {
		const struct epoch *e = &ep->src[s].list[i];

		sep(w);
		fprintf(w->f, "{\"ph\":\"X\",\"name\":\"epoch %ld\",\"cat\":\"epoch\",\"pid\":%d,"
			"\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"source\":\"%s\","
			"\"complete\":%s}}", e->label, MARK_PID, EPOCH_TID, us(w, e->start),
			(e->end - e->start) / 1e3, epochs_source_name(s),
			e->complete ? "true" : "false");
		sep(w);
		fprintf(w->f, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"epoch %ld\",\"cat\":\"epoch\","
			"\"pid\":%d,\"tid\":%d,\"ts\":%.3f}", e->label, MARK_PID, EPOCH_TID,
			us(w, e->start));
	}
}

static void step_row(sqlite3_stmt *st, void *arg)
{
	struct tw *w = arg;

	sep(w);
	fprintf(w->f, "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"step\",\"cat\":\"step\",\"pid\":%d,"
		"\"tid\":%d,\"ts\":%.3f,\"args\":{\"pid\":%d,\"source\":", MARK_PID, STEP_TID,
		us(w, (uint64_t)sqlite3_column_int64(st, 2)), sqlite3_column_int(st, 1));
	json_str(w->f, (const char *)(sqlite3_column_text(st, 0) ? sqlite3_column_text(st, 0)
						     : (const unsigned char *)""));
	fputs("}}", w->f);
}

/* 1 if the recording had states, 0 if not, -1 on error. */
int trace_export(struct recording *r, FILE *f, char *err, size_t errlen)
{
	static const struct rec_filter all;
	struct tw w = { .f = f };

	if (rec_load(r, &all, err, errlen))
		return -1;
	w.t0 = r->start_ns;
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
	names(&w, &r->job);
	epoch_events(&w, &r->ep);
	if (rec_query(r, "SELECT source, pid, ts_ns FROM steps ORDER BY ts_ns", step_row, &w,
		      err, errlen) ||
	    rec_query(r, "SELECT pid, ts_ns, sum(cpu), sum(gpu_wait), sum(comm), "
		      "sum(data_wait), sum(io), sum(runqueue), sum(lock), sum(idle) FROM samples "
		      "GROUP BY pid, ts_ns ORDER BY pid, ts_ns", counter_row, &w, err, errlen) ||
	    rec_query(r, "SELECT tid, pid, start_ns, end_ns, cat, cp_cat FROM states",
		      state_row, &w, err, errlen))
		return -1;
	fprintf(f, "\n],\"otherData\":{\"tool\":\"trainbpf\",\"version\":\"%s\","
		"\"states\":%ld,\"states_lost\":%llu}}\n", TB_VERSION, w.states,
		(unsigned long long)r->states_lost);
	return w.states > 0;
}
