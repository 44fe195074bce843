/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Python stack reader's user space (--functions): for each traced
 * process, finds its interpreter by the symbols it exports (_PyRuntime,
 * Py_Version; in the executable or libpython), tells BPF where its frames
 * are and which threads are Python threads, samples the running threads,
 * and names what BPF read into model/pystacks.c.
 */
#ifndef TB_PYREADER_H
#define TB_PYREADER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "pylayouts.h"

struct tracer;
struct job;
struct pystacks;
struct bpf_link;

struct py_proc {
	pid_t pid;
	uint64_t exe_dev, exe_ino;	/* its executable when looked at: an exec looks again */
	int looks;		/* looked for an interpreter, not found (PY_LOOKS at most) */
	int wait;		/* ticks until the next look */
	bool on;		/* found: its layout is in BPF */
	int mem;		/* /proc/PID/mem, -1 */
	uint64_t runtime;	/* _PyRuntime */
	struct py_offsets off;
	uint64_t *ids;		/* the Python threads published (pthread ids) */
	int nids, capids;
	/* code objects named in this process: address -> function, sorted */
	uint64_t *code;
	int *fn;
	int ncode, capcode, capfn;
};

struct pyreader {
	struct tracer *tr;
	struct pystacks *m;
	struct py_proc *procs;
	int nprocs, capprocs;
	struct bpf_link **links;	/* the sampler, one per CPU */
	int nlinks;
};

/*
 * Attaches the on-CPU sampler (every CPU, period_ns of CPU time a sample).
 * 0, or -1 with a line on stderr.
 */
int pyreader_open(struct pyreader *pr, struct tracer *tr, struct pystacks *m);
/* Each tick: new processes looked at, Python threads published, stacks named. */
void pyreader_tick(struct pyreader *pr, const struct job *job);
/* At the end (end: the trace's): every span settled, all the time read. */
void pyreader_finish(struct pyreader *pr, uint64_t end);
void pyreader_close(struct pyreader *pr);
/* Where the i-th frame kept (innermost first) of a stack BPF read is in its code[]. */
unsigned int pyreader_slot(unsigned int i, uint32_t cut);

#endif
