/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading a recording (docs/recording.md) back into the structures the
 * live tool reports from: the job with its processes, threads and their
 * totals summed from the flushes, the epochs with per-process deltas, the
 * steps, the CUDA/NCCL counts and the diagnosis as it was judged. The
 * reports then print a recording exactly as they print a live run.
 */
#ifndef TB_RECORDING_READ_H
#define TB_RECORDING_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "gpu_util.h"
#include "job.h"
#include "phases.h"
#include "recording.h"
#include "session.h"
#include "stall.h"
#include "steps.h"


struct sqlite3;
struct sqlite3_stmt;

/* What to load: the whole run, or one epoch's window, or one process. */
struct rec_filter {
	bool epoch_set;
	long epoch;		/* label, of the reported epoch source */
	pid_t pid;		/* 0: every process */
	bool fold;		/* fold what the live tool would have (job_fold) */
};

struct recording {
	struct sqlite3 *db;
	const char *path;
	/*
	 * What the reports read. gu: schema 4, the GPU's own side
	 * (recording_read_gpu.c); stall: schema 10, the stalled job the run
	 * ended in.
	 */
	struct session ses;
	bool has_phases;	/* meta.phases_source: the run looked for phases */
	struct dg_saved *saved;
	int nsaved;
	struct tb_counters bpf;
	uint64_t start_ns, end_ns;	/* the recording (or the epoch's window) */
	bool complete;		/* meta.complete: it ended cleanly */
	uint64_t states_lost;	/* meta.states_lost, else counters.states_lost */
	int version;		/* user_version: 1 is read the old way */
	char job_id[JOB_ID_LEN];	/* meta job: the training job ("": not known) */
	char host[256];		/* meta hostname */
	char command[1024];	/* meta command: the traced command line, or "-p PID,..." */
	int world_size;		/* meta world_size; -1 */
	uint64_t loop_done;	/* meta steps_loop_done_ns (schema 9): epochs.h */
	uint64_t optim_done;	/* meta steps_optim_done_ns (schema 9) */
	bool optim_multi;	/* meta steps_optim_multi (schema 9) */
	bool has_loop_done;
	char *tmpdir;		/* recording_open.c: a private copy's directory */
};

/*
 * Opens path read-only and checks that it is a recording this build can
 * read. On failure writes one line into err and returns -1.
 */
int rec_open(struct recording *r, const char *path, char *err, size_t errlen);
/* Loads everything the reports need; -1 and a line in err on failure. */
int rec_load(struct recording *r, const struct rec_filter *flt, char *err, size_t errlen);
void rec_close(struct recording *r);
/*
 * recording_open.c: r->db opened read-only, with no file made beside path
 * (a finished recording, one being written, one cut by kill -9, a -wal
 * whose -shm is gone); -1 and a line in err.
 */
int rec_open_file(struct recording *r, const char *path, char *err, size_t errlen);
void rec_close_file(struct recording *r);
/*
 * Runs sql and calls row for each result row, checking every step: 0, or
 * -1 and a line in err (a corrupt page half-way through a table).
 */
int rec_query(struct recording *r, const char *sql,
	      void (*row)(struct sqlite3_stmt *st, void *arg), void *arg,
	      char *err, size_t errlen);

/*
 * The pieces every reader of a table shares (recording_read.c). A
 * statement's end: finalized, and -1 with a line in err unless its last
 * step was SQLITE_DONE (a corrupt page half-way through a table).
 */
int rec_stmt_done(struct recording *r, struct sqlite3_stmt *st, int rc,
		  char *err, size_t errlen);
/* A text column, "" for NULL: every column may be NULL in a hostile file. */
const char *rec_col_str(struct sqlite3_stmt *st, int i);
/* Times and counts are unsigned in the structures: a negative one is bad data, 0. */
uint64_t rec_col_u64(struct sqlite3_stmt *st, int i);
/* The index of s (NULL: none) among names[0..n), or -1: a name this build does not know. */
int rec_name_index(const char *s, const char *const *names, int n);

/*
 * recording_read_gpu.c: schema 4's GPU tables into r->ses.gu; an older
 * file leaves it GU_NOT_TRIED. After the epochs are picked.
 */
int rec_load_gpu_util(struct recording *r, const struct rec_filter *flt,
		      char *err, size_t errlen);

/*
 * recording_read_py.c: schema 12's Python stacks into r->ses.py (py_on)
 * when the run was recorded with --functions and no filter cuts it.
 */
int rec_load_py(struct recording *r, const struct rec_filter *flt, char *err, size_t errlen);

/* The counters of report_text/report_json. */
void rec_counters(const struct recording *r, struct run_counters *out);

#endif
