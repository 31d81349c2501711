/* qkv_post: everything between the QKV projection and attention, in one launch: the
 * Q/K/V biases (qwen2), the per-head Q/K RMS norms (qwen3, gemma3; after RoPE: hunyuan,
 * llama4's without weights), RoPE of the q and k heads, mistral3's attention temperature
 * on the q heads, gemma4's V norm, and the store of the new K and V rows into their paged
 * slots. Before, these were two to four kernels a layer (gpu_bias_add, gpu_head_rmsnorm,
 * gpu_rope, gpu_kv_write), each a node of the decode graph with its own launch gap and
 * ramp (issue 17: a decode step's fixed cost is paid per node).
 *
 * The arithmetic is theirs, element for element, so the result is bitwise what they
 * compute one after another: the bias is one fp32 addition; the norm's sum of squares
 * runs over the same lanes in the same order (one warp per head, double, warp_sum_d) and
 * scales as head_norm.cu does; the rotation is rope.cu's (rope_rotation, shared); the
 * stores round once to the storage type. */
#include "gpu/rope.cuh"

#define QP_WARPS 4 /* warps a block: one (token, head) item each at a time */

/* One warp per item of a token: items [0, n_head) are its query heads, then n_head_kv key
 * heads, then n_head_kv value heads; a block holds QP_WARPS items of one token
 * (blockIdx.y). A warp reads and writes only its own head's columns, so the only ordering
 * it needs is within itself (__syncwarp between its phases). */
/* A head's RMS scale, 1 / sqrt(mean(x^2) + eps), its squares summed in double by the warp:
 * head_norm.cu's expression, over the same lanes in the same order */
__device__ static float head_rms_scale(const float *x, int hd, int lane, float eps)
{
	double ss = 0.0;
	for (int d = lane; d < hd; d += 32)
		ss += (double)x[d] * x[d];
	ss = warp_sum_d(ss);
	return (float)(1.0 / sqrt(ss / (double)hd + (double)eps));
}

template <typename T>
__global__ void __launch_bounds__(QP_WARPS * 32) qkv_post_kernel(struct gpu_qkv_post_args a)
{
	const int t = blockIdx.y;
	const int item = blockIdx.x * QP_WARPS + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	const int n_qk = a.n_head + a.n_head_kv, hd = a.head_dim;
	if (item >= n_qk + a.n_head_kv)
		return; /* warp-uniform */
	float *x = a.qkv + (int64_t)t * a.ld + (int64_t)item * hd;
	if (a.bias) {
		const float *b = a.bias + (int64_t)item * hd;
		for (int d = lane; d < hd; d += 32)
			x[d] += b[d];
		__syncwarp();
	}
	const int32_t slot = a.slots[t];
	const int64_t blk = slot / a.kv.block_size, s = slot % a.kv.block_size;
	T *k_row = (T *)a.kv.base + blk * a.kv.block_stride + s * a.kv.kv_dim;
	if (item >= n_qk) { /* a value head: stored as it is, or RMS-normalized (gemma4) */
		T *v = k_row + a.kv.v_offset + (int64_t)(item - n_qk) * hd;
		float scale = 1.0f;
		if (a.v_norm) /* the q/k norm's expression, weights 1 */
			scale = head_rms_scale(x, hd, lane, a.eps);
		for (int d = lane; d < hd; d += 32)
			v[d] = st_t<T>(a.v_norm ? __fmul_rn(x[d], scale) : x[d]);
		return;
	}
	const bool post = a.norm_post_rope; /* hunyuan, llama4: the norm after RoPE */
	if (a.q_norm && !post) { /* head_norm.cu's expression, over the same lanes in the same
				  * order */
		const float *w = item < a.n_head ? a.q_norm : a.k_norm;
		const float scale = head_rms_scale(x, hd, lane, a.eps);
		for (int d = lane; d < hd; d += 32)
			x[d] = __fmul_rn(__fmul_rn(x[d], scale), w[d]);
		__syncwarp();
	}
	T *k = item >= a.n_head ? k_row + (int64_t)(item - a.n_head) * hd : NULL;
	const int half = a.rope_dim >= 2 ? a.rope_dim / 2 : 0;
	const int p = a.pos[t];
	for (int i = lane; i < half; i += 32) {
		int ia, ib;
		float y0, y1;
		rope_rotation(x, (const float2 *)a.table, p, half, i, a.mscale, a.neox, &ia, &ib,
			      &y0, &y1);
		x[ia] = y0;
		x[ib] = y1;
		if (k && !post) {
			k[ia] = st_t<T>(y0);
			k[ib] = st_t<T>(y1);
		}
	}
	if (!k && a.temp_scale != 0.0f) { /* a query head: mistral3's temperature */
		__syncwarp(); /* the rotated pairs were written by other lanes */
		const float f = qp_attn_temp(a, p);
		for (int d = lane; d < hd; d += 32)
			x[d] = __fmul_rn(x[d], f);
	}
	int d0 = 2 * half; /* K's dimensions not stored yet */
	if (post) { /* hunyuan, llama4: the norm of the rotated head */
		__syncwarp(); /* the rotated pairs were written by other lanes */
		const float *w = !a.q_norm ? NULL : item < a.n_head ? a.q_norm : a.k_norm;
		const float scale = head_rms_scale(x, hd, lane, a.eps);
		for (int d = lane; d < hd; d += 32)
			x[d] = w ? __fmul_rn(__fmul_rn(x[d], scale), w[d]) : __fmul_rn(x[d], scale);
		d0 = 0;
	}
	if (k) /* the dimensions past rope_dim (all of them without RoPE or with the norm) */
		for (int d = d0 + lane; d < hd; d += 32)
			k[d] = st_t<T>(x[d]);
}

cudaError_t gpu_qkv_post(const struct gpu_qkv_post_args *a, enum gpu_dtype dt, cudaStream_t stream)
{
	if (a->n_tok <= 0)
		return cudaSuccess;
	if (a->n_tok > 65535 || a->kv.kv_dim != a->n_head_kv * a->head_dim ||
	    (a->q_norm == NULL) != (a->k_norm == NULL))
		return cudaErrorInvalidValue;
	const int items = a->n_head + 2 * a->n_head_kv;
	dim3 grid((unsigned)gpu_div_up((uint64_t)items, QP_WARPS), (unsigned)a->n_tok);
	GPU_DISPATCH_DTYPE(dt, T, qkv_post_kernel<T><<<grid, QP_WARPS * 32, 0, stream>>>(*a));
	return cudaGetLastError();
}
