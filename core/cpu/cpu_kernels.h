/* cpu_kernels: the dot products of the CPU backend, for F32/F16/BF16/Q8_0 weights with
 * fp32 activations (and llama.cpp's other block types, below), in a portable scalar
 * version and AVX2+FMA / AVX-512 versions chosen at run time.
 *
 * Invariant (what batch invariance rests on): for a given level, weight type and row
 * length k, the value computed for one (weight row, activation row) pair is bitwise the
 * same whatever n_tok, the row range [r0, r1) or the strides are. Each such dot product
 * is one chain of lane-wise fused multiply-adds over k in steps of the vector width
 * (zero-padded tail), followed by a fixed horizontal reduction (the lanes halved, lane j
 * plus lane j + width / 2, down to 4, then (0 + 2) + (1 + 3); the scalar level emulates
 * 8 lanes this way, AVX2 has 8, AVX-512 16); tiles that serve several rows and tokens
 * at once (4 rows x 4 tokens, or 8 rows x 1 token for 1-3 tokens) only share the loads,
 * and software prefetches of the next tile change no value. Different levels may round
 * differently from each other, so a process picks one level and keeps it.
 *
 * Weights are dequantized on the fly: F16 and BF16 exactly to fp32, Q8_0 (blocks of 32:
 * fp16 scale d, 32 int8 q) as d * q rounded to fp32. Q8_0 rows need k % 32 == 0.
 *
 * The other block types of model/quant.h (Q4_0 ... IQ4_XS, the i-quants) are dequantized by
 * quant_dequant (AVX2 code for Q4_K and Q6_K at the vector levels, bitwise the same), bit
 * for bit as llama.cpp does, DQ_C = 256 elements at a time into a
 * buffer, and multiplied there with up to 32 tokens; their activations are first rounded
 * per row as llama.cpp's CPU matmuls quantize them (quant_round_act: Q8_0 / Q8_1 blocks
 * of 32, Q8_K blocks of 256). That choice was measured (README, "Quantized weights"): it
 * makes most steps agree with llama.cpp to 1e-5 in log-prob, where fp32 activations are
 * off by 0.06-0.11 everywhere; the rounding is a function of the row alone, so batch
 * invariance holds. The dot product on the rounded activations follows the same order
 * (VW-lane FMA chains, then the fixed reduction) as the F32 kernel's on the dequantized
 * row: bitwise that. (llama.cpp then multiplies in int8; the fp32 products here differ
 * from its by rounding only.) Rows need k % 32 == 0, k % 256 == 0 for the K types.
 *
 * The CPU backend multiplies those types, and Q8_0 too, with cpu/qdot instead:
 * activations quantized once per matmul into llama.cpp's 8-bit blocks and integer dot
 * products, as llama.cpp computes them (measured closer to it, and faster; the decision
 * and its numbers are in cpu/qdot.h and README "Quantized weights"). The fp32 path here
 * (Q8_0's included) stays as the backend's fallback and for comparison.
 */
#ifndef BG_CPU_KERNELS_H
#define BG_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"

enum cpuk_level {
	CPUK_SCALAR = 0,
	CPUK_AVX2 = 1,	 /* AVX2 + FMA + F16C */
	CPUK_AVX512 = 2, /* AVX-512F */
};

/* Q8_0 block as stored in GGUF: 34 bytes. */
struct cpuk_q8_0 {
	uint16_t d;    /* fp16 scale */
	int8_t qs[32]; /* quants */
};

/* The best level this processor supports (from cpufeat.h's probe). */
enum cpuk_level cpuk_detect(void);
bool cpuk_supported(enum cpuk_level level);
const char *cpuk_level_name(enum cpuk_level level); /* "scalar", "avx2", "avx512" */

/* Bytes of one row of k elements of type (k % 32 == 0 for Q8_0). */
size_t cpuk_row_bytes(enum gguf_dtype type, int64_t k);

/* out[k] = row of k elements of type, converted to fp32. */
void cpuk_dequant_row(enum gguf_dtype type, const void *row, int64_t k, float *out);

/* y[t * ldy + r] = sum_i W[r][i] * x[t * ldx + i] for r in [r0, r1), t in [0, n_tok).
 * W is rows of k elements of type, rows packed (cpuk_row_bytes apart), starting at w. */
void cpuk_matmul(enum cpuk_level level, enum gguf_dtype type, const void *w, int64_t k, int64_t r0,
		 int64_t r1, const float *x, int64_t ldx, int32_t n_tok, float *y, int64_t ldy);

/* sum_i a[i] * b[i] for fp32 vectors, with the same order as cpuk_matmul on F32. */
float cpuk_dot_f32(enum cpuk_level level, const float *a, const float *b, int64_t n);

/* y[i] = fma(a, x[i], y[i]) for i in [0, n): one rounding per element, so every level
 * gives the same bits (attention's weighted sum of V rows). */
void cpuk_axpy(enum cpuk_level level, int64_t n, float a, const float *x, float *y);

/* out[j] = cpuk_dot_f32(level, a, b + j * ldb, n), bitwise, for j in [0, n_rows): one
 * query against n_rows key rows ldb floats apart, several rows per pass (attention). */
void cpuk_dot_f32_rows(enum cpuk_level level, const float *a, const float *b, int64_t ldb,
		       int32_t n_rows, int64_t n, float *out);

/* For j = 0, 1, ..., n_rows - 1 in this order: cpuk_axpy(level, n, a[j], x + j * ldx, y);
 * bitwise the same, with y kept in registers across rows. */
void cpuk_axpy_rows(enum cpuk_level level, int64_t n, const float *a, int32_t n_rows,
		    const float *x, int64_t ldx, float *y);

#endif
