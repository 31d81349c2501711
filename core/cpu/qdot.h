/* qdot: integer dot products of llama.cpp's block-quantized weights (model/quant.h) with
 * activations quantized, as llama.cpp's CPU matmuls quantize them, into 8-bit blocks:
 * Q8_0 (32 elements, scale d) for Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4; Q8_1 (the same plus the
 * block sum s) for Q4_1 and Q5_1; Q8_K (256 elements, d and the sums of each 16) for the
 * K-quants and IQ4_XS (../shared/ERRATA.md, "Quantized models").
 *
 * The arithmetic, which every instruction set reproduces bit for bit (what batch
 * invariance and the tests rest on):
 *  - Blocks of 32 (weight integers w[e] with scale dw, and for Q4_1/Q5_1 offset mw):
 *    eight exact int32 lane sums L[l] = sum of w[e] * x[e] over e in [4l, 4l + 4); then
 *    acc[l] = fmaf(dw * dx, (float)L[l], acc[l]) block after block; Q4_1/Q5_1 also
 *    summs = summs + mw * sx. The result is ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 +
 *    acc5) + (acc3 + acc7)), plus summs. (llama.cpp's AVX2 vec_dot has this shape.)
 *  - Super-blocks of 256: the exact int32 isum = sum over groups of scale * (sum of
 *    w[e] * x[e]) and, for Q2_K/Q4_K/Q5_K, summ = sum over groups of min * (sum of x[e]);
 *    then acc = acc + ((dw * dx) * (float)isum - (dminw * dx) * (float)summ), or acc = acc
 *    + (dw * dx) * (float)isum without mins, super-block after super-block.
 * Integer sums are exact whatever the grouping, so the SIMD code may group them as it
 * likes (maddubs pairs, VNNI quads, offsets folded through the block sums); the float
 * steps are the ones above in this order. No int16 intermediate can saturate: weights
 * have |w| <= 128 (Q8_0's -128 included) and quantized activations |x| <= 127.
 *
 * Instruction sets (qdot_isa): the portable C, AVX2 (maddubs), AVX-VNNI and AVX-512 VNNI
 * (256-bit dpbusd; Q8_0's batched tile in 512-bit vectors); all give the same bits, so the
 * best one the processor has is used (qdot_detect) independently of cpu_kernels' level.
 * For Q8_0 the VNNI levels make the activations unsigned (x + 128) instead of moving the
 * weights' signs onto them, and start dpbusd from -128 * (the weights' lane sums): the
 * same exact L[l].
 *
 * Activation format, decided by measurement (issue 12): every block type, Q8_0 included,
 * multiplies activations quantized in llama.cpp's blocks (not fp32, not per-row int8).
 * For Q8_0, which until then kept fp32 activations (cpu_kernels), the int8 path measured
 * (2026-11-29, AMD EPYC Zen 4, bench/results/q8int-2026-11-29.md):
 *  - accuracy against llama.cpp (bench/quant_logprob_gap.sh, Q8_0 files of a 256-wide
 *    llama and qwen2, 3 prompts x 12 greedy steps): median |chosen log-prob difference|
 *    0.012-0.014 -> 1-2e-8, max 0.086 -> 8e-8, token differences 3 -> 0: the per-row
 *    arithmetic above is that of llama.cpp's AVX2 ggml_vec_dot_q8_0_q8_0;
 *  - speed of one matrix (bench/qdot_matmul, 2048 x 5632, one thread): B=1 0.34 ms
 *    against the fp32 kernels' 0.76 (L3-resident; from memory both stream at one core's
 *    rate), B=16 3.9 against 4.9 ms, B=64 17-19 against 28 ms.
 * The fp32 kernels stay the backend's fallback (cpu_kernels.h).
 */
#ifndef BG_QDOT_H
#define BG_QDOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"

enum qdot_isa {
	QDOT_PORTABLE = 0,
	QDOT_AVX2 = 1,	     /* AVX2: _mm256_maddubs_epi16 */
	QDOT_AVXVNNI = 2,    /* AVX2 + AVX-VNNI: VEX _mm256_dpbusd_avx_epi32 */
	QDOT_AVX512VNNI = 3, /* AVX2 + AVX-512 VNNI + BW + VL: EVEX _mm256_dpbusd_epi32 */
};
#define QDOT_N_ISA 4

/* An activation block of 32 (Q8_0, Q8_1): x = d * qs; s = fp16(d' * sum qs) (Q8_1 only,
 * d' the unrounded scale, as llama.cpp), 0 for Q8_0. d and s are fp16 values as fp32. */
struct qdot_a32 {
	float d, s;
	int8_t qs[32];
};

/* An activation super-block of 256 (Q8_K): x = d * qs; bsums[g] = sum of qs[16g, 16g + 16). */
struct qdot_a256 {
	float d;
	int16_t bsums[16];
	int8_t qs[256];
};

bool qdot_supported(enum qdot_isa isa);
enum qdot_isa qdot_detect(void);	      /* the best supported */
const char *qdot_isa_name(enum qdot_isa isa); /* "portable", "avx2", "avxvnni", "avx512vnni" */

/* True for the weight types qdot multiplies (model/quant.h's block types; the lattice
 * i-quants through quant_ints_256, the others with their own unpacking too). */
bool qdot_handles(enum gguf_dtype t);

/* Bytes of one quantized activation row of k elements for weights of type t (k a multiple
 * of the type's block: 32, or 256 for the K-quants and IQ4_XS). */
size_t qdot_act_row_bytes(enum gguf_dtype t, int64_t k);

/* Quantizes x[0, k) as llama.cpp does before multiplying with weights of type t, into
 * out (qdot_act_row_bytes(t, k) bytes, any alignment of 4). Non-finite x gives some
 * quantization with |qs| <= 127 (never a crash). */
void qdot_quantize_row(enum gguf_dtype t, const float *x, int64_t k, void *out);

/* qdot_quantize_row's bytes, computed with isa's vector code (AVX2 for every x86 level;
 * decode quantizes each matmul input on the critical path). Quantization is block by
 * block: blocks [b0, b1) of x alone give the same bytes as that part of the whole row. */
void qdot_quantize_row_isa(enum qdot_isa isa, enum gguf_dtype t, const float *x, int64_t k,
			   void *out);

/* y[tok * ldy + r] = W[r] . xq[tok] for r in [r0, r1), tok in [0, n_tok): W is packed
 * rows of k elements of type t from w, xq[tok] the activation row at qx + tok * ldq bytes
 * (made by qdot_quantize_row for t and k). Each value is the arithmetic of the header,
 * the same bits for every isa, tile, row range and n_tok. */
void qdot_matmul(enum qdot_isa isa, enum gguf_dtype t, const void *w, int64_t k, int64_t r0,
		 int64_t r1, const void *qx, size_t ldq, int32_t n_tok, float *y, int64_t ldy);

#endif
