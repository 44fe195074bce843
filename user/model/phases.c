// SPDX-License-Identifier: BSD-3-Clause
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "gpu.h"
#include "job.h"
#include "phases.h"

_Static_assert(sizeof(((struct tb_phase_event *)0)->row) == TB_NCAT * sizeof(__u64),
	       "a phase event carries one row of categories");

const char *const ph_source_names[PH_NSOURCES] = {
	"none", "unnamed", "backward", "brackets",
};

/* The shown phase a BPF phase's row goes to. */
static int fold_to(int p, bool in_val)
{
	return in_val && ph_is_pending(p) ? PH_VALIDATION : ph_shown_of(p);
}

void phases_fold(const uint64_t ph[TB_NPHASE][TB_NCAT], bool in_val,
		 uint64_t out[PH_NSHOWN][TB_NCAT])
{
	memset(out, 0, sizeof(uint64_t) * PH_NSHOWN * TB_NCAT);
	for (int p = 0; p < TB_NPHASE; p++)
		for (int c = 0; c < TB_NCAT; c++)
			out[fold_to(p, in_val)][c] += ph[p][c];
}

void phases_fold_ends(const uint64_t ph[TB_NPHASE][TB_NCAT],
		      const uint64_t ends[2][TB_NCAT], bool in_val,
		      uint64_t out[PH_NSHOWN][TB_NCAT])
{
	phases_fold(ph, in_val, out);
	phases_split_ends(out, ends);
}

void phases_split_ends(uint64_t out[PH_NSHOWN][TB_NCAT], const uint64_t ends[2][TB_NCAT])
{
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < TB_NCAT; c++) {
			uint64_t v = ends[e][c] < out[PH_OTHER][c] ? ends[e][c] : out[PH_OTHER][c];

			out[PH_OTHER][c] -= v;
			out[PH_SETUP + e][c] = v;
		}
}

struct ph_thread *phases_add_thread(struct phases *p, pid_t pid, pid_t tid)
{
	struct ph_thread *t;

	for (int i = 0; i < p->nth; i++)
		if (p->th[i].tid == tid && p->th[i].pid == pid)
			return &p->th[i];
	if (p->nth >= PH_MAX_THREADS) {
		p->threads_over++;
		return NULL;
	}
	t = tb_append(&p->th, &p->nth, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	t->last_phase = -1;
	return t;
}

const struct ph_thread *phases_thread(const struct phases *p, pid_t tid)
{
	for (int i = p->nth - 1; i >= 0; i--)
		if (p->th[i].tid == tid)
			return &p->th[i];
	return NULL;
}

/*
 * Every thread that runs phases keeps its ring, not only main threads: the
 * loop thread may be any (phases_trainer), and who it is settles only at
 * its first backward, its spans before that needed as much.
 */
static void ring_push(struct phases *p, struct ph_thread *t, const struct ph_span *sp)
{
	if (!t->ring && !t->ring_tried) {
		t->ring_tried = true;
		if (!p->no_rings && p->nrings < PH_MAX_RINGS &&
		    (t->ring = calloc(1, sizeof(*t->ring))))
			p->nrings++;
	}
	if (!t->ring)
		return;
	t->ring->s[t->ring->head] = *sp;
	t->ring->head = (t->ring->head + 1) % PH_RING;
	if (t->ring->n < PH_RING)
		t->ring->n++;
}

struct span_ctx {
	struct phases *p;
	struct ph_thread *t;
};

/* A settled span: the thread's time in its phase, and its step's if it is in it. */
static void on_span(void *arg, const struct ph_span *sp)
{
	struct span_ctx *x = arg;
	struct ph_thread *t = x->t;
	uint64_t d = sp->end - sp->start;

	t->tot[sp->phase] += d;
	if (sp->startup)
		t->startup += d;
	if (t->start && sp->start >= t->start)
		t->ns[sp->phase] += d;
	ring_push(x->p, t, sp);
}

/* One step's phase times (ns) and wall time into s. */
static void stat_add(struct ph_stat *s, const uint64_t ns[PH_NSHOWN], uint64_t wall_ns)
{
	for (int p = 0; p < PH_NSHOWN; p++) {
		double ms = ns[p] / 1e6;

		if (!s->steps || ms < s->min_ms[p])
			s->min_ms[p] = ms;
		if (!s->steps || ms > s->max_ms[p])
			s->max_ms[p] = ms;
		s->total_ms[p] += ms;
		s->sum_sq[p] += ms * ms;
	}
	s->step_ms += wall_ns / 1e6;
	s->steps++;
}

/*
 * A training step ends at the next fetch: its phases' times. It joins the
 * optimizer step under way, which it ends if it called the optimizer.
 */
static void close_step(struct ph_thread *t, uint64_t end)
{
	if (!t->start || end <= t->start || !t->trained)
		return;
	stat_add(&t->steps, t->ns, end - t->start);
	for (int p = 0; p < PH_NSHOWN; p++)
		t->acc[p] += t->ns[p];
	t->acc_ns += end - t->start;
	t->acc_n++;
	if (!t->opt)
		return;
	stat_add(&t->osteps, t->acc, t->acc_ns);
	t->omicro += t->acc_n;
	memset(t->acc, 0, sizeof(t->acc));
	t->acc_ns = 0;
	t->acc_n = 0;
}

static void next_step(struct ph_thread *t, uint64_t ts, bool trained)
{
	close_step(t, ts);
	memset(t->ns, 0, sizeof(t->ns));
	t->start = ts;
	t->trained = trained;
	t->opt = false;
}

const struct ph_thread *phases_trainer(const struct phases *p, pid_t pid)
{
	for (int i = 0; p && i < p->nth; i++)
		if (p->th[i].pid == pid && p->th[i].trainer)
			return &p->th[i];
	return NULL;
}

/*
 * Whether t (its first event if fresh) takes over as its process's loop
 * thread: a thread that ran a backward keeps it for good; until one has,
 * the newest thread to run phases, or the first to run a backward.
 */
static bool take_trainer(struct phases *p, struct ph_thread *t, bool fresh,
			 const struct tb_phase_event *e)
{
	bool bwd = e->phase == TB_PH_BACKWARD && e->cls == TB_BC_BACKWARD;
	struct ph_thread *cur = (struct ph_thread *)phases_trainer(p, t->pid);

	t->backward |= bwd;
	if (cur == t || (cur && cur->backward) || (cur && !fresh && !bwd))
		return false;
	if (cur)
		cur->trainer = false;
	t->trainer = true;
	return true;
}

bool phases_on_event(struct phases *p, const struct tb_phase_event *e)
{
	int nth = p->nth;
	struct ph_thread *t = phases_add_thread(p, e->pid, e->tid);
	struct pass_step st;
	bool moved;

	p->events++;
	if ((e->cls == TB_BC_DATA && e->phase == TB_PH_PEND_DATA) ||
	    (e->cls == TB_BC_OPTIM && e->phase == TB_PH_OPTIMIZER))
		p->named++;
	if (!t)
		return false;
	moved = take_trainer(p, t, p->nth > nth, e);
	/* Its first event: OTHER's row (bpf/torch.bpf.h); the new phase's is still 0. */
	if (!t->sp.since)
		memcpy(t->setup_row, e->row, sizeof(t->setup_row));
	t->last_phase = e->phase < TB_NPHASE ? e->phase : -1;
	if (t->sp.since || e->phase == TB_PH_OTHER)
		memcpy(t->last_row, e->row, sizeof(t->last_row));
	else
		memset(t->last_row, 0, sizeof(t->last_row));
	ph_spans_event(&t->sp, e, on_span, &(struct span_ctx){ p, t });
	if ((e->resolved & TB_RS_HOW) == TB_RS_TRAINED)
		t->trained = true;
	/* A pass completed: the training step that begins the next says so (passes.c). */
	if (pass_on_phase(&t->pass, true, e, &st) && st.begins && !st.first)
		t->passes++;
	if (e->cls == TB_BC_OPTIM && e->phase == TB_PH_OPTIMIZER && t->trained)
		t->opt = true;
	/* A fetch starts the next step: the one before is complete. */
	if (e->phase == TB_PH_PEND_DATA && e->cls == TB_BC_DATA) {
		t->fetches++;
		next_step(t, e->ts, false);
	} else if (e->phase == TB_PH_BACKWARD && e->cls == TB_BC_BACKWARD && !t->fetches) {
		next_step(t, e->ts, true);	/* no DataLoader: backward to backward */
	}
	return moved;
}

void phases_finish(struct phases *p, const struct gpu *g)
{
	if (!gpu_has_torch(g))
		p->source = PH_SRC_NONE;
	else if (p->named)
		p->source = PH_SRC_BRACKETS;
	else if (!gpu_torch_closes(g))
		p->source = PH_SRC_UNNAMED;
	else
		p->source = PH_SRC_BACKWARD;
}

/* A thread of a live process (not one folded into a sum). */
static struct thread_rec *thread_of(struct job *job, pid_t pid, pid_t tid)
{
	struct proc_rec *p = job_proc(job, pid);

	for (int i = 0; p && i < p->nthreads; i++)
		if (p->threads[i].tid == tid)
			return &p->threads[i];
	return NULL;
}

/* Its rows of phase `from` go to other. */
static void row_to_other(struct thread_rec *t, int from)
{
	for (int c = 0; c < TB_NCAT; c++) {
		t->ph[TB_PH_OTHER][c] += t->ph[from][c];
		t->ph[from][c] = 0;
	}
	t->wio[TB_PH_OTHER] += t->wio[from];
	t->wio[from] = 0;
}

/* Of io moved from ph to other, the writes (as many as there were). */
static void tail_writes(struct thread_rec *t, int ph, uint64_t io)
{
	uint64_t w = t->wio[ph] < io ? t->wio[ph] : io;

	t->wio[ph] -= w;
	t->wio[TB_PH_OTHER] += w;
}

/* A thread found running (-p, a scan): mid-loop then, no setup of its own. */
static bool found_running(const struct phases *p, const struct thread_rec *t)
{
	return t->found && !p->launched;
}

void phases_sync_ends(struct phases *p, struct job *job)
{
	for (int i = 0; i < p->nth; i++) {
		struct ph_thread *pt = &p->th[i];
		struct thread_rec *t;

		/* Once: the setup is fixed at the first event (a refresh, 10 a second). */
		if (pt->setup_synced || !pt->sp.since || !(t = thread_of(job, pt->pid, pt->tid)))
			continue;
		pt->setup_synced = true;
		if (found_running(p, t)) {
			memset(t->ends[0], 0, sizeof(t->ends[0]));
			pt->lead_ns = sum_cats(pt->setup_row);
		} else {
			memcpy(t->ends[0], pt->setup_row, sizeof(t->ends[0]));
		}
		pt->ends_ns[0] = sum_cats(t->ends[0]);
	}
}

/*
 * Its teardown: what came after its last event, moved to other (other's
 * own too). That is the last phase's row's growth since, and the stretch
 * after a communication wait (PEND_COMM, entered silently: all of it came
 * after the event that began the wait; phases_settle_tail moves that row
 * to other). Without it, a rank whose last event began a collective (the
 * barrier of destroy_process_group) had 0.8 s of its 12 s life in other's
 * made-of and in no row's wall time.
 * A thread that never fetched: all it has pending met no backward, and
 * is the teardown too (ph_spans_unfetched_end). Its waits in the
 * interpreter's exit (joins, closes) each send a "fed" event (BPF's
 * feed_wait), so its last event came late in the exit: from the last one
 * alone, a 33 s loop had 0.57 s of its exit in other.
 */
static void settle_one(struct ph_thread *pt, struct thread_rec *t)
{
	int ph = pt->last_phase;
	bool unfetched = !pt->sp.fetcher;
	/* Its pending rows are all the teardown's, the tail since the last event with them. */
	bool whole = unfetched && (ph == TB_PH_PEND_FWD || ph == TB_PH_PEND_DATA);

	for (int c = 0; c < TB_NCAT; c++) {
		uint64_t tail = t->ph[ph][c] > pt->last_row[c] ? t->ph[ph][c] - pt->last_row[c] : 0;

		if (whole)
			tail = 0;
		t->ends[1][c] = tail + (ph != TB_PH_PEND_COMM ? t->ph[TB_PH_PEND_COMM][c] : 0);
		if (unfetched)
			t->ends[1][c] += t->ph[TB_PH_PEND_DATA][c] + t->ph[TB_PH_PEND_FWD][c];
		if (ph == TB_PH_OTHER)
			continue;
		t->ph[ph][c] -= tail;
		t->ph[TB_PH_OTHER][c] += tail;
		/* Its writes are no phase's either (fsync after the last save). */
		if (c == TB_IO)
			tail_writes(t, ph, tail);
	}
	pt->ends_ns[1] = sum_cats(t->ends[1]);
}

/*
 * A loop left with `break` after its last step (a step limit): no fetch
 * follows to close that step. Once the thread has ended, its last event
 * (the step's optimizer end, or a bracket after it) does, its backward
 * done; while it runs, the step may go on. The epochs' count takes the
 * same end (ended_step: epochs_finish).
 */
static void close_last_step(struct ph_thread *pt, const struct thread_rec *t)
{
	if (t->end_ns && pt->sp.fetcher && pt->trained && pt->sp.phase != TB_PH_BACKWARD &&
	    pt->sp.since > pt->start) {
		next_step(pt, pt->sp.since, false);
		pt->ended_step = pt->sp.since;
	}
}

static void no_span(void *arg, const struct ph_span *sp)
{
	(void)arg;
	(void)sp;
}

void phases_settle_tail(struct phases *p, struct job *job)
{
	phases_sync_ends(p, job);
	for (int i = 0; i < p->nth; i++) {
		struct ph_thread *pt = &p->th[i];
		int ph = pt->last_phase;
		struct thread_rec *t;

		if (ph < 0 || !(t = thread_of(job, pt->pid, pt->tid)))
			continue;
		close_last_step(pt, t);
		settle_one(pt, t);
		/* After a communication wait, nothing told: the teardown's. */
		row_to_other(t, TB_PH_PEND_COMM);
		if (!pt->sp.fetcher) {
			row_to_other(t, TB_PH_PEND_DATA);
			row_to_other(t, TB_PH_PEND_FWD);
			/* Their wall time is the teardown's (ends_ns), from the rows. */
			ph_spans_unfetched_end(&pt->sp, no_span, NULL);
		}
	}
}

int ph_source_find(const char *name)
{
	for (int i = 0; i < PH_NSOURCES; i++)
		if (!strcmp(name, ph_source_names[i]))
			return i;
	return -1;
}

void phases_forget_gone(struct phases *p, const struct job *job, uint64_t before)
{
	int n = 0;

	for (int i = 0; i < p->nth; i++) {
		struct ph_thread *t = &p->th[i];
		const struct proc_rec *pr = job_proc_const(job, t->pid);

		if (!pr || (pr->end_ns && pr->end_ns < before)) {
			if (t->ring)
				p->nrings--;
			free(t->ring);
			continue;
		}
		p->th[n++] = *t;
	}
	p->nth = n;
}

void phases_free(struct phases *p)
{
	for (int i = 0; i < p->nth; i++)
		free(p->th[i].ring);
	free(p->th);
	memset(p, 0, sizeof(*p));
}

bool ph_stat_defined(const struct ph_stat *s, int phase)
{
	return s->steps > 0 && phase != PH_VALIDATION && phase < PH_NLOOP;
}

double ph_stat_avg(const struct ph_stat *s, int phase)
{
	return s->steps ? s->total_ms[phase] / s->steps : 0.0;
}

double ph_stat_std(const struct ph_stat *s, int phase)
{
	double avg = ph_stat_avg(s, phase), var;

	if (s->steps < 2)
		return 0.0;
	var = (s->sum_sq[phase] - s->steps * avg * avg) / (s->steps - 1);
	return var > 0 ? sqrt(var) : 0.0;
}

static void merge(struct ph_stat *into, const struct ph_stat *s)
{
	for (int p = 0; p < PH_NSHOWN && s->steps; p++) {
		if (!into->steps || s->min_ms[p] < into->min_ms[p])
			into->min_ms[p] = s->min_ms[p];
		if (!into->steps || s->max_ms[p] > into->max_ms[p])
			into->max_ms[p] = s->max_ms[p];
		into->total_ms[p] += s->total_ms[p];
		into->sum_sq[p] += s->sum_sq[p];
	}
	into->step_ms += s->step_ms;
	into->steps += s->steps;
}

/* A thread's wall time per phase, a step still pending folded as in phases_fold (added). */
static void wall_ns(const struct ph_thread *t, uint64_t ns[PH_NSHOWN])
{
	const uint64_t *pend = t->sp.pend_ns;

	for (int p = 0; p < PH_NSHOWN; p++)
		ns[p] += t->tot[p];
	if (t->sp.in_val) {
		ns[PH_VALIDATION] += pend[PH_PEND_DATA] + pend[PH_PEND_FWD] + pend[PH_PEND_HELD] +
				     pend[PH_PEND_START] + pend[PH_PEND_SHELD];
		return;
	}
	ns[PH_DATA] += pend[PH_PEND_DATA] + pend[PH_PEND_SHELD];
	ns[PH_FORWARD] += pend[PH_PEND_FWD];
	ns[PH_OTHER] += pend[PH_PEND_HELD] + pend[PH_PEND_START];
}

/* Its data's worker start-up, wall time, a start-up still pending folded as in wall_ns. */
static uint64_t startup_ns(const struct ph_thread *t)
{
	return t->startup + (t->sp.in_val ? 0 : t->sp.pend_ns[PH_PEND_SHELD]);
}

static void wall(const struct ph_thread *t, double ms[PH_NSHOWN], double *startup_ms)
{
	uint64_t ns[PH_NSHOWN] = { 0 };

	wall_ns(t, ns);
	ns[PH_OTHER] += t->lead_ns;
	ns[PH_SETUP] += t->ends_ns[0];
	ns[PH_TEARDOWN] += t->ends_ns[1];
	for (int p = 0; p < PH_NSHOWN; p++)
		ms[p] += ns[p] / 1e6;
	*startup_ms += startup_ns(t) / 1e6;
}

/* Its settled time before ts: the spans that ended after it, taken off. */
static void before(const struct ph_thread *t, uint64_t ts, uint64_t out[PH_NSHOWN])
{
	const struct ph_ring *r = t->ring;

	for (int p = 0; p < PH_NSHOWN; p++)
		out[p] += t->tot[p];
	for (int k = 0; r && k < r->n; k++) {
		const struct ph_span *s = &r->s[(r->head - 1 - k + PH_RING) % PH_RING];

		if (s->end <= ts)
			break;
		out[s->phase] -= s->end - (s->start > ts ? s->start : ts);
	}
}

void phases_main_before(const struct phases *p, uint64_t ts, uint64_t out[PH_NSHOWN])
{
	memset(out, 0, sizeof(uint64_t) * PH_NSHOWN);
	for (int i = 0; p && i < p->nth; i++)
		if (p->th[i].trainer)
			before(&p->th[i], ts, out);
}

void phases_main_now(const struct phases *p, uint64_t out[PH_NSHOWN])
{
	memset(out, 0, sizeof(uint64_t) * PH_NSHOWN);
	for (int i = 0; p && i < p->nth; i++)
		if (p->th[i].trainer)
			wall_ns(&p->th[i], out);
}

/*
 * Its steps are optimizer steps where it called the optimizer after a
 * backward and an optimizer step took more than one training step
 * (gradient accumulation), else its training steps: the same steps where
 * each calls the optimizer, and where none does (no optimizer bracket:
 * torch < 2 with no legacy names, an optimizer of the job's own).
 */
void phases_thread_sum(const struct ph_thread *t, struct ph_sum *sum)
{
	int src = t->fetches ? PH_STEPS_FETCH : PH_STEPS_BACKWARD;
	bool optim = t->osteps.steps > 0 && t->omicro > t->osteps.steps;

	const struct ph_stat *st = optim ? &t->osteps : &t->steps;

	if (st->steps && (!sum->each_max || st->steps < sum->each_min))
		sum->each_min = st->steps;
	if (st->steps > sum->each_max)
		sum->each_max = st->steps;
	merge(&sum->steps, st);
	sum->micro += t->steps.steps;
	sum->micro_in += optim ? t->omicro : t->steps.steps;
	sum->optim += optim;
	wall(t, sum->wall_ms, &sum->startup_ms);
	if (t->steps.steps)
		sum->step_source = !sum->step_source || sum->step_source == src ? src :
				   PH_STEPS_MIXED;
}

/* Process i's trainer thread if it is a trainer, and its steps (pt, may be NULL). */
static const struct thread_rec *trainer_main(const struct phases *ph, const struct job *job,
					     int i, const struct ph_thread **pt)
{
	const struct thread_rec *t = job_trainer_thread(&job->procs[i]);

	if (job->procs[i].role != TB_ROLE_TRAINER || !t)
		return NULL;
	*pt = ph ? phases_thread(ph, t->tid) : NULL;
	return t;
}

int phases_job(const struct phases *ph, const struct job *job,
	       uint64_t rows[PH_NSHOWN][TB_NCAT], struct ph_sum *sum)
{
	uint64_t one[PH_NSHOWN][TB_NCAT];
	int n = 0;

	memset(rows, 0, sizeof(uint64_t) * PH_NSHOWN * TB_NCAT);
	memset(sum, 0, sizeof(*sum));
	for (int i = 0; i < job->nprocs; i++) {
		const struct ph_thread *pt;
		const struct thread_rec *t = trainer_main(ph, job, i, &pt);

		if (!t)
			continue;
		phases_fold_ends(t->ph, t->ends, pt && pt->sp.in_val, one);
		for (int p = 0; p < PH_NSHOWN; p++)
			for (int c = 0; c < TB_NCAT; c++)
				rows[p][c] += one[p][c];
		if (pt) {
			phases_thread_sum(pt, sum);
			n++;
		}
	}
	return n;
}

void phases_startup_rows(const uint64_t ph[TB_NPHASE][TB_NCAT], bool in_val,
			 uint64_t out[TB_NCAT])
{
	for (int c = 0; c < TB_NCAT; c++)
		out[c] += ph[TB_PH_WSTART][c] + (in_val ? 0 : ph[TB_PH_PEND_SHELD][c]);
}

void phases_job_startup(const struct phases *ph, const struct job *job, uint64_t out[TB_NCAT])
{
	memset(out, 0, sizeof(uint64_t) * TB_NCAT);
	for (int i = 0; i < job->nprocs; i++) {
		const struct ph_thread *pt;
		const struct thread_rec *t = trainer_main(ph, job, i, &pt);

		if (t)
			phases_startup_rows(t->ph, pt && pt->sp.in_val, out);
	}
}

void phases_job_writes(const struct phases *ph, const struct job *job, uint64_t out[PH_NSHOWN])
{
	memset(out, 0, sizeof(uint64_t) * PH_NSHOWN);
	for (int i = 0; i < job->nprocs; i++) {
		const struct ph_thread *pt;
		const struct thread_rec *t = trainer_main(ph, job, i, &pt);

		for (int p = 0; t && p < TB_NPHASE; p++)
			out[fold_to(p, pt && pt->sp.in_val)] += t->wio[p];
	}
}
