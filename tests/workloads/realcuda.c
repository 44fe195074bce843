// SPDX-License-Identifier: BSD-3-Clause
/*
 * realcuda.c - trainbpf test workload: calls the REAL CUDA runtime and NCCL
 * (no GPU needed: without a driver every call fails at once, which is
 * fine: trainbpf counts calls, and they are real calls into the real code).
 *
 * Usage: realcuda --truth OUT.json [-n N] [--wait-ms M] [--loop-delay-ms D]
 *                 [--cudart PATH] [--nccl PATH] [--wait-probes MS [--launch-probes]]
 * After --wait-ms (a tracer attaches), dlopens the runtime and NCCL
 * (defaults: /usr/local/cuda/lib64/libcudart.so.13 and libnccl.so.2),
 * sleeps --loop-delay-ms (a tracer finds them), then makes N rounds
 * (default 50) of one call of each of:
 *   cudaStreamSynchronize(0), cudaStreamSynchronize_ptsz(0),
 *   cudaDeviceSynchronize(), cudaEventSynchronize(NULL), cudaMemcpy and
 *   cudaMemcpy_ptds (DtoH, 64 bytes between host buffers),
 *   cudaLaunchKernel(NULL, ...);
 *   ncclAllReduce, ncclBroadcast, ncclAllGather, ncclReduceScatter,
 *   ncclSend, ncclRecv with a NULL communicator (ncclInvalidArgument),
 *   ncclGroupStart + ncclGroupEnd (nothing in between: ncclSuccess),
 *   ncclGetVersion.
 * None crashed with NCCL 2.28.9 / CUDA 13.0 on a machine without a driver:
 * the NCCL calls check their communicator before anything else. (Send/Recv
 * are made outside a group: inside one, their error would only come from
 * ncclGroupEnd.)
 * --wait-probes: as gpujob's (wait until the functions trainbpf probes
 * start with an int3, at most MS, then 300 ms more); ncclGetVersion is
 * not probed, cudaLaunchKernel only with --launch-probes.
 *
 * realcuda-static is linked with libcudart_static.a: the runtime's
 * functions are then only in the executable's .symtab, and --cudart is
 * not used; NCCL is still dlopened.
 *
 * Ground truth (JSON): pid, tid, calls{NAME: N}, bytes{NAME: count x
 * datatype size, NCCL data calls}, rc{NAME: what the last call returned},
 * cudart (the path, or the executable's), nccl, static, nccl_version,
 * probes_ms (-1: not seen, or not asked).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakecuda/fakecuda.h"	/* the real signatures: not the stand-ins */
#include "workload.h"

static void die(const char *what)
{
	fprintf(stderr, "realcuda: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "realcuda: %s\n", msg);
	exit(1);
}

#define USAGE "usage: realcuda --truth OUT.json [-n N] [--wait-ms M] " \
	"[--loop-delay-ms D] [--cudart PATH] [--nccl PATH] [--wait-probes MS " \
	"[--launch-probes]]"

#define RT_APIS(X) \
	X(cudaStreamSynchronize) X(cudaStreamSynchronize_ptsz) \
	X(cudaDeviceSynchronize) X(cudaEventSynchronize) X(cudaMemcpy) \
	X(cudaMemcpy_ptds) X(cudaLaunchKernel)
#define NCCL_APIS(X) \
	X(ncclAllReduce) X(ncclBroadcast) X(ncclAllGather) X(ncclReduceScatter) \
	X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd) X(ncclGetVersion)

#define X_PTR(name) __typeof(name) *name;
static struct {
	RT_APIS(X_PTR)
	NCCL_APIS(X_PTR)
} F;

static char g_src[64], g_dst[64];
static char g_buf[4096];
static int g_version;

/* One call of each API, as the job makes it. */
static int call(const char *name)
{
	dim3 one = { 1, 1, 1 };

#define IS(n) (strcmp(name, #n) == 0)
	if (IS(cudaStreamSynchronize)) return F.cudaStreamSynchronize(NULL);
	if (IS(cudaStreamSynchronize_ptsz)) return F.cudaStreamSynchronize_ptsz(NULL);
	if (IS(cudaDeviceSynchronize)) return F.cudaDeviceSynchronize();
	if (IS(cudaEventSynchronize)) return F.cudaEventSynchronize(NULL);
	if (IS(cudaMemcpy))
		return F.cudaMemcpy(g_dst, g_src, sizeof(g_dst), cudaMemcpyDeviceToHost);
	if (IS(cudaMemcpy_ptds))
		return F.cudaMemcpy_ptds(g_dst, g_src, sizeof(g_dst), cudaMemcpyDeviceToHost);
	if (IS(cudaLaunchKernel)) return F.cudaLaunchKernel(NULL, one, one, NULL, 0, NULL);
	if (IS(ncclAllReduce))
		return F.ncclAllReduce(g_buf, g_buf, 256, ncclFloat32, ncclSum, NULL, NULL);
	if (IS(ncclBroadcast))
		return F.ncclBroadcast(g_buf, g_buf, 128, ncclInt64, 0, NULL, NULL);
	if (IS(ncclAllGather))
		return F.ncclAllGather(g_buf, g_buf, 512, ncclBfloat16, NULL, NULL);
	if (IS(ncclReduceScatter))
		return F.ncclReduceScatter(g_buf, g_buf, 64, ncclFloat16, ncclSum, NULL, NULL);
	if (IS(ncclSend)) return F.ncclSend(g_buf, 100, ncclFloat32, 1, NULL, NULL);
	if (IS(ncclRecv)) return F.ncclRecv(g_buf, 100, ncclFloat32, 1, NULL, NULL);
	if (IS(ncclGroupStart)) return F.ncclGroupStart();
	if (IS(ncclGroupEnd)) return F.ncclGroupEnd();
	if (IS(ncclGetVersion)) return F.ncclGetVersion(&g_version);
#undef IS
	die_msg("unknown API");
	return -1;
}

/* Bytes per call of the NCCL data calls above (count x datatype size). */
static long call_bytes(const char *name)
{
	static const struct { const char *name; long bytes; } b[] = {
		{ "ncclAllReduce", 256 * 4 }, { "ncclBroadcast", 128 * 8 },
		{ "ncclAllGather", 512 * 2 }, { "ncclReduceScatter", 64 * 2 },
		{ "ncclSend", 100 * 4 }, { "ncclRecv", 100 * 4 },
	};

	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		if (!strcmp(b[i].name, name))
			return b[i].bytes;
	return 0;
}

#define X_NAME(name) #name,
static const char *const g_names[] = { RT_APIS(X_NAME) NCCL_APIS(X_NAME) };
#define N_NAMES (int)(sizeof(g_names) / sizeof(g_names[0]))

static void *open_lib(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "realcuda: %s\n", dlerror());
		exit(1);
	}
	return h;
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "realcuda: %s\n", dlerror());
		exit(1);
	}
	return p;
}

static void load(const char *cudart, const char *nccl)
{
	void *n = open_lib(nccl);
#ifdef REALCUDA_STATIC
	(void)cudart;
#define X_RT(name) F.name = name;
#else
	void *rt = open_lib(cudart);
#define X_RT(name) F.name = sym(rt, #name);
#endif
#define X_NCCL(name) F.name = sym(n, #name);
	RT_APIS(X_RT)
	NCCL_APIS(X_NCCL)
}

/* Waits until the probed functions start with a breakpoint (see gpujob.c). */
static long long wait_probes(long long ms, int launches)
{
	int64_t t0 = mono_ns(), deadline = t0 + ms * 1000000LL;
	const void *fn[] = {
#define X_FN(name) (const void *)F.name,
		RT_APIS(X_FN) NCCL_APIS(X_FN)
	};

	for (;;) {
		int missing = 0;

		for (int i = 0; i < N_NAMES; i++) {
			if (!strcmp(g_names[i], "ncclGetVersion") ||
			    (!launches && !strcmp(g_names[i], "cudaLaunchKernel")))
				continue;
			missing += *(const volatile unsigned char *)fn[i] != 0xcc;
		}
		if (!missing) {
			long long seen = (mono_ns() - t0) / 1000000;

			sleep_ns(300 * 1000000LL);
			return seen;
		}
		if (mono_ns() > deadline) {
			fprintf(stderr, "realcuda: %d functions still without a probe\n", missing);
			return -1;
		}
		sleep_ns(5 * 1000000LL);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "truth", 1, 0, 'o' }, { "wait-ms", 1, 0, 'w' }, { "cudart", 1, 0, 'c' },
		{ "nccl", 1, 0, 'N' }, { "loop-delay-ms", 1, 0, 'W' },
		{ "wait-probes", 1, 0, 'P' }, { "launch-probes", 0, 0, 'L' }, { 0 },
	};
	const char *truth = NULL, *cudart = "/usr/local/cuda/lib64/libcudart.so.13";
	const char *nccl = "/usr/local/cuda/lib64/libnccl.so.2";
	long n = 50, wait_ms = 0, delay_ms = 0, probes_wait_ms = 0;
	long long probes_ms = -1;
	int rc[N_NAMES], c, is_static = 0, launch_probes = 0;
	char tmp[4096], exe[4096];
	FILE *f;

	while ((c = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': truth = optarg; break;
		case 'w': wait_ms = atol(optarg); break;
		case 'W': delay_ms = atol(optarg); break;
		case 'P': probes_wait_ms = atol(optarg); break;
		case 'L': launch_probes = 1; break;
		case 'c': cudart = optarg; break;
		case 'N': nccl = optarg; break;
		case 'n': n = atol(optarg); break;
		default: die_msg(USAGE);
		}
	}
	if (!truth || optind != argc || n < 1 || wait_ms < 0 || delay_ms < 0 ||
	    probes_wait_ms < 0)
		die_msg(USAGE);
#ifdef REALCUDA_STATIC
	is_static = 1;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len < 0)
		die("readlink /proc/self/exe");
	exe[len] = '\0';
	cudart = exe;
#else
	(void)exe;
#endif
	sleep_ns(wait_ms * 1000000LL);
	load(cudart, nccl);
	if (probes_wait_ms)
		probes_ms = wait_probes(probes_wait_ms, launch_probes);
	sleep_ns(delay_ms * 1000000LL);
	for (long k = 0; k < n; k++)	/* so each ncclGroupStart has its End */
		for (int i = 0; i < N_NAMES; i++)
			rc[i] = call(g_names[i]);

	f = truth_open(truth, tmp, sizeof(tmp));
	fprintf(f, "{\"pid\":%d,\"tid\":%ld,\"static\":%s,\"cudart\":\"%s\",\"nccl\":\"%s\","
		"\"nccl_version\":%d,\"probes_ms\":%lld,\n \"calls\":{", (int)getpid(),
		gettid_(), is_static ? "true" : "false", cudart, nccl, g_version, probes_ms);
	for (int i = 0; i < N_NAMES; i++)
		fprintf(f, "%s\"%s\":%ld", i ? "," : "", g_names[i], n);
	fputs("},\n \"bytes\":{", f);
	for (int i = 0; i < N_NAMES; i++)
		fprintf(f, "%s\"%s\":%ld", i ? "," : "", g_names[i], n * call_bytes(g_names[i]));
	fputs("},\n \"rc\":{", f);
	for (int i = 0; i < N_NAMES; i++)
		fprintf(f, "%s\"%s\":%d", i ? "," : "", g_names[i], rc[i]);
	fputs("}}\n", f);
	truth_commit(f, tmp, truth);
	return 0;
}
