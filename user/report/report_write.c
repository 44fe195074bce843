// SPDX-License-Identifier: BSD-3-Clause
/* Choosing the writer of a report: one table of names, one dispatch. */
#include <string.h>
#include <strings.h>
#include "report.h"
#include "report_write.h"

static const char *const names[TB_NFMT] = {
	[TB_FMT_TEXT] = "text", [TB_FMT_JSON] = "json", [TB_FMT_CSV] = "csv",
	[TB_FMT_HTML] = "html", [TB_FMT_DETAIL] = NULL,
};

bool report_format_parse(const char *name, enum tb_format *f)
{
	for (int i = 0; i < TB_NFMT; i++)
		if (names[i] && !strcmp(name, names[i])) {
			*f = i;
			return true;
		}
	return false;
}

/*
 * Only ".html" picks a format by itself: a ".json" or ".txt" file has
 * always held what --format said (text by default), and scripts rely on it.
 */
static enum tb_format named_for(const char *path, enum tb_format asked, bool set)
{
	size_t n = path ? strlen(path) : 0;

	if (set || n < 5)
		return asked;
	return strcasecmp(path + n - 5, ".html") ? asked : TB_FMT_HTML;
}

enum tb_format report_format_for(const char *path, enum tb_format asked, bool set,
				 bool detail)
{
	enum tb_format f = named_for(path, asked, set);

	return f == TB_FMT_TEXT && detail ? TB_FMT_DETAIL : f;
}

void report_write(FILE *f, enum tb_format fmt, const struct session *ses,
		  const struct run_counters *c, uint64_t now)
{
	switch (fmt) {
	case TB_FMT_JSON:
		report_json(f, ses, c, now);
		break;
	case TB_FMT_CSV:
		report_csv(f, ses);
		break;
	case TB_FMT_HTML:
		report_html(f, ses, c, now);
		break;
	case TB_FMT_DETAIL:
		report_text(f, ses, c, now);
		break;
	default:
		report_summary(f, ses, c, now);
	}
}

void diff_write(FILE *f, enum tb_format fmt, const struct recording *a,
		const struct recording *b)
{
	if (fmt == TB_FMT_HTML)
		diff_html(f, a, b);
	else
		diff_text(f, a, b);
}

void dump_write(FILE *f, enum tb_format fmt, const struct snapshot *s)
{
	if (fmt == TB_FMT_JSON)
		dump_json(f, s);
	else
		dump_text(f, s);
}
