// SPDX-License-Identifier: BSD-3-Clause
/*
 * cudart.c - stand-in for the CUDA runtime, libcudart.so.13 (see
 * fakecuda.h). Each call goes on to the driver function the real runtime
 * uses, through the dynamic symbol (the PLT; in gpujob-static, a direct
 * call), and records the result as the "last error" afterwards, as the
 * real runtime does: so the driver call is a real nested call, never a
 * tail jump.
 */
#include "fakecuda.h"

static __thread cudaError_t last_error;

static cudaError_t done(CUresult r)
{
	if (r)
		last_error = r;	/* the driver's and runtime's codes agree for ours */
	return r;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = 0;
	return e;
}

cudaError_t cudaDeviceSynchronize(void) { return done(cuCtxSynchronize()); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return done(cuStreamSynchronize(s)); }
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return done(cuStreamSynchronize_ptsz(s)); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return done(cuEventSynchronize(e)); }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	if (kind == cudaMemcpyDeviceToHost)
		return done(cuMemcpyDtoH_v2(dst, (CUdeviceptr)src, n));
	return done(cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, n));
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	if (kind == cudaMemcpyDeviceToHost)
		return done(cuMemcpyDtoH_v2_ptds(dst, (CUdeviceptr)src, n));
	return done(cuMemcpy_ptds((CUdeviceptr)dst, (CUdeviceptr)src, n));
}

/* One driver copy of width x height bytes: rows are not copied one by one. */
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
			 size_t width, size_t height, enum cudaMemcpyKind kind)
{
	(void)kind;
	if (dpitch != width || spitch != width)
		return 1;	/* cudaErrorInvalidValue: only dense copies here */
	return done(cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, width * height));
}

cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
			      size_t width, size_t height, enum cudaMemcpyKind kind)
{
	(void)kind;
	if (dpitch != width || spitch != width)
		return 1;
	return done(cuMemcpy_ptds((CUdeviceptr)dst, (CUdeviceptr)src, width * height));
}

cudaError_t cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t smem,
			     cudaStream_t s)
{
	return done(cuLaunchKernel((CUfunction)func, g.x, g.y, g.z, b.x, b.y, b.z,
				   (unsigned)smem, s, args, NULL));
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 g, dim3 b, void **args,
				  size_t smem, cudaStream_t s)
{
	return done(cuLaunchKernel_ptsz((CUfunction)func, g.x, g.y, g.z, b.x, b.y, b.z,
					(unsigned)smem, s, args, NULL));
}

static void driver_config(const cudaLaunchConfig_t *c, CUlaunchConfig *d)
{
	*d = (CUlaunchConfig){ c->gridDim.x, c->gridDim.y, c->gridDim.z,
			       c->blockDim.x, c->blockDim.y, c->blockDim.z,
			       (unsigned)c->dynamicSmemBytes, c->stream, NULL, 0 };
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
				void **args)
{
	CUlaunchConfig d;

	if (!config)
		return 1;
	driver_config(config, &d);
	return done(cuLaunchKernelEx(&d, (CUfunction)func, args, NULL));
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
				     void **args)
{
	CUlaunchConfig d;

	if (!config)
		return 1;
	driver_config(config, &d);
	return done(cuLaunchKernelEx_ptsz(&d, (CUfunction)func, args, NULL));
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s) { return done(cuGraphLaunch(g, s)); }
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t g, cudaStream_t s)
{
	return done(cuGraphLaunch_ptsz(g, s));
}
