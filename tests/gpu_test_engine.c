/* gpu_test_engine: the whole engine on the CUDA backend (through the plugin, as the
 * binary uses it) against itself and against the CPU backend. A workload runs:
 *   - every request alone on the GPU (max_batch_size 1, overlap off): the reference;
 *   - all at once under no-evict (a large KV pool), under max-util with recompute and
 *     with swap (a small pool: preemptions happen, asserted from the engine's totals);
 *   - all at once on the CPU backend.
 * The batched GPU runs overlap steps (engine.c, "Overlap": on by default on CUDA), so
 * they also check the overlapped engine on the CUDA backend against its serial runs.
 *
 * The workload, by default, with a real trained model, ../shared/models/stories260K.gguf:
 * text and token-id prompts of 1 to ~100 tokens, max_tokens 1 to 48, some stop strings;
 * half the requests greedy with top-2 or top-5 log-probs, half sampled (temperature 0.5 to
 * 1.3, top-k, top-p, a seed each, top-20 log-probs). No-evict runs batches of 64+ requests
 * (asserted from the engine's per-iteration stats). 200 requests, max_tokens up to 48;
 * BG_GPU_ENGINE_N (requests) and BG_GPU_ENGINE_MAX_TOKENS (a cap on max_tokens) make a
 * smaller run for compute-sanitizer and the CPU emulator of CUDA (tests/run_gpu.sh,
 * gpu/emu/run.sh).
 *
 * BG_GPU_FULL=1 (alone, as in gpu_test_model): a synthetic model of Llama-3-8B's widths
 * with 2 layers and a vocabulary of 128256 (f16), five token-id prompts of 16 to 288
 * tokens, greedy and sampled (wide_specs()): the decode graphs' attention runs 5 to 32
 * splits (sized for the 8192 context; gpu_attention_splits). Minutes under gpu/emu.
 *
 * Checks: every request has exactly one result with a valid finish; every sampled token
 * is the one the request's own draw picks from the log-probs its run reported
 * (check_draws()); the batched runs' and the CPU's tokens agree with the GPU-alone run's
 * up to near-ties and near-boundary draws (compare()); the agreement rates are printed
 * as "agreement NAME: a/n (p%), sampled s/m".
 * Without a CUDA device: a SKIP line, "0 passed, 0 failed", exit 0. */
#include <math.h>
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

/* Log-probs of the same token after the same context may differ by a workload's lp_tol
 * (struct suite), and a greedy flip is accepted only where the reference's top-1 and the
 * other run's token are within lp_tol / 2 in log-prob (compare() says why):
 *  - stories260K, f32 weights and activations: only summation orders differ;
 *    gpu_test_model bounds GPU vs CPU logits by 1e-3, and a log-prob moves by at most
 *    twice its logits' largest change: 2e-3;
 *  - the 8B-wide model, f16 weights: both backends round activations to f16 at every
 *    GEMM input, where a summation-order difference that crosses a rounding boundary
 *    becomes an f16 ulp (2^-11 relative); gpu_test_model's full-width check bounds
 *    |cuda - cpu| by 0.03 of the logits' rms (measured 0.002): 2e-2. */
#define LOGPROB_TOL_F32 2e-3
#define LOGPROB_TOL_F16 2e-2
/* A replayed draw from a run's own reported log-probs (replay()) misses the sampler's by
 * rounding only: log-probs reported in fp32 (~1e-7 relative), v = logit / T rounded to
 * fp32, sampler_expf within 2 ulp, weights floored at 2^-32: ~1e-5 on a cumulative mass
 * at worst; the slack is 10x that, and ~1000x below what a wrong temperature or top-p
 * moves (O(0.1)). */
#define SELF_SLACK 1e-4

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static const char *const stops[] = {".", " the", ",", "and", "\"", " was", "!"};

/* Sampled requests' settings, drawn in turn. top_k is at most the 20 reported
 * alternatives, or 0 with temperature 1: replay() needs every candidate's probability
 * (see there). */
static const struct {
	float temperature;
	int32_t top_k;
	float top_p;
} samplings[] = {
    {0.7f, 20, 1.0f}, {0.7f, 10, 0.9f},	 {1.0f, 0, 0.9f}, {1.0f, 0, 0.6f},
    {1.0f, 20, 0.8f}, {1.3f, 20, 0.95f}, {1.3f, 5, 1.0f}, {0.5f, 3, 0.5f},
};

struct spec {
	const char *prompt; /* or NULL: ids */
	int32_t ids[300];   /* [n_ids] BOS + vocabulary entries */
	int32_t n_ids;
	int32_t max_tokens;
	const char *stop;  /* or NULL */
	int32_t logprobs;  /* greedy: 2 or 5 (the near-tie rule needs the runner-up); sampled:
			      SAMPLER_MAX_TOP */
	float temperature; /* 0: greedy */
	int32_t top_k;
	float top_p;
	uint64_t seed;
	bool ignore_eos;
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
	r->logprobs = s->logprobs;
	r->ignore_eos = s->ignore_eos;
	r->sampling.temperature = s->temperature;
	r->sampling.top_k = s->top_k;
	r->sampling.top_p = s->top_p;
	r->sampling.seed = s->seed;
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

/* ---- replaying a draw ----
 *
 * A request's k-th sampled token (k from 0) is drawn with u_k, the k-th uniform of its
 * RNG seeded with its seed (sampler.h: one draw per sampled token; the engine keeps the
 * state with the request, so batching and preemption do not change it). The GPU and CPU
 * samplers make every decision on exact integer masses (sampler_math.h), so they pick the
 * same token from the same logits and u; two runs differ only where their logits do.
 *
 * What a run reports at a step, the top-20 log-probs lp_0 >= lp_1 >= ... of the raw logits
 * (ties to the lower id), is enough to redo the draw when every candidate is among them:
 * top-k keeps the k best (k <= 20), whose probabilities after the temperature T are
 * q_j = exp((lp_j - lp_0) / T) / W, W their sum; without top-k at T = 1, q_j = exp(lp_j)
 * (W = 1: the whole vocabulary). With C_c = q_0 + ... + q_{c-1}, top-p keeps the first c
 * with C_c >= top_p, and the draw picks the first j with C_{j+1} > u * C_c. */

/* u_k for seed, as sampler.h defines the RNG (splitmix64 seeding, xoshiro256**, the upper
 * 24 bits of a draw times 2^-24), written here from the published algorithms instead of
 * calling core/sample, so that a draw the engine gets wrong is not also the test's. */
static double draw_u(uint64_t seed, int32_t k)
{
	uint64_t s[4], x = seed, r = 0;
	for (int i = 0; i < 4; i++) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		s[i] = z ^ (z >> 31);
	}
	for (int32_t j = 0; j <= k; j++) {
		uint64_t v = s[1] * 5, t = s[1] << 17;
		r = ((v << 7) | (v >> 57)) * 9;
		s[2] ^= s[0];
		s[3] ^= s[1];
		s[1] ^= s[2];
		s[0] ^= s[3];
		s[2] ^= t;
		s[3] = (s[3] << 45) | (s[3] >> 19);
	}
	return (double)(r >> 40) / 16777216.0;
}

enum { REPLAY_NO, REPLAY_YES, REPLAY_UNKNOWN };

/* Whether the draw with u can pick token from t (the reported top-n at one step of a
 * request of spec s) when every C moves by up to slack and candidates whose log-probs are
 * within tie of each other trade places: REPLAY_YES or REPLAY_NO, or REPLAY_UNKNOWN where
 * the top-n does not decide (a greedy request; without top-k, a top-p cut or a draw past
 * the n-th). With the slack of rounding only, a token outside is a wrong draw. */
static int replay(const struct spec *s, const struct sampler_result *t, double u, double slack,
		  double tie, int32_t token)
{
	int32_t n = t->n_top;
	bool topk = s->top_k > 0;
	if (!(s->temperature > 0) || n < 1 || (topk && s->top_k > n) ||
	    (!topk && s->temperature != 1.0f))
		return REPLAY_UNKNOWN;
	int32_t m = topk ? s->top_k : n; /* the candidates known */
	double C[SAMPLER_MAX_TOP + 1] = {0};
	for (int32_t j = 0; j < m; j++)
		C[j + 1] =
		    C[j] +
		    (topk ? exp(((double)t->top_logprobs[j] - t->top_logprobs[0]) / s->temperature)
			  : exp((double)t->top_logprobs[j]));
	if (topk)
		for (int32_t j = 1; j <= m; j++)
			C[j] /= C[m];
	/* the counts top-p may keep: C_c + slack >= top_p and C_{c-1} - slack < top_p;
	 * 0 stands for "all" (no top-p, or no top-k and a cut past the n-th) */
	int32_t c_lo = topk ? m : 0, c_hi = c_lo;
	if (s->top_p < 1.0f) {
		for (c_lo = 1; c_lo < m && C[c_lo] + slack < s->top_p; c_lo++)
			;
		for (c_hi = c_lo; c_hi < m && C[c_hi] - slack < s->top_p; c_hi++)
			;
		if (!topk && C[c_hi] - slack < s->top_p)
			return REPLAY_UNKNOWN;
	}
	bool pick[SAMPLER_MAX_TOP] = {false};
	for (int32_t c = c_lo; c <= c_hi; c++) {
		int32_t lim = c ? c : m;
		double target = u * (c ? C[c] : 1.0);
		if (!c && C[m] <= target + slack)
			return REPLAY_UNKNOWN; /* the draw may fall past the n-th */
		for (int32_t j = 0; j < lim; j++)
			if (C[j + 1] > target - slack && C[j] <= target + slack)
				pick[j] = true;
	}
	/* near-ties: a run of candidates within tie of the next may come in any order */
	for (int32_t a = 0, b; a < n; a = b) {
		bool any = pick[a];
		for (b = a + 1; b < n && t->top_logprobs[b - 1] - t->top_logprobs[b] <= tie; b++)
			any |= pick[b];
		for (int32_t j = a; j < b; j++)
			pick[j] = any;
	}
	for (int32_t j = 0; j < n; j++)
		if (t->top_ids[j] == token)
			return pick[j] ? REPLAY_YES : REPLAY_NO;
	return REPLAY_NO;
}

/* Every sampled token of a run is one its own draw picks from the log-probs the run
 * reported, within rounding (SELF_SLACK). This is what catches a wrong temperature or
 * top-p, a draw from the wrong seed or another row's draw on any one backend, which a
 * comparison of two runs would miss where both share the error. At least 80% of the
 * sampled tokens must be decided by their top-20 (the rest: replay()'s REPLAY_UNKNOWN). */
static void check_draws(const char *name, const struct spec *sp, struct request *const *res,
			int32_t n)
{
	int64_t n_tok = 0, n_known = 0, n_bad = 0, n_not_top1 = 0;
	for (int32_t i = 0; i < n; i++) {
		const struct request *r = res[i];
		if (!r || !r->out_top || !(sp[i].temperature > 0))
			continue;
		for (int32_t k = 0; k < r->n_out; k++) {
			int v = replay(&sp[i], &r->out_top[k], draw_u(sp[i].seed, k), SELF_SLACK,
				       SELF_SLACK, r->out_ids[k]);
			n_tok++;
			n_known += v != REPLAY_UNKNOWN;
			n_not_top1 += r->out_ids[k] != r->out_top[k].top_ids[0];
			if (v == REPLAY_NO && n_bad++ < 5)
				fprintf(stderr,
					"%s: request %d token %d: %d is not what its draw (u %.6f, "
					"T %.2f, top-k %d, top-p %.2f) picks from its log-probs\n",
					name, i, k, r->out_ids[k], draw_u(sp[i].seed, k),
					(double)sp[i].temperature, sp[i].top_k,
					(double)sp[i].top_p);
		}
	}
	printf("draws %s: %lld of %lld sampled tokens replayed (%lld not the top-1), %lld wrong\n",
	       name, (long long)n_known, (long long)n_tok, (long long)n_not_top1, (long long)n_bad);
	CHECK(n_bad == 0, "%s: %lld sampled tokens are not their draw's", name, (long long)n_bad);
	CHECK(n_known * 10 >= n_tok * 8, "%s: only %lld of %lld sampled tokens could be replayed",
	      name, (long long)n_known, (long long)n_tok);
}

/* ---- agreement with the GPU-alone reference ----
 *
 * Why the rule is not "bitwise equal": cuBLAS picks its GEMM kernel (tiling, split-K) by
 * the problem's size, so the batch of 64 rows and the batch of 1 sum the same fp32
 * products in different orders; the attention kernels likewise split keys differently by
 * batch. The logits then differ in their last bits (~1e-6 relative after 5 layers), and a
 * greedy argmax flips where the top two log-probs are that close, a draw where u * C_c
 * falls that close to a boundary. The CPU backend sums in yet another order
 * (gpu_test_model bounds GPU vs CPU logits by 1e-3).
 *
 * So, per request: identical token ids count as agreement (and must then have the same
 * finish and text). Otherwise, at the first token k that differs (same context, and for a
 * sampled request the same u):
 *  - greedy: the other run's token must be in the reference's top-n there and within
 *    lp_tol / 2 of the reference's top-1 log-prob (1e-3 for stories260K: ~100x the
 *    expected numerical difference), while a real bug (a wrong KV block or position, a
 *    stale or misplaced logits row, a broken preemption) moves logits by O(0.1) and shows
 *    at a step with a clear winner;
 *  - sampled: the draw replayed from the reference's log-probs at k, with its boundaries
 *    moved by what the two runs' log-probs there actually differ by (d, the largest
 *    difference over the top-20: a probability moves by at most q * 2d / T, a cumulative
 *    mass by 2d / T; the slack is twice that), must be able to pick both runs' tokens.
 *    A divergence is then a draw within that slack (~1e-4 for stories260K) of a
 *    cumulative boundary or of the top-p cut, or a near-tie: rare, a chance of about the
 *    slack per token. A wrong temperature or top-p, another seed or another row's u move
 *    the draw by O(0.1) and fail here, and check_draws() fails them even where both runs
 *    share them.
 * On the tokens up to k (same context), the log-probs of the chosen token and of the
 * top-n the two runs share must agree within lp_tol, which catches wrong numbers that
 * happen not to change a token. And at least 95% of the requests must agree: divergences
 * are rare, so a lower rate means something systematic even if each one looks explained. */

/* The largest |log-prob difference| of the ids both top-n lists hold. */
static double top_diff(const struct sampler_result *a, const struct sampler_result *b)
{
	double d = 0;
	for (int32_t i = 0; i < a->n_top; i++)
		for (int32_t j = 0; j < b->n_top; j++)
			if (a->top_ids[i] == b->top_ids[j]) {
				double x = fabs((double)a->top_logprobs[i] - b->top_logprobs[j]);
				if (!(x <= d))
					d = isnan(x) ? INFINITY : x;
			}
	return d;
}

static void compare(const char *name, const struct spec *sp, struct request *const *ref,
		    struct request *const *got, int32_t n, double lp_tol)
{
	int32_t same = 0, unexplained = 0, bad_same = 0, n_sampled = 0, same_sampled = 0;
	double max_dlp = 0;
	for (int32_t i = 0; i < n; i++) {
		const struct request *a = ref[i], *b = got[i];
		bool sampled = sp[i].temperature > 0;
		n_sampled += sampled;
		if (!a || !b || !a->out_logprobs || !b->out_logprobs || !a->out_top ||
		    !b->out_top) {
			unexplained++;
			continue;
		}
		int32_t m = a->n_out < b->n_out ? a->n_out : b->n_out, k = 0;
		while (k < m && a->out_ids[k] == b->out_ids[k])
			k++;
		for (int32_t j = 0; j <= k && j < m; j++) {
			double d = top_diff(&a->out_top[j], &b->out_top[j]);
			if (j < k) {
				double x = fabs((double)a->out_logprobs[j] - b->out_logprobs[j]);
				d = x > d || isnan(x) ? (isnan(x) ? INFINITY : x) : d;
			}
			if (!(d <= max_dlp))
				max_dlp = d;
		}
		if (k == a->n_out && k == b->n_out) {
			same++;
			same_sampled += sampled;
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
		bool ok;
		if (sampled) {
			double d = top_diff(t, &b->out_top[k]), T = sp[i].temperature;
			double u = draw_u(sp[i].seed, k);
			double slack = SELF_SLACK + 4 * d / T, tie = SELF_SLACK + 2 * d;
			ok = replay(&sp[i], t, u, slack, tie, a->out_ids[k]) == REPLAY_YES &&
			     replay(&sp[i], t, u, slack, tie, b->out_ids[k]) == REPLAY_YES;
			fprintf(stderr,
				"%s: request %d (sampled, T %.2f, top-k %d, top-p %.2f) first "
				"differs at token %d: reference %d, other %d, u %.6f, log-probs "
				"differ by %.3g: %s\n",
				name, i, (double)T, sp[i].top_k, (double)sp[i].top_p, k,
				a->out_ids[k], b->out_ids[k], u, d,
				ok ? "both within reach of a near-boundary draw"
				   : "NOT explained by a near boundary");
		} else {
			double lp_other = NAN;
			for (int32_t j = 0; j < t->n_top; j++)
				if (t->top_ids[j] == b->out_ids[k])
					lp_other = t->top_logprobs[j];
			double gap = t->n_top > 0 ? t->top_logprobs[0] - lp_other : NAN;
			ok = t->n_top > 0 && t->top_ids[0] == a->out_ids[k] && gap >= 0 &&
			     gap < lp_tol / 2;
			fprintf(stderr,
				"%s: request %d first differs at token %d: reference %d (log-prob "
				"%.6f), other %d (reference log-prob %.6f): gap %.3g, %s\n",
				name, i, k, a->out_ids[k], (double)t->top_logprobs[0],
				b->out_ids[k], lp_other, gap, ok ? "a near-tie" : "NOT a near-tie");
		}
		unexplained += !ok;
	}
	printf("agreement %s: %d/%d (%.1f%%), sampled %d/%d\n", name, same, n,
	       n ? 100.0 * same / n : 0.0, same_sampled, n_sampled);
	printf("max |log-prob difference| %s on identical prefixes: %.3g\n", name, max_dlp);
	CHECK(unexplained == 0,
	      "%s: %d requests differ from the GPU-alone run at a step that is neither a "
	      "near-tie (< %g) nor a near-boundary draw",
	      name, unexplained, lp_tol / 2);
	CHECK(bad_same == 0, "%s: %d requests with the same ids differ in finish or text", name,
	      bad_same);
	CHECK(same * 100 >= 95 * n, "%s: agreement %d/%d is below 95%%", name, same, n);
	CHECK(max_dlp < lp_tol, "%s: log-probs differ by %g after the same tokens", name, max_dlp);
}

/* ---- the runs ---- */

/* A workload's model and pools. */
struct suite {
	const struct model *m;
	const struct tok *tok;
	struct model_hparams hp;
	int64_t big_kv;		/* KV tokens of the alone and no-evict runs: all at once */
	int64_t small_kv;	/* of the max-util runs: preemptions, each request fits alone */
	int32_t max_num_tokens; /* per step, max-util runs (the longest prompt fits) */
	bool big_batches;	/* no-evict must reach batches of 64 */
	bool need_preemption;	/* max-util must preempt */
	double lp_tol;		/* LOGPROB_TOL_F32 or _F16 */
};

/* Runs specs [N] alone on the GPU, batched on the GPU under the three setups and on the
 * CPU, with the checks above. Backends live one at a time (the full-width model's weights
 * are ~3 GB per backend under the emulator). */
static void run_suite(const struct suite *S, const struct spec *sp, int32_t N)
{
	struct backend *be = gpu_util_backend(S->m, true, 16, S->big_kv);
	if (!be)
		return;
	fprintf(stderr, "%d requests on %s\n", N, be->device);

	/* the reference: each request alone on the GPU, batch size 1 */
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.max_batch_size = 1;
	cfg.overlap = 0; /* serial: the batched runs overlap (the default on CUDA) */
	struct request **ref = calloc((size_t)N, sizeof *ref);
	int32_t n_bad = 0, n_stop = 0;
	for (int32_t i = 0; i < N; i++) {
		struct engine_util_run R;
		enum bg_status st = run(&cfg, be, S->tok, &S->hp, &sp[i], 1, &R, NULL);
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
	check_draws("gpu-alone", sp, ref, N);

	/* batched: both policies, preemption by recompute and by swap */
	for (int p = 0; p < 3; p++) {
		const char *name = engine_util_policy(&cfg, p);
		if (p == 1) {
			backend_destroy(be);
			be = gpu_util_backend(S->m, true, 16, S->small_kv);
			if (!be)
				break;
		}
		cfg.max_batch_size = p == 1 ? 64 : 96;
		cfg.max_num_tokens = p == 0 ? 1024 : S->max_num_tokens;
		cfg.chunked_context = p != 2;
		cfg.max_queued = p == 0 ? 1024 : 64;
		cfg.order = p == 1 ? ENGINE_ORDER_COMPLETION : ENGINE_ORDER_INPUT;
		struct engine_util_run R;
		int32_t peak_batch = 0;
		enum bg_status st = run(&cfg, be, S->tok, &S->hp, sp, N, &R, &peak_batch);
		check_results(name, st, &R);
		CHECK(R.tot.overlap_steps > 0, "%s: overlap is on by default on CUDA", name);
		fprintf(stderr, "%s: %d requests, peak batch %d, %lld preemptions\n", name, N,
			peak_batch, (long long)R.tot.preemptions);
		if (p == 0) {
			CHECK(R.tot.preemptions == 0, "no-evict preempted %lld times",
			      (long long)R.tot.preemptions);
			/* batches of 64+ need that many requests in flight at once */
			if (S->big_batches)
				CHECK(peak_batch >= 64, "no-evict: the largest batch was %d",
				      peak_batch);
		} else if (S->need_preemption) {
			CHECK(R.tot.preemptions > 0, "%s: no preemption happened", name);
		}
		if (st == BG_OK) {
			check_draws(name, sp, R.res, N);
			compare(name, sp, ref, R.res, N, S->lp_tol);
		}
		engine_util_run_free(&R);
	}
	backend_destroy(be);

	/* the CPU backend on the same requests. It is batch-invariant (test_invariance), so
	 * one batched run gives each request's alone result. */
	be = gpu_util_backend(S->m, false, 16, S->big_kv);
	if (be) {
		engine_config_default(&cfg);
		cfg.max_batch_size = 64;
		struct engine_util_run R;
		enum bg_status st = run(&cfg, be, S->tok, &S->hp, sp, N, &R, NULL);
		check_results("cpu", st, &R);
		if (st == BG_OK) {
			check_draws("cpu", sp, R.res, N);
			compare("gpu-alone vs cpu", sp, ref, R.res, N, S->lp_tol);
		}
		engine_util_run_free(&R);
		backend_destroy(be);
	}
	for (int32_t i = 0; i < N; i++)
		req_free(ref[i]);
	free(ref);
}

/* ---- setup ---- */

static int32_t env_int(const char *name, int32_t def)
{
	const char *v = getenv(name);
	return v && atoi(v) > 0 ? atoi(v) : def;
}

/* Makes request i sampled with the i-th settings of samplings[] and a seed of its own. */
static void set_sampled(struct spec *s, int32_t i)
{
	int32_t j = i % (int32_t)(sizeof samplings / sizeof samplings[0]);
	s->temperature = samplings[j].temperature;
	s->top_k = samplings[j].top_k;
	s->top_p = samplings[j].top_p;
	s->seed = 1000003u * (uint64_t)i + 17;
	s->logprobs = SAMPLER_MAX_TOP;
}

static void make_specs(struct spec *sp, int32_t n, int32_t cap_tokens)
{
	for (int32_t i = 0; i < n; i++) {
		struct spec *s = &sp[i];
		s->top_p = 1.0f;
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
		if (i % 2)
			set_sampled(s, i / 2);
	}
}

/* The full-width workload: five token-id prompts over the whole vocabulary. The first
 * three fill 18 + 2 + 1 = 21 blocks of 16, the small pool's size, so under max-util all
 * three are admitted and their first generated tokens find no free block: a preemption;
 * the last two wait for room. Decode steps run in the graphs of batch buckets 1 to 8,
 * whose split counts (32, 17, 9, 5 on 132 SMs) are sized for the 8192 context, so each
 * split of these contexts holds a few keys (288 / 32 = 9 at batch 1); a decode token in a
 * step with prefill (outside a graph) gets 2 splits once its context passes 256. Three
 * sampled, two greedy. */
static int32_t wide_specs(struct spec *sp, int32_t V)
{
	static const int32_t len[] = {288, 32, 16, 100, 17};
	static const int32_t max_tokens[] = {8, 6, 10, 8, 12};
	int32_t n = (int32_t)(sizeof len / sizeof len[0]);
	for (int32_t i = 0; i < n; i++) {
		struct spec *s = &sp[i];
		s->n_ids = len[i];
		for (int32_t j = 0; j < len[i]; j++)
			s->ids[j] =
			    (int32_t)((j * 104729u + (unsigned)i * 7919u + 1u) % (unsigned)V);
		s->max_tokens = max_tokens[i];
		s->ignore_eos = true;
		s->top_p = 1.0f;
		s->logprobs = 5;
		if (i % 2 == 0)
			set_sampled(s, i == 0 ? 0 : i == 2 ? 4 : 7);
	}
	return n;
}

/* Llama-3-8B's shape with 2 layers, random f16 weights (as gpu_test_model's full-width
 * check), and its generated tokenizer. */
static void test_full_width(void)
{
	struct model *m = gpu_util_wide_model();
	if (!m)
		return;
	struct tok *tok = NULL;
	struct bg_err err = {0};
	enum bg_status st = tok_load(m->gguf, &tok, &err);
	CHECK(st == BG_OK, "the 8B-wide model's tokenizer: %s", err.msg);
	if (st == BG_OK) {
		CHECK(m->hp.n_vocab == 128256, "vocabulary %d", (int)m->hp.n_vocab);
		static struct spec sp[5];
		int32_t n = wide_specs(sp, (int32_t)m->hp.n_vocab);
		/* big: everything at once; small: 21 blocks of 16 (wide_specs()) */
		struct suite S = {m, tok, m->hp, 2048, 336, 512, false, true, LOGPROB_TOL_F16};
		run_suite(&S, sp, n);
	}
	tok_free(tok);
	model_free(m);
}

int main(void)
{
	if (backend_cuda_device_count(NULL, 0) == 0) {
		printf("SKIP: no CUDA device; the GPU engine test did not run\n");
		printf("0 passed, 0 failed\n");
		return 0;
	}
	if (getenv("BG_GPU_FULL")) {
		test_full_width();
		return check_summary();
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
	if (tok) {
		struct spec *sp = calloc((size_t)N, sizeof *sp);
		make_specs(sp, N, cap);
		fprintf(stderr, "max_tokens up to %d\n", cap);
		/* big: no-evict with 96 requests of up to 148 tokens (10 blocks) fits at once.
		 * small: 16 blocks of 16; a request needs up to 10, so max-util with 64 in
		 * flight must preempt, while every request still fits the pool alone. */
		struct suite S = {m,   tok,	 m->hp,	  32768,	  256,
				  256, N >= 128, N >= 20, LOGPROB_TOL_F32};
		S.hp.n_ctx_train = 512; /* trained length (as test_invariance) */
		run_suite(&S, sp, N);
		free(sp);
	}
	tok_free(tok);
	model_free(m);
	return check_summary();
}
