#include "io/params.h"
#include "status.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R(field) offsetof(struct request, field)
#define NO_N	 0

/* The defaults: OpenAI's max_tokens (16) and top_p (1) for native lines, but greedy
 * decoding (temperature 0) so that a run is reproducible and comparable with llama.cpp
 * out of the box. OpenAI lines take that API's own defaults where they differ: no token
 * limit (generate to end-of-generation or the end of the context) and temperature 1.
 * A flag given on the command line sets the default of both forms. */
const struct param_def params_table[] = {
    {"max_tokens", "max_tokens", PARAM_INT, R(max_tokens), NO_N, "16", "0", 1, INT32_MAX, false, 0,
     "max-tokens", "N",
     "default tokens to generate per request (OpenAI lines: until end-of-generation or the "
     "end of the context)"},
    /* the newer OpenAI name; read after max_tokens, so it wins when both are given */
    {NULL, "max_completion_tokens", PARAM_INT, R(max_tokens), NO_N, NULL, NULL, 1, INT32_MAX, false,
     0, NULL, NULL, "OpenAI's newer name of max_tokens (wins over it)"},
    {"temperature", "temperature", PARAM_NUM, R(sampling.temperature), NO_N, "0", "1", 0, 1e6,
     false, 0, "temperature", "T", "default sampling temperature, 0 = greedy (OpenAI lines: 1)"},
    {"top_k", "top_k", PARAM_INT, R(sampling.top_k), NO_N, "0", NULL, -1, INT32_MAX, false,
     PARAM_NEG_OFF, "top-k", "K", "default top-k, 0 or -1 = disabled"},
    {"top_p", "top_p", PARAM_NUM, R(sampling.top_p), NO_N, "1", NULL, 0, 1, true, 0, "top-p", "P",
     "default nucleus mass, 1 = disabled"},
    {"min_p", "min_p", PARAM_NUM, R(sampling.min_p), NO_N, "0", NULL, 0, 1, false, 0, "min-p", "P",
     "default min-p, 0 = disabled"},
    /* the command line's --seed is a base seed (plus the line number), cli/options.c */
    {"seed", "seed", PARAM_SEED, R(sampling.seed), NO_N, "0", NULL, 0, 0, false, 0, NULL, NULL,
     "sampling seed, an integer in [-2^63, 2^64) (negative: modulo 2^64)"},
    {"repetition_penalty", "repetition_penalty", PARAM_NUM, R(sampling.repetition_penalty), NO_N,
     "1", NULL, 0, 1e6, true, 0, "repetition-penalty", "F",
     "default repetition penalty, 1 = disabled"},
    {"presence_penalty", "presence_penalty", PARAM_NUM, R(sampling.presence_penalty), NO_N, "0",
     NULL, -2, 2, false, 0, "presence-penalty", "F", "default presence penalty, 0 = disabled"},
    {"frequency_penalty", "frequency_penalty", PARAM_NUM, R(sampling.frequency_penalty), NO_N, "0",
     NULL, -2, 2, false, 0, "frequency-penalty", "F", "default frequency penalty, 0 = disabled"},
    {"stop", "stop", PARAM_STOP, R(stop), R(n_stop), NULL, NULL, 0, 0, false, 0, NULL, NULL,
     "strings that end generation (not part of the text returned)"},
    {"stop_token_ids", "stop_token_ids", PARAM_IDS, R(stop_token_ids), R(n_stop_token_ids), NULL,
     NULL, 0, 0, false, 0, NULL, NULL, "token ids that end generation"},
    {"ignore_eos", "ignore_eos", PARAM_BOOL, R(ignore_eos), NO_N, "false", NULL, 0, 0, false, 0,
     "ignore-eos", NULL,
     "by default, keep generating past end-of-generation tokens (until max_tokens)"},
    /* OpenAI bodies: the endpoint's own logprobs (completions: an integer; chat: a boolean
     * with top_logprobs), read in io/jsonl_read.c */
    {"logprobs", NULL, PARAM_LOGPROBS, R(logprobs), NO_N, "-1", NULL, 0, SAMPLER_MAX_TOP, false, 0,
     "logprobs", "N", "default log-probs: -1 none, 0 the chosen token's, N also the top N"},
    {"prompt_logprobs", "prompt_logprobs", PARAM_LOGPROBS, R(prompt_logprobs), NO_N, "-1", NULL, 0,
     SAMPLER_MAX_TOP, false, 0, NULL, NULL, "log-probs of the prompt tokens, as logprobs"},
    {"add_bos", "add_bos", PARAM_TRIBOOL, R(add_bos), NO_N, NULL, NULL, 0, 0, false, 0, NULL, NULL,
     "prepend the beginning-of-sequence token (default: as the vocabulary says)"},
    /* engine (issue 14): samples sharing one prefill; sample i draws with seed + i */
    {"n", "n", PARAM_INT, R(n), NO_N, "1", NULL, 1, REQ_MAX_N, false, 0, NULL, NULL,
     "samples of the prompt, one prefill (the result has a choices array)"},
    /* engine (issue 14): beam search, engine/beam.h (vLLM's and TensorRT-LLM's names) */
    {"beam_width", "beam_width", PARAM_INT, R(beam_width), NO_N, "1", NULL, 1, REQ_MAX_BEAM_WIDTH,
     false, 0, NULL, NULL,
     "beam search with this many beams, 1 = off (n: how many beams are returned)"},
    {"length_penalty", "length_penalty", PARAM_NUM, R(length_penalty), NO_N, "1", NULL, -100, 100,
     false, 0, NULL, NULL, "beam score = cum_logprob / length^length_penalty"},
    {"early_stopping", "early_stopping", PARAM_BOOL, R(early_stopping), NO_N, "false", NULL, 0, 0,
     false, 0, NULL, NULL, "beam search ends once beam_width hypotheses are finished"},
    /* issue 15; grammar, json_schema, regex, choice, logit_bias and bad_words are structured
     * values, read by io/jsonl's parse_constraints */
    {"min_tokens", "min_tokens", PARAM_INT, R(min_tokens), NO_N, "0", NULL, 0, INT32_MAX, false,
     0, NULL, NULL, "end-of-generation and stop_token_ids masked until this many tokens"},
};

const size_t params_count = sizeof params_table / sizeof params_table[0];

const struct param_def *params_find(const char *name, bool by_openai)
{
	for (size_t i = 0; i < params_count; i++) {
		const char *n = by_openai ? params_table[i].openai : params_table[i].name;
		if (n && strcmp(n, name) == 0)
			return &params_table[i];
	}
	return NULL;
}

static bool is_list(const struct param_def *p)
{
	return p->type == PARAM_STOP || p->type == PARAM_IDS;
}

void params_defaults(struct request *r, bool openai)
{
	char msg[160];
	for (size_t i = 0; i < params_count; i++) {
		const struct param_def *p = &params_table[i];
		if (is_list(p))
			continue;
		const char *def = openai && p->openai_def ? p->openai_def : p->def;
		if (p->type == PARAM_TRIBOOL && !def) {
			*(int *)((char *)r + p->off) = -1;
			continue;
		}
		if (!def)
			continue; /* an alias of another row (max_completion_tokens) */
		if (p->type == PARAM_INT && strcmp(def, "0") == 0 && p->lo > 0) {
			/* the documented special value PARAMS_TO_END */
			*(int32_t *)((char *)r + p->off) = PARAMS_TO_END;
			continue;
		}
		BG_ASSERT(params_set_text(r, p, def, msg, sizeof msg));
	}
}

void params_copy(struct request *dst, const struct request *src, const struct param_def *p)
{
	size_t size = 0;
	switch (p->type) {
	case PARAM_INT:
	case PARAM_LOGPROBS: size = sizeof(int32_t); break;
	case PARAM_NUM: size = sizeof(float); break;
	case PARAM_BOOL: size = sizeof(bool); break;
	case PARAM_TRIBOOL: size = sizeof(int); break;
	case PARAM_SEED: size = sizeof(uint64_t); break;
	case PARAM_STOP:
	case PARAM_IDS: return; /* lists have no default to copy */
	}
	memcpy((char *)dst + p->off, (const char *)src + p->off, size);
}

bool params_text_int(const char *text, double lo, double hi, int64_t *out, char *msg, size_t cap)
{
	char *end;
	errno = 0;
	long long v = text ? strtoll(text, &end, 10) : 0;
	if (!text || errno || end == text || *end) {
		snprintf(msg, cap, "'%s' is not an integer", text ? text : "");
		return false;
	}
	if ((double)v < lo || (double)v > hi) {
		snprintf(msg, cap, "%s is out of range [%.0f, %.0f]", text, lo, hi);
		return false;
	}
	*out = v;
	return true;
}

bool params_text_num(const char *text, double lo, double hi, bool lo_open, double *out, char *msg,
		     size_t cap)
{
	char *end;
	errno = 0;
	double d = text ? strtod(text, &end) : NAN;
	if (!text || errno || end == text || *end || !isfinite(d)) {
		snprintf(msg, cap, "'%s' is not a number", text ? text : "");
		return false;
	}
	if (d > hi || (lo_open ? d <= lo : d < lo)) {
		snprintf(msg, cap, "%s is out of range %c%g, %g]", text, lo_open ? '(' : '[', lo,
			 hi);
		return false;
	}
	*out = d;
	return true;
}

bool params_set_text(struct request *r, const struct param_def *p, const char *text, char *msg,
		     size_t cap)
{
	char *field = (char *)r + p->off;
	int64_t v;
	double d;
	switch (p->type) {
	case PARAM_INT:
	case PARAM_LOGPROBS:
		if (!params_text_int(text, p->type == PARAM_LOGPROBS ? -1 : p->lo, p->hi, &v, msg,
				     cap))
			return false;
		*(int32_t *)field = (p->flags & PARAM_NEG_OFF) && v < 0 ? 0 : (int32_t)v;
		return true;
	case PARAM_NUM:
		if (!params_text_num(text, p->lo, p->hi, p->lo_open, &d, msg, cap))
			return false;
		*(float *)field = (float)d;
		return true;
	case PARAM_BOOL:
	case PARAM_TRIBOOL: {
		bool b;
		if (!text || strcmp(text, "true") == 0) {
			b = true;
		} else if (strcmp(text, "false") == 0) {
			b = false;
		} else {
			snprintf(msg, cap, "'%s' is not true or false", text);
			return false;
		}
		if (p->type == PARAM_BOOL)
			*(bool *)field = b;
		else
			*(int *)field = b;
		return true;
	}
	case PARAM_SEED: {
		char *end;
		errno = 0;
		unsigned long long u = text ? strtoull(text, &end, 10) : 0;
		if (!text || errno || end == text || *end) {
			snprintf(msg, cap, "'%s' is not an integer", text ? text : "");
			return false;
		}
		*(uint64_t *)field = u; /* strtoull takes a negative one modulo 2^64 */
		return true;
	}
	case PARAM_STOP:
	case PARAM_IDS: break;
	}
	snprintf(msg, cap, "%s has no default to set", p->name ? p->name : p->openai);
	return false;
}
