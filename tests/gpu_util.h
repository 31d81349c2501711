/* gpu_util: what the GPU tests that reach the CUDA backend through the plugin share.
 * Header-only (each test program is one translation unit).
 *
 *   gpu_util_backend(m, cuda, block_size, kv_tokens)   a CUDA or CPU backend of model m
 *                                                       (90% of device memory, 2 CPU
 *                                                       threads), or NULL after a CHECK
 *                                                       failure naming the error
 *   gpu_util_synth_model(o, what)                       the model `batchgen synth` makes
 *                                                       from *o, or NULL after a CHECK
 *                                                       failure naming `what`
 *   gpu_util_wide_model()                               Llama-3-8B's shape with 2 layers,
 *                                                       random f16 weights (seed 17), or
 *                                                       NULL after a CHECK failure
 */
#ifndef BG_TEST_GPU_UTIL_H
#define BG_TEST_GPU_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "cpu/backend_cpu.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "synth_util.h"
#include "gpu/backend_cuda.h"

static inline struct backend *gpu_util_backend(const struct model *m, bool cuda, int32_t block_size,
					       int64_t kv_tokens)
{
	struct backend_config cfg = {0};
	cfg.block_size = block_size;
	cfg.kv_tokens = kv_tokens;
	cfg.mem_fraction = 0.9f;
	cfg.n_threads = 2;
	cfg.n_state_slots = 64; /* recurrent state (qwen35, granitehybrid): a slot a sequence */
	struct backend *b = NULL;
	struct bg_err err = {0};
	enum bg_status st =
	    cuda ? backend_cuda_create(m, &cfg, &b, &err) : backend_cpu_create(m, &cfg, &b, &err);
	CHECK(st == BG_OK, "%s backend: %s", cuda ? "cuda" : "cpu", err.msg);
	return st == BG_OK ? b : NULL;
}

static inline struct model *gpu_util_synth_model(const struct synth_opts *o, const char *what)
{
	struct bg_err err = {0};
	struct model *m;
	CHECK(synth_util_model(o, &m, &err) == BG_OK, "%s: %s", what, err.msg);
	return m;
}

static inline struct model *gpu_util_wide_model(void)
{
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape("llama-3-8b"));
	o.shape.n_layer = 2;
	o.dtype = GGUF_DTYPE_F16;
	o.seed = 17;
	return gpu_util_synth_model(&o, "8B-wide synthetic model");
}

#endif
