/* qdot_avxvnni: qdot's vector level for AVX-VNNI (256-bit: Alder Lake and later, Zen 5):
 * int8 lane sums by dpbusd.
 * qdot_simd.inc's body compiled for this instruction set alone (a file of its own, so that
 * the levels build side by side); qdot.c dispatches to it (qdot_level.h). */
#include "cpu/qdot_level.h"

#if QDOT_X86

#define QTARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
QINLINE QTARGET __m256i lanes_avxvnni(__m256i a, __m256i b)
{
	return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), a, b);
}
QINLINE QTARGET __m256i wacc_avxvnni(__m256i acc, __m256i a, __m256i b)
{
	return _mm256_dpwssd_avx_epi32(acc, a, b);
}
#define Q_LANES	 lanes_avxvnni
#define Q_WACC	 wacc_avxvnni
#define Q_DPBUSD _mm256_dpbusd_avx_epi32
#define Q8_NR	 2 /* 16 vector registers */
#define Q8_DR	 4
#define Q(name)	 name##_avxvnni
#include "cpu/qdot_simd.inc"

#endif /* QDOT_X86 */
