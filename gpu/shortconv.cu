/* shortconv: lfm2's short-convolution block between its in_proj GEMM and its out_proj
 * (core/model/model.h's conv_l): bx rows into the paged cache, then the causal conv. */
#include "gpu/gpu_ops.cuh"

/* Token t's row of bx = B * x (fp32 products of in_proj's columns [0, E) and [2E, 3E)),
 * stored into its slot's row of the layer's slab (converted to dt). */
template <typename T>
__global__ void shortconv_write_kernel(const float *bcx, int ld, int E, const int32_t *slots,
				       struct gpu_kv_layer kv)
{
	const int t = blockIdx.x;
	const int32_t slot = slots[t];
	const int64_t b = slot / kv.block_size, s = slot % kv.block_size;
	T *row = (T *)kv.base + b * kv.block_stride + s * kv.kv_dim;
	const float *r = bcx + (int64_t)t * ld;
	for (int d = threadIdx.x; d < E; d += blockDim.x)
		row[d] = st_t<T>(__fmul_rn(r[d], r[2 * E + d]));
}

/* Token t at position p: o[d] = the fp32 sum over taps k = 0..K-1, in that order, of
 * bx(p - K + 1 + k)[d] * w[d K + k] (the cached rows, as stored; none before position 0),
 * out[t, d] = C[d] * o[d] (converted to dt), the CPU backend's conv_task with its
 * roundings spelled out (no FMA contraction). */
template <typename T>
__global__ void shortconv_kernel(const float *bcx, int ld, int E, int K, const float *w,
				 const int32_t *pos, const int32_t *tok_bt, const int32_t *bt,
				 struct gpu_kv_layer kv, T *out)
{
	const int t = blockIdx.x;
	/* each tap's cached row, an element offset into the slab, or -1 before position 0
	 * (in shared memory: a per-thread array indexed by k would live on the stack) */
	__shared__ int64_t row_off[GPU_CONV_L_MAX];
	if ((int)threadIdx.x < K) {
		const int32_t q = pos[t] - (K - 1) + (int)threadIdx.x;
		row_off[threadIdx.x] =
		    q < 0 ? -1
			  : (int64_t)bt[tok_bt[t] + q / kv.block_size] * kv.block_stride +
				(int64_t)(q % kv.block_size) * kv.kv_dim;
	}
	__syncthreads();
	const T *base = (const T *)kv.base;
	const float *c = bcx + (int64_t)t * ld + E;
	for (int d = threadIdx.x; d < E; d += blockDim.x) {
		float sum = 0.0f;
		for (int k = 0; k < K; k++)
			if (row_off[k] >= 0)
				sum = __fadd_rn(sum, __fmul_rn(ld_f32(base[row_off[k] + d]),
							       w[(int64_t)d * K + k]));
		out[(int64_t)t * E + d] = st_t<T>(__fmul_rn(c[d], sum));
	}
}

cudaError_t gpu_shortconv(const struct gpu_shortconv_args *a, enum gpu_dtype dt,
			  cudaStream_t stream)
{
	if (a->n_tok <= 0)
		return cudaSuccess;
	if (a->conv_l < 1 || a->conv_l > GPU_CONV_L_MAX || a->kv.kv_dim != a->n_embd)
		return cudaErrorInvalidValue;
	const int threads = a->n_embd >= 256 ? 256 : ((a->n_embd + 31) / 32) * 32;
	const int n = a->n_tok, E = a->n_embd, K = a->conv_l, ld = a->ld;
	const float *bcx = a->bcx, *w = a->w;
	const int32_t *slots = a->slots, *pos = a->pos, *tok_bt = a->tok_bt, *bt = a->bt;
	const struct gpu_kv_layer kv = a->kv;
	void *out = a->out;
	/* every row of the pass is in the cache before any token's conv reads it (the kernels
	 * run in stream order) */
	GPU_DISPATCH_DTYPE(
	    dt, T, shortconv_write_kernel<T><<<n, threads, 0, stream>>>(bcx, ld, E, slots, kv));
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	GPU_DISPATCH_DTYPE(dt, T,
			   shortconv_kernel<T><<<n, threads, 0, stream>>>(
			       bcx, ld, E, K, w, pos, tok_bt, bt, kv, (T *)out));
	return cudaGetLastError();
}
