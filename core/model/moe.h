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

#endif
