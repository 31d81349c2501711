/* synth: synthetic models (random weights of a named or custom shape) and the built-in
 * model.
 *
 * A synthetic model is an ordinary GGUF file (or buffer) of one of the architectures of
 * core/model/arch.h (the shape says which; qwen2 adds f32 Q/K/V biases, N(0, 0.5^2); qwen3
 * and gemma3 Q/K norms, gemma post-norms, all norms 1 (olmo2: no attn/ffn norms, whole-row
 * Q/K norms and post-norms, its norm weights 1 + N(0, 0.25^2); with a window, OLMo 3's
 * sliding_window_pattern as a bool per layer); qwen3moe and the MoE llama shapes
 * stacked experts and a router; gpt-oss adds Q/K/V/O biases (N(0, 0.5^2)), attention sinks
 * (N(0, 1)), router and expert biases, and larger gate/up experts so that its SwiGLU clamp
 * acts, and names its FFN norm post_attention_norm; granite writes its four scales,
 * mistral3 its attention temperature; seed_oss names its FFN norm post_attention_norm
 * and takes Q/K/V biases without an O bias; apertus writes per-head Q/K norms, no
 * ffn_gate and its xIELU keys; seed_oss's and apertus's norm weights 1 + N(0, 0.25^2);
 * glm4 writes Q/K/V biases, post-norms, gate|up ffn_up, a partial rope.dimension_count
 * and NextN layers, its norm weights 1 + N(0, 0.25^2); deepseek2 its MLA tensors and keys
 * (synth_shape's deepseek2 part); phi3 writes fused attn_qkv and
 * gate|up ffn_up and LongRoPE factors; keys are `<arch>.*`), seeded random weights (each projection N(0, 1/fan_in), embeddings
 * N(0, 1), output projection scaled so logits spread by about 4; norm weights are 1), so that
 * activations stay O(1) at any depth and greedy choices are decisive, and a tokenizer: either the
 * `tokenizer.*` keys copied from another GGUF file, or a generated SentencePiece-style (`llama`)
 * vocabulary: <unk>, <s>,
 * </s>, the 256 byte tokens <0x00>..<0xFF>, a few hundred English pieces with scores, and
 * padding tokens [PAD<id>] up to n_vocab. llama.cpp loads these files.
 *
 * The same options and seed always give the same bytes. Each tensor's values depend only
 * on the seed and the tensor's name, never on the order in which tensors are written.
 */
#ifndef BG_SYNTH_H
#define BG_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"
#include "status.h"

struct synth_shape {
	const char *name;
	uint32_t n_layer;
	uint32_t n_embd;
	uint32_t n_head;
	uint32_t n_head_kv;
	uint32_t n_ff;
	uint32_t n_vocab; /* ignored when the vocabulary is copied from a file */
	uint32_t n_ctx;
	float rope_base;
	float rms_eps;
	bool tie_output;  /* the real model ties output.weight to token_embd */
	const char *arch; /* general.architecture (NULL means llama): llama, qwen2, qwen3,
			   * qwen3moe, gemma2, gemma3, gpt-oss, phi3, olmo2, granite,
			   * granitemoe, mistral3, smollm3, seed_oss, apertus, glm4
			   * (core/model/arch.h) */
	/* Architecture extras; zero = absent / the default. */
	uint32_t head_dim;	  /* attention.key_length when != n_embd / n_head */
	uint32_t n_swa;		  /* attention.sliding_window (gemma2/3 apply it, phi3 not) */
	bool swa_all;		  /* attention.sliding_window_pattern 0: every layer windowed */
	float attn_softcap;	  /* gemma2 attn_logit_softcapping (0: 50) */
	float final_softcap;	  /* gemma2 final_logit_softcapping (0: 30) */
	const char *rope_scaling; /* rope.scaling.type "linear" or "yarn", with rope_factor */
	float rope_factor;	  /* with rope_scaling: rope.scaling.factor; with rope_freqs:
				   * the "llama3" factor (0: 8), not written as a key */
	uint32_t n_ctx_orig; /* rope.scaling.original_context_length; with rope_freqs it is
			      * also the "llama3" factors' original context, and phi3 writes
			      * LongRoPE factors (long and short) for it */
	bool rope_freqs;     /* rope_freqs.weight: the "llama3" factors (rope_factor, 8 by
			      * default as in Llama 3.1; low 1, high 4 over n_ctx_orig) */
	float rope_attn_factor; /* > 0: rope.scaling.attn_factor (phi3 computes its own) */
	/* Mixture of experts (qwen3moe, or llama = Mixtral): n_expert > 0 writes
	 * expert_count / expert_used_count, per layer an f32 router ffn_gate_inp (n_embd,
	 * n_expert; N(0, (ROUTER_SCALE)^2 / n_embd), so routing is decisive) and stacked
	 * ffn_{gate,up}_exps (n_embd, n_ff_exp, n_expert), ffn_down_exps (n_ff_exp, n_embd,
	 * n_expert) instead of the dense FFN. qwen3moe writes expert_feed_forward_length =
	 * n_ff_exp; llama's experts are n_ff wide (n_ff_exp must then be 0 or n_ff). gemma4
	 * (26B-A4B, model.h's gemma4_moe): the layers from n_dense_lead on keep the dense FFN
	 * beside the experts and add ffn_gate_inp.scale, pre_ffw_norm_2, post_ffw_norm_1 / _2
	 * and ffn_down_exps.scale; the first n_dense_lead have no router (no key written). */
	uint32_t n_expert;
	uint32_t n_expert_used;
	uint32_t n_ff_exp;
	/* granite: its four scalars (model.h; 0 = the key not written, logit_scale 1 then).
	 * The embeddings are drawn N(0, 1/n_embd) when embd_scale is set (the scaled input
	 * N(0, embd_scale^2 / n_embd)) and the output projection logit_scale times larger, so
	 * that the divided logits still spread by about OUT_SCALE. */
	float embd_scale, attn_scale, residual_scale, logit_scale;
	/* mistral3: attention.temperature_scale (0 = not written); with YaRN it also writes
	 * rope.scaling.yarn_log_multiplier 1, as Ministral 3's converted files carry */
	float attn_temp_scale;
	/* Q/K/V and O biases (f32, N(0, 0.25)) on an architecture whose graph takes them when
	 * present (granite, granitemoe, mistral3, apertus: arch.h's opt_bias; seed_oss: Q/K/V
	 * only, opt_qkv_bias) */
	bool biases;
	/* gemma4 (model.h): the windowed layers' head size (attention.key_length_swa; head_dim
	 * is the global layers') and K/V heads (n_head_kv is the global layers'; a differing
	 * value writes head_count_kv as a per-layer list, as the converter does), their RoPE
	 * base (rope.freq_base_swa); the window pattern as a per-layer bool list, layer l
	 * windowed unless (l + 1) % swa_period == 0; rope_partial > 0 writes rope_freqs for
	 * the global layers (proportional RoPE: factor 1 for the first rope_partial * head_dim
	 * / 2 pairs, 1e30 for the rest, which then do not turn); k_eq_v: the global layers
	 * have no attn_v (V = K's projection); out_scale: blk.N.layer_output_scale.weight,
	 * 1 + N(0, 0.25^2) each. gemma4's norm weights are 1 + N(0, 0.25^2) (the converter
	 * stores them as they are, no +1), final_softcap written when > 0. */
	uint32_t head_dim_swa;
	uint32_t n_head_kv_swa;
	float rope_base_swa;
	uint32_t swa_period;
	float rope_partial;
	bool k_eq_v;
	bool out_scale;
	/* gemma4 E2B/E4B-style (model.h): embedding_length_per_layer_input (per_layer_token_embd,
	 * per_layer_model_proj, per_layer_proj_norm; per layer inp_gate, proj, post_norm) and
	 * attention.shared_kv_layers (the last ones written without attn_k, attn_v,
	 * attn_k_norm). Files only (a lazy model of such a shape is refused). */
	uint32_t n_embd_per_layer;
	uint32_t shared_kv_layers;
	/* gemma4: the shared-KV layers' FFN twice n_ff wide (use_double_wide_mlp: the
	 * converter then writes feed_forward_length as a per-layer list) */
	bool double_wide;
	/* rope.dimension_count when > 0 (glm4's partial rotary: head_dim / 2); else the
	 * head size */
	uint32_t rope_dim;
	/* glm4: NextN / MTP layers written after the n_layer computed ones (block_count
	 * n_layer + n_nextn, nextn_predict_layers n_nextn), as the converter writes GLM's
	 * MTP layers: a whole layer's tensors plus nextn.eh_proj, enorm, hnorm and
	 * shared_head_norm, all random; skipped by llama.cpp and batchgen, and not counted
	 * by synth_n_params */
	uint32_t n_nextn;
	/* glm4moe: expert_shared_count (a shared expert n_expert_shared * n_ff_exp wide:
	 * ffn_{gate,up,down}_shexp), leading_dense_block_count (those first layers a dense
	 * FFN n_ff wide), expert_weights_scale (0: not written), and per-head Q/K norms unless
	 * no_qk_norm (GLM-4.5-Air has none); every MoE layer gets exp_probs_b.bias (f32,
	 * N(0, EXP_PROBS_B_STD^2), so that it moves the choice), gating sigmoid (2) and
	 * expert_weights_norm true */
	uint32_t n_expert_shared;
	uint32_t n_dense_lead;
	/* step35: the last n_dense_tail layers a dense FFN too (no router), as llama.cpp
	 * reads any layer without ffn_gate_inp */
	uint32_t n_dense_tail;
	float expert_scale;
	bool no_qk_norm;
	/* deepseek2 (model.h's mla): q_lora_rank (0: a plain attn_q, written as 0),
	 * kv_lora_rank, qk_nope_head_dim, v_head_dim; rope_dim is qk_rope_head_dim, head_dim
	 * must be kv_lora + rope_dim and n_head_kv 1 (the converter's MQA view). Writes
	 * attn_q_a / attn_q_a_norm / attn_q_b or attn_q, attn_kv_a_mqa, attn_kv_a_norm,
	 * attn_k_b, attn_v_b (3-D, per head), attn_output, and the keys DeepseekV2Model's
	 * converter writes; norm weights 1 + N(0, 0.25^2). Its experts as glm4moe's (shared
	 * experts, dense leading layers, scale, expert_weights_norm true) with
	 * expert_gating_func softmax (1) when softmax_gating, else sigmoid (2) with
	 * exp_probs_b; expert_group_count / expert_group_used_count when n_group > 1; with
	 * YaRN rope.scaling.yarn_log_multiplier 0.1 * mscale_all_dim when that is > 0. */
	uint32_t q_lora, kv_lora, mla_nope, mla_v_head;
	bool softmax_gating;
	uint32_t n_group, n_group_used;
	float mscale_all_dim;
	/* lfm2, lfm2moe: bit l set makes layer l an attention layer (head_count_kv n_head_kv, per-head
	 * Q/K norms), clear a short-conv layer (head_count_kv 0 in the per-layer list:
	 * shortconv.in_proj, shortconv.conv (f32, l_cache 3), shortconv.out_proj); the output
	 * norm is written as token_embd_norm, shortconv.l_cache 3, norm weights 1 + N(0, 0.25^2) */
	uint64_t lfm2_attn;
	/* qwen35 (model.h's gdn_*): full_attention_interval (layer l attends when (l + 1) %
	 * gdn_every == 0, its attn_q [q | gate] per head, Q/K norms), the delta-net layers'
	 * ssm.state_size gdn_d, group_count gdn_nk, time_step_rank gdn_nv (inner_size gdn_nv
	 * gdn_d), conv_kernel 4; attn_qkv, attn_gate, ssm_conv1d (f32), ssm_dt.bias,
	 * ssm_a (-0.2 (1 + N(0, 0.25^2)): a decay below 1), ssm_beta, ssm_alpha, ssm_norm,
	 * ssm_out; the pre-FFN norm as post_attention_norm; rope.dimension_sections [r/4 + r/8
	 * rounding, ...] summing to rope_dim / 2 (unused by text); norm weights 1 + N(0, 0.25^2).
	 * Files only. */
	uint32_t gdn_every, gdn_d, gdn_nk, gdn_nv;
	/* granitehybrid: layers are attention where lfm2_attn's bit is set (no RoPE:
	 * rope.scaling.finetuned false, as the converter writes), else Mamba2 blocks of
	 * ssm_heads heads, state ssm_state, ssm_groups groups, inner size 2 n_embd, 4 conv
	 * taps (ssm_in, ssm_conv1d weight and bias, ssm_dt.bias N(0, 1), ssm_a -(1 + N(0,
	 * 0.25^2)), ssm_d and ssm_norm 1 + N(0, 0.25^2), ssm_out);
	 * with n_expert, a shared expert n_ff_shexp wide (expert_shared_feed_forward_length;
	 * qwen35moe, qwen2moe: also its gate ffn_gate_inp_shexp, f32, N(0, 4 / n_embd);
	 * qwen35moe writes no feed_forward_length, as its converter) */
	uint32_t ssm_heads, ssm_state, ssm_groups, n_ff_shexp;
	/* nemotron_h: bit l set makes layer l an FFN alone (ffn_up, ffn_down: n_ff wide,
	 * ReLU^2), else lfm2_attn's bit an attention layer, else a Mamba2 one of inner size
	 * ssm_inner (0: 2 n_embd); feed_forward_length and head_count_kv per-layer lists,
	 * attention.layer_norm_epsilon 1e-5 beside the RMS eps, no ffn_norm */
	uint64_t nemo_ffn;
	uint32_t ssm_inner;
	/* falcon-h1: every layer attention AND a Mamba2 block of ssm_heads, ssm_state,
	 * ssm_groups, ssm_inner (the granitehybrid tensors but ssm_norm, written only with
	 * ssm_norm, as Falcon-H1's mamba_rms_norm), the FFN norm named blk.N.ffn_norm (no
	 * .weight, the converter's name), head_count_kv one value; norm weights 1 + N(0,
	 * 0.25^2) */
	bool ssm_norm;
	/* step35: the windowed layers' query heads (n_head is the global layers'; with
	 * n_head_kv_swa their K/V heads), head_count and head_count_kv written as per-layer
	 * lists; rope.dimension_count_swa (rope_dim is rope.dimension_count, of which the
	 * global layers turn half); the window list with layer l windowed unless l %
	 * swa_period == 0 (the first layer global); rope.freq_base_swa rope_base_swa; the
	 * first n_dense_lead layers a dense SwiGLU, the others 8-style experts with
	 * exp_probs_b and a shared expert n_ff_shexp wide; attn_gate on every layer but the
	 * last; per-head Q/K norms; the clamps swiglu_clamp_exp / _shexp per-layer lists
	 * (synth.c's step35_clamps: small enough to bite on these weights, 0 on some layers) */
	uint32_t n_head_swa, rope_dim_swa;
	/* qwen3next (added for it; its shapes write ssm_ba, per K head [beta | alpha], for
	 * ssm_beta / ssm_alpha and no rope.dimension_sections): the older files' fused ssm_in
	 * (per K head [q | k | v | z]) for attn_qkv / attn_gate */
	bool gdn_ssm_in;
	/* qwen2vl, qwen3vl, qwen3vlmoe (added for them): rope.dimension_sections (all 0: [r -
	 * 2 (r / 3), r / 3, r / 3, 0] for r = rope_dim / 2 pairs, every pair turned for text)
	 * and qwen3vl's n_deepstack_layers (0: not written), which text does not use */
	int32_t rope_sections[4];
	uint32_t n_deepstack;
	/* qwen35moe, qwen3next (added for them; gemma4, deepseek2 too): the experts' gate and
	 * up as one ffn_gate_up_exps (n_embd, 2 n_ff_exp, n_expert), per expert [gate | up] */
	bool gate_up_exps;
	/* ernie4_5-moe, llama4 (added for them): interleave_moe_layer_step (0 written as 1 for
	 * ernie4_5-moe): layer l has experts iff l >= n_dense_lead and (l + 1) % moe_step == 0
	 * (synth_moe_layer), else a dense FFN n_ff wide. ernie4_5-moe: every MoE layer gets
	 * exp_probs_b.bias and, with n_ff_shexp, a shared expert; llama.cpp loads only
	 * moe_step 1 (arch.c). llama4: an f32 router and a shared expert as wide as the routed
	 * ones (ffn_*_shexp); no sliding_window key (llama.cpp's chunks of 8192 on 3 of 4
	 * layers), swa_all: sliding_window_pattern 0 (every layer chunked) */
	uint32_t moe_step;
};

/* The named shapes (llama-3-8b, llama-3.2-1b, llama-2-7b, llama-100m, tiny, builtin,
 * qwen2.5-0.5b, qwen2-tiny, ...): NULL for an unknown name. */
const struct synth_shape *synth_find_shape(const char *name);
size_t synth_n_shapes(void);
const struct synth_shape *synth_shape_at(size_t i); /* i < synth_n_shapes() */

/* The architecture of shape s: s->arch, or "llama" when NULL. */
const char *synth_arch(const struct synth_shape *s);

/* The head size of shape s: s->head_dim, or n_embd / n_head when 0. */
uint32_t synth_head_dim(const struct synth_shape *s);

/* The rope.dimension_sections synth writes for shape s (qwen2vl, qwen3vl, qwen3vlmoe,
 * qwen35): s->rope_sections, or when all 0 the rotated pairs split in three, the first
 * section taking the remainder, and a 4th of 0. */
void synth_rope_sections(const struct synth_shape *s, int32_t out[4]);

/* The experts' width of shape s: n_ff_exp, or n_ff when 0. */
uint32_t synth_n_ff_exp(const struct synth_shape *s);

/* apertus: the xIELU values synth writes for layer l (xielu.alpha_n, alpha_p, beta, eps as
 * the file holds them, before model_xielu_params' transform): different in every layer,
 * both branches of the activation used. */
void synth_xielu_raw(uint32_t l, float out[4]);

/* Parameters of a model of shape s (every weight and bias, output counted unless tied). */
uint64_t synth_n_params(const struct synth_shape *s, bool tie_output);

struct synth_opts {
	struct synth_shape shape;
	enum gguf_dtype dtype; /* of the matrices; norms are always f32 */
	uint64_t seed;
	bool tie_output;		   /* omit output.weight (tied to token_embd) */
	const struct gguf_ctx *vocab_from; /* copy tokenizer.* from here; NULL = generate */
	const char *name;		   /* general.name; NULL = the shape's name */
};

/* Defaults for shape s: dtype f32, seed 0, the shape's tying, generated vocabulary. */
void synth_opts_init(struct synth_opts *o, const struct synth_shape *s);

/* Checks a shape (architecture llama or qwen2, positive sizes, n_embd % n_head == 0,
 * n_head % n_head_kv == 0, even head size, q8_0 row sizes multiple of 32, a generated
 * vocabulary of at least 259 tokens).
 * BG_ERR_INVALID with a sentence naming the problem. */
enum bg_status synth_check(const struct synth_opts *o, struct bg_err *err);

/* The vocabulary size the model will have: the copied tokenizer's, or the shape's
 * n_vocab, or (n_vocab == 0, the built-in shape) exactly the generated pieces. */
uint32_t synth_n_vocab(const struct synth_opts *o);

/* Writes a synthetic model to path (streaming: one tensor in memory at a time). */
enum bg_status synth_write(const struct synth_opts *o, const char *path, struct bg_err *err);

/* The same bytes into a malloc'd buffer (caller frees). */
enum bg_status synth_to_buffer(const struct synth_opts *o, void **buf, size_t *len,
			       struct bg_err *err);

/* The built-in model: shape "builtin" (4 layers, 128 embd, 4 heads, 2 kv heads, ffn 344,
 * ctx 1024), f32, a generated vocabulary of exactly its English pieces, tied output, a
 * fixed seed. Deterministic. */
enum bg_status synth_builtin(void **buf, size_t *len, struct bg_err *err);

#endif
