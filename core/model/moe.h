/* moe: the routing of a mixture-of-experts FFN, as model.h specifies it (llama.cpp's
 * build_moe_ffn for qwen3moe and Mixtral: softmax gating, top-k, renormalized weights).
 *
 * One function of one token's router logits, the same for every backend that wants host
 * routing: the CPU backend calls it per token, and a test pins its values by hand. It
 * reads nothing but its arguments, so a token's choice never depends on the batch.
 */
#ifndef BG_MOE_H
#define BG_MOE_H

#include <stdbool.h>
#include <stdint.h>

/* The most experts a layer may have (model_read_hparams refuses more) */
#define MOE_MAX_EXPERTS 512u

/* Routes one token. logits: [n_expert] router outputs (ffn_gate_inp x). Computes
 * p = softmax(logits) (max subtracted, the sum in index order in double), chooses the k
 * largest p in descending order (equal p: the lower expert index first), and writes
 * ids[j] = the expert of slot j and weights[j] = its p, divided by the sum of the k chosen
 * p (summed in slot order) when norm. Requires 1 <= k <= n_expert <= MOE_MAX_EXPERTS
 * (programmer error otherwise: aborts); NaN logits give NaN weights, never an out-of-range id. */
void moe_route(const float *logits, uint32_t n_expert, uint32_t k, bool norm, int32_t *ids,
	       float *weights);

/* glm4moe's routing (llama.cpp's build_moe_ffn with SIGMOID gating and exp_probs_b):
 * p[e] = 1 / (1 + expf(-logits[e])) in fp32; the k largest p[e] + sel_bias[e] (fp32 sums;
 * sel_bias NULL: none) chosen in descending order (equal values: the lower index first);
 * weights[j] = p of slot j's expert (the bias never enters a weight), divided by
 * max(their sum in slot order, 6.103515625e-5) when norm, then times scale unless it is 1.
 * Requirements and NaN behaviour as moe_route's. */
void moe_route_sigmoid(const float *logits, const float *sel_bias, uint32_t n_expert,
		       uint32_t k, bool norm, float scale, int32_t *ids, float *weights);

/* deepseek2's routing (llama.cpp's build_moe_ffn with SOFTMAX or SIGMOID gating, an
 * optional exp_probs_b and expert groups): p = moe_route's softmax, or moe_route_sigmoid's
 * sigmoid when sigmoid; the selection values sel = p + sel_bias (fp32; sel_bias NULL: p);
 * with n_group > 1, group g holds experts [g G, (g + 1) G), G = n_expert / n_group, scored
 * by the fp32 sum of its two largest sel values, and the sel of every expert outside the
 * n_group_used best-scored groups (equal scores: the lower group first) becomes -inf;
 * then moe_route_sigmoid's choice on sel, weights = p of the chosen, the clamped norm and
 * the scale. Requires 1 <= k <= n_expert <= MOE_MAX_EXPERTS, and with n_group > 1:
 * n_expert % n_group == 0, G >= 2, 1 <= n_group_used < n_group, k <= n_group_used * G
 * (programmer errors: aborts). */
void moe_route_grouped(const float *logits, const float *sel_bias, uint32_t n_expert, uint32_t k,
		       bool sigmoid, uint32_t n_group, uint32_t n_group_used, bool norm,
		       float scale, int32_t *ids, float *weights);

/* llama4's routing (llama.cpp's build_moe_ffn for LLM_ARCH_LLAMA4: selection on the raw
 * logits, "sigmoid is only used after top_k"): the k largest logits chosen in descending
 * order (equal values: the lower index first), weights[j] = 1 / (1 + expf(-logit)) of slot
 * j's expert, no norm or scale. Requirements and NaN behaviour as moe_route's. */
void moe_route_llama4(const float *logits, uint32_t n_expert, uint32_t k, int32_t *ids,
		      float *weights);

#endif
