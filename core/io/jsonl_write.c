#include "io/jsonl_write.h"
#include "strbuf.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jsonl_out_opts_init(struct jsonl_out_opts *o)
{
	memset(o, 0, sizeof *o);
	o->render_special = true;
}

/* ==== writer ==== */

/* v with the fewest significant digits that read back as the same value, as a float (a
 * log-prob is a float; printing its double expansion would show noise digits) or as a
 * double. JSON has no infinities: a -inf log-prob reads as null. */
static void sb_shortest(struct strbuf *b, double v, bool as_float)
{
	if (!isfinite(v)) {
		strbuf_puts(b, "null");
		return;
	}
	char tmp[40];
	for (int prec = 1; prec <= (as_float ? 9 : 17); prec++) {
		snprintf(tmp, sizeof tmp, "%.*g", prec, v);
		if (as_float ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v)
			break;
	}
	strbuf_puts(b, tmp);
}

static void sb_float(struct strbuf *b, float v)
{
	sb_shortest(b, v, true);
}

static void sb_double(struct strbuf *b, double v)
{
	sb_shortest(b, v, false);
}

static void sb_ms(struct strbuf *b, double v)
{
	if (!isfinite(v)) {
		strbuf_puts(b, "null");
		return;
	}
	strbuf_printf(b, "%.3f", v); /* microseconds are plenty for timings */
}

static void sb_key(struct strbuf *b, const char *k)
{
	strbuf_put(b, "\"", 1);
	strbuf_puts(b, k);
	strbuf_puts(b, "\":");
}

struct piece {
	char small[64];
	char *big;
	const char *p;
	size_t n;
};

/* The bytes token id stands for (tok_piece), or "" without a tokenizer. */
static bool get_piece(const struct tok *t, int32_t id, bool special, struct piece *pc)
{
	pc->big = NULL;
	pc->p = pc->small;
	pc->n = 0;
	if (!t)
		return true;
	size_t n = tok_piece(t, id, special, pc->small, sizeof pc->small);
	if (n > sizeof pc->small) {
		pc->big = malloc(n);
		if (!pc->big)
			return false;
		tok_piece(t, id, special, pc->big, n);
		pc->p = pc->big;
	}
	pc->n = n;
	return true;
}

static void piece_free(struct piece *pc)
{
	free(pc->big);
}

static void sb_token_str(struct strbuf *b, const struct tok *t, int32_t id, bool special)
{
	struct piece pc;
	if (!get_piece(t, id, special, &pc)) {
		b->oom = true;
		return;
	}
	jsonl_sb_quote(b, pc.p, pc.n);
	piece_free(&pc);
}

static void sb_bytes(struct strbuf *b, const struct tok *t, int32_t id, bool special)
{
	struct piece pc;
	if (!get_piece(t, id, special, &pc)) {
		b->oom = true;
		return;
	}
	strbuf_put(b, "[", 1);
	for (size_t i = 0; i < pc.n; i++)
		strbuf_printf(b, "%s%u", i ? "," : "", (unsigned)(unsigned char)pc.p[i]);
	strbuf_put(b, "]", 1);
	piece_free(&pc);
}

static const char *error_code(const struct request *r)
{
	return r->error.code[0] ? r->error.code : NULL;
}

static void sb_ids(struct strbuf *b, const int32_t *ids, int32_t n)
{
	strbuf_put(b, "[", 1);
	for (int32_t i = 0; i < n; i++)
		strbuf_printf(b, "%s%" PRId32, i ? "," : "", ids[i]);
	strbuf_put(b, "]", 1);
}

/* [{"id": .., "token": .., "logprob": ..}, ...] of one position */
static void sb_top_native(struct strbuf *b, const struct sampler_result *s, const struct tok *t,
			  bool special)
{
	strbuf_put(b, "[", 1);
	int32_t n = s->n_top < 0 ? 0 : s->n_top > SAMPLER_MAX_TOP ? SAMPLER_MAX_TOP : s->n_top;
	for (int32_t k = 0; k < n; k++) {
		strbuf_printf(b, "%s{\"id\":%" PRId32 ",\"token\":", k ? "," : "", s->top_ids[k]);
		sb_token_str(b, t, s->top_ids[k], special);
		strbuf_puts(b, ",\"logprob\":");
		sb_float(b, s->top_logprobs[k]);
		strbuf_put(b, "}", 1);
	}
	strbuf_put(b, "]", 1);
}

/* ,"key":[e0,e1,...], one entry per token for n tokens: the log-prob lp[i], or with lp NULL
 * the alternatives top[i] in the native form (with t and render_special); entries before
 * `first` (and all of them when lp and top are both NULL) are written as `missing`. */
static void sb_token_array(struct strbuf *b, const char *key, int32_t n, int32_t first,
			   const char *missing, const float *lp, const struct sampler_result *top,
			   const struct tok *t, bool render_special)
{
	strbuf_puts(b, ",");
	sb_key(b, key);
	strbuf_put(b, "[", 1);
	for (int32_t i = 0; i < n; i++) {
		if (i)
			strbuf_put(b, ",", 1);
		if (i < first || (!lp && !top))
			strbuf_puts(b, missing);
		else if (lp)
			sb_float(b, lp[i]);
		else
			sb_top_native(b, &top[i], t, render_special);
	}
	strbuf_put(b, "]", 1);
}

/* The per-sequence fields of a plain result: ,"text", "token_ids", "finish_reason",
 * "logprobs"?, "top_logprobs"? */
static void write_native_seq(struct strbuf *b, const struct request *r, const struct tok *t,
			     const struct jsonl_out_opts *o, const char *ec, int32_t n_out)
{
	strbuf_put(b, ",", 1);
	sb_key(b, "text");
	jsonl_sb_quote(b, ec || !r->text ? "" : r->text, ec || !r->text ? 0 : r->text_len);
	strbuf_put(b, ",", 1);
	sb_key(b, "token_ids");
	sb_ids(b, r->out_ids, n_out);
	strbuf_put(b, ",", 1);
	sb_key(b, "finish_reason");
	strbuf_printf(b, "\"%s\"", ec ? "error" : req_finish_name(r->finish));
	if (r->logprobs >= 0)
		sb_token_array(b, "logprobs", n_out, 0, "null", r->out_logprobs, NULL, t, false);
	if (r->logprobs > 0)
		sb_token_array(b, "top_logprobs", n_out, 0, "[]", NULL, r->out_top, t,
			       o->render_special);
}

/* n > 1: ,"choices":[{index, text, token_ids, finish_reason, logprobs?, top_logprobs?,
 * cum_logprob}, ...] (ERRATA: one entry per sequence, the per-sequence fields of a plain
 * result). */
static void write_native_choices(struct strbuf *b, const struct request *r, const struct tok *t,
				 const struct jsonl_out_opts *o)
{
	strbuf_puts(b, ",");
	sb_key(b, "choices");
	strbuf_put(b, "[", 1);
	for (int32_t i = 0; i < r->n_choices; i++) {
		const struct req_choice *c = &r->choices[i];
		int32_t n_out = c->out_ids ? c->n_out : 0;
		strbuf_printf(b, "%s{\"index\":%" PRId32 ",", i ? "," : "", i);
		sb_key(b, "text");
		jsonl_sb_quote(b, c->text ? c->text : "", c->text ? c->text_len : 0);
		strbuf_put(b, ",", 1);
		sb_key(b, "token_ids");
		sb_ids(b, c->out_ids, n_out);
		strbuf_printf(b, ",\"finish_reason\":\"%s\"", req_finish_name(c->finish));
		if (r->logprobs >= 0)
			sb_token_array(b, "logprobs", n_out, 0, "null", c->out_logprobs, NULL, t,
				       false);
		if (r->logprobs > 0)
			sb_token_array(b, "top_logprobs", n_out, 0, "[]", NULL, c->out_top, t,
				       o->render_special);
		strbuf_puts(b, ",");
		sb_key(b, "cum_logprob");
		sb_double(b, c->cum_logprob);
		strbuf_put(b, "}", 1);
	}
	strbuf_put(b, "]", 1);
}

static void write_native(struct strbuf *b, const struct request *r, const struct tok *t,
			 const struct jsonl_out_opts *o)
{
	const char *ec = error_code(r);
	int32_t n_out = ec || !r->out_ids ? 0 : r->n_out;
	strbuf_put(b, "{", 1);
	sb_key(b, "id");
	jsonl_sb_quote(b, r->id ? r->id : "", r->id ? strlen(r->id) : 0);
	bool choices = r->n_choices > 0 && !ec;
	if (choices)
		write_native_choices(b, r, t, o);
	else
		write_native_seq(b, r, t, o, ec, n_out);
	if (r->prompt_logprobs >= 0) {
		int32_t n_prompt = ec || !r->prompt_ids ? 0 : r->n_prompt;
		strbuf_puts(b, ",");
		sb_key(b, "prompt_token_ids");
		sb_ids(b, r->prompt_ids, n_prompt);
		/* the first prompt token has no log-prob (NAN): null */
		sb_token_array(b, "prompt_logprobs", n_prompt, 1, "null", r->prompt_lp, NULL, t,
			       false);
		if (r->prompt_logprobs > 0)
			sb_token_array(b, "prompt_top_logprobs", n_prompt, 1, "null", NULL,
				       r->prompt_top, t, o->render_special);
	}
	if (!choices) {
		strbuf_puts(b, ",");
		sb_key(b, "cum_logprob");
		sb_double(b, ec ? 0.0 : r->cum_logprob);
	}
	strbuf_puts(b, ",\"usage\":{\"prompt_tokens\":");
	strbuf_printf(b, "%" PRId32 ",\"completion_tokens\":%" PRId32 ",\"cached_tokens\":%" PRId32 "}",
		      ec ? 0 : r->n_prompt, choices ? r->n_out : n_out, ec ? 0 : r->cached_tokens);
	strbuf_puts(b, ",\"metrics\":{\"queue_ms\":");
	sb_ms(b, r->queue_ms);
	strbuf_puts(b, ",\"ttft_ms\":");
	sb_ms(b, r->ttft_ms);
	strbuf_puts(b, ",\"e2e_ms\":");
	sb_ms(b, r->e2e_ms);
	strbuf_printf(b, ",\"preemptions\":%" PRId32 "}", r->preemptions);
	strbuf_puts(b, ",\"error\":");
	if (ec) {
		strbuf_puts(b, "{\"code\":");
		jsonl_sb_quote(b, r->error.code, strlen(r->error.code));
		strbuf_puts(b, ",\"message\":");
		jsonl_sb_quote(b, r->error.message, strlen(r->error.message));
		strbuf_printf(b, ",\"line\":%" PRId64 "}", r->line);
	} else {
		strbuf_puts(b, "null");
	}
	strbuf_put(b, "}", 1);
}

/* OpenAI reports "stop" for every natural end (stop string, stop token, EOS). */
static const char *openai_finish(enum req_finish f)
{
	return f == REQ_FINISH_LENGTH ? "length" : "stop";
}

/* Validation problems are the client's (HTTP 400); anything else is the server's. */
static bool client_error(const char *code)
{
	static const char *const codes[] = {
	    "empty_line", "invalid_json", "invalid_request", "unsupported",
	    "too_long",	  "duplicate_id", "invalid_token",   NULL};
	for (const char *const *c = codes; *c; c++)
		if (strcmp(code, *c) == 0)
			return true;
	return false;
}

static int64_t count_code_points(const char *s, size_t n)
{
	int64_t c = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			c++;
	return c;
}

static void write_completion_logprobs(struct strbuf *b, const struct request *r,
				      const struct tok *t, const struct jsonl_out_opts *o)
{
	int32_t n = r->out_ids ? r->n_out : 0;
	strbuf_puts(b, "{\"tokens\":[");
	for (int32_t i = 0; i < n; i++) {
		if (i)
			strbuf_put(b, ",", 1);
		sb_token_str(b, t, r->out_ids[i], o->render_special);
	}
	strbuf_puts(b, "],\"token_logprobs\":[");
	for (int32_t i = 0; i < n; i++) {
		if (i)
			strbuf_put(b, ",", 1);
		if (r->out_logprobs)
			sb_float(b, r->out_logprobs[i]);
		else
			strbuf_puts(b, "null");
	}
	strbuf_puts(b, "],\"top_logprobs\":[");
	for (int32_t i = 0; i < n; i++) {
		if (i)
			strbuf_put(b, ",", 1);
		/* {token: logprob} of the top-n, plus the chosen token (OpenAI: "up to
		 * logprobs+1 elements"). Two ids with the same text keep the first, more
		 * likely one, since an object cannot hold a key twice. */
		struct piece keys[SAMPLER_MAX_TOP + 1];
		int nk = 0;
		strbuf_put(b, "{", 1);
		int32_t ntop = 0;
		const int32_t *ids = NULL;
		const float *lps = NULL;
		if (r->out_top && r->logprobs > 0) {
			ntop = r->out_top[i].n_top;
			ntop = ntop < 0 ? 0 : ntop > SAMPLER_MAX_TOP ? SAMPLER_MAX_TOP : ntop;
			ids = r->out_top[i].top_ids;
			lps = r->out_top[i].top_logprobs;
		}
		for (int32_t k = 0; k <= ntop; k++) {
			int32_t id = k < ntop ? ids[k] : r->out_ids[i];
			float lp = k < ntop ? lps[k] : (r->out_logprobs ? r->out_logprobs[i] : NAN);
			struct piece *pc = &keys[nk];
			if (!get_piece(t, id, o->render_special, pc)) {
				b->oom = true;
				break;
			}
			bool dup = false;
			for (int j = 0; j < nk; j++)
				dup = dup ||
				      (keys[j].n == pc->n && memcmp(keys[j].p, pc->p, pc->n) == 0);
			if (dup) {
				piece_free(pc);
				continue;
			}
			if (nk)
				strbuf_put(b, ",", 1);
			jsonl_sb_quote(b, pc->p, pc->n);
			strbuf_put(b, ":", 1);
			sb_float(b, lp);
			nk++;
		}
		for (int j = 0; j < nk; j++)
			piece_free(&keys[j]);
		strbuf_put(b, "}", 1);
	}
	/* text_offset: where each token starts in the completion text, in code points
	 * (Python string indices, as OpenAI and vLLM count them) of the concatenated token
	 * texts. */
	strbuf_puts(b, "],\"text_offset\":[");
	int64_t off = 0;
	for (int32_t i = 0; i < n; i++) {
		strbuf_printf(b, "%s%" PRId64, i ? "," : "", off);
		struct piece pc;
		/* control tokens are not part of the text */
		if (!get_piece(t, r->out_ids[i], false, &pc)) {
			b->oom = true;
			break;
		}
		off += count_code_points(pc.p, pc.n);
		piece_free(&pc);
	}
	strbuf_puts(b, "]}");
}

static void write_chat_logprobs(struct strbuf *b, const struct request *r, const struct tok *t,
				const struct jsonl_out_opts *o)
{
	strbuf_puts(b, "{\"content\":[");
	int32_t n = r->out_ids ? r->n_out : 0;
	for (int32_t i = 0; i < n; i++) {
		int32_t id = r->out_ids[i];
		strbuf_puts(b, i ? ",{\"token\":" : "{\"token\":");
		sb_token_str(b, t, id, o->render_special);
		strbuf_puts(b, ",\"logprob\":");
		if (r->out_logprobs)
			sb_float(b, r->out_logprobs[i]);
		else
			strbuf_puts(b, "null");
		strbuf_puts(b, ",\"bytes\":");
		sb_bytes(b, t, id, o->render_special);
		strbuf_puts(b, ",\"top_logprobs\":[");
		if (r->out_top && r->logprobs > 0) {
			const struct sampler_result *s = &r->out_top[i];
			int32_t ntop = s->n_top < 0		    ? 0
				       : s->n_top > SAMPLER_MAX_TOP ? SAMPLER_MAX_TOP
								    : s->n_top;
			for (int32_t k = 0; k < ntop; k++) {
				strbuf_puts(b, k ? ",{\"token\":" : "{\"token\":");
				sb_token_str(b, t, s->top_ids[k], o->render_special);
				strbuf_puts(b, ",\"logprob\":");
				sb_float(b, s->top_logprobs[k]);
				strbuf_puts(b, ",\"bytes\":");
				sb_bytes(b, t, s->top_ids[k], o->render_special);
				strbuf_put(b, "}", 1);
			}
		}
		strbuf_puts(b, "]}");
	}
	strbuf_puts(b, "]}");
}

static void write_openai_choice(struct strbuf *b, const struct request *r, const struct tok *t,
				const struct jsonl_out_opts *o, const struct jsonl_info *info,
				bool chat, int32_t index);

static void write_openai(struct strbuf *b, const struct request *r, const struct tok *t,
			 const struct jsonl_out_opts *o, const struct jsonl_info *info)
{
	const char *run = o->run_id ? o->run_id : "";
	const char *ec = error_code(r);
	const char *cid = info->custom_id; /* NULL: the line had none (jsonl_line_key) */
	bool chat = info->form == JSONL_FORM_OPENAI_CHAT;
	int64_t created = info->created ? info->created : o->created;

	strbuf_printf(b, "{\"id\":");
	{
		char tmp[128];
		snprintf(tmp, sizeof tmp, "batch_req_%s%" PRId64, run, r->line);
		jsonl_sb_quote(b, tmp, strlen(tmp));
	}
	strbuf_puts(b, ",\"custom_id\":");
	if (cid)
		jsonl_sb_quote(b, cid, strlen(cid));
	else
		strbuf_puts(b, "null");
	strbuf_puts(b, ",\"response\":");
	char req_id[128];
	snprintf(req_id, sizeof req_id, "req_%s%" PRId64, run, r->line);

	if (!ec && r->finish == REQ_FINISH_CANCELLED) {
		/* not an HTTP outcome: OpenAI reports these in the line's error */
		strbuf_puts(
		    b, "null,\"error\":{\"code\":\"batch_cancelled\",\"message\":\"the run was "
		       "interrupted before this request finished\"}}");
		return;
	}
	if (ec) {
		bool client = client_error(ec);
		strbuf_printf(b, "{\"status_code\":%d,\"request_id\":", client ? 400 : 500);
		jsonl_sb_quote(b, req_id, strlen(req_id));
		strbuf_puts(b, ",\"body\":{\"error\":{\"message\":");
		jsonl_sb_quote(b, r->error.message, strlen(r->error.message));
		strbuf_printf(b, ",\"type\":\"%s\",\"param\":null,\"code\":",
			      client ? "invalid_request_error" : "server_error");
		jsonl_sb_quote(b, ec, strlen(ec));
		strbuf_printf(b, ",\"line\":%" PRId64 "}}},\"error\":null}", r->line);
		return;
	}

	strbuf_puts(b, "{\"status_code\":200,\"request_id\":");
	jsonl_sb_quote(b, req_id, strlen(req_id));
	strbuf_puts(b, ",\"body\":{\"id\":");
	{
		char tmp[128];
		snprintf(tmp, sizeof tmp, "%s%s%" PRId64, chat ? "chatcmpl-" : "cmpl-", run,
			 r->line);
		jsonl_sb_quote(b, tmp, strlen(tmp));
	}
	strbuf_printf(b, ",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":",
		      chat ? "chat.completion" : "text_completion", created);
	const char *model = info->model ? info->model : "batchgen";
	jsonl_sb_quote(b, model, strlen(model));
	strbuf_puts(b, ",\"choices\":[");
	/* n > 1: choices[index], each written from a view of r with that sequence's fields */
	int32_t n_ch = r->n_choices > 0 ? r->n_choices : 1;
	for (int32_t ci = 0; ci < n_ch; ci++) {
		struct request view = *r;
		if (r->n_choices > 0)
			req_choice_view(r, &r->choices[ci], &view);
		strbuf_puts(b, ci ? ",{" : "{");
		write_openai_choice(b, &view, t, o, info, chat, ci);
	}
	strbuf_put(b, "]", 1);
	strbuf_printf(b,
		      ",\"usage\":{\"prompt_tokens\":%" PRId32 ",\"completion_tokens\":%" PRId32
		      ",\"total_tokens\":%" PRId64 ",\"prompt_tokens_details\":{\"cached_tokens\":%" PRId32
		      "}}}},\"error\":null}",
		      r->n_prompt, r->n_out, (int64_t)r->n_prompt + r->n_out, r->cached_tokens);
}

/* One entry of an OpenAI body's choices (after its "{"), from r's sequence fields. */
static void write_openai_choice(struct strbuf *b, const struct request *r, const struct tok *t,
				const struct jsonl_out_opts *o, const struct jsonl_info *info,
				bool chat, int32_t index)
{
	const char *text = r->text ? r->text : "";
	size_t text_len = r->text ? r->text_len : 0;
	if (chat) {
		strbuf_printf(b, "\"index\":%" PRId32 ",\"message\":{\"role\":\"assistant\",\"content\":",
			      index);
		jsonl_sb_quote(b, text, text_len);
		strbuf_puts(b, "},\"logprobs\":");
		if (info->chat_logprobs && r->logprobs >= 0)
			write_chat_logprobs(b, r, t, o);
		else
			strbuf_puts(b, "null");
	} else {
		strbuf_puts(b, "\"text\":");
		jsonl_sb_quote(b, text, text_len);
		strbuf_printf(b, ",\"index\":%" PRId32 ",\"logprobs\":", index);
		if (r->logprobs >= 0)
			write_completion_logprobs(b, r, t, o);
		else
			strbuf_puts(b, "null");
	}
	strbuf_printf(b, ",\"finish_reason\":\"%s\"}", openai_finish(r->finish));
}

enum bg_status jsonl_write_result(const struct request *r, const struct tok *t,
				  const struct jsonl_out_opts *o, char **line, size_t *len)
{
	*line = NULL;
	if (len)
		*len = 0;
	struct jsonl_out_opts dflt;
	if (!o) {
		jsonl_out_opts_init(&dflt);
		o = &dflt;
	}
	struct strbuf b = {0};
	const struct jsonl_info *info = jsonl_request_info(r);
	struct jsonl_info guess = {.form = o->default_form, .created = o->created};
	if (!info && o->default_form != JSONL_FORM_NATIVE)
		info = &guess; /* e.g. an empty line in an OpenAI batch file */
	if (info && info->form != JSONL_FORM_NATIVE)
		write_openai(&b, r, t, o, info);
	else
		write_native(&b, r, t, o);
	strbuf_put(&b, "\n", 1);
	if (b.oom) {
		free(b.p);
		return BG_ERR_NOMEM;
	}
	*line = b.p;
	if (len)
		*len = b.len;
	return BG_OK;
}

/* ==== --resume ==== */

/* The line number an OpenAI error result carries (response.body.error.line, or the
 * top-level error's), or 0. */
static int64_t result_error_line(const cJSON *root)
{
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
	const cJSON *body =
	    cJSON_IsObject(resp) ? cJSON_GetObjectItemCaseSensitive(resp, "body") : NULL;
	const cJSON *errs[2] = {
	    cJSON_IsObject(body) ? cJSON_GetObjectItemCaseSensitive(body, "error") : NULL,
	    cJSON_GetObjectItemCaseSensitive(root, "error")};
	for (int i = 0; i < 2; i++) {
		const cJSON *l = cJSON_IsObject(errs[i])
				     ? cJSON_GetObjectItemCaseSensitive(errs[i], "line")
				     : NULL;
		if (cJSON_IsNumber(l) && l->valuedouble >= 1 && l->valuedouble < 9e15 &&
		    l->valuedouble == floor(l->valuedouble))
			return (int64_t)l->valuedouble;
	}
	return 0;
}

enum bg_status jsonl_result_id(const char *line, size_t len, char **id)
{
	*id = NULL;
	if (!line)
		return BG_ERR_FORMAT;
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
	if (!root)
		return BG_ERR_FORMAT;
	enum bg_status st = BG_ERR_FORMAT;
	if (cJSON_IsObject(root) && (!end || jsonl_blank(end, len - (size_t)(end - line)))) {
		const cJSON *cid = cJSON_GetObjectItemCaseSensitive(root, "custom_id");
		const cJSON *it =
		    cJSON_IsString(cid) ? cid : cJSON_GetObjectItemCaseSensitive(root, "id");
		int64_t key_line = cJSON_IsNull(cid) ? result_error_line(root) : 0;
		if (key_line > 0) {
			/* a line without a custom_id of its own: its reserved key */
			char key[32];
			jsonl_line_key(key_line, key, sizeof key);
			*id = strdup(key);
			st = *id ? BG_OK : BG_ERR_NOMEM;
		} else if (cJSON_IsString(it) && !cJSON_IsNull(cid)) {
			*id = strdup(it->valuestring);
			st = *id ? BG_OK : BG_ERR_NOMEM;
		}
	}
	cJSON_Delete(root);
	return st;
}
