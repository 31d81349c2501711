/* engine: the continuous-batching loop (DESIGN.md §2, §4, §7).
 *
 * Requests are pulled from a source callback with a bounded look-ahead (max_queued; a
 * source that has nothing yet says so, ENGINE_SOURCE_PENDING, and never stalls a run), run
 * through the capacity scheduler (no-evict | max-util | static) and the micro-batch
 * scheduler (max_batch_size, max_num_tokens, chunked context) one iteration at a time on
 * a backend, and handed back through a sink callback as soon as they finish (order
 * completion) or in input order through a bounded reorder buffer (order input). Memory is
 * bounded by max_queued + the reorder window, whatever the length of the input.
 *
 * What a request gets back (decisions where DESIGN.md is silent):
 *  - prompt: tokenized with BOS per the request's add_bos (-1: the vocabulary's default)
 *    and cfg.parse_special; input_ids are used exactly as given (no BOS added), and every
 *    id must be inside the backend's vocabulary.
 *  - errors (finish "error", one result each, in its turn; the run goes on):
 *    "invalid_request" (empty prompt, no prompt and no input_ids, ids out of the
 *    vocabulary, max_tokens < 1, logprobs > SAMPLER_MAX_TOP), "too_long" (prompt +
 *    max_tokens exceeds the max sequence length, as vLLM refuses it; the KV the request
 *    may need exceeds the whole pool; with chunked context off, the prompt exceeds
 *    max_num_tokens),
 *    "backend_error" (its batch failed in forward/sample; or its logits row turned NaN,
 *    a numerical failure of the model: that request alone fails, the batch's others go
 *    on), "internal" (out of memory).
 *    A request that arrives with error.code set is emitted as it is.
 *  - finish: a stop_token_ids hit -> "stop"; an end-of-generation token (unless
 *    ignore_eos) -> "eos"; a stop string found in the detokenized text, across token
 *    boundaries -> "stop"; max_tokens -> "length". The ids and
 *    log-probs include the token that ended the request; the text excludes the stop
 *    string (cut at its earliest match), the stop token and the EOS token.
 *  - metrics: queue_ms = admission - arrival (r->t_arrival, set when the request is read
 *    unless the source set it), ttft_ms = first token - arrival, e2e_ms = done - arrival,
 *    CLOCK_MONOTONIC; preemptions = times paused (max-util).
 *  - block reuse (prefix caching, cfg.prefix_cache): full blocks of prompt KV stay in
 *    the pool after their request ends, found again by their tokens and everything
 *    before them (kv.h); a request takes the longest cached prefix and computes only the
 *    rest; r->cached_tokens says how many prompt tokens it took. A request that asks for
 *    prompt log-probs takes nothing from the cache (the log-prob of a prompt token needs
 *    the logits of the position before it, which a cached block does not keep): it
 *    computes its whole prompt, and its blocks are still cached for others. The KV of a
 *    block is the same bits whoever computed it, so results do not depend on the cache.
 *  - n > 1 (samples): one prefill; the samples 1..n-1 fork from the request's own
 *    sequence when it samples its first token (sched_fork: every block shared, the
 *    partly filled last one copied on write), each with its own RNG seeded with seed + i
 *    and its own stop conditions; the result (r->choices, sample order) is complete when
 *    every sample is. Sample i returns what the request alone with seed + i returns.
 *  - overlap (cfg.overlap; engine.c, "Overlap"): step n + 1 is planned and its forward
 *    started before step n's tokens are applied; outputs are the same bit for bit, a
 *    request that stops on its token has one thrown-away position in the next step.
 *  - outputs do not depend on batching or preemption: the request's RNG is seeded from its
 *    seed at admission and only advanced when it samples; a recomputed context samples
 *    only at its end, which is the next new token; prompt log-probs are computed once.
 */
#ifndef BG_ENGINE_H
#define BG_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "engine/request.h"
#include "status.h"
#include "text/tokenizer.h"

enum engine_policy {
	ENGINE_POLICY_NO_EVICT = 0, /* GUARANTEED_NO_EVICT */
	ENGINE_POLICY_MAX_UTIL,	    /* MAX_UTILIZATION */
	ENGINE_POLICY_STATIC,	    /* lockstep batches (baseline) */
	ENGINE_POLICY_ADAPTIVE,	    /* max-util + an AIMD token budget (scheduler.h) */
};

enum engine_preempt {
	ENGINE_PREEMPT_RECOMPUTE = 0,
	ENGINE_PREEMPT_SWAP,
};

enum engine_order {
	ENGINE_ORDER_INPUT = 0,
	ENGINE_ORDER_COMPLETION,
};

struct engine_config {
	enum engine_policy policy;
	enum engine_preempt preempt;
	enum engine_order order;
	int32_t max_batch_size; /* requests per iteration */
	int32_t max_num_tokens; /* tokens per iteration */
	bool chunked_context;
	int32_t max_queued;  /* requests read ahead of the running set */
	int32_t max_seq_len; /* 0 = the model's context length */
	FILE *stats;	     /* per-iteration JSONL stats, or NULL */
	/* ---- extensions (appended; engine_config_default sets them) ---- */
	int32_t reorder_window; /* order input: completed results held while waiting for an
				 * earlier one; when full, admission stops until the head
				 * completes. 0 = max(1024, 4 * max_batch_size) */
	bool parse_special;	/* tokenize prompts with special-token parsing (llama.cpp
				 * server, HF default): true */
	bool prefix_cache;	/* block reuse across requests (--no-prefix-cache: false):
				 * true */
	/* threads computing the grammar masks of a batch's rows (engine/constrain.h);
	 * 0 = every online core (the CLI passes --threads) */
	int32_t constrain_threads;
	/* overlap (engine.c, "Overlap"): step n + 1 is planned and started before the
	 * results of step n are applied; results are the same bit for bit. -1 = on for the
	 * "cuda" backend, off otherwise; 0 off; 1 on */
	int32_t overlap;
	/* models with recurrent state: slots kept for state checkpoints (scheduler.h, "State
	 * checkpoints"), which block reuse needs; 0 = no block reuse for them. The backend
	 * should be created with n_state_slots = max_batch_size + this; when it has fewer
	 * (its memory rule), the checkpoints get the slots beyond max_batch_size or an eighth
	 * of them, whichever is more, and the batch the rest. 8 */
	int32_t state_checkpoints;
};

void engine_config_default(struct engine_config *c);

/* What a source returns. The values are the historical ints (1, 0, -1), so sources
 * written before ENGINE_SOURCE_PENDING existed keep working unchanged. */
enum {
	ENGINE_SOURCE_ERROR = -1, /* a fatal read error (err set): the input ends there */
	ENGINE_SOURCE_EOF = 0,	  /* the end of the input */
	ENGINE_SOURCE_OK = 1,	  /* *out is a request */
	ENGINE_SOURCE_PENDING = 2 /* nothing available right now (*out untouched): ask later */
};

/* Returns ENGINE_SOURCE_OK and a request, ENGINE_SOURCE_EOF at the end of input,
 * ENGINE_SOURCE_ERROR on a fatal read error (err set), or ENGINE_SOURCE_PENDING.
 *
 * Non-blocking input (a pipe whose producer is slow, or waits for our results): the
 * source must never make running requests wait for input that has not arrived. So:
 *  - while the engine has work (engine_idle() false), a source with nothing ready
 *    returns ENGINE_SOURCE_PENDING at once; the engine stops pulling for this iteration,
 *    runs what it has, and asks again after the next iteration;
 *  - while the engine is idle (engine_idle() true: nothing running, paused, queued or
 *    completed-but-unemitted, so every result so far has reached the sink), the source
 *    may block until input arrives. It should also return (EOF, or PENDING) once the
 *    run's stop flag is set, so that an interrupt is seen. A source that returns
 *    PENDING while the engine is idle is asked again after a 1 ms sleep (a poll, never a
 *    busy spin): correct, but blocking is better.
 * A source that never returns PENDING (a file, a list) behaves exactly as before. */
typedef int (*engine_source_fn)(void *user, struct request **out, struct bg_err *err);
/* Receives a finished request (ownership passes to the sink). Returns 0, or -1 to abort
 * the run (e.g. the output cannot be written). */
typedef int (*engine_sink_fn)(void *user, struct request *r);

/* A snapshot for progress displays, passed after every iteration. */
struct engine_progress {
	int64_t iter;
	int64_t n_read, n_done, n_failed;
	int64_t n_active, n_queued, n_paused;
	int64_t prompt_tokens, output_tokens; /* totals so far */
	int64_t preemptions;
	int32_t kv_used_blocks, kv_total_blocks, kv_peak_blocks;
	int64_t cached_tokens;		   /* prompt tokens taken from the cache (in prompt_tokens) */
	int64_t reused_blocks, missed_blocks; /* block reuse lookups, totals */
	/* preemption traffic (max-util, adaptive), totals: bytes of KV copied to host memory
	 * at a pause and back at a resume (--preempt swap), and tokens fed again by
	 * sequences resuming by recompute (--preempt recompute, or a swap that fell back) */
	int64_t swap_out_bytes, swap_in_bytes, recomputed_tokens;
	double elapsed_s;
	/* overlap (cfg.overlap), totals: steps whose tokens were applied after the next step
	 * had started, and sequences run in a step although the step before had finished
	 * their request (their rows thrown away: the price of stopping one step late) */
	int64_t overlap_steps, overlap_dropped;
};
typedef void (*engine_progress_fn)(void *user, const struct engine_progress *p);

struct engine;

/* backend and tok must outlive the engine. */
enum bg_status engine_create(const struct engine_config *cfg, struct backend *backend,
			     const struct tok *tok, const struct model_hparams *hp,
			     struct engine **out, struct bg_err *err);
void engine_destroy(struct engine *e); /* NULL-safe */

/* Runs until the source is exhausted and every request has been emitted, or until
 * *stop becomes nonzero: then admission stops, running requests are dropped unfinished
 * (they are NOT emitted: a resumed run does them), results already complete are emitted,
 * and BG_OK is returned with *n_unfinished set. progress may be NULL. */
enum bg_status engine_run(struct engine *e, engine_source_fn source, engine_sink_fn sink,
			  engine_progress_fn progress, void *user, volatile sig_atomic_t *stop,
			  int64_t *n_unfinished, struct bg_err *err);

/* True when the engine has nothing to run: no request running, paused, queued, or
 * completed and waiting for an earlier one (order input); true outside engine_run. A
 * source called while this is true may block (see engine_source_fn); thread-unsafe like
 * the rest: call it from the source, on engine_run's thread. */
bool engine_idle(const struct engine *e);

/* The max sequence length in effect (engine_config's, else the model's context length,
 * else the KV pool's size): prompt plus output tokens of one sequence. */
int32_t engine_max_seq_len(const struct engine *e);

/* Totals of the last run, for summaries and reports. */
void engine_totals(const struct engine *e, struct engine_progress *out);

/* 0 while every line written to engine_config.stats has reached the file (as far as
 * fflush tells), else the errno of the first write that failed (the run goes on: the
 * statistics are not its results; the caller reports it). */
int engine_stats_errno(const struct engine *e);

#endif
