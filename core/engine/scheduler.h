/* scheduler: the capacity scheduler and the micro-batch scheduler (DESIGN.md §4).
 *
 * Pure logic over sequence state and the KV pool (core/engine/kv.h); no backend, no clock, no
 * tokens. The engine enqueues sequences, calls sched_step once per iteration, runs the
 * plan on a backend, reports progress with sched_advance and completion with
 * sched_finish.
 *
 * Token accounting of one sequence: n_tokens tokens are known (prompt + generated) and
 * the KV of the first n_computed is written. In the context phase (a new request, or one
 * resumed by recompute) the pending tokens [n_computed, n_tokens) are fed in chunks; the
 * chunk that reaches n_tokens yields the logits that sample the next token. In the
 * generation phase n_tokens - n_computed == 1: each step feeds the last sampled token.
 * A sequence never holds more than n_kv_max positions of KV (the last sampled token is
 * never fed), which is what no-evict and static reserve. One with n_tokens > n_kv_max has
 * drawn its last token and is never scheduled again (the engine's overlap finishes it
 * only after the next step was planned).
 *
 * Policies:
 *  - NO_EVICT: admit (FCFS, never skipping ahead) only when the blocks for n_kv_max fit
 *    beside what every running sequence may still need; never pause.
 *  - MAX_UTIL: admit while blocks for the first chunk exist. When a running sequence
 *    cannot get a block for its step, pause the most recently started one(s) (possibly
 *    itself) and free their blocks (after on_pause, which may swap them out). Paused
 *    sequences resume, oldest input first, before any new admission; a resumed sequence
 *    counts as just started.
 *  - ADAPTIVE (LightLLM's token budget, adjusted like TCP congestion control): MAX_UTIL,
 *    plus a budget on the tokens promised to running sequences (sum of n_kv_max). The
 *    head of the queue is admitted only while the promise stays within the budget (or
 *    when nothing runs). When it does not fit and fewer than 90% of the blocks are in
 *    use, the budget grows by 100 tokens (additive increase, once per step); every
 *    pause lowers it by 1000 (multiplicative-style decrease). It starts at the pool's
 *    size in tokens and stays within [block_size, 8 * pool tokens].
 *  - STATIC: when nothing runs, admit a batch (FCFS, up to max_batch_size, reserved as in
 *    NO_EVICT); run all its contexts, then its generation steps in lockstep; admit the
 *    next batch only when every member has finished.
 * Micro-batch: at most max_batch_size running sequences; per step, generation steps first
 * (oldest started first) then context chunks (FCFS) within max_num_tokens. With chunked
 * context a prompt chunk takes what the token budget leaves; without, a prompt runs only
 * whole (the engine rejects prompts longer than max_num_tokens). Contexts being
 * recomputed after a pause are always chunked (they are an internal matter).
 *
 * Block reuse (cfg.prefix_cache): a sequence admitted, or resumed by recompute, first
 * takes from the pool's cache (kv.h) the longest chain of full blocks of its prompt that
 * is cached, up to the last full block before its last known token (at least one token
 * is always computed: it yields the logits), and starts with n_computed at their end.
 * The accounting counts what taking them costs: idle cached blocks it takes leave
 * kv_n_free, shared ones do not, and no-evict reserves kv_blocks_for(n_kv_max) minus the
 * blocks taken. After each step, every prompt block that became full is keyed in the
 * cache (kv_cache_put), so that later sequences, running or not, can share it.
 *
 * First wave (no-evict, max-util, adaptive): requests that arrive together with a shared
 * prompt prefix would all miss the cache, since none has written it yet. The head of the
 * queue is therefore held (not admitted; FCFS, so nothing behind it is either) while a
 * running sequence in its context phase still has to write and key prompt blocks that
 * the head's prompt shares beyond what the cache already holds; once they are keyed, or
 * that writer has left the running set (finished, failed, cancelled, paused), the head
 * is admitted and takes them (SGLang's in-batch prefix caching; vLLM's first wave misses).
 * Only running sequences that compute hold, and they keep being scheduled, so a held
 * head always starts. The hold costs the head the writer's prefill time in TTFT and
 * saves the prefill of the shared blocks. A paused sequence that resumes by recompute is
 * held the same way (the first paused one, in resume order; since paused sequences come
 * before any admission, nothing is admitted meanwhile): when several sequences sharing a
 * prefix were paused and its blocks evicted, the first to resume recomputes it and the
 * others take it. STATIC admits its whole batch at once (its membership and its
 * reservations do not change), but a member that shares prompt blocks with a member
 * admitted before it that has to write them waits inside the batch (cache_wait: running,
 * not scheduled, its table empty) until they are keyed or that member has left, then
 * takes them; since a static batch runs all its contexts before its first generation
 * step, the wait costs it at most the writer's prefill steps. Its reservation stays what
 * it would be without the wait (the blocks cached at admission subtracted, not the ones
 * it will share), so that it still fits if the writer leaves before writing them.
 *
 * Samples (n > 1): a sequence with n_samples > 1 is admitted with room for the whole
 * family (n_samples batch slots; under no-evict and static n_samples * its blocks); after
 * its context phase, sched_fork adds each sibling as a running sequence that shares all
 * of its blocks. Before a step writes into a block held by more than one table (the
 * last, partial prompt block), the scheduler gives the writer a private copy
 * (kv_make_private): step_cow_src/step_cow_dst name the blocks the caller copies before
 * running the step. Such copies are counted where blocks are counted (admission
 * reservations, max-util's room-making).
 *
 * Sliding window (cfg.kv_window = W > 0, only when EVERY layer of the model is windowed:
 * with interleaved global layers a request keeps all its blocks): the query at position
 * p reads positions (p - W, p] only, so after each step, and after taking cached blocks,
 * a sequence gives back (kv_drop_front) the blocks that end at or before
 * n_computed - W + 1; its table keeps KV_DROPPED entries there. What a sequence holds at
 * once is then bounded by win_blocks = kv_blocks_for(W - 2 + block_size + max_num_tokens),
 * and that bound replaces kv_blocks_for(n_kv_max) wherever the policies reserve or
 * promise (sched_blocks_needed; the adaptive promise is min(n_kv_max, win_blocks *
 * block_size)); with cached blocks the windowed reservation does not subtract them. A
 * paused sequence with dropped blocks resumes by recompute, never swap.
 *
 * Beams (engine/beam.h): a beam search is a family of gang sequences (gang set on the
 * root before sched_enqueue, n_samples = its width). Beams advance in lockstep: a
 * sequence whose step sampled does not append by itself (sched_advance(q, false)); it is
 * held (not scheduled: nothing is pending) until the caller has chosen every beam's next
 * token, then re-pointed (sched_beam_reorder: each beam continues the table of the beam
 * it extends, sharing its blocks, copied on write) and given its token (sched_append).
 * Gang sequences are never paused, under any policy: every policy admits a gang root
 * only when its whole family's blocks fit beside what the running sequences may still
 * claim (no-evict's rule), and max-util makes room by pausing other sequences only. A
 * beam's reservation counts the blocks beyond the prompt that it does not hold alone
 * as still to come (beams re-share blocks at every reorder), so that the family never
 * needs more than it reserved.
 *
 * Recurrent state (cfg.n_state_slots > 0: the model keeps a state per sequence that
 * depends on every position before, backend.h): every running sequence holds a state slot
 * (state_slot, in [0, n_state_slots)) from the step it starts running (admitted, resumed,
 * forked) until it stops (finished, paused); n_state_slots >= max_batch_size, so a
 * running sequence always finds one. A slot's contents are the caller's: a sequence
 * starting at position 0 needs none (the backend zeroes it), a forked sample needs its
 * parent's (the caller copies it, backend state_copy), a beam after sched_beam_reorder
 * the state of the beam it continues. A paused sequence resumes by recompute (on_pause is
 * not called: a state is not swapped). The state of a prefix is not kept with its blocks:
 * block reuse needs state checkpoints (below); without them (cfg.n_checkpoints 0) it is
 * off and cfg.prefix_cache is ignored.
 *
 * State checkpoints (cfg.n_checkpoints = K > 0 with recurrent state and prefix_cache): the
 * slots [n_state_slots - K, n_state_slots) hold copies of sequences' states at block
 * boundaries, each keyed by the cache's uid of the chain of full blocks ending there
 * (kv_cache_chain_uid: the uid names the whole prefix). Where to save (vLLM's "align"
 * prefix caching for hybrid models, with targets chosen from the queue): when q takes its
 * cached blocks (admission, recompute-resume), it looks at the first SCHED_CKPT_SCAN (64)
 * waiting sequences (and, static, its batch's members in cache_wait) and, of the full
 * prompt blocks each shares with q's (beyond what q took, within both prompts' reusable
 * blocks: before the last known token), takes the smallest count as ckpt_lo (the prefix
 * most of them share, e.g. a system prompt) and the largest as ckpt_hi (0: none). Its
 * context chunks are cut to end exactly at those boundaries (also without chunked
 * context), and when sched_advance brings it there it saves: a checkpoint for the chain
 * that already exists is refreshed, else a free checkpoint slot or the least recently used
 * one is taken and save_slot names it (the caller copies state_slot into it at once,
 * before any later step). Taking: cache_peek finds the deepest checkpoint whose chain is
 * still cached up to q's reusable blocks; q takes exactly those blocks, step_state_from
 * names the checkpoint's slot (the caller copies it into state_slot before running this
 * step: no save comes between, so the copy always reads the checkpoint it was planned
 * with) and the hit refreshes it. The first-wave hold applies with checkpoints: the head
 * waits for a running writer that has yet to pass a checkpoint boundary it will save and
 * that the head shares (and that lies beyond what the head can take now). A checkpoint
 * whose blocks were evicted can no longer be found and ages out.
 *
 * Invariants after every step: scheduled = context + generation entries; the running
 * count <= max_batch_size; token total <= max_num_tokens; every scheduled sequence's
 * table covers n_computed + its tokens; a NO_EVICT or STATIC sequence is never paused.
 */
#ifndef BG_SCHEDULER_H
#define BG_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/kv.h"
#include "status.h"

enum sched_policy {
	SCHED_NO_EVICT = 0,
	SCHED_MAX_UTIL,
	SCHED_STATIC,
	SCHED_ADAPTIVE,
};

enum sched_state {
	SCHED_NEW = 0, /* not enqueued yet */
	SCHED_WAITING, /* in the admission queue */
	SCHED_RUNNING, /* holds KV, may be scheduled */
	SCHED_PAUSED,  /* preempted (max-util): KV freed (or swapped out) */
	SCHED_DONE,    /* finished; blocks released */
};

struct sched_seq {
	/* ---- set by the caller before sched_enqueue ---- */
	int64_t order;	  /* FCFS key: position in the input (strictly increasing) */
	int32_t n_tokens; /* tokens known: the prompt at first, + 1 per sampled token */
	int32_t n_kv_max; /* the most positions it may ever need: min(prompt + max_tokens,
			   * max_seq_len) - 1, >= n_tokens */
	void *user;	  /* the caller's object */
	const int32_t *prompt; /* [n_prompt] the prompt's tokens, for block reuse (NULL: none) */
	int32_t n_prompt;
	bool cache_lookup; /* take cached blocks at admission; false: compute the whole
			    * prompt (its blocks are still keyed for others) */
	int32_t n_samples; /* sequences this one forks into after its prompt (0 or 1: none) */
	bool gang;	   /* a beam of a beam search (see "Beams" above): never paused */
	/* ---- owned by the scheduler (read-only for the caller) ---- */
	enum sched_state state;
	int32_t n_computed;	  /* tokens whose KV is written */
	bool in_ctx;		  /* in the context phase */
	bool swapped;		  /* paused with its KV in host memory */
	bool recomputing;	  /* re-running prompt + generated tokens after a pause */
	int64_t start_stamp;	  /* larger = started (or resumed) more recently */
	int32_t n_swapped_blocks; /* blocks of KV the swap buffer holds */
	struct kv_table kv;
	int32_t preemptions;
	int32_t n_cached;     /* prompt tokens taken from the cache at first admission */
	bool cache_wait;      /* static: admitted, has not taken its cached prompt blocks
			       * yet: it waits while a member of its batch writes blocks it
			       * will share (see "First wave" above) */
	int32_t n_keyed;      /* kv.blocks[0, n_keyed) are known to the cache ... */
	uint64_t cache_uid;   /* ... as the chain ending at this uid */
	/* the current step (valid after sched_step for scheduled sequences) */
	int32_t step_tokens; /* tokens fed this step; 0 = not scheduled */
	bool step_ctx;	     /* the step is a context chunk */
	bool step_samples;   /* the step ends at n_tokens: its last token's logits sample */
	bool step_swap_in;   /* resumed by swap this step: the caller must swap blocks
			      * kv.blocks[0, n_swapped_blocks) in before running it */
	bool step_new;	     /* admitted (first started) this step */
	bool step_cached;    /* took its cached prompt blocks this step: n_cached is set (at
			      * admission, or after a static member's cache_wait) */
	bool step_resumed;   /* resumed this step */
	int32_t step_cow_src, step_cow_dst; /* copy-on-write this step: the caller copies
					     * block src into dst before running it; -1 = none */
	bool forked;			    /* its siblings were forked (or it is one) */
	int32_t state_slot;		    /* running, with cfg.n_state_slots: its slot; else -1 */
	int32_t ckpt_lo, ckpt_hi; /* state checkpoints: prompt blocks after which it saves its
				   * state (0: none; see "State checkpoints") */
	int32_t step_state_from;  /* >= 0: the caller copies this slot into state_slot before
				   * running the step (a checkpoint taken); -1: none */
	int32_t save_slot;	  /* set by sched_advance, >= 0: the caller copies state_slot into
				   * this checkpoint slot now; -1: none */
};

/* Called when a running sequence is paused, before its blocks are freed. The
 * callee may copy the blocks kv.blocks[0, kv_blocks_for(n_computed)) to host memory;
 * return true when it did (the sequence keeps n_computed and resumes by swap-in), false
 * to resume by recompute (n_computed becomes 0). */
typedef bool (*sched_pause_fn)(void *user, struct sched_seq *s);

struct sched_config {
	enum sched_policy policy;
	int32_t max_batch_size; /* > 0 */
	int32_t max_num_tokens; /* > 0 */
	bool chunked_context;
	sched_pause_fn on_pause; /* NULL: always recompute */
	void *pause_user;
	bool prefix_cache; /* block reuse across sequences (see above) */
	int32_t kv_window; /* > 0: every layer attends to the last kv_window positions only
			    * (see "Sliding window" above); 0: none */
	int32_t n_state_slots; /* > 0: recurrent-state slots, >= max_batch_size +
				* n_checkpoints (see "Recurrent state" above); 0: none */
	int32_t n_checkpoints; /* with n_state_slots: state checkpoints (see above); 0: none */
};

/* One iteration's plan. */
struct sched_plan {
	struct sched_seq **seqs; /* [n] scheduled, in batch order (owned by the scheduler,
				  * valid until the next sched_step) */
	int32_t n;
	int32_t n_ctx, n_gen; /* entries of each kind; n_ctx + n_gen == n */
	int32_t n_ctx_tokens, n_gen_tokens;
	int32_t n_new;				/* admitted this step */
	int32_t n_held; /* sequences that wait for a running sequence to write prompt blocks
			 * they will share (see "First wave" above): 1 when the queue's head
			 * or the first paused sequence does; static: its members in
			 * cache_wait */
	int32_t n_resumed;			/* resumed this step */
	int32_t n_paused_now;			/* paused this step */
	int32_t n_running, n_paused, n_waiting; /* counts after the step */
	int32_t empty_gen_slots; /* static: finished members idling in a generation step */
	int64_t token_budget;	 /* adaptive: the budget after the step */
	int64_t promised_tokens; /* adaptive: sum of n_kv_max of the running sequences */
};

struct sched;

enum bg_status sched_create(const struct sched_config *cfg, struct kv_pool *pool,
			    struct sched **out, struct bg_err *err);
/* NULL-safe. Releases the blocks of every sequence it still holds (the sequences
 * themselves belong to the caller). */
void sched_destroy(struct sched *s);

/* Appends s to the admission queue (FCFS by call order; order must increase). The
 * sequence must outlive its time in the scheduler. BG_ERR_NOMEM on failure (nothing
 * changed). */
enum bg_status sched_enqueue(struct sched *s, struct sched_seq *q, struct bg_err *err);

/* Plans one iteration: pauses / resumes / admits, grows block tables, and fills plan.
 * allow_admit false keeps new sequences waiting (paused ones may still resume). Returns
 * BG_ERR_NOMEM when a block table cannot grow (state stays consistent). */
enum bg_status sched_step(struct sched *s, bool allow_admit, struct sched_plan *plan,
			  struct bg_err *err);

/* After running a scheduled step: q's KV now covers n_computed + step_tokens; appended
 * says a token was sampled and appended (n_tokens + 1, the context phase ends). */
void sched_advance(struct sched *s, struct sched_seq *q, bool appended);

/* Samples: adds child (state NEW, its caller fields set) as a running sequence that shares
 * every block of parent (running, out of its context phase, n_samples > 1) and has its
 * token counts; the caller then appends the child's own first token as it does for the
 * parent. BG_ERR_NOMEM (nothing changed). */
enum bg_status sched_fork(struct sched *s, struct sched_seq *parent, struct sched_seq *child,
			  struct bg_err *err);

/* Beams: q (running, out of its context phase or at its end, n_computed == n_tokens: it
 * was held) gets its next token: n_tokens + 1, the context phase ends. */
void sched_append(struct sched *s, struct sched_seq *q);

/* Beams: beam j of seqs[0, n_new) continues the table of seqs[parent[j]] (every
 * seqs[i], i < n_old, running; the parents with the same n_computed): each new table
 * shares all of its parent's blocks and takes its token counts, then the old tables are
 * released, so a block leaves no table before its new holders hold it. seqs[n_new,
 * n_old) are left with empty tables and nothing to feed (held, until a later reorder
 * gives them a beam again). BG_ERR_NOMEM: nothing changed. */
enum bg_status sched_beam_reorder(struct sched *s, struct sched_seq *const *seqs, int32_t n_old,
				  const int32_t *parent, int32_t n_new, struct bg_err *err);

/* Removes q (running, paused or waiting) and releases its blocks; q->state = DONE. */
void sched_finish(struct sched *s, struct sched_seq *q);

int32_t sched_n_running(const struct sched *s);
int32_t sched_n_paused(const struct sched *s);
int32_t sched_n_waiting(const struct sched *s);
/* The sequences currently in each state (for invariant checks and for dropping them at
 * a stop); valid until the next mutating call. */
struct sched_seq *const *sched_running(const struct sched *s);
struct sched_seq *const *sched_paused(const struct sched *s);
/* The i-th waiting sequence (FCFS), 0 <= i < sched_n_waiting. */
struct sched_seq *sched_waiting_at(const struct sched *s, int32_t i);

/* State checkpoints held (valid ones and ones whose blocks were evicted). */
int32_t sched_n_checkpoints(const struct sched *s);

/* Adaptive: the current token budget. */
int64_t sched_token_budget(const struct sched *s);

/* Blocks one request may hold at once: kv_blocks_for(n_positions), or with samples the
 * prompt's full blocks once and the rest n_samples times, bounded by the sliding window
 * when cfg.kv_window > 0 (n_samples times its bound). The engine refuses requests whose
 * need exceeds the pool. */
int64_t sched_blocks_needed(const struct sched *s, int64_t n_positions, int32_t n_prompt,
			    int32_t n_samples);

/* Blocks the running sequences may still claim: sum of kv_blocks_for(n_kv_max) - held
 * (a sequence that will fork: its family's, the prompt's full blocks counted once), plus
 * one for each pending copy-on-write. */
int64_t sched_reserved_blocks(const struct sched *s);

#endif
