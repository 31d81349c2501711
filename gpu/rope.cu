/* rope: rotary position embedding of the q and k heads, in place in the fp32 QKV rows.
 *
 * No trigonometry on the device. The host tabulates, once per model, cos and sin of
 * d * 2^s * freq[i] in double (rounded to fp32) for the three digits of a position
 * (pos = d0 + 2^11 d1 + 2^21 d2, d0 < 2048, d1 < 1024, d2 < 1024: every int32 position
 * >= 0); the kernel composes the three rotations with two complex products in fp32 (FMA).
 * Invariant: row 0 of every digit table is exactly (1, 0), so for pos < 2048 the products
 * are exact and the result is bitwise (float)cos(pos * freq[i]), the CPU backend's value;
 * beyond, each product adds at most ~1 fp32 ulp (measured in tests/gpu_test_kernels.cu). */
#include "gpu/rope.cuh"

#include <math.h>

extern "C" void gpu_rope_table_fill(const double *freq, int half, float *table)
{
	static const int rows[3] = {GPU_ROPE_ROWS0, GPU_ROPE_ROWS1, GPU_ROPE_ROWS2};
	static const int shift[3] = {0, 11, 21};
	float *t = table;
	for (int l = 0; l < 3; l++)
		for (int d = 0; d < rows[l]; d++, t += 2 * half)
			for (int i = 0; i < half; i++) {
				double th = (double)((int64_t)d << shift[l]) * freq[i];
				t[2 * i] = d == 0 ? 1.0f : (float)cos(th);
				t[2 * i + 1] = d == 0 ? 0.0f : (float)sin(th);
			}
}

/* One block per token; thread k handles rotation pair k % half of head k / half. */
__global__ void rope_kernel(float *qkv, int ld, const int32_t *pos, int n_heads, int head_dim,
			    int rope_dim, const float2 *table, float mscale, bool neox)
{
	int t = blockIdx.x;
	int p = pos[t];
	int half = rope_dim / 2;
	float *row = qkv + (int64_t)t * ld;
	for (int k = threadIdx.x; k < n_heads * half; k += blockDim.x) {
		int h = k / half, i = k - h * half;
		float *hp = row + (int64_t)h * head_dim;
		int a, b;
		float y0, y1;
		rope_rotation(hp, table, p, half, i, mscale, neox, &a, &b, &y0, &y1);
		hp[a] = y0;
		hp[b] = y1;
	}
}

cudaError_t gpu_rope(float *qkv, int ld, const int32_t *pos, int n_tok, int n_head, int n_head_kv,
		     int head_dim, int rope_dim, const float *table, float mscale, bool neox,
		     cudaStream_t stream)
{
	if (n_tok <= 0 || rope_dim < 2)
		return cudaSuccess;
	int work = (n_head + n_head_kv) * (rope_dim / 2);
	int threads = work >= 256 ? 256 : ((work + 31) / 32) * 32;
	rope_kernel<<<n_tok, threads, 0, stream>>>(qkv, ld, pos, n_head + n_head_kv, head_dim,
						   rope_dim, (const float2 *)table, mscale, neox);
	return cudaGetLastError();
}
