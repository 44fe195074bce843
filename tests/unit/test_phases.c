// SPDX-License-Identifier: BSD-3-Clause
/*
 * Phases without BPF: event sequences as bpf/torch.bpf.h sends them for
 * training steps, a validation pass, the fetch that ends an epoch and a
 * queue-fed loop, turned into spans (phase_spans.c) and into the table's
 * wall times and steps (phases.c).
 */
#include <check.h>
#include <string.h>
#include "categories.h"
#include "job.h"
#include "phases.h"

#define MS 1000000ull
/* Times in the tests are ms after BASE: a clock never reads 0. */
#define BASE 1000ull
#define AT(ms) (((ms) + BASE) * MS)

struct got {
	struct ph_span s[64];
	int n;
};

static void collect(void *arg, const struct ph_span *sp)
{
	struct got *g = arg;

	ck_assert_int_lt(g->n, 64);
	g->s[g->n++] = *sp;
}

static struct tb_phase_event ev(uint64_t ms, unsigned int phase, unsigned int cls,
				unsigned int resolved)
{
	return (struct tb_phase_event){ .type = TB_EV_PHASE, .pid = 7, .tid = 7,
					.phase = phase, .cls = cls, .resolved = resolved,
					.ts = AT(ms) };
}

/* Time of phase in the spans, in ms; and that they tile [from, to) in ms. */
static uint64_t phase_ms(const struct got *g, int phase)
{
	uint64_t ns = 0;

	for (int i = 0; i < g->n; i++)
		if (g->s[i].phase == phase)
			ns += g->s[i].end - g->s[i].start;
	return ns / MS;
}

static void tiles(const struct got *g, uint64_t from, uint64_t to)
{
	uint64_t ns = 0;

	for (int i = 0; i < g->n; i++) {
		ck_assert_uint_ge(g->s[i].start, AT(from));
		ck_assert_uint_le(g->s[i].end, AT(to));
		ns += g->s[i].end - g->s[i].start;
	}
	ck_assert_uint_eq(ns, (to - from) * MS);
}

/* A training step at t (ms): fetch 2, forward 3, backward 4, optimizer 1. */
static void step(struct ph_spans *s, struct got *g, uint64_t t, unsigned int first)
{
	struct tb_phase_event e[] = {
		ev(t, TB_PH_PEND_DATA, TB_BC_DATA, first),
		ev(t + 2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(t + 5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(t + 9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		ev(t + 9, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(t + 10, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE),
	};

	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(s, &e[i], collect, g);
}

START_TEST(training_steps)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };

	step(&s, &g, 0, TB_RS_NONE);
	step(&s, &g, 10, TB_RS_NONE);
	ph_spans_end(&s, AT(20), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 4);
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 6);
	ck_assert_uint_eq(phase_ms(&g, PH_BACKWARD), 8);
	ck_assert_uint_eq(phase_ms(&g, PH_OPTIMIZER), 2);
	ck_assert_uint_eq(phase_ms(&g, PH_OTHER), 0);
	tiles(&g, 0, 20);
	ck_assert_int_eq(s.npend, 0);
}
END_TEST

/*
 * A pass with no backward: the first fetch holds the step before, the
 * second makes both validation, and so on until a training step, whose
 * fetch settles the last validation batch. BPF says how at each fetch.
 */
START_TEST(validation_pass)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),	/* val 1 */
		ev(11, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(15, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_LONE),	/* val 2: 1 held */
		ev(16, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(20, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_VALIDATION),	/* val 3 */
		ev(21, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
	};

	step(&s, &g, 0, TB_RS_NONE);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 2);
	for (size_t i = 0; i < 4; i++)
		ph_spans_event(&s, &e[i], collect, &g);
	/* Batch 1 is held: nothing of it out yet. */
	ck_assert_uint_eq(phase_ms(&g, PH_VALIDATION), 0);
	ck_assert_uint_eq(s.pend_ns[PH_PEND_HELD], 5 * MS);
	ph_spans_event(&s, &e[4], collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_VALIDATION), 10);
	ph_spans_event(&s, &e[5], collect, &g);
	step(&s, &g, 25, TB_RS_VALIDATION);	/* the pass ends: batch 3 was validation */
	ph_spans_end(&s, AT(35), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_VALIDATION), 15);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 4);
	tiles(&g, 0, 35);
}
END_TEST

/*
 * A job that ends in a validation pass: its last batch and end are
 * validation. recorded: the stream as a recording keeps it (phase_events:
 * no bracket class), as the trace replays it: a thread that fetched is
 * told by its PEND_DATA, so what is pending at its end is still the
 * pass's, not a thread without a DataLoader's teardown.
 */
static void ends_in_validation(bool recorded)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(0, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),		/* a training step */
		ev(2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		ev(9, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(10, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE),
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),	/* val 1 */
		ev(11, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(15, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_LONE),	/* val 2 */
		ev(16, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(20, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_VALIDATION),	/* the pass's end */
		ev(23, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
	};

	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
		if (recorded)
			e[i].cls = TB_BC_NONE;
		ph_spans_event(&s, &e[i], collect, &g);
	}
	ck_assert(s.in_val);
	ck_assert(s.fetcher);
	ph_spans_end(&s, AT(30), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_VALIDATION), 20);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 2);
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 3);
	ck_assert_uint_eq(phase_ms(&g, PH_TEARDOWN), 0);
	tiles(&g, 0, 30);
	ck_assert_int_eq(s.npend, 0);
}

START_TEST(pending_after_validation)
{
	ends_in_validation(false);
}
END_TEST

START_TEST(recorded_events_have_no_class)
{
	ends_in_validation(true);
}
END_TEST

/*
 * The fetch that ends an epoch, right after a training step: its fetch is
 * data at once (BPF says END_DATA), what follows it held, then other when
 * a training step comes.
 */
START_TEST(epoch_end_fetch)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),	/* StopIteration */
		ev(11, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(13, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_LONE | TB_RS_END_DATA),	/* next epoch */
		ev(15, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(18, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED | TB_RS_HELD_OTHER),
		ev(20, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
	};

	step(&s, &g, 0, TB_RS_NONE);
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ph_spans_end(&s, AT(20), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_OTHER), 2);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 5);
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 6);
	ck_assert_uint_eq(phase_ms(&g, PH_VALIDATION), 0);
	tiles(&g, 0, 20);
}
END_TEST

/* The time of startup spans, in ms. */
static uint64_t startup_ms(const struct got *g)
{
	uint64_t ns = 0;

	for (int i = 0; i < g->n; i++)
		if (g->s[i].startup) {
			ck_assert_int_eq(g->s[i].phase, PH_DATA);
			ns += g->s[i].end - g->s[i].start;
		}
	return ns / MS;
}

/*
 * The next epoch's iter(loader) forks its workers (BPF: PEND_START from
 * the fork), then the first fetch waits for their batch: from the fork on
 * it is the next step's, held with it (START_HELD), and data, of which
 * worker start-up (the fork to the first batch: that fetch too), when its
 * backward comes. The time from the pass's end
 * to the fork stays other.
 */
START_TEST(worker_startup_is_data)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),	/* StopIteration */
		ev(11, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(12, TB_PH_PEND_START, TB_BC_NONE, TB_RS_NONE),	/* iter(): a fork */
		ev(40, TB_PH_PEND_DATA, TB_BC_DATA,
		   TB_RS_LONE | TB_RS_END_DATA | TB_RS_START_HELD),	/* the first fetch */
		ev(45, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(48, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED | TB_RS_HELD_OTHER),
		ev(50, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
	};

	step(&s, &g, 0, TB_RS_NONE);
	for (size_t i = 0; i < 4; i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ck_assert_uint_eq(s.pend_ns[PH_PEND_SHELD], 28 * MS);	/* held with its step */
	ck_assert_uint_eq(s.pend_ns[PH_PEND_HELD], 1 * MS);	/* the pass's tail */
	for (size_t i = 4; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ph_spans_end(&s, AT(50), collect, &g);
	ck_assert_uint_eq(startup_ms(&g), 28 + 5);	/* the fork to the first batch */
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 2 + 1 + 28 + 5);
	ck_assert_uint_eq(phase_ms(&g, PH_OTHER), 1);	/* 11-12: the pass's tail */
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 3 + 3);
	tiles(&g, 0, 50);
	ck_assert_int_eq(s.npend, 0);
}
END_TEST

/*
 * A validation loader's workers start up before its first batch: held
 * with that batch, validation when the pass tells. And a start-up that
 * was a helper's (it exited before the fetch: START_UNDO) goes back to
 * the phase it interrupted: pending forward of the step before, or other.
 */
START_TEST(startup_follows_its_step)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),	/* StopIteration */
		ev(11, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(12, TB_PH_PEND_START, TB_BC_NONE, TB_RS_NONE),	/* iter(val_loader) */
		ev(20, TB_PH_PEND_DATA, TB_BC_DATA,
		   TB_RS_LONE | TB_RS_END_DATA | TB_RS_START_HELD),	/* val 1 */
		ev(21, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(25, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_VALIDATION),	/* val 2 */
		ev(26, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(27, TB_PH_PEND_START, TB_BC_NONE, TB_RS_NONE),	/* a `git`, waited for */
		ev(29, TB_PH_PEND_START, TB_BC_NONE, TB_RS_START_UNDO),	/* and another */
		ev(30, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_VALIDATION | TB_RS_START_UNDO),
		ev(31, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
	};

	step(&s, &g, 0, TB_RS_NONE);
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ck_assert_uint_eq(s.pend_ns[PH_PEND_START] + s.pend_ns[PH_PEND_SHELD], 0);
	ck_assert_uint_eq(phase_ms(&g, PH_VALIDATION), 1 + 8 + 5 + 5);	/* 11-30 */
	ck_assert_uint_eq(startup_ms(&g), 0);
	ph_spans_end(&s, AT(35), collect, &g);
	tiles(&g, 0, 35);
	ck_assert_int_eq(s.npend, 0);
}
END_TEST

/* Before any bracket: a helper's fork and its undo leave the setup other. */
START_TEST(startup_undone_in_setup)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(5, TB_PH_PEND_START, TB_BC_NONE, TB_RS_NONE),	/* git rev-parse */
		ev(9, TB_PH_PEND_START, TB_BC_NONE, TB_RS_START_UNDO),	/* iter(): workers */
		ev(20, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_START_HELD),
		ev(22, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(25, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(27, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
	};

	struct tb_phase_event first = ev(0, TB_PH_OTHER, TB_BC_NONE, TB_RS_NONE);

	ph_spans_event(&s, &first, collect, &g);	/* the thread's time from 0 */
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ph_spans_end(&s, AT(27), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_OTHER), 9);
	ck_assert_uint_eq(startup_ms(&g), 11 + 2);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 13);
	tiles(&g, 0, 27);
}
END_TEST

/* A step still pending at the end folds: fetch as data, the rest as forward. */
START_TEST(pending_at_the_end)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(0, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
		ev(3, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
	};

	for (size_t i = 0; i < 2; i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ck_assert_uint_eq(s.pend_ns[PH_PEND_DATA], 3 * MS);
	ph_spans_end(&s, AT(10), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 3);
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 7);
	ck_assert_int_eq(s.npend, 0);
	ck_assert_uint_eq(s.pend_ns[PH_PEND_DATA] + s.pend_ns[PH_PEND_FWD], 0);
}
END_TEST

/*
 * No DataLoader (a queue): from a backward's end the next step's input and
 * forward are pending; a wait for input (TB_RS_FED) makes what is pending
 * so far data, the next backward the rest forward. At the end, what met no
 * backward is the teardown, not a step's data and forward: the loop's end
 * and the interpreter's exit (its waits send "fed" events too).
 */
START_TEST(queue_fed_steps)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(0, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(4, TB_PH_PEND_FWD, TB_BC_BACKWARD, TB_RS_NONE),
		ev(4, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(5, TB_PH_PEND_FWD, TB_BC_OPTIM, TB_RS_NONE),
		ev(9, TB_PH_PEND_FWD, TB_BC_NONE, TB_RS_FED),	/* 5-9 in get() */
		ev(12, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(16, TB_PH_PEND_FWD, TB_BC_BACKWARD, TB_RS_NONE),
		ev(18, TB_PH_PEND_FWD, TB_BC_NONE, TB_RS_FED),
	};

	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 4);
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 3);
	ck_assert_uint_eq(phase_ms(&g, PH_BACKWARD), 8);
	ck_assert_uint_eq(phase_ms(&g, PH_OPTIMIZER), 1);
	ck_assert_uint_eq(s.pend_ns[PH_PEND_DATA], 2 * MS);	/* 16-18, no backward yet */
	ph_spans_end(&s, AT(20), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 4);
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 3);
	ck_assert_uint_eq(phase_ms(&g, PH_OTHER), 0);
	ck_assert_uint_eq(phase_ms(&g, PH_TEARDOWN), 4);	/* 16-20: met no backward */
	tiles(&g, 0, 20);
}
END_TEST

/*
 * A checkpoint is the whole act (bpf/ckpt_files.bpf.h): after torch.save,
 * the fsync, close and rename of the files it wrote come as TB_BC_SAVE_IO
 * brackets, checkpoint for the syscall and back after. Between steps
 * (other), and in a queue-fed loop's pending forward, which the next
 * backward settles around them.
 */
START_TEST(checkpoint_syscalls)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(10, TB_PH_CHECKPOINT, TB_BC_SAVE, TB_RS_NONE),	/* torch.save */
		ev(15, TB_PH_OTHER, TB_BC_SAVE, TB_RS_NONE),
		ev(15, TB_PH_CHECKPOINT, TB_BC_SAVE_IO, TB_RS_NONE),	/* fsync */
		ev(23, TB_PH_OTHER, TB_BC_SAVE_IO, TB_RS_NONE),
		ev(23, TB_PH_CHECKPOINT, TB_BC_SAVE_IO, TB_RS_NONE),	/* close */
		ev(24, TB_PH_OTHER, TB_BC_SAVE_IO, TB_RS_NONE),
	};

	step(&s, &g, 0, TB_RS_NONE);
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(&s, &e[i], collect, &g);
	step(&s, &g, 25, TB_RS_NONE);
	ph_spans_end(&s, AT(35), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_CHECKPOINT), 5 + 8 + 1);
	ck_assert_uint_eq(phase_ms(&g, PH_OTHER), 1);	/* 24-25 */
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 4);
	tiles(&g, 0, 35);
}
END_TEST

/*
 * Communication outside any phase (bpf/torch.bpf.h, comm_wait): gradients
 * averaged by hand after the backward, as BPF sends it: communication
 * from the first collective's hand-off or wait (10), the collectives and
 * the CPU between them silent (pending in BPF's rows), then, at the
 * optimizer's bracket (13), other dated back to the last wait's end (12).
 * A barrier after the optimizer is communication to the next fetch's
 * bracket, which dates other back to its end too (15: no gap).
 */
static void comm_step(struct ph_spans *s, struct got *g, uint64_t t, unsigned int first)
{
	struct tb_phase_event e[] = {
		ev(t, TB_PH_PEND_DATA, TB_BC_DATA, first),
		ev(t + 2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(t + 5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(t + 9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		ev(t + 10, TB_PH_COMM, TB_BC_NONE, TB_RS_NONE),
		ev(t + 12, TB_PH_OTHER, TB_BC_NONE, TB_RS_NONE),
		ev(t + 13, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(t + 14, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE),
		ev(t + 14, TB_PH_COMM, TB_BC_NONE, TB_RS_NONE),
		ev(t + 16, TB_PH_OTHER, TB_BC_NONE, TB_RS_NONE),
	};

	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(s, &e[i], collect, g);
}

START_TEST(communication_spans)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };

	comm_step(&s, &g, 0, TB_RS_NONE);
	comm_step(&s, &g, 16, TB_RS_NONE);
	ph_spans_end(&s, AT(32), collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_COMM), 2 * (2 + 2));
	ck_assert_uint_eq(phase_ms(&g, PH_OTHER), 2 * (1 + 1));
	ck_assert_uint_eq(phase_ms(&g, PH_BACKWARD), 8);
	ck_assert_uint_eq(phase_ms(&g, PH_OPTIMIZER), 2);
	ck_assert_uint_eq(phase_ms(&g, PH_DATA), 4);
	tiles(&g, 0, 32);
	ck_assert_int_eq(s.npend, 0);
	/* Never pending: the pending tail is BPF's; user space sees dated events. */
	ck_assert(!ph_is_pending(TB_PH_COMM) && !ph_is_pending(TB_PH_PEND_COMM));
	ck_assert_int_eq(ph_shown_of(TB_PH_COMM), PH_COMM);
	ck_assert_int_eq(ph_shown_of(TB_PH_PEND_COMM), PH_COMM);
	ck_assert_str_eq(ph_names[PH_COMM], "communication");
	ck_assert_str_eq(ph_short[PH_COMM], "comm");
	ck_assert_str_eq(tb_phase_names[TB_PH_COMM], "communication");
}
END_TEST

/* Its steps: communication is in the step it follows, MIN/MAX/STD too. */
START_TEST(communication_in_steps)
{
	struct phases p = { 0 };
	struct ph_sum sum = { 0 };
	struct tb_phase_event e = ev(32, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);

	for (uint64_t t = 0; t < 32; t += 16) {
		struct tb_phase_event s[] = {
			ev(t, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
			ev(t + 2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
			ev(t + 5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
			ev(t + 9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
			ev(t + 10, TB_PH_COMM, TB_BC_NONE, TB_RS_NONE),
			ev(t + (t ? 15 : 12), TB_PH_OTHER, TB_BC_NONE, TB_RS_NONE),
			ev(t + 15, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
			ev(t + 16, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE),
		};

		for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
			phases_on_event(&p, &s[i]);
	}
	phases_on_event(&p, &e);
	phases_thread_sum(phases_thread(&p, 7), &sum);
	ck_assert_int_eq(sum.steps.steps, 2);
	ck_assert_double_eq_tol(sum.steps.min_ms[PH_COMM], 2.0, 1e-9);
	ck_assert_double_eq_tol(sum.steps.max_ms[PH_COMM], 5.0, 1e-9);
	ck_assert_double_eq_tol(ph_stat_avg(&sum.steps, PH_COMM), 3.5, 1e-9);
	ck_assert_double_eq_tol(sum.wall_ms[PH_COMM], 7.0, 1e-9);
	/* 9-10 and 12-15 of the first step, 25-26 of the second */
	ck_assert_double_eq_tol(sum.wall_ms[PH_OTHER], 1.0 + 3.0 + 1.0, 1e-9);
	phases_free(&p);
}
END_TEST

/*
 * A thread that ends in communication (a barrier after its last step):
 * the time after its last event is the teardown's, other, in its rows as
 * in its wall time; so is BPF's pending row after the last wait.
 */
START_TEST(communication_at_the_end)
{
	struct phases p = { 0 };
	struct job job = { 0 };
	struct proc_rec *pr;
	struct thread_rec *t;
	/* The first event carries OTHER's row (its setup), the next its phase's. */
	struct tb_phase_event e0 = ev(1, TB_PH_OTHER, TB_BC_NONE, TB_RS_NONE);
	struct tb_phase_event e = ev(10, TB_PH_COMM, TB_BC_NONE, TB_RS_NONE);

	e0.row[TB_CPU] = 1 * MS;
	e.row[TB_COMM] = 5 * MS;	/* communication's row at the event */
	pr = job_add_proc(&job, 7, 1, "python3", AT(0));
	ck_assert_ptr_nonnull(pr);
	t = job_add_thread(pr, 7, "python3", AT(0));
	ck_assert_ptr_nonnull(t);
	t->ph[TB_PH_COMM][TB_COMM] = 8 * MS;	/* 3 ms of waits after it */
	t->ph[TB_PH_PEND_COMM][TB_CPU] = 1 * MS;
	t->ph[TB_PH_OTHER][TB_CPU] = 2 * MS;
	phases_on_event(&p, &e0);
	phases_on_event(&p, &e);
	phases_settle_tail(&p, &job);
	t = &job_proc(&job, 7)->threads[0];
	ck_assert_uint_eq(t->ends[0][TB_CPU], 1 * MS);	/* setup */
	ck_assert_uint_eq(t->ends[1][TB_COMM], 3 * MS);	/* teardown */
	ck_assert_uint_eq(t->ph[TB_PH_COMM][TB_COMM], 5 * MS);
	ck_assert_uint_eq(t->ph[TB_PH_OTHER][TB_COMM], 3 * MS);
	ck_assert_uint_eq(t->ph[TB_PH_OTHER][TB_CPU], 3 * MS);
	ck_assert_uint_eq(t->ph[TB_PH_PEND_COMM][TB_CPU], 0);
	phases_free(&p);
	job_free(&job);
}
END_TEST

START_TEST(checkpoint_syscall_in_pending)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };
	struct tb_phase_event e[] = {
		ev(0, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(4, TB_PH_PEND_FWD, TB_BC_BACKWARD, TB_RS_NONE),
		ev(4, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(5, TB_PH_PEND_FWD, TB_BC_OPTIM, TB_RS_NONE),
		ev(6, TB_PH_CHECKPOINT, TB_BC_SAVE, TB_RS_NONE),
		ev(9, TB_PH_PEND_FWD, TB_BC_SAVE, TB_RS_NONE),
		ev(9, TB_PH_CHECKPOINT, TB_BC_SAVE_IO, TB_RS_NONE),	/* rename */
		ev(11, TB_PH_PEND_FWD, TB_BC_SAVE_IO, TB_RS_NONE),
		ev(14, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(18, TB_PH_PEND_FWD, TB_BC_BACKWARD, TB_RS_NONE),
	};

	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		ph_spans_event(&s, &e[i], collect, &g);
	ck_assert_uint_eq(phase_ms(&g, PH_CHECKPOINT), 3 + 2);
	ck_assert_uint_eq(phase_ms(&g, PH_FORWARD), 1 + 3);	/* 5-6, 11-14 */
	ck_assert_uint_eq(phase_ms(&g, PH_BACKWARD), 8);
	tiles(&g, 0, 18);
}
END_TEST

/* More pending spans than kept: the oldest go out folded, none is lost. */
START_TEST(pending_bounded)
{
	struct ph_spans s = { 0 };
	struct got g = { 0 };

	for (uint64_t t = 0; t < 2 * PH_MAX_PENDING; t++) {
		struct tb_phase_event e = ev(t, t % 2 ? TB_PH_PEND_FWD : TB_PH_PEND_DATA,
					     TB_BC_DATA, TB_RS_NONE);

		ph_spans_event(&s, &e, collect, &g);
		ck_assert_int_le(s.npend, PH_MAX_PENDING);
	}
	ph_spans_end(&s, AT(2 * PH_MAX_PENDING), collect, &g);
	tiles(&g, 0, 2 * PH_MAX_PENDING);
}
END_TEST

/*
 * Two training steps, fetch to fetch: data 2 and 4 ms, forward 3 and 1,
 * backward 4 and 6, then other; a third fetch at 22 ms, pending.
 */
static void two_steps(struct phases *p)
{
	struct tb_phase_event e[] = {
		ev(0, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
		ev(2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
		ev(14, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(15, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(21, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		ev(22, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
	};

	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		phases_on_event(p, &e[i]);
}

/*
 * One step between a setup and a teardown, as BPF sends it: the first
 * event carries OTHER's row (all of the thread's time before it), each
 * later one its new phase's. Life 0-30 ms: setup 0-10 (cpu 7, io 3);
 * fetch 10-12, forward 12-15, backward 15-19, other 19-20, optimizer
 * 20-21; teardown 21-30 (cpu 2, idle 7). thread_rec rows as BPF's at the end.
 */
static struct thread_rec *one_step_life_to(struct phases *p, struct job *job, bool found,
					  uint64_t end)
{
	struct tb_phase_event e[] = {
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
		ev(12, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(15, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(19, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		ev(20, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(21, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE),
	};
	struct proc_rec *pr = job_add_proc(job, 7, 1, "python3", AT(0));
	struct thread_rec *t;

	ck_assert_ptr_nonnull(pr);
	pr->role = TB_ROLE_TRAINER;
	t = job_add_thread(pr, 7, "python3", AT(0));
	ck_assert_ptr_nonnull(t);
	t->end_ns = end;
	t->found = found;	/* registered from /proc: running before */
	e[0].row[TB_CPU] = 7 * MS;
	e[0].row[TB_IO] = 3 * MS;
	e[3].row[TB_CPU] = 7 * MS;	/* OTHER's row at 19: the setup's still */
	e[3].row[TB_IO] = 3 * MS;
	e[5].row[TB_CPU] = 8 * MS;	/* and 1 ms of other between */
	e[5].row[TB_IO] = 3 * MS;
	t->ph[TB_PH_DATA][TB_DATA_WAIT] = 2 * MS;
	t->ph[TB_PH_FORWARD][TB_CPU] = 3 * MS;
	t->ph[TB_PH_BACKWARD][TB_CPU] = 4 * MS;
	t->ph[TB_PH_OPTIMIZER][TB_CPU] = 1 * MS;
	t->ph[TB_PH_OTHER][TB_CPU] = 10 * MS;
	t->ph[TB_PH_OTHER][TB_IO] = 3 * MS;
	t->ph[TB_PH_OTHER][TB_IDLE] = 7 * MS;
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		phases_on_event(p, &e[i]);
	phases_settle_tail(p, job);
	return &job_proc(job, 7)->threads[0];
}

static struct thread_rec *one_step_life(struct phases *p, struct job *job, bool found)
{
	return one_step_life_to(p, job, found, AT(30));
}

/*
 * A loop left with `break` after its step: no fetch closes it. Ended, the
 * thread's last event (the optimizer's end, 21) does: one step of 11 ms.
 * Still running (tracing stopped), the step may go on: none.
 */
START_TEST(last_step_closed_at_the_end)
{
	struct phases p = { 0 }, running = { 0 };
	struct job job = { 0 }, job2 = { 0 };
	const struct ph_thread *pt;

	one_step_life(&p, &job, false);
	pt = phases_trainer(&p, 7);
	ck_assert_ptr_nonnull(pt);
	ck_assert_int_eq(pt->steps.steps, 1);
	ck_assert_double_eq_tol(pt->steps.step_ms, 11.0, 1e-9);
	ck_assert_uint_eq(pt->ended_step, AT(21));
	one_step_life_to(&running, &job2, false, 0);
	pt = phases_trainer(&running, 7);
	ck_assert_int_eq(pt->steps.steps, 0);
	ck_assert_uint_eq(pt->ended_step, 0);
	phases_free(&p);
	phases_free(&running);
	job_free(&job);
	job_free(&job2);
}
END_TEST

/*
 * The share (docs/phases.md): setup and teardown are rows of their own,
 * the rows' wall time sums to the thread's life, and each row's made-of
 * covers exactly its wall time.
 */
START_TEST(setup_and_teardown_sum_to_life)
{
	struct phases p = { 0 };
	struct job job = { 0 };
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum sum;
	double wall = 0;
	const struct thread_rec *t;

	t = one_step_life(&p, &job, false);
	ck_assert_uint_eq(t->ends[0][TB_CPU], 7 * MS);
	ck_assert_uint_eq(t->ends[0][TB_IO], 3 * MS);
	ck_assert_uint_eq(t->ends[1][TB_CPU], 2 * MS);
	ck_assert_uint_eq(t->ends[1][TB_IDLE], 7 * MS);
	ck_assert_int_eq(phases_job(&p, &job, rows, &sum), 1);
	ck_assert_uint_eq(sum_cats(rows[PH_SETUP]), 10 * MS);
	ck_assert_uint_eq(sum_cats(rows[PH_TEARDOWN]), 9 * MS);
	ck_assert_uint_eq(rows[PH_OTHER][TB_CPU], 1 * MS);
	ck_assert_uint_eq(sum_cats(rows[PH_OTHER]), 1 * MS);
	for (int ph = 0; ph < PH_NSHOWN; ph++) {
		/* A step still pending folds as data and forward: 2 and 3 ms. */
		ck_assert_double_eq_tol(sum.wall_ms[ph], sum_cats(rows[ph]) / 1e6, 1e-9);
		wall += sum.wall_ms[ph];
	}
	ck_assert_double_eq_tol(sum.wall_ms[PH_SETUP], 10.0, 1e-9);
	ck_assert_double_eq_tol(sum.wall_ms[PH_TEARDOWN], 9.0, 1e-9);
	ck_assert_double_eq_tol(wall, thread_lifetime(t, AT(30)) / 1e6, 1e-9);
	ck_assert_uint_eq(ph_order[0], PH_SETUP);
	ck_assert_uint_eq(ph_order[PH_NSHOWN - 1], PH_TEARDOWN);
	phases_free(&p);
	job_free(&job);
}
END_TEST

/*
 * A loop with no DataLoader, its last step as BPF sends it (life 0-30 ms):
 * setup 0-10 (cpu 10), backward 10-14 (cpu 4), optimizer 14-15 (cpu 1),
 * then pending: the loop's end 15-20 (cpu 5) and the interpreter's exit,
 * whose waits (20-22 idle, 25-28 idle) each sent a "fed" event with its
 * cpu between (22-25 cpu 3, 28-30 cpu 2). All of 15-30 met no backward:
 * teardown, rows and wall alike, none of it other, and the rows still sum
 * to the life.
 */
START_TEST(unfetched_exit_is_teardown)
{
	struct tb_phase_event e[] = {
		ev(10, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(14, TB_PH_PEND_FWD, TB_BC_BACKWARD, TB_RS_NONE),
		ev(14, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(15, TB_PH_PEND_FWD, TB_BC_OPTIM, TB_RS_NONE),
		ev(22, TB_PH_PEND_FWD, TB_BC_NONE, TB_RS_FED),
		ev(28, TB_PH_PEND_FWD, TB_BC_NONE, TB_RS_FED),
	};
	struct phases p = { 0 };
	struct job job = { 0 };
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct proc_rec *pr = job_add_proc(&job, 7, 1, "python3", AT(0));
	struct thread_rec *t;
	struct ph_sum sum;
	double wall = 0;

	ck_assert_ptr_nonnull(pr);
	pr->role = TB_ROLE_TRAINER;
	t = job_add_thread(pr, 7, "python3", AT(0));
	ck_assert_ptr_nonnull(t);
	t->end_ns = AT(30);
	e[0].row[TB_CPU] = 10 * MS;	/* the first event: OTHER's row, the setup */
	t->ph[TB_PH_OTHER][TB_CPU] = 10 * MS;
	t->ph[TB_PH_BACKWARD][TB_CPU] = 4 * MS;
	t->ph[TB_PH_OPTIMIZER][TB_CPU] = 1 * MS;
	/* BPF's rows at the end: each fed event moved PEND_FWD's into PEND_DATA. */
	t->ph[TB_PH_PEND_DATA][TB_CPU] = 8 * MS;
	t->ph[TB_PH_PEND_DATA][TB_IDLE] = 5 * MS;
	t->ph[TB_PH_PEND_FWD][TB_CPU] = 2 * MS;
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		phases_on_event(&p, &e[i]);
	phases_settle_tail(&p, &job);
	t = &job_proc(&job, 7)->threads[0];
	ck_assert_uint_eq(t->ends[1][TB_CPU], 10 * MS);
	ck_assert_uint_eq(t->ends[1][TB_IDLE], 5 * MS);
	ck_assert_int_eq(phases_job(&p, &job, rows, &sum), 1);
	ck_assert_uint_eq(sum_cats(rows[PH_TEARDOWN]), 15 * MS);
	ck_assert_uint_eq(sum_cats(rows[PH_OTHER]), 0);
	ck_assert_uint_eq(sum_cats(rows[PH_DATA]) + sum_cats(rows[PH_FORWARD]), 0);
	for (int ph = 0; ph < PH_NSHOWN; ph++) {
		ck_assert_double_eq_tol(sum.wall_ms[ph], sum_cats(rows[ph]) / 1e6, 1e-9);
		wall += sum.wall_ms[ph];
	}
	ck_assert_double_eq_tol(sum.wall_ms[PH_TEARDOWN], 15.0, 1e-9);
	ck_assert_double_eq_tol(wall, thread_lifetime(t, AT(30)) / 1e6, 1e-9);
	phases_free(&p);
	job_free(&job);
}
END_TEST

/*
 * A rank's last event begins a collective (destroy_process_group's
 * barrier: 22-23, comm) and the rest of its life (23-30: cpu 2, idle 5)
 * waits in PEND_COMM, entered with no event: all of it is the teardown,
 * and the rows still sum to the life.
 */
START_TEST(teardown_after_a_last_collective)
{
	struct tb_phase_event e[] = {
		ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
		ev(12, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
		ev(15, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
		ev(19, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		ev(20, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE),
		ev(21, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE),
		ev(22, TB_PH_COMM, TB_BC_NONE, TB_RS_NONE),
	};
	struct phases p = { 0 };
	struct job job = { 0 };
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum sum;
	double wall = 0;
	struct proc_rec *pr;
	struct thread_rec *t;

	pr = job_add_proc(&job, 7, 1, "python3", AT(0));
	ck_assert_ptr_nonnull(pr);
	pr->role = TB_ROLE_TRAINER;
	t = job_add_thread(pr, 7, "python3", AT(0));
	ck_assert_ptr_nonnull(t);
	t->end_ns = AT(30);
	e[0].row[TB_CPU] = 10 * MS;	/* the setup */
	e[3].row[TB_CPU] = 10 * MS;
	e[5].row[TB_CPU] = 11 * MS;	/* 19-20 */
	t->ph[TB_PH_DATA][TB_DATA_WAIT] = 2 * MS;
	t->ph[TB_PH_FORWARD][TB_CPU] = 3 * MS;
	t->ph[TB_PH_BACKWARD][TB_CPU] = 4 * MS;
	t->ph[TB_PH_OPTIMIZER][TB_CPU] = 1 * MS;
	t->ph[TB_PH_OTHER][TB_CPU] = 12 * MS;	/* and 21-22 */
	t->ph[TB_PH_COMM][TB_COMM] = 1 * MS;
	t->ph[TB_PH_PEND_COMM][TB_CPU] = 2 * MS;
	t->ph[TB_PH_PEND_COMM][TB_IDLE] = 5 * MS;
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
		phases_on_event(&p, &e[i]);
	phases_settle_tail(&p, &job);
	t = &job_proc(&job, 7)->threads[0];
	ck_assert_uint_eq(t->ends[1][TB_COMM], 1 * MS);
	ck_assert_uint_eq(t->ends[1][TB_CPU], 2 * MS);
	ck_assert_uint_eq(t->ends[1][TB_IDLE], 5 * MS);
	phases_job(&p, &job, rows, &sum);
	ck_assert_uint_eq(sum_cats(rows[PH_TEARDOWN]), 8 * MS);
	ck_assert_uint_eq(sum_cats(rows[PH_OTHER]), 2 * MS);
	ck_assert_uint_eq(sum_cats(rows[PH_COMM]), 0);
	for (int ph = 0; ph < PH_NSHOWN; ph++) {
		ck_assert_double_eq_tol(sum.wall_ms[ph], sum_cats(rows[ph]) / 1e6, 1e-9);
		wall += sum.wall_ms[ph];
	}
	ck_assert_double_eq_tol(wall, 30.0, 1e-9);
	phases_free(&p);
	job_free(&job);
}
END_TEST

/*
 * Attached (-p) to a thread that was running: no setup; its time from the
 * attach to its first event is other's, wall time and made-of alike. A
 * launched command's threads are registered too (before its exec): theirs
 * is a setup.
 */
START_TEST(attached_has_no_setup)
{
	struct phases p = { 0 }, launched = { .launched = true };
	struct job job2 = { 0 };
	struct job job = { 0 };
	uint64_t rows[PH_NSHOWN][TB_NCAT];
	struct ph_sum sum;
	double wall = 0;
	const struct thread_rec *t;

	t = one_step_life(&p, &job, true);
	ck_assert_uint_eq(sum_cats(t->ends[0]), 0);
	ck_assert_uint_eq(sum_cats(t->ends[1]), 9 * MS);	/* a teardown still */
	phases_job(&p, &job, rows, &sum);
	ck_assert_uint_eq(sum_cats(rows[PH_SETUP]), 0);
	ck_assert_uint_eq(sum_cats(rows[PH_OTHER]), 11 * MS);
	ck_assert_double_eq_tol(sum.wall_ms[PH_OTHER], 11.0, 1e-9);
	for (int ph = 0; ph < PH_NSHOWN; ph++)
		wall += sum.wall_ms[ph];
	ck_assert_double_eq_tol(wall, 30.0, 1e-9);
	t = one_step_life(&launched, &job2, true);
	ck_assert_uint_eq(sum_cats(t->ends[0]), 10 * MS);
	phases_free(&p);
	phases_free(&launched);
	job_free(&job);
	job_free(&job2);
}
END_TEST

/* The table's side: steps, their phase times, the wall time per phase. */
START_TEST(steps_and_wall)
{
	struct phases p = { 0 };
	struct ph_sum sum = { 0 };
	const struct ph_thread *t;

	two_steps(&p);
	t = phases_thread(&p, 7);
	ck_assert_ptr_nonnull(t);
	phases_thread_sum(t, &sum);
	ck_assert_int_eq(sum.steps.steps, 2);
	ck_assert_double_eq_tol(sum.steps.step_ms, 22.0, 1e-9);
	ck_assert_double_eq_tol(sum.steps.min_ms[PH_DATA], 2.0, 1e-9);
	ck_assert_double_eq_tol(sum.steps.max_ms[PH_DATA], 4.0, 1e-9);
	ck_assert_double_eq_tol(sum.steps.max_ms[PH_BACKWARD], 6.0, 1e-9);
	ck_assert_double_eq_tol(ph_stat_avg(&sum.steps, PH_FORWARD), 2.0, 1e-9);
	ck_assert_double_eq_tol(sum.wall_ms[PH_OTHER], 2.0, 1e-9);
	ck_assert_int_eq(sum.step_source, PH_STEPS_FETCH);
	phases_free(&p);
}
END_TEST

/*
 * Gradient accumulation over 3 micro-batches of 12 ms (fetch 2, forward 3,
 * backward 4), zero_grad at the top of each group (before its backward:
 * it ends no step) and step() after the third's backward, as in
 * `if i % 3 == 0: opt.zero_grad()` ... `if (i + 1) % 3 == 0: opt.step()`.
 * A seventh micro-batch has no step() after it: its group is pending.
 */
static void accum_batch(struct phases *p, uint64_t t, int i)
{
	struct tb_phase_event e[8];
	int n = 0;

	e[n++] = ev(t, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
	e[n++] = ev(t + 2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);
	if (i % 3 == 0) {
		e[n++] = ev(t + 2, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE);
		e[n++] = ev(t + 3, TB_PH_PEND_FWD, TB_BC_OPTIM, TB_RS_NONE);
	}
	e[n++] = ev(t + 5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);
	e[n++] = ev(t + 9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE);
	if (i % 3 == 2) {
		e[n++] = ev(t + 9, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE);
		e[n++] = ev(t + 10, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE);
	}
	for (int k = 0; k < n; k++)
		phases_on_event(p, &e[k]);
}

START_TEST(optimizer_steps)
{
	struct phases p = { 0 };
	struct ph_sum sum = { 0 };
	const struct ph_thread *t;
	struct tb_phase_event end = ev(84, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);

	for (int i = 0; i < 7; i++)
		accum_batch(&p, 12 * i, i);
	phases_on_event(&p, &end);	/* closes the seventh */
	t = phases_thread(&p, 7);
	ck_assert_int_eq(t->steps.steps, 7);
	ck_assert_int_eq(t->osteps.steps, 2);
	ck_assert_int_eq(t->omicro, 6);
	phases_thread_sum(t, &sum);
	ck_assert_int_eq(sum.steps.steps, 2);
	ck_assert_int_eq(sum.micro, 7);
	ck_assert_int_eq(sum.micro_in, 6);
	ck_assert_int_eq(sum.optim, 1);
	ck_assert_int_eq(sum.each_min, 2);
	ck_assert_int_eq(sum.each_max, 2);
	/* Each optimizer step: three micro-batches, 36 ms. */
	ck_assert_double_eq_tol(sum.steps.step_ms, 72.0, 1e-9);
	ck_assert_double_eq_tol(sum.steps.max_ms[PH_BACKWARD], 12.0, 1e-9);
	ck_assert_double_eq_tol(sum.steps.min_ms[PH_DATA], 6.0, 1e-9);
	/* zero_grad (1 ms) and step() (1 ms) */
	ck_assert_double_eq_tol(sum.steps.max_ms[PH_OPTIMIZER], 2.0, 1e-9);
	phases_free(&p);

	/* No optimizer bracket (torch < 2 without names): the training steps. */
	memset(&sum, 0, sizeof(sum));
	for (int i = 0; i < 3; i++) {
		struct tb_phase_event e[] = {
			ev(12 * i, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
			ev(12 * i + 5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
			ev(12 * i + 9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
		};

		for (size_t k = 0; k < sizeof(e) / sizeof(e[0]); k++)
			phases_on_event(&p, &e[k]);
	}
	phases_on_event(&p, &end);
	phases_thread_sum(phases_thread(&p, 7), &sum);
	ck_assert_int_eq(sum.steps.steps, 3);
	ck_assert_int_eq(sum.micro, 3);
	ck_assert_int_eq(sum.optim, 0);
	phases_free(&p);
}
END_TEST

/*
 * The epochs' cut: a main thread's settled time before an instant, the
 * span across it split there; another thread of the process is no rank.
 */
START_TEST(time_before)
{
	struct phases p = { 0 };
	struct tb_phase_event side = ev(0, TB_PH_CHECKPOINT, TB_BC_SAVE, TB_RS_NONE);
	struct tb_phase_event side_end = ev(3, TB_PH_OTHER, TB_BC_SAVE, TB_RS_NONE);
	uint64_t ns[PH_NSHOWN];

	side.tid = side_end.tid = 8;
	phases_on_event(&p, &side);
	phases_on_event(&p, &side_end);
	two_steps(&p);
	phases_main_before(&p, AT(12), ns);
	ck_assert_uint_eq(ns[PH_DATA], 4 * MS);		/* 0-2 and 10-12 */
	ck_assert_uint_eq(ns[PH_FORWARD], 3 * MS);
	ck_assert_uint_eq(ns[PH_BACKWARD], 4 * MS);
	ck_assert_uint_eq(ns[PH_OTHER], 1 * MS);
	ck_assert_uint_eq(ns[PH_CHECKPOINT], 0);
	phases_main_before(&p, AT(5), ns);
	ck_assert_uint_eq(ns[PH_DATA], 2 * MS);
	ck_assert_uint_eq(ns[PH_FORWARD], 3 * MS);
	ck_assert_uint_eq(ns[PH_BACKWARD], 0);
	phases_main_now(&p, ns);
	ck_assert_uint_eq(ns[PH_DATA], 6 * MS);
	ck_assert_uint_eq(ns[PH_BACKWARD], 10 * MS);
	ck_assert_uint_eq(ns[PH_OTHER], 2 * MS);
	phases_free(&p);
}
END_TEST

/*
 * A daemon's bound is on threads alive: those of a process exited before
 * the cut, or gone from the job, are forgotten with their rings; those of
 * a process alive, or exited after the cut, are kept with their times.
 */
START_TEST(forget_gone)
{
	struct phases p = { 0 };
	struct job job = { 0 };
	struct tb_phase_event e = ev(0, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
	pid_t pids[] = { 7, 8, 9, 10 };
	const struct ph_thread *t;

	for (int i = 0; i < 4; i++) {
		ck_assert_ptr_nonnull(job_add_proc(&job, pids[i], 1, "python3", AT(0)));
		e.pid = e.tid = pids[i];
		phases_on_event(&p, &e);
	}
	/* 10 is never in the job: gone from it */
	job.nprocs--;
	job_reindex(&job);
	two_steps(&p);
	ck_assert_int_eq(p.nth, 4);
	ck_assert_int_gt(p.nrings, 0);
	job_on_exit(&job, 8, AT(50), 0);
	job_on_exit(&job, 9, AT(150), 0);
	phases_forget_gone(&p, &job, AT(100));
	ck_assert_int_eq(p.nth, 2);
	ck_assert_ptr_nonnull(phases_thread(&p, 9));
	ck_assert_ptr_null(phases_thread(&p, 8));
	ck_assert_ptr_null(phases_thread(&p, 10));
	t = phases_thread(&p, 7);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->tot[PH_BACKWARD], 10 * MS);	/* 4 + 6 */
	ck_assert_int_le(p.nrings, p.nth);
	phases_free(&p);
	job_free(&job);
}
END_TEST

/* Events of thread tid of process 7, at t ms and on. */
static bool on_thread(struct phases *p, pid_t tid, const struct tb_phase_event *e, size_t n,
		      uint64_t t)
{
	bool moved = false;

	for (size_t i = 0; i < n; i++) {
		struct tb_phase_event x = e[i];

		x.tid = tid;
		x.ts += t * MS;
		moved |= phases_on_event(p, &x);
	}
	return moved;
}

/*
 * The loop in a threading.Thread (tid 9) of process 7, whose main thread
 * peeked at a batch first (one fetch, no backward) and then only waits:
 * the loop thread takes over at its first event, is settled at its first
 * backward, and a thread that starts phases later (a checkpoint saver,
 * tid 12) does not take it. The epochs' cut (phases_main_*) is its own.
 */
START_TEST(loop_thread)
{
	struct phases p = { 0 };
	struct tb_phase_event peek[] = {
		ev(0, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
		ev(1, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
	};
	struct tb_phase_event fetch = ev(0, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
	struct tb_phase_event save[] = {
		ev(0, TB_PH_CHECKPOINT, TB_BC_SAVE, TB_RS_NONE),
		ev(1, TB_PH_OTHER, TB_BC_SAVE, TB_RS_NONE),
	};
	uint64_t ns[PH_NSHOWN];

	ck_assert_ptr_null(phases_trainer(&p, 7));
	ck_assert(on_thread(&p, 7, peek, 2, 0));		/* the main thread, so far */
	ck_assert_int_eq(phases_trainer(&p, 7)->tid, 7);
	ck_assert(!on_thread(&p, 7, peek, 2, 0));
	ck_assert(on_thread(&p, 9, &fetch, 1, 100));	/* new to phases: it takes over */
	ck_assert_int_eq(phases_trainer(&p, 7)->tid, 9);
	ck_assert(!on_thread(&p, 7, &fetch, 1, 101));	/* the main thread's again: no */
	ck_assert_int_eq(phases_trainer(&p, 7)->tid, 9);
	{
		struct tb_phase_event e[] = {
			ev(2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE),
			ev(5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED),
			ev(9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE),
			ev(10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE),
		};

		ck_assert(!on_thread(&p, 9, e, 4, 100));
	}
	ck_assert(phases_trainer(&p, 7)->backward);
	/* Settled: neither a new thread nor another's backward takes it now. */
	ck_assert(!on_thread(&p, 12, save, 2, 120));
	{
		struct tb_phase_event b = ev(130, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);

		ck_assert(!on_thread(&p, 7, &b, 1, 0));
	}
	ck_assert_int_eq(phases_trainer(&p, 7)->tid, 9);
	phases_main_now(&p, ns);
	ck_assert_uint_eq(ns[PH_BACKWARD], 4 * MS);	/* 9's; not 7's nor 12's */
	ck_assert_uint_eq(ns[PH_CHECKPOINT], 0);
	ck_assert_uint_eq(ns[PH_DATA], 2 * MS);
	ck_assert_uint_eq(ns[PH_FORWARD], 3 * MS);
	phases_main_before(&p, AT(106), ns);		/* its ring: 1 ms of its backward */
	ck_assert_uint_eq(ns[PH_DATA], 2 * MS);
	ck_assert_uint_eq(ns[PH_FORWARD], 3 * MS);
	ck_assert_uint_eq(ns[PH_BACKWARD], 1 * MS);
	phases_free(&p);
}
END_TEST

/*
 * Before any backward, a thread whose first backward comes first takes it
 * from one that only fetched; then it is settled.
 */
START_TEST(first_backward_settles_the_loop_thread)
{
	struct phases p = { 0 };
	struct tb_phase_event fetch = ev(0, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
	struct tb_phase_event bwd = ev(5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);

	ck_assert(on_thread(&p, 9, &fetch, 1, 0));
	ck_assert(on_thread(&p, 7, &fetch, 1, 1));		/* the newest */
	ck_assert(on_thread(&p, 9, &bwd, 1, 0));		/* the first backward */
	ck_assert(!on_thread(&p, 7, &bwd, 1, 10));
	ck_assert(!on_thread(&p, 11, &bwd, 1, 20));
	ck_assert_int_eq(phases_trainer(&p, 7)->tid, 9);
	phases_free(&p);
}
END_TEST

/* serve cuts no epochs: no thread gets a ring, its times are kept the same */
START_TEST(no_rings)
{
	struct phases p = { .no_rings = true };
	const struct ph_thread *t;

	two_steps(&p);
	t = phases_thread(&p, 7);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_null(t->ring);
	ck_assert_int_eq(p.nrings, 0);
	ck_assert_uint_eq(t->tot[PH_BACKWARD], 10 * MS);	/* 4 + 6 */
	phases_free(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("phases");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, training_steps);
	tcase_add_test(tc, validation_pass);
	tcase_add_test(tc, epoch_end_fetch);
	tcase_add_test(tc, pending_after_validation);
	tcase_add_test(tc, recorded_events_have_no_class);
	tcase_add_test(tc, pending_at_the_end);
	tcase_add_test(tc, queue_fed_steps);
	tcase_add_test(tc, pending_bounded);
	tcase_add_test(tc, checkpoint_syscalls);
	tcase_add_test(tc, communication_spans);
	tcase_add_test(tc, communication_in_steps);
	tcase_add_test(tc, communication_at_the_end);
	tcase_add_test(tc, checkpoint_syscall_in_pending);
	tcase_add_test(tc, steps_and_wall);
	tcase_add_test(tc, optimizer_steps);
	tcase_add_test(tc, time_before);
	tcase_add_test(tc, loop_thread);
	tcase_add_test(tc, first_backward_settles_the_loop_thread);
	tcase_add_test(tc, forget_gone);
	tcase_add_test(tc, no_rings);
	tcase_add_test(tc, worker_startup_is_data);
	tcase_add_test(tc, setup_and_teardown_sum_to_life);
	tcase_add_test(tc, attached_has_no_setup);
	tcase_add_test(tc, teardown_after_a_last_collective);
	tcase_add_test(tc, unfetched_exit_is_teardown);
	tcase_add_test(tc, last_step_closed_at_the_end);
	tcase_add_test(tc, startup_follows_its_step);
	tcase_add_test(tc, startup_undone_in_setup);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
