/* cmd_info: `batchgen info -m MODEL` prints what a model is: architecture, hyper-parameters,
 * parameter count, weight bytes by dtype, tokenizer, and every metadata key/value. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/model_spec.h"
#include "io/hub.h"
#include "model/arch.h"
#include "model/gguf.h"
#include "model/model.h"

static void info_usage(FILE *f)
{
	fprintf(f, "usage: batchgen info [-m MODEL] [--offline]\n"
		   "\n"
		   "Describes a model: architecture, hyper-parameters, parameter count, weight\n"
		   "bytes by dtype, tokenizer, and the GGUF metadata. MODEL is a GGUF file,\n"
		   "hf:OWNER/REPO[:QUANT|/FILE.gguf][@REV] (from the Hugging Face hub cache,\n"
		   "downloaded into it when missing; --offline: the cache only), synthetic:NAME\n"
		   "(a named random-weight shape), or absent for the built-in model\n"
		   "(stories260K).\n");
}

static void print_bytes(uint64_t b)
{
	if (b >= (1ull << 30))
		printf("%llu (%.2f GiB)", (unsigned long long)b, (double)b / (1ull << 30));
	else
		printf("%llu (%.2f MiB)", (unsigned long long)b, (double)b / (1ull << 20));
}

static void print_weight_line(const char *what, const struct model_weight *w)
{
	printf("  %-22s %-5s [%llu, %llu", what, gguf_dtype_name(w->type),
	       (unsigned long long)w->ne0, (unsigned long long)w->ne1);
	if (w->ne2)
		printf(", %llu", (unsigned long long)w->ne2);
	printf("]\n");
}

/* elements of a weight, every expert of a stacked one */
static uint64_t n_el(const struct model_weight *w)
{
	return w->ne0 * w->ne1 * (w->ne2 ? w->ne2 : 1);
}

/* Whether the output projection is token_embd. A lazy model has no tensors to look at:
 * tied exactly when its parameter count leaves no room for output.weight. */
static bool is_tied(const struct model *m)
{
	if (m->gguf)
		return gguf_find_tensor(m->gguf, "output.weight") == NULL;
	uint64_t n = n_el(&m->tok_embd) + n_el(&m->output_norm);
	for (uint32_t l = 0; l < m->hp.n_layer; l++) {
		const struct model_layer *y = &m->layers[l];
		n += n_el(&y->attn_norm) + n_el(&y->wq) + n_el(&y->wk) + n_el(&y->wv) +
		     n_el(&y->wo) + n_el(&y->ffn_norm) + n_el(&y->w_gate) + n_el(&y->w_up) +
		     n_el(&y->w_down) + n_el(&y->ffn_gate_inp) + n_el(&y->gate_exps) +
		     n_el(&y->up_exps) + n_el(&y->down_exps);
		if (m->hp.qkv_bias)
			n += n_el(&y->bq) + n_el(&y->bk) + n_el(&y->bv);
		n += n_el(&y->bo) + n_el(&y->attn_sinks) + n_el(&y->ffn_gate_inp_b) +
		     n_el(&y->gate_exps_b) + n_el(&y->up_exps_b) + n_el(&y->down_exps_b);
	}
	return m->n_params == n;
}

/* Appends layers [a, b] to the list at buf[cap] ("0-2, 5"), "..." once it is full. */
static void add_layers(char *buf, size_t cap, uint32_t a, uint32_t b)
{
	size_t n = strlen(buf);
	if (n + 24 < cap)
		snprintf(buf + n, cap - n, a == b ? "%s%u" : "%s%u-%u", n ? ", " : "", a, b);
	else if (strcmp(buf + n - 3, "...") != 0)
		snprintf(buf + n, cap - n, "...");
}

/* a layer's FFN: 0 routed experts, 1 dense, 2 none (nemotron_h's Mamba2 and attention) */
static int ffn_kind(const struct model_layer *L)
{
	return L->no_ffn ? 2 : model_layer_moe(L) ? 0 : 1;
}

/* "moe_layers: M of N (dense: ...; no FFN: ...)": which layers route to experts, as
 * loaded (model_layer_moe), whatever the layout: dense first layers (deepseek2, glm4moe),
 * an interleave step (llama4, ernie4_5-moe), dense last layers (step35), none dense. */
static void print_moe_layers(const struct model *m)
{
	char dense[192] = "", none[192] = "";
	uint32_t n_moe = 0, n = m->hp.n_layer;
	for (uint32_t l = 0, e; l < n; l = e) { /* the run [l, e) of one kind */
		const int kind = ffn_kind(&m->layers[l]);
		for (e = l + 1; e < n && ffn_kind(&m->layers[e]) == kind; e++)
			;
		if (kind == 0)
			n_moe += e - l;
		else
			add_layers(kind == 1 ? dense : none, sizeof dense, l, e - 1);
	}
	printf("moe_layers: %u of %u", n_moe, n);
	if (dense[0] || none[0])
		printf(" (%s%s%s%s%s)", dense[0] ? "dense: " : "", dense,
		       dense[0] && none[0] ? "; " : "", none[0] ? "no FFN: " : "", none);
	printf("\n");
}

/* Weight bytes and counts by dtype over the model's own tensors (what a backend loads). */
static void print_by_dtype(const struct model *m)
{
	static const enum gguf_dtype types[] = {
	    GGUF_DTYPE_F32,	GGUF_DTYPE_F16,	   GGUF_DTYPE_BF16,   GGUF_DTYPE_Q8_0,
	    GGUF_DTYPE_Q4_0,	GGUF_DTYPE_Q4_1,   GGUF_DTYPE_Q5_0,   GGUF_DTYPE_Q5_1,
	    GGUF_DTYPE_Q2_K,	GGUF_DTYPE_Q3_K,   GGUF_DTYPE_Q4_K,   GGUF_DTYPE_Q5_K,
	    GGUF_DTYPE_Q6_K,	GGUF_DTYPE_IQ4_NL, GGUF_DTYPE_IQ4_XS, GGUF_DTYPE_MXFP4,
	    GGUF_DTYPE_IQ2_XXS, GGUF_DTYPE_IQ2_XS, GGUF_DTYPE_IQ2_S,  GGUF_DTYPE_IQ3_XXS,
	    GGUF_DTYPE_IQ3_S,	GGUF_DTYPE_IQ1_S,  GGUF_DTYPE_IQ1_M};
	enum { NT = sizeof types / sizeof types[0] };
	uint64_t bytes[NT] = {0}, count[NT] = {0};
	const struct model_weight *ws[3] = {&m->tok_embd, &m->output_norm, &m->output};
	int n_top = is_tied(m) ? 2 : 3;
	for (uint32_t l = 0; l <= m->hp.n_layer; l++) {
		const struct model_weight *list[32];
		int n = 0;
		if (l == m->hp.n_layer) {
			for (int i = 0; i < n_top; i++)
				list[n++] = ws[i];
		} else {
			const struct model_layer *ly = &m->layers[l];
			const struct model_weight *lw[9] = {
			    &ly->attn_norm, &ly->wq,	 &ly->wk,   &ly->wv,	&ly->wo,
			    &ly->ffn_norm,  &ly->w_gate, &ly->w_up, &ly->w_down};
			for (int i = 0; i < 9; i++)
				list[n++] = lw[i];
			if (ly->ffn_gate_inp.ne0) { /* in place of the (zero) dense FFN; glm4moe's
						     * leading layers are dense */
				n -= 3;
				list[n++] = &ly->ffn_gate_inp;
				list[n++] = &ly->gate_exps;
				list[n++] = &ly->up_exps;
				list[n++] = &ly->down_exps;
			}
			/* glm4moe's selection bias and shared expert (nemotron_h_moe's: no gate) */
			if (ly->up_shexp.ne0) {
				list[n++] = &ly->exp_probs_b;
				list[n++] = &ly->gate_shexp;
				list[n++] = &ly->up_shexp;
				list[n++] = &ly->down_shexp;
				if (ly->gate_inp_shexp.ne0) /* qwen35moe, qwen2moe: its gate */
					list[n++] = &ly->gate_inp_shexp;
			}
			if (ly->attn_gate.ne0) /* step35's head-wise attention gate */
				list[n++] = &ly->attn_gate;
			const struct model_weight *mla[7] = {&ly->wq_a,	 &ly->q_a_norm,	 &ly->wq_b,
							     &ly->wkv_a, &ly->kv_a_norm, &ly->wk_b,
							     &ly->wv_b}; /* deepseek2 */
			for (int i = 0; i < 7 && m->hp.mla; i++)
				list[n++] = mla[i];
			if (ly->conv) { /* lfm2's short-conv layer */
				list[n++] = &ly->conv_in;
				list[n++] = &ly->conv_w;
			}
			const struct model_weight *gdn[8] = {
			    &ly->gdn_qkv, &ly->gdn_z, &ly->gdn_beta, &ly->gdn_alpha,
			    &ly->gdn_dt,  &ly->gdn_a, &ly->gdn_norm, &ly->conv_w}; /* qwen35 */
			for (int i = 0; i < 8 && ly->gdn; i++)
				list[n++] = gdn[i];
			const struct model_weight *ssm[7] = {/* granitehybrid, nemotron_h */
							     &ly->ssm_in, &ly->ssm_conv_w,
							     &ly->ssm_conv_b, &ly->ssm_dt_b,
							     &ly->ssm_a, &ly->ssm_d, &ly->ssm_norm};
			for (int i = 0; i < 7 && (ly->ssm || m->hp.ssm_parallel); i++)
				if (ssm[i]->ne0) /* falcon-h1: conv bias, norm optional */
					list[n++] = ssm[i];
			if (m->hp.ssm_parallel) /* falcon-h1: the Mamba2 block's own output */
				list[n++] = &ly->ssm_out;
			if (m->hp.qkv_bias) {
				list[n++] = &ly->bq;
				list[n++] = &ly->bk;
				list[n++] = &ly->bv;
			}
			const struct model_weight *oai[6] = {&ly->bo,	      &ly->attn_sinks,
							     &ly->ffn_gate_inp_b, &ly->gate_exps_b,
							     &ly->up_exps_b,      &ly->down_exps_b};
			for (int i = 0; i < 6; i++)
				if (oai[i]->ne0)
					list[n++] = oai[i];
		}
		for (int i = 0; i < n; i++)
			for (int t = 0; t < NT && list[i]->ne0; t++) /* olmo2: no attn/ffn norm */
				if (list[i]->type == types[t]) {
					bytes[t] += gguf_row_bytes(list[i]->type, list[i]->ne0) *
						    list[i]->ne1 *
						    (list[i]->ne2 ? list[i]->ne2 : 1);
					count[t]++;
				}
	}
	printf("weights by dtype:\n");
	for (int t = 0; t < NT; t++)
		if (count[t]) {
			printf("  %-5s %4llu tensors, ", gguf_dtype_name(types[t]),
			       (unsigned long long)count[t]);
			print_bytes(bytes[t]);
			printf("\n");
		}
}

int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"model", required_argument, NULL, 'm'},
	    {"offline", no_argument, NULL, 'O'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *spec = NULL;
	bool offline = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': spec = optarg; break;
		case 'O': offline = true; break;
		case 'h': info_usage(stdout); return CLI_EXIT_OK;
		case ':':
			fprintf(stderr, "batchgen info: %s needs a value\n", argv[optind - 1]);
			return CLI_EXIT_USAGE;
		default:
			fprintf(stderr, "batchgen info: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "batchgen info: unexpected argument '%s'\n", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	struct model *m = NULL;
	struct bg_err err = {0};
	/* synthetic shapes are described without generating their weights */
	bool lazy = spec && strncmp(spec, "synthetic:", 10) == 0;
	char *path = NULL;
	if (model_spec_resolve(spec, offline, false, &path, &err) != BG_OK ||
	    model_open(path, lazy, &m, &err) != BG_OK) {
		free(path);
		fprintf(stderr, "batchgen: %s\n", err.msg);
		return CLI_EXIT_MODEL;
	}
	const struct model_hparams *hp = &m->hp;
	printf("model: %s\n", spec && spec[0] ? spec : "(built-in)");
	if (hub_is_spec(spec))
		printf("file: %s\n", path);
	free(path);
	if (m->gguf)
		printf("gguf: version %u, %llu keys, %llu tensors, alignment %u\n",
		       gguf_version(m->gguf), (unsigned long long)gguf_n_kv(m->gguf),
		       (unsigned long long)gguf_n_tensors(m->gguf), gguf_alignment(m->gguf));
	printf("arch: %s\n", m->arch);
	printf("name: %s\n", m->name);
	printf("n_vocab: %u\n", hp->n_vocab);
	printf("n_ctx_train: %u\n", hp->n_ctx_train);
	printf("n_embd: %u\n", hp->n_embd);
	printf("n_layer: %u\n", hp->n_layer);
	printf("n_head: %u\n", hp->n_head);
	printf("n_head_kv: %u\n", hp->n_head_kv);
	printf("head_dim: %u\n", hp->head_dim);
	printf("n_ff: %u\n", hp->n_ff);
	if (hp->n_expert)
		printf("experts: %u, %u used per token, %u wide (n_ff_exp), %s routing%s%s\n",
		       hp->n_expert, hp->n_expert_used, hp->n_ff_exp,
		       hp->expert_gating_sigmoid || hp->moe_weight_in ? "sigmoid" : "softmax",
		       hp->expert_weights_norm ? ", chosen weights renormalized" : "",
		       hp->moe_bias ? ", router and experts with biases" : "");
	if (hp->moe_weight_in) /* llama4 */
		printf("llama4 experts: choice by the largest logits, the sigmoid weight on the "
		       "expert's input, every %u%s layer (the others dense), 1 shared expert (%u "
		       "wide)\n",
		       hp->n_moe_step,
		       hp->n_moe_step == 1   ? "st"
		       : hp->n_moe_step == 2 ? "nd"
					     : "th",
		       (unsigned)model_ff_shexp(hp));
	else if (hp->n_moe_step) { /* ernie4_5-moe */
		printf("ernie4_5-moe experts: choice by p (+ exp_probs_b where a layer has one), "
		       "%u shared expert%s (%u wide), layer l MoE iff l >= %u and (l + 1) %% %u "
		       "== 0\n",
		       hp->n_expert_shared, hp->n_expert_shared == 1 ? "" : "s",
		       (unsigned)model_ff_shexp(hp), hp->n_layer_dense_lead, hp->n_moe_step);
	} else if (hp->moe_grouped) { /* deepseek2, bailingmoe2, dots1 */
		const bool selb = hp->n_layer && m->layers[hp->n_layer - 1].exp_probs_b.ne0;
		printf("%s experts: choice by p%s", m->arch, selb ? " + exp_probs_b" : "");
		if (hp->n_expert_groups > 1)
			printf(" among the %u of %u groups with the largest top-2 sums",
			       hp->n_group_used, hp->n_expert_groups);
		printf(", weights x %g, %u shared expert%s (%u wide), the first %u layer%s dense\n",
		       (double)hp->expert_weights_scale, hp->n_expert_shared,
		       hp->n_expert_shared == 1 ? "" : "s", (unsigned)model_ff_shexp(hp),
		       hp->n_layer_dense_lead, hp->n_layer_dense_lead == 1 ? "" : "s");
	} else if (hp->shexp_gate) /* qwen35moe, qwen2moe */
		printf("shared expert: %u wide, its output times sigmoid(ffn_gate_inp_shexp x)\n",
		       hp->n_ff_shexp);
	else if (hp->n_expert_shared)
		/* (granitehybrid: no selection bias; it and nemotron_h_moe: a shared expert of
		 * its own width, model_ff_shexp) */
		printf("%s experts: choice by p%s, weights x %g, %u shared "
		       "expert%s (%u wide), the first %u layer%s dense\n",
		       m->arch, hp->moe_sel_bias ? " + exp_probs_b" : "",
		       (double)hp->expert_weights_scale, hp->n_expert_shared,
		       hp->n_expert_shared == 1 ? "" : "s", (unsigned)model_ff_shexp(hp),
		       hp->n_layer_dense_lead, hp->n_layer_dense_lead == 1 ? "" : "s");
	else if (hp->moe_sel_bias) /* minimax-m2, lfm2moe */
		printf("experts: choice by p + exp_probs_b, no shared expert, the first %u layer%s "
		       "dense\n",
		       hp->n_layer_dense_lead, hp->n_layer_dense_lead == 1 ? "" : "s");
	if (hp->mla)
		printf(
		    "mla: q_lora_rank %u%s, kv_lora_rank %u, qk_nope %u + qk_rope %u, v_head %u; "
		    "one K/V head of %u (the latent and the rotated key), V read from the K row: "
		    "KV "
		    "cache %u bytes a token a layer on the CPU backend (f32)\n",
		    hp->n_lora_q, hp->n_lora_q ? "" : " (attn_q)", hp->n_lora_kv, hp->mla_nope,
		    hp->rope_dim, hp->mla_v_head, hp->head_dim, 4 * hp->head_dim);
	if (hp->swiglu_oai)
		printf("ffn_act: clamped swiglu (gpt-oss), alpha %g, limit %g\n",
		       (double)hp->swiglu_alpha, (double)hp->swiglu_limit);
	if (hp->attn_sinks)
		printf("attn_sinks: yes (one logit per head in the softmax denominator)\n");
	if (hp->attn_out_bias)
		printf("attn_out_bias: yes\n");
	printf("rope_dim: %u\n", hp->rope_dim);
	printf("rope_base: %g\n", (double)hp->rope_base);
	printf("rope_type: %s\n", hp->rope_neox ? "neox" : "normal");
	if (hp->rope_mrope) { /* arch.h's mrope: the pairs text leaves unturned */
		const int32_t *s = hp->rope_sections;
		char off[256] = "";
		size_t n = 0;
		for (uint32_t i = 0; i < hp->rope_dim / 2 && n < sizeof off - 16; i++)
			if (!arch_mrope_pair_turns(hp->rope_mrope, s, i))
				n += (size_t)snprintf(off + n, sizeof off - n, "%s%u",
						      n ? ", " : "", i);
		printf("rope_sections: %s [%d, %d, %d, %d] (text: %s%s)\n",
		       hp->rope_mrope == 1 ? "mrope" : "imrope", s[0], s[1], s[2], s[3],
		       n ? "pairs not turned " : "every pair turns", off);
	}
	printf("rms_eps: %g\n", (double)hp->rms_eps);
	printf("qkv_bias: %s\n", hp->qkv_bias ? "yes" : "no");
	/* the architecture features (core/model/arch.h), the lines only where present */
	if (hp->rope_factors[0])
		printf("rope_factors: %s\n", hp->rope_factors);
	if (hp->rope_freq_scale != 1.0f || hp->rope_yarn)
		printf("rope_scaling: %s, factor %g, original context %u\n",
		       hp->rope_yarn ? "yarn" : "linear", 1.0 / (double)hp->rope_freq_scale,
		       hp->n_ctx_orig);
	if (hp->rope_attn_factor != 1.0f)
		printf("rope_attn_factor: %g\n", (double)hp->rope_attn_factor);
	if (hp->qk_norm || hp->qk_norm_after_rope)
		printf("qk_norm: %s\n",
		       hp->qk_norm_full		 ? "yes, over the whole Q and K rows"
		       : hp->qk_norm_heads	 ? "yes, a weight row per head"
		       : !hp->qk_norm_after_rope ? "yes"
		       : hp->qk_norm
			   ? "yes, per head after RoPE (hunyuan)"
			   : "yes, per head after RoPE without a weight, on the layers with RoPE "
			     "(llama4)");
	if (hp->no_pre_norms)
		printf("pre_norms: none (attention and FFN read the residual as it is)\n");
	if (hp->post_norms)
		printf("post_norms: yes\n");
	if (hp->gelu)
		printf("ffn_act: gelu\n");
	if (hp->relu2) /* nemotron_h, arcee (model.h) */
		printf("ffn_act: relu^2, not gated (down(relu(up x)^2))\n");
	if (hp->xielu && hp->n_layer) /* apertus: the operator's values (model.h) */
		printf("ffn_act: xielu, not gated (down(xielu(up x))); layer 0: an %g, ap %g, beta "
		       "%g, eps %g\n",
		       (double)m->layers[0].xielu[0], (double)m->layers[0].xielu[1],
		       (double)m->layers[0].xielu[2], (double)m->layers[0].xielu[3]);
	if (hp->embd_scale != 1.0f)
		printf("embd_scale: %g\n", (double)hp->embd_scale);
	if (hp->attn_scale != 1.0f / sqrtf((float)hp->head_dim))
		printf("attn_scale: %g (q.k times this instead of 1/sqrt(head_dim))\n",
		       (double)hp->attn_scale);
	if (hp->residual_scale != 1.0f)
		printf("residual_scale: %g (each branch output before its residual add)\n",
		       (double)hp->residual_scale);
	if (hp->logit_scale != 1.0f)
		printf("logit_scale: %g (logits multiplied by it)\n", (double)hp->logit_scale);
	if (hp->layer_norm)
		printf("norms: LayerNorm (mean-subtracted, eps %g)\n", (double)hp->rms_eps);
	if (hp->parallel)
		printf("block: parallel (attention and FFN read one norm; x + ffn + attn)\n");
	if (hp->attn_temp_scale != 0.0f)
		printf(
		    "attn_temperature: Q%s times log(floor((pos + %g) / %u) + 1) * %g + "
		    "1%s\n",
		    hp->attn_temp_nope ? "" : " after RoPE", (double)hp->attn_temp_offset,
		    hp->attn_temp_floor, (double)hp->attn_temp_scale,
		    hp->attn_temp_nope ? " on the layers without RoPE" : "");
	if (hp->attn_temp_nope) { /* llama4 (the same no_rope flag as smollm3's) */
		uint32_t nn = 0;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			nn += m->layers[l].no_rope;
		printf("no RoPE on %u of %u layers (every 4th)\n", nn, hp->n_layer);
	}
	if (model_head_dim(hp, true) != hp->head_dim ||
	    model_n_head_kv(hp, true) != hp->n_head_kv ||
	    model_rope_dim(hp, true) != hp->rope_dim || model_n_head(hp, true) != hp->n_head)
		printf("windowed layers: head_dim %u, n_head %u, n_head_kv %u, rope_dim %u\n",
		       model_head_dim(hp, true), model_n_head(hp, true), model_n_head_kv(hp, true),
		       model_rope_dim(hp, true));
	uint32_t n_gate = 0, n_clamp = 0; /* step35 */
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		n_gate += m->layers[l].attn_gate.ne0 != 0;
		n_clamp += m->layers[l].clamp_exp > 0.0f || m->layers[l].clamp_shexp > 0.0f;
	}
	if (hp->n_expert && !hp->gemma4_moe) /* (gemma4's experts beside dense: below) */
		print_moe_layers(m);
	if (n_gate)
		printf("attention gate: on %u of %u layers (head h times sigmoid(attn_gate x)[h])\n",
		       n_gate, hp->n_layer);
	if (n_clamp)
		printf("SwiGLU clamps: on %u of %u layers (swiglu_clamp_exp / swiglu_clamp_shexp)\n",
		       n_clamp, hp->n_layer);
	if (hp->gemma4_moe) { /* 26B-A4B (model.h) */
		uint32_t n_moe = 0, n_ds = 0;
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			n_moe += model_layer_moe(&m->layers[l]);
			n_ds += m->layers[l].down_exps_s.ne0 != 0;
		}
		printf("gemma4 experts: on %u of %u layers, beside the dense FFN (router input "
		       "rmsnorm(x) / sqrt(n_embd) x ffn_gate_inp.scale; pre_ffw_norm_2, "
		       "post_ffw_norm_1 / _2; GELU experts; per-expert down scales on %u)\n",
		       n_moe, hp->n_layer, n_ds);
	}
	if (hp->v_norm)
		printf("v_norm: yes (each V head RMS-normalized, no weight)\n");
	if (hp->rope_factors_global && hp->rope_factors[0])
		printf("rope_factors: on the global layers only\n");
	if (hp->out_scale)
		printf("layer_output_scale: yes (blk.0: %g)\n", (double)m->layers[0].out_scale);
	if (hp->n_embd_per_layer)
		printf("per_layer_embd: %u a layer (per_layer_token_embd, gated into each layer's "
		       "output)\n",
		       hp->n_embd_per_layer);
	if (hp->n_layer_nextn)
		printf("nextn: %u NextN (MTP) layer%s after the %u computed, skipped (tensors "
		       "not read, as llama.cpp)\n",
		       hp->n_layer_nextn, hp->n_layer_nextn == 1 ? "" : "s", hp->n_layer);
	if (model_n_layer_kv(hp) < hp->n_layer)
		printf("shared_kv: layers %u-%u read layer %u's (windowed) or %u's (global) KV "
		       "cache; %u layers have one\n",
		       model_n_layer_kv(hp), hp->n_layer - 1, model_n_layer_kv(hp) - 2,
		       model_n_layer_kv(hp) - 1, model_n_layer_kv(hp));
	uint64_t per = 0; /* the Mamba2 layers' state floats a sequence */
	for (uint32_t l = 0; hp->ssm_d_conv && l < hp->n_layer; l++)
		per += model_state_floats(hp, &m->layers[l]);
	if (hp->ssm_parallel) { /* falcon-h1 (model.h): every layer both */
		printf("mamba2: every layer attention AND a Mamba2 block of the same normed input, "
		       "added together (%u taps, inner %u, %u heads, %u groups, state %u, grouped "
		       "norm %s; %llu bytes of fp32 state a sequence, in a slot of its own)\n",
		       hp->ssm_d_conv, hp->ssm_d_inner, hp->ssm_n_head, hp->ssm_n_group,
		       hp->ssm_d_state, m->layers[0].ssm_norm.data ? "yes" : "no",
		       (unsigned long long)(4 * per));
	} else if (hp->ssm_d_conv) { /* granitehybrid (model.h): which layers, their state */
		uint32_t ns = 0;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			ns += m->layers[l].ssm;
		printf("mamba2: %u of %u layers are Mamba2 blocks (%u taps, inner %u, %u heads, "
		       "%u groups, state %u; %llu bytes of fp32 state a sequence, in a slot of its "
		       "own); other layers:",
		       ns, hp->n_layer, hp->ssm_d_conv, hp->ssm_d_inner, hp->ssm_n_head,
		       hp->ssm_n_group, hp->ssm_d_state, (unsigned long long)(4 * per));
		for (uint32_t l = 0; l < hp->n_layer; l++)
			if (!m->layers[l].ssm)
				printf(" %u", l);
		printf("%s\n", hp->rope_none ? " (no RoPE)" : "");
	}
	if (hp->conv_l) { /* lfm2 (model.h): which layers, and the cache row their state takes */
		uint32_t nc = 0;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			nc += m->layers[l].conv;
		printf("shortconv: %u of %u layers are short-conv blocks (%u taps, state in the KV "
		       "cache: n_embd %u values a token each); attention layers:",
		       nc, hp->n_layer, hp->conv_l, hp->n_embd);
		for (uint32_t l = 0; l < hp->n_layer; l++)
			if (!m->layers[l].conv)
				printf(" %u", l);
		printf("\nkv_cache: %llu bytes a token on the CPU backend (f32, every layer's K "
		       "and V slots %llu wide)\n",
		       (unsigned long long)(2ull * 4 * hp->n_layer * model_kv_dim_max(hp)),
		       (unsigned long long)model_kv_dim_max(hp));
	}
	if (hp->gdn_conv) { /* qwen35 (model.h): which layers, the state a sequence keeps */
		uint32_t ng = 0;
		uint64_t sf = 0;
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			ng += m->layers[l].gdn;
			sf += model_state_floats(hp, &m->layers[l]);
		}
		printf(
		    "gated_delta_net: %u of %u layers (conv %u taps, %u K and %u V heads of %u); "
		    "attention layers (output-gated):",
		    ng, hp->n_layer, hp->gdn_conv, hp->gdn_nk, hp->gdn_nv, hp->gdn_d);
		for (uint32_t l = 0; l < hp->n_layer; l++)
			if (!m->layers[l].gdn)
				printf(" %u", l);
		printf("\nrecurrent_state: %llu bytes a sequence (f32, outside the KV cache)\n",
		       (unsigned long long)(sf * 4));
	}
	uint32_t nk = 0;
	for (uint32_t l = 0; l < hp->n_layer; l++)
		nk += m->layers[l].v_from_k;
	if (nk)
		printf("v_from_k: %u of %u layers have no attn_v (V = K's projection)\n", nk,
		       hp->n_layer);
	if (hp->attn_softcap > 0.0f)
		printf("attn_softcap: %g\n", (double)hp->attn_softcap);
	if (hp->final_softcap > 0.0f)
		printf("final_softcap: %g\n", (double)hp->final_softcap);
	if (hp->n_swa > 0) {
		uint32_t nw = 0;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			nw += m->layers[l].swa;
		printf("sliding_window: %u%s on %u of %u layers (pattern %u), rope base %g there; "
		       "%s\n",
		       hp->n_swa,
		       hp->swa_chunked ? " (chunked: a query sees its chunk's keys)" : "", nw,
		       hp->n_layer, hp->swa_pattern, (double)hp->rope_base_swa,
		       model_kv_window(hp) ? "KV blocks behind the window are given back"
					   : "every KV block kept (global layers read it all)");
	} else if (hp->n_swa_file > 0) {
		printf("sliding_window: %u in the file, not applied (as llama.cpp)\n",
		       hp->n_swa_file);
	}
	uint32_t n_nope = 0; /* smollm3, cohere2, exaone4's global layers, ...: no RoPE */
	for (uint32_t l = 0; l < hp->n_layer; l++)
		n_nope += m->layers[l].no_rope;
	if (n_nope)
		printf("no_rope: %u of %u layers not rotated\n", n_nope, hp->n_layer);
	bool tied = is_tied(m);
	printf("output: %s\n", tied ? "tied to token_embd" : "separate output.weight");
	printf("n_params: %llu (%.2f M)\n", (unsigned long long)m->n_params,
	       (double)m->n_params / 1e6);
	printf("weight_bytes: ");
	print_bytes(m->weight_bytes);
	printf("\n");
	if (m->synthetic)
		printf("synthetic: lazy (weights generated by the backend), seed %llu\n",
		       (unsigned long long)m->synth_seed);
	print_by_dtype(m);
	printf("tensors (layer 0 shown):\n");
	print_weight_line("token_embd", &m->tok_embd);
	print_weight_line("output_norm", &m->output_norm);
	print_weight_line("output", &m->output);
	if (hp->n_layer) {
		const struct model_layer *ly = &m->layers[0];
		if (!hp->no_pre_norms)
			print_weight_line("blk.0.attn_norm", &ly->attn_norm);
		if (hp->mla) { /* deepseek2 (model.h) */
			if (hp->n_lora_q) {
				print_weight_line("blk.0.attn_q_a", &ly->wq_a);
				print_weight_line("blk.0.attn_q_a_norm", &ly->q_a_norm);
				print_weight_line("blk.0.attn_q_b", &ly->wq_b);
			} else {
				print_weight_line("blk.0.attn_q", &ly->wq);
			}
			print_weight_line("blk.0.attn_kv_a_mqa", &ly->wkv_a);
			print_weight_line("blk.0.attn_kv_a_norm", &ly->kv_a_norm);
			print_weight_line("blk.0.attn_k_b", &ly->wk_b);
			print_weight_line("blk.0.attn_v_b", &ly->wv_b);
		} else if (ly->conv) { /* lfm2 */
			print_weight_line("blk.0.shortconv.in_proj", &ly->conv_in);
			print_weight_line("blk.0.shortconv.conv", &ly->conv_w);
		} else if (ly->gdn) { /* qwen35's delta net */
			print_weight_line("blk.0.attn_qkv", &ly->gdn_qkv);
			print_weight_line("blk.0.attn_gate", &ly->gdn_z);
			print_weight_line("blk.0.ssm_conv1d", &ly->conv_w);
			print_weight_line("blk.0.ssm_beta", &ly->gdn_beta);
			print_weight_line("blk.0.ssm_alpha", &ly->gdn_alpha);
			print_weight_line("blk.0.ssm_dt.bias", &ly->gdn_dt);
			print_weight_line("blk.0.ssm_a", &ly->gdn_a);
			print_weight_line("blk.0.ssm_norm", &ly->gdn_norm);
		} else if (ly->ssm) { /* granitehybrid */
			print_weight_line("blk.0.ssm_in", &ly->ssm_in);
			print_weight_line("blk.0.ssm_conv1d", &ly->ssm_conv_w);
			print_weight_line("blk.0.ssm_norm", &ly->ssm_norm);
		} else {
			print_weight_line("blk.0.attn_q", &ly->wq);
			print_weight_line("blk.0.attn_k", &ly->wk);
			print_weight_line("blk.0.attn_v", &ly->wv);
			if (hp->ssm_parallel) { /* falcon-h1: the Mamba2 block beside */
				print_weight_line("blk.0.ssm_in", &ly->ssm_in);
				print_weight_line("blk.0.ssm_conv1d", &ly->ssm_conv_w);
				print_weight_line("blk.0.ssm_out", &ly->ssm_out);
			}
		}
		if (hp->qkv_bias) {
			print_weight_line("blk.0.attn_q.bias", &ly->bq);
			print_weight_line("blk.0.attn_k.bias", &ly->bk);
			print_weight_line("blk.0.attn_v.bias", &ly->bv);
		}
		print_weight_line(ly->conv  ? "blk.0.shortconv.out_proj"
				  : ly->gdn || ly->ssm ? "blk.0.ssm_out"
					    : "blk.0.attn_output",
				  &ly->wo);
		if (hp->attn_out_bias)
			print_weight_line("blk.0.attn_output.bias", &ly->bo);
		if (hp->attn_sinks)
			print_weight_line("blk.0.attn_sinks", &ly->attn_sinks);
		const struct arch_info *ai = arch_find(m->arch);
		if (!hp->no_pre_norms) /* gpt-oss, seed_oss: stored as post_attention_norm */
			print_weight_line(ai && ai->ffn_norm_post_name
					      ? "blk.0.post_attention_norm (ffn_norm)"
					      : "blk.0.ffn_norm",
					  &ly->ffn_norm);
		if (hp->qk_norm && !ly->conv) {
			print_weight_line("blk.0.attn_q_norm", &ly->q_norm);
			print_weight_line("blk.0.attn_k_norm", &ly->k_norm);
		}
		if (hp->post_norms) {
			print_weight_line("blk.0.post_attention_norm", &ly->attn_post_norm);
			print_weight_line("blk.0.post_ffw_norm", &ly->ffn_post_norm);
		}
		if (hp->n_expert && model_layer_moe(ly)) { /* else layer 0 is dense */
			print_weight_line("blk.0.ffn_gate_inp", &ly->ffn_gate_inp);
			print_weight_line("blk.0.ffn_gate_exps", &ly->gate_exps);
			print_weight_line("blk.0.ffn_up_exps", &ly->up_exps);
			print_weight_line("blk.0.ffn_down_exps", &ly->down_exps);
			if (hp->moe_bias) {
				print_weight_line("blk.0.ffn_gate_inp.bias", &ly->ffn_gate_inp_b);
				print_weight_line("blk.0.ffn_gate_exps.bias", &ly->gate_exps_b);
				print_weight_line("blk.0.ffn_up_exps.bias", &ly->up_exps_b);
				print_weight_line("blk.0.ffn_down_exps.bias", &ly->down_exps_b);
			}
		} else {
			if (!hp->xielu && !hp->relu2) /* apertus, arcee: no gate */
				print_weight_line("blk.0.ffn_gate", &ly->w_gate);
			print_weight_line("blk.0.ffn_up", &ly->w_up);
			print_weight_line("blk.0.ffn_down", &ly->w_down);
		}
	}
	if (m->gguf) {
		const struct gguf_ctx *g = m->gguf;
		struct gguf_str tm;
		enum gguf_type et;
		uint64_t nt = 0;
		uint32_t bos = 0, eos = 0;
		if (gguf_get_str(g, "tokenizer.ggml.model", &tm)) {
			gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &nt);
			printf("tokenizer: %.*s, %llu tokens", (int)(tm.len < 64 ? tm.len : 64),
			       tm.ptr, (unsigned long long)nt);
			if (gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos))
				printf(", bos %u", bos);
			if (gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos))
				printf(", eos %u", eos);
			printf("\n");
		} else {
			printf("tokenizer: none\n");
		}
		printf("metadata:\n");
		char line[512];
		for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
			struct gguf_str k = gguf_kv_key(g, i);
			gguf_kv_format(g, i, line, sizeof line);
			printf("  %.*s = %s\n", (int)(k.len < 200 ? k.len : 200), k.ptr, line);
		}
	}
	model_free(m);
	return CLI_EXIT_OK;
}
