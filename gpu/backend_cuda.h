/* backend_cuda: the CUDA + cuBLAS backend. Plain C: no CUDA type crosses this header.
 *
 * The backend lives in a shared library (libbatchgen-cuda.so) loaded on first use by
 * gpu/cuda_loader.c, so the binary starts fast and runs on machines without the CUDA
 * libraries. backend_cuda_create fails with BG_ERR_DEVICE and a sentence when the library
 * is absent (a build without CUDA), when no device is present, or when memory is short. */
#ifndef BG_BACKEND_CUDA_H
#define BG_BACKEND_CUDA_H

#include "backend.h"

/* Number of CUDA devices usable now: 0 without the library, the driver, or a device.
 * Without the NVIDIA driver it answers without loading the library. why (cap bytes, may be
 * NULL) is set to "" and, when a driver is installed but too old for this build, to the
 * sentence naming both versions: `--device auto` warns with it instead of silently
 * running on the CPU. */
int backend_cuda_device_count(char *why, size_t cap);
enum bg_status backend_cuda_create(const struct model *m, const struct backend_config *cfg,
				   struct backend **out, struct bg_err *err);

#endif
