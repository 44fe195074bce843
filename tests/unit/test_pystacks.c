// SPDX-License-Identifier: BSD-3-Clause
/*
 * The Python stacks' model (user/model/pystacks.c): the time BPF keeps per
 * span of a thread's phase events goes to the phase the phase table gives
 * that span, once it is over and its step has said; a lost event is
 * counted from the low byte BPF sends; functions, stacks and rows are
 * kept once each, however many. The named sections (pysections.c): a
 * phase's time by the loop's callee, the loop's frame found from its
 * training stacks.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include "pyreader.h"
#include "pysections.h"
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

/* A stack of the loop thread's, outermost first as written, kept innermost first. */
static int stack_of(struct pystacks *m, uint64_t hash, const char **names, int n)
{
	int fn[8];

	for (int i = 0; i < n; i++)
		fn[n - 1 - i] = pystacks_func(m, names[i], "train.py", 10 + i);
	return pystacks_add(m, 7, hash, fn, n, 0);
}

static const struct py_section *section(const struct py_sections *ps, const struct pystacks *m,
					 const char *name)
{
	for (int i = 0; i < ps->n; i++)
		if (name ? ps->s[i].fn >= 0 && !strcmp(m->fn[ps->s[i].fn].name, name) :
			   ps->s[i].fn == PY_SEC_NOFRAME)
			return &ps->s[i];
	return NULL;
}

START_TEST(sections_are_the_loops_callees)
{
	const char *fwd[] = { "<module>", "main", "train", "Module.__call__", "Linear.forward" };
	const char *bwd[] = { "<module>", "main", "train", "Tensor.backward" };
	const char *opt[] = { "<module>", "main", "train", "SGD.step" };
	const char *ema[] = { "<module>", "main", "train", "ema_update", "lerp" };
	const char *own[] = { "<module>", "main", "train" };
	const char *val[] = { "<module>", "main", "evaluate", "Module.__call__" };
	const char *imp[] = { "<module>", "import_torch" };
	struct py_sections ps[PH_NSHOWN];
	const struct py_section *x;
	struct pystacks m;
	int sf, sb, so, se, sw, sv, si, s0;

	pystacks_init(&m, 10 * MS);
	pystacks_set_role(&m, 7, TB_ROLE_TRAINER, 7);
	sf = stack_of(&m, 1, fwd, 5);
	sb = stack_of(&m, 2, bwd, 4);
	so = stack_of(&m, 3, opt, 4);
	se = stack_of(&m, 4, ema, 5);
	sw = stack_of(&m, 5, own, 3);
	sv = stack_of(&m, 6, val, 4);
	si = stack_of(&m, 7, imp, 2);
	s0 = pystacks_add(&m, 7, 8, NULL, 0, 0);
	pystacks_add_time(&m, sf, 7, PH_FORWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 600, 60);
	pystacks_add_time(&m, sb, 7, PH_BACKWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 300, 30);
	pystacks_add_time(&m, so, 7, PH_OPTIMIZER, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 100, 10);
	/* Outside PyTorch's brackets: the EMA (a wait and CPU), the loop's own lines. */
	pystacks_add_time(&m, se, 7, PH_OTHER, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 200, 20);
	pystacks_add_time(&m, se, 7, PH_OTHER, TB_IO, TB_IO, TB_PYH_WAIT, 100, 1);
	pystacks_add_time(&m, sw, 7, PH_OTHER, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 30, 3);
	pystacks_add_time(&m, s0, 7, PH_OTHER, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 20, 2);
	/* Beside the loop, from its caller: evaluate(); setup: no loop phase. */
	pystacks_add_time(&m, sv, 7, PH_VALIDATION, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 50, 5);
	pystacks_add_time(&m, si, 7, PH_SETUP, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 400, 40);
	/* A worker's stacks are no loop's. */
	pystacks_set_role(&m, 9, TB_ROLE_WORKER, 0);
	pystacks_add_time(&m, pystacks_add(&m, 9, 9, (int[]){ 0 }, 1, 0), 9, PH_OTHER, TB_CPU,
			  TB_CPU, TB_PYH_SAMPLE, 999, 1);
	ck_assert_int_eq(pysections_make(&m, ps), 0);

	ck_assert_uint_eq(ps[PH_OTHER].read, 350);
	ck_assert_int_eq(ps[PH_OTHER].n, 3);
	x = section(&ps[PH_OTHER], &m, "ema_update");	/* largest first */
	ck_assert_ptr_eq(x, &ps[PH_OTHER].s[0]);
	ck_assert_uint_eq(x->ns, 300);
	ck_assert_uint_eq(x->cat[TB_CPU], 200);
	ck_assert_uint_eq(x->cat[TB_IO], 100);
	ck_assert_int_eq(ps[PH_OTHER].s[1].fn, PY_SEC_LOOP);
	ck_assert_uint_eq(ps[PH_OTHER].s[1].ns, 30);
	ck_assert_uint_eq(section(&ps[PH_OTHER], &m, NULL)->ns, 20);
	/* Forward: the model's call, one level below the loop. */
	ck_assert_int_eq(ps[PH_FORWARD].n, 1);
	ck_assert_str_eq(m.fn[ps[PH_FORWARD].s[0].fn].name, "Module.__call__");
	/* Validation, from main beside train(): evaluate. */
	ck_assert_int_eq(ps[PH_VALIDATION].n, 1);
	ck_assert_str_eq(m.fn[ps[PH_VALIDATION].s[0].fn].name, "evaluate");
	/* Setup ran no loop: all of it outside the loop's frame; teardown has none. */
	ck_assert_int_eq(ps[PH_SETUP].n, 1);
	ck_assert_int_eq(ps[PH_SETUP].s[0].fn, PY_SEC_OUT);
	ck_assert_int_eq(ps[PH_TEARDOWN].n, 0);
	pysections_free(ps);
	pystacks_free(&m);
}
END_TEST

/* A stack of names outermost first, their files given. */
static int stack_in(struct pystacks *m, uint64_t hash, const char **names, const char **files,
		    int n)
{
	int fn[8];

	for (int i = 0; i < n; i++)
		fn[n - 1 - i] = pystacks_func(m, names[i], files[i], 1);
	return pystacks_add(m, 7, hash, fn, n, 0);
}

START_TEST(torch_compile_is_its_own_section)
{
	const char *conv = "/usr/lib/python3/dist-packages/torch/_dynamo/convert_frame.py";
	const char *fx = "/venv/lib/python3.12/site-packages/torch/_inductor/compile_fx.py";
	const char *cf[] = { "<module>", "train", "Module._call_impl",
			     "ConvertFrame.__call__", "_compile" };
	const char *cf_files[] = { "train.py", "train.py", "module.py", conv, conv };
	const char *bw[] = { "<module>", "train", "Tensor.backward", "compile_fx_inner" };
	const char *bw_files[] = { "train.py", "train.py", "_tensor.py", fx };
	const char *run[] = { "<module>", "train", "Module._call_impl" };
	const char *run_files[] = { "train.py", "train.py", "module.py" };
	/* torch.compile(model) imports Dynamo: the module's body is no compiling. */
	const char *imp[] = { "<module>", "compile", "<module>" };
	const char *imp_files[] = { "train.py", "__init__.py", conv };
	struct py_sections ps[PH_NSHOWN];
	struct pystacks m;
	int sc, sb, sr, si;

	pystacks_init(&m, 10 * MS);
	pystacks_set_role(&m, 7, TB_ROLE_TRAINER, 7);
	sc = stack_in(&m, 1, cf, cf_files, 5);
	sb = stack_in(&m, 2, bw, bw_files, 4);
	sr = stack_in(&m, 3, run, run_files, 3);
	si = stack_in(&m, 4, imp, imp_files, 3);
	pystacks_add_time(&m, sc, 7, PH_FORWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 300, 30);
	pystacks_add_time(&m, sc, 7, PH_SETUP, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 70, 7);
	pystacks_add_time(&m, sb, 7, PH_BACKWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 40, 4);
	pystacks_add_time(&m, sr, 7, PH_FORWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 500, 50);
	pystacks_add_time(&m, si, 7, PH_SETUP, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 900, 90);
	ck_assert(m.fn[m.st[sc].fn[0]].compiler && !m.fn[m.st[si].fn[0]].compiler);
	ck_assert_int_eq(pysections_make(&m, ps), 0);
	ck_assert_int_eq(ps[PH_FORWARD].n, 2);
	ck_assert_str_eq(m.fn[ps[PH_FORWARD].s[0].fn].name, "Module._call_impl");
	ck_assert_int_eq(ps[PH_FORWARD].s[1].fn, PY_SEC_COMPILE);
	ck_assert_uint_eq(ps[PH_FORWARD].s[1].ns, 300);
	/* Inductor's backward graph, compiled at the first backward. */
	ck_assert_int_eq(ps[PH_BACKWARD].s[0].fn, PY_SEC_COMPILE);
	/* Setup: compiling, and the rest (the import) outside the loop. */
	ck_assert_int_eq(ps[PH_SETUP].n, 2);
	ck_assert_int_eq(ps[PH_SETUP].s[0].fn, PY_SEC_OUT);
	ck_assert_uint_eq(ps[PH_SETUP].s[0].ns, 900);
	ck_assert_int_eq(ps[PH_SETUP].s[1].fn, PY_SEC_COMPILE);
	ck_assert_uint_eq(ps[PH_SETUP].s[1].ns, 70);
	pysections_free(ps);
	pystacks_free(&m);
}
END_TEST

START_TEST(deep_stacks_are_put_in_order)
{
	/* Frames walked: shallow, exactly full, one over, deep, and a walk cut short. */
	const unsigned int walks[] = { 10, TB_PY_DEPTH, TB_PY_DEPTH + 1, 100, TB_PY_WALK };

	for (unsigned int w = 0; w < sizeof(walks) / sizeof(walks[0]); w++) {
		uint64_t code[TB_PY_DEPTH] = { 0 };
		unsigned int n = walks[w], depth = n < TB_PY_DEPTH ? n : TB_PY_DEPTH;
		uint32_t cut = (n - depth) | (n == TB_PY_WALK ? TB_PY_CUT_OUTER : 0);

		for (unsigned int f = 0; f < n; f++)
			code[tb_py_slot(f)] = 1000 + f;	/* as BPF stores them */
		for (unsigned int i = 0; i < depth; i++) {
			/* Innermost first: the innermost 40, then the last 24 walked. */
			uint64_t want = 1000 + (i < TB_PY_INNER ? i : n - depth + i);

			ck_assert_uint_eq(code[pyreader_slot(i, cut)], want);
		}
	}
}
END_TEST

/* A stack of names outermost first, cut frames not kept past the innermost TB_PY_INNER. */
static int deep_stack_of(struct pystacks *m, uint64_t hash, const char **names, int n,
			 uint32_t cut)
{
	int fn[TB_PY_DEPTH];

	/* By name alone: a function at another depth is the same function. */
	for (int i = 0; i < n; i++)
		fn[n - 1 - i] = pystacks_func(m, names[i], "train.py", 1);
	return pystacks_add(m, 7, hash, fn, n, cut);
}

START_TEST(deep_stacks_keep_the_loops_callee)
{
	const char *fwd[TB_PY_DEPTH], *bwd[] = { "<module>", "main", "train", "Tensor.backward" };
	const char *deeper[TB_PY_DEPTH], *lost[TB_PY_DEPTH];
	char names[TB_PY_DEPTH][16];
	struct py_sections ps[PH_NSHOWN];
	struct pystacks m;
	int sf, sb, sd, sl;

	/* fwd: the loop 3 deep, then 60 frames of layers (10 of them not kept), then Linear. */
	fwd[0] = "<module>";
	fwd[1] = "main";
	fwd[2] = "train";
	fwd[3] = "Module.__call__";
	for (int i = 4; i < TB_PY_DEPTH - 1; i++) {
		snprintf(names[i], sizeof(names[i]), "block%d", i);
		fwd[i] = names[i];
	}
	fwd[TB_PY_DEPTH - 1] = "Linear.forward";
	/*
	 * deeper: the loop right above the frames not kept (fn[TB_PY_INNER]),
	 * its callee among them; lost: the outermost not reached at all.
	 */
	for (int i = 0; i < TB_PY_DEPTH; i++) {
		deeper[i] = i < 2 ? fwd[i] : i < TB_PY_OUTER - 1 ? "wrapper" :
			    i == TB_PY_OUTER - 1 ? "train" : fwd[i];
		lost[i] = i < TB_PY_DEPTH - 1 ? "block5" : "Linear.forward";
	}

	pystacks_init(&m, 10 * MS);
	pystacks_set_role(&m, 7, TB_ROLE_TRAINER, 7);
	sf = deep_stack_of(&m, 1, fwd, TB_PY_DEPTH, 10);
	sb = deep_stack_of(&m, 2, bwd, 4, 0);
	pystacks_add_time(&m, sf, 7, PH_FORWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 600, 60);
	pystacks_add_time(&m, sb, 7, PH_BACKWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 400, 40);
	ck_assert_int_eq(pysections_make(&m, ps), 0);
	/* The loop and its callee are in the outermost frames kept: named. */
	ck_assert_int_eq(ps[PH_FORWARD].n, 1);
	ck_assert_str_eq(m.fn[ps[PH_FORWARD].s[0].fn].name, "Module.__call__");
	pysections_free(ps);

	/* The loop right above the frames not kept, or not reached: said, not guessed. */
	sd = deep_stack_of(&m, 3, deeper, TB_PY_DEPTH, 10);
	sl = deep_stack_of(&m, 4, lost, TB_PY_DEPTH, 500 | TB_PY_CUT_OUTER);
	pystacks_add_time(&m, sd, 7, PH_FORWARD, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 1, 1);
	pystacks_add_time(&m, sl, 7, PH_OTHER, TB_CPU, TB_CPU, TB_PYH_SAMPLE, 30, 3);
	ck_assert_int_eq(pysections_make(&m, ps), 0);
	ck_assert_int_eq(ps[PH_FORWARD].n, 2);
	ck_assert_int_eq(ps[PH_FORWARD].s[1].fn, PY_SEC_CUT);
	ck_assert_uint_eq(ps[PH_FORWARD].s[1].ns, 1);
	ck_assert_int_eq(ps[PH_OTHER].n, 1);
	ck_assert_int_eq(ps[PH_OTHER].s[0].fn, PY_SEC_CUT);
	pysections_free(ps);
	pystacks_free(&m);
}
END_TEST

/* Function ids of names (file "t.py"; "P.__enter__" is record_function's, "C.inner" contextlib's). */
static void fns_of(struct pystacks *m, const char *const *names, int n, int *fn)
{
	for (int i = 0; i < n; i++) {
		const char *file = !strcmp(names[i], "P.__enter__") ? "/x/torch/autograd/profiler.py" :
				   !strcmp(names[i], "C.inner") ? "/usr/lib/python3/contextlib.py" :
				   "t.py";

		fn[i] = names[i][0] == '@' ? pystacks_func(m, names[i] + 1, PY_SCOPE_FILE, 0) :
			pystacks_func(m, names[i], file, 1);
	}
}

/* The names of a placed stack, innermost first, joined by ' ' ("@" before a scope's). */
static const char *joined(const struct pystacks *m, const int *fn, int n)
{
	static char buf[512];
	size_t w = 0;

	buf[0] = '\0';
	for (int i = 0; i < n; i++)
		w += snprintf(buf + w, sizeof(buf) - w, "%s%s%s", i ? " " : "",
			      py_func_is_scope(&m->fn[fn[i]]) ? "@" : "", m->fn[fn[i]].name);
	return buf;
}

static int place(struct pystacks *m, const char *const *raw, int n, const char *const *open,
		 int on, const char *scope, int *out, int cap)
{
	int r[16], o[16], sfn = pystacks_func(m, scope, PY_SCOPE_FILE, 0);

	fns_of(m, raw, n, r);
	fns_of(m, open, on, o);
	return pystacks_place_scope(m, r, n, o, on, sfn, out, cap);
}

START_TEST(record_function_scopes_are_placed_where_they_opened)
{
	static const char *const open[] = { "_ops.__call__", "P.__enter__", "train", "main" };
	static const char *const in[] = { "lerp", "ema_update", "train", "main" };
	static const char *const own[] = { "train", "main" };
	static const char *const nested_open[] = { "P.__enter__", "sample", "@visuals", "train",
						   "main" };
	static const char *const nested_in[] = { "sleep", "sample", "train", "main" };
	static const char *const deco_open[] = { "P.__enter__", "C.inner", "train", "main" };
	static const char *const deco_in[] = { "metrics", "C.inner", "train", "main" };
	static const char *const elsewhere[] = { "gen", "other_loop", "main" };
	static const char *const no_enter[] = { "train", "main" };
	struct pystacks m;
	int out[16], n;

	pystacks_init(&m, 10 * MS);
	/* Inside the block: the scope's frame right inside the frame that opened it. */
	n = place(&m, in, 4, open, 4, "ema", out, 16);
	ck_assert_str_eq(joined(&m, out, n), "lerp ema_update @ema train main");
	/* On the block's own lines: the scope is the innermost frame. */
	n = place(&m, own, 2, open, 4, "ema", out, 16);
	ck_assert_str_eq(joined(&m, out, n), "@ema train main");
	/* Nested: opened in a call inside "visuals", whose frame the opening stack has. */
	n = place(&m, nested_in, 4, nested_open, 5, "sampling", out, 16);
	ck_assert_str_eq(joined(&m, out, n), "sleep @sampling sample @visuals train main");
	/* A decorated function: the block outside contextlib's wrapper. */
	n = place(&m, deco_in, 4, deco_open, 4, "metrics", out, 16);
	ck_assert_str_eq(joined(&m, out, n), "metrics C.inner @metrics train main");
	/* Not under the frames that opened it (a generator resumed elsewhere): not placed. */
	ck_assert_int_eq(place(&m, elsewhere, 3, open, 4, "ema", out, 16), -1);
	/* Fewer frames than where it opened: not placed. */
	ck_assert_int_eq(place(&m, own + 1, 1, open, 4, "ema", out, 16), -1);
	/* Not opened by record_function.__enter__: not placed. */
	ck_assert_int_eq(place(&m, in, 4, no_enter, 2, "ema", out, 16), -1);
	/* No room: not placed, nothing written past cap. */
	ck_assert_int_eq(place(&m, in, 4, open, 4, "ema", out, 4), -1);
	ck_assert_int_eq(place(&m, in, 4, open, 4, "ema", out, 5), 5);
	pystacks_free(&m);
}
END_TEST

/* A block's name as BPF cut it: a character cut in two at the end is left out. */
START_TEST(scope_names_are_utf8)
{
	struct tb_py_scope_name nm = {};
	char out[PY_SCOPE_NAME_LEN];

	/* 61 ASCII bytes, then the first 2 of the 3 of U+540D: cut by the buffer. */
	memset(nm.s, 'a', 61);
	memcpy(nm.s + 61, "\xe5\x90", 2);
	pystacks_scope_name(out, sizeof(out), &nm);
	ck_assert_uint_eq(strlen(out), 61);
	/* 60 ASCII bytes and the whole character: kept. */
	memcpy(nm.s + 60, "\xe5\x90\x8d", 3);
	pystacks_scope_name(out, sizeof(out), &nm);
	ck_assert_uint_eq(strlen(out), 63);
	ck_assert_str_eq(out + 60, "\xe5\x90\x8d");
	/* A bad byte inside the name, not at the cut: U+FFFD, as the job's bytes are. */
	memset(&nm, 0, sizeof(nm));
	memcpy(nm.s, "ema\xff", 4);
	pystacks_scope_name(out, sizeof(out), &nm);
	ck_assert_str_eq(out, "ema\xef\xbf\xbd");
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
	tcase_add_test(tc, sections_are_the_loops_callees);
	tcase_add_test(tc, deep_stacks_are_put_in_order);
	tcase_add_test(tc, deep_stacks_keep_the_loops_callee);
	tcase_add_test(tc, torch_compile_is_its_own_section);
	tcase_add_test(tc, record_function_scopes_are_placed_where_they_opened);
	tcase_add_test(tc, scope_names_are_utf8);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
