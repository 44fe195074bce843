// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "pysections.h"

/* A loop thread: which functions are its loop's chain (the loop and its callers). */
struct loop_th {
	pid_t tid;
	uint64_t train;		/* its time in the training phases, on the stacks read */
	uint64_t *incl;		/* per function: that time on the stacks it is on */
	bool *chain;
};

/* Whether the row is a trainer's loop thread's, as last seen. */
static bool loop_row(const struct pystacks *m, const struct py_row *row)
{
	const struct py_proc_role *r = pystacks_role(m, m->st[row->stack].tgid);

	return r && r->role == TB_ROLE_TRAINER && r->loop_tid == row->tid;
}

static struct loop_th *thread_of(struct loop_th **th, int *n, int *cap, pid_t tid, int nfn)
{
	struct loop_th *t;

	for (int i = 0; i < *n; i++)
		if ((*th)[i].tid == tid)
			return &(*th)[i];
	if (tb_grow_ptr((void **)th, cap, *n + 1, sizeof(**th)))
		return NULL;
	t = &(*th)[(*n)++];
	*t = (struct loop_th){ .tid = tid };
	t->incl = calloc(nfn ? nfn : 1, sizeof(*t->incl));
	t->chain = calloc(nfn ? nfn : 1, sizeof(*t->chain));
	return t->incl && t->chain ? t : NULL;
}

/* A row's time on each function of its stack, once however often it recurses. */
static void add_incl(struct loop_th *t, const struct py_stack *st, uint64_t ns)
{
	for (int k = 0; k < st->depth; k++) {
		bool again = false;

		for (int j = 0; j < k && !again; j++)
			again = st->fn[j] == st->fn[k];
		if (!again)
			t->incl[st->fn[k]] += ns;
	}
}

/*
 * Each loop thread's chain: the functions on (nearly) all of its training
 * stacks (pysections_everywhere). A thread with no training time: of its
 * loop phases.
 */
static int chains(const struct pystacks *m, struct loop_th **th, int *n, int *cap,
		  bool any_training)
{
	for (int r = 0; r < m->nrows; r++) {
		const struct py_row *row = &m->rows[r];
		struct loop_th *t;

		if (!row->ns || row->phase >= PH_NLOOP || !loop_row(m, row))
			continue;
		if (!(t = thread_of(th, n, cap, row->tid, m->nfn)))
			return -1;
		if (any_training && !pysections_training(row->phase))
			continue;
		t->train += row->ns;
		add_incl(t, &m->st[row->stack], row->ns);
	}
	for (int i = 0; i < *n; i++)
		for (int f = 0; f < m->nfn; f++)
			(*th)[i].chain[f] = pysections_everywhere((*th)[i].incl[f],
								  (*th)[i].train);
	return 0;
}

/*
 * torch.compile compiling: no part of the call it runs under (the model's,
 * in the first step's forward; the loop's setup without a DataLoader).
 */
static bool compiling(const struct pystacks *m, const struct py_stack *st)
{
	for (int k = 0; k < st->depth; k++)
		if (m->fn[st->fn[k]].compiler)
			return true;
	return false;
}

/* The stack's section for its thread's chain. */
static int section_of(const struct pystacks *m, const struct loop_th *t,
		      const struct py_stack *st)
{
	if (!st->depth)
		return PY_SEC_NOFRAME;
	if (compiling(m, st))
		return PY_SEC_COMPILE;
	for (int k = 0; k < st->depth; k++) {
		if (!t->chain[st->fn[k]])
			continue;
		/* Right above the frames a deep stack did not keep: its callee is among them. */
		if (k == TB_PY_INNER && py_stack_cut(st))
			return PY_SEC_CUT;
		return k ? st->fn[k - 1] : PY_SEC_LOOP;
	}
	return py_stack_outer_lost(st) ? PY_SEC_CUT : PY_SEC_OUT;
}

static int add_to(struct py_sections *ps, int *cap, int fn, const struct py_row *row)
{
	struct py_section *s = NULL;

	for (int i = 0; i < ps->n && !s; i++)
		if (ps->s[i].fn == fn)
			s = &ps->s[i];
	if (!s) {
		if (tb_grow_ptr((void **)&ps->s, cap, ps->n + 1, sizeof(*ps->s)))
			return -1;
		s = &ps->s[ps->n++];
		*s = (struct py_section){ .fn = fn };
	}
	s->ns += row->ns;
	s->cat[row->cat] += row->ns;
	ps->read += row->ns;
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const struct py_section *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return x->fn - y->fn;
}

static bool has_training(const struct pystacks *m)
{
	for (int r = 0; r < m->nrows; r++) {
		const struct py_row *row = &m->rows[r];

		if (row->ns && pysections_training(row->phase) && loop_row(m, row))
			return true;
	}
	return false;
}

static int fill(const struct pystacks *m, struct loop_th *th, int n,
		struct py_sections out[PH_NSHOWN])
{
	int cap[PH_NSHOWN] = { 0 };

	for (int r = 0; r < m->nrows; r++) {
		const struct py_row *row = &m->rows[r];
		const struct py_stack *st = &m->st[row->stack];
		bool setup = row->phase == PH_SETUP;
		const struct loop_th *t = NULL;
		int sec;

		if (!row->ns || (row->phase >= PH_NLOOP && !setup) || !loop_row(m, row))
			continue;
		for (int i = 0; i < n && !t; i++)
			if (th[i].tid == row->tid)
				t = &th[i];
		if (!t)
			continue;
		/* Setup ran no loop: only what torch.compile took of it is told apart. */
		sec = !setup ? section_of(m, t, st) : compiling(m, st) ? PY_SEC_COMPILE : PY_SEC_OUT;
		if (add_to(&out[row->phase], &cap[row->phase], sec, row))
			return -1;
	}
	for (int p = 0; p < PH_NSHOWN; p++)
		if (out[p].n)
			qsort(out[p].s, out[p].n, sizeof(*out[p].s), by_time);
	return 0;
}

int pysections_make(const struct pystacks *m, struct py_sections out[PH_NSHOWN])
{
	struct loop_th *th = NULL;
	int n = 0, cap = 0, err;

	memset(out, 0, sizeof(*out) * PH_NSHOWN);
	err = chains(m, &th, &n, &cap, has_training(m));
	if (!err)
		err = fill(m, th, n, out);
	for (int i = 0; i < n; i++) {
		free(th[i].incl);
		free(th[i].chain);
	}
	free(th);
	if (err)
		pysections_free(out);
	return err;
}

void pysections_free(struct py_sections out[PH_NSHOWN])
{
	for (int p = 0; p < PH_NSHOWN; p++)
		free(out[p].s);
	memset(out, 0, sizeof(*out) * PH_NSHOWN);
}
