/* quant: llama.cpp's block-quantized weight formats (ggml's block_* layouts, as stored in
 * GGUF files) and their reference dequantization to fp32.
 *
 * Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (blocks of 32 elements) and Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K, IQ4_NL, MXFP4 (32), IQ4_XS (K-quant super-blocks of 256), and the lattice i-quants
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (256; their tables: quant_grids.h).
 * A row of n elements is n / block elements consecutive blocks; n must be a multiple of
 * the block size.
 *
 * Invariant: quant_dequant gives bitwise the values of ggml's dequantize_row_* (ggml-base,
 * ggml-quants.c), the same fp32 operations in the same order with no contraction into
 * fused multiply-adds (the Makefile passes -ffp-contract=off, for gcc and clang alike);
 * tests/test_quant.c checks it against llama.cpp's own library where it is installed.
 */
#ifndef BG_QUANT_H
#define BG_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/gguf.h"

/* ---- block layouts (sizes checked by static asserts in quant.c) ---- */

struct quant_q4_0 { /* 18 bytes: x = d * (q - 8) */
	uint16_t d;
	uint8_t qs[16]; /* element j in the low nibble of qs[j], j + 16 in the high one */
};
struct quant_q4_1 { /* 20 bytes: x = d * q + m */
	uint16_t d, m;
	uint8_t qs[16];
};
struct quant_q5_0 { /* 22 bytes: x = d * (q - 16), q's 5th bit j in bit j of qh */
	uint16_t d;
	uint8_t qh[4];
	uint8_t qs[16];
};
struct quant_q5_1 { /* 24 bytes: x = d * q + m */
	uint16_t d, m;
	uint8_t qh[4];
	uint8_t qs[16];
};
struct quant_q8_0 { /* 34 bytes: x = d * q */
	uint16_t d;
	int8_t qs[32];
};
struct quant_q2_k { /* 84 bytes: 16 groups of 16, 4-bit scale and min each */
	uint8_t scales[16];
	uint8_t qs[64];
	uint16_t d, dmin;
};
struct quant_q3_k { /* 110 bytes: 16 groups of 16, 6-bit scales */
	uint8_t hmask[32];
	uint8_t qs[64];
	uint8_t scales[12];
	uint16_t d;
};
struct quant_q4_k { /* 144 bytes: 8 groups of 32, 6-bit scale and min each */
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qs[128];
};
struct quant_q5_k { /* 176 bytes */
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qh[32];
	uint8_t qs[128];
};
struct quant_q6_k { /* 210 bytes: 16 groups of 16, int8 scales */
	uint8_t ql[128];
	uint8_t qh[64];
	int8_t scales[16];
	uint16_t d;
};
struct quant_iq4_nl { /* 18 bytes: x = d * kvalues[q] */
	uint16_t d;
	uint8_t qs[16];
};
struct quant_iq4_xs { /* 136 bytes: 8 groups of 32, 6-bit scales */
	uint16_t d;
	uint16_t scales_h;
	uint8_t scales_l[4];
	uint8_t qs[128];
};

/* The lattice i-quants (super-blocks of 256 in 8 groups of 32, each group 4 points of 8
 * weights, IQ3 8 points of 4; a point is a table entry (quant_grids.h) times signs). */
struct quant_iq2_xxs { /* 66 bytes: per group, 4 index bytes, then 4 x 7 sign bits and a
			* 4-bit scale in one u32 */
	uint16_t d;
	uint16_t qs[32];
};
struct quant_iq2_xs { /* 74 bytes: per point a 9-bit index and 7 sign bits; 4-bit scales,
		       * two a group */
	uint16_t d;
	uint16_t qs[32];
	uint8_t scales[8];
};
struct quant_iq2_s { /* 82 bytes: 8-bit indices (qs[0, 32)) with 2 high bits each in qh,
		      * 8 sign bits a point (qs[32, 64)), 4-bit scales, two a group */
	uint16_t d;
	uint8_t qs[64];
	uint8_t qh[8];
	uint8_t scales[8];
};
struct quant_iq3_xxs { /* 98 bytes: 64 index bytes, then per group a u32 of 4 x 7 sign bits
			* and a 4-bit scale */
	uint16_t d;
	uint8_t qs[96];
};
struct quant_iq3_s { /* 110 bytes: 8-bit indices with a 9th bit in qh, 8 sign bits a pair
		      * of points, 4-bit scales, one per two groups */
	uint16_t d;
	uint8_t qs[64];
	uint8_t qh[8];
	uint8_t signs[32];
	uint8_t scales[4];
};
struct quant_iq1_s { /* 50 bytes: per group a u16 of 4 x 3 high index bits, a 3-bit scale
		      * and the sign of the shift (IQ1S_DELTA, 0.125) */
	uint16_t d;
	uint8_t qs[32];
	uint16_t qh[8];
};
struct quant_iq1_m { /* 56 bytes: 3 high index bits and a shift sign per point in qh; the
		      * fp16 scale spread over the top nibbles of the 4 u16 of scales, 3-bit
		      * scales per half group below them */
	uint8_t qs[32];
	uint8_t qh[16];
	uint8_t scales[8];
};

struct quant_mxfp4 { /* 17 bytes: x = 2^(e - 128) * quant_mxfp4_values[code] (OCP MXFP4:
		      * an e8m0 scale 2^(e - 127) times e2m1 values, which ggml keeps doubled as
		      * integers and halves in the scale) */
	uint8_t e;
	uint8_t qs[16]; /* element j in the low nibble of qs[j], j + 16 in the high one */
};

/* MXFP4's e2m1 codes as twice their value (ggml's kvalues_mxfp4): 0 0.5 1 1.5 2 3 4 6 and
 * their negatives (code 8 is -0, here 0). */
extern const int8_t quant_mxfp4_values[16];
/* 2^(e - 128) as fp32 (ggml's e8m0_to_fp32_half), subnormal for e < 2: for e >= 2 the
 * exponent field e - 1, for e = 0, 1 the subnormals 2^-128, 2^-127. Inline: cpu/qdot's
 * vector code calls it once per block. */
static inline float quant_e8m0_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* Q4_K's and Q5_K's 6-bit scale *d and min *m of group j in [0, 8), from their 12 packed
 * bytes (ggml's get_scale_min_k4). */
static inline void quant_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
	}
}

/* IQ4_NL's and IQ4_XS's 16 non-uniform levels (ggml's kvalues_iq4nl). */
extern const int8_t quant_iq4_values[16];

/* True for the block-quantized types above (Q8_0 included). */
bool quant_is_quantized(enum gguf_dtype t);

/* Elements per block (1 for F32/F16/BF16) and bytes per block (0 for unknown types). */
int quant_block_elems(enum gguf_dtype t);
size_t quant_block_bytes(enum gguf_dtype t);

/* dst[0, n) = the n elements at src, type t (any type gguf_dtype knows), as fp32.
 * n must be a multiple of quant_block_elems(t) (programmer error otherwise). */
void quant_dequant(enum gguf_dtype t, const void *src, float *dst, int64_t n);

/* Activations the way llama.cpp's CPU matmuls see them: before multiplying with weights
 * of type t it quantizes each activation row in blocks (ggml's vec_dot_type): Q8_0 (32
 * elements, fp16 d = amax / 127, q = round-to-even(x * 127 / amax)) for Q4_0, Q5_0, Q8_0,
 * IQ4_NL and MXFP4; Q8_1 (the same, plus a block sum) for Q4_1 and Q5_1; Q8_K (256 elements,
 * fp32 d = max / -127 with max the element of largest magnitude, q = min(127,
 * round-to-even(x * -127 / max))) for the K-quants and IQ4_XS. out[i] = d * q[i], the
 * value of the quantized activation, so an fp32 dot product with it differs from
 * llama.cpp's integer one only by rounding (and by Q8_1's block sum, which llama.cpp
 * keeps in fp16). n is a multiple of the block (256 for the K types, 32 otherwise);
 * out may equal x. F32/F16/BF16: out = x. */
void quant_round_act(enum gguf_dtype t, const float *x, float *out, int64_t n);
/* The element of x[n] of largest magnitude, with its sign (the first of equals; NaNs are
 * passed over), or 0 when all are zero: Q8_K's scale is -127 / it
 * (quantize_row_q8_K_ref), for quant_round_act and the CPU kernels' activations alike. */
float quant_max_magnitude(const float *x, int n);

/* ---- integer views of the blocks (for integer dot products, cpu/qdot) ----
 * Every type's value is x = d * q (+ m) per element of a block of 32, or d * sc[g] * q -
 * dmin * mn[g] per element of group g = e / 16 of a super-block of 256, with small
 * integers q (|q| <= 128), sc (|sc| <= 128) and mn (0..63): the values quant_dequant
 * computes are these products, rounded as ggml rounds them. */
struct quant_ints32 {
	int8_t q[32];
	float d, m; /* m = 0 except Q4_1 and Q5_1 */
};
struct quant_ints256 {
	int8_t q[256];
	int16_t sc[16], mn[16]; /* per group of 16 (a group of 32 gives two equal entries) */
	float d, dmin;		/* dmin = 0 and mn all 0 except Q2_K, Q4_K and Q5_K */
};

/* True for the lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M). */
bool quant_is_lattice(enum gguf_dtype t);

/* The lattice points as bytes (ggml's form of the tables: byte j of an entry = the point's
 * level j; IQ1's levels times 8, -8 as 0xF8), and the sign masks (neg[s]: byte j 0xFF where
 * bit j of s is set), for code that unpacks the lattice types itself (cpu/qdot's vector
 * levels). Built from quant_grids.h on the first call (thread-safe); constant after. */
struct quant_lattice {
	uint64_t iq2xxs[256], iq2xs[512], iq2s[1024]; /* 8 levels 8, 25, 43 */
	uint32_t iq3xxs[256], iq3s[512];	      /* 4 levels */
	uint64_t iq1s[2048];			      /* 8 levels -8, 0, 8 */
	uint64_t neg[256];
};
const struct quant_lattice *quant_lattice(void);

/* The 8 sign bits of a point whose 7 are stored (IQ2_XXS, IQ2_XS, IQ3_XXS): the eighth
 * makes their parity even (ggml's ksigns_iq2xs). */
static inline int quant_signs7(uint32_t s7)
{
	s7 &= 127;
	return (int)(s7 | (uint32_t)(__builtin_parity(s7) << 7));
}
/* True for Q4_1 and Q5_1 (x = d * q + m with q >= 0). */
bool quant_has_offset(enum gguf_dtype t);
/* True where q may be negative (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q3_K, Q6_K, IQ4_XS, the
 * lattice types). */
bool quant_signed_q(enum gguf_dtype t);
/* The block at src of a type with 32-element blocks, as integers (programmer error for
 * other types). */
void quant_ints_32(enum gguf_dtype t, const void *src, struct quant_ints32 *out);
/* The super-block at src of a K type, IQ4_XS or a lattice type, as integers. The lattice
 * types: q the signed lattice levels (|q| <= 62; IQ1_S / IQ1_M: 8 g + 1 or 8 g - 1 for their
 * shift of +-1/8), sc the odd scales 2 s + 1 per group of 16, ggml's constant factors of
 * db in d (exact: powers of two); no mins. */
void quant_ints_256(enum gguf_dtype t, const void *src, struct quant_ints256 *out);

#endif
