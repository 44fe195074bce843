// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "gpu.h"
#include "labels.h"
#include "procfs.h"
#include "serve.h"
#include "session.h"

static void publish(struct serve *s, struct tracer *tr, const struct lib_probes *gp,
		    uint64_t now);
static void ras_write(struct serve *s, FILE *f);

int serve_start(struct serve *s, const struct env *env, struct tracer *tr)
{
	struct web_config *wc = NULL;
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	s->start_unix = rt.tv_sec + rt.tv_nsec / 1e9;
	metrics_init(&s->mx, (uint64_t)(env->grace_s * 1e9));
	s->env = env;
	if (env->web_config && !(wc = web_config_read(env->web_config)))
		return 1;
	if (discover_init(&s->dsc, env->match, env->cgroup)) {
		web_config_drop(wc);
		return 1;
	}
	/* top: a table on the terminal, nothing served (the config was only checked) */
	if (s->top) {
		web_config_drop(wc);
	} else if (exporter_start(&s->ex, env->listen, wc)) {	/* wc is the exporter's if not */
		web_config_drop(wc);
		discover_free(&s->dsc);
		return 1;
	}
	s->started = true;
	if (!s->top)
		ras_poller_start(&s->ras);	/* without it, no RAS series (said) */
	/* A scrape during the scan (it attaches to every job) gets the daemon's own series */
	publish(s, tr, NULL, 0);
	/* Jobs already running (a restart of the daemon picks them up). */
	discover_scan(&s->dsc, tr, tr->job);
	return 0;
}

static void self_stats(const struct serve *s, struct tracer *tr, const struct lib_probes *gp,
		       struct mx_self *me)
{
	struct tb_counters bpf;
	struct rusage ru;
	char buf[128];
	unsigned long long size, res;

	me->start_unix = s->start_unix;
	if (!getrusage(RUSAGE_SELF, &ru))
		me->cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			    ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	if (procfs_read_file("/proc/self/statm", buf, sizeof(buf)) > 0 &&
	    sscanf(buf, "%llu %llu", &size, &res) == 2)
		me->rss_bytes = res * sysconf(_SC_PAGESIZE);
	tracer_counters(tr, &bpf);
	me->events_lost = bpf.events_lost;
	me->threads_untraced = bpf.slots_exhausted + bpf.storage_failed;
	me->libraries_refused = gp ? gp->refused : 0;
	me->processes = job_live_procs(tr->job);
}

/*
 * Threads that found no slot are in no series: said on stderr when their
 * count grows, at most once a minute, as well as counted in /metrics.
 */
static void say_untraced(struct serve *s, const struct mx_self *me, uint64_t now)
{
	if (me->threads_untraced <= s->untraced_said || now < s->next_untraced)
		return;
	fprintf(stderr, "trainbpf: warning: %llu threads not traced so far (more than "
		"--max-threads at once, or than %u in one process): their time is in no "
		"series\n", (unsigned long long)me->threads_untraced,
		serve_thread_quota(s->env->max_threads));
	s->untraced_said = me->threads_untraced;
	s->next_untraced = now + SERVE_SAY_NS;
}

/* The exposition, rendered once here for every scrape until the next. */
static void publish(struct serve *s, struct tracer *tr, const struct lib_probes *gp,
		    uint64_t now)
{
	struct mx_self me = { 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (s->top)
		return;	/* its table is drawn by serve_tick */
	f = open_memstream(&text, &len);
	if (!f)
		return;
	self_stats(s, tr, gp, &me);
	say_untraced(s, &me, now);
	metrics_write(&s->mx, &me, f);
	metrics_gpu_write(&s->mx, f);	/* the GPU's own side, when NVML is read */
	ras_write(s, f);
	if (fclose(f)) {
		free(text);
		return;
	}
	exporter_publish(&s->ex, text, len);
	exporter_reap(&s->ex);	/* daemons a SIGHUP superseded, once they have answered */
}

/*
 * SIGHUP: the web config read again (new certificates, users); if it is
 * bad, or the exporter cannot start with it, the old one goes on (said).
 */
static void reload(struct serve *s)
{
	struct web_config *fresh;

	if (!s->env->web_config)
		return;
	if (!(fresh = web_config_read(s->env->web_config))) {
		fprintf(stderr, "trainbpf: SIGHUP: keeping the web config loaded before\n");
		return;
	}
	if (exporter_reconfigure(&s->ex, s->env->listen, fresh)) {
		fprintf(stderr, "trainbpf: SIGHUP: the new web config does not start: keeping the "
			"one loaded before\n");
		web_config_drop(fresh);
	}
}

/* The NCCL version p mapped, if it has RAS (>= 2.24); NULL if not. */
static const char *ras_nccl(const struct gpu *g, const struct proc_rec *p)
{
	const struct gpu_proc *gp = gpu_proc_find(g, p->pid);

	for (int i = 0; gp && i < gp->nmaps; i++) {
		const struct gpu_object *o = &g->objs[gp->maps[i].obj];

		if ((o->families & (1u << LIB_NCCL)) &&
		    ras_version_at_least(o->version[LIB_NCCL], 2, 24, 0))
			return o->version[LIB_NCCL];
	}
	return NULL;
}

/* p into its job's entry (by its series' label), a new one if there is room. */
static void ras_add(struct ras_job *jobs, int *n, const char *id, pid_t pid, const char *ver)
{
	int i;

	for (i = 0; i < *n && strcmp(jobs[i].job, id); i++)
		;
	if (i == *n) {
		if (*n == RAS_MAX_JOBS)
			return;
		memset(&jobs[i], 0, sizeof(jobs[i]));
		snprintf(jobs[i].job, sizeof(jobs[i].job), "%s", id);
		/* JSON from 2.28.7 (NCCL's docs, "JSON Output"); the text before */
		jobs[i].json = ras_version_at_least(ver, 2, 28, 7);
		(*n)++;
	}
	if (jobs[i].npids < RAS_MAX_PIDS)
		jobs[i].pids[jobs[i].npids++] = pid;
}

/* A round of RAS queries: the jobs of the live series whose processes map NCCL >= 2.24. */
static void ras_round(struct serve *s, const struct session *ses)
{
	const struct job *job = &ses->job;
	static struct ras_job jobs[RAS_MAX_JOBS];
	int n = 0;

	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];
		const char *ver;
		int series;

		if (p->folded || !job_proc_alive(p) || !(ver = ras_nccl(&ses->gpu, p)) ||
		    (series = metrics_series_of(&s->mx, p)) < 0)
			continue;
		ras_add(jobs, &n, s->mx.series[series].job, p->pid, ver);
	}
	ras_poller_submit(&s->ras, jobs, n);
}

static void ras_write(struct serve *s, FILE *f)
{
	static struct ras_report r[RAS_MAX_JOBS];

	metrics_ras_write(r, ras_poller_results(&s->ras, r), f);
}

void serve_on_exec(struct serve *s, struct tracer *tr, pid_t pid)
{
	if (s->execs_seen >= SERVE_EXECS_PER_TICK)
		return;
	s->execs_seen++;
	discover_exec(&s->dsc, tr, tr->job, pid);
}

/*
 * With no live process traced at two scans in a row (2-4 s: not between a
 * launcher's exit and its job's exec), the node's tasks stop paying for
 * the hooks: detached until a scan or an exec finds a job.
 */
static void scan(struct serve *s, struct tracer *tr, uint64_t now)
{
	discover_scan(&s->dsc, tr, tr->job);
	s->next_scan = now + SERVE_SCAN_NS;
	if (job_live_procs(tr->job))
		s->idle_scans = 0;
	else if (++s->idle_scans >= 2 && !tracer_hooks_paused(tr))
		tracer_hooks_pause(tr);
}

bool serve_tick(struct serve *s, struct session *ses, struct tracer *tr, struct lib_probes *gp,
		uint64_t now, bool rescan)
{
	s->execs_seen = 0;
	if (s->top && !top_keys(s->top, &s->mx))
		return false;
	if (rescan && !s->top)
		reload(s);
	if (rescan || now >= s->next_scan)
		scan(s, tr, now);
	labels_refresh(tr->job, "/proc", false);
	if (s->top && !s->top->next_ns)
		top_draw(s->top, &s->mx, now, true);	/* a key moved the choice */
	if (now < s->next_publish)
		return true;
	s->next_publish = now + SERVE_PUBLISH_NS;
	lib_probes_read(gp);	/* the per-process CUDA/NCCL counts */
	metrics_update(&s->mx, ses, now);
	if (now >= s->next_judge) {
		metrics_judge(&s->mx, ses, now);
		s->next_judge = now + SERVE_JUDGE_NS;
		if (ses->phases_on && now > SERVE_FORGET_NS)
			phases_forget_gone(&ses->phases, &ses->job, now - SERVE_FORGET_NS);
	}
	metrics_gpu_update(&s->mx, ses, now);
	if (now >= s->next_ras && !s->top) {
		ras_round(s, ses);
		s->next_ras = now + SERVE_RAS_NS;
	}
	publish(s, tr, gp, now);
	if (s->top)
		top_draw(s->top, &s->mx, now, false);
	return true;
}

void serve_stop(struct serve *s)
{
	if (!s->started)
		return;
	if (!s->top) {
		exporter_stop(&s->ex);
		ras_poller_stop(&s->ras);
	}
	discover_free(&s->dsc);
	metrics_free(&s->mx);
	s->started = false;
}
