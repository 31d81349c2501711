/* cpu_decode: single-request decode speed of the CPU backend, and raw matmul GFLOP/s.
 *
 *   cpu_decode [-m MODEL.gguf | -s SHAPE] [-d f32|f16|bf16|q8_0] [-t THREADS] [-n TOKENS]
 *              [-p PROMPT_TOKENS] [-b BATCH] [-P]
 *
 * Without -m it builds the synthetic model SHAPE (default llama-100m) with dtype -d in
 * memory (core/synth). Decode: one sequence, a prompt of -p tokens in one forward, then
 * -n single-token greedy steps; reported as tokens/s and ms/token (forward + sample).
 * Also prints prefill tokens/s and, with -b B > 1, the aggregate decode tokens/s of B
 * sequences stepping together. Then matmul GFLOP/s of the cpu_kernels for a 4096x4096
 * weight of the same dtype at 1, 8 and 64 tokens.
 *
 * -P: the decode steps' profile (backend_cpu_profile), per step: each matmul kind's
 * prologue and streaming time with its weight GB/s, attention, the serial parts, the rest
 * of the forward, and sampling.
 *
 * Build (from the repository root):
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Icore -I. -pthread core/status.c core/model/gguf.c core/model/model.c \
 *       core/model/synth.c core/sample/sampler.c core/threadpool.c core/cpu/cpu_kernels.c core/backend.c \
 *       core/cpu/backend_cpu.c bench/cpu_decode.c -o /tmp/cpu_decode -lcjson -lpcre2-8 -lm
 * (or link build/libbatchgen.a instead of the core sources)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/backend_cpu.h"
#include "cpu/cpu_kernels.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "threadpool.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_dtype(const char *s, enum gguf_dtype *t)
{
	if (!strcmp(s, "f32"))
		*t = GGUF_DTYPE_F32;
	else if (!strcmp(s, "f16"))
		*t = GGUF_DTYPE_F16;
	else if (!strcmp(s, "bf16"))
		*t = GGUF_DTYPE_BF16;
	else if (!strcmp(s, "q8_0"))
		*t = GGUF_DTYPE_Q8_0;
	else
		return 0;
	return 1;
}

struct mm_arg {
	enum cpuk_level lvl;
	enum gguf_dtype type;
	const void *w;
	int64_t k, n, chunk;
	const float *x;
	float *y;
	int32_t n_tok;
};

static void mm_task(void *arg, int32_t task, int32_t thread)
{
	(void)thread;
	struct mm_arg *a = arg;
	int64_t r0 = task * a->chunk, r1 = r0 + a->chunk < a->n ? r0 + a->chunk : a->n;
	cpuk_matmul(a->lvl, a->type, a->w, a->k, r0, r1, a->x, a->k, a->n_tok, a->y, a->n);
}

static void bench_matmul(enum gguf_dtype type, struct tp_pool *pool)
{
	const int64_t K = 4096, N = 4096;
	size_t rb = cpuk_row_bytes(type, K);
	unsigned char *w = malloc(rb * N);
	for (size_t i = 0; i < rb * N; i++) /* small bytes: finite values in every type */
		w[i] = (unsigned char)((i * 7 + 3) % 61);
	float *x = malloc(sizeof(float) * K * 64), *y = malloc(sizeof(float) * N * 64);
	for (int64_t i = 0; i < K * 64; i++)
		x[i] = (float)((i % 13) - 6) * 0.01f;
	int nt = tp_n_threads(pool);
	const int32_t toks[3] = {1, 8, 64};
	for (int i = 0; i < 3; i++) {
		struct mm_arg a = {cpuk_detect(), type, w, K, N, 0, x, y, toks[i]};
		a.chunk = N / (nt * 4) < 16 ? 16 : N / (nt * 4);
		int32_t tasks = (int32_t)((N + a.chunk - 1) / a.chunk);
		tp_run(pool, tasks, mm_task, &a); /* warm-up */
		int reps = 0;
		double t0 = now(), t;
		do {
			tp_run(pool, tasks, mm_task, &a);
			reps++;
			t = now() - t0;
		} while (t < 0.5);
		double flops = 2.0 * K * N * toks[i] * reps;
		double bytes = (double)rb * N * reps;
		printf("matmul %lldx%lld, %2d tokens: %7.2f GFLOP/s, weights %6.2f GB/s\n",
		       (long long)N, (long long)K, toks[i], flops / t * 1e-9, bytes / t * 1e-9);
	}
	free(w);
	free(x);
	free(y);
}

/* The decode steps' profile, in ms per step. */
static void print_profile(const struct backend_cpu_profile *p, int steps, double t_dec)
{
	static const char *names[BACKEND_CPU_MM_N] = {"qkv", "wo", "gate_up", "down", "lm_head"};
	const double k = 1e3 / steps;
	double mm = 0, pre = 0, bytes = 0;
	printf("profile, ms per step (%d steps, %llu forwards, %llu sample calls):\n", steps,
	       (unsigned long long)p->forwards, (unsigned long long)p->samples);
	for (int i = 0; i < BACKEND_CPU_MM_N; i++) {
		printf("  mm %-8s prologue %7.3f  stream %7.3f  %6.1f GB/s  (%llu dispatches)\n",
		       names[i], p->mm_pre_s[i] * k, p->mm_s[i] * k,
		       p->mm_s[i] > 0 ? p->mm_bytes[i] / p->mm_s[i] * 1e-9 : 0.0,
		       (unsigned long long)p->mm_calls[i]);
		mm += p->mm_s[i];
		pre += p->mm_pre_s[i];
		bytes += p->mm_bytes[i];
	}
	double rest = p->forward_s - mm - pre - p->attn_s - p->norms_s - p->rope_kv_s - p->resid_s;
	printf("  mm all      prologue %7.3f  stream %7.3f  %6.1f GB/s (%.1f MB a step)\n", pre * k,
	       mm * k, mm > 0 ? bytes / mm * 1e-9 : 0.0, bytes / steps * 1e-6);
	printf("  attention %7.3f\n  serial: norms %7.3f  rope+kv %7.3f  residual %7.3f  "
	       "rest %7.3f\n",
	       p->attn_s * k, p->norms_s * k, p->rope_kv_s * k, p->resid_s * k, rest * k);
	printf("  forward %7.3f  sample %7.3f  outside both %7.3f\n", p->forward_s * k,
	       p->sample_s * k, (t_dec - p->forward_s - p->sample_s) * k);
	printf("  no weight stream (step - mm stream) %7.3f of %7.3f (%.1f %%)\n", (t_dec - mm) * k,
	       t_dec * k, 100.0 * (t_dec - mm) / t_dec);
}

int main(int argc, char **argv)
{
	const char *path = NULL, *shape = "llama-100m";
	enum gguf_dtype dtype = GGUF_DTYPE_F16;
	int n_threads = 0, n_gen = 64, n_prompt = 16, batch = 1, profile = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-P")) {
			profile = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "missing value for %s\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "-m"))
			path = v;
		else if (!strcmp(a, "-s"))
			shape = v;
		else if (!strcmp(a, "-d")) {
			if (!parse_dtype(v, &dtype)) {
				fprintf(stderr, "unknown dtype %s\n", v);
				return 2;
			}
		} else if (!strcmp(a, "-t"))
			n_threads = atoi(v);
		else if (!strcmp(a, "-n"))
			n_gen = atoi(v);
		else if (!strcmp(a, "-p"))
			n_prompt = atoi(v);
		else if (!strcmp(a, "-b"))
			batch = atoi(v);
		else {
			fprintf(stderr, "unknown option %s\n", a);
			return 2;
		}
	}
	if (n_prompt < 1 || n_gen < 1 || batch < 1 || batch > 64) {
		fprintf(stderr, "bad sizes\n");
		return 2;
	}
	struct bg_err err = {0};
	struct model *m = NULL;
	double t0 = now();
	if (path) {
		if (model_load(path, &m, &err) != BG_OK) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
	} else {
		const struct synth_shape *s = synth_find_shape(shape);
		if (!s) {
			fprintf(stderr, "unknown shape %s\n", shape);
			return 2;
		}
		struct synth_opts o;
		synth_opts_init(&o, s);
		o.dtype = dtype;
		void *buf = NULL;
		size_t len = 0;
		struct gguf_ctx *g = NULL;
		if (synth_to_buffer(&o, &buf, &len, &err) != BG_OK ||
		    gguf_parse(buf, len, true, &g, &err) != BG_OK ||
		    model_from_gguf(g, &m, &err) != BG_OK) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
	}
	printf("model %s: %.1fM params, %.1f MB of weights, loaded in %.1f s\n", m->name,
	       m->n_params / 1e6, m->weight_bytes / 1e6, now() - t0);

	int32_t max_len = n_prompt + n_gen;
	struct backend_config cfg = {.block_size = 16,
				     .kv_tokens = (int64_t)(max_len + 16) * batch,
				     .n_threads = n_threads,
				     .n_state_slots =
					 batch}; /* recurrent models: sequence s in slot s */
	struct backend *b = NULL;
	if (backend_cpu_create(m, &cfg, &b, &err) != BG_OK) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	if (b->n_state_slots > 0 && b->n_state_slots < batch) {
		fprintf(stderr, "only %d recurrent-state slots fit for a batch of %d\n",
			b->n_state_slots, batch);
		return 1;
	}
	printf("device: %s\n", b->device);
	int32_t per_seq = (max_len + 15) / 16;
	int32_t *table = malloc(sizeof(int32_t) * per_seq * batch);
	for (int32_t i = 0; i < per_seq * batch; i++)
		table[i] = i;
	int32_t *prompt = malloc(sizeof(int32_t) * n_prompt);
	uint8_t *want = calloc((size_t)n_prompt, 1);
	for (int i = 0; i < n_prompt; i++)
		prompt[i] = (i * 131 + 7) % b->n_vocab;
	want[n_prompt - 1] = 1;

	struct sampler_params sp;
	sampler_params_default(&sp);
	struct sampler_rng rng;
	sampler_rng_seed(&rng, 1);
	int32_t *next = malloc(sizeof(int32_t) * batch);

	/* prefill each sequence (timed for sequence 0) */
	double t_pre = 0;
	for (int s = 0; s < batch; s++) {
		struct backend_seq seq = {prompt,  n_prompt, 0,	   table + s * per_seq,
					  per_seq, want,     NULL, s};
		struct backend_batch bt = {&seq, 1, 1};
		double ts = now();
		if (b->ops->forward(b->ctx, &bt, &err) != BG_OK) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		if (s == 0)
			t_pre = now() - ts;
		struct backend_sample_row row = {0, -1, &sp, {NULL, 0, NULL, 0}, &rng, NULL};
		struct sampler_result res;
		b->ops->sample(b->ctx, &row, 1, &res, &err);
		next[s] = res.token;
	}
	printf("prefill: %d tokens in %.1f ms = %.1f tokens/s\n", n_prompt, t_pre * 1e3,
	       n_prompt / t_pre);

	struct backend_seq *seqs = calloc((size_t)batch, sizeof *seqs);
	struct backend_sample_row *rows = calloc((size_t)batch, sizeof *rows);
	struct sampler_result *res = calloc((size_t)batch, sizeof *res);
	static const uint8_t one = 1;
	struct backend_cpu_profile prof = {0};
	if (profile)
		backend_cpu_profile(b, &prof);
	double t_dec = now();
	for (int i = 0; i < n_gen - 1; i++) {
		for (int s = 0; s < batch; s++) {
			seqs[s] = (struct backend_seq){
			    &next[s], 1, n_prompt + i, table + s * per_seq, per_seq, &one, NULL, s};
			rows[s] = (struct backend_sample_row){s, -1, &sp, {NULL, 0, NULL, 0}, &rng, NULL};
		}
		struct backend_batch bt = {seqs, batch, batch};
		if (b->ops->forward(b->ctx, &bt, &err) != BG_OK ||
		    b->ops->sample(b->ctx, rows, batch, res, &err) != BG_OK) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		for (int s = 0; s < batch; s++)
			next[s] = res[s].token;
	}
	t_dec = now() - t_dec;
	int steps = n_gen - 1;
	printf("decode (batch %d): %d steps in %.2f s = %.2f ms/step, %.1f tokens/s per "
	       "sequence, %.1f tokens/s total\n",
	       batch, steps, t_dec, t_dec / steps * 1e3, steps / t_dec, steps * batch / t_dec);
	if (profile)
		print_profile(&prof, steps, t_dec);

	struct tp_pool *pool = NULL;
	tp_create(n_threads, &pool, &err);
	bench_matmul(m->layers[0].wq.type, pool);
	tp_destroy(pool);

	free(seqs);
	free(rows);
	free(res);
	free(next);
	free(prompt);
	free(want);
	free(table);
	backend_destroy(b);
	model_free(m);
	return 0;
}
