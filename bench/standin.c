// SPDX-License-Identifier: BSD-3-Clause
/*
 * standin.c - the stand-in libraries of standin.h, one per build:
 *   -DSTANDIN_CUDA    libcuda.so.1
 *   -DSTANDIN_CUDART  libcudart.so.13 (linked to libcuda.so.1)
 *   -DSTANDIN_NCCL    libnccl.so.2
 * Built twice from the same source (bench/Makefile): push/ at -O0 with a
 * frame pointer (every function starts with push %rbp, as the real
 * libcudart.so.13 and libnccl.so.2 functions do: the kernel emulates it on
 * a uprobe hit) and xol/ at -O2 without (the first instruction is one the
 * kernel single-steps out of line); bench/gpu_lib.sh checks which. No
 * sibling calls and no identical-code folding, so a runtime call is a
 * real call of the driver and every function its own code.
 */
#include "standin.h"

#ifdef STANDIN_CUDA
#include <time.h>

static long long block_ns;

void standin_set_block(long long ns) { block_ns = ns; }

static long long now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Out of line: cuStreamSynchronize's own code stays trivial. */
__attribute__((noinline)) static int spin(void)
{
	long long end = now() + block_ns;

	while (now() < end)
		;
	return 0;
}

int cuStreamSynchronize(CUstream s)
{
	if (block_ns > 0)
		return spin();
	return s == (CUstream)1;	/* never: 0 */
}

int cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
		   unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
		   void **extra)
{
	(void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;
	(void)smem; (void)s; (void)params; (void)extra;
	return f ? 0 : 400;	/* CUDA_ERROR_INVALID_HANDLE */
}
#endif

#ifdef STANDIN_CUDART
static __thread int last_error;

int cudaStreamSynchronize(cudaStream_t s)
{
	int r = cuStreamSynchronize(s);

	if (r)
		last_error = r;
	return r;
}

int cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t smem,
		     cudaStream_t s)
{
	int r = cuLaunchKernel((CUfunction)func, g.x, g.y, g.z, b.x, b.y, b.z,
			       (unsigned)smem, s, args, NULL);

	if (r)
		last_error = r;
	return r;
}
#endif

#ifdef STANDIN_NCCL
/* As in NCCL's .rodata, where trainbpf reads the version. */
__attribute__((used)) static const char banner[] = "NCCL version 2.27.3+cuda13.0";

int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op,
		  ncclComm_t comm, cudaStream_t s)
{
	(void)sendbuff; (void)recvbuff; (void)count; (void)datatype; (void)op; (void)s;
	return comm ? 0 : 4;	/* ncclInvalidArgument */
}
#endif
