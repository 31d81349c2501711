/* constrain: a request's constraints turned into one sampler_constraint per step.
 *
 * The engine's hook for structured output and the logit controls. Per request it keeps
 * the grammar state (sample/grammar.h), advanced by every accepted token, and per step it
 * builds the allowed-token mask and the bias list the sampler applies before sampling:
 *  - grammar: the tokens that keep the output a prefix of the language; end of
 *    generation only where the output is complete;
 *  - logit_bias: added to the logits as given;
 *  - min_tokens: end-of-generation tokens and stop_token_ids banned while fewer tokens
 *    than min_tokens were generated;
 *  - bad_words: each word is tokenized as written and with a leading space (as vLLM);
 *    the last token of a sequence is banned where the output ends with the rest of it, so
 *    the sequence is never completed.
 * A request without any of these gets no struct constrain (NULL) and costs nothing.
 *
 * The vocabulary side (token pieces, end-of-generation ids, the trie) is built once per
 * engine on first use and shared by every request. It also owns the threads that compute
 * the masks of a batch's rows in parallel (constrain_step_all) and one grammar scratch per
 * thread: a row's mask depends only on its own state, so which thread computes it (and
 * what that thread's scratch cached before) never changes the result.
 */
#ifndef BG_CONSTRAIN_H
#define BG_CONSTRAIN_H

#include <stdbool.h>

#include "engine/request.h"
#include "sample/grammar.h"
#include "sample/sampler.h"
#include "status.h"
#include "text/tokenizer.h"

struct constrain_vocab;
struct constrain;

/* n_threads: threads for constrain_step_all (the caller included); <= 0 means every online
 * core, 1 runs the rows one after another on the caller. */
enum bg_status constrain_vocab_create(const struct tok *t, int n_threads,
				      struct constrain_vocab **out, struct bg_err *err);
void constrain_vocab_free(struct constrain_vocab *cv); /* NULL-safe */

/* True when r asks for any constraint. */
bool constrain_wanted(const struct request *r);

/* The request's constraint state (grammar at its start). */
enum bg_status constrain_create(struct constrain_vocab *cv, const struct request *r,
				struct constrain **out, struct bg_err *err);
void constrain_free(struct constrain *c); /* NULL-safe */

/* A copy of c in the same state (grammar state, bad-word sequences), for a sample forked
 * from c's request (n > 1): from here on each advances on its own. The grammar itself is
 * shared, so c's request must outlive the copy. NULL when out of memory. */
struct constrain *constrain_clone(const struct constrain *c, const struct constrain_vocab *cv);

/* The constraint for the next token of r (r->out_ids so far); *sc points into c and stays
 * valid until the next call. *dead is set when no token at all is allowed (the grammar
 * cannot continue with this vocabulary, or is complete and end-of-generation is banned). */
enum bg_status constrain_step(struct constrain *c, struct constrain_vocab *cv,
			      const struct request *r, struct sampler_constraint *sc, bool *dead,
			      struct bg_err *err);

/* One row of constrain_step_all: constrain_step(c, cv, r, sc, dead, err), its status in st. */
struct constrain_job {
	struct constrain *c;
	const struct request *r;
	struct sampler_constraint *sc; /* out */
	bool *dead;		       /* out */
	struct bg_err *err;	       /* out, when st != BG_OK */
	enum bg_status st;	       /* out */
};

/* constrain_step for every job[n], spread over cv's threads. Every job's c must be
 * distinct (one row per request and step); each job's outputs are exactly those of
 * constrain_step called alone, whatever the other jobs are. */
void constrain_step_all(struct constrain_vocab *cv, struct constrain_job *jobs, int32_t n);

/* Advances the grammar by the token the sampler chose. */
enum bg_status constrain_accept(struct constrain *c, struct constrain_vocab *cv, int32_t token,
				struct bg_err *err);

/* True when the grammar (if any) accepts the output so far. */
bool constrain_complete(const struct constrain *c);

#endif
