/* cpu_kernels: see cpu_kernels.h for the summation-order invariant.
 *
 * The vector levels share one body, cpu_kernels_simd.inc, included once per instruction
 * set below its few intrinsics (loads, FMA, horizontal sum) and compiled with that
 * set's target attribute. The body is specialized by the compiler for every weight type
 * and tile shape (rows x tokens) through constant arguments. A tile keeps one
 * accumulator per (row, token) pair, so the arithmetic of each dot product is the same
 * in every tile shape.
 */
#include "cpu/cpu_kernels.h"

#include <string.h>

#include "cpufeat.h"
#include "model/half.h"
#include "model/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPUK_X86 1
#include <immintrin.h>
#else
#define CPUK_X86 0
#endif

#define INLINE static inline __attribute__((always_inline))
/* tiles must live in registers: unroll the row and token loops fully */
#define UNROLL	 _Pragma("GCC unroll 8")
#define UNROLL_K _Pragma("GCC unroll 4")

size_t cpuk_row_bytes(enum gguf_dtype type, int64_t k)
{
	return (size_t)gguf_row_bytes(type, (uint64_t)k);
}

/* One weight element as fp32 (scalar path and vector tails). */
INLINE float w_elem(enum gguf_dtype type, const void *row, int64_t i)
{
	switch (type) {
	case GGUF_DTYPE_F32: return ((const float *)row)[i];
	case GGUF_DTYPE_F16: return half_f16_to_f32(((const uint16_t *)row)[i]);
	case GGUF_DTYPE_BF16: return half_bf16_to_f32(((const uint16_t *)row)[i]);
	case GGUF_DTYPE_Q8_0: {
		const struct cpuk_q8_0 *b = (const struct cpuk_q8_0 *)row + i / 32;
		return half_f16_to_f32(b->d) * (float)b->qs[i % 32];
	}
	default: break; /* the other block types go through matmul_deq */
	}
	return 0.0f;
}

void cpuk_dequant_row(enum gguf_dtype type, const void *row, int64_t k, float *out)
{
	quant_dequant(type, row, out, k);
}

/* The block types other than Q8_0 are dequantized DQ_C elements (a multiple of every
 * block size) at a time, for up to DQ_T tokens (see matmul_deq). */
#define DQ_C 256
#define DQ_T 32

static bool deq_type(enum gguf_dtype type)
{
	return type != GGUF_DTYPE_Q8_0 && quant_is_quantized(type);
}

#ifndef CPUK_ACT_ROUND
#define CPUK_ACT_ROUND 1
#endif

/* out[0, n) = the activations x[0, n) the block types multiply with (quant_round_act:
 * llama.cpp's 8-bit blocks); n is a whole number of blocks */
static void act_chunk(enum gguf_dtype type, const float *x, float *out, int64_t n)
{
	if (CPUK_ACT_ROUND)
		quant_round_act(type, x, out, n);
	else
		memcpy(out, x, sizeof(float) * (size_t)n);
}

/* ---- scalar: 8 emulated lanes, fused multiply-add via fmaf ---- */

#define SC_W 8

INLINE float scalar_dot(enum gguf_dtype type, const void *row, const float *x, int64_t k)
{
	float acc[SC_W] = {0};
	int64_t kv = k - k % SC_W;
	for (int64_t i = 0; i < kv; i += SC_W)
		for (int j = 0; j < SC_W; j++)
			acc[j] = __builtin_fmaf(w_elem(type, row, i + j), x[i + j], acc[j]);
	for (int64_t i = kv; i < k; i++) /* tail: the lanes a zero-padded step would use */
		acc[i - kv] = __builtin_fmaf(w_elem(type, row, i), x[i], acc[i - kv]);
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* The scalar level's matmul_deq: the same 8-lane chains as scalar_dot over the
 * dequantized row, a row at a time, for DQ_T tokens per dequantization. */
static void matmul_scalar_deq(enum gguf_dtype type, const void *w, int64_t k, int64_t r0,
			      int64_t r1, const float *x, int64_t ldx, int32_t n_tok, float *y,
			      int64_t ldy)
{
	size_t rb = cpuk_row_bytes(type, k);
	float wbuf[DQ_C], xq[DQ_C], acc[DQ_T][SC_W];
	for (int32_t t0 = 0; t0 < n_tok; t0 += DQ_T) {
		int nt = n_tok - t0 < DQ_T ? (int)(n_tok - t0) : DQ_T;
		for (int64_t r = r0; r < r1; r++) {
			memset(acc, 0, sizeof acc);
			for (int64_t c0 = 0; c0 < k; c0 += DQ_C) {
				int64_t n = k - c0 < DQ_C ? k - c0 : DQ_C;
				quant_dequant(type,
					      (const char *)w + (size_t)r * rb + cpuk_row_bytes(type, c0),
					      wbuf, n);
				for (int t = 0; t < nt; t++) {
					act_chunk(type, x + (int64_t)(t0 + t) * ldx + c0, xq, n);
					for (int64_t i = 0; i < n; i += SC_W)
						for (int j = 0; j < SC_W; j++)
							acc[t][j] = __builtin_fmaf(wbuf[i + j], xq[i + j],
										   acc[t][j]);
				}
			}
			for (int t = 0; t < nt; t++) {
				const float *a = acc[t];
				y[(int64_t)(t0 + t) * ldy + r] = ((a[0] + a[4]) + (a[2] + a[6])) +
								 ((a[1] + a[5]) + (a[3] + a[7]));
			}
		}
	}
}

static void matmul_scalar(enum gguf_dtype type, const void *w, int64_t k, int64_t r0, int64_t r1,
			  const float *x, int64_t ldx, int32_t n_tok, float *y, int64_t ldy)
{
	if (deq_type(type)) {
		matmul_scalar_deq(type, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		return;
	}
	size_t rb = cpuk_row_bytes(type, k);
	for (int64_t r = r0; r < r1; r++) {
		const void *row = (const char *)w + (size_t)r * rb;
		for (int32_t t = 0; t < n_tok; t++) {
			const float *xt = x + (int64_t)t * ldx;
			float v;
			switch (type) {
			case GGUF_DTYPE_F32: v = scalar_dot(GGUF_DTYPE_F32, row, xt, k); break;
			case GGUF_DTYPE_F16: v = scalar_dot(GGUF_DTYPE_F16, row, xt, k); break;
			case GGUF_DTYPE_BF16: v = scalar_dot(GGUF_DTYPE_BF16, row, xt, k); break;
			default: v = scalar_dot(GGUF_DTYPE_Q8_0, row, xt, k); break;
			}
			y[(int64_t)t * ldy + r] = v;
		}
	}
}

/* Token blocking keeps a block of activation rows in cache while the weight rows stream
 * past; it changes only which tile a dot product is computed in, never its order. */
static int32_t token_block(int64_t k, int32_t mult)
{
	int64_t tb = (256 * 1024) / (k * 4 + 1);
	if (tb < mult)
		tb = mult;
	if (tb > 64)
		tb = 64;
	return (int32_t)(tb - tb % mult);
}

#if CPUK_X86

/* Small-batch tiles stream their weights from memory with too little arithmetic per byte
 * to hide the miss latency: with the hardware prefetcher alone, F16 matrix-vector
 * products read ~18 GB/s (F32 rows ~29 GB/s). So while a tile of NR packed rows is being
 * read, each step also prefetches the same offset NR rows further, i.e. the next tile
 * (for several token groups on one row tile only the first group's prefetches miss).
 * Prefetches never fault and change no value. Tiles that are not over packed weight rows
 * (attention) are not PACKED: no prefetch. F32 8-row tiles used to prefetch two tiles
 * ahead (~5% faster than one with the step loop not unrolled); with UNROLL_K one tile
 * ahead measured as fast or ~2% faster, and no prefetch ~7% slower. */
/* The horizontal sums of both levels halve the vector (lane j + lane j + width / 2) down
 * to 4 lanes, then add (0 + 2) + (1 + 3); written out here rather than left to the
 * compiler's reduction builtins, whose order is theirs to choose. (GCC's
 * _mm512_reduce_add_ps does the same, so results match the earlier code that used it.) */
INLINE __attribute__((target("sse3"))) float hsum_4(__m128 q)
{
	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	q = _mm_add_ss(q, _mm_movehdup_ps(q));
	return _mm_cvtss_f32(q);
}

INLINE size_t pf_off(enum gguf_dtype type, int64_t i)
{
	switch (type) {
	case GGUF_DTYPE_F32: return (size_t)i * 4;
	case GGUF_DTYPE_Q8_0: return (size_t)(i / 32) * sizeof(struct cpuk_q8_0);
	default: return (size_t)i * 2;
	}
}

/* ---- AVX2 dequantization of the Q4_K_M types and Q8_K activation rounding ----
 *
 * The same IEEE operations as quant_dequant / quant_round_act, element by element (a
 * product then a difference, never fused; the scale products computed in scalar code as
 * there), so the results are bitwise theirs: only faster. Used by both vector levels (the
 * AVX-512 level requires AVX2 too). */

#define TDQ __attribute__((target("avx2,fma,f16c")))

static TDQ void deq_q4_k_avx2(const struct quant_q4_k *b, float *y)
{
	const uint8_t *q = b->qs;
	const float d = half_f16_to_f32(b->d), min = half_f16_to_f32(b->dmin);
	const __m128i lo = _mm_set1_epi8(0x0F);
	for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
		uint8_t sc, m;
		quant_scale_min_k4(is + 0, b->scales, &sc, &m);
		const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(min * m);
		quant_scale_min_k4(is + 1, b->scales, &sc, &m);
		const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(min * m);
		for (int l = 0; l < 32; l += 8) {
			__m128i v = _mm_loadl_epi64((const __m128i *)(q + l));
			__m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(v, lo)));
			__m256 h = _mm256_cvtepi32_ps(
			    _mm256_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), lo)));
			_mm256_storeu_ps(y + j + l, _mm256_sub_ps(_mm256_mul_ps(d1, a), m1));
			_mm256_storeu_ps(y + j + 32 + l, _mm256_sub_ps(_mm256_mul_ps(d2, h), m2));
		}
	}
}

static TDQ void deq_q6_k_avx2(const struct quant_q6_k *b, float *y)
{
	const float d = half_f16_to_f32(b->d);
	const uint8_t *ql = b->ql, *qh = b->qh;
	const int8_t *sc = b->scales;
	const __m128i lo = _mm_set1_epi8(0x0F), three = _mm_set1_epi8(3), off = _mm_set1_epi8(32);
	for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
		for (int l = 0; l < 32; l += 8) {
			const int is = l / 16;
			__m128i a = _mm_loadl_epi64((const __m128i *)(ql + l));
			__m128i c = _mm_loadl_epi64((const __m128i *)(ql + l + 32));
			__m128i h = _mm_loadl_epi64((const __m128i *)(qh + l));
			__m128i q1 = _mm_or_si128(_mm_and_si128(a, lo),
						  _mm_slli_epi16(_mm_and_si128(h, three), 4));
			__m128i q2 = _mm_or_si128(_mm_and_si128(c, lo),
						  _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 2), three), 4));
			__m128i q3 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), lo),
						  _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 4), three), 4));
			__m128i q4 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(c, 4), lo),
						  _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 6), three), 4));
			__m128i qs[4] = {q1, q2, q3, q4};
			for (int u = 0; u < 4; u++) {
				__m128i s8 = _mm_sub_epi8(qs[u], off);
				__m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8));
				__m256 ds = _mm256_set1_ps(d * sc[is + 2 * u]);
				_mm256_storeu_ps(y + l + 32 * u, _mm256_mul_ps(ds, f));
			}
		}
	}
}

/* Q8_K rounding of 256 activations (quant_round_act's round_q8_k) */
static TDQ void round_q8_k_avx2(const float *x, float *out)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 mx = _mm256_setzero_ps();
	for (int j = 0; j < 256; j += 8)
		/* max_ps returns its second operand where either is NaN: NaNs are skipped,
		 * as the scalar comparison skips them */
		mx = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), mx);
	float t[8];
	_mm256_storeu_ps(t, mx);
	float amax = 0.0f;
	for (int j = 0; j < 8; j++)
		amax = t[j] > amax ? t[j] : amax;
	if (amax == 0.0f) {
		memset(out, 0, 256 * sizeof(float));
		return;
	}
	float max = 0.0f;
	for (int j = 0; j < 256; j++)
		if (__builtin_fabsf(x[j]) == amax) {
			max = x[j];
			break;
		}
	const float iscale = -127.f / max, d = 1 / iscale;
	const __m256 is = _mm256_set1_ps(iscale), dv = _mm256_set1_ps(d), magic = _mm256_set1_ps(12582912.f);
	const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000),
		      top = _mm256_set1_epi32(127);
	for (int j = 0; j < 256; j += 8) {
		__m256 v = _mm256_add_ps(_mm256_mul_ps(is, _mm256_loadu_ps(x + j)), magic);
		__m256i i = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mant), bias);
		i = _mm256_min_epi32(i, top);
		_mm256_storeu_ps(out + j, _mm256_mul_ps(dv, _mm256_cvtepi32_ps(i)));
	}
}

/* dst[0, n) = quant_dequant(type, src, ., n), bitwise, faster for Q4_K and Q6_K */
static TDQ void deq_fast(enum gguf_dtype type, const void *src, float *dst, int64_t n)
{
	if (type == GGUF_DTYPE_Q4_K)
		for (int64_t i = 0; i < n; i += 256)
			deq_q4_k_avx2((const struct quant_q4_k *)src + i / 256, dst + i);
	else if (type == GGUF_DTYPE_Q6_K)
		for (int64_t i = 0; i < n; i += 256)
			deq_q6_k_avx2((const struct quant_q6_k *)src + i / 256, dst + i);
	else
		quant_dequant(type, src, dst, n);
}

/* act_chunk, bitwise, faster for the Q8_K types */
static TDQ void act_fast(enum gguf_dtype type, const float *x, float *out, int64_t n)
{
	if (CPUK_ACT_ROUND && quant_block_elems(type) == 256)
		for (int64_t i = 0; i < n; i += 256)
			round_q8_k_avx2(x + i, out + i);
	else
		act_chunk(type, x, out, n);
}

/* ---- AVX-512F: 16 lanes, tiles of 4 rows x 4 tokens or 8 rows x 1 token ---- */

#define T512 __attribute__((target("avx512f")))

INLINE T512 __m512 ldw_512(enum gguf_dtype type, const void *row, int64_t i)
{
	switch (type) {
	case GGUF_DTYPE_F32: return _mm512_loadu_ps((const float *)row + i);
	case GGUF_DTYPE_F16:
		return _mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
	case GGUF_DTYPE_BF16: {
		__m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	case GGUF_DTYPE_Q8_0: {
		const struct cpuk_q8_0 *b = (const struct cpuk_q8_0 *)row + i / 32;
		__m128i q = _mm_loadu_si128((const __m128i *)(b->qs + (i % 32)));
		__m512 qf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
		/* hardware fp16 -> fp32 is exact, as half_f16_to_f32 is: same bits */
		__m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)b->d));
		return _mm512_mul_ps(qf, d);
	}
	default: break; /* the other block types go through matmul_deq */
	}
	return _mm512_setzero_ps();
}

INLINE T512 float hsum_512(__m512 v)
{
	__m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
	return hsum_4(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

#define VEC	__m512
#define VW	16
#define VNT	4
#define VTARGET T512
#define V_ZERO	_mm512_setzero_ps
#define V_LD	_mm512_loadu_ps
#define V_ST	_mm512_storeu_ps
#define V_SET1	_mm512_set1_ps
#define V_FMADD _mm512_fmadd_ps
#define V_LDW	ldw_512
#define V_HSUM	hsum_512
#define V(name) name##_512
#include "cpu/cpu_kernels_simd.inc"

/* ---- AVX2 + FMA + F16C: 8 lanes, tiles of 4 rows x 2 tokens or 8 rows x 1 token ---- */

#define T256 __attribute__((target("avx2,fma,f16c")))

INLINE T256 __m256 ldw_256(enum gguf_dtype type, const void *row, int64_t i)
{
	switch (type) {
	case GGUF_DTYPE_F32: return _mm256_loadu_ps((const float *)row + i);
	case GGUF_DTYPE_F16:
		return _mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
	case GGUF_DTYPE_BF16: {
		__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	}
	case GGUF_DTYPE_Q8_0: {
		const struct cpuk_q8_0 *b = (const struct cpuk_q8_0 *)row + i / 32;
		__m128i q = _mm_loadl_epi64((const __m128i *)(b->qs + (i % 32)));
		__m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
		__m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)b->d));
		return _mm256_mul_ps(qf, d);
	}
	default: break; /* the other block types go through matmul_deq */
	}
	return _mm256_setzero_ps();
}

INLINE T256 float hsum_256(__m256 v)
{
	return hsum_4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

#define VEC	__m256
#define VW	8
#define VNT	2
#define VTARGET T256
#define V_ZERO	_mm256_setzero_ps
#define V_LD	_mm256_loadu_ps
#define V_ST	_mm256_storeu_ps
#define V_SET1	_mm256_set1_ps
#define V_FMADD _mm256_fmadd_ps
#define V_LDW	ldw_256
#define V_HSUM	hsum_256
#define V(name) name##_256
#include "cpu/cpu_kernels_simd.inc"

#endif /* CPUK_X86 */

/* ---- dispatch ---- */

bool cpuk_supported(enum cpuk_level level)
{
	switch (level) {
	case CPUK_SCALAR: return true;
#if CPUK_X86
	case CPUK_AVX2: return cpufeat_get().avx2_fma_f16c;
	case CPUK_AVX512: { /* AVX2 too: the block types' dequantization (deq_fast) uses it */
		struct cpufeat f = cpufeat_get();
		return f.avx512f && f.avx2_fma_f16c;
	}
#else
	default: return false;
#endif
	}
	return false;
}

enum cpuk_level cpuk_detect(void)
{
	if (cpuk_supported(CPUK_AVX512))
		return CPUK_AVX512;
	if (cpuk_supported(CPUK_AVX2))
		return CPUK_AVX2;
	return CPUK_SCALAR;
}

const char *cpuk_level_name(enum cpuk_level level)
{
	switch (level) {
	case CPUK_SCALAR: return "scalar";
	case CPUK_AVX2: return "avx2";
	case CPUK_AVX512: return "avx512";
	}
	return "?";
}

void cpuk_matmul(enum cpuk_level level, enum gguf_dtype type, const void *w, int64_t k, int64_t r0,
		 int64_t r1, const float *x, int64_t ldx, int32_t n_tok, float *y, int64_t ldy)
{
#if CPUK_X86
	if (level == CPUK_AVX512) {
		matmul_512(type, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		return;
	}
	if (level == CPUK_AVX2) {
		matmul_256(type, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		return;
	}
#endif
	(void)level;
	matmul_scalar(type, w, k, r0, r1, x, ldx, n_tok, y, ldy);
}

float cpuk_dot_f32(enum cpuk_level level, const float *a, const float *b, int64_t n)
{
#if CPUK_X86
	if (level == CPUK_AVX512)
		return dot_512(a, b, n);
	if (level == CPUK_AVX2)
		return dot_256(a, b, n);
#endif
	(void)level;
	return scalar_dot(GGUF_DTYPE_F32, a, b, n);
}

void cpuk_axpy(enum cpuk_level level, int64_t n, float a, const float *x, float *y)
{
#if CPUK_X86
	if (level == CPUK_AVX512) {
		axpy_512(n, a, x, y);
		return;
	}
	if (level == CPUK_AVX2) {
		axpy_256(n, a, x, y);
		return;
	}
#endif
	(void)level;
	for (int64_t i = 0; i < n; i++)
		y[i] = __builtin_fmaf(a, x[i], y[i]);
}

void cpuk_dot_f32_rows(enum cpuk_level level, const float *a, const float *b, int64_t ldb,
		       int32_t n_rows, int64_t n, float *out)
{
#if CPUK_X86
	if (level == CPUK_AVX512) {
		dot_rows_512(a, b, ldb, n_rows, n, out);
		return;
	}
	if (level == CPUK_AVX2) {
		dot_rows_256(a, b, ldb, n_rows, n, out);
		return;
	}
#endif
	(void)level;
	for (int32_t j = 0; j < n_rows; j++)
		out[j] = scalar_dot(GGUF_DTYPE_F32, a, b + (int64_t)j * ldb, n);
}

void cpuk_axpy_rows(enum cpuk_level level, int64_t n, const float *a, int32_t n_rows,
		    const float *x, int64_t ldx, float *y)
{
#if CPUK_X86
	if (level == CPUK_AVX512) {
		axpy_rows_512(n, a, n_rows, x, ldx, y);
		return;
	}
	if (level == CPUK_AVX2) {
		axpy_rows_256(n, a, n_rows, x, ldx, y);
		return;
	}
#endif
	(void)level;
	for (int32_t j = 0; j < n_rows; j++)
		for (int64_t i = 0; i < n; i++)
			y[i] = __builtin_fmaf(a[j], x[(int64_t)j * ldx + i], y[i]);
}
