/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The BPF side seen from user space: loading and attaching the programs,
 * the mmap'ed slot array, handing slots to threads that already run, and
 * draining lifecycle events into the job.
 */
#ifndef TB_TRACER_H
#define TB_TRACER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "cli.h"
#include "clock.h"
#include "job.h"

struct trainbpf_bpf;
struct ring_buffer;
struct gpu;
struct states;
struct recorder;

struct slot_owner {
	int proc, thread;	/* indexes into job; proc -1: not known yet */
	uint64_t exited_at;	/* when its thread's exit was read; 0: alive */
};

struct tracer {
	struct trainbpf_bpf *skel;
	struct ring_buffer *rb;
	struct tb_slot *slots;	/* mmap of the slots map */
	size_t map_len;
	unsigned int nslots;
	unsigned int scan_end;	/* slots at or past it have never been used */
	struct slot_owner *owner;
	struct job *job;
	struct gpu *gpu;	/* NULL until the GPU side is set up */
	struct states *states;	/* the state stream's consumer, or NULL */
	struct recorder *rec;	/* trainbpf record: gets the events too; else NULL */
	bool uprobe_multi;	/* the *_multi programs are loaded (uprobe_multi.h) */
};

/* Checks privileges and BTF, loads, attaches. One line on stderr if not. */
int tracer_open(struct tracer *tr, const struct env *env, struct job *job);
void tracer_close(struct tracer *tr);

/*
 * Traces pid (all its threads) from now on. Also used for the launched
 * command before it execs. Returns 0, or -1 if pid vanished.
 */
int tracer_add_process(struct tracer *tr, pid_t pid, bool root);
/* Adds every descendant of traced processes that /proc shows. */
void tracer_add_descendants(struct tracer *tr);

/* Drains lifecycle events, and the state stream when it has a consumer. */
int tracer_drain_events(struct tracer *tr);
/* Sleeps until ms pass, a signal, or an event that asks for a wakeup. */
void tracer_wait(struct tracer *tr, int ms);
/* Copies slot idx consistently; false if free or never stable. */
bool tracer_read_slot(const struct tracer *tr, unsigned int idx,
		      struct tb_slot *out);
void tracer_free_slot(struct tracer *tr, unsigned int idx);
/* Tells BPF a process's role (data_wait needs to know the workers). */
void tracer_set_role(struct tracer *tr, pid_t pid, enum tb_role role);
unsigned int tracer_proc_flags(const struct tracer *tr, pid_t pid);
void tracer_counters(const struct tracer *tr, struct tb_counters *out);

#endif
