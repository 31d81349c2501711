/* mask: core/sample/sampler.c's sampler_constrain on the device, for the rows of a sampling
 * call that carry a constraint (structured output, logit_bias, min_tokens, bad words).
 *
 * Each constrained row is copied out of the forward's logits into a row of its own (the
 * forward's rows stay as the forward left them, as on the CPU, and rows that share a
 * logits row may carry different constraints), then any sampler reads the copies: the
 * mask is applied before sampling and knows nothing of how sampling is done.
 *
 * Bitwise sampler_constrain: the CPU adds the biases in list order (an id listed twice
 * gets both, one rounding each) and then sets every token its mask leaves out to -inf.
 * Here a block owns a chunk of one row: its threads copy the chunk with the mask applied,
 * then its thread 0 walks the row's bias list in order and adds the biases of the allowed
 * tokens of its chunk (a left-out token ends -inf either way; -inf + b stays -inf). The
 * list is short (logit_bias, the end-of-generation ids, one id per bad word), so the walk
 * costs less than the copy.
 */
#include "gpu/gpu_ops.cuh"

#define MASK_THREADS 256
#define MASK_CHUNK   (MASK_THREADS * 8) /* tokens per block */

__device__ __forceinline__ bool mask_allows(const uint32_t *m, int t)
{
	return m == NULL || ((m[t >> 5] >> (t & 31)) & 1u);
}

/* grid (chunks of MASK_CHUNK tokens, rows) */
__global__ void constrain_kernel(const float *logits, int n_vocab,
				 const struct gpu_constrain_row *rows, const uint32_t *masks,
				 const int32_t *bias_ids, const float *bias, float *out)
{
	const struct gpu_constrain_row r = rows[blockIdx.y];
	const float *src = logits + (int64_t)r.src_row * n_vocab;
	float *dst = out + (int64_t)blockIdx.y * n_vocab;
	const uint32_t *m = r.mask_off >= 0 ? masks + r.mask_off : NULL;
	int t0 = blockIdx.x * MASK_CHUNK;
	int t1 = t0 + MASK_CHUNK < n_vocab ? t0 + MASK_CHUNK : n_vocab;
	/* consecutive threads take consecutive tokens: the loads coalesce and a warp reads one
	 * mask word */
	for (int t = t0 + (int)threadIdx.x; t < t1; t += MASK_THREADS)
		dst[t] = mask_allows(m, t) ? src[t] : -INFINITY;
	__syncthreads();
	if (threadIdx.x != 0)
		return;
	for (int k = 0; k < r.bias_n; k++) {
		int id = bias_ids[r.bias_off + k];
		if (id >= t0 && id < t1 && mask_allows(m, id))
			dst[id] = __fadd_rn(dst[id], bias[r.bias_off + k]);
	}
}

cudaError_t gpu_constrain(const float *logits, int n_vocab, const struct gpu_constrain_row *rows,
			  int n_rows, const uint32_t *masks, const int32_t *bias_ids,
			  const float *bias, float *out, cudaStream_t stream)
{
	if (n_rows <= 0 || n_vocab <= 0)
		return cudaSuccess;
	dim3 grid(gpu_div_up((uint64_t)n_vocab, MASK_CHUNK), (unsigned)n_rows);
	constrain_kernel<<<grid, MASK_THREADS, 0, stream>>>(logits, n_vocab, rows, masks, bias_ids,
							     bias, out);
	return cudaGetLastError();
}
