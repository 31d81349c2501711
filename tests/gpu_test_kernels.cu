/* gpu_test_kernels: every kernel of gpu/ against a CPU reference on fresh random inputs at
 * several sizes (llm.c's method). Tolerances are stated and justified next to each check.
 * Without a CUDA device it prints a SKIP line and "0 passed, 0 failed" and exits 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_ops.cuh"
#include "gpu/grid_sync.cuh"
#include "gpu/moe.cuh"

extern "C" {
#include "cpu/cpu_deltanet.h"
#include "model/half.h"
#include "model/moe.h"
#include "model/quant.h"
#include "sample/sampler.h"
#include "gpu/plugin.h"
}
#include "check.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd_u32(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}
static float rnd_uniform(float lo, float hi) /* [lo, hi) */
{
	return lo + (hi - lo) * (float)(rnd_u32() & 0xffffff) / 16777216.0f;
}

#define REQUIRE(call)                                                                              \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
				cudaGetErrorString(e_));                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static void *dev_upload(const void *src, size_t bytes)
{
	void *d = NULL;
	REQUIRE(cudaMalloc(&d, bytes ? bytes : 1));
	if (bytes)
		REQUIRE(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice));
	return d;
}

template <typename V> static V *dev_vec(const std::vector<V> &v)
{
	return (V *)dev_upload(v.data(), v.size() * sizeof(V));
}

template <typename V> static std::vector<V> dev_download(const void *d, size_t n)
{
	std::vector<V> h(n);
	REQUIRE(cudaDeviceSynchronize());
	REQUIRE(cudaMemcpy(h.data(), d, n * sizeof(V), cudaMemcpyDeviceToHost));
	return h;
}

/* storage-type helpers on the host: element i of a dt buffer as float, and the rounding
 * of a float to dt (round-to-nearest-even, as the device does) */
static float st_round(enum gpu_dtype dt, float v)
{
	if (dt == GPU_F16)
		return half_f16_to_f32(half_f32_to_f16(v));
	if (dt == GPU_BF16)
		return half_bf16_to_f32(half_f32_to_bf16(v));
	return v;
}

static std::vector<uint8_t> st_pack(enum gpu_dtype dt, const std::vector<float> &v)
{
	std::vector<uint8_t> out(v.size() * gpu_dtype_size(dt));
	for (size_t i = 0; i < v.size(); i++) {
		if (dt == GPU_F32) {
			memcpy(&out[i * 4], &v[i], 4);
		} else {
			uint16_t h = dt == GPU_F16 ? half_f32_to_f16(v[i]) : half_f32_to_bf16(v[i]);
			memcpy(&out[i * 2], &h, 2);
		}
	}
	return out;
}

static std::vector<float> st_unpack(enum gpu_dtype dt, const std::vector<uint8_t> &b)
{
	size_t es = gpu_dtype_size(dt);
	std::vector<float> out(b.size() / es);
	for (size_t i = 0; i < out.size(); i++) {
		if (dt == GPU_F32) {
			memcpy(&out[i], &b[i * 4], 4);
		} else {
			uint16_t h;
			memcpy(&h, &b[i * 2], 2);
			out[i] = dt == GPU_F16 ? half_f16_to_f32(h) : half_bf16_to_f32(h);
		}
	}
	return out;
}

static std::vector<float> dev_download_st(enum gpu_dtype dt, const void *d, size_t n)
{
	return st_unpack(dt, dev_download<uint8_t>(d, n * gpu_dtype_size(dt)));
}

static std::vector<float> rand_vec(size_t n, float lo, float hi)
{
	std::vector<float> v(n);
	for (auto &x : v)
		x = rnd_uniform(lo, hi);
	return v;
}

/* Compares got with want element-wise under |g - w| <= atol + rtol |w|; one CHECK per
 * call, printing the worst element and the first mismatches. */
static void check_close(const char *what, const std::vector<float> &got,
			const std::vector<float> &want, double atol, double rtol)
{
	size_t bad = 0, worst = 0;
	double worst_ex = -1.0;
	for (size_t i = 0; i < want.size(); i++) {
		if (got[i] == want[i] || (isnan(got[i]) && isnan(want[i])))
			continue; /* equal, infinities included */
		double d = fabs((double)got[i] - (double)want[i]);
		double lim = atol + rtol * fabs((double)want[i]);
		double ex = d - lim;
		if (!(d <= lim) || isnan(got[i]) != isnan(want[i])) {
			if (bad < 3)
				fprintf(stderr, "  %s[%zu] = %.9g, want %.9g\n", what, i, got[i],
					want[i]);
			bad++;
		}
		if (ex > worst_ex || worst_ex < 0) {
			worst_ex = ex;
			worst = i;
		}
	}
	CHECK(bad == 0 && got.size() == want.size(),
	      "%s: %zu of %zu elements out of tolerance (atol %g, rtol %g); worst [%zu] %.9g vs "
	      "%.9g",
	      what, bad, want.size(), atol, rtol, worst, want.empty() ? 0.0 : got[worst],
	      want.empty() ? 0.0 : want[worst]);
}

/* Tolerance of a value rounded to dt after an fp32 computation that is itself accurate
 * to ~1e-6 relative, compared with a reference rounded to dt too: when the exact value
 * sits next to a rounding boundary the two round to neighbours, one ulp apart. An ulp is
 * 2^-7 relative at most for bf16 (8 significant bits) and 2^-10 for f16 (11 bits). */
static double st_rtol(enum gpu_dtype dt)
{
	return dt == GPU_F32 ? 2e-6 : dt == GPU_F16 ? 1.0 / 1024 : 1.0 / 128;
}

static const enum gpu_dtype all_dt[3] = {GPU_F32, GPU_F16, GPU_BF16};

/* ---- weights ---- */

static void test_convert(void)
{
	const int types[4] = {0, 1, 30, 8};
	const uint64_t sizes[2] = {32, 32 * 1237};
	for (int ti = 0; ti < 4; ti++)
		for (uint64_t n : sizes)
			for (enum gpu_dtype dt : all_dt) {
				int t = types[ti];
				std::vector<uint8_t> raw;
				std::vector<float> val(n);
				if (t == 0) {
					raw.resize(n * 4);
					for (uint64_t i = 0; i < n; i++) {
						val[i] = rnd_uniform(-3, 3);
						memcpy(&raw[i * 4], &val[i], 4);
					}
				} else if (t == 1 || t == 30) {
					raw.resize(n * 2);
					for (uint64_t i = 0; i < n; i++) {
						uint16_t h = (uint16_t)rnd_u32();
						if (t == 1 && ((h >> 10) & 0x1f) == 0x1f)
							h &= 0xbfff; /* no inf/nan */
						if (t == 30 && ((h >> 7) & 0xff) == 0xff)
							h &= 0xbfff;
						memcpy(&raw[i * 2], &h, 2);
						val[i] = t == 1 ? half_f16_to_f32(h)
								: half_bf16_to_f32(h);
					}
				} else {
					raw.resize(n / 32 * 34);
					for (uint64_t b = 0; b < n / 32; b++) {
						uint16_t d =
						    half_f32_to_f16(rnd_uniform(1e-4f, 0.05f));
						memcpy(&raw[b * 34], &d, 2);
						for (int j = 0; j < 32; j++) {
							int8_t q = (int8_t)(rnd_u32() & 0xff);
							raw[b * 34 + 2 + j] = (uint8_t)q;
							val[b * 32 + j] =
							    half_f16_to_f32(d) * (float)q;
						}
					}
				}
				void *src = dev_upload(raw.data(), raw.size());
				void *dst;
				REQUIRE(cudaMalloc(&dst, n * gpu_dtype_size(dt)));
				REQUIRE(gpu_convert_weights(src, t, n, dst, dt, 0));
				std::vector<float> got = dev_download_st(dt, dst, n);
				std::vector<float> want(n);
				for (uint64_t i = 0; i < n; i++)
					want[i] = st_round(dt, val[i]);
				/* exact: both sides are one correctly rounded conversion */
				char what[64];
				snprintf(what, sizeof what, "convert type %d -> %s, n %llu", t,
					 gpu_dtype_name(dt), (unsigned long long)n);
				check_close(what, got, want, 0.0, 0.0);
				cudaFree(src);
				cudaFree(dst);
			}
}

static void test_synth(void)
{
	const uint64_t n = 1 << 20;
	float *a, *b;
	REQUIRE(cudaMalloc(&a, n * 4));
	REQUIRE(cudaMalloc(&b, n * 4));
	REQUIRE(gpu_synth_weights(a, GPU_F32, n, 42, 3, 0.02f, 0));
	std::vector<float> va = dev_download<float>(a, n);
	double s = 0, ss = 0;
	for (float x : va) {
		s += x;
		ss += (double)x * x;
	}
	double mean = s / n, sd = sqrt(ss / n - mean * mean);
	/* the mean of 2^20 N(0, 0.02) values has a standard error of 2e-5: 1e-4 is 5 sigma;
	 * the sample sd's standard error is 0.02/sqrt(2n) = 1.4e-5: 1% (2e-4) is 14 sigma */
	CHECK(fabs(mean) < 1e-4, "synthetic mean %g", mean);
	CHECK(fabs(sd - 0.02) < 2e-4, "synthetic sd %g", sd);
	REQUIRE(gpu_synth_weights(b, GPU_F32, n, 42, 3, 0.02f, 0));
	std::vector<float> vb = dev_download<float>(b, n);
	CHECK(va == vb, "synthetic weights are not deterministic");
	REQUIRE(gpu_synth_weights(b, GPU_F32, n, 42, 4, 0.02f, 0));
	vb = dev_download<float>(b, n);
	size_t same = 0;
	for (uint64_t i = 0; i < n; i++)
		same += va[i] == vb[i];
	CHECK(same < 100, "tensors 3 and 4 share %zu values", same);
	REQUIRE(gpu_synth_weights(b, GPU_BF16, 1000, 42, 5, 0.0f, 0));
	std::vector<float> ones = dev_download_st(GPU_BF16, b, 1000);
	check_close("synthetic norm weights", ones, std::vector<float>(1000, 1.0f), 0, 0);
	cudaFree(a);
	cudaFree(b);
}

/* ---- embed, rmsnorm, rope, kv_write, swiglu ---- */

static void test_embed(void)
{
	for (enum gpu_dtype dt : all_dt) {
		int V = 1000, E = 96, n = 37;
		std::vector<float> tab = rand_vec((size_t)V * E, -1, 1);
		for (auto &x : tab)
			x = st_round(dt, x);
		std::vector<int32_t> tok(n);
		for (auto &t : tok)
			t = (int32_t)(rnd_u32() % V);
		tok[0] = V - 1;
		/* tokens the previous sampling call drew, on the device: -1 - k names drawn[k];
		 * an id outside the vocabulary (a NaN row's) feeds token 0 */
		struct sampler_result drawn[5] = {};
		const int32_t drawn_ids[5] = {7, V - 2, -1, V, 3};
		for (int k = 0; k < 5; k++)
			drawn[k].token = drawn_ids[k];
		std::vector<int32_t> id = tok;
		const int32_t names[5] = {-1, -3, -4, -5, -2}, fed[5] = {7, 0, 0, 3, V - 2};
		for (int k = 0; k < 5; k++) {
			tok[1 + 7 * k] = names[k];
			id[1 + 7 * k] = fed[k];
		}
		auto packed = st_pack(dt, tab);
		void *dtab = dev_upload(packed.data(), packed.size());
		int32_t *dtok = dev_vec(tok);
		void *ddrawn = dev_upload(drawn, sizeof drawn);
		float *x;
		REQUIRE(cudaMalloc(&x, (size_t)n * E * 4));
		REQUIRE(gpu_embed(dtab, dt, dtok, (const struct sampler_result *)ddrawn, n, V, E, x,
				  0));
		std::vector<float> got = dev_download<float>(x, (size_t)n * E), want((size_t)n * E);
		for (int t = 0; t < n; t++)
			for (int i = 0; i < E; i++)
				want[(size_t)t * E + i] = tab[(size_t)id[t] * E + i];
		check_close("embed", got, want, 0, 0); /* a widening copy: exact */
		cudaFree(dtab);
		cudaFree(dtok);
		cudaFree(ddrawn);
		cudaFree(x);
	}
}

static void test_rmsnorm(void)
{
	const int sizes[3] = {64, 4096, 5123};
	for (int n : sizes)
		for (enum gpu_dtype dt : all_dt)
			for (int variant = 0; variant < 4; variant++) {
				/* 0: no delta; 1: delta + write-back; 2: gathered rows, no write;
				 * 3: delta + write-back without weights (olmo2: no norm) */
				int rows_in = 9;
				std::vector<float> x = rand_vec((size_t)rows_in * n, -2, 2);
				std::vector<float> dl = rand_vec((size_t)rows_in * n, -1, 1);
				std::vector<float> w = rand_vec(n, 0.5f, 1.5f);
				std::vector<int32_t> rows = {7, 0, 3};
				bool gather = variant == 2, delta = variant >= 1,
				     wb = variant == 1 || variant == 3, nonorm = variant == 3;
				int n_out = gather ? 3 : rows_in;
				float *dx = dev_vec(x), *dd = dev_vec(dl), *dw = dev_vec(w);
				int32_t *dr = dev_vec(rows);
				void *out;
				REQUIRE(cudaMalloc(&out, (size_t)n_out * n * 4));
				REQUIRE(gpu_add_rmsnorm(dx, delta ? dd : NULL, nonorm ? NULL : dw, 1e-5f,
							gather ? dr : NULL, n_out, n, wb, out, dt,
							0));
				std::vector<float> got =
				    dev_download_st(dt, out, (size_t)n_out * n);
				std::vector<float> want((size_t)n_out * n), xw = x;
				for (int i = 0; i < n_out; i++) {
					int r = gather ? rows[i] : i;
					std::vector<float> s(n);
					double ss = 0;
					for (int j = 0; j < n; j++) {
						s[j] = x[(size_t)r * n + j] +
						       (delta ? dl[(size_t)r * n + j] : 0.0f);
						ss += (double)s[j] * s[j];
						if (wb)
							xw[(size_t)r * n + j] = s[j];
					}
					float sc = (float)(1.0 / sqrt(ss / n + 1e-5));
					for (int j = 0; j < n; j++)
						want[(size_t)i * n + j] =
						    nonorm ? st_round(dt, s[j])
							   : st_round(dt, (s[j] * sc) * w[j]);
				}
				char what[96];
				snprintf(what, sizeof what, "add_rmsnorm n %d %s variant %d", n,
					 gpu_dtype_name(dt), variant);
				/* the double sum of squares differs from the reference only in its
				 * order (~1e-16), which can move the fp32 scale by one ulp */
				check_close(what, got, want, nonorm ? 0 : 1e-6,
					    nonorm ? 0 : st_rtol(dt)); /* no norm: one add, exact */
				std::vector<float> gx = dev_download<float>(dx, x.size());
				snprintf(what, sizeof what, "add_rmsnorm residual n %d variant %d",
					 n, variant);
				check_close(what, gx, xw, 0, 0); /* one fp32 add: exact */
				cudaFree(dx);
				cudaFree(dd);
				cudaFree(dw);
				cudaFree(dr);
				cudaFree(out);
			}
}

static void test_rope(void)
{
	struct {
		int n_head, n_head_kv, hd, rope_dim;
		bool neox;
	} cases[4] = {{8, 4, 8, 8, false},
		      {32, 8, 128, 128, false},
		      {4, 4, 64, 32, true},
		      {2, 1, 96, 64, false}};
	for (auto &cs : cases) {
		/* positions: 0, 4095, random below 9000 and the digits' edges (2047, 2048,
		 * 2^21 - 1, 2^21, INT32_MAX) */
		const int32_t edge[6] = {2047, 2048, (1 << 21) - 1, 1 << 21, 123456789, INT32_MAX};
		int n_tok = 17, ld = (cs.n_head + 2 * cs.n_head_kv) * cs.hd;
		std::vector<float> qkv = rand_vec((size_t)n_tok * ld, -1, 1);
		std::vector<int32_t> pos(n_tok);
		for (int t = 0; t < n_tok; t++)
			pos[t] = t == 0 ? 0 : t == 1 ? 4095 : t < 8 ? edge[t - 2] : (int32_t)(rnd_u32() % 9000);
		float *d = dev_vec(qkv);
		int32_t *dp = dev_vec(pos);
		int half = cs.rope_dim / 2;
		std::vector<double> freq(half);
		for (int i = 0; i < half; i++)
			freq[i] = pow(10000.0, -2.0 * i / cs.rope_dim);
		std::vector<float> tab(GPU_ROPE_TABLE_FLOATS(half));
		gpu_rope_table_fill(freq.data(), half, tab.data());
		float *dtab = dev_vec(tab);
		REQUIRE(gpu_rope(d, ld, dp, n_tok, cs.n_head, cs.n_head_kv, cs.hd, cs.rope_dim,
				 dtab, 1.0f, cs.neox, 0));
		std::vector<float> got = dev_download<float>(d, qkv.size()), want = qkv;
		std::vector<float> got_lo, want_lo, got_hi, want_hi;
		for (int t = 0; t < n_tok; t++)
			for (int h = 0; h < cs.n_head + cs.n_head_kv; h++) {
				for (int i = 0; i < half; i++) {
					/* the CPU backend's formula, independent of the table */
					double th =
					    (double)pos[t] * pow(10000.0, -2.0 * i / cs.rope_dim);
					float c = (float)cos(th), s = (float)sin(th);
					float *v = &want[(size_t)t * ld + (size_t)h * cs.hd];
					int a = cs.neox ? i : 2 * i,
					    b = cs.neox ? i + half : 2 * i + 1;
					float x0 = v[a], x1 = v[b];
					/* rounded products, as the CPU backend (no FMA) */
					volatile float p0 = x0 * c, p1 = x1 * s, p2 = x0 * s, p3 = x1 * c;
					v[a] = p0 - p1;
					v[b] = p2 + p3;
				}
				size_t o = (size_t)t * ld + (size_t)h * cs.hd;
				bool lo = pos[t] < 2048;
				(lo ? got_lo : got_hi).insert((lo ? got_lo : got_hi).end(), got.begin() + o, got.begin() + o + cs.hd);
				(lo ? want_lo : want_hi).insert((lo ? want_lo : want_hi).end(), want.begin() + o, want.begin() + o + cs.hd);
			}
		char what[80];
		/* below 2048 the table row is the CPU's (float)cos/sin itself: bitwise */
		snprintf(what, sizeof what, "rope hd %d rope_dim %d neox %d pos < 2048", cs.hd,
			 cs.rope_dim, cs.neox);
		check_close(what, got_lo, want_lo, 0, 0);
		/* beyond, two fp32 complex products (|x| <= 1: ~3 ulp of 1 in the rotated pair);
		 * at 2^31 the double reference's own angle carries ~2.4e-7 rad */
		snprintf(what, sizeof what, "rope hd %d rope_dim %d neox %d pos >= 2048", cs.hd,
			 cs.rope_dim, cs.neox);
		check_close(what, got_hi, want_hi, 6e-7, 0);
		cudaFree(dtab);
		cudaFree(d);
		cudaFree(dp);
	}
}

static void test_kv_write(void)
{
	for (enum gpu_dtype dt : all_dt) {
		int n_layer = 3, bs = 16, n_blocks = 10, kv_dim = 40, n_tok = 23,
		    ld = 3 * kv_dim + 5;
		int64_t block_elems = (int64_t)n_layer * 2 * bs * kv_dim;
		size_t pool_elems = (size_t)block_elems * n_blocks;
		std::vector<float> pool(pool_elems, 0.0f);
		auto packed = st_pack(dt, pool);
		void *dpool = dev_upload(packed.data(), packed.size());
		std::vector<float> qkv = rand_vec((size_t)n_tok * ld, -4, 4);
		std::vector<int32_t> slots(n_tok);
		std::vector<int> perm(n_blocks * bs);
		for (int i = 0; i < n_blocks * bs; i++)
			perm[i] = i;
		for (int i = n_blocks * bs - 1; i > 0; i--)
			std::swap(perm[i], perm[rnd_u32() % (i + 1)]);
		for (int t = 0; t < n_tok; t++)
			slots[t] = perm[t];
		float *dq = dev_vec(qkv);
		int32_t *ds = dev_vec(slots);
		int layer = 1, k_col = 2 * kv_dim, v_col = kv_dim + 3; /* any columns in the row */
		struct gpu_kv_layer kv = {(char *)dpool +
					      (size_t)layer * 2 * bs * kv_dim * gpu_dtype_size(dt),
					  block_elems, (int64_t)bs * kv_dim, bs, kv_dim};
		REQUIRE(gpu_kv_write(dq, ld, k_col, v_col, ds, n_tok, kv, dt, 0));
		std::vector<float> got = dev_download_st(dt, dpool, pool_elems);
		for (int t = 0; t < n_tok; t++) {
			int b = slots[t] / bs, s = slots[t] % bs;
			size_t k0 = (size_t)b * block_elems + (size_t)layer * 2 * bs * kv_dim +
				    (size_t)s * kv_dim;
			for (int d = 0; d < kv_dim; d++) {
				pool[k0 + d] = st_round(dt, qkv[(size_t)t * ld + k_col + d]);
				pool[k0 + (size_t)bs * kv_dim + d] =
				    st_round(dt, qkv[(size_t)t * ld + v_col + d]);
			}
		}
		check_close("kv_write", got, pool, 0, 0); /* one rounding each side: exact */
		cudaFree(dpool);
		cudaFree(dq);
		cudaFree(ds);
	}
}

static void test_bias(void)
{
	int n_tok = 37, width = 896 + 2 * 128, ld = width + 5; /* qwen2.5-0.5b's Q|K|V */
	std::vector<float> x = rand_vec((size_t)n_tok * ld, -3, 3), b = rand_vec(width, -2, 2);
	float *dx = dev_vec(x), *db = dev_vec(b);
	REQUIRE(gpu_bias_add(dx, ld, db, n_tok, width, 0));
	std::vector<float> got = dev_download<float>(dx, x.size()), want = x;
	for (int t = 0; t < n_tok; t++)
		for (int i = 0; i < width; i++)
			want[(size_t)t * ld + i] += b[i];
	/* one fp32 addition, correctly rounded on both sides: exact; the columns past width
	 * must be untouched */
	check_close("bias_add", got, want, 0, 0);
	cudaFree(dx);
	cudaFree(db);
}

static void test_swiglu(void)
{
	for (enum gpu_dtype dt : all_dt) {
		int n_tok = 13, n_ff = 172;
		std::vector<float> gu = rand_vec((size_t)n_tok * 2 * n_ff, -12, 12);
		gu[0] = -100.0f; /* expf overflow side */
		float *d = dev_vec(gu);
		void *out;
		REQUIRE(cudaMalloc(&out, (size_t)n_tok * n_ff * 4));
		REQUIRE(gpu_swiglu(d, n_tok, n_ff, out, dt, false, 0));
		std::vector<float> got = dev_download_st(dt, out, (size_t)n_tok * n_ff);
		std::vector<float> want((size_t)n_tok * n_ff);
		for (int t = 0; t < n_tok; t++)
			for (int i = 0; i < n_ff; i++) {
				float g = gu[(size_t)t * 2 * n_ff + i],
				      u = gu[(size_t)t * 2 * n_ff + n_ff + i];
				want[(size_t)t * n_ff + i] =
				    st_round(dt, g / (1.0f + expf(-g)) * u);
			}
		/* CUDA's expf is within 2 ulp of glibc's correctly rounded one: a few fp32
		 * ulps after the division and product */
		check_close("swiglu", got, want, 1e-30, dt == GPU_F32 ? 1e-6 : st_rtol(dt));
		cudaFree(d);
		cudaFree(out);
	}
}

/* gpu_gdn (qwen35's gated delta net) against the CPU backend's cpu_deltanet functions:
 * two sequences (5 and 7 rows, in slots 1 and 0 of 3) from random states, so that the
 * carried state, the slot mapping and the V-to-K head map (4 V heads over 2 K heads) all
 * count; head sizes 16 and 40 (not a warp multiple); padded projection rows; the states
 * left and the output in every storage type. */
static void test_gdn(void)
{
	for (int d : {16, 40})
		for (enum gpu_dtype dt : all_dt) {
			struct model_hparams hp = {};
			hp.gdn_conv = 4;
			hp.gdn_d = (uint32_t)d;
			hp.gdn_nk = 2;
			hp.gdn_nv = 4;
			hp.rms_eps = 1e-6f;
			const int nv = 4, VD = nv * d, CD = 2 * 2 * d + VD,
				  ld = CD + VD + 2 * nv + 3;
			const int n_tok = 12, slots = 3;
			const int64_t per = (int64_t)3 * CD + (int64_t)nv * d * d;
			const int32_t seq[6] = {0, 5, 1, 5, 7, 0};
			std::vector<float> proj = rand_vec((size_t)n_tok * ld, -2, 2);
			std::vector<float> state = rand_vec((size_t)slots * per, -0.5f, 0.5f);
			std::vector<float> w = rand_vec((size_t)CD * 4, -0.6f, 0.6f);
			std::vector<float> dta = rand_vec(2 * nv, -1, 1);
			for (int h = 0; h < nv; h++)
				dta[nv + h] = -0.1f - 0.3f * (float)h; /* ssm_a: negative */
			std::vector<float> norm = rand_vec(d, 0.5f, 1.5f);
			float *d_proj = dev_vec(proj), *d_state = dev_vec(state), *d_w = dev_vec(w);
			float *d_dta = dev_vec(dta), *d_norm = dev_vec(norm);
			int32_t *d_seq = (int32_t *)dev_upload(seq, sizeof seq);
			float *cbuf, *obuf;
			void *out;
			REQUIRE(cudaMalloc(&cbuf, (size_t)n_tok * CD * 4));
			REQUIRE(cudaMalloc(&obuf, (size_t)n_tok * VD * 4));
			REQUIRE(cudaMalloc(&out, (size_t)n_tok * VD * 4));
			struct gpu_gdn_args a = {d_proj, ld,	n_tok,	2,    d_seq, d_state,
						 per,	 d,	2,	nv,   4,     1e-6f,
						 d_w,	 d_dta, d_norm, cbuf, obuf,  out,
						 0 /* qwen35's K-head map (k_grouped: gpu_test_model's qwen3next) */};
			REQUIRE(gpu_gdn(&a, dt, 0));
			std::vector<float> got = dev_download_st(dt, out, (size_t)n_tok * VD);
			std::vector<float> got_st = dev_download<float>(d_state, state.size());
			std::vector<float> cb((size_t)n_tok * CD), ob((size_t)n_tok * VD);
			for (int i = 0; i < 2; i++) {
				const int t0 = seq[3 * i], n = seq[3 * i + 1];
				float *st = state.data() + (size_t)seq[3 * i + 2] * per;
				const float *pr = proj.data() + (size_t)t0 * ld;
				cpu_gdn_conv(&hp, st, w.data(), pr, ld, n,
					     cb.data() + (size_t)t0 * CD, CD, 0, CD);
				for (int t = t0; t < t0 + n; t++)
					cpu_gdn_qk_norm(&hp, cb.data() + (size_t)t * CD);
				for (int h = 0; h < nv; h++)
					cpu_gdn_recur(&hp, st, cb.data() + (size_t)t0 * CD, CD,
						      pr + CD + VD, pr + CD + VD + nv, ld,
						      dta.data(), dta.data() + nv, h, n,
						      ob.data() + (size_t)t0 * VD, VD);
			}
			std::vector<float> want((size_t)n_tok * VD);
			for (int t = 0; t < n_tok; t++) {
				cpu_gdn_out_norm(&hp, ob.data() + (size_t)t * VD,
						 proj.data() + (size_t)t * ld + CD, norm.data());
				for (int i = 0; i < VD; i++)
					want[(size_t)t * VD + i] =
					    st_round(dt, ob[(size_t)t * VD + i]);
			}
			/* CUDA's expf / logf within 2 ulp of glibc's, the squares summed in
			 * another order: a few fp32 ulps through the recurrence */
			check_close("gdn out", got, want, 1e-6,
				    dt == GPU_F32 ? 2e-5 : 2 * st_rtol(dt));
			check_close("gdn state", got_st, state, 1e-6, 2e-5);
			cudaFree(d_proj);
			cudaFree(d_state);
			cudaFree(d_w);
			cudaFree(d_dta);
			cudaFree(d_norm);
			cudaFree(d_seq);
			cudaFree(cbuf);
			cudaFree(obuf);
			cudaFree(out);
		}
}

/* gpu_xielu (apertus's FFN activation): values worked by hand for p = {an 2, ap 0.5, beta
 * 0.25, eps -1e-6}, both branches and the eps clamp, then a random row against the host
 * expression, every dtype. */
static void test_xielu(void)
{
	const float p[4] = {2.0f, 0.5f, 0.25f, -1e-6f};
	/* v > 0: 0.5 v^2 + 0.25 v; v <= 0: (expm1(min(v, -1e-6)) - v) * 2 + 0.25 v */
	const std::vector<float> v = {2.0f, 1.0f, 3.0f, 0.0f, -1e-7f, -1.0f, -3.0f, -30.0f};
	const double hand[] = {
	    2.5, 0.75, 5.25,
	    -1.9999990000003335e-6,	/* 2 expm1(-1e-6) */
	    -1.8249990000003335e-6,	/* 2 (expm1(-1e-6) + 1e-7) - 2.5e-8 */
	    0.48575888234288467,	/* 2 (e^-1 - 1 + 1) - 0.25 */
	    3.3495741367357279,	/* 2 (e^-3 + 2) - 0.75 */
	    50.500000000000185};	/* 2 (e^-30 + 29) - 7.5 */
	float *d = dev_vec(v);
	void *out;
	REQUIRE(cudaMalloc(&out, v.size() * 4));
	REQUIRE(gpu_xielu(d, 2, (int)v.size() / 2, p, out, GPU_F32, 0));
	std::vector<float> got = dev_download_st(GPU_F32, out, v.size());
	for (size_t i = 0; i < v.size(); i++)
		CHECK(fabs(got[i] - hand[i]) <= 5e-7 * fabs(hand[i]),
		      "xielu(%g) = %.9g, by hand %.9g", (double)v[i], (double)got[i], hand[i]);
	cudaFree(d);
	cudaFree(out);
	const float q[4] = {1.8132617f, 0.97407698f, 0.5f, -1e-6f}; /* apertus-tiny's layer 0 */
	for (enum gpu_dtype dt : all_dt) {
		int n_tok = 9, n_ff = 150;
		std::vector<float> u = rand_vec((size_t)n_tok * n_ff, -10, 10);
		float *du = dev_vec(u);
		REQUIRE(cudaMalloc(&out, u.size() * 4));
		REQUIRE(gpu_xielu(du, n_tok, n_ff, q, out, dt, 0));
		std::vector<float> g = dev_download_st(dt, out, u.size());
		std::vector<float> want(u.size());
		for (size_t i = 0; i < u.size(); i++) {
			volatile float x = u[i], a = q[1] * x, b = a * x, c = q[2] * x;
			volatile float e = expm1f(fminf(x, q[3])) - x, f = e * q[0];
			want[i] = st_round(dt, x > 0.0f ? b + c : f + c);
		}
		/* CUDA's expm1f within 1 ulp of glibc's: a few ulps after the products */
		check_close("xielu", g, want, 1e-30, dt == GPU_F32 ? 1e-6 : st_rtol(dt));
		cudaFree(du);
		cudaFree(out);
	}
}

/* ---- gemm ---- */

static void test_gemm(cublasHandle_t h)
{
	struct {
		int n_out, n_in, n_tok;
	} cases[5] = {{64, 64, 1}, {172, 64, 5}, {512, 64, 33}, {1000, 333, 17}, {4096, 4096, 7}};
	for (auto &cs : cases)
		for (enum gpu_dtype dt : all_dt) {
			std::vector<float> W = rand_vec((size_t)cs.n_out * cs.n_in, -1, 1);
			std::vector<float> x = rand_vec((size_t)cs.n_tok * cs.n_in, -1, 1);
			for (auto &v : W)
				v = st_round(dt, v);
			for (auto &v : x)
				v = st_round(dt, v);
			auto pw = st_pack(dt, W), px = st_pack(dt, x);
			void *dw = dev_upload(pw.data(), pw.size()),
			     *dx = dev_upload(px.data(), px.size());
			int ldy = cs.n_out + 3;
			float *dy;
			REQUIRE(cudaMalloc(&dy, (size_t)cs.n_tok * ldy * 4));
			cublasStatus_t s =
			    gpu_gemm(h, dw, dx, dy, cs.n_out, cs.n_in, cs.n_tok, ldy, dt);
			CHECK(s == CUBLAS_STATUS_SUCCESS, "gemm: %s", cublasGetStatusString(s));
			std::vector<float> got = dev_download<float>(dy, (size_t)cs.n_tok * ldy);
			std::vector<float> g2, want;
			for (int t = 0; t < cs.n_tok; t++)
				for (int r = 0; r < cs.n_out; r++) {
					double acc = 0;
					for (int i = 0; i < cs.n_in; i++)
						acc += (double)W[(size_t)r * cs.n_in + i] *
						       x[(size_t)t * cs.n_in + i];
					want.push_back((float)acc);
					g2.push_back(got[(size_t)t * ldy + r]);
				}
			char what[64];
			snprintf(what, sizeof what, "gemm %dx%dx%d %s", cs.n_out, cs.n_in, cs.n_tok,
				 gpu_dtype_name(dt));
			/* inputs are exactly representable in dt, products exact in fp32 for
			 * 16-bit inputs; fp32 accumulation of k terms of size <= 1 errs by about
			 * sqrt(k) * 2^-24 * sqrt(k) in the worst tree order: 4096 -> 2.4e-4.
			 * 16-bit inputs run on tensor cores, whose fp32 accumulation truncates
			 * (rounds toward zero) after each group of 8 (A100) or 16 (H100)
			 * products (Fasi et al. 2021; Khattak & Mikaitis 2025): up to one ulp of
			 * the running sum per group, a bias that adds up instead of cancelling.
			 * Simulating that on these inputs (n_in 4096, 8192 outputs) gives worst
			 * errors of 8.1e-4 (groups of 8) and 5.0e-4 (16), over the fp32 bound;
			 * 3e-7 * n_in (1.2e-3) covers them, and a wrong layout or a lost
			 * product (an error of |w x|, ~0.25 on average) still fails. */
			double atol = dt == GPU_F32 ? 6e-8 * cs.n_in : 3e-7 * cs.n_in;
			check_close(what, g2, want, atol, 1e-5);
			cudaFree(dw);
			cudaFree(dx);
			cudaFree(dy);
		}
}

/* ---- the resident path: GEMV from blocks, dequantize-then-GEMM, embedding rows ---- */

/* nblk random blocks of type t (as tests/gpu_test_dequant.cu makes them): random bytes,
 * each fp16 scale field finite and at most 0.5 in magnitude, either sign (MXFP4: its e8m0
 * exponent in [119, 130], scales 2^-9 .. 2^2) */
static std::vector<uint8_t> rand_blocks(enum gguf_dtype t, size_t n_elems)
{
	const size_t bb = quant_block_bytes(t), nblk = n_elems / quant_block_elems(t);
	std::vector<uint8_t> q(nblk * bb);
	for (auto &b : q)
		b = (uint8_t)rnd_u32();
	const int d_at = t == GGUF_DTYPE_Q6_K ? 208 : 0; /* Q4_K's dmin at 2 as well */
	for (size_t b = 0; t == GGUF_DTYPE_MXFP4 && b < nblk; b++)
		q[b * bb] = (uint8_t)(119 + rnd_u32() % 12);
	for (size_t b = 0; t != GGUF_DTYPE_MXFP4 && b < nblk; b++)
		for (int f = 0; f < (t == GGUF_DTYPE_Q4_K ? 2 : 1); f++) {
			uint16_t hv = (uint16_t)(rnd_u32() & 0xBBFF);
			memcpy(&q[b * bb + d_at + 2 * f], &hv, 2);
		}
	return q;
}

/* A resident matrix of parts (type, rows) with rows of n_in: its blocks on the device in
 * *q, and its values dequantized on the host by core/model/quant.c (the reference,
 * independent of gpu/qblock.cuh), [n_out][n_in] in W. */
struct qmat_case {
	struct gpu_qmat q;
	std::vector<float> W;
	int n_out;
};
static qmat_case make_qmat(const std::vector<std::pair<enum gguf_dtype, int>> &parts, int n_in)
{
	qmat_case m;
	memset(&m.q, 0, sizeof m.q);
	m.n_out = 0;
	for (auto &pt : parts) {
		std::vector<float> w((size_t)pt.second * n_in);
		std::vector<uint8_t> b;
		if (pt.first == GGUF_DTYPE_BF16) { /* a BF16 part (gpu_qmat's type 30) */
			w = rand_vec(w.size(), -0.5f, 0.5f);
			for (auto &v : w)
				v = st_round(GPU_BF16, v);
			b = st_pack(GPU_BF16, w);
		} else {
			b = rand_blocks(pt.first, (size_t)pt.second * n_in);
			quant_dequant(pt.first, b.data(), w.data(), (int64_t)w.size());
		}
		m.W.insert(m.W.end(), w.begin(), w.end());
		const int i = m.q.n_part++;
		m.q.type[i] = (int)pt.first;
		m.q.rows[i] = pt.second;
		m.q.p[i] = dev_upload(b.data(), b.size());
		m.n_out += pt.second;
	}
	return m;
}
static void free_qmat(qmat_case &m)
{
	for (int i = 0; i < m.q.n_part; i++)
		cudaFree((void *)m.q.p[i]);
}

/* The inputs a GEMV sees, [n_tok][n_in]: x's rows (row stride ldx), or with the prologue
 * (pro) each row of res RMS-normalized (eps 1e-5), times nw, rounded to dt as the kernel
 * rounds what it stores. */
static std::vector<float> gemv_ref_inputs(enum gpu_dtype dt, bool pro, const std::vector<float> &x,
					  int ldx, const std::vector<float> &res,
					  const std::vector<float> &nw, int n_tok, int n_in)
{
	std::vector<float> in((size_t)n_tok * n_in);
	for (int t = 0; t < n_tok; t++) {
		double ss = 0;
		for (int i = 0; i < n_in; i++)
			ss += (double)res[(size_t)t * n_in + i] * res[(size_t)t * n_in + i];
		const float sc = (float)(1.0 / sqrt(ss / n_in + 1e-5));
		for (int i = 0; i < n_in; i++)
			in[(size_t)t * n_in + i] = pro ? st_round(dt, (res[(size_t)t * n_in + i] * sc) * nw[i])
						      : x[(size_t)t * ldx + i];
	}
	return in;
}

/* A GEMV's input in a: with the prologue (pro) the residual rows res normalized by norm
 * (eps 1e-5), else the rows x of stride ldx */
static void gemv_set_input(struct gpu_gemv_args *a, bool pro, const float *res, const float *norm,
			   const void *x, int ldx)
{
	if (pro) {
		a->res = res;
		a->norm = norm;
		a->eps = 1e-5f;
	} else {
		a->x = x;
		a->ldx = ldx;
	}
}

/* gpu_gemv from blocks (a.q) at every batch 1..8 against the host's double dot of
 * quant_dequant's values and the bf16 inputs: plain (Q8_0 alone; three parts: Q4_K, BF16
 * rows, Q8_0), with the prologue (Q6_K), and gate|up (Q4_K gate, Q6_K up) with the prologue
 * and SwiGLU. Widths of 3, 24 and 72 groups of 32 (fewer than, and not a multiple of, a
 * warp's 32 lanes), odd row counts. The weights enter the sums unrounded (fp32, bitwise
 * quant_dequant's), so with exact inputs the error is fp32 accumulation only: 4e-6 sum
 * |w x| as test_gemv; with the prologue an input may round one bf16 ulp the other way
 * (2^-11 sum |w x|, test_gemv's). A wrong scale, nibble or block stride moves outputs by
 * ~|w x|. */
static void test_gemv_q(void)
{
	const enum gpu_dtype dt = GPU_BF16;
	struct qcase {
		int variant; /* 0 plain, 1 prologue, 2 gate|up with the prologue */
		int n_in;
		std::vector<std::pair<enum gguf_dtype, int>> parts;
	} cases[] = {{0, 96, {{GGUF_DTYPE_Q8_0, 37}}},
		     {0, 768, {{GGUF_DTYPE_Q4_K, 10}, {GGUF_DTYPE_BF16, 4}, {GGUF_DTYPE_Q8_0, 7}}},
		     {1, 2304, {{GGUF_DTYPE_Q6_K, 21}}},
		     {2, 512, {{GGUF_DTYPE_Q4_K, 19}, {GGUF_DTYPE_Q6_K, 19}}}};
	for (auto &cs : cases) {
		qmat_case m = make_qmat(cs.parts, cs.n_in);
		const int n_in = cs.n_in, n_out = m.n_out, n_ff = n_out / 2;
		const bool pro = cs.variant >= 1, glu = cs.variant == 2;
		for (int n_tok = 1; n_tok <= 8; n_tok++) {
			const int ldx = n_in + 8;
			std::vector<float> x = rand_vec((size_t)n_tok * ldx, -1, 1);
			for (auto &v : x)
				v = st_round(dt, v);
			std::vector<float> res = rand_vec((size_t)n_tok * n_in, -2, 2);
			std::vector<float> nw = rand_vec(n_in, 0.5f, 1.5f);
			std::vector<float> in = gemv_ref_inputs(dt, pro, x, ldx, res, nw, n_tok, n_in);
			auto px = st_pack(dt, x);
			void *dx = dev_upload(px.data(), px.size());
			float *dres = dev_vec(res), *dnw = dev_vec(nw), *dy;
			const int ldy = n_out + 3;
			REQUIRE(cudaMalloc(&dy, (size_t)n_tok * ldy * 4));
			void *dact;
			REQUIRE(cudaMalloc(&dact, (size_t)n_tok * n_ff * 2 + 2));
			struct gpu_gemv_args a;
			memset(&a, 0, sizeof a);
			a.q = m.q;
			a.n_out = n_out;
			a.n_in = n_in;
			a.n_tok = n_tok;
			gemv_set_input(&a, pro, dres, dnw, dx, ldx);
			a.y = dy;
			a.ldy = ldy;
			a.glu = glu;
			a.act = dact;
			REQUIRE(gpu_gemv(&a, dt, n_tok % 2 ? 132 : 1, 0));
			std::vector<double> yv((size_t)n_tok * n_out), ya(yv.size());
			for (int t = 0; t < n_tok; t++)
				for (int o = 0; o < n_out; o++) {
					double acc = 0, aa = 0;
					for (int i = 0; i < n_in; i++) {
						double pr = (double)m.W[(size_t)o * n_in + i] *
							    in[(size_t)t * n_in + i];
						acc += pr;
						aa += fabs(pr);
					}
					yv[(size_t)t * n_out + o] = acc;
					ya[(size_t)t * n_out + o] = aa * (pro ? 1.0 / 2048 : 4e-6) + 1e-30;
				}
			std::vector<float> got, want, lim;
			if (!glu) {
				std::vector<float> gy = dev_download<float>(dy, (size_t)n_tok * ldy);
				for (int t = 0; t < n_tok; t++)
					for (int o = 0; o < n_out; o++) {
						got.push_back(gy[(size_t)t * ldy + o]);
						want.push_back((float)yv[(size_t)t * n_out + o]);
						lim.push_back((float)ya[(size_t)t * n_out + o]);
					}
			} else {
				got = dev_download_st(dt, dact, (size_t)n_tok * n_ff);
				for (int t = 0; t < n_tok; t++)
					for (int j = 0; j < n_ff; j++) {
						const size_t gi = (size_t)t * n_out + j, ui = gi + n_ff;
						double g = yv[gi], u = yv[ui], ac = g / (1.0 + exp(-g));
						want.push_back(st_round(dt, (float)(ac * u)));
						lim.push_back((float)(1.2 * ya[gi] * fabs(u) +
								      (fabs(ac) + 1e-3) * ya[ui] +
								      (2e-6 + st_rtol(dt)) * fabs(ac * u) + 1e-30));
					}
			}
			size_t bad = 0, worst = 0;
			for (size_t i = 0; i < want.size(); i++)
				if (!(fabs((double)got[i] - want[i]) <= lim[i]) && bad++ == 0)
					worst = i;
			CHECK(bad == 0,
			      "gemv_q %dx%d (%d parts, type %d first) n_tok %d variant %d: %zu of %zu "
			      "out of tolerance; first [%zu] %.9g vs %.9g (limit %.3g)",
			      n_out, n_in, m.q.n_part, m.q.type[0], n_tok, cs.variant, bad,
			      want.size(), worst, bad ? got[worst] : 0.0, bad ? want[worst] : 0.0,
			      bad ? lim[worst] : 0.0);
			cudaFree(dx);
			cudaFree(dres);
			cudaFree(dnw);
			cudaFree(dy);
			cudaFree(dact);
		}
		free_qmat(m);
	}
	/* refusals: another storage type; an odd part before the last without glu */
	qmat_case m = make_qmat({{GGUF_DTYPE_Q8_0, 3}, {GGUF_DTYPE_Q8_0, 2}}, 64);
	struct gpu_gemv_args b;
	memset(&b, 0, sizeof b);
	b.q = m.q;
	b.n_out = 5;
	b.n_in = 64;
	b.n_tok = 1;
	b.x = m.q.p[0]; /* aligned; not read */
	b.ldx = 64;
	b.y = (float *)m.q.p[0];
	b.ldy = 5;
	CHECK(gpu_gemv(&b, GPU_BF16, 132, 0) == cudaErrorInvalidValue, "gemv_q: odd first part");
	b.q.rows[0] = 2;
	b.q.rows[1] = 3;
	CHECK(gpu_gemv(&b, GPU_F16, 132, 0) == cudaErrorInvalidValue, "gemv_q: f16 inputs");
	CHECK(!gpu_qtype_resident(GGUF_DTYPE_Q4_K, 128) && gpu_qtype_resident(GGUF_DTYPE_Q8_0, 96) &&
		  !gpu_qtype_resident(GGUF_DTYPE_Q5_K, 256) &&
		  gpu_qtype_row_bytes(GGUF_DTYPE_Q6_K, 512) == 420 &&
		  gpu_qtype_row_bytes(GGUF_DTYPE_Q4_K, 512) == 288,
	      "gemv_q: resident types and row bytes");
	free_qmat(m);
}

/* gpu_gemm_q: three parts, Q6_K, BF16 and Q8_0 (6, 6, 7 rows), through a scratch of 6 rows
 * (slices of 6, 6, 6 and 1 rows, the last two cutting the Q8_0 part: four GEMMs) and of the
 * whole matrix (one), against the
 * host's double dot of quant_dequant's values rounded to bf16 (what the scratch holds)
 * and the bf16 inputs; test_gemm's tolerance for 16-bit inputs. */
static void test_gemm_q(cublasHandle_t h)
{
	const int n_in = 512, n_tok = 11;
	qmat_case m = make_qmat(
	    {{GGUF_DTYPE_Q6_K, 6}, {GGUF_DTYPE_BF16, 6}, {GGUF_DTYPE_Q8_0, 7}}, n_in);
	std::vector<float> x = rand_vec((size_t)n_tok * n_in, -1, 1);
	for (auto &v : x)
		v = st_round(GPU_BF16, v);
	auto px = st_pack(GPU_BF16, x);
	void *dx = dev_upload(px.data(), px.size()), *scratch;
	const size_t whole = (size_t)m.n_out * n_in * 2;
	REQUIRE(cudaMalloc(&scratch, whole));
	const int ldy = m.n_out + 5;
	float *dy;
	REQUIRE(cudaMalloc(&dy, (size_t)n_tok * ldy * 4));
	std::vector<float> want;
	for (int t = 0; t < n_tok; t++)
		for (int o = 0; o < m.n_out; o++) {
			double acc = 0;
			for (int i = 0; i < n_in; i++)
				acc += (double)st_round(GPU_BF16, m.W[(size_t)o * n_in + i]) *
				       x[(size_t)t * n_in + i];
			want.push_back((float)acc);
		}
	const size_t sizes[2] = {(size_t)6 * n_in * 2 + 100, whole};
	const int calls_want[2] = {4, 1};
	for (int k = 0; k < 2; k++) {
		REQUIRE(cudaMemset(dy, 0, (size_t)n_tok * ldy * 4));
		int calls = 0;
		cublasStatus_t st = gpu_gemm_q(h, &m.q, dx, dy, n_in, n_tok, ldy, scratch, sizes[k],
					       &calls, 0);
		CHECK(st == CUBLAS_STATUS_SUCCESS && calls == calls_want[k],
		      "gemm_q scratch %zu: %s, %d cuBLAS calls (want %d)", sizes[k],
		      cublasGetStatusString(st), calls, calls_want[k]);
		std::vector<float> gy = dev_download<float>(dy, (size_t)n_tok * ldy), got;
		for (int t = 0; t < n_tok; t++)
			for (int o = 0; o < m.n_out; o++)
				got.push_back(gy[(size_t)t * ldy + o]);
		char what[64];
		snprintf(what, sizeof what, "gemm_q scratch %zu", sizes[k]);
		check_close(what, got, want, 3e-7 * n_in, 1e-5);
	}
	CHECK(gpu_gemm_q(h, &m.q, dx, dy, n_in, n_tok, ldy, scratch, 100, NULL, 0) ==
		  CUBLAS_STATUS_INVALID_VALUE,
	      "gemm_q: a scratch smaller than a row");
	cudaFree(dx);
	cudaFree(dy);
	cudaFree(scratch);
	free_qmat(m);
}

/* gpu_qres_policy by hand: "1" / "0" decide; otherwise resident when 2 bytes a parameter
 * exceed half the free memory (8B on an 80 GiB card: 16 GB of 42.9 GB, BF16; 70B: 140 GB,
 * resident; 8B with 24 GiB free: 16 GB of 12.9 GB, resident; the boundary n = free / 4). */
static void test_qres_policy(void)
{
	const size_t G = (size_t)1 << 30;
	CHECK(gpu_qres_policy("1", 1, 80 * G), "qres: \"1\" always");
	CHECK(!gpu_qres_policy("0", 70000000000ull, 1), "qres: \"0\" never");
	CHECK(!gpu_qres_policy(NULL, 8000000000ull, 80 * G), "qres: 8B fits 80 GiB as BF16");
	CHECK(gpu_qres_policy(NULL, 70000000000ull, 80 * G), "qres: 70B on 80 GiB resident");
	CHECK(gpu_qres_policy(NULL, 8000000000ull, 24 * G), "qres: 8B on 24 GiB resident");
	CHECK(!gpu_qres_policy("auto", 8000000000ull, 80 * G), "qres: other values: the default");
	CHECK(!gpu_qres_policy(NULL, 20 * G, 80 * G), "qres: BF16 at exactly half");
	CHECK(gpu_qres_policy(NULL, 20 * G + 1, 80 * G), "qres: resident past half");
}

/* gpu_embed_blocks: gathered rows of a Q6_K and a Q4_K matrix (and a drawn token), bitwise
 * quant_dequant's rows */
static void test_embed_blocks(void)
{
	const int n_vocab = 9, n_embd = 512;
	const enum gguf_dtype types[2] = {GGUF_DTYPE_Q6_K, GGUF_DTYPE_Q4_K};
	for (enum gguf_dtype t : types) {
		qmat_case m = make_qmat({{t, n_vocab}}, n_embd);
		std::vector<int32_t> tok = {3, 0, 8, -1, 3};
		struct sampler_result drawn;
		memset(&drawn, 0, sizeof drawn);
		drawn.token = 5;
		int32_t *dt = dev_vec(tok);
		void *dd = dev_upload(&drawn, sizeof drawn);
		float *dxo;
		REQUIRE(cudaMalloc(&dxo, tok.size() * n_embd * 4));
		REQUIRE(gpu_embed_blocks(m.q.p[0], (int)t, dt, (const struct sampler_result *)dd,
					 (int)tok.size(), n_vocab, n_embd, dxo, 0));
		std::vector<float> got = dev_download<float>(dxo, tok.size() * n_embd);
		size_t bad = 0;
		for (size_t k = 0; k < tok.size(); k++) {
			const int id = tok[k] < 0 ? 5 : tok[k];
			bad += memcmp(&got[k * n_embd], &m.W[(size_t)id * n_embd], n_embd * 4) != 0;
		}
		CHECK(bad == 0, "embed_blocks %s: %zu of %zu rows not quant_dequant's",
		      gguf_dtype_name(t), bad, tok.size());
		cudaFree(dt);
		cudaFree(dd);
		cudaFree(dxo);
		free_qmat(m);
	}
}

/* ---- gemv ---- */

/* gpu_gemv (decode projections with the RMS-norm prologue and the SwiGLU/GELU epilogue)
 * against a double-precision host reference. The prologue's inputs are recomputed on the
 * host with the device's roundings (one fp32 add, the double sum of squares, the fp32
 * scale, (s * scale) * w rounded to dt), so the projection's inputs agree exactly but for
 * the sum of squares' order (~1e-16, which can move the fp32 scale by one ulp: one ulp of
 * dt on an input, covered by the tolerance below). Each output is then a sum of n_in
 * products; fp32 accumulation (each lane n_in / 32 fmas, then a 5-level tree) errs by at
 * most ~(n_in / 32 + 5) 2^-24 sum |w x| (Higham's bound); allowed: 2^-7 sum |w x| / 16 for
 * bf16 inputs off by an ulp, 4e-6 sum |w x| otherwise (a wrong row or a missing weight moves
 * an output by ~|w x| itself, far past it). */
static size_t gemv_xs, prop_optin; /* what gpu_gemv_init opted in to, and from (main) */
static void test_gemv(void)
{
	struct {
		int n_out, n_in;
	} cases[4] = {{1000, 264}, {37, 1032}, {2, 8}, {515, 4096}};
	int tok_sets[5] = {1, 2, 3, 5, 8}; /* NT = 1, 2, 4, 4, 8 */
	for (auto &cs : cases)
		for (enum gpu_dtype dt : all_dt)
			for (int n_tok : tok_sets)
				for (int variant = 0; variant < 4; variant++) {
					/* 0 plain; 1 prologue + delta + res_out; 2 prologue with
					 * gathered rows, no delta (the LM head); 3 gate|up with the
					 * prologue, silu (n_tok odd) or GELU */
					const bool pro = variant >= 1, glu = variant == 3;
					const bool gelu = glu && (n_tok % 2 == 0);
					const int n_in = cs.n_in;
					const int n_out = glu ? 2 * (cs.n_out / 2 + 1) : cs.n_out;
					if (!gpu_gemv_fits(n_tok, n_in, pro, dt, gemv_xs)) {
						/* the prologue's shared memory: gpu_gemv refuses */
						CHECK((size_t)n_tok * n_in * gpu_dtype_size(dt) >
							  gemv_xs,
						      "gemv_fits %d x %d", n_tok, n_in);
						continue;
					}
					if (cs.n_in == 4096 && (variant == 2 || n_tok == 2 || n_tok == 3))
						continue; /* the large case: fewer combinations */
					const int rows_in = 9, ldx = n_in + 16 / (int)gpu_dtype_size(dt);
					std::vector<float> W = rand_vec((size_t)n_out * n_in, -1, 1);
					for (auto &v : W)
						v = st_round(dt, v);
					std::vector<float> x = rand_vec((size_t)n_tok * ldx, -1, 1);
					for (auto &v : x)
						v = st_round(dt, v);
					std::vector<float> res = rand_vec((size_t)rows_in * n_in, -2, 2);
					std::vector<float> dl = rand_vec((size_t)rows_in * n_in, -1, 1);
					std::vector<float> nw = rand_vec(n_in, 0.5f, 1.5f);
					std::vector<int32_t> rows = {7, 0, 3, 8, 1, 2, 6, 5};
					const bool gather = variant == 2, delta = variant == 1 || glu;
					/* the inputs the projection must see, [n_tok][n_in] */
					std::vector<float> in((size_t)n_tok * n_in), sum_res = res;
					for (int t = 0; t < n_tok; t++) {
						if (!pro) {
							for (int i = 0; i < n_in; i++)
								in[(size_t)t * n_in + i] =
								    x[(size_t)t * ldx + i];
							continue;
						}
						const int r = gather ? rows[t] : t;
						std::vector<float> sv(n_in);
						double ss = 0;
						for (int i = 0; i < n_in; i++) {
							sv[i] = res[(size_t)r * n_in + i] +
								(delta ? dl[(size_t)r * n_in + i] : 0.0f);
							ss += (double)sv[i] * sv[i];
							sum_res[(size_t)r * n_in + i] = sv[i];
						}
						float sc = (float)(1.0 / sqrt(ss / n_in + 1e-5));
						for (int i = 0; i < n_in; i++)
							in[(size_t)t * n_in + i] =
							    st_round(dt, (sv[i] * sc) * nw[i]);
					}
					auto pw = st_pack(dt, W), px = st_pack(dt, x);
					void *dw = dev_upload(pw.data(), pw.size());
					void *dx = dev_upload(px.data(), px.size());
					float *dres = dev_vec(res), *ddl = dev_vec(dl), *dnw = dev_vec(nw);
					int32_t *drows = dev_vec(rows);
					float *dro;
					REQUIRE(cudaMalloc(&dro, res.size() * 4));
					REQUIRE(cudaMemset(dro, 0xff, res.size() * 4));
					const int ldy = n_out + 3, n_ff = n_out / 2;
					float *dy;
					REQUIRE(cudaMalloc(&dy, (size_t)n_tok * ldy * 4));
					void *dact;
					REQUIRE(cudaMalloc(&dact, (size_t)n_tok * n_ff * 4));
					struct gpu_gemv_args a;
					memset(&a, 0, sizeof a);
					a.W = dw;
					a.n_out = n_out;
					a.n_in = n_in;
					a.n_tok = n_tok;
					if (pro) {
						a.res = dres;
						a.delta = delta ? ddl : NULL;
						a.norm = dnw;
						a.eps = 1e-5f;
						a.rows = gather ? drows : NULL;
						a.res_out = variant == 1 || glu ? dro : NULL;
					} else {
						a.x = dx;
						a.ldx = ldx;
					}
					a.y = dy;
					a.ldy = ldy;
					a.glu = glu;
					a.gelu = gelu;
					a.act = dact;
					/* every other case a programmatic dependent launch (gpu/pdl.cuh):
					 * under gpu/emu its memory is untouchable until its wait */
					static int n_pdl;
					a.pdl = (n_pdl++ & 1) != 0;
					/* 132 SMs, and 1 (every warp walks many rows) */
					const int n_sm = cs.n_out == 1000 && dt == GPU_BF16 ? 1 : 132;
					REQUIRE(gpu_gemv(&a, dt, n_sm, 0));
					std::vector<float> got, want, lim;
					std::vector<double> yv((size_t)n_tok * n_out), ya(yv.size());
					for (int t = 0; t < n_tok; t++)
						for (int o = 0; o < n_out; o++) {
							double acc = 0, aa = 0;
							for (int i = 0; i < n_in; i++) {
								double p = (double)W[(size_t)o * n_in + i] *
									   in[(size_t)t * n_in + i];
								acc += p;
								aa += fabs(p);
							}
							yv[(size_t)t * n_out + o] = acc;
							ya[(size_t)t * n_out + o] =
							    aa * (dt == GPU_BF16 && pro ? 1.0 / 2048
								  : dt == GPU_F16 && pro ? 1.0 / 16384
											 : 4e-6);
						}
					if (!glu) {
						std::vector<float> gy =
						    dev_download<float>(dy, (size_t)n_tok * ldy);
						for (int t = 0; t < n_tok; t++)
							for (int o = 0; o < n_out; o++) {
								got.push_back(gy[(size_t)t * ldy + o]);
								want.push_back(
								    (float)yv[(size_t)t * n_out + o]);
								lim.push_back(
								    (float)ya[(size_t)t * n_out + o] + 1e-30f);
							}
					} else {
						got = dev_download_st(dt, dact, (size_t)n_tok * n_ff);
						for (int t = 0; t < n_tok; t++)
							for (int j = 0; j < n_ff; j++) {
								double g = yv[(size_t)t * n_out + j],
								       u = yv[(size_t)t * n_out + n_ff + j];
								double eg = ya[(size_t)t * n_out + j],
								       eu = ya[(size_t)t * n_out + n_ff + j];
								double ac;
								if (gelu)
									ac = 0.5 * g *
									     (1.0 + tanh(0.79788456080286535588 * g *
											 (1.0 + 0.044715 * g * g)));
								else
									ac = g / (1.0 + exp(-g));
								double v = ac * u;
								want.push_back(st_round(dt, (float)v));
								/* |act'| <= 1.13 (GELU) and 1.1 (silu); the
								 * activation's own fp32 error ~1e-6 relative;
								 * then one rounding to dt */
								lim.push_back((float)(1.2 * eg * fabs(u) +
										      (fabs(ac) + 1e-3) * eu +
										      (2e-6 + st_rtol(dt)) *
											  fabs(v) +
										      1e-30));
							}
					}
					size_t bad = 0, worst = 0;
					for (size_t i = 0; i < want.size(); i++)
						if (!(fabs((double)got[i] - want[i]) <= lim[i])) {
							if (bad++ == 0)
								worst = i;
						}
					CHECK(bad == 0,
					      "gemv %dx%d n_tok %d %s variant %d: %zu of %zu out of "
					      "tolerance; first [%zu] %.9g vs %.9g (limit %.3g)",
					      n_out, n_in, n_tok, gpu_dtype_name(dt), variant, bad,
					      want.size(), worst, bad ? got[worst] : 0.0,
					      bad ? want[worst] : 0.0, bad ? lim[worst] : 0.0);
					if (a.res_out) { /* one fp32 add: exact; rows not summed stay */
						std::vector<float> gro = dev_download<float>(dro, res.size());
						size_t bad_r = 0;
						for (int t = 0; t < n_tok; t++)
							for (int i = 0; i < n_in; i++)
								bad_r += gro[(size_t)t * n_in + i] !=
									 sum_res[(size_t)t * n_in + i];
						CHECK(bad_r == 0, "gemv %s variant %d n_tok %d: %zu residual "
								  "sums wrong",
						      gpu_dtype_name(dt), variant, n_tok, bad_r);
					}
					if (pro) { /* the residual read is left as it was */
						std::vector<float> gr = dev_download<float>(dres, res.size());
						CHECK(gr == res, "gemv %s variant %d: res written",
						      gpu_dtype_name(dt), variant);
					}
					cudaFree(dw);
					cudaFree(dx);
					cudaFree(dres);
					cudaFree(ddl);
					cudaFree(dnw);
					cudaFree(drows);
					cudaFree(dro);
					cudaFree(dy);
					cudaFree(dact);
				}
	/* the contract's refusals */
	struct gpu_gemv_args b;
	memset(&b, 0, sizeof b);
	float *buf;
	REQUIRE(cudaMalloc(&buf, 4096 * 4));
	b.W = buf;
	b.n_out = 4;
	b.n_in = 64;
	b.n_tok = 1;
	b.res = buf;
	b.norm = buf + 1024;
	b.res_out = buf; /* in place: the other blocks would read the new sum */
	b.y = buf + 2048;
	b.ldy = 4;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv: residual in place");
	b.res_out = NULL;
	b.n_tok = 9;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv: 9 tokens");
	b.n_tok = 1;
	b.n_in = 66;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv: n_in %% 4");
	b.n_in = 64;
	b.W = buf + 1;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv: misaligned W");
	cudaFree(buf);
	/* the prologue's dynamic shared memory (issue 17): Llama-3-8B's batch bucket 8 in bf16
	 * (64 KiB) fits the opt-in, not the 48 KiB without it; GPU_GEMV_XS_BYTES is the cap */
	CHECK(gpu_gemv_fits(8, 4096, true, GPU_BF16, GPU_GEMV_XS_BYTES) &&
		  gpu_gemv_fits(8, 4096, true, GPU_F16, GPU_GEMV_XS_BYTES) &&
		  !gpu_gemv_fits(8, 4096, true, GPU_BF16, GPU_GEMV_XS_DEFAULT) &&
		  gpu_gemv_fits(5, 4096, true, GPU_BF16, GPU_GEMV_XS_DEFAULT) &&
		  gpu_gemv_fits(8, 4096, false, GPU_BF16, GPU_GEMV_XS_DEFAULT),
	      "gemv_fits: 8 x 4096 bf16 with the opt-in, 5 without");
	CHECK(gpu_gemv_fits(8, 12800, true, GPU_BF16, 1 << 30) &&
		  !gpu_gemv_fits(8, 12808, true, GPU_BF16, 1 << 30),
	      "gemv_fits: GPU_GEMV_XS_BYTES (200 KiB) caps the device's bytes");
	/* a device whose opt-in gives less (an A100's 163 KiB, sm_86's 99 KiB) */
	size_t xs = 0;
	CHECK(gpu_gemv_init(99 << 10, &xs) == cudaSuccess && xs == ((size_t)98 << 10),
	      "gemv_init at 99 KiB: 98 KiB (%zu)", xs);
	CHECK(gpu_gemv_init(48 << 10, &xs) == cudaSuccess && xs == GPU_GEMV_XS_DEFAULT,
	      "gemv_init at 48 KiB: no opt-in (%zu)", xs);
	CHECK(gpu_gemv_init(prop_optin, &xs) == cudaSuccess && xs == gemv_xs,
	      "gemv_init again: the same bytes");
}

/* A token's GEMV outputs do not depend on the batch bucket: token j of a pass of n tokens
 * (NT = 2, 4, 8 accumulator slots, its sums in other lanes of the transposed reduction)
 * gives bitwise what a pass of token j alone gives (NT = 1). gpu/gemv.cu's gv_reduce sums
 * every (row, token) in the same lane tree; a reduction whose order depended on the slot
 * or on NT would make a sequence's logits move with the batch it is decoded in. */
static void test_gemv_bucket(void)
{
	const int n_out = 37, n_in = 1032, ldx = n_in + 8;
	for (enum gpu_dtype dt : all_dt)
		for (int n : {2, 3, 8}) {
			std::vector<float> W = rand_vec((size_t)n_out * n_in, -1, 1);
			std::vector<float> x = rand_vec((size_t)n * ldx, -1, 1);
			auto pw = st_pack(dt, W), px = st_pack(dt, x);
			void *dw = dev_upload(pw.data(), pw.size());
			void *dx = dev_upload(px.data(), px.size());
			float *dy;
			REQUIRE(cudaMalloc(&dy, (size_t)n * n_out * 4));
			struct gpu_gemv_args a;
			memset(&a, 0, sizeof a);
			a.W = dw;
			a.n_out = n_out;
			a.n_in = n_in;
			a.n_tok = n;
			a.x = dx;
			a.ldx = ldx;
			a.y = dy;
			a.ldy = n_out;
			REQUIRE(gpu_gemv(&a, dt, 132, 0));
			std::vector<float> all = dev_download<float>(dy, (size_t)n * n_out);
			size_t bad = 0;
			for (int j = 0; j < n; j++) {
				a.n_tok = 1;
				a.x = (const char *)dx + (size_t)j * ldx * gpu_dtype_size(dt);
				REQUIRE(gpu_gemv(&a, dt, 132, 0));
				std::vector<float> one = dev_download<float>(dy, n_out);
				bad += memcmp(one.data(), &all[(size_t)j * n_out], n_out * 4) != 0;
			}
			CHECK(bad == 0, "gemv %s: %zu of %d tokens of a %d-token pass differ from the "
					"same token alone",
			      gpu_dtype_name(dt), bad, n, n);
			cudaFree(dw);
			cudaFree(dx);
			cudaFree(dy);
		}
}

/* ---- gemv_chain ---- */

/* gpu_gemv_chain (issue 17: a decode layer's consecutive GEMVs as one cooperative kernel)
 * on the steps a fused layer chains, with their real hazards: O (attn -> tmp), gate|up
 * (prologue norm(xr + tmp) -> act, the sum into xo; SwiGLU), down (act -> tmp, which
 * gate|up's prologue read), the next layer's QKV (prologue norm(xo + tmp), the sum into xr,
 * which gate|up read; the qkv_post epilogue: RoPE, the K/V rows into the pool). Bitwise
 * against the same four steps as separate gpu_gemv launches on copies of the same buffers
 * (gpu_gemv itself is test_gemv's and test_gemv_qkv's, against host references): every
 * output buffer, byte for byte. f32 and bf16, bf16 from Q8_0 blocks (the resident path);
 * 1 token (NT 1) on 132 SMs, 3 tokens (NT 4) on 5 (fewer blocks than a step's warps need:
 * each warp walks several tasks). Under gpu/emu the blocks of a cooperative launch run
 * interleaved in the seed's order, so a step that starts before every block finished the
 * one before it reads stale data or has its inputs overwritten. The barrier's words are
 * back to (0, generation + 3) after each launch. Then the argument checks. */
static void test_gemv_chain(void)
{
	const int E = 256, H = 4, HKV = 2, HD = 64, F = 192, NQ = H * HD;
	const int NQKV = (H + 2 * HKV) * HD, ldy = NQKV + 2, bs = 16, n_blocks = 2;
	const int kv_dim = HKV * HD;
	const int64_t block_elems = 2 * (int64_t)bs * kv_dim;
	unsigned *bar;
	REQUIRE(cudaMalloc(&bar, GPU_GRID_BAR_WORDS * sizeof(unsigned)));
	REQUIRE(cudaMemset(bar, 0, GPU_GRID_BAR_WORDS * sizeof(unsigned)));
	unsigned gen = 0;
	struct {
		enum gpu_dtype dt;
		bool q;
	} kinds[3] = {{GPU_F32, false}, {GPU_BF16, false}, {GPU_BF16, true}};
	for (auto &kd : kinds)
		for (int n_tok : {1, 3}) {
			const enum gpu_dtype dt = kd.dt;
			const size_t es = gpu_dtype_size(dt);
			const int n_sm = n_tok == 1 ? 132 : 5;
			char what[96];
			snprintf(what, sizeof what, "gemv_chain %s%s n_tok %d", gpu_dtype_name(dt),
				 kd.q ? " (Q8_0 blocks)" : "", n_tok);
			/* the weights: dense of dt, or Q8_0 blocks (gate|up two parts) */
			qmat_case qo, qgu, qd, qqkv;
			void *wo = NULL, *wgu = NULL, *wd = NULL, *wqkv = NULL;
			if (kd.q) {
				qo = make_qmat({{GGUF_DTYPE_Q8_0, E}}, NQ);
				qgu = make_qmat({{GGUF_DTYPE_Q8_0, F}, {GGUF_DTYPE_Q8_0, F}}, E);
				qd = make_qmat({{GGUF_DTYPE_Q8_0, E}}, F);
				qqkv = make_qmat({{GGUF_DTYPE_Q8_0, NQKV}}, E);
			} else {
				auto mk = [&](size_t n) {
					std::vector<float> w = rand_vec(n, -0.5f, 0.5f);
					auto p = st_pack(dt, w);
					return dev_upload(p.data(), p.size());
				};
				wo = mk((size_t)E * NQ);
				wgu = mk((size_t)2 * F * E);
				wd = mk((size_t)E * F);
				wqkv = mk((size_t)NQKV * E);
			}
			std::vector<float> nf = rand_vec(E, 0.5f, 1.5f),
					   na = rand_vec(E, 0.5f, 1.5f);
			float *dnf = dev_vec(nf), *dna = dev_vec(na);
			const int half = HD / 2;
			std::vector<double> freq(half);
			for (int i = 0; i < half; i++)
				freq[i] = pow(10000.0, -2.0 * i / HD);
			std::vector<float> tab(GPU_ROPE_TABLE_FLOATS(half));
			gpu_rope_table_fill(freq.data(), half, tab.data());
			float *dtab = dev_vec(tab);
			std::vector<int32_t> pos = {17, 2048, 5}, slots = {9, 30, 2};
			int32_t *dp = dev_vec(pos), *ds = dev_vec(slots);
			/* the buffers, twice (a: separate launches, b: the chain), same contents */
			std::vector<float> attn = rand_vec((size_t)n_tok * NQ, -1, 1);
			std::vector<float> tmp = rand_vec((size_t)n_tok * E, -1, 1);
			std::vector<float> xr = rand_vec((size_t)n_tok * E, -2, 2);
			std::vector<float> pool = rand_vec((size_t)block_elems * n_blocks, -8, 8);
			auto pattn = st_pack(dt, attn), ppool = st_pack(dt, pool);
			struct bufs {
				void *attn, *act, *pool;
				float *tmp, *xr, *xo, *y;
			} b[2];
			for (auto &u : b) {
				u.attn = dev_upload(pattn.data(), pattn.size());
				u.pool = dev_upload(ppool.data(), ppool.size());
				u.tmp = dev_vec(tmp);
				u.xr = dev_vec(xr);
				REQUIRE(cudaMalloc(&u.xo, (size_t)n_tok * E * 4));
				REQUIRE(cudaMemset(u.xo, 0xff, (size_t)n_tok * E * 4));
				REQUIRE(cudaMalloc(&u.y, (size_t)n_tok * ldy * 4));
				REQUIRE(cudaMemset(u.y, 0xff, (size_t)n_tok * ldy * 4));
				REQUIRE(cudaMalloc(&u.act, (size_t)n_tok * F * es));
				REQUIRE(cudaMemset(u.act, 0xff, (size_t)n_tok * F * es));
			}
			struct gpu_gemv_args st[2][4];
			for (int k = 0; k < 2; k++) {
				const struct bufs &u = b[k];
				struct gpu_gemv_args *s = st[k];
				memset(s, 0, 4 * sizeof *s);
				for (int i = 0; i < 4; i++)
					s[i].n_tok = n_tok;
				s[0].W = wo; /* O */
				s[0].n_out = E;
				s[0].n_in = NQ;
				s[0].x = u.attn;
				s[0].ldx = NQ;
				s[0].y = u.tmp;
				s[0].ldy = E;
				s[1].W = wgu; /* gate|up: the FFN norm, SwiGLU */
				s[1].n_out = 2 * F;
				s[1].n_in = E;
				s[1].res = u.xr;
				s[1].delta = u.tmp;
				s[1].norm = dnf;
				s[1].eps = 1e-5f;
				s[1].res_out = u.xo;
				s[1].glu = true;
				s[1].act = u.act;
				s[2].W = wd; /* down */
				s[2].n_out = E;
				s[2].n_in = F;
				s[2].x = u.act;
				s[2].ldx = F;
				s[2].y = u.tmp;
				s[2].ldy = E;
				s[3].W =
				    wqkv; /* the next layer's QKV: the attention norm, qkv_post */
				s[3].n_out = NQKV;
				s[3].n_in = E;
				s[3].res = u.xo;
				s[3].delta = u.tmp;
				s[3].norm = dna;
				s[3].eps = 1e-5f;
				s[3].res_out = u.xr;
				s[3].y = u.y;
				s[3].ldy = ldy;
				s[3].qkv_post = true;
				struct gpu_qkv_post_args &p = s[3].post;
				p.n_head = H;
				p.n_head_kv = HKV;
				p.head_dim = HD;
				p.pos = dp;
				p.rope_dim = HD;
				p.table = dtab;
				p.mscale = 1.0f;
				p.slots = ds;
				p.kv = {u.pool, block_elems, (int64_t)bs * kv_dim, bs, kv_dim};
				if (kd.q) {
					s[0].q = qo.q;
					s[1].q = qgu.q;
					s[2].q = qd.q;
					s[3].q = qqkv.q;
				}
			}
			for (int i = 0; i < 4; i++)
				REQUIRE(gpu_gemv(&st[0][i], dt, n_sm, 0));
			REQUIRE(gpu_gemv_chain(st[1], 4, NULL, 0, dt, n_sm, bar, 0));
			gen += 3;
			std::vector<unsigned> bw = dev_download<unsigned>(bar, GPU_GRID_BAR_WORDS);
			CHECK(bw[0] == 0 && bw[1] == gen, "%s: barrier words %u %u (want 0 %u)",
			      what, bw[0], bw[1], gen);
			struct {
				const char *name;
				size_t off, bytes;
			} outs[6] = {{"tmp", offsetof(bufs, tmp), (size_t)n_tok * E * 4},
				     {"xr", offsetof(bufs, xr), (size_t)n_tok * E * 4},
				     {"xo", offsetof(bufs, xo), (size_t)n_tok * E * 4},
				     {"y", offsetof(bufs, y), (size_t)n_tok * ldy * 4},
				     {"act", offsetof(bufs, act), (size_t)n_tok * F * es},
				     {"KV pool", offsetof(bufs, pool), pool.size() * es}};
			for (auto &o : outs) {
				void *pa, *pb;
				memcpy(&pa, (const char *)&b[0] + o.off, sizeof pa);
				memcpy(&pb, (const char *)&b[1] + o.off, sizeof pb);
				std::vector<uint8_t> ha = dev_download<uint8_t>(pa, o.bytes);
				std::vector<uint8_t> hb = dev_download<uint8_t>(pb, o.bytes);
				size_t bad = 0;
				for (size_t i = 0; i < o.bytes; i++)
					bad += ha[i] != hb[i];
				CHECK(bad == 0,
				      "%s: %s: %zu of %zu bytes differ from separate launches",
				      what, o.name, bad, o.bytes);
			}
			/* the arguments: a chain of another bucket or kind refused */
			if (n_tok == 3 && !kd.q) {
				struct gpu_gemv_args c2[2] = {st[1][0], st[1][2]};
				c2[1].n_tok = 2; /* NT 2 beside NT 4 */
				CHECK(gpu_gemv_chain(c2, 2, NULL, 0, dt, n_sm, bar, 0) ==
					  cudaErrorInvalidValue,
				      "%s: two buckets", what);
				c2[1].n_tok = 4;
				CHECK(gpu_gemv_chain(c2, 2, NULL, 0, dt, n_sm, NULL, 0) ==
					      cudaErrorInvalidValue &&
					  gpu_gemv_chain(c2, 0, NULL, 0, dt, n_sm, bar, 0) ==
					      cudaErrorInvalidValue &&
					  gpu_gemv_chain(st[1], GPU_GEMV_CHAIN_MAX + 1, NULL, 0, dt,
							 n_sm, bar, 0) == cudaErrorInvalidValue,
				      "%s: no barrier, 0 steps, too many", what);
				c2[1].W =
				    (const char *)c2[1].W + 4; /* misaligned: gpu_gemv's check */
				CHECK(gpu_gemv_chain(c2, 2, NULL, 0, dt, n_sm, bar, 0) ==
					  cudaErrorInvalidValue,
				      "%s: a step gpu_gemv refuses", what);
			}
			if (kd.q && n_tok == 3) {
				struct gpu_gemv_args c2[2] = {st[1][0], st[1][2]};
				c2[1].q.n_part = 0; /* dense beside resident */
				c2[1].W = c2[0].x;
				CHECK(gpu_gemv_chain(c2, 2, NULL, 0, dt, n_sm, bar, 0) ==
					  cudaErrorInvalidValue,
				      "%s: dense and resident steps", what);
			}
			for (auto &u : b) {
				cudaFree(u.attn);
				cudaFree(u.pool);
				cudaFree(u.tmp);
				cudaFree(u.xr);
				cudaFree(u.xo);
				cudaFree(u.y);
				cudaFree(u.act);
			}
			if (kd.q) {
				free_qmat(qo);
				free_qmat(qgu);
				free_qmat(qd);
				free_qmat(qqkv);
			} else {
				cudaFree(wo);
				cudaFree(wgu);
				cudaFree(wd);
				cudaFree(wqkv);
			}
			cudaFree(dnf);
			cudaFree(dna);
			cudaFree(dtab);
			cudaFree(dp);
			cudaFree(ds);
		}
	cudaFree(bar);
}

/* The QKV GEMV's epilogue (gpu_gemv with qkv_post): against a host reference (the
 * projection in double from the same rounded inputs, the bias, the rotation by cos and sin
 * of pos * freq in double: both pairings, partial rotation, none), and bitwise against
 * gpu_gemv then gpu_qkv_post (what the fused path did before: y and the whole KV pool). */
static void test_gemv_qkv(void)
{
	struct {
		int n_head, n_head_kv, hd, rope_dim;
		bool neox, bias, pro, temp;
	} cases[8] = {
	    {8, 2, 64, 64, false, false, true, false}, /* llama */
	    {8, 2, 64, 64, true, true, true, false},	/* qwen2: biases, NeoX */
	    {6, 3, 96, 32, false, true, false, false}, /* partial rotation */
	    {4, 2, 96, 32, true, false, false, false}, /* partial, NeoX */
	    {4, 4, 64, 0, false, true, true, false},	/* no rotation */
	    {4, 4, 96, 96, true, false, true, false},	/* phi3's heads */
	    /* mistral3: the attention temperature (scale 0.5, floor 16) on the query heads */
	    {8, 2, 64, 64, false, false, true, true},
	    {6, 3, 96, 32, false, true, false, true}, /* with partial rotation */
	};
	const int tok_sets[4] = {1, 2, 3, 8}; /* NT = 1, 2, 4, 8 */
	int ci = 0;
	for (auto &cs : cases)
		for (enum gpu_dtype dt : all_dt)
			for (int n_tok : tok_sets) {
				ci++;
				const int n_in = 264, bs = 16, n_blocks = 4, n_layer = 2, layer = 1;
				const int kv_dim = cs.n_head_kv * cs.hd, n_qk = cs.n_head + cs.n_head_kv;
				const int n_out = (cs.n_head + 2 * cs.n_head_kv) * cs.hd, ldy = n_out + 5;
				const int ldx = n_in + 16 / (int)gpu_dtype_size(dt);
				const int64_t block_elems = (int64_t)n_layer * 2 * bs * kv_dim;
				const size_t pool_elems = (size_t)block_elems * n_blocks;
				std::vector<float> W = rand_vec((size_t)n_out * n_in, -1, 1);
				for (auto &v : W)
					v = st_round(dt, v);
				std::vector<float> x = rand_vec((size_t)n_tok * ldx, -1, 1);
				for (auto &v : x)
					v = st_round(dt, v);
				std::vector<float> res = rand_vec((size_t)n_tok * n_in, -2, 2);
				std::vector<float> nw = rand_vec(n_in, 0.5f, 1.5f);
				std::vector<float> bias = rand_vec(n_out, -1, 1);
				std::vector<float> pool = rand_vec(pool_elems, -8, 8);
				for (auto &v : pool)
					v = st_round(dt, v);
				std::vector<int32_t> pos(n_tok), slots(n_tok);
				std::vector<int> perm(n_blocks * bs);
				for (int i = 0; i < n_blocks * bs; i++)
					perm[i] = i;
				for (int i = n_blocks * bs - 1; i > 0; i--)
					std::swap(perm[i], perm[rnd_u32() % (i + 1)]);
				const int32_t first[3] = {2047, 2048, 5};
				for (int t = 0; t < n_tok; t++) {
					pos[t] = t < 3 ? first[(t + ci) % 3] : (int32_t)(rnd_u32() % 100000);
					slots[t] = perm[t];
				}
				/* the inputs the projection sees, [n_tok][n_in] */
				std::vector<float> in =
				    gemv_ref_inputs(dt, cs.pro, x, ldx, res, nw, n_tok, n_in);
				const int half = cs.rope_dim / 2;
				std::vector<double> freq(half > 0 ? half : 1);
				for (int i = 0; i < half; i++)
					freq[i] = pow(10000.0, -2.0 * i / cs.rope_dim);
				std::vector<float> tab(GPU_ROPE_TABLE_FLOATS(half > 0 ? half : 1));
				gpu_rope_table_fill(freq.data(), half, tab.data());
				const float msc = cs.neox ? 0.75f : 1.0f;
				auto pw = st_pack(dt, W), px = st_pack(dt, x), pp = st_pack(dt, pool);
				void *dw = dev_upload(pw.data(), pw.size());
				void *dx = dev_upload(px.data(), px.size());
				void *pool_a = dev_upload(pp.data(), pp.size());
				void *pool_b = dev_upload(pp.data(), pp.size());
				float *dres = dev_vec(res), *dnw = dev_vec(nw), *db = dev_vec(bias);
				float *dtab = dev_vec(tab);
				int32_t *dp = dev_vec(pos), *ds = dev_vec(slots);
				float *ya, *yb;
				REQUIRE(cudaMalloc(&ya, (size_t)n_tok * ldy * 4));
				REQUIRE(cudaMalloc(&yb, (size_t)n_tok * ldy * 4));
				const size_t layer_off = (size_t)layer * 2 * bs * kv_dim * gpu_dtype_size(dt);
				struct gpu_kv_layer kva = {(char *)pool_a + layer_off, block_elems,
							   (int64_t)bs * kv_dim, bs, kv_dim};
				struct gpu_kv_layer kvb = kva;
				kvb.base = (char *)pool_b + layer_off;
				struct gpu_gemv_args g;
				memset(&g, 0, sizeof g);
				g.W = dw;
				g.n_out = n_out;
				g.n_in = n_in;
				g.n_tok = n_tok;
				gemv_set_input(&g, cs.pro, dres, dnw, dx, ldx);
				g.ldy = ldy;
				struct gpu_qkv_post_args q;
				memset(&q, 0, sizeof q);
				q.ld = ldy;
				q.n_tok = n_tok;
				q.n_head = cs.n_head;
				q.n_head_kv = cs.n_head_kv;
				q.head_dim = cs.hd;
				q.bias = cs.bias ? db : NULL;
				q.eps = 1e-6f;
				q.pos = dp;
				q.rope_dim = cs.rope_dim;
				q.table = dtab;
				q.mscale = msc;
				q.neox = cs.neox;
				q.slots = ds;
				q.temp_scale = cs.temp ? 0.5f : 0.0f;
				q.temp_floor = 16;
				/* before: the GEMV, then qkv_post */
				g.y = yb;
				q.qkv = yb;
				q.kv = kvb;
				const int n_sm = ci % 7 == 0 ? 1 : 132;
				REQUIRE(gpu_gemv(&g, dt, n_sm, 0));
				REQUIRE(gpu_qkv_post(&q, dt, 0));
				/* now: one launch */
				g.y = ya;
				g.qkv_post = true;
				q.qkv = NULL;
				q.kv = kva;
				g.post = q;
				g.pdl = ci % 2 == 0; /* gpu/pdl.cuh: half the cases */
				REQUIRE(gpu_gemv(&g, dt, n_sm, 0));
				std::vector<float> gya = dev_download<float>(ya, (size_t)n_tok * ldy);
				std::vector<float> gyb = dev_download<float>(yb, (size_t)n_tok * ldy);
				std::vector<float> pa = dev_download_st(dt, pool_a, pool_elems);
				std::vector<float> pb = dev_download_st(dt, pool_b, pool_elems);
				/* the host reference */
				std::vector<float> got, want, lim, ga, gb;
				std::vector<float> pwant = pool, plim(pool_elems, 0.0f);
				for (int t = 0; t < n_tok; t++) {
					std::vector<double> yv(n_out), ye(n_out);
					for (int o = 0; o < n_out; o++) {
						double acc = 0, aa = 0;
						for (int i = 0; i < n_in; i++) {
							double pr = (double)W[(size_t)o * n_in + i] *
								    in[(size_t)t * n_in + i];
							acc += pr;
							aa += fabs(pr);
						}
						yv[o] = acc + (cs.bias ? bias[o] : 0.0f);
						ye[o] = aa * 4e-6 + (cs.bias ? 1e-7 * fabs(yv[o]) : 0.0);
					}
					std::vector<double> rv = yv, re = ye;
					for (int h = 0; h < n_qk; h++)
						for (int i = 0; i < half; i++) {
							const int a0 = h * cs.hd + (cs.neox ? i : 2 * i);
							const int a1 = h * cs.hd + (cs.neox ? i + half : 2 * i + 1);
							const double th = (double)pos[t] * freq[i];
							const double c = cos(th) * msc, sn = sin(th) * msc;
							rv[a0] = yv[a0] * c - yv[a1] * sn;
							rv[a1] = yv[a0] * sn + yv[a1] * c;
							const double e = msc * (ye[a0] + ye[a1] +
										2e-6 * (fabs(yv[a0]) + fabs(yv[a1])));
							re[a0] = re[a1] = e;
						}
					if (cs.temp) { /* the query heads times the position's temperature */
						const double f =
						    log(floor(pos[t] / 16.0) + 1.0) * 0.5 + 1.0;
						for (int o = 0; o < cs.n_head * cs.hd; o++) {
							rv[o] *= f;
							re[o] = re[o] * f + 1e-7 * fabs(rv[o]);
						}
					}
					for (int o = 0; o < n_out; o++) {
						got.push_back(gya[(size_t)t * ldy + o]);
						want.push_back((float)rv[o]);
						lim.push_back((float)re[o] + 1e-30f);
						ga.push_back(gya[(size_t)t * ldy + o]);
						gb.push_back(gyb[(size_t)t * ldy + o]);
					}
					/* K and V into the token's slot of layer 1, rounded to dt */
					const int64_t blk = slots[t] / bs, sl = slots[t] % bs;
					const size_t row = (size_t)layer * 2 * bs * kv_dim +
							   (size_t)(blk * block_elems + sl * kv_dim);
					for (int d = 0; d < kv_dim; d++) {
						const int ok = cs.n_head * cs.hd + d, ov = ok + kv_dim;
						pwant[row + d] = st_round(dt, (float)rv[ok]);
						plim[row + d] = (float)(re[ok] + st_rtol(dt) * fabs(rv[ok]));
						const size_t vi = row + (size_t)bs * kv_dim + d;
						pwant[vi] = st_round(dt, (float)rv[ov]);
						plim[vi] = (float)(re[ov] + st_rtol(dt) * fabs(rv[ov]));
					}
				}
				size_t bad = 0, worst = 0, pbad = 0, pworst = 0;
				for (size_t i = 0; i < want.size(); i++)
					if (!(fabs((double)got[i] - want[i]) <= lim[i]) && bad++ == 0)
						worst = i;
				for (size_t i = 0; i < pool_elems; i++)
					if (!(fabs((double)pa[i] - pwant[i]) <= plim[i]) && pbad++ == 0)
						pworst = i;
				char what[128];
				snprintf(what, sizeof what,
					 "gemv qkv %s hd %d rope %d neox %d bias %d pro %d temp %d n_tok %d",
					 gpu_dtype_name(dt), cs.hd, cs.rope_dim, cs.neox, cs.bias, cs.pro,
					 cs.temp, n_tok);
				CHECK(bad == 0, "%s: y vs host: %zu of %zu out; first [%zu] %.9g vs %.9g (limit %.3g)",
				      what, bad, want.size(), worst, bad ? got[worst] : 0.0,
				      bad ? want[worst] : 0.0, bad ? lim[worst] : 0.0);
				CHECK(pbad == 0, "%s: KV pool vs host: %zu of %zu out; first [%zu] %.9g vs %.9g",
				      what, pbad, pool_elems, pworst, pbad ? pa[pworst] : 0.0,
				      pbad ? pwant[pworst] : 0.0);
				std::string w2 = std::string(what) + ": y vs gemv + qkv_post";
				check_close(w2.c_str(), ga, gb, 0, 0);
				w2 = std::string(what) + ": KV pool vs gemv + qkv_post";
				check_close(w2.c_str(), pa, pb, 0, 0);
				void *bufs[13] = {dw, dx, pool_a, pool_b, dres, dnw, db, dtab, dp, ds, ya, yb, NULL};
				for (int i = 0; bufs[i]; i++)
					cudaFree(bufs[i]);
			}
	/* refused: head norms (they need the whole head), glu, a width that is not the heads' */
	struct gpu_gemv_args b;
	memset(&b, 0, sizeof b);
	float *buf;
	REQUIRE(cudaMalloc(&buf, 8192 * 4));
	b.W = buf;
	b.n_in = 64;
	b.n_tok = 1;
	b.x = buf;
	b.ldx = 64;
	b.y = buf + 4096;
	b.ldy = 256;
	b.qkv_post = true;
	b.post.n_head = 2;
	b.post.n_head_kv = 1;
	b.post.head_dim = 64;
	b.post.rope_dim = 64;
	b.post.table = buf;
	b.post.pos = (const int32_t *)buf;
	b.post.slots = (const int32_t *)buf;
	b.post.kv.base = buf;
	b.post.kv.block_size = 16;
	b.post.kv.kv_dim = 64;
	b.n_out = 256;
	b.post.q_norm = b.post.k_norm = buf;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv qkv: head norms");
	b.post.q_norm = b.post.k_norm = NULL;
	b.n_out = 250;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv qkv: n_out");
	b.n_out = 256;
	b.post.rope_dim = 66;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv qkv: rope_dim > hd");
	b.post.rope_dim = 64;
	b.glu = true;
	b.act = buf;
	CHECK(gpu_gemv(&b, GPU_F32, 132, 0) == cudaErrorInvalidValue, "gemv qkv: with glu");
	cudaFree(buf);
}

/* ---- attention ---- */

/* Kernels for the occupancy checks below: 20 KiB of static shared memory, and none. */
__global__ void __launch_bounds__(32, 16) occ_smem_kernel(float *x)
{
	__shared__ float buf[5120];
	buf[threadIdx.x] = x[threadIdx.x];
	__syncthreads();
	x[threadIdx.x] = buf[(threadIdx.x + 1) % 32];
}
__global__ void __launch_bounds__(1024, 1) occ_regs_kernel(float *x) { x[threadIdx.x] += 1.0f; }
/* (64, 16): 16 is the most blocks per SM sm_86 takes in launch bounds */
__global__ void __launch_bounds__(64, 16) occ_blocks_kernel(float *x) { x[threadIdx.x] += 1.0f; }

/* cudaOccupancyMaxActiveBlocksPerMultiprocessor, under the emulator, against CUDA's rules
 * (cuda_occupancy.h, compute capability 9.0) worked by hand for its H100 (65536
 * registers in 4 sub-partitions, 2048 threads, 32 blocks, 228 KiB = 233,472 bytes of
 * shared memory, 1 KiB reserved a block, 128-byte steps, 48 KiB a block without opt-in)
 * and the registers it states (launch bounds (T, B): 65536 / (B x T), at most 128). On
 * a GPU only the shared-memory cases hold exactly (H100/H200), so they run on the
 * emulator alone. */
static void test_occupancy(bool emu)
{
	if (!emu)
		return;
	struct {
		void (*k)(float *);
		int block;
		size_t dyn;
		int want;
		const char *why;
	} cases[] = {
	    {occ_smem_kernel, 32, 0, 10, "shared: 20480 + 1024 = 21504: 233472 / 21504 = 10.9"},
	    {occ_smem_kernel, 32, 8192, 7, "shared: 29696: 7.9 (registers 128: 16)"},
	    {occ_smem_kernel, 32, 28672, 4, "shared: 50176 = 48 KiB + 1 KiB: 4.65"},
	    {occ_smem_kernel, 32, 28673, 0, "shared: one byte over 48 KiB + 1 KiB"},
	    {occ_smem_kernel, 64, 0, 0, "64 threads over the bounds' 32"},
	    {occ_regs_kernel, 1024, 0, 1, "registers 64: 2048 a warp, 8 warps a sub-partition: "
					  "32 warps: 1 block of 32 (threads: 2)"},
	    {occ_regs_kernel, 512, 0, 2, "registers: 32 warps / 16"},
	    {occ_regs_kernel, 96, 0, 10, "registers: 32 warps / 3 warps = 10"},
	    {occ_blocks_kernel, 64, 0, 16, "registers 65536 / (16 x 64) = 64: 32 warps / 2"},
	    {occ_blocks_kernel, 32, 0, 32, "registers 64: 32 warps of 1; the 32-block limit"},
	    {occ_blocks_kernel, 16, 0, 32, "half a warp takes a whole warp's slots"},
	};
	for (auto &c : cases) {
		int n = -1;
		cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, c.k, c.block, c.dyn);
		CHECK(e == cudaSuccess && n == c.want, "occupancy (%s): %d (%s), want %d", c.why, n,
		      cudaGetErrorName(e), c.want);
	}
}

/* gpu_grid_sync (gpu/grid_sync.cuh) in a cooperative launch: GS_ROUNDS rounds in which every
 * thread reads another block's element into shared memory, meets the grid at the barrier,
 * writes its own element from a neighbour thread's shared value, and meets it again; the
 * result against the same rounds on the host. A barrier missing or leaking lets a block
 * read an element before or after its round (gpu/emu runs the blocks in turns in a seeded
 * random order, each until its threads only wait); the shared values must survive the
 * other blocks' turns. Also: the launch within the occupancy of the device's SMs runs and
 * one block more fails with cudaErrorCooperativeLaunchTooLarge, and a captured launch
 * replays (the barrier's words are left for the next launch). */
#define GS_THREADS 96
#define GS_ROUNDS  3
__global__ void __launch_bounds__(GS_THREADS) gs_kernel(unsigned *bar, int *v, int n)
{
	__shared__ int s[GS_THREADS];
	const int t = (int)threadIdx.x, me = (int)blockIdx.x * GS_THREADS + t;
	for (int r = 0; r < GS_ROUNDS; r++) {
		s[t] = me < n ? v[(me + (r + 1) * 37) % n] : 0;
		gpu_grid_sync(bar);
		if (me < n)
			v[me] = s[(t + 1) % GS_THREADS] * 3 + r;
		gpu_grid_sync(bar);
	}
}
static void gs_host(std::vector<int> &v, int nb)
{
	const int n = (int)v.size();
	std::vector<int> s((size_t)nb * GS_THREADS);
	for (int r = 0; r < GS_ROUNDS; r++) {
		for (int me = 0; me < nb * GS_THREADS; me++)
			s[me] = me < n ? v[(me + (r + 1) * 37) % n] : 0;
		for (int me = 0; me < n; me++) {
			const int b = me / GS_THREADS, t = me % GS_THREADS;
			v[me] = s[b * GS_THREADS + (t + 1) % GS_THREADS] * 3 + r;
		}
	}
}
static void test_grid_sync(int n_sm)
{
	unsigned *bar = NULL;
	REQUIRE(cudaMalloc(&bar, GPU_GRID_BAR_WORDS * sizeof(unsigned)));
	REQUIRE(cudaMemset(bar, 0, GPU_GRID_BAR_WORDS * sizeof(unsigned)));
	for (int nb : {1, 2, 7}) {
		const int n = nb * GS_THREADS - 5; /* the last block's last threads hold none */
		std::vector<int> h(n);
		for (int i = 0; i < n; i++)
			h[i] = (int)(rnd_u32() % 1000);
		int *d = dev_vec(h);
		cudaError_t e = gpu_launch_coop(gs_kernel, dim3(nb), dim3(GS_THREADS), 0, 0, bar, d, n);
		CHECK(e == cudaSuccess, "grid_sync: launch of %d blocks: %s", nb, cudaGetErrorName(e));
		std::vector<int> got = dev_download<int>(d, n);
		gs_host(h, nb);
		int bad = 0;
		for (int i = 0; i < n; i++)
			bad += got[i] != h[i];
		CHECK(bad == 0, "grid_sync: %d blocks: %d of %d elements differ", nb, bad, n);
		if (nb == 7) { /* captured and replayed twice */
			cudaStream_t st;
			cudaGraph_t g;
			cudaGraphExec_t ge;
			REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
			REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
			REQUIRE(gpu_launch_coop(gs_kernel, dim3(nb), dim3(GS_THREADS), 0, st, bar, d, n));
			REQUIRE(cudaStreamEndCapture(st, &g));
			REQUIRE(cudaGraphInstantiate(&ge, g, 0));
			REQUIRE(cudaGraphLaunch(ge, st));
			REQUIRE(cudaGraphLaunch(ge, st));
			REQUIRE(cudaStreamSynchronize(st));
			got = dev_download<int>(d, n);
			gs_host(h, nb);
			gs_host(h, nb);
			bad = 0;
			for (int i = 0; i < n; i++)
				bad += got[i] != h[i];
			CHECK(bad == 0, "grid_sync: 2 graph replays: %d of %d elements differ", bad, n);
			cudaGraphExecDestroy(ge);
			cudaGraphDestroy(g);
			cudaStreamDestroy(st);
		}
		cudaFree(d);
	}
	int per_sm = 0;
	REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gs_kernel, GS_THREADS, 0));
	const int too_many = per_sm * n_sm + 1;
	cudaError_t e =
	    gpu_launch_coop(gs_kernel, dim3(too_many), dim3(GS_THREADS), 0, 0, bar, (int *)NULL, 0);
	CHECK(e == cudaErrorCooperativeLaunchTooLarge && cudaGetLastError() == e,
	      "grid_sync: %d blocks (%d an SM x %d SMs + 1): %s", too_many, per_sm, n_sm,
	      cudaGetErrorName(e));
	REQUIRE(cudaDeviceSynchronize());
	cudaFree(bar);
}

/* gpu_attention_splits against split counts worked by hand from stated device figures,
 * and gpu_attention_occupancy: under the emulator against blocks per SM worked by hand
 * from its H100 limits (gpu/emu/emu.cpp, emu_occupancy), on a GPU within its limits. */
static void test_attn_splits(bool emu)
{
	/* Rule: base = tokens x blocks a token (KV heads for the GQA kernel, query heads for
	 * the per-query one), wave = SMs x blocks per SM; s = wave / base (floor) if base <
	 * wave, else 1; then s <= max_ctx / 128, s <= 128, and partial floats = tokens x
	 * query heads x s x (head_dim + 2) <= the scratch (s lowered until they fit). */
	struct {
		int n_tok, n_head, n_head_kv, hd;
		enum gpu_dtype dt;
		int max_ctx, n_sm, per_sm;
		size_t cap;
		int want;
		const char *why;
	} cases[] = {
	    /* Llama-3-8B (32/8 heads of 128, bf16: the GQA kernel) on 132 SMs x 8 blocks:
	     * wave 1056 */
	    {0, 32, 8, 128, GPU_BF16, 4096, 132, 8, 1 << 22, 1, "no per-query tokens"},
	    {1, 32, 8, 128, GPU_BF16, 32768, 132, 8, 1 << 22, 128,
	     "base 8: 1056 / 8 = 132 > the maximum 128 (32768 / 128 = 256 allows it); "
	     "partials 1 x 32 x 128 x 130 = 532,480 <= 4,194,304"},
	    {8, 32, 8, 128, GPU_BF16, 32768, 132, 8, 1 << 22, 16,
	     "base 64: 1056 / 64 = 16.5 -> 16 (17 would start a second wave)"},
	    {64, 32, 8, 128, GPU_BF16, 4096, 132, 8, 1 << 22, 2, "base 512: 1056 / 512 = 2.06 -> 2"},
	    {66, 32, 8, 128, GPU_BF16, 4096, 132, 8, 1 << 22, 2, "base 528: 2 splits fill the wave"},
	    {67, 32, 8, 128, GPU_BF16, 4096, 132, 8, 1 << 22, 1, "base 536: 1056 / 536 = 1.97 -> 1"},
	    {131, 32, 8, 128, GPU_BF16, 4096, 132, 8, 1 << 22, 1, "base 1048 < 1056: 1"},
	    {256, 32, 8, 128, GPU_BF16, 32768, 132, 8, 1 << 22, 1, "base 2048 >= a wave: 1"},
	    {1, 32, 8, 128, GPU_BF16, 4096, 132, 8, 1 << 22, 32, "keys: 4096 / 128 = 32 < 132"},
	    {1, 32, 8, 128, GPU_BF16, 300, 132, 8, 1 << 22, 2, "keys: 300 / 128 = 2"},
	    {1, 32, 8, 128, GPU_BF16, 100, 132, 8, 1 << 22, 1, "keys: 100 / 128 = 0 -> 1"},
	    {1, 32, 8, 128, GPU_BF16, 32768, 132, 8, 100000, 24,
	     "scratch: 32 x 130 = 4160 floats a split, 100000 / 4160 = 24.04 -> 24"},
	    {1, 32, 8, 128, GPU_BF16, 32768, 132, 4, 1 << 22, 66, "4 blocks an SM: 528 / 8 = 66"},
	    {1, 32, 8, 128, GPU_BF16, 32768, 132, 0, 1 << 22, 16,
	     "no occupancy (0) counts as 1 block an SM: 132 / 8 = 16.5 -> 16"},
	    {4, 32, 8, 128, GPU_BF16, 32768, 114, 9, 1 << 22, 32, "114 x 9 = 1026; base 32: 32.06 -> 32"},
	    /* the per-query kernel: f32 heads of 256 (decode_gqa_ok refuses them), and a GQA
	     * group of 16 (more than 8): one block per query head */
	    {1, 4, 1, 256, GPU_F32, 32768, 132, 2, 1 << 22, 66,
	     "per-query, base 4: 264 / 4 = 66; partials 4 x 66 x 258 = 68,112"},
	    {2, 32, 2, 64, GPU_BF16, 4096, 132, 4, 1 << 22, 8, "per-query, base 64: 528 / 64 = 8.25 -> 8"},
	};
	for (auto &c : cases) {
		int got = gpu_attention_splits(c.n_tok, c.n_head, c.n_head_kv, c.hd, c.dt, c.max_ctx,
					       c.n_sm, c.per_sm, c.cap);
		CHECK(got == c.want, "splits of %d tokens, heads %d/%d x %d %s, ctx %d, %d SMs x %d: %d, "
		      "want %d (%s)", c.n_tok, c.n_head, c.n_head_kv, c.hd, gpu_dtype_name(c.dt),
		      c.max_ctx, c.n_sm, c.per_sm, got, c.want, c.why);
	}
	/* Blocks per SM on the emulator's H100 (65536 registers in 4 sub-partitions, 2048
	 * threads, 32 blocks, 228 KiB of shared memory with 1 KiB reserved a block):
	 * - bf16 32/8 x 128: attn_decode_gqa_kernel<bf16, 4, 1>, __launch_bounds__(128, 8):
	 *   65536 / (8 x 128) = 64 registers, 2048 a warp, 16384 / 2048 = 8 warps a
	 *   sub-partition, 32 an SM: 8 blocks of 4 warps; shared k_s + v_s 2 x 32 x 16 x 16 B
	 *   + row_s 256 = 16,640 + 1024 = 17,664: 233,472 / 17,664 = 13; threads 16: 8.
	 * - f32 32/8 x 128: <float, 4, 1>, bounds (128, 4): 128 registers, 4 warps a
	 *   sub-partition: 4 blocks; shared 2 x 32 x 32 x 16 + 256 + 1024 = 34,048: 6: 4.
	 * - bf16 16/2 x 64 (G = 8): <bf16, 2, 2>, bounds (128, 4): 4 (registers); shared
	 *   2 x 32 x 8 x 16 + 256 + 1024 = 9,472: 24: 4.
	 * - f32 4/1 x 256: the per-query attn_kernel<float, 8>, bounds (128) only: the stated
	 *   128 registers: 4; shared s_m + s_l 2 x 16 + s_acc 4 x 256 x 4 = 4,128 + 1024 =
	 *   5,152, 5,248 in 128-byte steps: 44: 4. */
	struct {
		enum gpu_dtype dt;
		int n_head, n_head_kv, hd, want;
	} occ[] = {{GPU_BF16, 32, 8, 128, 8}, {GPU_F32, 32, 8, 128, 4}, {GPU_BF16, 16, 2, 64, 4},
		   {GPU_F32, 4, 1, 256, 4}};
	for (auto &o : occ) {
		int per_sm = -1;
		cudaError_t e = gpu_attention_occupancy(o.dt, o.n_head, o.n_head_kv, o.hd, &per_sm);
		CHECK(e == cudaSuccess && (emu ? per_sm == o.want : per_sm >= 1 && per_sm <= 32),
		      "blocks per SM of decode attention %s %d/%d x %d: %d (%s), want %s%d",
		      gpu_dtype_name(o.dt), o.n_head, o.n_head_kv, o.hd, per_sm,
		      cudaGetErrorName(e), emu ? "" : "1..32 (the emulator: ", o.want);
	}
	/* heads of up to GPU_ATTN_MAX_HEAD (512, Gemma 4's global ones) have an occupancy;
	 * larger ones are refused */
	int per_sm = -1;
	CHECK(gpu_attention_occupancy(GPU_BF16, 8, 1, 512, &per_sm) == cudaSuccess && per_sm >= 1,
	      "occupancy of heads of 512: %d", per_sm);
	per_sm = -1;
	CHECK(gpu_attention_occupancy(GPU_BF16, 32, 8, 640, &per_sm) == cudaErrorInvalidValue &&
		      per_sm == 0,
	      "occupancy of heads of 640: refused");
}

/* blocks per SM of the decode kernel of a shape (1 if the call fails: a CHECK says so) */
static int attn_per_sm(enum gpu_dtype dt, int n_head, int n_head_kv, int hd)
{
	int n = 0;
	cudaError_t e = gpu_attention_occupancy(dt, n_head, n_head_kv, hd, &n);
	CHECK(e == cudaSuccess && n >= 1, "occupancy %s %d/%d x %d: %d (%s)", gpu_dtype_name(dt),
	      n_head, n_head_kv, hd, n, cudaGetErrorName(e));
	return n >= 1 ? n : 1;
}

/* The arguments of gpu_attention for n_tok query tokens over a paged pool: the score
 * scale 1/sqrt(hd), no soft-cap, no window, every token through the per-query kernel
 * (no tiles, no list), prefill kernel by GPU_ATTN_PREFILL_AUTO; the callers change what
 * their case needs. */
static struct gpu_attn_args attn_args(const float *q, int ldq, struct gpu_kv_layer kv,
				      const int32_t *tok_pos, const int32_t *tok_bt,
				      const int32_t *bt, int n_tok, int n_head, int n_head_kv,
				      int hd, void *out, int max_ctx)
{
	struct gpu_attn_args a;
	memset(&a, 0, sizeof a);
	a.q = q;
	a.ldq = ldq;
	a.kv = kv;
	a.tok_pos = tok_pos;
	a.tok_bt = tok_bt;
	a.bt = bt;
	a.n_tok = n_tok;
	a.n_head = n_head;
	a.n_head_kv = n_head_kv;
	a.head_dim = hd;
	a.scale = 1.0f / sqrtf((float)hd);
	a.out = out;
	a.max_ctx = max_ctx;
	a.prefill = GPU_ATTN_PREFILL_AUTO;
	/* the GQA decode kernel a programmatic dependent launch every other call (gpu/pdl.cuh:
	 * under gpu/emu its memory is untouchable until its wait) */
	static int n_pdl;
	a.pdl = (n_pdl++ & 1) != 0;
	return a;
}

/* gpu_gemv_chain with decode attentions among its steps (issue 17: QKV, attention and O of
 * two layers as run_pass chains them) against the same steps as separate launches
 * (gpu_gemv, gpu_attention with the same splits and merge counters, gpu_gemv) on copies of
 * the same buffers: every output byte for byte (y: the Q/K/V rows; the KV pool; the
 * attention's output; O's output; per layer) and the merge counters back to 0. The
 * hazards: an attention reads the Q rows and the new K/V rows its QKV step wrote, O reads
 * what the attention wrote, the second layer's QKV normalizes the first's O output, and
 * both attentions share the partials and counters (as the backend's layers do). The
 * chain's four GQA decode bodies (heads of 32, 64, 128: NPL 1, 2, 4; with heads of 128
 * both group sizes, G <= 4: a head a warp, G 5..8: two), f16 and bf16; 1 token on 132
 * SMs, 2 tokens on 2 SMs (a part of 128 threads walks several (KV head, token, split)
 * items); 1 and 3 splits (contexts of 701 and 3 keys: splits with no key); the
 * attentions after their QKV steps (at 1 and 3) and first (at 0 and 2, the first QKV
 * launched before). Then the refusals: f32 K/V, 3 tokens, heads of 64 with G 8, heads of
 * 256, tiles, splits without merge counters, attentions out of order. */
struct chain_attn_shape {
	int H, HKV, HD;
	enum gpu_dtype dt;
};

static void chain_attn_case(const struct chain_attn_shape &sh, int n_tok, int n_split, int at,
			    unsigned *bar)
{
	const int E = 256, bs = 16, H = sh.H, HKV = sh.HKV, HD = sh.HD, NQ = H * HD;
	const int kv_dim = HKV * HD, NQKV = (H + 2 * HKV) * HD, ldy = NQKV + 4;
	const enum gpu_dtype dt = sh.dt;
	const size_t es = gpu_dtype_size(dt);
	const int n_sm = n_tok == 1 ? 132 : 2;
	char what[128];
	snprintf(what, sizeof what,
		 "gemv_chain attention %s h %d/%d hd %d n_tok %d splits %d at %d",
		 gpu_dtype_name(dt), H, HKV, HD, n_tok, n_split, at);
	/* each token its own blocks, in a shuffled order of the pool */
	const std::vector<int32_t> pos_all = {700, 2};
	std::vector<int32_t> pos(pos_all.begin(), pos_all.begin() + n_tok), tok_bt, bt, slots, list;
	int n_blocks = 0;
	for (int t = 0; t < n_tok; t++)
		n_blocks += pos[t] / bs + 1;
	std::vector<int32_t> perm(n_blocks);
	for (int i = 0; i < n_blocks; i++)
		perm[i] = (i * 7 + 3) % n_blocks; /* n_blocks: 44 or 45; 7 is prime to both */
	for (int t = 0, b0 = 0; t < n_tok; t++) {
		tok_bt.push_back((int32_t)bt.size());
		for (int j = 0; j <= pos[t] / bs; j++)
			bt.push_back(perm[b0++]);
		slots.push_back(bt[tok_bt[t] + pos[t] / bs] * bs + pos[t] % bs);
		list.push_back(t);
	}
	const int64_t block_elems = 2 * (int64_t)bs * kv_dim;
	std::vector<float> w = rand_vec((size_t)NQKV * E, -0.5f, 0.5f);
	std::vector<float> wo_h = rand_vec((size_t)E * NQ, -0.5f, 0.5f);
	auto pw = st_pack(dt, w), pwo = st_pack(dt, wo_h);
	void *wqkv = dev_upload(pw.data(), pw.size()), *wo = dev_upload(pwo.data(), pwo.size());
	std::vector<float> na = rand_vec(E, 0.5f, 1.5f);
	float *dna = dev_vec(na);
	const int half = HD / 2;
	std::vector<double> freq(half);
	for (int i = 0; i < half; i++)
		freq[i] = pow(10000.0, -2.0 * i / HD);
	std::vector<float> tab(GPU_ROPE_TABLE_FLOATS(half));
	gpu_rope_table_fill(freq.data(), half, tab.data());
	float *dtab = dev_vec(tab);
	int32_t *dp = dev_vec(pos), *ds = dev_vec(slots), *dtb = dev_vec(tok_bt),
		*dbt = dev_vec(bt), *dl = dev_vec(list);
	std::vector<float> xr = rand_vec((size_t)n_tok * E, -2, 2);
	std::vector<float> pool = rand_vec((size_t)block_elems * n_blocks, -2, 2);
	auto ppool = st_pack(dt, pool);
	const size_t part_n = gpu_attention_partial_floats(n_tok, H, HD, n_split);
	/* k: separate launches (0) or the chain (1); per layer l its pool, rows and outputs */
	struct bufs {
		void *pool[2], *attn[2];
		float *y[2], *o[2], *xr, *partial;
		int *cnt;
	} b[2];
	auto dev_nan = [&](size_t bytes) {
		void *d;
		REQUIRE(cudaMalloc(&d, bytes));
		REQUIRE(cudaMemset(d, 0xff, bytes));
		return d;
	};
	for (auto &u : b) {
		for (int l = 0; l < 2; l++) {
			u.pool[l] = dev_upload(ppool.data(), ppool.size());
			u.y[l] = (float *)dev_nan((size_t)n_tok * ldy * 4);
			u.attn[l] = dev_nan((size_t)n_tok * NQ * es);
			u.o[l] = (float *)dev_nan((size_t)n_tok * E * 4);
		}
		u.xr = dev_vec(xr);
		u.partial = (float *)dev_nan((part_n ? part_n : 1) * 4);
		REQUIRE(cudaMalloc(&u.cnt, (size_t)n_tok * HKV * sizeof(int)));
		REQUIRE(cudaMemset(u.cnt, 0, (size_t)n_tok * HKV * sizeof(int)));
	}
	struct gpu_gemv_args qkv[2][2], og[2][2];
	struct gpu_chain_attn ca[2][2];
	for (int k = 0; k < 2; k++)
		for (int l = 0; l < 2; l++) {
			const struct bufs &u = b[k];
			struct gpu_gemv_args &g = qkv[k][l];
			memset(&g, 0, sizeof g);
			g.W =
			    wqkv; /* the attention norm in its prologue, qkv_post in its epilogue */
			g.n_out = NQKV;
			g.n_in = E;
			g.n_tok = n_tok;
			g.res = l ? u.o[0] : u.xr;
			g.norm = dna;
			g.eps = 1e-5f;
			g.y = u.y[l];
			g.ldy = ldy;
			g.qkv_post = true;
			struct gpu_qkv_post_args &p = g.post;
			p.n_head = H;
			p.n_head_kv = HKV;
			p.head_dim = HD;
			p.pos = dp;
			p.rope_dim = HD;
			p.table = dtab;
			p.mscale = 1.0f;
			p.slots = ds;
			p.kv = {u.pool[l], block_elems, (int64_t)bs * kv_dim, bs, kv_dim};
			struct gpu_gemv_args &o = og[k][l];
			memset(&o, 0, sizeof o);
			o.W = wo;
			o.n_out = E;
			o.n_in = NQ;
			o.n_tok = n_tok;
			o.x = u.attn[l];
			o.ldx = NQ;
			o.y = u.o[l];
			o.ldy = E;
			struct gpu_chain_attn &c = ca[k][l];
			memset(&c, 0, sizeof c);
			c.a = attn_args(u.y[l], ldy, p.kv, dp, dtb, dbt, n_tok, H, HKV, HD,
					u.attn[l], 701);
			c.a.list = dl;
			c.a.n_list = n_tok;
			c.a.merge_counters = u.cnt;
			c.n_split = n_split;
			c.partial = n_split > 1 ? u.partial : NULL;
		}
	for (int l = 0; l < 2; l++) {
		REQUIRE(gpu_gemv(&qkv[0][l], dt, n_sm, 0));
		REQUIRE(gpu_attention(&ca[0][l].a, dt, n_split, ca[0][l].partial, 0));
		REQUIRE(gpu_gemv(&og[0][l], dt, n_sm, 0));
	}
	const size_t need = gpu_chain_attn_bytes(&ca[1][0].a, n_split, ca[1][0].partial, dt);
	CHECK(need > 0 && need <= gemv_xs, "%s: the chain takes the attention (%zu bytes of %zu)",
	      what, need, gemv_xs);
	if (at == 1) { /* QKV, attention, O, QKV, attention, O */
		struct gpu_gemv_args c4[4] = {qkv[1][0], og[1][0], qkv[1][1], og[1][1]};
		ca[1][0].at = 1;
		ca[1][1].at = 3;
		REQUIRE(gpu_gemv_chain(c4, 4, ca[1], 2, dt, n_sm, bar, 0));
	} else { /* QKV; then attention, O, QKV, attention, O */
		REQUIRE(gpu_gemv(&qkv[1][0], dt, n_sm, 0));
		struct gpu_gemv_args c3[3] = {og[1][0], qkv[1][1], og[1][1]};
		ca[1][0].at = 0;
		ca[1][1].at = 2;
		REQUIRE(gpu_gemv_chain(c3, 3, ca[1], 2, dt, n_sm, bar, 0));
	}
	for (int l = 0; l < 2; l++) {
		const struct {
			const char *name;
			const void *a, *b;
			size_t bytes;
		} outs[] = {{"y", b[0].y[l], b[1].y[l], (size_t)n_tok * ldy * 4},
			    {"KV pool", b[0].pool[l], b[1].pool[l], pool.size() * es},
			    {"attention", b[0].attn[l], b[1].attn[l], (size_t)n_tok * NQ * es},
			    {"O", b[0].o[l], b[1].o[l], (size_t)n_tok * E * 4}};
		for (auto &o : outs) {
			std::vector<uint8_t> ha = dev_download<uint8_t>(o.a, o.bytes);
			std::vector<uint8_t> hb = dev_download<uint8_t>(o.b, o.bytes);
			size_t bad = 0;
			for (size_t i = 0; i < o.bytes; i++)
				bad += ha[i] != hb[i];
			CHECK(bad == 0,
			      "%s: layer %d: %s: %zu of %zu bytes differ from separate launches",
			      what, l, o.name, bad, o.bytes);
		}
	}
	std::vector<int> cnt = dev_download<int>(b[1].cnt, (size_t)n_tok * HKV);
	bool zero = true;
	for (int v : cnt)
		zero = zero && v == 0;
	CHECK(zero, "%s: merge counters back to 0", what);
	if (n_tok == 2 && n_split == 3 && at == 1 && H == 8 && HD == 128) { /* the refusals */
		struct gpu_gemv_args c2[2] = {qkv[1][0], og[1][0]};
		struct gpu_chain_attn r[2] = {ca[1][0], ca[1][1]};
		r[0].at = 3;
		CHECK(gpu_gemv_chain(c2, 2, r, 1, dt, n_sm, bar, 0) == cudaErrorInvalidValue,
		      "%s: an attention after the last step + 1", what);
		r[0].at = 2;
		r[1].at = 1;
		struct gpu_chain_attn r2[2] = {ca[1][0], ca[1][1]};
		r2[0].at = r2[1].at = 1; /* two before one step */
		CHECK(gpu_gemv_chain(c2, 2, r, 2, dt, n_sm, bar, 0) == cudaErrorInvalidValue &&
			  gpu_gemv_chain(c2, 2, r2, 2, dt, n_sm, bar, 0) == cudaErrorInvalidValue &&
			  gpu_gemv_chain(c2, 2, NULL, 1, dt, n_sm, bar, 0) ==
			      cudaErrorInvalidValue &&
			  gpu_gemv_chain(c2, 2, r, GPU_CHAIN_ATTN_MAX + 1, dt, n_sm, bar, 0) ==
			      cudaErrorInvalidValue,
		      "%s: attentions out of order, two at one step, none given, too many", what);
		r[0] = ca[1][0];
		r[0].at = 1;
		r[0].a.merge_counters = NULL; /* splits and no merge */
		const int32_t tiles[2] = {0, 1};
		struct gpu_attn_args t = ca[1][0].a, h = t, g8 = t, t3 = t;
		t.tiles = tiles;
		t.n_tiles = 1;
		h.head_dim = 256;
		g8.head_dim = 64;
		g8.n_head = 16; /* G 8 with heads of 64 */
		t3.n_list = 3;
		CHECK(gpu_gemv_chain(c2, 2, r, 1, dt, n_sm, bar, 0) == cudaErrorInvalidValue &&
			  gpu_chain_attn_bytes(&r[0].a, n_split, r[0].partial, dt) == 0 &&
			  gpu_chain_attn_bytes(&t, n_split, r[0].partial, dt) == 0 &&
			  gpu_chain_attn_bytes(&h, n_split, r[0].partial, dt) == 0 &&
			  gpu_chain_attn_bytes(&g8, n_split, r[0].partial, dt) == 0 &&
			  gpu_chain_attn_bytes(&t3, n_split, r[0].partial, dt) == 0 &&
			  gpu_chain_attn_bytes(&ca[1][0].a, n_split, r[0].partial, GPU_F32) == 0 &&
			  gpu_chain_attn_bytes(&ca[1][0].a, n_split, NULL, dt) == 0,
		      "%s: splits without merge counters or partials, tiles, heads of 256, G 8 "
		      "with heads of 64, 3 tokens, f32 refused",
		      what);
		/* GEMVs of 3 tokens (NT 4: an instance without the attention) */
		c2[0].n_tok = c2[1].n_tok = 3;
		CHECK(gpu_gemv_chain(c2, 2, ca[1], 1, dt, n_sm, bar, 0) == cudaErrorInvalidValue,
		      "%s: the attention in a chain of 3 tokens", what);
	}
	for (auto &u : b) {
		for (int l = 0; l < 2; l++) {
			cudaFree(u.pool[l]);
			cudaFree(u.y[l]);
			cudaFree(u.attn[l]);
			cudaFree(u.o[l]);
		}
		cudaFree(u.xr);
		cudaFree(u.partial);
		cudaFree(u.cnt);
	}
	cudaFree(wqkv);
	cudaFree(wo);
	cudaFree(dna);
	cudaFree(dtab);
	cudaFree(dp);
	cudaFree(ds);
	cudaFree(dtb);
	cudaFree(dbt);
	cudaFree(dl);
}

static void test_gemv_chain_attn(void)
{
	unsigned *bar;
	REQUIRE(cudaMalloc(&bar, GPU_GRID_BAR_WORDS * sizeof(unsigned)));
	REQUIRE(cudaMemset(bar, 0, GPU_GRID_BAR_WORDS * sizeof(unsigned)));
	const struct chain_attn_shape shapes[] = {{8, 2, 128, GPU_BF16},  {16, 2, 128, GPU_F16},
						  {14, 2, 128, GPU_BF16}, {8, 2, 64, GPU_F16},
						  {4, 2, 64, GPU_BF16},	  {6, 3, 32, GPU_F16}};
	for (const struct chain_attn_shape &sh : shapes)
		for (int n_tok : {1, 2})
			for (int n_split : {1, 3})
				for (int at : {1, 0})
					chain_attn_case(sh, n_tok, n_split, at, bar);
	cudaFree(bar);
}

static void test_attention(int n_sm)
{
	/* GQA groups of 1 to 8 (the GQA decode kernel: 1 or 2 heads a warp), head sizes
	 * from 8 to 256 (f32 at 256 and rows that are no multiple of 16 bytes go to the
	 * per-query kernel), and gemma4's global heads of 512 (the per-query kernel, 16
	 * dimensions a lane, and its merge, 4 a thread); each with plain causal attention,
	 * then (bf16 only, for time) a window of 64 keys (gemma2/3's local layers) and a score
	 * soft-cap of 30 (gemma2); then (f32 and bf16) gpt-oss's attention sinks, with and
	 * without a window of 64; then (bf16, two shapes, for time: the tensor-core and
	 * CUDA-core tiles, the GQA decode and per-query kernels, split or not) llama4's
	 * chunks of 64 (the chunk of 37 queries from 100 crosses 128 inside its second tile;
	 * the decode step at 1500 sees 1472..1500). Heads of 512: plain and (bf16) windowed
	 * only, for time.
	 * deepseek2's latent rows (mla): heads of 576 over one K/V head whose V is the K row
	 * (v_offset 0, a layer's slab K alone: the CPU backend's layout), and of 48 (its tiny
	 * shape: the GQA decode, tiled and tensor-core kernels); plain attention, f32 and bf16,
	 * for time. */
	struct {
		int n_head, n_head_kv, hd, bs;
		bool mla;
	} shapes[11] = {{8, 4, 8, 16, false},	 {32, 8, 128, 32, false}, {4, 4, 64, 16, false},
			{6, 2, 96, 8, false},	 {4, 1, 256, 16, false},  {16, 2, 64, 16, false},
			{14, 2, 128, 16, false}, {4, 2, 36, 16, false},	  {4, 1, 512, 16, false},
			{4, 1, 576, 16, true},	 {4, 1, 48, 16, true}};
	for (auto &sh : shapes)
		for (enum gpu_dtype dt : all_dt)
			for (int variant = 0; variant < 6; variant++) {
			if (variant == 5 && (dt != GPU_BF16 || sh.mla ||
					     (sh.n_head != 16 && sh.hd != 36)))
				continue;
			if (variant > 0 && variant < 3 && dt != GPU_BF16)
				continue;
			if (sh.hd > 256 && variant > 1)
				continue;
			if (sh.mla && (variant > 0 || dt == GPU_F16))
				continue;
			if (variant >= 3 && dt == GPU_F16)
				continue;
			const bool chunked = variant == 5;
			const int window = variant == 1 || variant == 4 || chunked ? 64 : 0;
			const float softcap = variant == 2 ? 30.0f : 0.0f;
			/* sinks in [-1, 6]: from a small share of a 1501-key softmax to most of
			 * the first token's (one key) */
			const std::vector<float> sinks =
			    variant == 3 || variant == 4 ? rand_vec((size_t)sh.n_head, -1, 6)
							 : std::vector<float>();
			int n_layer = 2, layer = 1, kv_dim = sh.n_head_kv * sh.hd;
			const int parts = sh.mla ? 1 : 2; /* K and V slabs, or K alone (mla) */
			/* three sequences: a long decode step, a context chunk in the middle of a
			 * prompt, and the very first token of a prompt */
			struct {
				int pos0, n;
			} seqs[3] = {{1500, 1}, {100, 37}, {0, 1}};
			int max_ctx = 0, n_tok = 0, n_blocks = 0;
			for (auto &s : seqs) {
				n_tok += s.n;
				max_ctx = std::max(max_ctx, s.pos0 + s.n);
				n_blocks += (s.pos0 + s.n + sh.bs - 1) / sh.bs;
			}
			n_blocks += 3; /* unused blocks, to catch reads outside the tables */
			int64_t block_elems = (int64_t)n_layer * parts * sh.bs * kv_dim;
			std::vector<float> pool = rand_vec((size_t)block_elems * n_blocks, -1, 1);
			for (auto &v : pool)
				v = st_round(dt, v);
			std::vector<int> perm(n_blocks);
			for (int i = 0; i < n_blocks; i++)
				perm[i] = i;
			for (int i = n_blocks - 1; i > 0; i--)
				std::swap(perm[i], perm[rnd_u32() % (i + 1)]);
			std::vector<int32_t> bt, tok_pos, tok_bt;
			std::vector<std::vector<int32_t>> tables;
			int next = 0;
			for (auto &s : seqs) {
				int nb = (s.pos0 + s.n + sh.bs - 1) / sh.bs;
				std::vector<int32_t> tb(perm.begin() + next,
							perm.begin() + next + nb);
				next += nb;
				int off = (int)bt.size();
				bt.insert(bt.end(), tb.begin(), tb.end());
				for (int j = 0; j < s.n; j++) {
					tok_pos.push_back(s.pos0 + j);
					tok_bt.push_back(off);
				}
				tables.push_back(tb);
			}
			int ldq = (sh.n_head + 2 * sh.n_head_kv) * sh.hd;
			std::vector<float> q = rand_vec((size_t)n_tok * ldq, -2, 2);
			auto pp = st_pack(dt, pool);
			void *dpool = dev_upload(pp.data(), pp.size());
			float *dq = dev_vec(q);
			int32_t *dbt = dev_vec(bt), *dpos = dev_vec(tok_pos),
				*dtb = dev_vec(tok_bt);
			size_t out_n = (size_t)n_tok * sh.n_head * sh.hd;
			void *dout;
			REQUIRE(cudaMalloc(&dout, out_n * 4));
			/* partial[] is followed by a guard: the launcher may use only the
			 * gpu_attention_partial_floats it was sized for (of the listed tokens) */
			float *partial;
			const size_t part_cap = 1 << 22, guard = 1024;
			REQUIRE(cudaMalloc(&partial, (part_cap + guard) * 4));
			/* merge counters of the decode kernel's own merge: a token per KV head */
			const size_t cnt_n = (size_t)n_tok * sh.n_head_kv;
			int *dcnt;
			REQUIRE(cudaMalloc(&dcnt, cnt_n * 4));
			REQUIRE(cudaMemset(dcnt, 0, cnt_n * 4));
			struct gpu_kv_layer kv = {
			    (char *)dpool + (size_t)layer * parts * sh.bs * kv_dim * gpu_dtype_size(dt),
			    block_elems, sh.mla ? 0 : (int64_t)sh.bs * kv_dim, sh.bs, kv_dim};
			struct gpu_attn_args a = attn_args(dq, ldq, kv, dpos, dtb, dbt, n_tok, sh.n_head,
							   sh.n_head_kv, sh.hd, dout, max_ctx);
			a.softcap = softcap;
			a.window = window;
			a.chunked = chunked;
			float *dsinks = sinks.empty() ? NULL : dev_vec(sinks);
			a.sinks = dsinks;
			/* the chunk (sequence 1) as tiles of 16, 16 and 5 queries; the two single
			 * tokens through the per-query kernel */
			std::vector<int32_t> tiles = {1, 16, 17, 16, 33, 5}, list = {0, 38};
			int32_t *dtiles = dev_vec(tiles), *dlist = dev_vec(list);

			/* reference, in double, from the same (rounded) K/V values; with
			 * round_chunk, the chunk's queries rounded to dt as the tensor-core kernel
			 * rounds them (its inputs are 16-bit) */
			auto reference = [&](bool round_chunk) {
			std::vector<float> want(out_n);
			int t = 0;
			for (int si = 0; si < 3; si++)
				for (int j = 0; j < seqs[si].n; j++, t++) {
					int p = seqs[si].pos0 + j;
					auto qv = [&](size_t i) {
						return round_chunk && si == 1 ? st_round(dt, q[i]) : q[i];
					};
					for (int h = 0; h < sh.n_head; h++) {
						int kvh = h / (sh.n_head / sh.n_head_kv);
						std::vector<double> sc(p + 1);
						double mx = -INFINITY;
						for (int k = 0; k <= p; k++) {
							size_t base =
							    (size_t)tables[si][k / sh.bs] *
								block_elems +
							    (size_t)layer * parts * sh.bs * kv_dim +
							    (size_t)(k % sh.bs) * kv_dim +
							    (size_t)kvh * sh.hd;
							double d = 0;
							for (int e = 0; e < sh.hd; e++)
								d += (double)qv((size_t)t * ldq +
										h * sh.hd + e) *
								     pool[base + e];
							sc[k] = d / sqrt((double)sh.hd);
							if (softcap > 0)
								sc[k] = softcap * tanh(sc[k] / softcap);
							if (window > 0 && (chunked ? k < p / window * window
										   : k <= p - window))
								sc[k] = -INFINITY;
							mx = std::max(mx, sc[k]);
						}
						/* the sink: in the max and the denominator */
						const double sk =
						    sinks.empty() ? -INFINITY : (double)sinks[h];
						mx = std::max(mx, sk);
						double sum = sinks.empty() ? 0 : exp(sk - mx);
						for (int k = 0; k <= p; k++)
							sum += (sc[k] = exp(sc[k] - mx));
						for (int e = 0; e < sh.hd; e++) {
							double o = 0;
							for (int k = 0; k <= p; k++) {
								size_t base =
								    (size_t)tables[si][k / sh.bs] *
									block_elems +
								    (size_t)layer * parts * sh.bs *
									kv_dim +
								    (sh.mla ? 0 : (size_t)sh.bs * kv_dim) +
								    (size_t)(k % sh.bs) * kv_dim +
								    (size_t)kvh * sh.hd;
								o += sc[k] * pool[base + e];
							}
							want[(size_t)t * sh.n_head * sh.hd +
							     h * sh.hd + e] =
							    st_round(dt, (float)(o / sum));
						}
					}
				}
			return want;
			};
			const std::vector<float> want = reference(false);
			/* the chunk on tensor cores: 16-bit K/V, heads of 16..128 in steps of 16 */
			const bool tc = dt != GPU_F32 && sh.hd % 16 == 0 && sh.hd <= 128;
			const std::vector<float> want_tc = tc ? reference(true) : want;
			for (int tiled = 0; tiled < 2; tiled++)
			for (int prefill = 0; prefill < (tiled && tc ? 2 : 1); prefill++) {
				/* prefill 0: GPU_ATTN_PREFILL_AUTO (the tensor-core kernel where tc),
				 * 1: the CUDA-core tiled kernel (once, with one split) */
				const bool on_tc = tiled && tc && prefill == 0;
				a.prefill = prefill ? GPU_ATTN_PREFILL_CUDA_CORES : GPU_ATTN_PREFILL_AUTO;
				a.tiles = tiled ? dtiles : NULL;
				a.n_tiles = tiled ? 3 : 0;
				a.list = tiled ? dlist : NULL;
				a.n_list = tiled ? 2 : 0;
				int n_q = tiled ? 2 : n_tok;
				int heur = gpu_attention_splits(
				    n_q, sh.n_head, sh.n_head_kv, sh.hd, dt, max_ctx, n_sm,
				    attn_per_sm(dt, sh.n_head, sh.n_head_kv, sh.hd), part_cap);
				int splits[3] = {1, 5, heur};
				for (int ns : splits) {
					if (prefill == 1 && ns != 1)
						continue;
					REQUIRE(
					    cudaMemset(dout, 0xff, out_n * 4)); /* NaN garbage */
					size_t used =
					    gpu_attention_partial_floats(n_q, sh.n_head, sh.hd, ns);
					if (used > part_cap)
						continue;
					REQUIRE(cudaMemset(partial + used, 0xff, guard * 4));
					REQUIRE(gpu_attention(&a, dt, ns, partial, 0));
					std::vector<float> got = dev_download_st(dt, dout, out_n);
					char what[128];
					snprintf(what, sizeof what,
						 "attention h %d/%d hd %d bs %d %s splits %d %s "
						 "window %d%s softcap %g%s",
						 sh.n_head, sh.n_head_kv, sh.hd, sh.bs,
						 gpu_dtype_name(dt), ns,
						 tiled ? (on_tc ? "tensor-core tiles+list"
								: "tiles+list")
						       : "per-query",
						 window, chunked ? " chunked" : "", softcap,
						 sinks.empty() ? "" : " sinks");
					std::vector<uint32_t> gd =
					    dev_download<uint32_t>(partial + used, guard);
					size_t touched = 0;
					for (uint32_t w : gd)
						touched += w != 0xffffffffu;
					CHECK(touched == 0,
					      "%s: wrote %zu floats past the %zu of partial "
					      "scratch it was sized for",
					      what, touched, used);
					if (ns > 1) {
						/* the splits merged by the decode kernel's last
						 * blocks (where it takes the shape): bitwise the
						 * merge kernel's result, the counters back to 0 */
						REQUIRE(cudaMemset(dout, 0xff, out_n * 4));
						a.merge_counters = dcnt;
						REQUIRE(gpu_attention(&a, dt, ns, partial, 0));
						a.merge_counters = NULL;
						char wf[160];
						snprintf(wf, sizeof wf, "%s, merged in the decode kernel",
							 what);
						check_close(wf, dev_download_st(dt, dout, out_n), got, 0,
							    0);
						std::vector<int> cnt = dev_download<int>(dcnt, cnt_n);
						size_t nz = 0;
						for (int v : cnt)
							nz += v != 0;
						CHECK(nz == 0, "%s: %zu merge counters left non-zero", wf,
						      nz);
					}
					/* outputs are convex combinations of V in [-1, 1]. fp32
					 * softmax over
					 * <= 1501 keys with scores |s| <= 2*2*sqrt(hd): expf and
					 * the running rescaling err ~1e-6 relative per term, so
					 * 2e-5 absolute; a 16-bit output adds its rounding
					 * (st_rtol) */
					if (!on_tc) {
						check_close(what, got, want, 2e-5, st_rtol(dt));
						continue;
					}
					/* tensor cores: against the reference from the same rounded
					 * queries, the products are exact in fp32 and the scores as
					 * accurate as above; P = exp(s - m) is rounded to dt before P V,
					 * which moves sum_j p_j v_j / l by at most u * max|v| = u (u =
					 * 2^-9 for bf16, 2^-11 for f16: half an ulp, relative) */
					const double u = dt == GPU_BF16 ? 1.0 / 512 : 1.0 / 2048;
					check_close(what, got, want_tc, 2e-5 + u, st_rtol(dt));
				}
			}
			cudaFree(dtiles);
			cudaFree(dlist);
			cudaFree(dcnt);
			if (dsinks)
				cudaFree(dsinks);
			cudaFree(dpool);
			cudaFree(dq);
			cudaFree(dbt);
			cudaFree(dpos);
			cudaFree(dtb);
			cudaFree(dout);
			cudaFree(partial);
		}
}

/* ---- sampling ---- */

static void test_sample(void)
{
	const int vocabs[3] = {512, 32000, 128256};
	for (int V : vocabs) {
		const int n_rows = 40;
		int n_logit_rows = 8;
		std::vector<float> logits((size_t)n_logit_rows * V);
		for (int r = 0; r < n_logit_rows; r++)
			for (int i = 0; i < V; i++) {
				float x = rnd_uniform(-8, 8);
				/* rows 0-1: coarse values, so that many ties exercise "lower id" */
				if (r < 2)
					x = floorf(x * 2) / 2;
				logits[(size_t)r * V + i] = x;
			}
		logits[(size_t)2 * V + 5] = 30.0f; /* a dominant token */
		std::vector<struct sampler_params> params(n_rows);
		std::vector<struct sampler_rng> rng_cpu(n_rows), rng_gpu(n_rows);
		std::vector<std::vector<int32_t>> prompts(n_rows), outputs(n_rows);
		std::vector<int32_t> forced(n_rows, -1), lrow(n_rows);
		for (int r = 0; r < n_rows; r++) {
			struct sampler_params *p = &params[r];
			sampler_params_default(p);
			lrow[r] = r % n_logit_rows;
			p->seed = 1000 + r;
			p->n_top = (int32_t)(rnd_u32() % 6) * (r % 3 == 0 ? 4 : 1);
			int kind = r % 8;
			if (kind >= 1)
				p->temperature = rnd_uniform(0.3f, 1.5f);
			if (kind == 2 || kind == 6)
				p->top_k = 1 + (int32_t)(rnd_u32() % 100);
			if (kind == 3 || kind == 6)
				p->top_p = rnd_uniform(0.5f, 0.99f);
			if (kind == 4 || kind == 6)
				p->min_p = rnd_uniform(0.01f, 0.3f);
			if (kind == 5 || kind == 7 || r % 5 == 0) {
				p->repetition_penalty = rnd_uniform(1.0f, 1.5f);
				p->presence_penalty = rnd_uniform(0.0f, 1.0f);
				p->frequency_penalty = rnd_uniform(0.0f, 0.5f);
				for (int i = 0; i < 30; i++)
					prompts[r].push_back((int32_t)(rnd_u32() % V));
				for (int i = 0; i < 20; i++)
					outputs[r].push_back(i % 3 ? (int32_t)(rnd_u32() % 50)
								   : prompts[r][i]);
				outputs[r].push_back(V + 7); /* ignored: outside the vocabulary */
			}
			if (kind == 7)
				p->temperature = 0.0f; /* greedy with penalties */
			if (r == n_rows - 1)
				forced[r] = V - 1;
			sampler_rng_seed(&rng_cpu[r], p->seed);
			rng_gpu[r] = rng_cpu[r];
		}
		/* host side of the device sampler, as gpu/backend_cuda.cu builds it */
		std::vector<struct gpu_sample_row> rows(n_rows);
		std::vector<struct gpu_hist_entry> hist;
		for (int r = 0; r < n_rows; r++) {
			const struct sampler_params *p = &params[r];
			struct gpu_sample_row &g = rows[r];
			g = {lrow[r],
			     forced[r],
			     p->temperature,
			     p->top_k,
			     p->top_p,
			     p->min_p,
			     p->repetition_penalty,
			     p->presence_penalty,
			     p->frequency_penalty,
			     p->n_top,
			     (int32_t)hist.size(),
			     0,
			     0.0f};
			std::vector<int32_t> cnt(V, 0), ids;
			for (size_t j = 0; j < prompts[r].size() + outputs[r].size(); j++) {
				bool in_p = j < prompts[r].size();
				int32_t id =
				    in_p ? prompts[r][j] : outputs[r][j - prompts[r].size()];
				if (id < 0 || id >= V)
					continue;
				if (!cnt[id])
					ids.push_back(id);
				cnt[id] = in_p ? (cnt[id] | 1) : cnt[id] + 2;
			}
			for (int32_t id : ids)
				hist.push_back({id, cnt[id]});
			g.hist_n = (int32_t)ids.size();
			if (forced[r] < 0 && p->temperature > 0.0f)
				g.u = sampler_rng_uniform(&rng_gpu[r]);
		}
		float *dl = dev_vec(logits);
		struct gpu_sample_row *drows = dev_vec(rows);
		struct gpu_hist_entry *dh =
		    dev_vec(hist.empty() ? std::vector<gpu_hist_entry>(1) : hist);
		float *work;
		REQUIRE(cudaMalloc(&work, gpu_sample_work_floats(n_rows, V) * 4));
		struct sampler_result *dout;
		REQUIRE(cudaMalloc(&dout, n_rows * sizeof *dout));
		REQUIRE(gpu_sample(dl, V, drows, n_rows, dh, work, dout, 0));
		std::vector<struct sampler_result> got =
		    dev_download<struct sampler_result>(dout, n_rows);
		std::vector<uint8_t> scratch(sampler_scratch_bytes(V));
		int tok_bad = 0, top_bad = 0, lp_bad = 0;
		for (int r = 0; r < n_rows; r++) {
			struct sampler_result want;
			const float *lg = &logits[(size_t)lrow[r] * V];
			if (forced[r] >= 0) {
				sampler_score(lg, V, forced[r], params[r].n_top, &want);
			} else {
				struct sampler_history h = {
				    prompts[r].data(), (int32_t)prompts[r].size(),
				    outputs[r].data(), (int32_t)outputs[r].size()};
				sampler_sample(lg, V, &params[r], &h, &rng_cpu[r], scratch.data(),
					       &want);
			}
			if (got[r].token != want.token) {
				tok_bad++;
				fprintf(stderr, "  V %d row %d: token %d, want %d\n", V, r,
					got[r].token, want.token);
			}
			/* the log-sum-exp is a double sum in a different order: the fp32 log-prob
			 * may differ in its last bit */
			if (!(fabsf(got[r].logprob - want.logprob) <=
			      2e-6f * (1 + fabsf(want.logprob))))
				lp_bad++;
			bool same_top = got[r].n_top == want.n_top;
			for (int j = 0; same_top && j < want.n_top; j++)
				same_top = got[r].top_ids[j] == want.top_ids[j] &&
					   fabsf(got[r].top_logprobs[j] - want.top_logprobs[j]) <=
					       2e-6f * (1 + fabsf(want.top_logprobs[j]));
			top_bad += !same_top;
			CHECK(memcmp(&rng_cpu[r], &rng_gpu[r], sizeof rng_cpu[r]) == 0,
			      "row %d: the RNG advanced differently", r);
		}
		/* Tokens must be identical: both samplers decide with sampler_math.h's
		 * arithmetic (integer masses, the same fp32 exp), in any summation order. */
		CHECK(tok_bad == 0, "V %d: %d of %d sampled tokens differ from core/sample/sampler.c", V,
		      tok_bad, n_rows);
		CHECK(lp_bad == 0, "V %d: %d log-probs differ", V, lp_bad);
		CHECK(top_bad == 0, "V %d: %d top-n lists differ", V, top_bad);
		cudaFree(dl);
		cudaFree(drows);
		cudaFree(dh);
		cudaFree(work);
		cudaFree(dout);
	}
}

/* Exactly the CPU sampler's token, row after row of hard cases: many exact ties (values on
 * a coarse grid), -inf logits (banned tokens), top_k = 1, tiny top_p, top_p and min_p
 * together, flat rows (high temperature: the draw walks far), near-greedy rows (low
 * temperature: weights underflow to 0), a row of -inf but one, and every combination with
 * top-k. Each row's u is the CPU RNG's next draw, handed to the device (the host does the
 * same in gpu/backend_cuda.cu). */
static void test_sample_exact(void)
{
	const int V = 1000, n_rows = 96;
	std::vector<float> logits((size_t)n_rows * V);
	std::vector<struct gpu_sample_row> rows(n_rows);
	std::vector<struct sampler_params> params(n_rows);
	std::vector<struct sampler_rng> rng(n_rows);
	for (int r = 0; r < n_rows; r++) {
		float *lg = &logits[(size_t)r * V];
		int shape = r % 4;
		for (int i = 0; i < V; i++) {
			float x = rnd_uniform(-6, 6);
			if (shape == 0)
				x = floorf(x); /* 12 distinct values: ties everywhere */
			if (shape == 1 && rnd_u32() % 5 == 0)
				x = -INFINITY;
			if (shape == 3)
				x = -INFINITY;
			lg[i] = x;
		}
		if (shape == 3)
			lg[rnd_u32() % V] = 1.5f; /* the only finite logit */
		struct sampler_params *p = &params[r];
		sampler_params_default(p);
		p->seed = 7000 + r;
		static const float temps[6] = {1.0f, 0.05f, 8.0f, 0.7f, 100.0f, 1.3f};
		p->temperature = temps[(r / 4) % 6];
		int kind = (r / 24) % 4;
		if (kind == 1)
			p->top_k = r % 3 == 0 ? 1 : 1 + (int32_t)(rnd_u32() % 300);
		if (kind == 2)
			p->top_p = r % 3 == 0 ? 1e-6f : rnd_uniform(0.05f, 0.999f);
		if (kind == 3) {
			p->top_k = r % 2 ? 0 : 1 + (int32_t)(rnd_u32() % 600);
			p->top_p = rnd_uniform(0.3f, 1.0f);
			p->min_p = r % 3 == 0 ? 0.9f : rnd_uniform(0.001f, 0.2f);
		}
		sampler_rng_seed(&rng[r], p->seed);
		struct sampler_rng g = rng[r];
		rows[r] = {r, -1, p->temperature, p->top_k, p->top_p, p->min_p, 1.0f, 0.0f, 0.0f,
			   0, 0, 0, sampler_rng_uniform(&g)};
	}
	float *dl = dev_vec(logits);
	struct gpu_sample_row *drows = dev_vec(rows);
	struct gpu_hist_entry *dh = dev_vec(std::vector<gpu_hist_entry>(1));
	float *work;
	REQUIRE(cudaMalloc(&work, gpu_sample_work_floats(n_rows, V) * 4));
	struct sampler_result *dout;
	REQUIRE(cudaMalloc(&dout, n_rows * sizeof *dout));
	REQUIRE(gpu_sample(dl, V, drows, n_rows, dh, work, dout, 0));
	std::vector<struct sampler_result> got = dev_download<struct sampler_result>(dout, n_rows);
	std::vector<uint8_t> scratch(sampler_scratch_bytes(V));
	int bad = 0, distinct = 0, prev = -1;
	for (int r = 0; r < n_rows; r++) {
		struct sampler_result want;
		sampler_sample(&logits[(size_t)r * V], V, &params[r], NULL, &rng[r], scratch.data(),
			       &want);
		if (got[r].token != want.token && bad++ < 5)
			fprintf(stderr, "  row %d (T %g top_k %d top_p %g min_p %g): token %d, want %d\n",
				r, params[r].temperature, params[r].top_k, params[r].top_p,
				params[r].min_p, got[r].token, want.token);
		distinct += want.token != prev;
		prev = want.token;
	}
	CHECK(bad == 0, "%d of %d hard rows sample another token than core/sample/sampler.c", bad,
	      n_rows);
	CHECK(distinct > n_rows / 2, "the rows' tokens vary (%d changes): the test has teeth",
	      distinct);
	cudaFree(dl);
	cudaFree(drows);
	cudaFree(dh);
	cudaFree(work);
	cudaFree(dout);
}

/* Both paths of gpu/sample.cu against core/sample/sampler.c, token for token: every row
 * runs once with the compacted path allowed (cap 2048) and once on the full-row path
 * (cap 0), and the counts the kernel reports show which path each run took: in the
 * first, some rows compacted and (where V > 2048) some flat rows fell back. Rows: peaked
 * (one or two dominant tokens), coarse grids (exact ties everywhere, at the top-k, top-p
 * and min-p thresholds), a run of equal values straddling the top-k cut, flat rows (one
 * value: every token in one bucket), banned (-inf) tokens, uniform spreads; parameters:
 * temperature alone (top_p = 1), top_k = 1, top-k, top-p (down to 1e-6), min-p (up to
 * 0.9), all three, penalties with a history (the sparse penalized values), greedy. */
static void test_sample_paths(void)
{
	const int vocabs[3] = {7, 1000, 128256};
	for (int V : vocabs) {
		const int n_rows = V > 100000 ? 32 : 96;
		std::vector<float> logits((size_t)n_rows * V);
		std::vector<struct gpu_sample_row> rows(n_rows);
		std::vector<struct sampler_params> params(n_rows);
		std::vector<struct sampler_rng> rng(n_rows);
		std::vector<std::vector<int32_t>> outputs(n_rows);
		std::vector<struct gpu_hist_entry> hist;
		int n_sampled = 0;
		for (int r = 0; r < n_rows; r++) {
			float *lg = &logits[(size_t)r * V];
			int shape = r % 6;
			for (int i = 0; i < V; i++) {
				float x = rnd_uniform(-8, 8);
				if (shape == 1)
					x = floorf(x); /* 16 distinct values */
				if (shape == 2)
					x = 0.0f; /* flat */
				if (shape == 3 && rnd_u32() % 4 == 0)
					x = -INFINITY;
				if (shape == 4)
					x = i < 3 ? 9.0f - (float)i : i < 40 ? 6.0f : x; /* ties from rank 3 */
				lg[i] = x;
			}
			if (shape == 0) {
				lg[rnd_u32() % V] = 14.0f;
				lg[rnd_u32() % V] = 13.0f;
			}
			struct sampler_params *p = &params[r];
			sampler_params_default(p);
			p->seed = 9100 + r;
			static const float temps[4] = {1.0f, 0.6f, 3.0f, 0.05f};
			p->temperature = temps[(r / 6) % 4];
			switch (r % 4) { /* with r % 6 above: every shape meets every kind */
			case 0: /* temperature alone; top_k = 1 on a third */
				if (r % 3 == 0)
					p->top_k = 1;
				break;
			case 1:
				p->top_k = 1 + (int32_t)(rnd_u32() % (rnd_u32() % 2 ? 50 : 400));
				p->top_p = r % 3 == 0 ? 1.0f : rnd_uniform(0.5f, 0.99f);
				break;
			case 2:
				p->top_p = r % 3 == 0 ? 1e-6f : rnd_uniform(0.05f, 0.999f);
				p->min_p = (r / 4) % 3 == 0	  ? 0.9f
					   : (r / 4) % 3 == 1 ? rnd_uniform(0.001f, 0.2f)
							      : 0.0f;
				break;
			case 3:
				p->top_k = 1 + (int32_t)(rnd_u32() % 300);
				p->top_p = rnd_uniform(0.3f, 1.0f);
				p->min_p = rnd_uniform(0.001f, 0.3f);
				break;
			}
			if (r % 5 == 0) { /* penalties; greedy on every other one */
				p->repetition_penalty = rnd_uniform(0.8f, 1.5f);
				p->presence_penalty = rnd_uniform(0.0f, 1.0f);
				p->frequency_penalty = rnd_uniform(0.0f, 0.5f);
				for (int i = 0; i < 25; i++)
					outputs[r].push_back((int32_t)(rnd_u32() % V));
				if (r % 10 == 0)
					p->temperature = 0.0f;
			}
			if (r >= n_rows - 2) {
				/* exact boundaries: one value everywhere, so cum_j = (j + 1) 2^32, and
				 * u = 0.5 (seed 1144774's first draw): without filters the draw's
				 * target is (V / 2) 2^32: token V / 2 (>, not >=); top_p = 2^-m with
				 * V = K 2^m, K odd, reaches its threshold exactly at K tokens (>=, not
				 * >), and the draw's target is (K / 2) 2^32: token K / 2 */
				for (int i = 0; i < V; i++)
					lg[i] = 0.0f;
				sampler_params_default(p);
				p->temperature = 1.0f;
				p->seed = 1144774;
				if (r == n_rows - 1)
					p->top_p = 1.0f / (float)(V & -V);
				outputs[r].clear();
			}
			sampler_rng_seed(&rng[r], p->seed);
			struct sampler_rng g = rng[r];
			rows[r] = {r, -1, p->temperature, p->top_k, p->top_p, p->min_p,
				   p->repetition_penalty, p->presence_penalty, p->frequency_penalty,
				   0, (int32_t)hist.size(), 0,
				   p->temperature > 0.0f ? sampler_rng_uniform(&g) : 0.0f};
			n_sampled += p->temperature > 0.0f;
			std::vector<int32_t> cnt(V, 0), ids;
			for (int32_t id : outputs[r]) {
				if (!cnt[id])
					ids.push_back(id);
				cnt[id] += 2;
			}
			for (int32_t id : ids)
				hist.push_back({id, cnt[id]});
			rows[r].hist_n = (int32_t)ids.size();
		}
		std::vector<uint8_t> scratch(sampler_scratch_bytes(V));
		std::vector<struct sampler_result> want(n_rows);
		for (int r = 0; r < n_rows; r++) {
			struct sampler_history h = {NULL, 0, outputs[r].data(),
						    (int32_t)outputs[r].size()};
			sampler_sample(&logits[(size_t)r * V], V, &params[r], &h, &rng[r],
				       scratch.data(), &want[r]);
		}
		float *dl = dev_vec(logits);
		struct gpu_sample_row *drows = dev_vec(rows);
		struct gpu_hist_entry *dh =
		    dev_vec(hist.empty() ? std::vector<gpu_hist_entry>(1) : hist);
		float *work;
		REQUIRE(cudaMalloc(&work, gpu_sample_work_floats(n_rows, V) * 4));
		struct sampler_result *dout;
		REQUIRE(cudaMalloc(&dout, n_rows * sizeof *dout));
		for (int cap : {2048, 0}) {
			int *dstats = dev_vec(std::vector<int>(2, 0));
			REQUIRE(gpu_sample_cap(dl, V, drows, n_rows, dh, work, dout, cap, dstats, 0));
			std::vector<struct sampler_result> got =
			    dev_download<struct sampler_result>(dout, n_rows);
			std::vector<int> stats = dev_download<int>(dstats, 2);
			int bad = 0, lp_bad = 0;
			for (int r = 0; r < n_rows; r++) {
				if (got[r].token != want[r].token && bad++ < 5)
					fprintf(stderr,
						"  V %d cap %d row %d (T %g top_k %d top_p %g min_p %g): "
						"token %d, want %d\n",
						V, cap, r, params[r].temperature, params[r].top_k,
						params[r].top_p, params[r].min_p, got[r].token,
						want[r].token);
				lp_bad += !(fabsf(got[r].logprob - want[r].logprob) <=
					    2e-6f * (1 + fabsf(want[r].logprob)));
			}
			CHECK(bad == 0, "V %d cap %d: %d of %d rows sample another token than "
			      "core/sample/sampler.c", V, cap, bad, n_rows);
			CHECK(lp_bad == 0, "V %d cap %d: %d log-probs differ", V, cap, lp_bad);
			const int K = V / (V & -V);
			CHECK(rows[n_rows - 2].u == 0.5f && got[n_rows - 2].token == V / 2 &&
				  got[n_rows - 1].token == K / 2,
			      "V %d cap %d: u %g, boundary tokens %d and %d, want %d and %d", V, cap,
			      rows[n_rows - 2].u, got[n_rows - 2].token, got[n_rows - 1].token, V / 2,
			      K / 2);
			CHECK(stats[0] + stats[1] == n_sampled, "V %d cap %d: %d + %d rows counted, %d sampled",
			      V, cap, stats[0], stats[1], n_sampled);
			if (cap == 0)
				CHECK(stats[0] == 0, "V %d cap 0: %d rows compacted", V, stats[0]);
			else
				CHECK(stats[0] >= n_sampled / 2 && (V <= 2048 || stats[1] > 0),
				      "V %d: %d rows compacted, %d on the full row (flat rows over 2048 "
				      "tokens must fall back)", V, stats[0], stats[1]);
			fprintf(stderr, "  sample_paths V %d cap %d: %d compacted, %d full-row\n", V, cap,
				stats[0], stats[1]);
			cudaFree(dstats);
		}
		cudaFree(dl);
		cudaFree(drows);
		cudaFree(dh);
		cudaFree(work);
		cudaFree(dout);
	}
}

/* NaN logits (an overflowed f16 activation upstream) must still give a token id inside
 * the vocabulary: the sampling masses become NaN and every decision compares false. */
static void test_sample_nan(void)
{
	const int V = 1000, n_rows = 4;
	std::vector<float> logits(V);
	for (int i = 0; i < V; i++)
		logits[i] = rnd_uniform(-4, 4);
	logits[17] = NAN;
	std::vector<struct gpu_sample_row> rows(n_rows);
	for (int r = 0; r < n_rows; r++) {
		/* greedy; temperature; temperature + top-k; temperature + top-p + min-p */
		rows[r] = {0,
			   -1,
			   r == 0 ? 0.0f : 0.8f,
			   r == 2 ? 40 : 0,
			   r == 3 ? 0.9f : 1.0f,
			   r == 3 ? 0.05f : 0.0f,
			   1.0f,
			   0.0f,
			   0.0f,
			   2,
			   0,
			   0,
			   0.37f};
	}
	float *dl = dev_vec(logits);
	struct gpu_sample_row *drows = dev_vec(rows);
	struct gpu_hist_entry *dh = dev_vec(std::vector<gpu_hist_entry>(1));
	float *work;
	REQUIRE(cudaMalloc(&work, gpu_sample_work_floats(n_rows, V) * 4));
	struct sampler_result *dout;
	REQUIRE(cudaMalloc(&dout, n_rows * sizeof *dout));
	REQUIRE(gpu_sample(dl, V, drows, n_rows, dh, work, dout, 0));
	std::vector<struct sampler_result> got = dev_download<struct sampler_result>(dout, n_rows);
	for (int r = 0; r < n_rows; r++)
		CHECK(got[r].token >= 0 && got[r].token < V,
		      "NaN logits, row %d: token %d is outside the vocabulary", r, got[r].token);
	cudaFree(dl);
	cudaFree(drows);
	cudaFree(dh);
	cudaFree(work);
	cudaFree(dout);
}

/* gpu/mask.cu against core/sample/sampler.c's sampler_constrain, bitwise: random logits
 * (a few -inf), rows reading the same logits row with different constraints, masks of
 * every density (none, empty, full, random), biases with repeated ids (added in order:
 * 0.1 then 1e8 then -1e8 rounds differently in any other order), ids outside the
 * vocabulary, -inf bans and biases on tokens the mask leaves out. */
static void test_constrain(void)
{
	const int sizes[] = {37, 3000, 40000};
	for (int V : sizes) {
		const int n_src = 3, n_rows = 6, nw = (V + 31) / 32;
		std::vector<float> logits((size_t)n_src * V);
		for (size_t i = 0; i < logits.size(); i++)
			logits[i] = rnd_u32() % 97 == 0 ? -INFINITY : rnd_uniform(-8, 8);
		std::vector<struct gpu_constrain_row> rows(n_rows);
		std::vector<uint32_t> masks;
		std::vector<int32_t> ids;
		std::vector<float> bias;
		for (int r = 0; r < n_rows; r++) {
			struct gpu_constrain_row &g = rows[r];
			g.src_row = r % n_src;
			g.mask_off = r == 1 ? -1 : (int32_t)masks.size();
			for (int w = 0; w < nw && r != 1; w++) {
				uint32_t m = r == 2 ? 0u : r == 3 ? ~0u : rnd_u32() & rnd_u32();
				masks.push_back(m);
			}
			g.bias_off = (int32_t)ids.size();
			g.bias_n = r == 5 ? 0 : 7 + r;
			for (int k = 0; k < g.bias_n; k++) {
				int32_t id = (int32_t)(rnd_u32() % (uint32_t)V);
				float b = rnd_uniform(-3, 3);
				if (k == 0)
					id = -1;
				else if (k == 1)
					id = V;
				else if (k == 2 || k == 3 || k == 4) { /* one id three times */
					id = (int32_t)((uint32_t)(r * 7919) % (uint32_t)V);
					b = k == 2 ? 0.1f : k == 3 ? 1e8f : -1e8f;
				} else if (k == 5)
					b = -INFINITY;
				ids.push_back(id);
				bias.push_back(b);
			}
		}
		masks.push_back(0); /* never empty */
		ids.push_back(0);
		bias.push_back(0.0f);
		float *dl = dev_vec(logits);
		struct gpu_constrain_row *drows = dev_vec(rows);
		uint32_t *dm = dev_vec(masks);
		int32_t *di = dev_vec(ids);
		float *db = dev_vec(bias);
		float *dout;
		REQUIRE(cudaMalloc(&dout, (size_t)n_rows * V * 4));
		REQUIRE(gpu_constrain(dl, V, drows, n_rows, dm, di, db, dout, 0));
		std::vector<float> got = dev_download<float>(dout, (size_t)n_rows * V);
		std::vector<float> src_after = dev_download<float>(dl, logits.size());
		int bad = 0, first = -1;
		for (int r = 0; r < n_rows; r++) {
			std::vector<float> want(logits.begin() + (size_t)rows[r].src_row * V,
						logits.begin() + (size_t)(rows[r].src_row + 1) * V);
			struct sampler_constraint sc = {
			    rows[r].mask_off >= 0 ? &masks[rows[r].mask_off] : NULL,
			    ids.data() + rows[r].bias_off, bias.data() + rows[r].bias_off,
			    rows[r].bias_n};
			sampler_constrain(want.data(), V, &sc);
			for (int t = 0; t < V; t++)
				if (memcmp(&want[t], &got[(size_t)r * V + t], 4) != 0) {
					if (bad++ == 0)
						first = r * V + t;
				}
		}
		CHECK(bad == 0,
		      "constrain V %d: %d of %d values differ from sampler_constrain (first: row %d "
		      "token %d)",
		      V, bad, n_rows * V, first < 0 ? 0 : first / V, first < 0 ? 0 : first % V);
		CHECK(memcmp(src_after.data(), logits.data(), logits.size() * 4) == 0,
		      "constrain V %d: the forward's logits were written", V);
		cudaFree(dl);
		cudaFree(drows);
		cudaFree(dm);
		cudaFree(di);
		cudaFree(db);
		cudaFree(dout);
	}
}

/* 64-bit addressing of the KV pool at full scale: an 8B model's pool (~50 GB of bf16)
 * has blocks more than 2^31 elements past its base. Here a bf16 pool of 32771 blocks of
 * an 8B-shaped layer (8 KV heads x 128, 2 layers, blocks of 16: 64 Ki elements each,
 * 4.3 GB) holds a 40-token sequence in blocks {32770, 3, 32769}; kv_write stores it and
 * both attention kernels (tiles for tokens 0-31, the per-query kernel with 1 and 3
 * splits for 32-39) read it back. Needs a device with >= 16 GB (the emulator reports an
 * H100's memory and reserves it lazily, so it runs there too). */
static void test_kv_large(void)
{
	size_t free_b = 0, total_b = 0;
	REQUIRE(cudaMemGetInfo(&free_b, &total_b));
	const int n_layer = 2, layer = 1, bs = 16, n_head = 32, n_head_kv = 8, hd = 128;
	const int kv_dim = n_head_kv * hd, n_q = n_head * hd, ld = n_q + 2 * kv_dim;
	const int n_tok = 40, n_blocks = 32771;
	const enum gpu_dtype dt = GPU_BF16;
	const int64_t block_elems = (int64_t)n_layer * 2 * bs * kv_dim;
	const size_t pool_bytes = (size_t)n_blocks * block_elems * 2;
	if (total_b < ((size_t)16 << 30) || free_b < pool_bytes + ((size_t)1 << 30)) {
		printf("SKIP: 64-bit KV offsets need a 16 GB device (%.1f GB free of %.1f)\n",
		       free_b / 1e9, total_b / 1e9);
		return;
	}
	CHECK((int64_t)(n_blocks - 1) * block_elems > ((int64_t)1 << 31),
	      "the last block is not past 2^31 elements");
	void *dpool;
	REQUIRE(cudaMalloc(&dpool, pool_bytes));
	const int32_t table[3] = {32770, 3, 32769};
	std::vector<int32_t> bt(table, table + 3), pos(n_tok), tok_bt(n_tok, 0), slots(n_tok);
	for (int t = 0; t < n_tok; t++) {
		pos[t] = t;
		slots[t] = table[t / bs] * bs + t % bs;
	}
	std::vector<float> qkv = rand_vec((size_t)n_tok * ld, -1, 1);
	float *dq = dev_vec(qkv);
	int32_t *dbt = dev_vec(bt), *dpos = dev_vec(pos), *dtb = dev_vec(tok_bt),
		*dslots = dev_vec(slots);
	struct gpu_kv_layer kv = {(char *)dpool + (size_t)layer * 2 * bs * kv_dim * 2, block_elems,
				  (int64_t)bs * kv_dim, bs, kv_dim};
	REQUIRE(gpu_kv_write(dq, ld, n_q, n_q + kv_dim, dslots, n_tok, kv, dt, 0));

	/* the three blocks as stored, against the rounded K/V rows */
	std::vector<float> kr((size_t)n_tok * kv_dim), vr((size_t)n_tok * kv_dim);
	for (int t = 0; t < n_tok; t++)
		for (int d = 0; d < kv_dim; d++) {
			kr[(size_t)t * kv_dim + d] = st_round(dt, qkv[(size_t)t * ld + n_q + d]);
			vr[(size_t)t * kv_dim + d] =
			    st_round(dt, qkv[(size_t)t * ld + n_q + kv_dim + d]);
		}
	std::vector<float> gk, wk;
	for (int i = 0; i < 3; i++) {
		std::vector<float> blk = dev_download_st(
		    dt, (char *)dpool + (size_t)table[i] * block_elems * 2, (size_t)block_elems);
		for (int s = 0; s < bs; s++)
			for (int d = 0; d < kv_dim; d++) {
				size_t o = (size_t)layer * 2 * bs * kv_dim + (size_t)s * kv_dim + d;
				int t = i * bs + s;
				if (t >= n_tok) /* the last block's free slots: nothing was written */
					continue;
				gk.push_back(blk[o]);
				gk.push_back(blk[o + (size_t)bs * kv_dim]);
				wk.push_back(kr[(size_t)t * kv_dim + d]);
				wk.push_back(vr[(size_t)t * kv_dim + d]);
			}
	}
	check_close("kv_write past 2^31 elements", gk, wk, 0, 0);

	/* attention reference in double; with round_tiles, the queries of tokens 0-31 (the
	 * tiles below) rounded to bf16, as the tensor-core kernel rounds them */
	size_t out_n = (size_t)n_tok * n_q;
	auto reference = [&](bool round_tiles) {
	std::vector<float> want(out_n);
	for (int t = 0; t < n_tok; t++)
		for (int h = 0; h < n_head; h++) {
			int kvh = h / (n_head / n_head_kv);
			std::vector<double> sc(t + 1);
			double mx = -INFINITY, sum = 0;
			for (int k = 0; k <= t; k++) {
				double d = 0;
				for (int e = 0; e < hd; e++)
					d += (double)(round_tiles && t < 32
							  ? st_round(dt, qkv[(size_t)t * ld + h * hd + e])
							  : qkv[(size_t)t * ld + h * hd + e]) *
					     kr[(size_t)k * kv_dim + kvh * hd + e];
				sc[k] = d / sqrt((double)hd);
				mx = std::max(mx, sc[k]);
			}
			for (int k = 0; k <= t; k++)
				sum += (sc[k] = exp(sc[k] - mx));
			for (int e = 0; e < hd; e++) {
				double o = 0;
				for (int k = 0; k <= t; k++)
					o += sc[k] * vr[(size_t)k * kv_dim + kvh * hd + e];
				want[(size_t)t * n_q + h * hd + e] = st_round(dt, (float)(o / sum));
			}
		}
	return want;
	};
	const std::vector<float> want = reference(false), want_tc = reference(true);
	std::vector<int32_t> tiles = {0, 16, 16, 16}, list;
	for (int t = 32; t < n_tok; t++)
		list.push_back(t);
	int32_t *dtiles = dev_vec(tiles), *dlist = dev_vec(list);
	void *dout;
	REQUIRE(cudaMalloc(&dout, out_n * 2));
	float *partial;
	size_t part_n = gpu_attention_partial_floats((int)list.size(), n_head, hd, 3);
	REQUIRE(cudaMalloc(&partial, part_n * 4));
	struct gpu_attn_args a =
	    attn_args(dq, ld, kv, dpos, dtb, dbt, n_tok, n_head, n_head_kv, hd, dout, n_tok);
	a.tiles = dtiles;
	a.n_tiles = 2;
	a.list = dlist;
	a.n_list = (int)list.size();
	for (int prefill = 0; prefill < 2; prefill++)
	for (int ns = 1; ns <= 3; ns += 2) {
		/* the tiles on tensor cores (GPU_ATTN_PREFILL_AUTO: bf16, 128 dimensions), then
		 * on CUDA cores */
		a.prefill = prefill ? GPU_ATTN_PREFILL_CUDA_CORES : GPU_ATTN_PREFILL_AUTO;
		REQUIRE(cudaMemset(dout, 0xff, out_n * 2));
		REQUIRE(gpu_attention(&a, dt, ns, partial, 0));
		std::vector<float> got = dev_download_st(dt, dout, out_n);
		char what[96];
		snprintf(what, sizeof what, "attention past 2^31 KV elements, splits %d, %s", ns,
			 prefill ? "CUDA cores" : "tensor cores");
		/* as in test_attention: fp32 softmax of <= 40 keys, then a bf16 rounding; on
		 * tensor cores P rounded to bf16 too (at most 2^-9) */
		check_close(what, got, prefill ? want : want_tc, prefill ? 2e-5 : 2e-5 + 1.0 / 512,
			    st_rtol(dt));
	}
	cudaFree(dpool);
	cudaFree(dq);
	cudaFree(dbt);
	cudaFree(dpos);
	cudaFree(dtb);
	cudaFree(dslots);
	cudaFree(dtiles);
	cudaFree(dlist);
	cudaFree(dout);
	cudaFree(partial);
}

/* ---- the kernels of the newer architectures (core/model/arch.h) ---- */

/* gpu_head_rmsnorm (qwen3/gemma3 Q/K norms): each query and key head normalized with its
 * weights, the value heads untouched. Reference: the CPU backend's expression (sum of
 * squares in double, x * scale * w in fp32). */
static void test_head_norm(void)
{
	int n_tok = 9, n_head = 8, n_head_kv = 2, hd = 64;
	int ld = (n_head + 2 * n_head_kv) * hd;
	float eps = 1e-6f;
	std::vector<float> qkv = rand_vec((size_t)n_tok * ld, -3, 3);
	std::vector<float> qw = rand_vec(hd, 0.5f, 1.5f), kw = rand_vec(hd, -1.5f, 1.5f);
	float *d = dev_vec(qkv), *dqw = dev_vec(qw), *dkw = dev_vec(kw);
	REQUIRE(gpu_head_rmsnorm(d, ld, n_tok, n_head, n_head_kv, hd, dqw, dkw, eps, 0));
	std::vector<float> got = dev_download<float>(d, qkv.size()), want = qkv;
	for (int t = 0; t < n_tok; t++)
		for (int h = 0; h < n_head + n_head_kv; h++) {
			float *x = &want[(size_t)t * ld + (size_t)h * hd];
			const float *w = h < n_head ? qw.data() : kw.data();
			double ss = 0;
			for (int i = 0; i < hd; i++)
				ss += (double)x[i] * x[i];
			float sc = (float)(1.0 / sqrt(ss / hd + (double)eps));
			for (int i = 0; i < hd; i++)
				x[i] = x[i] * sc * w[i];
		}
	/* the warp's double sum runs in another order: the scale may differ in its last
	 * bit, 2 fp32 ulps after the products; the value heads must be bit-exact */
	check_close("head_rmsnorm", got, want, 0, 2.5e-7);
	cudaFree(d);
	cudaFree(dqw);
	cudaFree(dkw);
}

/* Command-R's LayerNorms: gpu_add_layernorm and gpu_head_layernorm. By hand: [1, 2, 3, 4]
 * has mean 2.5, deviations [-1.5, -0.5, 0.5, 1.5], variance 1.25, scale 1/sqrt(1.25)
 * (eps 0); query head 1 [2, 2, 2, 6]: mean 3, variance 3; the key head [0, 0, 0, 8]: mean 2,
 * variance 12; each head with its own weight row, V untouched. Then 3 gathered rows of
 * 4096 with a delta and write-back in every dtype against the CPU backend's expression
 * (the mean rounded to fp32, sums in double). */
static void test_layernorm(void)
{
	const double s125 = 1.0 / sqrt(1.25), s3 = 1.0 / sqrt(3.0), s12 = 1.0 / sqrt(12.0);
	std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 2, 0.5f};
	float *dx = dev_vec(x), *dw = dev_vec(w), *out;
	REQUIRE(cudaMalloc(&out, 4 * sizeof(float)));
	REQUIRE(gpu_add_layernorm(dx, NULL, dw, 0.0f, NULL, 1, 4, false, out, GPU_F32, 0));
	check_close("add_layernorm by hand", dev_download<float>(out, 4),
		    {(float)(-1.5 * s125), (float)(-0.5 * s125), (float)(2 * 0.5 * s125),
		     (float)(0.5 * 1.5 * s125)},
		    0, 3e-7);
	/* hd 4: query heads [1, 2, 3, 4] (weights 1) and [2, 2, 2, 6] (weights 2), one key
	 * head [0, 0, 0, 8] (weights 1, 0, 1, 0.5), one value head */
	std::vector<float> qkv = {1, 2, 3, 4, 2, 2, 2, 6, 0, 0, 0, 8, 5, 6, 7, 8};
	std::vector<float> qw = {1, 1, 1, 1, 2, 2, 2, 2}, kw = {1, 0, 1, 0.5f};
	float *dq = dev_vec(qkv), *dqw = dev_vec(qw), *dkw = dev_vec(kw);
	REQUIRE(gpu_head_layernorm(dq, 16, 1, 2, 1, 4, dqw, dkw, 0.0f, 0));
	check_close("head_layernorm by hand", dev_download<float>(dq, 16),
		    {(float)(-1.5 * s125), (float)(-0.5 * s125), (float)(0.5 * s125),
		     (float)(1.5 * s125), (float)(-2 * s3), (float)(-2 * s3), (float)(-2 * s3),
		     (float)(6 * s3), (float)(-2 * s12), 0, (float)(-2 * s12),
		     (float)(0.5 * 6 * s12), 5, 6, 7, 8},
		    0, 3e-7);
	cudaFree(dx);
	cudaFree(dw);
	cudaFree(out);
	cudaFree(dq);
	cudaFree(dqw);
	cudaFree(dkw);
	const int n = 4096, rows_in = 5;
	std::vector<int32_t> rows = {4, 0, 2};
	for (enum gpu_dtype dt : all_dt) {
		std::vector<float> xr = rand_vec((size_t)rows_in * n, -2, 3);
		std::vector<float> dl = rand_vec((size_t)rows_in * n, -1, 1);
		std::vector<float> wr = rand_vec(n, 0.5f, 1.5f), xw = xr;
		float *dxr = dev_vec(xr), *dd = dev_vec(dl), *dwr = dev_vec(wr);
		int32_t *drows = dev_vec(rows);
		void *o;
		REQUIRE(cudaMalloc(&o, (size_t)3 * n * 4));
		REQUIRE(gpu_add_layernorm(dxr, dd, dwr, 1e-5f, drows, 3, n, true, o, dt, 0));
		std::vector<float> want((size_t)3 * n);
		for (int i = 0; i < 3; i++) {
			std::vector<float> sv(n);
			double sum = 0, ss = 0;
			for (int j = 0; j < n; j++) {
				sv[j] = xr[(size_t)rows[i] * n + j] + dl[(size_t)rows[i] * n + j];
				xw[(size_t)rows[i] * n + j] = sv[j];
				sum += sv[j];
			}
			float mean = (float)(sum / n);
			for (int j = 0; j < n; j++)
				ss += (double)(sv[j] - mean) * (sv[j] - mean);
			float sc = (float)(1.0 / sqrt(ss / n + 1e-5));
			for (int j = 0; j < n; j++)
				want[(size_t)i * n + j] = st_round(dt, ((sv[j] - mean) * sc) * wr[j]);
		}
		char what[64];
		snprintf(what, sizeof what, "add_layernorm n %d %s", n, gpu_dtype_name(dt));
		check_close(what, dev_download_st(dt, o, (size_t)3 * n), want, 1e-6, st_rtol(dt));
		check_close("add_layernorm residual", dev_download<float>(dxr, xr.size()), xw, 0, 0);
		cudaFree(dxr);
		cudaFree(dd);
		cudaFree(dwr);
		cudaFree(drows);
		cudaFree(o);
	}
}

/* gpu_qk_rmsnorm_rows (olmo2's Q/K norms over each token's whole Q and K rows): the CPU
 * backend's expression over n_q and n_kv columns, the value columns untouched. Widths of
 * OLMo 2 7B's 4096 (GQA-less: n_kv = n_q) and 32B's 5120 / 1024, and a tiny 64 / 32. */
static void test_qk_norm_rows(void)
{
	const int cases[3][2] = {{64, 32}, {4096, 4096}, {5120, 1024}};
	for (const auto &cs : cases) {
		int n_tok = 5, n_q = cs[0], n_kv = cs[1], ld = n_q + 2 * n_kv;
		float eps = 1e-6f;
		std::vector<float> qkv = rand_vec((size_t)n_tok * ld, -3, 3);
		std::vector<float> qw = rand_vec(n_q, 0.5f, 1.5f), kw = rand_vec(n_kv, -1.5f, 1.5f);
		float *d = dev_vec(qkv), *dqw = dev_vec(qw), *dkw = dev_vec(kw);
		REQUIRE(gpu_qk_rmsnorm_rows(d, ld, n_tok, n_q, n_kv, dqw, dkw, eps, 0));
		std::vector<float> got = dev_download<float>(d, qkv.size()), want = qkv;
		for (int t = 0; t < n_tok; t++)
			for (int k = 0; k < 2; k++) {
				float *x = &want[(size_t)t * ld + (k ? n_q : 0)];
				const float *w = k ? kw.data() : qw.data();
				int n = k ? n_kv : n_q;
				double ss = 0;
				for (int i = 0; i < n; i++)
					ss += (double)x[i] * x[i];
				float sc = (float)(1.0 / sqrt(ss / n + (double)eps));
				for (int i = 0; i < n; i++)
					x[i] = x[i] * sc * w[i];
			}
		char what[64];
		snprintf(what, sizeof what, "qk_rmsnorm_rows %d/%d", n_q, n_kv);
		/* as head_rmsnorm: the scale may differ in its last bit; V bit-exact */
		check_close(what, got, want, 0, 2.5e-7);
		std::vector<float> gv, wv;
		for (int t = 0; t < n_tok; t++)
			for (int i = n_q + n_kv; i < ld; i++) {
				gv.push_back(got[(size_t)t * ld + i]);
				wv.push_back(qkv[(size_t)t * ld + i]);
			}
		check_close("qk_rmsnorm_rows: value columns untouched", gv, wv, 0, 0);
		cudaFree(d);
		cudaFree(dqw);
		cudaFree(dkw);
	}
}

/* gpu_qkv_post (bias, Q/K head norms, RoPE and the K/V write in one launch) against the four
 * launchers it replaces in the forward, run one after another on a copy of the same input:
 * bitwise equal, the QKV rows and the whole KV pool (the slots not written included). The
 * four are each checked against a CPU reference above (rope, kv_write, bias, head_norm). */
static void test_qkv_post(void)
{
	struct {
		int n_head, n_head_kv, hd, rope_dim;
		bool neox, bias, norm, temp, vnorm, post;
	} cases[] = {
	    {8, 2, 64, 64, false, false, false, false, false, false},  /* llama */
	    {8, 2, 64, 64, true, true, false, false, false, false},	 /* qwen2: biases, NeoX */
	    {8, 2, 128, 128, true, false, true, false, false, false},	 /* qwen3: head norms */
	    {6, 3, 96, 32, false, true, true, false, false, false},	 /* partial rotation, every step at once */
	    {4, 4, 64, 0, false, true, false, false, false, false},	 /* no rotation */
	    {4, 2, 256, 256, true, false, true, false, false, false},	 /* gemma-sized heads */
	    /* mistral3: the query heads times the temperature (scale 0.5, floor 16), the
	     * launchers' result times it on the host (one fp32 product, as the kernel) */
	    {8, 2, 64, 64, false, false, false, true, false, false},
	    {6, 3, 96, 32, false, true, false, true, false, false}, /* with partial rotation */
	    /* gemma4: the value heads RMS-normalized (no weight) before their store, against
	     * a host reference (f32 pools only: the rounding of 16-bit stores is the same
	     * st_t as the others) */
	    {4, 2, 16, 16, true, false, true, false, true, false},
	    {4, 1, 32, 32, true, true, true, false, true, false},
	    /* hunyuan: the head norms after RoPE (norm_post_rope), against the launchers in
	     * that order; partially rotated heads normed whole */
	    {8, 2, 128, 128, true, false, true, false, false, true},
	    {6, 3, 96, 32, true, true, true, false, false, true},
	    /* llama4: the Q/K heads RMS-normalized without a weight after RoPE (norm_post_rope
	     * without q_norm / k_norm): gpu_head_rmsnorm with weights 1 after gpu_rope (x *
	     * scale * 1: bitwise) */
	    {4, 2, 16, 16, false, false, false, false, false, true},
	    {6, 3, 96, 32, false, true, false, false, false, true},
	};
	for (enum gpu_dtype dt : all_dt)
		for (auto &cs : cases) {
			if (cs.vnorm && dt != GPU_F32)
				continue;
			const int n_tok = 13, bs = 16, n_blocks = 4, n_layer = 2, layer = 1;
			const int kv_dim = cs.n_head_kv * cs.hd;
			const int width = (cs.n_head + 2 * cs.n_head_kv) * cs.hd, ld = width + 3;
			const int64_t block_elems = (int64_t)n_layer * 2 * bs * kv_dim;
			const size_t pool_elems = (size_t)block_elems * n_blocks;
			std::vector<float> qkv = rand_vec((size_t)n_tok * ld, -2, 2);
			std::vector<float> bias = rand_vec(width, -1, 1);
			std::vector<float> qw = rand_vec(cs.hd, 0.5f, 1.5f), kw = rand_vec(cs.hd, -1.5f, 1.5f);
			std::vector<float> pool = rand_vec(pool_elems, -8, 8);
			std::vector<int32_t> pos(n_tok), slots(n_tok);
			std::vector<int> perm(n_blocks * bs);
			for (int i = 0; i < n_blocks * bs; i++)
				perm[i] = i;
			for (int i = n_blocks * bs - 1; i > 0; i--)
				std::swap(perm[i], perm[rnd_u32() % (i + 1)]);
			for (int t = 0; t < n_tok; t++) {
				pos[t] = t < 3 ? 2047 + t : (int32_t)(rnd_u32() % 100000);
				slots[t] = perm[t];
			}
			int half = cs.rope_dim / 2;
			std::vector<double> freq(half > 0 ? half : 1);
			for (int i = 0; i < half; i++)
				freq[i] = pow(10000.0, -2.0 * i / cs.rope_dim);
			std::vector<float> tab(GPU_ROPE_TABLE_FLOATS(half > 0 ? half : 1));
			gpu_rope_table_fill(freq.data(), half, tab.data());
			auto packed = st_pack(dt, pool);
			void *pool_a = dev_upload(packed.data(), packed.size());
			void *pool_b = dev_upload(packed.data(), packed.size());
			float *qa = dev_vec(qkv), *qb = dev_vec(qkv), *db = dev_vec(bias);
			float *dqw = dev_vec(qw), *dkw = dev_vec(kw), *dtab = dev_vec(tab);
			int32_t *dp = dev_vec(pos), *ds = dev_vec(slots);
			const size_t layer_off = (size_t)layer * 2 * bs * kv_dim * gpu_dtype_size(dt);
			struct gpu_kv_layer kva = {(char *)pool_a + layer_off, block_elems,
						   (int64_t)bs * kv_dim, bs, kv_dim};
			struct gpu_kv_layer kvb = kva;
			kvb.base = (char *)pool_b + layer_off;
			const float eps = 1e-6f, msc = 0.75f;
			/* the forward before: up to four launches */
			if (cs.bias)
				REQUIRE(gpu_bias_add(qb, ld, db, n_tok, width, 0));
			if (cs.norm && !cs.post)
				REQUIRE(gpu_head_rmsnorm(qb, ld, n_tok, cs.n_head, cs.n_head_kv, cs.hd,
							 dqw, dkw, eps, 0));
			REQUIRE(gpu_rope(qb, ld, dp, n_tok, cs.n_head, cs.n_head_kv, cs.hd, cs.rope_dim,
					 dtab, msc, cs.neox, 0));
			float *dones = NULL; /* llama4's norm (no weights): weights 1 */
			if (cs.post && !cs.norm)
				dones = dev_vec(std::vector<float>(cs.hd, 1.0f));
			if (cs.post)
				REQUIRE(gpu_head_rmsnorm(qb, ld, n_tok, cs.n_head, cs.n_head_kv, cs.hd,
							 cs.norm ? dqw : dones, cs.norm ? dkw : dones, eps, 0));
			REQUIRE(gpu_kv_write(qb, ld, cs.n_head * cs.hd, (cs.n_head + cs.n_head_kv) * cs.hd,
					     ds, n_tok, kvb, dt, 0));
			/* and in one */
			struct gpu_qkv_post_args a;
			memset(&a, 0, sizeof a);
			a.qkv = qa;
			a.ld = ld;
			a.n_tok = n_tok;
			a.n_head = cs.n_head;
			a.n_head_kv = cs.n_head_kv;
			a.head_dim = cs.hd;
			a.bias = cs.bias ? db : NULL;
			a.q_norm = cs.norm ? dqw : NULL;
			a.k_norm = cs.norm ? dkw : NULL;
			a.eps = eps;
			a.pos = dp;
			a.rope_dim = cs.rope_dim;
			a.table = dtab;
			a.mscale = msc;
			a.neox = cs.neox;
			a.slots = ds;
			a.kv = kva;
			a.temp_scale = cs.temp ? 0.5f : 0.0f;
			a.temp_floor = 16;
			a.v_norm = cs.vnorm;
			a.norm_post_rope = cs.post;
			REQUIRE(gpu_qkv_post(&a, dt, 0));
			std::vector<float> before = dev_download<float>(qb, qkv.size());
			if (cs.vnorm) { /* the reference pool's V rows normalized on the host */
				std::vector<float> pb = dev_download_st(dt, pool_b, pool_elems);
				for (int t = 0; t < n_tok; t++)
					for (int h = 0; h < cs.n_head_kv; h++) {
						const float *x = &before[(size_t)t * ld +
									 (size_t)(cs.n_head + cs.n_head_kv + h) * cs.hd];
						double ss = 0.0;
						for (int d = 0; d < cs.hd; d++)
							ss += (double)x[d] * x[d];
						float sc = (float)(1.0 / sqrt(ss / cs.hd + (double)eps));
						const int slot = slots[t];
						size_t o = layer_off / sizeof(float) +
							   (size_t)(slot / bs) * block_elems + (size_t)bs * kv_dim +
							   (size_t)(slot % bs) * kv_dim + (size_t)h * cs.hd;
						for (int d = 0; d < cs.hd; d++)
							pb[o + d] = x[d] * sc;
					}
				REQUIRE(cudaMemcpy(pool_b, pb.data(), pool_elems * sizeof(float),
						   cudaMemcpyHostToDevice));
			}
			if (cs.temp)
				for (int t = 0; t < n_tok; t++) {
					const float f = (float)(log(floor((float)pos[t] / 16.0f) + 1.0) * 0.5 + 1.0);
					for (int o = 0; o < cs.n_head * cs.hd; o++)
						before[(size_t)t * ld + o] *= f;
				}
			char what[96];
			snprintf(what, sizeof what,
				 "qkv_post %s hd %d rope %d bias %d norm %d temp %d post %d: qkv",
				 gpu_dtype_name(dt), cs.hd, cs.rope_dim, cs.bias, cs.norm, cs.temp, cs.post);
			check_close(what, dev_download<float>(qa, qkv.size()), before, 0, 0);
			snprintf(what, sizeof what,
				 "qkv_post %s hd %d rope %d bias %d norm %d vnorm %d post %d: KV pool",
				 gpu_dtype_name(dt), cs.hd, cs.rope_dim, cs.bias, cs.norm, cs.vnorm,
				 cs.post);
			/* the V norm's sums run in another order on the device: within 2 ulp */
			check_close(what, dev_download_st(dt, pool_a, pool_elems),
				    dev_download_st(dt, pool_b, pool_elems), 0, cs.vnorm ? 2.5e-7 : 0);
			void *bufs[11] = {pool_a, pool_b, qa, qb, db, dqw, dkw, dtab, dp, ds, NULL};
			for (int i = 0; bufs[i]; i++)
				cudaFree(bufs[i]);
			if (dones)
				cudaFree(dones);
		}
	/* refused: a K/V width that is not n_head_kv x head_dim, one norm without the other */
	struct gpu_qkv_post_args bad;
	memset(&bad, 0, sizeof bad);
	bad.n_tok = 1;
	bad.n_head = 4;
	bad.n_head_kv = 2;
	bad.head_dim = 64;
	bad.kv.kv_dim = 64;
	CHECK(gpu_qkv_post(&bad, GPU_F32, 0) == cudaErrorInvalidValue, "qkv_post: bad kv_dim");
	bad.kv.kv_dim = 128;
	bad.q_norm = (const float *)&bad;
	CHECK(gpu_qkv_post(&bad, GPU_F32, 0) == cudaErrorInvalidValue, "qkv_post: one norm");
}

/* gpu_scale (gemma's embedding scale) and gpu_softcap (gemma2's final logit cap). */
static void test_scale_softcap(void)
{
	std::vector<float> x = rand_vec(3001, -200, 200);
	x[0] = 0.0f;
	x[1] = 1e-30f;
	float *d = dev_vec(x);
	REQUIRE(gpu_scale(d, (int64_t)x.size(), 48.0f, 0));
	std::vector<float> got = dev_download<float>(d, x.size()), want(x.size());
	for (size_t i = 0; i < x.size(); i++)
		want[i] = x[i] * 48.0f;
	check_close("scale", got, want, 0, 0); /* one correctly rounded product */
	REQUIRE(cudaMemcpy(d, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
	REQUIRE(gpu_softcap(d, (int64_t)x.size(), 30.0f, 0));
	got = dev_download<float>(d, x.size());
	for (size_t i = 0; i < x.size(); i++)
		want[i] = 30.0f * tanhf(x[i] / 30.0f);
	/* CUDA's tanhf is within 2 ulp of glibc's */
	check_close("softcap", got, want, 1e-30, 5e-7);
	bool bounded = true;
	for (float v : got)
		bounded &= fabsf(v) <= 30.0f;
	CHECK(bounded, "softcap: every value within [-30, 30]");
	cudaFree(d);
}

/* gpu_swiglu with GELU (tanh form), the gemma FFN gate. */
static void test_gelu(void)
{
	for (enum gpu_dtype dt : all_dt) {
		int n_tok = 7, n_ff = 300;
		std::vector<float> gu = rand_vec((size_t)n_tok * 2 * n_ff, -8, 8);
		float *d = dev_vec(gu);
		void *out;
		REQUIRE(cudaMalloc(&out, (size_t)n_tok * n_ff * 4));
		REQUIRE(gpu_swiglu(d, n_tok, n_ff, out, dt, true, 0));
		std::vector<float> got = dev_download_st(dt, out, (size_t)n_tok * n_ff);
		std::vector<float> want((size_t)n_tok * n_ff);
		for (int t = 0; t < n_tok; t++)
			for (int i = 0; i < n_ff; i++) {
				float g = gu[(size_t)t * 2 * n_ff + i],
				      u = gu[(size_t)t * 2 * n_ff + n_ff + i];
				float in = 0.79788456080286535588f * g * (1.0f + 0.044715f * g * g);
				want[(size_t)t * n_ff + i] =
				    st_round(dt, 0.5f * g * (1.0f + tanhf(in)) * u);
			}
		/* tanhf within 2 ulp of glibc's: near g = -4, 1 + tanh cancels, so the error
		 * is absolute: 2 ulp of 1 times |0.5 g u| <= 32 */
		check_close("gelu", got, want, 8e-6, dt == GPU_F32 ? 1e-6 : st_rtol(dt));
		cudaFree(d);
		cudaFree(out);
	}
}

/* ---- mixture of experts (gpu/moe.cuh) ---- */

/* The routing of core/model/model.h in double: softmax, the k largest (ties: the lower
 * index), slot order = descending probability, renormalized when norm. */
static void moe_route_ref(const float *l, int n_expert, int k, bool norm, int32_t *ids,
			  double *w)
{
	double m = -INFINITY, s = 0;
	for (int e = 0; e < n_expert; e++)
		m = l[e] > m ? l[e] : m;
	std::vector<double> p(n_expert);
	for (int e = 0; e < n_expert; e++)
		s += p[e] = exp((double)l[e] - m);
	std::vector<int> order(n_expert);
	for (int e = 0; e < n_expert; e++)
		order[e] = e;
	std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
	double sum = 0;
	for (int j = 0; j < k; j++) {
		ids[j] = order[j];
		w[j] = p[order[j]] / s;
		sum += w[j];
	}
	for (int j = 0; norm && j < k; j++)
		w[j] /= sum;
}

struct moe_dev {
	struct gpu_moe_plan plan;
	float *logits;
};

static struct moe_dev moe_dev_alloc(const std::vector<float> &logits, int n_tok, int n_expert,
				    int k)
{
	struct moe_dev d;
	size_t P = (size_t)n_tok * k;
	d.logits = dev_vec(logits);
	REQUIRE(cudaMalloc(&d.plan.ids, P * 4));
	REQUIRE(cudaMalloc(&d.plan.w, P * 4));
	REQUIRE(cudaMalloc(&d.plan.offs, (n_expert + 1) * 4));
	REQUIRE(cudaMalloc(&d.plan.sorted, P * 4));
	REQUIRE(cudaMalloc(&d.plan.tiles, 2 * (size_t)gpu_moe_max_tiles((int)P, n_expert) * 4));
	REQUIRE(cudaMalloc(&d.plan.n_tiles, 4));
	return d;
}

static void moe_dev_free(struct moe_dev *d)
{
	cudaFree(d->logits);
	cudaFree(d->plan.ids);
	cudaFree(d->plan.w);
	cudaFree(d->plan.offs);
	cudaFree(d->plan.sorted);
	cudaFree(d->plan.tiles);
	cudaFree(d->plan.n_tiles);
}

/* Random router logits with planted ties: token 0 all equal, token 1 two equal at the
 * top, token 2 a tie across the k-th place, token 3 a NaN. */
static std::vector<float> moe_logits(int n_tok, int n_expert, int k, bool nan_row)
{
	std::vector<float> l = rand_vec((size_t)n_tok * n_expert, -4, 4);
	if (n_tok > 0)
		for (int e = 0; e < n_expert; e++)
			l[e] = 0.5f;
	if (n_tok > 1 && n_expert > 2) {
		l[(size_t)n_expert + n_expert - 1] = 9.0f;
		l[(size_t)n_expert + 1] = 9.0f;
	}
	if (n_tok > 2 && k < n_expert) { /* k - 1 clear winners, then a tie for place k */
		float *r = &l[2 * (size_t)n_expert];
		for (int e = 0; e < n_expert; e++)
			r[e] = -6.0f + (float)e * 1e-3f;
		for (int j = 0; j < k - 1; j++)
			r[n_expert - 1 - j] = 8.0f - (float)j;
		r[n_expert - k] = r[0] = 2.0f; /* the lower index, 0, takes place k */
	}
	if (nan_row && n_tok > 3)
		l[3 * (size_t)n_expert + 1] = NAN;
	return l;
}

/* gpu_moe_route against moe_route_ref (ids exact, weights within fp32 softmax error),
 * and its grouping: offs, sorted (a permutation, by expert, ascending pair ids within
 * one), tiles (every pair of an expert in exactly one tile of it, <= GPU_MOE_TILE). */
static void moe_check_route(const char *what, const std::vector<float> &l, int n_tok,
			    int n_expert, int k, bool norm, const struct moe_dev *d, bool nan_row)
{
	size_t P = (size_t)n_tok * k;
	std::vector<int32_t> ids = dev_download<int32_t>(d->plan.ids, P);
	std::vector<float> w = dev_download<float>(d->plan.w, P);
	size_t bad_id = 0, bad_w = 0;
	for (int t = 0; t < n_tok; t++) {
		std::vector<int32_t> rid(k);
		std::vector<double> rw(k);
		moe_route_ref(&l[(size_t)t * n_expert], n_expert, k, norm, rid.data(), rw.data());
		if (nan_row && t == 3) { /* NaN: every p NaN; ids 0 .. k-1 in order */
			for (int j = 0; j < k; j++)
				bad_id += ids[(size_t)t * k + j] != j;
			continue;
		}
		for (int j = 0; j < k; j++) {
			if (ids[(size_t)t * k + j] != rid[j] && bad_id++ < 3)
				fprintf(stderr, "  %s: token %d slot %d: expert %d, want %d\n", what, t,
					j, ids[(size_t)t * k + j], rid[j]);
			/* expf within 2 ulp, a sum of n_expert terms in fp32, two divisions */
			double lim = 1e-9 + (4e-7 + 1.2e-7 * n_expert / 8) * fabs(rw[j]);
			if (!(fabs(w[(size_t)t * k + j] - rw[j]) <= lim) && bad_w++ < 3)
				fprintf(stderr, "  %s: token %d slot %d: weight %.9g, want %.9g\n",
					what, t, j, w[(size_t)t * k + j], rw[j]);
		}
	}
	CHECK(bad_id == 0 && bad_w == 0, "%s: %zu expert ids and %zu weights of %zu pairs wrong",
	      what, bad_id, bad_w, P);
	std::vector<int32_t> offs = dev_download<int32_t>(d->plan.offs, (size_t)n_expert + 1);
	std::vector<int32_t> sorted = dev_download<int32_t>(d->plan.sorted, P);
	int32_t n_tiles = dev_download<int32_t>(d->plan.n_tiles, 1)[0];
	std::vector<int32_t> tiles = dev_download<int32_t>(d->plan.tiles, 2 * (size_t)n_tiles);
	bool ok = offs[0] == 0 && offs[n_expert] == (int32_t)P &&
		  n_tiles <= gpu_moe_max_tiles((int)P, n_expert);
	std::vector<int> seen(P, 0), tiled(P, 0);
	for (int e = 0; ok && e < n_expert; e++) {
		ok = offs[e] <= offs[e + 1];
		for (int32_t s = offs[e]; ok && s < offs[e + 1]; s++) {
			int32_t q = sorted[s];
			ok = q >= 0 && (size_t)q < P && ids[q] == e && !seen[q]++ &&
			     (s == offs[e] || sorted[s - 1] < q);
		}
	}
	for (int32_t i = 0; ok && i < n_tiles; i++) {
		int32_t e = tiles[2 * i], s0 = tiles[2 * i + 1];
		ok = e >= 0 && e < n_expert && s0 >= offs[e] && s0 < offs[e + 1];
		for (int32_t s = s0; ok && s < offs[e + 1] && s < s0 + GPU_MOE_TILE; s++)
			ok = !tiled[s]++;
	}
	for (size_t s = 0; ok && s < P; s++)
		ok = tiled[s] == 1 && seen[s] == 1;
	CHECK(ok, "%s: the grouping (offs, sorted, %d tiles) is inconsistent", what, n_tiles);
}

/* deepseek2's grouped routing (gpu_moe_route_grouped) against the CPU backend's
 * moe_route_grouped on the same logits and bias: DeepSeek-V3's shape (256 experts in 8
 * groups of 32, 4 groups, 8 chosen; sigmoid, the selection bias, scale 2.5), V2's (160 in 8
 * groups, 3 of them, 6 chosen; softmax, no bias, not normalized, scale 16) and Kimi-K2's
 * one group (384, 8 chosen). Every id equal; the weights within fp32 rounding (the
 * softmax's sum differs in order: 1e-6 relative). Logits in [-4, 4] (and biases in
 * [-0.5, 0.5]): near ties of the 2-sums or values have odds of ~1e-6 a token. */
static void test_moe_route_grouped(void)
{
	const struct {
		int n_tok, n_expert, k, n_group, used;
		bool sigmoid, bias, norm;
		float scale;
	} cases[3] = {{37, 256, 8, 8, 4, true, true, true, 2.5f},
		      {21, 160, 6, 8, 3, false, false, false, 16.0f},
		      {9, 384, 8, 1, 0, true, true, true, 2.827f}};
	for (auto &cs : cases) {
		std::vector<float> l = rand_vec((size_t)cs.n_tok * cs.n_expert, -4, 4);
		std::vector<float> b = rand_vec((size_t)cs.n_expert, -0.5f, 0.5f);
		struct moe_dev d = moe_dev_alloc(l, cs.n_tok, cs.n_expert, cs.k);
		float *db = cs.bias ? dev_vec(b) : NULL;
		REQUIRE(gpu_moe_route_grouped(d.logits, db, cs.n_tok, cs.n_expert, cs.k, cs.sigmoid,
					      cs.n_group, cs.used, cs.norm, cs.scale, &d.plan, 0));
		const size_t P = (size_t)cs.n_tok * cs.k;
		std::vector<int32_t> ids = dev_download<int32_t>(d.plan.ids, P);
		std::vector<float> w = dev_download<float>(d.plan.w, P);
		size_t bad_id = 0, bad_w = 0;
		std::vector<int32_t> rid(cs.k);
		std::vector<float> rw(cs.k);
		for (int t = 0; t < cs.n_tok; t++) {
			moe_route_grouped(&l[(size_t)t * cs.n_expert], cs.bias ? b.data() : NULL,
					  (uint32_t)cs.n_expert, (uint32_t)cs.k, cs.sigmoid,
					  (uint32_t)cs.n_group, (uint32_t)cs.used, cs.norm,
					  cs.scale, rid.data(), rw.data());
			for (int j = 0; j < cs.k; j++) {
				const size_t q = (size_t)t * cs.k + j;
				bad_id += ids[q] != rid[j];
				bad_w += !(fabs(w[q] - rw[j]) <= 2e-6 * fabs(rw[j]) + 1e-9);
			}
		}
		CHECK(bad_id == 0 && bad_w == 0,
		      "moe route grouped, %d experts in %d groups of which %d, %d chosen, %s: %zu "
		      "ids and %zu weights of %zu wrong",
		      cs.n_expert, cs.n_group, cs.used, cs.k, cs.sigmoid ? "sigmoid" : "softmax",
		      bad_id, bad_w, P);
		if (db)
			cudaFree(db);
		moe_dev_free(&d);
	}
	struct moe_dev d = moe_dev_alloc(std::vector<float>(64, 0.0f), 1, 64, 2);
	CHECK(gpu_moe_route_grouped(d.logits, NULL, 1, 64, 2, true, 64, 8, true, 1.0f, &d.plan,
				    0) == cudaErrorInvalidValue &&
		  gpu_moe_route_grouped(d.logits, NULL, 1, 64, 2, true, 6, 2, true, 1.0f, &d.plan,
					0) == cudaErrorInvalidValue &&
		  gpu_moe_route_grouped(d.logits, NULL, 1, 64, 9, true, 8, 1, true, 1.0f, &d.plan,
					0) == cudaErrorInvalidValue,
	      "moe route grouped: 64 groups, groups not dividing the experts, k past the kept "
	      "groups refused");
	cudaGetLastError();
	moe_dev_free(&d);
}

/* llama4's routing (gpu_moe_route_llama4) against the CPU backend's moe_route_llama4 on the
 * same logits: Scout's 16 experts and Maverick's 128, 1 chosen, and 2 of 16; logits in
 * [-4, 4] (the selection keys are the logits, negative ones included). Every id equal; the
 * weights sigmoid(logit) within 2 ulp (expf). */
static void test_moe_route_llama4(void)
{
	const struct {
		int n_tok, n_expert, k;
	} cases[3] = {{37, 16, 1}, {9, 128, 1}, {21, 16, 2}};
	for (auto &cs : cases) {
		std::vector<float> l = rand_vec((size_t)cs.n_tok * cs.n_expert, -4, 4);
		struct moe_dev d = moe_dev_alloc(l, cs.n_tok, cs.n_expert, cs.k);
		REQUIRE(gpu_moe_route_llama4(d.logits, cs.n_tok, cs.n_expert, cs.k, &d.plan, 0));
		const size_t P = (size_t)cs.n_tok * cs.k;
		std::vector<int32_t> ids = dev_download<int32_t>(d.plan.ids, P);
		std::vector<float> w = dev_download<float>(d.plan.w, P);
		size_t bad_id = 0, bad_w = 0;
		std::vector<int32_t> rid(cs.k);
		std::vector<float> rw(cs.k);
		for (int t = 0; t < cs.n_tok; t++) {
			moe_route_llama4(&l[(size_t)t * cs.n_expert], (uint32_t)cs.n_expert,
					 (uint32_t)cs.k, rid.data(), rw.data());
			for (int j = 0; j < cs.k; j++) {
				const size_t q = (size_t)t * cs.k + j;
				bad_id += ids[q] != rid[j];
				bad_w += !(fabs(w[q] - rw[j]) <= 2.5e-7 * fabs(rw[j]));
			}
		}
		CHECK(bad_id == 0 && bad_w == 0,
		      "moe route llama4, %d of %d experts: %zu ids and %zu weights of %zu wrong",
		      cs.k, cs.n_expert, bad_id, bad_w, P);
		moe_dev_free(&d);
	}
}

static void test_moe_route(void)
{
	struct {
		int n_tok, n_expert, k;
		bool norm;
	} cases[] = {{1, 8, 2, true},  {6, 8, 2, true},	   {40, 128, 8, true}, {9, 16, 4, false},
		     {5, 4, 4, true},  {7, 8, 1, false},   {300, 512, 8, true}, {70, 60, 6, true}};
	for (auto &cs : cases) {
		std::vector<float> l = moe_logits(cs.n_tok, cs.n_expert, cs.k, true);
		struct moe_dev d = moe_dev_alloc(l, cs.n_tok, cs.n_expert, cs.k);
		REQUIRE(gpu_moe_route(d.logits, cs.n_tok, cs.n_expert, cs.k, cs.norm, &d.plan, 0));
		char what[96];
		snprintf(what, sizeof what, "moe route %d tokens, %d of %d experts%s", cs.n_tok,
			 cs.k, cs.n_expert, cs.norm ? ", normalized" : "");
		moe_check_route(what, l, cs.n_tok, cs.n_expert, cs.k, cs.norm, &d, true);
		moe_dev_free(&d);
	}
	/* what it refuses */
	struct moe_dev d = moe_dev_alloc(std::vector<float>(8, 0.0f), 1, 8, 2);
	CHECK(gpu_moe_route(d.logits, 1, 8, 0, true, &d.plan, 0) == cudaErrorInvalidValue &&
		  gpu_moe_route(d.logits, 1, 8, 9, true, &d.plan, 0) == cudaErrorInvalidValue &&
		  gpu_moe_route(d.logits, 1, GPU_MOE_MAX_EXPERT + 1, 2, true, &d.plan, 0) ==
		      cudaErrorInvalidValue,
	      "moe route: k of 0, k > n_expert, too many experts refused");
	cudaGetLastError();
	moe_dev_free(&d);
	test_moe_route_grouped();
	test_moe_route_llama4();
}

/* The routed FFN, gpu_moe_route .. gpu_moe_combine, on n_tok tokens: returns out [n_tok,
 * n_embd] and leaves act (by sorted position) and y (by pair) in the vectors given. */
static std::vector<float> moe_ffn_run(enum gpu_dtype dt, const std::vector<float> &l, int n_tok,
				      int n_expert, int k, bool norm, int n_embd, int n_ff,
				      const void *dwgu, const void *dwd, const std::vector<float> &x,
				      std::vector<float> *act, std::vector<float> *y,
				      std::vector<int32_t> *ids, std::vector<float> *w,
				      std::vector<int32_t> *sorted, enum gpu_moe_path path,
				      const struct gpu_moe_oai *oai = NULL)
{
	struct moe_dev d = moe_dev_alloc(l, n_tok, n_expert, k);
	size_t P = (size_t)n_tok * k;
	auto px = st_pack(dt, x);
	void *dx = dev_upload(px.data(), px.size()), *dact;
	float *dy, *dout;
	REQUIRE(cudaMalloc(&dact, P * n_ff * gpu_dtype_size(dt)));
	REQUIRE(cudaMalloc(&dy, P * n_embd * 4));
	REQUIRE(cudaMalloc(&dout, (size_t)n_tok * n_embd * 4));
	const bool w_in = oai && oai->w_in; /* llama4 */
	if (w_in)
		REQUIRE(gpu_moe_route_llama4(d.logits, n_tok, n_expert, k, &d.plan, 0));
	else
		REQUIRE(gpu_moe_route(d.logits, n_tok, n_expert, k, norm, &d.plan, 0));
	REQUIRE(gpu_moe_gate_up(dwgu, n_ff, n_embd, n_expert, dx, n_tok, k, &d.plan, dact, false,
				oai, dt, path, 0));
	REQUIRE(gpu_moe_down(dwd, n_embd, n_ff, n_expert, dact, n_tok, k, &d.plan, dy, oai, dt,
			     path, 0));
	REQUIRE(gpu_moe_combine(dy, w_in ? NULL : d.plan.w, n_tok, k, n_embd, dout, 0));
	std::vector<float> out = dev_download<float>(dout, (size_t)n_tok * n_embd);
	if (act)
		*act = dev_download_st(dt, dact, P * n_ff);
	if (y)
		*y = dev_download<float>(dy, P * n_embd);
	if (ids)
		*ids = dev_download<int32_t>(d.plan.ids, P);
	if (w)
		*w = dev_download<float>(d.plan.w, P);
	if (sorted)
		*sorted = dev_download<int32_t>(d.plan.sorted, P);
	cudaFree(dx);
	cudaFree(dact);
	cudaFree(dy);
	cudaFree(dout);
	moe_dev_free(&d);
	return out;
}

/* The gated activation of one expert row pair, in double from fp32 rows: gate row gr and
 * up row ur against input xt[E], SiLU(g) * u, or with oai gpt-oss's clamped SwiGLU
 * (model.h swiglu_oai: alpha oa, limit ol, the biases bg and bu added); *lim the tolerance
 * of the device's value stored as dt (fp32 sums of E terms, then the activation). */
static double moe_act_ref(const float *gr, const float *ur, const float *xt, int E, bool oai,
			  float oa, float ol, float bg, float bu, enum gpu_dtype dt, double *lim)
{
	double g = 0, u = 0, ag = 0, au = 0;
	for (int i = 0; i < E; i++) {
		g += (double)gr[i] * xt[i];
		u += (double)ur[i] * xt[i];
		ag += fabs((double)gr[i] * xt[i]);
		au += fabs((double)ur[i] * xt[i]);
	}
	double ac, v;
	if (oai) {
		g += bg;
		u += bu;
		double xc = std::min(g, (double)ol);
		double yc = std::min(std::max(u, -(double)ol), (double)ol);
		ac = xc / (1.0 + exp(-(double)oa * xc));
		v = ac * (yc + 1.0);
		/* |d act / dx| <= 1 + alpha |x| / 4 */
		*lim = 1.2 * 4e-6 * ag * (1 + oa * fabs(xc) / 4) * (fabs(yc) + 1) +
		       (fabs(ac) + 1e-3) * 4e-6 * au + (2e-6 + st_rtol(dt)) * fabs(v) + 1e-30;
	} else {
		ac = g / (1.0 + exp(-g));
		v = ac * u;
		*lim = 1.2 * 4e-6 * ag * fabs(u) + (fabs(ac) + 1e-3) * 4e-6 * au +
		       (2e-6 + st_rtol(dt)) * fabs(v) + 1e-30;
	}
	return v;
}

/* nemotron_h_moe's non-gated activation (gpu_moe_oai.relu2), in double from the fp32 up row
 * ur: r = max(u, 0), r * r; *lim as moe_act_ref's (|d act / du| = 2 r) */
static double moe_relu2_ref(const float *ur, const float *xt, int E, enum gpu_dtype dt, double *lim)
{
	double u = 0, au = 0;
	for (int i = 0; i < E; i++) {
		u += (double)ur[i] * xt[i];
		au += fabs((double)ur[i] * xt[i]);
	}
	const double r = u > 0 ? u : 0, v = r * r;
	*lim = 1.2 * 4e-6 * au * 2 * r + (2e-6 + st_rtol(dt)) * v + 1e-30;
	return v;
}

/* Every case on each kernel that takes it (gpu_moe_path): CUDA cores always, tensor cores
 * for 16-bit types with widths multiples of 16 (64 x 32, 64 x 48, 528 x 48: several input
 * chunks and tiles), and AUTO's choice. Each stage of the routed FFN against a host loop in double
 * fed what the stage was fed (act from the device's routing, y from the device's act, out from the
 * device's y and w: each check isolates its kernel), then the whole against a host computation from
 * the reference routing alone, and a token's output alone equal bitwise to its row in the batch on
 * the same kernel (the grouping must not leak other tokens into it). The cases marked oai are
 * gpt-oss's experts (gpu_moe_oai: gate, up and down biases, the clamped SwiGLU with alpha 1.702 and
 * limit 7; gate|up weights 4x larger so that the clamps act), against the same loops with those
 * added; those marked relu2 nemotron_h_moe's experts without gate (gpu_moe_oai.relu2: up rows
 * alone, relu(u)^2). */
static void test_moe_ffn(void)
{
	struct {
		int n_tok, n_expert, k;
		bool norm;
		int n_embd, n_ff;
		bool oai, relu2;
		bool w_in; /* llama4: routed by the logits, weights on the input */
	} cases[] = {
	    {1, 8, 2, true, 64, 32, false, false, false},
	    {37, 4, 2, true, 264, 40, false, false, false},
	    {13, 16, 4, false, 64, 48, false, false, false},
	    {5, 4, 4, true, 72, 16, false, false, false},
	    {9, 128, 8, true, 64, 32, false, false, false},
	    {6, 8, 1, false, 64, 32, false, false, false},
	    {37, 4, 2, true, 528, 48, false, false, false},
	    {1, 8, 2, true, 64, 32, true, false, false},
	    {37, 4, 2, true, 264, 40, true, false, false},
	    {37, 4, 2, true, 528, 48, true, false, false},
	    {1, 8, 2, true, 64, 32, false, true, false},
	    {37, 4, 2, true, 264, 40, false, true, false},
	    {37, 4, 2, true, 528, 48, false, true, false},
	    {37, 4, 2, false, 256, 48, false, false, true},
	    {3, 16, 1, false, 64, 32, false, false, true}};
	const float OA = 1.702f, OL = 7.0f;
	const enum gpu_moe_path paths[3] = {GPU_MOE_AUTO, GPU_MOE_CUDA_CORES, GPU_MOE_TENSOR_CORES};
	for (auto &cs : cases)
		for (enum gpu_dtype dt : all_dt)
			for (enum gpu_moe_path path : paths) {
				const int T = cs.n_tok, NX = cs.n_expert, K = cs.k, E = cs.n_embd,
					  F = cs.n_ff;
				if (path == GPU_MOE_TENSOR_CORES && (dt == GPU_F32 || E % 16 || F % 16))
					continue;
				const size_t P = (size_t)T * K;
				std::vector<float> l = moe_logits(T, NX, K, false);
				const float gs = cs.oai ? 1.0f : 0.25f;
				const int n_gu = cs.relu2 ? 1 : 2; /* relu2: the up rows alone */
				std::vector<float> wgu =
				    rand_vec((size_t)NX * n_gu * F * E, -gs, gs);
				std::vector<float> wd = rand_vec((size_t)NX * E * F, -0.25f, 0.25f);
				std::vector<float> x = rand_vec((size_t)T * E, -1, 1);
				for (auto *v : {&wgu, &wd, &x})
					for (auto &f : *v)
						f = st_round(dt, f);
				auto pgu = st_pack(dt, wgu), pd = st_pack(dt, wd);
				void *dwgu = dev_upload(pgu.data(), pgu.size()),
				     *dwd = dev_upload(pd.data(), pd.size());
				/* gpt-oss: fp32 biases (zero vectors where not oai, so the loops
				 * below serve both) */
				std::vector<float> bg((size_t)NX * F, 0.0f), bu = bg, bd((size_t)NX * E, 0.0f);
				struct gpu_moe_oai oai = {};
				if (cs.oai) {
					bg = rand_vec(bg.size(), -2, 2);
					bu = rand_vec(bu.size(), -2, 2);
					bd = rand_vec(bd.size(), -1, 1);
					oai = {dev_vec(bg), dev_vec(bu), dev_vec(bd), OA,
					       OL,	    false,	 0.0f /* clamp: step35 */, false /* w_in: llama4 */};
				}
				if (cs.relu2)
					oai = {NULL, NULL, NULL, 0.0f, 0.0f, true, 0.0f, false};
				oai.w_in = cs.w_in;
				const struct gpu_moe_oai *po = cs.oai || cs.relu2 || cs.w_in ? &oai : NULL;
				std::vector<float> act, y, w;
				std::vector<int32_t> ids, sorted;
				std::vector<float> out =
				    moe_ffn_run(dt, l, T, NX, K, cs.norm, E, F, dwgu, dwd, x, &act,
						&y, &ids, &w, &sorted, path, po);
				char what[160];
				snprintf(what, sizeof what,
					 "moe ffn %d tokens, %d of %d experts, %dx%d %s, %s%s", T,
					 K, NX, E, F, gpu_dtype_name(dt),
					 path == GPU_MOE_AUTO	      ? "auto"
					 : path == GPU_MOE_CUDA_CORES ? "cuda cores"
								      : "tensor cores",
					 cs.oai	    ? ", gpt-oss biases and clamped SwiGLU"
					 : cs.relu2 ? ", relu2 without gate"
					 : cs.w_in  ? ", llama4's weights on the input"
						    : "");
				/* gate|up: fp32 sums (error <= ~4e-6 of the sum of |terms| for these
				 * lengths), then act(g) * u rounded to dt, as test_gemv bounds it */
				size_t bad = 0;
				std::vector<size_t> pos_of(P);
				for (size_t s = 0; s < P; s++)
					pos_of[sorted[s]] = s;
				std::vector<double> a_ref(P * F);
				for (size_t q = 0; q < P; q++) {
					int t = (int)(q / K), e = ids[q];
					const float *xt = &x[(size_t)t * E];
					std::vector<float> xw; /* llama4: x w, the expert's input */
					if (cs.w_in) {
						for (int i = 0; i < E; i++)
							xw.push_back(xt[i] * w[q]);
						xt = xw.data();
					}
					for (int j = 0; j < F; j++) {
						/* gate row j and up row j, or up row j alone
						 * (relu2) */
						const float *g_row =
						    &wgu[((size_t)e * n_gu * F + j) * E];
						const float *u_row =
						    g_row + (size_t)(n_gu - 1) * F * E;
						double lim;
						const double v =
						    cs.relu2
							? moe_relu2_ref(u_row, xt, E, dt, &lim)
							: moe_act_ref(
							      g_row, u_row, xt, E, cs.oai, OA, OL,
							      cs.oai ? bg[(size_t)e * F + j] : 0.0f,
							      cs.oai ? bu[(size_t)e * F + j] : 0.0f,
							      dt, &lim);
						a_ref[q * F + j] = v;
						float got = act[pos_of[q] * F + j];
						if (!(fabs(got - st_round(dt, (float)v)) <= lim) && bad++ < 3)
							fprintf(stderr, "  %s: act[pair %zu][%d] = %.9g, want %.9g\n",
								what, q, j, got, v);
					}
				}
				CHECK(bad == 0, "%s: %zu of %zu activations out of tolerance", what, bad,
				      P * F);
				/* down: from the device's act, fp32 sums of F terms */
				bad = 0;
				for (size_t q = 0; q < P; q++) {
					int e = ids[q];
					for (int o = 0; o < E; o++) {
						const float *row = &wd[((size_t)e * E + o) * F];
						double acc = bd[(size_t)e * E + o], aa = fabs(acc);
						for (int j = 0; j < F; j++) {
							double pr = (double)row[j] * act[pos_of[q] * F + j];
							acc += pr;
							aa += fabs(pr);
						}
						if (!(fabs(y[q * E + o] - acc) <= 4e-6 * aa + 1e-30) && bad++ < 3)
							fprintf(stderr, "  %s: y[pair %zu][%d] = %.9g, want %.9g\n",
								what, q, o, y[q * E + o], acc);
					}
				}
				CHECK(bad == 0, "%s: %zu of %zu down outputs out of tolerance", what, bad,
				      P * E);
				/* combine: from the device's y and w, in slot order */
				bad = 0;
				for (int t = 0; t < T; t++)
					for (int o = 0; o < E; o++) {
						double acc = 0, aa = 0;
						for (int j = 0; j < K; j++) {
							double pr = (cs.w_in ? 1.0 : (double)w[(size_t)t * K + j]) *
								    y[((size_t)t * K + j) * E + o];
							acc += pr;
							aa += fabs(pr);
						}
						if (!(fabs(out[(size_t)t * E + o] - acc) <= 1e-6 * aa + 1e-30) &&
						    bad++ < 3)
							fprintf(stderr, "  %s: out[%d][%d] = %.9g, want %.9g\n",
								what, t, o, out[(size_t)t * E + o], acc);
					}
				CHECK(bad == 0, "%s: %zu of %d outputs out of tolerance", what, bad, T * E);
				/* the whole, from the reference routing (its ids equal the device's: the
				 * route test) and the host's activations rounded to dt: a rounding flip
				 * of an activation moves y by one ulp of it times its weight row */
				bad = 0;
				for (int t = 0; t < T; t++) {
					std::vector<int32_t> rid(K);
					std::vector<double> rw(K);
					moe_route_ref(&l[(size_t)t * NX], NX, K, cs.norm, rid.data(), rw.data());
					if (cs.w_in) { /* the weights are in a_ref already */
						std::vector<float> rwf(K);
						moe_route_llama4(&l[(size_t)t * NX], (uint32_t)NX, (uint32_t)K,
								 rid.data(), rwf.data());
						for (int j = 0; j < K; j++)
							rw[j] = 1.0;
					}
					for (int o = 0; o < E; o++) {
						double acc = 0, lim = 1e-30;
						for (int j = 0; j < K; j++) {
							size_t q = (size_t)t * K + j;
							const float *row = &wd[((size_t)rid[j] * E + o) * F];
							double yo = bd[(size_t)rid[j] * E + o], ay = fabs(yo);
							for (int f = 0; f < F; f++) {
								double a = st_round(dt, (float)a_ref[q * F + f]);
								yo += row[f] * a;
								ay += fabs(row[f] * a);
							}
							acc += rw[j] * yo;
							lim += fabs(rw[j]) * ay * (st_rtol(dt) + 2e-5);
						}
						if (!(fabs(out[(size_t)t * E + o] - acc) <= lim) && bad++ < 3)
							fprintf(stderr, "  %s: out[%d][%d] = %.9g, want %.9g (whole)\n",
								what, t, o, out[(size_t)t * E + o], acc);
					}
				}
				CHECK(bad == 0, "%s: %zu of %d outputs differ from the host's whole FFN", what,
				      bad, T * E);
				/* the last token alone: bitwise its row of the batch, on one kernel
				 * (AUTO's choice depends on the pass's size) */
				if (T > 1 && path != GPU_MOE_AUTO) {
					std::vector<float> l1(l.end() - NX, l.end()), x1(x.end() - E, x.end());
					std::vector<float> o1 =
					    moe_ffn_run(dt, l1, 1, NX, K, cs.norm, E, F, dwgu, dwd,
							x1, NULL, NULL, NULL, NULL, NULL, path, po);
					CHECK(memcmp(o1.data(), &out[(size_t)(T - 1) * E], (size_t)E * 4) == 0,
					      "%s: the last token alone differs from its row in the batch", what);
				}
				cudaFree(dwgu);
				cudaFree(dwd);
				if (cs.oai) {
					cudaFree((void *)oai.b_gate);
					cudaFree((void *)oai.b_up);
					cudaFree((void *)oai.b_down);
				}
			}
	/* what the projections refuse: widths not multiples of 8; tensor cores forced where
	 * they do not apply (f32, a width of 24) */
	struct gpu_moe_plan plan = {};
	CHECK(gpu_moe_gate_up((void *)256, 12, 64, 8, (void *)256, 1, 2, &plan, NULL, false, NULL,
			      GPU_F32, GPU_MOE_AUTO, 0) == cudaErrorInvalidValue &&
		  gpu_moe_down((void *)256, 64, 12, 8, (void *)256, 1, 2, &plan, NULL, NULL,
			       GPU_F32, GPU_MOE_AUTO, 0) == cudaErrorInvalidValue &&
		  gpu_moe_gate_up((void *)256, 32, 64, 8, (void *)256, 1, 2, &plan, NULL, false,
				  NULL, GPU_F32, GPU_MOE_TENSOR_CORES, 0) == cudaErrorInvalidValue &&
		  gpu_moe_down((void *)256, 64, 24, 8, (void *)256, 1, 2, &plan, NULL, NULL,
			       GPU_BF16, GPU_MOE_TENSOR_CORES, 0) == cudaErrorInvalidValue,
	      "moe: an expert width of 12, and tensor cores forced for f32 or a width of 24, "
	      "refused");
}

/* ---- block-quantized experts (gpu_moe_gate_up_q, gpu_moe_down_q) ---- */

/* A host-made routing plan (gpu_moe_plan's layout, independent of gpu_moe_route): expert e
 * gets count[e] pairs, scattered over the pairs at random, grouped stably and cut into
 * tiles of <= GPU_MOE_TILE as the routing cuts them. n_tok = sum / k. */
static struct moe_dev moe_host_plan(const std::vector<int> &count, int k, int *n_tok,
				    std::vector<int32_t> *ids_out, std::vector<int32_t> *sorted_out)
{
	const int NX = (int)count.size();
	std::vector<int32_t> ids;
	for (int e = 0; e < NX; e++)
		ids.insert(ids.end(), count[e], e);
	for (size_t i = ids.size(); i > 1; i--) /* Fisher-Yates */
		std::swap(ids[i - 1], ids[rnd_u32() % i]);
	const int P = (int)ids.size();
	*n_tok = P / k;
	std::vector<int32_t> offs(NX + 1, 0), sorted, tiles;
	for (int e = 0; e < NX; e++) {
		offs[e + 1] = offs[e] + count[e];
		for (int q = 0; q < P; q++)
			if (ids[q] == e)
				sorted.push_back(q);
		for (int i = 0; i * GPU_MOE_TILE < count[e]; i++) {
			tiles.push_back(e);
			tiles.push_back(offs[e] + i * GPU_MOE_TILE);
		}
	}
	struct moe_dev d = moe_dev_alloc(std::vector<float>((size_t)P * NX, 0.0f), *n_tok, NX, k);
	const int32_t nt = (int32_t)tiles.size() / 2;
	REQUIRE(cudaMemcpy(d.plan.ids, ids.data(), (size_t)P * 4, cudaMemcpyHostToDevice));
	REQUIRE(cudaMemcpy(d.plan.offs, offs.data(), offs.size() * 4, cudaMemcpyHostToDevice));
	REQUIRE(cudaMemcpy(d.plan.sorted, sorted.data(), (size_t)P * 4, cudaMemcpyHostToDevice));
	REQUIRE(cudaMemcpy(d.plan.tiles, tiles.data(), tiles.size() * 4, cudaMemcpyHostToDevice));
	REQUIRE(cudaMemcpy(d.plan.n_tiles, &nt, 4, cudaMemcpyHostToDevice));
	*ids_out = ids;
	*sorted_out = sorted;
	return d;
}

/* An expert array [NX][rows][n_in] of GGUF type t (BF16: gpu_moe_qw's BF16 rows, type 30)
 * on the device, and its values dequantized on the host by core/model/quant.c in *W. */
static void *moe_q_array(enum gguf_dtype t, size_t n, std::vector<float> *W)
{
	std::vector<uint8_t> b;
	W->resize(n);
	if (t == GGUF_DTYPE_BF16) {
		*W = rand_vec(n, -0.5f, 0.5f);
		for (auto &v : *W)
			v = st_round(GPU_BF16, v);
		b = st_pack(GPU_BF16, *W);
	} else {
		b = rand_blocks(t, n);
		quant_dequant(t, b.data(), W->data(), (int64_t)n);
	}
	return dev_upload(b.data(), b.size());
}

/* gpu_moe_gate_up_q and gpu_moe_down_q against a host loop in double over quant_dequant's
 * values (the reference tests/test_quant.c checks against llama.cpp's): per case the
 * experts' gate, up and down arrays of their own types, pairs routed by moe_host_plan so
 * that tiles of every size 1..16 occur, with tails (17 = 16 + 1, 33 = 16 + 16 + 1), idle
 * experts and experts past the first; widths of 2 to 32 groups (fewer than, and not a
 * multiple of, a 256-input chunk). gate|up as test_moe_ffn bounds it (fp32 sums: 4e-6 of
 * the sum of |terms|; act rounded to bf16), down from the device's act; gpt-oss's biases and
 * clamped SwiGLU on the MXFP4 case. Then the last token alone (its k pairs, a plan of its
 * own): act and y bitwise its rows in the batch (the batch-invariance contract). A wrong
 * block stride, scale or nibble, or the neighbouring expert's rows, moves outputs by ~|w x|. */
static void test_moe_q(void)
{
	const enum gguf_dtype Q8 = GGUF_DTYPE_Q8_0, Q4K = GGUF_DTYPE_Q4_K, Q6K = GGUF_DTYPE_Q6_K,
			      MX = GGUF_DTYPE_MXFP4, Q5 = GGUF_DTYPE_Q5_0, B16 = GGUF_DTYPE_BF16;
	/* every tile size: 16 experts with 1..16 pairs, then 17 and 33 (tails), one idle */
	std::vector<int> every;
	for (int c = 1; c <= 16; c++)
		every.push_back(c);
	every.insert(every.end(), {17, 0, 33});
	struct qcase {
		enum gguf_dtype tg, tu, td;
		int n_embd, n_ff, k;
		std::vector<int> count;
		bool oai;
	} cases[] = {
	    {Q8, Q8, Q8, 96, 64, 2, every, false},
	    /* Q4_K_M's experts: Q4_K gate and up, Q6_K down (or Q4_K) */
	    {Q4K, Q4K, Q6K, 512, 768, 1, {16, 1, 0, 17, 7}, false},
	    {Q4K, Q4K, Q4K, 256, 512, 2, {2, 5, 9, 0}, false},
	    /* mixed: a BF16-rows array beside blocks; Q5_0 (a K-quant's fallback for rows not
	     * a multiple of 256: GLM-4.5-Air's down_exps) */
	    {Q6K, Q4K, B16, 512, 256, 1, {3, 33, 2, 9}, false},
	    {Q5, Q5, Q5, 96, 160, 2, {7, 0, 18, 1}, false},
	    /* gpt-oss: MXFP4 with the biases and clamped SwiGLU */
	    {MX, MX, MX, 96, 160, 4, {5, 16, 0, 1, 19, 7}, true},
	    {Q8, Q8, MX, 64, 96, 2, {2, 14, 0}, false},
	};
	const float OA = 1.702f, OL = 7.0f;
	for (auto &cs : cases) {
		const int NX = (int)cs.count.size(), E = cs.n_embd, F = cs.n_ff, K = cs.k;
		std::vector<int32_t> ids, sorted;
		int T;
		struct moe_dev d = moe_host_plan(cs.count, K, &T, &ids, &sorted);
		const size_t P = (size_t)T * K;
		std::vector<float> Wg, Wu, Wd;
		struct gpu_moe_qw qgu, qd;
		qgu.p[0] = moe_q_array(cs.tg, (size_t)NX * F * E, &Wg);
		qgu.p[1] = moe_q_array(cs.tu, (size_t)NX * F * E, &Wu);
		qd.p[0] = moe_q_array(cs.td, (size_t)NX * E * F, &Wd);
		qd.p[1] = NULL;
		qgu.type[0] = cs.tg == B16 ? 30 : (int)cs.tg;
		qgu.type[1] = cs.tu == B16 ? 30 : (int)cs.tu;
		qd.type[0] = cs.td == B16 ? 30 : (int)cs.td;
		qd.type[1] = 0;
		std::vector<float> x = rand_vec((size_t)T * E, -1, 1);
		for (auto &v : x)
			v = st_round(GPU_BF16, v);
		std::vector<float> bg((size_t)NX * F, 0.0f), bu = bg, bd((size_t)NX * E, 0.0f);
		struct gpu_moe_oai oai = {};
		if (cs.oai) {
			bg = rand_vec(bg.size(), -2, 2);
			bu = rand_vec(bu.size(), -2, 2);
			bd = rand_vec(bd.size(), -1, 1);
			oai = {dev_vec(bg), dev_vec(bu), dev_vec(bd), OA,
			       OL,	    false,	 0.0f /* clamp: step35 */, false /* w_in: llama4 */};
		}
		auto px = st_pack(GPU_BF16, x);
		void *dx = dev_upload(px.data(), px.size()), *dact;
		float *dy;
		REQUIRE(cudaMalloc(&dact, P * F * 2));
		REQUIRE(cudaMalloc(&dy, P * E * 4));
		REQUIRE(gpu_moe_gate_up_q(&qgu, F, E, NX, dx, T, K, &d.plan, dact, false,
					  cs.oai ? &oai : NULL, GPU_MOE_AUTO, 0));
		REQUIRE(gpu_moe_down_q(&qd, E, F, NX, dact, T, K, &d.plan, dy, cs.oai ? &oai : NULL,
				       GPU_MOE_CUDA_CORES, 0));
		std::vector<float> act = dev_download_st(GPU_BF16, dact, P * F);
		std::vector<float> y = dev_download<float>(dy, P * E);
		char what[128];
		snprintf(what, sizeof what, "moe_q %s|%s, %s: %d tokens, %d of %d experts, %dx%d",
			 gguf_dtype_name(cs.tg), gguf_dtype_name(cs.tu), gguf_dtype_name(cs.td), T,
			 K, NX, E, F);
		std::vector<size_t> pos_of(P);
		for (size_t s = 0; s < P; s++)
			pos_of[sorted[s]] = s;
		size_t bad = 0;
		double worst = 0, ss = 0;
		for (size_t q = 0; q < P; q++) {
			const int t = (int)(q / K), e = ids[q];
			const float *xt = &x[(size_t)t * E];
			for (int j = 0; j < F; j++) {
				const float *gr = &Wg[((size_t)e * F + j) * E],
					    *ur = &Wu[((size_t)e * F + j) * E];
				double lim;
				const double v =
				    moe_act_ref(gr, ur, xt, E, cs.oai, OA, OL,
						cs.oai ? bg[(size_t)e * F + j] : 0.0f,
						cs.oai ? bu[(size_t)e * F + j] : 0.0f, GPU_BF16, &lim);
				const float got = act[pos_of[q] * F + j];
				const double err = fabs(got - st_round(GPU_BF16, (float)v));
				ss += v * v;
				worst = std::max(worst, err / (fabs(v) + 1e-3));
				if (!(err <= lim) && bad++ < 3)
					fprintf(stderr,
						"  %s: act[pair %zu][%d] = %.9g, want %.9g\n", what,
						q, j, got, v);
			}
		}
		CHECK(bad == 0, "%s: %zu of %zu activations out of tolerance", what, bad, P * F);
		bad = 0;
		for (size_t q = 0; q < P; q++) {
			const int e = ids[q];
			for (int o = 0; o < E; o++) {
				const float *row = &Wd[((size_t)e * E + o) * F];
				double acc = bd[(size_t)e * E + o], aa = fabs(acc);
				for (int j = 0; j < F; j++) {
					double pr = (double)row[j] * act[pos_of[q] * F + j];
					acc += pr;
					aa += fabs(pr);
				}
				if (!(fabs(y[q * E + o] - acc) <= 4e-6 * aa + 1e-30) && bad++ < 3)
					fprintf(stderr, "  %s: y[pair %zu][%d] = %.9g, want %.9g\n",
						what, q, o, y[q * E + o], acc);
			}
		}
		CHECK(bad == 0, "%s: %zu of %zu down outputs out of tolerance", what, bad, P * E);
		fprintf(stderr, "  %s: act rms %.3g, max |err| / (|v| + 1e-3) %.3g\n", what,
			sqrt(ss / (double)(P * F)), worst);
		/* the last token alone: its k pairs in a plan of their own */
		std::vector<int> c1(NX, 0);
		for (int j = 0; j < K; j++)
			c1[ids[(size_t)(T - 1) * K + j]]++;
		std::vector<int32_t> ids1, sorted1;
		int T1;
		struct moe_dev d1 = moe_host_plan(c1, K, &T1, &ids1, &sorted1);
		/* moe_host_plan shuffles: the token's slots must keep their order */
		REQUIRE(cudaMemcpy(d1.plan.ids, &ids[(size_t)(T - 1) * K], (size_t)K * 4,
				   cudaMemcpyHostToDevice));
		std::vector<int32_t> srt1;
		for (int e = 0; e < NX; e++)
			for (int j = 0; j < K; j++)
				if (ids[(size_t)(T - 1) * K + j] == e)
					srt1.push_back(j);
		REQUIRE(
		    cudaMemcpy(d1.plan.sorted, srt1.data(), (size_t)K * 4, cudaMemcpyHostToDevice));
		REQUIRE(gpu_moe_gate_up_q(
		    &qgu, F, E, NX, (const uint8_t *)dx + (size_t)(T - 1) * E * 2, 1, K, &d1.plan,
		    dact, false, cs.oai ? &oai : NULL, GPU_MOE_CUDA_CORES, 0));
		REQUIRE(gpu_moe_down_q(&qd, E, F, NX, dact, 1, K, &d1.plan, dy,
				       cs.oai ? &oai : NULL, GPU_MOE_AUTO, 0));
		std::vector<float> act1 = dev_download_st(GPU_BF16, dact, (size_t)K * F);
		std::vector<float> y1 = dev_download<float>(dy, (size_t)K * E);
		bool same = true;
		for (int s = 0; s < K; s++) {
			const int j = srt1[s];
			const size_t q = (size_t)(T - 1) * K + j;
			same =
			    same &&
			    memcmp(&act1[(size_t)s * F], &act[pos_of[q] * F], (size_t)F * 4) == 0 &&
			    memcmp(&y1[(size_t)j * E], &y[q * E], (size_t)E * 4) == 0;
		}
		CHECK(same, "%s: the last token alone differs from its rows in the batch", what);
		moe_dev_free(&d1);
		moe_dev_free(&d);
		cudaFree(dx);
		cudaFree(dact);
		cudaFree(dy);
		for (const void *a : {qgu.p[0], qgu.p[1], qd.p[0]})
			cudaFree((void *)a);
		if (cs.oai) {
			cudaFree((void *)oai.b_gate);
			cudaFree((void *)oai.b_up);
			cudaFree((void *)oai.b_down);
		}
	}
	/* what they refuse: tensor cores; relu2; a type or width they do not read; f16 rows; an
	 * unaligned array */
	struct gpu_moe_plan plan = {};
	struct gpu_moe_qw w = {{(void *)256, (void *)256}, {12, 12}};
	CHECK(gpu_moe_gate_up_q(&w, 32, 256, 8, (void *)256, 1, 2, &plan, NULL, false, NULL,
				GPU_MOE_TENSOR_CORES, 0) == cudaErrorInvalidValue,
	      "moe_q: tensor cores refused");
	const struct gpu_moe_oai r2 = {NULL, NULL, NULL, 0.0f, 0.0f, true, 0.0f, false};
	CHECK(gpu_moe_gate_up_q(&w, 32, 256, 8, (void *)256, 1, 2, &plan, NULL, false, &r2,
				GPU_MOE_AUTO, 0) == cudaErrorInvalidValue,
	      "moe_q: relu2 (nemotron_h_moe's experts without gate: not built) refused");
	CHECK(gpu_moe_gate_up_q(&w, 32, 96, 8, (void *)256, 1, 2, &plan, NULL, false, NULL,
				GPU_MOE_AUTO, 0) == cudaErrorInvalidValue,
	      "moe_q: Q4_K rows of 96 refused");
	w.p[1] = (void *)264;
	CHECK(gpu_moe_gate_up_q(&w, 32, 256, 8, (void *)256, 1, 2, &plan, NULL, false, NULL,
				GPU_MOE_AUTO, 0) == cudaErrorInvalidValue,
	      "moe_q: an array not 16-byte aligned refused");
	w.p[1] = (void *)256;
	w.type[0] = GGUF_DTYPE_Q5_K;
	CHECK(gpu_moe_down_q(&w, 32, 256, 8, (void *)256, 1, 2, &plan, NULL, NULL, GPU_MOE_AUTO,
			     0) == cudaErrorInvalidValue,
	      "moe_q: Q5_K refused");
	w.type[0] = GGUF_DTYPE_F16;
	CHECK(gpu_moe_down_q(&w, 32, 256, 8, (void *)256, 1, 2, &plan, NULL, NULL, GPU_MOE_AUTO,
			     0) == cudaErrorInvalidValue,
	      "moe_q: F16 refused");
	CHECK(gpu_moe_qtype_ok(39, 96) && !gpu_moe_qtype_ok(39, 80) && gpu_moe_qtype_ok(8, 32) &&
		  !gpu_moe_qtype_ok(30, 64) && gpu_moe_qrow_bytes(39, 2880) == 1530 &&
		  gpu_moe_qrow_bytes(14, 768) == 630 && gpu_moe_qrow_bytes(30, 64) == 128 &&
		  gpu_moe_qrow_bytes(6, 1408) == 968 && gpu_moe_qrow_bytes(13, 256) == 0,
	      "moe_q: types and row bytes");
	cudaGetLastError();
}

/* gpu_rope with non-uniform frequencies (Llama 3.1's rope_freqs, LongRoPE, YaRN reach the
 * kernel as arbitrary freq[], tabulated by gpu_rope_table_fill) and an attention factor. */
static void test_rope_factors(void)
{
	int n_tok = 6, n_head = 4, n_head_kv = 2, hd = 64, half = hd / 2;
	int ld = (n_head + 2 * n_head_kv) * hd;
	std::vector<float> qkv = rand_vec((size_t)n_tok * ld, -1, 1);
	std::vector<int32_t> pos = {0, 1, 63, 64, 4000, 131071};
	std::vector<double> freq(half);
	for (int i = 0; i < half; i++)
		freq[i] = pow(500000.0, -2.0 * i / hd) / (1.0 + (rnd_u32() % 32));
	float msc = 1.1386294f;
	float *d = dev_vec(qkv);
	int32_t *dp = dev_vec(pos);
	std::vector<float> tab(GPU_ROPE_TABLE_FLOATS(half));
	gpu_rope_table_fill(freq.data(), half, tab.data());
	float *df = dev_vec(tab);
	for (int neox = 0; neox < 2; neox++) {
		REQUIRE(cudaMemcpy(d, qkv.data(), qkv.size() * 4, cudaMemcpyHostToDevice));
		REQUIRE(gpu_rope(d, ld, dp, n_tok, n_head, n_head_kv, hd, hd, df, msc, neox, 0));
		std::vector<float> got = dev_download<float>(d, qkv.size()), want = qkv;
		for (int t = 0; t < n_tok; t++)
			for (int h = 0; h < n_head + n_head_kv; h++)
				for (int i = 0; i < half; i++) {
					double th = (double)pos[t] * freq[i];
					float c = (float)cos(th) * msc, sn = (float)sin(th) * msc;
					float *v = &want[(size_t)t * ld + (size_t)h * hd];
					int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
					float x0 = v[a], x1 = v[b];
					volatile float p0 = x0 * c, p1 = x1 * sn, p2 = x0 * sn, p3 = x1 * c;
					v[a] = p0 - p1;
					v[b] = p2 + p3;
				}
		/* as test_rope beyond position 2048 (the digit tables' fp32 products), times
		 * the attention factor */
		check_close(neox ? "rope factors neox" : "rope factors", got, want, 8e-7, 0);
	}
	cudaFree(d);
	cudaFree(dp);
	cudaFree(df);
}

/* Windowed attention with score soft-capping (gemma), through the per-query and the tiled
 * kernels at several splits, with the block-table entries before each sequence's window
 * set to -1 as the engine leaves them once every layer is windowed (scheduler.h): a kernel
 * that reads outside the window reads no block at all. Then llama4's chunks of W over the
 * same tables (a chunk starts at or after p - W + 1: llama4-chunk's layers, all chunked,
 * give those blocks back too). Reference in double. */
static void test_attention_window(int n_sm)
{
	const int n_head = 8, n_head_kv = 4, hd = 64, bs = 8, W = 40, kv_dim = n_head_kv * hd;
	const float cap = 5.0f, scale = 0.125f;
	struct {
		int pos0, n;
	} seqs[4] = {{300, 1}, {100, 37}, {0, 1}, {20, 1}}; /* the last: window not reached */
	int n_tok = 0, max_ctx = 0, n_blocks = 0;
	for (auto &q : seqs) {
		n_tok += q.n;
		max_ctx = std::max(max_ctx, q.pos0 + q.n);
		n_blocks += (q.pos0 + q.n + bs - 1) / bs;
	}
	int64_t block_elems = (int64_t)2 * bs * kv_dim; /* one layer */
	enum gpu_dtype dt = GPU_F32;
	std::vector<float> pool = rand_vec((size_t)block_elems * n_blocks, -1, 1);
	std::vector<int32_t> bt, tok_pos, tok_bt;
	std::vector<std::vector<int32_t>> tables;
	int next = 0;
	for (auto &q : seqs) {
		int nb = (q.pos0 + q.n + bs - 1) / bs, first = 0;
		if (q.pos0 - W + 1 > 0)
			first = (q.pos0 - W + 1) / bs;
		std::vector<int32_t> tb;
		for (int b = 0; b < nb; b++)
			tb.push_back(b < first ? -1 : next++);
		int off = (int)bt.size();
		bt.insert(bt.end(), tb.begin(), tb.end());
		for (int j = 0; j < q.n; j++) {
			tok_pos.push_back(q.pos0 + j);
			tok_bt.push_back(off);
		}
		tables.push_back(tb);
	}
	int ldq = (n_head + 2 * n_head_kv) * hd;
	std::vector<float> qv = rand_vec((size_t)n_tok * ldq, -2, 2);
	size_t out_n = (size_t)n_tok * n_head * hd;
	std::vector<float> wants[2] = {std::vector<float>(out_n), std::vector<float>(out_n)};
	for (int chunked = 0; chunked < 2; chunked++) {
	std::vector<float> &want = wants[chunked];
	int t = 0;
	for (int si = 0; si < 4; si++)
		for (int j = 0; j < seqs[si].n; j++, t++) {
			int p = seqs[si].pos0 + j, lo = chunked ? p / W * W : std::max(0, p - W + 1);
			for (int h = 0; h < n_head; h++) {
				int kvh = h / (n_head / n_head_kv);
				std::vector<double> sc(p + 1);
				double mx = -INFINITY, sum = 0;
				for (int k = lo; k <= p; k++) {
					size_t base = (size_t)tables[si][k / bs] * block_elems +
						      (size_t)(k % bs) * kv_dim + (size_t)kvh * hd;
					double d = 0;
					for (int e = 0; e < hd; e++)
						d += (double)qv[(size_t)t * ldq + h * hd + e] * pool[base + e];
					sc[k] = cap * tanh(d * scale / cap);
					mx = std::max(mx, sc[k]);
				}
				for (int k = lo; k <= p; k++)
					sum += (sc[k] = exp(sc[k] - mx));
				for (int e = 0; e < hd; e++) {
					double o = 0;
					for (int k = lo; k <= p; k++)
						o += sc[k] * pool[(size_t)tables[si][k / bs] * block_elems +
								  (size_t)bs * kv_dim + (size_t)(k % bs) * kv_dim +
								  (size_t)kvh * hd + e];
					want[(size_t)t * n_head * hd + h * hd + e] = (float)(o / sum);
				}
			}
		}
	}
	float *dpool = dev_vec(pool), *dq = dev_vec(qv);
	int32_t *dbt = dev_vec(bt), *dpos = dev_vec(tok_pos), *dtb = dev_vec(tok_bt);
	std::vector<int32_t> tiles = {1, 16, 17, 16, 33, 5}, list = {0, 38, 39};
	int32_t *dtiles = dev_vec(tiles), *dlist = dev_vec(list);
	void *dout;
	float *partial;
	const size_t part_cap = 1 << 20;
	REQUIRE(cudaMalloc(&dout, out_n * 4));
	REQUIRE(cudaMalloc(&partial, part_cap * 4));
	struct gpu_attn_args a =
	    attn_args(dq, ldq, {dpool, block_elems, (int64_t)bs * kv_dim, bs, kv_dim}, dpos, dtb,
		      dbt, n_tok, n_head, n_head_kv, hd, dout, max_ctx);
	a.scale = scale;
	a.softcap = cap;
	a.window = W;
	for (int chunked = 0; chunked < 2; chunked++)
	for (int tiled = 0; tiled < 2; tiled++) {
		a.chunked = chunked;
		const std::vector<float> &want = wants[chunked];
		a.tiles = tiled ? dtiles : NULL;
		a.n_tiles = tiled ? 3 : 0;
		a.list = tiled ? dlist : NULL;
		a.n_list = tiled ? 3 : 0;
		int n_q = tiled ? 3 : n_tok;
		int heur = gpu_attention_splits(n_q, n_head, n_head_kv, hd, dt, max_ctx, n_sm,
						attn_per_sm(dt, n_head, n_head_kv, hd), part_cap);
		int splits[3] = {1, 4, heur};
		for (int ns : splits) {
			if (gpu_attention_partial_floats(n_q, n_head, hd, ns) > part_cap)
				continue;
			REQUIRE(cudaMemset(dout, 0xff, out_n * 4));
			REQUIRE(gpu_attention(&a, dt, ns, partial, 0));
			std::vector<float> got = dev_download_st(dt, dout, out_n);
			char what[96];
			snprintf(what, sizeof what, "attention %s %d softcap %g splits %d %s",
				 chunked ? "chunks of" : "window", W, (double)cap, ns,
				 tiled ? "tiled+list" : "per-query");
			check_close(what, got, want, 2e-5, st_rtol(dt));
		}
	}
	cudaFree(dpool);
	cudaFree(dq);
	cudaFree(dbt);
	cudaFree(dpos);
	cudaFree(dtb);
	cudaFree(dtiles);
	cudaFree(dlist);
	cudaFree(dout);
	cudaFree(partial);
}

/* Decode steps at the split counts gpu_attention_splits gives Llama-3-8B's shape (bf16,
 * 32/8 heads of 128: the GQA kernel) at batch 1 and 8 with long contexts: 128 splits of
 * 128 keys for one token of 16384; 16 for 8 tokens of up to 2048, six of them shorter, so
 * that their contexts fill their first splits only (>= 128 keys a split) and leave the
 * others empty (checked in partial[]). Reference in double; the counts themselves are
 * checked under the emulator (its occupancy is the hand-worked 8 of test_attn_splits). */
static void test_attention_long(int n_sm, bool emu)
{
	const int n_head = 32, n_head_kv = 8, hd = 128, bs = 16, kv_dim = n_head_kv * hd;
	const enum gpu_dtype dt = GPU_BF16;
	struct {
		std::vector<int> ctx;
		int want_splits; /* on the emulator: 1056 blocks a wave */
	} steps[2] = {{{16384}, 128}, {{2048, 1500, 700, 129, 128, 40, 1, 2048}, 16}};
	for (auto &st : steps) {
		const int n_tok = (int)st.ctx.size();
		int max_ctx = 0, n_blocks = 0;
		for (int c : st.ctx) {
			max_ctx = std::max(max_ctx, c);
			n_blocks += (c + bs - 1) / bs;
		}
		int64_t block_elems = (int64_t)2 * bs * kv_dim; /* one layer: K rows, then V rows */
		std::vector<float> pool = rand_vec((size_t)block_elems * n_blocks, -1, 1);
		for (auto &v : pool)
			v = st_round(dt, v);
		std::vector<int32_t> perm(n_blocks), bt, tok_pos, tok_bt;
		for (int i = 0; i < n_blocks; i++)
			perm[i] = i;
		for (int i = n_blocks - 1; i > 0; i--)
			std::swap(perm[i], perm[rnd_u32() % (i + 1)]);
		for (int c : st.ctx) {
			tok_pos.push_back(c - 1);
			tok_bt.push_back((int32_t)bt.size());
			for (int b = 0; b < (c + bs - 1) / bs; b++)
				bt.push_back(perm[bt.size()]);
		}
		const int ldq = (n_head + 2 * n_head_kv) * hd;
		std::vector<float> q = rand_vec((size_t)n_tok * ldq, -2, 2);
		const size_t out_n = (size_t)n_tok * n_head * hd;
		std::vector<float> want(out_n);
		for (int t = 0; t < n_tok; t++)
			for (int h = 0; h < n_head; h++) {
				const int kvh = h / (n_head / n_head_kv), n = st.ctx[t];
				std::vector<double> sc(n), o(hd, 0.0);
				double mx = -INFINITY, sum = 0;
				for (int k = 0; k < n; k++) {
					const float *kr = &pool[(size_t)bt[tok_bt[t] + k / bs] * block_elems +
								(size_t)(k % bs) * kv_dim + (size_t)kvh * hd];
					double d = 0;
					for (int e = 0; e < hd; e++)
						d += (double)q[(size_t)t * ldq + h * hd + e] * kr[e];
					sc[k] = d / sqrt((double)hd);
					mx = std::max(mx, sc[k]);
				}
				for (int k = 0; k < n; k++) {
					const float *vr = &pool[(size_t)bt[tok_bt[t] + k / bs] * block_elems +
								(size_t)(bs + k % bs) * kv_dim + (size_t)kvh * hd];
					double p = exp(sc[k] - mx);
					sum += p;
					for (int e = 0; e < hd; e++)
						o[e] += p * vr[e];
				}
				for (int e = 0; e < hd; e++)
					want[(size_t)t * n_head * hd + h * hd + e] =
					    st_round(dt, (float)(o[e] / sum));
			}
		auto pp = st_pack(dt, pool);
		void *dpool = dev_upload(pp.data(), pp.size());
		float *dq = dev_vec(q);
		int32_t *dbt = dev_vec(bt), *dpos = dev_vec(tok_pos), *dtb = dev_vec(tok_bt);
		void *dout;
		REQUIRE(cudaMalloc(&dout, out_n * 2));
		const size_t part_cap = 1 << 22;
		const int ns = gpu_attention_splits(n_tok, n_head, n_head_kv, hd, dt, max_ctx, n_sm,
						    attn_per_sm(dt, n_head, n_head_kv, hd), part_cap);
		if (emu)
			CHECK(ns == st.want_splits, "decode of %d tokens up to %d keys: %d splits, want %d",
			      n_tok, max_ctx, ns, st.want_splits);
		float *partial;
		REQUIRE(cudaMalloc(&partial, gpu_attention_partial_floats(n_tok, n_head, hd, ns) * 4));
		struct gpu_attn_args a = attn_args(dq, ldq,
						   {dpool, block_elems, (int64_t)bs * kv_dim, bs, kv_dim},
						   dpos, dtb, dbt, n_tok, n_head, n_head_kv, hd, dout,
						   max_ctx);
		REQUIRE(cudaMemset(dout, 0xff, out_n * 2)); /* NaN garbage */
		REQUIRE(gpu_attention(&a, dt, ns, partial, 0));
		char what[96];
		snprintf(what, sizeof what, "decode attention, %d tokens up to %d keys, %d splits",
			 n_tok, max_ctx, ns);
		/* as test_attention: fp32 softmax over up to 16384 keys, a bf16 output */
		check_close(what, dev_download_st(dt, dout, out_n), want, 2e-5, st_rtol(dt));
		/* >= 128 keys a split: a token of c keys fills its first ceil(c / len) splits,
		 * len = max(ceil(c / ns), 128) (2048 / 16: all 16; 1500: 12; 700: 6; 129: 2; 128,
		 * 40, 1: 1); the others leave m = -inf in partial[] (its layout: gpu_attention) */
		std::vector<float> part = dev_download<float>(
		    partial, gpu_attention_partial_floats(n_tok, n_head, hd, ns));
		size_t wrong = 0;
		for (int t = 0; t < n_tok; t++) {
			const int c = st.ctx[t], len = std::max((c + ns - 1) / ns, 128);
			for (int h = 0; h < n_head; h++)
				for (int sp = 0; sp < ns; sp++) {
					float m = part[(((size_t)t * n_head + h) * ns + sp) * (hd + 2)];
					wrong += (sp < (c + len - 1) / len) != (m != -INFINITY);
				}
		}
		CHECK(wrong == 0, "%s: %zu splits of the wrong emptiness (>= 128 keys a split)", what,
		      wrong);
		cudaFree(dpool);
		cudaFree(dq);
		cudaFree(dbt);
		cudaFree(dpos);
		cudaFree(dtb);
		cudaFree(dout);
		cudaFree(partial);
	}
}

int main(void)
{
	if (gpu_plugin_device_count(NULL, 0) == 0) {
		printf("SKIP: no CUDA device; the GPU kernel tests did not run\n");
		printf("0 passed, 0 failed\n");
		return 0;
	}
	REQUIRE(cudaSetDevice(0));
	struct cudaDeviceProp prop;
	REQUIRE(cudaGetDeviceProperties(&prop, 0));
	fprintf(stderr, "device: %s\n", prop.name);
	cublasHandle_t h;
	CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
	/* the GEMV prologue's opt-in to dynamic shared memory, as the backend does at start */
	prop_optin = prop.sharedMemPerBlockOptin;
	REQUIRE(gpu_gemv_init(prop_optin, &gemv_xs));
	CHECK(gemv_xs >= GPU_GEMV_XS_DEFAULT, "gemv_init: %zu bytes", gemv_xs);
	if (strncmp(prop.name, "emu ", 4) == 0) /* an H100's 227 KiB - 1 KiB, capped */
		CHECK(gemv_xs == GPU_GEMV_XS_BYTES, "gemv_init on an H100: 200 KiB (%zu)", gemv_xs);
	/* BG_GPU_TESTS=rope,sample,...: only those (a debugging aid for the slow emulator) */
	const char *only = getenv("BG_GPU_TESTS");
#define RUN(name, call)                                                                        \
	do {                                                                                   \
		if (!only || strstr(only, #name))                                              \
			call;                                                                  \
	} while (0)
	RUN(convert, test_convert());
	RUN(synth, test_synth());
	RUN(embed, test_embed());
	RUN(rmsnorm, test_rmsnorm());
	RUN(rope, test_rope());
	RUN(kv_write, test_kv_write());
	RUN(bias, test_bias());
	RUN(swiglu, test_swiglu());
	RUN(xielu, test_xielu());
	RUN(gdn, test_gdn());
	RUN(gemm, test_gemm(h));
	RUN(gemv, test_gemv());
	RUN(gemv, test_gemv_bucket());
	RUN(qkvepi, test_gemv_qkv());
	RUN(gemv_chain, test_gemv_chain());
	RUN(gemv_chain_attn, test_gemv_chain_attn());
	RUN(quant_res, test_gemv_q());
	RUN(quant_res, test_gemm_q(h));
	RUN(quant_res, test_embed_blocks());
	RUN(quant_res, test_qres_policy());
	/* the emulator's device (gpu/emu/emu.cpp): its occupancy is worked by hand in tests */
	const bool emu = strncmp(prop.name, "emu ", 4) == 0;
	RUN(occupancy, test_occupancy(emu));
	RUN(grid_sync, test_grid_sync(prop.multiProcessorCount));
	RUN(attn_splits, test_attn_splits(emu));
	RUN(attention, test_attention(prop.multiProcessorCount));
	RUN(attn_long, test_attention_long(prop.multiProcessorCount, emu));
	RUN(sample, test_sample());
	RUN(sample_nan, test_sample_nan());
	RUN(constrain, test_constrain());
	RUN(sample_exact, test_sample_exact());
	RUN(sample_paths, test_sample_paths());
	RUN(kv_large, test_kv_large());
	RUN(head_norm, test_head_norm());
	RUN(qk_norm_rows, test_qk_norm_rows());
	RUN(layernorm, test_layernorm());
	RUN(qkv_post, test_qkv_post());
	RUN(scale_softcap, test_scale_softcap());
	RUN(gelu, test_gelu());
	RUN(freq_factors, test_rope_factors());
	RUN(attn_window, test_attention_window(prop.multiProcessorCount));
	RUN(moe_route, test_moe_route());
	RUN(moe_ffn, test_moe_ffn());
	RUN(moe_qexp, test_moe_q());
#undef RUN
	cublasDestroy(h);
	REQUIRE(cudaDeviceSynchronize());
	return check_summary();
}
