/* qdot: see qdot.h for the arithmetic every instruction set reproduces.
 *
 * The portable code states it plainly on model/quant's integer views of the blocks. The
 * vector levels share one body, qdot_simd.inc, compiled once per instruction set in its own
 * file (qdot_avx2.c, qdot_avxvnni.c, qdot_avx512vnni.c: they build side by side); they
 * differ only in how eight 4-element int8 lane sums are formed (AVX2's maddubs + madd, or
 * one VNNI dpbusd), which is exact either way.
 */
#include "cpu/qdot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/qdot_level.h"
#include "cpufeat.h"
#include "model/half.h"
#include "model/quant.h"

/* ---- types ---- */

bool qdot_handles(enum gguf_dtype t)
{
	return quant_is_quantized(t);
}

size_t qdot_act_row_bytes(enum gguf_dtype t, int64_t k)
{
	if (qdot_is_k(t))
		return (size_t)(k / 256) * sizeof(struct qdot_a256);
	return (size_t)(k / 32) * sizeof(struct qdot_a32);
}

/* ---- activation quantization (llama.cpp's quantize_row_q8_0 / _q8_1 / _q8_K) ---- */

/* ggml's nearest_int (round half to even for |f| < 2^22), kept in [-127, 127]: finite
 * activations never leave it, and non-finite ones must not make an int8 that could
 * saturate the vector code's 16-bit pair sums. */
static int near127(float f)
{
	float v = f + 12582912.f;
	int32_t i;
	memcpy(&i, &v, sizeof i);
	i = (i & 0x007fffff) - 0x00400000;
	return i < -127 ? -127 : i > 127 ? 127 : i;
}

/* ggml-cpu's x86 quantize_row_q8_0 / q8_1 (AVX path): d = amax / 127 stored as fp16, q =
 * round(x * 127 / amax); Q8_1's s = fp16(d * sum q) with the unrounded d */
static void quant_a32(const float *x, struct qdot_a32 *y, bool with_sum)
{
	float amax = 0.0f;
	for (int j = 0; j < 32; j++) {
		float a = fabsf(x[j]);
		amax = a > amax ? a : amax;
	}
	const float d = amax / 127.f;
	const float id = amax != 0.0f ? 127.f / amax : 0.0f;
	int sum = 0;
	for (int j = 0; j < 32; j++) {
		y->qs[j] = (int8_t)near127(x[j] * id);
		sum += y->qs[j];
	}
	y->d = half_f16_to_f32(half_f32_to_f16(d));
	y->s = with_sum ? half_f16_to_f32(half_f32_to_f16(d * (float)sum)) : 0.0f;
}

/* quantize_row_q8_K_ref: the element of largest magnitude maps to -127 */
static void quant_a256(const float *x, struct qdot_a256 *y)
{
	const float max = quant_max_magnitude(x, 256);
	if (max == 0.0f) {
		memset(y, 0, sizeof *y);
		return;
	}
	const float iscale = -127.f / max;
	for (int j = 0; j < 256; j++)
		y->qs[j] = (int8_t)near127(iscale * x[j]);
	for (int g = 0; g < 16; g++) {
		int s = 0;
		for (int i = 0; i < 16; i++)
			s += y->qs[16 * g + i];
		y->bsums[g] = (int16_t)s;
	}
	y->d = 1 / iscale;
}

void qdot_quantize_row(enum gguf_dtype t, const float *x, int64_t k, void *out)
{
	if (qdot_is_k(t)) {
		struct qdot_a256 *y = out;
		for (int64_t i = 0; i < k; i += 256)
			quant_a256(x + i, y++);
	} else {
		struct qdot_a32 *y = out;
		bool with_sum = quant_has_offset(t);
		for (int64_t i = 0; i < k; i += 32)
			quant_a32(x + i, y++, with_sum);
	}
}

/* ---- activation quantization, AVX2: the same bytes as the code above ----
 *
 * Decode quantizes every matmul's input between two parallel dispatches (2048-5632
 * elements, four times per layer; the CPU backend cuts it into block ranges run on every
 * thread as the dispatch's first tasks), so its speed is on the critical path. Lane
 * by lane these are the scalar steps: the block maximum of |x| (a maximum is exact in any
 * order; MAXPS(a, m) is `a > m ? a : m`, so NaNs are skipped as above), then x * id (or
 * iscale * x) rounded to float, plus 2^23 + 2^22, the mantissa bits minus 2^22, clamped
 * to [-127, 127]; integer sums are exact in any order. */
#if QDOT_X86
#define QQ_TARGET __attribute__((target("avx2,fma,f16c")))

QQ_TARGET static inline float qq_hmax(__m256 m)
{
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ps(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

QQ_TARGET static inline int32_t qq_hsum(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
	return _mm_cvtsi128_si32(s);
}

/* near127(v * scale) for the 8 lanes of v */
QQ_TARGET static inline __m256i qq_round(__m256 v, __m256 scale)
{
	const __m256 f = _mm256_add_ps(_mm256_mul_ps(v, scale), _mm256_set1_ps(12582912.f));
	__m256i i = _mm256_sub_epi32(
	    _mm256_and_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x007fffff)),
	    _mm256_set1_epi32(0x00400000));
	i = _mm256_max_epi32(i, _mm256_set1_epi32(-127));
	return _mm256_min_epi32(i, _mm256_set1_epi32(127));
}

/* 32 int32 lanes (each in [-127, 127]) as 32 int8 in order */
QQ_TARGET static inline void qq_store32(int8_t *dst, const __m256i q[4])
{
	const __m256i a = _mm256_packs_epi32(q[0], q[1]), b = _mm256_packs_epi32(q[2], q[3]);
	const __m256i c = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b),
						      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	_mm256_storeu_si256((__m256i *)dst, c);
}

QQ_TARGET static void quant_a32_avx2(const float *x, struct qdot_a32 *y, bool with_sum)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256 v[4], m = _mm256_setzero_ps();
	for (int i = 0; i < 4; i++) {
		v[i] = _mm256_loadu_ps(x + 8 * i);
		m = _mm256_max_ps(_mm256_and_ps(v[i], absmask), m);
	}
	const float amax = qq_hmax(m);
	const float d = amax / 127.f;
	const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
	__m256i q[4], sum = _mm256_setzero_si256();
	for (int i = 0; i < 4; i++) {
		q[i] = qq_round(v[i], id);
		sum = _mm256_add_epi32(sum, q[i]);
	}
	qq_store32(y->qs, q);
	y->d = half_f16_to_f32(half_f32_to_f16(d));
	y->s = with_sum ? half_f16_to_f32(half_f32_to_f16(d * (float)qq_hsum(sum))) : 0.0f;
}

QQ_TARGET static void quant_a256_avx2(const float *x, struct qdot_a256 *y)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256 m = _mm256_setzero_ps();
	for (int i = 0; i < 256; i += 8)
		m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), m);
	const float amax = qq_hmax(m);
	if (amax == 0.0f) {
		memset(y, 0, sizeof *y);
		return;
	}
	/* quant_max_magnitude's choice: the first element of that magnitude, with its sign */
	float max = 0.0f;
	for (int j = 0; j < 256; j++)
		if (fabsf(x[j]) == amax) {
			max = x[j];
			break;
		}
	const float iscale = -127.f / max;
	const __m256 sc = _mm256_set1_ps(iscale);
	for (int c = 0; c < 8; c++) {
		__m256i q[4];
		for (int i = 0; i < 4; i++)
			q[i] = qq_round(_mm256_loadu_ps(x + 32 * c + 8 * i), sc);
		qq_store32(y->qs + 32 * c, q);
		y->bsums[2 * c] = (int16_t)qq_hsum(_mm256_add_epi32(q[0], q[1]));
		y->bsums[2 * c + 1] = (int16_t)qq_hsum(_mm256_add_epi32(q[2], q[3]));
	}
	y->d = 1 / iscale;
}
#endif

void qdot_quantize_row_isa(enum qdot_isa isa, enum gguf_dtype t, const float *x, int64_t k,
			   void *out)
{
#if QDOT_X86
	if (isa != QDOT_PORTABLE) {
		if (qdot_is_k(t)) {
			struct qdot_a256 *y = out;
			for (int64_t i = 0; i < k; i += 256)
				quant_a256_avx2(x + i, y++);
		} else {
			struct qdot_a32 *y = out;
			const bool with_sum = quant_has_offset(t);
			for (int64_t i = 0; i < k; i += 32)
				quant_a32_avx2(x + i, y++, with_sum);
		}
		return;
	}
#endif
	(void)isa;
	qdot_quantize_row(t, x, k, out);
}

/* ---- the portable arithmetic (qdot.h) ---- */

static float dot32_portable(enum gguf_dtype t, const void *wrow, const struct qdot_a32 *x,
			    int64_t nb)
{
	const size_t bb = quant_block_bytes(t);
	const bool off = quant_has_offset(t);
	float acc[8] = {0}, summs = 0.0f;
	for (int64_t ib = 0; ib < nb; ib++) {
		struct quant_ints32 w;
		quant_ints_32(t, (const char *)wrow + (size_t)ib * bb, &w);
		const float dd = w.d * x[ib].d;
		for (int l = 0; l < 8; l++) {
			int32_t s = 0;
			for (int e = 4 * l; e < 4 * l + 4; e++)
				s += (int32_t)w.q[e] * x[ib].qs[e];
			acc[l] = fmaf(dd, (float)s, acc[l]);
		}
		if (off)
			summs = summs + w.m * x[ib].s;
	}
	return off ? qdot_hsum8(acc) + summs : qdot_hsum8(acc);
}

static float dot256_portable(enum gguf_dtype t, const void *wrow, const struct qdot_a256 *x,
			     int64_t nb)
{
	const size_t bb = quant_block_bytes(t);
	const bool mins = t == GGUF_DTYPE_Q2_K || t == GGUF_DTYPE_Q4_K || t == GGUF_DTYPE_Q5_K;
	float acc = 0.0f;
	for (int64_t ib = 0; ib < nb; ib++) {
		struct quant_ints256 w;
		quant_ints_256(t, (const char *)wrow + (size_t)ib * bb, &w);
		int32_t isum = 0, summ = 0;
		for (int g = 0; g < 16; g++) {
			int32_t s = 0;
			for (int e = 16 * g; e < 16 * g + 16; e++)
				s += (int32_t)w.q[e] * x[ib].qs[e];
			isum += w.sc[g] * s;
			summ += w.mn[g] * x[ib].bsums[g];
		}
		if (mins)
			acc = acc +
			      ((w.d * x[ib].d) * (float)isum - (w.dmin * x[ib].d) * (float)summ);
		else
			acc = acc + (w.d * x[ib].d) * (float)isum;
	}
	return acc;
}

static void matmul_portable(enum gguf_dtype t, const void *w, int64_t k, int64_t r0, int64_t r1,
			    const void *qx, size_t ldq, int32_t n_tok, float *y, int64_t ldy)
{
	const size_t rb = (size_t)gguf_row_bytes(t, (uint64_t)k);
	const int64_t nb = k / quant_block_elems(t);
	for (int64_t r = r0; r < r1; r++) {
		const char *row = (const char *)w + (size_t)r * rb;
		for (int32_t tok = 0; tok < n_tok; tok++) {
			const void *xr = (const char *)qx + (size_t)tok * ldq;
			y[(int64_t)tok * ldy + r] = qdot_is_k(t) ? dot256_portable(t, row, xr, nb)
								 : dot32_portable(t, row, xr, nb);
		}
	}
}

/* ---- dispatch ---- */

bool qdot_supported(enum qdot_isa isa)
{
	struct cpufeat f = cpufeat_get();
	switch (isa) {
	case QDOT_PORTABLE: return true;
	case QDOT_AVX2: return QDOT_X86 && f.avx2_fma_f16c;
	case QDOT_AVXVNNI: return QDOT_X86 && f.avxvnni;
	case QDOT_AVX512VNNI: return QDOT_X86 && f.avx512vnni_bw_vl;
	}
	return false;
}

enum qdot_isa qdot_detect(void)
{
	static const enum qdot_isa pref[] = {QDOT_AVX512VNNI, QDOT_AVXVNNI, QDOT_AVX2};
	for (size_t i = 0; i < sizeof pref / sizeof pref[0]; i++)
		if (qdot_supported(pref[i]))
			return pref[i];
	return QDOT_PORTABLE;
}

const char *qdot_isa_name(enum qdot_isa isa)
{
	switch (isa) {
	case QDOT_PORTABLE: return "portable";
	case QDOT_AVX2: return "avx2";
	case QDOT_AVXVNNI: return "avxvnni";
	case QDOT_AVX512VNNI: return "avx512vnni";
	}
	return "?";
}

void qdot_matmul(enum qdot_isa isa, enum gguf_dtype t, const void *w, int64_t k, int64_t r0,
		 int64_t r1, const void *qx, size_t ldq, int32_t n_tok, float *y, int64_t ldy)
{
	if (!qdot_handles(t) || k % quant_block_elems(t) != 0)
		abort(); /* programmer error: see the contract */
#if QDOT_X86
	switch (isa) {
	case QDOT_AVX2: qdot_matmul_avx2(t, w, k, r0, r1, qx, ldq, n_tok, y, ldy); return;
	case QDOT_AVXVNNI: qdot_matmul_avxvnni(t, w, k, r0, r1, qx, ldq, n_tok, y, ldy); return;
	case QDOT_AVX512VNNI:
		qdot_matmul_avx512vnni(t, w, k, r0, r1, qx, ldq, n_tok, y, ldy);
		return;
	case QDOT_PORTABLE: break;
	}
#endif
	(void)isa;
	matmul_portable(t, w, k, r0, r1, qx, ldq, n_tok, y, ldy);
}
