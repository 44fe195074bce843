// SPDX-License-Identifier: BSD-3-Clause
/*
 * The probe set. Synchronisation points and NCCL calls are probed by
 * default: tens to hundreds of calls per second in a training loop. Launches
 * (thousands per second) are opt-in: see --launches.
 */
#include <stdint.h>
#include <string.h>
#include "probe_table.h"

#define SYNC(n, f, core)	{ n, f, TB_AK_SYNC, 0, 0, 0, core, 0 }
#define COPY(n, f, core)	{ n, f, TB_AK_MEMCPY, 0, 0, 0, core, 0 }
#define COLL(n, cnt, dt, cm, core) { n, LIB_NCCL, TB_AK_COLL, cnt, dt, 0, core, cm }
#define P2P(n)			{ n, LIB_NCCL, TB_AK_P2P, 2, 3, 0, true, 5 }
#define INIT(n, il, core)	{ n, LIB_NCCL, TB_AK_COMM_INIT, 0, 0, il, core, 0 }
#define LAUNCH(n, f)		{ n, f, TB_AK_LAUNCH, 0, 0, (f) == LIB_CUDA, false, 0 }
#define TORCH(n, k, core)	{ n, LIB_TORCH, k, 0, 0, 0, core, 0 }
#define PYLOCK(n, gil_after)	{ n, LIB_PYTHON, TB_AK_PYLOCK, 0, 0, gil_after, false, 0 }

const struct probe_fn probe_fns[] = {
	SYNC("cudaDeviceSynchronize", LIB_CUDART, true),
	SYNC("cudaStreamSynchronize", LIB_CUDART, true),
	SYNC("cudaStreamSynchronize_ptsz", LIB_CUDART, false),
	SYNC("cudaEventSynchronize", LIB_CUDART, true),
	COPY("cudaMemcpy", LIB_CUDART, true),
	COPY("cudaMemcpy_ptds", LIB_CUDART, false),
	COPY("cudaMemcpy2D", LIB_CUDART, false),
	COPY("cudaMemcpy2D_ptds", LIB_CUDART, false),
	COPY("cudaMemcpy3D", LIB_CUDART, false),
	COPY("cudaMemcpy3D_ptds", LIB_CUDART, false),
	COPY("cudaMemcpyFromSymbol", LIB_CUDART, false),
	COPY("cudaMemcpyFromSymbol_ptds", LIB_CUDART, false),
	COPY("cudaMemcpyPeer", LIB_CUDART, false),

	SYNC("cuCtxSynchronize", LIB_CUDA, true),
	SYNC("cuCtxSynchronize_v2", LIB_CUDA, false),
	SYNC("cuStreamSynchronize", LIB_CUDA, true),
	SYNC("cuStreamSynchronize_ptsz", LIB_CUDA, false),
	SYNC("cuEventSynchronize", LIB_CUDA, true),
	COPY("cuMemcpy", LIB_CUDA, false),
	COPY("cuMemcpy_ptds", LIB_CUDA, false),
	COPY("cuMemcpyDtoH_v2", LIB_CUDA, true),
	COPY("cuMemcpyDtoH_v2_ptds", LIB_CUDA, false),

	/*
	 * (sendbuff, recvbuff, count, datatype, ...) unless noted; the comm
	 * follows op and/or root where the call has them (nccl.h).
	 */
	COLL("ncclAllReduce", 3, 4, 6, true),	/* ..., op, comm, stream */
	COLL("ncclBroadcast", 3, 4, 6, true),	/* ..., root, comm, stream */
	COLL("ncclBcast", 2, 3, 5, false),	/* (buff, count, datatype, root, comm, stream) */
	COLL("ncclReduce", 3, 4, 7, true),	/* ..., op, root, comm: on the stack */
	COLL("ncclAllGather", 3, 4, 5, true),	/* ..., comm, stream */
	COLL("ncclReduceScatter", 3, 4, 6, true),	/* ..., op, comm, stream */
	COLL("ncclAlltoAll", 3, 4, 5, false),	/* ..., comm, stream */
	COLL("ncclGather", 3, 4, 6, false),	/* ..., root, comm, stream */
	COLL("ncclScatter", 3, 4, 6, false),	/* ..., root, comm, stream */
	P2P("ncclSend"),		/* (buff, count, datatype, peer, comm, stream) */
	P2P("ncclRecv"),
	{ "ncclGroupStart", LIB_NCCL, TB_AK_GROUP, 0, 0, 0, true },
	{ "ncclGroupEnd", LIB_NCCL, TB_AK_GROUP, 0, 0, 0, true },
	INIT("ncclCommInitRank", TB_IL_RANK, true),
	INIT("ncclCommInitRankConfig", TB_IL_RANK, false),
	INIT("ncclCommInitAll", TB_IL_ALL, false),
	INIT("ncclCommInitRankScalable", TB_IL_SCALABLE, false),
	INIT("ncclCommSplit", TB_IL_SPLIT, false),
	INIT("ncclCommShrink", TB_IL_SHRINK, false),
	{ "ncclCommFinalize", LIB_NCCL, TB_AK_COMM_DESTROY, 0, 0, 0, false },
	{ "ncclCommDestroy", LIB_NCCL, TB_AK_COMM_DESTROY, 0, 0, 0, true },
	{ "ncclCommAbort", LIB_NCCL, TB_AK_COMM_DESTROY, 0, 0, 0, false },

	/* --launches: every way a kernel reaches the GPU */
	LAUNCH("cudaLaunchKernel", LIB_CUDART),
	LAUNCH("cudaLaunchKernel_ptsz", LIB_CUDART),
	LAUNCH("cudaLaunchKernelExC", LIB_CUDART),
	LAUNCH("cudaLaunchKernelExC_ptsz", LIB_CUDART),
	LAUNCH("cudaLaunchCooperativeKernel", LIB_CUDART),
	LAUNCH("cudaLaunchCooperativeKernel_ptsz", LIB_CUDART),
	LAUNCH("cudaGraphLaunch", LIB_CUDART),
	LAUNCH("cudaGraphLaunch_ptsz", LIB_CUDART),
	LAUNCH("cuLaunchKernel", LIB_CUDA),
	LAUNCH("cuLaunchKernel_ptsz", LIB_CUDA),
	LAUNCH("cuLaunchKernelEx", LIB_CUDA),
	LAUNCH("cuLaunchKernelEx_ptsz", LIB_CUDA),
	LAUNCH("cuLaunchCooperativeKernel", LIB_CUDA),
	LAUNCH("cuLaunchCooperativeKernel_ptsz", LIB_CUDA),
	LAUNCH("cuGraphLaunch", LIB_CUDA),
	LAUNCH("cuGraphLaunch_ptsz", LIB_CUDA),

	/*
	 * PyTorch's brackets (docs/phases.md): libtorch_cpu opens them, and
	 * libtorch_python closes the named ones. The complete (C1/D1) and base
	 * (C2/D2) constructors and destructors of the writer share their code
	 * in the builds we know: one probe; where they do not, both fire and
	 * the BPF side counts the second as the same bracket. None is core: a
	 * libtorch lacks what the other one has.
	 */
	TORCH("_ZN5torch8autograd8profiler25record_function_enter_newE*", TB_AK_TORCH_OPEN, false),
	TORCH("_ZN5torch3jit24invokeOperatorFromPythonE*", TB_AK_TORCH_OP, false),
	TORCH("_Z34DisableTorchFunctionSubclass__exitP7_objectS0_", TB_AK_TORCH_CLOSE, false),
	/* Python's backward: it catches every exception (its uretprobe is safe) */
	TORCH("_Z22THPEngine_run_backwardP7_objectS0_S0_", TB_AK_TORCH_BACKWARD, false),
	TORCH("_ZN6caffe29serialize19PyTorchStreamWriterC1E*basic_string*", TB_AK_TORCH_SAVE, false),
	TORCH("_ZN6caffe29serialize19PyTorchStreamWriterC2E*basic_string*", TB_AK_TORCH_SAVE, false),
	TORCH("_ZN6caffe29serialize19PyTorchStreamWriterC1E*function*", TB_AK_TORCH_SAVE, false),
	TORCH("_ZN6caffe29serialize19PyTorchStreamWriterC2E*function*", TB_AK_TORCH_SAVE, false),
	TORCH("_ZN6caffe29serialize19PyTorchStreamWriterD1Ev", TB_AK_TORCH_SAVED, false),
	TORCH("_ZN6caffe29serialize19PyTorchStreamWriterD2Ev", TB_AK_TORCH_SAVED, false),

	/*
	 * Where a Python thread blocks for a lock another thread releases
	 * (queue.Queue.get, Event.wait, Future.result: Condition.wait's
	 * waiter lock), with the GIL released (docs/phases.md, "A wait for a
	 * producer thread"). Python < 3.13: PyThread_acquire_lock_timed, the
	 * GIL taken back after it returns; 3.13: threading's locks are
	 * PyMutexes that park in _PySemaphore_Wait, which takes the GIL back
	 * before it returns.
	 */
	PYLOCK("PyThread_acquire_lock_timed", 1),
	PYLOCK("_PySemaphore_Wait", 0),
};

const int probe_nfns = sizeof(probe_fns) / sizeof(probe_fns[0]);
_Static_assert(sizeof(probe_fns) / sizeof(probe_fns[0]) <= TB_MAX_APIS,
	       "the api id is 8 bits of the cookie");

const char *const probe_family_names[LIB_NFAMILIES] = { "cudart", "cuda", "nccl", "torch",
						      "python" };
const char *const probe_kind_names[TB_AK_NKINDS] = {
	"sync", "memcpy", "collective", "p2p", "group", "comm_init",
	"comm_destroy", "launch", "torch_open", "torch_op", "torch_close",
	"torch_backward", "torch_save", "torch_saved", "torch_op_ret", "py_lock",
};

int probe_fn_find(const char *name)
{
	for (int i = 0; i < probe_nfns; i++)
		if (!strcmp(probe_fns[i].name, name))
			return i;
	return -1;
}

uint64_t probe_fn_cookie(int api)
{
	const struct probe_fn *a = &probe_fns[api];

	return TB_COOKIE(api, a->kind, a->cnt, a->dt, a->il, a->cm);
}

bool probe_kind_is_sync(enum tb_api_kind k)
{
	return k == TB_AK_SYNC || k == TB_AK_MEMCPY;
}

bool probe_kind_is_torch(enum tb_api_kind k)
{
	return k >= TB_AK_TORCH_OPEN && k <= TB_AK_PYLOCK;
}

bool probe_kind_is_op(enum tb_api_kind k)
{
	return k == TB_AK_COLL || k == TB_AK_P2P;
}
