// SPDX-License-Identifier: BSD-3-Clause
/* Sampling NVML on trainbpf's clock into the model (gpu_sampler.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "gpu_sampler.h"
#include "procfs.h"

static void add_device(struct gpu_sampler *s, unsigned int i)
{
	struct nvml *n = &s->lib;
	char uuid[NVML_NAME_LEN] = "", name[NVML_NAME_LEN] = "", err[96];
	nvmlDevice_t h = NULL;
	nvmlMemory_t m = { 0 };
	nvmlReturn_t rc = n->handle(i, &h);
	int d;

	if (rc == NVML_SUCCESS) {
		if (n->uuid)
			n->uuid(h, uuid, sizeof(uuid));
		if (n->name)
			n->name(h, name, sizeof(name));
		n->memory(h, &m);
	}
	d = gu_add_dev(s->gu, (int)i, uuid, name, m.total);
	if (d < 0)
		return;
	s->handle[d] = h;
	if (rc != NVML_SUCCESS) {
		/* listed, never sampled: the report says so */
		nvml_strerror(n, rc, err, sizeof(err));
		gu_dev_lost(s->gu, d, now_ns(), err);
	}
}

void gpu_sampler_open(struct gpu_sampler *s, struct gpu_util *gu, uint64_t window_start)
{
	unsigned int count = 0;
	nvmlReturn_t rc;
	char why[160], err[96];

	memset(s, 0, sizeof(*s));
	s->gu = gu;
	gu->period_ns = GS_PERIOD_NS;
	if (nvml_open(&s->lib, why, sizeof(why))) {
		gu_unavailable(gu, "%s", why);
		goto fail;
	}
	if (s->lib.driver)
		s->lib.driver(gu->driver, sizeof(gu->driver));
	rc = s->lib.count(&count);
	if (rc != NVML_SUCCESS) {
		nvml_strerror(&s->lib, rc, err, sizeof(err));
		gu_unavailable(gu, "nvmlDeviceGetCount failed: %s", err);
		goto fail;
	}
	if (!count) {
		gu_unavailable(gu, "NVML sees no GPU on this machine");
		goto fail;
	}
	for (unsigned int i = 0; i < count; i++)
		add_device(s, i);
	gu->state = GU_ACTIVE;
	gu->run = gu_open(gu, window_start);
	return;
fail:
	nvml_close(&s->lib);
}

void gpu_sampler_close(struct gpu_sampler *s)
{
	nvml_close(&s->lib);
	free(s->cache);
	free(s->ns_pid);
	free(s->ns);
	free(s->nns);
	s->cache = NULL;
	s->ns_pid = NULL;
	s->ns = NULL;
	s->nns = NULL;
	s->ncache = s->nns_n = s->ns_cap = 0;
}

/* ---- NVML's pids to the job's ---- */

static bool listed_alive(const struct job *job, pid_t pid)
{
	const struct proc_rec *p = job_proc_const(job, pid);

	return p && !p->end_ns && !p->folded;
}

/* Cached entries of processes the job no longer has alive go. */
static void cache_prune(struct gpu_sampler *s, const struct job *job)
{
	int k = 0;

	for (int i = 0; i < s->ncache; i++) {
		const struct proc_rec *p = job_proc_const(job, s->cache[i].pid);

		if (p && !p->end_ns && p->start_ns == s->cache[i].start)
			s->cache[k++] = s->cache[i];
	}
	s->ncache = k;
}

/* p's pids in its namespaces, read from /proc once. */
static const struct gs_nspid *nspid_of(struct gpu_sampler *s, const struct job *job,
				       const struct proc_rec *p)
{
	struct gs_nspid *e;

	for (int i = 0; i < s->ncache; i++)
		if (s->cache[i].pid == p->pid && s->cache[i].start == p->start_ns)
			return &s->cache[i];
	if (!s->cache && !(s->cache = calloc(GS_NS_CACHE, sizeof(*s->cache))))
		return NULL;
	if (s->ncache == GS_NS_CACHE)
		cache_prune(s, job);
	if (s->ncache == GS_NS_CACHE)
		return NULL;
	e = &s->cache[s->ncache];
	e->pid = p->pid;
	e->start = p->start_ns;
	e->n = procfs_nspid(p->pid, e->ns, 4);
	if (e->n < 0)
		return NULL;	/* gone meanwhile: not cached */
	s->ncache++;
	return e;
}

/* Room for n rows in the namespace table; false: out of memory. */
static bool ns_room(struct gpu_sampler *s, int n)
{
	pid_t *p, (*ns)[4];
	int *nns;

	if (n <= s->ns_cap)
		return true;
	p = realloc(s->ns_pid, n * sizeof(*p));
	if (p)
		s->ns_pid = p;
	ns = realloc(s->ns, n * sizeof(*ns));
	if (ns)
		s->ns = ns;
	nns = realloc(s->nns, n * sizeof(*nns));
	if (nns)
		s->nns = nns;
	if (!p || !ns || !nns)
		return false;
	s->ns_cap = n;
	return true;
}

/* The job's live processes that have a pid namespace of their own, once a tick. */
static void ns_table(struct gpu_sampler *s, const struct job *job)
{
	if (s->ns_tick == s->last)
		return;
	s->ns_tick = s->last;
	s->nns_n = 0;
	if (!ns_room(s, job->nprocs + 1))
		return;
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];
		const struct gs_nspid *e;

		if (p->end_ns || p->folded || !(e = nspid_of(s, job, p)) || e->n < 2)
			continue;	/* outside a namespace of its own: its pid is ours */
		s->ns_pid[s->nns_n] = p->pid;
		memcpy(s->ns[s->nns_n], e->ns, sizeof(s->ns[0]));
		s->nns[s->nns_n++] = e->n;
	}
}

/*
 * The job's process NVML calls nvml_pid: the same pid, or one whose pid in
 * its own namespace it is (gu_match_pid); 0 if none.
 */
static pid_t job_pid(struct gpu_sampler *s, const struct job *job, pid_t nvml_pid)
{
	if (listed_alive(job, nvml_pid))
		return nvml_pid;
	ns_table(s, job);
	return gu_match_pid(nvml_pid, s->ns_pid, s->nns_n, (const pid_t (*)[4])s->ns, s->nns);
}

/* ---- one device ---- */

struct pid_util {
	pid_t pid;
	unsigned int sum, n;
};

/*
 * Per-process utilization since the last read: each process's samples
 * averaged. Returns how many processes, 0 where the device does not say.
 */
static int read_proc_util(struct gpu_sampler *s, int d, struct pid_util *out)
{
	nvmlProcessUtilizationSample_t buf[GS_MAX_LISTED];
	unsigned int cnt = GS_MAX_LISTED;
	int n = 0;
	nvmlReturn_t rc;

	if (!s->lib.proc_util)
		return 0;
	rc = s->lib.proc_util(s->handle[d], buf, &cnt, s->util_seen[d]);
	if (rc != NVML_SUCCESS)
		return 0;	/* not supported, or no sample since (NOT_FOUND) */
	s->gu->dev[d].proc_util = true;
	for (unsigned int i = 0; i < cnt && i < GS_MAX_LISTED; i++) {
		int k;

		if (buf[i].timeStamp > s->util_seen[d])
			s->util_seen[d] = buf[i].timeStamp;
		for (k = 0; k < n && out[k].pid != (pid_t)buf[i].pid; k++)
			;
		if (k == n)
			out[n++] = (struct pid_util){ (pid_t)buf[i].pid, 0, 0 };
		out[k].sum += buf[i].smUtil;
		out[k].n++;
	}
	return n;
}

/* The processes on device d; their count, -1 if it is lost. */
static int list_procs(struct gpu_sampler *s, int d, nvmlProcessInfo_t *out)
{
	nvmlProcessInfo_v1_t v1[GS_MAX_LISTED];
	unsigned int cnt = GS_MAX_LISTED;
	nvmlReturn_t rc;

	if (!s->lib.procs)
		return 0;
	rc = s->lib.procs(s->handle[d], &cnt, s->lib.procs_v1 ? (void *)v1 : (void *)out);
	if (rc == NVML_ERROR_GPU_IS_LOST)
		return -1;
	if (rc != NVML_SUCCESS)
		return 0;	/* more than GS_MAX_LISTED, or no list on this device */
	for (unsigned int i = 0; s->lib.procs_v1 && i < cnt; i++)
		out[i] = (nvmlProcessInfo_t){ v1[i].pid, v1[i].usedGpuMemory, 0, 0 };
	return (int)cnt;
}

/* The job's processes on device d into the model; how many, -1 if it is lost. */
static int sample_procs(struct gpu_sampler *s, const struct job *job, int d, uint64_t ts)
{
	nvmlProcessInfo_t infos[GS_MAX_LISTED];
	struct pid_util util[GS_MAX_LISTED];
	int n = list_procs(s, d, infos), nu, matched = 0;

	if (n <= 0)
		return n;
	nu = read_proc_util(s, d, util);
	for (int i = 0; i < n; i++) {
		struct gu_sample ps = { .ts = ts };
		pid_t pid = job_pid(s, job, (pid_t)infos[i].pid);

		if (!pid)
			continue;	/* another job's, or a process we do not trace */
		if (infos[i].usedGpuMemory != ULLONG_MAX) {	/* NVML_VALUE_NOT_AVAILABLE */
			ps.mem = infos[i].usedGpuMemory;
			ps.has |= GU_HAS_MEM;
		}
		for (int k = 0; k < nu; k++)
			if (util[k].pid == (pid_t)infos[i].pid && util[k].n) {
				ps.util = (uint8_t)(util[k].sum / util[k].n);
				ps.has |= GU_HAS_UTIL;
			}
		gu_proc_sample(s->gu, pid, d, &ps);
		matched++;
	}
	return matched;
}

/* One reading: true if it answered, false if absent; *lost on GPU_IS_LOST. */
static bool ok(nvmlReturn_t rc, bool *lost, nvmlReturn_t *why)
{
	if (rc == NVML_ERROR_GPU_IS_LOST) {
		*lost = true;
		*why = rc;
	}
	return rc == NVML_SUCCESS;
}

/* The device's readings; false if it is lost (rc: what said so). */
static bool read_device(struct gpu_sampler *s, int d, struct gu_sample *x, nvmlReturn_t *rc)
{
	struct nvml *n = &s->lib;
	nvmlDevice_t h = s->handle[d];
	nvmlUtilization_t u;
	nvmlMemory_t m;
	unsigned long long e, r;
	unsigned int p, c;
	bool lost = false;

	/* The exact reading first, at the sample's time; the others are averages or points. */
	x->ts = now_ns();
	if (n->energy && ok(n->energy(h, &e), &lost, rc)) {
		x->energy_mj = e;
		x->has |= GU_HAS_ENERGY;
	}
	if (!lost && ok(n->util(h, &u), &lost, rc)) {
		x->util = u.gpu > 100 ? 100 : (uint8_t)u.gpu;
		x->has |= GU_HAS_UTIL;
	}
	if (!lost && ok(n->memory(h, &m), &lost, rc)) {
		x->mem = m.used;
		x->has |= GU_HAS_MEM;
		if (!s->gu->dev[d].mem_total)
			s->gu->dev[d].mem_total = m.total;
	}
	if (!lost && n->power && ok(n->power(h, &p), &lost, rc)) {
		x->power_mw = p;
		x->has |= GU_HAS_POWER;
	}
	if (!lost && n->clock && ok(n->clock(h, NVML_CLOCK_SM, &c), &lost, rc)) {
		x->clock_mhz = c;
		x->has |= GU_HAS_CLOCK;
	}
	if (!lost && n->reasons && ok(n->reasons(h, &r), &lost, rc)) {
		x->throttle = r;
		x->has |= GU_HAS_THROTTLE;
	}
	return !lost;
}

static void lost(struct gpu_sampler *s, int d, uint64_t ts, nvmlReturn_t rc)
{
	char err[96];

	nvml_strerror(&s->lib, rc, err, sizeof(err));
	gu_dev_lost(s->gu, d, ts, err);
}

static void sample_device(struct gpu_sampler *s, const struct job *job, int d)
{
	struct gu_sample x = { 0 };
	nvmlReturn_t rc = NVML_ERROR_GPU_IS_LOST;
	int on;

	if (!read_device(s, d, &x, &rc)) {
		lost(s, d, x.ts, rc);
		return;
	}
	on = sample_procs(s, job, d, x.ts);
	if (on < 0) {
		lost(s, d, x.ts, NVML_ERROR_GPU_IS_LOST);
		return;
	}
	if (on)
		x.has |= GU_JOB;
	gu_dev_sample(s->gu, d, &x);
}

void gpu_sampler_tick(struct gpu_sampler *s, const struct job *job, uint64_t now, bool force)
{
	/* A tick comes every GS_PERIOD_NS, give or take the loop's jitter. */
	uint64_t gap = force ? GS_MIN_GAP_NS : GS_PERIOD_NS * 9 / 10;

	if (!s->gu || s->gu->state != GU_ACTIVE || (s->last && now < s->last + gap))
		return;
	s->last = now;
	for (int d = 0; d < s->gu->ndev; d++)
		if (!s->gu->dev[d].lost)
			sample_device(s, job, d);
}
