/* qblock: eight elements at a time of a resident block-quantized row (Q8_0, Q4_K, Q6_K;
 * gpu_ops.cuh's gpu_qmat; or a BF16 part of one, type 30), for the GEMV that reads blocks
 * (gpu/gemv.cu).
 *
 * qb_dec8(t, row, g, c, w): w[i] = element 32 g + 8 c + i of the row at `row` (type t),
 * i < 8, c < 4: group g is the row's g-th run of 32 elements (a Q8_0 block, an eighth of a
 * K super-block). Each value is computed with the fp32 operations of quant_dequant (ggml's
 * dequantize_row_*, core/model/quant.c), in the same order, each rounded on its own
 * (__fmul_rn, __fsub_rn: no contraction into an FMA), as gpu/dequant.cu's dq_elem: bitwise
 * the CPU's value. Byte loads: Q8_0's 34-byte and Q6_K's 210-byte blocks are only 2-byte
 * aligned. t is warp-uniform in the GEMV (one type a row). */
#ifndef BG_GPU_QBLOCK_CUH
#define BG_GPU_QBLOCK_CUH

#include "gpu/gpu_common.cuh"

__device__ __forceinline__ float qb_h(const uint8_t *p)
{
	return __half2float(*(const __half *)p); /* blocks start at even offsets */
}

__device__ __forceinline__ void qb_dec8_q8_0(const uint8_t *row, int g, int c, float *w)
{
	const uint8_t *b = row + (int64_t)g * 34;
	const float d = qb_h(b);
#pragma unroll
	for (int i = 0; i < 8; i++)
		w[i] = __fmul_rn((float)(int8_t)b[2 + 8 * c + i], d);
}

/* Q4_K (144 bytes: d, dmin, scales[12], qs[128]): group j of 8 has scale and min j
 * (quant_scale_min_k4), its nibbles in qs[32 (j / 2) ...], low nibbles for even j */
__device__ __forceinline__ void qb_dec8_q4_k(const uint8_t *row, int g, int c, float *w)
{
	const uint8_t *b = row + (int64_t)(g >> 3) * 144;
	const int j = g & 7;
	const uint8_t *s = b + 4;
	int sc, m;
	if (j < 4) {
		sc = s[j] & 63;
		m = s[j + 4] & 63;
	} else {
		sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
		m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
	const float d1 = __fmul_rn(qb_h(b), (float)sc), m1 = __fmul_rn(qb_h(b + 2), (float)m);
	const uint8_t *q = b + 16 + 32 * (j >> 1) + 8 * c;
	const int sh = 4 * (j & 1);
#pragma unroll
	for (int i = 0; i < 8; i++)
		w[i] = __fsub_rn(__fmul_rn(d1, (float)((q[i] >> sh) & 0xF)), m1);
}

/* Q6_K (210 bytes: ql[128], qh[64], scales[16] int8, d): group j = 4 h + u of 8: low
 * nibbles from ql[64 h + 32 (u % 2) ...] (high nibbles for u >= 2), two high bits from
 * qh[32 h ...] at bit 2 u, a scale every 16 elements */
__device__ __forceinline__ void qb_dec8_q6_k(const uint8_t *row, int g, int c, float *w)
{
	const uint8_t *b = row + (int64_t)(g >> 3) * 210;
	const int j = g & 7, h = j >> 2, u = j & 3;
	const float ds = __fmul_rn(qb_h(b + 208), (float)(int8_t)b[192 + 2 * j + (c >> 1)]);
	const uint8_t *ql = b + 64 * h + 32 * (u & 1) + 8 * c, *qh = b + 128 + 32 * h + 8 * c;
	const int sl = 4 * (u >> 1), shh = 2 * u;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int q = ((ql[i] >> sl) & 0xF) | ((qh[i] >> shh) & 3) << 4;
		w[i] = __fmul_rn(ds, (float)(q - 32));
	}
}

__device__ __forceinline__ void qb_dec8(int t, const uint8_t *row, int g, int c, float *w)
{
	if (t == 30) /* BF16 rows (16-byte aligned: parts start 256-aligned, rows 64 n bytes) */
		vec_f32<__nv_bfloat16>(*(const uint4 *)(row + (int64_t)g * 64 + 16 * c), w);
	else if (t == 8)
		qb_dec8_q8_0(row, g, c, w);
	else if (t == 12)
		qb_dec8_q4_k(row, g, c, w);
	else
		qb_dec8_q6_k(row, g, c, w);
}

#endif
