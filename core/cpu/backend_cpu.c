/* backend_cpu: the reference Llama forward pass on the host (see backend_cpu.h), with the
 * qwen2 variant (Q/K/V biases, NeoX RoPE) where the model says so.
 *
 * Batch invariance: every step below works on one token row at a time (RMSNorm, the QKV
 * bias, RoPE, attention for one (token, head), the SwiGLU) or is a matmul whose (token, feature)
 * dot products have a fixed order (cpu_kernels.h). Threads only split the set of independent
 * rows/features/heads, never one reduction, so a row's bits do not depend on the batch
 * or on the thread count.
 *
 * KV pool, fp32: for layer l, K is kv[(2l) * n_blocks * block_size * kv_max ...] laid out
 * [n_blocks][block_size][kv_max] and V follows at 2l + 1, kv_max = n_head_kv * head_dim
 * (gemma4: the larger of its two layer kinds'; a layer uses the first n_head_kv * head_dim
 * of its kind, model_kv_dim_max).
 * The swap unit of one block is, for every layer in order, its K slab then its V slab.
 * lfm2's conv layers keep their bx row of each position there instead (model.h): its first
 * kv_max values in the K slot, the rest in the V slot (conv_row_ptr).
 */
#include "cpu/backend_cpu.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_deltanet.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_moe.h"
#include "cpu/cpu_ssm.h"
#include "cpu/cpu_weights.h"
#include "cpu/qdot.h"
#include "threadpool.h"
#include "model/arch.h"
#include "model/moe.h"
#include "model/quant.h"

struct cpu_ctx {
	const struct model *m; /* &w.m: the model with its weights in w's copy */
	struct cpu_weights w;
	struct model_hparams hp;
	uint32_t kv_window; /* model_kv_window: block table entries before it may be -1 */
	enum cpuk_level lvl;
	struct tp_pool *pool;
	int n_threads;

	int32_t block_size;
	int32_t n_blocks;
	int64_t kv_dim; /* n_head_kv * head_dim of the layer being computed (forward) */
	int64_t q_dim;	/* n_head * head_dim likewise; both the global layers' outside it */
	int64_t hd;	/* that layer's head size, */
	int64_t n_kvh;	/* its K/V heads */
	int64_t n_qh;	/* its query heads (step35's windowed layers: their own) */
	int32_t half;	/* and rotated pairs */
	int64_t kv_max, q_max; /* the largest over the layer kinds (model_kv_dim_max ...) */
	float *ones;	       /* [head_dim_max] 1: gemma4's V norm has no weight */
	/* gemma4 E2B/E4B (hp.n_embd_per_layer = P > 0): each layer's input for the batch's
	 * tokens [n_layer][cap_tok][P], the model-wide projection's rows [cap_tok][n_layer P],
	 * the gate's output [cap_tok][P]; the norms' weights: pl_norms [P] (per_layer_proj_norm)
	 * then [n_layer][n_embd] (each layer's post_norm) */
	float *ple, *ple_proj, *ple_gate, *pl_norms;
	float *kv; /* [n_kv_slabs][kv_parts][n_blocks][block_size][kv_max] */
	/* the slab of layer l's cache (kv_slab_of), or KV_NONE: its cache layers only, so that
	 * qwen35's delta nets and the Mamba2 hybrids' recurrent and FFN layers hold none */
	uint32_t *kv_slab;
	uint32_t n_kv_slabs;
	uint32_t kv_parts; /* 2: K and V; 1 with hp.mla (V is the K row: kv_v == kv_k) */
	size_t kv_bytes;

	float *norms; /* [2 * n_layer + 1][n_embd]: attn, ffn per layer, then output */
	/* qwen2: [n_layer][q_dim + 2 * kv_dim], per layer the Q, K then V bias; NULL without
	 * biases. Copied (memcpy) so that a file's 4-byte misaligned f32 data is never read
	 * through a float pointer. */
	float *biases;
	/* gpt-oss: [n_layer][n_head + n_embd], per layer the attention sinks then the
	 * attention output's bias (copied likewise); NULL for other models */
	float *oai;
	/* per layer [q_norm (qn_dim), k_norm (kn_dim), attn_post_norm (n_embd),
	 * ffn_post_norm (n_embd)], the parts the model has (others left 0); NULL when the
	 * model has neither Q/K norms nor post-norms. qn_dim, kn_dim: the width of one Q/K
	 * norm group, head_dim, or the whole rows q_dim, kv_dim (hp.qk_norm_full) */
	float *extra_norms;
	size_t extra_per_layer;
	int64_t qn_dim, kn_dim;
	/* RoPE: per rotated pair the angle per position and the cos/sin scale
	 * (arch_rope_freqs), for the global layers and the windowed ones */
	double *freq, *freq_swa; /* [rope_dim / 2] each */
	float mscale, mscale_swa;
	bool rope_swa_differs;

	/* activations, sized for cap_tok tokens */
	int32_t cap_tok;
	float *x;	  /* [cap_tok][n_embd] residual stream */
	float *xb;	  /* [cap_tok][n_embd] normalized input / projection output */
	float *par;	  /* [cap_tok][n_embd] hp.parallel: the attention branch's output */
	/* hp.gemma4_moe: [cap_tok][n_embd] each, the experts' input / output and the router's
	 * input; g4w per layer [pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2,
	 * ffn_gate_inp.scale (n_embd each), ffn_down_exps.scale (n_expert)], f32 copies */
	float *g4a, *g4b, *g4w;
	float *q;	  /* [cap_tok][q_dim] */
	float *k;	  /* [cap_tok][kv_dim] */
	float *v;	  /* [cap_tok][kv_dim] */
	float *att;	  /* [cap_tok][q_dim] attention output */
	float *hb;	  /* [cap_tok][n_ff] */
	float *hb2;	  /* [cap_tok][n_ff] */
	float *rope;	  /* [cap_tok][rope_dim / 2][2] cos, sin */
	float *rope_swa;  /* likewise for the windowed layers, when their RoPE differs */
	int32_t *tok_pos; /* [cap_tok] */
	int32_t *tok_seq; /* [cap_tok] */
	/* quantized weights: the activations of up to 3 matmuls of one dispatch quantized
	 * into llama.cpp's 8-bit blocks (cpu/qdot), each slot [cap_tok][qact_row] bytes */
	enum qdot_isa qisa;
	size_t qact_row; /* qdot_act_row_bytes' bound for the model's longest input row */
	uint8_t *qact;	 /* [3][cap_tok][qact_row] */

	int32_t cap_ctx;
	float *att_scores; /* [n_threads][cap_ctx] */

	/* logits of the last forward */
	int32_t cap_logits;
	int32_t n_logits;
	float *xf;     /* [cap_logits][n_embd] final-normed rows that want logits */
	float *logits; /* [cap_logits][n_vocab] */

	void *samp_scratch; /* [n_threads][samp_bytes]: the sampler's, then a constrained row */
	size_t samp_bytes;
	/* the tokens the last sample call drew, for the next forward's prev_rows */
	int32_t *last_tok; /* [cap_last] */
	int32_t n_last, cap_last;

	const struct backend_batch *batch; /* during forward */

	struct backend_cpu_profile *prof; /* NULL: off (backend_cpu_profile) */
	/* weight prefetch in idle memory time (struct pf_plan): bytes of a matmul's head, for
	 * forwards of at most pf_max_tok token rows (decode; 0 bytes: off) */
	size_t pf_bytes;
	int32_t pf_max_tok;

	struct cpu_moe *moe; /* hp.n_expert > 0: the experts' FFN (cpu_moe.h), else NULL */
	/* deepseek2 (hp.mla): per layer [q_a_norm (n_lora_q), kv_a_norm (n_lora_kv)] as f32
	 * copies; hb and hb2 are hb_w wide (n_ff, or wider for MLA's scratch rows) */
	float *mla_norms;
	int64_t hb_w;
	/* BG_CPU_MLA_PER_HEAD=1 (tests, benchmarks): attn_k_b and attn_v_b as one dispatch per
	 * head (mla_mm), the path before mm_heads; the same bits */
	bool mla_per_head;
	/* lfm2 (hp.conv_l): the conv layers' taps as f32 copies, [n_layer][n_embd][conv_l];
	 * qwen35 (hp.gdn_conv): [n_layer][CD][gdn_conv] (cpu_deltanet.h); conv_per floats a
	 * layer (attention layers' rows unused) */
	float *conv_w;
	size_t conv_per;
	/* recurrent state (model_state_floats, backend.h's state slots): n_state_slots slots
	 * of state_floats values each, slot-major; layer l's at state_off[l] within a slot */
	float *state;
	uint64_t *state_off; /* [n_layer + 1] */
	size_t state_floats;
	int32_t n_state_slots;
	/* qwen35's delta-net layers: the projections of the batch's tokens, gdn_u [cap_tok][CD],
	 * gdn_z [cap_tok][VD], gdn_b and gdn_a [cap_tok][gdn_nv]; per layer f32 copies of
	 * ssm_dt.bias, ssm_a (gdn_nv each) and ssm_norm (gdn_d): gdn_vec [n_layer][2 nv + d] */
	float *gdn_u, *gdn_z, *gdn_b, *gdn_a, *gdn_vec;
	/* granitehybrid (hp.ssm_d_conv): the Mamba2 layers' small weights as f32 copies, per
	 * layer ssm_per values: conv_w [C][d_conv], conv_b [C], dt_b, A, D [H] each, norm
	 * [D] (cpu_ssm.h; other layers' unused) */
	float *ssm_w;
	size_t ssm_per;
	int32_t *ssm_t0; /* [cap_tok + 1] during a Mamba2 block: sequence i's first token */
	struct cpu_ssm_dims ssm;
};

/* ---- helpers ---- */

#define KV_NONE UINT32_MAX

/* Whether layer l (*L) keeps a KV cache: not gemma4's shared-KV layers (they read an
 * earlier layer's), nor the layers whose state is elsewhere or which attend to nothing
 * (qwen35's delta nets, Mamba2 blocks, nemotron_h's FFN-only layers). lfm2's conv layers
 * keep their bx rows there. */
static bool kv_slab_of(const struct model_hparams *hp, const struct model_layer *L, uint32_t l)
{
	return l < model_n_layer_kv(hp) && !L->gdn && !L->ssm && !L->ffn_only;
}

/* Layer l's recurrent state (model_state_floats values) in state slot `slot`. */
static inline float *state_at(struct cpu_ctx *c, int32_t slot, uint32_t layer)
{
	return c->state + (size_t)slot * c->state_floats + c->state_off[layer];
}

/* The profile's clock in seconds; 0 without reading it when the profile is off. */
static inline double prof_now(const struct cpu_ctx *c)
{
	if (!c->prof)
		return 0.0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Adds the time since *t0 to *acc and restarts *t0 (profile on only). */
static inline void prof_lap(const struct cpu_ctx *c, double *t0, double *acc)
{
	if (!c->prof)
		return;
	double t = prof_now(c);
	*acc += t - *t0;
	*t0 = t;
}

static int weight_rows_ok(const struct model_weight *w)
{
	return w->data != NULL && cpuk_row_bytes(w->type, (int64_t)w->ne0) != 0;
}

static enum bg_status check_weight(const struct model_weight *w, const char *name, int layer,
				   struct bg_err *err)
{
	if (!w->data)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CPU backend needs materialized weights (%s has no data)", name);
	if (!weight_rows_ok(w))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CPU backend does not support tensor %s (layer %d): type %d, "
			       "row length %llu",
			       name, layer, (int)w->type, (unsigned long long)w->ne0);
	return BG_OK;
}

/* Replaces *pp by a zeroed array of n elements of size sz (contents not kept); 0 when out
 * of memory. */
static int grow(void *pp, size_t n, size_t sz)
{
	void **p = pp;
	free(*p);
	*p = calloc(n ? n : 1, sz);
	return *p != NULL;
}

/* The capacity to grow cur to for n items: doubling from cur (or first) until n fit, so
 * buffers are reallocated O(log n) times. */
static int32_t grown_cap(int32_t cur, int32_t first, int32_t n)
{
	int32_t cap = cur ? cur : first;
	while (cap < n)
		cap *= 2;
	return cap;
}

static enum bg_status ensure_tokens(struct cpu_ctx *c, int32_t n, struct bg_err *err)
{
	if (n <= c->cap_tok)
		return BG_OK;
	int32_t cap = grown_cap(c->cap_tok, 16, n);
	const struct model_hparams *hp = &c->hp;
	size_t t = (size_t)cap;
	const bool par = hp->parallel || hp->ssm_parallel; /* command-r; falcon-h1 */
	int ok = grow(&c->x, t * hp->n_embd, sizeof(float)) &&
		 grow(&c->xb, t * hp->n_embd, sizeof(float)) &&
		 (!par || grow(&c->par, t * hp->n_embd, sizeof(float))) &&
		 (!hp->gemma4_moe || (grow(&c->g4a, t * hp->n_embd, sizeof(float)) &&
				      grow(&c->g4b, t * hp->n_embd, sizeof(float)))) &&
		 grow(&c->q, t * (size_t)c->q_max, sizeof(float)) &&
		 grow(&c->k, t * (size_t)c->kv_max, sizeof(float)) &&
		 grow(&c->v, t * (size_t)c->kv_max, sizeof(float)) &&
		 grow(&c->att, t * (size_t)c->q_max, sizeof(float)) &&
		 grow(&c->hb, t * (size_t)c->hb_w, sizeof(float)) &&
		 grow(&c->hb2, t * (size_t)c->hb_w, sizeof(float)) &&
		 grow(&c->rope, t * (hp->rope_dim / 2) * 2, sizeof(float)) &&
		 grow(&c->rope_swa, t * (model_rope_dim(hp, true) / 2) * 2, sizeof(float)) &&
		 grow(&c->tok_pos, t, sizeof(int32_t)) && grow(&c->tok_seq, t, sizeof(int32_t)) &&
		 (!hp->ssm_d_conv || grow(&c->ssm_t0, t + 1, sizeof(int32_t))) &&
		 (!hp->n_embd_per_layer ||
		  (grow(&c->ple, t * hp->n_layer * hp->n_embd_per_layer, sizeof(float)) &&
		   grow(&c->ple_proj, t * hp->n_layer * hp->n_embd_per_layer, sizeof(float)) &&
		   grow(&c->ple_gate, t * hp->n_embd_per_layer, sizeof(float)))) &&
		 grow(&c->qact, 3 * t, c->qact_row) &&
		 (!hp->gdn_conv || /* qwen35 */
		  (grow(&c->gdn_u, t * (size_t)cpu_gdn_conv_dim(hp), sizeof(float)) &&
		   grow(&c->gdn_z, t * (size_t)cpu_gdn_v_dim(hp), sizeof(float)) &&
		   grow(&c->gdn_b, t * hp->gdn_nv, sizeof(float)) &&
		   grow(&c->gdn_a, t * hp->gdn_nv, sizeof(float)))) &&
		 (!c->moe || cpu_moe_reserve(c->moe, cap, err) == BG_OK);
	if (!ok) {
		c->cap_tok = 0;
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for activations of %d tokens", n);
	}
	c->cap_tok = cap;
	return BG_OK;
}

/* Makes the float arrays *a ([*cap][row_a]) and *b ([*cap][row_b]; b NULL: none) hold at
 * least n rows, *cap growing as grown_cap(*cap, first, n). 0 when out of memory, with *cap
 * 0 so that the next call allocates again. */
static int grow_rows(int32_t *cap, int32_t first, int32_t n, float **a, size_t row_a, float **b,
		     size_t row_b)
{
	if (n <= *cap)
		return 1;
	int32_t want = grown_cap(*cap, first, n);
	if (!grow(a, (size_t)want * row_a, sizeof(float)) ||
	    (b && !grow(b, (size_t)want * row_b, sizeof(float)))) {
		*cap = 0;
		return 0;
	}
	*cap = want;
	return 1;
}

static enum bg_status ensure_ctx(struct cpu_ctx *c, int32_t n, struct bg_err *err)
{
	if (!grow_rows(&c->cap_ctx, 256, n, &c->att_scores, (size_t)c->n_threads, NULL, 0))
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for attention of %d positions", n);
	return BG_OK;
}

static enum bg_status ensure_logits(struct cpu_ctx *c, int32_t n, struct bg_err *err)
{
	if (!grow_rows(&c->cap_logits, 4, n, &c->xf, c->hp.n_embd, &c->logits, c->hp.n_vocab))
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for %d logits rows", n);
	return BG_OK;
}

static size_t workspace_bytes(const struct cpu_ctx *c)
{
	const struct model_hparams *hp = &c->hp;
	size_t t = (size_t)c->cap_tok;
	const bool par = hp->parallel || hp->ssm_parallel; /* c->par */
	size_t per_tok = (((par ? 3 : 2) + (hp->gemma4_moe ? 2 : 0)) * (size_t)hp->n_embd +
			  2 * (size_t)c->q_max + 2 * (size_t)c->kv_max + 2 * (size_t)c->hb_w +
			  (hp->rope_dim / 2) * 2 + (model_rope_dim(hp, true) / 2) * 2) *
			     sizeof(float) +
			 2 * sizeof(int32_t);
	return t * per_tok + (size_t)c->cap_ctx * c->n_threads * sizeof(float) +
	       (size_t)c->cap_logits * ((size_t)hp->n_embd + hp->n_vocab) * sizeof(float) +
	       c->samp_bytes * c->n_threads + cpu_moe_bytes(c->moe);
}

/* A layer's K and V slabs; deepseek2 (hp.mla) stores K only, its V being the K row */
static inline float *kv_k(const struct cpu_ctx *c, uint32_t layer)
{
	return c->kv +
	       (size_t)(c->kv_parts * c->kv_slab[layer]) * c->n_blocks * c->block_size * c->kv_max;
}

static inline float *kv_v(const struct cpu_ctx *c, uint32_t layer)
{
	return kv_k(c, layer) + (size_t)(c->kv_parts - 1) * c->n_blocks * c->block_size * c->kv_max;
}

/* out = x / sqrt(mean(x^2) + eps) * w; the sum of squares runs in order, in double. */
static void rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps)
{
	double ss = 0.0;
	for (int64_t i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
	for (int64_t i = 0; i < n; i++)
		out[i] = (x[i] * scale) * w[i];
}

/* out = (x - mean) * (1 / sqrt(var + eps)) * w, var the mean of (x - mean)^2: ggml_norm
 * then the weight (command-r, cohere2). The mean is rounded to fp32 before it is
 * subtracted, as ggml does; both sums run in order, in double. */
static void layernorm(float *out, const float *x, const float *w, int64_t n, float eps)
{
	double s = 0.0;
	for (int64_t i = 0; i < n; i++)
		s += (double)x[i];
	const float mean = (float)(s / (double)n);
	double ss = 0.0;
	for (int64_t i = 0; i < n; i++) {
		const float d = x[i] - mean;
		ss += (double)d * d;
	}
	const float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
	for (int64_t i = 0; i < n; i++)
		out[i] = ((x[i] - mean) * scale) * w[i];
}

/* The model's pre-norm (attn_norm, ffn_norm, output_norm) and Q/K norm: a LayerNorm with
 * hp.layer_norm, else an RMS norm */
static void pre_norm(const struct model_hparams *hp, float *out, const float *x, const float *w,
		     int64_t n)
{
	if (hp->layer_norm)
		layernorm(out, x, w, n, hp->rms_eps);
	else
		rmsnorm(out, x, w, n, hp->rms_eps);
}

/* y[t * ldy + i] += bias[i] for every token row t < n_tok and i < n: one addition per
 * element, so a row's result does not depend on the batch. */
static void add_bias(float *y, int64_t ldy, int32_t n_tok, const float *bias, int64_t n)
{
	for (int32_t t = 0; t < n_tok; t++)
		for (int64_t i = 0; i < n; i++)
			y[(int64_t)t * ldy + i] += bias[i];
}

/* ---- parallel matmuls ---- */

/* Weight prefetch while memory would idle (issue 12, decode forwards of <= pf_max_tok
 * rows): a dispatch's prologue pieces (between steps of their blocks) and the attention
 * dispatch before attn_output (after each head) prefetch, slice by slice, the *head* of
 * the matmul that comes next: pf_bytes in all from the starts of the chunks the threads
 * take first (tasks are taken in index order, one chunk of rows each, so the first
 * n_threads chunks start the stream). A prefetch changes no value. Measured on TinyLlama
 * B = 1 (bench/results/q12t-2026-11-30.md): ~0.1 ms of a 20-40 ms step, near the VM's
 * noise; 512 KiB did as well as 1 MiB and 256 KiB. */
#define PF_MAX 8 /* ranges of a plan: one per thread's first chunk, up to 8 threads */
#define PF_SUB 4 /* prefetch points per prologue piece */

struct pf_plan {
	const char *p[PF_MAX]; /* [n] range starts */
	size_t len[PF_MAX];    /* [n] range lengths, bytes */
	int n;
	size_t total; /* sum of len */
};

/* Prefetches slice k of K of the plan's bytes (the ranges end to end), one cache line at a
 * time, into L2 (prefetcht1). */
static void pf_slice(const struct pf_plan *pl, int32_t k, int32_t K)
{
	if (!pl || pl->total == 0 || K <= 0)
		return;
	size_t a = pl->total * (size_t)k / (size_t)K, b = pl->total * (size_t)(k + 1) / (size_t)K;
	size_t off = 0;
	for (int i = 0; i < pl->n && a < b; i++) {
		size_t lo = off, hi = off + pl->len[i];
		off = hi;
		if (a >= hi)
			continue;
		size_t s0 = a - lo, s1 = (b < hi ? b : hi) - lo;
		for (size_t o = s0 & ~(size_t)63; o < s1; o += 64)
			__builtin_prefetch(pl->p[i] + o, 0, 2);
		a = lo + s1;
	}
}

/* Rows per matmul task for a dispatch of total_rows rows (a multiple of 4, >= 16): several
 * tasks per thread to balance the load. */
static int64_t mm_chunk_rows(const struct cpu_ctx *c, int64_t total_rows)
{
	int64_t target = c->n_threads > 1 ? total_rows / (c->n_threads * 4) : total_rows;
	if (target < 16)
		target = 16;
	return (target + 3) & ~(int64_t)3;
}

/* The plan for the head of a dispatch of matmuls w[0..n) in chunks of `chunk` rows
 * (mm_chunk_rows of its rows, job after job): bytes (c->pf_bytes in all) from the start of
 * each of its first n_threads chunks. Empty when c->pf_bytes is 0. */
static void pf_head(const struct cpu_ctx *c, int n, const struct model_weight *const *w,
		    int64_t chunk, struct pf_plan *pl)
{
	pl->n = 0;
	pl->total = 0;
	if (c->pf_bytes == 0)
		return;
	int want = c->n_threads < PF_MAX ? c->n_threads : PF_MAX;
	size_t per = c->pf_bytes / (size_t)want;
	for (int i = 0; i < n && pl->n < want; i++) {
		const size_t rb = cpuk_row_bytes(w[i]->type, (int64_t)w[i]->ne0);
		for (int64_t r0 = 0; r0 < (int64_t)w[i]->ne1 && pl->n < want; r0 += chunk) {
			int64_t r1 =
			    r0 + chunk < (int64_t)w[i]->ne1 ? r0 + chunk : (int64_t)w[i]->ne1;
			size_t len = (size_t)(r1 - r0) * rb;
			pl->p[pl->n] = (const char *)w[i]->data + (size_t)r0 * rb;
			pl->len[pl->n] = len < per ? len : per;
			pl->total += pl->len[pl->n];
			pl->n++;
		}
	}
}

/* A job multiplies n_mat matrices of w->ne1 rows of w->ne0 (1, or deepseek2's per-head
 * attn_k_b / attn_v_b: mm_heads), matrix i stored w_mat bytes after matrix i - 1, its
 * input x + i x_mat, its output y + i y_mat, its quantized input qx + i q_mat. Its tasks
 * are the (matrix, chunk of rows) pairs, per_mat chunks per matrix. */
struct mm_job {
	const struct model_weight *w;
	const float *x; /* [n_tok][ldx] */
	int64_t ldx;
	float *y; /* [n_tok][ldy] */
	int64_t ldy;
	const uint8_t *qx; /* quantized weights: x as qdot_quantize_row made it, else NULL */
	size_t ldq;	   /* bytes between qx's rows */
	int32_t n_mat, per_mat;
	size_t w_mat, q_mat;
	int64_t x_mat, y_mat;
	int64_t chunk; /* rows per task */
	int32_t first_task;
};

/* A dispatch's prologue: the activation quantizations (and, before the down projection, the
 * FFN's gated activation) cut into pieces that run as the dispatch's first tasks, on every
 * thread, instead of serially before it. A piece is blocks [b0, b1) of one token row of one
 * input; quantization is block by block (qdot.h), so each byte is the same whichever piece
 * or thread makes it, and the gated activation is element by element. */
struct mm_pre {
	const float *x; /* [n_tok][ldx] the input (for glu: g, which it overwrites first) */
	int64_t k, ldx;
	/* nh inputs of k per token row (mm_heads), input i at x + i xh quantized to dst + i dh
	 * bytes; the pieces cut the row's nh * nb blocks, head after head */
	int32_t nh;
	int64_t xh;
	size_t dh;
	enum gguf_dtype t; /* the weight type quantized for (dst != NULL) */
	uint8_t *dst;	   /* [n_tok][ldq] quantized rows, or NULL: only the glu */
	size_t ldq;
	int64_t be;	    /* elements per piece block: the quant block, or 64 for glu only */
	size_t bb;	    /* bytes of one quantized block */
	int64_t nb;	    /* blocks per row, the last one possibly short (glu only) */
	int64_t per_piece;  /* blocks per piece */
	int32_t per_row;    /* pieces per row */
	int32_t first_task; /* its first prologue task */
	const float *glu_u; /* non-NULL: first g = act(g) * u on the piece (ld k), act SiLU or */
	bool gelu;	    /* GELU (tanh form) */
};

struct mm_run {
	struct cpu_ctx *c;
	struct mm_job jobs[3];
	int n_jobs;
	int32_t n_tok;
	struct mm_pre pre[3];
	int n_pre;
	int32_t pre_tasks; /* tasks [0, pre_tasks) are the prologue's, the matmuls' after them */
	atomic_int pre_done;
	double t_pre_end;  /* profile on: when the last prologue piece was done */
	struct pf_plan pf; /* this dispatch's head, prefetched by the prologue's pieces */
};

/* The FFN's gated activation of elements [i0, i1) of g and u: g = act(g) * u, SiLU or GELU
 * (tanh form; ggml's gelu, which llama.cpp's CPU build looks up in an f16 table, within
 * 2^-11 relative of this). Element by element: the bits do not depend on the range. */
static void ffn_glu(float *g, const float *u, int64_t i0, int64_t i1, bool gelu)
{
	if (gelu) {
		const float k0 = 0.79788456080286535588f, k1 = 0.044715f;
		for (int64_t i = i0; i < i1; i++) {
			float v = g[i];
			g[i] = 0.5f * v * (1.0f + tanhf(k0 * v * (1.0f + k1 * v * v))) * u[i];
		}
	} else {
		for (int64_t i = i0; i < i1; i++) {
			float v = g[i];
			g[i] = v / (1.0f + expf(-v)) * u[i];
		}
	}
}

/* apertus's xIELU (model.h) on n values in place, p = model_layer.xielu {an, ap, beta,
 * eps}, as ggml's CPU op computes it in fp32 (expm1f, fminf). Element by element. */
static void xielu_rows(float *x, int64_t n, const float p[4])
{
	const float an = p[0], ap = p[1], beta = p[2], eps = p[3];
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		x[i] = v > 0.0f ? ap * v * v + beta * v
				: (expm1f(fminf(v, eps)) - v) * an + beta * v;
	}
}

static void mm_pre_task(const struct mm_run *r, int32_t task)
{
	int p = r->n_pre - 1;
	while (task < r->pre[p].first_task)
		p--;
	const struct mm_pre *pr = &r->pre[p];
	const int32_t piece = task - pr->first_task;
	const int64_t tok = piece / pr->per_row, nbr = pr->nb * pr->nh;
	const int64_t b0 = (int64_t)(piece % pr->per_row) * pr->per_piece;
	const int64_t b1 = b0 + pr->per_piece < nbr ? b0 + pr->per_piece : nbr;
	/* in PF_SUB steps of whole blocks, each followed by its share of the dispatch's head
	 * prefetch, so that the prefetches' memory time overlaps the arithmetic */
	for (int32_t sub = 0; sub < PF_SUB; sub++) {
		const int64_t s1 = b0 + (b1 - b0) * (sub + 1) / PF_SUB;
		for (int64_t s0 = b0 + (b1 - b0) * sub / PF_SUB; s0 < s1;) {
			/* blocks [h0, h1) of input h (one head's, or the row when nh is 1) */
			const int64_t h = s0 / pr->nb, h0 = s0 % pr->nb;
			const int64_t h1 = h0 + (s1 - s0) < pr->nb ? h0 + (s1 - s0) : pr->nb;
			const float *x = pr->x + tok * pr->ldx + h * pr->xh;
			const int64_t e0 = h0 * pr->be,
				      e1 = h1 * pr->be < pr->k ? h1 * pr->be : pr->k;
			if (pr->glu_u) /* x is the caller's gate, writable (matmuls' contract) */
				ffn_glu((float *)x, pr->glu_u + tok * pr->k, e0, e1, pr->gelu);
			if (pr->dst)
				qdot_quantize_row_isa(r->c->qisa, pr->t, x + e0, e1 - e0,
						      pr->dst + (size_t)tok * pr->ldq +
							  (size_t)h * pr->dh + (size_t)h0 * pr->bb);
			s0 += h1 - h0;
		}
		pf_slice(&r->pf, task * PF_SUB + sub, r->pre_tasks * PF_SUB);
	}
}

static void mm_task(void *arg, int32_t task, int32_t thread)
{
	(void)thread;
	struct mm_run *r = arg;
	if (task < r->pre_tasks) {
		mm_pre_task(r, task);
		/* the last piece's thread alone writes t_pre_end; the caller reads it after
		 * tp_run, which waits for every worker */
		if (atomic_fetch_add_explicit(&r->pre_done, 1, memory_order_release) ==
			r->pre_tasks - 1 &&
		    r->c->prof)
			r->t_pre_end = prof_now(r->c);
		return;
	}
	/* Tasks are taken in index order, so every prologue task has been taken (and runs,
	 * without waiting, on some thread) before any matmul task: this wait ends. A piece
	 * takes microseconds; past ~4096 polls the thread running it has likely lost its
	 * core (a loaded machine), so the poll yields. */
	for (int spins = 0;
	     atomic_load_explicit(&r->pre_done, memory_order_acquire) < r->pre_tasks; spins++) {
		if (spins > 4096)
			sched_yield();
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	task -= r->pre_tasks;
	int j = r->n_jobs - 1;
	while (task < r->jobs[j].first_task)
		j--;
	const struct mm_job *jb = &r->jobs[j];
	const int32_t mat = (task - jb->first_task) / jb->per_mat;
	int64_t r0 = (int64_t)((task - jb->first_task) % jb->per_mat) * jb->chunk;
	int64_t r1 = r0 + jb->chunk;
	if (r1 > (int64_t)jb->w->ne1)
		r1 = (int64_t)jb->w->ne1;
	const char *w = (const char *)jb->w->data + (size_t)mat * jb->w_mat;
	float *y = jb->y + mat * jb->y_mat;
	if (jb->qx)
		qdot_matmul(r->c->qisa, jb->w->type, w, (int64_t)jb->w->ne0, r0, r1,
			    jb->qx + (size_t)mat * jb->q_mat, jb->ldq, r->n_tok, y, jb->ldy);
	else
		cpuk_matmul(r->c->lvl, jb->w->type, w, (int64_t)jb->w->ne0, r0, r1,
			    jb->x + mat * jb->x_mat, jb->ldx, r->n_tok, y, jb->ldy);
}

/* Quantized weights: whether the integer kernels (cpu/qdot) multiply this type. All block
 * types, Q8_0 included (issue 12: its int8 x int8 path is faster than the fp32 one at every
 * batch size and agrees more closely with llama.cpp; bench/results/q8int-2026-11-29.md). */
static bool qdot_uses(enum gguf_dtype t)
{
	return qdot_handles(t);
}

/* A prologue entry for input x of k elements per row (rows ldx apart; nh such inputs xh
 * apart per row, quantized dh bytes apart: mm_heads, else 1): quantized for t into dst
 * (NULL: none, pieces of 64 elements for the glu alone), cut into about 2 pieces per
 * thread. */
static void add_pre(struct cpu_ctx *c, struct mm_run *r, const float *x, int64_t ldx, int64_t k,
		    int32_t nh, int64_t xh, enum gguf_dtype t, uint8_t *dst, const float *glu_u,
		    bool gelu)
{
	struct mm_pre *pr = &r->pre[r->n_pre++];
	*pr = (struct mm_pre){.x = x,
			      .k = k,
			      .ldx = ldx,
			      .nh = nh,
			      .xh = xh,
			      .t = t,
			      .dst = dst,
			      .ldq = c->qact_row,
			      .glu_u = glu_u,
			      .gelu = gelu};
	if (dst) {
		pr->be = quant_block_elems(t);
		pr->bb = qdot_act_row_bytes(t, pr->be);
		pr->dh = qdot_act_row_bytes(t, k);
	} else {
		pr->be = 64;
	}
	pr->nb = (k + pr->be - 1) / pr->be;
	const int64_t nbr = pr->nb * nh;		     /* blocks per row */
	const int64_t want = 2 * (int64_t)c->n_threads; /* pieces for all rows together */
	int64_t rows_per = (want + r->n_tok - 1) / r->n_tok; /* pieces per row wanted */
	if (rows_per > nbr)
		rows_per = nbr;
	pr->per_piece = (nbr + rows_per - 1) / rows_per;
	pr->per_row = (int32_t)((nbr + pr->per_piece - 1) / pr->per_piece);
	pr->first_task = r->pre_tasks;
	r->pre_tasks += pr->per_row * r->n_tok;
}

/* Job i's activations to be quantized for its weight type into slot i of c->qact (by the
 * prologue), or those of an earlier job of the dispatch with the same input and block
 * format. glu_u: the input is the FFN's gate, to be replaced by act(gate) * glu_u first. */
static void quantize_act(struct cpu_ctx *c, struct mm_run *r, int i, const float *glu_u,
			 bool gelu)
{
	struct mm_job *jb = &r->jobs[i];
	const enum gguf_dtype t = jb->w->type;
	const int64_t k = (int64_t)jb->w->ne0;
	jb->ldq = c->qact_row;
	for (int j = 0; j < i; j++) {
		const struct mm_job *o = &r->jobs[j];
		if (o->qx && o->x == jb->x && (int64_t)o->w->ne0 == k &&
		    quant_block_elems(o->w->type) == quant_block_elems(t) &&
		    quant_has_offset(o->w->type) == quant_has_offset(t)) {
			jb->qx = o->qx;
			return;
		}
	}
	uint8_t *dst = c->qact + (size_t)i * (size_t)c->cap_tok * c->qact_row;
	add_pre(c, r, jb->x, jb->ldx, k, jb->n_mat, jb->x_mat, t, dst, glu_u, gelu);
	jb->qx = dst;
	jb->q_mat = qdot_act_row_bytes(t, k);
}

static void mm_dispatch(struct cpu_ctx *c, enum backend_cpu_mm kind, struct mm_run *r,
			int32_t tasks, const struct model_weight *const *w, int64_t target);

/* Runs up to 3 matmuls y_i = x_i W_i^T over n_tok rows in one pool dispatch, after its
 * prologue (struct mm_pre). Row chunks are multiples of 4 and give each thread several
 * tasks to balance the load. glu_u (n = 1, the down projection): x[0] is the FFN's gate,
 * [n_tok][ne0] like glu_u, and first becomes act(gate) * glu_u (SiLU, or GELU if gelu), in
 * the prologue: on every thread rather than serially (TinyLlama: 0.6 ms of a 22 ms decode
 * step; bench/results/q12f-2026-11-30.md). */
static void matmuls(struct cpu_ctx *c, enum backend_cpu_mm kind, int n,
		    const struct model_weight *const *w, const float *const *x, float *const *y,
		    const int64_t *ldy, int32_t n_tok, const float *glu_u, bool gelu)
{
	struct mm_run r = {.c = c, .n_jobs = n, .n_tok = n_tok};
	int64_t total_rows = 0;
	for (int i = 0; i < n; i++)
		total_rows += (int64_t)w[i]->ne1;
	const int64_t target = mm_chunk_rows(c, total_rows);
	int32_t tasks = 0;
	for (int i = 0; i < n; i++) {
		struct mm_job *jb = &r.jobs[i];
		*jb = (struct mm_job){.w = w[i],
				      .x = x[i],
				      .ldx = (int64_t)w[i]->ne0,
				      .y = y[i],
				      .ldy = ldy[i],
				      .n_mat = 1,
				      .chunk = target,
				      .first_task = tasks};
		jb->per_mat = (int32_t)(((int64_t)w[i]->ne1 + target - 1) / target);
		if (qdot_uses(w[i]->type) && n_tok <= c->cap_tok &&
		    qdot_act_row_bytes(w[i]->type, (int64_t)w[i]->ne0) <= c->qact_row)
			quantize_act(c, &r, i, i == 0 ? glu_u : NULL, gelu);
		tasks += jb->per_mat;
	}
	if (glu_u && !r.jobs[0].qx) /* not quantized: the prologue does the glu alone */
		add_pre(c, &r, x[0], (int64_t)w[0]->ne0, (int64_t)w[0]->ne0, 1, 0, w[0]->type, NULL,
			glu_u, gelu);
	mm_dispatch(c, kind, &r, tasks, w, target);
}

/* Runs r's prologue and then its matmul tasks (tasks of them) in one pool dispatch,
 * prefetching the head of the matrices w[0..r->n_jobs) (chunks of `target` rows) in
 * decode; the profile's accounting. */
static void mm_dispatch(struct cpu_ctx *c, enum backend_cpu_mm kind, struct mm_run *r,
			int32_t tasks, const struct model_weight *const *w, int64_t target)
{
	atomic_init(&r->pre_done, 0);
	const int n = r->n_jobs;
	if (r->pre_tasks > 0 && r->n_tok <= c->pf_max_tok)
		pf_head(c, n, w, target, &r->pf);
	const double t0 = prof_now(c);
	r->t_pre_end = t0;
	tp_run(c->pool, r->pre_tasks + tasks, mm_task, r);
	if (c->prof) {
		const double t1 = prof_now(c);
		struct backend_cpu_profile *p = c->prof;
		const enum backend_cpu_mm k = kind;
		p->mm_calls[k]++;
		p->mm_pre_s[k] += r->t_pre_end - t0;
		p->mm_s[k] += t1 - r->t_pre_end;
		for (int i = 0; i < n; i++)
			p->mm_bytes[k] += (double)r->jobs[i].n_mat * (double)w[i]->ne1 *
					  (double)cpuk_row_bytes(w[i]->type, (int64_t)w[i]->ne0);
	}
}

/* y + h y_mat = w[h] (x + h x_mat) for each of w's ne2 matrices (model_expert(w, h)) over
 * n_tok rows (x's ldx apart, y's ldy apart) in one pool dispatch: its tasks are the (matrix,
 * chunk of rows) pairs of all of them, the activations (qdot) quantized by its prologue,
 * each matrix's input of each row by itself, as the matrix alone would have them. Every
 * value is the one matmul1 on that matrix (and the input gathered) gives, bitwise
 * (cpu_kernels.h, qdot.h: a value depends on its row and token alone). deepseek2's
 * per-head attn_k_b / attn_v_b. */
static void mm_heads(struct cpu_ctx *c, enum backend_cpu_mm kind, const struct model_weight *w3,
		     const float *x, int64_t ldx, int64_t x_mat, float *y, int64_t ldy,
		     int64_t y_mat, int32_t n_tok)
{
	const struct model_weight w = model_expert(w3, 0), *ws[1] = {&w};
	const int64_t k = (int64_t)w.ne0, rows = (int64_t)w.ne1;
	struct mm_run r = {.c = c, .n_jobs = 1, .n_tok = n_tok};
	struct mm_job *jb = &r.jobs[0];
	const int32_t n_mat = (int32_t)w3->ne2;
	const int64_t target = mm_chunk_rows(c, n_mat * rows);
	*jb = (struct mm_job){.w = &w,
			      .x = x,
			      .ldx = ldx,
			      .y = y,
			      .ldy = ldy,
			      .n_mat = n_mat,
			      .w_mat = (size_t)model_expert_stride(w3),
			      .x_mat = x_mat,
			      .y_mat = y_mat,
			      .chunk = target};
	jb->per_mat = (int32_t)((rows + target - 1) / target);
	if (qdot_uses(w.type) && n_tok <= c->cap_tok &&
	    (size_t)n_mat * qdot_act_row_bytes(w.type, k) <= c->qact_row)
		quantize_act(c, &r, 0, NULL, false);
	mm_dispatch(c, kind, &r, n_mat * jb->per_mat, ws, target);
}

/* cpu_moe's matmuls: matmuls() with SiLU for the glu (GELU for gemma4's experts) */
static void moe_mm(void *ctx, enum backend_cpu_mm kind, int n, const struct model_weight *const *w,
		   const float *const *x, float *const *y, const int64_t *ldy, int32_t n_tok,
		   const float *glu_u)
{
	matmuls(ctx, kind, n, w, x, y, ldy, n_tok, glu_u, ((struct cpu_ctx *)ctx)->hp.gelu);
}

static void matmul1(struct cpu_ctx *c, enum backend_cpu_mm kind, const struct model_weight *w,
		    const float *x, float *y, int32_t n_tok)
{
	const struct model_weight *ws[1] = {w};
	const float *xs[1] = {x};
	float *ys[1] = {y};
	int64_t ld[1] = {(int64_t)w->ne1};
	matmuls(c, kind, 1, ws, xs, ys, ld, n_tok, NULL, false);
}

/* ---- attention ---- */

struct att_run {
	struct cpu_ctx *c;
	uint32_t layer;
	uint32_t kv_layer; /* the layer whose KV cache it reads (model_kv_layer) */
	int32_t n_items; /* n_tok * n_head */
	int32_t per_task;
	int32_t n_tasks;
	struct pf_plan pf; /* attn_output's head, prefetched by the tasks (struct pf_plan) */
};

/* One (token, head): causal attention over positions [0, pos] of the token's sequence,
 * through its block table. Scores and the weighted sum run in position order. */
static void attend_one(struct cpu_ctx *c, uint32_t layer, uint32_t kv_layer, int32_t t, int32_t h,
		       float *sc)
{
	const struct model_hparams *hp = &c->hp;
	const struct backend_seq *s = &c->batch->seqs[c->tok_seq[t]];
	int32_t pos = c->tok_pos[t];
	int64_t hd = c->hd; /* the layer's geometry (forward sets it) */
	int64_t kvh = h / (c->n_qh / c->n_kvh);
	const float *qv = c->q + (int64_t)t * c->q_dim + h * hd;
	const float *kb = kv_k(c, kv_layer), *vb = kv_v(c, kv_layer);
	int32_t bs = c->block_size;
	float scale = hp->attn_scale, cap = hp->attn_softcap;
	/* gpt-oss: head h's sink, one more logit in the softmax's max and denominator with no
	 * value (ggml's soft_max with sinks: max over scores and sink, then + exp(sink - max)) */
	const float *sink = c->oai && hp->attn_sinks
				? c->oai + (size_t)layer * (hp->n_head + hp->n_embd) + h
				: NULL;
	/* a windowed layer sees positions [pos - n_swa + 1, pos] (llama.cpp's standard SWA
	 * mask: masked when pos - j >= n_swa) */
	int32_t lo = 0;
	if (c->m->layers[layer].swa && hp->swa_chunked) /* llama4: pos's chunk (model.h) */
		lo = pos / (int32_t)hp->n_swa * (int32_t)hp->n_swa;
	else if (c->m->layers[layer].swa && pos >= (int32_t)hp->n_swa)
		lo = pos - (int32_t)hp->n_swa + 1;
	/* walk the sequence block by block: positions [j0, j1) live in one block */
	float mx = -INFINITY;
	for (int32_t j0 = lo; j0 <= pos;) {
		int32_t j1 = (j0 / bs + 1) * bs;
		if (j1 > pos + 1)
			j1 = pos + 1;
		int32_t n = j1 - j0;
		const float *kp = kb + ((size_t)s->block_table[j0 / bs] * bs + (size_t)(j0 % bs)) *
					   c->kv_max +
				  kvh * hd;
		/* the block's scores in one call: several key rows per pass, each dot
		 * bitwise as cpuk_dot_f32 */
		cpuk_dot_f32_rows(c->lvl, qv, kp, c->kv_max, n, hd, sc + j0);
		for (int32_t j = 0; j < n; j++) {
			float d = sc[j0 + j] * scale;
			if (cap > 0.0f) /* gemma2's soft-capping of the scores */
				d = cap * tanhf(d / cap);
			sc[j0 + j] = d;
			if (d > mx)
				mx = d;
		}
		j0 = j1;
	}
	if (sink && *sink > mx)
		mx = *sink;
	float sum = 0.0f;
	for (int32_t j = lo; j <= pos; j++) {
		sc[j] = expf(sc[j] - mx);
		sum += sc[j];
	}
	if (sink)
		sum += expf(*sink - mx);
	float *out = c->att + (int64_t)t * c->q_dim + h * hd;
	for (int64_t d = 0; d < hd; d++)
		out[d] = 0.0f;
	for (int32_t j0 = lo; j0 <= pos;) {
		int32_t j1 = (j0 / bs + 1) * bs;
		if (j1 > pos + 1)
			j1 = pos + 1;
		const float *vp = vb + ((size_t)s->block_table[j0 / bs] * bs + (size_t)(j0 % bs)) *
					   c->kv_max +
				  kvh * hd;
		cpuk_axpy_rows(c->lvl, hd, sc + j0, j1 - j0, vp, c->kv_max, out);
		j0 = j1;
	}
	float inv = 1.0f / sum;
	for (int64_t d = 0; d < hd; d++)
		out[d] *= inv;
}

static void att_task(void *arg, int32_t task, int32_t thread)
{
	struct att_run *r = arg;
	struct cpu_ctx *c = r->c;
	float *sc = c->att_scores + (size_t)thread * c->cap_ctx;
	int32_t i0 = task * r->per_task;
	int32_t i1 = i0 + r->per_task < r->n_items ? i0 + r->per_task : r->n_items;
	for (int32_t i = i0; i < i1; i++) {
		attend_one(c, r->layer, r->kv_layer, i / (int32_t)c->n_qh, i % (int32_t)c->n_qh,
			   sc);
		pf_slice(&r->pf, i, r->n_items); /* after each head: overlaps the next one */
	}
}

/* ---- forward ---- */

/* x[i] *= s for i < n; nothing when s == 1 (granite's residual and logit scales,
 * mistral3's attention temperature) */
static void branch_scale(float *x, int64_t n, float s)
{
	if (s != 1.0f)
		for (int64_t i = 0; i < n; i++)
			x[i] *= s;
}

static void rope_apply(const struct model_hparams *hp, int32_t half, float *vec, const float *cs)
{
	/* vec is one head; cs holds (cos, sin) for each of its half rotated pairs */
	for (int32_t i = 0; i < half; i++) {
		int32_t a = hp->rope_neox ? i : 2 * i;
		int32_t b = hp->rope_neox ? i + half : 2 * i + 1;
		float c0 = cs[2 * i], s0 = cs[2 * i + 1];
		float x0 = vec[a], x1 = vec[b];
		vec[a] = x0 * c0 - x1 * s0;
		vec[b] = x0 * s0 + x1 * c0;
	}
}

/* ---- deepseek2's latent attention (model.h's mla) ---- */

/* y[t] (rows ldy apart) = w x[t] for T rows of x, ldx apart and w->ne0 wide: gathered into
 * the contiguous rows the matmuls take (scratch [T][w->ne0]) unless already so */
static void mla_mm(struct cpu_ctx *c, enum backend_cpu_mm kind, const struct model_weight *w,
		   const float *x, int64_t ldx, float *scratch, float *y, int64_t ldy, int32_t T)
{
	const int64_t k = (int64_t)w->ne0;
	if (ldx != k) {
		for (int32_t t = 0; t < T; t++)
			memcpy(scratch + (int64_t)t * k, x + (int64_t)t * ldx,
			       (size_t)k * sizeof(float));
		x = scratch;
	}
	const struct model_weight *ws[1] = {w};
	const float *xs[1] = {x};
	float *ys[1] = {y};
	int64_t ld[1] = {ldy};
	matmuls(c, kind, 1, ws, xs, ys, ld, T, NULL, false);
}

/* Layer l's queries into c->q ([T][n_head][head_dim]: [wk_b[h] q_nope, rope(q_pe)] per
 * head) and its key rows into c->k and the KV pool's K slab ([c, rope(k_pe)]; V is read
 * from the same rows), from the normed input c->xb. Scratch: c->att ([T][n_head
 * (mla_nope + rope_dim)] raw queries), c->hb, c->hb2. */
static void mla_qkv(struct cpu_ctx *c, const struct model_layer *L, uint32_t l, int32_t T)
{
	const struct model_hparams *hp = &c->hp;
	const int64_t H = hp->n_head, R = hp->rope_dim, C = hp->n_lora_kv, NP = hp->mla_nope;
	const int64_t QH = NP + R, QL = hp->n_lora_q, hd = c->hd;
	const float *qan = c->mla_norms + (size_t)l * (size_t)(QL + C), *kvn = qan + QL;
	if (QL) { /* q = wq_b rmsnorm(wq_a x) */
		matmul1(c, BACKEND_CPU_MM_QKV, &L->wq_a, c->xb, c->hb, T);
		for (int32_t t = 0; t < T; t++)
			rmsnorm(c->hb + t * QL, c->hb + t * QL, qan, QL, hp->rms_eps);
		matmul1(c, BACKEND_CPU_MM_QKV, &L->wq_b, c->hb, c->att, T);
	} else {
		matmul1(c, BACKEND_CPU_MM_QKV, &L->wq, c->xb, c->att, T);
	}
	matmul1(c, BACKEND_CPU_MM_QKV, &L->wkv_a, c->xb, c->k, T); /* [c, k_pe] */
	for (int32_t t = 0; t < T; t++) {
		float *kr = c->k + t * c->kv_dim;
		rmsnorm(kr, kr, kvn, C, hp->rms_eps);
		rope_apply(hp, c->half, kr + C, c->rope + (int64_t)t * c->half * 2);
	}
	/* the absorbed q_nope, then the rotated q_pe */
	if (!c->mla_per_head)
		mm_heads(c, BACKEND_CPU_MM_QKV, &L->wk_b, c->att, H * QH, QH, c->q, c->q_dim, hd,
			 T);
	for (int64_t h = 0; h < H; h++) {
		if (c->mla_per_head) {
			const struct model_weight wk = model_expert(&L->wk_b, (uint32_t)h);
			mla_mm(c, BACKEND_CPU_MM_QKV, &wk, c->att + h * QH, H * QH, c->hb2,
			       c->q + h * hd, c->q_dim, T);
		}
		for (int32_t t = 0; t < T; t++) {
			float *qp = c->q + t * c->q_dim + h * hd + C;
			memcpy(qp, c->att + t * H * QH + h * QH + NP, (size_t)R * sizeof(float));
			rope_apply(hp, c->half, qp, c->rope + (int64_t)t * c->half * 2);
		}
	}
	float *kl = kv_k(c, l); /* K only: V is the same row (kv_v) */
	for (int32_t t = 0; t < T; t++) {
		const struct backend_seq *s = &c->batch->seqs[c->tok_seq[t]];
		int32_t p = c->tok_pos[t];
		size_t slot = (size_t)s->block_table[p / c->block_size] * c->block_size +
			      (size_t)(p % c->block_size);
		memcpy(kl + slot * c->kv_max, c->k + t * c->kv_dim,
		       (size_t)c->kv_dim * sizeof(float));
	}
}

/* The attention output's projection for T rows of c->att: per head wv_b[h] of its first
 * n_lora_kv values into c->q ([T][n_head mla_v_head]), then wo into c->xb. */
static void mla_out(struct cpu_ctx *c, const struct model_layer *L, int32_t T)
{
	const struct model_hparams *hp = &c->hp;
	const int64_t H = hp->n_head, VH = hp->mla_v_head;
	if (!c->mla_per_head)
		mm_heads(c, BACKEND_CPU_MM_WO, &L->wv_b, c->att, c->q_dim, c->hd, c->q, H * VH, VH,
			 T);
	for (int64_t h = 0; c->mla_per_head && h < H; h++) {
		const struct model_weight wv = model_expert(&L->wv_b, (uint32_t)h);
		mla_mm(c, BACKEND_CPU_MM_WO, &wv, c->att + h * c->hd, c->q_dim, c->hb,
		       c->q + h * VH, H * VH, T);
	}
	matmul1(c, BACKEND_CPU_MM_WO, &L->wo, c->q, c->xb, T);
}

static enum bg_status validate_batch(const struct cpu_ctx *c, const struct backend_batch *b,
				     int32_t *n_tok, int32_t *max_ctx, struct bg_err *err)
{
	if (!b || b->n_seqs < 1 || !b->seqs)
		return bg_fail(err, BG_ERR_INVALID, "forward: empty batch");
	int64_t tok = 0, want = 0;
	int32_t mctx = 0;
	for (int32_t i = 0; i < b->n_seqs; i++) {
		const struct backend_seq *s = &b->seqs[i];
		if (s->n_tokens < 1 || s->pos0 < 0 || !s->tokens || !s->block_table ||
		    !s->want_logits)
			return bg_fail(err, BG_ERR_INVALID, "forward: sequence %d is malformed", i);
		int64_t end = (int64_t)s->pos0 + s->n_tokens;
		if (end > INT32_MAX / 2)
			return bg_fail(err, BG_ERR_CAPACITY, "forward: sequence %d too long", i);
		int64_t need = (end + c->block_size - 1) / c->block_size;
		if (s->n_blocks < need)
			return bg_fail(err, BG_ERR_INVALID,
				       "forward: sequence %d has %d blocks, needs %lld", i,
				       s->n_blocks, (long long)need);
		for (int64_t j = backend_first_block(s->pos0, c->kv_window, c->block_size);
		     j < need; j++)
			if (s->block_table[j] < 0 || s->block_table[j] >= c->n_blocks)
				return bg_fail(err, BG_ERR_INVALID,
					       "forward: sequence %d: block %d out of range", i,
					       s->block_table[j]);
		if (c->state) {
			if (s->state_slot < 0 || s->state_slot >= c->n_state_slots)
				return bg_fail(err, BG_ERR_INVALID,
					       "forward: sequence %d: state slot %d out of range "
					       "[0, %d)",
					       i, s->state_slot, c->n_state_slots);
			for (int32_t k = 0; k < i; k++)
				if (b->seqs[k].state_slot == s->state_slot)
					return bg_fail(err, BG_ERR_INVALID,
						       "forward: sequences %d and %d share state "
						       "slot %d",
						       k, i, s->state_slot);
		}
		for (int32_t j = 0; j < s->n_tokens; j++) {
			int32_t id =
			    backend_seq_token(s, j, c->last_tok, c->n_last, (int32_t)c->hp.n_vocab);
			if (id < 0 || (uint32_t)id >= c->hp.n_vocab)
				return bg_fail(
				    err, BG_ERR_INVALID,
				    "forward: sequence %d: token id %d (previous row %d) "
				    "out of range",
				    i, id, s->prev_rows ? s->prev_rows[j] : -1);
			want += s->want_logits[j] != 0;
		}
		tok += s->n_tokens;
		if (end > mctx)
			mctx = (int32_t)end;
	}
	if (tok > INT32_MAX / 4)
		return bg_fail(err, BG_ERR_CAPACITY, "forward: too many tokens");
	if (want != b->n_logits)
		return bg_fail(err, BG_ERR_INVALID,
			       "forward: n_logits is %d but %lld tokens want logits", b->n_logits,
			       (long long)want);
	*n_tok = (int32_t)tok;
	*max_ctx = mctx;
	return BG_OK;
}

/* The last layer's rows past attention: only the rows that want logits are used after it
 * (their K/V are written already), so their residual (c->x) and attention output (c->att)
 * rows move to the front, in batch order, and the rest of the layer runs on those alone
 * (as llama.cpp does). Returns their number. Each kept row's values are unchanged: no
 * kernel's result for a row depends on the other rows. */
static int32_t keep_logit_rows(struct cpu_ctx *c, const struct backend_batch *b)
{
	const int64_t E = c->hp.n_embd;
	int32_t n = 0, t = 0;
	for (int32_t i = 0; i < b->n_seqs; i++)
		for (int32_t j = 0; j < b->seqs[i].n_tokens; j++, t++) {
			if (!b->seqs[i].want_logits[j])
				continue;
			if (n != t) {
				memcpy(c->x + (int64_t)n * E, c->x + (int64_t)t * E,
				       (size_t)E * sizeof(float));
				memcpy(c->att + (int64_t)n * c->q_dim, c->att + (int64_t)t * c->q_dim,
				       (size_t)c->q_dim * sizeof(float));
				if (c->hp.ssm_parallel) /* falcon-h1: the Mamba2 branch's output */
					memcpy(c->par + (int64_t)n * E, c->par + (int64_t)t * E,
					       (size_t)E * sizeof(float));
				if (c->ple) { /* gemma4: the last layer's per-layer inputs */
					const int64_t P = c->hp.n_embd_per_layer;
					float *pl = c->ple + (int64_t)(c->hp.n_layer - 1) * c->cap_tok * P;
					memcpy(pl + n * P, pl + t * P, (size_t)P * sizeof(float));
				}
			}
			n++;
		}
	return n;
}

/* gemma4 E2B/E4B (model.h's n_embd_per_layer): every layer's input e_l of the batch's T
 * tokens into c->ple ([n_layer][cap_tok][P]), from the token rows of pl_tok_embd and the
 * scaled input embeddings in c->x, in llama.cpp's order (project_per_layer_inputs): the
 * projection times 1/sqrt(n_embd), normed per slice, plus the token rows times sqrt(P),
 * the sum times 1/sqrt(2). */
static void per_layer_inputs(struct cpu_ctx *c, const struct backend_batch *b, int32_t T)
{
	const struct model *m = c->m;
	const struct model_hparams *hp = &c->hp;
	const int64_t E = hp->n_embd, P = hp->n_embd_per_layer, NL = (int64_t)hp->n_layer * P;
	matmul1(c, BACKEND_CPU_MM_QKV, &m->pl_model_proj, c->x, c->ple_proj, T);
	const float sp = 1.0f / sqrtf((float)E), st = sqrtf((float)P), si = 1.0f / sqrtf(2.0f);
	int32_t t = 0;
	for (int32_t i = 0; i < b->n_seqs; i++) {
		const struct backend_seq *sq = &b->seqs[i];
		for (int32_t j = 0; j < sq->n_tokens; j++, t++) {
			int32_t tok = backend_seq_token(sq, j, c->last_tok, c->n_last,
							(int32_t)hp->n_vocab);
			const char *trow = (const char *)m->pl_tok_embd.data +
					   (size_t)tok * cpuk_row_bytes(m->pl_tok_embd.type, NL);
			float *pr = c->ple_proj + (int64_t)t * NL;
			for (int64_t k = 0; k < NL; k++)
				pr[k] *= sp;
			for (uint32_t l = 0; l < hp->n_layer; l++) {
				float *e = c->ple + ((int64_t)l * c->cap_tok + t) * P;
				rmsnorm(e, pr + l * P, c->pl_norms, P, hp->rms_eps);
			}
			/* the token's rows: dequantized whole (a row of NL), scaled, added */
			float *tr = pr; /* reuse the projection row: its values are in c->ple now */
			cpuk_dequant_row(m->pl_tok_embd.type, trow, NL, tr);
			for (uint32_t l = 0; l < hp->n_layer; l++) {
				float *e = c->ple + ((int64_t)l * c->cap_tok + t) * P;
				for (int64_t k = 0; k < P; k++)
					e[k] = (e[k] + tr[l * P + k] * st) * si;
			}
		}
	}
}

/* lfm2: where a conv layer keeps position slot's bx row half (0: its first kv_max values,
 * in the K slab; 1: the rest, in the V slab) */
static inline float *conv_row_ptr(const struct cpu_ctx *c, uint32_t l, size_t slot, int half)
{
	return (half ? kv_v(c, l) : kv_k(c, l)) + slot * c->kv_max;
}

struct conv_run {
	struct cpu_ctx *c;
	uint32_t layer;
};

/* One token of a conv layer (model.h's conv_l): o = the taps over the cached bx rows of
 * positions p - conv_l + 1 .. p (zeros before 0), oldest first, in fp32 as ggml_ssm_conv;
 * c->att's row = C * o. Reads only the cache and the token's own in_proj row, so a row's
 * bits do not depend on the batch. */
static void conv_task(void *arg, int32_t t, int32_t thread)
{
	(void)thread;
	struct conv_run *r = arg;
	struct cpu_ctx *c = r->c;
	const int64_t E = c->hp.n_embd, K = c->hp.conv_l, H = c->kv_max;
	const struct backend_seq *s = &c->batch->seqs[c->tok_seq[t]];
	const int32_t p = c->tok_pos[t];
	const float *rows[MODEL_CONV_L_MAX][2];
	for (int64_t k = 0; k < K; k++) {
		int32_t q = p - (int32_t)(K - 1) + (int32_t)k;
		size_t slot = q < 0 ? 0
				    : (size_t)s->block_table[q / c->block_size] * c->block_size +
					  (size_t)(q % c->block_size);
		rows[k][0] = q < 0 ? NULL : conv_row_ptr(c, r->layer, slot, 0);
		rows[k][1] = q < 0 ? NULL : conv_row_ptr(c, r->layer, slot, 1);
	}
	const float *w = c->conv_w + (size_t)r->layer * E * K;
	const float *cc = c->hb + t * 3 * E + E;
	float *y = c->att + t * c->q_dim;
	for (int64_t i = 0; i < E; i++) {
		float sum = 0.0f;
		const int h = i >= H; /* the K or the V slot's part of the row */
		for (int64_t k = 0; k < K; k++)
			if (rows[k][h])
				sum += rows[k][h][h ? i - H : i] * w[i * K + k];
		y[i] = cc[i] * sum;
	}
}

/* lfm2's short-conv block for the batch's T tokens (model.h): in_proj into c->hb ([T][B |
 * C | x]), every token's bx into its cache row first, then the conv per token (conv_task),
 * which reads the rows of earlier positions, in this batch or before, from the cache. */
static void conv_block(struct cpu_ctx *c, const struct model_layer *L, uint32_t l, int32_t T)
{
	const int64_t E = c->hp.n_embd, H = c->kv_max;
	matmul1(c, BACKEND_CPU_MM_QKV, &L->conv_in, c->xb, c->hb, T);
	for (int32_t t = 0; t < T; t++) {
		const struct backend_seq *s = &c->batch->seqs[c->tok_seq[t]];
		const int32_t p = c->tok_pos[t];
		const size_t slot = (size_t)s->block_table[p / c->block_size] * c->block_size +
				    (size_t)(p % c->block_size);
		const float *bcx = c->hb + t * 3 * E;
		float *k = conv_row_ptr(c, l, slot, 0), *v = conv_row_ptr(c, l, slot, 1);
		for (int64_t i = 0; i < E; i++)
			*(i < H ? &k[i] : &v[i - H]) = bcx[i] * bcx[2 * E + i];
	}
	struct conv_run r = {c, l};
	tp_run(c->pool, T, conv_task, &r);
}

/* granitehybrid's Mamba2 block (cpu_ssm.h) for the batch's T tokens, each sequence's in
 * order with its state slot: ssm_in into c->hb ([T][z | xBC | dt]), the conv into c->hb2
 * ([T][C]) over (sequence, channel range) tasks, the scan into c->att ([T][D]) over
 * (sequence, head) tasks, then the gate and grouped norm per token. */
struct ssm_run {
	struct cpu_ctx *c;
	uint32_t layer;
	struct cpu_ssm_w w;
	const int32_t *seq_t0; /* c->ssm_t0 */
	int32_t per;	       /* tasks per sequence */
	int64_t ld;	       /* ssm_in's row */
};

static void ssm_conv_task(void *arg, int32_t task, int32_t thread)
{
	(void)thread;
	struct ssm_run *r = arg;
	struct cpu_ctx *c = r->c;
	const int32_t i = task / r->per, k = task % r->per;
	const int64_t C = cpu_ssm_conv_dim(&c->ssm), c0 = C * k / r->per, c1 = C * (k + 1) / r->per;
	const int32_t t0 = r->seq_t0[i], n = r->seq_t0[i + 1] - t0;
	float *st = state_at(c, c->batch->seqs[i].state_slot, r->layer);
	cpu_ssm_conv(&c->ssm, &r->w, st, c->hb + t0 * r->ld + c->ssm.D, r->ld, n, c->hb2 + t0 * C,
		     C, c0, c1);
}

static void ssm_scan_task(void *arg, int32_t task, int32_t thread)
{
	(void)thread;
	struct ssm_run *r = arg;
	struct cpu_ctx *c = r->c;
	const struct cpu_ssm_dims *d = &c->ssm;
	const int32_t i = task / (int32_t)d->H, h = task % (int32_t)d->H;
	const int64_t C = cpu_ssm_conv_dim(d), P = d->D / d->H;
	const int32_t t0 = r->seq_t0[i], n = r->seq_t0[i + 1] - t0;
	float *S = state_at(c, c->batch->seqs[i].state_slot, r->layer) + (d->d_conv - 1) * C +
		   (int64_t)h * P * d->N;
	cpu_ssm_scan_head(d, &r->w, h, S, c->hb2 + t0 * C, C, c->hb + t0 * r->ld + d->D + C, r->ld,
			  n, c->att + t0 * d->D, d->D);
}

static void ssm_norm_task(void *arg, int32_t t, int32_t thread)
{
	(void)thread;
	struct ssm_run *r = arg;
	struct cpu_ctx *c = r->c;
	cpu_ssm_gate_norm(&c->ssm, &r->w, c->hb + t * r->ld, c->att + t * c->ssm.D);
}

static void ssm_block(struct cpu_ctx *c, const struct model_layer *L, uint32_t l, int32_t T)
{
	const struct cpu_ssm_dims *d = &c->ssm;
	const int64_t C = cpu_ssm_conv_dim(d);
	struct ssm_run r = {.c = c, .layer = l, .ld = (int64_t)L->ssm_in.ne1};
	const float *w = c->ssm_w + (size_t)l * c->ssm_per;
	r.w = (struct cpu_ssm_w){w,
				 w + C * d->d_conv,
				 w + C * (d->d_conv + 1),
				 w + C * (d->d_conv + 1) + d->H,
				 w + C * (d->d_conv + 1) + 2 * d->H,
				 L->ssm_norm.data ? w + C * (d->d_conv + 1) + 3 * d->H : NULL};
	const struct backend_batch *b = c->batch;
	c->q_dim = d->D;  /* c->att's rows (ssm_norm_task), ssm_out's input */
	c->ssm_t0[0] = 0; /* n_seqs <= T tokens (validate_batch) */
	for (int32_t i = 0; i < b->n_seqs; i++)
		c->ssm_t0[i + 1] = c->ssm_t0[i] + b->seqs[i].n_tokens;
	r.seq_t0 = c->ssm_t0;
	matmul1(c, BACKEND_CPU_MM_QKV, &L->ssm_in, c->xb, c->hb, T);
	r.per = (c->n_threads * 2 + b->n_seqs - 1) / b->n_seqs;
	r.per = r.per < 1 ? 1 : r.per > C ? (int32_t)C : r.per;
	tp_run(c->pool, b->n_seqs * r.per, ssm_conv_task, &r);
	tp_run(c->pool, b->n_seqs * (int32_t)d->H, ssm_scan_task, &r);
	tp_run(c->pool, T, ssm_norm_task, &r);
}

/* gemma4 E2B/E4B: layer l's per-layer input joins the residual stream c->x (T rows):
 * x += rmsnorm(pl_proj (gelu(pl_inp_gate x) * e_l)) with the layer's post_norm. */
static void per_layer_add(struct cpu_ctx *c, const struct model_layer *L, uint32_t l, int32_t T)
{
	const struct model_hparams *hp = &c->hp;
	const int64_t E = hp->n_embd, P = hp->n_embd_per_layer;
	matmul1(c, BACKEND_CPU_MM_GATE_UP, &L->pl_inp_gate, c->x, c->ple_gate, T);
	const struct model_weight *wd[1] = {&L->pl_proj};
	const float *xd[1] = {c->ple_gate};
	float *yd[1] = {c->xb};
	int64_t ldd[1] = {E};
	/* gelu(gate) * e_l in the prologue, as the FFN's down projection takes its glu */
	matmuls(c, BACKEND_CPU_MM_DOWN, 1, wd, xd, yd, ldd, T,
		c->ple + (int64_t)l * c->cap_tok * P, true);
	const float *pn = c->pl_norms + P + (size_t)l * E;
	for (int32_t t = 0; t < T; t++) {
		rmsnorm(c->xb + t * E, c->xb + t * E, pn, E, hp->rms_eps);
		for (int64_t i = 0; i < E; i++)
			c->x[t * E + i] += c->xb[t * E + i];
	}
}

/* qwen35's delta-net layer (model.h's gdn_*, cpu_deltanet.h) over the batch's sequences:
 * each sequence's tokens in order through its state slot (state_at). */
struct gdn_run {
	struct cpu_ctx *c;
	uint32_t layer;
	int32_t n_chunks; /* conv: channel ranges a sequence */
};

/* The first token row of sequence i of the batch (rows are laid out sequence by sequence) */
static int32_t seq_row0(const struct backend_batch *b, int32_t i)
{
	int32_t t0 = 0;
	for (int32_t k = 0; k < i; k++)
		t0 += b->seqs[k].n_tokens;
	return t0;
}

static void gdn_conv_task(void *arg, int32_t task, int32_t thread)
{
	(void)thread;
	const struct gdn_run *r = arg;
	struct cpu_ctx *c = r->c;
	const int64_t CD = cpu_gdn_conv_dim(&c->hp);
	const int32_t i = task / r->n_chunks, ch = task % r->n_chunks;
	const struct backend_seq *s = &c->batch->seqs[i];
	const int64_t t0 = seq_row0(c->batch, i);
	cpu_gdn_conv(&c->hp, state_at(c, s->state_slot, r->layer),
		     c->conv_w + r->layer * c->conv_per, c->gdn_u + t0 * CD, CD, s->n_tokens,
		     c->hb + t0 * CD, CD, CD * ch / r->n_chunks, CD * (ch + 1) / r->n_chunks);
}

static void gdn_qk_norm_task(void *arg, int32_t t, int32_t thread)
{
	(void)thread;
	const struct gdn_run *r = arg;
	cpu_gdn_qk_norm(&r->c->hp, r->c->hb + t * cpu_gdn_conv_dim(&r->c->hp));
}

static void gdn_recur_task(void *arg, int32_t task, int32_t thread)
{
	(void)thread;
	const struct gdn_run *r = arg;
	struct cpu_ctx *c = r->c;
	const struct model_hparams *hp = &c->hp;
	const int64_t nv = hp->gdn_nv, CD = cpu_gdn_conv_dim(hp), VD = cpu_gdn_v_dim(hp);
	const int32_t i = (int32_t)(task / nv);
	const struct backend_seq *s = &c->batch->seqs[i];
	const int64_t t0 = seq_row0(c->batch, i);
	const float *vec = c->gdn_vec + r->layer * (2 * nv + hp->gdn_d);
	cpu_gdn_recur(hp, state_at(c, s->state_slot, r->layer), c->hb + t0 * CD, CD,
		      c->gdn_b + t0 * nv, c->gdn_a + t0 * nv, nv, vec, vec + nv, task % nv,
		      s->n_tokens, c->att + t0 * VD, VD);
}

static void gdn_out_task(void *arg, int32_t t, int32_t thread)
{
	(void)thread;
	const struct gdn_run *r = arg;
	struct cpu_ctx *c = r->c;
	const struct model_hparams *hp = &c->hp;
	const int64_t nv = hp->gdn_nv, VD = cpu_gdn_v_dim(hp);
	cpu_gdn_out_norm(hp, c->att + t * VD, c->gdn_z + t * VD,
			 c->gdn_vec + r->layer * (2 * nv + hp->gdn_d) + 2 * nv);
}

/* The layer's branch output before ssm_out into c->att ([T][VD], c->q_dim set to VD): the
 * projections (u, z, beta, alpha), the conv (c->hb), the Q/K norms, the recurrence per
 * (sequence, V head), the gated norm. */
static void gdn_block(struct cpu_ctx *c, const struct model_layer *L, uint32_t l, int32_t T)
{
	const struct model_hparams *hp = &c->hp;
	{
		const struct model_weight *ws[3] = {&L->gdn_qkv, &L->gdn_z, &L->gdn_beta};
		const float *xs[3] = {c->xb, c->xb, c->xb};
		float *ys[3] = {c->gdn_u, c->gdn_z, c->gdn_b};
		int64_t ld[3] = {cpu_gdn_conv_dim(hp), cpu_gdn_v_dim(hp), hp->gdn_nv};
		matmuls(c, BACKEND_CPU_MM_QKV, 3, ws, xs, ys, ld, T, NULL, false);
		matmul1(c, BACKEND_CPU_MM_QKV, &L->gdn_alpha, c->xb, c->gdn_a, T);
	}
	const int32_t n_seqs = c->batch->n_seqs;
	struct gdn_run r = {c, l, c->n_threads > n_seqs ? 2 * c->n_threads : 1};
	tp_run(c->pool, n_seqs * r.n_chunks, gdn_conv_task, &r);
	tp_run(c->pool, T, gdn_qk_norm_task, &r);
	tp_run(c->pool, n_seqs * (int32_t)hp->gdn_nv, gdn_recur_task, &r);
	tp_run(c->pool, T, gdn_out_task, &r);
	c->q_dim = cpu_gdn_v_dim(hp); /* c->att's rows, ssm_out's input */
}

/* step35's head-wise attention gate: g = attn_gate x (x = c->xb, the attn-normed input,
 * still there) into c->hb2 ([T][n_qh]), then each head's output row in c->att times
 * sigmoid(g) (ggml_sigmoid: 1 / (1 + e^-g)) */
static void head_gate(struct cpu_ctx *c, const struct model_layer *L, int32_t T)
{
	matmul1(c, BACKEND_CPU_MM_QKV, &L->attn_gate, c->xb, c->hb2, T);
	for (int32_t t = 0; t < T; t++)
		for (int64_t h = 0; h < c->n_qh; h++) {
			const float g = 1.0f / (1.0f + expf(-c->hb2[t * c->n_qh + h]));
			float *o = c->att + t * c->q_dim + h * c->hd;
			for (int64_t d = 0; d < c->hd; d++)
				o[d] *= g;
		}
}

/* gemma4's MoE layer l (model.h's gemma4_moe), once its dense FFN's output is in c->xb: the
 * experts on rmsnorm(x, pre_ffw_norm_2) routed by rmsnorm(x) (no weight, ggml_rms_norm) *
 * (1 / sqrt(n_embd)) * ffn_gate_inp.scale, in ggml's order (x = c->x, the residual stream
 * after the attention's add), then c->xb = rmsnorm(xb, post_ffw_norm_1) + rmsnorm(experts,
 * post_ffw_norm_2) */
static void gemma4_experts(struct cpu_ctx *c, const struct model_layer *L, uint32_t l, int32_t T)
{
	const struct model_hparams *hp = &c->hp;
	const int64_t E = hp->n_embd;
	const float *w = c->g4w + (size_t)l * (4 * (size_t)E + hp->n_expert);
	const float inv = 1.0f / sqrtf((float)E), eps = hp->rms_eps;
	for (int32_t t = 0; t < T; t++) {
		const float *x = c->x + (int64_t)t * E;
		float *r = c->g4b + (int64_t)t * E;
		rmsnorm(c->g4a + (int64_t)t * E, x, w, E, eps);
		double ss = 0.0; /* rmsnorm's, without a weight */
		for (int64_t i = 0; i < E; i++)
			ss += (double)x[i] * x[i];
		const float sc = (float)(1.0 / sqrt(ss / (double)E + (double)eps));
		for (int64_t i = 0; i < E; i++)
			r[i] = ((x[i] * sc) * inv) * w[3 * E + i];
	}
	const struct cpu_moe_mm mm = {moe_mm, c};
	cpu_moe_ffn_ex(c->moe, L, c->g4a, c->g4b, L->down_exps_s.data ? w + 4 * E : NULL, T, c->g4a,
		       &mm);
	for (int32_t t = 0; t < T; t++) {
		float *d = c->xb + (int64_t)t * E, *e = c->g4a + (int64_t)t * E;
		rmsnorm(d, d, w + E, E, eps);
		rmsnorm(e, e, w + 2 * E, E, eps);
		for (int64_t i = 0; i < E; i++)
			d[i] += e[i];
	}
}

/* qwen35's gated attention: c->hb's rows [T][2 q_dim] (per head [q | gate]) split into c->q
 * and c->hb2 ([T][q_dim], the gates) */
static void split_q_gate(struct cpu_ctx *c, int32_t T)
{
	const int64_t hd = c->hd, qd = c->q_dim;
	for (int32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < c->hp.n_head; h++) {
			const float *src = c->hb + t * 2 * qd + h * 2 * hd;
			memcpy(c->q + t * qd + h * hd, src, (size_t)hd * sizeof(float));
			memcpy(c->hb2 + t * qd + h * hd, src + hd, (size_t)hd * sizeof(float));
		}
}

static enum bg_status cpu_forward(void *ctx, const struct backend_batch *b, struct bg_err *err)
{
	struct cpu_ctx *c = ctx;
	const struct model *m = c->m;
	const struct model_hparams *hp = &c->hp;
	c->n_logits = 0;
	int32_t T = 0, max_ctx = 0;
	enum bg_status st = validate_batch(c, b, &T, &max_ctx, err);
	if (st != BG_OK)
		return st;
	if ((st = ensure_tokens(c, T, err)) != BG_OK ||
	    (st = ensure_ctx(c, max_ctx, err)) != BG_OK ||
	    (st = ensure_logits(c, b->n_logits, err)) != BG_OK)
		return st;
	c->batch = b;
	for (int32_t i = 0; c->state && i < b->n_seqs; i++) /* the state before position 0 */
		if (b->seqs[i].pos0 == 0)
			memset(state_at(c, b->seqs[i].state_slot, 0), 0,
			       c->state_floats * sizeof(float));
	int64_t E = hp->n_embd;
	int32_t half = (int32_t)hp->rope_dim / 2;
	int32_t half_swa = (int32_t)model_rope_dim(hp, true) / 2;
	struct backend_cpu_profile *const prof = c->prof;
	const double t_fwd = prof_now(c);
	double tp = t_fwd, skip = 0.0; /* profile: lap start; time already counted elsewhere */

	/* token rows: position, sequence, embedding, rotation angles */
	int32_t t = 0;
	for (int32_t i = 0; i < b->n_seqs; i++) {
		const struct backend_seq *s = &b->seqs[i];
		for (int32_t j = 0; j < s->n_tokens; j++, t++) {
			c->tok_pos[t] = s->pos0 + j;
			c->tok_seq[t] = i;
			const char *row = (const char *)m->tok_embd.data +
					  (size_t)backend_seq_token(s, j, c->last_tok, c->n_last,
								    (int32_t)hp->n_vocab) *
					      cpuk_row_bytes(m->tok_embd.type, E);
			float *xr = c->x + (int64_t)t * E;
			cpuk_dequant_row(m->tok_embd.type, row, E, xr);
			if (hp->embd_scale != 1.0f) /* gemma: sqrt(n_embd) */
				for (int64_t i = 0; i < E; i++)
					xr[i] *= hp->embd_scale;
			double p = (double)(s->pos0 + j);
			arch_rope_cos_sin(c->freq, half, p, c->mscale, c->rope + (int64_t)t * half * 2);
			if (c->rope_swa_differs)
				arch_rope_cos_sin(c->freq_swa, half_swa, p, c->mscale_swa,
						  c->rope_swa + (int64_t)t * half_swa * 2);
		}
	}

	if (hp->n_embd_per_layer) /* gemma4 E2B/E4B: every layer's input, from the embeddings */
		per_layer_inputs(c, b, T);

	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct model_layer *L = &m->layers[l];
		const float *an = c->norms + (size_t)(2 * l) * E;
		const float *fn = an + E;
		/* the layer's geometry (gemma4's windowed layers have their own) */
		c->hd = model_head_dim(hp, L->swa);
		c->n_kvh = model_n_head_kv(hp, L->swa);
		c->n_qh = model_n_head(hp, L->swa); /* step35's windowed layers: their own */
		c->q_dim = c->n_qh * c->hd;
		c->kv_dim = c->n_kvh * c->hd;
		c->half = L->swa && c->rope_swa_differs ? half_swa : half;
		const int64_t hd = c->hd;
		prof_lap(c, &tp, &skip); /* up to here: the rest */
		/* nemotron_h's FFN layer: attn_norm, then the FFN below (no mixer); the last
		 * layer keeps its logit rows first */
		if (L->ffn_only && l + 1 == hp->n_layer && (T = keep_logit_rows(c, b)) == 0)
			break;
		for (t = 0; t < T; t++) /* olmo2: no pre-norm, the residual as it is */
			if (hp->no_pre_norms)
				memcpy(c->xb + t * E, c->x + t * E, (size_t)E * sizeof(float));
			else
				pre_norm(hp, c->xb + t * E, c->x + t * E, an, E);
		if (prof)
			prof_lap(c, &tp, &prof->norms_s);
		/* gemma, olmo2: the post-norms of both branches (post, post + E) */
		const float *post = hp->post_norms ? c->extra_norms + (size_t)l * c->extra_per_layer +
							 c->qn_dim + c->kn_dim
						   : NULL;
		if (L->ffn_only)
			goto ffn;
		/* gemma4's shared-KV layers: Q only; attention reads layer kv_l's cache */
		const uint32_t kv_l = model_kv_layer(hp, L, l);
		const bool own_kv = kv_l == l;
		if (L->conv) { /* lfm2: the short-conv block's output into c->att */
			conv_block(c, L, l, T);
			if (prof)
				prof_lap(c, &tp, &prof->attn_s);
		} else if (L->gdn) { /* qwen35: the delta net's output into c->att */
			gdn_block(c, L, l, T);
		} else if (L->ssm) { /* granitehybrid: the Mamba2 block's output, D wide */
			ssm_block(c, L, l, T);
			if (prof)
				prof_lap(c, &tp, &prof->attn_s);
		} else if (hp->mla) { /* deepseek2: its own Q, K and V (mla_qkv) */
			mla_qkv(c, L, l, T);
			prof_lap(c, &tp, &skip);
		} else {
			if (hp->ssm_parallel) { /* falcon-h1: the Mamba2 block of the same normed
						 * input, ssm_out's output waiting in par */
				ssm_block(c, L, l, T);
				matmul1(c, BACKEND_CPU_MM_WO, &L->ssm_out, c->att, c->par, T);
				c->q_dim = c->n_qh * c->hd; /* the attention's again */
			}
			{
				const struct model_weight *ws[3] = {&L->wq, &L->wk, &L->wv};
				const float *xs[3] = {c->xb, c->xb, c->xb};
				/* qwen35: [q | gate] per head into hb first */
				float *ys[3] = {hp->attn_out_gate ? c->hb : c->q, c->k, c->v};
				int64_t ld[3] = {(int64_t)L->wq.ne1, c->kv_dim, c->kv_dim};
				matmuls(c, BACKEND_CPU_MM_QKV, own_kv ? 3 : 1, ws, xs, ys, ld, T,
					NULL, false);
				if (hp->attn_out_gate)
					split_q_gate(c, T);
			}
			prof_lap(c, &tp, &skip); /* counted by matmuls */
			if (c->biases) {	 /* qwen2: after the projections, before RoPE */
				const float *bq =
				    c->biases + (size_t)l * (c->q_dim + 2 * c->kv_dim);
				add_bias(c->q, c->q_dim, T, bq, c->q_dim);
				add_bias(c->k, c->kv_dim, T, bq + c->q_dim, c->kv_dim);
				add_bias(c->v, c->kv_dim, T, bq + c->q_dim + c->kv_dim, c->kv_dim);
			}
			/* before RoPE (hunyuan: after it, below): each head (qwen3, gemma3) or
			 * the whole rows (olmo2) normalized, groups of qn_dim / kn_dim; Command
			 * R+: each head with its own weight row */
			if (hp->qk_norm && !hp->qk_norm_after_rope) {
				const float *qn = c->extra_norms + (size_t)l * c->extra_per_layer;
				const float *kn = qn + c->qn_dim;
				int64_t qg = hp->qk_norm_full ? c->q_dim : hd; /* the groups */
				int64_t kg = hp->qk_norm_full ? c->kv_dim : hd;
				const int64_t hw = hp->qk_norm_heads; /* a weight row per head */
				for (t = 0; t < T; t++) {
					for (int64_t i = 0; i < c->q_dim; i += qg) {
						float *qh = c->q + t * c->q_dim + i;
						pre_norm(hp, qh, qh, qn + hw * i, qg);
					}
					for (int64_t i = 0; own_kv && i < c->kv_dim; i += kg) {
						float *kh = c->k + t * c->kv_dim + i;
						pre_norm(hp, kh, kh, kn + hw * i, kg);
					}
				}
			}
			if (hp->v_norm &&
			    own_kv) /* gemma4: each V head RMS-normalized, no weight */
				for (t = 0; t < T; t++)
					for (int64_t i = 0; i < c->kv_dim; i += hd) {
						float *vh = c->v + t * c->kv_dim + i;
						rmsnorm(vh, vh, c->ones, hd, hp->rms_eps);
					}
			/* RoPE, then K/V into the pool */
			float *kl = kv_k(c, kv_l), *vl = kv_v(c, kv_l);
			const float *rope_l = L->swa && c->rope_swa_differs ? c->rope_swa : c->rope;
			/* the per-head Q/K norms after RoPE (and the temperature; no model has
			 * both), on the RoPE layers: hunyuan's with its weights, llama4's without
			 * (weights 1), as gpu/qkv_post.cu's norm_post_rope */
			const float *qw_post = NULL, *kw_post = NULL;
			if (hp->qk_norm_after_rope && !L->no_rope) {
				qw_post = kw_post = c->ones;
				if (hp->qk_norm) {
					qw_post = c->extra_norms + (size_t)l * c->extra_per_layer;
					kw_post = qw_post + c->qn_dim;
				}
			}
			for (t = 0; t < T; t++) {
				const float *cs = rope_l + (int64_t)t * c->half * 2;
				for (int64_t h = 0; h < c->n_qh && !L->no_rope;
				     h++) /* smollm3: none */
					rope_apply(hp, c->half, c->q + t * c->q_dim + h * hd, cs);
				/* mistral3: Q after RoPE, per position; llama4: on the no_rope
				 * layers only */
				if (hp->attn_temp_scale != 0.0f &&
				    (!hp->attn_temp_nope || L->no_rope))
					branch_scale(c->q + t * c->q_dim, c->q_dim,
						     arch_attn_temp(hp, c->tok_pos[t]));
				for (int64_t h = 0; qw_post && h < c->n_qh; h++) {
					float *qh = c->q + t * c->q_dim + h * hd;
					pre_norm(hp, qh, qh, qw_post, hd);
				}
				if (!own_kv)
					continue; /* no K/V of its own */
				for (int64_t h = 0; h < c->n_kvh && !L->no_rope; h++)
					rope_apply(hp, c->half, c->k + t * c->kv_dim + h * hd, cs);
				for (int64_t h = 0; kw_post && h < c->n_kvh; h++) {
					float *kh = c->k + t * c->kv_dim + h * hd;
					pre_norm(hp, kh, kh, kw_post, hd);
				}
				const struct backend_seq *s = &b->seqs[c->tok_seq[t]];
				int32_t p = c->tok_pos[t];
				size_t slot =
				    (size_t)s->block_table[p / c->block_size] * c->block_size +
				    (size_t)(p % c->block_size);
				memcpy(kl + slot * c->kv_max, c->k + t * c->kv_dim,
				       (size_t)c->kv_dim * sizeof(float));
				memcpy(vl + slot * c->kv_max, c->v + t * c->kv_dim,
				       (size_t)c->kv_dim * sizeof(float));
			}
		}
		if (prof && !L->conv && !L->gdn && !L->ssm)
			prof_lap(c, &tp, &prof->rope_kv_s);
		if (!L->conv && !L->gdn && !L->ssm) {
			struct att_run r = {.c = c, .layer = l, .n_items = T * (int32_t)c->n_qh};
			r.kv_layer = kv_l;
			int32_t n_tasks = c->n_threads * 4;
			r.per_task = (r.n_items + n_tasks - 1) / n_tasks;
			if (r.per_task < 1)
				r.per_task = 1;
			r.n_tasks = (r.n_items + r.per_task - 1) / r.per_task;
			if (T <= c->pf_max_tok) {
				const struct model_weight *wo = &L->wo;
				pf_head(c, 1, &wo, mm_chunk_rows(c, (int64_t)wo->ne1), &r.pf);
			}
			tp_run(c->pool, r.n_tasks, att_task, &r);
			if (hp->attn_out_gate) /* qwen35: times sigmoid(gate), ggml's sigmoid */
				for (int64_t i = 0; i < (int64_t)T * c->q_dim; i++)
					c->att[i] *= 1.0f / (1.0f + expf(-c->hb2[i]));
			if (L->attn_gate.ne0) /* step35: head h times sigmoid(attn_gate x)[h] */
				head_gate(c, L, T);
		}
		if (prof)
			prof_lap(c, &tp, &prof->attn_s);
		/* the last layer: from here T counts the rows kept for logits */
		if (l + 1 == hp->n_layer && (T = keep_logit_rows(c, b)) == 0)
			break;
		prof_lap(c, &tp, &skip);
		/* command-r, cohere2 (hp.parallel): the attention branch's output waits in par
		 * while the FFN reads the same normed input */
		float *ao = hp->parallel ? c->par : c->xb;
		if (hp->mla)
			mla_out(c, L, T);
		else
			matmul1(c, BACKEND_CPU_MM_WO, &L->wo, c->att, ao, T);
		if (hp->attn_out_bias) /* gpt-oss, optional elsewhere: the O projection's bias */
			add_bias(ao, E, T, c->oai + (size_t)l * (hp->n_head + E) + hp->n_head, E);
		prof_lap(c, &tp, &skip);
		if (post) /* gemma, olmo2: the branch output normalized before the residual add */
			for (t = 0; t < T; t++)
				rmsnorm(ao + t * E, ao + t * E, post, E, hp->rms_eps);
		branch_scale(ao, (int64_t)T * E, hp->residual_scale);
		/* falcon-h1: (attn + ssm) + x, as llama.cpp adds them */
		for (int64_t i = 0; i < (int64_t)T * E && hp->ssm_parallel; i++)
			ao[i] += c->par[i];
		for (int64_t i = 0; i < (int64_t)T * E && !hp->parallel; i++)
			c->x[i] += ao[i];
		if (prof)
			prof_lap(c, &tp, &prof->resid_s);
		if (L->no_ffn) /* nemotron_h: a Mamba2 or attention block alone */
			continue;

		for (t = 0; t < T; t++) /* parallel: attn_norm of the layer's input again */
			if (hp->no_pre_norms)
				memcpy(c->xb + t * E, c->x + t * E, (size_t)E * sizeof(float));
			else
				pre_norm(hp, c->xb + t * E, c->x + t * E, hp->parallel ? an : fn, E);
		if (prof)
			prof_lap(c, &tp, &prof->norms_s);
	ffn:	/* routed experts (cpu_moe.h), the output in place of xb; glm4moe's leading
		 * layers are dense */
		if (c->moe && model_layer_moe(L) && !hp->gemma4_moe) {
			const struct cpu_moe_mm mm = {moe_mm, c};
			cpu_moe_ffn(c->moe, L, c->xb, T, c->xb, &mm);
		} else if (hp->xielu) { /* apertus: down(xielu(up x)), not gated */
			matmul1(c, BACKEND_CPU_MM_GATE_UP, &L->w_up, c->xb, c->hb, T);
			xielu_rows(c->hb, (int64_t)T * (int64_t)L->w_up.ne1, L->xielu);
			matmul1(c, BACKEND_CPU_MM_DOWN, &L->w_down, c->hb, c->xb, T);
		} else if (hp->relu2) { /* nemotron_h: down(relu(up x)^2), not gated */
			matmul1(c, BACKEND_CPU_MM_GATE_UP, &L->w_up, c->xb, c->hb, T);
			const int64_t n = (int64_t)T * (int64_t)L->w_up.ne1;
			for (int64_t i = 0; i < n; i++) {
				const float r = c->hb[i] > 0.0f ? c->hb[i] : 0.0f;
				c->hb[i] = r * r;
			}
			matmul1(c, BACKEND_CPU_MM_DOWN, &L->w_down, c->hb, c->xb, T);
		} else {
			/* the layer's width (gemma4's may differ; buffers hold n_ff, the largest) */
			const int64_t Fl = (int64_t)L->w_gate.ne1;
			const struct model_weight *ws[2] = {&L->w_gate, &L->w_up};
			const float *xs[2] = {c->xb, c->xb};
			float *ys[2] = {c->hb, c->hb2};
			int64_t ld[2] = {Fl, Fl};
			matmuls(c, BACKEND_CPU_MM_GATE_UP, 2, ws, xs, ys, ld, T, NULL, false);
			if (L->clamp_shexp > 0.0f) /* step35: hb = the clamped SwiGLU here */
				cpu_swiglu_clamp(c->hb, c->hb2, (int64_t)T * Fl, L->clamp_shexp);
			/* down, after hb = act(hb) * hb2 in its prologue (unless clamped) */
			const struct model_weight *wd[1] = {&L->w_down};
			const float *xd[1] = {c->hb};
			float *yd[1] = {c->xb};
			int64_t ldd[1] = {E};
			matmuls(c, BACKEND_CPU_MM_DOWN, 1, wd, xd, yd, ldd, T,
				L->clamp_shexp > 0.0f ? NULL : c->hb2, hp->gelu);
		}
		if (hp->gemma4_moe && model_layer_moe(L)) /* and its experts beside */
			gemma4_experts(c, L, l, T);
		prof_lap(c, &tp, &skip);
		if (post)
			for (t = 0; t < T; t++)
				rmsnorm(c->xb + t * E, c->xb + t * E, post + E, E, hp->rms_eps);
		branch_scale(c->xb, (int64_t)T * E, hp->residual_scale);
		for (int64_t i = 0; i < (int64_t)T * E; i++)
			c->x[i] += c->xb[i];
		for (int64_t i = 0; i < (int64_t)T * E && hp->parallel; i++)
			c->x[i] += c->par[i]; /* (x + ffn) + attn, as llama.cpp adds them */
		if (hp->n_embd_per_layer) /* gemma4 E2B/E4B: the layer's per-layer input */
			per_layer_add(c, L, l, T);
		if (hp->out_scale) /* gemma4: the layer's output times its scale */
			branch_scale(c->x, (int64_t)T * E, L->out_scale);
		if (prof)
			prof_lap(c, &tp, &prof->resid_s);
	}

	/* final norm and LM head for the rows that want logits: the first T rows of c->x
	 * since the last layer (keep_logit_rows) */
	const float *on = c->norms + (size_t)(2 * hp->n_layer) * E;
	const int32_t n = T;
	prof_lap(c, &tp, &skip);
	for (t = 0; t < n; t++)
		pre_norm(hp, c->xf + (int64_t)t * E, c->x + (int64_t)t * E, on, E);
	if (prof)
		prof_lap(c, &tp, &prof->norms_s);
	if (n > 0)
		matmul1(c, BACKEND_CPU_MM_LM_HEAD, &m->output, c->xf, c->logits, n);
	if (hp->logit_scale != 1.0f) /* granite, command-r, cohere2 (ggml_scale) */
		branch_scale(c->logits, (int64_t)n * hp->n_vocab, hp->logit_scale);
	if (hp->final_softcap > 0.0f) { /* gemma2: cap * tanh(logit / cap) */
		float cap = hp->final_softcap;
		for (int64_t i = 0; i < (int64_t)n * hp->n_vocab; i++)
			c->logits[i] = cap * tanhf(c->logits[i] / cap);
	}
	c->n_logits = n;
	c->batch = NULL;
	if (prof) {
		prof->forward_s += prof_now(c) - t_fwd;
		prof->forwards++;
	}
	return BG_OK;
}

/* ---- sampling ---- */

struct samp_run {
	struct cpu_ctx *c;
	const struct backend_sample_row *rows;
	struct sampler_result *out;
};

static void samp_task(void *arg, int32_t i, int32_t thread)
{
	struct samp_run *r = arg;
	struct cpu_ctx *c = r->c;
	const struct backend_sample_row *row = &r->rows[i];
	const float *lg = c->logits + (size_t)row->logits_row * c->hp.n_vocab;
	char *scratch = (char *)c->samp_scratch + (size_t)thread * c->samp_bytes;
	if (row->constraint) {
		/* a copy, so that the logits rows stay as the forward left them */
		float *cl = (float *)(scratch + sampler_scratch_bytes((int32_t)c->hp.n_vocab));
		memcpy(cl, lg, c->hp.n_vocab * sizeof *cl);
		sampler_constrain(cl, (int32_t)c->hp.n_vocab, row->constraint);
		lg = cl;
	}
	if (row->forced >= 0)
		sampler_score(lg, (int32_t)c->hp.n_vocab, row->forced, row->params->n_top,
			      &r->out[i]);
	else
		sampler_sample(lg, (int32_t)c->hp.n_vocab, row->params, &row->history, row->rng,
			       scratch, &r->out[i]);
}

static enum bg_status cpu_sample(void *ctx, const struct backend_sample_row *rows, int32_t n_rows,
				 struct sampler_result *out, struct bg_err *err)
{
	struct cpu_ctx *c = ctx;
	for (int32_t i = 0; i < n_rows; i++) {
		const struct backend_sample_row *r = &rows[i];
		if (r->logits_row < 0 || r->logits_row >= c->n_logits)
			return bg_fail(err, BG_ERR_INVALID, "sample: logits row %d of %d",
				       r->logits_row, c->n_logits);
		if (!r->params || (r->forced < 0 && !r->rng))
			return bg_fail(err, BG_ERR_INVALID, "sample: row %d lacks params or rng",
				       i);
		if (r->forced >= (int32_t)c->hp.n_vocab)
			return bg_fail(err, BG_ERR_INVALID, "sample: forced token %d out of range",
				       r->forced);
	}
	if (n_rows > c->cap_last) {
		int32_t *t = realloc(c->last_tok, (size_t)n_rows * sizeof *t);
		if (!t)
			return bg_fail(err, BG_ERR_NOMEM, "sample: out of memory");
		c->last_tok = t;
		c->cap_last = n_rows;
	}
	const double t_samp = prof_now(c);
	struct samp_run sr = {c, rows, out};
	/* Rows run in parallel unless two sampling rows share an RNG: then their draws must
	 * happen in row order, so everything runs on this thread. */
	int shared_rng = 0;
	for (int32_t i = 0; i < n_rows && !shared_rng; i++)
		for (int32_t j = i + 1; j < n_rows && rows[i].forced < 0; j++)
			if (rows[j].forced < 0 && rows[j].rng == rows[i].rng) {
				shared_rng = 1;
				break;
			}
	if (shared_rng)
		for (int32_t i = 0; i < n_rows; i++)
			samp_task(&sr, i, 0);
	else
		tp_run(c->pool, n_rows, samp_task, &sr);
	for (int32_t i = 0; i < n_rows; i++)
		c->last_tok[i] = out[i].token;
	c->n_last = n_rows;
	if (c->prof) {
		c->prof->sample_s += prof_now(c) - t_samp;
		c->prof->samples++;
	}
	return BG_OK;
}

static enum bg_status cpu_get_logits(void *ctx, int32_t row, float *dst, struct bg_err *err)
{
	struct cpu_ctx *c = ctx;
	if (row < 0 || row >= c->n_logits)
		return bg_fail(err, BG_ERR_INVALID, "get_logits: row %d of %d", row, c->n_logits);
	memcpy(dst, c->logits + (size_t)row * c->hp.n_vocab, (size_t)c->hp.n_vocab * sizeof(float));
	return BG_OK;
}

/* ---- KV block operations ---- */

static enum bg_status check_blocks(const struct cpu_ctx *c, const int32_t *blocks, int32_t n,
				   struct bg_err *err)
{
	for (int32_t i = 0; i < n; i++)
		if (blocks[i] < 0 || blocks[i] >= c->n_blocks)
			return bg_fail(err, BG_ERR_INVALID, "kv: block %d out of range [0, %d)",
				       blocks[i], c->n_blocks);
	return BG_OK;
}

static size_t slab_floats(const struct cpu_ctx *c)
{
	return (size_t)c->block_size * (size_t)c->kv_max;
}

/* Copies the blocks' slabs, block by block, layer by layer, K before V, into to[] when to is
 * not NULL, else from from[] into the cache: the host layout of kv_swap_out/kv_swap_in. */
static enum bg_status kv_swap(struct cpu_ctx *c, const int32_t *blocks, int32_t n, float *to,
			      const float *from, struct bg_err *err)
{
	enum bg_status st = check_blocks(c, blocks, n, err);
	if (st != BG_OK)
		return st;
	size_t sl = slab_floats(c);
	for (int32_t i = 0; i < n; i++) {
		size_t off = (size_t)blocks[i] * sl;
		for (uint32_t l = 0; l < c->hp.n_layer; l++)
			for (uint32_t v = 0; v < c->kv_parts && c->kv_slab[l] != KV_NONE; v++) {
				float *slab = (v ? kv_v(c, l) : kv_k(c, l)) + off;
				if (to) {
					memcpy(to, slab, sl * sizeof(float));
					to += sl;
				} else {
					memcpy(slab, from, sl * sizeof(float));
					from += sl;
				}
			}
	}
	return BG_OK;
}

static enum bg_status cpu_kv_swap_out(void *ctx, const int32_t *blocks, int32_t n, void *host,
				      struct bg_err *err)
{
	return kv_swap(ctx, blocks, n, host, NULL, err);
}

static enum bg_status cpu_kv_swap_in(void *ctx, const int32_t *blocks, int32_t n, const void *host,
				     struct bg_err *err)
{
	return kv_swap(ctx, blocks, n, NULL, host, err);
}

static enum bg_status cpu_kv_copy(void *ctx, int32_t src, int32_t dst, struct bg_err *err)
{
	struct cpu_ctx *c = ctx;
	int32_t both[2] = {src, dst};
	enum bg_status st = check_blocks(c, both, 2, err);
	if (st != BG_OK || src == dst)
		return st;
	size_t sl = slab_floats(c);
	for (uint32_t l = 0; l < c->hp.n_layer; l++) {
		if (c->kv_slab[l] == KV_NONE)
			continue;
		memcpy(kv_k(c, l) + (size_t)dst * sl, kv_k(c, l) + (size_t)src * sl,
		       sl * sizeof(float));
		if (c->kv_parts == 2)
			memcpy(kv_v(c, l) + (size_t)dst * sl, kv_v(c, l) + (size_t)src * sl,
			       sl * sizeof(float));
	}
	return BG_OK;
}

static enum bg_status cpu_state_copy(void *ctx, const int32_t *src, const int32_t *dst, int32_t n,
				     struct bg_err *err)
{
	struct cpu_ctx *c = ctx;
	int32_t *stage = malloc((size_t)(n > 0 ? n : 1) * sizeof *stage), n_stage = 0;
	if (!stage)
		return bg_fail(err, BG_ERR_NOMEM, "state_copy: out of memory");
	enum bg_status st =
	    backend_state_copy_plan(src, dst, n, c->n_state_slots, stage, &n_stage, err);
	size_t sb = c->state_floats * sizeof(float);
	float *tmp = st == BG_OK && n_stage ? malloc((size_t)n_stage * sb) : NULL;
	if (st == BG_OK && n_stage && !tmp)
		st = bg_fail(err, BG_ERR_NOMEM, "state_copy: out of memory");
	for (int32_t i = 0; st == BG_OK && i < n; i++) /* the sources a copy overwrites */
		if (stage[i] >= 0)
			memcpy(tmp + (size_t)stage[i] * c->state_floats, state_at(c, src[i], 0),
			       sb);
	for (int32_t i = 0; st == BG_OK && i < n; i++)
		if (src[i] != dst[i])
			memcpy(state_at(c, dst[i], 0),
			       stage[i] >= 0 ? tmp + (size_t)stage[i] * c->state_floats
					     : state_at(c, src[i], 0),
			       sb);
	free(tmp);
	free(stage);
	return st;
}

static void cpu_mem_info(void *ctx, struct backend_mem *out)
{
	struct cpu_ctx *c = ctx;
	out->weight_bytes = (size_t)c->m->weight_bytes;
	out->kv_bytes = c->kv_bytes + (size_t)c->n_state_slots * c->state_floats * sizeof(float);
	out->workspace_bytes = workspace_bytes(c);
	out->on_device = false;
}

static void cpu_destroy(void *ctx)
{
	struct cpu_ctx *c = ctx;
	if (!c)
		return;
	tp_destroy(c->pool);
	cpu_weights_free(&c->w);
	free(c->last_tok);
	free(c->kv);
	free(c->kv_slab);
	free(c->norms);
	free(c->ones);
	free(c->ple);
	free(c->ple_proj);
	free(c->ple_gate);
	free(c->pl_norms);
	free(c->biases);
	free(c->oai);
	free(c->extra_norms);
	free(c->mla_norms);
	free(c->conv_w);
	free(c->ssm_w);
	free(c->ssm_t0);
	free(c->state);
	free(c->state_off);
	free(c->gdn_u);
	free(c->gdn_z);
	free(c->gdn_b);
	free(c->gdn_a);
	free(c->gdn_vec);
	free(c->freq);
	free(c->freq_swa);
	free(c->rope_swa);
	free(c->x);
	free(c->xb);
	free(c->par);
	free(c->g4a);
	free(c->g4b);
	free(c->g4w);
	free(c->q);
	free(c->k);
	free(c->v);
	free(c->att);
	free(c->hb);
	free(c->hb2);
	free(c->qact);
	free(c->rope);
	free(c->tok_pos);
	free(c->tok_seq);
	free(c->att_scores);
	free(c->xf);
	free(c->logits);
	free(c->samp_scratch);
	cpu_moe_destroy(c->moe);
	free(c);
}

static const struct backend_ops cpu_ops = {
    .forward = cpu_forward,
    .sample = cpu_sample,
    .get_logits = cpu_get_logits,
    .kv_swap_out = cpu_kv_swap_out,
    .kv_swap_in = cpu_kv_swap_in,
    .kv_copy = cpu_kv_copy,
    .state_copy = cpu_state_copy,
    .mem_info = cpu_mem_info,
    .destroy = cpu_destroy,
};

void backend_cpu_profile(struct backend *b, struct backend_cpu_profile *p)
{
	((struct cpu_ctx *)b->ctx)->prof = p;
}

void backend_cpu_prefetch(struct backend *b, size_t bytes)
{
	((struct cpu_ctx *)b->ctx)->pf_bytes = bytes;
}

/* ---- creation ---- */

static void cpu_name(char *buf, size_t n)
{
	snprintf(buf, n, "CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "model name", 10) == 0) {
			char *p = strchr(line, ':');
			if (p) {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				p[strcspn(p, "\n")] = 0;
				snprintf(buf, n, "%s", p);
			}
			break;
		}
	}
	fclose(f);
}

static enum bg_status check_model(const struct model *m, struct bg_err *err)
{
	const struct model_hparams *hp = &m->hp;
	if (m->synthetic && !m->tok_embd.data)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CPU backend cannot run a lazy synthetic model (no weights in "
			       "host memory)");
	if (hp->n_head == 0 || hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0 ||
	    model_n_head(hp, true) % model_n_head_kv(hp, true) != 0 ||
	    model_rope_dim(hp, true) > model_head_dim(hp, true) ||
	    model_rope_dim(hp, true) % 2 != 0 ||
	    hp->head_dim == 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2 != 0 ||
	    hp->n_layer == 0 || hp->n_vocab == 0 || hp->n_embd == 0 || hp->n_ff == 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED, "unsupported model hyper-parameters");
	enum bg_status st;
	if (hp->n_embd_per_layer &&
	    ((st = check_weight(&m->pl_tok_embd, "per_layer_token_embd.weight", -1, err)) != BG_OK ||
	     (st = check_weight(&m->pl_model_proj, "per_layer_model_proj.weight", -1, err)) !=
		 BG_OK ||
	     (st = check_weight(&m->pl_proj_norm, "per_layer_proj_norm.weight", -1, err)) != BG_OK))
		return st;
	if ((st = check_weight(&m->tok_embd, "token_embd.weight", -1, err)) != BG_OK ||
	    (st = check_weight(&m->output, "output.weight", -1, err)) != BG_OK ||
	    (st = check_weight(&m->output_norm, "output_norm.weight", -1, err)) != BG_OK)
		return st;
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct model_layer *L = &m->layers[l];
		/* with experts: the router and expert 0's view (every expert has its row
		 * size) in place of the dense FFN */
		const struct model_weight e_gate = model_expert(&L->gate_exps, 0);
		const struct model_weight e_up = model_expert(&L->up_exps, 0);
		const struct model_weight e_down = model_expert(&L->down_exps, 0);
		/* by the router (nemotron_h_moe: its Mamba2 and attention layers have no FFN;
		 * step35: dense layers after MoE ones) */
		const bool moe = hp->n_expert > 0 && model_layer_moe(L);
		const struct model_weight *ws[10] = {
		    &L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_norm,
		    moe ? &e_gate : &L->w_gate, moe ? &e_up : &L->w_up, moe ? &e_down : &L->w_down,
		    &L->ffn_gate_inp};
		static const char *names[10] = {"attn_norm", "attn_q",	    "attn_k",	"attn_v",
						"attn_output", "ffn_norm", "ffn_gate", "ffn_up",
						"ffn_down",   "ffn_gate_inp"};
		static const char *enames[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
		const bool own_kv = l < model_n_layer_kv(hp); /* gemma4: shared-KV layers have none */
		for (int i = 0; i < (moe ? 10 : 9); i++)
			if (!(hp->no_pre_norms && (i == 0 || i == 5)) && /* olmo2: none */
			    !(hp->parallel && i == 5) && /* command-r: attn_norm only */
			    !(hp->xielu && i == 6) &&			 /* apertus: no gate */
			    !(hp->relu2 && i == 6) &&		     /* nemotron_h: no gate, */
			    !(L->ffn_only && i >= 1 && i <= 5) && /* FFN layers, */
			    !(L->no_ffn && i >= 5 && i <= 8) &&   /* the others */
			    !(!own_kv && (i == 2 || i == 3)) &&
			    !(hp->mla && i >= 1 && i <= 3) &&		  /* deepseek2: below */
			    !((L->conv || L->gdn || L->ssm) && i >= 1 && i <= 3) && /* lfm2, qwen35, Mamba2: below */
			    (st = check_weight(ws[i],
					       moe && i >= 6 && i < 9 ? enames[i - 6] : names[i],
					       (int)l, err)) != BG_OK)
				return st;
		if (moe && hp->gemma4_moe) { /* gemma4: the dense FFN beside the experts */
			const struct model_weight *gw[3] = {&L->w_gate, &L->w_up, &L->w_down};
			for (int i = 0; i < 3; i++)
				if ((st = check_weight(gw[i], names[6 + i], (int)l, err)) != BG_OK)
					return st;
		}
		if (hp->mla) { /* deepseek2's latent attention (model.h) */
			const struct model_weight e_kb = model_expert(&L->wk_b, 0);
			const struct model_weight e_vb = model_expert(&L->wv_b, 0);
			const struct model_weight *mw[7] = {hp->n_lora_q ? &L->wq_a : &L->wq,
							    hp->n_lora_q ? &L->wq_b : &L->wq,
							    &L->wkv_a,
							    &L->kv_a_norm,
							    &e_kb,
							    &e_vb,
							    hp->n_lora_q ? &L->q_a_norm
									 : &L->kv_a_norm};
			static const char *mnames[7] = {
			    "attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_a_norm",
			    "attn_k_b", "attn_v_b", "attn_q_a_norm"};
			for (int i = 0; i < 7; i++)
				if ((st = check_weight(mw[i], mnames[i], (int)l, err)) != BG_OK)
					return st;
			if (hp->head_dim != hp->n_lora_kv + hp->rope_dim || hp->n_head_kv != 1 ||
			    L->wk_b.ne2 != hp->n_head || L->wv_b.ne2 != hp->n_head ||
			    e_kb.ne0 != hp->mla_nope || e_kb.ne1 != hp->n_lora_kv ||
			    e_vb.ne0 != hp->n_lora_kv || e_vb.ne1 != hp->mla_v_head ||
			    L->wo.ne0 != (uint64_t)hp->n_head * hp->mla_v_head)
				return bg_fail(err, BG_ERR_UNSUPPORTED,
					       "the CPU backend cannot run layer %u's latent "
					       "attention as described",
					       l);
		}
		if (L->conv) { /* lfm2's short-conv block (model.h) */
			if ((st = check_weight(&L->conv_in, "shortconv.in_proj", (int)l, err)) !=
			    BG_OK)
				return st;
			if (L->conv_in.ne0 != hp->n_embd ||
			    L->conv_in.ne1 != 3 * (uint64_t)hp->n_embd ||
			    L->conv_w.type != GGUF_DTYPE_F32 || !L->conv_w.data ||
			    L->conv_w.ne0 != hp->conv_l || hp->conv_l > MODEL_CONV_L_MAX ||
			    L->conv_w.ne1 != hp->n_embd || L->wo.ne0 != hp->n_embd ||
			    (uint64_t)hp->n_head * hp->head_dim != hp->n_embd)
				return bg_fail(err, BG_ERR_UNSUPPORTED,
					       "the CPU backend cannot run layer %u's short "
					       "convolution as described",
					       l);
		}
		if (L->gdn) { /* qwen35's delta net (model.h) */
			const struct model_weight *gw[4] = {&L->gdn_qkv, &L->gdn_z, &L->gdn_beta,
							    &L->gdn_alpha};
			static const char *gnames[4] = {"attn_qkv", "attn_gate", "ssm_beta",
							"ssm_alpha"};
			for (int i = 0; i < 4; i++)
				if ((st = check_weight(gw[i], gnames[i], (int)l, err)) != BG_OK)
					return st;
			const struct model_weight *fv[4] = {&L->conv_w, &L->gdn_dt, &L->gdn_a,
							    &L->gdn_norm};
			bool ok = hp->gdn_conv <= MODEL_CONV_L_MAX && hp->gdn_d <= 1024 &&
				  hp->gdn_nv % hp->gdn_nk == 0 &&
				  L->gdn_qkv.ne1 == (uint64_t)cpu_gdn_conv_dim(hp) &&
				  L->gdn_z.ne1 == (uint64_t)cpu_gdn_v_dim(hp) &&
				  L->wo.ne0 == (uint64_t)cpu_gdn_v_dim(hp) &&
				  L->conv_w.ne0 == hp->gdn_conv &&
				  L->conv_w.ne1 == (uint64_t)cpu_gdn_conv_dim(hp) &&
				  L->gdn_dt.ne0 == hp->gdn_nv && L->gdn_a.ne0 == hp->gdn_nv &&
				  L->gdn_norm.ne0 == hp->gdn_d;
			for (int i = 0; i < 4; i++)
				ok = ok && fv[i]->type == GGUF_DTYPE_F32 && fv[i]->data;
			if (!ok)
				return bg_fail(
				    err, BG_ERR_UNSUPPORTED,
				    "the CPU backend cannot run layer %u's gated delta net "
				    "as described",
				    l);
		}
		if (moe && (L->ffn_gate_inp.ne0 != hp->n_embd || L->ffn_gate_inp.ne1 != hp->n_expert ||
			    /* (nemotron_h_moe: no gate) */
			    (!hp->relu2 && L->gate_exps.ne2 != hp->n_expert) ||
			    L->up_exps.ne2 != hp->n_expert ||
			    L->down_exps.ne2 != hp->n_expert ||
			    (!hp->relu2 && e_gate.ne1 != hp->n_ff_exp) ||
			    e_up.ne1 != hp->n_ff_exp || e_down.ne0 != hp->n_ff_exp ||
			    hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert ||
			    hp->n_expert > MOE_MAX_EXPERTS))
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the CPU backend cannot run layer %u's experts as described", l);
		/* glm4moe, minimax-m2, deepseek2 (optional there): the selection bias */
		if (moe && hp->moe_sel_bias && (L->exp_probs_b.data || !hp->mla) &&
		    (L->exp_probs_b.type != GGUF_DTYPE_F32 || !L->exp_probs_b.data ||
		     L->exp_probs_b.ne0 != hp->n_expert))
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the CPU backend cannot run layer %u's selection bias as "
				       "described",
				       l);
		if (L->ssm || hp->ssm_parallel) { /* granitehybrid's Mamba2 block (model.h);
						   * falcon-h1's beside the attention */
			const uint64_t D = hp->ssm_d_inner, H = hp->ssm_n_head,
				       GN = (uint64_t)hp->ssm_n_group * hp->ssm_d_state;
			const struct model_weight *f[6] = {&L->ssm_conv_w, &L->ssm_conv_b,
							   &L->ssm_dt_b,   &L->ssm_a,
							   &L->ssm_d,	   &L->ssm_norm};
			const uint64_t fn[6] = {
			    (D + 2 * GN) * hp->ssm_d_conv, D + 2 * GN, H, H, H, D};
			const struct model_weight *out = hp->ssm_parallel ? &L->ssm_out : &L->wo;
			bool ok = (st = check_weight(&L->ssm_in, "ssm_in", (int)l, err)) == BG_OK &&
				  (st = check_weight(out, "ssm_out", (int)l, err)) == BG_OK &&
				  L->ssm_in.ne0 == hp->n_embd &&
				  L->ssm_in.ne1 == 2 * D + 2 * GN + H && out->ne0 == D &&
				  out->ne1 == hp->n_embd && hp->ssm_n_group &&
				  hp->ssm_n_head % hp->ssm_n_group == 0 &&
				  D % hp->ssm_n_head == 0 && hp->ssm_d_conv >= 2;
			for (int i = 0; ok && i < 6; i++) /* falcon-h1: conv bias, norm optional */
				ok = (hp->ssm_parallel && (i == 1 || i == 5) && !f[i]->data &&
				      !f[i]->ne0) ||
				     (f[i]->type == GGUF_DTYPE_F32 && f[i]->data &&
				      f[i]->ne0 * f[i]->ne1 == fn[i]);
			if (!ok)
				return st != BG_OK
					   ? st
					   : bg_fail(err, BG_ERR_UNSUPPORTED,
						     "the CPU backend cannot run layer %u's "
						     "Mamba2 block as described",
						     l);
		}
		if (moe && hp->n_expert_shared) { /* glm4moe, deepseek2: the shared expert */
			const uint64_t FS = model_ff_shexp(hp);
			const struct model_weight *sw[3] = {&L->gate_shexp, &L->up_shexp,
							    &L->down_shexp};
			static const char *snames[3] = {"ffn_gate_shexp", "ffn_up_shexp",
							"ffn_down_shexp"};
			for (int i = hp->relu2; i < 3; i++) /* nemotron_h_moe: no gate */
				if ((st = check_weight(sw[i], snames[i], (int)l, err)) != BG_OK)
					return st;
			if (hp->shexp_gate && /* qwen35moe, qwen2moe: its gate */
			    (st = check_weight(&L->gate_inp_shexp, "ffn_gate_inp_shexp", (int)l,
					       err)) != BG_OK)
				return st;
			if ((!hp->relu2 && L->gate_shexp.ne1 != FS) || L->up_shexp.ne1 != FS ||
			    L->down_shexp.ne0 != FS ||
			    (hp->shexp_gate &&
			     (L->gate_inp_shexp.ne0 != hp->n_embd || L->gate_inp_shexp.ne1 != 1)))
				return bg_fail(err, BG_ERR_UNSUPPORTED,
					       "the CPU backend cannot run layer %u's shared "
					       "expert as described",
					       l);
		}
		const struct model_weight *xs[4] = {&L->q_norm, &L->k_norm, &L->attn_post_norm,
						    &L->ffn_post_norm};
		static const char *xnames[4] = {"attn_q_norm", "attn_k_norm", "post_attention_norm",
						"post_ffw_norm"};
		uint64_t lhd = model_head_dim(hp, L->swa);
		uint64_t xlen[4] = {hp->qk_norm_full ? (uint64_t)hp->n_head * lhd : lhd,
				    hp->qk_norm_full ? (uint64_t)model_n_head_kv(hp, L->swa) * lhd
						     : lhd,
				    hp->n_embd, hp->n_embd};
		/* Command R+: a weight row per head */
		uint64_t xrows[4] = {hp->qk_norm_heads ? hp->n_head : 1,
				     hp->qk_norm_heads ? model_n_head_kv(hp, L->swa) : 1, 1, 1};
		for (int i = 0; i < 4; i++) {
			if (!(i < 2 ? hp->qk_norm : hp->post_norms) || (i == 1 && !own_kv) ||
			    (i < 2 && (L->conv || L->gdn)))
				continue;
			if ((st = check_weight(xs[i], xnames[i], (int)l, err)) != BG_OK)
				return st;
			if (xs[i]->type != GGUF_DTYPE_F32 || xs[i]->ne0 != xlen[i] ||
			    xs[i]->ne1 != xrows[i])
				return bg_fail(err, BG_ERR_UNSUPPORTED,
					       "the CPU backend needs %s (layer %u) as %llu f32 values",
					       xnames[i], l,
					       (unsigned long long)(xlen[i] * xrows[i]));
		}
		/* gpt-oss's vectors, read as f32 (copied, or memcpy'd per use by cpu_moe) */
		const struct model_weight *os[6] = {&L->attn_sinks,   &L->bo,	     &L->ffn_gate_inp_b,
						    &L->gate_exps_b, &L->up_exps_b, &L->down_exps_b};
		static const char *onames[6] = {"attn_sinks",	      "attn_output.bias",
						"ffn_gate_inp.bias",  "ffn_gate_exps.bias",
						"ffn_up_exps.bias",   "ffn_down_exps.bias"};
		const uint64_t X = hp->n_expert;
		const uint64_t olen[6][2] = {{hp->n_head, 0}, {hp->n_embd, 0}, {X, 0},
					     {hp->n_ff_exp, X}, {hp->n_ff_exp, X}, {hp->n_embd, X}};
		const bool ohas[6] = {hp->attn_sinks, hp->attn_out_bias, hp->moe_bias,
				      hp->moe_bias,   hp->moe_bias,	 hp->moe_bias};
		for (int i = 0; i < 6; i++) {
			if (!ohas[i])
				continue;
			if ((st = check_weight(os[i], onames[i], (int)l, err)) != BG_OK)
				return st;
			if (os[i]->type != GGUF_DTYPE_F32 || os[i]->ne0 != olen[i][0] ||
			    os[i]->ne1 != 1 || os[i]->ne2 != olen[i][1] || (ohas[i] && !moe && i > 1))
				return bg_fail(err, BG_ERR_UNSUPPORTED,
					       "the CPU backend needs %s (layer %u) as %llu f32 "
					       "values%s",
					       onames[i], l, (unsigned long long)olen[i][0],
					       olen[i][1] ? " per expert" : "");
		}
		const struct model_weight *ps[3] = {&L->pl_inp_gate, &L->pl_proj, &L->pl_post_norm};
		static const char *pnames[3] = {"inp_gate", "proj", "post_norm"};
		for (int i = 0; i < 3 && hp->n_embd_per_layer; i++) /* gemma4 E2B/E4B */
			if ((st = check_weight(ps[i], pnames[i], (int)l, err)) != BG_OK)
				return st;
		if (hp->n_embd_per_layer && L->pl_post_norm.type != GGUF_DTYPE_F32)
			return bg_fail(err, BG_ERR_UNSUPPORTED, "post_norm (layer %u) must be f32", l);
		if (l >= model_n_layer_kv(hp) &&
		    (L->kv_src >= model_n_layer_kv(hp) || m->layers[L->kv_src].swa != L->swa))
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "layer %u reads layer %u's KV cache, which is not one of its kind",
				       l, L->kv_src);
		if (hp->swiglu_oai && !moe)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the clamped SwiGLU is supported in experts only");
		if (hp->xielu && (moe || hp->gelu))
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the xIELU FFN is supported in dense layers only");
		if (!hp->qkv_bias)
			continue;
		/* the biases are read as f32 vectors of the projections' output sizes */
		const struct model_weight *bs[3] = {&L->bq, &L->bk, &L->bv};
		static const char *bnames[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
		uint64_t want[3] = {(uint64_t)hp->n_head * hp->head_dim,
				    (uint64_t)hp->n_head_kv * hp->head_dim,
				    (uint64_t)hp->n_head_kv * hp->head_dim};
		for (int i = 0; i < 3; i++) {
			if ((st = check_weight(bs[i], bnames[i], (int)l, err)) != BG_OK)
				return st;
			if (bs[i]->type != GGUF_DTYPE_F32 || bs[i]->ne0 != want[i] ||
			    bs[i]->ne1 != 1)
				return bg_fail(err, BG_ERR_UNSUPPORTED,
					       "the CPU backend needs %s (layer %u) as %llu f32 "
					       "values",
					       bnames[i], l, (unsigned long long)want[i]);
		}
	}
	return BG_OK;
}

/* The RoPE frequencies, and the norms other than attn/ffn/output as f32 arrays: Q/K norms
 * and post-norms, deepseek2's q_a / kv_a norms, gemma4 E's per-layer input norms. */
static enum bg_status load_arch_extras(struct cpu_ctx *c, const struct model *m,
				       struct bg_err *err)
{
	const struct model_hparams *hp = &m->hp;
	size_t hd = model_head_dim_max(hp), E = hp->n_embd, half = hp->rope_dim / 2;
	size_t half_swa = model_rope_dim(hp, true) / 2;
	c->freq = malloc(half * sizeof(double));
	c->freq_swa = malloc(half_swa * sizeof(double));
	float *factors = NULL;
	if (m->rope_factors.data) {
		factors = malloc(half * sizeof(float));
		if (factors)
			memcpy(factors, m->rope_factors.data, half * sizeof(float));
	}
	if (!c->freq || !c->freq_swa || (m->rope_factors.data && !factors)) {
		free(factors);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the RoPE tables");
	}
	arch_rope_freqs(hp, factors, false, c->freq, &c->mscale);
	arch_rope_freqs(hp, factors, true, c->freq_swa, &c->mscale_swa);
	free(factors);
	c->rope_swa_differs = c->mscale != c->mscale_swa || half != half_swa ||
			      memcmp(c->freq, c->freq_swa, half * sizeof(double)) != 0;
	c->qn_dim = hp->qk_norm_full || hp->qk_norm_heads ? c->q_dim : (int64_t)hd;
	c->kn_dim = hp->qk_norm_full || hp->qk_norm_heads ? c->kv_dim : (int64_t)hd;
	if (hp->mla) { /* deepseek2: the q_a and kv_a norms, f32 */
		size_t per = (size_t)hp->n_lora_q + hp->n_lora_kv;
		c->mla_norms = malloc((size_t)hp->n_layer * per * sizeof(float));
		if (!c->mla_norms)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the MLA norms");
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			float *dst = c->mla_norms + (size_t)l * per;
			if (hp->n_lora_q)
				cpuk_dequant_row(L->q_a_norm.type, L->q_a_norm.data,
						 (int64_t)hp->n_lora_q, dst);
			cpuk_dequant_row(L->kv_a_norm.type, L->kv_a_norm.data,
					 (int64_t)hp->n_lora_kv, dst + hp->n_lora_q);
		}
	}
	if (hp->n_embd_per_layer) { /* gemma4 E2B/E4B: the per-layer inputs' norms, f32 */
		size_t P = hp->n_embd_per_layer;
		c->pl_norms = malloc((P + (size_t)hp->n_layer * E) * sizeof(float));
		if (!c->pl_norms)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the per-layer norms");
		cpuk_dequant_row(m->pl_proj_norm.type, m->pl_proj_norm.data, (int64_t)P,
				 c->pl_norms);
		for (uint32_t l = 0; l < hp->n_layer; l++)
			cpuk_dequant_row(m->layers[l].pl_post_norm.type,
					 m->layers[l].pl_post_norm.data, (int64_t)E,
					 c->pl_norms + P + (size_t)l * E);
	}
	if (hp->ssm_d_conv) { /* granitehybrid: the Mamba2 layers' small weights, f32 */
		struct cpu_ssm_dims *d = &c->ssm;
		*d = (struct cpu_ssm_dims){hp->ssm_d_conv,  hp->ssm_d_inner, hp->ssm_n_head,
					   hp->ssm_n_group, hp->ssm_d_state, hp->rms_eps};
		const size_t C = (size_t)cpu_ssm_conv_dim(d);
		c->ssm_per = C * ((size_t)d->d_conv + 1) + 3 * (size_t)d->H + (size_t)d->D;
		c->ssm_w = calloc((size_t)hp->n_layer * c->ssm_per, sizeof(float));
		if (!c->ssm_w)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the Mamba2 weights");
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			if (!L->ssm && !hp->ssm_parallel)
				continue;
			const struct model_weight *f[6] = {&L->ssm_conv_w, &L->ssm_conv_b,
							   &L->ssm_dt_b,   &L->ssm_a,
							   &L->ssm_d,	   &L->ssm_norm};
			float *dst = c->ssm_w + (size_t)l * c->ssm_per;
			const size_t H = (size_t)d->H;
			const size_t fn[6] = {C * (size_t)d->d_conv, C, H, H, H, (size_t)d->D};
			for (int i = 0; i < 6; i++) { /* f32, the sizes check_model checked; an
						       * absent conv bias stays 0 (calloc) */
				if (f[i]->data)
					memcpy(dst, f[i]->data, fn[i] * sizeof(float));
				dst += fn[i];
			}
		}
	}
	if (hp->gemma4_moe) { /* gemma4's MoE vectors, f32 (model.c's take_gemma4_moe) */
		const size_t per = 4 * E + hp->n_expert;
		c->g4w = calloc((size_t)hp->n_layer * per, sizeof(float));
		if (!c->g4w)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the experts' norms");
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			const struct model_weight *f[5] = {&L->ffn_pre_norm_2, &L->ffn_post_norm_1,
							   &L->ffn_post_norm_2, &L->gate_inp_s,
							   &L->down_exps_s};
			float *dst = c->g4w + (size_t)l * per;
			for (int i = 0; i < 5 && model_layer_moe(L); i++)
				if (f[i]->data)
					memcpy(dst + (size_t)i * E, f[i]->data,
					       (size_t)(f[i]->ne0 * f[i]->ne1) * sizeof(float));
		}
	}
	if (hp->conv_l || hp->gdn_conv) { /* lfm2, qwen35: the conv taps, f32 (check_model) */
		size_t per =
		    hp->conv_l ? E * hp->conv_l : (size_t)cpu_gdn_conv_dim(hp) * hp->gdn_conv;
		c->conv_per = per;
		c->conv_w = calloc((size_t)hp->n_layer * per, sizeof(float));
		if (!c->conv_w)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the conv weights");
		for (uint32_t l = 0; l < hp->n_layer; l++)
			if (m->layers[l].conv || m->layers[l].gdn)
				memcpy(c->conv_w + (size_t)l * per, m->layers[l].conv_w.data,
				       per * sizeof(float));
	}
	if (hp->gdn_conv) { /* qwen35: ssm_dt.bias, ssm_a, ssm_norm per layer (check_model) */
		size_t nv = hp->gdn_nv, per = 2 * nv + hp->gdn_d;
		c->gdn_vec = calloc((size_t)hp->n_layer * per, sizeof(float));
		if (!c->gdn_vec)
			return bg_fail(err, BG_ERR_NOMEM,
				       "out of memory for the delta-net weights");
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			float *dst = c->gdn_vec + (size_t)l * per;
			if (!L->gdn)
				continue;
			memcpy(dst, L->gdn_dt.data, nv * sizeof(float));
			memcpy(dst + nv, L->gdn_a.data, nv * sizeof(float));
			memcpy(dst + 2 * nv, L->gdn_norm.data, hp->gdn_d * sizeof(float));
		}
	}
	if (!hp->qk_norm && !hp->post_norms)
		return BG_OK;
	c->extra_per_layer = (size_t)(c->qn_dim + c->kn_dim) + 2 * E;
	c->extra_norms = calloc((size_t)hp->n_layer * c->extra_per_layer, sizeof(float));
	if (!c->extra_norms)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the norms");
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct model_layer *L = &m->layers[l];
		float *dst = c->extra_norms + (size_t)l * c->extra_per_layer;
		if (hp->qk_norm && !L->conv && !L->gdn) { /* the layer's widths (check_model), <=
							   * qn_dim, kn_dim */
			cpuk_dequant_row(L->q_norm.type, L->q_norm.data,
					 (int64_t)(L->q_norm.ne0 * L->q_norm.ne1), dst);
			cpuk_dequant_row(L->k_norm.type, L->k_norm.data,
					 (int64_t)(L->k_norm.ne0 * L->k_norm.ne1), dst + c->qn_dim);
		}
		dst += c->qn_dim + c->kn_dim;
		if (hp->post_norms) {
			cpuk_dequant_row(L->attn_post_norm.type, L->attn_post_norm.data, (int64_t)E,
					 dst);
			cpuk_dequant_row(L->ffn_post_norm.type, L->ffn_post_norm.data, (int64_t)E,
					 dst + E);
		}
	}
	return BG_OK;
}

/* The recurrent-state slots: none when no layer has model_state_floats; else n_slots
 * (> 0) zeroed slots, or fewer: at most as many as fit in the larger of the KV pool's
 * bytes and STATE_MIN_BUDGET (at least one), so that a state of tens of megabytes a
 * sequence (a 4B gated delta net's) does not take 256 times that by default. */
#define STATE_MIN_BUDGET ((uint64_t)1 << 30)
static enum bg_status state_create(struct cpu_ctx *c, const struct model *m, int32_t n_slots,
				   struct bg_err *err)
{
	uint64_t per = 0;
	enum bg_status st = model_state_layout(m, n_slots, &c->state_off, &per, err);
	if (st != BG_OK || per == 0)
		return st;
	uint64_t budget = c->kv_bytes > STATE_MIN_BUDGET ? c->kv_bytes : STATE_MIN_BUDGET;
	uint64_t fit = budget / (per * sizeof(float));
	if ((uint64_t)n_slots > fit)
		n_slots = fit > 1 ? (int32_t)fit : 1;
	c->state_floats = (size_t)per;
	c->n_state_slots = n_slots;
	if (!(c->state = calloc((size_t)n_slots * c->state_floats, sizeof(float))))
		return bg_fail(err, BG_ERR_NOMEM,
			       "out of memory for %d recurrent-state slots of %zu bytes", n_slots,
			       c->state_floats * sizeof(float));
	return BG_OK;
}

enum bg_status backend_cpu_create(const struct model *m, const struct backend_config *cfg,
				  struct backend **out, struct bg_err *err)
{
	*out = NULL;
	if (!m || !cfg || cfg->block_size <= 0)
		return bg_fail(err, BG_ERR_INVALID, "backend_cpu_create: bad arguments");
	enum bg_status st = check_model(m, err);
	if (st != BG_OK)
		return st;
	const struct model_hparams *hp = &m->hp;

	int64_t kv_tokens = cfg->kv_tokens;
	if (kv_tokens < 0)
		return bg_fail(err, BG_ERR_INVALID, "kv_tokens must be >= 0");
	if (kv_tokens == 0) {
		int64_t ctx = hp->n_ctx_train ? hp->n_ctx_train : 4096;
		kv_tokens = (ctx < 4096 ? ctx : 4096) * 4;
	}
	int64_t n_blocks = (kv_tokens + cfg->block_size - 1) / cfg->block_size;
	if (n_blocks > INT32_MAX)
		return bg_fail(err, BG_ERR_CAPACITY, "KV pool of %lld blocks is too large",
			       (long long)n_blocks);

	struct cpu_ctx *c = calloc(1, sizeof *c);
	struct backend *b = calloc(1, sizeof *b);
	if (!c || !b) {
		free(c);
		free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory creating the CPU backend");
	}
	if (!cpu_weights_init(&c->w, m)) {
		free(c);
		free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory creating the CPU backend");
	}
	c->m = &c->w.m;
	c->hp = *hp;
	c->pf_bytes = 512 * 1024;
	c->pf_max_tok = 4;
	c->kv_window = model_kv_window(hp);
	c->lvl = cpuk_detect();
	/* BG_CPU_KERNELS=scalar|avx2|avx512 picks a lower level (tests, benchmarks); the
	 * choice is fixed for the backend's life, as batch invariance needs. */
	const char *want_lvl = getenv("BG_CPU_KERNELS");
	if (want_lvl && *want_lvl) {
		int found = 0;
		for (int l = CPUK_SCALAR; l <= CPUK_AVX512; l++)
			if (strcmp(want_lvl, cpuk_level_name((enum cpuk_level)l)) == 0 &&
			    cpuk_supported((enum cpuk_level)l)) {
				c->lvl = (enum cpuk_level)l;
				found = 1;
			}
		if (!found) {
			cpu_destroy(c);
			free(b);
			return bg_fail(
			    err, BG_ERR_UNSUPPORTED,
			    "BG_CPU_KERNELS=%s: not a kernel level this processor supports "
			    "(scalar, avx2, avx512)",
			    want_lvl);
		}
	}
	/* the integer kernels give the same bits on every instruction set; the scalar level
	 * (tests) keeps to the portable code */
	c->qisa = c->lvl == CPUK_SCALAR ? QDOT_PORTABLE : qdot_detect();
	/* deepseek2: the raw queries (mla_qkv) and wv_b's outputs live in c->att and c->q,
	 * MLA's scratch rows in c->hb / c->hb2 */
	int64_t mla_q = 0;
	c->hb_w = hp->n_ff;
	if (hp->conv_l && 3 * (int64_t)hp->n_embd > c->hb_w) /* lfm2: in_proj's [B | C | x] */
		c->hb_w = 3 * (int64_t)hp->n_embd;
	if (hp->gdn_conv) { /* qwen35: the conv output (CD), the gated Q projection (2 q_dim) */
		int64_t w = cpu_gdn_conv_dim(hp), q2 = 2 * (int64_t)model_q_dim_max(hp);
		w = q2 > w ? q2 : w;
		c->hb_w = w > c->hb_w ? w : c->hb_w;
		mla_q = cpu_gdn_v_dim(hp); /* c->att holds VD values a row (gdn_block) */
	}
	if ((int64_t)model_q_dim_max(hp) / model_head_dim_max(hp) > c->hb_w) /* step35's gates */
		c->hb_w = (int64_t)model_q_dim_max(hp) / model_head_dim_max(hp);
	if (hp->ssm_d_conv) { /* granitehybrid: ssm_in's [z | xBC | dt] */
		int64_t w = 2 * (int64_t)hp->ssm_d_inner +
			    2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state + hp->ssm_n_head;
		c->hb_w = w > c->hb_w ? w : c->hb_w;
	}
	if (hp->mla) {
		int64_t qh = (int64_t)hp->n_head * (hp->mla_nope + hp->rope_dim);
		int64_t ov = (int64_t)hp->n_head * hp->mla_v_head;
		mla_q = qh > ov ? qh : ov;
		int64_t w = hp->n_lora_q > hp->n_lora_kv ? hp->n_lora_q : hp->n_lora_kv;
		w = hp->mla_nope > w ? hp->mla_nope : w;
		c->hb_w = w > c->hb_w ? w : c->hb_w;
		/* mm_heads quantizes every head's input of a token (n_head mla_nope or n_head
		 * n_lora_kv values) into one qact row: within the bound of n_head head_dim
		 * (model_q_dim_max) below, so it does wherever one head's would */
		const char *ph = getenv("BG_CPU_MLA_PER_HEAD");
		c->mla_per_head = ph && strcmp(ph, "1") == 0;
	}
	{
		int64_t kmax = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
		kmax = hp->n_ff_exp > kmax ? hp->n_ff_exp : kmax;
		kmax = c->hb_w > kmax ? c->hb_w : kmax;
		kmax = mla_q > kmax ? mla_q : kmax;
		int64_t qd = (int64_t)model_q_dim_max(hp);
		kmax = qd > kmax ? qd : kmax;
		/* the larger of Q8_0 blocks (40 bytes per 32) and Q8_K (292 per 256) */
		c->qact_row = (size_t)(kmax / 32 + 1) * sizeof(struct qdot_a32);
	}
	c->block_size = cfg->block_size;
	c->n_blocks = (int32_t)n_blocks;
	c->kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
	c->q_dim = (int64_t)hp->n_head * hp->head_dim;
	c->n_qh = hp->n_head;
	c->kv_max = (int64_t)model_kv_dim_max(hp);
	c->q_max = (int64_t)model_q_dim_max(hp);
	c->q_max = mla_q > c->q_max ? mla_q : c->q_max;
	if ((int64_t)hp->ssm_d_inner > c->q_max) /* granitehybrid: the Mamba2 output in att */
		c->q_max = (int64_t)hp->ssm_d_inner;
	c->kv_parts = hp->mla ? 1 : 2;
	if (!(c->kv_slab = malloc((size_t)hp->n_layer * sizeof *c->kv_slab))) {
		cpu_destroy(c);
		free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory creating the CPU backend");
	}
	for (uint32_t l = 0; l < hp->n_layer; l++)
		c->kv_slab[l] = kv_slab_of(hp, &m->layers[l], l) ? c->n_kv_slabs++ : KV_NONE;

	uint64_t kv_floats = (uint64_t)c->n_kv_slabs * c->kv_parts * (uint64_t)n_blocks *
			     cfg->block_size * (uint64_t)c->kv_max;
	if (kv_floats > SIZE_MAX / sizeof(float)) {
		cpu_destroy(c);
		free(b);
		return bg_fail(err, BG_ERR_CAPACITY, "KV pool too large");
	}
	c->kv_bytes = (size_t)kv_floats * sizeof(float);
	c->kv = calloc(kv_floats ? kv_floats : 1, sizeof(float));
	size_t E = hp->n_embd;
	c->norms = malloc((2 * (size_t)hp->n_layer + 1) * E * sizeof(float));
	c->samp_bytes = sampler_scratch_bytes((int32_t)hp->n_vocab) + hp->n_vocab * sizeof(float);
	c->ones = malloc(model_head_dim_max(hp) * sizeof(float));
	for (uint32_t i = 0; c->ones && i < model_head_dim_max(hp); i++)
		c->ones[i] = 1.0f;
	if (!c->kv || !c->norms || !c->ones) {
		cpu_destroy(c);
		free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a KV pool of %zu bytes",
			       (size_t)kv_floats * sizeof(float));
	}
	if ((st = tp_create(cfg->n_threads, &c->pool, err)) != BG_OK) {
		cpu_destroy(c);
		free(b);
		return st;
	}
	c->n_threads = tp_n_threads(c->pool);
	if (hp->n_expert && !(c->moe = cpu_moe_create(hp))) {
		cpu_destroy(c);
		free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the experts' tables");
	}
	c->samp_scratch = malloc(c->samp_bytes * (size_t)c->n_threads);
	if (!c->samp_scratch) {
		cpu_destroy(c);
		free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for sampler scratch");
	}
	for (uint32_t l = 0; l < hp->n_layer && !hp->no_pre_norms; l++) {
		const struct model_layer *L = &m->layers[l];
		cpuk_dequant_row(L->attn_norm.type, L->attn_norm.data, (int64_t)E,
				 c->norms + (size_t)(2 * l) * E);
		if (!hp->parallel && L->ffn_norm.data) /* command-r, cohere2, nemotron_h: none */
			cpuk_dequant_row(L->ffn_norm.type, L->ffn_norm.data, (int64_t)E,
					 c->norms + (size_t)(2 * l + 1) * E);
	}
	cpuk_dequant_row(m->output_norm.type, m->output_norm.data, (int64_t)E,
			 c->norms + (size_t)(2 * hp->n_layer) * E);
	if (hp->qkv_bias) {
		size_t per = (size_t)(c->q_dim + 2 * c->kv_dim);
		c->biases = malloc((size_t)hp->n_layer * per * sizeof(float));
		if (!c->biases) {
			cpu_destroy(c);
			free(b);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the QKV biases");
		}
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			float *dst = c->biases + (size_t)l * per;
			memcpy(dst, L->bq.data, (size_t)c->q_dim * sizeof(float));
			memcpy(dst + c->q_dim, L->bk.data, (size_t)c->kv_dim * sizeof(float));
			memcpy(dst + c->q_dim + c->kv_dim, L->bv.data,
			       (size_t)c->kv_dim * sizeof(float));
		}
	}

	if (hp->attn_sinks || hp->attn_out_bias) {
		size_t per = (size_t)hp->n_head + E;
		c->oai = calloc((size_t)hp->n_layer * per, sizeof(float));
		if (!c->oai) {
			cpu_destroy(c);
			free(b);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the attention sinks");
		}
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			float *dst = c->oai + (size_t)l * per;
			if (hp->attn_sinks)
				memcpy(dst, L->attn_sinks.data, (size_t)hp->n_head * sizeof(float));
			if (hp->attn_out_bias)
				memcpy(dst + hp->n_head, L->bo.data, (size_t)E * sizeof(float));
		}
	}
	if ((st = load_arch_extras(c, m, err)) != BG_OK ||
	    (st = state_create(c, m, cfg->n_state_slots, err)) != BG_OK) {
		cpu_destroy(c);
		free(b);
		return st;
	}

	b->ops = &cpu_ops;
	b->ctx = c;
	b->name = "cpu";
	char model_name[96];
	cpu_name(model_name, sizeof model_name);
	snprintf(b->device, sizeof b->device, "CPU: %s, %d thread%s, %s", model_name, c->n_threads,
		 c->n_threads == 1 ? "" : "s", cpuk_level_name(c->lvl));
	b->n_vocab = (int32_t)hp->n_vocab;
	b->block_size = cfg->block_size;
	b->n_blocks = c->n_blocks;
	b->block_bytes = (size_t)c->n_kv_slabs * c->kv_parts * slab_floats(c) * sizeof(float);
	b->n_state_slots = c->n_state_slots;
	b->state_bytes = c->state_floats * sizeof(float);
	*out = b;
	return BG_OK;
}
