/* gpu_ops: the launchers of the CUDA backend's kernels, one .cu file per operation
 * (internal, C++ only; the tests in tests/gpu_test_*.cu call them directly).
 *
 * Every launcher enqueues its work on `stream`, checks the launch with cudaGetLastError
 * and returns that error (cudaSuccess when the launch was accepted). Shapes are given as
 * [rows, cols], row-major. Storage-typed buffers (void *) hold elements of `dt`.
 */
#ifndef BG_GPU_OPS_CUH
#define BG_GPU_OPS_CUH

#include "gpu/gpu_common.cuh"

extern "C" {
#include "sample/sampler.h"
}

/* ---- weights.cu ---- */

/* dst[n] (dt) = src[n] converted from GGUF type src_type (0 f32, 1 f16, 8 q8_0, 30
 * bf16; n % 32 == 0 for q8_0). Q8_0 is d * q rounded to fp32, then to dt. */
cudaError_t gpu_convert_weights(const void *src, int src_type, uint64_t n, void *dst,
				enum gpu_dtype dt, cudaStream_t stream);
/* dst[n] (dt) = seeded normal values * stddev, a pure function of (seed, tensor, i);
 * stddev == 0 fills with 1 (norm weights). */
cudaError_t gpu_synth_weights(void *dst, enum gpu_dtype dt, uint64_t n, uint64_t seed,
			      uint64_t tensor, float stddev, cudaStream_t stream);

/* ---- dequant.cu ---- */

/* Whether gpu_dequant_weights takes GGUF type src_type (the block types of model/quant.h:
 * Q4_0 ... IQ4_XS, Q8_0 included). */
bool gpu_dequant_supported(int src_type);
/* dst[n] (dt) = the n elements of the blocks at src (device memory, GGUF type src_type),
 * dequantized bitwise as quant_dequant does, then rounded to dt. n must be a whole number
 * of blocks (cudaErrorInvalidValue otherwise, or for an unsupported type). */
cudaError_t gpu_dequant_weights(const void *src, int src_type, uint64_t n, void *dst,
				enum gpu_dtype dt, cudaStream_t stream);
/* x[t, :] = row id of the [n_vocab, n_embd] matrix of blocks at embd (GGUF type src_type,
 * gpu_dequant_supported, n_embd a whole number of blocks), dequantized in fp32 bitwise as
 * quant_dequant (not rounded to a storage type); ids as gpu_embed resolves them. */
cudaError_t gpu_embed_blocks(const void *embd, int src_type, const int32_t *tokens,
			     const struct sampler_result *drawn, int n_tok, int n_vocab,
			     int n_embd, float *x, cudaStream_t stream);

/* A weight matrix kept block-quantized on the device (the resident path, README "GPU
 * memory"): its rows [0, n_out) are up to GPU_QMAT_PARTS parts in order (a fused Q|K|V or
 * gate|up: each part is one GGUF tensor and keeps its own type; Q4_K_M files have Q6_K V
 * rows beside Q4_K Q and K rows), part i rows[i] rows of
 * gpu_qtype_row_bytes(type[i], n_in) bytes each at p[i] (device memory). n_part == 0: the
 * matrix is dense, of the storage type (the pointer beside this descriptor). A part may be
 * BF16 rows (type 30, 16-byte aligned: a part of a type the GEMV does not read, such as a
 * 70B Q4_K_M file's Q5_K V rows, dequantized at load; gpu_qtype_row_bytes(30, n) = 2 n). */
#define GPU_QMAT_PARTS 3
struct gpu_qmat {
	int n_part;
	int type[GPU_QMAT_PARTS]; /* GGUF ids: 8 Q8_0, 12 Q4_K, 14 Q6_K (gpu_qtype_resident) */
	int rows[GPU_QMAT_PARTS];
	const void *p[GPU_QMAT_PARTS];
};
/* Whether a weight of GGUF type t with rows of n_in elements may stay block-quantized on
 * the device: Q8_0, Q4_K or Q6_K, n_in a whole number of blocks (32, 256, 256). */
bool gpu_qtype_resident(int t, int64_t n_in);
/* Bytes of a row of n_in elements of the resident type t, or of a BF16 part (t 30, n_in a
 * multiple of 32); 0 for other types. */
size_t gpu_qtype_row_bytes(int t, int64_t n_in);

/* ---- embed.cu ---- */

/* x[t, :] = embd[id, :] for t < n_tok; embd is [n_vocab, n_embd] of dt. id = tokens[t]
 * when >= 0 (checked by the host); else the token drawn[-1 - tokens[t]] of a sampling
 * call's results on the device (backend_seq.prev_rows resolved without the host), 0 when
 * that id lies outside [0, n_vocab) (backend_seq_token's rule). drawn may be NULL when no
 * token is negative. */
cudaError_t gpu_embed(const void *embd, enum gpu_dtype dt, const int32_t *tokens,
		      const struct sampler_result *drawn, int n_tok, int n_vocab, int n_embd,
		      float *x, cudaStream_t stream);

/* ---- rmsnorm.cu ---- */

/* For output row i < n_out, input row r = rows ? rows[i] : i:
 *   s = x[r] + (delta ? delta[r] : 0);  if (write_back) x[r] = s;
 *   out[i] = s / sqrt(mean(s^2) + eps) * w   (out of dt, [n_out, n]);
 * w NULL: out[i] = s, no norm (olmo2's layers have no pre-norms; hp.no_pre_norms). */
cudaError_t gpu_add_rmsnorm(float *x, const float *delta, const float *w, float eps,
			    const int32_t *rows, int n_out, int n, bool write_back, void *out,
			    enum gpu_dtype dt, cudaStream_t stream);
/* out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * w (out of dt, [n_rows, n]) for the rows of x
 * [n_rows, ldx] fp32, n wide: gpu_add_rmsnorm's arithmetic (deepseek2's q_a norm, whose rows
 * lie in a wider buffer). */
cudaError_t gpu_rmsnorm_rows(const float *x, int64_t ldx, const float *w, float eps, int n_rows,
			     int n, void *out, enum gpu_dtype dt, cudaStream_t stream);

/* The same with a LayerNorm (command-r, cohere2; hp.layer_norm): with s as above,
 *   out[i] = (s - mean) * (1 / sqrt(var + eps)) * w,
 * mean = sum(s) / n rounded to fp32 (the sum in double), var = sum((s - mean)^2) / n in
 * double, as the CPU backend's layernorm. w must not be NULL. */
cudaError_t gpu_add_layernorm(float *x, const float *delta, const float *w, float eps,
			      const int32_t *rows, int n_out, int n, bool write_back, void *out,
			      enum gpu_dtype dt, cudaStream_t stream);

/* ---- bias.cu ---- */

/* x[t, i] += bias[i] for t < n_tok, i < width; x is [n_tok, ld] fp32. */
cudaError_t gpu_bias_add(float *x, int ld, const float *bias, int n_tok, int width,
			 cudaStream_t stream);

/* ---- rope.cu ---- */

/* The RoPE digit tables (rope.cu): rows of [half] (cos, sin) fp32 pairs, GPU_ROPE_ROWS0 rows
 * for the position's low 11 bits, then GPU_ROPE_ROWS1 for bits 11-20, then GPU_ROPE_ROWS2
 * for bits 21-30; GPU_ROPE_TABLE_FLOATS(half) floats in all. */
#define GPU_ROPE_ROWS0 2048
#define GPU_ROPE_ROWS1 1024
#define GPU_ROPE_ROWS2 1024
#define GPU_ROPE_TABLE_FLOATS(half) \
	((size_t)(GPU_ROPE_ROWS0 + GPU_ROPE_ROWS1 + GPU_ROPE_ROWS2) * (size_t)(half) * 2)
/* Fills table (host memory, GPU_ROPE_TABLE_FLOATS(half) floats) from freq ([half] angles
 * per position, core/model/arch.h's arch_rope_freqs): cos and sin of d * 2^shift * freq[i]
 * computed in double, rounded to fp32; row 0 of each digit is exactly (1, 0). */
extern "C" void gpu_rope_table_fill(const double *freq, int half, float *table);

/* Rotates, in place, the first n_head + n_head_kv heads of each row of qkv ([n_tok, ld],
 * fp32: q heads then k heads, head_dim each) by position pos[t] (0 <= pos[t], int32). Pairs
 * are (2i, 2i+1) for llama (neox == false) or (i, i + rope_dim/2) for NeoX; only the first
 * rope_dim dimensions of each head rotate; theta = pos * freq[i], its cos and sin composed
 * from table (device copy of gpu_rope_table_fill's, for rope_dim / 2), times mscale. Bitwise
 * the CPU backend's cos/sin for pos < 2048, within ~2 fp32 ulp beyond. */
cudaError_t gpu_rope(float *qkv, int ld, const int32_t *pos, int n_tok, int n_head, int n_head_kv,
		     int head_dim, int rope_dim, const float *table, float mscale, bool neox,
		     cudaStream_t stream);

/* ---- head_norm.cu ---- */

/* In place: each query head (first n_head heads of a qkv row) and key head (next
 * n_head_kv) becomes x / sqrt(mean(x^2) + eps) * w, w = qw or kw ([hd] fp32). */
cudaError_t gpu_head_rmsnorm(float *qkv, int ld, int n_tok, int n_head, int n_head_kv, int hd,
			     const float *qw, const float *kw, float eps, cudaStream_t stream);

/* In place, a LayerNorm per head with the head's own weight row (Command R+,
 * hp.qk_norm_heads): query head h of each qkv row becomes (x - mean) / sqrt(var + eps) *
 * qw[h * hd ...] (qw [n_head][hd]), key head h the same with kw [n_head_kv][hd]; mean and
 * var as gpu_add_layernorm's. */
cudaError_t gpu_head_layernorm(float *qkv, int ld, int n_tok, int n_head, int n_head_kv, int hd,
			       const float *qw, const float *kw, float eps, cudaStream_t stream);

/* The same over whole rows (olmo2, hp.qk_norm_full), in place: each token's query columns
 * [0, n_q) become x / sqrt(mean(x^2) + eps) * qw ([n_q] fp32) and its key columns
 * [n_q, n_q + n_kv) the same with kw ([n_kv]); the sum of squares in double, as the CPU
 * backend's rmsnorm. One block per (token, Q or K). */
cudaError_t gpu_qk_rmsnorm_rows(float *qkv, int ld, int n_tok, int n_q, int n_kv, const float *qw,
				const float *kw, float eps, cudaStream_t stream);

/* ---- scale.cu ---- */

/* x[i] *= s for i < n (fp32). */
cudaError_t gpu_scale(float *x, int64_t n, float s, cudaStream_t stream);
/* x[i] = cap * tanh(x[i] / cap) for i < n (fp32; soft-capping). */
cudaError_t gpu_softcap(float *x, int64_t n, float cap, cudaStream_t stream);

/* ---- kv_write.cu ---- */

/* The KV pool of one layer: element (block b, k or v, slot s, dim d) lives at
 * base + b * block_stride + (is_v ? v_offset : 0) + s * kv_dim + d (elements of dt). */
struct gpu_kv_layer {
	void *base;
	int64_t block_stride;
	int64_t v_offset;
	int block_size;
	int kv_dim; /* n_head_kv * head_dim */
};

/* Copies K (qkv[t, k_col : k_col + kv_dim]) and V (qkv[t, v_col : ...]) of token t into
 * slot slots[t] (= block * block_size + offset) of the layer's pool, converted to dt. */
cudaError_t gpu_kv_write(const float *qkv, int ld, int k_col, int v_col, const int32_t *slots,
			 int n_tok, struct gpu_kv_layer kv, enum gpu_dtype dt, cudaStream_t stream);

/* ---- qkv_post.cu ---- */

/* What follows the QKV projection of a layer, for the n_tok rows of qkv ([n_tok, ld] fp32:
 * n_head query heads, n_head_kv key heads, n_head_kv value heads, head_dim columns each,
 * ld >= their total): */
struct gpu_qkv_post_args {
	float *qkv;
	int ld, n_tok, n_head, n_head_kv, head_dim;
	const float *bias; /* NULL, or [(n_head + 2 n_head_kv) head_dim]: added to every row */
	const float *q_norm, *k_norm; /* both NULL, or [head_dim] each: per-head RMS norms */
	float eps;
	const int32_t *pos; /* [n_tok] */
	int rope_dim;	    /* < 2: no rotation */
	const float *table; /* gpu_rope_table_fill's table for rope_dim / 2 (device) */
	float mscale;
	bool neox;
	const int32_t *slots;	 /* [n_tok] KV slot of each row */
	struct gpu_kv_layer kv; /* kv.kv_dim == n_head_kv * head_dim */
	/* mistral3's attention temperature (model.h's attn_temp_*; temp_scale 0: none): every
	 * query head of row t times qp_attn_temp(pos[t]) after RoPE, as the CPU backend's
	 * arch_attn_temp rounds it */
	float temp_scale, temp_offset;
	uint32_t temp_floor;
	/* gemma4: each value head RMS-normalized (no weight: head_norm.cu's expression with
	 * weights 1) before its store; the q/k/v columns of qkv keep their unnormed V */
	bool v_norm;
	/* the q/k head norms after RoPE (and the temperature) instead of before it, the key
	 * heads stored once normed (model.h's qk_norm_after_rope): hunyuan with q_norm /
	 * k_norm, llama4 without them (weights 1); the QKV epilogue does not take it */
	bool norm_post_rope;
};
/* In one launch, bitwise what these do one after another: gpu_bias_add (when bias),
 * gpu_head_rmsnorm (when q_norm), gpu_rope (when rope_dim >= 2; with norm_post_rope the
 * rotation before the head norm), the query heads times
 * their position's temperature (when temp_scale != 0), then gpu_kv_write of the
 * key and value heads into their slots (converted to dt; value heads normalized first when
 * v_norm). qkv is left as the first three
 * leave it. cudaErrorInvalidValue for n_tok > 65535, a kv_dim that is not n_head_kv *
 * head_dim, or one norm without the other. */
cudaError_t gpu_qkv_post(const struct gpu_qkv_post_args *a, enum gpu_dtype dt,
			 cudaStream_t stream);

/* ---- mla.cu ---- */

/* deepseek2's latent attention (model.h's mla) between its projections and attention, for
 * n_tok rows (core/cpu/backend_cpu.c's mla_qkv is the reference):
 *   kv [n_tok, ldkv] fp32: [c (n_lora), k_pe (rope_dim)] of each row (wkv_a's output);
 *   qr [n_tok, ldqr] fp32: n_head heads of [q_nope (nope), q_pe (rope_dim)] (raw queries).
 * The key row [rmsnorm(c) * kv_norm, rope(k_pe)] (head_dim = n_lora + rope_dim wide, the
 * layer's only K/V row: V is read from it) is stored at slots[t] of kv (converted to dt);
 * each head's q_nope goes to qn [n_tok, n_head nope] of dt (attn_k_b's input) and its
 * rotated q_pe to q [n_tok, ldq] fp32 at columns h head_dim + n_lora (the first n_lora of
 * the head are attn_k_b's output). The norm and the rotation are qkv_post's expressions. */
struct gpu_mla_prep_args {
	const float *kv, *qr;
	int ldkv, ldqr;
	int n_tok, n_head, n_lora, nope, rope_dim;
	const float *kv_norm; /* [n_lora] fp32 */
	float eps;
	const int32_t *pos, *slots; /* [n_tok] each */
	const float *table;	    /* gpu_rope_table_fill's for rope_dim / 2 */
	float mscale;
	bool neox;
	struct gpu_kv_layer kv_out; /* kv_dim == n_lora + rope_dim */
	void *qn;		    /* [n_tok, n_head nope] of dt */
	float *q;		    /* [n_tok, ldq] */
	int ldq;
};
cudaError_t gpu_mla_prep(const struct gpu_mla_prep_args *a, enum gpu_dtype dt, cudaStream_t stream);

/* ---- attention.cu ---- */

struct gpu_attn_args {
	const float *q; /* [n_tok, ldq]: head h at columns [h*hd, (h+1)*hd) */
	int ldq;
	struct gpu_kv_layer kv;
	const int32_t *tok_pos; /* [n_tok] position of each query token */
	const int32_t *tok_bt;	/* [n_tok] offset of the token's block table in bt */
	const int32_t *bt;	/* block tables, concatenated */
	int n_tok, n_head, n_head_kv, head_dim;
	float scale;   /* the score scale: 1/sqrt(head_dim) unless the model says otherwise */
	float softcap; /* > 0: scores become softcap * tanh(score / softcap) */
	int window;    /* > 0: a query at p sees keys (p - window, p] only, or with chunked */
	bool chunked;  /* (llama4) keys [floor(p / window) * window, p]: its chunk's */
	void *out;   /* [n_tok, n_head * head_dim] of dt */
	int max_ctx; /* max over tokens of pos + 1 */
	/* How the tokens are covered (together, every token exactly once):
	 *  tiles[2 * i], tiles[2 * i + 1]: first token and count (<= GPU_ATTN_TILE) of a run
	 *  of consecutive positions of one sequence (a context chunk), done by the tiled
	 *  kernel, which loads each K/V tile once for the whole run;
	 *  list[n_list]: the other tokens (decode steps), split-K: one block per KV head (all
 *  its query heads together) where the GQA decode kernel applies, else per query head.
	 * With tiles == NULL and list == NULL every token goes to the per-query kernel. */
	const int32_t *tiles;
	int n_tiles;
	const int32_t *list;
	int n_list;
	int prefill; /* the tiles' kernel: GPU_ATTN_PREFILL_AUTO or _CUDA_CORES (tests) */
	/* NULL, or [n_list * n_head_kv] ints, all 0 before the call (a call leaves them 0):
	 * then the GQA decode kernel's last block of each (token, KV head) merges its splits
	 * itself (one graph node less a layer; bitwise the separate merge kernel's result),
	 * where that kernel takes the shape. */
	int *merge_counters;
	/* the GQA decode kernel as a programmatic dependent launch (gpu/pdl.cuh): only on a
	 * device of compute capability >= 9.0; the other kernels launch plainly */
	bool pdl;
	/* NULL, or [n_head] fp32 (gpt-oss's attention sinks): head h's softmax gets one more
	 * logit sinks[h] in its denominator only (no value), the max taken over the keys and
	 * the sink: out = sum_k e^(s_k - m) v_k / (e^(sink - m) + sum_k e^(s_k - m)). Split
	 * contexts take it once, at the merge. */
	const float *sinks;
};

/* GPU_ATTN_PREFILL_AUTO: tiles of 16-bit K/V with heads of 16..128 dimensions (multiples
 * of 16) go to the tensor-core kernel, the others to the CUDA-core one, which
 * GPU_ATTN_PREFILL_CUDA_CORES forces (the tests compare the two). */
enum { GPU_ATTN_PREFILL_AUTO = 0, GPU_ATTN_PREFILL_CUDA_CORES = 1 };

/* The largest head gpu_attention takes: deepseek2's latent rows of 576 (kv_lora_rank 512 +
 * 64 rotated; gemma4's global heads are 512). Heads of 257..512 go to the per-query kernel
 * (16 dimensions a lane) and its merge (4 a thread); heads of 513..576 to the per-query
 * kernel (18 a lane) with one split, whatever n_split asks (GPU_ATTN_SPLIT_HEAD). */
#define GPU_ATTN_MAX_HEAD   576
#define GPU_ATTN_SPLIT_HEAD 512 /* the largest head whose context may be split */

#define GPU_ATTN_TILE	  16 /* queries per tile */
#define GPU_ATTN_TILE_MIN 8  /* a chunk shorter than this goes to the per-query kernel */

/* Causal attention of every query token over positions [0, pos] of its sequence, read
 * from the paged pool. The per-query kernel splits a token's context in up to n_split
 * parts (of >= GPU_ATTN_SPLIT_MIN_KEYS keys) when that fills the GPU better (decode), with
 * partial[] as scratch
 * (gpu_attention_partial_floats of the per-query token count). Heads larger than 128 go
 * to the per-query kernel whatever the tiles say, then with one split (n_split is
 * ignored: the scratch was sized for the listed tokens only). */
cudaError_t gpu_attention(const struct gpu_attn_args *a, enum gpu_dtype dt, int n_split,
			  float *partial, cudaStream_t stream);
size_t gpu_attention_partial_floats(int n_tok, int n_head, int head_dim, int n_split);

/* A split of a token's context takes at least GPU_ATTN_SPLIT_MIN_KEYS keys (the kernels
 * leave the splits past a short context empty); gpu_attention_splits says why, and why it
 * chooses no more than GPU_ATTN_SPLIT_MAX. */
#define GPU_ATTN_SPLIT_MIN_KEYS 128
#define GPU_ATTN_SPLIT_MAX	128

/* Split count for n_tok per-query tokens of max context max_ctx on n_sm SMs that hold
 * per_sm blocks each of the kernel the shape goes to (gpu_attention_occupancy; one block
 * per KV head for the GQA decode kernel, per query head otherwise): the most splits whose
 * grid fits in one wave of n_sm x per_sm blocks (1 if the unsplit grid already fills it),
 * with >= GPU_ATTN_SPLIT_MIN_KEYS keys of max_ctx a split, <= GPU_ATTN_SPLIT_MAX, and
 * partial scratch under max_partial_floats. A pure function of its arguments. */
int gpu_attention_splits(int n_tok, int n_head, int n_head_kv, int head_dim, enum gpu_dtype dt,
			 int max_ctx, int n_sm, int per_sm, size_t max_partial_floats);
/* *per_sm = blocks an SM holds of the per-query decode kernel that gpu_attention launches
 * for this model shape (cudaOccupancyMaxActiveBlocksPerMultiprocessor on its instance);
 * ask once per model, at backend init. cudaErrorInvalidValue for heads gpu_attention
 * refuses. */
cudaError_t gpu_attention_occupancy(enum gpu_dtype dt, int n_head, int n_head_kv, int head_dim,
				    int *per_sm);

/* ---- swiglu.cu ---- */

/* out[t, i] = act(gu[t, i]) * gu[t, n_ff + i]; gu is [n_tok, 2*n_ff] fp32, out of dt; act
 * is silu, or GELU (tanh form) when gelu. */
cudaError_t gpu_swiglu(const float *gu, int n_tok, int n_ff, void *out, enum gpu_dtype dt,
		       bool gelu, cudaStream_t stream);
/* step35's clamped SwiGLU (model.h clamp_shexp: the shared expert, the dense FFN): as
 * gpu_swiglu with act(gate) * up = gpu_glu_clamp(gate, up, limit) (gpu/glu.cuh);
 * cudaErrorInvalidValue unless limit > 0. */
cudaError_t gpu_swiglu_clamp(const float *gu, int n_tok, int n_ff, float limit, void *out,
			     enum gpu_dtype dt, cudaStream_t stream);

/* ---- xielu.cu ---- */

/* apertus's FFN activation (core/model/model.h, not gated): out[t, i] = xielu(u[t, i]) with
 * p = {an, ap, beta, eps} (model_layer.xielu, already transformed), the CPU backend's fp32
 * roundings: v > 0: (ap * v) * v + beta * v, else (expm1f(fminf(v, eps)) - v) * an +
 * beta * v. u is [n_tok, n_ff] fp32, out [n_tok, n_ff] of dt. */
cudaError_t gpu_xielu(const float *u, int n_tok, int n_ff, const float p[4], void *out,
		      enum gpu_dtype dt, cudaStream_t stream);

/* nemotron_h's FFN activation (model.h's relu2, not gated): out[t, i] = r * r, r =
 * max(u[t, i], 0) in fp32, as the CPU backend; u [n_tok, n_ff] fp32, out of dt. */
cudaError_t gpu_relu2(const float *u, int n_tok, int n_ff, void *out, enum gpu_dtype dt,
		      cudaStream_t stream);

/* ---- shortconv.cu ---- */

/* lfm2's short-convolution block of one layer (core/model/model.h's conv_l), for the
 * n_tok rows of bcx ([n_tok, ld] fp32: in_proj's B, C and x, n_embd columns each): */
#define GPU_CONV_L_MAX 8 /* MODEL_CONV_L_MAX */
struct gpu_shortconv_args {
	const float *bcx;
	int ld, n_tok, n_embd, conv_l;
	const float *w;		/* [n_embd, conv_l] fp32 taps */
	const int32_t *slots;	/* [n_tok] cache slot of each row */
	const int32_t *pos;	/* [n_tok] its position */
	const int32_t *tok_bt;	/* [n_tok] offset of its sequence's block table in bt */
	const int32_t *bt;	/* block tables, concatenated */
	struct gpu_kv_layer kv; /* the layer's bx rows: kv_dim == n_embd (no V part) */
	void *out;		/* [n_tok, n_embd] of dt: C * the conv, out_proj's input */
};
/* Two launches: every row's bx = B * x into its slot (of dt), then each row's conv over
 * the cached bx rows of positions p - conv_l + 1 .. p (earlier passes' and this one's;
 * none before 0), times C. cudaErrorInvalidValue for conv_l outside [1, GPU_CONV_L_MAX]
 * or kv.kv_dim != n_embd. */
cudaError_t gpu_shortconv(const struct gpu_shortconv_args *a, enum gpu_dtype dt,
			  cudaStream_t stream);

/* ---- deltanet.cu ---- */

/* qwen35's gated delta net (core/model/model.h's gdn_*) between the layer's projection
 * GEMM and ssm_out, as the CPU backend's cpu_deltanet.h computes it (the same fp32
 * operations in the same order, no FMA contraction; the sums of squares and CUDA's expf
 * and logf may differ in the last bits). proj's rows (ld apart, fp32) are [u (CD = 2 nk d
 * + nv d): q | k | v, z (VD = nv d), beta (nv), alpha (nv)]. Sequence i of the pass is
 * rows seq[3 i] .. + seq[3 i + 1] - 1 in order, its state at state + seq[3 i + 2] *
 * state_stride (the layer's: [CD][conv - 1] conv rows, then per V head a d x d matrix,
 * row j = S's column j). */
struct gpu_gdn_args {
	const float *proj;
	int ld, n_tok, n_seq;
	const int32_t *seq; /* [n_seq][3]: first row, rows, state slot (device) */
	float *state;	    /* the slots' base, offset to this layer's values */
	int64_t state_stride;
	int d, nk, nv, conv;
	float eps;
	const float *conv_w; /* [CD][conv] fp32 */
	const float *dt_a;   /* [2 nv] fp32: ssm_dt.bias, then ssm_a */
	const float *norm;   /* [d] fp32 ssm_norm */
	float *cbuf;	     /* [n_tok][CD] fp32 scratch: the conv's output, then Q/K normed */
	float *obuf;	     /* [n_tok][VD] fp32 scratch: the heads' outputs */
	void *out;	     /* [n_tok][VD] of dt: ssm_out's input */
	int k_grouped;	     /* qwen3next: V head h reads K head h / (nv / nk), else h % nk */
};
/* Four launches: the conv (a thread a channel, the sequence's tokens in order), the Q/K
 * L2 norms, the recurrence (a block per (sequence, V head), a thread per state row), the
 * gated norm into out. cudaErrorInvalidValue for conv outside [2, GPU_CONV_L_MAX], d above
 * 1024 or nv not a multiple of nk. */
cudaError_t gpu_gdn(const struct gpu_gdn_args *a, enum gpu_dtype dt, cudaStream_t stream);
/* qwen35's gated attention: each qkv row (ld apart, fp32) [per head q | gate (2 n_head hd)
 * | K | V (n_kv each)] rewritten as [Q | K | V] (what gpu_qkv_post reads), the gates into
 * gate [n_tok][n_head hd] (fp32); scratch holds [n_tok][2 n_head hd + 2 n_kv] fp32. */
cudaError_t gpu_q_gate_split(float *qkv, int ld, int n_tok, int n_head, int hd, int n_kv,
			     float *scratch, float *gate, cudaStream_t stream);
/* attn [n_tok][n_q] of dt times sigmoid(gate) elementwise (gate fp32, the CPU's order) */
cudaError_t gpu_attn_gate(void *attn, const float *gate, int n_tok, int n_q, enum gpu_dtype dt,
			  cudaStream_t stream);
/* step35's head-wise attention gate (model.h attn_gate): attn [n_tok][n_head hd] of dt, head
 * h of token t times sigmoid(gate[t n_head + h]) (gate fp32 [n_tok][n_head]; the product in
 * fp32 as gpu_attn_gate's, the CPU backend's head_gate) */
cudaError_t gpu_head_gate(void *attn, const float *gate, int n_tok, int n_head, int hd,
			  enum gpu_dtype dt, cudaStream_t stream);
/* ---- ssm.cu ---- */

/* granitehybrid's Mamba2 block of one layer (core/model/model.h's ssm_* fields, the CPU
 * backend's cpu_ssm.c), for the n_tok rows of zxbcdt ([n_tok, ld] fp32: ssm_in's z (D),
 * xBC (C = D + 2 G N), dt (H) columns): */
struct gpu_ssm_args {
	const float *zxbcdt;
	int ld, n_tok;
	int d_conv, D, H, G, N;
	float eps;
	const float *w;	     /* fp32: conv taps [C, d_conv], conv bias [C], dt bias, A, D skip
			      * [H] each, norm [D] */
	const int32_t *runs; /* [3 n_runs]: a sequence's first row, rows, state slot */
	int n_runs;
	float *state; /* slot s's layer state at state + s state_floats + layer_off: the conv
		       * rows [d_conv - 1, C], then S [H, D / H, N] */
	size_t state_floats, layer_off;
	float *xbc; /* scratch [n_tok, C] fp32: the conv's output */
	float *y;   /* scratch [n_tok, D] fp32: the scan's output */
	void *out;  /* [n_tok, D] of dt: ssm_out's input */
	bool no_norm; /* falcon-h1 without ssm_norm: out = y * silu(z), no grouped norm */
};
/* Three launches: the conv per (run, channel), the scan per (run, head), the gate and
 * grouped RMS norm per (token, group); each run's state advanced past its rows.
 * cudaErrorInvalidValue for heads not dividing D, groups not dividing the heads, more
 * than 1024 values a head or fewer than 2 taps. */
cudaError_t gpu_ssm(const struct gpu_ssm_args *a, enum gpu_dtype dt, cudaStream_t stream);

/* ---- gemm.cu ---- */

/* y[t, r] = sum_i W[r, i] * x[t, i]: W [n_out, n_in] and x [n_tok, n_in] of dt, y
 * [n_tok, ldy] fp32; fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32). */
cublasStatus_t gpu_gemm(cublasHandle_t h, const void *W, const void *x, float *y, int n_out,
			int n_in, int n_tok, int ldy, enum gpu_dtype dt);
/* gpu_gemm for each of n_heads heads h at once (one cuBLAS strided-batched call; deepseek2's
 * per-head attn_k_b / attn_v_b): y_h[t, r] = sum_i W_h[r, i] * x_h[t, i] with W_h at W +
 * h n_out n_in (the heads' [n_out, n_in] matrices stacked), x_h at x + h sx (rows ldx
 * apart) and y_h at y + h sy (rows ldy apart); strides and leading dimensions in
 * elements; W and x of dt, y of ydt (fp32, or dt: rounded once). */
cublasStatus_t gpu_gemm_heads(cublasHandle_t h, const void *W, const void *x, int ldx, int64_t sx,
			      void *y, enum gpu_dtype ydt, int ldy, int64_t sy, int n_out, int n_in,
			      int n_tok, int n_heads, enum gpu_dtype dt);
/* The same for a resident block-quantized W (q's parts, rows of n_in; x bf16): the rows of
 * all parts in slices of at most scratch_bytes / (2 n_in) rows, each part's share of a
 * slice dequantized into scratch at its row (bf16, gpu_dequant_weights: quant_dequant's
 * values rounded once; a BF16 part copied), then one gpu_gemm a slice into its columns of
 * y: one cuBLAS call for a matrix the scratch holds, a dequantization launch per part. stream must be h's stream (the slices reuse scratch in
 * stream order). *n_calls (when not NULL) gets += the cuBLAS calls made. The scratch's
 * size is the caller's trade: the largest matrix it holds whole (one GEMM), smaller ones
 * cost more, narrower GEMMs and dequantization launches. */
cublasStatus_t gpu_gemm_q(cublasHandle_t h, const struct gpu_qmat *q, const void *x, float *y,
			  int n_in, int n_tok, int ldy, void *scratch, size_t scratch_bytes,
			  int *n_calls, cudaStream_t stream);
/* Whether a model keeps its block-quantized matrices resident (README "GPU memory"):
 * setting "1" always, "0" never; otherwise (unset, or any other value) when its BF16 weights
 * (2 bytes a parameter) would take more than half of free_bytes. A model that fits as BF16
 * keeps cuBLAS on BF16 weights for its passes of more than 8 tokens (the resident path
 * dequantizes every matrix per pass: ~2.3x a decode step's weight traffic at batch > 8 for
 * a Q4_K_M file, ESTIMATE); one that does not fit, or barely, keeps its blocks. */
bool gpu_qres_policy(const char *setting, uint64_t n_params, size_t free_bytes);

/* ---- gemv.cu ---- */

/* The projections of a pass of at most GPU_GEMV_MAX_TOK tokens (decode) as a GEMV that
 * reads each weight once for all tokens, with the RMS norm before it and the gated
 * activation after it fused in (one graph node where there were two or three). */
#define GPU_GEMV_MAX_TOK 8
/* The prologue keeps the normalized inputs of all tokens in dynamic shared memory:
 * n_tok * n_in * sizeof(storage type) bytes, at most GPU_GEMV_XS_BYTES and at most what
 * gpu_gemv_init opted in to on the device: 200 KiB on an H100 (227 KiB a block; 8 tokens
 * of 12800 bf16 inputs: Llama-3-8B's 4096 need 64 KiB at batch 8, 70B's 8192 128 KiB),
 * 162 KiB on an A100, 98 KiB on sm_86/89; GPU_GEMV_XS_DEFAULT (48 KiB less the static
 * bytes) without the opt-in. */
#define GPU_GEMV_XS_BYTES   ((size_t)200 * 1024)
#define GPU_GEMV_XS_DEFAULT ((size_t)48 * 1024 - 64)

struct gpu_gemv_args {
	const void *W; /* [n_out, n_in] of dt, row-major, 16-byte aligned; unread when q.n_part */
	/* q.n_part > 0: W is block-quantized (q's parts, dt must be BF16): each element is
	 * dequantized in fp32 as quant_dequant computes it (not rounded to bf16) and
	 * accumulated in fp32; rows 2i, 2i + 1 (or a QKV epilogue's pair) must lie in one part
	 * (even part sizes do it), gate row j and up row j may not */
	struct gpu_qmat q;
	int n_out, n_in;
	int n_tok; /* 1 ... GPU_GEMV_MAX_TOK */
	/* Input without a prologue (norm == NULL): x [n_tok, ldx] of dt, 16-byte aligned. */
	const void *x;
	int ldx;
	/* The prologue (norm != NULL): token t's input is s = res[r] + (delta ? delta[r] : 0),
	 * r = rows ? rows[t] : t (rows of n_in fp32), normalized as gpu_add_rmsnorm does,
	 * s / sqrt(mean(s^2) + eps) * norm rounded to dt. When res_out != NULL, res_out[r] = s
	 * (one block writes it; res_out must not be res or delta: the other blocks still
	 * read them). */
	const float *res, *delta, *norm;
	const int32_t *rows;
	float eps;
	float *res_out;
	/* Output. glu false: y[t, o] = sum_i W[o, i] in[t, i] (fp32, [n_tok, ldy]). glu true:
	 * n_out = 2 n_ff with the gate rows first, then the up rows; act[t, j] (dt, [n_tok,
	 * n_ff]) = gpu_swiglu's act(gate) * up of those sums, as gpu_swiglu rounds it. */
	float *y;
	int ldy;
	void *act;
	bool glu, gelu;
	/* The QKV epilogue (qkv_post true, glu false): y's n_out = (n_head + 2 n_head_kv)
	 * head_dim columns are a layer's query, key and value heads, and the GEMV does
	 * gpu_qkv_post(&post) on them itself: bias, RoPE at pos[t], Q (and K, V) left in y as
	 * gpu_qkv_post leaves its qkv, K and V rows stored into slots[t] of post.kv, bitwise
	 * what gpu_gemv then gpu_qkv_post compute (the rotation reads the fp32 sum plus the
	 * bias, as gpu_qkv_post reads them from qkv). A warp's two rows are a RoPE pair: (2i,
	 * 2i + 1) of a head, or (i, i + rope_dim / 2) with post.neox. post.qkv, .ld and .n_tok
	 * are not read (y, ldy, n_tok are); head norms (post.q_norm) are refused: they need the
	 * whole head first (qwen3, gemma3 keep gpu_qkv_post). */
	bool qkv_post;
	struct gpu_qkv_post_args post;
	/* a programmatic dependent launch (gpu/pdl.cuh): only on a device of compute
	 * capability >= 9.0 */
	bool pdl;
};
/* Whether gpu_gemv takes n_tok tokens of n_in inputs of dt (with the prologue or not) on
 * a device where gpu_gemv_init gave xs_bytes: 1 <= n_tok <= GPU_GEMV_MAX_TOK, n_in a
 * multiple of 16 / sizeof(dt), and with the prologue n_tok * n_in * sizeof(dt) <=
 * min(xs_bytes, GPU_GEMV_XS_BYTES). A pure function. */
bool gpu_gemv_fits(int n_tok, int n_in, bool prologue, enum gpu_dtype dt, size_t xs_bytes);
/* Whether gpu_gemv takes a->post as its QKV epilogue (a->qkv_post's contract, the other
 * fields of *a as they will be passed; qkv_post itself is not read): no glu, no head norms,
 * an even head_dim, rope_dim <= head_dim and even when >= 2 (with a table), n_out and
 * kv.kv_dim the heads' widths, a KV pool, pos and slots. A pure function; run_pass asks it
 * before it leaves gpu_qkv_post out. */
bool gpu_gemv_qkv_fits(const struct gpu_gemv_args *a);
/* Accumulates in fp32; 16-byte loads of W, each element read once for all tokens; two rows
 * a warp (gate row j and up row j with glu, a RoPE pair with qkv_post), warps spread over
 * up to n_sm blocks of 512 threads (with the prologue each block normalizes the inputs
 * itself). cudaErrorInvalidValue when gpu_gemv_fits(..., GPU_GEMV_XS_BYTES) says no, when
 * the prologue's inputs are more than gpu_gemv_init opted in to (the launch fails), for a
 * misaligned W or x, ldx
 * not a multiple of 16 / sizeof(dt), an odd n_out with glu, or with qkv_post: glu, head
 * norms, an odd head_dim, rope_dim > head_dim or odd (when >= 2), n_out or kv.kv_dim not
 * the heads' widths, no pos or slots. */
cudaError_t gpu_gemv(const struct gpu_gemv_args *a, enum gpu_dtype dt, int n_sm,
		     cudaStream_t stream);
/* A layer's decode attention as a step of gpu_gemv_chain: gpu_attention(&a, dt, n_split,
 * partial) of a pass of at most GPU_CHAIN_ATTN_TOK tokens, all decode steps (no tiles), in
 * a shape gpu_chain_attn_bytes takes, run before GEMV step `at` (0 <= at <= n: after the
 * steps before it, before the ones from it on; one attention an `at`). */
#define GPU_CHAIN_ATTN_TOK 2
struct gpu_chain_attn {
	struct gpu_attn_args a; /* a.pdl is ignored */
	int n_split;
	float *partial;
	int at;
};
/* The steps of one gpu_gemv_chain launch: its kernel's parameter, ~24 KiB (CUDA takes up
 * to 32764 bytes of kernel parameters from 12.1 on, with a driver of r530 or newer; the
 * plugin's CUDA 13 needs r580: README), so that at batch 1 and 2 sixteen llama layers are
 * one launch (issue 17: a node costs what several grid barriers do). */
#define GPU_GEMV_CHAIN_MAX 64 /* GEMVs: 16 llama layers' QKV, O, gate|up and down */
#define GPU_CHAIN_ATTN_MAX 16 /* attentions: theirs */
struct gpu_gemv_chain_args {
	struct gpu_gemv_args step[GPU_GEMV_CHAIN_MAX];
	int n, n_attn;
	struct gpu_chain_attn attn[GPU_CHAIN_ATTN_MAX];
	unsigned *bar;
};
/* The n GEMVs a[0 .. n) (0 <= n <= GPU_GEMV_CHAIN_MAX) and the n_attn attentions
 * attn[0 .. n_attn) among them (0 <= n_attn <= GPU_CHAIN_ATTN_MAX; their `at` increasing),
 * as one cooperative kernel (issue 17: one graph node where there were
 * n + n_attn): its blocks run GEMV step i as gpu_gemv(&a[i]) computes it and attention j as
 * gpu_attention(&attn[j].a, dt, attn[j].n_split, attn[j].partial) does, bitwise (each row's
 * sum is its warp's alone, and each (KV head, token, split) of an attention one part of 128
 * threads of a block, as the attention kernel's block computes it, whatever the grid);
 * between two steps the blocks meet at a grid barrier (gpu/grid_sync.cuh), so a step
 * reads what the steps before it wrote. One step alone is what gpu_gemv or gpu_attention
 * enqueue (with their pdl); otherwise every pdl is ignored (a cooperative launch keeps
 * plain stream order). Each GEMV step is checked as gpu_gemv checks it
 * (cudaErrorInvalidValue), and all steps must share one NT bucket (n_tok 1, 2, 3-4 or
 * 5-8) and be all block-quantized (q.n_part > 0) or all dense; each attention must be one
 * gpu_chain_attn_bytes takes, at in [0, n] and above the one before, and the GEMVs' NT
 * bucket at most GPU_CHAIN_ATTN_TOK, else cudaErrorInvalidValue.
 * bar: GPU_GRID_BAR_WORDS unsigned ints of device memory, zero before the first launch,
 * used by one launch at a time (one stream). The device must support cooperative launches
 * (cudaDeviceProp.cooperativeLaunch; the caller checks); the grid is at most n_sm blocks and at
 * most as many as can be resident at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor
 * x n_sm; 0 of them: cudaErrorCooperativeLaunchTooLarge); its dynamic shared memory the
 * largest prologue's inputs or the attention's bytes (gpu_chain_attn_bytes), which must be
 * within what gpu_gemv_init opted in to (else the launch fails). Valid in a stream capture. */
cudaError_t gpu_gemv_chain(const struct gpu_gemv_args *a, int n, const struct gpu_chain_attn *attn,
			   int n_attn, enum gpu_dtype dt, int n_sm, unsigned *bar,
			   cudaStream_t stream);
/* The bytes of dynamic shared memory gpu_gemv_chain's attention step needs for *a, n_split
 * splits and K/V of dt (4 parts of a block, each a GQA decode block's tiles), or 0 when it
 * does not take it: tiles, no token or more than GPU_CHAIN_ATTN_TOK, f32 K/V, heads of more
 * than 128 dimensions, more than 4 query heads a KV head with heads of <= 64, a shape the
 * GQA decode kernel does not take, a K/V base not 16-byte aligned, or n_split > 1 without
 * a.merge_counters or partial (the chain has no merge kernel). Only the chain kernel's
 * instances of 16-bit storage and NT <= GPU_CHAIN_ATTN_TOK carry the attention: with it in
 * more, ptxas spills at the 128 registers of their 512 threads (issue 17's gates). A pure
 * function. */
size_t gpu_chain_attn_bytes(const struct gpu_attn_args *a, int n_split, const float *partial,
			    enum gpu_dtype dt);
/* The NT bucket of n_tok tokens (1 <= n_tok <= GPU_GEMV_MAX_TOK): 1, 2, 4 or 8; the steps of
 * one gpu_gemv_chain share one. */
int gpu_gemv_bucket(int n_tok);
/* Opts gpu_gemv's prologue kernels in to dynamic shared memory on the current device
 * (cudaFuncSetAttribute; a launch past 48 KiB fails without it): min(GPU_GEMV_XS_BYTES,
 * optin - 1 KiB), optin the device's sharedMemPerBlockOptin; *xs_bytes gets the bytes a
 * launch may then ask (GPU_GEMV_XS_DEFAULT when that is no more, or on an error). Call it
 * once a device before gpu_gemv with the prologue, outside a graph capture (the backend
 * does at start); idempotent. */
cudaError_t gpu_gemv_init(size_t optin, size_t *xs_bytes);

/* ---- sample.cu ---- */

/* One row to sample, as the device sees it (see core/sample/sampler.h for the definition). */
struct gpu_sample_row {
	int32_t logits_row;
	int32_t forced;	   /* >= 0: score this token; -1: sample */
	float temperature; /* <= 0: greedy */
	int32_t top_k;
	float top_p;
	float min_p;
	float rep, pres, freq; /* penalties, already normalized: rep == 1 when disabled */
	int32_t n_top;
	int32_t hist_off; /* penalty entries [hist_off, hist_off + hist_n) */
	int32_t hist_n;
	float u; /* the request's uniform draw (temperature > 0 only) */
};

/* One distinct token of a request's history: bit 0 of flags = seen in the prompt, the
 * rest = count in the output (the CPU sampler's encoding). */
struct gpu_hist_entry {
	int32_t id;
	int32_t cnt;
};

/* out[r] for r < n_rows from logits [*, n_vocab]. work must hold
 * gpu_sample_work_floats(n_rows, n_vocab) floats. */
cudaError_t gpu_sample(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
		       int n_rows, const struct gpu_hist_entry *hist, float *work,
		       struct sampler_result *out, cudaStream_t stream);
size_t gpu_sample_work_floats(int n_rows, int n_vocab);
/* gpu_sample with at most cap candidates on the compacted path (0: every sampled row takes
 * the full-row path; gpu_sample uses the most, 2048); when stats is not NULL, adds the
 * sampled rows finished on the compacted path to stats[0] and the others to stats[1].
 * For tests. */
cudaError_t gpu_sample_cap(const float *logits, int n_vocab, const struct gpu_sample_row *rows,
			   int n_rows, const struct gpu_hist_entry *hist, float *work,
			   struct sampler_result *out, int cap, int *stats, cudaStream_t stream);

/* ---- mask.cu ---- */

/* One constrained row of a sampling call (core/sample/sampler.h's sampler_constraint). */
struct gpu_constrain_row {
	int32_t src_row;  /* the logits row it reads */
	int32_t mask_off; /* its allowed-token bits: words [mask_off, mask_off + (n_vocab + 31)
			     / 32) of masks (bit t % 32 of word t / 32); -1: every token */
	int32_t bias_off; /* its biases: entries [bias_off, bias_off + bias_n) of bias_ids and */
	int32_t bias_n;	  /* bias, added in that order (ids outside [0, n_vocab) ignored) */
};

/* out[r, :] ([n_rows, n_vocab] fp32) = logits[rows[r].src_row, :] with sampler_constrain
 * applied: bitwise the CPU's (biases added one by one in order, then the tokens left out
 * of the mask set to -inf). logits is not written. */
cudaError_t gpu_constrain(const float *logits, int n_vocab, const struct gpu_constrain_row *rows,
			  int n_rows, const uint32_t *masks, const int32_t *bias_ids,
			  const float *bias, float *out, cudaStream_t stream);

#endif
