// SPDX-License-Identifier: BSD-3-Clause
/*
 * The phase table's named sections (--functions): under a phase, its time
 * by the training loop's own callee (model/pysections.c). A section's wall
 * time is its part of the phase's time on the stacks read, times the
 * phase's wall time (from the spans), so the sections add up to the phase
 * row; what each was made of is its own rows' critical path, scaled alike.
 * Shown under other (PyTorch brackets none of it) and under any phase that
 * two callees of 5% and up share (forward without a DataLoader: the batch
 * prepared on the training thread, then the model); under setup, only
 * torch.compile's compiling (the first step's forward, without a DataLoader).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "categories.h"
#include "html.h"
#include "json_writer.h"
#include "pysections.h"
#include "sections.h"

#define SEC_SHOWN 5
#define SEC_SPLIT 0.05		/* a callee's part of its phase that makes it a split */
#define SEC_MIN 0.005		/* a section's part of the table to be shown */

/* The sections of one phase a report shows, and the rest folded. */
struct sec_view {
	const struct py_section *s[SEC_SHOWN];
	int n;
	struct py_section rest;
	int nrest;
	double ms_per_ns;	/* the phase's wall ms per ns read */
};

static bool split(const struct py_sections *ps, int phase)
{
	return phase == PH_OTHER ||
	       (ps->n > 1 && ps->s[1].ns >= SEC_SPLIT * ps->read);
}

/* Setup: torch.compile's part alone (a loop without a DataLoader compiles in it). */
static bool setup_pick(const struct py_sections *ps, struct sec_view *v, double table_ms)
{
	for (int i = 0; i < ps->n; i++) {
		const struct py_section *s = &ps->s[i];

		if (s->fn == PY_SEC_COMPILE && s->ns * v->ms_per_ns >= SEC_MIN * table_ms)
			v->s[v->n++] = s;
	}
	return v->n > 0;
}

/* Whether phase's sections are shown (phase_ms of table_ms), and which. */
static bool sec_pick(const struct py_sections *ps, int phase, double phase_ms, double table_ms,
		     struct sec_view *v)
{
	*v = (struct sec_view){ .rest = { .fn = PY_SEC_OUT } };
	if (!ps || !ps->read || phase_ms < 0.01 * table_ms)
		return false;
	v->ms_per_ns = phase_ms / ps->read;
	/*
	 * Setup's stacks are read from the tick the reader found the
	 * interpreter, not from the thread's start: its part of setup's read
	 * time is no part of setup's wall time. Its own time is (a thread's
	 * categories sum to its time).
	 */
	if (phase == PH_SETUP) {
		v->ms_per_ns = 1e-6;
		return setup_pick(ps, v, table_ms);
	}
	if (phase >= PH_NLOOP || !split(ps, phase))
		return false;
	for (int i = 0; i < ps->n; i++) {
		const struct py_section *s = &ps->s[i];

		if (v->n < SEC_SHOWN && s->ns * v->ms_per_ns >= SEC_MIN * table_ms) {
			v->s[v->n++] = s;
			continue;
		}
		v->rest.ns += s->ns;
		for (int c = 0; c < TB_NCAT; c++)
			v->rest.cat[c] += s->cat[c];
		v->nrest++;
	}
	return v->n > 0;
}

static void sec_label(char *buf, size_t len, const struct pystacks *m, const struct py_section *s,
		      int nrest)
{
	if (nrest)
		snprintf(buf, len, "%d more call%s", nrest, nrest == 1 ? "" : "s");
	else if (s->fn == PY_SEC_LOOP)
		snprintf(buf, len, "the loop's own lines");
	else if (s->fn == PY_SEC_OUT)
		snprintf(buf, len, "outside the loop's frame");
	else if (s->fn == PY_SEC_NOFRAME)
		snprintf(buf, len, "no Python frame");
	else if (s->fn == PY_SEC_COMPILE)
		snprintf(buf, len, "torch.compile compiling");
	else if (s->fn == PY_SEC_CUT)
		snprintf(buf, len, "a call in frames not read (a stack over %d deep)", TB_PY_DEPTH);
	else
		report_fn_label(buf, len, m, s->fn);
}

static void scaled(uint64_t out[TB_NCAT], const struct py_section *s, double ms_per_ns)
{
	for (int c = 0; c < TB_NCAT; c++)
		out[c] = (uint64_t)(s->cat[c] * ms_per_ns * 1e6);
}

/* A row as each writer prints it: rest > 0 for the rest folded, of that many calls. */
struct sec_out {
	void (*row)(const struct sec_out *o, const char *label, double ms, double per_step,
		    const uint64_t cat[TB_NCAT], const struct py_section *s, int rest);
	const struct pystacks *m;
	void *to;		/* the FILE or the JSON writer */
	double table_ms;
	int steps;
};

/* Each row shown under phase (none where it is not split), through o->row; how many. */
static int sec_each(const struct sec_out *o, const struct py_sections *ps, int phase,
		    double phase_ms)
{
	char label[PY_NAME_LEN + PY_FILE_LEN + 16];
	uint64_t cat[TB_NCAT];
	struct sec_view v;
	double per_ns;
	int n = 0;

	if (!sec_pick(ps, phase, phase_ms, o->table_ms, &v))
		return 0;
	/* Setup is no step's: its row has none per step (NAN), nor its sections. */
	per_ns = phase == PH_SETUP ? NAN : o->steps ? v.ms_per_ns / o->steps : 0.0;
	for (int i = 0; i <= v.n; i++) {
		const struct py_section *s = i < v.n ? v.s[i] : &v.rest;
		int rest = i < v.n ? 0 : v.nrest;

		if (i == v.n && (!rest || s->ns * v.ms_per_ns < SEC_MIN * o->table_ms))
			break;
		sec_label(label, sizeof(label), o->m, s, rest);
		scaled(cat, s, v.ms_per_ns);
		o->row(o, label, s->ns * v.ms_per_ns, s->ns * per_ns, cat, s, rest);
		n++;
	}
	return n;
}

/* ms per step, or "-" (setup's). */
static void per_step_text(char *buf, size_t len, double per_step)
{
	if (isnan(per_step))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f", per_step);
}

static void text_row(const struct sec_out *o, const char *label, double ms, double per_step,
		     const uint64_t cat[TB_NCAT], const struct py_section *s, int rest)
{
	char made[128], step[32];

	report_made_of(made, sizeof(made), cat, 3);
	per_step_text(step, sizeof(step), per_step);
	fprintf(o->to, "  %-13s %5.1f%% %8s %7s %7s %7s  in %s: %s\n", "",
		100.0 * ms / o->table_ms, step, "", "", "", label, *made ? made : "-");
}

int report_sections_text(FILE *f, const struct pystacks *m, const struct py_sections *ps,
			 int phase, double phase_ms, double table_ms, int steps)
{
	struct sec_out o = { text_row, m, f, table_ms, steps };

	return sec_each(&o, ps, phase, phase_ms);
}

static void json_row(const struct sec_out *o, const char *label, double ms, double per_step,
		     const uint64_t cat[TB_NCAT], const struct py_section *s, int rest)
{
	static const char *const kinds[] = { "call", "loop_lines", "outside_loop", "no_frame",
					     "frames_cut", "compile", "rest", "record_function" };
	int kind = rest ? 6 : s->fn < 0 ? -s->fn : py_func_is_scope(&o->m->fn[s->fn]) ? 7 : 0;
	struct jw *w = o->to;
	int64_t ns[TB_NCAT];

	for (int c = 0; c < TB_NCAT; c++)
		ns[c] = (int64_t)cat[c];
	jw_object(w);
	jw_string_field(w, "kind", kinds[kind]);
	if (kind == 0 || kind == 7)
		jw_string_field(w, "name", o->m->fn[s->fn].name);
	if (kind == 0) {
		jw_string_field(w, "file", o->m->fn[s->fn].file);
		jw_int_field(w, "line", o->m->fn[s->fn].line);
	}
	if (rest)
		jw_int_field(w, "calls", rest);
	jw_float_field(w, "wall_s", ms / 1e3, 6);
	jw_float_field(w, "share", ms / o->table_ms, 4);
	if (isnan(per_step))
		jw_null_field(w, "ms_per_step");	/* setup's, as its row's */
	else
		jw_float_field(w, "ms_per_step", per_step, 4);
	report_json_times(w, "critical_path_s", ns);
	jw_end_object(w);
}

void report_sections_json(struct jw *w, const struct pystacks *m, const struct py_sections *ps,
			  int phase, double phase_ms, double table_ms, int steps)
{
	struct sec_out o = { json_row, m, w, table_ms, steps };

	jw_name(w, "sections");
	jw_array(w);
	sec_each(&o, ps, phase, phase_ms);
	jw_end_array(w);
}

static void html_row(const struct sec_out *o, const char *label, double ms, double per_step,
		     const uint64_t cat[TB_NCAT], const struct py_section *s, int rest)
{
	char made[128], step[32];

	report_made_of(made, sizeof(made), cat, 3);
	per_step_text(step, sizeof(step), per_step);
	fputs("<tr class=\"section\"><td class=\"l\" style=\"padding-left:1.5em\">in ", o->to);
	html_esc(o->to, label);
	fprintf(o->to, "</td><td>%.1f</td><td>%s</td><td></td><td></td><td></td>"
		"<td class=\"l\">", 100.0 * ms / o->table_ms, step);
	html_esc(o->to, *made ? made : "-");
	fputs("</td></tr>\n", o->to);
}

int report_sections_html(FILE *f, const struct pystacks *m, const struct py_sections *ps,
			 int phase, double phase_ms, double table_ms, int steps)
{
	struct sec_out o = { html_row, m, f, table_ms, steps };

	return sec_each(&o, ps, phase, phase_ms);
}

/* The rows of a writer outside this file (CSV): label, wall ms, critical path. */
struct sec_fn_out {
	struct sec_out o;
	report_section_row_fn fn;
	void *arg;
};

static void fn_row(const struct sec_out *o, const char *label, double ms, double per_step,
		   const uint64_t cat[TB_NCAT], const struct py_section *s, int rest)
{
	const struct sec_fn_out *x = (const struct sec_fn_out *)o;

	x->fn(x->arg, label, ms, cat, rest);
}

void report_sections_each(const struct pystacks *m, const struct py_sections *ps, int phase,
			  double phase_ms, double table_ms, report_section_row_fn fn, void *arg)
{
	struct sec_fn_out x = { { fn_row, m, NULL, table_ms, 0 }, fn, arg };

	sec_each(&x.o, ps, phase, phase_ms);
}
