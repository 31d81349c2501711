/* gpu_common: what every file of the CUDA backend shares (internal, C++ only).
 *
 * - CUDA_CHECK / CUBLAS_CHECK turn a failed call into `return bg_fail(err, BG_ERR_DEVICE,
 *   "file:line: ...")`: they need a `struct bg_err *err` in scope and a function that
 *   returns enum bg_status. Nothing in gpu/ exits or prints on its own.
 * - enum gpu_dtype is the storage type of weights, KV cache and GEMM inputs: F32 for an
 *   F32 model (exactness against the CPU reference), F16 or BF16 otherwise. Activations
 *   between GEMMs (residual stream, GEMM outputs, attention scores) are always fp32.
 * - Kernels that touch a storage-typed buffer are templates over T in {float, __half,
 *   __nv_bfloat16}; ld_f32/st_t convert at the load and the store.
 */
#ifndef BG_GPU_COMMON_CUH
#define BG_GPU_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "status.h"
}

#define CUDA_CHECK(call)                                                                           \
	do {                                                                                       \
		cudaError_t cuda_check_e_ = (call);                                                \
		if (cuda_check_e_ != cudaSuccess)                                                  \
			return bg_fail(err, BG_ERR_DEVICE, "%s:%d: CUDA error %s: %s (in %s)",     \
				       __FILE__, __LINE__, cudaGetErrorName(cuda_check_e_),        \
				       cudaGetErrorString(cuda_check_e_), #call);                  \
	} while (0)

#define CUBLAS_CHECK(call)                                                                         \
	do {                                                                                       \
		cublasStatus_t cublas_check_s_ = (call);                                           \
		if (cublas_check_s_ != CUBLAS_STATUS_SUCCESS)                                      \
			return bg_fail(err, BG_ERR_DEVICE, "%s:%d: cuBLAS error %s (in %s)",       \
				       __FILE__, __LINE__, cublasGetStatusString(cublas_check_s_), \
				       #call);                                                     \
	} while (0)

enum gpu_dtype {
	GPU_F32 = 0,
	GPU_F16 = 1,
	GPU_BF16 = 2,
};

static inline size_t gpu_dtype_size(enum gpu_dtype t)
{
	return t == GPU_F32 ? 4 : 2;
}

static inline const char *gpu_dtype_name(enum gpu_dtype t)
{
	return t == GPU_F32 ? "f32" : t == GPU_F16 ? "f16" : "bf16";
}

/* ---- element conversions used inside kernels ---- */

__device__ __forceinline__ float ld_f32(float v)
{
	return v;
}
__device__ __forceinline__ float ld_f32(__half v)
{
	return __half2float(v);
}
__device__ __forceinline__ float ld_f32(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T st_t(float v);
template <> __device__ __forceinline__ float st_t<float>(float v)
{
	return v;
}
template <> __device__ __forceinline__ __half st_t<__half>(float v)
{
	return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 st_t<__nv_bfloat16>(float v)
{
	return __float2bfloat16_rn(v);
}

/* The 16 / sizeof(T) elements of a 16-byte vector of T (a uint4 load), as floats. */
template <typename T> __device__ __forceinline__ void vec_f32(uint4 v, float *f);
template <> __device__ __forceinline__ void vec_f32<float>(uint4 v, float *f)
{
	f[0] = __uint_as_float(v.x);
	f[1] = __uint_as_float(v.y);
	f[2] = __uint_as_float(v.z);
	f[3] = __uint_as_float(v.w);
}
template <> __device__ __forceinline__ void vec_f32<__half>(uint4 v, float *f)
{
	__half h[8];
	memcpy(h, &v, sizeof h); /* not a pointer cast: that would break strict aliasing */
#pragma unroll
	for (int i = 0; i < 8; i++)
		f[i] = __half2float(h[i]);
}
/* bf16 is the top half of an f32: a shift or a mask each (little-endian: element 2i is
 * the low half of word i) */
template <> __device__ __forceinline__ void vec_f32<__nv_bfloat16>(uint4 v, float *f)
{
	const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		f[2 * i] = __uint_as_float(w[i] << 16);
		f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
	}
}

/* Calls f.template operator()<T>() with T the storage type of dt. */
#define GPU_DISPATCH_DTYPE(dt, T, ...)                                                             \
	do {                                                                                       \
		switch (dt) {                                                                      \
		case GPU_F32: {                                                                    \
			typedef float T;                                                           \
			__VA_ARGS__;                                                               \
		} break;                                                                           \
		case GPU_F16: {                                                                    \
			typedef __half T;                                                          \
			__VA_ARGS__;                                                               \
		} break;                                                                           \
		case GPU_BF16: {                                                                   \
			typedef __nv_bfloat16 T;                                                   \
			__VA_ARGS__;                                                               \
		} break;                                                                           \
		}                                                                                  \
	} while (0)

static inline unsigned gpu_div_up(uint64_t a, uint64_t b)
{
	return (unsigned)((a + b - 1) / b);
}

/* The blocks of an element-wise grid-stride kernel of 256 threads over n elements: one
 * block per 256, at most 65536 (each thread strides over the rest). */
static inline unsigned gpu_grid_blocks(uint64_t n)
{
	uint64_t b = (n + 255) / 256;
	return b > 65536 ? 65536u : (unsigned)b;
}

/* Warp-level reductions over all 32 lanes. */
__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ double warp_sum_d(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* The threads that code written for one block runs on: the whole block (bar 0: its
 * barrier is __syncthreads), or a part of it, n threads (whole warps) meeting at the named
 * barrier bar (1..15: bar.sync bar, n), so that one block of a kernel runs several such
 * pieces side by side (gpu_gemv_chain's attention: four parts of 128 threads in a block of
 * 512). tid: the thread's index in the part. Every thread of the part must reach each
 * gpu_part_sync; it orders their shared-memory accesses as __syncthreads does. */
struct gpu_part {
	int tid, n, bar;
};
__device__ __forceinline__ struct gpu_part gpu_part_block()
{
	struct gpu_part p;
	p.tid = (int)threadIdx.x;
	p.n = (int)blockDim.x;
	p.bar = 0;
	return p;
}
__device__ __forceinline__ void gpu_part_sync(const struct gpu_part &p)
{
	if (p.bar == 0) {
		__syncthreads();
		return;
	}
#if defined(__CUDA_ARCH__)
	asm volatile("bar.sync %0, %1;" ::"r"(p.bar), "r"(p.n) : "memory");
#elif defined(EMU_DEVICE_SM)
	emu_bar_sync(p.bar, p.n);
#endif
}

#endif
