/* cpu_deltanet: see cpu_deltanet.h. The elementwise functions are ggml's CPU ones (silu
 * x / (1 + e^-x), sigmoid, softplus with its threshold 20), the norms ggml_rms_norm's (the
 * sum of fp32 squares in double, the scale in fp32). */
#include "cpu/cpu_deltanet.h"

#include <math.h>
#include <string.h>

int64_t cpu_gdn_conv_dim(const struct model_hparams *hp)
{
	return 2 * (int64_t)hp->gdn_nk * hp->gdn_d + cpu_gdn_v_dim(hp);
}

int64_t cpu_gdn_v_dim(const struct model_hparams *hp)
{
	return (int64_t)hp->gdn_nv * hp->gdn_d;
}

int64_t cpu_gdn_mat_offset(const struct model_hparams *hp)
{
	return ((int64_t)hp->gdn_conv - 1) * cpu_gdn_conv_dim(hp);
}

static inline float silu(float x)
{
	return x / (1.0f + expf(-x));
}

/* ggml_rms_norm's scale of n values: 1 / sqrtf(mean of squares + eps) */
static float rms_scale(const float *x, int64_t n, float eps)
{
	double ss = 0.0;
	for (int64_t i = 0; i < n; i++)
		ss += (double)(x[i] * x[i]);
	const float mean = (float)(ss / (double)n);
	return 1.0f / sqrtf(mean + eps);
}

void cpu_gdn_conv(const struct model_hparams *hp, float *state, const float *w, const float *u,
		  int64_t ldu, int32_t n, float *out, int64_t ldo, int64_t c0, int64_t c1)
{
	const int64_t K = hp->gdn_conv, H = K - 1;
	for (int64_t i = c0; i < c1; i++) {
		float *st = state + i * H;
		const float *wi = w + i * K;
		float win[MODEL_CONV_L_MAX];
		for (int64_t k = 0; k < H; k++)
			win[k] = st[k];
		for (int32_t t = 0; t < n; t++) {
			win[H] = u[t * ldu + i];
			float sum = 0.0f;
			for (int64_t k = 0; k < K; k++)
				sum += win[k] * wi[k];
			out[t * ldo + i] = silu(sum);
			for (int64_t k = 0; k < H; k++) /* the window moves one token on */
				win[k] = win[k + 1];
		}
		for (int64_t k = 0; k < H; k++)
			st[k] = win[k];
	}
}

void cpu_gdn_qk_norm(const struct model_hparams *hp, float *row)
{
	const int64_t d = hp->gdn_d;
	const float inv = 1.0f / sqrtf((float)d);
	const float eps = hp->rms_eps / (float)d;
	for (int64_t h = 0; h < 2 * (int64_t)hp->gdn_nk; h++) { /* the Q heads, then the K heads */
		float *x = row + h * d;
		const float s = rms_scale(x, d, eps);
		for (int64_t i = 0; i < d; i++)
			x[i] = (x[i] * s) * inv;
	}
}

void cpu_gdn_recur(const struct model_hparams *hp, float *state, const float *c, int64_t ldc,
		   const float *beta_raw, const float *alpha_raw, int64_t ldb, const float *dt,
		   const float *a, int64_t h, int32_t n, float *o, int64_t ldo)
{
	const int64_t d = hp->gdn_d, KD = (int64_t)hp->gdn_nk * d;
	/* ggml_repeat's tiling of the K heads; qwen3next: repeat-interleave */
	const int64_t kh = hp->gdn_k_grouped ? h / (hp->gdn_nv / hp->gdn_nk) : h % hp->gdn_nk;
	float *M = state + cpu_gdn_mat_offset(hp) + h * d * d;
	const float scale = 1.0f / sqrtf((float)d);
	float delta[1024]; /* gdn_d <= 1024 (model.c) */
	for (int32_t t = 0; t < n; t++) {
		const float *q = c + t * ldc + kh * d;
		const float *k = q + KD;
		const float *v = c + t * ldc + 2 * KD + h * d;
		const float b = 1.0f / (1.0f + expf(-beta_raw[t * ldb + h]));
		const float x = alpha_raw[t * ldb + h] + dt[h];
		const float g = (x > 20.0f ? x : logf(1.0f + expf(x))) * a[h];
		const float decay = expf(g);
		for (int64_t i = 0; i < d * d; i++)
			M[i] *= decay;
		for (int64_t j = 0; j < d; j++) {
			const float *mj = M + j * d;
			float s = 0.0f;
			for (int64_t i = 0; i < d; i++)
				s += mj[i] * k[i];
			delta[j] = (v[j] - s) * b;
		}
		float *y = o + t * ldo + h * d;
		for (int64_t j = 0; j < d; j++) {
			float *mj = M + j * d;
			float s = 0.0f;
			for (int64_t i = 0; i < d; i++) {
				mj[i] += delta[j] * k[i];
				s += mj[i] * q[i];
			}
			y[j] = s * scale;
		}
	}
}

void cpu_gdn_out_norm(const struct model_hparams *hp, float *o, const float *z, const float *norm_w)
{
	const int64_t d = hp->gdn_d;
	for (int64_t h = 0; h < (int64_t)hp->gdn_nv; h++) {
		float *x = o + h * d;
		const float s = rms_scale(x, d, hp->rms_eps);
		for (int64_t i = 0; i < d; i++)
			x[i] = ((x[i] * s) * norm_w[i]) * silu(z[h * d + i]);
	}
}
