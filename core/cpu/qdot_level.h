/* qdot_level.h: what qdot.c and its vector levels (qdot_avx2.c, qdot_avxvnni.c,
 * qdot_avx512vnni.c, each qdot_simd.inc compiled for one instruction set) share. Private
 * to those files: the contract is qdot.h's. */
#ifndef BG_QDOT_LEVEL_H
#define BG_QDOT_LEVEL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu/qdot.h"
#include "model/half.h"
#include "model/quant.h"

#if defined(__x86_64__)
#define QDOT_X86 1
#include <immintrin.h>
#else
#define QDOT_X86 0
#endif

/* a K-quant's 256-element super-blocks (else blocks of 32) */
static inline bool qdot_is_k(enum gguf_dtype t)
{
	return quant_block_elems(t) == 256;
}

/* the sum of eight partial sums in qdot.h's order (every level gives the portable bits) */
static inline float qdot_hsum8(const float a[8])
{
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

#if QDOT_X86
#define QINLINE static inline __attribute__((always_inline))
#define QUNROLL _Pragma("GCC unroll 8")

/* qdot_matmul for one level (its arguments and contract): qdot_simd.inc's Q(matmul) */
void qdot_matmul_avx2(enum gguf_dtype t, const void *w, int64_t k, int64_t r0, int64_t r1,
		      const void *qx, size_t ldq, int32_t n_tok, float *y, int64_t ldy);
void qdot_matmul_avxvnni(enum gguf_dtype t, const void *w, int64_t k, int64_t r0, int64_t r1,
			 const void *qx, size_t ldq, int32_t n_tok, float *y, int64_t ldy);
void qdot_matmul_avx512vnni(enum gguf_dtype t, const void *w, int64_t k, int64_t r0, int64_t r1,
			    const void *qx, size_t ldq, int32_t n_tok, float *y, int64_t ldy);
#endif

#endif
