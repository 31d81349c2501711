/* constrain: per-request constraint state and the per-step mask and biases (see
 * constrain.h). */
#include "engine/constrain.h"

#include "threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct constrain_vocab {
	int32_t n_vocab;
	const struct tok *tok;
	struct grammar_vocab *gv;
	struct tp_pool *pool;		  /* NULL: one thread */
	struct grammar_scratch **scratch; /* [n_scratch], one per pool thread; [0] is the
					   * caller's (the engine thread) */
	int n_scratch;
	int32_t *eog; /* [n_eog] end-of-generation ids */
	int32_t n_eog;
};

struct constrain {
	struct grammar_state *gs; /* NULL without a grammar */
	uint32_t *mask;		  /* [(n_vocab + 31) / 32] */
	int32_t *seq;		  /* bad-word token sequences, concatenated */
	int32_t *seq_start;	  /* [n_seq + 1] */
	int32_t n_seq;
	int32_t *bias_ids; /* [bias_cap] this step's biases */
	float *bias;
	int32_t bias_cap;
};

void constrain_vocab_free(struct constrain_vocab *cv)
{
	if (!cv)
		return;
	grammar_vocab_free(cv->gv);
	tp_destroy(cv->pool);
	for (int i = 0; cv->scratch && i < cv->n_scratch; i++)
		grammar_scratch_free(cv->scratch[i]);
	free(cv->scratch);
	free(cv->eog);
	free(cv);
}

enum bg_status constrain_vocab_create(const struct tok *t, int n_threads,
				      struct constrain_vocab **out, struct bg_err *err)
{
	*out = NULL;
	int32_t n = tok_n_vocab(t);
	struct constrain_vocab *cv = calloc(1, sizeof *cv);
	char **pieces = calloc((size_t)n, sizeof *pieces);
	uint32_t *lens = calloc((size_t)n, sizeof *lens);
	bool *eog = calloc((size_t)n, sizeof *eog);
	enum bg_status st = BG_OK;
	if (!cv || !pieces || !lens || !eog) {
		st = bg_fail(err, BG_ERR_NOMEM, "out of memory for the grammar vocabulary");
		goto done;
	}
	cv->n_vocab = n;
	cv->tok = t;
	cv->eog = malloc((size_t)n * sizeof *cv->eog);
	if (n_threads != 1) {
		st = tp_create(n_threads, &cv->pool, err);
		if (st != BG_OK)
			goto done;
	}
	cv->n_scratch = cv->pool ? tp_n_threads(cv->pool) : 1;
	cv->scratch = calloc((size_t)cv->n_scratch, sizeof *cv->scratch);
	bool made = cv->scratch != NULL;
	for (int i = 0; made && i < cv->n_scratch; i++)
		made = (cv->scratch[i] = grammar_scratch_create()) != NULL;
	if (!cv->eog || !made) {
		st = bg_fail(err, BG_ERR_NOMEM, "out of memory for the grammar vocabulary");
		goto done;
	}
	for (int32_t i = 0; i < n; i++) {
		/* as llama.cpp's grammar sees tokens: control tokens rendered as their text */
		size_t l = tok_piece(t, i, true, NULL, 0);
		pieces[i] = malloc(l + 1);
		if (!pieces[i]) {
			st = bg_fail(err, BG_ERR_NOMEM, "out of memory for the grammar vocabulary");
			goto done;
		}
		tok_piece(t, i, true, pieces[i], l);
		lens[i] = (uint32_t)l;
		eog[i] = tok_is_eog(t, i);
		if (eog[i])
			cv->eog[cv->n_eog++] = i;
	}
	st = grammar_vocab_create(n, (const char *const *)pieces, lens, eog, &cv->gv, err);
done:
	if (pieces)
		for (int32_t i = 0; i < n; i++)
			free(pieces[i]);
	free(pieces);
	free(lens);
	free(eog);
	if (st != BG_OK) {
		constrain_vocab_free(cv);
		return st;
	}
	*out = cv;
	return BG_OK;
}

bool constrain_wanted(const struct request *r)
{
	return r->grammar || r->min_tokens > 0 || r->n_bias > 0 || r->n_bad_words > 0;
}

void constrain_free(struct constrain *c)
{
	if (!c)
		return;
	grammar_state_free(c->gs);
	free(c->mask);
	free(c->seq);
	free(c->seq_start);
	free(c->bias_ids);
	free(c->bias);
	free(c);
}

struct constrain *constrain_clone(const struct constrain *c, const struct constrain_vocab *cv)
{
	struct constrain *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	bool ok = true;
	if (c->gs) {
		k->gs = grammar_state_clone(c->gs);
		k->mask = malloc((size_t)(cv->n_vocab + 31) / 32 * sizeof *k->mask);
		ok = k->gs && k->mask;
	}
	if (ok && c->n_seq > 0) {
		size_t n = (size_t)c->seq_start[c->n_seq];
		k->seq = malloc((n ? n : 1) * sizeof *k->seq);
		k->seq_start = malloc(((size_t)c->n_seq + 1) * sizeof *k->seq_start);
		ok = k->seq && k->seq_start;
		if (ok) {
			memcpy(k->seq, c->seq, n * sizeof *k->seq);
			memcpy(k->seq_start, c->seq_start, ((size_t)c->n_seq + 1) * sizeof *k->seq_start);
			k->n_seq = c->n_seq;
		}
	}
	if (!ok) {
		constrain_free(k);
		return NULL;
	}
	return k;
}

/* Appends the tokens of text (no BOS) as one bad-word sequence. */
static enum bg_status add_seq(struct constrain *c, const struct tok *t, const char *text,
			      struct bg_err *err)
{
	int32_t *ids = NULL;
	size_t n = 0;
	enum bg_status st = tok_encode(t, text, strlen(text), false, false, &ids, &n, err);
	if (st != BG_OK)
		return st;
	if (n == 0) {
		free(ids);
		return BG_OK;
	}
	int32_t used = c->n_seq ? c->seq_start[c->n_seq] : 0;
	int32_t *ns = realloc(c->seq, ((size_t)used + n) * sizeof *ns);
	if (ns)
		c->seq = ns;
	int32_t *nst = realloc(c->seq_start, ((size_t)c->n_seq + 2) * sizeof *nst);
	if (nst)
		c->seq_start = nst;
	if (!ns || !nst) {
		free(ids);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for bad_words");
	}
	if (c->n_seq == 0)
		c->seq_start[0] = 0;
	memcpy(c->seq + used, ids, n * sizeof *ids);
	c->seq_start[c->n_seq + 1] = used + (int32_t)n;
	c->n_seq++;
	free(ids);
	return BG_OK;
}

enum bg_status constrain_create(struct constrain_vocab *cv, const struct request *r,
				struct constrain **out, struct bg_err *err)
{
	*out = NULL;
	struct constrain *c = calloc(1, sizeof *c);
	if (!c)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for constraints");
	enum bg_status st = BG_OK;
	if (r->grammar) {
		c->mask = malloc((size_t)(cv->n_vocab + 31) / 32 * sizeof *c->mask);
		if (!c->mask)
			st = bg_fail(err, BG_ERR_NOMEM, "out of memory for constraints");
		else
			st = grammar_state_create(r->grammar, cv->scratch[0], &c->gs, err);
	}
	for (int32_t i = 0; st == BG_OK && i < r->n_bad_words; i++) {
		char *spaced = malloc(strlen(r->bad_words[i]) + 2);
		if (!spaced) {
			st = bg_fail(err, BG_ERR_NOMEM, "out of memory for bad_words");
			break;
		}
		spaced[0] = ' ';
		strcpy(spaced + 1, r->bad_words[i]);
		st = add_seq(c, cv->tok, r->bad_words[i], err);
		if (st == BG_OK)
			st = add_seq(c, cv->tok, spaced, err);
		free(spaced);
	}
	if (st != BG_OK) {
		constrain_free(c);
		return st;
	}
	*out = c;
	return BG_OK;
}

static bool push_bias(struct constrain *c, int32_t *n, int32_t id, float v)
{
	if (*n == c->bias_cap) {
		int32_t nc = c->bias_cap ? c->bias_cap * 2 : 16;
		int32_t *ni = realloc(c->bias_ids, (size_t)nc * sizeof *ni);
		if (ni)
			c->bias_ids = ni;
		float *nb = realloc(c->bias, (size_t)nc * sizeof *nb);
		if (nb)
			c->bias = nb;
		if (!ni || !nb)
			return false;
		c->bias_cap = nc;
	}
	c->bias_ids[*n] = id;
	c->bias[*n] = v;
	(*n)++;
	return true;
}

/* constrain_step with the grammar working memory s (owned by the calling thread). */
static enum bg_status step(struct constrain *c, const struct constrain_vocab *cv,
			   struct grammar_scratch *s, const struct request *r,
			   struct sampler_constraint *sc, bool *dead, struct bg_err *err)
{
	*dead = false;
	int32_t nb = 0;
	bool ok = true;
	for (int32_t i = 0; i < r->n_bias && ok; i++)
		ok = push_bias(c, &nb, r->bias_ids[i], r->bias_vals[i]);
	if (r->n_out < r->min_tokens) {
		for (int32_t i = 0; i < cv->n_eog && ok; i++)
			ok = push_bias(c, &nb, cv->eog[i], -INFINITY);
		for (int32_t i = 0; i < r->n_stop_token_ids && ok; i++)
			ok = push_bias(c, &nb, r->stop_token_ids[i], -INFINITY);
	}
	for (int32_t s = 0; s < c->n_seq && ok; s++) {
		const int32_t *q = c->seq + c->seq_start[s];
		int32_t len = c->seq_start[s + 1] - c->seq_start[s];
		if (len - 1 > r->n_out)
			continue;
		if (len == 1 || /* a one-token word: banned always (out_ids may still be NULL) */
		    memcmp(r->out_ids + r->n_out - (len - 1), q, (size_t)(len - 1) * sizeof *q) == 0)
			ok = push_bias(c, &nb, q[len - 1], -INFINITY);
	}
	if (!ok)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for constraints");
	*sc = (struct sampler_constraint){.allow = NULL, .bias_ids = c->bias_ids, .bias = c->bias,
					  .n_bias = nb};
	if (c->gs) {
		enum bg_status st = grammar_state_mask(c->gs, cv->gv, s, c->mask, err);
		if (st != BG_OK)
			return st;
		sc->allow = c->mask;
	}
	/* dead: nothing left once the mask and the -inf biases are applied */
	bool any = false;
	int32_t nw = (cv->n_vocab + 31) / 32;
	if (!c->gs) {
		any = true; /* a few bans never empty a vocabulary */
	} else {
		for (int32_t w = 0; w < nw && !any; w++) {
			uint32_t m = c->mask[w];
			for (int32_t k = 0; k < nb && m; k++)
				if (c->bias[k] == -INFINITY && (c->bias_ids[k] >> 5) == w)
					m &= ~(1u << (c->bias_ids[k] & 31));
			any = m != 0;
		}
	}
	*dead = !any;
	return BG_OK;
}

enum bg_status constrain_step(struct constrain *c, struct constrain_vocab *cv,
			      const struct request *r, struct sampler_constraint *sc, bool *dead,
			      struct bg_err *err)
{
	return step(c, cv, cv->scratch[0], r, sc, dead, err);
}

struct step_all {
	struct constrain_job *jobs;
	const struct constrain_vocab *cv;
};

static void step_task(void *arg, int32_t task, int32_t thread)
{
	const struct step_all *a = arg;
	struct constrain_job *j = &a->jobs[task];
	BG_ASSERT(thread < a->cv->n_scratch);
	j->st = step(j->c, a->cv, a->cv->scratch[thread], j->r, j->sc, j->dead, j->err);
}

void constrain_step_all(struct constrain_vocab *cv, struct constrain_job *jobs, int32_t n)
{
	struct step_all a = {jobs, cv};
	if (cv->pool)
		tp_run(cv->pool, n, step_task, &a);
	else
		for (int32_t i = 0; i < n; i++)
			step_task(&a, i, 0);
}

enum bg_status constrain_accept(struct constrain *c, struct constrain_vocab *cv, int32_t token,
				struct bg_err *err)
{
	if (!c->gs)
		return BG_OK;
	return grammar_state_accept_token(c->gs, cv->gv, token, cv->scratch[0], err);
}

bool constrain_complete(const struct constrain *c)
{
	return !c->gs || grammar_state_accepts(c->gs) || grammar_state_finished(c->gs);
}
