/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf serve`: the run's loop with no target of its own. Every few
 * seconds it looks for training processes (discover.h) and traces them;
 * after each refresh it reads their labels (labels.h), adds what they
 * gained to the metrics (metrics.h) and publishes the exposition for the
 * HTTP thread (exporter.h) to answer scrapes with.
 */
#ifndef TB_SERVE_H
#define TB_SERVE_H

#include <stdbool.h>
#include <stdint.h>
#include "cli.h"
#include "discover.h"
#include "exporter.h"
#include "lib_probes.h"
#include "metrics.h"
#include "ras_client.h"
#include "top.h"
#include "tracer.h"
#include "web_config.h"

#define SERVE_SCAN_NS 2000000000ull	/* new processes: an import torch takes longer */
#define SERVE_PUBLISH_NS 500000000ull	/* the exposition: at most this stale */
#define SERVE_JUDGE_NS 5000000000ull	/* the findings: a diagnosis per job */
/* a dead process's phase threads: kept past the judge window that may read them */
#define SERVE_FORGET_NS (4 * SERVE_JUDGE_NS)
/* NCCL RAS asked, per job (ras_client.h): its view is job-wide, slow to change */
#define SERVE_RAS_NS 10000000000ull
#define SERVE_SAY_NS 60000000000ull	/* a warning that repeats: at most this often */
/*
 * Execs looked at between two refreshes (serve_on_exec: two small /proc
 * reads each); past it, another user's exec storm waits for the scan.
 */
#define SERVE_EXECS_PER_TICK 64

/*
 * The slots one process may hold at once under serve: an eighth of them
 * (1,024 of the default 8,192), at least 16. A training process holds a
 * few hundred threads (intra-op and inter-op pools as wide as the node,
 * CUDA's, NCCL's or gloo's); one of another user that starts thousands
 * must not leave none to the jobs that start after it.
 */
static inline unsigned int serve_thread_quota(unsigned int slots)
{
	return slots / 8 > 16 ? slots / 8 : 16;
}

struct serve {
	struct discover dsc;
	struct metrics mx;
	struct exporter ex;
	const struct env *env;
	bool started;
	uint64_t next_scan, next_publish, next_judge;
	uint64_t untraced_said, next_untraced;	/* threads not traced: said up to, next */
	unsigned int execs_seen;	/* since the last refresh */
	int idle_scans;		/* scans in a row that found no live process traced */
	double start_unix;
	struct ras_poller ras;	/* NCCL RAS queries, off the loop */
	uint64_t next_ras;
	struct top *top;	/* trainbpf top: its table, no exporter; NULL under serve */
};

/* Listens and finds what runs already; an exit status (1, said) or 0. */
int serve_start(struct serve *s, const struct env *env, struct tracer *tr);
/* A process not traced exec'ed: traced at once if --match/--cgroup says so. */
void serve_on_exec(struct serve *s, struct tracer *tr, pid_t pid);
/*
 * After a refresh: new processes (at once if rescan), labels, metrics, the
 * exposition (top: its keys and table). False when top is to end.
 */
bool serve_tick(struct serve *s, struct session *ses, struct tracer *tr, struct lib_probes *gp,
		uint64_t now, bool rescan);
void serve_stop(struct serve *s);

#endif
