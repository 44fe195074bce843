// SPDX-License-Identifier: BSD-3-Clause
/*
 * fakecuda.h - the slice of the CUDA runtime, CUDA driver and NCCL APIs
 * that trainbpf probes, declared with the real names and C signatures
 * (x86-64 SysV: arguments land in the same registers and stack slots as
 * with the real headers), for stand-in libraries that run without a GPU.
 *
 * Stand-ins (built into tests/workloads/build/fakecuda/):
 *   libcudart.so.13  runtime; every call goes on to its driver counterpart
 *                    through the PLT, as the real runtime does:
 *                    cudaStreamSynchronize -> cuStreamSynchronize,
 *                    cudaDeviceSynchronize -> cuCtxSynchronize,
 *                    cudaEventSynchronize -> cuEventSynchronize,
 *                    cudaMemcpy DtoH -> cuMemcpyDtoH_v2, other kinds and
 *                    cudaMemcpy2D -> cuMemcpy, cudaLaunchKernel ->
 *                    cuLaunchKernel, cudaLaunchKernelExC -> cuLaunchKernelEx,
 *                    cudaGraphLaunch -> cuGraphLaunch; _ptsz/_ptds to the
 *                    driver's _ptsz/_ptds.
 *   libcuda.so.1     driver; synchronisations and copies block, launches
 *                    return at once.
 *   libnccl.so.2     collectives and p2p block; inside ncclGroupStart/End
 *                    they are queued and ncclGroupEnd blocks once for them.
 *                    ncclBcast calls ncclBroadcast, as NCCL's does. Every
 *                    ncclX is a weak alias of pncclX, as in NCCL.
 *
 * How long blocking calls block: fakecuda_set_block() (libcuda.so.1) and
 * fakenccl_set_block() (libnccl.so.2), mode FAKE_SPIN (busy loop on
 * CLOCK_MONOTONIC) or FAKE_SLEEP (nanosleep), for ns nanoseconds. The
 * default is 0 ns: return at once. Not thread-local: set it before the
 * threads that call start.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>

#define FAKE_API __attribute__((visibility("default")))

enum fake_block_mode { FAKE_SPIN = 0, FAKE_SLEEP = 1 };

FAKE_API void fakecuda_set_block(int mode, long long ns);
FAKE_API void fakenccl_set_block(int mode, long long ns);
/*
 * Read inside the library, after a call's entry probes and before its
 * return probes (block.h), for the calling thread: CLOCK_MONOTONIC at the
 * start of its latest block, and its time spent blocking so far.
 */
FAKE_API long long fakecuda_last_block_ns(void);
FAKE_API long long fakenccl_last_block_ns(void);
FAKE_API long long fakecuda_blocked_ns(void);
FAKE_API long long fakenccl_blocked_ns(void);

/* ---- CUDA runtime (cuda_runtime_api.h) ---- */
typedef int cudaError_t;		/* enum cudaError: 0 = cudaSuccess */
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};
typedef struct { unsigned int x, y, z; } dim3;
typedef struct cudaLaunchAttribute_st cudaLaunchAttribute;
typedef struct {
	dim3 gridDim;
	dim3 blockDim;
	size_t dynamicSmemBytes;
	cudaStream_t stream;
	cudaLaunchAttribute *attrs;
	unsigned int numAttrs;
} cudaLaunchConfig_t;

FAKE_API cudaError_t cudaDeviceSynchronize(void);
FAKE_API cudaError_t cudaStreamSynchronize(cudaStream_t stream);
FAKE_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
FAKE_API cudaError_t cudaEventSynchronize(cudaEvent_t event);
FAKE_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
				enum cudaMemcpyKind kind);
FAKE_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
				     enum cudaMemcpyKind kind);
FAKE_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src,
				  size_t spitch, size_t width, size_t height,
				  enum cudaMemcpyKind kind);
FAKE_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src,
				       size_t spitch, size_t width, size_t height,
				       enum cudaMemcpyKind kind);
FAKE_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim,
				      void **args, size_t sharedMem, cudaStream_t stream);
FAKE_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
					   void **args, size_t sharedMem,
					   cudaStream_t stream);
FAKE_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config,
					 const void *func, void **args);
FAKE_API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config,
					      const void *func, void **args);
FAKE_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
FAKE_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
FAKE_API cudaError_t cudaGetLastError(void);

/* ---- CUDA driver (cuda.h) ---- */
typedef int CUresult;			/* enum cudaError_enum: 0 = CUDA_SUCCESS */
typedef unsigned long long CUdeviceptr;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUlaunchAttribute_st CUlaunchAttribute;
typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

FAKE_API CUresult cuCtxSynchronize(void);
FAKE_API CUresult cuStreamSynchronize(CUstream hStream);
FAKE_API CUresult cuStreamSynchronize_ptsz(CUstream hStream);
FAKE_API CUresult cuEventSynchronize(CUevent hEvent);
FAKE_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
FAKE_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
FAKE_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
FAKE_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice,
				       size_t ByteCount);
FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				 unsigned int gridDimZ, unsigned int blockDimX,
				 unsigned int blockDimY, unsigned int blockDimZ,
				 unsigned int sharedMemBytes, CUstream hStream,
				 void **kernelParams, void **extra);
FAKE_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
				      unsigned int gridDimY, unsigned int gridDimZ,
				      unsigned int blockDimX, unsigned int blockDimY,
				      unsigned int blockDimZ, unsigned int sharedMemBytes,
				      CUstream hStream, void **kernelParams, void **extra);
FAKE_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
				   void **kernelParams, void **extra);
FAKE_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
					void **kernelParams, void **extra);
FAKE_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
FAKE_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);

/* ---- NCCL (nccl.h) ---- */
typedef int ncclResult_t;		/* 0 = ncclSuccess, 4 = ncclInvalidArgument */
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct ncclConfig ncclConfig_t;	/* only passed by pointer here */
typedef enum {
	ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2,
	ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6,
	ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7, ncclFloat64 = 8,
	ncclDouble = 8, ncclBfloat16 = 9, ncclFloat8e4m3 = 10,
	ncclFloat8e5m2 = 11, ncclNumTypes = 12,
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

/* Declares ncclX and pncclX with the same signature. */
#define FAKE_NCCL(name, ...) \
	FAKE_API ncclResult_t name(__VA_ARGS__); \
	FAKE_API ncclResult_t p##name(__VA_ARGS__)

FAKE_NCCL(ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count,
	  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count,
	  ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root,
	  ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclReduce, const void *sendbuff, void *recvbuff, size_t count,
	  ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
	  cudaStream_t stream);
FAKE_NCCL(ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount,
	  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
	  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclAlltoAll, const void *sendbuff, void *recvbuff, size_t count,
	  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype,
	  int peer, ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
	  ncclComm_t comm, cudaStream_t stream);
FAKE_NCCL(ncclGroupStart, void);
FAKE_NCCL(ncclGroupEnd, void);
FAKE_NCCL(ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
FAKE_NCCL(ncclCommInitRankConfig, ncclComm_t *comm, int nranks, ncclUniqueId commId,
	  int rank, ncclConfig_t *config);
FAKE_NCCL(ncclCommInitAll, ncclComm_t *comm, int ndev, const int *devlist);
FAKE_NCCL(ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
	  ncclConfig_t *config);
FAKE_NCCL(ncclCommDestroy, ncclComm_t comm);
FAKE_NCCL(ncclCommAbort, ncclComm_t comm);
FAKE_NCCL(ncclGetVersion, int *version);
FAKE_NCCL(ncclCommUserRank, const ncclComm_t comm, int *rank);
FAKE_NCCL(ncclCommCount, const ncclComm_t comm, int *count);

#define FAKE_NCCL_VERSION 22703		/* 2.27.3: not the real one at /usr/local/cuda */

#endif /* FAKECUDA_H */
