/* sampler: from one row of logits to one token, its log-prob and the top-n alternatives.
 *
 * The one definition of sampling; the CUDA backend implements the same steps.
 *
 *  1. logprob of every token = log-softmax of the RAW logits (before penalties and
 *     temperature). The chosen token's log-prob and the top-n alternatives are reported
 *     from these, top-n ordered by log-prob descending, ties to the lower id.
 *  2. temperature == 0: greedy = argmax of the penalized logits, ties to the lower id.
 *  3. otherwise, in this order: penalties (repetition: divide a positive logit / multiply
 *     a negative one by the penalty, for every id seen in prompt or output; presence:
 *     subtract once for every id seen in the output; frequency: subtract times its count
 *     in the output), divide by temperature, keep top_k (0 = all), softmax, keep the
 *     smallest set whose mass >= top_p (ties to the lower id), drop tokens whose
 *     probability < min_p * max probability, renormalize, draw with u in [0, 1) from the
 *     request's RNG walking ids in descending-probability order.
 *     Probabilities and masses are exact integer weights computed with sampler_math.h's
 *     arithmetic, so that the CUDA backend, given the same logits and u, draws the same
 *     token (sampler.c states the exact comparisons).
 *
 * Constraints (structured output, logit_bias, min_tokens, bad words) come before step 1:
 * sampler_constrain adds each bias to its token's logit, then sets the logit of every
 * token the constraint's mask leaves out to -inf. Every step above then sees these
 * logits, the reported log-probs included (so under a grammar, a token's log-prob is
 * taken over the tokens the grammar allows).
 *
 * Non-finite rows: when the logits hold a NaN (a numerical failure of the model), or every
 * logit is -inf (everything masked out), the log-sum-exp and so the reported logprob are
 * NaN; the token is then an id inside the vocabulary that means nothing. The engine
 * fails such a request (engine.h); a NaN log-prob is never written out.
 *
 * RNG: xoshiro256** seeded from the 64-bit request seed through splitmix64, one draw
 * (upper 24 bits -> float in [0,1)) per sampled token; the state lives with the request
 * so that batching and preemption never change which numbers a request sees.
 */
#ifndef BG_SAMPLER_H
#define BG_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SAMPLER_MAX_TOP 20 /* the most alternatives a request may ask for */

struct sampler_params {
	float temperature;	  /* 0 = greedy */
	int32_t top_k;		  /* 0 = disabled */
	float top_p;		  /* 1 = disabled */
	float min_p;		  /* 0 = disabled */
	float repetition_penalty; /* 1 = disabled */
	float presence_penalty;	  /* 0 = disabled */
	float frequency_penalty;  /* 0 = disabled */
	uint64_t seed;
	int32_t n_top; /* alternatives to report, [0, SAMPLER_MAX_TOP] */
};

struct sampler_rng {
	uint64_t s[4];
};

struct sampler_result {
	int32_t token;
	float logprob; /* log-softmax of the raw logits at token */
	int32_t n_top;
	int32_t top_ids[SAMPLER_MAX_TOP];
	float top_logprobs[SAMPLER_MAX_TOP];
};

/* Token history the penalties look at. */
struct sampler_history {
	const int32_t *prompt; /* [n_prompt] */
	int32_t n_prompt;
	const int32_t *output; /* [n_output] */
	int32_t n_output;
};

/* What a request allows at one step; a row without one is unconstrained. */
struct sampler_constraint {
	const uint32_t *allow; /* [(n_vocab + 31) / 32] bit i of word i / 32: token i allowed;
				  NULL = every token */
	const int32_t *bias_ids; /* [n_bias] token ids (out-of-range ids are ignored) */
	const float *bias;	 /* [n_bias] added to the logit; -INFINITY bans the token */
	int32_t n_bias;
};

/* Applies c to logits[n_vocab] in place (see the header comment). */
void sampler_constrain(float *logits, int32_t n_vocab, const struct sampler_constraint *c);

void sampler_params_default(struct sampler_params *p); /* greedy, everything disabled */
void sampler_rng_seed(struct sampler_rng *rng, uint64_t seed);
float sampler_rng_uniform(struct sampler_rng *rng); /* [0, 1), advances the state */

/* log(sum_i exp(logits[i])) over n logits, the log-softmax's normalizer (step 1): the
 * max subtracted, each exp as sampler_math.h's sampler_expf, summed in double in a fixed
 * order of 16 lanes (sampler.c), so the same bits on every machine and instruction set.
 * -inf when every logit is -inf (NaN when one is NaN). _level picks the instruction set
 * (0 generic, 1 AVX2, 2 AVX-512; lower where the processor lacks it; tests): every level
 * gives the same bits. */
double sampler_log_sum_exp(const float *logits, int32_t n);
double sampler_log_sum_exp_level(const float *logits, int32_t n, int level);

/* Samples from logits[n_vocab]. scratch must hold 2 * n_vocab floats + n_vocab int32
 * (sampler_scratch_bytes). Deterministic: the same inputs and RNG state give the same
 * result on every machine with IEEE fp32. */
size_t sampler_scratch_bytes(int32_t n_vocab);
void sampler_sample(const float *logits, int32_t n_vocab, const struct sampler_params *p,
		    const struct sampler_history *h, struct sampler_rng *rng, void *scratch,
		    struct sampler_result *out);

/* Log-prob of a given token (for prompt log-probs) and the top-n alternatives. */
void sampler_score(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top,
		   struct sampler_result *out);

#endif
