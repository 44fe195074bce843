// SPDX-License-Identifier: BSD-3-Clause
/*
 * trainbpf: the life of the tool, top to bottom. Parse options, check the
 * targets, load and attach the BPF programs, register the job's running
 * threads (or launch the command), then refresh the accounting on a short
 * clock until the job exits, time runs out or a signal comes, and print
 * the final report. "trainbpf record" does the same into a SQLite file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "account.h"
#include "cli.h"
#include "cli_read.h"
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "job.h"
#include "launch.h"
#include "live.h"
#include "procfs.h"
#include "record.h"
#include "states.h"
#include "report.h"
#include "steps.h"
#include "tracer.h"

#define TICK_NS 200000000ull	/* refresh period: rare enough to cost nothing */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	/* No SA_RESTART: a signal must cut the tick's sleep short. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int check_pids(const struct env *env)
{
	struct proc_stat st;

	for (int i = 0; i < env->npids; i++) {
		if (procfs_stat(env->pids[i], 0, &st) || st.state == 'Z') {
			fprintf(stderr, "trainbpf: no such process: %d\n", env->pids[i]);
			return -1;
		}
		if (procfs_is_kthread(&st)) {
			fprintf(stderr, "trainbpf: %d (%s) is a kernel thread: trace user processes\n",
				env->pids[i], st.comm);
			return -1;
		}
	}
	return 0;
}

static void start_window(struct job *job)
{
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	job->window_start_ns = now_ns();
	job->window_start_unix = rt.tv_sec + rt.tv_nsec / 1e9;
}

static int start_epochs(struct epochs *ep, const struct env *env, struct job *job)
{
	char why[128];

	if (epochs_init(ep, env->epochs, env->epoch_interval_s, env->epoch_regex,
			job->window_start_ns, why, sizeof(why))) {
		fprintf(stderr, "trainbpf: invalid epoch regex: %s\n", why);
		return -1;
	}
	return 0;
}

static int start_targets(struct tracer *tr, const struct env *env,
			 struct launch *l)
{
	if (env->command) {
		if (launch_fork(l, env->command) ||
		    tracer_add_process(tr, l->pid, true))
			return -1;
		return launch_release(l);
	}
	for (int i = 0; i < env->npids; i++) {
		if (tracer_add_process(tr, env->pids[i], true)) {
			fprintf(stderr, "trainbpf: process %d exited before it could be traced\n",
				env->pids[i]);
			return -1;
		}
	}
	tracer_add_descendants(tr);
	return 0;
}

static void sync_roles(struct tracer *tr, struct job *job)
{
	if (!job_classify_roles(job))
		return;
	for (int i = 0; i < job->nprocs; i++)
		if (job_proc_alive(&job->procs[i]))
			tracer_set_role(tr, job->procs[i].pid, job->procs[i].role);
}

/*
 * Returns the instant the totals are read at: after the events are drained,
 * since a long drain (a recording's state rows) lets BPF close intervals
 * past an instant read before it, and totals past their own timestamp.
 */
static uint64_t refresh(struct tracer *tr, struct job *job)
{
	uint64_t now;

	tracer_drain_events(tr);
	now = now_ns();
	account_refresh(tr, now);
	sync_roles(tr, job);
	gpu_tick(job->gpu, job, now);
	/* Memory at an epoch's end is read at the boundary, not a second on. */
	diag_sample(job->diag, job, now, epochs_pending(job->epochs));
	/* Periods first: an epoch that ends now counts the steps found now. */
	steps_tick(job->epochs->calls);
	epochs_tick(job->epochs, job, now);
	return now;
}

/*
 * Sleeps until the next tick, or less: an epoch boundary or a fork wakes
 * us so that the totals it splits are read at once. Returns the time.
 */
static uint64_t wait_tick(struct tracer *tr, struct job *job, uint64_t *next_tick)
{
	uint64_t now = now_ns();

	while (!stop_signal) {
		uint64_t until = epochs_wake_at(job->epochs);

		if (until > *next_tick)
			until = *next_tick;
		if (now >= until)
			break;
		tracer_wait(tr, (until - now + 999999) / 1000000);
		now = now_ns();
	}
	if (now >= *next_tick)
		*next_tick = now + TICK_NS;
	return now;
}

/* Ticks until the job is gone, time is up, a signal, or the recording fails. */
static int trace_loop(struct tracer *tr, struct job *job,
		      const struct env *env, struct launch *l, FILE *live)
{
	struct live lv;
	int err = 0;
	uint64_t interval = env->interval_s * 1e9, start = job->window_start_ns;
	uint64_t next_live = start + interval;
	uint64_t deadline = env->duration_s ? start + env->duration_s * 1e9 : 0;

	uint64_t next_tick = start + TICK_NS;

	live_init(&lv);
	while (!stop_signal) {
		uint64_t now;

		wait_tick(tr, job, &next_tick);
		now = refresh(tr, job);
		launch_reap(l);
		if (tr->rec && record_tick(tr->rec, tr, job, now)) {
			err = -1;
			break;
		}
		if (interval)
			live_epochs(live, &lv, job);
		if (env->step_blocks)
			live_step_blocks(live, &lv, job, env->step_blocks, now);
		if (interval && now >= next_live) {
			gpu_refresh(job->gpu);
			live_table(live, &lv, job, now);
			next_live += interval;
		}
		if ((deadline && now >= deadline) || !job_live_procs(job))
			break;
	}
	live_free(&lv);
	/* Let the launched job stop with us when told to stop (timeout, systemd). */
	if (stop_signal == SIGTERM && l->pid > 0 && !l->reaped) {
		kill(l->pid, SIGTERM);
		launch_wait(l, 2000);
	}
	return err;
}

static FILE *open_output(const struct env *env)
{
	FILE *f;

	if (!env->output)
		return stdout;
	f = fopen(env->output, "w");
	if (!f)
		fprintf(stderr, "trainbpf: cannot write %s: %s\n", env->output, strerror(errno));
	return f;
}

/* The last refresh: every total final, every epoch closed. */
static uint64_t final_refresh(struct tracer *tr, struct job *job)
{
	uint64_t now = refresh(tr, job);

	diag_sample(job->diag, job, now, true);
	epochs_finish(job->epochs, job, now);
	return now;
}

static void warn_losses(const struct tb_counters bpf)
{
	if (bpf.events_lost)
		fprintf(stderr, "trainbpf: warning: %llu events lost (process lifecycle, epoch markers or lines: ring buffer full; try --ringbuf-size)\n",
			(unsigned long long)bpf.events_lost);
	if (bpf.slots_exhausted || bpf.storage_failed)
		fprintf(stderr, "trainbpf: warning: %llu threads not traced (more than --max-threads at once)\n",
			(unsigned long long)(bpf.slots_exhausted + bpf.storage_failed));
	if (bpf.states_lost)
		fprintf(stderr, "trainbpf: warning: %llu state intervals lost (state stream ring full; try --states-ring)\n",
			(unsigned long long)bpf.states_lost);
}

/* Returns the time the report's open intervals were closed at. */
static uint64_t final_report(struct tracer *tr, struct job *job,
			     const struct env *env, FILE *out)
{
	struct tb_counters bpf;
	struct run_counters c;
	uint64_t now = final_refresh(tr, job);

	gpu_refresh(job->gpu);	/* the per-process counts and the totals alike */
	tracer_counters(tr, &bpf);
	job_counters(job, &bpf, &c);
	warn_losses(bpf);
	if (env->format == TB_FMT_JSON)
		report_json(out, job, &c, now);
	else
		report_text(out, job, &c, now);
	fflush(out);
	return now;
}

static int final_record(struct tracer *tr, struct job *job, const struct env *env)
{
	struct tb_counters bpf;
	uint64_t now = final_refresh(tr, job);
	struct stat st = { .st_size = 0 };
	int nthreads = 0;

	gpu_refresh(job->gpu);
	tracer_counters(tr, &bpf);
	warn_losses(bpf);
	if (record_finish(tr->rec, tr, job, now))
		return -1;
	for (int i = 0; i < job->nprocs; i++)
		nthreads += job->procs[i].nthreads;
	stat(env->record_path, &st);
	fprintf(stderr, "trainbpf: recorded %.1f s, %d processes, %d threads into %s (%.1f MB)\n",
		(now - job->window_start_ns) / 1e9, job->nprocs, nthreads,
		env->record_path, st.st_size / 1e6);
	return 0;
}

/* --states-out: the state stream as text, a debugging and test aid. */
static int open_states_out(struct states *st, struct tracer *tr,
			   const struct env *env, FILE **f)
{
	if (!env->states_out)
		return 0;
	*f = fopen(env->states_out, "w");
	if (!*f) {
		fprintf(stderr, "trainbpf: cannot write %s: %s\n", env->states_out,
			strerror(errno));
		return -1;
	}
	states_tsv_header(*f);
	if (states_open(st, tr, states_write_tsv, *f))
		return -1;
	tr->states = st;
	return 0;
}

/*
 * The records that closed after the report was made go out too; the
 * trailer says where the report cut, so that a reader can match its totals.
 */
static void close_states_out(struct states *st, struct tracer *tr, FILE *f,
			     uint64_t report_ns)
{
	if (!f)
		return;
	if (report_ns) {
		states_drain(st);
		fprintf(f, "# report_ns=%llu states_lost=%llu\n",
			(unsigned long long)report_ns,
			(unsigned long long)states_lost(tr));
	}
	tr->states = NULL;
	states_close(st);
	fclose(f);
}

/* The tool's life, live or recording (env->record_path). */
static int trace(const struct env *env_in)
{
	struct env env = *env_in;
	struct job job = {};
	struct tracer tr = {};
	struct gpu gpu = {};
	struct epochs ep = {};
	struct diag dg;
	struct steps steps = {};
	struct launch l = { .pid = 0 };
	struct recorder rec = {};
	struct states states = {};
	FILE *out = NULL, *states_out = NULL;
	uint64_t report_ns = 0;
	int err = 1;

	diag_init(&dg);
	job.diag = &dg;
	if (check_pids(&env))
		return 1;
	/* Fail on an unwritable report file before the job runs, not after. */
	out = env.record_path ? stdout : open_output(&env);
	if (!out)
		return 1;
	install_signals();
	if (tracer_open(&tr, &env, &job) ||
	    open_states_out(&states, &tr, &env, &states_out))
		goto cleanup;
	gpu_init(&gpu, &tr, env.launches, env.verbose);
	tr.gpu = job.gpu = &gpu;
	start_window(&job);
	if (start_epochs(&ep, &env, &job))
		goto cleanup;
	ep.calls = &steps;
	job.epochs = &ep;
	if (env.record_path) {
		if (record_open(&rec, env.record_path, &env, &job) ||
		    record_states(&rec, &states, &tr))
			goto cleanup;
		tr.rec = &rec;
	}
	if (start_targets(&tr, &env, &l)) {
		err = env.command ? 127 : 1;
		goto cleanup;
	}
	gpu_tick(&gpu, &job, now_ns());	/* -p: the libraries are there already */
	if (trace_loop(&tr, &job, &env, &l, env.format == TB_FMT_JSON ? stderr : stdout))
		goto cleanup;
	if (env.record_path) {
		if (final_record(&tr, &job, &env))
			goto cleanup;
	} else {
		report_ns = final_report(&tr, &job, &env, out);
	}
	launch_reap(&l);
	err = env.command ? launch_exit_code(&l) : 0;
cleanup:
	close_states_out(&states, &tr, states_out, report_ns);
	if (tr.states) {	/* record: the final refresh drained it */
		tr.states = NULL;
		states_close(&states);
	}
	record_close(&rec);
	gpu_free(&gpu);	/* its probes before the programs they run */
	epochs_free(&ep);
	diag_free(&dg);
	steps_free(&steps);
	tracer_close(&tr);
	job_free(&job);
	if (out && out != stdout)
		fclose(out);
	return err;
}

static int live_main(int argc, char **argv)
{
	struct env env;

	cli_parse(argc, argv, &env);
	return trace(&env);
}

static int record_main(int argc, char **argv)
{
	struct env env;

	argv[0] = "trainbpf record";	/* argp names the program by it */
	cli_parse_record(argc, argv, &env);
	return trace(&env);
}

/*
 * Subcommands, by the first argument; anything else is the live tool's
 * options. To add one: a line here and a NAME_main(argc, argv) that gets
 * argv from the subcommand's name on (argv[0] = "NAME").
 */
static const struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
} subcommands[] = {
	{ "record", record_main },
};

int main(int argc, char **argv)
{
	int rc;

	/* report, trace, diff: reading recordings (cli_read.c). */
	if (cli_read_dispatch(argc, argv, &rc))
		return rc;
	for (size_t i = 0; argc > 1 && i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].main(argc - 1, argv + 1);
	return live_main(argc, argv);
}
