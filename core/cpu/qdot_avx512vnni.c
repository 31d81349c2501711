/* qdot_avx512vnni: qdot's vector level for AVX-512 VNNI with VL and BW (Ice Lake,
 * Sapphire Rapids, Zen 4): int8 lane sums by dpbusd, Q8_0 on 512-bit tiles.
 * qdot_simd.inc's body compiled for this instruction set alone (a file of its own, so that
 * the levels build side by side); qdot.c dispatches to it (qdot_level.h). */
#include "cpu/qdot_level.h"

#if QDOT_X86

#define QTARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
QINLINE QTARGET __m256i lanes_avx512vnni(__m256i a, __m256i b)
{
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b);
}
QINLINE QTARGET __m256i wacc_avx512vnni(__m256i acc, __m256i a, __m256i b)
{
	return _mm256_dpwssd_epi32(acc, a, b);
}
#define Q_LANES	 lanes_avx512vnni
#define Q_WACC	 wacc_avx512vnni
#define Q_DPBUSD _mm256_dpbusd_epi32
#define Q8_NR	 4 /* 32 vector registers (AVX-512VL) */
#define Q8_DR	 8
#define Q8_ZMM	 1 /* 512-bit tiles for Q8_0 */
#define Q(name)	 name##_avx512vnni
#include "cpu/qdot_simd.inc"

#endif /* QDOT_X86 */
