/* test_quant: the block formats' dequantization (model/quant.h) against llama.cpp's own,
 * bit for bit: ggml's to_float of each type from the libggml-base.so that node-llama-cpp
 * installs under bench/node_modules (loaded at run time; skipped visibly without it, a
 * failure under CI=true), on random blocks and on blocks that ggml's reference quantizer
 * made from Gaussian data; plus hand-derived values that need no llama.cpp, and the
 * sizes gguf_row_bytes gives. */
#include "model/quant.h"

#include <dlfcn.h>
#include <stdbool.h>

#include "model/half.h"
#include "check.h"
#include "quant_util.h"

#define GGML_LIB "bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"

/* ggml.h's struct ggml_type_traits (v0.5.0's llama.cpp); checked against the type's
 * name, block size and bytes before use. */
struct ggml_traits {
	const char *type_name;
	int64_t blck_size;
	int64_t blck_size_interleave;
	size_t type_size;
	bool is_quantized;
	void (*to_float)(const void *x, float *y, int64_t k);
	void (*from_float_ref)(const float *x, void *y, int64_t k);
};

static const enum gguf_dtype types[] = {
    GGUF_DTYPE_Q4_0,   GGUF_DTYPE_Q4_1,	   GGUF_DTYPE_Q5_0,  GGUF_DTYPE_Q5_1,	 GGUF_DTYPE_Q8_0,
    GGUF_DTYPE_Q2_K,   GGUF_DTYPE_Q3_K,	   GGUF_DTYPE_Q4_K,  GGUF_DTYPE_Q5_K,	 GGUF_DTYPE_Q6_K,
    GGUF_DTYPE_IQ4_NL, GGUF_DTYPE_IQ4_XS,  GGUF_DTYPE_MXFP4, GGUF_DTYPE_IQ2_XXS, GGUF_DTYPE_IQ2_XS,
    GGUF_DTYPE_IQ2_S,  GGUF_DTYPE_IQ3_XXS, GGUF_DTYPE_IQ3_S, GGUF_DTYPE_IQ1_S,	 GGUF_DTYPE_IQ1_M};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

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

static void test_hand(void)
{
	/* Q4_0, d = 0.5: low nibble 1 -> (1 - 8) * 0.5, high nibble 12 -> (12 - 8) * 0.5 */
	struct quant_q4_0 b0 = {.d = 0x3800};
	b0.qs[0] = 0xC1;
	float y[256];
	quant_dequant(GGUF_DTYPE_Q4_0, &b0, y, 32);
	CHECK(y[0] == -3.5f && y[16] == 2.0f && y[1] == -4.0f, "q4_0: %g %g %g", y[0], y[16],
	      y[1]);
	/* Q5_0: qh bit 0 set adds 16 to element 0: (1 | 16) - 16 = 1 */
	struct quant_q5_0 b5 = {.d = 0x3C00, .qh = {1, 0, 0, 0}};
	b5.qs[0] = 0x01;
	quant_dequant(GGUF_DTYPE_Q5_0, &b5, y, 32);
	CHECK(y[0] == 1.0f && y[16] == -16.0f, "q5_0: %g %g", y[0], y[16]);
	/* Q4_K: group 0 scale 2, min 3 (scales[0] = 2, scales[4] = 3), d = 1, dmin = 0.5:
	 * element 0 with nibble 5 -> 1 * 2 * 5 - 0.5 * 3 = 8.5; group 1 (high nibbles,
	 * scale scales[1] = 0) -> -0.5 * min (scales[5] = 4) = -2 */
	struct quant_q4_k bk = {.d = 0x3C00, .dmin = 0x3800};
	bk.scales[0] = 2, bk.scales[4] = 3, bk.scales[5] = 4;
	bk.qs[0] = 0x75;
	quant_dequant(GGUF_DTYPE_Q4_K, &bk, y, 256);
	CHECK(y[0] == 8.5f && y[32] == -2.0f && y[1] == -1.5f, "q4_K: %g %g %g", y[0], y[32],
	      y[1]);
	/* Q6_K: element 0 = d * scales[0] * ((ql & 15 | (qh & 3) << 4) - 32) = 2 * (63 - 32) */
	struct quant_q6_k b6 = {.d = 0x3C00};
	b6.scales[0] = 2;
	b6.ql[0] = 0x0F, b6.qh[0] = 0x03;
	quant_dequant(GGUF_DTYPE_Q6_K, &b6, y, 256);
	CHECK(y[0] == 62.0f && y[1] == 2.0f * -32 && y[32] == 0.0f, "q6_K: %g %g %g", y[0],
	      y[1], y[32]);
	/* IQ4_NL: nibble 0 -> -127 d, nibble 15 -> 113 d */
	struct quant_iq4_nl bn = {.d = 0x3C00};
	bn.qs[0] = 0xF0;
	quant_dequant(GGUF_DTYPE_IQ4_NL, &bn, y, 32);
	CHECK(y[0] == -127.0f && y[16] == 113.0f, "iq4_nl: %g %g", y[0], y[16]);
	/* MXFP4, e = 127 (scale 1: ggml's halved 2^-1 times its doubled codes): code 1 -> 0.5,
	 * 7 -> 6, 9 -> -0.5, 15 -> -6; e = 130: code 3 -> 8 * 1.5 = 12; e = 0: 2^-127 * 6 */
	struct quant_mxfp4 bm[3] = {{.e = 127}, {.e = 130}, {.e = 0}};
	bm[0].qs[0] = 0x71, bm[0].qs[1] = 0xF9;
	bm[1].qs[0] = 0x03;
	bm[2].qs[0] = 0x07;
	quant_dequant(GGUF_DTYPE_MXFP4, bm, y, 96);
	CHECK(y[0] == 0.5f && y[16] == 6.0f && y[1] == -0.5f && y[17] == -6.0f && y[2] == 0.0f &&
		  y[32] == 12.0f && y[64] == ldexpf(6.0f, -127),
	      "mxfp4: %g %g %g %g %g %g %g", y[0], y[16], y[1], y[17], y[2], y[32], y[64]);
	/* sizes per row, and rows that are not whole blocks */
	CHECK(gguf_row_bytes(GGUF_DTYPE_Q4_K, 4096) == 16 * 144 &&
		  gguf_row_bytes(GGUF_DTYPE_Q6_K, 256) == 210 &&
		  gguf_row_bytes(GGUF_DTYPE_IQ4_XS, 512) == 272 &&
		  gguf_row_bytes(GGUF_DTYPE_Q5_1, 64) == 48 &&
		  gguf_row_bytes(GGUF_DTYPE_MXFP4, 2880) == 90 * 17 &&
		  gguf_row_bytes(GGUF_DTYPE_Q4_K, 128) == 0 && gguf_row_bytes(GGUF_DTYPE_Q4_0, 48) == 0,
	      "row bytes");
}

/* quant_dequant == ggml's to_float, bitwise, on n_blocks blocks at src */
static bool same_as_ggml(const struct ggml_traits *tr, enum gguf_dtype t, const void *src,
			 int64_t n, float *a, float *b)
{
	quant_dequant(t, src, a, n);
	tr->to_float(src, b, n);
	for (int64_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], 4) != 0) {
			fprintf(stderr, "%s element %lld: ours %.9g, ggml %.9g\n", gguf_dtype_name(t),
				(long long)i, a[i], b[i]);
			return false;
		}
	return true;
}

static void test_ggml(void)
{
	void *h = dlopen(GGML_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *ci = getenv("CI");
		if (ci && strcmp(ci, "true") == 0) {
			check_n_fail++;
			fprintf(stderr, "FAIL: %s is missing (npm ci --prefix bench)\n", GGML_LIB);
		} else {
			check_n_skip++;
			fprintf(stderr, "SKIP: %s not found (npm ci --prefix bench); the comparison "
					"with llama.cpp's dequantization is skipped\n",
				GGML_LIB);
		}
		return;
	}
	const struct ggml_traits *(*traits)(int) =
	    (const struct ggml_traits *(*)(int))dlsym(h, "ggml_get_type_traits");
	CHECK(traits != NULL, "ggml_get_type_traits in %s", GGML_LIB);
	if (!traits) {
		dlclose(h);
		return;
	}
	/* the i-quants' quantizers need their tables set up first (ggml_quantize_init), and
	 * IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M an importance matrix (ggml_quantize_chunk's) */
	void (*qinit)(int) = (void (*)(int))dlsym(h, "ggml_quantize_init");
	size_t (*qchunk)(int, const float *, void *, int64_t, int64_t, int64_t, const float *) =
	    (size_t(*)(int, const float *, void *, int64_t, int64_t, int64_t, const float *))dlsym(
		h, "ggml_quantize_chunk");
	CHECK(qinit && qchunk, "ggml_quantize_init and ggml_quantize_chunk in %s", GGML_LIB);
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		enum gguf_dtype t = types[ti];
		const struct ggml_traits *tr = traits((int)t);
		/* the lattice types: enough random blocks that every entry of their tables
		 * (IQ1's 2048) is read many times (65,536 points) */
		const int NB = quant_is_lattice(t) ? 2048 : 64;
		int be = quant_block_elems(t);
		size_t bb = quant_block_bytes(t);
		bool layout = tr && tr->type_name && !strcmp(tr->type_name, gguf_dtype_name(t)) &&
			      tr->blck_size == be && tr->type_size == bb && tr->to_float;
		CHECK(layout, "%s: ggml's traits say block %lld of %zu bytes", gguf_dtype_name(t),
		      tr ? (long long)tr->blck_size : -1LL, tr ? tr->type_size : 0);
		if (!layout)
			continue;
		int64_t n = (int64_t)NB * be;
		uint8_t *q = malloc(NB * bb);
		float *x = malloc(sizeof(float) * (size_t)n), *a = malloc(sizeof(float) * (size_t)n),
		      *b = malloc(sizeof(float) * (size_t)n);
		/* random bytes, finite scales of either sign */
		for (size_t i = 0; i < NB * bb; i++)
			q[i] = (uint8_t)rnd();
		for (int blk = 0; blk < NB; blk++)
			for (const int *f = quant_util_half_fields(t); *f >= 0; f++) {
				uint16_t hv = half_f32_to_f16(gauss() * 0.05f);
				memcpy(q + (size_t)blk * bb + *f, &hv, 2);
			}
		for (int blk = 0; blk < NB && t == GGUF_DTYPE_IQ1_M; blk++)
			quant_util_put_iq1m_scale(q + (size_t)blk * bb,
						  half_f32_to_f16(gauss() * 0.05f));
		CHECK(same_as_ggml(tr, t, q, n, a, b), "%s: random blocks equal ggml's bitwise",
		      gguf_dtype_name(t));
		/* what llama.cpp's quantizer writes for Gaussian weights (with outliers) */
		const bool lattice = quant_is_lattice(t);
		if (tr->from_float_ref || (lattice && qinit && qchunk)) {
			for (int64_t i = 0; i < n; i++)
				x[i] = gauss() * (i % 97 == 0 ? 0.2f : 0.02f);
			if (lattice) {
				float imat[256];
				for (int i = 0; i < 256; i++)
					imat[i] = 1.0f;
				qinit((int)t);
				qchunk((int)t, x, q, 0, NB, 256, imat);
			} else {
				tr->from_float_ref(x, q, n);
			}
			bool same = same_as_ggml(tr, t, q, n, a, b);
			double err = 0, mag = 0;
			for (int64_t i = 0; i < n; i++) {
				err += (a[i] - x[i]) * (double)(a[i] - x[i]);
				mag += (double)x[i] * x[i];
			}
			/* the quantizer's own round trip: relative rms error well under 1 for
			 * every type (2-bit Q2_K ~0.3; IQ1_S, 1.56 bits a weight, ~0.6) */
			CHECK(same && sqrt(err / mag) < (lattice ? 0.8 : 0.5),
			      "%s: quantized blocks equal ggml's bitwise (rel. rms error %.4f)",
			      gguf_dtype_name(t), sqrt(err / mag));
		}
		free(q);
		free(x);
		free(a);
		free(b);
	}
	dlclose(h);
}

int main(void)
{
	test_hand();
	test_ggml();
	return check_summary();
}
