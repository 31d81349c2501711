/* backend: the contract between the engine and a compute device (DESIGN.md §3).
 *
 * A struct backend is a table of functions plus a context pointer. The engine owns
 * scheduling and the KV *block indices* (block tables); the backend owns the weights,
 * the KV *memory* (n_blocks blocks of block_size token slots, for every layer, K and V)
 * and the activations.
 *
 * Failure contract: when forward or sample fails, the KV blocks written by that call hold
 * unspecified data (the engine fails the requests in the batch and frees their blocks);
 * blocks not in the batch are untouched.
 */
#ifndef BG_BACKEND_H
#define BG_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "sample/sampler.h"
#include "status.h"

/* One sequence's share of a forward pass: n_tokens new tokens at positions
 * [pos0, pos0 + n_tokens). The block table covers positions [0, pos0 + n_tokens): token at
 * position p lives in block block_table[p / block_size], slot p % block_size. K/V of
 * positions [0, pos0) were written by earlier calls (or swapped in). When every layer is
 * windowed (W = model_kv_window > 0), the entries before backend_first_block are -1:
 * blocks the engine gave back, which no query of this call reads. */
struct backend_seq {
	const int32_t *tokens;	    /* [n_tokens] */
	int32_t n_tokens;	    /* >= 1 */
	int32_t pos0;		    /* >= 0 */
	const int32_t *block_table; /* [n_blocks] */
	int32_t n_blocks;	    /* >= ceil((pos0 + n_tokens) / block_size) */
	const uint8_t *want_logits; /* [n_tokens]: 1 where a logits row is needed */
	/* [n_tokens] or NULL (none). prev_rows[j] >= 0: token j is not known to the caller
	 * yet (overlap, engine.c): it is the token the previous sample call drew for its row
	 * prev_rows[j], and tokens[j] is a placeholder. -1: tokens[j]. A backend resolves it
	 * on the host with backend_seq_token (CPU) or on the device (CUDA: gpu_embed). */
	const int32_t *prev_rows;
	/* The sequence's recurrent-state slot in [0, backend.n_state_slots) when the backend
	 * has slots (the model has layers with model_state_floats > 0), else ignored (-1). The
	 * slot holds the state after position pos0 - 1: at pos0 == 0 the backend zeroes it
	 * first; the forward leaves the state after position pos0 + n_tokens - 1. Two
	 * sequences of one batch never share a slot. */
	int32_t state_slot;
};

/* Token j of s, with the tokens the previous sample call drew, last[n_last]: tokens[j],
 * or last[prev_rows[j]]; -1 when that row does not exist (the batch is malformed). A drawn
 * id outside [0, n_vocab) (a row whose logits were NaN or all masked: its request ends,
 * and the output of this position is thrown away) feeds token 0. */
static inline int32_t backend_seq_token(const struct backend_seq *s, int32_t j, const int32_t *last,
					int32_t n_last, int32_t n_vocab)
{
	if (!s->prev_rows || s->prev_rows[j] < 0)
		return s->tokens[j];
	int32_t r = s->prev_rows[j];
	if (r >= n_last)
		return -1;
	return last[r] >= 0 && last[r] < n_vocab ? last[r] : 0;
}

/* The first block_table entry a forward pass from pos0 may read: with a window W on every
 * layer (0: none), the block of position pos0 - W + 1; else 0. */
static inline int64_t backend_first_block(int64_t pos0, uint32_t window, int32_t block_size)
{
	int64_t lo = pos0 - (int64_t)window + 1;
	return window > 0 && lo > 0 ? lo / block_size : 0;
}

/* Logits rows are numbered in batch order: seq 0's wanted tokens first (in position
 * order), then seq 1's, ... n_logits is their total. */
struct backend_batch {
	const struct backend_seq *seqs; /* [n_seqs] */
	int32_t n_seqs;
	int32_t n_logits;
};

/* One row to sample from (or to score, for prompt log-probs). */
struct backend_sample_row {
	int32_t logits_row; /* index into the last forward's logits rows */
	int32_t forced;	    /* -1: sample a token; >= 0: score this token (no RNG draw) */
	const struct sampler_params *params;
	struct sampler_history history;
	struct sampler_rng *rng; /* the request's RNG, advanced by one draw when sampling */
	const struct sampler_constraint *constraint; /* NULL: none; applied before sampling */
};

struct backend_mem {
	size_t weight_bytes;
	size_t kv_bytes;
	size_t workspace_bytes;
	bool on_device; /* false for host memory */
};

struct backend_ops {
	/* Runs the model over the batch, writes K/V of every new token into its slot, and
	 * keeps the wanted logits rows until the next forward. */
	enum bg_status (*forward)(void *ctx, const struct backend_batch *batch, struct bg_err *err);
	/* Samples/scores rows of the last forward; out[n_rows]. The backend keeps the drawn
	 * tokens until its next sample call, for the next forward's prev_rows. A row whose logits
	 * (after its constraint) hold a NaN, or are all -inf, reports logprob NaN (sampler.h); the
	 * engine checks that on the host, per row, so a backend needs no flag of its own.
	 * With BACKEND_CAP_ASYNC the call may return before out[] is written: out[] is written
	 * by sample_wait, must stay in place until then, and the next sample call must come
	 * after it (backend_sample does both). The rows are read before the call returns. */
	enum bg_status (*sample)(void *ctx, const struct backend_sample_row *rows, int32_t n_rows,
				 struct sampler_result *out, struct bg_err *err);
	/* BACKEND_CAP_ASYNC only (else NULL): returns once the last sample call's out[] is
	 * written; at once when none is pending. On failure out[] holds unspecified data. */
	enum bg_status (*sample_wait)(void *ctx, struct bg_err *err);
	/* Copies one logits row of the last forward to host memory dst[n_vocab] (tests). */
	enum bg_status (*get_logits)(void *ctx, int32_t row, float *dst, struct bg_err *err);
	/* Swap: copies blocks[n] (all layers, K and V) to/from host memory of n * block_bytes
	 * bytes. Swap-out leaves the blocks as they are: other sequences may share them. */
	enum bg_status (*kv_swap_out)(void *ctx, const int32_t *blocks, int32_t n, void *host,
				      struct bg_err *err);
	enum bg_status (*kv_swap_in)(void *ctx, const int32_t *blocks, int32_t n, const void *host,
				     struct bg_err *err);
	/* Copy-on-write: block dst becomes a copy of block src. */
	enum bg_status (*kv_copy)(void *ctx, int32_t src, int32_t dst, struct bg_err *err);
	/* Recurrent state (n_state_slots > 0, else NULL): slot dst[i] becomes a copy of slot
	 * src[i] for i < n, every source read before any destination is written (a permutation
	 * is one call). Ordered with forward like kv_copy (BACKEND_CAP_ASYNC: enqueued). */
	enum bg_status (*state_copy)(void *ctx, const int32_t *src, const int32_t *dst, int32_t n,
				     struct bg_err *err);
	void (*mem_info)(void *ctx, struct backend_mem *out);
	void (*destroy)(void *ctx);
};

/* What a backend's calls promise beyond the ops' contracts (struct backend.caps). */
enum backend_cap {
	/* forward, sample and kv_copy only enqueue their work, which runs in issue order on
	 * one in-order stream (the CUDA backend): the engine may plan and build the next step
	 * while the device computes, and free a block as soon as the last call that reads it
	 * is issued (engine.c, "Overlap"; --overlap auto turns overlap on for it). Without
	 * it, every call is complete when it returns (the CPU backend). */
	BACKEND_CAP_ASYNC = 1u << 0,
};

struct backend {
	const struct backend_ops *ops;
	void *ctx;
	const char *name; /* "cpu", "cuda" */
	uint32_t caps;	  /* enum backend_cap bits */
	char device[128]; /* human description: "CPU: 16 threads, avx512", "NVIDIA H100 ..." */
	int32_t n_vocab;
	int32_t block_size; /* tokens per KV block */
	int32_t n_blocks;   /* KV blocks in the pool */
	size_t block_bytes; /* bytes of one block across all layers, K and V (swap unit) */
	/* Recurrent-state slots (backend_seq.state_slot): when the model has recurrent layers,
	 * backend_config.n_state_slots or fewer (what the backend's memory rule lets it keep:
	 * backend_cpu.c, backend_cuda.cu), at least 1; else 0. The engine runs no more
	 * sequences at once than this. */
	int32_t n_state_slots;
	size_t state_bytes; /* bytes of one slot */
};

/* How a backend is created. */
struct backend_config {
	int32_t block_size; /* tokens per KV block, > 0 */
	int64_t kv_tokens;  /* KV pool size in tokens; 0 = size from memory */
	float mem_fraction; /* GPU: fraction of free memory after weights for KV */
	int n_threads;	    /* CPU: worker threads; 0 = all available cores */
	int device_index;   /* GPU ordinal */
	/* Sequences that may hold a recurrent state at once (the engine's max_batch_size);
	 * used only by models with recurrent layers. */
	int32_t n_state_slots;
};

void backend_destroy(struct backend *b); /* NULL-safe: calls ops->destroy, frees b */
/* ops->sample, then ops->sample_wait where there is one: out[] is written when it returns. */
enum bg_status backend_sample(struct backend *b, const struct backend_sample_row *rows,
			      int32_t n_rows, struct sampler_result *out, struct bg_err *err);
/* ops->state_copy's checks and plan, for backends: n >= 0, every slot in [0, n_slots), no
 * destination written twice (BG_ERR_INVALID with a message). stage[n] (the caller's):
 * k >= 0 when src[i] must be read into staging buffer k before any copy writes (another
 * copy's destination, a permutation), else -1; *n_stage their count. */
enum bg_status backend_state_copy_plan(const int32_t *src, const int32_t *dst, int32_t n,
				       int32_t n_slots, int32_t *stage, int32_t *n_stage,
				       struct bg_err *err);

#endif
