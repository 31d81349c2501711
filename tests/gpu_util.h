/* gpu_util: what the GPU tests that reach the CUDA backend through the plugin share.
 * Header-only (each test program is one translation unit).
 *
 *   gpu_util_backend(m, cuda, block_size, kv_tokens)   a CUDA or CPU backend of model m
 *                                                       (90% of device memory, 2 CPU
 *                                                       threads), or NULL after a CHECK
 *                                                       failure naming the error
 */
#ifndef BG_TEST_GPU_UTIL_H
#define BG_TEST_GPU_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "cpu/backend_cpu.h"
#include "model/model.h"
#include "gpu/backend_cuda.h"

static inline struct backend *gpu_util_backend(const struct model *m, bool cuda, int32_t block_size,
					       int64_t kv_tokens)
{
	struct backend_config cfg = {0};
	cfg.block_size = block_size;
	cfg.kv_tokens = kv_tokens;
	cfg.mem_fraction = 0.9f;
	cfg.n_threads = 2;
	struct backend *b = NULL;
	struct bg_err err = {0};
	enum bg_status st =
	    cuda ? backend_cuda_create(m, &cfg, &b, &err) : backend_cpu_create(m, &cfg, &b, &err);
	CHECK(st == BG_OK, "%s backend: %s", cuda ? "cuda" : "cpu", err.msg);
	return st == BG_OK ? b : NULL;
}

#endif
