/* test_qdot: the integer dot products of cpu/qdot and the integer block views of
 * model/quant they rest on.
 *
 *  - quant_ints_32/256 reproduce quant_dequant (itself equal to ggml's) bit for bit;
 *  - the activation quantization equals llama.cpp's own (ggml-cpu's from_float for the
 *    vec_dot type, bytes and scales) and quant_round_act's values;
 *  - the portable dot product equals hand-derived values, a double-precision dot of the
 *    dequantized operands (to float rounding), and llama.cpp's vec_dot (likewise);
 *  - every vector level the processor has gives the portable code's bits, for every
 *    type, row range, token count and tile (batch invariance).
 * Without node-llama-cpp's libraries the llama.cpp comparisons are skipped visibly (a
 * failure under CI=true).
 */
#include <dlfcn.h>
#include <stdint.h>

#include "check.h"
#include "cpu/qdot.h"
#include "model/half.h"
#include "model/quant.h"
#include "ggml_cpu_abi.h"
#include "quant_util.h"

#define LLAMA_DIR "bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"

static const enum gguf_dtype types[] = {
    GGUF_DTYPE_Q4_0,   GGUF_DTYPE_Q4_1,	   GGUF_DTYPE_Q5_0,  GGUF_DTYPE_Q5_1,	 GGUF_DTYPE_Q8_0,
    GGUF_DTYPE_Q2_K,   GGUF_DTYPE_Q3_K,	   GGUF_DTYPE_Q4_K,  GGUF_DTYPE_Q5_K,	 GGUF_DTYPE_Q6_K,
    GGUF_DTYPE_IQ4_NL, GGUF_DTYPE_IQ4_XS,  GGUF_DTYPE_MXFP4, GGUF_DTYPE_IQ2_XXS, GGUF_DTYPE_IQ2_XS,
    GGUF_DTYPE_IQ2_S,  GGUF_DTYPE_IQ3_XXS, GGUF_DTYPE_IQ3_S, GGUF_DTYPE_IQ1_S,	 GGUF_DTYPE_IQ1_M};
#define N_TYPES (sizeof types / sizeof types[0])

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

static float gauss(void)
{
	double u1 = ((double)rnd() + 1.0) / 2147483649.0, u2 = (double)rnd() / 2147483648.0;
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* nb random blocks of t: random bytes, finite fp16 scales of either sign */
static void *random_blocks(enum gguf_dtype t, int64_t nb)
{
	size_t bb = quant_block_bytes(t);
	uint8_t *q = malloc((size_t)nb * bb);
	for (size_t i = 0; i < (size_t)nb * bb; i++)
		q[i] = (uint8_t)rnd();
	for (int64_t b = 0; b < nb && t == GGUF_DTYPE_MXFP4; b++)
		q[(size_t)b * bb] = (uint8_t)(117 + rnd() % 16); /* e8m0 scales 2^-11 .. 2^4 */
	for (int64_t b = 0; b < nb; b++)
		for (const int *f = quant_util_half_fields(t); *f >= 0; f++) {
			uint16_t hv = half_f32_to_f16(gauss() * 0.05f);
			memcpy(q + (size_t)b * bb + *f, &hv, 2);
		}
	for (int64_t b = 0; b < nb && t == GGUF_DTYPE_IQ1_M; b++)
		quant_util_put_iq1m_scale(q + (size_t)b * bb, half_f32_to_f16(gauss() * 0.05f));
	return q;
}

static bool is_k(enum gguf_dtype t)
{
	return quant_block_elems(t) == 256;
}

/* ---- integer views ---- */

static void test_ints(void)
{
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum gguf_dtype t = types[ti];
		const int be = quant_block_elems(t), NB = 16;
		uint8_t *q = random_blocks(t, NB);
		float ref[256];
		int bad = -1;
		for (int b = 0; b < NB && bad < 0; b++) {
			const void *blk = q + (size_t)b * quant_block_bytes(t);
			quant_dequant(t, blk, ref, be);
			for (int e = 0; e < be && bad < 0; e++) {
				float v;
				if (be == 32) {
					struct quant_ints32 w;
					quant_ints_32(t, blk, &w);
					v = quant_has_offset(t) ? w.q[e] * w.d + w.m : w.q[e] * w.d;
				} else {
					struct quant_ints256 w;
					quant_ints_256(t, blk, &w);
					v = (w.d * w.sc[e / 16]) * w.q[e] - w.dmin * w.mn[e / 16];
				}
				if (memcmp(&v, &ref[e], 4) != 0)
					bad = b * be + e;
			}
		}
		CHECK(bad < 0,
		      "%s: integer view gives quant_dequant's bits (first wrong element %d)",
		      gguf_dtype_name(t), bad);
		free(q);
	}
}

/* ---- activations ---- */

static void test_act_values(void)
{
	/* the dequantized activations are quant_round_act's values */
	enum { K = 512 };
	float x[K], r[K];
	for (int i = 0; i < K; i++)
		x[i] = gauss() * (i % 61 == 0 ? 3.0f : 0.5f);
	x[7] = 0.0f;
	const enum gguf_dtype ts[3] = {GGUF_DTYPE_Q8_0, GGUF_DTYPE_Q4_1, GGUF_DTYPE_Q4_K};
	for (int i = 0; i < 3; i++) {
		void *a = malloc(qdot_act_row_bytes(ts[i], K));
		qdot_quantize_row(ts[i], x, K, a);
		quant_round_act(ts[i], x, r, K);
		int bad = -1;
		for (int e = 0; e < K && bad < 0; e++) {
			float v;
			if (is_k(ts[i])) {
				const struct qdot_a256 *b = (const struct qdot_a256 *)a + e / 256;
				v = b->d * (float)b->qs[e % 256];
			} else {
				const struct qdot_a32 *b = (const struct qdot_a32 *)a + e / 32;
				v = b->d * (float)b->qs[e % 32];
			}
			if (v != r[e])
				bad = e;
		}
		CHECK(bad < 0, "%s activations: d * q is quant_round_act's value (first wrong %d)",
		      gguf_dtype_name(ts[i]), bad);
		free(a);
	}
	/* non-finite input: some quantization, |q| <= 127 */
	x[3] = NAN;
	x[300] = INFINITY;
	for (int i = 0; i < 3; i++) {
		void *a = malloc(qdot_act_row_bytes(ts[i], K));
		qdot_quantize_row(ts[i], x, K, a);
		bool ok = true;
		for (int e = 0; e < K; e++) {
			int8_t v = is_k(ts[i]) ? ((const struct qdot_a256 *)a)[e / 256].qs[e % 256]
					       : ((const struct qdot_a32 *)a)[e / 32].qs[e % 32];
			ok &= v >= -127;
		}
		CHECK(ok, "%s activations of NaN/inf stay within [-127, 127]",
		      gguf_dtype_name(ts[i]));
		free(a);
	}
}

/* ---- the portable dot: hand-derived values and a double-precision reference ---- */

static float dot1(enum qdot_isa isa, enum gguf_dtype t, const void *w, const void *a, int64_t k)
{
	float y = 0.0f;
	qdot_matmul(isa, t, w, k, 0, 1, a, 0, 1, &y, 1);
	return y;
}

static void test_hand(void)
{
	/* Q4_0: d = 1, low nibbles 8 (w = 0), high nibbles 9 (w = 1); activations d = 0.5,
	 * q[e] = e - 16: 0.5 * sum_{e=16}^{31} (e - 16) = 0.5 * 120 = 60 */
	struct quant_q4_0 w0 = {.d = 0x3C00};
	memset(w0.qs, 0x98, 16);
	struct qdot_a32 a0 = {.d = 0.5f};
	for (int e = 0; e < 32; e++)
		a0.qs[e] = (int8_t)(e - 16);
	CHECK(dot1(QDOT_PORTABLE, GGUF_DTYPE_Q4_0, &w0, &a0, 32) == 60.0f, "Q4_0 hand value 60: %g",
	      dot1(QDOT_PORTABLE, GGUF_DTYPE_Q4_0, &w0, &a0, 32));
	/* Q4_1: d = 1, m = 2 (fp16 0x4000), all q = 1 (w = 3); activations q = 1, d = 1, s =
	 * 32 (the block sum times d): 1 * 32 + 2 * 32 = 96 */
	struct quant_q4_1 w1 = {.d = 0x3C00, .m = 0x4000};
	memset(w1.qs, 0x11, 16);
	struct qdot_a32 a1 = {.d = 1.0f, .s = 32.0f};
	memset(a1.qs, 1, 32);
	CHECK(dot1(QDOT_PORTABLE, GGUF_DTYPE_Q4_1, &w1, &a1, 32) == 96.0f, "Q4_1 hand value 96: %g",
	      dot1(QDOT_PORTABLE, GGUF_DTYPE_Q4_1, &w1, &a1, 32));
	/* Q8_0, at every level (the VNNI code offsets the activations by 128 and corrects
	 * with the weights' sums): block 0 has d = 1 and weights -128 (the extreme a file can
	 * hold) and 127 in alternate fours, activations d = 0.5, q = 127: 0.5 * 127 * 16 *
	 * (-128 + 127) = -1016; block 1 weights 1 (d = 1), activations -1 (d = 2): -64 */
	struct quant_q8_0 w8[2] = {{.d = 0x3C00}, {.d = 0x3C00}};
	struct qdot_a32 a8[2] = {{.d = 0.5f}, {.d = 2.0f}};
	for (int e = 0; e < 32; e++) {
		w8[0].qs[e] = (int8_t)((e / 4) % 2 ? 127 : -128);
		a8[0].qs[e] = 127;
		w8[1].qs[e] = 1;
		a8[1].qs[e] = -1;
	}
	for (int isa = 0; isa < QDOT_N_ISA; isa++)
		if (qdot_supported((enum qdot_isa)isa))
			CHECK(dot1((enum qdot_isa)isa, GGUF_DTYPE_Q8_0, w8, a8, 64) == -1080.0f,
			      "Q8_0 hand value -1080 (%s): %g", qdot_isa_name((enum qdot_isa)isa),
			      dot1((enum qdot_isa)isa, GGUF_DTYPE_Q8_0, w8, a8, 64));
	/* Q4_K: d = dmin = 1, every scale and min 1, every q 3 (w = 3 - 1 = 2); activations
	 * d = 1, q = 2: 256 * 2 * 2 = 1024 */
	struct quant_q4_k wk = {.d = 0x3C00, .dmin = 0x3C00};
	memset(wk.scales, 1, 8);
	memset(wk.scales + 8, 0x11, 4);
	memset(wk.qs, 0x33, 128);
	struct qdot_a256 ak = {.d = 1.0f};
	memset(ak.qs, 2, 256);
	for (int g = 0; g < 16; g++)
		ak.bsums[g] = 32;
	CHECK(dot1(QDOT_PORTABLE, GGUF_DTYPE_Q4_K, &wk, &ak, 256) == 1024.0f,
	      "Q4_K hand value 1024: %g", dot1(QDOT_PORTABLE, GGUF_DTYPE_Q4_K, &wk, &ak, 256));
	/* Q6_K: d = 1, scales 2, every 6-bit q 33 (w = 2 * 1): ql nibble 1, qh bits 2;
	 * activations d = 0.25, q = -4: 256 * 2 * -1 = -512 */
	struct quant_q6_k w6 = {.d = 0x3C00};
	memset(w6.ql, 0x11, 128);
	memset(w6.qh, 0xAA, 64);
	memset(w6.scales, 2, 16);
	struct qdot_a256 a6 = {.d = 0.25f};
	memset(a6.qs, -4, 256);
	for (int g = 0; g < 16; g++)
		a6.bsums[g] = -64;
	CHECK(dot1(QDOT_PORTABLE, GGUF_DTYPE_Q6_K, &w6, &a6, 256) == -512.0f,
	      "Q6_K hand value -512: %g", dot1(QDOT_PORTABLE, GGUF_DTYPE_Q6_K, &w6, &a6, 256));
}

/* the dequantized activation e of a row */
static double act_val(enum gguf_dtype t, const void *a, int64_t e)
{
	if (is_k(t)) {
		const struct qdot_a256 *b = (const struct qdot_a256 *)a + e / 256;
		return (double)b->d * b->qs[e % 256];
	}
	const struct qdot_a32 *b = (const struct qdot_a32 *)a + e / 32;
	return (double)b->d * b->qs[e % 32];
}

static void test_vs_double(void)
{
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum gguf_dtype t = types[ti];
		const int64_t k = 1024;
		void *w = random_blocks(t, k / quant_block_elems(t));
		float *x = malloc(sizeof(float) * k), *wf = malloc(sizeof(float) * k);
		for (int64_t i = 0; i < k; i++)
			x[i] = gauss();
		void *a = malloc(qdot_act_row_bytes(t, k));
		qdot_quantize_row(t, x, k, a);
		quant_dequant(t, w, wf, k);
		double ref = 0, mag = 0;
		for (int64_t i = 0; i < k; i++) {
			ref += wf[i] * act_val(t, a, i);
			mag += fabs(wf[i] * act_val(t, a, i));
		}
		/* Q4_1/Q5_1 use the fp16 block sum s for the offsets: s rounds d * sum to fp16
		 * (2^-11 relative) */
		if (quant_has_offset(t)) {
			ref = 0;
			for (int64_t b = 0; b < k / 32; b++) {
				struct quant_ints32 wi;
				quant_ints_32(t, (const char *)w + b * quant_block_bytes(t), &wi);
				const struct qdot_a32 *ab = (const struct qdot_a32 *)a + b;
				for (int e = 0; e < 32; e++)
					ref += (double)wi.d * wi.q[e] * ab->d * ab->qs[e];
				ref += (double)wi.m * ab->s;
			}
		}
		/* fp32 accumulation over 1024 terms: well within 1e-5 of the magnitude sum; one
		 * wrong element moves the result by ~1e-3 of it */
		double got = dot1(QDOT_PORTABLE, t, w, a, k);
		CHECK(fabs(got - ref) <= 1e-5 * mag, "%s: portable %.9g vs double %.9g (mag %.4g)",
		      gguf_dtype_name(t), got, ref, mag);
		free(w);
		free(x);
		free(wf);
		free(a);
	}
}

/* ---- llama.cpp's own quantization and vec_dot ---- */


/* our activation row equals llama.cpp's block bytes (d and s as fp16) */
static bool same_act(enum gguf_dtype t, const void *ours, const uint8_t *theirs, int64_t k)
{
	for (int64_t b = 0; b < k / quant_block_elems(t); b++) {
		if (is_k(t)) {
			const struct qdot_a256 *o = (const struct qdot_a256 *)ours + b;
			const uint8_t *p =
			    theirs + b * 292; /* float d, int8 qs[256], int16 bsums[16] */
			if (memcmp(&o->d, p, 4) || memcmp(o->qs, p + 4, 256) ||
			    memcmp(o->bsums, p + 260, 32))
				return false;
		} else {
			const struct qdot_a32 *o = (const struct qdot_a32 *)ours + b;
			bool one = quant_has_offset(t);
			const uint8_t *p = theirs + b * (one ? 36 : 34);
			uint16_t d = half_f32_to_f16(o->d), s = half_f32_to_f16(o->s);
			if (memcmp(&d, p, 2) || (one && memcmp(&s, p + 2, 2)) ||
			    memcmp(o->qs, p + (one ? 4 : 2), 32))
				return false;
		}
	}
	return true;
}

static void test_llamacpp(void)
{
	void *base = dlopen(LLAMA_DIR "libggml-base.so", RTLD_NOW | RTLD_GLOBAL);
	void *h = base ? dlopen(LLAMA_DIR "libggml-cpu-haswell.so", RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!h) {
		const char *ci = getenv("CI");
		if (ci && strcmp(ci, "true") == 0) {
			check_n_fail++;
			fprintf(
			    stderr,
			    "FAIL: %slibggml-cpu-haswell.so is missing (npm ci --prefix bench)\n",
			    LLAMA_DIR);
		} else {
			check_n_skip++;
			fprintf(stderr, "SKIP: llama.cpp's CPU library not found (npm ci --prefix "
					"bench); the comparison with its vec_dot is skipped\n");
		}
		if (base)
			dlclose(base);
		return;
	}
	void (*cpu_init)(void) = (void (*)(void))dlsym(h, "ggml_cpu_init");
	const struct ggml_cpu_traits *(*traits)(int) =
	    (const struct ggml_cpu_traits *(*)(int))dlsym(h, "ggml_get_type_traits_cpu");
	CHECK(cpu_init && traits, "ggml_cpu_init and ggml_get_type_traits_cpu found");
	if (!cpu_init || !traits) {
		dlclose(h);
		dlclose(base);
		return;
	}
	cpu_init();
	const int64_t k = 2048;
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum gguf_dtype t = types[ti];
		const struct ggml_cpu_traits *tr = traits((int)t);
		const struct ggml_cpu_traits *vt = tr ? traits(tr->vec_dot_type) : NULL;
		CHECK(tr && tr->vec_dot && vt && vt->from_float, "%s: ggml-cpu traits",
		      gguf_dtype_name(t));
		if (!tr || !tr->vec_dot || !vt || !vt->from_float)
			continue;
		float *x = malloc(sizeof(float) * k);
		for (int64_t i = 0; i < k; i++)
			x[i] = gauss() * (i % 53 == 0 ? 4.0f : 1.0f);
		void *ours = malloc(qdot_act_row_bytes(t, k));
		uint8_t *theirs = malloc((size_t)k * 2);
		qdot_quantize_row(t, x, k, ours);
		vt->from_float(x, theirs, k);
		CHECK(same_act(t, ours, theirs, k),
		      "%s: activations quantized as llama.cpp's from_float, bit for bit",
		      gguf_dtype_name(t));
		/* the dot products: llama.cpp sums in its own float order; both are the exact
		 * integer block sums scaled in fp32 */
		void *w = random_blocks(t, k / quant_block_elems(t));
		float want = 0.0f, *wf = malloc(sizeof(float) * k);
		tr->vec_dot((int)k, &want, 0, w, 0, theirs, 0, 1);
		quant_dequant(t, w, wf, k);
		double mag = 0;
		for (int64_t i = 0; i < k; i++)
			mag += fabs(wf[i] * act_val(t, ours, i));
		float got = dot1(QDOT_PORTABLE, t, w, ours, k);
		CHECK(fabs(got - want) <= 2e-5 * mag,
		      "%s: %.9g vs llama.cpp's vec_dot %.9g (mag %.4g)", gguf_dtype_name(t), got,
		      want, mag);
		free(x);
		free(ours);
		free(theirs);
		free(w);
		free(wf);
	}
	dlclose(h);
	dlclose(base);
}

/* ---- the vector activation quantization writes the portable code's bytes ---- */

static void test_quantize_levels(void)
{
	enum { K = 1024, N_ROWS = 6 };
	static const enum gguf_dtype ts[3] = {GGUF_DTYPE_Q8_0, GGUF_DTYPE_Q4_1, GGUF_DTYPE_Q4_K};
	float x[K];
	for (int isa = 1; isa < QDOT_N_ISA; isa++) {
		if (!qdot_supported((enum qdot_isa)isa))
			continue;
		for (int ti = 0; ti < 3; ti++) {
			const enum gguf_dtype t = ts[ti];
			const size_t n = qdot_act_row_bytes(t, K);
			uint8_t *want = malloc(n), *got = malloc(n);
			int bad_row = -1;
			for (int row = 0; row < N_ROWS; row++) {
				/* magnitudes from 1e-38 (denormal products) to 1e30 */
				const float scale = row == 0 ? 1.0f : powf(10.0f, -38.0f + 13.6f * row);
				for (int i = 0; i < K; i++)
					x[i] = gauss() * scale;
				/* blocks of zeros and of -0, ties of the largest magnitude with
				 * either sign first (Q8_K keeps the first one's sign) */
				for (int i = 0; i < 32; i++)
					x[i] = 0.0f, x[32 + i] = -0.0f;
				x[300] = -1e3f * scale, x[301] = 1e3f * scale;
				x[600] = 1e3f * scale, x[601] = -1e3f * scale;
				if (row == N_ROWS - 1) { /* non-finite values */
					x[70] = NAN; /* first and last vector of a block */
					x[127] = NAN;
					x[1023] = NAN;
					x[520] = INFINITY;
					x[800] = -INFINITY;
					x[801] = NAN;
				}
				qdot_quantize_row(t, x, K, want);
				memset(got, 0xA5, n);
				qdot_quantize_row_isa((enum qdot_isa)isa, t, x, K, got);
				if (memcmp(want, got, n) != 0 && bad_row < 0)
					bad_row = row;
			}
			CHECK(bad_row < 0,
			      "%s %s: activations quantized to the portable code's bytes (first "
			      "differing row %d)",
			      qdot_isa_name((enum qdot_isa)isa), gguf_dtype_name(t), bad_row);
			free(want);
			free(got);
		}
	}
}

/* ---- quantizing block ranges: the CPU backend cuts each row into block ranges made on
 * different threads (backend_cpu.c's matmul prologue); each range alone must give the same
 * bytes as that part of the whole row, at every level ---- */

static void test_quantize_ranges(void)
{
	enum { K = 2048 };
	static const enum gguf_dtype ts[3] = {GGUF_DTYPE_Q8_0, GGUF_DTYPE_Q4_1, GGUF_DTYPE_Q4_K};
	float x[K];
	for (int i = 0; i < K; i++)
		x[i] = gauss() * (i % 300 == 7 ? 40.0f : 1.0f);
	for (int isa = 0; isa < QDOT_N_ISA; isa++) {
		if (!qdot_supported((enum qdot_isa)isa))
			continue;
		for (int ti = 0; ti < 3; ti++) {
			const enum gguf_dtype t = ts[ti];
			const int64_t be = quant_block_elems(t), nb = K / be;
			const size_t n = qdot_act_row_bytes(t, K), bb = qdot_act_row_bytes(t, be);
			uint8_t *want = malloc(n), *got = malloc(n);
			qdot_quantize_row_isa((enum qdot_isa)isa, t, x, K, want);
			int bad = -1;
			/* cuts into 2, 3 (uneven) and nb ranges */
			const int64_t cuts[3] = {2, 3, nb};
			for (int c = 0; c < 3; c++) {
				const int64_t per = (nb + cuts[c] - 1) / cuts[c];
				memset(got, 0xA5, n);
				for (int64_t b0 = 0; b0 < nb; b0 += per) {
					const int64_t b1 = b0 + per < nb ? b0 + per : nb;
					qdot_quantize_row_isa((enum qdot_isa)isa, t, x + b0 * be,
							      (b1 - b0) * be, got + (size_t)b0 * bb);
				}
				if (memcmp(want, got, n) != 0 && bad < 0)
					bad = (int)cuts[c];
			}
			CHECK(bad < 0, "%s %s: block ranges quantized alone give the whole row's "
				       "bytes (first failing cut into %d)",
			      qdot_isa_name((enum qdot_isa)isa), gguf_dtype_name(t), bad);
			free(want);
			free(got);
		}
	}
}

/* ---- every vector level equals the portable code, in every tile ---- */

static void test_levels(void)
{
	int n_isa = 0;
	for (int isa = 1; isa < QDOT_N_ISA; isa++) {
		if (!qdot_supported((enum qdot_isa)isa)) {
			printf("qdot level %s: not on this processor, not tested\n",
			       qdot_isa_name((enum qdot_isa)isa));
			continue;
		}
		n_isa++;
		/* k of 1, 3 and 7 blocks: a tile's first block is its last, and longer rows */
		for (size_t c = 0; c < 3 * N_TYPES; c++) {
			enum gguf_dtype t = types[c / 3];
			/* 13 rows: Q8_0's 8-row decode tile, a 4-row one and single rows */
			const int64_t k = quant_block_elems(t) * (c % 3 == 0 ? 1 : c % 3 == 1 ? 3 : 7),
				      rows = 13;
			const int32_t nt = 9;
			const size_t ldq = qdot_act_row_bytes(t, k);
			void *w = random_blocks(t, rows * k / quant_block_elems(t));
			uint8_t *a = malloc(ldq * nt);
			float x[7 * 256];
			for (int32_t j = 0; j < nt; j++) {
				for (int64_t i = 0; i < k; i++)
					x[i] = gauss() * (i % 29 == 0 ? 5.0f : 1.0f);
				qdot_quantize_row(t, x, k, a + j * ldq);
			}
			float yp[9 * 13], yv[9 * 13];
			qdot_matmul(QDOT_PORTABLE, t, w, k, 0, rows, a, ldq, nt, yp, rows);
			bool same = true;
			/* every token count (tiles of 4 / 1 tokens; 1, 2, 4, 8 rows), row range
			 */
			for (int32_t n = 1; n <= nt; n++)
				for (int64_t r0 = 0; r0 < 3; r0++) {
					for (int i = 0; i < 9 * 13; i++)
						yv[i] = NAN;
					qdot_matmul((enum qdot_isa)isa, t, w, k, r0, rows - r0 % 2,
						    a, ldq, n, yv, rows);
					for (int32_t j = 0; j < n; j++)
						for (int64_t r = r0; r < rows - r0 % 2; r++)
							same &= !memcmp(&yv[j * rows + r],
									&yp[j * rows + r], 4);
				}
			CHECK(same, "%s %s, k %lld: bitwise the portable results in every tile",
			      qdot_isa_name((enum qdot_isa)isa), gguf_dtype_name(t), (long long)k);
			free(w);
			free(a);
		}
	}
	printf("qdot: %d vector level(s) tested, best %s\n", n_isa, qdot_isa_name(qdot_detect()));
}

/* The batched K-quant path blocks tokens and rows for the caches (qdot_simd.inc,
 * Q(mmk46b)): at k = 8192 a token block is 4 tokens and a row block 84 (Q4_K), 68 (Q5_K),
 * 58 (Q6_K), 110 (Q3_K), 146 (Q2_K) or 90 (IQ4_XS) rows, so 150 rows from row 1 and 6 or 9 tokens
 * cross both kinds of block with leftovers (an odd last row block, a token block of 2 or 1). Rows
 * of 129 blocks take Q4_K's and Q5_K's path without Q(k4_bt) (at most 128). Every level
 * gives the portable bits. */
static void test_blocks(void)
{
	static const enum gguf_dtype kt[] = {GGUF_DTYPE_Q2_K, GGUF_DTYPE_Q3_K, GGUF_DTYPE_Q4_K,
					     GGUF_DTYPE_Q5_K, GGUF_DTYPE_Q6_K, GGUF_DTYPE_IQ4_XS};
	enum { NKT = sizeof kt / sizeof kt[0] };
	static const int64_t shape[2][2] = {{8192, 150}, {129 * 256, 6}}; /* k, rows */
	const int32_t nt = 9;
	for (size_t c = 0; c < 2 * NKT; c++) {
		const enum gguf_dtype t = kt[c % NKT];
		const int64_t k = shape[c / NKT][0], rows = shape[c / NKT][1];
		const size_t ldq = qdot_act_row_bytes(t, k);
		void *w = random_blocks(t, rows * k / 256);
		uint8_t *a = malloc(ldq * nt);
		float *x = malloc(sizeof(float) * k), *yp = malloc(sizeof(float) * nt * rows),
		      *yv = malloc(sizeof(float) * nt * rows);
		for (int32_t j = 0; j < nt; j++) {
			for (int64_t i = 0; i < k; i++)
				x[i] = gauss();
			qdot_quantize_row(t, x, k, a + j * ldq);
		}
		qdot_matmul(QDOT_PORTABLE, t, w, k, 0, rows, a, ldq, nt, yp, rows);
		for (int isa = 1; isa < QDOT_N_ISA; isa++) {
			if (!qdot_supported((enum qdot_isa)isa))
				continue;
			bool same = true;
			for (int32_t n = 6; n <= nt; n += 3) {
				for (int64_t i = 0; i < nt * rows; i++)
					yv[i] = NAN;
				qdot_matmul((enum qdot_isa)isa, t, w, k, 1, rows, a, ldq, n, yv, rows);
				for (int32_t j = 0; j < n; j++)
					for (int64_t r = 1; r < rows; r++)
						same &= !memcmp(&yv[j * rows + r], &yp[j * rows + r], 4);
			}
			CHECK(same, "%s %s, k %lld, %lld rows: bitwise the portable results across "
				    "token and row blocks",
			      qdot_isa_name((enum qdot_isa)isa), gguf_dtype_name(t), (long long)k,
			      (long long)rows - 1);
		}
		free(w);
		free(a);
		free(x);
		free(yp);
		free(yv);
	}
}

int main(void)
{
	test_ints();
	test_act_values();
	test_hand();
	test_vs_double();
	test_llamacpp();
	test_quantize_levels();
	test_quantize_ranges();
	test_levels();
	test_blocks();
	return check_summary();
}
