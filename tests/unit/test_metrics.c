// SPDX-License-Identifier: BSD-3-Clause
/*
 * user/report/metrics.c and metrics_expose.c: counters that never go down
 * while processes come and go, series per job and rank, their expiry,
 * the exposition; user/acquire/labels.c: a pod from a cgroup path.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "gpu.h"
#include "labels.h"
#include "metrics.h"
#include "session.h"
#include "phases.h"
#include "stall.h"

#define S 1000000000ull

static struct session ses;
static struct metrics m;

static void setup(void)
{
	session_init(&ses);
	metrics_init(&m, 30 * S);
}

static void teardown(void)
{
	metrics_free(&m);
	session_free(&ses);
}

/* A live process of role with its labels read: rank, a job id. */
static struct proc_rec *proc(pid_t pid, pid_t ppid, enum tb_role role, int rank,
			     const char *id)
{
	struct proc_rec *p = job_add_proc(&ses.job, pid, ppid, "python", pid * S);

	job_add_thread(p, pid, "python", pid * S);
	p->role = role;
	p->labels.reads = 1;
	p->labels.rank = rank;
	p->labels.world_size = 2;
	snprintf(p->labels.job, sizeof(p->labels.job), "%s", id);
	return p;
}

static void set_cpu(pid_t pid, uint64_t cpu)
{
	struct proc_rec *p = job_proc(&ses.job, pid);

	p->threads[0].cp[TB_CPU] = p->threads[0].own[TB_CPU] = cpu;
}

static const struct mx_series *series(const char *id, int rank, enum tb_role role)
{
	for (int i = 0; i < m.nseries; i++)
		if (m.series[i].alive_ns && !strcmp(m.series[i].job, id) &&
		    m.series[i].rank == rank && (int)m.series[i].role == (int)role)
			return &m.series[i];
	return NULL;
}

START_TEST(ranks_and_roles_are_series)
{
	proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	proc(11, 10, TB_ROLE_WORKER, 0, "j1");
	proc(12, 10, TB_ROLE_WORKER, 0, "j1");
	proc(20, 1, TB_ROLE_TRAINER, 1, "j1");
	set_cpu(10, 3 * S);
	set_cpu(11, 1 * S);
	set_cpu(12, 2 * S);
	set_cpu(20, 5 * S);
	ck_assert_int_eq(metrics_update(&m, &ses, 100 * S), 0);
	ck_assert_int_eq(m.nseries, 3);
	ck_assert_uint_eq(series("j1", 0, TB_ROLE_TRAINER)->v.cat_ns[TB_CPU], 3 * S);
	ck_assert_uint_eq(series("j1", 0, TB_ROLE_WORKER)->v.cat_ns[TB_CPU], 3 * S);
	ck_assert_int_eq(series("j1", 0, TB_ROLE_WORKER)->live, 2);
	ck_assert_uint_eq(series("j1", 1, TB_ROLE_TRAINER)->v.cat_ns[TB_CPU], 5 * S);
}
END_TEST

/*
 * A worker exits and is folded away, a new one forks: the workers'
 * counter keeps what the first gave and adds the second's.
 */
START_TEST(counters_survive_processes)
{
	proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	proc(11, 10, TB_ROLE_WORKER, 0, "j1");
	set_cpu(11, 4 * S);
	metrics_update(&m, &ses, 100 * S);
	set_cpu(11, 6 * S);
	job_on_exit(&ses.job, 11, 101 * S, 0);
	metrics_update(&m, &ses, 101 * S);
	ck_assert_uint_eq(series("j1", 0, TB_ROLE_WORKER)->v.cat_ns[TB_CPU], 6 * S);
	/* folded: it has no row of its own any more */
	ses.job.procs[1].folded = 1;
	ses.job.procs[1].pid = 0;
	proc(12, 10, TB_ROLE_WORKER, 0, "j1");
	set_cpu(12, 1 * S);
	metrics_update(&m, &ses, 102 * S);
	ck_assert_uint_eq(series("j1", 0, TB_ROLE_WORKER)->v.cat_ns[TB_CPU], 7 * S);
	/* a total read lower than before (never in the model; say a reused pid's) adds nothing */
	set_cpu(12, 0);
	metrics_update(&m, &ses, 103 * S);
	ck_assert_uint_eq(series("j1", 0, TB_ROLE_WORKER)->v.cat_ns[TB_CPU], 7 * S);
}
END_TEST

/*
 * Time counted once is not counted twice when its split changes: an open
 * wait counted as lock at one update is closed as cpu (what the thread it
 * waited for did) at the next, and the process turns trainer (critical
 * path) from other (its own states). The series adds one second a second.
 */
START_TEST(a_split_that_changes_adds_no_time)
{
	struct proc_rec *p = proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	struct thread_rec *t = &p->threads[0];
	uint64_t sum = 0;
	const struct mx_series *s;

	t->cp[TB_CPU] = 1 * S;
	t->cp[TB_LOCK] = 2 * S;	/* the open part of a wait */
	metrics_update(&m, &ses, 100 * S);
	t->cp[TB_CPU] = 4 * S;	/* closed: 2 s as the waker's cpu, and 1 s more */
	t->cp[TB_LOCK] = 0;
	metrics_update(&m, &ses, 101 * S);
	s = series("j1", 0, TB_ROLE_TRAINER);
	for (int c = 0; c < TB_NCAT; c++)
		sum += s->v.cat_ns[c];
	ck_assert_uint_eq(sum, 4 * S);
	ck_assert_uint_eq(s->v.cat_ns[TB_CPU], 2 * S);	/* 1 s, and the 1 s it grew */
	ck_assert_uint_eq(s->v.cat_ns[TB_LOCK], 2 * S);	/* kept: a counter */
	/* Parts that all grow are added as they are. */
	t->cp[TB_CPU] = 5 * S;
	t->cp[TB_IDLE] = 2 * S;
	metrics_update(&m, &ses, 104 * S);
	ck_assert_uint_eq(s->v.cat_ns[TB_CPU], 3 * S);
	ck_assert_uint_eq(s->v.cat_ns[TB_IDLE], 2 * S);
}
END_TEST

START_TEST(series_go_after_the_grace_period)
{
	proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	metrics_update(&m, &ses, 100 * S);
	job_on_exit(&ses.job, 10, 101 * S, 0);
	metrics_update(&m, &ses, 101 * S);
	metrics_update(&m, &ses, 129 * S);
	ck_assert_ptr_nonnull(series("j1", 0, TB_ROLE_TRAINER));
	metrics_update(&m, &ses, 131 * S);
	ck_assert_ptr_null(series("j1", 0, TB_ROLE_TRAINER));
	/* the freed series is reused by the next job, from zero */
	proc(30, 1, TB_ROLE_TRAINER, 0, "j2");
	set_cpu(30, S);
	metrics_update(&m, &ses, 132 * S);
	ck_assert_int_eq(m.nseries, 1);
	ck_assert_uint_eq(series("j2", 0, TB_ROLE_TRAINER)->v.cat_ns[TB_CPU], S);
}
END_TEST

/* The exposition as a string (freed by the caller). */
static char *exposition(void)
{
	struct mx_self me = { 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	metrics_write(&m, &me, f);
	fclose(f);
	return text;
}

/*
 * Findings per job, each judged on its own processes: a job whose rank
 * waits for its workers has data_loading, the job beside it on the node
 * (all computation) has none.
 */
START_TEST(findings_per_job)
{
	struct proc_rec *p;
	char *text;

	proc(10, 1, TB_ROLE_TRAINER, 0, "starved");
	p = job_proc(&ses.job, 10);
	p->threads[0].cp[TB_DATA_WAIT] = p->threads[0].own[TB_DATA_WAIT] = 6 * S;
	p->threads[0].cp[TB_CPU] = p->threads[0].own[TB_CPU] = 4 * S;
	proc(20, 1, TB_ROLE_TRAINER, 0, "busy");
	set_cpu(20, 10 * S);
	metrics_update(&m, &ses, 100 * S);
	ck_assert_int_eq(metrics_judge(&m, &ses, 100 * S), 0);
	text = exposition();
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_finding{training_job=\"starved\","
				     "finding=\"data_loading\"} "));
	ck_assert_ptr_null(strstr(text, "trainbpf_finding{training_job=\"busy\""));
	free(text);
	/* Its processes gone past the grace period: its findings go too. */
	job_on_exit(&ses.job, 10, 101 * S, 0);
	metrics_update(&m, &ses, 140 * S);
	metrics_judge(&m, &ses, 140 * S);
	text = exposition();
	ck_assert_ptr_null(strstr(text, "training_job=\"starved\""));
	free(text);
}
END_TEST

/*
 * The setup of a trainer thread the daemon saw born is a phase series; no
 * teardown series: a daemon settles no thread's tail (docs/metrics.md).
 */
START_TEST(setup_series_no_teardown)
{
	struct ph_thread *t;
	char *text;

	proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	ses.phases_on = true;
	t = phases_add_thread(&ses.phases, 10, 10);
	t->tot[PH_FORWARD] = 2 * S;
	t->ends_ns[0] = 3 * S;
	t->ends_ns[1] = 1 * S;
	metrics_update(&m, &ses, 100 * S);
	text = exposition();
	ck_assert_ptr_nonnull(strstr(text, "role=\"trainer\",phase=\"setup\"} 3.000000000\n"));
	ck_assert_ptr_nonnull(strstr(text, "role=\"trainer\",phase=\"forward\"} 2.000000000\n"));
	ck_assert_ptr_null(strstr(text, "phase=\"teardown\""));
	free(text);
}
END_TEST

/*
 * Steps and passes from the phases: the current step time is the mean of
 * the steps completed at the last update that had any; a pass counts once.
 */
START_TEST(step_time_and_epochs)
{
	struct ph_thread *t;
	char *text;

	proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	ses.phases_on = true;
	t = phases_add_thread(&ses.phases, 10, 10);
	t->steps.steps = 10;
	t->steps.step_ms = 1000;
	metrics_update(&m, &ses, 100 * S);
	t = phases_add_thread(&ses.phases, 10, 10);
	t->steps.steps = 14;
	t->steps.step_ms = 1800;	/* 4 steps of 200 ms */
	t->passes = 1;
	metrics_update(&m, &ses, 101 * S);
	metrics_update(&m, &ses, 102 * S);	/* no step since: the gauge stays */
	text = exposition();
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_last_step_seconds{training_job=\"j1\",rank=\"0\","
				     "local_rank=\"unknown\",world_size=\"2\",role=\"trainer\"} "
				     "0.200000\n"));
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_epochs_total{training_job=\"j1\",rank=\"0\","
				     "local_rank=\"unknown\",world_size=\"2\",role=\"trainer\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_steps_total{training_job=\"j1\",rank=\"0\","
				     "local_rank=\"unknown\",world_size=\"2\",role=\"trainer\"} 14\n"));
	free(text);
}
END_TEST

/* No id from the launcher: the topmost traced ancestor's pid and start. */
START_TEST(job_id_falls_back_to_the_launcher)
{
	struct proc_rec *l = proc(5, 1, TB_ROLE_OTHER, -1, "");
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	l->labels.start_unix = 1700000000;
	proc(10, 5, TB_ROLE_TRAINER, 0, "");
	set_cpu(10, S);
	metrics_update(&m, &ses, 100 * S);
	ck_assert_ptr_nonnull(series("5-1700000000", 0, TB_ROLE_TRAINER));
	f = open_memstream(&text, &len);
	metrics_write(&m, &(struct mx_self){ 0 }, f);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_time_seconds_total{training_job=\"5-1700000000\","
				      "rank=\"0\",local_rank=\"unknown\",world_size=\"2\","
				      "role=\"trainer\",category=\"cpu\"} 1.000000000\n"));
	ck_assert_ptr_nonnull(strstr(text, "rank=\"unknown\""));	/* the launcher */
	free(text);
}
END_TEST

START_TEST(label_values_are_escaped)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	proc(10, 1, TB_ROLE_TRAINER, 0, "a\"b\\c\nd");
	metrics_update(&m, &ses, 100 * S);
	f = open_memstream(&text, &len);
	metrics_write(&m, &(struct mx_self){ 0 }, f);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "{training_job=\"a\\\"b\\\\c\\nd\","));
	free(text);
}
END_TEST

START_TEST(pods_from_cgroup_paths)
{
	char out[JOB_ID_LEN];

	ck_assert_int_eq(labels_pod_of("0::/kubepods.slice/kubepods-burstable.slice/"
				       "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0"
				       ".slice/cri-containerd-ab12.scope\n", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "pod-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
	ck_assert_int_eq(labels_pod_of("0::/kubepods/besteffort/pod12345678-aaaa-bbbb-cccc-"
				       "dddddddddddd/9f8e7d\n", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "pod-12345678-aaaa-bbbb-cccc-dddddddddddd");
	ck_assert_int_eq(labels_pod_of("0::/user.slice/user-0.slice/session-3.scope\n", out,
				       sizeof(out)), -1);
}
END_TEST

static void write_file(const char *dir, pid_t pid, const char *name, const char *text,
		       size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", dir, pid);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%d/%s", dir, pid, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fwrite(text, 1, len, f);
	fclose(f);
}

#define ENV(dir, pid, lit) write_file(dir, pid, "environ", lit, sizeof(lit))

/*
 * torchrun's run id is "none" without --rdzv-id: the rendezvous address
 * instead; Slurm's variables; a pod from the cgroup; nothing at all.
 */
START_TEST(labels_from_the_environment)
{
	char dir[] = "/tmp/tb-labels-XXXXXX";
	static const char cg[] = "0::/kubepods/burstable/pod12345678-aaaa-bbbb-cccc-dddd/c1\n";

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ENV(dir, 101, "TORCHELASTIC_RUN_ID=none\0MASTER_ADDR=10.0.0.1\0MASTER_PORT=29500\0"
		      "RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8");
	ENV(dir, 102, "SLURM_JOB_ID=77\0SLURM_PROCID=5\0SLURM_LOCALID=1\0SLURM_NTASKS=16");
	ENV(dir, 103, "PATH=/bin\0RANKS=9");
	write_file(dir, 103, "cgroup", cg, sizeof(cg) - 1);
	for (pid_t pid = 101; pid <= 104; pid++)
		job_add_proc(&ses.job, pid, 1, "python", 0);
	labels_refresh(&ses.job, dir, false);
	ck_assert_str_eq(ses.job.procs[0].labels.job, "10.0.0.1:29500");
	ck_assert_int_eq(ses.job.procs[0].labels.rank, 3);
	ck_assert_int_eq(ses.job.procs[0].labels.local_rank, 1);
	ck_assert_int_eq(ses.job.procs[0].labels.world_size, 8);
	ck_assert_str_eq(ses.job.procs[1].labels.job, "slurm-77");
	ck_assert_int_eq(ses.job.procs[1].labels.rank, 5);
	ck_assert_int_eq(ses.job.procs[1].labels.world_size, 16);
	ck_assert_str_eq(ses.job.procs[2].labels.job, "pod-12345678-aaaa-bbbb-cccc-dddd");
	ck_assert_int_eq(ses.job.procs[2].labels.rank, -1);	/* RANKS is not RANK */
	ck_assert_str_eq(ses.job.procs[3].labels.job, "");	/* gone: nothing to read */
	/* no rank yet: read again at the next refreshes, a few times at most */
	for (int i = 0; i < 10; i++)
		labels_refresh(&ses.job, dir, false);
	ck_assert_int_eq(ses.job.procs[0].labels.reads, 1);
	ck_assert_int_eq(ses.job.procs[2].labels.reads, 4);
}
END_TEST

/* A recording reads its trainers' labels alone: a worker's environ is not read. */
START_TEST(labels_of_trainers_only)
{
	char dir[] = "/tmp/tb-labels-XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ENV(dir, 101, "RANK=0\0WORLD_SIZE=2\0TORCHELASTIC_RUN_ID=r1");
	ENV(dir, 102, "RANK=0\0WORLD_SIZE=2\0TORCHELASTIC_RUN_ID=r1");
	job_add_proc(&ses.job, 101, 1, "python", 0)->role = TB_ROLE_TRAINER;
	job_add_proc(&ses.job, 102, 101, "python", 0)->role = TB_ROLE_WORKER;
	labels_refresh(&ses.job, dir, true);
	ck_assert_str_eq(ses.job.procs[0].labels.job, "r1");
	ck_assert_int_eq(ses.job.procs[0].labels.world_size, 2);
	ck_assert_int_eq(ses.job.procs[1].labels.reads, 0);
	ck_assert_str_eq(ses.job.procs[1].labels.job, "");
}
END_TEST

START_TEST(another_users_claim_is_its_own_job)
{
	/* job v is user 1000's: user 65534's process naming it (job and rank) adds nothing to it */
	proc(10, 1, TB_ROLE_TRAINER, 0, "v")->labels.uid = 1000;
	set_cpu(10, 3 * S);
	ck_assert_int_eq(metrics_update(&m, &ses, 100 * S), 0);
	proc(30, 1, TB_ROLE_TRAINER, 0, "v")->labels.uid = 65534;
	set_cpu(30, 7 * S);
	ck_assert_int_eq(metrics_update(&m, &ses, 101 * S), 0);
	ck_assert_uint_eq(series("v", 0, TB_ROLE_TRAINER)->v.cat_ns[TB_CPU], 3 * S);
	ck_assert_int_eq(series("v", 0, TB_ROLE_TRAINER)->live, 1);
	ck_assert_uint_eq(series("v~uid65534", 0, TB_ROLE_TRAINER)->v.cat_ns[TB_CPU], 7 * S);
	/* the same user's second rank is the job's */
	proc(11, 1, TB_ROLE_TRAINER, 1, "v")->labels.uid = 1000;
	ck_assert_int_eq(metrics_update(&m, &ses, 102 * S), 0);
	ck_assert_ptr_nonnull(series("v", 1, TB_ROLE_TRAINER));
	/* a long id keeps its suffix whole, cut on a character's boundary */
	char id[JOB_ID_LEN];

	memset(id, 'x', sizeof(id) - 3);
	strcpy(id + sizeof(id) - 3, "\xc3\xa9");	/* 61 x and é: the whole 63 bytes */
	proc(40, 1, TB_ROLE_TRAINER, 0, id)->labels.uid = 1000;
	proc(41, 1, TB_ROLE_TRAINER, 0, id)->labels.uid = 7;
	ck_assert_int_eq(metrics_update(&m, &ses, 103 * S), 0);
	ck_assert_int_eq(m.series[m.nseries - 1].uid, 7);
	ck_assert_str_eq(m.series[m.nseries - 1].job + strlen(m.series[m.nseries - 1].job) - 5,
			 "~uid7");
	ck_assert_uint_eq(strspn(m.series[m.nseries - 1].job, "x"), JOB_ID_LEN - 1 - 5);
}
END_TEST

START_TEST(one_user_cannot_take_the_nodes_series)
{
	char id[32];

	/* user 65534: more label sets than its bound, each its own job */
	for (int i = 0; i < MX_MAX_SERIES_PER_UID + 50; i++) {
		snprintf(id, sizeof(id), "hog-%d", i);
		proc(1000 + i, 1, TB_ROLE_OTHER, 0, id)->labels.uid = 65534;
		set_cpu(1000 + i, S);
	}
	proc(10, 1, TB_ROLE_TRAINER, 0, "real")->labels.uid = 1000;
	set_cpu(10, 2 * S);
	ck_assert_int_eq(metrics_update(&m, &ses, 100 * S), 0);
	ck_assert_int_eq(m.nseries, MX_MAX_SERIES_PER_UID + 2);
	/* its bound's worth of its own, then one overflow series for the rest */
	ck_assert_uint_eq(series("overflow~uid65534", -1, TB_ROLE_OTHER)->v.cat_ns[TB_CPU],
			  50 * S);
	ck_assert_int_eq(series("overflow~uid65534", -1, TB_ROLE_OTHER)->live, 50);
	ck_assert_uint_eq(series("real", 0, TB_ROLE_TRAINER)->v.cat_ns[TB_CPU], 2 * S);
	ck_assert_uint_eq(m.series_dropped, 50);
}
END_TEST

/*
 * trainbpf_job_stalled: 1 on the trainer series of a stalled job's ranks,
 * 0 on the job beside it; workers have none. The stall model is fed as
 * serve feeds it: the ranks' progress per job, refreshed.
 */
START_TEST(stalled_job_gauge)
{
	struct stall *st = &ses.stall;
	struct stall_obs o[2] = {
		{ .job = "a", .pid = 10, .tr = { .tid = 10, .state = TB_ST_BLOCKED, .wait = TB_W_FUTEX,
						 .phase = TB_PH_FORWARD } },
		{ .job = "b", .pid = 20 },
	};
	char *text;

	proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	proc(11, 10, TB_ROLE_WORKER, 0, "j1");
	proc(20, 1, TB_ROLE_TRAINER, 0, "j2");
	st->floor_ns = 3 * S;
	ses.stall_on = true;
	/* 1 s steps: the threshold is 10 of them */
	for (uint64_t t = 1; t <= 20; t++) {
		o[0].progress = o[0].steps = t < 5 ? t : 5;	/* job a stops at 5 s */
		o[1].progress = o[1].steps = t;
		stall_update(st, o, 2, t * S);
	}
	ck_assert(stall_pid_stalled(st, 10));
	ck_assert(!stall_pid_stalled(st, 20));
	ck_assert_int_eq(metrics_update(&m, &ses, 20 * S), 0);
	text = exposition();
	ck_assert_ptr_nonnull(strstr(text, "# TYPE trainbpf_job_stalled gauge\n"));
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_job_stalled{training_job=\"j1\",rank=\"0\","
				  "local_rank=\"unknown\",world_size=\"2\",role=\"trainer\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_job_stalled{training_job=\"j2\",rank=\"0\","
				  "local_rank=\"unknown\",world_size=\"2\",role=\"trainer\"} 0\n"));
	ck_assert_ptr_null(strstr(text, "trainbpf_job_stalled{training_job=\"j1\",rank=\"0\","
				  "local_rank=\"unknown\",world_size=\"2\",role=\"worker\"}"));
	/* Its one rank is the culprit: in the forward, waiting on a lock. */
	ck_assert_ptr_nonnull(strstr(text, "# TYPE trainbpf_job_stall_culprit gauge\n"));
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_job_stall_culprit{training_job=\"j1\","
				  "rank=\"0\",local_rank=\"unknown\",world_size=\"2\","
				  "role=\"trainer\",phase=\"forward\",wait=\"lock\"} 1\n"));
	ck_assert_ptr_null(strstr(text, "trainbpf_job_stall_culprit{training_job=\"j2\""));
	free(text);
	/* Job a resumes: 0 at the next update. */
	o[0].progress = o[0].steps = 11;
	stall_update(st, o, 2, 21 * S);
	ck_assert_int_eq(metrics_update(&m, &ses, 21 * S), 0);
	text = exposition();
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_job_stalled{training_job=\"j1\",rank=\"0\","
				  "local_rank=\"unknown\",world_size=\"2\",role=\"trainer\"} 0\n"));
	ck_assert_ptr_null(strstr(text, "trainbpf_job_stall_culprit{"));
	free(text);
}
END_TEST

/* A communicator of pid with id's first byte b (0: made before tracing), calls made on it. */
static void comm(pid_t pid, uint64_t handle, unsigned char b, uint64_t calls)
{
	struct gpu_proc *gp = gpu_proc_get(&ses.gpu, pid);

	ck_assert(gpu_comm_count(gp, handle, calls, calls * 4));
	for (int c = 0; c < gp->ncomms; c++)
		if (gp->comms[c].comm == handle)
			gp->comms[c].id[0] = b;
}

/*
 * trainbpf_nccl_collectives_total: per communicator id, counters that
 * survive a process gone; ids made before tracing under "unknown", past
 * MX_COMMS under "other".
 */
START_TEST(collectives_per_communicator)
{
	char *text;

	proc(10, 1, TB_ROLE_TRAINER, 0, "j1");
	comm(10, 0x1000, 0xde, 40);
	comm(10, 0x2000, 0, 3);
	comm(10, 0x3000, 0, 2);	/* another handle of an unknown one: summed */
	for (int i = 0; i < MX_COMMS; i++)	/* 8 more: the last two are past the bound */
		comm(10, 0x4000 + i, 0x10 + i, 1);
	metrics_update(&m, &ses, 100 * S);
	comm(10, 0x1000, 0xde, 45);
	metrics_update(&m, &ses, 101 * S);
	text = exposition();
	ck_assert_ptr_nonnull(strstr(text, "# TYPE trainbpf_nccl_collectives_total counter\n"));
	ck_assert_ptr_nonnull(strstr(text, "trainbpf_nccl_collectives_total{training_job=\"j1\","
				  "rank=\"0\",local_rank=\"unknown\",world_size=\"2\","
				  "role=\"trainer\",communicator=\"de00000000000000\"} 45\n"));
	ck_assert_ptr_nonnull(strstr(text, "communicator=\"unknown\"} 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "communicator=\"1500000000000000\"} 1\n"));
	ck_assert_ptr_null(strstr(text, "communicator=\"1600000000000000\""));
	ck_assert_ptr_nonnull(strstr(text, "communicator=\"other\"} 2\n"));
	free(text);
	/* The rank restarts as a new process: its new counts add on. */
	gpu_proc_get(&ses.gpu, 10)->exited = true;
	job_on_exit(&ses.job, 10, 102 * S, 0);
	metrics_update(&m, &ses, 102 * S);
	proc(12, 1, TB_ROLE_TRAINER, 0, "j1");
	comm(12, 0x1000, 0xde, 7);
	metrics_update(&m, &ses, 103 * S);
	text = exposition();
	ck_assert_ptr_nonnull(strstr(text, "communicator=\"de00000000000000\"} 52\n"));
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nfail;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, ranks_and_roles_are_series);
	tcase_add_test(tc, counters_survive_processes);
	tcase_add_test(tc, a_split_that_changes_adds_no_time);
	tcase_add_test(tc, series_go_after_the_grace_period);
	tcase_add_test(tc, job_id_falls_back_to_the_launcher);
	tcase_add_test(tc, label_values_are_escaped);
	tcase_add_test(tc, pods_from_cgroup_paths);
	tcase_add_test(tc, labels_from_the_environment);
	tcase_add_test(tc, labels_of_trainers_only);
	tcase_add_test(tc, another_users_claim_is_its_own_job);
	tcase_add_test(tc, one_user_cannot_take_the_nodes_series);
	tcase_add_test(tc, findings_per_job);
	tcase_add_test(tc, step_time_and_epochs);
	tcase_add_test(tc, stalled_job_gauge);
	tcase_add_test(tc, collectives_per_communicator);
	tcase_add_test(tc, setup_series_no_teardown);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail ? EXIT_FAILURE : EXIT_SUCCESS;
}
