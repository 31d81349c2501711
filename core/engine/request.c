#include "engine/request.h"

#include <stdlib.h>

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
	sampler_params_default(&r->sampling);
	return r;
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
	free(r);
}
