/* weights: converting GGUF tensors to the device storage type, and the seeded random
 * weights of a lazy synthetic model (made on the device: no host copy of 8B parameters). */
#include "gpu/gpu_ops.cuh"

template <typename T>
__global__ void convert_kernel(const void *src, int src_type, uint64_t n, T *dst)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float v;
		switch (src_type) {
		case 0: v = ((const float *)src)[i]; break;
		case 1: v = __half2float(((const __half *)src)[i]); break;
		case 30: v = __bfloat162float(((const __nv_bfloat16 *)src)[i]); break;
		default: { /* 8: q8_0, blocks of 34 bytes: fp16 scale, 32 int8 */
			const uint8_t *blk = (const uint8_t *)src + (i / 32) * 34;
			__half d = *(const __half *)blk;
			v = __half2float(d) * (float)((const int8_t *)(blk + 2))[i % 32];
		} break;
		}
		dst[i] = st_t<T>(v);
	}
}

cudaError_t gpu_convert_weights(const void *src, int src_type, uint64_t n, void *dst,
				enum gpu_dtype dt, cudaStream_t stream)
{
	if (n == 0)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks(n);
	GPU_DISPATCH_DTYPE(
	    dt, T, convert_kernel<T><<<blocks, 256, 0, stream>>>(src, src_type, n, (T *)dst));
	return cudaGetLastError();
}

/* splitmix64's finalizer: a good 64-bit mix, so that neighbouring (tensor, i) pairs give
 * independent-looking bits. */
__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

template <typename T>
__global__ void synth_kernel(T *dst, uint64_t n, uint64_t seed, uint64_t tensor, float stddev)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	uint64_t key = mix64(seed ^ mix64(tensor + 0x9e3779b97f4a7c15ull));
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float v = 1.0f;
		if (stddev != 0.0f) {
			uint64_t h = mix64(key + i * 0x9e3779b97f4a7c15ull);
			/* Box-Muller on two 24-bit uniforms; u1 in (0, 1] keeps the log finite */
			float u1 = ((float)(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
			float u2 = (float)((h >> 8) & 0xffffff) * (1.0f / 16777216.0f);
			v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * stddev;
		}
		dst[i] = st_t<T>(v);
	}
}

cudaError_t gpu_synth_weights(void *dst, enum gpu_dtype dt, uint64_t n, uint64_t seed,
			      uint64_t tensor, float stddev, cudaStream_t stream)
{
	if (n == 0)
		return cudaSuccess;
	unsigned blocks = gpu_grid_blocks(n);
	GPU_DISPATCH_DTYPE(
	    dt, T, synth_kernel<T><<<blocks, 256, 0, stream>>>((T *)dst, n, seed, tensor, stddev));
	return cudaGetLastError();
}
