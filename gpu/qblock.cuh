/* qblock: eight elements at a time of a block-quantized row on the device (Q8_0, Q4_K,
 * Q6_K: gpu_ops.cuh's gpu_qmat, read by the GEMV, gpu/gemv.cu; those, Q5_0 and MXFP4 in
 * the experts of gpu/moe.cu; or BF16 rows, type 30, a part stored dequantized).
 *
 * qb_dec8(t, row, g, c, w): w[i] = element 32 g + 8 c + i of the row at `row` (type t),
 * i < 8, c < 4: group g is the row's g-th run of 32 elements (a Q8_0, Q5_0 or MXFP4 block,
 * an eighth of a K super-block). Each value is computed with the fp32 operations of
 * quant_dequant (ggml's dequantize_row_*, core/model/quant.c), in the same order, each
 * rounded on its own (__fmul_rn, __fsub_rn: no contraction into an FMA), as
 * gpu/dequant.cu's dq_elem: bitwise the CPU's value. t is warp-uniform (one type a row).
 *
 * Loads: the eight quant bytes a call decodes are one 8-byte load where they are 8-byte
 * aligned (Q4_K: 144-byte blocks, rows 16-byte aligned), else two or three aligned 4-byte
 * loads shifted into place (qb_ld8: Q8_0's 34-byte and Q6_K's 210-byte blocks are only
 * 2-byte aligned, Q5_0's 22-byte ones likewise, MXFP4's 17-byte ones not at all); scales
 * stay byte loads (one or two a call), Q5_0's high bits two 2-byte loads. BF16 rows: one
 * 16-byte load. */
#ifndef BG_GPU_QBLOCK_CUH
#define BG_GPU_QBLOCK_CUH

#include "gpu/gpu_common.cuh"

#define QB_BF16 30 /* gpu_qmat's type of BF16 rows */

__device__ __forceinline__ float qb_h(const uint8_t *p)
{
	return __half2float(*(const __half *)p); /* blocks start at even offsets */
}

/* The 8 bytes at p (any alignment) as two little-endian words: the aligned words that cover
 * them (the third only when p is not 4-byte aligned, so nothing past the last of them is
 * read), shifted. */
__device__ __forceinline__ uint2 qb_ld8(const uint8_t *p)
{
	const uintptr_t a = (uintptr_t)p;
	const uint32_t *w = (const uint32_t *)(a & ~(uintptr_t)3);
	const int s = 8 * (int)(a & 3);
	const uint32_t w0 = w[0], w1 = w[1], w2 = s ? w[2] : 0u;
	const uint64_t lo = (uint64_t)w0 | (uint64_t)w1 << 32,
		       hi = (uint64_t)w1 | (uint64_t)w2 << 32;
	return make_uint2((uint32_t)(lo >> s), (uint32_t)(hi >> s));
}

__device__ __forceinline__ int qb_byte(uint2 v, int i) /* i < 8, unrolled: constant */
{
	return (int)(((i < 4 ? v.x : v.y) >> (8 * (i & 3))) & 0xFF);
}

__device__ __forceinline__ void qb_dec8_q8_0(const uint8_t *row, int g, int c, float *w)
{
	const uint8_t *b = row + (int64_t)g * 34;
	const float d = qb_h(b);
	const uint2 v = qb_ld8(b + 2 + 8 * c);
#pragma unroll
	for (int i = 0; i < 8; i++)
		w[i] = __fmul_rn((float)(int8_t)qb_byte(v, i), d);
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
	const uint2 v = *(const uint2 *)(b + 16 + 32 * (j >> 1) + 8 * c); /* 8-byte aligned */
	const int sh = 4 * (j & 1);
#pragma unroll
	for (int i = 0; i < 8; i++)
		w[i] = __fsub_rn(__fmul_rn(d1, (float)((qb_byte(v, i) >> sh) & 0xF)), m1);
}

/* Q6_K (210 bytes: ql[128], qh[64], scales[16] int8, d): group j = 4 h + u of 8: low
 * nibbles from ql[64 h + 32 (u % 2) ...] (high nibbles for u >= 2), two high bits from
 * qh[32 h ...] at bit 2 u, a scale every 16 elements */
__device__ __forceinline__ void qb_dec8_q6_k(const uint8_t *row, int g, int c, float *w)
{
	const uint8_t *b = row + (int64_t)(g >> 3) * 210;
	const int j = g & 7, h = j >> 2, u = j & 3;
	const float ds = __fmul_rn(qb_h(b + 208), (float)(int8_t)b[192 + 2 * j + (c >> 1)]);
	const uint2 vl = qb_ld8(b + 64 * h + 32 * (u & 1) + 8 * c),
		    vh = qb_ld8(b + 128 + 32 * h + 8 * c);
	const int sl = 4 * (u >> 1), shh = 2 * u;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int q = ((qb_byte(vl, i) >> sl) & 0xF) | ((qb_byte(vh, i) >> shh) & 3) << 4;
		w[i] = __fmul_rn(ds, (float)(q - 32));
	}
}

/* MXFP4's doubled e2m1 values (quant_mxfp4_values), as code */
__device__ __forceinline__ int qb_mxfp4_value(int q)
{
	const int m = q & 7, v = m < 4 ? m : m == 4 ? 4 : m == 5 ? 6 : m == 6 ? 8 : 12;
	return q & 8 ? -v : v;
}

/* MXFP4's scale: the e8m0 exponent halved, 2^(e - 128) (quant_e8m0_half; subnormal for
 * e < 2) */
__device__ __forceinline__ float qb_e8m0_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* MXFP4 (17 bytes: e, qs[16]): element i < 16 the low nibble of qs[i], 16 + i its high */
__device__ __forceinline__ void qb_dec8_mxfp4(const uint8_t *row, int g, int c, float *w)
{
	const uint8_t *b = row + (int64_t)g * 17;
	const float d = qb_e8m0_half(b[0]);
	const uint2 v = qb_ld8(b + 1 + 8 * (c & 1));
	const int sh = 4 * (c >> 1);
#pragma unroll
	for (int i = 0; i < 8; i++)
		w[i] = __fmul_rn((float)qb_mxfp4_value((qb_byte(v, i) >> sh) & 0xF), d);
}

/* The GEMV's types (gpu_qtype_resident, and BF16 rows) */
__device__ __forceinline__ void qb_dec8(int t, const uint8_t *row, int g, int c, float *w)
{
	if (t ==
	    QB_BF16) /* BF16 rows (16-byte aligned: parts start 256-aligned, rows 64 n bytes) */
		vec_f32<__nv_bfloat16>(*(const uint4 *)(row + (int64_t)g * 64 + 16 * c), w);
	else if (t == 8)
		qb_dec8_q8_0(row, g, c, w);
	else if (t == 12)
		qb_dec8_q4_k(row, g, c, w);
	else
		qb_dec8_q6_k(row, g, c, w);
}

/* Q5_0 (22 bytes: d, qh[4], qs[16]): element i < 16 the low nibble of qs[i], 16 + i its
 * high one, each with bit i or 16 + i of qh as its fifth bit, minus 16 */
__device__ __forceinline__ void qb_dec8_q5_0(const uint8_t *row, int g, int c, float *w)
{
	const uint8_t *b = row + (int64_t)g * 22;
	const float d = qb_h(b);
	const uint32_t qh = (uint32_t) * (const uint16_t *)(b + 2) |
			    (uint32_t) * (const uint16_t *)(b + 4) << 16; /* 2-byte aligned */
	const uint2 v = qb_ld8(b + 6 + 8 * (c & 1));
	const int sh = 4 * (c >> 1);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int q = ((qb_byte(v, i) >> sh) & 0xF) | (int)((qh >> (8 * c + i)) & 1) << 4;
		w[i] = __fmul_rn((float)(q - 16), d);
	}
}

/* The experts' types (gpu_moe_qtype_ok): the GEMV's, Q5_0 and MXFP4 */
__device__ __forceinline__ void qb_dec8_x(int t, const uint8_t *row, int g, int c, float *w)
{
	if (t == 39)
		qb_dec8_mxfp4(row, g, c, w);
	else if (t == 6)
		qb_dec8_q5_0(row, g, c, w);
	else
		qb_dec8(t, row, g, c, w);
}

#endif
