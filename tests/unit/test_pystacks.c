// SPDX-License-Identifier: BSD-3-Clause
/*
 * The Python stacks' model (user/model/pystacks.c): the time BPF keeps per
 * span of a thread's phase events goes to the phase the phase table gives
 * that span, once it is over and its step has said; a lost event is
 * counted from the low byte BPF sends; functions, stacks and rows are
 * kept once each, however many.
 */
#include <check.h>
#include <stdio.h>
#include "pystacks.h"

#define MS 1000000ull

static uint32_t seq;	/* BPF's count, as torch.bpf.h keeps it */

static void send(struct pystacks *m, uint64_t ms, unsigned int phase, unsigned int cls,
		 unsigned int resolved)
{
	struct tb_phase_event e = { .type = TB_EV_PHASE, .pid = 7, .tid = 7, .phase = phase,
				    .cls = cls, .resolved = resolved,
				    .seq = (uint8_t)++seq, .ts = 1000 * MS + ms * MS };

	pystacks_on_phase(m, &e);
}

/* A training step at t (ms), the events test_phases.c's step() sends. */
static void step(struct pystacks *m, uint64_t t)
{
	send(m, t, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);		/* seq+1: data */
	send(m, t + 2, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);		/* +2: forward */
	send(m, t + 5, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);	/* +3 */
	send(m, t + 9, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE);	/* +4: empty */
	send(m, t + 9, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE);	/* +5 */
	send(m, t + 10, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE);		/* +6 */
}

static int phase_of(struct pystacks *m, uint32_t s, int raw, bool *final)
{
	return pystacks_phase_of(m, 7, s, raw, final);
}

START_TEST(spans_take_the_phase_their_step_gives)
{
	struct pystacks m;
	bool final;

	seq = 0;
	pystacks_init(&m, 10 * MS);
	/* Before any event: other, and not final (it may be a worker's, or a loop's setup). */
	ck_assert_int_eq(phase_of(&m, 0, TB_PH_OTHER, &final), PH_OTHER);
	ck_assert(!final);
	step(&m, 0);
	/* The step's fetch and forward wait for the backward: it came. */
	ck_assert_int_eq(phase_of(&m, 0, TB_PH_OTHER, &final), PH_SETUP);
	ck_assert(final);
	ck_assert_int_eq(phase_of(&m, 1, TB_PH_PEND_DATA, &final), PH_DATA);
	ck_assert(final);
	ck_assert_int_eq(phase_of(&m, 2, TB_PH_PEND_FWD, &final), PH_FORWARD);
	ck_assert(final);
	ck_assert_int_eq(phase_of(&m, 3, TB_PH_BACKWARD, &final), PH_BACKWARD);
	ck_assert(final);
	ck_assert_int_eq(phase_of(&m, 5, TB_PH_OPTIMIZER, &final), PH_OPTIMIZER);
	ck_assert(final);
	/* The span under way takes more time yet. */
	phase_of(&m, 6, TB_PH_OTHER, &final);
	ck_assert(!final);
	/* The next step's fetch is pending until its backward. */
	send(&m, 10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);
	ck_assert_int_eq(phase_of(&m, 6, TB_PH_OTHER, &final), PH_OTHER);
	ck_assert(final);
	ck_assert_int_lt(phase_of(&m, 7, TB_PH_PEND_DATA, &final), 0);
	ck_assert(!final);
	send(&m, 12, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);
	ck_assert(phase_of(&m, 7, TB_PH_PEND_DATA, &final) < 0 && !final);
	send(&m, 15, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);
	ck_assert_int_eq(phase_of(&m, 7, TB_PH_PEND_DATA, &final), PH_DATA);
	ck_assert(final);
	ck_assert_int_eq(phase_of(&m, 8, TB_PH_PEND_FWD, &final), PH_FORWARD);
	ck_assert(final);
	/* Pruned once moved out: the spans a thread keeps stay few. */
	pystacks_prune(&m);
	ck_assert_int_eq(m.th[0].nspans, 1);	/* the one under way */
	/* The end: the span under way is the teardown, as the table's rows. */
	pystacks_finish(&m, 1000 * MS + 20 * MS);
	ck_assert_int_eq(phase_of(&m, 9, TB_PH_BACKWARD, &final), PH_TEARDOWN);
	ck_assert(final);
	pystacks_free(&m);
}
END_TEST

/* A validation pass: its fetches' spans wait for the next fetch to say. */
START_TEST(validation_spans)
{
	struct pystacks m;
	bool final;

	seq = 0;
	pystacks_init(&m, 10 * MS);
	step(&m, 0);				/* seq 1-6 */
	send(&m, 10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);	/* 7: val 1 */
	send(&m, 11, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);	/* 8 */
	ck_assert_int_lt(phase_of(&m, 7, TB_PH_PEND_DATA, &final), 0);
	ck_assert(!final);
	send(&m, 15, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_LONE);	/* 9: val 2, 1 held */
	send(&m, 16, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);	/* 10 */
	send(&m, 20, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_VALIDATION);	/* 11 */
	ck_assert_int_eq(phase_of(&m, 7, TB_PH_PEND_DATA, &final), PH_VALIDATION);
	ck_assert(final);
	ck_assert_int_eq(phase_of(&m, 10, TB_PH_PEND_FWD, &final), PH_VALIDATION);
	ck_assert(final);
	pystacks_free(&m);
}
END_TEST

/* Events the ring lost: BPF counted them, and its low byte says how many. */
START_TEST(lost_events_are_counted)
{
	struct pystacks m;
	bool final;

	seq = 0;
	pystacks_init(&m, 10 * MS);
	step(&m, 0);			/* 1-6 */
	seq += 3;			/* 7-9 never arrive */
	send(&m, 10, TB_PH_PEND_DATA, TB_BC_DATA, TB_RS_NONE);	/* 10 */
	ck_assert_uint_eq(m.th[0].seq, 10);
	/* A span whose event was lost: BPF's phase then, said as such by the caller. */
	ck_assert_int_eq(phase_of(&m, 8, TB_PH_BACKWARD, &final), PH_BACKWARD);
	ck_assert(final);
	seq += 300;			/* more than a byte: the count is behind by 256 */
	send(&m, 20, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);
	ck_assert_uint_eq(m.th[0].seq % 256, seq % 256);
	pystacks_free(&m);
}
END_TEST

START_TEST(kept_once_each)
{
	struct pystacks m;
	int fn[3];

	pystacks_init(&m, 10 * MS);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 3000; i++) {
			char name[32];

			snprintf(name, sizeof(name), "f%d", i);
			ck_assert_int_eq(pystacks_func(&m, name, "x.py", i), i);
		}
	ck_assert_int_eq(m.nfn, 3000);
	/* The same name in another file or at another line is another function. */
	ck_assert_int_eq(pystacks_func(&m, "f1", "y.py", 1), 3000);
	ck_assert_int_eq(pystacks_func(&m, "f1", "x.py", 2), 3001);
	for (uint64_t h = 2; h < 5002; h++) {
		fn[0] = (int)(h % 3000), fn[1] = 1, fn[2] = 0;
		ck_assert_int_eq(pystacks_add(&m, 7 + (int)(h % 2), h, fn, 3, 0), (int)h - 2);
	}
	ck_assert_int_eq(pystacks_find(&m, 7, 4), 2);
	ck_assert_int_eq(pystacks_find(&m, 8, 4), -1);
	ck_assert_int_eq(pystacks_find(&m, 8, 5), 3);
	pystacks_add_time(&m, 2, 7, PH_DATA, TB_IO, TB_IO, TB_PYH_WAIT, 5, 1);
	pystacks_add_time(&m, 2, 7, PH_DATA, TB_IO, TB_IO, TB_PYH_WAIT, 7, 1);
	pystacks_add_time(&m, 2, 7, PH_DATA, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 10, 1);
	pystacks_add_time(&m, 2, 7, PH_FORWARD, TB_IO, TB_IO, TB_PYH_WAIT, 1, 1);
	ck_assert_int_eq(m.nrows, 3);
	ck_assert_uint_eq(m.rows[0].ns, 12);
	ck_assert_uint_eq(m.rows[0].n, 2);
	pystacks_free(&m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pystacks");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, spans_take_the_phase_their_step_gives);
	tcase_add_test(tc, validation_spans);
	tcase_add_test(tc, lost_events_are_counted);
	tcase_add_test(tc, kept_once_each);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
