/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Epochs and steps, found from outside the job: markers the job writes
 * (trainbpf_mark.h), lines it prints ("Epoch 3/10"), fixed windows, or
 * DataLoader worker generations (workers re-forked at each epoch). Each
 * source keeps its own list of boundaries; the report uses the one asked
 * for, or under auto the first that fired (marker, then regex, then
 * workers, then 60 s windows).
 *
 * An epoch's times are the job's category totals at its end minus those at
 * its start. An epoch marker wakes trainbpf, which refreshes the totals at
 * once (within a millisecond or so) and interpolates them back to the
 * write linearly from the refresh before; epoch lines and fixed windows are
 * placed the same way between two 200 ms ticks (waking for every line
 * would cost the job ~8 us a write). Durations and boundaries are exact:
 * the kernel timestamps the write.
 */
#ifndef TB_EPOCHS_H
#define TB_EPOCHS_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "categories.h"
#include "probes.h"
#include "gpu_util.h"
#include "passes.h"
#include "phase_spans.h"
#include "steps.h"
#include "trainbpf.h"

struct job;
struct job_fold;

/*
 * In the order auto prefers them: the job's own markers; the first batch
 * of each DataLoader pass of a trainer (phase events, torch >= 2.0); lines
 * it prints; worker generations; windows.
 */
enum ep_source {
	EP_MARKER, EP_PASSES, EP_REGEX, EP_WORKERS, EP_INTERVAL, EP_NSRC, EP_AUTO = EP_NSRC
};

#define EP_AUTO_INTERVAL_S 60.0
#define EP_DEFAULT_REGEX \
	"(^|[^[:alnum:]_])epoch['\"]?[[:space:]]*[:=]?[[:space:]]*\\[?([0-9]+)"

/* Category totals of one process (a row of job->procs) at one instant. */
struct ep_tot {
	pid_t pid, ppid;
	enum tb_role role;
	int folded;			/* an aggregate's count (job.h) */
	bool absent;			/* not in the job yet at that instant */
	uint64_t start, end;		/* fork or attach; exit, 0 if alive */
	int64_t own[TB_NCAT];		/* all its threads */
	int64_t main_cp[TB_NCAT];	/* its main thread's critical path */
	int64_t main_own[TB_NCAT];	/* its main thread's own states */
	/* Ended, its nthreads threads' totals read for the last time. */
	bool final;
	int nthreads;
};

struct ep_snap {
	uint64_t ts;
	int n;				/* job->procs[0..n) */
	int cap;			/* room in p */
	struct ep_tot *p;
	uint64_t ph[PH_NSHOWN];		/* the ranks' main threads' phase time
					 * before ts (phases_main_before) */
	/*
	 * Their wall time per phase as settled at the tick, the spans ph_cp's
	 * rows hold: a step pending then is in neither (the last tick folds
	 * it in both). An interpolated snapshot's is its ph.
	 */
	uint64_t ph_set[PH_NSHOWN];
	/*
	 * Their critical path per phase and category: settled rows at a
	 * tick (a pending step counts where it settles), interpolated at a
	 * boundary; the last tick folds a step pending as the table does.
	 */
	uint64_t ph_cp[PH_NSHOWN][TB_NCAT];
};

/*
 * Snapshot arrays given back, for the next ones: a fork storm refreshes
 * every few ms, and a new array each time would scatter the heap.
 */
#define EP_POOL 24

/*
 * One process's times in one epoch (its totals at the end minus at the
 * start), or, folded > 0, the sum of that many exited processes with one
 * parent and role (pid 0; tally: their kinds as workers, for the
 * diagnosis). role is the one at the epoch's end; the reports take the
 * job's own while the process is listed (roles settle).
 */
struct ep_proc {
	pid_t pid, ppid;
	enum tb_role role;
	int folded;
	struct worker_tally tally;
	uint64_t start, end;		/* fork or attach; exit, 0 if alive */
	int64_t own[TB_NCAT];		/* all its threads */
	int64_t main_cp[TB_NCAT];	/* its main thread's critical path */
	int64_t main_own[TB_NCAT];	/* its main thread's own states */
};

/*
 * Where step boundaries come from: the job's markers whenever it wrote any,
 * else its training loop as PyTorch's phases show it: its optimizer steps
 * where it called the optimizer (EP_STEPS_OPTIM: from the first training
 * step, or micro-batch, after the last optimizer call to the next), else
 * its training steps (a training step begins at its DataLoader fetch;
 * with no fetch seen, at its backward), else the period of its CUDA/NCCL
 * calls.
 */
enum ep_step_src { EP_STEPS_NONE, EP_STEPS_MARKER, EP_STEPS_CALLS, EP_STEPS_FETCH,
		   EP_STEPS_BACKWARD, EP_STEPS_OPTIM };

/* Step starts from one source, ascending; the oldest folded past ST_MAX_BOUNDS. */
struct ep_step_list {
	uint64_t *t;
	int n, cap;
	long seen;		/* ever added */
	uint64_t last;		/* the one added last */
	/*
	 * The training loop's (phases): where the phase table closed the step
	 * added last (the next fetch), if it did; a step with no next one and
	 * no close is pending (docs/model.md, "Epochs and steps").
	 */
	uint64_t done;
	struct st_sum folded;
};

struct ep_steps {
	int count;
	double total_ms, min_ms, max_ms, sum_sq;
	int micro;		/* optimizer steps: the training steps (micro-batches)
				 * that start in them; 0 for other sources */
	int syncs;		/* outermost CUDA syncs and blocking copies of the
				 * trainers' threads during these steps: the
				 * processes that marked the steps, or whose
				 * calls they were found from */
	enum ep_step_src source;
};

/*
 * A generation of DataLoader workers: the processes one process forked
 * together (PyTorch re-forks them at each epoch unless persistent_workers).
 */
struct ep_worker_gen {
	pid_t parent;
	uint64_t fork_ts;	/* the generation's first fork */
	int nworkers;
	double stall_s;		/* the parent's main thread waiting for data in
				 * the first EP_GEN_STALL_S after fork_ts; < 0
				 * until that window has passed */
	long epoch;		/* the workers epoch it opened or joined */
	int64_t dw_fork;	/* the parent's main-thread data_wait at fork_ts */
	double stall_err_s;	/* bound on stall_s's error: the time from each
				 * end of the window to the refresh after it */
	int merged;		/* generations summed into this one (past
				 * EP_MAX_GENS), 1 for one; 0 reads as 1 */
	/*
	 * With training phases, stall_s is the gap from fork_ts to the
	 * parent's first batch after it: the main thread's first exit from a
	 * DataLoader fetch (or, with unnamed brackets, its first backward).
	 */
	uint64_t batch_ts;	/* that batch; 0 until it came */
	bool in_data;		/* a fetch began after fork_ts */
};

#define EP_GEN_STALL_S 2.0
/* An epoch still open at the end and shorter than this is a tail (epochs_finish). */
#define EP_TAIL_S 1.0
#define EP_MAX_STEP_PIDS 64
/*
 * Bounds (docs/model.md, "What trainbpf keeps"). An epoch keeps a row per
 * process up to EP_MAX_ROWS: past that, the rows of processes that ended
 * in it are summed per parent and role, then those of all but trainers.
 * Past EP_MAX_EPOCHS epochs of one source, or EP_MAX_ALL_ROWS rows in
 * them, the older half is merged two by two (their labels become a range,
 * and the rows of processes that ended in them are summed per parent and
 * role). Past EP_MAX_GENS generations, the older half's re-forks are
 * merged (counted as merged). Forks waiting to be judged: at most
 * EP_MAX_FORKS (the oldest goes unjudged).
 */
#define EP_MAX_ROWS 256
#define EP_MAX_EPOCHS 4096
#define EP_MAX_ALL_ROWS 65536
#define EP_MAX_GENS 1024
#define EP_MAX_FORKS 4096
/*
 * A child that has not exec'd this long after its fork is a worker (a
 * subprocess execs within a few ms of its fork). Judging waits that long,
 * so the snapshots around a fork are kept a while.
 */
#define EP_EXEC_GRACE_NS 250000000ull
/*
 * A child that exec'd is a worker once its role says so (the spawn
 * context: fork + exec of python, a worker when it has fed its trainer,
 * seconds after the fork while it imports torch); judging waits this long.
 */
#define EP_SPAWN_ROLE_WAIT_NS 60000000000ull
/* What a helper that dies young does at most: wake its parent with its
 * output and its exit; use the CPU to run a builtin or fail an exec. */
#define EP_HELPER_WAKES 2
#define EP_HELPER_CPU_NS 5000000ull
#define EP_HIST_NS 1000000000ull
#define EP_HIST_MAX 16
/* A fork asks for a refresh, at most this often (a fork storm). */
#define EP_FORK_REFRESH_NS 5000000ull

/* A fork not judged yet: worker, or a subprocess about to exec? */
struct ep_fork {
	pid_t pid, parent;
	uint64_t ts;
	uint64_t batch_ts;	/* as in ep_worker_gen, until a generation takes it */
	bool in_data;
	bool waits_role;	/* exec'd: a spawn worker once its role says so, or none */
};

/* Waiting this long for a generation's first batch, then the window's measure. */
#define EP_GEN_BATCH_WAIT_NS 60000000000ull

/* A worker of one of the generations. */
struct ep_worker {
	pid_t pid;
	int gen;		/* index in gens */
	uint64_t end;		/* its exit; 0 while alive */
};

/* Exited processes folded into aggregate proc (job->procs) in the open epoch. */
struct ep_fold_tally {
	int proc;
	int n;			/* how many, with time in the epoch */
	struct worker_tally tally;
};

struct epoch {
	long label;		/* the number the job gave; windows count from 1 */
	long last;		/* merged epochs: the last one's label; else label */
	uint64_t start, end;
	bool complete;		/* ended by the next boundary, not the window */
	uint64_t ph[PH_NSHOWN];	/* the ranks' main threads' wall time per
				 * phase in it, summed (ns); all 0: none */
	uint64_t ph_cp[PH_NSHOWN][TB_NCAT];	/* what each phase was made of:
						 * their critical path (ns) */
	bool late_start;	/* regex: began at the first line naming it, and
				 * a summary ended it: the job's start may lie
				 * log-every steps before (HF's 'epoch': 0.33) */
	int n;
	struct ep_proc *d;	/* per process: totals at end minus at start */
	struct ep_steps steps;
	struct gu_win *gpu;	/* the GPU's readings in it (gpu_util.h); NULL: none */
};

struct ep_pending {
	uint64_t ts;
	long label;
};

struct ep_stream {
	struct epoch *list;
	int n, cap;
	long closed;		/* epochs ever closed: list[n - 1] is the
				 * closed-th, older ones may be merged */
	struct ep_snap open;	/* totals where the running epoch started */
	long open_label;
	bool is_open;
	struct ep_fold_tally *folds;	/* what folded in the open epoch */
	int nfolds;
	struct ep_pending *pend;
	int npend, cappend;
	long last_label;	/* regex: the epoch number seen last */
	bool has_label;
	bool first_by_line;	/* regex: the first epoch began at a line naming it */
	bool summed;		/* regex: a summary line came */
	bool inferred;		/* regex: last_label followed a summary, and
				 * no line has named it since */
	int gu_h;		/* the open epoch's GPU window (gpu_util.h); -1: none */
};

#define EP_PASS_THREADS 64

struct epochs {
	enum ep_source want;	/* EP_AUTO or one source */
	uint64_t window_start;
	double interval_s;
	regex_t re;
	bool re_ok;
	struct ep_stream src[EP_NSRC];
	uint64_t next_window;	/* interval source: the next boundary */
	long windows;
	struct ep_step_list marks;	/* step markers */
	pid_t step_pids[EP_MAX_STEP_PIDS];	/* processes that wrote them */
	int nstep_pids;
	struct ep_step_list loop;	/* training steps' starts, of one thread */
	enum ep_step_src loop_src;	/* EP_STEPS_FETCH or _BACKWARD: its first step's */
	pid_t loop_tid, loop_pid;	/* that thread: the first to train */
	struct ep_step_list optim;	/* its optimizer steps' starts (EP_STEPS_OPTIM) */
	/*
	 * Live: the optimizer step under way of that thread: its first
	 * micro-batch's start (0: none yet), whether the micro-batch under way
	 * ran a backward, and called the optimizer after it (it ends the step).
	 */
	uint64_t og_start;
	int og_n;		/* its micro-batches so far */
	bool og_bwd, og_opt;
	/*
	 * An optimizer step took more than one micro-batch (gradient
	 * accumulation): the steps are the optimizer steps. Where each took
	 * one they are the training steps, the same ones, as before.
	 */
	bool optim_multi;
	struct steps *calls;	/* steps from the call period (steps.h); may be NULL */
	const struct phases *phases;	/* the phase spans (phases.h); may be NULL */
	struct gpu_util *gu;	/* the GPU's readings (gpu_util.h); may be NULL */
	struct ep_snap prev;	/* totals at the last tick */
	struct ep_snap hist[EP_HIST_MAX];	/* the ticks before prev, oldest first */
	int nhist;
	/*
	 * The loop threads' last phase event so far (loop_ev), and copies of
	 * the two ticks around it (loop_end: its instant; 0: none): the last
	 * epoch ends there, not at the end of tracing, the teardown after it
	 * no epoch's (docs/phases.md, "The share").
	 */
	uint64_t loop_ev, loop_end;
	struct ep_snap loop_a, loop_b;
	struct ep_worker_gen *gens;
	int ngens, capgens;
	long gen_epochs;	/* epochs the generations opened */
	struct ep_fork *forks;	/* not judged yet, by time */
	int nforks, capforks;
	struct ep_worker *workers;
	int nworkers, capworkers;
	bool fork_seen;		/* since the last refresh */
	bool phase_seen;	/* a main thread's training phase changed */
	uint64_t next_prune;	/* workers of older generations go, once a second */
	struct ep_snap pool[EP_POOL];
	int npool;
	/* passes: candidates (the first EP_PASS_THREADS), the one that counts */
	struct pass_thread pth[EP_PASS_THREADS];
	int npth;
	pid_t pass_tid;
	long passes;
	long pass_label_off;	/* added to the passes' labels at the end (epochs_align_labels) */
	bool attached;		/* -p: a first training step seen is no pass's first */
	/*
	 * A pass ran to its end (a fetch with no backward after training).
	 * Without one, passes cannot tell a loop that leaves each pass early
	 * (`break`, a new iter()) from one long pass: epochs_source.
	 */
	bool pass_ended;
	/*
	 * Where the run ended (epochs_finish's now; a recording's end), 0
	 * while it runs: a step with no next one, that would run to it, has
	 * no known end (the teardown follows it) and is left out.
	 */
	uint64_t ended;
};

/* Parses "auto|marker|regex|workers|interval:SEC"; -1 if bad. */
int epochs_parse_source(const char *arg, enum ep_source *src, double *interval_s);
/* Compiles re (NULL: the default); on error writes why into err. */
int epochs_init(struct epochs *ep, enum ep_source want, double interval_s,
		const char *re, uint64_t window_start, char *err, size_t errlen);
void epochs_free(struct epochs *ep);
/* A TB_EV_MARK or TB_EV_TEXT event from the ring buffer. */
void epochs_on_event(struct epochs *ep, const struct tb_text_event *e);
/*
 * A thread's training phase changed (TB_EV_PHASE): DataLoader passes, and
 * a main thread's first batch after its workers' fork measures their
 * start-up stall.
 */
void epochs_on_phase(struct epochs *ep, const struct tb_phase_event *e);
/* Process pid's loop thread changed (phases_on_event said so): snapshots follow it. */
struct job;
void epochs_on_trainer(struct epochs *ep, const struct job *job, pid_t pid);
/* A traced process forked a new process (TB_EV_FORK). */
void epochs_on_fork(struct epochs *ep, pid_t pid, pid_t parent, uint64_t ts);
/* A traced process exited (TB_EV_EXIT). */
void epochs_on_exit(struct epochs *ep, pid_t pid, uint64_t ts);
/* The job folded rows (job_fold): the snapshots follow job->procs. */
void epochs_on_fold(struct epochs *ep, const struct job *job, const struct job_fold *f);
/* A boundary waits for its totals: refresh now rather than at the tick. */
bool epochs_pending(const struct epochs *ep);
/*
 * When the next refresh is wanted, whatever the tick: at once for a
 * pending boundary, soon after a fork, at the end of a stall window.
 */
uint64_t epochs_wake_at(const struct epochs *ep);
/* After each refresh: places the boundaries seen since the last tick. */
void epochs_tick(struct epochs *ep, const struct job *job, uint64_t now);
/* At the end: closes the running epoch of every source at now. */
void epochs_finish(struct epochs *ep, const struct job *job, uint64_t now);
/* The source the reports use; EP_NSRC if none has a boundary. */
enum ep_source epochs_source(const struct epochs *ep);
/*
 * The passes' epochs take the job's own numbers from its epoch lines where
 * the two agree on where epochs start (attached mid-run: the job's epoch 2
 * is not printed as 1). epochs_finish calls it; a reader of a recording,
 * once it has loaded the epochs. now: the open epoch's end.
 */
void epochs_align_labels(struct epochs *ep, uint64_t now);

/*
 * Building epochs from what was recorded (recording_read.c), with the
 * live tool's rules: an epoch appended to source s (NULL if out of
 * memory); source s alone kept; of it, only the epoch labelled label
 * (false if it has none); an epoch's per-process totals d[0..n) (taken,
 * malloc'd: those that changed are kept) and its steps counted; a step
 * marker written by pid at ts; a worker generation.
 */
struct epoch *epochs_add(struct epochs *ep, enum ep_source s, long label, uint64_t start,
			 uint64_t end, bool complete);
void epochs_keep_source(struct epochs *ep, enum ep_source s);
bool epochs_keep_label(struct epochs *ep, enum ep_source s, long label);
void epoch_set_procs(const struct epochs *ep, struct epoch *e, struct ep_proc *d, int n);
/*
 * An epoch as the live tool closed it (a recording of schema 2): its
 * per-process deltas d[0..n) (taken, malloc'd, may be NULL when n is 0)
 * and its steps, kept as they are: steps found later do not change them.
 */
void epoch_set_recorded(struct epoch *e, struct ep_proc *d, int n, const struct ep_steps *s);
void epochs_add_step(struct epochs *ep, uint64_t ts, pid_t pid);
/*
 * A training step's start from the phases (src EP_STEPS_FETCH or
 * _BACKWARD), of thread tid (the reader: from a recording).
 */
void epochs_add_loop_step(struct epochs *ep, enum ep_step_src src, uint64_t ts, pid_t pid,
			  pid_t tid);
/* An optimizer step's start, of the loop thread tid (the reader: from a recording). */
void epochs_add_optim_step(struct epochs *ep, uint64_t ts, pid_t pid, pid_t tid);
void epochs_add_gen(struct epochs *ep, const struct ep_worker_gen *g);
/*
 * Steps that start in [a, b). The last one ends at b when b closes a span
 * (an epoch's end), else where the next step starts, if one did yet. With
 * no next step, a training loop's last step (fetch, backward) ends where
 * the phase table closed it (ep_step_list.done), never later than b, and
 * is left out while pending, as the table leaves it out; a marker's or the
 * call period's runs to b when b closes a span other than the run's end
 * (ended). Returns how many steps start in [a, b), counted or not.
 */
int epochs_step_stats(const struct epochs *ep, uint64_t a, uint64_t b, bool closed,
		      struct ep_steps *s);
/*
 * The run's steps, [a, b) the whole window: each ends where the next
 * starts; the last one, a training loop's, where the phase table closed it
 * (else it is pending and left out), a marker's or the call period's is
 * left out (its end is unknown). The epochs leave out the same step, so
 * that the count is one and the longest step the epochs' longest.
 */
int epochs_run_steps(const struct epochs *ep, uint64_t a, uint64_t b, struct ep_steps *s);
/*
 * The end of the i-th step (0-based) that starts in [a, b), as
 * epochs_run_steps takes it: the next one's start, or for the last the
 * close the phase table gave it; 0 if unknown (pending) or none.
 */
uint64_t epochs_step_end(const struct epochs *ep, uint64_t a, uint64_t b, int i);
/* The start of the i-th step (0-based) that starts in [a, b); 0 if none. */
uint64_t epochs_step_start(const struct epochs *ep, uint64_t a, uint64_t b, int i);
const char *epochs_step_source_name(enum ep_step_src s);
/* Of a set of steps: ms per step, its standard deviation, syncs per step, steps/s. */
double ep_steps_avg(const struct ep_steps *s);
double ep_steps_std(const struct ep_steps *s);
double ep_steps_syncs(const struct ep_steps *s);
double ep_steps_per_s(const struct ep_steps *s);
/*
 * The headline of one epoch: the critical path of the trainers' main
 * threads, by the roles as the job ended (roles settle after a while; the
 * last word is the best one for every epoch). Returns its total.
 */
int64_t epoch_headline(const struct job *job, const struct epoch *e, int64_t hl[TB_NCAT]);
/* Its phase time, all phases (0: no rank ran phases in it). */
uint64_t epoch_phase_ns(const struct epoch *e);
/* The category with the most time on an epoch's headline. */
int epoch_slowest(const struct job *job, const struct epoch *e);
/* A row's role: the job's own while it lists the process, else the row's. */
enum tb_role ep_row_role(const struct job *job, const struct ep_proc *d);
/* Sums an epoch's rows of exited processes per parent and role (EP_MAX_ROWS). */
void epoch_fold_rows(struct epoch *e);
/* The epoch the live view or the recorder counts as number k (0-based); NULL if merged away. */
const struct epoch *ep_stream_closed(const struct ep_stream *st, long k);
const char *epochs_source_name(enum ep_source s);

#endif
