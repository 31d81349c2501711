#include "io/jsonl.h"
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

void jsonl_out_opts_init(struct jsonl_out_opts *o)
{
	memset(o, 0, sizeof *o);
	o->render_special = true;
}

/* ==== UTF-8 and JSON strings ==== */

/* Length of the valid UTF-8 sequence at s[0, n), or 0 when it is not one (overlong
 * forms, surrogates and code points above U+10FFFF are invalid). *valid_prefix gets the
 * number of bytes that form a valid prefix of some sequence (>= 1), so that one U+FFFD
 * replaces a maximal invalid subpart, as Unicode recommends. */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *valid_prefix)
{
	unsigned char c = s[0];
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF; /* bounds of the second byte */
	*valid_prefix = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 3;
		if (c == 0xE0)
			lo = 0xA0;
		if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 4;
		if (c == 0xF0)
			lo = 0x90;
		if (c == 0xF4)
			hi = 0x8F;
	} else {
		return 0;
	}
	for (size_t k = 1; k < need; k++) {
		if (k >= n)
			return 0;
		unsigned char b = s[k];
		unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
		if (b < l || b > h)
			return 0;
		*valid_prefix = k + 1;
	}
	return need;
}

static void sb_quote(struct strbuf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	strbuf_put(b, "\"", 1);
	size_t i = 0;
	while (i < n) {
		unsigned char c = u[i];
		if (c < 0x80) {
			switch (c) {
			case '"': strbuf_puts(b, "\\\""); break;
			case '\\': strbuf_puts(b, "\\\\"); break;
			case '\n': strbuf_puts(b, "\\n"); break;
			case '\r': strbuf_puts(b, "\\r"); break;
			case '\t': strbuf_puts(b, "\\t"); break;
			case '\b': strbuf_puts(b, "\\b"); break;
			case '\f': strbuf_puts(b, "\\f"); break;
			default:
				if (c < 0x20)
					strbuf_printf(b, "\\u%04x", c);
				else
					strbuf_put(b, &c, 1);
			}
			i++;
			continue;
		}
		size_t prefix;
		size_t k = utf8_seq(u + i, n - i, &prefix);
		if (k) {
			strbuf_put(b, u + i, k);
			i += k;
		} else {
			strbuf_puts(b, "\xEF\xBF\xBD");
			i += prefix;
		}
	}
	strbuf_put(b, "\"", 1);
}

char *jsonl_quote(const char *s, size_t n, size_t *out_len)
{
	struct strbuf b = {0};
	sb_quote(&b, s ? s : "", s ? n : 0);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	if (out_len)
		*out_len = b.len;
	return b.p;
}

/* ==== the request record (request.user) ==== */

static void info_free(void *p)
{
	struct jsonl_info *i = p;
	if (!i)
		return;
	free(i->custom_id);
	free(i->url);
	free(i->model);
	free(i);
}

const struct jsonl_info *jsonl_request_info(const struct request *r)
{
	/* user belongs to whoever made the request: it is ours only with our destructor */
	if (!r || !r->user || r->user_free != info_free)
		return NULL;
	return r->user;
}

enum jsonl_form jsonl_request_form(const struct request *r)
{
	const struct jsonl_info *i = jsonl_request_info(r);
	return i ? i->form : JSONL_FORM_NATIVE;
}

/* ==== parser ==== */

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
		if (w->emit) {
			char msg[160];
			snprintf(msg, sizeof msg,
				 "line %" PRId64
				 ": more than %d distinct unknown fields; no longer "
				 "reporting them",
				 p->r->line, JSONL_WARN_NAMES);
			w->emit(w->user, msg);
		}
		return;
	}
	snprintf(w->names[w->n_names++], sizeof w->names[0], "%s", full);
	if (w->emit) {
		char msg[200];
		snprintf(msg, sizeof msg,
			 "line %" PRId64 ": unknown field \"%s\" ignored (reported once)",
			 p->r->line, full);
		w->emit(w->user, msg);
	}
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
		fail(p, "invalid_request", "%s must be in [%" PRId64 ", %" PRId64 "], got %.17g",
		     name, lo, hi, v);
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
		fail(p, "invalid_request", "%s must be in %c%g, %g], got %.17g", name,
		     rg == OPEN_LO ? '(' : '[', lo, hi, v);
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
		if (cnt > JSONL_MAX_STOP) {
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
		/* any integer; a negative one is taken modulo 2^64. Doubles hold integers
		 * exactly up to 2^53, which is what JSON parsers promise anyway. */
		if (!is_integer(it) || fabs(it->valuedouble) >= 9223372036854775808.0) {
			fail(p, "invalid_request", "%s must be an integer", name);
		} else {
			*(uint64_t *)f = (uint64_t)(int64_t)it->valuedouble;
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

static void set_schema(struct parse *p, const cJSON *schema, const char *name)
{
	char *gbnf = NULL;
	struct bg_err err = {0};
	if (json_schema_to_gbnf(schema, &gbnf, &err) != BG_OK)
		fail(p, "invalid_request", "%s: %s", name, err.msg);
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
			fail(p, "invalid_request", "%s: %s", name, err.msg);
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
				else if (!cJSON_IsNumber(e) || e->valuedouble < -100 ||
					 e->valuedouble > 100)
					fail(p, "invalid_request",
					     "%slogit_bias values must be numbers in [-100, 100]", pre);
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

/* Renders "messages" with the chat template into r->prompt (or r->input_ids when the
 * defaults carry a tokenizer). */
static void parse_messages(struct parse *p, const cJSON *msgs, const char *name)
{
	struct request *r = p->r;
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
		if (!c) {
			m[i].content = ""; /* an assistant turn with tool calls only, say */
		} else if (cJSON_IsString(c)) {
			m[i].content = c->valuestring;
		} else if (cJSON_IsArray(c)) {
			/* content parts: only text parts can be rendered */
			struct strbuf b = {0};
			strbuf_put(&b, "", 0);
			int j = 0;
			for (const cJSON *part = c->child; part; part = part->next, j++) {
				const cJSON *type = field(part, "type");
				const cJSON *text = field(part, "text");
				if (!cJSON_IsString(type) ||
				    strcmp(type->valuestring, "text") != 0 ||
				    !cJSON_IsString(text)) {
					fail(p, "unsupported",
					     "%s[%d].content[%d]: only {\"type\": \"text\", "
					     "\"text\": "
					     "...} parts are supported",
					     name, i, j);
					break;
				}
				strbuf_puts(&b, text->valuestring);
			}
			if (b.oom)
				p->oom = true;
			owned[i] = b.p;
			m[i].content = b.p ? b.p : "";
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
	if (!text)
		return;
	if (p->d->tok) {
		int32_t *ids = NULL;
		size_t nids = 0;
		struct bg_err err = {0};
		bool bos = r->add_bos < 0 ? tok_add_bos(p->d->tok) : r->add_bos != 0;
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

/* ---- native form ---- */

/* Native fields besides the parameter table's (the constraints, issue 15, are read
 * by parse_constraints). */
static const char *const native_fields[] = {"id",         "prompt", "input_ids",  "messages",
					    "grammar",    "json_schema", "regex",  "choice",
					    "logit_bias", "bad_words", NULL};

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
		parse_messages(p, it, "messages");
}

/* ---- OpenAI batch form ---- */

static const char *const openai_top_fields[] = {"custom_id", "method", "url", "body", NULL};
/* Body fields besides the parameter table's OpenAI names: read by the endpoint's own code
 * or refused there. */
static const char *const openai_body_fields[] = {
    "model", "prompt", "messages", "logprobs", "top_logprobs", "n", "echo", "best_of",
    "suffix", "logit_bias", "tools", "tool_choice", "functions", "function_call",
    "response_format",
    /* extensions, as in vLLM */
    "input_ids", "grammar", "json_schema", "regex", "choice", "bad_words", NULL};
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
	struct jsonl_info *info = calloc(1, sizeof *info);
	if (!info) {
		p->oom = true;
		return NULL;
	}
	p->r->user = info;
	p->r->user_free = info_free;
	info->form = form;
	info->created = p->d->created;
	info->model = dup_str(p, p->d->model_name ? p->d->model_name : "batchgen");
	return info;
}

static void parse_openai(struct parse *p, const cJSON *o)
{
	struct request *r = p->r;
	check_unknown(p, o, "", openai_top_fields, NULL, TABLE_NONE);

	struct jsonl_info *info = make_info(p, JSONL_FORM_OPENAI_COMPLETION);
	if (!info)
		return;

	const cJSON *cid = field(o, "custom_id");
	if (!cJSON_IsString(cid) || cid->valuestring[0] == '\0') {
		fail(p, "invalid_request", "custom_id must be a non-empty string");
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
		return;
	}
	check_unknown(p, body, "body.", openai_body_fields, openai_body_silent, TABLE_OPENAI);
	if (failed(p))
		return;

	const cJSON *it;
	if ((it = field(body, "model"))) {
		if (!cJSON_IsString(it)) {
			fail(p, "invalid_request", "body.model must be a string");
		} else {
			free(info->model);
			info->model = dup_str(p, it->valuestring);
		}
	}
	/* what we cannot do, refused rather than silently ignored */
	if ((it = field(body, "n"))) {
		int64_t n;
		if (get_int(p, it, "body.n", 1, INT32_MAX, &n) && n != 1)
			fail(p, "unsupported", "body.n = %" PRId64 ": only n = 1 is supported", n);
	}
	if ((it = field(body, "best_of"))) {
		int64_t n;
		if (get_int(p, it, "body.best_of", 1, INT32_MAX, &n) && n != 1)
			fail(p, "unsupported", "body.best_of > 1 is not supported");
	}
	if (nonempty_value(field(body, "echo")))
		fail(p, "unsupported", "body.echo is not supported");
	if ((it = field(body, "suffix")) && !(cJSON_IsString(it) && it->valuestring[0] == '\0'))
		fail(p, "unsupported", "body.suffix is not supported");
	if (nonempty_value(field(body, "tools")) || nonempty_value(field(body, "functions")))
		fail(p, "unsupported", "tools and functions are not supported");
	parse_constraints(p, body, "body.", true);
	if (failed(p))
		return;

	bool chat = info->form == JSONL_FORM_OPENAI_CHAT;
	if (chat) {
		if (field(body, "prompt") || field(body, "input_ids"))
			fail(p, "invalid_request",
			     "/v1/chat/completions takes body.messages, not a prompt");
		else if (!field(body, "messages"))
			fail(p, "invalid_request", "missing body.messages");
	} else {
		if (field(body, "messages")) {
			fail(p, "invalid_request",
			     "/v1/completions takes body.prompt, not messages");
		} else if ((it = field(body, "prompt")) && cJSON_IsArray(it)) {
			/* OpenAI prompts may be [string], token ids, or [[token ids]]; one prompt
			 * per line here */
			int cnt = cJSON_GetArraySize(it);
			const cJSON *first = it->child;
			if (cnt == 0) {
				fail(p, "invalid_request", "body.prompt is empty");
			} else if (cJSON_IsNumber(first)) {
				get_ids(p, it, "body.prompt", true, &r->input_ids, &r->n_input_ids);
			} else if (cnt != 1) {
				fail(p, "unsupported",
				     "body.prompt has %d prompts; one per line is supported", cnt);
			} else if (cJSON_IsString(first)) {
				if (first->valuestring[0] == '\0')
					fail(p, "invalid_request", "body.prompt is empty");
				r->prompt = dup_str(p, first->valuestring);
				r->prompt_len = r->prompt ? strlen(r->prompt) : 0;
			} else if (cJSON_IsArray(first)) {
				get_ids(p, first, "body.prompt[0]", true, &r->input_ids,
					&r->n_input_ids);
			} else {
				fail(p, "invalid_request",
				     "body.prompt must be a string or an array of token ids");
			}
		} else {
			parse_input(p, body, "prompt");
		}
	}
	if (failed(p))
		return;
	parse_params(p, body, true);
	if (chat) {
		bool lp = false;
		if ((it = field(body, "logprobs")))
			get_bool(p, it, "body.logprobs", &lp);
		info->chat_logprobs = lp;
		int32_t top = 0;
		if ((it = field(body, "top_logprobs"))) {
			int64_t v;
			if (get_int(p, it, "body.top_logprobs", 0, JSONL_MAX_TOP, &v))
				top = (int32_t)v;
			if (!lp && !failed(p))
				fail(p, "invalid_request",
				     "body.top_logprobs requires body.logprobs = true");
		}
		r->logprobs = lp ? top : -1;
	} else {
		if ((it = field(body, "logprobs"))) {
			int64_t v;
			if (cJSON_IsBool(it))
				fail(p, "invalid_request",
				     "body.logprobs must be an integer for /v1/completions");
			else if (get_int(p, it, "body.logprobs", 0, JSONL_MAX_TOP, &v))
				r->logprobs = (int32_t)v;
		}
	}
	if (chat && !failed(p))
		parse_messages(p, field(body, "messages"), "body.messages");
}

/* ---- entry point ---- */

static bool all_space(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
			return false;
	return true;
}

/* The parameter values of template t (jsonl_defaults), every scalar row of the table. */
static void apply_defaults(struct request *r, const struct request *t)
{
	for (size_t i = 0; i < params_count; i++)
		params_copy(r, t, &params_table[i]);
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
	if (!line || all_space(line, len)) {
		fail(&p, "empty_line", "the line is empty");
	} else {
		const char *end = NULL;
		cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
		if (!root || !cJSON_IsObject(root)) {
			/* A broken line of an OpenAI batch file should get an OpenAI-shaped
			 * result: guess the form from the raw text. */
			if (memmem(line, len, "\"custom_id\"", 11) ||
			    memmem(line, len, "\"body\"", 6))
				make_info(&p, JSONL_FORM_OPENAI_COMPLETION);
		}
		if (!root) {
			fail(&p, "invalid_json", "the line is not valid JSON");
		} else if (end && !all_space(end, len - (size_t)(end - line))) {
			fail(&p, "invalid_json", "text after the JSON value");
		} else if (!cJSON_IsObject(root)) {
			fail(&p, "invalid_request", "a line must be a JSON object");
		} else if (cJSON_GetObjectItemCaseSensitive(root, "custom_id") ||
			   cJSON_GetObjectItemCaseSensitive(root, "body")) {
			apply_defaults(r, &d->openai);
			parse_openai(&p, root);
		} else {
			parse_native(&p, root);
		}
		cJSON_Delete(root);
	}
	if (p.oom) {
		req_free(r);
		return BG_ERR_NOMEM;
	}
	if (!p.seed_given && d->seed_plus_line) {
		const struct request *t = jsonl_request_form(r) == JSONL_FORM_NATIVE ? &d->native
										       : &d->openai;
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

/* ==== writer ==== */

/* A float with the fewest significant digits that read back as the same float (a
 * log-prob is a float; printing its double expansion would show noise digits). */
static void sb_float(struct strbuf *b, float v)
{
	if (!isfinite(v)) {
		strbuf_puts(b, "null"); /* JSON has no infinities; a -inf log-prob reads as null */
		return;
	}
	char tmp[32];
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(tmp, sizeof tmp, "%.*g", prec, (double)v);
		if (strtof(tmp, NULL) == v)
			break;
	}
	strbuf_puts(b, tmp);
}

static void sb_double(struct strbuf *b, double v)
{
	if (!isfinite(v)) {
		strbuf_puts(b, "null");
		return;
	}
	char tmp[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof tmp, "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	strbuf_puts(b, tmp);
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
	sb_quote(b, pc.p, pc.n);
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

/* ,"key":[v0,v1,...] of n log-probs; entries before `first` (and all of them when lp is
 * NULL) are written as `missing`. */
static void sb_logprob_array(struct strbuf *b, const char *key, const float *lp, int32_t n,
			     int32_t first, const char *missing)
{
	strbuf_puts(b, ",");
	sb_key(b, key);
	strbuf_put(b, "[", 1);
	for (int32_t i = 0; i < n; i++) {
		if (i)
			strbuf_put(b, ",", 1);
		if (lp && i >= first)
			sb_float(b, lp[i]);
		else
			strbuf_puts(b, missing);
	}
	strbuf_put(b, "]", 1);
}

/* ,"key":[[alternatives of token 0], ...] in the native form; as sb_logprob_array. */
static void sb_top_array(struct strbuf *b, const char *key, const struct sampler_result *top,
			 int32_t n, int32_t first, const char *missing, const struct tok *t,
			 bool render_special)
{
	strbuf_puts(b, ",");
	sb_key(b, key);
	strbuf_put(b, "[", 1);
	for (int32_t i = 0; i < n; i++) {
		if (i)
			strbuf_put(b, ",", 1);
		if (top && i >= first)
			sb_top_native(b, &top[i], t, render_special);
		else
			strbuf_puts(b, missing);
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
	sb_quote(b, r->id ? r->id : "", r->id ? strlen(r->id) : 0);
	strbuf_put(b, ",", 1);
	sb_key(b, "text");
	sb_quote(b, ec || !r->text ? "" : r->text, ec || !r->text ? 0 : r->text_len);
	strbuf_put(b, ",", 1);
	sb_key(b, "token_ids");
	sb_ids(b, r->out_ids, n_out);
	strbuf_put(b, ",", 1);
	sb_key(b, "finish_reason");
	strbuf_printf(b, "\"%s\"", ec ? "error" : req_finish_name(r->finish));
	if (r->logprobs >= 0)
		sb_logprob_array(b, "logprobs", r->out_logprobs, n_out, 0, "null");
	if (r->logprobs > 0)
		sb_top_array(b, "top_logprobs", r->out_top, n_out, 0, "[]", t, o->render_special);
	if (r->prompt_logprobs >= 0) {
		int32_t n_prompt = ec || !r->prompt_ids ? 0 : r->n_prompt;
		strbuf_puts(b, ",");
		sb_key(b, "prompt_token_ids");
		sb_ids(b, r->prompt_ids, n_prompt);
		/* the first prompt token has no log-prob (NAN): null */
		sb_logprob_array(b, "prompt_logprobs", r->prompt_lp, n_prompt, 1, "null");
		if (r->prompt_logprobs > 0)
			sb_top_array(b, "prompt_top_logprobs", r->prompt_top, n_prompt, 1, "null",
				     t, o->render_special);
	}
	strbuf_puts(b, ",");
	sb_key(b, "cum_logprob");
	sb_double(b, ec ? 0.0 : r->cum_logprob);
	strbuf_puts(b, ",\"usage\":{\"prompt_tokens\":");
	strbuf_printf(b, "%" PRId32 ",\"completion_tokens\":%" PRId32 "}", ec ? 0 : r->n_prompt,
		      n_out);
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
		sb_quote(b, r->error.code, strlen(r->error.code));
		strbuf_puts(b, ",\"message\":");
		sb_quote(b, r->error.message, strlen(r->error.message));
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
	return name_in(code, codes);
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
			sb_quote(b, pc->p, pc->n);
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

static void write_openai(struct strbuf *b, const struct request *r, const struct tok *t,
			 const struct jsonl_out_opts *o, const struct jsonl_info *info)
{
	const char *run = o->run_id ? o->run_id : "";
	const char *ec = error_code(r);
	const char *cid = info->custom_id ? info->custom_id : r->id ? r->id : "";
	bool chat = info->form == JSONL_FORM_OPENAI_CHAT;
	int64_t created = info->created ? info->created : o->created;

	strbuf_printf(b, "{\"id\":");
	{
		char tmp[128];
		snprintf(tmp, sizeof tmp, "batch_req_%s%" PRId64, run, r->line);
		sb_quote(b, tmp, strlen(tmp));
	}
	strbuf_puts(b, ",\"custom_id\":");
	sb_quote(b, cid, strlen(cid));
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
		sb_quote(b, req_id, strlen(req_id));
		strbuf_puts(b, ",\"body\":{\"error\":{\"message\":");
		sb_quote(b, r->error.message, strlen(r->error.message));
		strbuf_printf(b, ",\"type\":\"%s\",\"param\":null,\"code\":",
			      client ? "invalid_request_error" : "server_error");
		sb_quote(b, ec, strlen(ec));
		strbuf_printf(b, ",\"line\":%" PRId64 "}}},\"error\":null}", r->line);
		return;
	}

	strbuf_puts(b, "{\"status_code\":200,\"request_id\":");
	sb_quote(b, req_id, strlen(req_id));
	strbuf_puts(b, ",\"body\":{\"id\":");
	{
		char tmp[128];
		snprintf(tmp, sizeof tmp, "%s%s%" PRId64, chat ? "chatcmpl-" : "cmpl-", run,
			 r->line);
		sb_quote(b, tmp, strlen(tmp));
	}
	strbuf_printf(b, ",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":",
		      chat ? "chat.completion" : "text_completion", created);
	const char *model = info->model ? info->model : "batchgen";
	sb_quote(b, model, strlen(model));
	strbuf_puts(b, ",\"choices\":[{");
	const char *text = r->text ? r->text : "";
	size_t text_len = r->text ? r->text_len : 0;
	if (chat) {
		strbuf_puts(b, "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
		sb_quote(b, text, text_len);
		strbuf_puts(b, "},\"logprobs\":");
		if (info->chat_logprobs && r->logprobs >= 0)
			write_chat_logprobs(b, r, t, o);
		else
			strbuf_puts(b, "null");
	} else {
		strbuf_puts(b, "\"text\":");
		sb_quote(b, text, text_len);
		strbuf_puts(b, ",\"index\":0,\"logprobs\":");
		if (r->logprobs >= 0)
			write_completion_logprobs(b, r, t, o);
		else
			strbuf_puts(b, "null");
	}
	strbuf_printf(b, ",\"finish_reason\":\"%s\"}]", openai_finish(r->finish));
	strbuf_printf(b,
		      ",\"usage\":{\"prompt_tokens\":%" PRId32 ",\"completion_tokens\":%" PRId32
		      ",\"total_tokens\":%" PRId64 "}}},\"error\":null}",
		      r->n_prompt, r->n_out, (int64_t)r->n_prompt + r->n_out);
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
	if (cJSON_IsObject(root) && (!end || all_space(end, len - (size_t)(end - line)))) {
		const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "custom_id");
		if (!cJSON_IsString(it))
			it = cJSON_GetObjectItemCaseSensitive(root, "id");
		if (cJSON_IsString(it)) {
			*id = strdup(it->valuestring);
			st = *id ? BG_OK : BG_ERR_NOMEM;
		}
	}
	cJSON_Delete(root);
	return st;
}
