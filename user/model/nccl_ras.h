/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NCCL's RAS service (NCCL >= 2.24) as numbers: what one STATUS query of
 * a job's RAS thread says about the whole job, on every node (nodes,
 * processes, GPUs, communicators by state, what is missing or dead).
 * acquire/nccl_ras.c asks; this file parses the reply (text, or JSON
 * from 2.28.7) and the address a job names. No I/O here.
 *
 * The reply's shapes are NCCL's own (src/ras/client_support.cc of NCCL
 * 2.24.3 to 2.30.7, read at 5067397): the text is for humans and NVIDIA
 * says it may change between releases; the JSON is the raw data.
 */
#ifndef TB_NCCL_RAS_H
#define TB_NCCL_RAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "job.h"

/* NCCL's defaults: src/ras/ras_internal.h NCCL_RAS_CLIENT_PORT, _PROTOCOL. */
#define RAS_DEFAULT_PORT 28028
#define RAS_CLIENT_PROTOCOL 2

/* A communicator's state, as the text's Status column names it. */
enum ras_status {
	RAS_ST_NOCOMM,		/* "UNKNOWN" before 2.26 */
	RAS_ST_INIT,
	RAS_ST_RUNNING,
	RAS_ST_FINALIZE,
	RAS_ST_ABORT,
	RAS_NSTATUS
};

/* What the Errors column flags on a communicator. */
enum ras_flag {
	RAS_FL_INCOMPLETE,	/* ranks that gave no data */
	RAS_FL_MISMATCH,	/* ranks disagree: status or collective counts */
	RAS_FL_ERROR,		/* an initialization or asynchronous error */
	RAS_NFLAGS
};

extern const char *const ras_status_names[RAS_NSTATUS];
extern const char *const ras_flag_names[RAS_NFLAGS];

/* The job-wide view. -1: the reply did not say (the text's job summary is not in the JSON). */
struct ras_view {
	char version[32];	/* the NCCL that answered */
	int nodes, processes, gpus;
	int comms;
	int comms_status[RAS_NSTATUS];
	int comms_flag[RAS_NFLAGS];
	int ranks_missing;	/* summed over communicators */
	int procs_missing;	/* job processes that gave no communicator data */
	int procs_dead;		/* declared dead by RAS (unreachable 60 s) */
	int timeouts;		/* while RAS gathered this reply */
	double collection_s;	/* how long RAS took to gather it */
	bool json;		/* parsed from JSON */
	bool truncated;		/* the reply was cut at acquire's bound */
};

/*
 * Why a job's RAS was not read (bounded: a metric label). RAS_OK: read.
 * ras_result_names[] are the label values.
 */
enum ras_result {
	RAS_OK,
	RAS_OFF,		/* NCCL_RAS_ENABLE=0 */
	RAS_BAD_ADDR,		/* NCCL_RAS_ADDR not a loopback address:port */
	RAS_NO_LISTENER,	/* nothing listens there in the job's namespace */
	RAS_NOT_JOBS,		/* a socket there is not the job's own */
	RAS_CONNECT,		/* entering the namespace or connecting failed */
	RAS_TIMEOUT,		/* no complete answer within the budget */
	RAS_PROTOCOL,		/* an answer not in NCCL's protocol */
	RAS_GONE,		/* the job's processes went meanwhile */
	RAS_NRESULTS
};
extern const char *const ras_result_names[RAS_NRESULTS];

/* One job's last query, as the daemon exports it. */
struct ras_report {
	char job[JOB_ID_LEN];
	enum ras_result result;
	struct ras_view v;	/* valid when result is RAS_OK */
};

/* Where RAS listens: a loopback address or localhost (either family). */
struct ras_addr {
	int family;		/* AF_INET, AF_INET6, or 0: "localhost" */
	unsigned char ip[16];	/* network order; 4 bytes for AF_INET */
	int port;
};

/*
 * NCCL_RAS_ADDR's value (NULL: unset, NCCL's default localhost:28028).
 * Only localhost, 127.0.0.0/8 and [::1] are accepted: the daemon is root,
 * and a job must not steer it to connect anywhere else. 0, or -1 with why.
 */
int ras_addr_parse(const char *s, struct ras_addr *a, char *why, size_t len);

/* Whether an NCCL version string ("2.27.3+cuda13.0") is at least maj.min.patch. */
bool ras_version_at_least(const char *v, int maj, int min, int patch);

/* A STATUS reply; 0, or -1 with why (not NCCL's shape). */
int ras_parse_text(const char *buf, size_t len, struct ras_view *v, char *why, size_t wlen);
int ras_parse_json(const char *buf, size_t len, struct ras_view *v, char *why, size_t wlen);

#endif
