/* test_cpu_kernels: every dot-product kernel (each level this processor supports, each
 * weight type) against a double-precision reference on random data and, bitwise, against
 * a plain-C emulation of its summation order, plus the invariant that batch invariance
 * rests on: a (row, token) result is bitwise the same whatever the tile, the number of
 * tokens, the row range or the strides. */
#include "cpu/cpu_kernels.h"

#include "model/half.h"
#include "model/quant.h"
#include "check.h"
#include "quant_util.h"

static uint64_t rng_state = 0x1234567887654321ull;

static double urand(void) /* [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng_state >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Random weights [n][k] of type; returns the buffer (rows packed). Block types other
 * than Q8_0 get random bytes with finite, small fp16 scales. */
static void *make_weights(enum gguf_dtype type, int64_t n, int64_t k)
{
	size_t rb = cpuk_row_bytes(type, k);
	uint8_t *w = malloc(rb * (size_t)n + 1);
	if (type != GGUF_DTYPE_Q8_0 && quant_is_quantized(type)) {
		size_t bb = quant_block_bytes(type);
		for (size_t b = 0; b < rb * (size_t)n / bb; b++) {
			uint8_t *blk = w + b * bb;
			for (size_t i = 0; i < bb; i++)
				blk[i] = (uint8_t)(urand() * 128.0 + 128.0);
			for (const int *f = quant_util_half_fields(type); *f >= 0; f++) {
				uint16_t h = half_f32_to_f16((float)(0.001 + 0.01 * (urand() + 1)));
				memcpy(blk + *f, &h, 2);
			}
			if (type == GGUF_DTYPE_IQ1_M)
				quant_util_put_iq1m_scale(
				    blk, half_f32_to_f16((float)(0.001 + 0.01 * (urand() + 1))));
		}
		return w;
	}
	for (int64_t r = 0; r < n; r++) {
		uint8_t *row = w + rb * (size_t)r;
		for (int64_t i = 0; i < k; i++) {
			float v = (float)urand();
			switch (type) {
			case GGUF_DTYPE_F32: ((float *)row)[i] = v; break;
			case GGUF_DTYPE_F16: ((uint16_t *)row)[i] = half_f32_to_f16(v); break;
			case GGUF_DTYPE_BF16: ((uint16_t *)row)[i] = half_f32_to_bf16(v); break;
			case GGUF_DTYPE_Q8_0: {
				struct cpuk_q8_0 *b = (struct cpuk_q8_0 *)row + i / 32;
				if (i % 32 == 0)
					b->d =
					    half_f32_to_f16((float)(0.001 + 0.02 * (urand() + 1)));
				b->qs[i % 32] = (int8_t)(urand() * 127.0);
				break;
			}
			default: break;
			}
		}
	}
	return w;
}

/* the exact value of weight element i, in double, independent of the kernels' code */
static double w_ref(enum gguf_dtype type, const void *row, int64_t i)
{
	switch (type) {
	case GGUF_DTYPE_F32: return ((const float *)row)[i];
	case GGUF_DTYPE_F16: return half_f16_to_f32(((const uint16_t *)row)[i]);
	case GGUF_DTYPE_BF16: {
		uint32_t u = (uint32_t)((const uint16_t *)row)[i] << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	case GGUF_DTYPE_Q8_0: {
		const struct cpuk_q8_0 *b = (const struct cpuk_q8_0 *)row + i / 32;
		return (double)half_f16_to_f32(b->d) * (double)b->qs[i % 32];
	}
	default: { /* the block's reference dequantization (tests/test_quant.c checks it) */
		float blk[256];
		int be = quant_block_elems(type);
		quant_dequant(type, (const char *)row + (size_t)(i / be) * quant_block_bytes(type),
			      blk, be);
		return blk[i % be];
	}
	}
}

static const char *tname(enum gguf_dtype t)
{
	switch (t) {
	case GGUF_DTYPE_F32: return "f32";
	case GGUF_DTYPE_F16: return "f16";
	case GGUF_DTYPE_BF16: return "bf16";
	default: return gguf_dtype_name(t);
	}
}

/* The summation order itself, emulated in plain C: `lanes` lanes (8 for the scalar and
 * AVX2 levels, 16 for AVX-512), each a chain of fmaf over k in steps of `lanes` with the
 * last step zero padded, then the lanes halved (lane j + lane j + n / 2) down to 4 and
 * added as (0 + 2) + (1 + 3). Batch invariance only needs every tile to agree with
 * every other; this pins the order down, so a kernel rewrite or a tuning that reorders
 * the sums fails here even when it stays invariant. */
static float ref_dot(int lanes, enum gguf_dtype type, const void *row, const float *x, int64_t k)
{
	float acc[16] = {0};
	for (int64_t i = 0; i < k; i += lanes)
		for (int j = 0; j < lanes; j++) {
			int in = i + j < k;
			float w = in ? (float)w_ref(type, row, i + j) : 0.0f; /* exact */
			acc[j] = fmaf(w, in ? x[i + j] : 0.0f, acc[j]);
		}
	for (int n = lanes; n > 4; n /= 2)
		for (int j = 0; j < n / 2; j++)
			acc[j] = acc[j] + acc[j + n / 2];
	return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

static void test_one(enum cpuk_level lvl, enum gguf_dtype type, int64_t k)
{
	enum { N = 11, T = 7 };
	const int64_t ldx = k + 3; /* strided activations */
	void *w = make_weights(type, N, k);
	float *x = malloc(sizeof(float) * (size_t)(T * ldx));
	for (int64_t i = 0; i < T * ldx; i++)
		x[i] = (float)urand();
	const int64_t ldy = N + 2;
	float *y = malloc(sizeof(float) * T * ldy);
	for (int64_t i = 0; i < T * ldy; i++)
		y[i] = NAN;
	cpuk_matmul(lvl, type, w, k, 0, N, x, ldx, T, y, ldy);
	size_t rb = cpuk_row_bytes(type, k);
	/* the block types other than Q8_0 multiply with the activations rounded as llama.cpp
	 * rounds them (quant_round_act, checked in test_quant): the references use those */
	float *xa = malloc(sizeof(float) * (size_t)(T * ldx));
	memcpy(xa, x, sizeof(float) * (size_t)(T * ldx));
	if (type != GGUF_DTYPE_Q8_0)
		for (int t = 0; t < T; t++)
			quant_round_act(type, x + t * ldx, xa + t * ldx, k);

	/* accuracy: any order of k fused multiply-adds (plus, for Q8_0, one rounding of
	 * d * q, and the final reduction) errs by at most (k + 8) * 2^-24 * sum |w x|
	 * (the standard forward bound for floating-point summation, gamma_n ~ n u). */
	double worst = 0;
	int bad = 0;
	for (int r = 0; r < N; r++)
		for (int t = 0; t < T; t++) {
			const void *row = (const char *)w + rb * (size_t)r;
			double ref = 0, mag = 0;
			for (int64_t i = 0; i < k; i++) {
				double p = w_ref(type, row, i) * (double)xa[t * ldx + i];
				ref += p;
				mag += fabs(p);
			}
			double got = y[t * ldy + r];
			double tol = (double)(k + 8) * ldexp(1.0, -24) * mag + 1e-30;
			if (!(fabs(got - ref) <= tol))
				bad++;
			if (fabs(got - ref) / tol > worst)
				worst = fabs(got - ref) / tol;
		}
	CHECK(bad == 0, "%s %s k=%lld: %d results outside the bound (worst %.2f of it)",
	      cpuk_level_name(lvl), tname(type), (long long)k, bad, worst);
	/* the padding columns of y were not written */
	int untouched = 1;
	for (int t = 0; t < T; t++)
		untouched &= isnan(y[t * ldy + N]) && isnan(y[t * ldy + N + 1]);
	CHECK(untouched, "%s %s k=%lld writes only [r0, r1)", cpuk_level_name(lvl), tname(type),
	      (long long)k);

	/* the order: bitwise the emulation of the level's lanes */
	int lanes = lvl == CPUK_AVX512 ? 16 : 8, same_ref = 1;
	for (int r = 0; r < N; r++)
		for (int t = 0; t < T; t++) {
			float want =
			    ref_dot(lanes, type, (const char *)w + rb * (size_t)r, xa + t * ldx, k);
			same_ref &= memcmp(&want, &y[t * ldy + r], sizeof want) == 0;
		}
	CHECK(same_ref, "%s %s k=%lld: equals the plain-C emulation of %d lanes bitwise",
	      cpuk_level_name(lvl), tname(type), (long long)k, lanes);

	/* invariance: one row, one token at a time, from contiguous copies, and an
	 * unaligned row range, give the same bits */
	float *xc = malloc(sizeof(float) * (size_t)k);
	int same = 1;
	for (int t = 0; t < T; t++) {
		memcpy(xc, x + t * ldx, sizeof(float) * (size_t)k);
		for (int r = 0; r < N; r++) {
			float one;
			cpuk_matmul(lvl, type, w, k, r, r + 1, xc, k, 1, &one - r, 1);
			same &= memcmp(&one, &y[t * ldy + r], sizeof one) == 0;
		}
	}
	float *y2 = malloc(sizeof(float) * T * ldy);
	cpuk_matmul(lvl, type, w, k, 3, 10, x + ldx, ldx, T - 2, y2, ldy);
	for (int t = 0; t < T - 2; t++)
		for (int r = 3; r < 10; r++)
			same &= memcmp(&y2[t * ldy + r], &y[(t + 1) * ldy + r], sizeof(float)) == 0;
	CHECK(same, "%s %s k=%lld: results depend on the tile / batch", cpuk_level_name(lvl),
	      tname(type), (long long)k);
	/* matrix-vector and small batches (1..3 tokens) over all rows take the wide
	 * row tiles (8 rows at a time) with prefetching: still the same bits */
	int same_mv = 1;
	float *y3 = malloc(sizeof(float) * 3 * N);
	for (int32_t nt = 1; nt <= 3; nt++)
		for (int t0 = 0; t0 + nt <= T; t0 += nt) {
			cpuk_matmul(lvl, type, w, k, 0, N, x + t0 * ldx, ldx, nt, y3, N);
			for (int t = 0; t < nt; t++)
				for (int r = 0; r < N; r++)
					same_mv &= memcmp(&y3[t * N + r], &y[(t0 + t) * ldy + r],
							  sizeof(float)) == 0;
		}
	CHECK(same_mv, "%s %s k=%lld: 1..3-token matmuls over all rows equal the batch",
	      cpuk_level_name(lvl), tname(type), (long long)k);
	free(y3);

	/* the attention dot equals the F32 matmul bitwise */
	if (type == GGUF_DTYPE_F32) {
		float d = cpuk_dot_f32(lvl, (const float *)w, x, k);
		CHECK(memcmp(&d, &y[0], sizeof d) == 0, "%s dot_f32 k=%lld equals matmul",
		      cpuk_level_name(lvl), (long long)k);
	}
	/* dequantization is exact (F16/BF16) or d * q rounded once (Q8_0) */
	float *deq = malloc(sizeof(float) * (size_t)k);
	cpuk_dequant_row(type, w, k, deq);
	int exact = 1;
	for (int64_t i = 0; i < k; i++)
		exact &= deq[i] == (float)w_ref(type, w, i);
	CHECK(exact, "%s dequant k=%lld", tname(type), (long long)k);
	free(deq);
	free(y2);
	free(xa);
	free(xc);
	free(y);
	free(x);
	free(w);
}

/* axpy: one fused multiply-add per element, so every level equals fmaf exactly */
static void test_axpy(enum cpuk_level lvl)
{
	enum { N = 77 };
	float x[N], y[N], want[N];
	int same = 1;
	for (int n = 0; n <= N; n += 11) {
		for (int i = 0; i < N; i++) {
			x[i] = (float)urand();
			y[i] = want[i] = (float)urand();
		}
		float a = (float)urand();
		for (int i = 0; i < n; i++)
			want[i] = fmaf(a, x[i], want[i]);
		cpuk_axpy(lvl, n, a, x, y);
		same &= memcmp(y, want, sizeof y) == 0;
	}
	CHECK(same, "%s axpy equals fmaf and leaves y[n..] alone", cpuk_level_name(lvl));
}

/* the attention helpers: dot_f32_rows equals cpuk_dot_f32 row by row, axpy_rows equals
 * the sequence of axpy calls (and so fmaf), bitwise, for row counts around the tile of 8
 * and lengths around the vector widths; y past n is left alone */
static void test_rows(enum cpuk_level lvl)
{
	static const int64_t ns[] = {1, 7, 8, 16, 17, 64, 100, 128};
	enum { R = 19 };
	int same_dot = 1, same_axpy = 1;
	for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
		int64_t n = ns[ni], ld = n + 3;
		float *q = malloc(sizeof(float) * (size_t)n);
		float *kr = malloc(sizeof(float) * (size_t)(R * ld));
		float *y = malloc(sizeof(float) * (size_t)(n + 1)),
		      *want = malloc(sizeof(float) * (size_t)(n + 1));
		float a[R], got[R];
		for (int64_t i = 0; i < n; i++)
			q[i] = (float)urand();
		for (int64_t i = 0; i < R * ld; i++)
			kr[i] = (float)urand();
		for (int j = 0; j < R; j++)
			a[j] = (float)urand();
		for (int32_t nr = 0; nr <= R; nr++) {
			for (int j = 0; j < R; j++)
				got[j] = NAN;
			cpuk_dot_f32_rows(lvl, q, kr, ld, nr, n, got);
			for (int j = 0; j < R; j++) {
				float want1 = cpuk_dot_f32(lvl, q, kr + j * ld, n);
				same_dot &= j < nr ? memcmp(&got[j], &want1, sizeof want1) == 0
						   : isnan(got[j]);
			}
			for (int64_t i = 0; i <= n; i++)
				y[i] = want[i] = (float)urand();
			for (int j = 0; j < nr; j++)
				for (int64_t i = 0; i < n; i++)
					want[i] = fmaf(a[j], kr[j * ld + i], want[i]);
			cpuk_axpy_rows(lvl, n, a, nr, kr, ld, y);
			same_axpy &= memcmp(y, want, sizeof(float) * (size_t)(n + 1)) == 0;
		}
		free(q);
		free(kr);
		free(y);
		free(want);
	}
	CHECK(same_dot, "%s dot_f32_rows equals dot_f32 row by row", cpuk_level_name(lvl));
	CHECK(same_axpy, "%s axpy_rows equals fmaf row by row", cpuk_level_name(lvl));
}

int main(void)
{
	static const int64_t ks[] = {1, 5, 8, 15, 16, 17, 31, 64, 100, 172, 256, 1000};
	static const int64_t kq[] = {32, 64, 96, 256, 1024, 1280, 1312};
	static const enum gguf_dtype qtypes[] = {
	    GGUF_DTYPE_Q4_0,   GGUF_DTYPE_Q4_1,	  GGUF_DTYPE_Q5_0,    GGUF_DTYPE_Q5_1,
	    GGUF_DTYPE_Q2_K,   GGUF_DTYPE_Q3_K,	  GGUF_DTYPE_Q4_K,    GGUF_DTYPE_Q5_K,
	    GGUF_DTYPE_Q6_K,   GGUF_DTYPE_IQ4_NL, GGUF_DTYPE_IQ4_XS,  GGUF_DTYPE_IQ2_XXS,
	    GGUF_DTYPE_IQ2_XS, GGUF_DTYPE_IQ2_S,  GGUF_DTYPE_IQ3_XXS, GGUF_DTYPE_IQ3_S,
	    GGUF_DTYPE_IQ1_S,  GGUF_DTYPE_IQ1_M};
	static const enum gguf_dtype types[] = {GGUF_DTYPE_F32, GGUF_DTYPE_F16, GGUF_DTYPE_BF16};
	int n_levels = 0;
	for (int l = CPUK_SCALAR; l <= CPUK_AVX512; l++) {
		enum cpuk_level lvl = (enum cpuk_level)l;
		if (!cpuk_supported(lvl)) {
			printf("level %s not supported here: skipped\n", cpuk_level_name(lvl));
			continue;
		}
		n_levels++;
		test_axpy(lvl);
		test_rows(lvl);
		for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
			for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
				test_one(lvl, types[ti], ks[i]);
		for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++)
			test_one(lvl, GGUF_DTYPE_Q8_0, kq[i]);
		/* the other block types (dequantized in chunks of 256, for up to 32 tokens at a
		 * time): rows of 1, 4 and 5 chunks and a partial one */
		for (size_t ti = 0; ti < sizeof qtypes / sizeof qtypes[0]; ti++)
			for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++)
				if (kq[i] % quant_block_elems(qtypes[ti]) == 0)
					test_one(lvl, qtypes[ti], kq[i]);
	}
	CHECK(n_levels >= 1 && cpuk_supported(cpuk_detect()), "detected level %s",
	      cpuk_level_name(cpuk_detect()));
	CHECK(cpuk_row_bytes(GGUF_DTYPE_Q8_0, 64) == 68 && sizeof(struct cpuk_q8_0) == 34,
	      "q8_0 block is 34 bytes");
	printf("levels tested: %d, detected: %s\n", n_levels, cpuk_level_name(cpuk_detect()));
	return check_summary();
}
