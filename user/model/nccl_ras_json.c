// SPDX-License-Identifier: BSD-3-Clause
/*
 * NCCL RAS's JSON STATUS reply (NCCL >= 2.28.7): the raw data of every
 * communicator, as client_support.cc's rasDumpCommsToJSON writes it
 * (jsonWriteHeader, jsonStartCommunicator, jsonWriteRankData,
 * jsonWriteMissingRank, jsonWriteFooter). It has no job summary: the
 * nodes, processes and GPUs here are those the communicators' ranks name
 * (distinct hosts, host+pid, host+nvml_dev), up to RJ_MAX_SEEN each.
 * A communicator's state and flags follow rasClientRunComms's rules, so
 * that both formats give the same numbers for the same job.
 *
 * A small recursive-descent reader: depth and sizes bounded, strings kept
 * only as far as the fields need; anything not JSON is an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_ras.h"

#define RJ_DEPTH 8
#define RJ_MAX_SEEN 256
#define RJ_MAX_COUNTS 16	/* collective_counts' entries (NCCL has 5) */

struct rj_rank {
	char host[64];
	long pid, nvml_dev, init_state, async_error;
	bool finalize, destroy, abort, unresponsive, dead;
	unsigned long counts[RJ_MAX_COUNTS];
	int ncounts;
};

struct rj {
	const char *p, *end;
	const char *path[RJ_DEPTH];	/* keys from the top; "[]" an array's element */
	int depth;
	struct ras_view *v;
	struct rj_rank r;		/* the rank being read */
	unsigned status;		/* the communicator's: 1 << enum ras_status */
	unsigned flags;			/* 1 << enum ras_flag */
	unsigned long first[RJ_MAX_COUNTS];	/* its first rank's collective counts */
	int nfirst;
	bool have_first;
	char hosts[RJ_MAX_SEEN][64];
	char procs[RJ_MAX_SEEN][80], gpus[RJ_MAX_SEEN][80], dead[RJ_MAX_SEEN][80];
	char unresp[RJ_MAX_SEEN][80];
	int nhosts, nprocs, ngpus, ndead, nunresp;
	bool overflow;
};

static void ws(struct rj *j)
{
	while (j->p < j->end && strchr(" \t\r\n", *j->p))
		j->p++;
}

/* A string into out (cut to len; escapes kept as they are: only compared). */
static int string(struct rj *j, char *out, size_t len)
{
	size_t n = 0;

	if (j->p >= j->end || *j->p != '"')
		return -1;
	for (j->p++; j->p < j->end && *j->p != '"'; j->p++) {
		if (*j->p == '\\' && ++j->p >= j->end)
			return -1;
		if (n + 1 < len)
			out[n++] = *j->p;
	}
	if (j->p >= j->end)
		return -1;
	j->p++;
	out[n] = 0;
	return 0;
}

static bool at(const struct rj *j, int depth, const char *const *keys)
{
	if (j->depth != depth)
		return false;
	for (int i = 0; i < depth; i++)
		if (strcmp(j->path[i], keys[i]))
			return false;
	return true;
}

static const char *const K_RANK[] = { "communicators", "[]", "ranks", "[]" };
static const char *const K_MISSING[] = { "communicators", "[]", "missing_ranks", "[]" };
static const char *const K_COMM[] = { "communicators", "[]" };

/* Whether key (under the current path) is one of a rank's fields. */
static void rank_field(struct rj *j, const char *key, const char *val, bool is_str)
{
	struct rj_rank *r = &j->r;
	long n = strtol(val, NULL, 10);
	bool t = !strcmp(val, "true");
	int d = j->depth;

	if (d >= 4 && strcmp(j->path[3], "[]"))
		return;
	if (d == 4 && !strcmp(key, "host") && is_str)
		snprintf(r->host, sizeof(r->host), "%s", val);
	else if (d == 4 && !strcmp(key, "pid"))
		r->pid = n;
	else if (d == 4 && !strcmp(key, "nvml_dev"))
		r->nvml_dev = n;
	else if (d == 5 && !strcmp(j->path[4], "status")) {
		if (!strcmp(key, "init_state"))
			r->init_state = n;
		else if (!strcmp(key, "async_error"))
			r->async_error = n;
		else if (!strcmp(key, "finalize_called"))
			r->finalize = t;
		else if (!strcmp(key, "destroy_flag"))
			r->destroy = t;
		else if (!strcmp(key, "abort_flag"))
			r->abort = t;
		else if (!strcmp(key, "unresponsive"))
			r->unresponsive = t;
		else if (!strcmp(key, "considered_dead"))
			r->dead = t;
	} else if (d == 5 && !strcmp(j->path[4], "collective_counts") &&
		   r->ncounts < RJ_MAX_COUNTS)
		r->counts[r->ncounts++] = strtoul(val, NULL, 10);
}

static void scalar(struct rj *j, const char *key, const char *val, bool is_str)
{
	struct ras_view *v = j->v;

	if (j->depth == 0 && !strcmp(key, "nccl_version") && is_str)
		snprintf(v->version, sizeof(v->version), "%s", val);
	else if (j->depth == 0 && !strcmp(key, "communicators_count"))
		v->comms = atoi(val);
	else if (j->depth == 1 && !strcmp(j->path[0], "ras")) {
		if (!strcmp(key, "collection_time_sec"))
			v->collection_s = strtod(val, NULL);
		else if (!strcmp(key, "timeouts_count"))
			v->timeouts = atoi(val);
	} else if (j->depth >= 4 && (!strcmp(j->path[2], "ranks") ||
				     !strcmp(j->path[2], "missing_ranks")))
		rank_field(j, key, val, is_str);
}

/* s into a set of distinct strings; its size, or overflow noted. */
static void seen(struct rj *j, char set[][80], int *n, const char *s)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(set[i], s))
			return;
	if (*n == RJ_MAX_SEEN) {
		j->overflow = true;
		return;
	}
	snprintf(set[(*n)++], 80, "%s", s);
}

static void host_seen(struct rj *j, const char *h)
{
	for (int i = 0; i < j->nhosts; i++)
		if (!strcmp(j->hosts[i], h))
			return;
	if (j->nhosts == RJ_MAX_SEEN) {
		j->overflow = true;
		return;
	}
	snprintf(j->hosts[j->nhosts++], 64, "%s", h);
}

/* A rank that answered: its state into the communicator's, as rasClientRunComms does. */
static void rank_done(struct rj *j)
{
	struct rj_rank *r = &j->r;
	char id[80];

	if (r->abort)
		j->status |= 1u << RAS_ST_ABORT;
	else if (r->finalize || r->destroy)
		j->status |= 1u << RAS_ST_FINALIZE;
	else if (r->init_state == 0)
		j->status |= 1u << RAS_ST_RUNNING;
	else
		j->status |= 1u << RAS_ST_INIT;
	/* 0 ncclSuccess, 7 ncclInProgress: anything else is an error */
	if ((r->init_state && r->init_state != 7) || (r->async_error && r->async_error != 7))
		j->flags |= 1u << RAS_FL_ERROR;
	if (!j->have_first) {
		memcpy(j->first, r->counts, sizeof(j->first));
		j->nfirst = r->ncounts;
		j->have_first = true;
	} else if (r->ncounts != j->nfirst || memcmp(r->counts, j->first, sizeof(j->first)))
		j->flags |= 1u << RAS_FL_MISMATCH;
	host_seen(j, r->host);
	snprintf(id, sizeof(id), "%s %ld", r->host, r->pid);
	seen(j, j->procs, &j->nprocs, id);
	snprintf(id, sizeof(id), "%s %ld", r->host, r->nvml_dev);
	seen(j, j->gpus, &j->ngpus, id);
}

/*
 * A rank that did not: unreachable, the communicator is incomplete; else
 * its process answered without it (it left the communicator): NOCOMM, a
 * mismatch.
 */
static void missing_done(struct rj *j)
{
	struct rj_rank *r = &j->r;
	char id[80];

	snprintf(id, sizeof(id), "%s %ld", r->host, r->pid);
	if (r->unresponsive) {
		j->flags |= 1u << RAS_FL_INCOMPLETE;
		j->v->ranks_missing++;
		seen(j, j->unresp, &j->nunresp, id);
	} else {
		j->flags |= 1u << RAS_FL_MISMATCH;
		j->status |= 1u << RAS_ST_NOCOMM;
	}
	if (r->dead)
		seen(j, j->dead, &j->ndead, id);
}

/* The communicator's state is its highest (as the text's Status column). */
static void comm_done(struct rj *j)
{
	struct ras_view *v = j->v;
	int st = RAS_ST_NOCOMM;

	for (int i = 0; i < RAS_NSTATUS; i++)
		if (j->status & (1u << i))
			st = i;
	if (__builtin_popcount(j->status) > 1)
		j->flags |= 1u << RAS_FL_MISMATCH;
	v->comms_status[st]++;
	for (int f = 0; f < RAS_NFLAGS; f++)
		if (j->flags & (1u << f))
			v->comms_flag[f]++;
	j->status = j->flags = 0;
	j->have_first = false;
}

static int value(struct rj *j, const char *key);

static int object(struct rj *j)
{
	char key[40];

	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == '}')
		return j->p++, 0;
	for (;;) {
		ws(j);
		if (string(j, key, sizeof(key)))
			return -1;
		ws(j);
		if (j->p >= j->end || *j->p++ != ':' || value(j, key))
			return -1;
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		return j->p < j->end && *j->p++ == '}' ? 0 : -1;
	}
}

static int array(struct rj *j)
{
	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == ']')
		return j->p++, 0;
	for (;;) {
		if (value(j, "[]"))
			return -1;
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		return j->p < j->end && *j->p++ == ']' ? 0 : -1;
	}
}

/* An object or array under key: the path one deeper while it is read. */
static int nested(struct rj *j, const char *key)
{
	bool obj = *j->p == '{';
	int err;

	if (j->depth == RJ_DEPTH)
		return -1;
	j->path[j->depth++] = key;
	if (obj && (at(j, 4, K_RANK) || at(j, 4, K_MISSING)))
		memset(&j->r, 0, sizeof(j->r));
	err = obj ? object(j) : array(j);
	if (!err && obj && at(j, 4, K_RANK))
		rank_done(j);
	else if (!err && obj && at(j, 4, K_MISSING))
		missing_done(j);
	else if (!err && obj && at(j, 2, K_COMM))
		comm_done(j);
	j->depth--;
	return err;
}

static int value(struct rj *j, const char *key)
{
	char val[64];
	size_t n = 0;

	ws(j);
	if (j->p >= j->end)
		return -1;
	if (*j->p == '{' || *j->p == '[')
		return nested(j, key);
	if (*j->p == '"') {
		if (string(j, val, sizeof(val)))
			return -1;
		scalar(j, key, val, true);
		return 0;
	}
	while (j->p < j->end && n + 1 < sizeof(val) && strchr("-+.eE0123456789truefalsn", *j->p))
		val[n++] = *j->p++;
	val[n] = 0;
	if (!n)
		return -1;
	scalar(j, key, val, false);
	return 0;
}

int ras_parse_json(const char *buf, size_t len, struct ras_view *v, char *why, size_t wlen)
{
	struct rj *j = calloc(1, sizeof(*j));
	int err = -1;
	int comms;

	if (!j) {
		snprintf(why, wlen, "out of memory");
		return -1;
	}
	memset(v, 0, sizeof(*v));
	j->p = buf;
	j->end = buf + len;
	j->v = v;
	ws(j);
	if (j->p >= j->end || *j->p != '{' || object(j) || (ws(j), j->p != j->end)) {
		snprintf(why, wlen, "RAS's JSON reply does not parse (at byte %zu)",
			 (size_t)(j->p - buf));
		goto cleanup;
	}
	comms = 0;
	for (int i = 0; i < RAS_NSTATUS; i++)
		comms += v->comms_status[i];
	if (comms != v->comms) {
		snprintf(why, wlen, "RAS's JSON lists %d communicators of the %d it counts", comms,
			 v->comms);
		goto cleanup;
	}
	v->json = true;
	v->nodes = j->overflow ? -1 : j->nhosts;
	v->processes = j->overflow ? -1 : j->nprocs;
	v->gpus = j->overflow ? -1 : j->ngpus;
	v->procs_missing = j->nunresp;
	v->procs_dead = j->ndead;
	err = 0;
cleanup:
	free(j);
	return err;
}
