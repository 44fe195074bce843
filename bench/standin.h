// SPDX-License-Identifier: BSD-3-Clause
/*
 * standin.h - the few CUDA runtime, CUDA driver and NCCL functions the
 * benchmarks call, with their real names and x86-64 signatures, for the
 * stand-in libraries of bench/standin.c (libcudart.so.13, libcuda.so.1,
 * libnccl.so.2, built into bench/build/push/ and bench/build/xol/).
 *
 * The stand-ins return at once, except that the driver's synchronisations
 * spin for standin_set_block() nanoseconds (default 0). They exist apart
 * from tests/workloads/fakecuda so that the benchmark controls the first
 * instruction of each probed function, which decides what a uprobe hit
 * costs: see bench/README.md (probe_cost.sh).
 */
#ifndef BENCH_STANDIN_H
#define BENCH_STANDIN_H

#include <stddef.h>

#define STANDIN_API __attribute__((visibility("default")))

typedef struct { unsigned int x, y, z; } dim3;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUstream_st *CUstream;
typedef struct CUfunc_st *CUfunction;
typedef struct ncclComm *ncclComm_t;

/* libcuda.so.1 */
STANDIN_API void standin_set_block(long long ns);
STANDIN_API int cuStreamSynchronize(CUstream s);
STANDIN_API int cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
			       unsigned bx, unsigned by, unsigned bz, unsigned smem,
			       CUstream s, void **params, void **extra);

/* libcudart.so.13: each calls its driver function, as the real runtime does */
STANDIN_API int cudaStreamSynchronize(cudaStream_t s);
STANDIN_API int cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
				 size_t smem, cudaStream_t s);

/* libnccl.so.2 */
enum { ncclFloat = 7, ncclSum = 0 };
STANDIN_API int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			      int datatype, int op, ncclComm_t comm, cudaStream_t s);

#endif
