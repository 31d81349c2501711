/* swiglu: the gated activation between the fused gate/up GEMM and the down GEMM. */
#include "gpu/glu.cuh"
#include "gpu/gpu_ops.cuh"

template <typename T>
__global__ void swiglu_kernel(const float *gu, int64_t n, int n_ff, bool gelu, T *out)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t t = i / n_ff, j = i % n_ff;
		float g = gu[t * 2 * n_ff + j];
		float u = gu[t * 2 * n_ff + n_ff + j];
		out[i] = st_t<T>(gpu_glu(g, u, gelu));
	}
}

cudaError_t gpu_swiglu(const float *gu, int n_tok, int n_ff, void *out, enum gpu_dtype dt,
		       bool gelu, cudaStream_t stream)
{
	int64_t n = (int64_t)n_tok * n_ff;
	if (n <= 0)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks((uint64_t)n);
	GPU_DISPATCH_DTYPE(dt, T,
			   swiglu_kernel<T><<<blocks, 256, 0, stream>>>(gu, n, n_ff, gelu, (T *)out));
	return cudaGetLastError();
}
