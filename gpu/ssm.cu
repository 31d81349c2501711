/* ssm: granitehybrid's Mamba2 block between its ssm_in GEMM and its ssm_out GEMM
 * (core/model/model.h's ssm_* fields; the CPU backend's core/cpu/cpu_ssm.c with its fp32
 * roundings spelled out: no FMA contraction). Each sequence's run of tokens is scanned in
 * order with its state slot; runs of one pass belong to distinct sequences. */
#include "gpu/gpu_ops.cuh"

__device__ __forceinline__ float ssm_silu(float v)
{
	return v / __fadd_rn(1.0f, expf(-v)); /* (a division never contracts) */
}

/* Run r's channels: out[t][i] = silu(conv_b[i] + sum over taps, oldest first, of the
 * xBC rows (the state's before the run's first token)), then the state's rows become the
 * run's last d_conv - 1 xBC rows. */
__global__ void ssm_conv_kernel(struct gpu_ssm_args a)
{
	const int r = blockIdx.x;
	const int i = blockIdx.y * blockDim.x + threadIdx.x;
	const int C = a.D + 2 * a.G * a.N, K = a.d_conv;
	if (i >= C)
		return;
	const int t0 = a.runs[3 * r], n = a.runs[3 * r + 1];
	float *st = a.state + (size_t)a.runs[3 * r + 2] * a.state_floats + a.layer_off;
	const float *w = a.w + (size_t)i * K;
	const float *in = a.zxbcdt + a.D + i;
	for (int j = 0; j < n; j++) {
		float sum = 0.0f;
		for (int k = 0; k < K; k++) {
			const int q = j - (K - 1) + k;
			const float v = q >= 0 ? in[(int64_t)(t0 + q) * a.ld]
					       : st[(int64_t)(K - 1 + q) * C + i];
			sum = __fadd_rn(sum, __fmul_rn(v, w[k]));
		}
		a.xbc[(int64_t)(t0 + j) * C + i] = ssm_silu(__fadd_rn(sum, a.w[(size_t)C * K + i]));
	}
	for (int q = 0; q < K - 1; q++) { /* a state row read is not yet overwritten */
		const int idx = n - (K - 1) + q;
		st[(int64_t)q * C + i] =
		    idx >= 0 ? in[(int64_t)(t0 + idx) * a.ld] : st[(int64_t)(K - 1 + idx) * C + i];
	}
}

/* Run r, head h, row p of its state: per token, dt = softplus(dt + dt_b), S = S exp(dt A)
 * + B (x dt), y = S . C (in order) + x D. */
__global__ void ssm_scan_kernel(struct gpu_ssm_args a)
{
	const int r = blockIdx.x, h = blockIdx.y, p = threadIdx.x;
	const int P = a.D / a.H, N = a.N, C = a.D + 2 * a.G * a.N, K = a.d_conv;
	if (p >= P)
		return;
	const int g = h / (a.H / a.G);
	const int t0 = a.runs[3 * r], n = a.runs[3 * r + 1];
	float *S = a.state + (size_t)a.runs[3 * r + 2] * a.state_floats + a.layer_off +
		   (size_t)(K - 1) * C + ((size_t)h * P + p) * N;
	const float *dt_b = a.w + (size_t)C * (K + 1), *A = dt_b + a.H, *Dk = A + a.H;
	for (int j = 0; j < n; j++) {
		const int64_t t = t0 + j;
		const float *row = a.xbc + t * C;
		const float x = row[h * P + p];
		const float *B = row + a.D + g * N, *Cv = row + a.D + a.G * N + g * N;
		float dt = __fadd_rn(a.zxbcdt[t * a.ld + 2 * a.D + 2 * a.G * N + h], dt_b[h]);
		dt = dt > 20.0f ? dt : logf(__fadd_rn(1.0f, expf(dt)));
		const float dA = expf(__fmul_rn(dt, A[h])), x_dt = __fmul_rn(x, dt);
		float sum = 0.0f;
		for (int k = 0; k < N; k++) {
			const float s = __fadd_rn(__fmul_rn(S[k], dA), __fmul_rn(B[k], x_dt));
			sum = __fadd_rn(sum, __fmul_rn(s, Cv[k]));
			S[k] = s;
		}
		a.y[t * a.D + h * P + p] = __fadd_rn(sum, __fmul_rn(x, Dk[h]));
	}
}

/* Token t, group g: y * silu(z) over the group's D / G values, RMS-normalized (sum of
 * squares in double) times the norm weight, stored as dt; with a.no_norm (falcon-h1
 * without ssm_norm) y * silu(z) as it is. */
template <typename T> __global__ void ssm_norm_kernel(struct gpu_ssm_args a, T *out)
{
	__shared__ double part[128];
	const int64_t t = blockIdx.x;
	const int span = a.D / a.G, g0 = blockIdx.y * span;
	const float *z = a.zxbcdt + t * a.ld, *y = a.y + t * a.D;
	const float *norm = a.w + (size_t)(a.D + 2 * a.G * a.N) * (a.d_conv + 1) + 3 * a.H;
	if (a.no_norm) {
		for (int i = g0 + threadIdx.x; i < g0 + span; i += blockDim.x)
			out[t * a.D + i] = st_t<T>(__fmul_rn(ssm_silu(z[i]), y[i]));
		return;
	}
	double ss = 0.0;
	for (int i = g0 + threadIdx.x; i < g0 + span; i += blockDim.x) {
		const float v = __fmul_rn(ssm_silu(z[i]), y[i]);
		ss += (double)v * v;
	}
	part[threadIdx.x] = ss;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			part[threadIdx.x] += part[threadIdx.x + s];
		__syncthreads();
	}
	const float scale = (float)(1.0 / sqrt(part[0] / (double)span + (double)a.eps));
	for (int i = g0 + threadIdx.x; i < g0 + span; i += blockDim.x) {
		const float v = __fmul_rn(ssm_silu(z[i]), y[i]);
		out[t * a.D + i] = st_t<T>(__fmul_rn(__fmul_rn(v, scale), norm[i]));
	}
}

cudaError_t gpu_ssm(const struct gpu_ssm_args *a, enum gpu_dtype dt, cudaStream_t stream)
{
	if (a->n_tok <= 0 || a->n_runs <= 0)
		return cudaSuccess;
	const int P = a->D / a->H, C = a->D + 2 * a->G * a->N;
	if (a->H <= 0 || a->G <= 0 || a->D % a->H || a->H % a->G || P > 1024 || a->d_conv < 2)
		return cudaErrorInvalidValue;
	const dim3 conv_grid(a->n_runs, (C + 127) / 128), scan_grid(a->n_runs, a->H),
	    norm_grid(a->n_tok, a->G);
	ssm_conv_kernel<<<conv_grid, 128, 0, stream>>>(*a);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	ssm_scan_kernel<<<scan_grid, (P + 31) / 32 * 32, 0, stream>>>(*a);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	const struct gpu_ssm_args args = *a;
	void *out = a->out;
	GPU_DISPATCH_DTYPE(dt, T,
			   ssm_norm_kernel<T><<<norm_grid, 128, 0, stream>>>(args, (T *)out));
	return cudaGetLastError();
}
