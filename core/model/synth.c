/* synth: synthetic Llama models and the built-in model. See synth.h. */
#include "model/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/half.h"

/* ---- shapes ---- */

/* the architecture extras after `arch` are zero unless named */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct synth_shape shapes[] = {
    /* name        layers embd heads kv  ffn    vocab   ctx   rope_base  eps  tied  arch */
    {"llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0f, 1e-5f, false, "llama"},
    /* Llama 3.2 1B / 3B: rope_freqs ("llama3" factor 32 over 8192), 128k context */
    {"llama-3.2-1b", 16, 2048, 32, 8, 8192, 128256, 131072, 500000.0f, 1e-5f, true, "llama",
     .n_ctx_orig = 8192, .rope_freqs = true, .rope_factor = 32.0f},
    {"llama-3.2-3b", 28, 3072, 24, 8, 8192, 128256, 131072, 500000.0f, 1e-5f, true, "llama",
     .n_ctx_orig = 8192, .rope_freqs = true, .rope_factor = 32.0f},
    {"llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 10000.0f, 1e-5f, false, "llama"},
    {"llama-2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 10000.0f, 1e-5f, false, "llama"},
    {"tinyllama-1.1b", 22, 2048, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false, "llama"},
    {"llama-100m", 12, 768, 12, 12, 2048, 32000, 2048, 10000.0f, 1e-5f, true, "llama"},
    {"tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "llama"},
    /* Qwen2.5-0.5B's config.json (rms_norm_eps 1e-6, rope_theta 1e6, tied embeddings) */
    {"qwen2.5-0.5b", 24, 896, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, true, "qwen2"},
    {"qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 32768, 1000000.0f, 1e-6f, false, "qwen2"},
    /* tiny with Q/K/V biases and NeoX RoPE, untied so output.weight is exercised too */
    {"qwen2-tiny", 2, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-6f, false, "qwen2"},
    /* n_vocab 0: exactly the generated pieces */
    {"builtin", 4, 128, 4, 2, 344, 0, 1024, 10000.0f, 1e-5f, true, "llama"},
    /* Llama 3.1 / 3.3: rope_freqs ("llama3" factor 8 over 8192), 70B with the same */
    {"llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, 131072, 500000.0f, 1e-5f, false, "llama",
     .n_ctx_orig = 8192, .rope_freqs = true},
    {"llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, 131072, 500000.0f, 1e-5f, false, "llama",
     .n_ctx_orig = 8192, .rope_freqs = true},
    /* tiny test shapes of each feature; small original contexts and windows so that
     * prompts of ~40 tokens exercise them */
    {"llama3-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "llama",
     .n_ctx_orig = 64, .rope_freqs = true},
    {"llama-linear-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "llama",
     .rope_scaling = "linear", .rope_factor = 4.0f},
    {"llama-yarn-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "llama",
     .rope_scaling = "yarn", .rope_factor = 4.0f, .n_ctx_orig = 64},
    /* Qwen3-0.6B's config.json: head_dim 128 (n_head * head_dim = 2048 != n_embd) */
    {"qwen3-0.6b", 28, 1024, 16, 8, 3072, 151936, 40960, 1000000.0f, 1e-6f, true, "qwen3",
     .head_dim = 128},
    {"qwen3-8b", 36, 4096, 32, 8, 12288, 151936, 40960, 1000000.0f, 1e-6f, false, "qwen3",
     .head_dim = 128},
    {"qwen3-tiny", 2, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-6f, false, "qwen3",
     .head_dim = 32},
    /* Gemma 2 2B / Gemma 3 1B config.json values */
    {"gemma2-2b", 26, 2304, 8, 4, 9216, 256000, 8192, 10000.0f, 1e-6f, true, "gemma2",
     .head_dim = 256, .n_swa = 4096},
    {"gemma2-tiny", 4, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-6f, true, "gemma2", .head_dim = 32,
     .n_swa = 16, .attn_softcap = 2.0f, .final_softcap = 3.0f},
    /* gemma2-tiny with sliding_window_pattern 0: every layer windowed (llama.cpp's
     * set_swa_pattern), the case where the engine gives back blocks behind the window */
    {"gemma2-swa-tiny", 4, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-6f, true, "gemma2",
     .head_dim = 32, .n_swa = 16, .swa_all = true, .attn_softcap = 2.0f, .final_softcap = 3.0f},
    {"gemma3-1b", 26, 1152, 4, 1, 6912, 262144, 32768, 1000000.0f, 1e-6f, true, "gemma3",
     .head_dim = 256, .n_swa = 512},
    {"gemma3-tiny", 6, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-6f, false, "gemma3",
     .head_dim = 32, .n_swa = 16},
    /* Phi-3-mini-4k: sliding_window 2047 in the file, not applied */
    {"phi3-mini", 32, 3072, 32, 32, 8192, 32064, 4096, 10000.0f, 1e-5f, false, "phi3",
     .n_swa = 2047},
    /* Gemma 4 31B (google/gemma-4-31B config.json: hidden 5376, 60 layers, 32 heads;
     * sliding layers head_dim 256, 16 K/V heads, window 1024, RoPE base 10000; every 6th
     * layer global: global_head_dim 512, 4 K/V heads, no v_proj (attention_k_eq_v), base
     * 1e6 with partial_rotary_factor 0.25; intermediate 21504, vocab 262144, tied,
     * final_logit_softcapping 30, a layer_scalar per layer). Parameters, by hand:
     * embeddings 262144 * 5376 = 1,409,286,144; a windowed layer 5376 * 8192 (Q) + 2 *
     * 5376 * 4096 (K, V) + 8192 * 5376 (O) + 3 * 5376 * 21504 (FFN) + 4 * 5376 (norms) +
     * 2 * 256 (Q/K norms) + 1 (scale) = 478,959,105; a global layer 5376 * 16384 + 5376 *
     * 2048 + 16384 * 5376 + 3 * 5376 * 21504 + 4 * 5376 + 2 * 512 + 1 = 534,009,857; 50
     * windowed + 10 global + output norm 5376 + rope_freqs 256: 30,697,345,596 (the
     * model card's 30.7B) */
    {"gemma4-31b", 60, 5376, 32, 4, 21504, 262144, 262144, 1000000.0f, 1e-6f, true, "gemma4",
     .head_dim = 512, .n_swa = 1024, .final_softcap = 30.0f, .head_dim_swa = 256,
     .n_head_kv_swa = 16, .rope_base_swa = 10000.0f, .swa_period = 6, .rope_partial = 0.25f,
     .k_eq_v = true, .out_scale = true},
    /* gemma4 in small: layers 0, 1, 3, 4 windowed (16, head size 16, 2 K/V heads, base
     * 10000), 2 and 5 global (head size 32, 1 K/V head, no attn_v, base 1e6 turning 4 of
     * 16 pairs), final soft-cap 30 */
    {"gemma4-tiny", 6, 64, 4, 1, 128, 512, 256, 1000000.0f, 1e-6f, false, "gemma4",
     .head_dim = 32, .n_swa = 16, .final_softcap = 30.0f, .head_dim_swa = 16,
     .n_head_kv_swa = 2, .rope_base_swa = 10000.0f, .swa_period = 3, .rope_partial = 0.25f,
     .k_eq_v = true, .out_scale = true},
    /* gemma4-tiny with the released models' head sizes: layers 0 and 1 windowed (head size
     * 256, 2 K/V heads: the GQA decode kernel), layer 2 global (head size 512, 1 K/V head
     * for 4 query heads: the per-query kernel, 16 dimensions a lane), 128 of 512 rotated */
    {"gemma4-hd512-tiny", 3, 64, 4, 1, 128, 512, 256, 1000000.0f, 1e-6f, false, "gemma4",
     .head_dim = 512, .n_swa = 16, .final_softcap = 30.0f, .head_dim_swa = 256,
     .n_head_kv_swa = 2, .rope_base_swa = 10000.0f, .swa_period = 3, .rope_partial = 0.25f,
     .k_eq_v = true, .out_scale = true},
    /* gemma4-tiny with E2B/E4B's two features: per-layer token embeddings of 32 a layer
     * (so that q8_0's blocks fit the projection's rows), and the last 3 layers sharing KV
     * (3 and 4 read layer 1's cache, 5 reads layer 2's) with FFNs twice as wide (256) */
    {"gemma4-e-tiny", 6, 64, 4, 1, 128, 512, 256, 1000000.0f, 1e-6f, false, "gemma4",
     .head_dim = 32, .n_swa = 16, .final_softcap = 30.0f, .head_dim_swa = 16,
     .n_head_kv_swa = 2, .rope_base_swa = 10000.0f, .swa_period = 3, .rope_partial = 0.25f,
     .k_eq_v = true, .out_scale = true, .n_embd_per_layer = 32, .shared_kv_layers = 3,
     .double_wide = true},
    /* gemma4 with experts (26B-A4B in small): gemma4-tiny's first 3 layers (0, 1 windowed,
     * 2 global); layer 0 a dense FFN alone (no router), layers 1 and 2 the dense FFN of 128
     * beside 4 GELU experts of 32, 2 a token, with the router's input scale, the experts'
     * pre- and post-norms, the dense FFN's post-norm and per-expert down scales;
     * -gu: the experts' gate and up fused (ffn_gate_up_exps, per expert [gate | up]) */
    {"gemma4-moe-tiny", 3, 64, 4, 1, 128, 512, 256, 1000000.0f, 1e-6f, false, "gemma4",
     .head_dim = 32, .n_swa = 16, .final_softcap = 30.0f, .head_dim_swa = 16,
     .n_head_kv_swa = 2, .rope_base_swa = 10000.0f, .swa_period = 3, .rope_partial = 0.25f,
     .k_eq_v = true, .out_scale = true, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32,
     .n_dense_lead = 1},
    {"gemma4-moe-gu-tiny", 3, 64, 4, 1, 128, 512, 256, 1000000.0f, 1e-6f, false, "gemma4",
     .head_dim = 32, .n_swa = 16, .final_softcap = 30.0f, .head_dim_swa = 16,
     .n_head_kv_swa = 2, .rope_base_swa = 10000.0f, .swa_period = 3, .rope_partial = 0.25f,
     .k_eq_v = true, .out_scale = true, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32,
     .n_dense_lead = 1, .gate_up_exps = true},
    {"phi3-tiny", 2, 64, 4, 4, 128, 512, 256, 10000.0f, 1e-5f, false, "phi3", .n_swa = 16,
     .n_ctx_orig = 64},
    /* mixtures of experts. Qwen3-30B-A3B's config.json (feed_forward_length is its
     * intermediate_size 6144, unused by the MoE layers; experts 768 wide); Mixtral 8x7B's */
    {"qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 40960, 1000000.0f, 1e-6f, false,
     "qwen3moe", .head_dim = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
    {"mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, 1000000.0f, 1e-5f, false, "llama",
     .n_expert = 8, .n_expert_used = 2},
    /* 4 of 8 experts a token: with more than 2 slots the order of the weighted sum
     * matters to the bits (2 addends commute), so tests of it can fail */
    {"qwen3moe-tiny", 2, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-6f, false, "qwen3moe",
     .head_dim = 32, .n_expert = 8, .n_expert_used = 4, .n_ff_exp = 32},
    {"mixtral-tiny", 2, 64, 4, 2, 64, 512, 256, 1000000.0f, 1e-5f, false, "llama",
     .n_expert = 8, .n_expert_used = 2},
    /* gpt-oss-20b's config.json (head_dim 64 != 2880 / 64; YaRN factor 32 over 4096, base
     * 150000; window 128 on even layers; feed_forward_length = intermediate_size) */
    {"gpt-oss-20b", 24, 2880, 64, 8, 2880, 201088, 131072, 150000.0f, 1e-5f, false,
     "gpt-oss", .head_dim = 64, .n_swa = 128, .rope_scaling = "yarn", .rope_factor = 32.0f,
     .n_ctx_orig = 4096, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880},
    /* its features small: head_dim 32 != 64 / 4, a window of 16, YaRN over 64 */
    /* granite: its scales chosen so that each visibly matters (llama.cpp's granite graph;
     * Granite 3.x itself: embedding 12, attention 1/128 at head_dim 128, residual
     * 0.22); 4 layers, head_dim 16, attention scale 1/8 instead of 1/4 */
    {"granite-tiny", 4, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "granite",
     .embd_scale = 12.0f, .attn_scale = 0.125f, .residual_scale = 0.22f, .logit_scale = 8.0f},
    /* granitemoe: granite-tiny's scales, 8 experts as wide as ffn (64), 2 a token */
    {"granitemoe-tiny", 4, 64, 4, 2, 64, 512, 256, 10000.0f, 1e-5f, false, "granitemoe",
     .n_expert = 8, .n_expert_used = 2, .embd_scale = 12.0f, .attn_scale = 0.125f,
     .residual_scale = 0.22f, .logit_scale = 8.0f},
    /* mistral3: temperature tuning 0.5 over an original context of 16, so that the 41-token
     * prompt + 12 crosses three floors (at positions 16, 32 and 48);
     * YaRN factor 4 over the same 16 (the graph's own attn_factor) */
    {"mistral3-tiny", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, false, "mistral3",
     .rope_scaling = "yarn", .rope_factor = 4.0f, .n_ctx_orig = 16, .attn_temp_scale = 0.5f},
    /* smollm3: 8 layers, so that two (3 and 7) have no RoPE; tied, as SmolLM3-3B */
    {"smollm3-tiny", 8, 64, 4, 2, 128, 512, 256, 5000000.0f, 1e-6f, true, "smollm3"},
    /* mistral3-tiny with Q/K/V and O biases (its graph adds them when present) */
    {"mistral3-bias-tiny", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, false, "mistral3",
     .rope_scaling = "yarn", .rope_factor = 4.0f, .n_ctx_orig = 16, .attn_temp_scale = 0.5f,
     .biases = true},
    {"gpt-oss-tiny", 2, 64, 4, 2, 32, 512, 2048, 150000.0f, 1e-5f, false, "gpt-oss",
     .head_dim = 32, .n_swa = 16, .rope_scaling = "yarn", .rope_factor = 32.0f,
     .n_ctx_orig = 64, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32},
    /* OLMo-2-1124-7B's and OLMo-2-0425-1B's config.json; tiny: GQA (as OLMo 2 32B) so the
     * K norm is narrower than the Q norm, norm weights 1 + N(0, 0.25^2) */
    {"olmo2-7b", 32, 4096, 32, 32, 11008, 100352, 4096, 500000.0f, 1e-6f, false, "olmo2"},
    {"olmo2-1b", 16, 2048, 16, 16, 8192, 100352, 4096, 500000.0f, 1e-6f, false, "olmo2"},
    {"olmo2-tiny", 2, 64, 4, 2, 128, 512, 256, 500000.0f, 1e-6f, false, "olmo2"},
    /* OLMo 3 (olmo2 with windows): layers 0-2 windowed (16), 3 global; YaRN over 64 on
     * the global layer only; the pattern as the converter writes it, a bool per layer */
    {"olmo3-tiny", 4, 64, 4, 2, 128, 512, 256, 500000.0f, 1e-6f, false, "olmo2", .n_swa = 16,
     .rope_scaling = "yarn", .rope_factor = 4.0f, .n_ctx_orig = 64, .rope_attn_factor = 1.25f},
    /* Seed-OSS-36B's config.json: hidden 5120, intermediate 27648, 64 layers, 80 / 8 heads
     * of head_dim 128 (80 * 128 = 10240 != 5120), vocab 155136, rope_theta 1e7, context
     * 524288, rms_norm_eps 1e-6, attention_bias true (Q/K/V), attention_out_bias false,
     * untied. Parameters: embeddings 2 x 155136 x 5120 = 1,588,592,640, final norm 5120,
     * each layer 5120 x (10240 + 1024 + 1024) + 10240 x 5120 (Q, K, V, O: 115,343,360) +
     * 12,288 biases + 2 x 5120 norms + 3 x 5120 x 27648 (FFN: 424,673,280) = 540,039,168,
     * x 64 = 34,562,506,752; total 36,151,104,512 (36.2 B, the "36B") */
    {"seed-oss-36b", 64, 5120, 80, 8, 27648, 155136, 524288, 10000000.0f, 1e-6f, false,
     "seed_oss", .head_dim = 128, .biases = true},
    /* seed_oss small: head_dim 32 != 64 / 4 as the real one's, Q/K/V biases */
    {"seed_oss-tiny", 2, 64, 4, 2, 128, 512, 256, 10000000.0f, 1e-6f, false, "seed_oss",
     .head_dim = 32, .biases = true},
    /* Apertus-8B-2509's config.json: hidden 4096, intermediate 21504, 32 layers, 32 / 8
     * heads, vocab 131072, rope_theta 12e6 with llama3 scaling (factor 8 over 8192),
     * context 65536, rms_norm_eps 1e-5, no biases, untied. Parameters: embeddings 2 x
     * 131072 x 4096 = 1,073,741,824, final norm 4096, each layer 4096 x (4096 + 1024 +
     * 1024) + 4096 x 4096 (Q, K, V, O: 41,943,040) + 2 x 128 Q/K norms + 2 x 4096 norms +
     * 2 x 4096 x 21504 (up, down: 176,160,768) = 218,112,256, x 32 = 6,979,592,192;
     * total 8,053,338,112 (+ 64 rope factors: 8.05 B, the "8B"). Apertus-70B: hidden
     * 8192, intermediate 43008, 80 layers, 64 / 8 heads, the same vocabulary: embeddings
     * 2,147,483,648 + 8192 + 80 x (8192 x 10240 + 8192 x 8192 + 256 + 16384 + 2 x 8192 x
     * 43008 = 855,654,656) = 70,599,864,320 (70.6 B) */
    {"apertus-8b", 32, 4096, 32, 8, 21504, 131072, 65536, 12000000.0f, 1e-5f, false,
     "apertus", .n_ctx_orig = 8192, .rope_freqs = true},
    {"apertus-70b", 80, 8192, 64, 8, 43008, 131072, 65536, 12000000.0f, 1e-5f, false,
     "apertus", .n_ctx_orig = 8192, .rope_freqs = true},
    /* apertus small: llama3 factors over 64, 3 layers of different xIELU values, Q/K/V
     * and O biases (its graph adds them when present) */
    {"apertus-tiny", 3, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "apertus",
     .n_ctx_orig = 64, .rope_freqs = true, .biases = true},
    /* GLM-4-9B-0414's config.json (as remembered; no network here): hidden 4096,
     * intermediate 13696, 40 layers, 32 / 2 heads of 128, partial_rotary_factor 0.5 (64
     * rotated), vocab 151552, rope_theta 10000, rms_norm_eps 1e-5, context 32768,
     * attention_bias true (Q/K/V), untied; llama.cpp's glm4 loader names 40 layers 9B and
     * 61 32B. Parameters: embeddings 2 x 151552 x 4096 = 1,241,513,984, final norm 4096,
     * each layer 4096 x (4096 + 256 + 256) + 4096 x 4096 (Q, K, V, O: 35,651,584) + 4608
     * biases + 4 x 4096 norms + 3 x 4096 x 13696 (gate|up, down: 168,296,448) =
     * 203,969,024, x 40 = 8,158,760,960; total 9,400,279,040 (the published 9.4 B).
     * GLM-4-32B-0414: hidden 6144, intermediate 23040, 61 layers, 48 / 8 heads of 128:
     * embeddings 1,862,467,584 + 6144 + 61 x (6144 x (6144 + 2048) + 6144 x 6144 + 7168 +
     * 24,576 + 3 x 6144 x 23040 = 512,786,432) = 33,142,249,472 (33.1 B) */
    {"glm4-9b", 40, 4096, 32, 2, 13696, 151552, 32768, 10000.0f, 1e-5f, false, "glm4",
     .rope_dim = 64, .biases = true},
    {"glm4-32b", 61, 6144, 48, 8, 23040, 151552, 32768, 10000.0f, 1e-5f, false, "glm4",
     .rope_dim = 64, .biases = true},
    /* glm4 small: 8 of 16 dimensions rotated (interleaved), Q/K/V biases, post-norms, one
     * NextN layer after the 2 computed ones */
    {"glm4-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "glm4", .rope_dim = 8,
     .biases = true, .n_nextn = 1},
    /* GLM-4.5-Air's config.json (as remembered; no network here): hidden 4096,
     * intermediate 10944 (the dense layer), moe_intermediate_size 1408, 46 layers (+ 1
     * NextN, not built here), 96 / 8 heads of 128 (Q 12288 wide), 128 routed experts, 8 a
     * token, 1 shared, first_k_dense_replace 1, routed_scaling_factor 1, norm_topk_prob
     * true, partial_rotary_factor 0.5, rope_theta 1e6, vocab 151552, attention_bias true,
     * use_qk_norm false, untied. Parameters: embeddings 2 x 151552 x 4096 =
     * 1,241,513,984, final norm 4096; each layer's attention 4096 x (12288 + 2 x 1024) +
     * 12288 x 4096 + 14,336 biases + 2 x 4096 norms = 109,074,432; the dense FFN 3 x 4096
     * x 10944 = 134,479,872; a MoE FFN 4096 x 128 (router) + 3 x 4096 x 1408 x 128 + 128
     * (exp_probs_b) + 3 x 4096 x 1408 (shared) = 2,232,418,432; total 1,241,518,080 + 46
     * x 109,074,432 + 134,479,872 + 45 x 2,232,418,432 = 106,852,251,264 (the published
     * 106B). GLM-4.5: hidden 5120, intermediate 12288, moe 1536, 92 layers, 96 / 8 heads,
     * 160 experts, 3 dense, routed_scaling_factor 2.5, Q/K norms: 352,797,829,024 without
     * its NextN layer (~4.0 B more: the published 355B) */
    {"glm4.5-air", 46, 4096, 96, 8, 10944, 151552, 131072, 1000000.0f, 1e-5f, false,
     "glm4moe", .head_dim = 128, .rope_dim = 64, .biases = true, .n_expert = 128,
     .n_expert_used = 8, .n_ff_exp = 1408, .n_expert_shared = 1, .n_dense_lead = 1,
     .no_qk_norm = true},
    {"glm4.5", 92, 5120, 96, 8, 12288, 151552, 131072, 1000000.0f, 1e-5f, false, "glm4moe",
     .head_dim = 128, .rope_dim = 64, .biases = true, .n_expert = 160, .n_expert_used = 8,
     .n_ff_exp = 1536, .n_expert_shared = 1, .n_dense_lead = 3, .expert_scale = 2.5f},
    /* glm4moe small: 1 dense layer then 2 MoE layers (8 experts of 32, 2 a token, 1
     * shared, the selection bias, scale 2.5), one NextN layer after them; head_dim 32
     * with 4 heads of a 64-wide model, 16 of 32 dimensions rotated (NeoX), Q/K norms,
     * Q/K/V biases */
    {"glm4moe-tiny", 3, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, false, "glm4moe",
     .head_dim = 32, .rope_dim = 16, .biases = true, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 32, .n_expert_shared = 1, .n_dense_lead = 1, .expert_scale = 2.5f,
     .n_nextn = 1},
    /* minimax-m2: MiniMax-M2 / M2.1 (230B-A10B). The values are MiniMaxM2Config's defaults
     * as a public copy of the configuration holds them (ModelCloud/GPTQModel,
     * gptqmodel/hf_minimax_m2/configuration_minimax_m2.py): hidden 3072, 62 layers, 48 / 8
     * heads of 128, rotary_dim 64, 256 experts of intermediate_size 1536, 8 a token,
     * vocab 200064, rope_theta 5e6, rms_norm_eps 1e-6, max_position_embeddings 196608,
     * untied, scoring_func sigmoid, use_routing_bias, routed_scaling_factor 1, no shared
     * expert (that M2.1's config.json repeats them is remembered, not checked: no network
     * here). The converter writes intermediate_size as both widths (llama.cpp shapes the
     * experts by feed_forward_length). Parameters: embeddings 2 x 200064 x 3072 =
     * 1,229,193,216, final norm 3072; each layer 2 x 3072 (norms) + 3072 x (6144 + 2 x
     * 1024) + 6144 x 3072 (Q, K, V, O: 44,040,192) + 6144 + 1024 (Q/K norms) + 3072 x 256
     * (router) + 256 (exp_probs_b) + 3 x 3072 x 1536 x 256 (experts: 3,623,878,656) =
     * 3,668,718,848; total 228,689,764,864 (the "230B") */
    {"minimax-m2", 62, 3072, 48, 8, 1536, 200064, 196608, 5000000.0f, 1e-6f, false,
     "minimax-m2", .head_dim = 128, .rope_dim = 64, .n_expert = 256, .n_expert_used = 8,
     .n_ff_exp = 1536},
    /* minimax-m2 small: 2 layers, head_dim 32 with 4 heads (2 K/V) of a 64-wide model, 16
     * of 32 dimensions rotated (NeoX), whole-row Q/K norms (128 and 64 wide), 8 experts of
     * 32 (feed_forward_length too), 2 a token, the selection bias */
    {"minimax-m2-tiny", 2, 64, 4, 2, 32, 512, 256, 10000.0f, 1e-6f, false, "minimax-m2",
     .head_dim = 32, .rope_dim = 16, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 32},
    /* deepseek2 (MLA; config.json values as remembered, no network here, the MLA shapes
     * checked against GGUF listings): DeepSeek-V2-Lite 27 layers, hidden 2048, 16 heads,
     * no q_lora, kv_lora 512, qk_nope 128, qk_rope 64, v_head 128, intermediate 10944,
     * moe 1408, 64 experts (6 a token, 2 shared, softmax, norm_topk_prob false, scale 1),
     * first_k_dense 1, YaRN 40 over 4096 with mscale_all_dim 0.707, vocab 102400, eps 1e-6
     * (the published 15.7B); DeepSeek-V3 / R1 61 layers, hidden 7168, 128 heads, q_lora
     * 1536, intermediate 18432, moe 2048, 256 experts (8 a token, 1 shared, sigmoid with
     * e_score_correction_bias, 8 groups of which 4, norm, scale 2.5), first_k_dense 3,
     * YaRN 40 over 4096, mscale_all_dim 1, vocab 129280 (671B without its MTP layer, which
     * the converter drops); Kimi-K2 as V3 with 64 heads, 384 experts, 1 group,
     * first_k_dense 1, scale 2.827, rope_theta 50000, YaRN 32, vocab 163840 (1.0T);
     * GLM-4.7-Flash (Glm4MoeLite) 47 layers (+ 1 MTP, not built), hidden 2048, 20 heads,
     * q_lora 768, qk_nope 192, v_head 256, intermediate 10240, moe 1536, 64 experts (4 a
     * token, 1 shared, sigmoid, norm, scale 1.8), first_k_dense 1, rope_theta 1e6, no
     * scaling, vocab 154880, eps 1e-5 (~30B) */
    {"deepseek-v2-lite",
     27,
     2048,
     16,
     1,
     10944,
     102400,
     163840,
     10000.0f,
     1e-6f,
     false,
     "deepseek2",
     .head_dim = 576,
     .rope_dim = 64,
     .kv_lora = 512,
     .mla_nope = 128,
     .mla_v_head = 128,
     .n_expert = 64,
     .n_expert_used = 6,
     .n_ff_exp = 1408,
     .n_expert_shared = 2,
     .n_dense_lead = 1,
     .softmax_gating = true,
     .rope_scaling = "yarn",
     .rope_factor = 40.0f,
     .n_ctx_orig = 4096,
     .mscale_all_dim = 0.707f},
    {"deepseek-v3",
     61,
     7168,
     128,
     1,
     18432,
     129280,
     163840,
     10000.0f,
     1e-6f,
     false,
     "deepseek2",
     .head_dim = 576,
     .rope_dim = 64,
     .q_lora = 1536,
     .kv_lora = 512,
     .mla_nope = 128,
     .mla_v_head = 128,
     .n_expert = 256,
     .n_expert_used = 8,
     .n_ff_exp = 2048,
     .n_expert_shared = 1,
     .n_dense_lead = 3,
     .expert_scale = 2.5f,
     .n_group = 8,
     .n_group_used = 4,
     .rope_scaling = "yarn",
     .rope_factor = 40.0f,
     .n_ctx_orig = 4096,
     .mscale_all_dim = 1.0f},
    {"kimi-k2",
     61,
     7168,
     64,
     1,
     18432,
     163840,
     131072,
     50000.0f,
     1e-6f,
     false,
     "deepseek2",
     .head_dim = 576,
     .rope_dim = 64,
     .q_lora = 1536,
     .kv_lora = 512,
     .mla_nope = 128,
     .mla_v_head = 128,
     .n_expert = 384,
     .n_expert_used = 8,
     .n_ff_exp = 2048,
     .n_expert_shared = 1,
     .n_dense_lead = 1,
     .expert_scale = 2.827f,
     .rope_scaling = "yarn",
     .rope_factor = 32.0f,
     .n_ctx_orig = 4096,
     .mscale_all_dim = 1.0f},
    {"glm-4.7-flash",
     47,
     2048,
     20,
     1,
     10240,
     154880,
     202752,
     1000000.0f,
     1e-5f,
     false,
     "deepseek2",
     .head_dim = 576,
     .rope_dim = 64,
     .q_lora = 768,
     .kv_lora = 512,
     .mla_nope = 192,
     .mla_v_head = 256,
     .n_expert = 64,
     .n_expert_used = 4,
     .n_ff_exp = 1536,
     .n_expert_shared = 1,
     .n_dense_lead = 1,
     .expert_scale = 1.8f},
    /* deepseek2 small: 1 dense layer then 2 MoE layers; q_lora 32, kv_lora 32 (the
     * cache row 32 + 16), qk_nope 32, v_head 16; 8 experts in 4 groups of which 2, 2 a
     * token, sigmoid with the selection bias, 1 shared, scale 2.5; YaRN 4 over 64 with
     * mscale_all_dim 0.707 (attention scale x 1.21). The lite one: no q_lora, softmax
     * gating in 2 groups of which 1, 3 a token, 2 shared, no norm, no scale, no YaRN */
    {"deepseek2-tiny",
     3,
     64,
     4,
     1,
     128,
     512,
     256,
     10000.0f,
     1e-6f,
     false,
     "deepseek2",
     .head_dim = 48,
     .rope_dim = 16,
     .q_lora = 32,
     .kv_lora = 32,
     .mla_nope = 32,
     .mla_v_head = 16,
     .n_expert = 8,
     .n_expert_used = 2,
     .n_ff_exp = 32,
     .n_expert_shared = 1,
     .n_dense_lead = 1,
     .expert_scale = 2.5f,
     .n_group = 4,
     .n_group_used = 2,
     .rope_scaling = "yarn",
     .rope_factor = 4.0f,
     .n_ctx_orig = 64,
     .mscale_all_dim = 0.707f},
    {"deepseek2-lite-tiny",
     2,
     64,
     4,
     1,
     128,
     512,
     256,
     10000.0f,
     1e-6f,
     false,
     "deepseek2",
     .head_dim = 48,
     .rope_dim = 16,
     .kv_lora = 32,
     .mla_nope = 32,
     .mla_v_head = 32,
     .n_expert = 8,
     .n_expert_used = 3,
     .n_ff_exp = 32,
     .n_expert_shared = 2,
     .n_dense_lead = 1,
     .softmax_gating = true,
     .n_group = 2,
     .n_group_used = 1},
    /* deepseek2-tiny with the experts' gate and up fused (ffn_gate_up_exps: llama.cpp's
     * deepseek2 loader takes it through create_tensor_gate_up_exps) */
    {"deepseek2-gu-tiny", 3, 64, 4, 1, 128, 512, 256, 10000.0f, 1e-6f, false, "deepseek2",
     .head_dim = 48, .rope_dim = 16, .q_lora = 32, .kv_lora = 32, .mla_nope = 32,
     .mla_v_head = 16, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 32,
     .n_expert_shared = 1, .n_dense_lead = 1, .expert_scale = 2.5f, .n_group = 4,
     .n_group_used = 2, .rope_scaling = "yarn", .rope_factor = 4.0f, .n_ctx_orig = 64,
     .mscale_all_dim = 0.707f, .gate_up_exps = true},
    /* Cohere (command-r, cohere2): LayerNorms, parallel attention and FFN, the output tied
     * to token_embd, logit_scale. The config.json values as remembered (no network here):
     * c4ai-command-r-v01: hidden 8192, intermediate 22528, 40 layers, 64 heads (no GQA),
     * vocab 256000, rope_theta 8e6, layer_norm_eps 1e-5, logit_scale 0.0625, context
     * 131072. Parameters: embeddings 256000 x 8192 = 2,097,152,000, final norm 8192, each
     * layer 8192 (norm) + 4 x 8192^2 (Q, K, V, O: 268,435,456) + 3 x 8192 x 22528 (FFN:
     * 553,648,128) = 822,091,776, x 40 = 32,883,671,040; total 34,980,831,232 (35.0 B,
     * the "35B"). c4ai-command-r-plus: hidden 12288, intermediate 33792, 64 layers, 96 / 8
     * heads of 128, rope_theta 75e6, logit_scale 0.8333, per-head Q/K norms: embeddings
     * 3,145,728,000 + 12,288 + 64 x (12,288 + 2 x 12288^2 + 2 x 12288 x 1024 + 3 x 12288 x
     * 33792 + 96 x 128 + 8 x 128 = 1,572,889,600) = 103,810,674,688 (103.8 B, the
     * "104B"). c4ai-command-r7b-12-2024 (cohere2): hidden 4096, intermediate 14336, 32
     * layers, 32 / 8 heads, window 4096 (3 windowed layers, 1 global), rope_theta 50000,
     * logit_scale 0.25: 1,048,576,000 + 4096 + 32 x (4096 + 2 x 4096^2 + 2 x 4096 x 1024 +
     * 3 x 4096 x 14336 = 218,107,904) = 8,028,033,024 (the published 8.03 B).
     * c4ai-command-a-03-2025: hidden 12288, intermediate 36864, 64 layers, 96 / 8 heads,
     * window 4096, context 262144: 3,145,728,000 + 12,288 + 64 x (12,288 + 2 x 12288^2 + 2
     * x 12288 x 1024 + 3 x 12288 x 36864 = 1,686,122,496) = 111,057,580,032 (the "111B") */
    {"command-r-35b", 40, 8192, 64, 64, 22528, 256000, 131072, 8000000.0f, 1e-5f, true,
     "command-r", .logit_scale = 0.0625f},
    {"command-r-plus-104b", 64, 12288, 96, 8, 33792, 256000, 131072, 75000000.0f, 1e-5f, true,
     "command-r", .logit_scale = 0.8333333f},
    {"command-r7b", 32, 4096, 32, 8, 14336, 256000, 131072, 50000.0f, 1e-5f, true, "cohere2",
     .n_swa = 4096, .logit_scale = 0.25f},
    {"command-a-111b", 64, 12288, 96, 8, 36864, 256000, 262144, 50000.0f, 1e-5f, true,
     "cohere2", .n_swa = 4096, .logit_scale = 0.25f},
    /* command-r small: 2 layers (no Q/K norms below 64 layers, as llama.cpp); plus-tiny:
     * 64 narrow layers, so that it has Command R+'s per-head Q/K norms; cohere2-tiny:
     * layers 0-2 windowed (16) and rotated, 3 global without RoPE. Norm weights 1 + N(0,
     * 0.25^2), token_embd scaled up by 1 / logit_scale (tied: it is the output) */
    {"command-r-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, true, "command-r",
     .logit_scale = 0.5f},
    {"command-r-plus-tiny", 64, 32, 2, 1, 64, 512, 256, 10000.0f, 1e-5f, true, "command-r",
     .logit_scale = 0.5f},
    {"cohere2-tiny", 4, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, true, "cohere2", .n_swa = 16,
     .logit_scale = 0.5f},
    /* lfm2 (Liquid AI): LFM2-1.2B's config (hidden 2048, 16 layers of which 2, 5, 8, 10,
     * 12, 14 attention, 32 heads, 8 K/V heads, llama.cpp's n_ff 8192, vocabulary 65536,
     * context 128000, rope_theta 1e6, tied); lfm2-tiny: conv, attention, conv, conv, so
     * that a conv layer follows attention and the last layer (which keeps only the rows
     * that want logits) is a conv */
    {"lfm2-1.2b", 16, 2048, 32, 8, 8192, 65536, 128000, 1000000.0f, 1e-5f, true, "lfm2",
     .lfm2_attn = 0x5524},
    {"lfm2-tiny", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, true, "lfm2", .lfm2_attn = 0x2},
    /* qwen35: Qwen3.5's layer kinds at a tiny size: delta net, attention, delta net (a delta
     * net after attention, and last), 4 V heads over 2 K heads (V head h reads K head h %
     * 2), head 16 with 8 rotated dimensions, conv 4 */
    {"qwen35-tiny", 3, 64, 4, 2, 128, 512, 256, 10000000.0f, 1e-6f, true, "qwen35", .head_dim = 16,
     .rope_dim = 8, .gdn_every = 2, .gdn_d = 16, .gdn_nk = 2, .gdn_nv = 4},
    /* lfm2moe: LFM2-8B-A1B's config as remembered (no network here: hidden 2048, 24 layers
     * of which 2, 6, 10, 14, 18, 21 attention, 32 heads, 8 K/V heads, dense
     * intermediate_size 7168 in the first num_dense_layers 2, then 32 experts of
     * moe_intermediate_size 1792, 4 a token, sigmoid routing with the expert bias, vocab
     * 65536, context 128000, rope_theta 1e6, tied); lfm2moe-tiny: lfm2-tiny's layers
     * (conv, attention, conv, conv), layer 0 dense, the others 4 experts of 32, 2 a token */
    {"lfm2-8b-a1b", 24, 2048, 32, 8, 7168, 65536, 128000, 1000000.0f, 1e-5f, true, "lfm2moe",
     .lfm2_attn = 0x244444, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 1792,
     .n_dense_lead = 2},
    {"lfm2moe-tiny", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, true, "lfm2moe",
     .lfm2_attn = 0x2, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32, .n_dense_lead = 1},
    /* granitehybrid (IBM Granite 4.0-H): granite-tiny's scales; Mamba2, attention (no
     * RoPE), Mamba2, Mamba2; 8 heads of 16 in 2 groups of state 16; -moe-tiny: 4 experts
     * of 32 (ffn), 2 a token, and a shared expert of 64 */
    {"granitehybrid-tiny", 4, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false,
     "granitehybrid", .embd_scale = 12.0f, .attn_scale = 0.125f, .residual_scale = 0.22f,
     .logit_scale = 8.0f, .lfm2_attn = 0x2, .ssm_heads = 8, .ssm_state = 16, .ssm_groups = 2},
    {"granitehybrid-moe-tiny", 4, 64, 4, 2, 32, 512, 256, 10000.0f, 1e-5f, false,
     "granitehybrid", .embd_scale = 12.0f, .attn_scale = 0.125f, .residual_scale = 0.22f,
     .logit_scale = 8.0f, .lfm2_attn = 0x2, .ssm_heads = 8, .ssm_state = 16, .ssm_groups = 2,
     .n_expert = 4, .n_expert_used = 2, .n_ff_shexp = 64},
    /* qwen35moe: qwen35-tiny's layers (delta net, attention, delta net), every FFN 4
     * experts of 32, 2 a token, plus a gated shared expert of 64; no feed_forward_length
     * key (the Qwen3.5 MoE files have none). qwen2moe: qwen2's attention (Q/K/V biases)
     * with the same FFN, the weights not renormalized */
    {"qwen35moe-tiny", 3, 64, 4, 2, 128, 512, 256, 10000000.0f, 1e-6f, true, "qwen35moe",
     .head_dim = 16, .rope_dim = 8, .gdn_every = 2, .gdn_d = 16, .gdn_nk = 2, .gdn_nv = 4,
     .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64},
    /* qwen35moe-tiny with the experts' gate and up fused (ffn_gate_up_exps, per expert
     * [gate | up] rows), as newer converters write them */
    {"qwen35moe-gu-tiny", 3, 64, 4, 2, 128, 512, 256, 10000000.0f, 1e-6f, true, "qwen35moe",
     .head_dim = 16, .rope_dim = 8, .gdn_every = 2, .gdn_d = 16, .gdn_nk = 2, .gdn_nv = 4,
     .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64,
     .gate_up_exps = true},
    /* qwen3next: qwen35moe-tiny's layers and FFN with Qwen3-Next's layouts: V heads read K
     * heads repeat-interleaved (V head h reads K head h / 2), beta and alpha fused (ssm_ba),
     * no rope.dimension_sections, feed_forward_length written; -ssmin-tiny: the older
     * files' fused ssm_in in place of attn_qkv and attn_gate */
    {"qwen3next-tiny", 3, 64, 4, 2, 128, 512, 256, 10000000.0f, 1e-6f, true, "qwen3next",
     .head_dim = 16, .rope_dim = 8, .gdn_every = 2, .gdn_d = 16, .gdn_nk = 2, .gdn_nv = 4,
     .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64},
    {"qwen3next-ssmin-tiny", 3, 64, 4, 2, 128, 512, 256, 10000000.0f, 1e-6f, true, "qwen3next",
     .head_dim = 16, .rope_dim = 8, .gdn_every = 2, .gdn_d = 16, .gdn_nk = 2, .gdn_nv = 4,
     .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64, .gdn_ssm_in = true},
    {"qwen2moe-tiny", 2, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-6f, false, "qwen2moe",
     .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64},
    /* qwen2vl, qwen3vl, qwen3vlmoe (the Qwen2-VL / Qwen3-VL text towers): qwen2-tiny,
     * qwen3-tiny and qwen3moe-tiny with rope.dimension_sections whose text rotation leaves
     * some pairs unturned (arch.h's mrope): qwen2vl [2, 1, 1, 1] over 8 pairs (pair 4 in
     * the 4th section, pairs 5-7 wrapping to sectors 0-2), qwen3vl [5, 3, 3, 0] over 16
     * (pair 10 beyond 3 x 3, as Qwen3-VL's [24, 20, 20] leaves pairs 61 and 62),
     * qwen3vlmoe [4, 2, 3, 1] (pair 7); base 10000 so that those pairs' angles matter;
     * n_deepstack_layers 1 (unused by text; llama.cpp aborts on one at the last layer) */
    {"qwen2vl-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-6f, false, "qwen2vl", .biases = true,
     .rope_sections = {2, 1, 1, 1}},
    {"qwen3vl-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-6f, true, "qwen3vl", .head_dim = 32,
     .rope_sections = {5, 3, 3, 0}, .n_deepstack = 1},
    {"qwen3vlmoe-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-6f, false, "qwen3vlmoe",
     .head_dim = 32, .n_expert = 8, .n_expert_used = 4, .n_ff_exp = 32,
     .rope_sections = {4, 2, 3, 1}, .n_deepstack = 1},
    /* nemotron_h (NVIDIA Nemotron Nano v2's hybrid_override_pattern letters): Mamba2, FFN,
     * attention, Mamba2, FFN ("M-*M-"); Mamba2 of 8 heads of 12 (inner 96, not 2 n_embd)
     * in 2 groups of state 16; attention 4 heads of 16, 2 K/V heads, no RoPE */
    {"nemotron_h-tiny", 5, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "nemotron_h",
     .lfm2_attn = 0x4, .nemo_ffn = 0x12, .ssm_heads = 8, .ssm_state = 16, .ssm_groups = 2,
     .ssm_inner = 96},
    /* nemotron_h_moe (NVIDIA Nemotron 3 Nano): nemotron_h-tiny's layers, each FFN layer 8
     * ReLU^2 experts of 32 (feed_forward_length's entry, as the converter writes
     * moe_intermediate_size), 2 a token, sigmoid routing with the selection bias,
     * normalized and scaled by 2.5 (Nano's routed_scaling_factor), and a ReLU^2 shared
     * expert of 64 */
    {"nemotron_h_moe-tiny", 5, 64, 4, 2, 32, 512, 256, 10000.0f, 1e-5f, false, "nemotron_h_moe",
     .lfm2_attn = 0x4, .nemo_ffn = 0x12, .ssm_heads = 8, .ssm_state = 16, .ssm_groups = 2,
     .ssm_inner = 96, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64,
     .expert_scale = 2.5f},
    /* step35 (StepFun Step-3.5-Flash): 4 layers, global / windowed / windowed / global
     * (window 8); the global layers 4 query and 2 K/V heads of 16, turning 8 of 16
     * dimensions at base 1e6, the windowed ones 8 and 4 heads turning 12 at base 1e4; Q/K
     * norms; attn_gate on layers 0-2; layer 0 a dense SwiGLU of 128, then 8 experts of 32
     * (2 a token, sigmoid with the selection bias, normalized, scaled 2.5) and a shared
     * expert of 64; the clamps of step35_clamps */
    {"step35-tiny", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, false, "step35",
     .head_dim = 16, .rope_dim = 16, .n_swa = 8, .rope_base_swa = 10000.0f, .swa_period = 3,
     .n_head_kv_swa = 4, .n_head_swa = 8, .rope_dim_swa = 12, .n_expert = 8,
     .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64, .n_dense_lead = 1,
     .expert_scale = 2.5f},
    /* step35-tail: step35-tiny with its last layer dense too (after the MoE layers 1-2) */
    {"step35-tail", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, false, "step35",
     .head_dim = 16, .rope_dim = 16, .n_swa = 8, .rope_base_swa = 10000.0f, .swa_period = 3,
     .n_head_kv_swa = 4, .n_head_swa = 8, .rope_dim_swa = 12, .n_expert = 8,
     .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64, .n_dense_lead = 1,
     .n_dense_tail = 1, .expert_scale = 2.5f},
    /* exaone4 (LG EXAONE 4.0): config.json values as remembered (no network here):
     * EXAONE-4.0-1.2B hidden 2048, intermediate 4096, 30 layers, 32 / 8 heads of 64,
     * vocabulary 102400, context 65536, rope_theta 1e6, tied, no windows; EXAONE-4.0-32B
     * hidden 5120, intermediate 27392, 64 layers, 40 / 8 heads of 128, context 131072,
     * window 4096 on 3 of 4 layers ("LLLG"), untied; both llama3 rope_freqs (factor 16 over
     * 8192). exaone4-tiny: 4 layers whose file carries a window (16) and the converter's
     * pattern list, both ignored (no windows below 64 layers: every layer rotates);
     * exaone4-swa-tiny: 64 narrow layers, so that 3 of 4 are windowed (16) and rotated,
     * every 4th global without RoPE. Both with rope_freqs (llama3 factors over 64) and norm
     * weights 1 + N(0, 0.25^2) */
    {"exaone4-1.2b", 30, 2048, 32, 8, 4096, 102400, 65536, 1000000.0f, 1e-5f, true, "exaone4",
     .rope_freqs = true, .rope_factor = 16.0f, .n_ctx_orig = 8192},
    {"exaone4-32b", 64, 5120, 40, 8, 27392, 102400, 131072, 1000000.0f, 1e-5f, false,
     "exaone4", .head_dim = 128, .n_swa = 4096, .rope_freqs = true, .rope_factor = 16.0f,
     .n_ctx_orig = 8192},
    {"exaone4-tiny", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, true, "exaone4",
     .n_swa = 16, .rope_freqs = true, .n_ctx_orig = 64},
    {"exaone4-swa-tiny", 64, 32, 2, 1, 64, 512, 256, 1000000.0f, 1e-5f, false, "exaone4",
     .n_swa = 16, .rope_freqs = true, .n_ctx_orig = 64},
    /* olmoe (AllenAI OLMoE): OLMoE-1B-7B-0924's config.json as remembered: hidden 2048,
     * intermediate (each expert) 1024, 16 layers, 16 heads (no GQA), 64 experts, 8 a token,
     * vocabulary 50304, context 4096, rope_theta 10000, norm_topk_prob false, untied.
     * olmoe-tiny: 4 of 8 experts a token (their raw softmax weights), whole-row Q/K norms */
    {"olmoe-1b-7b", 16, 2048, 16, 16, 1024, 50304, 4096, 10000.0f, 1e-5f, false, "olmoe",
     .n_expert = 64, .n_expert_used = 8},
    {"olmoe-tiny", 2, 64, 4, 4, 64, 512, 256, 10000.0f, 1e-5f, false, "olmoe", .n_expert = 8,
     .n_expert_used = 4},
    /* llama4 (Llama 4 Scout-style): 4 layers of 4 query and 2 K/V heads of 16, layers 0-2
     * chunked (chunks of 8192: beyond these prompts) with RoPE and the Q/K norm, layer 3
     * global without RoPE (its temperature 1 below position 8191); Llama 3.1's rope_freqs
     * over an original context of 64; layers 1 and 3 routed (4 experts of 32, 2 a token,
     * sigmoid weights on the input) plus the shared expert, 0 and 2 a dense SwiGLU of 128 */
    {"llama4-tiny", 4, 64, 4, 2, 128, 512, 256, 500000.0f, 1e-5f, false, "llama4",
     .n_ctx_orig = 64, .rope_freqs = true, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32,
     .moe_step = 2},
    /* llama4-128e (Maverick-style): llama4-tiny with 128 experts (no Q/K norm then), 1 a
     * token, no rope_freqs (4 layers: llama.cpp fails on a file without a global layer) */
    {"llama4-128e", 4, 64, 4, 2, 128, 512, 256, 500000.0f, 1e-5f, false, "llama4",
     .n_expert = 128, .n_expert_used = 1, .n_ff_exp = 32, .moe_step = 2},
    /* llama4-chunk: every layer chunked (sliding_window_pattern 0), narrow (2 heads of 8, 1
     * K/V head) for test_model's prompts across the chunk boundary at 8192 */
    {"llama4-chunk", 4, 16, 2, 1, 32, 300, 16384, 500000.0f, 1e-5f, false, "llama4",
     .swa_all = true, .n_expert = 2, .n_expert_used = 1, .n_ff_exp = 16, .moe_step = 2},
    /* ernie4_5 (Baidu ERNIE 4.5 0.3B's layer: llama's with interleaved RoPE, tied output),
     * with Q/K/V biases (optional there) */
    {"ernie4_5-tiny", 2, 64, 4, 2, 128, 512, 256, 500000.0f, 1e-5f, true, "ernie4_5",
     .biases = true},
    /* ernie4_5-moe (21B-A3B's layout): layer 0 dense (n_ff 128), layers 1-2 8 experts of
     * 32 (2 a token, softmax with the selection bias, normalized) plus a shared expert of
     * 64; untied output */
    {"ernie4_5-moe-tiny", 3, 64, 4, 2, 128, 512, 256, 500000.0f, 1e-5f, false, "ernie4_5-moe",
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64, .n_dense_lead = 1,
     .moe_step = 1},
    /* hunyuan-dense (Tencent Hunyuan 0.5B-7B's layer: NeoX RoPE, then per-head Q/K norms;
     * tied output) and hunyuan-moe (Hunyuan-A13B's: every layer 8 experts as wide as
     * feed_forward_length (64), 2 a token, softmax, plus a shared expert of 96); norm
     * weights 1 + N(0, 0.25^2), so that norming after RoPE differs from before */
    {"hunyuan-dense-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, true, "hunyuan-dense"},
    {"hunyuan-moe-tiny", 2, 64, 4, 2, 64, 512, 256, 10000.0f, 1e-5f, false, "hunyuan-moe",
     .n_expert = 8, .n_expert_used = 2, .n_ff_shexp = 96},
    /* bailingmoe2 (inclusionAI Ling 2.0): Ling-mini-2.0's config.json as remembered (no
     * network here): hidden 2048, intermediate 5120 (the dense layer), moe_intermediate_size
     * 512, 20 layers (+ 1 NextN, not built here), 16 / 4 heads of 128, 256 experts, 8 a
     * token, 1 shared, n_group 8, topk_group 4, first_k_dense_replace 1,
     * routed_scaling_factor 2.5, norm_topk_prob true, score_function sigmoid,
     * partial_rotary_factor 0.5, rope_theta 600000, vocabulary 157184, untied.
     * bailingmoe2-tiny: 1 dense layer then 2 MoE layers of 8 experts of 32 in 4 groups (2
     * used), 2 a token, 1 shared, the selection bias, scale 2.5, one NextN layer after them;
     * fused attn_qkv, per-head Q/K norms, 8 of 16 dimensions rotated (NeoX), norm weights
     * 1 + N(0, 0.25^2) */
    {"ling-mini-2.0", 20, 2048, 16, 4, 5120, 157184, 32768, 600000.0f, 1e-6f, false,
     "bailingmoe2", .rope_dim = 64, .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512,
     .n_expert_shared = 1, .n_dense_lead = 1, .expert_scale = 2.5f, .n_group = 8,
     .n_group_used = 4},
    {"bailingmoe2-tiny", 3, 64, 4, 2, 128, 512, 256, 600000.0f, 1e-6f, false, "bailingmoe2",
     .rope_dim = 8, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 32, .n_expert_shared = 1,
     .n_dense_lead = 1, .expert_scale = 2.5f, .n_group = 4, .n_group_used = 2, .n_nextn = 1},
    /* exaone (EXAONE 3.5's layer: llama's with NeoX RoPE and its "llama3" rope_freqs, tied
     * output), norm weights 1 + N(0, 0.25^2) */
    {"exaone-tiny", 2, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, true, "exaone",
     .n_ctx_orig = 64, .rope_freqs = true},
    /* arcee (AFM-4.5B's layer: llama's with a non-gated ReLU^2 FFN), YaRN x4 over 64
     * positions, untied, norm weights 1 + N(0, 0.25^2) */
    {"arcee-tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f, false, "arcee",
     .rope_scaling = "yarn", .rope_factor = 4.0f, .n_ctx_orig = 64},
    /* dots1 (dots.llm1's layout): 4 K/V heads for 4 query heads, per-head Q/K norms, layer
     * 0 dense (n_ff 128), layers 1-2 8 experts of 32, 2 a token, sigmoid with the
     * selection bias, renormalized, x 2.5, plus 2 shared experts (64 wide); untied; norm
     * weights 1 + N(0, 0.25^2) */
    {"dots1-tiny", 3, 64, 4, 4, 128, 512, 256, 10000.0f, 1e-5f, false, "dots1", .n_expert = 8,
     .n_expert_used = 2, .n_ff_exp = 32, .n_expert_shared = 2, .n_dense_lead = 1,
     .expert_scale = 2.5f},
    /* exaone-moe (K-EXAONE's layout): layers 0-2 windowed (16) and rotated with rope_freqs,
     * layer 3 global without RoPE, per-head Q/K norms; layer 0 dense, layers 1-3 8 experts
     * of 32, 2 a token, sigmoid with the selection bias, renormalized, x 2.5, plus a shared
     * expert of its own width (64); untied; norm weights 1 + N(0, 0.25^2) */
    {"exaone-moe-tiny", 4, 64, 4, 2, 128, 512, 256, 1000000.0f, 1e-5f, false, "exaone-moe",
     .n_swa = 16, .n_ctx_orig = 64, .rope_freqs = true, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 32, .n_ff_shexp = 64, .n_dense_lead = 1, .expert_scale = 2.5f},
    /* bailingmoe (Ling 1.0's layout): llama's attention (interleaved RoPE, separate Q/K/V as
     * the converter splits them), every layer 8 experts of 32, 2 a token, softmax,
     * renormalized, x 2.5, plus 2 shared experts (64 wide); untied; norm weights 1 +
     * N(0, 0.25^2) */
    {"bailingmoe-tiny", 2, 64, 4, 2, 128, 512, 256, 600000.0f, 1e-6f, false, "bailingmoe",
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 32, .n_expert_shared = 2,
     .expert_scale = 2.5f},
    /* falcon-h1 (Falcon-H1's layer: attention with NeoX RoPE and a Mamba2 block side by
     * side, then the SwiGLU FFN): 4 query heads of 32 (128 != n_embd), 2 K/V heads; Mamba2
     * of inner size 96 (not 2 n_embd), 8 heads of 12 in 2 groups of state 16, the conv bias;
     * -tiny without the grouped ssm_norm (mamba_rms_norm false) and tied, -norm-tiny with
     * it, untied, with Q/K/V biases and an O bias (unused, as llama.cpp); norm weights 1 +
     * N(0, 0.25^2) */
    {"falcon-h1-tiny", 3, 64, 4, 2, 128, 512, 256, 100000.0f, 1e-5f, true, "falcon-h1",
     .head_dim = 32, .ssm_heads = 8, .ssm_state = 16, .ssm_groups = 2, .ssm_inner = 96},
    {"falcon-h1-norm-tiny", 2, 64, 4, 2, 128, 512, 256, 100000.0f, 1e-5f, false, "falcon-h1",
     .head_dim = 32, .ssm_heads = 8, .ssm_state = 16, .ssm_groups = 2, .ssm_inner = 96,
     .ssm_norm = true, .biases = true},
};
#pragma GCC diagnostic pop

#define N_SHAPES (sizeof shapes / sizeof shapes[0])

const struct synth_shape *synth_find_shape(const char *name)
{
	for (size_t i = 0; i < N_SHAPES; i++)
		if (strcmp(shapes[i].name, name) == 0)
			return &shapes[i];
	return NULL;
}

size_t synth_n_shapes(void)
{
	return N_SHAPES;
}

const struct synth_shape *synth_shape_at(size_t i)
{
	BG_ASSERT(i < N_SHAPES);
	return &shapes[i];
}

const char *synth_arch(const struct synth_shape *s)
{
	return s->arch ? s->arch : "llama";
}

uint32_t synth_head_dim(const struct synth_shape *s)
{
	return s->head_dim ? s->head_dim : s->n_embd / (s->n_head ? s->n_head : 1);
}

void synth_rope_sections(const struct synth_shape *s, int32_t out[4])
{
	const int32_t *sec = s->rope_sections;
	if (sec[0] || sec[1] || sec[2] || sec[3]) {
		memcpy(out, sec, 4 * sizeof *out);
		return;
	}
	const uint32_t r = (s->rope_dim ? s->rope_dim : synth_head_dim(s)) / 2;
	out[0] = (int32_t)(r - r / 3 - r / 3);
	out[1] = out[2] = (int32_t)(r / 3);
	out[3] = 0;
}

uint32_t synth_n_ff_exp(const struct synth_shape *s)
{
	return s->n_ff_exp ? s->n_ff_exp : s->n_ff;
}

static bool is_arch(const struct synth_shape *s, const char *a)
{
	return strcmp(synth_arch(s), a) == 0;
}

static bool has_qkv_bias(const struct synth_shape *s)
{
	return is_arch(s, "qwen2") || is_arch(s, "qwen2moe") || is_arch(s, "gpt-oss") || s->biases;
}

/* qwen35moe, qwen2moe: a gated shared expert (arch.h's shexp_gate) */
static bool has_shexp_gate(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->shexp_gate;
}

static bool is_oai(const struct synth_shape *s)
{
	return is_arch(s, "gpt-oss");
}

/* command-r, cohere2 (arch.h's cohere) */
static bool is_cohere(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->cohere;
}

/* Command R+: command-r with 64 layers or more (llama.cpp's condition) */
static bool has_qk_norm_heads(const struct synth_shape *s)
{
	return is_arch(s, "command-r") && s->n_layer >= 64;
}

/* qwen35: the delta-net layers (synth_shape's gdn_*) */
static bool is_qwen35(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->gdn;
}

static bool qwen35_gdn_layer(const struct synth_shape *s, uint32_t l)
{
	return is_qwen35(s) && (l + 1) % s->gdn_every != 0;
}

/* lfm2, lfm2moe: the short-conv layers (synth_shape's lfm2_attn) */
static bool is_lfm2(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->shortconv;
}

/* granitehybrid, nemotron_h: Mamba2 layers where lfm2_attn's (and nemo_ffn's) bit is
 * clear */
static bool is_mamba2(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->mamba2;
}

static bool is_nemo(const struct synth_shape *s) /* nemotron_h, nemotron_h_moe */
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->nemotron_h;
}

/* falcon-h1: attention and a Mamba2 block in every layer (model.h's ssm_parallel) */
static bool is_falcon_h1(const struct synth_shape *s)
{
	return is_arch(s, "falcon-h1");
}

/* the Mamba2 inner size */
static uint64_t ssm_inner(const struct synth_shape *s)
{
	return s->ssm_inner ? s->ssm_inner : 2 * (uint64_t)s->n_embd;
}

static bool is_step35(const struct synth_shape *s)
{
	return is_arch(s, "step35");
}

/* step35: whether layer l is windowed (the list synth writes: the first layer global) */
static bool st35_swa(const struct synth_shape *s, uint32_t l)
{
	return s->n_swa && s->swa_period && l % s->swa_period != 0;
}

/* step35: whether layer l has a dense FFN (no router) */
static bool st35_dense(const struct synth_shape *s, uint32_t l)
{
	return l < s->n_dense_lead || l + s->n_dense_tail >= s->n_layer;
}

/* step35: layer l's query and K/V heads */
static uint32_t st35_nh(const struct synth_shape *s, uint32_t l)
{
	return st35_swa(s, l) && s->n_head_swa ? s->n_head_swa : s->n_head;
}

static uint32_t st35_kvh(const struct synth_shape *s, uint32_t l)
{
	return st35_swa(s, l) && s->n_head_kv_swa ? s->n_head_kv_swa : s->n_head_kv;
}

/* step35: layer l's clamps {swiglu_clamp_exp, swiglu_clamp_shexp} (layer 0 is dense: its
 * shexp value clamps its FFN; 0 = none) */
static void step35_clamps(uint32_t l, float out[2])
{
	static const float c[4][2] = {{0.0f, 0.7f}, {0.6f, 0.9f}, {0.8f, 0.0f}, {0.0f, 0.8f}};
	out[0] = c[l % 4][0];
	out[1] = c[l % 4][1];
}

static bool is_llama4(const struct synth_shape *s)
{
	return is_arch(s, "llama4");
}

/* hunyuan-dense, hunyuan-moe: Q/K norms after RoPE (arch.h) */
static bool is_hunyuan(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->qk_norm_after_rope;
}

/* bailingmoe2: fused attn_qkv, deepseek2's grouped routing and shared expert (arch.h) */
static bool is_bailing(const struct synth_shape *s)
{
	return is_arch(s, "bailingmoe2");
}

/* bailingmoe (Ling 1.0): llama's attention, softmax experts in every layer plus shared
 * experts, no selection bias (arch.h) */
static bool is_bailingmoe(const struct synth_shape *s)
{
	return is_arch(s, "bailingmoe");
}

/* dots1: bailingmoe2's routing and shared experts with separate Q/K/V (arch.h) */
static bool is_dots1(const struct synth_shape *s)
{
	return is_arch(s, "dots1");
}

/* exaone-moe: windows with RoPE there only, bailingmoe2's routing, one shared expert of
 * its own width (n_ff_shexp) */
static bool is_exaone_moe(const struct synth_shape *s)
{
	return is_arch(s, "exaone-moe");
}

/* apertus (xIELU), arcee (ReLU^2): a non-gated dense FFN, no ffn_gate */
static bool no_ffn_gate(const struct synth_shape *s)
{
	return is_arch(s, "apertus") || is_arch(s, "arcee");
}

static bool has_qk_norm(const struct synth_shape *s)
{
	return has_qk_norm_heads(s) || is_arch(s, "qwen3") || is_arch(s, "qwen3moe") ||
	       is_arch(s, "qwen3vl") || is_arch(s, "qwen3vlmoe") || is_arch(s, "gemma3") ||
	       is_arch(s, "olmo2") || is_arch(s, "apertus") || is_arch(s, "gemma4") ||
	       (is_arch(s, "glm4moe") && !s->no_qk_norm) || is_arch(s, "minimax-m2") ||
	       is_lfm2(s) || is_qwen35(s) || is_arch(s, "exaone4") || is_arch(s, "olmoe") ||
	       is_hunyuan(s) || is_bailing(s) || is_dots1(s) || is_exaone_moe(s);
}

/* olmo2, minimax-m2: the Q/K norms are as wide as the whole Q and K rows (arch.h) */
static bool has_qk_norm_full(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->qk_norm_full;
}

/* minimax-m2, lfm2moe: sigmoid routing with the selection bias exp_probs_b, no shared expert */
static bool is_minimax(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->moe_sigmoid_sel;
}

/* lfm2moe: leading dense layers, the experts' own width */
static bool has_dense_lead_key(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->moe_dense_lead;
}

static bool is_ds2(const struct synth_shape *s)
{
	return is_arch(s, "deepseek2");
}

/* ernie4_5-moe: interleaved dense layers (synth_shape's moe_step) and the selection bias */
static bool is_ernie_moe(const struct synth_shape *s)
{
	return is_arch(s, "ernie4_5-moe");
}

/* whether layer l has routed experts (the first n_dense_lead dense; ernie4_5-moe: also
 * those with (l + 1) % moe_step != 0) */
static bool synth_moe_layer(const struct synth_shape *s, uint32_t l)
{
	return s->n_expert && l >= s->n_dense_lead &&
	       !(s->moe_step > 1 && (l + 1) % s->moe_step != 0);
}

/* seed_oss, apertus, glm4, deepseek2, cohere, minimax-m2: norm weights 1 + N(0,
 * NORM_STD^2), so that each norm matters */
static bool random_norms(const struct synth_shape *s)
{
	return is_arch(s, "seed_oss") || is_arch(s, "apertus") || is_arch(s, "glm4") ||
	       is_arch(s, "glm4moe") || is_ds2(s) || is_cohere(s) || is_minimax(s) || is_lfm2(s) ||
	       is_qwen35(s) || is_mamba2(s) || is_step35(s) || is_arch(s, "olmoe") ||
	       is_hunyuan(s) || is_bailing(s) || is_arch(s, "exaone") || is_arch(s, "arcee") ||
	       is_dots1(s) || is_exaone_moe(s) || is_bailingmoe(s) || is_falcon_h1(s);
}

/* the O bias with s->biases: not for seed_oss, glm4 (llama.cpp loads none there) */
static bool has_o_bias(const struct synth_shape *s)
{
	const struct arch_info *ai = arch_find(synth_arch(s)); /* opt_qkv_bias: no O bias */
	/* falcon-h1: one, which llama.cpp loads and does not add (arch.c) */
	return s->biases && !is_arch(s, "gpt-oss") &&
	       (!(ai && ai->opt_qkv_bias) || is_falcon_h1(s));
}

void synth_xielu_raw(uint32_t l, float out[4])
{
	/* alpha_p, alpha_n raw (before softplus): near Apertus's initial softplus^-1(0.8)
	 * ~ 0.55, moved per layer; beta 0.5 (HF xIELU's default) moved too; eps -1e-6 */
	out[0] = 1.0f + 0.5f * (float)(l % 4);	/* alpha_n */
	out[1] = 0.5f - 0.3f * (float)(l % 4);	/* alpha_p */
	out[2] = 0.5f + 0.125f * (float)(l % 4); /* beta */
	out[3] = -1e-6f;			/* eps */
}

static bool has_post_norms(const struct synth_shape *s)
{
	return is_arch(s, "gemma2") || is_arch(s, "gemma3") || is_arch(s, "olmo2") ||
	       is_arch(s, "gemma4") || is_arch(s, "glm4") || is_arch(s, "exaone4");
}

static bool is_gemma4(const struct synth_shape *s)
{
	return is_arch(s, "gemma4");
}

/* gemma4: whether layer l is windowed (the bool list synth writes) */
static bool g4_swa(const struct synth_shape *s, uint32_t l)
{
	return s->n_swa && s->swa_period && (l + 1) % s->swa_period != 0;
}

/* gemma4: layer l's head size and K/V heads (the global layers' are the shape's) */
static uint32_t g4_hd(const struct synth_shape *s, uint32_t l)
{
	return g4_swa(s, l) && s->head_dim_swa ? s->head_dim_swa : synth_head_dim(s);
}

/* gemma4: layer l's FFN width (double_wide: the shared-KV layers' twice n_ff) */
static uint32_t g4_ff(const struct synth_shape *s, uint32_t l)
{
	return s->double_wide && l + s->shared_kv_layers >= s->n_layer ? 2 * s->n_ff : s->n_ff;
}

static uint32_t g4_kvh(const struct synth_shape *s, uint32_t l)
{
	return g4_swa(s, l) && s->n_head_kv_swa ? s->n_head_kv_swa : s->n_head_kv;
}

/* olmo2, exaone4: no pre-norms (arch.h), norm weights not all 1 */
static bool no_pre_norms(const struct synth_shape *s)
{
	return arch_find(synth_arch(s)) && arch_find(synth_arch(s))->no_pre_norms;
}

void synth_opts_init(struct synth_opts *o, const struct synth_shape *s)
{
	memset(o, 0, sizeof *o);
	o->shape = *s;
	o->dtype = GGUF_DTYPE_F32;
	o->tie_output = s->tie_output;
}

/* ---- the generated vocabulary ---- */

/* U+2581, SentencePiece's space marker */
#define SP "\xe2\x96\x81"

/* English pieces for the generated SentencePiece vocabulary. Every prefix of each piece is
 * added too, so that SentencePiece's pairwise merges can reach whole words. */
static const char *const words[] = {
    SP "the",  SP "and",    SP "was",	SP "to",    SP "a",    SP "he",	   SP "she",   SP "it",
    SP "in",   SP "of",	    SP "day",	SP "time",  SP "Once", SP "upon",  SP "there", SP "little",
    SP "girl", SP "boy",    SP "play",	SP "happy", SP "big",  SP "said",  SP "Lily",  SP "Tom",
    SP "saw",  SP "with",   SP "her",	SP "his",   SP "they", SP "on",	   SP "for",   SP "is",
    SP "you",  SP "not",    SP "fun",	SP "sun",   SP "dog",  SP "cat",   SP "ball",  SP "tree",
    SP "park", SP "friend", SP "loved", SP "The",   SP "One",  SP "Hello", SP "world", "ing",
    "ed",      "er",	    "ly",	"es",	    "en",      "an",	   "on",       "or",
    "at",      "st",	    "ll",
};

/* The generated vocabulary: ids 0..2 specials, 3..258 bytes, then pieces. */
struct vocab {
	char **text;	/* [n] */
	float *scores;	/* [n] */
	int32_t *types; /* [n] */
	uint32_t n;
};

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };

static void vocab_free(struct vocab *v)
{
	if (v->text)
		for (uint32_t i = 0; i < v->n; i++)
			free(v->text[i]);
	free(v->text);
	free(v->scores);
	free(v->types);
	memset(v, 0, sizeof *v);
}

/* Appends piece unless present or full; false only on allocation failure. */
static bool vocab_add(struct vocab *v, uint32_t cap, const char *piece, size_t len, float score,
		      int32_t type)
{
	if (v->n >= cap)
		return true;
	for (uint32_t i = 259; i < v->n; i++)
		if (strlen(v->text[i]) == len && memcmp(v->text[i], piece, len) == 0)
			return true;
	char *t = malloc(len + 1);
	if (!t)
		return false;
	memcpy(t, piece, len);
	t[len] = '\0';
	v->text[v->n] = t;
	v->scores[v->n] = score;
	v->types[v->n] = type;
	v->n++;
	return true;
}

/* Builds a vocabulary of exactly n tokens (n == 0: all the pieces, no padding). */
static enum bg_status vocab_build(struct vocab *v, uint32_t n, struct bg_err *err)
{
	memset(v, 0, sizeof *v);
	bool natural = n == 0;
	if (natural)
		n = 4096; /* more than the pieces need */
	if (n < 259)
		return bg_fail(err, BG_ERR_INVALID,
			       "a generated vocabulary needs at least 259 tokens (3 special + 256 "
			       "bytes), not %u",
			       n);
	v->text = calloc(n, sizeof *v->text);
	v->scores = calloc(n, sizeof *v->scores);
	v->types = calloc(n, sizeof *v->types);
	if (!v->text || !v->scores || !v->types) {
		vocab_free(v);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a vocabulary of %u tokens", n);
	}
	bool ok = vocab_add(v, n, "<unk>", 5, 0.0f, TT_UNKNOWN) &&
		  vocab_add(v, n, "<s>", 3, 0.0f, TT_CONTROL) &&
		  vocab_add(v, n, "</s>", 4, 0.0f, TT_CONTROL);
	for (int b = 0; ok && b < 256; b++) {
		char t[8];
		snprintf(t, sizeof t, "<0x%02X>", b);
		ok = vocab_add(v, n, t, 6, 0.0f, TT_BYTE);
	}
	/* single characters, then the pieces with their prefixes; earlier = higher score, so
	 * merges prefer short common pieces the way a trained vocabulary does */
	float score = -1.0f;
	ok = ok && vocab_add(v, n, SP, 3, score--, TT_NORMAL);
	for (char c = 'a'; ok && c <= 'z'; c++)
		ok = vocab_add(v, n, &c, 1, score--, TT_NORMAL);
	const char *punct = ".,!?'\"";
	for (const char *p = punct; ok && *p; p++)
		ok = vocab_add(v, n, p, 1, score--, TT_NORMAL);
	for (size_t w = 0; ok && w < sizeof words / sizeof words[0]; w++) {
		size_t len = strlen(words[w]);
		size_t start = strncmp(words[w], SP, 3) == 0 ? 4 : 2;
		for (size_t k = start; ok && k <= len; k++)
			ok = vocab_add(v, n, words[w], k, score--, TT_NORMAL);
	}
	/* padding up to n: never produced by merges ('[' starts no other piece); unique by
	 * construction, so added without vocab_add's quadratic duplicate check */
	while (ok && !natural && v->n < n) {
		char t[32];
		snprintf(t, sizeof t, "[PAD%u]", v->n);
		v->text[v->n] = strdup(t);
		ok = v->text[v->n] != NULL;
		v->scores[v->n] = -1e9f;
		v->types[v->n] = TT_NORMAL;
		v->n += ok;
	}
	if (!ok) {
		vocab_free(v);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a vocabulary of %u tokens", n);
	}
	return BG_OK;
}

static uint32_t vocab_natural_size(void)
{
	struct vocab v;
	if (vocab_build(&v, 0, NULL) != BG_OK)
		return 0;
	uint32_t n = v.n;
	vocab_free(&v);
	return n;
}

/* ---- checks ---- */

static enum bg_status tokens_count(const struct gguf_ctx *g, uint32_t *n, struct bg_err *err)
{
	enum gguf_type et;
	uint64_t k;
	if (!gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &k) || et != GGUF_TYPE_STRING ||
	    k == 0 || k > (1u << 24))
		return bg_fail(err, BG_ERR_INVALID,
			       "the vocabulary file has no usable tokenizer.ggml.tokens array");
	*n = (uint32_t)k;
	return BG_OK;
}

uint32_t synth_n_vocab(const struct synth_opts *o)
{
	uint32_t n = 0;
	if (o->vocab_from)
		return tokens_count(o->vocab_from, &n, NULL) == BG_OK ? n : 0;
	return o->shape.n_vocab ? o->shape.n_vocab : vocab_natural_size();
}

enum bg_status synth_check(const struct synth_opts *o, struct bg_err *err)
{
	const struct synth_shape *s = &o->shape;
	if (!arch_find(synth_arch(s)))
		return bg_fail(err, BG_ERR_INVALID,
			       "architecture '%s' is not one synth makes (%s)", synth_arch(s),
			       arch_names());
	if (!s->n_layer || !s->n_embd || !s->n_head || !s->n_head_kv || !s->n_ff || !s->n_ctx)
		return bg_fail(err, BG_ERR_INVALID,
			       "every size of the shape must be positive (layers %u, embd %u, "
			       "heads %u, kv heads %u, ffn %u, ctx %u)",
			       s->n_layer, s->n_embd, s->n_head, s->n_head_kv, s->n_ff, s->n_ctx);
	if (s->n_layer > 4096 || s->n_embd > (1u << 20) || s->n_ff > (1u << 20) ||
	    s->n_head > s->n_embd)
		return bg_fail(err, BG_ERR_INVALID, "the shape is absurdly large");
	if (s->n_embd % s->n_head && !s->head_dim) /* GLM-4.5: 96 heads of 128 over 4096 */
		return bg_fail(err, BG_ERR_INVALID, "embd %u is not a multiple of heads %u",
			       s->n_embd, s->n_head);
	if (is_qwen35(s) && (!s->gdn_every || !s->gdn_d || !s->gdn_nk || s->gdn_nv % s->gdn_nk ||
			     !s->gdn_nv || s->gdn_d > 1024 || s->gdn_nv > 4096))
		return bg_fail(err, BG_ERR_INVALID,
			       "qwen35: the delta-net sizes come from a qwen35* shape (--arch "
			       "qwen35 on another shape has none)");
	const int32_t *sec = s->rope_sections; /* model.c's read_mrope refuses the others */
	if ((sec[0] | sec[1] | sec[2] | sec[3]) &&
	    (!arch_find(synth_arch(s)) || !arch_find(synth_arch(s))->mrope || is_qwen35(s) ||
	     !arch_mrope_sections_ok(sec, synth_head_dim(s))))
		return bg_fail(err, BG_ERR_INVALID,
			       "rope sections: qwen2vl, qwen3vl, qwen3vlmoe only, widths >= 0, the "
			       "first three not all 0, at most the head size in all");
	if ((is_lfm2(s) || is_mamba2(s)) && s->n_layer > 64)
		return bg_fail(err, BG_ERR_INVALID,
			       "lfm2, lfm2moe, granitehybrid: at most 64 layers (%u)", s->n_layer);
	if (is_falcon_h1(s) &&
	    (!s->ssm_heads || !s->ssm_groups || !s->ssm_state || ssm_inner(s) % s->ssm_heads ||
	     s->ssm_heads % s->ssm_groups || s->ssm_state > 1024 || s->n_expert))
		return bg_fail(err, BG_ERR_INVALID,
			       "falcon-h1: ssm heads dividing the inner size, groups dividing the "
			       "heads, a state of at most 1024, no experts");
	if (is_mamba2(s) && (!s->ssm_heads || !s->ssm_groups || !s->ssm_state ||
			     ssm_inner(s) % s->ssm_heads || s->ssm_heads % s->ssm_groups ||
			     s->ssm_state > 1024 || (s->n_expert && !s->n_ff_shexp)))
		return bg_fail(err, BG_ERR_INVALID,
			       "%s: ssm heads %u dividing the inner size, groups %u dividing "
			       "them, state %u (1 to 1024), a shared expert with experts",
			       synth_arch(s),
			       s->ssm_heads, s->ssm_groups, s->ssm_state);
	if (is_step35(s) &&
	    (s->n_layer > 64 || !s->n_swa || !s->swa_period || !s->n_head_swa ||
	     !s->n_head_kv_swa || s->n_head_swa % s->n_head_kv_swa || !s->rope_dim ||
	     s->rope_dim % 4 || !s->rope_dim_swa || s->rope_dim_swa % 2 ||
	     s->rope_dim > synth_head_dim(s) || s->rope_dim_swa > synth_head_dim(s) ||
	     (s->n_expert && !s->n_ff_shexp)))
		return bg_fail(err, BG_ERR_INVALID,
			       "step35: at most 64 layers, the window, its period, the windowed "
			       "heads and rotation and the shared expert come from a step35* shape");
	if (has_shexp_gate(s) && !s->n_ff_shexp)
		return bg_fail(err, BG_ERR_INVALID,
			       "%s: the gated shared expert's width comes from a %s* shape",
			       synth_arch(s), synth_arch(s));
	if (s->n_head % s->n_head_kv)
		return bg_fail(err, BG_ERR_INVALID, "heads %u is not a multiple of kv heads %u",
			       s->n_head, s->n_head_kv);
	if (synth_head_dim(s) % 2 || synth_head_dim(s) > 4096)
		return bg_fail(err, BG_ERR_INVALID,
			       "the head size %u is odd or too large (rope needs pairs)",
			       synth_head_dim(s));
	if (is_gemma4(s) &&
	    (s->head_dim_swa % 2 || s->head_dim_swa > 4096 ||
	     (s->n_head_kv_swa && s->n_head % s->n_head_kv_swa) ||
	     (o->dtype == GGUF_DTYPE_Q8_0 && (s->n_head * synth_head_dim(s) % 32 ||
					      s->n_head * s->head_dim_swa % 32))))
		return bg_fail(err, BG_ERR_INVALID,
			       "gemma4: the windowed head size %u must be even (q8_0: heads x "
			       "head sizes multiples of 32) and its kv heads %u divide heads %u",
			       s->head_dim_swa, s->n_head_kv_swa, s->n_head);
	if (o->dtype == GGUF_DTYPE_Q8_0 && s->n_embd_per_layer % 32)
		return bg_fail(err, BG_ERR_INVALID,
			       "q8_0 needs the per-layer embedding width to be a multiple of 32 (%u)",
			       s->n_embd_per_layer);
	if (s->rope_scaling && strcmp(s->rope_scaling, "linear") != 0 &&
	    strcmp(s->rope_scaling, "yarn") != 0)
		return bg_fail(err, BG_ERR_INVALID, "rope scaling '%s' is not linear or yarn",
			       s->rope_scaling);
	if (!(s->rope_base > 1.0f) || !(s->rms_eps > 0.0f && s->rms_eps < 1.0f))
		return bg_fail(err, BG_ERR_INVALID, "rope base must be > 1 and eps in (0, 1)");
	const struct arch_info *ai = arch_find(synth_arch(s));
	if (s->n_expert && !ai->moe_ok)
		return bg_fail(err, BG_ERR_INVALID, "architecture %s has no experts",
			       synth_arch(s));
	if (!s->n_expert && ai->moe_only)
		return bg_fail(err, BG_ERR_INVALID, "a %s shape needs experts", synth_arch(s));
	if (s->n_expert && (s->n_expert > 512 || s->n_expert_used == 0 ||
			    s->n_expert_used > s->n_expert || synth_n_ff_exp(s) > (1u << 20) ||
			    (!ai->moe_ff_key && s->n_ff_exp && s->n_ff_exp != s->n_ff)))
		return bg_fail(err, BG_ERR_INVALID,
			       "experts: %u of %u used, width %u (expected 1 to 512 experts, at "
			       "least one used, llama's width = ffn)",
			       s->n_expert_used, s->n_expert, synth_n_ff_exp(s));
	if (is_ds2(s)) {
		uint32_t G = s->n_group > 1 ? s->n_expert / s->n_group : 0;
		bool q8 = o->dtype == GGUF_DTYPE_Q8_0;
		if (!s->kv_lora || !s->mla_nope || !s->mla_v_head || !s->rope_dim ||
		    s->n_head_kv != 1 || synth_head_dim(s) != s->kv_lora + s->rope_dim ||
		    s->mla_nope + s->rope_dim > 4096 || s->mla_v_head > 4096 ||
		    (s->n_expert && !s->n_expert_shared) ||
		    (s->n_group > 1 &&
		     (s->n_expert % s->n_group || G < 2 || !s->n_group_used ||
		      s->n_group_used >= s->n_group || s->n_expert_used > s->n_group_used * G)) ||
		    (q8 && (s->q_lora % 32 || s->kv_lora % 32 || s->mla_nope % 32 ||
			    s->n_head * s->mla_v_head % 32)))
			return bg_fail(
			    err, BG_ERR_INVALID,
			    "deepseek2: kv_lora, qk_nope, v_head, rope dims positive, head "
			    "size = kv_lora + rope, 1 kv head, shared experts, groups that "
			    "divide the experts (q8_0: ranks and qk_nope multiples of 32)");
	}
	if (is_bailing(s) &&
	    (!s->n_expert_shared || s->n_ff_shexp || s->n_head * synth_head_dim(s) != s->n_embd ||
	     (s->n_group > 1 && (s->n_expert % s->n_group || s->n_expert / s->n_group < 2 ||
				 !s->n_group_used || s->n_group_used >= s->n_group ||
				 s->n_expert_used > s->n_group_used * (s->n_expert / s->n_group)))))
		return bg_fail(err, BG_ERR_INVALID,
			       "bailingmoe2: shared experts (as wide as the experts), heads x head "
			       "size = embd, groups that divide the experts");
	if (is_exaone_moe(s) && (!s->n_ff_shexp || s->n_expert_shared || !s->n_swa))
		return bg_fail(err, BG_ERR_INVALID,
			       "exaone-moe: a shared expert of its own width (n_ff_shexp), a window");
	if (is_bailingmoe(s) &&
	    (!s->n_expert_shared || s->n_ff_shexp || s->n_dense_lead || s->n_group > 1 ||
	     (s->rope_dim && s->rope_dim != synth_head_dim(s))))
		return bg_fail(err, BG_ERR_INVALID,
			       "bailingmoe: shared experts (as wide as the experts), every layer "
			       "routed, no expert groups, every dimension rotated");
	if (is_dots1(s) &&
	    (!s->n_expert_shared || s->n_ff_shexp || s->n_head_kv != s->n_head || s->n_group > 1))
		return bg_fail(err, BG_ERR_INVALID,
			       "dots1: shared experts (as wide as the experts), as many K/V heads "
			       "as query heads, no expert groups");
	if (is_minimax(s) && !has_dense_lead_key(s) && synth_n_ff_exp(s) != s->n_ff)
		return bg_fail(err, BG_ERR_INVALID,
			       "minimax-m2's experts are feed_forward_length wide (llama.cpp): "
			       "expert width %u, ffn %u",
			       synth_n_ff_exp(s), s->n_ff);
	if (is_cohere(s) && !o->tie_output)
		return bg_fail(err, BG_ERR_INVALID,
			       "%s ties its output to token_embd (llama.cpp loads no output.weight)",
			       synth_arch(s));
	if (is_llama4(s) && (!s->moe_step || !s->n_expert))
		return bg_fail(err, BG_ERR_INVALID,
			       "llama4: experts and their interleave step come from a llama4* shape");
	if (s->n_dense_lead + s->n_dense_tail > s->n_layer || (s->n_dense_tail && !is_step35(s)))
		return bg_fail(err, BG_ERR_INVALID,
			       "%u leading and %u trailing dense layers of %u (trailing: step35 "
			       "only)",
			       s->n_dense_lead, s->n_dense_tail, s->n_layer);
	if (o->dtype == GGUF_DTYPE_Q8_0 && synth_n_ff_exp(s) % 32)
		return bg_fail(err, BG_ERR_INVALID,
			       "q8_0 needs the experts' width to be a multiple of 32 (%u)",
			       synth_n_ff_exp(s));
	if (o->dtype == GGUF_DTYPE_Q8_0 && (s->n_embd % 32 || s->n_ff % 32))
		return bg_fail(err, BG_ERR_INVALID,
			       "q8_0 needs embd and ffn to be multiples of 32 (embd %u, ffn %u)",
			       s->n_embd, s->n_ff);
	if (o->dtype != GGUF_DTYPE_F32 && o->dtype != GGUF_DTYPE_F16 &&
	    o->dtype != GGUF_DTYPE_BF16 && o->dtype != GGUF_DTYPE_Q8_0)
		return bg_fail(err, BG_ERR_INVALID, "unknown dtype %d", (int)o->dtype);
	if (o->vocab_from) {
		uint32_t n;
		return tokens_count(o->vocab_from, &n, err);
	}
	if (s->n_vocab && s->n_vocab < 259)
		return bg_fail(err, BG_ERR_INVALID,
			       "a generated vocabulary needs at least 259 tokens, not %u",
			       s->n_vocab);
	if (s->n_vocab > (1u << 24))
		return bg_fail(err, BG_ERR_INVALID, "vocab %u is absurdly large", s->n_vocab);
	return BG_OK;
}

uint64_t synth_n_params(const struct synth_shape *s, bool tie_output)
{
	if (is_nemo(s)) { /* per layer: attn_norm and one block (arch.h) */
		uint64_t E = s->n_embd, hd = synth_head_dim(s), n = 0;
		uint64_t D = ssm_inner(s), H = s->ssm_heads,
			 GN = (uint64_t)s->ssm_groups * s->ssm_state;
		/* nemotron_h_moe's FFN: router, selection bias, up and down experts, shared */
		const uint64_t X = s->n_expert, FX = synth_n_ff_exp(s);
		const uint64_t ffn = X ? E * X + X + 2 * E * FX * X + 2 * E * s->n_ff_shexp
				       : 2 * E * (uint64_t)s->n_ff;
		for (uint32_t l = 0; l < s->n_layer; l++)
			n += E + (s->nemo_ffn >> l & 1	  ? ffn
				  : s->lfm2_attn >> l & 1 ? 2 * E * s->n_head * hd +
								2 * E * s->n_head_kv * hd
							  : E * (2 * D + 2 * GN + H) +
								5 * (D + 2 * GN) + 3 * H + D + D * E);
		return (uint64_t)s->n_vocab * E * (tie_output ? 1 : 2) + E + n;
	}
	if (is_step35(s)) { /* per layer: its kind's heads, gate, dense FFN or experts */
		uint64_t E = s->n_embd, hd = synth_head_dim(s), n = 0, X = s->n_expert;
		uint64_t FX = synth_n_ff_exp(s);
		for (uint32_t l = 0; l < s->n_layer; l++) {
			uint64_t Q = st35_nh(s, l) * hd, KV = st35_kvh(s, l) * hd;
			n += 2 * E + 2 * E * Q + 2 * E * KV + 2 * hd +
			     (l + 1 < s->n_layer ? E * st35_nh(s, l) : 0) +
			     (st35_dense(s, l)
				  ? 3 * E * (uint64_t)s->n_ff
				  : E * X + 3 * E * FX * X + X + 3 * E * s->n_ff_shexp);
		}
		return (uint64_t)s->n_vocab * E * (tie_output ? 1 : 2) + E + n;
	}
	if (is_llama4(s)) { /* per layer: attention, a dense FFN or experts + shared */
		uint64_t E = s->n_embd, hd = synth_head_dim(s), n = 0, X = s->n_expert;
		uint64_t FX = synth_n_ff_exp(s), Q = s->n_head * hd, KV = s->n_head_kv * hd;
		for (uint32_t l = 0; l < s->n_layer; l++)
			n += 2 * E + 2 * E * Q + 2 * E * KV +
			     (synth_moe_layer(s, l) ? E * X + 3 * E * FX * X + 3 * E * FX
					   : 3 * E * (uint64_t)s->n_ff);
		return (uint64_t)s->n_vocab * E * (tie_output ? 1 : 2) + E + n +
		       (s->rope_freqs ? hd / 2 : 0);
	}
	if (is_gemma4(s)) { /* per layer: its kind's geometry, V only where written */
		uint64_t E = s->n_embd, n = 0;
		uint64_t P = s->n_embd_per_layer;
		for (uint32_t l = 0; l < s->n_layer; l++) {
			uint64_t hd = g4_hd(s, l), Q = s->n_head * hd, KV = g4_kvh(s, l) * hd;
			bool own = l + s->shared_kv_layers < s->n_layer;
			bool v = !(s->k_eq_v && !g4_swa(s, l));
			n += 4 * E + E * Q + (own ? (v ? 2 : 1) * E * KV + hd : 0) + Q * E +
			     3 * E * (uint64_t)g4_ff(s, l) + hd + (s->out_scale ? 1 : 0) +
			     (P ? 2 * E * P + E : 0);
			if (s->n_expert && l >= s->n_dense_lead) /* router, its scale, 3 norms,
								  * experts, down scales */
				n += E * s->n_expert + 4 * E +
				     3 * E * (uint64_t)synth_n_ff_exp(s) * s->n_expert + s->n_expert;
		}
		return (uint64_t)s->n_vocab * E * (tie_output ? 1 : 2) + E + n +
		       (s->rope_partial > 0.0f ? synth_head_dim(s) / 2 : 0) +
		       (P ? (uint64_t)s->n_vocab * P * s->n_layer + E * P * s->n_layer + P : 0);
	}
	uint64_t E = s->n_embd, V = s->n_vocab, F = s->n_ff;
	uint64_t hd = synth_head_dim(s);
	uint64_t Q = s->n_head * hd, KV = s->n_head_kv * hd;
	uint64_t layer =
	    (no_pre_norms(s) ? 0 : is_cohere(s) ? E : 2 * E) + E * Q + 2 * E * KV + Q * E;
	if (is_ds2(s)) { /* MLA's weights instead (model.h) */
		uint64_t H = s->n_head, QH = (uint64_t)s->mla_nope + s->rope_dim, QL = s->q_lora;
		uint64_t C = s->kv_lora;
		layer = 2 * E + (QL ? E * QL + QL + QL * H * QH : E * H * QH) +
			E * (C + s->rope_dim) + C + H * s->mla_nope * C + H * C * s->mla_v_head +
			H * s->mla_v_head * E;
	}
	uint64_t ffn = 0; /* glm4moe: the leading dense layers' FFN, the others' experts */
	if (s->n_expert) { /* router and experts instead of the dense FFN */
		uint64_t FX = synth_n_ff_exp(s);
		uint64_t moe = E * s->n_expert + 3 * E * FX * s->n_expert;
		/* granitehybrid, qwen35moe, qwen2moe: a shared expert of its own width; the
		 * latter two its gate */
		moe += 3 * E * s->n_ff_shexp + (has_shexp_gate(s) ? E : 0);
		if (s->n_expert_shared) /* glm4moe: the selection bias, the shared expert */
			moe += (is_ds2(s) && s->softmax_gating ? 0 : s->n_expert) +
			       3 * E * FX * s->n_expert_shared;
		if (is_minimax(s)) /* the selection bias alone */
			moe += s->n_expert;
		if (is_ernie_moe(s) || is_exaone_moe(s)) /* the selection bias */
			moe += s->n_expert;
		uint32_t n_moe = 0;
		for (uint32_t l = 0; l < s->n_layer; l++)
			n_moe += synth_moe_layer(s, l);
		ffn = (uint64_t)(s->n_layer - n_moe) * 3 * E * F + (uint64_t)n_moe * moe;
	} else {
		layer += (no_ffn_gate(s) ? 2 : 3) * E * F; /* apertus, arcee: no gate */
	}
	if (has_qkv_bias(s))
		layer += Q + 2 * KV;
	if (has_qk_norm(s))
		layer += has_qk_norm_full(s) || has_qk_norm_heads(s) ? Q + KV : 2 * hd;
	if (has_post_norms(s))
		layer += 2 * E;
	if (has_o_bias(s)) /* the O bias */
		layer += E;
	if (is_oai(s)) /* O bias, sinks, router and expert biases */
		layer += E + s->n_head + s->n_expert * (1 + 2 * (uint64_t)synth_n_ff_exp(s) + E);
	if (is_lfm2(s)) { /* a conv layer: in_proj, 3 taps, out_proj for its attention */
		uint64_t n_conv = 0;
		for (uint32_t l = 0; l < s->n_layer; l++)
			n_conv += !(s->lfm2_attn >> l & 1);
		ffn -= n_conv * (E * Q + 2 * E * KV + Q * E + 2 * hd - 3 * E * E - 3 * E - E * E);
	}
	if (is_qwen35(s)) { /* gated Q (twice Q); a delta-net layer instead of attention */
		uint64_t KD = (uint64_t)s->gdn_nk * s->gdn_d, VD = (uint64_t)s->gdn_nv * s->gdn_d;
		uint64_t CD = 2 * KD + VD, nv = s->gdn_nv;
		for (uint32_t l = 0; l < s->n_layer; l++)
			ffn += qwen35_gdn_layer(s, l)
				   ? E * CD + E * VD + 4 * CD + 2 * nv + 2 * E * nv + s->gdn_d +
					 VD * E - (E * Q + 2 * E * KV + Q * E + 2 * hd)
				   : E * Q;
	}
	if (is_mamba2(s)) { /* a Mamba2 layer (model.h) in place of attention */
		uint64_t D = 2 * E, H = s->ssm_heads, GN = (uint64_t)s->ssm_groups * s->ssm_state;
		uint64_t n_ssm = 0;
		for (uint32_t l = 0; l < s->n_layer; l++)
			n_ssm += !(s->lfm2_attn >> l & 1);
		ffn += n_ssm * (E * (2 * D + 2 * GN + H) + 5 * (D + 2 * GN) + 3 * H + D + D * E) -
		       n_ssm * (E * Q + 2 * E * KV + Q * E);
	}
	if (is_falcon_h1(s)) { /* the Mamba2 block beside every layer's attention */
		uint64_t D = ssm_inner(s), H = s->ssm_heads,
			 GN = (uint64_t)s->ssm_groups * s->ssm_state;
		ffn += s->n_layer * (E * (2 * D + 2 * GN + H) + 5 * (D + 2 * GN) + 3 * H +
				     (s->ssm_norm ? D : 0) + D * E);
	}
	return V * E * (tie_output ? 1 : 2) + E + s->n_layer * layer + ffn;
}

/* ---- random weights ---- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Draws from N(0, 1) by Box-Muller, two values per pair of uniforms. */
struct normal_rng {
	uint64_t s;
	bool have;
	float next;
};

static float rng_normal(struct normal_rng *r)
{
	if (r->have) {
		r->have = false;
		return r->next;
	}
	double u1 = ((double)(splitmix64(&r->s) >> 11) + 1.0) * 0x1p-53; /* (0, 1] */
	double u2 = (double)(splitmix64(&r->s) >> 11) * 0x1p-53;
	double rad = sqrt(-2.0 * log(u1));
	r->next = (float)(rad * sin(2.0 * M_PI * u2));
	r->have = true;
	return (float)(rad * cos(2.0 * M_PI * u2));
}

/* FILL_NORM: 1 + std * N(0, 1) (f32 only) */
enum fill_kind { FILL_RANDOM, FILL_ONES, FILL_VALUES, FILL_NORM };

struct fill_job {
	uint64_t seed;
	enum fill_kind kind;
	enum gguf_dtype dtype;
	uint64_t n; /* elements */
	float std;
	const float *values; /* FILL_VALUES: [n] f32 (rope factors) */
	float base; /* FILL_NORM: base * (1 + std * N(0, 1)); 1 unless set after add() */
};

static enum bg_status fill_tensor(void *arg, const char *name, void *dst, size_t nbytes,
				  struct bg_err *err)
{
	(void)err;
	const struct fill_job *j = arg;
	/* each tensor's stream depends only on the seed and its name */
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	struct normal_rng r = {j->seed ^ h, false, 0.0f};
	splitmix64(&r.s);
	if (j->dtype == GGUF_DTYPE_Q8_0) {
		uint8_t *o = dst;
		BG_ASSERT(nbytes == j->n / 32 * 34);
		for (uint64_t b = 0; b < j->n / 32; b++) {
			float x[32], amax = 0.0f;
			for (int i = 0; i < 32; i++) {
				x[i] = j->kind == FILL_ONES ? 1.0f : j->std * rng_normal(&r);
				amax = fmaxf(amax, fabsf(x[i]));
			}
			float d = amax / 127.0f;
			uint16_t dh = half_f32_to_f16(d);
			memcpy(o, &dh, 2);
			float id = d > 0.0f ? 1.0f / d : 0.0f;
			for (int i = 0; i < 32; i++)
				o[2 + i] = (uint8_t)(int8_t)lrintf(x[i] * id);
			o += 34;
		}
		return BG_OK;
	}
	for (uint64_t i = 0; i < j->n; i++) {
		float x = j->kind == FILL_ONES	  ? 1.0f
			  : j->kind == FILL_VALUES ? j->values[i]
			  : j->kind == FILL_NORM   ? j->base * (1.0f + j->std * rng_normal(&r))
						   : j->std * rng_normal(&r);
		if (j->dtype == GGUF_DTYPE_F32) {
			memcpy((uint8_t *)dst + 4 * i, &x, 4);
		} else {
			uint16_t hb =
			    j->dtype == GGUF_DTYPE_F16 ? half_f32_to_f16(x) : half_f32_to_bf16(x);
			memcpy((uint8_t *)dst + 2 * i, &hb, 2);
		}
	}
	return BG_OK;
}

/* ---- the writer ---- */

/* key = a GGUF bool array of n elements, element l true unless (l + 1 + phase) % period ==
 * 0 */
static void swa_bool_list(struct gguf_writer *w, const char *key, uint32_t n, uint32_t period,
			  uint32_t phase)
{
	uint8_t *v = malloc(12 + (size_t)n);
	if (!v)
		return; /* the file then lacks the key: llama.cpp's default period 4 too */
	uint32_t et = GGUF_TYPE_BOOL;
	uint64_t cnt = n;
	memcpy(v, &et, 4);
	memcpy(v + 4, &cnt, 8);
	for (uint32_t l = 0; l < n; l++)
		v[12 + l] = (l + 1 + phase) % period != 0;
	gguf_writer_set_raw(w, key, GGUF_TYPE_ARRAY, v, 12 + (size_t)n);
	free(v);
}

static uint32_t file_type(enum gguf_dtype t)
{
	switch (t) {
	case GGUF_DTYPE_F32: return 0;
	case GGUF_DTYPE_F16: return 1;
	case GGUF_DTYPE_Q8_0: return 7;
	case GGUF_DTYPE_BF16: return 32;
	default: return 0; /* synth writes only the four types above */
	}
}

struct synth_build {
	struct gguf_writer *w;
	struct fill_job *jobs; /* [n_jobs], referenced by the writer until the write */
	size_t n_jobs;
	struct vocab vocab;
	bool tied;
	bool embd_scaled; /* gemma: the model multiplies embeddings by sqrt(n_embd); granite
			   * by its embd_scale */
	float logit_scale; /* granite: the output projection this much larger (1 else) */
	float tied_gain;   /* command-r, cohere2: the tied token_embd this much larger */
	float *factors[2]; /* rope factor tensors' values, referenced by their jobs */
};

static void build_free(struct synth_build *b)
{
	gguf_writer_destroy(b->w);
	free(b->jobs);
	free(b->factors[0]);
	free(b->factors[1]);
	vocab_free(&b->vocab);
}

/* The "llama3" rope factors (convert_hf_to_gguf's formula): `factor` (8 for Llama 3.1,
 * 32 for 3.2), low 1, high 4, over original context n_orig, for head size dim and base. */
static void llama3_factors(float *out, uint32_t dim, float base, uint32_t n_orig, float factor)
{
	const float lo = 1.0f, hi = 4.0f;
	float low_wl = (float)n_orig / lo, high_wl = (float)n_orig / hi;
	for (uint32_t i = 0; i < dim / 2; i++) {
		float freq = 1.0f / powf(base, (float)(2 * i) / (float)dim);
		float wl = 2.0f * (float)M_PI / freq;
		if (wl < high_wl)
			out[i] = 1.0f;
		else if (wl > low_wl)
			out[i] = factor;
		else {
			float sm = ((float)n_orig / wl - lo) / (hi - lo);
			out[i] = 1.0f / ((1.0f - sm) / factor + sm);
		}
	}
}

/* LongRoPE factors of the Phi-3 kind: 1 for the fast dimensions rising to `top` for the
 * slow ones (long: top 4, short: top 1.5), so that the two sets give different angles. */
static void longrope_factors(float *out, uint32_t n, float top)
{
	for (uint32_t i = 0; i < n; i++)
		out[i] = 1.0f + (top - 1.0f) * (float)i / (float)(n > 1 ? n - 1 : 1);
}

/* Weight scales. A projection with fan-in ne0 gets std 1/sqrt(ne0), so every matrix-vector
 * product keeps unit variance and the residual stream grows only like sqrt(layers):
 * activations stay O(1) (finite in f16) at any size, and every layer changes the result.
 * Embeddings are N(0, 1); the output projection gets std OUT_SCALE/sqrt(n_embd), so logits
 * have a spread of about OUT_SCALE: the top tokens are separated by much more than
 * rounding noise, which makes greedy outputs comparable across implementations. */
#define OUT_SCALE 4.0f

/* Q/K/V biases (qwen2): N(0, BIAS_STD^2), half the size of a projection's output (unit
 * variance), so that each bias visibly moves the scores without swamping them. */
#define BIAS_STD 0.5f
/* olmo2's norm weights: 1 + N(0, NORM_STD^2), so that a norm applied with the wrong
 * weights, grouping or place changes the output */
#define NORM_STD 0.25f
/* glm4moe's selection bias exp_probs_b: N(0, EXP_PROBS_B_STD^2), about the spread of the
 * sigmoid probabilities it is added to, so that it changes some tokens' experts */
#define EXP_PROBS_B_STD 0.2f
/* gemma4's Q/K norm weights: G4_QK_NORM * (1 + N(0, NORM_STD^2)). With attention scale 1,
 * unit-RMS heads give q.k up to the head size (16, 32): nearly one-hot softmaxes, where
 * the last-bit differences of two implementations' quantized activations move log-probs
 * by tenths (measured); 0.5 each scales the scores by 1/4 */
#define G4_QK_NORM 0.5f

/* The MoE router (ffn_gate_inp): std ROUTER_SCALE/sqrt(n_embd), router logits spread by
 * about ROUTER_SCALE, so that the chosen experts are rarely within rounding of the next
 * one and two implementations route alike. */
#define ROUTER_SCALE 3.0f
/* gemma4's per-expert down scales (ffn_down_exps.scale): 1 + N(0, 0.4^2), far enough from
 * 1 that dropping them moves the log-probs */
#define G4_EXP_SCALE_STD 0.4f
/* qwen35moe, qwen2moe: the shared expert's gate, std SHEXP_GATE_SCALE/sqrt(n_embd), its
 * logits spread by about 2, so that sigmoid's values range over most of (0, 1) */
#define SHEXP_GATE_SCALE 2.0f

/* gpt-oss's expert gate and up projections: std EXPERT_SCALE/sqrt(n_embd), so that about
 * 8 % of their outputs pass the clamped SwiGLU's limit of 7 (a test that drops the clamp
 * fails), and its attention sinks N(0, SINK_STD^2), logits as large as the scores. */
#define EXPERT_SCALE 4.0f
#define SINK_STD 1.0f

static void add(struct synth_build *b, const char *name, enum gguf_dtype t, enum fill_kind kind,
		uint64_t ne0, uint64_t ne1, uint64_t seed)
{
	struct fill_job *j = &b->jobs[b->n_jobs++];
	float std = 1.0f / sqrtf((float)ne0);
	if (strcmp(name, "token_embd.weight") == 0)
		std = b->tied ? OUT_SCALE * b->tied_gain / sqrtf((float)ne0)
			      : 1.0f; /* tied: it is the output */
	/* gemma scales embeddings by sqrt(n_embd): N(0, 1/n_embd) makes the model's input
	 * N(0, 1) again (and, tied, logits spread by about 1); larger, the input token's own
	 * embedding would dominate every later residual stream */
	if (strcmp(name, "token_embd.weight") == 0 && b->embd_scaled)
		std = 1.0f / sqrtf((float)ne0);
	else if (strcmp(name, "output.weight") == 0)
		std = OUT_SCALE * b->logit_scale / sqrtf((float)ne0);
	else if (strlen(name) > 5 && strcmp(name + strlen(name) - 5, ".bias") == 0)
		std = BIAS_STD;
	if (kind == FILL_NORM)
		std = NORM_STD;
	*j = (struct fill_job){seed, kind, t, ne0 * ne1, std, NULL, 1.0f};
	uint64_t ne[2] = {ne0, ne1};
	gguf_writer_add_tensor_fill(b->w, name, t, ne1 > 1 ? 2 : 1, ne, fill_tensor, j);
}

/* Layer l's Mamba2 block as the converter writes it (granitehybrid's names and shapes;
 * falcon-h1's the same, its grouped ssm_norm only with norm): ssm_in (E -> z, xBC, dt),
 * the 4-tap conv and its bias, dt's bias, A (as -exp(A_log) < 0), D, [ssm_norm], ssm_out. */
static void add_mamba2(struct synth_build *b, uint32_t l, enum gguf_dtype t, uint64_t E,
		       const struct synth_shape *s, bool norm, uint64_t seed)
{
	const uint64_t D = ssm_inner(s), H = s->ssm_heads,
		       GN = (uint64_t)s->ssm_groups * s->ssm_state;
	char n[64];
#define ADDM(suffix, type, kind, a, c)                                                             \
	do {                                                                                       \
		snprintf(n, sizeof n, "blk.%u.%s", l, suffix);                                     \
		add(b, n, type, kind, a, c, seed);                                                 \
	} while (0)
	ADDM("ssm_in.weight", t, FILL_RANDOM, E, 2 * D + 2 * GN + H);
	ADDM("ssm_conv1d.weight", GGUF_DTYPE_F32, FILL_RANDOM, 4, D + 2 * GN);
	ADDM("ssm_conv1d.bias", GGUF_DTYPE_F32, FILL_RANDOM, D + 2 * GN, 1);
	b->jobs[b->n_jobs - 1].std = 0.25f;
	ADDM("ssm_dt.bias", GGUF_DTYPE_F32, FILL_RANDOM, H, 1);
	b->jobs[b->n_jobs - 1].std = 1.0f;
	ADDM("ssm_a", GGUF_DTYPE_F32, FILL_NORM, 1, H);
	b->jobs[b->n_jobs - 1].base = -1.0f;
	ADDM("ssm_d", GGUF_DTYPE_F32, FILL_NORM, 1, H);
	if (norm)
		ADDM("ssm_norm.weight", GGUF_DTYPE_F32, FILL_NORM, D / s->ssm_groups,
		     s->ssm_groups);
	ADDM("ssm_out.weight", t, FILL_RANDOM, D, E);
#undef ADDM
}

/* A stacked tensor of ne2 matrices (ne0, ne1), random with std 1/sqrt(ne0) (experts). */
static void add3(struct synth_build *b, const char *name, enum gguf_dtype t, uint64_t ne0,
		 uint64_t ne1, uint64_t ne2, uint64_t seed)
{
	struct fill_job *j = &b->jobs[b->n_jobs++];
	*j = (struct fill_job){seed, FILL_RANDOM, t, ne0 * ne1 * ne2, 1.0f / sqrtf((float)ne0),
			       NULL, 1.0f};
	uint64_t ne[3] = {ne0, ne1, ne2};
	gguf_writer_add_tensor_fill(b->w, name, t, 3, ne, fill_tensor, j);
}

static enum bg_status build(const struct synth_opts *o, struct synth_build *b, struct bg_err *err)
{
	memset(b, 0, sizeof *b);
	enum bg_status st = synth_check(o, err);
	if (st)
		return st;
	const struct synth_shape *s = &o->shape;
	uint32_t n_vocab = synth_n_vocab(o);
	b->w = gguf_writer_create();
	b->jobs = calloc(10 + 28 * ((size_t)s->n_layer + s->n_nextn), sizeof *b->jobs);
	if (!b->w || !b->jobs) {
		build_free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	struct gguf_writer *w = b->w;
	b->tied = o->tie_output;
	b->embd_scaled = is_arch(s, "gemma2") || is_arch(s, "gemma3") || is_gemma4(s) ||
			 s->embd_scale != 0.0f;
	b->logit_scale = s->logit_scale != 0.0f && !is_cohere(s) ? s->logit_scale : 1.0f;
	/* cohere multiplies the logits by logit_scale: the output that much larger */
	b->tied_gain = s->logit_scale != 0.0f && is_cohere(s) ? 1.0f / s->logit_scale : 1.0f;
	const char *arch = synth_arch(s);
	char key[96];
#define ARCH_KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
	gguf_writer_set_str(w, "general.architecture", arch);
	gguf_writer_set_str(w, "general.name", o->name ? o->name : s->name);
	gguf_writer_set_u32(w, "general.file_type", file_type(o->dtype));
	gguf_writer_set_u32(w, "general.alignment", GGUF_DEFAULT_ALIGNMENT);
	gguf_writer_set_u32(w, ARCH_KEY("context_length"), s->n_ctx);
	gguf_writer_set_u32(w, ARCH_KEY("embedding_length"), s->n_embd);
	gguf_writer_set_u32(w, ARCH_KEY("block_count"), s->n_layer + s->n_nextn);
	if (s->n_nextn)
		gguf_writer_set_u32(w, ARCH_KEY("nextn_predict_layers"), s->n_nextn);
	if (is_nemo(s)) { /* the converter's list: n_ff on the FFN layers, else 0 */
		int32_t ffl[64]; /* synth_check: at most 64 layers */
		for (uint32_t l = 0; l < s->n_layer; l++)
			ffl[l] = s->nemo_ffn >> l & 1 ? (int32_t)s->n_ff : 0;
		gguf_writer_set_arr_i32(w, ARCH_KEY("feed_forward_length"), ffl, s->n_layer);
		gguf_writer_set_f32(w, ARCH_KEY("attention.layer_norm_epsilon"), 1e-5f);
	} else if (is_gemma4(s) && s->double_wide) { /* the converter's per-layer list */
		int32_t ffl[4096]; /* synth_check: n_layer <= 4096 */
		for (uint32_t l = 0; l < s->n_layer; l++)
			ffl[l] = (int32_t)g4_ff(s, l);
		gguf_writer_set_arr_i32(w, ARCH_KEY("feed_forward_length"), ffl, s->n_layer);
	} else if (!is_arch(s, "qwen35moe")) { /* Qwen3.5 MoE's files have none */
		gguf_writer_set_u32(w, ARCH_KEY("feed_forward_length"), s->n_ff);
	}
	uint32_t hd = synth_head_dim(s);
	gguf_writer_set_u32(w, ARCH_KEY("rope.dimension_count"), s->rope_dim ? s->rope_dim : hd);
	if (hd != s->n_embd / s->n_head || is_gemma4(s)) {
		gguf_writer_set_u32(w, ARCH_KEY("attention.key_length"), hd);
		gguf_writer_set_u32(w, ARCH_KEY("attention.value_length"),
				    is_ds2(s) ? s->kv_lora : hd);
	}
	if (is_ds2(s)) { /* DeepseekV2Model's converter's MLA keys */
		gguf_writer_set_u32(w, ARCH_KEY("attention.q_lora_rank"), s->q_lora);
		gguf_writer_set_u32(w, ARCH_KEY("attention.kv_lora_rank"), s->kv_lora);
		gguf_writer_set_u32(w, ARCH_KEY("attention.key_length_mla"),
				    s->mla_nope + s->rope_dim);
		gguf_writer_set_u32(w, ARCH_KEY("attention.value_length_mla"), s->mla_v_head);
		gguf_writer_set_u32(w, ARCH_KEY("leading_dense_block_count"), s->n_dense_lead);
		if (s->rope_scaling && s->mscale_all_dim > 0.0f)
			gguf_writer_set_f32(w, ARCH_KEY("rope.scaling.yarn_log_multiplier"),
					    0.1f * s->mscale_all_dim);
	}
	if (is_gemma4(s)) { /* the keys llama.cpp's gemma4 loader requires or reads */
		uint32_t hs = s->head_dim_swa ? s->head_dim_swa : hd;
		gguf_writer_set_u32(w, ARCH_KEY("attention.key_length_swa"), hs);
		gguf_writer_set_u32(w, ARCH_KEY("attention.value_length_swa"), hs);
		gguf_writer_set_u32(w, ARCH_KEY("rope.dimension_count_swa"), hs);
		gguf_writer_set_u32(w, ARCH_KEY("embedding_length_per_layer_input"),
				    s->n_embd_per_layer);
		gguf_writer_set_u32(w, ARCH_KEY("attention.shared_kv_layers"), s->shared_kv_layers);
		if (s->rope_base_swa > 0.0f)
			gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base_swa"), s->rope_base_swa);
		if (s->final_softcap > 0.0f)
			gguf_writer_set_f32(w, ARCH_KEY("final_logit_softcapping"), s->final_softcap);
	}
	bool gemma2 = is_arch(s, "gemma2"), phi3 = is_arch(s, "phi3");
	if (s->n_swa)
		gguf_writer_set_u32(w, ARCH_KEY("attention.sliding_window"), s->n_swa);
	if (s->swa_all)
		gguf_writer_set_u32(w, ARCH_KEY("attention.sliding_window_pattern"), 0);
	else if (s->n_swa && (no_pre_norms(s) || is_exaone_moe(s))) /* OLMo 3's, EXAONE 4.0's
								     * and K-EXAONE's: (l + 1)
								     * % 4 != 0 per layer */
		swa_bool_list(w, ARCH_KEY("attention.sliding_window_pattern"), s->n_layer, 4, 0);
	else if (s->n_swa && is_gemma4(s)) /* the converter's list from layer_types */
		swa_bool_list(w, ARCH_KEY("attention.sliding_window_pattern"), s->n_layer,
			      s->swa_period ? s->swa_period : 6, 0);
	else if (s->n_swa && is_step35(s)) /* its first layer global */
		swa_bool_list(w, ARCH_KEY("attention.sliding_window_pattern"), s->n_layer,
			      s->swa_period, s->swa_period - 1);
	if (gemma2) {
		gguf_writer_set_f32(w, ARCH_KEY("attn_logit_softcapping"),
				    s->attn_softcap > 0.0f ? s->attn_softcap : 50.0f);
		gguf_writer_set_f32(w, ARCH_KEY("final_logit_softcapping"),
				    s->final_softcap > 0.0f ? s->final_softcap : 30.0f);
	}
	if (is_cohere(s) && s->logit_scale != 0.0f) /* required for cohere2 */
		gguf_writer_set_f32(w, ARCH_KEY("logit_scale"), s->logit_scale);
	if (arch_find(arch)->granite) { /* logit_scale is required there */
		gguf_writer_set_f32(w, ARCH_KEY("logit_scale"), b->logit_scale);
		if (s->embd_scale != 0.0f)
			gguf_writer_set_f32(w, ARCH_KEY("embedding_scale"), s->embd_scale);
		if (s->attn_scale != 0.0f)
			gguf_writer_set_f32(w, ARCH_KEY("attention.scale"), s->attn_scale);
		if (s->residual_scale != 0.0f)
			gguf_writer_set_f32(w, ARCH_KEY("residual_scale"), s->residual_scale);
	}
	if (s->rope_scaling) {
		gguf_writer_set_str(w, ARCH_KEY("rope.scaling.type"), s->rope_scaling);
		gguf_writer_set_f32(w, ARCH_KEY("rope.scaling.factor"), s->rope_factor);
		if (is_arch(s, "mistral3") && strcmp(s->rope_scaling, "yarn") == 0)
			gguf_writer_set_f32(w, ARCH_KEY("rope.scaling.yarn_log_multiplier"), 1.0f);
	}
	if (s->attn_temp_scale != 0.0f)
		gguf_writer_set_f32(w, ARCH_KEY("attention.temperature_scale"), s->attn_temp_scale);
	if (s->n_ctx_orig)
		gguf_writer_set_u32(w, ARCH_KEY("rope.scaling.original_context_length"),
				    s->n_ctx_orig);
	if (!phi3 && s->rope_attn_factor > 0.0f)
		gguf_writer_set_f32(w, ARCH_KEY("rope.scaling.attn_factor"), s->rope_attn_factor);
	if (phi3 && s->n_ctx_orig) { /* convert_hf_to_gguf's LongRoPE attention factor */
		float scale = (float)s->n_ctx / (float)s->n_ctx_orig;
		if (scale > 1.0f)
			gguf_writer_set_f32(w, ARCH_KEY("rope.scaling.attn_factor"),
					    sqrtf(1.0f + logf(scale) / logf((float)s->n_ctx_orig)));
	}
	if (is_step35(s)) {	   /* Step35Model's converter's per-layer lists */
		int32_t hl[2][64]; /* synth_check: at most 64 layers */
		float cl[2][64];
		for (uint32_t l = 0; l < s->n_layer; l++) {
			hl[0][l] = (int32_t)st35_nh(s, l);
			hl[1][l] = (int32_t)st35_kvh(s, l);
			float c[2];
			step35_clamps(l, c);
			cl[0][l] = c[0];
			cl[1][l] = c[1];
		}
		gguf_writer_set_arr_i32(w, ARCH_KEY("attention.head_count"), hl[0], s->n_layer);
		gguf_writer_set_arr_i32(w, ARCH_KEY("attention.head_count_kv"), hl[1], s->n_layer);
		gguf_writer_set_arr_f32(w, ARCH_KEY("swiglu_clamp_exp"), cl[0], s->n_layer);
		gguf_writer_set_arr_f32(w, ARCH_KEY("swiglu_clamp_shexp"), cl[1], s->n_layer);
		gguf_writer_set_u32(w, ARCH_KEY("rope.dimension_count_swa"), s->rope_dim_swa);
		gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base_swa"), s->rope_base_swa);
		gguf_writer_set_u32(w, ARCH_KEY("expert_gating_func"), 2); /* sigmoid */
		gguf_writer_set_f32(w, ARCH_KEY("expert_weights_scale"), s->expert_scale);
		gguf_writer_set_bool(w, ARCH_KEY("expert_weights_norm"), true);
	} else {
		gguf_writer_set_u32(w, ARCH_KEY("attention.head_count"), s->n_head);
	}
	if (is_qwen35(s)) { /* Qwen3_5TextModel's converter's keys */
		int32_t sec[4];
		synth_rope_sections(s, sec);
		if (!is_arch(s, "qwen3next")) /* plain NeoX RoPE there */
			gguf_writer_set_arr_i32(w, ARCH_KEY("rope.dimension_sections"), sec, 4);
		gguf_writer_set_u32(w, ARCH_KEY("full_attention_interval"), s->gdn_every);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.conv_kernel"), 4);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.state_size"), s->gdn_d);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.group_count"), s->gdn_nk);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.time_step_rank"), s->gdn_nv);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.inner_size"), s->gdn_nv * s->gdn_d);
	}
	if (arch_find(arch)->mrope && !is_qwen35(s)) { /* Qwen2VL / Qwen3VL converters' keys */
		int32_t sec[4];
		synth_rope_sections(s, sec);
		gguf_writer_set_arr_i32(w, ARCH_KEY("rope.dimension_sections"), sec, 4);
		if (s->n_deepstack)
			gguf_writer_set_u32(w, ARCH_KEY("n_deepstack_layers"), s->n_deepstack);
	}
	if (is_falcon_h1(s)) { /* conversion/falcon_h1.py's (Mamba2Model's) keys */
		gguf_writer_set_u32(w, ARCH_KEY("ssm.conv_kernel"), 4);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.inner_size"), (uint32_t)ssm_inner(s));
		gguf_writer_set_u32(w, ARCH_KEY("ssm.state_size"), s->ssm_state);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.time_step_rank"), s->ssm_heads);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.group_count"), s->ssm_groups);
	}
	if (is_mamba2(s)) { /* conversion/granite.py's keys */
		gguf_writer_set_u32(w, ARCH_KEY("ssm.conv_kernel"), 4);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.inner_size"), (uint32_t)ssm_inner(s));
		gguf_writer_set_u32(w, ARCH_KEY("ssm.state_size"), s->ssm_state);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.time_step_rank"), s->ssm_heads);
		gguf_writer_set_u32(w, ARCH_KEY("ssm.group_count"), s->ssm_groups);
		if (!is_nemo(s))
			gguf_writer_set_bool(w, ARCH_KEY("rope.scaling.finetuned"), false);
	}
	if (s->n_ff_shexp) /* granitehybrid, qwen35moe, qwen2moe */
		gguf_writer_set_u32(w, ARCH_KEY("expert_shared_feed_forward_length"),
				    s->n_ff_shexp);
	if (is_lfm2(s) || is_mamba2(s)) { /* the converters' per-layer list: 0 for a conv or
					   * Mamba2 layer */
		int32_t kvl[64]; /* synth_check: at most 64 layers */
		for (uint32_t l = 0; l < s->n_layer; l++)
			kvl[l] = s->lfm2_attn >> l & 1 ? (int32_t)s->n_head_kv : 0;
		gguf_writer_set_arr_i32(w, ARCH_KEY("attention.head_count_kv"), kvl, s->n_layer);
		if (is_lfm2(s))
			gguf_writer_set_u32(w, ARCH_KEY("shortconv.l_cache"), 3);
	} else if (is_step35(s)) { /* written above */
	} else if (is_gemma4(s) && s->n_head_kv_swa && s->n_head_kv_swa != s->n_head_kv) {
		int32_t kvl[4096]; /* synth_check: n_layer <= 4096 */
		for (uint32_t l = 0; l < s->n_layer; l++)
			kvl[l] = (int32_t)g4_kvh(s, l);
		gguf_writer_set_arr_i32(w, ARCH_KEY("attention.head_count_kv"), kvl, s->n_layer);
	} else {
		gguf_writer_set_u32(w, ARCH_KEY("attention.head_count_kv"), s->n_head_kv);
	}
	gguf_writer_set_f32(w, ARCH_KEY(is_cohere(s) ? "attention.layer_norm_epsilon"
						     : "attention.layer_norm_rms_epsilon"),
			    s->rms_eps);
	gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base"), s->rope_base);
	gguf_writer_set_u32(w, ARCH_KEY("vocab_size"), n_vocab);
	if (is_arch(s, "apertus")) { /* xielu.* arrays, one value a layer (no arch prefix) */
		float *xv = malloc(4 * (size_t)s->n_layer * sizeof *xv);
		if (!xv) {
			build_free(b);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory");
		}
		for (uint32_t l = 0; l < s->n_layer; l++) {
			float raw[4];
			synth_xielu_raw(l, raw);
			for (int k = 0; k < 4; k++)
				xv[(size_t)k * s->n_layer + l] = raw[k];
		}
		static const char *const xk[4] = {"xielu.alpha_n", "xielu.alpha_p", "xielu.beta",
						  "xielu.eps"};
		for (int k = 0; k < 4; k++)
			gguf_writer_set_arr_f32(w, xk[k], xv + (size_t)k * s->n_layer, s->n_layer);
		free(xv);
	}
	if (s->n_expert) {
		gguf_writer_set_u32(w, ARCH_KEY("expert_count"), s->n_expert);
		gguf_writer_set_u32(w, ARCH_KEY("expert_used_count"), s->n_expert_used);
		if (arch_find(arch)->moe_ff_key)
			gguf_writer_set_u32(w, ARCH_KEY("expert_feed_forward_length"),
					    synth_n_ff_exp(s));
		if (is_arch(s, "glm4moe")) { /* the keys Glm4MoeModel's converter writes */
			gguf_writer_set_u32(w, ARCH_KEY("expert_shared_count"), s->n_expert_shared);
			gguf_writer_set_u32(w, ARCH_KEY("leading_dense_block_count"),
					    s->n_dense_lead);
			gguf_writer_set_u32(w, ARCH_KEY("expert_gating_func"), 2); /* sigmoid */
			if (s->expert_scale != 0.0f)
				gguf_writer_set_f32(w, ARCH_KEY("expert_weights_scale"),
						    s->expert_scale);
			gguf_writer_set_bool(w, ARCH_KEY("expert_weights_norm"), true);
		}
		if (is_nemo(s)) { /* NemotronHModel's: n_shared_experts, norm_topk_prob,
				   * routed_scaling_factor, n_group 1 */
			gguf_writer_set_u32(w, ARCH_KEY("expert_shared_count"), 1);
			gguf_writer_set_bool(w, ARCH_KEY("expert_weights_norm"), true);
			gguf_writer_set_f32(w, ARCH_KEY("expert_weights_scale"), s->expert_scale);
			gguf_writer_set_u32(w, ARCH_KEY("expert_group_count"), 1);
		}
		if (is_llama4(s))
			gguf_writer_set_u32(w, ARCH_KEY("interleave_moe_layer_step"), s->moe_step);
		if (is_ernie_moe(s)) { /* Ernie4_5MoeModel's: moe_layer_interval,
					* moe_layer_start_index */
			gguf_writer_set_u32(w, ARCH_KEY("interleave_moe_layer_step"),
					    s->moe_step ? s->moe_step : 1);
			gguf_writer_set_u32(w, ARCH_KEY("leading_dense_block_count"),
					    s->n_dense_lead);
		}
		if (is_hunyuan(s)) { /* HunYuanMoEModel's: moe_intermediate_size (unused by
				      * llama.cpp's shapes), num_shared_expert */
			gguf_writer_set_u32(w, ARCH_KEY("expert_feed_forward_length"),
					    synth_n_ff_exp(s));
			gguf_writer_set_u32(w, ARCH_KEY("expert_shared_count"), 1);
		}
		if (is_minimax(s)) /* MiniMaxM2Model's: scoring_func sigmoid */
			gguf_writer_set_u32(w, ARCH_KEY("expert_gating_func"), 2);
		if (has_dense_lead_key(s)) /* LFM2MoeModel's: num_dense_layers */
			gguf_writer_set_u32(w, ARCH_KEY("leading_dense_block_count"),
					    s->n_dense_lead);
		if (is_ds2(s)) { /* as glm4moe's; V2's softmax without norm_topk_prob */
			gguf_writer_set_u32(w, ARCH_KEY("expert_shared_count"), s->n_expert_shared);
			gguf_writer_set_u32(w, ARCH_KEY("expert_gating_func"),
					    s->softmax_gating ? 1 : 2);
			if (s->expert_scale != 0.0f)
				gguf_writer_set_f32(w, ARCH_KEY("expert_weights_scale"),
						    s->expert_scale);
			if (!s->softmax_gating)
				gguf_writer_set_bool(w, ARCH_KEY("expert_weights_norm"), true);
			if (s->n_group > 1) {
				gguf_writer_set_u32(w, ARCH_KEY("expert_group_count"), s->n_group);
				gguf_writer_set_u32(w, ARCH_KEY("expert_group_used_count"),
						    s->n_group_used);
			}
		}
		if (is_bailingmoe(s)) { /* BailingMoeModel's: first_k_dense_replace (read and
					 * unused by llama.cpp), scale 1.0, num_shared_experts,
					 * norm_topk_prob; no gating key */
			gguf_writer_set_u32(w, ARCH_KEY("leading_dense_block_count"), 0);
			gguf_writer_set_f32(w, ARCH_KEY("expert_weights_scale"),
					    s->expert_scale != 0.0f ? s->expert_scale : 1.0f);
			gguf_writer_set_u32(w, ARCH_KEY("expert_shared_count"), s->n_expert_shared);
			gguf_writer_set_bool(w, ARCH_KEY("expert_weights_norm"), true);
		}
		/* BailingMoeV2Model's, Dots1Model's and ExaoneMoEModel's converters' keys (the
		 * groups from n_group / topk_group, the gating from scoring_func) */
		if (is_bailing(s) || is_dots1(s) || is_exaone_moe(s)) {
			gguf_writer_set_u32(w, ARCH_KEY("leading_dense_block_count"),
					    s->n_dense_lead);
			if (is_bailing(s)) /* (dots1: no such key there) */
				gguf_writer_set_u32(w,
						    ARCH_KEY("expert_shared_feed_forward_length"),
						    synth_n_ff_exp(s) * s->n_expert_shared);
			gguf_writer_set_f32(w, ARCH_KEY("expert_weights_scale"), s->expert_scale);
			gguf_writer_set_u32(w, ARCH_KEY("expert_shared_count"),
					    is_exaone_moe(s) ? 1 : s->n_expert_shared);
			gguf_writer_set_bool(w, ARCH_KEY("expert_weights_norm"), true);
			gguf_writer_set_u32(w, ARCH_KEY("expert_gating_func"), 2); /* sigmoid */
			if (s->n_group > 1) {
				gguf_writer_set_u32(w, ARCH_KEY("expert_group_count"), s->n_group);
				gguf_writer_set_u32(w, ARCH_KEY("expert_group_used_count"),
						    s->n_group_used);
			}
		}
	}
#undef ARCH_KEY

	if (o->vocab_from) {
		for (uint64_t i = 0; i < gguf_n_kv(o->vocab_from); i++) {
			struct gguf_str k = gguf_kv_key(o->vocab_from, i);
			if (k.len > 10 && memcmp(k.ptr, "tokenizer.", 10) == 0)
				gguf_writer_copy_kv(w, o->vocab_from, i);
		}
	} else {
		st = vocab_build(&b->vocab, s->n_vocab, err);
		if (st) {
			build_free(b);
			return st;
		}
		gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
		gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens",
					(const char *const *)b->vocab.text, b->vocab.n);
		gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", b->vocab.scores, b->vocab.n);
		gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", b->vocab.types, b->vocab.n);
		gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
		gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
		gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
		gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
		gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
	}

	uint64_t E = s->n_embd, V = n_vocab, F = s->n_ff, HD = hd;
	uint64_t X = s->n_expert, FX = synth_n_ff_exp(s);
	uint64_t Q = (uint64_t)s->n_head * hd, KV = (uint64_t)s->n_head_kv * hd;
	bool bias = has_qkv_bias(s), qkn = has_qk_norm(s), post = has_post_norms(s), oai = is_oai(s);
	/* olmo2: no pre-norms (exaone4's too) */
	bool olmo2 = no_pre_norms(s), g4 = is_gemma4(s), seed = is_arch(s, "seed_oss"),
	     nogate = no_ffn_gate(s), glm4 = is_arch(s, "glm4"), glm4moe = is_arch(s, "glm4moe"),
	     ds2 = is_ds2(s), lfm2 = is_lfm2(s), q35 = is_qwen35(s);
	/* the norms' weights; pk: attn_norm's and ffn_norm's */
	enum fill_kind nk = olmo2 || g4 || random_norms(s) ? FILL_NORM : FILL_ONES;
	enum fill_kind pk = g4 || random_norms(s) ? FILL_NORM : FILL_ONES;
	enum gguf_dtype t = o->dtype;
	if (g4 && s->rope_partial > 0.0f) { /* the converter's proportional RoPE factors */
		if (!(b->factors[0] = calloc(hd / 2, sizeof(float)))) {
			build_free(b);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory");
		}
		uint32_t turn = (uint32_t)((float)hd * s->rope_partial / 2.0f);
		for (uint32_t i = 0; i < hd / 2; i++)
			b->factors[0][i] = i < turn ? 1.0f : 1e30f;
		add(b, "rope_freqs.weight", GGUF_DTYPE_F32, FILL_VALUES, hd / 2, 1, o->seed);
		b->jobs[b->n_jobs - 1].values = b->factors[0];
	}
	if (s->rope_freqs || (phi3 && s->n_ctx_orig)) {
		for (int k = 0; k < 2; k++)
			if (!(b->factors[k] = calloc(hd / 2, sizeof(float)))) {
				build_free(b);
				return bg_fail(err, BG_ERR_NOMEM, "out of memory");
			}
		const char *names[2] = {"rope_freqs.weight", NULL};
		if (s->rope_freqs) {
			llama3_factors(b->factors[0], hd, s->rope_base,
				       s->n_ctx_orig ? s->n_ctx_orig : 8192,
				       s->rope_factor > 0.0f ? s->rope_factor : 8.0f);
		} else {
			longrope_factors(b->factors[0], hd / 2, 4.0f);
			longrope_factors(b->factors[1], hd / 2, 1.5f);
			names[0] = "rope_factors_long.weight";
			names[1] = "rope_factors_short.weight";
		}
		for (int k = 0; k < 2 && names[k]; k++) {
			add(b, names[k], GGUF_DTYPE_F32, FILL_VALUES, hd / 2, 1, o->seed);
			b->jobs[b->n_jobs - 1].values = b->factors[k];
		}
	}
	add(b, "token_embd.weight", t, FILL_RANDOM, E, V, o->seed);
	add(b, lfm2 ? "token_embd_norm.weight" : "output_norm.weight", GGUF_DTYPE_F32, nk, E, 1,
	    o->seed);
	const uint64_t PL = g4 ? s->n_embd_per_layer : 0;
	if (PL) { /* gemma4 E2B/E4B's per-layer token embeddings */
		add(b, "per_layer_token_embd.weight", t, FILL_RANDOM, PL * s->n_layer, V, o->seed);
		add(b, "per_layer_model_proj.weight", t, FILL_RANDOM, E, PL * s->n_layer, o->seed);
		add(b, "per_layer_proj_norm.weight", GGUF_DTYPE_F32, FILL_NORM, PL, 1, o->seed);
	}
	if (!o->tie_output)
		add(b, "output.weight", t, FILL_RANDOM, E, V, o->seed);
	for (uint32_t l = 0; l < s->n_layer + s->n_nextn; l++) {
		char n[64];
#define ADD(suffix, type, kind, a, c)                                                              \
	do {                                                                                       \
		snprintf(n, sizeof n, "blk.%u.%s", l, suffix);                                     \
		add(b, n, type, kind, a, c, o->seed);                                              \
	} while (0)
#define ADD3(suffix, type, a, c, d)                                                                \
	do {                                                                                       \
		snprintf(n, sizeof n, "blk.%u.%s", l, suffix);                                     \
		add3(b, n, type, a, c, d, o->seed);                                                \
	} while (0)
		if (is_llama4(s) || is_step35(s)) { /* their own layers (the shapes' comments) */
			/* step35: its layer kind's heads, the Q/K norms and the head gate, the
			 * selection bias, a shared expert of its own width; llama4: the heads of
			 * n_head / n_head_kv, its routed experts' width */
			const bool st35 = is_step35(s);
			const uint64_t nh = st35 ? st35_nh(s, l) : s->n_head, Ql = nh * HD;
			const uint64_t KVl = st35 ? st35_kvh(s, l) * HD : KV;
			const uint64_t FS = st35 ? s->n_ff_shexp : FX;
			ADD("attn_norm.weight", GGUF_DTYPE_F32, pk, E, 1);
			ADD("attn_q.weight", t, FILL_RANDOM, E, Ql);
			ADD("attn_k.weight", t, FILL_RANDOM, E, KVl);
			ADD("attn_v.weight", t, FILL_RANDOM, E, KVl);
			if (st35) {
				ADD("attn_q_norm.weight", GGUF_DTYPE_F32, nk, HD, 1);
				ADD("attn_k_norm.weight", GGUF_DTYPE_F32, nk, HD, 1);
			}
			ADD("attn_output.weight", t, FILL_RANDOM, Ql, E);
			if (st35 && l + 1 < s->n_layer)
				ADD("attn_gate.weight", t, FILL_RANDOM, E, nh);
			ADD("ffn_norm.weight", GGUF_DTYPE_F32, pk, E, 1);
			if (st35 ? st35_dense(s, l) : !synth_moe_layer(s, l)) {
				ADD("ffn_gate.weight", t, FILL_RANDOM, E, F);
				ADD("ffn_up.weight", t, FILL_RANDOM, E, F);
				ADD("ffn_down.weight", t, FILL_RANDOM, F, E);
				continue;
			}
			ADD("ffn_gate_inp.weight", GGUF_DTYPE_F32, FILL_RANDOM, E, X);
			b->jobs[b->n_jobs - 1].std = ROUTER_SCALE / sqrtf((float)E);
			ADD3("ffn_gate_exps.weight", t, E, FX, X);
			ADD3("ffn_up_exps.weight", t, E, FX, X);
			ADD3("ffn_down_exps.weight", t, FX, E, X);
			if (st35) {
				ADD("exp_probs_b.bias", GGUF_DTYPE_F32, FILL_RANDOM, X, 1);
				b->jobs[b->n_jobs - 1].std = EXP_PROBS_B_STD;
			}
			ADD("ffn_gate_shexp.weight", t, FILL_RANDOM, E, FS);
			ADD("ffn_up_shexp.weight", t, FILL_RANDOM, E, FS);
			ADD("ffn_down_shexp.weight", t, FILL_RANDOM, FS, E);
			continue;
		}
		const bool own_kv = !g4 || l + s->shared_kv_layers < s->n_layer;
		if (g4) { /* the layer's kind's geometry, its FFN's width */
			F = g4_ff(s, l);
			HD = g4_hd(s, l);
			Q = (uint64_t)s->n_head * HD;
			KV = (uint64_t)g4_kvh(s, l) * HD;
		}
		if (!olmo2)
			ADD("attn_norm.weight", GGUF_DTYPE_F32, pk, E, 1);
		const bool conv = (lfm2 && !(s->lfm2_attn >> l & 1)) || qwen35_gdn_layer(s, l);
		const bool nffn = is_nemo(s) && (s->nemo_ffn >> l & 1); /* nemotron_h: FFN alone */
		const bool ssm = is_mamba2(s) && !(s->lfm2_attn >> l & 1) && !nffn;
		if (nffn && X) { /* nemotron_h_moe: routed ReLU^2 experts, the shared expert */
			ADD("ffn_gate_inp.weight", GGUF_DTYPE_F32, FILL_RANDOM, E, X);
			b->jobs[b->n_jobs - 1].std = ROUTER_SCALE / sqrtf((float)E);
			ADD("exp_probs_b.bias", GGUF_DTYPE_F32, FILL_RANDOM, X, 1);
			b->jobs[b->n_jobs - 1].std = EXP_PROBS_B_STD;
			ADD3("ffn_up_exps.weight", t, E, FX, X);
			ADD3("ffn_down_exps.weight", t, FX, E, X);
			ADD("ffn_up_shexp.weight", t, FILL_RANDOM, E, s->n_ff_shexp);
			ADD("ffn_down_shexp.weight", t, FILL_RANDOM, s->n_ff_shexp, E);
			continue;
		}
		if (nffn) {
			ADD("ffn_up.weight", t, FILL_RANDOM, E, F);
			ADD("ffn_down.weight", t, FILL_RANDOM, F, E);
			continue;
		}
		if (ssm) { /* granitehybrid's Mamba2 block */
			add_mamba2(b, l, t, E, s, true, o->seed);
		} else if (q35 && conv) { /* qwen35's delta net (model.h); conv taps f32 */
			const uint64_t KD = (uint64_t)s->gdn_nk * s->gdn_d;
			const uint64_t VD = (uint64_t)s->gdn_nv * s->gdn_d;
			if (s->gdn_ssm_in) { /* qwen3next's older files */
				ADD("ssm_in.weight", t, FILL_RANDOM, E, 2 * KD + 2 * VD);
			} else {
				ADD("attn_qkv.weight", t, FILL_RANDOM, E, 2 * KD + VD);
				ADD("attn_gate.weight", t, FILL_RANDOM, E, VD);
			}
			ADD("ssm_conv1d.weight", GGUF_DTYPE_F32, FILL_RANDOM, 4, 2 * KD + VD);
			ADD("ssm_dt.bias", GGUF_DTYPE_F32, FILL_RANDOM, s->gdn_nv, 1);
			ADD("ssm_a", GGUF_DTYPE_F32, FILL_NORM, s->gdn_nv, 1);
			b->jobs[b->n_jobs - 1].base = -0.2f;
			if (is_arch(s, "qwen3next")) { /* per K head [beta | alpha] */
				ADD("ssm_ba.weight", t, FILL_RANDOM, E, 2 * s->gdn_nv);
			} else {
				ADD("ssm_beta.weight", t, FILL_RANDOM, E, s->gdn_nv);
				ADD("ssm_alpha.weight", t, FILL_RANDOM, E, s->gdn_nv);
			}
			ADD("ssm_norm.weight", GGUF_DTYPE_F32, nk, s->gdn_d, 1);
			ADD("ssm_out.weight", t, FILL_RANDOM, VD, E);
		} else if (conv) { /* lfm2's short-conv block; the conv taps f32 */
			ADD("shortconv.in_proj.weight", t, FILL_RANDOM, E, 3 * E);
			ADD("shortconv.conv.weight", GGUF_DTYPE_F32, FILL_RANDOM, 3, E);
			ADD("shortconv.out_proj.weight", t, FILL_RANDOM, E, E);
		} else if (ds2) { /* MLA (model.h), the converter's names and shapes */
			const uint64_t H = s->n_head, QH = (uint64_t)s->mla_nope + s->rope_dim;
			const uint64_t C = s->kv_lora, QL = s->q_lora;
			if (QL) {
				ADD("attn_q_a.weight", t, FILL_RANDOM, E, QL);
				ADD("attn_q_a_norm.weight", GGUF_DTYPE_F32, nk, QL, 1);
				ADD("attn_q_b.weight", t, FILL_RANDOM, QL, H * QH);
			} else {
				ADD("attn_q.weight", t, FILL_RANDOM, E, H * QH);
			}
			ADD("attn_kv_a_mqa.weight", t, FILL_RANDOM, E, C + s->rope_dim);
			ADD("attn_kv_a_norm.weight", GGUF_DTYPE_F32, nk, C, 1);
			ADD3("attn_k_b.weight", t, s->mla_nope, C, H);
			ADD3("attn_v_b.weight", t, C, s->mla_v_head, H);
			Q = H * s->mla_v_head;	    /* attn_output's input */
		} else if (phi3 || is_bailing(s)) { /* fused, as Phi-3's and Ling's files are */
			ADD("attn_qkv.weight", t, FILL_RANDOM, E, Q + 2 * KV);
		} else {
			ADD("attn_q.weight", t, FILL_RANDOM, E, q35 ? 2 * Q : Q); /* qwen35: gate */
			if (own_kv)
				ADD("attn_k.weight", t, FILL_RANDOM, E, KV);
			if (own_kv && !(g4 && s->k_eq_v && !g4_swa(s, l)))
				ADD("attn_v.weight", t, FILL_RANDOM, E, KV);
		}
		if (bias) { /* f32 whatever the dtype, as llama.cpp's converter writes them */
			ADD("attn_q.bias", GGUF_DTYPE_F32, FILL_RANDOM, Q, 1);
			ADD("attn_k.bias", GGUF_DTYPE_F32, FILL_RANDOM, KV, 1);
			ADD("attn_v.bias", GGUF_DTYPE_F32, FILL_RANDOM, KV, 1);
		}
		if (qkn && !conv && !ssm) { /* Command R+: [HD, heads], a row per head */
			const bool qh = has_qk_norm_heads(s);
			ADD("attn_q_norm.weight", GGUF_DTYPE_F32, nk, has_qk_norm_full(s) ? Q : HD,
			    qh ? s->n_head : 1);
			if (g4)
				b->jobs[b->n_jobs - 1].base = G4_QK_NORM;
			if (own_kv)
				ADD("attn_k_norm.weight", GGUF_DTYPE_F32, nk,
				    has_qk_norm_full(s) ? KV : HD, qh ? s->n_head_kv : 1);
			if (g4 && own_kv)
				b->jobs[b->n_jobs - 1].base = G4_QK_NORM;
		}
		if (!conv && !ssm)
			ADD("attn_output.weight", t, FILL_RANDOM, Q, E);
		if (has_o_bias(s))
			ADD("attn_output.bias", GGUF_DTYPE_F32, FILL_RANDOM, E, 1);
		if (is_falcon_h1(s)) { /* the Mamba2 block beside, granitehybrid's tensors */
			add_mamba2(b, l, t, E, s, s->ssm_norm, o->seed);
		}
		if (oai) {
			ADD("attn_output.bias", GGUF_DTYPE_F32, FILL_RANDOM, E, 1);
			ADD("attn_sinks.weight", GGUF_DTYPE_F32, FILL_RANDOM, s->n_head, 1);
			b->jobs[b->n_jobs - 1].std = SINK_STD;
		}
		if (post || oai || seed || glm4moe || q35) /* gpt-oss, seed_oss, glm4moe, qwen35:
							    * the FFN's input norm */
			ADD("post_attention_norm.weight", GGUF_DTYPE_F32, nk, E, 1);
		if (is_nemo(s)) /* nemotron_h: a Mamba2 or attention block alone */
			continue;
		if (is_falcon_h1(s)) /* the converter's name, no suffix (arch.c) */
			ADD("ffn_norm", GGUF_DTYPE_F32, pk, E, 1);
		else if (!oai && !olmo2 && !seed && !glm4moe && !q35 &&
			 !is_cohere(s)) /* cohere: parallel */
			ADD("ffn_norm.weight", GGUF_DTYPE_F32, pk, E, 1);
		if (synth_moe_layer(s, l)) { /* glm4moe: the first n_dense_lead dense */
			/* the router f32, as llama.cpp's converter and quantizer keep it */
			ADD("ffn_gate_inp.weight", GGUF_DTYPE_F32, FILL_RANDOM, E, X);
			/* (gemma4's router reads a vector of norm about 1: model.h) */
			b->jobs[b->n_jobs - 1].std = ROUTER_SCALE / (g4 ? 1.0f : sqrtf((float)E));
			if (g4) { /* 26B-A4B: the dense FFN beside, the router's input scale, the
				   * norms, per-expert down scales 1 + N(0, G4_EXP_SCALE_STD^2) */
				ADD("ffn_gate.weight", t, FILL_RANDOM, E, F);
				ADD("ffn_up.weight", t, FILL_RANDOM, E, F);
				ADD("ffn_gate_inp.scale", GGUF_DTYPE_F32, FILL_NORM, E, 1);
				ADD("pre_ffw_norm_2.weight", GGUF_DTYPE_F32, FILL_NORM, E, 1);
				ADD("post_ffw_norm_1.weight", GGUF_DTYPE_F32, FILL_NORM, E, 1);
				ADD("post_ffw_norm_2.weight", GGUF_DTYPE_F32, FILL_NORM, E, 1);
				ADD("ffn_down_exps.scale", GGUF_DTYPE_F32, FILL_NORM, X, 1);
				b->jobs[b->n_jobs - 1].std = G4_EXP_SCALE_STD;
			}
			if (s->gate_up_exps) { /* qwen35moe's newer converters: gate|up fused */
				ADD3("ffn_gate_up_exps.weight", t, E, 2 * FX, X);
			} else {
				ADD3("ffn_gate_exps.weight", t, E, FX, X);
				if (oai)
					b->jobs[b->n_jobs - 1].std = EXPERT_SCALE / sqrtf((float)E);
				ADD3("ffn_up_exps.weight", t, E, FX, X);
				if (oai)
					b->jobs[b->n_jobs - 1].std = EXPERT_SCALE / sqrtf((float)E);
			}
			ADD3("ffn_down_exps.weight", t, FX, E, X);
			if (oai) { /* f32 biases: the router's, then each expert's as a row */
				ADD("ffn_gate_inp.bias", GGUF_DTYPE_F32, FILL_RANDOM, X, 1);
				ADD("ffn_gate_exps.bias", GGUF_DTYPE_F32, FILL_RANDOM, FX, X);
				ADD("ffn_up_exps.bias", GGUF_DTYPE_F32, FILL_RANDOM, FX, X);
				ADD("ffn_down_exps.bias", GGUF_DTYPE_F32, FILL_RANDOM, E, X);
			}
			if (is_minimax(s) || is_ernie_moe(s) || is_exaone_moe(s)) { /* the bias */
				ADD("exp_probs_b.bias", GGUF_DTYPE_F32, FILL_RANDOM, X, 1);
				b->jobs[b->n_jobs - 1].std = EXP_PROBS_B_STD;
			}
			if (s->n_ff_shexp) { /* granitehybrid: the shared expert, its own width */
				ADD("ffn_gate_shexp.weight", t, FILL_RANDOM, E, s->n_ff_shexp);
				ADD("ffn_up_shexp.weight", t, FILL_RANDOM, E, s->n_ff_shexp);
				ADD("ffn_down_shexp.weight", t, FILL_RANDOM, s->n_ff_shexp, E);
			}
			if (has_shexp_gate(s)) { /* qwen35moe, qwen2moe: its gate, f32 as the
						  * converter writes it; logits N(0, 4) */
				ADD("ffn_gate_inp_shexp.weight", GGUF_DTYPE_F32, FILL_RANDOM, E, 1);
				b->jobs[b->n_jobs - 1].std = SHEXP_GATE_SCALE / sqrtf((float)E);
			}
			/* the selection bias, the shared expert */
			if (glm4moe || ds2 || is_bailing(s) || is_dots1(s) || is_bailingmoe(s)) {
				/* DeepSeek-V2, Ling 1.0: no bias */
				if (!(ds2 && s->softmax_gating) && !is_bailingmoe(s)) {
					ADD("exp_probs_b.bias", GGUF_DTYPE_F32, FILL_RANDOM, X, 1);
					b->jobs[b->n_jobs - 1].std = EXP_PROBS_B_STD;
				}
				const uint64_t FS = FX * s->n_expert_shared;
				ADD("ffn_gate_shexp.weight", t, FILL_RANDOM, E, FS);
				ADD("ffn_up_shexp.weight", t, FILL_RANDOM, E, FS);
				ADD("ffn_down_shexp.weight", t, FILL_RANDOM, FS, E);
			}
		} else if (phi3 || glm4) { /* gate|up: Phi-3's and GLM-4's gate_up_proj */
			ADD("ffn_up.weight", t, FILL_RANDOM, E, 2 * F);
		} else {
			if (!nogate) /* apertus, arcee: no gate */
				ADD("ffn_gate.weight", t, FILL_RANDOM, E, F);
			ADD("ffn_up.weight", t, FILL_RANDOM, E, F);
		}
		if (!synth_moe_layer(s, l) || g4) /* gemma4: beside the experts too */
			ADD("ffn_down.weight", t, FILL_RANDOM, F, E);
		if (post)
			ADD("post_ffw_norm.weight", GGUF_DTYPE_F32, nk, E, 1);
		if (PL) {
			ADD("inp_gate.weight", t, FILL_RANDOM, E, PL);
			ADD("proj.weight", t, FILL_RANDOM, PL, E);
			ADD("post_norm.weight", GGUF_DTYPE_F32, FILL_NORM, E, 1);
		}
		if (g4 && s->out_scale)
			ADD("layer_output_scale.weight", GGUF_DTYPE_F32, FILL_NORM, 1, 1);
		if (l >= s->n_layer) { /* a NextN layer's own tensors (llama.cpp requires them) */
			ADD("nextn.eh_proj.weight", t, FILL_RANDOM, 2 * E, E);
			ADD("nextn.enorm.weight", GGUF_DTYPE_F32, nk, E, 1);
			ADD("nextn.hnorm.weight", GGUF_DTYPE_F32, nk, E, 1);
			ADD("nextn.shared_head_norm.weight", GGUF_DTYPE_F32, nk, E, 1);
			if (is_bailing(s)) /* required there too */
				ADD("layer_output_norm.weight", GGUF_DTYPE_F32, nk, E, 1);
		}
#undef ADD3
#undef ADD
	}
	return BG_OK;
}

enum bg_status synth_write(const struct synth_opts *o, const char *path, struct bg_err *err)
{
	struct synth_build b;
	enum bg_status st = build(o, &b, err);
	if (st)
		return st;
	st = gguf_writer_write(b.w, path, err);
	build_free(&b);
	return st;
}

enum bg_status synth_to_buffer(const struct synth_opts *o, void **buf, size_t *len,
			       struct bg_err *err)
{
	*buf = NULL;
	*len = 0;
	struct synth_build b;
	enum bg_status st = build(o, &b, err);
	if (st)
		return st;
	st = gguf_writer_to_buffer(b.w, buf, len, err);
	build_free(&b);
	return st;
}

enum bg_status synth_builtin(void **buf, size_t *len, struct bg_err *err)
{
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape("builtin"));
	o.seed = 20261122;
	o.name = "batchgen built-in (random weights)";
	return synth_to_buffer(&o, buf, len, err);
}
