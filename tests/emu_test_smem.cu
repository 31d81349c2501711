// emu_test_smem: dynamic shared memory in the CUDA emulator (gpu/emu) and CUDA's limits on
// it, with expectations from CUDA's documented rules (gpu/emu/inc/emu.h):
//  - `extern __shared__ float buf[];` is the launch's dynamic shared memory (its third
//    parameter's bytes), shared by the block's threads (a thread reads what another wrote
//    before the barrier);
//  - it holds 0xff bytes (NaN as floats) at each block start, the second block too, after
//    the first wrote all of it;
//  - the limits: without cudaFuncSetAttribute a launch may ask 48 KiB less the kernel's
//    static shared memory (a kernel without static: 48 KiB exactly); one byte more fails
//    with cudaErrorInvalidValue, which cudaGetLastError reports once, and runs nothing;
//    after cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, v) up to v,
//    v + 1 fails; v + static > 227 KiB (an H100's sharedMemPerBlockOptin) is refused by
//    cudaFuncSetAttribute itself (cudaErrorInvalidValue, the attribute unchanged); the
//    attribute belongs to one kernel, not to the others.
// Written as CUDA source: tests/e2e_gpu_emu.sh runs it through gpu/emu/transform.py and
// builds it with the plugin's emu.o, so the transform's rewriting is tested with it.
#include "emu.h"

#include "tests/check.h"

#define ST_FLOATS 1024 /* static shared memory of dyn_static: 4 KiB */

// out[b * 2n + i]: the bits of buf[i] before anyone wrote (thread i, block b); out[b * 2n
// + n + i]: buf[(i + 1) % n] after every thread i wrote b * 1000 + i (n = blockDim.x)
__global__ void dyn_only(unsigned *out)
{
	extern __shared__ float buf[];
	const int n = (int)blockDim.x, i = (int)threadIdx.x, b = (int)blockIdx.x;
	unsigned u;
	memcpy(&u, &buf[i], 4);
	out[b * 2 * n + i] = u;
	__syncthreads();
	buf[i] = (float)(b * 1000 + i);
	__syncthreads();
	float v = buf[(i + 1) % n];
	memcpy(&u, &v, 4);
	out[b * 2 * n + n + i] = u;
}

// out[0] = the last float of its dynamic buffer's nbytes (NaN bits if the fill reached it),
// st[0] written and read back: out[1] = 7
__global__ void dyn_static(unsigned *out, int nbytes)
{
	__shared__ float st[ST_FLOATS];
	extern __shared__ __align__(16) float dbuf[];
	if (threadIdx.x == 0) {
		st[0] = 7.0f;
		unsigned u;
		memcpy(&u, &dbuf[nbytes / 4 - 1], 4);
		out[0] = u;
		out[1] = (unsigned)st[0];
	}
}

// launches dyn_static with smem bytes; returns cudaGetLastError's answer; *ran: it ran
static cudaError_t launch_static(unsigned *d, int smem, bool *ran)
{
	d[0] = d[1] = 0;
	dyn_static<<<1, 32, smem>>>(d, smem);
	cudaError_t e = cudaGetLastError();
	cudaDeviceSynchronize();
	*ran = d[1] == 7;
	if (*ran)
		CHECK(d[0] == 0xffffffffu, "the last float of %d dynamic bytes: 0xff-filled (%#x)",
		      smem, d[0]);
	return e;
}

int main()
{
	unsigned *d = nullptr;
	const int n = 64;
	CHECK(cudaMalloc(&d, 2 * 2 * n * sizeof(unsigned)) == cudaSuccess, "cudaMalloc");

	// the dynamic array, its fill at each block start, shared by the block
	memset(d, 0, 2 * 2 * n * sizeof(unsigned));
	dyn_only<<<2, n, n * sizeof(float)>>>(d);
	CHECK(cudaGetLastError() == cudaSuccess, "dyn_only launches");
	cudaDeviceSynchronize();
	int nan_fill = 0, shared_ok = 0;
	for (int b = 0; b < 2; b++)
		for (int i = 0; i < n; i++) {
			nan_fill += d[b * 2 * n + i] == 0xffffffffu;
			float want = (float)(b * 1000 + (i + 1) % n), got;
			memcpy(&got, &d[b * 2 * n + n + i], 4);
			shared_ok += got == want;
		}
	CHECK(nan_fill == 2 * n,
	      "unwritten dynamic shared memory reads 0xff bytes in both blocks "
	      "(%d of %d)",
	      nan_fill, 2 * n);
	CHECK(shared_ok == 2 * n, "each thread read its neighbour's write (%d of %d)", shared_ok,
	      2 * n);

	// without the opt-in: 48 KiB less the static 4 KiB, not one 16 bytes more
	const int st = ST_FLOATS * 4, dflt = (48 << 10) - st, optin = 227 << 10;
	bool ran;
	CHECK(launch_static(d, dflt, &ran) == cudaSuccess && ran, "48 KiB - static: runs");
	cudaError_t e = launch_static(d, dflt + 16, &ran);
	CHECK(e == cudaErrorInvalidValue && !ran,
	      "48 KiB - static + 16 without the opt-in: cudaErrorInvalidValue (%s), nothing ran",
	      cudaGetErrorName(e));
	CHECK(cudaGetLastError() == cudaSuccess, "the error is reported once");
	// a kernel without static shared memory: 48 KiB exactly, not more
	dyn_only<<<1, n, 48 << 10>>>(d);
	CHECK(cudaGetLastError() == cudaSuccess, "dyn_only, 48 KiB: launches");
	cudaDeviceSynchronize();
	dyn_only<<<1, n, (48 << 10) + 4>>>(d);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue, "dyn_only, 48 KiB + 4: refused");

	// with it: up to the attribute
	CHECK(cudaFuncSetAttribute(dyn_static, cudaFuncAttributeMaxDynamicSharedMemorySize,
				   100 << 10) == cudaSuccess,
	      "opt-in to 100 KiB");
	CHECK(launch_static(d, 100 << 10, &ran) == cudaSuccess && ran,
	      "100 KiB after the opt-in: runs");
	e = launch_static(d, (100 << 10) + 16, &ran);
	CHECK(e == cudaErrorInvalidValue && !ran, "100 KiB + 16: cudaErrorInvalidValue (%s)",
	      cudaGetErrorName(e));
	// the attribute is dyn_static's alone
	dyn_only<<<1, n, 64 << 10>>>(d);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue,
	      "dyn_only, 64 KiB, not opted in: refused");

	// the H100's 227 KiB, static included
	CHECK(cudaFuncSetAttribute(dyn_static, cudaFuncAttributeMaxDynamicSharedMemorySize,
				   optin - st) == cudaSuccess,
	      "opt-in to 227 KiB - static");
	CHECK(launch_static(d, optin - st, &ran) == cudaSuccess && ran, "227 KiB - static: runs");
	e = cudaFuncSetAttribute(dyn_static, cudaFuncAttributeMaxDynamicSharedMemorySize,
				 optin - st + 1);
	CHECK(e == cudaErrorInvalidValue, "opt-in past 227 KiB with static: refused (%s)",
	      cudaGetErrorName(e));
	CHECK(cudaGetLastError() == cudaErrorInvalidValue, "cudaGetLastError reports the refusal");
	e = launch_static(d, optin - st + 16, &ran);
	CHECK(e == cudaErrorInvalidValue && !ran,
	      "227 KiB - static + 16: cudaErrorInvalidValue (%s)", cudaGetErrorName(e));
	CHECK(launch_static(d, optin - st, &ran) == cudaSuccess && ran,
	      "the refused opt-in left the attribute as it was");
	CHECK(cudaFuncSetAttribute(dyn_only, cudaFuncAttributeMaxDynamicSharedMemorySize, optin) ==
		  cudaSuccess,
	      "dyn_only (no static): opt-in to 227 KiB");
	dyn_only<<<1, n, optin>>>(d);
	CHECK(cudaGetLastError() == cudaSuccess, "dyn_only, 227 KiB: launches");
	cudaDeviceSynchronize();
	dyn_only<<<1, n, optin + 4>>>(d);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue, "dyn_only, 227 KiB + 4: refused");

	cudaFree(d);
	return check_summary();
}
