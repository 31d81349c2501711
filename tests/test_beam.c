/* test_beam: beam search (core/engine/beam) through the engine, the scheduler's
 * lockstep/reorder and copy-on-write, on a FAKE model with a tiny vocabulary and on the
 * real CPU backend.
 *
 * References, none of them the code under test:
 *  - exhaustive: with a vocabulary of V tokens, L tokens to generate and no token ending
 *    a beam, a width W >= V^(L-1) keeps every prefix, so the W beams returned must be
 *    exactly the W best of all V^L sequences (enumerated here, each scored from scratch);
 *  - ref_beam: the algorithm of beam.h written again, plainly, over a candidate oracle
 *    that scores each prefix from scratch (fake: the model's hash chain recomputed from
 *    the tokens; real model: a separate greedy request over prompt + prefix, whose
 *    top-K log-probs come from a plain forward with no beams and no shared blocks);
 *  - every returned beam's cum_logprob equals the sum, in order, of its tokens' log-probs
 *    (bitwise), and each log-prob equals the oracle's.
 * The fake's KV is a hash chain read back through the block tables (as in
 * test_engine): a beam that reads another beam's blocks, a lost copy-on-write, or a
 * block written by two beams of one batch changes the result or is reported.
 * Under every policy (a pool small enough that max-util preempts the other requests) and
 * a token budget small enough to split a family over iterations, results equal the
 * references; beams are never paused. Batch invariance on the real model: a beam
 * request returns bitwise the same beams alone and in a busy mixed batch.
 */
#include "check.h"
#include "engine_util.h"
#include "fake_backend.h"
#include "cpu/backend_cpu.h"
#include "engine/beam.h"
#include "engine/engine.h"
#include "io/workload.h"
#include "model/model.h"

#include <math.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------ */
/* the reference search                                                                 */
/* ------------------------------------------------------------------------------------ */

#define MAXL 48

struct rseq {
	int32_t ids[MAXL];
	float lps[MAXL];
	int32_t n;
	double cum;
	double score;
	enum req_finish finish;
};

/* The K best next tokens after prompt + prefix (log-prob descending, ties to the lower
 * id), with their log-probs. */
typedef void (*oracle_fn)(void *u, const int32_t *prompt, int32_t P, const int32_t *prefix,
			  int32_t n, int32_t K, int32_t *ids, float *lps);

/* fake: the hash chain recomputed from the tokens, every token scored by sampler_score
 * (the definition of a log-prob), sorted here. */
static int32_t fake_V;
static void fake_oracle(void *u, const int32_t *prompt, int32_t P, const int32_t *prefix, int32_t n,
			int32_t K, int32_t *ids, float *lps)
{
	(void)u;
	int32_t V = fake_V;
	uint64_t h = FAKE_H0;
	for (int32_t p = 0; p < P + n; p++)
		h = fake_next(h, p < P ? prompt[p] : prefix[p - P], p);
	float lg[64], all[64];
	fake_fine_logits(h, V, lg);
	for (int32_t v = 0; v < V; v++) {
		struct sampler_result sr;
		sampler_score(lg, V, v, 0, &sr);
		all[v] = sr.logprob;
	}
	bool used[64] = {0};
	for (int32_t k = 0; k < K; k++) {
		int32_t best = -1;
		for (int32_t v = 0; v < V; v++)
			if (!used[v] && (best < 0 || all[v] > all[best]))
				best = v;
		used[best] = true;
		ids[k] = best;
		lps[k] = all[best];
	}
}

struct rcand {
	double sum;
	int32_t beam, rank, tok;
	float lp;
};

static double ref_score(double cum, int32_t len, float lp)
{
	return cum / pow((double)len, (double)lp);
}

static void ref_add(struct rseq *hyps, int32_t *nh, int32_t W, const struct rseq *h)
{
	if (*nh == W && !(h->score > hyps[W - 1].score))
		return;
	if (*nh == W)
		(*nh)--;
	int32_t i = *nh;
	while (i > 0 && !(hyps[i - 1].score >= h->score)) {
		hyps[i] = hyps[i - 1];
		i--;
	}
	hyps[i] = *h;
	(*nh)++;
}

/* The beam search of beam.h, from its description: returns the n_ret best hypotheses. */
static int32_t ref_beam(oracle_fn oracle, void *u, const int32_t *prompt, int32_t P, int32_t V,
			int32_t W, int32_t n_ret, float lpen, bool early, int32_t max_out,
			int32_t stop_tok, int32_t stop_tok2, struct rseq *out)
{
	static struct rseq live[16], next[16], hyps[16];
	int32_t nl = 1, nh = 0, K = 2 * W < V ? 2 * W : V;
	memset(&live[0], 0, sizeof live[0]);
	for (;;) {
		struct rcand c[16 * 20];
		int32_t nc = 0;
		for (int32_t b = 0; b < nl; b++) {
			int32_t ids[20];
			float lps[20];
			oracle(u, prompt, P, live[b].ids, live[b].n, K, ids, lps);
			for (int32_t k = 0; k < K; k++)
				c[nc++] = (struct rcand){live[b].cum + (double)lps[k], b, k, ids[k],
							 lps[k]};
		}
		/* insertion sort: sum descending, then beam, then rank */
		for (int32_t i = 1; i < nc; i++) {
			struct rcand x = c[i];
			int32_t j = i;
			while (j > 0 && (c[j - 1].sum < x.sum ||
					 (c[j - 1].sum == x.sum && c[j - 1].beam > x.beam))) {
				c[j] = c[j - 1];
				j--;
			}
			c[j] = x;
		}
		int32_t nn = 0;
		for (int32_t i = 0; i < nc && nn < W; i++) {
			struct rseq s = live[c[i].beam];
			s.ids[s.n] = c[i].tok;
			s.lps[s.n] = c[i].lp;
			s.n++;
			s.cum = c[i].sum;
			if (c[i].tok == stop_tok ||
			    (stop_tok >= 0 && stop_tok2 > 0 && c[i].tok == stop_tok2)) {
				if (i >= W)
					continue;
				s.finish = REQ_FINISH_STOP;
				s.score = ref_score(s.cum, s.n, lpen);
				ref_add(hyps, &nh, W, &s);
			} else {
				next[nn++] = s;
			}
		}
		memcpy(live, next, sizeof next[0] * (size_t)nn);
		nl = nn;
		if (nl == 0)
			break;
		if (nh == W &&
		    (early || hyps[W - 1].score >= ref_score(live[0].cum, live[0].n, lpen)))
			break;
		if (live[0].n >= max_out) {
			for (int32_t b = 0; b < nl; b++) {
				live[b].finish = REQ_FINISH_LENGTH;
				live[b].score = ref_score(live[b].cum, live[b].n, lpen);
				ref_add(hyps, &nh, W, &live[b]);
			}
			break;
		}
	}
	int32_t n = nh < n_ret ? nh : n_ret;
	memcpy(out, hyps, sizeof hyps[0] * (size_t)n);
	return n;
}

/* ------------------------------------------------------------------------------------ */
/* running the engine                                                                   */
/* ------------------------------------------------------------------------------------ */

struct spec {
	int32_t ids[128];
	int32_t n_ids;
	const char *prompt;
	int32_t max_tokens, beam_width, n, logprobs;
	float lpen, temperature;
	bool early;
	int32_t stop_tok;  /* -1: none */
	int32_t stop_tok2; /* a second one when > 0 */
	uint64_t seed;
};

static int src(void *user, struct request **out, struct bg_err *err)
{
	(void)err;
	struct engine_util_run *R = user;
	if (R->next >= R->n)
		return 0;
	const struct spec *s = (const struct spec *)R->specs + R->next;
	struct request *r = engine_util_req("b", R->next, s->prompt, s->ids, s->n_ids);
	r->max_tokens = s->max_tokens;
	r->beam_width = s->beam_width > 0 ? s->beam_width : 1;
	r->n = s->n > 0 ? s->n : 1;
	r->length_penalty = s->beam_width > 1 ? s->lpen : 1.0f;
	r->early_stopping = s->beam_width > 1 && s->early;
	r->logprobs = s->logprobs;
	r->sampling.temperature = s->temperature;
	r->sampling.seed = s->seed;
	r->ignore_eos = true;
	if (s->stop_tok >= 0) {
		r->stop_token_ids = malloc(2 * sizeof *r->stop_token_ids);
		r->stop_token_ids[0] = s->stop_tok;
		r->stop_token_ids[1] = s->stop_tok2;
		r->n_stop_token_ids = s->stop_tok2 > 0 ? 2 : 1;
	}
	R->next++;
	*out = r;
	return 1;
}

static enum bg_status run(const struct engine_config *cfg, struct backend *be,
			  const struct tok *tok, const struct model_hparams *hp,
			  const struct spec *specs, int32_t n, struct engine_util_run *R)
{
	return engine_util_run(cfg, be, tok, hp, src, specs, n, R);
}

/* r's choices against the reference ref[n]: tokens, finish, log-probs and cum_logprob
 * bitwise, and cum_logprob = the sum of the returned log-probs. Returns mismatches. */
static int cmp_ref(const struct request *r, const struct rseq *ref, int32_t n, const char *what)
{
	int bad = 0;
	if (!r || r->error.code[0] || r->n_choices != n) {
		CHECK(false, "%s: %d choices (want %d) %s", what, r ? r->n_choices : -1, n,
		      r ? r->error.message : "no result");
		return 1;
	}
	for (int32_t i = 0; i < n; i++) {
		const struct req_choice *c = &r->choices[i];
		bool ok = c->n_out == ref[i].n && c->finish == ref[i].finish &&
			  memcmp(c->out_ids, ref[i].ids, (size_t)c->n_out * sizeof(int32_t)) == 0 &&
			  c->cum_logprob == ref[i].cum;
		double sum = 0;
		for (int32_t k = 0; ok && c->out_logprobs && k < c->n_out; k++) {
			sum += (double)c->out_logprobs[k];
			ok = memcmp(&c->out_logprobs[k], &ref[i].lps[k], sizeof(float)) == 0;
		}
		ok = ok && (!c->out_logprobs || sum == c->cum_logprob);
		if (!ok && bad++ < 2)
			CHECK(false,
			      "%s: choice %d: %d tokens %s cum %.17g, want %d tokens %s cum %.17g",
			      what, i, c->n_out, req_finish_name(c->finish), c->cum_logprob,
			      ref[i].n, req_finish_name(ref[i].finish), ref[i].cum);
	}
	return bad;
}

/* ------------------------------------------------------------------------------------ */
/* the fake: exhaustive and reference searches                                          */
/* ------------------------------------------------------------------------------------ */

static int cmp_desc(const void *a, const void *b)
{
	double x = ((const struct rseq *)a)->cum, y = ((const struct rseq *)b)->cum;
	return x > y ? -1 : x < y;
}

/* W >= V^(L-1) keeps every prefix: the W beams are the W best of the V^L sequences. */
static void test_exhaustive(int32_t V, int32_t L, int32_t W)
{
	fake_V = V;
	struct fake f;
	struct backend be = fake_backend(&f, V, 256, 2, FAKE_FINE);
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct spec s = {.ids = {1, 0, 2 % V},
			 .n_ids = 3,
			 .max_tokens = L,
			 .beam_width = W,
			 .n = W,
			 .logprobs = 0,
			 .lpen = 1.0f,
			 .stop_tok = -1};
	struct engine_util_run R;
	CHECK(run(&cfg, &be, NULL, NULL, &s, 1, &R) == BG_OK, "exhaustive run");
	int32_t total = 1;
	for (int32_t i = 0; i < L; i++)
		total *= V;
	struct rseq *all = calloc((size_t)total, sizeof *all);
	for (int32_t x = 0; x < total; x++) {
		struct rseq *q = &all[x];
		q->n = L;
		q->finish = REQ_FINISH_LENGTH;
		for (int32_t i = 0, y = x; i < L; i++, y /= V)
			q->ids[i] = y % V;
		for (int32_t i = 0; i < L; i++) {
			int32_t ids[64];
			float lps[64];
			fake_oracle(NULL, s.ids, s.n_ids, q->ids, i, V, ids, lps);
			for (int32_t k = 0; k < V; k++)
				if (ids[k] == q->ids[i])
					q->lps[i] = lps[k];
			q->cum += (double)q->lps[i];
		}
	}
	qsort(all, (size_t)total, sizeof *all, cmp_desc);
	char what[64];
	snprintf(what, sizeof what, "exhaustive V=%d L=%d W=%d", V, L, W);
	CHECK(cmp_ref(R.res[0], all, W, what) == 0, "%s: the W best of %d sequences", what, total);
	CHECK(f.errors == 0, "fake: %s", f.err);
	engine_util_run_free(&R);
	free(all);
	fake_free(&f);
}

/* Random beam requests (widths 2..5, n, length penalties, early stopping, a stop token)
 * mixed with plain requests, under every policy and a small token budget: each beam
 * result equals ref_beam; beams are never paused. */
static void test_reference_fake(void)
{
	enum { N = 96 };
	const int32_t V = 6;
	fake_V = V;
	uint64_t rng = 0x9E3779B97F4A7C15ull;
	static struct spec sp[N];
	static const float pens[] = {1.0f, 0.0f, 2.0f, -0.5f};
	for (int32_t i = 0; i < N; i++) {
		struct spec *s = &sp[i];
		memset(s, 0, sizeof *s);
		s->n_ids = 1 + (int32_t)engine_util_rnd(&rng, 11);
		for (int32_t j = 0; j < s->n_ids; j++)
			s->ids[j] = (int32_t)engine_util_rnd(&rng, (uint32_t)V);
		s->max_tokens = 1 + (int32_t)engine_util_rnd(&rng, 16);
		s->logprobs = 0;
		s->stop_tok = -1;
		if (i % 4 == 3) { /* a plain request among the beams */
			s->beam_width = 1;
			s->n = 1 + (int32_t)engine_util_rnd(&rng, 2);
			s->temperature = s->n > 1 ? 0.9f : 0.0f;
			s->seed = i;
			continue;
		}
		s->beam_width = 2 + (int32_t)engine_util_rnd(&rng, 4);
		s->n = 1 + (int32_t)engine_util_rnd(&rng, (uint32_t)s->beam_width);
		s->lpen = pens[engine_util_rnd(&rng, 4)];
		s->early = engine_util_rnd(&rng, 2);
		if (engine_util_rnd(&rng, 4)) {
			s->stop_tok = (int32_t)engine_util_rnd(&rng, (uint32_t)V);
			if (engine_util_rnd(&rng, 2))
				s->stop_tok2 =
				    (s->stop_tok + 1 + (int32_t)engine_util_rnd(&rng, 5)) % V;
		}
	}
	static struct rseq ref[N][8];
	static int32_t n_ref[N];
	int n_stop = 0;
	for (int32_t i = 0; i < N; i++) {
		const struct spec *s = &sp[i];
		if (s->beam_width <= 1)
			continue;
		n_ref[i] =
		    ref_beam(fake_oracle, NULL, s->ids, s->n_ids, V, s->beam_width, s->n, s->lpen,
			     s->early, s->max_tokens, s->stop_tok, s->stop_tok2, ref[i]);
		for (int32_t k = 0; k < n_ref[i]; k++) {
			n_stop += ref[i][k].finish == REQ_FINISH_STOP;
		}
	}
	CHECK(n_stop > 3, "the references include beams ended by the stop token (%d)", n_stop);

	static const enum engine_policy pols[] = {ENGINE_POLICY_NO_EVICT, ENGINE_POLICY_MAX_UTIL,
						  ENGINE_POLICY_STATIC, ENGINE_POLICY_ADAPTIVE};
	int64_t copies = 0;
	for (int pi = 0; pi < 4; pi++)
		for (int setup = 0; setup < 3; setup++) {
			/* setup 0: roomy; 1: 56 blocks of 2 (max-util preempts the plain ones),
			 * 5 tokens per step (families split over iterations); 2: one request at
			 * a time, blocks of 4 */
			int32_t nb = setup == 1 ? 56 : 400, bs = setup == 2 ? 4 : 2;
			struct fake f;
			struct backend be = fake_backend(&f, V, nb, bs, FAKE_FINE);
			struct engine_config cfg;
			engine_config_default(&cfg);
			cfg.policy = pols[pi];
			cfg.overlap = (pi + setup) % 2; /* beams run serially, the rest not */
			cfg.max_num_tokens = setup == 1 ? 5 : 64;
			cfg.max_batch_size = setup == 2 ? 5 : 32;
			cfg.prefix_cache = setup != 2;
			struct engine_util_run R;
			char what[96];
			snprintf(what, sizeof what, "policy %d setup %d overlap %d", pi, setup,
				 cfg.overlap);
			CHECK(run(&cfg, &be, NULL, NULL, sp, N, &R) == BG_OK, "%s: run", what);
			int bad = 0, paused = 0;
			for (int32_t i = 0; i < N; i++) {
				const struct request *r = R.res[i];
				if (sp[i].beam_width <= 1) {
					CHECK(r && !r->error.code[0], "%s: plain %d ran", what, i);
					continue;
				}
				char w2[256];
				snprintf(w2, sizeof w2,
					 "%s req %d (W=%d n=%d lp=%g early=%d stop=%d)", what, i,
					 sp[i].beam_width, sp[i].n, sp[i].lpen, sp[i].early,
					 sp[i].stop_tok);
				bad += cmp_ref(r, ref[i], n_ref[i], w2) > 0;
				paused += r && r->preemptions > 0;
			}
			CHECK(bad == 0, "%s: %d beam requests differ from the reference", what,
			      bad);
			CHECK(paused == 0, "%s: beams are never paused (%d were)", what, paused);
			CHECK(f.errors == 0, "%s: fake: %s", what, f.err);
			copies += f.copies;
			engine_util_run_free(&R);
			fake_free(&f);
		}
	CHECK(copies > 0, "beams copied shared blocks on write (%lld copies)", (long long)copies);
}

/* ------------------------------------------------------------------------------------ */
/* the real model                                                                       */
/* ------------------------------------------------------------------------------------ */

struct real_ctx {
	struct backend *be;
	const struct tok *tok;
	const struct model_hparams *hp;
	int64_t calls;
};

/* A plain greedy request over prompt + prefix, one token, logprobs K: its top-K list. */
static void real_oracle(void *u, const int32_t *prompt, int32_t P, const int32_t *prefix, int32_t n,
			int32_t K, int32_t *ids, float *lps)
{
	struct real_ctx *c = u;
	struct spec s;
	memset(&s, 0, sizeof s);
	memcpy(s.ids, prompt, (size_t)P * sizeof *prompt);
	memcpy(s.ids + P, prefix, (size_t)n * sizeof *prefix);
	s.n_ids = P + n;
	s.max_tokens = 1;
	s.logprobs = K;
	s.stop_tok = -1;
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.prefix_cache = false;
	struct engine_util_run R;
	CHECK(run(&cfg, c->be, c->tok, c->hp, &s, 1, &R) == BG_OK, "oracle run");
	const struct request *r = R.res[0];
	CHECK(r && r->out_top && r->out_top[0].n_top == K, "oracle result");
	for (int32_t k = 0; r && r->out_top && k < K; k++) {
		ids[k] = r->out_top[0].top_ids[k];
		lps[k] = r->out_top[0].top_logprobs[k];
	}
	c->calls++;
	engine_util_run_free(&R);
}

static bool choices_equal(const struct request *a, const struct request *b)
{
	if (!a || !b || a->n_choices != b->n_choices || a->error.code[0] || b->error.code[0])
		return false;
	for (int32_t i = 0; i < a->n_choices; i++) {
		const struct req_choice *x = &a->choices[i], *y = &b->choices[i];
		if (x->n_out != y->n_out || x->finish != y->finish ||
		    memcmp(&x->cum_logprob, &y->cum_logprob, sizeof(double)) ||
		    memcmp(x->out_ids, y->out_ids, (size_t)x->n_out * sizeof(int32_t)) ||
		    (x->out_logprobs &&
		     memcmp(x->out_logprobs, y->out_logprobs, (size_t)x->n_out * sizeof(float))) ||
		    x->text_len != y->text_len || memcmp(x->text, y->text, x->text_len))
			return false;
	}
	return true;
}

static void test_real(void)
{
	const char *path = check_shared("models/stories260K.gguf");
	if (!path)
		return;
	struct bg_err err = {0};
	struct model *m = NULL;
	struct tok *tok = NULL;
	struct backend *be = NULL;
	CHECK(model_load(path, &m, &err) == BG_OK, "model: %s", err.msg);
	if (!m)
		return;
	CHECK(tok_load(m->gguf, &tok, &err) == BG_OK, "tokenizer: %s", err.msg);
	/* blocks of 4 tokens: beams cross block boundaries and copy partial blocks often;
	 * 96 blocks: max-util must preempt the plain requests of the busy batch */
	struct backend_config bc = {.block_size = 4, .kv_tokens = 384, .n_threads = 1};
	CHECK(backend_cpu_create(m, &bc, &be, &err) == BG_OK, "backend: %s", err.msg);
	if (!tok || !be) {
		backend_destroy(be);
		tok_free(tok);
		model_free(m);
		return;
	}
	struct model_hparams hp = m->hp;
	hp.n_ctx_train = 512;

	/* beam requests against ref_beam over plain greedy requests */
	enum { NB = 4 };
	struct spec beams[NB];
	static const int32_t widths[NB] = {2, 3, 4, 3};
	for (int32_t i = 0; i < NB; i++) {
		struct spec *s = &beams[i];
		memset(s, 0, sizeof *s);
		s->prompt = engine_util_prompt((uint32_t)i * 3);
		s->max_tokens = 6 + 2 * i;
		s->beam_width = widths[i];
		s->n = widths[i] - (i & 1);
		s->logprobs = 0;
		s->lpen = i == 2 ? 0.5f : 1.0f;
		s->early = i == 3;
		s->stop_tok = -1;
	}
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct real_ctx rc = {be, tok, &hp, 0};
	struct request *solo[NB];
	for (int32_t i = 0; i < NB; i++) {
		struct engine_util_run R;
		CHECK(run(&cfg, be, tok, &hp, &beams[i], 1, &R) == BG_OK, "solo beam %d", i);
		solo[i] = R.res[0];
		R.res[0] = NULL;
		engine_util_run_free(&R);
		if (!solo[i] || !solo[i]->prompt_ids)
			continue;
		struct rseq ref[8];
		int32_t nr =
		    ref_beam(real_oracle, &rc, solo[i]->prompt_ids, solo[i]->n_prompt,
			     (int32_t)be->n_vocab, beams[i].beam_width, beams[i].n, beams[i].lpen,
			     beams[i].early, beams[i].max_tokens, -1, 0, ref);
		char what[48];
		snprintf(what, sizeof what, "stories260K beam %d (W=%d)", i, beams[i].beam_width);
		CHECK(cmp_ref(solo[i], ref, nr, what) == 0, "%s equals the reference search", what);
		/* the returned text is the detokenized ids */
		for (int32_t k = 0; k < solo[i]->n_choices; k++) {
			const struct req_choice *c = &solo[i]->choices[k];
			CHECK(c->text && (c->n_out == 0 || c->text_len > 0), "%s text %d", what, k);
		}
	}
	CHECK(rc.calls > 20, "the reference scored %lld prefixes", (long long)rc.calls);

	/* width 1 is greedy decoding */
	struct spec g = beams[0];
	g.beam_width = 1;
	g.n = 1;
	struct spec gs[2] = {g, g};
	gs[1].beam_width = 0;
	struct engine_util_run RG;
	CHECK(run(&cfg, be, tok, &hp, gs, 2, &RG) == BG_OK, "greedy run");
	CHECK(RG.res[0] && RG.res[1] && RG.res[0]->n_out == RG.res[1]->n_out &&
		  memcmp(RG.res[0]->out_ids, RG.res[1]->out_ids,
			 (size_t)RG.res[0]->n_out * sizeof(int32_t)) == 0,
	      "beam_width 1 returns what greedy decoding returns");
	engine_util_run_free(&RG);

	/* batch invariance: the beams in a busy mixed batch, every policy */
	enum { NM = 20 };
	struct spec mix[NM];
	uint64_t rng = 77;
	for (int32_t i = 0; i < NM; i++) {
		struct spec *s = &mix[i];
		if (i % 5 == 1) {
			*s = beams[(i / 5) % NB];
			continue;
		}
		memset(s, 0, sizeof *s);
		s->prompt = engine_util_prompt(engine_util_rnd(&rng, 100));
		s->max_tokens = 4 + (int32_t)engine_util_rnd(&rng, 20);
		s->logprobs = -1;
		s->stop_tok = -1;
		s->n = 1 + (int32_t)engine_util_rnd(&rng, 2);
		s->temperature = engine_util_rnd(&rng, 2) ? 0.8f : 0.0f;
		if (s->n > 1)
			s->temperature = 0.8f;
		s->seed = i;
	}
	static const enum engine_policy pols[] = {ENGINE_POLICY_NO_EVICT, ENGINE_POLICY_MAX_UTIL,
						  ENGINE_POLICY_STATIC, ENGINE_POLICY_ADAPTIVE};
	int64_t preempted = 0;
	for (int pi = 0; pi < 4; pi++)
		for (int chunk = 0; chunk < 4; chunk++) {
			struct engine_config c2;
			engine_config_default(&c2);
			c2.overlap = chunk / 2;
			c2.policy = pols[pi];
			c2.chunked_context = chunk % 2 == 0;
			c2.max_num_tokens = chunk % 2 == 0 ? 16 : 512;
			struct engine_util_run R;
			CHECK(run(&c2, be, tok, &hp, mix, NM, &R) == BG_OK, "mixed run");
			int bad = 0;
			for (int32_t i = 0; i < NM; i++) {
				if (i % 5 == 1)
					bad += !choices_equal(R.res[i], solo[(i / 5) % NB]);
				else if (R.res[i])
					preempted += R.res[i]->preemptions;
			}
			CHECK(bad == 0,
			      "policy %d chunk %d overlap %d: %d beam requests differ batched", pi,
			      chunk % 2, c2.overlap, bad);
			engine_util_run_free(&R);
		}
	CHECK(preempted > 0, "max-util preempted other requests around the beams (%lld)",
	      (long long)preempted);
	for (int32_t i = 0; i < NB; i++)
		req_free(solo[i]);
	backend_destroy(be);
	tok_free(tok);
	model_free(m);
}

/* ------------------------------------------------------------------------------------ */
/* refusals                                                                             */
/* ------------------------------------------------------------------------------------ */

static void test_refusals(void)
{
	char msg[200];
	struct request *r = req_new();
	r->beam_width = 3;
	r->n = 3;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) == NULL, "greedy beam request runs");
	r->n = 4;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) &&
		  strcmp(beam_refusal(r, 256, msg, sizeof msg), "invalid_request") == 0,
	      "n > beam_width refused");
	r->n = 1;
	CHECK(beam_refusal(r, 2, msg, sizeof msg) != NULL, "beam_width > max_batch_size refused");
	r->sampling.temperature = 1.0f;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) != NULL, "temperature refused");
	r->sampling.temperature = 0;
	r->sampling.top_p = 0.5f;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) != NULL, "top_p refused");
	r->sampling.top_p = 1;
	r->sampling.repetition_penalty = 1.1f;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) != NULL, "penalty refused");
	r->sampling.repetition_penalty = 1;
	r->min_tokens = 2;
	const char *code = beam_refusal(r, 256, msg, sizeof msg);
	CHECK(code && strcmp(code, "unsupported") == 0, "constraints unsupported");
	r->min_tokens = 0;
	r->beam_width = 1;
	r->length_penalty = 2;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) != NULL,
	      "length_penalty without beams refused");
	r->length_penalty = 1;
	r->early_stopping = true;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) != NULL,
	      "early_stopping without beams refused");
	r->early_stopping = false;
	CHECK(beam_refusal(r, 256, msg, sizeof msg) == NULL, "a plain request is not refused");
	req_free(r);

	/* the whole family must fit the pool: 4 beams of 30 tokens in 10 blocks of 4 */
	struct fake f;
	fake_V = 6;
	struct backend be = fake_backend(&f, 6, 10, 4, FAKE_FINE);
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct spec s = {.ids = {1, 2},
			 .n_ids = 2,
			 .max_tokens = 28,
			 .beam_width = 4,
			 .n = 1,
			 .logprobs = -1,
			 .lpen = 1,
			 .stop_tok = -1};
	struct engine_util_run R;
	CHECK(run(&cfg, &be, NULL, NULL, &s, 1, &R) == BG_OK, "run");
	CHECK(R.res[0] && strcmp(R.res[0]->error.code, "too_long") == 0,
	      "a family that cannot fit the pool is too_long (%s)",
	      R.res[0] ? R.res[0]->error.code : "-");
	engine_util_run_free(&R);
	fake_free(&f);
}

/* The bench workload BW4: 128/128 requests with beam_width 4, every beam returned. */
static void test_workload_bw4(void)
{
	struct wl_spec w;
	struct bg_err err = {0};
	CHECK(wl_parse("bw4x3", &w, &err) == BG_OK && w.beam_width == 4 && w.n_requests == 3,
	      "BW4x3 parses: %s", err.msg);
	struct wl_gen *g = NULL;
	CHECK(wl_gen_create(&w, 3, 1, 3, 500, "bw", &g, &err) == BG_OK, "gen: %s", err.msg);
	struct request *r = NULL;
	CHECK(g && wl_gen_next(g, &r, &err) == 1 && r && r->beam_width == 4 && r->n == 4 &&
		  r->max_tokens == 128 && r->n_input_ids == 128,
	      "a BW4 request: beam_width 4, n 4, 128/128");
	req_free(r);
	wl_gen_destroy(g);
	CHECK(wl_parse("N8", &w, &err) == BG_OK && w.beam_width == 0, "N8 has no beams");
}

int main(void)
{
	test_refusals();
	test_workload_bw4();
	test_exhaustive(3, 3, 9);
	test_exhaustive(2, 4, 8);
	test_exhaustive(4, 2, 4);
	test_reference_fake();
	/* over a backend with recurrent-state slots (fake_backend.h): each beam must carry
	 * the state of the beam it extends (state_copy after every reorder) */
	fake_state_slots = 40;
	test_reference_fake();
	fake_state_slots = 0;
	test_real();
	return check_summary();
}
