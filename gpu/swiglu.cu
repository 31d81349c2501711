/* swiglu: the gated activation between the fused gate/up GEMM and the down GEMM. */
#include "gpu/glu.cuh"
#include "gpu/gpu_ops.cuh"

template <typename T>
__global__ void swiglu_kernel(const float *gu, int64_t n, int n_ff, bool gelu, float limit, T *out)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t t = i / n_ff, j = i % n_ff;
		float g = gu[t * 2 * n_ff + j];
		float u = gu[t * 2 * n_ff + n_ff + j];
		out[i] = st_t<T>(limit > 0.0f ? gpu_glu_clamp(g, u, limit) : gpu_glu(g, u, gelu));
	}
}

static cudaError_t swiglu(const float *gu, int n_tok, int n_ff, void *out, enum gpu_dtype dt,
			  bool gelu, float limit, cudaStream_t stream)
{
	int64_t n = (int64_t)n_tok * n_ff;
	if (n <= 0)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks((uint64_t)n);
	GPU_DISPATCH_DTYPE(dt, T,
			   swiglu_kernel<T>
			   <<<blocks, 256, 0, stream>>>(gu, n, n_ff, gelu, limit, (T *)out));
	return cudaGetLastError();
}

cudaError_t gpu_swiglu(const float *gu, int n_tok, int n_ff, void *out, enum gpu_dtype dt,
		       bool gelu, cudaStream_t stream)
{
	return swiglu(gu, n_tok, n_ff, out, dt, gelu, 0.0f, stream);
}

cudaError_t gpu_swiglu_clamp(const float *gu, int n_tok, int n_ff, float limit, void *out,
			     enum gpu_dtype dt, cudaStream_t stream)
{
	if (!(limit > 0.0f))
		return cudaErrorInvalidValue;
	return swiglu(gu, n_tok, n_ff, out, dt, false, limit, stream);
}
