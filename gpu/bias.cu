/* bias: a bias vector added to fp32 rows after a GEMM, as the CPU backend adds them (one
 * addition per element, so the result is the GEMM's value plus the bias, rounded once):
 * gpt-oss's attention output and router logits (the Q/K/V biases of qwen2 and gpt-oss go
 * through qkv_post.cu, which composes this with the head norms and RoPE). */
#include "gpu/gpu_ops.cuh"

/* One block per token row; the threads stride over its columns. */
__global__ void bias_add_kernel(float *x, int ld, const float *bias, int width)
{
	float *row = x + (int64_t)blockIdx.x * ld;
	for (int i = threadIdx.x; i < width; i += blockDim.x)
		row[i] += bias[i];
}

cudaError_t gpu_bias_add(float *x, int ld, const float *bias, int n_tok, int width,
			 cudaStream_t stream)
{
	if (n_tok <= 0 || width <= 0)
		return cudaSuccess;
	int threads = width >= 256 ? 256 : ((width + 31) / 32) * 32;
	bias_add_kernel<<<n_tok, threads, 0, stream>>>(x, ld, bias, width);
	return cudaGetLastError();
}
