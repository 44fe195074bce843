// SPDX-License-Identifier: BSD-3-Clause
/*
 * What is written at the end (GPU call counts, the diagnosis, the meta
 * that marks a recording complete), and the counters, which every flush
 * rewrites so that a cut recording still says what was lost.
 */
#include <inttypes.h>
#include <stdio.h>
#include "diagnosis.h"
#include "phases.h"
#include "gpu.h"
#include "record.h"
#include "session.h"
#include "stall.h"
#include "steps.h"

static int counter(struct recorder *r, const char *key, uint64_t v)
{
	rec_bind_text(r, RS_COUNTER, 1, key);
	rec_bind_int(r, RS_COUNTER, 2, (int64_t)v);
	return rec_step(r, RS_COUNTER);
}

/* Same keys as the JSON report's counters, plus what recording cost. */
int record_counters(struct recorder *r, const struct job *job,
		    const struct tb_counters *bpf)
{
	struct run_counters c;

	job_counters(job, bpf, &c);
	counter(r, "events_lost", c.bpf.events_lost);
	counter(r, "io_bytes_read", c.io_rbytes);
	counter(r, "io_bytes_written", c.io_wbytes);
	counter(r, "context_switches", c.switches);
	counter(r, "threads_untraced", c.bpf.slots_exhausted + c.bpf.storage_failed);
	counter(r, "sched_events_missed", c.bpf.sched_missed);
	counter(r, "gpu_stats_full", c.bpf.api_stats_full);
	counter(r, "gpu_probe_preempted", c.bpf.api_preempted);
	counter(r, "states_lost", c.bpf.states_lost);
	counter(r, "brackets_deep", c.bpf.brackets_deep);
	counter(r, "states_dropped", r->states_dropped);
	counter(r, "phase_events_dropped", r->ph_dropped);
	counter(r, "scopes_dropped", r->sc_dropped);
	counter(r, "states_rows", r->states_rows);
	counter(r, "record_flushes", r->flushes);
	counter(r, "record_sample_rows", r->rows);
	counter(r, "record_flush_max_ns", r->flush_ns_max);
	return counter(r, "record_flush_total_ns", r->flush_ns_sum);
}

static void stall_row(struct recorder *r, const struct stall_job *j, const struct stall_rank *k)
{
	rec_bind_int(r, RS_STALL, 1, (int64_t)j->since);
	rec_bind_int(r, RS_STALL, 2, (int64_t)j->now);
	rec_bind_int(r, RS_STALL, 3, (int64_t)j->threshold_ns);
	rec_bind_int(r, RS_STALL, 4, k->culprit);
	rec_bind_int(r, RS_STALL, 5, k->pid);
	rec_bind_int(r, RS_STALL, 6, k->rank);
	rec_bind_int(r, RS_STALL, 7, k->phase);
	rec_bind_int(r, RS_STALL, 8, k->wait);
	rec_bind_int(r, RS_STALL, 9, (int64_t)k->wait_ns);
	rec_bind_int(r, RS_STALL, 10, k->cat);
	rec_bind_int(r, RS_STALL, 11, (int64_t)k->cat_ns);
	rec_bind_int(r, RS_STALL, 12, k->api);
	rec_bind_int(r, RS_STALL, 13, k->in_api);
	rec_bind_int(r, RS_STALL, 14, k->worker);
	rec_bind_int(r, RS_STALL, 15, k->worker_state);
	rec_bind_int(r, RS_STALL, 16, k->worker_wait);
	rec_bind_int(r, RS_STALL, 17, (int64_t)k->worker_ns);
	rec_bind_int(r, RS_STALL, 18, (int64_t)k->behind);
	if (k->behind_comm) {
		char hex[17];

		snprintf(hex, sizeof(hex), "%016" PRIx64, k->behind_comm);
		rec_bind_text(r, RS_STALL, 19, hex);
	} else {
		rec_bind_null(r, RS_STALL, 19);
	}
	if (k->object[0])
		rec_bind_text(r, RS_STALL, 20, k->object);
	else
		rec_bind_null(r, RS_STALL, 20);
	rec_bind_int(r, RS_STALL, 21, (int64_t)k->api_bytes);
	rec_step(r, RS_STALL);
}

/*
 * Rewritten at every flush, so that a run that ends stalled (Ctrl-C on a
 * hung job, the common end) or is cut keeps what the live view said last:
 * its ranks, culprit first.
 */
int record_stall(struct recorder *r, const struct session *ses)
{
	const struct stall *st = ses_stall(ses);
	const struct stall_job *j = st ? stall_any(st) : NULL;

	if (rec_exec(r, "DELETE FROM stall", "write"))
		return -1;
	for (int i = 0; j && i < j->nranks && !r->failed; i++)
		stall_row(r, j, &j->ranks[i]);
	return r->failed ? -1 : 0;
}

static int write_gpu_calls(struct recorder *r, const struct gpu *g)
{
	for (int i = 0; g && i < g->nprocs && !r->failed; i++) {
		const struct gpu_proc *p = &g->procs[i];

		for (int a = 0; a < probe_nfns && !r->failed; a++) {
			const struct tb_api_stat *s = &p->stat[a];

			if (!s->calls && !s->nested)
				continue;
			rec_bind_int(r, RS_GPU, 1, p->pid);
			rec_bind_text(r, RS_GPU, 2, probe_fns[a].name);
			rec_bind_text(r, RS_GPU, 3, probe_kind_names[probe_fns[a].kind]);
			rec_bind_int(r, RS_GPU, 4, s->calls);
			rec_bind_int(r, RS_GPU, 5, s->nested);
			rec_bind_int(r, RS_GPU, 6, s->bytes);
			rec_bind_int(r, RS_GPU, 7, s->ns);
			rec_bind_int(r, RS_GPU, 8, i);
			rec_step(r, RS_GPU);
		}
	}
	return r->failed ? -1 : 0;
}

static int write_findings(struct recorder *r, const struct epoch *e,
			  const struct dg_finding *fs, int n)
{
	for (int i = 0; i < n && !r->failed; i++) {
		if (e)
			rec_bind_int(r, RS_DIAG, 1, e->label);
		rec_bind_text(r, RS_DIAG, 2, diag_id_name(fs[i].id));
		rec_bind_double(r, RS_DIAG, 3, fs[i].severity);
		rec_bind_double(r, RS_DIAG, 4, fs[i].value);
		rec_bind_double(r, RS_DIAG, 5, fs[i].threshold);
		if (fs[i].pid)
			rec_bind_int(r, RS_DIAG, 6, fs[i].pid);
		rec_bind_text(r, RS_DIAG, 7, fs[i].summary);
		rec_bind_text(r, RS_DIAG, 8, fs[i].evidence);
		rec_bind_text(r, RS_DIAG, 9, fs[i].advice);
		rec_bind_double(r, RS_DIAG, 10, fs[i].cost);
		rec_step(r, RS_DIAG);
	}
	return r->failed ? -1 : 0;
}

/* One window: the run (e NULL) or an epoch of the source the reports use. */
static int diagnose(struct recorder *r, const struct session *ses, const struct epoch *e,
		    uint64_t now)
{
	struct dg_finding fs[DG_MAX_FINDINGS];
	struct dg_view v;
	int n, err = e ? diag_view_epoch(&v, ses, e) : diag_view_run(&v, ses, now);

	if (err)
		return 0;	/* no view, no findings: as the reports do */
	n = diag_run(&v, fs, DG_MAX_FINDINGS);
	diag_view_free(&v);
	return write_findings(r, e, fs, n);
}

static int write_diagnosis(struct recorder *r, const struct session *ses, uint64_t now)
{
	enum ep_source s = epochs_source(&ses->ep);
	const struct ep_stream *st = s == EP_NSRC ? NULL : &ses->ep.src[s];

	diagnose(r, ses, NULL, now);
	for (int i = 0; st && i < st->n && !r->failed; i++)
		diagnose(r, ses, &st->list[i], now);
	return r->failed ? -1 : 0;
}

/* Its setup and teardown rows (schema 8): parts of its other row, named apart. */
static void write_ends(struct recorder *r, const struct proc_rec *p, const struct thread_rec *t)
{
	for (int e = 0; e < 2 && !r->failed; e++) {
		if (!sum_cats(t->ends[e]))
			continue;
		rec_bind_int(r, RS_PHASE_TIME, 1, t->tid);
		rec_bind_int(r, RS_PHASE_TIME, 2, p->pid);
		rec_bind_int(r, RS_PHASE_TIME, 3, t->start_ns);
		rec_bind_text(r, RS_PHASE_TIME, 4, ph_names[PH_SETUP + e]);
		for (int c = 0; c < TB_NCAT; c++)
			rec_bind_int(r, RS_PHASE_TIME, 5 + c, t->ends[e][c]);
		rec_bind_int(r, RS_PHASE_TIME, 5 + TB_NCAT, 0);
		rec_step(r, RS_PHASE_TIME);
	}
}

/* Each thread's critical-path time per phase (BPF's, pending rows too). */
static void write_phase_times(struct recorder *r, const struct job *job)
{
	for (int i = 0; i < job->nprocs && !r->failed; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads && !r->failed; j++) {
			const struct thread_rec *t = &p->threads[j];

			for (int ph = 0; ph < TB_NPHASE && !r->failed; ph++) {
				if (!sum_cats(t->ph[ph]))
					continue;
				rec_bind_int(r, RS_PHASE_TIME, 1, t->tid);
				rec_bind_int(r, RS_PHASE_TIME, 2, p->pid);
				rec_bind_int(r, RS_PHASE_TIME, 3, t->start_ns);
				rec_bind_text(r, RS_PHASE_TIME, 4, tb_phase_names[ph]);
				for (int c = 0; c < TB_NCAT; c++)
					rec_bind_int(r, RS_PHASE_TIME, 5 + c, t->ph[ph][c]);
				rec_bind_int(r, RS_PHASE_TIME, 5 + TB_NCAT, t->wio[ph]);
				rec_step(r, RS_PHASE_TIME);
			}
			write_ends(r, p, t);
		}
	}
}

/* Its wall time in shown phase p: other's with its lead at an attach, its ends'. */
static uint64_t wall_ns(const struct ph_thread *t, int p)
{
	if (p >= PH_NLOOP)
		return t->ends_ns[p - PH_NLOOP];
	return t->tot[p] + (p == PH_OTHER ? t->lead_ns : 0);
}

/* Each thread's steps and wall time per phase, as the phase events gave them. */
static void write_phase_steps(struct recorder *r, const struct phases *ph)
{
	for (int i = 0; i < ph->nth && !r->failed; i++) {
		const struct ph_thread *t = &ph->th[i];

		for (int p = 0; p < PH_NSHOWN && !r->failed; p++) {
			rec_bind_int(r, RS_PHASE_STEP, 1, t->tid);
			rec_bind_int(r, RS_PHASE_STEP, 2, t->pid);
			rec_bind_int(r, RS_PHASE_STEP, 3, t->steps.steps);
			rec_bind_double(r, RS_PHASE_STEP, 4, t->steps.step_ms);
			rec_bind_int(r, RS_PHASE_STEP, 5, t->sp.pend_ns[PH_PEND_DATA]);
			rec_bind_int(r, RS_PHASE_STEP, 6, t->sp.pend_ns[PH_PEND_FWD]);
			rec_bind_int(r, RS_PHASE_STEP, 7, t->sp.pend_ns[PH_PEND_HELD]);
			rec_bind_text(r, RS_PHASE_STEP, 8, ph_names[p]);
			rec_bind_int(r, RS_PHASE_STEP, 9, wall_ns(t, p));
			rec_bind_double(r, RS_PHASE_STEP, 10, t->steps.total_ms[p]);
			rec_bind_double(r, RS_PHASE_STEP, 11, t->steps.min_ms[p]);
			rec_bind_double(r, RS_PHASE_STEP, 12, t->steps.max_ms[p]);
			rec_bind_double(r, RS_PHASE_STEP, 13, t->steps.sum_sq[p]);
			rec_bind_int(r, RS_PHASE_STEP, 14, t->fetches);
			rec_bind_int(r, RS_PHASE_STEP, 15, t->sp.in_val);
			rec_bind_int(r, RS_PHASE_STEP, 16, t->startup);
			rec_bind_int(r, RS_PHASE_STEP, 17, t->sp.pend_ns[PH_PEND_START]);
			rec_bind_int(r, RS_PHASE_STEP, 18, t->sp.pend_ns[PH_PEND_SHELD]);
			/* Schema 11: its optimizer steps (phases.h). */
			rec_bind_int(r, RS_PHASE_STEP, 19, t->osteps.steps);
			rec_bind_double(r, RS_PHASE_STEP, 20, t->osteps.step_ms);
			rec_bind_int(r, RS_PHASE_STEP, 21, t->omicro);
			rec_bind_double(r, RS_PHASE_STEP, 22, t->osteps.total_ms[p]);
			rec_bind_double(r, RS_PHASE_STEP, 23, t->osteps.min_ms[p]);
			rec_bind_double(r, RS_PHASE_STEP, 24, t->osteps.max_ms[p]);
			rec_bind_double(r, RS_PHASE_STEP, 25, t->osteps.sum_sq[p]);
			rec_step(r, RS_PHASE_STEP);
		}
	}
}

static int write_end_meta(struct recorder *r, const struct session *ses, uint64_t now)
{
	const struct epochs *ep = &ses->ep;
	const struct phases *ph = ses_phases(ses);
	enum ep_source s = epochs_source(ep);
	char buf[32];

	if (ph) {
		rec_meta(r, "phases_source", ph_source_names[ph->source]);
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ph->threads_over);
		rec_meta(r, "phase_threads_over", buf);
	}
	rec_meta(r, "epoch_source", s == EP_NSRC ? "none" : epochs_source_name(s));
	rec_meta(r, "epochs_pass_ended", ep->pass_ended ? "1" : "0");
	/* Schema 11: where the loop's last step ended (epochs.h), 0 if pending. */
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ep->loop.done);
	rec_meta(r, "steps_loop_done_ns", buf);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ep->optim.done);
	rec_meta(r, "steps_optim_done_ns", buf);
	rec_meta(r, "steps_optim_multi", ep->optim_multi ? "1" : "0");
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)now);
	rec_meta(r, "end_mono_ns", buf);
	return rec_meta(r, "complete", "1");
}

/* One family of an object a process mapped: what the JSON report says of it. */
static void write_gpu_library(struct recorder *r, const struct gpu *g, int i,
			      const struct gpu_mapping *m, enum probe_family f)
{
	const struct gpu_object *o = &g->objs[m->obj];
	char missing[2048];

	gpu_missing(o, f, missing, sizeof(missing));
	rec_bind_int(r, RS_GPU_LIB, 1, g->procs[i].pid);
	rec_bind_text(r, RS_GPU_LIB, 2, probe_family_names[f]);
	rec_bind_text(r, RS_GPU_LIB, 3, o->path);
	rec_bind_text(r, RS_GPU_LIB, 4, o->version[f]);
	rec_bind_int(r, RS_GPU_LIB, 5, o->is_static[f]);
	rec_bind_int(r, RS_GPU_LIB, 6, i);
	rec_bind_int(r, RS_GPU_LIB, 7, m->obj);
	rec_bind_int(r, RS_GPU_LIB, 8, m->probes[f]);
	rec_bind_text(r, RS_GPU_LIB, 9, missing);
	rec_step(r, RS_GPU_LIB);
}

/* The CUDA/NCCL files each process mapped, as the live report lists them. */
static void write_gpu_libraries(struct recorder *r, const struct gpu *g)
{
	for (int i = 0; i < g->nprocs && !r->failed; i++)
		for (int m = 0; m < g->procs[i].nmaps && !r->failed; m++) {
			const struct gpu_mapping *map = &g->procs[i].maps[m];

			for (int f = 0; f < LIB_PYTHON && !r->failed; f++)	/* not the interpreter */
				if (g->objs[map->obj].families & (1u << f))
					write_gpu_library(r, g, i, map, f);
		}
}

/*
 * The GPU side's entries in the live tool's order (a pid that exits and
 * comes back has two): gpu_calls, gpu_libraries and nccl_comms name them.
 */
static void write_gpu_procs(struct recorder *r, const struct gpu *g)
{
	for (int i = 0; i < g->nprocs && !r->failed; i++) {
		rec_bind_int(r, RS_GPU_PROC, 1, i);
		rec_bind_int(r, RS_GPU_PROC, 2, g->procs[i].pid);
		rec_bind_int(r, RS_GPU_PROC, 3, g->procs[i].exited);
		rec_step(r, RS_GPU_PROC);
	}
}

static void write_comm(struct recorder *r, int i, pid_t pid, const struct gpu_comm *k)
{
	char id[2 * sizeof(k->id) + 1];

	for (size_t b = 0; b < sizeof(k->id); b++)
		sprintf(id + 2 * b, "%02x", k->id[b]);
	rec_bind_int(r, RS_COMM, 1, i);
	rec_bind_int(r, RS_COMM, 2, pid);
	rec_bind_int(r, RS_COMM, 3, (int64_t)k->comm);
	rec_bind_int(r, RS_COMM, 4, (int64_t)k->parent);
	rec_bind_int(r, RS_COMM, 5, k->rank);
	rec_bind_int(r, RS_COMM, 6, k->nranks);
	rec_bind_text(r, RS_COMM, 7, id);
	if (k->api >= 0)
		rec_bind_text(r, RS_COMM, 8, probe_fns[k->api].name);
	else
		rec_bind_null(r, RS_COMM, 8);	/* made before tracing */
	rec_bind_int(r, RS_COMM, 9, k->destroyed);
	rec_bind_int(r, RS_COMM, 10, (int64_t)k->calls);
	rec_bind_int(r, RS_COMM, 11, (int64_t)k->bytes);
	rec_bind_int(r, RS_COMM, 12, k->color);
	rec_step(r, RS_COMM);
}

/* NCCL communicators, as made (and whether destroyed by the end). */
static void write_comms(struct recorder *r, const struct gpu *g)
{
	for (int i = 0; i < g->nprocs && !r->failed; i++)
		for (int c = 0; c < g->procs[i].ncomms && !r->failed; c++)
			write_comm(r, i, g->procs[i].pid, &g->procs[i].comms[c]);
	if (!r->failed)
		counter(r, "nccl_comms_not_listed", g->comms_dropped);
}

/* Sync entries (syncs per step), known in full only at the end like the steps. */
static void write_syncs(struct recorder *r, const struct steps *st)
{
	for (int i = 0; st && i < st->npr && !r->failed; i++)
		for (int k = 0; k < st->pr[i].nsyncs && !r->failed; k++) {
			rec_bind_int(r, RS_SYNC, 1, st->pr[i].pid);
			rec_bind_int(r, RS_SYNC, 2, st->pr[i].syncs[k]);
			rec_step(r, RS_SYNC);
		}
}

static void write_worker_gens(struct recorder *r, const struct epochs *ep)
{
	for (int i = 0; i < ep->ngens && !r->failed; i++) {
		const struct ep_worker_gen *g = &ep->gens[i];

		rec_bind_int(r, RS_GEN, 1, g->parent);
		rec_bind_int(r, RS_GEN, 2, g->fork_ts);
		rec_bind_int(r, RS_GEN, 3, g->nworkers);
		rec_bind_int(r, RS_GEN, 4, g->epoch);
		if (g->stall_s < 0)
			rec_bind_null(r, RS_GEN, 5);
		else
			rec_bind_double(r, RS_GEN, 5, g->stall_s);
		rec_bind_double(r, RS_GEN, 6, g->stall_err_s);
		rec_step(r, RS_GEN);
	}
}

int record_final(struct recorder *r, const struct session *ses, uint64_t now)
{
	record_call_steps(r, &ses->steps);
	write_syncs(r, &ses->steps);
	write_worker_gens(r, &ses->ep);
	write_gpu_procs(r, &ses->gpu);
	write_gpu_calls(r, &ses->gpu);
	write_gpu_libraries(r, &ses->gpu);
	write_comms(r, &ses->gpu);
	if (ses_phases(ses)) {
		write_phase_times(r, &ses->job);
		write_phase_steps(r, &ses->phases);
	}
	write_diagnosis(r, ses, now);
	return write_end_meta(r, ses, now);
}
