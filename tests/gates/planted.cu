// Planted offenders for tests/gpu_gates.sh's self-check (never built into batchgen).
#ifdef PLANT_SPILL
// 1024 threads per block and 2 blocks per SM leave 32 registers a thread: 64 live floats spill.
__global__ void __launch_bounds__(1024, 2) planted_spill(const float *x, float *y, int n)
{
	float v[64];
#pragma unroll
	for (int i = 0; i < 64; i++)
		v[i] = x[(threadIdx.x + i * 977) % n];
	float s = 0;
#pragma unroll
	for (int r = 0; r < 8; r++)
#pragma unroll
		for (int i = 0; i < 64; i++)
			s += v[i] * v[(i * 7 + r) % 64];
	y[threadIdx.x] = s;
}
#endif
#ifdef PLANT_REGS
// 160 values live at once with no launch bound: more registers than the budget.
__global__ void planted_regs(const float *x, float *y, int n)
{
	float v[160];
#pragma unroll
	for (int i = 0; i < 160; i++)
		v[i] = x[(threadIdx.x + i * 977) % n];
	float s = 0;
#pragma unroll
	for (int r = 0; r < 4; r++)
#pragma unroll
		for (int i = 0; i < 160; i++)
			s += v[i] * v[(i * 7 + r) % 160];
	y[threadIdx.x] = s;
}
#endif
