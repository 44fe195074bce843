/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Python stacks of a run (--functions): the functions named (a code
 * object's name, file and first line), the stacks read (functions,
 * innermost first) and the time charged to each stack, per thread, phase,
 * category and how it was taken (include/pystack.h). Filled by
 * acquire/pystacks.c from what BPF read; the reports read it.
 */
#ifndef TB_PYSTACKS_H
#define TB_PYSTACKS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include "phase_spans.h"
#include "pystack.h"
#include "trainbpf.h"

#define PY_NAME_LEN 96
#define PY_FILE_LEN 160

/*
 * The user's record_function("name") scope, as a frame of the stacks read
 * inside it (acquire/pyreader.c, pystacks_place_scope): its file and line.
 */
#define PY_SCOPE_FILE "<record_function>"

/*
 * Frames a stack may have: BPF's, and one per record_function scope open
 * around them (a bracket each, TB_NBRACKET at most).
 */
#define PY_STACK_MAX (TB_PY_DEPTH + TB_NBRACKET + 1)

struct py_func {
	char name[PY_NAME_LEN];	/* co_qualname (3.11+), else co_name */
	char file[PY_FILE_LEN];	/* co_filename */
	int line;		/* co_firstlineno */
	bool compiler;		/* torch.compile's compiler at work (pystacks_func) */
};

struct py_stack {
	pid_t tgid;
	uint64_t hash;		/* BPF's (tb_py_stack_key) */
	int depth;
	/*
	 * Frames not kept: BPF's (include/pystack.h), those between
	 * fn[TB_PY_INNER - 1] and fn[TB_PY_INNER], | TB_PY_CUT_OUTER when
	 * the outermost were not reached (fn ends short of them).
	 */
	uint32_t cut;
	int *fn;		/* depth function indexes, innermost first */
};

/*
 * A scope's name as BPF sent it (cut anywhere, the job's bytes) into out
 * as valid UTF-8 (PY_SCOPE_NAME_LEN).
 */
#define PY_SCOPE_NAME_LEN (TB_PY_SCOPE_NAME * 3)	/* each byte may become U+FFFD */
void pystacks_scope_name(char *out, size_t len, const struct tb_py_scope_name *nm);

/* Whether a function (file, line) is a record_function scope's frame, not Python code. */
static inline bool py_is_scope(const char *file, int line)
{
	return line == 0 && !strcmp(file, PY_SCOPE_FILE);
}

static inline bool py_func_is_scope(const struct py_func *f)
{
	return py_is_scope(f->file, f->line);
}

/* Frames not kept between the innermost and the outermost. */
static inline uint32_t py_stack_cut(const struct py_stack *st)
{
	return st->cut & ~TB_PY_CUT_OUTER;
}

/* Whether the outermost frames were not reached: fn[depth - 1] is not the first call. */
static inline bool py_stack_outer_lost(const struct py_stack *st)
{
	return st->cut & TB_PY_CUT_OUTER;
}

struct py_row {
	int stack;		/* index into stacks */
	pid_t tid;
	uint8_t phase;		/* enum ph_shown: its span's, resolved as the phase table does */
	uint8_t cat;		/* enum tb_cat, on the critical path */
	uint8_t own;		/* enum tb_cat, the thread's own state */
	uint8_t how;		/* enum tb_py_how */
	uint64_t ns, n;
};

/* A process's interpreter, as the reader found it (or why not). */
struct py_note {
	pid_t pid;
	bool read;		/* its stacks are read */
	char text[200];
};

/*
 * What a process was when last seen (its role, the thread that runs its
 * loop): kept here, since the job folds exited processes and their
 * threads' ids away.
 */
struct py_proc_role {
	pid_t pid;
	uint8_t role;		/* enum tb_role */
	pid_t loop_tid;		/* a trainer's loop thread (job_trainer_thread); 0 */
};

/* A span of a thread's phase events whose time may still be in BPF. */
struct py_span {
	uint32_t seq;		/* the event that began it: the thread's seq-th */
	uint64_t start;
	int phase;		/* enum ph_shown; -1 until its step says */
	unsigned int raw;	/* enum tb_phase: the event's */
};

/* A thread that sent phase events: its spans, replayed as the phase table does. */
struct py_thread {
	pid_t pid, tid;
	uint32_t seq;		/* its events, lost ones counted: the span under way */
	struct ph_spans sp;
	struct py_span *spans;
	int nspans, cap;
	bool ended;		/* pystacks_finish settled the rest: the last span is teardown */
};

/* An index of 64-bit keys to array positions; the owner checks a hit. */
struct py_index {
	uint64_t *keys;
	int *pos;
	int cap, n;
};

struct pystacks {
	struct py_func *fn;
	int nfn, capfn;
	struct py_stack *st;
	int nst, capst;
	struct py_row *rows;
	int nrows, caprows;
	struct py_note *notes;
	int nnotes, capnotes;
	struct py_index fnidx, stidx, rowidx;
	uint64_t period_ns;	/* the on-CPU sampler's period */
	struct tb_py_counters bpf;	/* as BPF last counted */
	uint64_t rows_dropped;	/* time of stacks never named: not kept */
	uint64_t scopes_unplaced;	/* stacks in a record_function its opening frames
					 * were not on (pystacks_place_scope): as read */
	struct py_thread *th;
	int nth, capth;
	struct py_proc_role *roles;
	int nroles, caproles;
};

void pystacks_init(struct pystacks *m, uint64_t period_ns);
void pystacks_free(struct pystacks *m);

/* The function's index, added if new; -1 out of memory. */
int pystacks_func(struct pystacks *m, const char *name, const char *file, int line);
/*
 * A stack read inside a record_function scope (raw: its frames, innermost
 * first, n of them, none cut) with the scope's frame (fn scope) put right
 * inside the frame that opened it, into out (cap frames): that frame is
 * the one outside the innermost record_function.__enter__ (and the
 * decorator frames of contextlib around it) of the stack read as it
 * opened (open, on frames, its own scopes placed), which raw's outermost
 * frames must be. Its depth; -1 if they are not (a generator that opened
 * it, resumed from elsewhere) or out is too small.
 */
int pystacks_place_scope(const struct pystacks *m, const int *raw, int n, const int *open,
			 int on, int scope, int *out, int cap);
/* The stack's index, or -1 if not added yet. */
int pystacks_find(const struct pystacks *m, pid_t tgid, uint64_t hash);
/* Adds a stack of depth functions (innermost first); its index, -1 out of memory. */
int pystacks_add(struct pystacks *m, pid_t tgid, uint64_t hash, const int *fn, int depth,
		 uint32_t cut);
/* Adds time to a row (phase: enum ph_shown); the row is made if new. */
int pystacks_add_time(struct pystacks *m, int stack, pid_t tid, int phase, int cat, int own,
		      int how, uint64_t ns, uint64_t n);
/* A process's note, replaced if it has one. */
void pystacks_note(struct pystacks *m, pid_t pid, bool read, const char *text);

/* Keeps what a process is now (role: enum tb_role; loop_tid: 0 if none). */
void pystacks_set_role(struct pystacks *m, pid_t pid, int role, pid_t loop_tid);
const struct py_proc_role *pystacks_role(const struct pystacks *m, pid_t pid);

/* A phase event: its thread's span count, and the span it begins. */
void pystacks_on_phase(struct pystacks *m, const struct tb_phase_event *e);
/*
 * Where the time tid charged in its span seq goes (enum ph_shown; raw,
 * BPF's phase then, if the span is not known); -1 while its step has not
 * said. *final: the span is over (no more time comes to it) and placed.
 */
int pystacks_phase_of(struct pystacks *m, pid_t tid, uint32_t seq, int raw, bool *final);
/* After a pass that moved every final span's time out: those spans go. */
void pystacks_prune(struct pystacks *m);
/* The end of the trace at end: every span settled, as the phase table settles. */
void pystacks_finish(struct pystacks *m, uint64_t end);

#endif
