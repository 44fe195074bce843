/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Uprobes on the CUDA runtime, the CUDA driver and NCCL. A probed call is a
 * region of the calling thread: from entry to return its time, running
 * (the runtime spins while it waits) or blocked, is gpu_wait for
 * synchronisation and blocking copies, comm for NCCL. Only the outermost
 * call of a thread opens a region and counts as a call: the runtime's
 * cudaStreamSynchronize calling the driver's cuStreamSynchronize is one
 * sync. Launch probes (opt-in) only count, at entry.
 *
 * Included by trainbpf.bpf.c after state.bpf.h. Assumes a probe's slot
 * update is not preempted by a switch of the same thread (true on the
 * non-preemptible kernels we run on); if it happens, api_preempted counts it.
 */
#include "probes.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tb_api_key);
	__type(value, struct tb_api_stat);
} api_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct tb_comm_pending);
} comm_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct tb_rt_ranges);
} rt_ranges SEC(".maps");

/* NCCL data calls per process and communicator (user space reads, deletes at exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct tb_comm_key);
	__type(value, struct tb_comm_stat);
} comm_stats SEC(".maps");

/* sizeof each ncclDataType_t, in enum order. */
static const __u8 nccl_type_size[TB_NCCL_NTYPES] = {
	1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1,
};

/*
 * The n-th integer argument (1-6). Read all six at constant offsets: the
 * verifier refuses a context load at a computed one.
 */
static __always_inline __u64 uarg(struct pt_regs *ctx, __u32 n)
{
	__u64 a[8] = {
		0, PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
		PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx),
		ctx->r9,	/* x86-64 6th: PT_REGS_PARM6 is newer than our libbpf */
	};

	return a[n & 7];
}

static __always_inline struct tb_api_stat *api_stat(__u32 tgid, __u32 api)
{
	struct tb_api_key key = { .tgid = tgid, .api = api };
	static const struct tb_api_stat zero;
	struct tb_api_stat *st = bpf_map_lookup_elem(&api_stats, &key);

	if (st)
		return st;
	bpf_map_update_elem(&api_stats, &key, &zero, BPF_NOEXIST);
	st = bpf_map_lookup_elem(&api_stats, &key);
	if (!st)
		__sync_fetch_and_add(&counters.api_stats_full, 1);
	return st;
}

/* count x sizeof(datatype) of an NCCL data call; 0 for others. */
static __always_inline __u64 data_bytes(struct pt_regs *ctx, __u64 cookie)
{
	__u32 cnt = TB_COOKIE_CNT(cookie), dt = TB_COOKIE_DT(cookie);
	__u64 type;

	if (!cnt || !dt)
		return 0;
	type = uarg(ctx, dt) & 0xffffffff;	/* an int: upper half is junk */
	if (type >= TB_NCCL_NTYPES)
		return 0;
	return uarg(ctx, cnt) * nccl_type_size[type];
}

/* The caller's return address, at function entry. */
static __always_inline __u64 return_address(struct pt_regs *ctx)
{
	__u64 ra = 0;

	bpf_probe_read_user(&ra, sizeof(ra), (void *)PT_REGS_SP(ctx));
	return ra;
}

/* Remember a communicator call's identity until it returns the handle. */
static __always_inline void comm_init_enter(struct pt_regs *ctx, __u64 cookie,
					    __u32 tid)
{
	struct tb_comm_pending p = { .rank = -1, .nranks = -1 };
	__u64 ids;

	switch (TB_COOKIE_IL(cookie)) {
	case TB_IL_RANK:
		p.out = uarg(ctx, 1);
		p.nranks = uarg(ctx, 2);
		p.rank = uarg(ctx, 3);	/* the by-value id went to the stack */
		bpf_probe_read_user(p.id, sizeof(p.id), (void *)(PT_REGS_SP(ctx) + 8));
		break;
	case TB_IL_ALL:
		p.out = uarg(ctx, 1);
		p.nranks = uarg(ctx, 2);
		break;
	case TB_IL_SCALABLE:
		p.out = uarg(ctx, 1);
		p.nranks = uarg(ctx, 2);
		p.rank = uarg(ctx, 3);
		ids = uarg(ctx, 5);
		bpf_probe_read_user(p.id, sizeof(p.id), (void *)ids);
		break;
	case TB_IL_SPLIT:
		p.color = uarg(ctx, 2);	/* an int: the lower half */
		/* fallthrough */
	case TB_IL_SHRINK:
		p.parent = uarg(ctx, 1);
		p.out = uarg(ctx, 4);
		break;
	}
	bpf_map_update_elem(&comm_pending, &tid, &p, BPF_ANY);
}

static __always_inline void comm_event(__u32 type, __u32 api, __u64 comm,
				       const struct tb_comm_pending *p)
{
	struct tb_comm_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	__u64 id = bpf_get_current_pid_tgid();

	if (!e) {
		__sync_fetch_and_add(&counters.events_lost, 1);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->api = api;
	e->ts = bpf_ktime_get_ns();
	e->comm = comm;
	e->rank = -1;
	e->nranks = -1;
	if (p) {
		e->rank = p->rank;
		e->nranks = p->nranks;
		e->parent = p->parent;
		e->color = p->color;
		__builtin_memcpy(e->id, p->id, sizeof(e->id));
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static __always_inline void comm_init_exit(__u32 tid, __u32 api)
{
	struct tb_comm_pending *p = bpf_map_lookup_elem(&comm_pending, &tid);
	__u64 comm = 0;

	if (!p)
		return;
	bpf_probe_read_user(&comm, sizeof(comm), (void *)p->out);
	/* A new communicator at a freed one's address counts from zero. */
	if (comm) {
		struct tb_comm_key key = { .tgid = bpf_get_current_pid_tgid() >> 32, .comm = comm };

		bpf_map_delete_elem(&comm_stats, &key);
	}
	comm_event(TB_EV_NCCL_COMM, api, comm, p);
	bpf_map_delete_elem(&comm_pending, &tid);
}

/*
 * The return of an outermost call that a training step repeats: steps are
 * found from the period of these (user/model/steps.c). No wakeup: user space
 * reads them at its next tick.
 */
static __always_inline void call_event(const struct tb_slot *s, __u32 kind,
				       __u64 entry, __u64 ret)
{
	struct tb_call_event *e;

	if (kind > TB_AK_GROUP)
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&counters.events_lost, 1);
		return;
	}
	e->type = TB_EV_CALL;
	e->pid = s->tgid;
	e->tid = s->tid;
	e->api = s->api;
	e->kind = kind;
	e->pad = 0;
	e->entry = entry;
	e->ret = ret;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* The communicator of an NCCL data call (cookie: its argument); 0 if none. */
static __always_inline __u64 comm_arg(struct pt_regs *ctx, __u64 cookie)
{
	__u32 n = TB_COOKIE_CM(cookie);
	__u64 comm = 0;

	if (n < 7)
		return n ? uarg(ctx, n) : 0;
	/* The 7th integer argument: above the return address (x86-64 SysV). */
	bpf_probe_read_user(&comm, sizeof(comm), (void *)(PT_REGS_SP(ctx) + 8));
	return comm;
}

/* One more outermost data call on its communicator, with its bytes. */
static __always_inline void comm_count(struct pt_regs *ctx, __u64 cookie, __u32 tgid,
				       __u64 bytes)
{
	struct tb_comm_key key = { .tgid = tgid, .comm = comm_arg(ctx, cookie) };
	static const struct tb_comm_stat zero;
	struct tb_comm_stat *st;

	if (!key.comm)
		return;
	st = bpf_map_lookup_elem(&comm_stats, &key);
	if (!st) {
		bpf_map_update_elem(&comm_stats, &key, &zero, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&comm_stats, &key);
	}
	if (!st) {
		__sync_fetch_and_add(&counters.api_stats_full, 1);
		return;
	}
	__sync_fetch_and_add(&st->calls, 1);
	__sync_fetch_and_add(&st->bytes, bytes);
}

static __always_inline __u32 region_of(__u32 kind)
{
	return kind == TB_AK_SYNC || kind == TB_AK_MEMCPY ? TB_GPU_WAIT : TB_COMM;
}

/* A collective, a send or receive, or a group's end (where grouped ones run). */
static __always_inline bool is_collective(__u32 kind)
{
	return kind == TB_AK_COLL || kind == TB_AK_P2P || kind == TB_AK_GROUP;
}

static __always_inline int enter(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), now, bytes;
	__u32 api = TB_COOKIE_API(cookie), kind = TB_COOKIE_KIND(cookie);
	struct tb_slot *s = task_slot(bpf_get_current_task_btf(), NULL);
	struct tb_api_stat *st;

	if (!s)
		return 0;
	st = api_stat(s->tgid, api);
	if (s->depth) {
		if (s->depth < 255)
			s->depth++;
		if (st)
			__sync_fetch_and_add(&st->nested, 1);
		return 0;
	}
	now = bpf_ktime_get_ns();
	bytes = data_bytes(ctx, cookie);
	if (st) {
		__sync_fetch_and_add(&st->calls, 1);
		__sync_fetch_and_add(&st->bytes, bytes);
	}
	if (kind == TB_AK_COLL || kind == TB_AK_P2P)
		comm_count(ctx, cookie, s->tgid, bytes);
	write_begin(s);
	catch_up_running(s, bpf_get_current_task_btf(), now);
	close_interval(s, TB_CPU, tb_oncpu_cp(s), now);
	s->region = region_of(kind);
	s->api = api;
	s->api_ts = now;
	s->api_bytes = bytes;
	s->depth = 1;
	write_end(s);
	/* A collective called between brackets: communication (torch.bpf.h). */
	if (s->cm_on && is_collective(kind))
		comm_issued(s, now);
	if (kind == TB_AK_COMM_INIT)
		comm_init_enter(ctx, cookie, s->tid);
	else if (kind == TB_AK_COMM_DESTROY)
		comm_event(TB_EV_NCCL_DESTROY, api, uarg(ctx, 1), NULL);
	return 0;
}

/*
 * Returns come in reverse order of entries, so the return that brings the
 * depth to 0 is the outermost call's, and the cookie is its own. A return
 * whose entry we did not see (attached mid-call) finds depth 0: ignored.
 */
static __always_inline int leave(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), now;
	struct tb_slot *s = task_slot(bpf_get_current_task_btf(), NULL);
	struct tb_api_stat *st;

	if (!s || !s->depth)
		return 0;
	if (s->depth > 1) {
		s->depth--;
		return 0;
	}
	now = bpf_ktime_get_ns();
	write_begin(s);
	catch_up_running(s, bpf_get_current_task_btf(), now);
	close_interval(s, s->region, s->region, now);
	s->depth = 0;
	write_end(s);
	/* ... to its return: the stretch since its entry was the call's. */
	if (s->cm_on && is_collective(TB_COOKIE_KIND(cookie)))
		comm_issued(s, now);
	st = api_stat(s->tgid, s->api);
	if (st)
		__sync_fetch_and_add(&st->ns, now - s->api_ts);
	call_event(s, TB_COOKIE_KIND(cookie), s->api_ts, now);
	if (TB_COOKIE_KIND(cookie) == TB_AK_COMM_INIT)
		comm_init_exit(s->tid, s->api);
	return 0;
}

/* A driver launch made by the CUDA runtime's own code. */
static __always_inline int from_runtime(struct pt_regs *ctx, __u32 tgid)
{
	struct tb_rt_ranges *r = bpf_map_lookup_elem(&rt_ranges, &tgid);
	__u64 ra;

	if (!r)
		return 0;
	ra = return_address(ctx);
	for (int i = 0; i < TB_MAX_RT_RANGES; i++)
		if (ra >= r->lo[i] && ra < r->hi[i])
			return 1;
	return 0;
}

/* Launches: counted at entry, no region (they return at once). */
static __always_inline int launch(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct tb_slot *s = task_slot(bpf_get_current_task_btf(), NULL);
	struct tb_api_stat *st;

	if (!s)
		return 0;
	st = api_stat(s->tgid, TB_COOKIE_API(cookie));
	if (!st)
		return 0;
	if (s->depth || (TB_COOKIE_IL(cookie) && from_runtime(ctx, s->tgid)))
		__sync_fetch_and_add(&st->nested, 1);
	else
		__sync_fetch_and_add(&st->calls, 1);
	return 0;
}

/*
 * Each program twice: attached one function at a time (perf-event uprobes,
 * any kernel), or many at once with one uprobe_multi link (Linux 6.6+;
 * user space sets the attach type), which detaches in one grace period.
 */
SEC("uprobe")
int gpu_enter(struct pt_regs *ctx)
{
	return enter(ctx);
}

SEC("uretprobe")
int gpu_exit(struct pt_regs *ctx)
{
	return leave(ctx);
}

SEC("uprobe")
int gpu_launch(struct pt_regs *ctx)
{
	return launch(ctx);
}

SEC("uprobe")
int gpu_enter_multi(struct pt_regs *ctx)
{
	return enter(ctx);
}

SEC("uprobe")
int gpu_exit_multi(struct pt_regs *ctx)
{
	return leave(ctx);
}

SEC("uprobe")
int gpu_launch_multi(struct pt_regs *ctx)
{
	return launch(ctx);
}
