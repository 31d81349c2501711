/* beam: beam search for one request. See beam.h for the algorithm and its contract. */
#include "engine/beam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/constrain.h"

#define W_MAX REQ_MAX_BEAM_WIDTH

/* A finished hypothesis, or a live beam's tokens while they are being rebuilt. */
struct hyp {
	int32_t *ids;		    /* [n] */
	float *lps;		    /* [n] */
	struct sampler_result *top; /* [n] when logprobs > 0, else NULL */
	int32_t n;
	double cum;
	double score;
	enum req_finish finish;
};

struct beam {
	struct beam_params p;
	int32_t n_live;
	int32_t n_collected;
	bool have[W_MAX];
	struct sampler_result cand[W_MAX]; /* [n_live] this step's candidates per slot */
	struct hyp hyps[W_MAX];		   /* [n_hyps] best first */
	int32_t n_hyps;
	bool by_length; /* the search ended at max_out: live beams join the hypotheses */
};

static void hyp_clear(struct hyp *h)
{
	free(h->ids);
	free(h->lps);
	free(h->top);
	memset(h, 0, sizeof *h);
}

int32_t beam_n_top(const struct beam_params *p, int32_t n_vocab)
{
	int32_t k = 2 * p->width;
	if (p->logprobs > k)
		k = p->logprobs;
	if (k > SAMPLER_MAX_TOP)
		k = SAMPLER_MAX_TOP;
	if (k > n_vocab)
		k = n_vocab;
	return k;
}

const char *beam_refusal(const struct request *r, int32_t max_batch_size, char *msg, size_t cap)
{
	if (r->beam_width <= 1) {
		if (r->length_penalty != 1.0f || r->early_stopping) {
			snprintf(msg, cap,
				 "length_penalty and early_stopping apply to beam search only "
				 "(beam_width > 1)");
			return "invalid_request";
		}
		return NULL;
	}
	const struct sampler_params *s = &r->sampling;
	const char *code = "invalid_request";
	if (r->beam_width > REQ_MAX_BEAM_WIDTH)
		snprintf(msg, cap, "beam_width must be at most %d", REQ_MAX_BEAM_WIDTH);
	else if (r->beam_width > max_batch_size)
		snprintf(msg, cap, "beam_width = %d beams do not fit a batch of max_batch_size %d",
			 r->beam_width, max_batch_size);
	else if (r->n > r->beam_width)
		snprintf(msg, cap,
			 "n (%d) must be at most beam_width (%d): n is how many beams "
			 "are returned",
			 r->n, r->beam_width);
	else if (s->temperature != 0.0f)
		snprintf(msg, cap,
			 "beam search scores the model's log-probabilities: temperature "
			 "must be 0 (an OpenAI line's default is 1)");
	else if (s->top_k > 0 || s->top_p < 1.0f || s->min_p > 0.0f)
		snprintf(msg, cap,
			 "beam search does not sample: top_k, top_p and min_p must be "
			 "disabled");
	else if (s->repetition_penalty != 1.0f || s->presence_penalty != 0.0f ||
		 s->frequency_penalty != 0.0f)
		snprintf(msg, cap,
			 "repetition, presence and frequency penalties are not supported "
			 "with beam search");
	else if (constrain_wanted(r) && (code = "unsupported"))
		snprintf(msg, cap,
			 "grammar, json_schema, regex, choice, logit_bias, bad_words and "
			 "min_tokens are not supported with beam search yet");
	else if (r->n_stop > 0 && (code = "unsupported"))
		snprintf(msg, cap,
			 "stop strings are not supported with beam search yet (use "
			 "stop_token_ids)");
	else
		return NULL;
	return code;
}

enum bg_status beam_create(const struct beam_params *p, struct beam **out, struct bg_err *err)
{
	*out = NULL;
	if (p->width < 2 || p->width > W_MAX || p->n_return < 1 || p->n_return > p->width ||
	    p->max_out < 1)
		return bg_fail(err, BG_ERR_INVALID, "beam search: width %d, n %d, max %d tokens",
			       p->width, p->n_return, p->max_out);
	struct beam *b = calloc(1, sizeof *b);
	if (!b)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the beam search");
	b->p = *p;
	b->n_live = 1;
	*out = b;
	return BG_OK;
}

void beam_free(struct beam *b)
{
	if (!b)
		return;
	for (int32_t i = 0; i < b->n_hyps; i++)
		hyp_clear(&b->hyps[i]);
	free(b);
}

int32_t beam_n_live(const struct beam *b)
{
	return b->n_live;
}

bool beam_collect(struct beam *b, int32_t slot, const struct sampler_result *res)
{
	BG_ASSERT(slot >= 0 && slot < b->n_live && !b->have[slot]);
	b->cand[slot] = *res;
	b->have[slot] = true;
	return ++b->n_collected == b->n_live;
}

/* ---- one step ---- */

struct cand {
	double sum; /* cum_logprob of the beam + the token's log-prob */
	float lp;
	int32_t slot, k; /* the beam, the rank of the token among its alternatives */
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	/* NaN (a broken model) sorts last, as -inf would */
	double sx = isnan(x->sum) ? -INFINITY : x->sum, sy = isnan(y->sum) ? -INFINITY : y->sum;
	if (sx != sy)
		return sx > sy ? -1 : 1;
	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

static double score_of(const struct beam *b, double cum, int32_t len)
{
	return cum / pow((double)len, (double)b->p.length_penalty);
}

/* A copy of beam r's tokens extended by (token, lp, top): h (fresh arrays). */
static bool extend(const struct beam *b, const struct request *r, int32_t token, float lp,
		   const struct sampler_result *top, struct hyp *h)
{
	int32_t n = r->n_out + 1;
	memset(h, 0, sizeof *h);
	h->ids = malloc((size_t)n * sizeof *h->ids);
	h->lps = malloc((size_t)n * sizeof *h->lps);
	if (b->p.logprobs > 0)
		h->top = malloc((size_t)n * sizeof *h->top);
	if (!h->ids || !h->lps || (b->p.logprobs > 0 && !h->top)) {
		hyp_clear(h);
		return false;
	}
	if (r->n_out > 0) {
		memcpy(h->ids, r->out_ids, (size_t)r->n_out * sizeof *h->ids);
		memcpy(h->lps, r->out_logprobs, (size_t)r->n_out * sizeof *h->lps);
		if (h->top)
			memcpy(h->top, r->out_top, (size_t)r->n_out * sizeof *h->top);
	}
	h->ids[r->n_out] = token;
	h->lps[r->n_out] = lp;
	if (h->top) {
		/* the top alternatives the request asked for, the rest zeroed (deterministic
		 * bytes, as the engine stores them) */
		struct sampler_result *t = &h->top[r->n_out];
		*t = *top;
		t->token = token;
		t->logprob = lp;
		t->n_top = top->n_top < b->p.logprobs ? top->n_top : b->p.logprobs;
		for (int32_t k = t->n_top; k < SAMPLER_MAX_TOP; k++) {
			t->top_ids[k] = 0;
			t->top_logprobs[k] = 0.0f;
		}
	}
	h->n = n;
	h->cum = r->cum_logprob + (double)lp;
	return true;
}

/* Keeps h among the W best hypotheses (h's arrays are taken or freed). */
static void add_hyp(struct beam *b, struct hyp *h)
{
	int32_t W = b->p.width;
	if (b->n_hyps == W && !(h->score > b->hyps[W - 1].score)) {
		hyp_clear(h);
		return;
	}
	if (b->n_hyps == W)
		hyp_clear(&b->hyps[--b->n_hyps]);
	int32_t i = b->n_hyps;
	while (i > 0 && !(b->hyps[i - 1].score >= h->score))
		i--;
	memmove(&b->hyps[i + 1], &b->hyps[i], (size_t)(b->n_hyps - i) * sizeof *b->hyps);
	b->hyps[i] = *h;
	b->n_hyps++;
}

/* Frees beam r's output arrays: no tokens (cum_logprob is left as it is). */
static void drop_output(struct request *r)
{
	free(r->out_ids);
	free(r->out_logprobs);
	free(r->out_top);
	r->out_ids = NULL;
	r->out_logprobs = NULL;
	r->out_top = NULL;
	r->n_out = 0;
}

/* Moves h into request r's output arrays (freeing r's). */
static void hyp_to_beam(struct hyp *h, struct request *r)
{
	drop_output(r);
	r->out_ids = h->ids;
	r->out_logprobs = h->lps;
	r->out_top = h->top;
	r->n_out = h->n;
	r->cum_logprob = h->cum;
	memset(h, 0, sizeof *h);
}

enum bg_status beam_step(struct beam *b, struct request *const *beams, beam_finishing_fn fin,
			 void *fin_user, int32_t *parent, int32_t *n_next, bool *done,
			 struct bg_err *err)
{
	int32_t W = b->p.width, L = b->n_live;
	BG_ASSERT(b->n_collected == L);
	struct cand c[W_MAX * SAMPLER_MAX_TOP];
	int32_t nc = 0;
	for (int32_t s = 0; s < L; s++)
		for (int32_t k = 0; k < b->cand[s].n_top; k++)
			c[nc++] = (struct cand){beams[s]->cum_logprob +
						    (double)b->cand[s].top_logprobs[k],
						b->cand[s].top_logprobs[k], s, k};
	qsort(c, (size_t)nc, sizeof *c, cand_cmp);
	struct hyp next[W_MAX];
	int32_t nn = 0;
	enum bg_status st = BG_OK;
	for (int32_t i = 0; i < nc && nn < W; i++) {
		const struct sampler_result *cr = &b->cand[c[i].slot];
		int32_t tok = cr->top_ids[c[i].k];
		enum req_finish f = fin(fin_user, tok);
		if (f != REQ_FINISH_NONE && i >= W)
			continue; /* a finishing candidate ranked past W is dropped */
		struct hyp h;
		if (!extend(b, beams[c[i].slot], tok, c[i].lp, cr, &h)) {
			st = bg_fail(err, BG_ERR_NOMEM, "out of memory for the beam search");
			break;
		}
		if (f != REQ_FINISH_NONE) {
			h.finish = f;
			h.score = score_of(b, h.cum, h.n);
			add_hyp(b, &h);
		} else {
			parent[nn] = c[i].slot;
			next[nn++] = h;
		}
	}
	if (st != BG_OK) {
		for (int32_t j = 0; j < nn; j++)
			hyp_clear(&next[j]);
		return st;
	}
	/* the new beams, best first; slots past them are emptied */
	for (int32_t j = 0; j < nn; j++)
		hyp_to_beam(&next[j], beams[j]);
	for (int32_t s = nn; s < L; s++) {
		drop_output(beams[s]);
		beams[s]->cum_logprob = 0;
	}
	b->n_live = nn;
	b->n_collected = 0;
	memset(b->have, 0, sizeof b->have);
	*n_next = nn;
	*done = false;
	if (nn == 0) {
		*done = true;
	} else if (b->n_hyps == W &&
		   (b->p.early_stopping ||
		    b->hyps[W - 1].score >= score_of(b, beams[0]->cum_logprob, beams[0]->n_out))) {
		*done = true;
	} else if (beams[0]->n_out >= b->p.max_out) {
		*done = true;
		b->by_length = true;
	}
	return BG_OK;
}

/* ---- the result ---- */

static bool hyp_text(const struct hyp *h, const struct tok *tok, struct req_choice *c)
{
	size_t cap = 16;
	c->text = malloc(cap);
	if (!c->text)
		return false;
	c->text[0] = 0;
	c->text_len = 0;
	if (!tok)
		return true;
	struct tok_stream ts;
	tok_stream_init(&ts, tok);
	/* the finishing token (end of generation, a stop id) is not text, as for a plain
	 * request */
	int32_t n = h->finish == REQ_FINISH_LENGTH ? h->n : h->n - 1;
	for (int32_t i = 0; i < n; i++)
		if (tok_stream_push(&ts, h->ids[i], &c->text, &c->text_len, &cap) < 0)
			return false;
	return tok_stream_flush(&ts, &c->text, &c->text_len, &cap) >= 0;
}

enum bg_status beam_finish(struct beam *b, struct request *const *beams, struct request *r,
			   const struct tok *tok, struct bg_err *err)
{
	if (b->by_length) {
		for (int32_t s = 0; s < b->n_live; s++) {
			struct request *br = beams[s];
			struct hyp h = {0};
			/* the hypothesis takes the beam's arrays */
			h.ids = br->out_ids;
			h.lps = br->out_logprobs;
			h.top = br->out_top;
			h.n = br->n_out;
			h.cum = br->cum_logprob;
			h.finish = REQ_FINISH_LENGTH;
			h.score = score_of(b, h.cum, h.n);
			br->out_ids = NULL;
			br->out_logprobs = NULL;
			br->out_top = NULL;
			br->n_out = 0;
			add_hyp(b, &h);
		}
		b->n_live = 0;
		b->by_length = false;
	}
	int32_t n = b->n_hyps < b->p.n_return ? b->n_hyps : b->p.n_return;
	struct req_choice *ch = calloc((size_t)(n > 0 ? n : 1), sizeof *ch);
	if (!ch)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the beam search result");
	for (int32_t i = 0; i < n; i++) {
		if (!hyp_text(&b->hyps[i], tok, &ch[i])) {
			for (int32_t k = 0; k <= i; k++)
				free(ch[k].text);
			free(ch);
			return bg_fail(err, BG_ERR_NOMEM,
				       "out of memory for the beam search result");
		}
	}
	int64_t total = 0;
	for (int32_t i = 0; i < n; i++) {
		struct hyp *h = &b->hyps[i];
		ch[i].finish = h->finish;
		ch[i].out_ids = h->ids;
		ch[i].n_out = h->n;
		ch[i].out_logprobs = b->p.logprobs >= 0 ? h->lps : NULL;
		if (b->p.logprobs < 0)
			free(h->lps);
		ch[i].out_top = h->top;
		ch[i].cum_logprob = h->cum;
		total += h->n;
		memset(h, 0, sizeof *h);
	}
	/* the live beams not returned (the root's own request is beams[0]) */
	for (int32_t s = 0; s < b->n_live; s++)
		drop_output(beams[s]);
	b->n_live = 0;
	for (int32_t i = 0; i < r->n_choices; i++)
		req_choice_clear(&r->choices[i]);
	free(r->choices);
	r->choices = ch;
	r->n_choices = n;
	r->n_out = total > INT32_MAX ? INT32_MAX : (int32_t)total;
	r->finish = n > 0 ? ch[0].finish : REQ_FINISH_LENGTH;
	return BG_OK;
}
