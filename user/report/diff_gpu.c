// SPDX-License-Identifier: BSD-3-Clause
/*
 * diff's GPU block: two runs' GPU utilization and energy per step (NVML,
 * schema 4), for the run and each epoch both have. Nothing when neither
 * run read its GPUs.
 */
#include <string.h>
#include "report.h"
#include "sections.h"

static bool has_gpu(const struct recording *r)
{
	return r->ses.gu.state == GU_ACTIVE;
}

static double rel_pct(double a, double b)
{
	return a > 0 ? 100.0 * (b / a - 1) : 0.0;
}

/* "  NAME  A  B  change": a number, "-" where a run has none. */
static void row(FILE *f, const char *name, double a, double b, const char *unit, bool points)
{
	char sa[24] = "-", sb[24] = "-";

	if (a >= 0)
		snprintf(sa, sizeof(sa), "%.1f%s", a, unit);
	if (b >= 0)
		snprintf(sb, sizeof(sb), "%.1f%s", b, unit);
	fprintf(f, "  %-18s %10s %10s", name, sa, sb);
	if (a >= 0 && b >= 0) {
		if (points)
			fprintf(f, " %+8.1f pt", b - a);
		else if (a > 0)
			fprintf(f, " %+8.1f%%", rel_pct(a, b));
	}
	fputc('\n', f);
}

static void run_rows(FILE *f, const struct recording *a, const struct recording *b)
{
	struct gu_summary sa, sb;
	double ja, jb;
	bool ha = report_gpu_util_run(&a->ses, a->end_ns, &sa, &ja);
	bool hb = report_gpu_util_run(&b->ses, b->end_ns, &sb, &jb);

	row(f, "utilization avg", ha ? sa.util_avg : -1, hb ? sb.util_avg : -1, "%", true);
	row(f, "utilization min", ha ? sa.util_min : -1, hb ? sb.util_min : -1, "%", true);
	row(f, "energy per step", ja, jb, " J", false);
	row(f, "energy", ha && sa.energy_ok ? sa.energy_j : -1,
	    hb && sb.energy_ok ? sb.energy_j : -1, " J", false);
	row(f, "power (all GPUs)", ha ? sa.power_w : -1, hb ? sb.power_w : -1, " W", false);
	row(f, "memory peak", ha ? 100 * sa.mem_frac : -1, hb ? 100 * sb.mem_frac : -1, "%",
	    true);
}

static const struct ep_stream *stream(const struct recording *r)
{
	enum ep_source s = epochs_source(&r->ses.ep);

	return s == EP_NSRC ? NULL : &r->ses.ep.src[s];
}

static void epoch_rows(FILE *f, const struct recording *a, const struct recording *b)
{
	const struct ep_stream *sa = stream(a), *sb = stream(b);
	bool head = false;

	for (int i = 0; sa && sb && i < sa->n; i++) {
		const struct epoch *ea = &sa->list[i], *eb = NULL;
		struct gu_summary ga, gb;
		double ja, jb;

		for (int k = 0; k < sb->n && !eb; k++)
			if (sb->list[k].label == ea->label)
				eb = &sb->list[k];
		if (!eb || !report_gpu_util_epoch(&a->ses, ea, &ga, &ja) ||
		    !report_gpu_util_epoch(&b->ses, eb, &gb, &jb))
			continue;
		if (!head)
			fprintf(f, "  %5s %7s %7s %8s %10s %10s %8s\n", "EPOCH", "A_UTIL", "B_UTIL",
				"B-A (pt)", "A_J/STEP", "B_J/STEP", "J/STEP");
		head = true;
		fprintf(f, "  %5ld %6.1f%% %6.1f%% %+8.1f %10.1f %10.1f", ea->label, ga.util_avg,
			gb.util_avg, gb.util_avg - ga.util_avg, ja, jb);
		if (ja > 0 && jb >= 0)
			fprintf(f, " %+7.1f%%", rel_pct(ja, jb));
		fputc('\n', f);
	}
}

void diff_gpu(FILE *f, const struct recording *a, const struct recording *b)
{
	if (!has_gpu(a) && !has_gpu(b))
		return;
	fprintf(f, "GPU (NVML: the job's GPUs)\n");
	fprintf(f, "  %-18s %10s %10s %10s\n", "", "A", "B", "B-A");
	run_rows(f, a, b);
	epoch_rows(f, a, b);
	if (!has_gpu(a) || !has_gpu(b))
		fprintf(f, "  (%s has no GPU readings: %s)\n", has_gpu(a) ? "B" : "A",
			(has_gpu(a) ? b : a)->ses.gu.state == GU_UNAVAILABLE ?
			(has_gpu(a) ? b : a)->ses.gu.why : "recorded before trainbpf read GPUs");
	fputc('\n', f);
}
