// SPDX-License-Identifier: BSD-3-Clause
/*
 * Schema 4: the GPU's own side (NVML, model/gpu_util.h) in the recording.
 * Its tables, statements and writes are all here (docs/recording.md,
 * "Schema 4"): whether NVML worked and why not (meta), the devices, the
 * windows the reports print (each closed epoch's, with its epochs row;
 * the whole run's at the end), and the readings for the trace, bounded.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include "record.h"
#include "session.h"

/* docs/recording.md, verbatim: readers depend on it. */
static const char schema[] =
"CREATE TABLE gpu_devices (dev INTEGER PRIMARY KEY,"
"  idx INTEGER, uuid TEXT, name TEXT, mem_total INTEGER, has INTEGER,"
"  proc_util INTEGER, lost_ns INTEGER, lost_why TEXT);"
"CREATE TABLE gpu_windows (source TEXT, seq INTEGER,"
"  dev INTEGER NOT NULL, pid INTEGER, folded INTEGER,"
"  samples INTEGER, span_ns INTEGER, util_ns INTEGER, util_pct_ns REAL,"
"  energy_ns INTEGER, energy_mj REAL, power_ns INTEGER, power_mw_ns REAL,"
"  clock_ns INTEGER, clock_mhz_ns REAL, thr_power_ns INTEGER, thr_thermal_ns INTEGER,"
"  mem_peak INTEGER, job_ns INTEGER);"
"CREATE TABLE gpu_samples (ts_ns INTEGER NOT NULL, dev INTEGER NOT NULL, pid INTEGER,"
"  util INTEGER, mem INTEGER, power_mw INTEGER, energy_mj INTEGER, clock_mhz INTEGER,"
"  throttle INTEGER, has INTEGER);";

static const char *const sql[RG_N] = {
	[RG_DEV] = "INSERT OR REPLACE INTO gpu_devices VALUES (?,?,?,?,?,?,?,?,?)",
	[RG_WIN] = "INSERT INTO gpu_windows VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[RG_SAMPLE] = "INSERT INTO gpu_samples VALUES (?,?,?,?,?,?,?,?,?,?)",
};

static sqlite3_stmt *stmt(struct recorder *r, enum rec_gpu_stmt s)
{
	if (!r->gpu.st[s] && sqlite3_prepare_v3(r->db, sql[s], -1, SQLITE_PREPARE_PERSISTENT,
						&r->gpu.st[s], NULL) != SQLITE_OK)
		rec_fail(r, "prepare statements in");
	return r->gpu.st[s];
}

static int step(struct recorder *r, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		rec_fail(r, "write");
		return -1;
	}
	return 0;
}

int record_gpu_schema(struct recorder *r)
{
	return rec_exec(r, schema, "create");
}

void record_gpu_close(struct recorder *r)
{
	for (int i = 0; i < RG_N; i++) {
		sqlite3_finalize(r->gpu.st[i]);
		r->gpu.st[i] = NULL;
	}
}

static int write_meta(struct recorder *r, const struct gpu_util *g)
{
	char buf[32];

	rec_meta(r, "gpu_metrics", g->state == GU_ACTIVE ? "ok" : "unavailable");
	if (g->state != GU_ACTIVE)
		return rec_meta(r, "gpu_metrics_why", g->why);
	rec_meta(r, "gpu_driver", g->driver);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)g->period_ns);
	rec_meta(r, "gpu_period_ns", buf);
	snprintf(buf, sizeof(buf), "%d", g->devs_over);
	return rec_meta(r, "gpu_devices_over", buf);
}

/* Every flush: a device lost since the last one says so. */
static void write_devices(struct recorder *r, const struct gpu_util *g)
{
	sqlite3_stmt *st = stmt(r, RG_DEV);

	for (int d = 0; st && d < g->ndev && !r->failed; d++) {
		const struct gu_dev *v = &g->dev[d];

		sqlite3_bind_int(st, 1, d);
		sqlite3_bind_int(st, 2, v->index);
		sqlite3_bind_text(st, 3, v->uuid, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, v->name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 5, (int64_t)v->mem_total);
		sqlite3_bind_int(st, 6, (int)v->has);
		sqlite3_bind_int(st, 7, v->proc_util);
		if (v->lost) {
			sqlite3_bind_int64(st, 8, (int64_t)v->lost_ts);
			sqlite3_bind_text(st, 9, v->lost_why, -1, SQLITE_TRANSIENT);
		}
		step(r, st);
	}
}

static void write_sample(struct recorder *r, int dev, pid_t pid, const struct gu_sample *x)
{
	sqlite3_stmt *st = stmt(r, RG_SAMPLE);

	if (!st)
		return;
	if (r->gpu.rows >= REC_GPU_MAX_ROWS) {
		r->gpu.dropped++;
		return;
	}
	sqlite3_bind_int64(st, 1, (int64_t)x->ts);
	sqlite3_bind_int(st, 2, dev);
	if (pid)
		sqlite3_bind_int(st, 3, pid);
	if (x->has & GU_HAS_UTIL)
		sqlite3_bind_int(st, 4, x->util);
	if (x->has & GU_HAS_MEM)
		sqlite3_bind_int64(st, 5, (int64_t)x->mem);
	if (x->has & GU_HAS_POWER)
		sqlite3_bind_int64(st, 6, x->power_mw);
	if (x->has & GU_HAS_ENERGY)
		sqlite3_bind_int64(st, 7, (int64_t)x->energy_mj);
	if (x->has & GU_HAS_CLOCK)
		sqlite3_bind_int64(st, 8, x->clock_mhz);
	if (x->has & GU_HAS_THROTTLE)
		sqlite3_bind_int64(st, 9, (int64_t)x->throttle);
	sqlite3_bind_int(st, 10, x->has);
	if (!step(r, st))
		r->gpu.rows++;
}

/* A series' readings since the last flush (what left its ring meanwhile is lost to the trace). */
static void write_series(struct recorder *r, const struct gu_series *s, int dev, pid_t pid,
			 uint64_t *written)
{
	struct gu_sample buf[GU_RING];
	int n = gu_series_since(s, *written, buf, GU_RING);

	for (int i = 0; i < n && !r->failed; i++)
		write_sample(r, dev, pid, &buf[i]);
	if (n)
		*written = buf[n - 1].ts;
}

static void write_samples(struct recorder *r, const struct gpu_util *g)
{
	for (int d = 0; d < g->ndev && !r->failed; d++)
		write_series(r, &g->dev[d].s, d, 0, &r->gpu.dev_ts[d]);
	for (int i = 0; i < g->nproc && !r->failed; i++) {
		const struct gu_proc *p = &g->proc[i];

		if (r->gpu.proc_pid[i] != p->pid) {	/* the slot is another process's now */
			r->gpu.proc_pid[i] = p->pid;
			r->gpu.proc_ts[i] = 0;
		}
		if (p->pid)
			write_series(r, &p->s, p->dev, p->pid, &r->gpu.proc_ts[i]);
	}
}

int record_gpu_flush(struct recorder *r, const struct session *ses)
{
	const struct gpu_util *g = &ses->gu;

	if (g->state == GU_NOT_TRIED || r->failed)
		return r->failed ? -1 : 0;
	if (!r->gpu.meta_done) {
		write_meta(r, g);
		r->gpu.meta_done = true;
	}
	if (g->state == GU_ACTIVE) {
		write_devices(r, g);
		write_samples(r, g);
	}
	return r->failed ? -1 : 0;
}

static void bind_agg(sqlite3_stmt *st, const struct gu_agg *a)
{
	sqlite3_bind_int64(st, 6, (int64_t)a->samples);
	sqlite3_bind_int64(st, 7, (int64_t)a->span_ns);
	sqlite3_bind_int64(st, 8, (int64_t)a->util_ns);
	sqlite3_bind_double(st, 9, a->util_pct_ns);
	sqlite3_bind_int64(st, 10, (int64_t)a->energy_ns);
	sqlite3_bind_double(st, 11, a->energy_mj);
	sqlite3_bind_int64(st, 12, (int64_t)a->power_ns);
	sqlite3_bind_double(st, 13, a->power_mw_ns);
	sqlite3_bind_int64(st, 14, (int64_t)a->clock_ns);
	sqlite3_bind_double(st, 15, a->clock_mhz_ns);
	sqlite3_bind_int64(st, 16, (int64_t)a->thr_power_ns);
	sqlite3_bind_int64(st, 17, (int64_t)a->thr_thermal_ns);
	sqlite3_bind_int64(st, 18, (int64_t)a->mem_peak);
	sqlite3_bind_int64(st, 19, (int64_t)a->job_ns);
}

/* A window's rows: one per device, one per process on a device; source NULL: the run. */
static int write_window(struct recorder *r, const char *source, int seq, const struct gu_win *w)
{
	sqlite3_stmt *st = stmt(r, RG_WIN);

	for (int i = 0; st && i < w->ndev + w->nproc && !r->failed; i++) {
		bool dev = i < w->ndev;
		const struct gu_win_proc *p = dev ? NULL : &w->procs[i - w->ndev];

		if (source) {
			sqlite3_bind_text(st, 1, source, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int(st, 2, seq);
		}
		sqlite3_bind_int(st, 3, dev ? w->devs[i].dev : p->dev);
		if (p) {
			sqlite3_bind_int(st, 4, p->pid);
			sqlite3_bind_int(st, 5, p->folded);
		}
		bind_agg(st, dev ? &w->devs[i].a : &p->a);
		step(r, st);
	}
	return r->failed ? -1 : 0;
}

int record_gpu_epoch(struct recorder *r, enum ep_source s, int seq, const struct epoch *e)
{
	if (!e->gpu || r->failed)
		return r->failed ? -1 : 0;
	return write_window(r, epochs_source_name(s), seq, e->gpu);
}

int record_gpu_final(struct recorder *r, const struct session *ses, uint64_t now)
{
	const struct gpu_util *g = &ses->gu;
	struct gu_win w;
	char buf[32];
	int rc;

	if (g->state != GU_ACTIVE || r->failed)
		return r->failed ? -1 : 0;
	gu_run_window(g, now, &w);
	rc = write_window(r, NULL, 0, &w);
	gu_win_free(&w);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)r->gpu.dropped);
	rec_meta(r, "gpu_samples_dropped", buf);
	return rc;
}
