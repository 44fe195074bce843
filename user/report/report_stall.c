// SPDX-License-Identifier: BSD-3-Clause
/*
 * A stalled job (stall.h) in every output: the STALLED line and a row per
 * rank, culprit first, on top of the live view and of the final report
 * when the run ended stalled; the "stall" member of the JSON report.
 */
#include <inttypes.h>
#include "probe_table.h"
#include "phase_spans.h"
#include "sections.h"
#include "stall.h"

/* The stalled job to show; NULL when none is. */
static const struct stall_job *stalled(const struct session *ses)
{
	return ses->stall_on ? stall_any(&ses->stall) : NULL;
}

static void who(FILE *f, const struct stall_rank *r)
{
	if (r->rank >= 0)
		fprintf(f, "rank %d (pid %d)", r->rank, r->pid);
	else
		fprintf(f, "pid %d", r->pid);
}

/* "in data, waiting in data_wait 12.4 s on DataLoader worker 1240 (sleeping 12.3 s)" */
static void wait_words(FILE *f, const struct stall_rank *r)
{
	fprintf(f, "in %s, waiting in %s %.1f s", ph_names[ph_shown_of(r->phase)],
		tb_cat_names[r->wait], r->wait_ns / 1e9);
	if (r->in_api && r->api < probe_nfns)
		fprintf(f, " inside %s", probe_fns[r->api].name);
	if (r->in_api && r->api_bytes) {
		char b[32];

		fmt_bytes(b, sizeof(b), r->api_bytes);
		fprintf(f, " (%s)", b);
	}
	if (r->object[0]) {
		char path[ESC_LEN(STALL_OBJECT_LEN)];

		fprintf(f, " on %s", report_esc(path, sizeof(path), r->object));
	}
	if (r->worker)
		fprintf(f, " on DataLoader worker %d (%s %.1f s)", r->worker,
			stall_state_words(r->worker_state, r->worker_wait), r->worker_ns / 1e9);
	if (r->behind)
		fprintf(f, ", %" PRIu64 " NCCL call%s behind on communicator %016" PRIx64,
			r->behind, r->behind == 1 ? "" : "s", r->behind_comm);
}

void report_stall_text(FILE *f, const struct session *ses)
{
	const struct stall_job *j = stalled(ses);

	if (!j)
		return;
	fprintf(f, "STALLED for %.1f s (no step or batch for more than %.1f s): ",
		(j->now - j->since) / 1e9, j->threshold_ns / 1e9);
	if (j->culprit) {
		fprintf(f, "culprit ");
		who(f, &j->ranks[0]);
		fprintf(f, " ");
		wait_words(f, &j->ranks[0]);
	} else {
		fprintf(f, "no culprit told: every rank waits in a collective");
	}
	fputc('\n', f);
	for (int i = 0; i < j->nranks; i++) {
		const struct stall_rank *r = &j->ranks[i];

		fprintf(f, "  %s", r->culprit ? "* " : "  ");
		who(f, r);
		fputc(' ', f);
		wait_words(f, r);
		fprintf(f, "; since the stall mostly %s %.1f s\n", tb_cat_names[r->cat],
			r->cat_ns / 1e9);
	}
}

static void json_rank(struct jw *w, const struct stall_rank *r)
{
	jw_object(w);
	jw_int_field(w, "rank", r->rank);
	jw_int_field(w, "pid", r->pid);
	jw_bool_field(w, "culprit", r->culprit);
	jw_string_field(w, "phase", ph_names[ph_shown_of(r->phase)]);
	jw_string_field(w, "waits_in", tb_cat_names[r->wait]);
	jw_float_field(w, "wait_s", r->wait_ns / 1e9, 3);
	if (r->in_api && r->api < probe_nfns)
		jw_string_field(w, "inside", probe_fns[r->api].name);
	else
		jw_null_field(w, "inside");
	if (r->in_api && r->api_bytes)
		jw_uint_field(w, "inside_bytes", r->api_bytes);
	else
		jw_null_field(w, "inside_bytes");
	jw_name(w, "worker");
	if (r->worker) {
		jw_object(w);
		jw_int_field(w, "pid", r->worker);
		jw_string_field(w, "state", stall_state_words(r->worker_state, r->worker_wait));
		jw_float_field(w, "for_s", r->worker_ns / 1e9, 3);
		jw_end_object(w);
	} else {
		jw_null(w);
	}
	if (r->object[0])
		jw_string_field(w, "object", r->object);
	else
		jw_null_field(w, "object");
	jw_name(w, "behind");
	if (r->behind) {
		char hex[17];

		snprintf(hex, sizeof(hex), "%016" PRIx64, r->behind_comm);
		jw_object(w);
		jw_string_field(w, "communicator", hex);
		jw_uint_field(w, "nccl_calls", r->behind);
		jw_end_object(w);
	} else {
		jw_null(w);
	}
	jw_string_field(w, "since_stall_category", tb_cat_names[r->cat]);
	jw_float_field(w, "since_stall_s", r->cat_ns / 1e9, 3);
	jw_end_object(w);
}

void report_stall_json(struct jw *w, const struct session *ses)
{
	const struct job *job = &ses->job;
	const struct stall_job *j = stalled(ses);

	if (!j)
		return;
	jw_name(w, "stall");
	jw_object(w);
	jw_float_field(w, "since_s", (j->since - job->window_start_ns) / 1e9, 3);
	jw_float_field(w, "for_s", (j->now - j->since) / 1e9, 3);
	jw_float_field(w, "threshold_s", j->threshold_ns / 1e9, 3);
	if (j->culprit)
		jw_int_field(w, "culprit_pid", j->ranks[0].pid);
	else
		jw_null_field(w, "culprit_pid");
	jw_name(w, "ranks");
	jw_array(w);
	for (int i = 0; i < j->nranks; i++)
		json_rank(w, &j->ranks[i]);
	jw_end_array(w);
	jw_end_object(w);
}
