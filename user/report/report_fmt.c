// SPDX-License-Identifier: BSD-3-Clause
/* Pieces the outputs share: roll-up rows, table cells, sizes, steps, times. */
#include <stdio.h>
#include <string.h>
#include "epochs.h"
#include "gpu.h"
#include "sections.h"

void report_rollup_rows(FILE *f, const double pct[TB_NCAT], bool lone)
{
	for (int r = 0; r < TB_NROLLUP; r++) {
		const int *g = tb_rollup_cats[r];
		double sum = 0;

		for (int k = 0; g[k] >= 0; k++)
			sum += pct[g[k]];
		fprintf(f, "  %-14s %5.1f%%", tb_rollup_labels[r], sum);
		for (int k = 0; g[k] >= 0 && (lone || g[1] >= 0); k++)
			fprintf(f, "%s%s %.1f%%", k ? " " : "   ", tb_cat_names[g[k]], pct[g[k]]);
		fputc('\n', f);
	}
}

/* The escape of one byte (and its follower, for UTF-8's C1); "" if none. */
static int esc_one(char *out, const unsigned char *p)
{
	static const char named[] = { ['\n'] = 'n', ['\t'] = 't', ['\r'] = 'r', ['\\'] = '\\' };

	if (*p < sizeof(named) && named[*p])
		return sprintf(out, "\\%c", named[*p]);
	if (*p < 0x20 || *p == 0x7f)
		return sprintf(out, "\\%03o", *p);
	if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return sprintf(out, "\\%03o\\%03o", p[0], p[1]);
	out[0] = '\0';
	return 0;
}

const char *report_esc(char *buf, size_t len, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0;

	for (; *p; p++) {
		char e[16];
		int k = esc_one(e, p);

		if (n + (k ? k : 1) >= len)
			break;
		if (!k) {
			buf[n++] = *p;
			continue;
		}
		memcpy(buf + n, e, k);
		n += k;
		p += k > 4;	/* the C1 pair took two bytes */
	}
	buf[n] = '\0';
	return buf;
}

void report_pct_cells(FILE *f, const uint64_t c[TB_NCAT])
{
	uint64_t total = sum_cats(c);

	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, " %4.*f", total ? 1 : 0,
			total ? 100.0 * c[i] / total : 0.0);
	fputc('\n', f);
}

void report_proc_name(char *buf, size_t len, const struct proc_rec *p)
{
	if (p->folded)
		snprintf(buf, len, "%d exited", p->folded);
	else
		snprintf(buf, len, "%s", p->comm);
}

void report_proc_head(FILE *f, const struct proc_rec *p, int nthreads)
{
	char name[ESC_LEN(TB_COMM_LEN)];

	if (p->folded)
		report_proc_name(name, sizeof(name), p);
	else
		report_esc(name, sizeof(name), p->comm);
	if (p->folded)
		fprintf(f, "%7s %-7s %-15.15s %4d", "-", role_name(p->role), name, nthreads);
	else
		fprintf(f, "%7d %-7s %-15.15s %4d", p->pid, role_name(p->role), name, nthreads);
}

void report_cat_head(FILE *f)
{
	for (int i = 0; i < TB_NCAT; i++)
		fprintf(f, " %4s", tb_cat_short[i]);
	fputc('\n', f);
}

void fmt_bytes(char *buf, size_t len, uint64_t b)
{
	if (b >= 1ull << 30)
		snprintf(buf, len, "%.2f GiB", b / (double)(1ull << 30));
	else if (b >= 1ull << 20)
		snprintf(buf, len, "%.1f MiB", b / (double)(1ull << 20));
	else
		snprintf(buf, len, "%llu B", (unsigned long long)b);
}

/* ", 12 steps (calls), 81.0 ms/step (min ..., std ...), 3.0 syncs/step" */
void report_text_steps(FILE *f, const struct session *ses, const struct ep_steps *s)
{
	fprintf(f, "%d steps (%s), %.1f ms/step (min %.1f, max %.1f, std %.1f)",
		s->count, epochs_step_source_name(s->source), ep_steps_avg(s), s->min_ms,
		s->max_ms, ep_steps_std(s));
	/* Syncs are only seen where a CUDA library is probed. */
	if (gpu_any_library(&ses->gpu))
		fprintf(f, ", %.1f syncs/step", ep_steps_syncs(s));
}

void report_json_times(struct jw *w, const char *name, const int64_t ns[TB_NCAT])
{
	jw_name(w, name);
	jw_object(w);
	for (int i = 0; i < TB_NCAT; i++)
		jw_float_field(w, tb_cat_names[i], ns[i] / 1e9, 9);
	jw_end_object(w);
}

int report_top_cats(const uint64_t row[TB_NCAT], int k, bool pct1, int out[])
{
	uint64_t total = sum_cats(row);
	bool used[TB_NCAT] = { false };
	int n = 0;

	while (n < k && total) {
		int best = -1;

		for (int c = 0; c < TB_NCAT; c++)
			if (!used[c] && row[c] && (!pct1 || 100 * row[c] >= total) &&
			    (best < 0 || row[c] > row[best]))
				best = c;
		if (best < 0)
			break;
		used[best] = true;
		out[n++] = best;
	}
	return n;
}

void report_made_of(char *buf, size_t len, const uint64_t row[TB_NCAT], int k)
{
	uint64_t total = sum_cats(row);
	int top[TB_NCAT], n = report_top_cats(row, k < TB_NCAT ? k : TB_NCAT, true, top);
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && at < len; i++)
		at += snprintf(buf + at, len - at, "%s%s %.0f%%", i ? ", " : "",
			       tb_cat_names[top[i]], 100.0 * row[top[i]] / total);
}
