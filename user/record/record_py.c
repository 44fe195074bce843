// SPDX-License-Identifier: BSD-3-Clause
/*
 * --functions in a recording (schema 12, docs/recording.md): what
 * model/pystacks.c holds, so that `trainbpf report` prints the same
 * functions section, named sections and --folded stacks. Functions and
 * stacks are kept once and never change: each flush appends the new ones.
 * The time per stack grows, and the notes and roles change: each flush
 * rewrites them, so a cut recording holds the last flush's.
 */
#include <inttypes.h>
#include <stdio.h>
#include "categories.h"
#include "phase_spans.h"
#include "record.h"
#include "session.h"

static void funcs(struct recorder *r, const struct pystacks *m)
{
	for (; r->py_nfn < m->nfn && !r->failed; r->py_nfn++) {
		const struct py_func *f = &m->fn[r->py_nfn];

		rec_bind_int(r, RS_PY_FUNC, 1, r->py_nfn);
		rec_bind_text(r, RS_PY_FUNC, 2, f->name);
		rec_bind_text(r, RS_PY_FUNC, 3, f->file);
		rec_bind_int(r, RS_PY_FUNC, 4, f->line);
		rec_step(r, RS_PY_FUNC);
	}
}

/* "12,7,3": the functions' ids, innermost first (PY_STACK_MAX of them at most). */
static void frames_text(char *buf, size_t len, const struct py_stack *st)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int k = 0; k < st->depth && n < len; k++)
		n += snprintf(buf + n, len - n, "%s%d", k ? "," : "", st->fn[k]);
}

static void stacks(struct recorder *r, const struct pystacks *m)
{
	char buf[PY_STACK_MAX * 12 + 1];

	for (; r->py_nst < m->nst && !r->failed; r->py_nst++) {
		const struct py_stack *st = &m->st[r->py_nst];

		frames_text(buf, sizeof(buf), st);
		rec_bind_int(r, RS_PY_STACK, 1, r->py_nst);
		rec_bind_int(r, RS_PY_STACK, 2, st->tgid);
		rec_bind_int(r, RS_PY_STACK, 3, (int64_t)st->hash);
		rec_bind_int(r, RS_PY_STACK, 4, st->cut);
		rec_bind_text(r, RS_PY_STACK, 5, buf);
		rec_step(r, RS_PY_STACK);
	}
}

static void times(struct recorder *r, const struct pystacks *m)
{
	if (rec_exec(r, "DELETE FROM py_time", "write"))
		return;
	for (int i = 0; i < m->nrows && !r->failed; i++) {
		const struct py_row *row = &m->rows[i];

		if (!row->ns)
			continue;
		rec_bind_int(r, RS_PY_TIME, 1, row->stack);
		rec_bind_int(r, RS_PY_TIME, 2, row->tid);
		rec_bind_text(r, RS_PY_TIME, 3, ph_names[row->phase]);
		rec_bind_text(r, RS_PY_TIME, 4, tb_cat_names[row->cat]);
		rec_bind_text(r, RS_PY_TIME, 5, tb_cat_names[row->own]);
		rec_bind_int(r, RS_PY_TIME, 6, row->how);
		rec_bind_int(r, RS_PY_TIME, 7, (int64_t)row->ns);
		rec_bind_int(r, RS_PY_TIME, 8, (int64_t)row->n);
		rec_step(r, RS_PY_TIME);
	}
}

static void notes_and_roles(struct recorder *r, const struct pystacks *m)
{
	if (rec_exec(r, "DELETE FROM py_notes", "write") ||
	    rec_exec(r, "DELETE FROM py_roles", "write"))
		return;
	for (int i = 0; i < m->nnotes && !r->failed; i++) {
		rec_bind_int(r, RS_PY_NOTE, 1, m->notes[i].pid);
		rec_bind_int(r, RS_PY_NOTE, 2, m->notes[i].read);
		rec_bind_text(r, RS_PY_NOTE, 3, m->notes[i].text);
		rec_step(r, RS_PY_NOTE);
	}
	for (int i = 0; i < m->nroles && !r->failed; i++) {
		rec_bind_int(r, RS_PY_ROLE, 1, m->roles[i].pid);
		rec_bind_int(r, RS_PY_ROLE, 2, m->roles[i].role);
		rec_bind_int(r, RS_PY_ROLE, 3, m->roles[i].loop_tid);
		rec_step(r, RS_PY_ROLE);
	}
}

/* The reader's counts (what was not read), as meta: rewritten each flush. */
static void counts(struct recorder *r, const struct pystacks *m)
{
	char buf[32];

	if (!r->py_meta_done) {
		snprintf(buf, sizeof(buf), "%" PRIu64, m->period_ns);
		rec_meta(r, "py_period_ns", buf);
		r->py_meta_done = true;
	}
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)m->bpf.read_failed);
	rec_meta(r, "py_frames_unreadable", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)m->bpf.stacks_full);
	rec_meta(r, "py_stacks_not_kept", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)m->bpf.time_full);
	rec_meta(r, "py_times_not_kept", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, m->rows_dropped);
	rec_meta(r, "py_unnamed_ns", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)m->bpf.scopes_full);
	rec_meta(r, "py_scopes_not_kept", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, m->scopes_unplaced);
	rec_meta(r, "py_scopes_unplaced", buf);
}

int record_pystacks(struct recorder *r, const struct session *ses)
{
	const struct pystacks *m = ses_py(ses);

	if (!m || r->failed)
		return r->failed ? -1 : 0;
	funcs(r, m);
	stacks(r, m);
	times(r, m);
	notes_and_roles(r, m);
	counts(r, m);
	return r->failed ? -1 : 0;
}
