/* deltanet: qwen35's gated-delta-net layer between its projection GEMM and ssm_out
 * (core/model/model.h's gdn_*; gpu_ops.cuh's gpu_gdn). Correctness first: the recurrence
 * runs a sequence's tokens one after another, a thread per state row. */
#include "gpu/gpu_ops.cuh"

__device__ __forceinline__ float gdn_silu(float x)
{
	return x / __fadd_rn(1.0f, expf(-x));
}

/* Channel i of sequence blockIdx.x: per token the fp32 sum over taps in order of the inputs
 * (the conv state's conv - 1 rows, then u's), SiLU; the state left with the last rows. No
 * window array (a stack frame, which tests/gpu_gates.sh refuses): inputs read again. */
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
	const float *u = a.proj + (int64_t)t0 * a.ld + i;
	for (int t = 0; t < n; t++) {
		float sum = 0.0f;
		for (int k = 0; k < K; k++) {
			const int q = t - H + k;
			const float x = q < 0 ? st[H + q] : u[(int64_t)q * a.ld];
			sum = __fadd_rn(sum, __fmul_rn(x, w[k]));
		}
		a.cbuf[(int64_t)(t0 + t) * CD + i] = gdn_silu(sum);
	}
	for (int k = 0; k < H; k++) { /* st[k + n] is read before it is written */
		const int q = n - H + k;
		st[k] = q >= 0 ? u[(int64_t)q * a.ld] : st[k + n];
	}
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
	const int h = blockIdx.y, kh = a.k_grouped ? h / (a.nv / a.nk) : h % a.nk, j = threadIdx.x;
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

/* Row blockIdx.x of qkv ([per head q | gate] (2 n_q) | K | V): copied into scratch, then
 * written back as [Q | K | V] with the gates into gate ([n_tok][n_q]) */
__global__ void q_gate_split_kernel(float *qkv, int ld, int n_head, int hd, int n_kv,
				    float *scratch, float *gate)
{
	const int64_t r = blockIdx.x;
	const int nq = n_head * hd, w = 2 * nq + 2 * n_kv;
	float *row = qkv + r * ld, *s = scratch + r * w;
	for (int i = threadIdx.x; i < w; i += blockDim.x)
		s[i] = row[i];
	__syncthreads();
	for (int i = threadIdx.x; i < nq; i += blockDim.x) {
		const int h = i / hd, e = i % hd;
		row[i] = s[2 * h * hd + e];
		gate[r * nq + i] = s[2 * h * hd + hd + e];
	}
	for (int i = threadIdx.x; i < 2 * n_kv; i += blockDim.x)
		row[nq + i] = s[2 * nq + i];
}

cudaError_t gpu_q_gate_split(float *qkv, int ld, int n_tok, int n_head, int hd, int n_kv,
			     float *scratch, float *gate, cudaStream_t stream)
{
	if (n_tok <= 0)
		return cudaSuccess;
	q_gate_split_kernel<<<n_tok, 256, 0, stream>>>(qkv, ld, n_head, hd, n_kv, scratch, gate);
	return cudaGetLastError();
}

/* attn[i] *= sigmoid(gate[i / per]) (the product in fp32, stored as T): per 1 elementwise
 * (qwen35), per hd a gate a head (step35: attn's rows are [n_head][hd], gate's [n_head]) */
template <typename T>
__global__ void attn_gate_kernel(T *attn, const float *gate, int64_t n, int per)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		attn[i] = st_t<T>(
		    __fmul_rn(ld_f32(attn[i]), 1.0f / __fadd_rn(1.0f, expf(-gate[i / per]))));
}

static cudaError_t attn_gate(void *attn, const float *gate, int64_t n, int per, enum gpu_dtype dt,
			     cudaStream_t stream)
{
	if (n <= 0)
		return cudaSuccess;
	if (per < 1)
		return cudaErrorInvalidValue;
	const int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
	GPU_DISPATCH_DTYPE(
	    dt, T, attn_gate_kernel<T><<<blocks, 256, 0, stream>>>((T *)attn, gate, n, per));
	return cudaGetLastError();
}

cudaError_t gpu_attn_gate(void *attn, const float *gate, int n_tok, int n_q, enum gpu_dtype dt,
			  cudaStream_t stream)
{
	return attn_gate(attn, gate, (int64_t)n_tok * n_q, 1, dt, stream);
}

cudaError_t gpu_head_gate(void *attn, const float *gate, int n_tok, int n_head, int hd,
			  enum gpu_dtype dt, cudaStream_t stream)
{
	return attn_gate(attn, gate, (int64_t)n_tok * n_head * hd, hd, dt, stream);
}
