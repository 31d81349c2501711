/* cpu_ssm: a Mamba2 block's sequential part on the CPU (model.h's ssm_* fields, llama.cpp's
 * build_mamba2_layer with ggml-cpu's ssm_conv and ssm_scan), as pure functions over one
 * sequence's tokens and its recurrent state.
 *
 * The caller projects the block's input with ssm_in into rows [z (D) | xBC (C) | dt (H)]
 * and applies ssm_out after cpu_ssm_gate_norm. The state of a layer (model_state_floats)
 * is the conv state, the last d_conv - 1 xBC rows (C values each, oldest first), then S
 * (H heads x P x N). Every value of one (sequence, channel) or (sequence, head) is
 * computed by one call, in token order, whatever else the batch holds: the results do
 * not depend on the batch (batch invariance).
 */
#ifndef BG_CPU_SSM_H
#define BG_CPU_SSM_H

#include <stdint.h>

struct cpu_ssm_dims {
	int64_t d_conv; /* taps */
	int64_t D;	/* inner size: H heads of P = D / H */
	int64_t H;
	int64_t G; /* groups: head h reads B and C of group h / (H / G) */
	int64_t N; /* state size */
	float eps; /* the grouped RMS norm's */
};

/* One layer's small f32 weights. */
struct cpu_ssm_w {
	const float *conv_w; /* [C][d_conv], tap 0 the oldest */
	const float *conv_b; /* [C] */
	const float *dt_b;   /* [H] */
	const float *a;	     /* [H], A (negative) */
	const float *d;	     /* [H], the skip */
	const float *norm;   /* [D], or NULL: no norm (falcon-h1 without ssm_norm) */
};

/* C = D + 2 G N: the xBC width */
static inline int64_t cpu_ssm_conv_dim(const struct cpu_ssm_dims *d)
{
	return d->D + 2 * d->G * d->N;
}

/* Channels [c0, c1) of one sequence's n tokens: out[j][i] = silu(conv_b[i] + sum over k of
 * row(j - d_conv + 1 + k)[i] * conv_w[i][k]), the sum in fp32 from 0 in tap order, where
 * row(r) is in[r * ld + i] for r >= 0 and the conv state's row d_conv - 1 + r before.
 * Then the conv state's rows of those channels become the last d_conv - 1 rows. */
void cpu_ssm_conv(const struct cpu_ssm_dims *d, const struct cpu_ssm_w *w, float *conv_state,
		  const float *in, int64_t ld, int32_t n, float *out, int64_t ldo, int64_t c0,
		  int64_t c1);

/* Head h of one sequence's n tokens, S its [P][N] state: per token, with x, B, C the conv
 * output row's parts (xbc + j * ldx), dt = softplus(dt_raw[j * ldt + h] + dt_b[h]),
 * S = S * expf(dt A[h]) + B (x dt); y[j * ldy + h P + p] = sum over n of S[p][n] C[n]
 * (fp32, in order) + x[p] * D[h]. */
void cpu_ssm_scan_head(const struct cpu_ssm_dims *d, const struct cpu_ssm_w *w, int64_t h, float *S,
		       const float *xbc, int64_t ldx, const float *dt_raw, int64_t ldt, int32_t n,
		       float *y, int64_t ldy);

/* One token's y (D values) in place: y * silu(z), then (unless w->norm is NULL)
 * RMS-normalized in G slices of D / G (sum of squares in double) times norm. */
void cpu_ssm_gate_norm(const struct cpu_ssm_dims *d, const struct cpu_ssm_w *w, const float *z,
		       float *y);

#endif
