// SPDX-License-Identifier: BSD-3-Clause
/*
 * The diagnosis rules on windows built by hand: thresholds, severities,
 * the slow rank, RSS growth, and memory pressure read from a /proc made
 * for the test (filling a real machine's memory would take a minute).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "diagnosis.h"
#include "session.h"
#include "memory.h"
#include "procfs.h"
#include "job.h"

#define S 1000000000ll

static const struct dg_finding *find(const struct dg_finding *fs, int n, enum dg_id id)
{
	for (int i = 0; i < n; i++)
		if (fs[i].id == id)
			return &fs[i];
	return NULL;
}

/* One trainer whose main thread spent cpu_s, data_s and comm_s. */
static void one_trainer(struct dg_view *v, struct dg_proc *p, double cpu_s,
			double data_s, double comm_s)
{
	memset(v, 0, sizeof(*v));
	memset(p, 0, sizeof(*p));
	p->pid = 10;
	p->role = TB_ROLE_TRAINER;
	p->rank = -1;
	p->main_cp[TB_CPU] = p->main_own[TB_CPU] = cpu_s * S;
	p->main_cp[TB_DATA_WAIT] = p->main_own[TB_DATA_WAIT] = data_s * S;
	p->main_cp[TB_COMM] = p->main_own[TB_COMM] = comm_s * S;
	memcpy(p->own, p->main_own, sizeof(p->own));
	memcpy(v->hl, p->main_cp, sizeof(v->hl));
	memcpy(v->hl_own, p->main_own, sizeof(v->hl_own));
	v->p = p;
	v->n = 1;
	v->wall_s = cpu_s + data_s + comm_s;
}

START_TEST(thresholds_and_severity)
{
	struct dg_finding fs[16];
	struct dg_view v;
	struct dg_proc p;
	const struct dg_finding *f;
	int n;

	one_trainer(&v, &p, 86, 14, 0);	/* 14% data: under 15% */
	ck_assert_int_eq(diag_run(&v, fs, 16), 0);
	one_trainer(&v, &p, 67.5, 32.5, 0);	/* halfway from 15% to 50% */
	n = diag_run(&v, fs, 16);
	f = find(fs, n, DG_DATA_LOADING);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.325, 1e-9);
	ck_assert_double_eq_tol(f->severity, 0.5, 1e-9);
	one_trainer(&v, &p, 10, 90, 0);
	n = diag_run(&v, fs, 16);
	ck_assert_double_eq_tol(find(fs, n, DG_DATA_LOADING)->severity, 1.0, 1e-9);
	/* Communication: 20% is the line. */
	one_trainer(&v, &p, 80, 0, 20);
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_COMM_BOUND));
	one_trainer(&v, &p, 60, 0, 40);
	n = diag_run(&v, fs, 16);
	ck_assert_double_eq_tol(find(fs, n, DG_COMM_BOUND)->severity, 0.5, 1e-9);
}
END_TEST

/*
 * Folded workers count as what each was on its own times (their tally),
 * one I/O-bound worker and a folded row of three: four workers. The
 * busiest is the first of the busiest (20 and 31 are both busy all along).
 */
START_TEST(folded_workers_count_one_by_one)
{
	struct dg_finding fs[16];
	struct dg_proc p[3];
	struct dg_view v;
	const struct dg_finding *f;
	int64_t io[TB_NCAT] = { [TB_IO] = 3 * S, [TB_CPU] = S };
	int64_t cpu[TB_NCAT] = { [TB_CPU] = 4 * S };

	one_trainer(&v, &p[0], 10, 90, 0);
	memset(&p[1], 0, sizeof(p[1]) * 2);
	p[1].pid = 20;
	p[1].role = TB_ROLE_WORKER;
	memcpy(p[1].own, io, sizeof(io));
	p[2].role = TB_ROLE_WORKER;
	p[2].folded = 3;
	worker_tally_add(&p[2].tally, 30, io);
	worker_tally_add(&p[2].tally, 31, cpu);
	worker_tally_add(&p[2].tally, 32, cpu);
	for (int c = 0; c < TB_NCAT; c++)
		p[2].own[c] = io[c] + 2 * cpu[c];
	v.n = 3;
	f = find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(strstr(f->evidence, "4 workers: 2 I/O-bound, 2 CPU-bound (decoding), "
				     "0 mostly waiting (by their busiest thread); busiest PID 20 "
				     "(cpu 25%, io 75%)"));
}
END_TEST

/* A worker whose main thread decodes is CPU-bound, whatever its idle threads. */
START_TEST(workers_judged_by_their_busiest_thread)
{
	struct dg_finding fs[16];
	struct dg_proc p[2];
	struct dg_view v;
	const struct dg_finding *f;

	one_trainer(&v, &p[0], 10, 90, 0);
	memset(&p[1], 0, sizeof(p[1]));
	p[1].pid = 20;
	p[1].role = TB_ROLE_WORKER;
	p[1].own[TB_CPU] = 19 * S / 20;		/* one thread at 95% */
	p[1].own[TB_IDLE] = 3 * S;		/* three idle helpers */
	p[1].work[TB_CPU] = 19 * S / 20;
	p[1].work[TB_IDLE] = S / 20;
	v.n = 2;
	f = find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(strstr(f->evidence, "1 worker: 0 I/O-bound, 1 CPU-bound"));
}
END_TEST

/*
 * With phases: the data phase is data loading whatever it was made of
 * (here on-CPU decoding in the loop); torch.save and the writes after it
 * are checkpointing, not data.
 */
/*
 * Ranked by the time they cost: with num_workers=0 the loop decodes on its
 * own thread and waits for CPUs. Contention is the more severe (35% of the
 * time: 0.83) but data loading costs more (41%: 0.74) and is the cause:
 * it comes first. Memory pressure names no time: last, severity 1 or not.
 */
START_TEST(findings_ranked_by_cost)
{
	struct dg_finding fs[16];
	struct dg_proc p;
	struct dg_view v;
	int n;

	one_trainer(&v, &p, 65, 0, 0);
	p.main_cp[TB_RUNQUEUE] = p.main_own[TB_RUNQUEUE] = 35 * S;
	v.hl[TB_RUNQUEUE] = v.hl_own[TB_RUNQUEUE] = 35 * S;
	v.wall_s = 100;
	v.phases = v.data_phase = true;
	v.ph[PH_DATA][TB_CPU] = 30 * S;
	v.ph[PH_DATA][TB_RUNQUEUE] = 11 * S;
	v.ph[PH_FORWARD][TB_CPU] = 35 * S;
	v.ph[PH_FORWARD][TB_RUNQUEUE] = 24 * S;
	v.mem_total_kb = 100 << 20;
	v.mem_min_avail_kb = 1 << 20;	/* 99% used */
	n = diag_run(&v, fs, 16);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(fs[0].id, DG_DATA_LOADING);
	ck_assert_double_eq_tol(fs[0].cost, 0.41, 1e-9);
	ck_assert_int_eq(fs[1].id, DG_CPU_CONTENTION);
	ck_assert_double_eq_tol(fs[1].cost, 0.35, 1e-9);
	ck_assert(fs[1].severity > fs[0].severity);
	ck_assert_int_eq(fs[2].id, DG_MEMORY);
	ck_assert_double_eq_tol(fs[2].cost, 0, 1e-12);
	ck_assert_double_eq_tol(fs[2].severity, 1.0, 1e-9);
	/* An older recording's: the cost is the value where that is a share of the time. */
	ck_assert_double_eq_tol(diag_cost_of_value(DG_DATA_LOADING, 0.41), 0.41, 1e-12);
	ck_assert_double_eq_tol(diag_cost_of_value(DG_SYNCS, 3.0), 0, 1e-12);
	ck_assert_double_eq_tol(diag_cost_of_value(DG_GPU_THROTTLE, 0.25), 0.2, 1e-12);
}
END_TEST

START_TEST(data_and_checkpoint_phases)
{
	struct dg_finding fs[16];
	struct dg_proc p;
	struct dg_view v;
	const struct dg_finding *f;

	one_trainer(&v, &p, 100, 0, 0);
	v.phases = v.data_phase = v.ckpt_phase = true;
	v.ph[PH_DATA][TB_CPU] = 40 * S;		/* decoding in the loop */
	v.ph[PH_FORWARD][TB_CPU] = 20 * S;
	v.ph[PH_CHECKPOINT][TB_CPU] = 20 * S;
	v.ph[PH_OTHER][TB_IO] = 20 * S;		/* fsync after torch.save */
	v.hl[TB_IO] = 20 * S;
	v.hl[TB_CPU] = 80 * S;
	v.rbytes = 0;
	v.wbytes = 100 << 20;
	f = find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.40, 1e-9);
	ck_assert_ptr_nonnull(strstr(f->advice, "num_workers > 0"));
	f = find(fs, diag_run(&v, fs, 16), DG_CHECKPOINT);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.40, 1e-9);
	ck_assert_ptr_nonnull(strstr(f->evidence, "wrote 100.0 MiB"));
	/* No phases: the storage waits were writes, not data loading. */
	v.phases = v.data_phase = v.ckpt_phase = false;
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING));
	f = find(fs, diag_run(&v, fs, 16), DG_CHECKPOINT);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(strstr(f->summary, "storage writes"));
}
END_TEST

/*
 * Without a DataLoader, the data phase's waits: a producer behind a queue
 * (the loop's own lock waits, its critical path the producer's) or the
 * loop's own sleeps before its forward (a sampler's sleep in its own
 * call, torch_sections.py): only the first is a feeding thread.
 */
START_TEST(unfetched_waits_are_a_producer_or_the_loops_own)
{
	struct dg_finding fs[16];
	struct dg_proc p;
	struct dg_view v;
	const struct dg_finding *f;

	one_trainer(&v, &p, 100, 0, 0);
	v.phases = v.data_phase = true;
	v.ph[PH_FORWARD][TB_CPU] = 70 * S;
	v.ph[PH_DATA][TB_IDLE] = 30 * S;	/* its own sleep: idle of its own */
	v.hl_own[TB_IDLE] = 30 * S;
	f = find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(strstr(f->evidence, "feeds them (a queue's producer) 0.0%"));
	ck_assert_ptr_nonnull(strstr(f->evidence, "waits of their own (a sleep, a poll) 30.0%"));
	ck_assert_ptr_null(strstr(f->advice, "more producers"));
	ck_assert_ptr_nonnull(strstr(f->advice, "calls of its own"));
	/* The same critical path, the loop blocked on a queue's lock: a producer. */
	v.hl_own[TB_IDLE] = 0;
	v.hl_own[TB_LOCK] = 30 * S;
	f = find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(strstr(f->evidence, "feeds them (a queue's producer) 30.0%"));
	ck_assert_ptr_nonnull(strstr(f->advice, "more producers"));
	ck_assert_ptr_null(strstr(f->advice, "calls of its own"));
	/* Both: each its part (the lock waits of the run bound the producer's). */
	v.hl_own[TB_IDLE] = 20 * S;
	v.hl_own[TB_LOCK] = 10 * S;
	f = find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING);
	ck_assert_ptr_nonnull(strstr(f->evidence, "producer) 10.0%, in waits of their own (a "
					      "sleep, a poll) 20.0%"));
	ck_assert_ptr_nonnull(strstr(f->advice, "more producers"));
	ck_assert_ptr_nonnull(strstr(f->advice, "calls of its own"));
}
END_TEST

/*
 * The communication phase (gradients averaged by hand, barriers): judged
 * by the phase's share of the trainers' rows, whatever it was made of (the
 * CPU between the collectives too), where the comm category alone (10 of
 * 110 s) is under the line.
 */
START_TEST(communication_phase)
{
	struct dg_finding fs[16];
	struct dg_proc p;
	struct dg_view v;
	const struct dg_finding *f;

	one_trainer(&v, &p, 100, 0, 10);
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_COMM_BOUND));
	v.phases = true;
	v.ph[PH_FORWARD][TB_CPU] = 50 * S;
	v.ph[PH_BACKWARD][TB_CPU] = 30 * S;
	v.ph[PH_COMM][TB_COMM] = 10 * S;
	v.ph[PH_COMM][TB_CPU] = 10 * S;
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_COMM_BOUND));	/* 20%: the line */
	v.ph[PH_BACKWARD][TB_CPU] = 10 * S;
	v.ph[PH_COMM][TB_CPU] = 30 * S;
	f = find(fs, diag_run(&v, fs, 16), DG_COMM_BOUND);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.40, 1e-9);
	ck_assert_double_eq_tol(f->severity, 0.5, 1e-9);
	ck_assert_double_eq_tol(f->cost, 0.40, 1e-9);	/* ranked by it, as the others */
	ck_assert_ptr_nonnull(strstr(f->summary, "communication phase 40.0%"));
	ck_assert_ptr_nonnull(strstr(f->evidence, "on the CPU 30.0%"));
	ck_assert_ptr_nonnull(strstr(f->advice, "DistributedDataParallel"));
}
END_TEST

/*
 * Storage waits told apart by the syscall (thread_rec.wio): a cold
 * start's reads (imports) are neither checkpointing nor, in phases, data;
 * only the writes outside torch.save join it. Without the split (an older
 * recording) the bytes' ratio would have called 18 of the 30 s writes.
 */
START_TEST(storage_reads_are_not_checkpoints)
{
	struct dg_finding fs[16];
	struct dg_proc p;
	struct dg_view v;
	const struct dg_finding *f;

	one_trainer(&v, &p, 100, 0, 0);
	v.phases = v.ckpt_phase = v.wio_known = true;
	v.ph[PH_FORWARD][TB_CPU] = 50 * S;
	v.ph[PH_CHECKPOINT][TB_CPU] = 20 * S;
	v.ph[PH_OTHER][TB_IO] = 30 * S;		/* 25 s of imports, then fsyncs */
	v.wio[PH_OTHER] = 5 * S;
	v.hl[TB_IO] = 30 * S;
	v.hl[TB_CPU] = 70 * S;
	v.rbytes = 400 << 20;
	v.wbytes = 600 << 20;
	f = find(fs, diag_run(&v, fs, 16), DG_CHECKPOINT);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.25, 1e-9);
	ck_assert_ptr_nonnull(strstr(f->evidence, "5.0% waiting for storage writes"));
	v.wio_known = false;
	f = find(fs, diag_run(&v, fs, 16), DG_CHECKPOINT);
	ck_assert_double_eq_tol(f->value, 0.38, 1e-9);
	/* No phases: reads are data loading, the writes too few to be a finding. */
	v.phases = v.ckpt_phase = false;
	v.wio_known = true;
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_CHECKPOINT));
	f = find(fs, diag_run(&v, fs, 16), DG_DATA_LOADING);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.25, 1e-9);
}
END_TEST

START_TEST(gone_processes_forgotten_past_a_bound)
{
	struct diag d;

	diag_init(&d);
	for (int i = 0; i < DG_MAX_GONE + 50; i++) {
		struct dg_pinfo *p = diag_pinfo(&d, 1000 + i);

		p->seen_ns = 1 + i;
		diag_add_rss(p, 1 + i, 100);
	}
	diag_pinfo(&d, 5)->seen_ns = 10000;	/* alive now */
	diag_forget_gone(&d, 10000);
	ck_assert_int_eq(d.nprocs, DG_MAX_GONE + 1);
	for (int i = 0; i < d.nprocs; i++)
		ck_assert(d.procs[i].pid == 5 || d.procs[i].pid >= 1050);
	diag_free(&d);
}
END_TEST

START_TEST(host_bound_needs_a_gpu_and_syncs_need_steps)
{
	struct dg_finding fs[16];
	struct dg_view v;
	struct dg_proc p;
	int n;

	one_trainer(&v, &p, 95, 5, 0);
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_HOST_BOUND));
	v.gpu = true;
	ck_assert_ptr_nonnull(find(fs, diag_run(&v, fs, 16), DG_HOST_BOUND));
	v.syncs = 30;		/* no steps known: nothing to divide by */
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_SYNCS));
	v.steps = 40;		/* 0.75 per step: not every step */
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_SYNCS));
	v.syncs = 120;
	n = diag_run(&v, fs, 16);
	ck_assert_double_eq_tol(find(fs, n, DG_SYNCS)->value, 3.0, 1e-9);
	/* Most severe first. */
	for (int i = 1; i < n; i++)
		ck_assert(fs[i - 1].severity >= fs[i].severity);
}
END_TEST

START_TEST(slow_rank_is_the_one_least_in_comm)
{
	struct dg_finding fs[16];
	struct dg_proc p[3] = {};
	struct dg_view v = { .p = p, .n = 3, .wall_s = 10 };
	const double comm[3] = { 0.40, 0.05, 0.42 };
	const struct dg_finding *f;
	int n;

	for (int i = 0; i < 3; i++) {
		p[i].pid = 100 + i;
		p[i].rank = i;
		p[i].role = TB_ROLE_TRAINER;
		p[i].trained = true;
		p[i].main_own[TB_COMM] = p[i].main_cp[TB_COMM] = comm[i] * 10 * S;
		p[i].main_own[TB_CPU] = p[i].main_cp[TB_CPU] = (1 - comm[i]) * 10 * S;
		for (int c = 0; c < TB_NCAT; c++)
			v.hl[c] += p[i].main_cp[c];
	}
	n = diag_run(&v, fs, 16);
	f = find(fs, n, DG_SLOW_RANK);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(f->pid, 101);
	ck_assert_double_eq_tol(f->value, 0.37, 1e-9);
	ck_assert_ptr_nonnull(strstr(f->summary, "rank 1 (PID 101)"));
	/* A trainer that ran no training phase (a helper) is no rank. */
	p[1].trained = false;
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_SLOW_RANK));
	p[1].trained = true;
	/* Even ranks: nobody is waited for. */
	p[1].main_own[TB_COMM] = 0.38 * 10 * S;
	p[1].main_own[TB_CPU] = 0.62 * 10 * S;
	ck_assert_ptr_null(find(fs, diag_run(&v, fs, 16), DG_SLOW_RANK));
}
END_TEST

START_TEST(rss_growth_every_epoch)
{
	struct dg_finding fs[16];
	struct dg_rss_at r = { .pid = 7, .role = TB_ROLE_TRAINER, .n = 4,
			       .kb = { 500 << 10, 600 << 10, 700 << 10, 800 << 10 },
			       .label = { 1, 2, 3, 4 } };
	struct dg_view v = { .rss = &r, .nrss = 1 };
	const struct dg_finding *f;
	int n = diag_run(&v, fs, 16);

	f = find(fs, n, DG_RSS_GROWTH);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.6, 1e-9);
	ck_assert_ptr_nonnull(strstr(f->evidence, "+100.0 MiB per epoch"));
	r.kb[2] = 550 << 10;	/* down once: not a leak */
	ck_assert_int_eq(diag_run(&v, fs, 16), 0);
	r.kb[2] = 700 << 10;
	r.n = 2;		/* two epochs are not a trend */
	ck_assert_int_eq(diag_run(&v, fs, 16), 0);
}
END_TEST

static void write_meminfo(const char *dir, unsigned long total, unsigned long avail)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/meminfo", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "MemTotal:       %lu kB\nMemFree:         1000 kB\n"
		"MemAvailable:   %lu kB\nBuffers:        0 kB\n", total, avail);
	fclose(f);
}

START_TEST(memory_pressure_from_meminfo)
{
	char dir[] = "/tmp/tb_diag_XXXXXX";
	struct dg_finding fs[16];
	static struct session ses;
	struct job *job = &ses.job;
	struct dg_view v;
	struct diag *d = &ses.diag;
	struct mem_sampler ms;
	const struct dg_finding *f;
	int n;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	session_init(&ses);
	job->window_start_ns = 1000;
	mem_sampler_init(&ms, d);
	ms.proc_root = dir;
	write_meminfo(dir, 16000000, 8000000);
	mem_sample(&ms, job, 2 * S, true);
	write_meminfo(dir, 16000000, 1600000);	/* 90% used: the low point */
	mem_sample(&ms, job, 3 * S, true);
	write_meminfo(dir, 16000000, 9000000);
	mem_sample(&ms, job, 4 * S, true);
	ck_assert_int_eq(diag_view_run(&v, &ses, 5 * S), 0);
	n = diag_run(&v, fs, 16);
	f = find(fs, n, DG_MEMORY);
	ck_assert_ptr_nonnull(f);
	ck_assert_double_eq_tol(f->value, 0.90, 1e-9);
	ck_assert_double_eq_tol(v.mem_min_at_s, 3.0 - 1e-6, 1e-6);
	diag_view_free(&v);
	diag_free(d);

	diag_init(d);
	mem_sampler_init(&ms, d);
	ms.proc_root = dir;
	mem_sample(&ms, job, 2 * S, true);	/* 9000000 of 16000000 available */
	ck_assert_int_eq(diag_view_run(&v, &ses, 5 * S), 0);
	ck_assert_int_eq(diag_run(&v, fs, 16), 0);
	diag_view_free(&v);
	session_free(&ses);
	{
		char path[256];

		snprintf(path, sizeof(path), "%s/meminfo", dir);
		unlink(path);
		rmdir(dir);
	}
}
END_TEST

START_TEST(meminfo_parse)
{
	uint64_t t, a;

	ck_assert_int_eq(procfs_parse_meminfo("MemTotal: 100 kB\nMemAvailable: 40 kB\n", &t, &a), 0);
	ck_assert_uint_eq(t, 100);
	ck_assert_uint_eq(a, 40);
	ck_assert_int_eq(procfs_parse_meminfo("MemTotal: 100 kB\n", &t, &a), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("diagnosis");
	TCase *tc = tcase_create("rules");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, thresholds_and_severity);
	tcase_add_test(tc, findings_ranked_by_cost);
	tcase_add_test(tc, host_bound_needs_a_gpu_and_syncs_need_steps);
	tcase_add_test(tc, slow_rank_is_the_one_least_in_comm);
	tcase_add_test(tc, rss_growth_every_epoch);
	tcase_add_test(tc, memory_pressure_from_meminfo);
	tcase_add_test(tc, meminfo_parse);
	tcase_add_test(tc, folded_workers_count_one_by_one);
	tcase_add_test(tc, workers_judged_by_their_busiest_thread);
	tcase_add_test(tc, data_and_checkpoint_phases);
	tcase_add_test(tc, unfetched_waits_are_a_producer_or_the_loops_own);
	tcase_add_test(tc, communication_phase);
	tcase_add_test(tc, storage_reads_are_not_checkpoints);
	tcase_add_test(tc, gone_processes_forgotten_past_a_bound);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
