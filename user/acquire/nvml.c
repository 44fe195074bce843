// SPDX-License-Identifier: BSD-3-Clause
/* Loading NVML with dlopen and finding its functions (nvml.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "nvml.h"

/* Where containers mount the driver's libraries (the GPU machine: DESIGN.md). */
static const char *const fallback = "/usr/local/nvidia/lib64/libnvidia-ml.so.1";

static void *load(char *why, size_t len)
{
	void *so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	char first[160];

	if (so)
		return so;
	snprintf(first, sizeof(first), "%s", dlerror());
	so = dlopen(fallback, RTLD_NOW | RTLD_LOCAL);
	if (!so)
		snprintf(why, len, "no NVIDIA driver library (%s)", first);
	return so;
}

/* The first of names the library defines. */
static void *sym(void *so, const char *const *names, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = dlsym(so, names[i]);

		if (p)
			return p;
	}
	return NULL;
}

#define SYM(f, ...) (*(void **)&(f) = sym(n->so, (const char *const[]){ __VA_ARGS__ }, \
	sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(char *)))

/* The functions a sample needs; -1 (why) if one is missing. */
static int find_core(struct nvml *n, char *why, size_t len)
{
	const char *missing = NULL;

	if (!SYM(n->init, "nvmlInit_v2", "nvmlInit"))
		missing = "nvmlInit_v2";
	else if (!SYM(n->shutdown, "nvmlShutdown"))
		missing = "nvmlShutdown";
	else if (!SYM(n->count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"))
		missing = "nvmlDeviceGetCount_v2";
	else if (!SYM(n->handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"))
		missing = "nvmlDeviceGetHandleByIndex_v2";
	else if (!SYM(n->util, "nvmlDeviceGetUtilizationRates"))
		missing = "nvmlDeviceGetUtilizationRates";
	else if (!SYM(n->memory, "nvmlDeviceGetMemoryInfo"))
		missing = "nvmlDeviceGetMemoryInfo";
	if (missing)
		snprintf(why, len, "libnvidia-ml.so.1 has no %s", missing);
	return missing ? -1 : 0;
}

/* What some drivers or devices lack: a reading less, never a failure. */
static void find_optional(struct nvml *n)
{
	SYM(n->error, "nvmlErrorString");
	SYM(n->driver, "nvmlSystemGetDriverVersion");
	SYM(n->uuid, "nvmlDeviceGetUUID");
	SYM(n->name, "nvmlDeviceGetName");
	SYM(n->power, "nvmlDeviceGetPowerUsage");
	SYM(n->energy, "nvmlDeviceGetTotalEnergyConsumption");
	SYM(n->clock, "nvmlDeviceGetClockInfo");
	/* renamed in 12.2; the old name is deprecated in 13.0 */
	SYM(n->reasons, "nvmlDeviceGetCurrentClocksEventReasons",
	    "nvmlDeviceGetCurrentClocksThrottleReasons");
	if (!SYM(n->procs, "nvmlDeviceGetComputeRunningProcesses_v3",
		 "nvmlDeviceGetComputeRunningProcesses_v2"))
		n->procs_v1 = SYM(n->procs, "nvmlDeviceGetComputeRunningProcesses") != NULL;
	SYM(n->proc_util, "nvmlDeviceGetProcessUtilization");
}

void nvml_strerror(const struct nvml *n, nvmlReturn_t rc, char *buf, size_t len)
{
	const char *s = n->error ? n->error(rc) : NULL;

	snprintf(buf, len, "%s (NVML error %d)", s ? s : "error", rc);
}

int nvml_open(struct nvml *n, char *why, size_t len)
{
	nvmlReturn_t rc;
	char err[96];

	memset(n, 0, sizeof(*n));
	n->so = load(why, len);
	if (!n->so)
		return -1;
	if (find_core(n, why, len))
		return -1;
	find_optional(n);
	rc = n->init();
	if (rc != NVML_SUCCESS) {
		nvml_strerror(n, rc, err, sizeof(err));
		snprintf(why, len, "nvmlInit failed: %s", err);
		return -1;
	}
	n->inited = true;
	return 0;
}

void nvml_close(struct nvml *n)
{
	if (n->inited)
		n->shutdown();
	if (n->so)
		dlclose(n->so);
	memset(n, 0, sizeof(*n));
}
