// SPDX-License-Identifier: BSD-3-Clause
/*
 * Schema 12's Python stacks (--functions, record_py.c) back into the model
 * (model/pystacks.h), as the last flush left them: the reports print the
 * same functions section and named sections, and report --folded the
 * stacks. A file without them (older, or recorded without --functions)
 * leaves py_on false. They are the run's, uncut: a report of one epoch or
 * one process (--epoch, --pid) has no functions section.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include "categories.h"
#include "phase_spans.h"
#include "recording_read.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

/* The meta values py_*; false if the file has no py_period_ns (no stacks). */
static int load_meta(struct recording *r, bool *any, char *err, size_t errlen)
{
	struct pystacks *m = &r->ses.py;
	sqlite3_stmt *st = NULL;
	int rc;

	*any = false;
	if (sqlite3_prepare_v2(r->db, "SELECT key, value FROM meta WHERE key LIKE 'py\\_%' "
			       "ESCAPE '\\'", -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *k = rec_col_str(st, 0);
		uint64_t v = strtoull(rec_col_str(st, 1), NULL, 10);

		if (!strcmp(k, "py_period_ns")) {
			m->period_ns = v;
			*any = v > 0;
		} else if (!strcmp(k, "py_frames_unreadable")) {
			m->bpf.read_failed = v;
		} else if (!strcmp(k, "py_stacks_not_kept")) {
			m->bpf.stacks_full = v;
		} else if (!strcmp(k, "py_times_not_kept")) {
			m->bpf.time_full = v;
		} else if (!strcmp(k, "py_unnamed_ns")) {
			m->rows_dropped = v;
		} else if (!strcmp(k, "py_scopes_not_kept")) {
			m->bpf.scopes_full = v;
		} else if (!strcmp(k, "py_scopes_unplaced")) {
			m->scopes_unplaced = v;
		}
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

static int load_funcs(struct recording *r, char *err, size_t errlen)
{
	struct pystacks *m = &r->ses.py;
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(r->db, "SELECT id, name, file, line FROM py_funcs ORDER BY id",
			       -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);

		/* Kept once each by the writer: the same id back, or the file is not its. */
		if (pystacks_func(m, rec_col_str(st, 1), rec_col_str(st, 2),
				  (int)sqlite3_column_int64(st, 3)) != id) {
			sqlite3_finalize(st);
			return ERR("%s: py_funcs: function %lld is not the %dth kept", r->path,
				   (long long)id, m->nfn);
		}
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

/* "12,7,3" into fn (innermost first); the depth, or -1 if it is not a list of known ids. */
static int parse_frames(const char *s, int nfn, int fn[PY_STACK_MAX])
{
	int depth = 0;

	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || v >= nfn || depth == PY_STACK_MAX)
			return -1;
		fn[depth++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return depth;
}

static int load_stacks(struct recording *r, char *err, size_t errlen)
{
	struct pystacks *m = &r->ses.py;
	sqlite3_stmt *st = NULL;
	int fn[PY_STACK_MAX], rc;

	if (sqlite3_prepare_v2(r->db, "SELECT id, pid, hash, cut, frames FROM py_stacks "
			       "ORDER BY id", -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		int depth = parse_frames(rec_col_str(st, 4), m->nfn, fn);

		if (depth < 0 || pystacks_add(m, (pid_t)sqlite3_column_int64(st, 1),
					      (uint64_t)sqlite3_column_int64(st, 2), fn, depth,
					      (uint32_t)sqlite3_column_int64(st, 3)) != id) {
			sqlite3_finalize(st);
			return ERR("%s: py_stacks: stack %lld is not a list of its functions",
				   r->path, (long long)id);
		}
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

static int load_times(struct recording *r, char *err, size_t errlen)
{
	struct pystacks *m = &r->ses.py;
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(r->db, "SELECT stack, tid, phase, cat, own, how, ns, n "
			       "FROM py_time ORDER BY rowid", -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t stack = sqlite3_column_int64(st, 0), how = sqlite3_column_int64(st, 5);
		int ph = rec_name_index(rec_col_str(st, 2), ph_names, PH_NSHOWN);
		int cat = rec_name_index(rec_col_str(st, 3), tb_cat_names, TB_NCAT);
		int own = rec_name_index(rec_col_str(st, 4), tb_cat_names, TB_NCAT);
		int64_t ns = sqlite3_column_int64(st, 6), n = sqlite3_column_int64(st, 7);

		if (stack < 0 || stack >= m->nst || ph < 0 || cat < 0 || own < 0 ||
		    (how != TB_PYH_WAIT && how != TB_PYH_SAMPLE) || ns < 0 || n < 0) {
			sqlite3_finalize(st);
			return ERR("%s: py_time: a row of stack %lld names no stack, phase, "
				   "category or way it was read", r->path, (long long)stack);
		}
		pystacks_add_time(m, (int)stack, (pid_t)sqlite3_column_int64(st, 1), ph, cat, own,
				  (int)how, (uint64_t)ns, (uint64_t)n);
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

static int load_notes_roles(struct recording *r, char *err, size_t errlen)
{
	struct pystacks *m = &r->ses.py;
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(r->db, "SELECT pid, read, note FROM py_notes ORDER BY rowid", -1,
			       &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		pystacks_note(m, (pid_t)sqlite3_column_int64(st, 0),
			      sqlite3_column_int64(st, 1) != 0, rec_col_str(st, 2));
	if (rec_stmt_done(r, st, rc, err, errlen))
		return -1;
	if (sqlite3_prepare_v2(r->db, "SELECT pid, role, loop_tid FROM py_roles ORDER BY rowid",
			       -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t role = sqlite3_column_int64(st, 1);

		if (role < TB_ROLE_OTHER || role > TB_ROLE_WORKER) {
			sqlite3_finalize(st);
			return ERR("%s: py_roles: role %lld is none of this build's", r->path,
				   (long long)role);
		}
		pystacks_set_role(m, (pid_t)sqlite3_column_int64(st, 0), (int)role,
				  (pid_t)sqlite3_column_int64(st, 2));
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

int rec_load_py(struct recording *r, const struct rec_filter *flt, char *err, size_t errlen)
{
	bool any;

	if (r->version < 12 || flt->epoch_set || flt->pid)
		return 0;
	pystacks_init(&r->ses.py, 0);
	if (load_meta(r, &any, err, errlen))
		return -1;
	if (!any)
		return 0;
	if (load_funcs(r, err, errlen) || load_stacks(r, err, errlen) ||
	    load_times(r, err, errlen) || load_notes_roles(r, err, errlen))
		return -1;
	r->ses.py_on = true;
	return 0;
}
