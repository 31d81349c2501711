/* fake_backend: a tiny "model" behind struct backend, for the engine tests (test_engine,
 * test_beam). Header-only, static functions, because each test program is one
 * translation unit. Allocation failures are not handled (tests).
 *
 * Its KV is a hash chain: the slot of position p holds h_p = fake_next(h_{p-1}, token_p,
 * p) (h_{-1} = FAKE_H0), read back through the block table, and the logits of a row
 * depend only on h_p (and, in FAKE_SUCC, on the token). So a request's outputs depend on
 * every token before it *as read from the KV blocks*: a wrong block table, a lost swap or
 * copy, a block handed to two requests or a re-sampled token changes them. The fake
 * checks every batch it gets (block tables long enough and in range, no block written by
 * two sequences of one batch, positions read were written, tokens in the vocabulary,
 * logits rows counted right) and records the first complaint in err (errors counts
 * them) and the batch shapes.
 *
 *   fake_backend(f, V, nb, bs, mode)        a synchronous backend over f (fake_free it)
 *   fake_backend_async(f, V, nb, bs, mode)  the same with BACKEND_CAP_ASYNC: sample()
 *                                           leaves out[] poisoned until sample_wait
 *   fake_next(h, tok, p), FAKE_H0            the chain, for references that recompute it
 *   fake_state_slots = S (before fake_backend) a backend with S recurrent-state slots
 *                                           (backend.h): the chain is then ALSO a state
 *                                           per slot, from which the logits come; the fake
 *                                           checks that a sequence's slot holds its own
 *                                           chain at pos0 (zeroed at position 0), so a
 *                                           slot shared, not carried, or not copied on a
 *                                           fork or beam reorder is caught, and a wrong
 *                                           state changes the outputs
 *   fake_fine_logits(h, V, out)              FAKE_FINE's logits of state h
 */
#ifndef BG_TEST_FAKE_BACKEND_H
#define BG_TEST_FAKE_BACKEND_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "sample/sampler.h"

enum fake_mode {
	FAKE_HASH = 0, /* pseudo-random logits with one clear winner; EOS (2) now and then */
	FAKE_SUCC = 1, /* the token succ[tok] wins by 10: a scripted text */
	FAKE_FINE = 2, /* fine-grained pseudo-random logits in [0, 8), ties improbable */
};

#define FAKE_H0 0x1234567ull
#define FAKE_MAX_ROWS 8192

struct fake {
	int32_t V, bs, nb;
	uint64_t *kv;	/* [nb * bs] hash per slot */
	uint8_t *valid; /* [nb * bs] */
	int64_t *owner; /* [nb] forward stamp * 1024 + seq index, to catch sharing */
	float *logits;	/* [FAKE_MAX_ROWS * V] */
	int32_t n_rows;
	void *scratch;
	enum fake_mode mode;
	int32_t succ[64];		/* FAKE_SUCC: the token that follows each token */
	int32_t last[FAKE_MAX_ROWS]; /* the tokens the last sample call drew (prev_rows) */
	int32_t n_last;
	/* BACKEND_CAP_ASYNC (fake_backend_async): sample() leaves out[] poisoned (token -1,
	 * NaN log-probs) and keeps the results in held[n_held]; sample_wait copies them */
	bool async, pending;
	struct sampler_result *held; /* [FAKE_MAX_ROWS] */
	struct sampler_result *held_out;
	int32_t n_held;
	/* > 0: the bad_call-th sample call returns bad_token, outside the vocabulary, in its
	 * first row (a broken plugin) */
	int32_t bad_call, bad_token, n_sample_calls;
	/* records */
	int64_t n_forward, max_seqs, max_tokens, total_tokens, swap_outs, swap_ins, copies;
	bool shared_ok; /* blocks may be shared (samples): swap-out must not poison them */
	/* recurrent state (fake_state_slots): per slot the chain hash and the positions it
	 * has seen */
	int32_t n_slots;
	uint64_t *slot_h;
	int32_t *slot_pos;
	int64_t state_copies;
	int errors;
	char err[256];
};

/* > 0: fake_backend makes a backend with this many state slots (see above) */
static int32_t fake_state_slots;

static inline uint64_t fake_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static inline uint64_t fake_next(uint64_t prev, int32_t tok, int32_t p)
{
	return fake_mix64(prev ^ (uint64_t)tok * 0x100000001b3ull ^ (uint64_t)p << 40);
}

static inline void fake_fine_logits(uint64_t h, int32_t V, float *out)
{
	for (int32_t v = 0; v < V; v++)
		out[v] = (float)(fake_mix64(h ^ (uint64_t)(v + 1) * 0x9e3779b97f4a7c15ull) %
				 1000003) /
			 125000.0f;
}

static inline void fake_bad(struct fake *f, const char *msg)
{
	if (f->errors++ == 0)
		snprintf(f->err, sizeof f->err, "%s", msg);
}

static inline void fake_row(const struct fake *f, uint64_t h, int32_t tok, float *out)
{
	if (f->mode == FAKE_FINE) {
		fake_fine_logits(h, f->V, out);
		return;
	}
	if (f->mode == FAKE_SUCC) {
		for (int32_t v = 0; v < f->V; v++)
			out[v] = 0.0f;
		out[f->succ[tok]] = 10.0f;
		return;
	}
	int32_t target = 3 + (int32_t)((h >> 7) % (uint64_t)(f->V - 3));
	if (h % 23 == 0)
		target = 2; /* EOS now and then */
	for (int32_t v = 0; v < f->V; v++)
		out[v] = (float)(fake_mix64(h ^ ((uint64_t)v * 0x9e3779b97f4a7c15ull)) % 1000) /
			 250.0f;
	out[2] -= 3.0f;
	out[target] += 4.0f;
}

static inline enum bg_status fake_forward(void *ctx, const struct backend_batch *b, struct bg_err *err)
{
	struct fake *f = ctx;
	f->n_forward++;
	f->n_rows = 0;
	int64_t ntok = 0;
	if (b->n_seqs > f->max_seqs)
		f->max_seqs = b->n_seqs;
	for (int32_t s = 0; s < b->n_seqs; s++) {
		const struct backend_seq *q = &b->seqs[s];
		if (q->n_tokens < 1 || q->pos0 < 0)
			fake_bad(f, "empty sequence or negative position");
		if ((int64_t)q->n_blocks * f->bs < (int64_t)q->pos0 + q->n_tokens) {
			fake_bad(f, "block table too short");
			return bg_fail(err, BG_ERR_INVALID, "table");
		}
		for (int32_t i = 0; i < q->n_blocks; i++) {
			int32_t blk = q->block_table[i];
			if (blk < 0 || blk >= f->nb) {
				fake_bad(f, "block index out of range");
				return bg_fail(err, BG_ERR_INVALID, "bad block");
			}
		}
		/* Blocks are shared read-only (block reuse, beams); a block WRITTEN by two
		 * sequences of one batch is a bug. */
		for (int32_t j = 0; j < q->n_tokens; j++) {
			int32_t blk = q->block_table[(q->pos0 + j) / f->bs];
			int64_t stamp = f->n_forward * 1024 + s;
			if (f->owner[blk] / 1024 == f->n_forward && f->owner[blk] != stamp)
				fake_bad(f, "a block is written by two sequences of one batch");
			f->owner[blk] = stamp;
		}
		int32_t k = q->state_slot;
		if (f->n_slots) {
			if (k < 0 || k >= f->n_slots) {
				fake_bad(f, "state slot out of range");
				return bg_fail(err, BG_ERR_INVALID, "state slot");
			}
			for (int32_t t = 0; t < s; t++)
				if (b->seqs[t].state_slot == k)
					fake_bad(f,
						 "two sequences of one batch share a state slot");
			if (q->pos0 == 0) { /* backend.h: zeroed before position 0 */
				f->slot_h[k] = FAKE_H0;
				f->slot_pos[k] = 0;
			}
		}
		for (int32_t j = 0; j < q->n_tokens; j++) {
			int32_t p = q->pos0 + j;
			uint64_t prev = FAKE_H0;
			if (p > 0) {
				size_t ps = (size_t)q->block_table[(p - 1) / f->bs] * f->bs +
					    (size_t)((p - 1) % f->bs);
				if (!f->valid[ps])
					fake_bad(f, "reads a KV slot never written");
				prev = f->kv[ps];
			}
			if (f->n_slots) { /* the state is what the logits come from */
				if (f->slot_pos[k] != p || f->slot_h[k] != prev)
					fake_bad(f,
						 "a state slot does not hold its sequence's state");
				prev = f->slot_h[k];
			}
			int32_t tok = q->tokens[j];
			if (q->prev_rows && q->prev_rows[j] >= 0) {
				if (q->prev_rows[j] >= f->n_last) {
					fake_bad(f, "a previous sample row that does not exist");
					return bg_fail(err, BG_ERR_INVALID, "prev_rows");
				}
				tok = f->last[q->prev_rows[j]];
			}
			if (tok < 0 || tok >= f->V) {
				fake_bad(f, "token out of range");
				return bg_fail(err, BG_ERR_INVALID, "token");
			}
			uint64_t h = fake_next(prev, tok, p);
			size_t sl = (size_t)q->block_table[p / f->bs] * f->bs + (size_t)(p % f->bs);
			f->kv[sl] = h;
			f->valid[sl] = 1;
			if (f->n_slots) {
				f->slot_h[k] = h;
				f->slot_pos[k] = p + 1;
			}
			if (q->want_logits[j]) {
				if (f->n_rows >= FAKE_MAX_ROWS) {
					fake_bad(f, "too many logits rows");
					return bg_fail(err, BG_ERR_INVALID, "rows");
				}
				fake_row(f, h, tok, &f->logits[(size_t)f->n_rows * f->V]);
				f->n_rows++;
			}
		}
		ntok += q->n_tokens;
	}
	if (f->n_rows != b->n_logits)
		fake_bad(f, "n_logits does not match the wanted tokens");
	if (ntok > f->max_tokens)
		f->max_tokens = ntok;
	f->total_tokens += ntok;
	return BG_OK;
}

static inline enum bg_status fake_sample(void *ctx, const struct backend_sample_row *rows, int32_t n,
				  struct sampler_result *out, struct bg_err *err)
{
	struct fake *f = ctx;
	if (n > FAKE_MAX_ROWS) {
		fake_bad(f, "more sample rows than logits rows");
		return bg_fail(err, BG_ERR_INVALID, "rows");
	}
	for (int32_t i = 0; i < n; i++) {
		const struct backend_sample_row *r = &rows[i];
		if (r->logits_row < 0 || r->logits_row >= f->n_rows) {
			fake_bad(f, "sample row out of range");
			return bg_fail(err, BG_ERR_INVALID, "row");
		}
		const float *lg = &f->logits[(size_t)r->logits_row * f->V];
		struct sampler_result *o = f->async ? &f->held[i] : &out[i];
		if (r->forced >= 0)
			sampler_score(lg, f->V, r->forced, r->params->n_top, o);
		else
			sampler_sample(lg, f->V, r->params, &r->history, r->rng, f->scratch, o);
		if (i == 0 && f->n_sample_calls + 1 == f->bad_call)
			o->token = f->bad_token;
		f->last[i] = o->token;
	}
	f->n_sample_calls++;
	f->n_last = n;
	if (f->async) {
		if (f->pending)
			fake_bad(f, "sample called before the last call's results were waited for");
		memset(out, 0xff, (size_t)n * sizeof *out);
		f->pending = true;
		f->held_out = out;
		f->n_held = n;
	}
	return BG_OK;
}

static inline enum bg_status fake_sample_wait(void *ctx, struct bg_err *err)
{
	(void)err;
	struct fake *f = ctx;
	if (f->pending)
		memcpy(f->held_out, f->held, (size_t)f->n_held * sizeof *f->held);
	f->pending = false;
	return BG_OK;
}

static inline enum bg_status fake_swap_out(void *ctx, const int32_t *blocks, int32_t n, void *host,
				    struct bg_err *err)
{
	(void)err;
	struct fake *f = ctx;
	uint64_t *h = host;
	for (int32_t i = 0; i < n; i++)
		for (int32_t j = 0; j < f->bs; j++) {
			size_t sl = (size_t)blocks[i] * f->bs + (size_t)j;
			h[(size_t)i * f->bs + j] = f->kv[sl];
			if (!f->shared_ok)
				f->kv[sl] = 0xdeadbeef; /* poison: swap-in must restore it */
		}
	f->swap_outs++;
	return BG_OK;
}

static inline enum bg_status fake_swap_in(void *ctx, const int32_t *blocks, int32_t n, const void *host,
				   struct bg_err *err)
{
	(void)err;
	struct fake *f = ctx;
	const uint64_t *h = host;
	for (int32_t i = 0; i < n; i++)
		for (int32_t j = 0; j < f->bs; j++) {
			size_t sl = (size_t)blocks[i] * f->bs + (size_t)j;
			f->kv[sl] = h[(size_t)i * f->bs + j];
			f->valid[sl] = 1;
		}
	f->swap_ins++;
	return BG_OK;
}

static inline enum bg_status fake_kv_copy(void *ctx, int32_t src, int32_t dst, struct bg_err *err)
{
	struct fake *f = ctx;
	if (src < 0 || src >= f->nb || dst < 0 || dst >= f->nb || src == dst)
		return bg_fail(err, BG_ERR_INVALID, "bad copy %d -> %d", src, dst);
	memcpy(&f->kv[(size_t)dst * f->bs], &f->kv[(size_t)src * f->bs], f->bs * sizeof *f->kv);
	memcpy(&f->valid[(size_t)dst * f->bs], &f->valid[(size_t)src * f->bs], (size_t)f->bs);
	f->copies++;
	return BG_OK;
}

/* backend.h's state_copy: every source read before any destination is written */
static inline enum bg_status fake_state_copy(void *ctx, const int32_t *src, const int32_t *dst,
					     int32_t n, struct bg_err *err)
{
	struct fake *f = ctx;
	uint64_t h[256];
	int32_t pos[256];
	if (n < 0 || n > 256)
		return bg_fail(err, BG_ERR_INVALID, "state_copy of %d slots", n);
	for (int32_t i = 0; i < n; i++) {
		if (src[i] < 0 || src[i] >= f->n_slots || dst[i] < 0 || dst[i] >= f->n_slots) {
			fake_bad(f, "state_copy: slot out of range");
			return bg_fail(err, BG_ERR_INVALID, "state slot");
		}
		h[i] = f->slot_h[src[i]];
		pos[i] = f->slot_pos[src[i]];
	}
	for (int32_t i = 0; i < n; i++) {
		f->slot_h[dst[i]] = h[i];
		f->slot_pos[dst[i]] = pos[i];
	}
	f->state_copies += n;
	return BG_OK;
}

static inline void fake_mem(void *ctx, struct backend_mem *m)
{
	struct fake *f = ctx;
	m->weight_bytes = 1000;
	m->kv_bytes = (size_t)f->nb * f->bs * sizeof(uint64_t);
	m->workspace_bytes = (size_t)FAKE_MAX_ROWS * f->V * sizeof(float);
	m->on_device = false;
}

/* One table for both fakes: sample_wait is a no-op unless the fake is asynchronous. */
static const struct backend_ops fake_ops = {
    .forward = fake_forward,
    .sample = fake_sample,
    .sample_wait = fake_sample_wait,
    .kv_swap_out = fake_swap_out,
    .kv_swap_in = fake_swap_in,
    .kv_copy = fake_kv_copy,
    .state_copy = fake_state_copy,
    .mem_info = fake_mem,
};

/* A backend over f (zeroed first) with V tokens and nb KV blocks of bs slots. */
static inline struct backend fake_backend(struct fake *f, int32_t V, int32_t nb, int32_t bs,
				   enum fake_mode mode)
{
	memset(f, 0, sizeof *f);
	f->V = V;
	f->nb = nb;
	f->bs = bs;
	f->mode = mode;
	f->kv = calloc((size_t)nb * bs, sizeof *f->kv);
	f->valid = calloc((size_t)nb * bs, 1);
	f->owner = calloc((size_t)nb, sizeof *f->owner);
	f->logits = malloc((size_t)FAKE_MAX_ROWS * V * sizeof *f->logits);
	f->scratch = malloc(sampler_scratch_bytes(V));
	f->n_slots = fake_state_slots;
	f->slot_h = calloc((size_t)f->n_slots + 1, sizeof *f->slot_h);
	f->slot_pos = calloc((size_t)f->n_slots + 1, sizeof *f->slot_pos);
	for (int32_t k = 0; k < f->n_slots; k++) /* garbage: position 0 must zero it */
		f->slot_h[k] = 0xbadbadull, f->slot_pos[k] = -7;
	return (struct backend){.ops = &fake_ops,
				.ctx = f,
				.name = "fake",
				.n_vocab = V,
				.block_size = bs,
				.n_blocks = nb,
				.block_bytes = (size_t)bs * sizeof(uint64_t),
				.n_state_slots = f->n_slots,
				.state_bytes = f->n_slots ? 12 : 0};
}

/* fake_backend with BACKEND_CAP_ASYNC: results arrive at sample_wait. */
static inline struct backend fake_backend_async(struct fake *f, int32_t V, int32_t nb, int32_t bs,
					 enum fake_mode mode)
{
	struct backend b = fake_backend(f, V, nb, bs, mode);
	f->async = true;
	f->held = malloc((size_t)FAKE_MAX_ROWS * sizeof *f->held);
	b.caps = BACKEND_CAP_ASYNC;
	return b;
}

static inline void fake_free(struct fake *f)
{
	free(f->held);
	free(f->kv);
	free(f->valid);
	free(f->owner);
	free(f->logits);
	free(f->scratch);
	free(f->slot_h);
	free(f->slot_pos);
}

#endif
