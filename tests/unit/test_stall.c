// SPDX-License-Identifier: BSD-3-Clause
/*
 * The stall model without BPF: synthetic ranks refreshed on a clock, the
 * threshold that follows the median step, the culprit, the clearing.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "sections.h"
#include "stall.h"
#include "session.h"

#define MS 1000000ull
#define S 1000000000ull
#define TICK (200 * MS)

/* A rank whose trainer thread is on CPU in forward, no workers. */
static struct stall_obs rank_obs(pid_t pid, int rank)
{
	struct stall_obs o = { .pid = pid, .rank = rank };

	o.tr.tid = pid;
	o.tr.state = TB_ST_ONCPU;
	o.tr.phase = TB_PH_FORWARD;
	return o;
}

static void block(struct stall_obs *o, int wait, int phase, uint64_t since)
{
	o->tr.state = TB_ST_BLOCKED;
	o->tr.wait = wait;
	o->tr.phase = phase;
	o->tr.since = since;
}

/*
 * Ticks from *t to until, each rank making one step every step_ns (all of
 * them, lockstep) while stepping; the trainer's cpu counter grows.
 */
static void run(struct stall *st, struct stall_obs *o, int n, uint64_t *t, uint64_t until,
		uint64_t step_ns, bool stepping)
{
	for (; *t < until; *t += TICK) {
		for (int i = 0; i < n; i++) {
			if (stepping) {
				o[i].steps = *t / step_ns;
				o[i].progress = o[i].steps;
			}
			o[i].cp[TB_CPU] = *t;
		}
		stall_update(st, o, n, *t);
	}
}

START_TEST(threshold_median)
{
	uint64_t h[5] = { 100 * MS, 5 * S, 90 * MS, 110 * MS, 100 * MS };

	ck_assert_uint_eq(stall_threshold(0, NULL, 0), STALL_FLOOR_NS);
	ck_assert_uint_eq(stall_threshold(3 * S, NULL, 0), 3 * S);
	/* The median, not the mean: one long step (a checkpoint) moves it not. */
	ck_assert_uint_eq(stall_threshold(0, h, 5), STALL_FLOOR_NS);
	ck_assert_uint_eq(stall_threshold(S / 2, h, 5), 1000 * MS);
	h[0] = h[2] = h[3] = 4 * S;
	ck_assert_uint_eq(stall_threshold(3 * S, h, 5), 40 * S);
	/* An even count: the mean of the middle two. */
	uint64_t e[4] = { 5 * S, 1 * S, 4 * S, 2 * S };

	ck_assert_uint_eq(stall_threshold(S, e, 4), 30 * S);
}
END_TEST

/* Stalled only past the threshold after the last progress, not before. */
START_TEST(stalls_after_threshold)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o = rank_obs(100, 0);
	const struct stall_job *j;
	uint64_t t = TICK;

	run(&st, &o, 1, &t, 10 * S, 100 * MS, true);
	j = stall_job(&st, "");
	ck_assert_ptr_nonnull(j);
	ck_assert(!j->stalled);
	ck_assert_uint_eq(j->threshold_ns, 3 * S);	/* 10 x 100 ms < the floor */
	uint64_t last = j->progress_ns;

	run(&st, &o, 1, &t, last + 3 * S + 1, 100 * MS, false);
	ck_assert(!stall_job(&st, "")->stalled);
	run(&st, &o, 1, &t, last + 3 * S + TICK + 1, 100 * MS, false);
	j = stall_job(&st, "");
	ck_assert(j->stalled);
	ck_assert_uint_eq(j->since, last);
	ck_assert_int_eq(j->nranks, 1);
	ck_assert(j->culprit && j->ranks[0].culprit);
	ck_assert_int_eq(j->ranks[0].wait, TB_CPU);	/* a loop spinning in forward */
	ck_assert_int_eq(j->ranks[0].phase, TB_PH_FORWARD);
	ck_assert_int_eq(j->ranks[0].cat, TB_CPU);
	/* The cpu it spent since the stall: from the last progress to now. */
	ck_assert_uint_eq(j->ranks[0].cat_ns, j->now - last);
	stall_free(&st);
}
END_TEST

/* Slow steps raise the threshold: 2 s steps are no stall after 5 s quiet. */
START_TEST(slow_job_not_stalled)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o = rank_obs(100, 0);
	uint64_t t = TICK;

	run(&st, &o, 1, &t, 60 * S, 2 * S, true);
	ck_assert_uint_eq(stall_job(&st, "")->threshold_ns, 20 * S);
	/* The last step ended at 58 s: quiet until 78 s is within it. */
	run(&st, &o, 1, &t, 78 * S + 1, 2 * S, false);
	ck_assert(!stall_job(&st, "")->stalled);
	run(&st, &o, 1, &t, 78 * S + TICK + 1, 2 * S, false);
	ck_assert(stall_job(&st, "")->stalled);
	stall_free(&st);
}
END_TEST

/* No progress ever: never judged (start-up, a hang before the first step). */
/*
 * Steps longer than the floor from the first one (a large model: 10 s
 * steps under a 3 s floor): not stalled in the first step, which no step
 * time yet bounds, nor after (10 x 10 s); a hang after that is.
 */
START_TEST(long_first_step_not_stalled)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o = rank_obs(100, 0);
	uint64_t t = TICK;

	o.progress = 1;	/* its first fetch */
	stall_update(&st, &o, 1, t);
	for (int step = 1; step <= 4; step++) {
		for (; t < step * 10 * S; t += TICK) {
			stall_update(&st, &o, 1, t);
			ck_assert(!stall_job(&st, "")->stalled);
		}
		o.steps = step;
		o.progress = step + 1;
	}
	stall_update(&st, &o, 1, t);
	ck_assert_uint_eq(stall_job(&st, "")->threshold_ns, 100 * S);
	run(&st, &o, 1, &t, t + 100 * S + 2 * TICK, 10 * S, false);
	ck_assert(stall_job(&st, "")->stalled);
	stall_free(&st);
}
END_TEST

/*
 * The stall starts at the last progress's own time (its event's), not at
 * the refresh that saw it: a refresh 0.4 s late under load made the
 * STALLED line's "for" 0.4 s short of the trainer's wait.
 */
START_TEST(stall_starts_at_the_progress_itself)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o = rank_obs(100, 0);
	const struct stall_job *j;
	uint64_t t = TICK;

	run(&st, &o, 1, &t, 5 * S, 100 * MS, true);
	o.steps++;
	o.progress++;
	o.progress_at = t + 10 * MS;	/* its fetch began here */
	t += 400 * MS;			/* a late refresh sees it */
	stall_update(&st, &o, 1, t);
	run(&st, &o, 1, &t, t + 4 * S, 100 * MS, false);
	j = stall_any(&st);
	ck_assert_ptr_nonnull(j);
	ck_assert_uint_eq(j->since, o.progress_at);
	stall_free(&st);
}
END_TEST

START_TEST(no_progress_no_stall)
{
	struct stall st = { .floor_ns = S };
	struct stall_obs o = rank_obs(100, 0);
	uint64_t t = TICK;

	run(&st, &o, 1, &t, 100 * S, S, false);
	ck_assert(!stall_job(&st, "")->stalled);
	ck_assert_ptr_null(stall_any(&st));
	stall_free(&st);
}
END_TEST

/* A step after the stall clears it; the next stall is timed from it. */
START_TEST(resume_clears)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o = rank_obs(100, 0);
	uint64_t t = TICK;

	run(&st, &o, 1, &t, 5 * S, 100 * MS, true);
	run(&st, &o, 1, &t, 10 * S, 100 * MS, false);
	ck_assert(stall_job(&st, "")->stalled);
	ck_assert_ptr_nonnull(stall_any(&st));
	o.steps++;
	o.progress++;
	stall_update(&st, &o, 1, t);
	ck_assert(!stall_job(&st, "")->stalled);
	ck_assert_uint_eq(stall_job(&st, "")->progress_ns, t);
	ck_assert_ptr_null(stall_any(&st));
	stall_free(&st);
}
END_TEST

/* A fetch is progress too: a validation loop with no training step is no stall. */
START_TEST(validation_is_progress)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o = rank_obs(100, 0);
	uint64_t t = TICK;

	run(&st, &o, 1, &t, 5 * S, 100 * MS, true);
	for (; t < 20 * S; t += TICK) {
		o.progress++;	/* a validation batch a tick */
		stall_update(&st, &o, 1, t);
	}
	ck_assert(!stall_job(&st, "")->stalled);
	stall_free(&st);
}
END_TEST

/*
 * One rank's DataLoader worker sleeps in __getitem__; the other rank waits
 * in backward's allreduce (gloo: its threads on sockets). The culprit is
 * the rank in data_wait, named with its worker; the other is in comm.
 */
START_TEST(culprit_dead_worker)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o[2] = { rank_obs(200, 0), rank_obs(300, 1) };
	const struct stall_job *j;
	uint64_t t = TICK;

	run(&st, o, 2, &t, 5 * S, 100 * MS, true);
	uint64_t stop = t;

	block(&o[0], TB_W_FUTEX, TB_PH_BACKWARD, stop);
	o[0].net_blocked = 2;
	block(&o[1], TB_W_POLL, TB_PH_PEND_DATA, stop + MS);
	o[1].net_blocked = 2;
	o[1].nworkers = 2;
	/* Worker 301 has its batch ready and waits on its index queue; 302 sleeps. */
	o[1].workers[0].pid = 301;
	o[1].workers[0].main = (struct stall_thread_obs){ .tid = 301, .state = TB_ST_BLOCKED,
							 .wait = TB_W_POLL, .since = stop + 2 * S };
	o[1].workers[1].pid = 302;
	o[1].workers[1].main = (struct stall_thread_obs){ .tid = 302, .state = TB_ST_BLOCKED,
							 .wait = TB_W_SLEEP, .since = stop - 50 * MS };
	for (; t < stop + 4 * S; t += TICK) {
		o[0].cp[TB_IDLE] += TICK;
		o[1].cp[TB_IDLE] += TICK;
		stall_update(&st, o, 2, t);
	}
	j = stall_any(&st);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(j->nranks, 2);
	ck_assert(j->culprit);
	ck_assert_int_eq(j->ranks[0].rank, 1);		/* the culprit first */
	ck_assert(j->ranks[0].culprit);
	ck_assert_int_eq(j->ranks[0].wait, TB_DATA_WAIT);
	ck_assert_int_eq(j->ranks[0].worker, 302);
	ck_assert_int_eq(j->ranks[0].worker_wait, TB_W_SLEEP);
	ck_assert_uint_eq(j->ranks[0].worker_ns, j->now - (stop - 50 * MS));
	ck_assert_int_eq(j->ranks[0].cat, TB_IDLE);
	ck_assert_int_eq(j->ranks[1].rank, 0);
	ck_assert(!j->ranks[1].culprit);
	ck_assert_int_eq(j->ranks[1].wait, TB_COMM);
	ck_assert_int_eq(j->ranks[1].phase, TB_PH_BACKWARD);
	/*
	 * A worker of the rank in backward that is busy (a batch of its own
	 * in I/O) does not make its allreduce a data wait.
	 */
	o[0].nworkers = 1;
	o[0].workers[0].pid = 201;
	o[0].workers[0].main = (struct stall_thread_obs){ .tid = 201, .state = TB_ST_BLOCKED,
							 .wait = TB_W_IOWAIT, .since = stop };
	ck_assert_int_eq(stall_wait_kind(&o[0]), TB_COMM);
	/* Unnamed phases (other): the busy worker tells. */
	o[0].tr.phase = TB_PH_OTHER;
	o[0].tr.wait = TB_W_POLL;
	ck_assert_int_eq(stall_wait_kind(&o[0]), TB_DATA_WAIT);
	stall_free(&st);
}
END_TEST

/*
 * A DataLoader's trainer wakes every 5 s to check its workers: a refresh
 * that lands in that wake-up (on a CPU, or waiting for one) does not
 * restart its wait; two in a row do.
 */
START_TEST(wait_survives_a_timeout_wakeup)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o = rank_obs(200, 0);
	const struct stall_job *j;
	uint64_t t = TICK, stop;

	run(&st, &o, 1, &t, 5 * S, 100 * MS, true);
	stop = t;
	block(&o, TB_W_FUTEX, TB_PH_PEND_DATA, stop);
	o.nworkers = 1;
	o.workers[0].pid = 201;
	o.workers[0].main = (struct stall_thread_obs){ .tid = 201, .state = TB_ST_BLOCKED,
						     .wait = TB_W_SLEEP, .since = stop };
	run(&st, &o, 1, &t, stop + 5 * S, 100 * MS, false);
	o.tr.state = TB_ST_RUNNABLE;		/* the timeout's wake-up */
	o.tr.since = t;
	run(&st, &o, 1, &t, t + TICK, 100 * MS, false);
	block(&o, TB_W_FUTEX, TB_PH_PEND_DATA, t - MS);
	run(&st, &o, 1, &t, t + 2 * S, 100 * MS, false);
	j = stall_any(&st);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(j->ranks[0].wait, TB_DATA_WAIT);
	ck_assert_uint_eq(j->ranks[0].wait_ns, j->now - stop);
	/* On a CPU at two refreshes: it runs now. */
	o.tr.state = TB_ST_ONCPU;
	o.tr.since = t;
	run(&st, &o, 1, &t, t + 2 * TICK, 100 * MS, false);
	j = stall_any(&st);
	ck_assert_int_eq(j->ranks[0].wait, TB_CPU);
	ck_assert_uint_eq(j->ranks[0].wait_ns, j->now - (t - 2 * TICK));
	stall_free(&st);
}
END_TEST

/* Rank 2 sleeps in its loop while ranks 0 and 1 wait in the collective. */
START_TEST(culprit_not_in_collective)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o[3] = { rank_obs(200, 0), rank_obs(300, 1), rank_obs(400, 2) };
	const struct stall_job *j;
	uint64_t t = TICK;

	run(&st, o, 3, &t, 5 * S, 100 * MS, true);
	for (int i = 0; i < 3; i++)
		o[i].net_blocked = 1;
	block(&o[0], TB_W_FUTEX, TB_PH_BACKWARD, t);
	block(&o[1], TB_W_SOCKET, TB_PH_COMM, t);
	block(&o[2], TB_W_SLEEP, TB_PH_FORWARD, t + 10 * MS);
	run(&st, o, 3, &t, t + 4 * S, 100 * MS, false);
	j = stall_any(&st);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(j->ranks[0].rank, 2);
	ck_assert(j->ranks[0].culprit);
	ck_assert_int_eq(j->ranks[0].wait, TB_IDLE);
	ck_assert_int_eq(j->ranks[0].phase, TB_PH_FORWARD);
	ck_assert_int_eq(j->ranks[1].wait, TB_COMM);
	ck_assert_int_eq(j->ranks[2].wait, TB_COMM);
	ck_assert_int_eq(j->ranks[1].rank, 0);
	ck_assert_int_eq(j->ranks[2].rank, 1);
	stall_free(&st);
}
END_TEST

/* All in NCCL collectives: the rank that entered fewer; equal counts: none named. */
START_TEST(culprit_fewest_collectives)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o[2] = { rank_obs(200, 0), rank_obs(300, 1) };
	const struct stall_job *j;
	uint64_t t = TICK;

	run(&st, o, 2, &t, 5 * S, 100 * MS, true);
	for (int i = 0; i < 2; i++) {
		o[i].tr.depth = 1;
		o[i].tr.region = TB_COMM;
		o[i].has_coll = true;
		o[i].coll = 500;
	}
	run(&st, o, 2, &t, t + 4 * S, 100 * MS, false);
	j = stall_any(&st);
	ck_assert_ptr_nonnull(j);
	ck_assert(!j->culprit);
	o[0].coll = 499;
	stall_update(&st, o, 2, t);
	j = stall_any(&st);
	ck_assert(j->culprit);
	ck_assert_int_eq(j->ranks[0].rank, 0);
	ck_assert(j->ranks[0].in_api);
	stall_free(&st);
}
END_TEST

static void comm_calls(struct stall_obs *o, uint64_t key, uint64_t calls)
{
	o->comms[o->ncomms].key = key;
	o->comms[o->ncomms++].calls = calls;
}

/*
 * A rank stuck in a collective of its own subgroup while its peer waits in
 * the world's: both in NCCL calls, and the totals point at the wrong rank
 * (rank 1 made 3 more calls on its own communicator). Per communicator,
 * rank 1 is one call behind on the shared one: the culprit.
 */
START_TEST(culprit_behind_on_a_communicator)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o[2] = { rank_obs(200, 0), rank_obs(300, 1) };
	const struct stall_job *j;
	uint64_t t = TICK;

	run(&st, o, 2, &t, 5 * S, 100 * MS, true);
	for (int i = 0; i < 2; i++) {
		o[i].tr.depth = 1;
		o[i].tr.region = TB_COMM;
		o[i].has_coll = true;
	}
	comm_calls(&o[0], 0xdeadbeef01020304ull, 401);
	comm_calls(&o[1], 0xdeadbeef01020304ull, 400);
	comm_calls(&o[1], 0x1111, 4);	/* its own split: no peer seen, not compared */
	comm_calls(&o[0], 0x2222, 9);
	o[0].coll = 401 + 9;
	o[1].coll = 400 + 4 + 9 + 1;	/* more in all */
	run(&st, o, 2, &t, t + 4 * S, 100 * MS, false);
	j = stall_any(&st);
	ck_assert_ptr_nonnull(j);
	ck_assert(j->culprit);
	ck_assert_int_eq(j->ranks[0].rank, 1);
	ck_assert_uint_eq(j->ranks[0].behind, 1);
	ck_assert_uint_eq(j->ranks[0].behind_comm, 0xdeadbeef01020304ull);
	ck_assert_uint_eq(j->ranks[1].behind, 0);
	/* Its peer waits in its next sync, not in a call: still the one behind. */
	o[0].tr.region = TB_GPU_WAIT;
	o[1].tr.depth = 0;
	block(&o[1], TB_W_SLEEP, TB_PH_FORWARD, t - S);
	o[1].comms[0].calls = 395;
	stall_update(&st, o, 2, t);
	j = stall_any(&st);
	ck_assert_int_eq(j->ranks[0].rank, 1);
	ck_assert_uint_eq(j->ranks[0].behind, 6);
	/* Shared counts agree, both in calls: none named, whatever the totals say. */
	o[1].comms[0].calls = 401;
	o[1].tr.depth = 1;
	o[1].tr.region = TB_COMM;
	o[0].tr.region = TB_COMM;
	stall_update(&st, o, 2, t + TICK);
	j = stall_any(&st);
	ck_assert(!j->culprit);
	ck_assert_uint_eq(j->ranks[0].behind + j->ranks[1].behind, 0);
	stall_free(&st);
}
END_TEST

/* serve: jobs apart; a job whose ranks are all gone is forgotten. */
START_TEST(jobs_apart)
{
	struct stall st = { .floor_ns = 3 * S };
	struct stall_obs o[2] = { rank_obs(200, 0), rank_obs(300, 0) };
	uint64_t t = TICK;

	strcpy(o[0].job, "a");
	strcpy(o[1].job, "b");
	run(&st, o, 2, &t, 5 * S, 100 * MS, true);
	for (; t < 10 * S; t += TICK) {
		o[1].steps++;
		o[1].progress++;
		stall_update(&st, o, 2, t);
	}
	ck_assert(stall_job(&st, "a")->stalled);
	ck_assert(!stall_job(&st, "b")->stalled);
	stall_update(&st, &o[1], 1, t);
	ck_assert_ptr_null(stall_job(&st, "a"));
	ck_assert_int_eq(st.njobs, 1);
	stall_free(&st);
}
END_TEST

/* The STALLED line and rows, and the JSON member, of a stalled job: every number as the model has it. */
START_TEST(report_outputs)
{
	static struct session ses;
	struct stall *st = &ses.stall;
	struct stall_obs o[2] = { rank_obs(200, 0), rank_obs(300, 1) };
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	struct jw w;
	uint64_t t = TICK;

	session_init(&ses);
	st->floor_ns = 3 * S;
	ses.stall_on = true;
	run(st, o, 2, &t, 5 * S, 100 * MS, true);
	uint64_t stop = t;	/* 5 s: the last progress was seen at 4.8 s */

	block(&o[0], TB_W_FUTEX, TB_PH_BACKWARD, stop);
	o[0].net_blocked = 1;
	block(&o[1], TB_W_POLL, TB_PH_PEND_DATA, stop);
	o[1].nworkers = 1;
	o[1].workers[0].pid = 301;
	o[1].workers[0].main = (struct stall_thread_obs){ .tid = 301, .state = TB_ST_BLOCKED,
							 .wait = TB_W_SLEEP, .since = 4 * S };
	for (; t <= 10 * S; t += TICK) {
		o[0].cp[TB_IDLE] += TICK;
		o[1].cp[TB_IDLE] += TICK;
		stall_update(st, o, 2, t);
	}
	f = open_memstream(&text, &len);
	report_stall_text(f, &ses);
	fclose(f);
	ck_assert_str_eq(text,
		"STALLED for 5.2 s (no step or batch for more than 3.0 s): culprit rank 1 (pid 300) "
		"in data, waiting in data_wait 5.0 s on DataLoader worker 301 (sleeping 6.0 s)\n"
		"  * rank 1 (pid 300) in data, waiting in data_wait 5.0 s on DataLoader worker 301 "
		"(sleeping 6.0 s); since the stall mostly idle 5.2 s\n"
		"    rank 0 (pid 200) in backward, waiting in comm 5.0 s; since the stall mostly idle 5.2 s\n");
	free(text);
	f = open_memstream(&text, &len);
	jw_init(&w, f);
	jw_object(&w);
	report_stall_json(&w, &ses);
	jw_end_object(&w);
	fclose(f);
	ck_assert_str_eq(text,
		"{\"stall\":{\"since_s\":4.800,\"for_s\":5.200,\"threshold_s\":3.000,"
		"\"culprit_pid\":300,\"ranks\":["
		"{\"rank\":1,\"pid\":300,\"culprit\":true,\"phase\":\"data\",\"waits_in\":\"data_wait\","
		"\"wait_s\":5.000,\"inside\":null,\"inside_bytes\":null,\"worker\":{\"pid\":301,\"state\":\"sleeping\","
		"\"for_s\":6.000},\"object\":null,\"behind\":null,\"since_stall_category\":\"idle\","
		"\"since_stall_s\":5.200},"
		"{\"rank\":0,\"pid\":200,\"culprit\":false,\"phase\":\"backward\",\"waits_in\":\"comm\","
		"\"wait_s\":5.000,\"inside\":null,\"inside_bytes\":null,\"worker\":null,"
		"\"object\":null,\"behind\":null,"
		"\"since_stall_category\":\"idle\","
		"\"since_stall_s\":5.200}]}}");
	free(text);
	/* Not stalled: nothing at all. */
	o[0].progress++;
	stall_update(st, o, 2, t);
	f = open_memstream(&text, &len);
	report_stall_text(f, &ses);
	fclose(f);
	ck_assert_str_eq(text, "");
	free(text);
	session_free(&ses);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stall");
	TCase *tc = tcase_create("model");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, threshold_median);
	tcase_add_test(tc, stalls_after_threshold);
	tcase_add_test(tc, slow_job_not_stalled);
	tcase_add_test(tc, no_progress_no_stall);
	tcase_add_test(tc, long_first_step_not_stalled);
	tcase_add_test(tc, stall_starts_at_the_progress_itself);
	tcase_add_test(tc, resume_clears);
	tcase_add_test(tc, validation_is_progress);
	tcase_add_test(tc, wait_survives_a_timeout_wakeup);
	tcase_add_test(tc, culprit_dead_worker);
	tcase_add_test(tc, culprit_not_in_collective);
	tcase_add_test(tc, culprit_fewest_collectives);
	tcase_add_test(tc, culprit_behind_on_a_communicator);
	tcase_add_test(tc, jobs_apart);
	tcase_add_test(tc, report_outputs);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
