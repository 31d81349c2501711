/* request: what one input line asks for, and what comes back for it.
 *
 * A request is created by the input parser (core/jsonl) or by the benchmark workload
 * generator and handed to the engine, which owns it until it emits the result. A request
 * that already failed to parse carries its error (error.code[0] != 0): the engine emits
 * it, in order, without running it, so that every input line gets exactly one result.
 */
#ifndef BG_REQUEST_H
#define BG_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sample/grammar.h"
#include "sample/sampler.h"

enum req_finish {
	REQ_FINISH_NONE = 0, /* still running */
	REQ_FINISH_STOP,     /* a stop string or stop token id */
	REQ_FINISH_EOS,	     /* an end-of-generation token */
	REQ_FINISH_LENGTH,   /* max_tokens, or the max sequence length */
	REQ_FINISH_ERROR,
	REQ_FINISH_CANCELLED, /* the run was interrupted before it finished */
};

const char *req_finish_name(enum req_finish f); /* "stop", "eos", ... */

/* One returned sequence of a request with n > 1 (the per-sequence part of a result). */
struct req_choice {
	enum req_finish finish;
	int32_t *out_ids; /* [n_out] */
	int32_t n_out;
	float *out_logprobs;		/* [n_out] when logprobs >= 0 */
	struct sampler_result *out_top; /* [n_out] when logprobs > 0 */
	char *text;			/* NUL-terminated */
	size_t text_len;
	double cum_logprob;
};

/* The most samples one request may ask for (n). */
#define REQ_MAX_N 128

/* The widest beam search (beam_width): each beam's candidates are its 2 * beam_width most
 * likely tokens, which the sampler reports (SAMPLER_MAX_TOP alternatives at most). */
#define REQ_MAX_BEAM_WIDTH (SAMPLER_MAX_TOP / 2)

struct req_error {
	char code[32]; /* "invalid_json", "invalid_request", "too_long", ...; "" = none */
	char message[256];
};

struct request {
	/* ---- input ---- */
	char *id;     /* unique in the file; the line number when absent */
	int64_t line; /* 1-based input line */
	int64_t seq;  /* 0-based position among the requests of this run (order) */
	char *prompt; /* text prompt, or NULL when input_ids is given */
	size_t prompt_len;
	int32_t *input_ids; /* [n_input_ids] token ids, or NULL */
	int32_t n_input_ids;
	int add_bos; /* -1: the vocabulary's default; 0/1: forced */
	/* tokens to generate at most; 0: until end-of-generation or the end of the context
	 * (the max sequence length, or what the KV pool holds when that is less) */
	int32_t max_tokens;
	struct sampler_params sampling;
	char **stop; /* [n_stop] stop strings (NUL-terminated) */
	int32_t n_stop;
	int32_t *stop_token_ids; /* [n_stop_token_ids] */
	int32_t n_stop_token_ids;
	bool ignore_eos;
	int32_t logprobs;	 /* -1: none; 0: the chosen token's only; n: plus top-n */
	int32_t prompt_logprobs; /* -1: none; n >= 0 as for logprobs */
	int32_t n;		 /* samples of the prompt, >= 1 (one prefill, shared blocks);
				  * with beam_width > 1, the beams returned (<= beam_width) */
	/* beam search (engine/beam.h): beam_width > 1 searches; 1 = off */
	int32_t beam_width;
	float length_penalty; /* score = cum_logprob / len^length_penalty; 1 by default */
	bool early_stopping;  /* stop once beam_width hypotheses are finished */
	/* constraints (structured output and logit controls; engine/constrain.h) */
	struct grammar *grammar; /* owned; NULL = none (from grammar, json_schema, regex,
				    choice or response_format) */
	int32_t min_tokens;	 /* EOG and stop_token_ids masked while n_out < this */
	int32_t *bias_ids;	 /* [n_bias] logit_bias token ids */
	float *bias_vals;	 /* [n_bias] */
	int32_t n_bias;
	char **bad_words; /* [n_bad_words] NUL-terminated */
	int32_t n_bad_words;
	void *user;		 /* owned by the caller (e.g. OpenAI request form) */
	void (*user_free)(void *user);

	struct req_error error; /* set by the parser for a line that cannot run */

	/* ---- output (filled by the engine) ---- */
	enum req_finish finish;
	int32_t *prompt_ids; /* [n_prompt] the tokenized prompt, BOS included */
	int32_t n_prompt;
	int32_t *out_ids; /* [n_out] generated tokens */
	int32_t n_out;
	float *out_logprobs;		   /* [n_out] when logprobs >= 0 */
	struct sampler_result *out_top;	   /* [n_out] when logprobs > 0 */
	float *prompt_lp;		   /* [n_prompt] when prompt_logprobs >= 0; [0] is NAN */
	struct sampler_result *prompt_top; /* [n_prompt] when prompt_logprobs > 0 */
	char *text; /* generated text (stop string excluded), NUL-terminated */
	size_t text_len;
	double cum_logprob;
	double t_arrival; /* seconds, monotonic clock */
	double t_first_token;
	double t_done;
	double queue_ms, ttft_ms, e2e_ms;
	int32_t preemptions;
	int32_t cached_tokens; /* prompt tokens whose KV came from the prefix cache */
	/* n > 1: every sample's sequence, sample i drawn with seed + i (choices[0] is the
	 * request's own: the per-sequence fields above are moved into it). 0 otherwise. */
	struct req_choice *choices; /* [n_choices] */
	int32_t n_choices;
};

/* Zeroed, with the neutral values: add_bos -1, logprobs -1, max_tokens 0, sampling
 * disabled (greedy). The defaults a user sees are io/params' table's. */
struct request *req_new(void);
void req_free(struct request *r); /* NULL-safe; frees every owned array and user */
/* Moves r's per-sequence outputs (finish, ids, log-probs, text, cum_logprob) into c. */
void req_take_choice(struct request *r, struct req_choice *c);
void req_choice_clear(struct req_choice *c); /* frees c's arrays, zeroes it */
/* *view = *r with c's per-sequence outputs in place of r's (the reverse of
 * req_take_choice, borrowing): a request-shaped look at one sample, for writers and
 * tests. view owns nothing: never req_free it. */
void req_choice_view(const struct request *r, const struct req_choice *c, struct request *view);

#endif
