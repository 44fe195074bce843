// SPDX-License-Identifier: BSD-3-Clause
/*
 * The rules. Each reads one window (struct dg_view) and fires when its
 * measure passes a threshold; severity rises linearly from 0 there to 1
 * at a value that is severe by any standard (docs/model.md lists both).
 * Shares are of the trainers' critical path, the time the training loop
 * itself spent, not of all threads (pool threads idle by design).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "diagnosis_rule.h"
#include "epochs.h"
#include "job.h"

#define MIB_KB 1024ull

static const char *const id_names[DG_NIDS] = {
	"data_loading", "host_bound", "syncs_per_step", "worker_restarts",
	"cpu_contention", "lock_contention", "io_bound_workers", "comm_bound",
	"slow_rank", "memory_pressure", "rss_growth", "checkpointing",
	"gpu_underused", "gpu_memory_pressure", "gpu_throttling",
};

const char *diag_id_name(enum dg_id id)
{
	return id < DG_NIDS ? id_names[id] : "?";
}

enum dg_id diag_id_find(const char *name)
{
	for (int i = 0; i < DG_NIDS; i++)
		if (!strcmp(name, id_names[i]))
			return i;
	return DG_NIDS;
}

static int64_t total(const int64_t c[TB_NCAT])
{
	int64_t t = 0;

	for (int i = 0; i < TB_NCAT; i++)
		t += c[i] > 0 ? c[i] : 0;
	return t;
}

static double share(const int64_t c[TB_NCAT], int cat)
{
	int64_t t = total(c);

	return t > 0 && c[cat] > 0 ? (double)c[cat] / t : 0.0;
}

static void who(char *buf, size_t len, const struct dg_proc *p)
{
	const char *on = p->where[0] ? " on " : "";

	if (p->rank >= 0)
		snprintf(buf, len, "rank %d (PID %d%s%s)", p->rank, p->pid, on, p->where);
	else
		snprintf(buf, len, "PID %d%s%s", p->pid, on, p->where);
}

/* Workers: how many, and how many I/O-bound or CPU-bound. */
struct worker_sum {
	int n, io_bound, cpu_bound, waiting;
	int64_t all[TB_NCAT];
	pid_t slowest;		/* the busiest: the one the others wait for */
	double slowest_cpu, slowest_io;
};

/* Folded workers count by their tally: each was judged by its own times. */
static void sum_workers(const struct dg_view *v, struct worker_sum *w)
{
	struct worker_tally t = { .busiest = 0 };

	memset(w, 0, sizeof(*w));
	for (int i = 0; i < v->n; i++) {
		const struct dg_proc *p = &v->p[i];

		if (p->role != TB_ROLE_WORKER || total(p->own) <= 0)
			continue;
		for (int c = 0; c < TB_NCAT; c++)
			w->all[c] += p->own[c];
		if (p->folded)
			worker_tally_merge(&t, &p->tally);
		else	/* judged by the thread that works, not diluted by idle ones */
			worker_tally_add(&t, p->pid, total(p->work) > 0 ? p->work : p->own);
	}
	w->io_bound = t.n[TB_WK_IO_BOUND];
	w->cpu_bound = t.n[TB_WK_CPU_BOUND];
	w->waiting = t.n[TB_WK_WAITING];
	w->n = worker_tally_count(&t);
	w->slowest = t.busiest;
	w->slowest_cpu = t.cpu;
	w->slowest_io = t.io;
}

/* The share of the trainers' storage bytes that were reads (1: no bytes). */
static double read_frac(const struct dg_view *v)
{
	uint64_t all = v->rbytes + v->wbytes;

	return all ? (double)v->rbytes / all : 1.0;
}

/*
 * Of io (the storage waits of phase ph, or of all phases when ph < 0),
 * the writes: measured where the syscall was known (thread_rec.wio), else
 * (an older recording, an epoch's window) io in the ratio of bytes written.
 */
static int64_t writes_of(const struct dg_view *v, int ph, int64_t io)
{
	int64_t w = 0;

	if (!v->wio_known)
		return (int64_t)(io * (1.0 - read_frac(v)));
	for (int p = 0; p < PH_NSHOWN; p++)
		w += ph < 0 || p == ph ? v->wio[p] : 0;
	return w < io ? w : io;
}

/* The rest of io: reads (input, imports), the data rules' part. */
static int64_t reads_of(const struct dg_view *v, int ph, int64_t io)
{
	return io - writes_of(v, ph, io);
}

/* What the trainer threads' critical path took over from others. */
static int64_t inherited(const struct dg_view *v, int cat)
{
	int64_t d = v->hl[cat] - v->hl_own[cat];

	return d > 0 ? d : 0;
}

/*
 * Lock waits of the trainer threads on threads that were
 * themselves waiting (sleeping, reading, waiting for data): on the
 * critical path a lock wait becomes what its holder did meanwhile. Waits
 * on holders that mostly waited are a thread feeding the loop (a
 * producer behind a queue.Queue), not contention for a lock held by
 * running threads (the GIL): their share of the lock waits, by what the
 * holders did (their waits for a CPU say neither).
 */
static int64_t fed_wait(const struct dg_view *v)
{
	int64_t waited = inherited(v, TB_IDLE) + inherited(v, TB_IO) +
			 inherited(v, TB_DATA_WAIT), ran = inherited(v, TB_CPU);

	/*
	 * A PyTorch training loop only (phase events came): elsewhere a
	 * thread that sleeps holding a lock the loop wants looks the same.
	 */
	if (!v->phases || waited <= 0 || v->hl_own[TB_LOCK] <= 0)
		return 0;
	return (int64_t)((double)v->hl_own[TB_LOCK] * waited / (waited + ran));
}

/* The trainer threads' time in every phase (the rows), what a phase's share is of. */
static int64_t phases_total(const struct dg_view *v)
{
	int64_t all = 0;

	for (int p = 0; p < PH_NSHOWN; p++)
		all += total(v->ph[p]);
	return all;
}

static double pct(int64_t part, int64_t whole)
{
	return whole > 0 && part > 0 ? 100.0 * part / whole : 0.0;
}

static void data_workers(struct dg_finding *f, const struct worker_sum *w)
{
	if (w->n)
		DG_PUT(f, evidence, "; %d worker%s: %d I/O-bound, %d CPU-bound (decoding), %d mostly "
		    "waiting (by their busiest thread); busiest PID %d (cpu %.0f%%, io %.0f%%)",
		    w->n, w->n == 1 ? "" : "s", w->io_bound, w->cpu_bound, w->waiting,
		    (int)w->slowest, 100 * w->slowest_cpu, 100 * w->slowest_io);
}

static void data_advice(struct dg_finding *f, const struct worker_sum *w, bool main_cpu,
			bool reads, bool fed, bool own)
{
	/* With workers, the thread between them and the loop is DataLoader's own (pin memory). */
	if (fed && !w->n)
		DG_PUT(f, advice, "the loop waits for a thread that feeds it batches: more producers "
		    "(DataLoader workers, num_workers > 0, instead of one Python thread), a deeper "
		    "queue, cheaper production; ");
	if (own && !w->n)
		DG_PUT(f, advice, "before its forward the loop waits in calls of its own (a sleep, "
		    "a poll, a remote call), not for a producer: --functions names the calls; ");
	if (main_cpu && !w->n)
		DG_PUT(f, advice, "the training loop decodes on its own thread: load in DataLoader "
		    "workers (num_workers > 0) so that decoding overlaps the step; ");
	if (w->cpu_bound)
		DG_PUT(f, advice, "more workers (num_workers) if cores are free, cheaper decoding and "
		    "augmentation (pre-decoded or smaller samples, GPU decoding with DALI); ");
	if (w->io_bound || reads)
		DG_PUT(f, advice, "faster or local storage for the dataset reads (copy it to local "
		    "NVMe or RAM), fewer larger reads (sharded formats), deeper prefetch "
		    "(prefetch_factor); ");
	if (w->waiting && !w->cpu_bound && !w->io_bound)
		DG_PUT(f, advice, "workers mostly wait on something outside the job (sleeps, remote "
		    "storage, a rate limit): find what they block on; ");
	DG_PUT(f, advice, "pin_memory=True with non_blocking copies");
}

/*
 * With phases: the trainers' time in the data phase, whatever it was made
 * of (waiting for workers, reading storage, decoding on the main thread,
 * waiting for a CPU, for a thread that feeds a queue).
 * Without a DataLoader, the data phase's lock and idle are a producer's
 * (a queue.get is a lock wait of the loop's, its time on the critical
 * path what the producer did) or the loop's own waits (a sleep, a poll:
 * idle of its own): the phase rows keep only the critical path, so the
 * producer's part is at most the trainers' own lock waits of the run.
 */
static void rule_data_phase(const struct dg_view *v, struct dg_out *fs)
{
	const int64_t *d = v->ph[PH_DATA];
	int64_t all = phases_total(v), in = total(d), fed = fed_wait(v);
	int64_t threads = d[TB_LOCK] + d[TB_IDLE], queued = 0;
	int64_t outside, feed, own = 0, reads = reads_of(v, PH_DATA, d[TB_IO]);
	double s;
	struct dg_finding *f;
	struct worker_sum w;

	/* A queue feeding the loop outside DataLoader fetches is data too. */
	outside = fed - threads;
	in += outside > 0 ? outside : 0;
	if (!v->data_fetched) {
		queued = threads < v->hl_own[TB_LOCK] ? threads : v->hl_own[TB_LOCK];
		own = threads - queued;
	}
	feed = (outside > 0 ? outside : 0) + queued;
	s = all > 0 ? (double)in / all : 0;
	if (s <= 0.15 || !(f = dg_add(fs, DG_DATA_LOADING, s, 0.15, dg_ramp(s, 0.15, 0.50))))
		return;
	f->cost = s;
	sum_workers(v, &w);
	DG_PUT(f, summary, "data loading %.1f%% of the trainers' time (> 15%%)", 100 * s);
	DG_PUT(f, evidence, "the trainer threads spent %.1f%% of their time %s: waiting for "
	    "workers %.1f%%, reading storage %.1f%%, on the CPU in the loop (decoding) %.1f%%, "
	    "waiting for a CPU %.1f%%, ", 100 * s,
	    v->data_fetched ? "in DataLoader fetches (the data phase)" :
	    "waiting for their input before each forward (the data phase; no DataLoader)",
	    pct(d[TB_DATA_WAIT], all), pct(reads, all), pct(d[TB_CPU], all),
	    pct(d[TB_RUNQUEUE], all));
	if (v->data_fetched)
		DG_PUT(f, evidence, "for other threads %.1f%%", pct(threads, all));
	else
		DG_PUT(f, evidence, "for the thread that feeds them (a queue's producer) %.1f%%, "
		    "in waits of their own (a sleep, a poll) %.1f%%", pct(queued, all),
		    pct(own, all));
	DG_PUT(f, evidence, "; read %.1f MiB, wrote %.1f MiB", v->rbytes / 1048576.0,
	    v->wbytes / 1048576.0);
	data_workers(f, &w);
	data_advice(f, &w, d[TB_CPU] > d[TB_DATA_WAIT] && d[TB_CPU] > reads &&
		    d[TB_CPU] > feed && d[TB_CPU] > own, reads > 0.05 * in, feed > 0.05 * in,
		    own > 0.05 * in);
}

/*
 * Without phases, by evidence: waits for DataLoader workers, storage
 * reads (writes are checkpointing's), and waits for a thread that feeds
 * the loop.
 */
static void rule_data(const struct dg_view *v, struct dg_out *fs)
{
	int64_t tot = total(v->hl), fed = fed_wait(v);
	double data = share(v->hl, TB_DATA_WAIT);
	double io = tot > 0 ? (double)reads_of(v, -1, v->hl[TB_IO]) / tot : 0;
	double feed = tot > 0 ? (double)fed / tot : 0, s = data + io + feed;
	struct dg_finding *f;
	struct worker_sum w;

	if (v->data_phase) {
		rule_data_phase(v, fs);
		return;
	}
	if (s <= 0.15 || !(f = dg_add(fs, DG_DATA_LOADING, s, 0.15, dg_ramp(s, 0.15, 0.50))))
		return;
	f->cost = s;
	sum_workers(v, &w);
	DG_PUT(f, summary, "data loading %.1f%% of the trainers' time (> 15%%)", 100 * s);
	DG_PUT(f, evidence, "trainers wait for DataLoader workers %.1f%%, for storage reads %.1f%% "
	    "and for a thread that feeds them %.1f%% of their time; storage read %.1f MiB, "
	    "written %.1f MiB", 100 * data, 100 * io, 100 * feed, v->rbytes / 1048576.0,
	    v->wbytes / 1048576.0);
	data_workers(f, &w);
	data_advice(f, &w, false, io > data, feed > 0.05, false);
}

/*
 * Checkpoints: the time in torch.save (the checkpoint phase) and the
 * trainers' storage writes outside it (flush, fsync, logs). Not their
 * reads: a cold start's imports wait for storage too (0.9 s, 7 points of
 * a short job, in test_diagnosis_torch's checkpoint job with the page
 * cache dropped). Without phases, the trainers' storage writes.
 */
static void rule_checkpoint(const struct dg_view *v, struct dg_out *fs)
{
	double s, save = 0, writes;
	int64_t all = 0, tot = total(v->hl);
	struct dg_finding *f;

	if (v->ckpt_phase) {
		int64_t out = 0;

		all = phases_total(v);
		for (int p = 0; p < PH_NSHOWN; p++)
			out += p == PH_CHECKPOINT ? 0 : writes_of(v, p, v->ph[p][TB_IO]);
		/* An older recording: only other's io, the flush and fsync after a save. */
		if (!v->wio_known)
			out = writes_of(v, PH_OTHER, v->ph[PH_OTHER][TB_IO]);
		save = all > 0 ? (double)total(v->ph[PH_CHECKPOINT]) / all : 0;
		writes = all > 0 ? (double)out / all : 0;
	} else {
		writes = tot > 0 ? (double)writes_of(v, -1, v->hl[TB_IO]) / tot : 0;
	}
	s = save + writes;
	if (s <= 0.10 || !(f = dg_add(fs, DG_CHECKPOINT, s, 0.10, dg_ramp(s, 0.10, 0.50))))
		return;
	f->cost = s;
	if (v->ckpt_phase) {
		const int64_t *c = v->ph[PH_CHECKPOINT];

		DG_PUT(f, summary, "checkpointing %.1f%% of the trainers' time (> 10%%)", 100 * s);
		DG_PUT(f, evidence, "the trainer threads spent %.1f%% of their time in torch.save "
		    "(on the CPU %.1f%%, writing to storage %.1f%%) and %.1f%% waiting for storage "
		    "writes outside it (flush, fsync); they wrote %.1f MiB and read %.1f MiB",
		    100 * save, pct(c[TB_CPU] + c[TB_RUNQUEUE], all), pct(c[TB_IO], all),
		    100 * writes, v->wbytes / 1048576.0, v->rbytes / 1048576.0);
	} else {
		DG_PUT(f, summary, "storage writes %.1f%% of the trainers' time (> 10%%)", 100 * s);
		DG_PUT(f, evidence, "the trainer threads waited for storage writes %.1f%% of "
		    "their time (for reads %.1f%%) and wrote %.1f MiB (read %.1f MiB): "
		    "checkpoints, logs or outputs, not data loading", 100 * writes,
		    100 * share(v->hl, TB_IO) - 100 * writes, v->wbytes / 1048576.0,
		    v->rbytes / 1048576.0);
	}
	DG_PUT(f, advice, "checkpoint less often (every N epochs or steps), save asynchronously "
	    "(a background thread or process, torch.distributed.checkpoint.async_save), save "
	    "less (model weights without optimizer state between full checkpoints), write to "
	    "fast local storage and copy it away after; one fsync per checkpoint");
}

static void rule_host_bound(const struct dg_view *v, struct dg_out *fs)
{
	double cpu = share(v->hl, TB_CPU), gpu = share(v->hl, TB_GPU_WAIT);
	struct dg_finding *f;

	if (!v->gpu || cpu <= 0.60 || gpu >= 0.10 ||
	    !(f = dg_add(fs, DG_HOST_BOUND, cpu, 0.60, dg_ramp(cpu, 0.60, 0.95))))
		return;
	f->cost = cpu;	/* the host's part of the step, which the GPU waits for */
	DG_PUT(f, summary, "host-bound GPU: the training loop computes %.1f%% (> 60%%), "
	    "waits for the GPU %.1f%%", 100 * cpu, 100 * gpu);
	DG_PUT(f, evidence, "the trainer threads run on the CPU %.1f%% of their time and "
	    "wait for the GPU only %.1f%%: the GPU waits for the host to queue work",
	    100 * cpu, 100 * gpu);
	DG_PUT(f, advice, "larger batches (more GPU work per launch), CUDA graphs "
	    "(torch.cuda.graphs, torch.compile(mode=\"reduce-overhead\")), torch.compile to fuse "
	    "small kernels, move Python-side work (metrics, logging) out of the step");
}

static void rule_syncs(const struct dg_view *v, struct dg_out *fs)
{
	double per = v->steps ? (double)v->syncs / v->steps : 0;
	struct dg_finding *f;

	if (!v->steps || per < 1.0 ||
	    !(f = dg_add(fs, DG_SYNCS, per, 1.0, dg_ramp(per, 0.0, 8.0))))
		return;
	f->cost = share(v->hl, TB_GPU_WAIT);	/* the waits in those syncs, at most */
	DG_PUT(f, summary, "%.1f host-device syncs per step (>= 1)", per);
	DG_PUT(f, evidence, "%d synchronisations or blocking copies in %d steps: every step the "
	    "host waits for the GPU to drain its queue, and the GPU then waits for new work",
	    v->syncs, v->steps);
	DG_PUT(f, advice, "keep values on the GPU: no .item(), .cpu(), print(tensor) or "
	    "if tensor: in the step; accumulate the loss on the GPU and read it every N "
	    "steps; non_blocking copies from pinned memory");
}

/*
 * Re-forks in the window: every generation but each parent's first (a
 * merged one stands for that many, never a parent's first: epochs.h).
 */
static int earlier_gens(const struct dg_view *v, int g)
{
	for (int i = 0; i < g; i++)
		if (v->gens[i].parent == v->gens[g].parent)
			return 1;
	return 0;
}

/*
 * The persistent-workers advice pays when the restarts cost a meaningful
 * share of the window: below it, keeping the workers (and their memory)
 * across epochs buys little and may slow the job.
 */
#define RESTART_SHARE 0.05

static void rule_worker_restarts(const struct dg_view *v, struct dg_out *fs)
{
	double stall = 0, frac;
	int refork = 0, workers = 0;
	pid_t parent = 0;
	struct dg_finding *f;

	for (int g = 0; g < v->ngens; g++) {
		const struct ep_worker_gen *w = &v->gens[g];

		if (w->fork_ts < v->start || w->fork_ts >= v->end || !earlier_gens(v, g))
			continue;
		refork += w->merged ? w->merged : 1;
		workers += w->nworkers;
		parent = w->parent;
		stall += w->stall_s > 0 ? w->stall_s : 0;
	}
	frac = v->wall_s > 0 ? stall / v->wall_s : 0;
	if (!refork || frac < RESTART_SHARE ||
	    !(f = dg_add(fs, DG_WORKER_RESTARTS, frac, RESTART_SHARE, dg_ramp(frac, RESTART_SHARE, 0.25))))
		return;
	f->cost = frac;
	f->pid = parent;
	DG_PUT(f, summary, "DataLoader workers restarted %d time%s, %.2f s of stalls (%.1f%% of wall time)",
	    refork, refork == 1 ? "" : "s", stall, 100 * frac);
	DG_PUT(f, evidence, "%d re-fork%s of %d workers in all (e.g. by PID %d); from each fork "
	    "to the trainer's first batch after it: %.2f s on average", refork,
	    refork == 1 ? "" : "s", workers, parent, stall / refork);
	DG_PUT(f, advice, "DataLoader(persistent_workers=True) keeps the workers across epochs; "
	    "lighter worker start-up (imports, dataset state copied into each worker)");
}

/*
 * Lock waits are judged on the main threads' own states: on the critical
 * path a wait for a lock holder becomes what the holder did meanwhile.
 */
static void rule_share(const struct dg_view *v, struct dg_out *fs, enum dg_id id,
		       int cat, double thr, double severe)
{
	double s = share(id == DG_LOCK_CONTENTION ? v->hl_own : v->hl, cat);
	struct dg_finding *f;

	/*
	 * Waits for a thread that feeds the loop are data loading's, and so
	 * is any wait inside a DataLoader fetch: at most the data phase's
	 * wall time of the lock waits was there.
	 */
	if (id == DG_LOCK_CONTENTION && total(v->hl_own) > 0) {
		int64_t in_data = v->data_phase ? total(v->ph[PH_DATA]) : 0;

		s -= (double)(fed_wait(v) + in_data) / total(v->hl_own);
	}

	if (s <= thr || !(f = dg_add(fs, id, s, thr, dg_ramp(s, thr, severe))))
		return;
	f->cost = s;
	if (id == DG_CPU_CONTENTION) {
		DG_PUT(f, summary, "CPU contention: runnable, waiting for a CPU %.1f%% (> %.0f%%)",
		    100 * s, 100 * thr);
		DG_PUT(f, evidence, "the trainer threads waited for a CPU %.1f%% of their time "
		    "on a machine with %d CPUs", 100 * s, v->ncpus);
		DG_PUT(f, advice, "fewer runnable threads than cores: torch.set_num_threads / "
		    "OMP_NUM_THREADS, num_workers at most cores minus ranks, pin ranks to cores "
		    "(taskset, numactl), move other load off the node");
	} else if (id == DG_LOCK_CONTENTION) {
		DG_PUT(f, summary, "lock contention %.1f%% (> %.0f%%)", 100 * s, 100 * thr);
		DG_PUT(f, evidence, "the trainer threads waited %.1f%% of their time for other "
		    "threads of the job (futexes, condition variables, the GIL); the holders were "
		    "%s on the critical path", 100 * s,
		    v->hl[TB_IDLE] > v->hl[TB_CPU] ? "mostly idle (holding the lock while waiting)" :
		    "mostly running");
		DG_PUT(f, advice, "fewer Python threads competing for the GIL, fewer intra-op threads, "
		    "shorter critical sections in shared queues; py-spy dump shows who holds it");
	} else {
		DG_PUT(f, summary, "communication-bound: %.1f%% (> %.0f%%)", 100 * s, 100 * thr);
		DG_PUT(f, evidence, "the trainer threads waited in collectives or on the "
		    "network %.1f%% of their time", 100 * s);
		DG_PUT(f, advice, "overlap communication with backward (DDP bucket_cap_mb, "
		    "gradient_as_bucket_view), fewer bytes (bf16 gradients, compression hooks), "
		    "more work per allreduce (larger batches, gradient accumulation with no_sync), "
		    "check the fabric (NCCL_DEBUG=INFO: IB or sockets)");
	}
}

/*
 * With phases: the trainers' time in the communication phase, the
 * collectives the loop calls itself outside backward, forward and
 * validation (docs/phases.md), whatever it was made of (the wait for the
 * slower rank, the network, the CPU between the calls). Without it, or
 * below the threshold, by the comm category's share.
 */
static void rule_comm(const struct dg_view *v, struct dg_out *fs)
{
	const int64_t *c = v->ph[PH_COMM];
	int64_t all = phases_total(v), in = total(c);
	struct dg_finding *f;
	double s;

	s = all > 0 ? (double)in / all : 0;
	if (s <= 0.20) {
		rule_share(v, fs, DG_COMM_BOUND, TB_COMM, 0.20, 0.60);
		return;
	}
	if (!(f = dg_add(fs, DG_COMM_BOUND, s, 0.20, dg_ramp(s, 0.20, 0.60))))
		return;
	f->cost = s;
	DG_PUT(f, summary, "communication-bound: the communication phase %.1f%% (> 20%%)", 100 * s);
	DG_PUT(f, evidence, "the trainer threads spent %.1f%% of their time in collectives "
	    "the loop calls outside backward, forward and validation (gradients averaged by "
	    "hand after backward, barriers, metric reductions between steps): waiting on the "
	    "network or for the slower rank %.1f%%, on the CPU %.1f%%, waiting for a CPU %.1f%%",
	    100 * s, pct(c[TB_COMM] + c[TB_LOCK] + c[TB_IDLE], all), pct(c[TB_CPU], all),
	    pct(c[TB_RUNQUEUE], all));
	DG_PUT(f, advice, "let DistributedDataParallel average the gradients: it overlaps their "
	    "allreduce with backward, bucket by bucket (one by hand after backward overlaps "
	    "nothing); fewer barriers and metric reductions (every N steps, or at the epoch's "
	    "end); check the fabric (NCCL_DEBUG=INFO: IB or sockets)");
}

static void rule_io_workers(const struct dg_view *v, struct dg_out *fs)
{
	double hl = share(v->hl, TB_DATA_WAIT) + share(v->hl, TB_IO), io;
	struct dg_finding *f;
	struct worker_sum w;

	sum_workers(v, &w);
	io = share(w.all, TB_IO);
	if (!w.n || io <= 0.5 || hl < 0.05 ||
	    !(f = dg_add(fs, DG_IO_WORKERS, io, 0.5, dg_ramp(io, 0.5, 0.9))))
		return;
	f->cost = hl;	/* the trainers' waits for data */
	DG_PUT(f, summary, "I/O-bound workers: %.1f%% of their time in storage I/O (> 50%%)", 100 * io);
	DG_PUT(f, evidence, "%d of %d DataLoader workers are I/O-bound; they spend %.1f%% of their "
	    "time blocked on storage, and the trainers wait for data %.1f%% of theirs",
	    w.io_bound, w.n, 100 * io, 100 * hl);
	DG_PUT(f, advice, "faster or local storage, page-cache-friendly formats (fewer, larger "
	    "files), more workers to keep more reads in flight");
}

/*
 * Across ranks: the one that spends least in communication is waited for.
 * Own states: a main thread that runs on right after a socket call shows
 * that run as communication on its critical path until it switches out.
 */
/* A rank: a trainer whose main thread ran training phases (when known). */
static bool rank_like(const struct dg_proc *p)
{
	return p->role == TB_ROLE_TRAINER && !p->folded && p->trained &&
	       total(p->main_own) > 0;
}

static void rule_slow_rank(const struct dg_view *v, struct dg_out *fs)
{
	const struct dg_proc *lo = NULL;
	double min = 2, max = -1, others = 0, worst = 0;
	int n = 0, worst_cat = TB_CPU;
	char name[128];
	struct dg_finding *f;

	for (int i = 0; i < v->n; i++) {
		const struct dg_proc *p = &v->p[i];
		double s = share(p->main_own, TB_COMM);

		if (!rank_like(p))
			continue;
		n++;
		others += s;
		if (s > max)
			max = s;
		if (s < min) {
			min = s;
			lo = p;
		}
	}
	if (n < 2 || max - min < 0.10 || max < 0.15)
		return;
	others = (others - min) / (n - 1);
	for (int c = 0; c < TB_NCAT; c++) {
		double more = share(lo->main_own, c);
		int m = 0;

		for (int i = 0; i < v->n; i++)
			if (rank_like(&v->p[i]) && &v->p[i] != lo) {
				more -= share(v->p[i].main_own, c) / (n - 1);
				m++;
			}
		if (c != TB_COMM && m && more > worst) {
			worst = more;
			worst_cat = c;
		}
	}
	if (!(f = dg_add(fs, DG_SLOW_RANK, max - min, 0.10, dg_ramp(max - min, 0.10, 0.50))))
		return;
	f->cost = max - min;	/* the others' waits for it, beyond its own */
	f->pid = lo->pid;
	who(name, sizeof(name), lo);
	DG_PUT(f, summary, "slow rank: %s; the other ranks wait for it in collectives", name);
	DG_PUT(f, evidence, "%s spends %.1f%% in communication, the other %d rank%s %.1f%% on "
	    "average; it spends %.1f points more than they do in %s", name, 100 * min, n - 1,
	    n == 2 ? "" : "s", 100 * others, 100 * worst, tb_cat_names[worst_cat]);
	DG_PUT(f, advice, "balance the work of that rank (uneven data shards or sequence lengths, "
	    "its data loading, a busier or slower host or GPU); check its node for other load");
}

static void rule_memory(const struct dg_view *v, struct dg_out *fs)
{
	double used = v->mem_total_kb ? 1.0 - (double)v->mem_min_avail_kb / v->mem_total_kb : 0;
	struct dg_finding *f;

	if (used <= 0.85 || !(f = dg_add(fs, DG_MEMORY, used, 0.85, dg_ramp(used, 0.85, 0.98))))
		return;
	DG_PUT(f, summary, "memory pressure: system RAM %.1f%% used (> 85%%)", 100 * used);
	DG_PUT(f, evidence, "at %.1f s into the window only %.2f GiB of %.2f GiB were available",
	    v->mem_min_at_s, v->mem_min_avail_kb / 1048576.0, v->mem_total_kb / 1048576.0);
	DG_PUT(f, advice, "fewer DataLoader workers or a smaller prefetch_factor (each worker "
	    "holds batches and a copy of Python-side dataset state), smaller host-side "
	    "caches; the OOM killer is next");
}

/* RSS up at the end of every complete epoch, by 10% and 64 MiB at least. */
static void rule_rss(const struct dg_view *v, struct dg_out *fs)
{
	for (int i = 0; i < v->nrss; i++) {
		const struct dg_rss_at *r = &v->rss[i];
		double grow;
		bool up = r->n >= 3;
		struct dg_finding *f;

		for (int k = 1; up && k < r->n; k++)
			up = r->kb[k] > r->kb[k - 1];
		if (!up || r->kb[r->n - 1] - r->kb[0] < 64 * MIB_KB)
			continue;
		grow = (double)(r->kb[r->n - 1] - r->kb[0]) / r->kb[0];
		if (grow < 0.10 || !(f = dg_add(fs, DG_RSS_GROWTH, grow, 0.10, dg_ramp(grow, 0.10, 1.0))))
			continue;
		f->pid = r->pid;
		DG_PUT(f, summary, "PID %d (%s) memory grows every epoch: +%.0f%% over %d epochs",
		    r->pid, role_name(r->role), 100 * grow, r->n - 1);
		DG_PUT(f, evidence, "resident memory %.0f MiB at the end of epoch %ld, %.0f MiB at the "
		    "end of epoch %ld: +%.1f MiB per epoch", r->kb[0] / 1024.0, r->label[0],
		    r->kb[r->n - 1] / 1024.0, r->label[r->n - 1],
		    (r->kb[r->n - 1] - r->kb[0]) / 1024.0 / (r->n - 1));
		DG_PUT(f, advice, "a leak across epochs: tensors kept alive in Python lists (append "
		    "loss.item(), not loss), growing caches or histories; tracemalloc or "
		    "torch.cuda.memory_snapshot find them");
	}
}

/*
 * The time a finding costs the job first: with num_workers=0 the waits
 * for a CPU (severity 0.83, 35% of the time) came above data loading
 * (0.75, 41%), the cause. Findings of no time (memory, the GPU's own
 * side) after those, by severity.
 */
static int by_cost(const void *a, const void *b)
{
	const struct dg_finding *x = a, *y = b;

	if (x->cost != y->cost)
		return x->cost < y->cost ? 1 : -1;
	return x->severity < y->severity ? 1 : x->severity > y->severity ? -1 :
	       (int)x->id - (int)y->id;
}

void diag_rank(struct dg_finding *fs, int n)
{
	if (n > 1)
		qsort(fs, n, sizeof(*fs), by_cost);
}

/*
 * Recordings before schema 6 kept no cost: where it is the value that
 * fired (a share of the trainers' time), that; else 0 (ranked by
 * severity, as they were).
 */
double diag_cost_of_value(enum dg_id id, double value)
{
	/* A share, whatever a file says. */
	if (!(value > 0))
		return 0;
	if (value > 1)
		value = 1;
	switch (id) {
	case DG_DATA_LOADING:
	case DG_CHECKPOINT:
	case DG_HOST_BOUND:
	case DG_WORKER_RESTARTS:
	case DG_CPU_CONTENTION:
	case DG_LOCK_CONTENTION:
	case DG_COMM_BOUND:
	case DG_SLOW_RANK:
		return value;
	case DG_GPU_THROTTLE:
		return value / (1 + value);
	default:
		return 0;
	}
}

int diag_run(const struct dg_view *v, struct dg_finding *out, int max)
{
	struct dg_out fs = { out, 0, max };

	if (total(v->hl) > 0) {
		rule_data(v, &fs);
		rule_checkpoint(v, &fs);
		rule_host_bound(v, &fs);
		rule_syncs(v, &fs);
		rule_worker_restarts(v, &fs);
		rule_share(v, &fs, DG_CPU_CONTENTION, TB_RUNQUEUE, 0.10, 0.40);
		rule_share(v, &fs, DG_LOCK_CONTENTION, TB_LOCK, 0.10, 0.40);
		rule_io_workers(v, &fs);
		rule_comm(v, &fs);
		rule_slow_rank(v, &fs);
	}
	rule_memory(v, &fs);
	rule_rss(v, &fs);
	fs.n = diag_gpu_rules(v, out, fs.n, fs.max);
	diag_rank(out, fs.n);
	return fs.n;
}
