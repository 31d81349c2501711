/* embed: the token embedding gather, widening the stored rows to the fp32 residual. */
#include "gpu/gpu_ops.cuh"

template <typename T>
__global__ void embed_kernel(const T *embd, const int32_t *tokens, int n_embd, float *x)
{
	int t = blockIdx.x;
	const T *row = embd + (int64_t)tokens[t] * n_embd;
	float *o = x + (int64_t)t * n_embd;
	for (int i = threadIdx.x; i < n_embd; i += blockDim.x)
		o[i] = ld_f32(row[i]);
}

cudaError_t gpu_embed(const void *embd, enum gpu_dtype dt, const int32_t *tokens, int n_tok,
		      int n_embd, float *x, cudaStream_t stream)
{
	if (n_tok <= 0)
		return cudaSuccess;
	GPU_DISPATCH_DTYPE(
	    dt, T, embed_kernel<T><<<n_tok, 256, 0, stream>>>((const T *)embd, tokens, n_embd, x));
	return cudaGetLastError();
}
