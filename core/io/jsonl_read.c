#include "io/jsonl_read.h"
#include "io/params.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "sample/regex.h"
#include "strbuf.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== defaults ==== */

void jsonl_defaults_init(struct jsonl_defaults *d)
{
	memset(d, 0, sizeof *d);
	params_defaults(&d->native, false);
	params_defaults(&d->openai, true);
	d->seed_plus_line = true;
}

void jsonl_warn_init(struct jsonl_warn *w, void (*emit)(void *user, const char *message),
		     void *user)
{
	memset(w, 0, sizeof *w);
	w->emit = emit;
	w->user = user;
}

/* ==== the parser ==== */

struct parse {
	struct request *r;
	const struct jsonl_defaults *d;
	struct jsonl_warn *w;
	bool oom;
	bool seed_given;
};

static bool failed(const struct parse *p)
{
	return p->r->error.code[0] != '\0' || p->oom;
}

/* Records the first error only: the first problem found is the one reported. */
static void fail(struct parse *p, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct parse *p, const char *code, const char *fmt, ...)
{
	struct req_error *e = &p->r->error;
	if (e->code[0])
		return;
	snprintf(e->code, sizeof e->code, "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
	p->r->finish = REQ_FINISH_ERROR;
}

static char *dup_str(struct parse *p, const char *s)
{
	char *c = strdup(s ? s : "");
	if (!c)
		p->oom = true;
	return c;
}

/* Hands w's callback one warning, "line N: " and the formatted rest. */
static void warn_emit(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_emit(struct parse *p, const char *fmt, ...)
{
	struct jsonl_warn *w = p->w;
	if (!w->emit)
		return;
	char msg[320];
	int n = snprintf(msg, sizeof msg, "line %" PRId64 ": ", p->r->line);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
	va_end(ap);
	w->emit(w->user, msg);
}

static void warn_unknown(struct parse *p, const char *prefix, const char *name)
{
	struct jsonl_warn *w = p->w;
	if (!w || w->full)
		return;
	char full[48];
	snprintf(full, sizeof full, "%s%s", prefix, name);
	for (int i = 0; i < w->n_names; i++)
		if (strcmp(w->names[i], full) == 0)
			return;
	if (w->n_names == JSONL_WARN_NAMES) {
		w->full = true;
		warn_emit(p, "more than %d distinct unknown fields; no longer reporting them",
			  JSONL_WARN_NAMES);
		return;
	}
	snprintf(w->names[w->n_names++], sizeof w->names[0], "%s", full);
	warn_emit(p, "unknown field \"%s\" ignored (reported once)", full);
}

static bool name_in(const char *name, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(name, *list) == 0)
			return true;
	return false;
}

/* Warns about the fields of obj that are neither in known, nor in silent, nor (table
 * NATIVE or OPENAI) a row of the parameter table for that form. */
enum table_form { TABLE_NONE, TABLE_NATIVE, TABLE_OPENAI };
static void check_unknown(struct parse *p, const cJSON *obj, const char *prefix,
			  const char *const *known, const char *const *silent, enum table_form t)
{
	for (const cJSON *it = obj->child; it; it = it->next) {
		const char *k = it->string ? it->string : "";
		if (name_in(k, known) || (silent && name_in(k, silent)))
			continue;
		if (t != TABLE_NONE && params_find(k, t == TABLE_OPENAI))
			continue;
		warn_unknown(p, prefix, k);
	}
}

/* A field that is absent or null is "omitted". */
static const cJSON *field(const cJSON *obj, const char *name)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
	return it && !cJSON_IsNull(it) ? it : NULL;
}

static bool is_integer(const cJSON *it)
{
	if (!cJSON_IsNumber(it))
		return false;
	double v = it->valuedouble;
	return isfinite(v) && v == floor(v);
}

/* v in the fewest digits that read back as v: what the line most likely said (2.01, not
 * the 2.0099999999999998 that %.17g prints; integers below 1e17 in all their digits).
 * buf: at least 32 bytes. */
static const char *num_text(double v, char *buf, size_t cap)
{
	if (v == floor(v) && fabs(v) < 1e17) { /* integers in full: 100000000000, not 1e+11 */
		snprintf(buf, cap, "%.0f", v);
		return buf;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, cap, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

/* Integer field in [lo, hi]; returns false (and fails) on a wrong type or range. */
static bool get_int(struct parse *p, const cJSON *it, const char *name, int64_t lo, int64_t hi,
		    int64_t *out)
{
	if (!is_integer(it)) {
		fail(p, "invalid_request", "%s must be an integer", name);
		return false;
	}
	double v = it->valuedouble;
	if (v < (double)lo || v > (double)hi) {
		char got[32];
		fail(p, "invalid_request", "%s must be in [%" PRId64 ", %" PRId64 "], got %s",
		     name, lo, hi, num_text(v, got, sizeof got));
		return false;
	}
	*out = (int64_t)v;
	return true;
}

enum range { CLOSED, OPEN_LO };

static bool get_num(struct parse *p, const cJSON *it, const char *name, double lo, double hi,
		    enum range rg, float *out)
{
	if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) {
		fail(p, "invalid_request", "%s must be a number", name);
		return false;
	}
	double v = it->valuedouble;
	bool ok = v <= hi && (rg == OPEN_LO ? v > lo : v >= lo);
	if (!ok) {
		char got[32];
		fail(p, "invalid_request", "%s must be in %c%g, %g], got %s", name,
		     rg == OPEN_LO ? '(' : '[', lo, hi, num_text(v, got, sizeof got));
		return false;
	}
	*out = (float)v;
	return true;
}

static bool get_bool(struct parse *p, const cJSON *it, const char *name, bool *out)
{
	if (!cJSON_IsBool(it)) {
		fail(p, "invalid_request", "%s must be true or false", name);
		return false;
	}
	*out = cJSON_IsTrue(it);
	return true;
}

/* logprobs / prompt_logprobs: an integer in [0, 20], or a boolean (true = 0: the chosen
 * token's log-prob only; false = none). */
static void get_logprobs(struct parse *p, const cJSON *it, const char *name, int32_t *out)
{
	if (cJSON_IsBool(it)) {
		*out = cJSON_IsTrue(it) ? 0 : -1;
		return;
	}
	int64_t v;
	if (!is_integer(it)) {
		fail(p, "invalid_request", "%s must be an integer in [0, %d] or a boolean", name,
		     JSONL_MAX_TOP);
		return;
	}
	if (get_int(p, it, name, 0, JSONL_MAX_TOP, &v))
		*out = (int32_t)v;
}

/* An array of token ids (integers >= 0; the vocabulary range is the engine's check). */
static void get_ids(struct parse *p, const cJSON *it, const char *name, bool nonempty,
		    int32_t **ids, int32_t *n)
{
	if (!cJSON_IsArray(it)) {
		fail(p, "invalid_request", "%s must be an array of integers", name);
		return;
	}
	int cnt = cJSON_GetArraySize(it);
	if (nonempty && cnt == 0) {
		fail(p, "invalid_request", "%s is empty", name);
		return;
	}
	int32_t *a = malloc((size_t)(cnt ? cnt : 1) * sizeof *a);
	if (!a) {
		p->oom = true;
		return;
	}
	int i = 0;
	for (const cJSON *e = it->child; e; e = e->next, i++) {
		if (!is_integer(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX) {
			fail(p, "invalid_request", "%s[%d] must be an integer token id >= 0", name,
			     i);
			free(a);
			return;
		}
		a[i] = (int32_t)e->valuedouble;
	}
	free(*ids);
	*ids = a;
	*n = cnt;
}

static void get_stop(struct parse *p, const cJSON *it, const char *name)
{
	struct request *r = p->r;
	const char *one[1];
	const char **list = one;
	int cnt;
	if (cJSON_IsString(it)) {
		one[0] = it->valuestring;
		cnt = 1;
	} else if (cJSON_IsArray(it)) {
		cnt = cJSON_GetArraySize(it);
		/* never negative; said so for the compiler (gcc 13 reads a negative cnt into
		 * the callocs below and stops the -Werror build) */
		if (cnt < 0 || cnt > JSONL_MAX_STOP) {
			fail(p, "invalid_request", "%s has %d strings; at most %d", name, cnt,
			     JSONL_MAX_STOP);
			return;
		}
		list = calloc((size_t)(cnt ? cnt : 1), sizeof *list);
		if (!list) {
			p->oom = true;
			return;
		}
		int i = 0;
		for (const cJSON *e = it->child; e; e = e->next, i++) {
			if (!cJSON_IsString(e)) {
				fail(p, "invalid_request", "%s[%d] must be a string", name, i);
				free(list);
				return;
			}
			list[i] = e->valuestring;
		}
	} else {
		fail(p, "invalid_request", "%s must be a string or an array of strings", name);
		return;
	}
	for (int i = 0; i < cnt; i++) {
		if (list[i][0] == '\0') {
			fail(p, "invalid_request", "%s strings must not be empty", name);
			if (list != one)
				free(list);
			return;
		}
	}
	char **s = calloc((size_t)(cnt ? cnt : 1), sizeof *s);
	if (!s) {
		p->oom = true;
	} else {
		for (int i = 0; i < cnt; i++) {
			s[i] = dup_str(p, list[i]);
		}
		for (int32_t i = 0; i < r->n_stop; i++)
			free(r->stop[i]);
		free(r->stop);
		r->stop = s;
		r->n_stop = cnt;
	}
	if (list != one)
		free(list);
}

/* Reads one parameter (a row of params_table) from it into the request. */
static void read_param(struct parse *p, const struct param_def *d, const cJSON *it,
		       const char *name)
{
	struct request *r = p->r;
	char *f = (char *)r + d->off;
	int64_t v;
	bool b;
	switch (d->type) {
	case PARAM_INT:
		if (get_int(p, it, name, (int64_t)d->lo, (int64_t)d->hi, &v))
			*(int32_t *)f = (d->flags & PARAM_NEG_OFF) && v < 0 ? 0 : (int32_t)v;
		break;
	case PARAM_NUM:
		get_num(p, it, name, d->lo, d->hi, d->lo_open ? OPEN_LO : CLOSED, (float *)f);
		break;
	case PARAM_BOOL: get_bool(p, it, name, (bool *)f); break;
	case PARAM_TRIBOOL:
		if (get_bool(p, it, name, &b))
			*(int *)f = b;
		break;
	case PARAM_LOGPROBS: get_logprobs(p, it, name, (int32_t *)f); break;
	case PARAM_SEED:
		/* any integer in [-2^63, 2^64); a negative one is taken modulo 2^64. Doubles
		 * hold integers exactly up to 2^53, which is what JSON parsers promise anyway
		 * (18446744073709551615 reads as 2^64, out of range). */
		if (!is_integer(it)) {
			fail(p, "invalid_request", "%s must be an integer", name);
		} else if (it->valuedouble < -9223372036854775808.0 ||
			   it->valuedouble >= 18446744073709551616.0) {
			char got[32];
			fail(p, "invalid_request", "%s must be an integer in [-2^63, 2^64), got %s",
			     name, num_text(it->valuedouble, got, sizeof got));
		} else {
			double v = it->valuedouble;
			*(uint64_t *)f = v >= 9223372036854775808.0 ? (uint64_t)v
								    : (uint64_t)(int64_t)v;
			p->seed_given = true;
		}
		break;
	case PARAM_STOP: get_stop(p, it, name); break;
	case PARAM_IDS:
		get_ids(p, it, name, false, (int32_t **)f, (int32_t *)((char *)r + d->off_n));
		break;
	}
}

/* The parameters of the table present in o, in the table's order (native field names, or
 * an OpenAI body's, whose errors name them "body.NAME"). */
static void parse_params(struct parse *p, const cJSON *o, bool openai)
{
	for (size_t i = 0; i < params_count; i++) {
		const struct param_def *d = &params_table[i];
		const char *name = openai ? d->openai : d->name;
		const cJSON *it;
		if (!name || !(it = field(o, name)))
			continue;
		char shown[64];
		snprintf(shown, sizeof shown, "%s%s", openai ? "body." : "", name);
		read_param(p, d, it, shown);
	}
}

/* ---- constraints (issue 15): grammar, json_schema, regex, choice, response_format,
 * logit_bias, bad_words, min_tokens; engine/constrain.h applies them ---- */

/* Compiles GBNF text into r->grammar; the error names the field and the position. */
static void set_grammar(struct parse *p, const char *gbnf, const char *name)
{
	struct bg_err err = {0};
	if (grammar_parse(gbnf, strlen(gbnf), NULL, &p->r->grammar, &err) != BG_OK)
		fail(p, "invalid_request", "%s: %s", name,
		     strncmp(err.msg, "grammar: ", 9) == 0 ? err.msg + 9 : err.msg);
}

/* A compiler's message under the field's name, its own prefix ("regex: ", "json_schema ")
 * dropped so that the name is not said twice: "regex: at offset 4: ...",
 * "json_schema at '/a': ...", "body.response_format.json_schema.schema at '/': ...". */
static void fail_compile(struct parse *p, const char *name, const char *msg)
{
	if (strncmp(msg, "regex: ", 7) == 0)
		fail(p, "invalid_request", "%s: %s", name, msg + 7);
	else if (strncmp(msg, "json_schema at ", 15) == 0)
		fail(p, "invalid_request", "%s %s", name, msg + 12);
	else
		fail(p, "invalid_request", "%s: %s", name, msg);
}

static void set_schema(struct parse *p, const cJSON *schema, const char *name)
{
	char *gbnf = NULL;
	struct bg_err err = {0};
	if (json_schema_to_gbnf(schema, &gbnf, &err) != BG_OK)
		fail_compile(p, name, err.msg);
	else
		set_grammar(p, gbnf, name);
	free(gbnf);
}

/* The one structured-output constraint of a line (several are an error). pre: "" or
 * "body." for messages. */
static void parse_constraints(struct parse *p, const cJSON *o, const char *pre, bool openai)
{
	struct request *r = p->r;
	const cJSON *g = field(o, "grammar"), *js = field(o, "json_schema"), *rx = field(o, "regex"),
		    *ch = field(o, "choice"), *rf = openai ? field(o, "response_format") : NULL;
	const cJSON *rf_type = cJSON_IsObject(rf) ? field(rf, "type") : NULL;
	if (rf && (!cJSON_IsString(rf_type) || strcmp(rf_type->valuestring, "text") == 0))
		rf = NULL; /* "text" (or junk, refused below) asks for nothing */
	if (openai && field(o, "response_format") && !cJSON_IsString(rf_type))
		fail(p, "invalid_request", "%sresponse_format.type must be a string", pre);
	int n = (g != NULL) + (js != NULL) + (rx != NULL) + (ch != NULL) + (rf != NULL);
	char name[64];
	if (n > 1) {
		fail(p, "invalid_request",
		     "give at most one of %sgrammar, json_schema, regex, choice and "
		     "response_format", pre);
	} else if (g) {
		snprintf(name, sizeof name, "%sgrammar", pre);
		if (!cJSON_IsString(g))
			fail(p, "invalid_request", "%s must be a string (GBNF)", name);
		else
			set_grammar(p, g->valuestring, name);
	} else if (js) {
		snprintf(name, sizeof name, "%sjson_schema", pre);
		set_schema(p, js, name);
	} else if (rx) {
		snprintf(name, sizeof name, "%sregex", pre);
		char *gbnf = NULL;
		struct bg_err err = {0};
		if (!cJSON_IsString(rx))
			fail(p, "invalid_request", "%s must be a string", name);
		else if (regex_to_gbnf(rx->valuestring, &gbnf, &err) != BG_OK)
			fail_compile(p, name, err.msg);
		else
			set_grammar(p, gbnf, name);
		free(gbnf);
	} else if (ch) {
		snprintf(name, sizeof name, "%schoice", pre);
		int cnt = cJSON_IsArray(ch) ? cJSON_GetArraySize(ch) : 0;
		const char **list = calloc((size_t)(cnt ? cnt : 1), sizeof *list);
		int k = 0;
		for (const cJSON *e = cnt ? ch->child : NULL; e && list; e = e->next)
			if (cJSON_IsString(e))
				list[k++] = e->valuestring;
		char *gbnf = NULL;
		struct bg_err err = {0};
		if (!list)
			p->oom = true;
		else if (cnt == 0 || k != cnt)
			fail(p, "invalid_request", "%s must be a non-empty array of strings", name);
		else if (choice_to_gbnf(list, (size_t)k, &gbnf, &err) != BG_OK)
			fail(p, "invalid_request", "%s: %s", name, err.msg);
		else
			set_grammar(p, gbnf, name);
		free(gbnf);
		free(list);
	} else if (rf) {
		const char *t = rf_type->valuestring;
		char *gbnf = NULL;
		struct bg_err err = {0};
		if (strcmp(t, "json_object") == 0) {
			if (json_schema_object_gbnf(&gbnf, &err) != BG_OK)
				fail(p, "internal", "%s", err.msg);
			else
				set_grammar(p, gbnf, "body.response_format");
		} else if (strcmp(t, "json_schema") == 0) {
			const cJSON *w = field(rf, "json_schema");
			const cJSON *sc = cJSON_IsObject(w) ? field(w, "schema") : NULL;
			if (!sc)
				fail(p, "invalid_request",
				     "body.response_format.json_schema.schema is missing");
			else
				set_schema(p, sc, "body.response_format.json_schema.schema");
		} else {
			fail(p, "unsupported", "body.response_format.type \"%s\" is not supported", t);
		}
		free(gbnf);
	}
	const cJSON *it;
	if ((it = field(o, "logit_bias"))) {
		int cnt = cJSON_IsObject(it) ? cJSON_GetArraySize(it) : -1;
		if (cnt < 0) {
			fail(p, "invalid_request", "%slogit_bias must be an object", pre);
		} else if (cnt > 0) {
			r->bias_ids = calloc((size_t)cnt, sizeof *r->bias_ids);
			r->bias_vals = calloc((size_t)cnt, sizeof *r->bias_vals);
			if (!r->bias_ids || !r->bias_vals)
				p->oom = true;
			for (const cJSON *e = it->child; e && !failed(p); e = e->next) {
				char *end = NULL;
				long id = strtol(e->string, &end, 10);
				if (!e->string[0] || *end || id < 0 || id > INT32_MAX)
					fail(p, "invalid_request",
					     "%slogit_bias keys must be token ids, got \"%s\"", pre,
					     e->string);
				else if (!cJSON_IsNumber(e))
					fail(p, "invalid_request",
					     "%slogit_bias[\"%s\"] must be a number in [-100, 100]", pre,
					     e->string);
				else if (e->valuedouble < -100 || e->valuedouble > 100) {
					char got[32];
					fail(p, "invalid_request",
					     "%slogit_bias[\"%s\"] must be a number in [-100, 100], got %s",
					     pre, e->string, num_text(e->valuedouble, got, sizeof got));
				}
				else {
					r->bias_ids[r->n_bias] = (int32_t)id;
					r->bias_vals[r->n_bias++] = (float)e->valuedouble;
				}
			}
		}
	}
	if ((it = field(o, "bad_words"))) {
		int cnt = cJSON_IsArray(it) ? cJSON_GetArraySize(it) : -1;
		if (cnt < 0) {
			fail(p, "invalid_request", "%sbad_words must be an array of strings", pre);
		} else if (cnt > 0) {
			r->bad_words = calloc((size_t)cnt, sizeof *r->bad_words);
			if (!r->bad_words)
				p->oom = true;
			for (const cJSON *e = it->child; e && !failed(p); e = e->next) {
				if (!cJSON_IsString(e) || !e->valuestring[0])
					fail(p, "invalid_request",
					     "%sbad_words must be non-empty strings", pre);
				else
					r->bad_words[r->n_bad_words++] = dup_str(p, e->valuestring);
			}
		}
	}
}

/* ---- chat messages ---- */

/* Takes the rendered chat prompt text (malloc'd) into r->prompt, or tokenizes it into
 * r->input_ids (special tokens parsed) when the defaults carry a tokenizer. BOS: the
 * request's add_bos; when it has none, the vocabulary's default for built-in templates and
 * none for Jinja templates (they write bos_token themselves). */
static void set_chat_prompt(struct parse *p, char *text, size_t text_len, const char *name, bool jinja)
{
	struct request *r = p->r;
	if (p->d->tok && p->d->max_seq_len > 0) {
		size_t mtb = tok_max_token_bytes(p->d->tok);
		uint64_t least = ((uint64_t)text_len + mtb - 1) / mtb;
		uint64_t room = (uint64_t)p->d->max_seq_len;
		if (least >= room || least + (uint64_t)(r->max_tokens > 0 ? r->max_tokens : 0) > room) {
			free(text);
			fail(p, "too_long",
			     "%s: the chat prompt is %zu bytes, at least %llu tokens (no token is "
			     "longer than %zu bytes); with max_tokens (%d) that is beyond the max "
			     "sequence length of %d",
			     name, text_len, (unsigned long long)least, mtb, r->max_tokens,
			     p->d->max_seq_len);
			return;
		}
	}
	if (p->d->tok) {
		bool bos = r->add_bos >= 0 ? r->add_bos != 0 : !jinja && tok_add_bos(p->d->tok);
		int32_t *ids = NULL;
		size_t nids = 0;
		struct bg_err err = {0};
		enum bg_status st =
		    tok_encode(p->d->tok, text, text_len, bos, true, (int32_t **)&ids, &nids, &err);
		free(text);
		if (st == BG_ERR_NOMEM) {
			p->oom = true;
		} else if (st != BG_OK) {
			fail(p, "invalid_request", "%s: tokenizing the chat prompt: %s", name,
			     err.msg);
		} else if (nids > INT32_MAX) {
			free(ids);
			fail(p, "invalid_request", "%s: the chat prompt is too long", name);
		} else {
			r->input_ids = ids;
			r->n_input_ids = (int32_t)nids;
			/* BOS is now part of input_ids: the engine must not add another one */
			r->add_bos = 0;
		}
		return;
	}
	r->prompt = text;
	r->prompt_len = text_len;
}

/* "messages" rendered by the Jinja template (chat_jinja.h). BOS is added only when the
 * request asks for it ("add_bos": true): the template writes bos_token itself. */
static void parse_messages_jinja(struct parse *p, const cJSON *msgs, const cJSON *tools,
				 const cJSON *kwargs, const char *name)
{
	if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
		fail(p, "invalid_request", "%s must be a non-empty array of {role, content} objects", name);
		return;
	}
	char *text = NULL;
	size_t text_len = 0;
	struct bg_err err = {0};
	enum bg_status st = chat_jinja_render(p->d->jinja, msgs, tools, kwargs, true, &text, &text_len, &err);
	if (st == BG_ERR_NOMEM)
		p->oom = true;
	else if (st != BG_OK)
		fail(p, "invalid_request", "%s: %s", name, err.msg);
	if (text)
		set_chat_prompt(p, text, text_len, name, true);
}

/* Renders "messages" with the chat template into r->prompt (or r->input_ids when the
 * defaults carry a tokenizer). */
static void parse_messages(struct parse *p, const cJSON *msgs, const cJSON *tools,
			   const cJSON *kwargs, const char *name)
{
	if (p->d->jinja) {
		parse_messages_jinja(p, msgs, tools, kwargs, name);
		return;
	}
	if ((tools && !cJSON_IsNull(tools)) || kwargs) {
		fail(p, "unsupported", "tools and chat_template_kwargs need a Jinja chat template "
				       "(the model's own or --chat-template-file)");
		return;
	}
	if (!cJSON_IsArray(msgs)) {
		fail(p, "invalid_request", "%s must be an array of {role, content} objects", name);
		return;
	}
	int n = cJSON_GetArraySize(msgs);
	if (n == 0) {
		fail(p, "invalid_request", "%s is empty", name);
		return;
	}
	struct chat_message *m = calloc((size_t)n, sizeof *m);
	char **owned = calloc((size_t)n, sizeof *owned); /* concatenated content parts */
	if (!m || !owned) {
		p->oom = true;
		free(m);
		free(owned);
		return;
	}
	int i = 0;
	for (const cJSON *e = msgs->child; e && !failed(p); e = e->next, i++) {
		if (!cJSON_IsObject(e)) {
			fail(p, "invalid_request", "%s[%d] must be an object", name, i);
			break;
		}
		const cJSON *role = field(e, "role");
		if (!cJSON_IsString(role)) {
			fail(p, "invalid_request", "%s[%d].role must be a string", name, i);
			break;
		}
		m[i].role = role->valuestring;
		const cJSON *c = field(e, "content");
		if (!c && !chat_role_may_omit_content(role->valuestring)) {
			fail(p, "invalid_request", "%s[%d] (role \"%s\") has no content", name, i,
			     role->valuestring);
		} else if (!c) {
			m[i].content = ""; /* an assistant turn with tool calls only, say */
		} else if (cJSON_IsString(c)) {
			m[i].content = c->valuestring;
		} else if (cJSON_IsArray(c)) {
			/* content parts: the text parts joined with "\n", as the Jinja path and
			 * vLLM join them (chat_jinja.h) */
			struct bg_err perr = {0};
			enum bg_status st = chat_content_text(c, &owned[i], &perr);
			if (st == BG_ERR_NOMEM)
				p->oom = true;
			else if (st != BG_OK)
				fail(p, "unsupported", "%s[%d].%s", name, i, perr.msg);
			m[i].content = owned[i] ? owned[i] : "";
		} else {
			fail(p, "invalid_request",
			     "%s[%d].content must be a string or an array of text parts", name, i);
		}
	}
	if (!failed(p) && !p->d->chat)
		fail(p, "unsupported", "model has no chat template; pass --chat-template NAME");
	char *text = NULL;
	size_t text_len = 0;
	if (!failed(p)) {
		struct bg_err err = {0};
		enum bg_status st =
		    chat_render(p->d->chat, m, (size_t)n, true, &text, &text_len, &err);
		if (st == BG_ERR_NOMEM)
			p->oom = true;
		else if (st != BG_OK)
			fail(p, "invalid_request", "%s: %s", name, err.msg);
	}
	for (int k = 0; k < n; k++)
		free(owned[k]);
	free(owned);
	free(m);
	if (text)
		set_chat_prompt(p, text, text_len, name, false);
}

/* ---- native form ---- */

/* Native fields besides the parameter table's. */
/* Native fields besides the parameter table's (the constraints, issue 15, are read by
 * parse_constraints). */
static const char *const native_fields[] = {
    "id",	   "prompt",	   "input_ids", "messages", "tools",	 "chat_template_kwargs",
    "grammar",	   "json_schema", "regex",     "choice",   "logit_bias", "bad_words",
    NULL};

static void parse_input(struct parse *p, const cJSON *o, const char *prompt_name)
{
	struct request *r = p->r;
	const cJSON *prompt = field(o, prompt_name);
	const cJSON *ids = field(o, "input_ids");
	const cJSON *msgs = field(o, "messages");
	int given = (prompt != NULL) + (ids != NULL) + (msgs != NULL);
	if (given == 0) {
		fail(p, "invalid_request", "missing %s (or input_ids, or messages)", prompt_name);
		return;
	}
	if (given > 1) {
		fail(p, "invalid_request", "give exactly one of %s, input_ids and messages",
		     prompt_name);
		return;
	}
	if (prompt) {
		if (!cJSON_IsString(prompt)) {
			fail(p, "invalid_request", "%s must be a string", prompt_name);
			return;
		}
		if (prompt->valuestring[0] == '\0') {
			fail(p, "invalid_request", "%s is empty", prompt_name);
			return;
		}
		r->prompt = dup_str(p, prompt->valuestring);
		r->prompt_len = r->prompt ? strlen(r->prompt) : 0;
	} else if (ids) {
		get_ids(p, ids, "input_ids", true, &r->input_ids, &r->n_input_ids);
	}
	/* messages are rendered last: add_bos must be known first */
}

static void parse_native(struct parse *p, const cJSON *o)
{
	struct request *r = p->r;
	check_unknown(p, o, "", native_fields, NULL, TABLE_NATIVE);
	const cJSON *id = field(o, "id");
	if (id) {
		if (!cJSON_IsString(id) || id->valuestring[0] == '\0') {
			fail(p, "invalid_request", "id must be a non-empty string");
		} else if (!strbuf_utf8_valid(id->valuestring, strlen(id->valuestring))) {
			/* the writer could not write it back unchanged: the line number stays */
			fail(p, "invalid_request", "id is not valid UTF-8");
		} else {
			free(r->id);
			r->id = dup_str(p, id->valuestring);
		}
	}
	parse_input(p, o, "prompt");
	parse_params(p, o, false);
	parse_constraints(p, o, "", false);
	const cJSON *it;
	if (!failed(p) && (it = field(o, "messages")))
		parse_messages(p, it, field(o, "tools"), field(o, "chat_template_kwargs"), "messages");
}

/* ---- OpenAI batch form ---- */

static const char *const openai_top_fields[] = {"custom_id", "method", "url", "body", NULL};
/* Body fields besides the parameter table's OpenAI names: read by the endpoint's own code
 * or refused there. */
static const char *const openai_body_fields[] = {
    "model", "prompt", "messages", "logprobs", "top_logprobs", "echo", "best_of", "suffix",
    "logit_bias", "tools", "tool_choice", "functions", "function_call", "response_format",
    /* extensions, as in vLLM */
    "input_ids", "chat_template_kwargs", "grammar", "json_schema", "regex", "choice", "bad_words",
    NULL};
/* Fields that change nothing in a batch result: accepted without a warning. */
static const char *const openai_body_silent[] = {"stream",
						 "stream_options",
						 "user",
						 "metadata",
						 "store",
						 "service_tier",
						 "parallel_tool_calls",
						 "reasoning_effort",
						 NULL};

static bool nonempty_value(const cJSON *it)
{
	if (!it)
		return false;
	if (cJSON_IsArray(it) || cJSON_IsObject(it))
		return it->child != NULL;
	if (cJSON_IsBool(it))
		return cJSON_IsTrue(it);
	return true;
}

static struct jsonl_info *make_info(struct parse *p, enum jsonl_form form)
{
	struct jsonl_info *info = jsonl_info_attach(p->r, form);
	if (!info) {
		p->oom = true;
		return NULL;
	}
	info->created = p->d->created;
	info->model = dup_str(p, p->d->model_name ? p->d->model_name : "batchgen");
	return info;
}

/* Step 1: custom_id, method, url (which sets the form) and body. NULL when there is no
 * body object (the line has failed). */
static const cJSON *openai_envelope(struct parse *p, const cJSON *o, struct jsonl_info *info)
{
	struct request *r = p->r;
	const cJSON *cid = field(o, "custom_id");
	if (!cJSON_IsString(cid) || cid->valuestring[0] == '\0') {
		fail(p, "invalid_request", "custom_id must be a non-empty string");
	} else if (!strbuf_utf8_valid(cid->valuestring, strlen(cid->valuestring))) {
		fail(p, "invalid_request", "custom_id is not valid UTF-8");
	} else {
		info->custom_id = dup_str(p, cid->valuestring);
		free(r->id);
		r->id = dup_str(p, cid->valuestring);
	}
	const cJSON *method = field(o, "method");
	if (method && (!cJSON_IsString(method) || strcmp(method->valuestring, "POST") != 0))
		fail(p, "invalid_request", "method must be \"POST\"");
	const cJSON *url = field(o, "url");
	if (!cJSON_IsString(url)) {
		fail(p, "invalid_request",
		     "url must be \"/v1/completions\" or "
		     "\"/v1/chat/completions\"");
	} else {
		info->url = dup_str(p, url->valuestring);
		if (strcmp(url->valuestring, "/v1/chat/completions") == 0)
			info->form = JSONL_FORM_OPENAI_CHAT;
		else if (strcmp(url->valuestring, "/v1/completions") != 0)
			fail(p, "unsupported",
			     "url \"%.64s\" is not supported (/v1/completions or "
			     "/v1/chat/completions)",
			     url->valuestring);
	}
	const cJSON *body = field(o, "body");
	if (!cJSON_IsObject(body)) {
		fail(p, "invalid_request", "body must be an object");
		return NULL;
	}
	return body;
}

/* A body.model that is not the loaded model: one warning per input stream (the request
 * runs on the loaded model and echoes the name it gave). */
static void warn_model(struct parse *p, const char *model)
{
	struct jsonl_warn *w = p->w;
	const char *loaded = p->d->model_name;
	if (!w || w->model_warned || !loaded || strcmp(model, loaded) == 0)
		return;
	w->model_warned = true;
	warn_emit(p,
		  "body.model \"%.100s\" is not the loaded model \"%.100s\"; requests run on "
		  "the loaded model (reported once)",
		  model, loaded);
}

/* Step 2: body.model, and what batchgen cannot do, refused rather than silently
 * ignored. */
static void openai_model_and_refusals(struct parse *p, const cJSON *body, struct jsonl_info *info)
{
	const cJSON *it;
	if ((it = field(body, "model"))) {
		if (!cJSON_IsString(it)) {
			fail(p, "invalid_request", "body.model must be a string");
		} else {
			free(info->model);
			info->model = dup_str(p, it->valuestring);
			warn_model(p, it->valuestring);
		}
	}
	if ((it = field(body, "stream"))) {
		if (!cJSON_IsBool(it))
			fail(p, "invalid_request", "body.stream must be true or false");
		else if (cJSON_IsTrue(it))
			fail(p, "unsupported",
			     "body.stream = true: a batch answers with whole responses; remove "
			     "stream or set it to false");
	}
	if ((it = field(body, "best_of"))) {
		/* n (parse_common) samples are returned; choosing the best of more is not done */
		int64_t n, want = 1;
		const cJSON *nn = field(body, "n");
		if (nn && is_integer(nn))
			want = (int64_t)nn->valuedouble;
		if (get_int(p, it, "body.best_of", 1, INT32_MAX, &n) && n != want)
			fail(p, "unsupported", "body.best_of other than n is not supported");
	}
	if (nonempty_value(field(body, "echo")))
		fail(p, "unsupported", "body.echo is not supported");
	if ((it = field(body, "suffix")) && !(cJSON_IsString(it) && it->valuestring[0] == '\0'))
		fail(p, "unsupported", "body.suffix is not supported");
	if ((nonempty_value(field(body, "tools")) && !field(body, "messages")) ||
	    nonempty_value(field(body, "functions")))
		fail(p, "unsupported", "functions (and tools without messages) are not supported");
	parse_constraints(p, body, "body.", true);
}

/* Step 3: a completion's prompt: a string, [string], token ids or [[token ids]] (one
 * prompt per line); a chat request must have messages (rendered last). */
static void openai_prompt(struct parse *p, const cJSON *body, bool chat)
{
	struct request *r = p->r;
	const cJSON *it;
	if (chat) {
		if (field(body, "prompt") || field(body, "input_ids"))
			fail(p, "invalid_request",
			     "/v1/chat/completions takes body.messages, not a prompt");
		else if (!field(body, "messages"))
			fail(p, "invalid_request", "missing body.messages");
		return;
	}
	if (field(body, "messages")) {
		fail(p, "invalid_request", "/v1/completions takes body.prompt, not messages");
		return;
	}
	if (!(it = field(body, "prompt")) || !cJSON_IsArray(it)) {
		parse_input(p, body, "prompt");
		return;
	}
	int cnt = cJSON_GetArraySize(it);
	const cJSON *first = it->child;
	if (cnt == 0) {
		fail(p, "invalid_request", "body.prompt is empty");
	} else if (cJSON_IsNumber(first)) {
		get_ids(p, it, "body.prompt", true, &r->input_ids, &r->n_input_ids);
	} else if (cnt != 1) {
		fail(p, "unsupported", "body.prompt has %d prompts; one per line is supported",
		     cnt);
	} else if (cJSON_IsString(first)) {
		if (first->valuestring[0] == '\0')
			fail(p, "invalid_request", "body.prompt is empty");
		r->prompt = dup_str(p, first->valuestring);
		r->prompt_len = r->prompt ? strlen(r->prompt) : 0;
	} else if (cJSON_IsArray(first)) {
		get_ids(p, first, "body.prompt[0]", true, &r->input_ids, &r->n_input_ids);
	} else {
		fail(p, "invalid_request", "body.prompt must be a string or an array of token ids");
	}
}

/* Step 4: the endpoint's own logprobs: chat takes a boolean and top_logprobs, completions
 * an integer. */
static void openai_logprobs(struct parse *p, const cJSON *body, struct jsonl_info *info)
{
	struct request *r = p->r;
	const cJSON *it;
	int64_t v;
	if (info->form != JSONL_FORM_OPENAI_CHAT) {
		if ((it = field(body, "logprobs"))) {
			if (cJSON_IsBool(it))
				fail(p, "invalid_request",
				     "body.logprobs must be an integer for /v1/completions");
			else if (get_int(p, it, "body.logprobs", 0, JSONL_MAX_TOP, &v))
				r->logprobs = (int32_t)v;
		}
		return;
	}
	bool lp = false;
	if ((it = field(body, "logprobs")))
		get_bool(p, it, "body.logprobs", &lp);
	info->chat_logprobs = lp;
	int32_t top = 0;
	if ((it = field(body, "top_logprobs"))) {
		if (get_int(p, it, "body.top_logprobs", 0, JSONL_MAX_TOP, &v))
			top = (int32_t)v;
		if (!lp && !failed(p))
			fail(p, "invalid_request",
			     "body.top_logprobs requires body.logprobs = true");
	}
	r->logprobs = lp ? top : -1;
}

static void parse_openai(struct parse *p, const cJSON *o)
{
	check_unknown(p, o, "", openai_top_fields, NULL, TABLE_NONE);
	struct jsonl_info *info = make_info(p, JSONL_FORM_OPENAI_COMPLETION);
	if (!info)
		return;
	const cJSON *body = openai_envelope(p, o, info);
	if (!body)
		return;
	check_unknown(p, body, "body.", openai_body_fields, openai_body_silent, TABLE_OPENAI);
	if (failed(p))
		return;
	openai_model_and_refusals(p, body, info);
	if (failed(p))
		return;
	bool chat = info->form == JSONL_FORM_OPENAI_CHAT;
	openai_prompt(p, body, chat);
	if (failed(p))
		return;
	parse_params(p, body, true);
	openai_logprobs(p, body, info);
	if (chat && !failed(p))
		parse_messages(p, field(body, "messages"), field(body, "tools"),
			       field(body, "chat_template_kwargs"), "body.messages");
}

/* ---- NUL characters ---- */

/* Counts the \u0000 escapes inside the strings of the JSON text s[0, n) (an escaped
 * backslash before "u0000" makes it text, not a NUL); with rewrite, turns each into
 * \u0001 (the same length and structure), else leaves s as it is. */
static size_t nul_escapes(char *s, size_t n, bool rewrite)
{
	size_t count = 0;
	bool in_str = false;
	for (size_t i = 0; i < n; i++) {
		if (!in_str) {
			in_str = s[i] == '"';
		} else if (s[i] == '"') {
			in_str = false;
		} else if (s[i] == '\\') {
			if (n - i > 5 && memcmp(s + i + 1, "u0000", 5) == 0) {
				count++;
				if (rewrite)
					s[i + 5] = '1';
			}
			i++; /* the escaped character */
		}
	}
	return count;
}

/* Walks a (parsed from the line) and b (from its copy with NULs made U+0001) side by side; a string
 * or key that holds a NUL is shorter in a. Writes the path of the first one into path
 * ("body.messages[1].content") and returns true. */
static bool nul_path(const cJSON *a, const cJSON *b, char *path, size_t cap)
{
	if (cJSON_IsString(a) && cJSON_IsString(b))
		return strlen(a->valuestring) != strlen(b->valuestring);
	if (!(cJSON_IsArray(a) || cJSON_IsObject(a)) || a->type != b->type)
		return false;
	size_t base = strlen(path);
	int i = 0;
	for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next, i++) {
		if (cJSON_IsObject(a))
			snprintf(path + base, cap - base, "%s%s", base ? "." : "",
				 y->string ? y->string : "");
		else
			snprintf(path + base, cap - base, "[%d]", i);
		bool key = x->string && y->string && strlen(x->string) != strlen(y->string);
		if (key || nul_path(x, y, path, cap))
			return true;
		path[base] = 0;
	}
	return false;
}

/* For a line with a \u0000 escape: the path of the first string holding a NUL into
 * path (or "a string" when it cannot be told), and whether the id field holds one. */
static void find_nul(struct parse *p, const char *line, size_t len, const cJSON *root,
		     const char *id_name, char *path, size_t cap, bool *id_nul)
{
	snprintf(path, cap, "a string");
	char *copy = malloc(len + 1);
	if (!copy) {
		p->oom = true;
		return;
	}
	memcpy(copy, line, len);
	copy[len] = 0;
	nul_escapes(copy, len, true);
	cJSON *other = cJSON_ParseWithLength(copy, len);
	free(copy);
	if (!other)
		return;
	char at[128] = "";
	if (nul_path(root, other, at, sizeof at))
		snprintf(path, cap, "%s", at);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, id_name);
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(other, id_name);
	*id_nul = cJSON_IsString(a) && cJSON_IsString(b) &&
		  strlen(a->valuestring) != strlen(b->valuestring);
	cJSON_Delete(other);
}

/* ---- entry point ---- */

/* Whether a line that is not a JSON object mentions the OpenAI form's fields. */
static bool mentions_openai(const char *line, size_t len)
{
	return memmem(line, len, "\"custom_id\"", 11) || memmem(line, len, "\"body\"", 6);
}

static bool is_openai_object(const cJSON *root)
{
	return cJSON_GetObjectItemCaseSensitive(root, "custom_id") ||
	       cJSON_GetObjectItemCaseSensitive(root, "body");
}

enum jsonl_form jsonl_sniff_form(const char *line, size_t len)
{
	cJSON *root = cJSON_ParseWithLength(line, len);
	bool openai = cJSON_IsObject(root) ? is_openai_object(root) : mentions_openai(line, len);
	cJSON_Delete(root);
	return openai ? JSONL_FORM_OPENAI_COMPLETION : JSONL_FORM_NATIVE;
}

/* The parameter values of template t (jsonl_defaults), every scalar row of the table. */
static void apply_defaults(struct request *r, const struct request *t)
{
	for (size_t i = 0; i < params_count; i++)
		params_copy(r, t, &params_table[i]);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first (in sort order) member name that object o holds twice, or NULL; o's names
 * sorted, so a line of many keys stays O(k log k). */
static const char *twice_key(struct parse *p, const cJSON *o)
{
	size_t k = 0;
	for (const cJSON *c = o->child; c; c = c->next)
		k++;
	if (k < 2)
		return NULL;
	const char **names = malloc(k * sizeof *names);
	if (!names) {
		p->oom = true;
		return NULL;
	}
	size_t i = 0;
	for (const cJSON *c = o->child; c; c = c->next)
		names[i++] = c->string ? c->string : "";
	qsort(names, k, sizeof *names, cmp_name);
	const char *dup = NULL;
	for (i = 1; i < k && !dup; i++)
		if (strcmp(names[i - 1], names[i]) == 0)
			dup = names[i];
	free(names);
	return dup;
}

/* A JSON object: its form's defaults and parser; a NUL anywhere refuses the line first
 * (the parsers then still read the id, unless the id itself holds the NUL). */
static void parse_object(struct parse *p, const char *line, size_t len, const cJSON *root)
{
	bool openai = is_openai_object(root);
	char nul_at[160] = "";
	bool id_nul = false;
	if (nul_escapes((char *)line, len, false) > 0) { /* not written: rewrite false */
		find_nul(p, line, len, root, openai ? "custom_id" : "id", nul_at, sizeof nul_at,
			 &id_nul);
		fail(p, "invalid_request",
		     "%s contains a NUL character (\\u0000); the line is refused rather than "
		     "cut at it",
		     nul_at);
	}
	/* a member twice: cJSON reads the first, Python's json and jq the last; neither is
	 * what the writer surely meant, so the line is refused (the line and an OpenAI body;
	 * nested objects such as logit_bias are the fields' own business) */
	const cJSON *body = openai ? cJSON_GetObjectItemCaseSensitive(root, "body") : NULL;
	const char *twice = twice_key(p, root), *pre = "";
	if (!twice && cJSON_IsObject(body)) {
		twice = twice_key(p, body);
		pre = "body.";
	}
	if (twice)
		fail(p, "invalid_request",
		     "%s%s is given twice; the line is refused (JSON parsers differ on which "
		     "one counts)",
		     pre, twice);
	if (openai) {
		apply_defaults(p->r, &p->d->openai);
		parse_openai(p, root);
	} else {
		parse_native(p, root);
	}
	if (id_nul && !openai) {
		char num[32];
		snprintf(num, sizeof num, "%" PRId64, p->r->line);
		free(p->r->id);
		p->r->id = dup_str(p, num);
	} else if (id_nul && jsonl_request_info(p->r)) {
		struct jsonl_info *info = p->r->user;
		free(info->custom_id);
		info->custom_id = NULL;
	}
}

enum bg_status jsonl_parse_request(const char *line, size_t len, int64_t line_no,
				   const struct jsonl_defaults *d, struct jsonl_warn *w,
				   struct request **out)
{
	*out = NULL;
	struct jsonl_defaults dflt;
	if (!d) {
		jsonl_defaults_init(&dflt);
		d = &dflt;
	}
	struct request *r = req_new();
	if (!r)
		return BG_ERR_NOMEM;
	r->line = line_no;
	apply_defaults(r, &d->native);
	char num[32];
	snprintf(num, sizeof num, "%" PRId64, line_no);
	r->id = strdup(num);
	if (!r->id) {
		req_free(r);
		return BG_ERR_NOMEM;
	}

	struct parse p = {.r = r, .d = d, .w = w};
	bool openai_file = d->file_form != JSONL_FORM_NATIVE;
	if (!line || jsonl_blank(line, len)) {
		if (openai_file)
			make_info(&p, JSONL_FORM_OPENAI_COMPLETION);
		fail(&p, "empty_line", "the line is empty");
	} else {
		const char *end = NULL;
		cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
		/* A raw NUL byte is no JSON (RFC 8259: control characters only escaped), yet
		 * cJSON takes it, as whitespace or into a string that C then ends there:
		 * refused, never cut at (the \u0000 escape is refused by parse_object). */
		const char *nul = memchr(line, 0, len);
		/* A broken line of an OpenAI batch file gets an OpenAI-shaped result: the
		 * file's form, or a guess from the raw text. */
		if ((!root || !cJSON_IsObject(root) || nul) &&
		    (openai_file || mentions_openai(line, len)))
			make_info(&p, JSONL_FORM_OPENAI_COMPLETION);
		if (nul) {
			fail(&p, "invalid_json",
			     "a NUL byte at byte %zu of the line (JSON text holds none raw); the "
			     "line is refused rather than cut at it",
			     (size_t)(nul - line) + 1);
		} else if (!root) {
			/* cJSON leaves end at the byte where it stopped */
			if (end && end >= line && end <= line + len)
				fail(&p, "invalid_json", "the line is not valid JSON at byte %zu",
				     (size_t)(end - line) + 1);
			else
				fail(&p, "invalid_json", "the line is not valid JSON");
		} else if (end && !jsonl_blank(end, len - (size_t)(end - line))) {
			fail(&p, "invalid_json", "text after the JSON value");
		} else if (!cJSON_IsObject(root)) {
			fail(&p, "invalid_request", "a line must be a JSON object");
		} else {
			parse_object(&p, line, len, root);
		}
		cJSON_Delete(root);
	}
	/* An OpenAI line without a usable custom_id is known by its reserved key, which no
	 * real custom_id can equal. */
	const struct jsonl_info *info = jsonl_request_info(r);
	if (info && info->form != JSONL_FORM_NATIVE && !info->custom_id && !p.oom) {
		char key[32];
		jsonl_line_key(line_no, key, sizeof key);
		free(r->id);
		r->id = dup_str(&p, key);
	}
	if (p.oom) {
		req_free(r);
		return BG_ERR_NOMEM;
	}
	if (!p.seed_given && d->seed_plus_line) {
		const struct request *t =
		    jsonl_request_form(r) == JSONL_FORM_NATIVE ? &d->native : &d->openai;
		r->sampling.seed = t->sampling.seed + (uint64_t)line_no;
	}
	r->sampling.n_top = r->logprobs > 0 ? r->logprobs : 0;
	if (r->error.code[0]) {
		/* nothing to run: drop what was parsed so the engine cannot mistake it */
		free(r->prompt);
		r->prompt = NULL;
		r->prompt_len = 0;
		free(r->input_ids);
		r->input_ids = NULL;
		r->n_input_ids = 0;
		r->finish = REQ_FINISH_ERROR;
	}
	*out = r;
	return BG_OK;
}
