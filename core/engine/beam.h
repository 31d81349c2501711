/* beam: beam search for one request (issue 14; TensorRT-LLM's beamWidth, lengthPenalty,
 * earlyStopping, numReturnSequences; Hugging Face's BeamSearchScorer).
 *
 * The module holds a family's search state; the engine runs the beams as sequences (one
 * per beam, the request's own sequence is beam 0) and the scheduler re-points their KV
 * tables (sched_beam_reorder). Per step, with W = beam_width and live beams b (all of
 * the same length t, cumulative log-probs cum_b = the sum, in double, of the float
 * log-probs of their tokens):
 *
 *  1. candidates: each live beam's 2W most likely next tokens (log-softmax of the raw
 *     logits, the sampler's top alternatives; fewer when the vocabulary is smaller),
 *     scored cum_b + logprob; all candidates sorted by that sum, descending, ties to the
 *     lower beam, then to the lower token id (the sampler's order).
 *  2. walking that order: a finishing candidate (an end-of-generation token unless
 *     ignore_eos, or one of stop_token_ids) ranked among the first W becomes a finished
 *     hypothesis (ranked later it is dropped); any other candidate becomes the next beam,
 *     until W beams are found. Finished hypotheses keep the W best by score, where
 *        score = cum_logprob / len^length_penalty,   len = tokens generated, the
 *     finishing token included (HF and TensorRT-LLM's length penalty; HF counts the length
 *     without the end token). A new hypothesis that scores no better than the worst of W
 *     kept is dropped; equal scores keep the earlier one first.
 *  3. the search ends (a) when W hypotheses are finished and early_stopping is true; (b)
 *     when W hypotheses are finished, early_stopping is false, and the best live beam's
 *     score now (its cum / t^length_penalty) is not better than the worst hypothesis
 *     (HF's heuristic: a beam rarely improves); (c) when no candidate continues; (d) when
 *     the beams reach max_tokens (or the max sequence length). Only in (d) do the live
 *     beams join the hypotheses, finish "length".
 *  4. the result: the n best hypotheses, best first (r->choices), each with its tokens,
 *     log-probs (and top alternatives when asked), cum_logprob and finish reason.
 *
 * So the search is deterministic and depends only on the model's log-probs: a beam
 * request returns the same beams whatever it is batched with.
 *
 * Invariants: 1 <= live beams <= W between steps; every live beam has the same number of
 * tokens; each live beam's cum_logprob is the double sum of its tokens' log-probs in
 * order; at most W hypotheses.
 */
#ifndef BG_BEAM_H
#define BG_BEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/request.h"
#include "sample/sampler.h"
#include "status.h"
#include "text/tokenizer.h"

struct beam_params {
	int32_t width;	      /* W, 2..REQ_MAX_BEAM_WIDTH */
	int32_t n_return;     /* hypotheses returned, 1..width */
	float length_penalty; /* exponent of the length */
	bool early_stopping;
	int32_t max_out;  /* tokens a beam may generate at most (max_tokens, or what the max
			   * sequence length leaves) */
	int32_t logprobs; /* the request's logprobs: -1 none, 0 the token's, N > 0 top N */
};

/* Whether token ends a beam, and how (REQ_FINISH_EOS / REQ_FINISH_STOP); NONE goes on. */
typedef enum req_finish (*beam_finishing_fn)(void *user, int32_t token);

struct beam;

/* Candidates each beam needs from the sampler: min(2 * width, SAMPLER_MAX_TOP, n_vocab),
 * or the request's logprobs when that is larger (the sampler's n_top). */
int32_t beam_n_top(const struct beam_params *p, int32_t n_vocab);

/* What r asks that beam search cannot do, as an error code ("invalid_request",
 * "unsupported") and one sentence in msg; NULL when r may run (or is not a beam search:
 * beam_width 1 without length_penalty or early_stopping). max_batch_size bounds W. */
const char *beam_refusal(const struct request *r, int32_t max_batch_size, char *msg, size_t cap);

enum bg_status beam_create(const struct beam_params *p, struct beam **out, struct bg_err *err);
void beam_free(struct beam *b); /* NULL-safe */

/* Live beams (1 before the first step). */
int32_t beam_n_live(const struct beam *b);

/* Stores the candidates of live beam slot (res->n_top alternatives, sorted as the
 * sampler sorts them). True when every live beam has given its own: call beam_step. */
bool beam_collect(struct beam *b, int32_t slot, const struct sampler_result *res);

/* One step (see the header comment) over the beams' requests beams[width] (slot order;
 * the first beam_n_live are live: their out_ids, out_logprobs, out_top, n_out and
 * cum_logprob are the beams' tokens so far, all of the same length; the engine owns
 * them, this module rewrites those five fields). New beam j = the beam parent[j]
 * extended by its chosen token, in slot j, best first; slots [n_next, old live) are
 * emptied. *n_next = new live beams (0..W; after the first step it may exceed the old
 * count: the slots past it start then); *done = the search ended (then beam_finish).
 * BG_ERR_NOMEM: the search must be abandoned (the beams' arrays stay valid to free). */
enum bg_status beam_step(struct beam *b, struct request *const *beams, beam_finishing_fn fin,
			 void *fin_user, int32_t *parent, int32_t *n_next, bool *done,
			 struct bg_err *err);

/* The result: r->choices[n_choices] = the n_return best hypotheses (fewer when fewer
 * finished), best first, each with its text (tok may be NULL: empty texts; the finishing
 * token is not part of the text); r->n_out = their total tokens; r->finish = the best
 * one's finish. beams[width] as for beam_step, after the last one: the live beams join
 * as "length" when the search ended by length; their arrays are freed either way (r may
 * be beams[0]). BG_ERR_NOMEM: nothing returned (the beams' arrays stay valid to free). */
enum bg_status beam_finish(struct beam *b, struct request *const *beams, struct request *r,
			   const struct tok *tok, struct bg_err *err);

#endif
