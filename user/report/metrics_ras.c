// SPDX-License-Identifier: BSD-3-Clause
/*
 * `trainbpf serve`'s NCCL RAS series (docs/metrics.md): per training job,
 * whether its RAS was read and, when it was, the job-wide view it gave
 * (every node's daemon that traces a rank of the job says the same: take
 * max by training_job). Labels: training_job, and a bounded status, flag
 * or reason; gauges all, as of the last query.
 */
#include <stddef.h>
#include <stdio.h>
#include "metrics.h"
#include "nccl_ras.h"

static void put_job(FILE *f, const char *name, const char *job)
{
	fprintf(f, "%s{training_job=\"", name);
	metrics_put_value(f, job);
	fputc('"', f);
}

/* Gauges all: a view as of the last query. */
static void family(FILE *f, const char *name, const char *help)
{
	metrics_family(f, name, "gauge", help);
}

/* One gauge per job read; off: the value's offset in the view; -1 values (not said) left out. */
static void per_job(const struct ras_report *r, int n, FILE *f, const char *name,
		    const char *help, size_t off)
{
	family(f, name, help);
	for (int i = 0; i < n; i++) {
		int v = *(const int *)((const char *)&r[i].v + off);

		if (r[i].result != RAS_OK || v < 0)
			continue;
		put_job(f, name, r[i].job);
		fprintf(f, "} %d\n", v);
	}
}

static void up(const struct ras_report *r, int n, FILE *f)
{
	family(f, "trainbpf_nccl_ras_up",
	       "1 if the job's NCCL RAS service answered the last query, else 0.");
	for (int i = 0; i < n; i++) {
		put_job(f, "trainbpf_nccl_ras_up", r[i].job);
		fprintf(f, "} %d\n", r[i].result == RAS_OK);
	}
	family(f, "trainbpf_nccl_ras_down_reason",
	       "Why the job's NCCL RAS was not read (the log says more), 1 for that reason.");
	for (int i = 0; i < n; i++)
		if (r[i].result != RAS_OK) {
			put_job(f, "trainbpf_nccl_ras_down_reason", r[i].job);
			fprintf(f, ",reason=\"%s\"} 1\n", ras_result_names[r[i].result]);
		}
}

static void comms(const struct ras_report *r, int n, FILE *f)
{
	family(f, "trainbpf_nccl_ras_communicators",
	       "The job's NCCL communicators, all nodes, by state (a mix of states: the highest).");
	for (int i = 0; i < n; i++)
		for (int s = 0; s < RAS_NSTATUS && r[i].result == RAS_OK; s++) {
			put_job(f, "trainbpf_nccl_ras_communicators", r[i].job);
			fprintf(f, ",status=\"%s\"} %d\n", ras_status_names[s], r[i].v.comms_status[s]);
		}
	family(f, "trainbpf_nccl_ras_communicators_flagged",
	       "The job's NCCL communicators RAS flags: incomplete (ranks gave no data), "
	       "mismatch (ranks disagree on state or collective counts), error.");
	for (int i = 0; i < n; i++)
		for (int k = 0; k < RAS_NFLAGS && r[i].result == RAS_OK; k++) {
			put_job(f, "trainbpf_nccl_ras_communicators_flagged", r[i].job);
			fprintf(f, ",flag=\"%s\"} %d\n", ras_flag_names[k], r[i].v.comms_flag[k]);
		}
}

void metrics_ras_write(const struct ras_report *r, int n, FILE *f)
{
	if (!n)
		return;
	up(r, n, f);
	per_job(r, n, f, "trainbpf_nccl_ras_nodes", "Nodes of the job RAS knows of.",
		offsetof(struct ras_view, nodes));
	per_job(r, n, f, "trainbpf_nccl_ras_processes", "NCCL processes of the job RAS knows of.",
		offsetof(struct ras_view, processes));
	per_job(r, n, f, "trainbpf_nccl_ras_gpus", "GPUs of the job RAS knows of.",
		offsetof(struct ras_view, gpus));
	comms(r, n, f);
	per_job(r, n, f, "trainbpf_nccl_ras_ranks_missing",
		"Communicator ranks that gave RAS no data (unreachable), summed over communicators.",
		offsetof(struct ras_view, ranks_missing));
	per_job(r, n, f, "trainbpf_nccl_ras_processes_missing",
		"Job processes that gave RAS no communicator data at the last query.",
		offsetof(struct ras_view, procs_missing));
	per_job(r, n, f, "trainbpf_nccl_ras_processes_dead",
		"Job processes RAS declared dead (unreachable for 60 s).",
		offsetof(struct ras_view, procs_dead));
	per_job(r, n, f, "trainbpf_nccl_ras_timeouts",
		"Timeouts RAS met gathering the last reply.", offsetof(struct ras_view, timeouts));
}
