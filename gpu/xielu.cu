/* xielu, relu2: apertus's and nemotron_h's non-gated FFN activations between the up GEMM and
 * the down GEMM. */
#include "gpu/glu.cuh"
#include "gpu/gpu_ops.cuh"

/* model.h's xIELU with the CPU backend's roundings spelled out (no FMA contraction):
 * v > 0: (ap * v) * v + beta * v; else (expm1f(fminf(v, eps)) - v) * an + beta * v. */
__device__ __forceinline__ float xielu_one(float v, float an, float ap, float beta, float eps)
{
	if (v > 0.0f)
		return __fadd_rn(__fmul_rn(__fmul_rn(ap, v), v), __fmul_rn(beta, v));
	return __fadd_rn(__fmul_rn(__fsub_rn(expm1f(fminf(v, eps)), v), an), __fmul_rn(beta, v));
}

template <typename T>
__global__ void xielu_kernel(const float *u, int64_t n, float an, float ap, float beta, float eps,
			     T *out)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		out[i] = st_t<T>(xielu_one(u[i], an, ap, beta, eps));
}

cudaError_t gpu_xielu(const float *u, int n_tok, int n_ff, const float p[4], void *out,
		      enum gpu_dtype dt, cudaStream_t stream)
{
	int64_t n = (int64_t)n_tok * n_ff;
	if (n <= 0)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks((uint64_t)n);
	const float an = p[0], ap = p[1], beta = p[2], eps = p[3];
	GPU_DISPATCH_DTYPE(
	    dt, T, xielu_kernel<T><<<blocks, 256, 0, stream>>>(u, n, an, ap, beta, eps, (T *)out));
	return cudaGetLastError();
}

/* relu2: nemotron_h's non-gated FFN activation (gpu_relu2f) */
template <typename T> __global__ void relu2_kernel(const float *u, int64_t n, T *out)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		out[i] = st_t<T>(gpu_relu2f(u[i]));
}

cudaError_t gpu_relu2(const float *u, int n_tok, int n_ff, void *out, enum gpu_dtype dt,
		      cudaStream_t stream)
{
	int64_t n = (int64_t)n_tok * n_ff;
	if (n <= 0)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks((uint64_t)n);
	GPU_DISPATCH_DTYPE(dt, T, relu2_kernel<T><<<blocks, 256, 0, stream>>>(u, n, (T *)out));
	return cudaGetLastError();
}
