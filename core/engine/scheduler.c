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
};

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
	s->run = calloc((size_t)cfg->max_batch_size, sizeof *s->run);
	s->plan = calloc((size_t)cfg->max_batch_size, sizeof *s->plan);
	if (!s->run || !s->plan) {
		sched_destroy(s);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the scheduler");
	}
	*out = s;
	return BG_OK;
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
	q->step_tokens = 0;
	q->step_ctx = q->step_samples = q->step_swap_in = false;
	q->step_new = q->step_resumed = false;
}

/* Tokens a context may take from budget: all that are pending when they fit, else a chunk
 * when chunking applies, else none. */
static int32_t ctx_tokens(const struct sched *s, const struct sched_seq *q, int32_t budget)
{
	int32_t pend = q->n_tokens - q->n_computed;
	if (budget <= 0 || pend <= 0)
		return 0;
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

/* Pauses running q: on_pause may swap it out; its blocks go back to the pool. */
static enum bg_status pause_seq(struct sched *s, struct sched_seq *q, struct bg_err *err)
{
	BG_ASSERT(s->cfg.policy == SCHED_MAX_UTIL);
	bool swapped = false;
	if (q->n_computed > 0 && s->cfg.on_pause)
		swapped = s->cfg.on_pause(s->cfg.pause_user, q);
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
	q->state = SCHED_PAUSED;
	q->preemptions++;
	clear_step(q);
	return paused_insert(s, q, err);
}

int64_t sched_reserved_blocks(const struct sched *s)
{
	int64_t r = 0;
	for (int32_t i = 0; i < s->n_run; i++) {
		const struct sched_seq *q = s->run[i];
		int32_t full = kv_blocks_for(s->pool, q->n_kv_max);
		if (full > q->kv.n)
			r += full - q->kv.n;
	}
	return r;
}

static enum bg_status step_static(struct sched *s, bool allow_admit, struct sched_plan *plan,
				  struct bg_err *err)
{
	if (s->n_run == 0) {
		s->static_size = 0;
		int64_t avail = kv_n_free(s->pool);
		while (allow_admit && s->wq_n > 0 && s->n_run < s->cfg.max_batch_size) {
			struct sched_seq *q = wq_at(s, 0);
			int32_t full = kv_blocks_for(s->pool, q->n_kv_max);
			if (full > avail)
				break;
			avail -= full;
			wq_pop(s);
			q->state = SCHED_RUNNING;
			q->start_stamp = ++s->clock;
			q->step_new = true;
			s->run[s->n_run++] = q;
			plan->n_new++;
		}
		s->static_size = s->n_run;
	}
	bool any_ctx = false;
	for (int32_t i = 0; i < s->n_run; i++)
		any_ctx |= s->run[i]->in_ctx;
	int32_t budget = s->cfg.max_num_tokens;
	for (int32_t i = 0; i < s->n_run && budget > 0; i++) {
		struct sched_seq *q = s->run[i];
		int32_t c = any_ctx ? (q->in_ctx ? ctx_tokens(s, q, budget) : 0) : 1;
		if (c == 0)
			continue;
		/* The admission reservation guarantees these blocks. */
		enum bg_status st = kv_grow(s->pool, &q->kv, (int64_t)q->n_computed + c, err);
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
		if (!q->in_ctx) {
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
		while (kv_blocks_missing(s->pool, &q->kv, upto) > kv_n_free(s->pool)) {
			BG_ASSERT(s->cfg.policy == SCHED_MAX_UTIL); /* no-evict reserved them */
			struct sched_seq *v = NULL;
			for (int32_t j = s->n_run - 1; j >= 0 && !v; j--)
				if (s->run[j]->state == SCHED_RUNNING)
					v = s->run[j];
			budget += v->step_tokens;
			if ((st = pause_seq(s, v, err)) != BG_OK)
				return st;
			plan->n_paused_now++;
			if (v == q)
				break;
		}
		if (q->state != SCHED_RUNNING)
			continue;
		if ((st = kv_grow(s->pool, &q->kv, upto, err)) != BG_OK)
			return st;
		set_step(q, q->step_tokens);
	}
	run_compact(s);
	/* A pause means memory is short: neither resume nor admit in the same step (what was
	 * just freed would thrash). */
	if (plan->n_paused_now > 0)
		return BG_OK;
	/* Paused sequences resume before any new admission, oldest input first. */
	while (s->n_paused > 0 && s->n_run < s->cfg.max_batch_size && budget > 0) {
		struct sched_seq *q = s->paused[0];
		int32_t c = ctx_tokens(s, q, budget);
		if (!q->in_ctx)
			c = 1;
		if (c == 0)
			break;
		if (kv_blocks_for(s->pool, (int64_t)q->n_computed + c) > kv_n_free(s->pool))
			break;
		if ((st = kv_grow(s->pool, &q->kv, (int64_t)q->n_computed + c, err)) != BG_OK)
			return st;
		paused_remove_at(s, 0);
		q->state = SCHED_RUNNING;
		q->start_stamp = ++s->clock;
		q->step_resumed = true;
		q->step_swap_in = q->swapped && q->n_swapped_blocks > 0;
		q->swapped = false;
		set_step(q, c);
		s->run[s->n_run++] = q;
		budget -= c;
		plan->n_resumed++;
	}
	if (s->n_paused > 0 || !allow_admit)
		return BG_OK;
	int64_t avail = (int64_t)kv_n_free(s->pool) - sched_reserved_blocks(s);
	while (s->wq_n > 0 && s->n_run < s->cfg.max_batch_size && budget > 0) {
		struct sched_seq *q = wq_at(s, 0);
		int32_t c = ctx_tokens(s, q, budget);
		if (c == 0)
			break;
		if (s->cfg.policy == SCHED_NO_EVICT) {
			int32_t full = kv_blocks_for(s->pool, q->n_kv_max);
			if (full > avail)
				break;
			avail -= full;
		}
		if (kv_blocks_for(s->pool, c) > kv_n_free(s->pool))
			break;
		if ((st = kv_grow(s->pool, &q->kv, c, err)) != BG_OK)
			return st;
		wq_pop(s);
		q->state = SCHED_RUNNING;
		q->start_stamp = ++s->clock;
		q->step_new = true;
		set_step(q, c);
		s->run[s->n_run++] = q;
		budget -= c;
		plan->n_new++;
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
	plan->n_running = s->n_run;
	plan->n_paused = s->n_paused;
	plan->n_waiting = s->wq_n;
	return st;
}

void sched_advance(struct sched *s, struct sched_seq *q, bool appended)
{
	(void)s;
	BG_ASSERT(q->state == SCHED_RUNNING && q->step_tokens > 0);
	q->n_computed += q->step_tokens;
	BG_ASSERT(q->n_computed <= q->n_tokens);
	if (appended) {
		BG_ASSERT(q->n_computed == q->n_tokens);
		q->n_tokens++;
		q->in_ctx = false;
		q->recomputing = false;
	}
	q->step_tokens = 0;
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
