/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Training phases from PyTorch's own brackets (docs/phases.md). Python's
 * record_function(name), which DataLoader fetches and optimizer calls
 * open on every call, profiler on or not, enters
 * record_function_enter_new (torch >= 2.0) with the name; it closes in
 * record_function.__exit__, which calls the exit op (a torch.ops call,
 * invokeOperatorFromPython) inside a DisableTorchFunctionSubclass block:
 * that block's __exit__ after a torch.ops call closes the innermost named
 * bracket (torch < 2.0: see legacy_op). None of these is a per-op hot
 * path, unlike RecordFunction's constructor and end(), which every
 * operator site that builds a RecordFunction enters (a few per layer and
 * step) and which a uprobe would slow by several microseconds each.
 * THPEngine_run_backward (Python's way into Engine::execute) is backward;
 * a PyTorchStreamWriter's life is torch.save.
 *
 * A thread's phase is one byte of its slot; every interval it closes adds
 * to the phase's row as well as to its category (close_interval). Phase
 * changes go to user space as TB_EV_PHASE records, a few per step.
 *
 * Included by trainbpf.bpf.c after the uprobe helpers of cuda_nccl.bpf.h.
 */

static __always_inline void phase_event(struct tb_slot *s, __u32 cls, __u32 resolved,
					__u64 now)
{
	struct tb_phase_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	__u64 *row;

	/* Counted lost or not: a gap tells user space its count is behind (pystack.h). */
	s->ph_seq++;
	if (!e) {
		__sync_fetch_and_add(&counters.events_lost, 1);
		return;
	}
	e->type = TB_EV_PHASE;
	e->pid = s->tgid;
	e->tid = s->tid;
	e->phase = s->phase;
	e->cls = cls;
	e->resolved = resolved;
	e->seq = (__u8)s->ph_seq;
	e->ts = now;
	/*
	 * The thread's first event carries OTHER's row, all of its time
	 * before it (its setup: imports, the model, the process group); the
	 * new phase's row is still empty then, unless it is OTHER.
	 */
	row = s->ph_sent ? phase_row(s) : s->ph[TB_PH_OTHER];
	s->ph_sent = 1;
	for (int c = 0; c < TB_NCAT; c++)
		e->row[c] = row[c];
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* record: a bracket of no phase opened (nm) or closed (nm NULL) at depth. */
static __always_inline void scope_event(const struct tb_slot *s, __u32 depth,
					const struct tb_py_scope_name *nm, __u64 now)
{
	struct tb_scope_event *e;

	if (!tb_scope_events)
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.events_lost, 1);
		return;
	}
	e->type = TB_EV_SCOPE;
	e->pid = s->tgid;
	e->tid = s->tid;
	e->open = nm != NULL;
	e->depth = depth;
	e->pad = 0;
	e->ts = now;
	if (nm)
		__builtin_memcpy(&e->name, nm, sizeof(e->name));
	else
		e->name.s[0] = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* From now on, ph (the time so far was closed into the phase it ran in). */
static __always_inline void set_phase(struct tb_slot *s, __u32 ph, __u32 cls, __u32 resolved,
				      __u64 now)
{
	if (s->phase == ph && !resolved)
		return;
	s->phase = ph;
	phase_event(s, cls, resolved, now);
}

/* A probe fires on a running thread: close its interval at now first. */
static __always_inline void close_running(struct tb_slot *s, __u64 now)
{
	catch_up_running(s, bpf_get_current_task_btf(), now);
	close_interval(s, tb_oncpu_own(s), tb_oncpu_cp(s), now);
}

/*
 * A row of time moves to another phase. Not unrolled: unrolled, its eight
 * loads and stores spilled registers to the stack of every probe it is
 * inlined in (scripts/check_bpf_stack.py).
 */
static __always_inline void move_row(struct tb_slot *s, __u32 from, __u32 to)
{
#pragma clang loop unroll(disable)
	for (int c = 0; c < TB_NCAT; c++) {
		s->ph[to][c] += s->ph[from][c];
		s->ph[from][c] = 0;
	}
	s->wio[to] += s->wio[from];
	s->wio[from] = 0;
}

/*
 * The step the pending rows hold turned out to be this. A backward: data
 * and forward (and a step held before it was an epoch's end: other). No
 * backward: validation if the step before had none either, else held;
 * held right after a training step, its fetch is the one that ends the
 * pass (StopIteration, shutting non-persistent workers down): data,
 * unless that fetch ended a worker start-up (st_held): then it was a
 * pass's first, and it and the start-up stay pending with the next
 * fetch's step: a validation loader's (validation), or a zip's first
 * loader's (a backward follows: data). So too right after a lone step or
 * validation (the StopIteration before it, or a validation pass that
 * ended the epoch): a zip's new pass and a validation pass after the
 * epoch differ only in what comes after the next fetch.
 */
static __always_inline __u32 resolve_step(struct tb_slot *s, int trained)
{
	__u32 how = TB_RS_NONE;

	if (trained) {
		if (!s->fetcher) {
			/* No DataLoader: what came since the last backward (feed_wait). */
			move_row(s, TB_PH_PEND_DATA, TB_PH_DATA);
			move_row(s, TB_PH_PEND_FWD, TB_PH_FORWARD);
			how = TB_RS_TRAINED;
		}
		if (s->lone) {
			move_row(s, TB_PH_PEND_LONE, TB_PH_OTHER);
			how |= TB_RS_HELD_OTHER;
		}
		if (s->fetched) {
			/* The first batch after a start-up: the start-up's end. */
			if (s->st_held)
				move_row(s, TB_PH_PEND_DATA, TB_PH_WSTART);
			move_row(s, TB_PH_PEND_DATA, TB_PH_DATA);
			move_row(s, TB_PH_PEND_FWD, TB_PH_FORWARD);
			move_row(s, TB_PH_PEND_SHELD, TB_PH_WSTART);
			how |= TB_RS_TRAINED;
		}
		s->lone = s->in_val = 0;
		s->trained = 1;
	} else if (s->fetched && (s->lone || s->in_val) && !s->st_held) {
		move_row(s, TB_PH_PEND_LONE, TB_PH_VALIDATION);
		move_row(s, TB_PH_PEND_DATA, TB_PH_VALIDATION);
		move_row(s, TB_PH_PEND_FWD, TB_PH_VALIDATION);
		move_row(s, TB_PH_PEND_SHELD, TB_PH_VALIDATION);
		s->lone = 0;
		s->in_val = 1;
		s->trained = 0;
		how = TB_RS_VALIDATION;
	} else if (s->fetched) {
		bool ends = s->trained && !s->st_held;

		how = TB_RS_LONE;
		if (ends)
			how |= TB_RS_END_DATA;
		if (ends)
			move_row(s, TB_PH_PEND_DATA, TB_PH_DATA);
		else if (!s->st_held)
			move_row(s, TB_PH_PEND_DATA, TB_PH_PEND_LONE);
		move_row(s, TB_PH_PEND_FWD, TB_PH_PEND_LONE);
		if (!s->st_held)
			move_row(s, TB_PH_PEND_SHELD, TB_PH_PEND_LONE);
		s->lone = 1;
		s->trained = 0;
	}
	if (how)
		s->st_held = 0;
	s->fetched = 0;
	return how;
}

/*
 * A wait for a producer thread (docs/phases.md): CPython blocks for a lock
 * another thread releases (a queue.Queue's get, in Condition.wait's waiter
 * lock, which the producer's put releases) with the GIL released, then
 * takes the GIL back: inside the probed call on Python 3.13
 * (_PySemaphore_Wait), after it before (PyThread_acquire_lock_timed,
 * cookie il 1): there the waits that follow the return before the thread
 * has run TB_GIL_RETAKE_CPU are the GIL's (take_gil runs a few µs between
 * its 5 ms waits; the loop's first torch op after the get runs longer
 * before it gives the GIL up). Python's own acquires pass intr_flag 1 and
 * a timeout (0: a try that never blocks); 3.13's park with detach 1. The
 * interpreter's internal mutexes (intr_flag 0) hold the GIL: not a
 * hand-off. Only in threads that take no batch from a DataLoader.
 */
#define TB_GIL_RETAKE_CPU 50000ull

static __always_inline void py_lock_enter(struct pt_regs *ctx, __u64 cookie, struct tb_slot *s)
{
	bool blocks = TB_COOKIE_IL(cookie) ?
		PT_REGS_PARM2(ctx) && (__u32)PT_REGS_PARM3(ctx) : (__u32)PT_REGS_PARM3(ctx);

	if (s->fetcher)
		return;
	if (blocks)
		s->py_lock = TB_PY_WAIT;
	else if (s->py_lock == TB_PY_GIL)
		s->py_lock = TB_PY_NONE;	/* a try: it runs Python, the GIL held */
}

static __always_inline void py_lock_return(__u64 cookie, struct tb_slot *s)
{
	__u64 now;

	if (s->py_lock != TB_PY_FED) {
		if (s->py_lock == TB_PY_WAIT)
			s->py_lock = TB_PY_NONE;
		return;
	}
	s->py_lock = TB_PY_NONE;
	if (!TB_COOKIE_IL(cookie))
		return;		/* the GIL was taken back inside */
	now = bpf_ktime_get_ns();
	write_begin(s);
	close_running(s, now);
	s->py_cpu = s->own[TB_CPU];
	s->py_lock = TB_PY_GIL;
	write_end(s);
}

/* Whether the wait closing now is in a lock wait, or the GIL taken back after a fed one. */
static __always_inline bool py_input(struct tb_slot *s)
{
	if (s->py_lock == TB_PY_WAIT || s->py_lock == TB_PY_FED) {
		s->py_lock = TB_PY_FED;
		return true;
	}
	if (s->py_lock != TB_PY_GIL)
		return false;
	if (s->own[TB_CPU] - s->py_cpu <= TB_GIL_RETAKE_CPU)
		return true;
	s->py_lock = TB_PY_NONE;
	return false;
}

/*
 * A wait of a thread that takes no batch from a DataLoader, in the stretch
 * between backwards: its input came (it waited waited of d ns for storage,
 * or for a thread that was itself waiting: a queue's producer sleeping or
 * reading; or in CPython's lock wait, py_input: a producer that decodes),
 * so what is pending so far was the step's data. The forward runs on the
 * CPU after it; GIL and intra-op waits are for threads that compute. A
 * global function: verified once, called from the scheduler hooks only
 * for such a thread.
 */
__noinline int feed_wait(struct tb_slot *s, __u64 waited, __u64 d, __u64 now)
{
	if (!s || s->phase != TB_PH_PEND_FWD || s->fetcher || !d)
		return 0;
	if (py_input(s))
		waited = d;
	if (2 * waited < d)
		return 0;
	move_row(s, TB_PH_PEND_FWD, TB_PH_PEND_DATA);
	phase_event(s, TB_BC_NONE, TB_RS_FED, now);
	return 0;
}

/*
 * Communication outside any phase (docs/phases.md): a thread that ran a
 * backward and waits on the network (gloo's socket threads, a probed
 * NCCL call) in other, between brackets, is communicating: a collective
 * after its backward (gradients averaged by hand), a barrier or a metric's
 * allreduce between steps; so is one that takes no batch from a
 * DataLoader, from one backward to the next outside any named bracket
 * (comm_can_start). Inside a bracket (DDP's allreduce in backward, DDP's
 * forward) or a fetched step's pending part (forward, validation) the
 * wait stays there.
 * The wait is communication from its start (the thread's phase cannot
 * change while it is blocked); what follows it (the division between
 * one parameter's allreduce and the next) waits in PEND_COMM, silently:
 * the next communication wait makes it communication, anything else (a
 * bracket, a fork, a wait for storage or for nothing traced) makes it
 * the phase it interrupted (cm_from) from the last wait's end (comm_back). So a loop of collectives
 * sends two events: one at its first wait's start, one at its last
 * wait's end. A global function: verified once, called from the
 * scheduler hooks only for threads that ran a backward.
 */
static __always_inline void comm_back(struct tb_slot *s)
{
	__u32 from = s->cm_from == TB_PH_PEND_FWD ? TB_PH_PEND_FWD : TB_PH_OTHER;

	if (s->phase != TB_PH_PEND_COMM)
		return;
	/* The event's row: that phase's at the wait's end, which the stretch left alone. */
	s->phase = from;
	phase_event(s, TB_BC_NONE, TB_RS_NONE, s->cm_end);
	move_row(s, TB_PH_PEND_COMM, from);
}

__noinline int comm_wait(struct tb_slot *s, __u32 own)
{
	if (!s)
		return 0;
	if (s->phase == TB_PH_PEND_COMM) {
		if (own == TB_COMM) {
			move_row(s, TB_PH_PEND_COMM, TB_PH_COMM);
			s->phase = TB_PH_COMM;
		} else if (own == TB_IDLE || own == TB_IO || own == TB_DATA_WAIT) {
			comm_back(s);
		}
		return 0;
	}
	if (own == TB_COMM && comm_can_start(s)) {
		s->cm_from = s->phase;
		s->phase = TB_PH_COMM;
		phase_event(s, TB_BC_NONE, TB_RS_NONE, s->since);
	}
	return 0;
}

/*
 * Woken from a communication wait, the thread waited for a CPU before the
 * collective could return: that is the collective's too (under load, up
 * to ms a wait). So the stretch pending after it starts where it runs.
 */
__noinline int comm_ran(struct tb_slot *s, __u64 now)
{
	if (!s)
		return 0;
	s->cm_woke = 0;
	if (s->phase == TB_PH_PEND_COMM) {
		move_row(s, TB_PH_PEND_COMM, TB_PH_COMM);
		s->cm_end = now;
	}
	return 0;
}

/*
 * w, running between brackets, woke a network thread of its process: it
 * issued a collective (gloo hands each to its own threads), which may
 * complete without the thread ever blocking (a peer that was ahead). The
 * stretch so far is communication, and from now on pending as after a
 * wait. Called from sched_waking for such threads only.
 */
__noinline int comm_issued(struct tb_slot *w, __u64 now)
{
	if (!w || !comm_can_start(w))
		return 0;
	write_begin(w);
	close_running(w, now);
	if (w->phase != TB_PH_PEND_COMM) {
		w->cm_from = w->phase;
		w->phase = TB_PH_COMM;
		phase_event(w, TB_BC_NONE, TB_RS_NONE, now);
	}
	move_row(w, TB_PH_PEND_COMM, TB_PH_COMM);
	w->phase = TB_PH_PEND_COMM;
	w->cm_end = now;
	write_end(w);
	return 0;
}

static __always_inline void push(struct tb_slot *s, __u64 key, __u32 cls, __u32 restore)
{
	__u32 n = s->nbr;

	if (n >= TB_NBRACKET)
		return;
	s->br[n].key = key;
	s->br[n].cls = cls;
	s->br[n].restore = restore;
	s->br[n].scope = 0;
	s->nbr = n + 1;
}

/* The innermost open bracket, or NULL. */
static __always_inline struct tb_bracket *top_any(struct tb_slot *s)
{
	__u32 n = s->nbr;

	if (!n || n > TB_NBRACKET)
		return NULL;
	return &s->br[(n - 1) & (TB_NBRACKET - 1)];
}

/* The innermost open bracket if it is (key, cls); else NULL. */
static __always_inline struct tb_bracket *top(struct tb_slot *s, __u64 key, __u32 cls)
{
	struct tb_bracket *b = top_any(s);

	return b && b->key == key && b->cls == cls ? b : NULL;
}

static __always_inline bool is_named(__u32 cls)
{
	return cls == TB_BC_DATA || cls == TB_BC_OPTIM || cls == TB_BC_OTHER;
}

/*
 * What follows a backward or an optimizer call opened in ph, in a thread
 * that takes no batch from a DataLoader: from a training step on, the
 * next step's input and forward (PEND_FWD, until the next backward). Only
 * where the optimizer is named (else it would fall in them); the first
 * step's come before any bracket, in other.
 */
static __always_inline __u32 unfetched_next(const struct tb_slot *s, __u32 ph, __u32 restore)
{
	if (!s->fetcher && s->named && s->trained && (ph == TB_PH_OTHER || ph == TB_PH_PEND_FWD))
		return TB_PH_PEND_FWD;
	return restore;
}

/* The phase a start-up interrupted: between steps or before the first (bounded for the verifier). */
static __always_inline __u32 start_origin(const struct tb_slot *s)
{
	return s->st_from == TB_PH_PEND_FWD ? TB_PH_PEND_FWD : TB_PH_OTHER;
}

/* Whether process tgid is traced and has not exited (TB_PF_EXITED). */
static __always_inline bool child_alive(__u32 tgid)
{
	struct tb_proc *p = tgid ? bpf_map_lookup_elem(&procs, &tgid) : NULL;

	return p && !(p->flags & TB_PF_EXITED);
}

/*
 * t (running, or blocked in a forkserver's reply when by_child) saw a new
 * process child start: the first such fork outside any bracket, between
 * steps or before the first, starts a worker start-up span (PEND_START)
 * that runs to the thread's next fetch. A later fork in the span moves
 * its start there if the process forked before it has exited (a helper
 * that ran, a `git` in the setup): the time so far goes back to the
 * phase it interrupted. A forkserver's fork only marks a thread that
 * fetches from a DataLoader or is in a start-up already (its own fork of
 * the forkserver began it), not mp.spawn's parent or a launcher.
 */
static __always_inline void start_mark(struct tb_slot *s, __u32 child, bool by_child, __u64 now)
{
	__u32 ph = s->phase != TB_PH_PEND_COMM ? s->phase :
		   s->cm_from == TB_PH_PEND_FWD ? TB_PH_PEND_FWD : TB_PH_OTHER;

	if (s->nbr || (ph != TB_PH_OTHER && ph != TB_PH_PEND_FWD && ph != TB_PH_PEND_START))
		return;
	if (by_child && !s->fetcher && ph != TB_PH_PEND_START)
		return;
	write_begin(s);
	if (!by_child)
		close_running(s, now);
	comm_back(s);
	if (ph != TB_PH_PEND_START) {
		s->st_from = ph;
		set_phase(s, TB_PH_PEND_START, TB_BC_NONE, TB_RS_NONE, now);
	} else if (!by_child && !child_alive(s->st_child)) {
		move_row(s, TB_PH_PEND_START, start_origin(s));
		phase_event(s, TB_BC_NONE, TB_RS_START_UNDO, now);
	}
	s->st_child = child;
	write_end(s);
}

/* What phase a bracket of cls puts the thread in, and what follows its close. */
static __always_inline void open_bracket(struct tb_slot *s, __u64 key, __u32 cls, __u64 now)
{
	__u32 ph, restore, to, how = TB_RS_NONE;
	bool started = false;

	/* Too deep to close again: the enclosing bracket keeps the time. */
	if (s->nbr >= TB_NBRACKET) {
		__sync_fetch_and_add(&counters.brackets_deep, 1);
		return;
	}
	/* After communication: what followed its last wait was the phase it interrupted. */
	comm_back(s);
	ph = restore = s->phase;
	if (cls == TB_BC_OTHER || cls == TB_BC_GRAD) {
		/*
		 * Named but no phase (DDP.forward, the user's own): kept for the
		 * stack. A gradient (grad_call): its time stays in the phase
		 * it runs in, and no step resolves.
		 */
		push(s, key, cls, ph);
		return;
	}
	if (ph == TB_PH_PEND_START) {
		/* A fetch with the workers alive: their start-up. Else it was no worker's. */
		started = cls == TB_BC_DATA && child_alive(s->st_child);
		if (!started) {
			ph = restore = start_origin(s);
			move_row(s, TB_PH_PEND_START, ph);
			s->phase = ph;
			how = TB_RS_START_UNDO;
		}
	}
	if (cls == TB_BC_DATA) {
		/* A new step: the last one had no backward if it is still pending. */
		how |= resolve_step(s, 0);
		if (started) {
			move_row(s, TB_PH_PEND_START, TB_PH_PEND_SHELD);
			s->st_held = 1;
			how |= TB_RS_START_HELD;
		}
		s->fetched = s->fetcher = s->named = 1;
		to = TB_PH_PEND_DATA;
		restore = TB_PH_PEND_FWD;
	} else if (cls == TB_BC_BACKWARD) {
		s->cm_on = 1;
		how |= resolve_step(s, 1);
		to = TB_PH_BACKWARD;
		/* Back to the step's pending part: it is done; else where it was called. */
		if (ph == TB_PH_PEND_FWD || ph == TB_PH_PEND_DATA)
			restore = TB_PH_OTHER;
		restore = unfetched_next(s, ph, restore);
	} else if (cls == TB_BC_OPTIM) {
		to = TB_PH_OPTIMIZER;
		s->named = 1;
		restore = unfetched_next(s, ph, restore);
	} else {
		to = TB_PH_CHECKPOINT;
	}
	push(s, key, cls, restore);
	set_phase(s, to, cls, how, now);
}

static __always_inline void pop(struct tb_slot *s, struct tb_bracket *b, __u64 now)
{
	__u32 cls = b->cls, restore = b->restore;

	s->nbr--;
	if (cls == TB_BC_OTHER)
		scope_event(s, s->nbr, NULL, now);
	/*
	 * A bracket of no phase changes none at its close: what ran inside it
	 * (a user's "train_step" around a whole step) set the phase since.
	 */
	if (cls != TB_BC_OTHER && cls != TB_BC_GRAD)
		set_phase(s, restore, cls, TB_RS_NONE, now);
}

/* Whether n (len bytes) starts with p (a literal). No memcmp in BPF: a loop. */
#define starts_with(n, len, p) ({					\
	int ok_ = (len) >= sizeof(p) - 1;				\
	for (int i_ = 0; ok_ && i_ < (int)sizeof(p) - 1; i_++)		\
		ok_ = (n)[i_] == (p)[i_];				\
	ok_;								\
})

/* "enumerate(DataLoader)#...", "Optimizer.step#SGD.step", ... */
static __always_inline __u32 name_class(const char *n, __u64 len)
{
	if (starts_with(n, len, "enumerate(DataLoader)"))
		return TB_BC_DATA;
	if (starts_with(n, len, "Optimizer."))
		return TB_BC_OPTIM;
	return TB_BC_OTHER;
}

/*
 * Where a bracket's name is read: the slot's scope_new (trainbpf.h), not
 * the stack. Cleared whole first: a failed read leaves no earlier name,
 * and the event that copies it (scope_event) nothing after the NUL.
 */
static __always_inline struct tb_py_scope_name *scope_name(struct tb_slot *s)
{
	__builtin_memset(&s->scope_new.name, 0, sizeof(s->scope_new.name));
	return &s->scope_new.name;
}

/*
 * record_function_enter_new(const std::string &name, ...): name in arg 2
 * (sret first), into nm.
 */
static __always_inline __u32 bracket_class(struct pt_regs *ctx, struct tb_py_scope_name *nm)
{
	__u64 str[2] = {};	/* libstdc++ std::string: data pointer, length */
	long len;

	if (bpf_probe_read_user(str, sizeof(str), (void *)PT_REGS_PARM2(ctx)))
		return TB_BC_OTHER;
	len = bpf_probe_read_user_str(nm->s, sizeof(nm->s), (void *)str[0]);
	if (len <= 0)
		return TB_BC_OTHER;
	return name_class(nm->s, str[1]);
}

/*
 * The bracket of no phase just opened (the user's own record_function):
 * with --functions a scope of the stacks read inside it (pystack.h); in a
 * recording an event.
 */
static __always_inline void scope_mark(struct tb_slot *s, __u32 nbr, __u32 cls, __u64 now)
{
	struct tb_bracket *b = top_any(s);

	if (cls != TB_BC_OTHER || s->nbr != nbr + 1 || !b)
		return;
	if (tb_py_stacks && s->scope_new.name.s[0])
		b->scope = py_scope_open(s);
	scope_event(s, nbr, &s->scope_new.name, now);
}

/*
 * torch < 2.0: record_function.__enter__ calls
 * torch.ops.profiler._record_function_enter(name, args) and __exit__
 * _record_function_exit(handle), both through invokeOperatorFromPython
 * (py::args, a tuple, by reference in arg 3). Layouts are CPython
 * 3.7-3.11's (the versions such a torch runs on): a tuple's size at +16
 * and items at +24, a compact ASCII str's length at +16, state at +32,
 * text at +48; an object's type at +8, a type's tp_name at +24.
 *
 * No return probe: a uretprobe replaces the return address, and a C++
 * exception unwinding through it (a torch.ops call that throws, caught by
 * pybind11 above) finds no frame there and terminates the job. So the
 * handle the enter op returns is not known, and an exit closes the
 * innermost bracket: record_function brackets nest, and every one is
 * kept (a name that is no phase's as TB_BC_OTHER), so an exit of the
 * user's own bracket inside a fetch closes that one.
 */
#define TB_PY_OB_TYPE		8
#define TB_PY_TUPLE_SIZE	16
#define TB_PY_STR_LEN		16
#define TB_PY_STR_STATE		32
#define TB_PY_STR_ASCII		48
#define TB_PY_TYPE_NAME		24
#define TB_PY_COMPACT_ASCII	0x60	/* state: compact (bit 5) and ascii (bit 6) */

/* The first bytes of obj's type's name (tp_name) into tn; 0 if read. */
static __always_inline int py_type_name(__u64 obj, char *tn, __u32 len)
{
	__u64 type = 0, tp_name = 0;

	if (bpf_probe_read_user(&type, sizeof(type), (void *)(obj + TB_PY_OB_TYPE)) ||
	    bpf_probe_read_user(&tp_name, sizeof(tp_name), (void *)(type + TB_PY_TYPE_NAME)))
		return -1;
	return bpf_probe_read_user(tn, len, (void *)tp_name);
}

/* Whether obj's type is named lit (a literal), its terminating NUL too. */
#define py_type_is(obj, lit) ({						\
	char tn_[sizeof(lit)] = {};					\
	!py_type_name(obj, tn_, sizeof(tn_)) &&				\
		starts_with(tn_, sizeof(tn_), lit) && !tn_[sizeof(lit) - 1]; \
})

/*
 * The class of a legacy enter op's (name, args): TB_BC_NONE unless the
 * name is a str and args None or a str (the enter op's signature).
 */
static __always_inline __u32 legacy_name_class(__u64 str, __u64 args,
						struct tb_py_scope_name *nm)
{
	__u64 len = 0;
	__u32 state = 0;

	if (!py_type_is(str, "str") || !(py_type_is(args, "NoneType") || py_type_is(args, "str")))
		return TB_BC_NONE;
	if (bpf_probe_read_user(&state, sizeof(state), (void *)(str + TB_PY_STR_STATE)) ||
	    (state & TB_PY_COMPACT_ASCII) != TB_PY_COMPACT_ASCII ||
	    bpf_probe_read_user(&len, sizeof(len), (void *)(str + TB_PY_STR_LEN)) ||
	    bpf_probe_read_user_str(nm->s, sizeof(nm->s), (void *)(str + TB_PY_STR_ASCII)) <= 0) {
		nm->s[0] = 0;
		return TB_BC_OTHER;
	}
	return name_class(nm->s, len);
}

/* A legacy exit: the innermost bracket closes, now. */
static __always_inline void close_innermost(struct tb_slot *s)
{
	__u64 now = bpf_ktime_get_ns();
	struct tb_bracket *b;

	write_begin(s);
	close_running(s, now);
	b = top_any(s);
	if (b)
		pop(s, b, now);
	write_end(s);
}

/*
 * A torch.ops call on a torch < 2.0: (name, args) opens a bracket,
 * (tensor) closes the innermost one (a handle is a tensor).
 */
static __always_inline void legacy_op(struct pt_regs *ctx, __u64 cookie, struct tb_slot *s)
{
	__u64 args = 0, tuple[4] = {}, item1 = 0, now;	/* refcnt, type, size, item 0 */
	struct tb_bracket *b = top_any(s);
	__u32 cls = TB_BC_NONE, nbr;

	if (bpf_probe_read_user(&args, sizeof(args), (void *)PT_REGS_PARM3(ctx)) ||
	    bpf_probe_read_user(tuple, sizeof(tuple), (void *)args))
		return;
	s->legacy_exit = 0;	/* an exit op that threw never returned */
	if (tuple[2] == 1) {
		if (!b || !is_named(b->cls) || !py_type_is(tuple[3], "Tensor"))
			return;
		/* Closed as the op returns, the GIL taken back (TB_AK_TORCH_OP_RET). */
		if (cookie & TB_COOKIE_RET_SITE)
			s->legacy_exit = 1;
		else
			close_innermost(s);
		return;
	}
	if (tuple[2] != 2 || bpf_probe_read_user(&item1, sizeof(item1), (void *)(args + 32)))
		return;
	cls = legacy_name_class(tuple[3], item1, scope_name(s));
	if (cls == TB_BC_NONE)
		return;
	now = bpf_ktime_get_ns();
	write_begin(s);
	close_running(s, now);
	nbr = s->nbr;
	open_bracket(s, 0, cls, now);
	scope_mark(s, nbr, cls, now);
	write_end(s);
}

/*
 * Whether THPEngine_run_backward(self, args, kwargs), entered now, runs
 * for torch.autograd.grad rather than for a backward that accumulates
 * into .grad (Tensor.backward, torch.autograd.backward): by the number of
 * positional arguments in args (a tuple, its size at +16 on every CPython
 * 3). torch 1.13 and 2.6 (autograd/__init__.py, and 2.6's graph.py
 * _engine_run_backward, which passes its *args on) call it from backward()
 * with five, (tensors, grad_tensors, retain_graph, create_graph, inputs),
 * and allow_unreachable and accumulate_grad=True by keyword; from grad()
 * with six (allow_unused too) and accumulate_grad=False by keyword: the
 * size is the accumulate_grad distinction, without reading the keyword
 * dict (its layout changes with Python). So backward(inputs=...) is still
 * a backward.
 * AOTAutograd (torch.compile, while it compiles), gradient penalties,
 * torch.autograd.functional and closures that call grad() are grads.
 * Nested in a grad (a reentrant checkpoint's backward inside it), any
 * call is the grad's too.
 */
static __always_inline bool grad_call(struct pt_regs *ctx, struct tb_slot *s)
{
	__u64 n = 0;

	for (int i = 0; i < TB_NBRACKET; i++)
		if (i < s->nbr && s->br[i].cls == TB_BC_GRAD)
			return true;
	if (bpf_probe_read_user(&n, sizeof(n), (void *)(PT_REGS_PARM2(ctx) + TB_PY_TUPLE_SIZE)))
		return false;
	return n >= 6;
}

static __always_inline int torch_entry_prog(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), key = PT_REGS_PARM1(ctx), now;
	__u32 kind = TB_COOKIE_KIND(cookie);
	struct tb_slot *s = task_slot(bpf_get_current_task_btf(), NULL);
	struct tb_bracket *b;
	bool grad;

	if (!s)
		return 0;
	if (kind == TB_AK_PYLOCK) {
		py_lock_enter(ctx, cookie, s);
		return 0;
	}
	/* A torch.ops call: the exit op of a bracket, or any other. */
	if (kind == TB_AK_TORCH_OP && (cookie & TB_COOKIE_LEGACY)) {
		legacy_op(ctx, cookie, s);
		return 0;
	}
	if (kind == TB_AK_TORCH_OP) {
		s->op_seen = 1;
		return 0;
	}
	if (kind == TB_AK_TORCH_OP_RET) {
		b = top_any(s);
		if (s->legacy_exit && b && is_named(b->cls)) {
			s->legacy_exit = 0;
			close_innermost(s);
		}
		return 0;
	}
	/* Closes a named bracket only after its exit op: other blocks are no close. */
	b = top_any(s);
	if (kind == TB_AK_TORCH_CLOSE && (!s->op_seen || !b || !is_named(b->cls)))
		return 0;
	if (kind == TB_AK_TORCH_SAVED && !top(s, key, TB_BC_SAVE))
		return 0;
	/* The complete and base constructors can both run for one writer. */
	if (kind == TB_AK_TORCH_SAVE && top(s, key, TB_BC_SAVE))
		return 0;
	grad = kind == TB_AK_TORCH_BACKWARD && grad_call(ctx, s);
	now = bpf_ktime_get_ns();
	write_begin(s);
	close_running(s, now);
	if (kind == TB_AK_TORCH_OPEN) {
		__u32 cls = bracket_class(ctx, scope_name(s)), nbr = s->nbr;

		s->op_seen = 0;
		open_bracket(s, 0, cls, now);
		scope_mark(s, nbr, cls, now);
	} else if (kind == TB_AK_TORCH_CLOSE) {
		s->op_seen = 0;
		b = top_any(s);
		if (b)
			pop(s, b, now);
	} else if (kind == TB_AK_TORCH_BACKWARD) {
		open_bracket(s, 0, grad ? TB_BC_GRAD : TB_BC_BACKWARD, now);
	} else if (kind == TB_AK_TORCH_SAVE) {
		open_bracket(s, key, TB_BC_SAVE, now);
	} else if (kind == TB_AK_TORCH_SAVED) {
		b = top(s, key, TB_BC_SAVE);
		if (b)
			pop(s, b, now);
	}
	write_end(s);
	return 0;
}

/*
 * THPEngine_run_backward returns: backward is over. It catches every C++
 * exception inside itself (HANDLE_TH_ERRORS), so none unwinds through the
 * uretprobe's return address (which would terminate the job): a backward
 * that raises returns here as any other. A grad's call closes its bracket
 * of no phase the same way.
 */
static __always_inline int torch_return_prog(struct pt_regs *ctx)
{
	struct tb_slot *s = task_slot(bpf_get_current_task_btf(), NULL);
	__u64 cookie = bpf_get_attach_cookie(ctx), now;
	struct tb_bracket *b;

	if (s && TB_COOKIE_KIND(cookie) == TB_AK_PYLOCK) {
		py_lock_return(cookie, s);
		return 0;
	}
	if (!s || !(top(s, 0, TB_BC_BACKWARD) || top(s, 0, TB_BC_GRAD)))
		return 0;
	now = bpf_ktime_get_ns();
	write_begin(s);
	close_running(s, now);
	b = top(s, 0, TB_BC_BACKWARD);
	if (!b)
		b = top(s, 0, TB_BC_GRAD);
	if (b)
		pop(s, b, now);
	write_end(s);
	return 0;
}

SEC("uprobe")
int torch_entry(struct pt_regs *ctx)
{
	return torch_entry_prog(ctx);
}

SEC("uretprobe")
int torch_return(struct pt_regs *ctx)
{
	return torch_return_prog(ctx);
}

SEC("uprobe")
int torch_entry_multi(struct pt_regs *ctx)
{
	return torch_entry_prog(ctx);
}

SEC("uprobe")
int torch_return_multi(struct pt_regs *ctx)
{
	return torch_return_prog(ctx);
}
