/* test_scheduler: the capacity + micro-batch scheduler driven by random workloads with no
 * backend. A simulated KV memory tags every slot with (sequence, position) when a step
 * "writes" it, so the test also proves that block tables never hand a sequence's written
 * KV to someone else, and that swap-out/in restores it. Invariants after every step:
 * no block owned twice, used + free = total, scheduled = ctx + gen, batch size and token
 * budget respected, FCFS admission, no-evict/static never pause, max-util pauses only the
 * most recently started, paused sequences resume before new admissions, static runs in
 * lockstep batches. With block reuse on, prompts come from a few families that share
 * prefixes and a prompt slot's tag is its content (a hash of the prompt up to it), so a
 * block another sequence computed may be read exactly when it holds the same prefix;
 * a step never writes into a block held by more than one table. */
#include "check.h"
#include "engine/scheduler.h"

#include <stdint.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

struct sim_seq {
	struct sched_seq q;
	int id;
	int32_t n_prompt;
	int32_t target_out; /* stops after this many tokens (or at n_kv_max + 1 tokens) */
	int32_t n_out;
	bool done;
	int32_t *swap; /* tags of the swapped-out positions */
	int32_t ptok[64], ptag[64]; /* [n_prompt] prompt tokens, content tags */
};

struct sim {
	struct kv_pool *pool;
	int32_t *mem; /* [n_blocks * block_size] tag = id * 4096 + pos + 1; 0 = never written */
	int32_t bs;
	bool swap;
	int n_swapouts, n_swapins, bad;
};

static int32_t tag(const struct sim_seq *s, int32_t pos)
{
	return pos < s->n_prompt ? s->ptag[pos] : s->id * 4096 + pos + 1;
}

static int32_t *slot(struct sim *sm, const struct sched_seq *q, int32_t pos)
{
	return &sm->mem[(size_t)q->kv.blocks[pos / sm->bs] * sm->bs + pos % sm->bs];
}

static bool sim_pause(void *user, struct sched_seq *q)
{
	struct sim *sm = user;
	struct sim_seq *s = q->user;
	if (!sm->swap)
		return false;
	free(s->swap);
	s->swap = malloc((size_t)q->n_computed * sizeof *s->swap);
	for (int32_t p = 0; p < q->n_computed; p++)
		s->swap[p] = *slot(sm, q, p);
	sm->n_swapouts++;
	return true;
}

struct cfg {
	enum sched_policy policy;
	bool swap;
	bool chunked;
	int32_t max_bs, max_tokens, n_blocks, bs;
	bool cache;
	int32_t window; /* sched_config.kv_window */
	int32_t slots;	/* sched_config.n_state_slots */
	int32_t ckpts;	/* sched_config.n_checkpoints */
};

static void run_one(const struct cfg *c, int n_req)
{
	struct sim sm = {.bs = c->bs, .swap = c->swap};
	struct bg_err err = {0};
	CHECK(kv_pool_create(c->n_blocks, c->bs, &sm.pool, &err) == BG_OK, "pool");
	sm.mem = calloc((size_t)c->n_blocks * c->bs, sizeof *sm.mem);
	struct sched_config sc = {.policy = c->policy,
				  .max_batch_size = c->max_bs,
				  .max_num_tokens = c->max_tokens,
				  .chunked_context = c->chunked,
				  .on_pause = sim_pause,
				  .pause_user = &sm,
				  .prefix_cache = c->cache,
				  .kv_window = c->window,
				  .n_state_slots = c->slots,
				  .n_checkpoints = c->ckpts};
	struct sched *s = NULL;
	CHECK(sched_create(&sc, sm.pool, &s, &err) == BG_OK, "sched: %s", err.msg);
	const int32_t max_seq = 96;
	/* with a window, what a sequence holds at once (scheduler.h) */
	const int32_t win_blocks =
	    c->window ? kv_blocks_for(sm.pool, c->window - 2 + c->bs + c->max_tokens) : 0;
	int n_long = 0; /* requests that fit the pool only through the window */
	int64_t n_cached_tokens = 0;
	struct sim_seq *seqs = calloc((size_t)n_req, sizeof *seqs);
	int n = 0;
	/* Skewed lengths: mostly short outputs, some long; prompts 1..60. Requests the
	 * engine would reject (too big for the pool, or a whole prompt over the budget with
	 * chunking off) are left out here. */
	while (n < n_req) {
		struct sim_seq *q = &seqs[n];
		q->id = n + 1;
		q->n_prompt = 1 + (int32_t)rnd(60);
		int32_t max_tokens = rnd(4) == 0 ? 20 + (int32_t)rnd(40) : 1 + (int32_t)rnd(8);
		int32_t n_max =
		    q->n_prompt + max_tokens < max_seq ? q->n_prompt + max_tokens : max_seq;
		q->target_out = 1 + (int32_t)rnd((uint32_t)max_tokens);
		q->q.order = n;
		q->q.n_tokens = q->n_prompt;
		q->q.n_kv_max = n_max - 1;
		q->q.user = q;
		/* family f's tokens up to a random cut, then a random tail; the tag of position
		 * p hashes tokens [0, p] (negative: apart from generated positions' tags) */
		int32_t f = (int32_t)rnd(3), cut = (int32_t)rnd(64);
		uint32_t h = 2166136261u;
		for (int32_t k = 0; k < q->n_prompt; k++) {
			q->ptok[k] = k < cut ? f * 1000 + k : 5000 + (int32_t)rnd(4);
			h = (h ^ (uint32_t)q->ptok[k]) * 16777619u;
			q->ptag[k] = -(int32_t)(1 + (h & 0x3fffffff));
		}
		q->q.prompt = q->ptok;
		q->q.n_prompt = q->n_prompt;
		q->q.cache_lookup = rnd(5) != 0;
		if (q->n_prompt >= max_seq ||
		    sched_blocks_needed(s, n_max - 1, q->n_prompt, 1) > c->n_blocks ||
		    (!c->chunked && q->n_prompt > c->max_tokens))
			continue;
		n_long += kv_blocks_for(sm.pool, n_max - 1) > c->n_blocks;
		n++;
	}
	/* recurrent state: what each slot holds, as (the tag of the last position it has seen:
	 * a hash of the prompt up to it, or sequence and position past the prompt, the number
	 * of positions) */
	int32_t slot_tag[512] = {0}, slot_pos[512] = {0};
	int64_t n_restores = 0, n_saves = 0;
	int next_enq = 0, n_done = 0, violations = 0;
	int64_t last_admitted = -1, total_pauses = 0, total_sched = 0, iters = 0;
	int64_t static_batch_left = 0;
	char why[256];
#define V(cond, ...)                                                                               \
	do {                                                                                       \
		if (!(cond) && violations++ < 5) {                                                 \
			fprintf(stderr, "policy %d swap %d chunk %d iter %lld: ", c->policy,       \
				c->swap, c->chunked, (long long)iters);                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)
	while (n_done < n && iters < 200000) {
		/* bounded look-ahead: keep up to 8 waiting */
		while (next_enq < n && sched_n_waiting(s) < 8) {
			if (sched_enqueue(s, &seqs[next_enq].q, &err) != BG_OK)
				V(false, "enqueue: %s", err.msg);
			next_enq++;
		}
		bool was_running[4096] = {0};
		int64_t max_stamp_before = 0;
		for (int32_t i = 0; i < sched_n_running(s); i++) {
			struct sim_seq *q = sched_running(s)[i]->user;
			was_running[q->id] = true;
		}
		int n_running_before = sched_n_running(s);
		struct sched_plan plan;
		bool allow = rnd(10) != 0; /* sometimes the reorder window is full */
		if (sched_step(s, allow, &plan, &err) != BG_OK) {
			V(false, "step: %s", err.msg);
			break;
		}
		iters++;
		/* ---- invariants ---- */
		V(plan.n == plan.n_ctx + plan.n_gen, "scheduled %d != ctx %d + gen %d", plan.n,
		  plan.n_ctx, plan.n_gen);
		V(plan.n_running <= c->max_bs && plan.n <= c->max_bs, "batch size %d/%d > %d",
		  plan.n_running, plan.n, c->max_bs);
		V(plan.n_ctx_tokens + plan.n_gen_tokens <= c->max_tokens, "tokens %d > %d",
		  plan.n_ctx_tokens + plan.n_gen_tokens, c->max_tokens);
		V(plan.n_gen_tokens == plan.n_gen, "a generation step is one token");
		V(plan.n > 0 || (plan.n_running == 0 && plan.n_paused == 0 &&
				 (plan.n_waiting == 0 || !allow)),
		  "no progress with work to do");
		if (c->policy != SCHED_MAX_UTIL && c->policy != SCHED_ADAPTIVE)
			V(plan.n_paused_now == 0 && plan.n_paused == 0, "%s paused a request",
			  c->policy == SCHED_STATIC ? "static" : "no-evict");
		if (plan.n_paused > 0)
			V(plan.n_new == 0, "admitted while %d paused", plan.n_paused);
		if (!allow)
			V(plan.n_new == 0, "admitted while admission was closed");
		if (c->policy == SCHED_STATIC) {
			if (plan.n_new > 0)
				V(n_running_before == 0, "static admitted into a running batch");
			V(!(plan.n_ctx > 0 && plan.n_gen > 0), "static mixed ctx and gen");
			if (plan.n_new > 0)
				static_batch_left = plan.n_running;
		}
		const struct kv_table *tabs[512];
		int nt = 0;
		for (int32_t i = 0; i < sched_n_running(s); i++) {
			struct sched_seq *q = sched_running(s)[i];
			struct sim_seq *ss = q->user;
			tabs[nt++] = &q->kv;
			if (q->step_new) {
				V(q->order > last_admitted, "FCFS broken: %lld after %lld",
				  (long long)q->order, (long long)last_admitted);
				last_admitted = q->order;
			}
			if (q->step_cached) {
				V(q->n_cached % c->bs == 0 && q->n_cached < q->n_tokens &&
				      q->n_cached <= ss->n_prompt && (c->cache || !q->n_cached) &&
				      (q->cache_lookup || !q->n_cached),
				  "cached %d of a %d-token prompt", q->n_cached, ss->n_prompt);
				n_cached_tokens += q->n_cached;
			}
			if (q->cache_wait)
				V(c->policy == SCHED_STATIC && q->kv.n == 0 && q->step_tokens == 0,
				  "seq %d waits for its cached blocks, with %d blocks, %d tokens",
				  ss->id, q->kv.n, q->step_tokens);
			if (was_running[ss->id] && q->start_stamp > max_stamp_before)
				max_stamp_before = q->start_stamp;
			if (c->window)
				V(kv_table_held(&q->kv) <= win_blocks,
				  "seq %d holds %d blocks, the window bound is %d", ss->id,
				  kv_table_held(&q->kv), win_blocks);
		}
		for (int32_t i = 0; i < sched_n_paused(s); i++) {
			struct sched_seq *q = sched_paused(s)[i];
			tabs[nt++] = &q->kv;
			V(q->kv.n == 0, "a paused sequence holds blocks");
			V(q->state_slot == -1, "a paused sequence holds state slot %d",
			  q->state_slot);
		}
		for (int32_t i = 0; i < sched_n_running(s); i++) {
			const struct sched_seq *q = sched_running(s)[i];
			V(c->slots ? q->state_slot >= 0 && q->state_slot < c->slots - c->ckpts
				   : q->state_slot == -1,
			  "running with state slot %d of %d", q->state_slot, c->slots);
			if (q->step_state_from >= 0) { /* a checkpoint taken: the caller's copy */
				V(c->ckpts && q->step_state_from >= c->slots - c->ckpts &&
				      q->step_state_from < c->slots && q->n_computed > 0,
				  "restore from slot %d at %d", q->step_state_from, q->n_computed);
				slot_tag[q->state_slot] = slot_tag[q->step_state_from];
				slot_pos[q->state_slot] = slot_pos[q->step_state_from];
				n_restores++;
			}
			for (int32_t j = 0; j < i && c->slots; j++)
				V(sched_running(s)[j]->state_slot != q->state_slot,
				  "two running sequences hold state slot %d", q->state_slot);
		}
		V(kv_check(sm.pool, tabs, nt, why, sizeof why), "kv: %s", why);
		V(kv_n_used(sm.pool) + kv_n_free(sm.pool) == c->n_blocks, "used + free != total");
		if (plan.n_paused_now > 0) {
			/* victims are younger than every sequence still running */
			for (int32_t i = 0; i < sched_n_paused(s); i++) {
				struct sched_seq *q = sched_paused(s)[i];
				struct sim_seq *ss = q->user;
				if (!was_running[ss->id])
					continue;
				for (int32_t j = 0; j < sched_n_running(s); j++)
					V(sched_running(s)[j]->start_stamp < q->start_stamp,
					  "paused %d is older than running one", ss->id);
			}
			V(plan.n_new == 0 && plan.n_resumed == 0,
			  "admitted/resumed in a pause step");
			total_pauses += plan.n_paused_now;
		}
		/* ---- run the plan on the simulated memory ---- */
		int32_t tok_sum = 0;
		for (int32_t i = 0; i < plan.n; i++) {
			struct sched_seq *q = plan.seqs[i];
			struct sim_seq *ss = q->user;
			tok_sum += q->step_tokens;
			V(q->state == SCHED_RUNNING && q->step_tokens > 0, "bad entry");
			V(q->kv.n >= kv_blocks_for(sm.pool, q->n_computed + q->step_tokens),
			  "table too short");
			V(q->step_samples == (q->n_computed + q->step_tokens == q->n_tokens),
			  "step_samples");
			int32_t end = q->n_computed + q->step_tokens;
			if (!c->chunked && q->step_ctx && !q->recomputing && !c->ckpts)
				V(q->n_computed == q->n_cached && end == q->n_tokens,
				  "chunking off but a prompt was split");
			if (!c->chunked && q->step_ctx && !q->recomputing && c->ckpts)
				V(end == q->n_tokens ||
				      (end % c->bs == 0 &&
				       (end / c->bs == q->ckpt_lo || end / c->bs == q->ckpt_hi)),
				  "chunking off, a prompt split at %d (checkpoints at blocks %d, "
				  "%d)",
				  end, q->ckpt_lo, q->ckpt_hi);
			if (q->step_swap_in) {
				sm.n_swapins++;
				V(ss->swap && q->n_computed > 0, "swap-in without a swap-out");
				for (int32_t p = 0; p < q->n_computed; p++)
					*slot(&sm, q, p) = ss->swap[p];
				free(ss->swap);
				ss->swap = NULL;
			}
			/* what was written before must still be there: with a window, the
			 * positions the step reads, and only those blocks may be dropped */
			int32_t lo = c->window && q->n_computed - c->window + 1 > 0
					 ? q->n_computed - c->window + 1
					 : 0;
			V(q->kv.n_dropped <= lo / c->bs, "seq %d dropped %d blocks, window from %d",
			  ss->id, q->kv.n_dropped, lo);
			if (c->window && q->step_tokens == 1)
				V(q->kv.n_dropped == lo / c->bs,
				  "seq %d kept %d blocks behind its window (from %d)", ss->id,
				  lo / c->bs - q->kv.n_dropped, lo);
			for (int32_t p = lo; p < q->n_computed; p++)
				if (*slot(&sm, q, p) != tag(ss, p)) {
					V(false, "seq %d pos %d overwritten", ss->id, p);
					break;
				}
			for (int32_t p = q->n_computed; p < q->n_computed + q->step_tokens; p++) {
				V(kv_refcount(sm.pool, q->kv.blocks[p / sm.bs]) == 1,
				  "seq %d writes pos %d into a shared block", ss->id, p);
				*slot(&sm, q, p) = tag(ss, p);
			}
			if (c->slots) { /* the backend's state: zeroed at 0, else carried */
				int32_t k = q->state_slot;
				if (q->n_computed > 0)
					V(slot_tag[k] == tag(ss, q->n_computed - 1) &&
					      slot_pos[k] == q->n_computed,
					  "seq %d at %d finds slot %d holding tag %d at %d", ss->id,
					  q->n_computed, k, slot_tag[k], slot_pos[k]);
				slot_tag[k] = tag(ss, end - 1);
				slot_pos[k] = end;
			}
		}
		V(tok_sum == plan.n_ctx_tokens + plan.n_gen_tokens, "token sums");
		total_sched += plan.n;
		for (int32_t i = 0; i < plan.n; i++) {
			struct sched_seq *q = plan.seqs[i];
			struct sim_seq *ss = q->user;
			bool appended = q->step_samples;
			sched_advance(s, q, appended);
			if (q->save_slot >= 0) { /* a checkpoint: the caller copies the state */
				V(c->ckpts && q->save_slot >= c->slots - c->ckpts &&
				      q->save_slot < c->slots && q->n_computed % c->bs == 0,
				  "save into slot %d at %d", q->save_slot, q->n_computed);
				slot_tag[q->save_slot] = slot_tag[q->state_slot];
				slot_pos[q->save_slot] = slot_pos[q->state_slot];
				n_saves++;
			}
			if (!appended)
				continue;
			ss->n_out++;
			if (ss->n_out >= ss->target_out || q->n_tokens > q->n_kv_max) {
				sched_finish(s, q);
				V(q->state == SCHED_DONE && q->kv.n == 0, "finish");
				ss->done = true;
				n_done++;
				if (c->policy == SCHED_STATIC)
					static_batch_left--;
			}
		}
		if (c->policy == SCHED_STATIC && plan.n_gen > 0)
			V(plan.empty_gen_slots >= 0, "empty slots");
	}
	CHECK(n_done == n, "all %d sequences finished (%d) in %lld iterations", n, n_done,
	      (long long)iters);
	CHECK(total_sched >= n, "every sequence was scheduled (%lld entries)",
	      (long long)total_sched);
	CHECK(violations == 0, "policy %d swap %d chunk %d: %d violations", c->policy, c->swap,
	      c->chunked, violations);
	if (c->policy != SCHED_NO_EVICT && c->policy != SCHED_STATIC && c->max_bs > 1)
		/* one sequence alone always fits */
		CHECK(total_pauses > 0, "max-util (window %d) paused under pressure (%lld)", c->window,
		      (long long)total_pauses);
	if (c->slots && c->ckpts)
		CHECK(sm.n_swapouts == 0 && n_cached_tokens > 0 && n_restores > 0 &&
			  n_saves >= c->ckpts && sched_n_checkpoints(s) == c->ckpts,
		      "state checkpoints (%d): no swap (%d), reuse (%lld tokens, %lld restores, "
		      "%lld saves)",
		      c->ckpts, sm.n_swapouts, (long long)n_cached_tokens, (long long)n_restores,
		      (long long)n_saves);
	else if (c->slots)
		CHECK(sm.n_swapouts == 0 && n_cached_tokens == 0,
		      "state slots: no swap (%d) and no reuse (%lld tokens)", sm.n_swapouts,
		      (long long)n_cached_tokens);
	else if (c->swap)
		CHECK(sm.n_swapins > 0 && sm.n_swapins <= sm.n_swapouts, "swaps out %d in %d",
		      sm.n_swapouts, sm.n_swapins);
	CHECK(kv_n_free(sm.pool) == c->n_blocks, "all blocks back");
	struct kv_stats ks;
	kv_get_stats(sm.pool, &ks);
	if (c->window)
		CHECK(ks.dropped_total > 0 && n_long > 0,
		      "window %d: %lld blocks given back; %d requests longer than the pool",
		      c->window, (long long)ks.dropped_total, n_long);
	else
		CHECK(ks.dropped_total == 0, "no window, nothing dropped");
	if (c->cache && (!c->slots || c->ckpts))
		CHECK(n_cached_tokens > 0 && ks.reused_total > 0 && ks.missed_total > 0,
		      "policy %d: reuse happened (%lld tokens, %lld hits, %lld misses)",
		      c->policy, (long long)n_cached_tokens, (long long)ks.reused_total,
		      (long long)ks.missed_total);
	else
		CHECK(ks.reused_total == 0 && ks.cached_blocks == 0, "no reuse when off");
	sched_destroy(s);
	for (int i = 0; i < n; i++)
		free(seqs[i].swap);
	free(seqs);
	free(sm.mem);
	kv_pool_destroy(sm.pool);
#undef V
}

/* A hand-made case: no-evict reserves the whole future, max-util only the next step. */
static void test_admission_rules(void)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	CHECK(kv_pool_create(10, 4, &pool, &err) == BG_OK, "pool");
	for (int pol = 0; pol < 2; pol++) {
		struct sched_config sc = {.policy = pol ? SCHED_MAX_UTIL : SCHED_NO_EVICT,
					  .max_batch_size = 8,
					  .max_num_tokens = 64,
					  .chunked_context = true};
		struct sched *s = NULL;
		CHECK(sched_create(&sc, pool, &s, &err) == BG_OK, "sched");
		/* each: 4-token prompt, 16 more tokens allowed -> 19 KV positions = 5 blocks */
		struct sched_seq q[3] = {{0}};
		for (int i = 0; i < 3; i++) {
			q[i].order = i;
			q[i].n_tokens = 4;
			q[i].n_kv_max = 19;
			CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
		}
		struct sched_plan plan;
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step");
		if (pol == 0) {
			CHECK(plan.n_new == 2 && plan.n_waiting == 1,
			      "no-evict admits 2 (10 blocks / 5 each), got %d", plan.n_new);
			CHECK(sched_reserved_blocks(s) == 8, "reserved 2 x 4 more (%lld)",
			      (long long)sched_reserved_blocks(s));
		} else {
			CHECK(plan.n_new == 3 && plan.n_waiting == 0,
			      "max-util admits all 3 (1 block each now), got %d", plan.n_new);
		}
		CHECK(plan.n_ctx == plan.n && plan.n_ctx_tokens == 4 * plan.n, "all context");
		for (int32_t i = 0; i < plan.n; i++)
			sched_advance(s, plan.seqs[i], true);
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step 2");
		CHECK(plan.n_gen == plan.n && plan.n_gen_tokens == plan.n, "all generation");
		sched_destroy(s);
		CHECK(kv_n_free(pool) == 10, "destroy releases blocks");
	}
	kv_pool_destroy(pool);
}

/* The hand-derived reuse cases' setup: a pool of n_blocks blocks of bs tokens and a
 * scheduler over it with the prefix cache on, chunked context, up to 8 sequences. */
static struct sched *cache_sched(int32_t n_blocks, int32_t bs, enum sched_policy policy,
				 int32_t max_num_tokens, struct kv_pool **pool)
{
	struct bg_err err = {0};
	*pool = NULL;
	CHECK(kv_pool_create(n_blocks, bs, pool, &err) == BG_OK, "pool");
	struct sched_config sc = {.policy = policy,
				  .max_batch_size = 8,
				  .max_num_tokens = max_num_tokens,
				  .chunked_context = true,
				  .prefix_cache = true};
	struct sched *s = NULL;
	CHECK(sched_create(&sc, *pool, &s, &err) == BG_OK, "sched");
	return s;
}

/* Block reuse, hand-derived: pool of 10 blocks of 4 tokens, no-evict. */
static void test_cache_counts(void)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	struct sched *s = cache_sched(10, 4, SCHED_NO_EVICT, 64, &pool);
	const int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	/* A and B: the same 10-token prompt, up to 13 positions = 4 blocks; C: its first 8 */
	struct sched_seq q[3] = {{0}};
	for (int i = 0; i < 3; i++) {
		q[i] = (struct sched_seq){.order = i, .n_tokens = i == 2 ? 8 : 10, .n_kv_max = 13,
					  .prompt = tok, .n_prompt = i == 2 ? 8 : 10,
					  .cache_lookup = true};
	}
	struct sched_plan plan;
	struct kv_stats ks;
	CHECK(sched_enqueue(s, &q[0], &err) == BG_OK, "enqueue A");
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 1, "A admitted");
	kv_get_stats(pool, &ks);
	CHECK(q[0].n_cached == 0 && q[0].step_tokens == 10 && ks.reused_new == 0 &&
		  ks.missed_new == 3,
	      "A: nothing cached, 3 blocks missed (%lld)", (long long)ks.missed_new);
	sched_advance(s, &q[0], true);
	kv_get_stats(pool, &ks);
	CHECK(ks.cached_blocks == 2, "A's 2 full prompt blocks are keyed (%d)", ks.cached_blocks);
	kv_stats_reset_iter(pool);
	CHECK(sched_enqueue(s, &q[1], &err) == BG_OK, "enqueue B");
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 1, "B admitted");
	kv_get_stats(pool, &ks);
	/* B may take 2 blocks (positions up to 9 = its last token's); it computes 2 tokens */
	CHECK(q[1].n_cached == 8 && q[1].step_tokens == 2 && q[1].kv.blocks[0] == q[0].kv.blocks[0] &&
		  kv_refcount(pool, q[0].kv.blocks[1]) == 2 && ks.reused_new == 2 &&
		  ks.missed_new == 1,
	      "B: 8 tokens cached, 2 blocks reused, 1 missed (%d, %lld, %lld)", q[1].n_cached,
	      (long long)ks.reused_new, (long long)ks.missed_new);
	/* no-evict: used A 3 + B 1 new = 4; reserved A 1 + B 1 = 2 */
	CHECK(kv_n_used(pool) == 4 && sched_reserved_blocks(s) == 2, "accounting (%d used)",
	      kv_n_used(pool));
	sched_advance(s, &q[0], true);
	sched_advance(s, &q[1], true);
	sched_finish(s, &q[0]);
	sched_finish(s, &q[1]);
	kv_get_stats(pool, &ks);
	CHECK(kv_n_free(pool) == 10 && ks.idle_blocks == 2, "all free, 2 of them cached idle");
	kv_stats_reset_iter(pool);
	CHECK(sched_enqueue(s, &q[2], &err) == BG_OK, "enqueue C");
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 1, "C admitted");
	kv_get_stats(pool, &ks);
	CHECK(q[2].n_cached == 4 && q[2].step_tokens == 4 && ks.reused_new == 1 &&
		  ks.missed_new == 1 && ks.idle_blocks == 1,
	      "C (8 tokens, 2 full blocks): 1 block taken, its last 4 tokens computed");
	sched_destroy(s);
	kv_pool_destroy(pool);
}

/* First-wave dedup, hand-derived: pool of 20 blocks of 4; three requests with the same
 * 10-token prompt (2 full blocks) enqueued together. Without the hold all three are
 * admitted in step 1 and each computes the prompt (0 cached tokens). */
static void first_wave(enum sched_policy policy, int32_t max_num_tokens)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	struct sched *s = cache_sched(20, 4, policy, max_num_tokens, &pool);
	const int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	struct sched_seq q[3] = {{0}};
	for (int i = 0; i < 3; i++) {
		q[i] = (struct sched_seq){.order = i,
					  .n_tokens = 10,
					  .n_kv_max = 13,
					  .prompt = tok,
					  .n_prompt = 10,
					  .cache_lookup = true};
		CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
	}
	struct sched_plan plan;
	struct kv_stats ks;
	/* (with 6 tokens A's chunk takes the whole budget: B is not even looked at) */
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 1 &&
		  plan.n_held == (max_num_tokens > 10) && q[1].state == SCHED_WAITING,
	      "policy %d tokens %d: A admitted, B held (%d new)", policy, max_num_tokens,
	      plan.n_new);
	/* A's prompt in chunks of max_num_tokens: B waits until both blocks are keyed */
	int steps = 1;
	do {
		sched_advance(s, &q[0], q[0].step_samples);
		kv_stats_reset_iter(pool);
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step");
		steps++;
		if (plan.n_new == 0)
			CHECK(plan.n_held == 1 && q[0].n_keyed < 2, "B held at %d keyed",
			      q[0].n_keyed);
	} while (plan.n_new == 0 && steps < 10);
	kv_get_stats(pool, &ks);
	CHECK(steps == (max_num_tokens >= 10 ? 2 : 3) && plan.n_new == 2 && plan.n_held == 0 &&
		  q[1].n_cached == 8 && q[2].n_cached == 8 && q[1].step_tokens == 2 &&
		  q[1].kv.blocks[1] == q[0].kv.blocks[1] && ks.reused_new == 4 &&
		  ks.missed_new == 2,
	      "policy %d tokens %d: B and C admitted after %d steps with 8 cached tokens each "
	      "(%d, %d), 4 blocks reused, 2 missed (%lld, %lld)",
	      policy, max_num_tokens, steps, q[1].n_cached, q[2].n_cached, (long long)ks.reused_new,
	      (long long)ks.missed_new);
	sched_destroy(s);
	CHECK(kv_n_free(pool) == 20, "destroy releases blocks");
	kv_pool_destroy(pool);
}

/* A held request must start when its writer leaves before writing (cancelled), and a
 * request that does not look the cache up is never held. */
static void first_wave_writer_gone(void)
{
	struct bg_err err = {0};
	const int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	for (int part = 0; part < 2; part++) {
		struct kv_pool *pool = NULL;
		struct sched *s = cache_sched(20, 4, SCHED_NO_EVICT, part == 0 ? 6 : 64, &pool);
		struct sched_seq q[2] = {{0}};
		for (int i = 0; i < 2; i++) {
			q[i] = (struct sched_seq){.order = i,
						  .n_tokens = 10,
						  .n_kv_max = 13,
						  .prompt = tok,
						  .n_prompt = 10,
						  .cache_lookup = part == 0 || i == 0};
			CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
		}
		struct sched_plan plan;
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step 1");
		if (part == 1) {
			CHECK(plan.n_new == 2 && plan.n_held == 0,
			      "B (no lookup) is admitted beside its writer");
		} else {
			CHECK(plan.n_new == 1 && q[1].state == SCHED_WAITING, "A admitted");
			sched_advance(s, &q[0], false); /* block 0 written and keyed */
			CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 0 &&
				  plan.n_held == 1,
			      "B held: A has keyed 1 of the 2 blocks they share");
			sched_finish(s, &q[0]); /* A cancelled before its step writes block 1 */
			CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 1 &&
				  plan.n_held == 0 && q[1].state == SCHED_RUNNING &&
				  q[1].n_cached == 4,
			      "B starts once A is gone, with the block A keyed (%d cached)",
			      q[1].n_cached);
		}
		sched_destroy(s);
		CHECK(kv_n_free(pool) == 20, "destroy releases blocks");
		kv_pool_destroy(pool);
	}
}

/* Static batches, hand-derived: pool of 20 blocks of 4; A, D, B, C enqueued together, A, B
 * and C with the same 10-token prompt (2 full blocks + 2 tokens), D another; each may
 * need 13 positions = 4 blocks, so all four fit one batch (16 <= 20 reserved). B and C
 * wait inside the batch while A writes the 2 blocks, then take them: 4 blocks reused, 3 +
 * 3 + 1 + 1 = 8 missed, 10 + 10 + 2 + 2 = 24 prompt tokens computed, 3 + 3 + 1 + 1 = 8
 * blocks used; generation starts at step 3 (1: A 10, D 10; 2: B 2, C 2). Without the
 * wait all four compute their prompts in step 1: 0 reused, 12 missed, 40 tokens. With
 * max_num_tokens 6 (1: A 6; 2: A 4, D 2; 3: D 6; 4: D 2, B 2, C 2) generation starts at
 * step 5, with the same counts. */
static void static_batch(int32_t max_num_tokens)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	struct sched *s = cache_sched(20, 4, SCHED_STATIC, max_num_tokens, &pool);
	const int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	const int32_t other[10] = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
	struct sched_seq q[4] = {{0}}; /* A, D, B, C */
	for (int i = 0; i < 4; i++) {
		q[i] = (struct sched_seq){.order = i,
					  .n_tokens = 10,
					  .n_kv_max = 13,
					  .prompt = i == 1 ? other : tok,
					  .n_prompt = 10,
					  .cache_lookup = true};
		CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
	}
	struct sched_plan plan;
	struct kv_stats ks;
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 4 && plan.n_held == 2 &&
		  q[2].cache_wait && q[3].cache_wait && q[2].step_tokens == 0 && q[2].kv.n == 0 &&
		  q[0].step_tokens == (max_num_tokens < 10 ? 6 : 10),
	      "tokens %d: the batch is A, D, B, C; B and C wait for A (%d new, %d held)",
	      max_num_tokens, plan.n_new, plan.n_held);
	int steps = 1, ctx_tokens = plan.n_ctx_tokens;
	while (plan.n_ctx > 0 && steps < 10) {
		for (int32_t i = 0; i < plan.n; i++)
			sched_advance(s, plan.seqs[i], plan.seqs[i]->step_samples);
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step");
		steps++;
		ctx_tokens += plan.n_ctx_tokens;
		for (int i = 2; i < 4; i++)
			if (q[i].cache_wait)
				CHECK(q[0].in_ctx && q[0].n_keyed < 2,
				      "%c waits only while A writes", 'B' + i - 2);
	}
	kv_get_stats(pool, &ks);
	CHECK(plan.n_gen == 4 && steps == (max_num_tokens < 10 ? 5 : 3) && ctx_tokens == 24 &&
		  q[2].n_cached == 8 && q[3].n_cached == 8 && q[1].n_cached == 0 &&
		  q[2].kv.blocks[1] == q[0].kv.blocks[1] &&
		  q[3].kv.blocks[0] == q[0].kv.blocks[0] && ks.reused_total == 4 &&
		  ks.missed_total == 8 && kv_n_used(pool) == 8,
	      "tokens %d: generation after %d steps, %d prompt tokens computed, B and C cached "
	      "%d and %d tokens, %lld reused, %lld missed, %d blocks used",
	      max_num_tokens, steps, ctx_tokens, q[2].n_cached, q[3].n_cached,
	      (long long)ks.reused_total, (long long)ks.missed_total, kv_n_used(pool));
	sched_destroy(s);
	CHECK(kv_n_free(pool) == 20, "destroy releases blocks");
	kv_pool_destroy(pool);
}

/* Static reservations with a cached prefix, hand-derived: pool of 10 blocks of 4. A (a
 * 10-token prompt, up to 13 positions = 4 blocks) runs alone and leaves its 2 full prompt
 * blocks cached, idle. Then B, C and D with A's prompt: B takes the 2 idle blocks and
 * reserves 4; C and D share them and reserve 4 - 2 = 2 each: 8 <= 10, one batch of
 * three, each computing 2 tokens. (Counting the blocks as idle for all three would
 * reserve 12 and admit two.) */
static void static_cached_reservation(void)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	struct sched *s = cache_sched(10, 4, SCHED_STATIC, 64, &pool);
	const int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	struct sched_seq q[4] = {{0}}; /* A, B, C, D */
	for (int i = 0; i < 4; i++)
		q[i] = (struct sched_seq){.order = i,
					  .n_tokens = 10,
					  .n_kv_max = 13,
					  .prompt = tok,
					  .n_prompt = 10,
					  .cache_lookup = true};
	struct sched_plan plan;
	CHECK(sched_enqueue(s, &q[0], &err) == BG_OK && sched_step(s, true, &plan, &err) == BG_OK &&
		  plan.n_new == 1,
	      "A admitted");
	sched_advance(s, &q[0], true);
	sched_finish(s, &q[0]);
	for (int i = 1; i < 4; i++)
		CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 3 && plan.n_held == 0 &&
		  plan.n_ctx_tokens == 6 && q[3].n_cached == 8,
	      "B, C and D in one batch on A's cached blocks (%d admitted, %d tokens)", plan.n_new,
	      plan.n_ctx_tokens);
	sched_destroy(s);
	CHECK(kv_n_free(pool) == 10, "destroy releases blocks");
	kv_pool_destroy(pool);
}

/* A static member waits for a writer that leaves before writing (cancelled); it then
 * computes what the cache does not hold, and its reservation covers that: pool of 8
 * blocks of 4, A and B with the same 10-token prompt, 13 positions each (4 + 4 = 8). */
static void static_writer_gone(void)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	struct sched *s = cache_sched(8, 4, SCHED_STATIC, 6, &pool);
	const int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	struct sched_seq q[2] = {{0}};
	for (int i = 0; i < 2; i++) {
		q[i] = (struct sched_seq){.order = i,
					  .n_tokens = 10,
					  .n_kv_max = 13,
					  .prompt = tok,
					  .n_prompt = 10,
					  .cache_lookup = true};
		CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
	}
	struct sched_plan plan;
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 2 && plan.n_held == 1 &&
		  q[0].step_tokens == 6,
	      "A computes 6 tokens, B waits");
	sched_advance(s, &q[0], false); /* block 0 written and keyed */
	sched_finish(s, &q[0]);		/* cancelled: block 0 stays cached, idle */
	CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_held == 0 && !q[1].cache_wait &&
		  q[1].n_cached == 4 && q[1].step_tokens == 6,
	      "B takes the block A keyed and computes the rest (%d cached)", q[1].n_cached);
	for (int it = 0; it < 8 && q[1].state == SCHED_RUNNING; it++) {
		sched_advance(s, &q[1], q[1].step_samples);
		if (q[1].n_tokens > q[1].n_kv_max)
			sched_finish(s, &q[1]);
		else
			CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n == 1, "B runs");
	}
	CHECK(q[1].state == SCHED_DONE, "B ran to its end within its reservation");
	sched_destroy(s);
	kv_pool_destroy(pool);
}

/* Resuming after a pause, hand-derived: pool of 8 blocks of 2; A and B with the same
 * 5-token prompt (2 full blocks), up to 12 positions. A scratch table stands for memory
 * the scheduler does not control, to pause both and then evict the prompt's blocks.
 *   1: A computes 5 tokens (blocks T0 T1 a2); B waits for A (first wave).
 *   2: A generates at 5; B takes T0 T1 and computes 1 token (b2).   4 blocks used
 *      the scratch takes the 4 free blocks
 *   3: A at 6 needs a block: B (youngest) is paused, b2 freed; A takes it.
 *   4: A at 7; B would resume with T0 T1 + 1 block, none free.
 *   5: A at 8 needs a block, none free: A itself is paused. T0 T1 go idle.
 *      the scratch takes 4 more (a2, a3, then the idle T0 T1: evicted), then all goes back
 *   6: A resumes: nothing cached, recomputes its 9 tokens (5 blocks); B (6 tokens) would
 *      share A's 2 prompt blocks, which A writes now: B waits.
 *   7: B resumes, takes A's T0 T1 and computes positions 4 and 5.
 * Reused blocks: B's admission 2 + B's resume 2 = 4; missed: A 3 + B 1 + A 3 + B 1 = 8.
 * Without the wait B resumes in step 6 beside A and recomputes its 6 tokens (3 blocks,
 * the last 3 free ones): 2 reused, 3 + 1 + 3 + 3 = 10 missed, and in step 7 B, short
 * of a block for position 6, is paused again. */
static void resume_waits(void)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	struct sched *s = cache_sched(8, 2, SCHED_MAX_UTIL, 64, &pool);
	const int32_t tok[5] = {1, 2, 3, 4, 5};
	struct sched_seq q[2] = {{0}}; /* A, B */
	for (int i = 0; i < 2; i++) {
		q[i] = (struct sched_seq){.order = i,
					  .n_tokens = 5,
					  .n_kv_max = 12,
					  .prompt = tok,
					  .n_prompt = 5,
					  .cache_lookup = true};
		CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
	}
	struct kv_table scratch = {0};
	struct sched_plan plan;
	struct kv_stats ks;
	int32_t n_paused[8] = {0}, n_held[8] = {0}, n_resumed[8] = {0}, b_tokens[8] = {0};
	for (int it = 1; it <= 7; it++) {
		if (it == 3)
			CHECK(kv_grow(pool, &scratch, 8, &err) == BG_OK, "scratch takes 4 blocks");
		if (it == 6) {
			CHECK(kv_grow(pool, &scratch, 16, &err) == BG_OK, "scratch takes 4 more");
			kv_release(pool, &scratch);
		}
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step %d", it);
		n_paused[it] = plan.n_paused_now;
		n_held[it] = plan.n_held;
		n_resumed[it] = plan.n_resumed;
		b_tokens[it] = q[1].step_tokens;
		for (int32_t i = 0; i < plan.n; i++)
			sched_advance(s, plan.seqs[i], plan.seqs[i]->step_samples);
	}
	kv_table_free(&scratch);
	kv_get_stats(pool, &ks);
	CHECK(n_held[1] == 1 && b_tokens[2] == 1 && n_paused[3] == 1 && n_paused[5] == 1 &&
		  q[0].preemptions == 1 && q[1].preemptions == 1,
	      "steps 1-5: B waits, joins, then B and A are paused");
	CHECK(n_resumed[6] == 1 && n_held[6] == 1 && b_tokens[6] == 0 && n_resumed[7] == 1 &&
		  b_tokens[7] == 2 && q[1].n_computed == 6 &&
		  q[1].kv.blocks[1] == q[0].kv.blocks[1],
	      "step 6: A resumes, B waits for it; step 7: B resumes on A's blocks (%d, %d; %d, "
	      "%d tokens)",
	      n_resumed[6], n_held[6], n_resumed[7], b_tokens[7]);
	CHECK(ks.reused_total == 4 && ks.missed_total == 8,
	      "4 blocks reused, 8 missed (%lld, %lld)", (long long)ks.reused_total,
	      (long long)ks.missed_total);
	sched_destroy(s);
	CHECK(kv_n_free(pool) == 8, "destroy releases blocks");
	kv_pool_destroy(pool);
}

/* State checkpoints (scheduler.h), hand-derived: blocks of 4, batch 4, K checkpoint slots
 * after the 4 running ones (slots 4..). */
static struct sched *ckpt_sched(int32_t k, struct kv_pool **pool)
{
	struct bg_err err = {0};
	*pool = NULL;
	CHECK(kv_pool_create(40, 4, pool, &err) == BG_OK, "pool");
	struct sched_config sc = {.policy = SCHED_NO_EVICT,
				  .max_batch_size = 4,
				  .max_num_tokens = 64,
				  .chunked_context = true,
				  .prefix_cache = true,
				  .n_state_slots = 4 + k,
				  .n_checkpoints = k};
	struct sched *s = NULL;
	CHECK(sched_create(&sc, *pool, &s, &err) == BG_OK, "sched: %s", err.msg);
	return s;
}

static struct sched_seq ckpt_seq(int64_t order, const int32_t *tok, int32_t n)
{
	return (struct sched_seq){.order = order,
				  .n_tokens = n,
				  .n_kv_max = n + 3,
				  .prompt = tok,
				  .n_prompt = n,
				  .cache_lookup = true};
}

/* Runs every sequence of s to its first token and finishes it. */
static void ckpt_drain(struct sched *s)
{
	struct bg_err err = {0};
	struct sched_plan plan;
	for (int it = 0; it < 50 && sched_n_running(s) + sched_n_waiting(s) > 0; it++) {
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step: %s", err.msg);
		for (int32_t i = 0; i < plan.n; i++) {
			struct sched_seq *q = plan.seqs[i];
			bool done = q->step_samples;
			sched_advance(s, q, done);
			if (done)
				sched_finish(s, q);
		}
	}
}

/* A (14 tokens) and B share 10 tokens: 2 full blocks. A, admitted first, checkpoints after
 * them (its first chunk is cut at 8 tokens) while B waits; then B takes the 2 blocks and
 * the checkpoint's slot (4) and computes its last 6 tokens. K = 0: no hold, no cut, no
 * reuse. */
static void ckpt_boundary(int32_t k)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	struct sched *s = ckpt_sched(k, &pool);
	const int32_t ta[14] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
	const int32_t tb[14] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99, 98, 97, 96};
	struct sched_seq a = ckpt_seq(0, ta, 14), b = ckpt_seq(1, tb, 14);
	CHECK(sched_enqueue(s, &a, &err) == BG_OK && sched_enqueue(s, &b, &err) == BG_OK,
	      "enqueue");
	struct sched_plan plan;
	CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step 1");
	if (k == 0) {
		CHECK(plan.n_new == 2 && plan.n_held == 0 && a.step_tokens == 14 &&
			  b.step_tokens == 14 && a.ckpt_lo == 0 && b.n_cached == 0,
		      "K 0: both admitted whole, nothing cached (%d, %d)", a.step_tokens,
		      b.n_cached);
	} else {
		CHECK(plan.n_new == 1 && plan.n_held == 1 && a.ckpt_lo == 2 && a.ckpt_hi == 0 &&
			  a.step_tokens == 8 && b.state == SCHED_WAITING,
		      "A's chunk cut at its checkpoint (lo %d hi %d, %d tokens), B held", a.ckpt_lo,
		      a.ckpt_hi, a.step_tokens);
		sched_advance(s, &a, false);
		CHECK(a.save_slot == 4 && sched_n_checkpoints(s) == 1,
		      "A saves into slot 4 after 8 tokens (%d)", a.save_slot);
		CHECK(sched_step(s, true, &plan, &err) == BG_OK && plan.n_new == 1 &&
			  plan.n_held == 0 && a.step_tokens == 6 && b.n_cached == 8 &&
			  b.n_computed == 8 && b.step_state_from == 4 && b.step_tokens == 6 &&
			  b.kv.blocks[1] == a.kv.blocks[1],
		      "B takes 2 blocks and checkpoint 4 (%d cached, from %d, %d tokens)",
		      b.n_cached, b.step_state_from, b.step_tokens);
	}
	sched_destroy(s);
	kv_pool_destroy(pool);
}

/* P_i: 8 tokens (2 blocks) + a 4-token tail. pair(i): a writer and a sharer of P_i; the
 * sharer's cached tokens are returned. */
static int32_t ckpt_pair(struct sched *s, int32_t pre, int64_t *order, int32_t n)
{
	struct bg_err err = {0};
	static int32_t tok[16][12];
	static int used;
	struct sched_seq q[2];
	for (int i = 0; i < n; i++) {
		int32_t *t = tok[used++ % 16];
		for (int j = 0; j < 12; j++)
			t[j] = j < 8 ? pre * 100 + j : 5000 + used * 10 + j;
		q[i] = ckpt_seq((*order)++, t, 12);
		CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
	}
	ckpt_drain(s);
	return q[n - 1].n_cached;
}

/* LRU with K = 2: checkpoints of P1, then P2; a request of P1 takes its checkpoint (which
 * refreshes it); P3's evicts P2's, the least recently used: a request of P2 finds its 2
 * blocks cached but no checkpoint and takes nothing, one of P1 still takes 8 tokens. */
static void ckpt_lru(void)
{
	struct kv_pool *pool = NULL;
	struct sched *s = ckpt_sched(2, &pool);
	int64_t order = 0;
	CHECK(ckpt_pair(s, 1, &order, 2) == 8 && ckpt_pair(s, 2, &order, 2) == 8 &&
		  sched_n_checkpoints(s) == 2,
	      "P1's and P2's sharers took the checkpoints");
	CHECK(ckpt_pair(s, 1, &order, 1) == 8, "a P1 request takes P1's checkpoint");
	CHECK(ckpt_pair(s, 3, &order, 2) == 8, "P3's sharer took its checkpoint");
	int32_t p2[12];
	for (int j = 0; j < 12; j++)
		p2[j] = j < 8 ? 200 + j : 7000 + j;
	CHECK(kv_cache_peek(pool, p2, 2, NULL) == 2, "P2's blocks are still cached");
	int32_t c2 = ckpt_pair(s, 2, &order, 1), c1 = ckpt_pair(s, 1, &order, 1);
	CHECK(c2 == 0 && c1 == 8,
	      "P2's checkpoint was evicted (%d cached), P1's refreshed one kept (%d)", c2, c1);
	sched_destroy(s);
	kv_pool_destroy(pool);
}

/* The adaptive policy's budget, hand-derived: pool of 10 blocks of 4 = 40 tokens. */
static void test_adaptive(void)
{
	struct kv_pool *pool = NULL;
	struct bg_err err = {0};
	CHECK(kv_pool_create(10, 4, &pool, &err) == BG_OK, "pool");
	struct sched_config sc = {.policy = SCHED_ADAPTIVE,
				  .max_batch_size = 8,
				  .max_num_tokens = 64,
				  .chunked_context = true};
	struct sched *s = NULL;
	CHECK(sched_create(&sc, pool, &s, &err) == BG_OK, "sched");
	CHECK(sched_token_budget(s) == 40, "the budget starts at the pool's 40 tokens");
	/* each: 4-token prompt, n_kv_max 19 (5 blocks) */
	struct sched_seq q[3] = {{0}};
	for (int i = 0; i < 3; i++) {
		q[i].order = i;
		q[i].n_tokens = 4;
		q[i].n_kv_max = 19;
		CHECK(sched_enqueue(s, &q[i], &err) == BG_OK, "enqueue");
	}
	struct sched_plan plan;
	CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step 1");
	/* 19 + 19 = 38 <= 40; + 19 = 57 > 40 with 2 of 10 blocks used: +100 */
	CHECK(plan.n_new == 2 && plan.token_budget == 140 && plan.promised_tokens == 38,
	      "two admitted, budget 40 + 100 (%d, %lld, %lld)", plan.n_new,
	      (long long)plan.token_budget, (long long)plan.promised_tokens);
	for (int32_t i = 0; i < plan.n; i++)
		sched_advance(s, plan.seqs[i], true);
	CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step 2");
	CHECK(plan.n_new == 1 && plan.promised_tokens == 57 && plan.token_budget == 140,
	      "the third fits the grown budget");
	/* run until the pool (10 blocks) cannot hold three growing sequences: a pause */
	int64_t pauses = 0;
	for (int it = 0; it < 40 && pauses == 0; it++) {
		for (int32_t i = 0; i < plan.n; i++)
			sched_advance(s, plan.seqs[i], plan.seqs[i]->step_samples);
		CHECK(sched_step(s, true, &plan, &err) == BG_OK, "step");
		pauses += plan.n_paused_now;
	}
	CHECK(pauses == 1 && plan.token_budget == 4,
	      "a pause takes 1000 off, down to the floor of one block (%lld, %lld)",
	      (long long)pauses, (long long)plan.token_budget);
	sched_destroy(s);
	kv_pool_destroy(pool);
}

int main(void)
{
	test_adaptive();
	test_admission_rules();
	test_cache_counts();
	first_wave(SCHED_NO_EVICT, 64);
	first_wave(SCHED_NO_EVICT, 6);
	first_wave(SCHED_MAX_UTIL, 64);
	first_wave(SCHED_ADAPTIVE, 6);
	first_wave_writer_gone();
	static_batch(64);
	static_batch(6);
	static_writer_gone();
	static_cached_reservation();
	resume_waits();
	ckpt_boundary(0);
	ckpt_boundary(2);
	ckpt_lru();
	const struct cfg cfgs[] = {
	    {SCHED_NO_EVICT, false, true, 8, 32, 40, 4, false, 0, 0, 0},
	    {SCHED_NO_EVICT, false, false, 8, 64, 40, 4, false, 0, 0, 0},
	    {SCHED_MAX_UTIL, false, true, 8, 32, 24, 4, false, 0, 0, 0},
	    {SCHED_MAX_UTIL, false, false, 8, 64, 24, 4, false, 0, 0, 0},
	    {SCHED_MAX_UTIL, true, true, 8, 32, 24, 4, false, 0, 0, 0},
	    {SCHED_MAX_UTIL, true, false, 6, 64, 30, 8, false, 0, 0, 0},
	    {SCHED_STATIC, false, true, 8, 32, 40, 4, false, 0, 0, 0},
	    {SCHED_STATIC, false, false, 8, 64, 40, 4, false, 0, 0, 0},
	    {SCHED_MAX_UTIL, false, true, 1, 16, 24, 4, false, 0, 0, 0},
	    {SCHED_NO_EVICT, false, true, 1, 16, 24, 4, false, 0, 0, 0},
	    {SCHED_MAX_UTIL, true, true, 64, 128, 40, 4, false, 0, 0, 0},
	    {SCHED_NO_EVICT, false, true, 8, 32, 40, 4, true, 0, 0, 0},
	    {SCHED_NO_EVICT, false, false, 8, 64, 40, 4, true, 0, 0, 0},
	    {SCHED_MAX_UTIL, false, true, 8, 32, 24, 4, true, 0, 0, 0},
	    {SCHED_MAX_UTIL, true, true, 8, 32, 24, 4, true, 0, 0, 0},
	    {SCHED_MAX_UTIL, true, false, 6, 64, 30, 8, true, 0, 0, 0},
	    {SCHED_STATIC, false, true, 8, 32, 40, 4, true, 0, 0, 0},
	    {SCHED_MAX_UTIL, true, true, 64, 128, 40, 4, true, 0, 0, 0},
	    {SCHED_ADAPTIVE, false, true, 8, 32, 24, 4, false, 0, 0, 0},
	    {SCHED_ADAPTIVE, true, true, 64, 128, 40, 4, true, 0, 0, 0},
	    {SCHED_ADAPTIVE, true, false, 6, 64, 30, 8, true, 0, 0, 0},
	    /* a window on every layer: pools smaller than the longest requests */
	    {SCHED_NO_EVICT, false, true, 8, 16, 12, 4, false, 8, 0, 0},
	    {SCHED_NO_EVICT, false, true, 8, 16, 16, 4, true, 8, 0, 0},
	    {SCHED_MAX_UTIL, false, true, 8, 16, 12, 4, true, 8, 0, 0},
	    {SCHED_MAX_UTIL, true, true, 8, 16, 12, 4, true, 8, 0, 0},
	    {SCHED_MAX_UTIL, true, false, 6, 24, 12, 4, false, 16, 0, 0},
	    {SCHED_STATIC, false, true, 8, 16, 16, 4, true, 8, 0, 0},
	    {SCHED_ADAPTIVE, true, true, 8, 16, 12, 4, true, 8, 0, 0},
	    /* recurrent state: slots, no swap, no reuse (asked for; off without checkpoints) */
	    {SCHED_MAX_UTIL, true, true, 8, 32, 24, 4, true, 0, 8, 0},
	    {SCHED_ADAPTIVE, true, false, 6, 64, 30, 8, true, 0, 9, 0},
	    {SCHED_NO_EVICT, false, true, 8, 32, 40, 4, true, 0, 8, 0},
	    {SCHED_STATIC, false, true, 8, 32, 40, 4, true, 0, 8, 0},
	    /* state checkpoints: reuse with recurrent state */
	    {SCHED_MAX_UTIL, true, true, 8, 32, 24, 4, true, 0, 11, 3},
	    {SCHED_ADAPTIVE, true, false, 6, 64, 30, 8, true, 0, 7, 1},
	    {SCHED_NO_EVICT, false, true, 8, 32, 40, 4, true, 0, 10, 2},
	    {SCHED_NO_EVICT, false, false, 8, 64, 40, 4, true, 0, 12, 4},
	    {SCHED_STATIC, false, true, 8, 32, 40, 4, true, 0, 10, 2},
	};
	for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
		run_one(&cfgs[i], 400);
	return check_summary();
}
