// SPDX-License-Identifier: BSD-3-Clause
#include <math.h>
#include <string.h>
#include "json_writer.h"
#include "utf8.h"

void jw_init(struct jw *w, FILE *f)
{
	*w = (struct jw){ .f = f };
}

/* Before a value, or a name in an object: the separator it needs. */
static void next(struct jw *w)
{
	if (w->named) {
		w->named = false;
		return;
	}
	if (w->depth && !w->over) {
		if (w->lines[w->depth])
			fputs(w->some[w->depth] ? ",\n" : "\n", w->f);
		else if (w->some[w->depth])
			fputc(',', w->f);
		w->some[w->depth] = true;
	}
}

static void start(struct jw *w, char c, bool lines)
{
	next(w);
	fputc(c, w->f);
	/* Deeper than any document of ours (a caller's bug): balanced, flagged. */
	if (w->over || w->depth + 1 == JW_MAX_DEPTH) {
		w->over++;
		w->bad = true;
		return;
	}
	w->depth++;
	w->some[w->depth] = false;
	w->lines[w->depth] = lines;
}

static void end(struct jw *w, char c)
{
	if (w->over) {
		w->over--;
		fputc(c, w->f);
		return;
	}
	if (w->depth && w->lines[w->depth])
		fputc('\n', w->f);
	fputc(c, w->f);
	if (w->depth)
		w->depth--;
}

void jw_object(struct jw *w)
{
	start(w, '{', false);
}

void jw_end_object(struct jw *w)
{
	end(w, '}');
}

void jw_array(struct jw *w)
{
	start(w, '[', false);
}

void jw_array_lines(struct jw *w)
{
	start(w, '[', true);
}

void jw_end_array(struct jw *w)
{
	end(w, ']');
}

/*
 * A string as JSON: valid UTF-8 as it is (a process named tréne stays
 * tréne), a byte that starts no valid sequence as U+FFFD (names and
 * environments are bytes: the document stays valid UTF-8), control
 * characters escaped.
 */
static void quoted(FILE *f, const char *s)
{
	size_t n = strlen(s);

	fputc('"', f);
	while (*s) {
		unsigned char ch = *s;
		int k = utf8_seq((const unsigned char *)s, n);

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(f, "\\u%04x", ch);
		else if (!k)
			fputs("\\ufffd", f);
		else
			fwrite(s, 1, k, f);
		k = k ? k : 1;
		s += k;
		n -= k;
	}
	fputc('"', f);
}

void jw_name(struct jw *w, const char *name)
{
	next(w);
	quoted(w->f, name);
	fputc(':', w->f);
	w->named = true;
}

void jw_string(struct jw *w, const char *s)
{
	next(w);
	quoted(w->f, s);
}

void jw_int(struct jw *w, long long v)
{
	next(w);
	fprintf(w->f, "%lld", v);
}

void jw_uint(struct jw *w, unsigned long long v)
{
	next(w);
	fprintf(w->f, "%llu", v);
}

void jw_float(struct jw *w, double v, int decimals)
{
	next(w);
	if (isfinite(v))
		fprintf(w->f, "%.*f", decimals, v);
	else
		fputs("null", w->f);
}

void jw_sig(struct jw *w, double v, int digits)
{
	next(w);
	if (isfinite(v))
		fprintf(w->f, "%.*g", digits, v);
	else
		fputs("null", w->f);
}

void jw_bool(struct jw *w, bool v)
{
	next(w);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(struct jw *w)
{
	next(w);
	fputs("null", w->f);
}

void jw_string_field(struct jw *w, const char *name, const char *s)
{
	jw_name(w, name);
	jw_string(w, s);
}

void jw_int_field(struct jw *w, const char *name, long long v)
{
	jw_name(w, name);
	jw_int(w, v);
}

void jw_uint_field(struct jw *w, const char *name, unsigned long long v)
{
	jw_name(w, name);
	jw_uint(w, v);
}

void jw_float_field(struct jw *w, const char *name, double v, int decimals)
{
	jw_name(w, name);
	jw_float(w, v, decimals);
}

void jw_bool_field(struct jw *w, const char *name, bool v)
{
	jw_name(w, name);
	jw_bool(w, v);
}

void jw_null_field(struct jw *w, const char *name)
{
	jw_name(w, name);
	jw_null(w);
}
