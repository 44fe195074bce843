// SPDX-License-Identifier: BSD-3-Clause
#include <stdlib.h>
#include <string.h>
#include "live_screen.h"

#define ESC "\033"
#define MIN_JOB_ROWS 3	/* the job's output keeps at least these rows */

void live_screen_start(FILE *f, struct live_screen *s, int rows, int cols)
{
	memset(s, 0, sizeof(*s));
	s->on = rows > MIN_JOB_ROWS + 2 && cols >= 20;
	s->rows = rows;
	s->cols = cols;
	if (!s->on)
		return;
	/* What the screen showed goes up into the scrollback, not under the panel. */
	for (int i = 0; i < rows; i++)
		fputc('\n', f);
	fflush(f);
}

void live_screen_resize(FILE *f, struct live_screen *s, int rows, int cols)
{
	if (!s->on)
		return;
	s->rows = rows;
	s->cols = cols;
	s->height = 0;		/* the region is set again at the next draw */
	fprintf(f, ESC "[r" ESC "[2J");
	fflush(f);
}

/* The bytes of line that fit in cols columns (UTF-8: a column per character). */
static size_t fit(const char *line, size_t len, int cols)
{
	size_t i = 0;
	int col = 0;

	while (i < len && col < cols) {
		i++;
		while (i < len && ((unsigned char)line[i] & 0xc0) == 0x80)
			i++;	/* continuation bytes: the same column */
		col++;
	}
	return i;
}

/* The panel's lines, each cleared to its end, and the rule under them. */
static void lines(FILE *out, struct live_screen *s, const char *text, size_t len, int max)
{
	const char *p = text, *end = text + len;
	int n = 0;

	while (p < end && n < max) {
		const char *nl = memchr(p, '\n', end - p);
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		fwrite(p, 1, fit(p, l, s->cols - 1), out);
		fputs(ESC "[K\r\n", out);
		n++;
		p = nl ? nl + 1 : end;
	}
	for (int i = 0; i < s->cols - 1 && i < 78; i++)
		fputs("\u2500", out);
	fputs(ESC "[K", out);
	n++;
	s->height = n;
}

static int count_lines(const char *text, size_t len)
{
	int n = 0;

	for (size_t i = 0; i < len; i++)
		n += text[i] == '\n';
	return n;
}

void live_screen_draw(FILE *f, struct live_screen *s, struct live *lv, const struct session *ses,
		      uint64_t now)
{
	char *panel = NULL, *seq = NULL;
	size_t plen = 0, slen = 0;
	FILE *p, *q;
	int max, want, old;

	if (!s->on || !(p = open_memstream(&panel, &plen)))
		return;
	live_panel(p, lv, ses, now);
	if (fclose(p) || !(q = open_memstream(&seq, &slen)))
		goto cleanup;
	max = s->rows - MIN_JOB_ROWS - 1;
	want = count_lines(panel, plen);
	want = (want < max ? want : max) + 1;
	old = s->height;
	if (want != old) {
		/*
		 * A new height: the job's region below it set again (which homes
		 * the cursor), and the cursor put at its bottom, where output goes.
		 */
		fprintf(q, ESC "[%d;%dr" ESC "[%d;1H", want + 1, s->rows, s->rows);
	}
	fputs(ESC "7" ESC "[H", q);	/* save the job's cursor; home */
	lines(q, s, panel, plen, want - 1);
	fputs(ESC "8", q);
	if (!fclose(q)) {
		fwrite(seq, 1, slen, f);	/* one write: the job's output cannot cut into it */
		fflush(f);
	}
cleanup:
	free(panel);
	free(seq);
}

void live_screen_end(FILE *f, struct live_screen *s)
{
	if (!s->on)
		return;
	/* The whole screen scrolls again; the report starts under the last line. */
	fprintf(f, ESC "[r" ESC "[%d;1H\n", s->rows);
	fflush(f);
	s->on = false;
}
