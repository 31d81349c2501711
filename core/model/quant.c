/* quant: see quant.h. Each dequantizer is ggml's reference one (ggml-quants.c), written
 * with the same operand types and order so the results are the same bits. */
#include "model/quant.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model/half.h"
#include "model/quant_grids.h"

static_assert(sizeof(struct quant_q4_0) == 18, "block_q4_0");
static_assert(sizeof(struct quant_q4_1) == 20, "block_q4_1");
static_assert(sizeof(struct quant_q5_0) == 22, "block_q5_0");
static_assert(sizeof(struct quant_q5_1) == 24, "block_q5_1");
static_assert(sizeof(struct quant_q8_0) == 34, "block_q8_0");
static_assert(sizeof(struct quant_q2_k) == 84, "block_q2_K");
static_assert(sizeof(struct quant_q3_k) == 110, "block_q3_K");
static_assert(sizeof(struct quant_q4_k) == 144, "block_q4_K");
static_assert(sizeof(struct quant_q5_k) == 176, "block_q5_K");
static_assert(sizeof(struct quant_q6_k) == 210, "block_q6_K");
static_assert(sizeof(struct quant_iq4_nl) == 18, "block_iq4_nl");
static_assert(sizeof(struct quant_iq4_xs) == 136, "block_iq4_xs");
static_assert(sizeof(struct quant_mxfp4) == 17, "block_mxfp4");
static_assert(sizeof(struct quant_iq2_xxs) == 66, "block_iq2_xxs");
static_assert(sizeof(struct quant_iq2_xs) == 74, "block_iq2_xs");
static_assert(sizeof(struct quant_iq2_s) == 82, "block_iq2_s");
static_assert(sizeof(struct quant_iq3_xxs) == 98, "block_iq3_xxs");
static_assert(sizeof(struct quant_iq3_s) == 110, "block_iq3_s");
static_assert(sizeof(struct quant_iq1_s) == 50, "block_iq1_s");
static_assert(sizeof(struct quant_iq1_m) == 56, "block_iq1_m");

const int8_t quant_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
				     1,	   13,	 25,  38,  53,	69,  89,  113};

const int8_t quant_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

bool quant_is_quantized(enum gguf_dtype t)
{
	return quant_block_elems(t) > 1;
}

int quant_block_elems(enum gguf_dtype t)
{
	switch (t) {
	case GGUF_DTYPE_F32:
	case GGUF_DTYPE_F16:
	case GGUF_DTYPE_BF16: return 1;
	case GGUF_DTYPE_Q4_0:
	case GGUF_DTYPE_Q4_1:
	case GGUF_DTYPE_Q5_0:
	case GGUF_DTYPE_Q5_1:
	case GGUF_DTYPE_Q8_0:
	case GGUF_DTYPE_IQ4_NL:
	case GGUF_DTYPE_MXFP4: return 32;
	case GGUF_DTYPE_Q2_K:
	case GGUF_DTYPE_Q3_K:
	case GGUF_DTYPE_Q4_K:
	case GGUF_DTYPE_Q5_K:
	case GGUF_DTYPE_Q6_K:
	case GGUF_DTYPE_IQ4_XS:
	case GGUF_DTYPE_IQ2_XXS:
	case GGUF_DTYPE_IQ2_XS:
	case GGUF_DTYPE_IQ2_S:
	case GGUF_DTYPE_IQ3_XXS:
	case GGUF_DTYPE_IQ3_S:
	case GGUF_DTYPE_IQ1_S:
	case GGUF_DTYPE_IQ1_M: return 256;
	}
	return 0;
}

size_t quant_block_bytes(enum gguf_dtype t)
{
	switch (t) {
	case GGUF_DTYPE_F32: return 4;
	case GGUF_DTYPE_F16:
	case GGUF_DTYPE_BF16: return 2;
	case GGUF_DTYPE_Q4_0: return sizeof(struct quant_q4_0);
	case GGUF_DTYPE_Q4_1: return sizeof(struct quant_q4_1);
	case GGUF_DTYPE_Q5_0: return sizeof(struct quant_q5_0);
	case GGUF_DTYPE_Q5_1: return sizeof(struct quant_q5_1);
	case GGUF_DTYPE_Q8_0: return sizeof(struct quant_q8_0);
	case GGUF_DTYPE_Q2_K: return sizeof(struct quant_q2_k);
	case GGUF_DTYPE_Q3_K: return sizeof(struct quant_q3_k);
	case GGUF_DTYPE_Q4_K: return sizeof(struct quant_q4_k);
	case GGUF_DTYPE_Q5_K: return sizeof(struct quant_q5_k);
	case GGUF_DTYPE_Q6_K: return sizeof(struct quant_q6_k);
	case GGUF_DTYPE_IQ4_NL: return sizeof(struct quant_iq4_nl);
	case GGUF_DTYPE_IQ4_XS: return sizeof(struct quant_iq4_xs);
	case GGUF_DTYPE_MXFP4: return sizeof(struct quant_mxfp4);
	case GGUF_DTYPE_IQ2_XXS: return sizeof(struct quant_iq2_xxs);
	case GGUF_DTYPE_IQ2_XS: return sizeof(struct quant_iq2_xs);
	case GGUF_DTYPE_IQ2_S: return sizeof(struct quant_iq2_s);
	case GGUF_DTYPE_IQ3_XXS: return sizeof(struct quant_iq3_xxs);
	case GGUF_DTYPE_IQ3_S: return sizeof(struct quant_iq3_s);
	case GGUF_DTYPE_IQ1_S: return sizeof(struct quant_iq1_s);
	case GGUF_DTYPE_IQ1_M: return sizeof(struct quant_iq1_m);
	}
	return 0;
}

static float h2f(uint16_t h)
{
	return half_f16_to_f32(h);
}

/* ---- blocks of 32 ---- */

static void dq_q4_0(const struct quant_q4_0 *b, float *y)
{
	const float d = h2f(b->d);
	for (int j = 0; j < 16; j++) {
		const int x0 = (b->qs[j] & 0x0F) - 8;
		const int x1 = (b->qs[j] >> 4) - 8;
		y[j] = x0 * d;
		y[j + 16] = x1 * d;
	}
}

static void dq_q4_1(const struct quant_q4_1 *b, float *y)
{
	const float d = h2f(b->d), m = h2f(b->m);
	for (int j = 0; j < 16; j++) {
		const int x0 = b->qs[j] & 0x0F;
		const int x1 = b->qs[j] >> 4;
		y[j] = x0 * d + m;
		y[j + 16] = x1 * d + m;
	}
}

static void dq_q5_0(const struct quant_q5_0 *b, float *y)
{
	const float d = h2f(b->d);
	uint32_t qh;
	memcpy(&qh, b->qh, sizeof qh);
	for (int j = 0; j < 16; j++) {
		const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
		const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
		const int32_t x0 = ((b->qs[j] & 0x0F) | xh_0) - 16;
		const int32_t x1 = ((b->qs[j] >> 4) | xh_1) - 16;
		y[j] = x0 * d;
		y[j + 16] = x1 * d;
	}
}

static void dq_q5_1(const struct quant_q5_1 *b, float *y)
{
	const float d = h2f(b->d), m = h2f(b->m);
	uint32_t qh;
	memcpy(&qh, b->qh, sizeof qh);
	for (int j = 0; j < 16; j++) {
		const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
		const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
		const int x0 = (b->qs[j] & 0x0F) | xh_0;
		const int x1 = (b->qs[j] >> 4) | xh_1;
		y[j] = x0 * d + m;
		y[j + 16] = x1 * d + m;
	}
}

static void dq_q8_0(const struct quant_q8_0 *b, float *y)
{
	const float d = h2f(b->d);
	for (int j = 0; j < 32; j++)
		y[j] = b->qs[j] * d;
}

/* ggml's dequantize_row_mxfp4: the doubled e2m1 integer times the halved scale */
static void dq_mxfp4(const struct quant_mxfp4 *b, float *y)
{
	const float d = quant_e8m0_half(b->e);
	for (int j = 0; j < 16; j++) {
		const int8_t x0 = quant_mxfp4_values[b->qs[j] & 0x0F];
		const int8_t x1 = quant_mxfp4_values[b->qs[j] >> 4];
		y[j] = x0 * d;
		y[j + 16] = x1 * d;
	}
}

static void dq_iq4_nl(const struct quant_iq4_nl *b, float *y)
{
	const float d = h2f(b->d);
	for (int j = 0; j < 16; j++) {
		y[j] = d * quant_iq4_values[b->qs[j] & 0xf];
		y[j + 16] = d * quant_iq4_values[b->qs[j] >> 4];
	}
}

/* ---- super-blocks of 256 ---- */

static void dq_q2_k(const struct quant_q2_k *b, float *y)
{
	const float d = h2f(b->d), min = h2f(b->dmin);
	const uint8_t *q = b->qs;
	int is = 0;
	for (int n = 0; n < 256; n += 128) {
		int shift = 0;
		for (int j = 0; j < 4; j++) {
			uint8_t sc = b->scales[is++];
			float dl = d * (sc & 0xF), ml = min * (sc >> 4);
			for (int l = 0; l < 16; l++)
				*y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
			sc = b->scales[is++];
			dl = d * (sc & 0xF), ml = min * (sc >> 4);
			for (int l = 0; l < 16; l++)
				*y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
			shift += 2;
		}
		q += 32;
	}
}

/* Q3_K's 16 6-bit scales, unpacked from 12 bytes, still biased by 32. */
static void q3_k_scales(const uint8_t packed[12], int8_t out[16])
{
	const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
	uint32_t aux[4];
	memcpy(aux, packed, 12);
	uint32_t tmp = aux[2];
	aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
	aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
	aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
	aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
	memcpy(out, aux, 16);
}

static void dq_q3_k(const struct quant_q3_k *b, float *y)
{
	const float d_all = h2f(b->d);
	const uint8_t *q = b->qs, *hm = b->hmask;
	int8_t scales[16];
	q3_k_scales(b->scales, scales);
	uint8_t m = 1;
	int is = 0;
	for (int n = 0; n < 256; n += 128) {
		int shift = 0;
		for (int j = 0; j < 4; j++) {
			float dl = d_all * (scales[is++] - 32);
			for (int l = 0; l < 16; l++)
				*y++ = dl * ((int8_t)((q[l + 0] >> shift) & 3) -
					     ((hm[l + 0] & m) ? 0 : 4));
			dl = d_all * (scales[is++] - 32);
			for (int l = 0; l < 16; l++)
				*y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3) -
					     ((hm[l + 16] & m) ? 0 : 4));
			shift += 2;
			m <<= 1;
		}
		q += 32;
	}
}

/* Q4_K and Q5_K: 8 groups of 32 with 6-bit scales and mins, x = d * sc * q - dmin * m;
 * Q5_K's fifth bit of element l of group pair j is bit 2j (low group) or 2j + 1 (high
 * group) of qh[l]; qh NULL: Q4_K. Adding 0 for Q4_K keeps its int operand, so the fp32
 * operations (and bits) are ggml's dequantize_row_q4_K's. */
static void dq_k_4_5(uint16_t dh, uint16_t dminh, const uint8_t scales[12], const uint8_t *ql,
		     const uint8_t *qh, float *y)
{
	const float d = h2f(dh), min = h2f(dminh);
	int is = 0;
	uint8_t sc, m, u1 = 1, u2 = 2;
	for (int j = 0; j < 256; j += 64) {
		quant_scale_min_k4(is + 0, scales, &sc, &m);
		const float d1 = d * sc, m1 = min * m;
		quant_scale_min_k4(is + 1, scales, &sc, &m);
		const float d2 = d * sc, m2 = min * m;
		for (int l = 0; l < 32; l++)
			*y++ = d1 * ((ql[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0)) - m1;
		for (int l = 0; l < 32; l++)
			*y++ = d2 * ((ql[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - m2;
		ql += 32;
		is += 2;
		u1 <<= 2;
		u2 <<= 2;
	}
}

static void dq_q6_k(const struct quant_q6_k *b, float *y)
{
	const float d = h2f(b->d);
	const uint8_t *ql = b->ql, *qh = b->qh;
	const int8_t *sc = b->scales;
	for (int n = 0; n < 256; n += 128) {
		for (int l = 0; l < 32; l++) {
			int is = l / 16;
			const int8_t q1 =
			    (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
			const int8_t q2 =
			    (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
			const int8_t q3 =
			    (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
			const int8_t q4 =
			    (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
			y[l + 0] = d * sc[is + 0] * q1;
			y[l + 32] = d * sc[is + 2] * q2;
			y[l + 64] = d * sc[is + 4] * q3;
			y[l + 96] = d * sc[is + 6] * q4;
		}
		y += 128;
		ql += 64;
		qh += 32;
		sc += 8;
	}
}

static void dq_iq4_xs(const struct quant_iq4_xs *b, float *y)
{
	const uint8_t *qs = b->qs;
	const float d = h2f(b->d);
	for (int ib = 0; ib < 8; ib++) {
		const int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
			       (((b->scales_h >> 2 * ib) & 3) << 4);
		const float dl = d * (ls - 32);
		for (int j = 0; j < 16; j++) {
			y[j + 0] = dl * quant_iq4_values[qs[j] & 0xf];
			y[j + 16] = dl * quant_iq4_values[qs[j] >> 4];
		}
		y += 32;
		qs += 16;
	}
}

/* ---- the lattice i-quants (ggml's dequantize_row_iq*: the same fp32 operations) ---- */

static const uint16_t iq2xxs_codes[256] = QUANT_IQ2XXS_CODES;
static const uint16_t iq2xs_codes[512] = QUANT_IQ2XS_CODES;
static const uint16_t iq2s_codes[1024] = QUANT_IQ2S_CODES;
static const uint16_t iq3xxs_codes[256] = QUANT_IQ3XXS_CODES;
static const uint16_t iq3s_codes[512] = QUANT_IQ3S_CODES;
static const uint16_t iq1s_codes[2048] = QUANT_IQ1S_CODES;

/* byte j of a point (quant_grids.h's encodings) */
static int iq2_level(uint16_t code, int j)
{
	static const uint8_t lv[4] = {8, 25, 43, 0};
	return lv[(code >> (2 * j)) & 3];
}
static int iq3xxs_level(uint16_t code, int j)
{
	static const uint8_t lv[8] = {4, 12, 20, 28, 36, 44, 52, 62};
	return lv[(code >> (3 * j)) & 7];
}
static int iq3s_level(uint16_t code, int j)
{
	return 2 * ((code >> (3 * j)) & 7) + 1;
}
static int iq1_level(uint16_t code, int j)
{
	return (int)((code >> (2 * j)) & 3) - 1;
}

/* 8 weights of an IQ2 point: db * level * (sign bit j ? -1 : 1) */
static void iq2_point(float db, uint16_t code, int signs, float *y)
{
	for (int j = 0; j < 8; j++)
		y[j] = db * iq2_level(code, j) * (signs & (1 << j) ? -1.f : 1.f);
}

static void dq_iq2_xxs(const struct quant_iq2_xxs *b, float *y)
{
	const float d = h2f(b->d);
	for (int ib = 0; ib < 8; ib++, y += 32) {
		uint32_t aux[2];
		memcpy(aux, b->qs + 4 * ib, sizeof aux);
		const float db = d * (0.5f + (aux[1] >> 28)) * 0.25f;
		for (int l = 0; l < 4; l++)
			iq2_point(db, iq2xxs_codes[(aux[0] >> (8 * l)) & 255],
				  quant_signs7(aux[1] >> (7 * l)), y + 8 * l);
	}
}

static void dq_iq2_xs(const struct quant_iq2_xs *b, float *y)
{
	const float d = h2f(b->d);
	for (int ib = 0; ib < 8; ib++, y += 32) {
		const float db[2] = {d * (0.5f + (b->scales[ib] & 0xf)) * 0.25f,
				     d * (0.5f + (b->scales[ib] >> 4)) * 0.25f};
		for (int l = 0; l < 4; l++) {
			const uint16_t q = b->qs[4 * ib + l];
			iq2_point(db[l / 2], iq2xs_codes[q & 511], quant_signs7(q >> 9), y + 8 * l);
		}
	}
}

static void dq_iq2_s(const struct quant_iq2_s *b, float *y)
{
	const float d = h2f(b->d);
	for (int ib = 0; ib < 8; ib++, y += 32) {
		const float db[2] = {d * (0.5f + (b->scales[ib] & 0xf)) * 0.25f,
				     d * (0.5f + (b->scales[ib] >> 4)) * 0.25f};
		for (int l = 0; l < 4; l++) {
			const int idx = b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
			iq2_point(db[l / 2], iq2s_codes[idx], b->qs[32 + 4 * ib + l], y + 8 * l);
		}
	}
}

static void dq_iq3_xxs(const struct quant_iq3_xxs *b, float *y)
{
	const float d = h2f(b->d);
	for (int ib = 0; ib < 8; ib++, y += 32) {
		uint32_t aux;
		memcpy(&aux, b->qs + 64 + 4 * ib, sizeof aux);
		const float db = d * (0.5f + (aux >> 28)) * 0.5f;
		for (int l = 0; l < 4; l++) {
			const int signs = quant_signs7(aux >> (7 * l));
			const uint16_t g1 = iq3xxs_codes[b->qs[8 * ib + 2 * l]];
			const uint16_t g2 = iq3xxs_codes[b->qs[8 * ib + 2 * l + 1]];
			for (int j = 0; j < 4; j++) {
				y[8 * l + j] =
				    db * iq3xxs_level(g1, j) * (signs & (1 << j) ? -1.f : 1.f);
				y[8 * l + j + 4] = db * iq3xxs_level(g2, j) *
						   (signs & (1 << (j + 4)) ? -1.f : 1.f);
			}
		}
	}
}

static void dq_iq3_s(const struct quant_iq3_s *b, float *y)
{
	const float d = h2f(b->d);
	for (int ib = 0; ib < 8; ib++, y += 32) {
		/* the scale: one nibble per two groups, db = d * (1 + 2 s) */
		const int s = (b->scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
		const float db = d * (1 + 2 * s);
		const uint8_t *qs = b->qs + 8 * ib, *signs = b->signs + 4 * ib;
		const int qh = b->qh[ib];
		for (int l = 0; l < 4; l++) {
			const uint16_t g1 = iq3s_codes[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
			const uint16_t g2 = iq3s_codes[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
			for (int j = 0; j < 4; j++) {
				y[8 * l + j] =
				    db * iq3s_level(g1, j) * (signs[l] & (1 << j) ? -1.f : 1.f);
				y[8 * l + j + 4] = db * iq3s_level(g2, j) *
						   (signs[l] & (1 << (j + 4)) ? -1.f : 1.f);
			}
		}
	}
}

#define IQ1_DELTA 0.125f /* ggml's IQ1S_DELTA (IQ1M_DELTA, the same) */

/* 8 weights of an IQ1 point: dl * (level + delta) */
static void iq1_point(float dl, uint16_t code, float delta, float *y)
{
	for (int j = 0; j < 8; j++)
		y[j] = dl * (iq1_level(code, j) + delta);
}

static void dq_iq1_s(const struct quant_iq1_s *b, float *y)
{
	const float d = h2f(b->d);
	for (int ib = 0; ib < 8; ib++, y += 32) {
		const int qh = b->qh[ib];
		const float dl = d * (2 * ((qh >> 12) & 7) + 1);
		const float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
		for (int l = 0; l < 4; l++)
			iq1_point(dl, iq1s_codes[b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)],
				  delta, y + 8 * l);
	}
}

static void dq_iq1_m(const struct quant_iq1_m *b, float *y)
{
	uint16_t sc[4];
	memcpy(sc, b->scales, sizeof sc);
	const uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
				       ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
	const float d = h2f(dh);
	for (int ib = 0; ib < 8; ib++, y += 32) {
		const float dl[2] = {d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 7) + 1),
				     d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1)};
		const uint8_t *qs = b->qs + 4 * ib, *qh = b->qh + 2 * ib;
		for (int l = 0; l < 4; l++) {
			const int h = qh[l / 2] >> (4 * (l % 2)); /* 3 index bits, then the sign */
			const int idx = qs[l] | ((h & 7) << 8);
			iq1_point(dl[l / 2], iq1s_codes[idx], h & 8 ? -IQ1_DELTA : IQ1_DELTA,
				  y + 8 * l);
		}
	}
}

void quant_dequant(enum gguf_dtype t, const void *src, float *dst, int64_t n)
{
	const int be = quant_block_elems(t);
	if (be <= 0 || n % be != 0)
		abort(); /* programmer error: see the contract */
	const size_t bb = quant_block_bytes(t);
	const char *p = src;
	for (int64_t i = 0; i < n; i += be, p += bb) {
		float *y = dst + i;
		switch (t) {
		case GGUF_DTYPE_F32: memcpy(y, p, 4); break;
		case GGUF_DTYPE_F16: {
			uint16_t h;
			memcpy(&h, p, 2);
			*y = half_f16_to_f32(h);
			break;
		}
		case GGUF_DTYPE_BF16: {
			uint16_t h;
			memcpy(&h, p, 2);
			*y = half_bf16_to_f32(h);
			break;
		}
		case GGUF_DTYPE_Q4_0: dq_q4_0((const void *)p, y); break;
		case GGUF_DTYPE_Q4_1: dq_q4_1((const void *)p, y); break;
		case GGUF_DTYPE_Q5_0: dq_q5_0((const void *)p, y); break;
		case GGUF_DTYPE_Q5_1: dq_q5_1((const void *)p, y); break;
		case GGUF_DTYPE_Q8_0: dq_q8_0((const void *)p, y); break;
		case GGUF_DTYPE_Q2_K: dq_q2_k((const void *)p, y); break;
		case GGUF_DTYPE_Q3_K: dq_q3_k((const void *)p, y); break;
		case GGUF_DTYPE_Q4_K: {
			const struct quant_q4_k *b = (const void *)p;
			dq_k_4_5(b->d, b->dmin, b->scales, b->qs, NULL, y);
			break;
		}
		case GGUF_DTYPE_Q5_K: {
			const struct quant_q5_k *b = (const void *)p;
			dq_k_4_5(b->d, b->dmin, b->scales, b->qs, b->qh, y);
			break;
		}
		case GGUF_DTYPE_Q6_K: dq_q6_k((const void *)p, y); break;
		case GGUF_DTYPE_IQ4_NL: dq_iq4_nl((const void *)p, y); break;
		case GGUF_DTYPE_IQ4_XS: dq_iq4_xs((const void *)p, y); break;
		case GGUF_DTYPE_MXFP4: dq_mxfp4((const void *)p, y); break;
		case GGUF_DTYPE_IQ2_XXS: dq_iq2_xxs((const void *)p, y); break;
		case GGUF_DTYPE_IQ2_XS: dq_iq2_xs((const void *)p, y); break;
		case GGUF_DTYPE_IQ2_S: dq_iq2_s((const void *)p, y); break;
		case GGUF_DTYPE_IQ3_XXS: dq_iq3_xxs((const void *)p, y); break;
		case GGUF_DTYPE_IQ3_S: dq_iq3_s((const void *)p, y); break;
		case GGUF_DTYPE_IQ1_S: dq_iq1_s((const void *)p, y); break;
		case GGUF_DTYPE_IQ1_M: dq_iq1_m((const void *)p, y); break;
		}
	}
}

/* ---- integer views (see quant.h) ---- */

bool quant_is_lattice(enum gguf_dtype t)
{
	switch (t) {
	case GGUF_DTYPE_IQ2_XXS:
	case GGUF_DTYPE_IQ2_XS:
	case GGUF_DTYPE_IQ2_S:
	case GGUF_DTYPE_IQ3_XXS:
	case GGUF_DTYPE_IQ3_S:
	case GGUF_DTYPE_IQ1_S:
	case GGUF_DTYPE_IQ1_M: return true;
	default: return false;
	}
}

/* The lattice points as bytes (ggml's form of the tables), expanded once from
 * quant_grids.h's codes: what the integer view copies 8 weights at a time. Written once
 * (pthread_once) and only read after: constant data built at run time rather than 36 KB of
 * literals. */
static struct quant_lattice pts;
static pthread_once_t pts_once = PTHREAD_ONCE_INIT;

/* the n bytes of a point, byte j = level(code, j) as a byte (IQ1's -8 as 0xF8) */
static uint64_t pt_bytes(uint16_t code, int n, int (*level)(uint16_t, int))
{
	uint64_t v = 0;
	for (int j = 0; j < n; j++)
		v |= (uint64_t)(uint8_t)level(code, j) << (8 * j);
	return v;
}

static int iq1_level8(uint16_t code, int j)
{
	return 8 * iq1_level(code, j);
}

static void pts_expand(void)
{
	for (int i = 0; i < 256; i++) {
		pts.iq2xxs[i] = pt_bytes(iq2xxs_codes[i], 8, iq2_level);
		pts.iq3xxs[i] = (uint32_t)pt_bytes(iq3xxs_codes[i], 4, iq3xxs_level);
		for (int j = 0; j < 8; j++)
			pts.neg[i] |= (uint64_t)(i >> j & 1 ? 0xFF : 0) << (8 * j);
	}
	for (int i = 0; i < 512; i++) {
		pts.iq2xs[i] = pt_bytes(iq2xs_codes[i], 8, iq2_level);
		pts.iq3s[i] = (uint32_t)pt_bytes(iq3s_codes[i], 4, iq3s_level);
	}
	for (int i = 0; i < 1024; i++)
		pts.iq2s[i] = pt_bytes(iq2s_codes[i], 8, iq2_level);
	for (int i = 0; i < 2048; i++)
		pts.iq1s[i] = pt_bytes(iq1s_codes[i], 8, iq1_level8);
}

const struct quant_lattice *quant_lattice(void)
{
	pthread_once(&pts_once, pts_expand);
	return &pts;
}

/* 8 int8 weights at q: the point's levels g (each >= 1) with the bytes whose bit of s is
 * set negated: (g ^ 0xFF) + 1 = -g byte by byte, no carry between bytes since g >= 1 */
static void put_signed(int8_t *q, uint64_t g, int s)
{
	const uint64_t m = pts.neg[s & 255];
	const uint64_t v = (g ^ m) + (m & 0x0101010101010101ull);
	memcpy(q, &v, 8);
}

/* 8 IQ1 weights at q: 8 g + (neg ? -1 : 1), g in {-1, 0, 1} (value = (d / 8) q) */
static void put_iq1(int8_t *q, uint64_t g8, bool neg)
{
	for (int j = 0; j < 8; j++)
		q[j] = (int8_t)((int8_t)(uint8_t)(g8 >> (8 * j)) + (neg ? -1 : 1));
}

/* quant_ints_256 of the lattice types: q the signed levels (IQ1: 8 g +- 1), sc per group of
 * 16 the odd scale 2 s + 1 (IQ2 / IQ3_XXS: the factors 1/8 and 1/4 of ggml's db moved into
 * d, exactly: powers of two), no mins */
static void lattice_ints(enum gguf_dtype t, const void *src, struct quant_ints256 *o)
{
	pthread_once(&pts_once, pts_expand);
	switch (t) {
	case GGUF_DTYPE_IQ2_XXS: {
		const struct quant_iq2_xxs *b = src;
		o->d = h2f(b->d) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			uint32_t aux[2];
			memcpy(aux, b->qs + 4 * ib, sizeof aux);
			o->sc[2 * ib] = o->sc[2 * ib + 1] = (int16_t)(2 * (aux[1] >> 28) + 1);
			for (int l = 0; l < 4; l++)
				put_signed(o->q + 32 * ib + 8 * l,
					   pts.iq2xxs[(aux[0] >> (8 * l)) & 255],
					   quant_signs7(aux[1] >> (7 * l)));
		}
		return;
	}
	case GGUF_DTYPE_IQ2_XS:
	case GGUF_DTYPE_IQ2_S: {
		const bool xs = t == GGUF_DTYPE_IQ2_XS;
		const struct quant_iq2_xs *bx = src;
		const struct quant_iq2_s *bs = src;
		const uint8_t *scales = xs ? bx->scales : bs->scales;
		o->d = h2f(xs ? bx->d : bs->d) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			o->sc[2 * ib] = (int16_t)(2 * (scales[ib] & 0xf) + 1);
			o->sc[2 * ib + 1] = (int16_t)(2 * (scales[ib] >> 4) + 1);
			for (int l = 0; l < 4; l++) {
				int8_t *q = o->q + 32 * ib + 8 * l;
				if (xs) {
					const uint16_t v = bx->qs[4 * ib + l];
					put_signed(q, pts.iq2xs[v & 511], quant_signs7(v >> 9));
				} else {
					const int idx = bs->qs[4 * ib + l] |
							((bs->qh[ib] << (8 - 2 * l)) & 0x300);
					put_signed(q, pts.iq2s[idx], bs->qs[32 + 4 * ib + l]);
				}
			}
		}
		return;
	}
	case GGUF_DTYPE_IQ3_XXS: {
		const struct quant_iq3_xxs *b = src;
		o->d = h2f(b->d) * 0.25f;
		for (int ib = 0; ib < 8; ib++) {
			uint32_t aux;
			memcpy(&aux, b->qs + 64 + 4 * ib, sizeof aux);
			o->sc[2 * ib] = o->sc[2 * ib + 1] = (int16_t)(2 * (aux >> 28) + 1);
			for (int l = 0; l < 4; l++) {
				const uint8_t *qs = b->qs + 8 * ib + 2 * l;
				put_signed(o->q + 32 * ib + 8 * l,
					   pts.iq3xxs[qs[0]] | (uint64_t)pts.iq3xxs[qs[1]] << 32,
					   quant_signs7(aux >> (7 * l)));
			}
		}
		return;
	}
	case GGUF_DTYPE_IQ3_S: {
		const struct quant_iq3_s *b = src;
		o->d = h2f(b->d);
		for (int ib = 0; ib < 8; ib++) {
			const int s = (b->scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
			o->sc[2 * ib] = o->sc[2 * ib + 1] = (int16_t)(1 + 2 * s);
			const uint8_t *qs = b->qs + 8 * ib;
			const int qh = b->qh[ib];
			for (int l = 0; l < 4; l++) {
				const uint32_t g1 =
				    pts.iq3s[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
				const uint32_t g2 =
				    pts.iq3s[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
				put_signed(o->q + 32 * ib + 8 * l, g1 | (uint64_t)g2 << 32,
					   b->signs[4 * ib + l]);
			}
		}
		return;
	}
	case GGUF_DTYPE_IQ1_S: {
		const struct quant_iq1_s *b = src;
		o->d = h2f(b->d) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			const int qh = b->qh[ib];
			o->sc[2 * ib] = o->sc[2 * ib + 1] = (int16_t)(2 * ((qh >> 12) & 7) + 1);
			for (int l = 0; l < 4; l++)
				put_iq1(o->q + 32 * ib + 8 * l,
					pts.iq1s[b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)],
					qh & 0x8000);
		}
		return;
	}
	case GGUF_DTYPE_IQ1_M: {
		const struct quant_iq1_m *b = src;
		uint16_t sc[4];
		memcpy(sc, b->scales, sizeof sc);
		const uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
					       ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
		o->d = h2f(dh) * 0.125f;
		for (int ib = 0; ib < 8; ib++) {
			for (int h = 0; h < 2; h++)
				o->sc[2 * ib + h] =
				    (int16_t)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * h)) & 7) + 1);
			for (int l = 0; l < 4; l++) {
				const int hb = b->qh[2 * ib + l / 2] >> (4 * (l % 2));
				put_iq1(o->q + 32 * ib + 8 * l,
					pts.iq1s[b->qs[4 * ib + l] | ((hb & 7) << 8)], hb & 8);
			}
		}
		return;
	}
	default: abort(); /* programmer error: see the contract */
	}
}

bool quant_has_offset(enum gguf_dtype t)
{
	return t == GGUF_DTYPE_Q4_1 || t == GGUF_DTYPE_Q5_1;
}

bool quant_signed_q(enum gguf_dtype t)
{
	switch (t) {
	case GGUF_DTYPE_Q4_0:
	case GGUF_DTYPE_Q5_0:
	case GGUF_DTYPE_Q8_0:
	case GGUF_DTYPE_IQ4_NL:
	case GGUF_DTYPE_MXFP4:
	case GGUF_DTYPE_Q3_K:
	case GGUF_DTYPE_Q6_K:
	case GGUF_DTYPE_IQ4_XS: return true;
	default: return quant_is_lattice(t);
	}
}

void quant_ints_32(enum gguf_dtype t, const void *src, struct quant_ints32 *o)
{
	o->m = 0.0f;
	switch (t) {
	case GGUF_DTYPE_Q4_0: {
		const struct quant_q4_0 *b = src;
		o->d = h2f(b->d);
		for (int j = 0; j < 16; j++) {
			o->q[j] = (int8_t)((b->qs[j] & 0x0F) - 8);
			o->q[j + 16] = (int8_t)((b->qs[j] >> 4) - 8);
		}
		return;
	}
	case GGUF_DTYPE_Q4_1: {
		const struct quant_q4_1 *b = src;
		o->d = h2f(b->d);
		o->m = h2f(b->m);
		for (int j = 0; j < 16; j++) {
			o->q[j] = (int8_t)(b->qs[j] & 0x0F);
			o->q[j + 16] = (int8_t)(b->qs[j] >> 4);
		}
		return;
	}
	case GGUF_DTYPE_Q5_0:
	case GGUF_DTYPE_Q5_1: {
		const bool one = t == GGUF_DTYPE_Q5_1;
		const struct quant_q5_0 *b0 = src;
		const struct quant_q5_1 *b1 = src;
		const uint8_t *qs = one ? b1->qs : b0->qs, *qhp = one ? b1->qh : b0->qh;
		o->d = h2f(one ? b1->d : b0->d);
		if (one)
			o->m = h2f(b1->m);
		uint32_t qh;
		memcpy(&qh, qhp, sizeof qh);
		for (int j = 0; j < 16; j++) {
			int x0 = (qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
			int x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
			o->q[j] = (int8_t)(one ? x0 : x0 - 16);
			o->q[j + 16] = (int8_t)(one ? x1 : x1 - 16);
		}
		return;
	}
	case GGUF_DTYPE_Q8_0: {
		const struct quant_q8_0 *b = src;
		o->d = h2f(b->d);
		memcpy(o->q, b->qs, 32);
		return;
	}
	case GGUF_DTYPE_IQ4_NL: {
		const struct quant_iq4_nl *b = src;
		o->d = h2f(b->d);
		for (int j = 0; j < 16; j++) {
			o->q[j] = quant_iq4_values[b->qs[j] & 0xf];
			o->q[j + 16] = quant_iq4_values[b->qs[j] >> 4];
		}
		return;
	}
	case GGUF_DTYPE_MXFP4: {
		const struct quant_mxfp4 *b = src;
		o->d = quant_e8m0_half(b->e);
		for (int j = 0; j < 16; j++) {
			o->q[j] = quant_mxfp4_values[b->qs[j] & 0xf];
			o->q[j + 16] = quant_mxfp4_values[b->qs[j] >> 4];
		}
		return;
	}
	default: abort(); /* programmer error: see the contract */
	}
}

void quant_ints_256(enum gguf_dtype t, const void *src, struct quant_ints256 *o)
{
	memset(o->mn, 0, sizeof o->mn);
	o->dmin = 0.0f;
	switch (t) {
	case GGUF_DTYPE_Q2_K: {
		const struct quant_q2_k *b = src;
		o->d = h2f(b->d);
		o->dmin = h2f(b->dmin);
		for (int g = 0; g < 16; g++) {
			o->sc[g] = b->scales[g] & 0xF;
			o->mn[g] = b->scales[g] >> 4;
		}
		/* element e = 128 h + 32 j + 16 s + l: bits 2j of qs[32 h + 16 s + l] */
		for (int e = 0; e < 256; e++) {
			int h = e / 128, j = e / 32 % 4, sl = e % 32;
			o->q[e] = (int8_t)((b->qs[32 * h + sl] >> (2 * j)) & 3);
		}
		return;
	}
	case GGUF_DTYPE_Q3_K: {
		const struct quant_q3_k *b = src;
		int8_t sc[16];
		q3_k_scales(b->scales, sc);
		o->d = h2f(b->d);
		for (int g = 0; g < 16; g++)
			o->sc[g] = (int16_t)(sc[g] - 32);
		for (int e = 0; e < 256; e++) {
			int h = e / 128, j = e / 32 % 4, sl = e % 32;
			int lo = (b->qs[32 * h + sl] >> (2 * j)) & 3;
			int hi = b->hmask[sl] & (1 << (4 * h + j));
			o->q[e] = (int8_t)(lo - (hi ? 0 : 4));
		}
		return;
	}
	case GGUF_DTYPE_Q4_K:
	case GGUF_DTYPE_Q5_K: {
		const bool five = t == GGUF_DTYPE_Q5_K;
		const struct quant_q4_k *b4 = src;
		const struct quant_q5_k *b5 = src;
		const uint8_t *scales = five ? b5->scales : b4->scales,
			      *qs = five ? b5->qs : b4->qs;
		o->d = h2f(five ? b5->d : b4->d);
		o->dmin = h2f(five ? b5->dmin : b4->dmin);
		for (int g = 0; g < 8; g++) {
			uint8_t sc, m;
			quant_scale_min_k4(g, scales, &sc, &m);
			o->sc[2 * g] = o->sc[2 * g + 1] = sc;
			o->mn[2 * g] = o->mn[2 * g + 1] = m;
		}
		/* element e = 64 j + 32 s + l: nibble s of qs[32 j + l], fifth bit 2j + s of qh[l]
		 */
		for (int e = 0; e < 256; e++) {
			int j = e / 64, s = e / 32 % 2, l = e % 32;
			int v = (qs[32 * j + l] >> (4 * s)) & 0xF;
			if (five && (b5->qh[l] >> (2 * j + s)) & 1)
				v += 16;
			o->q[e] = (int8_t)v;
		}
		return;
	}
	case GGUF_DTYPE_Q6_K: {
		const struct quant_q6_k *b = src;
		o->d = h2f(b->d);
		for (int g = 0; g < 16; g++)
			o->sc[g] = b->scales[g];
		/* element e = 128 h + 32 u + l: nibble u / 2 of ql[64 h + 32 (u % 2) + l], high
		 * bits 2u of qh[32 h + l] */
		for (int e = 0; e < 256; e++) {
			int h = e / 128, u = e / 32 % 4, l = e % 32;
			int lo = (b->ql[64 * h + 32 * (u % 2) + l] >> (4 * (u / 2))) & 0xF;
			int hi = (b->qh[32 * h + l] >> (2 * u)) & 3;
			o->q[e] = (int8_t)((lo | hi << 4) - 32);
		}
		return;
	}
	case GGUF_DTYPE_IQ4_XS: {
		const struct quant_iq4_xs *b = src;
		o->d = h2f(b->d);
		for (int ib = 0; ib < 8; ib++) {
			int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
				 (((b->scales_h >> 2 * ib) & 3) << 4);
			o->sc[2 * ib] = o->sc[2 * ib + 1] = (int16_t)(ls - 32);
			for (int j = 0; j < 16; j++) {
				o->q[32 * ib + j] = quant_iq4_values[b->qs[16 * ib + j] & 0xf];
				o->q[32 * ib + 16 + j] = quant_iq4_values[b->qs[16 * ib + j] >> 4];
			}
		}
		return;
	}
	default: lattice_ints(t, src, o); /* aborts on any other type */
	}
}

/* ---- activations as llama.cpp quantizes them (see quant.h) ---- */

/* ggml's nearest_int: round to nearest, ties to even, for |f| < 2^22 */
static int nearest_int(float f)
{
	float v = f + 12582912.f;
	int32_t i;
	memcpy(&i, &v, sizeof i);
	return (i & 0x007fffff) - 0x00400000;
}

/* Q8_0 / Q8_1 as ggml-cpu's x86 quantize_row_q8_0/_1 make them (AVX path) */
static void round_q8_0(const float *x, float *out)
{
	float amax = 0.0f;
	for (int j = 0; j < 32; j++) {
		float a = fabsf(x[j]);
		amax = a > amax ? a : amax;
	}
	const float d = half_f16_to_f32(half_f32_to_f16(amax / 127.f));
	const float id = amax != 0.0f ? 127.f / amax : 0.0f;
	for (int j = 0; j < 32; j++)
		out[j] = d * (float)nearest_int(x[j] * id);
}

float quant_max_magnitude(const float *x, int n)
{
	float max = 0.0f, amax = 0.0f;
	for (int j = 0; j < n; j++) {
		float ax = fabsf(x[j]);
		if (ax > amax) {
			amax = ax;
			max = x[j];
		}
	}
	return max;
}

/* Q8_K as quantize_row_q8_K_ref makes it (ggml-cpu uses the reference on x86) */
static void round_q8_k(const float *x, float *out)
{
	const float max = quant_max_magnitude(x, 256);
	if (max == 0.0f) {
		for (int j = 0; j < 256; j++)
			out[j] = 0.0f;
		return;
	}
	const float iscale = -127.f / max, d = 1 / iscale;
	for (int j = 0; j < 256; j++) {
		int v = nearest_int(iscale * x[j]);
		out[j] = d * (float)(v < 127 ? v : 127);
	}
}

void quant_round_act(enum gguf_dtype t, const float *x, float *out, int64_t n)
{
	/* every block type of 32 multiplies Q8_0 (Q8_1's values are Q8_0's), every one of 256
	 * Q8_K (quant.h) */
	const int be = quant_block_elems(t);
	if (be == 32 || be == 256) {
		if (n % be)
			abort();
		for (int64_t i = 0; i < n; i += be)
			(be == 32 ? round_q8_0 : round_q8_k)(x + i, out + i);
		return;
	}
	if (out != x)
		memcpy(out, x, sizeof(float) * (size_t)n);
}
