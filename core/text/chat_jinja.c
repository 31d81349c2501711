/* chat_jinja: the request-side conventions of transformers / vLLM around the Jinja
 * interpreter (see chat_jinja.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "text/chat_jinja.h"
#include "text/jinja.h"

struct chat_jinja {
	struct jinja_template *t;
	char *bos, *eos;
	struct jinja_opts opts;
};

enum bg_status chat_jinja_create(const char *src, size_t len, const char *bos, const char *eos,
				 int year, int month, int day, struct chat_jinja **out,
				 struct bg_err *err)
{
	*out = NULL;
	struct chat_jinja *cj = calloc(1, sizeof *cj);
	if (!cj)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	cj->bos = strdup(bos ? bos : "");
	cj->eos = strdup(eos ? eos : "");
	if (!cj->bos || !cj->eos) {
		chat_jinja_destroy(cj);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	enum bg_status st = jinja_compile(src, len, &cj->t, err);
	if (st != BG_OK) {
		chat_jinja_destroy(cj);
		return st;
	}
	cj->opts = (struct jinja_opts){.year = year, .month = month, .day = day};
	*out = cj;
	return BG_OK;
}

void chat_jinja_destroy(struct chat_jinja *cj)
{
	if (!cj)
		return;
	jinja_free(cj->t);
	free(cj->bos);
	free(cj->eos);
	free(cj);
}

bool chat_jinja_parse_date(const char *s, int *y, int *m, int *d)
{
	int n = 0;
	if (!s || sscanf(s, "%4d-%2d-%2d%n", y, m, d, &n) != 3 || s[n] != 0 || n != 10)
		return false;
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	if (*y < 1 || *m < 1 || *m > 12 || *d < 1 || *d > mdays[*m - 1])
		return false;
	bool leap = (*y % 4 == 0 && *y % 100 != 0) || *y % 400 == 0;
	return !(*m == 2 && *d == 29 && !leap);
}

bool chat_role_may_omit_content(const char *role)
{
	return strcmp(role, "assistant") == 0;
}

enum bg_status chat_content_text(const cJSON *parts, char **out, struct bg_err *err)
{
	*out = NULL;
	struct strbuf b = {0};
	strbuf_put(&b, "", 0);
	int j = 0;
	for (const cJSON *part = parts ? parts->child : NULL; part; part = part->next, j++) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
		const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
		if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 ||
		    !cJSON_IsString(text)) {
			free(b.p);
			return bg_fail(err, BG_ERR_UNSUPPORTED,
				       "content[%d]: only {\"type\": \"text\", \"text\": ...} parts "
				       "are supported",
				       j);
		}
		if (j)
			strbuf_puts(&b, "\n");
		strbuf_puts(&b, text->valuestring);
	}
	if (b.oom) {
		free(b.p);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	*out = b.p;
	return BG_OK;
}

/* A copy of message i, normalised as vLLM does; NULL with err set on a bad message. */
static cJSON *normalise(const cJSON *msg, int i, struct bg_err *err)
{
	if (!cJSON_IsObject(msg)) {
		bg_fail(err, BG_ERR_INVALID, "messages[%d] must be an object", i);
		return NULL;
	}
	const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
	if (!cJSON_IsString(role)) {
		bg_fail(err, BG_ERR_INVALID, "messages[%d].role must be a string", i);
		return NULL;
	}
	cJSON *m = cJSON_Duplicate(msg, true);
	if (!m) {
		bg_fail(err, BG_ERR_NOMEM, "out of memory");
		return NULL;
	}
	cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
	if ((!c || cJSON_IsNull(c)) && !chat_role_may_omit_content(role->valuestring)) {
		cJSON_Delete(m);
		bg_fail(err, BG_ERR_INVALID, "messages[%d] (role \"%s\") has no content", i,
			role->valuestring);
		return NULL;
	}
	if (c && cJSON_IsArray(c)) {
		char *joined = NULL;
		struct bg_err perr = {0};
		if (chat_content_text(c, &joined, &perr) != BG_OK) {
			cJSON_Delete(m);
			bg_fail(err, perr.status, "messages[%d].%s", i, perr.msg);
			return NULL;
		}
		cJSON *s = cJSON_CreateString(joined);
		free(joined);
		if (!s || !cJSON_ReplaceItemInObjectCaseSensitive(m, "content", s)) {
			cJSON_Delete(s);
			cJSON_Delete(m);
			bg_fail(err, BG_ERR_NOMEM, "out of memory");
			return NULL;
		}
	} else if (c && !cJSON_IsString(c) && !cJSON_IsNull(c)) {
		cJSON_Delete(m);
		bg_fail(err, BG_ERR_INVALID,
			"messages[%d].content must be a string, null or an array of text parts", i);
		return NULL;
	}
	cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
	int k = 0;
	for (cJSON *call = cJSON_IsArray(calls) ? calls->child : NULL; call; call = call->next, k++) {
		cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
		cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		if (!cJSON_IsString(args))
			continue;
		cJSON *obj = cJSON_Parse(args->valuestring);
		if (!obj) {
			cJSON_Delete(m);
			bg_fail(err, BG_ERR_INVALID,
				"messages[%d].tool_calls[%d].function.arguments is not valid JSON", i, k);
			return NULL;
		}
		cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
	}
	return m;
}

enum bg_status chat_jinja_render(const struct chat_jinja *cj, const cJSON *messages,
				 const cJSON *tools, const cJSON *extra, bool add_generation_prompt,
				 char **out, size_t *out_len, struct bg_err *err)
{
	*out = NULL;
	if (out_len)
		*out_len = 0;
	if (!cJSON_IsArray(messages))
		return bg_fail(err, BG_ERR_INVALID, "messages must be an array of message objects");
	if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
		return bg_fail(err, BG_ERR_INVALID, "tools must be an array of tool definitions");
	if (extra && !cJSON_IsObject(extra))
		return bg_fail(err, BG_ERR_INVALID, "chat_template_kwargs must be an object");
	cJSON *vars = cJSON_CreateObject(), *msgs = cJSON_CreateArray();
	if (!vars || !msgs) {
		cJSON_Delete(vars);
		cJSON_Delete(msgs);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	cJSON_AddItemToObject(vars, "messages", msgs);
	int i = 0;
	for (const cJSON *m = messages->child; m; m = m->next, i++) {
		cJSON *c = normalise(m, i, err);
		if (!c) {
			cJSON_Delete(vars);
			return err ? err->status : BG_ERR_INVALID;
		}
		cJSON_AddItemToArray(msgs, c);
	}
	bool ok = (tools && !cJSON_IsNull(tools) ? cJSON_AddItemToObject(vars, "tools", cJSON_Duplicate(tools, true))
						  : cJSON_AddNullToObject(vars, "tools") != NULL) &&
		  cJSON_AddNullToObject(vars, "documents") &&
		  cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt) &&
		  cJSON_AddStringToObject(vars, "bos_token", cj->bos) &&
		  cJSON_AddStringToObject(vars, "eos_token", cj->eos);
	for (const cJSON *x = extra ? extra->child : NULL; x && ok; x = x->next)
		if (x->string && !cJSON_GetObjectItemCaseSensitive(vars, x->string))
			ok = cJSON_AddItemToObject(vars, x->string, cJSON_Duplicate(x, true));
	if (!ok) {
		cJSON_Delete(vars);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	enum bg_status st = jinja_render(cj->t, vars, &cj->opts, out, out_len, err);
	cJSON_Delete(vars);
	return st;
}
