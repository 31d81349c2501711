/* head_norm: the per-head RMS norm of qwen3's and gemma3's queries and keys, Command R+'s
 * per-head LayerNorm, and olmo2's norm of the whole query and key rows, in place in the
 * fp32 QKV rows after the projection and before RoPE, as the CPU backend computes it (the
 * sums in double, then x * scale * w rounded as there). */
#include "gpu/gpu_ops.cuh"

/* One warp per (token, head): heads [0, n_head) are queries (weights qw), the next
 * n_head_kv keys (weights kw). */
__global__ void head_rmsnorm_kernel(float *qkv, int ld, int n_tok, int n_head, int n_head_kv,
				    int hd, const float *qw, const float *kw, float eps)
{
	int item = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int lane = threadIdx.x & 31;
	int heads = n_head + n_head_kv;
	if (item >= n_tok * heads)
		return; /* warp-uniform */
	int t = item / heads, h = item % heads;
	float *x = qkv + (int64_t)t * ld + (int64_t)h * hd;
	const float *w = h < n_head ? qw : kw;
	double ss = 0.0;
	for (int d = lane; d < hd; d += 32)
		ss += (double)x[d] * x[d];
	ss = warp_sum_d(ss);
	float scale = (float)(1.0 / sqrt(ss / (double)hd + (double)eps));
	for (int d = lane; d < hd; d += 32)
		x[d] = __fmul_rn(__fmul_rn(x[d], scale), w[d]);
}

cudaError_t gpu_head_rmsnorm(float *qkv, int ld, int n_tok, int n_head, int n_head_kv, int hd,
			     const float *qw, const float *kw, float eps, cudaStream_t stream)
{
	int64_t items = (int64_t)n_tok * (n_head + n_head_kv);
	if (items <= 0)
		return cudaSuccess;
	unsigned blocks = gpu_div_up((uint64_t)items, 4); /* 4 warps per block */
	head_rmsnorm_kernel<<<blocks, 128, 0, stream>>>(qkv, ld, n_tok, n_head, n_head_kv, hd, qw,
							 kw, eps);
	return cudaGetLastError();
}

/* gpu_head_layernorm: one warp per (token, head), the head's own weight row. */
__global__ void head_layernorm_kernel(float *qkv, int ld, int n_tok, int n_head, int n_head_kv,
				      int hd, const float *qw, const float *kw, float eps)
{
	int item = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	int lane = threadIdx.x & 31;
	int heads = n_head + n_head_kv;
	if (item >= n_tok * heads)
		return; /* warp-uniform */
	int t = item / heads, h = item % heads;
	float *x = qkv + (int64_t)t * ld + (int64_t)h * hd;
	const float *w = h < n_head ? qw + (int64_t)h * hd : kw + (int64_t)(h - n_head) * hd;
	double s = 0.0;
	for (int d = lane; d < hd; d += 32)
		s += (double)x[d];
	const float mean = (float)(warp_sum_d(s) / (double)hd);
	double ss = 0.0;
	for (int d = lane; d < hd; d += 32) {
		float v = __fsub_rn(x[d], mean);
		ss += (double)v * v;
	}
	ss = warp_sum_d(ss);
	float scale = (float)(1.0 / sqrt(ss / (double)hd + (double)eps));
	for (int d = lane; d < hd; d += 32)
		x[d] = __fmul_rn(__fmul_rn(__fsub_rn(x[d], mean), scale), w[d]);
}

cudaError_t gpu_head_layernorm(float *qkv, int ld, int n_tok, int n_head, int n_head_kv, int hd,
			       const float *qw, const float *kw, float eps, cudaStream_t stream)
{
	int64_t items = (int64_t)n_tok * (n_head + n_head_kv);
	if (items <= 0)
		return cudaSuccess;
	if (!qw || !kw)
		return cudaErrorInvalidValue;
	unsigned blocks = gpu_div_up((uint64_t)items, 4); /* 4 warps per block */
	head_layernorm_kernel<<<blocks, 128, 0, stream>>>(qkv, ld, n_tok, n_head, n_head_kv, hd,
							   qw, kw, eps);
	return cudaGetLastError();
}

#define QKR_THREADS 256

/* Block (x = 0: Q, 1: K; y = token): its row's sum of squares over QKR_THREADS lanes, then
 * the block's warps combined in shared memory, then every element scaled. */
__global__ void __launch_bounds__(QKR_THREADS)
    qk_rmsnorm_rows_kernel(float *qkv, int ld, int n_q, int n_kv, const float *qw,
			   const float *kw, float eps)
{
	__shared__ double red[QKR_THREADS / 32];
	const bool k = blockIdx.x == 1;
	const int n = k ? n_kv : n_q;
	float *x = qkv + (int64_t)blockIdx.y * ld + (k ? n_q : 0);
	const float *w = k ? kw : qw;
	double ss = 0.0;
	for (int d = threadIdx.x; d < n; d += QKR_THREADS)
		ss += (double)x[d] * x[d];
	ss = warp_sum_d(ss);
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = ss;
	__syncthreads();
	double tot = 0.0;
	for (int i = 0; i < QKR_THREADS / 32; i++) /* every thread, the same order */
		tot += red[i];
	float scale = (float)(1.0 / sqrt(tot / (double)n + (double)eps));
	for (int d = threadIdx.x; d < n; d += QKR_THREADS)
		x[d] = __fmul_rn(__fmul_rn(x[d], scale), w[d]);
}

cudaError_t gpu_qk_rmsnorm_rows(float *qkv, int ld, int n_tok, int n_q, int n_kv, const float *qw,
				const float *kw, float eps, cudaStream_t stream)
{
	if (n_tok <= 0)
		return cudaSuccess;
	if (n_tok > 65535 || n_q <= 0 || n_kv <= 0 || ld < n_q + n_kv || !qw || !kw)
		return cudaErrorInvalidValue;
	dim3 grid(2, (unsigned)n_tok);
	qk_rmsnorm_rows_kernel<<<grid, QKR_THREADS, 0, stream>>>(qkv, ld, n_q, n_kv, qw, kw, eps);
	return cudaGetLastError();
}
