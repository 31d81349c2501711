/* deltanet: qwen35's gated-delta-net layer between its projection GEMM and ssm_out
 * (core/model/model.h's gdn_*; gpu_ops.cuh's gpu_gdn). Correctness first: the recurrence
 * runs a sequence's tokens one after another, a thread per state row. */
#include "gpu/gpu_ops.cuh"

__device__ __forceinline__ float gdn_silu(float x)
{
	return x / __fadd_rn(1.0f, expf(-x));
}

/* Channel i of sequence blockIdx.x: the window of the conv state's conv - 1 rows and the
 * token's u, the fp32 sum over taps in order, SiLU; the state left with the last rows. */
__global__ void gdn_conv_kernel(struct gpu_gdn_args a)
{
	const int CD = 2 * a.nk * a.d + a.nv * a.d, K = a.conv, H = K - 1;
	const int i = blockIdx.y * blockDim.x + threadIdx.x;
	if (i >= CD)
		return;
	const int32_t *sq = a.seq + 3 * blockIdx.x;
	const int t0 = sq[0], n = sq[1];
	float *st = a.state + (int64_t)sq[2] * a.state_stride + (int64_t)i * H;
	const float *w = a.conv_w + (int64_t)i * K;
	float win[GPU_CONV_L_MAX];
	for (int k = 0; k < H; k++)
		win[k] = st[k];
	for (int t = 0; t < n; t++) {
		win[H] = a.proj[(int64_t)(t0 + t) * a.ld + i];
		float sum = 0.0f;
		for (int k = 0; k < K; k++)
			sum = __fadd_rn(sum, __fmul_rn(win[k], w[k]));
		a.cbuf[(int64_t)(t0 + t) * CD + i] = gdn_silu(sum);
		for (int k = 0; k < H; k++)
			win[k] = win[k + 1];
	}
	for (int k = 0; k < H; k++)
		st[k] = win[k];
}

/* 1 / sqrtf(mean of squares + eps) of x[0..n), the squares' sum in double (a warp) */
__device__ __forceinline__ float gdn_rms_scale(const float *x, int n, float eps)
{
	double ss = 0.0;
	for (int i = threadIdx.x; i < n; i += 32)
		ss += (double)__fmul_rn(x[i], x[i]);
	ss = warp_sum_d(ss);
	const float mean = (float)(ss / (double)n);
	return 1.0f / sqrtf(__fadd_rn(mean, eps));
}

/* Row blockIdx.x's Q head or K head blockIdx.y (one warp): x * (1 / sqrt(sum x^2 + eps)),
 * as rms_norm(x, eps / d) * (1 / sqrt(d)) */
__global__ void gdn_qk_norm_kernel(struct gpu_gdn_args a)
{
	const int CD = 2 * a.nk * a.d + a.nv * a.d;
	float *x = a.cbuf + (int64_t)blockIdx.x * CD + (int64_t)blockIdx.y * a.d;
	const float s = gdn_rms_scale(x, a.d, a.eps / (float)a.d);
	const float inv = 1.0f / sqrtf((float)a.d);
	__syncwarp();
	for (int i = threadIdx.x; i < a.d; i += 32)
		x[i] = __fmul_rn(__fmul_rn(x[i], s), inv);
}

/* V head blockIdx.y of sequence blockIdx.x, thread j its state's row j (S's column j):
 * per token in order, the decay, delta_j = (v_j - row . k) beta, row += delta_j k, the
 * output row . q / sqrt(d). */
__global__ void gdn_recur_kernel(struct gpu_gdn_args a)
{
	extern __shared__ float sh[]; /* q, k: d each */
	const int d = a.d, KD = a.nk * d, VD = a.nv * d, CD = 2 * KD + VD;
	const int h = blockIdx.y, kh = h % a.nk, j = threadIdx.x;
	const int32_t *sq = a.seq + 3 * blockIdx.x;
	const int t0 = sq[0], n = sq[1];
	float *M = a.state + (int64_t)sq[2] * a.state_stride + (int64_t)(a.conv - 1) * CD +
		   ((int64_t)h * d + j) * d;
	float *q = sh, *k = sh + d;
	const float scale = 1.0f / sqrtf((float)d);
	for (int t = 0; t < n; t++) {
		const int64_t r = t0 + t;
		const float *c = a.cbuf + r * CD;
		for (int i = threadIdx.x; i < d; i += blockDim.x) {
			q[i] = c[kh * d + i];
			k[i] = c[KD + kh * d + i];
		}
		__syncthreads();
		const float *p = a.proj + r * a.ld + CD + VD;
		const float b = 1.0f / __fadd_rn(1.0f, expf(-p[h]));
		const float x = __fadd_rn(p[a.nv + h], a.dt_a[h]);
		const float g =
		    __fmul_rn(x > 20.0f ? x : logf(__fadd_rn(1.0f, expf(x))), a.dt_a[a.nv + h]);
		const float decay = expf(g);
		float s = 0.0f;
		for (int i = 0; i < d; i++) {
			const float m = __fmul_rn(M[i], decay);
			M[i] = m;
			s = __fadd_rn(s, __fmul_rn(m, k[i]));
		}
		const float delta = __fmul_rn(__fsub_rn(c[2 * KD + h * d + j], s), b);
		float y = 0.0f;
		for (int i = 0; i < d; i++) {
			const float m = __fadd_rn(M[i], __fmul_rn(delta, k[i]));
			M[i] = m;
			y = __fadd_rn(y, __fmul_rn(m, q[i]));
		}
		a.obuf[r * VD + h * d + j] = __fmul_rn(y, scale);
		__syncthreads(); /* q, k read by every thread before the next token's */
	}
}

/* Row blockIdx.x's V head blockIdx.y (one warp): rmsnorm(o) * norm * silu(z), stored as T */
template <typename T> __global__ void gdn_out_kernel(struct gpu_gdn_args a)
{
	const int d = a.d, VD = a.nv * d, CD = 2 * a.nk * d + VD;
	const int64_t r = blockIdx.x;
	const float *o = a.obuf + r * VD + (int64_t)blockIdx.y * d;
	const float *z = a.proj + r * a.ld + CD + (int64_t)blockIdx.y * d;
	const float s = gdn_rms_scale(o, d, a.eps);
	T *out = (T *)a.out + r * VD + (int64_t)blockIdx.y * d;
	for (int i = threadIdx.x; i < d; i += 32)
		out[i] =
		    st_t<T>(__fmul_rn(__fmul_rn(__fmul_rn(o[i], s), a.norm[i]), gdn_silu(z[i])));
}

cudaError_t gpu_gdn(const struct gpu_gdn_args *a, enum gpu_dtype dt, cudaStream_t stream)
{
	if (a->n_tok <= 0 || a->n_seq <= 0)
		return cudaSuccess;
	if (a->conv < 2 || a->conv > GPU_CONV_L_MAX || a->d < 1 || a->d > 1024 || a->nk < 1 ||
	    a->nv % a->nk)
		return cudaErrorInvalidValue;
	const struct gpu_gdn_args g = *a;
	const int CD = 2 * g.nk * g.d + g.nv * g.d;
	gdn_conv_kernel<<<dim3(g.n_seq, (CD + 127) / 128), 128, 0, stream>>>(g);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	gdn_qk_norm_kernel<<<dim3(g.n_tok, 2 * g.nk), 32, 0, stream>>>(g);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	gdn_recur_kernel<<<dim3(g.n_seq, g.nv), g.d, 2 * g.d * sizeof(float), stream>>>(g);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	GPU_DISPATCH_DTYPE(dt, T, gdn_out_kernel<T><<<dim3(g.n_tok, g.nv), 32, 0, stream>>>(g));
	return cudaGetLastError();
}
