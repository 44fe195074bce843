/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU's own side, as NVIDIA's management library (NVML) reports it:
 * per device utilization (the share of time a kernel ran, any kernel),
 * memory used, power, the energy counter, clocks and throttle reasons;
 * per process of the job on a device, its memory and, where the device
 * reports it, its utilization. acquire/gpu_sampler.c reads them on
 * trainbpf's own clock and adds them here; this file only keeps and sums.
 *
 * A reading at ts and the series' previous one bound an interval:
 * utilization is NVML's average over its own recent period, so the
 * reading's value holds for the interval before it; power, clock,
 * throttle reasons and the job's presence are states read at an instant,
 * held from one reading to the next; the energy counter is exact (mJ since
 * the driver loaded); memory is a point (a window's peak is its highest
 * reading). A window
 * (a, b] gets each reading's share of its interval that lies inside, the
 * energy counter interpolated linearly at a and b, and the memory readings
 * taken inside it.
 *
 * Windows that stay open while the job runs (the whole run, the epoch in
 * progress of each source) are trackers: readings that leave a series'
 * ring of recent ones are added to every open tracker, the ring is added
 * when a tracker closes. So a boundary placed late (an epoch boundary is
 * placed up to a second after it happened) still splits the readings
 * exactly, and nothing grows with the length of a window.
 */
#ifndef TB_GPU_UTIL_H
#define TB_GPU_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define GU_MAX_DEVS 16		/* devices followed; more are not sampled (said) */
/*
 * (device, process) series followed at once. Past it, the one of an
 * exited process gone longest is summed into its device's "exited" row.
 */
#define GU_MAX_PROCS 64
#define GU_RING 128		/* recent readings per series */
#define GU_MAX_WINS 16		/* open windows: the run, each epoch source's */
/* A process NVML stopped listing this long ago is gone (its row may be summed). */
#define GU_GONE_NS 10000000000ull
#define GU_NAME_LEN 96		/* NVML_DEVICE_NAME_V2_BUFFER_SIZE, _UUID_V2_ */

/* Which readings a sample has (NVML answers some per device only). */
#define GU_HAS_UTIL	0x01
#define GU_HAS_MEM	0x02
#define GU_HAS_POWER	0x04
#define GU_HAS_ENERGY	0x08
#define GU_HAS_CLOCK	0x10
#define GU_HAS_THROTTLE	0x20
#define GU_JOB		0x40	/* a device sample: one of the job's processes was on it */

/*
 * Throttle reasons (nvmlClocksEventReason*): power caps (software cap,
 * hardware slowdown, power brake) and thermal slowdowns.
 */
#define GU_THR_POWER	(0x4ull | 0x8ull | 0x80ull)
#define GU_THR_THERMAL	(0x20ull | 0x40ull)

struct gu_sample {
	uint64_t ts;			/* CLOCK_MONOTONIC */
	uint64_t mem;			/* bytes used */
	uint64_t energy_mj;		/* the device's counter */
	uint64_t throttle;		/* reason bits */
	uint32_t power_mw, clock_mhz;	/* SM clock */
	uint8_t util;			/* percent */
	uint8_t has;			/* GU_HAS_*, GU_JOB */
};

/* What one series did in a window; windows that touch add up (gu_agg_add). */
struct gu_agg {
	uint64_t samples;		/* readings taken in the window */
	uint64_t span_ns;		/* time the readings cover */
	uint64_t util_ns;		/* of it, with a utilization reading */
	double util_pct_ns;		/* utilization (percent) x time */
	uint64_t energy_ns;		/* with the energy counter at both ends */
	double energy_mj;
	uint64_t power_ns;
	double power_mw_ns;
	uint64_t clock_ns;
	double clock_mhz_ns;
	uint64_t thr_power_ns, thr_thermal_ns;	/* with a power (thermal) reason */
	uint64_t mem_peak;		/* the highest memory reading, bytes */
	uint64_t job_ns;		/* a device's time with the job on it */
};

/* A series' recent readings; the newest that left the ring starts the next one's interval. */
struct gu_series {
	struct gu_sample *ring;		/* GU_RING, allocated with the first reading */
	int head, n;			/* oldest at head */
	struct gu_sample gone;
	bool has_gone;
};

struct gu_dev {
	int index;			/* NVML's */
	char uuid[GU_NAME_LEN], name[GU_NAME_LEN];
	uint64_t mem_total;		/* bytes */
	unsigned int has;		/* GU_HAS_* it ever answered */
	bool proc_util;			/* per-process utilization answered */
	bool lost;			/* NVML_ERROR_GPU_IS_LOST: no reading after lost_ts */
	uint64_t lost_ts;
	char lost_why[80];
	struct gu_series s;
};

/* One of the job's processes on one device; pid 0: exited ones summed (folded). */
struct gu_proc {
	pid_t pid;
	int dev;			/* index into gpu_util.dev */
	int folded;
	uint64_t first_ts, last_ts;	/* NVML listed it */
	struct gu_series s;
};

struct gu_tracker {
	bool open;
	uint64_t start;
	struct gu_agg dev[GU_MAX_DEVS];
	struct gu_agg proc[GU_MAX_PROCS];
	struct gu_agg exited[GU_MAX_DEVS];	/* the folded rows of each device */
	int nexited[GU_MAX_DEVS];
};

/* A closed window: the devices and processes with readings in it. */
struct gu_win_dev {
	int dev;
	struct gu_agg a;
};

struct gu_win_proc {
	pid_t pid;			/* 0: folded processes */
	int dev;
	int folded;
	struct gu_agg a;
};

struct gu_win {
	int ndev, nproc;
	struct gu_win_dev *devs;
	struct gu_win_proc *procs;
};

enum gu_state {
	GU_NOT_TRIED,		/* an older recording: nothing known */
	GU_UNAVAILABLE,		/* no library, nvmlInit failed, no device: why */
	GU_ACTIVE,
};

struct gpu_util {
	enum gu_state state;
	char why[192];			/* unavailable: the one line that says why */
	char driver[32];		/* the driver's version, if told */
	uint64_t period_ns;		/* the sampling period */
	int ndev;
	struct gu_dev dev[GU_MAX_DEVS];
	int devs_over;			/* devices past GU_MAX_DEVS, not sampled */
	int nproc;
	struct gu_proc proc[GU_MAX_PROCS];
	long procs_folded;		/* series summed into an exited row */
	struct gu_tracker *win[GU_MAX_WINS];
	int run;			/* the whole window's tracker, or -1 */
	struct gu_win *saved_run;	/* a recording's run window: reported as is */
};

/* The summary of a window over the job's devices (gu_win_summary). */
struct gu_summary {
	int ndev;			/* devices with the job on them */
	double util_avg, util_min;	/* mean and lowest of their average utilization */
	int util_min_dev;		/* index into gpu_util.dev of the lowest */
	int util_devs;			/* of them, with utilization readings */
	double energy_j;		/* their energy; energy_ok: every one had the counter */
	bool energy_ok;
	double power_w;			/* their average power, summed */
	double mem_frac;		/* the highest peak / total of one device */
	int mem_dev;
	uint64_t mem_peak;
	double thr_power, thr_thermal;	/* the most throttled device's share of time */
	int thr_dev;
};

void gu_init(struct gpu_util *g);
void gu_free(struct gpu_util *g);
/* The library could not be used: why, one line (printf-style). */
void gu_unavailable(struct gpu_util *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A device NVML lists; its index into g->dev, or -1 past GU_MAX_DEVS (counted). */
int gu_add_dev(struct gpu_util *g, int index, const char *uuid, const char *name,
	       uint64_t mem_total);
/* A reading of device d. */
void gu_dev_sample(struct gpu_util *g, int d, const struct gu_sample *s);
/* Device d answered GPU_IS_LOST (or another error that ends it) at ts. */
void gu_dev_lost(struct gpu_util *g, int d, uint64_t ts, const char *why);
/*
 * A reading of the job's process pid on device d (mem, and util when
 * GU_HAS_UTIL). Past GU_MAX_PROCS series, one of a gone process is summed
 * into its device's exited row first; false if none could be.
 */
bool gu_proc_sample(struct gpu_util *g, pid_t pid, int d, const struct gu_sample *s);

/* Windows: a tracker opened at a (now or a little before), or -1 if none is free. */
int gu_open(struct gpu_util *g, uint64_t a);
/* Closes tracker h at b (now or a little before) into w (gu_win_free it). */
void gu_close(struct gpu_util *g, int h, uint64_t b, struct gu_win *w);
/* Tracker h's window up to b, left open. */
void gu_peek(const struct gpu_util *g, int h, uint64_t b, struct gu_win *w);
/* The whole window so far: the run's tracker, or a recording's saved window. */
void gu_run_window(const struct gpu_util *g, uint64_t now, struct gu_win *w);
void gu_win_free(struct gu_win *w);
/*
 * For windows kept by others (an epoch's): tracker *h closed at b into a
 * new window, NULL if none was open (g NULL: no GPU); *h is -1 after.
 * gu_drop closes one that is not wanted; gu_win_drop frees a kept window;
 * gu_win_join merges *b into *a (the later one), freeing *b.
 */
struct gu_win *gu_close_new(struct gpu_util *g, int *h, uint64_t b);
void gu_drop(struct gpu_util *g, int *h);
void gu_win_drop(struct gu_win **w);
void gu_win_join(struct gu_win **a, struct gu_win **b);
/* b's readings into a (windows that touch); a copy of b. */
void gu_win_merge(struct gu_win *a, const struct gu_win *b);
int gu_win_copy(struct gu_win *dst, const struct gu_win *src);
/* A window's row for device d (index into gpu_util.dev), or NULL. */
const struct gu_agg *gu_win_dev(const struct gu_win *w, int d);
/*
 * Over the devices the job was on in w: utilization (mean and lowest of
 * their averages), energy, power, the memory peak nearest its device's
 * total, throttling. Returns how many devices.
 */
int gu_win_summary(const struct gpu_util *g, const struct gu_win *w, struct gu_summary *s);

void gu_agg_add(struct gu_agg *a, const struct gu_agg *b);
/* An aggregate's averages; -1 when it has no such reading. */
double gu_agg_util(const struct gu_agg *a);
double gu_agg_power_w(const struct gu_agg *a);
double gu_agg_clock(const struct gu_agg *a);

/* The newest reading of a series, or NULL. */
const struct gu_sample *gu_series_last(const struct gu_series *s);
/* The readings of a series newer than ts, oldest first, into out[0..max); how many. */
int gu_series_since(const struct gu_series *s, uint64_t ts, struct gu_sample *out, int max);

/*
 * NVML's pid of a process into one of the job's: the same pid when the job
 * has it, else the one job process whose pid in its own namespace
 * (NSpid's later fields, innermost last) it is. nspid[i][0..nns[i]) is
 * pids[i]'s chain as /proc/PID/status gives it, outermost first. Returns
 * the job's pid, or 0 (none, or more than one).
 */
pid_t gu_match_pid(pid_t nvml_pid, const pid_t *pids, int n, const pid_t (*nspid)[4],
		   const int *nns);

#endif
