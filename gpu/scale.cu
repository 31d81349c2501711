/* scale: element-wise maps of fp32 rows for the gemma architectures: the embedding scale
 * (x *= s) and logit soft-capping (x = cap * tanh(x / cap)), each written as the CPU
 * backend computes it (one rounding per operation, no FMA contraction). */
#include "gpu/gpu_ops.cuh"

__global__ void scale_kernel(float *x, int64_t n, float s, float cap)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		x[i] = cap > 0.0f ? __fmul_rn(cap, tanhf(x[i] / cap)) : __fmul_rn(x[i], s);
}

static cudaError_t launch(float *x, int64_t n, float s, float cap, cudaStream_t stream)
{
	if (n <= 0)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks((uint64_t)n);
	scale_kernel<<<blocks, 256, 0, stream>>>(x, n, s, cap);
	return cudaGetLastError();
}

cudaError_t gpu_scale(float *x, int64_t n, float s, cudaStream_t stream)
{
	return launch(x, n, s, 0.0f, stream);
}

cudaError_t gpu_softcap(float *x, int64_t n, float cap, cudaStream_t stream)
{
	return launch(x, n, 1.0f, cap, stream);
}
