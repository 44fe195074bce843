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
			out[m->nfn].total[row->cat] += row->ns;
			out[m->nfn].self += row->ns;
			continue;
		}
		out[st->fn[0]].self += row->ns;
		for (int k = 0; k < st->depth; k++) {
			if (seen[st->fn[k]])
				continue;
			seen[st->fn[k]] = 1;
			out[st->fn[k]].total[row->cat] += row->ns;
		}
		for (int k = 0; k < st->depth; k++)
			seen[st->fn[k]] = 0;
	}
	free(seen);
	return read;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static void fn_label(char *buf, size_t len, const struct pystacks *m, int fn)
{
	if (fn < 0)
		snprintf(buf, len, "(no Python frame)");
	else
		snprintf(buf, len, "%s (%s:%d)", m->fn[fn].name, base_name(m->fn[fn].file),
			 m->fn[fn].line);
}

/*
 * Per phase of the training loops, its functions: those on fewer than all
 * of its stacks (the loop and its callers are on every one: they say
 * nothing of where in the phase the time went), largest first.
 */
#define FN_PER_PHASE 5
static void phase_blocks(FILE *f, const struct session *ses, struct fn_time *t, uint64_t wall)
{
	const struct pystacks *m = &ses->py;
	int n = m->nfn + 1;

	fprintf(f, "  by phase (each phase's functions, without those on all of its stacks: "
		"the loop and its callers):\n");
	for (int k = 0; k < PH_NSHOWN; k++) {
		int ph = ph_order[k], shown = 0;
		uint64_t read = tally(ses, FG_LOOP, ph, t);

		if (!read || 100 * read < wall)
			continue;
		qsort(t, n, sizeof(*t), cmp_total);
		fprintf(f, "    %-44s %7.2f s %5.1f%%\n", ph_names[ph], read / 1e9,
			100.0 * read / wall);
		for (int i = 0; i < n && shown < FN_PER_PHASE; i++) {
			char label[PY_NAME_LEN + PY_FILE_LEN + 16], made[128];
			uint64_t tot = sum(t[i].total);

			if (!tot)
				break;
			/* On (nearly) every stack, and not where the time is spent itself. */
			if (tot >= read - read / 200 && 2 * t[i].self < read)
				continue;
			fn_label(label, sizeof(label), m, t[i].fn);
			report_made_of(made, sizeof(made), t[i].total, 3);
			fprintf(f, "      %-46.46s %7.2f s %5.1f%% %7.2f s  %s\n", label, tot / 1e9,
				100.0 * tot / read, t[i].self / 1e9, made);
			shown++;
		}
	}
	fputc('\n', f);
}

static void group_table(FILE *f, const struct session *ses, enum fn_group g)
{
	const struct pystacks *m = &ses->py;
	bool any_trainer = has_trainer(m);
	struct fn_time *t = malloc((m->nfn + 1) * sizeof(*t));
	uint64_t wall = group_time(ses, g, any_trainer), read;
	int n = m->nfn + 1, shown = 0;

	if (!t)
		return;
	read = tally(ses, g, -1, t);
	if (!read)
		goto cleanup;
	/* Workers run one loop each (and a feeder thread): what they do is innermost. */
	qsort(t, n, sizeof(*t), g == FG_WORKERS ? cmp_self : cmp_total);
	if (wall >= read) {
		fprintf(f, "  %s: %.1f s traced, %.1f s (%.0f%%) of it in stacks read\n",
			g == FG_WORKERS ? "DataLoader workers' threads" :
			any_trainer ? "the training loops' threads" : "the job's threads",
			wall / 1e9, read / 1e9, 100.0 * read / wall);
	} else {
		/* Exited and folded by now (workers of past epochs): shares of what was read. */
		wall = read;
		fprintf(f, "  %s: %.1f s in stacks read\n",
			g == FG_WORKERS ? "DataLoader workers' threads" :
			any_trainer ? "the training loops' threads" : "the job's threads",
			read / 1e9);
	}
	fprintf(f, "    %-48s %9s %6s %9s  %s\n",
		g == FG_WORKERS ? "function (by self: innermost on the stack)" : "function",
		"total", "share", "self", "made of");
	for (int i = 0; i < n && shown < FN_SHOWN; i++) {
		char label[PY_NAME_LEN + PY_FILE_LEN + 16], made[128];
		uint64_t tot = sum(t[i].total);

		if (!tot || (g == FG_WORKERS && !t[i].self))
			break;
		/* The loop's callers, on every stack: they say nothing of where it goes. */
		if (tot >= read - read / 200 && 2 * t[i].self < read)
			continue;
		fn_label(label, sizeof(label), m, t[i].fn);
		report_made_of(made, sizeof(made), t[i].total, 3);
		fprintf(f, "    %-48.48s %7.2f s %5.1f%% %7.2f s  %s\n", label, tot / 1e9,
			100.0 * tot / wall, t[i].self / 1e9, made);
		shown++;
	}
	fputc('\n', f);
	if (g == FG_LOOP && any_trainer)
		phase_blocks(f, ses, t, wall);
cleanup:
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
}

/* A frame as flame graphs take it: no ';' (the separator), no newline. */
static void folded_frame(FILE *f, const struct py_func *fn)
{
	char buf[PY_NAME_LEN + PY_FILE_LEN + 16];

	snprintf(buf, sizeof(buf), "%s (%s:%d)", fn->name, fn->file, fn->line);
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
		if (st->cut)
			fputs(";(outer frames not read)", f);
		for (int k = st->depth - 1; k >= 0; k--) {
			fputc(';', f);
			folded_frame(f, &m->fn[st->fn[k]]);
		}
		fprintf(f, ";[%s] %llu\n", tb_cat_names[row->cat], (unsigned long long)row->ns);
	}
	return ferror(f) ? -1 : 0;
}
