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
#include <sys/types.h>
#include "trainbpf.h"

#define PY_NAME_LEN 96
#define PY_FILE_LEN 160

struct py_func {
	char name[PY_NAME_LEN];	/* co_qualname (3.11+), else co_name */
	char file[PY_FILE_LEN];	/* co_filename */
	int line;		/* co_firstlineno */
};

struct py_stack {
	pid_t tgid;
	uint64_t hash;		/* BPF's (tb_py_stack_key) */
	int depth;
	int cut;		/* outer frames not read (deeper than TB_PY_DEPTH) */
	int *fn;		/* depth function indexes, innermost first */
};

struct py_row {
	int stack;		/* index into stacks */
	pid_t tid;
	uint8_t phase;		/* enum tb_phase, as the thread was then */
	uint8_t cat;		/* enum tb_cat, on the critical path */
	uint8_t how;		/* enum tb_py_how */
	uint64_t ns, n;
};

/* A process's interpreter, as the reader found it (or why not). */
struct py_note {
	pid_t pid;
	bool read;		/* its stacks are read */
	char text[200];
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
	uint64_t rows_dropped;	/* rows of stacks never named: not kept */
};

void pystacks_init(struct pystacks *m, uint64_t period_ns);
void pystacks_free(struct pystacks *m);

/* The function's index, added if new; -1 out of memory. */
int pystacks_func(struct pystacks *m, const char *name, const char *file, int line);
/* The stack's index, or -1 if not added yet. */
int pystacks_find(const struct pystacks *m, pid_t tgid, uint64_t hash);
/* Adds a stack of depth functions (innermost first); its index, -1 out of memory. */
int pystacks_add(struct pystacks *m, pid_t tgid, uint64_t hash, const int *fn, int depth,
		 int cut);
/* Sets the time of a row (BPF keeps running sums): added if new. */
int pystacks_set_time(struct pystacks *m, int stack, pid_t tid, int phase, int cat, int how,
		      uint64_t ns, uint64_t n);
/* A process's note, replaced if it has one. */
void pystacks_note(struct pystacks *m, pid_t pid, bool read, const char *text);

/* The phase a row's time belongs to in the phase table's terms (enum tb_phase, resolved). */
int pystacks_row_phase(const struct py_row *r);

#endif
