/* rope: rotary position embedding of the q and k heads, in place in the fp32 QKV rows.
 *
 * No trigonometry on the device. The host tabulates, once per model, cos and sin of
 * d * 2^s * freq[i] in double (rounded to fp32) for the three digits of a position
 * (pos = d0 + 2^11 d1 + 2^21 d2, d0 < 2048, d1 < 1024, d2 < 1024: every int32 position
 * >= 0); the kernel composes the three rotations with two complex products in fp32 (FMA).
 * Invariant: row 0 of every digit table is exactly (1, 0), so for pos < 2048 the products
 * are exact and the result is bitwise (float)cos(pos * freq[i]), the CPU backend's value;
 * beyond, each product adds at most ~1 fp32 ulp (measured in tests/gpu_test_kernels.cu). */
#include "gpu/gpu_ops.cuh"

#include <math.h>

extern "C" void gpu_rope_table_fill(const double *freq, int half, float *table)
{
	static const int rows[3] = {GPU_ROPE_ROWS0, GPU_ROPE_ROWS1, GPU_ROPE_ROWS2};
	static const int shift[3] = {0, 11, 21};
	float *t = table;
	for (int l = 0; l < 3; l++)
		for (int d = 0; d < rows[l]; d++, t += 2 * half)
			for (int i = 0; i < half; i++) {
				double th = (double)((int64_t)d << shift[l]) * freq[i];
				t[2 * i] = d == 0 ? 1.0f : (float)cos(th);
				t[2 * i + 1] = d == 0 ? 0.0f : (float)sin(th);
			}
}

/* (c, s) *= (c2, s2): the rotation by the sum of both angles */
__device__ __forceinline__ void rot_mul(float &c, float &s, float2 r)
{
	float cn = fmaf(c, r.x, -__fmul_rn(s, r.y));
	float sn = fmaf(s, r.x, __fmul_rn(c, r.y));
	c = cn;
	s = sn;
}

/* One block per token; thread k handles rotation pair k % half of head k / half. */
__global__ void rope_kernel(float *qkv, int ld, const int32_t *pos, int n_heads, int head_dim,
			    int rope_dim, const float2 *table, float mscale, bool neox)
{
	int t = blockIdx.x;
	int p = pos[t];
	int half = rope_dim / 2;
	const float2 *t0 = table + (int64_t)(p & (GPU_ROPE_ROWS0 - 1)) * half;
	const float2 *t1 = table + (int64_t)(GPU_ROPE_ROWS0 + ((p >> 11) & (GPU_ROPE_ROWS1 - 1))) * half;
	const float2 *t2 =
	    table + (int64_t)(GPU_ROPE_ROWS0 + GPU_ROPE_ROWS1 + ((p >> 21) & (GPU_ROPE_ROWS2 - 1))) *
			half;
	float *row = qkv + (int64_t)t * ld;
	for (int k = threadIdx.x; k < n_heads * half; k += blockDim.x) {
		int h = k / half, i = k - h * half;
		float2 r0 = t0[i];
		float c = t2[i].x, s = t2[i].y;
		rot_mul(c, s, t1[i]);
		rot_mul(c, s, r0);
		c = __fmul_rn(c, mscale);
		s = __fmul_rn(s, mscale);
		float *hp = row + (int64_t)h * head_dim;
		int a = neox ? i : 2 * i;
		int b = neox ? i + half : 2 * i + 1;
		float x0 = hp[a], x1 = hp[b];
		/* explicit roundings: nvcc would contract these into FMAs (one rounding less),
		 * which the CPU backend's plain x0 * c - x1 * s does not do */
		hp[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
		hp[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
	}
}

cudaError_t gpu_rope(float *qkv, int ld, const int32_t *pos, int n_tok, int n_head, int n_head_kv,
		     int head_dim, int rope_dim, const float *table, float mscale, bool neox,
		     cudaStream_t stream)
{
	if (n_tok <= 0 || rope_dim < 2)
		return cudaSuccess;
	int work = (n_head + n_head_kv) * (rope_dim / 2);
	int threads = work >= 256 ? 256 : ((work + 31) / 32) * 32;
	rope_kernel<<<n_tok, threads, 0, stream>>>(qkv, ld, pos, n_head + n_head_kv, head_dim,
						   rope_dim, (const float2 *)table, mscale, neox);
	return cudaGetLastError();
}
