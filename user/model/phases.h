/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Training phases as the reports show them. Each thread's time by phase
 * and category comes from BPF (thread_rec.ph, bpf/torch.bpf.h); the
 * phases of each step, from the phase events: a step runs from one
 * DataLoader fetch to the next, and its pending part is resolved the way
 * BPF resolved it (the event says how). Shown phases fold a step that is
 * still pending at the end into data and forward, as the steps before it
 * mostly were.
 */
#ifndef TB_PHASES_H
#define TB_PHASES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "probes.h"
#include "passes.h"
#include "phase_spans.h"
#include "trainbpf.h"

/*
 * A thread's rows as shown: pending folded into data and forward, or all
 * into validation when its last step resolved was one (in_val: a pass's
 * last batch and its end are pending at the end of a job).
 */
void phases_fold(const uint64_t ph[TB_NPHASE][TB_NCAT], bool in_val,
		 uint64_t out[PH_NSHOWN][TB_NCAT]);
/*
 * The same, with setup and teardown (thread_rec.ends: parts of its other
 * row) taken out of other into their rows.
 */
void phases_fold_ends(const uint64_t ph[TB_NPHASE][TB_NCAT],
		      const uint64_t ends[2][TB_NCAT], bool in_val,
		      uint64_t out[PH_NSHOWN][TB_NCAT]);
/* Setup and teardown out of other (shown rows) into their rows. */
void phases_split_ends(uint64_t out[PH_NSHOWN][TB_NCAT], const uint64_t ends[2][TB_NCAT]);

/*
 * Training steps: from a fetch to the next, with a backward between. A
 * validation batch or the fetch that ends an epoch is no step. A thread
 * that never fetched from a DataLoader (batches from a queue, a custom
 * iterator) steps from one backward to the next instead: its data is the
 * wait for input before the forward (bpf/torch.bpf.h, feed_wait).
 */
struct ph_stat {
	int steps;
	double total_ms[PH_NSHOWN], min_ms[PH_NSHOWN], max_ms[PH_NSHOWN], sum_sq[PH_NSHOWN];
	double step_ms;			/* the steps' wall time, all phases */
};

/*
 * Threads together: their steps, and their wall time per phase, steps or
 * not. steps are optimizer steps where a thread's optimizer calls were
 * seen (micro-batches: the training steps above, several a step with
 * gradient accumulation), else its training steps (micro == steps).
 */
struct ph_sum {
	struct ph_stat steps;
	int micro;			/* training steps (micro-batches) closed */
	int micro_in;			/* of them, in the optimizer steps counted */
	int optim;			/* threads whose steps are optimizer steps */
	int each_min, each_max;		/* the fewest and most steps one thread counted */
	double wall_ms[PH_NSHOWN];
	double startup_ms;		/* of wall_ms[PH_DATA], the workers' start-up */
	int step_source;		/* enum ph_step_source */
};

/*
 * A main thread's last settled spans, newest at head - 1: its phase time
 * before an instant, for the epochs. A boundary is known at most a
 * worker's exec grace and a tick after it (epochs.h): 2048 spans are 340
 * steps of six phases, steps of 1.3 ms in 0.45 s.
 */
#define PH_RING 2048
struct ph_ring {
	struct ph_span s[PH_RING];
	int head, n;
};
/* Rings at most (50 kB each): the ranks on a node, many times over. */
#define PH_MAX_RINGS 256

/* One thread that ran phases: its steps so far. */
struct ph_thread {
	pid_t pid, tid;
	/*
	 * Its events as spans (live); what is pending (pend_ns: its fetch,
	 * what followed, a step with no backward held until the next tells)
	 * and in_val, live or read back from a recording.
	 */
	struct ph_spans sp;
	uint64_t start;			/* the step under way began (0: none yet) */
	uint64_t ns[PH_NSHOWN];		/* the step under way, resolved part */
	bool trained;			/* a backward made it a training step */
	uint64_t fetches;		/* DataLoader fetches: 0, steps start at backwards */
	uint64_t tot[PH_NSHOWN];	/* wall time per phase, resolved */
	uint64_t startup;		/* of tot[PH_DATA], DataLoader workers' start-up */
	struct ph_stat steps;		/* the training steps closed so far */
	/*
	 * Optimizer steps: the training steps (micro-batches) from the one
	 * after the last that called the optimizer to the next that does, an
	 * optimizer bracket opened after its backward (a zero_grad before
	 * it, at the top of the loop, does not end one).
	 */
	bool opt;			/* the step under way called the optimizer after its backward */
	uint64_t acc[PH_NSHOWN];	/* the micro-batches since the last optimizer step */
	uint64_t acc_ns;		/* their wall time */
	int acc_n;			/* how many */
	struct ph_stat osteps;		/* the optimizer steps closed so far */
	int omicro;			/* micro-batches in them */
	struct ph_ring *ring;		/* live; NULL past PH_MAX_RINGS */
	bool ring_tried;
	/*
	 * DataLoader passes it completed: told when a training step begins
	 * the next (passes.c, the epochs' rule: a zip of loaders or a
	 * validation loop mid-pass completes none), so a job's last pass is
	 * not counted.
	 */
	struct pass_thread pass;
	uint64_t passes;
	/* Its last event (live): its phase, and that phase's row then. */
	int last_phase;			/* enum tb_phase; -1: none yet */
	uint64_t last_row[TB_NCAT];
	/*
	 * Its setup: OTHER's row at its first event (BPF sends that row with
	 * a thread's first event), all of its time before it; and its ends'
	 * wall time (setup, teardown: the rows' sums, as the categories sum
	 * to the time), set with thread_rec.ends.
	 */
	uint64_t setup_row[TB_NCAT];
	uint64_t ends_ns[2];
	/*
	 * Found running at an attach: its time from then to its first event
	 * (mid-loop, no setup), other's wall time as its rows are other's.
	 */
	uint64_t lead_ns;
	bool setup_synced;		/* its thread_rec has its setup (phases_sync_ends) */
	uint64_t ended_step;		/* its last step, closed at its end by its last event; 0: none */
	bool backward;			/* it ran a backward (live) */
	bool trainer;			/* its process's loop thread so far (live) */
};

/* What the phase table can say, from the libraries the job mapped. */
enum ph_source {
	PH_SRC_NONE,		/* no libtorch in the traced processes */
	PH_SRC_UNNAMED,		/* a libtorch whose brackets close out of our sight */
	PH_SRC_BACKWARD,	/* no named bracket came: backward and checkpoint only */
	PH_SRC_BRACKETS,	/* named brackets: data, forward, optimizer too */
	PH_NSOURCES,
};
extern const char *const ph_source_names[PH_NSOURCES];

/*
 * Threads whose steps are kept: trainers' threads that run PyTorch's
 * brackets, a few per process. Past it a thread's phase times are still
 * kept (thread_rec.ph) but not its steps; threads_over counts its events.
 */
#define PH_MAX_THREADS 4096

struct phases {
	struct ph_thread *th;
	int nth;
	uint64_t threads_over;	/* events of threads past PH_MAX_THREADS */
	uint64_t events;
	uint64_t named;		/* named brackets opened */
	int source;		/* enum ph_source, as of phases_finish */
	int nrings;
	bool no_rings;		/* no per-epoch cut wanted (serve): no rings */
	/*
	 * The command was launched: its threads, registered before its exec,
	 * have a setup. Else a thread found running (-p, serve's scans:
	 * thread_rec.found) was mid-loop or mid-setup then: no setup.
	 */
	bool launched;
};

struct gpu;
/* The source, from what the job mapped (gpu.h): before a final report. */
void phases_finish(struct phases *p, const struct gpu *g);
/* enum ph_source of a name, or -1. */
int ph_source_find(const char *name);


/*
 * Returns true when the event made another thread its process's loop
 * thread (phases_trainer): the epochs' snapshots follow it from then on.
 */
bool phases_on_event(struct phases *p, const struct tb_phase_event *e);
/*
 * The loop thread of process pid as the events have shown it so far (live;
 * NULL if none of its threads ran a phase): the first of its threads to
 * run a backward, settled then for good; before any backward, the thread
 * whose phase event came last among those new to phases (a loop started
 * on a thread of its own shows its first fetch before its first
 * backward). The reports' trainer thread (job_trainer_thread) is the same
 * thread unless two threads of one process ran backward.
 */
const struct ph_thread *phases_trainer(const struct phases *p, pid_t pid);
/*
 * A node's daemon sees threads come and go for months: the threads of
 * processes gone from job, or exited before `before` (their last gains
 * read), are forgotten, so that the bound on threads is on those alive.
 */
struct job;
void phases_forget_gone(struct phases *p, const struct job *job, uint64_t before);
/* pid/tid's entry, made if new (a recording's rows); NULL if out of memory. */
struct ph_thread *phases_add_thread(struct phases *p, pid_t pid, pid_t tid);
/* A thread's steps (NULL if it ran no phase). */
const struct ph_thread *phases_thread(const struct phases *p, pid_t tid);
void phases_free(struct phases *p);

/* One thread's steps and wall time per phase, into sum (added). */
void phases_thread_sum(const struct ph_thread *t, struct ph_sum *sum);
/* What the steps were counted from, over the threads summed. */
enum ph_step_source { PH_STEPS_NONE, PH_STEPS_FETCH, PH_STEPS_BACKWARD, PH_STEPS_MIXED };

struct job;
/*
 * The trainers' main threads together: their rows as shown, their steps
 * (ph's; ph NULL: the rows alone). Returns how many of them ran phases.
 */
int phases_job(const struct phases *ph, const struct job *job,
	       uint64_t rows[PH_NSHOWN][TB_NCAT], struct ph_sum *sum);

/*
 * Of the data row, the DataLoader workers' start-up (TB_PH_WSTART, and a
 * start-up pending with a step that folds as data): one thread's rows
 * (added to out), and the trainers' main threads' together.
 */
void phases_startup_rows(const uint64_t ph[TB_NPHASE][TB_NCAT], bool in_val,
			 uint64_t out[TB_NCAT]);
void phases_job_startup(const struct phases *ph, const struct job *job, uint64_t out[TB_NCAT]);

/*
 * The same threads' storage waits in syscalls that write (checkpoints,
 * logs: thread_rec.wio), by shown phase; part of the rows' io.
 */
void phases_job_writes(const struct phases *ph, const struct job *job, uint64_t out[PH_NSHOWN]);

/*
 * After the last refresh (live): what each thread's last phase gained
 * after its last event, the time after its last bracket (the job's
 * teardown; the stretch since then at a detach), goes to other. The wall
 * time, from the spans, stops at the last event too. A thread that never
 * fetched: what is pending met no backward after it, other too.
 */
void phases_settle_tail(struct phases *p, struct job *job);
/*
 * Each thread's setup (its row before its first event) into its
 * thread_rec.ends[0], at each refresh: none for a thread found running at
 * an attach or by serve's scans (thread_rec.found), unless launched.
 */
void phases_sync_ends(struct phases *p, struct job *job);

/*
 * The loop threads' (phases_trainer: the ranks') wall time per phase before
 * ts, summed over their settled spans: a step still pending at ts counts
 * where it settles. phases_main_now: all of it, a step pending now folded
 * as in the table.
 */
void phases_main_before(const struct phases *p, uint64_t ts, uint64_t out[PH_NSHOWN]);
void phases_main_now(const struct phases *p, uint64_t out[PH_NSHOWN]);

/*
 * Whether a phase's time within training steps means anything: no step,
 * or validation (it runs between training steps, never inside one), and
 * its mean, min, max and std are undefined: "-", null.
 */
bool ph_stat_defined(const struct ph_stat *s, int phase);
double ph_stat_avg(const struct ph_stat *s, int phase);
double ph_stat_std(const struct ph_stat *s, int phase);

#endif
