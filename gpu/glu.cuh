/* glu: the gated activation of the FFN, shared by gpu_swiglu and the gate|up GEMV's
 * epilogue (gpu/gemv.cu), so that both round exactly alike. */
#ifndef BG_GPU_GLU_CUH
#define BG_GPU_GLU_CUH

#include "gpu/gpu_common.cuh"

/* act(g) * u: act is silu, or GELU (tanh form) when gelu. silu(g) = g * sigmoid(g); expf(-g)
 * overflows to inf for g < -88, giving g / inf = -0, the right limit. GELU is the CPU
 * backend's expression with its roundings spelled out (no FMA contraction). */
__device__ __forceinline__ float gpu_glu(float g, float u, bool gelu)
{
	float a;
	if (gelu) {
		float in = __fmul_rn(__fmul_rn(0.79788456080286535588f, g),
				     __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, g), g)));
		a = __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(in)));
	} else {
		a = g / (1.0f + expf(-g));
	}
	return __fmul_rn(a, u);
}

/* gpt-oss's clamped SwiGLU (model.h swiglu_oai), as the CPU backend (ggml's swiglu_oai)
 * computes it: x = min(g, limit), y = clamp(u, -limit, limit), x / (1 + e^(alpha * -x)) *
 * (y + 1); the comparisons written as the CPU's, so that a NaN g gives limit and a NaN u
 * stays NaN there and here. */
__device__ __forceinline__ float gpu_glu_oai(float g, float u, float alpha, float limit)
{
	const float x = g < limit ? g : limit;
	const float y = u < -limit ? -limit : u > limit ? limit : u;
	const float glu = x / (1.0f + expf(alpha * (-x)));
	return __fmul_rn(glu, __fadd_rn(y, 1.0f));
}

/* step35's clamped SwiGLU (model.h clamp_exp / clamp_shexp; limit > 0), as the CPU
 * backend's cpu_swiglu_clamp: min(silu(g), limit) * clamp(u, -limit, limit), silu as
 * gpu_glu's; the comparisons written as the CPU's (a NaN silu gives limit, a NaN u stays
 * NaN). */
__device__ __forceinline__ float gpu_glu_clamp(float g, float u, float limit)
{
	float a = g / (1.0f + expf(-g));
	a = a < limit ? a : limit;
	const float v = u < -limit ? -limit : u > limit ? limit : u;
	return __fmul_rn(a, v);
}

/* nemotron_h's non-gated activation (its dense FFN, gpu_relu2, and its experts' epilogue,
 * gpu/moe.cu): r = max(u, 0), r * r in one fp32 rounding, as the CPU backend's relu2_ffn. */
__device__ __forceinline__ float gpu_relu2f(float u)
{
	const float r = u > 0.0f ? u : 0.0f;
	return __fmul_rn(r, r);
}

#endif
