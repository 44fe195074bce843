// SPDX-License-Identifier: BSD-3-Clause
/*
 * The GPU's own side in the reports (NVML, model/gpu_util.h): a line under
 * the headline, a section per device and process, a line per epoch block
 * and the live table, JSON and CSV. What it is: utilization is the share
 * of time a kernel ran, any kernel (compute and NCCL's alike), not which;
 * trainbpf's communication is the host's view.
 */
#include <string.h>
#include "diagnosis.h"
#include "live.h"
#include "sections.h"

#define NOTE_LEN 256
#define MAX_NOTES 8

static const struct gpu_util *gu_of(const struct session *ses)
{
	return ses->gu.state != GU_NOT_TRIED ? &ses->gu : NULL;
}

static double rel_s(const struct job *job, uint64_t ns)
{
	return ns > job->window_start_ns ? (ns - job->window_start_ns) / 1e9 : 0.0;
}

static void gib(char *buf, size_t len, uint64_t b)
{
	snprintf(buf, len, "%.2f GiB", b / (double)(1ull << 30));
}

/* "1.23 kJ", "512.0 J" */
static void joules(char *buf, size_t len, double j)
{
	if (j >= 1e4)
		snprintf(buf, len, "%.2f kJ", j / 1e3);
	else
		snprintf(buf, len, "%.1f J", j);
}

/*
 * Energy per step: the window's average power times the steps' average
 * length (the window's energy over its steps when they fill it); -1 if
 * unknown.
 */
static double j_per_step(const struct gu_summary *s, const struct ep_steps *st, uint64_t a,
			 uint64_t b)
{
	if (!s->energy_ok || !st || !st->count || b <= a)
		return -1;
	return s->energy_j / ((b - a) / 1e9) * (ep_steps_avg(st) / 1e3);
}

/* The run's steps (the Steps line's). */
static bool run_steps(const struct session *ses, struct ep_steps *st)
{
	const struct job *job = &ses->job;

	epochs_run_steps(&ses->ep, job->window_start_ns, ses->ep.prev.ts, st);
	return st->count > 0;
}

static const char *proc_comm(const struct job *job, pid_t pid)
{
	const struct proc_rec *p = pid ? job_proc_const(job, pid) : NULL;

	return p ? p->comm : "?";
}

static const char *proc_role(const struct job *job, pid_t pid)
{
	const struct proc_rec *p = pid ? job_proc_const(job, pid) : NULL;

	return p ? role_name(p->role) : "-";
}

static bool on_gpu(const struct gu_win *w, pid_t pid)
{
	for (int i = 0; i < w->nproc; i++)
		if (w->procs[i].pid == pid)
			return true;
	return false;
}

/* The one-line notes: no library, lost devices, the job on no GPU. */
static int notes(const struct session *ses, const struct gu_win *w, char out[][NOTE_LEN])
{
	const struct job *job = &ses->job;
	const struct gpu_util *g = &ses->gu;
	struct gu_summary s;
	int n = 0;

	if (g->state == GU_UNAVAILABLE) {
		snprintf(out[n++], NOTE_LEN, "GPU metrics unavailable: %s", g->why);
		return n;
	}
	for (int d = 0; d < g->ndev && n < MAX_NOTES - 3; d++)
		if (g->dev[d].lost)
			snprintf(out[n++], NOTE_LEN, "GPU %d lost at %.2f s: %s; its readings end there",
				 g->dev[d].index, rel_s(job, g->dev[d].lost_ts), g->dev[d].lost_why);
	if (g->devs_over)
		snprintf(out[n++], NOTE_LEN, "%d more GPUs not sampled (trainbpf follows %d)",
			 g->devs_over, GU_MAX_DEVS);
	if (!gu_win_summary(g, w, &s)) {
		snprintf(out[n++], NOTE_LEN, "none of the job's processes was on a GPU "
			 "(NVML lists %d)", g->ndev);
		return n;
	}
	for (int i = 0; i < job->nprocs && n < MAX_NOTES; i++) {
		const struct proc_rec *p = &job->procs[i];

		if (p->role == TB_ROLE_TRAINER && !p->folded && !on_gpu(w, p->pid))
			snprintf(out[n++], NOTE_LEN, "trainer PID %d (%.15s) was on no GPU", p->pid,
				 p->comm);
	}
	return n;
}

/* ---- summaries, for the reports and diff ---- */

bool report_gpu_util_run(const struct session *ses, uint64_t now, struct gu_summary *s,
			 double *jps)
{
	const struct job *job = &ses->job;
	const struct gpu_util *g = gu_of(ses);
	struct ep_steps st;
	struct gu_win w;
	int n;

	*jps = -1;
	memset(s, 0, sizeof(*s));
	if (!g || g->state != GU_ACTIVE)
		return false;
	gu_run_window(g, now, &w);
	n = gu_win_summary(g, &w, s);
	gu_win_free(&w);
	if (n && run_steps(ses, &st))
		*jps = j_per_step(s, &st, job->window_start_ns, now);
	return n > 0;
}

bool report_gpu_util_epoch(const struct session *ses, const struct epoch *e, struct gu_summary *s,
			   double *jps)
{
	const struct gpu_util *g = gu_of(ses);

	*jps = -1;
	memset(s, 0, sizeof(*s));
	if (!g || g->state != GU_ACTIVE || !e->gpu || !gu_win_summary(g, e->gpu, s))
		return false;
	*jps = j_per_step(s, &e->steps, e->start, e->end);
	return true;
}

/* ---- text ---- */

/* Under the headline: what the GPUs did, or why nothing is known. */
void report_gpu_util_headline(FILE *f, const struct session *ses, uint64_t now)
{
	const struct gpu_util *g = gu_of(ses);
	struct gu_summary s;
	struct gu_win w;
	char e[32], m[32];

	if (!g)
		return;
	if (g->state == GU_UNAVAILABLE) {
		fprintf(f, "  gpu: GPU metrics unavailable: %s\n", g->why);
		return;
	}
	gu_run_window(g, now, &w);
	if (!gu_win_summary(g, &w, &s)) {
		fprintf(f, "  gpu: none of the job's processes was on a GPU (NVML lists %d)\n",
			g->ndev);
		gu_win_free(&w);
		return;
	}
	joules(e, sizeof(e), s.energy_j);
	gib(m, sizeof(m), s.mem_peak);
	fprintf(f, "  gpu: util %.1f%% avg, %.1f%% min over %d GPU%s; %s; memory peak %s "
		"(%.0f%%, GPU %d)\n", s.util_avg, s.util_min, s.ndev, s.ndev == 1 ? "" : "s",
		s.energy_ok ? e : "energy n/a", m, 100 * s.mem_frac,
		s.mem_dev >= 0 ? g->dev[s.mem_dev].index : -1);
	fprintf(f, "  (NVML util: a kernel ran, not which one, compute or NCCL; comm above: "
		"host view)\n");
	gu_win_free(&w);
}

static void dev_row(FILE *f, const struct gpu_util *g, const struct gu_win_dev *wd)
{
	const struct gu_dev *d = &g->dev[wd->dev];
	const struct gu_agg *a = &wd->a;
	char peak[32], total[32], e[32], name[ESC_LEN(GU_NAME_LEN)], thr[40] = "-";
	double u = gu_agg_util(a), p = gu_agg_power_w(a);

	gib(peak, sizeof(peak), a->mem_peak);
	gib(total, sizeof(total), d->mem_total);
	joules(e, sizeof(e), a->energy_mj / 1e3);
	if (a->span_ns && (a->thr_power_ns || a->thr_thermal_ns))
		snprintf(thr, sizeof(thr), "power %.0f%% thermal %.0f%%",
			 100.0 * a->thr_power_ns / a->span_ns, 100.0 * a->thr_thermal_ns / a->span_ns);
	report_esc(name, sizeof(name), d->name);
	fprintf(f, "  %3d %-22.22s %6.1f%% %10s %10s %7.1f W %9s  %s%s\n", d->index, name,
		u >= 0 ? u : 0.0, peak, total, p >= 0 ? p : 0.0, a->energy_ns ? e : "n/a", thr,
		a->job_ns ? "" : " (not the job's)");
}

static void proc_rows(FILE *f, const struct session *ses, const struct gu_win *w)
{
	const struct job *job = &ses->job;

	if (!w->nproc)
		return;
	fprintf(f, "  %7s %-7s %-15s %4s %10s %6s\n", "PID", "ROLE", "COMM", "GPU", "MEM PEAK",
		"UTIL");
	for (int i = 0; i < w->nproc; i++) {
		const struct gu_win_proc *p = &w->procs[i];
		char pid[16], comm[ESC_LEN(TB_COMM_LEN)], peak[32], util[16] = "-";
		double u = gu_agg_util(&p->a);

		snprintf(pid, sizeof(pid), p->pid ? "%d" : "-", p->pid);
		if (p->pid)
			report_esc(comm, sizeof(comm), proc_comm(job, p->pid));
		else
			snprintf(comm, sizeof(comm), "%d exited", p->folded);
		gib(peak, sizeof(peak), p->a.mem_peak);
		if (u >= 0)
			snprintf(util, sizeof(util), "%.0f%%", u);
		fprintf(f, "  %7s %-7s %-15.15s %4d %10s %6s\n", pid, proc_role(job, p->pid), comm,
			ses->gu.dev[p->dev].index, peak, util);
	}
}

void report_gpu_util_text(FILE *f, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	const struct gpu_util *g = gu_of(ses);
	char note[MAX_NOTES][NOTE_LEN], e[32];
	struct gu_summary s;
	struct ep_steps st;
	struct gu_win w;
	double jps;
	int n;

	if (!g || g->state != GU_ACTIVE)
		return;		/* the headline's line said why */
	gu_run_window(g, now, &w);
	fprintf(f, "GPU (NVML, read every %.1f s by trainbpf; the job pays nothing)\n",
		g->period_ns / 1e9);
	if (gu_win_summary(g, &w, &s)) {
		jps = run_steps(ses, &st) ? j_per_step(&s, &st, job->window_start_ns, now) : -1;
		joules(e, sizeof(e), s.energy_j);
		fprintf(f, "  %d GPU%s with the job: util %.1f%% avg, %.1f%% min (GPU %d); %s, "
			"%.1f W", s.ndev, s.ndev == 1 ? "" : "s", s.util_avg, s.util_min,
			s.util_min_dev >= 0 ? g->dev[s.util_min_dev].index : -1,
			s.energy_ok ? e : "energy n/a", s.power_w);
		if (jps >= 0)
			fprintf(f, ", %.1f J/step", jps);
		fputc('\n', f);
	}
	fprintf(f, "  %3s %-22s %7s %10s %10s %9s %9s  %s\n", "GPU", "NAME", "UTIL", "MEM PEAK",
		"OF", "POWER", "ENERGY", "THROTTLED");
	for (int i = 0; i < w.ndev; i++)
		dev_row(f, g, &w.devs[i]);
	proc_rows(f, ses, &w);
	n = notes(ses, &w, note);
	for (int i = 0; i < n; i++)
		fprintf(f, "  %s\n", note[i]);
	fputc('\n', f);
	gu_win_free(&w);
}

void report_gpu_util_epoch_line(FILE *f, const struct session *ses, const struct epoch *e)
{
	const struct gpu_util *g = gu_of(ses);
	struct gu_summary s;
	char en[32], m[32];
	double jps;

	if (!g || g->state != GU_ACTIVE || !e->gpu || !gu_win_summary(g, e->gpu, &s))
		return;
	joules(en, sizeof(en), s.energy_j);
	gib(m, sizeof(m), s.mem_peak);
	fprintf(f, "  gpu: util %.1f%% avg, %.1f%% min; %s", s.util_avg, s.util_min,
		s.energy_ok ? en : "energy n/a");
	jps = j_per_step(&s, &e->steps, e->start, e->end);
	if (jps >= 0)
		fprintf(f, " (%.1f J/step)", jps);
	fprintf(f, "; peak %s (%.0f%%, GPU %d)", m, 100 * s.mem_frac,
		s.mem_dev >= 0 ? g->dev[s.mem_dev].index : -1);
	if (s.thr_power + s.thr_thermal >= 0.01)
		fprintf(f, "; throttled %.0f%%", 100 * (s.thr_power + s.thr_thermal));
	fputc('\n', f);
}

/* ---- the live table and --step-blocks: since the last one ---- */

/* What the job's devices did since prev (then prev := now). */
struct since {
	int n;				/* devices with the job on them meanwhile */
	double usum, umin, energy_j;
	bool energy_ok;
	uint64_t mem, total;		/* the fullest one's last reading, and its size */
	int mdev;
};

static void since(const struct gpu_util *g, struct live_gu *prev, uint64_t now,
		  struct since *d)
{
	struct gu_win w;

	*d = (struct since){ .umin = 101, .mdev = -1, .energy_ok = true };
	gu_run_window(g, now, &w);
	for (int i = 0; i < w.ndev; i++) {
		const struct gu_win_dev *wd = &w.devs[i];
		struct gu_agg *p = &prev->prev[wd->dev];
		const struct gu_sample *last = gu_series_last(&g->dev[wd->dev].s);
		uint64_t un = wd->a.util_ns - p->util_ns;

		if (wd->a.job_ns > p->job_ns && un) {
			double u = (wd->a.util_pct_ns - p->util_pct_ns) / un;

			d->usum += u;
			d->umin = u < d->umin ? u : d->umin;
			d->energy_j += (wd->a.energy_mj - p->energy_mj) / 1e3;
			d->energy_ok &= wd->a.energy_ns > p->energy_ns;
			if (last && last->mem >= d->mem) {
				d->mem = last->mem;
				d->total = g->dev[wd->dev].mem_total;
				d->mdev = g->dev[wd->dev].index;
			}
			d->n++;
		}
		*p = wd->a;
	}
	gu_win_free(&w);
}

void report_gpu_util_live(FILE *f, struct live_gu *lv, const struct session *ses, uint64_t now)
{
	const struct gpu_util *g = gu_of(ses);
	struct since d;

	if (!g || g->state != GU_ACTIVE)
		return;
	since(g, lv, now, &d);
	if (!d.n) {
		fprintf(f, "gpu: none of the job's processes on a GPU (NVML lists %d)\n", g->ndev);
		return;
	}
	fprintf(f, "gpu: util %.0f%% (min %.0f%%) on %d GPU%s, %.0f J; mem %.1f/%.1f GiB (GPU %d)\n",
		d.usum / d.n, d.umin, d.n, d.n == 1 ? "" : "s", d.energy_j,
		d.mem / (double)(1ull << 30), d.total / (double)(1ull << 30), d.mdev);
}

void report_gpu_util_block_start(struct live_gu *b, const struct session *ses, uint64_t ts)
{
	const struct gpu_util *g = gu_of(ses);
	struct since d;

	if (g && g->state == GU_ACTIVE)
		since(g, b, ts, &d);
}

void report_gpu_util_block_line(FILE *f, struct live_gu *b, const struct session *ses,
				uint64_t now, int steps)
{
	const struct gpu_util *g = gu_of(ses);
	struct since d;

	if (!g || g->state != GU_ACTIVE)
		return;
	since(g, b, now, &d);
	if (!d.n)
		return;
	fprintf(f, "  gpu: util %.1f%% avg, %.1f%% min", d.usum / d.n, d.umin);
	if (d.energy_ok)
		fprintf(f, "; %.1f J (%.1f J/step)", d.energy_j, steps ? d.energy_j / steps : 0.0);
	fputc('\n', f);
}

/* ---- JSON ---- */

static void json_or_null(struct jw *w, const char *name, double v, int decimals)
{
	if (v < 0)
		jw_null_field(w, name);
	else
		jw_float_field(w, name, v, decimals);
}

static void json_agg(struct jw *w, const struct gu_agg *a)
{
	json_or_null(w, "utilization_pct", gu_agg_util(a), 3);
	jw_uint_field(w, "memory_peak_bytes", a->mem_peak);
	json_or_null(w, "energy_j", a->energy_ns ? a->energy_mj / 1e3 : -1, 3);
	json_or_null(w, "power_avg_w", gu_agg_power_w(a), 3);
	json_or_null(w, "sm_clock_avg_mhz", gu_agg_clock(a), 1);
	jw_float_field(w, "throttle_power_share", a->span_ns ?
		       (double)a->thr_power_ns / a->span_ns : 0.0, 4);
	jw_float_field(w, "throttle_thermal_share", a->span_ns ?
		       (double)a->thr_thermal_ns / a->span_ns : 0.0, 4);
	jw_float_field(w, "covered_s", a->span_ns / 1e9, 6);
	jw_float_field(w, "with_job_s", a->job_ns / 1e9, 6);
	jw_uint_field(w, "samples", a->samples);
}

static void json_win_devs(struct jw *w, const struct gpu_util *g, const struct gu_win *win)
{
	jw_name(w, "devices");
	jw_array(w);
	for (int i = 0; i < win->ndev; i++) {
		jw_object(w);
		jw_int_field(w, "gpu", g->dev[win->devs[i].dev].index);
		json_agg(w, &win->devs[i].a);
		jw_end_object(w);
	}
	jw_end_array(w);
}

static void json_win_procs(struct jw *w, const struct gpu_util *g, const struct gu_win *win)
{
	jw_name(w, "processes");
	jw_array(w);
	for (int i = 0; i < win->nproc; i++) {
		const struct gu_win_proc *p = &win->procs[i];

		jw_object(w);
		jw_int_field(w, "pid", p->pid);
		jw_int_field(w, "gpu", g->dev[p->dev].index);
		if (p->folded)
			jw_int_field(w, "folded", p->folded);
		json_or_null(w, "utilization_pct", gu_agg_util(&p->a), 3);
		jw_uint_field(w, "memory_peak_bytes", p->a.mem_peak);
		jw_end_object(w);
	}
	jw_end_array(w);
}

/* Over the job's GPUs: utilization, energy, energy per step, memory. */
static void json_summary(struct jw *w, const struct gu_summary *s, double jps)
{
	jw_int_field(w, "gpus", s->ndev);
	json_or_null(w, "utilization_avg_pct", s->util_devs ? s->util_avg : -1, 3);
	json_or_null(w, "utilization_min_pct", s->util_devs ? s->util_min : -1, 3);
	json_or_null(w, "energy_j", s->energy_ok ? s->energy_j : -1, 3);
	json_or_null(w, "energy_per_step_j", jps, 4);
	json_or_null(w, "power_avg_w", s->ndev ? s->power_w : -1, 3);
	jw_uint_field(w, "memory_peak_bytes", s->mem_peak);
	jw_float_field(w, "memory_peak_fraction", s->mem_frac, 4);
	jw_float_field(w, "throttle_power_share", s->thr_power, 4);
	jw_float_field(w, "throttle_thermal_share", s->thr_thermal, 4);
}

static void json_devices(struct jw *w, const struct job *job, const struct gpu_util *g)
{
	jw_name(w, "gpus");
	jw_array(w);
	for (int d = 0; d < g->ndev; d++) {
		const struct gu_dev *v = &g->dev[d];

		jw_object(w);
		jw_int_field(w, "gpu", v->index);
		jw_string_field(w, "uuid", v->uuid);
		jw_string_field(w, "name", v->name);
		jw_uint_field(w, "memory_total_bytes", v->mem_total);
		jw_bool_field(w, "energy_counter", v->has & GU_HAS_ENERGY);
		jw_bool_field(w, "process_utilization", v->proc_util);
		if (v->lost) {
			jw_float_field(w, "lost_s", rel_s(job, v->lost_ts), 6);
			jw_string_field(w, "lost_why", v->lost_why);
		} else {
			jw_null_field(w, "lost_s");
		}
		jw_end_object(w);
	}
	jw_end_array(w);
}

void report_gpu_util_json(struct jw *w, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	const struct gpu_util *g = gu_of(ses);
	char note[MAX_NOTES][NOTE_LEN];
	struct gu_summary s;
	struct ep_steps st;
	struct gu_win win;
	int n;

	if (!g)
		return;
	jw_name(w, "gpu_metrics");
	jw_object(w);
	jw_string_field(w, "source", "nvml");
	jw_string_field(w, "status", g->state == GU_ACTIVE ? "ok" : "unavailable");
	if (g->state != GU_ACTIVE) {
		jw_string_field(w, "why", g->why);
		jw_end_object(w);
		return;
	}
	jw_string_field(w, "driver", g->driver);
	jw_float_field(w, "sample_period_s", g->period_ns / 1e9, 3);
	json_devices(w, job, g);
	gu_run_window(g, now, &win);
	gu_win_summary(g, &win, &s);
	jw_name(w, "job");
	jw_object(w);
	json_summary(w, &s, run_steps(ses, &st) ?
		     j_per_step(&s, &st, job->window_start_ns, now) : -1);
	jw_end_object(w);
	json_win_devs(w, g, &win);
	json_win_procs(w, g, &win);
	n = notes(ses, &win, note);
	jw_name(w, "notes");
	jw_array(w);
	for (int i = 0; i < n; i++)
		jw_string(w, note[i]);
	jw_end_array(w);
	jw_end_object(w);
	gu_win_free(&win);
}

void report_gpu_util_epoch_json(struct jw *w, const struct session *ses, const struct epoch *e)
{
	const struct gpu_util *g = gu_of(ses);
	struct gu_summary s;

	if (!g)
		return;
	if (g->state != GU_ACTIVE || !e->gpu) {
		jw_null_field(w, "gpu");
		return;
	}
	gu_win_summary(g, e->gpu, &s);
	jw_name(w, "gpu");
	jw_object(w);
	json_summary(w, &s, j_per_step(&s, &e->steps, e->start, e->end));
	json_win_devs(w, g, e->gpu);
	json_win_procs(w, g, e->gpu);
	jw_end_object(w);
}

/* ---- CSV: rows of their own kinds, in columns only runs with GPUs have ---- */

bool report_gpu_util_csv_on(const struct session *ses)
{
	const struct gpu_util *g = gu_of(ses);

	return g && g->state == GU_ACTIVE;
}

static void csv_gpu_cols(FILE *f, int gpu, const struct gu_agg *a)
{
	double u = gu_agg_util(a), p = gu_agg_power_w(a);

	fprintf(f, ",%d,", gpu);
	if (u >= 0)
		fprintf(f, "%.3f", u);
	fprintf(f, ",%llu,", (unsigned long long)a->mem_peak);
	if (a->energy_ns)
		fprintf(f, "%.3f", a->energy_mj / 1e3);
	fputc(',', f);
	if (p >= 0)
		fprintf(f, "%.3f", p);
	fputc('\n', f);
}

/* "gpu" rows (pid empty, comm the device's name) and "gpu_process" rows. */
void report_gpu_util_csv_rows(FILE *f, const struct session *ses, uint64_t now,
			      void (*str)(FILE *, const char *))
{
	const struct job *job = &ses->job;
	const struct gpu_util *g = gu_of(ses);
	struct gu_win w;

	if (!report_gpu_util_csv_on(ses))
		return;
	gu_run_window(g, now, &w);
	for (int i = 0; i < w.ndev; i++) {
		fprintf(f, "gpu,,,");
		str(f, g->dev[w.devs[i].dev].name);
		fprintf(f, ",,%.9f", w.devs[i].a.span_ns / 1e9);
		for (int c = 0; c < TB_NCAT + 1; c++)
			fputc(',', f);
		csv_gpu_cols(f, g->dev[w.devs[i].dev].index, &w.devs[i].a);
	}
	for (int i = 0; i < w.nproc; i++) {
		const struct gu_win_proc *p = &w.procs[i];
		char name[32];

		if (p->pid)
			snprintf(name, sizeof(name), "%s", proc_comm(job, p->pid));
		else
			snprintf(name, sizeof(name), "%d exited", p->folded);
		fprintf(f, "gpu_process,%d,,", p->pid);
		str(f, name);
		fprintf(f, ",%s,%.9f", proc_role(job, p->pid), p->a.span_ns / 1e9);
		for (int c = 0; c < TB_NCAT + 1; c++)
			fputc(',', f);
		csv_gpu_cols(f, g->dev[p->dev].index, &p->a);
	}
	gu_win_free(&w);
}
