#include "engine/scheduler.h"

#include <stdlib.h>
#include <string.h>

struct sched {
	struct sched_config cfg;
	struct kv_pool *pool;
	/* waiting: a ring of pointers, FCFS */
	struct sched_seq **wq; /* [wq_cap] */
	int32_t wq_cap, wq_head, wq_n;
	/* running: in start order (oldest first) */
	struct sched_seq **run; /* [max_batch_size] */
	int32_t n_run;
	/* paused: sorted by order (oldest input first) */
	struct sched_seq **paused; /* [paused_cap] */
	int32_t n_paused, paused_cap;
	struct sched_seq **plan; /* [max_batch_size] */
	int64_t clock;		 /* start stamps */
	int32_t static_size;	 /* members of the current static batch */
	int64_t budget;		 /* adaptive: tokens that running sequences may be promised */
	int64_t budget_lo, budget_hi;
	int32_t win_blocks; /* cfg.kv_window > 0: the most blocks a sequence holds at once */
	int32_t *slot_free; /* cfg.n_state_slots > 0: the free state slots, a stack */
	int32_t n_slot_free;
	struct sched_ckpt *ck; /* [cfg.n_checkpoints] state checkpoints, ck[0, n_ck) held */
	int32_t n_ck;
	int64_t ck_clock; /* LRU stamps */
};

/* A state checkpoint (scheduler.h, "State checkpoints"): slot holds the state after the
 * chain of n_blocks full blocks whose last uid is uid. */
struct sched_ckpt {
	uint64_t uid;
	int32_t n_blocks;
	int32_t slot;
	int64_t stamp; /* last saved or taken: the smallest is evicted first */
};

/* Waiting sequences a sequence compares its prompt with to choose its checkpoints. */
enum { SCHED_CKPT_SCAN = 64 };

/* AIMD steps of the adaptive policy (the FasterTransformer write-up's LightLLM numbers). */
enum { SCHED_AIMD_INCREASE = 100, SCHED_AIMD_DECREASE = 1000 };

static void window_drop(struct sched *s, struct sched_seq *q);

static bool preempts(const struct sched *s)
{
	return s->cfg.policy == SCHED_MAX_UTIL || s->cfg.policy == SCHED_ADAPTIVE;
}

enum bg_status sched_create(const struct sched_config *cfg, struct kv_pool *pool,
			    struct sched **out, struct bg_err *err)
{
	*out = NULL;
	if (cfg->max_batch_size <= 0 || cfg->max_num_tokens <= 0)
		return bg_fail(err, BG_ERR_INVALID,
			       "max batch size (%d) and max num tokens (%d) must be positive",
			       cfg->max_batch_size, cfg->max_num_tokens);
	struct sched *s = calloc(1, sizeof *s);
	if (!s)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the scheduler");
	s->cfg = *cfg;
	s->pool = pool;
	int64_t pool_tokens = (int64_t)kv_n_blocks(pool) * kv_block_size(pool);
	s->budget = pool_tokens;
	s->budget_lo = kv_block_size(pool);
	s->budget_hi = 8 * pool_tokens;
	if (cfg->kv_window > 0) {
		/* after kv_drop_front, a step feeding c <= max_num_tokens tokens from position
		 * n holds the blocks of positions [n - W + 1 rounded down to a block, n + c):
		 * at most kv_blocks_for(W - 2 + block_size + c) */
		int64_t span =
		    (int64_t)cfg->kv_window - 2 + kv_block_size(pool) + cfg->max_num_tokens;
		s->win_blocks = kv_blocks_for(pool, span);
	}
	if (cfg->n_state_slots <= 0 || !cfg->prefix_cache)
		s->cfg.n_checkpoints = 0;
	if (cfg->n_state_slots > 0) {
		int32_t k = s->cfg.n_checkpoints;
		if (k < 0 || cfg->n_state_slots - k < cfg->max_batch_size) {
			free(s);
			return bg_fail(
			    err, BG_ERR_INVALID,
			    "%d recurrent-state slots for a batch of %d sequences and %d "
			    "checkpoints",
			    cfg->n_state_slots, cfg->max_batch_size, k);
		}
		if (k == 0)
			s->cfg.prefix_cache = false; /* scheduler.h, "Recurrent state" */
		/* running sequences take [0, n - k); checkpoints keep [n - k, n) */
		s->slot_free = malloc((size_t)cfg->n_state_slots * sizeof *s->slot_free);
		for (int32_t i = k; s->slot_free && i < cfg->n_state_slots; i++)
			s->slot_free[s->n_slot_free++] = cfg->n_state_slots - 1 - i;
		s->ck = k ? calloc((size_t)k, sizeof *s->ck) : NULL;
		if (k && !s->ck) {
			free(s->slot_free);
			free(s);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the scheduler");
		}
	}
	s->run = calloc((size_t)cfg->max_batch_size, sizeof *s->run);
	s->plan = calloc((size_t)cfg->max_batch_size, sizeof *s->plan);
	if (!s->run || !s->plan || (cfg->n_state_slots > 0 && !s->slot_free)) {
		sched_destroy(s);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the scheduler");
	}
	*out = s;
	return BG_OK;
}

/* Appends q to the running set; with recurrent state it takes a slot (scheduler.h). */
static void run_push(struct sched *s, struct sched_seq *q)
{
	s->run[s->n_run++] = q;
	q->state_slot = -1;
	if (s->cfg.n_state_slots > 0) {
		BG_ASSERT(s->n_slot_free > 0);
		q->state_slot = s->slot_free[--s->n_slot_free];
	}
}

/* q stops running: its state slot, if any, goes back. */
static void slot_give(struct sched *s, struct sched_seq *q)
{
	if (q->state_slot >= 0) {
		s->slot_free[s->n_slot_free++] = q->state_slot;
		q->state_slot = -1;
	}
}

static void release_seq(struct sched *s, struct sched_seq *q)
{
	kv_release(s->pool, &q->kv);
	kv_table_free(&q->kv);
}

void sched_destroy(struct sched *s)
{
	if (!s)
		return;
	for (int32_t i = 0; i < s->n_run; i++)
		release_seq(s, s->run[i]);
	for (int32_t i = 0; i < s->n_paused; i++)
		release_seq(s, s->paused[i]);
	free(s->wq);
	free(s->slot_free);
	free(s->ck);
	free(s->run);
	free(s->paused);
	free(s->plan);
	free(s);
}

/* ---- queues ---- */

static struct sched_seq *wq_at(const struct sched *s, int32_t i)
{
	return s->wq[(s->wq_head + i) % s->wq_cap];
}

enum bg_status sched_enqueue(struct sched *s, struct sched_seq *q, struct bg_err *err)
{
	BG_ASSERT(q->n_tokens > 0 && q->n_kv_max >= q->n_tokens);
	if (s->wq_n == s->wq_cap) {
		int32_t cap = s->wq_cap ? s->wq_cap * 2 : 64;
		struct sched_seq **nq = malloc((size_t)cap * sizeof *nq);
		if (!nq)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the request queue");
		for (int32_t i = 0; i < s->wq_n; i++)
			nq[i] = wq_at(s, i);
		free(s->wq);
		s->wq = nq;
		s->wq_cap = cap;
		s->wq_head = 0;
	}
	s->wq[(s->wq_head + s->wq_n) % s->wq_cap] = q;
	s->wq_n++;
	q->state = SCHED_WAITING;
	q->n_computed = 0;
	q->in_ctx = true;
	q->swapped = q->recomputing = false;
	q->step_tokens = 0;
	q->preemptions = 0;
	q->n_cached = 0;
	q->cache_wait = false;
	q->n_keyed = 0;
	q->cache_uid = 0;
	q->forked = false;
	q->step_cow_src = q->step_cow_dst = -1;
	q->ckpt_lo = q->ckpt_hi = 0;
	q->step_state_from = q->save_slot = -1;
	return BG_OK;
}

static struct sched_seq *wq_pop(struct sched *s)
{
	struct sched_seq *q = s->wq[s->wq_head];
	s->wq_head = (s->wq_head + 1) % s->wq_cap;
	s->wq_n--;
	return q;
}

static void wq_remove(struct sched *s, struct sched_seq *q)
{
	int32_t i = 0;
	while (i < s->wq_n && wq_at(s, i) != q)
		i++;
	BG_ASSERT(i < s->wq_n);
	for (; i + 1 < s->wq_n; i++)
		s->wq[(s->wq_head + i) % s->wq_cap] = wq_at(s, i + 1);
	s->wq_n--;
}

static enum bg_status paused_insert(struct sched *s, struct sched_seq *q, struct bg_err *err)
{
	if (s->n_paused == s->paused_cap) {
		int32_t cap = s->paused_cap ? s->paused_cap * 2 : 16;
		struct sched_seq **np = realloc(s->paused, (size_t)cap * sizeof *np);
		if (!np)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the paused list");
		s->paused = np;
		s->paused_cap = cap;
	}
	int32_t i = s->n_paused;
	while (i > 0 && s->paused[i - 1]->order > q->order) {
		s->paused[i] = s->paused[i - 1];
		i--;
	}
	s->paused[i] = q;
	s->n_paused++;
	return BG_OK;
}

static void paused_remove_at(struct sched *s, int32_t i)
{
	memmove(&s->paused[i], &s->paused[i + 1],
		(size_t)(s->n_paused - i - 1) * sizeof *s->paused);
	s->n_paused--;
}

/* Drops sequences no longer RUNNING from the running array, keeping start order. */
static void run_compact(struct sched *s)
{
	int32_t j = 0;
	for (int32_t i = 0; i < s->n_run; i++)
		if (s->run[i]->state == SCHED_RUNNING)
			s->run[j++] = s->run[i];
	s->n_run = j;
}

/* ---- the step ---- */

static void clear_step(struct sched_seq *q)
{
	q->step_cow_src = q->step_cow_dst = -1;
	q->step_tokens = 0;
	q->step_ctx = q->step_samples = q->step_swap_in = false;
	q->step_new = q->step_resumed = q->step_cached = false;
	q->step_state_from = -1;
}

/* Tokens a context may take from budget: all that are pending when they fit, else a chunk
 * when chunking applies, else none. */
static int32_t ctx_tokens(const struct sched *s, const struct sched_seq *q, int32_t budget)
{
	int32_t pend = q->n_tokens - q->n_computed;
	if (budget <= 0 || pend <= 0)
		return 0;
	/* a chunk ends at the next checkpoint boundary (scheduler.h, "State checkpoints") */
	int32_t bs = kv_block_size(s->pool);
	for (int32_t i = 0; i < 2; i++) {
		int64_t at = (int64_t)(i ? q->ckpt_hi : q->ckpt_lo) * bs;
		if (at > q->n_computed && at - q->n_computed < pend)
			pend = (int32_t)(at - q->n_computed);
	}
	if (pend <= budget)
		return pend;
	return (s->cfg.chunked_context || q->recomputing) ? budget : 0;
}

static void set_step(struct sched_seq *q, int32_t tokens)
{
	q->step_tokens = tokens;
	q->step_ctx = q->in_ctx;
	q->step_samples = q->n_computed + tokens == q->n_tokens;
}

/* ---- block reuse ---- */

/* Full prompt blocks of q that another sequence may take from the cache: those before
 * its last known token (at least one token is always computed). */
static int32_t reusable_blocks(const struct sched *s, const struct sched_seq *q)
{
	int32_t lim = q->n_prompt < q->n_tokens - 1 ? q->n_prompt : q->n_tokens - 1;
	return lim / kv_block_size(s->pool);
}

/* State checkpoints: the index in s->ck of the deepest checkpoint of a chain of q's first
 * blocks (at most lim) that is cached, or -1. */
static int32_t ckpt_find(const struct sched *s, const struct sched_seq *q, int32_t lim)
{
	int32_t best = -1;
	for (int32_t i = 0; i < s->n_ck; i++) {
		const struct sched_ckpt *c = &s->ck[i];
		if (c->n_blocks <= lim && (best < 0 || c->n_blocks > s->ck[best].n_blocks) &&
		    kv_cache_chain_uid(s->pool, q->prompt, c->n_blocks) == c->uid)
			best = i;
	}
	return best;
}

/* Cached blocks q could take now (its table is empty); *n_idle of them are idle. With
 * recurrent state, only a chain that ends at a checkpoint can be taken. */
static int32_t cache_peek(const struct sched *s, const struct sched_seq *q, int32_t *n_idle)
{
	*n_idle = 0;
	if (!s->cfg.prefix_cache || !q->cache_lookup || !q->prompt || q->swapped)
		return 0;
	int32_t lim = reusable_blocks(s, q);
	if (s->cfg.n_checkpoints > 0) {
		int32_t i = ckpt_find(s, q, lim);
		lim = i < 0 ? 0 : s->ck[i].n_blocks;
	}
	return kv_cache_peek(s->pool, q->prompt, lim, n_idle);
}

/* Full blocks the prompts of a and b share, at most lim. */
static int32_t shared_blocks(const struct sched *s, const int32_t *a, const int32_t *b, int32_t lim)
{
	int32_t bs = kv_block_size(s->pool), j = 0;
	while (j < lim &&
	       memcmp(a + (size_t)j * bs, b + (size_t)j * bs, (size_t)bs * sizeof *a) == 0)
		j++;
	return j;
}

/* State checkpoints: w may later take what q computes: the full prompt blocks they share
 * beyond q's first k widen [*lo, *hi]. */
static void ckpt_consider(const struct sched *s, const struct sched_seq *q,
			  const struct sched_seq *w, int32_t k, int32_t *lo, int32_t *hi)
{
	if (w == q || !w->prompt || !w->cache_lookup)
		return;
	int32_t lim = reusable_blocks(s, q), wl = reusable_blocks(s, w);
	int32_t j = shared_blocks(s, q->prompt, w->prompt, lim < wl ? lim : wl);
	if (j > k) {
		*lo = j < *lo ? j : *lo;
		*hi = j > *hi ? j : *hi;
	}
}

/* State checkpoints: q, which starts at n_computed (a block boundary), chooses where it
 * saves its state: the fewest and the most full blocks beyond n_computed that its prompt
 * shares with one of the first SCHED_CKPT_SCAN waiting sequences or (static) a member of
 * its batch in cache_wait (scheduler.h). */
static void ckpt_targets(const struct sched *s, struct sched_seq *q)
{
	q->ckpt_lo = q->ckpt_hi = 0;
	if (s->cfg.n_checkpoints == 0 || !q->prompt)
		return;
	int32_t k = q->n_computed / kv_block_size(s->pool), lo = INT32_MAX, hi = 0;
	for (int32_t i = 0; i < s->wq_n && i < SCHED_CKPT_SCAN; i++)
		ckpt_consider(s, q, wq_at(s, i), k, &lo, &hi);
	for (int32_t i = 0; i < s->n_run; i++)
		if (s->run[i]->cache_wait)
			ckpt_consider(s, q, s->run[i], k, &lo, &hi);
	if (hi == 0)
		return;
	q->ckpt_lo = lo;
	q->ckpt_hi = hi > lo ? hi : 0;
}

/* State checkpoints: q's state is at the end of its first b keyed blocks (chain uid
 * q->cache_uid): refreshes the checkpoint of that chain, or takes a free checkpoint slot
 * or the least recently used one, which q->save_slot names for the caller's copy. */
static void ckpt_save(struct sched *s, struct sched_seq *q, int32_t b)
{
	struct sched_ckpt *c = NULL;
	for (int32_t i = 0; i < s->n_ck && !c; i++)
		if (s->ck[i].uid == q->cache_uid)
			c = &s->ck[i];
	if (c) {
		c->stamp = ++s->ck_clock;
		return;
	}
	if (s->n_ck < s->cfg.n_checkpoints) {
		c = &s->ck[s->n_ck];
		c->slot = s->cfg.n_state_slots - s->cfg.n_checkpoints + s->n_ck;
		s->n_ck++;
	} else {
		c = &s->ck[0];
		for (int32_t i = 1; i < s->n_ck; i++)
			if (s->ck[i].stamp < c->stamp)
				c = &s->ck[i];
	}
	c->uid = q->cache_uid;
	c->n_blocks = b;
	c->stamp = ++s->ck_clock;
	q->save_slot = c->slot;
}

int32_t sched_n_checkpoints(const struct sched *s)
{
	return s->n_ck;
}

/* First-wave dedup (SGLang's in-batch prefix caching): true when another running
 * sequence is computing prompt blocks that q would share beyond the k it can take from
 * the cache now (its prompt's first blocks equal q's, and it has not keyed them yet).
 * Sequences started in one wave otherwise all miss, since nothing is written yet. q then
 * waits: the writer keys each block in sched_advance, and once it has keyed all the
 * blocks they share (or has left the running set: finished, failed, cancelled or paused)
 * q is no longer held and takes them. Only running writers that compute hold (not a
 * static member in cache_wait), so a held q always runs in the end. */
static bool held_for_writer(const struct sched *s, const struct sched_seq *q, int32_t k)
{
	if (!s->cfg.prefix_cache || !q->cache_lookup || !q->prompt || q->swapped)
		return false;
	int32_t bs = kv_block_size(s->pool);
	int32_t lim = reusable_blocks(s, q);
	for (int32_t i = 0; i < s->n_run && k < lim; i++) {
		const struct sched_seq *w = s->run[i];
		int32_t wl = w->n_prompt / bs; /* full prompt blocks w keys */
		if (w == q || w->cache_wait || !w->in_ctx || !w->prompt || w->n_keyed >= wl)
			continue; /* n_keyed is INT32_MAX when w's keys could not be stored */
		int32_t j = shared_blocks(s, q->prompt, w->prompt, lim < wl ? lim : wl);
		if (s->cfg.n_checkpoints > 0) {
			/* a checkpoint w has yet to save, beyond k, within what they share */
			for (int32_t t = 0; t < 2; t++) {
				int32_t at = t ? w->ckpt_hi : w->ckpt_lo;
				if (at > k && at <= j && w->n_computed < at * bs)
					return true;
			}
		} else if (j > k && j > w->n_keyed) {
			return true;
		}
	}
	return false;
}

/* q (empty table, n_computed 0) takes k cached blocks and starts after them; counts the
 * lookup. */
static enum bg_status cache_take(struct sched *s, struct sched_seq *q, int32_t k,
				 struct bg_err *err)
{
	if (!s->cfg.prefix_cache)
		return BG_OK;
	if (k > 0) {
		enum bg_status st =
		    kv_cache_take(s->pool, &q->kv, q->prompt, k, &q->cache_uid, err);
		if (st != BG_OK)
			return st;
		q->n_computed = k * kv_block_size(s->pool);
		q->n_keyed = k;
		if (s->cfg.n_checkpoints > 0) { /* cache_peek chose a checkpoint's chain */
			int32_t i = ckpt_find(s, q, k);
			BG_ASSERT(i >= 0 && s->ck[i].n_blocks == k);
			q->step_state_from = s->ck[i].slot;
			s->ck[i].stamp = ++s->ck_clock; /* a hit refreshes */
		}
	}
	ckpt_targets(s, q);
	kv_cache_note(s->pool, k, kv_blocks_for(s->pool, q->n_prompt) - k);
	window_drop(s, q);
	return BG_OK;
}

/* q, at its first admission, takes k cached blocks: n_cached is set. */
static enum bg_status admit_take(struct sched *s, struct sched_seq *q, int32_t k,
				 struct bg_err *err)
{
	enum bg_status st = cache_take(s, q, k, err);
	if (st == BG_OK) {
		q->n_cached = q->n_computed;
		q->step_cached = true;
	}
	return st;
}

/* Static: q, a member of the running batch with an empty table, takes its cached prompt
 * blocks, unless a member that computes has still to write blocks they share: then it
 * waits (cache_wait) and is asked again at the next step. */
static enum bg_status static_take(struct sched *s, struct sched_seq *q, struct bg_err *err)
{
	int32_t n_idle, k = cache_peek(s, q, &n_idle);
	q->cache_wait = held_for_writer(s, q, k);
	return q->cache_wait ? BG_OK : admit_take(s, q, k, err);
}

/* Keys q's prompt blocks that became full. */
static void cache_put_full(struct sched *s, struct sched_seq *q)
{
	if (!s->cfg.prefix_cache || !q->prompt)
		return;
	int32_t bs = kv_block_size(s->pool);
	int32_t done = q->n_computed < q->n_prompt ? q->n_computed : q->n_prompt;
	for (; q->n_keyed < done / bs; q->n_keyed++) {
		uint64_t uid = kv_cache_put(s->pool, q->kv.blocks[q->n_keyed], q->cache_uid,
					    q->prompt + (size_t)q->n_keyed * bs);
		if (!uid) {
			q->n_keyed = INT32_MAX; /* no cache tables: stop keying this one */
			return;
		}
		q->cache_uid = uid;
	}
}

/* Tokens of a first chunk for q if it took k cached blocks, and the blocks of the pool
 * that admitting it so costs now (new blocks + idle ones taken). */
static int32_t chunk_after_cache(const struct sched *s, struct sched_seq *q, int32_t k,
				 int32_t n_idle, int32_t budget, int32_t *cost)
{
	int32_t saved = q->n_computed;
	q->n_computed = k * kv_block_size(s->pool);
	ckpt_targets(s, q); /* the chunk ends at a checkpoint boundary */
	int32_t c = ctx_tokens(s, q, budget);
	*cost = kv_blocks_for(s->pool, (int64_t)q->n_computed + c) - k + n_idle;
	if (s->win_blocks > 0) {
		/* window_drop gives back at once the taken blocks behind the window: what it
		 * then holds bounds what it costs */
		int64_t lo = (int64_t)q->n_computed - s->cfg.kv_window + 1;
		int32_t held = kv_blocks_for(s->pool, (int64_t)q->n_computed + c) -
			       (lo > 0 ? (int32_t)(lo / kv_block_size(s->pool)) : 0);
		if (held < *cost)
			*cost = held;
	}
	q->n_computed = saved;
	return c;
}

/* ---- samples ---- */

/* The family size q still has to fork into (1 when none). */
static int32_t family(const struct sched_seq *q)
{
	return !q->forked && q->n_samples > 1 ? q->n_samples : 1;
}

/* Blocks q may ever hold, with the family it forks into: the prompt's full blocks are
 * shared by all samples, everything after them is each sample's own. */
static int64_t family_blocks(const struct sched *s, const struct sched_seq *q)
{
	return sched_blocks_needed(s, q->n_kv_max, q->n_prompt, family(q));
}

int64_t sched_blocks_needed(const struct sched *s, int64_t n_positions, int32_t n_prompt,
			    int32_t n_samples)
{
	int64_t full = kv_blocks_for(s->pool, n_positions);
	int32_t n = n_samples > 1 ? n_samples : 1;
	if (s->win_blocks > 0 && full > s->win_blocks) /* the window bounds what each holds */
		return (int64_t)n * s->win_blocks;
	if (n == 1)
		return full;
	int64_t shared = n_prompt / kv_block_size(s->pool);
	if (shared > full)
		shared = full;
	return shared + n * (full - shared);
}

/* Sliding window on every layer: gives back q's blocks that lie wholly before the window
 * of its next position n_computed, i.e. that end at or before n_computed - W + 1. */
static void window_drop(struct sched *s, struct sched_seq *q)
{
	int64_t lo = (int64_t)q->n_computed - s->cfg.kv_window + 1;
	if (s->cfg.kv_window <= 0 || lo < kv_block_size(s->pool))
		return;
	kv_drop_front(s->pool, &q->kv, (int32_t)(lo / kv_block_size(s->pool)));
}

/* Batch slots the running sequences hold, their pending siblings included. */
static int32_t slots_used(const struct sched *s)
{
	int32_t n = 0;
	for (int32_t i = 0; i < s->n_run; i++)
		n += family(s->run[i]);
	return n;
}

/* 1 when q's next write (position n_computed) falls into a block it shares. */
static int32_t cow_need(const struct sched *s, const struct sched_seq *q)
{
	int32_t bs = kv_block_size(s->pool);
	int32_t i = q->n_computed / bs;
	if (q->n_computed % bs == 0 || i >= q->kv.n)
		return 0;
	return kv_refcount(s->pool, q->kv.blocks[i]) > 1;
}

/* Gives q a private copy of the shared block its step writes into first. */
static enum bg_status cow_step(struct sched *s, struct sched_seq *q, struct bg_err *err)
{
	if (!cow_need(s, q))
		return BG_OK;
	int32_t i = q->n_computed / kv_block_size(s->pool), from = -1;
	enum bg_status st = kv_make_private(s->pool, &q->kv, i, &from, err);
	if (st != BG_OK)
		return st;
	q->step_cow_src = from;
	q->step_cow_dst = q->kv.blocks[i];
	return BG_OK;
}

enum bg_status sched_fork(struct sched *s, struct sched_seq *parent, struct sched_seq *child,
			  struct bg_err *err)
{
	BG_ASSERT(parent->state == SCHED_RUNNING && !parent->in_ctx && parent->n_samples > 1);
	BG_ASSERT(child->state == SCHED_NEW || child->state == SCHED_DONE);
	BG_ASSERT(s->n_run < s->cfg.max_batch_size);
	enum bg_status st = kv_share(s->pool, &child->kv, &parent->kv, parent->kv.n, err);
	if (st != BG_OK)
		return st;
	child->state = SCHED_RUNNING;
	child->n_tokens = parent->n_tokens;
	child->n_computed = parent->n_computed;
	child->n_kv_max = parent->n_kv_max;
	child->in_ctx = false;
	child->swapped = child->recomputing = false;
	child->n_swapped_blocks = 0;
	child->preemptions = 0;
	child->n_cached = parent->n_cached;
	child->n_keyed = parent->n_keyed;
	child->cache_uid = parent->cache_uid;
	child->n_samples = 1;
	child->ckpt_lo = child->ckpt_hi = 0;
	child->save_slot = -1;
	child->forked = true;
	child->start_stamp = ++s->clock;
	clear_step(child);
	run_push(s, child);
	parent->forked = true;
	return BG_OK;
}

/* Pauses running q: on_pause may swap it out; its blocks go back to the pool. */
static enum bg_status pause_seq(struct sched *s, struct sched_seq *q, struct bg_err *err)
{
	BG_ASSERT(preempts(s));
	if (s->cfg.policy == SCHED_ADAPTIVE)
		s->budget = s->budget - SCHED_AIMD_DECREASE > s->budget_lo
				? s->budget - SCHED_AIMD_DECREASE
				: s->budget_lo;
	bool swapped = false;
	/* a copy-on-write planned this step has not been made: what to save is still in
	 * the source block */
	int32_t cow_i = q->n_computed / kv_block_size(s->pool);
	if (q->step_cow_src >= 0)
		q->kv.blocks[cow_i] = q->step_cow_src;
	/* a table with dropped blocks resumes by recompute (the swap unit is a whole table) */
	if (q->n_computed > 0 && s->cfg.on_pause && q->kv.n_dropped == 0 &&
	    s->cfg.n_state_slots == 0) /* a state is not swapped: "Recurrent state" */
		swapped = s->cfg.on_pause(s->cfg.pause_user, q);
	if (q->step_cow_src >= 0)
		q->kv.blocks[cow_i] = q->step_cow_dst;
	if (swapped) {
		q->swapped = true;
		q->n_swapped_blocks = kv_blocks_for(s->pool, q->n_computed);
	} else {
		q->swapped = false;
		q->n_swapped_blocks = 0;
		q->n_computed = 0;
		q->in_ctx = true;
		q->recomputing = true;
	}
	kv_release(s->pool, &q->kv);
	slot_give(s, q);
	q->n_keyed = 0;
	q->cache_uid = 0;
	q->ckpt_lo = q->ckpt_hi = 0;
	q->state = SCHED_PAUSED;
	q->preemptions++;
	clear_step(q);
	return paused_insert(s, q, err);
}

/* Tokens q may hold at once: n_kv_max, or what its window lets it hold. */
static int64_t promise(const struct sched *s, const struct sched_seq *q)
{
	int64_t w = (int64_t)s->win_blocks * kv_block_size(s->pool);
	return w > 0 && w < q->n_kv_max ? w : q->n_kv_max;
}

/* Tokens promised to the running sequences: the sum of their promise. */
static int64_t promised_tokens(const struct sched *s)
{
	int64_t r = 0;
	for (int32_t i = 0; i < s->n_run; i++)
		r += promise(s, s->run[i]);
	return r;
}

int64_t sched_token_budget(const struct sched *s)
{
	return s->budget;
}

/* A forked beam's share of its family's future blocks: the family never holds more than
 * the prompt's full blocks + width * (full - those), and every beam counts the blocks
 * past the prompt that it holds alone (refcount 1) as already its own. Summed over the
 * beams, this is at least what the family may still take from the pool. */
static int64_t gang_reserve(const struct sched *s, const struct sched_seq *q)
{
	int64_t full = kv_blocks_for(s->pool, q->n_kv_max);
	int64_t shared = q->n_prompt / kv_block_size(s->pool);
	if (shared > full)
		shared = full;
	int64_t own = 0;
	for (int32_t b = (int32_t)shared; b < q->kv.n; b++)
		own += kv_refcount(s->pool, q->kv.blocks[b]) == 1;
	return full - shared - own;
}

int64_t sched_reserved_blocks(const struct sched *s)
{
	int64_t r = 0;
	for (int32_t i = 0; i < s->n_run; i++) {
		const struct sched_seq *q = s->run[i];
		if (q->gang && q->forked) {
			r += gang_reserve(s, q);
			continue;
		}
		int64_t full = family_blocks(s, q), held = kv_table_held(&q->kv);
		if (full > held)
			r += full - held;
		r += cow_need(s, q);
	}
	return r;
}

static enum bg_status step_static(struct sched *s, bool allow_admit, struct sched_plan *plan,
				  struct bg_err *err)
{
	if (s->n_run == 0) {
		s->static_size = 0;
		int64_t avail = kv_n_free(s->pool);
		while (allow_admit && s->wq_n > 0 &&
		       slots_used(s) + family(wq_at(s, 0)) <= s->cfg.max_batch_size) {
			struct sched_seq *q = wq_at(s, 0);
			int32_t n_idle, k = cache_peek(s, q, &n_idle);
			int64_t full = family_blocks(s, q) - (s->win_blocks ? 0 : k - n_idle);
			if (full > avail)
				break;
			avail -= full;
			wq_pop(s);
			q->state = SCHED_RUNNING;
			q->start_stamp = ++s->clock;
			q->step_new = true;
			run_push(s, q);
			plan->n_new++;
			/* taken now, so that the next members' lookups count these blocks
			 * as shared, not idle */
			enum bg_status st = static_take(s, q, err);
			if (st != BG_OK)
				return st;
		}
		s->static_size = slots_used(s);
	}
	bool any_ctx = false;
	for (int32_t i = 0; i < s->n_run; i++) {
		struct sched_seq *q = s->run[i];
		enum bg_status st = q->cache_wait ? static_take(s, q, err) : BG_OK;
		if (st != BG_OK)
			return st;
		any_ctx |= q->in_ctx;
		plan->n_held += q->cache_wait;
	}
	int32_t budget = s->cfg.max_num_tokens;
	for (int32_t i = 0; i < s->n_run && budget > 0; i++) {
		struct sched_seq *q = s->run[i];
		int32_t c = q->cache_wait ? 0
			    : any_ctx	  ? (q->in_ctx ? ctx_tokens(s, q, budget) : 0)
					  : q->n_tokens > q->n_computed &&
					    q->n_tokens <= q->n_kv_max; /* 0: held, or done */
		if (c == 0)
			continue;
		/* The admission reservation guarantees these blocks. */
		enum bg_status st = kv_grow(s->pool, &q->kv, (int64_t)q->n_computed + c, err);
		if (st == BG_OK)
			st = cow_step(s, q, err);
		if (st == BG_ERR_CAPACITY)
			BG_ASSERT(!"static reservation broken");
		if (st != BG_OK)
			return st;
		set_step(q, c);
		budget -= c;
	}
	plan->empty_gen_slots = any_ctx ? 0 : s->static_size - s->n_run;
	return BG_OK;
}

static enum bg_status step_continuous(struct sched *s, bool allow_admit, struct sched_plan *plan,
				      struct bg_err *err)
{
	enum bg_status st;
	int32_t budget = s->cfg.max_num_tokens;
	/* Micro-batch plan for the running set: generation steps first (they are cheap and
	 * keep latency flat), then context chunks FCFS with what the budget leaves. */
	for (int32_t i = 0; i < s->n_run && budget > 0; i++) {
		struct sched_seq *q = s->run[i];
		/* else a held beam, or (overlap) a sequence whose last token is drawn */
		if (!q->in_ctx && q->n_tokens > q->n_computed && q->n_tokens <= q->n_kv_max) {
			q->step_tokens = 1;
			budget--;
		}
	}
	for (int32_t i = 0; i < s->n_run && budget > 0; i++) {
		struct sched_seq *q = s->run[i];
		if (q->in_ctx) {
			q->step_tokens = ctx_tokens(s, q, budget);
			budget -= q->step_tokens;
		}
	}
	/* Capacity: blocks for each planned step, oldest first; under max-util the youngest
	 * running sequences make room. */
	for (int32_t i = 0; i < s->n_run; i++) {
		struct sched_seq *q = s->run[i];
		if (q->state != SCHED_RUNNING || q->step_tokens == 0)
			continue;
		int64_t upto = (int64_t)q->n_computed + q->step_tokens;
		BG_ASSERT(upto <= q->n_kv_max);
		while (kv_blocks_missing(s->pool, &q->kv, upto) + cow_need(s, q) > kv_n_free(s->pool)) {
			BG_ASSERT(preempts(s)); /* no-evict reserved them */
			struct sched_seq *v = NULL;
			for (int32_t j = s->n_run - 1; j >= 0 && !v; j--)
				if (s->run[j]->state == SCHED_RUNNING && !s->run[j]->gang)
					v = s->run[j];
			/* gang families were admitted with their blocks reserved */
			BG_ASSERT(v && "beam family short of its reserved blocks");
			budget += v->step_tokens;
			if ((st = pause_seq(s, v, err)) != BG_OK)
				return st;
			plan->n_paused_now++;
			if (v == q)
				break;
		}
		if (q->state != SCHED_RUNNING)
			continue;
		if ((st = kv_grow(s->pool, &q->kv, upto, err)) != BG_OK ||
		    (st = cow_step(s, q, err)) != BG_OK)
			return st;
		set_step(q, q->step_tokens);
	}
	run_compact(s);
	/* A pause means memory is short: neither resume nor admit in the same step (what was
	 * just freed would thrash). */
	if (plan->n_paused_now > 0)
		return BG_OK;
	/* Paused sequences resume before any new admission, oldest input first. */
	while (s->n_paused > 0 && slots_used(s) + family(s->paused[0]) <= s->cfg.max_batch_size &&
	       budget > 0) {
		struct sched_seq *q = s->paused[0];
		int32_t n_idle = 0, cost = 0, k = q->n_computed == 0 ? cache_peek(s, q, &n_idle) : 0;
		if (q->n_computed == 0 && held_for_writer(s, q, k)) {
			plan->n_held = 1; /* resumes in order: nothing behind it either */
			break;
		}
		int32_t c = q->n_computed == 0 ? chunk_after_cache(s, q, k, n_idle, budget, &cost)
					       : ctx_tokens(s, q, budget);
		if (!q->in_ctx)
			c = 1;
		if (q->n_computed != 0)
			cost = kv_blocks_for(s->pool, (int64_t)q->n_computed + c);
		if (c == 0)
			break;
		if (cost > kv_n_free(s->pool))
			break;
		if (q->n_computed == 0 && (st = cache_take(s, q, k, err)) != BG_OK)
			return st;
		if ((st = kv_grow(s->pool, &q->kv, (int64_t)q->n_computed + c, err)) != BG_OK)
			return st;
		paused_remove_at(s, 0);
		q->state = SCHED_RUNNING;
		q->start_stamp = ++s->clock;
		q->step_resumed = true;
		q->step_swap_in = q->swapped && q->n_swapped_blocks > 0;
		q->swapped = false;
		set_step(q, c);
		run_push(s, q);
		budget -= c;
		plan->n_resumed++;
	}
	if (s->n_paused > 0 || !allow_admit)
		return BG_OK;
	int64_t avail = (int64_t)kv_n_free(s->pool) - sched_reserved_blocks(s);
	int64_t promised = promised_tokens(s);
	while (s->wq_n > 0 && slots_used(s) + family(wq_at(s, 0)) <= s->cfg.max_batch_size &&
	       budget > 0) {
		struct sched_seq *q = wq_at(s, 0);
		if (s->cfg.policy == SCHED_ADAPTIVE && s->n_run > 0 &&
		    promised + promise(s, q) > s->budget) {
			/* does not fit the budget: grow it while memory is not short */
			if ((int64_t)kv_n_used(s->pool) * 10 < (int64_t)kv_n_blocks(s->pool) * 9)
				s->budget = s->budget + SCHED_AIMD_INCREASE < s->budget_hi
						? s->budget + SCHED_AIMD_INCREASE
						: s->budget_hi;
			break;
		}
		int32_t n_idle, cost = 0, k = cache_peek(s, q, &n_idle);
		if (held_for_writer(s, q, k)) {
			plan->n_held = 1; /* FCFS: nothing behind it passes it */
			break;
		}
		int32_t c = chunk_after_cache(s, q, k, n_idle, budget, &cost);
		if (c == 0)
			break;
		if (s->cfg.policy == SCHED_NO_EVICT || q->gang) {
			int64_t full = family_blocks(s, q) - (s->win_blocks ? 0 : k - n_idle);
			if (full > avail)
				break;
			avail -= full;
		}
		if (cost > kv_n_free(s->pool))
			break;
		if ((st = admit_take(s, q, k, err)) != BG_OK)
			return st;
		if ((st = kv_grow(s->pool, &q->kv, (int64_t)q->n_computed + c, err)) != BG_OK)
			return st;
		wq_pop(s);
		q->state = SCHED_RUNNING;
		q->start_stamp = ++s->clock;
		q->step_new = true;
		set_step(q, c);
		run_push(s, q);
		budget -= c;
		plan->n_new++;
		promised += promise(s, q);
	}
	return BG_OK;
}

enum bg_status sched_step(struct sched *s, bool allow_admit, struct sched_plan *plan,
			  struct bg_err *err)
{
	memset(plan, 0, sizeof *plan);
	for (int32_t i = 0; i < s->n_run; i++)
		clear_step(s->run[i]);
	for (int32_t i = 0; i < s->n_paused; i++)
		clear_step(s->paused[i]);
	enum bg_status st = s->cfg.policy == SCHED_STATIC
				? step_static(s, allow_admit, plan, err)
				: step_continuous(s, allow_admit, plan, err);
	for (int32_t i = 0; i < s->n_run; i++) {
		struct sched_seq *q = s->run[i];
		if (q->step_tokens == 0)
			continue;
		s->plan[plan->n++] = q;
		if (q->step_ctx) {
			plan->n_ctx++;
			plan->n_ctx_tokens += q->step_tokens;
		} else {
			plan->n_gen++;
			plan->n_gen_tokens += q->step_tokens;
		}
	}
	plan->seqs = s->plan;
	plan->token_budget = s->budget;
	plan->promised_tokens = promised_tokens(s);
	plan->n_running = s->n_run;
	plan->n_paused = s->n_paused;
	plan->n_waiting = s->wq_n;
	return st;
}

void sched_advance(struct sched *s, struct sched_seq *q, bool appended)
{
	BG_ASSERT(q->state == SCHED_RUNNING && q->step_tokens > 0);
	q->n_computed += q->step_tokens;
	BG_ASSERT(q->n_computed <= q->n_tokens);
	cache_put_full(s, q); /* before window_drop: it keys blocks the window may pass */
	q->save_slot = -1;
	int32_t bs = kv_block_size(s->pool), b = q->n_computed / bs;
	if (s->cfg.n_checkpoints > 0 && q->in_ctx && q->n_computed % bs == 0 && b > 0 &&
	    (b == q->ckpt_lo || b == q->ckpt_hi) && q->n_keyed == b)
		ckpt_save(s, q, b); /* n_keyed == b: cache_uid names these b blocks */
	window_drop(s, q);
	if (appended) {
		BG_ASSERT(q->n_computed == q->n_tokens);
		q->n_tokens++;
		q->in_ctx = false;
		q->recomputing = false;
	}
	q->step_tokens = 0;
}

void sched_append(struct sched *s, struct sched_seq *q)
{
	(void)s;
	BG_ASSERT(q->state == SCHED_RUNNING && q->n_computed == q->n_tokens &&
		  q->n_tokens < q->n_kv_max + 1);
	q->n_tokens++;
	q->in_ctx = false;
	q->recomputing = false;
}

enum bg_status sched_beam_reorder(struct sched *s, struct sched_seq *const *seqs, int32_t n_old,
				  const int32_t *parent, int32_t n_new, struct bg_err *err)
{
	BG_ASSERT(n_new >= 0 && n_new <= n_old && n_old <= 64);
	if (n_new == 0) {
		for (int32_t i = 0; i < n_old; i++) {
			kv_release(s->pool, &seqs[i]->kv);
			seqs[i]->n_tokens = seqs[i]->n_computed;
		}
		return BG_OK;
	}
	struct kv_table nt[64];
	memset(nt, 0, sizeof nt);
	for (int32_t j = 0; j < n_new; j++) {
		const struct sched_seq *p = seqs[parent[j]];
		BG_ASSERT(parent[j] >= 0 && parent[j] < n_old && p->state == SCHED_RUNNING &&
			  p->n_computed == seqs[parent[0]]->n_computed);
		enum bg_status st = kv_share(s->pool, &nt[j], &p->kv, p->kv.n, err);
		if (st != BG_OK) {
			for (int32_t k = 0; k <= j; k++) {
				kv_release(s->pool, &nt[k]);
				kv_table_free(&nt[k]);
			}
			return st;
		}
	}
	int32_t n_computed = seqs[parent[0]]->n_computed, n_tokens = seqs[parent[0]]->n_tokens;
	for (int32_t i = 0; i < n_old; i++)
		kv_release(s->pool, &seqs[i]->kv);
	for (int32_t j = 0; j < n_old; j++) {
		struct sched_seq *q = seqs[j];
		BG_ASSERT(q->state == SCHED_RUNNING);
		if (j < n_new) {
			kv_table_free(&q->kv);
			q->kv = nt[j];
			q->n_computed = n_computed;
			q->n_tokens = n_tokens;
			q->in_ctx = false;
		} else {
			q->n_tokens = q->n_computed; /* no beam: held, with nothing to feed */
		}
	}
	return BG_OK;
}

void sched_finish(struct sched *s, struct sched_seq *q)
{
	switch (q->state) {
	case SCHED_RUNNING: {
		int32_t j = 0;
		for (int32_t i = 0; i < s->n_run; i++)
			if (s->run[i] != q)
				s->run[j++] = s->run[i];
		BG_ASSERT(j == s->n_run - 1);
		s->n_run = j;
		slot_give(s, q);
		break;
	}
	case SCHED_PAUSED: {
		int32_t i = 0;
		while (i < s->n_paused && s->paused[i] != q)
			i++;
		BG_ASSERT(i < s->n_paused);
		paused_remove_at(s, i);
		break;
	}
	case SCHED_WAITING: wq_remove(s, q); break;
	case SCHED_NEW:
	case SCHED_DONE: break;
	}
	release_seq(s, q);
	q->state = SCHED_DONE;
	q->step_tokens = 0;
}

int32_t sched_n_running(const struct sched *s)
{
	return s->n_run;
}
int32_t sched_n_paused(const struct sched *s)
{
	return s->n_paused;
}
int32_t sched_n_waiting(const struct sched *s)
{
	return s->wq_n;
}
struct sched_seq *const *sched_running(const struct sched *s)
{
	return s->run;
}
struct sched_seq *const *sched_paused(const struct sched *s)
{
	return s->paused;
}
struct sched_seq *sched_waiting_at(const struct sched *s, int32_t i)
{
	return wq_at(s, i);
}
