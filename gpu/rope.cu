/* rope: rotary position embedding of the q and k heads, in place in the fp32 QKV rows. */
#include "gpu/gpu_ops.cuh"

/* One block per token; thread k handles rotation pair k of one head. The angle and its
 * sine/cosine are computed in double and rounded to fp32, then scaled by mscale (YaRN,
 * LongRoPE), as the CPU backend does: in fp32, pos * freq would be off by up to ~2e-4
 * rad at position 4096. */
__global__ void rope_kernel(float *qkv, int ld, const int32_t *pos, int n_heads, int head_dim,
			    int rope_dim, const double *freq, float mscale, bool neox)
{
	int t = blockIdx.x;
	double p = (double)pos[t];
	int half = rope_dim / 2;
	float *row = qkv + (int64_t)t * ld;
	for (int k = threadIdx.x; k < n_heads * half; k += blockDim.x) {
		int h = k / half, i = k % half;
		double theta = p * freq[i];
		double sd, cd;
		sincos(theta, &sd, &cd);
		float s = __fmul_rn((float)sd, mscale), c = __fmul_rn((float)cd, mscale);
		float *hp = row + (int64_t)h * head_dim;
		int a = neox ? i : 2 * i;
		int b = neox ? i + half : 2 * i + 1;
		float x0 = hp[a], x1 = hp[b];
		/* explicit roundings: nvcc would contract these into FMAs (one rounding less),
		 * which the CPU backend's plain x0 * c - x1 * s does not do */
		hp[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
		hp[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
	}
}

cudaError_t gpu_rope(float *qkv, int ld, const int32_t *pos, int n_tok, int n_head, int n_head_kv,
		     int head_dim, int rope_dim, const double *freq, float mscale, bool neox,
		     cudaStream_t stream)
{
	if (n_tok <= 0 || rope_dim < 2)
		return cudaSuccess;
	int work = (n_head + n_head_kv) * (rope_dim / 2);
	int threads = work >= 256 ? 256 : ((work + 31) / 32) * 32;
	rope_kernel<<<n_tok, threads, 0, stream>>>(qkv, ld, pos, n_head + n_head_kv, head_dim,
						   rope_dim, freq, mscale, neox);
	return cudaGetLastError();
}
