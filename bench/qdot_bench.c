/* qdot_bench: single-thread speed of cpu/qdot's matmul for one weight type, beside
 * llama.cpp's vec_dot (ggml-cpu's zen4 build from node-llama-cpp, when present) on the
 * same blocks.
 *
 *   qdot_bench [-T TYPE] [-k K] [-r ROWS] [-n N_TOK] [-i ISA] [-s REPS] [-t THREADS] [-H 1]
 *
 * TYPE: any type cpu/qdot multiplies, by ggml's name in any case (q4_k, IQ3_S; default
 * q4_K); another name is refused. *
 * Weights: random bytes with sane fp16 scales, ROWS x K (default 4096 x 2048), so the
 * default Q4_K matrix is 4.7 MB (in L3) and -r 65536 (75 MB) streams from memory.
 * Reports ns per 256-element super-block and GB/s of weights read, for our matmul over
 * N_TOK tokens (its rows split in THREADS equal ranges, as the CPU backend splits them)
 * and llama.cpp's vec_dot row by row on one thread. -H 1: the weights in anonymous memory
 * advised for transparent huge pages (2 MiB aligned), as the CPU backend's copy of a
 * model's weights (cpu_huge_map in cpu/cpu_weights.h); default malloc's 4 KiB pages.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cpu/cpu_weights.h"
#include "cpu/qdot.h"
#include "model/gguf.h"
#include "model/half.h"
#include "model/quant.h"
#include "tests/ggml_cpu_abi.h"

#define LLAMA_DIR "bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}


static int half_off(enum gguf_dtype t, int *o)
{
	switch (t) {
	case GGUF_DTYPE_Q4_K:
	case GGUF_DTYPE_Q5_K: o[0] = 0, o[1] = 2; return 2;
	case GGUF_DTYPE_Q6_K: o[0] = 208; return 1;
	case GGUF_DTYPE_Q2_K: o[0] = 80, o[1] = 82; return 2;
	case GGUF_DTYPE_Q3_K: o[0] = 108; return 1;
	case GGUF_DTYPE_Q4_1:
	case GGUF_DTYPE_Q5_1: o[0] = 0, o[1] = 2; return 2;
	default: o[0] = 0; return 1;
	}
}

struct part {
	enum qdot_isa isa;
	enum gguf_dtype t;
	const void *w, *qx;
	int64_t k, r0, r1, ldy;
	size_t ldq;
	int n_tok;
	float *y;
};

static void *run_part(void *arg)
{
	const struct part *p = arg;
	qdot_matmul(p->isa, p->t, p->w, p->k, p->r0, p->r1, p->qx, p->ldq, p->n_tok, p->y, p->ldy);
	return NULL;
}

int main(int argc, char **argv)
{
	int n_thr = 1;
	enum gguf_dtype t = GGUF_DTYPE_Q4_K;
	int64_t k = 2048, rows = 4096;
	int n_tok = 1, reps = 5, isa = -1, huge = 0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-T")) {
			/* any type qdot multiplies, by ggml's name in any case (q4_k, IQ3_S) */
			int id = 0;
			while (id <= GGUF_DTYPE_MXFP4 &&
			       !(gguf_dtype_name((enum gguf_dtype)id) &&
				 !strcasecmp(gguf_dtype_name((enum gguf_dtype)id), argv[i + 1]) &&
				 qdot_handles((enum gguf_dtype)id)))
				id++;
			if (id > GGUF_DTYPE_MXFP4) {
				fprintf(stderr,
					"qdot_bench: -T %s: not a type cpu/qdot multiplies\n",
					argv[i + 1]);
				return 2;
			}
			t = (enum gguf_dtype)id;
		} else if (!strcmp(argv[i], "-k"))
			k = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			rows = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			n_tok = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-t"))
			n_thr = atoi(argv[i + 1]) < 1 ? 1 : atoi(argv[i + 1]) > 16 ? 16 : atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-i"))
			isa = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-H"))
			huge = atoi(argv[i + 1]);
	}
	const size_t rb = (size_t)gguf_row_bytes(t, (uint64_t)k), bb = quant_block_bytes(t);
	const int64_t nb = k / quant_block_elems(t);
	uint8_t *w;
	if (huge) {
		void *map;
		size_t map_len;
		w = cpu_huge_map(rb * (size_t)rows, &map, &map_len); /* freed at exit */
		if (!w) {
			perror("mmap");
			return 1;
		}
	} else {
		w = malloc(rb * (size_t)rows);
	}
	for (size_t i = 0; i < rb * (size_t)rows; i++)
		w[i] = (uint8_t)rnd();
	int off[2];
	int nh = half_off(t, off);
	for (int64_t b = 0; b < nb * rows; b++)
		for (int h = 0; h < nh; h++) {
			uint16_t v = half_f32_to_f16(0.001f + (float)(rnd() % 1000) * 1e-5f);
			memcpy(w + (size_t)b * bb + off[h], &v, 2);
		}
	float *x = malloc(sizeof(float) * (size_t)k * n_tok);
	for (int64_t i = 0; i < k * n_tok; i++)
		x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
	const size_t ldq = qdot_act_row_bytes(t, k);
	uint8_t *qx = aligned_alloc(64, (ldq * (size_t)n_tok + 63) / 64 * 64);
	for (int j = 0; j < n_tok; j++)
		qdot_quantize_row(t, x + (int64_t)j * k, k, qx + (size_t)j * ldq);
	float *y = malloc(sizeof(float) * (size_t)rows * n_tok);
	enum qdot_isa q = isa >= 0 ? (enum qdot_isa)isa : qdot_detect();

	double best = 1e30;
	for (int s = 0; s < reps; s++) {
		struct part pt[16];
		pthread_t th[16];
		double t0 = now();
		for (int i = 0; i < n_thr; i++) {
			pt[i] = (struct part){q, t, w, qx, k, rows * i / n_thr, rows * (i + 1) / n_thr,
					      rows, ldq, n_tok, y};
			if (i > 0)
				pthread_create(&th[i], NULL, run_part, &pt[i]);
		}
		run_part(&pt[0]);
		for (int i = 1; i < n_thr; i++)
			pthread_join(th[i], NULL);
		double dt = now() - t0;
		best = dt < best ? dt : best;
	}
	double nsb = best * 1e9 / (double)(nb * rows);
	printf("ours %-10s %d thr%s %s k=%lld rows=%lld n_tok=%d: %.2f ms, %.2f ns/block/tok (%.2f "
	       "ns/block), %.2f GB/s weights\n",
	       qdot_isa_name(q), n_thr, huge ? " huge" : "", gguf_dtype_name(t), (long long)k,
	       (long long)rows, n_tok, best * 1e3, nsb / n_tok, nsb,
	       (double)(rb * rows) / best * 1e-9);

	/* llama.cpp's vec_dot on the same weights, one token */
	void *base = dlopen(LLAMA_DIR "libggml-base.so", RTLD_NOW | RTLD_GLOBAL);
	const char *lib = getenv("GGML_CPU_LIB") ? getenv("GGML_CPU_LIB") : "libggml-cpu-zen4.so";
	char path[512];
	snprintf(path, sizeof path, LLAMA_DIR "%s", lib);
	void *h = base ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!h) {
		printf("llama.cpp: not loaded (%s)\n", dlerror());
		return 0;
	}
	void (*cpu_init)(void) = (void (*)(void))dlsym(h, "ggml_cpu_init");
	const struct ggml_cpu_traits *(*traits)(int) =
	    (const struct ggml_cpu_traits *(*)(int))dlsym(h, "ggml_get_type_traits_cpu");
	cpu_init();
	const struct ggml_cpu_traits *tr = traits((int)t), *vt = traits(tr->vec_dot_type);
	uint8_t *theirs = malloc(1 << 20);
	vt->from_float(x, theirs, k);
	float *y2 = malloc(sizeof(float) * (size_t)rows);
	best = 1e30;
	for (int s = 0; s < reps; s++) {
		double t0 = now();
		for (int64_t r = 0; r < rows; r++)
			tr->vec_dot((int)k, &y2[r], 0, w + (size_t)r * rb, 0, theirs, 0, 1);
		double dt = now() - t0;
		best = dt < best ? dt : best;
	}
	nsb = best * 1e9 / (double)(nb * rows);
	int same = 0;
	for (int64_t r = 0; r < rows; r++)
		same += y2[r] == y[r];
	printf("llama.cpp vec_dot (%s): %.2f ms, %.2f ns/block, %.2f GB/s weights; equal to ours "
	       "in %d of %lld rows\n",
	       lib, best * 1e3, nsb, (double)(rb * rows) / best * 1e-9, same, (long long)rows);
	return 0;
}
