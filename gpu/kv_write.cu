/* kv_write: stores the new tokens' K and V rows into their paged slots. */
#include "gpu/gpu_ops.cuh"

template <typename T>
__global__ void kv_write_kernel(const float *qkv, int ld, int k_col, int v_col,
				const int32_t *slots, struct gpu_kv_layer kv)
{
	int t = blockIdx.x;
	int32_t slot = slots[t];
	int64_t b = slot / kv.block_size, s = slot % kv.block_size;
	T *k = (T *)kv.base + b * kv.block_stride + s * kv.kv_dim;
	T *v = k + kv.v_offset;
	const float *row = qkv + (int64_t)t * ld;
	for (int d = threadIdx.x; d < kv.kv_dim; d += blockDim.x) {
		k[d] = st_t<T>(row[k_col + d]);
		v[d] = st_t<T>(row[v_col + d]);
	}
}

cudaError_t gpu_kv_write(const float *qkv, int ld, int k_col, int v_col, const int32_t *slots,
			 int n_tok, struct gpu_kv_layer kv, enum gpu_dtype dt, cudaStream_t stream)
{
	if (n_tok <= 0)
		return cudaSuccess;
	int threads = kv.kv_dim >= 256 ? 256 : ((kv.kv_dim + 31) / 32) * 32;
	GPU_DISPATCH_DTYPE(dt, T,
			   kv_write_kernel<T>
			   <<<n_tok, threads, 0, stream>>>(qkv, ld, k_col, v_col, slots, kv));
	return cudaGetLastError();
}
