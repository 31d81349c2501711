/* arch: the architecture table and the shared RoPE frequencies. See arch.h. */
#include "model/arch.h"

#include <math.h>
#include <string.h>

#include "model/model.h"

/* Sources (llama.cpp src/models/<name>.cpp and src/llama-model.cpp, the bundled version):
 * gemma2 defaults n_swa 4096, pattern 2 (even layers windowed), attn soft-cap 50, final
 * 30; gemma3 pattern 6 (5 windowed, 1 global), windowed only when sliding_window is set,
 * local RoPE base 10000, final soft-cap only when the key is present; phi3 reads
 * sliding_window and disables it ("Phi SWA is currently disabled"); qwen3moe is qwen3's
 * attention with every FFN a routed mixture (src/models/qwen3moe.cpp: build_moe_ffn with
 * SiLU, softmax gating, norm_w true), and llama.cpp's llama graph does the same for a
 * llama file whose layers have ffn_gate_inp (Mixtral; experts as wide as
 * feed_forward_length). gpt-oss (src/models/openai-moe-iswa.cpp, LLM_ARCH_OPENAI_MOE):
 * NeoX RoPE (YaRN in the released files), Q/K/V and O biases, sinks in every head's
 * softmax, sliding_window read (128 released) with pattern 2 (even layers windowed),
 * post_attention_norm as the FFN's input norm, build_moe_ffn with biases, SWIGLU_OAI_MOE
 * and SOFTMAX_WEIGHT gating (top-k of the logits, softmax over those k), untied output.
 * olmo2 (src/models/olmo2.cpp): no attn_norm / ffn_norm; attn_q_norm (n_embd) and
 * attn_k_norm (n_head_kv * head_dim) RMS-normalize each token's whole Q and K rows before
 * NeoX RoPE; post_attention_norm and post_ffw_norm on the branch outputs before each
 * residual add; SiLU SwiGLU; output.weight required. A sliding_window > 0 makes it OLMo 3
 * (the same graph and converter): windowed layers from sliding_window_pattern (the
 * converter writes a per-layer bool array; period 4 when absent: 3 windowed, 1 global),
 * RoPE there with freq_base, freq_scale 1, ext_factor 0 and attn_factor 1 (the global
 * layers keep the file's scaling, YaRN in the released files).
 * granite (src/models/granite.cpp, LLM_ARCH_GRANITE): the llama graph (interleaved RoPE,
 * SiLU) with the embeddings times embedding_scale (build_inp_embd, when non-zero), q.k
 * times attention.scale (when non-zero, else 1/sqrt(head_dim)), the attention and FFN
 * branch outputs times residual_scale before each residual add (when non-zero), and the
 * logits times 1 / logit_scale (a required key). granitemoe (src/models/granite-moe.cpp,
 * LLM_ARCH_GRANITE_MOE): granite's graph and keys with every FFN a routed mixture
 * (build_moe_ffn: SiLU, softmax gating, norm_w, experts as wide as feed_forward_length;
 * shared experts, expert_shared_feed_forward_length > 0, are refused). mistral3 (src/models/mistral3.cpp,
 * LLM_ARCH_MISTRAL3): the llama graph (interleaved RoPE, optional Q/K/V/O biases) with RoPE's attn_factor fixed to 1 / (1 + 0.1 ln(1 / freq_scale)) by the graph,
 * and, when attention.temperature_scale is non-zero, llama 4's temperature tuning: Q
 * after RoPE times log(floor(pos / n_ctx_orig) + 1) * scale + 1 per position (offset 0)
 * (llama-graph.cpp's build_inp_attn_scale; the floor scale is the original context of
 * YaRN, n_ctx_orig_yarn, in llama-model.cpp). smollm3 (src/models/smollm3.cpp,
 * LLM_ARCH_SMOLLM3): the llama graph with no RoPE in layers 3, 7, 11, ... (use_rope =
 * (il + 1) % n_no_rope_layer_step != 0, the step fixed to 4 in llama-model.cpp, not read
 * from the file), no rope factors; its graph would add Q/K/V/O biases, but llama.cpp does not
 * load them for smollm3 (a file with them fails there), so batchgen refuses them.
 * seed_oss (src/models/seed-oss.cpp, LLM_ARCH_SEED_OSS): the llama graph with NeoX RoPE
 * (llama_model_rope_type), Q/K/V biases when present (create_tensor_qkv / build_qkv; the
 * released Seed-OSS-36B has them), no O bias loaded, the pre-FFN norm loaded as
 * attn_post_norm (post_attention_norm.weight) and used where llama's ffn_norm is, SiLU
 * SwiGLU, output tied to token_embd when output.weight is absent.
 * apertus (src/models/apertus.cpp, LLM_ARCH_APERTUS): NeoX RoPE with optional rope_freqs
 * (Llama 3.1's factors), per-head Q/K RMS norms before RoPE (their optional biases are
 * refused), optional Q/K/V and O biases, output.weight required, and a non-gated FFN:
 * down(xielu(up(ffn_norm(x)))), xIELU's alpha_n, alpha_p, beta, eps per layer from the
 * keys xielu.* (no arch prefix; an array of n_layer or one value), transformed by
 * ggml_xielu (model.h).
 * gemma4 (src/models/gemma4.cpp, llama-model.cpp, llama-hparams.cpp, conversion/gemma.py:
 * Gemma4Model): NeoX RoPE; attn_norm, per-head Q norm, RoPE; K projection, V projection or
 * K's when the layer has no attn_v, per-head K norm (weighted), V RMS-normalized per head
 * without weight, RoPE on K; f_attention_scale 1; no attention soft-cap; post_attention_norm
 * before the residual add; ffn_norm, GELU gate|up, post_ffw_norm, residual add; the layer's
 * output times layer_output_scale when present; embeddings x sqrt(n_embd), final norm,
 * LM head (tied without output.weight), final_logit_softcapping when set. Windowed layers
 * (sliding_window_pattern, an array there): n_embd_head_k_swa (key_length_swa), n_rot_swa
 * (rope.dimension_count_swa), their head_count_kv entries, rope.freq_base_swa (10000 when
 * absent), freq_scale 1; global layers: rope_freqs as freq_factors (the converter writes 1
 * for partial_rotary_factor * head_dim / 2 pairs, 1e30 for the rest: proportional RoPE).
 * The converter stores the norm weights as they are (norm_shift 0, no +1). E2B/E4B:
 * embedding_length_per_layer_input > 0 and attention.shared_kv_layers; 26B-A4B: a layer
 * with ffn_gate_inp runs the dense FFN and GELU experts side by side (model.h's gemma4_moe:
 * the router's ffn_gate_inp.scale, pre_ffw_norm_2, post_ffw_norm_1 / _2, the optional
 * per-expert ffn_down_exps.scale; gate and up apart or as ffn_gate_up_exps).
 * glm4 (src/models/glm4.cpp, llama-model.cpp's llama_model_rope_type, conversion/glm.py:
 * Glm4Model): interleaved RoPE (LLAMA_ROPE_TYPE_NORM; NeoX only for GLM4_MOE) over
 * rope.dimension_count dimensions, the converter's head_dim * partial_rotary_factor (0.5:
 * 64 of 128), the rest unrotated; Q/K/V biases when present (create_tensor_qkv; the
 * released 0414 files have them: attention_bias true), no O bias; attention scale
 * 1/sqrt(head_dim); post_attention_norm on the attention output before its residual add;
 * ffn_norm, SwiGLU over ffn_up's gate|up halves ([n_embd, 2 n_ff], no ffn_gate; HF's
 * gate_up_proj), ffn_down, post_ffw_norm before the second residual add; output tied to
 * token_embd without output.weight; the last nextn_predict_layers layers (NextN / MTP) are
 * skipped, their tensors loaded unused; rope.dimension_sections (GLM-4V's M-RoPE) makes the
 * graph multi-section, not supported here.
 * glm4moe (src/models/glm4-moe.cpp, llama-graph.cpp's build_moe_ffn, conversion/glm.py:
 * Glm4MoeModel): NeoX RoPE over rope.dimension_count (partial_rotary_factor 0.5); Q/K/V
 * biases when present, no O bias; per-head Q/K RMS norms before RoPE when the file has
 * them (optional there: GLM-4.5 355B); attention output + residual, then post_attention_norm
 * as the FFN's input norm (no ffn_norm, no post-FFN norm); layers below
 * leading_dense_block_count (first_k_dense_replace, optional, 0) a dense SiLU SwiGLU of
 * ffn_gate / ffn_up / ffn_down (feed_forward_length wide); the others build_moe_ffn with
 * expert_gating_func (sigmoid when absent or 0, the converter writes 2; other gatings
 * refused here), exp_probs_b.bias
 * added to the probabilities for the top-k choice only, expert_weights_norm (default false;
 * the converter writes norm_topk_prob) with the sum clamped at 6.103515625e-5, then
 * expert_weights_scale (routed_scaling_factor) unless 0 or 1, plus a shared expert
 * (ffn_{gate,up,down}_shexp, expert_feed_forward_length x expert_shared_count wide, a
 * required key) on the same normed input, routed + shared added; the NextN layers skipped
 * (llama.cpp's load_mtp off: TENSOR_SKIP).
 * deepseek2 (src/models/deepseek2.cpp, llama-context.cpp's YaRN attn_factor, llama-graph.cpp's
 * build_moe_ffn and build_attn with v_mla, conversion/deepseek.py: DeepseekV2Model):
 * interleaved RoPE (LLAMA_ROPE_TYPE_NORM) over rope.dimension_count = qk_rope_head_dim;
 * MLA in the absorbed form when attention.key_length_mla and value_length_mla are set
 * (the converter splits kv_b_proj into attn_k_b (qk_nope, kv_lora, n_head) and attn_v_b
 * (kv_lora, v_head, n_head); key_length = kv_lora + qk_rope, value_length = kv_lora,
 * head_count_kv 1): q from attn_q, or attn_q_a, attn_q_a_norm, attn_q_b when q_lora_rank
 * > 0 (the key is not read for the "lite" layer counts 26 and 27, or 48 with a vocabulary
 * of 128256); attn_kv_a_mqa gives [kv_cmpr (kv_lora), k_pe (qk_rope)], kv_cmpr through
 * attn_kv_a_norm, k_pe rotated; Q = [attn_k_b q_nope per head, rope(q_pe)], K = [kv_cmpr,
 * k_pe], V = kv_cmpr, one K/V head; the attention output per head through attn_v_b, then
 * attn_output; kq_scale = mscale^2 / sqrt(key_length_mla) with mscale = attn_factor (1 +
 * 0.1 ln(1/freq_scale)) (1 + 0.1 yarn_log_mul ln(1/freq_scale)), where the file's
 * rope.scaling.yarn_log_multiplier is 0.1 mscale_all_dim (divided by 0.1 at load) and
 * llama_context's attn_factor is 1 / (1 + 0.1 ln factor) with it (get_mscale's ratio 1).
 * FFN: attn output + residual, ffn_norm, layers below leading_dense_block_count a dense
 * SiLU SwiGLU, the others build_moe_ffn(exp_probs_b when present, expert_weights_norm
 * (default false), expert_weights_scale (0 or 1: none), expert_gating_func: absent = softmax
 * unless 47/48 layers with a vocabulary of 154880 (GLM-4.7-Flash): sigmoid) + the shared
 * experts (expert_shared_count, required). With expert_group_count > 1 the selection
 * values are grouped (n_expert / groups consecutive experts), each group scored by the
 * sum of its two largest values, the expert_group_used_count best groups kept, the others
 * -inf, then the top-k. The older attn_kv_b files (MHA decompressed per head) and
 * attention.temperature_scale (Mistral Large 3) are refused here.
 * command-r (src/models/command-r.cpp, llama-model.cpp's llama_model_rope_type): interleaved
 * RoPE (LLAMA_ROPE_TYPE_NORM); attn_norm a LayerNorm (build_norm LLM_NORM: ggml_norm, then
 * times the weight, no bias) with f_norm_eps (attention.layer_norm_epsilon, required);
 * Q/K/V (create_tensor_qkv: attn_qkv or separate, biases when present), for n_layer >= 64
 * attn_q_norm [head_dim, n_head] and attn_k_norm [head_dim, n_head_kv] (required there, not
 * loaded below 64) as per-head LayerNorms before RoPE; attention scale 1/sqrt(head_dim); no
 * O bias; the FFN (SiLU SwiGLU) reads the same attn_norm output; l_out = (ffn + x) + attn;
 * output_norm a LayerNorm; the LM head is token_embd (TENSOR_DUPLICATED: output.weight is
 * never loaded); logits times logit_scale when it is non-zero (optional key).
 * cohere2 (src/models/cohere2.cpp): command-r's layer without Q/K norms; sliding_window
 * required, load_swa_pattern(4) (a per-layer bool list or a period, 3 windowed then 1
 * global); RoPE on the windowed layers only, with the context's freq_base and freq_scale
 * (rope.freq_base_swa is read but unused: "UNUSED" in the graph); the global layers have no
 * RoPE; logit_scale required.
 * minimax-m2 (src/models/minimax-m2.cpp, llama-model.cpp's llama_model_rope_type,
 * conversion/minimax.py: MiniMaxM2Model, base.py's scoring_func): NeoX RoPE over
 * rope.dimension_count (the converter's rotary_dim: 64 of 128); attn_norm, Q/K/V (no
 * biases), attn_q_norm (n_head * head_dim) and attn_k_norm (n_head_kv * head_dim) RMS
 * norms over each token's whole Q and K rows (build_norm before the per-head reshape, as
 * olmo2), RoPE, attention scale 1/sqrt(head_dim), attn_output, residual; ffn_norm,
 * build_moe_ffn(exp_probs_b, SiLU, norm_w true, expert_weights_scale never read (0: none),
 * expert_gating_func from the file: absent is NONE, which build_moe_ffn aborts on; the
 * converter writes 2, sigmoid, from scoring_func); no shared experts, no dense layers;
 * output_norm, output.weight (required there; tied here without it, as every
 * architecture's).
 * lfm2 (src/models/lfm2.cpp, llama-model.cpp's llama_model_rope_type, ggml-cpu's
 * ssm_conv): NeoX RoPE; shortconv.l_cache required; a layer is recurrent (a short-conv
 * block) when its head_count_kv entry is 0, else attention: attn_q_norm / attn_k_norm per
 * head (rms_eps) before RoPE, scale 1/sqrt(head_dim), no biases; both kinds read attn_norm
 * ("operator_norm") and add their output to the residual, then ffn_norm and a SiLU SwiGLU.
 * The conv block: in_proj gives [B | C | x] (n_embd each), bx = B * x, the conv output of
 * channel i at position t is the fp32 sum over taps k = 0..l_cache-1 (oldest first) of
 * bx[t - (l_cache - 1) + k][i] * conv[i][k], positions before 0 zero (the recurrent state
 * starts at zero), y = C * conv_out, then out_proj. The output norm is token_embd_norm
 * (LLM_TENSOR_OUTPUT_NORM_LFM2); output tied to token_embd without output.weight. With
 * attention.sliding_window > 0 the attention layers are windowed (refused here).
 * lfm2moe (src/models/lfm2moe.cpp, whose graph is lfm2.cpp's; llama-hparams.h's defaults):
 * lfm2's layers; the FFN of layers below leading_dense_block_count (optional, default 0)
 * a dense SiLU SwiGLU of feed_forward_length, the others build_moe_ffn(exp_probs_b
 * (required), SiLU, norm_w true, expert_weights_scale never read (0: none),
 * expert_gating_func required (the converter writes 2, sigmoid)) over experts of
 * expert_feed_forward_length (get_key_or_arr: one value here); no shared experts.
 * qwen35 (src/models/qwen35.cpp, delta-net-base.cpp, models.h's build_gdn_l2_norm,
 * llama-model.cpp's llama_model_rope_type: IMROPE; ggml-cpu's ssm_conv and
 * gated_delta_net): layer l is a gated delta net unless (l + 1) % full_attention_interval
 * == 0 (default 4; an attention.recurrent_layers list is refused here unless it is that
 * pattern); nextn_predict_layers MTP layers at the end are skipped (as glm4's). Both kinds
 * read attn_norm, add their output to the residual, then post_attention_norm (the pre-FFN norm) and a SiLU SwiGLU. Full attention: attn_q (n_embd, 2 n_head head_dim), per head
 * [q | gate]; attn_q_norm / attn_k_norm per head; IMROPE over rope.dimension_count with
 * rope.dimension_sections (arch.h's mrope: for text NeoX RoPE with the pairs beyond 3 x
 * their section unturned; the released lists leave none);
 * scale 1/sqrt(head_dim); the attention output times sigmoid(gate), then attn_output.
 * The delta-net layer: model_hparams' gdn_* fields.
 * granitehybrid (src/models/granite-hybrid.cpp, mamba-base.cpp's build_mamba2_layer,
 * ggml-cpu's ssm_conv and ssm_scan, conversion/granite.py): interleaved RoPE; a layer is
 * recurrent (a Mamba2 block) when its head_count_kv entry is 0, else granite's attention
 * (Q/K/V, optional biases, attention.scale), rotated only when rope.scaling.finetuned
 * (default true; the converter writes false for the hybrid files: no RoPE anywhere);
 * both read attn_norm; granite's embedding, residual and logit scales; the FFN is a dense
 * SiLU SwiGLU without experts, else build_moe_ffn (softmax, norm_w, no scale) plus, with
 * expert_shared_feed_forward_length > 0, a shared SwiGLU of that width added to it. The
 * Mamba2 block is model.h's (model_hparams' ssm_* fields).
 * nemotron_h (src/models/nemotron-h.cpp): a layer is a Mamba2 block when its head_count_kv
 * and feed_forward_length entries (per-layer lists) are both 0, attention (no RoPE, scale
 * 1/sqrt(head_dim), no biases here) when only feed_forward_length's is, else an FFN:
 * down(relu(up x)^2) (build_ffn's LLM_FFN_RELU_SQR, no gate); each reads attn_norm and
 * adds its output to the residual; no ffn_norm; the norms' eps layer_norm_rms_epsilon,
 * else layer_norm_epsilon (required then); no scales; output tied without output.weight.
 * Mamba2 there without granitehybrid's d_inner = 2 n_embd (llama.cpp asserts it for
 * granitehybrid only). NextN / MTP layers are refused.
 * qwen35moe (src/models/qwen35moe.cpp): qwen35's layers, every FFN build_moe_ffn (SiLU,
 * softmax gating, norm_w true, expert_weights_scale never read: none; gate and up as
 * stored, or fused in ffn_gate_up_exps, create_tensor_gate_up_exps: read in place as two
 * strided views) plus the shared expert: a SiLU SwiGLU of
 * expert_shared_feed_forward_length (default feed_forward_length, which Qwen3.5 MoE files
 * omit) times sigmoid(ffn_gate_inp_shexp x) (ggml_sigmoid of build_lora_mm: one value per
 * token, the FFN's normed input x), then moe_out + that (ggml_add). qwen2moe
 * (src/models/qwen2moe.cpp): qwen2's layer (NeoX RoPE, Q/K/V biases, ffn_norm) with the
 * same FFN but norm_w false (the softmax's p as the weights); its gate is
 * silu(v) / v, sigmoid(v) up to rounding (and NaN at v = 0, where sigmoid is 1/2).
 * nemotron_h_moe (the same graph, src/models/nemotron-h.cpp's build_ffn_layer with
 * ffn_gate_inp; conversion/nemotron.py): every FFN layer (feed_forward_length's entry
 * moe_intermediate_size) is build_moe_ffn over ffn_up_exps / ffn_down_exps, no gate,
 * LLM_FFN_RELU_SQR, gating SIGMOID whatever expert_gating_func says: probabilities
 * sigmoid(router logits), the top expert_used_count by probability + exp_probs_b (the
 * selection bias, required), weights the unbiased probabilities, divided by their sum
 * (clamped below at 6.1e-5) when expert_weights_norm (default false), then times
 * expert_weights_scale (absent, 0 or 1: none; Nano: 2.5); plus the shared expert
 * down_shexp(relu(up_shexp x)^2), expert_shared_feed_forward_length wide, of the same
 * normed input, added after the routed sum. Not supported (refused): moe_latent_size
 * (Nemotron 3 Super's ffn_latent_down / up around the experts), per-layer expert widths or
 * counts (Puzzle), expert_group_count > 1, MTP layers.
 * step35 (src/models/step35.cpp, llama-model.cpp, llama-hparams.cpp, llama-graph.cpp's
 * build_ffn / build_moe_ffn clamps): NeoX RoPE; per layer n_head(il) and n_head_kv(il)
 * (head_count, head_count_kv: lists), head size key_length; attn_norm, Q/K/V, per-head
 * Q/K RMS norms when present, RoPE of n_rot(il) dimensions: windowed layers
 * (sliding_window_pattern, a required per-layer list of block_count entries;
 * sliding_window) n_rot_swa = rope.dimension_count_swa (else rope.dimension_count) with
 * rope.freq_base_swa and freq_scale_swa, global layers rope.dimension_count / 2 (the loader
 * halves n_rot_full) with the file's base and scaling and rope_freqs (when present; not on
 * windowed layers); scale 1/sqrt(head size); the attention output of head h times
 * sigmoid(attn_gate x)[h] when the layer has attn_gate ([n_embd, n_head(il)], x the
 * attn-normed input); attn_output; residual; ffn_norm; a layer without ffn_gate_inp a
 * dense SwiGLU (ffn_gate/up/down, feed_forward_length), else build_moe_ffn (SiLU,
 * expert_gating_func, NONE read as sigmoid; exp_probs_b when present;
 * expert_weights_norm, expert_weights_scale) plus the shared expert's SwiGLU
 * (expert_shared_feed_forward_length) of the same input, moe + shared; residual. The
 * clamps: swiglu_clamp_exp[il] for the routed experts, swiglu_clamp_shexp[il] for the shared
 * expert and for a dense FFN (build_ffn reads it for every gated SiLU FFN), each a scalar or
 * a list of block_count: when limit > 1e-6, up = clamp(up, -limit, limit), a =
 * min(silu(gate), limit), a * up. nextn_predict_layers layers at the end skipped.
 * qwen3next (src/models/qwen3next.cpp; llama-model.cpp's split segments; conversion/qwen.py's
 * Qwen3NextModel): qwen35moe's graph (the same attention gate, per-head Q/K norms, delta
 * net, gated norm rmsnorm(o) * silu(z), softmax experts with norm_w plus the sigmoid-gated
 * shared expert; the FFN's dense branch, unused by the released files, is not read) with
 * ggml_rope_ext's NeoX RoPE (no sections) and these layouts: V head h reads K head
 * h / (nv / nk) (repeat-interleave: "[k0_v0, k0_v1, k1_v2, k1_v3]"); ssm_ba (n_embd, 2 nv)
 * holds per K head g [beta of V heads g r..g r+r-1 | their alpha] (r = nv / nk); the delta
 * net's input is attn_qkv + attn_gate (the converter's order, qwen35's) or, in older files,
 * ssm_in (n_embd, 2 KD + 2 VD) with per K head [q (d) | k (d) | v (r d) | z (r d)].
 * nextn_predict_layers MTP layers skipped.
 * exaone4 (src/models/exaone4.cpp, llama-model.cpp's llama_model_rope_type: NeoX,
 * conversion/exaone.py: Exaone4Model): no attn_norm / ffn_norm; Q/K/V, per-head Q/K RMS
 * norms (attn_q_norm / attn_k_norm [head_dim]), NeoX RoPE with rope_freqs (the converter's
 * "llama3" factors) on the rotated layers, scale 1/sqrt(head_dim), attn_output,
 * post_attention_norm, residual add; SiLU SwiGLU on the residual, post_ffw_norm, residual
 * add; output tied to token_embd without output.weight; NextN layers skipped. Windows
 * (LLAMA_SWA_TYPE_STANDARD) only when n_layer (block_count - nextn_predict_layers) is 64:
 * n_swa 4096 unless sliding_window says, load_swa_pattern(4) (the converter writes a bool
 * per layer, (l + 1) % 4 != 0), rope.freq_base_swa read but unused by the graph (it passes
 * freq_base); use_rope = is_swa(il) || swa_type == NONE: the 64-layer file's global layers
 * are NoPE, any other file rotates every layer and has no windows (the window keys are
 * ignored there). olmoe (src/models/olmoe.cpp): NeoX RoPE; attn_norm; attn_q_norm and
 * attn_k_norm [n_embd] over each token's whole Q and K rows (before the per-head reshape,
 * olmo2's; both n_embd wide, so llama.cpp loads no file with fewer K/V heads than query
 * heads); scale 1/sqrt(head_dim); ffn_norm, build_moe_ffn(SiLU, softmax gating, norm_w
 * false: the softmax's p of the chosen experts as they are, expert_weights_scale never read)
 * over experts feed_forward_length wide; no shared expert; output.weight required there.
 * llama4 (src/models/llama4.cpp, llama-hparams, llama-graph.cpp's build_inp_attn_scale and
 * build_moe_ffn, llama-kv-cache.cpp's is_masked_swa): interleaved RoPE with optional
 * rope_freqs (on every layer); without attention.sliding_window, or with a nonzero one,
 * the windowed layers (sliding_window_pattern, default 4: layer l when l % 4 < 3) mask
 * CHUNKED with the chunk fixed to 8192 whatever the key says: a query at position p sees
 * keys [floor(p / 8192) * 8192, p]; rope.freq_base_swa (default the base) on them; a
 * sliding_window of 0 makes every layer global and has no temperature scale, which
 * llama.cpp asserts on at run time, so batchgen refuses it. Layer l has no RoPE when
 * (l + 1) % 4 == 0 (n_no_rope_layer_step, a constant); there Q (not K) is multiplied per
 * position by log(floor((pos + 1) / 8192) + 1) * 0.1 + 1; on the RoPE layers Q and K are
 * RMS-normalized per head without a weight (ggml_rms_norm, eps the RMS eps) after RoPE
 * unless expert_count is 128 (Maverick). Scale 1/sqrt(head size). expert_count > 0
 * required; layer l is MoE when interleave_moe_layer_step (required) > 0 and (l + 1) %
 * it == 0: experts chosen by the largest router logits, weight sigmoid(logit), no norm
 * or scale, the expert's input x * weight (weight_before_ffn), outputs summed in slot
 * order; plus the shared expert's SwiGLU (ffn_*_shexp, expert_feed_forward_length wide)
 * of x, moe + shared; other layers a dense SwiGLU of feed_forward_length. Biases are
 * refused (create_tensor_qkv would take Q/K/V ones; Llama 4 files have none). A file
 * without a global layer (fewer than 4 layers) fails in llama.cpp (its global cache has
 * no layers); batchgen runs it.
 * ernie4_5 (src/models/ernie4-5.cpp, llama-model.cpp's llama_model_rope_type: NORM): the
 * llama graph: interleaved RoPE, attn_norm, Q/K/V (create_tensor_qkv: attn_qkv or separate,
 * biases when present), scale 1/sqrt(head_dim), attn_output (an attn_output.bias is loaded
 * there but never added: refused here), residual, ffn_norm, SiLU SwiGLU, residual;
 * attention.layer_norm_rms_epsilon required; rope.dimension_sections read but unused by
 * the text graph; output tied to token_embd without output.weight.
 * ernie4_5-moe (src/models/ernie4-5-moe.cpp, conversion/ernie.py): ernie4_5's attention;
 * layer il's FFN is build_moe_ffn when il >= leading_dense_block_count (optional, 0) and
 * (il + 1) % interleave_moe_layer_step == 0 (required, > 0), else a dense SwiGLU of
 * feed_forward_length. build_moe_ffn: SiLU, SOFTMAX gating fixed by the graph
 * (expert_gating_func not read), exp_probs_b.bias (optional per layer) added to the
 * probabilities for the choice only, norm_w true (the sum clamped at 6.103515625e-5),
 * expert_weights_scale never read (0: none); experts expert_feed_forward_length wide
 * (required; ffn_gate_exps is TENSOR_NOT_REQUIRED there, required here: no released file
 * lacks it); plus, when expert_shared_feed_forward_length > 0 (the converter writes
 * intermediate_size / num_key_value_heads), a shared SwiGLU expert of that width on the
 * same normed input, moe + shared. The loader makes MoE tensors for every il >=
 * leading_dense_block_count, so llama.cpp runs only files with a step of 1 (all released:
 * 21B-A3B lead 1, 300B-A47B lead 3); batchgen follows the graph's rule for any step.
 * hunyuan-dense (llama-model.cpp: llama_model_hunyuan_dense uses hunyuan-vl.cpp's loader and
 * graph; llama_model_rope_type: NEOX): attn_norm, Q/K/V (create_tensor_qkv: biases when
 * present), NeoX RoPE (ggml_rope_ext; rope_multi only with rope.dimension_sections, not
 * supported here), THEN attn_k_norm and attn_q_norm (per head, RMS, required), scale
 * 1/sqrt(head_dim), attn_output (no bias loaded), residual, ffn_norm, SiLU SwiGLU,
 * residual; output tied without output.weight; expert_count <= 1 read as 0 (dense);
 * rope.scaling.alpha > 0 multiplies the base by alpha^(head_dim / (head_dim - 2)) (fp32
 * powf; the converters write the scaled base and no alpha). hunyuan-moe
 * (src/models/hunyuan-moe.cpp): the same attention; every FFN is the shared expert's SwiGLU
 * (expert_shared_feed_forward_length, else feed_forward_length) plus build_moe_ffn (SiLU,
 * softmax, norm_w true, expert_weights_scale not read: none, no selection bias) over
 * experts shaped {n_embd, feed_forward_length, n_expert} (expert_feed_forward_length is
 * required by the loader but not used for the shapes), moe + shared.
 * bailingmoe2 (src/models/bailingmoe2.cpp, llama-model.cpp's llama_model_rope_type: NeoX,
 * load_hparams' generic expert_group_count / expert_group_used_count and
 * nextn_predict_layers, llama-graph.cpp's build_qkv and build_moe_ffn,
 * conversion/bailingmoe.py: BailingMoeV2Model): attn_norm; attn_qkv (n_embd, n_embd + 2
 * n_head_kv head_dim; required, no biases loaded), per-head attn_q_norm / attn_k_norm RMS
 * norms (required), NeoX RoPE over rope.dimension_count (the converter's head_dim x
 * partial_rotary_factor, 0.5), scale 1/sqrt(head_dim), attn_output, residual; ffn_norm;
 * layers below leading_dense_block_count (optional, 0) a dense SiLU SwiGLU of
 * feed_forward_length, the others build_moe_ffn(exp_probs_b when present, SiLU,
 * expert_weights_norm (default false), expert_weights_scale (0 or 1: none),
 * expert_gating_func (required; the converter writes 2, sigmoid, from score_function))
 * with DeepSeek V3's groups when expert_group_count > 1, over experts of
 * expert_feed_forward_length (llama.cpp also takes a per-layer list: refused here), plus
 * the shared expert ffn_*_shexp of
 * (expert_shared_feed_forward_length, else expert_feed_forward_length) x
 * expert_shared_count (required) on the same input, added; residual; the last
 * nextn_predict_layers layers skipped (TENSOR_SKIP); output.weight required there.
 * exaone (src/models/exaone.cpp, llama-model.cpp's llama_model_rope_type: NeoX,
 * conversion/exaone.py: ExaoneModel): the llama graph with NeoX RoPE: attn_norm, Q/K/V
 * (create_tensor_qkv: attn_qkv or separate, biases when present), RoPE with rope_freqs when
 * present (the converter's "llama3" factors: EXAONE 3.5), scale 1/sqrt(head_dim),
 * attn_output (no bias loaded), residual, ffn_norm, SiLU SwiGLU, residual; output tied to
 * token_embd without output.weight; attention.layer_norm_rms_epsilon required; the graph
 * asserts rope.dimension_count == head size.
 * arcee (src/models/arcee.cpp: LLAMA_ROPE_TYPE_NORM; conversion/llama.py: ArceeModel, a
 * LlamaModel): llama's attention (interleaved RoPE with optional rope_freqs, Q/K/V biases
 * when present, no O bias, scale 1/sqrt(head_dim): f_attention_scale is never read for it),
 * then ffn_norm and build_ffn(up, no gate, down, LLM_FFN_RELU_SQR, LLM_FFN_SEQ):
 * down(sqr(relu(up x))); output tied without output.weight; the RMS eps required.
 * dots1 (src/models/dots1.cpp: NeoX; conversion/dots1.py: Dots1Model, a Qwen2MoeModel, and
 * base.py's n_group / topk_group / scoring_func keys): attn_norm; create_tensor_qkv with K
 * and V n_head * head_dim wide (so n_head_kv = n_head in any file llama.cpp loads), biases
 * when present; attn_q_norm / attn_k_norm per head (RMS, required) before RoPE; scale
 * 1/sqrt(head_dim); attn_output; residual; ffn_norm; layers below leading_dense_block_count
 * (optional, 0) a dense SiLU SwiGLU of feed_forward_length, the others build_moe_ffn(
 * exp_probs_b when present, SiLU, expert_weights_norm (default false), expert_weights_scale
 * (0 or 1: none), expert_gating_func (not defaulted: NONE aborts; the converter writes
 * dots.llm1's scoring_func, sigmoid)) with DeepSeek V3's groups when expert_group_count > 1,
 * over experts of expert_feed_forward_length (get_key_or_arr: a per-layer list refused
 * here), plus ffn_*_shexp of expert_feed_forward_length x expert_shared_count (required) on
 * the same input, moe + shared; residual; output.weight required there (tied here without
 * it, as every architecture's); the RMS eps required.
 * exaone-moe (src/models/exaone-moe.cpp: NeoX; conversion/exaone.py: ExaoneMoEModel, an
 * Exaone4Model): LLAMA_SWA_TYPE_STANDARD with sliding_window required, load_swa_pattern(4)
 * (the converter writes a bool per layer), rope.freq_base_swa read but unused by the graph
 * (freq_base on every layer); attn_norm; Q/K/V (create_tensor_qkv: biases when present);
 * attn_q_norm / attn_k_norm per head (required) before RoPE, which only the windowed layers
 * get (with rope_freqs when present); scale 1/sqrt(head_dim); attn_output; residual;
 * ffn_norm; a layer without ffn_gate_inp (those below leading_dense_block_count, optional)
 * a dense SiLU SwiGLU, the others build_moe_ffn(exp_probs_b when present, SiLU,
 * expert_weights_norm (default false), expert_weights_scale, expert_gating_func (required)),
 * DeepSeek V3's groups when expert_group_count > 1, plus the shared expert's SwiGLU of
 * expert_shared_feed_forward_length (when > 0, else expert_feed_forward_length; the
 * converter writes moe_intermediate_size x num_shared_experts; expert_shared_count is read
 * but does not shape it), moe + shared; residual; nextn_predict_layers layers skipped;
 * the RMS eps required.
 * bailingmoe (src/models/bailingmoe.cpp, llama-model.cpp's llama_model_rope_type: NORM,
 * conversion/bailingmoe.py: BailingMoeModel): the RMS eps required; attn_norm; Q/K/V
 * (create_tensor_qkv: attn_qkv or separate, biases when present; the converter splits
 * query_key_value) shaped n_head x n_rot and n_head_kv x n_rot, n_rot = rope.dimension_count
 * (the converter writes head_dim), reshaped by the head size, so both must agree;
 * interleaved RoPE with rope_freqs when present; scale 1/sqrt(n_rot); attn_output without
 * bias; residual; ffn_norm; in EVERY layer (leading_dense_block_count is read and logged
 * only) build_moe_ffn(no selection bias, SiLU, expert_weights_norm (default false; the
 * converter writes norm_topk_prob), expert_weights_scale (the converter writes 1.0),
 * SOFTMAX fixed by the graph), the generic expert groups (expert_group_count, read for every
 * file), plus the shared experts' SwiGLU (ffn_*_shexp, expert_feed_forward_length x
 * expert_shared_count (required)), moe + shared; residual; output.weight required there.
 * falcon-h1 (src/models/falcon-h1.cpp, mamba-base.cpp's build_mamba2_layer, llama-model.cpp's
 * llama_model_rope_type: NEOX and its hybrid memory with every layer both attention and
 * recurrent; conversion/falcon_h1.py: FalconH1Model, a Mamba2Model whose muP multipliers are
 * folded into the weights): the RMS eps required, the ssm.* keys (conv_kernel, inner_size
 * (mamba_d_ssm, not 2 n_embd), state_size, time_step_rank (heads), group_count) required;
 * head_count_kv one value, attention.key_length the head size; per layer: n = attn_norm(x);
 * attention of n (create_tensor_qkv: fused or separate, biases when present; NeoX RoPE WITHOUT
 * rope factors (the graph passes none: rope_freqs is loaded, unused); scale
 * f_attention_scale, never read for falcon-h1, so 1/sqrt(head_dim); attn_output, its bias
 * loaded when present but not passed to build_attn); the Mamba2 block of n (ssm_in,
 * ssm_conv1d with its optional bias, ssm_dt.bias, ssm_a, ssm_d, the optional grouped
 * ssm_norm {D / G, G}, ssm_out); x = (attn + ssm) + x; the FFN norm "blk.N.ffn_norm" (tn()
 * without a suffix: gguf-py maps pre_ff_layernorm.weight to FFN_PRE_NORM's name as it is),
 * SiLU SwiGLU (its optional biases refused here); residual; output_norm; output.weight or
 * token_embd. */
static const struct arch_info table[] = {
    {.name = "llama",
     .families = "Llama 2, Llama 3, 3.1, 3.2, 3.3, Mistral 7B, Mixtral, TinyLlama, SmolLM",
     .refuse_bias = true,
     .moe_ok = true},
    {.name = "qwen2", .families = "Qwen2, Qwen2.5", .rope_neox = true, .qkv_bias = true},
    {.name = "qwen3", .families = "Qwen3 (dense)", .rope_neox = true, .qk_norm = true},
    {.name = "qwen3moe",
     .families = "Qwen3 MoE (Qwen3-30B-A3B, Qwen3-235B-A22B)",
     .rope_neox = true,
     .qk_norm = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true},
    {.name = "qwen2vl",
     .families = "Qwen2-VL, Qwen2.5-VL, MiMo-VL (text)",
     .rope_neox = true,
     .opt_qkv_bias = true,
     .mrope = 1},
    {.name = "qwen3vl",
     .families = "Qwen3-VL (2B to 32B, text)",
     .rope_neox = true,
     .qk_norm = true,
     .opt_qkv_bias = true,
     .mrope = 2},
    {.name = "qwen3vlmoe",
     .families = "Qwen3-VL MoE (30B-A3B, 235B-A22B, text)",
     .rope_neox = true,
     .qk_norm = true,
     .opt_qkv_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .mrope = 2},
    {.name = "gemma2",
     .families = "Gemma 2",
     .rope_neox = true,
     .post_norms = true,
     .gelu = true,
     .embd_scale = true,
     .gemma_q_scale = true,
     .attn_softcap = 50.0f,
     .final_softcap = true,
     .final_softcap_default = 30.0f,
     .swa_pattern = 2,
     .swa_default = 4096},
    {.name = "gemma3",
     .families = "Gemma 3 (text)",
     .rope_neox = true,
     .qk_norm = true,
     .post_norms = true,
     .gelu = true,
     .embd_scale = true,
     .gemma_q_scale = true,
     .final_softcap = true,
     .swa_pattern = 6,
     .swa_needs_key = true,
     .swa_rope_own = true},
    {.name = "gemma4",
     .families = "Gemma 4 (31B, E2B/E4B, 26B-A4B MoE; text)",
     .rope_neox = true,
     .qk_norm = true,
     .post_norms = true,
     .gelu = true,
     .embd_scale = true,
     .final_softcap = true,
     .swa_pattern = 6,
     .swa_needs_key = true,
     .swa_rope_own = true,
     .gemma4 = true,
     .moe_ok = true, /* 26B-A4B (model.h's gemma4_moe) */
     .moe_ff_key = true},
    {.name = "gpt-oss",
     .families = "gpt-oss (gpt-oss-20b, gpt-oss-120b)",
     .rope_neox = true,
     .qkv_bias = true,
     .swa_pattern = 2,
     .swa_default = 128,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .oai = true,
     .ffn_norm_post_name = true},
    {.name = "phi3",
     .families = "Phi-3, Phi-3.5-mini, Phi-4-mini",
     .rope_neox = true,
     .fused_up = true,
     .swa_read_only = true},
    {.name = "olmo2",
     .families = "OLMo 2 (1B, 7B, 13B, 32B)",
     .rope_neox = true,
     .qk_norm = true,
     .qk_norm_full = true,
     .no_pre_norms = true,
     .post_norms = true,
     .swa_pattern = 4,
     .swa_needs_key = true,
     .swa_rope_plain = true},
    {.name = "mistral3",
     .families = "Ministral 3, Mistral Small 3.x, Devstral Small 2 (files converted as mistral3)",
     .opt_bias = true,
     .mistral3 = true},
    {.name = "smollm3", .families = "SmolLM3", .refuse_bias = true, .no_rope_step = 4},
    {.name = "seed_oss",
     .families = "Seed-OSS (ByteDance Seed-OSS-36B)",
     .rope_neox = true,
     .ffn_norm_post_name = true,
     .opt_qkv_bias = true},
    {.name = "apertus",
     .families = "Apertus (Swiss AI Apertus 8B, 70B)",
     .rope_neox = true,
     .qk_norm = true,
     .opt_bias = true,
     .xielu = true},
    {.name = "glm4",
     .families = "GLM-4 (GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1)",
     .post_norms = true,
     .fused_up = true,
     .opt_qkv_bias = true,
     .nextn = true},
    {.name = "glm4moe",
     .families = "GLM-4.5, GLM-4.5-Air, GLM-4.6 (MoE)",
     .rope_neox = true,
     .ffn_norm_post_name = true,
     .opt_qkv_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .nextn = true,
     .glm4moe = true},
    {.name = "deepseek2",
     .families = "DeepSeek-V2, V2-Lite, V2.5, V3, R1, Kimi-K2, GLM-4.7-Flash (MLA)",
     .moe_ok = true,
     .moe_ff_key = true,
     .nextn = true,
     .mla = true},
    {.name = "command-r",
     .families = "Cohere Command-R (35B), Command R+ (104B), Aya 23",
     .opt_qkv_bias = true,
     .cohere = true},
    {.name = "cohere2",
     .families = "Cohere Command R7B, Command A (111B)",
     .swa_pattern = 4,
     .opt_qkv_bias = true,
     .cohere = true,
     .swa_rope_only = true},
    {.name = "minimax-m2",
     .families = "MiniMax-M2, MiniMax-M2.1 (230B-A10B)",
     .rope_neox = true,
     .qk_norm = true,
     .qk_norm_full = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .moe_sigmoid_sel = true},
    {.name = "lfm2",
     .families = "Liquid AI LFM2, LFM2.5 (350M to 2.6B)",
     .rope_neox = true,
     .qk_norm = true,
     .shortconv = true},
    {.name = "lfm2moe",
     .families = "Liquid AI LFM2-8B-A1B, LFM2-24B-A2B",
     .rope_neox = true,
     .qk_norm = true,
     .shortconv = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .moe_sigmoid_sel = true,
     .moe_dense_lead = true},
    {.name = "qwen35",
     .families = "Qwen3.5 (dense: 0.8B to 27B)",
     .rope_neox = true,
     .qk_norm = true,
     .ffn_norm_post_name = true,
     .nextn = true,
     .gdn = true,
     .mrope = 2},
    {.name = "qwen35moe",
     .families = "Qwen3.5 MoE (35B-A3B, 122B-A10B, 397B-A17B)",
     .rope_neox = true,
     .qk_norm = true,
     .ffn_norm_post_name = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .nextn = true,
     .mrope = 2,
     .gdn = true,
     .shexp_gate = true},
    {.name = "qwen3next",
     .families = "Qwen3-Next-80B-A3B (Instruct, Thinking), Qwen3-Coder-Next",
     .rope_neox = true,
     .qk_norm = true,
     .ffn_norm_post_name = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .nextn = true,
     .gdn = true,
     .shexp_gate = true,
     .gdn_next = true},
    {.name = "qwen2moe",
     .families = "Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B",
     .rope_neox = true,
     .qkv_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .shexp_gate = true,
     .moe_raw_weights = true},
    {.name = "granite",
     .families = "IBM Granite 3.x (dense)",
     .opt_bias = true,
     .granite = true},
    {.name = "granitemoe",
     .families = "IBM Granite 3.x MoE (granite-3.x-1b-a400m, -3b-a800m)",
     .opt_bias = true,
     .granite = true,
     .moe_ok = true,
     .moe_only = true},
    {.name = "granitehybrid",
     .families = "IBM Granite 4.0-H (Micro, Tiny, Small)",
     .granite = true,
     .moe_ok = true,
     .mamba2 = true},
    {.name = "nemotron_h",
     .families = "NVIDIA Nemotron Nano 9B v2, 12B v2",
     .mamba2 = true,
     .nemotron_h = true},
    {.name = "nemotron_h_moe",
     .families = "NVIDIA Nemotron 3 Nano (30B-A3B)",
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .mamba2 = true,
     .nemotron_h = true},
    {.name = "step35",
     .families = "StepFun Step-3.5-Flash",
     .rope_neox = true,
     .swa_pattern = 1, /* the file's list (required) replaces it */
     .moe_ok = true,
     .moe_ff_key = true,
     .nextn = true,
     .step35 = true},
    {.name = "exaone4",
     .families = "LG EXAONE 4.0 (1.2B, 32B)",
     .rope_neox = true,
     .qk_norm = true,
     .no_pre_norms = true,
     .post_norms = true,
     .swa_pattern = 4,
     .swa_default = 4096,
     .nextn = true,
     .swa_rope_only = true,
     .exaone4 = true},
    {.name = "olmoe",
     .families = "AllenAI OLMoE (OLMoE-1B-7B)",
     .rope_neox = true,
     .qk_norm = true,
     .qk_norm_full = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_raw_weights = true},
    {.name = "llama4",
     .families = "Meta Llama 4 (Scout 17B-16E, Maverick 17B-128E; text only)",
     .swa_pattern = 4,
     .swa_default = 8192,
     .refuse_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .no_rope_step = 4,
     .llama4 = true},
    {.name = "ernie4_5",
     .families = "Baidu ERNIE 4.5 (0.3B, dense)",
     .opt_qkv_bias = true,
     .rms_eps_key = true},
    {.name = "ernie4_5-moe",
     .families = "Baidu ERNIE 4.5 MoE (21B-A3B, 300B-A47B)",
     .opt_qkv_bias = true,
     .rms_eps_key = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .ernie_moe = true},
    {.name = "hunyuan-dense",
     .families = "Tencent Hunyuan (0.5B, 1.8B, 4B, 7B, dense)",
     .rope_neox = true,
     .rms_eps_key = true,
     .qk_norm = true,
     .opt_qkv_bias = true,
     .qk_norm_after_rope = true},
    {.name = "hunyuan-moe",
     .families = "Tencent Hunyuan-A13B (MoE)",
     .rope_neox = true,
     .rms_eps_key = true,
     .qk_norm = true,
     .opt_qkv_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .qk_norm_after_rope = true,
     .hunyuan_moe = true},
    {.name = "bailingmoe2",
     .families = "inclusionAI Ling 2.0, Ring 2.0 (Ling-mini-2.0, Ling-flash-2.0, Ring-mini-2.0)",
     .rope_neox = true,
     .qk_norm = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .nextn = true,
     .bailing = true},
    {.name = "exaone",
     .families = "LG EXAONE 3.0, EXAONE 3.5 (2.4B, 7.8B, 32B)",
     .rope_neox = true,
     .opt_qkv_bias = true,
     .rms_eps_key = true},
    {.name = "arcee",
     .families = "Arcee AFM-4.5B",
     .opt_qkv_bias = true,
     .rms_eps_key = true,
     .relu2_ffn = true},
    {.name = "dots1",
     .families = "rednote dots.llm1 (142B-A14B)",
     .rope_neox = true,
     .qk_norm = true,
     .opt_qkv_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .rms_eps_key = true,
     .dots1 = true},
    {.name = "exaone-moe",
     .families = "LG K-EXAONE (236B-A23B)",
     .rope_neox = true,
     .qk_norm = true,
     .swa_pattern = 4,
     .swa_default = 128,
     .opt_qkv_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .nextn = true,
     .swa_rope_only = true,
     .rms_eps_key = true,
     .exaone_moe = true},
    {.name = "bailingmoe",
     .families = "inclusionAI Ling 1.0 (Ling-lite, Ling-plus, Ling-Coder-lite)",
     .opt_qkv_bias = true,
     .moe_ok = true,
     .moe_only = true,
     .moe_ff_key = true,
     .rms_eps_key = true,
     .bailingmoe = true},
    {.name = "falcon-h1",
     .families = "TII Falcon-H1 (0.5B, 1.5B, 1.5B-Deep, 3B, 7B, 34B)",
     .rope_neox = true,
     .opt_qkv_bias = true,
     .rms_eps_key = true,
     .falcon_h1 = true},
};

#define N_ARCH (sizeof table / sizeof table[0])

const struct arch_info *arch_find(const char *name)
{
	for (size_t i = 0; i < N_ARCH; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

const char *arch_names(void)
{
	return "llama, qwen2, qwen3, qwen3moe, qwen2vl, qwen3vl, qwen3vlmoe, gemma2, gemma3, "
	       "gemma4, gpt-oss, phi3, olmo2, "
	       "granite, granitemoe, mistral3, smollm3, seed_oss, apertus, glm4, glm4moe, "
	       "deepseek2, command-r, cohere2, minimax-m2, lfm2, lfm2moe, qwen35, qwen35moe, "
	       "qwen3next, qwen2moe, granitehybrid, nemotron_h, nemotron_h_moe, step35, exaone4, "
	       "olmoe, llama4, ernie4_5, ernie4_5-moe, hunyuan-dense, hunyuan-moe, bailingmoe2, "
	       "exaone, arcee, dots1, exaone-moe, bailingmoe, falcon-h1";
}

/* ggml_rope_yarn_corr_dim, in float as ggml computes it (the floor/ceil that follow
 * depend on it) */
static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
	return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) /
	       (2.0f * logf(base));
}

void arch_rope_freqs(const struct model_hparams *hp, const float *factors, bool swa, double *freq,
		     float *mscale)
{
	uint32_t rd = model_rope_dim(hp, swa);
	int half = (int)rd / 2;
	double base = swa ? hp->rope_base_swa : hp->rope_base;
	float scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale;
	float lo = 0.0f, hi = 0.0f;
	if (hp->rope_yarn) {
		lo = floorf(corr_dim((int)rd, (int)hp->n_ctx_orig, 32.0f, (float)base));
		hi = ceilf(corr_dim((int)rd, (int)hp->n_ctx_orig, 1.0f, (float)base));
		lo = fmaxf(0.0f, lo);
		hi = fminf((float)rd - 1.0f, hi);
	}
	for (int i = 0; i < half; i++) {
		double f = pow(base, -2.0 * i / (double)rd);
		if (factors && !(swa && hp->rope_factors_global))
			f /= (double)factors[i];
		double mix = 0.0;
		if (hp->rope_yarn) { /* ggml's rope_yarn_ramp, ext_factor 1 */
			float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
			mix = 1.0 - fmin(1.0, fmax(0.0, (double)y));
		}
		freq[i] = f * ((double)scale * (1.0 - mix) + mix);
		/* mrope: the 4th position, 0 for text: cos 1, sin 0 (times mscale) */
		if (hp->rope_mrope &&
		    !arch_mrope_pair_turns(hp->rope_mrope, hp->rope_sections, (uint32_t)i))
			freq[i] = 0.0;
	}
	/* llama.cpp: attn_factor = rope.scaling.attn_factor (default 1), and with YaRN ggml
	 * multiplies by 1 + 0.1 ln(1 / freq_scale) where llama_context has divided by it
	 * again, leaving get_mscale(factor) = 1 + 0.1 ln(factor) for factor > 1 */
	float m = swa ? hp->rope_attn_factor_swa : hp->rope_attn_factor;
	/* deepseek2 with rope_yarn_log_mul: llama_context's get_mscale ratio is 1, so ggml's
	 * factor is cancelled and rope.scaling.attn_factor remains */
	if (hp->rope_yarn && scale < 1.0f && hp->rope_yarn_log_mul == 0.0f)
		m *= 1.0f + 0.1f * logf(1.0f / scale);
	*mscale = m;
}

bool arch_mrope_pair_turns(uint8_t mrope, const int32_t sections[4], uint32_t i)
{
	const int64_t sum = (int64_t)sections[0] + sections[1] + sections[2] + sections[3];
	const int64_t sector = (int64_t)i % sum; /* arch_mrope_sections_ok: sum in [1, head_dim] */
	if (mrope == 1)
		return sector < (int64_t)sections[0] + sections[1] + sections[2];
	const int k = (int)(sector % 3);
	return sector < 3 * (int64_t)sections[k];
}

bool arch_mrope_sections_ok(const int32_t s[4], uint32_t head_dim)
{
	return s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && s[3] >= 0 &&
	       (int64_t)s[0] + s[1] + s[2] > 0 &&
	       (int64_t)s[0] + s[1] + s[2] + s[3] <= (int64_t)head_dim;
}

float arch_mla_kq_scale(const struct model_hparams *hp)
{
	const float fs = hp->rope_freq_scale;
	float af = hp->rope_attn_factor; /* llama_context's yarn_attn_factor */
	if (hp->rope_yarn) {
		const float factor = 1.0f / fs;
		float g = factor <= 1.0f || hp->rope_yarn_log_mul != 0.0f
			      ? 1.0f
			      : 0.1f * logf(factor) + 1.0f;
		af = g * (1.0f / (1.0f + 0.1f * logf(factor))) * hp->rope_attn_factor;
	}
	const float org = af * (1.0f + 0.1f * logf(1.0f / fs));
	const float ms = org * (1.0f + 0.1f * hp->rope_yarn_log_mul * logf(1.0f / fs));
	return 1.0f * ms * ms / sqrtf((float)(hp->mla_nope + hp->rope_dim));
}

void arch_rope_cos_sin(const double *freq, int half, double pos, float mscale, float *cs)
{
	for (int i = 0; i < half; i++) {
		cs[2 * i] = (float)cos(pos * freq[i]) * mscale;
		cs[2 * i + 1] = (float)sin(pos * freq[i]) * mscale;
	}
}

float arch_attn_temp(const struct model_hparams *hp, int32_t pos)
{
	if (hp->attn_temp_scale == 0.0f)
		return 1.0f;
	float p = (float)pos + hp->attn_temp_offset;
	float fl = floorf(p / (float)hp->attn_temp_floor);
	return (float)(log((double)fl + 1.0) * (double)hp->attn_temp_scale + 1.0);
}
