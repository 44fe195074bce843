// SPDX-License-Identifier: BSD-3-Clause
/*
 * Epochs without BPF: which printed lines start an epoch, markers, how a
 * boundary between two refreshes splits the totals, step statistics.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "epochs.h"
#include "epochs_fold.h"
#include "job.h"
#include "phases.h"

#define MS 1000000ull

static struct tb_text_event text(uint32_t type, uint64_t ts, const char *s)
{
	struct tb_text_event e = { .type = type, .ts = ts, .fd = 1 };

	e.len = strlen(s);
	memcpy(e.text, s, e.len);
	return e;
}

static void feed(struct epochs *ep, uint32_t type, uint64_t ts, const char *s)
{
	struct tb_text_event e = text(type, ts, s);

	epochs_on_event(ep, &e);
}

static void init(struct epochs *ep, enum ep_source src, const char *re)
{
	char why[128];

	ck_assert_int_eq(epochs_init(ep, src, 1.0, re, 0, why, sizeof(why)), 0);
}

/* One process whose main thread spends its time as cpu at rate 1. */
static void job_at(struct job *job, struct proc_rec *p, struct thread_rec *t,
		   uint64_t cpu_ns)
{
	memset(job, 0, sizeof(*job));
	memset(p, 0, sizeof(*p));
	memset(t, 0, sizeof(*t));
	p->pid = t->tid = 100;
	p->role = TB_ROLE_TRAINER;
	p->threads = t;
	p->nthreads = 1;
	t->own[TB_CPU] = t->cp[TB_CPU] = cpu_ns;
	job->procs = p;
	job->nprocs = 1;
}

START_TEST(default_regex_forms)
{
	static const struct { const char *line; long label; } yes[] = {
		{ "Epoch 3", 3 }, { "Epoch 4/10", 4 }, { "epoch=5 loss=1.0", 5 },
		{ "Epoch 6: 45%|####  | 9/20 [00:01<00:02]", 6 },
		{ "{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 6.33}", 7 },
		{ "[rank0] EPOCH [8/10]", 8 },
	};
	static const char *const no[] = {
		"num_epochs=10", "epochs: 10", "loss 0.5", "preepoch 3",
	};
	struct epochs ep;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		init(&ep, EP_REGEX, NULL);
		feed(&ep, TB_EV_TEXT, 10, yes[i].line);
		ck_assert_msg(ep.src[EP_REGEX].npend == 1, "no match: %s", yes[i].line);
		ck_assert_int_eq(ep.src[EP_REGEX].pend[0].label, yes[i].label);
		epochs_free(&ep);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		init(&ep, EP_REGEX, NULL);
		feed(&ep, TB_EV_TEXT, 10, no[i]);
		ck_assert_msg(ep.src[EP_REGEX].npend == 0, "matched: %s", no[i]);
		epochs_free(&ep);
	}
}
END_TEST

START_TEST(repeated_lines_are_one_boundary)
{
	struct epochs ep;

	init(&ep, EP_REGEX, NULL);
	/* tqdm redraws the same epoch's bar with \r, several per write. */
	feed(&ep, TB_EV_TEXT, 10, "\rEpoch 1: 10%\rEpoch 1: 20%");
	feed(&ep, TB_EV_TEXT, 20, "\rEpoch 1: 90%\n");
	feed(&ep, TB_EV_TEXT, 30, "\rEpoch 2: 0%");
	ck_assert_int_eq(ep.src[EP_REGEX].npend, 2);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[0].ts, 10);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[1].ts, 30);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[1].label, 2);
	epochs_free(&ep);
}
END_TEST

START_TEST(regex_without_number_counts)
{
	struct epochs ep;

	init(&ep, EP_REGEX, "^=== new round");
	feed(&ep, TB_EV_TEXT, 10, "=== new round\n");
	feed(&ep, TB_EV_TEXT, 20, "=== new round\n");
	ck_assert_int_eq(ep.src[EP_REGEX].npend, 2);
	ck_assert_int_eq(ep.src[EP_REGEX].pend[1].label, 2);
	epochs_free(&ep);
}
END_TEST

START_TEST(markers_and_source_choice)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;

	init(&ep, EP_AUTO, NULL);
	job_at(&job, &p, &t, 0);
	feed(&ep, TB_EV_TEXT, 5 * MS, "Epoch 1/2\n");
	epochs_tick(&ep, &job, 10 * MS);
	ck_assert_int_eq(epochs_source(&ep), EP_REGEX);
	feed(&ep, TB_EV_MARK, 20 * MS, "TRAINBPF epoch 1\n");
	feed(&ep, TB_EV_MARK, 25 * MS, "TRAINBPF step 0\n");
	epochs_tick(&ep, &job, 30 * MS);
	ck_assert_int_eq(epochs_source(&ep), EP_MARKER);	/* a marker outranks lines */
	ck_assert_int_eq(ep.marks.n, 1);
	feed(&ep, TB_EV_MARK, 40 * MS, "TRAINBPF bogus\n");
	ck_assert(!epochs_pending(&ep));
	epochs_free(&ep);
}
END_TEST

/* The labels and times of the boundaries waiting in the regex source. */
static void pend_is(const struct epochs *ep, int n, const uint64_t *ts, const long *label)
{
	const struct ep_stream *st = &ep->src[EP_REGEX];

	ck_assert_int_eq(st->npend, n);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(st->pend[i].ts, ts[i]);
		ck_assert_int_eq(st->pend[i].label, label[i]);
	}
}

START_TEST(summary_lines_end_their_epoch)
{
	struct epochs ep;

	init(&ep, EP_REGEX, NULL);
	/* Nothing before the first summary: epoch 1 from the window's start. */
	feed(&ep, TB_EV_TEXT, 10, "Epoch 1 done, loss 0.5\n");
	pend_is(&ep, 2, (uint64_t[]){ 0, 10 }, (long[]){ 1, 2 });
	/* HF: the eval line after the last step line ('epoch': 1.0) changes nothing. */
	feed(&ep, TB_EV_TEXT, 12, "{'eval_loss': 0.3, 'epoch': 1.0}\n");
	/* A step line of the epoch under way neither. */
	feed(&ep, TB_EV_TEXT, 20, "Epoch [2/3], Step [8/24], Loss: 0.4\n");
	pend_is(&ep, 2, (uint64_t[]){ 0, 10 }, (long[]){ 1, 2 });
	feed(&ep, TB_EV_TEXT, 30, "Epoch [2/3] finished: train loss 0.4\n");
	/* HF's fraction names the epoch under way: 2.33 is epoch 3. */
	feed(&ep, TB_EV_TEXT, 40, "{'loss': 0.3, 'epoch': 2.33}\n");
	/* Lightning counts from 0: 100% ends epoch 2 of its count, 3 is named. */
	feed(&ep, TB_EV_TEXT, 50, "\rEpoch 2: 100%|##########| 24/24\n");
	pend_is(&ep, 3, (uint64_t[]){ 0, 10, 30 }, (long[]){ 1, 2, 3 });
	feed(&ep, TB_EV_TEXT, 60, "{'loss': 0.2, 'epoch': 3.0}\n");
	pend_is(&ep, 4, (uint64_t[]){ 0, 10, 30, 60 }, (long[]){ 1, 2, 3, 4 });
	ck_assert(ep.src[EP_REGEX].inferred);
	epochs_free(&ep);
}
END_TEST

/* After the last summary, the teardown is no epoch: a tail. */
START_TEST(teardown_after_last_summary_is_no_epoch)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;

	init(&ep, EP_REGEX, NULL);
	job_at(&job, &p, &t, 100 * MS);
	epochs_tick(&ep, &job, 100 * MS);
	feed(&ep, TB_EV_TEXT, 150 * MS, "Epoch 1/2\n");
	feed(&ep, TB_EV_TEXT, 190 * MS, "Epoch 2/2\n");
	job_at(&job, &p, &t, 200 * MS);
	epochs_tick(&ep, &job, 200 * MS);
	feed(&ep, TB_EV_TEXT, 2500 * MS, "Epoch 2 done\n");
	job_at(&job, &p, &t, 2600 * MS);
	epochs_tick(&ep, &job, 2600 * MS);
	job_at(&job, &p, &t, 8000 * MS);
	epochs_finish(&ep, &job, 8000 * MS);	/* 5.5 s after the summary, still no epoch */
	ck_assert_int_eq(ep.src[EP_REGEX].n, 2);
	ck_assert(ep.src[EP_REGEX].list[1].complete);
	ck_assert_int_eq(ep.src[EP_REGEX].list[1].end, 2500 * MS);
	epochs_free(&ep);
}
END_TEST

/*
 * A wait still open at a refresh counts under its no-waker category (idle)
 * until it closes; then its waker makes it data_wait, and idle's total
 * shrinks. An epoch boundary between must not give the next epoch negative
 * idle: the wait's part before the boundary stays in the epoch before (as
 * idle, as it was known then), the rest is the next epoch's data_wait, and
 * each epoch's time still sums to its length.
 */
START_TEST(open_wait_gives_no_negative_share)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	const struct epoch *e;

	init(&ep, EP_MARKER, NULL);
	job_at(&job, &p, &t, 100 * MS);
	epochs_tick(&ep, &job, 100 * MS);
	feed(&ep, TB_EV_MARK, 100 * MS, "TRAINBPF epoch 1\n");
	/* 200 ms: 100 ms cpu, then a wait open for 100 ms, idle for now */
	job_at(&job, &p, &t, 100 * MS);
	t.own[TB_IDLE] = t.cp[TB_IDLE] = 100 * MS;
	epochs_tick(&ep, &job, 200 * MS);
	feed(&ep, TB_EV_MARK, 200 * MS, "TRAINBPF epoch 2\n");
	/* 300 ms: the wait closed at 250 as data_wait (150 ms), 50 ms cpu since */
	job_at(&job, &p, &t, 150 * MS);
	t.own[TB_DATA_WAIT] = t.cp[TB_DATA_WAIT] = 150 * MS;
	epochs_tick(&ep, &job, 300 * MS);
	feed(&ep, TB_EV_MARK, 300 * MS, "TRAINBPF epoch 3\n");
	job_at(&job, &p, &t, 150 * MS);
	t.own[TB_DATA_WAIT] = t.cp[TB_DATA_WAIT] = 150 * MS;
	epochs_tick(&ep, &job, 400 * MS);
	ck_assert_int_eq(ep.src[EP_MARKER].n, 2);
	e = &ep.src[EP_MARKER].list[1];
	for (int c = 0; c < TB_NCAT; c++) {
		ck_assert_int_ge(e->d[0].main_cp[c], 0);
		ck_assert_int_ge(e->d[0].own[c], 0);
		ck_assert_int_ge(e->d[0].main_own[c], 0);
	}
	ck_assert_int_eq(e->d[0].main_cp[TB_CPU], 50 * MS);
	ck_assert_int_eq(e->d[0].main_cp[TB_DATA_WAIT], 50 * MS);
	ck_assert_int_eq(e->d[0].main_cp[TB_IDLE], 0);
	ck_assert_int_eq(ep.src[EP_MARKER].list[0].d[0].main_cp[TB_IDLE], 100 * MS);
	epochs_free(&ep);
}
END_TEST

/* Where set, the phase events also go to a phase table: serve's passes. */
static struct phases *also_phases;

static void phase(struct epochs *ep, uint64_t ts, unsigned ph, unsigned cls, unsigned how)
{
	struct tb_phase_event e = { .type = TB_EV_PHASE, .pid = 100, .tid = 100, .phase = ph,
				    .cls = cls, .resolved = how, .ts = ts };

	epochs_on_phase(ep, &e);
	if (also_phases)
		phases_on_event(also_phases, &e);
}

/* A training step: its fetch (resolving the step before as how), its backward. */
static void train(struct epochs *ep, uint64_t ts, unsigned how)
{
	phase(ep, ts, TB_PH_PEND_DATA, TB_BC_DATA, how);
	phase(ep, ts + MS, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);
}

/* An event to both the phase table (phases.c) and the epochs, as run.c sends it. */
static void both(struct epochs *ep, struct phases *ph, uint64_t ts, unsigned p, unsigned cls,
		 unsigned how)
{
	struct tb_phase_event e = { .type = TB_EV_PHASE, .pid = 100, .tid = 100, .phase = p,
				    .cls = cls, .resolved = how, .ts = ts };

	phases_on_event(ph, &e);
	epochs_on_phase(ep, &e);
}

/*
 * Issue 24: "120 training steps" in the phase table, "119 steps" below it;
 * the run's longest step 889.7 ms, the last epoch's 5544.8 ms (its last
 * step ran to the end of tracing, the teardown with it). Three passes of
 * four steps (10 ms, the third epoch's third 30 ms), each ended by the
 * fetch that raises StopIteration, then 5 s of teardown: one count of 12
 * in the table, the run and the epochs, and the last step ends at that
 * fetch, as the table closes it.
 */
START_TEST(one_count_of_steps)
{
	struct epochs ep;
	struct phases ph = { 0 };
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	struct ep_steps run;
	int sum = 0;

	init(&ep, EP_AUTO, NULL);
	job_at(&job, &p, &t, 0);
	for (int e = 0; e < 3; e++) {
		uint64_t at = (1000 + 100 * e) * MS;

		for (int i = 0; i < 4; i++) {
			both(&ep, &ph, at, TB_PH_PEND_DATA, TB_BC_DATA,
			     e && !i ? TB_RS_LONE | TB_RS_END_DATA : TB_RS_NONE);
			both(&ep, &ph, at + MS, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);
			both(&ep, &ph, at + 5 * MS, TB_PH_PEND_FWD, TB_BC_BACKWARD, TB_RS_NONE);
			at += (e == 2 && i == 2 ? 30 : 10) * MS;
		}
		both(&ep, &ph, at, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);	/* StopIteration */
		epochs_tick(&ep, &job, (1000 + 100 * e + 60) * MS);
	}
	epochs_finish(&ep, &job, 6300 * MS);
	ck_assert_int_eq(ep.src[EP_PASSES].n, 3);
	ck_assert_int_eq(ph.th[0].steps.steps, 12);
	epochs_run_steps(&ep, 0, ep.prev.ts, &run);
	ck_assert_int_eq(run.count, 12);
	for (int i = 0; i < ep.src[EP_PASSES].n; i++) {
		const struct ep_steps *es = &ep.src[EP_PASSES].list[i].steps;

		sum += es->count;
		ck_assert_double_ge(run.max_ms, es->max_ms);
	}
	ck_assert_int_eq(sum, 12);
	/* The last step: to the StopIteration fetch 30 ms later, not to the end 5 s on. */
	ck_assert_double_eq_tol(ep.src[EP_PASSES].list[2].steps.max_ms, 30.0, 1e-9);
	ck_assert_uint_eq(epochs_step_end(&ep, 0, ep.prev.ts, 11), 1260 * MS);
	ck_assert_uint_eq(epochs_step_end(&ep, 0, ep.prev.ts, 10),
			  epochs_step_start(&ep, 0, ep.prev.ts, 11));
	phases_free(&ph);
	epochs_free(&ep);
}
END_TEST

/*
 * Gradient accumulation over 3 micro-batches of 12 ms, zero_grad at the top
 * of each group (before its backward) and step() after the third's
 * backward; two passes of 6 micro-batches, the second with a seventh that
 * steps nowhere (pending), each ended by StopIteration. The steps are
 * optimizer steps, 36 ms, the same 4 in the table, the run and the
 * epochs, the micro-batches named beside them.
 */
START_TEST(optimizer_steps_are_the_steps)
{
	struct epochs ep;
	struct phases ph = { 0 };
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	struct ep_steps run;
	struct ph_sum sum = { 0 };
	uint64_t at = 1000 * MS;
	int sum_epochs = 0;

	init(&ep, EP_AUTO, NULL);
	job_at(&job, &p, &t, 0);
	for (int e = 0; e < 2; e++) {
		for (int i = 0; i < 6 + e; i++) {
			both(&ep, &ph, at, TB_PH_PEND_DATA, TB_BC_DATA,
			     e && !i ? TB_RS_LONE | TB_RS_END_DATA : TB_RS_NONE);
			if (i % 3 == 0) {
				both(&ep, &ph, at + 2 * MS, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE);
				both(&ep, &ph, at + 3 * MS, TB_PH_PEND_FWD, TB_BC_OPTIM, TB_RS_NONE);
			}
			both(&ep, &ph, at + 5 * MS, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);
			both(&ep, &ph, at + 9 * MS, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE);
			if (i % 3 == 2) {
				both(&ep, &ph, at + 9 * MS, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE);
				both(&ep, &ph, at + 10 * MS, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE);
			}
			at += 12 * MS;
		}
		both(&ep, &ph, at, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);	/* StopIteration */
		at += 50 * MS;
		epochs_tick(&ep, &job, at);
	}
	epochs_finish(&ep, &job, at + 5000 * MS);
	phases_thread_sum(&ph.th[0], &sum);
	ck_assert_int_eq(sum.steps.steps, 4);
	ck_assert_int_eq(sum.micro, 13);
	epochs_run_steps(&ep, 0, ep.prev.ts, &run);
	ck_assert_int_eq(run.source, EP_STEPS_OPTIM);
	ck_assert_int_eq(run.count, 4);
	ck_assert_int_eq(run.micro, 12);
	ck_assert_double_eq_tol(run.min_ms, 36.0, 1e-9);
	ck_assert_int_eq(ep.src[EP_PASSES].n, 2);
	for (int i = 0; i < ep.src[EP_PASSES].n; i++) {
		sum_epochs += ep.src[EP_PASSES].list[i].steps.count;
		ck_assert_double_ge(run.max_ms, ep.src[EP_PASSES].list[i].steps.max_ms);
	}
	ck_assert_int_eq(sum_epochs, 4);
	/* The last optimizer step ends at its last micro-batch's close, the teardown not in it. */
	ck_assert_double_eq_tol(ep.src[EP_PASSES].list[1].steps.max_ms, 36.0, 1e-9);
	phases_free(&ph);
	epochs_free(&ep);
}
END_TEST

/*
 * A loop that leaves each pass early (next() N times, then a new iter()):
 * no fetch ever ends a pass, so passes see one; the lines' three epochs
 * are taken. Once a pass ends (StopIteration: a fetch with no backward,
 * lone at the next fetch), passes count again, but the lines still win
 * while the two disagree (two passes, three epochs by the lines), and
 * passes outrank the lines again where they agree.
 */
/*
 * The last epoch ends at the loop's last phase event (its last step's
 * end), not at the end of tracing: the teardown after it is no epoch's
 * (docs/phases.md, "The share"; issue: 18.1 s against the job's 13.2 s).
 */
START_TEST(last_epoch_ends_at_the_last_step)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	const struct epoch *e;

	init(&ep, EP_AUTO, NULL);
	job_at(&job, &p, &t, 0);
	for (int k = 0; k < 3; k++) {
		train(&ep, (100 * k + 2) * MS, k ? TB_RS_LONE | TB_RS_END_DATA : TB_RS_NONE);
		train(&ep, (100 * k + 10) * MS, TB_RS_NONE);
		phase(&ep, (100 * k + 20) * MS, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
		epochs_tick(&ep, &job, (100 * k + 50) * MS);
	}
	epochs_tick(&ep, &job, 300 * MS);	/* the teardown: no event */
	if (_i)		/* the job exited: its last epoch complete, the teardown a tail */
		p.end_ns = t.end_ns = 390 * MS;
	epochs_finish(&ep, &job, 400 * MS);
	ck_assert_int_eq(epochs_source(&ep), EP_PASSES);
	ck_assert_int_eq(ep.src[EP_PASSES].n, 3);
	e = &ep.src[EP_PASSES].list[2];
	ck_assert_uint_eq(e->end, 220 * MS);
	ck_assert(e->complete == (_i == 1));	/* still running: cut by the end of tracing */
	epochs_free(&ep);
}
END_TEST

START_TEST(passes_that_never_end_yield_to_lines)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;

	init(&ep, EP_AUTO, NULL);
	job_at(&job, &p, &t, 0);
	for (int e = 0; e < 3; e++) {
		char line[32];

		snprintf(line, sizeof(line), "Epoch %d/3\n", e + 1);
		feed(&ep, TB_EV_TEXT, (100 * e + 1) * MS, line);
		train(&ep, (100 * e + 2) * MS, TB_RS_NONE);
		train(&ep, (100 * e + 10) * MS, TB_RS_NONE);
		epochs_tick(&ep, &job, (100 * e + 50) * MS);
	}
	ck_assert(!ep.pass_ended);
	ck_assert_int_eq(ep.src[EP_PASSES].n + ep.src[EP_PASSES].is_open, 1);
	ck_assert_int_eq(epochs_source(&ep), EP_REGEX);

	phase(&ep, 320 * MS, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);	/* StopIteration */
	train(&ep, 330 * MS, TB_RS_LONE | TB_RS_END_DATA);
	epochs_tick(&ep, &job, 350 * MS);
	ck_assert(ep.pass_ended);
	ck_assert_int_eq(ep.src[EP_PASSES].n + ep.src[EP_PASSES].is_open, 2);
	ck_assert_int_eq(epochs_source(&ep), EP_REGEX);
	epochs_free(&ep);

	/* Lines and passes agree: passes, whose boundaries are the fetches. */
	init(&ep, EP_AUTO, NULL);
	for (int e = 0; e < 3; e++) {
		char line[32];

		snprintf(line, sizeof(line), "Epoch %d/3\n", e + 1);
		feed(&ep, TB_EV_TEXT, (100 * e + 1) * MS, line);
		train(&ep, (100 * e + 2) * MS, e ? TB_RS_LONE | TB_RS_END_DATA : TB_RS_NONE);
		train(&ep, (100 * e + 10) * MS, TB_RS_NONE);
		phase(&ep, (100 * e + 20) * MS, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
		epochs_tick(&ep, &job, (100 * e + 50) * MS);
	}
	epochs_finish(&ep, &job, 400 * MS);
	ck_assert_int_eq(ep.src[EP_PASSES].n, 3);
	ck_assert_int_eq(ep.src[EP_REGEX].n, 3);
	ck_assert_int_eq(epochs_source(&ep), EP_PASSES);
	epochs_free(&ep);
}
END_TEST

/*
 * Attached during the job's epoch 1 (its line came before the attach): the
 * passes seen whole are the job's epochs 2 to 4, and its lines say so.
 * The epochs take the job's numbers, not 1 to 3 (issue 24: "the job's
 * epoch 2 is printed as Epoch 1"); so does a reader, aligning again
 * (nothing moves twice). Lines numbered otherwise from one epoch to the
 * next leave the passes' own numbers.
 */
static void attached_lines(int first_line, int step_line, long want_first)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	const struct ep_stream *st = &ep.src[EP_PASSES];

	init(&ep, EP_AUTO, NULL);
	ep.attached = true;
	job_at(&job, &p, &t, 0);
	train(&ep, 2 * MS, TB_RS_NONE);
	train(&ep, 10 * MS, TB_RS_NONE);
	phase(&ep, 20 * MS, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);	/* StopIteration */
	for (int e = 1; e < 4; e++) {
		char line[32];

		snprintf(line, sizeof(line), "Epoch %d/9\n", first_line + (e - 1) * step_line);
		feed(&ep, TB_EV_TEXT, (100 * e + 1) * MS, line);
		train(&ep, (100 * e + 2) * MS, TB_RS_LONE | TB_RS_END_DATA);
		train(&ep, (100 * e + 10) * MS, TB_RS_NONE);
		phase(&ep, (100 * e + 20) * MS, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
		epochs_tick(&ep, &job, (100 * e + 50) * MS);
	}
	epochs_finish(&ep, &job, 400 * MS);
	ck_assert_int_eq(epochs_source(&ep), EP_PASSES);
	ck_assert_int_eq(st->n, 3);
	epochs_align_labels(&ep, 400 * MS);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(st->list[i].label, want_first + i);
		ck_assert_int_eq(st->list[i].last, want_first + i);
	}
	epochs_free(&ep);
}

START_TEST(passes_take_the_jobs_numbers)
{
	attached_lines(2, 1, 2);	/* Epoch 2/9, 3/9, 4/9 */
	attached_lines(1, 1, 1);	/* the same numbers: nothing to do */
	attached_lines(2, 2, 1);	/* 2, 4, 6: no one offset, the passes' own */
}
END_TEST

/*
 * The phase events of one thread's loop as bpf/torch.bpf.h's resolve_step
 * flags them (a DataLoader fetcher): whether a fetch is pending (fetched),
 * held lone, in a validation run, after a training step, holding a
 * worker start-up; fork() starts one, the next fetch ends it.
 */
struct loop {
	struct epochs *ep;
	uint64_t ts;			/* now */
	bool fetched, lone, in_val, trained, st_held, in_start;
};

static unsigned int loop_resolve(struct loop *l, bool trained)
{
	unsigned int how = TB_RS_NONE;

	if (trained) {
		if (l->lone)
			how |= TB_RS_HELD_OTHER;
		if (l->fetched)
			how |= TB_RS_TRAINED;
		l->lone = l->in_val = false;
		l->trained = true;
	} else if (l->fetched && (l->lone || l->in_val) && !l->st_held) {
		l->lone = l->trained = false;
		l->in_val = true;
		how = TB_RS_VALIDATION;
	} else if (l->fetched) {
		bool ends = l->trained && !l->st_held;

		how = TB_RS_LONE | (ends ? TB_RS_END_DATA : 0);
		l->lone = true;
		l->trained = false;
	}
	if (how)
		l->st_held = false;
	l->fetched = false;
	return how;
}

/* iter(loader) forks its workers: a start-up until the next fetch. */
static void loop_fork(struct loop *l)
{
	if (!l->in_start)
		phase(l->ep, l->ts, TB_PH_PEND_START, TB_BC_NONE, TB_RS_NONE);
	l->in_start = true;
	l->ts += 5 * MS;
}

/* A fetch of ms: its start is returned (where a pass it begins begins). */
static uint64_t loop_fetch(struct loop *l, uint64_t ms)
{
	uint64_t at = l->ts;
	unsigned int how = loop_resolve(l, false);

	if (l->in_start) {
		how |= TB_RS_START_HELD;
		l->st_held = true;
		l->in_start = false;
	}
	l->fetched = true;
	phase(l->ep, at, TB_PH_PEND_DATA, TB_BC_DATA, how);
	l->ts += ms * MS;
	phase(l->ep, l->ts, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);
	return at;
}

/* The forward (ms), the backward, the optimizer. */
static void loop_train(struct loop *l, uint64_t ms)
{
	l->ts += ms * MS;
	phase(l->ep, l->ts, TB_PH_BACKWARD, TB_BC_BACKWARD, loop_resolve(l, true));
	l->ts += ms * MS;
	phase(l->ep, l->ts, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE);
	l->ts += MS;
}

/* An eval loop of n batches (forward only), and its StopIteration. */
static void loop_validate(struct loop *l, int n, bool workers, uint64_t ms)
{
	if (workers)
		loop_fork(l);
	for (int i = 0; i < n; i++) {
		loop_fetch(l, ms);
		l->ts += ms * MS;
	}
	loop_fetch(l, 1);
}

/* Ticks every ms through to the loop's now; the job's times at rate 1. */
static void loop_tick(struct loop *l, struct job *job, struct proc_rec *p,
		      struct thread_rec *t, uint64_t *next, uint64_t every_ms)
{
	while (*next <= l->ts) {
		job_at(job, p, t, *next);
		epochs_tick(l->ep, job, *next);
		*next += every_ms * MS;
	}
}

static void passes_are(const struct epochs *ep, int n, const uint64_t *starts)
{
	const struct ep_stream *st = &ep->src[EP_PASSES];

	ck_assert_int_eq(st->n, n);
	for (int i = 0; i < n; i++)
		ck_assert_uint_eq(st->list[i].start, starts[i]);
}

/*
 * One loader, then a zip of two (each step fetches from both; the first
 * fetch is lone at the second, every step): three epochs either way,
 * each from its first fetch (the zip's: its first loader's, after the
 * workers' start-up of both iter()s), at 200 ms ticks or at 2 s ticks
 * with every duration 10 times as long (a loaded machine): the same
 * boundaries, scaled. Attached (-p) during the first: the other two.
 */
static void zip_epochs(int loaders, uint64_t scale, uint64_t tick_ms, bool workers,
		       bool attached)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	struct loop l = { .ep = &ep, .ts = 10 * MS };
	uint64_t next = 0, starts[3];
	struct phases ph = { 0 };

	init(&ep, EP_AUTO, NULL);
	ep.attached = attached;
	also_phases = &ph;
	for (int e = 0; e < 3; e++) {
		if (workers) {
			starts[e] = l.ts;
			for (int k = 0; k < loaders; k++)
				loop_fork(&l);
		}
		for (int i = 0; i < 12; i++) {
			for (int k = 0; k < loaders; k++) {
				uint64_t at = loop_fetch(&l, 2 * scale);

				if (!workers && !i && !k)
					starts[e] = at;
			}
			loop_train(&l, 3 * scale);
			loop_tick(&l, &job, &p, &t, &next, tick_ms);
		}
		loop_fetch(&l, scale);	/* the first loader's StopIteration ends the zip */
		l.ts += 20 * scale * MS;	/* the epoch's log line, its end */
	}
	loop_tick(&l, &job, &p, &t, &next, tick_ms);
	job_at(&job, &p, &t, l.ts);
	epochs_finish(&ep, &job, l.ts);
	ck_assert_int_eq(epochs_source(&ep), EP_PASSES);
	/* -p: the first pass is the first seen whole, the one under way no epoch. */
	passes_are(&ep, 3 - attached, starts + attached);
	/*
	 * serve's trainbpf_epochs_total: the same rule, passes completed (the
	 * third's end is told by no next pass); one a step before, with a zip.
	 */
	ck_assert_int_eq(phases_thread(&ph, 100)->passes, 2);
	also_phases = NULL;
	phases_free(&ph);
	epochs_free(&ep);
}

START_TEST(zip_of_loaders_epochs)
{
	zip_epochs(1, 1, 200, false, false);
	zip_epochs(2, 1, 200, false, false);
	zip_epochs(3, 1, 200, true, false);
	zip_epochs(2, 10, 2000, true, false);
	zip_epochs(2, 1, 200, true, false);
	zip_epochs(2, 1, 200, true, true);
	zip_epochs(2, 1, 200, false, true);
}
END_TEST

/*
 * Validation every 8 steps of a 24-step epoch, and at the epoch's end: its
 * loader's workers start at each iter(), so its first fetch ended a
 * start-up and is no training pass's end (BPF does not mark it END_DATA):
 * three epochs, each from the training loader's first fetch, on a normal
 * and on a loaded machine.
 */
static void val_every(uint64_t scale, uint64_t tick_ms)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	struct loop l = { .ep = &ep, .ts = 10 * MS };
	uint64_t next = 0, starts[3];

	init(&ep, EP_AUTO, NULL);
	for (int e = 0; e < 3; e++) {
		for (int i = 0; i < 24; i++) {
			uint64_t at = loop_fetch(&l, 2 * scale);

			if (!i)
				starts[e] = at;
			loop_train(&l, 3 * scale);
			if ((i + 1) % 8 == 0 && i != 23)
				loop_validate(&l, 4, true, 2 * scale);
			loop_tick(&l, &job, &p, &t, &next, tick_ms);
		}
		loop_fetch(&l, scale);		/* StopIteration */
		loop_validate(&l, 4, true, 2 * scale);
	}
	job_at(&job, &p, &t, l.ts);
	epochs_finish(&ep, &job, l.ts);
	ck_assert_int_eq(epochs_source(&ep), EP_PASSES);
	passes_are(&ep, 3, starts);
	epochs_free(&ep);
}

START_TEST(validation_every_n_steps_is_no_epoch)
{
	val_every(1, 200);
	val_every(10, 2000);
}
END_TEST

/*
 * What passes cannot tell: a validation loader that starts no workers
 * (num_workers=0, or persistent ones), mid-epoch, looks like the training
 * loader's end (its first fetch is lone right after a training step), so
 * each such run begins a pass; so does each end of two training loaders
 * used in turn. The job's epoch lines, when it prints them, then disagree
 * with the passes, and auto takes the lines.
 */
START_TEST(lines_win_where_passes_disagree)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	struct loop l = { .ep = &ep, .ts = 10 * MS };
	uint64_t next = 0;

	init(&ep, EP_AUTO, NULL);
	for (int e = 0; e < 3; e++) {
		char line[32];

		snprintf(line, sizeof(line), "Epoch %d/3\n", e + 1);
		feed(&ep, TB_EV_TEXT, l.ts, line);
		l.ts += MS;
		for (int i = 0; i < 24; i++) {
			loop_fetch(&l, 2);
			loop_train(&l, 3);
			if ((i + 1) % 12 == 0 && i != 23)
				loop_validate(&l, 4, false, 2);
			loop_tick(&l, &job, &p, &t, &next, 200);
		}
		loop_fetch(&l, 1);
		loop_validate(&l, 4, false, 2);
	}
	job_at(&job, &p, &t, l.ts);
	epochs_finish(&ep, &job, l.ts);
	ck_assert_int_eq(ep.src[EP_PASSES].n, 6);	/* 3 + the 3 mid-epoch runs */
	ck_assert_int_eq(ep.src[EP_REGEX].n, 3);
	ck_assert_int_eq(epochs_source(&ep), EP_REGEX);
	epochs_free(&ep);
}
END_TEST

/*
 * Two training loaders in turn, step by step (A's 12 batches make the
 * epoch, B's 8 start over when they run out): each end of either begins a
 * pass, never one a step; the job's lines name the epochs, and win.
 * Without lines, passes are what there is.
 */
static void alternate(bool lines)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	struct loop l = { .ep = &ep, .ts = 10 * MS };
	uint64_t next = 0;
	int b = 0;

	init(&ep, EP_AUTO, NULL);
	for (int e = 0; e < 3; e++) {
		if (lines) {
			char line[32];

			snprintf(line, sizeof(line), "Epoch %d/3\n", e + 1);
			feed(&ep, TB_EV_TEXT, l.ts, line);
			l.ts += MS;
		}
		for (int i = 0; i < 24; i++) {
			if (i % 2 && b++ == 8) {
				loop_fetch(&l, 1);	/* B's StopIteration: iter(B) again */
				b = 1;
			}
			loop_fetch(&l, 2);
			loop_train(&l, 3);
			loop_tick(&l, &job, &p, &t, &next, 200);
		}
		loop_fetch(&l, 1);			/* A's StopIteration */
	}
	job_at(&job, &p, &t, l.ts);
	epochs_finish(&ep, &job, l.ts);
	/*
	 * The first, A's 2 ends before its last, B's 4 (36 of its batches:
	 * after 8, 16, 24, 32); the last pass, B's 7 steps before the end, is
	 * a tail (epochs_finish), not closed.
	 */
	ck_assert_int_eq(ep.passes, 1 + 2 + 4);
	ck_assert_int_eq(ep.src[EP_PASSES].n, 1 + 2 + 4 - 1);
	ck_assert_int_eq(epochs_source(&ep), (lines ? EP_REGEX : EP_PASSES));
	epochs_free(&ep);
}

START_TEST(alternating_loaders)
{
	alternate(true);
	alternate(false);
}
END_TEST

START_TEST(boundary_interpolated_between_refreshes)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	const struct epoch *e;

	init(&ep, EP_MARKER, NULL);
	job_at(&job, &p, &t, 100 * MS);
	epochs_tick(&ep, &job, 100 * MS);
	feed(&ep, TB_EV_MARK, 150 * MS, "TRAINBPF epoch 1\n");
	job_at(&job, &p, &t, 200 * MS);
	epochs_tick(&ep, &job, 200 * MS);	/* totals at 150: 150 ms */
	feed(&ep, TB_EV_MARK, 260 * MS, "TRAINBPF epoch 2\n");
	job_at(&job, &p, &t, 300 * MS);
	epochs_tick(&ep, &job, 300 * MS);	/* at 260: 260 ms */
	ck_assert_int_eq(ep.src[EP_MARKER].n, 1);
	e = &ep.src[EP_MARKER].list[0];
	ck_assert_int_eq(e->label, 1);
	ck_assert(e->complete);
	ck_assert_int_eq(e->start, 150 * MS);
	ck_assert_int_eq(e->end, 260 * MS);
	ck_assert_int_eq(e->n, 1);
	ck_assert_int_eq(e->d[0].own[TB_CPU], 110 * MS);
	ck_assert_int_eq(e->d[0].main_cp[TB_CPU], 110 * MS);
	job_at(&job, &p, &t, 400 * MS);
	epochs_finish(&ep, &job, 400 * MS);
	ck_assert_int_eq(ep.src[EP_MARKER].n, 2);
	e = &ep.src[EP_MARKER].list[1];
	ck_assert(!e->complete);
	ck_assert_int_eq(e->d[0].own[TB_CPU], 140 * MS);
	epochs_free(&ep);
}
END_TEST

START_TEST(step_statistics)
{
	struct epochs ep;
	struct job job;
	struct proc_rec p;
	struct thread_rec t;
	const struct ep_steps *s;

	init(&ep, EP_MARKER, NULL);
	job_at(&job, &p, &t, 0);
	feed(&ep, TB_EV_MARK, 0, "TRAINBPF epoch 1\n");
	feed(&ep, TB_EV_MARK, 10 * MS, "TRAINBPF step 1\n");
	feed(&ep, TB_EV_MARK, 20 * MS, "TRAINBPF step 2\n");
	feed(&ep, TB_EV_MARK, 50 * MS, "TRAINBPF step 3\n");
	feed(&ep, TB_EV_MARK, 60 * MS, "TRAINBPF epoch 2\n");
	epochs_tick(&ep, &job, 70 * MS);
	s = &ep.src[EP_MARKER].list[0].steps;
	ck_assert_int_eq(s->count, 3);	/* 10, 30 and 10 ms: the last ends with the epoch */
	ck_assert_double_eq_tol(s->total_ms, 50.0, 1e-9);
	ck_assert_double_eq_tol(s->min_ms, 10.0, 1e-9);
	ck_assert_double_eq_tol(s->max_ms, 30.0, 1e-9);
	epochs_free(&ep);
}
END_TEST

/* A job of up to 8 processes, one thread each. */
struct fake {
	struct job job;
	struct proc_rec p[8];
	struct thread_rec t[8];
};

static struct proc_rec *fake_add(struct fake *fk, pid_t pid, pid_t ppid,
				 uint64_t start, unsigned int flags)
{
	int i = fk->job.nprocs++;
	struct proc_rec *p = &fk->p[i];

	memset(p, 0, sizeof(*p));
	memset(&fk->t[i], 0, sizeof(fk->t[i]));
	p->pid = fk->t[i].tid = pid;
	p->ppid = ppid;
	p->start_ns = start;
	p->flags = flags;
	/* As job.c judges them: a subprocess that exec'd is none (a spawn worker: set later). */
	p->role = flags & TB_PF_EXECED ? TB_ROLE_OTHER : flags ? TB_ROLE_WORKER : TB_ROLE_TRAINER;
	p->threads = &fk->t[i];
	p->nthreads = 1;
	fk->job.procs = fk->p;
	return p;
}

/* A worker forked at ts: the event and the process it makes. */
static void fork_at(struct epochs *ep, struct fake *fk, pid_t pid, pid_t ppid,
		    uint64_t ts, unsigned int flags)
{
	fake_add(fk, pid, ppid, ts, TB_PF_FORKED | flags);
	epochs_on_fork(ep, pid, ppid, ts);
}

static void exit_at(struct epochs *ep, struct fake *fk, pid_t pid, uint64_t ts)
{
	for (int i = 0; i < fk->job.nprocs; i++)
		if (fk->p[i].pid == pid)
			fk->p[i].end_ns = fk->t[i].end_ns = ts;
	epochs_on_exit(ep, pid, ts);
}

START_TEST(worker_generations)
{
	struct fake fk = {};
	struct epochs ep;
	const struct ep_stream *st = &ep.src[EP_WORKERS];

	init(&ep, EP_WORKERS, NULL);
	fake_add(&fk, 100, 1, 0, 0);
	epochs_tick(&ep, &fk.job, 0);
	fork_at(&ep, &fk, 201, 100, 100 * MS, 0);
	fork_at(&ep, &fk, 202, 100, 101 * MS, 0);
	ck_assert(ep.fork_seen);
	ck_assert_int_eq(epochs_wake_at(&ep), EP_FORK_REFRESH_NS);
	epochs_tick(&ep, &fk.job, 200 * MS);
	ck_assert_int_eq(ep.ngens, 0);	/* might still exec */
	epochs_tick(&ep, &fk.job, 400 * MS);
	ck_assert_int_eq(ep.ngens, 1);
	ck_assert_int_eq(ep.gens[0].nworkers, 2);
	ck_assert_int_eq(ep.gens[0].fork_ts, 100 * MS);
	ck_assert(st->is_open);
	ck_assert_int_eq(st->open.ts, 100 * MS);
	/* The old ones gone, a new one: the next epoch. A subprocess that
	 * execs is none; a fork while the new one lives joins it. */
	exit_at(&ep, &fk, 201, 1000 * MS);
	exit_at(&ep, &fk, 202, 1001 * MS);
	fork_at(&ep, &fk, 203, 100, 1100 * MS, 0);
	fork_at(&ep, &fk, 204, 100, 1200 * MS, TB_PF_EXECED);
	fork_at(&ep, &fk, 205, 100, 1300 * MS, 0);
	epochs_tick(&ep, &fk.job, 1600 * MS);
	ck_assert_int_eq(ep.ngens, 2);
	ck_assert_int_eq(ep.gens[1].nworkers, 2);
	ck_assert_int_eq(ep.gens[1].epoch, 2);
	ck_assert_int_eq(st->n, 1);
	ck_assert_int_eq(st->list[0].label, 1);
	ck_assert_int_eq(st->list[0].start, 100 * MS);
	ck_assert_int_eq(st->list[0].end, 1100 * MS);
	ck_assert_int_eq(st->open_label, 2);
	ck_assert_int_eq(epochs_source(&ep), EP_WORKERS);
	epochs_free(&ep);
}
END_TEST

/*
 * Spawn-context workers (fork + exec of python) are workers once their
 * role says so, seconds after the fork (they import torch, then feed
 * their trainer): a generation from their first fork, not held up by
 * a fork judged before them, and a new one at the next epoch's re-spawn.
 * A subprocess that exec'd and ended, or runs on as no worker, makes none.
 */
START_TEST(spawn_workers_make_generations)
{
	struct fake fk = {};
	struct epochs ep;

	init(&ep, EP_WORKERS, NULL);
	fake_add(&fk, 100, 1, 0, 0);
	epochs_tick(&ep, &fk.job, 0);
	fork_at(&ep, &fk, 201, 100, 100 * MS, TB_PF_EXECED);
	fork_at(&ep, &fk, 202, 100, 110 * MS, TB_PF_EXECED);
	fork_at(&ep, &fk, 203, 100, 120 * MS, TB_PF_EXECED);	/* a daemon: no worker */
	/* Busy importing torch before any backward: trainers by the tree. */
	fk.p[1].role = fk.p[2].role = TB_ROLE_TRAINER;
	epochs_tick(&ep, &fk.job, 1000 * MS);
	ck_assert_int_eq(ep.ngens, 0);		/* still importing torch */
	ck_assert_int_eq(ep.nforks, 3);
	fk.p[1].role = fk.p[2].role = TB_ROLE_WORKER;	/* they fed their trainer */
	epochs_tick(&ep, &fk.job, 3000 * MS);
	ck_assert_int_eq(ep.ngens, 1);
	ck_assert_int_eq(ep.gens[0].parent, 100);
	ck_assert_int_eq(ep.gens[0].fork_ts, 100 * MS);
	ck_assert_int_eq(ep.gens[0].nworkers, 2);
	ck_assert_int_eq(ep.nforks, 1);		/* the daemon waits for its role */
	exit_at(&ep, &fk, 201, 5000 * MS);
	exit_at(&ep, &fk, 202, 5000 * MS);
	fork_at(&ep, &fk, 204, 100, 5100 * MS, TB_PF_EXECED);
	fork_at(&ep, &fk, 205, 100, 5200 * MS, TB_PF_EXECED);	/* a `git` */
	exit_at(&ep, &fk, 205, 5210 * MS);
	fk.p[4].role = TB_ROLE_WORKER;
	epochs_tick(&ep, &fk.job, 8000 * MS);
	ck_assert_int_eq(ep.ngens, 2);
	ck_assert_int_eq(ep.gens[1].fork_ts, 5100 * MS);
	ck_assert_int_eq(ep.gens[1].epoch, 2);
	epochs_tick(&ep, &fk.job, 120 * 1000 * MS);	/* the daemon: judged none at last */
	ck_assert_int_eq(ep.nforks, 0);
	ck_assert_int_eq(ep.ngens, 2);
	epochs_free(&ep);
}
END_TEST

static void phase_at(struct epochs *ep, uint64_t ts, unsigned int phase, unsigned int cls)
{
	struct tb_phase_event e = { .type = TB_EV_PHASE, .pid = 100, .tid = 100,
				    .phase = phase, .cls = cls, .ts = ts };

	epochs_on_phase(ep, &e);
}

/*
 * An exec'd child that waits for its role (a daemon the trainer started,
 * which never becomes a worker) does not take a generation's first batch:
 * the stall is the fork to the end of the first fetch, not to the
 * backward after it.
 */
START_TEST(daemon_waiting_for_its_role_takes_no_batch)
{
	struct fake fk = {};
	struct epochs ep;

	init(&ep, EP_AUTO, NULL);
	fake_add(&fk, 100, 1, 0, 0);
	epochs_tick(&ep, &fk.job, 0);
	fork_at(&ep, &fk, 300, 100, 10 * MS, TB_PF_EXECED);	/* the daemon */
	epochs_tick(&ep, &fk.job, 50 * MS);
	fork_at(&ep, &fk, 201, 100, 100 * MS, 0);
	epochs_tick(&ep, &fk.job, 400 * MS);			/* judged: a generation */
	ck_assert_int_eq(ep.ngens, 1);
	ck_assert_int_eq(ep.nforks, 1);				/* the daemon waits */
	phase_at(&ep, 500 * MS, TB_PH_PEND_DATA, TB_BC_DATA);	/* the first fetch */
	phase_at(&ep, 900 * MS, TB_PH_PEND_FWD, TB_BC_DATA);	/* its batch */
	phase_at(&ep, 1000 * MS, TB_PH_BACKWARD, TB_BC_BACKWARD);
	ck_assert_double_eq_tol(ep.gens[0].stall_s, 0.8, 1e-9);
	epochs_free(&ep);
}
END_TEST

/*
 * A fork that exits within JOB_HELPER_LIFE_NS without exec'ing is never
 * a worker, whatever it woke (torch.compile's `g++ --version` with no
 * g++, forked and never exec'd).
 */
START_TEST(fork_that_dies_young_is_never_a_worker)
{
	struct fake fk = {};
	struct epochs ep;

	init(&ep, EP_AUTO, NULL);
	fake_add(&fk, 100, 1, 0, 0);
	fork_at(&ep, &fk, 201, 100, 10 * MS, 0);
	fk.t[1].fed = 50;		/* woke its parent many times */
	fk.t[1].own[TB_CPU] = fk.t[1].cp[TB_CPU] = 30 * MS;	/* and computed */
	exit_at(&ep, &fk, 201, 10 * MS + JOB_HELPER_LIFE_NS - 1);
	epochs_tick(&ep, &fk.job, 500 * MS);
	ck_assert_int_eq(ep.nforks, 0);
	ck_assert_int_eq(ep.ngens, 0);
	epochs_free(&ep);
}
END_TEST

/*
 * A fork that dies before the grace without exec'ing is judged at once:
 * a helper, no worker (a fork storm makes no epochs). One that dies after
 * it is a worker.
 */
START_TEST(short_lived_fork_is_no_worker)
{
	struct fake fk = {};
	struct epochs ep;

	init(&ep, EP_AUTO, NULL);
	fake_add(&fk, 100, 1, 0, 0);
	fork_at(&ep, &fk, 201, 100, 10 * MS, 0);
	exit_at(&ep, &fk, 201, 20 * MS);
	epochs_tick(&ep, &fk.job, 30 * MS);
	ck_assert_int_eq(ep.nforks, 0);
	ck_assert_int_eq(ep.ngens, 0);
	fork_at(&ep, &fk, 202, 100, 100 * MS, 0);
	exit_at(&ep, &fk, 202, 100 * MS + EP_EXEC_GRACE_NS);
	epochs_tick(&ep, &fk.job, 400 * MS);
	ck_assert_int_eq(ep.ngens, 1);
	ck_assert_int_eq(epochs_source(&ep), EP_WORKERS);	/* auto: before windows */
	epochs_free(&ep);
}
END_TEST

/* Two ranks fork their workers at about the same time: one boundary each epoch. */
START_TEST(ranks_share_an_epoch)
{
	struct fake fk = {};
	struct epochs ep;
	const struct ep_stream *st = &ep.src[EP_WORKERS];

	init(&ep, EP_WORKERS, NULL);
	fake_add(&fk, 100, 1, 0, 0);
	fake_add(&fk, 101, 1, 0, 0);
	fork_at(&ep, &fk, 201, 100, 100 * MS, 0);
	fork_at(&ep, &fk, 301, 101, 150 * MS, 0);
	epochs_tick(&ep, &fk.job, 500 * MS);
	ck_assert_int_eq(ep.ngens, 2);
	ck_assert_int_eq(ep.gens[1].epoch, 1);
	exit_at(&ep, &fk, 201, 1000 * MS);
	exit_at(&ep, &fk, 301, 1000 * MS);
	/* Rank 101 first this time: it opens epoch 2, and 100 joins. */
	fork_at(&ep, &fk, 302, 101, 1100 * MS, 0);
	fork_at(&ep, &fk, 202, 100, 1120 * MS, 0);
	epochs_tick(&ep, &fk.job, 1500 * MS);
	ck_assert_int_eq(ep.ngens, 4);
	ck_assert_int_eq(ep.gens[2].epoch, 2);
	ck_assert_int_eq(ep.gens[3].epoch, 2);
	ck_assert_int_eq(st->n, 1);
	ck_assert_int_eq(st->list[0].start, 100 * MS);
	ck_assert_int_eq(st->list[0].end, 1100 * MS);
	ck_assert_int_eq(st->open.ts, 1100 * MS);
	epochs_free(&ep);
}
END_TEST

/* The parent's data_wait in the 2 s after the fork, between refreshes. */
START_TEST(generation_stall)
{
	struct fake fk = {};
	struct epochs ep;
	struct thread_rec *mt = &fk.t[0];

	init(&ep, EP_MARKER, NULL);	/* generations are kept whatever the source */
	fake_add(&fk, 100, 1, 0, 0);
	epochs_tick(&ep, &fk.job, 0);
	epochs_tick(&ep, &fk.job, 100 * MS);
	fork_at(&ep, &fk, 201, 100, 100 * MS, 0);
	/* From the fork on, the parent waits half the time. */
	mt->cp[TB_DATA_WAIT] = 150 * MS;
	epochs_tick(&ep, &fk.job, 400 * MS);
	ck_assert_int_eq(ep.ngens, 1);
	ck_assert(ep.gens[0].stall_s < 0);
	mt->cp[TB_DATA_WAIT] = 950 * MS;
	epochs_tick(&ep, &fk.job, 2000 * MS);
	ck_assert(ep.gens[0].stall_s < 0);	/* its window ends at 2.1 s */
	ck_assert_int_eq(epochs_wake_at(&ep), 2100 * MS);
	mt->cp[TB_DATA_WAIT] = 1050 * MS;
	epochs_tick(&ep, &fk.job, 2200 * MS);
	ck_assert_double_eq_tol(ep.gens[0].stall_s, 1.0, 1e-9);
	/* A second generation cut short by the end of tracing: what there was. */
	exit_at(&ep, &fk, 201, 2300 * MS);
	fork_at(&ep, &fk, 202, 100, 2400 * MS, 0);
	epochs_tick(&ep, &fk.job, 2400 * MS);
	mt->cp[TB_DATA_WAIT] = 1350 * MS;
	epochs_finish(&ep, &fk.job, 2700 * MS);
	ck_assert_int_eq(ep.ngens, 2);
	ck_assert_double_eq_tol(ep.gens[1].stall_s, 0.3, 1e-9);
	ck_assert_int_eq(ep.src[EP_WORKERS].n, 0);	/* not asked for */
	epochs_free(&ep);
}
END_TEST


/* ---- bounds: epochs follow the job's folds, rows fold, epochs merge ---- */

#define S (1000 * MS)

/* n exited workers of 10, each 1 s of cpu, 1 s idle, ending in [2 s, 3 s). */
static void many_gone(struct job *job, int n)
{
	for (int i = 0; i < n; i++) {
		struct proc_rec *p = job_add_proc(job, 1000 + i, 10, "w", S);
		struct thread_rec *t = job_add_thread(p, 1000 + i, "w", S);

		p->flags = TB_PF_FORKED;
		p->role = TB_ROLE_WORKER;
		t->own[TB_CPU] = t->cp[TB_CPU] = S / 2 + i;
		t->own[TB_IDLE] = t->cp[TB_IDLE] = S / 2;
		p->end_ns = t->end_ns = 2 * S + i * MS;
	}
}

START_TEST(epoch_rows_survive_a_fold)
{
	struct job job = { 0 };
	struct epochs ep;
	struct proc_rec *tr = job_add_proc(&job, 10, 1, "python", 0);
	struct thread_rec *mt = job_add_thread(tr, 10, "python", 0);
	const struct ep_stream *st = &ep.src[EP_INTERVAL];
	struct job_fold f;
	int64_t own = 0, want = 0;
	int members = 0, folded_rows = 0;
	char why[64];

	tr->root = true;
	tr->role = TB_ROLE_TRAINER;
	mt->slot = 0;
	ck_assert_int_eq(epochs_init(&ep, EP_INTERVAL, 1000.0, NULL, 0, why, sizeof(why)), 0);
	epochs_tick(&ep, &job, S / 2);	/* the window opened at 0 */
	many_gone(&job, 600);
	mt->own[TB_CPU] = mt->cp[TB_CPU] = 20 * S;
	epochs_tick(&ep, &job, 20 * S);
	/* 600 exited, 256 kept whatever their age: 344 fold. */
	ck_assert_int_eq(job_fold(&job, 20 * S, 20 * S, &f), 600 - JOB_KEEP_EXITED_PROCS);
	epochs_on_fold(&ep, &job, &f);
	job_fold_free(&f);
	mt->own[TB_CPU] = mt->cp[TB_CPU] = 30 * S;
	epochs_tick(&ep, &job, 30 * S);
	epochs_finish(&ep, &job, 30 * S);
	ck_assert_int_eq(st->n, 1);
	for (int i = 0; i < 600; i++)
		want += S + i;
	want += 30 * S;
	/* More than EP_MAX_ROWS rows: the ended ones summed, every total kept. */
	ck_assert_int_le(st->list[0].n, EP_MAX_ROWS);
	for (int i = 0; i < st->list[0].n; i++) {
		const struct ep_proc *d = &st->list[0].d[i];

		for (int c = 0; c < TB_NCAT; c++)
			own += d->own[c];
		members += d->folded ? d->folded : 1;
		folded_rows += d->folded > 0;
		if (d->folded) {
			ck_assert_int_eq(d->ppid, 10);
			ck_assert_int_eq(d->role, TB_ROLE_WORKER);
			ck_assert_int_eq(worker_tally_count(&d->tally), d->folded);
		}
	}
	ck_assert_int_eq(own, want);
	ck_assert_int_eq(members, 601);
	ck_assert_int_eq(folded_rows, 1);
	/* The headline is the trainer's, whatever folded. */
	{
		int64_t hl[TB_NCAT];

		ck_assert_int_eq(epoch_headline(&job, &st->list[0], hl), 30 * S);
	}
	epochs_free(&ep);
	job_free(&job);
}
END_TEST

/* More step markers than are kept: the whole window still counts them all. */
START_TEST(many_steps_whole_window)
{
	struct epochs ep;
	struct ep_steps s;
	int n = ST_MAX_BOUNDS + 1000;

	init(&ep, EP_MARKER, NULL);
	for (int i = 0; i < n; i++)
		epochs_add_step(&ep, (uint64_t)(i + 1) * MS, 0);
	ck_assert_int_le(ep.marks.n, ST_MAX_BOUNDS);
	ck_assert_int_eq(ep.marks.seen, n);
	/* The last one has no end yet: n - 1 steps of 1 ms. */
	ck_assert_int_eq(epochs_step_stats(&ep, 0, UINT64_MAX, false, &s), n);
	ck_assert_int_eq(s.count, n - 1);
	ck_assert_double_eq_tol(s.total_ms, n - 1, 1e-3);
	ck_assert_double_eq_tol(s.min_ms, 1.0, 1e-9);
	/* A window that cuts into the folded ones: the kept ones only. */
	epochs_step_stats(&ep, 2 * MS, UINT64_MAX, false, &s);
	ck_assert_int_eq(s.count, ep.marks.n - 1);
	epochs_free(&ep);
}
END_TEST

/* Far more epochs than EP_MAX_EPOCHS: the older ones merge, still tiling the run. */
START_TEST(many_epochs_merge)
{
	struct proc_rec p;
	struct thread_rec t;
	struct job job;
	struct epochs ep;
	const struct ep_stream *st = &ep.src[EP_INTERVAL];
	long n = EP_MAX_EPOCHS + 500, labels = 0;
	char why[64];

	job_at(&job, &p, &t, 0);
	ck_assert_int_eq(epochs_init(&ep, EP_INTERVAL, 1.0, NULL, 0, why, sizeof(why)), 0);
	for (long k = 0; k <= n; k++) {
		t.own[TB_CPU] = t.cp[TB_CPU] = k * S;
		epochs_tick(&ep, &job, k * S);
	}
	ck_assert_int_eq(st->closed, n);
	ck_assert_int_le(st->n, EP_MAX_EPOCHS);
	ck_assert_int_eq(st->list[0].label, 1);
	ck_assert_int_eq(st->list[st->n - 1].last, n);
	for (int i = 0; i < st->n; i++) {
		const struct epoch *e = &st->list[i];

		labels += e->last - e->label + 1;
		if (i)
			ck_assert_uint_eq(e->start, st->list[i - 1].end);
		ck_assert_int_eq(e->n, 1);
		/* cpu at rate 1: each one's time is its length, merged or not */
		ck_assert_int_eq(e->d[0].own[TB_CPU], (int64_t)(e->end - e->start));
	}
	ck_assert_int_eq(labels, n);
	ck_assert_ptr_eq(ep_stream_closed(st, n - 1), &st->list[st->n - 1]);
	ck_assert_ptr_null(ep_stream_closed(st, 0));	/* merged away */
	epochs_free(&ep);
}
END_TEST

START_TEST(parse_sources)
{
	enum ep_source s;
	double iv = 0;

	ck_assert_int_eq(epochs_parse_source("auto", &s, &iv), 0);
	ck_assert_int_eq(s, EP_AUTO);
	ck_assert_int_eq(epochs_parse_source("interval:2.5", &s, &iv), 0);
	ck_assert_int_eq(s, EP_INTERVAL);
	ck_assert_double_eq(iv, 2.5);
	ck_assert_int_ne(epochs_parse_source("interval", &s, &iv), 0);
	ck_assert_int_ne(epochs_parse_source("interval:0", &s, &iv), 0);
	ck_assert_int_eq(epochs_parse_source("workers", &s, &iv), 0);
	ck_assert_int_eq(s, EP_WORKERS);
	ck_assert_int_ne(epochs_parse_source("worker", &s, &iv), 0);
}
END_TEST

/*
 * A node daemon: a parent per job, thousands of jobs, each parent's one
 * generation its first and its last. Those of ended parents merge; a live
 * parent's last stays its own, and so does a stall still being measured.
 */
START_TEST(many_parents_gens_merge)
{
	struct proc_rec p;
	struct thread_rec t;
	struct job job;
	struct epochs ep;
	int n = EP_MAX_GENS + 100, live = 7, open = 9, workers = 0, seen_live = 0;
	char why[64];

	job_at(&job, &p, &t, 0);
	p.pid = t.tid = 1000 + live;	/* the one parent still running */
	ck_assert_int_eq(epochs_init(&ep, EP_WORKERS, 1.0, NULL, 0, why, sizeof(why)), 0);
	ep.gens = calloc(n + 1, sizeof(*ep.gens));
	ep.workers = calloc(n, sizeof(*ep.workers));
	ck_assert(ep.gens && ep.workers);
	ep.capgens = n + 1;
	ep.capworkers = n;
	for (int i = 0; i < n; i++) {
		ep.gens[i] = (struct ep_worker_gen){ .parent = 1000 + i, .fork_ts = i * S,
						     .nworkers = 2, .stall_s = 0.5, .epoch = i + 1 };
		ep.workers[i] = (struct ep_worker){ .pid = 5000 + i, .gen = i };
	}
	ep.gens[open].stall_s = -1;
	ep.ngens = ep.nworkers = n;
	ep_gens_merge_older(&ep, &job);
	ck_assert_int_le(ep.ngens, EP_MAX_GENS);
	for (int g = 0; g < ep.ngens; g++) {
		const struct ep_worker_gen *w = &ep.gens[g];

		workers += w->nworkers;
		if (w->parent == 1000 + live || w->parent == 1000 + open)
			ck_assert_int_le(w->merged, 1);
		seen_live += w->parent == 1000 + live;
	}
	ck_assert_int_eq(seen_live, 1);
	ck_assert_int_eq(workers, 2 * n);
	/* Each worker still points at the generation that holds it. */
	for (int i = 0; i < ep.nworkers; i++) {
		ck_assert_int_lt(ep.workers[i].gen, ep.ngens);
		ck_assert_uint_le(ep.gens[ep.workers[i].gen].fork_ts, (uint64_t)i * S);
	}
	ck_assert_int_eq(ep.gens[ep.workers[live].gen].parent, 1000 + live);
	ck_assert_int_eq(ep.gens[ep.workers[open].gen].parent, 1000 + open);
	ck_assert_int_eq(ep.gens[ep.workers[n - 1].gen].parent, 1000 + n - 1);
	epochs_free(&ep);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("epochs");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, default_regex_forms);
	tcase_add_test(tc, open_wait_gives_no_negative_share);
	tcase_add_test(tc, summary_lines_end_their_epoch);
	tcase_add_test(tc, teardown_after_last_summary_is_no_epoch);
	tcase_add_test(tc, repeated_lines_are_one_boundary);
	tcase_add_test(tc, regex_without_number_counts);
	tcase_add_test(tc, markers_and_source_choice);
	tcase_add_test(tc, passes_that_never_end_yield_to_lines);
	tcase_add_loop_test(tc, last_epoch_ends_at_the_last_step, 0, 2);
	tcase_add_test(tc, boundary_interpolated_between_refreshes);
	tcase_add_test(tc, zip_of_loaders_epochs);
	tcase_add_test(tc, passes_take_the_jobs_numbers);
	tcase_add_test(tc, validation_every_n_steps_is_no_epoch);
	tcase_add_test(tc, lines_win_where_passes_disagree);
	tcase_add_test(tc, alternating_loaders);
	tcase_add_test(tc, step_statistics);
	tcase_add_test(tc, parse_sources);
	tcase_add_test(tc, worker_generations);
	tcase_add_test(tc, short_lived_fork_is_no_worker);
	tcase_add_test(tc, spawn_workers_make_generations);
	tcase_add_test(tc, fork_that_dies_young_is_never_a_worker);
	tcase_add_test(tc, daemon_waiting_for_its_role_takes_no_batch);
	tcase_add_test(tc, ranks_share_an_epoch);
	tcase_add_test(tc, generation_stall);
	tcase_add_test(tc, epoch_rows_survive_a_fold);
	tcase_add_test(tc, many_epochs_merge);
	tcase_add_test(tc, many_parents_gens_merge);
	tcase_add_test(tc, many_steps_whole_window);
	tcase_add_test(tc, one_count_of_steps);
	tcase_add_test(tc, optimizer_steps_are_the_steps);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
