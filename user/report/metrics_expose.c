// SPDX-License-Identifier: BSD-3-Clause
/*
 * The Prometheus text exposition format (0.0.4) of metrics.h's series:
 * one HELP and TYPE per family, then its samples, label values escaped.
 */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include "categories.h"
#include "metrics.h"

/* A label value: backslash, double quote and newline escaped. */
void metrics_put_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void put_int_label(FILE *f, const char *name, int v)
{
	if (v >= 0)
		fprintf(f, ",%s=\"%d\"", name, v);
	else
		fprintf(f, ",%s=\"unknown\"", name);
}

/*
 * name{training_job=...,rank=...,local_rank=...,world_size=...,role=...[,extra="val"]}:
 * not `job`, which is the scrape job's label in Prometheus (docs/metrics.md).
 */
/* name{the series' labels, left open for more */
static void series_labels(FILE *f, const char *name, const struct mx_series *s)
{
	fprintf(f, "%s{training_job=\"", name);
	metrics_put_value(f, s->job);
	fputc('"', f);
	put_int_label(f, "rank", s->rank);
	put_int_label(f, "local_rank", s->local_rank);
	put_int_label(f, "world_size", s->world_size);
	fprintf(f, ",role=\"%s\"", role_name(s->role));
}

void metrics_put_series(FILE *f, const char *name, const struct mx_series *s,
			const char *extra, const char *val)
{
	series_labels(f, name, s);
	if (extra)
		fprintf(f, ",%s=\"%s\"", extra, val);
	fputs("} ", f);
}

void metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static bool live(const struct mx_series *s)
{
	return s->alive_ns != 0;
}

static void times(const struct metrics *m, FILE *f)
{
	metrics_family(f, "trainbpf_time_seconds_total", "counter",
	       "Wall time of each process's main thread (a trainer's trainer thread) by "
	       "where it went (a trainer's critical path: a wait for another thread counts "
	       "as what that thread did).");
	for (int i = 0; i < m->nseries; i++)
		for (int c = 0; c < TB_NCAT && live(&m->series[i]); c++) {
			metrics_put_series(f, "trainbpf_time_seconds_total", &m->series[i], "category",
				   tb_cat_names[c]);
			fprintf(f, "%.9f\n", m->series[i].v.cat_ns[c] / 1e9);
		}
	metrics_family(f, "trainbpf_phase_seconds_total", "counter",
	       "Wall time of a trainer's trainer thread by training phase, from PyTorch's "
	       "own brackets (settled steps).");
	for (int i = 0; i < m->nseries; i++)
		/* No teardown: a daemon settles no thread's tail (docs/metrics.md). */
		for (int p = 0; p < PH_TEARDOWN && live(&m->series[i]) && m->series[i].phases; p++) {
			metrics_put_series(f, "trainbpf_phase_seconds_total", &m->series[i], "phase",
				   ph_names[p]);
			fprintf(f, "%.9f\n", m->series[i].v.phase_ns[p] / 1e9);
		}
}

/* A counter or gauge of one value per series; phases_only: trainers with phases. */
static void per_series(const struct metrics *m, FILE *f, const char *name, const char *type,
		       const char *help, bool phases_only, size_t off, bool is_double)
{
	metrics_family(f, name, type, help);
	for (int i = 0; i < m->nseries; i++) {
		const struct mx_series *s = &m->series[i];
		const char *v = (const char *)&s->v + off;

		if (!live(s) || (phases_only && !s->phases))
			continue;
		metrics_put_series(f, name, s, NULL, NULL);
		if (is_double)
			fprintf(f, "%.6f\n", *(const double *)v / 1e3);
		else
			fprintf(f, "%" PRIu64 "\n", *(const uint64_t *)v);
	}
}

#define PER(m, f, name, type, help, ph, field, dbl) \
	per_series(m, f, name, type, help, ph, offsetof(struct mx_values, field), dbl)

/* Per communicator: "unknown" made before tracing, "other" past MX_COMMS ids. */
static void comm_counts(const struct metrics *m, FILE *f)
{
	const char *name = "trainbpf_nccl_collectives_total";

	metrics_family(f, "trainbpf_nccl_collectives_total", "counter",
	       "NCCL data calls (collectives, sends, receives) entered on a communicator, by its "
	       "id: the first 8 bytes of its ncclUniqueId (a split's derived from its parent's), "
	       "the same on every rank of it. A rank whose count stops below its peers' is "
	       "behind.");
	for (int i = 0; i < m->nseries; i++) {
		const struct mx_series *s = &m->series[i];

		for (int c = 0; c <= MX_COMMS && live(s); c++) {
			const struct mx_comm *k = &s->v.comm[c];

			if (!k->calls)
				continue;
			series_labels(f, name, s);
			if (k->key == MX_COMM_UNKNOWN || k->key == MX_COMM_OTHER)
				fprintf(f, ",communicator=\"%s\"} ",
					k->key == MX_COMM_OTHER ? "other" : "unknown");
			else
				fprintf(f, ",communicator=\"%016" PRIx64 "\"} ", k->key);
			fprintf(f, "%" PRIu64 "\n", k->calls);
		}
	}
}

static void counts(const struct metrics *m, FILE *f)
{
	PER(m, f, "trainbpf_steps_total", "counter", "Training steps completed.", true,
	    steps, false);
	PER(m, f, "trainbpf_step_seconds_total", "counter",
	    "Wall time of the training steps completed (mean step time: the rate of this "
	    "over the rate of trainbpf_steps_total).", true, step_ms, true);
	PER(m, f, "trainbpf_storage_read_bytes_total", "counter",
	    "Bytes read from storage by the processes' threads.", false, rbytes, false);
	PER(m, f, "trainbpf_storage_written_bytes_total", "counter",
	    "Bytes written to storage by the processes' threads.", false, wbytes, false);
	PER(m, f, "trainbpf_cuda_syncs_total", "counter",
	    "Outermost CUDA synchronisations and blocking copies.", false, syncs, false);
	PER(m, f, "trainbpf_nccl_operations_total", "counter", "Outermost NCCL calls.",
	    false, nccl_ops, false);
	PER(m, f, "trainbpf_nccl_bytes_total", "counter",
	    "Bytes of NCCL data calls (count times the datatype's size).", false, nccl_bytes,
	    false);
	PER(m, f, "trainbpf_epochs_total", "counter",
	    "DataLoader passes completed (told when the next pass's first training step begins).",
	    true, epochs, false);
	comm_counts(m, f);
	/* Not trainbpf_step_seconds: that is the counter's family in OpenMetrics. */
	metrics_family(f, "trainbpf_last_step_seconds", "gauge",
	       "Mean wall time of the training steps completed at the last update that had any "
	       "(updates every 0.5 s).");
	for (int i = 0; i < m->nseries; i++)
		if (live(&m->series[i]) && m->series[i].phases && m->series[i].v.steps) {
			metrics_put_series(f, "trainbpf_last_step_seconds", &m->series[i], NULL, NULL);
			fprintf(f, "%.6f\n", m->series[i].step_now_ms / 1e3);
		}
	metrics_family(f, "trainbpf_job_stalled", "gauge",
	       "1 while the trainer's job is stalled: no rank of it on this node made progress "
	       "(a training step, a DataLoader fetch) for max(--stall-after, 10 median steps); "
	       "else 0.");
	for (int i = 0; i < m->nseries; i++)
		if (live(&m->series[i]) && m->series[i].role == TB_ROLE_TRAINER) {
			metrics_put_series(f, "trainbpf_job_stalled", &m->series[i], NULL, NULL);
			fprintf(f, "%d\n", m->series[i].stalled);
		}
	metrics_family(f, "trainbpf_job_stall_culprit", "gauge",
	       "1 on the series of the rank a stalled job waits for (its wait has no peer), with "
	       "the phase it is in and what it waits on; no sample otherwise.");
	for (int i = 0; i < m->nseries; i++) {
		const struct mx_series *s = &m->series[i];

		if (!live(s) || !s->stalled || s->culprit_phase < 0 || s->culprit_wait < 0)
			continue;
		series_labels(f, "trainbpf_job_stall_culprit", s);
		fprintf(f, ",phase=\"%s\",wait=\"%s\"} 1\n", ph_names[s->culprit_phase],
			tb_cat_names[s->culprit_wait & (TB_NCAT - 1)]);
	}
	metrics_family(f, "trainbpf_processes", "gauge", "Live processes watched.");
	for (int i = 0; i < m->nseries; i++)
		if (live(&m->series[i])) {
			metrics_put_series(f, "trainbpf_processes", &m->series[i], NULL, NULL);
			fprintf(f, "%d\n", m->series[i].live);
		}
}

static void findings(const struct metrics *m, FILE *f)
{
	metrics_family(f, "trainbpf_finding", "gauge",
	       "A finding of trainbpf's diagnosis (docs/model.md) for the job's processes on this "
	       "node, over their time since the daemon found them: its severity, 0 to 1; no "
	       "sample: not found.");
	for (int i = 0; i < m->njobs; i++)
		for (int k = 0; k < DG_NIDS; k++) {
			if (m->jobs[i].severity[k] < 0)
				continue;
			fputs("trainbpf_finding{training_job=\"", f);
			metrics_put_value(f, m->jobs[i].job);
			fprintf(f, "\",finding=\"%s\"} %.3f\n", diag_id_name(k),
				m->jobs[i].severity[k]);
		}
}

static void self(const struct metrics *m, const struct mx_self *s, FILE *f)
{
	metrics_family(f, "trainbpf_events_lost_total", "counter",
	       "BPF events lost: the ring buffer was full (phases, steps, lifecycle).");
	fprintf(f, "trainbpf_events_lost_total %" PRIu64 "\n", s->events_lost);
	metrics_family(f, "trainbpf_threads_untraced_total", "counter",
	       "Threads not traced: no slot was free (--max-threads), or their process held its "
	       "share (an eighth); their time is in no series.");
	fprintf(f, "trainbpf_threads_untraced_total %" PRIu64 "\n", s->threads_untraced);
	metrics_family(f, "trainbpf_libraries_not_probed_total", "counter",
	       "Library mappings not probed: owned by another user than the process's or root, "
	       "writable by others, past 32 in one process, or past 256 kept of one owner's.");
	fprintf(f, "trainbpf_libraries_not_probed_total %" PRIu64 "\n", s->libraries_refused);
	metrics_family(f, "trainbpf_series_dropped_total", "counter",
	       "Label sets not kept as their own: past a user's bound (to its overflow series) "
	       "or the node's (dropped).");
	fprintf(f, "trainbpf_series_dropped_total %" PRIu64 "\n", m->series_dropped);
	metrics_family(f, "trainbpf_traced_processes", "gauge", "Processes traced now, all jobs.");
	fprintf(f, "trainbpf_traced_processes %" PRIu64 "\n", s->processes);
	metrics_family(f, "process_cpu_seconds_total", "counter",
	       "CPU time of trainbpf itself, user and system.");
	fprintf(f, "process_cpu_seconds_total %.6f\n", s->cpu_s);
	metrics_family(f, "process_resident_memory_bytes", "gauge", "Resident memory of trainbpf.");
	fprintf(f, "process_resident_memory_bytes %" PRIu64 "\n", s->rss_bytes);
	metrics_family(f, "process_start_time_seconds", "gauge", "When trainbpf started (Unix time).");
	fprintf(f, "process_start_time_seconds %.3f\n", s->start_unix);
	metrics_family(f, "trainbpf_build_info", "gauge", "The version running.");
	fprintf(f, "trainbpf_build_info{version=\"%s\"} 1\n", TB_VERSION);
}

void metrics_write(const struct metrics *m, const struct mx_self *s, FILE *f)
{
	times(m, f);
	counts(m, f);
	findings(m, f);
	self(m, s, f);
}
