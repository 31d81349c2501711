/* sampler: the one definition of sampling (see sampler.h for the steps).
 *
 * Every loop below walks token ids in a fixed order; the log-sum-exp sums in a fixed order
 * of lanes (sampler_log_sum_exp), and the decisions of sampling use exact integer masses
 * (sampler_math.h), so the result depends only on the inputs and the RNG state. Candidate orderings
 * use a total order (value descending, then id ascending), so any correct sort gives the same
 * sequence.
 */
#include "sample/sampler.h"
#include "sample/sampler_math.h"
#include "cpufeat.h"

#include <math.h>
#include <string.h>

/* ---- RNG: splitmix64 seeding, xoshiro256** generation ---- */

static uint64_t splitmix64_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(struct sampler_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl64(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return result;
}

void sampler_rng_seed(struct sampler_rng *rng, uint64_t seed)
{
	uint64_t st = seed;
	for (int i = 0; i < 4; i++)
		rng->s[i] = splitmix64_next(&st);
}

float sampler_rng_uniform(struct sampler_rng *rng)
{
	/* 24 bits fill a float mantissa exactly: u is a multiple of 2^-24 in [0, 1). */
	return (float)(xoshiro_next(rng) >> 40) * (1.0f / 16777216.0f);
}

void sampler_params_default(struct sampler_params *p)
{
	memset(p, 0, sizeof *p);
	p->temperature = 0.0f;
	p->top_k = 0;
	p->top_p = 1.0f;
	p->min_p = 0.0f;
	p->repetition_penalty = 1.0f;
	p->presence_penalty = 0.0f;
	p->frequency_penalty = 0.0f;
	p->seed = 0;
	p->n_top = 0;
}

void sampler_constrain(float *logits, int32_t n_vocab, const struct sampler_constraint *c)
{
	for (int32_t k = 0; k < c->n_bias; k++) {
		int32_t id = c->bias_ids[k];
		if (id >= 0 && id < n_vocab)
			logits[id] += c->bias[k];
	}
	if (c->allow)
		for (int32_t i = 0; i < n_vocab; i++)
			if (!((c->allow[i >> 5] >> (i & 31)) & 1))
				logits[i] = -INFINITY;
}

size_t sampler_scratch_bytes(int32_t n_vocab)
{
	return (size_t)n_vocab * (2 * sizeof(float) + sizeof(int32_t));
}

/* ---- log-probs of the raw logits ---- */

/* log(sum(exp(l))) with max subtraction (sampler.h: sampler_log_sum_exp). Each term is
 * sampler_expf(l_i - max) (sampler_math.h: fp32 multiplies and adds, ~2 ulp), the
 * subtraction in fp32; the terms are summed in double in 16 lanes, lane j taking ids
 * i = j (mod 16) in id order (a tail past the last 16 is padded with -inf: adds 0), then
 * the lanes 0..15 in order. The same operations at every instruction set level (GCC's
 * vector extensions at each level's width, sampler_lse.inc; C11 mode contracts nothing
 * into FMAs), so the bits depend on the row alone. It replaced a scalar libm exp() in
 * double per logit: 0.3 ms of a 22 ms TinyLlama decode step for 32000 logits
 * (bench/results/q12t-2026-11-30.md); log-probs moved by <= ~1e-6. */
#define LSE_W	   16 /* lanes */
#define LSE_INLINE static inline __attribute__((always_inline))
#define LSE_UNROLL _Pragma("GCC unroll 4")

#define LSE_VW 4
#define LSE_DW 4
#define LSE_TARGET
#define LSE(name) lse_##name##_generic
#include "sample/sampler_lse.inc"

#if defined(__x86_64__) || defined(__i386__)
#define LSE_VW	   8
#define LSE_DW	   4
#define LSE_TARGET __attribute__((target("avx2")))
#define LSE(name)  lse_##name##_avx2
#include "sample/sampler_lse.inc"

#define LSE_VW	   16
#define LSE_DW	   16
#define LSE_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
#define LSE(name)  lse_##name##_avx512
#include "sample/sampler_lse.inc"
#endif

/* The highest level this processor runs: lse_sum_avx512 is compiled for AVX-512 F, DQ, BW
 * and VL, so it needs all four (cpufeat probes once a process). */
static int lse_best_level(void)
{
	struct cpufeat f = cpufeat_get();
	return f.avx512_dq_bw_vl ? 2 : f.avx2_fma_f16c ? 1 : 0;
}

double sampler_log_sum_exp_level(const float *logits, int32_t n, int level)
{
	int best = lse_best_level();
	if (level > best)
		level = best;
#if defined(__x86_64__) || defined(__i386__)
	if (level >= 2)
		return lse_sum_avx512(logits, n);
	if (level == 1)
		return lse_sum_avx2(logits, n);
#endif
	return lse_sum_generic(logits, n);
}

double sampler_log_sum_exp(const float *logits, int32_t n)
{
	return sampler_log_sum_exp_level(logits, n, 2);
}

/* a ranks before b: higher value, then lower id. */
static inline int ranks_before(float va, int32_t a, float vb, int32_t b)
{
	return va > vb || (va == vb && a < b);
}

/* Fills out->top_* with the n best ids of logits (ties to the lower id), converting to
 * log-probs with lse. Insertion into a small sorted list: n <= SAMPLER_MAX_TOP. */
static void fill_top(const float *logits, int32_t n_vocab, int32_t n, double lse,
		     struct sampler_result *out)
{
	if (n < 0)
		n = 0;
	if (n > SAMPLER_MAX_TOP)
		n = SAMPLER_MAX_TOP;
	if (n > n_vocab)
		n = n_vocab;
	int32_t ids[SAMPLER_MAX_TOP];
	int32_t cnt = 0;
	for (int32_t i = 0; i < n_vocab && n > 0; i++) {
		float v = logits[i];
		if (cnt == n && !ranks_before(v, i, logits[ids[cnt - 1]], ids[cnt - 1]))
			continue;
		int32_t j = cnt < n ? cnt++ : n - 1;
		while (j > 0 && ranks_before(v, i, logits[ids[j - 1]], ids[j - 1])) {
			ids[j] = ids[j - 1];
			j--;
		}
		ids[j] = i;
	}
	out->n_top = cnt;
	for (int32_t j = 0; j < cnt; j++) {
		out->top_ids[j] = ids[j];
		out->top_logprobs[j] = (float)((double)logits[ids[j]] - lse);
	}
}

void sampler_score(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top,
		   struct sampler_result *out)
{
	double lse = sampler_log_sum_exp(logits, n_vocab);
	out->token = token;
	out->logprob =
	    (token >= 0 && token < n_vocab) ? (float)((double)logits[token] - lse) : -INFINITY;
	fill_top(logits, n_vocab, n_top, lse, out);
}

/* ---- penalties ---- */

/* cnt[n_vocab]: scratch. Bit 0 = seen in the prompt, the rest = count in the output.
 * Ids outside [0, n_vocab) in the history are ignored. */
static void apply_penalties(float *v, int32_t n_vocab, const struct sampler_params *p,
			    const struct sampler_history *h, int32_t *cnt)
{
	int rep = p->repetition_penalty != 1.0f && p->repetition_penalty > 0.0f;
	int pres = p->presence_penalty != 0.0f;
	int freq = p->frequency_penalty != 0.0f;
	if (!h || (!rep && !pres && !freq))
		return;
	memset(cnt, 0, (size_t)n_vocab * sizeof *cnt);
	for (int32_t i = 0; i < h->n_prompt; i++) {
		int32_t id = h->prompt[i];
		if (id >= 0 && id < n_vocab)
			cnt[id] |= 1;
	}
	for (int32_t i = 0; i < h->n_output; i++) {
		int32_t id = h->output[i];
		if (id >= 0 && id < n_vocab)
			cnt[id] += 2;
	}
	for (int32_t id = 0; id < n_vocab; id++) {
		int32_t c = cnt[id];
		if (c == 0)
			continue;
		int32_t n_out = c >> 1;
		if (rep) {
			if (v[id] > 0.0f)
				v[id] /= p->repetition_penalty;
			else
				v[id] *= p->repetition_penalty;
		}
		if (n_out > 0) {
			if (pres)
				v[id] -= p->presence_penalty;
			if (freq)
				v[id] -= (float)n_out * p->frequency_penalty;
		}
	}
}

/* ---- candidate ordering: heap sort of ids by (value desc, id asc) ---- */

static void sift_down(int32_t *ids, const float *v, int32_t start, int32_t end)
{
	/* Max-heap on "ranks after", so the heap top is the worst candidate and the sorted
	 * result is best first. */
	int32_t root = start;
	for (;;) {
		int32_t child = 2 * root + 1;
		if (child >= end)
			return;
		int32_t sw = root;
		if (ranks_before(v[ids[sw]], ids[sw], v[ids[child]], ids[child]))
			sw = child;
		if (child + 1 < end &&
		    ranks_before(v[ids[sw]], ids[sw], v[ids[child + 1]], ids[child + 1]))
			sw = child + 1;
		if (sw == root)
			return;
		int32_t t = ids[root];
		ids[root] = ids[sw];
		ids[sw] = t;
		root = sw;
	}
}

/* Sorts ids[n] best first. */
static void sort_ids(int32_t *ids, int32_t n, const float *v)
{
	for (int32_t s = n / 2 - 1; s >= 0; s--)
		sift_down(ids, v, s, n);
	for (int32_t end = n - 1; end > 0; end--) {
		int32_t t = ids[0];
		ids[0] = ids[end];
		ids[end] = t;
		sift_down(ids, v, 0, end);
	}
	/* the heap top is the candidate that ranks last; moving it to the end each time
	 * leaves the array best first */
}

/* Keeps the k best ids of ids[n] in ids[0, k), sorted best first. */
static int32_t select_top_k(int32_t *ids, int32_t n, int32_t k, const float *v)
{
	if (k >= n) {
		sort_ids(ids, n, v);
		return n;
	}
	/* heap of the k best seen so far, worst at the top */
	for (int32_t s = k / 2 - 1; s >= 0; s--)
		sift_down(ids, v, s, k);
	for (int32_t i = k; i < n; i++) {
		if (ranks_before(v[ids[i]], ids[i], v[ids[0]], ids[0])) {
			ids[0] = ids[i];
			sift_down(ids, v, 0, k);
		}
	}
	sort_ids(ids, k, v);
	return k;
}

/* Sorts the m best candidates (by scaled logit, ties to the lower id) into ids[0, m). */
static void sorted_prefix(int32_t *ids, int32_t n_vocab, int32_t m, const float *v)
{
	for (int32_t i = 0; i < n_vocab; i++)
		ids[i] = i;
	select_top_k(ids, n_vocab, m, v);
}

/* Steps 3 after the penalties: temperature, top-k, softmax, top-p, min-p, draw.
 *
 * Probabilities are exact integer weights (sampler_math.h): e_i = sampler_expf(v_i - max),
 * w_i = sampler_weight(e_i), masses are uint64 sums, so they do not depend on the order
 * of the sums and the CUDA sampler makes the same decisions. With W the kept mass and
 * cum_j the mass of the j + 1 best candidates (rank order: value descending, id
 * ascending):
 *   top-p  keeps the best j + 1, for the first j with (double)cum_j >= top_p * (double)W;
 *   min-p  then drops the first candidate after the best whose e < min_p (e is the
 *          probability relative to the best one) and every one after it;
 *   draw   the first kept j with (double)cum_j > (double)u * (double)total, total the
 *          kept mass; the best candidate when total is 0 (NaN or infinite logits).
 *
 * Only a prefix of the descending order is ever needed (top-p and min-p cut it, the draw
 * walks it), so without top-k the order is built for the best 64 candidates first and
 * extended 16x at a time only when the walk runs off its end. */
static int32_t sample_filtered(float *v, float *e, int32_t *ids, int32_t n_vocab,
			       const struct sampler_params *p, struct sampler_rng *rng)
{
	for (int32_t i = 0; i < n_vocab; i++)
		v[i] /= p->temperature;
	int32_t n;     /* candidates kept by top-k */
	int32_t m;     /* length of the sorted prefix in ids[] */
	uint64_t mass; /* their weight */
	if (p->top_k > 0 && p->top_k < n_vocab) {
		for (int32_t i = 0; i < n_vocab; i++)
			ids[i] = i;
		n = m = select_top_k(ids, n_vocab, p->top_k, v);
		float mx = v[ids[0]];
		mass = 0;
		for (int32_t j = 0; j < n; j++) {
			e[ids[j]] = sampler_expf(v[ids[j]] - mx);
			mass += sampler_weight(e[ids[j]]);
		}
	} else {
		n = n_vocab;
		m = n < 64 ? n : 64;
		sorted_prefix(ids, n_vocab, m, v);
		float mx = v[ids[0]];
		mass = 0;
		for (int32_t i = 0; i < n; i++) {
			e[i] = sampler_expf(v[i] - mx);
			mass += sampler_weight(e[i]);
		}
	}

	double target_u = (double)sampler_rng_uniform(rng); /* the one draw */
	double thr_p = (double)p->top_p * (double)mass;
	for (;;) {
		int32_t keep = n;
		int cut = 0;
		int extend = 0;
		if (p->top_p < 1.0f) {
			uint64_t cum = 0;
			for (int32_t j = 0; j < m; j++) {
				cum += sampler_weight(e[ids[j]]);
				if ((double)cum >= thr_p) {
					keep = j + 1;
					cut = 1;
					break;
				}
			}
			extend |= !cut && m < n;
		}
		if (!extend && p->min_p > 0.0f) {
			int32_t lim = keep < m ? keep : m;
			int32_t k = 1;
			while (k < lim && !(e[ids[k]] < p->min_p))
				k++;
			if (k < lim || (k == keep && keep <= m)) {
				if (k < keep) {
					keep = k;
					cut = 1;
				}
			} else {
				extend = m < n; /* no cut inside the prefix: look further */
			}
		}
		if (!extend) {
			uint64_t total = 0;
			if (cut)
				for (int32_t j = 0; j < keep; j++)
					total += sampler_weight(e[ids[j]]);
			else
				total = mass;
			if (total == 0)
				return ids[0];
			double target = target_u * (double)total;
			uint64_t cum = 0;
			int32_t lim = keep < m ? keep : m;
			for (int32_t j = 0; j < lim; j++) {
				cum += sampler_weight(e[ids[j]]);
				if ((double)cum > target)
					return ids[j];
			}
			/* (double)total > target whenever total > 0 (u <= 1 - 2^-24), so the
			 * walk ends inside the kept set; it ran off the prefix */
		}
		/* the walk needs more of the order */
		m = m > n / 16 ? n : m * 16;
		sorted_prefix(ids, n_vocab, m, v);
	}
}

/* ---- sampling ---- */

void sampler_sample(const float *logits, int32_t n_vocab, const struct sampler_params *p,
		    const struct sampler_history *h, struct sampler_rng *rng, void *scratch,
		    struct sampler_result *out)
{
	float *v = scratch;			    /* [n_vocab] penalized, scaled logits */
	float *prob = v + n_vocab;		    /* [n_vocab] e = exp(v - max), indexed by id */
	int32_t *ids = (int32_t *)(prob + n_vocab); /* [n_vocab] counts, then candidates */

	double lse = sampler_log_sum_exp(logits, n_vocab);
	memcpy(v, logits, (size_t)n_vocab * sizeof *v);
	apply_penalties(v, n_vocab, p, h, ids);

	int32_t tok = 0;
	if (!(p->temperature > 0.0f)) {
		/* greedy: the first maximum in id order is the lower id on ties */
		for (int32_t i = 1; i < n_vocab; i++)
			if (v[i] > v[tok])
				tok = i;
	} else {
		tok = sample_filtered(v, prob, ids, n_vocab, p, rng);
	}
	out->token = tok;
	out->logprob = (float)((double)logits[tok] - lse);
	fill_top(logits, n_vocab, p->n_top, lse, out);
}
