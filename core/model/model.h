/* model: a dense decoder-only transformer described by a GGUF file.
 *
 * Architectures (core/model/arch.h): `llama` (with Llama 3.1's rope_freqs and linear /
 * yarn rope scaling), `qwen2` (Q/K/V biases, NeoX RoPE), `qwen3` (per-head Q/K norms),
 * `gemma2` and `gemma3` (embedding scale, GELU, post-norms, soft-capping, sliding-window
 * layers), `gemma4` (gemma3's with windowed layers of their own geometry, V norm, V = K,
 * layer output scales: model_hparams' gemma4 part), `olmo2` (post-norms only, whole-row Q/K norms), `phi3` (fused attn_qkv and
 * gate|up ffn_up, LongRoPE factors), and the
 * mixtures of experts `qwen3moe` and `llama` with expert_count (Mixtral): stacked
 * ffn_{gate,up,down}_exps (n_expert matrices each) and a router ffn_gate_inp, and `gpt-oss`
 * (experts with biases, attention sinks, O bias; its FFN input norm, post_attention_norm in
 * the file, is presented as ffn_norm), and `granite` (llama with embedding, attention,
 * residual and logit scales from the file), `mistral3` (llama with llama 4's attention
 * temperature), `smollm3` (llama without RoPE in every 4th layer), `seed_oss` (NeoX
 * llama with optional Q/K/V biases, its pre-FFN norm named post_attention_norm, presented
 * as ffn_norm), `apertus` (per-head Q/K norms, a non-gated xIELU FFN), `glm4` (partial
 * interleaved RoPE, post-norms, fused gate|up, NextN layers skipped), `glm4moe`
 * (sigmoid-routed experts with a selection bias and a shared expert, leading dense
 * layers), `deepseek2` (Multi-head Latent Attention, grouped softmax / sigmoid routing,
 * shared experts: model_hparams' mla and moe_grouped), `command-r` and `cohere2`
 * (LayerNorms, parallel attention and FFN, a logit scale, Command R+'s per-head Q/K norms;
 * cohere2's RoPE on the windowed layers only: model_hparams' cohere part), `minimax-m2`
 * (whole-row Q/K norms, partial NeoX RoPE, sigmoid-routed experts with a selection bias:
 * model_hparams' moe_sel_bias), `lfm2`, `lfm2moe` (short-conv layers), `qwen35`
 * (gated-delta-net layers, output-gated attention: model_hparams' gdn_*), `granitehybrid`
 * and `nemotron_h` (Mamba2 layers among attention ones: model_hparams' ssm_*). A fused tensor
 * (attn_qkv, phi3's ffn_up) is presented as separate weights that are row views into it,
 * so backends see one layout. A llama file with any bias tensor is refused.
 *
 * model_load reads the hyper-parameters from the `<arch>.*` metadata, finds every tensor
 * by its GGUF name, and checks each shape against the hyper-parameters; a missing or
 * misshapen tensor is BG_ERR_FORMAT with a message naming the tensor. Weights are not
 * copied: struct model_weight points into the GGUF mapping, which the model owns.
 * When output.weight is absent the output projection is tied to token_embd.weight.
 *
 * Layout: a 2-D weight of GGUF shape (ne0, ne1) is ne1 rows of ne0 elements, row-major;
 * a matrix-vector product y = W x has x of length ne0 and y of length ne1.
 */
#ifndef BG_MODEL_H
#define BG_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/gguf.h"
#include "status.h"

/* lfm2: the most conv taps (shortconv.l_cache; 3 released) */
#define MODEL_CONV_L_MAX 8u

struct model_hparams {
	uint32_t n_vocab;
	uint32_t n_ctx_train; /* <arch>.context_length: the max sequence length */
	uint32_t n_embd;
	uint32_t n_layer;
	uint32_t n_head;
	uint32_t n_head_kv; /* == n_head without GQA */
	uint32_t head_dim;  /* n_embd / n_head */
	uint32_t n_ff;	   /* the FFN's width; gemma4 may list one per layer (the
			    * converter's double-wide MLP): then the largest, and each
			    * layer's is its w_gate.ne1 */
	uint32_t rope_dim; /* rotated dimensions per head (<= head_dim), default head_dim */
	float rope_base;   /* default 10000 */
	float rms_eps;	   /* default 1e-5 */
	bool rope_neox;	   /* false for llama: rotate interleaved pairs (x[2i], x[2i+1]);
			    * true for qwen2: rotate (x[i], x[i + rope_dim / 2]) */
	bool qkv_bias;	   /* qwen2: Q, K and V projections have a bias */

	/* The architecture's features (core/model/arch.h says which has which). head_dim
	 * is <arch>.attention.key_length when present (qwen3, gemma: n_head * head_dim may
	 * differ from n_embd). Defaults give the plain llama graph. */
	bool qk_norm;	     /* RMS norm of each Q and K head (layer attn_q_norm / attn_k_norm)
			      * after the projection, before RoPE */
	bool qk_norm_full;   /* with qk_norm (olmo2): one RMS norm over each token's whole Q row
			      * (n_head * head_dim values, q_norm that wide) and one over its
			      * whole K row (n_head_kv * head_dim, k_norm), instead of per head */
	bool no_pre_norms;   /* olmo2: no attn_norm / ffn_norm; QKV and the FFN read the residual
			      * stream as it is (layer attn_norm, ffn_norm zero: data NULL, ne0 0) */
	bool post_norms;     /* RMS norm of the attention and FFN outputs before the residual add
			      * (layer attn_post_norm / ffn_post_norm) */
	bool gelu;	     /* FFN gate activation: GELU, tanh form; else SiLU */
	float embd_scale;    /* embeddings are multiplied by this: 1, or sqrt(n_embd) (gemma) */
	float attn_scale;    /* q.k is multiplied by this: 1/sqrt(head_dim) unless the arch says */
	float attn_softcap;  /* > 0: scores become cap * tanh(score / cap) (gemma2) */
	float final_softcap; /* > 0: logits become cap * tanh(logit / cap) (gemma2) */
	uint32_t n_swa;	     /* > 0: a layer with model_layer.swa attends to the last n_swa
			      * positions only (itself included) */
	uint32_t n_swa_file; /* the window the file states, applied or not (phi3: not) */
	uint32_t swa_pattern; /* with n_swa: layer l is windowed iff l % p < p - 1 (p = 0: all);
			       * a file's per-layer bool list is read as the p it repeats */

	/* RoPE beyond the base frequency (core/model/arch.c computes the angles) */
	float rope_freq_scale;	   /* 1 / rope.scaling.factor (linear, yarn), else 1 */
	bool rope_yarn;		   /* rope.scaling.type yarn */
	float rope_attn_factor;	   /* rope.scaling.attn_factor, default 1 */
	uint32_t n_ctx_orig;	   /* rope.scaling.original_context_length, default n_ctx_train */
	float rope_base_swa;	   /* base of the windowed layers (== rope_base unless gemma3) */
	float rope_freq_scale_swa; /* freq_scale of the windowed layers */
	float rope_attn_factor_swa; /* their rope_attn_factor (== it unless olmo2 / OLMo 3: 1) */
	/* Multi-section RoPE (arch.h's mrope: qwen2vl, qwen3vl, qwen3vlmoe, qwen35): 0 = none,
	 * 1 = M-RoPE, 2 = IMROPE; rope.dimension_sections (section widths in pairs, each >= 0,
	 * the first three not all 0, their sum <= head_dim, as ggml asserts). For text it is
	 * NeoX RoPE with the pairs of arch_mrope_pair_turns() false not turned (freq 0). */
	uint8_t rope_mrope;
	int32_t rope_sections[4];
	char rope_factors[24];	   /* which frequency-factor tensor the model uses, "" if none:
				    * "rope_freqs" (Llama 3.1), "rope_factors_long" or
				    * "rope_factors_short" (LongRoPE: long when n_ctx_train >
				    * n_ctx_orig, as llama.cpp does at its default context) */

	/* Mixture of experts (n_expert > 0: `qwen3moe`, and `llama` files with expert_count,
	 * i.e. Mixtral). Every layer's FFN is then a routed sum of SwiGLU experts, as
	 * llama.cpp's build_moe_ffn computes it for these architectures: for each token t,
	 *   logits = ffn_gate_inp x_t (x_t the FFN-normed input; n_expert values, f32),
	 *   p = softmax(logits), the n_expert_used largest p chosen (ties: the lower expert
	 *   index first), slot order = descending p,
	 *   w_j = p of slot j, divided by the sum of the chosen p when expert_weights_norm,
	 *   ffn_t = sum over slots j in slot order of w_j * down_e(silu(gate_e x_t) * up_e x_t)
	 *   (e = the slot's expert; its matrices model_expert(&L->gate_exps, e), ...).
	 * n_ff is unused then; the dense w_gate / w_up / w_down are zero. */
	uint32_t n_expert;	  /* <arch>.expert_count; 0 = dense FFN */
	uint32_t n_expert_used;	  /* <arch>.expert_used_count: experts a token, 1..n_expert */
	uint32_t n_ff_exp;	  /* an expert's FFN width (qwen3moe:
				   * expert_feed_forward_length; llama: feed_forward_length) */
	bool expert_weights_norm; /* renormalize the chosen weights to sum 1 (both: true) */

	/* gpt-oss (`gpt-oss`, llama.cpp's openai-moe graph), beyond the above. Its gating
	 * (llama.cpp's SOFTMAX_WEIGHT: the k largest logits, then a softmax over those k) is
	 * the routing above with expert_weights_norm: the same choice and, up to rounding,
	 * the same weights. */
	bool attn_sinks;    /* layer attn_sinks (n_head f32): head h's softmax over its keys
			     * has one more logit, sinks[h], in its denominator and no value */
	bool attn_out_bias; /* layer bo (attn_output.bias, n_embd) added after the O projection */
	bool moe_bias;	    /* router and experts have biases: the router's added to its logits,
			     * each expert's to its gate, up and down outputs (layer *_b) */
	bool swiglu_oai;    /* the experts' activation is gpt-oss's clamped SwiGLU instead of
			     * silu(gate) * up: with g = min(gate, swiglu_limit), u = max(-limit,
			     * min(up, limit)): g * sigmoid(swiglu_alpha * g) * (u + 1) */
	float swiglu_alpha; /* 1.702 */
	float swiglu_limit; /* 7 */

	/* granite (llama.cpp's granite graph), beyond embd_scale (<arch>.embedding_scale) and
	 * attn_scale (<arch>.attention.scale), which it sets from the file when non-zero: */
	float residual_scale; /* the attention branch's output (after the O projection) and the
			       * FFN's (after the down projection) are each multiplied by this
			       * (fp32) before their residual add; 1 = no scaling (the other
			       * architectures; granite's residual_scale absent or 0) */
	float logit_scale;    /* the logits are multiplied by this (fp32; llama.cpp's ggml_scale):
			       * granite's is 1 / its file value rounded to fp32, command-r's
			       * and cohere2's the file value; 1 = none */

	/* mistral3's attention temperature (llama 4's tuning; <arch>.attention.temperature_scale):
	 * when attn_temp_scale != 0, every query head of the token at position pos is
	 * multiplied, after RoPE, by arch_attn_temp(hp, pos) = (float)(log(floor(((float)pos +
	 * attn_temp_offset) / attn_temp_floor) + 1) * attn_temp_scale + 1) (core/model/arch.h;
	 * keys are not scaled). 0 = none (every other architecture). */
	float attn_temp_scale;
	float attn_temp_offset;	  /* added to the position first (llama.cpp's f_attn_temp_offset) */
	uint32_t attn_temp_floor; /* > 0 when attn_temp_scale != 0: n_ctx_orig, as llama.cpp */

	/* apertus: the FFN is not gated: ffn = down(xielu_l(up x)) (no w_gate: zero), with
	 * layer l's model_layer.xielu = {an, ap, beta, eps} as ggml_xielu's operator holds them:
	 *   xielu(v) = ap * v * v + beta * v                        for v > 0,
	 *            = (expm1f(fminf(v, eps)) - v) * an + beta * v   otherwise,
	 * in fp32, where ap = softplus(xielu.alpha_p[l]) and an = beta + softplus(
	 * xielu.alpha_n[l]) of the file's values (softplus(x) = x > 20 ? x : logf(1 +
	 * expf(x)), ggml_compute_softplus_f32), transformed once at load (model_xielu_params) */
	bool xielu;
	/* gemma4 (llama.cpp's gemma4 graph): the windowed layers have their own head size,
	 * K/V head count and rotated dimensions (model_head_dim, model_n_head_kv,
	 * model_rope_dim below read them; 0 = the global value, as every other architecture);
	 * V is RMS-normalized per head without a weight after its projection (v_norm); the
	 * rope_factors apply to the global layers only (rope_factors_global: gemma4's
	 * proportional RoPE, factors 1e30 for its unrotated pairs); each layer's output (the
	 * residual stream after the FFN's add) is multiplied by model_layer.out_scale when
	 * out_scale (the file's layer_output_scale tensors). attn_scale is 1 there. */
	uint32_t head_dim_swa;	/* attention.key_length_swa */
	uint32_t n_head_kv_swa; /* the windowed layers' entries of a per-layer head_count_kv */
	uint32_t rope_dim_swa;	/* rope.dimension_count_swa */
	bool v_norm;
	bool rope_factors_global;
	bool out_scale;
	/* gemma4's edge sizes (E2B, E4B; llama.cpp's project_per_layer_inputs):
	 * n_embd_per_layer > 0: per-layer token embeddings. For each token, its row of
	 * model.pl_tok_embd (n_layer * n_embd_per_layer values) times sqrt(n_embd_per_layer),
	 * plus model.pl_model_proj times the scaled input embedding, times 1/sqrt(n_embd),
	 * RMS-normalized in slices of n_embd_per_layer with model.pl_proj_norm, the sum times
	 * 1/sqrt(2): slice l is layer l's input e_l. Layer l, after its FFN's residual add:
	 * x += rmsnorm(pl_proj (gelu(pl_inp_gate x) * e_l)) with pl_post_norm (before the
	 * output scale).
	 * n_layer_kv < n_layer: shared-KV layers (attention.shared_kv_layers): layers from
	 * n_layer_kv on compute no K/V and attend over layer model_layer.kv_src's cache
	 * (n_layer_kv - 2 for a windowed layer, n_layer_kv - 1 for a global one, as
	 * llama.cpp's layer_reuse_cb); only the first n_layer_kv layers have a KV cache. */
	uint32_t n_embd_per_layer;
	uint32_t n_layer_kv; /* == n_layer unless shared-KV layers */
	/* glm4: the NextN / MTP layers the file holds after the n_layer it runs
	 * (<arch>.nextn_predict_layers; block_count = n_layer + n_layer_nextn). They are not
	 * computed (as llama.cpp's graph skips them) and their tensors are not read. 0
	 * elsewhere. */
	uint32_t n_layer_nextn;
	/* glm4moe (llama.cpp's glm4moe graph, build_moe_ffn with exp_probs_b): the routing
	 * above with, when expert_gating_sigmoid, p = sigmoid(logits) (fp32, 1 / (1 + e^-x))
	 * instead of the softmax, the k chosen by the largest p + exp_probs_b[e] (the layer's
	 * selection bias; the weights stay the unbiased p), the norm's sum clamped below at
	 * 6.103515625e-5, then every weight times expert_weights_scale (1 = none); the FFN is
	 * the routed sum plus a shared expert's SwiGLU (gate_shexp, up_shexp, down_shexp,
	 * n_ff_exp * n_expert_shared wide) of the same input; the first n_layer_dense_lead
	 * layers have a dense FFN (w_gate, w_up, w_down, n_ff wide) and no router. */
	bool expert_gating_sigmoid;
	float expert_weights_scale;
	/* the MoE layers carry the selection bias exp_probs_b (model_layer; glm4moe and
	 * minimax-m2: required in each, deepseek2: when the file has one, else data NULL).
	 * minimax-m2 is glm4moe's routing with expert_weights_norm and no shared expert, dense
	 * layers or scale. */
	bool moe_sel_bias;
	uint32_t n_expert_shared;
	uint32_t n_layer_dense_lead;
	/* deepseek2 (llama.cpp's deepseek2 graph; bailingmoe2's the same): the MoE layers route
	 * with moe_route_grouped (core/model/moe.h): softmax gating, or sigmoid when
	 * expert_gating_sigmoid; the selection bias exp_probs_b when the layer has one (data !=
	 * NULL); with
	 * n_expert_groups > 1 only the n_group_used groups of experts (n_expert /
	 * n_expert_groups consecutive ones each) with the largest sums of their two largest
	 * biased values compete; the sum clamped at 6.103515625e-5 when expert_weights_norm;
	 * expert_weights_scale; the shared experts as glm4moe's (n_expert_shared >= 1). */
	bool moe_grouped;
	uint32_t n_expert_groups; /* <arch>.expert_group_count; 0 or 1: no groups */
	uint32_t n_group_used;	  /* <arch>.expert_group_used_count, < n_expert_groups */
	/* deepseek2's Multi-head Latent Attention, in llama.cpp's absorbed form (MQA over the
	 * compressed latent). For each token x (attn-normed):
	 *   q = wq_b rmsnorm(wq_a x, q_a_norm)   (n_lora_q > 0), or wq x (n_lora_q == 0),
	 *       per head [q_nope (mla_nope), q_pe (rope_dim)];
	 *   kv = wkv_a x = [c (n_lora_kv), k_pe (rope_dim)], c = rmsnorm(c, kv_a_norm),
	 *       k_pe rotated (interleaved pairs, one for all heads);
	 *   query of head h = [wk_b[h] q_nope (n_lora_kv), rope(q_pe)], key = [c, k_pe]: one
	 *       K/V head of head_dim = n_lora_kv + rope_dim (the cache row), the value the same
	 *       row (V = K as stored: the attention output's first n_lora_kv values are the
	 *       softmax-weighted c, the rest is unused);
	 *   o_h = wv_b[h] (its first n_lora_kv values) (mla_v_head), attention output = wo
	 *       [o_0 .. o_{n_head-1}].
	 * attn_scale = mscale^2 / sqrt(mla_nope + rope_dim), mscale as llama.cpp derives it
	 * from YaRN and rope_yarn_log_mul (arch_mla_kq_scale). */
	bool mla;
	uint32_t n_lora_q;	 /* attention.q_lora_rank; 0: a plain wq (DeepSeek-V2-Lite) */
	uint32_t n_lora_kv;	 /* attention.kv_lora_rank */
	uint32_t mla_nope;	 /* attention.key_length_mla - rope_dim */
	uint32_t mla_v_head;	 /* attention.value_length_mla */
	float rope_yarn_log_mul; /* rope.scaling.yarn_log_multiplier / 0.1 (llama.cpp's
				  * mscale_all_dim), 0 when absent */
	/* command-r, cohere2 (llama.cpp's graphs; core/model/arch.h's cohere):
	 * layer_norm: attn_norm, output_norm and the Q/K norms are LayerNorms, as ggml_norm
	 * then the weight: y = (x - mean) * (1 / sqrt(var + rms_eps)) * w, mean and var (of
	 * x - mean) over the row, no bias; rms_eps is then attention.layer_norm_epsilon.
	 * parallel: attention and the FFN both read n = attn_norm(x) and the layer's output is
	 * (x + ffn(n)) + attn(n), in that order (no ffn_norm: zero).
	 * qk_norm_heads (with qk_norm): q_norm is (head_dim, n_head) and k_norm (head_dim,
	 * n_head_kv), one weight row per head (Command R+). */
	bool layer_norm;
	bool parallel;
	bool qk_norm_heads;
	/* lfm2 (llama.cpp's lfm2 graph): conv_l > 0 (shortconv.l_cache, 2..MODEL_CONV_L_MAX)
	 * makes the layers with model_layer.conv short-convolution blocks in place of
	 * attention. For each token at position t of a sequence, with n the attn-normed input:
	 *   [B | C | x] = conv_in n (n_embd each), bx_t = B * x (fp32, elementwise),
	 *   o_t[i] = sum over k = 0..conv_l-1, in that order, of bx_{t-conv_l+1+k}[i] *
	 *            conv_w[i][k] (fp32; bx of positions < 0 is 0),
	 *   y_t = C * o_t, branch output wo y_t (out_proj), added to the residual.
	 * The recurrent state (the last conv_l - 1 rows of bx) is not kept apart: bx_t is
	 * the layer's KV cache row at position t (model_kv_dim_max: its first kv_dim_max
	 * values in the K slot, the rest in the V slot), so the conv reads rows t-1, t-2
	 * through the block table like attention reads K/V, and prefix reuse, forks and
	 * recompute see the state as a function of the prefix. n_head_kv is the attention
	 * layers' (the nonzero entries of the per-layer head_count_kv list). */
	uint32_t conv_l;
	/* qwen35 (llama.cpp's qwen35 graph, delta-net-base.cpp): gdn_conv > 0 (ssm.conv_kernel,
	 * 2..MODEL_CONV_L_MAX) makes the layers with model_layer.gdn gated delta nets in place
	 * of attention, with gdn_nk K heads (ssm.group_count) and gdn_nv V heads
	 * (ssm.time_step_rank, a multiple of gdn_nk), all of gdn_d (ssm.state_size; ssm.inner_size
	 * must be gdn_nv * gdn_d). Per token of a sequence, n the attn-normed input, KD = gdn_nk
	 * gdn_d, VD = gdn_nv gdn_d, CD = 2 KD + VD:
	 *   u = gdn_qkv n (CD: [q | k | v]), z = gdn_z n (VD), beta_h = sigmoid((gdn_beta n)_h),
	 *   g_h = softplus((gdn_alpha n)_h + dt_h) * a_h (softplus(x) = x above 20, else
	 *   log(1 + e^x); a = the file's ssm_a, -exp(A_log));
	 *   c_t[i] = silu(sum over k = 0..gdn_conv-1, in order, of u_{t-gdn_conv+1+k}[i] *
	 *            conv_w[i][k]) (u of positions < 0 is 0: the conv state);
	 *   q, k per K head of c_t L2-normed: x / sqrt(sum x^2 + rms_eps) (build_gdn_l2_norm);
	 *   V head h reads K head h % gdn_nk (ggml_repeat's tiling, as the fused op's);
	 *   S_h (gdn_d x gdn_d, zero at position 0) = S_h e^{g_h}; d = (v_h - S_h^T k) beta_h;
	 *   S_h += k d^T; o_h = S_h^T q / sqrt(gdn_d);
	 *   y_h = rmsnorm(o_h, gdn_norm (gdn_d), rms_eps) * silu(z_h); wo (ssm_out) y.
	 * The state (the last gdn_conv - 1 rows of u, and S per V head) is per sequence
	 * (model_state_floats, backend_seq.state_slot). */
	uint32_t gdn_conv, gdn_d, gdn_nk, gdn_nv;
	uint32_t gdn_every; /* full_attention_interval: layer l attends when (l + 1) % it == 0 */
	/* qwen3next (added for it): V head h reads K head h / (gdn_nv / gdn_nk) (llama.cpp's
	 * repeat-interleave) instead of h % gdn_nk */
	bool gdn_k_grouped;
	/* qwen35's full-attention layers: wq is (n_embd, 2 n_head head_dim), per head [q |
	 * gate] (head_dim each); the attention output of head h times sigmoid(gate_h) before
	 * wo */
	bool attn_out_gate;
	/* granitehybrid, nemotron_h (llama.cpp's build_mamba2_layer; arch.h): ssm_d_conv > 0
	 * makes the layers with model_layer.ssm Mamba2 blocks in place of attention. With D =
	 * ssm_d_inner (granitehybrid: 2 n_embd), H = ssm_n_head heads of P = D / H, G = ssm_n_group groups of N =
	 * ssm_d_state, C = D + 2 G N, for each token of a sequence, n the attn-normed input:
	 *   [z (D) | xBC (C) | dt (H)] = ssm_in n;
	 *   xBC' = silu(conv_b + sum over k = 0..ssm_d_conv-1, oldest first, of
	 *          xBC_{t-d_conv+1+k} * conv_w[.][k]) (fp32; rows before position 0 are 0);
	 *   [x (D) | B (G N) | C (G N)] = xBC'; head h reads group g = h / (H / G);
	 *   dt_h = softplus(dt_h + dt_b[h]) (x > 20 ? x : logf(1 + expf(x)));
	 *   S_h[p][n] = S_h[p][n] * expf(dt_h * A[h]) + B_g[n] * (x_h[p] * dt_h);
	 *   y_h[p] = sum over n of S_h[p][n] * C_g[n] + D_skip[h] * x_h[p];
	 *   y = y * silu(z); y RMS-normalized in G slices of D / G with ssm_norm; wo y.
	 * The recurrent state of a layer (model_state_floats): the last d_conv - 1 rows of xBC
	 * (C each, oldest first), then S (H x P x N), in backend_seq.state_slot. */
	uint32_t ssm_d_conv, ssm_d_inner, ssm_d_state, ssm_n_head, ssm_n_group;
	/* falcon-h1 (llama.cpp's falcon-h1 graph; added for it): EVERY layer runs the attention
	 * and a Mamba2 block (the ssm_* weights, its output projection in model_layer.ssm_out)
	 * side by side on the same attn-normed input n, and adds both to the residual:
	 *   x = (attn_out(n) + ssm_out y(n)) + x   (attn_out after wo; the sum first),
	 * then ffn_norm and the SwiGLU FFN as llama's. ssm_d_inner is any multiple of the
	 * heads (not 2 n_embd); a layer's ssm_norm and ssm_conv_b are optional (data NULL: no
	 * grouped norm, y = y * silu(z) alone; a conv bias of 0). Every layer has a KV cache
	 * AND a recurrent state (model_state_floats); model_layer.ssm stays false (the layer
	 * attends). */
	bool ssm_parallel;
	/* no layer rotates Q and K (granitehybrid's rope.scaling.finetuned false, nemotron_h) */
	bool rope_none;
	/* granitehybrid's shared expert: its own width (expert_shared_feed_forward_length),
	 * with n_expert_shared 1; 0 elsewhere (glm4moe's is n_ff_exp * n_expert_shared):
	 * model_ff_shexp */
	uint32_t n_ff_shexp;
	/* nemotron_h: the FFN is down(relu(up x)^2) (fp32: r = max(v, 0), r * r), no gate;
	 * nemotron_h_moe: its routed experts and shared expert likewise (up, down: no
	 * gate_exps, gate_shexp), routed by sigmoid with exp_probs_b (moe_sel_bias) */
	bool relu2;
	/* qwen35moe, qwen2moe: the shared expert (n_expert_shared 1, n_ff_shexp wide) is
	 * gated: its output row for token t is multiplied by sigmoid(ffn_gate_inp_shexp x_t)
	 * (fp32 1 / (1 + e^-v), v the dot product with the same FFN-normed x_t) before it is
	 * added to the routed sum, routed + gated shared (model_layer.gate_inp_shexp) */
	bool shexp_gate;
	/* step35 (arch.h): the windowed layers' query heads (model_n_head; 0 = n_head, as
	 * every other architecture), and the window list's phase: with n_swa, layer l is
	 * windowed iff (l + swa_phase) % swa_pattern < swa_pattern - 1 (Step-3.5's list starts
	 * with a global layer); 0 elsewhere */
	uint32_t n_head_swa;
	uint32_t swa_phase;
	/* llama4 (arch.h): swa_chunked: a windowed layer's query at position p sees keys
	 * [floor(p / n_swa) * n_swa, p] (llama.cpp's LLAMA_SWA_TYPE_CHUNKED) instead of the
	 * last n_swa positions; attn_temp_nope: attn_temp_* multiplies Q on the no_rope layers
	 * only (and with no RoPE there, nothing else changes); qk_norm_after_rope (below) on
	 * the other layers unless 128 experts; n_moe_step (below) the MoE layers (the others
	 * dense, n_ff wide); moe_weight_in: the k largest router logits choose (ties: the lower
	 * index), w = sigmoid(logit), each chosen expert computes down(silu(gate (w x)) *
	 * up (w x)) and the outputs are summed in slot order unweighted (llama.cpp's
	 * weight_before_ffn), plus the ungated shared expert. */
	bool swa_chunked;
	bool attn_temp_nope;
	bool moe_weight_in;
	/* gemma4 with experts (Gemma 4 26B-A4B; llama.cpp's gemma4 graph, is_moe_layer): a
	 * layer with a router (model_layer_moe) runs its dense GELU FFN (w_gate, w_up, w_down)
	 * on ffn_norm(a) AND the experts on ffn_pre_norm_2(a), a the residual stream after the
	 * attention's add, and its FFN output is
	 *   rmsnorm(dense, ffn_post_norm_1) + rmsnorm(experts, ffn_post_norm_2)
	 * before the layer's ffn_post_norm and residual add. The router reads
	 *   r = rmsnorm(a) (no weight) * (1 / sqrt(n_embd)) * gate_inp_s (elementwise),
	 * logits = ffn_gate_inp r; softmax, top k, weights renormalized (the routing above
	 * with expert_weights_norm); the experts are GELU-gated (gelu(gate) * up, as the dense
	 * FFN); expert e's down output is multiplied by down_exps_s[e] (the converter's
	 * per_expert_scale; 1 when the file has no ffn_down_exps.scale) before its weight.
	 * Layers without a router are gemma4's dense layers. */
	bool gemma4_moe;
	/* ernie4_5-moe (arch.h's ernie_moe), llama4: interleave_moe_layer_step; layer l has
	 * routed experts iff l >= n_layer_dense_lead and (l + 1) % n_moe_step == 0, else a
	 * dense FFN. 0 elsewhere: every layer from n_layer_dense_lead on. */
	uint32_t n_moe_step;
	/* hunyuan-dense, hunyuan-moe (arch.h's qk_norm_after_rope), llama4 unless 128 experts:
	 * each Q and K head is RMS-normalized (eps rms_eps) after RoPE (and after the attention
	 * temperature), on the layers with RoPE, instead of before RoPE; weighted by the
	 * layer's q_norm / k_norm when the model has them (qk_norm: hunyuan), else unweighted
	 * (llama4) */
	bool qk_norm_after_rope;
};

struct model_weight {
	enum gguf_dtype type;
	const void *data; /* into the GGUF mapping */
	uint64_t ne0;	  /* elements per row (input dimension) */
	uint64_t ne1;	  /* rows (output dimension); 1 for vectors */
	uint64_t ne2;	  /* stacked matrices (experts: GGUF ne2); 0 for a plain weight */
	uint64_t nb2;	  /* bytes from stacked matrix e to e + 1 (model_expert_stride); 0:
			   * ne1 rows, the matrices back to back. Nonzero for views into a
			   * fused tensor (qwen35moe's ffn_gate_up_exps: gate_exps at its
			   * start, up_exps n_ff_exp rows in, each a stride of 2 n_ff_exp rows) */
};

struct model_layer {
	struct model_weight attn_norm; /* (n_embd) f32; zero with hp.no_pre_norms */
	struct model_weight wq;	       /* (n_embd, n_head * head_dim) */
	struct model_weight wk;	       /* (n_embd, n_head_kv * head_dim) */
	struct model_weight wv;	       /* (n_embd, n_head_kv * head_dim) */
	struct model_weight wo;	       /* (n_head * head_dim, n_embd) */
	struct model_weight ffn_norm;  /* (n_embd) f32; zero with hp.no_pre_norms */
	struct model_weight w_gate;    /* (n_embd, n_ff) */
	struct model_weight w_up;      /* (n_embd, n_ff) */
	struct model_weight w_down;    /* (n_ff, n_embd) */

	/* qwen2's biases, added to the Q, K and V projections before RoPE */
	struct model_weight bq; /* (n_head * head_dim) f32, or data == NULL and ne0 == 0 when the
				   model has no QKV bias */
	struct model_weight bk; /* (n_head_kv * head_dim) likewise */
	struct model_weight bv; /* (n_head_kv * head_dim) likewise */

	/* hp.qk_norm: (head_dim) f32 each, with hp.qk_norm_full (n_head * head_dim) and
	 * (n_head_kv * head_dim), with hp.qk_norm_heads (head_dim, n_head) and (head_dim,
	 * n_head_kv); hp.post_norms: (n_embd) f32 each; else zero */
	struct model_weight q_norm, k_norm;
	struct model_weight attn_post_norm, ffn_post_norm;

	/* hp.n_expert > 0 (see model_hparams): the router and the stacked experts, ne2 =
	 * n_expert; else all zero */
	struct model_weight ffn_gate_inp; /* (n_embd, n_expert) */
	struct model_weight gate_exps;	  /* (n_embd, n_ff_exp) each */
	struct model_weight up_exps;	  /* (n_embd, n_ff_exp) each */
	struct model_weight down_exps;	  /* (n_ff_exp, n_embd) each */

	/* gpt-oss (see model_hparams), else zero; f32 vectors */
	struct model_weight attn_sinks;	    /* (n_head) */
	struct model_weight bo;		    /* (n_embd) */
	struct model_weight ffn_gate_inp_b; /* (n_expert) */
	struct model_weight gate_exps_b;    /* (n_ff_exp) each, ne2 = n_expert */
	struct model_weight up_exps_b;	    /* (n_ff_exp) each, ne2 = n_expert */
	struct model_weight down_exps_b;    /* (n_embd) each, ne2 = n_expert */
	/* glm4moe (see model_hparams), else zero: the selection bias (n_expert) f32 (also
	 * minimax-m2's, deepseek2's when the file has it: hp.moe_sel_bias), and the shared
	 * expert's (n_embd, FS), (n_embd, FS), (FS, n_embd), FS = n_ff_exp *
	 * n_expert_shared; a dense leading layer has none of the expert weights */
	struct model_weight exp_probs_b;
	struct model_weight gate_shexp, up_shexp, down_shexp;
	/* qwen35moe, qwen2moe (hp.shexp_gate): the shared expert's gate, (n_embd) (a row
	 * of one output; the converter's f32), else zero */
	struct model_weight gate_inp_shexp;
	/* gemma4 E2B/E4B (model_hparams' n_embd_per_layer): the per-layer input's gate
	 * (n_embd, n_embd_per_layer), projection (n_embd_per_layer, n_embd) and norm (n_embd,
	 * f32), or zero */
	struct model_weight pl_inp_gate, pl_proj, pl_post_norm;
	/* deepseek2 (hp.mla), else zero: wq_a (n_embd, n_lora_q), q_a_norm (n_lora_q) f32,
	 * wq_b (n_lora_q, n_head * (mla_nope + rope_dim)) when n_lora_q (else wq that wide);
	 * wkv_a (n_embd, n_lora_kv + rope_dim), kv_a_norm (n_lora_kv) f32; wk_b (mla_nope,
	 * n_lora_kv) and wv_b (n_lora_kv, mla_v_head), each stacked ne2 = n_head (model_expert
	 * gives head h's); wo is (n_head * mla_v_head, n_embd); wk, wv zero */
	struct model_weight wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm, wk_b, wv_b;
	/* lfm2's conv layers (conv below), else zero: in_proj (n_embd, 3 n_embd) and the
	 * taps (conv_l, n_embd) f32 */
	struct model_weight conv_in, conv_w;
	/* qwen35's gated-delta-net layers (gdn below; model_hparams' gdn_*), else zero:
	 * attn_qkv (n_embd, CD), attn_gate (n_embd, VD), ssm_beta and ssm_alpha (n_embd,
	 * gdn_nv), ssm_dt.bias and ssm_a (gdn_nv) f32, ssm_norm (gdn_d) f32; conv_w above holds
	 * ssm_conv1d (gdn_conv, CD) f32 and wo ssm_out (VD, n_embd) */
	struct model_weight gdn_qkv, gdn_z, gdn_beta, gdn_alpha, gdn_dt, gdn_a, gdn_norm;
	/* granitehybrid's Mamba2 blocks (ssm below; model_hparams' ssm_*), else zero: ssm_in
	 * (n_embd, 2 D + 2 G N + H), the conv taps (d_conv, C) and bias (C), dt bias (H), A
	 * (H), D skip (H), the grouped norm (D / G, G), all f32 but ssm_in; wo is ssm_out
	 * (D, n_embd) */
	struct model_weight ssm_in, ssm_conv_w, ssm_conv_b, ssm_dt_b, ssm_a, ssm_d, ssm_norm;
	/* falcon-h1 (hp.ssm_parallel): the Mamba2 block's output projection (D, n_embd), wo
	 * being the attention's; else zero */
	struct model_weight ssm_out;
	/* step35: the head-wise attention gate (n_embd, the layer's query heads), or zero:
	 * head h's attention output times sigmoid(attn_gate x)[h] (x the attn-normed input,
	 * fp32 1 / (1 + e^-v)) before wo */
	struct model_weight attn_gate;
	/* gemma4 MoE layers (hp.gemma4_moe, model_layer_moe), else zero: the router's input
	 * scale ffn_gate_inp.scale (n_embd), the experts' input norm pre_ffw_norm_2 and the two
	 * output norms post_ffw_norm_1 (dense) and post_ffw_norm_2 (experts), (n_embd) each;
	 * the per-expert down scale ffn_down_exps.scale (n_expert), or zero when absent */
	struct model_weight gate_inp_s, ffn_pre_norm_2, ffn_post_norm_1, ffn_post_norm_2;
	struct model_weight down_exps_s;
	bool swa; /* this layer attends through the sliding window hp.n_swa */
	bool no_rope; /* this layer's Q and K are not rotated (smollm3's every 4th layer: 3, 7,
		       * 11, ...); everything else about it is as the other layers' */
	/* lfm2: this layer is a short-convolution block (model_hparams' conv_l): conv_in,
	 * conv_w above, wo its out_proj (n_embd, n_embd); wq, wk, wv, the Q/K norms zero */
	bool conv;
	/* qwen35: this layer is a gated delta net (model_hparams' gdn_*, the weights above) */
	bool gdn;
	bool ssm; /* granitehybrid, nemotron_h: a Mamba2 block (the ssm_* weights above) */
	/* nemotron_h (arch.h): the layer is a non-gated FFN alone (ffn_only: w_up, w_down
	 * read attn_norm's output; no attention or ffn_norm), or has no FFN (no_ffn: a Mamba2
	 * or attention block alone) */
	bool ffn_only, no_ffn;
	/* gemma4: the file has no attn_v for this layer: V is then K's projection (wv == wk,
	 * the same data, counted once), as llama.cpp's graph takes Kcur for Vcur. (The bools
	 * stay together: cpu_weights.c asserts that what follows swa is smaller than a
	 * weight.) */
	bool v_from_k;
	float xielu[4]; /* hp.xielu: {an, ap, beta, eps} as model_hparams describes; else 0 */
	/* gemma4: the layer's output scale (hp.out_scale; the f32 value of the file's
	 * blk.N.layer_output_scale.weight, 1 for a lazy synthetic model) */
	float out_scale;
	/* gemma4 E2B/E4B: the layer whose KV cache this one reads (itself unless l >=
	 * n_layer_kv, and then wk, wv, k_norm are zero: no K/V of its own) */
	uint32_t kv_src;
	/* step35: the SwiGLU clamps (swiglu_clamp_exp / _shexp; 0 = none): with limit > 0,
	 * act = min(silu(gate), limit) * max(-limit, min(up, limit)) (fp32, silu(v) = v / (1 +
	 * e^-v)); clamp_exp for the routed experts, clamp_shexp for the shared expert and for a
	 * dense FFN */
	float clamp_exp, clamp_shexp;
};

struct model {
	char arch[32];	/* general.architecture */
	char name[128]; /* general.name, or the file's base name */
	struct model_hparams hp;
	struct model_weight tok_embd;	 /* (n_embd, n_vocab) */
	struct model_weight output_norm; /* (n_embd) f32 */
	struct model_weight output;	 /* (n_embd, n_vocab); == tok_embd when tied */
	struct model_weight rope_factors; /* (rope_dim / 2) f32 divisors of the RoPE
					   * frequencies (hp.rope_factors), or zero */
	/* gemma4 E2B/E4B's per-layer token embeddings (hp.n_embd_per_layer > 0), else zero:
	 * (n_layer * n_embd_per_layer, n_vocab), (n_embd, n_layer * n_embd_per_layer) and
	 * (n_embd_per_layer) f32 */
	struct model_weight pl_tok_embd, pl_model_proj, pl_proj_norm;
	struct model_layer *layers;	 /* [n_layer] */
	uint64_t n_params;
	uint64_t weight_bytes;
	struct gguf_ctx *gguf; /* owned; NULL for a lazy synthetic model */
	/* A lazy synthetic model (model_open("synthetic:NAME", lazy)) has every weight's
	 * data == NULL: a backend that supports it fills the weights with seeded random
	 * values itself (the CUDA backend does, in device memory). Its biases, when
	 * hp.qkv_bias, are described like the other weights (type f32, ne0 = the output
	 * dimension, ne1 = 1, data == NULL); without biases bq/bk/bv are all zero. */
	bool synthetic;
	uint64_t synth_seed;
	/* qwen3next (added for it): buffers the model owns (fused tensors' rows reordered at
	 * load time into the weights above), freed by model_free */
	void **owned;
	uint32_t n_owned;
};

/* Opens and validates a model file. On failure *out is NULL and err->msg starts with the
 * path ("PATH: problem"), so a CLI prints it as "batchgen: <msg>". */
enum bg_status model_load(const char *path, struct model **out, struct bg_err *err);

/* Builds a model from an already parsed GGUF context, taking ownership of g (closed on
 * failure too). A vocab-only file is BG_ERR_FORMAT ("has no tensors"). */
enum bg_status model_from_gguf(struct gguf_ctx *g, struct model **out, struct bg_err *err);

/* Reads only the hyper-parameters (no tensors needed). */
enum bg_status model_read_hparams(const struct gguf_ctx *g, struct model_hparams *hp, char arch[32],
				  struct bg_err *err);

/* Opens what -m names: NULL or "" = the built-in model (stories260K, embedded in the
 * binary: core/model/builtin.h); "synthetic:builtin" = the small random-weight model
 * that was the default before (synth_builtin's bytes, always materialized);
 * "synthetic:NAME[:DTYPE]" (llama-3-8b, llama-3.2-1b, llama-2-7b,
 * llama-100m, tiny, qwen2.5-0.5b, qwen2-tiny, ... see core/model/synth.h; DTYPE f32|f16|bf16|q8_0,
 * default f16; seed 0) = random weights of a named shape, materialized in host memory (through the
 * GGUF writer and parser, with a generated tokenizer) unless lazy; otherwise a path. */
enum bg_status model_open(const char *spec, bool lazy, struct model **out, struct bg_err *err);

/* (model_open's messages likewise start with the path, the spec, or "built-in model".) */
void model_free(struct model *m); /* NULL-safe */

/* Expert e (< w->ne2) of a stacked weight, as a plain 2-D weight (ne2 0, nb2 0): its ne1
 * rows start e * model_expert_stride(w) bytes into w->data (NULL stays NULL for a lazy
 * synthetic model). Code that indexes stacked matrices goes through these two. */
struct model_weight model_expert(const struct model_weight *w, uint32_t e);

/* The bytes from one stacked matrix of w to the next: w->nb2, else its ne1 rows. */
uint64_t model_expert_stride(const struct model_weight *w);

/* The bytes w's data spans, from w->data to the end of its last matrix (0 without data):
 * its own bytes, and with a stride the other matrices' rows it lies between. */
uint64_t model_weight_span(const struct model_weight *w);

/* xIELU's operator values {an, ap, beta, eps} (model_hparams.xielu) from a file's
 * alpha_n, alpha_p, beta and eps, as ggml_xielu computes them (fp32 softplus). */
void model_xielu_params(float alpha_n, float alpha_p, float beta, float eps, float out[4]);

/* Whether layer l is windowed (llama.cpp's set_swa_pattern: the last layer of each group
 * of swa_pattern is global; pattern 0 = every layer windowed); false without a window. */
bool model_layer_is_swa(const struct model_hparams *hp, uint32_t l);

/* Whether layer L's FFN is routed experts: it has a router (ffn_gate_inp), as llama.cpp
 * decides per layer. The loader (and a lazy synthetic model) give one to every layer from
 * n_layer_dense_lead on that has an FFN, but step35's later dense layers; both backends
 * plan their layers by this. */
bool model_layer_moe(const struct model_layer *L);

/* A layer's attention geometry (gemma4's windowed layers differ; model_hparams): head size,
 * K/V heads, rotated dimensions of a windowed (swa) or global layer, and the largest head
 * size and K/V row (n_head_kv * head_dim) over both kinds, which backends size buffers and
 * KV slots by. */
uint32_t model_head_dim(const struct model_hparams *hp, bool swa);
/* The layers that own a KV cache (hp->n_layer_kv, 0 read as n_layer), and the layer whose
 * cache layer l (*L) reads: l itself unless a shared-KV layer (gemma4), then L->kv_src. */
uint32_t model_n_layer_kv(const struct model_hparams *hp);
uint32_t model_kv_layer(const struct model_hparams *hp, const struct model_layer *L, uint32_t l);
uint32_t model_n_head_kv(const struct model_hparams *hp, bool swa);
/* The query heads of a windowed (swa) or global layer (step35's differ: n_head_swa). */
uint32_t model_n_head(const struct model_hparams *hp, bool swa);
uint32_t model_rope_dim(const struct model_hparams *hp, bool swa);
uint32_t model_head_dim_max(const struct model_hparams *hp);
/* model_kv_dim_max: with hp->conv_l, at least ceil(n_embd / 2) (a conv layer's bx row
 * fills its K and V slots, model_hparams) */
uint64_t model_kv_dim_max(const struct model_hparams *hp);
uint64_t model_q_dim_max(const struct model_hparams *hp);

/* Recurrent state (Mamba2's conv and SSM state, a gated delta net's): the fp32 values one
 * sequence keeps for layer l (*L) between forward passes, 0 for a layer without (attention,
 * lfm2's conv, whose state lives in the KV cache). The state is a function of every position
 * before, not of a block: the backends keep it in per-sequence slots (backend.h,
 * backend_seq.state_slot), not in the KV cache. */
uint64_t model_state_floats(const struct model_hparams *hp, const struct model_layer *L);
/* A slot's layout, for a backend asked for n_slots slots: *off (malloc'd, [n_layer + 1]) the
 * offset of each layer's state in a slot and *per its size, in floats. *per 0 (the model has
 * no state) needs no slots; else n_slots must be positive and n_slots slots addressable.
 * BG_ERR_NOMEM, BG_ERR_INVALID (no slots), BG_ERR_CAPACITY (too large): *off NULL. */
enum bg_status model_state_layout(const struct model *m, int32_t n_slots, uint64_t **off,
				  uint64_t *per, struct bg_err *err);

/* The shared expert's width (hp->n_expert_shared > 0): hp->n_ff_shexp when set, else
 * n_ff_exp * n_expert_shared. */
uint64_t model_ff_shexp(const struct model_hparams *hp);

/* The sliding window when EVERY layer is windowed (then KV before it is never read again
 * and the engine gives its blocks back); 0 when some layer attends to the whole context
 * or there is no window. Also right for llama4's chunks (swa_chunked): a query at p reads
 * from floor(p / n_swa) * n_swa >= p - n_swa + 1, inside the window, so the blocks given
 * back are never read. */
uint32_t model_kv_window(const struct model_hparams *hp);

#endif
