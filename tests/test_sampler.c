/* test_sampler: the sampling definition of core/sample/sampler.h, checked against hand-derived
 * values, independent double-precision math and statistics over many seeded draws. */
#include "sample/sampler.h"
#include "sample/sampler_math.h"

#include <stdint.h>

#include "check.h"

static uint64_t splitmix64_test(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void *scratch_for(int32_t n_vocab)
{
	return malloc(sampler_scratch_bytes(n_vocab));
}

/* ---- RNG against published reference values ---- */
static void test_rng(void)
{
	/* splitmix64 seeded with 0: outputs from Vigna's reference splitmix64.c */
	struct sampler_rng r;
	sampler_rng_seed(&r, 0);
	CHECK(r.s[0] == 0xe220a8397b1dcdafull, "s0 = %016llx", (unsigned long long)r.s[0]);
	CHECK(r.s[1] == 0x6e789e6aa1b965f4ull, "s1 = %016llx", (unsigned long long)r.s[1]);
	CHECK(r.s[2] == 0x06c45d188009454full, "s2 = %016llx", (unsigned long long)r.s[2]);
	CHECK(r.s[3] == 0xf88bb8a8724c81ecull, "s3 = %016llx", (unsigned long long)r.s[3]);

	/* xoshiro256** from state {1, 2, 3, 4}: the first ten outputs of the reference
	 * xoshiro256starstar.c (the test vector used by e.g. Rust's rand_xoshiro). A
	 * uniform is the top 24 bits times 2^-24, so compare those bits exactly. */
	static const uint64_t ref[10] = {
	    11520ull,
	    0ull,
	    1509978240ull,
	    1215971899390074240ull,
	    1216172134540287360ull,
	    607988272756665600ull,
	    16172922978634559625ull,
	    8476171486693032832ull,
	    10595114339597558777ull,
	    2904607092377533576ull,
	};
	r.s[0] = 1;
	r.s[1] = 2;
	r.s[2] = 3;
	r.s[3] = 4;
	for (int i = 0; i < 10; i++) {
		float u = sampler_rng_uniform(&r);
		uint64_t bits = (uint64_t)(u * 16777216.0f);
		CHECK(bits == ref[i] >> 40, "draw %d: top bits %llu, want %llu", i,
		      (unsigned long long)bits, (unsigned long long)(ref[i] >> 40));
		CHECK(u >= 0.0f && u < 1.0f, "u = %g", u);
	}

	/* determinism and seed sensitivity */
	struct sampler_rng a, b, c;
	sampler_rng_seed(&a, 42);
	sampler_rng_seed(&b, 42);
	sampler_rng_seed(&c, 43);
	int same = 1, diff = 0;
	for (int i = 0; i < 100; i++) {
		float ua = sampler_rng_uniform(&a), ub = sampler_rng_uniform(&b);
		float uc = sampler_rng_uniform(&c);
		same &= ua == ub;
		diff += ua != uc;
	}
	CHECK(same, "same seed gives the same stream");
	CHECK(diff > 90, "different seeds give different streams (%d/100 differ)", diff);
}

/* ---- log-probs: a 4-token distribution computed here in double ---- */
static void test_logprobs(void)
{
	const float logits[4] = {1.0f, 2.0f, 0.5f, -1.0f};
	/* log-softmax by hand: lse = log(e^1 + e^2 + e^0.5 + e^-1) */
	double lse = log(exp(1.0) + exp(2.0) + exp(0.5) + exp(-1.0));
	/* = log(2.718281828 + 7.389056099 + 1.648721271 + 0.367879441) = log(12.12393864)
	 * = log(12) + log(1.0103282) = 2.4849066 + 0.0102753; written out so a wrong libm would
	 * show too */
	CHECK_NEAR(lse, 2.4951819, 1e-6, 0);
	struct sampler_params p;
	sampler_params_default(&p);
	p.n_top = 4;
	struct sampler_rng rng;
	sampler_rng_seed(&rng, 1);
	void *scr = scratch_for(4);
	struct sampler_result res;
	sampler_sample(logits, 4, &p, NULL, &rng, scr, &res);
	CHECK(res.token == 1, "greedy picks id 1, got %d", res.token);
	CHECK_NEAR(res.logprob, 2.0 - lse, 1e-6, 0);
	CHECK(res.n_top == 4, "n_top %d", res.n_top);
	const int order[4] = {1, 0, 2, 3};
	for (int i = 0; i < 4; i++) {
		CHECK(res.top_ids[i] == order[i], "top %d is %d, want %d", i, res.top_ids[i],
		      order[i]);
		CHECK_NEAR(res.top_logprobs[i], logits[order[i]] - lse, 1e-6, 0);
	}
	/* score: any token, no RNG */
	struct sampler_rng before = rng;
	sampler_score(logits, 4, 3, 2, &res);
	CHECK(res.token == 3, "scored token %d", res.token);
	CHECK_NEAR(res.logprob, -1.0 - lse, 1e-6, 0);
	CHECK(res.n_top == 2 && res.top_ids[0] == 1 && res.top_ids[1] == 0, "score top-2");
	CHECK(memcmp(&before, &rng, sizeof rng) == 0, "greedy sampling draws nothing");

	/* log-probs are of the RAW logits even with temperature and penalties */
	p.temperature = 0.5f;
	p.repetition_penalty = 1.3f;
	const int32_t hist[1] = {1};
	struct sampler_history h = {hist, 1, NULL, 0};
	sampler_sample(logits, 4, &p, &h, &rng, scr, &res);
	CHECK_NEAR(res.logprob, logits[res.token] - lse, 1e-6, 0);
	CHECK_NEAR(res.top_logprobs[0], 2.0 - lse, 1e-6, 0);

	/* large logits do not overflow (max subtraction) */
	const float big[3] = {1000.0f, 1000.0f, 999.0f};
	sampler_score(big, 3, 2, 0, &res);
	CHECK_NEAR(res.logprob, -1.0 - log(2.0 + exp(-1.0)), 1e-5, 0);
	free(scr);
}

/* ---- greedy ties go to the lower id; n_top ties likewise ---- */
static void test_ties(void)
{
	const float logits[6] = {0.0f, 3.0f, 1.0f, 3.0f, 3.0f, -2.0f};
	struct sampler_params p;
	sampler_params_default(&p);
	p.n_top = 5;
	struct sampler_rng rng;
	sampler_rng_seed(&rng, 7);
	void *scr = scratch_for(6);
	struct sampler_result res;
	sampler_sample(logits, 6, &p, NULL, &rng, scr, &res);
	CHECK(res.token == 1, "tie goes to id 1, got %d", res.token);
	const int order[5] = {1, 3, 4, 2, 0};
	for (int i = 0; i < 5; i++)
		CHECK(res.top_ids[i] == order[i], "top %d: %d want %d", i, res.top_ids[i],
		      order[i]);
	/* n_top is clamped to the vocabulary and to SAMPLER_MAX_TOP */
	p.n_top = SAMPLER_MAX_TOP;
	sampler_sample(logits, 6, &p, NULL, &rng, scr, &res);
	CHECK(res.n_top == 6, "n_top clamps to n_vocab: %d", res.n_top);
	free(scr);
}

/* ---- penalties on hand-built histories ---- */
static void test_penalties(void)
{
	struct sampler_params p;
	sampler_params_default(&p);
	struct sampler_rng rng;
	sampler_rng_seed(&rng, 3);
	void *scr = scratch_for(4);
	struct sampler_result res;

	/* repetition: id 0 (logit 2.0, seen in the prompt) becomes 2.0/2 = 1.0 < 1.5 */
	{
		const float l[4] = {2.0f, 1.5f, -1.0f, -3.0f};
		const int32_t prompt[2] = {0, 0};
		struct sampler_history h = {prompt, 2, NULL, 0};
		p.repetition_penalty = 2.0f;
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 1, "repetition divides a positive logit: got %d", res.token);
		/* once per id, not per occurrence: 2.0/1.3 = 1.538 > 1.5 still wins */
		p.repetition_penalty = 1.3f;
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 0, "repetition applies once per id: got %d", res.token);
	}
	/* repetition multiplies a negative logit: -1.0 * 3 = -3.0 ties id 3 and loses */
	{
		const float l[4] = {-1.0f, -2.5f, -2.9f, -5.0f};
		const int32_t out[1] = {0};
		struct sampler_history h = {NULL, 0, out, 1};
		p.repetition_penalty = 3.0f;
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 1, "negative logit is multiplied: got %d", res.token);
	}
	p.repetition_penalty = 1.0f;
	/* presence: subtract once for ids in the output, not for prompt-only ids */
	{
		const float l[4] = {1.0f, 0.8f, 0.9f, 0.0f};
		const int32_t prompt[1] = {2};
		const int32_t out[3] = {0, 0, 0};
		struct sampler_history h = {prompt, 1, out, 3};
		p.presence_penalty = 0.15f; /* id 0: 0.85 < 0.9 (id 2 is prompt-only) */
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 2, "presence: got %d", res.token);
		p.presence_penalty = 0.05f; /* 0.95 still wins: once, not per count */
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 0, "presence is once per id: got %d", res.token);
		p.presence_penalty = 0.0f;
		/* frequency: 3 * 0.05 = 0.15 -> 0.85 < 0.9 */
		p.frequency_penalty = 0.05f;
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 2, "frequency counts occurrences: got %d", res.token);
		p.frequency_penalty = 0.02f; /* 0.94 > 0.9 */
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 0, "frequency small: got %d", res.token);
		CHECK_NEAR(res.logprob, 1.0 - log(exp(1.0) + exp(0.8) + exp(0.9) + 1.0), 1e-6, 0);
		p.frequency_penalty = 0.0f;
	}
	/* out-of-range history ids are ignored */
	{
		const float l[4] = {1.0f, 0.0f, 0.0f, 0.0f};
		const int32_t out[2] = {-5, 99};
		struct sampler_history h = {NULL, 0, out, 2};
		p.presence_penalty = 10.0f;
		sampler_sample(l, 4, &p, &h, &rng, scr, &res);
		CHECK(res.token == 0, "bad ids ignored: got %d", res.token);
		p.presence_penalty = 0.0f;
	}
	free(scr);
}

/* ---- filtering: draws only from allowed ids with the renormalized frequencies ---- */

#define N_DRAWS 20000

/* Draws N_DRAWS tokens and compares counts with want[] (probabilities; 0 = forbidden).
 * Tolerance: a count is Binomial(N, q); with N = 20000 its standard deviation is at most
 * sqrt(N * 0.25) = 70.7, i.e. 0.0035 in frequency. We allow 5 sigma of the actual q
 * (plus 1e-4), so a correct sampler fails a check with probability < 1e-6, while the
 * wrong distributions these tests guard against differ by >= 0.03. The seed is fixed, so
 * the outcome is deterministic anyway. */
static void check_freqs(const char *what, const float *logits, int32_t n,
			const struct sampler_params *p, const double *want)
{
	void *scr = scratch_for(n);
	struct sampler_rng rng;
	sampler_rng_seed(&rng, p->seed);
	int counts[16] = {0};
	for (int i = 0; i < N_DRAWS; i++) {
		struct sampler_result res;
		sampler_sample(logits, n, p, NULL, &rng, scr, &res);
		if (res.token >= 0 && res.token < n)
			counts[res.token]++;
	}
	for (int32_t id = 0; id < n; id++) {
		double f = (double)counts[id] / N_DRAWS;
		if (want[id] == 0.0) {
			CHECK(counts[id] == 0, "%s: forbidden id %d drawn %d times", what, id,
			      counts[id]);
		} else {
			double sigma = sqrt(want[id] * (1.0 - want[id]) / N_DRAWS);
			CHECK(fabs(f - want[id]) <= 5 * sigma + 1e-4,
			      "%s: id %d frequency %.4f, want %.4f", what, id, f, want[id]);
		}
	}
	free(scr);
}

static void softmax_d(const float *l, int n, double temp, double *out)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += exp(l[i] / temp);
	for (int i = 0; i < n; i++)
		out[i] = exp(l[i] / temp) / s;
}

static void test_filters(void)
{
	/* probabilities at T = 1: softmax of these logits */
	const float l[6] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 1.0f};
	double q[6], want[6];
	struct sampler_params p;
	sampler_params_default(&p);
	p.seed = 1234;

	/* plain temperature 1 and 2 */
	p.temperature = 1.0f;
	softmax_d(l, 6, 1.0, q);
	check_freqs("T=1", l, 6, &p, q);
	p.temperature = 2.0f;
	softmax_d(l, 6, 2.0, q);
	check_freqs("T=2", l, 6, &p, q);

	/* top_k = 3: ids 0, 1, 5 (1 and 5 tie at 1.0; both kept since k = 3) */
	p.temperature = 1.0f;
	p.top_k = 3;
	{
		double z = exp(2.0) + 2 * exp(1.0);
		double w[6] = {exp(2.0) / z, exp(1.0) / z, 0, 0, 0, exp(1.0) / z};
		check_freqs("top_k=3", l, 6, &p, w);
	}
	/* top_k = 2: tie between 1 and 5 goes to the lower id 1 */
	p.top_k = 2;
	{
		double z = exp(2.0) + exp(1.0);
		double w[6] = {exp(2.0) / z, exp(1.0) / z, 0, 0, 0, 0};
		check_freqs("top_k=2", l, 6, &p, w);
	}
	p.top_k = 0;

	/* top_p: sorted probabilities at T = 1 are q0 = .4719, q1 = q5 = .1736, q2 = .1053,
	 * q3 = .0639, q4 = .0235. top_p = 0.7: q0 + q1 = .6455 < .7, + q5 = .819 >= .7 ->
	 * keep {0, 1, 5}. */
	softmax_d(l, 6, 1.0, q);
	CHECK(q[0] + q[1] < 0.7 && q[0] + q[1] + q[5] >= 0.7, "hand-derived top-p set");
	p.top_p = 0.7f;
	{
		double z = q[0] + q[1] + q[5];
		double w[6] = {q[0] / z, q[1] / z, 0, 0, 0, q[5] / z};
		check_freqs("top_p=0.7", l, 6, &p, w);
	}
	/* top_p = 0.6: q0 + q1 = .6455 >= .6 -> {0, 1}: the tie keeps the lower id */
	p.top_p = 0.6f;
	{
		double z = q[0] + q[1];
		double w[6] = {q[0] / z, q[1] / z, 0, 0, 0, 0};
		check_freqs("top_p=0.6", l, 6, &p, w);
	}
	/* top_p tiny: only the best */
	p.top_p = 0.01f;
	{
		double w[6] = {1, 0, 0, 0, 0, 0};
		check_freqs("top_p=0.01", l, 6, &p, w);
	}
	p.top_p = 1.0f;

	/* min_p = 0.2: threshold 0.2 * q0 = .0944 keeps q1, q5 (.1736), q2 (.1053); drops
	 * q3 (.0639), q4 */
	p.min_p = 0.2f;
	CHECK(q[2] >= 0.2 * q[0] && q[3] < 0.2 * q[0], "hand-derived min-p set");
	{
		double z = q[0] + q[1] + q[2] + q[5];
		double w[6] = {q[0] / z, q[1] / z, q[2] / z, 0, 0, q[5] / z};
		check_freqs("min_p=0.2", l, 6, &p, w);
	}
	/* combined, in the defined order: T = 2, top_k = 4 -> {0, 1, 5, 2}; top_p = 0.5 on
	 * the renormalized top-4 at T = 2; min_p */
	p.min_p = 0.0f;
	p.temperature = 2.0f;
	p.top_k = 4;
	p.top_p = 0.5f;
	{
		double e[4] = {exp(1.0), exp(0.5), exp(0.5), exp(0.25)}; /* ids 0, 1, 5, 2 */
		double z = e[0] + e[1] + e[2] + e[3];
		/* e0/z = .3679 < .5; + e1/z = .591 >= .5 -> {0, 1} */
		CHECK(e[0] / z < 0.5 && (e[0] + e[1]) / z >= 0.5, "hand-derived combined set");
		double w[6] = {e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1]), 0, 0, 0, 0};
		check_freqs("T=2,top_k=4,top_p=0.5", l, 6, &p, w);
	}
	(void)want;
}

/* ---- determinism: same seed, same tokens; one draw per sampled token ---- */
static void test_determinism(void)
{
	enum { N = 300 };
	float *l = malloc(N * sizeof *l);
	for (int i = 0; i < N; i++)
		l[i] = (float)sin(i * 0.37) * 3.0f;
	struct sampler_params p;
	sampler_params_default(&p);
	p.temperature = 0.8f;
	p.top_k = 40;
	p.top_p = 0.9f;
	p.min_p = 0.05f;
	p.n_top = 3;
	void *scr = scratch_for(N);
	struct sampler_rng a, b, probe;
	sampler_rng_seed(&a, 99);
	sampler_rng_seed(&b, 99);
	int same = 1;
	for (int i = 0; i < 50; i++) {
		struct sampler_result ra, rb;
		probe = a;
		sampler_sample(l, N, &p, NULL, &a, scr, &ra);
		sampler_rng_uniform(&probe);
		same &= memcmp(&probe, &a, sizeof a) == 0; /* exactly one draw */
		sampler_sample(l, N, &p, NULL, &b, scr, &rb);
		same &= ra.token == rb.token && ra.logprob == rb.logprob;
	}
	CHECK(same, "same seed, same results, one draw per token");
	free(l);
	free(scr);
}

/* ---- a naive full-sort sampler, written from the definition, must agree exactly ---- */

static const float *naive_keys;
static int naive_cmp(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	if (naive_keys[x] != naive_keys[y])
		return naive_keys[x] > naive_keys[y] ? -1 : 1;
	return x < y ? -1 : 1;
}

/* The definition with a full qsort and every mass summed from scratch in rank order
 * (sampler.c: e = sampler_expf(v - max), integer weights, the documented comparisons). */
static int32_t naive_sample(const float *logits, int32_t n_vocab, const struct sampler_params *p,
			    struct sampler_rng *rng)
{
	float *v = malloc(sizeof(float) * n_vocab);
	int32_t *ids = malloc(sizeof(int32_t) * n_vocab);
	for (int32_t i = 0; i < n_vocab; i++) {
		v[i] = logits[i] / p->temperature;
		ids[i] = i;
	}
	naive_keys = v;
	qsort(ids, (size_t)n_vocab, sizeof *ids, naive_cmp);
	int32_t n = p->top_k > 0 && p->top_k < n_vocab ? p->top_k : n_vocab;
	float mx = v[ids[0]];
	uint64_t W = 0;
	for (int32_t j = 0; j < n; j++)
		W += sampler_weight(sampler_expf(v[ids[j]] - mx));
	int32_t keep = n;
	if (p->top_p < 1.0f) {
		uint64_t cum = 0;
		for (int32_t j = 0; j < n; j++) {
			cum += sampler_weight(sampler_expf(v[ids[j]] - mx));
			if ((double)cum >= (double)p->top_p * (double)W) {
				keep = j + 1;
				break;
			}
		}
	}
	if (p->min_p > 0.0f)
		for (int32_t k = 1; k < keep; k++)
			if (sampler_expf(v[ids[k]] - mx) < p->min_p) {
				keep = k;
				break;
			}
	uint64_t total = 0;
	for (int32_t j = 0; j < keep; j++)
		total += sampler_weight(sampler_expf(v[ids[j]] - mx));
	double target = (double)sampler_rng_uniform(rng) * (double)total;
	uint64_t cum = 0;
	int32_t tok = ids[0];
	for (int32_t j = 0; j < keep && total > 0; j++) {
		cum += sampler_weight(sampler_expf(v[ids[j]] - mx));
		if ((double)cum > target) {
			tok = ids[j];
			break;
		}
	}
	free(v);
	free(ids);
	return tok;
}

/* sampler_expf against libm's exp in double: within 2 fp32 ulp on [-86, 0] (the range
 * softmax uses), and its edges; sampler_weight's fixed point. */
static void test_expf(void)
{
	double worst = 0;
	float wx = 0;
	for (float x = -86.0f; x <= 0.0f; x += 0.000731f) {
		double r = exp((double)x);
		float rf = (float)r;
		double ulp = (double)nextafterf(rf, INFINITY) - rf;
		double d = fabs((double)sampler_expf(x) - r) / ulp;
		if (d > worst) {
			worst = d;
			wx = x;
		}
	}
	CHECK(worst <= 2.0, "sampler_expf within 2 ulp of exp: worst %.3f ulp at %g", worst, wx);
	CHECK(sampler_expf(0.0f) == 1.0f && sampler_expf(-INFINITY) == 0.0f &&
		  isnan(sampler_expf(NAN)) && sampler_expf(-100.0f) == 0.0f,
	      "sampler_expf edges: exp(0) = 1, exp(-inf) = 0, NaN, underflow to 0");
	CHECK(sampler_weight(1.0f) == (uint64_t)1 << 32 && sampler_weight(0.5f) == (uint64_t)1 << 31 &&
		  sampler_weight(0x1p-33f) == 0 && sampler_weight(NAN) == 0 &&
		  sampler_weight(0x1.000002p-1f) == ((uint64_t)1 << 31) + 256,
	      "sampler_weight is floor(e * 2^32)");
}

static void test_vs_naive(void)
{
	enum { NV = 3000 };
	float *l = malloc(NV * sizeof *l);
	uint64_t st = 77;
	for (int i = 0; i < NV; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		l[i] = (float)((st >> 40) % 1000) * 0.01f; /* many exact ties */
		if (i % 7 == 3)
			l[i] = -INFINITY; /* banned tokens weigh 0 */
	}
	void *scr = scratch_for(NV);
	/* flat distributions (high temperature) make the walk go far past the first 64
	 * candidates, exercising the prefix extension */
	static const struct {
		float t, top_p, min_p;
		int32_t top_k;
	} cases[] = {
	    {1.0f, 1.0f, 0.0f, 0},   {5.0f, 1.0f, 0.0f, 0},  {20.0f, 0.9f, 0.0f, 0},
	    {3.0f, 1.0f, 0.3f, 0},   {50.0f, 1.0f, 0.9f, 0}, {2.0f, 0.95f, 0.05f, 0},
	    {4.0f, 0.8f, 0.0f, 500}, {1.0f, 1.0f, 0.0f, 7},  {1.0f, 1e-6f, 0.0f, 0},
	    {3.0f, 1.0f, 0.0f, 1},   {9.0f, 0.5f, 0.5f, 40}, {0.05f, 1.0f, 0.0f, 0},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct sampler_params p;
		sampler_params_default(&p);
		p.temperature = cases[c].t;
		p.top_p = cases[c].top_p;
		p.min_p = cases[c].min_p;
		p.top_k = cases[c].top_k;
		struct sampler_rng a, b;
		sampler_rng_seed(&a, 1000 + c);
		sampler_rng_seed(&b, 1000 + c);
		int same = 0;
		const int draws = 100;
		for (int i = 0; i < draws; i++) {
			struct sampler_result res;
			sampler_sample(l, NV, &p, NULL, &a, scr, &res);
			same += res.token == naive_sample(l, NV, &p, &b);
		}
		CHECK(same == draws, "case %zu: %d of %d draws equal the full-sort sampler", c,
		      same, draws);
	}
	free(scr);
	free(l);
}

/* sampler_constrain: biases first, then the mask; greedy picks the best allowed token and
 * its log-prob is taken over the allowed ones (hand-derived: two allowed logits 1 and 1
 * after the bias -> log(1/2)). */
static void test_constrain(void)
{
	float lg[40];
	for (int i = 0; i < 40; i++)
		lg[i] = (float)i / 10.0f;
	uint32_t allow[2] = {(1u << 3) | (1u << 7), 1u << (33 - 32)};
	int32_t ids[3] = {7, 33, 99};
	float b[3] = {-0.3f, -2.3f, 50.0f}; /* 7 -> 0.4; 33 -> 1.0; 99 out of range: ignored */
	struct sampler_constraint c = {allow, ids, b, 3};
	sampler_constrain(lg, 40, &c);
	int n_inf = 0;
	for (int i = 0; i < 40; i++)
		n_inf += isinf(lg[i]) && lg[i] < 0;
	CHECK(n_inf == 37, "37 tokens masked, got %d", n_inf);
	CHECK_NEAR(lg[3], 0.3, 0, 1e-6);
	CHECK_NEAR(lg[7], 0.4, 1e-6, 0);
	CHECK_NEAR(lg[33], 1.0, 1e-6, 0);
	struct sampler_params p;
	sampler_params_default(&p);
	struct sampler_rng rng;
	sampler_rng_seed(&rng, 1);
	void *scr = scratch_for(40);
	struct sampler_result out;
	sampler_sample(lg, 40, &p, NULL, &rng, scr, &out);
	CHECK(out.token == 33, "greedy picks the allowed best: %d", out.token);
	double lse = log(exp(0.3) + exp(0.4) + exp(1.0));
	CHECK_NEAR(out.logprob, 1.0 - lse, 1e-6, 0);
	p.temperature = 1.0f;
	for (int k = 0; k < 200; k++) {
		sampler_sample(lg, 40, &p, NULL, &rng, scr, &out);
		if (out.token != 3 && out.token != 7 && out.token != 33) {
			CHECK(0, "sampled a masked token %d", out.token);
			break;
		}
	}
	free(scr);
	/* no mask: only the biases */
	float l2[4] = {0, 0, 0, 0};
	int32_t id2[1] = {2};
	float b2[1] = {-INFINITY};
	struct sampler_constraint c2 = {NULL, id2, b2, 1};
	sampler_constrain(l2, 4, &c2);
	CHECK(l2[0] == 0 && l2[1] == 0 && isinf(l2[2]) && l2[3] == 0, "a ban without a mask");
}

/* A NaN logit (a numerical failure) or a row that is all -inf gives a NaN log-prob, the
 * signal the engine fails the request on (sampler.h), for greedy, sampled and scored
 * rows; a token in the vocabulary all the same. One finite row stays finite. */
static void test_nonfinite(void)
{
	enum { V = 8 };
	void *scr = scratch_for(V);
	float nan_row[V] = {0.5f, 1.0f, NAN, -2.0f, 0.0f, 3.0f, 1.0f, 0.25f};
	float inf_row[V];
	for (int i = 0; i < V; i++)
		inf_row[i] = -INFINITY;
	const float *rows[2] = {nan_row, inf_row};
	for (int k = 0; k < 2; k++) {
		for (int greedy = 0; greedy < 2; greedy++) {
			struct sampler_params p;
			sampler_params_default(&p);
			p.temperature = greedy ? 0.0f : 0.8f;
			p.top_p = 0.9f;
			p.n_top = 2;
			struct sampler_rng rng;
			sampler_rng_seed(&rng, 5);
			struct sampler_history h = {0};
			struct sampler_result out;
			sampler_sample(rows[k], V, &p, &h, &rng, scr, &out);
			CHECK(isnan(out.logprob), "%s row, %s: logprob %g is not NaN",
			      k ? "-inf" : "NaN", greedy ? "greedy" : "sampled", out.logprob);
			CHECK(out.token >= 0 && out.token < V, "token %d in the vocabulary", out.token);
		}
		struct sampler_result sc;
		sampler_score(rows[k], V, 3, 2, &sc);
		CHECK(isnan(sc.logprob), "%s row, scored: logprob %g", k ? "-inf" : "NaN",
		      sc.logprob);
	}
	nan_row[2] = 2.0f;
	struct sampler_params p;
	sampler_params_default(&p);
	struct sampler_rng rng;
	sampler_rng_seed(&rng, 5);
	struct sampler_history h = {0};
	struct sampler_result out;
	sampler_sample(nan_row, V, &p, &h, &rng, scr, &out);
	CHECK(out.token == 5 && isfinite(out.logprob), "finite row: token %d, logprob %g",
	      out.token, out.logprob);
	free(scr);
}


/* ---- log-sum-exp: the vector form against two references written here ---- */

/* Its definition, one scalar step at a time: sampler_expf(l_i - max) summed in double,
 * lane j = i mod 16 in id order, then the lanes in order. */
static double lse_lanes(const float *l, int32_t n)
{
	float mx = -INFINITY;
	for (int32_t i = 0; i < n; i++)
		if (l[i] > mx)
			mx = l[i];
	if (mx == -INFINITY)
		return -INFINITY;
	double lane[16] = {0};
	for (int32_t i = 0; i < n; i++)
		lane[i % 16] += (double)sampler_expf(l[i] - mx);
	double s = lane[0];
	for (int j = 1; j < 16; j++)
		s += lane[j];
	return (double)mx + log(s);
}

/* libm's exp in double, summed in id order (the sampler's definition before q12t). */
static double lse_double(const float *l, int32_t n)
{
	float mx = -INFINITY;
	for (int32_t i = 0; i < n; i++)
		if (l[i] > mx)
			mx = l[i];
	if (mx == -INFINITY)
		return -INFINITY;
	double s = 0;
	for (int32_t i = 0; i < n; i++)
		s += exp((double)l[i] - (double)mx);
	return (double)mx + log(s);
}

/* Every level gives the lane definition's bits (so a dropped or misplaced lane, a wrong
 * tail or a wrong exp fails), within 1e-6 of the double sum (sampler_expf is within ~2 ulp:
 * 2.4e-7 relative per term; the fp32 subtraction l_i - max adds <= 2^-24 |l_i - max| to
 * a term's argument, which the weighting e^a * |a| <= 1/e keeps below 3e-8 of the sum),
 * on rows of logits like a model's (spread over ~30 nats, a few near the max), of every
 * length around the 16-lane steps, with -inf entries (masked tokens) and a NaN row. */
static void test_log_sum_exp(void)
{
	static const int32_t lens[] = {1, 2, 15, 16, 17, 31, 33, 100, 257, 32000, 32001, 151936};
	float *l = malloc(151936 * sizeof *l);
	uint64_t st = 7;
	double worst = 0;
	int bad_bits = 0;
	for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		for (int shape = 0; shape < 3; shape++) {
			int32_t n = lens[k];
			for (int32_t i = 0; i < n; i++) {
				uint64_t z = splitmix64_test(&st);
				float u = (float)(z >> 40) * (1.0f / 16777216.0f);
				l[i] = shape == 0 ? -10.0f + 30.0f * u : 12.0f * u - 3.0f;
				if (shape == 2 && (z & 7) == 0)
					l[i] = -INFINITY;
			}
			if (shape == 2)
				l[n / 2] = 20.5f; /* one peak, the rest far below */
			double want = lse_lanes(l, n), ref = lse_double(l, n);
			for (int lvl = 0; lvl <= 2; lvl++) {
				double got = sampler_log_sum_exp_level(l, n, lvl);
				if (memcmp(&got, &want, sizeof got) != 0 && bad_bits++ < 5)
					fprintf(stderr,
						"  n %d shape %d level %d: %.17g, lanes %.17g\n", n,
						shape, lvl, got, want);
				double d = fabs(got - ref);
				worst = d > worst || d != d ? d : worst;
			}
		}
	}
	CHECK(bad_bits == 0, "%d rows differ from the 16-lane definition", bad_bits);
	CHECK(worst <= 1e-6, "largest |lse - double lse| %g", worst);
	/* The lane order. On the rows above the final sum of the 16 lanes rounds alike in
	 * almost any order (two AVX2 halves swapped passed them); here it cannot: a peak of 0
	 * (term 1, lane p % 16) among logits whose lane sums are T ~ 0.385 ulp(1) each (terms
	 * sampler_expf(-37 - ln m), m to a lane). Tiny lanes added before the peak's add up
	 * (1 + c T rounds to 1 + round(0.385 c) ulp), the ones after it are lost (T < half
	 * an ulp), and with max 0 the lse is log of that sum exactly: c, the number of lanes
	 * before p in the summation order, shows in the bits. */
	bad_bits = 0;
	double first = 0, last = 0;
	for (int32_t m = 1; m <= 4; m *= 2) {
		for (int32_t p = 0; p < 16; p++) {
			int32_t n = 16 * m;
			for (int32_t i = 0; i < n; i++)
				l[i] = -37.0f - (float)log((double)m);
			l[p + 16 * (m - 1)] = 0.0f;
			double want = lse_lanes(l, n);
			if (m == 1 && p == 0)
				first = want;
			if (m == 1 && p == 15)
				last = want;
			for (int lvl = 0; lvl <= 2; lvl++) {
				double got = sampler_log_sum_exp_level(l, n, lvl);
				if (memcmp(&got, &want, sizeof got) != 0 && bad_bits++ < 5)
					fprintf(stderr,
						"  lane order: m %d peak %d level %d: %.17g, lanes "
						"%.17g\n",
						m, p, lvl, got, want);
			}
		}
	}
	CHECK(first == 0.0 && last > 0.0,
	      "the rows show the lane order: peak in lane 0 %g, in lane 15 %g", first, last);
	CHECK(bad_bits == 0, "%d lane-order rows differ from the 16-lane definition", bad_bits);
	/* non-finite rows, every level */
	for (int lvl = 0; lvl <= 2; lvl++) {
		for (int32_t i = 0; i < 40; i++)
			l[i] = -INFINITY;
		CHECK(sampler_log_sum_exp_level(l, 40, lvl) == -INFINITY, "all -inf, level %d",
		      lvl);
		l[37] = NAN;
		l[3] = 1.0f;
		CHECK(isnan(sampler_log_sum_exp_level(l, 40, lvl)), "a NaN (tail lane), level %d",
		      lvl);
		l[37] = 0.0f;
		l[5] = NAN;
		CHECK(isnan(sampler_log_sum_exp_level(l, 40, lvl)), "a NaN (body), level %d", lvl);
		l[5] = -INFINITY;
		CHECK_NEAR(sampler_log_sum_exp_level(l, 40, lvl), log(exp(1.0) + 1.0), 1e-7, 0);
	}
	free(l);
}

int main(void)
{
	test_log_sum_exp();
	test_nonfinite();
	test_constrain();
	test_rng();
	test_logprobs();
	test_ties();
	test_penalties();
	test_filters();
	test_determinism();
	test_expf();
	test_vs_naive();
	return check_summary();
}
