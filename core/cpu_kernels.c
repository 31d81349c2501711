/* cpu_kernels: see cpu_kernels.h for the summation-order invariant.
 *
 * Each level has one always-inline body, specialized by the compiler for every weight
 * type and tile shape (rows x tokens) through constant arguments. A tile keeps one
 * accumulator per (row, token) pair, so the arithmetic of each dot product is the same
 * in every tile shape.
 */
#include "cpu_kernels.h"

#include <string.h>

#include "half.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPUK_X86 1
#include <immintrin.h>
#else
#define CPUK_X86 0
#endif

#define INLINE static inline __attribute__((always_inline))
/* tiles must live in registers: unroll the row and token loops fully */
#define UNROLL _Pragma("GCC unroll 8")

size_t cpuk_row_bytes(enum gguf_dtype type, int64_t k)
{
	switch (type) {
	case GGUF_DTYPE_F32: return (size_t)k * 4;
	case GGUF_DTYPE_F16:
	case GGUF_DTYPE_BF16: return (size_t)k * 2;
	case GGUF_DTYPE_Q8_0: return (size_t)(k / 32) * sizeof(struct cpuk_q8_0);
	}
	return 0;
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
	}
	return 0.0f;
}

void cpuk_dequant_row(enum gguf_dtype type, const void *row, int64_t k, float *out)
{
	for (int64_t i = 0; i < k; i++)
		out[i] = w_elem(type, row, i);
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

static void matmul_scalar(enum gguf_dtype type, const void *w, int64_t k, int64_t r0, int64_t r1,
			  const float *x, int64_t ldx, int32_t n_tok, float *y, int64_t ldy)
{
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
 * (a distance of one tile; for several token groups on one row tile only the first
 * group's prefetches miss). Prefetches never fault and change no value. Tiles that are
 * not over packed weight rows (attention) pass pf_dist 0: no prefetch. */
INLINE size_t pf_off(enum gguf_dtype type, int64_t i)
{
	switch (type) {
	case GGUF_DTYPE_F32: return (size_t)i * 4;
	case GGUF_DTYPE_Q8_0: return (size_t)(i / 32) * sizeof(struct cpuk_q8_0);
	default: return (size_t)i * 2;
	}
}

/* ---- AVX-512F: 16 lanes, tiles of 4 rows x 4 tokens or 8 rows x 1 token ---- */

#define T512 __attribute__((target("avx512f")))

INLINE T512 __m512 ld512(enum gguf_dtype type, const void *row, int64_t i)
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
	}
	return _mm512_setzero_ps();
}

INLINE T512 void tile512(enum gguf_dtype type, const int NR, const int NT, const void *const *wr,
			 const float *const *xr, int64_t k, size_t pf_dist, float out[8][4])
{
	__m512 acc[8][4];
	UNROLL
	for (int r = 0; r < NR; r++)
		UNROLL
	for (int t = 0; t < NT; t++)
		acc[r][t] = _mm512_setzero_ps();
	int64_t kv = k - k % 16;
	for (int64_t i = 0; i < kv; i += 16) {
		__m512 xv[4];
		UNROLL
		for (int t = 0; t < NT; t++)
			xv[t] = _mm512_loadu_ps(xr[t] + i);
		if (pf_dist) /* the next tile's rows: see pf_off */
			UNROLL
		for (int r = 0; r < NR; r++)
			_mm_prefetch((const char *)wr[r] + pf_dist + pf_off(type, i), _MM_HINT_T0);
		UNROLL
		for (int r = 0; r < NR; r++) {
			__m512 wv = ld512(type, wr[r], i);
			UNROLL
			for (int t = 0; t < NT; t++)
				acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	if (kv < k) {
		float tmp[16];
		__m512 xv[4];
		UNROLL
		for (int t = 0; t < NT; t++) {
			memset(tmp, 0, sizeof tmp);
			memcpy(tmp, xr[t] + kv, (size_t)(k - kv) * sizeof(float));
			xv[t] = _mm512_loadu_ps(tmp);
		}
		UNROLL
		for (int r = 0; r < NR; r++) {
			memset(tmp, 0, sizeof tmp);
			for (int64_t i = kv; i < k; i++)
				tmp[i - kv] = w_elem(type, wr[r], i);
			__m512 wv = _mm512_loadu_ps(tmp);
			UNROLL
			for (int t = 0; t < NT; t++)
				acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	UNROLL
	for (int r = 0; r < NR; r++)
		UNROLL
	for (int t = 0; t < NT; t++)
		out[r][t] = _mm512_reduce_add_ps(acc[r][t]);
}

INLINE T512 void mm512_body(enum gguf_dtype type, const void *w, int64_t k, int64_t r0, int64_t r1,
			    const float *x, int64_t ldx, int32_t n_tok, float *y, int64_t ldy)
{
	size_t rb = cpuk_row_bytes(type, k);
	int32_t tb = token_block(k, 4);
	for (int32_t t0 = 0; t0 < n_tok; t0 += tb) {
		int32_t t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
		for (int64_t r = r0; r < r1;) {
			/* 8 rows x 1 token when the token block is 1-3 tokens (decode): 8
			 * independent FMA chains and weight streams; 4 x 4 tiles otherwise.
			 * Either way each dot product's own arithmetic is the same. */
			int nr = r1 - r >= 8 && t1 - t0 < 4 ? 8 : r1 - r >= 4 ? 4 : 1;
			const void *wr[8];
			for (int j = 0; j < nr; j++)
				wr[j] = (const char *)w + (size_t)(r + j) * rb;
			for (int32_t t = t0; t < t1;) {
				int nt = t1 - t >= 4 && nr <= 4 ? 4 : 1;
				const float *xr[4];
				for (int j = 0; j < nt; j++)
					xr[j] = x + (int64_t)(t + j) * ldx;
				float out[8][4];
				if (nr == 8) /* F32 rows: 2 tiles ahead measured ~5% faster */
					tile512(type, 8, 1, wr, xr, k,
						(type == GGUF_DTYPE_F32 ? 16 : 8) * rb, out);
				else if (nr == 4 && nt == 4)
					tile512(type, 4, 4, wr, xr, k, 4 * rb, out);
				else if (nr == 4)
					tile512(type, 4, 1, wr, xr, k, 4 * rb, out);
				else if (nt == 4)
					tile512(type, 1, 4, wr, xr, k, 1 * rb, out);
				else
					tile512(type, 1, 1, wr, xr, k, 1 * rb, out);
				for (int a = 0; a < nr; a++)
					for (int b = 0; b < nt; b++)
						y[(int64_t)(t + b) * ldy + r + a] = out[a][b];
				t += nt;
			}
			r += nr;
		}
	}
}

static T512 void matmul_avx512(enum gguf_dtype type, const void *w, int64_t k, int64_t r0,
			       int64_t r1, const float *x, int64_t ldx, int32_t n_tok, float *y,
			       int64_t ldy)
{
	switch (type) {
	case GGUF_DTYPE_F32: mm512_body(GGUF_DTYPE_F32, w, k, r0, r1, x, ldx, n_tok, y, ldy); break;
	case GGUF_DTYPE_F16: mm512_body(GGUF_DTYPE_F16, w, k, r0, r1, x, ldx, n_tok, y, ldy); break;
	case GGUF_DTYPE_BF16:
		mm512_body(GGUF_DTYPE_BF16, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		break;
	case GGUF_DTYPE_Q8_0:
		mm512_body(GGUF_DTYPE_Q8_0, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		break;
	}
}

static T512 float dot_avx512(const float *a, const float *b, int64_t n)
{
	const void *wr[1] = {a};
	const float *xr[1] = {b};
	float out[8][4];
	tile512(GGUF_DTYPE_F32, 1, 1, wr, xr, n, 0, out);
	return out[0][0];
}

/* Several key rows per tile: independent FMA chains instead of one latency-bound chain
 * per call. fma(w, x, acc) == fma(x, w, acc), so the key rows may take the weight side. */
static T512 void dot_rows_avx512(const float *a, const float *b, int64_t ldb, int32_t n_rows,
				 int64_t n, float *out)
{
	const float *xr[1] = {a};
	const void *wr[8];
	float o[8][4];
	int32_t j = 0;
	for (; j + 8 <= n_rows; j += 8) {
		for (int r = 0; r < 8; r++)
			wr[r] = b + (int64_t)(j + r) * ldb;
		tile512(GGUF_DTYPE_F32, 8, 1, wr, xr, n, 0, o);
		for (int r = 0; r < 8; r++)
			out[j + r] = o[r][0];
	}
	for (; j < n_rows; j++) {
		wr[0] = b + (int64_t)j * ldb;
		tile512(GGUF_DTYPE_F32, 1, 1, wr, xr, n, 0, o);
		out[j] = o[0][0];
	}
}

/* ---- AVX2 + FMA + F16C: 8 lanes, tiles of 4 rows x 2 tokens or 8 rows x 1 token ---- */

#define T256 __attribute__((target("avx2,fma,f16c")))

INLINE T256 __m256 ld256(enum gguf_dtype type, const void *row, int64_t i)
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
	}
	return _mm256_setzero_ps();
}

INLINE T256 float hsum256(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

INLINE T256 void tile256(enum gguf_dtype type, const int NR, const int NT, const void *const *wr,
			 const float *const *xr, int64_t k, size_t pf_dist, float out[8][4])
{
	__m256 acc[8][2];
	UNROLL
	for (int r = 0; r < NR; r++)
		UNROLL
	for (int t = 0; t < NT; t++)
		acc[r][t] = _mm256_setzero_ps();
	int64_t kv = k - k % 8;
	for (int64_t i = 0; i < kv; i += 8) {
		__m256 xv[2];
		UNROLL
		for (int t = 0; t < NT; t++)
			xv[t] = _mm256_loadu_ps(xr[t] + i);
		if (pf_dist) /* the next tile's rows: see pf_off */
			UNROLL
		for (int r = 0; r < NR; r++)
			_mm_prefetch((const char *)wr[r] + pf_dist + pf_off(type, i), _MM_HINT_T0);
		UNROLL
		for (int r = 0; r < NR; r++) {
			__m256 wv = ld256(type, wr[r], i);
			UNROLL
			for (int t = 0; t < NT; t++)
				acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	if (kv < k) {
		float tmp[8];
		__m256 xv[2];
		UNROLL
		for (int t = 0; t < NT; t++) {
			memset(tmp, 0, sizeof tmp);
			memcpy(tmp, xr[t] + kv, (size_t)(k - kv) * sizeof(float));
			xv[t] = _mm256_loadu_ps(tmp);
		}
		UNROLL
		for (int r = 0; r < NR; r++) {
			memset(tmp, 0, sizeof tmp);
			for (int64_t i = kv; i < k; i++)
				tmp[i - kv] = w_elem(type, wr[r], i);
			__m256 wv = _mm256_loadu_ps(tmp);
			UNROLL
			for (int t = 0; t < NT; t++)
				acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	UNROLL
	for (int r = 0; r < NR; r++)
		UNROLL
	for (int t = 0; t < NT; t++)
		out[r][t] = hsum256(acc[r][t]);
}

INLINE T256 void mm256_body(enum gguf_dtype type, const void *w, int64_t k, int64_t r0, int64_t r1,
			    const float *x, int64_t ldx, int32_t n_tok, float *y, int64_t ldy)
{
	size_t rb = cpuk_row_bytes(type, k);
	int32_t tb = token_block(k, 2);
	for (int32_t t0 = 0; t0 < n_tok; t0 += tb) {
		int32_t t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
		for (int64_t r = r0; r < r1;) {
			/* 8 rows x 1 token for a lone token, as in mm512_body */
			int nr = r1 - r >= 8 && t1 - t0 < 2 ? 8 : r1 - r >= 4 ? 4 : 1;
			const void *wr[8];
			for (int j = 0; j < nr; j++)
				wr[j] = (const char *)w + (size_t)(r + j) * rb;
			for (int32_t t = t0; t < t1;) {
				int nt = t1 - t >= 2 && nr <= 4 ? 2 : 1;
				const float *xr[2];
				for (int j = 0; j < nt; j++)
					xr[j] = x + (int64_t)(t + j) * ldx;
				float out[8][4];
				if (nr == 8)
					tile256(type, 8, 1, wr, xr, k, 8 * rb, out);
				else if (nr == 4 && nt == 2)
					tile256(type, 4, 2, wr, xr, k, 4 * rb, out);
				else if (nr == 4)
					tile256(type, 4, 1, wr, xr, k, 4 * rb, out);
				else if (nt == 2)
					tile256(type, 1, 2, wr, xr, k, 1 * rb, out);
				else
					tile256(type, 1, 1, wr, xr, k, 1 * rb, out);
				for (int a = 0; a < nr; a++)
					for (int b = 0; b < nt; b++)
						y[(int64_t)(t + b) * ldy + r + a] = out[a][b];
				t += nt;
			}
			r += nr;
		}
	}
}

static T256 void matmul_avx2(enum gguf_dtype type, const void *w, int64_t k, int64_t r0, int64_t r1,
			     const float *x, int64_t ldx, int32_t n_tok, float *y, int64_t ldy)
{
	switch (type) {
	case GGUF_DTYPE_F32: mm256_body(GGUF_DTYPE_F32, w, k, r0, r1, x, ldx, n_tok, y, ldy); break;
	case GGUF_DTYPE_F16: mm256_body(GGUF_DTYPE_F16, w, k, r0, r1, x, ldx, n_tok, y, ldy); break;
	case GGUF_DTYPE_BF16:
		mm256_body(GGUF_DTYPE_BF16, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		break;
	case GGUF_DTYPE_Q8_0:
		mm256_body(GGUF_DTYPE_Q8_0, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		break;
	}
}

static T256 float dot_avx2(const float *a, const float *b, int64_t n)
{
	const void *wr[1] = {a};
	const float *xr[1] = {b};
	float out[8][4];
	tile256(GGUF_DTYPE_F32, 1, 1, wr, xr, n, 0, out);
	return out[0][0];
}

static T512 void axpy_avx512(int64_t n, float a, const float *x, float *y)
{
	__m512 av = _mm512_set1_ps(a);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(
		    y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = __builtin_fmaf(a, x[i], y[i]);
}

static T256 void axpy_avx2(int64_t n, float a, const float *x, float *y)
{
	__m256 av = _mm256_set1_ps(a);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(
		    y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = __builtin_fmaf(a, x[i], y[i]);
}

static T256 void dot_rows_avx2(const float *a, const float *b, int64_t ldb, int32_t n_rows,
			       int64_t n, float *out)
{
	const float *xr[1] = {a};
	const void *wr[8];
	float o[8][4];
	int32_t j = 0;
	for (; j + 8 <= n_rows; j += 8) {
		for (int r = 0; r < 8; r++)
			wr[r] = b + (int64_t)(j + r) * ldb;
		tile256(GGUF_DTYPE_F32, 8, 1, wr, xr, n, 0, o);
		for (int r = 0; r < 8; r++)
			out[j + r] = o[r][0];
	}
	for (; j < n_rows; j++) {
		wr[0] = b + (int64_t)j * ldb;
		tile256(GGUF_DTYPE_F32, 1, 1, wr, xr, n, 0, o);
		out[j] = o[0][0];
	}
}

/* y stays in registers over all rows: per element the same fmas in the same row order as
 * n_rows separate axpy calls, without storing and reloading y between rows. */
static T512 void axpy_rows_avx512(int64_t n, const float *a, int32_t n_rows, const float *x,
				  int64_t ldx, float *y)
{
	int64_t i = 0;
	for (; i + 64 <= n; i += 64) {
		__m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
		__m512 y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);
		for (int32_t j = 0; j < n_rows; j++) {
			const float *xj = x + (int64_t)j * ldx + i;
			__m512 av = _mm512_set1_ps(a[j]);
			y0 = _mm512_fmadd_ps(av, _mm512_loadu_ps(xj), y0);
			y1 = _mm512_fmadd_ps(av, _mm512_loadu_ps(xj + 16), y1);
			y2 = _mm512_fmadd_ps(av, _mm512_loadu_ps(xj + 32), y2);
			y3 = _mm512_fmadd_ps(av, _mm512_loadu_ps(xj + 48), y3);
		}
		_mm512_storeu_ps(y + i, y0);
		_mm512_storeu_ps(y + i + 16, y1);
		_mm512_storeu_ps(y + i + 32, y2);
		_mm512_storeu_ps(y + i + 48, y3);
	}
	for (; i + 16 <= n; i += 16) {
		__m512 y0 = _mm512_loadu_ps(y + i);
		for (int32_t j = 0; j < n_rows; j++)
			y0 = _mm512_fmadd_ps(_mm512_set1_ps(a[j]),
					     _mm512_loadu_ps(x + (int64_t)j * ldx + i), y0);
		_mm512_storeu_ps(y + i, y0);
	}
	for (; i < n; i++) {
		float v = y[i];
		for (int32_t j = 0; j < n_rows; j++)
			v = __builtin_fmaf(a[j], x[(int64_t)j * ldx + i], v);
		y[i] = v;
	}
}

static T256 void axpy_rows_avx2(int64_t n, const float *a, int32_t n_rows, const float *x,
				int64_t ldx, float *y)
{
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		__m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
		__m256 y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
		for (int32_t j = 0; j < n_rows; j++) {
			const float *xj = x + (int64_t)j * ldx + i;
			__m256 av = _mm256_set1_ps(a[j]);
			y0 = _mm256_fmadd_ps(av, _mm256_loadu_ps(xj), y0);
			y1 = _mm256_fmadd_ps(av, _mm256_loadu_ps(xj + 8), y1);
			y2 = _mm256_fmadd_ps(av, _mm256_loadu_ps(xj + 16), y2);
			y3 = _mm256_fmadd_ps(av, _mm256_loadu_ps(xj + 24), y3);
		}
		_mm256_storeu_ps(y + i, y0);
		_mm256_storeu_ps(y + i + 8, y1);
		_mm256_storeu_ps(y + i + 16, y2);
		_mm256_storeu_ps(y + i + 24, y3);
	}
	for (; i + 8 <= n; i += 8) {
		__m256 y0 = _mm256_loadu_ps(y + i);
		for (int32_t j = 0; j < n_rows; j++)
			y0 = _mm256_fmadd_ps(_mm256_set1_ps(a[j]),
					     _mm256_loadu_ps(x + (int64_t)j * ldx + i), y0);
		_mm256_storeu_ps(y + i, y0);
	}
	for (; i < n; i++) {
		float v = y[i];
		for (int32_t j = 0; j < n_rows; j++)
			v = __builtin_fmaf(a[j], x[(int64_t)j * ldx + i], v);
		y[i] = v;
	}
}

#endif /* CPUK_X86 */

/* ---- dispatch ---- */

bool cpuk_supported(enum cpuk_level level)
{
	switch (level) {
	case CPUK_SCALAR: return true;
#if CPUK_X86
	case CPUK_AVX2:
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
		       __builtin_cpu_supports("f16c");
	case CPUK_AVX512: return __builtin_cpu_supports("avx512f");
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
		matmul_avx512(type, w, k, r0, r1, x, ldx, n_tok, y, ldy);
		return;
	}
	if (level == CPUK_AVX2) {
		matmul_avx2(type, w, k, r0, r1, x, ldx, n_tok, y, ldy);
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
		return dot_avx512(a, b, n);
	if (level == CPUK_AVX2)
		return dot_avx2(a, b, n);
#endif
	(void)level;
	return scalar_dot(GGUF_DTYPE_F32, a, b, n);
}

void cpuk_axpy(enum cpuk_level level, int64_t n, float a, const float *x, float *y)
{
#if CPUK_X86
	if (level == CPUK_AVX512) {
		axpy_avx512(n, a, x, y);
		return;
	}
	if (level == CPUK_AVX2) {
		axpy_avx2(n, a, x, y);
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
		dot_rows_avx512(a, b, ldb, n_rows, n, out);
		return;
	}
	if (level == CPUK_AVX2) {
		dot_rows_avx2(a, b, ldb, n_rows, n, out);
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
		axpy_rows_avx512(n, a, n_rows, x, ldx, y);
		return;
	}
	if (level == CPUK_AVX2) {
		axpy_rows_avx2(n, a, n_rows, x, ldx, y);
		return;
	}
#endif
	(void)level;
	for (int32_t j = 0; j < n_rows; j++)
		for (int64_t i = 0; i < n; i++)
			y[i] = __builtin_fmaf(a[j], x[(int64_t)j * ldx + i], y[i]);
}
