/* rope.cuh: the rotation of one RoPE pair, shared by rope.cu's kernel and qkv_post.cu's, so
 * that both compute it bitwise alike (rope.cu says how the digit tables compose the angle:
 * no trigonometry on the device, bitwise the CPU backend's cos/sin for positions < 2048). */
#ifndef BG_GPU_ROPE_CUH
#define BG_GPU_ROPE_CUH

#include "gpu/gpu_ops.cuh"

/* (c, s) *= (c2, s2): the rotation by the sum of both angles */
__device__ __forceinline__ void rot_mul(float &c, float &s, float2 r)
{
	float cn = fmaf(c, r.x, -__fmul_rn(s, r.y));
	float sn = fmaf(s, r.x, __fmul_rn(c, r.y));
	c = cn;
	s = sn;
}

/* The rotation of pair i (< half = rope_dim / 2) at position p >= 0, times mscale, into
 * *c, *s: the digit rows of table (gpu_rope_table_fill's for this half) composed. */
__device__ __forceinline__ void rope_cos_sin(const float2 *table, int p, int half, int i,
					     float mscale, float *cp, float *sp)
{
	const float2 *t0 = table + (int64_t)(p & (GPU_ROPE_ROWS0 - 1)) * half;
	const float2 *t1 =
	    table + (int64_t)(GPU_ROPE_ROWS0 + ((p >> 11) & (GPU_ROPE_ROWS1 - 1))) * half;
	const float2 *t2 =
	    table +
	    (int64_t)(GPU_ROPE_ROWS0 + GPU_ROPE_ROWS1 + ((p >> 21) & (GPU_ROPE_ROWS2 - 1))) * half;
	float2 r0 = t0[i];
	float c = t2[i].x, s = t2[i].y;
	rot_mul(c, s, t1[i]);
	rot_mul(c, s, r0);
	*cp = __fmul_rn(c, mscale);
	*sp = __fmul_rn(s, mscale);
}

/* (x0, x1) rotated by (c, s) into *y0, *y1 (they may alias x0's and x1's storage: read
 * first). Explicit roundings: nvcc would contract these into FMAs (one rounding less),
 * which the CPU backend's plain x0 * c - x1 * s does not do. */
__device__ __forceinline__ void rope_apply(float x0, float x1, float c, float s, float *y0,
					   float *y1)
{
	*y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
	*y1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

/* Pair i (< half = rope_dim / 2) of the head at x ([head_dim] fp32), at position p >= 0:
 * *ia, *ib get the pair's dimensions ((2i, 2i + 1), or (i, i + half) for NeoX), *y0, *y1
 * their rotated values (x is only read); table: gpu_rope_table_fill's for this half. */
__device__ __forceinline__ void rope_rotation(const float *x, const float2 *table, int p, int half,
					      int i, float mscale, bool neox, int *ia, int *ib,
					      float *y0, float *y1)
{
	float c, s;
	rope_cos_sin(table, p, half, i, mscale, &c, &s);
	const int a = neox ? i : 2 * i;
	const int b = neox ? i + half : 2 * i + 1;
	rope_apply(x[a], x[b], c, s, y0, y1);
	*ia = a;
	*ib = b;
}

/* mistral3's attention temperature of position p (gpu_qkv_post_args' temp_*, temp_scale
 * != 0): (float)(log(floor(((float)p + temp_offset) / temp_floor) + 1) * temp_scale + 1)
 * with the log, product and sum in double, each rounded once as the CPU backend's
 * arch_attn_temp computes it (no contraction into an FMA) */
__device__ __forceinline__ float qp_attn_temp(const struct gpu_qkv_post_args &a, int p)
{
	const float fl = floorf(((float)p + a.temp_offset) / (float)a.temp_floor);
	return (float)__dadd_rn(__dmul_rn(log((double)fl + 1.0), (double)a.temp_scale), 1.0);
}

#endif
