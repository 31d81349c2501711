/* gpu_test_dequant: gpu/dequant.cu against the CPU's quant_dequant (itself bitwise ggml's,
 * tests/test_quant.c), for every block type: random blocks (random bits, finite fp16
 * scales of either sign) dequantized on the device to fp32 must give quant_dequant's bits,
 * and to BF16 and F16 those values rounded to nearest even (model/half.h). Runs on a GPU
 * (make test-gpu) and under the emulator in make test (tests/e2e_gpu_dequant.sh). Without
 * a CUDA device it prints a SKIP line and "0 passed, 0 failed". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_ops.cuh"

extern "C" {
#include "model/half.h"
#include "model/quant.h"
}
#include "check.h"
#include "quant_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

int main(void)
{
	int n_dev = 0;
	if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
		printf("SKIP: no CUDA device; the GPU dequantization test did not run\n");
		return check_summary();
	}
	static const enum gguf_dtype types[] = {
	    GGUF_DTYPE_Q4_0, GGUF_DTYPE_Q4_1, GGUF_DTYPE_Q5_0, GGUF_DTYPE_Q5_1,
	    GGUF_DTYPE_Q8_0, GGUF_DTYPE_Q2_K, GGUF_DTYPE_Q3_K, GGUF_DTYPE_Q4_K,
	    GGUF_DTYPE_Q5_K, GGUF_DTYPE_Q6_K, GGUF_DTYPE_IQ4_NL, GGUF_DTYPE_IQ4_XS,
	    GGUF_DTYPE_MXFP4 /* random e8m0 bytes: subnormal scales (e < 2) to 2^127 (inf) */,
	    GGUF_DTYPE_IQ2_XXS, GGUF_DTYPE_IQ2_XS, GGUF_DTYPE_IQ2_S, GGUF_DTYPE_IQ3_XXS,
	    GGUF_DTYPE_IQ3_S, GGUF_DTYPE_IQ1_S, GGUF_DTYPE_IQ1_M};
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		enum gguf_dtype t = types[ti];
		/* super-blocks' worth: 6144 elements a type; the lattice types 256 blocks, 8192
		 * points read from their tables */
		const int NB = quant_is_lattice(t) ? 256 : 24;
		const size_t bb = quant_block_bytes(t);
		const uint64_t n = (uint64_t)NB * 256, nblk = n / quant_block_elems(t);
		uint8_t *q = (uint8_t *)malloc(nblk * bb);
		for (size_t i = 0; i < nblk * bb; i++)
			q[i] = (uint8_t)rnd();
		for (uint64_t b = 0; b < nblk; b++)
		{
			/* finite: a random sign, exponent and mantissa below the top */
			for (const int *f = quant_util_half_fields(t); *f >= 0; f++) {
				uint16_t hv = (uint16_t)(rnd() & 0xBBFF);
				memcpy(q + b * bb + *f, &hv, 2);
			}
			if (t == GGUF_DTYPE_IQ1_M)
				quant_util_put_iq1m_scale(q + b * bb, (uint16_t)(rnd() & 0xBBFF));
		}
		float *ref = (float *)malloc(n * sizeof(float)), *got = (float *)malloc(n * sizeof(float));
		uint16_t *h16 = (uint16_t *)malloc(n * 2);
		quant_dequant(t, q, ref, (int64_t)n);
		void *dq = NULL, *dout = NULL;
		CHECK(cudaMalloc(&dq, nblk * bb) == cudaSuccess && cudaMalloc(&dout, n * 4) == cudaSuccess,
		      "device buffers");
		cudaMemcpy(dq, q, nblk * bb, cudaMemcpyHostToDevice);
		CHECK(gpu_dequant_supported((int)t), "%s supported", gguf_dtype_name(t));
		/* fp32: quant_dequant's bits */
		CHECK(gpu_dequant_weights(dq, (int)t, n, dout, GPU_F32, 0) == cudaSuccess &&
			  cudaMemcpy(got, dout, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess,
		      "%s: dequantize to f32", gguf_dtype_name(t));
		uint64_t bad = n;
		for (uint64_t i = 0; i < n && bad == n; i++)
			if (memcmp(&got[i], &ref[i], 4))
				bad = i;
		CHECK(bad == n, "%s: f32 bitwise quant_dequant's (first wrong element %llu: %.9g vs %.9g)",
		      gguf_dtype_name(t), (unsigned long long)bad, bad < n ? got[bad] : 0.0,
		      bad < n ? ref[bad] : 0.0);
		/* bf16 and f16: those values rounded to nearest even */
		for (int k = 0; k < 2; k++) {
			enum gpu_dtype dt = k ? GPU_F16 : GPU_BF16;
			CHECK(gpu_dequant_weights(dq, (int)t, n, dout, dt, 0) == cudaSuccess &&
				  cudaMemcpy(h16, dout, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess,
			      "%s: dequantize to %s", gguf_dtype_name(t), k ? "f16" : "bf16");
			bad = n;
			for (uint64_t i = 0; i < n && bad == n; i++) {
				uint16_t want = k ? half_f32_to_f16(ref[i]) : half_f32_to_bf16(ref[i]);
				if (h16[i] != want)
					bad = i;
			}
			CHECK(bad == n, "%s: %s bitwise the rounded CPU values (first wrong element %llu)",
			      gguf_dtype_name(t), k ? "f16" : "bf16", (unsigned long long)bad);
		}
		/* a partial block is refused */
		CHECK(gpu_dequant_weights(dq, (int)t, n - 16, dout, GPU_F32, 0) == cudaErrorInvalidValue,
		      "%s: a partial block refused", gguf_dtype_name(t));
		cudaGetLastError();
		cudaFree(dq);
		cudaFree(dout);
		free(q);
		free(ref);
		free(got);
		free(h16);
	}
	CHECK(!gpu_dequant_supported((int)GGUF_DTYPE_F16), "f16 is not a block type");
	return check_summary();
}
