// SPDX-License-Identifier: BSD-3-Clause
/*
 * cuda.c - stand-in for the CUDA driver, libcuda.so.1 (see fakecuda.h).
 * Synchronisations and copies block as fakecuda_set_block() says; copies
 * also copy, when given two addresses; launches return at once.
 */
#include <string.h>
#include "fakecuda.h"
#include "block.h"

static struct fake_block g_block;

long long fakecuda_last_block_ns(void)
{
	return fake_last_start;
}

long long fakecuda_blocked_ns(void)
{
	return fake_blocked;
}

void fakecuda_set_block(int mode, long long ns)
{
	g_block.mode = mode;
	g_block.ns = ns;
}

static CUresult wait_gpu(void)
{
	fake_block_for(&g_block);
	return 0;
}

static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	if (dst && src && n)
		memcpy((void *)dst, (const void *)src, n);
	return wait_gpu();
}

CUresult cuCtxSynchronize(void) { return wait_gpu(); }
CUresult cuStreamSynchronize(CUstream s) { (void)s; return wait_gpu(); }
CUresult cuStreamSynchronize_ptsz(CUstream s) { (void)s; return wait_gpu(); }
CUresult cuEventSynchronize(CUevent e) { return e ? wait_gpu() : 400; /* invalid handle */ }

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(dst, src, n); }
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(dst, src, n); }

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return copy((CUdeviceptr)dst, src, n);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
	return copy((CUdeviceptr)dst, src, n);
}

/* Launches: no call between them, so no probed call nests in another here. */
static CUresult launch(const void *f) { return f ? 0 : 400; /* invalid handle */ }

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
			void **extra)
{
	(void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;
	(void)smem; (void)s; (void)params; (void)extra;
	return launch(f);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
			     unsigned bx, unsigned by, unsigned bz, unsigned smem,
			     CUstream s, void **params, void **extra)
{
	(void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;
	(void)smem; (void)s; (void)params; (void)extra;
	return launch(f);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
			  void **extra)
{
	(void)params; (void)extra;
	return config ? launch(f) : 1;	/* CUDA_ERROR_INVALID_VALUE */
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
			       void **extra)
{
	(void)params; (void)extra;
	return config ? launch(f) : 1;
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s) { (void)s; return launch(g); }
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) { (void)s; return launch(g); }
