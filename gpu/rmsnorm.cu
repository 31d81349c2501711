/* rmsnorm: the residual add fused with the RMS normalization that follows it. The
 * residual stream stays fp32; the normalized row is stored as the next GEMM's input. */
#include "gpu/gpu_ops.cuh"

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
	ss = warp_sum_d(ss);
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = ss;
	__syncthreads();
	if (threadIdx.x < 32) {
		double v = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0;
		v = warp_sum_d(v);
		if (threadIdx.x == 0)
			red[0] = v;
	}
	__syncthreads();
	float scale = (float)(1.0 / sqrt(red[0] / (double)n + (double)eps));
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
