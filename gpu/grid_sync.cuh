/* grid_sync: a barrier across all blocks of one cooperative launch (issue 17).
 *
 * At batch 1 a decode step pays a fixed cost per graph node (~6 us on the H200, ESTIMATE:
 * bench/perf_model.py's NODE_US), 5 nodes a llama layer on the fused path. Projections that
 * follow one another (a layer's O, gate|up and down GEMVs, the next layer's QKV) can run as
 * one kernel whose blocks meet at a grid barrier between them (gpu_gemv_chain): the
 * barrier is a round trip of one atomic per block through L2, not a node.
 *
 * The contract:
 *  - the kernel is launched with gpu_launch_coop (cudaLaunchAttributeCooperative): CUDA
 *    then starts every block at once or fails the launch (cudaErrorCooperativeLaunchTooLarge:
 *    more blocks than cudaOccupancyMaxActiveBlocksPerMultiprocessor x SMs); a plain launch
 *    whose blocks wait for one another can hang on a GPU (gpu/emu aborts with a message);
 *  - every thread of every block calls gpu_grid_sync the same number of times;
 *  - bar: GPU_GRID_BAR_WORDS unsigned ints of device memory, zero before its first use,
 *    used by one launch at a time (launches in one stream, graph replays included: each
 *    barrier leaves the count at 0 and moves the generation on);
 *  - after the barrier every block sees every write made before it by any block (the
 *    fences below; CUDA's memory model: a fence-fence synchronisation through the atomics).
 * On gpu/emu the spin's __nanosleep hands the thread back to the scheduler, which runs the
 * other blocks of the cooperative launch (their threads are all resident there too). */
#ifndef BG_GPU_GRID_SYNC_CUH
#define BG_GPU_GRID_SYNC_CUH

#include <cuda_runtime.h>
#include <utility>

#include "gpu/pdl.cuh"

#define GPU_GRID_BAR_WORDS 2 /* [0] blocks arrived, [1] generation */

__device__ __forceinline__ void gpu_grid_sync(unsigned *bar)
{
	__syncthreads();
	if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
		const unsigned nb = gridDim.x * gridDim.y * gridDim.z;
		volatile unsigned *gen = bar + 1;
		const unsigned g = *gen; /* read before arriving: the last arrival moves it on */
		__threadfence();	 /* this block's writes before its arrival */
		if (atomicAdd(bar, 1u) == nb - 1) {
			atomicExch(bar, 0u); /* before the generation moves: the next barrier's count */
			__threadfence();
			atomicAdd(bar + 1, 1u);
		} else {
			while (*gen == g)
				__nanosleep(32);
		}
		__threadfence(); /* the other blocks' writes after the barrier */
	}
	__syncthreads();
}

/* Launches kernel k on (grid, block, smem bytes of dynamic shared memory, stream s) with
 * args as a cooperative launch (cudaLaunchKernelEx with cudaLaunchAttributeCooperative;
 * valid in stream capture: the graph's kernel node keeps the attribute). Returns the
 * launch's error (also left for cudaGetLastError). The caller checks the device's
 * cudaDeviceProp.cooperativeLaunch and keeps grid within the occupancy the contract says. */
template <typename... P, typename... A>
static inline cudaError_t gpu_launch_coop(void (*k)(P...), dim3 grid, dim3 block, size_t smem,
					  cudaStream_t s, A &&...args)
{
	cudaLaunchAttribute attr = {};
	attr.id = cudaLaunchAttributeCooperative;
	attr.val.cooperative = 1;
	return gpu_launch_attr(&attr, k, grid, block, smem, s, std::forward<A>(args)...);
}

#endif
