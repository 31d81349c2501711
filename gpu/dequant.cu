/* dequant: llama.cpp's block-quantized weights (model/quant.h: Q4_0 ... IQ4_XS, MXFP4, the
 * lattice i-quants) to the device storage type, on the device.
 *
 * One thread per element: it reads its block's scales and its own bits and computes the
 * element with the fp32 operations of quant_dequant (ggml's dequantize_row_*), in the
 * same order, each rounded on its own (__fmul_rn / __fsub_rn / __fadd_rn: nvcc would
 * otherwise contract a * b - c into one FMA): the value is bitwise the CPU's, then
 * rounded once to dt as gpu_convert_weights rounds. tests/gpu_test_dequant.cu checks it
 * bit for bit against quant_dequant (under the emulator in make test).
 */
#include "gpu/gpu_ops.cuh"
#include "gpu/qblock.cuh" /* MXFP4's values and scale */

#include "model/quant_grids.h"

/* IQ4_NL's and IQ4_XS's levels (quant_iq4_values), as code: no __constant__ table */
__device__ __forceinline__ int dq_iq4_value(int q)
{
	switch (q & 15) {
	case 0: return -127;
	case 1: return -104;
	case 2: return -83;
	case 3: return -65;
	case 4: return -49;
	case 5: return -35;
	case 6: return -22;
	case 7: return -10;
	case 8: return 1;
	case 9: return 13;
	case 10: return 25;
	case 11: return 38;
	case 12: return 53;
	case 13: return 69;
	case 14: return 89;
	default: return 113;
	}
}

/* The i-quants' lattice points, 16-bit codes of level indices (model/quant_grids.h) */
__device__ const uint16_t dq_iq2xxs_codes[256] = QUANT_IQ2XXS_CODES;
__device__ const uint16_t dq_iq2xs_codes[512] = QUANT_IQ2XS_CODES;
__device__ const uint16_t dq_iq2s_codes[1024] = QUANT_IQ2S_CODES;
__device__ const uint16_t dq_iq3xxs_codes[256] = QUANT_IQ3XXS_CODES;
__device__ const uint16_t dq_iq3s_codes[512] = QUANT_IQ3S_CODES;
__device__ const uint16_t dq_iq1s_codes[2048] = QUANT_IQ1S_CODES;

/* byte j of an IQ2 point: levels 8, 25, 43 */
__device__ __forceinline__ int dq_iq2_level(uint16_t code, int j)
{
	const int k = (code >> (2 * j)) & 3;
	return k == 0 ? 8 : k == 1 ? 25 : 43;
}

/* byte j of an IQ3_XXS point: levels 4, 12, ..., 52, 62 */
__device__ __forceinline__ int dq_iq3xxs_level(uint16_t code, int j)
{
	const int k = (code >> (3 * j)) & 7;
	return k == 7 ? 62 : 4 + 8 * k;
}

/* whether element j of a group of 8 is negated: bit j of the 7 sign bits, bit 7 their
 * parity (ggml's ksigns_iq2xs) */
__device__ __forceinline__ bool dq_iq_neg7(uint32_t s7, int j)
{
	s7 &= 127;
	return j < 7 ? (s7 >> j) & 1 : __popc(s7) & 1;
}

__device__ __forceinline__ float dq_h16(uint16_t u)
{
	return __half2float(__ushort_as_half(u));
}

__device__ __forceinline__ int dq_u16(const uint8_t *p)
{
	return p[0] | p[1] << 8;
}

__device__ __forceinline__ float dq_h(const uint8_t *p)
{
	return __half2float(*(const __half *)p);
}

__device__ __forceinline__ uint32_t dq_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q4_K's and Q5_K's 6-bit scale and min of group j (quant_scale_min_k4) */
__device__ __forceinline__ void dq_scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
	}
}

/* Q3_K's 6-bit scale of group g, still biased by 32 (quant.c's q3_k_scales, one entry) */
__device__ __forceinline__ int dq_q3_scale(const uint8_t *s, int g)
{
	int lo = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
	int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
	return lo | hi << 4;
}

/* element e of the block at b (type t, gguf_dtype ids) */
__device__ float dq_elem(int t, const uint8_t *b, int e)
{
	switch (t) {
	case 2: { /* Q4_0: d, qs[16] */
		int q = e < 16 ? b[2 + e] & 0xF : b[2 + e - 16] >> 4;
		return __fmul_rn((float)(q - 8), dq_h(b));
	}
	case 3: { /* Q4_1: d, m, qs[16] */
		int q = e < 16 ? b[4 + e] & 0xF : b[4 + e - 16] >> 4;
		return __fadd_rn(__fmul_rn((float)q, dq_h(b)), dq_h(b + 2));
	}
	case 6:	  /* Q5_0: d, qh[4], qs[16] */
	case 7: { /* Q5_1: d, m, qh[4], qs[16] */
		const int o = t == 7 ? 2 : 0;
		uint32_t qh = dq_u32(b + 2 + o);
		const uint8_t *qs = b + 6 + o;
		int j = e % 16;
		int xh = e < 16 ? ((qh >> j) << 4) & 0x10 : (qh >> (j + 12)) & 0x10;
		int q = (e < 16 ? qs[j] & 0xF : qs[j] >> 4) | xh;
		if (t == 6)
			return __fmul_rn((float)(q - 16), dq_h(b));
		return __fadd_rn(__fmul_rn((float)q, dq_h(b)), dq_h(b + 2));
	}
	case 8: /* Q8_0: d, qs[32] */ return __fmul_rn((float)(int8_t)b[2 + e], dq_h(b));
	case 39: { /* MXFP4: e (e8m0), qs[16] (gpt-oss's experts) */
		int q = e < 16 ? b[1 + e] & 0xF : b[1 + e - 16] >> 4;
		return __fmul_rn((float)qb_mxfp4_value(q), qb_e8m0_half(b[0]));
	}
	case 20: { /* IQ4_NL: d, qs[16] */
		int q = e < 16 ? b[2 + e] & 0xF : b[2 + e - 16] >> 4;
		return __fmul_rn(dq_h(b), (float)dq_iq4_value(q));
	}
	case 10: { /* Q2_K: scales[16], qs[64], d, dmin */
		int h = e / 128, j = e / 32 % 4, sl = e % 32, sc = b[e / 16];
		float dl = __fmul_rn(dq_h(b + 80), (float)(sc & 0xF));
		float ml = __fmul_rn(dq_h(b + 82), (float)(sc >> 4));
		int q = (b[16 + 32 * h + sl] >> (2 * j)) & 3;
		return __fsub_rn(__fmul_rn(dl, (float)q), ml);
	}
	case 11: { /* Q3_K: hmask[32], qs[64], scales[12], d */
		int h = e / 128, j = e / 32 % 4, sl = e % 32;
		float dl = __fmul_rn(dq_h(b + 108), (float)(dq_q3_scale(b + 96, e / 16) - 32));
		int lo = (b[32 + 32 * h + sl] >> (2 * j)) & 3;
		int hi = b[sl] & (1 << (4 * h + j));
		return __fmul_rn(dl, (float)(lo - (hi ? 0 : 4)));
	}
	case 12:   /* Q4_K: d, dmin, scales[12], qs[128] */
	case 13: { /* Q5_K: d, dmin, scales[12], qh[32], qs[128] */
		const bool five = t == 13;
		const uint8_t *qs = b + (five ? 48 : 16);
		int j = e / 64, s = e / 32 % 2, l = e % 32, sc, m;
		dq_scale_min_k4(2 * j + s, b + 4, &sc, &m);
		float d1 = __fmul_rn(dq_h(b), (float)sc), m1 = __fmul_rn(dq_h(b + 2), (float)m);
		int q = (qs[32 * j + l] >> (4 * s)) & 0xF;
		if (five && ((b[16 + l] >> (2 * j + s)) & 1))
			q += 16;
		return __fsub_rn(__fmul_rn(d1, (float)q), m1);
	}
	case 14: { /* Q6_K: ql[128], qh[64], scales[16] (int8), d */
		int h = e / 128, u = e / 32 % 4, l = e % 32;
		int lo = (b[64 * h + 32 * (u % 2) + l] >> (4 * (u / 2))) & 0xF;
		int hi = (b[128 + 32 * h + l] >> (2 * u)) & 3;
		float ds = __fmul_rn(dq_h(b + 208), (float)(int8_t)b[192 + e / 16]);
		return __fmul_rn(ds, (float)((lo | hi << 4) - 32));
	}
	case 16: { /* IQ2_XXS: d, qs[32] (u16): a group's 4 index bytes, then sign bits + scale */
		const int ib = e / 32, l = e % 32 / 8, j = e % 8;
		const uint32_t a0 = dq_u32(b + 2 + 8 * ib), a1 = dq_u32(b + 6 + 8 * ib);
		float db = __fmul_rn(__fmul_rn(dq_h(b), __fadd_rn(0.5f, (float)(a1 >> 28))), 0.25f);
		int v = dq_iq2_level(dq_iq2xxs_codes[(a0 >> (8 * l)) & 255], j);
		return __fmul_rn(__fmul_rn(db, (float)v), dq_iq_neg7(a1 >> (7 * l), j) ? -1.f : 1.f);
	}
	case 17:   /* IQ2_XS: d, qs[32] (u16: 9-bit index, 7 sign bits), scales[8] */
	case 22: { /* IQ2_S: d, qs[32] indices, signs[32], qh[8] (2 high index bits), scales[8] */
		const int ib = e / 32, l = e % 32 / 8, j = e % 8;
		const int sc = (b[(t == 17 ? 66 : 74) + ib] >> (4 * (l / 2))) & 0xf;
		float db = __fmul_rn(__fmul_rn(dq_h(b), __fadd_rn(0.5f, (float)sc)), 0.25f);
		int v;
		bool neg;
		if (t == 17) {
			const int q = dq_u16(b + 2 + 2 * (4 * ib + l));
			v = dq_iq2_level(dq_iq2xs_codes[q & 511], j);
			neg = dq_iq_neg7((uint32_t)q >> 9, j);
		} else {
			const int idx = b[2 + 4 * ib + l] | ((b[66 + ib] << (8 - 2 * l)) & 0x300);
			v = dq_iq2_level(dq_iq2s_codes[idx], j);
			neg = (b[34 + 4 * ib + l] >> j) & 1;
		}
		return __fmul_rn(__fmul_rn(db, (float)v), neg ? -1.f : 1.f);
	}
	case 18: { /* IQ3_XXS: d, qs[64] indices, then a u32 a group: sign bits + scale */
		const int ib = e / 32, l = e % 32 / 8, j = e % 8;
		const uint32_t a = dq_u32(b + 66 + 4 * ib);
		float db = __fmul_rn(__fmul_rn(dq_h(b), __fadd_rn(0.5f, (float)(a >> 28))), 0.5f);
		int v = dq_iq3xxs_level(dq_iq3xxs_codes[b[2 + 8 * ib + 2 * l + j / 4]], j % 4);
		return __fmul_rn(__fmul_rn(db, (float)v), dq_iq_neg7(a >> (7 * l), j) ? -1.f : 1.f);
	}
	case 21: { /* IQ3_S: d, qs[64], qh[8] (9th index bits), signs[32], scales[4] */
		const int ib = e / 32, l = e % 32 / 8, j = e % 8;
		const int s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0xf;
		float db = __fmul_rn(dq_h(b), (float)(1 + 2 * s));
		const int qh = b[66 + ib];
		const int idx = j < 4 ? b[2 + 8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256)
				      : b[2 + 8 * ib + 2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
		int v = 2 * ((dq_iq3s_codes[idx] >> (3 * (j % 4))) & 7) + 1;
		return __fmul_rn(__fmul_rn(db, (float)v), (b[74 + 4 * ib + l] >> j) & 1 ? -1.f : 1.f);
	}
	case 19: { /* IQ1_S: d, qs[32], qh[8] (u16: 4 x 3 high index bits, scale, shift sign) */
		const int ib = e / 32, l = e % 32 / 8, j = e % 8;
		const int qh = dq_u16(b + 34 + 2 * ib);
		float dl = __fmul_rn(dq_h(b), (float)(2 * ((qh >> 12) & 7) + 1));
		const float delta = qh & 0x8000 ? -0.125f : 0.125f;
		const int idx = b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
		int v = (int)((dq_iq1s_codes[idx] >> (2 * j)) & 3) - 1;
		return __fmul_rn(dl, __fadd_rn((float)v, delta));
	}
	case 29: { /* IQ1_M: qs[32], qh[16] (3 index bits + shift sign a point), scales[8] (4
		    * u16: 3-bit scales, the fp16 scale in their top nibbles) */
		const int ib = e / 32, l = e % 32 / 8, j = e % 8;
		const uint16_t dh = (uint16_t)((dq_u16(b + 48) >> 12) | ((dq_u16(b + 50) >> 8) & 0x00f0) |
					       ((dq_u16(b + 52) >> 4) & 0x0f00) | (dq_u16(b + 54) & 0xf000));
		const int s = (dq_u16(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
		float dl = __fmul_rn(dq_h16(dh), (float)(2 * s + 1));
		const int h = b[32 + 2 * ib + l / 2] >> (4 * (l % 2));
		const int idx = b[4 * ib + l] | ((h & 7) << 8);
		int v = (int)((dq_iq1s_codes[idx] >> (2 * j)) & 3) - 1;
		return __fmul_rn(dl, __fadd_rn((float)v, h & 8 ? -0.125f : 0.125f));
	}
	case 23: { /* IQ4_XS: d, scales_h, scales_l[4], qs[128] */
		int ib = e / 32, j = e % 32;
		int sh = b[2] | b[3] << 8;
		int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4);
		float dl = __fmul_rn(dq_h(b), (float)(ls - 32));
		int q = j < 16 ? b[8 + 16 * ib + j] & 0xF : b[8 + 16 * ib + j - 16] >> 4;
		return __fmul_rn(dl, (float)dq_iq4_value(q));
	}
	}
	return 0.0f;
}

template <typename T>
__global__ void dequant_kernel(const uint8_t *src, int t, int be, int bb, uint64_t n, T *dst)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		dst[i] = st_t<T>(dq_elem(t, src + (i / be) * bb, (int)(i % be)));
}

bool gpu_dequant_supported(int src_type)
{
	switch (src_type) {
	case 2:
	case 3:
	case 6:
	case 7:
	case 8:
	case 10:
	case 11:
	case 12:
	case 13:
	case 14:
	case 20:
	case 23:
	case 39:
	case 16:
	case 17:
	case 18:
	case 19:
	case 21:
	case 22:
	case 29: return true;
	}
	return false;
}

static bool dq_geometry(int src_type, int *be, int *bb);

cudaError_t gpu_dequant_weights(const void *src, int src_type, uint64_t n, void *dst,
				enum gpu_dtype dt, cudaStream_t stream)
{
	int be, bb;
	if (!dq_geometry(src_type, &be, &bb))
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	if (n % be)
		return cudaErrorInvalidValue;
	unsigned blocks = gpu_grid_blocks(n);
	GPU_DISPATCH_DTYPE(dt, T,
			   dequant_kernel<T><<<blocks, 256, 0, stream>>>(
			       (const uint8_t *)src, src_type, be, bb, n, (T *)dst));
	return cudaGetLastError();
}

/* The elements (*be) and bytes (*bb) of a block of src_type; false when unsupported. */
static bool dq_geometry(int src_type, int *be, int *bb)
{
	*be = *bb = 0;
	if (!gpu_dequant_supported(src_type))
		return false;
	const bool k = (src_type >= 10 && src_type <= 19) || (src_type >= 21 && src_type <= 23) ||
		       src_type == 29;
	*be = k ? 256 : 32;
	switch (src_type) {
	case 2: *bb = 18; break;
	case 3: *bb = 20; break;
	case 6: *bb = 22; break;
	case 7: *bb = 24; break;
	case 8: *bb = 34; break;
	case 10: *bb = 84; break;
	case 11: *bb = 110; break;
	case 12: *bb = 144; break;
	case 13: *bb = 176; break;
	case 14: *bb = 210; break;
	case 20: *bb = 18; break;
	case 23: *bb = 136; break;
	case 39: *bb = 17; break;
	case 16: *bb = 66; break;
	case 17: *bb = 74; break;
	case 18: *bb = 98; break;
	case 19: *bb = 50; break;
	case 21: *bb = 110; break;
	case 22: *bb = 82; break;
	case 29: *bb = 56; break;
	}
	return true;
}

/* one block a token, as embed.cu's embed_kernel; the row's elements one a thread */
__global__ void embed_blocks_kernel(const uint8_t *embd, int t, int be, int bb,
				    const int32_t *tokens, const struct sampler_result *drawn,
				    int n_vocab, int n_embd, float *x)
{
	const int tk = blockIdx.x;
	int32_t id = tokens[tk];
	if (id < 0) { /* drawn[-1 - id]; a drawn id outside the vocabulary feeds token 0 */
		id = drawn[-1 - id].token;
		if (id < 0 || id >= n_vocab)
			id = 0;
	}
	const uint8_t *row = embd + (int64_t)id * (n_embd / be) * bb;
	float *o = x + (int64_t)tk * n_embd;
	for (int i = threadIdx.x; i < n_embd; i += blockDim.x)
		o[i] = dq_elem(t, row + (i / be) * bb, i % be);
}

cudaError_t gpu_embed_blocks(const void *embd, int src_type, const int32_t *tokens,
			     const struct sampler_result *drawn, int n_tok, int n_vocab,
			     int n_embd, float *x, cudaStream_t stream)
{
	int be, bb;
	if (!dq_geometry(src_type, &be, &bb) || n_embd % be != 0)
		return cudaErrorInvalidValue;
	if (n_tok <= 0)
		return cudaSuccess;
	embed_blocks_kernel<<<n_tok, 256, 0, stream>>>((const uint8_t *)embd, src_type, be, bb,
						       tokens, drawn, n_vocab, n_embd, x);
	return cudaGetLastError();
}
