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
#include "compat.bpf.h"
#include "wait_reason.bpf.h"
#include "critpath.bpf.h"
#include "state.bpf.h"
#include "cuda_nccl.bpf.h"
#include "torch.bpf.h"
#include "ckpt_files.bpf.h"
#include "output.bpf.h"
#include "libraries.bpf.h"
#include "pystack.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

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

/*
 * The forking thread's start-up mark (torch.bpf.h), and, for a forkserver
 * (a process whose forks its parent asked for, blocked meanwhile), its
 * parent's.
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
