/* engine: the continuous-batching loop. See engine.h for the contract, scheduler.h for
 * the policies and kv.h for the block manager.
 *
 * One iteration: pull requests (bounded look-ahead), plan with the scheduler, build one
 * backend batch of context chunks and generation steps, forward, sample, append tokens,
 * check stop conditions, free the KV of finished requests, emit results, write a stats
 * line. Every request keeps its own RNG and token history, so what it returns does not
 * depend on what it was batched with, nor on preemption (a recomputed context samples
 * only its final position, which is the next new token).
 */
#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/beam.h"
#include "engine/constrain.h"
#include "engine/kv.h"
#include "engine/scheduler.h"
#include "model/model.h"

void engine_config_default(struct engine_config *c)
{
	memset(c, 0, sizeof *c);
	c->policy = ENGINE_POLICY_NO_EVICT;
	c->preempt = ENGINE_PREEMPT_RECOMPUTE;
	c->order = ENGINE_ORDER_INPUT;
	c->max_batch_size = 256;
	c->max_num_tokens = 8192;
	c->chunked_context = true;
	c->max_queued = 1024;
	c->max_seq_len = 0;
	c->stats = NULL;
	c->reorder_window = 0;
	c->parse_special = true;
	c->prefix_cache = true;
	c->constrain_threads = 0;
	c->overlap = -1;
	c->state_checkpoints = 8;
}

/* The engine's side of one request, alive from the source to the sink. */
struct ereq {
	struct request *r;
	int64_t ord; /* 0-based position in this run's input */
	struct sched_seq sq;
	struct sampler_rng rng;
	struct sampler_params sp_gen;	 /* n_top = logprobs */
	struct sampler_params sp_prompt; /* n_top = prompt_logprobs */
	struct tok_stream ts;
	size_t text_cap;
	int32_t out_cap;
	int32_t plp_next; /* next prompt position whose log-prob row is due */
	void *swap_buf;	  /* [n_swapped_blocks * block_bytes] while swapped out */
	size_t swap_bytes;
	bool done;
	/* samples (n > 1): the request's ereq (the root, sample 0) owns the others (kids,
	 * samples 1..n-1), each with its own request clone, sequence and RNG (seed + i),
	 * forked from the root's sequence after its prompt. A kid that finishes moves its
	 * output into the root's choices and is freed; the root is complete when its own
	 * sequence and every kid have finished. */
	struct ereq *parent; /* the root, for a kid; NULL for a root */
	struct ereq **kids;  /* [n_kids] live kids (NULL once merged); roots only */
	int32_t n_kids, n_live_kids;
	int32_t sample;	    /* its index among the samples */
	bool own_done;	    /* root: its own sequence finished, waiting for kids */
	enum req_finish own_finish;
	struct constrain *con;	   /* NULL: unconstrained (engine/constrain.h) */
	struct sampler_constraint sc; /* this step's, built by constrain_step */
	bool con_dead;		   /* no token allowed at this step */
	struct bg_err con_err;	   /* set when the constraint step failed */
	/* beam search (beam_width > 1): the root owns the search; its kids are beams
	 * 1..W-1 (slots; kept until the root is freed, even when not live) */
	struct beam *beam;
	struct estep *at[2]; /* its entries in the engine's two step buffers (NULL: none) */
	bool beam_over; /* root: the family has finished (or failed) */
	bool beam_nan;	/* root: a beam of this step met a NaN logits row (at beam_nan_at) */
	int32_t beam_nan_at;
};

/* One scheduled sequence of a step, kept past the scheduler's next plan (which reuses
 * the scheduler's own fields): with overlap, a step's results are applied after the next
 * step has been planned and started. */
struct estep {
	struct ereq *er; /* NULL once the request was freed */
	int32_t K, c;	 /* n_computed before the step, tokens it feeds */
	int32_t tok0;	 /* its first token in the buffer's btok / bwant */
	int32_t lrow0;	 /* its first logits row */
	int32_t row0;	 /* its first sample row (rows of a dead entry: none) */
	int32_t srow;	 /* the sample row that draws its next token; -1: none */
	bool ctx, samples, recomputing, fork;
	bool dead; /* finished (by the previous step's results) before it was sampled */
};

/* A step's backend inputs and what applying its results needs. There are two, used in
 * turn, so that step n's stay intact while step n + 1 is built and run. */
struct ebuf {
	struct backend_seq *bseqs; /* [seq_cap] */
	struct estep *steps;	   /* [seq_cap] */
	int32_t seq_cap, n;
	int32_t *btok;	/* [tok_cap] */
	int32_t *prow;	/* [tok_cap] backend_seq.prev_rows */
	uint8_t *bwant; /* [tok_cap] */
	int32_t tok_cap, nlog;
	/* [res_cap] its sample call's results: per buffer, since an asynchronous backend
	 * (BACKEND_CAP_ASYNC) writes them late, while the next step is built in the other */
	struct sampler_result *res;
	int32_t res_cap, nres; /* nres: rows its sample call draws (step_rows) */
	bool overlap; /* its results may wait until the next step is running */
};

struct engine {
	struct engine_config cfg;
	struct backend *be;
	const struct tok *tok;
	struct constrain_vocab *cvocab; /* built on the first constrained request */
	struct kv_pool *pool;
	struct sched *sched;
	int32_t max_seq_len;
	int32_t window;
	int32_t kv_window; /* > 0: every layer is windowed, blocks behind it are given back */
	/* batch scratch, grown to the largest batch seen (at most max_batch_size sequences
	 * and max_num_tokens tokens, but a large limit costs nothing until it is used) */
	struct ebuf buf[2];
	int32_t next_buf;		 /* the buffer the next step is built in */
	int32_t pend;			 /* the buffer whose results wait to be applied; -1: none */
	bool overlap;			 /* cfg.overlap resolved for the backend */
	struct backend_sample_row *rows; /* [row_cap] */
	struct constrain_job *cjobs;	 /* [row_cap] this step's grammar rows */
	int32_t *cjob_row;		 /* [row_cap] the sample row of each job */
	int32_t row_cap, nrows;
	/* reorder ring (order input): every pulled, not yet emitted request by ord */
	struct ereq **ring; /* [ring_cap], a power of two */
	int64_t ring_cap;
	int64_t head_ord, next_ord;
	int64_t n_buffered; /* completed, waiting for an earlier one */
	/* the current run */
	engine_sink_fn sink;
	void *user;
	bool sink_failed;
	int stats_errno; /* the first failed write of cfg.stats (engine_stats_errno) */
	int64_t iter;
	int32_t iter_completed;
	size_t swap_host_bytes;
	/* this iteration's preemption traffic (the stats line); totals are in tot */
	int64_t iter_swap_out, iter_swap_in, iter_recomputed;
	double t0;
	struct engine_progress tot;
	int64_t reused_base, missed_base; /* the pool's reuse totals when the run began */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- creation ---- */

static bool on_pause(void *user, struct sched_seq *q);

enum bg_status engine_create(const struct engine_config *cfg, struct backend *backend,
			     const struct tok *tok, const struct model_hparams *hp,
			     struct engine **out, struct bg_err *err)
{
	*out = NULL;
	if (cfg->max_batch_size <= 0 || cfg->max_num_tokens <= 0 || cfg->max_queued <= 0)
		return bg_fail(err, BG_ERR_INVALID,
			       "max batch size, max num tokens and max queued must be positive");
	if (backend->n_blocks <= 0 || backend->block_size <= 0 || backend->n_vocab <= 0)
		return bg_fail(err, BG_ERR_INVALID,
			       "backend reports an empty KV pool or vocabulary");
	struct engine *e = calloc(1, sizeof *e);
	if (!e)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the engine");
	e->cfg = *cfg;
	e->be = backend;
	e->tok = tok;
	e->max_seq_len = cfg->max_seq_len;
	if (e->max_seq_len <= 0)
		e->max_seq_len = hp && hp->n_ctx_train > 0 ? (int32_t)hp->n_ctx_train : 0;
	if (e->max_seq_len <= 0) {
		int64_t pool_tokens = (int64_t)backend->n_blocks * backend->block_size;
		e->max_seq_len = pool_tokens > INT32_MAX ? INT32_MAX : (int32_t)pool_tokens;
	}
	e->pend = -1;
	e->overlap = cfg->overlap < 0 ? (backend->caps & BACKEND_CAP_ASYNC) != 0 : cfg->overlap > 0;
	e->window = cfg->reorder_window > 0
			? cfg->reorder_window
			: (cfg->max_batch_size * 4 > 1024 ? cfg->max_batch_size * 4 : 1024);
	/* recurrent state: no more running sequences than the backend has state slots, less
	 * the checkpoints'; when the slots are short, the checkpoints get those beyond
	 * max_batch_size or an eighth of them, whichever is more (engine.h) */
	int32_t n_ckpt = 0;
	if (backend->n_state_slots > 0) {
		int32_t n = backend->n_state_slots, spare = n - e->cfg.max_batch_size;
		if (cfg->prefix_cache && cfg->state_checkpoints > 0)
			n_ckpt = cfg->state_checkpoints;
		if (spare < n / 8)
			spare = n / 8;
		if (n_ckpt > spare)
			n_ckpt = spare;
		if (e->cfg.max_batch_size > n - n_ckpt)
			e->cfg.max_batch_size = n - n_ckpt;
	}
	enum bg_status st = kv_pool_create(backend->n_blocks, backend->block_size, &e->pool, err);
	if (st != BG_OK)
		goto fail;
	struct sched_config sc = {
	    .policy = cfg->policy == ENGINE_POLICY_MAX_UTIL   ? SCHED_MAX_UTIL
		      : cfg->policy == ENGINE_POLICY_STATIC   ? SCHED_STATIC
		      : cfg->policy == ENGINE_POLICY_ADAPTIVE ? SCHED_ADAPTIVE
							      : SCHED_NO_EVICT,
	    .max_batch_size = e->cfg.max_batch_size,
	    .max_num_tokens = cfg->max_num_tokens,
	    .chunked_context = cfg->chunked_context,
	    .on_pause = on_pause,
	    .pause_user = e,
	    .prefix_cache = cfg->prefix_cache,
	    /* sliding window on every layer: blocks behind it are given back (scheduler.h) */
	    .kv_window = (int32_t)model_kv_window(hp),
	    .n_state_slots = backend->n_state_slots,
	    .n_checkpoints = n_ckpt,
	};
	e->kv_window = sc.kv_window;
	if ((st = sched_create(&sc, e->pool, &e->sched, err)) != BG_OK)
		goto fail;
	e->ring_cap = 1024;
	e->ring = calloc((size_t)e->ring_cap, sizeof *e->ring);
	if (!e->ring) {
		st = bg_fail(err, BG_ERR_NOMEM, "out of memory for the engine's batch buffers");
		goto fail;
	}
	*out = e;
	return BG_OK;
fail:
	engine_destroy(e);
	return st;
}

static void ereq_free(struct ereq *er)
{
	if (!er)
		return;
	for (int32_t i = 0; i < er->n_kids; i++)
		ereq_free(er->kids[i]);
	for (int b = 0; b < 2; b++)
		if (er->at[b])
			er->at[b]->er = NULL;
	free(er->kids);
	free(er->swap_buf);
	beam_free(er->beam);
	constrain_free(er->con);
	req_free(er->r);
	free(er);
}

/* Takes er's family (its root, the root's live kids) out of the scheduler. */
static struct ereq *drop_family(struct engine *e, struct ereq *er)
{
	struct ereq *root = er->parent ? er->parent : er;
	for (int32_t i = 0; i < root->n_kids; i++) {
		struct ereq *k = root->kids[i];
		if (k && k->sq.state != SCHED_NEW && k->sq.state != SCHED_DONE)
			sched_finish(e->sched, &k->sq);
	}
	if (root->sq.state != SCHED_NEW && root->sq.state != SCHED_DONE)
		sched_finish(e->sched, &root->sq);
	return root;
}

/* Frees every request still held (a run that was stopped or failed). */
static void drop_inflight(struct engine *e)
{
	struct sched *s = e->sched;
	/* A family leaves together; in input order the ring frees its root (and kids). */
	while (sched_n_running(s) + sched_n_paused(s) + sched_n_waiting(s) > 0) {
		struct sched_seq *q = sched_n_running(s) > 0  ? sched_running(s)[0]
				      : sched_n_paused(s) > 0 ? sched_paused(s)[0]
							      : sched_waiting_at(s, 0);
		struct ereq *root = drop_family(e, q->user);
		if (e->cfg.order != ENGINE_ORDER_INPUT)
			ereq_free(root);
	}
	/* In input order the ring holds every request not emitted (done or not). */
	for (int64_t o = e->head_ord; o < e->next_ord; o++) {
		struct ereq **slot = &e->ring[o & (e->ring_cap - 1)];
		ereq_free(*slot);
		*slot = NULL;
	}
	e->head_ord = e->next_ord;
	e->n_buffered = 0;
	e->swap_host_bytes = 0;
	e->pend = -1; /* its requests are gone */
}

void engine_destroy(struct engine *e)
{
	if (!e)
		return;
	if (e->sched)
		drop_inflight(e);
	sched_destroy(e->sched);
	kv_pool_destroy(e->pool);
	constrain_vocab_free(e->cvocab);
	for (int b = 0; b < 2; b++) {
		free(e->buf[b].bseqs);
		free(e->buf[b].steps);
		free(e->buf[b].btok);
		free(e->buf[b].prow);
		free(e->buf[b].bwant);
		free(e->buf[b].res);
	}
	free(e->rows);
	free(e->cjobs);
	free(e->cjob_row);
	free(e->ring);
	free(e);
}

int32_t engine_max_seq_len(const struct engine *e)
{
	return e->max_seq_len;
}

void engine_totals(const struct engine *e, struct engine_progress *out)
{
	*out = e->tot;
}

int engine_stats_errno(const struct engine *e)
{
	return e->stats_errno;
}

bool engine_idle(const struct engine *e)
{
	if (sched_n_running(e->sched) + sched_n_paused(e->sched) + sched_n_waiting(e->sched) > 0)
		return false;
	/* order input: the ring holds every request pulled and not yet emitted */
	return e->cfg.order != ENGINE_ORDER_INPUT || e->head_ord == e->next_ord;
}

/* ---- results ---- */

static void emit(struct engine *e, struct ereq *er)
{
	struct request *r = er->r;
	er->r = NULL;
	ereq_free(er);
	if (e->sink_failed) {
		req_free(r);
		return;
	}
	if (e->sink(e->user, r) != 0)
		e->sink_failed = true;
}

/* Emits, in input order, every completed request at the head of the ring. */
static void flush_ready(struct engine *e)
{
	while (e->head_ord < e->next_ord) {
		struct ereq **slot = &e->ring[e->head_ord & (e->ring_cap - 1)];
		if (!*slot || !(*slot)->done)
			break;
		struct ereq *er = *slot;
		*slot = NULL;
		e->head_ord++;
		e->n_buffered--;
		emit(e, er);
	}
}

static bool text_ensure(struct request *r, size_t *cap)
{
	if (r->text)
		return true;
	r->text = malloc(16);
	if (!r->text)
		return false;
	r->text[0] = 0;
	r->text_len = 0;
	*cap = 16;
	return true;
}

static void finish_root(struct engine *e, struct ereq *er, enum req_finish finish);

/* ---- beam search (engine/beam.h): the engine's side ---- */

/* A beam member ends outside a finished search (an error, the run failing, or a request
 * refused before it ran): it leaves the scheduler; so do its family's members that are
 * not in the batch being failed (step_tokens 0: the batch fails the others in turn). The
 * last one out completes the root with the error. */
static void beam_complete(struct engine *e, struct ereq *er, enum req_finish finish)
{
	struct ereq *root = er->parent ? er->parent : er;
	if (root->beam_over)
		return;
	if (er->r->error.code[0] && !root->r->error.code[0])
		root->r->error = er->r->error;
	if (er->sq.state != SCHED_NEW && er->sq.state != SCHED_DONE)
		sched_finish(e->sched, &er->sq);
	bool live = false;
	for (int32_t i = -1; i < root->n_kids; i++) {
		struct ereq *m = i < 0 ? root : root->kids[i];
		if (m->sq.state == SCHED_NEW || m->sq.state == SCHED_DONE)
			continue;
		if (m->sq.state == SCHED_RUNNING && m->sq.step_tokens > 0)
			live = true;
		else
			sched_finish(e->sched, &m->sq);
	}
	if (live)
		return;
	root->beam_over = true;
	/* an unfinished search returns nothing but its error */
	free(root->r->out_ids);
	root->r->out_ids = NULL;
	root->r->n_out = 0;
	finish_root(e, root, root->r->error.code[0] ? REQ_FINISH_ERROR : finish);
}

/* What ends a beam: the request's stop ids, end-of-generation unless ignore_eos. */
struct beam_fin {
	const struct tok *tok;
	const struct request *r;
};

static enum req_finish beam_finishing(void *user, int32_t token)
{
	const struct beam_fin *bf = user;
	const struct request *r = bf->r;
	for (int32_t i = 0; i < r->n_stop_token_ids; i++)
		if (r->stop_token_ids[i] == token)
			return REQ_FINISH_STOP;
	return !r->ignore_eos && bf->tok && tok_is_eog(bf->tok, token) ? REQ_FINISH_EOS
								       : REQ_FINISH_NONE;
}

/* The family's member in slot i (0: the root). */
static struct ereq *beam_member(struct ereq *root, int32_t i)
{
	return i == 0 ? root : root->kids[i - 1];
}

/* Fails root's whole search with code (every live member has run its step). */
static void beam_fail(struct engine *e, struct ereq *root, const char *code, const char *msg)
{
	snprintf(root->r->error.code, sizeof root->r->error.code, "%s", code);
	snprintf(root->r->error.message, sizeof root->r->error.message, "%.200s", msg);
	beam_complete(e, root, REQ_FINISH_ERROR);
}

/* Every live beam of root's family has its candidates: picks the next beams
 * (beam_step), re-points their KV (the first step forks the family: every slot shares
 * the prompt's blocks; later, each new beam shares the table of the beam it extends;
 * slots without a beam keep an empty table and wait), gives each its token, or ends
 * the search and completes the request. */
/* Recurrent state (scheduler.h): the slot of dst[i] becomes a copy of src[i]'s, for the
 * sequences' slots (no-op without state slots). */
static enum bg_status copy_states(struct engine *e, struct sched_seq *const *src,
				  struct sched_seq *const *dst, int32_t n, struct bg_err *err)
{
	if (e->be->n_state_slots == 0 || n == 0)
		return BG_OK;
	int32_t from[REQ_MAX_N], to[REQ_MAX_N];
	BG_ASSERT(n <= REQ_MAX_N);
	for (int32_t i = 0; i < n; i++) {
		from[i] = src[i]->state_slot;
		to[i] = dst[i]->state_slot;
	}
	struct bg_err cerr = {0};
	if (!e->be->ops->state_copy ||
	    e->be->ops->state_copy(e->be->ctx, from, to, n, &cerr) != BG_OK)
		return bg_fail(err, BG_ERR_DEVICE, "recurrent state copy failed: %s", cerr.msg);
	return BG_OK;
}

/* State checkpoints (scheduler.h): the running sequences that took a checkpoint this
 * step get its state in their slots, before the step's forward reads them. */
static enum bg_status restore_states(struct engine *e, struct bg_err *err)
{
	struct sched_seq *const *run = sched_running(e->sched);
	for (int32_t i = 0; i < sched_n_running(e->sched); i++) {
		struct sched_seq *q = run[i];
		struct bg_err cerr = {0};
		if (q->step_state_from >= 0 &&
		    (!e->be->ops->state_copy ||
		     e->be->ops->state_copy(e->be->ctx, &q->step_state_from, &q->state_slot, 1,
					    &cerr) != BG_OK))
			return bg_fail(err, BG_ERR_DEVICE, "recurrent state restore failed: %s",
				       cerr.msg);
	}
	return BG_OK;
}

/* sched_advance, then the state checkpoint it asks for (save_slot): the copy is issued
 * at once, after the forward that computed the state and before any later one. */
static enum bg_status advance(struct engine *e, struct sched_seq *q, bool appended,
			      struct bg_err *err)
{
	sched_advance(e->sched, q, appended);
	if (q->save_slot < 0)
		return BG_OK;
	struct bg_err cerr = {0};
	if (!e->be->ops->state_copy ||
	    e->be->ops->state_copy(e->be->ctx, &q->state_slot, &q->save_slot, 1, &cerr) != BG_OK)
		return bg_fail(err, BG_ERR_DEVICE, "recurrent state checkpoint failed: %s",
			       cerr.msg);
	return BG_OK;
}

static void beam_advance(struct engine *e, struct ereq *root)
{
	int32_t W = root->n_kids + 1, n_next = 0, parent[REQ_MAX_BEAM_WIDTH];
	struct request *reqs[REQ_MAX_BEAM_WIDTH];
	struct sched_seq *seqs[REQ_MAX_BEAM_WIDTH];
	for (int32_t i = 0; i < W; i++) {
		reqs[i] = beam_member(root, i)->r;
		seqs[i] = &beam_member(root, i)->sq;
	}
	bool first = root->r->n_out == 0 && !root->sq.forked, done = false;
	struct beam_fin bf = {e->tok, root->r};
	struct bg_err berr = {0};
	if (root->beam_nan) {
		/* A NaN logits row in any beam fails the whole request, as a plain request's
		 * does: the search would otherwise rank its candidates last (cand_cmp) and
		 * return the other beams as if the model were sound. Every live beam has run
		 * its step, so the family leaves the scheduler together (beam_complete). */
		snprintf(berr.msg, sizeof berr.msg,
			 "the logits at position %d are NaN (a numerical failure in the model)",
			 root->beam_nan_at);
		beam_fail(e, root, "backend_error", berr.msg);
		return;
	}
	if (beam_step(root->beam, reqs, beam_finishing, &bf, parent, &n_next, &done, &berr) !=
	    BG_OK) {
		beam_fail(e, root, "internal", berr.msg);
		return;
	}
	if (first && n_next > 0) {
		root->r->t_first_token = now_s();
		root->r->ttft_ms = (root->r->t_first_token - root->r->t_arrival) * 1e3;
	}
	e->tot.output_tokens += n_next;
	if (done) {
		if (beam_finish(root->beam, reqs, root->r, e->tok, &berr) != BG_OK) {
			beam_fail(e, root, "internal", berr.msg);
			return;
		}
		text_ensure(root->r, &root->text_cap);
		root->beam_over = true;
		for (int32_t i = 0; i < W; i++)
			if (seqs[i]->state != SCHED_NEW && seqs[i]->state != SCHED_DONE)
				sched_finish(e->sched, seqs[i]);
		finish_root(e, root, root->r->finish);
		return;
	}
	if (first) {
		sched_append(e->sched, &root->sq);
		for (int32_t k = 0; k < root->n_kids; k++) {
			if (sched_fork(e->sched, &root->sq, &root->kids[k]->sq, &berr) != BG_OK) {
				beam_fail(e, root, "internal", berr.msg);
				return;
			}
			root->kids[k]->r->t_arrival = root->r->t_arrival;
		}
	}
	if (sched_beam_reorder(e->sched, seqs, W, parent, n_next, &berr) != BG_OK) {
		beam_fail(e, root, "internal", berr.msg);
		return;
	}
	/* each beam continues its parent's state (the first step's parent is the root, whose
	 * state the new beams thus take) */
	struct sched_seq *from[REQ_MAX_BEAM_WIDTH];
	for (int32_t j = 0; j < n_next; j++)
		from[j] = seqs[parent[j]];
	if (copy_states(e, from, seqs, n_next, &berr) != BG_OK) {
		beam_fail(e, root, "backend_error", berr.msg);
		return;
	}
	if (!first)
		for (int32_t j = 0; j < n_next; j++)
			sched_append(e->sched, seqs[j]);
}

/* Marks er's sequence finished and frees its KV. A root without live kids is complete
 * (finish_root); a root with live kids waits for them; a kid moves its output into the
 * root's choices and is freed. */
static void complete(struct engine *e, struct ereq *er, enum req_finish finish)
{
	struct request *r = er->r;
	if (er->beam || (er->parent && er->parent->beam)) {
		beam_complete(e, er, finish);
		return;
	}
	if (er->sq.state != SCHED_NEW && er->sq.state != SCHED_DONE)
		sched_finish(e->sched, &er->sq);
	if (er->swap_buf) {
		e->swap_host_bytes -= er->swap_bytes;
		free(er->swap_buf);
		er->swap_buf = NULL;
	}
	r->finish = finish;
	text_ensure(r, &er->text_cap);
	if (er->parent) {
		struct ereq *root = er->parent;
		struct request *rr = root->r;
		req_take_choice(r, &rr->choices[er->sample]);
		if (r->error.code[0] && !rr->error.code[0])
			rr->error = r->error;
		root->kids[er->sample - 1] = NULL;
		root->n_live_kids--;
		ereq_free(er);
		if (root->own_done && root->n_live_kids == 0)
			finish_root(e, root, root->own_finish);
		return;
	}
	if (er->n_live_kids > 0) {
		er->own_done = true;
		er->own_finish = finish;
		/* Not forked yet (failed, or stopped, during its prompt): the kids never ran
		 * and end with it; the last one completes the root. */
		for (int32_t i = 0; !er->sq.forked && i < er->n_kids; i++)
			if (er->kids[i])
				complete(e, er->kids[i], finish);
		return;
	}
	finish_root(e, er, finish);
}

/* er (a root) and all its samples are finished: fills the metrics, and emits it (order
 * completion) or buffers it until every earlier request is out (order input). */
static void finish_root(struct engine *e, struct ereq *er, enum req_finish finish)
{
	struct request *r = er->r;
	r->finish = finish;
	if (r->n_choices > 0 && !er->beam) {
		/* sample 0 is the root's own sequence; n_out becomes the samples' total */
		req_take_choice(r, &r->choices[0]);
		r->finish = r->error.code[0] ? REQ_FINISH_ERROR : r->choices[0].finish;
		for (int32_t i = 0; i < r->n_choices; i++)
			r->n_out += r->choices[i].n_out;
		text_ensure(r, &er->text_cap);
	}
	double t = now_s();
	r->t_done = t;
	r->e2e_ms = (t - r->t_arrival) * 1e3;
	if (r->n_out == 0)
		r->ttft_ms = 0;
	r->preemptions = er->sq.preemptions;
	r->cached_tokens = er->sq.n_cached;
	e->tot.n_done++;
	if (finish == REQ_FINISH_ERROR)
		e->tot.n_failed++;
	e->iter_completed++;
	er->done = true;
	if (e->cfg.order == ENGINE_ORDER_INPUT) {
		e->n_buffered++;
		flush_ready(e);
	} else {
		emit(e, er);
	}
}

static void fail_req(struct engine *e, struct ereq *er, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fail_req(struct engine *e, struct ereq *er, const char *code, const char *fmt, ...)
{
	struct request *r = er->r;
	snprintf(r->error.code, sizeof r->error.code, "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->error.message, sizeof r->error.message, fmt, ap);
	va_end(ap);
	complete(e, er, REQ_FINISH_ERROR);
}

/* ---- intake ---- */

static bool ring_put(struct engine *e, struct ereq *er)
{
	if (e->next_ord - e->head_ord >= e->ring_cap) {
		int64_t cap = e->ring_cap * 2;
		struct ereq **nr = calloc((size_t)cap, sizeof *nr);
		if (!nr)
			return false;
		for (int64_t o = e->head_ord; o < e->next_ord; o++)
			nr[o & (cap - 1)] = e->ring[o & (e->ring_cap - 1)];
		free(e->ring);
		e->ring = nr;
		e->ring_cap = cap;
	}
	e->ring[er->ord & (e->ring_cap - 1)] = er;
	return true;
}

/* Hands r back failed at once, outside the ring (nothing to attach the result to, or no
 * room to keep its place in order): the result still goes out. */
static void reject_unplaced(struct engine *e, struct request *r)
{
	snprintf(r->error.code, sizeof r->error.code, "internal");
	snprintf(r->error.message, sizeof r->error.message, "out of memory");
	r->finish = REQ_FINISH_ERROR;
	e->tot.n_done++;
	e->tot.n_failed++;
	if (e->sink(e->user, r) != 0)
		e->sink_failed = true;
}

/* Wraps r in an ereq and gives it its place in the input order (the reorder ring).
 * NULL when that fails: r has then been handed back failed. */
static struct ereq *intake_place(struct engine *e, struct request *r)
{
	e->tot.n_read++;
	struct ereq *er = calloc(1, sizeof *er);
	if (!er) {
		reject_unplaced(e, r);
		return NULL;
	}
	er->r = r;
	er->ord = e->next_ord;
	if (r->t_arrival == 0)
		r->t_arrival = now_s();
	if (e->cfg.order == ENGINE_ORDER_INPUT && !ring_put(e, er)) {
		er->r = NULL;
		ereq_free(er);
		reject_unplaced(e, r);
		return NULL;
	}
	e->next_ord++;
	return er;
}

/* The checks that need no tokens. False: the request has been failed. */
static bool intake_check_fields(struct engine *e, struct ereq *er)
{
	struct request *r = er->r;
	if (r->max_tokens < 0) {
		fail_req(e, er, "invalid_request", "max_tokens must be at least 0 (got %d)",
			 r->max_tokens);
		return false;
	}
	if (r->logprobs > SAMPLER_MAX_TOP || r->prompt_logprobs > SAMPLER_MAX_TOP) {
		fail_req(e, er, "invalid_request",
			 "logprobs and prompt_logprobs must be at most %d", SAMPLER_MAX_TOP);
		return false;
	}
	return true;
}

/* The first out-of-vocabulary id of ids[n], or -1. */
static int32_t first_oov(const int32_t *ids, int32_t n, int32_t n_vocab)
{
	for (int32_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= n_vocab)
			return i;
	return -1;
}

/* r->prompt_ids from input_ids, copied as given. False: the request has been failed. */
static bool intake_ids(struct engine *e, struct ereq *er)
{
	struct request *r = er->r;
	int32_t n_vocab = e->be->n_vocab;
	if (r->n_input_ids <= 0) {
		fail_req(e, er, "invalid_request", "input_ids is empty");
		return false;
	}
	int32_t bad = first_oov(r->input_ids, r->n_input_ids, n_vocab);
	if (bad >= 0) {
		fail_req(e, er, "invalid_request",
			 "input_ids[%d] = %d is outside the vocabulary [0, %d)", bad,
			 r->input_ids[bad], n_vocab);
		return false;
	}
	free(r->prompt_ids);
	r->prompt_ids = malloc((size_t)r->n_input_ids * sizeof *r->prompt_ids);
	if (!r->prompt_ids) {
		fail_req(e, er, "internal", "out of memory");
		return false;
	}
	memcpy(r->prompt_ids, r->input_ids, (size_t)r->n_input_ids * sizeof *r->prompt_ids);
	r->n_prompt = r->n_input_ids;
	return true;
}

/* r->prompt_ids by tokenizing the prompt. False: the request has been failed. */
static bool intake_tokenize(struct engine *e, struct ereq *er)
{
	struct request *r = er->r;
	if (r->prompt_len == 0) {
		fail_req(e, er, "invalid_request", "prompt is empty");
		return false;
	}
	if (!e->tok) {
		fail_req(e, er, "invalid_request",
			 "this model has no tokenizer: give input_ids instead of a prompt");
		return false;
	}
	/* max_tokens alone fills the sequence: no prompt size could fit, so say that */
	if (r->max_tokens > 0 && r->max_tokens >= e->max_seq_len) {
		fail_req(e, er, "too_long",
			 "max_tokens (%d) leaves no room for the prompt: prompt + max_tokens must "
			 "fit the max sequence length of %d",
			 r->max_tokens, e->max_seq_len);
		return false;
	}
	/* Refused by size before tokenizing, so that memory stays bounded whatever the line
	 * (tokenizing takes ~25 bytes per byte): each token stands for at most
	 * tok_max_token_bytes bytes (tokenizer.h; a text that would fit only because the
	 * tokenizer drops bytes is refused too). */
	uint64_t least = ((uint64_t)r->prompt_len + tok_max_token_bytes(e->tok) - 1) /
			 tok_max_token_bytes(e->tok);
	if (least >= (uint64_t)e->max_seq_len ||
	    least + (uint64_t)(r->max_tokens > 0 ? r->max_tokens : 0) > (uint64_t)e->max_seq_len) {
		fail_req(e, er, "too_long",
			 "prompt is %zu bytes, at least %llu tokens (no token is longer than %zu "
			 "bytes); with max_tokens (%d) that is beyond the max sequence length of %d",
			 r->prompt_len, (unsigned long long)least, tok_max_token_bytes(e->tok),
			 r->max_tokens, e->max_seq_len);
		return false;
	}
	bool bos = r->add_bos < 0 ? tok_add_bos(e->tok) : r->add_bos != 0;
	int32_t *ids = NULL;
	size_t n = 0;
	struct bg_err terr = {0};
	if (tok_encode(e->tok, r->prompt, r->prompt_len, bos, e->cfg.parse_special, &ids, &n,
		       &terr) != BG_OK) {
		fail_req(e, er, "invalid_request", "cannot tokenize the prompt: %s", terr.msg);
		return false;
	}
	free(r->prompt_ids);
	r->prompt_ids = ids;
	r->n_prompt = n > INT32_MAX ? INT32_MAX : (int32_t)n;
	if (n == 0) {
		fail_req(e, er, "invalid_request", "prompt is empty after tokenization");
		return false;
	}
	int32_t bad = first_oov(ids, r->n_prompt, e->be->n_vocab);
	if (bad >= 0) {
		fail_req(e, er, "invalid_request",
			 "prompt token %d is outside the model's vocabulary of %d", ids[bad],
			 e->be->n_vocab);
		return false;
	}
	return true;
}

/* The length limits of the prompt and of prompt + max_tokens; *n_max = prompt +
 * max_tokens. False: the request has been failed. */
static bool intake_check_length(struct engine *e, struct ereq *er, int64_t *n_max)
{
	struct request *r = er->r;
	int32_t P = r->n_prompt;
	if (P >= e->max_seq_len) {
		fail_req(e, er, "too_long",
			 "prompt is %d tokens; the max sequence length is %d, which leaves no room "
			 "to generate",
			 P, e->max_seq_len);
		return false;
	}
	if (r->max_tokens == 0) {
		/* to the end: the longest sequence the context and the KV pool allow */
		int64_t room = (int64_t)kv_n_blocks(e->pool) * kv_block_size(e->pool) + 1;
		if (sched_blocks_needed(e->sched, e->max_seq_len, P, 1) <= kv_n_blocks(e->pool))
			room = e->max_seq_len; /* a window on every layer bounds the KV held */
		int64_t end = room < e->max_seq_len ? room : e->max_seq_len;
		r->max_tokens = end > P ? (int32_t)(end - P) : 1; /* 1: refused just below */
	}
	/* prompt + max_tokens beyond the max sequence length is refused, as vLLM does and
	 * DESIGN.md §4 says: silently capping would hand back fewer tokens than asked. */
	*n_max = (int64_t)P + r->max_tokens;
	if (*n_max > e->max_seq_len) {
		fail_req(e, er, "too_long",
			 "prompt (%d tokens) + max_tokens (%d) is %lld, beyond the max sequence "
			 "length of %d",
			 P, r->max_tokens, (long long)*n_max, e->max_seq_len);
		return false;
	}
	int64_t need = sched_blocks_needed(e->sched, *n_max - 1, P, 1);
	if (need > kv_n_blocks(e->pool)) {
		fail_req(e, er, "too_long",
			 "prompt + max_tokens needs %lld KV blocks (%lld tokens) but the pool has %d "
			 "blocks of %d tokens",
			 (long long)need, (long long)(*n_max - 1), kv_n_blocks(e->pool),
			 kv_block_size(e->pool));
		return false;
	}
	if (!e->cfg.chunked_context && P > e->cfg.max_num_tokens) {
		fail_req(
		    e, er, "too_long",
		    "prompt is %d tokens, more than max_num_tokens (%d) with chunked context off",
		    P, e->cfg.max_num_tokens);
		return false;
	}
	return true;
}

/* The prompt log-prob arrays, all NAN until computed. False: the request has been failed. */
static bool intake_prompt_logprobs(struct engine *e, struct ereq *er)
{
	struct request *r = er->r;
	int32_t P = r->n_prompt;
	if (r->prompt_logprobs < 0)
		return true;
	r->prompt_lp = malloc((size_t)P * sizeof *r->prompt_lp);
	if (r->prompt_logprobs > 0)
		r->prompt_top = calloc((size_t)P, sizeof *r->prompt_top);
	if (!r->prompt_lp || (r->prompt_logprobs > 0 && !r->prompt_top)) {
		fail_req(e, er, "internal", "out of memory");
		return false;
	}
	for (int32_t i = 0; i < P; i++)
		r->prompt_lp[i] = NAN;
	if (r->prompt_top)
		r->prompt_top[0].token = r->prompt_ids[0];
	return true;
}

/* A copy of what sample i of r needs to run: prompt ids, stops, sampling with seed +
 * i, logprobs (not prompt log-probs: the root computes those once). NULL: no memory. */
static struct request *sample_clone(const struct request *r, int32_t i)
{
	struct request *c = req_new();
	if (!c)
		return NULL;
	c->seq = r->seq;
	c->line = r->line;
	c->max_tokens = r->max_tokens;
	c->sampling = r->sampling;
	c->sampling.seed = r->sampling.seed + (uint64_t)i;
	c->ignore_eos = r->ignore_eos;
	c->logprobs = r->logprobs;
	c->n = 1;
	/* the logit controls constrain_step reads from the request; the grammar state and
	 * bad-word sequences come with the root's constraint, cloned at the fork */
	c->min_tokens = r->min_tokens;
	if (r->n_bias > 0) {
		c->bias_ids = malloc((size_t)r->n_bias * sizeof *c->bias_ids);
		c->bias_vals = malloc((size_t)r->n_bias * sizeof *c->bias_vals);
		if (!c->bias_ids || !c->bias_vals) {
			req_free(c);
			return NULL;
		}
		memcpy(c->bias_ids, r->bias_ids, (size_t)r->n_bias * sizeof *c->bias_ids);
		memcpy(c->bias_vals, r->bias_vals, (size_t)r->n_bias * sizeof *c->bias_vals);
		c->n_bias = r->n_bias;
	}
	c->n_prompt = r->n_prompt;
	c->prompt_ids = malloc((size_t)r->n_prompt * sizeof *c->prompt_ids);
	c->stop = r->n_stop ? calloc((size_t)r->n_stop, sizeof *c->stop) : NULL;
	c->stop_token_ids = r->n_stop_token_ids
				? malloc((size_t)r->n_stop_token_ids * sizeof *c->stop_token_ids)
				: NULL;
	bool ok = c->prompt_ids && (!r->n_stop || c->stop) &&
		  (!r->n_stop_token_ids || c->stop_token_ids);
	if (ok) {
		memcpy(c->prompt_ids, r->prompt_ids, (size_t)r->n_prompt * sizeof *c->prompt_ids);
		for (int32_t k = 0; k < r->n_stop; k++, c->n_stop++)
			if (!(c->stop[k] = strdup(r->stop[k])))
				ok = false;
		if (r->n_stop_token_ids)
			memcpy(c->stop_token_ids, r->stop_token_ids,
			       (size_t)r->n_stop_token_ids * sizeof *c->stop_token_ids);
		c->n_stop_token_ids = r->n_stop_token_ids;
	}
	if (!ok) {
		req_free(c);
		return NULL;
	}
	return c;
}

/* n > 1: the kids (samples 1..n-1, not yet in the scheduler) and the choices array.
 * False: the request has been failed. */
static bool make_kids(struct engine *e, struct ereq *er, int32_t count);

static bool intake_samples(struct engine *e, struct ereq *er, int64_t n_max)
{
	struct request *r = er->r;
	if (r->n <= 1 || r->beam_width > 1)
		return true;
	if (r->n > e->cfg.max_batch_size) {
		fail_req(e, er, "invalid_request",
			 "n = %d samples do not fit a batch of max_batch_size %d", r->n,
			 e->cfg.max_batch_size);
		return false;
	}
	/* no-evict and static reserve the whole family: the prompt's full blocks once, the
	 * rest n times (max-util may pause samples instead) */
	int64_t need = sched_blocks_needed(e->sched, n_max - 1, r->n_prompt, r->n);
	if ((e->cfg.policy == ENGINE_POLICY_NO_EVICT || e->cfg.policy == ENGINE_POLICY_STATIC) &&
	    need > kv_n_blocks(e->pool)) {
		fail_req(e, er, "too_long",
			 "n = %d samples of prompt + max_tokens need %lld KV blocks but the pool "
			 "has %d",
			 r->n, (long long)need, kv_n_blocks(e->pool));
		return false;
	}
	r->choices = calloc((size_t)r->n, sizeof *r->choices);
	er->kids = calloc((size_t)(r->n - 1), sizeof *er->kids);
	if (!r->choices || !er->kids) {
		fail_req(e, er, "internal", "out of memory");
		return false;
	}
	r->n_choices = r->n;
	return make_kids(e, er, r->n);
}

/* er's kids 1..count-1 (er->kids has room for them), not yet in the scheduler. False:
 * the request has been failed. */
static bool make_kids(struct engine *e, struct ereq *er, int32_t count)
{
	struct request *r = er->r;
	for (int32_t i = 1; i < count; i++) {
		struct ereq *k = calloc(1, sizeof *k);
		struct request *kr = k ? sample_clone(r, i) : NULL;
		if (!kr) {
			free(k);
			fail_req(e, er, "internal", "out of memory");
			return false;
		}
		k->r = kr;
		k->ord = er->ord;
		k->parent = er;
		k->sample = i;
		k->sp_gen = kr->sampling;
		k->sp_gen.n_top = kr->logprobs > 0 ? kr->logprobs : 0;
		if (e->tok)
			tok_stream_init(&k->ts, e->tok);
		sampler_rng_seed(&k->rng, kr->sampling.seed);
		k->sq.order = er->ord;
		k->sq.user = k;
		k->sq.prompt = kr->prompt_ids;
		k->sq.n_prompt = kr->n_prompt;
		k->sq.cache_lookup = true;
		k->sq.n_samples = 1;
		er->kids[er->n_kids++] = k;
		er->n_live_kids++;
	}
	return true;
}

/* Beam search (beam_width > 1): the refusals (beam.h), the whole family's KV against the
 * pool (every policy reserves it: beams are never paused), the search state and the
 * beams 1..W-1. False: the request has been failed. */
static bool intake_beam(struct engine *e, struct ereq *er, int64_t n_max)
{
	struct request *r = er->r;
	char msg[200];
	const char *code = beam_refusal(r, e->cfg.max_batch_size, msg, sizeof msg);
	if (code) {
		fail_req(e, er, code, "%s", msg);
		return false;
	}
	if (r->beam_width <= 1)
		return true;
	if (e->kv_window > 0) {
		/* beams re-share and copy block tables at every step; tables with blocks given
		 * back behind the window are not part of that (scheduler.h) */
		fail_req(e, er, "invalid_request",
			 "beam search is not supported on a model whose every layer has a sliding "
			 "window");
		return false;
	}
	int32_t W = r->beam_width;
	int64_t full = kv_blocks_for(e->pool, n_max - 1);
	int64_t shared = r->n_prompt / kv_block_size(e->pool);
	if (shared > full)
		shared = full;
	int64_t need = shared + (int64_t)W * (full - shared);
	if (need > kv_n_blocks(e->pool)) {
		fail_req(e, er, "too_long",
			 "beam_width = %d beams of prompt + max_tokens need %lld KV blocks but the "
			 "pool has %d",
			 W, (long long)need, kv_n_blocks(e->pool));
		return false;
	}
	struct beam_params bp = {.width = W,
				 .n_return = r->n,
				 .length_penalty = r->length_penalty,
				 .early_stopping = r->early_stopping,
				 .max_out = r->max_tokens,
				 .logprobs = r->logprobs};
	struct bg_err berr = {0};
	er->kids = calloc((size_t)(W - 1), sizeof *er->kids);
	if (!er->kids || beam_create(&bp, &er->beam, &berr) != BG_OK) {
		fail_req(e, er, "internal", "%s", berr.msg[0] ? berr.msg : "out of memory");
		return false;
	}
	if (!make_kids(e, er, W))
		return false;
	for (int32_t k = 0; k < er->n_kids; k++) {
		er->kids[k]->sq.gang = true;
		er->kids[k]->sp_gen.n_top = beam_n_top(&bp, e->be->n_vocab);
	}
	return true;
}

/* The request's constraint state; false after failing the request. Every backend applies
 * the constraint a sample row carries (the CPU's sampler_constrain, CUDA's gpu/mask.cu). */
static bool constrain_begin(struct engine *e, struct ereq *er)
{
	struct bg_err cerr = {0};
	if (!e->tok) {
		fail_req(e, er, "invalid_request", "constraints need the model's vocabulary");
		return false;
	}
	if (!e->cvocab &&
	    constrain_vocab_create(e->tok, e->cfg.constrain_threads, &e->cvocab, &cerr) != BG_OK) {
		fail_req(e, er, "internal", "%s", cerr.msg);
		return false;
	}
	if (constrain_create(e->cvocab, er->r, &er->con, &cerr) != BG_OK) {
		fail_req(e, er, "invalid_request", "%s", cerr.msg);
		return false;
	}
	return true;
}

/* Sampling state and the scheduler's sequence; queues it for admission. */
static void intake_enqueue(struct engine *e, struct ereq *er, int64_t n_max)
{
	struct request *r = er->r;
	er->sp_gen = r->sampling;
	er->sp_gen.n_top = r->logprobs > 0 ? r->logprobs : 0;
	er->sp_prompt = r->sampling;
	er->sp_prompt.n_top = r->prompt_logprobs > 0 ? r->prompt_logprobs : 0;
	if (e->tok)
		tok_stream_init(&er->ts, e->tok);
	if (constrain_wanted(r) && !constrain_begin(e, er))
		return;
	er->sq.order = er->ord;
	er->sq.n_tokens = r->n_prompt;
	er->sq.n_kv_max = (int32_t)(n_max - 1);
	er->sq.user = er;
	er->sq.prompt = r->prompt_ids;
	er->sq.n_prompt = r->n_prompt;
	er->sq.cache_lookup = r->prompt_logprobs < 0;
	er->sq.n_samples = r->n;
	if (er->beam) {
		struct beam_params bp = {.width = r->beam_width, .logprobs = r->logprobs};
		er->sp_gen.n_top = beam_n_top(&bp, e->be->n_vocab);
		er->sq.n_samples = r->beam_width;
		er->sq.gang = true;
	}
	struct bg_err qerr = {0};
	if (sched_enqueue(e->sched, &er->sq, &qerr) != BG_OK)
		fail_req(e, er, "internal", "%s", qerr.msg);
}

/* Tokenizes and validates; on a problem fails the request (it is emitted in its turn). */
static void intake(struct engine *e, struct request *r)
{
	struct ereq *er = intake_place(e, r);
	if (!er)
		return;
	if (r->error.code[0]) {
		complete(e, er, REQ_FINISH_ERROR);
		return;
	}
	if (!intake_check_fields(e, er))
		return;
	bool ok;
	if (r->input_ids)
		ok = intake_ids(e, er);
	else if (r->prompt)
		ok = intake_tokenize(e, er);
	else {
		fail_req(e, er, "invalid_request", "request has neither prompt nor input_ids");
		ok = false;
	}
	int64_t n_max = 0;
	if (!ok || !intake_check_length(e, er, &n_max) || !intake_prompt_logprobs(e, er) ||
	    !intake_samples(e, er, n_max) || !intake_beam(e, er, n_max))
		return;
	intake_enqueue(e, er, n_max);
}

/* ---- preemption by swap ---- */

static bool on_pause(void *user, struct sched_seq *q)
{
	struct engine *e = user;
	struct ereq *er = q->user;
	if (e->cfg.preempt != ENGINE_PREEMPT_SWAP || !e->be->ops->kv_swap_out ||
	    !e->be->ops->kv_swap_in || e->be->block_bytes == 0)
		return false;
	int32_t n = kv_blocks_for(e->pool, q->n_computed);
	size_t bytes = (size_t)n * e->be->block_bytes;
	void *buf = malloc(bytes);
	if (!buf)
		return false; /* recompute instead */
	struct bg_err err = {0};
	if (e->be->ops->kv_swap_out(e->be->ctx, q->kv.blocks, n, buf, &err) != BG_OK) {
		free(buf);
		return false;
	}
	er->swap_buf = buf;
	er->swap_bytes = bytes;
	e->swap_host_bytes += bytes;
	e->iter_swap_out += (int64_t)bytes;
	e->tot.swap_out_bytes += (int64_t)bytes;
	return true;
}

/* ---- tokens and stop conditions ---- */

static int32_t token_at(const struct request *r, int32_t pos)
{
	return pos < r->n_prompt ? r->prompt_ids[pos] : r->out_ids[pos - r->n_prompt];
}

static bool out_reserve(struct ereq *er)
{
	struct request *r = er->r;
	if (r->n_out < er->out_cap)
		return true;
	int32_t cap = er->out_cap ? er->out_cap * 2 : 16;
	if (cap > r->max_tokens)
		cap = r->max_tokens > r->n_out ? r->max_tokens : r->n_out + 1;
	int32_t *ids = realloc(r->out_ids, (size_t)cap * sizeof *ids);
	if (!ids)
		return false;
	r->out_ids = ids;
	if (r->logprobs >= 0) {
		float *lp = realloc(r->out_logprobs, (size_t)cap * sizeof *lp);
		if (!lp)
			return false;
		r->out_logprobs = lp;
	}
	if (r->logprobs > 0) {
		struct sampler_result *t = realloc(r->out_top, (size_t)cap * sizeof *t);
		if (!t)
			return false;
		r->out_top = t;
	}
	er->out_cap = cap;
	return true;
}

/* Looks for a stop string ending in the bytes after old_len; cuts the text at the
 * earliest match. */
static bool match_stop(struct request *r, size_t old_len)
{
	size_t best = SIZE_MAX;
	for (int32_t i = 0; i < r->n_stop; i++) {
		size_t L = strlen(r->stop[i]);
		if (L == 0 || r->text_len < L)
			continue;
		size_t start = old_len >= L - 1 ? old_len - (L - 1) : 0;
		const char *p = memmem(r->text + start, r->text_len - start, r->stop[i], L);
		if (p && (size_t)(p - r->text) < best)
			best = (size_t)(p - r->text);
	}
	if (best == SIZE_MAX)
		return false;
	r->text_len = best;
	r->text[best] = 0;
	return true;
}

/* Appends a sampled token; returns the finish reason it causes (NONE to go on). */
static enum req_finish append_token(struct engine *e, struct ereq *er,
				    const struct sampler_result *res)
{
	struct request *r = er->r;
	if (!out_reserve(er) || !text_ensure(r, &er->text_cap))
		return REQ_FINISH_ERROR;
	int32_t id = res->token;
	r->out_ids[r->n_out] = id;
	if (r->logprobs >= 0)
		r->out_logprobs[r->n_out] = res->logprob;
	if (r->logprobs > 0) {
		/* Only the first n_top alternatives are defined; zero the rest so the stored
		 * result is deterministic byte for byte. */
		struct sampler_result *t = &r->out_top[r->n_out];
		*t = *res;
		for (int32_t k = t->n_top; k < SAMPLER_MAX_TOP; k++) {
			t->top_ids[k] = 0;
			t->top_logprobs[k] = 0.0f;
		}
	}
	r->cum_logprob += res->logprob;
	r->n_out++;
	e->tot.output_tokens++;
	if (r->n_out == 1) {
		r->t_first_token = now_s();
		r->ttft_ms = (r->t_first_token - r->t_arrival) * 1e3;
	}
	enum req_finish f = REQ_FINISH_NONE;
	bool text_stop = false;
	for (int32_t i = 0; i < r->n_stop_token_ids && f == REQ_FINISH_NONE; i++)
		if (r->stop_token_ids[i] == id)
			f = REQ_FINISH_STOP;
	if (f == REQ_FINISH_NONE && !r->ignore_eos && e->tok && tok_is_eog(e->tok, id))
		f = REQ_FINISH_EOS;
	if (f == REQ_FINISH_NONE && e->tok) {
		size_t old = r->text_len;
		if (tok_stream_push(&er->ts, id, &r->text, &r->text_len, &er->text_cap) < 0)
			return REQ_FINISH_ERROR;
		if (r->n_stop > 0 && match_stop(r, old)) {
			f = REQ_FINISH_STOP;
			text_stop = true;
		}
	}
	if (f == REQ_FINISH_NONE &&
	    (r->n_out >= r->max_tokens || r->n_prompt + r->n_out >= e->max_seq_len))
		f = REQ_FINISH_LENGTH;
	if (f != REQ_FINISH_NONE && !text_stop && e->tok) {
		/* Bytes of an incomplete character still held belong to the text. */
		size_t old = r->text_len;
		if (tok_stream_flush(&er->ts, &r->text, &r->text_len, &er->text_cap) < 0)
			return REQ_FINISH_ERROR;
		if (r->n_stop > 0 && r->text_len > old && match_stop(r, old))
			f = REQ_FINISH_STOP;
	}
	return f;
}

/* ---- one iteration ---- */

/* reused / (reused + missed), 0 when nothing was looked up. */
static double hit_rate(int64_t reused, int64_t missed)
{
	return reused + missed > 0 ? (double)reused / (double)(reused + missed) : 0.0;
}

static void write_stats(struct engine *e, const struct sched_plan *plan, double lat_ms)
{
	FILE *f = e->cfg.stats;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char stamp[40];
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
	struct kv_stats ks;
	kv_get_stats(e->pool, &ks);
	struct backend_mem m = {0};
	if (e->be->ops->mem_info)
		e->be->ops->mem_info(e->be->ctx, &m);
	size_t be_bytes = m.weight_bytes + m.kv_bytes + m.workspace_bytes;
	size_t dev = m.on_device ? be_bytes : 0;
	size_t host = (m.on_device ? 0 : be_bytes) + e->swap_host_bytes;
	fprintf(f,
		"{\"timestamp\": \"%s.%03ldZ\", \"iter\": %lld, \"iter_latency_ms\": %.3f, "
		"\"num_active_requests\": %d, \"max_num_active_requests\": %d, "
		"\"num_queued_requests\": %d, \"num_new_active_requests\": %d, "
		"\"num_completed_requests\": %d, "
		"\"kv_cache\": {\"max_num_blocks\": %d, \"free_num_blocks\": %d, "
		"\"used_num_blocks\": %d, \"tokens_per_block\": %d, \"alloc_new_blocks\": %lld, "
		"\"reused_blocks\": %lld, \"missed_blocks\": %lld, \"cache_hit_rate\": %.4f, "
		"\"cached_blocks\": %d, \"held_requests\": %d, \"window_dropped_blocks\": %lld, "
		"\"swap_out_bytes\": %lld, \"swap_in_bytes\": %lld, \"recomputed_tokens\": %lld}, ",
		stamp, ts.tv_nsec / 1000000L, (long long)e->iter, lat_ms, plan->n_running,
		e->cfg.max_batch_size, plan->n_waiting, plan->n_new, e->iter_completed, ks.n_blocks,
		ks.free_blocks, ks.used_blocks, ks.block_size, (long long)ks.alloc_new,
		(long long)ks.reused_new, (long long)ks.missed_new,
		hit_rate(ks.reused_new, ks.missed_new), ks.cached_blocks, plan->n_held,
		(long long)ks.dropped_new, (long long)e->iter_swap_out, (long long)e->iter_swap_in,
		(long long)e->iter_recomputed);
	if (e->cfg.policy == ENGINE_POLICY_STATIC)
		fprintf(
		    f,
		    "\"static\": {\"num_scheduled_requests\": %d, \"num_context_requests\": %d, "
		    "\"num_ctx_tokens\": %d, \"num_gen_tokens\": %d, \"empty_gen_slots\": %d}, ",
		    plan->n, plan->n_ctx, plan->n_ctx_tokens, plan->n_gen_tokens,
		    plan->empty_gen_slots);
	else
		fprintf(
		    f,
		    "\"inflight\": {\"num_scheduled_requests\": %d, \"num_context_requests\": %d, "
		    "\"num_gen_requests\": %d, \"num_paused_requests\": %d, "
		    "\"num_ctx_tokens\": %d, \"num_gen_tokens\": %d, \"micro_batch_id\": 0}, ",
		    plan->n, plan->n_ctx, plan->n_gen, plan->n_paused, plan->n_ctx_tokens,
		    plan->n_gen_tokens);
	if (e->cfg.policy == ENGINE_POLICY_ADAPTIVE)
		fprintf(f, "\"adaptive\": {\"token_budget\": %lld, \"promised_tokens\": %lld}, ",
			(long long)plan->token_budget, (long long)plan->promised_tokens);
	fprintf(f, "\"mem\": {\"device_bytes\": %zu, \"host_bytes\": %zu}}\n", dev, host);
	errno = 0;
	if ((fflush(f) != 0 || ferror(f)) && !e->stats_errno)
		e->stats_errno = errno ? errno : EIO;
}

/* Fails every live request of step buffer bi, whose forward or sample failed (their KV is
 * garbage). */
static void fail_step(struct engine *e, int32_t bi, const char *what, const struct bg_err *berr)
{
	struct ebuf *b = &e->buf[bi];
	for (int32_t i = 0; i < b->n; i++) {
		struct ereq *er = b->steps[i].er;
		if (er && !er->done && er->sq.state != SCHED_DONE)
			fail_req(e, er, "backend_error", "%s failed: %s", what, berr->msg);
	}
}

static bool grow(void **p, size_t elem, int32_t n)
{
	void *q = realloc(*p, (size_t)n * elem);
	if (!q)
		return false;
	*p = q;
	return true;
}

static enum bg_status scratch_reserve(struct engine *e, struct ebuf *b, int32_t n_seqs,
				      int32_t n_tokens, int32_t n_rows, struct bg_err *err)
{
	if (n_seqs > b->seq_cap) {
		if (!grow((void **)&b->bseqs, sizeof *b->bseqs, n_seqs) ||
		    !grow((void **)&b->steps, sizeof *b->steps, n_seqs))
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the batch");
		b->seq_cap = n_seqs;
	}
	if (n_tokens > b->tok_cap) {
		if (!grow((void **)&b->btok, sizeof *b->btok, n_tokens) ||
		    !grow((void **)&b->prow, sizeof *b->prow, n_tokens) ||
		    !grow((void **)&b->bwant, sizeof *b->bwant, n_tokens))
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the batch");
		b->tok_cap = n_tokens;
	}
	if (n_rows > b->res_cap) {
		if (!grow((void **)&b->res, sizeof *b->res, n_rows))
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the batch");
		b->res_cap = n_rows;
	}
	if (n_rows > e->row_cap) {
		if (!grow((void **)&e->rows, sizeof *e->rows, n_rows) ||
		    !grow((void **)&e->cjobs, sizeof *e->cjobs, n_rows) ||
		    !grow((void **)&e->cjob_row, sizeof *e->cjob_row, n_rows))
			return bg_fail(err, BG_ERR_NOMEM, "out of memory for the batch");
		e->row_cap = n_rows;
	}
	return BG_OK;
}

/* True when q's step samples the first token of a request with n > 1: its other samples
 * fork from it now. */
static bool forks_now(const struct sched_seq *q)
{
	const struct ereq *er = q->user;
	return q->step_samples && !q->forked && !er->parent && er->r->n > 1 && er->n_kids > 0 &&
	       !er->beam;
}

static bool constrain_apply(struct engine *e, struct ereq *er, const struct sampler_result *res);

/* Adds er's kids to the scheduler sharing its blocks, and appends each one's first token
 * res[k] (a kid may finish at once). */
static enum bg_status fork_samples(struct engine *e, struct ereq *er,
				   const struct sampler_result *res, struct bg_err *err)
{
	int32_t n = er->n_kids;
	struct sched_seq *from[REQ_MAX_N], *to[REQ_MAX_N];
	for (int32_t k = 0; k < n; k++) {
		struct ereq *kid = er->kids[k];
		enum bg_status st = sched_fork(e->sched, &er->sq, &kid->sq, err);
		if (st != BG_OK)
			return st;
		from[k] = &er->sq;
		to[k] = &kid->sq;
		kid->r->t_arrival = er->r->t_arrival;
		/* each sample its own constraint, in the root's state before its first token
		 * (the root accepts its own after this): the same mask its first row used */
		if (er->con) {
			kid->con = constrain_clone(er->con, e->cvocab);
			kid->con_dead = er->con_dead;
			kid->con_err = er->con_err;
		}
	}
	/* each sample starts from the prompt's state (recurrent models) */
	enum bg_status st = copy_states(e, from, to, n, err);
	if (st != BG_OK)
		return st;
	/* kids may be freed as they finish: walk a copy */
	struct ereq *live[REQ_MAX_N];
	memcpy(live, er->kids, (size_t)n * sizeof *live);
	for (int32_t k = 0; k < n; k++) {
		if (er->con && !live[k]->con) {
			fail_req(e, live[k], "internal", "out of memory for constraints");
			continue;
		}
		if (live[k]->con && !constrain_apply(e, live[k], &res[k]))
			continue;
		enum req_finish f = append_token(e, live[k], &res[k]);
		if (f == REQ_FINISH_ERROR)
			fail_req(e, live[k], "internal", "out of memory for the output");
		else if (f != REQ_FINISH_NONE)
			complete(e, live[k], f);
	}
	return BG_OK;
}

/* Checks the sampled token against the request's constraint and advances it; false after
 * the request ended here (no token was allowed: "stop" when the grammar is complete,
 * else an error). */
static bool constrain_apply(struct engine *e, struct ereq *er, const struct sampler_result *res)
{
	struct bg_err cerr = {0};
	if (er->con_err.msg[0]) {
		fail_req(e, er, "grammar", "%s", er->con_err.msg);
		return false;
	}
	if (er->con_dead) {
		if (constrain_complete(er->con))
			complete(e, er, REQ_FINISH_STOP);
		else
			fail_req(e, er, "grammar",
				 "no token of the vocabulary can continue the output");
		return false;
	}
	if (constrain_accept(er->con, e->cvocab, res->token, &cerr) != BG_OK) {
		fail_req(e, er, "grammar", "%s", cerr.msg);
		return false;
	}
	return true;
}

/* ---- one step: build, rows, apply ----
 *
 * Overlap (issue 17, item 6; TensorRT-LLM's overlap scheduler, vLLM's async scheduling).
 * Serially a step is: plan, forward, sample, apply the tokens on the host (append, stop
 * checks, results), and the next plan feeds the tokens from the host. With cfg.overlap
 * the iteration is reordered so that the forward of step n + 1 is started before the
 * host applies step n's tokens:
 *
 *   plan n+1 -> build n+1 -> forward n+1 -> apply n -> rows n+1 -> sample n+1 -> advance n+1
 *
 * What the host does not know when it plans and builds step n + 1 is step n's tokens:
 * a decode row whose token is still pending names the sample row that draws it
 * (backend_seq.prev_rows), and the backend feeds that token itself. The scheduler is
 * told that every sampling sequence appended a token (sched_advance) as soon as step n
 * is sampled: counts do not depend on which token it was. A sequence that used its last
 * position (max_tokens, max_seq_len: n_tokens > n_kv_max) is never planned again, so a
 * length finish costs nothing. A request that stops at step n by its token (EOS, a stop
 * id, a stop string, a grammar, a NaN row) was already planned into step n + 1: its row
 * there is run and thrown away — apply n finishes it before rows n + 1 are built, so it
 * draws nothing (its RNG does not move), nothing reaches its result, and its entry is
 * "dead". Its blocks are freed when apply n finishes it, after forward n + 1 was issued:
 * an asynchronous backend runs everything on one stream in issue order (what
 * BACKEND_CAP_ASYNC promises), so a block handed to another sequence is written only
 * after forward n + 1 is done with it. That wasted
 * position is within the request's reservation (n_tokens <= n_kv_max), and it lies past
 * the prompt, in a block no other table shares (the scheduler copied it on write), so
 * no cached block changes. The wasted rows show only in the statistics (one more
 * generation token in one more iteration per such request).
 *
 * Sampling stays after apply n, so everything a row needs on the host is known when it
 * is built: grammar masks, penalties and logit bias over the full history, n_top. Two
 * kinds of step are applied serially (their results decide what the scheduler plans
 * next): a step with a beam (beam_advance re-points tables), and a step where a request
 * with n > 1 forks its samples (sched_fork). Their inputs may still name the previous
 * step's rows. Which rows score prompt tokens is fixed when a step is built (plp_next
 * may move before its rows are). Statistics lines count a request's completion one
 * iteration later.
 * An asynchronous backend (BACKEND_CAP_ASYNC, which --overlap auto keys on: CUDA)
 * returns from sample() before the results are written (each step buffer has its own
 * array for them): step_apply waits for them (ops->sample_wait), which is after forward
 * n + 1 was issued, so the device computes while the host applies step n, and also
 * while it plans and builds step n + 2 (forward and sample n + 1 are queued then).
 * A synchronous backend (CPU) runs the same order, each call complete when it returns,
 * which is how the engine side is tested: results are bitwise those of the serial
 * loop (test_invariance, test_engine; its fake backend also plays an asynchronous one
 * whose results arrive only at sample_wait). */

/* Builds step buffer bi for plan: copy-on-write, swap-ins, and the forward's inputs. */
static enum bg_status step_build(struct engine *e, const struct sched_plan *plan, int32_t bi,
				 struct bg_err *err)
{
	const struct backend_ops *ops = e->be->ops;
	struct ebuf *b = &e->buf[bi];
	for (int32_t i = 0; i < b->n; i++) /* retire the step before last */
		if (b->steps[i].er)
			b->steps[i].er->at[bi] = NULL;
	b->n = 0;
	int32_t extra = 0, ntok = 0, nlog = 0;
	bool serial = false;
	for (int32_t i = 0; i < plan->n; i++) {
		const struct ereq *er = plan->seqs[i]->user;
		if (forks_now(plan->seqs[i]))
			extra += er->r->n - 1;
		serial |= forks_now(plan->seqs[i]) || er->beam || (er->parent && er->parent->beam);
	}
	b->overlap = e->overlap && !serial;
	int32_t n_tok = plan->n_ctx_tokens + plan->n_gen_tokens;
	enum bg_status st = scratch_reserve(e, b, plan->n, n_tok, n_tok + extra, err);
	if (st != BG_OK)
		return st;
	/* State checkpoints taken this step, before the forward reads the slots. */
	if ((st = restore_states(e, err)) != BG_OK)
		return st;
	/* Copy-on-write first: a source block released this step may be handed to a
	 * sequence that swaps in below. */
	for (int32_t i = 0; i < plan->n; i++) {
		struct sched_seq *q = plan->seqs[i];
		struct bg_err cerr = {0};
		if (q->step_cow_src >= 0 &&
		    (!ops->kv_copy ||
		     ops->kv_copy(e->be->ctx, q->step_cow_src, q->step_cow_dst, &cerr) != BG_OK))
			return bg_fail(err, BG_ERR_DEVICE, "KV block copy failed: %s", cerr.msg);
	}
	for (int32_t i = 0; i < plan->n; i++) {
		struct sched_seq *q = plan->seqs[i];
		struct ereq *er = q->user;
		struct request *r = er->r;
		if (q->step_swap_in) {
			struct bg_err serr = {0};
			if (ops->kv_swap_in(e->be->ctx, q->kv.blocks, q->n_swapped_blocks,
					    er->swap_buf, &serr) != BG_OK)
				return bg_fail(err, BG_ERR_DEVICE, "KV swap-in failed: %s",
					       serr.msg);
			e->swap_host_bytes -= er->swap_bytes;
			e->iter_swap_in += (int64_t)er->swap_bytes;
			e->tot.swap_in_bytes += (int64_t)er->swap_bytes;
			free(er->swap_buf);
			er->swap_buf = NULL;
			er->swap_bytes = 0;
		}
		if (q->recomputing) {
			e->iter_recomputed += q->step_tokens;
			e->tot.recomputed_tokens += q->step_tokens;
		}
		int32_t K = q->n_computed, c = q->step_tokens;
		BG_ASSERT(ntok + c <= b->tok_cap);
		bool pending = false;
		int32_t lrow0 = nlog;
		for (int32_t j = 0; j < c; j++) {
			int32_t p = K + j;
			b->prow[ntok + j] = -1;
			if (p < r->n_prompt + r->n_out) {
				b->btok[ntok + j] = token_at(r, p);
			} else {
				/* drawn by the previous step, not applied yet */
				const struct estep *ps = er->at[bi ^ 1];
				BG_ASSERT(p == r->n_prompt + r->n_out && ps && ps->srow >= 0);
				b->btok[ntok + j] = 0;
				b->prow[ntok + j] = ps->srow;
				pending = true;
			}
			bool plp = q->step_ctx && r->prompt_logprobs >= 0 && p < r->n_prompt - 1 &&
				   p >= er->plp_next;
			b->bwant[ntok + j] = plp || (q->step_samples && j == c - 1);
			nlog += b->bwant[ntok + j];
		}
		b->steps[i] = (struct estep){.er = er,
					     .K = K,
					     .c = c,
					     .tok0 = ntok,
					     .lrow0 = lrow0,
					     .srow = -1,
					     .ctx = q->step_ctx,
					     .samples = q->step_samples,
					     .recomputing = q->recomputing,
					     .fork = forks_now(q)};
		er->at[bi] = &b->steps[i];
		b->bseqs[i] = (struct backend_seq){
		    .tokens = &b->btok[ntok],
		    .n_tokens = c,
		    .pos0 = K,
		    .block_table = q->kv.blocks,
		    .n_blocks = q->kv.n,
		    .want_logits = &b->bwant[ntok],
		    .prev_rows = pending ? &b->prow[ntok] : NULL,
		    .state_slot = q->state_slot,
		};
		ntok += c;
	}
	b->n = plan->n;
	b->nlog = nlog;
	return BG_OK;
}

/* Builds the sample rows of step buffer bi (e->rows, e->nrows) for its entries still
 * running, with their grammar masks. */
static void step_rows(struct engine *e, int32_t bi)
{
	struct ebuf *b = &e->buf[bi];
	int32_t nrows = 0, njobs = 0;
	for (int32_t i = 0; i < b->n; i++) {
		struct estep *s = &b->steps[i];
		struct ereq *er = s->er;
		s->row0 = nrows;
		s->srow = -1;
		s->dead = !er || er->sq.state != SCHED_RUNNING;
		e->tot.overlap_dropped += s->dead;
		if (s->dead)
			continue;
		struct request *r = er->r;
		int32_t lrow = s->lrow0;
		for (int32_t j = 0; j < s->c; j++) {
			if (!b->bwant[s->tok0 + j])
				continue;
			/* a wanted row other than the one that samples scores a prompt token
			 * (decided in step_build: plp_next may have moved since) */
			int32_t p = s->K + j;
			int32_t forced = -1;
			const struct sampler_params *sp = &er->sp_gen;
			if (!(s->samples && j == s->c - 1)) {
				forced = r->prompt_ids[p + 1];
				sp = &er->sp_prompt;
			} else {
				s->srow = nrows;
			}
			struct backend_sample_row *row = &e->rows[nrows];
			row->logits_row = lrow++;
			row->forced = forced;
			row->params = sp;
			row->history.prompt = r->prompt_ids;
			row->history.n_prompt = r->n_prompt;
			row->history.output = r->out_ids;
			row->history.n_output = r->n_out;
			row->rng = &er->rng;
			row->constraint = NULL;
			if (er->con && forced < 0) {
				/* computed below, with the batch's other rows */
				er->con_err.msg[0] = 0;
				e->cjob_row[njobs] = nrows;
				e->cjobs[njobs++] = (struct constrain_job){.c = er->con,
									   .r = r,
									   .sc = &er->sc,
									   .dead = &er->con_dead,
									   .err = &er->con_err};
			}
			nrows++;
		}
		/* the first token of every other sample: the same logits, its own RNG */
		for (int32_t k = 0; s->fork && k < er->n_kids; k++) {
			struct ereq *kid = er->kids[k];
			struct backend_sample_row *row = &e->rows[nrows++];
			row->logits_row = lrow - 1;
			row->forced = -1;
			row->params = &kid->sp_gen;
			row->history.prompt = kid->r->prompt_ids;
			row->history.n_prompt = kid->r->n_prompt;
			row->history.output = NULL;
			row->history.n_output = 0;
			row->rng = &kid->rng;
			/* the root's mask (set below): every sample starts in the same state */
			row->constraint = NULL;
		}
	}
	/* The grammar masks of all rows at once, in parallel: each depends only on its own
	 * request's state, so this changes the time and nothing else. A row's forked samples
	 * (the rows right after it, on the same logits) take its mask. */
	if (njobs > 0)
		constrain_step_all(e->cvocab, e->cjobs, njobs);
	for (int32_t k = 0; k < njobs; k++) {
		struct constrain_job *jb = &e->cjobs[k];
		if (jb->st != BG_OK)
			*jb->dead = true;
		if (*jb->dead)
			continue;
		int32_t rw = e->cjob_row[k];
		int32_t lr = e->rows[rw].logits_row;
		for (int32_t f = rw; f < nrows && e->rows[f].logits_row == lr; f++)
			e->rows[f].constraint = jb->sc;
	}
	e->nrows = b->nres = nrows;
}

/* Overlap: tells the scheduler what step buffer bi did before its tokens are applied. */
static enum bg_status step_advance(struct engine *e, int32_t bi, struct bg_err *err)
{
	struct ebuf *b = &e->buf[bi];
	enum bg_status st = BG_OK;
	for (int32_t i = 0; i < b->n && st == BG_OK; i++)
		if (!b->steps[i].dead)
			st = advance(e, &b->steps[i].er->sq, b->steps[i].samples, err);
	return st;
}

/* Are r's token and alternatives ids of a vocabulary of n tokens? */
static bool result_in_vocab(const struct sampler_result *r, int32_t n)
{
	if (r->token < 0 || r->token >= n || r->n_top < 0 || r->n_top > SAMPLER_MAX_TOP)
		return false;
	for (int32_t t = 0; t < r->n_top; t++)
		if (r->top_ids[t] < 0 || r->top_ids[t] >= n)
			return false;
	return true;
}

/* Applies the sampled rows b->res of step buffer bi: prompt log-probs, tokens, stop
 * checks, forks and beams; advances the scheduler unless step_advance did. An
 * asynchronous backend's results are waited for here, after the next step was issued;
 * when they cannot be had, the step's requests fail. */
static enum bg_status step_apply(struct engine *e, int32_t bi, bool advanced, struct bg_err *err)
{
	struct ebuf *b = &e->buf[bi];
	enum bg_status st;
	struct bg_err berr = {0};
	if (e->be->ops->sample_wait && e->be->ops->sample_wait(e->be->ctx, &berr) != BG_OK) {
		fail_step(e, bi, "sample", &berr);
		return BG_OK;
	}
	/* Tokens index the tokenizer's tables and the requests' outputs: a backend's id
	 * outside the vocabulary (a broken plugin) fails the step's requests, never reaches
	 * them. */
	for (int32_t k = 0; k < b->nres; k++)
		if (!result_in_vocab(&b->res[k], e->be->n_vocab)) {
			bg_fail(&berr, BG_ERR_DEVICE,
				"the backend returned an invalid result (token %d, %d alternatives; "
				"the vocabulary has %d tokens)",
				(int)b->res[k].token, (int)b->res[k].n_top, (int)e->be->n_vocab);
			fail_step(e, bi, "sample", &berr);
			return BG_OK;
		}
	for (int32_t i = 0; i < b->n; i++) {
		const struct estep *s = &b->steps[i];
		struct ereq *er = s->er;
		if (s->dead || !er)
			continue;
		struct sched_seq *q = &er->sq;
		struct request *r = er->r;
		int32_t K = s->K, c = s->c, row = s->row0;
		const struct sampler_result *sampled = NULL;
		int32_t nan_at = -1; /* the first position whose logits row held a NaN */
		for (int32_t j = 0; j < c; j++) {
			if (!b->bwant[s->tok0 + j])
				continue;
			const struct sampler_result *res = &b->res[row++];
			int32_t p = K + j;
			if (nan_at < 0 && isnan(res->logprob)) /* backend.h: a NaN logits row */
				nan_at = p;
			if (!(s->samples && j == c - 1)) { /* a prompt log-prob (step_rows) */
				r->prompt_lp[p + 1] = res->logprob;
				if (r->prompt_top) {
					struct sampler_result *t = &r->prompt_top[p + 1];
					*t = *res;
					for (int32_t k = t->n_top; k < SAMPLER_MAX_TOP; k++) {
						t->top_ids[k] = 0;
						t->top_logprobs[k] = 0.0f;
					}
				}
			} else {
				sampled = res;
			}
		}
		if (s->ctx && r->prompt_logprobs >= 0) {
			int32_t end = K + c < r->n_prompt - 1 ? K + c : r->n_prompt - 1;
			if (end > er->plp_next)
				er->plp_next = end;
		}
		if (s->ctx && !s->recomputing)
			e->tot.prompt_tokens += c;
		struct ereq *broot = er->beam			      ? er
				     : er->parent && er->parent->beam ? er->parent
								      : NULL;
		if (!advanced && (st = advance(e, q, sampled != NULL && !broot, err)) != BG_OK)
			return st;
		if (!sampled)
			continue;
		if (broot) {
			/* backend.h: a NaN logits row; beam_advance fails the search once the
			 * family's other beams of this step are collected */
			if (nan_at >= 0 && !broot->beam_nan) {
				broot->beam_nan = true;
				broot->beam_nan_at = nan_at;
			}
			/* a beam waits (held) until every beam of its family has its candidates */
			if (beam_collect(broot->beam, er->sample, sampled))
				beam_advance(e, broot);
			continue;
		}
		/* A NaN log-prob: the row's logits held a NaN (backend.h), or every token was
		 * masked out, which a dead grammar explains (constrain_apply ends it). Beams
		 * are checked above (no constraint: beam_refusal). */
		if (nan_at >= 0 && !er->con_dead) {
			/* this request only: the batch's other rows are their own */
			fail_req(e, er, "backend_error",
				 "the logits at position %d are NaN (a numerical failure in the "
				 "model)%s",
				 nan_at, er->con ? ", or the request's constraints ban every token" : "");
			continue;
		}
		if (s->fork && (st = fork_samples(e, er, &b->res[row], err)) != BG_OK)
			return st;
		if (er->con && !constrain_apply(e, er, sampled))
			continue;
		enum req_finish f = append_token(e, er, sampled);
		if (f == REQ_FINISH_ERROR)
			fail_req(e, er, "internal", "out of memory for the output");
		else if (f != REQ_FINISH_NONE)
			complete(e, er, f);
	}
	return BG_OK;
}

/* Applies the results of the overlapped step, if one waits. */
static enum bg_status apply_pending(struct engine *e, struct bg_err *err)
{
	int32_t bi = e->pend;
	if (bi < 0)
		return BG_OK;
	e->pend = -1;
	return step_apply(e, bi, true, err);
}

/* Runs one planned step: build, forward, (apply the step before), sample, and apply it
 * now or, overlapped, in the next iteration. */
static enum bg_status run_batch(struct engine *e, const struct sched_plan *plan, struct bg_err *err)
{
	const struct backend_ops *ops = e->be->ops;
	int32_t bi = e->next_buf;
	BG_ASSERT(e->pend != bi);
	enum bg_status st = step_build(e, plan, bi, err);
	if (st != BG_OK)
		return st;
	e->next_buf ^= 1;
	struct ebuf *b = &e->buf[bi];
	struct backend_batch batch = {.seqs = b->bseqs, .n_seqs = b->n, .n_logits = b->nlog};
	struct bg_err berr = {0};
	bool fwd_ok = ops->forward(e->be->ctx, &batch, &berr) == BG_OK;
	/* the host's part of the step before, while this forward runs */
	if ((st = apply_pending(e, err)) != BG_OK)
		return st;
	if (!fwd_ok) {
		fail_step(e, bi, "forward", &berr);
		return BG_OK;
	}
	step_rows(e, bi);
	if (e->nrows > 0 && ops->sample(e->be->ctx, e->rows, e->nrows, b->res, &berr) != BG_OK) {
		fail_step(e, bi, "sample", &berr);
		return BG_OK;
	}
	if (!b->overlap)
		return step_apply(e, bi, false, err);
	if ((st = step_advance(e, bi, err)) != BG_OK)
		return st;
	e->pend = bi;
	e->tot.overlap_steps++;
	return BG_OK;
}

/* ---- the loop ---- */

static void fill_progress(struct engine *e)
{
	struct kv_stats ks;
	kv_get_stats(e->pool, &ks);
	e->tot.iter = e->iter;
	e->tot.n_active = sched_n_running(e->sched);
	e->tot.n_paused = sched_n_paused(e->sched);
	e->tot.n_queued = sched_n_waiting(e->sched);
	e->tot.kv_used_blocks = ks.used_blocks;
	e->tot.kv_total_blocks = ks.n_blocks;
	e->tot.kv_peak_blocks = ks.peak_used;
	e->tot.reused_blocks = ks.reused_total - e->reused_base;
	e->tot.missed_blocks = ks.missed_total - e->missed_base;
	e->tot.elapsed_s = now_s() - e->t0;
}

/* Requests (not samples) in the scheduler: roots, and roots waiting for their kids. */
static int64_t unfinished_roots(const struct engine *e)
{
	const struct sched *s = e->sched;
	int64_t n = 0;
	int32_t nr = sched_n_running(s), np = sched_n_paused(s), nw = sched_n_waiting(s);
	for (int32_t i = 0; i < nr + np + nw; i++) {
		const struct sched_seq *q = i < nr	     ? sched_running(s)[i]
					    : i < nr + np ? sched_paused(s)[i - nr]
							  : sched_waiting_at(s, i - nr - np);
		const struct ereq *er = q->user;
		if (!er->parent) {
			n++;
		} else if (er->parent->own_done) {
			/* count the root once: at its first live kid */
			int32_t k = 0;
			while (!er->parent->kids[k])
				k++;
			n += er->parent->kids[k] == er;
		}
	}
	return n;
}

/* True when the earliest request not yet emitted is still waiting for admission: it
 * must be admitted even when the reorder window is full, or the run would deadlock. */
static bool head_waiting(const struct engine *e)
{
	if (e->head_ord >= e->next_ord)
		return false;
	const struct ereq *h = e->ring[e->head_ord & (e->ring_cap - 1)];
	return h && !h->done && h->sq.state == SCHED_WAITING;
}

enum bg_status engine_run(struct engine *e, engine_source_fn source, engine_sink_fn sink,
			  engine_progress_fn progress, void *user, volatile sig_atomic_t *stop,
			  int64_t *n_unfinished, struct bg_err *err)
{
	if (n_unfinished)
		*n_unfinished = 0;
	e->sink = sink;
	e->user = user;
	e->sink_failed = false;
	e->t0 = now_s();
	e->iter = 0;
	e->iter_completed = 0;
	e->iter_swap_out = e->iter_swap_in = e->iter_recomputed = 0;
	memset(&e->tot, 0, sizeof e->tot);
	struct kv_stats ks0;
	kv_get_stats(e->pool, &ks0);
	e->reused_base = ks0.reused_total;
	e->missed_base = ks0.missed_total;
	bool eof = false, read_failed = false;
	struct bg_err read_err = {0};
	bool input_order = e->cfg.order == ENGINE_ORDER_INPUT;
	enum bg_status st = BG_OK;
	for (;;) {
		if (stop && *stop) {
			/* the overlapped step's tokens are computed: apply them */
			if ((st = apply_pending(e, err)) != BG_OK)
				break;
			/* Emit what is complete (past gaps: a resumed run skips ids already
			 * done), drop the rest unfinished. */
			int64_t unfinished = 0;
			if (input_order) {
				/* the unfinished stay in the ring for drop_inflight */
				for (int64_t o = e->head_ord; o < e->next_ord; o++) {
					struct ereq **slot = &e->ring[o & (e->ring_cap - 1)];
					if (*slot && (*slot)->done) {
						struct ereq *er = *slot;
						*slot = NULL;
						emit(e, er);
					} else if (*slot) {
						unfinished++;
					}
				}
				e->n_buffered = 0;
			} else {
				unfinished = unfinished_roots(e);
			}
			drop_inflight(e);
			if (n_unfinished)
				*n_unfinished = unfinished;
			fill_progress(e);
			if (e->sink_failed)
				return bg_fail(err, BG_ERR_IO, "the result writer failed");
			return BG_OK;
		}
		/* Pull up to the look-ahead; in input order also stop while the reorder window
		 * is full, so that memory stays bounded whatever the input. */
		bool pending = false;
		while (!eof && !pending && sched_n_waiting(e->sched) < e->cfg.max_queued &&
		       !(input_order && e->n_buffered >= e->window) && !e->sink_failed) {
			struct request *r = NULL;
			struct bg_err serr = {0};
			int rc = source(user, &r, &serr);
			if (rc == ENGINE_SOURCE_PENDING) {
				/* Nothing ready: run what we have. Idle, this is a source that
				 * did not block: poll it gently instead of spinning. */
				pending = true;
				if (engine_idle(e)) {
					struct timespec ts = {0, 1000000L};
					nanosleep(&ts, NULL);
				}
			} else if (rc == 0) {
				eof = true;
			} else if (rc < 0) {
				eof = true;
				read_failed = true;
				read_err = serr;
			} else if (r) {
				intake(e, r);
			}
		}
		if (e->sink_failed) {
			st = bg_fail(err, BG_ERR_IO, "the result writer failed");
			break;
		}
		int32_t in_flight = sched_n_running(e->sched) + sched_n_paused(e->sched) +
				    sched_n_waiting(e->sched);
		if (in_flight == 0) {
			if (eof)
				break;
			continue;
		}
		kv_stats_reset_iter(e->pool);
		double t_it = now_s();
		bool allow = !input_order || e->n_buffered < e->window || head_waiting(e);
		struct sched_plan plan;
		struct bg_err serr = {0};
		if ((st = sched_step(e->sched, allow, &plan, &serr)) != BG_OK) {
			bg_fail(err, st, "scheduler: %s", serr.msg);
			break;
		}
		/* Admissions: the end of the queue time, and the RNG starts from the seed. */
		for (int32_t i = 0; i < sched_n_running(e->sched); i++) {
			struct sched_seq *q = sched_running(e->sched)[i];
			struct ereq *er = q->user;
			if (q->step_new) {
				er->r->queue_ms = (t_it - er->r->t_arrival) * 1e3;
				sampler_rng_seed(&er->rng, er->r->sampling.seed);
			}
			/* cached prompt tokens count as prompt tokens processed (a static
			 * member may take them after its admission step: scheduler.h) */
			if (q->step_cached) {
				e->tot.prompt_tokens += q->n_cached;
				e->tot.cached_tokens += q->n_cached;
			}
		}
		if (plan.n == 0 && e->pend >= 0) {
			/* what is left waits for the overlapped step's tokens */
			if ((st = apply_pending(e, err)) != BG_OK)
				break;
			continue;
		}
		if (plan.n == 0) {
			if (sched_n_running(e->sched) == 0 && sched_n_paused(e->sched) == 0 &&
			    sched_n_waiting(e->sched) > 0) {
				/* Nothing runs and the head still cannot start: it never will. */
				struct ereq *er = sched_waiting_at(e->sched, 0)->user;
				fail_req(e, er, "too_long", "request does not fit in the KV cache");
				continue;
			}
			st = bg_fail(err, BG_ERR_INVALID, "scheduler made no progress");
			break;
		}
		if ((st = run_batch(e, &plan, err)) != BG_OK)
			break;
		if (e->cfg.stats)
			write_stats(e, &plan, (now_s() - t_it) * 1e3);
		e->iter_completed = 0;
		e->iter_swap_out = e->iter_swap_in = e->iter_recomputed = 0;
		e->iter++;
		e->tot.preemptions += plan.n_paused_now;
		fill_progress(e);
		if (progress)
			progress(user, &e->tot);
		if (e->sink_failed) {
			st = bg_fail(err, BG_ERR_IO, "the result writer failed");
			break;
		}
	}
	if (st != BG_OK) {
		drop_inflight(e);
		fill_progress(e);
		return st;
	}
	fill_progress(e);
	if (read_failed)
		return bg_fail(err, read_err.status ? read_err.status : BG_ERR_IO, "%s",
			       read_err.msg[0] ? read_err.msg : "reading the input failed");
	return BG_OK;
}
