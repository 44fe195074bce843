/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NVIDIA's management library, loaded at run time: no build or link
 * dependency, nothing asked of a machine without the driver. The types
 * and signatures are those of NVIDIA's nvml.h (API version 13), only the
 * ones trainbpf calls. dlopen("libnvidia-ml.so.1") finds the driver's
 * copy where ld.so would (LD_LIBRARY_PATH, the cache), else at
 * /usr/local/nvidia/lib64 (containers that mount the driver there).
 */
#ifndef TB_NVML_H
#define TB_NVML_H

#include <stdbool.h>
#include <stddef.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_CLOCK_SM 1
#define NVML_NAME_LEN 96		/* NVML_DEVICE_NAME_V2_BUFFER_SIZE */

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

/* nvmlProcessInfo_t of _v3 and _v2; _v1 (the unversioned call) lacks the ids. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
	unsigned int pid;
	unsigned long long timeStamp;	/* CPU time, us */
	unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

struct nvml {
	void *so;
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error)(nvmlReturn_t);
	nvmlReturn_t (*driver)(char *, unsigned int);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
	nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long *);
	/* whichever the library has, newest first: _v3, _v2 (one layout), the v1 call */
	nvmlReturn_t (*procs)(nvmlDevice_t, unsigned int *, void *);
	bool procs_v1;
	nvmlReturn_t (*proc_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *,
				  unsigned int *, unsigned long long);
	bool inited;
};

/*
 * Loads the library and initializes NVML. On failure writes why (one line,
 * for the report) and returns -1; nvml_close is safe either way.
 */
int nvml_open(struct nvml *n, char *why, size_t len);
void nvml_close(struct nvml *n);
/* "GPU is lost (NVML error 15)" */
void nvml_strerror(const struct nvml *n, nvmlReturn_t rc, char *buf, size_t len);

#endif
