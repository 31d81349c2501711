/* backend_cuda: the CUDA + cuBLAS backend. Plain C: no CUDA type crosses this header.
 *
 * backend_cuda_create fails with BG_ERR_DEVICE and a sentence when the binary was built
 * without CUDA, when no device is present, or when memory is short. */
#ifndef BG_BACKEND_CUDA_H
#define BG_BACKEND_CUDA_H

#include "../core/backend.h"

/* True when this binary was built with the CUDA backend. */
bool backend_cuda_compiled(void);
/* Number of CUDA devices usable now (0 without CUDA or without a device). */
int backend_cuda_device_count(void);
enum bg_status backend_cuda_create(const struct model *m, const struct backend_config *cfg,
				   struct backend **out, struct bg_err *err);

#endif
