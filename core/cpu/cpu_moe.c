/* cpu_moe: the mixture-of-experts FFN on the host. See cpu_moe.h. */
#include "cpu/cpu_moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/moe.h"

struct cpu_moe {
	struct model_hparams hp;
	int32_t cap;	  /* token rows the arrays below hold */
	float *logits;	  /* [cap][n_expert] router outputs */
	int32_t *ids;	  /* [cap][k] expert of each (token, slot) */
	float *weights;	  /* [cap][k] its weight */
	int32_t *start;	  /* [n_expert + 1] expert e's entries are order[start[e], start[e+1]) */
	int32_t *order;	  /* [cap * k] t * k + slot, grouped by expert, token order within */
	float *xg;	  /* [cap][n_embd] the rows routed to one expert, gathered */
	float *g, *u;	  /* [cap][n_ff_exp] its gate and up outputs */
	float *yg;	  /* [cap][n_embd] its down outputs */
	float *ys;	  /* [cap][k][n_embd] every (token, slot) output */
	float *bias;	  /* [max(n_expert, n_ff_exp, n_embd)] one bias vector (gpt-oss), copied
			   * so that a file's misaligned f32 is never read through a float *;
			   * glm4moe, minimax-m2, deepseek2: the layer's selection bias
			   * exp_probs_b, copied likewise */
	float *sg, *su;	  /* glm4moe: [cap][FS] the shared expert's gate and up outputs */
	float *sh;	  /* glm4moe: [cap][n_embd] its down outputs */
	float *sgate;	  /* qwen35moe, qwen2moe (hp.shexp_gate): [cap] the shared expert's
			   * gate logit of each token, then its sigmoid */
	size_t bytes;
};

struct cpu_moe *cpu_moe_create(const struct model_hparams *hp)
{
	struct cpu_moe *mo = calloc(1, sizeof *mo);
	if (!mo)
		return NULL;
	mo->hp = *hp;
	mo->start = calloc((size_t)hp->n_expert + 1, sizeof *mo->start);
	size_t nb = hp->n_expert > hp->n_ff_exp ? hp->n_expert : hp->n_ff_exp;
	nb = nb > hp->n_embd ? nb : hp->n_embd;
	const bool need_bias = hp->moe_bias || hp->moe_sel_bias;
	mo->bias = need_bias ? malloc(nb * sizeof(float)) : NULL;
	if (!mo->start || (need_bias && !mo->bias)) {
		free(mo->start);
		free(mo->bias);
		free(mo);
		return NULL;
	}
	return mo;
}

static void free_rows(struct cpu_moe *mo)
{
	free(mo->logits);
	free(mo->ids);
	free(mo->weights);
	free(mo->order);
	free(mo->xg);
	free(mo->g);
	free(mo->u);
	free(mo->yg);
	free(mo->ys);
	free(mo->sg);
	free(mo->su);
	free(mo->sh);
	free(mo->sgate);
}

void cpu_moe_destroy(struct cpu_moe *mo)
{
	if (!mo)
		return;
	free_rows(mo);
	free(mo->start);
	free(mo->bias);
	free(mo);
}

enum bg_status cpu_moe_reserve(struct cpu_moe *mo, int32_t n_tok, struct bg_err *err)
{
	if (n_tok <= mo->cap)
		return BG_OK;
	int32_t cap = mo->cap ? mo->cap : 16;
	while (cap < n_tok)
		cap *= 2;
	const size_t t = (size_t)cap, X = mo->hp.n_expert, K = mo->hp.n_expert_used;
	const size_t E = mo->hp.n_embd, FX = mo->hp.n_ff_exp;
	struct cpu_moe n = *mo;
	n.logits = malloc(t * X * sizeof(float));
	n.ids = malloc(t * K * sizeof(int32_t));
	n.weights = malloc(t * K * sizeof(float));
	n.order = malloc(t * K * sizeof(int32_t));
	n.xg = malloc(t * E * sizeof(float));
	n.g = malloc(t * FX * sizeof(float));
	n.u = malloc(t * FX * sizeof(float));
	n.yg = malloc(t * E * sizeof(float));
	n.ys = malloc(t * K * E * sizeof(float));
	const size_t FS = model_ff_shexp(&mo->hp); /* glm4moe's shared expert, or 0 */
	n.sg = n.su = n.sh = n.sgate = NULL;
	if (FS) {
		n.sg = malloc(t * FS * sizeof(float));
		n.su = malloc(t * FS * sizeof(float));
		n.sh = malloc(t * E * sizeof(float));
	}
	const bool sgate = mo->hp.shexp_gate;
	if (sgate)
		n.sgate = malloc(t * sizeof(float));
	if (!n.logits || !n.ids || !n.weights || !n.order || !n.xg || !n.g || !n.u || !n.yg ||
	    !n.ys || (FS && (!n.sg || !n.su || !n.sh)) || (sgate && !n.sgate)) {
		free_rows(&n);
		return bg_fail(err, BG_ERR_NOMEM,
			       "out of memory for the experts' activations of %d tokens", n_tok);
	}
	free_rows(mo);
	n.cap = cap;
	n.bytes =
	    t * ((X + 2 * E + 2 * FX + K * E + (FS ? 2 * FS + E : 0) + sgate) * sizeof(float) +
		 K * (2 * sizeof(int32_t) + sizeof(float)));
	*mo = n;
	return BG_OK;
}

/* gpt-oss: rows [0, n) of y (ld apart) += the f32 vector at b (n_el values), one addition
 * per element as ggml_add / ggml_add_id */
static void add_vec(struct cpu_moe *mo, float *y, int64_t ld, int32_t n, const void *b,
		    int64_t n_el)
{
	memcpy(mo->bias, b, (size_t)n_el * sizeof(float));
	for (int32_t r = 0; r < n; r++)
		for (int64_t i = 0; i < n_el; i++)
			y[(int64_t)r * ld + i] += mo->bias[i];
}

/* gpt-oss's activation (model.h swiglu_oai), as ggml's swiglu_oai computes it:
 * x = min(gate, limit), y = clamp(up, -limit, limit), x / (1 + exp(alpha * -x)) * (y + 1) */
static void swiglu_oai(float *g, const float *u, int64_t n, float alpha, float limit)
{
	for (int64_t i = 0; i < n; i++) {
		const float x = g[i] < limit ? g[i] : limit;
		const float y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
		const float glu = x / (1.0f + expf(alpha * (-x)));
		g[i] = glu * (y + 1.0f);
	}
}

void cpu_swiglu_clamp(float *g, const float *u, int64_t n, float limit)
{
	for (int64_t i = 0; i < n; i++) {
		float a = g[i] / (1.0f + expf(-g[i]));
		a = a < limit ? a : limit;
		const float v = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
		g[i] = a * v;
	}
}

/* nemotron_h_moe (model.h relu2): y = down(relu(up x)^2) over n rows (h: [n][up's rows]
 * scratch), not gated; max(v, 0)^2 in fp32 as the dense FFN's */
static void relu2_ffn(const struct cpu_moe_mm *mm, const struct model_weight *up,
		      const struct model_weight *down, const float *x, float *h, float *y,
		      int32_t n)
{
	const int64_t F = (int64_t)up->ne1, E = (int64_t)down->ne1;
	const struct model_weight *w[1] = {up};
	const float *xs[1] = {x};
	float *ys[1] = {h};
	mm->run(mm->ctx, BACKEND_CPU_MM_GATE_UP, 1, w, xs, ys, &F, n, NULL);
	for (int64_t i = 0; i < (int64_t)n * F; i++) {
		const float r = h[i] > 0.0f ? h[i] : 0.0f;
		h[i] = r * r;
	}
	w[0] = down;
	xs[0] = h;
	ys[0] = y;
	mm->run(mm->ctx, BACKEND_CPU_MM_DOWN, 1, w, xs, ys, &E, n, NULL);
}

size_t cpu_moe_bytes(const struct cpu_moe *mo)
{
	return mo ? mo->bytes + ((size_t)mo->hp.n_expert + 1) * sizeof(int32_t) : 0;
}

void cpu_moe_ffn(struct cpu_moe *mo, const struct model_layer *L, const float *xb,
		 int32_t n_tok, float *out, const struct cpu_moe_mm *mm)
{
	cpu_moe_ffn_ex(mo, L, xb, NULL, NULL, n_tok, out, mm);
}

void cpu_moe_ffn_ex(struct cpu_moe *mo, const struct model_layer *L, const float *xb,
		    const float *xr, const float *down_scale, int32_t n_tok, float *out,
		    const struct cpu_moe_mm *mm)
{
	const struct model_hparams *hp = &mo->hp;
	const int64_t E = hp->n_embd, FX = hp->n_ff_exp;
	const uint32_t X = hp->n_expert, K = hp->n_expert_used;
	BG_ASSERT(n_tok <= mo->cap);
	/* router logits for every row at once, then each token's experts */
	{
		const struct model_weight *w[1] = {&L->ffn_gate_inp};
		const float *x[1] = {xr ? xr : xb}; /* gemma4: its own router input */
		float *y[1] = {mo->logits};
		const int64_t ld[1] = {(int64_t)X};
		mm->run(mm->ctx, BACKEND_CPU_MM_GATE_UP, 1, w, x, y, ld, n_tok, NULL);
	}
	if (hp->moe_bias) /* gpt-oss: the router's bias on its logits, before the choice */
		add_vec(mo, mo->logits, (int64_t)X, n_tok, L->ffn_gate_inp_b.data, (int64_t)X);
	/* glm4moe, minimax-m2, deepseek2: the selection bias, an aligned copy (deepseek2's
	 * optional) */
	const float *sel_b = L->exp_probs_b.data ? mo->bias : NULL;
	if (sel_b)
		memcpy(mo->bias, L->exp_probs_b.data, (size_t)X * sizeof(float));
	for (int32_t t = 0; t < n_tok; t++)
		if (hp->moe_grouped) /* deepseek2 */
			moe_route_grouped(mo->logits + (size_t)t * X, sel_b, X, K,
					  hp->expert_gating_sigmoid, hp->n_expert_groups,
					  hp->n_group_used, hp->expert_weights_norm,
					  hp->expert_weights_scale, mo->ids + (size_t)t * K,
					  mo->weights + (size_t)t * K);
		else if (hp->moe_weight_in) /* llama4 */
			moe_route_llama4(mo->logits + (size_t)t * X, X, K, mo->ids + (size_t)t * K,
					 mo->weights + (size_t)t * K);
		else if (hp->expert_gating_sigmoid)
			moe_route_sigmoid(mo->logits + (size_t)t * X, sel_b, X, K,
					  hp->expert_weights_norm, hp->expert_weights_scale,
					  mo->ids + (size_t)t * K, mo->weights + (size_t)t * K);
		else
			moe_route(mo->logits + (size_t)t * X, X, K, hp->expert_weights_norm,
				  mo->ids + (size_t)t * K, mo->weights + (size_t)t * K);
	if (hp->n_expert_shared && hp->relu2) { /* nemotron_h_moe: its ReLU^2 */
		relu2_ffn(mm, &L->up_shexp, &L->down_shexp, xb, mo->su, mo->sh, n_tok);
	} else if (hp->n_expert_shared) { /* glm4moe: the shared expert's SwiGLU of every row */
		const int64_t FS = (int64_t)model_ff_shexp(hp);
		const struct model_weight *w[2] = {&L->gate_shexp, &L->up_shexp};
		const float *x[2] = {xb, xb};
		float *y[2] = {mo->sg, mo->su};
		const int64_t ld[2] = {FS, FS};
		mm->run(mm->ctx, BACKEND_CPU_MM_GATE_UP, 2, w, x, y, ld, n_tok, NULL);
		if (L->clamp_shexp > 0.0f) /* step35: clamped here, no prologue below */
			cpu_swiglu_clamp(mo->sg, mo->su, (int64_t)n_tok * FS, L->clamp_shexp);
		const struct model_weight *wd[1] = {&L->down_shexp};
		const float *xd[1] = {mo->sg};
		float *yd[1] = {mo->sh};
		const int64_t ldd[1] = {E};
		mm->run(mm->ctx, BACKEND_CPU_MM_DOWN, 1, wd, xd, yd, ldd, n_tok,
			L->clamp_shexp > 0.0f ? NULL : mo->su);
	}
	if (hp->shexp_gate) { /* qwen35moe, qwen2moe: its gate, sigmoid(gate_inp_shexp x) */
		const struct model_weight *w[1] = {&L->gate_inp_shexp};
		const float *x[1] = {xb};
		float *y[1] = {mo->sgate};
		const int64_t ld[1] = {1};
		mm->run(mm->ctx, BACKEND_CPU_MM_GATE_UP, 1, w, x, y, ld, n_tok, NULL);
		for (int32_t t = 0; t < n_tok; t++) /* ggml_vec_sigmoid_f32 */
			mo->sgate[t] = 1.0f / (1.0f + expf(-mo->sgate[t]));
	}
	/* (token, slot) entries grouped by expert, in token order within an expert */
	memset(mo->start, 0, ((size_t)X + 1) * sizeof *mo->start);
	const int32_t n_ent = n_tok * (int32_t)K;
	for (int32_t i = 0; i < n_ent; i++)
		mo->start[mo->ids[i] + 1]++;
	for (uint32_t e = 0; e < X; e++)
		mo->start[e + 1] += mo->start[e];
	for (int32_t i = 0; i < n_ent; i++) {
		/* start[e] is used as expert e's fill pointer, then restored below */
		mo->order[mo->start[mo->ids[i]]++] = i;
	}
	for (uint32_t e = X; e > 0; e--)
		mo->start[e] = mo->start[e - 1];
	mo->start[0] = 0;
	/* each expert with rows: gather, gate | up, SiLU(gate) * up, down, scatter */
	for (uint32_t e = 0; e < X; e++) {
		const int32_t r0 = mo->start[e], n = mo->start[e + 1] - r0;
		if (n == 0)
			continue;
		for (int32_t r = 0; r < n; r++) {
			const int32_t t = mo->order[r0 + r] / (int32_t)K;
			memcpy(mo->xg + (size_t)r * E, xb + (size_t)t * E, (size_t)E * sizeof(float));
			if (hp->moe_weight_in) { /* llama4: the weight on the expert's input */
				const float w = mo->weights[mo->order[r0 + r]];
				for (int64_t i = 0; i < E; i++)
					mo->xg[(size_t)r * E + i] *= w;
			}
		}
		const struct model_weight gate = model_expert(&L->gate_exps, e);
		const struct model_weight up = model_expert(&L->up_exps, e);
		const struct model_weight down = model_expert(&L->down_exps, e);
		if (hp->relu2) { /* nemotron_h_moe: up, ReLU^2, down; then the scatter below */
			relu2_ffn(mm, &up, &down, mo->xg, mo->u, mo->yg, n);
			goto scatter;
		}
		{
			const struct model_weight *w[2] = {&gate, &up};
			const float *x[2] = {mo->xg, mo->xg};
			float *y[2] = {mo->g, mo->u};
			const int64_t ld[2] = {FX, FX};
			mm->run(mm->ctx, BACKEND_CPU_MM_GATE_UP, 2, w, x, y, ld, n, NULL);
		}
		if (hp->moe_bias) { /* gpt-oss: expert e's gate and up biases */
			add_vec(mo, mo->g, FX, n, model_expert(&L->gate_exps_b, e).data, FX);
			add_vec(mo, mo->u, FX, n, model_expert(&L->up_exps_b, e).data, FX);
		}
		if (hp->swiglu_oai)
			for (int32_t r = 0; r < n; r++)
				swiglu_oai(mo->g + (size_t)r * FX, mo->u + (size_t)r * FX, FX,
					   hp->swiglu_alpha, hp->swiglu_limit);
		const bool act_done = hp->swiglu_oai || L->clamp_exp > 0.0f;
		if (L->clamp_exp > 0.0f) /* step35: the routed experts' clamp */
			cpu_swiglu_clamp(mo->g, mo->u, (int64_t)n * FX, L->clamp_exp);
		{
			const struct model_weight *w[1] = {&down};
			const float *x[1] = {mo->g};
			float *y[1] = {mo->yg};
			const int64_t ld[1] = {E};
			/* SiLU(gate) * up in the matmul's prologue, unless done above */
			mm->run(mm->ctx, BACKEND_CPU_MM_DOWN, 1, w, x, y, ld, n,
				act_done ? NULL : mo->u);
		}
		if (down_scale) /* gemma4: expert e's output times its scale, as ggml_mul */
			for (int64_t i = 0; i < (int64_t)n * E; i++)
				mo->yg[i] *= down_scale[e];
		if (hp->moe_bias) /* and its down bias, before the routing weight */
			add_vec(mo, mo->yg, E, n, model_expert(&L->down_exps_b, e).data, E);
	scatter:
		for (int32_t r = 0; r < n; r++)
			memcpy(mo->ys + (size_t)mo->order[r0 + r] * E, mo->yg + (size_t)r * E,
			       (size_t)E * sizeof(float));
	}
	/* the weighted sum in slot order, as llama.cpp adds the weighted experts' outputs */
	for (int32_t t = 0; t < n_tok; t++) {
		float *o = out + (size_t)t * E;
		const float *wt = mo->weights + (size_t)t * K;
		const float *y = mo->ys + (size_t)t * K * E;
		if (hp->moe_weight_in) { /* llama4: weighted before, summed as they are */
			memcpy(o, y, (size_t)E * sizeof(float));
			for (uint32_t j = 1; j < K; j++)
				for (int64_t i = 0; i < E; i++)
					o[i] += y[(size_t)j * E + i];
		} else {
			for (int64_t i = 0; i < E; i++)
				o[i] = wt[0] * y[i];
			for (uint32_t j = 1; j < K; j++)
				for (int64_t i = 0; i < E; i++)
					o[i] += wt[j] * y[(size_t)j * E + i];
		}
		if (hp->shexp_gate) /* qwen35moe, qwen2moe: routed + shared * its gate */
			for (int64_t i = 0; i < E; i++)
				o[i] += mo->sh[(size_t)t * E + i] * mo->sgate[t];
		else if (hp->n_expert_shared) /* glm4moe: routed + shared, as llama.cpp adds them */
			for (int64_t i = 0; i < E; i++)
				o[i] += mo->sh[(size_t)t * E + i];
	}
}
