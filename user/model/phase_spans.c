// SPDX-License-Identifier: BSD-3-Clause
#include <string.h>
#include "phase_spans.h"

const char *const ph_names[PH_NSHOWN] = {
	"data", "forward", "backward", "optimizer", "checkpoint", "validation", "communication",
	"other", "setup", "teardown",
};

const int ph_order[PH_NSHOWN] = {
	PH_SETUP, PH_DATA, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_CHECKPOINT, PH_VALIDATION,
	PH_COMM, PH_OTHER, PH_TEARDOWN,
};

const char *const ph_short[PH_NSHOWN] = {
	"data", "fwd", "bwd", "opt", "ckpt", "val", "comm", "other", "setup", "teardown",
};

const char *const tb_phase_names[TB_NPHASE] = {
	"other", "data", "forward", "backward", "optimizer", "checkpoint", "validation",
	"pend_data", "pend_fwd", "pend_lone", "worker_startup", "pend_start", "pend_startup",
	"communication", "pend_comm",
};

int ph_shown_of(unsigned int tb_phase)
{
	static const int shown[TB_NPHASE] = {
		[TB_PH_OTHER] = PH_OTHER, [TB_PH_DATA] = PH_DATA,
		[TB_PH_FORWARD] = PH_FORWARD, [TB_PH_BACKWARD] = PH_BACKWARD,
		[TB_PH_OPTIMIZER] = PH_OPTIMIZER, [TB_PH_CHECKPOINT] = PH_CHECKPOINT,
		[TB_PH_VALIDATION] = PH_VALIDATION, [TB_PH_PEND_DATA] = PH_DATA,
		[TB_PH_PEND_FWD] = PH_FORWARD, [TB_PH_PEND_LONE] = PH_OTHER,
		[TB_PH_WSTART] = PH_DATA, [TB_PH_PEND_START] = PH_OTHER,
		[TB_PH_PEND_SHELD] = PH_DATA,
		/* The stretch after a communication wait: most are between two. */
		[TB_PH_COMM] = PH_COMM, [TB_PH_PEND_COMM] = PH_COMM,
	};

	return tb_phase < TB_NPHASE ? shown[tb_phase] : PH_OTHER;
}

static int pend_kind(unsigned int tb_phase)
{
	return tb_phase == TB_PH_PEND_DATA ? PH_PEND_DATA :
	       tb_phase == TB_PH_PEND_FWD ? PH_PEND_FWD :
	       tb_phase == TB_PH_PEND_START ? PH_PEND_START :
	       tb_phase == TB_PH_PEND_SHELD ? PH_PEND_SHELD : PH_PEND_HELD;
}

bool ph_is_pending(unsigned int tb_phase)
{
	return tb_phase == TB_PH_PEND_DATA || tb_phase == TB_PH_PEND_FWD ||
	       tb_phase == TB_PH_PEND_LONE || tb_phase == TB_PH_PEND_START ||
	       tb_phase == TB_PH_PEND_SHELD;
}

/*
 * What a step's resolution takes (kind -1): every pending kind but a
 * start-up under way, which is the next step's (BPF's resolve_step).
 */
static bool of_kind(int kind, int of)
{
	return of < 0 ? kind != PH_PEND_START : kind == of;
}

static void emit(uint64_t start, uint64_t end, int phase, bool startup, ph_span_fn fn,
		 void *arg)
{
	struct ph_span sp = { start, end, phase, startup && phase == PH_DATA };

	if (end > start)
		fn(arg, &sp);
}

/* Pending span i goes out as phase (-1: as it folds); the list closes up. */
static void settle(struct ph_spans *s, int i, int phase, ph_span_fn fn, void *arg)
{
	unsigned int from = s->pend[i].phase;

	s->pend_ns[pend_kind(from)] -= s->pend[i].end - s->pend[i].start;
	emit(s->pend[i].start, s->pend[i].end, phase >= 0 ? phase : ph_shown_of(from),
	     from == TB_PH_PEND_SHELD, fn, arg);
	memmove(&s->pend[i], &s->pend[i + 1], (s->npend - i - 1) * sizeof(s->pend[0]));
	s->npend--;
}

/* Every pending span of kind `of` (-1: any a step settles) settles as phase. */
static void settle_all(struct ph_spans *s, int of, int phase, ph_span_fn fn, void *arg)
{
	for (int i = 0; i < s->npend;)
		if (of_kind(pend_kind(s->pend[i].phase), of))
			settle(s, i, phase, fn, arg);
		else
			i++;
}

static void hold(struct ph_spans *s, uint64_t start, uint64_t end, unsigned int phase,
		 ph_span_fn fn, void *arg)
{
	if (end <= start)
		return;
	if (s->npend == PH_MAX_PENDING)
		settle(s, 0, -1, fn, arg);	/* a step this long: the oldest goes as folded */
	s->pend[s->npend].start = start;
	s->pend[s->npend].end = end;
	s->pend[s->npend++].phase = phase;
	s->pend_ns[pend_kind(phase)] += end - start;
}

/* Every pending span of kind `of` is pending as `phase` (a TB_PH_PEND_*) now. */
static void relabel(struct ph_spans *s, int of, unsigned int phase)
{
	for (int i = 0; i < s->npend; i++) {
		uint64_t d = s->pend[i].end - s->pend[i].start;

		if (!of_kind(pend_kind(s->pend[i].phase), of))
			continue;
		s->pend_ns[pend_kind(s->pend[i].phase)] -= d;
		s->pend[i].phase = phase;
		s->pend_ns[pend_kind(phase)] += d;
	}
}

/* As bpf/torch.bpf.h's resolve_step (and feed_wait) did, told by the event. */
static void resolve(struct ph_spans *s, unsigned int resolved, ph_span_fn fn, void *arg)
{
	unsigned int how = resolved & TB_RS_HOW;

	if (resolved & TB_RS_FED)
		relabel(s, PH_PEND_FWD, TB_PH_PEND_DATA);
	/* A start-up that was no worker's: the phase it interrupted. */
	if (resolved & TB_RS_START_UNDO) {
		if (ph_is_pending(s->start_from))
			relabel(s, PH_PEND_START, s->start_from);
		else
			settle_all(s, PH_PEND_START, ph_shown_of(s->start_from), fn, arg);
	}

	if (resolved & TB_RS_HELD_OTHER)
		settle_all(s, PH_PEND_HELD, PH_OTHER, fn, arg);
	if (how == TB_RS_TRAINED || how == TB_RS_VALIDATION)
		s->in_val = how == TB_RS_VALIDATION;
	if (how == TB_RS_TRAINED) {
		/* The first batch after a start-up: the start-up's end. */
		if (s->st_held)
			relabel(s, PH_PEND_DATA, TB_PH_PEND_SHELD);
		settle_all(s, PH_PEND_DATA, PH_DATA, fn, arg);
		settle_all(s, PH_PEND_FWD, PH_FORWARD, fn, arg);
		settle_all(s, PH_PEND_SHELD, PH_DATA, fn, arg);
	} else if (how == TB_RS_VALIDATION) {
		settle_all(s, -1, PH_VALIDATION, fn, arg);
	} else if (how == TB_RS_LONE) {
		if (resolved & TB_RS_END_DATA)
			settle_all(s, PH_PEND_DATA, PH_DATA, fn, arg);
		/* A pass's first fetch (it ended a start-up): pending with the next. */
		relabel(s, s->st_held ? PH_PEND_FWD : -1, TB_PH_PEND_LONE);
	}
	if (resolved & (TB_RS_HOW | TB_RS_HELD_OTHER | TB_RS_END_DATA))
		s->st_held = false;	/* a step resolved (BPF's resolve_step) */
	/* The fetch that ended a start-up: held with this fetch's step. */
	if (resolved & TB_RS_START_HELD) {
		relabel(s, PH_PEND_START, TB_PH_PEND_SHELD);
		s->st_held = true;
	}
}

void ph_spans_event(struct ph_spans *s, const struct tb_phase_event *e, ph_span_fn fn,
		    void *arg)
{
	if (s->since && e->ts > s->since) {
		if (ph_is_pending(s->phase))
			hold(s, s->since, e->ts, s->phase, fn, arg);
		else
			emit(s->since, e->ts, ph_shown_of(s->phase), s->phase == TB_PH_WSTART, fn,
			     arg);
	}
	if (e->phase == TB_PH_PEND_START && s->phase != TB_PH_PEND_START)
		s->start_from = s->since ? s->phase : TB_PH_OTHER;
	resolve(s, e->resolved, fn, arg);
	/*
	 * Only a fetch's bracket puts a thread in PEND_DATA (bpf/torch.bpf.h;
	 * a bracket inside one returns to it): no need of the class, which a
	 * recording's phase_events do not keep (the trace replays them).
	 */
	if (e->phase == TB_PH_PEND_DATA)
		s->fetcher = true;
	s->phase = e->phase;
	s->since = e->ts > s->since ? e->ts : s->since;
}

void ph_spans_unfetched_end(struct ph_spans *s, ph_span_fn fn, void *arg)
{
	if (!s->fetcher)
		settle_all(s, -1, PH_TEARDOWN, fn, arg);
}

void ph_spans_end(struct ph_spans *s, uint64_t end, ph_span_fn fn, void *arg)
{
	int open = s->in_val && ph_is_pending(s->phase) ? PH_VALIDATION : ph_shown_of(s->phase);

	if (s->phase == TB_PH_PEND_START)
		open = PH_OTHER;	/* a start-up no fetch ended */
	else if (!s->fetcher && ph_is_pending(s->phase))
		open = PH_TEARDOWN;
	ph_spans_unfetched_end(s, fn, arg);

	if (s->since && end > s->since)
		emit(s->since, end, open, s->phase == TB_PH_PEND_SHELD, fn, arg);
	s->since = end > s->since ? end : s->since;
	settle_all(s, PH_PEND_START, PH_OTHER, fn, arg);
	settle_all(s, -1, s->in_val ? PH_VALIDATION : -1, fn, arg);
}
