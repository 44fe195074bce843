/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Critical-path attribution. When a thread A blocked over [t0, t1) is woken
 * by a traced thread B, A was waiting for whatever B did in that time. B's
 * recent intervals (its history ring, newest last, contiguous up to B's
 * open interval) split A's wait into B's categories; time older than B's
 * history goes to B's dominant category. Because B's history holds B's own
 * critical-path categories, chains (main <- pin-memory thread <- worker)
 * resolve transitively.
 */
#ifndef CRITPATH_BPF_H
#define CRITPATH_BPF_H

static __always_inline void hist_push(struct tb_slot *s, __u64 start, __u32 cat)
{
	__u32 h = s->hist_head & (TB_HIST - 1);

	/* Same category as the newest entry: that entry just lasts longer. */
	if (s->hist[h].start && s->hist[h].cat == cat)
		return;
	h = (h + 1) & (TB_HIST - 1);
	s->hist[h].start = start;
	s->hist[h].cat = cat;
	s->hist_head = h;
}

static __always_inline __u32 dominant_cat(struct tb_slot *s)
{
	__u32 best = TB_CPU;
	__u64 most = 0;

	for (__u32 c = 0; c < TB_NCAT; c++) {
		if (s->cp[c] > most) {
			most = s->cp[c];
			best = c;
		}
	}
	return best;
}

struct split_acc {
	__u64 most;
	__u32 best;
};

static __always_inline void credit(struct tb_slot *a, struct split_acc *acc,
				   __u32 cat, __u64 d)
{
	a->cp[cat & (TB_NCAT - 1)] += d;
	if (d > acc->most) {
		acc->most = d;
		acc->best = cat;
	}
}

/*
 * Adds [t0, t1) to a->cp split by b's recent categories; returns the
 * category that got the largest share (A's history keeps one per interval).
 */
static __always_inline __u32 cp_split(struct tb_slot *a, struct tb_slot *b,
				      __u32 b_open_cat, __u64 t0, __u64 t1)
{
	struct split_acc acc = { .most = 0, .best = TB_LOCK };
	__u64 end = t1, seg;
	__u32 h = b->hist_head;

	seg = b->since > t0 ? b->since : t0;
	if (seg < end) {
		credit(a, &acc, b_open_cat, end - seg);
		end = seg;
	}
	for (int i = 0; i < TB_HIST; i++) {
		struct tb_hist *e = &b->hist[(h - i) & (TB_HIST - 1)];
		__u64 start = e->start;

		if (end <= t0 || !start)
			break;
		seg = start > t0 ? start : t0;
		if (seg < end) {
			credit(a, &acc, e->cat, end - seg);
			end = seg;
		}
	}
	if (end > t0)
		credit(a, &acc, dominant_cat(b), end - t0);
	return acc.best;
}

#endif /* CRITPATH_BPF_H */
