/* embed: the token embedding gather, widening the stored rows to the fp32 residual. A
 * token may be one the previous sampling call drew on the device (overlap: the host has
 * not seen it yet), read here from the sampler's results. */
#include "gpu/gpu_ops.cuh"

template <typename T>
__global__ void embed_kernel(const T *embd, const int32_t *tokens, const struct sampler_result *drawn,
			     int n_vocab, int n_embd, float *x)
{
	int t = blockIdx.x;
	int32_t id = tokens[t];
	if (id < 0) { /* drawn[-1 - id]; a drawn id outside the vocabulary feeds token 0 */
		id = drawn[-1 - id].token;
		if (id < 0 || id >= n_vocab)
			id = 0;
	}
	const T *row = embd + (int64_t)id * n_embd;
	float *o = x + (int64_t)t * n_embd;
	for (int i = threadIdx.x; i < n_embd; i += blockDim.x)
		o[i] = ld_f32(row[i]);
}

cudaError_t gpu_embed(const void *embd, enum gpu_dtype dt, const int32_t *tokens,
		      const struct sampler_result *drawn, int n_tok, int n_vocab, int n_embd,
		      float *x, cudaStream_t stream)
{
	if (n_tok <= 0)
		return cudaSuccess;
	GPU_DISPATCH_DTYPE(dt, T,
			   embed_kernel<T><<<n_tok, 256, 0, stream>>>((const T *)embd, tokens, drawn,
								       n_vocab, n_embd, x));
	return cudaGetLastError();
}
