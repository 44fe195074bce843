// SPDX-License-Identifier: BSD-3-Clause
/*
 * A recording back into struct job, epochs, steps, gpu and diag. Every
 * query checks every step: a truncated or corrupt file fails in the middle
 * of a table, and must end in one line, not in half a report.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "grow.h"
#include "recording_read.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

struct q {
	sqlite3_stmt *st;
	int rc;
};

static int q_open(struct recording *r, struct q *q, const char *sql, char *err, size_t errlen)
{
	q->st = NULL;
	q->rc = sqlite3_prepare_v2(r->db, sql, -1, &q->st, NULL);
	if (q->rc != SQLITE_OK)
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	return 0;
}

/* true while there is a row; q->rc tells DONE from an error afterwards. */
static bool q_row(struct q *q)
{
	q->rc = sqlite3_step(q->st);
	return q->rc == SQLITE_ROW;
}

static int q_close(struct recording *r, struct q *q, char *err, size_t errlen)
{
	int rc = rec_stmt_done(r, q->st, q->rc == SQLITE_OK ? SQLITE_DONE : q->rc, err, errlen);

	q->st = NULL;
	return rc;
}

static int64_t col_i64(struct q *q, int i)
{
	return sqlite3_column_int64(q->st, i);
}

static double col_double(struct q *q, int i)
{
	return sqlite3_column_double(q->st, i);
}

static bool col_null(struct q *q, int i)
{
	return sqlite3_column_type(q->st, i) == SQLITE_NULL;
}

static const char *col_str(struct q *q, int i)
{
	return rec_col_str(q->st, i);
}

static uint64_t col_ns(struct q *q, int i)
{
	return rec_col_u64(q->st, i);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p)
		abort();	/* as job.c: out of memory, nothing left to say */
	return p;
}

static int pragma_int(struct recording *r, const char *sql, int64_t *out,
		      char *err, size_t errlen)
{
	struct q q;

	if (q_open(r, &q, sql, err, errlen))
		return -1;
	*out = q_row(&q) ? col_i64(&q, 0) : 0;
	if (q.rc == SQLITE_ROW)
		q.rc = SQLITE_DONE;
	return q_close(r, &q, err, errlen);
}

static int check_header(struct recording *r, char *err, size_t errlen)
{
	int64_t app, ver;

	if (pragma_int(r, "PRAGMA application_id", &app, err, errlen) ||
	    pragma_int(r, "PRAGMA user_version", &ver, err, errlen))
		return -1;
	if (app != REC_APP_ID)
		return ERR("%s: not a trainbpf recording (SQLite application_id 0x%llx, want 0x%x)",
			   r->path, (unsigned long long)(uint32_t)app, REC_APP_ID);
	if (ver > REC_SCHEMA_VERSION)
		return ERR("%s: recorded by a newer trainbpf (schema %lld; this one reads up to %d)",
			   r->path, (long long)ver, REC_SCHEMA_VERSION);
	if (ver < 1)
		return ERR("%s: not a trainbpf recording (schema version %lld)", r->path, (long long)ver);
	r->version = (int)ver;
	/* Until phase_times of schema 4 say which storage waits were writes. */
	r->ses.job.wio_unknown = true;
	return 0;
}

int rec_open(struct recording *r, const char *path, char *err, size_t errlen)
{
	struct stat sb;

	memset(r, 0, sizeof(*r));
	session_init(&r->ses);
	r->path = path;
	if (stat(path, &sb))
		return ERR("cannot open %s: %s", path, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return ERR("cannot read %s: not a regular file", path);
	if (strlen(path) > 4000)
		return ERR("cannot open %s: path too long", path);
	if (rec_open_file(r, path, err, errlen))
		return -1;
	if (check_header(r, err, errlen)) {
		rec_close_file(r);
		return -1;
	}
	return 0;
}

/* ---- meta ---- */

static int load_meta(struct recording *r, char *err, size_t errlen)
{
	struct q q;
	bool have_start = false;

	if (q_open(r, &q, "SELECT key, value FROM meta", err, errlen))
		return -1;
	r->ses.ep.pass_ended = true;	/* recorded before it was kept: passes as they were */
	r->world_size = -1;
	while (q_row(&q)) {
		const char *k = col_str(&q, 0), *v = col_str(&q, 1);

		if (!strcmp(k, "start_mono_ns")) {
			r->start_ns = strtoull(v, NULL, 10);
			have_start = true;
		} else if (!strcmp(k, "start_unix_s")) {
			r->ses.job.window_start_unix = strtod(v, NULL);
		} else if (!strcmp(k, "end_mono_ns")) {
			r->end_ns = strtoull(v, NULL, 10);
		} else if (!strcmp(k, "complete")) {
			r->complete = !strcmp(v, "1");
		} else if (!strcmp(k, "states_lost")) {
			r->states_lost = strtoull(v, NULL, 10);
		} else if (!strcmp(k, "phases_source")) {
			/* a name this build does not know: the table says none */
			r->ses.phases.source = ph_source_find(v) < 0 ? PH_SRC_NONE : ph_source_find(v);
			r->has_phases = true;
		} else if (!strcmp(k, "phase_threads_over")) {
			r->ses.phases.threads_over = strtoull(v, NULL, 10);
		} else if (!strcmp(k, "job")) {
			snprintf(r->job_id, sizeof(r->job_id), "%s", v);
		} else if (!strcmp(k, "hostname")) {
			snprintf(r->host, sizeof(r->host), "%s", v);
		} else if (!strcmp(k, "command")) {
			snprintf(r->command, sizeof(r->command), "%s", v);
		} else if (!strcmp(k, "world_size")) {
			r->world_size = atoi(v);
		} else if (!strcmp(k, "launches")) {
			r->ses.gpu.launches = !strcmp(v, "1");	/* schema 2 */
		} else if (!strcmp(k, "steps_optim_multi")) {
			r->optim_multi = !strcmp(v, "1");
		} else if (!strcmp(k, "steps_optim_done_ns")) {
			r->optim_done = strtoull(v, NULL, 10);
		} else if (!strcmp(k, "steps_loop_done_ns")) {
			r->loop_done = strtoull(v, NULL, 10);
			r->has_loop_done = true;
		} else if (!strcmp(k, "epochs_pass_ended")) {
			r->ses.ep.pass_ended = !strcmp(v, "1");
		} else if (!strcmp(k, "epochs_wanted")) {
			double iv;

			if (epochs_parse_source(v, &r->ses.ep.want, &iv))
				r->ses.ep.want = EP_AUTO;
		}
	}
	if (q_close(r, &q, err, errlen))
		return -1;
	if (!have_start)
		return ERR("%s: incomplete recording: no start time in meta", r->path);
	return 0;
}

/* A recording cut short has no end time: its last flush is the end. */
static int find_end(struct recording *r, char *err, size_t errlen)
{
	int64_t last;

	if (r->end_ns)
		return 0;
	if (pragma_int(r, "SELECT max(ts_ns) FROM samples", &last, err, errlen))
		return -1;
	r->end_ns = last > 0 && (uint64_t)last > r->start_ns ? (uint64_t)last : r->start_ns;
	return 0;
}

/* ---- processes and threads ---- */

static enum tb_role role_from(const char *s)
{
	if (!strcmp(s, "trainer"))
		return TB_ROLE_TRAINER;
	if (!strcmp(s, "worker"))
		return TB_ROLE_WORKER;
	return TB_ROLE_OTHER;
}

/*
 * The live tool's order is the order the writer met processes and threads
 * in, which is their rowid order (an UPSERT keeps a row's rowid); schema 1
 * is read in the order of their start, as it always was.
 */
static const char *live_order(const struct recording *r, const char *v1)
{
	return r->version >= 2 ? "rowid" : v1;
}

static int load_procs(struct recording *r, const struct rec_filter *flt,
		      char *err, size_t errlen)
{
	char sql[256];
	struct q q;

	snprintf(sql, sizeof(sql), "SELECT pid, ppid, comm, exe, role, flags, root, start_ns, "
		 "end_ns, exit_code, rank FROM processes ORDER BY %s",
		 live_order(r, "start_ns, pid"));
	if (q_open(r, &q, sql, err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t pid = (pid_t)col_i64(&q, 0);
		struct proc_rec *p;

		if (flt->pid && pid != flt->pid)
			continue;
		p = job_add_proc(&r->ses.job, pid, (pid_t)col_i64(&q, 1), col_str(&q, 2),
				 col_ns(&q, 7));
		strncpy(p->exe, col_str(&q, 3), sizeof(p->exe) - 1);
		p->role = role_from(col_str(&q, 4));
		p->flags = (unsigned int)col_i64(&q, 5);
		p->root = col_i64(&q, 6) != 0;
		p->end_ns = col_ns(&q, 8);
		p->exit_code = (int)col_i64(&q, 9);
		/* The rank it had (NULL: none known), for merged reports. */
		if (sqlite3_column_type(q.st, 10) != SQLITE_NULL)
			p->labels.rank = (int)col_i64(&q, 10);
	}
	return q_close(r, &q, err, errlen);
}

static int load_threads(struct recording *r, const struct rec_filter *flt,
			char *err, size_t errlen)
{
	char sql[256];
	struct q q;

	snprintf(sql, sizeof(sql), "SELECT tid, pid, comm, start_ns, end_ns FROM threads "
		 "ORDER BY %s", live_order(r, "start_ns, tid"));
	if (q_open(r, &q, sql, err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t pid = (pid_t)col_i64(&q, 1);
		uint64_t start = col_ns(&q, 3);
		struct proc_rec *p;
		struct thread_rec *t;

		if (flt->pid && pid != flt->pid)
			continue;
		p = job_proc_at(&r->ses.job, pid, start);
		if (!p)	/* a thread whose process row is missing: keep its time */
			p = job_add_proc(&r->ses.job, pid, 0, col_str(&q, 2), start);
		t = job_add_thread(p, (pid_t)col_i64(&q, 0), col_str(&q, 2), start);
		t->end_ns = col_ns(&q, 4);
	}
	return q_close(r, &q, err, errlen);
}

/* ---- samples: per-thread totals, per-epoch per-process deltas ---- */

struct tref {
	pid_t tid;
	uint64_t start;
	int proc;
	struct thread_rec *t;
};

static int tref_cmp(const void *a, const void *b)
{
	const struct tref *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Threads by (tid, start): a flush row finds its thread in log time. */
static struct tref *thread_index(struct job *job, int *n)
{
	struct tref *ix;
	int k = 0;

	*n = 0;
	for (int i = 0; i < job->nprocs; i++)
		*n += job->procs[i].nthreads;
	ix = xcalloc(*n, sizeof(*ix));
	for (int i = 0; i < job->nprocs; i++)
		for (int j = 0; j < job->procs[i].nthreads; j++)
			ix[k++] = (struct tref){ job->procs[i].threads[j].tid,
						 job->procs[i].threads[j].start_ns, i,
						 &job->procs[i].threads[j] };
	qsort(ix, *n, sizeof(*ix), tref_cmp);
	return ix;
}

/* The thread tid that had started by ts, else its first one; NULL if none. */
static const struct tref *thread_at(const struct tref *ix, int n, pid_t tid, uint64_t ts)
{
	int lo = 0, hi = n, best = -1;

	while (lo < hi) {	/* first entry with tid >= wanted */
		int mid = (lo + hi) / 2;

		if (ix[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int i = lo; i < n && ix[i].tid == tid; i++) {
		if (best < 0 || ix[i].start <= ts)
			best = i;
		if (ix[i].start > ts)
			break;
	}
	return best < 0 ? NULL : &ix[best];
}

/*
 * Per epoch of the reported source, per process: sums of its flushes, as
 * rows of the processes that have some (a long recording has many
 * processes, each in few epochs).
 */
struct ep_row {
	int proc;
	struct ep_proc d;
};

struct ep_acc {
	struct epoch *list;
	int n;
	struct ep_row **rows;	/* [epoch]: its rows, in the order met */
	int *nrows, *caprows;
	int *last_ep, *last_row;	/* [proc]: where its last row went */
	int nprocs;
};

/* The epoch whose (start, end] holds ts: a flush ends the time it sums. */
static int epoch_of(const struct ep_acc *a, uint64_t ts)
{
	int lo = 0, hi = a->n;

	while (lo < hi) {	/* first epoch starting at or after ts */
		int mid = (lo + hi) / 2;

		if (a->list[mid].start < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || ts > a->list[lo - 1].end)
		return -1;
	return lo - 1;
}

/* proc's row in epoch e: the last one it had, or a new one (merged at the end). */
static struct ep_proc *acc_row(struct ep_acc *a, int e, int proc)
{
	struct ep_row *r;

	if (a->last_ep[proc] == e)
		return &a->rows[e][a->last_row[proc]].d;
	if (a->nrows[e] == a->caprows[e]) {
		a->caprows[e] = a->caprows[e] ? 2 * a->caprows[e] : 8;
		a->rows[e] = realloc(a->rows[e], a->caprows[e] * sizeof(**a->rows));
		if (!a->rows[e])
			abort();	/* as job.c: out of memory, nothing left to say */
	}
	r = &a->rows[e][a->nrows[e]];
	memset(r, 0, sizeof(*r));
	r->proc = proc;
	a->last_ep[proc] = e;
	a->last_row[proc] = a->nrows[e]++;
	return &r->d;
}

static void add_epoch(struct ep_acc *a, const struct tref *t, bool is_main, uint64_t ts,
		      const int64_t own[TB_NCAT], const int64_t cp[TB_NCAT])
{
	int e = epoch_of(a, ts);
	struct ep_proc *p;

	if (e < 0)
		return;
	p = acc_row(a, e, t->proc);
	for (int c = 0; c < TB_NCAT; c++) {
		p->own[c] += own[c];
		if (is_main) {
			p->main_own[c] += own[c];
			p->main_cp[c] += cp[c];
		}
	}
}

static void add_sample(struct thread_rec *t, const int64_t own[TB_NCAT],
		       const int64_t cp[TB_NCAT], const int64_t extra[3])
{
	for (int c = 0; c < TB_NCAT; c++) {
		t->own[c] += own[c];
		t->cp[c] += cp[c];
	}
	t->io_rbytes += extra[0];
	t->io_wbytes += extra[1];
	t->nswitch += extra[2];
}

/*
 * A category's delta can be negative: a blocked thread's open interval is
 * counted as what it looks like at a flush (idle) and may close as
 * another category (data_wait); the next row moves the time across, and
 * the sum is the thread's totals to the nanosecond. Bytes and switches
 * only grow: a negative one is bad data and counts as nothing.
 */
static void sample_cols(struct q *q, int64_t own[TB_NCAT], int64_t cp[TB_NCAT],
			int64_t extra[3])
{
	for (int c = 0; c < TB_NCAT; c++) {
		own[c] = col_i64(q, 3 + c);
		cp[c] = col_i64(q, 3 + TB_NCAT + c);
	}
	for (int k = 0; k < 3; k++) {
		extra[k] = col_i64(q, 3 + 2 * TB_NCAT + k);
		extra[k] = extra[k] > 0 ? extra[k] : 0;
	}
}

static int load_samples(struct recording *r, struct ep_acc *acc, uint64_t ws,
			uint64_t we, bool windowed, char *err, size_t errlen)
{
	struct job *job = &r->ses.job;
	int nix, rc = -1;
	struct tref *ix = thread_index(job, &nix);
	struct q q;

	if (q_open(r, &q, "SELECT ts_ns, tid, pid, cpu, gpu_wait, comm, data_wait, io, "
		   "runqueue, lock, idle, cp_cpu, cp_gpu_wait, cp_comm, cp_data_wait, cp_io, "
		   "cp_runqueue, cp_lock, cp_idle, io_rbytes, io_wbytes, nswitch FROM samples",
		   err, errlen))
		goto cleanup;
	while (q_row(&q)) {
		uint64_t ts = col_ns(&q, 0);
		int64_t own[TB_NCAT], cp[TB_NCAT], extra[3];
		const struct tref *t;

		if (windowed && (ts <= ws || ts > we))
			continue;
		t = thread_at(ix, nix, (pid_t)col_i64(&q, 1), ts);
		/* Not in threads (or filtered out by --pid): not reported. */
		if (!t || job->procs[t->proc].pid != (pid_t)col_i64(&q, 2))
			continue;
		sample_cols(&q, own, cp, extra);
		add_sample(t->t, own, cp, extra);
		add_epoch(acc, t, t->tid == job->procs[t->proc].pid, ts, own, cp);
	}
	rc = q_close(r, &q, err, errlen);
cleanup:
	free(ix);
	return rc;
}

/* ---- epochs ---- */

static enum ep_source source_from(const char *s)
{
	for (int i = 0; i < EP_NSRC; i++)
		if (!strcmp(s, epochs_source_name(i)))
			return i;
	return EP_NSRC;
}

/* Schema 2: each epoch with the deltas and steps the live tool closed it with. */
#define CATS(p) p "cpu, " p "gpu_wait, " p "comm, " p "data_wait, " p "io, " \
	p "runqueue, " p "lock, " p "idle"
static bool has_column(struct recording *r, const char *table, const char *column);

#define EPOCHS_SQL(who)								\
	"SELECT e.rowid, e.source, e.label, e.start_ns, e.end_ns, e.complete, "	\
	"e.step_count, e.step_total_ms, e.step_min_ms, e.step_max_ms, e.step_sum_sq, " \
	"e.step_syncs, e.step_source, p.pid, p.start_ns, p.end_ns, "		\
	CATS("p.") ", " CATS("p.cp_") ", " CATS("p.main_") ", " who " "	\
	"FROM epochs e LEFT JOIN epoch_procs p ON p.source = e.source AND p.seq = e.seq " \
	"ORDER BY e.source, e.seq, e.rowid, p.rowid"
/*
 * epoch_procs' ppid, role and folded came with the bounds, epochs'
 * late_start and phase times (in enum ph_shown order) after them, what the
 * phases were made of last: older files lack them.
 */
#define EPOCH_PH "e.ph_data, e.ph_forward, e.ph_backward, e.ph_optimizer, " \
	"e.ph_checkpoint, e.ph_validation, e.ph_communication, e.ph_other"
/* Before schema 7: no communication phase. */
#define EPOCH_PH5 "e.ph_data, e.ph_forward, e.ph_backward, e.ph_optimizer, " \
	"e.ph_checkpoint, e.ph_validation, 0, e.ph_other"
#define NO_PH "0, 0, 0, 0, 0, 0, 0, 0"
_Static_assert(PH_NLOOP == 8, "EPOCH_PH names every phase of the loop");
static const char epochs_sql[] = EPOCHS_SQL("p.ppid, p.role, p.folded, e.late_start, "
					    EPOCH_PH ", e.ph_critical_path");
static const char epochs_sql_5[] = EPOCHS_SQL("p.ppid, p.role, p.folded, e.late_start, "
					      EPOCH_PH5 ", e.ph_critical_path");
static const char epochs_sql_ph[] = EPOCHS_SQL("p.ppid, p.role, p.folded, e.late_start, "
					       EPOCH_PH5 ", NULL");
static const char epochs_sql_bounds[] = EPOCHS_SQL("p.ppid, p.role, p.folded, 0, " NO_PH ", NULL");
static const char epochs_sql_old[] = EPOCHS_SQL("NULL, NULL, NULL, 0, " NO_PH ", NULL");
enum { EC_PID = 13, EC_OWN = 16, EC_CP = EC_OWN + TB_NCAT, EC_MAIN = EC_CP + TB_NCAT,
       EC_WHO = EC_MAIN + TB_NCAT, EC_LATE = EC_WHO + 3, EC_PH = EC_LATE + 1,
       EC_MADE_OF = EC_PH + PH_NLOOP };

/* One epoch being read: its epoch_procs rows follow its own. */
struct ep_read {
	struct epoch *e;	/* NULL: a source this build does not know */
	int64_t rowid;
	struct ep_steps steps;
	struct ep_proc *d;
	int n, cap;
};

static enum ep_step_src step_source_from(const char *s)
{
	for (int i = EP_STEPS_NONE; i <= EP_STEPS_OPTIM; i++)
		if (!strcmp(s, epochs_step_source_name(i)))
			return i;
	return EP_STEPS_NONE;
}

/* An epoch's ph_critical_path (JSON, record_events.c) into e->ph_cp, by SQLite's json_each. */
static void read_made_of(struct recording *r, struct epoch *e, const char *json)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(r->db, "SELECT j.key, k.key, k.value FROM json_each(?1) j, "
			       "json_each(j.value) k", -1, &st, NULL) != SQLITE_OK)
		goto cleanup;
	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int p = rec_name_index((const char *)sqlite3_column_text(st, 0), ph_names, PH_NLOOP);
		int c = rec_name_index((const char *)sqlite3_column_text(st, 1), tb_cat_names,
				       TB_NCAT);

		if (p >= 0 && c >= 0 && sqlite3_column_int64(st, 2) > 0)
			e->ph_cp[p][c] = (uint64_t)sqlite3_column_int64(st, 2);
	}
cleanup:
	sqlite3_finalize(st);	/* a malformed value: the epoch's phases made of nothing */
}

static void ep_read_start(struct recording *r, struct ep_read *x, struct q *q)
{
	enum ep_source s = source_from(col_str(q, 1));

	memset(x, 0, sizeof(*x));
	x->rowid = col_i64(q, 0);
	if (s != EP_NSRC) {
		x->e = epochs_add(&r->ses.ep, s, (long)col_i64(q, 2), col_ns(q, 3),
				  col_null(q, 4) ? r->end_ns : col_ns(q, 4), col_i64(q, 5) != 0);
		if (!x->e)
			abort();	/* as job.c: out of memory, nothing left to say */
		x->e->late_start = col_i64(q, EC_LATE) != 0;
		for (int p = 0; p < PH_NLOOP; p++)
			x->e->ph[p] = (uint64_t)col_i64(q, EC_PH + p);
		if (!col_null(q, EC_MADE_OF))
			read_made_of(r, x->e, col_str(q, EC_MADE_OF));
	}
	x->steps = (struct ep_steps){
		.count = (int)col_i64(q, 6), .total_ms = col_double(q, 7),
		.min_ms = col_double(q, 8), .max_ms = col_double(q, 9),
		.sum_sq = col_double(q, 10), .syncs = (int)col_i64(q, 11),
		.source = step_source_from(col_str(q, 12)),
	};
}

static void ep_read_proc(struct recording *r, struct ep_read *x, struct q *q)
{
	struct ep_proc *d = tb_grow(x->d, &x->cap, x->n + 1, sizeof(*d));
	const struct proc_rec *p;

	if (!d)
		abort();
	x->d = d;
	d = &d[x->n++];
	memset(d, 0, sizeof(*d));
	d->pid = (pid_t)col_i64(q, EC_PID);
	d->start = col_ns(q, EC_PID + 1);
	d->end = col_ns(q, EC_PID + 2);
	for (int c = 0; c < TB_NCAT; c++) {
		d->own[c] = col_i64(q, EC_OWN + c);
		d->main_cp[c] = col_i64(q, EC_CP + c);
		d->main_own[c] = col_i64(q, EC_MAIN + c);
	}
	if (!col_null(q, EC_WHO)) {
		d->ppid = (pid_t)col_i64(q, EC_WHO);
		d->role = role_from(col_str(q, EC_WHO + 1));
		d->folded = (int)col_i64(q, EC_WHO + 2);
	} else if (d->pid && (p = job_proc_at(&r->ses.job, d->pid, d->start + 1))) {
		d->ppid = p->ppid;	/* an older file: as the process row says */
		d->role = p->role;
	}
}

/* Its deltas into the epoch (before the next epochs_add moves the list). */
static void ep_read_done(struct ep_read *x)
{
	if (x->e)
		epoch_set_recorded(x->e, x->d, x->n, &x->steps);
	else
		free(x->d);
	memset(x, 0, sizeof(*x));
}

static int load_epochs_exact(struct recording *r, const struct rec_filter *flt,
			     char *err, size_t errlen)
{
	const char *sql = has_column(r, "epochs", "ph_communication") ? epochs_sql :
		has_column(r, "epochs", "ph_critical_path") ? epochs_sql_5 :
		has_column(r, "epochs", "ph_data") ? epochs_sql_ph :
		has_column(r, "epoch_procs", "folded") ? epochs_sql_bounds : epochs_sql_old;
	struct ep_read x = { 0 };
	bool open = false;
	struct q q;

	if (q_open(r, &q, sql, err, errlen))
		return -1;
	while (q_row(&q)) {
		if (!open || col_i64(&q, 0) != x.rowid) {
			if (open)
				ep_read_done(&x);
			ep_read_start(r, &x, &q);
			open = true;
		}
		if (!col_null(&q, EC_PID) && (!flt->pid || col_i64(&q, EC_PID) == flt->pid))
			ep_read_proc(r, &x, &q);
	}
	if (open)
		ep_read_done(&x);
	return q_close(r, &q, err, errlen);
}

static int load_epoch_rows(struct recording *r, const struct rec_filter *flt,
			   char *err, size_t errlen)
{
	struct q q;

	if (r->version >= 2)
		return load_epochs_exact(r, flt, err, errlen);

	if (q_open(r, &q, "SELECT source, label, start_ns, end_ns, complete FROM epochs "
		   "ORDER BY start_ns", err, errlen))
		return -1;
	while (q_row(&q)) {
		enum ep_source s = source_from(col_str(&q, 0));

		if (s == EP_NSRC)
			continue;	/* a source this build does not know */
		if (!epochs_add(&r->ses.ep, s, (long)col_i64(&q, 1), col_ns(&q, 2),
				col_null(&q, 3) ? r->end_ns : col_ns(&q, 3), col_i64(&q, 4) != 0))
			abort();	/* as job.c: out of memory, nothing left to say */
	}
	return q_close(r, &q, err, errlen);
}

/* Keeps only the epochs the reports show: one source, maybe one epoch. */
static int pick_epochs(struct recording *r, const struct rec_filter *flt,
		       char *err, size_t errlen)
{
	enum ep_source s = epochs_source(&r->ses.ep);
	const struct ep_stream *st;

	epochs_align_labels(&r->ses.ep, r->end_ns);	/* as the live tool did at its end */
	epochs_keep_source(&r->ses.ep, s);
	if (!flt->epoch_set)
		return 0;
	if (s != EP_NSRC && epochs_keep_label(&r->ses.ep, s, flt->epoch))
		return 0;
	st = s == EP_NSRC ? NULL : &r->ses.ep.src[s];
	if (!st || !st->n)
		return ERR("%s: no epoch %ld: the recording has no epochs", r->path, flt->epoch);
	return ERR("%s: no epoch %ld (epochs %ld to %ld)", r->path, flt->epoch,
		   st->list[0].label, st->list[st->n - 1].label);
}

static int by_proc(const void *x, const void *y)
{
	const struct ep_row *a = x, *b = y;

	return a->proc - b->proc;
}

/* The accumulated flushes into each epoch's d[], as the live tool makes it. */
static void finish_epochs(struct recording *r, struct ep_acc *acc)
{
	for (int i = 0; i < acc->n; i++) {
		struct ep_row *rows = acc->rows[i];
		struct ep_proc *d = xcalloc(acc->nrows[i], sizeof(*d));
		int n = 0;

		/* In job order; a process met twice (rows out of time order): one row. */
		qsort(rows, acc->nrows[i], sizeof(*rows), by_proc);
		for (int k = 0; k < acc->nrows[i]; k++) {
			const struct proc_rec *p = &r->ses.job.procs[rows[k].proc];
			struct ep_proc *o = &d[n];

			if (n && k && rows[k].proc == rows[k - 1].proc) {
				o = &d[n - 1];
				for (int c = 0; c < TB_NCAT; c++) {
					o->own[c] += rows[k].d.own[c];
					o->main_cp[c] += rows[k].d.main_cp[c];
					o->main_own[c] += rows[k].d.main_own[c];
				}
				continue;
			}
			*o = rows[k].d;
			o->pid = p->pid;
			o->ppid = p->ppid;
			o->role = p->role;
			o->start = p->start_ns;
			o->end = p->end_ns;
			n++;
		}
		epoch_set_procs(&r->ses.ep, &acc->list[i], d, n);
	}
}

/* ---- steps ---- */

/*
 * Steps found from calls: one series per process, of the thread that
 * found them (schema 2), in the order the threads made calls, which
 * decides a tie (steps_bounds); schema 1 has no thread: its main one.
 */
static int load_steps(struct recording *r, const struct rec_filter *flt,
		      char *err, size_t errlen)
{
	char sql[128];
	struct q q;

	snprintf(sql, sizeof(sql), "SELECT source, pid, ts_ns, %s FROM steps ORDER BY %s",
		 r->version >= 2 ? "tid" : "NULL", live_order(r, "ts_ns"));
	if (q_open(r, &q, sql, err, errlen))
		return -1;
	while (q_row(&q)) {
		enum ep_step_src src = step_source_from(col_str(&q, 0));
		pid_t pid = (pid_t)col_i64(&q, 1);
		pid_t tid = col_null(&q, 3) ? pid : (pid_t)col_i64(&q, 3);

		if (flt->pid && pid != flt->pid)
			continue;
		/* A source this build does not know reads as none: skipped. */
		if (src == EP_STEPS_MARKER)
			epochs_add_step(&r->ses.ep, col_ns(&q, 2), pid);
		else if (src == EP_STEPS_FETCH || src == EP_STEPS_BACKWARD)
			epochs_add_loop_step(&r->ses.ep, src, col_ns(&q, 2), pid, tid);
		else if (src == EP_STEPS_OPTIM)
			epochs_add_optim_step(&r->ses.ep, col_ns(&q, 2), pid, tid);
		else if (src == EP_STEPS_CALLS)
			steps_add_start(&r->ses.steps, pid, tid, col_ns(&q, 2));
	}
	r->ses.ep.calls = &r->ses.steps;
	/* Before schema 9 nothing says where the loop's last step ended: pending. */
	r->ses.ep.ended = r->end_ns;
	r->ses.ep.loop.done = r->has_loop_done ? r->loop_done : 0;
	r->ses.ep.optim.done = r->optim_done;
	r->ses.ep.optim_multi = r->optim_multi;
	return q_close(r, &q, err, errlen);
}

/* ---- CUDA/NCCL ---- */

/* Every allocation below aborts when out of memory, as job.c does. */
static struct gpu_proc *gpu_proc(struct gpu *g, pid_t pid)
{
	struct gpu_proc *p = gpu_proc_get(g, pid);

	if (!p)
		abort();
	return p;
}

/* An object of family fam mapped by p: the report lists the libraries per process. */
static void gpu_map(struct gpu_proc *p, int obj)
{
	if (!gpu_mapping_add(p, obj))
		abort();
}

static int gpu_object(struct gpu *g, const char *path, int fam, const char *version,
		      bool is_static)
{
	struct gpu_object *o;
	int i;

	for (i = 0; i < g->nobjs; i++)
		if (!strcmp(g->objs[i].path, path) && (g->objs[i].families & (1u << fam)))
			return i;
	i = gpu_object_add(g);
	if (i < 0)
		abort();
	o = &g->objs[i];
	strncpy(o->path, path, sizeof(o->path) - 1);
	o->families = 1u << fam;
	o->is_static[fam] = is_static;
	strncpy(o->version[fam], version, sizeof(o->version[fam]) - 1);
	return i;
}

static int family_from(const char *s)
{
	for (int f = 0; f < LIB_NFAMILIES; f++)
		if (!strcmp(s, probe_family_names[f]))
			return f;
	return -1;
}

static bool has_table(struct recording *r, const char *name)
{
	sqlite3_stmt *st;
	bool yes = false;

	if (sqlite3_prepare_v2(r->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' "
			       "AND name = ?", -1, &st, NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	yes = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return yes;
}

static bool has_column(struct recording *r, const char *table, const char *column)
{
	sqlite3_stmt *st;
	bool yes = false;

	if (sqlite3_prepare_v2(r->db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", -1,
			       &st, NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
	yes = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return yes;
}

/* gpu_libraries (added to the schema later): the files, as found. */
static int load_gpu_libraries(struct recording *r, const struct rec_filter *flt,
			      char *err, size_t errlen)
{
	struct q q;

	if (!has_table(r, "gpu_libraries"))
		return 0;
	if (q_open(r, &q, "SELECT pid, family, path, version, static FROM gpu_libraries",
		   err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t pid = (pid_t)col_i64(&q, 0);
		int fam = family_from(col_str(&q, 1));

		if (fam < 0 || (flt->pid && pid != flt->pid))
			continue;
		gpu_map(gpu_proc(&r->ses.gpu, pid), gpu_object(&r->ses.gpu, col_str(&q, 2), fam,
							   col_str(&q, 3), col_i64(&q, 4) != 0));
	}
	return q_close(r, &q, err, errlen);
}

/* Without gpu_libraries, a family called is a family mapped, file unknown. */
static void infer_libraries(struct gpu *g)
{
	if (g->nobjs)
		return;
	for (int i = 0; i < g->nprocs; i++)
		for (int a = 0; a < probe_nfns; a++)
			if (g->procs[i].stat[a].calls || g->procs[i].stat[a].nested)
				gpu_map(&g->procs[i], gpu_object(g, "(file not recorded)",
								 probe_fns[a].family, "", false));
}

/* ---- CUDA/NCCL, schema 2: the live tool's entries, objects and communicators ---- */

/* The GPU side's entries by their seq; objects by the writer's numbers. */
struct gpu_read {
	int64_t *seq;		/* parallel to gpu.procs */
	int64_t *obj;		/* parallel to gpu.objs */
	int cap_seq, cap_obj;
};

static struct gpu_proc *entry_of(struct recording *r, const struct gpu_read *x, int64_t seq)
{
	for (int i = 0; i < r->ses.gpu.nprocs; i++)
		if (x->seq[i] == seq)
			return &r->ses.gpu.procs[i];
	return NULL;	/* left out by --pid, or no such entry */
}

static int load_gpu_procs(struct recording *r, const struct rec_filter *flt,
			  struct gpu_read *x, char *err, size_t errlen)
{
	struct q q;

	if (q_open(r, &q, "SELECT seq, pid, exited FROM gpu_procs ORDER BY seq", err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t pid = (pid_t)col_i64(&q, 1);
		struct gpu_proc *p;

		if (flt->pid && pid != flt->pid)
			continue;
		x->seq = tb_grow(x->seq, &x->cap_seq, r->ses.gpu.nprocs + 1, sizeof(*x->seq));
		p = x->seq ? gpu_proc_add(&r->ses.gpu, pid) : NULL;
		if (!p)
			abort();	/* as job.c: out of memory, nothing left to say */
		p->exited = col_i64(&q, 2) != 0;
		x->seq[r->ses.gpu.nprocs - 1] = col_i64(&q, 0);
	}
	return q_close(r, &q, err, errlen);
}

static int load_gpu_calls(struct recording *r, const struct gpu_read *x,
			  char *err, size_t errlen)
{
	struct q q;

	if (q_open(r, &q, "SELECT seq, api, calls, nested, bytes, ns FROM gpu_calls",
		   err, errlen))
		return -1;
	while (q_row(&q)) {
		struct gpu_proc *p = entry_of(r, x, col_i64(&q, 0));
		int a = probe_fn_find(col_str(&q, 1));

		if (!p || a < 0)
			continue;
		p->stat[a].calls += col_ns(&q, 2);
		p->stat[a].nested += col_ns(&q, 3);
		p->stat[a].bytes += col_ns(&q, 4);
		p->stat[a].ns += col_ns(&q, 5);
	}
	return q_close(r, &q, err, errlen);
}

/* Whether name is one of the ", "-joined names of list. */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; *p;) {
		const char *end = strstr(p, ", ");
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && !strncmp(p, name, n))
			return true;
		p += len + (end ? 2 : 0);
	}
	return false;
}

/* The writer's object obj, made the first time (its path from that row). */
static int object_of(struct recording *r, struct gpu_read *x, int64_t obj, const char *path)
{
	struct gpu *g = &r->ses.gpu;
	int i;

	for (i = 0; i < g->nobjs; i++)
		if (x->obj[i] == obj)
			return i;
	x->obj = tb_grow(x->obj, &x->cap_obj, g->nobjs + 1, sizeof(*x->obj));
	i = x->obj ? gpu_object_add(g) : -1;
	if (i < 0)
		abort();
	x->obj[i] = obj;
	strncpy(g->objs[i].path, path, sizeof(g->objs[i].path) - 1);
	return i;
}

/*
 * One family of an object: what the report says of it. The offsets of its
 * functions are not recorded, only which core ones were missing: a found
 * one gets offset 1 (gpu_lacks asks no more).
 */
static void object_family(struct gpu_object *o, int fam, struct q *q)
{
	o->families |= 1u << fam;
	strncpy(o->version[fam], col_str(q, 3), sizeof(o->version[fam]) - 1);
	o->is_static[fam] = col_i64(q, 4) != 0;
	for (int a = 0; a < probe_nfns; a++)
		if (probe_fns[a].family == (enum probe_family)fam && probe_fns[a].core)
			o->offs[a] = !listed(col_str(q, 7), probe_fns[a].name);
}

static int load_gpu_objects(struct recording *r, struct gpu_read *x,
			    char *err, size_t errlen)
{
	struct q q;

	if (q_open(r, &q, "SELECT seq, family, path, version, static, obj, probes, missing "
		   "FROM gpu_libraries ORDER BY rowid", err, errlen))
		return -1;
	while (q_row(&q)) {
		struct gpu_proc *p = entry_of(r, x, col_i64(&q, 0));
		int fam = family_from(col_str(&q, 1)), o;
		struct gpu_mapping *m;

		if (!p || fam < 0)
			continue;
		o = object_of(r, x, col_i64(&q, 5), col_str(&q, 2));
		object_family(&r->ses.gpu.objs[o], fam, &q);
		m = gpu_mapping_add(p, o);
		if (!m)
			abort();
		m->probes[fam] = (int)col_i64(&q, 6);
	}
	return q_close(r, &q, err, errlen);
}

static void hex_bytes(const char *hex, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n && isxdigit((unsigned char)hex[2 * i]) &&
			   isxdigit((unsigned char)hex[2 * i + 1]); i++)
		sscanf(hex + 2 * i, "%2hhx", &out[i]);
}

static int load_comms(struct recording *r, const struct gpu_read *x,
		      char *err, size_t errlen)
{
	/* Schema 11 counts each one's data calls; an older file's are 0. */
	const char *sql = has_column(r, "nccl_comms", "calls") ?
		"SELECT seq, comm, parent, rank, nranks, id, api, destroyed, calls, bytes, color "
		"FROM nccl_comms ORDER BY rowid" :
		"SELECT seq, comm, parent, rank, nranks, id, api, destroyed, 0, 0, 0 "
		"FROM nccl_comms ORDER BY rowid";
	struct q q;

	if (q_open(r, &q, sql, err, errlen))
		return -1;
	while (q_row(&q)) {
		struct gpu_proc *p = entry_of(r, x, col_i64(&q, 0));
		/* NULL: made before tracing, counted only (schema 11) */
		int api = col_null(&q, 6) ? -1 : probe_fn_find(col_str(&q, 6));
		struct gpu_comm *c;

		if (!p || (api < 0 && !col_null(&q, 6)))
			continue;
		c = gpu_comm_add(p);
		if (!c)
			abort();
		c->comm = (uint64_t)col_i64(&q, 1);
		c->parent = (uint64_t)col_i64(&q, 2);
		c->rank = (int)col_i64(&q, 3);
		c->nranks = (int)col_i64(&q, 4);
		hex_bytes(col_str(&q, 5), c->id, sizeof(c->id));
		c->api = api;
		c->destroyed = col_i64(&q, 7) != 0;
		c->calls = col_ns(&q, 8);
		c->bytes = col_ns(&q, 9);
		c->color = (int)col_i64(&q, 10);
	}
	return q_close(r, &q, err, errlen);
}

static int load_gpu_exact(struct recording *r, const struct rec_filter *flt,
			  char *err, size_t errlen)
{
	struct gpu_read x = { 0 };
	int rc = load_gpu_procs(r, flt, &x, err, errlen) ||
		 load_gpu_calls(r, &x, err, errlen) ||
		 load_gpu_objects(r, &x, err, errlen) || load_comms(r, &x, err, errlen);

	free(x.seq);
	free(x.obj);
	return rc ? -1 : 0;
}

static int load_gpu(struct recording *r, const struct rec_filter *flt,
		    char *err, size_t errlen)
{
	struct q q;

	if (r->version >= 2)
		return load_gpu_exact(r, flt, err, errlen);

	if (q_open(r, &q, "SELECT pid, api, calls, nested, bytes, ns FROM gpu_calls",
		   err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t pid = (pid_t)col_i64(&q, 0);
		int a = probe_fn_find(col_str(&q, 1));
		struct tb_api_stat *s;

		if (a < 0 || (flt->pid && pid != flt->pid))
			continue;
		s = &gpu_proc(&r->ses.gpu, pid)->stat[a];
		s->calls += col_ns(&q, 2);
		s->nested += col_ns(&q, 3);
		s->bytes += col_ns(&q, 4);
		s->ns += col_ns(&q, 5);
		if (probe_fns[a].kind == TB_AK_LAUNCH && s->calls)
			r->ses.gpu.launches = true;	/* launches are counted only when asked */
	}
	if (q_close(r, &q, err, errlen) || load_gpu_libraries(r, flt, err, errlen))
		return -1;
	infer_libraries(&r->ses.gpu);
	return 0;
}

/* ---- optional tables, added after schema 1 was first written ---- */

/* syncs: entries of outermost CUDA syncs and blocking copies (syncs/step). */
static int load_syncs(struct recording *r, const struct rec_filter *flt,
		      char *err, size_t errlen)
{
	struct q q;

	if (!has_table(r, "syncs"))
		return 0;
	if (q_open(r, &q, "SELECT pid, ts_ns FROM syncs ORDER BY ts_ns", err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t pid = (pid_t)col_i64(&q, 0);

		if (flt->pid && pid != flt->pid)
			continue;
		steps_add_sync(&r->ses.steps, pid, col_ns(&q, 1));
	}
	return q_close(r, &q, err, errlen);
}

/* worker_gens: DataLoader worker generations and their start-up stalls. */
static int load_gens(struct recording *r, const struct rec_filter *flt,
		     char *err, size_t errlen)
{
	struct q q;

	if (!has_table(r, "worker_gens"))
		return 0;
	if (q_open(r, &q, "SELECT parent, fork_ns, nworkers, epoch, stall_s, stall_err_s "
		   "FROM worker_gens ORDER BY fork_ns", err, errlen))
		return -1;
	while (q_row(&q)) {
		struct ep_worker_gen g = {
			.parent = (pid_t)col_i64(&q, 0), .fork_ts = col_ns(&q, 1),
			.nworkers = (int)col_i64(&q, 2), .epoch = (long)col_i64(&q, 3),
			.stall_s = col_null(&q, 4) ? -1 : sqlite3_column_double(q.st, 4),
			.stall_err_s = sqlite3_column_double(q.st, 5),
		};

		if (flt->pid && g.parent != flt->pid)
			continue;
		epochs_add_gen(&r->ses.ep, &g);
	}
	return q_close(r, &q, err, errlen);
}

/* stall (schema 10): the stalled job the run ended in, a row per rank, culprit first. */
static int stall_rank_row(struct recording *r, struct q *q, struct stall_rank *k,
			  char *err, size_t errlen)
{
	*k = (struct stall_rank){
		.culprit = col_i64(q, 3) != 0, .pid = (pid_t)col_i64(q, 4),
		.rank = (int)col_i64(q, 5), .phase = (int)col_i64(q, 6),
		.wait = (int)col_i64(q, 7), .wait_ns = col_ns(q, 8), .cat = (int)col_i64(q, 9),
		.cat_ns = col_ns(q, 10), .api = (uint16_t)col_i64(q, 11),
		.in_api = col_i64(q, 12) != 0, .worker = (pid_t)col_i64(q, 13),
		.worker_state = (uint8_t)col_i64(q, 14), .worker_wait = (uint8_t)col_i64(q, 15),
		.worker_ns = col_ns(q, 16), .behind = col_ns(q, 17), .api_bytes = col_ns(q, 20),
	};
	/* A communicator's id: 16 hex digits, or NULL (schema 11; none before). */
	if (k->behind && sscanf(col_str(q, 18), "%16" SCNx64, &k->behind_comm) != 1)
		return ERR("%s: stall: a rank's communicator is not an id", r->path);
	snprintf(k->object, sizeof(k->object), "%s", col_str(q, 19));
	if (k->phase < 0 || k->phase >= TB_NPHASE || k->wait < 0 || k->wait >= TB_NCAT ||
	    k->cat < 0 || k->cat >= TB_NCAT || k->rank < -1)
		return ERR("%s: stall: a rank's phase, wait or category out of range", r->path);
	return 0;
}

static int load_stall(struct recording *r, char *err, size_t errlen)
{
	static const char stall_sql[] =
		"SELECT since_ns, now_ns, threshold_ns, culprit, pid, rank, phase, wait, "
		"wait_ns, cat, cat_ns, api, in_api, worker, worker_state, worker_wait, worker_ns, "
		"behind, behind_comm, object, api_bytes FROM stall ORDER BY rowid";
	struct stall_job *j = NULL;
	struct q q;
	int rc = 0;

	if (!has_table(r, "stall"))
		return 0;
	if (q_open(r, &q, has_column(r, "stall", "behind") ? stall_sql :
		   "SELECT since_ns, now_ns, threshold_ns, culprit, pid, rank, phase, wait, "
		   "wait_ns, cat, cat_ns, api, in_api, worker, worker_state, worker_wait, worker_ns, "
		   "0, NULL, NULL, 0 FROM stall ORDER BY rowid", err, errlen))
		return -1;
	while (!rc && q_row(&q)) {
		if (!j) {
			j = r->ses.stall.jobs = xcalloc(1, sizeof(*j));
			r->ses.stall.njobs = r->ses.stall.cap = 1;
			j->stalled = true;
			j->since = col_ns(&q, 0);
			j->now = col_ns(&q, 1);
			j->threshold_ns = col_ns(&q, 2);
			if (j->now < j->since)
				rc = ERR("%s: stall: it ends before it begins", r->path);
		}
		if (!rc && j->nranks < STALL_MAX_RANKS)
			rc = stall_rank_row(r, &q, &j->ranks[j->nranks++], err, errlen);
	}
	if (rc) {	/* err says why: not the statement's state */
		sqlite3_finalize(q.st);
		return -1;
	}
	if (q_close(r, &q, err, errlen))
		return -1;
	/* Culprit first, as the live report has it. */
	if (j)
		j->culprit = j->ranks[0].culprit;
	return 0;
}

/* ---- training phases ---- */

/* Each thread's critical-path time per BPF phase, onto its thread_rec. */
static int load_phase_times(struct recording *r, const struct rec_filter *flt,
			    char *err, size_t errlen)
{
	int nix, rc;
	struct tref *ix = thread_index(&r->ses.job, &nix);
	struct q q;

	/* Schema 4 tells storage writes from reads; before, the diagnosis guesses. */
	if (r->version >= 4)
		r->ses.job.wio_unknown = false;
	if (q_open(r, &q, r->version >= 4 ?
		   "SELECT tid, pid, start_ns, phase, cp_cpu, cp_gpu_wait, cp_comm, cp_data_wait, "
		   "cp_io, cp_runqueue, cp_lock, cp_idle, io_write FROM phase_times" :
		   "SELECT tid, pid, start_ns, phase, cp_cpu, cp_gpu_wait, cp_comm, cp_data_wait, "
		   "cp_io, cp_runqueue, cp_lock, cp_idle, NULL FROM phase_times", err, errlen)) {
		free(ix);
		return -1;
	}
	while (q_row(&q)) {
		pid_t tid = (pid_t)col_i64(&q, 0), pid = (pid_t)col_i64(&q, 1);
		const struct tref *t = thread_at(ix, nix, tid, col_ns(&q, 2));
		int ph = rec_name_index(col_str(&q, 3), tb_phase_names, TB_NPHASE);
		int end = rec_name_index(col_str(&q, 3), ph_names + PH_NLOOP, 2);

		if ((flt->pid && pid != flt->pid) || !t || (ph < 0 && end < 0) ||
		    r->ses.job.procs[t->proc].pid != pid)
			continue;
		if (ph < 0) {	/* schema 8: setup or teardown, of its other row */
			for (int c = 0; c < TB_NCAT; c++)
				t->t->ends[end][c] = col_ns(&q, 4 + c);
			continue;
		}
		for (int c = 0; c < TB_NCAT; c++)
			t->t->ph[ph][c] += col_ns(&q, 4 + c);
		t->t->wio[ph] += col_ns(&q, 4 + TB_NCAT);
		/* As the live tool notes it: who trains, which thread (job_trainer_thread). */
		job_note_backward(&r->ses.job.procs[t->proc], t->t);
		/* NULL: not measured (a column added to a file made before it) */
		if (sqlite3_column_type(q.st, 4 + TB_NCAT) == SQLITE_NULL)
			r->ses.job.wio_unknown = true;
	}
	rc = q_close(r, &q, err, errlen);
	free(ix);
	return rc;
}

/* One phase_steps row: the thread's step counts, and one shown phase's times. */
static void phase_step_row(struct ph_thread *t, struct q *q)
{
	int p = rec_name_index(col_str(q, 7), ph_names, PH_NSHOWN);

	t->steps.steps = (int)col_i64(q, 2);
	t->steps.step_ms = col_double(q, 3);
	t->sp.pend_ns[PH_PEND_DATA] = col_ns(q, 4);
	t->sp.pend_ns[PH_PEND_FWD] = col_ns(q, 5);
	t->sp.pend_ns[PH_PEND_HELD] = col_ns(q, 6);
	t->fetches = col_ns(q, 13);
	t->sp.in_val = col_i64(q, 14) != 0;	/* NULL (older files): 0 */
	t->startup = col_ns(q, 15);		/* schema 5; 0 before */
	t->sp.pend_ns[PH_PEND_START] = col_ns(q, 16);
	t->sp.pend_ns[PH_PEND_SHELD] = col_ns(q, 17);
	if (p < 0)
		return;
	if (p >= PH_NLOOP) {	/* schema 8: setup or teardown, no step's */
		t->ends_ns[p - PH_NLOOP] = col_ns(q, 8);
		return;
	}
	t->tot[p] = col_ns(q, 8);
	t->steps.total_ms[p] = col_double(q, 9);
	t->steps.min_ms[p] = col_double(q, 10);
	t->steps.max_ms[p] = col_double(q, 11);
	t->steps.sum_sq[p] = col_double(q, 12);
}

static int load_phase_steps(struct recording *r, const struct rec_filter *flt,
			    char *err, size_t errlen)
{
	/*
	 * in_val came later than the table: a file without it has 0; the
	 * workers' start-up (schema 5) too.
	 */
	const char *sql = has_column(r, "phase_steps", "startup_ns") ?
		"SELECT tid, pid, steps, step_ms, pend_data_ns, pend_fwd_ns, held_ns, phase, wall_ns, "
		"total_ms, min_ms, max_ms, sum_sq, fetches, in_val, startup_ns, pend_start_ns, "
		"pend_startup_ns FROM phase_steps ORDER BY rowid" :
		has_column(r, "phase_steps", "in_val") ?
		"SELECT tid, pid, steps, step_ms, pend_data_ns, pend_fwd_ns, held_ns, phase, wall_ns, "
		"total_ms, min_ms, max_ms, sum_sq, fetches, in_val, 0, 0, 0 FROM phase_steps "
		"ORDER BY rowid" :
		"SELECT tid, pid, steps, step_ms, pend_data_ns, pend_fwd_ns, held_ns, phase, wall_ns, "
		"total_ms, min_ms, max_ms, sum_sq, fetches, 0, 0, 0, 0 FROM phase_steps ORDER BY rowid";
	struct q q;

	if (q_open(r, &q, sql, err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t tid = (pid_t)col_i64(&q, 0), pid = (pid_t)col_i64(&q, 1);
		struct ph_thread *t;

		if (flt->pid && pid != flt->pid)
			continue;
		t = phases_add_thread(&r->ses.phases, pid, tid);
		if (!t)
			abort();	/* as xcalloc */
		phase_step_row(t, &q);
	}
	return q_close(r, &q, err, errlen);
}

/* Schema 11: each thread's optimizer steps; none before (its steps are micro-batches). */
static int load_phase_osteps(struct recording *r, const struct rec_filter *flt,
			     char *err, size_t errlen)
{
	struct q q;

	if (!has_column(r, "phase_steps", "osteps"))
		return 0;
	if (q_open(r, &q, "SELECT tid, pid, phase, osteps, ostep_ms, omicro, o_total_ms, "
		   "o_min_ms, o_max_ms, o_sum_sq FROM phase_steps ORDER BY rowid", err, errlen))
		return -1;
	while (q_row(&q)) {
		pid_t tid = (pid_t)col_i64(&q, 0), pid = (pid_t)col_i64(&q, 1);
		int p = rec_name_index(col_str(&q, 2), ph_names, PH_NSHOWN);
		struct ph_thread *t;

		if ((flt->pid && pid != flt->pid) || !(t = phases_add_thread(&r->ses.phases, pid, tid)))
			continue;
		t->osteps.steps = (int)col_i64(&q, 3);
		t->osteps.step_ms = col_double(&q, 4);
		t->omicro = (int)col_i64(&q, 5);
		if (p < 0)
			continue;
		t->osteps.total_ms[p] = col_double(&q, 6);
		t->osteps.min_ms[p] = col_double(&q, 7);
		t->osteps.max_ms[p] = col_double(&q, 8);
		t->osteps.sum_sq[p] = col_double(&q, 9);
	}
	return q_close(r, &q, err, errlen);
}

/*
 * Phases are the whole run's: one epoch's window has none (its threads'
 * rows would not add up to its times), and a recording made before phases
 * has no section, as its live report had none.
 */
static int load_phases(struct recording *r, const struct rec_filter *flt,
		       char *err, size_t errlen)
{
	if (!r->has_phases || flt->epoch_set)
		return 0;
	if (load_phase_times(r, flt, err, errlen) || load_phase_steps(r, flt, err, errlen) ||
	    load_phase_osteps(r, flt, err, errlen))
		return -1;
	r->ses.phases_on = true;
	return 0;
}

/* ---- diagnosis and counters ---- */

static void saved_push(struct recording *r, const struct dg_finding *f, bool run, long epoch)
{
	struct dg_saved *s;

	r->saved = realloc(r->saved, (r->nsaved + 1) * sizeof(*s));
	if (!r->saved)
		abort();
	s = &r->saved[r->nsaved++];
	s->f = *f;
	s->run = run;
	s->epoch = epoch;
}

static void finding_cols(struct q *q, struct dg_finding *f)
{
	memset(f, 0, sizeof(*f));
	f->id = diag_id_find(col_str(q, 1));
	f->severity = sqlite3_column_double(q->st, 2);
	f->value = sqlite3_column_double(q->st, 3);
	f->threshold = sqlite3_column_double(q->st, 4);
	f->pid = (pid_t)col_i64(q, 5);
	snprintf(f->summary, sizeof(f->summary), "%s", col_str(q, 6));
	snprintf(f->evidence, sizeof(f->evidence), "%s", col_str(q, 7));
	snprintf(f->advice, sizeof(f->advice), "%s", col_str(q, 8));
	/* Schema 6; before, from the value where that is the cost (kept in their order). */
	f->cost = col_null(q, 9) ? diag_cost_of_value(f->id, f->value) :
				   sqlite3_column_double(q->st, 9);
}

/*
 * Under --epoch N the window is epoch N: its findings are the run's too.
 * Under --pid N only the findings that name that process.
 */
static int load_diagnosis(struct recording *r, const struct rec_filter *flt,
			  char *err, size_t errlen)
{
	struct dg_finding f;
	struct q q;

	/* Not NULL even when empty: the reports judge nothing on a recording. */
	r->saved = xcalloc(1, sizeof(*r->saved));
	if (q_open(r, &q, r->version >= 6 ?
		   "SELECT epoch, id, severity, value, threshold, pid, summary, "
		   "evidence, advice, cost FROM diagnosis ORDER BY rowid" :
		   "SELECT epoch, id, severity, value, threshold, pid, summary, "
		   "evidence, advice, NULL FROM diagnosis ORDER BY rowid", err, errlen))
		return -1;
	while (q_row(&q)) {
		bool run = col_null(&q, 0);
		long epoch = (long)col_i64(&q, 0);

		finding_cols(&q, &f);
		if (flt->pid && f.pid != flt->pid)
			continue;
		if (flt->epoch_set && (run || epoch != flt->epoch))
			continue;
		saved_push(r, &f, run, epoch);
		if (flt->epoch_set)
			saved_push(r, &f, true, epoch);
	}
	diag_set_saved(&r->ses.diag, r->saved, r->nsaved);
	return q_close(r, &q, err, errlen);
}

static int load_counters(struct recording *r, char *err, size_t errlen)
{
	/* The writer's keys are the JSON report's (record_final.c); threads_untraced sums two. */
	static const struct { const char *key; size_t off; } keys[] = {
		{ "events_lost", offsetof(struct tb_counters, events_lost) },
		{ "threads_untraced", offsetof(struct tb_counters, slots_exhausted) },
		{ "sched_events_missed", offsetof(struct tb_counters, sched_missed) },
		{ "gpu_stats_full", offsetof(struct tb_counters, api_stats_full) },
		{ "gpu_probe_preempted", offsetof(struct tb_counters, api_preempted) },
		{ "states_lost", offsetof(struct tb_counters, states_lost) },
		{ "brackets_deep", offsetof(struct tb_counters, brackets_deep) },
		/* the struct's names, which docs/recording.md once gave */
		{ "slots_exhausted", offsetof(struct tb_counters, slots_exhausted) },
		{ "storage_failed", offsetof(struct tb_counters, storage_failed) },
		{ "sched_missed", offsetof(struct tb_counters, sched_missed) },
		{ "api_stats_full", offsetof(struct tb_counters, api_stats_full) },
		{ "api_preempted", offsetof(struct tb_counters, api_preempted) },
	};
	struct q q;

	if (q_open(r, &q, "SELECT key, value FROM counters", err, errlen))
		return -1;
	while (q_row(&q)) {
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (!strcmp(col_str(&q, 0), keys[k].key))
				*(uint64_t *)((char *)&r->bpf + keys[k].off) = col_ns(&q, 1);
		if (!strcmp(col_str(&q, 0), "nccl_comms_not_listed"))
			r->ses.gpu.comms_dropped = col_ns(&q, 1);
	}
	if (!r->states_lost)	/* the trace's warning: the writer counts it here */
		r->states_lost = r->bpf.states_lost;
	return q_close(r, &q, err, errlen);
}

void rec_counters(const struct recording *r, struct run_counters *out)
{
	job_counters(&r->ses.job, &r->bpf, out);
}

/* ---- the window ---- */

static bool outside(uint64_t start, uint64_t end, uint64_t ws, uint64_t we)
{
	return (end && end <= ws) || start >= we;
}

/*
 * One epoch's window: threads and processes that did not live in it go,
 * the others are cut to it (alive at its end reads as end_ns 0).
 */
static void clip_window(struct job *job, uint64_t ws, uint64_t we)
{
	int np = 0;

	for (int i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];
		int nt = 0;

		for (int j = 0; j < p->nthreads; j++) {
			struct thread_rec t = p->threads[j];

			if (outside(t.start_ns, t.end_ns, ws, we) && !sum_cats(t.own))
				continue;
			t.start_ns = t.start_ns < ws ? ws : t.start_ns;
			t.end_ns = t.end_ns > we ? 0 : t.end_ns;
			p->threads[nt++] = t;
		}
		p->nthreads = nt;
		p->main_at = 0;		/* rows moved: found again */
		if (!nt && outside(p->start_ns, p->end_ns, ws, we)) {
			free(p->threads);
			continue;
		}
		p->start_ns = p->start_ns < ws ? ws : p->start_ns;
		p->end_ns = p->end_ns > we ? 0 : p->end_ns;
		job->procs[np++] = *p;
	}
	job->nprocs = np;
}

/*
 * A window's flushes can move time out of a category it gained before the
 * window (a wait that closed as data_wait after a flush counted it idle):
 * a thread's sum in the window is then below zero there, shown as none.
 */
static void clamp_window(struct job *job)
{
	for (int i = 0; i < job->nprocs; i++)
		for (int j = 0; j < job->procs[i].nthreads; j++) {
			struct thread_rec *t = &job->procs[i].threads[j];

			for (int c = 0; c < TB_NCAT; c++) {
				if ((int64_t)t->own[c] < 0)
					t->own[c] = 0;
				if ((int64_t)t->cp[c] < 0)
					t->cp[c] = 0;
			}
		}
}

static int load_epoch_deltas(struct recording *r, const struct rec_filter *flt,
			     char *err, size_t errlen)
{
	enum ep_source s = epochs_source(&r->ses.ep);
	struct ep_acc acc = { 0 };
	uint64_t ws = r->start_ns, we = r->end_ns;
	int rc;

	/* Schema 2 has each epoch's deltas; schema 1's are rebuilt from the flushes. */
	if (s != EP_NSRC && r->version < 2) {
		acc.list = r->ses.ep.src[s].list;
		acc.n = r->ses.ep.src[s].n;
	}
	if (flt->epoch_set) {
		ws = r->ses.ep.src[s].list[0].start;
		we = r->ses.ep.src[s].list[0].end;
	}
	acc.nprocs = r->ses.job.nprocs;
	acc.rows = xcalloc(acc.n, sizeof(*acc.rows));
	acc.nrows = xcalloc(acc.n, sizeof(int));
	acc.caprows = xcalloc(acc.n, sizeof(int));
	acc.last_ep = xcalloc(acc.nprocs, sizeof(int));
	acc.last_row = xcalloc(acc.nprocs, sizeof(int));
	for (int i = 0; i < acc.nprocs; i++)
		acc.last_ep[i] = -1;
	rc = load_samples(r, &acc, ws, we, flt->epoch_set, err, errlen);
	if (!rc)
		finish_epochs(r, &acc);
	for (int i = 0; i < acc.n; i++)
		free(acc.rows[i]);
	free(acc.rows);
	free(acc.nrows);
	free(acc.caprows);
	free(acc.last_ep);
	free(acc.last_row);
	if (flt->epoch_set) {
		clamp_window(&r->ses.job);
		r->ses.job.window_start_unix += ((double)ws - (double)r->start_ns) / 1e9;
		r->start_ns = ws;
		r->end_ns = we;
		clip_window(&r->ses.job, ws, we);
	}
	return rc;
}

/* What the live tool would have folded by the end (job.h): a report shows the same. */
static int fold(struct recording *r, const struct rec_filter *flt)
{
	if (flt->fold)
		job_fold(&r->ses.job, r->end_ns, r->end_ns, NULL);
	return 0;
}

int rec_load(struct recording *r, const struct rec_filter *flt, char *err, size_t errlen)
{
	r->ses.ep.want = EP_AUTO;
	r->ses.ep.interval_s = EP_AUTO_INTERVAL_S;
	if (load_meta(r, err, errlen) || find_end(r, err, errlen) ||
	    load_procs(r, flt, err, errlen) || load_threads(r, flt, err, errlen) ||
	    load_epoch_rows(r, flt, err, errlen) || pick_epochs(r, flt, err, errlen) ||
	    load_steps(r, flt, err, errlen) || load_syncs(r, flt, err, errlen) ||
	    load_gens(r, flt, err, errlen) || load_epoch_deltas(r, flt, err, errlen) ||
	    fold(r, flt) ||
	    load_gpu(r, flt, err, errlen) || load_diagnosis(r, flt, err, errlen) ||
	    load_phases(r, flt, err, errlen) || load_counters(r, err, errlen) ||
	    rec_load_gpu_util(r, flt, err, errlen) || load_stall(r, err, errlen) ||
	    rec_load_py(r, flt, err, errlen))
		return -1;
	r->ses.job.window_start_ns = r->start_ns;
	r->ses.stall_on = r->ses.stall.njobs > 0;
	r->ses.ep.prev.ts = r->end_ns;
	return 0;
}

void rec_close(struct recording *r)
{
	session_free(&r->ses);
	free(r->saved);
	rec_close_file(r);
	memset(r, 0, sizeof(*r));
}

int rec_query(struct recording *r, const char *sql,
	      void (*row)(struct sqlite3_stmt *st, void *arg), void *arg,
	      char *err, size_t errlen)
{
	struct q q;

	if (q_open(r, &q, sql, err, errlen))
		return -1;
	while (q_row(&q))
		row(q.st, arg);
	return q_close(r, &q, err, errlen);
}
