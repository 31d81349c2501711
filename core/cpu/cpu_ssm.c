/* cpu_ssm: see cpu_ssm.h */
#include "cpu/cpu_ssm.h"

#include <math.h>

static inline float silu(float v)
{
	return v / (1.0f + expf(-v));
}

/* ggml_compute_softplus_f32 */
static inline float softplus(float v)
{
	return v > 20.0f ? v : logf(1.0f + expf(v));
}

void cpu_ssm_conv(const struct cpu_ssm_dims *d, const struct cpu_ssm_w *w, float *conv_state,
		  const float *in, int64_t ld, int32_t n, float *out, int64_t ldo, int64_t c0,
		  int64_t c1)
{
	const int64_t K = d->d_conv, C = cpu_ssm_conv_dim(d);
	for (int64_t i = c0; i < c1; i++) {
		const float *wi = w->conv_w + i * K;
		for (int32_t j = 0; j < n; j++) {
			float sum = 0.0f;
			for (int64_t k = 0; k < K; k++) {
				const int64_t r = j - (K - 1) + k;
				const float v =
				    r >= 0 ? in[r * ld + i] : conv_state[(K - 1 + r) * C + i];
				sum += v * wi[k];
			}
			out[j * ldo + i] = silu(sum + w->conv_b[i]);
		}
		/* the last K - 1 rows of [state | in]; a state row read (index n + r >= r) is
		 * not yet overwritten */
		for (int64_t r = 0; r < K - 1; r++) {
			const int64_t idx = n - (K - 1) + r;
			conv_state[r * C + i] =
			    idx >= 0 ? in[idx * ld + i] : conv_state[(K - 1 + idx) * C + i];
		}
	}
}

void cpu_ssm_scan_head(const struct cpu_ssm_dims *d, const struct cpu_ssm_w *w, int64_t h, float *S,
		       const float *xbc, int64_t ldx, const float *dt_raw, int64_t ldt, int32_t n,
		       float *y, int64_t ldy)
{
	const int64_t P = d->D / d->H, N = d->N, g = h / (d->H / d->G);
	for (int32_t j = 0; j < n; j++) {
		const float *row = xbc + j * ldx;
		const float *x = row + h * P;
		const float *B = row + d->D + g * N;
		const float *Cv = row + d->D + d->G * N + g * N;
		const float dt = softplus(dt_raw[j * ldt + h] + w->dt_b[h]);
		const float dA = expf(dt * w->a[h]);
		float *yo = y + j * ldy + h * P;
		for (int64_t p = 0; p < P; p++) {
			const float x_dt = x[p] * dt;
			float *s = S + p * N;
			float sum = 0.0f;
			for (int64_t k = 0; k < N; k++) {
				const float st = s[k] * dA + B[k] * x_dt;
				sum += st * Cv[k];
				s[k] = st;
			}
			yo[p] = sum + x[p] * w->d[h];
		}
	}
}

void cpu_ssm_gate_norm(const struct cpu_ssm_dims *d, const struct cpu_ssm_w *w, const float *z,
		       float *y)
{
	const int64_t span = d->D / d->G;
	for (int64_t i = 0; i < d->D; i++)
		y[i] = silu(z[i]) * y[i];
	for (int64_t g0 = 0; w->norm && g0 < d->D; g0 += span) {
		double ss = 0.0;
		for (int64_t i = g0; i < g0 + span; i++)
			ss += (double)y[i] * y[i];
		const float scale = (float)(1.0 / sqrt(ss / (double)span + (double)d->eps));
		for (int64_t i = g0; i < g0 + span; i++)
			y[i] = (y[i] * scale) * w->norm[i];
	}
}
