/* backend_cuda: the CUDA + cuBLAS implementation of struct backend (DESIGN.md §3).
 *
 * Device memory, allocated at creation and then only grown on demand:
 *   weights   one allocation: token embedding, output norm, LM head (unless tied), and per
 *             layer the norms (fp32), Wq|Wk|Wv fused as one [n_q + 2 n_kv, n_embd] matrix
 *             (and its biases bq|bk|bv, fp32, for qwen2), Wo, Wgate|Wup fused as
 *             [2 n_ff, n_embd], Wdown; all of the storage type dt
 *             (F32 for an F32 model, F16 for F16, BF16 for BF16 and Q8_0, dequantized here;
 *             BF16 for the other block types too, dequantized on the device: gpu/dequant.cu).
 *             Resident blocks (gpu_qres_policy, BG_CUDA_QUANT): a matrix whose
 *             tensors are Q8_0, Q4_K or Q6_K (with a BF16 storage type) stays as the file's
 *             blocks, each fused part (Q, K, V; gate, up) with its own type
 *             (gpu_ops.cuh's gpu_qmat): the decode GEMV reads the blocks (gpu/gemv.cu),
 *             the embedding gather dequantizes its rows (gpu_embed_blocks), and a
 *             cuBLAS GEMM (batches > 8, prefill) dequantizes the matrix into qscratch
 *             first, in slices (gpu_gemm_q). A MoE layer's experts likewise
 *             (exps_resident): each of the gate, up and down arrays as the file's blocks
 *             where gpu/moe.cu reads their type (Q8_0, Q4_K, Q6_K, Q5_0, MXFP4), else as
 *             BF16 rows, and the expert kernels read them (gpu_moe_gate_up_q). One loop
 *             owns every matrix kind (enum lmat: attention, dense FFN or shared expert,
 *             experts), so residency depends on a matrix's types alone.
 *   qscratch  BF16 scratch of that dequantization: the largest resident matrix's BF16 bytes,
 *             at most CUDA_QSCRATCH_MAX (256 MiB: Llama-3-8B's resident LM head, 1002 MiB
 *             of BF16, then goes in 4 row slices, its gate|up, 224 MiB, whole; 70B's
 *             gate|up, 896 MiB, in 4). 256 MiB is 5 % of 8B Q4_K_M's resident weights;
 *             a slice's GEMM still has >= 16384 rows at 8192 wide.
 *             A mixture-of-experts layer has instead of Wgate|Wup and Wdown its router
 *             [n_expert, n_embd] (fp32) and each expert's gate|up [2 n_ff_exp, n_embd] and down
 *             [n_embd, n_ff_exp], expert after expert (gpu/moe.cuh runs them).
 *   KV pool   n_blocks blocks, each contiguous: [n_layer][K, V][block_size][n_kv] of dt, so
 *             that swapping or copying a block is one memcpy (deepseek2: K alone, its V
 *             read from the K rows, as the CPU backend's cache).
 *   activations for up to cap_tok tokens per pass; a larger batch runs as several passes
 *             in batch order (a later pass reads the K/V an earlier one wrote).
 *   logits    [n_logits, n_vocab] fp32, kept until the next forward.
 *
 * A decode-only batch (every sequence feeds one token and wants its logits, at most 256
 * sequences) replays a CUDA graph captured once per power-of-two bucket of the batch size
 * (~10 launches per layer become one); BG_CUDA_GRAPHS=0 turns this off. A step still pays
 * a fixed cost per graph node (bench/perf_model.py's NODE_US): the layer's work between
 * the QKV projection and attention is one kernel (gpu/qkv_post.cu), not four.
 *
 * Overlap (BACKEND_CAP_ASYNC; engine.c, "Overlap"): forward(), sample() and kv_copy() only
 * enqueue work on one in-order stream. sample() leaves the drawn tokens on the device, in
 * d_sout, where the next forward's embedding gather reads the tokens that prev_rows name
 * (gpu_embed), and copies the results into pinned memory behind an event that
 * sample_wait() waits for: the host waits for step n's tokens only when it applies them,
 * after it has issued step n + 1. The host staging of each upload (pass metadata, sampling
 * inputs) is rewritten only once the upload that last read it is done: the metadata has
 * two slots used in turn, so that building a pass waits for the upload two passes back
 * (long done), not the last; the sampling inputs are rewritten after sample_wait, which
 * comes after their upload. get_logits() and the swaps wait for the stream. A device
 * error leaves the context usable only for destroy when it is sticky (the CUDA runtime
 * then fails every later call, which becomes BG_ERR_DEVICE).
 */
#include "gpu/gpu_ops.cuh"
#include "gpu/grid_sync.cuh"
#include "gpu/moe.cuh"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/plugin.h"
#include "abi_layout.h" /* generated: build/gpu/abi_layout.h */

extern "C" {
#include "model/arch.h"
}

#define CUDA_DEFAULT_CAP_TOK 2048	 /* tokens per pass (activations) */
#define CUDA_SAMPLE_GROUP    64		 /* rows per sampling launch (bounds the work buffer) */
#define CUDA_PARTIAL_FLOATS  (4u << 20)	 /* split-K attention scratch, 16 MiB */
#define CUDA_CUBLAS_WS	     (32u << 20) /* cuBLAS workspace, fixed so graphs can capture */
#define CUDA_GRAPH_BUCKETS   9		 /* decode graphs for batches of 1, 2, 4, ..., 256 */
#define CUDA_GRAPH_MAX_B     256
#define CUDA_GRAPH_MAX_CTX   32768 /* longest context the graph metadata is sized for */
#define CUDA_QSCRATCH_MAX    ((size_t)256 << 20) /* the resident path's BF16 scratch, at most */

struct cuda_layer {
	float *attn_norm; /* [n_embd], or NULL (hp.no_pre_norms: olmo2) */
	void *wqkv;	  /* [n_q + 2 n_kv, n_embd] */
	void *wo;	  /* [n_embd, n_q] */
	float *ffn_norm;  /* [n_embd], or NULL likewise (and with hp.parallel: cohere) */
	void *wgu;	  /* [2 n_ff, n_embd]; [n_ff, n_embd], up alone, with hp.xielu */
	void *wdown;	  /* [n_embd, n_ff] */
	float *bqkv;	  /* [n_q + 2 n_kv] fp32 Q|K|V biases (qwen2), or NULL */
	float *q_norm, *k_norm;	    /* [head_dim] fp32 each (qwen3, gemma3), [n_q] and [n_kv]
				     * (hp.qk_norm_full: olmo2; hp.qk_norm_heads: Command R+'s
				     * row per head), or NULL */
	float *attn_post, *ffn_post; /* [n_embd] fp32 each (gemma post-norms), or NULL */
	bool swa;		     /* attends through the sliding window hp.n_swa */
	bool no_rope;		     /* Q and K not rotated (smollm3's every 4th layer) */
	/* lfm2's short-conv layer (model.h's conv_l): wqkv holds in_proj ([3 n_embd, n_embd]:
	 * n_q = n_kv = n_embd), wo out_proj; its slab in a KV block is one part, each position's
	 * bx row (n_embd of dt); conv_w the taps [n_embd, conv_l] fp32 */
	bool conv;
	float *conv_w;
	/* qwen35's delta-net layer (model.h's gdn_*): wqkv holds [attn_qkv | attn_gate |
	 * ssm_beta | ssm_alpha] (qkv_rows CD + VD + 2 nv; never resident), wo ssm_out (n_q =
	 * o_in = VD, no K/V slab); conv_w its taps [CD, conv] and gdn_vec [2 nv + d] ssm_dt.bias,
	 * ssm_a, ssm_norm, fp32. qwen35's attention layers: wqkv's Q part is [per head q | gate]
	 * (qkv_rows 2 n_q + 2 n_kv) */
	bool gdn;
	float *gdn_vec;
	/* granitehybrid's Mamba2 layer (model.h's ssm_*): wqkv holds ssm_in ([2 D + 2 G N + H,
	 * n_embd]: qkv_rows), wo ssm_out (o_in D); ssm_w the small fp32 weights (gpu_ssm_args'
	 * w); no K/V rows */
	bool ssm;
	float *ssm_w;
	/* falcon-h1 (hp.ssm_parallel): every layer attends AND runs a Mamba2 block of the same
	 * normed input: wqkv holds [Q | K | V | ssm_in] (qkv_rows n_q + 2 n_kv + ssm_in_rows;
	 * dense), wsout its ssm_out [n_embd, D] (dense), ssm_w its small weights (an absent
	 * conv bias 0; ssm_nonorm: no ssm_norm) */
	void *wsout;
	bool ssm_nonorm;
	/* nemotron_h (model_layer's ffn_only, no_ffn): an FFN alone (no wqkv, wo or K/V slab;
	 * ffn_norm is attn_norm), or a Mamba2 / attention block alone (no wgu, wdown) */
	bool ffn_only, no_ffn;
	float xielu[4];		     /* apertus: model_layer.xielu (hp.xielu) */
	/* the layer's geometry (gemma4's windowed layers have their own; model.h): head
	 * size, K/V heads, Q and K/V row widths (wqkv is [n_q + 2 n_kv, n_embd]), where its
	 * K/V rows start in a KV block (elements), and its output scale (hp.out_scale) */
	int hd, n_kvh, n_q, n_kv;
	int n_qh; /* query heads (step35's windowed layers have their own: model_n_head) */
	int64_t kv_off;
	float out_scale;
	/* the rows of wqkv and the input width of wo (n_q + 2 n_kv and n_q, or deepseek2's) */
	int qkv_rows, o_in;
	/* deepseek2 (hp.mla; model.h), else NULL: wqkv holds wq_a (wq without q_lora) then
	 * wkv_a, wo is [n_embd, n_head mla_v_head]; wq_b [n_head (nope + rope_dim), n_lora_q]
	 * (NULL without q_lora), wk_b [n_head][n_lora_kv, nope] and wv_b [n_head][mla_v_head,
	 * n_lora_kv] (dense: the batched GEMMs read them), and the q_a / kv_a norms (fp32) */
	void *wq_b, *wk_b, *wv_b;
	float *q_a_norm, *kv_a_norm;
	/* mixture of experts (hp.n_expert > 0; wgu and wdown are then NULL): */
	float *router;	 /* [n_expert, n_embd] fp32 */
	void *gu_exps;	 /* [n_expert][2 n_ff_exp, n_embd]: each expert's gate rows, up rows
			  * (nemotron_h_moe: [n_expert][n_ff_exp, n_embd], the up rows alone) */
	void *down_exps; /* [n_expert][n_embd, n_ff_exp] */
	/* gpt-oss (fp32 each, NULL for other models): */
	float *sinks;	   /* [n_head] attention sinks (hp.attn_sinks) */
	float *bo;	   /* [n_embd] the attention output's bias (hp.attn_out_bias) */
	float *router_b;   /* [n_expert] the router's bias (hp.moe_bias), then per expert: */
	float *gate_exps_b; /* [n_expert][n_ff_exp] */
	float *up_exps_b;   /* [n_expert][n_ff_exp] */
	float *down_exps_b; /* [n_expert][n_embd] */
	/* glm4moe: moe false on the leading dense layers (wgu, wdown then hold their FFN);
	 * on the MoE layers wgu / wdown hold the shared expert (FS = n_ff_exp x
	 * n_expert_shared <= n_ff rows: gate rows then up rows, and down) and sel_b the
	 * selection bias exp_probs_b ([n_expert] fp32) */
	bool moe;
	float *sel_b;
	/* the resident path: which of wqkv, wo, wgu, wdown are block-quantized (n_part > 0;
	 * the pointer above is then its first part's), and the experts (q_exps: gu_exps and
	 * down_exps then hold the arrays of q_gu_exps and q_down_exps, gpu/moe.cuh) */
	struct gpu_qmat q_qkv, q_o, q_gu, q_down;
	bool q_exps;
	struct gpu_moe_qw q_gu_exps, q_down_exps;
	/* qwen35moe, qwen2moe (hp.shexp_gate): the shared expert's gate row ([n_embd] fp32),
	 * else NULL */
	float *shexp_gate;
	/* gemma4 MoE layers (model.h's gemma4_moe), else NULL (fp32): ffn_gate_inp.scale, the
	 * experts' pre-norm, the dense and expert post-norms, the per-expert down scales (NULL
	 * when the file has none) */
	float *g4_rs, *g4_pre2, *g4_post1, *g4_post2, *g4_ds;
	/* step35 (model.h): the head-wise attention gate [n_qh, n_embd] of dt (dense), else
	 * NULL; the SwiGLU clamps (0: none) of the routed experts and of the shared expert or
	 * dense FFN */
	void *wgate;
	float clamp_exp, clamp_shexp;
};

/* Pinned host memory that an upload reads when the stream reaches it, and the event
 * recorded after that upload. */
struct cuda_staging {
	int32_t *h;
	cudaEvent_t ev;
	bool pending; /* ev was recorded after an upload from h */
};

/* Where one sampling group (<= CUDA_SAMPLE_GROUP rows) puts its inputs: its share of
 * h_sin/d_sin (rows, then history entries) at sin_off and of h_con/d_con (constrain rows,
 * masks, bias ids, biases) at con_off. Every part is a multiple of 256 bytes, so that
 * every part and the next group's share start aligned. Filled once per call (group_layout). */
struct cuda_group_layout {
	size_t sin_off, sin_rows, sin_bytes; /* rows [sin_rows bytes], then history entries */
	size_t con_off, con_rows, con_mask, con_ids, con_bytes; /* part sizes; 0 if unconstrained */
	size_t n_bias;
};

struct cuda_ctx {
	int device;
	int n_sm;
	size_t gemv_xs;	 /* the prologue's shared memory gpu_gemv_init opted in to */
	/* the fused path's GEMVs and the GQA decode attention as programmatic dependent
	 * launches (gpu/pdl.cuh): compute capability >= 9.0 and BG_CUDA_PDL not 0 */
	bool pdl;
	/* the fused path's consecutive GEMVs as one cooperative kernel (gpu_gemv_chain): the
	 * device supports cooperative launches and BG_CUDA_CHAIN is not 0; bar: its
	 * grid barrier's GPU_GRID_BAR_WORDS words (zeroed at create) */
	bool chain;
	unsigned *bar;
	int attn_per_sm; /* blocks of the decode attention kernel an SM holds: its splits */
	/* the last sample call: row i's result lies at d_sout[last_at[i]] (device order, see
	 * sample_group), for the next forward's prev_rows */
	int32_t *last_at; /* [cap_last] */
	int32_t n_last, cap_last;
	struct cuda_group_layout *glay; /* [groups of cap_last rows]: the last call's layouts */
	cudaStream_t stream;
	cublasHandle_t cublas;
	void *cublas_ws;

	enum gpu_dtype dt;
	struct model_hparams hp;
	uint32_t kv_window; /* model_kv_window: block table entries before it may be -1 */
	int n_q, n_kv, ld_qkv; /* the largest layer's Q and K/V rows (gemma4: over both kinds) */
	/* deepseek2 (hp.mla): the row widths of run_pass's MLA buffers (see mla_qkv) */
	int mla_qr, mla_xw;
	int attn_hd, attn_kvh; /* the largest head size and K/V head count (scratch sizes) */
	int attn_qh;	       /* the most query heads a layer has (step35: over both kinds) */
	/* step35: some layer has the head-wise attention gate or a SwiGLU clamp (the fused
	 * path has neither: pass_fused) */
	bool step35_ops;

	void *weights;
	size_t weight_bytes;
	/* RoPE: the cos/sin digit tables (gpu_ops.cuh, GPU_ROPE_TABLE_FLOATS(rope_dim / 2)
	 * floats each) of the global layers, then of the windowed ones (core/model/arch.h),
	 * and the cos/sin scale of each */
	float *d_rope;
	size_t rope_nt; /* floats from the global table to the windowed one */
	float mscale[2];
	void *tok_embd; /* [n_vocab, n_embd] */
	float *output_norm;
	void *output; /* [n_vocab, n_embd] (== tok_embd when tied) */
	struct cuda_layer *layers;
	/* the resident path (gpu_qres_policy): tok_embd and output block-quantized when
	 * n_part > 0, and the BF16 scratch of gpu_gemm_q */
	bool qres;
	struct gpu_qmat q_embd, q_out;
	void *qscratch;
	size_t qscratch_bytes;

	void *kv;
	size_t kv_bytes;
	/* recurrent state (model_state_floats, backend.h's state slots), fp32: n_state_slots
	 * slots of state_floats values, slot-major, layer l's at state_off[l] in a slot
	 * (state_at); state_tmp: state_copy's staging for permutations */
	float *state;
	uint64_t *state_off; /* host, [n_layer + 1] */
	size_t state_floats;
	int32_t n_state_slots;
	void *state_tmp;
	size_t state_tmp_cap;
	int32_t n_blocks, block_size;
	size_t block_bytes;
	int64_t block_elems;

	int cap_tok;
	float *x, *qkv, *tmp, *gu, *partial;
	/* [GPU_GEMV_MAX_TOK, n_embd] the second residual buffer of a fused pass (pass_fused):
	 * its GEMV prologues write the summed residual into the buffer they do not read */
	float *x2;
	/* [max(cap_tok, CUDA_GRAPH_MAX_B) * n_head_kv] gpu_attn_args.merge_counters: zero,
	 * and left zero by every attention call */
	int *attn_cnt;
	void *xn, *attn, *act;
	/* mixture of experts (gpu/moe.cuh), for cap_tok tokens: the router's fp32 input
	 * [cap_tok, n_embd] and logits [cap_tok, n_expert], the routing, each pair's
	 * activations [cap_tok * k, n_ff_exp] (dt, in the plan's sorted order) and down
	 * outputs [cap_tok * k, n_embd] (by pair id) */
	float *moe_xf, *moe_logits, *moe_y;
	/* [cap_tok, n_embd] fp32, hp.parallel (command-r, cohere2): the FFN's output, added to
	 * the residual before the attention's (tmp) is */
	float *par;
	float *ssm_xbc, *ssm_y; /* granitehybrid: gpu_ssm_args' scratch */
	struct gpu_moe_plan moe_plan;
	void *moe_act;
	/* deepseek2 (hp.mla), for cap_tok tokens: the attention's queries [cap_tok, n_q]
	 * fp32, the raw queries [cap_tok, mla_qr] fp32 (q_lora: wq_b's output), and the
	 * GEMM inputs [cap_tok, mla_xw] of dt (the normed q_a, then q_nope, then wv_b's
	 * output); NULL otherwise */
	float *mla_q, *mla_f;
	/* qwen35 (gpu_gdn, gpu_q_gate_split): fp32 scratch [cap_tok][gscr_c], [cap_tok][gscr_o] */
	float *gcbuf, *gobuf;
	int gscr_c, gscr_o;
	void *mla_x;
	size_t act_bytes;

	/* metadata of one pass (int32s): built in meta[meta_slot].h, the two slots in turn,
	 * uploaded to d_meta (one is enough: the next upload runs after this pass's kernels) */
	int32_t *d_meta;
	struct cuda_staging meta[2];
	int meta_slot;
	size_t meta_cap;

	float *logits;
	void *xl; /* [logits_cap, n_embd] normalized rows for the LM head */
	int32_t logits_cap, n_logits;

	float *sample_work;
	void *d_sin, *h_sin; /* sampling rows + history entries of a call, group after group */
	size_t sin_cap;
	/* [sout_cap] the last sample call's results in device order: the drawn tokens stay
	 * here for the next forward (a decode graph holds this pointer) */
	struct sampler_result *d_sout, *h_sout;
	int32_t sout_cap;
	cudaEvent_t sout_ev;		/* h_sout holds the last call's results */
	struct sampler_result *out;	/* [n_last] where sample_wait puts them; NULL: done */
	int32_t *hist_cnt; /* host [n_vocab], all zero between calls */
	int32_t *hist_ids; /* host [n_vocab] */
	/* constrained rows (gpu/mask.cu): per sampling group their gpu_constrain_rows, masks
	 * and biases, uploaded together (group after group), and the constrained copies of
	 * their logits rows ([rows, n_vocab] fp32) that the sampler reads instead of the
	 * forward's (reused by the next group: stream order) */
	void *d_con, *h_con;
	size_t con_cap;
	float *clogits;
	size_t clogits_cap; /* bytes */

	/* CUDA graphs of decode-only passes (every sequence feeds one token and wants its
	 * logits), one per power-of-two bucket of the batch size; a batch is padded to its
	 * bucket with rows that write the scratch KV block. The metadata of a graph pass
	 * lives in d_gmeta at a layout fixed per bucket: tokens, pos, slots, tok_bt, rows,
	 * list [Bp each], then the packed block tables; built in the two gmeta slots in turn.
	 * Disabled by BG_CUDA_GRAPHS=0. */
	bool graphs_on;
	int graph_ctx; /* the context the graph metadata and split counts are sized for */
	cudaGraphExec_t graph[CUDA_GRAPH_BUCKETS];
	int32_t *d_gmeta;
	struct cuda_staging gmeta[2];
	int gmeta_slot;
	size_t gmeta_cap; /* int32s */
	int32_t scratch_block; /* == n_blocks: one block past the engine's pool */

	/* $BG_CUDA_GRAPH_LOG (a file, or "-" for stderr): each decode graph's nodes, counted
	 * by kind when it is captured, and those of every other pass, which then runs as a
	 * graph captured for it (the same work in the same order); NULL: no census */
	FILE *graph_log;
	int pass_gemms; /* cuBLAS calls of run_pass's last call */
};

static void drop_graphs(struct cuda_ctx *c)
{
	for (int i = 0; i < CUDA_GRAPH_BUCKETS; i++)
		if (c->graph[i]) {
			cudaGraphExecDestroy(c->graph[i]);
			c->graph[i] = NULL;
		}
}

/* ---- small helpers ---- */

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* Layer l's recurrent state (model_state_floats values, device memory) in slot `slot`. */
static inline float *state_at(struct cuda_ctx *c, int32_t slot, uint32_t layer)
{
	return c->state + (size_t)slot * c->state_floats + c->state_off[layer];
}

static enum bg_status dev_alloc(void **p, size_t bytes, const char *what, struct bg_err *err)
{
	*p = NULL;
	if (bytes == 0)
		bytes = 256;
	cudaError_t e = cudaMalloc(p, bytes);
	if (e != cudaSuccess) {
		cudaGetLastError();
		*p = NULL;
		/* one sentence that says what did not fit and how much was free */
		size_t free_b = 0, total_b = 0;
		if (e != cudaErrorMemoryAllocation ||
		    cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
			cudaGetLastError();
			return bg_fail(err, BG_ERR_NOMEM,
				       "out of device memory: %.1f MiB needed for %s (%s)",
				       (double)bytes / 1048576.0, what, cudaGetErrorString(e));
		}
		return bg_fail(err, BG_ERR_NOMEM,
			       "out of device memory: %.1f MiB needed for %s, but only %.1f MiB "
			       "of the device's %.1f GiB are free",
			       (double)bytes / 1048576.0, what, (double)free_b / 1048576.0,
			       (double)total_b / 1073741824.0);
	}
	return BG_OK;
}

/* Grows a device buffer to at least need bytes (contents lost). */
static enum bg_status dev_grow(struct cuda_ctx *c, void **p, size_t *cap, size_t need,
			       const char *what, struct bg_err *err)
{
	if (*p && *cap >= need)
		return BG_OK;
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
	cudaFree(*p);
	*p = NULL;
	*cap = 0;
	size_t n = need + need / 2;
	enum bg_status st = dev_alloc(p, n, what, err);
	if (st == BG_OK)
		*cap = n;
	return st;
}

static enum bg_status host_grow(struct cuda_ctx *c, void **p, size_t *cap, size_t need,
				struct bg_err *err)
{
	if (*p && *cap >= need)
		return BG_OK;
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
	cudaFreeHost(*p);
	*p = NULL;
	*cap = 0;
	size_t n = need + need / 2;
	CUDA_CHECK(cudaMallocHost(p, n));
	*cap = n;
	return BG_OK;
}

/* ---- weights ---- */

static enum gpu_dtype pick_dtype(const struct model *m)
{
	/* deepseek2 with q_lora has no wq: its wkv_a; lfm2's conv layer: its in_proj;
	 * granitehybrid's Mamba2 layer: its ssm_in */
	const struct model_layer *l0 = &m->layers[0];
	switch ((m->hp.mla ? l0->wkv_a
		 : l0->conv ? l0->conv_in
		 : l0->gdn  ? l0->gdn_qkv
		 : l0->ssm  ? l0->ssm_in
			    : l0->wq)
		    .type) {
	case GGUF_DTYPE_F32: return GPU_F32;
	case GGUF_DTYPE_F16: return GPU_F16;
	default: /* BF16 and Q8_0: bf16 has fp32's range, so activations cannot overflow */
		return GPU_BF16;
	}
}

struct upload {
	struct cuda_ctx *c;
	const struct model *m;
	void *staging;
	size_t staging_cap;
	uint64_t tensor_id; /* synthetic: which tensor of the model (seeds its values) */
};

enum upload_kind {
	UP_MATRIX, /* storage type dt; synthetic values N(0, 0.02^2) */
	UP_NORM,   /* fp32; synthetic values 1 */
	UP_BIAS,   /* fp32; synthetic values N(0, 0.5^2), like core/model/synth.c's biases */
	UP_ROUTER, /* fp32 (routing is a discontinuous choice: it keeps the file's f32, as
		    * the CPU backend and llama.cpp do); synthetic values N(0, (3 /
		    * sqrt(n_embd))^2), as core/model/synth.c's routers: logits spread ~3 */
};

/* Fills dst (elements of dt, or fp32 for norms and biases) with weight w. */
static enum bg_status upload_weight(struct upload *u, const struct model_weight *w, void *dst,
				    enum upload_kind kind, struct bg_err *err)
{
	struct cuda_ctx *c = u->c;
	enum gpu_dtype dt = kind == UP_MATRIX ? c->dt : GPU_F32;
	uint64_t n = w->ne0 * w->ne1;
	uint64_t id = u->tensor_id++;
	if (!w->data) { /* a lazy synthetic model: made here, from its seed */
		float stddev = kind == UP_MATRIX ? 0.02f
			       : kind == UP_BIAS ? 0.5f
			       : kind == UP_ROUTER ? 3.0f / sqrtf((float)c->hp.n_embd)
						   : 0.0f;
		CUDA_CHECK(gpu_synth_weights(dst, dt, n, u->m->synth_seed, id, stddev, c->stream));
		return BG_OK;
	}
	uint64_t raw = gguf_row_bytes(w->type, w->ne0) * w->ne1;
	if (raw == 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "a weight of type %s has rows of %llu "
			       "elements, which the CUDA backend cannot convert",
			       gguf_dtype_name(w->type), (unsigned long long)w->ne0);
	bool same = (w->type == GGUF_DTYPE_F32 && dt == GPU_F32) ||
		    (w->type == GGUF_DTYPE_F16 && dt == GPU_F16) ||
		    (w->type == GGUF_DTYPE_BF16 && dt == GPU_BF16);
	if (same) {
		CUDA_CHECK(cudaMemcpyAsync(dst, w->data, raw, cudaMemcpyHostToDevice, c->stream));
		return BG_OK;
	}
	if (u->staging_cap < raw) {
		CUDA_CHECK(cudaStreamSynchronize(c->stream));
		cudaFree(u->staging);
		u->staging = NULL;
		u->staging_cap = 0;
		enum bg_status st = dev_alloc(&u->staging, raw, "weight staging", err);
		if (st != BG_OK)
			return st;
		u->staging_cap = raw;
	}
	/* same stream: the copy waits for the previous conversion to finish with staging */
	CUDA_CHECK(cudaMemcpyAsync(u->staging, w->data, raw, cudaMemcpyHostToDevice, c->stream));
	/* the other block types (model/quant.h) are dequantized on the device (gpu/dequant.cu),
	 * bitwise as the CPU's quant_dequant, then rounded once to dt */
	if (w->type != GGUF_DTYPE_F32 && w->type != GGUF_DTYPE_F16 && w->type != GGUF_DTYPE_BF16 &&
	    w->type != GGUF_DTYPE_Q8_0)
		CUDA_CHECK(gpu_dequant_weights(u->staging, (int)w->type, n, dst, dt, c->stream));
	else
		CUDA_CHECK(gpu_convert_weights(u->staging, (int)w->type, n, dst, dt, c->stream));
	return BG_OK;
}

/* Whether part w of a resident matrix keeps its blocks (a type the GEMV reads), else it is
 * stored as BF16 rows (gpu_qmat's type 30: dequantized at load as the dense path does). */
static bool part_blocks(const struct model_weight *w)
{
	return gpu_qtype_resident((int)w->type, (int64_t)w->ne0);
}

/* Whether the fused matrix of parts w[0 .. n) stays block-quantized on the device (the
 * resident path): enabled, a BF16 storage type, file data, rows of one width (a multiple
 * of 32), every part but the last an even number of rows (gpu_gemv's pairs of rows lie in
 * one part), and at least one part of a type the GEMV reads (the others BF16 parts: a
 * 70B Q4_K_M file's Q5_K V rows beside Q4_K Q and K). */
static bool mat_resident(const struct cuda_ctx *c, const struct model_weight *const *w, int n)
{
	if (!c->qres || c->dt != GPU_BF16 || n < 1 || n > GPU_QMAT_PARTS)
		return false;
	bool any = false;
	for (int i = 0; i < n; i++) {
		if (!w[i]->data || w[i]->ne0 != w[0]->ne0 || w[i]->ne0 % 32 != 0 || w[i]->ne1 < 1 ||
		    w[i]->ne1 > (1u << 30) || (i + 1 < n && (w[i]->ne1 & 1)))
			return false;
		any = any || part_blocks(w[i]);
	}
	return any;
}

/* The device bytes of that matrix: its blocks (part `shared` is not stored: gemma4's V
 * rows are K's; -1: none) when resident, else dense (dense_bytes). */
static size_t mat_bytes(const struct cuda_ctx *c, const struct model_weight *const *w, int n,
			int shared, size_t dense_bytes)
{
	if (!mat_resident(c, w, n))
		return dense_bytes;
	size_t b = 0;
	for (int i = 0; i < n; i++)
		if (i != shared)
			b += align_up(part_blocks(w[i])
					  ? gguf_row_bytes(w[i]->type, w[i]->ne0) * w[i]->ne1
					  : gpu_qtype_row_bytes(30, (int64_t)w[i]->ne0) * w[i]->ne1,
				      256);
	return b;
}

/* Uploads a resident matrix's parts as they are (BF16 parts converted: upload_weight),
 * from *p on (advanced), and describes them in *q; part `shared` (>= 1, or -1) points at
 * part shared - 1's. */
static enum bg_status upload_resident(struct upload *u, const struct model_weight *const *w,
				      int n, int shared, char **p, struct gpu_qmat *q,
				      struct bg_err *err)
{
	struct cuda_ctx *c = u->c;
	memset(q, 0, sizeof *q);
	q->n_part = n;
	for (int i = 0; i < n; i++) {
		q->type[i] = (int)w[i]->type;
		q->rows[i] = (int)w[i]->ne1;
		if (i == shared) { /* K's rows again, as K is stored (blocks or BF16) */
			q->p[i] = q->p[i - 1];
			q->type[i] = q->type[i - 1];
			continue;
		}
		size_t raw = gguf_row_bytes(w[i]->type, w[i]->ne0) * w[i]->ne1;
		q->p[i] = *p;
		if (!part_blocks(w[i])) {
			q->type[i] = 30;
			raw = gpu_qtype_row_bytes(30, (int64_t)w[i]->ne0) * w[i]->ne1;
			enum bg_status st = upload_weight(u, w[i], *p, UP_MATRIX, err);
			if (st != BG_OK)
				return st;
			*p += align_up(raw, 256);
			continue;
		}
		CUDA_CHECK(cudaMemcpyAsync(*p, w[i]->data, raw, cudaMemcpyHostToDevice, c->stream));
		*p += align_up(raw, 256);
	}
	/* the BF16 scratch gpu_gemm_q dequantizes into: the largest matrix, capped */
	size_t rows = 0;
	for (int i = 0; i < n; i++)
		rows += (size_t)q->rows[i];
	size_t need = rows * (size_t)w[0]->ne0 * 2;
	if (need > CUDA_QSCRATCH_MAX)
		need = CUDA_QSCRATCH_MAX;
	if (need > c->qscratch_bytes)
		c->qscratch_bytes = need;
	return BG_OK;
}

/* A layer's matrices by kind. load_weights sizes, places and (resident) uploads every one
 * in one loop over these, so that whether a matrix keeps its blocks depends on its types
 * alone, never on which kind it is or where it lies. The router stays fp32 (UP_ROUTER). */
enum lmat {
	LM_QKV,	 /* Q|K|V */
	LM_O,	 /* O */
	LM_GU,	 /* the dense FFN's gate|up (up alone with hp.xielu); glm4moe's shared expert's */
	LM_DOWN, /* the dense FFN's down; glm4moe's shared expert's */
	LM_QB,	 /* deepseek2's wq_b (with q_lora), wk_b, wv_b: dense only (the batched GEMMs) */
	LM_KB,
	LM_VB,
	LM_SO,	  /* falcon-h1's ssm_out: dense only */
	LM_XGU,	  /* the experts' gate and up (gpu/moe.cuh) */
	LM_XDOWN, /* the experts' down */
	LM_N
};

/* The parts of layer ml's matrix of kind `which` < LM_QB (moe: a MoE layer): Q|K|V
 * (*shared = 2 when V is K's rows: gemma4; deepseek2's wq_a or wq, then wkv_a), O,
 * gate|up, down (a MoE layer's: glm4moe's shared expert; none without one); returns their
 * count. */
static int layer_parts(const struct model_hparams *hp, const struct model_layer *ml, int which,
		       bool moe, const struct model_weight **w, int *shared)
{
	*shared = -1;
	if (moe && !hp->gemma4_moe && (which == LM_GU || which == LM_DOWN)) {
		if (!hp->n_expert_shared)
			return 0;
		if (hp->relu2) { /* nemotron_h_moe: up alone */
			w[0] = which == LM_GU ? &ml->up_shexp : &ml->down_shexp;
			return 1;
		}
		w[0] = which == LM_GU ? &ml->gate_shexp : &ml->down_shexp;
		w[1] = &ml->up_shexp;
		return which == LM_GU ? 2 : 1;
	}
	switch (which) {
	case 0:
		if (ml->conv) { /* lfm2: in_proj, B|C|x rows */
			w[0] = &ml->conv_in;
			return 1;
		}
		if (ml->ssm) { /* granitehybrid: ssm_in, z|xBC|dt rows */
			w[0] = &ml->ssm_in;
			return 1;
		}
		if (hp->mla) {
			w[0] = hp->n_lora_q ? &ml->wq_a : &ml->wq;
			w[1] = &ml->wkv_a;
			return 2;
		}
		w[0] = &ml->wq;
		w[1] = &ml->wk;
		w[2] = ml->v_from_k ? &ml->wk : &ml->wv;
		if (ml->v_from_k)
			*shared = 2;
		return 3;
	case 1: w[0] = &ml->wo; return 1;
	case 2:
		if (hp->xielu || hp->relu2) { /* apertus, nemotron_h: up alone */
			w[0] = &ml->w_up;
			return 1;
		}
		w[0] = &ml->w_gate;
		w[1] = &ml->w_up;
		return 2;
	default: w[0] = &ml->w_down; return 1;
	}
}

/* Layer ml's expert arrays: gate, up (LM_XGU) or down (LM_XDOWN); returns their count. */
static int exps_parts(const struct model_layer *ml, int which, const struct model_weight **w)
{
	if (which == LM_XDOWN) {
		w[0] = &ml->down_exps;
		return 1;
	}
	w[0] = &ml->gate_exps;
	w[1] = &ml->up_exps;
	return 2;
}

/* The type an expert array is stored as when its layer's experts are resident: its own
 * where gpu/moe.cu reads it as blocks, else BF16 rows (30: dequantized at load). */
static int exps_type(const struct model_weight *w)
{
	return gpu_moe_qtype_ok((int)w->type, (int64_t)w->ne0) ? (int)w->type : 30;
}

/* Whether MoE layer ml's experts stay block-quantized (the resident path, as
 * mat_resident's matrices): enabled, a BF16 storage type, file data of the hparams'
 * shapes, widths gpu/moe.cu takes, and at least one array of a type it reads as blocks
 * (the others BF16 rows: gate and up Q4_K beside a Q5_K down, say). */
static bool exps_resident(const struct cuda_ctx *c, const struct model_layer *ml)
{
	const struct model_hparams *hp = &c->hp;
	if (!c->qres || c->dt != GPU_BF16)
		return false;
	const struct model_weight *w[3] = {&ml->gate_exps, &ml->up_exps, &ml->down_exps};
	bool any = false;
	for (int i = 0; i < 3; i++) {
		const uint64_t in = i < 2 ? hp->n_embd : hp->n_ff_exp,
			       out = i < 2 ? hp->n_ff_exp : hp->n_embd;
		if (!w[i]->data || w[i]->ne0 != in || w[i]->ne1 != out ||
		    w[i]->ne2 != hp->n_expert || gpu_moe_qrow_bytes(30, (int64_t)in) == 0)
			return false;
		any = any || exps_type(w[i]) != 30;
	}
	return any;
}

/* The device bytes of an expert array stored as exps_type says. */
static size_t exps_array_bytes(const struct model_weight *w)
{
	return align_up(gpu_moe_qrow_bytes(exps_type(w), (int64_t)w->ne0) * w->ne1 * w->ne2, 256);
}

/* Uploads MoE layer ml's expert arrays of kind `which` from *p on (advanced): blocks as
 * they are (one copy an array), BF16 rows expert by expert (upload_weight); *q says where. */
static enum bg_status upload_exps(struct upload *u, const struct model_layer *ml, int which,
				  char **p, struct gpu_moe_qw *q, struct bg_err *err)
{
	const struct model_weight *w[2];
	const int n = exps_parts(ml, which, w);
	memset(q, 0, sizeof *q);
	for (int i = 0; i < n; i++) {
		q->p[i] = *p;
		q->type[i] = exps_type(w[i]);
		if (q->type[i] != 30) { /* back to back on the device, strided on the host
					 * (qwen35moe's ffn_gate_up_exps: model.h) */
			const size_t eb = gguf_row_bytes(w[i]->type, w[i]->ne0) * w[i]->ne1;
			const bool packed = model_expert_stride(w[i]) == eb;
			for (uint32_t e = 0; e < (packed ? 1u : w[i]->ne2); e++)
				CUDA_CHECK(cudaMemcpyAsync(*p + e * eb, model_expert(w[i], e).data,
							   packed ? eb * w[i]->ne2 : eb,
							   cudaMemcpyHostToDevice, u->c->stream));
		} else {
			const size_t eb = gpu_moe_qrow_bytes(30, (int64_t)w[i]->ne0) * w[i]->ne1;
			for (uint32_t e = 0; e < w[i]->ne2; e++) {
				struct model_weight v = model_expert(w[i], e);
				enum bg_status st =
				    upload_weight(u, &v, *p + e * eb, UP_MATRIX, err);
				if (st != BG_OK)
					return st;
			}
		}
		*p += exps_array_bytes(w[i]);
	}
	return BG_OK;
}

/* The dense bytes (storage type, 256-aligned) of layer L's matrices, by kind (enum lmat):
 * Q|K|V and O from the layer's own geometry, the others the bounds given (ffn: gate|up,
 * down, deepseek2's wq_b, wk_b, wv_b, experts' gate|up, experts' down). */
static void lmat_dense(const struct cuda_layer *L, size_t E, size_t es, const size_t ffn[LM_N - 2],
		       size_t out[LM_N])
{
	out[0] = align_up((size_t)L->qkv_rows * E * es, 256);
	out[1] = align_up(E * (size_t)L->o_in * es, 256);
	for (int k = 2; k < LM_N; k++)
		out[k] = ffn[k - 2];
}

/* Layer l's matrix of kind k: its device bytes (dense: bytes as the storage type; 0: the
 * layer has none), and in *res whether it is resident. */
static size_t lmat_bytes(const struct cuda_ctx *c, const struct model *m, uint32_t l, int k,
			 size_t dense, bool *res)
{
	const struct model_hparams *hp = &m->hp;
	const struct model_layer *ml = &m->layers[l];
	/* by the layer's router (step35's dense layers after MoE ones; nemotron_h_moe's
	 * Mamba2 and attention layers have no FFN) */
	const bool moe = hp->n_expert && model_layer_moe(ml);
	*res = false;
	if (k == LM_SO) /* falcon-h1's, dense */
		return hp->ssm_parallel ? dense : 0;
	if (k >= LM_QB && k < LM_XGU) /* deepseek2's, dense */
		return hp->mla ? dense : 0;
	if (k >= LM_XGU) {
		if (!moe)
			return 0;
		if (!(*res = exps_resident(c, ml)))
			return dense;
		const struct model_weight *w[2];
		size_t b = 0;
		for (int i = 0, n = exps_parts(ml, k, w); i < n; i++)
			b += exps_array_bytes(w[i]);
		return b;
	}
	/* qwen35, falcon-h1: four matrices (gpu_qmat holds three), dense */
	if (k == 0 && (ml->gdn || hp->ssm_parallel))
		return dense;
	/* nemotron_h: an FFN layer has no mixer, a mixer layer no FFN */
	if ((ml->ffn_only && (k == LM_QKV || k == LM_O)) ||
	    (ml->no_ffn && (k == LM_GU || k == LM_DOWN)))
		return 0;
	const struct model_weight *w[GPU_QMAT_PARTS];
	int sh, n = layer_parts(hp, ml, k, moe, w, &sh);
	if (n == 0)
		return 0;
	*res = mat_resident(c, w, n);
	return mat_bytes(c, w, n, sh, dense);
}

/* falcon-h1 (hp.ssm_parallel): layer ml's ssm_in into L->wqkv's rows after Q|K|V, ssm_out
 * into L->wsout, the small weights into L->ssm_w in gpu_ssm_args' order (an absent conv
 * bias as zeros, an absent ssm_norm's room left unread: L->ssm_nonorm). (Files only:
 * model.c makes no lazy falcon-h1 model.) */
static enum bg_status upload_falcon_ssm(struct upload *u, const struct model_layer *ml,
					const struct cuda_layer *L, struct bg_err *err)
{
	const size_t E = u->c->hp.n_embd, es = gpu_dtype_size(u->c->dt);
	enum bg_status st = upload_weight(
	    u, &ml->ssm_in, (char *)L->wqkv + (size_t)(L->n_q + 2 * L->n_kv) * E * es, UP_MATRIX,
	    err);
	if (st == BG_OK)
		st = upload_weight(u, &ml->ssm_out, L->wsout, UP_MATRIX, err);
	const struct model_hparams *hp = &u->c->hp;
	const size_t C = (size_t)hp->ssm_d_inner + 2 * (size_t)hp->ssm_n_group * hp->ssm_d_state;
	const struct model_weight *f[6] = {&ml->ssm_conv_w, &ml->ssm_conv_b, &ml->ssm_dt_b,
					   &ml->ssm_a,	    &ml->ssm_d,	     &ml->ssm_norm};
	const size_t fn[6] = {C * hp->ssm_d_conv, C, hp->ssm_n_head, hp->ssm_n_head,
			      hp->ssm_n_head, hp->ssm_d_inner};
	float *dst = L->ssm_w;
	for (int i = 0; st == BG_OK && i < 6; i++) {
		if (f[i]->data) {
			st = upload_weight(u, f[i], dst, UP_NORM, err);
		} else if (i == 1) {
			cudaError_t ce =
			    cudaMemsetAsync(dst, 0, fn[i] * sizeof(float), u->c->stream);
			if (ce != cudaSuccess)
				st = bg_fail(err, BG_ERR_DEVICE, "zeroing a conv bias: %s",
					     cudaGetErrorString(ce));
		}
		dst += fn[i];
	}
	return st;
}

/* deepseek2 (hp.mla): layer ml's wq_a (or wq) and wkv_a into L->wqkv unless resident
 * (res), wq_b, each head's wk_b and wv_b (model_expert's views), and the q_a / kv_a norms. */
static enum bg_status upload_mla(struct upload *u, const struct model_layer *ml,
				 const struct cuda_layer *L, bool res, struct bg_err *err)
{
	const struct model_hparams *hp = &u->c->hp;
	const size_t es = gpu_dtype_size(u->c->dt), E = hp->n_embd;
	const struct model_weight *wq = hp->n_lora_q ? &ml->wq_a : &ml->wq;
	enum bg_status st = BG_OK;
	if (!res) {
		st = upload_weight(u, wq, L->wqkv, UP_MATRIX, err);
		if (st == BG_OK)
			st =
			    upload_weight(u, &ml->wkv_a, (char *)L->wqkv + (size_t)wq->ne1 * E * es,
					  UP_MATRIX, err);
	}
	if (st == BG_OK && hp->n_lora_q)
		st = upload_weight(u, &ml->wq_b, L->wq_b, UP_MATRIX, err);
	for (uint32_t h = 0; st == BG_OK && h < hp->n_head; h++) {
		struct model_weight kb = model_expert(&ml->wk_b, h),
				    vb = model_expert(&ml->wv_b, h);
		st = upload_weight(u, &kb, (char *)L->wk_b + (size_t)h * kb.ne0 * kb.ne1 * es,
				   UP_MATRIX, err);
		if (st == BG_OK)
			st = upload_weight(u, &vb,
					   (char *)L->wv_b + (size_t)h * vb.ne0 * vb.ne1 * es,
					   UP_MATRIX, err);
	}
	if (st == BG_OK && hp->n_lora_q)
		st = upload_weight(u, &ml->q_a_norm, L->q_a_norm, UP_NORM, err);
	if (st == BG_OK)
		st = upload_weight(u, &ml->kv_a_norm, L->kv_a_norm, UP_NORM, err);
	return st;
}

/* The width of the dense FFN's buffers (wgu, wdown; the activations' ffn slots): n_ff, or 0
 * for a mixture of experts without dense layers or a shared expert (glm4moe, deepseek2:
 * both; lfm2moe: leading dense layers alone). */
static size_t dense_ffn_width(const struct model_hparams *hp)
{
	if (hp->n_expert && !hp->n_expert_shared && !hp->n_layer_dense_lead && !hp->gemma4_moe)
		return 0; /* (gemma4: its dense FFN beside the experts) */
	/* granitehybrid: a shared expert of its own width, maybe wider than n_ff */
	return hp->n_expert_shared && model_ff_shexp(hp) > hp->n_ff ? model_ff_shexp(hp)
								     : hp->n_ff;
}

/* granitehybrid: the rows of ssm_in (z, xBC, dt) and the fp32 values of a Mamba2 layer's
 * small weights (gpu_ssm_args' w) */
static int ssm_in_rows(const struct model_hparams *hp)
{
	return (int)(2 * hp->ssm_d_inner + 2 * hp->ssm_n_group * hp->ssm_d_state + hp->ssm_n_head);
}

static size_t ssm_w_floats(const struct model_hparams *hp)
{
	size_t C = (size_t)hp->ssm_d_inner + 2 * (size_t)hp->ssm_n_group * hp->ssm_d_state;
	return C * (hp->ssm_d_conv + 1) + 3 * (size_t)hp->ssm_n_head + hp->ssm_d_inner;
}

static enum bg_status load_weights(struct cuda_ctx *c, const struct model *m, struct bg_err *err)
{
	const struct model_hparams *hp = &m->hp;
	size_t es = gpu_dtype_size(c->dt);
	size_t E = hp->n_embd, V = hp->n_vocab;
	size_t F = dense_ffn_width(hp);
	size_t NX = hp->n_expert, FX = hp->n_ff_exp;
	/* Tied output: a file's output points at the embedding; a lazy synthetic model has
	 * no data pointers, but then its parameter count leaves the output out. */
	/* the Q/K norms' widths: per head, or the whole rows (olmo2) */
	/* (the largest layer's: gemma4's Q/K norms are as wide as each layer's heads) */
	const bool qk_rows = hp->qk_norm_full || hp->qk_norm_heads; /* Command R+: per head */
	size_t qn = qk_rows ? (size_t)c->n_q : model_head_dim_max(hp);
	size_t kn = qk_rows ? (size_t)c->n_kv : model_head_dim_max(hp);
	/* FFN matrices before down: gate|up, or up alone (apertus, nemotron_h: no gate) */
	const uint64_t n_ffm = hp->xielu || hp->relu2 ? 1 : 2;
	uint64_t untied_params = (uint64_t)V * E * 2 + E + m->rope_factors.ne0;
	for (uint32_t l = 0; l < hp->n_layer; l++) { /* as model.c's lazy_model counts */
		const struct model_layer *ml = &m->layers[l];
		uint64_t lhd = model_head_dim(hp, ml->swa);
		uint64_t lq = model_n_head(hp, ml->swa) * lhd;
		uint64_t lkv = model_n_head_kv(hp, ml->swa) * lhd;
		untied_params += (hp->no_pre_norms ? 0 : hp->parallel ? E : 2 * E) +
				 E * (lq + (ml->v_from_k ? 1 : 2) * lkv) + lq * E +
				 (n_ffm + 1) * E * F +
				 (hp->qk_norm ? (qk_rows ? lq + lkv : 2 * lhd) : 0) +
				 (hp->post_norms ? 2 * (uint64_t)E : 0) +
				 (hp->qkv_bias ? lq + 2 * lkv : 0) +
				 (hp->attn_sinks ? (uint64_t)hp->n_head : 0) +
				 (hp->attn_out_bias ? (uint64_t)E : 0) +
				 (hp->moe_bias ? (uint64_t)NX * (1 + 2 * FX + E) : 0) +
				 (uint64_t)NX * E * (1 + 3 * (uint64_t)FX) + (hp->out_scale ? 1 : 0) +
				 (hp->moe_sel_bias && !hp->n_expert_shared ? NX : 0); /* minimax-m2 */
		/* step35: the attention gate */
		untied_params += ml->attn_gate.ne0 * ml->attn_gate.ne1;
		if (hp->n_expert_shared) { /* glm4moe: dense layers, or experts + shared */
			const uint64_t FS = model_ff_shexp(hp);
			untied_params -= !model_layer_moe(ml)
					     ? (uint64_t)NX * E * (1 + 3 * (uint64_t)FX)
					     : (n_ffm + 1) * E * F - NX - 3 * E * FS;
		}
	}
	bool lazy = !m->tok_embd.data;
	bool tied = lazy ? m->n_params < untied_params : m->output.data == m->tok_embd.data;
	size_t sz_embd = align_up(V * E * es, 256);
	size_t sz_norm = align_up(E * 4, 256);
	/* per layer: the FFN and expert matrices' bounds (Q|K|V and O: each layer's geometry,
	 * lmat_dense) */
	size_t sz_gu = align_up(n_ffm * F * E * es, 256);
	size_t sz_down = align_up(E * F * es, 256);
	size_t sz_bias = hp->qkv_bias ? align_up((size_t)(c->n_q + 2 * c->n_kv) * 4, 256) : 0;
	size_t sz_qn = hp->qk_norm ? align_up(qn * 4, 256) : 0;
	size_t sz_qkn = hp->qk_norm ? sz_qn + align_up(kn * 4, 256) : 0;
	size_t sz_pre = hp->no_pre_norms ? 0 : sz_norm; /* attn_norm, ffn_norm each */
	/* cohere: no ffn_norm; nemotron_h: its FFN layers' is attn_norm (arcee's ReLU^2 FFN
	 * has its own ffn_norm) */
	const bool ffn_norm_attn = hp->relu2 && !m->layers[0].ffn_norm.ne0;
	size_t sz_fpre = hp->parallel || ffn_norm_attn ? 0 : sz_pre;
	size_t sz_post = hp->post_norms ? 2 * sz_norm : 0;
	size_t sz_router = align_up(NX * E * 4, 256); /* fp32: UP_ROUTER */
	/* the experts' gate|up: each expert's gate and up rows, or its up rows alone
	 * (nemotron_h_moe: gpu_moe_oai.relu2) */
	const size_t n_xgu = hp->relu2 ? 1 : 2;
	size_t sz_gu_exps = align_up(NX * n_xgu * FX * E * es, 256);
	size_t sz_down_exps = align_up(NX * E * FX * es, 256);
	/* gpt-oss's vectors (fp32): sinks, O bias, router bias, experts' gate, up, down biases */
	size_t sz_oai[6] = {hp->attn_sinks ? align_up((size_t)hp->n_head * 4, 256) : 0,
			    hp->attn_out_bias ? sz_norm : 0,
			    hp->moe_bias ? align_up(NX * 4, 256) : 0,
			    hp->moe_bias ? align_up(NX * FX * 4, 256) : 0,
			    hp->moe_bias ? align_up(NX * FX * 4, 256) : 0,
			    hp->moe_bias ? align_up(NX * E * 4, 256) : 0};
	/* glm4moe, minimax-m2, deepseek2 */
	size_t sz_selb = hp->moe_sel_bias || hp->moe_grouped ? align_up(NX * 4, 256) : 0;
	/* deepseek2: wq_b, wk_b, wv_b (dense) and the q_a / kv_a norms (fp32) */
	const size_t H = hp->n_head, QL = hp->n_lora_q, CL = hp->n_lora_kv;
	const size_t QH = (size_t)hp->mla_nope + hp->rope_dim;
	size_t sz_qb = hp->mla ? align_up(H * QH * QL * es, 256) : 0;
	size_t sz_kb = hp->mla ? align_up(H * CL * hp->mla_nope * es, 256) : 0;
	size_t sz_vb = hp->mla ? align_up(H * hp->mla_v_head * CL * es, 256) : 0;
	/* falcon-h1: ssm_out (dense) */
	size_t sz_so = hp->ssm_parallel ? align_up(E * hp->ssm_d_inner * es, 256) : 0;
	size_t sz_qan = hp->mla ? align_up(QL * 4, 256) : 0,
	       sz_kvn = hp->mla ? align_up(CL * 4, 256) : 0;
	/* lfm2: every layer has room for conv taps (fp32), used by the conv layers */
	size_t sz_conv = hp->conv_l ? align_up(E * hp->conv_l * 4, 256) : 0;
	/* qwen35: every layer has room for the delta net's taps and vectors (fp32) */
	const size_t GVD = (size_t)hp->gdn_nv * hp->gdn_d,
		     GCD = 2 * (size_t)hp->gdn_nk * hp->gdn_d + GVD;
	if (hp->gdn_conv)
		sz_conv = align_up(GCD * hp->gdn_conv * 4, 256);
	size_t sz_gvec = hp->gdn_conv ? align_up((2 * (size_t)hp->gdn_nv + hp->gdn_d) * 4, 256) : 0;
	/* granitehybrid: every layer room for the Mamba2 layers' small weights (fp32) */
	size_t sz_ssm = hp->ssm_d_conv ? align_up(ssm_w_floats(hp) * 4, 256) : 0;
	/* qwen35moe, qwen2moe: the shared expert's gate (fp32) */
	size_t sz_sgate = hp->shexp_gate ? sz_norm : 0;
	/* gemma4 MoE: four vectors of n_embd and the down scales (fp32) */
	size_t sz_g4 = hp->gemma4_moe ? 4 * sz_norm + align_up(NX * 4, 256) : 0;
	/* step35: every layer room for the head-wise attention gate (dense, of dt) when one
	 * has it */
	bool any_gate = false;
	for (uint32_t l = 0; l < hp->n_layer; l++)
		any_gate = any_gate || m->layers[l].attn_gate.ne0;
	size_t sz_agate = any_gate ? align_up((size_t)c->attn_qh * E * es, 256) : 0;
	size_t per_layer = sz_pre + sz_fpre + sz_bias + sz_qkn + sz_post + sz_selb + sz_qan +
			   sz_kvn + sz_conv + sz_gvec + sz_ssm + sz_sgate + sz_agate + sz_g4;
	for (int i = 0; i < 6; i++)
		per_layer += sz_oai[i];
	if (NX)
		per_layer += sz_router;
	/* the token embedding and LM head: resident, or dense (tied: one copy) */
	const struct model_weight *we = &m->tok_embd, *wout = &m->output;
	size_t sz_e = mat_bytes(c, &we, 1, -1, sz_embd);
	size_t sz_out = tied ? 0 : mat_bytes(c, &wout, 1, -1, sz_embd);
	size_t total = sz_e + sz_norm + sz_out + per_layer * hp->n_layer;
	/* the matrices (enum lmat): each layer's own size, as dense bytes or resident */
	const size_t sz_ffn[LM_N - 2] = {sz_gu, sz_down, sz_qb,	     sz_kb,
					 sz_vb, sz_so,	 sz_gu_exps, sz_down_exps};
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		size_t dense[LM_N];
		lmat_dense(&c->layers[l], E, es, sz_ffn, dense);
		for (int k = 0; k < LM_N; k++) {
			bool res;
			total += lmat_bytes(c, m, l, k, dense[k], &res);
		}
	}
	enum bg_status st = dev_alloc(&c->weights, total, "the model weights", err);
	if (st != BG_OK)
		return st;
	c->weight_bytes = total;

	char *p = (char *)c->weights;
	c->tok_embd = p;
	struct upload u = {c, m, NULL, 0, 0};
	if (mat_resident(c, &we, 1))
		st = upload_resident(&u, &we, 1, -1, &p, &c->q_embd, err);
	else
		p += sz_embd;
	c->output_norm = (float *)p;
	p += sz_norm;
	if (tied) {
		c->output = c->tok_embd;
		c->q_out = c->q_embd;
	} else {
		c->output = p;
		if (mat_resident(c, &wout, 1))
			st = upload_resident(&u, &wout, 1, -1, &p, &c->q_out, err);
		else
			p += sz_embd;
	}
	if (st == BG_OK && !c->q_embd.n_part)
		st = upload_weight(&u, &m->tok_embd, c->tok_embd, UP_MATRIX, err);
	if (st == BG_OK)
		st = upload_weight(&u, &m->output_norm, c->output_norm, UP_NORM, err);
	if (st == BG_OK && !tied && !c->q_out.n_part)
		st = upload_weight(&u, &m->output, c->output, UP_MATRIX, err);
	for (uint32_t l = 0; st == BG_OK && l < hp->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		struct cuda_layer *L = &c->layers[l];
		L->moe = NX && model_layer_moe(ml);
		/* every matrix (enum lmat) in kind order: placed, and uploaded here when resident
		 * (blocks as they are); the dense ones are filled below, in the tensor order a
		 * lazy synthetic model's values depend on */
		size_t dense[LM_N];
		lmat_dense(L, E, es, sz_ffn, dense);
		void **lw[LM_N] = {&L->wqkv, &L->wo,   &L->wgu,	  &L->wdown,   &L->wq_b,
				   &L->wk_b, &L->wv_b, &L->wsout, &L->gu_exps, &L->down_exps};
		struct gpu_qmat *lq[LM_QB] = {&L->q_qkv, &L->q_o, &L->q_gu, &L->q_down};
		bool res[LM_N];
		for (int k = 0; st == BG_OK && k < LM_N; k++) {
			const size_t b = lmat_bytes(c, m, l, k, dense[k], &res[k]);
			*lw[k] = b ? p : NULL;
			if (!res[k]) {
				p += b;
			} else if (k >= LM_XGU) {
				st =
				    upload_exps(&u, ml, k, &p,
						k == LM_XGU ? &L->q_gu_exps : &L->q_down_exps, err);
			} else {
				const struct model_weight *w[GPU_QMAT_PARTS];
				int sh, n = layer_parts(hp, ml, k, L->moe, w, &sh);
				st = upload_resident(&u, w, n, sh, &p, lq[k], err);
			}
		}
		if (st != BG_OK)
			break;
		L->q_exps = res[LM_XGU];
		L->attn_norm = sz_pre ? (float *)p : NULL;
		p += sz_pre;
		L->ffn_norm = sz_fpre ? (float *)p : NULL;
		p += sz_fpre;
		if (NX) {
			L->router = (float *)p;
			p += sz_router;
		}
		L->sel_b = sz_selb ? (float *)p : NULL;
		p += sz_selb;
		L->shexp_gate = sz_sgate && L->moe ? (float *)p : NULL;
		p += sz_sgate;
		if (sz_g4 && L->moe) {
			L->g4_rs = (float *)p;
			L->g4_pre2 = (float *)(p + sz_norm);
			L->g4_post1 = (float *)(p + 2 * sz_norm);
			L->g4_post2 = (float *)(p + 3 * sz_norm);
			L->g4_ds = ml->down_exps_s.data ? (float *)(p + 4 * sz_norm) : NULL;
		}
		p += sz_g4;
		L->wgate = ml->attn_gate.ne0 ? (void *)p : NULL;
		p += sz_agate;
		L->clamp_exp = ml->clamp_exp;
		L->clamp_shexp = ml->clamp_shexp;
		L->q_a_norm = sz_qan ? (float *)p : NULL;
		p += sz_qan;
		L->kv_a_norm = sz_kvn ? (float *)p : NULL;
		p += sz_kvn;
		L->bqkv = sz_bias ? (float *)p : NULL;
		p += sz_bias;
		if (sz_qkn) {
			L->q_norm = (float *)p;
			L->k_norm = (float *)(p + sz_qn);
		}
		p += sz_qkn;
		if (sz_post) {
			L->attn_post = (float *)p;
			L->ffn_post = (float *)(p + sz_norm);
		}
		p += sz_post;
		L->conv_w = sz_conv ? (float *)p : NULL;
		p += sz_conv;
		L->gdn_vec = sz_gvec ? (float *)p : NULL;
		p += sz_gvec;
		L->ssm_w = sz_ssm && (L->ssm || hp->ssm_parallel) ? (float *)p : NULL;
		p += sz_ssm;
		float **oai[6] = {&L->sinks,	    &L->bo,	    &L->router_b,
				  &L->gate_exps_b, &L->up_exps_b, &L->down_exps_b};
		for (int i = 0; i < 6; i++) {
			*oai[i] = sz_oai[i] ? (float *)p : NULL;
			p += sz_oai[i];
		}
		L->swa = ml->swa;
		L->no_rope = ml->no_rope;
		memcpy(L->xielu, ml->xielu, sizeof L->xielu);
		char *qkv = (char *)L->wqkv;
		if (L->attn_norm)
			st = upload_weight(&u, &ml->attn_norm, L->attn_norm, UP_NORM, err);
		if (st == BG_OK && L->conv) { /* lfm2: in_proj as the layer's Q|K|V, the taps */
			if (!res[0])
				st = upload_weight(&u, &ml->conv_in, qkv, UP_MATRIX, err);
			if (st == BG_OK)
				st = upload_weight(&u, &ml->conv_w, L->conv_w, UP_NORM, err);
		} else if (st == BG_OK && L->gdn) { /* qwen35: four matrices' rows, the vectors */
			const struct model_weight *gw[4] = {&ml->gdn_qkv, &ml->gdn_z, &ml->gdn_beta,
							    &ml->gdn_alpha};
			size_t row = 0;
			for (int i = 0; i < 4 && st == BG_OK; i++) {
				st = upload_weight(&u, gw[i], qkv + row * E * es, UP_MATRIX, err);
				row += gw[i]->ne1;
			}
			const struct model_weight *gv[4] = {&ml->conv_w, &ml->gdn_dt, &ml->gdn_a,
							    &ml->gdn_norm};
			float *gd[4] = {L->conv_w, L->gdn_vec, L->gdn_vec + hp->gdn_nv,
					L->gdn_vec + 2 * hp->gdn_nv};
			for (int i = 0; i < 4 && st == BG_OK; i++)
				st = upload_weight(&u, gv[i], gd[i], UP_NORM, err);
		} else if (st == BG_OK && L->ssm) { /* granitehybrid: ssm_in as Q|K|V, the rest */
			if (!res[0])
				st = upload_weight(&u, &ml->ssm_in, qkv, UP_MATRIX, err);
			const struct model_weight *f[6] = {&ml->ssm_conv_w, &ml->ssm_conv_b,
							   &ml->ssm_dt_b,   &ml->ssm_a,
							   &ml->ssm_d,	    &ml->ssm_norm};
			float *dst = L->ssm_w; /* f32 each (the loader's), in gpu_ssm_args' order */
			for (int i = 0; st == BG_OK && i < 6; i++) {
				st = upload_weight(&u, f[i], dst, UP_NORM, err);
				dst += f[i]->ne0 * f[i]->ne1;
			}
		} else if (st == BG_OK && hp->mla) /* deepseek2 (model.h): its own matrices */
			st = upload_mla(&u, ml, L, res[0], err);
		else if (st == BG_OK && !res[0] && !L->ffn_only)
			st = upload_weight(&u, &ml->wq, qkv, UP_MATRIX, err);
		/* the rows before K: Q's, or (qwen35) Q's and the gates' */
		const size_t qw = (size_t)(L->qkv_rows - 2 * L->n_kv -
					   (hp->ssm_parallel ? ssm_in_rows(hp) : 0)); /* falcon-h1 */
		if (L->conv || L->gdn || L->ssm || L->ffn_only) {
			/* in_proj uploaded above; nemotron_h's FFN layer: none */
		} else if (st == BG_OK && !res[0] && !hp->mla)
			st = upload_weight(&u, &ml->wk, qkv + qw * E * es, UP_MATRIX, err);
		if (hp->mla || L->conv || L->gdn || L->ssm || L->ffn_only || st != BG_OK ||
		    res[0]) {
			/* uploaded above, or resident */
		} else if (ml->v_from_k) { /* gemma4: V = K's projection, K's rows again */
			cudaError_t ce =
			    cudaMemcpyAsync(qkv + (qw + L->n_kv) * E * es, qkv + qw * E * es,
					    (size_t)L->n_kv * E * es,
					    cudaMemcpyDeviceToDevice, c->stream);
			if (ce != cudaSuccess)
				st = bg_fail(err, BG_ERR_DEVICE, "copying K's rows to V's: %s",
					     cudaGetErrorString(ce));
		} else {
			st = upload_weight(&u, &ml->wv, qkv + (qw + L->n_kv) * E * es, UP_MATRIX,
					   err);
		}
		if (st == BG_OK && !res[1] && !L->ffn_only)
			st = upload_weight(&u, &ml->wo, L->wo, UP_MATRIX, err);
		if (st == BG_OK && hp->ssm_parallel) /* falcon-h1: the Mamba2 block's */
			st = upload_falcon_ssm(&u, ml, L, err);
		if (st == BG_OK && L->ffn_norm)
			st = upload_weight(&u, &ml->ffn_norm, L->ffn_norm, UP_NORM, err);
		if (ffn_norm_attn) /* nemotron_h: the FFN layer's norm (run_pass) */
			L->ffn_norm = L->attn_norm;
		/* (gemma4: the dense FFN of MoE layers too) */
		const bool dffn = !L->moe || hp->gemma4_moe;
		if (st == BG_OK && dffn && n_ffm == 2 && !res[2])
			st = upload_weight(&u, &ml->w_gate, L->wgu, UP_MATRIX, err);
		/* after the gate rows, or alone (apertus, nemotron_h) */
		if (st == BG_OK && dffn && !L->no_ffn && !res[2])
			st = upload_weight(&u, &ml->w_up, (char *)L->wgu + (n_ffm - 1) * F * E * es,
					   UP_MATRIX, err);
		if (st == BG_OK && dffn && !L->no_ffn && !res[3])
			st = upload_weight(&u, &ml->w_down, L->wdown, UP_MATRIX, err);
	}
	/* The biases come after every other tensor, so that a lazy synthetic model's tensor
	 * ids, and so its values, are the same as before biases existed. */
	for (uint32_t l = 0; st == BG_OK && l < hp->n_layer && hp->qkv_bias; l++) {
		const struct model_layer *ml = &m->layers[l];
		float *b = c->layers[l].bqkv;
		const int lq = c->layers[l].n_q, lkv = c->layers[l].n_kv;
		st = upload_weight(&u, &ml->bq, b, UP_BIAS, err);
		if (st == BG_OK)
			st = upload_weight(&u, &ml->bk, b + lq, UP_BIAS, err);
		if (st == BG_OK)
			st = upload_weight(&u, &ml->bv, b + lq + lkv, UP_BIAS, err);
	}
	/* then the Q/K norms and post-norms (gemma, qwen3), likewise after the others */
	for (uint32_t l = 0; st == BG_OK && l < hp->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		const struct cuda_layer *L = &c->layers[l];
		if (st == BG_OK && L->q_norm && !L->conv && !L->gdn) /* lfm2, qwen35: none */
			st = upload_weight(&u, &ml->q_norm, L->q_norm, UP_NORM, err);
		if (st == BG_OK && L->k_norm && !L->conv && !L->gdn)
			st = upload_weight(&u, &ml->k_norm, L->k_norm, UP_NORM, err);
		if (st == BG_OK && L->attn_post)
			st = upload_weight(&u, &ml->attn_post_norm, L->attn_post, UP_NORM, err);
		if (st == BG_OK && L->ffn_post)
			st = upload_weight(&u, &ml->ffn_post_norm, L->ffn_post, UP_NORM, err);
	}
	/* then the experts (MoE): the router, and each expert's gate, up and down (model_expert's
	 * 2-D views; one synthetic tensor each) */
	for (uint32_t l = 0; st == BG_OK && NX && l < hp->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		const struct cuda_layer *L = &c->layers[l];
		if (!L->moe) /* glm4moe's leading dense layers */
			continue;
		st = upload_weight(&u, &ml->ffn_gate_inp, L->router, UP_ROUTER, err);
		for (uint32_t e = 0; st == BG_OK && !L->q_exps && e < NX; e++) {
			char *gu = (char *)L->gu_exps + (size_t)e * n_xgu * FX * E * es;
			struct model_weight g = model_expert(&ml->gate_exps, e),
					    up = model_expert(&ml->up_exps, e),
					    d = model_expert(&ml->down_exps, e);
			if (!hp->relu2) /* nemotron_h_moe: no gate (gpu_moe_oai.relu2) */
				st = upload_weight(&u, &g, gu, UP_MATRIX, err);
			if (st == BG_OK)
				st = upload_weight(&u, &up, gu + (n_xgu - 1) * FX * E * es,
						   UP_MATRIX, err);
			if (st == BG_OK)
				st = upload_weight(&u, &d, (char *)L->down_exps + (size_t)e * E * FX * es,
						   UP_MATRIX, err);
		}
	}
	/* then gpt-oss's vectors, last (the others' tensor ids unchanged): sinks, the O bias, the
	 * router's bias and each expert's gate, up and down biases (model_expert's views) */
	for (uint32_t l = 0; st == BG_OK && l < hp->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		const struct cuda_layer *L = &c->layers[l];
		if (L->sinks)
			st = upload_weight(&u, &ml->attn_sinks, L->sinks, UP_BIAS, err);
		if (st == BG_OK && L->bo)
			st = upload_weight(&u, &ml->bo, L->bo, UP_BIAS, err);
		if (st == BG_OK && L->router_b)
			st = upload_weight(&u, &ml->ffn_gate_inp_b, L->router_b, UP_BIAS, err);
		for (uint32_t e = 0; st == BG_OK && L->router_b && e < NX; e++) {
			struct model_weight g = model_expert(&ml->gate_exps_b, e),
					    up = model_expert(&ml->up_exps_b, e),
					    d = model_expert(&ml->down_exps_b, e);
			st = upload_weight(&u, &g, L->gate_exps_b + (size_t)e * FX, UP_BIAS, err);
			if (st == BG_OK)
				st = upload_weight(&u, &up, L->up_exps_b + (size_t)e * FX, UP_BIAS,
						   err);
			if (st == BG_OK)
				st = upload_weight(&u, &d, L->down_exps_b + (size_t)e * E, UP_BIAS,
						   err);
		}
	}
	/* then glm4moe's (and minimax-m2's, deepseek2's), after all of those: each MoE layer's
	 * selection bias (deepseek2's is optional: none in a file without it) and shared expert
	 * (glm4moe, deepseek2: gate rows, up rows FS apart in wgu; down in wdown) */
	for (uint32_t l = 0; st == BG_OK && (sz_selb || hp->n_expert_shared) && l < hp->n_layer;
	     l++) {
		const struct model_layer *ml = &m->layers[l];
		struct cuda_layer *L = &c->layers[l];
		if (!L->moe)
			continue;
		const size_t FS = hp->n_expert_shared ? model_ff_shexp(hp) : 0;
		if (!sz_selb || (hp->moe_grouped && !ml->exp_probs_b.data)) /* granitehybrid: none */
			L->sel_b = NULL;
		else
			st = upload_weight(&u, &ml->exp_probs_b, L->sel_b, UP_BIAS, err);
		if (st == BG_OK && FS && !L->q_gu.n_part) /* else resident, uploaded above */
			st = upload_weight(&u, hp->relu2 ? &ml->up_shexp : &ml->gate_shexp, L->wgu,
					   UP_MATRIX, err); /* (nemotron_h_moe: up alone) */
		if (st == BG_OK && FS && !L->q_gu.n_part && !hp->relu2)
			st = upload_weight(&u, &ml->up_shexp, (char *)L->wgu + FS * E * es,
					   UP_MATRIX, err);
		if (st == BG_OK && FS && !L->q_down.n_part)
			st = upload_weight(&u, &ml->down_shexp, L->wdown, UP_MATRIX, err);
		if (st == BG_OK && L->shexp_gate) /* qwen35moe, qwen2moe: its gate */
			st = upload_weight(&u, &ml->gate_inp_shexp, L->shexp_gate, UP_ROUTER, err);
	}
	/* then gemma4's MoE vectors */
	for (uint32_t l = 0; st == BG_OK && sz_g4 && l < hp->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		const struct cuda_layer *L = &c->layers[l];
		if (!L->moe)
			continue;
		st = upload_weight(&u, &ml->gate_inp_s, L->g4_rs, UP_NORM, err);
		if (st == BG_OK)
			st = upload_weight(&u, &ml->ffn_pre_norm_2, L->g4_pre2, UP_NORM, err);
		if (st == BG_OK)
			st = upload_weight(&u, &ml->ffn_post_norm_1, L->g4_post1, UP_NORM, err);
		if (st == BG_OK)
			st = upload_weight(&u, &ml->ffn_post_norm_2, L->g4_post2, UP_NORM, err);
		if (st == BG_OK && L->g4_ds)
			st = upload_weight(&u, &ml->down_exps_s, L->g4_ds, UP_NORM, err);
	}
	/* then step35's attention gates, last of all */
	for (uint32_t l = 0; st == BG_OK && l < hp->n_layer; l++)
		if (c->layers[l].wgate)
			st = upload_weight(&u, &m->layers[l].attn_gate, c->layers[l].wgate,
					   UP_MATRIX, err);
	/* staging must outlive the conversions that read it */
	cudaError_t e = cudaStreamSynchronize(c->stream);
	cudaFree(u.staging);
	if (st != BG_OK)
		return st;
	CUDA_CHECK(e);
	return BG_OK;
}

/* The RoPE tables of the global and the windowed layers (arch.h's angles per position,
 * then gpu_rope_table_fill's cos/sin digit tables, in double as the CPU backend computes
 * them), built on the host and uploaded once. */
static enum bg_status load_rope(struct cuda_ctx *c, const struct model *m, struct bg_err *err)
{
	/* gemma4: the windowed layers rotate their own number of pairs; both tables are
	 * GPU_ROPE_TABLE_FLOATS of the larger (c->rope_nt floats apart) */
	size_t half = c->hp.rope_dim / 2, half_swa = model_rope_dim(&c->hp, true) / 2;
	size_t hmax = half > half_swa ? half : half_swa, nt = GPU_ROPE_TABLE_FLOATS(hmax);
	c->rope_nt = nt;
	double *h = (double *)malloc(2 * hmax * sizeof(double) + 1);
	float *f = m->rope_factors.data ? (float *)malloc(half * sizeof(float)) : NULL;
	float *tab = (float *)malloc(2 * nt * sizeof(float) + 1);
	if (!h || !tab || (m->rope_factors.data && !f)) {
		free(h);
		free(f);
		free(tab);
		return bg_fail(err, BG_ERR_NOMEM, "out of host memory");
	}
	if (f) /* copied: the file's f32 data may be misaligned */
		memcpy(f, m->rope_factors.data, half * sizeof(float));
	arch_rope_freqs(&c->hp, f, false, h, &c->mscale[0]);
	arch_rope_freqs(&c->hp, f, true, h + hmax, &c->mscale[1]);
	free(f);
	memset(tab, 0, 2 * nt * sizeof(float));
	gpu_rope_table_fill(h, (int)half, tab);
	gpu_rope_table_fill(h + hmax, (int)half_swa, tab + nt);
	free(h);
	enum bg_status st = dev_alloc((void **)&c->d_rope, 2 * nt * sizeof(float) + 8,
				      "the RoPE table", err);
	if (st == BG_OK) {
		cudaError_t e = cudaMemcpy(c->d_rope, tab, 2 * nt * sizeof(float),
					   cudaMemcpyHostToDevice);
		if (e != cudaSuccess)
			st = bg_fail(err, BG_ERR_DEVICE, "uploading the RoPE table: %s",
				     cudaGetErrorString(e));
	}
	free(tab);
	return st;
}

/* ---- activations ---- */

static enum bg_status alloc_activations(struct cuda_ctx *c, int cap_tok, struct bg_err *err)
{
	size_t es = gpu_dtype_size(c->dt);
	/* glm4moe's dense layers and shared expert use the dense FFN's buffers too */
	size_t E = c->hp.n_embd, N = (size_t)cap_tok;
	size_t F = dense_ffn_width(&c->hp);
	/* mixture of experts: NP (token, expert) pairs of FX-wide experts, 0 without */
	size_t NX = c->hp.n_expert, FX = c->hp.n_ff_exp, NP = N * c->hp.n_expert_used;
	size_t n_tiles = NX ? (size_t)gpu_moe_max_tiles((int)NP, (int)NX) : 0;
	/* deepseek2: mla_q, mla_f, mla_x (0 bytes otherwise) */
	const bool mla = c->hp.mla;
	/* granitehybrid: gpu_ssm's xbc [N, C] and y [N, D] scratch */
	/* command-r, cohere2: the FFN's output; falcon-h1: the Mamba2 branch's */
	const bool par = c->hp.parallel || c->hp.ssm_parallel;
	const size_t SC = c->hp.ssm_d_conv ? (size_t)c->hp.ssm_d_inner +
						 2 * (size_t)c->hp.ssm_n_group * c->hp.ssm_d_state
					   : 0,
		     SD = c->hp.ssm_d_conv ? c->hp.ssm_d_inner : 0;
	enum { N_BUF = 26 };
	size_t sizes[N_BUF] = {4 * N * E,  4 * N * c->ld_qkv, 4 * N * E,  8 * N * F,
			       es * N * E, es * N * c->n_q,   es * N * F, 4 * GPU_GEMV_MAX_TOK * E,
			       4 * N * NX, 4 * NP * E,	      es * NP * FX, 4 * NP,
			       4 * NP,	   4 * NP,	      4 * (NX + 1),  4 * 2 * n_tiles,
			       NX ? (size_t)4 : 0, NX ? 4 * N * E : 0,
			       par ? 4 * N * E : 0,
			       mla ? 4 * N * c->n_q : 0, 4 * N * c->mla_qr, es * N * c->mla_xw,
			       4 * N * c->gscr_c, 4 * N * c->gscr_o, 4 * N * SC, 4 * N * SD};
	size_t total = 0;
	for (int i = 0; i < N_BUF; i++)
		total += align_up(sizes[i], 256);
	void *base;
	enum bg_status st = dev_alloc(&base, total, "the activations", err);
	if (st != BG_OK)
		return st;
	char *p = (char *)base;
	struct gpu_moe_plan *mp = &c->moe_plan;
	void **dst[N_BUF] = {(void **)&c->x,	      (void **)&c->qkv,	      (void **)&c->tmp,
			     (void **)&c->gu,	      &c->xn,		      &c->attn,
			     &c->act,		      (void **)&c->x2,	      (void **)&c->moe_logits,
			     (void **)&c->moe_y,      &c->moe_act,	      (void **)&mp->ids,
			     (void **)&mp->w,	      (void **)&mp->sorted,   (void **)&mp->offs,
			     (void **)&mp->tiles,     (void **)&mp->n_tiles,     (void **)&c->moe_xf,
			     (void **)&c->par,
			     (void **)&c->mla_q,      (void **)&c->mla_f,	      &c->mla_x,
			     (void **)&c->gcbuf,      (void **)&c->gobuf,
			     (void **)&c->ssm_xbc,    (void **)&c->ssm_y};
	for (int i = 0; i < N_BUF; i++) {
		*dst[i] = p;
		p += align_up(sizes[i], 256);
	}
	c->act_bytes = total;
	c->cap_tok = cap_tok;
	return BG_OK;
}

/* ---- forward ---- */

/* One pass over tokens [t0, t1) of the batch (in batch order, possibly cutting a
 * sequence) whose wanted logits land at rows [row0, ...). */
struct pass {
	int32_t n_tok, n_out, max_ctx, n_bt;
	int32_t n_tiles, n_list; /* attention: tiled runs, per-query tokens */
	int32_t n_runs;		 /* recurrent state: each sequence's run of tokens */
};

/* How attention covers a run of `take` consecutive tokens of one sequence. */
static void attn_cover(int32_t take, int32_t *n_tiles, int32_t *n_list)
{
	if (take >= GPU_ATTN_TILE_MIN)
		*n_tiles += (take + GPU_ATTN_TILE - 1) / GPU_ATTN_TILE;
	else
		*n_list += take;
}

/* Where a pass's metadata lies in device memory. */
struct pass_ptrs {
	const int32_t *tokens, *pos, *slots, *tok_bt; /* [n_tok] */
	const int32_t *rows;			      /* [n_out] */
	const int32_t *bt, *tiles, *list;
	const int32_t *runs; /* [3 n_runs]: first token, tokens, state slot */
};

/* The metadata layout of an ordinary pass in c->d_meta. */
static struct pass_ptrs pass_layout(const struct cuda_ctx *c, const struct pass *ps)
{
	struct pass_ptrs q;
	int n = ps->n_tok;
	q.tokens = c->d_meta;
	q.pos = q.tokens + n;
	q.slots = q.pos + n;
	q.tok_bt = q.slots + n;
	q.rows = q.tok_bt + n;
	q.bt = q.rows + ps->n_out;
	q.tiles = q.bt + ps->n_bt;
	q.list = q.tiles + 2 * ps->n_tiles;
	q.runs = q.list + ps->n_list;
	return q;
}

/* gpu_gemm with the context's handle and storage type, counted in pass_gemms; a resident
 * matrix (q->n_part > 0) through gpu_gemm_q and the context's BF16 scratch (its slices'
 * dequantizations and GEMMs: one each unless the matrix is larger than the scratch). */
static cublasStatus_t pass_gemm(struct cuda_ctx *c, const void *W, const struct gpu_qmat *q,
				const void *x, float *y, int n_out, int n_in, int n_tok, int ldy)
{
	if (q->n_part)
		return gpu_gemm_q(c->cublas, q, x, y, n_in, n_tok, ldy, c->qscratch,
				  c->qscratch_bytes, &c->pass_gemms, c->stream);
	c->pass_gemms++;
	return gpu_gemm(c->cublas, W, x, y, n_out, n_in, n_tok, ldy, c->dt);
}

/* The nodes of a captured graph by kind (cudaGraphGetNodes, cudaGraphNodeGetType). On a
 * GPU the kernels include those cuBLAS records for each GEMM call, which this code cannot
 * know beforehand (one kernel, or two when its heuristic picks a split-K GEMM and its
 * reduction); under gpu/emu a cuBLAS call records one kernel node. */
struct cuda_census {
	size_t nodes, kernels, memcpys, memsets, other;
};

static cudaError_t graph_census(cudaGraph_t g, struct cuda_census *k)
{
	memset(k, 0, sizeof *k);
	size_t n = 0;
	cudaError_t e = cudaGraphGetNodes(g, NULL, &n);
	if (e != cudaSuccess || n == 0)
		return e;
	cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(n * sizeof *nodes);
	if (!nodes)
		return cudaErrorMemoryAllocation;
	e = cudaGraphGetNodes(g, nodes, &n);
	for (size_t i = 0; e == cudaSuccess && i < n; i++) {
		enum cudaGraphNodeType t;
		e = cudaGraphNodeGetType(nodes[i], &t);
		k->kernels += t == cudaGraphNodeTypeKernel;
		k->memcpys += t == cudaGraphNodeTypeMemcpy;
		k->memsets += t == cudaGraphNodeTypeMemset;
		k->other += t != cudaGraphNodeTypeKernel && t != cudaGraphNodeTypeMemcpy &&
			    t != cudaGraphNodeTypeMemset;
	}
	k->nodes = n;
	free(nodes);
	return e;
}

/* One census line in graph_log: "WHAT: N nodes (K kernel, C memcpy, S memset, O other),
 * G cuBLAS calls". */
static cudaError_t log_census(struct cuda_ctx *c, cudaGraph_t g, const char *what)
{
	struct cuda_census k;
	cudaError_t e = graph_census(g, &k);
	if (e != cudaSuccess)
		return e;
	fprintf(c->graph_log,
		"batchgen-cuda graph census: %s: %zu nodes (%zu kernel, %zu memcpy, %zu memset, "
		"%zu other), %d cuBLAS calls\n",
		what, k.nodes, k.kernels, k.memcpys, k.memsets, k.other, c->pass_gemms);
	fflush(c->graph_log);
	return cudaSuccess;
}

/* Whether run_pass takes the fused path for a pass of n tokens (issue 17): every projection
 * a gpu_gemv, the norms before QKV, gate|up and the LM head its prologues, SwiGLU the
 * gate|up GEMV's epilogue, qkv_post the QKV GEMV's epilogue when the layer has no head
 * norms; 5 nodes a llama layer instead of 9 (6 with head norms: qwen3), and the final norm
 * and LM head one; with gpu_gemv_chain (cuda_ctx.chain) the GEMVs between two attentions
 * one node: 2 a llama layer (3 with head norms), the LM head in the last layer's chain. Pre-norm layers only: gemma's post-norms (normalizing the branch output before
 * the residual add) keep the unfused path. The shapes must suit gpu_gemv (the prologue's
 * inputs in its dynamic shared memory, c->gemv_xs: with bf16 and n_embd 4096, all 8 tokens
 * on an H100's 200 KiB, up to 5 without the opt-in). Mixture-of-experts models keep the
 * unfused path (their FFN is gpu/moe.cuh's routed experts, which the GEMV does not do);
 * their decode passes are still captured into graphs. */
static bool pass_fused(const struct cuda_ctx *c, int n)
{
	const int E = (int)c->hp.n_embd, F = (int)c->hp.n_ff;
	/* (the O bias, gpt-oss's, is added on the unfused path only: gpt-oss is a mixture of
	 * experts, which never fuses, and a dense model with one would not fuse either) */
	/* (olmo2, no pre-norms and whole-row Q/K norms, has post-norms; refused by name too:
	 * the prologues normalize and qkv_post's epilogue norms per head) */
	/* (apertus: its FFN is not gated, and the gate|up GEMV's epilogue is SwiGLU's: the
	 * unfused path's gpu_xielu. A non-gated epilogue is left for later. gemma4: V norms
	 * and layer output scales, and post-norms too) */
	/* (command-r, cohere2: LayerNorms and the parallel block; the GEMV's prologue is an
	 * RMS norm and the fused layer sequential) */
	/* (granitehybrid's Mamba2 layers: gpu_ssm between the unfused GEMMs; nemotron_h's, and
	 * its non-gated ReLU^2 FFN and layers of one block each; arcee's ReLU^2 FFN likewise:
	 * the unfused path's gpu_relu2) */
	return !c->hp.post_norms && !c->hp.no_pre_norms && !c->hp.qk_norm_full && !c->hp.xielu &&
	       !c->hp.ssm_d_conv && !c->hp.relu2 && !c->hp.v_norm && !c->hp.out_scale &&
	       !c->hp.layer_norm && !c->hp.parallel && !c->hp.mla && c->hp.n_expert == 0 &&
	       !c->hp.attn_out_bias && !c->step35_ops &&
	       gpu_gemv_fits(n, E, true, c->dt, c->gemv_xs) &&
	       gpu_gemv_fits(n, c->n_q, false, c->dt, c->gemv_xs) &&
	       gpu_gemv_fits(n, F, false, c->dt, c->gemv_xs);
}

/* A gpu_gemv without prologue or epilogue: y = in W^T. */
static struct gpu_gemv_args gemv_plain(const void *W, int n_out, int n_in, int n_tok, const void *x,
				       int ldx, float *y, int ldy)
{
	struct gpu_gemv_args g;
	memset(&g, 0, sizeof g);
	g.W = W;
	g.n_out = n_out;
	g.n_in = n_in;
	g.n_tok = n_tok;
	g.x = x;
	g.ldx = ldx;
	g.y = y;
	g.ldy = ldy;
	return g;
}

/* The prologue of a gpu_gemv: its input is norm(res + delta) (rows: NULL or the gathered
 * rows), the sum written to res_out when not NULL. */
static void gemv_prologue(struct gpu_gemv_args *g, const float *res, const float *delta,
			  const float *norm, float eps, const int32_t *rows, float *res_out)
{
	g->x = NULL;
	g->ldx = 0;
	g->res = res;
	g->delta = delta;
	g->norm = norm;
	g->eps = eps;
	g->rows = rows;
	g->res_out = res_out;
}

/* The fused path's residual ping-pong: the buffer a prologue wrote (*xo) is read next,
 * and the one it read is written by the next prologue (gpu_gemv: res_out != res). */
static void res_swap(float **xr, float **xo)
{
	float *t = *xr;
	*xr = *xo;
	*xo = t;
}

/* The fused path's GEMVs and attentions not yet enqueued (run_pass): consecutive ones run
 * as one gpu_gemv_chain (issue 17: at batch 1 and 2 up to 16 llama layers' QKV, attention,
 * O, gate|up and down one graph node; at batch 3-8 a layer's O, gate|up, down and the next
 * layer's QKV). */
struct gemv_pend {
	struct gpu_gemv_args g[GPU_GEMV_CHAIN_MAX];
	int n;
	struct gpu_chain_attn attn[GPU_CHAIN_ATTN_MAX]; /* attn[j] before g[attn[j].at] */
	int n_attn;
};

static void pend_init(struct gemv_pend *p)
{
	p->n = 0;
	p->n_attn = 0;
}

/* Enqueues p's steps (one gpu_gemv_chain; a lone GEMV or attention keeps its PDL) and
 * empties p. run_pass calls it before it enqueues anything else. */
static cudaError_t gemv_flush(struct cuda_ctx *c, struct gemv_pend *p, cudaStream_t s)
{
	const int n = p->n, na = p->n_attn;
	pend_init(p); /* (the steps stay in p's arrays for the call) */
	if (!n && !na)
		return cudaSuccess;
	return gpu_gemv_chain(p->g, n, p->attn, na, c->dt, c->n_sm, c->bar, s);
}

/* A layer's attention on the fused path: after p's steps in their chain when it takes the
 * attention (c->chain, p has room, a shape gpu_chain_attn_bytes takes within the shared
 * memory gpu_gemv_init opted in to), else p flushed and gpu_attention enqueued. */
static cudaError_t attn_add(struct cuda_ctx *c, struct gemv_pend *p, const struct gpu_attn_args *a,
			    int n_split, cudaStream_t s)
{
	const size_t b = c->chain ? gpu_chain_attn_bytes(a, n_split, c->partial, c->dt) : 0;
	if (b > 0 && b <= c->gemv_xs && p->n_attn < GPU_CHAIN_ATTN_MAX) {
		struct gpu_chain_attn *t = &p->attn[p->n_attn++];
		t->a = *a;
		t->n_split = n_split;
		t->partial = c->partial;
		t->at = p->n;
		return cudaSuccess;
	}
	cudaError_t e = gemv_flush(c, p, s);
	if (e != cudaSuccess)
		return e;
	return gpu_attention(a, c->dt, n_split, c->partial, s);
}

/* *g after p's GEMVs: enqueued at once without c->chain, else appended to p (p flushed
 * first when g cannot join: p full, another NT bucket, or resident where p's are dense or
 * the other way) */
static cudaError_t gemv_add(struct cuda_ctx *c, struct gemv_pend *p, const struct gpu_gemv_args *g,
			    cudaStream_t s)
{
	if (!c->chain)
		return gpu_gemv(g, c->dt, c->n_sm, s);
	if (p->n == GPU_GEMV_CHAIN_MAX ||
	    (p->n > 0 && (gpu_gemv_bucket(p->g[0].n_tok) != gpu_gemv_bucket(g->n_tok) ||
			  (p->g[0].q.n_part > 0) != (g->q.n_part > 0)))) {
		cudaError_t e = gemv_flush(c, p, s);
		if (e != cudaSuccess)
			return e;
	}
	p->g[p->n++] = *g;
	return cudaSuccess;
}

/* granite's residual scale: the branch output in c->tmp (n rows of fp32, before the
 * residual add that the next norm or prologue does) times hp.residual_scale, as the CPU
 * backend rounds it; no node when the scale is 1. A node of its own on the fused path
 * too (two a granite layer; ESTIMATE ~6 us each in a decode graph, issue 17's NODE_US):
 * folding it into the GEMV's store is left for later. */
static cudaError_t branch_scale(struct cuda_ctx *c, struct gemv_pend *p, int n, cudaStream_t s)
{
	if (c->hp.residual_scale == 1.0f)
		return cudaSuccess;
	cudaError_t e = gemv_flush(c, p, s); /* the branch's GEMVs first */
	if (e != cudaSuccess)
		return e;
	return gpu_scale(c->tmp, (int64_t)n * c->hp.n_embd, c->hp.residual_scale, s);
}

/* The model's pre-norm (gpu_add_rmsnorm's contract): a LayerNorm with hp.layer_norm
 * (command-r, cohere2), else the RMS norm. */
static cudaError_t add_prenorm(const struct cuda_ctx *c, float *x, const float *delta,
			       const float *w, const int32_t *rows, int n_out, bool write_back,
			       void *out, enum gpu_dtype dt, cudaStream_t s)
{
	const int E = (int)c->hp.n_embd;
	if (c->hp.layer_norm)
		return gpu_add_layernorm(x, delta, w, c->hp.rms_eps, rows, n_out, E, write_back,
					 out, dt, s);
	return gpu_add_rmsnorm(x, delta, w, c->hp.rms_eps, rows, n_out, E, write_back, out, dt,
			       s);
}

/* deepseek2's latent attention (model.h) between the fused projection (c->qkv: wq_a's or
 * wq's outputs, then wkv_a's) and attention, for the n rows of a pass, as the CPU
 * backend's mla_qkv: with q_lora the q_a norm (into mla_x) and wq_b (into mla_f, the raw
 * queries); gpu_mla_prep (the key rows into kv, q_nope into mla_x, rotated q_pe into
 * mla_q); then each head's wk_b of its q_nope into the first n_lora_kv columns of its
 * query in mla_q (one batched GEMM). */
static enum bg_status mla_qkv(struct cuda_ctx *c, const struct cuda_layer *L, int n,
			      const int32_t *d_pos, const int32_t *d_slots, struct gpu_kv_layer kv,
			      struct bg_err *err)
{
	const struct model_hparams *hp = &c->hp;
	const int H = (int)hp->n_head, QL = (int)hp->n_lora_q, C = (int)hp->n_lora_kv;
	const int NP = (int)hp->mla_nope, R = (int)hp->rope_dim;
	const int ql = QL ? QL : H * (NP + R); /* qkv's columns before wkv_a's */
	cudaStream_t s = c->stream;
	struct gpu_mla_prep_args a;
	if (QL) {
		CUDA_CHECK(gpu_rmsnorm_rows(c->qkv, c->ld_qkv, L->q_a_norm, hp->rms_eps, n, QL,
					    c->mla_x, c->dt, s));
		c->pass_gemms++;
		CUBLAS_CHECK(gpu_gemm(c->cublas, L->wq_b, c->mla_x, c->mla_f, c->mla_qr, QL, n,
				      c->mla_qr, c->dt));
	}
	a.qr = QL ? c->mla_f : c->qkv;
	a.ldqr = QL ? c->mla_qr : c->ld_qkv;
	a.kv = c->qkv + ql;
	a.ldkv = c->ld_qkv;
	a.n_tok = n;
	a.n_head = H;
	a.n_lora = C;
	a.nope = NP;
	a.rope_dim = R;
	a.kv_norm = L->kv_a_norm;
	a.eps = hp->rms_eps;
	a.pos = d_pos;
	a.slots = d_slots;
	a.table = c->d_rope;
	a.mscale = c->mscale[0];
	a.neox = hp->rope_neox;
	a.kv_out = kv;
	a.qn = c->mla_x;
	a.q = c->mla_q;
	a.ldq = c->n_q;
	CUDA_CHECK(gpu_mla_prep(&a, c->dt, s));
	c->pass_gemms++;
	CUBLAS_CHECK(gpu_gemm_heads(c->cublas, L->wk_b, c->mla_x, H * NP, NP, c->mla_q, GPU_F32,
				    c->n_q, L->hd, C, NP, n, H, c->dt));
	return BG_OK;
}

/* Enqueues the whole model for one pass. Makes no synchronous call and allocates
 * nothing, so that it can be captured into a CUDA graph. */
static enum bg_status run_pass(struct cuda_ctx *c, const struct pass *ps,
			       const struct pass_ptrs *pp, int n_split, int32_t row0,
			       struct bg_err *err)
{
	const struct model_hparams *hp = &c->hp;
	int n = ps->n_tok;
	const int32_t *d_tokens = pp->tokens, *d_pos = pp->pos, *d_slots = pp->slots;
	const int32_t *d_tok_bt = pp->tok_bt, *d_rows = pp->rows, *d_bt = pp->bt;
	const int32_t *d_tiles = pp->tiles, *d_list = pp->list;
	int E = (int)hp->n_embd, F = (int)hp->n_ff;
	cudaStream_t s = c->stream;

	c->pass_gemms = 0;
	if (c->q_embd.n_part) /* resident: each row's blocks dequantized in fp32 */
		CUDA_CHECK(gpu_embed_blocks(c->q_embd.p[0], c->q_embd.type[0], d_tokens, c->d_sout,
					    n, (int)hp->n_vocab, E, c->x, s));
	else
		CUDA_CHECK(gpu_embed(c->tok_embd, c->dt, d_tokens, c->d_sout, n, (int)hp->n_vocab,
				     E, c->x, s));
	if (hp->embd_scale != 1.0f) /* gemma */
		CUDA_CHECK(gpu_scale(c->x, (int64_t)n * E, hp->embd_scale, s));
	/* fused: the residual ping-pongs between xr (read) and xo (written by the prologue of
	 * the next normed GEMV; gpu_gemv's contract) */
	const bool fused = pass_fused(c, n);
	/* the fused path (batch <= 8): every kernel-to-kernel edge of a layer a programmatic
	 * one (gpu/pdl.cuh; the embedding, first after a copy, stays plain) */
	const bool pdl = fused && c->pdl;
	float *xr = c->x, *xo = c->x2;
	/* the fused path's GEMVs not enqueued yet: flushed before anything else is */
	struct gemv_pend pend;
	pend_init(&pend);
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct cuda_layer *L = &c->layers[l];
		if (L->ffn_only) /* nemotron_h: the FFN alone (ffn_norm is attn_norm) */
			goto ffn;
		struct gpu_kv_layer kv; /* the layer's K/V rows in each block (create_ctx) */
		kv.base = (char *)c->kv + (size_t)L->kv_off * gpu_dtype_size(c->dt);
		kv.block_stride = c->block_elems;
		/* deepseek2: V is the K row (its first n_lora_kv values count, as in the CPU
		 * backend's mla_out) */
		kv.v_offset = hp->mla ? 0 : (int64_t)c->block_size * L->n_kv;
		kv.block_size = c->block_size;
		kv.kv_dim = L->n_kv;

		/* [bias (qwen2)], [Q/K head norms (qwen3, gemma3)], RoPE and the K/V write: one
		 * kernel, one graph node (issue 17: ~6 us a node on the H200, ESTIMATE: NODE_US),
		 * or without head norms on the fused path the QKV GEMV's epilogue: no node */
		/* (the declarations down to ffn: without initializers, which the goto passes) */
		int rk; /* the windowed layers' RoPE (gemma3) */
		rk = L->swa ? 1 : 0;
		struct gpu_qkv_post_args qp;
		qp.qkv = c->qkv;
		qp.ld = c->ld_qkv;
		qp.n_tok = n;
		qp.n_head = L->n_qh;
		qp.n_head_kv = L->n_kvh;
		qp.head_dim = L->hd;
		qp.bias = L->bqkv;
		/* whole-row Q/K norms (olmo2) are a kernel of their own before qkv_post */
		qp.q_norm = hp->qk_norm_full || hp->qk_norm_heads ? NULL : L->q_norm;
		qp.k_norm = hp->qk_norm_full || hp->qk_norm_heads ? NULL : L->k_norm;
		qp.eps = hp->rms_eps;
		qp.pos = d_pos;
		/* < 2: no rotation (smollm3) */
		qp.rope_dim = L->no_rope ? 0 : (int)model_rope_dim(hp, L->swa);
		qp.table = c->d_rope + rk * c->rope_nt;
		qp.v_norm = hp->v_norm; /* gemma4 */
		/* hunyuan: weighted by its q/k norms; llama4: unweighted (q_norm NULL) */
		qp.norm_post_rope = hp->qk_norm_after_rope && !L->no_rope;
		qp.mscale = c->mscale[rk];
		qp.neox = hp->rope_neox;
		qp.slots = d_slots;
		qp.kv = kv;
		/* mistral3; llama4: on the no-RoPE layers only; 0 otherwise */
		qp.temp_scale = hp->attn_temp_nope && !L->no_rope ? 0.0f : hp->attn_temp_scale;
		qp.temp_offset = hp->attn_temp_offset;
		qp.temp_floor = hp->attn_temp_floor;
		bool qkv_epilogue;
		qkv_epilogue = false;
		/* the previous layer's FFN output joins the residual here */
		if (fused) { /* lfm2's conv layers: in_proj, no epilogue */
			struct gpu_gemv_args g =
			    gemv_plain(L->wqkv, L->qkv_rows, E, n, NULL, 0, c->qkv, c->ld_qkv);
			g.q = L->q_qkv;
			gemv_prologue(&g, xr, l ? c->tmp : NULL, L->attn_norm, hp->rms_eps, NULL,
				      l ? xo : NULL);
			g.post = qp;
			/* no head norms; lfm2's conv layers: none */
			qkv_epilogue = g.qkv_post =
			    !L->conv && !hp->attn_out_gate && gpu_gemv_qkv_fits(&g);
			g.pdl = pdl;
			CUDA_CHECK(gemv_add(c, &pend, &g, s));
			/* next: the attention, which may join the chain; anything else flushes */
			if (!qkv_epilogue || L->ssm || L->gdn || hp->mla)
				CUDA_CHECK(gemv_flush(c, &pend, s));
			if (l)
				res_swap(&xr, &xo);
		} else {
			CUDA_CHECK(add_prenorm(c, c->x, l ? c->tmp : NULL, L->attn_norm, NULL, n,
					       l > 0, c->xn, c->dt, s));
			CUBLAS_CHECK(pass_gemm(c, L->wqkv, &L->q_qkv, c->xn, c->qkv, L->qkv_rows, E,
					       n, c->ld_qkv));
		}
		if (L->ssm || hp->ssm_parallel) {
			/* granitehybrid: the Mamba2 block into attn (D wide); falcon-h1: of
			 * ssm_in's rows after Q|K|V, ssm_out's output into par (attn is the
			 * attention's next) */
			struct gpu_ssm_args sa;
			sa.zxbcdt = c->qkv + (L->ssm ? 0 : L->n_q + 2 * L->n_kv);
			sa.ld = c->ld_qkv;
			sa.no_norm = L->ssm_nonorm;
			sa.n_tok = n;
			sa.d_conv = (int)hp->ssm_d_conv;
			sa.D = (int)hp->ssm_d_inner;
			sa.H = (int)hp->ssm_n_head;
			sa.G = (int)hp->ssm_n_group;
			sa.N = (int)hp->ssm_d_state;
			sa.eps = hp->rms_eps;
			sa.w = L->ssm_w;
			sa.runs = pp->runs;
			sa.n_runs = ps->n_runs;
			sa.state = c->state;
			sa.state_floats = c->state_floats;
			sa.layer_off = c->state_off[l];
			sa.xbc = c->ssm_xbc;
			sa.y = c->ssm_y;
			sa.out = c->attn;
			CUDA_CHECK(gpu_ssm(&sa, c->dt, s));
			if (hp->ssm_parallel) {
				c->pass_gemms++;
				CUBLAS_CHECK(gpu_gemm(c->cublas, L->wsout, c->attn, c->par, E,
						      (int)hp->ssm_d_inner, n, E, c->dt));
			}
		}
		if (L->ssm) {
			/* done above */
		} else if (L->conv) { /* lfm2: bx into the cache, the conv, C times it into attn */
			struct gpu_shortconv_args sa;
			sa.bcx = c->qkv;
			sa.ld = c->ld_qkv;
			sa.n_tok = n;
			sa.n_embd = E;
			sa.conv_l = (int)hp->conv_l;
			sa.w = L->conv_w;
			sa.slots = d_slots;
			sa.pos = d_pos;
			sa.tok_bt = d_tok_bt;
			sa.bt = d_bt;
			sa.kv = kv;
			sa.out = c->attn;
			CUDA_CHECK(gpu_shortconv(&sa, c->dt, s));
		} else if (hp->qk_norm_full)
			CUDA_CHECK(gpu_qk_rmsnorm_rows(c->qkv, c->ld_qkv, n, L->n_q, L->n_kv,
						       L->q_norm, L->k_norm, hp->rms_eps, s));
		if (hp->qk_norm_heads && !L->conv && !L->ssm) { /* Command R+: the biases first, then the
						      * head norms */
			if (qp.bias)
				CUDA_CHECK(gpu_bias_add(c->qkv, c->ld_qkv, qp.bias, n,
							L->n_q + 2 * L->n_kv, s));
			qp.bias = NULL;
			CUDA_CHECK(gpu_head_layernorm(c->qkv, c->ld_qkv, n, L->n_qh, L->n_kvh,
						      L->hd, L->q_norm, L->k_norm, hp->rms_eps, s));
		}
		if (L->gdn) { /* qwen35: the delta net, its output into attn */
			struct gpu_gdn_args ga;
			ga.proj = c->qkv;
			ga.ld = c->ld_qkv;
			ga.n_tok = n;
			ga.n_seq = ps->n_runs;
			ga.seq = pp->runs;
			ga.state = c->state + c->state_off[l];
			ga.state_stride = (int64_t)c->state_floats;
			ga.d = (int)hp->gdn_d;
			ga.nk = (int)hp->gdn_nk;
			ga.nv = (int)hp->gdn_nv;
			ga.k_grouped = hp->gdn_k_grouped; /* qwen3next */
			ga.conv = (int)hp->gdn_conv;
			ga.eps = hp->rms_eps;
			ga.conv_w = L->conv_w;
			ga.dt_a = L->gdn_vec;
			ga.norm = L->gdn_vec + 2 * hp->gdn_nv;
			ga.cbuf = c->gcbuf;
			ga.obuf = c->gobuf;
			ga.out = c->attn;
			CUDA_CHECK(gpu_gdn(&ga, c->dt, s));
		} else if (L->conv || L->ssm) {
			/* done above */
		} else if (hp->mla) { /* deepseek2: its queries into mla_q, its key rows into kv */
			enum bg_status st = mla_qkv(c, L, n, d_pos, d_slots, kv, err);
			if (st != BG_OK)
				return st;
		} else if (!qkv_epilogue) {
			if (hp->attn_out_gate) /* qwen35: Q's rows apart from the gates' */
				CUDA_CHECK(gpu_q_gate_split(c->qkv, c->ld_qkv, n, L->n_qh, L->hd,
							    L->n_kv, c->gcbuf, c->gobuf, s));
			CUDA_CHECK(gpu_qkv_post(&qp, c->dt, s));
		}
		struct gpu_attn_args a;
		a.q = hp->mla ? c->mla_q : c->qkv;
		a.ldq = hp->mla ? c->n_q : c->ld_qkv;
		a.kv = kv;
		a.tok_pos = d_pos;
		a.tok_bt = d_tok_bt;
		a.bt = d_bt;
		a.n_tok = n;
		a.n_head = L->n_qh;
		a.n_head_kv = L->n_kvh;
		a.head_dim = L->hd;
		a.scale = hp->attn_scale;
		a.softcap = hp->attn_softcap;
		a.window = L->swa ? (int)hp->n_swa : 0;
		a.chunked = hp->swa_chunked; /* llama4 */
		a.out = c->attn;
		a.max_ctx = ps->max_ctx;
		a.tiles = d_tiles;
		a.n_tiles = ps->n_tiles;
		a.list = d_list;
		a.n_list = ps->n_list;
		a.prefill = GPU_ATTN_PREFILL_AUTO;
		a.merge_counters = c->attn_cnt; /* split decode merges in its own kernel */
		a.pdl = pdl;
		a.sinks = L->sinks; /* gpt-oss; NULL otherwise */
		if (!L->conv && !L->gdn && !L->ssm) {
			if (fused && !hp->attn_out_gate && !L->wgate) /* nothing between it and O */
				CUDA_CHECK(attn_add(c, &pend, &a, n_split, s));
			else
				CUDA_CHECK(gpu_attention(&a, c->dt, n_split, c->partial, s));
		}
		if (hp->attn_out_gate && !L->gdn) /* qwen35: times sigmoid(gate) */
			CUDA_CHECK(gpu_attn_gate(c->attn, c->gobuf, n, L->n_q, c->dt, s));
		if (L->wgate) { /* step35: head h times sigmoid(attn_gate xn)[h] (xn: the
				 * attention's normed input, still there; pass_fused: unfused) */
			c->pass_gemms++;
			CUBLAS_CHECK(gpu_gemm(c->cublas, L->wgate, c->xn, c->gobuf, L->n_qh, E, n,
					      L->n_qh, c->dt));
			CUDA_CHECK(gpu_head_gate(c->attn, c->gobuf, n, L->n_qh, L->hd, c->dt, s));
		}
		if (fused) {
			struct gpu_gemv_args g =
			    gemv_plain(L->wo, E, L->n_q, n, c->attn, L->n_q, c->tmp, E);
			g.q = L->q_o;
			g.pdl = pdl;
			CUDA_CHECK(gemv_add(c, &pend, &g, s));
			CUDA_CHECK(branch_scale(c, &pend, n, s));
			/* the FFN norm in gate|up's prologue, SwiGLU in its epilogue */
			g = gemv_plain(L->wgu, 2 * F, E, n, NULL, 0, NULL, 0);
			g.q = L->q_gu;
			gemv_prologue(&g, xr, c->tmp, L->ffn_norm, hp->rms_eps, NULL, xo);
			g.act = c->act;
			g.glu = true;
			g.gelu = hp->gelu;
			g.pdl = pdl;
			CUDA_CHECK(gemv_add(c, &pend, &g, s));
			res_swap(&xr, &xo);
			g = gemv_plain(L->wdown, E, F, n, c->act, F, c->tmp, E);
			g.q = L->q_down;
			g.pdl = pdl;
			CUDA_CHECK(gemv_add(c, &pend, &g, s));
			CUDA_CHECK(branch_scale(c, &pend, n, s));
			continue; /* pass_fused: no post-norms */
		}
		if (hp->mla) /* deepseek2: wv_b of each head's output into mla_x, then wo */
			CUBLAS_CHECK(gpu_gemm_heads(c->cublas, L->wv_b, c->attn, c->n_q, L->hd,
						    c->mla_x, c->dt, L->o_in, hp->mla_v_head,
						    (int)hp->mla_v_head, (int)hp->n_lora_kv, n,
						    (int)hp->n_head, c->dt));
		c->pass_gemms += hp->mla;
		CUBLAS_CHECK(pass_gemm(c, L->wo, &L->q_o, hp->mla ? c->mla_x : c->attn, c->tmp, E,
				       L->o_in, n, E));
		if (L->bo) /* gpt-oss: the O projection's bias (fp32 rows of tmp) */
			CUDA_CHECK(gpu_bias_add(c->tmp, E, L->bo, n, E, s));
		if (hp->ssm_parallel) /* falcon-h1: attn + ssm (par), then x adds it (ffn:) */
			CUDA_CHECK(gpu_add_rmsnorm(c->tmp, c->par, NULL, hp->rms_eps, NULL, n, E,
						   true, c->par, GPU_F32, s));
		if (L->attn_post) /* gemma: the branch output normalized (fp32, in place) */
			CUDA_CHECK(gpu_add_rmsnorm(c->tmp, NULL, L->attn_post, hp->rms_eps, NULL, n,
						   E, false, c->tmp, GPU_F32, s));
		CUDA_CHECK(branch_scale(c, &pend, n, s));
		if (L->no_ffn) /* nemotron_h: a Mamba2 or attention block alone; tmp joins x next */
			continue;
		if (hp->parallel) { /* command-r, cohere2: the FFN of the same normed input (xn),
				     * x += its output, then the attention's (tmp) with the next
				     * norm: (x + ffn) + attn, as the CPU backend */
			CUBLAS_CHECK(
			    pass_gemm(c, L->wgu, &L->q_gu, c->xn, c->gu, 2 * F, E, n, 2 * F));
			CUDA_CHECK(gpu_swiglu(c->gu, n, F, c->act, c->dt, hp->gelu, s));
			CUBLAS_CHECK(
			    pass_gemm(c, L->wdown, &L->q_down, c->act, c->par, E, F, n, E));
			CUDA_CHECK(gpu_add_rmsnorm(c->x, c->par, NULL, hp->rms_eps, NULL, n, E, true,
						   c->par, GPU_F32, s));
			continue; /* check_model: no experts, post-norms or scales */
		}
	ffn: /* (nemotron_h's FFN layer may be the first: nothing to add then) */
		CUDA_CHECK(gpu_add_rmsnorm(c->x, l || !L->ffn_only ? c->tmp : NULL, L->ffn_norm,
					   hp->rms_eps, NULL, n, E, true, c->xn, c->dt, s));
		if (L->moe && hp->gemma4_moe) {
			/* gemma4 (model.h's gemma4_moe): the dense GELU FFN of xn (ffn_norm) into
			 * tmp, post_ffw_norm_1; the router on rmsnorm(x) * ffn_gate_inp.scale /
			 * sqrt(n_embd) in fp32, the per-expert down scales folded into the routing
			 * weights; the experts on pre_ffw_norm_2(x) (in xn, free again), their sum
			 * into moe_xf (the router's input, read by then), post_ffw_norm_2, added
			 * to tmp (the unused copy into moe_y, combined by then) */
			const int NX = (int)hp->n_expert, K = (int)hp->n_expert_used;
			const int FX = (int)hp->n_ff_exp;
			CUBLAS_CHECK(pass_gemm(c, L->wgu, &L->q_gu, c->xn, c->gu, 2 * F, E, n, 2 * F));
			CUDA_CHECK(gpu_swiglu(c->gu, n, F, c->act, c->dt, true, s));
			CUBLAS_CHECK(pass_gemm(c, L->wdown, &L->q_down, c->act, c->tmp, E, F, n, E));
			CUDA_CHECK(gpu_add_rmsnorm(c->tmp, NULL, L->g4_post1, hp->rms_eps, NULL, n, E,
						   false, c->tmp, GPU_F32, s));
			CUDA_CHECK(gpu_add_rmsnorm(c->x, NULL, L->g4_rs, hp->rms_eps, NULL, n, E, false,
						   c->moe_xf, GPU_F32, s));
			CUDA_CHECK(gpu_scale(c->moe_xf, (int64_t)n * E, 1.0f / sqrtf((float)E), s));
			c->pass_gemms++;
			CUBLAS_CHECK(gpu_gemm(c->cublas, L->router, c->moe_xf, c->moe_logits, NX, E,
					      n, NX, GPU_F32));
			CUDA_CHECK(gpu_moe_route(c->moe_logits, n, NX, K, true, &c->moe_plan, s));
			if (L->g4_ds)
				CUDA_CHECK(gpu_moe_scale_w(&c->moe_plan, L->g4_ds, n, K, s));
			CUDA_CHECK(gpu_add_rmsnorm(c->x, NULL, L->g4_pre2, hp->rms_eps, NULL, n, E,
						   false, c->xn, c->dt, s));
			struct gpu_moe_oai oai;
			memset(&oai, 0, sizeof oai);
			if (L->q_exps) {
				CUDA_CHECK(gpu_moe_gate_up_q(&L->q_gu_exps, FX, E, NX, c->xn, n, K,
							     &c->moe_plan, c->moe_act, true, &oai,
							     GPU_MOE_AUTO, s));
				CUDA_CHECK(gpu_moe_down_q(&L->q_down_exps, E, FX, NX, c->moe_act, n,
							  K, &c->moe_plan, c->moe_y, &oai,
							  GPU_MOE_AUTO, s));
			} else {
				CUDA_CHECK(gpu_moe_gate_up(L->gu_exps, FX, E, NX, c->xn, n, K,
							   &c->moe_plan, c->moe_act, true, &oai,
							   c->dt, GPU_MOE_AUTO, s));
				CUDA_CHECK(gpu_moe_down(L->down_exps, E, FX, NX, c->moe_act, n, K,
							&c->moe_plan, c->moe_y, &oai, c->dt,
							GPU_MOE_AUTO, s));
			}
			CUDA_CHECK(gpu_moe_combine(c->moe_y, c->moe_plan.w, n, K, E, c->moe_xf, s));
			CUDA_CHECK(gpu_add_rmsnorm(c->moe_xf, NULL, L->g4_post2, hp->rms_eps, NULL, n,
						   E, false, c->moe_xf, GPU_F32, s));
			CUDA_CHECK(gpu_add_rmsnorm(c->tmp, c->moe_xf, NULL, hp->rms_eps, NULL, n, E,
						   true, c->moe_y, GPU_F32, s));
		} else if (L->moe) {
			/* routed experts (gpu/moe.cuh): router logits in fp32 (the normed input
			 * again, unrounded, and the fp32 router: 16-bit rounding would move
			 * near-tied choices), the routing and grouping on the device, gate|up with
			 * the activation, down, the weighted sum into tmp */
			const int NX = (int)hp->n_expert, K = (int)hp->n_expert_used;
			const int FX = (int)hp->n_ff_exp;
			CUDA_CHECK(gpu_add_rmsnorm(c->x, NULL, L->ffn_norm, hp->rms_eps, NULL, n, E,
						   false, c->moe_xf, GPU_F32, s));
			c->pass_gemms++;
			CUBLAS_CHECK(gpu_gemm(c->cublas, L->router, c->moe_xf, c->moe_logits, NX, E,
					      n, NX, GPU_F32));
			if (L->router_b) /* gpt-oss: the router's bias, before the choice */
				CUDA_CHECK(gpu_bias_add(c->moe_logits, NX, L->router_b, n, NX, s));
			if (hp->moe_grouped) /* deepseek2: groups, the optional selection bias */
				CUDA_CHECK(gpu_moe_route_grouped(
				    c->moe_logits, L->sel_b, n, NX, K, hp->expert_gating_sigmoid,
				    (int)hp->n_expert_groups, (int)hp->n_group_used,
				    hp->expert_weights_norm, hp->expert_weights_scale, &c->moe_plan,
				    s));
			else if (hp->moe_weight_in) /* llama4: by the logits, sigmoid weights */
				CUDA_CHECK(
				    gpu_moe_route_llama4(c->moe_logits, n, NX, K, &c->moe_plan, s));
			else if (hp->expert_gating_sigmoid) /* glm4moe, minimax-m2 */
				CUDA_CHECK(gpu_moe_route_sigmoid(
				    c->moe_logits, L->sel_b, n, NX, K, hp->expert_weights_norm,
				    hp->expert_weights_scale, &c->moe_plan, s));
			else
				CUDA_CHECK(gpu_moe_route(c->moe_logits, n, NX, K,
							 hp->expert_weights_norm, &c->moe_plan, s));
			/* gpt-oss: the experts' biases, the clamped SwiGLU */
			struct gpu_moe_oai oai;
			oai.b_gate = L->gate_exps_b;
			oai.b_up = L->up_exps_b;
			oai.b_down = L->down_exps_b;
			oai.alpha = hp->swiglu_oai ? hp->swiglu_alpha : 0.0f;
			oai.limit = hp->swiglu_limit;
			oai.relu2 = hp->relu2; /* nemotron_h_moe: relu(up)^2 */
			oai.clamp = L->clamp_exp; /* step35 */
			oai.w_in = hp->moe_weight_in; /* llama4: the weights on the input */
			if (L->q_exps) { /* resident: the experts' blocks (CUDA cores) */
				CUDA_CHECK(gpu_moe_gate_up_q(&L->q_gu_exps, FX, E, NX, c->xn, n, K,
							     &c->moe_plan, c->moe_act, hp->gelu,
							     &oai, GPU_MOE_AUTO, s));
				CUDA_CHECK(gpu_moe_down_q(&L->q_down_exps, E, FX, NX, c->moe_act, n,
							  K, &c->moe_plan, c->moe_y, &oai,
							  GPU_MOE_AUTO, s));
			} else {
				CUDA_CHECK(gpu_moe_gate_up(L->gu_exps, FX, E, NX, c->xn, n, K,
							   &c->moe_plan, c->moe_act, hp->gelu, &oai,
							   c->dt, GPU_MOE_AUTO, s));
				CUDA_CHECK(gpu_moe_down(L->down_exps, E, FX, NX, c->moe_act, n, K,
							&c->moe_plan, c->moe_y, &oai, c->dt,
							GPU_MOE_AUTO, s));
			}
			CUDA_CHECK(gpu_moe_combine(c->moe_y,
						   hp->moe_weight_in ? NULL : c->moe_plan.w, n, K,
						   E, c->tmp, s));
			if (hp->n_expert_shared) { /* glm4moe: + the shared expert's SwiGLU */
				const int FS = (int)model_ff_shexp(hp);
				if (L->shexp_gate) { /* qwen35moe, qwen2moe: its gate's logits, from
						      * the router's fp32 input, into the
						      * router's logits (read by now) */
					c->pass_gemms++;
					CUBLAS_CHECK(gpu_gemm(c->cublas, L->shexp_gate, c->moe_xf,
							      c->moe_logits, 1, E, n, 1, GPU_F32));
				}
				if (hp->relu2) { /* nemotron_h_moe: down(relu(up x)^2) */
					CUBLAS_CHECK(pass_gemm(c, L->wgu, &L->q_gu, c->xn, c->gu, FS,
							       E, n, FS));
					CUDA_CHECK(gpu_relu2(c->gu, n, FS, c->act, c->dt, s));
				} else {
					CUBLAS_CHECK(pass_gemm(c, L->wgu, &L->q_gu, c->xn, c->gu, 2 * FS,
							       E, n, 2 * FS));
					if (L->clamp_shexp > 0.0f) /* step35 */
						CUDA_CHECK(gpu_swiglu_clamp(c->gu, n, FS,
									    L->clamp_shexp, c->act,
									    c->dt, s));
					else
						CUDA_CHECK(gpu_swiglu(c->gu, n, FS, c->act, c->dt,
								      false, s));
				}
				CUBLAS_CHECK(pass_gemm(c, L->wdown, &L->q_down, c->act, c->moe_y, E, FS, n, E));
				if (L->shexp_gate) /* times sigmoid(its gate) */
					CUDA_CHECK(
					    gpu_moe_shexp_gate(c->moe_y, c->moe_logits, n, E, s));
				/* tmp += it (routed + shared, as llama.cpp adds them); moe_xf, the
				 * router's input, is free again and takes the unused copy */
				CUDA_CHECK(gpu_add_rmsnorm(c->tmp, c->moe_y, NULL, hp->rms_eps,
							   NULL, n, E, true, c->moe_xf,
							   GPU_F32, s));
			}
		} else if (hp->xielu || hp->relu2) { /* apertus: down(xielu(up x)); nemotron_h:
						      * down(relu(up x)^2) */
			CUBLAS_CHECK(pass_gemm(c, L->wgu, &L->q_gu, c->xn, c->gu, F, E, n, F));
			if (hp->relu2)
				CUDA_CHECK(gpu_relu2(c->gu, n, F, c->act, c->dt, s));
			else
				CUDA_CHECK(gpu_xielu(c->gu, n, F, L->xielu, c->act, c->dt, s));
			CUBLAS_CHECK(pass_gemm(c, L->wdown, &L->q_down, c->act, c->tmp, E, F, n, E));
		} else {
			CUBLAS_CHECK(pass_gemm(c, L->wgu, &L->q_gu, c->xn, c->gu, 2 * F, E, n, 2 * F));
			if (L->clamp_shexp > 0.0f) /* step35: the dense FFN's clamp */
				CUDA_CHECK(gpu_swiglu_clamp(c->gu, n, F, L->clamp_shexp, c->act,
							    c->dt, s));
			else
				CUDA_CHECK(gpu_swiglu(c->gu, n, F, c->act, c->dt, hp->gelu, s));
			CUBLAS_CHECK(pass_gemm(c, L->wdown, &L->q_down, c->act, c->tmp, E, F, n, E));
		}
		if (L->ffn_post)
			CUDA_CHECK(gpu_add_rmsnorm(c->tmp, NULL, L->ffn_post, hp->rms_eps, NULL, n,
						   E, false, c->tmp, GPU_F32, s));
		CUDA_CHECK(branch_scale(c, &pend, n, s));
		if (hp->out_scale) { /* gemma4: (x + tmp) s, as x s + tmp s (the next add) */
			CUDA_CHECK(gpu_scale(c->x, (int64_t)n * E, L->out_scale, s));
			CUDA_CHECK(gpu_scale(c->tmp, (int64_t)n * E, L->out_scale, s));
		}
	}
	if (ps->n_out == 0) {
		CUDA_CHECK(gemv_flush(c, &pend, s)); /* the last layer's */
		return BG_OK;
	}
	/* only the rows that want logits go through the final norm and the LM head */
	float *logits = c->logits + (size_t)row0 * hp->n_vocab;
	if (fused) { /* n_out <= n: the prologue fits */
		struct gpu_gemv_args g =
		    gemv_plain(c->output, (int)hp->n_vocab, E, ps->n_out, NULL, 0, logits,
			       (int)hp->n_vocab);
		g.q = c->q_out;
		gemv_prologue(&g, xr, c->tmp, c->output_norm, hp->rms_eps, d_rows, NULL);
		g.pdl = pdl;
		CUDA_CHECK(gemv_add(c, &pend, &g, s));
		CUDA_CHECK(gemv_flush(c, &pend, s));
	} else {
		CUDA_CHECK(add_prenorm(c, c->x, c->tmp, c->output_norm, d_rows, ps->n_out, false,
				       c->xl, c->dt, s));
		CUBLAS_CHECK(pass_gemm(c, c->output, &c->q_out, c->xl, logits, (int)hp->n_vocab, E,
				       ps->n_out, (int)hp->n_vocab));
	}
	if (hp->logit_scale != 1.0f) /* granite, command-r, cohere2: as the CPU */
		CUDA_CHECK(gpu_scale(c->logits + (size_t)row0 * hp->n_vocab,
				     (int64_t)ps->n_out * hp->n_vocab, hp->logit_scale, s));
	if (hp->final_softcap > 0.0f) /* gemma2 */
		CUDA_CHECK(gpu_softcap(c->logits + (size_t)row0 * hp->n_vocab,
				       (int64_t)ps->n_out * hp->n_vocab, hp->final_softcap, s));
	return BG_OK;
}

static enum bg_status check_batch(const struct cuda_ctx *c, const struct backend_batch *b,
				  struct bg_err *err)
{
	int64_t n_want = 0;
	for (int32_t i = 0; i < b->n_seqs; i++) {
		const struct backend_seq *sq = &b->seqs[i];
		if (sq->n_tokens < 1 || sq->pos0 < 0 || !sq->tokens || !sq->want_logits)
			return bg_fail(err, BG_ERR_INVALID, "batch sequence %d is malformed", i);
		int64_t end = (int64_t)sq->pos0 + sq->n_tokens;
		int64_t need = (end + c->block_size - 1) / c->block_size;
		if (sq->n_blocks < need || !sq->block_table)
			return bg_fail(err, BG_ERR_INVALID,
				       "batch sequence %d has %d blocks for %lld positions", i,
				       sq->n_blocks, (long long)end);
		for (int64_t j = backend_first_block(sq->pos0, c->kv_window, c->block_size);
		     j < need; j++)
			if (sq->block_table[j] < 0 || sq->block_table[j] >= c->n_blocks)
				return bg_fail(err, BG_ERR_INVALID,
					       "batch sequence %d names KV block %d of %d", i,
					       sq->block_table[j], c->n_blocks);
		for (int32_t t = 0; t < sq->n_tokens; t++) {
			int32_t pr = sq->prev_rows ? sq->prev_rows[t] : -1;
			if (pr >= c->n_last)
				return bg_fail(err, BG_ERR_INVALID,
					       "batch sequence %d names sample row %d of %d", i, pr,
					       c->n_last);
			if (pr < 0 && (sq->tokens[t] < 0 || (uint32_t)sq->tokens[t] >= c->hp.n_vocab))
				return bg_fail(err, BG_ERR_INVALID,
					       "token id %d is outside the vocabulary of %u",
					       sq->tokens[t], c->hp.n_vocab);
			n_want += sq->want_logits[t] != 0;
		}
		if (c->state) {
			if (sq->state_slot < 0 || sq->state_slot >= c->n_state_slots)
				return bg_fail(err, BG_ERR_INVALID,
					       "batch sequence %d names state slot %d of %d", i,
					       sq->state_slot, c->n_state_slots);
			for (int32_t k = 0; k < i; k++)
				if (b->seqs[k].state_slot == sq->state_slot)
					return bg_fail(err, BG_ERR_INVALID,
						       "batch sequences %d and %d share state slot %d",
						       k, i, sq->state_slot);
		}
	}
	if (n_want != b->n_logits)
		return bg_fail(err, BG_ERR_INVALID, "the batch wants %lld logits rows but says %d",
			       (long long)n_want, b->n_logits);
	return BG_OK;
}

/* Token j of sq as gpu_embed reads it: the id, or -1 - k for the token the last sample
 * call drew into d_sout[k] (prev_rows, resolved on the device). check_batch has checked
 * both. */
static int32_t feed_token(const struct cuda_ctx *c, const struct backend_seq *sq, int32_t j)
{
	if (!sq->prev_rows || sq->prev_rows[j] < 0)
		return sq->tokens[j];
	return -1 - c->last_at[sq->prev_rows[j]];
}

/* The staging slot of pair st[2] to build the next upload in (*slot, which then moves on):
 * once the upload last made from it, two uploads back, is done. */
static enum bg_status staging_take(struct cuda_staging *st, int *slot, struct cuda_staging **out,
				   struct bg_err *err)
{
	struct cuda_staging *s = &st[*slot];
	*slot ^= 1;
	*out = s;
	if (s->pending) {
		s->pending = false;
		CUDA_CHECK(cudaEventSynchronize(s->ev));
	}
	return BG_OK;
}

/* After the upload from s was enqueued. */
static enum bg_status staging_sent(struct cuda_ctx *c, struct cuda_staging *s, struct bg_err *err)
{
	CUDA_CHECK(cudaEventRecord(s->ev, c->stream));
	s->pending = true;
	return BG_OK;
}

/* run_pass captured into a graph (nothing runs) and instantiated into *x; with graph_log,
 * the graph's census goes there first, named by what. *x is NULL unless BG_OK. */
static enum bg_status capture_pass(struct cuda_ctx *c, const struct pass *ps,
				   const struct pass_ptrs *pp, int n_split, int32_t row0,
				   const char *what, cudaGraphExec_t *x, struct bg_err *err)
{
	cudaGraph_t g = NULL;
	*x = NULL;
	CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed));
	enum bg_status st = run_pass(c, ps, pp, n_split, row0, err);
	cudaError_t e = cudaStreamEndCapture(c->stream, &g);
	if (st == BG_OK && e == cudaSuccess && c->graph_log)
		e = log_census(c, g, what);
	if (st == BG_OK && e == cudaSuccess)
		e = cudaGraphInstantiate(x, g, 0);
	if (g)
		cudaGraphDestroy(g);
	if (st != BG_OK)
		return st;
	if (e != cudaSuccess)
		*x = NULL;
	CUDA_CHECK(e);
	return BG_OK;
}

/* run_pass captured into a graph whose nodes go to graph_log, then launched: the census of
 * an ordinary pass (BG_CUDA_GRAPH_LOG). */
static enum bg_status census_pass(struct cuda_ctx *c, const struct pass *ps,
				  const struct pass_ptrs *pp, int n_split, int32_t row0,
				  struct bg_err *err)
{
	char what[128];
	snprintf(what, sizeof what,
		 "pass of %d tokens (%d attention tiles, %d listed), %d attention splits",
		 ps->n_tok, ps->n_tiles, ps->n_list, n_split);
	cudaGraphExec_t x;
	enum bg_status st = capture_pass(c, ps, pp, n_split, row0, what, &x, err);
	if (st != BG_OK)
		return st;
	cudaError_t e = cudaGraphLaunch(x, c->stream);
	cudaGraphExecDestroy(x); /* a launched graph runs to its end */
	CUDA_CHECK(e);
	return BG_OK;
}

/* A decode-only batch through the CUDA graph of its bucket (captured on first use). */
static enum bg_status forward_graph(struct cuda_ctx *c, const struct backend_batch *b,
				    struct bg_err *err)
{
	int32_t B = b->n_seqs, Bp = 1, gi = 0;
	while (Bp < B) {
		Bp *= 2;
		gi++;
	}
	int32_t bs = c->block_size;
	struct cuda_staging *sg;
	enum bg_status st = staging_take(c->gmeta, &c->gmeta_slot, &sg, err);
	if (st != BG_OK)
		return st;
	int32_t *tok = sg->h, *pos = tok + Bp, *slots = pos + Bp, *tok_bt = slots + Bp;
	int32_t *rows = tok_bt + Bp, *list = rows + Bp, *bt = list + Bp;
	int32_t n_bt = 0;
	for (int32_t s = 0; s < Bp; s++) {
		rows[s] = s;
		list[s] = s;
		if (s >= B) { /* padding: token 0 at position 0 of the scratch block */
			tok[s] = 0;
			pos[s] = 0;
			slots[s] = c->scratch_block * bs;
			continue;
		}
		const struct backend_seq *sq = &b->seqs[s];
		int32_t p = sq->pos0, nb = p / bs + 1;
		memcpy(bt + n_bt, sq->block_table, (size_t)nb * sizeof *bt);
		tok[s] = feed_token(c, sq, 0);
		pos[s] = p;
		slots[s] = sq->block_table[p / bs] * bs + p % bs;
		tok_bt[s] = n_bt;
		n_bt += nb;
	}
	bt[n_bt] = c->scratch_block;
	for (int32_t s = B; s < Bp; s++)
		tok_bt[s] = n_bt;
	size_t used = 6 * (size_t)Bp + (size_t)n_bt + 1;
	BG_ASSERT(used <= c->gmeta_cap);
	CUDA_CHECK(cudaMemcpyAsync(c->d_gmeta, sg->h, used * 4, cudaMemcpyHostToDevice, c->stream));
	if ((st = staging_sent(c, sg, err)) != BG_OK)
		return st;

	if (!c->graph[gi]) {
		const int32_t *d = c->d_gmeta;
		struct pass ps = {Bp, Bp, 0, 0, 0, Bp, 0}; /* no state here (graph_fits) */
		struct pass_ptrs pp = {d,	   d + Bp,     d + 2 * Bp, d + 3 * Bp,
				       d + 4 * Bp, d + 6 * Bp, NULL,	   d + 5 * Bp, NULL};
		/* The split count is baked into the graph: size it for the longest context
		 * the model allows (each token splits its own context in parts of at least
		 * GPU_ATTN_SPLIT_MIN_KEYS keys, so a short one fills its first splits only;
		 * the others are empty blocks). */
		int n_split = gpu_attention_splits(Bp, c->attn_qh, c->attn_kvh, c->attn_hd, c->dt,
						   c->graph_ctx, c->n_sm, c->attn_per_sm,
						   CUDA_PARTIAL_FLOATS);
		char what[96];
		snprintf(what, sizeof what, "decode graph, batch %d, %d attention splits", Bp,
			 n_split);
		st = capture_pass(c, &ps, &pp, n_split, 0, what, &c->graph[gi], err);
		if (st != BG_OK)
			return st;
	}
	CUDA_CHECK(cudaGraphLaunch(c->graph[gi], c->stream));
	c->n_logits = B;
	return BG_OK;
}

/* True when the batch can go through a decode graph: every sequence feeds one token
 * and wants its logits, and the padded batch fits the graph buffers. */
static bool graph_fits(const struct cuda_ctx *c, const struct backend_batch *b)
{
	/* recurrent state: no decode graphs yet (the graphs' metadata has no state slots) */
	if (!c->graphs_on || c->state || b->n_seqs < 1 || b->n_seqs > CUDA_GRAPH_MAX_B ||
	    b->n_logits != b->n_seqs)
		return false;
	int32_t Bp = 1;
	while (Bp < b->n_seqs)
		Bp *= 2;
	if (Bp > c->logits_cap)
		return false;
	size_t n_bt = 0;
	for (int32_t s = 0; s < b->n_seqs; s++) {
		if (b->seqs[s].n_tokens != 1)
			return false;
		n_bt += (size_t)(b->seqs[s].pos0 / c->block_size + 1);
	}
	return 6 * (size_t)Bp + n_bt + 1 <= c->gmeta_cap;
}

static enum bg_status cuda_forward(void *ctx, const struct backend_batch *b, struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	CUDA_CHECK(cudaSetDevice(c->device));
	c->n_logits = 0;
	enum bg_status st = check_batch(c, b, err);
	if (st != BG_OK)
		return st;
	for (int32_t i = 0; c->state && i < b->n_seqs; i++) /* the state before position 0 */
		if (b->seqs[i].pos0 == 0)
			CUDA_CHECK(cudaMemsetAsync(state_at(c, b->seqs[i].state_slot, 0), 0,
						   c->state_floats * 4, c->stream));
	if (b->n_logits > c->logits_cap) {
		size_t V = c->hp.n_vocab, E = c->hp.n_embd;
		size_t es = gpu_dtype_size(c->dt);
		size_t cap_l = (size_t)c->logits_cap * V * 4, cap_x = 0;
		/* dev_grow adds half again as headroom: ask for the rows wanted and use all it
		 * gives, no more (2048 rows of a 128k vocabulary are 1 GB, allocated after the
		 * KV pool took its share of the memory) */
		size_t rows = (size_t)b->n_logits;
		void *lp = c->logits;
		drop_graphs(c); /* they write the old logits buffer */
		st = dev_grow(c, &lp, &cap_l, rows * V * 4, "the logits", err);
		c->logits = (float *)lp;
		if (st != BG_OK) {
			c->logits_cap = 0;
			return st;
		}
		cudaFree(c->xl);
		c->xl = NULL;
		st = dev_grow(c, &c->xl, &cap_x, rows * E * es, "the LM head input", err);
		if (st != BG_OK) {
			c->logits_cap = 0;
			return st;
		}
		size_t cap_rows =
		    cap_l / (V * 4) < cap_x / (E * es) ? cap_l / (V * 4) : cap_x / (E * es);
		c->logits_cap = (int32_t)cap_rows;
	}

	if (graph_fits(c, b))
		return forward_graph(c, b, err);

	/* Walk the batch in order, cutting it into passes of at most cap_tok tokens. */
	int32_t si = 0, ti = 0, row = 0;
	while (si < b->n_seqs) {
		/* size the pass: tokens, wanted rows, block-table entries */
		struct pass ps = {0, 0, 0, 0, 0, 0, 0};
		for (int32_t s2 = si, t2 = ti; s2 < b->n_seqs && ps.n_tok < c->cap_tok;) {
			const struct backend_seq *sq = &b->seqs[s2];
			int32_t take = sq->n_tokens - t2;
			if (take > c->cap_tok - ps.n_tok)
				take = c->cap_tok - ps.n_tok;
			int32_t end = sq->pos0 + t2 + take;
			ps.n_bt += (end + c->block_size - 1) / c->block_size;
			attn_cover(take, &ps.n_tiles, &ps.n_list);
			ps.n_runs++;
			for (int32_t j = t2; j < t2 + take; j++)
				ps.n_out += sq->want_logits[j] != 0;
			ps.n_tok += take;
			t2 += take;
			if (t2 == sq->n_tokens) {
				s2++;
				t2 = 0;
			}
		}
		/* Layout of the metadata: tokens, pos, slots, tok_bt [n_tok] | rows [n_out] |
		 * block tables [n_bt] | tiles [2 n_tiles] | list [n_list] | runs [3 n_runs]. */
		size_t used = 4 * (size_t)ps.n_tok + (size_t)ps.n_out + (size_t)ps.n_bt +
			      2 * (size_t)ps.n_tiles + (size_t)ps.n_list + 3 * (size_t)ps.n_runs;
		struct cuda_staging *sm;
		if ((st = staging_take(c->meta, &c->meta_slot, &sm, err)) != BG_OK)
			return st;
		if (used > c->meta_cap) { /* both slots and d_meta (the grows wait for the stream) */
			size_t cap[3] = {c->meta_cap * 4, c->meta_cap * 4, c->meta_cap * 4};
			void *p[3] = {c->meta[0].h, c->meta[1].h, c->d_meta};
			c->meta_cap = 0;
			st = host_grow(c, &p[0], &cap[0], used * 4, err);
			if (st == BG_OK)
				st = host_grow(c, &p[1], &cap[1], cap[0], err);
			if (st == BG_OK)
				st = dev_grow(c, &p[2], &cap[2], cap[1], "pass metadata", err);
			c->meta[0].h = (int32_t *)p[0];
			c->meta[1].h = (int32_t *)p[1];
			c->d_meta = (int32_t *)p[2];
			if (st != BG_OK)
				return st;
			c->meta_cap = (cap[0] < cap[2] ? cap[0] : cap[2]) / 4;
		}
		int32_t n = ps.n_tok;
		int32_t *tok = sm->h, *pos = tok + n, *slots = pos + n, *tok_bt = slots + n;
		int32_t *rows = tok_bt + n, *bt = rows + ps.n_out;
		int32_t *tiles = bt + ps.n_bt, *list = tiles + 2 * ps.n_tiles;
		int32_t *runs = list + ps.n_list;
		int32_t k = 0, r = 0, n_bt = 0, n_tiles = 0, n_list = 0, n_runs = 0;
		while (k < n) {
			const struct backend_seq *sq = &b->seqs[si];
			int32_t take = sq->n_tokens - ti;
			if (take > n - k)
				take = n - k;
			int32_t end = sq->pos0 + ti + take;
			int32_t nb = (end + c->block_size - 1) / c->block_size;
			memcpy(bt + n_bt, sq->block_table, (size_t)nb * sizeof *bt);
			runs[3 * n_runs] = k; /* the run's rows and its sequence's state slot */
			runs[3 * n_runs + 1] = take;
			runs[3 * n_runs + 2] = c->state ? sq->state_slot : -1;
			n_runs++;
			if (take >= GPU_ATTN_TILE_MIN) {
				for (int32_t j = 0; j < take; j += GPU_ATTN_TILE) {
					tiles[2 * n_tiles] = k + j;
					tiles[2 * n_tiles + 1] =
					    take - j < GPU_ATTN_TILE ? take - j : GPU_ATTN_TILE;
					n_tiles++;
				}
			} else {
				for (int32_t j = 0; j < take; j++)
					list[n_list++] = k + j;
			}
			for (int32_t j = 0; j < take; j++) {
				int32_t p = sq->pos0 + ti + j;
				tok[k] = feed_token(c, sq, ti + j);
				pos[k] = p;
				slots[k] = sq->block_table[p / c->block_size] * c->block_size +
					   p % c->block_size;
				tok_bt[k] = n_bt;
				if (sq->want_logits[ti + j])
					rows[r++] = k;
				k++;
			}
			if (end > ps.max_ctx)
				ps.max_ctx = end;
			n_bt += nb;
			ti += take;
			if (ti == sq->n_tokens) {
				si++;
				ti = 0;
			}
		}
		BG_ASSERT(r == ps.n_out && n_bt == ps.n_bt && n_tiles == ps.n_tiles &&
			  n_list == ps.n_list && n_runs == ps.n_runs);
		CUDA_CHECK(cudaMemcpyAsync(c->d_meta, sm->h, used * 4, cudaMemcpyHostToDevice,
					   c->stream));
		if ((st = staging_sent(c, sm, err)) != BG_OK)
			return st;
		struct pass_ptrs pp = pass_layout(c, &ps);
		int n_split =
		    gpu_attention_splits(ps.n_list, c->attn_qh, c->attn_kvh, c->attn_hd, c->dt,
					 ps.max_ctx, c->n_sm, c->attn_per_sm, CUDA_PARTIAL_FLOATS);
		if (c->graph_log)
			st = census_pass(c, &ps, &pp, n_split, row, err);
		else
			st = run_pass(c, &ps, &pp, n_split, row, err);
		if (st != BG_OK)
			return st;
		row += ps.n_out;
	}
	c->n_logits = b->n_logits;
	return BG_OK;
}

/* ---- sampling ---- */

static bool penalties_on(const struct sampler_params *p)
{
	return (p->repetition_penalty != 1.0f && p->repetition_penalty > 0.0f) ||
	       p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

/* The layout of a group of rows[n] whose shares start at sin_off and con_off. */
static struct cuda_group_layout group_layout(const struct cuda_ctx *c,
					     const struct backend_sample_row *rows, int32_t n,
					     size_t sin_off, size_t con_off)
{
	size_t nw = (c->hp.n_vocab + 31) / 32, n_hist = 0, nc = 0, n_mask = 0, n_bias = 0;
	for (int32_t i = 0; i < n; i++) {
		const struct sampler_constraint *sc = rows[i].constraint;
		if (rows[i].forced < 0 && penalties_on(rows[i].params))
			n_hist += (size_t)rows[i].history.n_prompt + rows[i].history.n_output;
		if (!sc)
			continue;
		nc++;
		n_mask += sc->allow ? nw : 0;
		n_bias += sc->n_bias > 0 ? (size_t)sc->n_bias : 0;
	}
	struct cuda_group_layout l = {};
	l.sin_off = sin_off;
	l.sin_rows = align_up((size_t)n * sizeof(struct gpu_sample_row), 256);
	l.sin_bytes = l.sin_rows + align_up(n_hist * sizeof(struct gpu_hist_entry), 256);
	l.con_off = con_off;
	l.n_bias = n_bias;
	if (nc) {
		l.con_rows = align_up(nc * sizeof(struct gpu_constrain_row), 256);
		l.con_mask = align_up(n_mask * 4, 256);
		l.con_ids = align_up(n_bias * 4, 256);
		l.con_bytes = l.con_rows + l.con_mask + 2 * l.con_ids; /* biases: as many as ids */
	}
	return l;
}

/* The constrained rows of a group, perm[nu .. nu + nc) of rows: uploads their masks and
 * biases to the group's share of h_con/d_con (l) and enqueues gpu_constrain, which writes
 * their logits, with the constraint applied, to rows [0, nc) of c->clogits. */
static enum bg_status constrain_group(struct cuda_ctx *c, const struct backend_sample_row *rows,
				      const int32_t *perm, int32_t nu, int32_t nc,
				      const struct cuda_group_layout *l, struct bg_err *err)
{
	int32_t V = (int32_t)c->hp.n_vocab, nw = (V + 31) / 32;
	size_t b_rows = l->con_rows, b_mask = l->con_mask, b_ids = l->con_ids;
	enum bg_status st = dev_grow(c, (void **)&c->clogits, &c->clogits_cap, (size_t)nc * V * 4,
				     "constrained logits", err);
	if (st != BG_OK)
		return st;
	char *h = (char *)c->h_con + l->con_off;
	struct gpu_constrain_row *hr = (struct gpu_constrain_row *)h;
	uint32_t *hm = (uint32_t *)(h + b_rows);
	int32_t *hi = (int32_t *)(h + b_rows + b_mask);
	float *hb = (float *)(h + b_rows + b_mask + b_ids);
	int32_t mo = 0, bo = 0;
	for (int32_t j = 0; j < nc; j++) {
		const struct backend_sample_row *r = &rows[perm[nu + j]];
		const struct sampler_constraint *sc = r->constraint;
		int32_t nb = sc->n_bias > 0 ? sc->n_bias : 0;
		hr[j] = (struct gpu_constrain_row){r->logits_row, sc->allow ? mo : -1, bo, nb};
		if (sc->allow) {
			memcpy(hm + mo, sc->allow, (size_t)nw * 4);
			mo += nw;
		}
		if (nb) {
			memcpy(hi + bo, sc->bias_ids, (size_t)nb * 4);
			memcpy(hb + bo, sc->bias, (size_t)nb * 4);
			bo += nb;
		}
	}
	char *d = (char *)c->d_con + l->con_off;
	CUDA_CHECK(cudaMemcpyAsync(d, h, b_rows + b_mask + b_ids + l->n_bias * 4,
				   cudaMemcpyHostToDevice, c->stream));
	CUDA_CHECK(gpu_constrain(c->logits, V, (const struct gpu_constrain_row *)d, nc,
				 (const uint32_t *)(d + b_rows), (const int32_t *)(d + b_rows + b_mask),
				 (const float *)(d + b_rows + b_mask + b_ids), c->clogits, c->stream));
	return BG_OK;
}

/* Enqueues the sampling of rows[n] (n <= CUDA_SAMPLE_GROUP), rows [base, base + n) of the
 * call, from its shares of the inputs (l). The device sees the unconstrained rows first
 * (the forward's logits), then the constrained ones (their copies in c->clogits): two
 * sampler launches into d_sout[base ...], and last_at says where each row's result lies. */
static enum bg_status sample_group(struct cuda_ctx *c, const struct backend_sample_row *rows,
				   int32_t n, int32_t base, const struct cuda_group_layout *l,
				   struct bg_err *err)
{
	int32_t perm[CUDA_SAMPLE_GROUP], pos[CUDA_SAMPLE_GROUP]; /* device order <-> row */
	int32_t nu = 0, nc = 0;
	for (int32_t i = 0; i < n; i++)
		if (!rows[i].constraint)
			perm[nu++] = i;
	for (int32_t i = 0; i < n; i++)
		if (rows[i].constraint)
			perm[nu + nc++] = i;
	for (int32_t j = 0; j < n; j++) {
		pos[perm[j]] = j;
		c->last_at[base + perm[j]] = base + j;
	}
	size_t bytes_rows = l->sin_rows;
	struct gpu_sample_row *hr = (struct gpu_sample_row *)((char *)c->h_sin + l->sin_off);
	struct gpu_hist_entry *he = (struct gpu_hist_entry *)((char *)hr + bytes_rows);
	int32_t n_he = 0;
	int32_t V = (int32_t)c->hp.n_vocab;
	for (int32_t i = 0; i < n; i++) {
		const struct backend_sample_row *r = &rows[i];
		const struct sampler_params *p = r->params;
		struct gpu_sample_row *g = &hr[pos[i]];
		g->logits_row = r->constraint ? pos[i] - nu : r->logits_row;
		g->forced = r->forced;
		g->temperature = p->temperature;
		g->top_k = p->top_k;
		g->top_p = p->top_p;
		g->min_p = p->min_p;
		g->rep = p->repetition_penalty;
		g->pres = p->presence_penalty;
		g->freq = p->frequency_penalty;
		g->n_top = p->n_top;
		g->hist_off = n_he;
		g->hist_n = 0;
		g->u = 0.0f;
		if (r->forced >= 0)
			continue;
		if (penalties_on(p)) {
			/* distinct ids with the CPU sampler's encoding: bit 0 prompt, 2 per use */
			int32_t n_ids = 0;
			const struct sampler_history *h = &r->history;
			for (int32_t j = 0; j < h->n_prompt + h->n_output; j++) {
				bool in_prompt = j < h->n_prompt;
				int32_t id = in_prompt ? h->prompt[j] : h->output[j - h->n_prompt];
				if (id < 0 || id >= V)
					continue;
				if (c->hist_cnt[id] == 0)
					c->hist_ids[n_ids++] = id;
				if (in_prompt)
					c->hist_cnt[id] |= 1;
				else
					c->hist_cnt[id] += 2;
			}
			for (int32_t j = 0; j < n_ids; j++) {
				int32_t id = c->hist_ids[j];
				he[n_he].id = id;
				he[n_he].cnt = c->hist_cnt[id];
				n_he++;
				c->hist_cnt[id] = 0;
			}
			g->hist_n = n_ids;
		}
		if (p->temperature > 0.0f)
			g->u = sampler_rng_uniform(r->rng);
	}
	size_t used = bytes_rows + (size_t)n_he * sizeof(struct gpu_hist_entry);
	char *d = (char *)c->d_sin + l->sin_off;
	CUDA_CHECK(cudaMemcpyAsync(d, hr, used, cudaMemcpyHostToDevice, c->stream));
	enum bg_status st;
	if (nc > 0 && (st = constrain_group(c, rows, perm, nu, nc, l, err)) != BG_OK)
		return st;
	const struct gpu_sample_row *drows = (const struct gpu_sample_row *)d;
	const struct gpu_hist_entry *dhist = (const struct gpu_hist_entry *)(d + bytes_rows);
	/* one stream: a launch reuses the work buffer (and the next group clogits) after the
	 * one before */
	if (nu > 0)
		CUDA_CHECK(gpu_sample(c->logits, V, drows, nu, dhist, c->sample_work,
				      c->d_sout + base, c->stream));
	if (nc > 0)
		CUDA_CHECK(gpu_sample(c->clogits, V, drows + nu, nc, dhist, c->sample_work,
				      c->d_sout + base + nu, c->stream));
	return BG_OK;
}

/* d_sout and h_sout for n rows. The decode graphs read d_sout: they go when it moves. */
static enum bg_status sout_reserve(struct cuda_ctx *c, int32_t n, struct bg_err *err)
{
	if (n <= c->sout_cap)
		return BG_OK;
	size_t dcap = (size_t)c->sout_cap * sizeof *c->d_sout, hcap = dcap;
	void *d = c->d_sout, *h = c->h_sout;
	drop_graphs(c);
	c->sout_cap = 0;
	enum bg_status st =
	    dev_grow(c, &d, &dcap, (size_t)n * sizeof *c->d_sout, "sampling results", err);
	c->d_sout = (struct sampler_result *)d;
	if (st == BG_OK)
		st = host_grow(c, &h, &hcap, dcap, err);
	c->h_sout = (struct sampler_result *)h;
	if (st == BG_OK)
		c->sout_cap = (int32_t)((dcap < hcap ? dcap : hcap) / sizeof *c->d_sout);
	return st;
}

static enum bg_status cuda_sample(void *ctx, const struct backend_sample_row *rows, int32_t n_rows,
				  struct sampler_result *out, struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	CUDA_CHECK(cudaSetDevice(c->device));
	if (c->out) /* its inputs' staging is still read, and its results not delivered */
		return bg_fail(err, BG_ERR_INVALID,
			       "sample called before the last call's results were waited for");
	size_t sin_need = 0, con_need = 0;
	for (int32_t i = 0; i < n_rows; i++) {
		const struct sampler_constraint *sc = rows[i].constraint;
		if (sc && (sc->n_bias < 0 || (sc->n_bias > 0 && (!sc->bias_ids || !sc->bias))))
			return bg_fail(err, BG_ERR_INVALID, "sample row %d: malformed constraint", i);
		if (rows[i].logits_row < 0 || rows[i].logits_row >= c->n_logits)
			return bg_fail(err, BG_ERR_INVALID,
				       "sample row %d asks for logits row %d of "
				       "%d",
				       i, rows[i].logits_row, c->n_logits);
		if (rows[i].forced >= (int32_t)c->hp.n_vocab || !rows[i].params ||
		    (rows[i].forced < 0 && rows[i].params->temperature > 0.0f && !rows[i].rng))
			return bg_fail(err, BG_ERR_INVALID, "sample row %d is malformed", i);
	}
	c->n_last = 0; /* a failed call leaves no tokens to feed */
	if (n_rows > c->cap_last) {
		int32_t *t = (int32_t *)realloc(c->last_at, (size_t)n_rows * sizeof *t);
		if (t)
			c->last_at = t;
		size_t n_groups = ((size_t)n_rows + CUDA_SAMPLE_GROUP - 1) / CUDA_SAMPLE_GROUP;
		struct cuda_group_layout *gl =
		    t ? (struct cuda_group_layout *)realloc(c->glay, n_groups * sizeof *gl) : NULL;
		if (!gl)
			return bg_fail(err, BG_ERR_NOMEM, "out of host memory for %d rows", n_rows);
		c->glay = gl;
		c->cap_last = n_rows;
	}
	for (int32_t i = 0; i < n_rows; i += CUDA_SAMPLE_GROUP) {
		int32_t n = n_rows - i < CUDA_SAMPLE_GROUP ? n_rows - i : CUDA_SAMPLE_GROUP;
		struct cuda_group_layout *l = &c->glay[i / CUDA_SAMPLE_GROUP];
		*l = group_layout(c, rows + i, n, sin_need, con_need);
		sin_need += l->sin_bytes;
		con_need += l->con_bytes;
	}
	size_t dcap = c->sin_cap, dcon = c->con_cap;
	enum bg_status st = sout_reserve(c, n_rows, err);
	if (st == BG_OK)
		st = host_grow(c, &c->h_sin, &c->sin_cap, sin_need, err);
	if (st == BG_OK)
		st = dev_grow(c, &c->d_sin, &dcap, c->sin_cap, "sampling inputs", err);
	if (st == BG_OK && con_need)
		st = host_grow(c, &c->h_con, &c->con_cap, con_need, err);
	if (st == BG_OK && con_need)
		st = dev_grow(c, &c->d_con, &dcon, c->con_cap, "constraint masks", err);
	if (st != BG_OK) {
		c->sin_cap = c->con_cap = 0;
		return st;
	}
	c->sin_cap = c->sin_cap < dcap ? c->sin_cap : dcap;
	c->con_cap = c->con_cap < dcon ? c->con_cap : dcon;
	for (int32_t i = 0; i < n_rows; i += CUDA_SAMPLE_GROUP) {
		int32_t n = n_rows - i < CUDA_SAMPLE_GROUP ? n_rows - i : CUDA_SAMPLE_GROUP;
		st = sample_group(c, rows + i, n, i, &c->glay[i / CUDA_SAMPLE_GROUP], err);
		if (st != BG_OK)
			return st;
	}
	CUDA_CHECK(cudaMemcpyAsync(c->h_sout, c->d_sout, (size_t)n_rows * sizeof *out,
				   cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(cudaEventRecord(c->sout_ev, c->stream));
	c->out = out;
	c->n_last = n_rows;
	return BG_OK;
}

static enum bg_status cuda_sample_wait(void *ctx, struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	struct sampler_result *out = c->out;
	if (!out)
		return BG_OK;
	c->out = NULL;
	CUDA_CHECK(cudaSetDevice(c->device));
	CUDA_CHECK(cudaEventSynchronize(c->sout_ev));
	for (int32_t i = 0; i < c->n_last; i++)
		out[i] = c->h_sout[c->last_at[i]];
	return BG_OK;
}

static enum bg_status cuda_get_logits(void *ctx, int32_t row, float *dst, struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	CUDA_CHECK(cudaSetDevice(c->device));
	if (row < 0 || row >= c->n_logits)
		return bg_fail(err, BG_ERR_INVALID, "logits row %d of %d", row, c->n_logits);
	size_t V = c->hp.n_vocab;
	CUDA_CHECK(cudaMemcpyAsync(dst, c->logits + (size_t)row * V, V * 4, cudaMemcpyDeviceToHost,
				   c->stream));
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
	return BG_OK;
}

/* ---- KV block copies ---- */

static enum bg_status check_blocks(const struct cuda_ctx *c, const int32_t *blocks, int32_t n,
				   struct bg_err *err)
{
	for (int32_t i = 0; i < n; i++)
		if (blocks[i] < 0 || blocks[i] >= c->n_blocks)
			return bg_fail(err, BG_ERR_INVALID, "KV block %d of %d", blocks[i],
				       c->n_blocks);
	return BG_OK;
}

static enum bg_status cuda_kv_swap_out(void *ctx, const int32_t *blocks, int32_t n, void *host,
				       struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	CUDA_CHECK(cudaSetDevice(c->device));
	enum bg_status st = check_blocks(c, blocks, n, err);
	if (st != BG_OK)
		return st;
	for (int32_t i = 0; i < n; i++)
		CUDA_CHECK(cudaMemcpyAsync((char *)host + (size_t)i * c->block_bytes,
					   (char *)c->kv + (size_t)blocks[i] * c->block_bytes,
					   c->block_bytes, cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
	return BG_OK;
}

static enum bg_status cuda_kv_swap_in(void *ctx, const int32_t *blocks, int32_t n, const void *host,
				      struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	CUDA_CHECK(cudaSetDevice(c->device));
	enum bg_status st = check_blocks(c, blocks, n, err);
	if (st != BG_OK)
		return st;
	for (int32_t i = 0; i < n; i++)
		CUDA_CHECK(cudaMemcpyAsync((char *)c->kv + (size_t)blocks[i] * c->block_bytes,
					   (const char *)host + (size_t)i * c->block_bytes,
					   c->block_bytes, cudaMemcpyHostToDevice, c->stream));
	/* the host buffer may be freed as soon as we return */
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
	return BG_OK;
}

static enum bg_status cuda_kv_copy(void *ctx, int32_t src, int32_t dst, struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	CUDA_CHECK(cudaSetDevice(c->device));
	int32_t both[2] = {src, dst};
	enum bg_status st = check_blocks(c, both, 2, err);
	if (st != BG_OK)
		return st;
	if (src == dst)
		return BG_OK;
	CUDA_CHECK(cudaMemcpyAsync((char *)c->kv + (size_t)dst * c->block_bytes,
				   (const char *)c->kv + (size_t)src * c->block_bytes,
				   c->block_bytes, cudaMemcpyDeviceToDevice, c->stream));
	return BG_OK;
}

static enum bg_status cuda_state_copy(void *ctx, const int32_t *src, const int32_t *dst, int32_t n,
				      struct bg_err *err)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	CUDA_CHECK(cudaSetDevice(c->device));
	int32_t *stage = (int32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof *stage), n_stage = 0;
	if (!stage)
		return bg_fail(err, BG_ERR_NOMEM, "state_copy: out of host memory");
	enum bg_status st =
	    backend_state_copy_plan(src, dst, n, c->n_state_slots, stage, &n_stage, err);
	size_t sb = c->state_floats * 4;
	if (st == BG_OK && n_stage)
		st = dev_grow(c, &c->state_tmp, &c->state_tmp_cap, (size_t)n_stage * sb,
			      "state staging", err);
	/* the sources a copy overwrites first, then the copies: all enqueued, in order */
	cudaError_t e = cudaSuccess;
	for (int32_t i = 0; st == BG_OK && e == cudaSuccess && i < n; i++)
		if (stage[i] >= 0)
			e = cudaMemcpyAsync((char *)c->state_tmp + (size_t)stage[i] * sb,
					    state_at(c, src[i], 0), sb, cudaMemcpyDeviceToDevice,
					    c->stream);
	for (int32_t i = 0; st == BG_OK && e == cudaSuccess && i < n; i++)
		if (src[i] != dst[i])
			e = cudaMemcpyAsync(state_at(c, dst[i], 0),
					    stage[i] >= 0
						? (const void *)((char *)c->state_tmp +
								 (size_t)stage[i] * sb)
						: (const void *)state_at(c, src[i], 0),
					    sb, cudaMemcpyDeviceToDevice, c->stream);
	free(stage);
	if (st != BG_OK)
		return st;
	CUDA_CHECK(e);
	return BG_OK;
}

static void cuda_mem_info(void *ctx, struct backend_mem *out)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	out->weight_bytes = c->weight_bytes;
	out->kv_bytes = c->kv_bytes + (size_t)c->n_state_slots * c->state_floats * 4;
	out->workspace_bytes = c->act_bytes + CUDA_CUBLAS_WS +
			       (size_t)c->logits_cap * c->hp.n_vocab * 4 +
			       gpu_sample_work_floats(CUDA_SAMPLE_GROUP, (int)c->hp.n_vocab) * 4 +
			       CUDA_PARTIAL_FLOATS * 4 + c->clogits_cap + c->qscratch_bytes;
	out->on_device = true;
}

static void cuda_destroy(void *ctx)
{
	struct cuda_ctx *c = (struct cuda_ctx *)ctx;
	if (!c)
		return;
	cudaSetDevice(c->device);
	free(c->last_at);
	free(c->glay);
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	if (c->cublas)
		cublasDestroy(c->cublas);
	for (int i = 0; i < 2; i++) {
		if (c->meta[i].ev)
			cudaEventDestroy(c->meta[i].ev);
		if (c->gmeta[i].ev)
			cudaEventDestroy(c->gmeta[i].ev);
		cudaFreeHost(c->meta[i].h);
		cudaFreeHost(c->gmeta[i].h);
	}
	if (c->sout_ev)
		cudaEventDestroy(c->sout_ev);
	drop_graphs(c);
	cudaFree(c->d_gmeta);
	cudaFree(c->cublas_ws);
	cudaFree(c->weights);
	cudaFree(c->qscratch);
	cudaFree(c->d_rope);
	cudaFree(c->kv);
	cudaFree(c->state);
	cudaFree(c->state_tmp);
	free(c->state_off);
	cudaFree(c->x); /* the base of all activations */
	cudaFree(c->partial);
	cudaFree(c->attn_cnt);
	cudaFree(c->bar);
	cudaFree(c->d_meta);
	cudaFree(c->logits);
	cudaFree(c->xl);
	cudaFree(c->sample_work);
	cudaFree(c->d_sin);
	cudaFreeHost(c->h_sin);
	cudaFree(c->d_sout);
	cudaFreeHost(c->h_sout);
	cudaFree(c->d_con);
	cudaFreeHost(c->h_con);
	cudaFree(c->clogits);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	cudaGetLastError(); /* leave no error behind for whoever uses CUDA next */
	if (c->graph_log && c->graph_log != stderr)
		fclose(c->graph_log);
	free(c->layers);
	free(c->hist_cnt);
	free(c->hist_ids);
	free(c);
}

static const struct backend_ops cuda_ops = {
    cuda_forward,     cuda_sample,     cuda_sample_wait, cuda_get_logits, cuda_kv_swap_out,
    cuda_kv_swap_in,  cuda_kv_copy,    cuda_state_copy,             cuda_mem_info,   cuda_destroy,
};

/* ---- creation ---- */

/* nvcc's host compiler must lay the shared structs out as the C compiler did */
GPU_ABI_CHECKS

extern "C" int gpu_plugin_abi(void)
{
	return (int)(GPU_PLUGIN_ABI ^ GPU_ABI_LAYOUT);
}

/* Why no device can be used when the driver is the cause, else "" (no driver at all, no
 * device, or another error: cudaGetErrorString says which). */
static void driver_too_old(char *why, size_t cap)
{
	int drv = 0;
	if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0)
		snprintf(why, cap,
			 "no CUDA device is available: no NVIDIA driver was found (this build "
			 "needs one for CUDA %d.%d or newer)",
			 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
	else
		snprintf(why, cap,
			 "the NVIDIA driver is too old: it supports CUDA %d.%d, this build of "
			 "batchgen needs CUDA %d.%d or newer (update the driver, or rebuild with an "
			 "older CUDA toolkit)",
			 drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000,
			 CUDART_VERSION % 1000 / 10);
}

extern "C" int gpu_plugin_device_count(char *why, size_t cap)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		cudaGetLastError(); /* no driver or no device: not an error here */
		if (e == cudaErrorInsufficientDriver && why && cap)
			driver_too_old(why, cap);
		return 0;
	}
	return n;
}

static enum bg_status check_model(const struct model *m, struct bg_err *err)
{
	const struct model_hparams *hp = &m->hp;
	if (!m->layers || hp->n_layer == 0)
		return bg_fail(err, BG_ERR_INVALID, "the model has no layers");
	/* step35 (model.h): the attention gate as one row a query head of the layer, and the
	 * clamped SwiGLU in the experts without gpt-oss's biases or alpha (gpu_moe_oai) nor a
	 * GELU */
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		if (ml->attn_gate.ne0 &&
		    (ml->attn_gate.ne0 != hp->n_embd || ml->conv || ml->gdn || ml->ssm ||
		     ml->ffn_only || hp->mla || ml->attn_gate.ne1 != model_n_head(hp, ml->swa)))
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "layer %u's attention gate is not (n_embd, its query heads) "
				       "on an attention layer",
				       l);
		if ((ml->clamp_exp > 0.0f || ml->clamp_shexp > 0.0f) &&
		    (hp->gelu || hp->swiglu_oai || hp->moe_bias || hp->relu2 || hp->xielu))
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the clamped SwiGLU (layer %u) is supported without GELU, "
				       "expert biases or another activation",
				       l);
	}
	/* deepseek2: a lazy synthetic model's MLA weights are not made on the device (their
	 * tensor ids are not laid out), and gpu_moe_route_grouped's groups are warp lanes
	 * (bailingmoe2: the grouped routing alone) */
	if ((hp->mla || hp->moe_grouped) && !m->tok_embd.data)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CUDA backend does not fill a lazy synthetic %s model's %s; the "
			       "CPU backend runs it (--device cpu)",
			       m->arch,
			       hp->mla ? "latent attention (MLA) weights" : "grouped-routing experts");
	if (hp->moe_grouped && hp->n_expert_groups > GPU_MOE_MAX_GROUPS)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CUDA backend routes up to %d expert groups, not %u",
			       GPU_MOE_MAX_GROUPS, hp->n_expert_groups);
	/* gpt-oss: sinks and the O bias on any layer; the biased router and experts and the
	 * clamped SwiGLU in gpu/moe.cuh's experts only (gpu_moe_oai), as on the CPU backend */
	if ((hp->moe_bias || hp->swiglu_oai) && hp->n_expert == 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the clamped SwiGLU and expert biases are supported in experts only");
	if (hp->parallel && (hp->n_expert || hp->xielu || hp->post_norms || hp->out_scale ||
			     hp->residual_scale != 1.0f || hp->attn_out_bias || hp->no_pre_norms))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the parallel attention and FFN block is supported with a dense "
			       "SwiGLU FFN and no post-norms, scales or O bias only");
	if (hp->xielu && (hp->n_expert || hp->gelu))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the xIELU FFN is supported in dense layers only");
	if ((hp->gdn_conv || hp->attn_out_gate) && /* qwen35: gpu_gdn's bounds */
	    (hp->gdn_conv > GPU_CONV_L_MAX || hp->gdn_d > 1024 || !m->tok_embd.data ||
	     !hp->gdn_nk || hp->gdn_nv % hp->gdn_nk))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CUDA backend cannot run this gated delta net (qwen35: conv of "
			       "at most %d taps, heads of at most 1024)",
			       GPU_CONV_L_MAX);
	if (hp->conv_l &&
	    (hp->conv_l > GPU_CONV_L_MAX || (uint64_t)hp->n_head * hp->head_dim != hp->n_embd))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CUDA backend runs short-conv layers of up to %d taps in a "
			       "model whose heads span n_embd",
			       GPU_CONV_L_MAX);
	if (hp->swiglu_oai && (hp->gelu || !(hp->swiglu_alpha > 0.0f)))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the clamped SwiGLU needs a positive alpha and no GELU");
	if (hp->n_embd_per_layer || model_n_layer_kv(hp) < hp->n_layer)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CUDA backend does not run per-layer token embeddings or "
			       "shared-KV layers (Gemma 4 E2B / E4B); the CPU backend does");
	/* glm4moe (model.h): the shared expert lives in the dense FFN's slots (wgu, wdown),
	 * as wide as the wider of the two (dense_ffn_width); leading dense layers then read
	 * theirs n_ff apart: no wider than them (granitehybrid's is wider, without dense
	 * layers) */
	bool any_dense = false; /* step35: after MoE layers too (model_layer_moe) */
	for (uint32_t l = 0; hp->n_expert && l < hp->n_layer; l++)
		any_dense = any_dense || (!model_layer_moe(&m->layers[l]) && !m->layers[l].no_ffn);
	if (any_dense && dense_ffn_width(hp) == 0) /* (no such file loads today) */
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CUDA backend runs dense layers after MoE ones only beside a "
			       "shared expert or leading dense layers");
	if (hp->n_expert_shared && any_dense && model_ff_shexp(hp) > hp->n_ff)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "the CUDA backend needs the shared experts (%llu wide) no wider "
			       "than feed_forward_length %u",
			       (unsigned long long)model_ff_shexp(hp), hp->n_ff);
	/* (softmax routing with a shared expert: granitehybrid's, added after the routed sum
	 * as glm4moe's) */
	if (hp->n_expert && !hp->expert_gating_sigmoid && !hp->moe_grouped &&
	    hp->expert_weights_scale != 1.0f)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "softmax routing with scaled weights is not supported");
	for (uint32_t l = 0; hp->n_expert == 0 && l < hp->n_layer; l++)
		if (!m->layers[l].no_ffn && m->layers[l].w_down.ne0 != hp->n_ff)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the CUDA backend needs every layer's FFN as wide (%u); layer "
				       "%u's is %llu (the CPU backend runs it)",
				       hp->n_ff, l, (unsigned long long)m->layers[l].w_down.ne0);
	for (int k = 0; k < 2; k++) { /* the global layers, then the windowed ones (gemma4) */
		uint32_t hd = model_head_dim(hp, k), kvh = model_n_head_kv(hp, k);
		uint32_t rd = model_rope_dim(hp, k);
		if (hd == 0 || hd > GPU_ATTN_MAX_HEAD)
			return bg_fail(
			    err, BG_ERR_UNSUPPORTED,
			    "the CUDA backend supports head sizes up to 576, not %u%s", hd,
			    hp->head_dim_swa != hp->head_dim && hp->head_dim_swa
				? (k ? " (the windowed layers')" : " (the global layers')")
				: "");
		uint32_t qh = model_n_head(hp, k); /* step35's windowed layers: their own */
		if (kvh == 0 || qh % kvh != 0)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "%u query heads cannot share %u KV heads", qh, kvh);
		if (rd % 2 != 0 || rd > hd)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "a rotary dimension of %u does not fit heads of %u", rd, hd);
	}
	if (hp->attn_temp_scale != 0.0f && hp->attn_temp_floor == 0)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "an attention temperature needs a floor scale above 0");
	if (hp->n_vocab > 0x7fffffffu / 2)
		return bg_fail(err, BG_ERR_UNSUPPORTED, "a vocabulary of %u is too large",
			       hp->n_vocab);
	if (hp->n_expert) { /* gpu/moe.cuh's limits */
		if (hp->n_expert > GPU_MOE_MAX_EXPERT || hp->n_expert_used < 1 ||
		    hp->n_expert_used > hp->n_expert)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the CUDA backend supports up to %d experts, %u of %u used "
				       "is not among them",
				       GPU_MOE_MAX_EXPERT, hp->n_expert_used, hp->n_expert);
		if (hp->n_embd % 8 || hp->n_ff_exp % 8 || hp->n_ff_exp == 0)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "the CUDA backend needs experts whose widths are multiples "
				       "of 8, not %u and %u",
				       hp->n_embd, hp->n_ff_exp);
		if ((uint64_t)CUDA_DEFAULT_CAP_TOK * hp->n_expert_used / GPU_MOE_TILE +
			hp->n_expert >
		    65535)
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "%u experts a token are too many for the CUDA backend",
				       hp->n_expert_used);
	}
	return BG_OK;
}

/* The recurrent-state slots: none when no layer has model_state_floats; else n_slots (> 0)
 * zeroed slots of device memory, or fewer: at most a quarter of the free memory (at least
 * one), the rest left to the KV pool. */
static enum bg_status state_create(struct cuda_ctx *c, const struct model *m, int32_t n_slots,
				   struct bg_err *err)
{
	uint64_t per = 0;
	enum bg_status st = model_state_layout(m, n_slots, &c->state_off, &per, err);
	if (st != BG_OK || per == 0)
		return st;
	size_t free_b = 0, total_b = 0;
	CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
	uint64_t fit = free_b / 4 / (per * 4);
	if ((uint64_t)n_slots > fit)
		n_slots = fit > 1 ? (int32_t)fit : 1;
	size_t bytes = (size_t)n_slots * (size_t)per * 4;
	st = dev_alloc((void **)&c->state, bytes, "the recurrent-state slots", err);
	if (st != BG_OK)
		return st;
	c->state_floats = (size_t)per;
	c->n_state_slots = n_slots;
	CUDA_CHECK(cudaMemsetAsync(c->state, 0, bytes, c->stream));
	return BG_OK;
}

static enum bg_status create_ctx(struct cuda_ctx *c, const struct model *m,
				 const struct backend_config *cfg, struct backend *b,
				 struct bg_err *err)
{
	const struct model_hparams *hp = &m->hp;
	/* the first call that creates the device's context: a full or busy GPU fails here,
	 * which deserves a sentence rather than a file:line */
	cudaError_t e0 = cudaSetDevice(c->device);
	if (e0 != cudaSuccess) {
		cudaGetLastError();
		return bg_fail(err, e0 == cudaErrorMemoryAllocation ? BG_ERR_NOMEM : BG_ERR_DEVICE,
			       "CUDA device %d cannot be used: %s", c->device,
			       cudaGetErrorString(e0));
	}
	struct cudaDeviceProp prop;
	CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
	/* The library holds code for sm_80, 86, 89 and 90 (+ PTX for newer); an older GPU
	 * would fail on the first kernel launch with cudaErrorNoKernelImageForDevice. Say so
	 * now, in a sentence. */
	if (prop.major < 8)
		return bg_fail(err, BG_ERR_DEVICE,
			       "CUDA device %d (%s) has compute capability %d.%d; the CUDA "
			       "backend needs 8.0 (Ampere) or newer",
			       c->device, prop.name, prop.major, prop.minor);
	c->n_sm = prop.multiProcessorCount;
	const char *pe = getenv("BG_CUDA_PDL"); /* 0: the kill switch, for triage */
	c->pdl = prop.major >= 9 && !(pe && strcmp(pe, "0") == 0);
	const char *ce = getenv("BG_CUDA_CHAIN"); /* 0: the kill switch, as BG_CUDA_PDL */
	c->chain = prop.cooperativeLaunch && !(ce && strcmp(ce, "0") == 0);
	/* here, not at the first decode pass: that one may be inside a graph capture */
	CUDA_CHECK(gpu_gemv_init(prop.sharedMemPerBlockOptin, &c->gemv_xs));
	c->hp = *hp;
	c->kv_window = model_kv_window(hp);
	c->dt = pick_dtype(m);
	/* the decode kernel's blocks an SM holds: the fewer of the two kinds' (gemma4,
	 * step35) */
	CUDA_CHECK(gpu_attention_occupancy(c->dt, (int)hp->n_head, (int)hp->n_head_kv,
					   (int)hp->head_dim, &c->attn_per_sm));
	if (model_head_dim(hp, true) != hp->head_dim ||
	    model_n_head_kv(hp, true) != hp->n_head_kv || model_n_head(hp, true) != hp->n_head) {
		int per_sm = 0;
		CUDA_CHECK(gpu_attention_occupancy(c->dt, (int)model_n_head(hp, true),
						   (int)model_n_head_kv(hp, true),
						   (int)model_head_dim(hp, true), &per_sm));
		if (per_sm < c->attn_per_sm)
			c->attn_per_sm = per_sm;
	}
	c->n_q = (int)model_q_dim_max(hp);
	c->n_kv = (int)model_kv_dim_max(hp);
	if (hp->conv_l && c->n_kv < (int)hp->n_embd) /* lfm2: in_proj's 3 n_embd columns */
		c->n_kv = (int)hp->n_embd;
	if (hp->ssm_d_conv && c->n_q < (int)hp->ssm_d_inner) /* granitehybrid: attn holds y */
		c->n_q = (int)hp->ssm_d_inner;
	c->ld_qkv = c->n_q + 2 * c->n_kv;
	if (hp->ssm_d_conv && c->ld_qkv < ssm_in_rows(hp)) /* and qkv ssm_in's output */
		c->ld_qkv = ssm_in_rows(hp);
	if (hp->ssm_parallel) /* falcon-h1: ssm_in's rows after Q|K|V */
		c->ld_qkv = (int)model_q_dim_max(hp) + 2 * (int)model_kv_dim_max(hp) +
			    ssm_in_rows(hp);
	/* deepseek2 (model.h): qkv holds wq_a's (or wq's) and wkv_a's outputs */
	const int mla_ql =
	    hp->n_lora_q ? (int)hp->n_lora_q : (int)(hp->n_head * (hp->mla_nope + hp->rope_dim));
	if (hp->mla) {
		const int H = (int)hp->n_head, xw[3] = {(int)hp->n_lora_q, H * (int)hp->mla_nope,
							H * (int)hp->mla_v_head};
		c->ld_qkv = mla_ql + (int)hp->n_lora_kv + (int)hp->rope_dim;
		c->mla_qr = hp->n_lora_q ? H * (int)(hp->mla_nope + hp->rope_dim) : 0;
		c->mla_xw = xw[0] > xw[1] ? xw[0] : xw[1];
		c->mla_xw = xw[2] > c->mla_xw ? xw[2] : c->mla_xw;
	}
	c->attn_hd = (int)model_head_dim_max(hp);
	c->attn_kvh = (int)(hp->n_head_kv > model_n_head_kv(hp, true) ? hp->n_head_kv
								 : model_n_head_kv(hp, true));
	c->attn_qh =
	    (int)(hp->n_head > model_n_head(hp, true) ? hp->n_head : model_n_head(hp, true));
	c->block_size = cfg->block_size;
	/* each layer's geometry and where its K/V rows start in a block: a block holds every
	 * layer's K then V slab in order, each as wide as that layer's rows */
	c->layers = (struct cuda_layer *)calloc(hp->n_layer, sizeof *c->layers);
	if (!c->layers)
		return bg_fail(err, BG_ERR_NOMEM, "out of host memory");
	int64_t off = 0;
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		struct cuda_layer *L = &c->layers[l];
		bool sw = m->layers[l].swa;
		L->hd = (int)model_head_dim(hp, sw);
		L->n_kvh = (int)model_n_head_kv(hp, sw);
		L->n_qh = (int)model_n_head(hp, sw); /* step35's windowed layers: their own */
		L->n_q = L->n_qh * L->hd;
		L->n_kv = L->n_kvh * L->hd;
		L->kv_off = off;
		L->out_scale = hp->out_scale ? m->layers[l].out_scale : 1.0f;
		L->conv = m->layers[l].conv;
		if (L->conv) /* lfm2: in_proj's B|C|x as "Q|K|V", out_proj n_embd wide */
			L->n_q = L->n_kv = (int)hp->n_embd;
		L->ssm = m->layers[l].ssm;
		if (L->ssm) /* granitehybrid: ssm_in's rows, ssm_out D wide, no K/V */
			L->n_q = (int)hp->ssm_d_inner, L->n_kv = 0;
		L->ffn_only = m->layers[l].ffn_only;
		L->no_ffn = m->layers[l].no_ffn;
		if (L->ffn_only) /* nemotron_h: no mixer, no K/V */
			L->n_q = L->n_kv = 0;
		L->qkv_rows = hp->mla ? c->ld_qkv : L->ssm ? ssm_in_rows(hp) : L->n_q + 2 * L->n_kv;
		if (hp->ssm_parallel) /* falcon-h1: [Q | K | V | ssm_in] */
			L->qkv_rows += ssm_in_rows(hp);
		L->ssm_nonorm = hp->ssm_parallel && !m->layers[l].ssm_norm.data;
		L->o_in = hp->mla ? (int)(hp->n_head * hp->mla_v_head) : L->n_q;
		L->gdn = m->layers[l].gdn;
		if (L->gdn) { /* qwen35: [u | z | beta | alpha] rows, VD into ssm_out, no slab */
			const int VD = (int)(hp->gdn_nv * hp->gdn_d);
			L->n_q = L->o_in = VD;
			L->n_kv = 0;
			L->qkv_rows = 2 * (int)(hp->gdn_nk * hp->gdn_d) + 2 * VD + 2 * (int)hp->gdn_nv;
			c->gscr_c = L->qkv_rows - VD - 2 * (int)hp->gdn_nv > c->gscr_c
					? L->qkv_rows - VD - 2 * (int)hp->gdn_nv
					: c->gscr_c;
		} else if (hp->attn_out_gate) { /* qwen35: the gates' rows after Q's */
			L->qkv_rows += L->n_q;
			c->gscr_c = L->qkv_rows > c->gscr_c ? L->qkv_rows : c->gscr_c;
		}
		if (hp->gdn_conv) /* the gates (attention) or the heads' outputs (delta net) */
			c->gscr_o = L->n_q > c->gscr_o ? L->n_q : c->gscr_o;
		const struct model_layer *ml = &m->layers[l];
		if (ml->attn_gate.ne0) /* step35: the head gates' logits, one a query head */
			c->gscr_o = L->n_qh > c->gscr_o ? L->n_qh : c->gscr_o;
		c->step35_ops = c->step35_ops || ml->attn_gate.ne0 || ml->clamp_exp > 0.0f ||
				ml->clamp_shexp > 0.0f;
		c->ld_qkv = L->qkv_rows > c->ld_qkv ? L->qkv_rows : c->ld_qkv;
		c->n_q = L->n_q > c->n_q ? L->n_q : c->n_q;
		/* deepseek2: the K slab alone (V is read from the K rows, as on the CPU); lfm2's
		 * conv layers: their bx rows alone */
		off += (hp->mla || L->conv ? 1 : 2) * (int64_t)c->block_size * L->n_kv;
	}
	c->block_elems = off;

	CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	for (int i = 0; i < 2; i++)
		CUDA_CHECK(cudaEventCreateWithFlags(&c->meta[i].ev, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventCreateWithFlags(&c->sout_ev, cudaEventDisableTiming));
	cublasStatus_t cs = cublasCreate(&c->cublas);
	if (cs != CUBLAS_STATUS_SUCCESS) {
		c->cublas = NULL;
		return bg_fail(err, BG_ERR_DEVICE, "cuBLAS could not start on CUDA device %d: %s",
			       c->device, cublasGetStatusString(cs));
	}
	CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
	enum bg_status st = dev_alloc(&c->cublas_ws, CUDA_CUBLAS_WS, "the cuBLAS workspace", err);
	if (st != BG_OK)
		return st;
	CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_ws, CUDA_CUBLAS_WS));

	/* the resident path (README "GPU memory"): BG_CUDA_QUANT=1 always, 0 never, by default
	 * when the BF16 weights would not leave half the free memory (gpu_qres_policy) */
	{
		size_t free_b = 0, total_b = 0;
		CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
		c->qres = gpu_qres_policy(getenv("BG_CUDA_QUANT"), m->n_params, free_b);
	}
	st = load_weights(c, m, err);
	if (st == BG_OK && c->qscratch_bytes)
		st = dev_alloc(&c->qscratch, c->qscratch_bytes, "the dequantization scratch", err);
	if (st == BG_OK)
		st = load_rope(c, m, err);
	if (st != BG_OK)
		return st;

	/* activations for a pass of up to cap_tok tokens, and the fixed scratch buffers */
	st = alloc_activations(c, CUDA_DEFAULT_CAP_TOK, err);
	if (st == BG_OK)
		st = dev_alloc((void **)&c->partial, CUDA_PARTIAL_FLOATS * 4, "attention scratch",
			       err);
	/* one counter a (token, KV head) of a pass or a decode graph's padded batch */
	size_t n_cnt = (size_t)(c->cap_tok > CUDA_GRAPH_MAX_B ? c->cap_tok : CUDA_GRAPH_MAX_B) *
		       (size_t)c->attn_kvh;
	if (st == BG_OK)
		st = dev_alloc((void **)&c->attn_cnt, n_cnt * 4, "attention merge counters", err);
	if (st == BG_OK)
		CUDA_CHECK(cudaMemsetAsync(c->attn_cnt, 0, n_cnt * 4, c->stream));
	if (st == BG_OK)
		st = dev_alloc((void **)&c->bar, GPU_GRID_BAR_WORDS * sizeof(unsigned),
			       "the GEMV chain's barrier", err);
	if (st == BG_OK)
		CUDA_CHECK(
		    cudaMemsetAsync(c->bar, 0, GPU_GRID_BAR_WORDS * sizeof(unsigned), c->stream));
	if (st == BG_OK)
		st = dev_alloc((void **)&c->sample_work,
			       gpu_sample_work_floats(CUDA_SAMPLE_GROUP, (int)hp->n_vocab) * 4,
			       "sampling scratch", err);
	if (st == BG_OK)
		st = sout_reserve(c, CUDA_GRAPH_MAX_B, err);
	if (st != BG_OK)
		return st;
	c->hist_cnt = (int32_t *)calloc(hp->n_vocab, sizeof(int32_t));
	c->hist_ids = (int32_t *)malloc(hp->n_vocab * sizeof(int32_t));
	if (!c->hist_cnt || !c->hist_ids)
		return bg_fail(err, BG_ERR_NOMEM, "out of host memory");
	/* logits for a first batch of decode rows; grown when a batch wants more */
	{
		size_t cap = 0, capx = 0;
		void *lp = NULL;
		c->logits_cap = 256;
		st = dev_grow(c, &lp, &cap, (size_t)c->logits_cap * hp->n_vocab * 4, "the logits",
			      err);
		c->logits = (float *)lp;
		if (st == BG_OK)
			st = dev_grow(c, &c->xl, &capx,
				      (size_t)c->logits_cap * hp->n_embd * gpu_dtype_size(c->dt),
				      "the LM head input", err);
		if (st != BG_OK)
			return st;
		c->logits_cap = (int32_t)(cap / ((size_t)hp->n_vocab * 4));
		int32_t capx_rows = (int32_t)(capx / ((size_t)hp->n_embd * gpu_dtype_size(c->dt)));
		if (capx_rows < c->logits_cap)
			c->logits_cap = capx_rows;
	}

	/* the recurrent-state slots, before the KV pool takes its share of what is free */
	if ((st = state_create(c, m, cfg->n_state_slots, err)) != BG_OK)
		return st;
	/* the KV pool: what is asked, or mem_fraction of what is free now */
	size_t es = gpu_dtype_size(c->dt);
	c->block_bytes = (size_t)c->block_elems * es;
	size_t free_b = 0, total_b = 0;
	CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
	int64_t n_blocks;
	if (cfg->kv_tokens > 0) {
		n_blocks = (cfg->kv_tokens + c->block_size - 1) / c->block_size;
		if ((double)n_blocks * (double)c->block_bytes > (double)free_b)
			return bg_fail(err, BG_ERR_NOMEM,
				       "a KV pool of %lld tokens needs %.2f GiB "
				       "but only %.2f GiB of device memory are free",
				       (long long)cfg->kv_tokens,
				       (double)n_blocks * (double)c->block_bytes / 1073741824.0,
				       (double)free_b / 1073741824.0);
	} else {
		float f = cfg->mem_fraction > 0.0f && cfg->mem_fraction <= 1.0f ? cfg->mem_fraction
										: 0.9f;
		n_blocks = (int64_t)((double)free_b * f / (double)c->block_bytes);
	}
	/* slot indices are int32 */
	int64_t max_blocks = 0x7fffffff / c->block_size - 1;
	if (n_blocks > max_blocks)
		n_blocks = max_blocks;
	if (n_blocks < 1)
		return bg_fail(err, BG_ERR_NOMEM,
			       "no device memory is left for the KV cache "
			       "(%.2f GiB free after %.2f GiB of weights)",
			       (double)free_b / 1073741824.0,
			       (double)c->weight_bytes / 1073741824.0);
	c->n_blocks = (int32_t)n_blocks;
	c->scratch_block = (int32_t)n_blocks;
	/* one block more than the engine sees: the padding rows of decode graphs write it */
	c->kv_bytes = (size_t)(n_blocks + 1) * c->block_bytes;
	st = dev_alloc(&c->kv, c->kv_bytes, "the KV cache", err);
	if (st != BG_OK)
		return st;

	const char *gl = getenv("BG_CUDA_GRAPH_LOG");
	if (gl && *gl) {
		c->graph_log = strcmp(gl, "-") == 0 ? stderr : fopen(gl, "a");
		if (!c->graph_log)
			return bg_fail(err, BG_ERR_IO, "BG_CUDA_GRAPH_LOG %s: cannot open it", gl);
		/* what decides which passes fuse (run_pass), for the census's readers */
		fprintf(c->graph_log,
			"batchgen-cuda graph census: gemv prologue bytes %zu, gemv chain %d\n",
			c->gemv_xs, c->chain ? 1 : 0);
		fflush(c->graph_log);
	}
	const char *ge = getenv("BG_CUDA_GRAPHS");
	c->graphs_on = !(ge && strcmp(ge, "0") == 0);
	if (c->graphs_on) {
		c->graph_ctx = hp->n_ctx_train && hp->n_ctx_train < CUDA_GRAPH_MAX_CTX
				   ? (int)hp->n_ctx_train
				   : CUDA_GRAPH_MAX_CTX;
		c->gmeta_cap = 6 * (size_t)CUDA_GRAPH_MAX_B +
			       (size_t)CUDA_GRAPH_MAX_B *
				   ((c->graph_ctx + c->block_size - 1) / c->block_size) +
			       1;
		for (int i = 0; i < 2; i++) {
			CUDA_CHECK(cudaEventCreateWithFlags(&c->gmeta[i].ev, cudaEventDisableTiming));
			CUDA_CHECK(cudaMallocHost((void **)&c->gmeta[i].h, c->gmeta_cap * 4));
		}
		st = dev_alloc((void **)&c->d_gmeta, c->gmeta_cap * 4, "graph metadata", err);
		if (st != BG_OK)
			return st;
	}
	CUDA_CHECK(cudaStreamSynchronize(c->stream));

	b->n_vocab = (int32_t)hp->n_vocab;
	b->block_size = c->block_size;
	b->n_blocks = c->n_blocks;
	b->block_bytes = c->block_bytes;
	b->n_state_slots = c->n_state_slots;
	b->state_bytes = c->state_floats * 4;
	snprintf(b->device, sizeof b->device,
		 "%.64s (sm_%d%d, %d SMs, %.1f GiB), %s weights and KV", prop.name, prop.major,
		 prop.minor, prop.multiProcessorCount, (double)total_b / 1073741824.0,
		 gpu_dtype_name(c->dt));
	return BG_OK;
}

extern "C" enum bg_status gpu_plugin_create(const struct model *m, const struct backend_config *cfg,
					    struct backend **out, struct bg_err *err)
{
	*out = NULL;
	int n_dev = 0;
	cudaError_t e = cudaGetDeviceCount(&n_dev);
	if (e != cudaSuccess || n_dev == 0) {
		cudaGetLastError();
		if (e == cudaErrorInsufficientDriver) {
			/* Name both versions: "update the driver" is the whole fix, and a user
			 * cannot act on it without knowing which driver is there. */
			char why[BG_ERR_MSG];
			driver_too_old(why, sizeof why);
			return bg_fail(err, BG_ERR_DEVICE, "%s", why);
		}
		return bg_fail(err, BG_ERR_DEVICE, "no CUDA device is available (%s)",
			       e != cudaSuccess ? cudaGetErrorString(e)
						: "the driver reports none");
	}
	if (cfg->device_index < 0 || cfg->device_index >= n_dev)
		return bg_fail(err, BG_ERR_DEVICE, "CUDA device %d does not exist (%d found)",
			       cfg->device_index, n_dev);
	if (cfg->block_size <= 0)
		return bg_fail(err, BG_ERR_INVALID, "the KV block size must be positive");
	enum bg_status st = check_model(m, err);
	if (st != BG_OK)
		return st;
	struct cuda_ctx *c = (struct cuda_ctx *)calloc(1, sizeof *c);
	struct backend *b = (struct backend *)calloc(1, sizeof *b);
	if (!c || !b) {
		free(c);
		free(b);
		return bg_fail(err, BG_ERR_NOMEM, "out of host memory");
	}
	c->device = cfg->device_index;
	st = create_ctx(c, m, cfg, b, err);
	if (st != BG_OK) {
		cuda_destroy(c);
		free(b);
		return st;
	}
	b->ops = &cuda_ops;
	b->ctx = c;
	b->name = "cuda";
	b->caps = BACKEND_CAP_ASYNC;
	*out = b;
	return BG_OK;
}
