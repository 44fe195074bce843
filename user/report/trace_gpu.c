// SPDX-License-Identifier: BSD-3-Clause
/*
 * The GPU's readings (schema 4's gpu_samples) in the Chrome trace: a
 * process track per device ("GPU 0: NAME"), with counter tracks of its
 * utilization, memory, power and energy (joules since the recording
 * began); and on each of the job's processes that used a device, a
 * counter track of its memory there. Pids of the device tracks are far
 * above any real pid.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include "trace_gpu.h"

#define GPU_PID(dev) (0x7f000000 + (dev))

struct tg {
	struct jw *j;
	uint64_t t0;
	const struct gpu_util *g;
	uint64_t energy0[GU_MAX_DEVS];	/* each device's first counter reading */
	bool has_energy0[GU_MAX_DEVS];
	long rows;
};

static void counter(struct tg *w, int pid, uint64_t ts, const char *name, const char *key,
		    double v, int decimals)
{
	jw_object(w->j);
	jw_string_field(w->j, "ph", "C");
	jw_string_field(w->j, "name", name);
	jw_int_field(w->j, "pid", pid);
	jw_int_field(w->j, "tid", pid);
	jw_float_field(w->j, "ts", ((double)ts - (double)w->t0) / 1e3, 3);
	jw_name(w->j, "args");
	jw_object(w->j);
	jw_float_field(w->j, key, v, decimals);
	jw_end_object(w->j);
	jw_end_object(w->j);
}

static void names(struct tg *w)
{
	char name[GU_NAME_LEN + 16];

	for (int d = 0; d < w->g->ndev; d++) {
		snprintf(name, sizeof(name), "GPU %d: %s", w->g->dev[d].index, w->g->dev[d].name);
		jw_object(w->j);
		jw_string_field(w->j, "ph", "M");
		jw_string_field(w->j, "name", "process_name");
		jw_int_field(w->j, "pid", GPU_PID(d));
		jw_int_field(w->j, "tid", GPU_PID(d));
		jw_int_field(w->j, "ts", 0);
		jw_name(w->j, "args");
		jw_object(w->j);
		jw_string_field(w->j, "name", name);
		jw_end_object(w->j);
		jw_end_object(w->j);
	}
}

static void device_row(struct tg *w, int d, uint64_t ts, sqlite3_stmt *st)
{
	if (sqlite3_column_type(st, 3) != SQLITE_NULL)
		counter(w, GPU_PID(d), ts, "utilization %", "util", sqlite3_column_int(st, 3), 0);
	if (sqlite3_column_type(st, 4) != SQLITE_NULL)
		counter(w, GPU_PID(d), ts, "memory GiB", "used",
			sqlite3_column_int64(st, 4) / (double)(1ull << 30), 3);
	if (sqlite3_column_type(st, 5) != SQLITE_NULL)
		counter(w, GPU_PID(d), ts, "power W", "power", sqlite3_column_int64(st, 5) / 1e3, 1);
	if (sqlite3_column_type(st, 6) != SQLITE_NULL) {
		uint64_t e = (uint64_t)sqlite3_column_int64(st, 6);

		if (!w->has_energy0[d]) {
			w->energy0[d] = e;
			w->has_energy0[d] = true;
		}
		counter(w, GPU_PID(d), ts, "energy J", "energy",
			e >= w->energy0[d] ? (e - w->energy0[d]) / 1e3 : 0.0, 1);
	}
}

static void row(sqlite3_stmt *st, void *arg)
{
	struct tg *w = arg;
	uint64_t ts = (uint64_t)sqlite3_column_int64(st, 0);
	int d = sqlite3_column_int(st, 1);
	char name[48];

	if (d < 0 || d >= w->g->ndev)
		return;
	w->rows++;
	if (sqlite3_column_type(st, 2) == SQLITE_NULL) {
		device_row(w, d, ts, st);
		return;
	}
	if (sqlite3_column_type(st, 4) == SQLITE_NULL)
		return;
	snprintf(name, sizeof(name), "GPU %d memory GiB", w->g->dev[d].index);
	counter(w, sqlite3_column_int(st, 2), ts, name, "used",
		sqlite3_column_int64(st, 4) / (double)(1ull << 30), 3);
}

long trace_gpu_tracks(struct jw *j, struct recording *r, uint64_t t0, char *err, size_t errlen)
{
	struct tg w = { .j = j, .t0 = t0, .g = &r->ses.gu };

	if (r->ses.gu.state != GU_ACTIVE)
		return 0;
	names(&w);
	if (rec_query(r, "SELECT ts_ns, dev, pid, util, mem, power_mw, energy_mj FROM gpu_samples "
		      "ORDER BY rowid", row, &w, err, errlen))
		return -1;
	return w.rows;
}
