/* gpu_test_engine: the whole engine on the CUDA backend (through the plugin, as the
 * binary uses it) with a real trained model, ../shared/models/stories260K.gguf.
 *
 * A varied greedy workload (text and token-id prompts of 1 to ~100 tokens, max_tokens 1
 * to 48, some stop strings, top-2 or top-5 log-probs) runs:
 *   - every request alone on the GPU (max_batch_size 1, overlap off): the reference;
 *   - all at once under no-evict (max_batch_size 96, a large KV pool: batches of 64+
 *     requests, asserted from the engine's per-iteration stats), under max-util with
 *     recompute and with swap (max_batch_size 64, a 16-block pool: preemptions happen,
 *     asserted from the engine's totals);
 *   - all at once on the CPU backend.
 * The batched GPU runs overlap steps (engine.c, "Overlap": on by default on CUDA), so
 * they also check the overlapped engine on the CUDA backend against its serial runs.
 * Checks: every request has exactly one result with a valid finish; the batched runs'
 * and the CPU's token ids agree with the GPU-alone run's, up to near-ties (see
 * compare()); the agreement rates are printed as "agreement NAME: a/n (p%)".
 *
 * Size: 200 requests, max_tokens up to 48; BG_GPU_ENGINE_N (requests) and
 * BG_GPU_ENGINE_MAX_TOKENS (a cap on max_tokens) make a smaller run for compute-sanitizer
 * and the CPU emulator of CUDA (tests/run_gpu.sh, gpu/emu/run.sh).
 * Without a CUDA device: a SKIP line, "0 passed, 0 failed", exit 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine_util.h"
#include "gpu_util.h"
#include "cpu/backend_cpu.h"
#include "engine/engine.h"
#include "model/model.h"
#include "gpu/backend_cuda.h"

/* Greedy flips are accepted only where the reference's top-1 and the other run's token
 * are this close in log-prob (compare() says why). */
#define NEAR_TIE 1e-3
/* Log-probs of the same token after the same context may differ by this much: fp32
 * throughout, only summation orders differ (gpu_test_model bounds GPU vs CPU logits by
 * 1e-3, and a log-prob moves by at most twice its logits' largest change). */
#define LOGPROB_TOL 2e-3

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static const char *const stops[] = {".", " the", ",", "and", "\"", " was", "!"};

struct spec {
	const char *prompt; /* or NULL: ids */
	int32_t ids[100];   /* [n_ids] BOS + random vocabulary entries */
	int32_t n_ids;
	int32_t max_tokens;
	const char *stop; /* or NULL */
	int32_t logprobs; /* 2 or 5: the near-tie rule needs the runner-up */
};

/* ---- one engine run over specs [n] ---- */

static int src(void *user, struct request **out, struct bg_err *err)
{
	(void)err;
	struct engine_util_run *R = user;
	if (R->next >= R->n)
		return ENGINE_SOURCE_EOF;
	const struct spec *s = (const struct spec *)R->specs + R->next;
	struct request *r = engine_util_req("g", R->next, s->prompt, s->ids, s->n_ids);
	r->max_tokens = s->max_tokens;
	r->logprobs = s->logprobs; /* greedy: req_new's sampling defaults */
	engine_util_req_stops(r, &s->stop, s->stop ? 1 : 0);
	R->next++;
	*out = r;
	return ENGINE_SOURCE_OK;
}

/* The largest "num_scheduled_requests" in an engine stats stream. */
static int32_t peak_scheduled(FILE *f)
{
	char line[4096];
	int32_t peak = 0;
	rewind(f);
	while (fgets(line, sizeof line, f)) {
		const char *p = strstr(line, "\"num_scheduled_requests\": ");
		int v;
		if (p && sscanf(p + strlen("\"num_scheduled_requests\": "), "%d", &v) == 1 &&
		    v > peak)
			peak = v;
	}
	return peak;
}

/* One run of specs [n] through this test's source, with the engine's stats in a temporary
 * file: *peak_batch (when not NULL) is the most requests it scheduled in one iteration. */
static enum bg_status run(const struct engine_config *cfg0, struct backend *be,
			  const struct tok *tok, const struct model_hparams *hp,
			  const struct spec *specs, int32_t n, struct engine_util_run *R,
			  int32_t *peak_batch)
{
	struct engine_config cfg = *cfg0;
	cfg.stats = tmpfile();
	enum bg_status st = engine_util_run(&cfg, be, tok, hp, src, specs, n, R);
	if (cfg.stats) {
		if (peak_batch)
			*peak_batch = peak_scheduled(cfg.stats);
		fclose(cfg.stats);
	}
	return st;
}

/* A result is valid when it finished normally within its max_tokens, with a log-prob
 * (and the top-n) for each token. */
static bool valid(const struct request *r, const struct spec *s)
{
	if (!r || r->error.code[0] || r->n_out < 1 || r->n_out > s->max_tokens ||
	    !r->out_logprobs || !r->out_top)
		return false;
	if (r->finish == REQ_FINISH_LENGTH)
		return r->n_out == s->max_tokens;
	return r->finish == REQ_FINISH_STOP || r->finish == REQ_FINISH_EOS;
}

/* Checks a run's results: exactly one each, all valid. */
static void check_results(const char *name, enum bg_status st, const struct engine_util_run *R)
{
	int32_t n_bad = 0, first = -1;
	for (int32_t i = 0; i < R->n; i++)
		if (!valid(R->res[i], (const struct spec *)R->specs + i) && n_bad++ == 0)
			first = i;
	CHECK(st == BG_OK && R->n_emitted == R->n && R->dup == 0,
	      "%s: %d results of %d, %d duplicates", name, R->n_emitted, R->n, R->dup);
	CHECK(n_bad == 0, "%s: %d results are missing or invalid, first request %d (%s, %s)", name,
	      n_bad, first,
	      first >= 0 && R->res[first] ? req_finish_name(R->res[first]->finish) : "none",
	      first >= 0 && R->res[first] ? R->res[first]->error.message : "");
}

/* ---- agreement with the GPU-alone reference ----
 *
 * Why the rule is not "bitwise equal": cuBLAS picks its GEMM kernel (tiling, split-K) by
 * the problem's size, so the batch of 64 rows and the batch of 1 sum the same fp32
 * products in different orders; the attention kernels likewise split keys differently by
 * batch. The logits then differ in their last bits (~1e-6 relative after 5 layers), and a
 * greedy argmax flips where the top two log-probs are that close. The CPU backend sums in
 * yet another order (gpu_test_model bounds GPU vs CPU logits by 1e-3).
 *
 * So, per request: identical token ids count as agreement (and must then have the same
 * finish and text). Otherwise, at the first token that differs, the other run's token must
 * be in the reference's top-n there and within NEAR_TIE (1e-3) of the reference's top-1
 * log-prob: 1e-3 is ~100x the expected numerical difference, while a real bug (a wrong KV
 * block or position, a stale or misplaced logits row, a broken preemption) moves logits by
 * O(0.1) and shows at a step with a clear winner. On the tokens before the first
 * difference (same context), the two runs' log-probs must agree within LOGPROB_TOL, which
 * catches wrong numbers that happen not to flip a token. And at least 95% of the requests
 * must agree: near-ties are rare (a flip needs a top-2 gap of ~1e-5), so a lower rate
 * means something systematic even if each flip looks like a tie. */
static void compare(const char *name, struct request *const *ref, struct request *const *got,
		    int32_t n)
{
	int32_t same = 0, unexplained = 0, bad_same = 0;
	double max_dlp = 0;
	for (int32_t i = 0; i < n; i++) {
		const struct request *a = ref[i], *b = got[i];
		if (!a || !b || !a->out_logprobs || !b->out_logprobs || !a->out_top) {
			unexplained++;
			continue;
		}
		int32_t m = a->n_out < b->n_out ? a->n_out : b->n_out, k = 0;
		while (k < m && a->out_ids[k] == b->out_ids[k])
			k++;
		for (int32_t j = 0; j < k; j++) {
			double d = fabs((double)a->out_logprobs[j] - b->out_logprobs[j]);
			if (!(d <= max_dlp))
				max_dlp = isnan(d) ? INFINITY : d;
		}
		if (k == a->n_out && k == b->n_out) {
			same++;
			if (a->finish != b->finish || a->text_len != b->text_len ||
			    memcmp(a->text, b->text, a->text_len) != 0) {
				bad_same++;
				fprintf(stderr,
					"%s: request %d: same ids, finish %s vs %s, text '%s' vs "
					"'%s'\n",
					name, i, req_finish_name(a->finish),
					req_finish_name(b->finish), a->text, b->text);
			}
			continue;
		}
		/* Same ids up to the shorter one: the same context cannot end one and not
		 * the other (EOS and stop tokens are among the ids), so no tie explains it. */
		if (k == m) {
			unexplained++;
			fprintf(stderr,
				"%s: request %d: %d vs %d tokens, identical up to the shorter\n",
				name, i, a->n_out, b->n_out);
			continue;
		}
		const struct sampler_result *t = &a->out_top[k];
		double lp_other = NAN;
		for (int32_t j = 0; j < t->n_top; j++)
			if (t->top_ids[j] == b->out_ids[k])
				lp_other = t->top_logprobs[j];
		double gap = t->n_top > 0 ? t->top_logprobs[0] - lp_other : NAN;
		bool tie =
		    t->n_top > 0 && t->top_ids[0] == a->out_ids[k] && gap >= 0 && gap < NEAR_TIE;
		unexplained += !tie;
		fprintf(stderr,
			"%s: request %d first differs at token %d: reference %d (log-prob %.6f), "
			"other %d (reference log-prob %.6f): gap %.3g, %s\n",
			name, i, k, a->out_ids[k], (double)t->top_logprobs[0], b->out_ids[k],
			lp_other, gap, tie ? "a near-tie" : "NOT a near-tie");
	}
	printf("agreement %s: %d/%d (%.1f%%)\n", name, same, n, n ? 100.0 * same / n : 0.0);
	printf("max |log-prob difference| %s on identical prefixes: %.3g\n", name, max_dlp);
	CHECK(unexplained == 0,
	      "%s: %d requests differ from the GPU-alone run at a step that "
	      "is not a near-tie (< %g)",
	      name, unexplained, NEAR_TIE);
	CHECK(bad_same == 0, "%s: %d requests with the same ids differ in finish or text", name,
	      bad_same);
	CHECK(same * 100 >= 95 * n, "%s: agreement %d/%d is below 95%%", name, same, n);
	CHECK(max_dlp < LOGPROB_TOL, "%s: log-probs differ by %g after the same tokens", name,
	      max_dlp);
}

/* ---- setup ---- */

static int32_t env_int(const char *name, int32_t def)
{
	const char *v = getenv(name);
	return v && atoi(v) > 0 ? atoi(v) : def;
}

static void make_specs(struct spec *sp, int32_t n, int32_t cap_tokens)
{
	for (int32_t i = 0; i < n; i++) {
		struct spec *s = &sp[i];
		if (engine_util_rnd(&rng_state, 3) == 0) {
			s->n_ids = 1 + (int32_t)engine_util_rnd(&rng_state, 100);
			s->ids[0] = 1; /* BOS */
			for (int32_t j = 1; j < s->n_ids; j++)
				s->ids[j] = 3 + (int32_t)engine_util_rnd(&rng_state, 509);
		} else {
			s->prompt = engine_util_prompt(engine_util_rnd(&rng_state, 1000));
		}
		s->max_tokens = engine_util_rnd(&rng_state, 4) == 0
				    ? 24 + (int32_t)engine_util_rnd(&rng_state, 25)
				    : 1 + (int32_t)engine_util_rnd(&rng_state, 16);
		if (s->max_tokens > cap_tokens)
			s->max_tokens = cap_tokens;
		if (engine_util_rnd(&rng_state, 3) == 0)
			s->stop =
			    stops[engine_util_rnd(&rng_state, sizeof stops / sizeof stops[0])];
		s->logprobs = engine_util_rnd(&rng_state, 4) == 0 ? 5 : 2;
	}
}

int main(void)
{
	if (backend_cuda_device_count(NULL, 0) == 0) {
		printf("SKIP: no CUDA device; the GPU engine test did not run\n");
		printf("0 passed, 0 failed\n");
		return 0;
	}
	const char *path = check_shared("models/stories260K.gguf");
	if (!path)
		return check_summary();
	int32_t N = env_int("BG_GPU_ENGINE_N", 200);
	int32_t cap = env_int("BG_GPU_ENGINE_MAX_TOKENS", 48);
	struct bg_err err = {0};
	struct model *m = NULL;
	struct tok *tok = NULL;
	CHECK(model_load(path, &m, &err) == BG_OK, "model: %s", err.msg);
	if (m)
		CHECK(tok_load(m->gguf, &tok, &err) == BG_OK, "tokenizer: %s", err.msg);
	/* big: no-evict with 96 requests of up to 148 tokens (10 blocks) fits at once.
	 * small: 16 blocks of 16; a request needs up to 10, so max-util with 64 in flight
	 * must preempt, while every request still fits the pool alone. */
	struct backend *big = m ? gpu_util_backend(m, true, 16, 32768) : NULL;
	struct backend *small = m ? gpu_util_backend(m, true, 16, 256) : NULL;
	struct backend *cpu = m ? gpu_util_backend(m, false, 16, 32768) : NULL;
	if (!tok || !big || !small || !cpu)
		goto out;
	struct model_hparams hp = m->hp;
	hp.n_ctx_train = 512; /* trained length (as test_invariance) */
	struct spec *sp = calloc((size_t)N, sizeof *sp);
	make_specs(sp, N, cap);
	fprintf(stderr, "%d requests, max_tokens up to %d, on %s\n", N, cap, big->device);

	/* the reference: each request alone on the GPU, batch size 1 */
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.max_batch_size = 1;
	cfg.overlap = 0; /* serial: the batched runs overlap (the default on CUDA) */
	struct request **ref = calloc((size_t)N, sizeof *ref);
	int32_t n_bad = 0, n_stop = 0;
	for (int32_t i = 0; i < N; i++) {
		struct engine_util_run R;
		enum bg_status st = run(&cfg, big, tok, &hp, &sp[i], 1, &R, NULL);
		if (st != BG_OK || R.n_emitted != 1 || !valid(R.res[0], &sp[i])) {
			if (n_bad++ == 0)
				fprintf(stderr, "alone %d: %s\n", i,
					R.res[0] ? R.res[0]->error.message : "no result");
		}
		ref[i] = R.res[0];
		R.res[0] = NULL;
		engine_util_run_free(&R);
		n_stop += ref[i] && ref[i]->finish == REQ_FINISH_STOP;
	}
	CHECK(n_bad == 0, "%d requests alone on the GPU have no valid result", n_bad);
	if (N >= 100)
		CHECK(n_stop > 0, "some requests end on a stop string (%d)", n_stop);

	/* batched: both policies, preemption by recompute and by swap */
	for (int p = 0; p < 3; p++) {
		const char *name = engine_util_policy(&cfg, p);
		struct backend *be = p == 0 ? big : small;
		cfg.max_batch_size = p == 1 ? 64 : 96;
		cfg.max_num_tokens = p == 0 ? 1024 : 256;
		cfg.chunked_context = p != 2;
		cfg.max_queued = p == 0 ? 1024 : 64;
		cfg.order = p == 1 ? ENGINE_ORDER_COMPLETION : ENGINE_ORDER_INPUT;
		struct engine_util_run R;
		int32_t peak_batch = 0;
		enum bg_status st = run(&cfg, be, tok, &hp, sp, N, &R, &peak_batch);
		check_results(name, st, &R);
		CHECK(R.tot.overlap_steps > 0, "%s: overlap is on by default on CUDA", name);
		fprintf(stderr, "%s: %d requests, peak batch %d, %lld preemptions\n", name, N,
			peak_batch, (long long)R.tot.preemptions);
		if (p == 0) {
			CHECK(R.tot.preemptions == 0, "no-evict preempted %lld times",
			      (long long)R.tot.preemptions);
			/* batches of 64+ need that many requests in flight at once */
			if (N >= 128)
				CHECK(peak_batch >= 64, "no-evict: the largest batch was %d",
				      peak_batch);
		} else if (N >= 20) {
			/* a handful of requests may all fit the small pool at once */
			CHECK(R.tot.preemptions > 0, "%s: no preemption happened", name);
		}
		if (st == BG_OK)
			compare(name, ref, R.res, N);
		engine_util_run_free(&R);
	}

	/* the CPU backend on the same requests. It is batch-invariant (test_invariance), so
	 * one batched run gives each request's alone result. */
	{
		engine_config_default(&cfg);
		cfg.max_batch_size = 64;
		struct engine_util_run R;
		enum bg_status st = run(&cfg, cpu, tok, &hp, sp, N, &R, NULL);
		check_results("cpu", st, &R);
		if (st == BG_OK)
			compare("gpu-alone vs cpu", ref, R.res, N);
		engine_util_run_free(&R);
	}

	for (int32_t i = 0; i < N; i++)
		req_free(ref[i]);
	free(ref);
	free(sp);
out:
	backend_destroy(big);
	backend_destroy(small);
	backend_destroy(cpu);
	tok_free(tok);
	model_free(m);
	return check_summary();
}
