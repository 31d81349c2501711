/* backend_cpu: the reference backend on the host processor.
 *
 * Clear code, fp32 accumulation, F16/BF16/Q8_0 weights dequantized on the fly, K/V kept in
 * fp32. Every row is computed independently of the others, with the same order of
 * operations whatever the batch holds, so a request's logits are bitwise the same alone
 * or in any batch. Work is spread over n_threads threads; SIMD paths (AVX-512 / AVX2,
 * chosen at run time) keep the per-row summation order fixed.
 */
#ifndef BG_BACKEND_CPU_H
#define BG_BACKEND_CPU_H

#include "backend.h"

/* The model must outlive the backend. kv_tokens == 0 in cfg means a pool of
 * min(n_ctx_train, 4096) * 4 tokens. */
enum bg_status backend_cpu_create(const struct model *m, const struct backend_config *cfg,
				  struct backend **out, struct bg_err *err);

#endif
