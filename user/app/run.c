// SPDX-License-Identifier: BSD-3-Clause
/*
 * The tool's life, top to bottom: check the targets, load and attach the
 * BPF programs, register the job's running threads (or launch the
 * command), then refresh the accounting on a short clock until the job
 * exits, time runs out or a signal comes, and print the final report or
 * finish the recording. This file and main() are the only ones that know
 * every part: who hears about an event, and in what order, is decided
 * here (on_event).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "account.h"
#include "clock.h"
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "lib_probes.h"
#include "gpu_sampler.h"
#include "gpu_util.h"
#include "job.h"
#include "labels.h"
#include "launch.h"
#include "live.h"
#include "live_screen.h"
#include "memory.h"
#include "phases.h"
#include "output.h"
#include "procfs.h"
#include "pyreader.h"
#include "pystacks.h"
#include "record.h"
#include "report.h"
#include "run.h"
#include "serve.h"
#include "session.h"
#include "top.h"
#include "stall_observe.h"
#include "states.h"
#include "steps.h"
#include "tracer.h"

#define TICK_NS 200000000ull	/* refresh period: rare enough to cost nothing */
#define REAP_NS 1000000000ull	/* how often /proc is asked who has ended */
#define REAP_MAX 64		/* silent exits taken a tick: the rest the next */

/* Everything one run holds: the models in ses, and what fills and shows them. */
struct run {
	const struct env *env;
	struct session ses;	/* the models: the tracer fills ses.job */
	struct tracer tr;
	struct lib_probes gp;	/* finds CUDA/NCCL code, probes it, counts into ses.gpu */
	struct gpu_sampler gs;	/* reads the GPUs (NVML) into ses.gu */
	struct pyreader pr;	/* --functions: reads Python stacks into ses.py */
	bool ending;		/* the last refresh: the GPUs are read whatever the time */
	struct stall_obs *sobs;	/* ses.stall's observations, kept between ticks */
	int sobs_cap;
	struct mem_sampler mem;	/* memory, RSS and ranks from /proc into ses.diag */
	struct launch l;
	struct live lv;
	struct live_screen screen;	/* the live view in place, on a terminal */
	struct recorder rec;
	bool recording;
	struct serve srv;	/* serve: the node's daemon */
	struct top top;		/* trainbpf top: srv's table on the terminal */
	struct states states;
	struct states *stream;	/* &states while the state stream is consumed */
	FILE *out, *states_out;
	FILE *folded;		/* --folded's file */
	bool out_failed;	/* the final report could not be written: said */
	sigset_t ignored;	/* signals ignored when trainbpf started */
	uint64_t next_reap;
};

static volatile sig_atomic_t stop_signal, rescan_signal, resized;
static bool serving;

static void on_winch(int sig)
{
	resized = 1;
}

/*
 * serve: SIGHUP looks for new processes at once (a daemon's reload); top,
 * on a terminal, ends with it as the live tool does (a closed terminal).
 */
static void on_signal(int sig)
{
	if (serving && sig == SIGHUP)
		rescan_signal = 1;
	else
		stop_signal = sig;
}

/*
 * SIGINT, SIGTERM and SIGHUP (a closed terminal, systemd) end the run with
 * its report or the recording's last flush. A SIGHUP ignored when we
 * started (nohup) stays ignored. *ignored: what was, for the command.
 */
static void install_signals(sigset_t *ignored)
{
	struct sigaction sa = { .sa_handler = on_signal }, old;

	sigemptyset(ignored);
	for (int sig = 1; sig < NSIG; sig++)
		if (!sigaction(sig, NULL, &old) && old.sa_handler == SIG_IGN)
			sigaddset(ignored, sig);
	/* No SA_RESTART: a signal must cut the tick's sleep short. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (!sigismember(ignored, SIGHUP))
		sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/*
 * -p names processes; a thread's id (from top -H) stands for its process,
 * which is traced whole, as a process's threads are. Said on stderr.
 */
static int check_pids(struct env *env)
{
	struct proc_stat st;

	for (int i = 0; i < env->npids; i++) {
		pid_t tgid;

		if (procfs_stat(env->pids[i], 0, &st) || st.state == 'Z') {
			fprintf(stderr, "trainbpf: no such process: %d\n", env->pids[i]);
			return -1;
		}
		tgid = procfs_tgid(env->pids[i]);
		if (tgid > 0 && tgid != env->pids[i]) {
			fprintf(stderr, "trainbpf: %d is a thread of process %d: tracing the process\n",
				env->pids[i], tgid);
			env->pids[i] = tgid;
		}
		if (procfs_is_kthread(&st)) {
			fprintf(stderr, "trainbpf: %d (%s) is a kernel thread: trace user processes\n",
				env->pids[i], st.comm);
			return -1;
		}
	}
	return 0;
}

/* A fork, exec or exit: the recorder logs it, the model follows it. */
static void on_lifecycle(struct run *r, const struct tb_event *e)
{
	if (r->recording)
		record_on_lifecycle(&r->rec, e);
	if (e->type == TB_EV_FORK) {
		job_on_fork(&r->ses.job, e->pid, e->ppid, e->comm, e->ts);
		epochs_on_fork(&r->ses.ep, e->pid, e->ppid, e->ts);
	} else if (e->type == TB_EV_EXEC) {
		if (job_on_exec(&r->ses.job, e->pid, e->comm, e->path)) {
			tracer_on_exec(&r->tr, e->pid);
			lib_probes_on_exec(&r->gp, e->pid, e->ts);
		}
	} else if (e->type == TB_EV_EXIT) {
		if (job_on_exit(&r->ses.job, e->pid, e->ts, e->exit_code)) {
			epochs_on_exit(&r->ses.ep, e->pid, e->ts);
			tracer_forget_process(&r->tr, e->pid);
		}
	}
}

/* A process that switched since: it ran, so it had not ended; /proc is not asked. */
static bool ran_since_asked(struct proc_rec *p)
{
	uint64_t n = 0;

	for (int i = 0; i < p->nthreads; i++)
		n += p->threads[i].nswitch;
	if (n == p->reap_nswitch)
		return false;
	p->reap_nswitch = n;
	return true;
}

/*
 * Processes /proc says have ended, asked before the events are drained: an
 * exit's event is sent before its process is a zombie, so one still alive
 * in the job after the drain sent none that will come.
 */
static int ended_unheard(struct run *r, uint64_t now, pid_t *pids, int *codes)
{
	int n = 0;

	if (now < r->next_reap)
		return 0;
	r->next_reap = now + REAP_NS;
	for (int i = 0; i < r->ses.job.nprocs && n < REAP_MAX; i++) {
		struct proc_rec *p = &r->ses.job.procs[i];

		if (job_proc_alive(p) && !ran_since_asked(p) && procfs_exited(p->pid, &codes[n]))
			pids[n++] = p->pid;
	}
	return n;
}

/*
 * An exit the probes never sent: a target that was a zombie when attached
 * (it ended before the probes were in), or an event the ring buffer lost.
 * It ends when it is seen ended, so that a run following it ends too.
 */
static void exit_unheard(struct run *r, pid_t pid, int code, uint64_t now)
{
	const struct proc_rec *p = job_proc_const(&r->ses.job, pid);
	struct tb_event e = { .type = TB_EV_EXIT, .pid = pid, .ts = now, .exit_code = code };

	if (!p || !job_proc_alive(p))
		return;
	e.ppid = p->ppid;
	memcpy(e.comm, p->comm, sizeof(e.comm));
	if (r->env->verbose)
		fprintf(stderr, "trainbpf: process %d ended unseen by the probes\n", pid);
	on_lifecycle(r, &e);
}

/* Every event the tracer drains, handed on in this order. */
/*
 * Whether pid has libtorch mapped (its probes found it). Elsewhere a phase
 * event is only a worker start-up mark (bpf/torch.bpf.h: a fork outside
 * any bracket), in a job with no phases: a C launcher forking its ranks or
 * workers, whose generations and diagnosis must not wait for batches.
 */
static bool torch_process(const struct run *r, pid_t pid)
{
	const struct gpu_proc *p = gpu_proc_find(&r->ses.gpu, pid);

	for (int i = 0; p && i < p->nmaps; i++)
		if (r->ses.gpu.objs[p->maps[i].obj].families & (1u << LIB_TORCH))
			return true;
	return false;
}

static void on_event(void *ctx, const struct tracer_event *ev)
{
	struct run *r = ctx;

	switch (ev->kind) {
	case TR_EV_CALL:
		steps_on_event(&r->ses.steps, ev->call);
		break;
	case TR_EV_COMM:
		gpu_on_comm(&r->ses.gpu, ev->comm);
		break;
	case TR_EV_TEXT:
		/* The recorder queues a marker as a step after epochs took it. */
		epochs_on_event(&r->ses.ep, ev->text);
		if (r->recording)
			record_on_text(&r->rec, &r->ses.ep, ev->text);
		break;
	case TR_EV_PHASE:
		/* Every one: the stacks' spans count them as BPF does. */
		if (r->ses.py_on)
			pystacks_on_phase(&r->ses.py, ev->phase);
		if (!torch_process(r, ev->phase->pid))
			break;
		if (phases_on_event(&r->ses.phases, ev->phase))
			epochs_on_trainer(&r->ses.ep, &r->ses.job, ev->phase->pid);
		epochs_on_phase(&r->ses.ep, ev->phase);
		if (r->recording)
			record_on_phase(&r->rec, &r->ses.ep, ev->phase);
		break;
	case TR_EV_SCOPE:
		if (r->recording && torch_process(r, ev->scope->pid))
			record_on_scope(&r->rec, ev->scope);
		break;
	case TR_EV_LIFECYCLE:
		on_lifecycle(r, ev->life);
		break;
	case TR_EV_LIBRARY:
		lib_probes_on_library(&r->gp, &r->ses.job, ev->life->pid, now_ns());
		break;
	case TR_EV_EXEC_SEEN:
		if (r->env->serve)	/* and top */
			serve_on_exec(&r->srv, &r->tr, ev->pid);
		break;
	}
}

static int open_tracer(struct run *r)
{
	const struct env *env = r->env;
	struct tracer_opts o = {
		.btf_path = env->btf_path, .verbose = env->verbose,
		.max_threads = env->max_threads, .ringbuf_kb = env->ringbuf_kb,
		.thread_quota = env->serve ? serve_thread_quota(env->max_threads) : 0,
		.states = env->states, .states_ring_kb = env->states_ring_kb,
		.text = env->epochs == EP_AUTO || env->epochs == EP_REGEX,
		/* serve: epochs and steps from the phases, per rank; lines are a job's */
		.no_syscalls = env->serve,
		.no_phases = env->no_phases,
		.py_period_ns = env->functions ? 1000000000ull / env->stack_hz : 0,
		.watch_execs = env->serve && (env->match || env->cgroup),
		.on_event = on_event, .ctx = r,
	};

	return tracer_open(&r->tr, &o, &r->ses.job);
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
	ep->attached = !env->command;
	return 0;
}

/* An exit status: 0, 1 (not traced, said), 127 (the command did not start). */
static int start_targets(struct tracer *tr, const struct env *env,
			 struct launch *l, const sigset_t *ignored)
{
	int err;

	if (env->command) {
		if (launch_fork(l, env->command, ignored))
			return 1;
		err = tracer_add_process(tr, l->pid, true);
		if (err) {
			fprintf(stderr, "trainbpf: cannot trace the command: %s\n", strerror(-err));
			launch_abort(l);
			return 1;
		}
		return launch_release(l) ? 127 : 0;
	}
	for (int i = 0; i < env->npids; i++) {
		err = tracer_add_process(tr, env->pids[i], true);
		if (err == -ESRCH)
			fprintf(stderr, "trainbpf: process %d exited before it could be traced\n",
				env->pids[i]);
		else if (err)
			fprintf(stderr, "trainbpf: cannot trace process %d: %s\n", env->pids[i],
				strerror(-err));
		if (err)
			return 1;
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
 * What nothing needs one by one any more is folded (job.h), once a
 * recording has written it; whoever keeps arrays parallel to the job's
 * processes follows: the tracer's slot owners, the epochs' snapshots, the
 * recorder's rows, the live view's totals.
 */
static void fold(struct run *r, uint64_t now)
{
	uint64_t settled = now;
	struct job_fold f;

	if (r->recording)
		settled = r->rec.flushed_ns > TICK_NS ? r->rec.flushed_ns - TICK_NS : 0;
	if (!job_fold(&r->ses.job, now, settled, &f))
		return;
	tracer_on_fold(&r->tr, &f);
	epochs_on_fold(&r->ses.ep, &r->ses.job, &f);
	if (r->recording)
		record_on_fold(&r->rec, &r->ses.job, &f);
	live_on_fold(&r->lv, &f);
	job_fold_free(&f);
}

/* Each rank's progress and wait, as the slots say now, into the stall model. */
static void stall_tick(struct run *r, uint64_t now)
{
	int n = stall_observe(&r->tr, &r->ses, r->env->serve, &r->sobs, &r->sobs_cap);

	stall_update(&r->ses.stall, r->sobs, n, now);
}

/*
 * Returns the instant the totals are of: taken after every slot is read
 * (account_refresh), since BPF may close intervals while they are.
 */
static uint64_t refresh(struct run *r, bool tick)
{
	struct job *job = &r->ses.job;
	pid_t ended[REAP_MAX];
	int codes[REAP_MAX], nended;
	uint64_t now;

	nended = ended_unheard(r, now_ns(), ended, codes);
	/* A recording's drain is a transaction: 5 a second, not one a fork. */
	if (r->stream && tick)
		states_drain(r->stream);
	tracer_drain_events(&r->tr);
	now = now_ns();
	for (int i = 0; i < nended; i++)
		exit_unheard(r, ended[i], codes[i], now);
	now = account_refresh(&r->tr, now);
	if (r->ses.phases_on)
		phases_sync_ends(&r->ses.phases, job);
	sync_roles(&r->tr, job);
	/*
	 * A fork asks for a refresh of its own (epochs.c), 25 a second in a
	 * soak: what keeps to its own pace waits for the tick, since each is a
	 * pass over every process (folding, over every thread).
	 */
	if (tick) {
		/* A recording names its training job (meta job): merged reports match by it. */
		if (r->recording)
			labels_refresh(job, "/proc", true);
		fold(r, now);
		lib_probes_tick(&r->gp, job, now);
		if (r->ses.py_on)
			pyreader_tick(&r->pr, job);
	}
	/* Memory at an epoch's end is read at the boundary, not a second on. */
	mem_sample(&r->mem, job, now, epochs_pending(&r->ses.ep));
	/* The GPUs too, before the boundary closes their windows. */
	gpu_sampler_tick(&r->gs, job, now, epochs_pending(&r->ses.ep) || r->ending);
	/* Periods first: an epoch that ends now counts the steps found now. */
	steps_tick(&r->ses.steps);
	epochs_tick(&r->ses.ep, job, now);
	/*
	 * Not at the last refresh: Ctrl-C on a terminal reaches the hung job
	 * too, and wakes it to die; the report says what the last tick saw.
	 */
	if (tick && !r->ending)
		stall_tick(r, now);
	return now;
}

/*
 * Sleeps until the next tick, or less: an epoch boundary or a fork wakes
 * us so that the totals it splits are read at once. True at a tick.
 */
static bool wait_tick(struct run *r, uint64_t *next_tick)
{
	uint64_t now = now_ns();

	while (!stop_signal) {
		uint64_t until = epochs_wake_at(&r->ses.ep);

		if (until > *next_tick)
			until = *next_tick;
		if (now >= until)
			break;
		tracer_wait(&r->tr, (until - now + 999999) / 1000000);
		now = now_ns();
	}
	if (now < *next_tick)
		return false;
	*next_tick = now + TICK_NS;
	return true;
}

static int record_tick_now(struct run *r, uint64_t now)
{
	struct tb_counters bpf;

	tracer_counters(&r->tr, &bpf);
	return record_tick(&r->rec, &r->ses, &bpf, now);
}

/* A terminal's rows and columns; false if live is none. */
static bool term_size(FILE *live, int *rows, int *cols)
{
	struct winsize ws;

	if (ioctl(fileno(live), TIOCGWINSZ, &ws) || !ws.ws_row || !ws.ws_col)
		return false;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return true;
}

/*
 * The live view refreshes in place when it goes to a terminal (not a file
 * or a pipe: those get the tables one after another, as before), with a
 * table to show (-i) and a TERM that understands it.
 */
static void screen_start(struct run *r, FILE *live)
{
	struct sigaction sa = { .sa_handler = on_winch };
	const char *term = getenv("TERM");
	int rows, cols;

	if (!r->env->interval_s || !isatty(fileno(live)) || !term || !strcmp(term, "dumb") ||
	    !term_size(live, &rows, &cols))
		return;
	live_screen_start(live, &r->screen, rows, cols);
	if (r->screen.on)
		sigaction(SIGWINCH, &sa, NULL);
}

/* The panel, at once after a resize, else every -i seconds. */
static void screen_show(struct run *r, FILE *live, uint64_t now, uint64_t *next_live)
{
	int rows, cols;
	bool due = now >= *next_live;

	if (resized && term_size(live, &rows, &cols)) {
		live_screen_resize(live, &r->screen, rows, cols);
		due = true;
	}
	resized = 0;
	if (!due)
		return;
	lib_probes_read(&r->gp);
	live_screen_draw(live, &r->screen, &r->lv, &r->ses, now);
	if (now >= *next_live)
		*next_live += r->env->interval_s * 1e9;
}

/* What the live view prints after a refresh. */
static void show(struct run *r, FILE *live, uint64_t now, uint64_t *next_live)
{
	const struct env *env = r->env;
	uint64_t interval = env->interval_s * 1e9;

	if (r->screen.on) {
		screen_show(r, live, now, next_live);
		return;
	}

	if (interval)
		live_epochs(live, &r->lv, &r->ses);
	if (env->step_blocks)
		live_step_blocks(live, &r->lv, &r->ses, env->step_blocks, now);
	if (interval && now >= *next_live) {
		lib_probes_read(&r->gp);
		live_table(live, &r->lv, &r->ses, now);
		*next_live += interval;
	}
}

/*
 * Lets the launched job stop with us when told to stop (timeout, systemd,
 * a closed terminal). Ctrl-C reaches the job from the terminal itself.
 */
static void pass_signal(struct launch *l)
{
	if ((stop_signal == SIGTERM || stop_signal == SIGHUP) && l->pid > 0 && !l->reaped) {
		kill(l->pid, stop_signal);
		launch_wait(l, 2000);
	}
}

static uint64_t deadline_of(const struct run *r)
{
	return r->env->duration_s ? r->ses.job.window_start_ns + r->env->duration_s * 1e9 : 0;
}

/* Ticks until the job is gone, time is up, a signal, or the recording fails. */
static int trace_loop(struct run *r, FILE *live)
{
	const struct env *env = r->env;
	uint64_t start = r->ses.job.window_start_ns, next_tick = start + TICK_NS;
	uint64_t next_live = start + (uint64_t)(env->interval_s * 1e9);
	uint64_t deadline = deadline_of(r);
	int err = 0;

	if (!env->serve)
		screen_start(r, live);
	while (!stop_signal) {
		uint64_t now;

		now = refresh(r, wait_tick(r, &next_tick));
		launch_reap(&r->l);
		if (r->recording && record_tick_now(r, now)) {
			err = -1;
			break;
		}
		if (env->serve) {
			/*
			 * Taken and cleared in one step: a SIGHUP that comes
			 * while the tick runs is the next tick's, not lost.
			 */
			bool hup = __atomic_exchange_n(&rescan_signal, 0, __ATOMIC_SEQ_CST);

			if (!serve_tick(&r->srv, &r->ses, &r->tr, &r->gp, now, hup) ||
			    (deadline && now >= deadline))
				break;	/* top: q, enter, or -d */
			continue;	/* a daemon: jobs come and go */
		}
		show(r, live, now, &next_live);
		if ((deadline && now >= deadline) || !job_live_procs(&r->ses.job))
			break;
	}
	live_screen_end(live, &r->screen);
	pass_signal(&r->l);
	return err;
}

/*
 * The recording failed (said): the launched job must not pay for it. It
 * runs on untraced, to its end, to -d or to a signal, as it would have,
 * and its exit status is ours.
 */
static int wait_untraced(struct launch *l, uint64_t deadline)
{
	while (!l->reaped && !stop_signal && (!deadline || now_ns() < deadline))
		launch_wait(l, 100);
	pass_signal(l);
	return launch_exit_code(l);
}

/* The last refresh: every total final, every epoch closed. */
static uint64_t final_refresh(struct run *r)
{
	uint64_t now;

	r->ending = true;
	now = refresh(r, true);

	mem_sample(&r->mem, &r->ses.job, now, true);
	phases_settle_tail(&r->ses.phases, &r->ses.job);
	epochs_finish(&r->ses.ep, &r->ses.job, now);
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

/* The final report of the model as it is now, in the format asked for. */
static void print_report(struct run *r, const struct tb_counters *bpf, uint64_t now)
{
	struct run_counters c;

	if (out_begin(r->out, r->env->output)) {
		r->out_failed = true;
		return;
	}
	job_counters(&r->ses.job, bpf, &c);
	report_write(r->out, report_format_for(r->env->output, r->env->format, r->env->format_set,
					    r->env->detail),
		     &r->ses, &c, now);
	/* No flush here: out_close flushes and says why a write failed. */
}

/* Returns the time the report's open intervals were closed at. */
static uint64_t final_report(struct run *r)
{
	struct tb_counters bpf;
	uint64_t now = final_refresh(r);

	lib_probes_read(&r->gp);	/* the per-process counts and the totals alike */
	phases_finish(&r->ses.phases, &r->ses.gpu);
	if (r->ses.py_on)
		pyreader_finish(&r->pr, now);
	tracer_counters(&r->tr, &bpf);
	warn_losses(bpf);
	print_report(r, &bpf, now);
	if (r->folded && (out_begin(r->folded, r->env->folded) ||
			  report_functions_folded(r->folded, &r->ses)))
		r->out_failed = true;
	return now;
}

/*
 * The last flush, from the same model and instant as the report that
 * --report writes: `trainbpf report` of the file prints those bytes again.
 */
static int final_record(struct run *r)
{
	struct tb_counters bpf;
	uint64_t now = final_refresh(r);
	struct stat st = { .st_size = 0 };
	int nprocs = 0, nthreads = 0;

	lib_probes_read(&r->gp);
	phases_finish(&r->ses.phases, &r->ses.gpu);
	if (r->ses.py_on)
		pyreader_finish(&r->pr, now);
	tracer_counters(&r->tr, &bpf);
	warn_losses(bpf);
	if (r->env->output)
		print_report(r, &bpf, now);
	if (record_finish(&r->rec, &r->ses, &bpf, now))
		return -1;
	for (int i = 0; i < r->ses.job.nprocs; i++) {
		nprocs += proc_count(&r->ses.job.procs[i]);
		nthreads += proc_nthreads(&r->ses.job.procs[i]);
	}
	stat(r->env->record_path, &st);
	fprintf(stderr, "trainbpf: recorded %.1f s, %d processes, %d threads into %s (%.1f MB)\n",
		(now - r->ses.job.window_start_ns) / 1e9, nprocs, nthreads,
		r->env->record_path, st.st_size / 1e6);
	return 0;
}

/* --states-out: the state stream as text, a debugging and test aid. */
static int open_states_out(struct run *r)
{
	const struct env *env = r->env;

	if (!env->states_out)
		return 0;
	/* Written from the first tick on: what the file held goes now. */
	r->states_out = out_open(env->states_out);
	if (!r->states_out || out_begin(r->states_out, env->states_out))
		return -1;
	states_tsv_header(r->states_out);
	if (states_open(&r->states, &r->tr, states_write_tsv, r->states_out))
		return -1;
	r->stream = &r->states;
	return 0;
}

/*
 * What the kernel's counters date differently from us, per thread (the
 * switches after a wakeup preemption, tb_slot.kskew_ns): our cpu plus it is
 * schedstat's, our runqueue minus it is run_delay's.
 */
static void states_out_skews(FILE *f, const struct job *job)
{
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];

		for (int j = 0; j < p->nthreads; j++)
			if (p->threads[j].tid && p->threads[j].kskew_ns)
				fprintf(f, "# tid=%d kernel_skew_ns=%lld\n", p->threads[j].tid,
					(long long)p->threads[j].kskew_ns);
	}
}

/*
 * The records that closed after the report was made go out too; the
 * trailer says where the report cut, so that a reader can match its totals,
 * and what the kernel's counters date differently.
 * -1 if a write failed (said).
 */
static int close_states_out(struct run *r, uint64_t report_ns)
{
	int err;

	if (!r->states_out)
		return 0;
	if (report_ns) {
		states_drain(&r->states);
		states_out_skews(r->states_out, &r->ses.job);
		fprintf(r->states_out, "# report_ns=%llu states_lost=%llu\n",
			(unsigned long long)report_ns,
			(unsigned long long)states_lost(&r->tr));
	}
	r->stream = NULL;
	states_close(&r->states);
	err = out_close(r->states_out, r->env->states_out);
	r->states_out = NULL;
	return err;
}

/* The traced command line, or "-p PID,..." */
static void command_line(const struct env *env, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	if (!env->command) {
		off = snprintf(buf, len, "-p ");
		for (int i = 0; i < env->npids && off < len; i++)
			off += snprintf(buf + off, len - off, "%s%d", i ? "," : "", env->pids[i]);
		return;
	}
	for (char **a = env->command; *a && off < len; a++)
		off += snprintf(buf + off, len - off, "%s%s", a == env->command ? "" : " ", *a);
}

static void epochs_wanted(const struct env *env, char *buf, size_t len)
{
	if (env->epochs == EP_INTERVAL)
		snprintf(buf, len, "interval:%g", env->epoch_interval_s);
	else
		snprintf(buf, len, "%s", env->epochs == EP_AUTO ? "auto" :
			 epochs_source_name(env->epochs));
}

/* trainbpf record: the file, and the state stream into its states table. */
static int start_recording(struct run *r)
{
	char command[4096], epochs[64];
	struct record_meta m = { command, epochs };

	command_line(r->env, command, sizeof(command));
	epochs_wanted(r->env, epochs, sizeof(epochs));
	if (record_open(&r->rec, r->env->record_path, r->env->force, &m, &r->ses))
		return -1;
	r->recording = true;
	if (states_open(&r->states, &r->tr, record_insert_states, &r->rec))
		return -1;
	r->stream = &r->states;
	return 0;
}

/* -1 if an output was lost (said): the report, --states-out, stdout. */
static int run_free(struct run *r, uint64_t report_ns)
{
	int err = close_states_out(r, report_ns);

	/*
	 * The report reaches its reader before the probes are removed: that
	 * waits for grace periods (links.c), a second or more with libraries
	 * probed, and nothing is written after it.
	 */
	if (r->out && (out_close(r->out, r->env->output) || r->out_failed))
		err = -1;
	if (r->folded && out_close(r->folded, r->env->folded))
		err = -1;
	r->folded = NULL;
	/* The live table's writes, when the report went to a file. */
	if (r->out != stdout && out_close(stdout, NULL))
		err = -1;
	r->out = NULL;
	serve_stop(&r->srv);	/* no scrape after this */
	if (r->env->top)
		top_end(&r->top);	/* the terminal as it was, whatever ended it */
	if (r->stream) {	/* record: the final refresh drained it */
		r->stream = NULL;
		states_close(&r->states);
	}
	record_close(&r->rec);
	if (r->ses.py_on)
		pyreader_close(&r->pr);	/* its sampler before the programs it runs */
	lib_probes_free(&r->gp);	/* the probes before the programs they run */
	gpu_sampler_close(&r->gs);
	free(r->sobs);
	live_free(&r->lv);
	tracer_close(&r->tr);
	session_free(&r->ses);	/* after the tracer, which fills its job */
	return err;
}

/*
 * Descriptors up to the hard limit: a probed library costs one or two (a
 * link per program), a process up to LP_MAX_PROBED libraries' worth, and
 * the soft limit (1024) ran out on a node where one user mapped 600. Not
 * for a command trainbpf starts: it would inherit the limit, and the job
 * must run as it would without trainbpf.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Everything up to the first tick; an exit status, or 0 to go on. */
static int start(struct run *r)
{
	const struct env *env = r->env;
	int err;

	/* Fail on an unwritable report file before the job runs, not after. */
	r->out = out_open(env->output);	/* record: --report's file, if any */
	if (!r->out)
		return 1;
	if (env->folded && !(r->folded = out_open(env->folded)))
		return 1;
	serving = env->serve && !env->top;
	if (!env->command)
		raise_nofile();
	install_signals(&r->ignored);
	if (open_tracer(r) || open_states_out(r))
		return 1;
	lib_probes_init(&r->gp, &r->tr, &r->ses.gpu, env->launches, !env->no_phases, env->verbose);
	r->ses.job.fold_roots = env->serve;
	start_window(&r->ses.job);
	if (start_epochs(&r->ses.ep, env, &r->ses.job))
		return 1;
	gpu_sampler_open(&r->gs, &r->ses.gu, r->ses.job.window_start_ns);
	if (r->ses.gu.state == GU_ACTIVE)
		r->ses.ep.gu = &r->ses.gu;
	r->ses.ep.calls = &r->ses.steps;	/* epochs_init emptied it */
	r->ses.ep.phases = &r->ses.phases;
	r->ses.phases.no_rings = env->serve;	/* a daemon cuts no epochs */
	r->ses.phases.launched = env->command != NULL;	/* its setup is the command's */
	r->ses.phases_on = !env->no_phases;
	r->ses.stall.floor_ns = env->stall_after_s * 1e9;
	r->ses.stall_on = true;
	if (env->record_path && start_recording(r))
		return 1;
	if (env->top) {
		top_start(&r->top, env->interval_s);
		r->srv.top = &r->top;
	}
	if (env->serve)
		return serve_start(&r->srv, env, &r->tr);
	err = start_targets(&r->tr, env, &r->l, &r->ignored);
	if (err)
		return err;
	if (env->functions) {
		pystacks_init(&r->ses.py, 1000000000ull / env->stack_hz);
		if (pyreader_open(&r->pr, &r->tr, &r->ses.py))
			return 1;
		r->ses.py_on = true;
		pyreader_tick(&r->pr, &r->ses.job);	/* -p: the threads are there already */
	}
	lib_probes_tick(&r->gp, &r->ses.job, now_ns());	/* -p: the libraries are there already */
	/* The GPUs' first readings: their counters' start, the job's processes on them. */
	gpu_sampler_tick(&r->gs, &r->ses.job, now_ns(), true);
	return 0;
}

int run_trace(const struct env *given)
{
	struct env targets = *given;	/* -p: thread ids become their process's */
	const struct env *env = &targets;
	struct run run = { .env = env };
	struct run *r = &run;
	uint64_t report_ns = 0;
	int err;

	session_init(&r->ses);
	mem_sampler_init(&r->mem, &r->ses.diag);
	live_init(&r->lv);
	if (check_pids(&targets))
		return 1;
	err = start(r);
	if (err)
		goto cleanup;
	err = 1;
	/* A document on stdout keeps the live lines out of it. */
	if (trace_loop(r, env->format == TB_FMT_JSON || env->format == TB_FMT_HTML ?
		       stderr : stdout)) {
		uint64_t deadline = deadline_of(r);

		/* The probes go first: nothing traces the job any more. */
		run_free(r, 0);
		return env->command ? wait_untraced(&r->l, deadline) : 1;
	}
	if (env->serve) {	/* told to stop: nothing to report */
		err = 0;
		if (env->top && r->top.nchosen) {
			/* Enter: that job's live view, once nothing of top is attached. */
			run_free(r, 0);
			return top_exec_live(&r->top, env->interval_s);
		}
		goto cleanup;
	}
	if (env->record_path) {
		if (final_record(r))
			goto cleanup;
	} else {
		report_ns = final_report(r);
	}
	launch_reap(&r->l);
	err = env->command ? launch_exit_code(&r->l) : 0;
cleanup:
	if (run_free(r, report_ns) && !err)
		err = 1;
	return err;
}
