/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one JSON writer: every JSON trainbpf prints goes through it, so that
 * commas, quoting, escaping and number formats live in one place. Compact
 * (no blanks), except arrays opened with jw_array_lines, which put each
 * element on a line of its own (the trace's events). Numbers are printed
 * with the decimals the caller names: the documents' contracts
 * (docs/json.md) fix them per field.
 *
 *	struct jw w;
 *	jw_init(&w, f);
 *	jw_object(&w);
 *	jw_uint_field(&w, "pid", 42);
 *	jw_name(&w, "times");
 *	jw_array(&w); jw_float(&w, 1.5, 3); jw_end_array(&w);
 *	jw_end_object(&w);		-> {"pid":42,"times":[1.500]}
 */
#ifndef TB_JSON_WRITER_H
#define TB_JSON_WRITER_H

#include <stdbool.h>
#include <stdio.h>

#define JW_MAX_DEPTH 32

struct jw {
	FILE *f;
	int depth;
	int over;			/* containers open past JW_MAX_DEPTH */
	bool bad;			/* went past it: separators there are not sure */
	bool named;			/* a name was written: its value is next */
	bool some[JW_MAX_DEPTH];	/* the container at this depth has an element */
	bool lines[JW_MAX_DEPTH];	/* one element per line */
};

void jw_init(struct jw *w, FILE *f);

void jw_object(struct jw *w);
void jw_end_object(struct jw *w);
void jw_array(struct jw *w);
/* An array whose elements each start a line; it closes on a line too. */
void jw_array_lines(struct jw *w);
void jw_end_array(struct jw *w);

/* The name of the next value in an object. */
void jw_name(struct jw *w, const char *name);

/* A string: '"' and '\' escaped, bytes outside printable ASCII as \u00XX. */
void jw_string(struct jw *w, const char *s);
void jw_int(struct jw *w, long long v);
void jw_uint(struct jw *w, unsigned long long v);
/* decimals after the point; null if v is not finite (JSON has no NaN). */
void jw_float(struct jw *w, double v, int decimals);
/* digits significant ("%.*g"); null if v is not finite. */
void jw_sig(struct jw *w, double v, int digits);
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);

/* name and value in one call */
void jw_string_field(struct jw *w, const char *name, const char *s);
void jw_int_field(struct jw *w, const char *name, long long v);
void jw_uint_field(struct jw *w, const char *name, unsigned long long v);
void jw_float_field(struct jw *w, const char *name, double v, int decimals);
void jw_bool_field(struct jw *w, const char *name, bool v);
void jw_null_field(struct jw *w, const char *name);

#endif
