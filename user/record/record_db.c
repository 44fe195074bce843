// SPDX-License-Identifier: BSD-3-Clause
/*
 * The recording's SQLite file: its creation, its schema, its prepared
 * statements, and the one-line error that stops all writing. The
 * record_*.c files write through these.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "record.h"
#include "safe_open.h"

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
"  cat INTEGER NOT NULL, cp_cat INTEGER NOT NULL, stack INTEGER);"
"CREATE TABLE epochs ("
"  source TEXT NOT NULL, label INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
"  end_ns INTEGER, complete INTEGER,"
"  seq INTEGER, step_count INTEGER, step_total_ms REAL, step_min_ms REAL,"
"  step_max_ms REAL, step_sum_sq REAL, step_syncs INTEGER, step_source TEXT,"
"  late_start INTEGER, ph_data INTEGER, ph_forward INTEGER, ph_backward INTEGER,"
"  ph_optimizer INTEGER, ph_checkpoint INTEGER, ph_validation INTEGER,"
"  ph_communication INTEGER, ph_other INTEGER, ph_critical_path TEXT);"
"CREATE TABLE epoch_procs ("
"  source TEXT NOT NULL, seq INTEGER NOT NULL,"
"  pid INTEGER NOT NULL, start_ns INTEGER, end_ns INTEGER,"
"  cpu INTEGER, gpu_wait INTEGER, comm INTEGER, data_wait INTEGER,"
"  io INTEGER, runqueue INTEGER, lock INTEGER, idle INTEGER,"
"  cp_cpu INTEGER, cp_gpu_wait INTEGER, cp_comm INTEGER, cp_data_wait INTEGER,"
"  cp_io INTEGER, cp_runqueue INTEGER, cp_lock INTEGER, cp_idle INTEGER,"
"  main_cpu INTEGER, main_gpu_wait INTEGER, main_comm INTEGER,"
"  main_data_wait INTEGER, main_io INTEGER, main_runqueue INTEGER,"
"  main_lock INTEGER, main_idle INTEGER,"
"  ppid INTEGER, role TEXT, folded INTEGER);"
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
"  pid INTEGER, summary TEXT, evidence TEXT, advice TEXT, cost REAL);"
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
"  id TEXT, api TEXT, destroyed INTEGER, calls INTEGER, bytes INTEGER, color INTEGER);"
"CREATE TABLE phase_times (tid INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  start_ns INTEGER NOT NULL, phase TEXT NOT NULL,"
"  cp_cpu INTEGER, cp_gpu_wait INTEGER, cp_comm INTEGER, cp_data_wait INTEGER,"
"  cp_io INTEGER, cp_runqueue INTEGER, cp_lock INTEGER, cp_idle INTEGER,"
"  io_write INTEGER);"
"CREATE TABLE phase_steps (tid INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  steps INTEGER, step_ms REAL, pend_data_ns INTEGER, pend_fwd_ns INTEGER,"
"  held_ns INTEGER, phase TEXT NOT NULL, wall_ns INTEGER, total_ms REAL,"
"  min_ms REAL, max_ms REAL, sum_sq REAL, fetches INTEGER, in_val INTEGER,"
"  startup_ns INTEGER, pend_start_ns INTEGER, pend_startup_ns INTEGER,"
"  osteps INTEGER, ostep_ms REAL, omicro INTEGER, o_total_ms REAL, o_min_ms REAL,"
"  o_max_ms REAL, o_sum_sq REAL);"
"CREATE TABLE phase_events (tid INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  ts_ns INTEGER NOT NULL, phase INTEGER NOT NULL, resolved INTEGER NOT NULL);"
"CREATE TABLE stall (since_ns INTEGER NOT NULL, now_ns INTEGER NOT NULL,"
"  threshold_ns INTEGER NOT NULL, culprit INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  rank INTEGER, phase INTEGER, wait INTEGER, wait_ns INTEGER, cat INTEGER,"
"  cat_ns INTEGER, api INTEGER, in_api INTEGER, worker INTEGER,"
"  worker_state INTEGER, worker_wait INTEGER, worker_ns INTEGER, behind INTEGER,"
"  behind_comm TEXT, object TEXT, api_bytes INTEGER);"
"CREATE TABLE py_funcs (id INTEGER PRIMARY KEY, name TEXT NOT NULL, file TEXT NOT NULL,"
"  line INTEGER NOT NULL);"
"CREATE TABLE py_stacks (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, hash INTEGER NOT NULL,"
"  cut INTEGER NOT NULL, frames TEXT NOT NULL);"
"CREATE TABLE py_time (stack INTEGER NOT NULL, tid INTEGER NOT NULL, phase TEXT NOT NULL,"
"  cat TEXT NOT NULL, own TEXT NOT NULL, how INTEGER NOT NULL, ns INTEGER NOT NULL,"
"  n INTEGER NOT NULL);"
"CREATE TABLE py_notes (pid INTEGER NOT NULL, read INTEGER NOT NULL, note TEXT NOT NULL);"
"CREATE TABLE py_roles (pid INTEGER NOT NULL, role INTEGER NOT NULL, loop_tid INTEGER);"
"CREATE TABLE scopes (tid INTEGER NOT NULL, pid INTEGER NOT NULL, ts_ns INTEGER NOT NULL,"
"  open INTEGER NOT NULL, depth INTEGER NOT NULL, name TEXT);"
"CREATE TABLE py_samples (tid INTEGER NOT NULL, pid INTEGER NOT NULL,"
"  ts_ns INTEGER NOT NULL, stack INTEGER NOT NULL, ns INTEGER NOT NULL);";

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
	[RS_EPOCH] = "INSERT INTO epochs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[RS_EPOCH_PROC] = "INSERT INTO epoch_procs VALUES (?,?,?,?,?,"
		"?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?, ?,?,?)",
	[RS_STEP] = "INSERT INTO steps VALUES (?,?,?,?)",
	[RS_EVENT] = "INSERT INTO events VALUES (?,?,?,?,?,?,?)",
	[RS_GPU] = "INSERT INTO gpu_calls VALUES (?,?,?,?,?,?,?,?)",
	[RS_DIAG] = "INSERT INTO diagnosis VALUES (?,?,?,?,?,?,?,?,?,?)",
	[RS_COUNTER] = "INSERT OR REPLACE INTO counters VALUES (?,?)",
	[RS_META] = "INSERT OR REPLACE INTO meta VALUES (?,?)",
	[RS_STATE] = "INSERT INTO states VALUES (?,?,?,?,?,?,?)",
	[RS_GPU_LIB] = "INSERT INTO gpu_libraries VALUES (?,?,?,?,?,?,?,?,?)",
	[RS_SYNC] = "INSERT INTO syncs VALUES (?,?)",
	[RS_GEN] = "INSERT INTO worker_gens VALUES (?,?,?,?,?,?)",
	[RS_GPU_PROC] = "INSERT INTO gpu_procs VALUES (?,?,?)",
	[RS_COMM] = "INSERT INTO nccl_comms VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
	[RS_PHASE_TIME] = "INSERT INTO phase_times VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[RS_PHASE_STEP] = "INSERT INTO phase_steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
		"?,?,?,?,?,?,?)",
	[RS_PHASE_EVENT] = "INSERT INTO phase_events VALUES (?,?,?,?,?)",
	[RS_STALL] = "INSERT INTO stall VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[RS_PY_FUNC] = "INSERT INTO py_funcs VALUES (?,?,?,?)",
	[RS_PY_STACK] = "INSERT INTO py_stacks VALUES (?,?,?,?,?)",
	[RS_PY_TIME] = "INSERT INTO py_time VALUES (?,?,?,?,?,?,?,?)",
	[RS_PY_NOTE] = "INSERT INTO py_notes VALUES (?,?,?)",
	[RS_SCOPE] = "INSERT INTO scopes VALUES (?,?,?,?,?,?)",
	[RS_PY_SAMPLE] = "INSERT INTO py_samples VALUES (?,?,?,?,?)",
	[RS_PY_ROLE] = "INSERT INTO py_roles VALUES (?,?,?)",
};

/* A write error stops the recording; the line says what is left. */
void rec_fail(struct recorder *r, const char *what)
{
	bool writing = !strcmp(what, "write");

	if (r->failed)
		return;
	r->failed = true;
	fprintf(stderr, "trainbpf: cannot %s %s: %s%s\n", what, r->path,
		r->db ? sqlite3_errmsg(r->db) : "out of memory",
		writing ? ": recording stopped, the file keeps what was committed" : "");
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

static int file_fail(struct recorder *r, const char *fmt, ...)
{
	va_list ap;

	r->failed = true;
	va_start(ap, fmt);
	fputs("trainbpf: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return -1;
}

/* The first page of a trainbpf recording: SQLite's magic, our application_id. */
static bool is_recording(int fd)
{
	unsigned char h[100];

	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, "SQLite format 3", 16))
		return false;
	return ((uint32_t)h[68] << 24 | h[69] << 16 | h[70] << 8 | h[71]) == REC_APP_ID;
}

static int lock(struct recorder *r)
{
	if (!flock(r->fd, LOCK_EX | LOCK_NB))
		return 0;
	return errno == EWOULDBLOCK ?
		file_fail(r, "%s is being written by another trainbpf", r->path) :
		file_fail(r, "cannot lock %s: %s", r->path, strerror(errno));
}

/*
 * An earlier recording goes as a whole: its name is removed and a new file
 * made, so that a reader that has it open keeps reading it, untouched.
 */
static int replace(struct recorder *r)
{
	char why[SAFE_WHY_LEN];
	bool created;

	if (!is_recording(r->fd))
		return file_fail(r, "%s is not a trainbpf recording: not replaced", r->path);
	if (safe_unlink(r->path, why, sizeof(why)))
		return file_fail(r, "cannot replace %s: %s", r->path, why);
	close(r->fd);
	r->fd = safe_open(r->path, O_RDWR, SAFE_EXCL | SAFE_REGULAR, &created, why, sizeof(why));
	if (r->fd < 0)
		return file_fail(r, "cannot create %s: %s", r->path, why);
	if (lock(r))
		return -1;
	r->made = true;
	return 0;
}

/*
 * What the path holds may go: nothing (new, or an empty file), or a
 * recording the user said to replace. Locked for the whole recording: a
 * second trainbpf on the same file stops here.
 */
static int claim(struct recorder *r, bool created, bool force)
{
	struct stat st;

	if (lock(r))
		return -1;
	r->made = created;
	if (created || (!fstat(r->fd, &st) && st.st_size == 0))
		return 0;
	if (!force)
		return file_fail(r, "%s exists: use --force to replace a recording", r->path);
	return replace(r);
}

#define REC_BUSY_MS 2000	/* open_file: how long a reader may hold the file up */

static const char *const sides[] = { "-wal", "-shm", "-journal" };
#define NSIDES_MADE 2	/* -wal and -shm; no rollback journal is used */

static void side_path(char *buf, size_t len, const struct recorder *r, int i)
{
	snprintf(buf, len, "%s%s", r->path, sides[i]);
}

/*
 * SQLite's files beside it. One left there would be replayed into the new
 * recording: it goes (with --force) or stops the start. Then the -wal and
 * -shm are made here, empty and 0600, so that SQLite opens files that are
 * ours, not names another user could take first.
 */
static int claim_sides(struct recorder *r, bool force)
{
	char side[4096], why[SAFE_WHY_LEN];
	struct stat st;
	bool made;
	int fd;

	for (int i = 0; i < (int)(sizeof(sides) / sizeof(sides[0])); i++) {
		side_path(side, sizeof(side), r, i);
		if (lstat(side, &st) && errno == ENOENT)
			continue;
		if (!force)
			return file_fail(r, "%s exists (left by an earlier recording): use --force "
					 "to replace it", side);
		if (safe_unlink(side, why, sizeof(why)))
			return file_fail(r, "cannot replace %s: %s", side, why);
	}
	for (; r->sides_made < NSIDES_MADE; r->sides_made++) {
		side_path(side, sizeof(side), r, r->sides_made);
		fd = safe_open(side, O_RDWR, SAFE_EXCL | SAFE_REGULAR, &made, why, sizeof(why));
		if (fd < 0)
			return file_fail(r, "cannot create %s: %s", side, why);
		close(fd);
	}
	return 0;
}

/*
 * SQLite opens files by name, never from a descriptor: the file is made
 * (O_EXCL, 0600, no link followed) and locked first, then SQLite opens
 * that name, and the file it got must be ours. In a sticky directory
 * nobody else can rename or remove a file we own in between; elsewhere
 * the directory's owner is trusted, as the kernel trusts it.
 */
static int open_file(struct recorder *r, bool force)
{
	char why[SAFE_WHY_LEN];
	bool created;

	r->fd = safe_open(r->path, O_RDWR, SAFE_REGULAR, &created, why, sizeof(why));
	if (r->fd < 0)
		return file_fail(r, "cannot create %s: %s", r->path, why);
	if (claim(r, created, force) || claim_sides(r, force))
		return -1;
	if (sqlite3_open_v2(r->path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW,
			    NULL) != SQLITE_OK) {
		rec_fail(r, "create");
		return -1;
	}
	/*
	 * A reader of the file (a `trainbpf report` in a loop, a test polling
	 * it) holds a shared lock for a moment: the header's write and the
	 * switch to WAL wait that moment out instead of failing the recording
	 * ("database is locked": 3 starts in 10 beside a reader in a loop).
	 * Later commits go to the WAL, which readers do not block.
	 */
	sqlite3_busy_timeout(r->db, REC_BUSY_MS);
	if (!safe_same_file(r->fd, r->path)) {
		r->made = false;	/* not ours to remove */
		return file_fail(r, "cannot create %s: it was replaced while being opened",
				 r->path);
	}
	return 0;
}

/* A start that failed takes back what it made: no half-made file is left. */
void rec_unmake(struct recorder *r)
{
	char side[4096], why[SAFE_WHY_LEN];

	for (int i = 0; i < r->sides_made; i++) {
		side_path(side, sizeof(side), r, i);
		safe_unlink(side, why, sizeof(why));
	}
	if (r->made && safe_same_file(r->fd, r->path))
		safe_unlink(r->path, why, sizeof(why));
	r->sides_made = 0;
	r->made = false;
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

int rec_create(struct recorder *r, bool force)
{
	char pragmas[200];

	if (open_file(r, force))
		return -1;
	/*
	 * The header goes straight into the new file (no rollback journal
	 * beside it; the file is empty until this succeeds), so that even a
	 * recording cut by kill -9 carries its application_id in the file
	 * itself (--force checks it). Then WAL: each flush's commit is the
	 * unit of durability; no fsync per commit.
	 */
	snprintf(pragmas, sizeof(pragmas),
		 "PRAGMA journal_mode=MEMORY; PRAGMA application_id=%d; PRAGMA user_version=%d;"
		 "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
		 REC_APP_ID, REC_SCHEMA_VERSION);
	if (rec_exec(r, pragmas, "create") || rec_exec(r, schema, "create"))
		return -1;
	return prepare_all(r);
}
