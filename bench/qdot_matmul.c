/* qdot_matmul: one thread's time for one quantized weight matrix times n_tok activation rows,
 * through the integer kernels (cpu/qdot: activations quantized, then int8 dot products) and
 * through the fp32-activation kernels (cpu/cpu_kernels), to choose between them (issue 12).
 *
 *   qdot_matmul [-T TYPE] [-k K] [-n ROWS] [-b "1 16 64"] [-r REPS] [-P 1|2] [-C 0|1]
 *
 * TYPE a block type name as gguf_dtype_name prints it (default q8_0); K x ROWS the weight
 * shape (default 2048 x 5632: TinyLlama's ffn_gate/up). Random weights and activations;
 * the weights (K * ROWS elements, 12 MB for the default Q8_0) exceed the L2 but may sit in
 * the L3 (32 MB on the project's EPYC): for streaming from memory, use ROWS large enough
 * (e.g. -n 65536). Prints, per batch size, the best of REPS passes: ms per pass, GB/s of
 * weights read and GMAC/s, for "qdot" (quantization of the activations included) and
 * "fp32" (-P 1: "qdot" only); batches up to 2048 (a prefill). Single-threaded; every row
 * computed once per pass.
 *
 * Build: make build/bench/qdot_matmul */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_kernels.h"
#include "cpu/qdot.h"
#include "model/gguf.h"
#include "model/quant.h"

/* -C 1: time by the thread's CPU clock instead of the wall clock (robust to time slices lost
 * to other processes on a shared machine; not to their cache traffic) */
static clockid_t clk = CLOCK_MONOTONIC;

static double now(void)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

int main(int argc, char **argv)
{
	const char *tname = "q8_0", *batches = "1 16 64";
	int64_t k = 2048, rows = 5632;
	int reps = 5, paths = 2;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-T"))
			tname = argv[i + 1];
		else if (!strcmp(argv[i], "-k"))
			k = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			rows = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "-b"))
			batches = argv[i + 1];
		else if (!strcmp(argv[i], "-r"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-P"))
			paths = atoi(argv[i + 1]) == 1 ? 1 : 2;
		else if (!strcmp(argv[i], "-C"))
			clk = atoi(argv[i + 1]) ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
		else {
			fprintf(
			    stderr,
			    "usage: qdot_matmul [-T TYPE] [-k K] [-n ROWS] [-b LIST] [-r REPS] [-P 1|2] [-C 0|1]\n");
			return 2;
		}
	}
	enum gguf_dtype t = GGUF_DTYPE_Q8_0;
	int found = 0;
	for (int i = 0; i < 64; i++)
		if (quant_is_quantized((enum gguf_dtype)i) &&
		    !strcmp(gguf_dtype_name((enum gguf_dtype)i), tname)) {
			t = (enum gguf_dtype)i;
			found = 1;
		}
	if (!found || k % quant_block_elems(t)) {
		fprintf(stderr, "qdot_matmul: unknown type %s or k %% block != 0\n", tname);
		return 2;
	}
	const size_t rb = (size_t)gguf_row_bytes(t, (uint64_t)k), wbytes = rb * (size_t)rows;
	uint8_t *w = malloc(wbytes);
	for (size_t i = 0; i < wbytes; i++)
		w[i] = (uint8_t)rnd();
	/* sane scales: every fp16 field at the block's start a small positive value */
	const size_t bb = quant_block_bytes(t);
	for (size_t off = 0; off + bb <= wbytes; off += bb) {
		uint16_t h = (uint16_t)(0x2000 + (rnd() & 0x3ff));
		memcpy(w + off, &h, 2);
		if (t == GGUF_DTYPE_MXFP4) /* its e8m0 byte: 2^-10 .. 2^-1, no subnormal products */
			w[off] = (uint8_t)(118 + rnd() % 10);
	}
	const int32_t nmax = 2048;
	float *x = malloc(sizeof(float) * (size_t)k * nmax),
	      *y = malloc(sizeof(float) * rows * nmax);
	for (int64_t i = 0; i < k * nmax; i++)
		x[i] = ((float)rnd() / 65536.0f - 0.5f) * 4.0f;
	const size_t ldq = qdot_act_row_bytes(t, k);
	uint8_t *qx = malloc(ldq * nmax);
	const enum qdot_isa isa = qdot_detect();
	const enum cpuk_level lvl = cpuk_detect();
	printf("type %s, k %lld, rows %lld, %.1f MB of weights; qdot %s, cpu_kernels %s\n",
	       gguf_dtype_name(t), (long long)k, (long long)rows, wbytes / 1e6, qdot_isa_name(isa),
	       cpuk_level_name(lvl));
	char *list = strdup(batches);
	for (char *s = strtok(list, " ,"); s; s = strtok(NULL, " ,")) {
		int32_t n = atoi(s);
		if (n < 1 || n > nmax)
			continue;
		for (int path = 0; path < paths; path++) {
			double best = 1e30;
			for (int r = 0; r < reps; r++) {
				double t0 = now();
				if (path == 0) {
					for (int32_t j = 0; j < n; j++)
						qdot_quantize_row(t, x + (int64_t)j * k, k,
								  qx + j * ldq);
					qdot_matmul(isa, t, w, k, 0, rows, qx, ldq, n, y, rows);
				} else {
					cpuk_matmul(lvl, t, w, k, 0, rows, x, k, n, y, rows);
				}
				double dt = now() - t0;
				best = dt < best ? dt : best;
			}
			printf("B=%-4d %-5s %8.3f ms  %6.2f GB/s  %7.2f GMAC/s\n", n,
			       path ? "fp32" : "qdot", best * 1e3, wbytes / best / 1e9,
			       (double)k * rows * n / best / 1e9);
		}
	}
	free(list);
	free(w);
	free(x);
	free(y);
	free(qx);
	return 0;
}
