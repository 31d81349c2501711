#include "engine/request.h"

#include <stdlib.h>
#include <string.h>

const char *req_finish_name(enum req_finish f)
{
	switch (f) {
	case REQ_FINISH_NONE: return "none";
	case REQ_FINISH_STOP: return "stop";
	case REQ_FINISH_EOS: return "eos";
	case REQ_FINISH_LENGTH: return "length";
	case REQ_FINISH_ERROR: return "error";
	case REQ_FINISH_CANCELLED: return "cancelled";
	}
	return "none";
}

struct request *req_new(void)
{
	struct request *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->add_bos = -1;
	r->max_tokens = 0; /* until end-of-generation or the end of the context */
	r->logprobs = -1;
	r->prompt_logprobs = -1;
	r->n = 1;
	r->beam_width = 1;
	r->length_penalty = 1.0f;
	sampler_params_default(&r->sampling);
	return r;
}

void req_choice_clear(struct req_choice *c)
{
	free(c->out_ids);
	free(c->out_logprobs);
	free(c->out_top);
	free(c->text);
	memset(c, 0, sizeof *c);
}

void req_take_choice(struct request *r, struct req_choice *c)
{
	c->finish = r->finish;
	c->out_ids = r->out_ids;
	c->n_out = r->n_out;
	c->out_logprobs = r->out_logprobs;
	c->out_top = r->out_top;
	c->text = r->text;
	c->text_len = r->text_len;
	c->cum_logprob = r->cum_logprob;
	r->out_ids = NULL;
	r->out_logprobs = NULL;
	r->out_top = NULL;
	r->text = NULL;
	r->n_out = 0;
	r->text_len = 0;
}

void req_choice_view(const struct request *r, const struct req_choice *c, struct request *view)
{
	*view = *r;
	view->finish = c->finish;
	view->out_ids = c->out_ids;
	view->n_out = c->n_out;
	view->out_logprobs = c->out_logprobs;
	view->out_top = c->out_top;
	view->text = c->text;
	view->text_len = c->text_len;
	view->cum_logprob = c->cum_logprob;
}

void req_free(struct request *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->prompt);
	free(r->input_ids);
	for (int32_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->stop);
	free(r->stop_token_ids);
	grammar_free(r->grammar);
	free(r->bias_ids);
	free(r->bias_vals);
	for (int32_t i = 0; i < r->n_bad_words; i++)
		free(r->bad_words[i]);
	free(r->bad_words);
	if (r->user && r->user_free)
		r->user_free(r->user);
	free(r->prompt_ids);
	free(r->out_ids);
	free(r->out_logprobs);
	free(r->out_top);
	free(r->prompt_lp);
	free(r->prompt_top);
	free(r->text);
	for (int32_t i = 0; i < r->n_choices; i++)
		req_choice_clear(&r->choices[i]);
	free(r->choices);
	free(r);
}
