/* qdot_avx2: qdot's vector level for AVX2 (+ FMA, F16C): int8 lane sums by maddubs + madd.
 * qdot_simd.inc's body compiled for this instruction set alone (a file of its own, so that
 * the levels build side by side); qdot.c dispatches to it (qdot_level.h). */
#include "cpu/qdot_level.h"

#if QDOT_X86

/* AVX2: the eight 4-byte lane sums of u8 a times s8 b through 16-bit pair sums (which
 * cannot saturate: |a| <= 128, |b| <= 127) */
#define QTARGET __attribute__((target("avx2,fma,f16c")))
QINLINE QTARGET __m256i lanes_avx2(__m256i a, __m256i b)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}
/* acc + the int32 pair sums of int16 a * b (exact: the K-quants' |a| <= 16002, |b| <= 4096) */
QINLINE QTARGET __m256i wacc_avx2(__m256i acc, __m256i a, __m256i b)
{
	return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#define Q_LANES lanes_avx2
#define Q_WACC	wacc_avx2
#define Q(name) name##_avx2
#include "cpu/qdot_simd.inc"

#endif /* QDOT_X86 */
