/* engine_util: the parts of an engine test that every such test writes the same way: a
 * request named PREFIX<seq> with either a text prompt or prompt token ids, and its stop
 * strings; one run of an engine over a test's requests, collecting the results by seq. Header-only, static functions, because each test program is
 * one translation unit. Allocation failures are not handled (tests).
 *
 *   engine_util_req(prefix, seq, prompt, ids, n_ids)   a new request (req_free it)
 *   engine_util_req_stops(r, stop, n)                  sets r's stop strings (copies)
 *   engine_util_policy(cfg, i)                         setup i of the policy sweep
 *   engine_util_rnd(&state, n), engine_util_prompt(i)  seeded draws, story prompts
 *   engine_util_run(cfg, be, tok, hp, src, specs, n, R) one run, results by seq
 */
#ifndef BG_TEST_ENGINE_UTIL_H
#define BG_TEST_ENGINE_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/request.h"

/* A seeded xorshift64 draw in [0, n): reproducible, not good, randomness. */
static inline uint32_t engine_util_rnd(uint64_t *state, uint32_t n)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state % n);
}

/* Story-like prompt i % (their count) for stories260K, short and long. A function, so
 * that a test that uses none has no unused array. */
static inline const char *engine_util_prompt(uint32_t i)
{
	static const char *const p[] = {
	    "Once upon a time",
	    "Lily and Ben went to the park. They saw a big dog",
	    "The sun was",
	    "Tom had a red ball. He liked to throw it high in the sky, and one day the ball went "
	    "over the fence into the garden of an old man who",
	    "One day, a little girl named Sue found a shiny",
	    "There was a cat",
	    "Mom said, \"Do not touch the hot stove.\" But Tim",
	    "A bird",
	    "The children were playing in the snow when suddenly they heard a loud noise coming "
	    "from the woods. They",
	    "Max",
	};
	return p[i % (sizeof p / sizeof p[0])];
}

/* A request with id "<prefix><seq>" and seq seq; its prompt is a copy of prompt when that
 * is not NULL, else a copy of ids [n_ids] (a 1-element buffer when n_ids is 0, so that
 * input_ids is never a malloc(0)), and max_tokens 16. Everything else keeps req_new's
 * defaults. */
static inline struct request *engine_util_req(const char *prefix, int32_t seq, const char *prompt,
					      const int32_t *ids, int32_t n_ids)
{
	struct request *r = req_new();
	char id[32];
	snprintf(id, sizeof id, "%s%d", prefix, seq);
	r->id = strdup(id);
	r->seq = seq;
	r->max_tokens = 16;
	if (prompt) {
		r->prompt = strdup(prompt);
		r->prompt_len = strlen(prompt);
	} else {
		r->input_ids = malloc((size_t)(n_ids ? n_ids : 1) * sizeof(int32_t));
		memcpy(r->input_ids, ids, (size_t)n_ids * sizeof(int32_t));
		r->n_input_ids = n_ids;
	}
	return r;
}

/* Gives r copies of the n stop strings stop [n]; nothing when n is 0. */
static inline void engine_util_req_stops(struct request *r, const char *const *stop, int32_t n)
{
	if (n <= 0)
		return;
	r->stop = calloc((size_t)n, sizeof *r->stop);
	for (int32_t i = 0; i < n; i++)
		r->stop[i] = strdup(stop[i]);
	r->n_stop = n;
}

/* The scheduling setups every batch-invariance sweep covers, in this order: no-evict,
 * max-util with recompute, max-util with swap, static, adaptive with swap. */
#define ENGINE_UTIL_N_POLICIES 5

/* Resets cfg to engine_config_default, then sets the policy and preempt mode of setup i
 * in [0, ENGINE_UTIL_N_POLICIES); returns the setup's name (for messages). */
static inline const char *engine_util_policy(struct engine_config *cfg, int i)
{
	static const struct {
		enum engine_policy policy;
		enum engine_preempt preempt;
		const char *name;
	} setups[ENGINE_UTIL_N_POLICIES] = {
	    {ENGINE_POLICY_NO_EVICT, ENGINE_PREEMPT_RECOMPUTE, "no-evict"},
	    {ENGINE_POLICY_MAX_UTIL, ENGINE_PREEMPT_RECOMPUTE, "max-util/recompute"},
	    {ENGINE_POLICY_MAX_UTIL, ENGINE_PREEMPT_SWAP, "max-util/swap"},
	    {ENGINE_POLICY_STATIC, ENGINE_PREEMPT_RECOMPUTE, "static"},
	    {ENGINE_POLICY_ADAPTIVE, ENGINE_PREEMPT_SWAP, "adaptive/swap"},
	};
	engine_config_default(cfg);
	cfg->policy = setups[i].policy;
	cfg->preempt = setups[i].preempt;
	return setups[i].name;
}

/* One engine run of n requests: specs is the test's own array of request descriptions
 * (its source casts it back and pulls specs[next]); res[seq] is the result of request seq
 * (a result whose seq is out of range or already has one is freed and counted in dup);
 * tot holds engine_totals after the run. */
struct engine_util_run {
	const void *specs;
	int32_t n, next, n_emitted, dup;
	struct request **res; /* [n] */
	struct engine_progress tot;
};

/* The engine's sink for a source whose user pointer is a struct engine_util_run. */
static inline int engine_util_sink(void *user, struct request *r)
{
	struct engine_util_run *R = user;
	if (r->seq < 0 || r->seq >= R->n || R->res[r->seq]) {
		R->dup++;
		req_free(r);
		return 0;
	}
	R->res[r->seq] = r;
	R->n_emitted++;
	return 0;
}

/* Resets R for specs [n], runs a fresh engine from src(R) into engine_util_sink, records
 * its totals and destroys it. Returns the status of engine_create or engine_run, whose
 * message it prints on stderr. */
static inline enum bg_status engine_util_run(const struct engine_config *cfg, struct backend *be,
					     const struct tok *tok,
					     const struct model_hparams *hp, engine_source_fn src,
					     const void *specs, int32_t n, struct engine_util_run *R)
{
	memset(R, 0, sizeof *R);
	R->specs = specs;
	R->n = n;
	R->res = calloc((size_t)n, sizeof *R->res);
	struct engine *e = NULL;
	struct bg_err err = {0};
	enum bg_status st = engine_create(cfg, be, tok, hp, &e, &err);
	if (st == BG_OK)
		st = engine_run(e, src, engine_util_sink, NULL, R, NULL, NULL, &err);
	if (st != BG_OK)
		fprintf(stderr, "engine on %s: %s\n", be->name, err.msg);
	if (e)
		engine_totals(e, &R->tot);
	engine_destroy(e);
	return st;
}

static inline void engine_util_run_free(struct engine_util_run *R)
{
	for (int32_t i = 0; R->res && i < R->n; i++)
		req_free(R->res[i]);
	free(R->res);
}

#endif
