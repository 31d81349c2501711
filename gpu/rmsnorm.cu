/* rmsnorm: the residual add fused with the RMS normalization that follows it. The
 * residual stream stays fp32; the normalized row is stored as the next GEMM's input. */
#include "gpu/gpu_ops.cuh"

/* The block's sum of v (each thread's part) in double, returned to every thread; red holds
 * one value a warp and is free again on return. */
__device__ static double block_sum_d(double v, double *red)
{
	v = warp_sum_d(v);
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = v;
	__syncthreads();
	if (threadIdx.x < 32) {
		double t = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0;
		t = warp_sum_d(t);
		if (threadIdx.x == 0)
			red[0] = t;
	}
	__syncthreads();
	double r = red[0];
	__syncthreads();
	return r;
}

template <typename T>
__global__ void add_rmsnorm_kernel(float *x, const float *delta, const float *w, float eps,
				   const int32_t *rows, int n, int64_t ldx, bool write_back, T *out)
{
	__shared__ double red[32];
	int i = blockIdx.x;
	int64_t r = rows ? rows[i] : i;
	float *xr = x + r * ldx;
	const float *dr = delta ? delta + r * n : nullptr;
	T *o = out + (int64_t)i * n;
	if (!w) { /* no norm (olmo2's layers): the sum as it is (w is block-uniform) */
		for (int j = threadIdx.x; j < n; j += blockDim.x) {
			float s = xr[j] + (dr ? dr[j] : 0.0f);
			if (write_back)
				xr[j] = s;
			o[j] = st_t<T>(s);
		}
		return;
	}
	/* the sum of squares in double, as the CPU backend does */
	double ss = 0.0;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float s = xr[j] + (dr ? dr[j] : 0.0f);
		ss += (double)s * s;
	}
	float scale = (float)(1.0 / sqrt(block_sum_d(ss, red) / (double)n + (double)eps));
	/* each thread re-reads the elements it summed, so the write-back of x cannot race
	 * with another thread's read */
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float s = xr[j] + (dr ? dr[j] : 0.0f);
		if (write_back)
			xr[j] = s;
		o[j] = st_t<T>((s * scale) * w[j]);
	}
}

cudaError_t gpu_add_rmsnorm(float *x, const float *delta, const float *w, float eps,
			    const int32_t *rows, int n_out, int n, bool write_back, void *out,
			    enum gpu_dtype dt, cudaStream_t stream)
{
	if (n_out <= 0)
		return cudaSuccess;
	int threads = n >= 1024 ? 512 : n >= 256 ? 256 : 64;
	GPU_DISPATCH_DTYPE(dt, T,
			   add_rmsnorm_kernel<T><<<n_out, threads, 0, stream>>>(
			       x, delta, w, eps, rows, n, n, write_back, (T *)out));
	return cudaGetLastError();
}

cudaError_t gpu_rmsnorm_rows(const float *x, int64_t ldx, const float *w, float eps, int n_rows,
			     int n, void *out, enum gpu_dtype dt, cudaStream_t stream)
{
	if (n_rows <= 0)
		return cudaSuccess;
	int threads = n >= 1024 ? 512 : n >= 256 ? 256 : 64;
	GPU_DISPATCH_DTYPE(dt, T,
			   add_rmsnorm_kernel<T><<<n_rows, threads, 0, stream>>>(
			       (float *)x, (const float *)NULL, w, eps, (const int32_t *)NULL, n,
			       ldx, false, (T *)out));
	return cudaGetLastError();
}

/* add_rmsnorm_kernel's LayerNorm: the row's mean (fp32, from a double sum), then the sum
 * of squared deviations in double, as the CPU backend's layernorm. */
template <typename T>
__global__ void add_layernorm_kernel(float *x, const float *delta, const float *w, float eps,
				     const int32_t *rows, int n, bool write_back, T *out)
{
	__shared__ double red[32];
	int i = blockIdx.x;
	int64_t r = rows ? rows[i] : i;
	float *xr = x + r * n;
	const float *dr = delta ? delta + r * n : nullptr;
	T *o = out + (int64_t)i * n;
	double s1 = 0.0;
	for (int j = threadIdx.x; j < n; j += blockDim.x)
		s1 += (double)(xr[j] + (dr ? dr[j] : 0.0f));
	const float mean = (float)(block_sum_d(s1, red) / (double)n);
	double ss = 0.0;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float d = __fsub_rn(xr[j] + (dr ? dr[j] : 0.0f), mean);
		ss += (double)d * d;
	}
	float scale = (float)(1.0 / sqrt(block_sum_d(ss, red) / (double)n + (double)eps));
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float s = xr[j] + (dr ? dr[j] : 0.0f);
		if (write_back)
			xr[j] = s;
		o[j] = st_t<T>(__fmul_rn(__fmul_rn(__fsub_rn(s, mean), scale), w[j]));
	}
}

cudaError_t gpu_add_layernorm(float *x, const float *delta, const float *w, float eps,
			      const int32_t *rows, int n_out, int n, bool write_back, void *out,
			      enum gpu_dtype dt, cudaStream_t stream)
{
	if (n_out <= 0)
		return cudaSuccess;
	if (!w)
		return cudaErrorInvalidValue;
	int threads = n >= 1024 ? 512 : n >= 256 ? 256 : 64;
	GPU_DISPATCH_DTYPE(dt, T,
			   add_layernorm_kernel<T><<<n_out, threads, 0, stream>>>(
			       x, delta, w, eps, rows, n, write_back, (T *)out));
	return cudaGetLastError();
}
