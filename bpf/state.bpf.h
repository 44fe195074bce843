/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The state every program shares (trainbpf.bpf.c's header comment tells
 * the machine): the maps, the load-time switches, each traced thread's
 * slot and the helpers that move it from state to state (close an
 * interval, a wait by its waker, a running thread caught up), for the
 * scheduler's programs (trainbpf.bpf.c) and the probes of user-space
 * libraries and files (cuda_nccl, torch, ckpt_files, output, libraries,
 * pystack .bpf.h) alike. The global functions those define and this
 * calls are declared here. Included by trainbpf.bpf.c after compat.bpf.h,
 * wait_reason.bpf.h and critpath.bpf.h, before those that use it.
 */
#ifndef STATE_BPF_H
#define STATE_BPF_H

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

#endif /* STATE_BPF_H */
