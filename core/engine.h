/* engine: the continuous-batching loop (DESIGN.md §2, §4, §7).
 *
 * Requests are pulled from a source callback with a bounded look-ahead (max_queued), run
 * through the capacity scheduler (no-evict | max-util | static) and the micro-batch
 * scheduler (max_batch_size, max_num_tokens, chunked context) one iteration at a time on
 * a backend, and handed back through a sink callback as soon as they finish (order
 * completion) or in input order through a bounded reorder buffer (order input). Memory is
 * bounded by max_queued + the reorder window, whatever the length of the input.
 */
#ifndef BG_ENGINE_H
#define BG_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "request.h"
#include "status.h"
#include "tokenizer.h"

enum engine_policy {
	ENGINE_POLICY_NO_EVICT = 0, /* GUARANTEED_NO_EVICT */
	ENGINE_POLICY_MAX_UTIL,     /* MAX_UTILIZATION */
	ENGINE_POLICY_STATIC,       /* lockstep batches (baseline) */
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
	int32_t max_queued;     /* requests read ahead of the running set */
	int32_t max_seq_len;    /* 0 = the model's context length */
	FILE *stats;            /* per-iteration JSONL stats, or NULL */
};

void engine_config_default(struct engine_config *c);

/* Returns 1 and a request, 0 at the end of input, or -1 on a fatal read error (err set). */
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
	double elapsed_s;
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
			  engine_progress_fn progress, void *user,
			  volatile sig_atomic_t *stop, int64_t *n_unfinished, struct bg_err *err);

/* Totals of the last run, for summaries and reports. */
void engine_totals(const struct engine *e, struct engine_progress *out);

#endif
