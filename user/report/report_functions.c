// SPDX-License-Identifier: BSD-3-Clause
/*
 * --functions: the Python functions the job's time went to, a view of
 * model/pystacks.c. Each function's time is inclusive (the stacks it is
 * on, once per stack however often it recurses) and self (the stacks it
 * is innermost on), with what it was made of in the critical path's
 * categories; and the stacks folded, for flame graphs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "categories.h"
#include "html.h"
#include "json_writer.h"
#include "pysections.h"
#include "report.h"
#include "sections.h"
#include "session.h"

#define FN_SHOWN 15

/* A function's time over the threads chosen; fn -1 is "no Python frame". */
struct fn_time {
	int fn;
	uint64_t total[TB_NCAT];
	uint64_t self;
};

/* Which threads a table is of: the training loops, or the workers. */
enum fn_group { FG_LOOP, FG_WORKERS };

/*
 * What a row's time was made of: the loops' on the critical path, as the
 * phase table (a wait for a worker is what the worker did); a worker's,
 * what its own thread was doing (its waits are its own).
 */
#define CAT_OF(row, g) ((g) == FG_WORKERS ? (row)->own : (row)->cat)

static uint64_t sum(const uint64_t c[TB_NCAT])
{
	uint64_t s = 0;

	for (int i = 0; i < TB_NCAT; i++)
		s += c[i];
	return s;
}

/* Whether a thread's rows count in the group (its process as last seen: the job folds them). */
static bool in_group(const struct pystacks *m, pid_t tgid, pid_t tid, enum fn_group g,
		     bool any_trainer)
{
	const struct py_proc_role *r = pystacks_role(m, tgid);
	int role = r ? r->role : TB_ROLE_OTHER;

	if (g == FG_WORKERS)
		return role == TB_ROLE_WORKER;
	if (any_trainer)
		return role == TB_ROLE_TRAINER && tid == r->loop_tid;
	return role != TB_ROLE_WORKER;
}

static bool has_trainer(const struct pystacks *m)
{
	for (int i = 0; i < m->nroles; i++)
		if (m->roles[i].role == TB_ROLE_TRAINER && m->roles[i].loop_tid)
			return true;
	return false;
}

/* The traced time of the group's threads the job still holds one by one: what shares are of. */
static uint64_t group_time(const struct session *ses, enum fn_group g, bool any_trainer)
{
	const struct job *job = &ses->job;
	uint64_t t = 0;

	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int k = 0; k < p->nthreads && !p->folded; k++)
			if (in_group(&ses->py, p->pid, p->threads[k].tid, g, any_trainer))
				t += sum(p->threads[k].cp);
	}
	return t;
}

static int cmp_self(const void *a, const void *b)
{
	uint64_t x = ((const struct fn_time *)a)->self, y = ((const struct fn_time *)b)->self;

	return x < y ? 1 : x > y ? -1 : 0;
}

static int cmp_total(const void *a, const void *b)
{
	uint64_t x = sum(((const struct fn_time *)a)->total);
	uint64_t y = sum(((const struct fn_time *)b)->total);

	return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * Every function's time over the group's rows (of one phase, or all: -1)
 * into out (one slot per function, then "no Python frame"); the time
 * read, or 0 if none.
 */
static uint64_t tally(const struct session *ses, enum fn_group g, int phase,
		      struct fn_time *out)
{
	const struct pystacks *m = &ses->py;
	bool any_trainer = has_trainer(m);
	uint64_t read = 0;
	char *seen = calloc(m->nfn ? m->nfn : 1, 1);

	if (!seen)
		return 0;
	for (int i = 0; i <= m->nfn; i++)
		out[i] = (struct fn_time){ .fn = i < m->nfn ? i : -1 };
	for (int r = 0; r < m->nrows; r++) {
		const struct py_row *row = &m->rows[r];
		const struct py_stack *st = &m->st[row->stack];

		if (!row->ns || (phase >= 0 && row->phase != phase) ||
		    !in_group(m, st->tgid, row->tid, g, any_trainer))
			continue;
		read += row->ns;
		if (!st->depth) {
			out[m->nfn].total[CAT_OF(row, g)] += row->ns;
			out[m->nfn].self += row->ns;
			continue;
		}
		out[st->fn[0]].self += row->ns;
		for (int k = 0; k < st->depth; k++) {
			if (seen[st->fn[k]])
				continue;
			seen[st->fn[k]] = 1;
			out[st->fn[k]].total[CAT_OF(row, g)] += row->ns;
		}
		for (int k = 0; k < st->depth; k++)
			seen[st->fn[k]] = 0;
	}
	free(seen);
	return read;
}

int report_fn_loop_totals(const struct session *ses, struct fn_loop_total **out)
{
	const struct pystacks *m = ses_py(ses);
	struct fn_time *t = m ? malloc((m->nfn + 1) * sizeof(*t)) : NULL;
	struct fn_loop_total *o = m ? calloc(m->nfn ? m->nfn : 1, sizeof(*o)) : NULL;
	uint64_t *train = m ? calloc(m->nfn ? m->nfn : 1, sizeof(*train)) : NULL;
	uint64_t read = 0;

	*out = NULL;
	if (!t || !o || !train) {
		free(t);
		free(o);
		free(train);
		return -1;
	}
	for (int f = 0; f < m->nfn; f++)
		o[f] = (struct fn_loop_total){ m->fn[f].name, m->fn[f].file, m->fn[f].line, 0, false };
	for (int p = 0; p < PH_NLOOP; p++) {
		bool training = pysections_training(p);
		uint64_t r = tally(ses, FG_LOOP, p, t);

		read += training ? r : 0;
		for (int i = 0; i < m->nfn; i++) {
			o[t[i].fn >= 0 ? t[i].fn : 0].ns += t[i].fn >= 0 ? sum(t[i].total) : 0;
			if (training && t[i].fn >= 0)
				train[t[i].fn] += sum(t[i].total);
		}
	}
	/* As the named sections' chain. */
	for (int f = 0; f < m->nfn; f++)
		o[f].everywhere = pysections_everywhere(train[f], read);
	free(t);
	free(train);
	*out = o;
	return m->nfn;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* "name (file:line)", or "name (record_function)" for a block's frame. */
static void fn_label(char *buf, size_t len, const char *name, const char *file, int line)
{
	if (py_is_scope(file, line))
		snprintf(buf, len, "%s (record_function)", name);
	else
		snprintf(buf, len, "%s (%s:%d)", name, file, line);
}

void report_fn_label_of(char *buf, size_t len, const char *name, const char *file, int line)
{
	fn_label(buf, len, name, base_name(file), line);
}

void report_fn_label(char *buf, size_t len, const struct pystacks *m, int fn)
{
	if (fn < 0)
		snprintf(buf, len, "(no Python frame)");
	else
		report_fn_label_of(buf, len, m->fn[fn].name, m->fn[fn].file, m->fn[fn].line);
}

/*
 * One table of functions: a group's (of one phase, or all: -1), sorted,
 * with what its shares are of. The text and the JSON print the same ones.
 */
struct fn_table {
	enum fn_group g;
	int phase;
	uint64_t read;		/* time on the group's stacks read */
	uint64_t wall;		/* what shares are of: traced time, or read */
	bool traced;		/* wall is the threads' traced time */
	struct fn_time *t;
	int n;
};

#define FN_PER_PHASE 5

static const char *group_name(enum fn_group g, bool any_trainer)
{
	return g == FG_WORKERS ? "DataLoader workers' threads" :
	       any_trainer ? "the training loops' threads" : "the job's threads";
}

/*
 * The table, t sized for every function and "no Python frame"; false if
 * nothing was read. A phase's shares are of the phase's time read; the
 * group's, of its threads' traced time while the job still holds them
 * one by one (exited ones are folded away: then of what was read).
 */
static bool fn_table_make(const struct session *ses, enum fn_group g, int phase,
			  struct fn_time *t, struct fn_table *tb)
{
	bool any_trainer = has_trainer(&ses->py);

	*tb = (struct fn_table){ .g = g, .phase = phase, .t = t, .n = ses->py.nfn + 1 };
	tb->read = tally(ses, g, phase, t);
	if (!tb->read)
		return false;
	tb->wall = phase < 0 ? group_time(ses, g, any_trainer) : 0;
	tb->traced = tb->wall >= tb->read;
	if (!tb->traced)
		tb->wall = tb->read;
	/* Workers run one loop each (and a feeder thread): what they do is innermost. */
	qsort(t, tb->n, sizeof(*t), g == FG_WORKERS ? cmp_self : cmp_total);
	return true;
}

/*
 * Whether row i is shown: it has time (workers: of its own); it is not on
 * (nearly) every stack without being where that time is spent itself
 * (the loop and its callers: they say nothing of where the time goes).
 */
static bool fn_shown(const struct fn_table *tb, int i)
{
	uint64_t tot = sum(tb->t[i].total);

	if (!tot || (tb->g == FG_WORKERS && !tb->t[i].self))
		return false;
	return !(pysections_everywhere(tot, tb->read) && 2 * tb->t[i].self < tb->read);
}

static void fn_line(FILE *f, const struct pystacks *m, const struct fn_table *tb, int i,
		    const char *indent, int width)
{
	char label[PY_NAME_LEN + PY_FILE_LEN + 16], made[128];
	uint64_t tot = sum(tb->t[i].total);

	report_fn_label(label, sizeof(label), m, tb->t[i].fn);
	report_made_of(made, sizeof(made), tb->t[i].total, 3);
	fprintf(f, "%s%-*.*s %7.2f s %5.1f%% %7.2f s  %s\n", indent, width, width, label,
		tot / 1e9, 100.0 * tot / tb->wall, tb->t[i].self / 1e9, made);
}

/* Per phase of the training loops (shares of its loop's time, 1% and up), its functions. */
static void phase_blocks(FILE *f, const struct session *ses, struct fn_time *t, uint64_t wall)
{
	fprintf(f, "  by phase (each phase's functions, without those on all of its stacks: "
		"the loop and its callers):\n");
	for (int k = 0; k < PH_NSHOWN; k++) {
		struct fn_table tb;

		if (!fn_table_make(ses, FG_LOOP, ph_order[k], t, &tb) || 100 * tb.read < wall)
			continue;
		fprintf(f, "    %-44s %7.2f s %5.1f%%\n", ph_names[ph_order[k]], tb.read / 1e9,
			100.0 * tb.read / wall);
		for (int i = 0, shown = 0; i < tb.n && shown < FN_PER_PHASE; i++)
			if (fn_shown(&tb, i)) {
				fn_line(f, &ses->py, &tb, i, "      ", 46);
				shown++;
			}
	}
	fputc('\n', f);
}

static void group_table(FILE *f, const struct session *ses, enum fn_group g)
{
	bool any_trainer = has_trainer(&ses->py);
	struct fn_time *t = malloc((ses->py.nfn + 1) * sizeof(*t));
	struct fn_table tb;
	uint64_t wall;

	if (!t || !fn_table_make(ses, g, -1, t, &tb))
		goto cleanup;
	if (tb.traced)
		fprintf(f, "  %s: %.1f s traced, %.1f s (%.0f%%) of it in stacks read\n",
			group_name(g, any_trainer), tb.wall / 1e9, tb.read / 1e9,
			100.0 * tb.read / tb.wall);
	else
		fprintf(f, "  %s: %.1f s in stacks read\n", group_name(g, any_trainer),
			tb.read / 1e9);
	fprintf(f, "    %-48s %9s %6s %9s  %s\n",
		g == FG_WORKERS ? "function (by self: innermost on the stack)" : "function",
		"total", "share", "self", g == FG_WORKERS ? "made of (the thread's own state)" :
		"made of (critical path)");
	for (int i = 0, shown = 0; i < tb.n && shown < FN_SHOWN; i++)
		if (fn_shown(&tb, i)) {
			fn_line(f, &ses->py, &tb, i, "    ", 48);
			shown++;
		}
	fputc('\n', f);
	wall = tb.wall;
	if (g == FG_LOOP && any_trainer)
		phase_blocks(f, ses, t, wall);
cleanup:
	free(t);
}

static void fn_json(struct jw *w, const struct pystacks *m, const struct fn_table *tb, int i)
{
	const struct fn_time *x = &tb->t[i];
	int64_t made[TB_NCAT];

	for (int c = 0; c < TB_NCAT; c++)
		made[c] = (int64_t)x->total[c];
	jw_object(w);
	if (x->fn >= 0) {
		jw_string_field(w, "name", m->fn[x->fn].name);
		jw_string_field(w, "file", m->fn[x->fn].file);
		jw_int_field(w, "line", m->fn[x->fn].line);
	} else {
		jw_null_field(w, "name");	/* no Python frame */
	}
	jw_float_field(w, "total_s", sum(x->total) / 1e9, 6);
	jw_float_field(w, "self_s", x->self / 1e9, 6);
	jw_float_field(w, "share", (double)sum(x->total) / tb->wall, 4);
	report_json_times(w, "made_of_s", made);
	jw_end_object(w);
}

static void table_json(struct jw *w, const struct pystacks *m, const struct fn_table *tb,
		       int max)
{
	jw_name(w, "functions");
	jw_array(w);
	for (int i = 0, shown = 0; i < tb->n && shown < max; i++)
		if (fn_shown(tb, i)) {
			fn_json(w, m, tb, i);
			shown++;
		}
	jw_end_array(w);
}

static void group_json(struct jw *w, const struct session *ses, enum fn_group g,
		       struct fn_time *t)
{
	struct fn_table tb;
	uint64_t wall;

	if (!fn_table_make(ses, g, -1, t, &tb))
		return;
	wall = tb.wall;
	jw_object(w);
	jw_string_field(w, "threads", g == FG_WORKERS ? "workers" :
			has_trainer(&ses->py) ? "training_loops" : "job");
	if (tb.traced)
		jw_float_field(w, "traced_s", tb.wall / 1e9, 6);
	else
		jw_null_field(w, "traced_s");
	jw_float_field(w, "read_s", tb.read / 1e9, 6);
	jw_string_field(w, "order", g == FG_WORKERS ? "self" : "total");
	table_json(w, &ses->py, &tb, 50);
	jw_name(w, "phases");
	jw_array(w);
	for (int k = 0; g == FG_LOOP && has_trainer(&ses->py) && k < PH_NSHOWN; k++) {
		if (!fn_table_make(ses, FG_LOOP, ph_order[k], t, &tb))
			continue;
		jw_object(w);
		jw_string_field(w, "phase", ph_names[ph_order[k]]);
		jw_float_field(w, "read_s", tb.read / 1e9, 6);
		jw_float_field(w, "share", (double)tb.read / wall, 4);
		table_json(w, &ses->py, &tb, 20);
		jw_end_object(w);
	}
	jw_end_array(w);
	jw_end_object(w);
}

void report_functions_json(struct jw *w, const struct session *ses)
{
	const struct pystacks *m = ses_py(ses);
	struct fn_time *t;

	if (!m)
		return;
	t = malloc((m->nfn + 1) * sizeof(*t));
	jw_name(w, "functions");
	jw_object(w);
	jw_float_field(w, "stack_hz", m->period_ns ? 1e9 / m->period_ns : 0, 3);
	jw_name(w, "interpreters");
	jw_array(w);
	for (int i = 0; i < m->nnotes; i++) {
		jw_object(w);
		jw_int_field(w, "pid", m->notes[i].pid);
		jw_bool_field(w, "read", m->notes[i].read);
		jw_string_field(w, "note", m->notes[i].text);
		jw_end_object(w);
	}
	jw_end_array(w);
	jw_name(w, "not_read");
	jw_object(w);
	jw_uint_field(w, "frames_unreadable", m->bpf.read_failed);
	jw_uint_field(w, "stacks_not_kept", m->bpf.stacks_full);
	jw_uint_field(w, "times_not_kept", m->bpf.time_full);
	jw_float_field(w, "unnamed_s", m->rows_dropped / 1e9, 6);
	jw_end_object(w);
	jw_name(w, "groups");
	jw_array(w);
	if (t) {
		group_json(w, ses, FG_LOOP, t);
		group_json(w, ses, FG_WORKERS, t);
	}
	jw_end_array(w);
	jw_end_object(w);
	free(t);
}

/* What the reader found in each process, one line per finding: "pid 7: ..." or "pids 7, 9 (2): ...". */
static void notes(FILE *f, const struct pystacks *m)
{
	for (int i = 0; i < m->nnotes; i++) {
		int same = 0, listed = 0;
		bool first = true;

		for (int k = 0; k < i && first; k++)
			first = strcmp(m->notes[k].text, m->notes[i].text) != 0;
		if (!first)
			continue;
		for (int k = i; k < m->nnotes; k++)
			same += !strcmp(m->notes[k].text, m->notes[i].text);
		fprintf(f, "  pid%s ", same > 1 ? "s" : "");
		for (int k = i; k < m->nnotes; k++) {
			if (strcmp(m->notes[k].text, m->notes[i].text))
				continue;
			if (listed < 6)
				fprintf(f, "%s%d", listed ? ", " : "", m->notes[k].pid);
			listed++;
		}
		if (same > 1)
			fprintf(f, "%s (%d)", same > 6 ? "..." : "", same);
		fprintf(f, ": %s\n", m->notes[i].text);
	}
}

void report_functions_text(FILE *f, const struct session *ses)
{
	const struct pystacks *m = ses_py(ses);

	if (!m)
		return;
	fprintf(f, "Python functions (time on a function's stacks; waits read whole at each switch "
		"off a CPU, CPU time sampled %.0f times a second)\n",
		m->period_ns ? 1e9 / m->period_ns : 0.0);
	notes(f, m);
	group_table(f, ses, FG_LOOP);
	group_table(f, ses, FG_WORKERS);
	if (m->bpf.read_failed || m->bpf.stacks_full || m->bpf.time_full || m->rows_dropped)
		fprintf(f, "  not read: %llu frames unreadable, %llu stacks and %llu times not "
			"kept (maps full), %.3f s of stacks not named\n\n",
			(unsigned long long)m->bpf.read_failed,
			(unsigned long long)m->bpf.stacks_full,
			(unsigned long long)m->bpf.time_full, m->rows_dropped / 1e9);
	if (m->bpf.scopes_full || m->scopes_unplaced)
		fprintf(f, "  record_function: %llu brackets not kept (map full); %llu stacks read in "
			"one not shown in it (where it opened was not on them)\n\n",
			(unsigned long long)m->bpf.scopes_full,
			(unsigned long long)m->scopes_unplaced);
}

/* A frame as flame graphs take it: no ';' (the separator), no newline. */
static void folded_frame(FILE *f, const struct py_func *fn)
{
	char buf[PY_NAME_LEN + PY_FILE_LEN + 16];

	fn_label(buf, sizeof(buf), fn->name, fn->file, fn->line);
	for (char *c = buf; *c; c++)
		if (*c == ';' || *c == '\n' || *c == '\r')
			*c = '_';
	fputs(buf, f);
}

int report_functions_folded(FILE *f, const struct session *ses)
{
	const struct pystacks *m = ses_py(ses);

	if (!m)
		return 0;
	for (int r = 0; r < m->nrows; r++) {
		const struct py_row *row = &m->rows[r];
		const struct py_stack *st = &m->st[row->stack];
		const struct proc_rec *p = job_proc_const(&ses->job, st->tgid);

		if (!row->ns)
			continue;
		fprintf(f, "%s %d", p ? role_name(p->role) : "process", st->tgid);
		if (py_stack_outer_lost(st))
			fputs(";(outer frames not read)", f);
		for (int k = st->depth - 1; k >= 0; k--) {
			fputc(';', f);
			folded_frame(f, &m->fn[st->fn[k]]);
			if (k == TB_PY_INNER && py_stack_cut(st))
				fprintf(f, ";(%u frames not read)", py_stack_cut(st));
		}
		fprintf(f, ";[%s] %llu\n", tb_cat_names[row->cat], (unsigned long long)row->ns);
	}
	return ferror(f) ? -1 : 0;
}

static void fn_row_html(FILE *f, const struct pystacks *m, const struct fn_table *tb, int i,
			bool indent)
{
	char label[PY_NAME_LEN + PY_FILE_LEN + 16], made[128];
	uint64_t tot = sum(tb->t[i].total);

	report_fn_label(label, sizeof(label), m, tb->t[i].fn);
	report_made_of(made, sizeof(made), tb->t[i].total, 3);
	fprintf(f, "<tr><td class=\"l\"%s>", indent ? " style=\"padding-left:1.5em\"" : "");
	html_esc(f, label);
	fprintf(f, "</td><td>%.2f</td><td>%.1f</td><td>%.2f</td><td class=\"l\">", tot / 1e9,
		100.0 * tot / tb->wall, tb->t[i].self / 1e9);
	html_esc(f, made);
	fputs("</td></tr>\n", f);
}

static void group_html(FILE *f, const struct session *ses, enum fn_group g, struct fn_time *t)
{
	bool any_trainer = has_trainer(&ses->py);
	struct fn_table tb;
	uint64_t wall;

	if (!fn_table_make(ses, g, -1, t, &tb))
		return;
	wall = tb.wall;
	fputs("<h3>", f);
	html_esc(f, group_name(g, any_trainer));
	if (tb.traced)
		fprintf(f, ": %.1f s traced, %.1f s (%.0f%%) in stacks read</h3>\n", tb.wall / 1e9,
			tb.read / 1e9, 100.0 * tb.read / tb.wall);
	else
		fprintf(f, ": %.1f s in stacks read</h3>\n", tb.read / 1e9);
	fprintf(f, "<table><tr><th class=\"l\">%s</th><th>total s</th><th>share %%</th>"
		"<th>self s</th><th class=\"l\">%s</th></tr>\n",
		g == FG_WORKERS ? "function (by self)" : "function",
		g == FG_WORKERS ? "made of (own state)" : "made of (critical path)");
	for (int i = 0, shown = 0; i < tb.n && shown < FN_SHOWN; i++)
		if (fn_shown(&tb, i)) {
			fn_row_html(f, &ses->py, &tb, i, false);
			shown++;
		}
	fputs("</table>\n", f);
	if (g != FG_LOOP || !any_trainer)
		return;
	fputs("<h3>By phase</h3><table><tr><th class=\"l\">phase, its functions</th>"
	      "<th>total s</th><th>share %</th><th>self s</th><th class=\"l\">made of</th></tr>\n",
	      f);
	for (int k = 0; k < PH_NSHOWN; k++) {
		if (!fn_table_make(ses, FG_LOOP, ph_order[k], t, &tb) || 100 * tb.read < wall)
			continue;
		fprintf(f, "<tr><th class=\"l\">%s</th><th>%.2f</th><th>%.1f</th><th></th><th></th>"
			"</tr>\n", ph_names[ph_order[k]], tb.read / 1e9, 100.0 * tb.read / wall);
		for (int i = 0, shown = 0; i < tb.n && shown < FN_PER_PHASE; i++)
			if (fn_shown(&tb, i)) {
				fn_row_html(f, &ses->py, &tb, i, true);
				shown++;
			}
	}
	fputs("</table>\n", f);
}

void report_functions_html(FILE *f, const struct session *ses)
{
	const struct pystacks *m = ses_py(ses);
	struct fn_time *t;

	if (!m || !(t = malloc((m->nfn + 1) * sizeof(*t))))
		return;
	fprintf(f, "<section id=\"functions\"><h2>Python functions</h2><p class=\"note\">Time on "
		"a function's stacks (total), innermost (self); waits read whole at each switch "
		"off a CPU, CPU time sampled %.0f times a second; shares of the threads' traced "
		"time, a phase's of the phase's. Functions on every stack (the loop and its "
		"callers) are left out.</p>\n", m->period_ns ? 1e9 / m->period_ns : 0.0);
	group_html(f, ses, FG_LOOP, t);
	group_html(f, ses, FG_WORKERS, t);
	fputs("</section>\n", f);
	free(t);
}
