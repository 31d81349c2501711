/* pdl: programmatic dependent launch (Hopper, compute capability >= 9.0; issue 17).
 *
 * A kernel launched with gpu_launch(..., pdl = true, ...) may be started while the kernel
 * before it in the stream (or graph) is still running its last wave, and do what does not
 * depend on that kernel (pull its weights into L2) before it waits. At batch 1 a decode
 * step pays a fixed cost a graph node (bench/perf_model.py's NODE_US): PDL hides the launch
 * gap and the next kernel's DRAM ramp, not the wait's release.
 *
 * The contract of a kernel launched with pdl (CUDA programming guide, "Programmatic
 * Dependent Launch and Synchronization"):
 *  - each thread calls gpu_pdl_wait() before it reads or writes any memory the kernel
 *    before it reads or writes (RAW and WAR); gpu/emu is stricter: before its wait a
 *    thread may touch no device memory at all (it faults there and the emulator names the
 *    kernel and the address);
 *  - every block calls gpu_pdl_wait() before it exits: a block that could finish without
 *    waiting would let the kernel after this one start before the one before it completed
 *    (the ordering is transitive only through the waits); gpu/emu aborts on such a block;
 *  - gpu_pdl_trigger() only lets the next kernel be scheduled earlier (once every block
 *    has triggered or exited); it makes nothing visible. Without it the trigger is
 *    implicit at completion.
 * Launched without pdl, or on a device below 9.0, the wait and the trigger do nothing, so a
 * kernel written this way is correct either way. The device side is compiled for sm_90 and
 * up (griddepcontrol is sm_90 PTX) and for the emulator, which plays a 9.0 device. */
#ifndef BG_GPU_PDL_CUH
#define BG_GPU_PDL_CUH

#include <cuda_runtime.h>
#include <string.h>
#include <utility>

#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(EMU_DEVICE_SM)
#define GPU_PDL_DEVICE 1
#endif

/* Blocks until the kernel before this one completed and its memory is visible. */
__device__ __forceinline__ void gpu_pdl_wait()
{
#ifdef GPU_PDL_DEVICE
	cudaGridDependencySynchronize();
#endif
}

/* Lets the next kernel (launched with pdl) be scheduled before this one completes. */
__device__ __forceinline__ void gpu_pdl_trigger()
{
#ifdef GPU_PDL_DEVICE
	cudaTriggerProgrammaticLaunchCompletion();
#endif
}

/* A hint: the 128-byte line holding p into L2 (global memory only). Changes no value; on
 * the emulator it checks that p lies in a cudaMalloc allocation. */
__device__ __forceinline__ void gpu_prefetch_l2(const void *p)
{
#if defined(__CUDA_ARCH__)
	asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#elif defined(EMU_DEVICE_SM)
	emu_prefetch_l2(p);
#else
	(void)p;
#endif
}

/* Launches kernel k on (grid, block, smem bytes of dynamic shared memory, stream s) with
 * args through cudaLaunchKernelEx, with the one attribute attr (none when NULL). */
template <typename... P, typename... A>
static inline cudaError_t gpu_launch_attr(const cudaLaunchAttribute *attr, void (*k)(P...),
					  dim3 grid, dim3 block, size_t smem, cudaStream_t s,
					  A &&...args)
{
	cudaLaunchAttribute a[1] = {};
	if (attr)
		a[0] = *attr;
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = s;
	cfg.attrs = a;
	cfg.numAttrs = attr ? 1 : 0;
	return cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
}

/* Launches kernel k on (grid, block, smem bytes of dynamic shared memory, stream s) with
 * args, through cudaLaunchKernelEx: with the attribute
 * cudaLaunchAttributeProgrammaticStreamSerialization when pdl (a programmatic edge in a
 * captured graph, CUDA >= 12.3), as a plain launch otherwise. The caller decides
 * pdl: a device of compute capability >= 9.0, BG_CUDA_PDL not 0, a kernel that keeps the
 * contract above. Returns the launch's error (also left for cudaGetLastError). */
template <typename... P, typename... A>
static inline cudaError_t gpu_launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem,
				     cudaStream_t s, bool pdl, A &&...args)
{
	cudaLaunchAttribute attr = {};
	attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr.val.programmaticStreamSerializationAllowed = 1;
	return gpu_launch_attr(pdl ? &attr : nullptr, k, grid, block, smem, s,
			       std::forward<A>(args)...);
}

#endif
