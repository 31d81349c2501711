/* cpu_moe: the CPU backend's mixture-of-experts FFN (model.h's routing), for the layers of a
 * model with hp.n_expert > 0.
 *
 * For n_tok token rows of FFN-normed input: the router logits (one matmul over all rows),
 * moe_route per token, then for each expert the rows routed to it gathered (in token
 * order) into one matmul through the backend's own quantized / f16 / bf16 / f32 paths on
 * model_expert views: gate and up, SiLU(gate) * up, down (gpt-oss, hp.moe_bias and
 * hp.swiglu_oai: the router's bias added to its logits, each expert's biases to its gate,
 * up and down outputs, and the clamped SwiGLU instead of SiLU; glm4moe, hp.n_expert_shared:
 * moe_route_sigmoid with the layer's exp_probs_b, and the shared expert's SwiGLU of every
 * row added to the routed sum; qwen35moe, qwen2moe, hp.shexp_gate: that SwiGLU times
 * sigmoid(gate_inp_shexp x) first, one gate a row). Each row's result lands in its
 * (token, slot) place, and a token's output is the sum over its slots in slot order of
 * weight * expert output. The backend's matmuls compute every (row, feature) dot product
 * in a fixed order whatever the other rows (backend_cpu.c), so which tokens share an
 * expert's matmul never changes a token's bits: the FFN is batch invariant.
 *
 * The matmuls are the backend's (threaded, with its activation quantization), reached
 * through struct cpu_moe_mm so that this module owns only routing, gathering and sums.
 */
#ifndef BG_CPU_MOE_H
#define BG_CPU_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/backend_cpu.h"
#include "model/model.h"
#include "status.h"

/* y_i = x_i W_i^T for i < n (n <= 2) over n_tok rows, rows of y_i ldy[i] apart; with
 * glu_u (n == 1) x[0] (writable, [n_tok][w->ne0] like glu_u) first becomes
 * SiLU(x[0]) * glu_u (GELU for gemma4's experts, model.h's gelu). kind: the profile's
 * bucket. */
struct cpu_moe_mm {
	void (*run)(void *ctx, enum backend_cpu_mm kind, int n,
		    const struct model_weight *const *w, const float *const *x, float *const *y,
		    const int64_t *ldy, int32_t n_tok, const float *glu_u);
	void *ctx;
};

struct cpu_moe;

/* Scratch for the model's experts (hp->n_expert > 0), none for tokens yet. NULL when out
 * of memory. Layers without a router (glm4moe's leading dense layers) do not come here. */
struct cpu_moe *cpu_moe_create(const struct model_hparams *hp);
void cpu_moe_destroy(struct cpu_moe *mo); /* NULL-safe */

/* Makes room for n_tok token rows. On failure (BG_ERR_NOMEM) the room is as before. */
enum bg_status cpu_moe_reserve(struct cpu_moe *mo, int32_t n_tok, struct bg_err *err);

/* Bytes of scratch held (the backend's memory report). */
size_t cpu_moe_bytes(const struct cpu_moe *mo);

/* step35's clamped SwiGLU (model_layer.clamp_exp / clamp_shexp; limit > 0), as
 * llama.cpp's build_ffn / build_moe_ffn compute it with ggml ops, in fp32 over n values:
 * g[i] = min(silu(g[i]), limit) * max(-limit, min(u[i], limit)), silu(v) = v / (1 + e^-v)
 * (ggml_silu_f32). */
void cpu_swiglu_clamp(float *g, const float *u, int64_t n, float limit);

/* out[t] = the MoE FFN of xb[t] for t < n_tok (reserved), with layer L's router and
 * experts. xb: [n_tok][n_embd]; out: [n_tok][n_embd], overwritten after xb's last read, so
 * out may be xb. */
void cpu_moe_ffn(struct cpu_moe *mo, const struct model_layer *L, const float *xb,
		 int32_t n_tok, float *out, const struct cpu_moe_mm *mm);

/* cpu_moe_ffn with gemma4's two differences (model.h's gemma4_moe): the router reads xr
 * ([n_tok][n_embd]) instead of xb when xr is not NULL, and expert e's down output is
 * multiplied by down_scale[e] before its routing weight when down_scale is not NULL. The
 * gate's activation is the one mm's glu applies (gemma4: GELU). */
void cpu_moe_ffn_ex(struct cpu_moe *mo, const struct model_layer *L, const float *xb,
		    const float *xr, const float *down_scale, int32_t n_tok, float *out,
		    const struct cpu_moe_mm *mm);

#endif
