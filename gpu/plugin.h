/* plugin: the entry points of the CUDA backend's shared library (libbatchgen-cuda.so).
 *
 * The CUDA backend is built into its own shared library so that the batchgen binary does
 * not link cuBLAS and the CUDA runtime: it starts in milliseconds, and runs on machines
 * without the CUDA libraries, loading the library only when a GPU is to be used
 * (gpu/cuda_loader.c). The library resolves the core/ functions it calls (bg_fail,
 * gguf_row_bytes, sampler_rng_uniform, ...) against the executable, which exports them.
 *
 * GPU_PLUGIN_ABI changes whenever a struct crossing this boundary (struct model,
 * struct backend, struct backend_config, struct backend_ops, ...) changes layout, so that
 * a stale library is refused instead of misread.
 */
#ifndef BG_GPU_PLUGIN_H
#define BG_GPU_PLUGIN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "backend.h"

#define GPU_PLUGIN_ABI	2
#define GPU_PLUGIN_FILE "libbatchgen-cuda.so"

int gpu_plugin_abi(void);	   /* GPU_PLUGIN_ABI the library was built with */
/* CUDA devices usable now; 0 on any error. When a driver is present but unusable (older
 * than this build's CUDA needs), why (cap bytes, may be NULL) gets the sentence that says
 * so; otherwise why is left as it is. */
int gpu_plugin_device_count(char *why, size_t cap);
/* backend_cuda_create's contract (gpu/backend_cuda.h). */
enum bg_status gpu_plugin_create(const struct model *m, const struct backend_config *cfg,
				 struct backend **out, struct bg_err *err);

#ifdef __cplusplus
}
#endif

#endif
