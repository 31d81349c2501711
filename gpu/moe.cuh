/* moe: the mixture-of-experts FFN of a layer on the device (internal, C++ only), as
 * core/model/model.h specifies it (llama.cpp's build_moe_ffn for qwen3moe and Mixtral):
 * softmax over the router logits in fp32, the k largest probabilities (ties: the lower
 * expert first), slot order = descending probability, renormalized when asked, and the
 * output of token t = sum over its slots j, in slot order, of w_j * down_e(act(gate_e x) *
 * up_e x).
 *
 * A layer runs as four launches after the router GEMM (the backend's cuBLAS path, fp32
 * logits), none of which the host waits for or reads back, so that a decode graph can
 * capture them:
 *   gpu_moe_route    one block: each token's experts and weights, then the (token, slot)
 *                    pairs grouped by expert (counting sort, stable: token order within an
 *                    expert) and cut into tiles of <= GPU_MOE_TILE pairs of one expert;
 *   gpu_moe_gate_up  per tile, the expert's gate|up rows against its tokens' inputs, read
 *                    once for the whole tile, the gated activation in the epilogue
 *                    (gpt-oss: the gate and up biases, the clamped SwiGLU: gpu_moe_oai;
 *                    nemotron_h_moe: the up rows alone, relu(u)^2);
 *   gpu_moe_down     per tile, the expert's down rows against those activations;
 *   gpu_moe_combine  per token, the weighted sum of its slots' outputs in slot order.
 * The host sizes every grid from the pass's token count alone (gpu_moe_max_tiles): blocks
 * past the tiles the routing made return at once.
 *
 * Each output element is one dot product summed in a fixed order whatever else shares its
 * tile, so on one kernel a token's output does not depend on the other tokens of the batch;
 * which kernel a pass takes (gpu_moe_path) depends on its size, as cuBLAS's choices do (the
 * CUDA backend is not batch invariant: README). */
#ifndef BG_GPU_MOE_CUH
#define BG_GPU_MOE_CUH

#include "gpu/gpu_common.cuh"

#define GPU_MOE_MAX_EXPERT 512 /* the most experts gpu_moe_route takes (its shared memory) */
#define GPU_MOE_MAX_GROUPS 32  /* the most expert groups gpu_moe_route_grouped takes (lanes) */
#define GPU_MOE_TILE	   16  /* (token, slot) pairs of one expert a tile */

/* Where the routing of a pass of n_tok tokens, k experts a token, lies (device memory,
 * written by gpu_moe_route, read by the other three): */
struct gpu_moe_plan {
	int32_t *ids;	  /* [n_tok * k] expert of pair t * k + j (slot j of token t) */
	float *w;	  /* [n_tok * k] its weight */
	int32_t *offs;	  /* [n_expert + 1] expert e's pairs are sorted[offs[e], offs[e + 1]) */
	int32_t *sorted;  /* [n_tok * k] pair ids grouped by expert, token order within one */
	int32_t *tiles;	  /* [gpu_moe_max_tiles] (expert, first sorted position) int pairs */
	int32_t *n_tiles; /* [1] tiles used */
};

/* The most tiles n_pairs pairs over n_expert experts can make (a grid's y extent, and the
 * length of plan.tiles in int pairs). A pure function. */
int gpu_moe_max_tiles(int n_pairs, int n_expert);

/* Routes n_tok tokens: logits [n_tok, n_expert] fp32 (row-major, ld n_expert) -> the plan
 * (all of it). 1 <= k <= n_expert <= GPU_MOE_MAX_EXPERT, else cudaErrorInvalidValue. A NaN
 * probability ranks below every number (then by index), so ids are always valid experts. */
cudaError_t gpu_moe_route(const float *logits, int n_tok, int n_expert, int k, bool norm,
			  const struct gpu_moe_plan *plan, cudaStream_t stream);

/* glm4moe's routing (model.h; core/model/moe.h's moe_route_sigmoid): p = 1 / (1 + expf(-l))
 * in fp32, the k largest p + sel_bias[e] chosen (sel_bias: [n_expert] fp32 on the device,
 * NULL: none; equal values: the lower expert first), weights = the unbiased p, divided by
 * max(their sum in slot order, 6.103515625e-5) when norm, then times scale unless 1. The
 * plan as gpu_moe_route's; a NaN selection value ranks below every number. */
cudaError_t gpu_moe_route_sigmoid(const float *logits, const float *sel_bias, int n_tok,
				  int n_expert, int k, bool norm, float scale,
				  const struct gpu_moe_plan *plan, cudaStream_t stream);

/* deepseek2's routing (model.h's moe_grouped; core/model/moe.h's moe_route_grouped): p =
 * sigmoid(l) (sigmoid) or softmax(l) in fp32, selection values p + sel_bias[e] (NULL:
 * none); with n_group > 1 (<= GPU_MOE_MAX_GROUPS, dividing n_expert into groups of >= 2)
 * only the n_group_used < n_group groups of the largest sums of their two largest
 * selection values compete (ties: the lower group); the k largest selection values chosen
 * (ties: the lower expert), weights the unbiased p, divided by max(their sum in slot
 * order, 6.103515625e-5) when norm, then times scale unless 1. The same choice as the CPU
 * where the values are not near-tied (the softmax's sum differs in rounding). The plan as
 * gpu_moe_route's. */
cudaError_t gpu_moe_route_grouped(const float *logits, const float *sel_bias, int n_tok,
				  int n_expert, int k, bool sigmoid, int n_group, int n_group_used,
				  bool norm, float scale, const struct gpu_moe_plan *plan,
				  cudaStream_t stream);

/* llama4's routing (core/model/moe.h's moe_route_llama4): the k largest logits chosen
 * (ties: the lower expert), weights sigmoid(l) = 1 / (1 + expf(-l)) in fp32, neither
 * normalized nor scaled (they go on the experts' input: gpu_moe_oai.w_in). The plan as
 * gpu_moe_route's; a NaN logit ranks below every number. */
cudaError_t gpu_moe_route_llama4(const float *logits, int n_tok, int n_expert, int k,
				 const struct gpu_moe_plan *plan, cudaStream_t stream);

/* gpt-oss's additions to the experts (model.h moe_bias, swiglu_oai), fp32 device vectors
 * stacked by expert; NULL members: none. The gate and up biases are added to the fp32
 * projections before the activation, the down bias to y (so gpu_moe_combine weighs it with
 * the rest of the expert's output); alpha > 0: the activation is gpu_glu_oai(g, u, alpha,
 * limit) instead of SiLU (gelu must then be false). */
struct gpu_moe_oai {
	const float *b_gate; /* [n_expert][n_ff] */
	const float *b_up;   /* [n_expert][n_ff] */
	const float *b_down; /* [n_expert][n_embd] */
	float alpha, limit;
	/* nemotron_h_moe (model.h relu2): experts without gate. gpu_moe_gate_up's wgu holds
	 * each expert's up rows alone ([n_expert][n_ff, n_embd]) and act = r * r, r = max(u,
	 * 0), in fp32 (no biases, alpha 0, gelu false); block-quantized experts
	 * (gpu_moe_gate_up_q) are refused (not built) */
	bool relu2;
	/* step35 (model.h clamp_exp): > 0, the activation is gpu_glu_clamp(g, u, clamp)
	 * instead (no biases, alpha 0, gelu false, not relu2) */
	float clamp;
	/* llama4: gate|up's two sums of each pair times its weight plan.w before the
	 * activation: act(w (gate_e x)) * (w (up_e x)), the projections of w x (linear; the
	 * CPU scales x first: the same up to rounding). No biases, not relu2; the outputs are
	 * then summed unweighted (gpu_moe_combine with w NULL). */
	bool w_in;
};

/* Which kernel gpu_moe_gate_up and gpu_moe_down run. AUTO: tensor cores (wmma) for 16-bit
 * types when both widths are multiples of 16 and the pass has on average at least
 * GPU_MOE_TC_MIN_PAIRS pairs an expert (n_tok * k >= that * n_expert), else CUDA cores:
 * in decode a tile holds a pair or two, and the CUDA-core kernel's 16x more warps a tile
 * stream the weights with more loads in flight (ESTIMATE, not timed: no GPU in the session
 * that chose it). The others force one (tests); TENSOR_CORES where it does not apply is
 * cudaErrorInvalidValue. */
enum gpu_moe_path { GPU_MOE_AUTO = 0, GPU_MOE_CUDA_CORES = 1, GPU_MOE_TENSOR_CORES = 2 };
#define GPU_MOE_TC_MIN_PAIRS 8

/* act[s, j] (dt, [n_tok * k, n_ff], row s = sorted position) = act(gate_e . x) * (up_e . x)
 * for the pair at sorted position s (token t, expert e), x = row t of xn ([n_tok, n_embd]
 * of dt), rounded as gpu_swiglu rounds; wgu [n_expert][2 n_ff, n_embd] of dt (each expert's
 * gate rows, then its up rows; oai->relu2: [n_expert][n_ff, n_embd], the up rows alone,
 * act = relu(up_e . x)^2). n_embd and n_ff multiples of 8, wgu and xn 16-byte aligned
 * (cudaErrorInvalidValue otherwise). */
cudaError_t gpu_moe_gate_up(const void *wgu, int n_ff, int n_embd, int n_expert, const void *xn,
			    int n_tok, int k, const struct gpu_moe_plan *plan, void *act, bool gelu,
			    const struct gpu_moe_oai *oai, enum gpu_dtype dt,
			    enum gpu_moe_path path, cudaStream_t stream);

/* y[p, o] (fp32, [n_tok * k, n_embd], row p = pair id t * k + j) = down_e[o] . act[s] for
 * the pair p at sorted position s; wdown [n_expert][n_embd, n_ff] of dt. Same shape and
 * alignment rules as gpu_moe_gate_up. */
cudaError_t gpu_moe_down(const void *wdown, int n_embd, int n_ff, int n_expert, const void *act,
			 int n_tok, int k, const struct gpu_moe_plan *plan, float *y,
			 const struct gpu_moe_oai *oai, enum gpu_dtype dt, enum gpu_moe_path path,
			 cudaStream_t stream);

/* Block-quantized experts (the CUDA backend's resident path: gpu_qres_policy): each of a
 * layer's expert arrays in the file's blocks, expert after expert, row after row. For
 * gate|up, p[0] the gate rows [n_expert][n_ff] and p[1] the up rows (each its own type);
 * for down, p[0] the rows [n_expert][n_embd] (p[1], type[1] unused). A row of n_in
 * elements is gpu_moe_qrow_bytes(type, n_in) bytes. */
struct gpu_moe_qw {
	const void *p[2];
	int type[2]; /* GGUF ids: 8 Q8_0, 12 Q4_K, 14 Q6_K, 6 Q5_0, 39 MXFP4; 30 BF16 rows */
};

/* Whether the expert kernels read rows of n_in elements of GGUF type t as blocks (Q8_0, Q5_0
 * and MXFP4: n_in a multiple of 32; Q4_K and Q6_K: of 256). A pure function. */
bool gpu_moe_qtype_ok(int t, int64_t n_in);

/* The bytes of such a row (30: BF16, 2 n_in when n_in is a multiple of 32); 0 for any other
 * type or width. A pure function. */
size_t gpu_moe_qrow_bytes(int t, int64_t n_in);

/* gpu_moe_gate_up and gpu_moe_down on block-quantized experts w: the same outputs, each the
 * same fp32 sum in the same order of the dequantized weights (bitwise quant_dequant's values,
 * unrounded) times the BF16 inputs (xn, act; act is written BF16). CUDA cores always: AUTO
 * means CUDA_CORES, TENSOR_CORES is cudaErrorInvalidValue, as are a type or width
 * gpu_moe_qrow_bytes refuses and an array NULL or not 16-byte aligned. */
cudaError_t gpu_moe_gate_up_q(const struct gpu_moe_qw *w, int n_ff, int n_embd, int n_expert,
			      const void *xn, int n_tok, int k, const struct gpu_moe_plan *plan,
			      void *act, bool gelu, const struct gpu_moe_oai *oai,
			      enum gpu_moe_path path, cudaStream_t stream);
cudaError_t gpu_moe_down_q(const struct gpu_moe_qw *w, int n_embd, int n_ff, int n_expert,
			   const void *act, int n_tok, int k, const struct gpu_moe_plan *plan,
			   float *y, const struct gpu_moe_oai *oai, enum gpu_moe_path path,
			   cudaStream_t stream);

/* out[t, o] (fp32, [n_tok, n_embd]) = sum over j < k in order of w[t * k + j] * y[t * k + j,
 * o] (the first term w * y, then each added; a*b+c may contract to an FMA); w NULL: of
 * y[t * k + j, o] alone (llama4). */
cudaError_t gpu_moe_combine(const float *y, const float *w, int n_tok, int k, int n_embd,
			    float *out, cudaStream_t stream);

/* gemma4 (model.h's gemma4_moe): plan->w[p] *= scale[plan->ids[p]] for the n_tok * k
 * pairs (fp32), the per-expert down scale folded into the routing weight after the
 * routing's renormalization (the CPU backend scales the expert's output first: the same
 * product up to rounding). */
cudaError_t gpu_moe_scale_w(const struct gpu_moe_plan *plan, const float *scale, int n_tok,
			    int k, cudaStream_t stream);

/* qwen35moe, qwen2moe (model.h's shexp_gate): y[t, o] (fp32, [n_tok, n_embd]) *= sigmoid(
 * logit[t]) = 1 / (1 + expf(-logit[t])), the shared expert's output times its gate. */
cudaError_t gpu_moe_shexp_gate(float *y, const float *logit, int n_tok, int n_embd,
			       cudaStream_t stream);

#endif
