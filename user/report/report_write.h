/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one place an output format is chosen: its name, the format a file's
 * name asks for, and the writer of a job's report in it. The command line
 * (app/) only says what the user typed; the writers live beside this.
 */
#ifndef TB_REPORT_WRITE_H
#define TB_REPORT_WRITE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "job.h"
#include "session.h"

/* TB_FMT_DETAIL: text with every section (--detail); TB_FMT_TEXT, one screen. */
enum tb_format { TB_FMT_TEXT, TB_FMT_JSON, TB_FMT_CSV, TB_FMT_HTML, TB_FMT_DETAIL, TB_NFMT };

/* "text", "json", "csv" or "html"; false if name is none of them (detail is --detail's). */
bool report_format_parse(const char *name, enum tb_format *f);
/*
 * The format of a report written to path: the one asked for with
 * --format (set), else ".html" at the end of the name asks for HTML,
 * else asked (the default, text); text with every section if detail.
 */
enum tb_format report_format_for(const char *path, enum tb_format asked, bool set,
				 bool detail);
/* A job's final report in fmt: the live tool's and `trainbpf report`'s. */
void report_write(FILE *f, enum tb_format fmt, const struct session *ses,
		  const struct run_counters *c, uint64_t now);
/* Two recordings compared (`trainbpf diff`): text, or an HTML page (TB_FMT_HTML). */
struct recording;
void diff_write(FILE *f, enum tb_format fmt, const struct recording *a,
		const struct recording *b);
/* A snapshot of a job's threads (`trainbpf dump`): text, or JSON (TB_FMT_JSON). */
struct snapshot;
void dump_write(FILE *f, enum tb_format fmt, const struct snapshot *s);
/*
 * One self-contained HTML page (report_html.c): the verdict, the findings,
 * charts as inline SVG, the tables. Nothing fetched, no script.
 */
void report_html(FILE *f, const struct session *ses, const struct run_counters *c, uint64_t now);

#endif
