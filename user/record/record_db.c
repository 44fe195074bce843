// SPDX-License-Identifier: BSD-3-Clause
/*
 * The recording's SQLite file: its schema, its prepared statements, and
 * the one-line error that stops all writing. The record_*.c files write
 * through these.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "record.h"

/* docs/recording.md, verbatim: readers depend on it. */
static const char schema[] =
"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
"CREATE TABLE processes ("
"  pid INTEGER NOT NULL, ppid INTEGER, comm TEXT, exe TEXT,"
"  role TEXT, flags INTEGER, root INTEGER, rank INTEGER,"
"  start_ns INTEGER, end_ns INTEGER, exit_code INTEGER,"
"  PRIMARY KEY (pid, start_ns));"
"CREATE TABLE threads ("
"  tid INTEGER NOT NULL, pid INTEGER NOT NULL, comm TEXT,"
"  start_ns INTEGER NOT NULL, end_ns INTEGER,"
"  PRIMARY KEY (tid, start_ns));"
"CREATE TABLE samples ("
"  ts_ns INTEGER NOT NULL, tid INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  cpu INTEGER, gpu_wait INTEGER, comm INTEGER, data_wait INTEGER,"
"  io INTEGER, runqueue INTEGER, lock INTEGER, idle INTEGER,"
"  cp_cpu INTEGER, cp_gpu_wait INTEGER, cp_comm INTEGER, cp_data_wait INTEGER,"
"  cp_io INTEGER, cp_runqueue INTEGER, cp_lock INTEGER, cp_idle INTEGER,"
"  io_rbytes INTEGER, io_wbytes INTEGER, nswitch INTEGER);"
"CREATE INDEX samples_tid ON samples (tid, ts_ns);"
"CREATE TABLE states ("
"  tid INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
"  cat INTEGER NOT NULL, cp_cat INTEGER NOT NULL);"
"CREATE TABLE epochs ("
"  source TEXT NOT NULL, label INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
"  end_ns INTEGER, complete INTEGER,"
"  seq INTEGER, step_count INTEGER, step_total_ms REAL, step_min_ms REAL,"
"  step_max_ms REAL, step_sum_sq REAL, step_syncs INTEGER, step_source TEXT);"
"CREATE TABLE epoch_procs ("
"  source TEXT NOT NULL, seq INTEGER NOT NULL,"
"  pid INTEGER NOT NULL, start_ns INTEGER, end_ns INTEGER,"
"  cpu INTEGER, gpu_wait INTEGER, comm INTEGER, data_wait INTEGER,"
"  io INTEGER, runqueue INTEGER, lock INTEGER, idle INTEGER,"
"  cp_cpu INTEGER, cp_gpu_wait INTEGER, cp_comm INTEGER, cp_data_wait INTEGER,"
"  cp_io INTEGER, cp_runqueue INTEGER, cp_lock INTEGER, cp_idle INTEGER,"
"  main_cpu INTEGER, main_gpu_wait INTEGER, main_comm INTEGER,"
"  main_data_wait INTEGER, main_io INTEGER, main_runqueue INTEGER,"
"  main_lock INTEGER, main_idle INTEGER);"
"CREATE TABLE steps (source TEXT NOT NULL, pid INTEGER, ts_ns INTEGER NOT NULL,"
"  tid INTEGER);"
"CREATE TABLE events ("
"  ts_ns INTEGER NOT NULL, type TEXT NOT NULL,"
"  pid INTEGER, tid INTEGER, ppid INTEGER, code INTEGER, text TEXT);"
"CREATE TABLE gpu_calls ("
"  pid INTEGER NOT NULL, api TEXT NOT NULL, kind TEXT,"
"  calls INTEGER, nested INTEGER, bytes INTEGER, ns INTEGER,"
"  seq INTEGER);"
"CREATE TABLE diagnosis ("
"  epoch INTEGER, id TEXT NOT NULL, severity REAL, value REAL, threshold REAL,"
"  pid INTEGER, summary TEXT, evidence TEXT, advice TEXT);"
"CREATE TABLE counters (key TEXT PRIMARY KEY, value INTEGER);"
"CREATE TABLE gpu_libraries (pid INTEGER NOT NULL, family TEXT NOT NULL,"
"  path TEXT, version TEXT, static INTEGER,"
"  seq INTEGER, obj INTEGER, probes INTEGER, missing TEXT);"
"CREATE TABLE syncs (pid INTEGER NOT NULL, ts_ns INTEGER NOT NULL);"
"CREATE TABLE worker_gens (parent INTEGER NOT NULL, fork_ns INTEGER NOT NULL,"
"  nworkers INTEGER, epoch INTEGER, stall_s REAL, stall_err_s REAL);"
"CREATE TABLE gpu_procs (seq INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  exited INTEGER);"
"CREATE TABLE nccl_comms (seq INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  comm INTEGER, parent INTEGER, rank INTEGER, nranks INTEGER,"
"  id TEXT, api TEXT, destroyed INTEGER);";

static const char *const stmt_sql[RS_N] = {
	[RS_SAMPLE] = "INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[RS_PROC] = "INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?,?,?) "
		"ON CONFLICT (pid, start_ns) DO UPDATE SET ppid=excluded.ppid, "
		"comm=excluded.comm, exe=excluded.exe, role=excluded.role, "
		"flags=excluded.flags, root=excluded.root, rank=excluded.rank, "
		"end_ns=excluded.end_ns, exit_code=excluded.exit_code",
	[RS_PROC_REKEY] = "UPDATE processes SET start_ns=?3 WHERE pid=?1 AND start_ns=?2",
	[RS_THREAD] = "INSERT INTO threads VALUES (?,?,?,?,?) "
		"ON CONFLICT (tid, start_ns) DO UPDATE SET pid=excluded.pid, "
		"comm=excluded.comm, end_ns=excluded.end_ns",
	[RS_EPOCH] = "INSERT INTO epochs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[RS_EPOCH_PROC] = "INSERT INTO epoch_procs VALUES (?,?,?,?,?,"
		"?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?)",
	[RS_STEP] = "INSERT INTO steps VALUES (?,?,?,?)",
	[RS_EVENT] = "INSERT INTO events VALUES (?,?,?,?,?,?,?)",
	[RS_GPU] = "INSERT INTO gpu_calls VALUES (?,?,?,?,?,?,?,?)",
	[RS_DIAG] = "INSERT INTO diagnosis VALUES (?,?,?,?,?,?,?,?,?)",
	[RS_COUNTER] = "INSERT OR REPLACE INTO counters VALUES (?,?)",
	[RS_META] = "INSERT OR REPLACE INTO meta VALUES (?,?)",
	[RS_STATE] = "INSERT INTO states VALUES (?,?,?,?,?,?)",
	[RS_GPU_LIB] = "INSERT INTO gpu_libraries VALUES (?,?,?,?,?,?,?,?,?)",
	[RS_SYNC] = "INSERT INTO syncs VALUES (?,?)",
	[RS_GEN] = "INSERT INTO worker_gens VALUES (?,?,?,?,?,?)",
	[RS_GPU_PROC] = "INSERT INTO gpu_procs VALUES (?,?,?)",
	[RS_COMM] = "INSERT INTO nccl_comms VALUES (?,?,?,?,?,?,?,?,?)",
};

void rec_fail(struct recorder *r, const char *what)
{
	if (r->failed)
		return;
	r->failed = true;
	fprintf(stderr, "trainbpf: cannot %s %s: %s\n", what, r->path,
		r->db ? sqlite3_errmsg(r->db) : "out of memory");
}

int rec_exec(struct recorder *r, const char *sql, const char *what)
{
	if (r->failed)
		return -1;
	if (sqlite3_exec(r->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		rec_fail(r, what);
		return -1;
	}
	return 0;
}

int rec_step(struct recorder *r, enum rec_stmt s)
{
	sqlite3_stmt *st = r->st[s];
	int rc;

	if (r->failed)
		return -1;
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		rec_fail(r, "write");
		return -1;
	}
	return 0;
}

void rec_bind_int(struct recorder *r, enum rec_stmt s, int i, int64_t v)
{
	sqlite3_bind_int64(r->st[s], i, v);
}

void rec_bind_text(struct recorder *r, enum rec_stmt s, int i, const char *v)
{
	sqlite3_bind_text(r->st[s], i, v, -1, SQLITE_TRANSIENT);
}

void rec_bind_null(struct recorder *r, enum rec_stmt s, int i)
{
	sqlite3_bind_null(r->st[s], i);
}

void rec_bind_double(struct recorder *r, enum rec_stmt s, int i, double v)
{
	sqlite3_bind_double(r->st[s], i, v);
}

int rec_meta(struct recorder *r, const char *key, const char *value)
{
	rec_bind_text(r, RS_META, 1, key);
	rec_bind_text(r, RS_META, 2, value);
	return rec_step(r, RS_META);
}

/* A previous recording and its WAL go: a stale -wal would be replayed. */
static int remove_old(const char *path)
{
	char side[4096];

	for (const char *const *s = (const char *const[]){ "", "-wal", "-shm", NULL }; *s; s++) {
		snprintf(side, sizeof(side), "%s%s", path, *s);
		if (unlink(side) && errno != ENOENT) {
			fprintf(stderr, "trainbpf: cannot replace %s: %s\n", side, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int prepare_all(struct recorder *r)
{
	for (int i = 0; i < RS_N; i++)
		if (sqlite3_prepare_v3(r->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &r->st[i], NULL) != SQLITE_OK) {
			rec_fail(r, "prepare statements in");
			return -1;
		}
	return 0;
}

int rec_create(struct recorder *r)
{
	char pragmas[160];

	if (remove_old(r->path))
		return -1;
	if (sqlite3_open_v2(r->path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
			    NULL) != SQLITE_OK) {
		rec_fail(r, "create");
		return -1;
	}
	/* Each flush's commit is the unit of durability; no fsync per commit. */
	snprintf(pragmas, sizeof(pragmas),
		 "PRAGMA application_id=%d; PRAGMA user_version=%d;"
		 "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
		 REC_APP_ID, REC_SCHEMA_VERSION);
	if (rec_exec(r, pragmas, "create") || rec_exec(r, schema, "create"))
		return -1;
	return prepare_all(r);
}
