/* gemm: every projection of the model as one cuBLAS call over all tokens of the
 * iteration. Row-major y[n_tok, n_out] = x[n_tok, n_in] W^T is, in cuBLAS's column-major
 * terms, Y(n_out x n_tok) = W^T(n_out x n_in) X(n_in x n_tok) with W stored (n_in x n_out). */
#include "gpu/gpu_ops.cuh"

cublasStatus_t gpu_gemm(cublasHandle_t h, const void *W, const void *x, float *y, int n_out,
			int n_in, int n_tok, int ldy, enum gpu_dtype dt)
{
	if (n_tok <= 0)
		return CUBLAS_STATUS_SUCCESS;
	const float alpha = 1.0f, beta = 0.0f;
	cudaDataType_t ab = dt == GPU_F32 ? CUDA_R_32F : dt == GPU_F16 ? CUDA_R_16F : CUDA_R_16BF;
	/* CUBLAS_COMPUTE_32F (not _FAST_TF32): F32 models are exactness tests against the
	 * CPU, and 16-bit inputs accumulate in fp32 either way. */
	return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_tok, n_in, &alpha, W, ab, n_in, x,
			    ab, n_in, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
			    CUBLAS_GEMM_DEFAULT);
}
