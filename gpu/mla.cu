/* mla: deepseek2's latent attention between its projections and attention (gpu_ops.cuh's
 * gpu_mla_prep): the kv_a norm, the RoPE of k_pe and q_pe, the key row's store into its
 * paged slot, and q_nope's copy as attn_k_b's input, in one launch.
 *
 * One warp per item of a token (blockIdx.y): item 0 is the token's key row, items 1 ..
 * n_head its query heads. The norm is head_norm.cu's expression (sum of squares in double
 * over the lanes, warp_sum_d), the rotation rope.cuh's, so that both are what qkv_post
 * computes for the other architectures. */
#include "gpu/rope.cuh"

#define MLA_WARPS 4

template <typename T>
__global__ void __launch_bounds__(MLA_WARPS * 32) mla_prep_kernel(struct gpu_mla_prep_args a)
{
	const int t = blockIdx.y;
	const int item = blockIdx.x * MLA_WARPS + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (item > a.n_head)
		return; /* warp-uniform */
	const int C = a.n_lora, half = a.rope_dim / 2, p = a.pos[t];
	const float2 *table = (const float2 *)a.table;
	if (item == 0) { /* the key row: [rmsnorm(c) * kv_norm, rope(k_pe)] */
		const float *x = a.kv + (int64_t)t * a.ldkv;
		const int32_t slot = a.slots[t];
		T *k = (T *)a.kv_out.base +
		       (int64_t)(slot / a.kv_out.block_size) * a.kv_out.block_stride +
		       (int64_t)(slot % a.kv_out.block_size) * a.kv_out.kv_dim;
		double ss = 0.0;
		for (int d = lane; d < C; d += 32)
			ss += (double)x[d] * x[d];
		ss = warp_sum_d(ss);
		const float scale = (float)(1.0 / sqrt(ss / (double)C + (double)a.eps));
		for (int d = lane; d < C; d += 32)
			k[d] = st_t<T>(__fmul_rn(__fmul_rn(x[d], scale), a.kv_norm[d]));
		for (int i = lane; i < half; i += 32) {
			int ia, ib;
			float y0, y1;
			rope_rotation(x + C, table, p, half, i, a.mscale, a.neox, &ia, &ib, &y0,
				      &y1);
			k[C + ia] = st_t<T>(y0);
			k[C + ib] = st_t<T>(y1);
		}
		return;
	}
	const int h = item - 1, hd = C + a.rope_dim;
	const float *x = a.qr + (int64_t)t * a.ldqr + (int64_t)h * (a.nope + a.rope_dim);
	T *qn = (T *)a.qn + ((int64_t)t * a.n_head + h) * a.nope;
	for (int d = lane; d < a.nope; d += 32)
		qn[d] = st_t<T>(x[d]);
	float *q = a.q + (int64_t)t * a.ldq + (int64_t)h * hd + C;
	for (int i = lane; i < half; i += 32) {
		int ia, ib;
		float y0, y1;
		rope_rotation(x + a.nope, table, p, half, i, a.mscale, a.neox, &ia, &ib, &y0, &y1);
		q[ia] = y0;
		q[ib] = y1;
	}
}

cudaError_t gpu_mla_prep(const struct gpu_mla_prep_args *a, enum gpu_dtype dt, cudaStream_t stream)
{
	if (a->n_tok <= 0)
		return cudaSuccess;
	if (a->n_tok > 65535 || a->n_head < 1 || a->n_lora < 1 || a->nope < 1 || a->rope_dim < 2 ||
	    a->rope_dim % 2 != 0 || a->kv_out.kv_dim != a->n_lora + a->rope_dim)
		return cudaErrorInvalidValue;
	dim3 grid((unsigned)gpu_div_up((uint64_t)a->n_head + 1, MLA_WARPS), (unsigned)a->n_tok);
	GPU_DISPATCH_DTYPE(dt, T, mla_prep_kernel<T><<<grid, MLA_WARPS * 32, 0, stream>>>(*a));
	return cudaGetLastError();
}
