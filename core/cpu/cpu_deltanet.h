/* cpu_deltanet: the math of qwen35's gated-delta-net layer on the CPU (model.h's gdn_*), as
 * pure functions over one sequence's tokens and its recurrent state.
 *
 * The backend projects the tokens (u = gdn_qkv n, z, beta, alpha: its matmuls), then calls,
 * per sequence of the batch, in this order:
 *   cpu_gdn_conv     the causal depthwise conv plus SiLU over a range of channels, which
 *                    also moves the conv state forward;
 *   cpu_gdn_qk_norm  per token, the L2 norm of each Q and K head (in place);
 *   cpu_gdn_recur    per V head, the delta rule over the tokens in order (the matrix state);
 *   cpu_gdn_out_norm per token, the gated RMS norm of each V head's output (in place).
 * Everything a token computes depends on its own rows and the state left by the tokens
 * before it in its sequence, in a fixed order of operations: the results do not depend on
 * how the sequence was split into forwards or which other sequences share the batch.
 *
 * State layout (model_state_floats' values of one layer, fp32): conv part [CD][conv - 1]
 * (per channel, oldest first), then per V head the matrix M [gdn_d][gdn_d] with M[j][i] =
 * S[i][j] (row j is S's column j: v index j, k index i), as ggml's gated_delta_net keeps it.
 */
#ifndef BG_CPU_DELTANET_H
#define BG_CPU_DELTANET_H

#include <stdint.h>

#include "model/model.h"

/* The sizes of the layer: K width KD = nk d, V width VD = nv d, conv channels CD = 2 KD + VD */
int64_t cpu_gdn_conv_dim(const struct model_hparams *hp);
int64_t cpu_gdn_v_dim(const struct model_hparams *hp);
/* The matrix state's offset in a layer's state (floats): (conv - 1) CD */
int64_t cpu_gdn_mat_offset(const struct model_hparams *hp);

/* Channels [c0, c1) of n tokens: u rows (ldu apart, CD wide, [q | k | v]), w the taps [CD][conv]
 * (f32), state the layer's state (its conv part is read and moved forward); out[t][i] =
 * silu(sum over k of win[t + k][i] * w[i][k]), win the state rows then u's, the sum in fp32
 * from 0 in tap order (ggml_ssm_conv's). */
void cpu_gdn_conv(const struct model_hparams *hp, float *state, const float *w, const float *u,
		  int64_t ldu, int32_t n, float *out, int64_t ldo, int64_t c0, int64_t c1);

/* One token's conv output row (CD): each Q and K head (d values) times 1 / sqrt(sum x^2 +
 * rms_eps) (llama.cpp's build_gdn_l2_norm: rms_norm with eps / d, then times 1 / sqrt(d)) */
void cpu_gdn_qk_norm(const struct model_hparams *hp, float *row);

/* V head h over n tokens: c the normed conv rows (ldc apart), beta_raw and alpha_raw the
 * projections' rows (ldb apart, nv wide), dt and a the layer's ssm_dt.bias and ssm_a; the
 * state's matrix of head h moved forward; o[t * ldo + h d + j] the head's output. */
void cpu_gdn_recur(const struct model_hparams *hp, float *state, const float *c, int64_t ldc,
		   const float *beta_raw, const float *alpha_raw, int64_t ldb, const float *dt,
		   const float *a, int64_t h, int32_t n, float *o, int64_t ldo);

/* One token's output row (VD) in place: each V head rmsnorm(o_h) * norm_w * silu(z_h) */
void cpu_gdn_out_norm(const struct model_hparams *hp, float *o, const float *z,
		      const float *norm_w);

#endif
