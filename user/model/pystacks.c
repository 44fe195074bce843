// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "pystacks.h"
#include "utf8.h"

/* 0 with room for one more item of arr, -1 out of memory (arr unchanged). */
#define GROW(arr, n, cap) tb_grow_ptr((void **)&(arr), &(cap), (n) + 1, sizeof(*(arr)))

/* splitmix64's finalizer: every bit of the key moves every bit of the slot. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return mix(h);
}

/* Linear probing; keys are never removed. */
typedef bool (*py_match_fn)(const struct pystacks *m, int pos, const void *want);

static int idx_find(const struct py_index *ix, uint64_t key, const struct pystacks *m,
		    py_match_fn match, const void *want)
{
	if (!ix->cap)
		return -1;
	for (int i = (int)(mix(key) & (ix->cap - 1)), k = 0; k < ix->cap;
	     i = (i + 1) & (ix->cap - 1), k++) {
		if (ix->pos[i] < 0)
			return -1;
		if (ix->keys[i] == key && match(m, ix->pos[i], want))
			return ix->pos[i];
	}
	return -1;
}

static void idx_put_raw(struct py_index *ix, uint64_t key, int pos)
{
	int i = (int)(mix(key) & (ix->cap - 1));

	while (ix->pos[i] >= 0)
		i = (i + 1) & (ix->cap - 1);
	ix->keys[i] = key;
	ix->pos[i] = pos;
	ix->n++;
}

static int idx_put(struct py_index *ix, uint64_t key, int pos)
{
	if (2 * (ix->n + 1) > ix->cap) {
		struct py_index big = { .cap = ix->cap ? 2 * ix->cap : 256 };

		big.keys = calloc(big.cap, sizeof(*big.keys));
		big.pos = malloc(big.cap * sizeof(*big.pos));
		if (!big.keys || !big.pos) {
			free(big.keys);
			free(big.pos);
			return -1;
		}
		memset(big.pos, 0xff, big.cap * sizeof(*big.pos));
		for (int i = 0; i < ix->cap; i++)
			if (ix->pos[i] >= 0)
				idx_put_raw(&big, ix->keys[i], ix->pos[i]);
		free(ix->keys);
		free(ix->pos);
		*ix = big;
	}
	idx_put_raw(ix, key, pos);
	return 0;
}

static void idx_free(struct py_index *ix)
{
	free(ix->keys);
	free(ix->pos);
	memset(ix, 0, sizeof(*ix));
}

void pystacks_init(struct pystacks *m, uint64_t period_ns)
{
	memset(m, 0, sizeof(*m));
	m->period_ns = period_ns;
}

void pystacks_free(struct pystacks *m)
{
	for (int i = 0; i < m->nst; i++)
		free(m->st[i].fn);
	free(m->fn);
	free(m->st);
	free(m->rows);
	free(m->notes);
	for (int i = 0; i < m->nth; i++)
		free(m->th[i].spans);
	free(m->th);
	free(m->roles);
	idx_free(&m->fnidx);
	idx_free(&m->stidx);
	idx_free(&m->rowidx);
	memset(m, 0, sizeof(*m));
}

static bool fn_match(const struct pystacks *m, int pos, const void *want)
{
	const struct py_func *a = &m->fn[pos], *b = want;

	return a->line == b->line && !strcmp(a->name, b->name) && !strcmp(a->file, b->file);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/*
 * torch.compile compiling: Dynamo's frame conversion (a frame traced and
 * compiled: the first call, a recompile) and Inductor's compile_fx (the
 * graphs, the backward's at its first call). Neither is on a stack while
 * compiled code runs: a guard hit is checked in C.
 */
static bool compiler_file(const char *file)
{
	return ends_with(file, "/torch/_dynamo/convert_frame.py") ||
	       ends_with(file, "/torch/_inductor/compile_fx.py");
}

int pystacks_func(struct pystacks *m, const char *name, const char *file, int line)
{
	struct py_func f = { .line = line };
	uint64_t key;
	int pos;

	snprintf(f.name, sizeof(f.name), "%s", name);
	snprintf(f.file, sizeof(f.file), "%s", file);
	key = mix_str(mix_str((uint64_t)line, f.name), f.file);
	pos = idx_find(&m->fnidx, key, m, fn_match, &f);
	if (pos >= 0)
		return pos;
	if (GROW(m->fn, m->nfn, m->capfn) || idx_put(&m->fnidx, key, m->nfn))
		return -1;
	/* Their modules' bodies run at import, in torch.compile(model): no compiling. */
	f.compiler = compiler_file(f.file) && strcmp(f.name, "<module>");
	m->fn[m->nfn] = f;
	return m->nfn++;
}

void pystacks_scope_name(char *out, size_t len, const struct tb_py_scope_name *nm)
{
	size_t n = strnlen(nm->s, sizeof(nm->s)), k = n;

	/* Cut by BPF's buffer: a character it cut in two is left out, not made U+FFFD. */
	if (n == sizeof(nm->s) - 1) {
		while (k > 0 && n - k < 4 && ((unsigned char)nm->s[k - 1] & 0xc0) == 0x80)
			k--;
		if (k > 0 && (unsigned char)nm->s[k - 1] >= 0xc0 &&
		    !utf8_seq((const unsigned char *)nm->s + k - 1, n - k + 1))
			n = k - 1;
	}
	utf8_clean(out, len, nm->s, n);
}

/* record_function.__enter__ (co_qualname from 3.11, co_name before). */
static bool scope_enter(const struct py_func *f)
{
	return ends_with(f->name, "__enter__") && ends_with(f->file, "/autograd/profiler.py");
}

int pystacks_place_scope(const struct pystacks *m, const int *raw, int n, const int *open,
			 int on, int scope, int *out, int cap)
{
	int j = 0, real = 0, inner, w = 0;

	while (j < on && !scope_enter(&m->fn[open[j]]))
		j++;
	if (j == on)
		return -1;
	j++;
	/* @record_function(...) on a function: contextlib's wrapper calls it. */
	while (j < on && ends_with(m->fn[open[j]].file, "/contextlib.py"))
		j++;
	for (int k = j; k < on; k++)
		real += !py_func_is_scope(&m->fn[open[k]]);
	inner = n - real;
	if (inner < 0 || inner + 1 + on - j > cap)
		return -1;
	for (int k = j, r = inner; k < on; k++) {
		if (py_func_is_scope(&m->fn[open[k]]))
			continue;
		if (raw[r++] != open[k])
			return -1;
	}
	for (int k = 0; k < inner; k++)
		out[w++] = raw[k];
	out[w++] = scope;
	for (int k = j; k < on; k++)
		out[w++] = open[k];
	return w;
}

struct st_want {
	pid_t tgid;
	uint64_t hash;
};

static bool st_match(const struct pystacks *m, int pos, const void *want)
{
	const struct st_want *w = want;

	return m->st[pos].tgid == w->tgid && m->st[pos].hash == w->hash;
}

static uint64_t st_key(pid_t tgid, uint64_t hash)
{
	return hash ^ mix((uint64_t)(uint32_t)tgid);
}

int pystacks_find(const struct pystacks *m, pid_t tgid, uint64_t hash)
{
	struct st_want w = { tgid, hash };

	return idx_find(&m->stidx, st_key(tgid, hash), m, st_match, &w);
}

int pystacks_add(struct pystacks *m, pid_t tgid, uint64_t hash, const int *fn, int depth,
		 uint32_t cut)
{
	int *copy = malloc((depth ? depth : 1) * sizeof(*copy));

	if (!copy || GROW(m->st, m->nst, m->capst) ||
	    idx_put(&m->stidx, st_key(tgid, hash), m->nst)) {
		free(copy);
		return -1;
	}
	memcpy(copy, fn, depth * sizeof(*copy));
	m->st[m->nst] = (struct py_stack){ .tgid = tgid, .hash = hash, .depth = depth,
					   .cut = cut, .fn = copy };
	return m->nst++;
}

static bool row_match(const struct pystacks *m, int pos, const void *want)
{
	const struct py_row *a = &m->rows[pos], *b = want;

	return a->stack == b->stack && a->tid == b->tid && a->phase == b->phase &&
	       a->cat == b->cat && a->own == b->own && a->how == b->how;
}

int pystacks_add_time(struct pystacks *m, int stack, pid_t tid, int phase, int cat, int own,
		      int how, uint64_t ns, uint64_t n)
{
	struct py_row r = { .stack = stack, .tid = tid, .phase = phase, .cat = cat, .own = own,
			    .how = how, .ns = ns, .n = n };
	uint64_t key = mix(((uint64_t)stack << 32 | (uint32_t)tid) ^
			   mix((uint64_t)phase << 24 | own << 16 | cat << 8 | how));
	int pos = idx_find(&m->rowidx, key, m, row_match, &r);

	if (pos >= 0) {
		m->rows[pos].ns += ns;
		m->rows[pos].n += n;
		return 0;
	}
	if (GROW(m->rows, m->nrows, m->caprows) || idx_put(&m->rowidx, key, m->nrows))
		return -1;
	m->rows[m->nrows++] = r;
	return 0;
}

void pystacks_note(struct pystacks *m, pid_t pid, bool read, const char *text)
{
	struct py_note *n = NULL;

	for (int i = 0; i < m->nnotes && !n; i++)
		if (m->notes[i].pid == pid)
			n = &m->notes[i];
	if (!n) {
		if (GROW(m->notes, m->nnotes, m->capnotes))
			return;
		n = &m->notes[m->nnotes++];
	}
	n->pid = pid;
	n->read = read;
	snprintf(n->text, sizeof(n->text), "%s", text);
}

static struct py_thread *thread_of(struct pystacks *m, pid_t tid)
{
	for (int i = 0; i < m->nth; i++)
		if (m->th[i].tid == tid)
			return &m->th[i];
	return NULL;
}

/* A span resolved (phase_spans.c): the one its start began. */
static void on_span(void *arg, const struct ph_span *sp)
{
	struct py_thread *t = arg;

	for (int i = t->nspans - 1; i >= 0; i--)
		if (t->spans[i].start == sp->start && t->spans[i].phase < 0) {
			t->spans[i].phase = sp->phase;
			return;
		}
}

void pystacks_on_phase(struct pystacks *m, const struct tb_phase_event *e)
{
	struct py_thread *t = thread_of(m, e->tid);
	uint32_t next;

	if (!t) {
		if (GROW(m->th, m->nth, m->capth))
			return;
		t = &m->th[m->nth++];
		memset(t, 0, sizeof(*t));
		t->pid = e->pid;
		t->tid = e->tid;
	}
	/* Events lost in between: the low byte BPF sent says how many. */
	next = t->seq + 1;
	next += (uint8_t)(e->seq - (uint8_t)next);
	t->seq = next;
	/*
	 * A span of no length (the next event at the same instant) is never
	 * emitted: it has no time but what BPF closed at that instant, its phase.
	 */
	if (t->nspans && t->spans[t->nspans - 1].phase < 0 &&
	    e->ts <= t->spans[t->nspans - 1].start)
		t->spans[t->nspans - 1].phase = ph_shown_of(t->spans[t->nspans - 1].raw);
	if (!GROW(t->spans, t->nspans, t->cap))
		t->spans[t->nspans++] = (struct py_span){ .seq = next, .start = e->ts,
							  .phase = -1, .raw = e->phase };
	ph_spans_event(&t->sp, e, on_span, t);
}

int pystacks_phase_of(struct pystacks *m, pid_t tid, uint32_t seq, int raw, bool *final)
{
	struct py_thread *t = thread_of(m, tid);

	/* No event yet: other (a worker, a thread that runs no loop) until the end. */
	if (!t) {
		*final = false;
		return PH_OTHER;
	}
	/* Before its first event: its setup (docs/phases.md, "The share"). */
	if (!seq) {
		*final = true;
		return PH_SETUP;
	}
	*final = seq < t->seq || t->ended;
	if (t->ended && seq == t->seq)
		return PH_TEARDOWN;	/* after its last event, as the table's rows */
	for (int i = t->nspans - 1; i >= 0; i--) {
		if (t->spans[i].seq != seq)
			continue;
		if (t->spans[i].phase < 0 && !t->ended) {
			*final = false;
			return -1;
		}
		return t->spans[i].phase >= 0 ? t->spans[i].phase : ph_shown_of(raw);
	}
	return ph_shown_of(raw);	/* a span whose event was lost */
}

void pystacks_prune(struct pystacks *m)
{
	for (int i = 0; i < m->nth; i++) {
		struct py_thread *t = &m->th[i];
		int k = 0;

		for (int j = 0; j < t->nspans; j++)
			if (t->spans[j].phase < 0 || t->spans[j].seq >= t->seq)
				t->spans[k++] = t->spans[j];
		t->nspans = k;
	}
}

void pystacks_finish(struct pystacks *m, uint64_t end)
{
	for (int i = 0; i < m->nth; i++) {
		ph_spans_end(&m->th[i].sp, end, on_span, &m->th[i]);
		m->th[i].ended = true;
	}
}

const struct py_proc_role *pystacks_role(const struct pystacks *m, pid_t pid)
{
	for (int i = 0; i < m->nroles; i++)
		if (m->roles[i].pid == pid)
			return &m->roles[i];
	return NULL;
}

void pystacks_set_role(struct pystacks *m, pid_t pid, int role, pid_t loop_tid)
{
	struct py_proc_role *r = (struct py_proc_role *)pystacks_role(m, pid);

	if (!r) {
		if (GROW(m->roles, m->nroles, m->caproles))
			return;
		r = &m->roles[m->nroles++];
	}
	*r = (struct py_proc_role){ .pid = pid, .role = role, .loop_tid = loop_tid };
}
