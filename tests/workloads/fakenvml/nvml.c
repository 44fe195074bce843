/*
 * A stand-in for NVIDIA's management library, libnvidia-ml.so.1, for
 * trainbpf's tests on machines with no GPU. It exports the functions
 * trainbpf uses, with the names and signatures of NVIDIA's nvml.h (API
 * version 13: nvmlInit_v2, nvmlDeviceGetCount_v2, ..._v3 of the process
 * lists, the unversioned and _v2 ones too), and plays a scripted timeline
 * for its devices, timed on CLOCK_MONOTONIC.
 *
 * The script is the file named by FAKE_NVML_SCRIPT; without it nvmlInit
 * fails with NVML_ERROR_DRIVER_NOT_LOADED. Lines ('#' starts a comment):
 *
 *   t0 NS                 times below are seconds after CLOCK_MONOTONIC NS
 *                         (default: the first nvmlInit)
 *   init_fail CODE        nvmlInit_v2 returns CODE
 *   util_period_ms MS     utilization is the average over the last MS (NVML's
 *                         own sample period: 1/6 s to 1 s; default 166.667)
 *   log PATH              append "t0 NS" (the timeline's start) at nvmlInit and
 *                         "util TS_NS IDX" at each utilization read
 *   device IDX MEM_TOTAL NAME...
 *   no_energy IDX         nvmlDeviceGetTotalEnergyConsumption: NOT_SUPPORTED
 *   no_proc_util IDX      nvmlDeviceGetProcessUtilization: NOT_SUPPORTED
 *   at T IDX KEY VAL ...  from T on: util (percent), mem (bytes used),
 *                         power (mW), clock (SM MHz), throttle (reason bits,
 *                         0x... accepted)
 *   proc T IDX COMM MEM [util PCT] [inner] [env NAME=VALUE]
 *                         from T on, processes whose comm is COMM are on
 *                         device IDX with MEM bytes (0: no longer listed);
 *                         inner: listed by their pid in their own pid
 *                         namespace (NSpid's last field); env: only those
 *                         with NAME=VALUE in their environment (a rank's
 *                         device, as LOCAL_RANK picks it)
 *   lost T IDX            from T on, every call on IDX: NVML_ERROR_GPU_IS_LOST
 *
 * The energy counter is the power timeline integrated exactly, in mJ, from
 * a base of 1e9 mJ (a counter since the driver loaded).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef int nvmlClockType_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

typedef struct nvmlUtilization_st {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlProcessInfo_v1_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t, nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
	unsigned int pid;
	unsigned long long timeStamp;
	unsigned int smUtil;
	unsigned int memUtil;
	unsigned int encUtil;
	unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

#define MAX_DEVS 8
#define MAX_CHANGES 4096
#define MAX_PROCS 256
#define MAX_LISTED 64

enum key { K_UTIL, K_MEM, K_POWER, K_CLOCK, K_THROTTLE, K_N };
static const char *const key_names[K_N] = { "util", "mem", "power", "clock", "throttle" };

struct change {
	double t;
	int dev, key;
	double val;
};

struct proc_rule {
	double t;
	int dev;
	char comm[16];
	unsigned long long mem;
	int util;
	int inner;
	char env[64];			/* "NAME=VALUE", or "" */
};

struct nvmlDevice_st {
	int idx;
	char name[96];
	unsigned long long mem_total;
	int no_energy, no_proc_util;
	double lost_at;
};

static struct {
	int loaded, inits;
	int init_fail;
	uint64_t t0;
	double util_period;
	char log[512];
	int ndev;
	struct nvmlDevice_st dev[MAX_DEVS];
	struct change ch[MAX_CHANGES];
	int nch;
	struct proc_rule pr[MAX_PROCS];
	int npr;
} S;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static double now_s(void)
{
	return ((double)mono_ns() - (double)S.t0) / 1e9;
}

/* ---- the script ---- */

static void parse_at(char *rest)
{
	double t;
	int dev, off = 0;
	char key[16], val[32];

	if (sscanf(rest, "%lf %d %n", &t, &dev, &off) < 2)
		return;
	rest += off;
	while (sscanf(rest, "%15s %31s %n", key, val, &off) >= 2 && S.nch < MAX_CHANGES) {
		for (int k = 0; k < K_N; k++)
			if (!strcmp(key, key_names[k]))
				S.ch[S.nch++] = (struct change){ t, dev, k, strtod(val, NULL) };
		rest += off;
		if (!*rest)
			break;
	}
}

static void parse_proc(char *rest)
{
	struct proc_rule *p = &S.pr[S.npr];
	char opt[16];
	int off = 0;

	if (S.npr == MAX_PROCS ||
	    sscanf(rest, "%lf %d %15s %llu %n", &p->t, &p->dev, p->comm, &p->mem, &off) < 4)
		return;
	rest += off;
	p->util = -1;
	while (sscanf(rest, "%15s %n", opt, &off) == 1) {
		rest += off;
		if (!strcmp(opt, "inner"))
			p->inner = 1;
		else if (!strcmp(opt, "util") && sscanf(rest, "%d %n", &p->util, &off) == 1)
			rest += off;
		else if (!strcmp(opt, "env") && sscanf(rest, "%63s %n", p->env, &off) == 1)
			rest += off;
	}
	S.npr++;
}

static void parse_device(char *rest)
{
	struct nvmlDevice_st *d;
	int idx, off = 0;
	unsigned long long total;

	if (sscanf(rest, "%d %llu %n", &idx, &total, &off) < 2 || idx != S.ndev ||
	    S.ndev == MAX_DEVS)
		return;
	d = &S.dev[S.ndev++];
	d->idx = idx;
	d->mem_total = total;
	d->lost_at = -1;
	snprintf(d->name, sizeof(d->name), "%s", rest + off);
	d->name[strcspn(d->name, "\n")] = '\0';
}

static struct nvmlDevice_st *dev_of(const char *rest)
{
	int idx = atoi(rest);

	return idx >= 0 && idx < S.ndev ? &S.dev[idx] : NULL;
}

static void parse_line(char *line)
{
	char word[32];
	int off = 0;
	struct nvmlDevice_st *d;
	double t;
	int idx;

	if (sscanf(line, "%31s %n", word, &off) < 1 || word[0] == '#')
		return;
	line += off;
	line[strcspn(line, "\n")] = '\0';
	if (!strcmp(word, "t0"))
		S.t0 = strtoull(line, NULL, 10);
	else if (!strcmp(word, "init_fail"))
		S.init_fail = atoi(line);
	else if (!strcmp(word, "util_period_ms"))
		S.util_period = strtod(line, NULL) / 1e3;
	else if (!strcmp(word, "log"))
		snprintf(S.log, sizeof(S.log), "%s", line);
	else if (!strcmp(word, "device"))
		parse_device(line);
	else if (!strcmp(word, "no_energy") && (d = dev_of(line)))
		d->no_energy = 1;
	else if (!strcmp(word, "no_proc_util") && (d = dev_of(line)))
		d->no_proc_util = 1;
	else if (!strcmp(word, "at"))
		parse_at(line);
	else if (!strcmp(word, "proc"))
		parse_proc(line);
	else if (!strcmp(word, "lost") && sscanf(line, "%lf %d", &t, &idx) == 2 &&
		 idx >= 0 && idx < S.ndev)
		S.dev[idx].lost_at = t;
}

static int load(void)
{
	const char *path = getenv("FAKE_NVML_SCRIPT");
	char line[512];
	FILE *f;

	if (S.loaded)
		return 0;
	if (!path || !(f = fopen(path, "r")))
		return -1;
	S.util_period = 1.0 / 6;
	while (fgets(line, sizeof(line), f))
		parse_line(line);
	fclose(f);
	if (!S.t0)
		S.t0 = mono_ns();
	S.loaded = 1;
	if (S.log[0] && (f = fopen(S.log, "a"))) {
		fprintf(f, "t0 %llu\n", (unsigned long long)S.t0);
		fclose(f);
	}
	return 0;
}

/* ---- the timeline ---- */

/* The value of key on dev at t: the last change at or before t, else 0. */
static double value_at(int dev, int key, double t)
{
	double v = 0, vt = -1e300;

	for (int i = 0; i < S.nch; i++)
		if (S.ch[i].dev == dev && S.ch[i].key == key && S.ch[i].t <= t && S.ch[i].t >= vt) {
			v = S.ch[i].val;
			vt = S.ch[i].t;
		}
	return v;
}

/* The integral of key on dev over [a, b] (piecewise constant). */
static double integral(int dev, int key, double a, double b)
{
	double sum = 0, t = a;

	while (t < b) {
		double next = b;

		for (int i = 0; i < S.nch; i++)
			if (S.ch[i].dev == dev && S.ch[i].key == key && S.ch[i].t > t &&
			    S.ch[i].t < next)
				next = S.ch[i].t;
		sum += value_at(dev, key, t) * (next - t);
		t = next;
	}
	return sum;
}

static int lost(const struct nvmlDevice_st *d)
{
	return d->lost_at >= 0 && now_s() >= d->lost_at;
}

#define DEVICE_CALL(d)						\
	do {							\
		if (!S.inits)					\
			return NVML_ERROR_UNINITIALIZED;	\
		if (!(d) || (d) < S.dev || (d) >= S.dev + S.ndev) \
			return NVML_ERROR_INVALID_ARGUMENT;	\
		if (lost(d))					\
			return NVML_ERROR_GPU_IS_LOST;		\
	} while (0)

/* ---- the processes a rule lists: by comm, scanned in /proc ---- */

static int read_comm(const char *pid, char *out, size_t len)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/comm", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	if (!fgets(out, (int)len, f))
		out[0] = '\0';
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/* NSpid's last field: the pid in the process's own namespace. */
static unsigned int inner_pid(const char *pid)
{
	char path[300], line[256];
	unsigned int last = (unsigned int)atoi(pid);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/status", pid);
	if (!(f = fopen(path, "r")))
		return last;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (unsigned long v; (v = strtoul(p, &end, 10)), end != p; p = end)
			last = (unsigned int)v;
	}
	fclose(f);
	return last;
}

/* Whether pid's environment holds want ("NAME=VALUE"). */
static int has_env(const char *pid, const char *want)
{
	char path[300], buf[16384];
	size_t n, len = strlen(want);
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%s/environ", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (size_t i = 0; i < n && !found; i += strlen(buf + i) + 1)
		found = !strncmp(buf + i, want, len) && buf[i + len] == '\0';
	return found;
}

/* The rule for comm (and its environment) on dev in force at t (the latest), or NULL. */
static const struct proc_rule *rule_for(int dev, const char *pid, const char *comm, double t)
{
	const struct proc_rule *best = NULL;

	for (int i = 0; i < S.npr; i++) {
		const struct proc_rule *r = &S.pr[i];

		if (r->dev == dev && r->t <= t && !strcmp(r->comm, comm) &&
		    (!r->env[0] || has_env(pid, r->env)) && (!best || r->t >= best->t))
			best = r;
	}
	return best && best->mem ? best : NULL;
}

struct listed {
	unsigned int pid;
	const struct proc_rule *r;
};

static int list_procs(int dev, struct listed *out)
{
	double t = now_s();
	struct dirent *e;
	int n = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < MAX_LISTED) {
		char comm[32];
		const struct proc_rule *r;

		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    read_comm(e->d_name, comm, sizeof(comm)))
			continue;
		if (!(r = rule_for(dev, e->d_name, comm, t)))
			continue;
		out[n].pid = r->inner ? inner_pid(e->d_name) : (unsigned int)atoi(e->d_name);
		out[n++].r = r;
	}
	closedir(d);
	return n;
}

/* ---- the API ---- */

nvmlReturn_t nvmlInit_v2(void)
{
	if (load())
		return NVML_ERROR_DRIVER_NOT_LOADED;
	if (S.init_fail)
		return S.init_fail;
	S.inits++;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void)
{
	return nvmlInit_v2();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags;
	return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
	if (!S.inits)
		return NVML_ERROR_UNINITIALIZED;
	S.inits--;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case 4: return "Insufficient Permissions";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case 12: return "NVML Shared Library Not Found";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	case 18: return "RM has detected an NVML/RM version mismatch.";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	if (!S.inits)
		return NVML_ERROR_UNINITIALIZED;
	snprintf(version, length, "999.0-standin");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!S.inits)
		return NVML_ERROR_UNINITIALIZED;
	*count = (unsigned int)S.ndev;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
	return nvmlDeviceGetCount_v2(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!S.inits)
		return NVML_ERROR_UNINITIALIZED;
	if (index >= (unsigned int)S.ndev)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (lost(&S.dev[index]))
		return NVML_ERROR_GPU_IS_LOST;
	*device = &S.dev[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index)
{
	DEVICE_CALL(d);
	*index = (unsigned int)d->idx;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length)
{
	DEVICE_CALL(d);
	if (strlen(d->name) >= length)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	snprintf(name, length, "%s", d->name);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length)
{
	DEVICE_CALL(d);
	if (length < 41)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	snprintf(uuid, length, "GPU-5ca1ab1e-0000-4000-8000-%012d", d->idx);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	double t;

	DEVICE_CALL(d);
	t = now_s();
	if (S.log[0]) {
		FILE *f = fopen(S.log, "a");

		if (f) {
			fprintf(f, "util %llu %d\n", (unsigned long long)mono_ns(), d->idx);
			fclose(f);
		}
	}
	/* NVML's own average over its last sample period, rounded as it reports */
	u->gpu = (unsigned int)(integral(d->idx, K_UTIL, t - S.util_period, t) / S.util_period + 0.5);
	u->memory = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	DEVICE_CALL(d);
	m->total = d->mem_total;
	m->used = (unsigned long long)value_at(d->idx, K_MEM, now_s());
	m->free = m->used < m->total ? m->total - m->used : 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *power)
{
	DEVICE_CALL(d);
	*power = (unsigned int)value_at(d->idx, K_POWER, now_s());
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy)
{
	double t;

	DEVICE_CALL(d);
	if (d->no_energy)
		return NVML_ERROR_NOT_SUPPORTED;
	t = now_s();
	/* mW x s = mJ */
	*energy = 1000000000ull + (unsigned long long)(t > 0 ? integral(d->idx, K_POWER, 0, t) : 0);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *clock)
{
	DEVICE_CALL(d);
	(void)type;
	*clock = (unsigned int)value_at(d->idx, K_CLOCK, now_s());
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons)
{
	DEVICE_CALL(d);
	*reasons = (unsigned long long)value_at(d->idx, K_THROTTLE, now_s());
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons)
{
	return nvmlDeviceGetCurrentClocksEventReasons(d, reasons);
}

/* The listed processes into infos (of elem bytes each: v1 or v2/v3's layout). */
static nvmlReturn_t running(nvmlDevice_t d, unsigned int *count, void *infos, size_t elem)
{
	struct listed l[MAX_LISTED];
	int n;

	DEVICE_CALL(d);
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	n = list_procs(d->idx, l);
	if (*count < (unsigned int)n || (!infos && n)) {
		*count = (unsigned int)n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (int i = 0; i < n; i++) {
		nvmlProcessInfo_v2_t *p = (void *)((char *)infos + i * elem);

		memset(p, 0, elem);
		p->pid = l[i].pid;
		p->usedGpuMemory = l[i].r->mem;
		if (elem == sizeof(nvmlProcessInfo_v2_t))
			p->gpuInstanceId = p->computeInstanceId = 0xFFFFFFFF;
	}
	*count = (unsigned int)n;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_t *infos)
{
	return running(d, count, infos, sizeof(*infos));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_v2_t *infos)
{
	return running(d, count, infos, sizeof(*infos));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count,
						  nvmlProcessInfo_v1_t *infos)
{
	return running(d, count, infos, sizeof(*infos));
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
					     nvmlProcessUtilizationSample_t *samples,
					     unsigned int *count, unsigned long long lastSeen)
{
	struct listed l[MAX_LISTED];
	struct timeval tv;
	unsigned long long now_us;
	int n, k = 0;

	DEVICE_CALL(d);
	if (d->no_proc_util)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	gettimeofday(&tv, NULL);
	now_us = (unsigned long long)tv.tv_sec * 1000000ull + tv.tv_usec;
	n = list_procs(d->idx, l);
	if (!samples || *count < (unsigned int)n) {
		*count = (unsigned int)n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (int i = 0; i < n; i++) {
		if (l[i].r->util < 0 || now_us <= lastSeen)
			continue;
		memset(&samples[k], 0, sizeof(samples[k]));
		samples[k].pid = l[i].pid;
		samples[k].timeStamp = now_us;
		samples[k++].smUtil = (unsigned int)l[i].r->util;
	}
	*count = (unsigned int)k;
	return k ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}
