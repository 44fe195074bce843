// SPDX-License-Identifier: BSD-3-Clause
/*
 * A fixed model printed through every output the live tool has: the live
 * table (with its GPU and steps lines), live epoch blocks, --step-blocks,
 * and the final text, JSON and CSV reports. Nothing here is measured: the
 * job's totals grow by fixed amounts per tick, epochs and steps come from
 * marker events (or from CUDA call events, "calls"), the GPU side is built
 * by hand. tests/golden/check.sh compares the output with the file made
 * before user/ was restructured: the restructure may move code, not bytes.
 * "phases" adds libtorch and the phase events of a training loop with a
 * validation pass (the phase table's bytes).
 *
 * Usage: render markers|calls|phases [FORMAT|summary]
 * With FORMAT (text, json, csv, html), only the final report in it, through
 * report_write: the HTML page's golden, and its test's JSON to compare with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "job.h"
#include "live.h"
#include "phases.h"
#include "report.h"
#include "report_write.h"
#include "session.h"
#include "steps.h"
#include "cli_read.h"

#define MS 1000000ull
#define W0 (1000 * 1000 * MS)	/* the window's start, CLOCK_MONOTONIC */
#define TICK (200 * MS)
#define TICKS 40

struct scene {
	struct session ses;
	struct { pid_t pid; uint64_t end; } dies[8];
	int ndies;
	bool calls, phases;
};

static void add_cat(struct thread_rec *t, int cat, uint64_t own, uint64_t cp)
{
	t->own[cat] += own;
	t->cp[cat] += cp;
}

static void build_job(struct scene *s)
{
	struct proc_rec *p;
	struct thread_rec *t;

	s->ses.job.window_start_ns = W0;
	s->ses.job.window_start_unix = 1700000000.25;
	p = job_add_proc(&s->ses.job, 10, 1, "launcher", W0);
	p->root = true;
	p->flags = 0;
	job_add_thread(p, 10, "launcher", W0);
	p = job_add_proc(&s->ses.job, 100, 10, "python3", W0);
	p->flags = TB_PF_FORKED | TB_PF_EXECED;
	job_add_thread(p, 100, "python3", W0);
	t = job_add_thread(p, 101, "pt_autograd_0", W0 + 50 * MS);
	t->io_rbytes = 4096;
	p = job_add_proc(&s->ses.job, 110, 10, "q\"odd\\comm\n", W0 + 100 * MS);
	p->flags = TB_PF_FORKED | TB_PF_EXECED;
	job_add_thread(p, 110, "q\"odd\\comm\n", W0 + 100 * MS);
}

/* The trainer's critical path by phase, as BPF would split a tick's. */
static void phase_rows(struct thread_rec *t, bool data_bound)
{
	t->ph[TB_PH_DATA][TB_DATA_WAIT] += data_bound ? 80 * MS : 30 * MS;
	t->ph[TB_PH_FORWARD][TB_CPU] += 40 * MS;
	t->ph[TB_PH_BACKWARD][TB_CPU] += 40 * MS;
	t->ph[TB_PH_BACKWARD][TB_GPU_WAIT] += data_bound ? 0 : 50 * MS;
	t->ph[TB_PH_OPTIMIZER][TB_CPU] += 10 * MS;
	t->ph[TB_PH_OPTIMIZER][TB_COMM] += 10 * MS;
	t->ph[TB_PH_OTHER][TB_RUNQUEUE] += 20 * MS;
}

/* Each tick: the trainers compute, wait for data and talk; helpers sleep. */
static void grow_job(struct scene *s, int tick)
{
	struct job *job = &s->ses.job;
	bool data_bound = tick >= TICKS / 2;

	for (int i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads; j++) {
			struct thread_rec *t = &p->threads[j];

			if (t->end_ns)
				continue;
			t->nswitch += 7 + j;
			if (p->pid == 10) {
				add_cat(t, TB_IDLE, TICK, TICK);
			} else if (p->pid == 100 && t->tid == 100) {
				add_cat(t, TB_CPU, 90 * MS, 90 * MS);
				add_cat(t, TB_DATA_WAIT, data_bound ? 80 * MS : 30 * MS,
					data_bound ? 80 * MS : 30 * MS);
				add_cat(t, TB_COMM, 10 * MS, 10 * MS);
				add_cat(t, TB_GPU_WAIT, data_bound ? 0 : 50 * MS,
					data_bound ? 0 : 50 * MS);
				add_cat(t, TB_RUNQUEUE, data_bound ? 20 * MS : 20 * MS,
					20 * MS);
				t->io_rbytes += 1 << 20;
				if (s->phases) {
					phase_rows(t, data_bound);
					job_note_backward(p, t);	/* as account.c */
				}
			} else if (p->pid == 110 && t->tid == 110) {
				add_cat(t, TB_CPU, 120 * MS, 120 * MS);
				add_cat(t, TB_LOCK, 30 * MS, 30 * MS);
				add_cat(t, TB_IO, 50 * MS, 50 * MS);
				t->wio[TB_PH_OTHER] += 30 * MS;	/* 3 of its 5: writes */
				t->io_wbytes += 3 << 19;
			} else if (p->pid >= 200) {
				add_cat(t, TB_CPU, 60 * MS, 60 * MS);
				add_cat(t, TB_IO, 40 * MS, 40 * MS);
				add_cat(t, TB_IDLE, 100 * MS, 100 * MS);
			} else {
				add_cat(t, TB_CPU, 30 * MS, 30 * MS);
				add_cat(t, TB_IDLE, 170 * MS, 170 * MS);
			}
		}
	}
}

static void mark(struct scene *s, uint64_t ts, const char *text)
{
	struct tb_text_event e = { .type = TB_EV_MARK, .pid = 100, .tid = 100, .ts = ts, .fd = 9 };

	e.len = strlen(text);
	memcpy(e.text, text, e.len);
	epochs_on_event(&s->ses.ep, &e);
}

static void call(struct scene *s, uint64_t entry, int api, uint64_t dur)
{
	struct tb_call_event e = { .type = TB_EV_CALL, .pid = 100, .tid = 100,
				   .api = api, .kind = probe_fns[api].kind,
				   .entry = entry, .ret = entry + dur };

	steps_on_event(&s->ses.steps, &e);
}

static void phase(struct scene *s, uint64_t ts, unsigned int ph, unsigned int cls,
		  unsigned int resolved)
{
	struct tb_phase_event e = { .type = TB_EV_PHASE, .pid = 100, .tid = 100, .phase = ph,
				    .cls = cls, .resolved = resolved, .ts = ts };

	phases_on_event(&s->ses.phases, &e);
}

/*
 * One 50 ms batch of the trainer's loop from t, as BPF reports it: a
 * fetch, the forward, then backward and optimizer for a training batch;
 * none for a validation batch (tick 20's), which the following fetches
 * resolve: the first is held, the second makes both validation.
 */
static void batch(struct scene *s, uint64_t t, int tick, int k)
{
	static int nval;
	bool val = tick == 20;
	unsigned int how = !nval ? TB_RS_NONE : nval == 1 ? TB_RS_LONE : TB_RS_VALIDATION;

	phase(s, t, TB_PH_PEND_DATA, TB_BC_DATA, how);
	phase(s, t + 4 * MS + k * MS, TB_PH_PEND_FWD, TB_BC_DATA, TB_RS_NONE);
	if (val) {
		nval++;
		return;
	}
	nval = 0;
	phase(s, t + 22 * MS, TB_PH_BACKWARD, TB_BC_BACKWARD, TB_RS_TRAINED);
	phase(s, t + 38 * MS, TB_PH_OTHER, TB_BC_BACKWARD, TB_RS_NONE);
	phase(s, t + 41 * MS, TB_PH_OPTIMIZER, TB_BC_OPTIM, TB_RS_NONE);
	phase(s, t + 47 * MS, TB_PH_OTHER, TB_BC_OPTIM, TB_RS_NONE);
}

/* A DataLoader worker forked at ts by the trainer; it exits at end (0: never). */
static void fork_worker(struct scene *s, pid_t pid, uint64_t ts, uint64_t end)
{
	struct proc_rec *p = job_add_proc(&s->ses.job, pid, 100, "python3", ts);
	struct thread_rec *t = job_add_thread(p, pid, "pt_data_worker", ts);

	(void)t;
	p->flags = TB_PF_FORKED;
	if (end)
		s->dies[s->ndies++] = (typeof(s->dies[0])){ pid, end };
	epochs_on_fork(&s->ses.ep, pid, 100, ts);
}

/* What happened during the tick that ends at now. */
static void events(struct scene *s, int tick, uint64_t now)
{
	uint64_t from = now - TICK;
	int sync = probe_fn_find("cudaStreamSynchronize");
	int ar = probe_fn_find("ncclAllReduce");

	if (tick == 3 || tick == 15 || tick == 27)
		mark(s, from + 37 * MS, tick == 3 ? "TRAINBPF epoch 1\n" :
		     tick == 15 ? "TRAINBPF epoch 2\n" : "TRAINBPF epoch 3\n");
	if (tick == 5)
		fork_worker(s, 200, from + 10 * MS, W0 + 3000 * MS);
	if (tick == 5)
		fork_worker(s, 201, from + 12 * MS, W0 + 3000 * MS);
	if (tick == 16)
		fork_worker(s, 202, from + 5 * MS, 0);
	for (uint64_t t = from; t < now; t += 50 * MS) {
		if (tick < 3)
			continue;
		if (!s->calls && (t / (50 * MS)) % 2 == 0)
			mark(s, t + 3 * MS, "TRAINBPF step 1\n");
		if (s->phases)
			batch(s, t, tick, (int)((t - from) / (50 * MS)));
		call(s, t + 20 * MS, sync, 2 * MS);
		call(s, t + 30 * MS, ar, 1 * MS);
		call(s, t + 40 * MS, sync, 5 * MS);
	}
}

/* Workers whose time has come exit within the tick that ends at now. */
static void exits(struct scene *s, uint64_t now)
{
	for (int k = 0; k < s->ndies; k++) {
		struct proc_rec *p = job_proc(&s->ses.job, s->dies[k].pid);

		if (!p || p->end_ns || s->dies[k].end > now)
			continue;
		p->end_ns = p->threads[0].end_ns = s->dies[k].end;
		p->exit_code = 0;
		epochs_on_exit(&s->ses.ep, p->pid, p->end_ns);
	}
}

/* libtorch_cpu, mapped by the trainer: its probes give the phase events. */
static void build_torch(struct scene *s)
{
	int i = gpu_object_add(&s->ses.gpu);
	struct gpu_object *o = &s->ses.gpu.objs[i];

	snprintf(o->path, sizeof(o->path), "/opt/venv/lib/torch/lib/libtorch_cpu.so");
	o->families = 1u << LIB_TORCH;
	o->offs[probe_fn_find("_Z34DisableTorchFunctionSubclass__exitP7_objectS0_")] = 0x3000;
	gpu_mapping_add(gpu_proc_get(&s->ses.gpu, 100), i)->probes[LIB_TORCH] = 9;
	s->ses.phases_on = true;
}

static void build_gpu(struct scene *s)
{
	struct gpu *g = &s->ses.gpu;
	struct gpu_proc *p;
	struct gpu_object *o;
	int i;

	i = gpu_object_add(g);
	o = &g->objs[i];
	snprintf(o->path, sizeof(o->path), "/opt/venv/lib/nvidia/cu13/lib/libcudart.so.13");
	o->families = 1u << LIB_CUDART;
	snprintf(o->version[LIB_CUDART], sizeof(o->version[0]), "13");
	o->offs[probe_fn_find("cudaStreamSynchronize")] = 0x1000;
	i = gpu_object_add(g);
	o = &g->objs[i];
	snprintf(o->path, sizeof(o->path), "/opt/venv/lib/libtorch_cuda.so");
	o->families = 1u << LIB_NCCL;
	o->is_static[LIB_NCCL] = true;
	snprintf(o->version[LIB_NCCL], sizeof(o->version[0]), "2.28.9");
	o->offs[probe_fn_find("ncclAllReduce")] = 0x2000;
	p = gpu_proc_get(g, 100);
	gpu_mapping_add(p, 0)->probes[LIB_CUDART] = 14;
	gpu_mapping_add(p, 1)->probes[LIB_NCCL] = 22;
	p->comms = calloc(1, sizeof(*p->comms));
	p->ncomms = 1;
	p->comms[0] = (struct gpu_comm){ .comm = 0x5599aa00, .parent = 0, .rank = 1,
					 .nranks = 2, .api = probe_fn_find("ncclCommInitRank") };
	for (int b = 0; b < 16; b++)
		p->comms[0].id[b] = (unsigned char)(b * 17 + 3);
}

/* The counts BPF would have: calls so far, as of tick. */
static void gpu_counts(struct scene *s, int tick)
{
	struct tb_api_stat *st = s->ses.gpu.procs[0].stat;
	int n = tick > 3 ? (tick - 3) * 4 : 0;
	int sync = probe_fn_find("cudaStreamSynchronize");
	int ar = probe_fn_find("ncclAllReduce");

	st[sync].calls = 2 * n;
	st[sync].ns = 2 * n * 3500000ull;
	st[sync].nested = n / 3;
	st[ar].calls = n;
	st[ar].bytes = n * (64ull << 20);
	st[ar].ns = n * MS;
}

/*
 * The trainer's setup (its other time of ticks 1-2, before its first
 * batch) and teardown (a last 20 ms), as phases_settle_tail leaves them:
 * parts of its other row, their wall time the rows' sums.
 */
static void ends(struct scene *s)
{
	struct thread_rec *t = &job_proc(&s->ses.job, 100)->threads[0];
	struct ph_thread *pt = phases_add_thread(&s->ses.phases, 100, 100);

	t->ends[0][TB_RUNQUEUE] = 40 * MS;
	t->ends[1][TB_RUNQUEUE] = 20 * MS;
	pt->ends_ns[0] = 40 * MS;
	pt->ends_ns[1] = 20 * MS;
}

int main(int argc, char **argv)
{
	static struct scene s;
	struct live lv;
	char why[128];
	struct run_counters c = { 0 };

	s.calls = argc > 1 && !strcmp(argv[1], "calls");
	s.phases = argc > 1 && !strcmp(argv[1], "phases");
	session_init(&s.ses);
	build_job(&s);
	build_gpu(&s);
	if (s.phases)
		build_torch(&s);
	if (epochs_init(&s.ses.ep, EP_AUTO, 0, NULL, W0, why, sizeof(why)))
		return 1;
	s.ses.ep.calls = &s.ses.steps;
	/* One report alone: the live lines still run (the model is the same), unseen. */
	FILE *live = argc > 2 ? fopen("/dev/null", "w") : stdout;

	if (!live)
		return 1;
	live_init(&lv);
	for (int tick = 1; tick <= TICKS; tick++) {
		uint64_t now = W0 + tick * TICK;

		events(&s, tick, now);
		grow_job(&s, tick);
		exits(&s, now);
		gpu_counts(&s, tick);
		job_classify_roles(&s.ses.job);
		steps_tick(&s.ses.steps);
		epochs_tick(&s.ses.ep, &s.ses.job, now);
		live_epochs(live, &lv, &s.ses);
		live_step_blocks(live, &lv, &s.ses, 6, now);
		if (tick % 5 == 0)
			live_table(live, &lv, &s.ses, now);
	}
	epochs_finish(&s.ses.ep, &s.ses.job, W0 + TICKS * TICK + 17 * MS);
	c.bpf.events_lost = 3;
	c.bpf.sched_missed = 2;
	c.bpf.states_lost = 1;
	c.bpf.brackets_deep = s.phases ? 2 : 0;
	c.io_rbytes = 123456789;
	c.io_wbytes = 987654;
	c.switches = 4242;
	if (s.phases) {
		phases_finish(&s.ses.phases, &s.ses.gpu);
		ends(&s);
	}
	if (argc > 2 && !strcmp(argv[2], "summary")) {
		report_summary(stdout, &s.ses, &c, W0 + TICKS * TICK + 17 * MS);
		return 0;
	}
	if (argc > 2) {
		enum tb_format fmt;

		if (!report_format_parse(argv[2], &fmt))
			return 2;
		report_write(stdout, fmt, &s.ses, &c, W0 + TICKS * TICK + 17 * MS);
		return 0;
	}
	printf("==== text\n");
	report_text(stdout, &s.ses, &c, W0 + TICKS * TICK + 17 * MS);
	printf("==== json\n");
	report_json(stdout, &s.ses, &c, W0 + TICKS * TICK + 17 * MS);
	printf("==== csv\n");
	report_csv(stdout, &s.ses);
	return 0;
}
