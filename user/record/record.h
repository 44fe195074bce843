/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trainbpf record: the job as the live tool sees it, into one SQLite file
 * (schema and contract: docs/recording.md). Between flushes the recorder
 * only queues what happened (events, step markers); a flush writes, in one
 * transaction, each thread's gains since its last row, the processes and
 * threads that are new or changed, the epochs that closed and the queued
 * events. WAL mode and a commit per flush: a recording cut by kill -9
 * holds everything up to the last flush.
 *
 * Files: record.c (start, flushes, end), record_db.c (the file, schema,
 * statements), record_job.c (processes, threads, samples),
 * record_events.c (events, epochs, steps), record_final.c (what is only
 * known at the end), record_states.c (the state stream).
 */
#ifndef TB_RECORD_H
#define TB_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "job.h"
#include "pystacks.h"
#include "epochs.h"
#include "gpu_util.h"
#include "recording.h"

struct session;

struct sqlite3;
struct sqlite3_stmt;

#define REC_FLUSH_NS 1000000000ull
/*
 * A thread that only slept since its last row gets a row at most this
 * often: idle pool threads would otherwise fill most of the file with
 * rows of one number. Its sum is unchanged (the row carries all of it).
 */
#define REC_IDLE_ROW_NS 60000000000ull

/* What the last row of a thread said, to write the next one as gains. */
struct rec_thread {
	uint64_t own[TB_NCAT], cp[TB_NCAT];
	uint64_t rbytes, wbytes, nswitch;
	uint64_t row_ns;	/* when its last row was written */
	uint64_t end_ns;	/* as last written */
	char comm[TB_COMM_LEN];
	bool known;		/* its threads row exists */
};

/* What the processes row says, to rewrite it only when it changes. */
struct rec_proc {
	struct rec_thread *th;	/* parallel to proc_rec.threads */
	int nth;
	bool known;
	uint64_t start_ns, end_ns;
	pid_t ppid;
	int role, rank;
	unsigned int flags;
	char comm[TB_COMM_LEN];
	char exe[TB_PATH_LEN];
};

/* A lifecycle or text event, queued until the next flush. */
struct rec_event {
	uint64_t ts;
	const char *type;	/* fork | exec | exit | mark | text */
	pid_t pid, tid, ppid;	/* 0: not known (NULL) */
	int code;
	bool has_code;
	char text[TB_TEXT_LEN + 1];
};

struct rec_step {
	uint64_t ts;
	pid_t pid, tid;		/* tid: a loop step's thread */
	enum ep_step_src src;	/* marker, fetch or backward */
};

/* A phase change, for the trace's phase spans (docs/recording.md). */
struct rec_phase {
	uint64_t ts;
	pid_t pid, tid;
	unsigned char phase, resolved;
};

/* A record_function bracket of no phase opened (name) or closed, for the trace. */
struct rec_scope {
	uint64_t ts;
	pid_t pid, tid;
	unsigned char open, depth;
	char name[PY_SCOPE_NAME_LEN];	/* as UTF-8 */
};

enum rec_stmt {
	RS_SAMPLE, RS_PROC, RS_PROC_REKEY, RS_THREAD, RS_EPOCH, RS_STEP, RS_EVENT,
	RS_GPU, RS_DIAG, RS_COUNTER, RS_META, RS_STATE, RS_GPU_LIB, RS_SYNC, RS_GEN,
	RS_EPOCH_PROC, RS_GPU_PROC, RS_COMM, RS_PHASE_TIME, RS_PHASE_STEP, RS_PHASE_EVENT,
	RS_STALL, RS_PY_FUNC, RS_PY_STACK, RS_PY_TIME, RS_PY_NOTE, RS_PY_ROLE, RS_SCOPE, RS_PY_SAMPLE, RS_N,
};

/* Schema 4's GPU tables (record_gpu.c): their statements and what was written. */
enum rec_gpu_stmt { RG_DEV, RG_WIN, RG_SAMPLE, RG_N };
struct rec_gpu {
	struct sqlite3_stmt *st[RG_N];
	bool meta_done;
	uint64_t dev_ts[GU_MAX_DEVS];		/* each series' last reading written */
	uint64_t proc_ts[GU_MAX_PROCS];
	pid_t proc_pid[GU_MAX_PROCS];		/* whose series the slot held then */
	uint64_t rows, dropped;			/* gpu_samples written; past the cap */
};

/* GPU readings kept for the trace (~50 bytes a row: ~0.1 GB; 20 a second for 2 GPUs: 27 h). */
#define REC_GPU_MAX_ROWS 2000000ull

struct recorder {
	struct sqlite3 *db;
	const char *path;
	int fd;			/* the file, flock'ed while recording (record_db.c) */
	bool made;		/* the file is new: a failed start removes it */
	int sides_made;		/* -wal, -shm made empty before SQLite opens them */
	struct sqlite3_stmt *st[RS_N];
	bool failed;		/* one error said; nothing more is written */
	struct rec_proc *procs;	/* parallel to job->procs */
	int nprocs;
	struct rec_event *ev;
	int nev, capev;
	struct rec_step *steps;
	int nsteps, capsteps;
	struct rec_phase *ph;
	int nph, capph;
	uint64_t ph_rows, ph_dropped;	/* phase_events written; past the cap */
	struct rec_scope *sc;
	int nsc, capsc;
	uint64_t sc_rows, sc_dropped;	/* scopes written; past the cap */
	long marker_steps;	/* epochs->marks.seen already queued */
	long loop_steps;	/* epochs->loop.seen already queued */
	long optim_steps;	/* epochs->optim.seen already queued (schema 9) */
	long epochs_written[EP_NSRC];	/* ep_stream.closed as last written */
	uint64_t next_flush;
	uint64_t flushed_ns;	/* the refresh the last flush wrote (0: none) */
	/* for the counters table: what recording cost */
	uint64_t flushes, rows, flush_ns_max, flush_ns_sum;
	uint64_t states_rows, states_dropped;	/* record_states.c */
	bool job_id_written;	/* meta job: the training job, for merged reports */
	struct rec_gpu gpu;	/* record_gpu.c */
	int py_nfn, py_nst;	/* record_py.c: functions and stacks written */
	bool py_meta_done;
};

/*
 * Phase changes kept for the trace (~20 bytes a row: ~40 MB): 14 a step,
 * so 40 hours at one step a second, 2 at 20 a second. The phase table
 * does not need them (phase_times, phase_steps); the trace's phase
 * tracks stop at the cap, and the counters say how many were dropped.
 */
#define REC_PHASE_MAX_ROWS 2000000ull

/* record_function brackets kept for the trace (~60 bytes a row: 0.1 GB), as the phases. */
#define REC_SCOPE_MAX_ROWS 2000000ull

/* States rows kept (~40 bytes each with the index-free table: ~0.1 GB). */
#define REC_STATES_MAX_ROWS 2500000ull

/* What the meta table says of how the run was started. */
struct record_meta {
	const char *command;		/* the traced command line, or "-p PID,..." */
	const char *epochs_wanted;	/* --epochs as given: "auto", "interval:60" */
};

/*
 * Creates path, the schema and the meta rows known at the start. An
 * existing file is refused unless it is empty, or a recording and force
 * is set; a file another trainbpf is recording is refused. One line on
 * stderr and -1 on error; what a failed start made is removed.
 */
int record_open(struct recorder *r, const char *path, bool force,
		const struct record_meta *m, const struct session *ses);
/* Closes the file; the recording stays incomplete unless finished. */
void record_close(struct recorder *r);

/*
 * After each refresh: flushes when a second passed or an epoch closed,
 * with BPF's counters as of now. -1: failed.
 */
int record_tick(struct recorder *r, const struct session *ses,
		const struct tb_counters *bpf, uint64_t now);
/* At the end, after the last refresh and epochs_finish. -1: failed. */
int record_finish(struct recorder *r, const struct session *ses,
		  const struct tb_counters *bpf, uint64_t now);

/* From the ring buffer (tracer.c): queued for the next flush. */
void record_on_lifecycle(struct recorder *r, const struct tb_event *e);
/* A record_function bracket of no phase opened or closed (TB_EV_SCOPE). */
void record_on_scope(struct recorder *r, const struct tb_scope_event *e);
void record_on_phase(struct recorder *r, const struct epochs *ep,
		     const struct tb_phase_event *e);
void record_on_text(struct recorder *r, const struct epochs *ep,
		    const struct tb_text_event *e);

/* record_job.c: processes, threads, samples of one flush; -1 on error. */
int record_job(struct recorder *r, const struct session *ses, uint64_t now, bool last);
/* The job folded rows (job_fold, after the flush that wrote them): r->procs follows. */
void record_on_fold(struct recorder *r, const struct job *job, const struct job_fold *f);
/* record_events.c: queued events and steps, closed epochs; -1 on error. */
int record_events(struct recorder *r, const struct session *ses);
struct steps;
/* At the end: the steps found from the call period (not final before). */
int record_call_steps(struct recorder *r, const struct steps *st);
/* Whether an epoch closed since the last flush. */
bool record_epoch_closed(const struct recorder *r, const struct session *ses);
/*
 * record_states.c: a batch of the state stream into `states`, bounded; a
 * states_fn (states.h) with the recorder as ctx. 0, or -1 once failed.
 */
int record_insert_states(void *ctx, const struct tb_state_rec *recs, size_t n);
/* record_final.c: gpu_calls, diagnosis, counters. */
int record_counters(struct recorder *r, const struct job *job,
		    const struct tb_counters *bpf);
int record_final(struct recorder *r, const struct session *ses, uint64_t now);
/* The stalled job as the live report shows it now (schema 10), at every flush. */
int record_stall(struct recorder *r, const struct session *ses);
/*
 * --functions (schema 12): the functions and stacks named since the last
 * flush, appended; the time per stack, the interpreters' notes and the
 * processes' roles, rewritten (record_py.c). Nothing without --functions.
 */
int record_pystacks(struct recorder *r, const struct session *ses);

/*
 * record_gpu.c, schema 4: its tables (at create), each flush's readings,
 * an epoch's window (with its epochs row), the run's at the end.
 */
int record_gpu_schema(struct recorder *r);
void record_gpu_close(struct recorder *r);
int record_gpu_flush(struct recorder *r, const struct session *ses);
int record_gpu_epoch(struct recorder *r, enum ep_source s, int seq, const struct epoch *e);
int record_gpu_final(struct recorder *r, const struct session *ses, uint64_t now);

/*
 * record_db.c, under the record_*.c files: the file with its schema and
 * statements (the rules of record_open), a statement or SQL text run (-1
 * on error, said once), binds, a meta row.
 */
int rec_create(struct recorder *r, bool force);
/* After a failed start, SQLite closed: removes the files rec_create made. */
void rec_unmake(struct recorder *r);
int rec_exec(struct recorder *r, const char *sql, const char *what);
int rec_step(struct recorder *r, enum rec_stmt s);	/* runs, resets; -1 on error */
void rec_fail(struct recorder *r, const char *what);
int rec_meta(struct recorder *r, const char *key, const char *value);
void rec_bind_int(struct recorder *r, enum rec_stmt s, int i, int64_t v);
void rec_bind_text(struct recorder *r, enum rec_stmt s, int i, const char *v);
void rec_bind_null(struct recorder *r, enum rec_stmt s, int i);
void rec_bind_double(struct recorder *r, enum rec_stmt s, int i, double v);

#endif
