// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <limits.h>
#include "passes.h"

/*
 * Of a thread's fetches, the one back fetches before the next (1: the
 * last); the oldest kept when back reaches past them.
 */
static const struct pass_fetch *fetch_back(const struct pass_thread *t, int back)
{
	if (back > PASS_RING)
		back = PASS_RING;
	if (back > t->nfetch)
		back = t->nfetch;
	return &t->last[(t->nfetch - back) % PASS_RING];
}

/*
 * Where the pass a training step begins begins, the step having taken n
 * fetches: its first, k back for a loop that takes k a step (a zip). The
 * thread's first step (k unknown) begins the first pass at the thread's
 * first fetch (a zip's first loader's); attached, at the step's last.
 */
static uint64_t pass_from(const struct pass_thread *t, bool attached, int k, int n)
{
	if (k)
		return fetch_back(t, k)->from;
	return attached ? t->from : fetch_back(t, n)->from;
}

/*
 * Whether a training step that took n fetches begins a pass. The thread's
 * first does when it was traced from its start. Then a pass begins where
 * the training loader ran out and started over: the step took more
 * fetches than any training step of the thread seen whole (kmin; a step
 * of a zip of two loaders takes two, and one of them is lone at the next,
 * every step), and since the last training step either a pass ran to its
 * end (a lone fetch right after a training step: StopIteration), or
 * validation ran and the step's first fetch ended a worker start-up (a
 * new iter() after a loop that broke out of its pass). Not a validation
 * loop alone: its first fetch ended its workers' start-up, so BPF does not
 * take it for a pass's end (bpf/torch.bpf.h); the training loader's
 * iterator carries on after it, starting nothing.
 */
static bool begins_pass(const struct pass_thread *t, bool attached, int n)
{
	int k = t->kmin;

	/* Attached, the first step seen: after a validation loop, a pass's first. */
	if (!t->trained)
		return !attached || t->val;
	if (!k || n <= k)
		return false;
	return t->ended || (t->val && fetch_back(t, k)->held);
}

/* A fetch: where a pass it would begin begins, and what it tells of the last. */
static void on_fetch(struct pass_thread *t, const struct tb_phase_event *e)
{
	unsigned int how = e->resolved & TB_RS_HOW;
	bool held = t->in_start && (e->resolved & TB_RS_START_HELD);

	t->ended |= how == TB_RS_LONE && (e->resolved & TB_RS_END_DATA);
	t->val |= how == TB_RS_VALIDATION;
	t->fetch = e->ts;
	t->from = held ? t->start : e->ts;
	t->last[t->nfetch++ % PASS_RING] = (struct pass_fetch){ t->from, held };
	if (t->since < INT_MAX)
		t->since++;
	t->in_start = false;
}

bool pass_on_phase(struct pass_thread *t, bool attached, const struct tb_phase_event *e,
		   struct pass_step *out)
{
	int n;

	if (e->phase == TB_PH_PEND_START) {
		if (!t->in_start || (e->resolved & TB_RS_START_UNDO))
			t->start = e->ts;	/* begun, or begun again after a helper */
		t->in_start = true;
		return false;
	}
	if (e->cls == TB_BC_DATA && e->phase == TB_PH_PEND_DATA) {
		on_fetch(t, e);
		return false;
	}
	t->in_start = false;
	if (e->cls != TB_BC_BACKWARD || e->phase != TB_PH_BACKWARD ||
	    (e->resolved & TB_RS_HOW) != TB_RS_TRAINED || !t->fetch)
		return false;
	n = t->since;
	*out = (struct pass_step){ .trained = true, .first = !t->trained };
	out->begins = begins_pass(t, attached, n);
	/* Attached, the first step's fetches may have begun before it. */
	if ((t->trained || !attached) && (!t->kmin || n < t->kmin))
		t->kmin = n;
	if (out->begins)
		out->from = pass_from(t, attached, t->trained ? t->kmin : 0, n);
	t->since = 0;
	t->ended = t->val = false;
	t->trained = true;
	return true;
}
