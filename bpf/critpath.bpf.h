/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Critical-path attribution. When a thread A blocked over [t0, t1) is woken
 * by a traced thread B, A was waiting for whatever B did in that time:
 * B's critical-path counters at t1 minus B's counters at t0. B keeps
 * checkpoints of its counters, exponentially spaced in age (ckpt[i] is
 * roughly 2^i ms old), so the difference is exact back to the checkpoint
 * just after t0 and interpolated over the stretch before it, for waits of
 * a millisecond or of seconds alike. Exact is better still, and common: a
 * thread waits on the same few threads again and again (main <- gloo
 * workers, main <- pin-memory thread), so when it blocks it snapshots the
 * counters of its most recent wakers, and a wake by one of them is
 * split exactly. Because B's counters are B's own critical path, chains
 * (main <- pin-memory thread <- worker) resolve transitively.
 */
#ifndef CRITPATH_BPF_H
#define CRITPATH_BPF_H

/*
 * Called after every interval close: keeps ckpt[i] about 2^i ms old.
 * A global function: the verifier checks it once, not at every call site.
 */
__noinline int ckpt_update(struct tb_slot *s, __u64 now)
{
	if (!s || now - s->ckpt[0].ts < TB_CKPT_BASE_NS)
		return 0;
	for (int i = TB_NCKPT - 1; i > 0; i--)
		if (now - s->ckpt[i].ts >= (TB_CKPT_BASE_NS << i))
			s->ckpt[i] = s->ckpt[i - 1];
	s->ckpt[0].ts = now;
	for (int c = 0; c < TB_NCAT; c++)
		s->ckpt[0].cp[c] = s->cp[c];
	return 0;
}

/* A thread starts with every checkpoint at zero time spent. */
static __always_inline void ckpt_init(struct tb_slot *s, __u64 now)
{
	for (int i = 0; i < TB_NCKPT; i++) {
		s->ckpt[i].ts = now;
		for (int c = 0; c < TB_NCAT; c++)
			s->ckpt[i].cp[c] = 0;
	}
}

/*
 * b's critical-path counter c as of t, its open interval counted as
 * open_cat. One counter at a time, not an array of them: cp_split runs at
 * the end of call chains (gpu_enter -> comm_issued -> cp_split) that the
 * verifier holds to 512 bytes of stack in all, where a program has no
 * private stack (kernels before 6.13, and builds without them).
 */
static __always_inline __u64 cp_now(const struct tb_slot *b, __u32 open_cat, __u64 t, int c)
{
	__u64 v = TB_READ_ONCE(b->cp[c]), since = TB_READ_ONCE(b->since);

	if (c == (open_cat & (TB_NCAT - 1)) && t > since)
		v += t - since;
	return v;
}

/*
 * Adds category c's part of what is left of d (*left) to a->cp: share of
 * total. What rounding leaves goes to the caller's rest category.
 */
static __always_inline void cp_add_part(struct tb_slot *a, int c, __u64 share, __u64 total,
					__u64 *left)
{
	__u64 v = total ? share * *left / total : 0;

	if (v > *left)
		v = *left;
	a->cp[c] += v;
	*left -= v;
}

static __always_inline struct tb_ckpt *ckpt_at(struct tb_slot *s, int i)
{
	__u32 ui = i;

	if (ui >= TB_NCKPT)
		return NULL;
	barrier_var(ui);	/* keep the bound check next to the use */
	return &s->ckpt[ui];
}

/*
 * What b spent in category c over [t0, t1), from its checkpoints ck and
 * cj (cp_split). Read once for the total and once for the split, rather
 * than kept in an array: see cp_now.
 */
static __always_inline __u64 span_share(const struct tb_slot *b, __u32 open_cat, __u64 t1,
					const struct tb_ckpt *ck, const struct tb_ckpt *cj,
					__u64 before_j, __u64 span, int c)
{
	__u64 now_c = cp_now(b, open_cat, t1, c);
	__u64 at_j = cj ? TB_READ_ONCE(cj->cp[c]) : now_c;
	__u64 at_k = TB_READ_ONCE(ck->cp[c]);
	/* exact over [tj, t1), proportional over [t0, tj) */
	__u64 v = now_c > at_j ? now_c - at_j : 0;

	if (before_j && at_j > at_k)
		v += (at_j - at_k) * before_j / span;
	return v;
}

/*
 * Adds [t0, t1) to a->cp, split like b's critical path over that span
 * (b's open interval, since b->since, counted as b_open_cat). Global, like
 * ckpt_update.
 */
__noinline int cp_split(struct tb_slot *a, struct tb_slot *b, __u32 b_open_cat,
			__u64 t0, __u64 t1)
{
	__u64 tj = t1, span, before_j = 0, total = 0, left = t1 - t0;
	struct tb_ckpt *ck, *cj;
	int k;

	if (!a || !b || t1 < t0)
		return 0;
	/* ck: the newest checkpoint at or before t0; cj: the one after it. */
	for (k = 0; k < TB_NCKPT - 1; k++)
		if (b->ckpt[k].ts <= t0)
			break;
	ck = ckpt_at(b, k);
	cj = ckpt_at(b, k - 1);
	if (!ck)
		return 0;
	if (cj)
		tj = cj->ts;
	span = tj > ck->ts ? tj - ck->ts : 0;
	if (span && tj > t0)
		before_j = tj - t0;
	for (int c = 0; c < TB_NCAT; c++)
		total += span_share(b, b_open_cat, t1, ck, cj, before_j, span, c);
	/* b's counters may cover a little more or less time than t1 - t0. */
	for (int c = 0; c < TB_NCAT; c++)
		cp_add_part(a, c, span_share(b, b_open_cat, t1, ck, cj, before_j, span, c),
			    total, &left);
	a->cp[b_open_cat & (TB_NCAT - 1)] += left;
	return 0;
}

/* What b spent in category c since a's snapshot r of it (cp_split_recent). */
static __always_inline __u64 recent_share(const struct tb_slot *b, __u32 open_cat, __u64 t1,
					  const struct tb_waker_snap *r, int c)
{
	__u64 now_c = cp_now(b, open_cat, t1, c);

	return now_c > r->cp[c] ? now_c - r->cp[c] : 0;
}

/*
 * The exact split, when b (a's waker, a->wk_slot) is one of a's recent
 * wakers: b's counters now minus b's counters when a blocked. Returns 1
 * if it applied.
 */
__noinline int cp_split_recent(struct tb_slot *a, struct tb_slot *b,
			       __u32 b_open_cat, __u64 t0, __u64 t1)
{
	__u64 total = 0, left = t1 - t0;
	struct tb_waker_snap *r = NULL;

	if (!a || !b || t1 < t0)
		return 0;
	for (int i = 0; i < TB_NRECENT; i++)
		if (a->recent[i].tid && a->recent[i].slot == a->wk_slot &&
		    a->recent[i].tid == b->tid)
			r = &a->recent[i];
	if (!r)
		return 0;
	for (int c = 0; c < TB_NCAT; c++)
		total += recent_share(b, b_open_cat, t1, r, c);
	for (int c = 0; c < TB_NCAT; c++)
		cp_add_part(a, c, recent_share(b, b_open_cat, t1, r, c), total, &left);
	a->cp[b_open_cat & (TB_NCAT - 1)] += left;
	return 1;
}

/* a's newest waker goes first in its recent list. */
__noinline int recent_note(struct tb_slot *a, __u32 b_slot, __u32 b_tid)
{
	if (!a)
		return 0;
	int i, at = TB_NRECENT - 1;

	/* Move b to the front, or drop the oldest to make room. */
	for (i = 0; i < TB_NRECENT; i++)
		if (a->recent[i].tid == b_tid && a->recent[i].slot == b_slot) {
			at = i;
			break;
		}
	for (i = TB_NRECENT - 1; i > 0; i--)
		if (i <= at)
			a->recent[i] = a->recent[i - 1];
	a->recent[0].slot = b_slot;
	a->recent[0].tid = b_tid;
	return 0;
}

#endif /* CRITPATH_BPF_H */
