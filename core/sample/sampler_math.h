/* sampler_math: the arithmetic behind every sampling decision, shared bit for bit by the
 * CPU sampler (sampler.c) and the CUDA sampler (gpu/sample.cu), so that both draw the
 * same token from the same logits and the same uniform u.
 *
 * Why not expf and double sums: CUDA's expf differs from glibc's in the last bits, and a
 * double sum depends on its order (sequential on the CPU, a tree on the GPU), so two
 * correct implementations would disagree whenever u * total falls near a cumulative
 * boundary. Here instead:
 *  - e_i = sampler_expf(v_i - max): only float multiplies and adds, each its own
 *    statement (so no compiler fuses them into an FMA: C11 mode contracts nothing, clang
 *    contracts only within one expression) and __fmul_rn / __fadd_rn on the device;
 *    identical results wherever IEEE fp32 is.
 *  - w_i = sampler_weight(e_i) = floor(e_i * 2^32), an integer in [0, 2^32]: masses are
 *    uint64 sums of weights, exact in any order (< 2^63 for any int32 vocabulary). A
 *    token whose e < 2^-32 (probability below ~2.3e-10 of the best one) weighs 0 and is
 *    never drawn.
 *  - thresholds are one double product of such a sum ((double)top_p * (double)W,
 *    (double)u * (double)total), compared with (double)cum: the same operations on both.
 *
 * Include with SAMPLER_MATH_DEVICE defined (gpu/sample.cu) for __device__ functions.
 */
#ifndef BG_SAMPLER_MATH_H
#define BG_SAMPLER_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef SAMPLER_MATH_DEVICE
#define SAMPLER_MATH_FN	  static __device__ __forceinline__
#define SAMPLER_MUL(a, b) __fmul_rn((a), (b))
#define SAMPLER_ADD(a, b) __fadd_rn((a), (b))
#else
#define SAMPLER_MATH_FN	  static inline
#define SAMPLER_MUL(a, b) ((a) * (b))
#define SAMPLER_ADD(a, b) ((a) + (b))
#endif

#define SAMPLER_WEIGHT_ONE 4294967296.0f /* 2^32: the weight of e == 1 (the best token) */

/* sampler_expf's constants and steps, named once: sampler_expf below and the log-sum-exp's
 * vector form (sampler.c, 16 lanes at a time) take them from here, so the two stay the
 * same function bit for bit (test_sampler checks it); the CUDA sampler (gpu/sample.cu)
 * calls sampler_expf itself. */
#define SAMPLER_EXP_LOG2E  1.44269504f		  /* 1 / ln 2 */
#define SAMPLER_EXP_LN2_HI 0.693145751953125f	  /* ln 2 to 16 significant bits */
#define SAMPLER_EXP_LN2_LO 1.428606765330187e-06f /* ln 2 - SAMPLER_EXP_LN2_HI */
#define SAMPLER_EXP_XMIN   (-87.0f)		  /* exp(x) is 0 for x <= this */
#define SAMPLER_EXP_XMAX   88.0f		  /* and +inf above this */

/* The steps below work on any lane type that SAMPLER_MUL and SAMPLER_ADD apply to (a
 * float; on the host also a GCC vector of floats, a scalar operand taken for every lane),
 * each multiply and add its own statement (see the head of this file). */

/* r = x - n ln 2 in two steps, high part first (Cody-Waite); tmp: scratch of the type. */
#define SAMPLER_EXP_REDUCE(r, x, n, tmp)                                                           \
	do {                                                                                       \
		(tmp) = SAMPLER_MUL((n), SAMPLER_EXP_LN2_HI);                                      \
		(r) = SAMPLER_ADD((x), -(tmp));                                                    \
		(tmp) = SAMPLER_MUL((n), SAMPLER_EXP_LN2_LO);                                      \
		(r) = SAMPLER_ADD((r), -(tmp));                                                    \
	} while (0)

/* p = exp(r)'s degree-7 Taylor polynomial at 0, by Horner from 1/7!. */
#define SAMPLER_EXP_POLY(p, r)                                                                     \
	do {                                                                                       \
		(p) = SAMPLER_MUL(1.0f / 5040, (r));                                               \
		(p) = SAMPLER_ADD((p), 1.0f / 720);                                                \
		(p) = SAMPLER_MUL((p), (r));                                                       \
		(p) = SAMPLER_ADD((p), 1.0f / 120);                                                \
		(p) = SAMPLER_MUL((p), (r));                                                       \
		(p) = SAMPLER_ADD((p), 1.0f / 24);                                                 \
		(p) = SAMPLER_MUL((p), (r));                                                       \
		(p) = SAMPLER_ADD((p), 1.0f / 6);                                                  \
		(p) = SAMPLER_MUL((p), (r));                                                       \
		(p) = SAMPLER_ADD((p), 0.5f);                                                      \
		(p) = SAMPLER_MUL((p), (r));                                                       \
		(p) = SAMPLER_ADD((p), 1.0f);                                                      \
		(p) = SAMPLER_MUL((p), (r));                                                       \
		(p) = SAMPLER_ADD((p), 1.0f);                                                      \
	} while (0)

/* exp(x) in fp32 within ~2 ulp, the same bits on every IEEE machine: 0 below -87 and
 * for -inf, +inf above 88, NaN for NaN, exactly 1 for 0. Cody-Waite reduction by ln 2
 * (ln2_hi has 16 significant bits, so n * ln2_hi is exact), a degree-7 Taylor polynomial
 * on |r| <= 0.347 (truncation < 2^-27 relative), and the exponent set by its bits. */
SAMPLER_MATH_FN float sampler_expf(float x)
{
	if (!(x > SAMPLER_EXP_XMIN))
		return x != x ? x : 0.0f;
	if (x > SAMPLER_EXP_XMAX)
		return INFINITY;
	float t = SAMPLER_MUL(x, SAMPLER_EXP_LOG2E);
	float n = rintf(t);
	float r, p, tmp;
	SAMPLER_EXP_REDUCE(r, x, n, tmp);
	SAMPLER_EXP_POLY(p, r);
	uint32_t bits = (uint32_t)((int32_t)n + 127) << 23; /* n in [-126, 127] */
	float s;
	memcpy(&s, &bits, sizeof s);
	return SAMPLER_MUL(p, s);
}

/* floor(e * 2^32) for e in [0, 1]; 0 for NaN and e <= 0; 2^32 for e >= 1. */
SAMPLER_MATH_FN uint64_t sampler_weight(float e)
{
	if (!(e > 0.0f))
		return 0;
	if (e >= 1.0f)
		return (uint64_t)1 << 32;
	return (uint64_t)SAMPLER_MUL(e, SAMPLER_WEIGHT_ONE);
}

#endif
