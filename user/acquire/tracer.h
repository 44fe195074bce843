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
#include "trainbpf.h"
#include "probes.h"
#include "clock.h"
#include "job.h"

struct trainbpf_bpf;
struct ring_buffer;

/* A ring-buffer event, checked and decoded: its kind, and its record. */
enum tracer_ev_kind {
	TR_EV_LIFECYCLE,	/* fork, exec or exit of a traced process */
	TR_EV_TEXT,		/* an epoch/step marker, or the head of a write */
	TR_EV_CALL,		/* an outermost sync, copy or NCCL call returned */
	TR_EV_COMM,		/* an NCCL communicator made or destroyed */
	TR_EV_PHASE,		/* a thread's training phase changed */
	TR_EV_SCOPE,		/* a record_function of no phase opened or closed (record) */
	TR_EV_LIBRARY,		/* a process mapped a library to probe (.life) */
	TR_EV_EXEC_SEEN,	/* a process not traced exec'ed (.pid; watch_execs) */
};

struct tracer_event {
	enum tracer_ev_kind kind;
	union {
		const struct tb_event *life;
		const struct tb_text_event *text;
		const struct tb_call_event *call;
		const struct tb_comm_event *comm;
		const struct tb_phase_event *phase;
		const struct tb_scope_event *scope;
		pid_t pid;
	};
};

/* Who hears about an event, and in what order, is the caller's to say. */
typedef void (*tracer_event_fn)(void *ctx, const struct tracer_event *ev);

struct slot_owner {
	int proc, thread;	/* indexes into job; proc -1: not known yet */
	uint64_t exited_at;	/* when its thread's exit was read; 0: alive */
	bool found;		/* user space gave it (add_thread): counted in proc_found */
};

/* The open interval of a slot read in a refresh's first pass (account.c). */
struct tracer_open {
	unsigned int slot;
	bool unknown;		/* no event yet: split from schedstat */
	uint8_t own, cp;	/* its categories, if known */
	uint8_t phase;
	unsigned int wait;	/* if unknown: the wait it is in */
	uint64_t since;
	uint64_t dcpu, drq;	/* if unknown: schedstat since registration */
};

#define TRACER_CKPT_MORE 19

struct tracer {
	struct trainbpf_bpf *skel;
	struct ring_buffer *rb;
	struct tb_slot *slots;	/* mmap of the slots map */
	size_t map_len;
	unsigned int nslots;
	unsigned int scan_end;	/* slots at or past it have never been used */
	uint64_t slots_exhausted;	/* threads found running that found no slot */
	unsigned int thread_quota;	/* tracer_opts' */
	struct slot_owner *owner;
	struct job *job;	/* the model it fills: processes, threads, totals */
	tracer_event_fn on_event;
	void *ctx;
	bool uprobe_multi;	/* the *_multi programs are loaded (uprobe_multi.h) */
	/*
	 * tracer_hooks_pause: the programs it detached (by the skeleton's
	 * index), to attach again; NULL while none is.
	 */
	bool *paused;
	/* ckpt_attach_more: the checkpoint programs' attaches beyond their SEC's */
	struct bpf_link *ckpt_more[TRACER_CKPT_MORE];
	struct tracer_open *open;	/* account_refresh's, between its passes */
	unsigned int nopen, open_cap;
};

struct tracer_opts {
	const char *btf_path;	/* NULL: the kernel's own */
	bool verbose;		/* libbpf's debug output, the verifier's log */
	unsigned int max_threads;	/* slots */
	unsigned int thread_quota;	/* slots one process may hold at once; 0: any */
	unsigned int ringbuf_kb;	/* the event ring */
	bool states;		/* the state stream on, in a ring of its own */
	unsigned int states_ring_kb;
	bool text;		/* send the heads of writes to stdout/stderr (epoch lines) */
	/*
	 * No syscall probe at all: no epoch or step markers, no lines, and
	 * libraries found at the paced looks only. A syscall tracepoint puts
	 * every task of the machine on the slow syscall path and runs for each
	 * of its writes (91 ns a call: serve's largest cost beside `perf bench
	 * sched pipe`, which writes once per switch).
	 */
	bool no_syscalls;
	bool no_phases;		/* --no-phases: no checkpoint-file syscall probes either */
	uint64_t py_period_ns;	/* --functions: the Python stack reader's sampling period; 0: off */
	bool watch_execs;	/* every exec on the node, as TR_EV_EXEC_SEEN (serve) */
	tracer_event_fn on_event;	/* gets every event drained, with ctx */
	void *ctx;
};

/* Checks privileges and BTF, loads, attaches. One line on stderr if not. */
int tracer_open(struct tracer *tr, const struct tracer_opts *o, struct job *job);
void tracer_close(struct tracer *tr);

/*
 * Traces pid (all its threads) from now on. Also used for the launched
 * command before it execs. Returns 0, -ESRCH if pid vanished, or -EMFILE,
 * -ENFILE, -ENOMEM when out of them.
 */
int tracer_add_process(struct tracer *tr, pid_t pid, bool root);
/* Adds every descendant of traced processes that /proc shows. */
void tracer_add_descendants(struct tracer *tr);

/*
 * With nothing to trace (serve, between jobs), detaches every program but
 * the exec watch, so that the node's tasks pay not even their hooks'
 * floor; tracer_add_process attaches them again first. 0, or -1 (said).
 */
int tracer_hooks_pause(struct tracer *tr);
int tracer_hooks_resume(struct tracer *tr);
static inline bool tracer_hooks_paused(const struct tracer *tr)
{
	return tr->paused != NULL;
}

/* Drains the event ring buffer into the callback. */
int tracer_drain_events(struct tracer *tr);
/* Sleeps until ms pass, a signal, or an event that asks for a wakeup. */
void tracer_wait(struct tracer *tr, int ms);
/* Copies slot idx consistently; false if free or never stable. */
bool tracer_read_slot(const struct tracer *tr, unsigned int idx,
		      struct tb_slot *out);
void tracer_free_slot(struct tracer *tr, unsigned int idx);
/* Tells BPF a process's role (data_wait needs to know the workers). */
void tracer_set_role(struct tracer *tr, pid_t pid, enum tb_role role);
/*
 * The job folded rows (job_fold): the slots' owners follow. A live thread
 * never folds; a quarantined slot's owner may now name an aggregate, but
 * it is not read again before the slot is freed.
 */
void tracer_on_fold(struct tracer *tr, const struct job_fold *f);
/* A process exited: BPF forgets its role and flags. */
void tracer_forget_process(struct tracer *tr, pid_t pid);
/* After a process exec'd: what its command line says (job.h, JOB_PF_MP_SPAWNED). */
void tracer_on_exec(struct tracer *tr, pid_t pid);
unsigned int tracer_proc_flags(const struct tracer *tr, pid_t pid);
void tracer_counters(const struct tracer *tr, struct tb_counters *out);

#endif
