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

#endif
