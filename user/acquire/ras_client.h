/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asking a traced job's NCCL RAS service (model/nccl_ras.h) from outside
 * its network namespace. RAS listens on the job's loopback (localhost:28028,
 * or NCCL_RAS_ADDR), where the daemon cannot connect from its own
 * namespace: a short-lived thread enters the job's (setns on a pidfd:
 * that thread only) and connects there.
 *
 * trainbpf is root and the job is not trusted: the address must be a
 * loopback one, and every socket listening on that port in the job's
 * namespace must be one of the job's own processes' (any user there could
 * bind it first, and NCCL's listener uses SO_REUSEPORT, so a same-user
 * process could share it). Otherwise nothing is sent.
 *
 * The poller runs the queries in a thread of its own, one round at a
 * time: the daemon's loop hands it the jobs and picks up the last results
 * when it publishes, never waiting on a socket.
 */
#ifndef TB_RAS_CLIENT_H
#define TB_RAS_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>
#include "nccl_ras.h"

#define RAS_REPLY_MAX (256 * 1024)	/* a reply past it is cut (said: truncated) */
/*
 * One query's budget, connect to last byte. RAS is asked to give up on a
 * peer after 1 s (TIMEOUT 1: its default is 5 s), so that an unresponsive
 * process still leaves time for the reply.
 */
#define RAS_BUDGET_MS 2000
#define RAS_MAX_JOBS 16		/* jobs asked per round */
#define RAS_MAX_PIDS 64		/* a job's processes whose sockets are looked at */

/* One job to ask: its processes on this node; pids[0] is asked for the address. */
struct ras_job {
	char job[JOB_ID_LEN];
	pid_t pids[RAS_MAX_PIDS];
	int npids;
	bool json;		/* its NCCL is >= 2.28.7 */
};

/* One query; why says what went wrong (one line) when the result is not RAS_OK. */
enum ras_result ras_query(const struct ras_job *j, struct ras_view *v, char *why, size_t len);

struct ras_poller {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started, stop, busy;
	struct ras_job req[RAS_MAX_JOBS];
	int nreq;
	struct ras_report done[RAS_MAX_JOBS];	/* the last round's */
	int ndone;
};

int ras_poller_start(struct ras_poller *p);
/* A new round; false while the last one runs (its jobs wait for the next). */
bool ras_poller_submit(struct ras_poller *p, const struct ras_job *jobs, int n);
/* The last round's reports into out (up to RAS_MAX_JOBS); how many. */
int ras_poller_results(struct ras_poller *p, struct ras_report *out);
void ras_poller_stop(struct ras_poller *p);

#endif
