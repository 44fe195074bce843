// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * The per-thread state machine. Every traced thread is ONCPU, RUNNABLE or
 * BLOCKED; each transition closes the open interval [since, now) into one
 * category, so a thread's categories always sum to its lifetime.
 *
 *   sched_switch out: ONCPU -> RUNNABLE (preempted) or BLOCKED (+ why)
 *   sched_waking:     BLOCKED -> RUNNABLE; the waker, whose context this is,
 *                     decides the category
 *   sched_switch in:  RUNNABLE -> ONCPU; the time from the waking to the
 *                     enqueue goes back to the wait (queued_at)
 *   fork / exec / exit: follow the process tree, tell user space
 *
 * Traced tasks carry task-local storage naming their slot; for any other
 * task on the machine each program returns after one pointer test.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "trainbpf.h"
#include "pystack.h"
#include "compat.bpf.h"
#include "wait_reason.bpf.h"
#include "critpath.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tb_task);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, TB_DEFAULT_SLOTS);
	__type(key, __u32);
	__type(value, struct tb_slot);
} slots SEC(".maps");

/* Free slot indexes; user space fills it and returns freed slots. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK);
	__uint(max_entries, TB_DEFAULT_SLOTS);
	__uint(value_size, sizeof(__u32));
} free_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct tb_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/*
 * serve's share of the slots per process (tb_thread_quota, 0: none): a
 * process of another user that starts thousands of threads must not take
 * the slots of the jobs that start after it. Per traced process, the
 * threads BPF gave a slot at their fork that have not exited (only BPF
 * writes it: atomic adds), and those user space found running and gave
 * one (only user space writes it).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __s64);
} proc_forked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} proc_found SEC(".maps");

/*
 * The state-transition stream (record mode): its own ring, so that a flood
 * of intervals cannot crowd out lifecycle events. User space sizes it when
 * the stream is on; off, it stays one page and is never written.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} states SEC(".maps");

/*
 * serve --match/--cgroup: the process of every exec on the node, for its
 * discovery to look at at once (on_exec_watch). A ring of its own: a
 * flood of execs by another user loses only these, which the next scan
 * covers, never a traced job's events.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024);
} execs SEC(".maps");

/* Off by default: the verifier then drops every stream branch. */
const volatile __u32 tb_stream_states = 0;
/* record: the user's record_function brackets as TB_EV_SCOPE events (torch.bpf.h). */
const volatile __u32 tb_scope_events = 0;
/* --functions: the Python stack reader (pystack.bpf.h); off, its branches go too. */
const volatile __u32 tb_py_stacks = 0;
/* Its on-CPU sampler's period, in ns of CPU time per sample. */
const volatile __u64 tb_py_period_ns = 0;
/* Slots one process may hold at once (serve); 0: as many as there are. */
const volatile __u32 tb_thread_quota = 0;

struct tb_counters counters;

static __always_inline struct tb_slot *slot_at(__u32 idx)
{
	return bpf_map_lookup_elem(&slots, &idx);
}

static __always_inline struct tb_slot *task_slot(struct task_struct *t,
						 __u32 *idx)
{
	struct tb_task *tt;
	struct tb_slot *s;

	/*
	 * Nearly every task on the machine has no BPF local storage at all:
	 * one load says so, without the helper's lock and RCU walk.
	 */
	if (!t->bpf_storage)
		return NULL;
	tt = bpf_task_storage_get(&tasks, t, 0, 0);
	if (!tt)
		return NULL;
	s = slot_at(tt->slot);
	/*
	 * An exited task keeps its storage until it is freed (its last acts,
	 * like waking a joiner, come after the exit tracepoint); by then user
	 * space may have handed the slot to another thread.
	 */
	if (!s || s->tid != t->pid)
		return NULL;
	if (idx)
		*idx = tt->slot;
	return s;
}

/* seqlock write side: odd while the slot is inconsistent. */
static __always_inline void write_begin(struct tb_slot *s)
{
	__sync_fetch_and_add(&s->seq, 1);
}

static __always_inline void write_end(struct tb_slot *s)
{
	__sync_fetch_and_add(&s->seq, 1);
}

static __always_inline int is_net(struct tb_slot *s)
{
	return tb_is_net_thread(s->net_ns, s->blk_ns, s->net_waits, s->tid == s->tgid);
}

/*
 * A thread of a collective library, for the communication phase
 * (torch.bpf.h): not a main thread, and it has waited on the network, or
 * been woken by such a thread of its process (cm_waits: gloo's workers
 * wait for its socket loop thread, the trainer for them). Not is_net's
 * majority of many waits: the workers wait for the trainer as long as
 * for the network, and the first collectives (a rank that waits hundreds
 * of ms for a slower one) come before anyone has waited 8 times.
 */
static __always_inline int is_comm_thread(const struct tb_slot *s)
{
	/* Nor a thread that ran a backward: a trainer that is no main thread. */
	return s->tid != s->tgid && !s->cm_on && (s->net_waits || s->cm_waits);
}

/*
 * Where communication can begin (torch.bpf.h): between brackets (other),
 * after a communication wait, or, in a thread that takes no batch from a
 * DataLoader, in the stretch from one backward to the next (PEND_FWD)
 * outside any named bracket (DDP's forward is one).
 */
static __always_inline int comm_can_start(const struct tb_slot *s)
{
	return s->phase == TB_PH_OTHER || s->phase == TB_PH_PEND_COMM ||
	       (s->phase == TB_PH_PEND_FWD && !s->fetcher && !s->nbr);
}

/*
 * Sends [start, end) of s to user space. No wakeup: user space drains on
 * its own clock, and a wakeup per interval would cost more than the record.
 * Global: verified once, not at every interval close.
 */
__noinline int stream_state(struct tb_slot *s, __u64 start, __u64 end,
			    __u32 own, __u32 cp_flags)
{
	struct tb_state_rec *r;

	if (!s)
		return 0;
	r = bpf_ringbuf_reserve(&states, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&counters.states_lost, 1);
		return 0;
	}
	r->tid = s->tid;
	r->pid = s->tgid;
	r->start_ns = start;
	r->end_ns = end;
	/* Off a CPU, the stack its time is charged to (py_charge's). */
	r->py_stack = tb_py_stacks && s->state != TB_ST_ONCPU ? s->py_stack : 0;
	r->cat = own;
	r->cp_cat = cp_flags & 0xff;
	r->flags = cp_flags >> 8;
	__builtin_memset(r->pad, 0, sizeof(r->pad));
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/*
 * The pieces of a lock wait [t, ...) whose critical path was just split:
 * what each category gained since before[] (sums to the wait).
 */
__noinline int stream_split(struct tb_slot *s, struct tb_cat_ns *before, __u64 t)
{
	if (!s || !before)
		return 0;
	for (int c = 0; c < TB_NCAT; c++) {
		__u64 v = s->cp[c] - before->ns[c];

		if (!v)
			continue;
		stream_state(s, t, t + v, TB_LOCK, c | TB_SR_SPLIT << 8);
		t += v;
	}
	return 0;
}

/* pystack.bpf.h: off-CPU time to the stack read at the switch-out; that read. */
__noinline int py_charge(struct tb_slot *s, __u32 own, __u32 cp, __u64 ns);
__noinline int py_switch_out(struct tb_slot *s, __u64 fsbase);
__noinline __u64 py_scope_open(struct tb_slot *s);

/* The thread's phase row (torch.bpf.h): its critical-path time by phase. */
static __always_inline __u64 *phase_row(struct tb_slot *s)
{
	__u32 p = s->phase;

	return s->ph[p < TB_NPHASE ? p : TB_PH_OTHER];
}

/* What a lock wait's split added to each category goes to the phase too. */
__noinline int phase_split(struct tb_slot *s, struct tb_cat_ns *before)
{
	__u64 *row;

	if (!s || !before)
		return 0;
	row = phase_row(s);
	for (int c = 0; c < TB_NCAT; c++) {
		row[c] += s->cp[c] - before->ns[c];
		if (tb_py_stacks)
			py_charge(s, TB_LOCK, c, s->cp[c] - before->ns[c]);
	}
	return 0;
}

/*
 * Where an interval closed at now ends: never before since, so that a
 * thread's intervals tile its life and sum to it even if a caller's clock
 * (read on another CPU) trails.
 */
static __always_inline __u64 not_before_since(const struct tb_slot *s, __u64 now)
{
	return now < s->since ? s->since : now;
}

static __always_inline void close_interval(struct tb_slot *s, __u32 own,
					   __u32 cp, __u64 now)
{
	__u64 d;

	now = not_before_since(s, now);
	d = now - s->since;

	if (tb_stream_states && d)
		stream_state(s, s->since, now, own & (TB_NCAT - 1), cp & (TB_NCAT - 1));
	s->own[own & (TB_NCAT - 1)] += d;
	s->cp[cp & (TB_NCAT - 1)] += d;
	phase_row(s)[cp & (TB_NCAT - 1)] += d;
	/* Off the CPU only: its running time is sampled (pystack.bpf.h). */
	if (tb_py_stacks && s->state != TB_ST_ONCPU)
		py_charge(s, own, cp, d);
	s->since = now;
	ckpt_update(s, now);
}

static __always_inline __u32 proc_role(__u32 tgid)
{
	struct tb_proc *p = bpf_map_lookup_elem(&procs, &tgid);

	return p ? p->role : TB_ROLE_OTHER;
}

static const struct tb_waker_info no_waker;

/* The open interval of a waker, as its waiters see it. */
static __always_inline __u32 open_cp(struct tb_slot *b)
{
	if (b->state == TB_ST_RUNNABLE)
		return tb_runnable_cat(b);
	if (b->state == TB_ST_BLOCKED)
		return b->depth ? b->region :
			tb_wait_category(b->wait, TB_WK_NONE, &no_waker);
	return tb_oncpu_cp(b);
}

/*
 * p is waiting for a CPU from now on. The kernel adds each wait to
 * sched_info.run_delay when it picks the task, so the wait can be
 * measured later even if that pick's sched_switch never reaches us.
 */
static __always_inline void mark_runnable(struct tb_slot *s, struct task_struct *p)
{
	s->state = TB_ST_RUNNABLE;
	s->flags &= ~TB_SF_WOKEN;
	s->rq_delay0 = p ? BPF_CORE_READ(p, sched_info.run_delay) : TB_RQD_UNKNOWN;
}

/* The process is being torn down (exit_group): wakes are kills, not work. */
static __always_inline int group_exiting(struct task_struct *p)
{
	return p && (BPF_CORE_READ(p, signal, flags) & TB_SIGNAL_GROUP_EXIT);
}

/* torch.bpf.h: a wait for input before a forward, with no DataLoader. */
__noinline int feed_wait(struct tb_slot *s, __u64 waited, __u64 d, __u64 now);
/* torch.bpf.h: a wait about to close as own; communication outside any phase. */
__noinline int comm_wait(struct tb_slot *s, __u32 own);

/* torch.bpf.h: the running thread w woke a network thread of its process. */
__noinline int comm_issued(struct tb_slot *w, __u64 now);

/* After a communication wait closed: the stretch after it is pending (torch.bpf.h). */
static __always_inline void comm_wait_end(struct tb_slot *s, __u64 now)
{
	if (s->phase == TB_PH_COMM) {
		s->phase = TB_PH_PEND_COMM;
		s->cm_end = now;
		s->cm_woke = 1;
	}
}

/* torch.bpf.h: back on a CPU after a communication wait. */
__noinline int comm_ran(struct tb_slot *s, __u64 now);

/* Of a wait split like its waker's critical path: the part spent waiting. */
static __always_inline __u64 waited_part(const struct tb_slot *s, const struct tb_cat_ns *before)
{
	return s->cp[TB_IDLE] - before->ns[TB_IDLE] + s->cp[TB_IO] - before->ns[TB_IO] +
	       s->cp[TB_DATA_WAIT] - before->ns[TB_DATA_WAIT];
}

/* End a blocked interval at now, deciding its category from the waker. */
static __always_inline void close_blocked(struct tb_slot *s, struct task_struct *p,
					  __u64 now)
{
	__u32 wk = s->wk_ts >= s->last_in && !group_exiting(p) ? s->wk_kind : TB_WK_NONE;
	struct tb_waker_info info = {};
	struct tb_slot *w = NULL;
	__u64 d;
	__u32 own, own_cm;

	now = not_before_since(s, now);
	d = now - s->since;

	if (s->depth) {
		/* Blocked inside a probed CUDA/NCCL call: that is what it waited for. */
		if (s->cm_on)
			comm_wait(s, s->region);
		close_interval(s, s->region, s->region, now);
		comm_wait_end(s, now);
		s->wk_own = s->wk_cp = s->region;
		if (s->region == TB_COMM) {
			s->net_ns += d;
			s->net_waits++;
		}
		s->blk_ns += d;
		mark_runnable(s, p);
		return;
	}
	if (wk == TB_WK_TRACED) {
		w = slot_at(s->wk_slot);
		if (w) {
			info.same_proc = w->tgid == s->tgid;
			info.is_main = w->tid == w->tgid;
			info.role = proc_role(w->tgid);
			info.net = is_net(w);
			/*
			 * Who feeds a trainer: its DataLoader workers, however
			 * started (user/model/job.c, roles). Its role may not be
			 * known yet (attached, before its first backward): any
			 * process but a worker. Atomic: w is another's slot.
			 */
			if (!info.same_proc && proc_role(s->tgid) != TB_ROLE_WORKER)
				__sync_fetch_and_add(&w->fed, 1);
		} else {
			wk = TB_WK_UNTRACED;
		}
	}
	own = own_cm = tb_wait_category(s->wait, wk, &info);
	if (own == TB_COMM) {
		s->net_ns += d;
		s->net_waits++;
	}
	/* Woken by its own process's collective threads: communication too (a lock to the table). */
	if (w && info.same_proc && own != TB_COMM && is_comm_thread(w)) {
		s->cm_waits++;
		own_cm = TB_COMM;
	}
	if (s->cm_on)
		comm_wait(s, own_cm);
	if (own != TB_IDLE)
		s->blk_ns += d;
	s->wk_own = s->wk_cp = own;
	if (w && own == TB_LOCK && !tb_waker_is_wholesale(&info)) {
		struct tb_cat_ns before;
		__u32 wcp = open_cp(w);

		__builtin_memcpy(before.ns, s->cp, sizeof(before.ns));
		if (!cp_split_recent(s, w, wcp, s->since, now))
			cp_split(s, w, wcp, s->since, now);
		s->wk_cp = wcp;	/* what the waker is doing as it wakes it */
		phase_split(s, &before);
		if (tb_stream_states)
			stream_split(s, &before, s->since);
		s->own[TB_LOCK] += d;
		s->since = now;
		ckpt_update(s, now);
		if (s->phase == TB_PH_PEND_FWD)
			feed_wait(s, waited_part(s, &before), d, now);
	} else {
		close_interval(s, own, own, now);
		if (own == TB_IO && (s->flags & TB_SF_WRITES))
			s->wio[s->phase < TB_NPHASE ? s->phase : TB_PH_OTHER] += d;
		/*
		 * Idle, but not a futex's timeout: the GIL's 5 ms waits while
		 * a producer holds it are that, in the forward too.
		 */
		if (s->phase == TB_PH_PEND_FWD)
			feed_wait(s, (own == TB_IDLE && s->wait != TB_W_FUTEX) || own == TB_IO ||
				  own == TB_DATA_WAIT ? d : 0, d, now);
	}
	comm_wait_end(s, now);
	if (w)
		recent_note(s, s->wk_slot, w->tid);
	mark_runnable(s, p);
}

/*
 * At the start of a wait: snapshot the counters of the threads that woke
 * this one last, so that a wake by one of them is split exactly.
 */
__noinline int recent_snapshot(struct tb_slot *s, __u64 now)
{
	if (!s)
		return 0;
	for (int i = 0; i < TB_NRECENT; i++) {
		struct tb_waker_snap *r = &s->recent[i];
		struct tb_slot *b;

		if (!r->tid)
			continue;
		b = slot_at(r->slot);
		if (!b || b->tid != r->tid) {
			r->tid = 0;	/* exited and reused */
			continue;
		}
		for (int c = 0; c < TB_NCAT; c++)
			r->cp[c] = cp_now(b, open_cp(b), now, c);
	}
	return 0;
}

/*
 * When p, running now, was picked: its wait for a CPU since it went
 * RUNNABLE is what run_delay grew by, and a pick with no sched_switch
 * seen still updates it. After a missed wakeup that start is unknown;
 * then sum_exec_runtime, which restarts from prev_sum_exec_runtime at each
 * pick, gives the time run since, exact at a switch-out and up to a tick
 * short in a probe or at exit.
 */
static __always_inline __u64 picked_at(struct tb_slot *s, struct task_struct *p,
				       __u64 now)
{
	__u64 span = now > s->since ? now - s->since : 0, d;

	if (s->state == TB_ST_RUNNABLE && s->rq_delay0 != TB_RQD_UNKNOWN) {
		d = BPF_CORE_READ(p, sched_info.run_delay);
		d = d > s->rq_delay0 ? d - s->rq_delay0 : 0;
		return s->since + (d < span ? d : span);
	}
	d = BPF_CORE_READ(p, se.sum_exec_runtime) -
	    BPF_CORE_READ(p, se.prev_sum_exec_runtime);
	return now - (d < span ? d : span);
}

/*
 * p is running now (it is switching out, a probe of it fired, or it is
 * exiting), but our books may say otherwise: registered at attach with no
 * switch seen (UNKNOWN: on-CPU since), or a missed wakeup or switch-in
 * (this kernel now and then starts a task with no sched_switch naming it;
 * ftrace and bpftrace miss those too). Waiting until it was picked,
 * on-CPU since.
 */
static __always_inline void catch_up_running(struct tb_slot *s, struct task_struct *p,
					     __u64 now)
{
	__u64 picked;

	if (s->state == TB_ST_ONCPU)
		return;
	if (s->state == TB_ST_BLOCKED || s->state == TB_ST_RUNNABLE) {
		__sync_fetch_and_add(&counters.sched_missed, 1);
		picked = picked_at(s, p, now);
		if (s->state == TB_ST_BLOCKED)
			close_blocked(s, NULL, picked);	/* missed the wakeup */
		close_interval(s, tb_runnable_cat(s), tb_runnable_cat(s), picked);
		s->last_in = picked;
	}
	s->state = TB_ST_ONCPU;
}

static __always_inline void switch_out(struct tb_slot *s, struct task_struct *p,
				       bool preempt, unsigned int prev_state,
				       __u64 now)
{
	struct task_io_accounting ioac;
	__u32 wait = task_wait_reason(p);

	if (s->seq & 1)	/* a probe of this thread was updating the slot */
		__sync_fetch_and_add(&counters.api_preempted, 1);
	write_begin(s);
	catch_up_running(s, p, now);
	if (wait != TB_W_SOCKET)
		s->flags &= ~TB_SF_IN_SOCKET;
	close_interval(s, tb_oncpu_own(s), tb_oncpu_cp(s), now);
	if (tb_py_stacks)
		py_switch_out(s, BPF_CORE_READ(p, thread.fsbase));
	if (!bpf_core_read(&ioac, sizeof(ioac), &p->ioac)) {
		s->io_rbytes = ioac.read_bytes - s->io_rbase;
		s->io_wbytes = ioac.write_bytes - s->io_wbase;
	}
	s->nswitch++;
	/* Threads rename themselves (prctl) after they start. */
	__builtin_memcpy(s->comm, p->comm, sizeof(s->comm));
	/* Preempted too: switch_in learns from it whether it resumes in a socket call. */
	s->wait = wait;
	if ((wait == TB_W_IOWAIT || wait == TB_W_FILE) && task_writes(p))
		s->flags |= TB_SF_WRITES;
	else
		s->flags &= ~TB_SF_WRITES;
	if (!preempt && prev_state) {
		recent_snapshot(s, now);
		write_end(s);
		/*
		 * Last, after write_end: a waker on another CPU closes the
		 * wait as soon as it reads BLOCKED (on_waking), so the slot
		 * must be whole by then. Until then it takes the thread for
		 * still running, and switch_in closes the wait instead.
		 * (x86-64: its stores are seen in order.)
		 */
		TB_WRITE_ONCE(s->state, TB_ST_BLOCKED);
		return;
	}
	mark_runnable(s, p);
	write_end(s);
}

/*
 * Where the runqueue's clock stands against ours, per CPU. The enqueue
 * stamps sched_info.last_queued with rq->clock (sched_clock, raw); we count
 * on bpf_ktime_get_ns (CLOCK_MONOTONIC). The two differ by an offset that
 * only drifts (NTP slews ours by at most 500 ppm). schedule() reads the
 * runqueue's clock afresh before it picks, except after a wakeup
 * preemption (rq_clock_skip_update: waking an idle CPU is one): then
 * rq->clock still holds the enqueue's reading and now - clock overstates
 * the offset by the whole wait. So the offset is the least now - clock
 * seen lately, allowed to rise by 1/1024 of the time since (~1000 ppm,
 * more than any slew) so that a drift is followed.
 */
struct tb_rq_clock {
	__s64 off;	/* now - rq->clock, least seen */
	__u64 at;	/* when it was seen; 0: never */
	__u64 clock;	/* rq->clock at the switch being handled */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tb_rq_clock);
} rq_clock SEC(".maps");

/* At a traced switch on this CPU (p: prev or next, on this CPU's runqueue). */
static __always_inline struct tb_rq_clock *rq_clock_seen(struct task_struct *p,
							   __u64 now)
{
	struct tb_rq_clock *c;
	__u32 zero = 0;
	struct rq *rq;
	__s64 o;

	if (!bpf_core_field_exists(struct cfs_rq, rq))
		return NULL;	/* no group scheduling: no way to the runqueue */
	c = bpf_map_lookup_elem(&rq_clock, &zero);
	rq = BPF_CORE_READ(p, se.cfs_rq, rq);
	if (!c || !rq)
		return NULL;
	c->clock = BPF_CORE_READ(rq, clock);
	o = (__s64)(now - c->clock);
	if (!c->at || o <= c->off + (__s64)((now - c->at) >> 10)) {
		c->off = o;
		c->at = now;
	}
	return c;
}

/*
 * When p, being switched in now, was put on its runqueue, on our clock:
 * the RUNNABLE time before it is not a wait for a CPU (the kernel counts
 * run_delay from there too). Unknown (no offset seen, or not stamped), now.
 */
static __always_inline __u64 queued_at(struct tb_slot *s, struct task_struct *p,
				       struct tb_rq_clock *c, __u64 now)
{
	__u64 queued = BPF_CORE_READ(p, sched_info.last_queued), q;

	if (!c || !queued)
		return now;
	q = queued + c->off;
	if (q > now)
		return now;
	return q > s->since ? q : s->since;
}

/*
 * When p, woken and being switched in now, began to wait for a CPU. A
 * thread moved to another CPU's runqueue before it ran (load balancing)
 * was queued twice: last_queued is its enqueue here, and the kernel added
 * its wait on the first runqueue to run_delay when it took it off (read at
 * the waking into rq_delay0). Its wait began that much earlier: without
 * it, 25-35 ms of a 4 s run of an I/O thread beside 3 spinners went to io.
 */
static __always_inline __u64 woken_queued_at(struct tb_slot *s, struct task_struct *p,
					     struct tb_rq_clock *c, __u64 now)
{
	__u64 q = queued_at(s, p, c, now), moved;

	if (s->rq_delay0 == TB_RQD_UNKNOWN)
		return q;
	moved = BPF_CORE_READ(p, sched_info.run_delay);
	moved = moved > s->rq_delay0 ? moved - s->rq_delay0 : 0;
	return q - s->since > moved ? q - moved : s->since;
}

/*
 * The instant of this switch, on our clock. The scheduler read its clock
 * (update_rq_clock) just before it picked next, and charges the CPU from
 * there on to next (sum_exec_runtime, run_delay). This program runs later:
 * after the pick, and after any other tool's program on the tracepoint. A
 * host that stops this vCPU in between (20-50 ms, now and then under load
 * here; the guest sees no steal) would put the stop on the other side of
 * the switch from the kernel's counters and from a tool whose program ran
 * first: 20 ms of a thread's CPU time counted as its wait for a CPU. So
 * the switch is at rq->clock, placed on our clock by the offset.
 *
 * Except after a wakeup preemption: schedule() then skips the clock update
 * (rq_clock_skip_update), and rq->clock still holds the enqueue of the task
 * that was woken, which is next's last_queued to the nanosecond. The kernel
 * then dates the switch back to the wakeup (44 us median for an I/O thread
 * preempting a spinner here), although the preempted task ran on until
 * now: now is the switch.
 */
static __always_inline __u64 switch_at(const struct tb_rq_clock *c,
				       struct task_struct *next, __u64 now,
				       __u64 *skew)
{
	__u64 t;

	*skew = 0;
	if (!c)
		return now;
	t = c->clock + c->off;
	if (c->clock == BPF_CORE_READ(next, sched_info.last_queued)) {
		*skew = now > t ? now - t : 0;	/* the kernel's date is t */
		return now;
	}
	return t < now ? t : now;
}

static __always_inline void switch_in(struct tb_slot *s, struct task_struct *p,
				      struct tb_rq_clock *c, __u64 now)
{
	/* It resumes in the syscall it was in when it switched out. */
	__u32 in_socket = s->state != TB_ST_UNKNOWN && s->wait == TB_W_SOCKET;

	write_begin(s);
	s->flags = in_socket ? s->flags | TB_SF_IN_SOCKET : s->flags & ~TB_SF_IN_SOCKET;
	if (s->state == TB_ST_ONCPU)	/* missed its switch-out */
		__sync_fetch_and_add(&counters.sched_missed, 1);
	/*
	 * Still BLOCKED: its waking came while it was on its way to sleep
	 * (on another CPU, before its switch-out), or was missed. The wait
	 * ends at the enqueue; the waker, if seen, is in wk_*.
	 */
	if (s->state == TB_ST_BLOCKED)
		close_blocked(s, NULL, queued_at(s, p, c, now));
	/* Woken: from the waking to the enqueue it was not yet waiting for a CPU. */
	else if (s->state == TB_ST_RUNNABLE && (s->flags & TB_SF_WOKEN))
		close_interval(s, s->wk_own, s->wk_cp, woken_queued_at(s, p, c, now));
	if (s->state == TB_ST_RUNNABLE || s->state == TB_ST_UNKNOWN)
		close_interval(s, tb_runnable_cat(s), tb_runnable_cat(s), now);
	if (s->cm_woke)
		comm_ran(s, now);
	s->state = TB_ST_ONCPU;
	s->last_in = now;
	write_end(s);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	struct tb_slot *out = task_slot(prev, NULL), *in = task_slot(next, NULL);
	struct tb_rq_clock *c;
	__u64 now, skew;

	if (!out && !in)
		return 0;
	/* One instant: prev stops running exactly when next starts. */
	now = bpf_ktime_get_ns();
	c = rq_clock_seen(in ? next : prev, now);
	now = switch_at(c, next, now, &skew);
	if (out && out->state != TB_ST_EXITED) {
		switch_out(out, prev, preempt, prev_state, now);
		out->kskew_ns -= skew;
	}
	if (in && in->state != TB_ST_EXITED) {
		switch_in(in, next, c, now);
		in->kskew_ns += skew;
	}
	return 0;
}

/*
 * p is not running and not waiting for a CPU: off its runqueue, or left on
 * it until its next pick (DELAY_DEQUEUE, Linux 6.12: se.sched_delayed).
 */
static __always_inline int asleep(struct task_struct *p)
{
	if (BPF_CORE_READ(p, on_cpu))
		return 0;
	if (!BPF_CORE_READ(p, on_rq))
		return 1;
	return tb_sched_delayed(p);	/* compat.bpf.h */
}

/*
 * Runs in the waker's context: the only place that knows who it is. The
 * wait ends here too (no sched_wakeup program: one tracepoint less on
 * every wakeup of every task of the node). sched_wakeup came after the
 * enqueue, under the wakee's runqueue lock; the waking comes before, under
 * its pi_lock only, so the thread may not have switched out yet (then it
 * still reads ONCPU here, and switch_in closes the wait), and the time
 * until the enqueue is given back to the wait at switch_in.
 */
/*
 * A thread that ran a backward, between brackets, wakes a network thread
 * of its own process (gloo's): it hands it a collective (torch.bpf.h).
 */
static __always_inline void comm_wake(__u32 idx, struct tb_slot *s, __u64 now)
{
	struct tb_slot *w;

	/* The wakee first: most are no collective's thread, and need no lookup. */
	if (!is_comm_thread(s) || !(w = slot_at(idx)) || !w->cm_on || w->tgid != s->tgid ||
	    !comm_can_start(w))
		return;
	comm_issued(w, now);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	struct tb_slot *s = task_slot(p, NULL);
	__u32 kind, state, idx = 0;
	__u64 now;

	if (!s)
		return 0;
	kind = irq_context(ctx);
	if (kind == TB_WK_NONE)
		kind = task_slot(bpf_get_current_task_btf(), &idx) ?
			TB_WK_TRACED : TB_WK_UNTRACED;
	if (s->state == TB_ST_UNKNOWN && asleep(p)) {
		/* Asleep since registration: learn why from the task now. */
		s->wait = task_wait_reason(p);
		s->state = TB_ST_BLOCKED;
	}
	/*
	 * The state first, the clock after: the wakee's switch-out on another
	 * CPU stamps since, then publishes BLOCKED, so a clock read before
	 * this load could come before since and end the wait before it began
	 * (a vCPU stalled between the two reads did, in CI).
	 */
	state = TB_READ_ONCE(s->state);
	now = bpf_ktime_get_ns();
	s->wk_kind = kind;
	s->wk_slot = idx;
	s->wk_ts = now;
	if (kind == TB_WK_TRACED)
		comm_wake(idx, s, now);
	if (state != TB_ST_BLOCKED)
		return 0;	/* woken before it slept, or as it goes to sleep */
	write_begin(s);
	close_blocked(s, p, now);
	s->flags |= TB_SF_WOKEN;
	write_end(s);
	return 0;
}

/* Exits first: the skeleton attaches programs in this order. */
SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(on_hrtimer_exit)
{
	ctx_mark(TB_HRTIMER, 0);
	return 0;
}

SEC("tp_btf/timer_expire_exit")
int BPF_PROG(on_timer_exit)
{
	ctx_mark(TB_TIMER_LIST, 0);
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit)
{
	ctx_mark(TB_SOFTIRQ, 0);
	return 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_hrtimer_entry)
{
	ctx_mark(TB_HRTIMER, 1);
	return 0;
}

SEC("tp_btf/timer_expire_entry")
int BPF_PROG(on_timer_entry)
{
	ctx_mark(TB_TIMER_LIST, 1);
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry)
{
	ctx_mark(TB_SOFTIRQ, 1);
	return 0;
}

static __always_inline void emit(__u32 type, struct task_struct *p, __s32 code,
				 const char *path)
{
	struct tb_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&counters.events_lost, 1);
		return;
	}
	e->type = type;
	e->pid = BPF_CORE_READ(p, tgid);
	e->ppid = BPF_CORE_READ(p, real_parent, tgid);
	e->exit_code = code;
	e->ts = bpf_ktime_get_ns();
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	e->path[0] = 0;
	if (path)
		bpf_probe_read_kernel_str(e->path, sizeof(e->path), path);
	/*
	 * User space drains on its own clock, except after a fork: a new
	 * generation of DataLoader workers starts an epoch, and the totals
	 * it splits are best read at once (user space refreshes at most
	 * every few ms however many forks wake it). And after a library to
	 * probe is mapped: the job may call into it within milliseconds.
	 */
	bpf_ringbuf_submit(e, type == TB_EV_FORK || type == TB_EV_LIBRARY ?
			   BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

static __always_inline void slot_init(struct tb_slot *s, struct task_struct *c,
				      __u64 now)
{
	write_begin(s);
	s->tid = c->pid;
	s->tgid = c->tgid;
	s->start_ns = now;
	s->since = now;
	s->last_in = now;
	s->end_ns = 0;
	mark_runnable(s, c);	/* run_delay is 0: sched_fork cleared it */
	bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), c->comm);
	ckpt_init(s, now);
	write_end(s);
}

/* Whether process tgid holds its share of the slots already (tb_thread_quota). */
static __always_inline bool over_quota(__u32 tgid)
{
	__s64 *forked = bpf_map_lookup_elem(&proc_forked, &tgid);
	__u32 *found = bpf_map_lookup_elem(&proc_found, &tgid);
	__s64 n = (forked ? *forked : 0) + (found ? *found : 0);

	return n >= tb_thread_quota;
}

/* A thread of tgid took a slot at its fork; a new process starts its count. */
static __always_inline void count_fork(__u32 tgid, bool new_proc)
{
	__s64 one = 1, *n;

	if (new_proc) {
		bpf_map_delete_elem(&proc_found, &tgid);	/* a reused pid's */
		bpf_map_update_elem(&proc_forked, &tgid, &one, BPF_ANY);
		return;
	}
	n = bpf_map_lookup_elem(&proc_forked, &tgid);
	if (n)
		__sync_fetch_and_add(n, 1);
	else if (bpf_map_update_elem(&proc_forked, &tgid, &one, BPF_NOEXIST))
		/* Another thread of it forked at the same time and made it. */
		if ((n = bpf_map_lookup_elem(&proc_forked, &tgid)))
			__sync_fetch_and_add(n, 1);
}

/* Worker start-up marks of the forking thread and the one that forked it (torch.bpf.h). */
static __always_inline void fork_marks(struct task_struct *parent, __u32 child);

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	struct tb_task init = {};
	struct tb_slot *s;
	struct tb_proc proc = { .role = TB_ROLE_WORKER, .flags = TB_PF_FORKED };
	__u32 idx, tgid;

	if (!bpf_task_storage_get(&tasks, parent, 0, 0))
		return 0;
	tgid = child->tgid;
	/* A new thread of a process at its share; a new process has a share of its own. */
	if (tb_thread_quota && tgid != child->pid && over_quota(tgid)) {
		__sync_fetch_and_add(&counters.slots_exhausted, 1);
		return 0;
	}
	if (bpf_map_pop_elem(&free_slots, &idx)) {
		__sync_fetch_and_add(&counters.slots_exhausted, 1);
		return 0;
	}
	s = slot_at(idx);
	if (!s)
		return 0;
	slot_init(s, child, bpf_ktime_get_ns());
	init.slot = idx;
	if (!bpf_task_storage_get(&tasks, child, &init,
				  BPF_LOCAL_STORAGE_GET_F_CREATE)) {
		s->state = TB_ST_FREE;
		bpf_map_push_elem(&free_slots, &idx, 0);
		__sync_fetch_and_add(&counters.storage_failed, 1);
		return 0;
	}
	if (tb_thread_quota) {
		s->forked = 1;
		count_fork(tgid, tgid == child->pid);
	}
	if (tgid != child->pid)
		return 0;	/* a new thread, not a new process */
	/* Forked and not (yet) exec'd: a helper such as a data-loader worker. */
	bpf_map_update_elem(&procs, &tgid, &proc, BPF_ANY);
	emit(TB_EV_FORK, child, 0, NULL);
	fork_marks(parent, tgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	struct tb_task *tt = bpf_task_storage_get(&tasks, p, 0, 0);
	struct tb_proc proc = { .role = TB_ROLE_OTHER, .flags = TB_PF_EXECED };
	struct tb_proc *cur;
	struct tb_slot *s;
	__u32 tgid = p->tgid;

	/* Not task_slot(): a non-leader exec has just changed p's tid. */
	s = tt ? slot_at(tt->slot) : NULL;
	if (!s || s->tgid != tgid || s->state == TB_ST_EXITED)
		return 0;
	write_begin(s);
	s->tid = p->pid;	/* a non-leader exec takes over the leader's tid */
	s->depth = 0;		/* no call of the old program returns */
	bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), p->comm);
	write_end(s);
	cur = bpf_map_lookup_elem(&procs, &tgid);
	if (cur) {
		proc.flags |= cur->flags;
		if (cur->role != TB_ROLE_WORKER)
			proc.role = cur->role;
	}
	bpf_map_update_elem(&procs, &tgid, &proc, BPF_ANY);
	emit(TB_EV_EXEC, p, 0, BPF_CORE_READ(bprm, filename));
	return 0;
}

/*
 * serve --match/--cgroup (loaded then only): an exec of a task not traced,
 * told to discovery. It stays attached while serve's other hooks are
 * detached for want of a job (tracer_hooks_pause); one record per exec,
 * which costs the exec far more.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec_watch, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	__u32 *pid;

	if (p->bpf_storage)	/* traced (or once): on_exec follows it */
		return 0;
	pid = bpf_ringbuf_reserve(&execs, sizeof(*pid), 0);
	if (!pid)
		return 0;	/* the ring is full: the next scan finds it */
	*pid = p->tgid;
	bpf_ringbuf_submit(pid, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p, bool group_dead)
{
	struct tb_slot *s = task_slot(p, NULL);
	__u64 now;

	if (!s)
		return 0;
	now = bpf_ktime_get_ns();
	write_begin(s);
	/* It runs its own exit, whatever our books say. */
	catch_up_running(s, p, now);
	close_interval(s, tb_oncpu_own(s), tb_oncpu_cp(s), now);
	s->io_rbytes = BPF_CORE_READ(p, ioac.read_bytes) - s->io_rbase;
	s->io_wbytes = BPF_CORE_READ(p, ioac.write_bytes) - s->io_wbase;
	s->end_ns = now;
	s->state = TB_ST_EXITED;
	write_end(s);
	if (s->forked) {
		__u32 tgid = p->tgid;
		__s64 *n = bpf_map_lookup_elem(&proc_forked, &tgid);

		if (n)
			__sync_fetch_and_add(n, -1);
	}
	if (group_dead) {
		__u32 tgid = p->tgid;
		struct tb_proc *pr = bpf_map_lookup_elem(&procs, &tgid);

		if (pr)
			pr->flags |= TB_PF_EXITED;	/* no worker start-up (torch.bpf.h) */
		emit(TB_EV_EXIT, p, BPF_CORE_READ(p, exit_code), NULL);
	}
	return 0;
}

/* After the slot helpers it uses. */
#include "cuda_nccl.bpf.h"
#include "torch.bpf.h"

/*
 * The forking thread's start-up mark, and, for a forkserver (a process
 * whose forks its parent asked for, blocked meanwhile), its parent's.
 */
static __always_inline void fork_marks(struct task_struct *parent, __u32 child)
{
	struct task_struct *up = parent->real_parent;
	__u64 now = bpf_ktime_get_ns();
	struct tb_slot *s = task_slot(parent, NULL);

	if (s)
		start_mark(s, child, false, now);
	if (!up || up->tgid == parent->tgid)
		return;
	s = task_slot(up, NULL);
	if (s && s->state == TB_ST_BLOCKED)
		start_mark(s, child, true, now);
}
#include "ckpt_files.bpf.h"
#include "output.bpf.h"
#include "libraries.bpf.h"
#include "pystack.bpf.h"
