/* model: hyper-parameters and weights of the supported architectures from a GGUF context.
 * See model.h; the per-architecture features come from arch.c's table. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/builtin.h"
#include "model/moe.h"
#include "model/synth.h"

/* Sizes beyond these are refused as corrupt before any 64-bit product is formed from
 * them; the largest real Llama models are well inside (405B: 126 layers, 16384 embd,
 * 53248 ffn, 128256 vocab). */
#define MODEL_MAX_LAYERS 4096u
#define MODEL_MAX_DIM	 (1u << 20)
#define MODEL_MAX_VOCAB	 (1u << 24)
/* Experts per layer: the largest released MoE models have 256 or 384 (DeepSeek-V3, Kimi
 * K2); with MODEL_MAX_DIM a stacked tensor's element count stays below 2^50. */
#define MODEL_MAX_EXPERTS MOE_MAX_EXPERTS

/* llama.cpp's f_attn_temp_offset for mistral3: llama-hparams.h's default, 0 (checked
 * against llama.cpp's graph: 1 puts the first step up at position 15, not 16, and fails
 * e2e_llamacpp_arch's mistral3-f32 by 7.8e-2) */
#define MISTRAL3_TEMP_OFFSET 0.0f

/* Copies a string from the file into dst for a message: printable ASCII only, so that the
 * message stays one line whatever the file holds. */
static const char *clean(char *dst, size_t cap, struct gguf_str s)
{
	size_t n = 0;
	for (uint64_t i = 0; i < s.len && n + 1 < cap; i++) {
		unsigned char c = (unsigned char)s.ptr[i];
		dst[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	dst[n] = '\0';
	return dst;
}

/* ---- hyper-parameters ---- */

static bool get_u32_key(const struct gguf_ctx *g, const char *arch, const char *suffix,
			uint32_t *out)
{
	char key[128];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	return g && gguf_get_u32(g, key, out); /* g NULL: a lazy model, defaults only */
}

static bool get_f32_key(const struct gguf_ctx *g, const char *arch, const char *suffix, float *out)
{
	char key[128];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	return g && gguf_get_f32(g, key, out);
}

/* A required positive u32 key in [1, max]. */
static enum bg_status need_u32(const struct gguf_ctx *g, const char *arch, const char *suffix,
			       uint32_t max, uint32_t *out, struct bg_err *err)
{
	char key[128];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	int64_t i = gguf_find_key(g, key);
	if (i < 0)
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is missing", key);
	if (!gguf_get_u32(g, key, out))
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is not an unsigned integer",
			       key);
	if (*out == 0 || *out > max)
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is %u (expected 1 to %u)", key,
			       *out, max);
	return BG_OK;
}

/* rope.scaling.*: the frequency scale and YaRN, as llama.cpp reads them for every
 * architecture: the type defaults to linear (a no-op without a factor); the factor is
 * rope.scaling.factor or the older rope.scale_linear; longrope (phi3) scales like linear
 * and takes its per-dimension factors from the rope_factors_* tensors. */
static enum bg_status read_rope_scaling(const struct gguf_ctx *g, const char *arch,
					const struct arch_info *ai, struct model_hparams *hp,
					struct bg_err *err)
{
	char key[128], buf[40];
	hp->rope_freq_scale = 1.0f;
	hp->rope_attn_factor = 1.0f;
	hp->n_ctx_orig = hp->n_ctx_train;
	struct gguf_str sc = {"linear", 6};
	snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
	gguf_get_str(g, key, &sc);
	bool none = sc.len == 4 && memcmp(sc.ptr, "none", 4) == 0;
	bool linear = (sc.len == 6 && memcmp(sc.ptr, "linear", 6) == 0) ||
		      (sc.len == 8 && memcmp(sc.ptr, "longrope", 8) == 0);
	hp->rope_yarn = sc.len == 4 && memcmp(sc.ptr, "yarn", 4) == 0;
	if (!none && !linear && !hp->rope_yarn)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s '%s' is not supported (none, linear, yarn, longrope are)", key,
			       clean(buf, sizeof buf, sc));
	float factor = 0.0f;
	if (!get_f32_key(g, arch, "rope.scaling.factor", &factor))
		get_f32_key(g, arch, "rope.scale_linear", &factor);
	if (!(isfinite(factor) && factor >= 0.0f && factor < 1e6f))
		return bg_fail(err, BG_ERR_FORMAT, "%s.rope.scaling.factor %g is not usable", arch,
			       (double)factor);
	if (factor != 0.0f && !none)
		hp->rope_freq_scale = 1.0f / factor;
	if (get_f32_key(g, arch, "rope.scaling.attn_factor", &hp->rope_attn_factor) &&
	    !(isfinite(hp->rope_attn_factor) && hp->rope_attn_factor > 0.0f &&
	      hp->rope_attn_factor < 100.0f))
		return bg_fail(err, BG_ERR_FORMAT, "%s.rope.scaling.attn_factor %g is not usable",
			       arch, (double)hp->rope_attn_factor);
	uint32_t oc;
	if (get_u32_key(g, arch, "rope.scaling.original_context_length", &oc) && oc > 0)
		hp->n_ctx_orig = oc;
	float lm = 0.0f;
	/* mistral3's graph sets its own attn_factor (arch.h), so the multiplier, which would
	 * change llama.cpp's, changes nothing there */
	if (!ai->mistral3 && !ai->mla &&
	    get_f32_key(g, arch, "rope.scaling.yarn_log_multiplier", &lm) && lm != 0.0f)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.rope.scaling.yarn_log_multiplier (DeepSeek-style YaRN) is not "
			       "supported",
			       arch);
	hp->rope_base_swa = hp->rope_base;
	hp->rope_freq_scale_swa = hp->rope_freq_scale;
	hp->rope_attn_factor_swa = hp->rope_attn_factor;
	return BG_OK;
}

/* attention.sliding_window_pattern as a per-layer bool list (llama.cpp's converter writes
 * one for OLMo 3; llama.cpp reads it as is_swa per layer): accepted when its first n_layer
 * entries (of n_list: step35's list covers its NextN layers too) are the list
 * model_layer_is_swa makes of some period p (every layer windowed: p = 0) and, when phase
 * is not NULL (step35), some phase; *p (and *phase) set. */
static enum bg_status read_swa_list(const struct gguf_ctx *g, const char *key, uint32_t n_layer,
				    uint32_t n_list, uint32_t *p, uint32_t *phase,
				    struct bg_err *err)
{
	enum gguf_type et;
	uint64_t n = 0;
	if (!gguf_get_arr(g, key, &et, &n) || et != GGUF_TYPE_BOOL || n != n_list)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s is neither an unsigned integer nor a list of %u bools", key,
			       n_list);
	bool *w = malloc(n_list * sizeof *w);
	if (!w)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	if (!gguf_arr_copy_bool(g, key, w, n)) {
		free(w);
		return bg_fail(err, BG_ERR_FORMAT, "%s has a value that is not a bool", key);
	}
	for (uint32_t q = 0; q <= n_layer; q++) /* the smallest period that makes the list */
		for (uint32_t f = 0; f < (phase && q ? q : 1); f++) {
			struct model_hparams t = {.n_swa = 1, .swa_pattern = q, .swa_phase = f};
			uint32_t l = 0;
			while (l < n_layer && model_layer_is_swa(&t, l) == w[l])
				l++;
			if (l == n_layer) {
				*p = q;
				if (phase)
					*phase = f;
				free(w);
				return BG_OK;
			}
		}
	free(w);
	return bg_fail(err, BG_ERR_UNSUPPORTED,
		       "%s is a per-layer list that does not repeat one pattern (windowed layers "
		       "then one global), which is not supported",
		       key);
}

/* The length read_swa_list expects of the list at key: one bool per layer, NextN layers
 * included (step35's, OLMo 3's), or, for exaone4, n_layer when the list has that many (its
 * converter writes num_hidden_layers entries, without EXAONE 4.5's NextN layers; llama.cpp
 * copies any list that fits). */
static uint32_t swa_list_len(const struct gguf_ctx *g, const char *key, const struct arch_info *ai,
			     const struct model_hparams *hp)
{
	enum gguf_type et;
	uint64_t n = 0;
	if (ai->exaone4 && gguf_get_arr(g, key, &et, &n) && n == hp->n_layer)
		return hp->n_layer;
	return hp->n_layer + hp->n_layer_nextn;
}

/* mistral3's values that follow from the RoPE scaling and attn_temp_scale (both read):
 * the graph's own attn_factor, in fp32 as llama.cpp computes it, and the temperature's
 * floor (llama.cpp: n_ctx_orig_yarn) and offset when there is a temperature. The one place
 * for files and lazy synthetic models alike. */
static void mistral3_derive(struct model_hparams *hp)
{
	hp->rope_attn_factor = hp->rope_attn_factor_swa =
	    1.0f / (1.0f + 0.1f * logf(1.0f / hp->rope_freq_scale));
	if (hp->attn_temp_scale != 0.0f) {
		hp->attn_temp_floor = hp->n_ctx_orig;
		hp->attn_temp_offset = MISTRAL3_TEMP_OFFSET;
	}
}

/* The architecture's graph features (arch.h) and the keys that tune them. */
static enum bg_status read_features(const struct gguf_ctx *g, const char *arch,
				    const struct arch_info *ai, struct model_hparams *hp,
				    struct bg_err *err)
{
	hp->rope_neox = ai->rope_neox;
	hp->qkv_bias = ai->qkv_bias;
	hp->qk_norm = ai->qk_norm;
	hp->qk_norm_full = ai->qk_norm_full;
	hp->no_pre_norms = ai->no_pre_norms;
	hp->post_norms = ai->post_norms;
	hp->gelu = ai->gelu;
	hp->embd_scale = ai->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
	/* gemma 27B sizes scale queries by n_embd / n_head (llama.cpp: type 27B) */
	if (ai->gemma_q_scale && ((strcmp(arch, "gemma2") == 0 && hp->n_layer == 46) ||
				  (strcmp(arch, "gemma3") == 0 && hp->n_layer == 62)))
		hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
	/* olmoe: llama.cpp loads attn_q_norm and attn_k_norm both n_embd wide (arch.c) */
	if (strcmp(arch, "olmoe") == 0 &&
	    (hp->n_head_kv != hp->n_head || (uint64_t)hp->n_head * hp->head_dim != hp->n_embd))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "olmoe with %u K/V heads for %u query heads of %u (n_embd %u): "
			       "llama.cpp's olmoe takes n_head_kv = n_head and n_head x head_dim "
			       "= n_embd only",
			       hp->n_head_kv, hp->n_head, hp->head_dim, hp->n_embd);
	hp->attn_sinks = hp->attn_out_bias = hp->moe_bias = hp->swiglu_oai = ai->oai;
	if (ai->oai) { /* llama.cpp's build_moe_ffn fixes them for LLM_FFN_SWIGLU_OAI_MOE */
		hp->swiglu_alpha = 1.702f;
		hp->swiglu_limit = 7.0f;
	}
	if ((ai->opt_bias || ai->opt_qkv_bias) && g) /* blk.0 decides; load_tensors then needs
						       * them everywhere */
		hp->qkv_bias = gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
	if (ai->opt_bias && g)
		hp->attn_out_bias = gguf_find_tensor(g, "blk.0.attn_output.bias") != NULL;
	/* hunyuan: weighted; llama4: unweighted, unless 128 experts (Maverick) */
	hp->qk_norm_after_rope = ai->qk_norm_after_rope || (ai->llama4 && hp->n_expert != 128);
	float alpha = 0.0f; /* hunyuan-dense: NTK-aware alpha (llama.cpp's hunyuan-vl loader) */
	if (ai->qk_norm_after_rope && !ai->moe_ok &&
	    get_f32_key(g, arch, "rope.scaling.alpha", &alpha) && alpha > 0.0f) {
		const float d = (float)hp->head_dim;
		hp->rope_base_swa = hp->rope_base *= powf(alpha, d / (d - 2.0f));
		if (!(isfinite(hp->rope_base) && hp->rope_base > 1.0f))
			return bg_fail(err, BG_ERR_FORMAT,
				       "rope.scaling.alpha %g gives the RoPE base %g",
				       (double)alpha, (double)hp->rope_base);
	}
	if ((ai->glm4moe || ai->step35) && g) /* optional there (GLM-4.5 355B has them) */
		hp->qk_norm = gguf_find_tensor(g, "blk.0.attn_q_norm.weight") != NULL;
	hp->xielu = ai->xielu;
	hp->relu2 = hp->rope_none = ai->nemotron_h; /* arch.h */
	hp->relu2 |= ai->relu2_ffn;		    /* arcee: llama's layer, ReLU^2 FFN */
	hp->residual_scale = hp->logit_scale = 1.0f;
	if (ai->granite) { /* llama.cpp: logit_scale required, the others optional, 0 = off */
		char key[128];
		snprintf(key, sizeof key, "%s.logit_scale", arch);
		/* granitehybrid: optional there (absent = no scale) */
		if (g && !gguf_get_f32(g, key, &hp->logit_scale) &&
		    (!ai->mamba2 || gguf_find_key(g, key) >= 0))
			return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is missing", key);
		float es = 0.0f, as = 0.0f, rs = 0.0f;
		get_f32_key(g, arch, "embedding_scale", &es);
		get_f32_key(g, arch, "attention.scale", &as);
		get_f32_key(g, arch, "residual_scale", &rs);
		if (!(isfinite(hp->logit_scale) && hp->logit_scale != 0.0f) || !isfinite(es) ||
		    !isfinite(as) || !isfinite(rs))
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s's logit, embedding, attention or residual scale is not a "
				       "usable number (logit_scale %g)",
				       arch, (double)hp->logit_scale);
		hp->logit_scale = 1.0f / hp->logit_scale; /* llama.cpp: ggml_scale(1 / it) */
		if (es != 0.0f)
			hp->embd_scale = es;
		if (as != 0.0f)
			hp->attn_scale = as;
		if (rs != 0.0f)
			hp->residual_scale = rs;
		/* llama.cpp: rope.scaling.finetuned (default true) switches RoPE on */
		bool ft = true;
		snprintf(key, sizeof key, "%s.rope.scaling.finetuned", arch);
		if (g && gguf_get_bool(g, key, &ft) && !ft && !ai->mamba2)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "%s false (granite without RoPE) is not supported", key);
		hp->rope_none = !ft; /* granitehybrid: no layer rotates */
	}
	if (ai->cohere) { /* arch.h; llama.cpp: logit_scale 0 = none, required for cohere2 */
		hp->layer_norm = hp->parallel = true;
		hp->qk_norm = hp->qk_norm_heads = !ai->swa_rope_only && hp->n_layer >= 64;
		float ls = 0.0f;
		char key[128];
		snprintf(key, sizeof key, "%s.logit_scale", arch);
		if (g && !gguf_get_f32(g, key, &ls) &&
		    (strcmp(arch, "cohere2") == 0 || gguf_find_key(g, key) >= 0))
			return bg_fail(err, BG_ERR_FORMAT,
				       "metadata key %s is missing or not a number", key);
		if (!isfinite(ls))
			return bg_fail(err, BG_ERR_FORMAT, "%s is not a number", key);
		if (ls != 0.0f)
			hp->logit_scale = ls;
	}
	if (ai->mistral3) {
		float bf = 32.0f, bs = 1.0f;
		get_f32_key(g, arch, "rope.scaling.yarn_beta_fast", &bf);
		get_f32_key(g, arch, "rope.scaling.yarn_beta_slow", &bs);
		if (bf != 32.0f || bs != 1.0f)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "%s YaRN betas %g / %g are not supported (32 / 1 are)", arch,
				       (double)bf, (double)bs);
		get_f32_key(g, arch, "attention.temperature_scale", &hp->attn_temp_scale);
		if (!isfinite(hp->attn_temp_scale))
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.attention.temperature_scale is not a number", arch);
		mistral3_derive(hp);
	}
	hp->attn_softcap = ai->attn_softcap;
	if (ai->attn_softcap > 0.0f)
		get_f32_key(g, arch, "attn_logit_softcapping", &hp->attn_softcap);
	hp->final_softcap = ai->final_softcap_default;
	if (ai->final_softcap)
		get_f32_key(g, arch, "final_logit_softcapping", &hp->final_softcap);
	if (!(isfinite(hp->attn_softcap) && hp->attn_softcap >= 0.0f) ||
	    !(isfinite(hp->final_softcap) && hp->final_softcap >= 0.0f))
		return bg_fail(err, BG_ERR_FORMAT, "a soft-capping value is not a number >= 0");
	uint32_t w = 0;
	bool has_w = get_u32_key(g, arch, "attention.sliding_window", &w);
	hp->n_swa_file = has_w ? w : 0;
	if (ai->swa_rope_only && !ai->exaone4 && g && w == 0) /* cohere2: llama.cpp requires
							       * the key */
		return bg_fail(err, BG_ERR_FORMAT,
			       "metadata key %s.attention.sliding_window is missing or 0", arch);
	/* exaone4: windows in a 64-layer file only (arch.h); there a window of 0 would mask
	 * every key, the layer's own too (llama.cpp's is_masked_swa) */
	const bool exa_swa = ai->exaone4 && hp->n_layer == 64;
	if (exa_swa && has_w && w == 0)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s.attention.sliding_window is 0 in a 64-layer exaone4 file (its "
			       "windowed layers would see no token)",
			       arch);
	if (ai->llama4) { /* chunked layers, the chunk 8192 whatever the key (arch.c) */
		if (has_w && w == 0)
			return bg_fail(
			    err, BG_ERR_UNSUPPORTED,
			    "%s.attention.sliding_window is 0 (every layer global, no "
			    "attention temperature): llama.cpp cannot run such a file and "
			    "batchgen does not support it",
			    arch);
		has_w = false; /* swa_default */
		hp->swa_chunked = hp->attn_temp_nope = true;
		hp->attn_temp_scale = 0.1f;
		hp->attn_temp_offset = 1.0f;
		hp->attn_temp_floor = 8192;
	}
	if (ai->swa_pattern && !ai->swa_read_only && !(ai->swa_needs_key && w == 0) &&
	    (!ai->exaone4 || exa_swa)) {
		hp->n_swa = has_w ? w : ai->swa_default;
		hp->swa_pattern = ai->swa_pattern;
		char key[128];
		snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
		enum bg_status st;
		if (g && ai->step35 && gguf_find_key(g, key) < 0) /* llama.cpp: get_arr */
			return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is missing", key);
		if (g && gguf_find_key(g, key) >= 0 &&
		    (ai->step35 ||
		     !get_u32_key(g, arch, "attention.sliding_window_pattern", &hp->swa_pattern)) &&
		    (st = read_swa_list(g, key, hp->n_layer, swa_list_len(g, key, ai, hp),
					&hp->swa_pattern, ai->step35 ? &hp->swa_phase : NULL, err)))
			return st;
		if (ai->swa_rope_own) {
			hp->rope_base_swa = 10000.0f;
			hp->rope_freq_scale_swa = 1.0f;
		}
		if (ai->swa_rope_plain) { /* olmo2's graph: freq_base, no scaling, no YaRN */
			hp->rope_freq_scale_swa = 1.0f;
			hp->rope_attn_factor_swa = 1.0f;
		} else if (!ai->swa_rope_only) { /* cohere2: the global values (arch.c) */
			get_f32_key(g, arch, "rope.freq_base_swa", &hp->rope_base_swa);
		}
		if (!(isfinite(hp->rope_base_swa) && hp->rope_base_swa > 1.0f))
			return bg_fail(err, BG_ERR_FORMAT, "rope.freq_base_swa is not a number above 1");
	}
	/* other architectures: llama.cpp does not read the key (Mistral 7B v0.1 files carry
	 * one and run with full attention there); n_swa_file records it */
	return BG_OK;
}

uint64_t model_expert_stride(const struct model_weight *w)
{
	return w->nb2 ? w->nb2 : w->ne1 * gguf_row_bytes(w->type, w->ne0);
}

struct model_weight model_expert(const struct model_weight *w, uint32_t e)
{
	struct model_weight v = *w;
	if (w->data)
		v.data = (const char *)w->data + (uint64_t)e * model_expert_stride(w);
	v.ne2 = 0;
	v.nb2 = 0;
	return v;
}

uint64_t model_weight_span(const struct model_weight *w)
{
	if (!w->data || !w->ne0)
		return 0;
	const uint64_t own = w->ne1 * gguf_row_bytes(w->type, w->ne0);
	return w->ne2 ? (w->ne2 - 1) * model_expert_stride(w) + own : own;
}

static enum bg_status refuse_list(const struct gguf_ctx *g, const char *arch, const char *suffix,
				  const char *what, struct bg_err *err);

/* leading_dense_block_count (absent: 0, at most the layer count) */
static enum bg_status read_dense_lead(const struct gguf_ctx *g, const char *arch,
				      struct model_hparams *hp, struct bg_err *err)
{
	get_u32_key(g, arch, "leading_dense_block_count", &hp->n_layer_dense_lead);
	if (hp->n_layer_dense_lead > hp->n_layer)
		return bg_fail(err, BG_ERR_FORMAT,
			       "leading_dense_block_count %u exceeds the %u layers",
			       hp->n_layer_dense_lead, hp->n_layer);
	return BG_OK;
}

/* The shared experts and leading dense layers of glm4moe and deepseek2: expert_shared_count
 * (required, <= 64; their width n_ff_exp times it), read_dense_lead; per-layer expert
 * widths refused. */
static enum bg_status read_shared_experts(const struct gguf_ctx *g, const char *arch,
					  struct model_hparams *hp, struct bg_err *err)
{
	enum bg_status st;
	if ((st = refuse_list(g, arch, "expert_feed_forward_length", "expert widths per layer",
			      err)) ||
	    (st = need_u32(g, arch, "expert_shared_count", 64, &hp->n_expert_shared, err)))
		return st;
	if ((uint64_t)hp->n_ff_exp * hp->n_expert_shared > MODEL_MAX_DIM)
		return bg_fail(err, BG_ERR_FORMAT, "the shared experts' width %llu is too large",
			       (unsigned long long)hp->n_ff_exp * hp->n_expert_shared);
	return read_dense_lead(g, arch, hp, err);
}

/* expert_weights_scale (a finite number; absent, 0 or 1: none) and expert_weights_norm (a
 * bool, absent: false, llama.cpp's default for glm4moe and deepseek2) */
static enum bg_status read_weights_scale_norm(const struct gguf_ctx *g, const char *arch,
					      struct model_hparams *hp, struct bg_err *err)
{
	float f = 0.0f;
	if (get_f32_key(g, arch, "expert_weights_scale", &f)) {
		if (!isfinite(f))
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.expert_weights_scale is not a number", arch);
		if (f != 0.0f) /* llama.cpp: 0 and 1 leave the weights as they are */
			hp->expert_weights_scale = f;
	}
	char key[128];
	snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
	bool norm = false;
	if (g && gguf_find_key(g, key) >= 0 && !gguf_get_bool(g, key, &norm))
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is not a bool", key);
	hp->expert_weights_norm = norm;
	return BG_OK;
}

/* glm4moe's expert keys beyond expert_count / expert_used_count / the experts' width, as
 * llama.cpp's glm4moe loader reads them (arch.c). expert_shared_count is required and at
 * least 1 here (every released GLM MoE has one; the selection bias and shared expert
 * tensors go together in model_layer), 0 refused. */
static enum bg_status read_glm4moe_experts(const struct gguf_ctx *g, const char *arch,
					   struct model_hparams *hp, struct bg_err *err)
{
	enum bg_status st = read_shared_experts(g, arch, hp, err);
	if (st)
		return st;
	uint32_t gf = 0; /* llama.cpp: NONE (0) means sigmoid for glm4moe */
	get_u32_key(g, arch, "expert_gating_func", &gf);
	if (gf != 0 && gf != 2) /* softmax with the selection bias: no released model */
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_gating_func is %u: only sigmoid gating (2, or 0 / absent) "
			       "is supported for glm4moe",
			       arch, gf);
	hp->expert_gating_sigmoid = hp->moe_sel_bias = true;
	return read_weights_scale_norm(g, arch, hp, err);
}

/* minimax-m2's expert keys (arch.h's moe_sigmoid_sel): no shared experts, expert_gating_func
 * required and sigmoid; the weights normalized and never scaled (llama.cpp's graph passes
 * norm_w true and reads no expert_weights_scale for it); expert_feed_forward_length equal to
 * feed_forward_length (llama.cpp requires the key but shapes the experts by the latter; the
 * converter writes intermediate_size to both). lfm2moe (moe_dense_lead): the same routing;
 * leading_dense_block_count optional (0), the experts as wide as expert_feed_forward_length
 * says (read_experts refuses a per-layer list there). */
static enum bg_status read_minimax_experts(const struct gguf_ctx *g, const char *arch,
					   const struct arch_info *ai, struct model_hparams *hp,
					   struct bg_err *err)
{
	if (ai->moe_dense_lead) { /* lfm2moe: leading dense layers, the experts' own width */
		get_u32_key(g, arch, "leading_dense_block_count", &hp->n_layer_dense_lead);
		if (hp->n_layer_dense_lead > hp->n_layer)
			return bg_fail(err, BG_ERR_FORMAT,
				       "leading_dense_block_count %u exceeds the %u layers",
				       hp->n_layer_dense_lead, hp->n_layer);
	} else if (hp->n_ff_exp != hp->n_ff) {
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s.expert_feed_forward_length %u differs from feed_forward_length "
			       "%u (llama.cpp's experts are feed_forward_length wide)",
			       arch, hp->n_ff_exp, hp->n_ff);
	}
	uint32_t u = 0;
	if (get_u32_key(g, arch, "expert_shared_count", &u) && u > 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_shared_count is %u: %s has no shared experts", arch, u,
			       arch);
	if (!get_u32_key(g, arch, "expert_gating_func", &u))
		return bg_fail(err, BG_ERR_FORMAT,
			       "metadata key %s.expert_gating_func is missing (llama.cpp has no "
			       "default for %s)",
			       arch, arch);
	if (u != 2)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_gating_func is %u: only sigmoid gating (2) is supported "
			       "for %s",
			       arch, u, arch);
	hp->expert_gating_sigmoid = hp->moe_sel_bias = hp->expert_weights_norm = true;
	return BG_OK;
}

/* qwen35moe, qwen2moe (arch.h's shexp_gate): softmax routing (expert_gating_func, when
 * present, must say so), the weights renormalized unless moe_raw_weights (qwen2moe), no
 * scale (llama.cpp reads no expert_weights_scale for them), and one gated shared expert
 * of expert_shared_feed_forward_length, else feed_forward_length (llama.cpp's default),
 * which must then be present. */
static enum bg_status read_qwen_moe_experts(const struct gguf_ctx *g, const char *arch,
					    const struct arch_info *ai, struct model_hparams *hp,
					    struct bg_err *err)
{
	uint32_t u = 0;
	if (get_u32_key(g, arch, "expert_gating_func", &u) && u != 1)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_gating_func is %u: %s routes with a softmax (1)", arch, u,
			       arch);
	if (get_u32_key(g, arch, "expert_shared_count", &u) && u > 1)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_shared_count is %u: %s has one shared expert", arch, u,
			       arch);
	u = 0;
	if (!get_u32_key(g, arch, "expert_shared_feed_forward_length", &u))
		u = hp->n_ff;
	if (u == 0 || u > MODEL_MAX_DIM)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s.expert_shared_feed_forward_length (or, without it, "
			       "feed_forward_length) is missing or not in [1, %u]",
			       arch, MODEL_MAX_DIM);
	hp->n_ff_shexp = u;
	if (hp->n_ff == 0) /* no feed_forward_length (unused by these graphs): the backends
			    * size by n_ff, so the shared expert's width stands for it */
		hp->n_ff = u;
	hp->n_expert_shared = 1;
	hp->shexp_gate = true;
	hp->expert_weights_norm = !ai->moe_raw_weights;
	return BG_OK;
}

/* nemotron_h_moe's expert keys beyond expert_count / expert_used_count /
 * expert_feed_forward_length (arch.c): the shared expert's width
 * expert_shared_feed_forward_length (required, its tensors are), sigmoid routing with the
 * selection bias (llama.cpp fixes it: expert_gating_func is not read), expert_weights_norm
 * and expert_weights_scale; moe_latent_size and expert groups refused. */
static enum bg_status read_nemotron_h_experts(const struct gguf_ctx *g, const char *arch,
					      struct model_hparams *hp, struct bg_err *err)
{
	uint32_t u = 0;
	if (get_u32_key(g, arch, "moe_latent_size", &u) && u > 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.moe_latent_size is %u: latent expert projections (Nemotron 3 "
			       "Super) are not supported",
			       arch, u);
	if (get_u32_key(g, arch, "expert_group_count", &u) && u > 1)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_group_count is %u: grouped routing is not supported for "
			       "%s",
			       arch, u, arch);
	if (!get_u32_key(g, arch, "expert_shared_feed_forward_length", &hp->n_ff_shexp) ||
	    hp->n_ff_shexp == 0 || hp->n_ff_shexp > MODEL_MAX_DIM)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s.expert_shared_feed_forward_length is missing or not in 1 to %u",
			       arch, MODEL_MAX_DIM);
	hp->n_expert_shared = 1; /* one shared expert of its own width (model_ff_shexp) */
	hp->expert_gating_sigmoid = hp->moe_sel_bias = true;
	return read_weights_scale_norm(g, arch, hp, err);
}

/* step35's expert keys beyond expert_count / expert_used_count / expert_feed_forward_length
 * (arch.c): the shared expert's width expert_shared_feed_forward_length (required: every
 * MoE layer has one), sigmoid routing (expert_gating_func absent, 0 or 2; llama.cpp reads
 * NONE as sigmoid; softmax with the selection bias is refused), the selection bias where a
 * layer has one, expert_weights_norm and expert_weights_scale. */
static enum bg_status read_step35_experts(const struct gguf_ctx *g, const char *arch,
					  struct model_hparams *hp, struct bg_err *err)
{
	uint32_t u = 0;
	if (get_u32_key(g, arch, "expert_gating_func", &u) && u != 0 && u != 2)
		return bg_fail(
		    err, BG_ERR_UNSUPPORTED,
		    "%s.expert_gating_func is %u: only sigmoid gating (2, or 0 / absent) "
		    "is supported for step35",
		    arch, u);
	if (!get_u32_key(g, arch, "expert_shared_feed_forward_length", &hp->n_ff_shexp) ||
	    hp->n_ff_shexp == 0 || hp->n_ff_shexp > MODEL_MAX_DIM)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s.expert_shared_feed_forward_length is missing or not in 1 to %u",
			       arch, MODEL_MAX_DIM);
	hp->n_expert_shared = 1;
	hp->expert_gating_sigmoid = hp->moe_sel_bias = true;
	return read_weights_scale_norm(g, arch, hp, err);
}

/* llama4 (arch.c): interleave_moe_layer_step (required, 1 to the layer count), one ungated
 * shared expert as wide as the routed ones, sigmoid weights on the expert's input, no
 * norm or scale (llama.cpp's llama4 graph reads neither key) */
static enum bg_status read_llama4_experts(const struct gguf_ctx *g, const char *arch,
					  struct model_hparams *hp, struct bg_err *err)
{
	enum bg_status st;
	if ((st = need_u32(g, arch, "interleave_moe_layer_step", hp->n_layer, &hp->n_moe_step, err)))
		return st;
	hp->n_expert_shared = 1;
	hp->moe_weight_in = true;
	return BG_OK;
}

/* ernie4_5-moe's expert keys beyond expert_count / expert_used_count /
 * expert_feed_forward_length (arch.c): interleave_moe_layer_step (required, 1 to n_layer),
 * leading_dense_block_count (optional, 0), the shared expert when
 * expert_shared_feed_forward_length > 0 (absent or 0: none), softmax routing with the
 * optional selection bias, normalized weights, no scale (moe_grouped without groups:
 * llama.cpp's graph fixes all three and reads no expert_gating_func,
 * expert_weights_norm or expert_weights_scale for it). */
static enum bg_status read_ernie_experts(const struct gguf_ctx *g, const char *arch,
					 struct model_hparams *hp, struct bg_err *err)
{
	enum bg_status st;
	if ((st = need_u32(g, arch, "interleave_moe_layer_step", hp->n_layer, &hp->n_moe_step,
			   err)))
		return st;
	get_u32_key(g, arch, "leading_dense_block_count", &hp->n_layer_dense_lead);
	if (hp->n_layer_dense_lead > hp->n_layer)
		return bg_fail(err, BG_ERR_FORMAT,
			       "leading_dense_block_count %u exceeds the %u layers",
			       hp->n_layer_dense_lead, hp->n_layer);
	uint32_t u = 0;
	if (get_u32_key(g, arch, "expert_shared_feed_forward_length", &u) && u > 0) {
		if (u > MODEL_MAX_DIM)
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.expert_shared_feed_forward_length %u is over %u", arch,
				       u, MODEL_MAX_DIM);
		hp->n_ff_shexp = u;
		hp->n_expert_shared = 1;
	}
	hp->moe_grouped = hp->moe_sel_bias = hp->expert_weights_norm = true;
	return BG_OK;
}

/* hunyuan-moe's expert keys (arch.c): expert_feed_forward_length required (llama.cpp's
 * loader reads it; the experts are feed_forward_length wide all the same), one shared
 * expert of expert_shared_feed_forward_length (absent or 0: feed_forward_length), softmax
 * routing, renormalized weights, no scale or selection bias (none read for it). */
static enum bg_status read_hunyuan_experts(const struct gguf_ctx *g, const char *arch,
					   struct model_hparams *hp, struct bg_err *err)
{
	uint32_t u = 0;
	enum bg_status st;
	if ((st = need_u32(g, arch, "expert_feed_forward_length", MODEL_MAX_DIM, &u, err)))
		return st;
	u = 0;
	if (!get_u32_key(g, arch, "expert_shared_feed_forward_length", &u) || u == 0)
		u = hp->n_ff;
	if (u == 0 || u > MODEL_MAX_DIM)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s.expert_shared_feed_forward_length (or feed_forward_length) is "
			       "not in [1, %u]",
			       arch, MODEL_MAX_DIM);
	hp->n_ff_shexp = u;
	hp->n_expert_shared = 1;
	hp->expert_weights_norm = true;
	return BG_OK;
}

/* expert_group_count / expert_group_used_count (both optional, read for every MoE file by
 * llama.cpp's load_hparams; groups of n_expert / groups >= 2 experts) and moe_grouped:
 * deepseek2's and bailingmoe2's routing (model.h) */
static enum bg_status read_expert_groups(const struct gguf_ctx *g, const char *arch,
					 struct model_hparams *hp, struct bg_err *err)
{
	get_u32_key(g, arch, "expert_group_count", &hp->n_expert_groups);
	get_u32_key(g, arch, "expert_group_used_count", &hp->n_group_used);
	if (hp->n_expert_groups > 1) {
		uint32_t G = hp->n_expert / hp->n_expert_groups;
		if (hp->n_expert % hp->n_expert_groups || G < 2 || hp->n_group_used == 0 ||
		    hp->n_group_used >= hp->n_expert_groups ||
		    hp->n_expert_used > hp->n_group_used * G)
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.expert_group_count %u / expert_group_used_count %u do "
				       "not fit %u experts (%u used)",
				       arch, hp->n_expert_groups, hp->n_group_used, hp->n_expert,
				       hp->n_expert_used);
	}
	hp->moe_grouped = true;
	return BG_OK;
}

/* bailingmoe2's, dots1's and exaone-moe's expert keys (arch.h), as llama.cpp's loaders
 * read them (arch.c): expert_shared_count required (the shared expert (bailingmoe2: the
 * shared width, else the experts') x that count wide), leading_dense_block_count optional,
 * expert_gating_func required (softmax 1 or sigmoid 2; llama.cpp aborts on an absent key's
 * NONE), the optional selection bias, scale and norm, deepseek2's groups. bailingmoe2's
 * fused attn_qkv is n_embd + 2 K/V rows wide in llama.cpp: query heads spanning anything
 * but n_embd are refused; dots1's K and V are as wide as Q there: fewer K/V heads refused.
 * exaone-moe: expert_shared_count not required, one shared expert of
 * expert_shared_feed_forward_length, else the experts' width. */
static enum bg_status read_bailing_experts(const struct gguf_ctx *g, const char *arch,
					   const struct arch_info *ai, struct model_hparams *hp,
					   struct bg_err *err)
{
	if (ai->bailing && (uint64_t)hp->n_head * hp->head_dim != hp->n_embd)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s with %u heads of %u (n_embd %u): llama.cpp's bailingmoe2 "
			       "takes n_head x head_dim = n_embd only",
			       arch, hp->n_head, hp->head_dim, hp->n_embd);
	if (ai->dots1 && hp->n_head_kv != hp->n_head)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s with %u K/V heads for %u query heads: llama.cpp's dots1 takes "
			       "as many K/V heads as query heads only",
			       arch, hp->n_head_kv, hp->n_head);
	enum bg_status st;
	uint32_t u = 0;
	if (ai->exaone_moe) { /* one shared expert, its own width or the experts' (arch.h) */
		if ((st = refuse_list(g, arch, "expert_feed_forward_length",
				      "expert widths per layer", err)) ||
		    (st = read_dense_lead(g, arch, hp, err)))
			return st;
		get_u32_key(g, arch, "expert_shared_feed_forward_length", &u);
		if (u > MODEL_MAX_DIM)
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.expert_shared_feed_forward_length %u is over %u", arch, u,
				       MODEL_MAX_DIM);
		hp->n_expert_shared = 1;
		hp->n_ff_shexp = u; /* 0: the experts' width (model_ff_shexp) */
	} else if ((st = read_shared_experts(g, arch, hp, err))) {
		return st;
	}
	if (ai->bailing && get_u32_key(g, arch, "expert_shared_feed_forward_length", &u) && u > 0) {
		if ((uint64_t)u * hp->n_expert_shared > MODEL_MAX_DIM)
			return bg_fail(err, BG_ERR_FORMAT,
				       "the shared experts' width %llu is too large",
				       (unsigned long long)u * hp->n_expert_shared);
		hp->n_ff_shexp = u * hp->n_expert_shared; /* llama.cpp multiplies it too */
	}
	if (!get_u32_key(g, arch, "expert_gating_func", &u))
		return bg_fail(err, BG_ERR_FORMAT,
			       "metadata key %s.expert_gating_func is missing (llama.cpp has no "
			       "default for %s)",
			       arch, arch);
	if (u != 1 && u != 2)
		return bg_fail(
		    err, BG_ERR_UNSUPPORTED,
		    "%s.expert_gating_func is %u: softmax (1) and sigmoid (2) gating are "
		    "supported for %s",
		    arch, u, arch);
	hp->expert_gating_sigmoid = u == 2;
	hp->moe_sel_bias = true; /* optional per layer, as deepseek2's */
	if ((st = read_weights_scale_norm(g, arch, hp, err)))
		return st;
	return read_expert_groups(g, arch, hp, err);
}

/* bailingmoe's expert keys (arch.h): expert_shared_count required (shared experts of
 * n_ff_exp x that count), per-layer expert widths refused, leading_dense_block_count not
 * read (llama.cpp puts experts in every layer whatever it says), softmax routing whatever
 * expert_gating_func says (the graph fixes it), expert_weights_norm / _scale optional, the
 * generic groups; no selection bias (llama.cpp loads none: an exp_probs_b is an unknown
 * tensor). Q/K/V are shaped by rope.dimension_count there: a file whose rotated dimensions
 * are not its head size is refused. */
static enum bg_status read_bailingmoe_experts(const struct gguf_ctx *g, const char *arch,
					      struct model_hparams *hp, struct bg_err *err)
{
	if (hp->rope_dim != hp->head_dim)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s with rope.dimension_count %u and a head size of %u: llama.cpp's "
			       "bailingmoe shapes Q/K/V by rope.dimension_count, which must be the "
			       "head size",
			       arch, hp->rope_dim, hp->head_dim);
	enum bg_status st = read_shared_experts(g, arch, hp, err);
	if (st)
		return st;
	hp->n_layer_dense_lead = 0; /* read by llama.cpp, unused (arch.h) */
	hp->moe_grouped = true;	    /* softmax, no selection bias */
	if ((st = read_weights_scale_norm(g, arch, hp, err)))
		return st;
	return read_expert_groups(g, arch, hp, err);
}

/* The mixture-of-experts keys (model.h): expert_count (absent or 0: dense), expert_used_count
 * in [1, expert_count], the experts' width. Variants whose routing differs from model.h's
 * (shared experts, sigmoid gating, scaled weights: DeepSeek, ...) are refused, except
 * glm4moe's (read_glm4moe_experts) and the others read_* below names. */
static enum bg_status read_experts(const struct gguf_ctx *g, const char *arch,
				   const struct arch_info *ai, struct model_hparams *hp,
				   struct bg_err *err)
{
	char key[128];
	snprintf(key, sizeof key, "%s.expert_count", arch);
	uint32_t n = 0;
	if (gguf_find_key(g, key) >= 0 && !gguf_get_u32(g, key, &n))
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is not an unsigned integer", key);
	if (n == 1 && ai->qk_norm_after_rope && !ai->moe_ok) /* hunyuan-dense: dense */
		n = 0;
	if (n == 0) {
		if (ai->moe_only)
			return bg_fail(err, BG_ERR_FORMAT,
				       "metadata key %s is missing or 0: a %s model has experts", key,
				       arch);
		return BG_OK;
	}
	if (!ai->moe_ok)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s is %u: mixture-of-experts %s models are not supported (MoE: "
			       "qwen3moe, gpt-oss, granitemoe, and llama files such as Mixtral)",
			       key, n, arch);
	if (n > MODEL_MAX_EXPERTS)
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is %u (expected 1 to %u)", key, n,
			       MODEL_MAX_EXPERTS);
	enum bg_status st;
	hp->n_expert = n;
	if (ai->nemotron_h && /* Nemotron 3 Puzzle's per-layer widths and counts */
	    ((st = refuse_list(g, arch, "expert_feed_forward_length", "expert widths per layer",
			       err)) ||
	     (st = refuse_list(g, arch, "expert_used_count", "experts used per layer", err))))
		return st;
	if (ai->gemma4 && /* 26B-A4B: one width for every MoE layer */
	    (st = refuse_list(g, arch, "expert_feed_forward_length", "expert widths per layer",
			      err)))
		return st;
	if ((st = need_u32(g, arch, "expert_used_count", n, &hp->n_expert_used, err)))
		return st;
	if (ai->moe_ff_key) {
		if ((st = need_u32(g, arch, "expert_feed_forward_length", MODEL_MAX_DIM,
				   &hp->n_ff_exp, err)))
			return st;
	} else {
		hp->n_ff_exp = hp->n_ff;
	}
	hp->expert_weights_scale = 1.0f;
	if (ai->mla) /* deepseek2: read_deepseek2, once the vocabulary size is known */
		return BG_OK;
	if (ai->glm4moe) /* its shared experts, dense layers, gating and scale (model.h) */
		return read_glm4moe_experts(g, arch, hp, err);
	if (ai->moe_sigmoid_sel)
		return read_minimax_experts(g, arch, ai, hp, err);
	if (ai->nemotron_h)
		return read_nemotron_h_experts(g, arch, hp, err);
	if (ai->step35)
		return read_step35_experts(g, arch, hp, err);
	if (ai->llama4)
		return read_llama4_experts(g, arch, hp, err);
	if (ai->gemma4) { /* its graph fixes softmax, renormalized weights, no scale (model.h),
			   * whatever expert_gating_func / expert_weights_* say */
		hp->gemma4_moe = hp->expert_weights_norm = true;
		return BG_OK;
	}
	if (ai->ernie_moe)
		return read_ernie_experts(g, arch, hp, err);
	if (ai->hunyuan_moe)
		return read_hunyuan_experts(g, arch, hp, err);
	if (ai->bailing || ai->dots1 || ai->exaone_moe)
		return read_bailing_experts(g, arch, ai, hp, err);
	if (ai->bailingmoe)
		return read_bailingmoe_experts(g, arch, hp, err);
	uint32_t u = 0;
	if (ai->shexp_gate) /* qwen35moe, qwen2moe: a gated shared expert in every layer */
		return read_qwen_moe_experts(g, arch, ai, hp, err);
	if (ai->mamba2 && get_u32_key(g, arch, "expert_shared_feed_forward_length", &u) && u > 0) {
		if (u > MODEL_MAX_DIM) /* granitehybrid: one shared expert of its own width */
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.expert_shared_feed_forward_length %u is over %u", arch,
				       u, MODEL_MAX_DIM);
		hp->n_ff_shexp = u;
		hp->n_expert_shared = 1;
		u = 0;
	} else if (get_u32_key(g, arch, "expert_shared_feed_forward_length", &u) && u > 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_shared_feed_forward_length is %u: shared experts are not "
			       "supported",
			       arch, u);
	if (get_u32_key(g, arch, "expert_shared_count", &u) && u > 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_shared_count is %u: shared experts are not supported", arch,
			       u);
	/* llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX is 1; gpt-oss's graph fixes its own
	 * (SOFTMAX_WEIGHT, model.h) whatever the key says */
	if (!ai->oai && get_u32_key(g, arch, "expert_gating_func", &u) && u != 1)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_gating_func is %u: only softmax gating (1) is supported",
			       arch, u);
	float f = 0.0f; /* (olmoe: llama.cpp never reads the key, a file's is ignored) */
	if (!ai->moe_raw_weights && get_f32_key(g, arch, "expert_weights_scale", &f) && f != 0.0f &&
	    f != 1.0f)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.expert_weights_scale is %g: scaled expert weights are not "
			       "supported",
			       arch, (double)f);
	/* llama.cpp: norm_w for llama and qwen3moe; olmoe's graph passes false */
	hp->expert_weights_norm = !ai->moe_raw_weights;
	return BG_OK;
}

uint64_t model_state_floats(const struct model_hparams *hp, const struct model_layer *L)
{
	if (L->gdn) { /* qwen35: the conv's last gdn_conv - 1 input rows, a matrix per V head */
		uint64_t cd = 2ull * hp->gdn_nk * hp->gdn_d + (uint64_t)hp->gdn_nv * hp->gdn_d;
		return (hp->gdn_conv - 1) * cd + (uint64_t)hp->gdn_nv * hp->gdn_d * hp->gdn_d;
	}
	/* granitehybrid's Mamba2 blocks (model.h): conv rows, then S; falcon-h1's every layer */
	if (!L->ssm && !hp->ssm_parallel)
		return 0;
	uint64_t C = (uint64_t)hp->ssm_d_inner + 2ull * hp->ssm_n_group * hp->ssm_d_state;
	return (hp->ssm_d_conv - 1) * C + (uint64_t)hp->ssm_d_inner * hp->ssm_d_state;
}

enum bg_status model_state_layout(const struct model *m, int32_t n_slots, uint64_t **off,
				  uint64_t *per, struct bg_err *err)
{
	const uint32_t n_layer = m->hp.n_layer;
	uint64_t *o = calloc((size_t)n_layer + 1, sizeof *o), p = 0;
	*off = NULL;
	*per = 0;
	if (!o)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the state offsets");
	for (uint32_t l = 0; l < n_layer; l++) {
		o[l] = p;
		uint64_t f = model_state_floats(&m->hp, &m->layers[l]);
		if (f > (UINT64_C(1) << 40) - p) {
			free(o);
			return bg_fail(err, BG_ERR_CAPACITY, "recurrent state too large");
		}
		p += f;
	}
	o[n_layer] = p;
	if (p && n_slots < 1) {
		free(o);
		return bg_fail(err, BG_ERR_INVALID,
			       "the model keeps a recurrent state per sequence: the backend needs "
			       "state slots (backend_config.n_state_slots)");
	}
	if (p && p > SIZE_MAX / sizeof(float) / (uint64_t)n_slots) {
		free(o);
		return bg_fail(err, BG_ERR_CAPACITY, "%d recurrent-state slots are too large",
			       n_slots);
	}
	*off = o;
	*per = p;
	return BG_OK;
}

uint64_t model_ff_shexp(const struct model_hparams *hp)
{
	return hp->n_ff_shexp ? hp->n_ff_shexp : (uint64_t)hp->n_ff_exp * hp->n_expert_shared;
}

/* model_layer_is_swa, model_layer_moe, model_kv_window: see model.h */
bool model_layer_is_swa(const struct model_hparams *hp, uint32_t l)
{
	if (hp->n_swa == 0)
		return false;
	uint32_t p = hp->swa_pattern;
	return p == 0 || (l + hp->swa_phase) % p < p - 1;
}

bool model_layer_moe(const struct model_layer *L)
{
	return L->ffn_gate_inp.ne0 != 0;
}

uint32_t model_kv_window(const struct model_hparams *hp)
{
	if (!hp || hp->n_swa == 0 || hp->n_layer == 0)
		return 0;
	for (uint32_t l = 0; l < hp->n_layer; l++)
		if (!model_layer_is_swa(hp, l))
			return 0;
	return hp->n_swa;
}

/* model_head_dim ... model_q_dim_max, model_n_layer_kv, model_kv_layer: see model.h */
uint32_t model_n_layer_kv(const struct model_hparams *hp)
{
	return hp->n_layer_kv && hp->n_layer_kv < hp->n_layer ? hp->n_layer_kv : hp->n_layer;
}

uint32_t model_kv_layer(const struct model_hparams *hp, const struct model_layer *L, uint32_t l)
{
	return l >= model_n_layer_kv(hp) ? L->kv_src : l;
}

uint32_t model_head_dim(const struct model_hparams *hp, bool swa)
{
	return swa && hp->head_dim_swa ? hp->head_dim_swa : hp->head_dim;
}

uint32_t model_n_head_kv(const struct model_hparams *hp, bool swa)
{
	return swa && hp->n_head_kv_swa ? hp->n_head_kv_swa : hp->n_head_kv;
}

uint32_t model_n_head(const struct model_hparams *hp, bool swa)
{
	return swa && hp->n_head_swa ? hp->n_head_swa : hp->n_head;
}

uint32_t model_rope_dim(const struct model_hparams *hp, bool swa)
{
	return swa && hp->rope_dim_swa ? hp->rope_dim_swa : hp->rope_dim;
}

uint32_t model_head_dim_max(const struct model_hparams *hp)
{
	uint32_t a = model_head_dim(hp, false), b = model_head_dim(hp, true);
	return a > b ? a : b;
}

uint64_t model_kv_dim_max(const struct model_hparams *hp)
{
	uint64_t a = (uint64_t)model_n_head_kv(hp, false) * model_head_dim(hp, false);
	uint64_t b = (uint64_t)model_n_head_kv(hp, true) * model_head_dim(hp, true);
	uint64_t c = hp->conv_l ? ((uint64_t)hp->n_embd + 1) / 2 : 0; /* lfm2's bx rows */
	a = a > b ? a : b;
	return a > c ? a : c;
}

uint64_t model_q_dim_max(const struct model_hparams *hp)
{
	uint32_t h = model_n_head(hp, true) > hp->n_head ? model_n_head(hp, true) : hp->n_head;
	return (uint64_t)h * model_head_dim_max(hp);
}

/* gemma4's keys beyond gemma3's (model.h): the windowed layers' head size, rotated
 * dimensions and K/V heads (head_count_kv may be a per-layer list, one value for each kind
 * of layer, as llama.cpp's converter writes it for the 31B: 16 windowed, 4 global), the
 * attention scale 1, V's norm, the layer output scales; refused: per-layer token
 * embeddings and shared-KV layers (Gemma 4 E2B / E4B). g NULL (a lazy model): the
 * defaults only. Runs after read_features (the window pattern). */
static enum bg_status read_gemma4(const struct gguf_ctx *g, const char *arch,
				  struct model_hparams *hp, struct bg_err *err)
{
	char key[128];
	hp->attn_scale = 1.0f; /* llama.cpp: f_attention_scale 1 (no 1/sqrt(head size)) */
	hp->v_norm = true;
	hp->rope_factors_global = true;
	if (!g)
		return BG_OK;
	uint32_t u = 0;
	if (get_u32_key(g, arch, "embedding_length_per_layer_input", &u) && u > MODEL_MAX_DIM)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s.embedding_length_per_layer_input %u is too large", arch, u);
	hp->n_embd_per_layer = u;
	u = 0;
	if (get_u32_key(g, arch, "attention.shared_kv_layers", &u) && u > 0) {
		/* llama.cpp's reuse: a windowed layer reads n_layer_kv - 2, a global one
		 * n_layer_kv - 1; those must exist and be of the reader's kind */
		uint32_t k = hp->n_layer - (u < hp->n_layer ? u : hp->n_layer);
		bool ok = u < hp->n_layer && k >= 2 && model_layer_is_swa(hp, k - 2) &&
			  !model_layer_is_swa(hp, k - 1);
		if (!ok)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "%s.attention.shared_kv_layers is %u of %u layers: the layers "
				       "they would read (the last windowed and the last global one "
				       "before them) are not there",
				       arch, u, hp->n_layer);
		hp->n_layer_kv = k;
	}
	uint32_t kl = hp->head_dim, vl = 0;
	if (get_u32_key(g, arch, "attention.key_length_swa", &kl) && (kl == 0 || kl > 4096))
		return bg_fail(err, BG_ERR_FORMAT,
			       "attention.key_length_swa %u is not in [1, 4096]", kl);
	if (get_u32_key(g, arch, "attention.value_length_swa", &vl) && vl != kl)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "attention.value_length_swa %u differs from key_length_swa %u, "
			       "which is not supported",
			       vl, kl);
	hp->head_dim_swa = kl;
	hp->rope_dim_swa = kl;
	if (get_u32_key(g, arch, "rope.dimension_count_swa", &hp->rope_dim_swa) &&
	    (hp->rope_dim_swa == 0 || hp->rope_dim_swa > kl || hp->rope_dim_swa % 2))
		return bg_fail(err, BG_ERR_FORMAT,
			       "rope.dimension_count_swa %u is not an even number in [2, the "
			       "windowed head size %u]",
			       hp->rope_dim_swa, kl);
	if (kl % 2)
		return bg_fail(err, BG_ERR_FORMAT, "the windowed head size %u is odd", kl);
	hp->n_head_kv_swa = hp->n_head_kv;
	snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
	enum gguf_type et;
	uint64_t n = 0;
	if (gguf_get_arr(g, key, &et, &n)) {
		int32_t *v = malloc(hp->n_layer * sizeof *v);
		if (!v)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory");
		if (n != hp->n_layer || !gguf_arr_copy_i32(g, key, v, n)) {
			free(v);
			return bg_fail(err, BG_ERR_FORMAT, "%s is not a list of %u integers", key,
				       hp->n_layer);
		}
		int32_t kind[2] = {-1, -1}; /* global, windowed */
		bool ok = true;
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			int32_t *k = &kind[model_layer_is_swa(hp, l)];
			ok = ok && v[l] > 0 && (uint32_t)v[l] <= hp->n_head &&
			     hp->n_head % (uint32_t)v[l] == 0 && (*k < 0 || *k == v[l]);
			*k = v[l];
		}
		free(v);
		if (!ok)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "%s: K/V head counts that differ between layers of one kind "
				       "(windowed or global), or do not divide head_count %u, are not "
				       "supported",
				       key, hp->n_head);
		hp->n_head_kv = (uint32_t)(kind[0] > 0 ? kind[0] : kind[1]);
		hp->n_head_kv_swa = (uint32_t)(kind[1] > 0 ? kind[1] : kind[0]);
	}
	hp->out_scale = gguf_find_tensor(g, "blk.0.layer_output_scale.weight") != NULL;
	return BG_OK;
}

static bool layer_list_i32(const struct gguf_ctx *g, const char *arch, const char *suffix,
			   uint32_t n_layer, uint32_t l, int32_t *v);

/* step35's keys beyond the common ones (arch.h; runs after read_features, which read the
 * window and its list): head_count and head_count_kv as per-layer lists (block_count
 * entries, NextN layers included) with one value per layer kind, each kind's K/V heads
 * dividing its query heads; the windowed layers rotate rope.dimension_count_swa (else
 * rope.dimension_count) dimensions, the global ones rope.dimension_count / 2; rope_freqs
 * on the global layers only. */
static enum bg_status read_step35(const struct gguf_ctx *g, const char *arch,
				  struct model_hparams *hp, struct bg_err *err)
{
	hp->rope_factors_global = true;
	if (hp->n_swa == 0)
		return bg_fail(err, BG_ERR_FORMAT,
			       "metadata key %s.attention.sliding_window is missing or 0", arch);
	const uint32_t n_list = hp->n_layer + hp->n_layer_nextn;
	static const char *const keys[2] = {"attention.head_count", "attention.head_count_kv"};
	int32_t kind[2][2] = {{-1, -1}, {-1, -1}}; /* [query, K/V][global, windowed] */
	for (int k = 0; k < 2; k++) {
		char key[128];
		snprintf(key, sizeof key, "%s.%s", arch, keys[k]);
		enum gguf_type et;
		uint64_t n = 0;
		if (!gguf_get_arr(g, key, &et, &n)) { /* a scalar: every layer's */
			kind[k][0] = kind[k][1] = (int32_t)(k ? hp->n_head_kv : hp->n_head);
			continue;
		}
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			int32_t v = -1;
			int32_t *c = &kind[k][model_layer_is_swa(hp, l)];
			if (!layer_list_i32(g, arch, keys[k], n_list, l, &v) || v <= 0 ||
			    (uint32_t)v > MODEL_MAX_DIM)
				return bg_fail(err, BG_ERR_FORMAT,
					       "%s is not a list of %u head counts in [1, %u]", key,
					       n_list, MODEL_MAX_DIM);
			if (*c >= 0 && *c != v)
				return bg_fail(err, BG_ERR_UNSUPPORTED,
					       "%s: head counts that differ between layers of one "
					       "kind (windowed or global) are not supported",
					       key);
			*c = v;
		}
	}
	for (int w = 0; w < 2; w++) { /* a kind without layers takes the other's */
		for (int k = 0; k < 2; k++)
			if (kind[k][w] < 0)
				kind[k][w] = kind[k][!w];
		if (kind[0][w] % kind[1][w])
			return bg_fail(
			    err, BG_ERR_FORMAT,
			    "the %s layers' head count %d is not a multiple of their K/V "
			    "head count %d",
			    w ? "windowed" : "global", kind[0][w], kind[1][w]);
	}
	hp->n_head = (uint32_t)kind[0][0];
	hp->n_head_swa = (uint32_t)kind[0][1];
	hp->n_head_kv = (uint32_t)kind[1][0];
	hp->n_head_kv_swa = (uint32_t)kind[1][1];
	hp->head_dim_swa = hp->head_dim;
	hp->rope_dim_swa = hp->rope_dim; /* before llama.cpp's halving of n_rot_full */
	if (get_u32_key(g, arch, "rope.dimension_count_swa", &hp->rope_dim_swa) &&
	    (hp->rope_dim_swa == 0 || hp->rope_dim_swa > hp->head_dim || hp->rope_dim_swa % 2))
		return bg_fail(err, BG_ERR_FORMAT,
			       "rope.dimension_count_swa %u is not an even number in [2, head size "
			       "%u]",
			       hp->rope_dim_swa, hp->head_dim);
	if (hp->rope_dim % 4)
		return bg_fail(err, BG_ERR_FORMAT,
			       "rope.dimension_count %u: its half (the global layers' rotation) is "
			       "odd",
			       hp->rope_dim);
	hp->rope_dim /= 2;
	/* llama.cpp: a layer without ffn_gate_inp is dense, wherever it is (the released file:
	 * the first three; n_layer_dense_lead counts the leading ones, the loader takes the
	 * others' dense FFN: model_layer_moe); experts without a router are malformed */
	bool routed = false;
	for (uint32_t l = 0; hp->n_expert && l < hp->n_layer; l++) {
		char n[64];
		snprintf(n, sizeof n, "blk.%u.ffn_gate_inp.weight", l);
		if (gguf_find_tensor(g, n)) {
			routed = true;
			continue;
		}
		snprintf(n, sizeof n, "blk.%u.ffn_gate_exps.weight", l);
		if (gguf_find_tensor(g, n))
			return bg_fail(
			    err, BG_ERR_FORMAT,
			    "layer %u has experts (ffn_gate_exps) but no router (ffn_gate_inp)", l);
		if (!routed)
			hp->n_layer_dense_lead = l + 1;
	}
	return BG_OK;
}

/* Entry l of ARCH.SUFFIX when the key is a list of n_layer integers (n_layer <=
 * MODEL_MAX_LAYERS), in *v; false otherwise. */
static bool layer_list_i32(const struct gguf_ctx *g, const char *arch, const char *suffix,
			   uint32_t n_layer, uint32_t l, int32_t *v)
{
	char key[128];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	enum gguf_type et;
	uint64_t n = 0;
	int32_t all[MODEL_MAX_LAYERS];
	if (!g || !gguf_get_arr(g, key, &et, &n) || n != n_layer || n > MODEL_MAX_LAYERS ||
	    l >= n_layer || !gguf_arr_copy_i32(g, key, all, n))
		return false;
	*v = all[l];
	return true;
}

/* lfm2: layer l's head_count_kv entry, -1 when the key is not a list of n_layer integers
 * in [0, MODEL_MAX_DIM]. */
static int64_t lfm2_layer_kv(const struct gguf_ctx *g, const char *arch, uint32_t n_layer,
			     uint32_t l)
{
	int32_t v = -1;
	if (!layer_list_i32(g, arch, "attention.head_count_kv", n_layer, l, &v))
		return -1;
	return v >= 0 && (uint32_t)v <= MODEL_MAX_DIM ? v : -1;
}

/* lfm2, granitehybrid: head_count_kv a per-layer list whose zero entries are the layers
 * without attention (kind: "conv", "Mamba2") and whose other entries (one value, dividing
 * n_head) the attention layers' K/V heads: n_head_kv, or n_head when no layer attends. The
 * list is read once. */
static enum bg_status read_kv_heads(const struct gguf_ctx *g, const char *arch, const char *kind,
				    struct model_hparams *hp, struct bg_err *err)
{
	char key[128];
	snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
	enum gguf_type et;
	uint64_t n = 0;
	int32_t all[MODEL_MAX_LAYERS];
	bool ok = g && gguf_get_arr(g, key, &et, &n) && n == hp->n_layer && n <= MODEL_MAX_LAYERS &&
		  gguf_arr_copy_i32(g, key, all, n);
	int64_t kv = 0;
	for (uint32_t l = 0; ok && l < hp->n_layer; l++) {
		int64_t v = all[l];
		ok = v >= 0 && v <= MODEL_MAX_DIM &&
		     (v == 0 || ((!kv || v == kv) && hp->n_head % (uint32_t)v == 0));
		kv = v ? v : kv;
	}
	if (!ok)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s is not a list of %u K/V head counts (0 for a %s layer, else one "
			       "value dividing head_count %u)",
			       key, hp->n_layer, kind, hp->n_head);
	hp->n_head_kv = kv ? (uint32_t)kv : hp->n_head;
	return BG_OK;
}

/* lfm2 (model.h's conv_l): shortconv.l_cache, and head_count_kv a per-layer list whose
 * zero entries are the conv layers and whose other entries (one value) are the attention
 * layers' K/V heads (n_head_kv; n_head when every layer is a conv); n_head read already.
 * attention.sliding_window > 0 (windowed attention layers) is refused. */
static enum bg_status read_lfm2(const struct gguf_ctx *g, const char *arch,
				struct model_hparams *hp, struct bg_err *err)
{
	if (!get_u32_key(g, arch, "shortconv.l_cache", &hp->conv_l) || hp->conv_l < 2 ||
	    hp->conv_l > MODEL_CONV_L_MAX)
		return bg_fail(err, BG_ERR_FORMAT,
			       "metadata key %s.shortconv.l_cache is missing or not in [2, %u]",
			       arch, MODEL_CONV_L_MAX);
	uint32_t w = 0;
	if (get_u32_key(g, arch, "attention.sliding_window", &w) && w > 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.attention.sliding_window %u (windowed attention layers) is not "
			       "supported",
			       arch, w);
	return read_kv_heads(g, arch, "conv", hp, err);
}

/* qwen35, qwen3next: whether the attention.recurrent_layers list `key` (the converter
 * writes one from the HF config's layer_types: a bool per layer, MTP layers included and
 * false) says what full_attention_interval does */
static bool recurrent_list_is_interval(const struct gguf_ctx *g, const char *key,
				       const struct model_hparams *hp)
{
	enum gguf_type et;
	uint64_t n = 0;
	const uint64_t want = (uint64_t)hp->n_layer + hp->n_layer_nextn;
	if (!gguf_get_arr(g, key, &et, &n) || et != GGUF_TYPE_BOOL || n != want ||
	    n > MODEL_MAX_LAYERS)
		return false;
	bool *w = malloc(n * sizeof *w + 1);
	bool ok = w && gguf_arr_copy_bool(g, key, w, n);
	for (uint64_t l = 0; ok && l < n; l++)
		ok = w[l] == (l < hp->n_layer && (l + 1) % hp->gdn_every != 0);
	free(w);
	return ok;
}

/* qwen35 (model.h's gdn_*): the ssm.* keys, full_attention_interval (default 4, as
 * llama.cpp's); refused: an attention.recurrent_layers list (llama.cpp's alternative
 * layer pattern) other than full_attention_interval's own, attention.scale (not read
 * here), value and key heads of different sizes. Runs after head_dim is known. */
static enum bg_status read_qwen35(const struct gguf_ctx *g, const char *arch,
				  struct model_hparams *hp, struct bg_err *err)
{
	char key[128];
	uint32_t inner = 0;
	hp->attn_out_gate = true;
	hp->gdn_every = 4;
	if (!get_u32_key(g, arch, "ssm.conv_kernel", &hp->gdn_conv) || hp->gdn_conv < 2 ||
	    hp->gdn_conv > MODEL_CONV_L_MAX)
		return bg_fail(err, BG_ERR_FORMAT,
			       "metadata key %s.ssm.conv_kernel is missing or not in [2, %u]", arch,
			       MODEL_CONV_L_MAX);
	if (!get_u32_key(g, arch, "ssm.state_size", &hp->gdn_d) || hp->gdn_d == 0 ||
	    hp->gdn_d > 1024 || !get_u32_key(g, arch, "ssm.group_count", &hp->gdn_nk) ||
	    hp->gdn_nk == 0 || hp->gdn_nk > 4096 ||
	    !get_u32_key(g, arch, "ssm.time_step_rank", &hp->gdn_nv) || hp->gdn_nv == 0 ||
	    hp->gdn_nv > 4096 || hp->gdn_nv % hp->gdn_nk ||
	    !get_u32_key(g, arch, "ssm.inner_size", &inner) ||
	    (uint64_t)inner != (uint64_t)hp->gdn_nv * hp->gdn_d)
		return bg_fail(
		    err, BG_ERR_FORMAT,
		    "%s.ssm.state_size (1..1024), group_count and time_step_rank (1..4096, "
		    "the latter a multiple of the former) and inner_size (time_step_rank "
		    "* state_size) are missing or inconsistent",
		    arch);
	if (get_u32_key(g, arch, "full_attention_interval", &hp->gdn_every) && hp->gdn_every == 0)
		return bg_fail(err, BG_ERR_FORMAT, "%s.full_attention_interval is 0", arch);
	snprintf(key, sizeof key, "%s.attention.recurrent_layers", arch);
	if (g && gguf_find_key(g, key) >= 0 && !recurrent_list_is_interval(g, key, hp))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s (a layer pattern other than full_attention_interval) is not "
			       "supported",
			       key);
	snprintf(key, sizeof key, "%s.attention.scale", arch);
	if (g && gguf_find_key(g, key) >= 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED, "%s is not supported", key);
	return BG_OK;
}

/* Multi-section RoPE (arch.h's mrope): rope.dimension_sections, required (llama.cpp's
 * get_key_or_arr(..., 4, true): a list of 4, or one value for all 4). Refused where ggml
 * would assert (a negative width, the first three all 0, a sum above the head size) and,
 * for the VL graphs (which assert n_rot == head size), a partial rotation. */
static enum bg_status read_mrope(const struct gguf_ctx *g, const char *arch,
				 const struct arch_info *ai, struct model_hparams *hp,
				 struct bg_err *err)
{
	char key[128];
	snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
	int32_t *s = hp->rope_sections;
	enum gguf_type et;
	uint64_t n = 0;
	int64_t one = 0;
	if (gguf_get_arr(g, key, &et, &n)) {
		if (n != 4 || !gguf_arr_copy_i32(g, key, s, 4))
			return bg_fail(err, BG_ERR_FORMAT, "%s is not a list of 4 integers", key);
	} else if (gguf_get_i64(g, key, &one) && one >= INT32_MIN && one <= INT32_MAX) {
		s[0] = s[1] = s[2] = s[3] = (int32_t)one;
	} else {
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is missing or not an integer",
			       key);
	}
	if (!arch_mrope_sections_ok(s, hp->head_dim))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s [%d, %d, %d, %d] is not supported: the widths must be >= 0, the "
			       "first three not all 0, their sum at most the head size %u",
			       key, s[0], s[1], s[2], s[3], hp->head_dim);
	if (!ai->gdn && hp->rope_dim != hp->head_dim)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.rope.dimension_count %u differs from the head size %u, which "
			       "%s's graph does not allow",
			       arch, hp->rope_dim, hp->head_dim, arch);
	hp->rope_mrope = ai->mrope;
	return BG_OK;
}

/* qwen35: whether layer l is a gated delta net (model.h's gdn_every) */
static bool qwen35_layer_gdn(const struct model_hparams *hp, uint32_t l)
{
	return hp->gdn_conv && (l + 1) % hp->gdn_every != 0;
}

/* The most taps, heads, state size and groups a Mamba2 file may have (Granite 4.0-H: 4
 * taps, 48 to 128 heads, state 128, 1 group) */
#define SSM_CONV_MAX  8u
#define SSM_STATE_MAX 1024u

/* granitehybrid (model.h's ssm_*): the ssm.* keys, and head_count_kv a per-layer list
 * whose zero entries are the Mamba2 layers and whose other entries (one value) the
 * attention layers' K/V heads (n_head_kv; n_head when every layer is recurrent). Checked
 * as llama.cpp asserts: d_inner = 2 n_embd, heads and groups dividing it, groups dividing
 * the heads. */
static enum bg_status read_mamba2(const struct gguf_ctx *g, const char *arch,
				  const struct arch_info *ai, struct model_hparams *hp,
				  struct bg_err *err)
{
	static const char *const keys[5] = {"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
					    "ssm.time_step_rank", "ssm.group_count"};
	uint32_t *dst[5] = {&hp->ssm_d_conv, &hp->ssm_d_inner, &hp->ssm_d_state, &hp->ssm_n_head,
			    &hp->ssm_n_group};
	for (int i = 0; i < 5; i++)
		if (!get_u32_key(g, arch, keys[i], dst[i]) || *dst[i] == 0)
			return bg_fail(err, BG_ERR_FORMAT, "metadata key %s.%s is missing or 0",
				       arch, keys[i]);
	if (hp->ssm_d_conv < 2 || hp->ssm_d_conv > SSM_CONV_MAX ||
	    hp->ssm_d_state > SSM_STATE_MAX ||
	    (!ai->nemotron_h && !ai->falcon_h1 && (uint64_t)hp->ssm_d_inner != 2ull * hp->n_embd) ||
	    hp->ssm_d_inner > MODEL_MAX_DIM || hp->ssm_d_inner % hp->ssm_n_head ||
	    hp->ssm_n_head % hp->ssm_n_group)
		return bg_fail(err, BG_ERR_FORMAT,
			       "%s's Mamba2 sizes are not usable: conv_kernel %u (2 to %u), "
			       "state_size %u (at most %u), inner_size %u (2 x embedding_length "
			       "%u), time_step_rank (heads) %u dividing it, group_count %u "
			       "dividing the heads",
			       arch, hp->ssm_d_conv, SSM_CONV_MAX, hp->ssm_d_state, SSM_STATE_MAX,
			       hp->ssm_d_inner, hp->n_embd, hp->ssm_n_head, hp->ssm_n_group);
	if (ai->falcon_h1) { /* every layer both; head_count_kv one value (read after) */
		hp->ssm_parallel = true;
		return BG_OK;
	}
	return read_kv_heads(g, arch, "Mamba2", hp, err);
}

/* gemma4: layer l's FFN width from a per-layer feed_forward_length list (n_layer entries;
 * n_layer 0: only whether the key is a list), else 0. */
static uint32_t layer_n_ff(const struct gguf_ctx *g, const char *arch, uint32_t n_layer,
			   uint32_t l)
{
	if (n_layer == 0) {
		char key[128];
		snprintf(key, sizeof key, "%s.feed_forward_length", arch);
		enum gguf_type et;
		uint64_t n = 0;
		return g && gguf_get_arr(g, key, &et, &n);
	}
	int32_t v = 0;
	if (!layer_list_i32(g, arch, "feed_forward_length", n_layer, l, &v) || v <= 0)
		return 0;
	return (uint32_t)v;
}

/* A key that gemma4 files may write as a per-layer list: refused with a message saying
 * what the list means, since batchgen reads one value. */
static enum bg_status refuse_list(const struct gguf_ctx *g, const char *arch, const char *suffix,
				  const char *what, struct bg_err *err)
{
	char key[128];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	enum gguf_type et;
	uint64_t n;
	if (gguf_get_arr(g, key, &et, &n))
		return bg_fail(err, BG_ERR_UNSUPPORTED, "%s is a per-layer list (%s), which is not "
			       "supported", key, what);
	return BG_OK;
}

/* deepseek2's attention and expert keys (model.h's mla and moe_grouped), as llama.cpp's
 * deepseek2 loader reads them (arch.c), after the generic ones and the vocabulary size. */
static enum bg_status read_deepseek2(const struct gguf_ctx *g, const char *arch,
				     struct model_hparams *hp, struct bg_err *err)
{
	enum bg_status st;
	uint32_t kl = 0, vl = 0, u = 0;
	if (!get_u32_key(g, arch, "attention.key_length_mla", &kl) ||
	    !get_u32_key(g, arch, "attention.value_length_mla", &vl))
		return bg_fail(
		    err, BG_ERR_UNSUPPORTED,
		    "%s.attention.key_length_mla / value_length_mla are missing: an older "
		    "deepseek2 conversion (attn_kv_b instead of attn_k_b and attn_v_b), "
		    "which is not supported; convert the model again with a current "
		    "llama.cpp",
		    arch);
	if ((st = need_u32(g, arch, "attention.kv_lora_rank", MODEL_MAX_DIM, &hp->n_lora_kv, err)))
		return st;
	if (kl <= hp->rope_dim || kl > 4096 || vl == 0 || vl > 4096)
		return bg_fail(err, BG_ERR_FORMAT,
			       "attention.key_length_mla %u / value_length_mla %u do not fit "
			       "rope.dimension_count %u (expected %u < key <= 4096, 1 <= value <= "
			       "4096)",
			       kl, vl, hp->rope_dim, hp->rope_dim);
	if (hp->head_dim != hp->n_lora_kv + hp->rope_dim || hp->n_head_kv != 1 ||
	    (get_u32_key(g, arch, "attention.value_length", &u) && u != hp->n_lora_kv))
		return bg_fail(err, BG_ERR_FORMAT,
			       "deepseek2 MLA expects attention.key_length = kv_lora_rank + "
			       "rope.dimension_count (%u), value_length = kv_lora_rank (%u) and "
			       "head_count_kv 1 (the file: %u, %u, %u)",
			       hp->n_lora_kv + hp->rope_dim, hp->n_lora_kv, hp->head_dim, u,
			       hp->n_head_kv);
	hp->mla = true;
	hp->mla_nope = kl - hp->rope_dim;
	hp->mla_v_head = vl;
	const uint32_t nl = hp->n_layer; /* llama.cpp's n_layer(): without NextN layers */
	/* llama.cpp's "lite" variants (DeepSeek-V2-Lite, GigaChat3, Kanana-2): no q_lora_rank
	 * read; otherwise the key is required (0: a plain attn_q) */
	const bool lite = nl == 26 || nl == 27 || (nl == 48 && hp->n_vocab == 128256);
	char key[128];
	snprintf(key, sizeof key, "%s.attention.q_lora_rank", arch);
	if (!lite && !gguf_get_u32(g, key, &hp->n_lora_q))
		return bg_fail(err, BG_ERR_FORMAT,
			       "metadata key %s is missing or not an unsigned "
			       "integer",
			       key);
	if (hp->n_lora_q > MODEL_MAX_DIM)
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s is %u (at most %u)", key,
			       hp->n_lora_q, MODEL_MAX_DIM);
	float f = 0.0f;
	if (get_f32_key(g, arch, "rope.scaling.yarn_log_multiplier", &f)) {
		if (!isfinite(f) || fabsf(f) > 100.0f)
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.rope.scaling.yarn_log_multiplier is not usable", arch);
		hp->rope_yarn_log_mul = f / 0.1f; /* llama.cpp cancels the converter's 0.1 */
	}
	if (get_f32_key(g, arch, "attention.temperature_scale", &f) && f != 0.0f)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.attention.temperature_scale (Mistral Large 3's attention "
			       "temperature) is not supported for deepseek2",
			       arch);
	hp->attn_scale = arch_mla_kq_scale(hp);
	if (!hp->n_expert)
		return BG_OK;
	if ((st = read_shared_experts(g, arch, hp, err)))
		return st;
	uint32_t gf = 0;
	get_u32_key(g, arch, "expert_gating_func", &gf);
	if (gf == 0) /* llama.cpp: absent means softmax, except GLM-4.7-Flash's sigmoid */
		gf = (nl == 47 || nl == 48) && hp->n_vocab == 154880 ? 2 : 1;
	if (gf != 1 && gf != 2)
		return bg_fail(
		    err, BG_ERR_UNSUPPORTED,
		    "%s.expert_gating_func is %u: softmax (1) and sigmoid (2) gating are "
		    "supported for deepseek2",
		    arch, gf);
	hp->expert_gating_sigmoid = gf == 2;
	hp->moe_sel_bias = true; /* optional: the layers' own (V2 has none) */
	if ((st = read_weights_scale_norm(g, arch, hp, err)))
		return st;
	return read_expert_groups(g, arch, hp, err);
}

enum bg_status model_read_hparams(const struct gguf_ctx *g, struct model_hparams *hp, char arch[32],
				  struct bg_err *err)
{
	memset(hp, 0, sizeof *hp);
	struct gguf_str a;
	if (!gguf_get_str(g, "general.architecture", &a))
		return bg_fail(err, BG_ERR_FORMAT, "metadata key general.architecture is missing");
	if (a.len == 0 || a.len >= 32 || memchr(a.ptr, '\0', a.len))
		return bg_fail(err, BG_ERR_FORMAT, "general.architecture is not a valid name");
	memcpy(arch, a.ptr, a.len);
	arch[a.len] = '\0';
	for (size_t i = 0; i < a.len; i++)
		if ((unsigned char)arch[i] < 0x20 || (unsigned char)arch[i] >= 0x7f)
			arch[i] = '?';
	const struct arch_info *ai = arch_find(arch);
	if (!ai)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "architecture '%s' is not supported (supported: %s)", arch,
			       arch_names());

	enum bg_status st;
	/* gemma4 may list the FFN widths per layer (the converter's double-wide MLP of the
	 * shared-KV layers): n_ff is then the largest, model_layer_n_ff each layer's */
	/* nemotron_h lists them always, 0 for its Mamba2 and attention layers */
	bool ff_list = (ai->gemma4 || ai->nemotron_h) && layer_n_ff(g, arch, 0, 0) > 0;
	if ((!ff_list && (st = refuse_list(g, arch, "feed_forward_length",
					   "FFN widths per layer", err))) ||
	    (!ai->step35 && /* step35: lists, read_step35 */
	     (st = refuse_list(g, arch, "attention.head_count", "query heads per layer", err))))
		return st;
	if ((st = need_u32(g, arch, "block_count", MODEL_MAX_LAYERS, &hp->n_layer, err)) ||
	    (st = need_u32(g, arch, "embedding_length", MODEL_MAX_DIM, &hp->n_embd, err)))
		return st;
	int32_t h0 = 0; /* step35's list: layer 0's entry sizes the head (llama.cpp's n_head()) */
	if (ai->step35 && layer_list_i32(g, arch, "attention.head_count", hp->n_layer, 0, &h0)) {
		if (h0 <= 0 || (uint32_t)h0 > MODEL_MAX_DIM)
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s.attention.head_count's first entry %d is not in [1, %u]",
				       arch, h0, MODEL_MAX_DIM);
		hp->n_head = (uint32_t)h0;
	} else if ((st = need_u32(g, arch, "attention.head_count", MODEL_MAX_DIM, &hp->n_head,
				  err))) {
		return st;
	}
	if (ai->nextn && get_u32_key(g, arch, "nextn_predict_layers", &hp->n_layer_nextn)) {
		if (hp->n_layer_nextn >= hp->n_layer)
			return bg_fail(err, BG_ERR_FORMAT,
				       "nextn_predict_layers %u leaves no layer of block_count %u",
				       hp->n_layer_nextn, hp->n_layer);
		hp->n_layer -= hp->n_layer_nextn; /* the NextN layers are skipped (arch.h) */
	}
	uint32_t mtp = 0; /* nemotron_h: Nemotron 3's MTP layers */
	if (ai->nemotron_h && get_u32_key(g, arch, "nextn_predict_layers", &mtp) && mtp > 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s.nextn_predict_layers %u (MTP layers) is not supported", arch, mtp);
	char sec[128]; /* llama.cpp's GLM-4V files: M-RoPE sections, another rotation */
	snprintf(sec, sizeof sec, "%s.rope.dimension_sections", arch);
	if (ai->nextn && !ai->gdn && gguf_find_key(g, sec) >= 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s (M-RoPE of GLM-4V) is not supported", sec);
	if (ff_list) {
		hp->n_ff = 0;
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			int32_t v = -1;
			uint32_t f = layer_n_ff(g, arch, hp->n_layer, l);
			if (ai->nemotron_h) /* 0 allowed */
				f = layer_list_i32(g, arch, "feed_forward_length", hp->n_layer, l, &v) &&
					    v >= 0
					? (uint32_t)v
					: UINT32_MAX;
			if ((f == 0 && !ai->nemotron_h) || f > MODEL_MAX_DIM)
				return bg_fail(err, BG_ERR_FORMAT,
					       "%s.feed_forward_length is not a list of %u widths in "
					       "[1, %u]",
					       arch, hp->n_layer, MODEL_MAX_DIM);
			hp->n_ff = f > hp->n_ff ? f : hp->n_ff;
		}
	}
	/* qwen35moe, qwen2moe: optional (Qwen3.5 MoE files have none; llama.cpp reads it as
	 * optional) */
	char ffk[128];
	snprintf(ffk, sizeof ffk, "%s.feed_forward_length", arch);
	const bool ff_opt = ai->shexp_gate && gguf_find_key(g, ffk) < 0;
	if ((!ff_list && !ff_opt &&
	     (st = need_u32(g, arch, "feed_forward_length", MODEL_MAX_DIM, &hp->n_ff, err))) ||
	    (st = need_u32(g, arch, "context_length", UINT32_MAX, &hp->n_ctx_train, err)))
		return st;
	hp->n_head_kv = hp->n_head;
	char key[128];
	snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
	enum gguf_type kvt;
	uint64_t kvn;
	/* gemma4: a per-layer list, read_gemma4 reads it once the window pattern is known */
	bool kv_list = (ai->gemma4 || ai->shortconv || ai->mamba2 || ai->step35) &&
		       gguf_get_arr(g, key, &kvt, &kvn);
	if (ai->shortconv && (st = read_lfm2(g, arch, hp, err)))
		return st;
	if ((ai->mamba2 || ai->falcon_h1) && (st = read_mamba2(g, arch, ai, hp, err)))
		return st;
	if (!kv_list && gguf_find_key(g, key) >= 0 &&
	    (st = need_u32(g, arch, "attention.head_count_kv", MODEL_MAX_DIM, &hp->n_head_kv, err)))
		return st;
	/* the head size is n_embd / n_head unless attention.key_length says (GLM-4.5-Air: 96
	 * heads of 128 over n_embd 4096) */
	char klk[128];
	snprintf(klk, sizeof klk, "%s.attention.key_length", arch);
	if (hp->n_embd % hp->n_head && gguf_find_key(g, klk) < 0)
		return bg_fail(err, BG_ERR_FORMAT,
			       "embedding_length %u is not a multiple of head_count %u", hp->n_embd,
			       hp->n_head);
	if (hp->n_head % hp->n_head_kv)
		return bg_fail(err, BG_ERR_FORMAT,
			       "head_count %u is not a multiple of head_count_kv %u", hp->n_head,
			       hp->n_head_kv);
	hp->head_dim = hp->n_embd / hp->n_head;
	uint32_t kl, vl;
	if (get_u32_key(g, arch, "attention.key_length", &kl)) {
		if (kl == 0 || kl > 4096)
			return bg_fail(err, BG_ERR_FORMAT,
				       "attention.key_length %u is not in [1, 4096]", kl);
		hp->head_dim = kl;
	}
	if (!ai->mla && /* deepseek2: read_deepseek2 checks it */
	    get_u32_key(g, arch, "attention.value_length", &vl) && vl != hp->head_dim)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "attention.value_length %u differs from the key length %u, which is "
			       "not supported",
			       vl, hp->head_dim);
	hp->rope_dim = hp->head_dim;
	if (get_u32_key(g, arch, "rope.dimension_count", &hp->rope_dim) &&
	    (hp->rope_dim == 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2))
		return bg_fail(err, BG_ERR_FORMAT,
			       "rope.dimension_count %u is not an even number in [2, head size %u]",
			       hp->rope_dim, hp->head_dim);
	if (hp->rope_dim % 2)
		return bg_fail(err, BG_ERR_FORMAT, "the head size %u is odd: rope needs pairs",
			       hp->head_dim);
	hp->rope_base = 10000.0f;
	if (get_f32_key(g, arch, "rope.freq_base", &hp->rope_base) &&
	    !(isfinite(hp->rope_base) && hp->rope_base > 1.0f))
		return bg_fail(err, BG_ERR_FORMAT, "rope.freq_base %g is not a number above 1",
			       (double)hp->rope_base);
	if ((st = read_rope_scaling(g, arch, ai, hp, err)))
		return st;
	if (ai->mrope && (st = read_mrope(g, arch, ai, hp, err)))
		return st;
	if ((st = read_experts(g, arch, ai, hp, err)))
		return st;
	hp->rms_eps = 1e-5f;
	/* command-r, cohere2: LayerNorms, their eps a required key (llama.cpp's f_norm_eps) */
	const char *eps_key =
	    ai->cohere ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
	/* nemotron_h: the RMS eps, else layer_norm_epsilon (llama.cpp requires that one) */
	if (ai->nemotron_h && !get_f32_key(g, arch, eps_key, &hp->rms_eps))
		eps_key = "attention.layer_norm_epsilon";
	if (!get_f32_key(g, arch, eps_key, &hp->rms_eps) && (ai->cohere || ai->nemotron_h))
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s.%s is missing", arch, eps_key);
	float eps_file; /* ernie4_5(-moe), hunyuan-*, exaone(-moe), arcee, dots1: required by
			 * llama.cpp's loaders (arch.h's rms_eps_key) */
	if (ai->rms_eps_key && !get_f32_key(g, arch, eps_key, &eps_file))
		return bg_fail(err, BG_ERR_FORMAT, "metadata key %s.%s is missing", arch, eps_key);
	if (!(isfinite(hp->rms_eps) && hp->rms_eps > 0.0f && hp->rms_eps < 1.0f))
		return bg_fail(err, BG_ERR_FORMAT, "%s %g is not in (0, 1)", eps_key,
			       (double)hp->rms_eps);
	if ((st = read_features(g, arch, ai, hp, err)))
		return st;
	hp->n_layer_kv = hp->n_layer;
	if (ai->gemma4 && (st = read_gemma4(g, arch, hp, err)))
		return st;
	if (ai->step35 && (st = read_step35(g, arch, hp, err)))
		return st;

	/* vocabulary size: the tokenizer's, else <arch>.vocab_size, else token_embd's rows */
	enum gguf_type et;
	uint64_t n = 0;
	uint32_t nv = 0;
	const struct gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
	if (gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n)) {
		if (n == 0 || n > MODEL_MAX_VOCAB)
			return bg_fail(err, BG_ERR_FORMAT,
				       "tokenizer.ggml.tokens has %llu entries (expected 1 to %u)",
				       (unsigned long long)n, MODEL_MAX_VOCAB);
		hp->n_vocab = (uint32_t)n;
	} else if (get_u32_key(g, arch, "vocab_size", &nv)) {
		hp->n_vocab = nv;
	} else if (te && te->n_dims == 2) {
		hp->n_vocab = te->ne[1] <= MODEL_MAX_VOCAB ? (uint32_t)te->ne[1] : 0;
	}
	if (hp->n_vocab == 0 || hp->n_vocab > MODEL_MAX_VOCAB)
		return bg_fail(err, BG_ERR_FORMAT,
			       "cannot tell the vocabulary size (no tokenizer.ggml.tokens, "
			       "%s.vocab_size or token_embd.weight)",
			       arch);
	if (ai->gdn && (st = read_qwen35(g, arch, hp, err)))
		return st;
	hp->gdn_k_grouped = ai->gdn_next; /* qwen3next (arch.h) */
	if (ai->mla)
		return read_deepseek2(g, arch, hp, err);
	return BG_OK;
}

/* ---- tensors ---- */

struct loader {
	const struct gguf_ctx *g;
	struct model *m;
	struct bg_err *err;
	bool *used; /* [n_tensors]: taken by the model */
};

static void fmt_shape(char *buf, size_t cap, const uint64_t *ne, uint32_t n_dims)
{
	size_t k = (size_t)snprintf(buf, cap, "[");
	for (uint32_t i = 0; i < n_dims && k < cap; i++)
		k += (size_t)snprintf(buf + k, cap - k, "%s%llu", i ? ", " : "",
				      (unsigned long long)ne[i]);
	if (k < cap)
		snprintf(buf + k, cap - k, "]");
}

/* What a tensor is, for the types it may have: matrices any type a backend converts; norm
 * weights and biases only f32 (as llama.cpp's converter writes every 1-D tensor). */
enum take_kind { TK_MATRIX, TK_NORM, TK_BIAS, TK_SINKS, TK_CONV };

/* Finds name and checks its shape is (ne0) when ne1 == 0, (ne0, ne1) when ne2 == 0, else
 * (ne0, ne1, ne2) (stacked experts), and its type (see take_kind). Adds it to the parameter
 * and byte counts. The hyper-parameters bound each size (MODEL_MAX_*), so the products
 * below stay far from 2^64. */
static enum bg_status take3(struct loader *L, const char *name, uint64_t ne0, uint64_t ne1,
			    uint64_t ne2, enum take_kind kind, struct model_weight *w)
{
	const struct gguf_tensor *t = gguf_find_tensor(L->g, name);
	if (!t)
		return bg_fail(L->err, BG_ERR_FORMAT, "tensor '%s' is missing", name);
	uint64_t want[3] = {ne0, ne1, ne2};
	uint32_t want_dims = ne2 ? 3 : ne1 ? 2 : 1;
	/* trailing dimensions of size 1 are harmless (ggml drops them); unused ne are 1 */
	uint32_t dims = t->n_dims;
	while (dims > 1 && t->ne[dims - 1] == 1)
		dims--;
	bool ok = dims <= want_dims && t->ne[0] == ne0 && (want_dims == 1 || t->ne[1] == ne1) &&
		  (want_dims < 3 || t->ne[2] == ne2);
	if (!ok) {
		char got[96], exp[64];
		fmt_shape(got, sizeof got, t->ne, t->n_dims);
		fmt_shape(exp, sizeof exp, want, want_dims);
		return bg_fail(L->err, BG_ERR_FORMAT, "tensor '%s' has shape %s, expected %s", name,
			       got, exp);
	}
	if (kind != TK_MATRIX && t->type != GGUF_DTYPE_F32)
		return bg_fail(L->err, BG_ERR_UNSUPPORTED,
			       "tensor '%s' has type %s; %s must be f32", name,
			       gguf_dtype_name(t->type),
			       kind == TK_NORM	 ? "norm weights"
			       : kind == TK_BIAS ? "biases"
			       : kind == TK_CONV ? "conv weights (as ggml_ssm_conv takes them)"
						 : "attention sinks");
	w->type = t->type;
	w->data = t->data;
	w->ne0 = ne0;
	w->ne1 = ne1 ? ne1 : 1;
	w->ne2 = ne2;
	w->nb2 = 0;
	L->m->n_params += w->ne0 * w->ne1 * (ne2 ? ne2 : 1);
	L->m->weight_bytes += t->nbytes;
	L->used[t - gguf_tensor(L->g, 0)] = true;
	return BG_OK;
}

static enum bg_status take(struct loader *L, const char *name, uint64_t ne0, uint64_t ne1,
			   enum take_kind kind, struct model_weight *w)
{
	return take3(L, name, ne0, ne1, 0, kind, w);
}

void model_free(struct model *m)
{
	if (!m)
		return;
	free(m->layers);
	for (uint32_t i = 0; i < m->n_owned; i++)
		free(m->owned[i]);
	free(m->owned);
	gguf_close(m->gguf);
	free(m);
}

/* Rows [r0, r1) of w as a weight of its own (a fused tensor's part): no copy, not
 * counted again. */
static struct model_weight row_view(const struct model_weight *w, uint64_t r0, uint64_t r1)
{
	struct model_weight v = *w;
	v.data = (const char *)w->data + r0 * gguf_row_bytes(w->type, w->ne0);
	v.ne1 = r1 - r0;
	return v;
}

/* qwen3next: the rows src[k] (k < n) of w copied in that order into a buffer the model
 * owns (model.owned), as a weight of n rows; not counted again. */
static enum bg_status gather_rows(struct loader *L, const struct model_weight *w,
				  const uint64_t *src, uint64_t n, struct model_weight *out)
{
	struct model *m = L->m;
	const size_t rb = gguf_row_bytes(w->type, w->ne0);
	void **o = realloc(m->owned, (m->n_owned + 1) * sizeof *o);
	char *buf = malloc(n * rb + 1);
	if (o)
		m->owned = o;
	if (!o || !buf) {
		free(buf);
		return bg_fail(L->err, BG_ERR_NOMEM, "out of memory reordering a fused tensor");
	}
	m->owned[m->n_owned++] = buf;
	for (uint64_t k = 0; k < n; k++)
		memcpy(buf + k * rb, (const char *)w->data + src[k] * rb, rb);
	*out = *w;
	out->data = buf;
	out->ne1 = n;
	return BG_OK;
}

/* qwen3next's delta-net input weights (arch.c) in qwen35's layout: gdn_qkv and gdn_z from
 * attn_qkv / attn_gate as they are, else from ssm_in's per-K-head [q | k | v | z]; gdn_beta
 * and gdn_alpha from ssm_ba's per-K-head [beta | alpha]. */
static enum bg_status take_qwen3next_in(struct loader *L, uint32_t l, struct model_layer *ly)
{
	const struct model_hparams *hp = &L->m->hp;
	const uint64_t E = hp->n_embd, d = hp->gdn_d, nk = hp->gdn_nk, nv = hp->gdn_nv;
	const uint64_t r = nv / nk, KD = nk * d, VD = nv * d, G = 2 * d + 2 * r * d;
	char n[96];
	struct model_weight fused;
	enum bg_status st;
	uint64_t *idx = malloc((2 * KD + 2 * VD) * sizeof *idx);
	if (!idx)
		return bg_fail(L->err, BG_ERR_NOMEM, "out of memory reordering a fused tensor");
	snprintf(n, sizeof n, "blk.%u.attn_qkv.weight", l);
	if (gguf_find_tensor(L->g, n)) { /* the converter's layout (qwen35's) */
		if (!(st = take(L, n, E, 2 * KD + VD, TK_MATRIX, &ly->gdn_qkv))) {
			snprintf(n, sizeof n, "blk.%u.attn_gate.weight", l);
			st = take(L, n, E, VD, TK_MATRIX, &ly->gdn_z);
		}
	} else { /* older files: ssm_in, per K head g [q (d) | k (d) | v (r d) | z (r d)] */
		snprintf(n, sizeof n, "blk.%u.ssm_in.weight", l);
		if (!gguf_find_tensor(L->g, n)) {
			free(idx);
			return bg_fail(L->err, BG_ERR_FORMAT,
				       "layer %u: qwen3next's delta net needs attn_qkv.weight and "
				       "attn_gate.weight, or ssm_in.weight",
				       l);
		}
		uint64_t k = 0;
		for (uint64_t part = 0; part < 4; part++) { /* all q, all k, all v, then all z */
			uint64_t off = part < 2 ? part * d : 2 * d + (part - 2) * r * d;
			uint64_t len = part < 2 ? d : r * d;
			for (uint64_t g = 0; g < nk; g++)
				for (uint64_t i = 0; i < len; i++)
					idx[k++] = g * G + off + i;
		}
		if (!(st = take(L, n, E, 2 * KD + 2 * VD, TK_MATRIX, &fused)) &&
		    !(st = gather_rows(L, &fused, idx, 2 * KD + VD, &ly->gdn_qkv)))
			st = gather_rows(L, &fused, idx + 2 * KD + VD, VD, &ly->gdn_z);
	}
	for (uint64_t h = 0; h < nv; h++) { /* V head h: K head h / r, place h % r */
		idx[h] = h / r * 2 * r + h % r;
		idx[nv + h] = idx[h] + r;
	}
	snprintf(n, sizeof n, "blk.%u.ssm_ba.weight", l);
	if (!st && !(st = take(L, n, E, 2 * nv, TK_MATRIX, &fused)) &&
	    !(st = gather_rows(L, &fused, idx, nv, &ly->gdn_beta)))
		st = gather_rows(L, &fused, idx + nv, nv, &ly->gdn_alpha);
	free(idx);
	return st;
}

/* The RoPE frequency factors: rope_freqs (Llama 3.1's "llama3" scaling), else LongRoPE's
 * long or short set, chosen as llama.cpp's get_rope_factors does at its default context
 * (n_ctx = n_ctx_train): long when that exceeds the original context. */
static enum bg_status load_rope_factors(struct loader *L)
{
	struct model *m = L->m;
	struct model_hparams *hp = &m->hp;
	/* gemma4: as wide as the global layers' head (llama.cpp's n_embd_head / 2) */
	uint64_t n = (hp->rope_factors_global ? hp->head_dim : hp->rope_dim) / 2;
	if (hp->n_head_swa) /* step35: the most pairs any layer turns (llama.cpp's n_rot_max) */
		n = (hp->rope_dim > hp->rope_dim_swa ? hp->rope_dim : hp->rope_dim_swa) / 2;
	if (hp->ssm_parallel && gguf_find_tensor(L->g, "rope_freqs.weight")) {
		struct model_weight unused; /* falcon-h1: loaded, not passed to RoPE (arch.c) */
		return take(L, "rope_freqs.weight", n, 0, TK_NORM, &unused);
	}
	if (gguf_find_tensor(L->g, "rope_freqs.weight")) {
		snprintf(hp->rope_factors, sizeof hp->rope_factors, "rope_freqs");
		return take(L, "rope_freqs.weight", n, 0, TK_NORM, &m->rope_factors);
	}
	struct model_weight lw = {0}, sw = {0};
	enum bg_status st;
	if (gguf_find_tensor(L->g, "rope_factors_long.weight") &&
	    (st = take(L, "rope_factors_long.weight", n, 0, TK_NORM, &lw)))
		return st;
	if (gguf_find_tensor(L->g, "rope_factors_short.weight") &&
	    (st = take(L, "rope_factors_short.weight", n, 0, TK_NORM, &sw)))
		return st;
	bool use_long = hp->n_ctx_train > hp->n_ctx_orig;
	const struct model_weight *w = use_long ? &lw : &sw;
	if (w->data) {
		m->rope_factors = *w;
		snprintf(hp->rope_factors, sizeof hp->rope_factors, "%s",
			 use_long ? "rope_factors_long" : "rope_factors_short");
	}
	/* factors of 0 or NaN would make every angle infinite */
	if (m->rope_factors.data) {
		for (uint64_t i = 0; i < n; i++) {
			float f;
			memcpy(&f, (const char *)m->rope_factors.data + 4 * i, 4);
			if (!(isfinite(f) && f > 0.0f))
				return bg_fail(L->err, BG_ERR_FORMAT,
					       "tensor '%s' has a factor %g that is not a positive "
					       "number",
					       hp->rope_factors, (double)f);
		}
	}
	return BG_OK;
}

/* step35: layer l's SwiGLU clamp from ARCH.KEY (absent: none; a number, or a list of
 * block_count numbers), stored as model.h says: limit when above 1e-6, else 0. */
static enum bg_status step35_clamp(struct loader *L, const char *suffix, uint32_t l, float *out)
{
	const struct model_hparams *hp = &L->m->hp;
	char key[128];
	snprintf(key, sizeof key, "%s.%s", L->m->arch, suffix);
	enum gguf_type et;
	uint64_t n = 0;
	float v = 0.0f;
	if (gguf_get_arr(L->g, key, &et, &n)) {
		const uint64_t want = (uint64_t)hp->n_layer + hp->n_layer_nextn;
		float *all = n == want ? malloc(n * sizeof *all) : NULL;
		bool ok = all && gguf_arr_copy_f32(L->g, key, all, n);
		if (ok)
			v = all[l];
		free(all);
		if (!ok)
			return bg_fail(L->err, BG_ERR_FORMAT, "%s is not a list of %llu numbers",
				       key, (unsigned long long)want);
	} else if (gguf_find_key(L->g, key) >= 0 && !gguf_get_f32(L->g, key, &v)) {
		return bg_fail(L->err, BG_ERR_FORMAT, "metadata key %s is not a number", key);
	}
	if (!isfinite(v))
		return bg_fail(L->err, BG_ERR_FORMAT, "%s: layer %u's clamp is not a number", key,
			       l);
	*out = v > 1e-6f ? v : 0.0f; /* llama.cpp: a clamp when limit > 1e-6 */
	return BG_OK;
}

/* qwen35moe, qwen3next (llama.cpp's create_tensor_gate_up_exps, newer converters):
 * ffn_gate_up_exps [n_embd, 2 n_ff_exp, n_expert], per expert its n_ff_exp gate rows then
 * its n_ff_exp up rows (build_moe_ffn's two views of one product), read in place: gate_exps
 * and up_exps are views into the mapping, at the tensor's start and n_ff_exp rows in, each
 * expert 2 n_ff_exp rows after the last (model_weight.nb2). A file with the separate
 * tensors too is refused (llama.cpp would not load them: a tensor count mismatch). */
static enum bg_status take_gate_up_exps(struct loader *L, uint32_t l, struct model_layer *ly)
{
	const struct model_hparams *hp = &L->m->hp;
	const uint64_t E = hp->n_embd, X = hp->n_expert, FX = hp->n_ff_exp;
	char n[64];
	for (int k = 0; k < 2; k++) {
		snprintf(n, sizeof n, "blk.%u.%s.weight", l, k ? "ffn_up_exps" : "ffn_gate_exps");
		if (gguf_find_tensor(L->g, n))
			return bg_fail(L->err, BG_ERR_FORMAT,
				       "blk.%u has both ffn_gate_up_exps and the separate '%s'", l,
				       n);
	}
	struct model_weight gu;
	snprintf(n, sizeof n, "blk.%u.ffn_gate_up_exps.weight", l);
	enum bg_status st = take3(L, n, E, 2 * FX, X, TK_MATRIX, &gu);
	if (st)
		return st;
	ly->gate_exps = row_view(&gu, 0, FX);
	ly->up_exps = row_view(&gu, FX, 2 * FX);
	ly->gate_exps.nb2 = ly->up_exps.nb2 = model_expert_stride(&gu);
	return BG_OK;
}

/* gemma4's MoE layer l (model.h's gemma4_moe), beyond take_experts: the dense GELU FFN (F
 * wide) it runs beside the experts, the router's input scale, the experts' input norm, the
 * two output norms, and the per-expert down scale when the file has it (llama.cpp's
 * optional ffn_down_exps.scale, the converter's per_expert_scale). */
static enum bg_status take_gemma4_moe(struct loader *L, uint32_t l, uint64_t F,
				      struct model_layer *ly)
{
	const struct model_hparams *hp = &L->m->hp;
	const uint64_t E = hp->n_embd;
	struct {
		const char *suffix;
		uint64_t ne0, ne1;
		enum take_kind kind;
		struct model_weight *w;
	} t[8] = {{"ffn_gate.weight", E, F, TK_MATRIX, &ly->w_gate},
		  {"ffn_up.weight", E, F, TK_MATRIX, &ly->w_up},
		  {"ffn_down.weight", F, E, TK_MATRIX, &ly->w_down},
		  {"ffn_gate_inp.scale", E, 0, TK_NORM, &ly->gate_inp_s},
		  {"pre_ffw_norm_2.weight", E, 0, TK_NORM, &ly->ffn_pre_norm_2},
		  {"post_ffw_norm_1.weight", E, 0, TK_NORM, &ly->ffn_post_norm_1},
		  {"post_ffw_norm_2.weight", E, 0, TK_NORM, &ly->ffn_post_norm_2},
		  {"ffn_down_exps.scale", hp->n_expert, 0, TK_NORM, &ly->down_exps_s}};
	char n[64];
	for (int i = 0; i < 8; i++) {
		snprintf(n, sizeof n, "blk.%u.%s", l, t[i].suffix);
		if (i == 7 && !gguf_find_tensor(L->g, n))
			break; /* optional: scale 1 */
		enum bg_status st = take(L, n, t[i].ne0, t[i].ne1, t[i].kind, t[i].w);
		if (st)
			return st;
	}
	return BG_OK;
}

/* Layer l's router and stacked experts (model.h). Mixtral files converted before the
 * experts were stacked (llama.cpp, early 2024) hold one tensor per expert
 * (blk.N.ffn_gate.E.weight): refused by name rather than as unknown tensors. */
static enum bg_status take_experts(struct loader *L, uint32_t l, struct model_layer *ly)
{
	const struct model_hparams *hp = &L->m->hp;
	uint64_t E = hp->n_embd, X = hp->n_expert, FX = hp->n_ff_exp;
	char n[64];
	snprintf(n, sizeof n, "blk.%u.ffn_gate.0.weight", l);
	if (gguf_find_tensor(L->g, n))
		return bg_fail(L->err, BG_ERR_UNSUPPORTED,
			       "tensor '%s': experts stored one tensor each (an old Mixtral "
			       "conversion) are not supported; convert the model again with a "
			       "current llama.cpp (stacked ffn_*_exps tensors)",
			       n);
	enum bg_status st;
	snprintf(n, sizeof n, "blk.%u.ffn_gate_inp.weight", l);
	if ((st = take3(L, n, E, X, 0, TK_MATRIX, &ly->ffn_gate_inp)))
		return st;
	snprintf(n, sizeof n, "blk.%u.ffn_gate_up_exps.weight", l);
	/* qwen35moe, qwen3next, gemma4, deepseek2: gate|up (llama.cpp's loaders for these
	 * accept it) */
	if ((hp->gdn_every || hp->gemma4_moe || hp->mla) && gguf_find_tensor(L->g, n)) {
		if ((st = take_gate_up_exps(L, l, ly)))
			return st;
	} else {
		snprintf(n, sizeof n, "blk.%u.ffn_gate_exps.weight", l);
		if (!hp->relu2 && (st = take3(L, n, E, FX, X, TK_MATRIX, &ly->gate_exps)))
			return st; /* (nemotron_h_moe: up and down alone) */
		snprintf(n, sizeof n, "blk.%u.ffn_up_exps.weight", l);
		if ((st = take3(L, n, E, FX, X, TK_MATRIX, &ly->up_exps)))
			return st;
	}
	snprintf(n, sizeof n, "blk.%u.ffn_down_exps.weight", l);
	if ((st = take3(L, n, FX, E, X, TK_MATRIX, &ly->down_exps)))
		return st;
	/* glm4moe, minimax-m2: the selection bias; deepseek2, bailingmoe2: when the file has it
	 * (V2: none) */
	snprintf(n, sizeof n, "blk.%u.exp_probs_b.bias", l);
	/* (moe_grouped: ernie4_5-moe too; step35, n_head_swa set: optional too) */
	if (hp->moe_sel_bias &&
	    (!(hp->mla || hp->moe_grouped || hp->n_head_swa) || gguf_find_tensor(L->g, n)) &&
	    (st = take(L, n, X, 0, TK_BIAS, &ly->exp_probs_b)))
		return st;
	if (hp->n_expert_shared) { /* glm4moe, deepseek2, granitehybrid: the shared expert */
		uint64_t FS = model_ff_shexp(hp);
		snprintf(n, sizeof n, "blk.%u.ffn_gate_shexp.weight", l);
		if (!hp->relu2 && (st = take(L, n, E, FS, TK_MATRIX, &ly->gate_shexp)))
			return st;
		snprintf(n, sizeof n, "blk.%u.ffn_up_shexp.weight", l);
		if ((st = take(L, n, E, FS, TK_MATRIX, &ly->up_shexp)))
			return st;
		snprintf(n, sizeof n, "blk.%u.ffn_down_shexp.weight", l);
		if ((st = take(L, n, FS, E, TK_MATRIX, &ly->down_shexp)))
			return st;
	}
	/* qwen35moe, qwen2moe: the shared expert's gate, one row of n_embd (the converter's
	 * [n_embd, 1]) */
	snprintf(n, sizeof n, "blk.%u.ffn_gate_inp_shexp.weight", l);
	if (hp->shexp_gate && (st = take(L, n, E, 0, TK_MATRIX, &ly->gate_inp_shexp)))
		return st;
	if (!hp->moe_bias)
		return BG_OK;
	/* gpt-oss: the router's bias, and each expert's biases as X rows of the file's 2-D
	 * tensor, presented stacked like the experts (ne0 each, ne1 1, ne2 X) */
	snprintf(n, sizeof n, "blk.%u.ffn_gate_inp.bias", l);
	if ((st = take(L, n, X, 0, TK_BIAS, &ly->ffn_gate_inp_b)))
		return st;
	static const char *const names[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
	struct model_weight *ws[3] = {&ly->gate_exps_b, &ly->up_exps_b, &ly->down_exps_b};
	for (int i = 0; i < 3; i++) {
		uint64_t width = i == 2 ? E : FX;
		snprintf(n, sizeof n, "blk.%u.%s.bias", l, names[i]);
		if ((st = take(L, n, width, X, TK_BIAS, ws[i])))
			return st;
		ws[i]->ne1 = 1;
		ws[i]->ne2 = X;
	}
	return BG_OK;
}

/* deepseek2: layer l's MLA weights (model.h), as llama.cpp's deepseek2 loader names and
 * shapes them */
static enum bg_status take_mla(struct loader *L, uint32_t l, struct model_layer *ly)
{
	const struct model_hparams *hp = &L->m->hp;
	const uint64_t E = hp->n_embd, H = hp->n_head, R = hp->rope_dim, C = hp->n_lora_kv;
	const uint64_t QH = (uint64_t)hp->mla_nope + R, QL = hp->n_lora_q;
	char n[64];
	enum bg_status st;
	snprintf(n, sizeof n, "blk.%u.attn_kv_b.weight", l);
	if (gguf_find_tensor(L->g, n))
		return bg_fail(
		    L->err, BG_ERR_UNSUPPORTED,
		    "tensor '%s': the unsplit attn_kv_b of older deepseek2 conversions is "
		    "not supported; convert the model again with a current llama.cpp "
		    "(attn_k_b and attn_v_b)",
		    n);
#define TAKE_MLA(suffix, ne0, ne1, ne2, kind, field)                                               \
	do {                                                                                       \
		snprintf(n, sizeof n, "blk.%u.%s", l, suffix);                                     \
		if ((st = take3(L, n, ne0, ne1, ne2, kind, &ly->field)))                           \
			return st;                                                                 \
	} while (0)
	if (QL) {
		TAKE_MLA("attn_q_a.weight", E, QL, 0, TK_MATRIX, wq_a);
		TAKE_MLA("attn_q_a_norm.weight", QL, 0, 0, TK_NORM, q_a_norm);
		TAKE_MLA("attn_q_b.weight", QL, H * QH, 0, TK_MATRIX, wq_b);
	} else {
		TAKE_MLA("attn_q.weight", E, H * QH, 0, TK_MATRIX, wq);
	}
	TAKE_MLA("attn_kv_a_mqa.weight", E, C + R, 0, TK_MATRIX, wkv_a);
	TAKE_MLA("attn_kv_a_norm.weight", C, 0, 0, TK_NORM, kv_a_norm);
	TAKE_MLA("attn_k_b.weight", hp->mla_nope, C, H, TK_MATRIX, wk_b);
	TAKE_MLA("attn_v_b.weight", C, hp->mla_v_head, H, TK_MATRIX, wv_b);
	TAKE_MLA("attn_output.weight", H * hp->mla_v_head, E, 0, TK_MATRIX, wo);
#undef TAKE_MLA
	return BG_OK;
}

void model_xielu_params(float alpha_n, float alpha_p, float beta, float eps, float out[4])
{
	/* ggml_xielu's op params: softplus as ggml_compute_softplus_f32, in fp32 */
	float sp_n = alpha_n > 20.0f ? alpha_n : logf(1.0f + expf(alpha_n));
	float sp_p = alpha_p > 20.0f ? alpha_p : logf(1.0f + expf(alpha_p));
	out[0] = beta + sp_n;
	out[1] = sp_p;
	out[2] = beta;
	out[3] = eps;
}

/* apertus: xielu.alpha_n, alpha_p, beta, eps (no arch prefix, as llama.cpp's keys are), each
 * one f32 for every layer or an array of n_layer (llama.cpp's get_key_or_arr), all
 * required; stored per layer as model_xielu_params makes them. */
static enum bg_status read_xielu(struct loader *L)
{
	static const char *const keys[4] = {"xielu.alpha_n", "xielu.alpha_p", "xielu.beta",
					    "xielu.eps"};
	uint32_t nl = L->m->hp.n_layer;
	float *v = malloc(4 * (size_t)nl * sizeof *v);
	if (!v)
		return bg_fail(L->err, BG_ERR_NOMEM, "out of memory");
	enum bg_status st = BG_OK;
	for (int k = 0; k < 4 && !st; k++) {
		float *dst = v + (size_t)k * nl;
		enum gguf_type et;
		uint64_t n = 0;
		if (gguf_find_key(L->g, keys[k]) < 0)
			st = bg_fail(L->err, BG_ERR_FORMAT,
				     "metadata key %s is missing (an apertus model's xIELU)",
				     keys[k]);
		else if (gguf_get_arr(L->g, keys[k], &et, &n)) {
			if (n != nl || !gguf_arr_copy_f32(L->g, keys[k], dst, n))
				st = bg_fail(L->err, BG_ERR_FORMAT,
					     "metadata key %s is not a list of %u numbers", keys[k],
					     nl);
		} else if (gguf_get_f32(L->g, keys[k], dst)) {
			for (uint32_t l = 1; l < nl; l++)
				dst[l] = dst[0];
		} else {
			st = bg_fail(L->err, BG_ERR_FORMAT, "metadata key %s is not a number",
				     keys[k]);
		}
		for (uint32_t l = 0; l < nl && !st; l++)
			if (!isfinite(dst[l]))
				st = bg_fail(L->err, BG_ERR_FORMAT,
					     "metadata key %s has a value that is not a finite "
					     "number (layer %u)",
					     keys[k], l);
	}
	for (uint32_t l = 0; l < nl && !st; l++)
		model_xielu_params(v[l], v[nl + l], v[2 * (size_t)nl + l], v[3 * (size_t)nl + l],
				   L->m->layers[l].xielu);
	free(v);
	return st;
}

/* falcon-h1 (model.h's ssm_parallel): layer l's Mamba2 weights beside its attention, as
 * llama.cpp's loader shapes them, the conv bias and the grouped norm optional (per layer),
 * the output projection in ssm_out; and the attention's O bias, which llama.cpp loads but
 * does not add (build_attn gets NULL), taken unused. */
static enum bg_status take_falcon_ssm(struct loader *L, uint32_t l, struct model_layer *ly)
{
	const struct model_hparams *hp = &L->m->hp;
	const uint64_t E = hp->n_embd, D = hp->ssm_d_inner, H = hp->ssm_n_head,
		       GN = (uint64_t)hp->ssm_n_group * hp->ssm_d_state;
	struct {
		const char *suffix;
		uint64_t ne0, ne1;
		enum take_kind kind;
		struct model_weight *w;
		bool optional;
	} t[9] = {
	    {"ssm_in.weight", E, 2 * D + 2 * GN + H, TK_MATRIX, &ly->ssm_in, false},
	    {"ssm_conv1d.weight", hp->ssm_d_conv, D + 2 * GN, TK_CONV, &ly->ssm_conv_w, false},
	    {"ssm_conv1d.bias", D + 2 * GN, 0, TK_BIAS, &ly->ssm_conv_b, true},
	    {"ssm_dt.bias", H, 0, TK_BIAS, &ly->ssm_dt_b, false},
	    {"ssm_a", 1, H, TK_NORM, &ly->ssm_a, false},
	    {"ssm_d", 1, H, TK_NORM, &ly->ssm_d, false},
	    {"ssm_norm.weight", D / hp->ssm_n_group, hp->ssm_n_group, TK_NORM, &ly->ssm_norm, true},
	    {"ssm_out.weight", D, E, TK_MATRIX, &ly->ssm_out, false},
	    {"attn_output.bias", E, 0, TK_BIAS, NULL, true},
	};
	for (int i = 0; i < 9; i++) {
		char n[64];
		struct model_weight unused;
		snprintf(n, sizeof n, "blk.%u.%s", l, t[i].suffix);
		if (t[i].optional && !gguf_find_tensor(L->g, n))
			continue;
		enum bg_status st =
		    take(L, n, t[i].ne0, t[i].ne1, t[i].kind, t[i].w ? t[i].w : &unused);
		if (st)
			return st;
	}
	return BG_OK;
}

/* gemma4: the per-layer token embeddings' model-wide tensors (hp.n_embd_per_layer > 0). */
static enum bg_status take_per_layer_embd(struct loader *L)
{
	struct model *m = L->m;
	const struct model_hparams *hp = &m->hp;
	uint64_t P = hp->n_embd_per_layer, NL = (uint64_t)hp->n_layer * P;
	enum bg_status st;
	if ((st = take(L, "per_layer_token_embd.weight", NL, hp->n_vocab, TK_MATRIX,
		       &m->pl_tok_embd)) ||
	    (st = take(L, "per_layer_model_proj.weight", hp->n_embd, NL, TK_MATRIX,
		       &m->pl_model_proj)) ||
	    (st = take(L, "per_layer_proj_norm.weight", P, 0, TK_NORM, &m->pl_proj_norm)))
		return st;
	return BG_OK;
}

static enum bg_status load_tensors(struct loader *L)
{
	struct model *m = L->m;
	const struct model_hparams *hp = &m->hp;
	uint64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff, HD = hp->head_dim;
	uint64_t Q = (uint64_t)hp->n_head * hp->head_dim;
	uint64_t KV = (uint64_t)hp->n_head_kv * hp->head_dim;
	const struct arch_info *ai = arch_find(m->arch);
	enum bg_status st;
	if ((st = load_rope_factors(L)))
		return st;
	if (hp->xielu && (st = read_xielu(L)))
		return st;
	/* lfm2: the output norm under llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2 name */
	if ((st = take(L, "token_embd.weight", E, V, TK_MATRIX, &m->tok_embd)) ||
	    (st = take(L, ai && ai->shortconv ? "token_embd_norm.weight" : "output_norm.weight", E,
		       0, TK_NORM, &m->output_norm)))
		return st;
	if (hp->n_embd_per_layer && (st = take_per_layer_embd(L)))
		return st;
	if (!(ai && ai->cohere) && /* cohere: never loaded (an unused tensor: refused) */
	    gguf_find_tensor(L->g, "output.weight")) {
		if ((st = take(L, "output.weight", E, V, TK_MATRIX, &m->output)))
			return st;
	} else {
		m->output = m->tok_embd; /* tied: counted once */
	}
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		struct model_layer *ly = &m->layers[l];
		char n[64];
#define TAKE(suffix, ne0, ne1, kind, field)                                                        \
	do {                                                                                       \
		snprintf(n, sizeof n, "blk.%u.%s", l, suffix);                                     \
		if ((st = take(L, n, ne0, ne1, kind, &ly->field)))                                 \
			return st;                                                                 \
	} while (0)
		/* the layer's geometry: gemma4's windowed layers have their own (model.h), and
		 * its FFN may be wider than others (a per-layer feed_forward_length) */
		ly->swa = model_layer_is_swa(hp, l);
		F = ai && (ai->gemma4 || ai->nemotron_h) && layer_n_ff(L->g, m->arch, 0, 0)
			? layer_n_ff(L->g, m->arch, hp->n_layer, l)
			: hp->n_ff;
		/* nemotron_h: an FFN alone, or a Mamba2 / attention block alone (arch.h) */
		ly->ffn_only = ai && ai->nemotron_h && F > 0;
		ly->no_ffn = ai && ai->nemotron_h && F == 0;
		HD = model_head_dim(hp, ly->swa);
		Q = (uint64_t)model_n_head(hp, ly->swa) * HD; /* step35: per layer kind */
		KV = (uint64_t)model_n_head_kv(hp, ly->swa) * HD;
		if (!hp->no_pre_norms)
			TAKE("attn_norm.weight", E, 0, TK_NORM, attn_norm);
		ly->conv = hp->conv_l && lfm2_layer_kv(L->g, m->arch, hp->n_layer, l) == 0;
		ly->gdn = qwen35_layer_gdn(hp, l);
		if (ly->ffn_only) {
			ly->kv_src = l; /* nemotron_h: no attention, its FFN below */
		} else if (ly->gdn) { /* qwen35's gated delta net (model.h) */
			const uint64_t KD = (uint64_t)hp->gdn_nk * hp->gdn_d;
			const uint64_t VD = (uint64_t)hp->gdn_nv * hp->gdn_d;
			ly->kv_src = l;
			if (hp->gdn_k_grouped) { /* qwen3next's fused layouts (arch.c) */
				if ((st = take_qwen3next_in(L, l, ly)))
					return st;
			} else {
				TAKE("attn_qkv.weight", E, 2 * KD + VD, TK_MATRIX, gdn_qkv);
				TAKE("attn_gate.weight", E, VD, TK_MATRIX, gdn_z);
				TAKE("ssm_beta.weight", E, hp->gdn_nv, TK_MATRIX, gdn_beta);
				TAKE("ssm_alpha.weight", E, hp->gdn_nv, TK_MATRIX, gdn_alpha);
			}
			TAKE("ssm_conv1d.weight", hp->gdn_conv, 2 * KD + VD, TK_CONV, conv_w);
			TAKE("ssm_dt.bias", hp->gdn_nv, 0, TK_NORM, gdn_dt);
			TAKE("ssm_a", hp->gdn_nv, 0, TK_NORM, gdn_a);
			TAKE("ssm_norm.weight", hp->gdn_d, 0, TK_NORM, gdn_norm);
			TAKE("ssm_out.weight", VD, E, TK_MATRIX, wo);
		} else if (ly->conv) { /* lfm2's short-conv block (model.h); its cache row is bx */
			ly->kv_src = l;
			TAKE("shortconv.in_proj.weight", E, 3 * E, TK_MATRIX, conv_in);
			TAKE("shortconv.conv.weight", hp->conv_l, E, TK_CONV, conv_w);
			TAKE("shortconv.out_proj.weight", E, E, TK_MATRIX, wo);
		} else if ((ly->ssm = hp->ssm_d_conv && !hp->ssm_parallel &&
				      lfm2_layer_kv(L->g, m->arch, hp->n_layer, l) == 0)) {
			/* (nemotron_h: an FFN layer's entry is 0 too; taken above) */
			/* granitehybrid's Mamba2 block (model.h) */
			const uint64_t D = hp->ssm_d_inner, H = hp->ssm_n_head,
				       GN = (uint64_t)hp->ssm_n_group * hp->ssm_d_state;
			ly->kv_src = l;
			TAKE("ssm_in.weight", E, 2 * D + 2 * GN + H, TK_MATRIX, ssm_in);
			TAKE("ssm_conv1d.weight", hp->ssm_d_conv, D + 2 * GN, TK_CONV, ssm_conv_w);
			TAKE("ssm_conv1d.bias", D + 2 * GN, 0, TK_BIAS, ssm_conv_b);
			TAKE("ssm_dt.bias", H, 0, TK_BIAS, ssm_dt_b);
			TAKE("ssm_a", 1, H, TK_NORM, ssm_a);
			TAKE("ssm_d", 1, H, TK_NORM, ssm_d);
			TAKE("ssm_norm.weight", D / hp->ssm_n_group, hp->ssm_n_group, TK_NORM,
			     ssm_norm);
			TAKE("ssm_out.weight", D, E, TK_MATRIX, wo);
		} else if (hp->mla) { /* deepseek2's latent attention */
			if ((st = take_mla(L, l, ly)))
				return st;
		} else {
			/* gemma4's shared-KV layers: no K/V of their own (K/V tensors the file has
			 * anyway are taken unused, as llama.cpp loads them) */
			bool own_kv = l < hp->n_layer_kv;
			ly->kv_src = own_kv ? l : hp->n_layer_kv - (ly->swa ? 2 : 1);
			if (!own_kv) {
				TAKE("attn_q.weight", E, Q, TK_MATRIX, wq);
				static const char *const kv_names[3] = {
				    "attn_k.weight", "attn_v.weight", "attn_k_norm.weight"};
				for (int i = 0; i < 3; i++) {
					struct model_weight unused;
					snprintf(n, sizeof n, "blk.%u.%s", l, kv_names[i]);
					if (gguf_find_tensor(L->g, n) &&
					    (st = take(L, n, i < 2 ? E : HD, i < 2 ? KV : 0,
						       i < 2 ? TK_MATRIX : TK_NORM, &unused)))
						return st;
				}
			}
			snprintf(n, sizeof n, "blk.%u.attn_qkv.weight", l);
			if (!own_kv) {
			} else if (gguf_find_tensor(
				       L->g, n)) { /* fused Q|K|V rows, as llama.cpp accepts */
				struct model_weight qkv;
				const uint64_t QW = hp->attn_out_gate ? 2 * Q : Q; /* qwen35 */
				if ((st = take(L, n, E, QW + 2 * KV, TK_MATRIX, &qkv)))
					return st;
				ly->wq = row_view(&qkv, 0, QW);
				ly->wk = row_view(&qkv, QW, QW + KV);
				ly->wv = row_view(&qkv, QW + KV, QW + 2 * KV);
			} else {
				/* qwen35: [q | gate] per head */
				TAKE("attn_q.weight", E, hp->attn_out_gate ? 2 * Q : Q, TK_MATRIX,
				     wq);
				TAKE("attn_k.weight", E, KV, TK_MATRIX, wk);
				snprintf(n, sizeof n, "blk.%u.attn_v.weight", l);
				if (ai && ai->gemma4 && !gguf_find_tensor(L->g, n)) {
					ly->wv =
					    ly->wk; /* llama.cpp: Vcur = Kcur (K's projection) */
					ly->v_from_k = true;
				} else {
					TAKE("attn_v.weight", E, KV, TK_MATRIX, wv);
				}
			}
			if (hp->qkv_bias) {
				TAKE("attn_q.bias", Q, 0, TK_BIAS, bq);
				TAKE("attn_k.bias", KV, 0, TK_BIAS, bk);
				TAKE("attn_v.bias", KV, 0, TK_BIAS, bv);
			}
			if (hp->qk_norm) { /* per head, or the whole rows (olmo2), or a row per
					    * head (Command R+) */
				uint64_t hq = hp->qk_norm_heads ? hp->n_head : 0;
				uint64_t hk = hp->qk_norm_heads ? model_n_head_kv(hp, ly->swa) : 0;
				TAKE("attn_q_norm.weight", hp->qk_norm_full ? Q : HD, hq, TK_NORM,
				     q_norm);
				if (own_kv)
					TAKE("attn_k_norm.weight", hp->qk_norm_full ? KV : HD, hk,
					     TK_NORM, k_norm);
			}
			TAKE("attn_output.weight", Q, E, TK_MATRIX, wo);
			if (hp->ssm_parallel && (st = take_falcon_ssm(L, l, ly)))
				return st; /* falcon-h1: the Mamba2 block beside */
			snprintf(n, sizeof n, "blk.%u.attn_gate.weight", l);
			if (ai && ai->step35 && gguf_find_tensor(L->g, n)) /* optional per layer */
				TAKE("attn_gate.weight", E, Q / HD, TK_MATRIX, attn_gate);
		}
		if (hp->attn_out_bias)
			TAKE("attn_output.bias", E, 0, TK_BIAS, bo);
		if (hp->attn_sinks)
			TAKE("attn_sinks.weight", hp->n_head, 0, TK_SINKS, attn_sinks);
		if (hp->post_norms)
			TAKE("post_attention_norm.weight", E, 0, TK_NORM, attn_post_norm);
		if (ai && ai->ffn_norm_post_name) /* gpt-oss, seed_oss: the FFN's input norm has
						   * the post-attention name */
			TAKE("post_attention_norm.weight", E, 0, TK_NORM, ffn_norm);
		else if (hp->ssm_parallel) /* falcon-h1: the converter's name, no suffix */
			TAKE("ffn_norm", E, 0, TK_NORM, ffn_norm);
		else if (!hp->no_pre_norms && !hp->parallel && !(ai && ai->nemotron_h))
			TAKE("ffn_norm.weight", E, 0, TK_NORM, ffn_norm);
		/* glm4moe: the leading layers dense; step35: any layer without a router
		 * (read_step35 checked that it has no experts either) */
		bool moe_l = hp->n_expert && l >= hp->n_layer_dense_lead;
		if (hp->n_moe_step > 1 && (l + 1) % hp->n_moe_step != 0) /* ernie4_5-moe, llama4 */
			moe_l = false;
		if (moe_l && ai && (ai->step35 || ai->gemma4)) { /* gemma4: dense layers too */
			snprintf(n, sizeof n, "blk.%u.ffn_gate_inp.weight", l);
			moe_l = gguf_find_tensor(L->g, n) != NULL;
		}
		if (ai && ai->step35) { /* its clamps */
			if ((st = step35_clamp(L, "swiglu_clamp_exp", l, &ly->clamp_exp)) ||
			    (st = step35_clamp(L, "swiglu_clamp_shexp", l, &ly->clamp_shexp)))
				return st;
		}
		if (ly->no_ffn) {
			/* nemotron_h: none */
		} else if (moe_l) {
			if ((st = take_experts(L, l, ly)) ||
			    (hp->gemma4_moe && (st = take_gemma4_moe(L, l, F, ly))))
				return st;
		} else if (ai && ai->fused_up) { /* phi3: gate rows then up rows (ggml_swiglu's halves) */
			struct model_weight gu;
			snprintf(n, sizeof n, "blk.%u.ffn_up.weight", l);
			if ((st = take(L, n, E, 2 * F, TK_MATRIX, &gu)))
				return st;
			ly->w_gate = row_view(&gu, 0, F);
			ly->w_up = row_view(&gu, F, 2 * F);
		} else {
			if (!hp->xielu && !hp->relu2) /* apertus, nemotron_h, arcee: no gate */
				TAKE("ffn_gate.weight", E, F, TK_MATRIX, w_gate);
			TAKE("ffn_up.weight", E, F, TK_MATRIX, w_up);
		}
		if (!moe_l && !ly->no_ffn)
			TAKE("ffn_down.weight", F, E, TK_MATRIX, w_down);
		if (hp->post_norms)
			TAKE("post_ffw_norm.weight", E, 0, TK_NORM, ffn_post_norm);
		if (hp->n_embd_per_layer) { /* gemma4 E2B/E4B: the per-layer input's weights */
			TAKE("inp_gate.weight", E, hp->n_embd_per_layer, TK_MATRIX, pl_inp_gate);
			TAKE("proj.weight", hp->n_embd_per_layer, E, TK_MATRIX, pl_proj);
			TAKE("post_norm.weight", E, 0, TK_NORM, pl_post_norm);
		}
		ly->out_scale = 1.0f;
		if (hp->out_scale) { /* gemma4: one f32 scalar (blk.0 decides, then every layer) */
			struct model_weight os;
			snprintf(n, sizeof n, "blk.%u.layer_output_scale.weight", l);
			if ((st = take(L, n, 1, 0, TK_NORM, &os)))
				return st;
			memcpy(&ly->out_scale, os.data, sizeof(float));
			if (!(isfinite(ly->out_scale)))
				return bg_fail(L->err, BG_ERR_FORMAT, "tensor '%s' is not a number", n);
		}
		ly->no_rope = (ai && ai->no_rope_step && (l + 1) % ai->no_rope_step == 0) ||
			      (ai && ai->swa_rope_only && hp->n_swa && !ly->swa) ||
			      hp->rope_none; /* (exaone4 without windows: every layer rotates) */
#undef TAKE
	}
	return BG_OK;
}

/* Whether a tensor belongs to a NextN layer (blk.N.* with n_layer <= N < n_layer +
 * n_layer_nextn: glm4's skipped layers, arch.h). */
static bool nextn_tensor(const struct model_hparams *hp, struct gguf_str name)
{
	if (!hp->n_layer_nextn || name.len < 6 || memcmp(name.ptr, "blk.", 4) != 0)
		return false;
	uint64_t n = 0, i = 4;
	while (i < name.len && i < 14 && name.ptr[i] >= '0' && name.ptr[i] <= '9')
		n = n * 10 + (uint64_t)(name.ptr[i++] - '0');
	return i > 4 && i < name.len && name.ptr[i] == '.' && n >= hp->n_layer &&
	       n < (uint64_t)hp->n_layer + hp->n_layer_nextn;
}

enum bg_status model_from_gguf(struct gguf_ctx *g, struct model **out, struct bg_err *err)
{
	*out = NULL;
	if (gguf_n_tensors(g) == 0) {
		gguf_close(g);
		return bg_fail(err, BG_ERR_FORMAT,
			       "the file has no tensors (a vocab-only file?), so it is not a "
			       "model");
	}
	struct model *m = calloc(1, sizeof *m);
	if (!m) {
		gguf_close(g);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	m->gguf = g;
	enum bg_status st = model_read_hparams(g, &m->hp, m->arch, err);
	if (st) {
		model_free(m);
		return st;
	}
	struct gguf_str nm;
	if (gguf_get_str(g, "general.name", &nm)) {
		size_t k = nm.len < sizeof m->name - 1 ? (size_t)nm.len : sizeof m->name - 1;
		memcpy(m->name, nm.ptr, k);
		m->name[k] = '\0';
		for (size_t i = 0; i < k; i++)
			if ((unsigned char)m->name[i] < 0x20)
				m->name[i] = ' ';
	}
	m->layers = calloc(m->hp.n_layer, sizeof *m->layers);
	if (!m->layers) {
		uint32_t n_layer = m->hp.n_layer;
		model_free(m);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for %u layers", n_layer);
	}
	struct loader L = {g, m, err, calloc(gguf_n_tensors(g), sizeof(bool))};
	if (!L.used) {
		model_free(m);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	st = load_tensors(&L);
	/* A tensor the model does not use means a variant we would silently compute wrong
	 * (biases, experts, ...): refuse it, as llama.cpp does ("wrong number of tensors"). */
	for (uint64_t i = 0; !st && i < gguf_n_tensors(g); i++) {
		if (L.used[i] || nextn_tensor(&m->hp, gguf_tensor(g, i)->name))
			continue;
		char name[100];
		st = bg_fail(err, BG_ERR_UNSUPPORTED,
			     "tensor '%s' is not part of a %s model (an unsupported variant?)",
			     clean(name, sizeof name, gguf_tensor(g, i)->name), m->arch);
	}
	free(L.used);
	if (st) {
		model_free(m);
		return st;
	}
	*out = m;
	return BG_OK;
}

enum bg_status model_load(const char *path, struct model **out, struct bg_err *err)
{
	*out = NULL;
	struct gguf_ctx *g = NULL;
	enum bg_status st = gguf_open(path, &g, err); /* its message names the path */
	if (st)
		return st;
	struct bg_err e = {0};
	st = model_from_gguf(g, out, &e);
	if (st)
		return bg_fail(err, st, "%s: %s", path, e.msg);
	if (!(*out)->name[0]) {
		const char *base = strrchr(path, '/');
		snprintf((*out)->name, sizeof(*out)->name, "%s", base ? base + 1 : path);
	}
	return BG_OK;
}

/* ---- built-in and synthetic models ---- */

static enum bg_status from_buffer(void *buf, size_t len, const char *name, struct model **out,
				  struct bg_err *err)
{
	struct gguf_ctx *g = NULL;
	enum bg_status st = gguf_parse(buf, len, true, &g, err);
	if (st)
		return st;
	st = model_from_gguf(g, out, err);
	if (st)
		return st;
	snprintf((*out)->name, sizeof(*out)->name, "%s", name);
	return BG_OK;
}

/* A model whose weights are described but absent (data == NULL): a backend that supports
 * it generates them from synth_seed. */
static enum bg_status lazy_model(const struct synth_opts *o, struct model **out, struct bg_err *err)
{
	const struct synth_shape *s = &o->shape;
	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	m->layers = calloc(s->n_layer, sizeof *m->layers);
	if (!m->layers) {
		free(m);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	snprintf(m->arch, sizeof m->arch, "%s", synth_arch(s));
	snprintf(m->name, sizeof m->name, "synthetic:%s", s->name);
	const struct arch_info *ai = arch_find(m->arch);
	BG_ASSERT(ai); /* synth_check accepted the shape */
	struct model_hparams *hp = &m->hp;
	hp->n_vocab = synth_n_vocab(o);
	hp->n_ctx_train = s->n_ctx;
	hp->n_embd = s->n_embd;
	hp->n_layer = s->n_layer;
	hp->n_head = s->n_head;
	hp->n_head_kv = s->n_head_kv;
	hp->head_dim = synth_head_dim(s);
	hp->n_ff = s->n_ff;
	hp->rope_dim = s->rope_dim ? s->rope_dim : hp->head_dim; /* glm4's partial rotary */
	hp->n_layer_nextn = s->n_nextn; /* described, never built (as a file's: skipped) */
	hp->rope_base = s->rope_base;
	hp->rms_eps = s->rms_eps;
	if (ai->mrope) { /* the sections synth writes */
		hp->rope_mrope = ai->mrope;
		synth_rope_sections(s, hp->rope_sections);
	}
	/* the keys synth would write, from the arch's defaults (no file: g NULL) */
	hp->rope_freq_scale = hp->rope_freq_scale_swa = 1.0f;
	hp->rope_attn_factor = hp->rope_attn_factor_swa = 1.0f;
	hp->n_ctx_orig = hp->n_ctx_train;
	hp->rope_base_swa = hp->rope_base;
	struct synth_shape sw = *s;
	enum bg_status st = read_features(NULL, m->arch, ai, hp, err);
	hp->n_swa_file = sw.n_swa;
	if (!st && ai->swa_pattern && !ai->swa_read_only && sw.n_swa &&
	    (!ai->exaone4 || hp->n_layer == 64)) {
		hp->n_swa = sw.n_swa;
		hp->swa_pattern = sw.swa_all ? 0 : ai->swa_pattern;
		if (ai->swa_rope_own)
			hp->rope_base_swa = 10000.0f;
	}
	if (!st && ai->granite) { /* read_features' values for the keys synth writes */
		if (s->embd_scale != 0.0f)
			hp->embd_scale = s->embd_scale;
		if (s->attn_scale != 0.0f)
			hp->attn_scale = s->attn_scale;
		if (s->residual_scale != 0.0f)
			hp->residual_scale = s->residual_scale;
		if (s->logit_scale != 0.0f)
			hp->logit_scale = 1.0f / s->logit_scale;
	}
	if (!st && ai->cohere && s->logit_scale != 0.0f) /* command-r, cohere2: multiplies */
		hp->logit_scale = s->logit_scale;
	if (!st && s->rope_scaling) { /* read_rope_scaling's values for the keys synth writes */
		hp->rope_freq_scale = 1.0f / s->rope_factor;
		if (!(hp->n_swa && (ai->swa_rope_own || ai->swa_rope_plain)))
			hp->rope_freq_scale_swa = hp->rope_freq_scale;
		hp->rope_yarn = strcmp(s->rope_scaling, "yarn") == 0;
	}
	if (!st && s->n_ctx_orig) /* synth writes the key whenever it is set (rope_freqs too) */
		hp->n_ctx_orig = s->n_ctx_orig;
	if (!st && s->rope_attn_factor > 0.0f && strcmp(m->arch, "phi3") != 0) {
		hp->rope_attn_factor = s->rope_attn_factor; /* synth writes the key */
		if (!(hp->n_swa && ai->swa_rope_plain))
			hp->rope_attn_factor_swa = s->rope_attn_factor;
	}
	if (!st && ai->opt_bias) /* the biases synth writes for such a shape */
		hp->qkv_bias = hp->attn_out_bias = s->biases;
	if (!st && ai->opt_qkv_bias) /* seed_oss: Q/K/V only */
		hp->qkv_bias = s->biases;
	if (!st && ai->mistral3) { /* read_features' values once the scaling is known */
		hp->attn_temp_scale = s->attn_temp_scale;
		mistral3_derive(hp);
	}
	hp->n_layer_kv = hp->n_layer;
	if (!st && (s->n_embd_per_layer || s->shared_kv_layers || ai->shortconv || ai->gdn ||
		    ai->mamba2 || ai->shexp_gate || ai->step35 || ai->llama4 || ai->ernie_moe ||
		    ai->hunyuan_moe || ai->falcon_h1))
		st = bg_fail(err, BG_ERR_UNSUPPORTED,
			     "synthetic:%s: per-layer embeddings, shared-KV layers, lfm2's conv "
			     "layers, gated shared experts, qwen35's delta-net and Mamba2 layers "
			     "are made as files only, not lazily (step35, llama4, ernie4_5-moe, "
			     "falcon-h1, hunyuan-moe too)",
			     s->name);
	if (!st && ai->gemma4 && s->n_expert)
		st = bg_fail(err, BG_ERR_UNSUPPORTED,
			     "synthetic:%s: gemma4 with experts is made as a file only, not lazily",
			     s->name);
	if (!st && ai->gemma4) { /* read_gemma4's values for the keys synth writes */
		st = read_gemma4(NULL, m->arch, hp, err);
		hp->head_dim_swa = hp->rope_dim_swa = s->head_dim_swa ? s->head_dim_swa : hp->head_dim;
		hp->n_head_kv_swa = s->n_head_kv_swa ? s->n_head_kv_swa : hp->n_head_kv;
		hp->out_scale = s->out_scale;
		hp->final_softcap = s->final_softcap;
		if (sw.n_swa && s->rope_base_swa > 0.0f)
			hp->rope_base_swa = s->rope_base_swa;
		if (sw.n_swa && s->swa_period)
			hp->swa_pattern = s->swa_period;
	}
	if (!st && s->n_expert) { /* what read_experts reads from the keys synth writes */
		hp->n_expert = s->n_expert;
		hp->n_expert_used = s->n_expert_used;
		hp->n_ff_exp = synth_n_ff_exp(s);
		hp->expert_weights_norm = !ai->moe_raw_weights; /* olmoe: false */
		hp->expert_weights_scale = 1.0f;
	}
	if (!st && ai->glm4moe) { /* read_glm4moe_experts' values for synth's keys */
		hp->n_expert_shared = s->n_expert_shared;
		hp->n_layer_dense_lead = s->n_dense_lead;
		hp->expert_gating_sigmoid = hp->moe_sel_bias = true;
		if (s->expert_scale != 0.0f)
			hp->expert_weights_scale = s->expert_scale;
		hp->qk_norm = !s->no_qk_norm;
	}
	if (!st && ai->moe_sigmoid_sel) /* read_minimax_experts' values */
		hp->expert_gating_sigmoid = hp->moe_sel_bias = true;
	if (!st && ai->mla) { /* read_deepseek2's values for the keys synth writes */
		hp->mla = true;
		hp->n_lora_q = s->q_lora;
		hp->n_lora_kv = s->kv_lora;
		hp->mla_nope = s->mla_nope;
		hp->mla_v_head = s->mla_v_head;
		if (s->rope_scaling && s->mscale_all_dim > 0.0f)
			hp->rope_yarn_log_mul = 0.1f * s->mscale_all_dim / 0.1f;
		hp->attn_scale = arch_mla_kq_scale(hp);
		if (s->n_expert) {
			hp->n_expert_shared = s->n_expert_shared;
			hp->n_layer_dense_lead = s->n_dense_lead;
			hp->expert_gating_sigmoid = hp->moe_sel_bias = !s->softmax_gating;
			hp->expert_weights_norm = !s->softmax_gating;
			if (s->expert_scale != 0.0f)
				hp->expert_weights_scale = s->expert_scale;
			if (s->n_group > 1) {
				hp->n_expert_groups = s->n_group;
				hp->n_group_used = s->n_group_used;
			}
			hp->moe_grouped = true;
		}
	}
	if (!st && ai->bailingmoe && s->n_expert) { /* read_bailingmoe_experts' values */
		hp->n_expert_shared = s->n_expert_shared;
		hp->expert_weights_norm = hp->moe_grouped = true;
		if (s->expert_scale != 0.0f)
			hp->expert_weights_scale = s->expert_scale;
	}
	if (!st && (ai->bailing || ai->dots1 || ai->exaone_moe) && s->n_expert) {
		/* read_bailing_experts' values */
		hp->n_expert_shared = ai->exaone_moe ? 1 : s->n_expert_shared;
		hp->n_ff_shexp = ai->exaone_moe ? s->n_ff_shexp : 0;
		hp->n_layer_dense_lead = s->n_dense_lead;
		hp->expert_gating_sigmoid = hp->moe_sel_bias = hp->expert_weights_norm = true;
		if (s->expert_scale != 0.0f)
			hp->expert_weights_scale = s->expert_scale;
		hp->n_expert_groups = s->n_group > 1 ? s->n_group : 0;
		hp->n_group_used = s->n_group > 1 ? s->n_group_used : 0;
		hp->moe_grouped = true;
	}
	if (st) {
		model_free(m);
		return st;
	}
	uint64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
	uint64_t X = hp->n_expert, FX = hp->n_ff_exp;
	uint64_t Q = (uint64_t)hp->n_head * hp->head_dim;
	uint64_t KV = (uint64_t)hp->n_head_kv * hp->head_dim;
#define W(field, t, a, b)                                                                          \
	do {                                                                                       \
		(field) = (struct model_weight){(t), NULL, (a), (b), 0, 0};                        \
		m->n_params += (uint64_t)(a) * (b);                                                \
		m->weight_bytes += gguf_row_bytes((t), (a)) * (b);                                 \
	} while (0)
#define W3(field, t, a, b, n)                                                                      \
	do {                                                                                       \
		W(field, t, a, (b) * (n));                                                         \
		(field).ne1 = (b);                                                                 \
		(field).ne2 = (n);                                                                 \
	} while (0)
	W(m->tok_embd, o->dtype, E, V);
	W(m->output_norm, GGUF_DTYPE_F32, E, 1);
	if (o->tie_output)
		m->output = m->tok_embd;
	else
		W(m->output, o->dtype, E, V);
	if (s->rope_partial > 0.0f) /* gemma4's rope_freqs (synth's FILL_VALUES) */
		W(m->rope_factors, GGUF_DTYPE_F32, hp->head_dim / 2, 1);
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		struct model_layer *ly = &m->layers[l];
		ly->swa = model_layer_is_swa(hp, l);
		ly->kv_src = l;
		uint64_t HD = model_head_dim(hp, ly->swa);
		Q = (uint64_t)hp->n_head * HD;
		KV = (uint64_t)model_n_head_kv(hp, ly->swa) * HD;
		if (!hp->no_pre_norms)
			W(ly->attn_norm, GGUF_DTYPE_F32, E, 1);
		if (hp->mla) { /* deepseek2: take_mla's weights */
			const uint64_t H = hp->n_head, QH = (uint64_t)hp->mla_nope + hp->rope_dim;
			const uint64_t C = hp->n_lora_kv, QL = hp->n_lora_q;
			if (QL) {
				W(ly->wq_a, o->dtype, E, QL);
				W(ly->q_a_norm, GGUF_DTYPE_F32, QL, 1);
				W(ly->wq_b, o->dtype, QL, H * QH);
			} else {
				W(ly->wq, o->dtype, E, H * QH);
			}
			W(ly->wkv_a, o->dtype, E, C + hp->rope_dim);
			W(ly->kv_a_norm, GGUF_DTYPE_F32, C, 1);
			W3(ly->wk_b, o->dtype, hp->mla_nope, C, H);
			W3(ly->wv_b, o->dtype, C, hp->mla_v_head, H);
			Q = H * hp->mla_v_head; /* wo's input */
		} else {
			W(ly->wq, o->dtype, E, Q);
			W(ly->wk, o->dtype, E, KV);
			if (s->k_eq_v &&
			    !ly->swa) { /* gemma4's global layers: V = K's projection */
				ly->wv = ly->wk;
				ly->v_from_k = true;
			} else {
				W(ly->wv, o->dtype, E, KV);
			}
		}
		if (hp->qkv_bias) { /* f32 vectors, data NULL like every lazy weight */
			W(ly->bq, GGUF_DTYPE_F32, Q, 1);
			W(ly->bk, GGUF_DTYPE_F32, KV, 1);
			W(ly->bv, GGUF_DTYPE_F32, KV, 1);
		}
		if (hp->qk_norm) {
			W(ly->q_norm, GGUF_DTYPE_F32, hp->qk_norm_full ? Q : HD,
			  hp->qk_norm_heads ? hp->n_head : 1);
			W(ly->k_norm, GGUF_DTYPE_F32, hp->qk_norm_full ? KV : HD,
			  hp->qk_norm_heads ? hp->n_head_kv : 1);
		}
		W(ly->wo, o->dtype, Q, E);
		if (hp->attn_out_bias)
			W(ly->bo, GGUF_DTYPE_F32, E, 1);
		if (hp->attn_sinks)
			W(ly->attn_sinks, GGUF_DTYPE_F32, hp->n_head, 1);
		if (!hp->no_pre_norms && !hp->parallel)
			W(ly->ffn_norm, GGUF_DTYPE_F32, E, 1);
		if (X && l >= hp->n_layer_dense_lead) { /* the router f32 as synth writes it;
							  * experts stacked (ne2 = X) */
			W(ly->ffn_gate_inp, GGUF_DTYPE_F32, E, X);
			W3(ly->gate_exps, o->dtype, E, FX, X);
			W3(ly->up_exps, o->dtype, E, FX, X);
			W3(ly->down_exps, o->dtype, FX, E, X);
			if (hp->moe_sel_bias) /* glm4moe, minimax-m2, deepseek2 (not V2's) */
				W(ly->exp_probs_b, GGUF_DTYPE_F32, X, 1);
			if (hp->n_expert_shared) { /* glm4moe, deepseek2 */
				uint64_t FS = model_ff_shexp(hp);
				W(ly->gate_shexp, o->dtype, E, FS);
				W(ly->up_shexp, o->dtype, E, FS);
				W(ly->down_shexp, o->dtype, FS, E);
			}
			if (hp->moe_bias) {
				W(ly->ffn_gate_inp_b, GGUF_DTYPE_F32, X, 1);
				W3(ly->gate_exps_b, GGUF_DTYPE_F32, FX, 1, X);
				W3(ly->up_exps_b, GGUF_DTYPE_F32, FX, 1, X);
				W3(ly->down_exps_b, GGUF_DTYPE_F32, E, 1, X);
			}
		} else {
			if (!hp->xielu && !hp->relu2) /* apertus, arcee: no gate */
				W(ly->w_gate, o->dtype, E, F);
			W(ly->w_up, o->dtype, E, F);
			W(ly->w_down, o->dtype, F, E);
		}
		if (hp->post_norms) {
			W(ly->attn_post_norm, GGUF_DTYPE_F32, E, 1);
			W(ly->ffn_post_norm, GGUF_DTYPE_F32, E, 1);
		}
		ly->out_scale = 1.0f; /* the value is the file's; a lazy model has none */
		if (hp->out_scale) { /* layer_output_scale.weight: one f32 */
			m->n_params += 1;
			m->weight_bytes += sizeof(float);
		}
		ly->no_rope = (ai->no_rope_step && (l + 1) % ai->no_rope_step == 0) ||
			      (ai->swa_rope_only && hp->n_swa && !ly->swa);
		if (hp->xielu) { /* the values synth writes */
			float raw[4];
			synth_xielu_raw(l, raw);
			model_xielu_params(raw[0], raw[1], raw[2], raw[3], ly->xielu);
		}
	}
#undef W3
#undef W
	m->synthetic = true;
	m->synth_seed = o->seed;
	*out = m;
	return BG_OK;
}

/* "synthetic:NAME[:DTYPE]" */
static enum bg_status open_synthetic(const char *spec, bool lazy, struct model **out,
				     struct bg_err *err)
{
	const char *rest = spec + strlen("synthetic:");
	char name[64];
	const char *colon = strchr(rest, ':');
	size_t nlen = colon ? (size_t)(colon - rest) : strlen(rest);
	if (nlen == 0 || nlen >= sizeof name)
		return bg_fail(err, BG_ERR_INVALID, "%s: expected synthetic:NAME[:DTYPE]", spec);
	memcpy(name, rest, nlen);
	name[nlen] = '\0';
	const struct synth_shape *s = synth_find_shape(name);
	if (!s) {
		/* whole names only: past ~300 characters the rest is left to --list-shapes */
		char list[320] = "";
		size_t k = 0;
		for (size_t i = 0; i < synth_n_shapes(); i++) {
			const char *nm = synth_shape_at(i)->name;
			if (k + strlen(nm) + 40 > sizeof list) {
				snprintf(list + k, sizeof list - k, ", ... (batchgen synth --list-shapes)");
				break;
			}
			k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", nm);
		}
		return bg_fail(err, BG_ERR_INVALID, "%s: unknown synthetic shape '%s' (known: %s)",
			       spec, name, list);
	}
	struct synth_opts o;
	synth_opts_init(&o, s);
	o.dtype = GGUF_DTYPE_F16;
	if (colon) {
		const char *d = colon + 1;
		if (strcmp(d, "f32") == 0)
			o.dtype = GGUF_DTYPE_F32;
		else if (strcmp(d, "f16") == 0)
			o.dtype = GGUF_DTYPE_F16;
		else if (strcmp(d, "bf16") == 0)
			o.dtype = GGUF_DTYPE_BF16;
		else if (strcmp(d, "q8_0") == 0)
			o.dtype = GGUF_DTYPE_Q8_0;
		else
			return bg_fail(err, BG_ERR_INVALID,
				       "%s: unknown dtype '%s' (f32, f16, bf16, q8_0)", spec, d);
	}
	enum bg_status st = synth_check(&o, err);
	if (st)
		return st;
	if (lazy)
		return lazy_model(&o, out, err);
	void *buf;
	size_t len;
	struct bg_err e = {0};
	st = synth_to_buffer(&o, &buf, &len, &e);
	if (!st)
		st = from_buffer(buf, len, spec, out, &e);
	if (st)
		return bg_fail(err, st, "%s: %s", spec, e.msg);
	return BG_OK;
}

enum bg_status model_open(const char *spec, bool lazy, struct model **out, struct bg_err *err)
{
	*out = NULL;
	if (!spec || !spec[0]) {
		/* parsed in place: the embedded bytes live as long as the program */
		struct gguf_ctx *g = NULL;
		struct bg_err e = {0};
		enum bg_status st =
		    gguf_parse(builtin_gguf_data(), builtin_gguf_size(), false, &g, &e);
		if (!st)
			st = model_from_gguf(g, out, &e);
		if (st)
			return bg_fail(err, st, "built-in model: %s", e.msg);
		snprintf((*out)->name, sizeof(*out)->name, "%s", BUILTIN_MODEL_NAME);
		return BG_OK;
	}
	if (strcmp(spec, "synthetic:builtin") == 0) {
		/* the random-weight model that was the default before stories260K: the same
		 * bytes (synth_builtin), always materialized (it is small) */
		void *buf;
		size_t len;
		struct bg_err e = {0};
		enum bg_status st = synth_builtin(&buf, &len, &e);
		if (!st)
			st = from_buffer(buf, len, spec, out, &e);
		if (st)
			return bg_fail(err, st, "%s: %s", spec, e.msg);
		return BG_OK;
	}
	if (strncmp(spec, "synthetic:", 10) == 0)
		return open_synthetic(spec, lazy, out, err);
	return model_load(spec, out, err);
}
