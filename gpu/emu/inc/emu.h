// emu: a CUDA emulator for running gpu/ and its tests on a machine without a GPU (a
// debugging aid, built by gpu/emu/run.sh; tests/e2e_gpu_emu.sh runs the binary on it).
//
// It is meant to be at least as strict as an H100, so that what passes here is likely to
// pass there:
//  - the device is an H100 (132 SMs, 79.6 GiB); device memory is reserved lazily (mmap
//    NORESERVE) and, up to 64 MiB an allocation, filled with 0xff bytes (NaN as floats):
//    cudaMalloc memory is not zeroed on a GPU either;
//  - launch limits are checked as CUDA checks them (block <= 1024 threads and (1024, 1024,
//    64), grid.y/z <= 65535): a bad launch runs nothing and cudaGetLastError returns
//    cudaErrorInvalidConfiguration;
//  - dynamic shared memory (`extern __shared__ T x[];`, the transform makes it a pointer
//    to the launch's buffer, emu_dyn_shared) is what <<<g, b, smem>>> asks, filled with 0xff
//    at each block start like static shared memory; as on an H100 a launch may ask at most
//    the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize, 48 KiB less its static
//    shared memory until cudaFuncSetAttribute raises it (which refuses static + dynamic >
//    227 KiB, sharedMemPerBlockOptin): a launch over it runs nothing and cudaGetLastError
//    returns cudaErrorInvalidValue, as CUDA does; a block that writes past its dynamic
//    shared memory aborts with a message (16 KiB past it are checked after each block;
//    a GPU faults or corrupts another block's), one that reads past it reads NaN, and
//    a kernel launched without any that uses its dynamic array crashes (a NULL pointer);
//  - the threads of a block are fibers switched at barriers and warp shuffles;
//    between two barriers they run in a random order, and the blocks of a grid in a random
//    order, from the seed $BG_EMU_SEED (default 1; printed when set), so a missing
//    __syncthreads or a cross-block dependency shows as a wrong result for some seed; a
//    barrier that some threads of the block never reach aborts with a message (a GPU
//    hangs); named barriers (bar.sync id, n: gpu_part_sync) likewise, for the n threads
//    that call them, an id of 1..15 and a count of whole warps (else an abort), one count
//    a generation;
//  - every __shared__ array is filled with 0xff bytes at the start of each block (the
//    transform adds the call), so reading shared memory nobody wrote gives NaN;
//  - when queued stream work runs is a policy, $BG_EMU_STREAMS (gpu/emu/emu.cpp):
//    "late" (default) runs it only when the host synchronizes with it
//    (cudaStreamSynchronize, cudaEventSynchronize on an event recorded after it,
//    cudaDeviceSynchronize, cudaFree), so host code that reads results without waiting,
//    or overwrites what queued work still reads, sees stale data on every run, not once
//    in a while; "early" runs it when it is queued, so host code that writes, after
//    queueing, what the work was meant to see is caught; "random" decides per piece of
//    work from $BG_EMU_SEED. Stream order and event waits hold in all three. The legacy
//    stream (0) runs at once and, as with cudaStreamNonBlocking streams on a GPU, does
//    not wait for the others;
//  - graph capture follows CUDA's rules: work on the capturing stream is recorded, not run;
//    a call that would wait for the capturing stream (cudaStreamSynchronize on it,
//    cudaDeviceSynchronize, cudaEventSynchronize on an event it recorded) fails with
//    cudaErrorStreamCaptureUnsupported and invalidates the capture
//    (cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated);
//  - cublasGemmEx accumulates in fp32 (fmaf) and checks its arguments as cuBLAS does
//    (leading dimensions, transposes, type combinations, compute type);
//  - nvcuda::wmma (gpu/emu/inc/mma.h) keeps fragments as per-warp data in a layout drawn
//    from the seed, checks alignment and that the whole warp calls, accumulates in fp32;
//  - gpu/emu/run.sh compiles with -ffp-contract=fast (and -mfma where the CPU has it), so
//    a*b+c contracts into an FMA as nvcc contracts it.
//  - programmatic dependent launch (cudaLaunchKernelEx with
//    cudaLaunchAttributeProgrammaticStreamSerialization; the device is 9.0, EMU_DEVICE_SM):
//    kernels run one after another here, so the check is of the kernel's contract
//    (gpu/pdl.cuh): while a thread of such a launch has not called
//    cudaGridDependencySynchronize, every cudaMalloc mapping is PROT_NONE, and a touch
//    faults: the emulator names the kernel, block, thread and address, and aborts; a block
//    none of whose threads waits aborts with its own message (the next kernel would no
//    longer be ordered after the previous one). A thread's wait parks it until no thread
//    of the block can run before its own wait, so memory is switched twice a block, not at
//    every fiber switch. Checked: the first block of each such launch in the seed's block
//    order, or every block with $BG_EMU_PDL=all (emu.cpp says what each costs); the
//    exit-without-wait check covers every block. A captured launch keeps its attribute, and
//    its replays run the same checks. cudaTriggerProgrammaticLaunchCompletion does nothing
//    (no visibility to check); a prefetch must name an address in a cudaMalloc allocation.
//  - cooperative launches (cudaLaunchKernelEx with cudaLaunchAttributeCooperative;
//    gpu/grid_sync.cuh): every block is resident at once, as CUDA guarantees: a launch of
//    more blocks than cudaOccupancyMaxActiveBlocksPerMultiprocessor x 132 runs nothing and
//    fails with cudaErrorCooperativeLaunchTooLarge; the blocks take turns, each running
//    until its threads can only spin (every thread that ran called __nanosleep), in a
//    random order from the seed, each with its own threads, shared memory and barriers;
//    when no block can go on the emulator aborts with a message (a GPU hangs). In a plain
//    launch a block whose threads only spin waits for another block, which may never run
//    beside it: the emulator aborts with a message (a GPU may hang);
//  - cudaOccupancyMaxActiveBlocksPerMultiprocessor answers as CUDA's occupancy calculator
//    (cuda_occupancy.h) does for an H100 (emu.cpp, emu_occupancy), from the kernel's
//    __launch_bounds__ and static shared memory (the transform makes each kernel report
//    them when probed) and a stated register count (ptxas's is unknown here): the cap
//    its launch bounds impose, at most 128, the budget tests/gpu_gates.sh holds every
//    kernel to; an H100's answer is then never below the emulator's.
// What it cannot show: timing, register spills (tests/gpu_gates.sh reads
// ptxas for those), races inside a warp, memory-model effects between blocks.
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
#include <cstddef>
extern "C" {
#include "model/half.h"
}
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3e { unsigned x, y, z; };
extern uint3e threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
struct float2 { float x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
struct __half { uint16_t x; };
struct __nv_bfloat16 { uint16_t x; };
inline float __half2float(__half h) { return half_f16_to_f32(h.x); }
inline __half __ushort_as_half(unsigned short u)
{
	return __half{u};
}
inline __half __float2half_rn(float f) { return __half{half_f32_to_f16(f)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return half_bf16_to_f32(h.x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{half_f32_to_bf16(f)}; }
inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline int __popc(unsigned int x)
{
	return __builtin_popcount(x);
}
inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
inline float cospif(float x) { return (float)cos(M_PI * (double)x); }
using std::min;
using std::max;
inline int atomicAdd(int *p, int v) { int o = *p; *p += v; return o; }
inline unsigned atomicAdd(unsigned *p, unsigned v)
{
	unsigned o = *p;
	*p += v;
	return o;
}
inline unsigned atomicExch(unsigned *p, unsigned v)
{
	unsigned o = *p;
	*p = v;
	return o;
}
// one thread runs at a time (blocks one after another, or a cooperative launch's blocks in
// turns): every write is visible to every thread at once
inline void __threadfence() {}
// hands the thread back to the scheduler (emu.cpp, emu_nanosleep): a spin that waits for
// another block lets that block run in a cooperative launch, and aborts a plain one
void emu_nanosleep();
inline void __nanosleep(unsigned)
{
	emu_nanosleep();
}
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) { unsigned long long o = *p; *p += v; return o; }
inline unsigned atomicOr(unsigned *p, unsigned v) { unsigned o = *p; *p |= v; return o; }

// ---- fibers ----
void emu_wait_block();
void emu_wait_warp();
void emu_xchg_put(uint64_t v);
uint64_t emu_xchg_get(int lane);
inline void __syncthreads() { emu_wait_block(); }
// bar.sync id, n (gpu_part_sync): the n threads (whole warps) of the block that call it
void emu_bar_sync(int id, int n);
inline void __syncwarp(unsigned = 0xffffffffu) { emu_wait_warp(); }
template <typename T> inline T emu_shfl(T v, int src) {
	uint64_t b = 0; memcpy(&b, &v, sizeof(T));
	emu_xchg_put(b);
	emu_wait_warp(); // one barrier: the slots alternate (emu.cpp, xchg)
	uint64_t r = emu_xchg_get(src & 31);
	T out; memcpy(&out, &r, sizeof(T));
	return out;
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl(v, (int)((threadIdx.x & 31) ^ o)); }
template <typename T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }

// ---- programmatic dependent launch (device side; gpu/pdl.cuh) ----
// the emulated device's compute capability, for code that guards on __CUDA_ARCH__
#define EMU_DEVICE_SM 90
void emu_pdl_wait();
void emu_prefetch_l2(const void *p);
inline void cudaGridDependencySynchronize() { emu_pdl_wait(); }
inline void cudaTriggerProgrammaticLaunchCompletion() {}

// ---- runtime (gpu/emu/emu.cpp) ----
typedef int cudaError_t;
enum {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInsufficientDriver = 35,
	cudaErrorCooperativeLaunchTooLarge = 82,
	cudaErrorNoKernelImageForDevice = 209,
	cudaErrorNotReady = 600,
	cudaErrorStreamCaptureUnsupported = 900,
	cudaErrorStreamCaptureInvalidated = 901,
};
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
// A node of a captured graph: its kind, as cudaGraphNodeGetType answers (CUDA's values);
// a cuBLAS call records one kernel node (a real cuBLAS may record more: a split-K GEMM
// adds its reduction kernel, and so cudaGraphGetNodes on a GPU tells)
typedef struct emu_graph_node *cudaGraphNode_t;
enum cudaGraphNodeType {
	cudaGraphNodeTypeKernel = 0, cudaGraphNodeTypeMemcpy = 1, cudaGraphNodeTypeMemset = 2,
	cudaGraphNodeTypeHost = 3, cudaGraphNodeTypeGraph = 4, cudaGraphNodeTypeEmpty = 5,
	cudaGraphNodeTypeWaitEvent = 6,
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
enum { cudaStreamCaptureModeRelaxed = 2 };
#define CUDART_VERSION 13000
struct cudaDeviceProp {
	char name[256]; int multiProcessorCount; int major, minor; size_t totalGlobalMem;
	size_t sharedMemPerBlock; size_t sharedMemPerBlockOptin; int maxThreadsPerBlock;
	int warpSize; int regsPerBlock; int regsPerMultiprocessor; int maxThreadsPerMultiProcessor;
	int maxBlocksPerMultiProcessor; size_t sharedMemPerMultiprocessor;
	size_t reservedSharedMemPerBlock;
	int cooperativeLaunch;
};
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int);
cudaError_t cudaMalloc(void **p, size_t n);
template <typename T> inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind);
cudaError_t cudaMemset(void *d, int v, size_t n);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t st);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, int flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g);
cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s);
// the transform's targets: a launch `k<<<grid, block, smem, stream>>>(args)`, and the
// 0xff fill of each __shared__ variable at the start of each block
// key: the kernel (its address: per-kernel attributes and static shared memory), or NULL
// for work that is not a kernel of gpu/ (tests/emu_test_streams.cpp)
// pdl: a programmatic dependent launch (the checks above); coop: a cooperative launch (all
// blocks resident, the checks above). Returns the launch's error, also left for
// cudaGetLastError.
cudaError_t emu_launch(const void *key, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
		       std::function<void()> fn, bool pdl = false, bool coop = false);
inline void emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s, std::function<void()> fn)
{
	emu_launch(nullptr, grid, block, smem, s, std::move(fn));
}
template <typename F> inline const void *emu_key(F *f)
{
	return reinterpret_cast<const void *>(f);
}
// cudaLaunchKernelEx (the C++ template of cuda_runtime.h) and the attributes gpu/ uses,
// with CUDA's values; another attribute, or both on one launch, is refused
// (cudaErrorInvalidValue, nothing runs)
enum cudaLaunchAttributeID {
	cudaLaunchAttributeIgnore = 0,
	cudaLaunchAttributeCooperative = 2,
	cudaLaunchAttributeProgrammaticStreamSerialization = 6,
};
union cudaLaunchAttributeValue {
	char pad[64];
	int cooperative;
	int programmaticStreamSerializationAllowed;
};
struct cudaLaunchAttribute {
	cudaLaunchAttributeID id;
	cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
	dim3 gridDim, blockDim;
	size_t dynamicSmemBytes;
	cudaStream_t stream;
	cudaLaunchAttribute *attrs;
	unsigned numAttrs;
};
// whether cfg asks a programmatic dependent launch (*pdl) or a cooperative one (*coop);
// false for an attribute not emulated
bool emu_launch_attrs(const cudaLaunchConfig_t *cfg, bool *pdl, bool *coop);
template <typename... P, typename... A>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *cfg, void (*k)(P...), A &&...args)
{
	bool pdl, coop;
	if (!emu_launch_attrs(cfg, &pdl, &coop))
		return cudaErrorInvalidValue;
	auto t = std::tuple<std::decay_t<P>...>(std::forward<A>(args)...); /* evaluated at launch */
	return emu_launch(
	    emu_key(k), cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes, cfg->stream,
	    [=]() { std::apply(k, t); }, pdl, coop);
}
void emu_shared_init(void *p, size_t n);
// the running launch's dynamic shared memory (its smem bytes, 16-byte aligned, 0xff-filled
// at each block start): what the transform puts for `extern __shared__ T x[];`
void *emu_dyn_shared();
// Probing a kernel (the transform's other target): run with default arguments, it records
// its launch bounds and the sizes of its __shared__ variables, then returns.
extern bool emu_probe_on;
inline bool emu_probing() { return emu_probe_on; }
void emu_probe_bounds(int max_threads = 0, int min_blocks = 0);
void emu_probe_begin();
cudaError_t emu_occupancy(const void *key, int *n, int block, size_t dyn_smem);
template <typename... A>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void (*f)(A...), int block,
							  size_t dyn_smem)
{
	emu_probe_begin();
	std::apply(f, std::tuple<std::decay_t<A>...>{});
	return emu_occupancy(emu_key(f), n, block, dyn_smem);
}
// Per-kernel attributes: cudaFuncAttributeMaxDynamicSharedMemorySize alone (CUDA's value);
// value + the kernel's static shared memory must be <= 227 KiB, else cudaErrorInvalidValue
// and the attribute is unchanged. Not a stream operation: allowed during a capture.
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
cudaError_t emu_func_set_attr(const void *key, int attr, int value);
template <typename... A>
cudaError_t cudaFuncSetAttribute(void (*f)(A...), enum cudaFuncAttribute attr, int value)
{
	emu_probe_begin(); /* the kernel's static shared memory */
	std::apply(f, std::tuple<std::decay_t<A>...>{});
	return emu_func_set_attr(emu_key(f), attr, value);
}

// ---- cuBLAS: cublasGemmEx (and strided-batched), column-major, fp32 accumulation, cuBLAS's
// argument checks ----
typedef struct emu_blas *cublasHandle_t;
typedef int cublasStatus_t;
enum {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_EXECUTION_FAILED = 13,
	CUBLAS_STATUS_NOT_SUPPORTED = 15
};
typedef int cublasOperation_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
typedef int cudaDataType_t;
enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef int cublasComputeType_t;
enum { CUBLAS_COMPUTE_32F = 68 };
enum { CUBLAS_GEMM_DEFAULT = -1 };
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *w, size_t n);
cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
			    const void *alpha, const void *A, int at, int lda, const void *B,
			    int bt, int ldb, const void *beta, void *C, int ct, int ldc,
			    int compute, int algo);
// the same for batch i < count at A + i sa, B + i sb, C + i sc (elements), one gemm after another
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
					  const void *alpha, const void *A, int at, int lda,
					  long long sa, const void *B, int bt, int ldb,
					  long long sb, const void *beta, void *C, int ct, int ldc,
					  long long sc, int count, int compute, int algo);
