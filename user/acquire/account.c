// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "account.h"
#include "procfs.h"
#include "syscall_class.h"

/* Never-used slots start past a run this long of free ones (LIFO stack). */
#define FREE_RUN_END 64

static void add_both(uint64_t own[TB_NCAT], uint64_t cp[TB_NCAT],
		     unsigned int o, unsigned int c, uint64_t d)
{
	own[o] += d;
	cp[c] += d;
}

void account_unknown(uint64_t elapsed, uint64_t dcpu, uint64_t drq,
		     unsigned int wait, uint64_t own[TB_NCAT],
		     uint64_t cp[TB_NCAT])
{
	static const struct tb_waker_info none;
	unsigned int cat = tb_wait_category(wait, TB_WK_NONE, &none);

	/* Two clocks read microseconds apart: keep the sum exact. */
	if (dcpu > elapsed)
		dcpu = elapsed;
	if (drq > elapsed - dcpu)
		drq = elapsed - dcpu;
	add_both(own, cp, TB_CPU, TB_CPU, dcpu);
	add_both(own, cp, TB_RUNQUEUE, TB_RUNQUEUE, drq);
	add_both(own, cp, cat, cat, elapsed - dcpu - drq);
}

/* The categories the open interval of a live, known slot goes to. */
static void open_cats(const struct tb_slot *s, unsigned int *own, unsigned int *cp)
{
	switch (s->state) {
	case TB_ST_ONCPU:
		*own = tb_oncpu_own(s);
		*cp = tb_oncpu_cp(s);
		return;
	case TB_ST_RUNNABLE:
		*own = *cp = tb_runnable_cat(s);
		return;
	default:	/* TB_ST_BLOCKED */
		/* Inside a probed CUDA/NCCL call, that call is what it waits for. */
		*own = *cp = s->depth ? s->region :
			tb_wait_category(s->wait, TB_WK_NONE, &(struct tb_waker_info){ 0 });
	}
}

void account_open_interval(const struct tb_slot *s, uint64_t now,
			   uint64_t own[TB_NCAT], uint64_t cp[TB_NCAT])
{
	uint64_t d = now > s->since ? now - s->since : 0;
	unsigned int o, c;

	if (s->state != TB_ST_ONCPU && s->state != TB_ST_RUNNABLE &&
	    s->state != TB_ST_BLOCKED)
		return;
	open_cats(s, &o, &c);
	add_both(own, cp, o, c, d);
}

static unsigned int unknown_wait(pid_t pid, pid_t tid)
{
	long arg0 = 0, nr = procfs_syscall(pid, tid, &arg0);
	unsigned int w;

	if (nr < 0)
		return TB_W_OTHER;
	w = tb_syscall_wait(nr);
	return w == TB_W_FD ? procfs_fd_wait(pid, arg0) : w;
}

/*
 * Where the open interval of a slot read in the first pass goes, to be
 * added once the instant of the totals is known (account_refresh).
 */
static void note_open(struct tracer *tr, unsigned int idx, const struct tb_slot *s,
		      const struct thread_rec *t)
{
	struct tracer_open *o;

	if (tr->nopen == tr->open_cap) {
		unsigned int cap = tr->open_cap ? 2 * tr->open_cap : 64;
		void *n = realloc(tr->open, cap * sizeof(*tr->open));

		if (!n)
			abort();	/* as job.c: out of memory, nothing left to say */
		tr->open = n;
		tr->open_cap = cap;
	}
	o = &tr->open[tr->nopen++];
	o->slot = idx;
	o->since = s->since;
	o->phase = s->phase < TB_NPHASE ? s->phase : TB_PH_OTHER;
	o->unknown = s->state == TB_ST_UNKNOWN;
	if (o->unknown) {
		uint64_t cpu, rq;

		/* Gone meanwhile: its exit event will give the final split. */
		if (procfs_schedstat(s->tgid, s->tid, &cpu, &rq) ||
		    cpu < t->base_cpu || rq < t->base_rq)
			cpu = t->base_cpu, rq = t->base_rq;
		o->dcpu = cpu - t->base_cpu;
		o->drq = rq - t->base_rq;
		o->wait = unknown_wait(s->tgid, s->tid);
	} else {
		unsigned int own, cp;

		open_cats(s, &own, &cp);
		o->own = own;
		o->cp = cp;
	}
}

/* The totals BPF closed; the open interval waits for the second pass. */
static void fill_closed(struct tracer *tr, unsigned int idx, struct thread_rec *t,
			const struct tb_slot *s)
{
	memcpy(t->own, s->own, sizeof(t->own));
	memcpy(t->cp, s->cp, sizeof(t->cp));
	memcpy(t->ph, s->ph, sizeof(t->ph));
	memcpy(t->wio, s->wio, sizeof(t->wio));
	memcpy(t->comm, s->comm, sizeof(t->comm));
	t->io_rbytes = s->io_rbytes;
	t->io_wbytes = s->io_wbytes;
	t->nswitch = s->nswitch;
	t->kskew_ns = s->kskew_ns;
	t->fed = s->fed;
	if (s->state == TB_ST_EXITED)
		t->end_ns = s->end_ns;
	else
		note_open(tr, idx, s, t);
}

/*
 * The open interval [since, now) in the phase the thread runs in, so the
 * phase rows still sum to the critical path, category by category.
 */
static void add_open(struct thread_rec *t, const struct tracer_open *o, uint64_t now)
{
	uint64_t cp0[TB_NCAT];

	memcpy(cp0, t->cp, sizeof(cp0));
	if (o->unknown)
		account_unknown(now > o->since ? now - o->since : 0, o->dcpu, o->drq,
				o->wait, t->own, t->cp);
	else
		add_both(t->own, t->cp, o->own, o->cp, now > o->since ? now - o->since : 0);
	for (int c = 0; c < TB_NCAT; c++)
		t->ph[o->phase][c] += t->cp[c] - cp0[c];
}

/* The job record of a slot, created when BPF started tracing a new task. */
static struct thread_rec *slot_thread(struct tracer *tr, unsigned int idx,
				      const struct tb_slot *s)
{
	struct slot_owner *o = &tr->owner[idx];
	struct proc_rec *p;
	struct thread_rec *t;

	if (o->proc >= 0)
		return &tr->job->procs[o->proc].threads[o->thread];
	if (!s->tid)
		return NULL;	/* not a thread's: see quarantine() */
	p = job_proc(tr->job, s->tgid);
	if (!p || (p->end_ns && p->end_ns < s->start_ns)) {
		struct proc_stat st = { .ppid = 0 };

		procfs_stat(s->tgid, 0, &st);
		p = job_add_proc(tr->job, s->tgid, st.ppid, s->comm, s->start_ns);
	}
	t = job_add_thread(p, s->tid, s->comm, s->start_ns);
	t->slot = idx;
	o->proc = p - tr->job->procs;
	o->thread = t - p->threads;
	return t;
}

/*
 * A slot whose thread has exited goes back to BPF only a while after its
 * exit was read. The exiting task still runs briefly after its exit
 * tracepoint (its last switch-out), and a handler that checked the slot
 * just before user space cleared it would write into the cleared slot,
 * or into the next thread's. Refreshes come every few ms when processes
 * fork (user/epochs.c), so this is not rare without the wait.
 */
#define QUARANTINE_NS 100000000ull

static bool quarantine(struct tracer *tr, unsigned int i, uint64_t now)
{
	struct slot_owner *o = &tr->owner[i];

	if (!o->exited_at)
		return false;
	if (now - o->exited_at >= QUARANTINE_NS)
		tracer_free_slot(tr, i);
	return true;
}

/*
 * Two passes, so that the instant of the totals comes after every slot is
 * read: BPF stamps an interval it closes with its own clock, and a slot
 * read after an instant taken first can hold time past it (a thread's
 * totals past its own timestamp: rows that sum to more than its life).
 */
uint64_t account_refresh(struct tracer *tr, uint64_t before)
{
	unsigned int free_run = 0;
	struct tb_slot s;
	uint64_t now;

	tr->nopen = 0;
	for (unsigned int i = 0; i < tr->nslots; i++) {
		struct proc_rec *p;
		struct thread_rec *t;

		if (i < tr->scan_end && quarantine(tr, i, before)) {
			free_run = 0;
			continue;
		}
		if (!tracer_read_slot(tr, i, &s)) {
			if (i >= tr->scan_end && ++free_run >= FREE_RUN_END)
				break;
			continue;
		}
		free_run = 0;
		if (i >= tr->scan_end)
			tr->scan_end = i + 1;
		t = slot_thread(tr, i, &s);
		if (!t)
			continue;
		p = &tr->job->procs[tr->owner[i].proc];
		fill_closed(tr, i, t, &s);
		if (s.tid == s.tgid)	/* processes rename themselves too */
			memcpy(p->comm, s.comm, sizeof(s.comm));
		if (s.state == TB_ST_EXITED) {
			job_note_backward(p, t);
			t->slot = -1;
			tr->owner[i].exited_at = before;
		}
	}
	now = now_ns();
	for (unsigned int k = 0; k < tr->nopen; k++) {
		const struct slot_owner *o = &tr->owner[tr->open[k].slot];
		struct proc_rec *p = &tr->job->procs[o->proc];
		struct thread_rec *t = &p->threads[o->thread];

		add_open(t, &tr->open[k], now);
		t->read_ns = now;
		job_note_backward(p, t);
	}
	for (int i = 0; i < tr->job->nprocs; i++) {
		struct proc_rec *p = &tr->job->procs[i];

		if (job_proc_alive(p))
			p->flags |= tracer_proc_flags(tr, p->pid);
	}
	return now;
}
