/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The Python stack reader (--functions): which Python code a traced
 * thread was in, for all of its time.
 *
 *   - Off the CPU, a thread's stack cannot change: it is read once at the
 *     switch-out (py_read_stack) and every interval that closes before
 *     the thread runs again is charged to it whole, in the category it
 *     closes in (py_charge, from close_interval and a lock wait's split).
 *   - On the CPU it changes all the time: a perf sample (py_sample, per
 *     CPU, every tb_py_period_ns of CPU time) reads it and charges the
 *     time since the thread's last sample in the same run (py_sample_ns),
 *     in the category the running thread is in.
 *
 * User space tells which threads are Python threads (py_threads: their
 * PyThreadState by the id CPython keeps, pthread_self(), which is the
 * task's fsbase on x86-64) and where the interpreter keeps the frames
 * (py_layouts, per process): a thread not there costs one lookup.
 * Included by trainbpf.bpf.c, after state.bpf.h.
 */

#include "pystack.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct tb_py_layout);
} py_layouts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct tb_py_thread_key);
	__type(value, __u64);
} py_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tb_py_stack_key);
	__type(value, struct tb_py_stack);
} py_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct tb_py_scope_key);
	__type(value, struct tb_py_scope);
} py_scopes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct tb_py_time_key);
	__type(value, struct tb_py_time);
} py_time SEC(".maps");

/*
 * Who reads a stack. A read is many steps, and on one CPU one can come
 * inside another: a sample's (a timer interrupt) inside a uprobe's
 * (py_scope_open: preemptible, interrupts on), and a switch-out's inside a
 * uprobe's preempted (the switch-out of the very thread it reads). Each
 * reader has its own scratch per CPU; the uprobe's, which two threads'
 * probes can share on one CPU (one preempted in a read, the other run
 * meanwhile), counts its uses, and a read that saw another start drops.
 */
enum py_reader { PY_AT_SWITCH, PY_AT_SAMPLE, PY_AT_PROBE, PY_NREADER };

/*
 * From 3.11 CPython keeps a thread's frames on a stack of its own (its
 * data stack: chunks of 16 kB and more, the caller's frame just below its
 * callee's), so a page of it holds many frames: the walk reads a page at
 * once (up to the frame it needs, no lower than the page it is on, which
 * is mapped) and takes the frames below from it. A frame elsewhere (a
 * generator's, in its object; a C call's shim, on the C stack; an older
 * chunk's) is read alone, and the page kept. One read a page instead of
 * one a frame: a read's fixed cost is most of a walk's.
 */
#define PY_PAGE 4096

/* The stack being read, and the frames read: too big for the BPF stack. */
struct py_scratch {
	struct tb_py_stack st;
	/*
	 * [0, PY_PAGE): a page of frames, win_lo.. in py_walk; at PY_PAGE, a
	 * frame's head read alone. Twice a page and a head: the verifier
	 * bounds an offset by a mask (2 * PY_PAGE - 1), not by a compare the
	 * compiler may drop, and an offset within a head by 127.
	 */
	__u8 win[2 * PY_PAGE + 136];
	__u64 uses;		/* reads begun with it */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PY_NREADER);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

struct tb_py_counters py_counters;

/* The walk's state: bpf_loop's callback gets it by pointer. */
struct py_walk {
	/*
	 * The reader's scratch, looked up once: the callback's own lookup by
	 * a key from here took the verifier past its million instructions.
	 */
	struct py_scratch *sc;
	__u64 frame, h;
	__u64 prev;		/* the frame read before (inner); 0: none yet */
	__u64 win_lo, win_hi;	/* the page part in win: [lo, hi); hi 0: none */
	__u32 d;
	__u16 back, code;
	__s16 owner, cstack;
	__u32 failed;
	__u32 pages;		/* frames on a data stack (3.11+): read by pages */
};

/* A field of the head at `at` in win (py_fetch's, at most PY_PAGE). */
static __always_inline __u64 win_u64(const struct py_scratch *sc, __u32 at, __u32 off)
{
	barrier_var(at);	/* the compiler would drop the mask, the verifier's bound */
	return *(const __u64 *)(sc->win + (at & (2 * PY_PAGE - 1)) + (off & 127));
}

static __always_inline __u8 win_u8(const struct py_scratch *sc, __u32 at, __u32 off)
{
	barrier_var(at);
	return sc->win[(at & (2 * PY_PAGE - 1)) + (off & 127)];
}

/*
 * Where frame f's head is in sc->win: in the page part read before, in one
 * read now (the walk's first frame, or one just below the frame before
 * it: the data stack goes on), or read alone at PY_PAGE; past PY_PAGE if
 * it could not be read.
 */
static __always_inline __u32 py_fetch(struct py_walk *w, struct py_scratch *sc, __u64 f)
{
	__u64 end = f + TB_PY_FRAME_HEAD, lo;
	__u32 n;

	if (w->win_hi && f >= w->win_lo && end <= w->win_hi)
		return f - w->win_lo;
	if (w->pages && (!w->prev || (f < w->prev && f + PY_PAGE >= w->prev))) {
		lo = f & ~(__u64)(PY_PAGE - 1);
		if (end > lo + PY_PAGE)
			lo = end - PY_PAGE;	/* the head crosses into the next page */
		n = end - lo;	/* at most PY_PAGE */
		barrier_var(n);	/* the mask stays: the verifier's bound */
		if (!bpf_probe_read_user(sc->win, n & (2 * PY_PAGE - 1), (void *)lo)) {
			w->win_lo = lo;
			w->win_hi = lo + n;
			return f - lo;
		}
		w->win_hi = 0;	/* partly unreadable: as a frame alone */
	}
	if (bpf_probe_read_user(sc->win + PY_PAGE, TB_PY_FRAME_HEAD, (void *)f))
		return PY_PAGE + 1;
	return PY_PAGE;
}

/*
 * One frame, outwards (bpf_loop: verified once, not per iteration: 96
 * unrolled reads with their branches passed the verifier's limit).
 */
static long py_frame(__u64 i, void *ctx)
{
	struct py_walk *w = ctx;
	struct py_scratch *sc = w->sc;
	__u32 slot, at;
	__u64 code;

	if (!sc || !w->frame)
		return 1;
	at = py_fetch(w, sc, w->frame);
	if (at > PY_PAGE) {
		w->failed = 1;
		return 1;
	}
	code = win_u64(sc, at, w->code);
	w->prev = w->frame;
	w->frame = win_u64(sc, at, w->back);
	/* A C call's shim frame (3.12+) is no Python code. */
	if (w->owner >= 0 && win_u8(sc, at, w->owner) == w->cstack)
		return 0;
	/* Past the innermost frames, a ring of the outermost (pystack.h). */
	slot = tb_py_slot(w->d);
	barrier_var(slot);	/* the verifier cannot bound a modulo: the mask stays */
	sc->st.code[slot & (TB_PY_DEPTH - 1)] = code;
	w->d++;
	w->h = (w->h ^ code) * 0x100000001b3ull;
	return 0;
}

/*
 * Walks the frames from the thread's current one outwards into sc->st;
 * the hash of the code objects read, 0 if the first read failed.
 */
static __always_inline __u64 py_walk(const struct tb_py_layout *l, __u64 tstate,
				     struct py_scratch *sc, __u64 scope)
{
	struct py_walk w = {
		.h = 0xcbf29ce484222325ull, .back = l->frame_back, .code = l->frame_code,
		.owner = l->frame_owner, .cstack = l->owner_cstack, .sc = sc,
		.pages = l->frame_owner >= 0,	/* _PyInterpreterFrame: 3.11+ */
	};

	if (bpf_probe_read_user(&w.frame, sizeof(w.frame), (void *)(tstate + l->tstate_frame)))
		return 0;
	if (l->cframe_frame >= 0 && w.frame &&
	    bpf_probe_read_user(&w.frame, sizeof(w.frame), (void *)(w.frame + l->cframe_frame)))
		return 0;
	bpf_loop(TB_PY_WALK, py_frame, &w, 0);
	if (w.failed)
		__sync_fetch_and_add(&py_counters.read_failed, 1);
	sc->st.depth = w.d < TB_PY_DEPTH ? w.d : TB_PY_DEPTH;
	sc->st.cut = (w.d - sc->st.depth) | (w.frame ? TB_PY_CUT_OUTER : 0);
	sc->st.scope = w.d ? scope : 0;
	if (!w.d)
		return TB_PY_EMPTY;
	w.h ^= w.d;
	/* The same frames in another record_function are another stack. */
	if (scope)
		w.h = (w.h ^ scope) * 0x100000001b3ull;
	return w.h > TB_PY_EMPTY ? w.h : w.h + 2;
}

/*
 * The stack of the thread fsbase names in s's process, in the
 * record_function scope (0: none), read by reader (enum py_reader), kept
 * in py_stacks; its hash, 0 if it is no Python thread or could not be read.
 */
static __noinline __u64 py_read(__u32 tgid, __u64 fsbase, __u64 scope, __u32 reader)
{
	struct tb_py_thread_key tk = { .tgid = tgid, .pthread = fsbase };
	struct tb_py_stack_key sk = { .tgid = tgid };
	const struct tb_py_layout *l;
	struct py_scratch *sc;
	__u64 *tstate, mine;

	tstate = bpf_map_lookup_elem(&py_threads, &tk);
	if (!tstate)
		return 0;
	l = bpf_map_lookup_elem(&py_layouts, &tgid);
	sc = bpf_map_lookup_elem(&py_scratch, &reader);
	if (!l || !sc)
		return 0;
	mine = ++sc->uses;
	sk.hash = py_walk(l, *tstate, sc, scope);
	if (!sk.hash)
		return 0;
	if (TB_READ_ONCE(sc->uses) != mine) {
		/* another read used the scratch meanwhile: this one is lost */
		__sync_fetch_and_add(&py_counters.read_failed, 1);
		return 0;
	}
	__sync_fetch_and_add(&py_counters.reads, 1);
	if (bpf_map_update_elem(&py_stacks, &sk, &sc->st, BPF_NOEXIST) == -TB_E2BIG)
		__sync_fetch_and_add(&py_counters.stacks_full, 1);
	return sk.hash;
}

static __always_inline void py_add(__u64 hash, const struct tb_slot *s, __u32 own,
				   __u32 cp, __u64 ns, __u32 how)
{
	struct tb_py_time_key k = {
		.hash = hash, .tgid = s->tgid, .tid = s->tid, .seq = s->ph_seq,
		.phase = s->phase, .cat = cp & (TB_NCAT - 1), .own = own & (TB_NCAT - 1),
		.how = how,
	};
	struct tb_py_time one = { .ns = ns, .n = 1 }, *t;

	t = bpf_map_lookup_elem(&py_time, &k);
	if (t) {
		__sync_fetch_and_add(&t->ns, ns);
		__sync_fetch_and_add(&t->n, 1);
		return;
	}
	/* Two CPUs may add the same key at once: the loser adds to the winner's. */
	if (bpf_map_update_elem(&py_time, &k, &one, BPF_NOEXIST)) {
		t = bpf_map_lookup_elem(&py_time, &k);
		if (!t) {
			__sync_fetch_and_add(&py_counters.time_full, 1);
			return;
		}
		__sync_fetch_and_add(&t->ns, ns);
		__sync_fetch_and_add(&t->n, 1);
	}
}

/* Off the CPU: the interval closed goes whole to the stack read at the switch-out. */
__noinline int py_charge(struct tb_slot *s, __u32 own, __u32 cp, __u64 ns)
{
	if (!s || !s->py_stack || !ns)
		return 0;
	py_add(s->py_stack, s, own, cp, ns, TB_PYH_WAIT);
	return 0;
}

/* The innermost record_function scope open on s's thread; 0. */
static __always_inline __u64 py_scope_of(const struct tb_slot *s)
{
	__u64 scope = 0;

	for (int i = 0; i < TB_NBRACKET; i++)
		if (i < s->nbr && s->br[i].scope)
			scope = s->br[i].scope;
	return scope;
}

/* At the switch-out of s's thread (current): the stack its waits are charged to. */
__noinline int py_switch_out(struct tb_slot *s, __u64 fsbase)
{
	if (s)
		s->py_stack = py_read(s->tgid, fsbase, py_scope_of(s), PY_AT_SWITCH);
	return 0;
}

/*
 * The user's record_function opens on s's thread (current), inside its
 * __enter__, named in s->scope_new (torch.bpf.h): the scope it is, kept
 * in py_scopes with the stack read now (where it opened); 0 if the
 * thread's stack is not read or the map is full. A few a step: one more
 * stack read each. Built in the slot, not on the stack: see scope_new.
 */
__noinline __u64 py_scope_open(struct tb_slot *s)
{
	struct tb_py_scope_key k = {};
	struct tb_py_scope *v;
	__u64 h = 0xcbf29ce484222325ull;
	int i;

	if (!s)
		return 0;
	v = &s->scope_new;
	v->parent = py_scope_of(s);
	v->stack = py_read(s->tgid, BPF_CORE_READ(bpf_get_current_task_btf(), thread.fsbase),
			   v->parent, PY_AT_PROBE);
	if (!v->stack)
		return 0;
	for (i = 0; i < TB_PY_SCOPE_NAME - 1 && v->name.s[i]; i++)
		h = (h ^ (__u8)v->name.s[i]) * 0x100000001b3ull;
	h = (((h ^ v->stack) * 0x100000001b3ull) ^ v->parent) * 0x100000001b3ull;
	k.tgid = s->tgid;
	k.id = h ? h : 1;
	if (bpf_map_update_elem(&py_scopes, &k, v, BPF_NOEXIST) == -TB_E2BIG) {
		__sync_fetch_and_add(&py_counters.scopes_full, 1);
		return 0;
	}
	return k.id;
}

/*
 * What a sample of s's thread (running since last_in) charges at now: for
 * a later sample of a run, the time since the one before; for the first,
 * one period (it stands for the period it fell in, so that runs shorter
 * than one are charged right on average), or the time since the run began
 * if that is longer. Either is a period, unless the CPU clock's timer
 * interrupt came late: the sampler then skips the periods it missed, one
 * sample for several (a VM's busy host: in CI a tenth of a spinning
 * thread's samples, up to 10 ms at once), and a fixed period would lose
 * them. Past 64 periods something else went wrong: one period. Stamped
 * whether or not the stack is read: a period whose read failed is not
 * charged to the next stack read.
 */
static __always_inline __u64 py_sample_ns(struct tb_slot *s, __u64 now)
{
	__u64 since = s->py_sampled > s->last_in ? s->py_sampled : s->last_in;
	bool first = s->py_sampled <= s->last_in;
	__u64 d = now > since ? now - since : 0;

	s->py_sampled = now;
	if (d >= 64 * tb_py_period_ns || (first && d < tb_py_period_ns))
		return tb_py_period_ns;
	return d;
}

/* record: the sample in the state stream (TB_SR_PY_SAMPLE), for the trace's stack slices. */
static __always_inline void py_stream_sample(const struct tb_slot *s, __u64 hash, __u32 own,
					     __u32 cp, __u64 now, __u64 ns)
{
	struct tb_state_rec *r = bpf_ringbuf_reserve(&states, sizeof(*r), 0);

	if (!r) {
		__sync_fetch_and_add(&counters.states_lost, 1);
		return;
	}
	r->tid = s->tid;
	r->pid = s->tgid;
	r->start_ns = now - ns;	/* the time it charged */
	r->end_ns = now;
	r->py_stack = hash;
	r->cat = own & (TB_NCAT - 1);
	r->cp_cat = cp & (TB_NCAT - 1);
	r->flags = TB_SR_PY_SAMPLE;
	__builtin_memset(r->pad, 0, sizeof(r->pad));
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("perf_event")
int py_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct tb_slot *s = task_slot(t, NULL);
	__u64 hash, now, ns;

	if (!s || s->state != TB_ST_ONCPU)
		return 0;
	now = bpf_ktime_get_ns();
	ns = py_sample_ns(s, now);
	hash = py_read(s->tgid, BPF_CORE_READ(t, thread.fsbase), py_scope_of(s), PY_AT_SAMPLE);
	if (!hash)
		return 0;
	__sync_fetch_and_add(&py_counters.samples, 1);
	py_add(hash, s, tb_oncpu_own(s), tb_oncpu_cp(s), ns, TB_PYH_SAMPLE);
	if (tb_stream_states)
		py_stream_sample(s, hash, tb_oncpu_own(s), tb_oncpu_cp(s), now, ns);
	return 0;
}
