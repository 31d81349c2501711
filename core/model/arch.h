/* arch: the table of supported dense architectures, and the RoPE frequencies they share.
 *
 * One row per `general.architecture` value batchgen runs, saying which graph features the
 * architecture has (as llama.cpp's src/models/<arch>.cpp builds it: the facts, not the
 * code): NeoX or interleaved RoPE, Q/K/V biases, per-head or whole-row Q/K RMS norms,
 * post-attention and post-FFN norms, no pre-norms, GELU(tanh) or SiLU gating, the
 * embedding scale, attention and final logit soft-capping, the sliding-window layer
 * pattern, a fused gate|up FFN tensor, granite's embedding, attention, residual and logit
 * scales, mistral3's attention temperature, smollm3's layers without RoPE, seed_oss's
 * pre-FFN norm under the post-attention name, apertus's non-gated xIELU FFN, GLM's NextN
 * (multi-token prediction) layers at the end of the file, which are skipped, deepseek2's
 * latent attention and grouped routing, Cohere's LayerNorms, parallel attention and FFN
 * and logit scale, cohere2's RoPE on the windowed layers only, minimax-m2's sigmoid
 * routing with a selection bias and no shared expert, lfm2's short-convolution layers,
 * lfm2moe's (lfm2's layers, minimax-m2's routing after leading dense layers), qwen35's
 * gated-delta-net layers and output-gated attention.
 * model.c reads the keys and tensors a row asks for; the backends read only the resulting
 * struct model_hparams / struct model_layer fields, never the architecture name.
 *
 * Invariant: an architecture not in the table is refused by model_read_hparams (with a
 * message naming it); a row never describes a feature that a backend does not implement.
 */
#ifndef BG_ARCH_H
#define BG_ARCH_H

#include <stdbool.h>
#include <stdint.h>

struct model_hparams;

struct arch_info {
	const char *name;     /* general.architecture */
	const char *families; /* for messages and `batchgen info` */
	bool rope_neox;	      /* rotate (x[i], x[i + d/2]) instead of (x[2i], x[2i+1]) */
	bool qkv_bias;	      /* attn_{q,k,v}.bias required (qwen2) */
	bool qk_norm;	      /* attn_q_norm / attn_k_norm (head_dim), before RoPE */
	bool qk_norm_full;    /* with qk_norm: over the whole Q and K rows (olmo2) */
	bool no_pre_norms;    /* no attn_norm / ffn_norm: the branches read the residual */
	bool post_norms;      /* post_attention_norm / post_ffw_norm on the branch outputs */
	bool gelu;	      /* FFN gate activation GELU (tanh form) instead of SiLU */
	bool embd_scale;      /* embeddings multiplied by sqrt(n_embd) */
	bool gemma_q_scale;   /* query scale 1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for
			       * the 27B sizes (gemma_pytorch's query_pre_attn_scalar) */
	float attn_softcap;   /* default of <arch>.attn_logit_softcapping; 0 = not read */
	bool final_softcap;   /* reads <arch>.final_logit_softcapping */
	float final_softcap_default;
	uint32_t swa_pattern; /* default <arch>.attention.sliding_window_pattern; 0 = the arch
			       * has no windowed layers */
	uint32_t swa_default; /* window when the file has no sliding_window key (gemma2 4096) */
	bool swa_needs_key;   /* gemma3: windowed only when the file sets a window */
	bool swa_read_only;   /* phi3: the key is read but no window applied (as llama.cpp) */
	bool swa_rope_plain;  /* olmo2 (OLMo 3): windowed layers rotate with the global base,
			       * no frequency scaling and a cos/sin scale of 1 (no YaRN) */
	bool swa_rope_own;    /* gemma3: windowed layers use rope.freq_base_swa (10000 when
			       * absent) and no frequency scaling; gemma2: the global values */
	bool fused_up;	      /* ffn_up holds gate|up ([n_embd, 2 n_ff]), no ffn_gate (phi3) */
	bool refuse_bias;     /* any *.bias tensor is refused (llama) */
	bool opt_bias;	      /* attn_{q,k,v}.bias and attn_output.bias are read when the file
			       * has them (blk.0's decide; then every layer needs them), as
			       * llama.cpp loads and adds them for granite(moe) and mistral3;
			       * FFN biases are refused */
	/* Mixture of experts (model.h's routing): moe_ok accepts <arch>.expert_count > 0,
	 * moe_only requires it; the experts' width is <arch>.expert_feed_forward_length when
	 * moe_ff_key, else feed_forward_length (Mixtral's llama files) */
	bool moe_ok;
	bool moe_only;
	bool moe_ff_key;
	/* gpt-oss (llama.cpp's openai-moe graph): per-head attention sinks, the attention
	 * output's bias, the router's and experts' biases, the clamped SwiGLU (model.h's
	 * swiglu_oai, alpha 1.702, limit 7, as llama.cpp fixes them), and the pre-FFN norm
	 * stored as post_attention_norm (there is no ffn_norm) */
	bool oai;
	/* granite (llama.cpp's granite graph): reads <arch>.logit_scale (required) and the
	 * optional embedding_scale, attention.scale and residual_scale (model.h's fields;
	 * absent or 0: the llama value) */
	bool granite;
	/* mistral3 (llama.cpp's mistral3 graph): reads <arch>.attention.temperature_scale,
	 * llama 4's attention temperature tuning (model.h's attn_temp_*), and multiplies RoPE's
	 * cos/sin by 1 / (1 + 0.1 ln(1 / freq_scale)) in place of rope.scaling.attn_factor
	 * (which, with YaRN, cancels ggml's own 1 + 0.1 ln(1 / freq_scale)) */
	bool mistral3;
	/* > 0: layer l has no RoPE when (l + 1) % no_rope_step == 0 (smollm3: 4, a constant
	 * of llama.cpp's, not a key); model_layer.no_rope */
	uint32_t no_rope_step;
	/* the FFN's input norm is stored as post_attention_norm (no ffn_norm): gpt-oss,
	 * seed_oss (llama.cpp's attn_post_norm, used there as the pre-FFN norm) */
	bool ffn_norm_post_name;
	/* seed_oss: attn_{q,k,v}.bias read when the file has them (blk.0 decides, as opt_bias),
	 * but no O bias (llama.cpp does not load one for it: refused as an unknown tensor) */
	bool opt_qkv_bias;
	/* apertus: a non-gated FFN, down(xielu(up(x))) with no ffn_gate, xIELU's per-layer
	 * parameters from the xielu.* keys (model.h's model_layer.xielu) */
	bool xielu;
	/* gemma4 (llama.cpp's gemma4 graph): gemma3's layer with attention scale 1, V
	 * RMS-normalized per head without a weight, attn_v optional (V = K's projection
	 * without it), the windowed layers' own head size, K/V heads and rotated dimensions
	 * (attention.key_length_swa, a per-layer head_count_kv, rope.dimension_count_swa),
	 * rope_freqs on the global layers only, an optional per-layer layer_output_scale;
	 * sliding_window_pattern a per-layer bool list (model.h's model_hparams) */
	bool gemma4;
	/* glm4 (GLM-4-0414): <arch>.nextn_predict_layers (default 0) of the block_count
	 * layers are NextN / MTP layers at the end of the file; llama.cpp builds its graph
	 * over the others and skips their tensors (TENSOR_SKIP), so the model has block_count
	 * - nextn_predict_layers layers (model_hparams.n_layer) and the NextN layers' blk.N.*
	 * tensors are accepted unread */
	bool nextn;
	/* glm4moe (GLM-4.5/4.6): model_hparams' glm4moe routing (sigmoid gating by default,
	 * the exp_probs_b selection bias, expert_weights_scale, expert_weights_norm as the
	 * file says, shared experts, leading dense layers) and per-head Q/K norms when blk.0
	 * has them (the 355B's; Air has none) */
	bool glm4moe;
	/* deepseek2 (DeepSeek-V2/V3/R1, Kimi-K2, GLM-4.7-Flash): Multi-head Latent Attention
	 * (model_hparams.mla: the attn_k_b / attn_v_b files current converters write; older
	 * attn_kv_b files are refused), model_hparams' grouped routing (moe_grouped), shared
	 * experts, leading dense layers, DeepSeek's YaRN attention scale */
	bool mla;
	/* command-r, cohere2 (llama.cpp's command-r and cohere2 graphs): attn_norm and
	 * output_norm are LayerNorms (mean-subtracted, weight only, eps from
	 * attention.layer_norm_epsilon, required); attention and the FFN both read attn_norm's
	 * output and are added in parallel, (x + ffn) + attn (no ffn_norm); the logits times
	 * <arch>.logit_scale (command-r: optional, 0 or absent = none; cohere2: required);
	 * the output is token_embd (output.weight is refused: llama.cpp never loads it); Q/K/V
	 * biases when blk.0 has them. command-r with 64 layers or more (Command R+): per-head
	 * Q/K LayerNorms with one weight row per head (attn_q_norm [head_dim, n_head]) */
	bool cohere;
	/* cohere2: only the windowed layers rotate (with the global base and scaling); the
	 * global layers have no RoPE (model_layer.no_rope) */
	bool swa_rope_only;
	/* minimax-m2 (llama.cpp's minimax-m2 graph): every FFN routes with sigmoid gating,
	 * the exp_probs_b selection bias of every layer and normalized weights (glm4moe's
	 * routing in model_hparams without its shared expert, dense layers or weight scale:
	 * llama.cpp reads no expert_weights_scale for it); expert_gating_func required and 2
	 * (llama.cpp aborts on the absent key's NONE) */
	bool moe_sigmoid_sel;
	/* lfm2 (llama.cpp's lfm2 graph): layers whose head_count_kv entry (a per-layer list)
	 * is 0 are short-convolution blocks (model_layer.conv: shortconv.in_proj, a causal
	 * depthwise conv of shortconv.l_cache taps, shortconv.out_proj), the others
	 * attention with per-head Q/K norms; the output norm is named token_embd_norm */
	bool shortconv;
	/* lfm2moe (llama.cpp's lfm2moe graph, lfm2's layers): with moe_sigmoid_sel's routing,
	 * the first leading_dense_block_count layers (optional, 0) have a dense SwiGLU of
	 * feed_forward_length, the others experts of expert_feed_forward_length (its own
	 * width, a scalar: per-layer lists refused) */
	bool moe_dense_lead;
	/* qwen35 (llama.cpp's qwen35 graph): gated-delta-net layers (model_hparams' gdn_*,
	 * model_layer.gdn) with every full_attention_interval-th layer full attention whose
	 * Q projection carries an output gate per head (model_hparams.attn_out_gate); the
	 * pre-FFN norm is post_attention_norm (with ffn_norm_post_name) */
	bool gdn;
	/* granitehybrid (llama.cpp's granite-hybrid graph, build_mamba2_layer): layers whose
	 * head_count_kv entry (a per-layer list) is 0 are Mamba2 blocks (model_layer.ssm,
	 * model_hparams' ssm_* fields and the ssm.* keys), the others attention; granite's
	 * scales; no RoPE when rope.scaling.finetuned is false (the released 4.0-H files); the
	 * FFN dense, or granitemoe's routed experts plus a shared expert of
	 * expert_shared_feed_forward_length */
	bool mamba2;
	/* nemotron_h (llama.cpp's nemotron-h graph, with mamba2): every layer is one block
	 * after its attn_norm and a residual add: Mamba2 (head_count_kv and
	 * feed_forward_length entries both 0), attention without RoPE (feed_forward_length
	 * 0), or a non-gated ReLU^2 FFN (model_layer.ffn_only; model_hparams.relu2); no
	 * ffn_norm; the RMS eps is attention.layer_norm_rms_epsilon, else layer_norm_epsilon.
	 * nemotron_h_moe (with moe_only): its FFN layers routed ReLU^2 experts plus a ReLU^2
	 * shared expert (model_hparams.relu2) */
	bool nemotron_h;
	/* qwen35moe, qwen2moe (llama.cpp's qwen35moe and qwen2moe graphs): every FFN is
	 * build_moe_ffn (softmax gating) plus one shared SwiGLU expert of
	 * expert_shared_feed_forward_length (default feed_forward_length) whose output is
	 * multiplied per token by sigmoid(ffn_gate_inp_shexp x) before the routed sum's add
	 * (model_hparams.shexp_gate); feed_forward_length itself is optional (Qwen3.5 MoE
	 * files have none) */
	bool shexp_gate;
	/* qwen2moe: the chosen experts' weights are the softmax's p as they are (norm_w
	 * false), not renormalized */
	bool moe_raw_weights;
	/* step35 (StepFun Step-3.5-Flash, llama.cpp's step35 graph): per-layer query and K/V
	 * head counts (one value per layer kind, windowed or global: model_hparams.n_head_swa,
	 * n_head_kv_swa), sliding_window_pattern a required per-layer list (model_hparams'
	 * swa_phase), rope.freq_base_swa and rope.dimension_count_swa on the windowed layers,
	 * rope.dimension_count / 2 rotated on the global ones, optional per-head Q/K norms
	 * (blk.0 decides), the optional head-wise attention gate (model_layer.attn_gate), a
	 * dense SwiGLU where a layer has no router, else sigmoid-routed experts (selection
	 * bias optional) plus one shared expert, and the per-layer SwiGLU clamps
	 * (model_layer.clamp_exp, clamp_shexp); NextN layers skipped (with nextn) */
	bool step35;
	/* qwen3next (added for qwen3next; llama.cpp's qwen3next graph): qwen35moe's layers with
	 * Qwen3-Next's layouts: V head h reads K head h / (gdn_nv / gdn_nk) (repeat-interleave,
	 * model_hparams.gdn_k_grouped), beta and alpha fused in ssm_ba (per K head
	 * [beta | alpha] of gdn_nv / gdn_nk rows each) and, in older files, q|k|v|z fused in
	 * ssm_in (per K head), both reordered at load time into qwen35's weights; plain NeoX
	 * RoPE (no rope.dimension_sections) */
	bool gdn_next;
	/* Multi-section RoPE (llama.cpp's ggml_rope_multi; added for qwen2vl, qwen3vl,
	 * qwen3vlmoe; qwen35 and qwen35moe have it too): rope.dimension_sections, a required
	 * list of 4 section widths in pairs (model_hparams.rope_sections), 1 = M-RoPE
	 * (contiguous sections: qwen2vl), 2 = IMROPE (interleaved: qwen3vl, qwen35). For text
	 * llama.cpp gives the first three sections the token's position and the fourth
	 * position 0, so pair i turns by p * freq[i] unless its section is the fourth (or, with
	 * IMROPE, none of the first three), where it does not turn (arch_rope_freqs: freq 0) */
	uint8_t mrope;
	/* exaone4 (LG EXAONE 4.0, llama.cpp's exaone4 graph): windows only in a file of 64
	 * layers (the 32B; NextN layers not counted), where the loader sets them up: window
	 * sliding_window (default 4096), sliding_window_pattern a per-layer bool list or a
	 * period (default 4: 3 windowed, 1 global); there only the windowed layers rotate, with
	 * the global base, scaling and rope_freqs (swa_rope_only). Any other layer count: no
	 * windows and every layer rotated, whatever the window keys say (llama.cpp does not
	 * read the pattern there) */
	bool exaone4;
	/* llama4 (llama.cpp's llama4 graph; arch.c): chunked attention on 3 of every 4 layers
	 * (model_hparams.swa_chunked, the chunk fixed to 8192), no RoPE on every 4th layer
	 * with the attention temperature there only (attn_temp_nope), the unweighted Q/K RMS
	 * norm after RoPE on the RoPE layers when expert_count != 128 (qk_norm_after_rope), MoE
	 * on every interleave_moe_layer_step-th layer (sigmoid routing by the largest logits,
	 * the weight applied to the expert's input: moe_weight_in) plus an ungated shared
	 * expert as wide as the routed ones, dense SwiGLU elsewhere */
	bool llama4;
	/* ernie4_5-moe (Baidu ERNIE 4.5 MoE, llama.cpp's ernie4-5-moe graph; added for it):
	 * layer l's FFN is routed experts when l >= leading_dense_block_count and (l + 1) %
	 * interleave_moe_layer_step == 0 (model_hparams.n_moe_step), else a dense SwiGLU;
	 * softmax routing with the exp_probs_b selection bias where a layer has one,
	 * normalized weights, no scale (deepseek2's routing, model_hparams' moe_grouped,
	 * without groups), plus a shared SwiGLU expert of expert_shared_feed_forward_length
	 * when that key is > 0 */
	bool ernie_moe;
	/* hunyuan-dense, hunyuan-moe (Tencent Hunyuan, llama.cpp's hunyuan-vl and hunyuan-moe
	 * graphs; added for them): the per-head Q/K RMS norms (qk_norm) come AFTER RoPE
	 * (model_hparams.qk_norm_after_rope); hunyuan-dense reads expert_count <= 1 as dense and
	 * multiplies rope.freq_base by rope.scaling.alpha^(head_dim / (head_dim - 2)) when that
	 * key is > 0; hunyuan-moe (hunyuan_moe): every FFN softmax-routed experts as wide as
	 * feed_forward_length, weights renormalized, plus a shared SwiGLU expert of
	 * expert_shared_feed_forward_length (else feed_forward_length) */
	bool qk_norm_after_rope;
	bool hunyuan_moe;
	/* bailingmoe2 (inclusionAI Ling 2.0 / Ring 2.0, llama.cpp's bailingmoe2 graph): Q|K|V
	 * fused in attn_qkv (n_head x head_dim must be n_embd, as llama.cpp shapes it; separate
	 * attn_q/k/v also accepted), per-head Q/K norms, NeoX RoPE over rope.dimension_count,
	 * no biases; the first leading_dense_block_count layers a dense SwiGLU, the others
	 * deepseek2's routing (model_hparams.moe_grouped: expert_gating_func required, the
	 * optional exp_probs_b selection bias, expert groups) plus a shared expert of
	 * (expert_shared_feed_forward_length, else expert_feed_forward_length) x
	 * expert_shared_count; NextN layers skipped (with nextn) */
	bool bailing;
	/* exaone (LG EXAONE 3.0 / 3.5), arcee (Arcee AFM-4.5B), dots1, exaone-moe (added for
	 * them): the attention.layer_norm_rms_epsilon key is required (llama.cpp's loaders
	 * read it without a default); ernie4_5(-moe) and hunyuan-* too */
	bool rms_eps_key;
	/* arcee (llama.cpp's arcee graph): llama's layer with a non-gated ReLU^2 FFN,
	 * down(relu(up ffn_norm(x))^2) (model_hparams.relu2, no ffn_gate), nemotron_h's
	 * activation without its one-block layers */
	bool relu2_ffn;
	/* dots1 (rednote dots.llm1, llama.cpp's dots1 graph): per-head Q/K norms before NeoX
	 * RoPE, K/V heads as many as query heads (llama.cpp shapes attn_k / attn_v so), the
	 * first leading_dense_block_count layers a dense SwiGLU, the others bailingmoe2's
	 * routing (moe_grouped: expert_gating_func required, the optional exp_probs_b,
	 * expert groups) plus a shared expert of expert_feed_forward_length x
	 * expert_shared_count (expert_shared_feed_forward_length is not read there) */
	bool dots1;
	/* exaone-moe (LG K-EXAONE, llama.cpp's exaone-moe graph): windows on 3 of 4 layers
	 * (sliding_window required, sliding_window_pattern a list or a period, default 4) with
	 * RoPE there only (swa_rope_only), attn_norm / ffn_norm, per-head Q/K norms; the first
	 * leading_dense_block_count layers a dense SwiGLU, the others bailingmoe2's routing plus
	 * ONE shared expert of expert_shared_feed_forward_length (else
	 * expert_feed_forward_length; expert_shared_count is not used for its shape) */
	bool exaone_moe;
	/* bailingmoe (inclusionAI Ling 1.0: Ling-lite, Ling-plus, Ling-Coder-lite; llama.cpp's
	 * bailingmoe graph; added for it): llama's attention (interleaved RoPE, Q/K/V fused
	 * or separate, Q/K/V biases when present, no O bias) shaped by rope.dimension_count
	 * (it must equal the head size); EVERY layer routed experts (llama.cpp reads
	 * leading_dense_block_count but its loader and graph put experts in every layer),
	 * softmax gating whatever expert_gating_func says, expert_weights_norm and
	 * expert_weights_scale optional, deepseek2's expert groups, no selection bias, plus
	 * shared experts of expert_feed_forward_length x expert_shared_count (required) */
	bool bailingmoe;
	/* falcon-h1 (TII Falcon-H1 0.5B to 34B; llama.cpp's falcon-h1 graph; added for it):
	 * every layer attention (NeoX RoPE, Q/K/V biases when present) AND a Mamba2 block
	 * (granitehybrid's, the ssm.* keys, any inner size) on the same attn-normed input,
	 * their outputs added to the residual together (model_hparams.ssm_parallel); then the
	 * FFN norm, stored as blk.N.ffn_norm WITHOUT .weight (the converter's name, which
	 * llama.cpp looks up), and a SiLU SwiGLU; rope_freqs and attn_output.bias are loaded
	 * and unused there (accepted, unused here); head_count_kv one value */
	bool falcon_h1;
};

/* The row of an architecture, or NULL. */
const struct arch_info *arch_find(const char *name);

/* The names of the supported architectures, comma separated, for messages. */
const char *arch_names(void);

/* RoPE of one layer kind, as ggml's rope_ext computes it (llama.cpp passes freq_base,
 * freq_scale, ext_factor, attn_factor, beta_fast = 32, beta_slow = 1, n_ctx_orig): pair i
 * of a head at position p turns by p * freq[i], and cos/sin are multiplied by *mscale.
 * freq[i] = base^(-2i / rope_dim) / factor[i] (factors: rope_freqs or LongRoPE, 1 when
 * NULL), times freq_scale (linear), or YaRN's blend of the scaled and unscaled frequency.
 * swa: the windowed layers' base and scale (hp->rope_base_swa, hp->rope_freq_scale_swa).
 * freq has model_rope_dim(hp, swa) / 2 entries (gemma4's windowed layers rotate their own
 * number); factors are not applied there when hp->rope_factors_global. Computed in
 * double. With hp->rope_mrope, freq[i] is 0 for the pairs that text leaves unturned
 * (arch_mrope_pair_turns). */
void arch_rope_freqs(const struct model_hparams *hp, const float *factors, bool swa, double *freq,
		     float *mscale);

/* Multi-section RoPE for text (arch_info.mrope; ggml-cpu's ggml_mrope_cache_init): pair i
 * of a head lies in sector i % (the sections' sum); with M-RoPE (mrope 1) it takes the
 * 4th position (0 for text, no turn) when the sector is >= sections[0] + [1] + [2]; with
 * IMROPE (2) it takes the text position when sector % 3 == k and sector < 3 sections[k]
 * for its k in 0..2, else the 4th. True when the pair turns by the token's position. */
bool arch_mrope_pair_turns(uint8_t mrope, const int32_t sections[4], uint32_t i);

/* Whether rope.dimension_sections can be run (what ggml asserts on): every width >= 0, the
 * first three not all 0, their sum at most head_dim. arch_mrope_pair_turns needs it. */
bool arch_mrope_sections_ok(const int32_t sections[4], uint32_t head_dim);

/* deepseek2's attention scale, as llama.cpp's deepseek2 graph computes it in fp32 from
 * the context's attn_factor (llama_context: YaRN's get_mscale(factor, 1), or 1 when
 * rope_yarn_log_mul is set, over 1 + 0.1 ln(factor), times rope.scaling.attn_factor;
 * without YaRN rope.scaling.attn_factor alone): mscale = attn_factor (1 + 0.1 ln(1 /
 * freq_scale)) (1 + 0.1 rope_yarn_log_mul ln(1 / freq_scale)), scale = mscale^2 /
 * sqrt(mla_nope + rope_dim). */
float arch_mla_kq_scale(const struct model_hparams *hp);

/* The rotation of one position from arch_rope_freqs' output: cs[2i] = cos(pos * freq[i]) *
 * mscale, cs[2i + 1] = sin(...) * mscale for i < half, the angle in double (in fp32,
 * pos * freq would be off by up to ~2e-4 rad at long contexts). The one place the CPU
 * backend turns frequencies into angles. */
void arch_rope_cos_sin(const double *freq, int half, double pos, float mscale, float *cs);

/* The attention temperature of position pos (hp->attn_temp_scale > 0; model.h): as
 * llama.cpp's llm_graph_input_attn_temp computes it, (float)(log(floor((float)pos + offset)
 * / floor_scale) + 1) * scale + 1), the log, product and sum in double. 1 when the scale
 * is 0. */
float arch_attn_temp(const struct model_hparams *hp, int32_t pos);

#endif
