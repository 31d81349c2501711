// emu: a minimal CUDA emulator for running gpu/ and its tests on a machine without a GPU
// (a debugging aid, not part of the build; see gpu/emu/run.sh).
//
// The blocks of a launch run one after another on the calling thread; the threads of a
// block are ucontext fibers scheduled cooperatively, so __syncthreads and the warp
// shuffles (the only inter-thread operations gpu/ uses) are barriers. Launches are
// synchronous; streams and events are no-ops; a CUDA graph records the launches and
// cuBLAS calls made during capture and replays them. cublasGemmEx is a plain
// double-accumulating loop with cuBLAS's column-major semantics. Memory is host memory.
// What it cannot show: timing, races between blocks, and anything specific to real
// hardware (alignment faults, occupancy, fp contraction differences).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <ucontext.h>
#include <vector>
#include <algorithm>
extern "C" {
#include "model/half.h"
}
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3e { unsigned x, y, z; };
extern uint3e threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
struct __half { uint16_t x; };
struct __nv_bfloat16 { uint16_t x; };
inline float __half2float(__half h) { return half_f16_to_f32(h.x); }
inline __half __float2half_rn(float f) { return __half{half_f32_to_f16(f)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return half_bf16_to_f32(h.x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{half_f32_to_bf16(f)}; }
inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float cospif(float x) { return (float)cos(M_PI * (double)x); }
using std::min;
using std::max;
inline int atomicAdd(int *p, int v) { int o = *p; *p += v; return o; }

// ---- fibers ----
void emu_wait_block();
void emu_wait_warp();
void emu_xchg_put(uint64_t v);
uint64_t emu_xchg_get(int lane);
inline void __syncthreads() { emu_wait_block(); }
template <typename T> inline T emu_shfl(T v, int src) {
	uint64_t b = 0; memcpy(&b, &v, sizeof(T));
	emu_xchg_put(b);
	emu_wait_warp();
	uint64_t r = emu_xchg_get(src & 31);
	emu_wait_warp();
	T out; memcpy(&out, &r, sizeof(T));
	return out;
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl(v, (int)((threadIdx.x & 31) ^ o)); }
template <typename T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }
void emu_launch(dim3 grid, dim3 block, std::function<void()> fn);

// ---- runtime ----
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInsufficientDriver = 35 };
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char *cudaGetErrorString(cudaError_t) { return "emu error"; }
inline const char *cudaGetErrorName(cudaError_t) { return "emuError"; }
inline cudaError_t cudaMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); return cudaSuccess; }
template <typename T> inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
struct cudaDeviceProp { char name[256]; int multiProcessorCount; int major, minor; };
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) { strcpy(p->name, "emu"); p->multiProcessorCount = 8; p->major = 9; p->minor = 0; return cudaSuccess; }

// ---- cuBLAS (reference semantics, column-major) ----
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
typedef int cublasOperation_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
typedef int cudaDataType_t;
enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef int cublasComputeType_t;
enum { CUBLAS_COMPUTE_32F = 68 };
enum { CUBLAS_GEMM_DEFAULT = -1 };
inline const char *cublasGetStatusString(cublasStatus_t) { return "emu"; }
inline cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = (void *)1; return 0; }
inline cublasStatus_t cublasDestroy(cublasHandle_t) { return 0; }
inline float emu_ld(const void *p, int t, size_t i) {
	if (t == CUDA_R_32F) return ((const float *)p)[i];
	uint16_t h = ((const uint16_t *)p)[i];
	return t == CUDA_R_16F ? half_f16_to_f32(h) : half_bf16_to_f32(h);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t, int ta, int tb, int m, int n, int k, const void *alpha,
				   const void *A, int at, int lda, const void *B, int bt, int ldb, const void *beta,
				   void *C, int ct, int ldc, int, int) {
	if (ct != CUDA_R_32F) return 1;
	float al = *(const float *)alpha, be = *(const float *)beta;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double acc = 0;
			for (int l = 0; l < k; l++) {
				float a = ta == CUBLAS_OP_N ? emu_ld(A, at, (size_t)l * lda + i) : emu_ld(A, at, (size_t)i * lda + l);
				float b = tb == CUBLAS_OP_N ? emu_ld(B, bt, (size_t)j * ldb + l) : emu_ld(B, bt, (size_t)l * ldb + j);
				acc += (double)a * b;
			}
			float *c = (float *)C + (size_t)j * ldc + i;
			*c = (float)(al * acc + (be != 0 ? be * *c : 0));
		}
	return 0;
}

// ---- more runtime for the backend: streams/events are no-ops (everything is
// synchronous), graphs record launches during capture and replay them ----
#define CUDART_VERSION 13000
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
enum { cudaStreamCaptureModeRelaxed = 2 };
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
// The driver's CUDA version: $BG_EMU_DRIVER_VERSION (e.g. 12020 for 12.2) plays an older
// driver, which makes cudaGetDeviceCount fail as real CUDA does; "0" plays no driver.
inline int emu_driver_version() {
	const char *v = getenv("BG_EMU_DRIVER_VERSION");
	return v && *v ? atoi(v) : CUDART_VERSION;
}
inline cudaError_t cudaDriverGetVersion(int *v) { *v = emu_driver_version(); return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int *n) {
	*n = 0;
	if (emu_driver_version() < CUDART_VERSION) return cudaErrorInsufficientDriver;
	*n = 1;
	return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int) { *s = (void *)1; return 0; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return 0; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return 0; }
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, int) { *e = (void *)1; return 0; }
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return 0; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return 0; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return 0; }
inline cudaError_t cudaMallocHost(void **p, size_t n) { *p = malloc(n ? n : 1); return 0; }
inline cudaError_t cudaFreeHost(void *p) { free(p); return 0; }
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { memcpy(d, s, n); return 0; }
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = 256u << 20; *t = 1u << 30; return 0; }
cudaError_t cudaStreamBeginCapture(cudaStream_t, int);
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *, cudaGraph_t, unsigned long long);
cudaError_t cudaGraphDestroy(cudaGraph_t);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t);
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t);
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return 0; }
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return 0; }
void emu_record_or_run(std::function<void()> fn);
#define cublasGemmEx(...) emu_gemm_ex(__VA_ARGS__)
inline cublasStatus_t emu_gemm_ex(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
				  const void *A, int at, int lda, const void *B, int bt, int ldb, const void *beta,
				  void *C, int ct, int ldc, int x, int y) {
	float al = *(const float *)alpha, be = *(const float *)beta;
	emu_record_or_run([=]() { float a2 = al, b2 = be; (cublasGemmEx)(h, ta, tb, m, n, k, &a2, A, at, lda, B, bt, ldb, &b2, C, ct, ldc, x, y); });
	return 0;
}
