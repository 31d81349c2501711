/* gemm: every projection of the model as one cuBLAS call over all tokens of the
 * iteration. Row-major y[n_tok, n_out] = x[n_tok, n_in] W^T is, in cuBLAS's column-major
 * terms, Y(n_out x n_tok) = W^T(n_out x n_in) X(n_in x n_tok) with W stored (n_in x n_out). */
#include <string.h>

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

cublasStatus_t gpu_gemm_heads(cublasHandle_t h, const void *W, const void *x, int ldx, int64_t sx,
			      void *y, enum gpu_dtype ydt, int ldy, int64_t sy, int n_out, int n_in,
			      int n_tok, int n_heads, enum gpu_dtype dt)
{
	if (n_tok <= 0 || n_heads <= 0)
		return CUBLAS_STATUS_SUCCESS;
	const float alpha = 1.0f, beta = 0.0f;
	cudaDataType_t ab = dt == GPU_F32 ? CUDA_R_32F : dt == GPU_F16 ? CUDA_R_16F : CUDA_R_16BF;
	cudaDataType_t yt = ydt == GPU_F32 ? CUDA_R_32F : ab;
	return cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_tok, n_in, &alpha,
					  W, ab, n_in, (long long)n_out * n_in, x, ab, ldx,
					  (long long)sx, &beta, y, yt, ldy, (long long)sy, n_heads,
					  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
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
	int64_t n_out = 0;
	for (int i = 0; i < q->n_part; i++) {
		if (gpu_qtype_row_bytes(q->type[i], n_in) == 0 || q->rows[i] < 1)
			return CUBLAS_STATUS_INVALID_VALUE;
		n_out += q->rows[i];
	}
	/* slices of the rows of all parts together: every part's share of a slice dequantized
	 * (a BF16 part copied) into the scratch at its row, then one GEMM a slice */
	for (int64_t s0 = 0; s0 < n_out; s0 += max_rows) {
		const int64_t s1 = n_out - s0 < max_rows ? n_out : s0 + max_rows;
		int64_t r0 = 0; /* part i's first row */
		for (int i = 0; i < q->n_part; r0 += q->rows[i], i++) {
			const int64_t a = r0 > s0 ? r0 : s0,
				      b = r0 + q->rows[i] < s1 ? r0 + q->rows[i] : s1;
			if (a >= b)
				continue;
			const size_t rb = gpu_qtype_row_bytes(q->type[i], n_in);
			const void *src = (const uint8_t *)q->p[i] + (size_t)(a - r0) * rb;
			void *dst = (uint8_t *)scratch + (size_t)(a - s0) * (size_t)n_in * 2;
			const uint64_t n = (uint64_t)(b - a) * (uint64_t)n_in;
			cudaError_t e =
			    q->type[i] == 30
				? gpu_convert_weights(src, 30, n, dst, GPU_BF16, stream)
				: gpu_dequant_weights(src, q->type[i], n, dst, GPU_BF16, stream);
			if (e != cudaSuccess)
				return CUBLAS_STATUS_EXECUTION_FAILED;
		}
		/* the same stream as the handle's: the GEMM reads the scratch after the
		 * dequantization, and the next slice's waits for this GEMM */
		cublasStatus_t st =
		    gpu_gemm(h, scratch, x, y + s0, (int)(s1 - s0), n_in, n_tok, ldy, GPU_BF16);
		if (n_calls)
			++*n_calls;
		if (st != CUBLAS_STATUS_SUCCESS)
			return st;
	}
	return CUBLAS_STATUS_SUCCESS;
}

bool gpu_qres_policy(const char *setting, uint64_t n_params, size_t free_bytes)
{
	if (setting && (strcmp(setting, "0") == 0 || strcmp(setting, "1") == 0))
		return setting[0] == '1';
	return 2.0 * (double)n_params > 0.5 * (double)free_bytes;
}
