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

cublasStatus_t gpu_gemm_q(cublasHandle_t h, const struct gpu_qmat *q, const void *x, float *y,
			  int n_in, int n_tok, int ldy, void *scratch, size_t scratch_bytes,
			  int *n_calls, cudaStream_t stream)
{
	if (n_tok <= 0)
		return CUBLAS_STATUS_SUCCESS;
	const int64_t max_rows = (int64_t)(scratch_bytes / ((size_t)n_in * 2));
	if (max_rows < 1 || q->n_part < 1 || q->n_part > GPU_QMAT_PARTS)
		return CUBLAS_STATUS_INVALID_VALUE;
	int64_t r0 = 0; /* the part's first row: its first column of y */
	for (int i = 0; i < q->n_part; i++) {
		const size_t rb = gpu_qtype_row_bytes(q->type[i], n_in);
		if (rb == 0)
			return CUBLAS_STATUS_INVALID_VALUE;
		if (q->type[i] == 30) { /* a BF16 part: its rows are the GEMM's operand as they are */
			cublasStatus_t st = gpu_gemm(h, q->p[i], x, y + r0, q->rows[i], n_in, n_tok,
						     ldy, GPU_BF16);
			if (n_calls)
				++*n_calls;
			if (st != CUBLAS_STATUS_SUCCESS)
				return st;
			r0 += q->rows[i];
			continue;
		}
		for (int64_t s = 0; s < q->rows[i]; s += max_rows) {
			const int64_t n = q->rows[i] - s < max_rows ? q->rows[i] - s : max_rows;
			if (gpu_dequant_weights((const uint8_t *)q->p[i] + s * rb, q->type[i],
						(uint64_t)(n * n_in), scratch, GPU_BF16,
						stream) != cudaSuccess)
				return CUBLAS_STATUS_EXECUTION_FAILED;
			/* the same stream as the handle's: the GEMM reads the scratch after the
			 * dequantization, and the next slice's waits for this GEMM */
			cublasStatus_t st = gpu_gemm(h, scratch, x, y + r0 + s, (int)n, n_in, n_tok,
						     ldy, GPU_BF16);
			if (n_calls)
				++*n_calls;
			if (st != CUBLAS_STATUS_SUCCESS)
				return st;
		}
		r0 += q->rows[i];
	}
	return CUBLAS_STATUS_SUCCESS;
}
