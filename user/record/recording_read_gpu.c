// SPDX-License-Identifier: BSD-3-Clause
/*
 * Schema 4's GPU tables back into the model (gpu_util.h), as the live tool
 * had it when it reported: whether NVML worked, the devices, each epoch's
 * window and the run's. A recording cut before its end has no run window:
 * it is summed again from the readings (gpu_samples), as the trackers did.
 * An older file has none of it: the reports print no GPU line, as its
 * live report had none.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include "recording_read.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

/* A meta value into buf ("" if absent); -1 on a read error. */
static int meta(struct recording *r, const char *key, char *buf, size_t len,
		char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	buf[0] = '\0';
	if (sqlite3_prepare_v2(r->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *v = sqlite3_column_text(st, 0);

		snprintf(buf, len, "%s", v ? (const char *)v : "");
		rc = SQLITE_DONE;
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

static int load_devices(struct recording *r, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(r->db, "SELECT dev, idx, uuid, name, mem_total, has, proc_util, "
			       "lost_ns, lost_why FROM gpu_devices ORDER BY dev", -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int d;

		if (sqlite3_column_int(st, 0) != r->ses.gu.ndev)
			continue;	/* the devices are numbered from 0 in order */
		d = gu_add_dev(&r->ses.gu, sqlite3_column_int(st, 1), rec_col_str(st, 2),
			       rec_col_str(st, 3), rec_col_u64(st, 4));
		if (d < 0)
			continue;
		r->ses.gu.dev[d].has = (unsigned int)sqlite3_column_int(st, 5);
		r->ses.gu.dev[d].proc_util = sqlite3_column_int(st, 6) != 0;
		if (sqlite3_column_type(st, 7) != SQLITE_NULL)
			gu_dev_lost(&r->ses.gu, d, rec_col_u64(st, 7), rec_col_str(st, 8));
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

/* Columns 2.. of a gpu_windows row (dev, pid, folded, the sums) into a one-row window. */
static void row_window(sqlite3_stmt *st, int c, struct gu_win *w, struct gu_win_dev *wd,
		       struct gu_win_proc *wp)
{
	struct gu_agg a = {
		.samples = rec_col_u64(st, c + 3), .span_ns = rec_col_u64(st, c + 4),
		.util_ns = rec_col_u64(st, c + 5), .util_pct_ns = sqlite3_column_double(st, c + 6),
		.energy_ns = rec_col_u64(st, c + 7), .energy_mj = sqlite3_column_double(st, c + 8),
		.power_ns = rec_col_u64(st, c + 9), .power_mw_ns = sqlite3_column_double(st, c + 10),
		.clock_ns = rec_col_u64(st, c + 11),
		.clock_mhz_ns = sqlite3_column_double(st, c + 12),
		.thr_power_ns = rec_col_u64(st, c + 13), .thr_thermal_ns = rec_col_u64(st, c + 14),
		.mem_peak = rec_col_u64(st, c + 15), .job_ns = rec_col_u64(st, c + 16),
	};
	int dev = sqlite3_column_int(st, c);

	memset(w, 0, sizeof(*w));
	w->devs = wd;
	w->procs = wp;
	if (sqlite3_column_type(st, c + 1) == SQLITE_NULL) {
		*wd = (struct gu_win_dev){ dev, a };
		w->ndev = 1;
	} else {
		*wp = (struct gu_win_proc){ sqlite3_column_int(st, c + 1), dev,
					    sqlite3_column_int(st, c + 2), a };
		w->nproc = 1;
	}
}

/* A row that names a device we have, and with --pid, that process or a device. */
static bool wanted(const struct recording *r, const struct rec_filter *flt, sqlite3_stmt *st,
		   int c)
{
	int dev = sqlite3_column_int(st, c);

	if (dev < 0 || dev >= r->ses.gu.ndev)
		return false;
	return !flt->pid || sqlite3_column_type(st, c + 1) == SQLITE_NULL ||
	       sqlite3_column_int(st, c + 1) == flt->pid;
}

static void join(struct gu_win **into, const struct gu_win *row)
{
	if (!*into && !(*into = calloc(1, sizeof(**into))))
		abort();	/* as job.c: out of memory, nothing left to say */
	gu_win_merge(*into, row);
}

#define WIN_COLS "w.dev, w.pid, w.folded, w.samples, w.span_ns, w.util_ns, w.util_pct_ns, " \
	"w.energy_ns, w.energy_mj, w.power_ns, w.power_mw_ns, w.clock_ns, w.clock_mhz_ns, " \
	"w.thr_power_ns, w.thr_thermal_ns, w.mem_peak, w.job_ns"

/* The run's rows (source NULL): the window the live report printed. */
static int load_run(struct recording *r, const struct rec_filter *flt, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	struct gu_win_dev wd;
	struct gu_win_proc wp;
	struct gu_win row;
	int rc;

	if (sqlite3_prepare_v2(r->db, "SELECT " WIN_COLS " FROM gpu_windows w "
			       "WHERE w.source IS NULL ORDER BY w.rowid", -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!wanted(r, flt, st, 0))
			continue;
		row_window(st, 0, &row, &wd, &wp);
		join(&r->ses.gu.saved_run, &row);
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

/* The kept epoch that holds [a, b] (merged epochs hold several), or NULL. */
static struct epoch *epoch_over(struct ep_stream *st, uint64_t a, uint64_t b)
{
	for (int i = 0; i < st->n; i++)
		if (st->list[i].start <= a && b <= st->list[i].end)
			return &st->list[i];
	return NULL;
}

static int load_epochs(struct recording *r, const struct rec_filter *flt,
		       char *err, size_t errlen)
{
	enum ep_source s = epochs_source(&r->ses.ep);
	sqlite3_stmt *st = NULL;
	struct gu_win_dev wd;
	struct gu_win_proc wp;
	struct gu_win row;
	int rc;

	if (s == EP_NSRC)
		return 0;
	if (sqlite3_prepare_v2(r->db, "SELECT e.start_ns, e.end_ns, " WIN_COLS " FROM gpu_windows w "
			       "JOIN epochs e ON e.source = w.source AND e.seq = w.seq "
			       "WHERE w.source = ?1 ORDER BY e.seq, w.rowid", -1, &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	sqlite3_bind_text(st, 1, epochs_source_name(s), -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t b = sqlite3_column_type(st, 1) == SQLITE_NULL ? r->end_ns :
			     rec_col_u64(st, 1);
		struct epoch *e = epoch_over(&r->ses.ep.src[s], rec_col_u64(st, 0), b);

		if (!e || !wanted(r, flt, st, 2))
			continue;
		row_window(st, 2, &row, &wd, &wp);
		join(&e->gpu, &row);
	}
	return rec_stmt_done(r, st, rc, err, errlen);
}

/* A cut recording: the run summed again from its readings. */
static int rebuild_run(struct recording *r, const struct rec_filter *flt,
		       char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int h = gu_open(&r->ses.gu, r->start_ns), rc;

	if (sqlite3_prepare_v2(r->db, "SELECT ts_ns, dev, pid, util, mem, power_mw, energy_mj, "
			       "clock_mhz, throttle, has FROM gpu_samples ORDER BY rowid", -1,
			       &st, NULL))
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct gu_sample x = {
			.ts = rec_col_u64(st, 0), .util = (uint8_t)sqlite3_column_int(st, 3),
			.mem = rec_col_u64(st, 4), .power_mw = (uint32_t)rec_col_u64(st, 5),
			.energy_mj = rec_col_u64(st, 6), .clock_mhz = (uint32_t)rec_col_u64(st, 7),
			.throttle = rec_col_u64(st, 8), .has = (uint8_t)sqlite3_column_int(st, 9),
		};
		int dev = sqlite3_column_int(st, 1);
		pid_t pid = sqlite3_column_int(st, 2);

		if (sqlite3_column_type(st, 2) == SQLITE_NULL)
			gu_dev_sample(&r->ses.gu, dev, &x);
		else if (!flt->pid || pid == flt->pid)
			gu_proc_sample(&r->ses.gu, pid, dev, &x);
	}
	if (!(r->ses.gu.saved_run = calloc(1, sizeof(*r->ses.gu.saved_run))))
		abort();
	gu_close(&r->ses.gu, h, r->end_ns, r->ses.gu.saved_run);
	return rec_stmt_done(r, st, rc, err, errlen);
}

static int load_active(struct recording *r, const struct rec_filter *flt,
		       char *err, size_t errlen)
{
	char buf[64];

	r->ses.gu.state = GU_ACTIVE;
	if (meta(r, "gpu_driver", r->ses.gu.driver, sizeof(r->ses.gu.driver), err, errlen) ||
	    meta(r, "gpu_period_ns", buf, sizeof(buf), err, errlen))
		return -1;
	r->ses.gu.period_ns = strtoull(buf, NULL, 10);
	if (meta(r, "gpu_devices_over", buf, sizeof(buf), err, errlen))
		return -1;
	r->ses.gu.devs_over = atoi(buf);
	if (load_devices(r, err, errlen) || load_run(r, flt, err, errlen) ||
	    load_epochs(r, flt, err, errlen))
		return -1;
	if (flt->epoch_set) {	/* the window is the epoch: so are its readings */
		enum ep_source s = epochs_source(&r->ses.ep);
		struct gu_win *e = s != EP_NSRC && r->ses.ep.src[s].n ? r->ses.ep.src[s].list[0].gpu : NULL;

		gu_win_drop(&r->ses.gu.saved_run);
		if (!(r->ses.gu.saved_run = calloc(1, sizeof(*r->ses.gu.saved_run))))
			abort();
		if (e)
			gu_win_merge(r->ses.gu.saved_run, e);
		return 0;
	}
	return r->ses.gu.saved_run ? 0 : rebuild_run(r, flt, err, errlen);
}

int rec_load_gpu_util(struct recording *r, const struct rec_filter *flt,
		      char *err, size_t errlen)
{
	char status[32], why[sizeof(r->ses.gu.why)];

	gu_init(&r->ses.gu);
	if (r->version < 4)
		return 0;
	if (meta(r, "gpu_metrics", status, sizeof(status), err, errlen))
		return -1;
	if (!strcmp(status, "unavailable")) {
		if (meta(r, "gpu_metrics_why", why, sizeof(why), err, errlen))
			return -1;
		gu_unavailable(&r->ses.gu, "%s", why);
		return 0;
	}
	return strcmp(status, "ok") ? 0 : load_active(r, flt, err, errlen);
}
