/* test_scheduler: the capacity + micro-batch scheduler driven by random workloads with no
 * backend. A simulated KV memory tags every slot with (sequence, position) when a step
 * "writes" it, so the test also proves that block tables never hand a sequence's written
 * KV to someone else, and that swap-out/in restores it. Invariants after every step:
 * no block owned twice, used + free = total, scheduled = ctx + gen, batch size and token
 * budget respected, FCFS admission, no-evict/static never pause, max-util pauses only the
 * most recently started, paused sequences resume before new admissions, static runs in
 * lockstep batches. */
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
	return s->id * 4096 + pos + 1;
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
				  .pause_user = &sm};
	struct sched *s = NULL;
	CHECK(sched_create(&sc, sm.pool, &s, &err) == BG_OK, "sched: %s", err.msg);
	const int32_t max_seq = 96;
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
		if (q->n_prompt >= max_seq || kv_blocks_for(sm.pool, n_max - 1) > c->n_blocks ||
		    (!c->chunked && q->n_prompt > c->max_tokens))
			continue;
		n++;
	}
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
		if (c->policy != SCHED_MAX_UTIL)
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
			if (was_running[ss->id] && q->start_stamp > max_stamp_before)
				max_stamp_before = q->start_stamp;
		}
		for (int32_t i = 0; i < sched_n_paused(s); i++) {
			struct sched_seq *q = sched_paused(s)[i];
			tabs[nt++] = &q->kv;
			V(q->kv.n == 0, "a paused sequence holds blocks");
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
			if (!c->chunked && q->step_ctx && !q->recomputing)
				V(q->n_computed == 0 && q->step_tokens == q->n_tokens,
				  "chunking off but a prompt was split");
			if (q->step_swap_in) {
				sm.n_swapins++;
				V(ss->swap && q->n_computed > 0, "swap-in without a swap-out");
				for (int32_t p = 0; p < q->n_computed; p++)
					*slot(&sm, q, p) = ss->swap[p];
				free(ss->swap);
				ss->swap = NULL;
			}
			/* what was written before must still be there */
			for (int32_t p = 0; p < q->n_computed; p++)
				if (*slot(&sm, q, p) != tag(ss, p)) {
					V(false, "seq %d pos %d overwritten", ss->id, p);
					break;
				}
			for (int32_t p = q->n_computed; p < q->n_computed + q->step_tokens; p++)
				*slot(&sm, q, p) = tag(ss, p);
		}
		V(tok_sum == plan.n_ctx_tokens + plan.n_gen_tokens, "token sums");
		total_sched += plan.n;
		for (int32_t i = 0; i < plan.n; i++) {
			struct sched_seq *q = plan.seqs[i];
			struct sim_seq *ss = q->user;
			bool appended = q->step_samples;
			sched_advance(s, q, appended);
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
	if (c->policy == SCHED_MAX_UTIL && c->max_bs > 1) /* one sequence alone always fits */
		CHECK(total_pauses > 0, "max-util paused under pressure (%lld)",
		      (long long)total_pauses);
	if (c->swap)
		CHECK(sm.n_swapins > 0 && sm.n_swapins <= sm.n_swapouts, "swaps out %d in %d",
		      sm.n_swapouts, sm.n_swapins);
	CHECK(kv_n_free(sm.pool) == c->n_blocks, "all blocks back");
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

int main(void)
{
	test_admission_rules();
	const struct cfg cfgs[] = {
	    {SCHED_NO_EVICT, false, true, 8, 32, 40, 4},
	    {SCHED_NO_EVICT, false, false, 8, 64, 40, 4},
	    {SCHED_MAX_UTIL, false, true, 8, 32, 24, 4},
	    {SCHED_MAX_UTIL, false, false, 8, 64, 24, 4},
	    {SCHED_MAX_UTIL, true, true, 8, 32, 24, 4},
	    {SCHED_MAX_UTIL, true, false, 6, 64, 30, 8},
	    {SCHED_STATIC, false, true, 8, 32, 40, 4},
	    {SCHED_STATIC, false, false, 8, 64, 40, 4},
	    {SCHED_MAX_UTIL, false, true, 1, 16, 24, 4},
	    {SCHED_NO_EVICT, false, true, 1, 16, 24, 4},
	    {SCHED_MAX_UTIL, true, true, 64, 128, 40, 4},
	};
	for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
		run_one(&cfgs[i], 400);
	return check_summary();
}
