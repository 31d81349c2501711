/* json_schema: JSON schema -> GBNF (see json_schema.h).
 *
 * Every schema visited becomes one named rule; visit() returns its name. Primitive rules
 * (llama.cpp's PRIMITIVE_RULES) are added once, on first use, with the rules they use.
 * The output text is "name ::= body" lines, root first.
 */
#include "sample/json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/regex.h"
#include "strbuf.h"

struct js {
	struct strbuf out;
	char **names; /* [n_names] defined rule names */
	size_t n_names, cap_names;
	char **ref_keys; /* [n_refs] "$ref" strings already given a rule */
	char **ref_rules;
	int *ref_guard; /* [n_refs] j->guard when its visit began; -1 once done */
	size_t n_refs, cap_refs;
	int guard; /* JSON tokens ("{", "[") on the path from the root to this visit */
	const cJSON *root;
	int depth;
	bool failed;
	struct bg_err *err;
	char path[256]; /* JSON pointer of the schema being visited, for errors */
};

__attribute__((format(printf, 3, 4))) static char *js_fail(struct js *j, enum bg_status st,
							  const char *fmt, ...)
{
	if (j->failed)
		return NULL;
	j->failed = true;
	char pre[sizeof j->path + 24];
	snprintf(pre, sizeof pre, "json_schema at '%s': ", j->path[0] ? j->path : "/");
	va_list ap;
	va_start(ap, fmt);
	bg_failv(j->err, st, pre, fmt, ap);
	va_end(ap);
	return NULL;
}

static bool js_has(const struct js *j, const char *name)
{
	for (size_t i = 0; i < j->n_names; i++)
		if (strcmp(j->names[i], name) == 0)
			return true;
	return false;
}

static bool js_note(struct js *j, const char *name)
{
	if (j->n_names == j->cap_names) {
		size_t nc = j->cap_names ? j->cap_names * 2 : 32;
		char **nn = realloc(j->names, nc * sizeof *nn);
		if (!nn)
			return false;
		j->names = nn;
		j->cap_names = nc;
	}
	char *c = strdup(name);
	if (!c)
		return false;
	j->names[j->n_names++] = c;
	return true;
}

/* A fresh rule name from a hint: [a-zA-Z0-9-] kept, runs of others -> '-', then -N when
 * taken. Returns a malloc'd name (reserved) or NULL. */
static char *js_name(struct js *j, const char *hint)
{
	char base[80];
	size_t n = 0;
	for (const char *c = hint; *c && n < 60; c++) {
		bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			  (*c >= '0' && *c <= '9') || *c == '-';
		if (ok)
			base[n++] = *c;
		else if (n && base[n - 1] != '-')
			base[n++] = '-';
	}
	if (n == 0)
		base[n++] = 'r';
	base[n] = 0;
	char name[100];
	snprintf(name, sizeof name, "%s", base);
	for (unsigned k = 1; js_has(j, name); k++)
		snprintf(name, sizeof name, "%s-%u", base, k);
	if (!js_note(j, name))
		return js_fail(j, BG_ERR_NOMEM, "out of memory");
	return strdup(name);
}

static void js_define(struct js *j, const char *name, const char *body)
{
	strbuf_printf(&j->out, "%s ::= %s\n", name, body);
	if (j->out.len > JSON_SCHEMA_MAX_GRAMMAR)
		js_fail(j, BG_ERR_CAPACITY, "the grammar would exceed %u bytes",
			JSON_SCHEMA_MAX_GRAMMAR);
}

/* ---- primitives (llama.cpp's PRIMITIVE_RULES and STRING_FORMAT_RULES) ---- */

struct prim {
	const char *name, *body, *deps[4];
};
static const struct prim PRIMS[] = {
    {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", {0}},
    {"boolean", "(\"true\" | \"false\") space", {"space"}},
    {"decimal-part", "[0-9]{1,16}", {0}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {0}},
    {"number",
     "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
     {"integral-part", "decimal-part", "space"}},
    {"integer", "(\"-\"? integral-part) space", {"integral-part", "space"}},
    {"value", "object | array | string | number | boolean | null",
     {"object", "array", "string", "number"}},
    {"object",
     "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" "
     "space",
     {"string", "value", "space"}},
    {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", {"value", "space"}},
    {"uuid",
     "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
     "\"-\" [0-9a-fA-F]{12} \"\\\"\" space",
     {"space"}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", {0}},
    {"string", "\"\\\"\" char* \"\\\"\" space", {"char", "space"}},
    {"null", "\"null\" space", {"space"}},
    /* llama.cpp's date rule allows 02-31 and year 0000, which a date validator refuses;
     * here days follow the month (February up to 28) and years run 1000-9999 */
    {"date",
     "[1-9] [0-9]{3} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) "
     "| ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) "
     "| \"02\" \"-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )",
     {0}},
    {"time",
     "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | "
     "( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
     {0}},
    {"date-time", "date \"T\" time", {"date", "time"}},
    {"date-string", "\"\\\"\" date \"\\\"\" space", {"date", "space"}},
    {"time-string", "\"\\\"\" time \"\\\"\" space", {"time", "space"}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\" space", {"date-time", "space"}},
};

static const char *js_prim(struct js *j, const char *name)
{
	if (js_has(j, name))
		return name;
	for (size_t i = 0; i < sizeof PRIMS / sizeof PRIMS[0]; i++) {
		if (strcmp(PRIMS[i].name, name) != 0)
			continue;
		if (!js_note(j, name))
			return js_fail(j, BG_ERR_NOMEM, "out of memory");
		js_define(j, name, PRIMS[i].body);
		for (int k = 0; k < 4 && PRIMS[i].deps[k]; k++)
			js_prim(j, PRIMS[i].deps[k]);
		if (strcmp(name, "value") == 0) {
			js_prim(j, "boolean");
			js_prim(j, "null");
		}
		return name;
	}
	BG_ASSERT(0 && "unknown primitive");
	return NULL;
}

/* ---- literals ---- */

/* Appends s as a GBNF literal "..." (escaping quotes, backslashes, control bytes). */
static void put_literal(struct strbuf *b, const char *s)
{
	strbuf_puts(b, "\"");
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			strbuf_printf(b, "\\%c", *c);
		else if (*c == '\n')
			strbuf_puts(b, "\\n");
		else if (*c == '\r')
			strbuf_puts(b, "\\r");
		else if (*c == '\t')
			strbuf_puts(b, "\\t");
		else if (*c < 0x20 || *c == 0x7f)
			strbuf_printf(b, "\\x%02X", *c);
		else
			strbuf_put(b, c, 1);
	}
	strbuf_puts(b, "\"");
}

/* The JSON text of a value as a literal (the compact form cJSON prints). */
static bool put_constant(struct js *j, struct strbuf *b, const cJSON *v)
{
	char *txt = cJSON_PrintUnformatted(v);
	if (!txt) {
		js_fail(j, BG_ERR_NOMEM, "out of memory");
		return false;
	}
	put_literal(b, txt);
	cJSON_free(txt);
	return true;
}

/* ---- integer ranges ---- */

/* Appends a GBNF expression for the decimal strings of the same length as lo and hi,
 * lo <= hi digit by digit (the usual range-to-pattern split). */
static void digits_range(struct strbuf *b, const char *lo, const char *hi, size_t n)
{
	if (n == 0)
		return;
	if (lo[0] == hi[0]) {
		strbuf_printf(b, "\"%c\" ", lo[0]);
		digits_range(b, lo + 1, hi + 1, n - 1);
		return;
	}
	bool lo_zeros = true, hi_nines = true;
	for (size_t i = 1; i < n; i++) {
		lo_zeros = lo_zeros && lo[i] == '0';
		hi_nines = hi_nines && hi[i] == '9';
	}
	strbuf_puts(b, "(");
	char first_from = lo[0], first_to = hi[0];
	if (!lo_zeros) {
		char nines[24];
		memset(nines, '9', n - 1);
		strbuf_printf(b, "\"%c\" ", lo[0]);
		digits_range(b, lo + 1, nines, n - 1);
		strbuf_puts(b, "| ");
		first_from++;
	}
	if (!hi_nines)
		first_to--;
	if (first_from <= first_to) {
		strbuf_printf(b, "[%c-%c] ", first_from, first_to);
		if (n > 1)
			strbuf_printf(b, "[0-9]{%zu} ", n - 1);
		if (!hi_nines)
			strbuf_puts(b, "| ");
	}
	if (!hi_nines) {
		char zeros[24];
		memset(zeros, '0', n - 1);
		strbuf_printf(b, "\"%c\" ", hi[0]);
		digits_range(b, zeros, hi + 1, n - 1);
	}
	strbuf_puts(b, ") ");
}

/* Natural numbers in [lo, hi] (hi < 0: unbounded), canonical decimal (no leading zero). */
static void naturals(struct strbuf *b, int64_t lo, int64_t hi)
{
	char ls[24], hs[24];
	int nl = snprintf(ls, sizeof ls, "%lld", (long long)lo);
	int nh = hi >= 0 ? snprintf(hs, sizeof hs, "%lld", (long long)hi) : 19;
	strbuf_puts(b, "(");
	for (int len = nl; len <= nh; len++) {
		char a[24], z[24];
		if (len == nl)
			memcpy(a, ls, (size_t)len + 1);
		else {
			memset(a, '0', (size_t)len);
			a[0] = '1';
		}
		if (hi >= 0 && len == nh)
			memcpy(z, hs, (size_t)len + 1);
		else
			memset(z, '9', (size_t)len);
		if (len > nl)
			strbuf_puts(b, "| ");
		digits_range(b, a, z, (size_t)len);
	}
	strbuf_puts(b, ")");
}

/* Integers in [lo, hi]; has_lo/has_hi false: unbounded that side. */
static void int_range(struct strbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi)
{
	bool neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;
	strbuf_puts(b, "(");
	if (neg) {
		/* magnitudes [max(1, -hi), -lo] */
		int64_t mlo = has_hi && hi < 0 ? -hi : 1;
		int64_t mhi = has_lo ? -lo : -1;
		strbuf_puts(b, "\"-\" ");
		naturals(b, mlo, mhi);
	}
	if (pos) {
		if (neg)
			strbuf_puts(b, " | ");
		naturals(b, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
	}
	strbuf_puts(b, ") space");
}

/* ---- visiting ---- */

static char *visit(struct js *j, const cJSON *s, const char *hint);

/* A schema that comes after a JSON token of its parent (a property value, an item). */
static char *visit_guarded(struct js *j, const cJSON *s, const char *hint)
{
	j->guard++;
	char *r = visit(j, s, hint);
	j->guard--;
	return r;
}

static const char *const IGNORED[] = {"title",	  "description", "default", "examples",
				      "$schema",  "$id",	 "$comment", "format",
				      "readOnly", "writeOnly",	 "deprecated", "$defs",
				      "definitions", "strict", "name", "contentMediaType",
				      "contentEncoding", NULL};
static const char *const HANDLED[] = {"type",	  "properties", "required", "additionalProperties",
				      "enum",	  "const",	"items",    "prefixItems",
				      "minItems", "maxItems",	"anyOf",    "oneOf",
				      "$ref",	  "minLength",	"maxLength", "pattern",
				      "minimum",  "maximum",	"exclusiveMinimum",
				      "exclusiveMaximum", NULL};

static bool in_list(const char *const *l, const char *s)
{
	for (; *l; l++)
		if (strcmp(*l, s) == 0)
			return true;
	return false;
}

/* The format of schema s that the converter produces as itself (date, time, date-time,
 * uuid), or NULL: other formats are annotations. */
static const char *enforced_format(const cJSON *s)
{
	static const char *const ENFORCED[] = {"date", "time", "date-time", "uuid", NULL};
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "format");
	return cJSON_IsString(f) && in_list(ENFORCED, f->valuestring) ? f->valuestring : NULL;
}

/* Whether a schema's "type" admits strings ("string", or a list naming it). */
static bool types_string(const cJSON *type)
{
	if (cJSON_IsString(type))
		return strcmp(type->valuestring, "string") == 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, type)
	{
		if (cJSON_IsString(t) && strcmp(t->valuestring, "string") == 0)
			return true;
	}
	return false;
}

static char *define_new(struct js *j, const char *hint, struct strbuf *body)
{
	if (body->oom) {
		free(body->p);
		return js_fail(j, BG_ERR_NOMEM, "out of memory");
	}
	char *name = js_name(j, hint);
	if (name)
		js_define(j, name, body->p ? body->p : "\"\"");
	free(body->p);
	return name;
}

/* "(sep item){min,max}" repetitions as llama.cpp's _build_repetition with a separator. */
static void repetition(struct strbuf *b, const char *item, int mn, int mx, const char *sep)
{
	if (mx == 0)
		return;
	if (mn == 0)
		strbuf_puts(b, "(");
	strbuf_printf(b, "%s", item);
	int rmn = mn > 0 ? mn - 1 : 0, rmx = mx < 0 ? -1 : mx - 1;
	if (rmx != 0) {
		if (sep)
			strbuf_printf(b, " (%s %s)", sep, item);
		else
			strbuf_printf(b, " %s", item);
		if (rmx < 0)
			strbuf_printf(b, "{%d,}", rmn);
		else
			strbuf_printf(b, "{%d,%d}", rmn, rmx);
	}
	if (mn == 0)
		strbuf_puts(b, ")?");
}

static bool get_count(struct js *j, const cJSON *s, const char *key, int *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
	if (!v)
		return true;
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
		js_fail(j, BG_ERR_FORMAT, "%s must be a non-negative integer", key);
		return false;
	}
	if (v->valuedouble > 2000) {
		js_fail(j, BG_ERR_UNSUPPORTED, "%s above 2000 is not supported", key);
		return false;
	}
	*out = (int)v->valuedouble;
	return true;
}

static char *visit_object(struct js *j, const cJSON *s, const char *hint)
{
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
	const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
	if (props && !cJSON_IsObject(props))
		return js_fail(j, BG_ERR_FORMAT, "properties must be an object");
	if (req && !cJSON_IsArray(req))
		return js_fail(j, BG_ERR_FORMAT, "required must be an array");
	int n = props ? cJSON_GetArraySize(props) : 0;
	/* any object; not when names are required (refused below: required names must be
	 * in properties) */
	if (!props && (!addl || cJSON_IsTrue(addl)) && (!req || !req->child))
		return strdup(js_prim(j, "object"));
	char **kv = calloc((size_t)n + 1, sizeof *kv);
	bool *required = calloc((size_t)n + 1, sizeof *required);
	if (!kv || !required) {
		free(kv);
		free(required);
		return js_fail(j, BG_ERR_NOMEM, "out of memory");
	}
	int i = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, props)
	{
		for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
			if (cJSON_IsString(r) && strcmp(r->valuestring, p->string) == 0)
				required[i] = true;
		char h[160];
		snprintf(h, sizeof h, "%s-%s", hint, p->string);
		size_t plen = strlen(j->path);
		snprintf(j->path + plen, sizeof j->path - plen, "/properties/%s", p->string);
		char *vr = visit_guarded(j, p, h);
		j->path[plen] = 0;
		if (!vr)
			break;
		struct strbuf b = {0};
		char *key = cJSON_PrintUnformatted(&(cJSON){.type = cJSON_String, .valuestring = p->string});
		if (key)
			put_literal(&b, key);
		cJSON_free(key);
		strbuf_printf(&b, " space \":\" space %s", vr);
		free(vr);
		snprintf(h, sizeof h, "%s-%s-kv", hint, p->string);
		kv[i] = define_new(j, h, &b);
		if (!kv[i])
			break;
		i++;
	}
	for (const cJSON *r = req ? req->child : NULL; r && !j->failed; r = r->next)
		if (!cJSON_IsString(r) || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
			js_fail(j, BG_ERR_UNSUPPORTED,
				"required property %s is not in properties",
				cJSON_IsString(r) ? r->valuestring : "(not a string)");
	char *extra = NULL; /* the kv rule of additional properties */
	if (!j->failed && addl && !cJSON_IsFalse(addl)) {
		if (!cJSON_IsTrue(addl) && !cJSON_IsObject(addl)) {
			js_fail(j, BG_ERR_FORMAT, "additionalProperties must be a boolean or a schema");
		} else {
			char h[160];
			snprintf(h, sizeof h, "%s-additional-value", hint);
			size_t plen = strlen(j->path);
			snprintf(j->path + plen, sizeof j->path - plen, "/additionalProperties");
			char *vr = cJSON_IsTrue(addl) ? strdup(js_prim(j, "value")) : visit_guarded(j, addl, h);
			j->path[plen] = 0;
			if (vr) {
				/* the key: any string, or when properties are named, any string
				 * other than those (llama.cpp's _not_strings; here as a plain
				 * string and the named keys excluded by order: they may repeat
				 * only in a way JSON parsers accept, last wins; so we refuse
				 * that case instead) */
				struct strbuf b = {0};
				if (n > 0) {
					free(vr);
					free(b.p);
					js_fail(j, BG_ERR_UNSUPPORTED,
						"additionalProperties beside properties");
				} else {
					strbuf_printf(&b, "%s \":\" space %s", js_prim(j, "string"), vr);
					free(vr);
					snprintf(h, sizeof h, "%s-additional-kv", hint);
					extra = define_new(j, h, &b);
				}
			}
		}
	}
	char *name = NULL;
	if (!j->failed) {
		/* required in order, then the optional ones: ( "," kv_a )? ( "," kv_b )? ...
		 * written as llama.cpp's nested alternatives so any subset appears in order */
		struct strbuf b = {0};
		strbuf_puts(&b, "\"{\" space");
		int n_req = 0;
		for (int k = 0; k < n; k++)
			if (required[k]) {
				strbuf_printf(&b, "%s %s", n_req ? " \",\" space" : "", kv[k]);
				n_req++;
			}
		int n_opt = 0;
		char *opt[4096];
		for (int k = 0; k < n && n_opt < 4095; k++)
			if (!required[k])
				opt[n_opt++] = kv[k];
		if (extra)
			opt[n_opt++] = extra;
		if (n_opt) {
			/* rest_k: what may follow after choosing opt[k]: ( "," opt[m] )? chains */
			char **rest = calloc((size_t)n_opt, sizeof *rest);
			for (int k = n_opt - 1; rest && k >= 0 && !j->failed; k--) {
				struct strbuf r = {0};
				const char *star = (extra && k == n_opt - 1) ? "*" : "?";
				strbuf_printf(&r, "( \",\" space %s )%s", opt[k], star);
				if (k + 1 < n_opt)
					strbuf_printf(&r, " %s", rest[k + 1]);
				char h[160];
				snprintf(h, sizeof h, "%s-rest", hint);
				rest[k] = define_new(j, h, &r);
			}
			strbuf_puts(&b, n_req ? " ( \",\" space ( " : " ( ");
			for (int k = 0; rest && k < n_opt && !j->failed; k++) {
				bool is_extra = extra && k == n_opt - 1;
				strbuf_printf(&b, "%s%s", k ? " | " : "", opt[k]);
				if (is_extra)
					strbuf_printf(&b, " ( \",\" space %s )*", opt[k]);
				if (k + 1 < n_opt)
					strbuf_printf(&b, " %s", rest[k + 1]);
			}
			strbuf_puts(&b, n_req ? " ) )?" : " )?");
			for (int k = 0; rest && k < n_opt; k++)
				free(rest[k]);
			if (!rest)
				js_fail(j, BG_ERR_NOMEM, "out of memory");
			free(rest);
		}
		strbuf_puts(&b, " \"}\" space");
		js_prim(j, "space");
		if (!j->failed)
			name = define_new(j, hint, &b);
		else
			free(b.p);
	}
	for (int k = 0; k < n; k++)
		free(kv[k]);
	free(kv);
	free(extra);
	free(required);
	return name;
}

static bool get_bound(struct js *j, const cJSON *s, const char *key, bool *has, double *v)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, key);
	if (!x)
		return true;
	if (!cJSON_IsNumber(x)) {
		js_fail(j, BG_ERR_FORMAT, "%s must be a number", key);
		return false;
	}
	if (fabs(x->valuedouble) > 9e17) {
		js_fail(j, BG_ERR_UNSUPPORTED, "%s beyond +-9e17 is not supported", key);
		return false;
	}
	*has = true;
	*v = x->valuedouble;
	return true;
}

/* Integers within the schema's bounds (also used for bounded numbers). */
static char *visit_int_range(struct js *j, const cJSON *s, const char *hint)
{
	bool hmin = false, hxmin = false, hmax = false, hxmax = false;
	double mn = 0, xmn = 0, mx = 0, xmx = 0;
	if (!get_bound(j, s, "minimum", &hmin, &mn) || !get_bound(j, s, "exclusiveMinimum", &hxmin, &xmn) ||
	    !get_bound(j, s, "maximum", &hmax, &mx) || !get_bound(j, s, "exclusiveMaximum", &hxmax, &xmx))
		return NULL;
	bool has_lo = hmin || hxmin, has_hi = hmax || hxmax;
	int64_t lo = INT64_MIN, hi = INT64_MAX;
	if (hmin)
		lo = (int64_t)ceil(mn);
	if (hxmin && (int64_t)floor(xmn) + 1 > lo)
		lo = (int64_t)floor(xmn) + 1;
	if (hmax)
		hi = (int64_t)floor(mx);
	if (hxmax && (int64_t)ceil(xmx) - 1 < hi)
		hi = (int64_t)ceil(xmx) - 1;
	if (has_lo && has_hi && lo > hi)
		return js_fail(j, BG_ERR_INVALID, "no integer lies within the bounds");
	struct strbuf b = {0};
	int_range(&b, has_lo, lo, has_hi, hi);
	js_prim(j, "space");
	return define_new(j, hint, &b);
}

static char *visit_ref(struct js *j, const char *ref, const char *hint)
{
	for (size_t i = 0; i < j->n_refs; i++)
		if (strcmp(j->ref_keys[i], ref) == 0) {
			/* reached again before any JSON token: the rule would be left-recursive
			 * (and the schema validates nothing finite through this path) */
			if (j->ref_guard[i] == j->guard)
				return js_fail(j, BG_ERR_UNSUPPORTED,
					       "$ref %s refers back to itself before any JSON token "
					       "(left recursion)",
					       ref);
			return strdup(j->ref_rules[i]);
		}
	const cJSON *target = NULL;
	if (strcmp(ref, "#") == 0) {
		target = j->root;
	} else if (strncmp(ref, "#/$defs/", 8) == 0 || strncmp(ref, "#/definitions/", 14) == 0) {
		const char *key = ref[2] == '$' ? "$defs" : "definitions";
		const char *name = strchr(ref + 2, '/') + 1;
		if (strchr(name, '/') || strchr(name, '~') || strchr(name, '%'))
			return js_fail(j, BG_ERR_UNSUPPORTED, "$ref %s: nested or escaped pointers are not supported", ref);
		target = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(j->root, key), name);
	} else {
		return js_fail(j, BG_ERR_UNSUPPORTED, "$ref %s: only #, #/$defs/NAME and #/definitions/NAME", ref);
	}
	if (!target)
		return js_fail(j, BG_ERR_FORMAT, "$ref %s: no such definition", ref);
	if (j->n_refs == j->cap_refs) {
		size_t nc = j->cap_refs ? j->cap_refs * 2 : 8;
		char **a = realloc(j->ref_keys, nc * sizeof *a);
		if (a)
			j->ref_keys = a;
		char **b = realloc(j->ref_rules, nc * sizeof *b);
		if (b)
			j->ref_rules = b;
		int *g = realloc(j->ref_guard, nc * sizeof *g);
		if (g)
			j->ref_guard = g;
		if (!a || !b || !g)
			return js_fail(j, BG_ERR_NOMEM, "out of memory");
		j->cap_refs = nc;
	}
	/* reserve the name first, so that a recursive reference finds it */
	char h[160];
	snprintf(h, sizeof h, "ref-%s", strrchr(ref, '/') ? strrchr(ref, '/') + 1 : "root");
	char *name = js_name(j, h);
	if (!name)
		return NULL;
	j->ref_keys[j->n_refs] = strdup(ref);
	j->ref_rules[j->n_refs] = name;
	j->ref_guard[j->n_refs] = j->guard;
	size_t me = j->n_refs++;
	char *body = visit(j, target, hint);
	if (!body)
		return NULL;
	j->ref_guard[me] = -1;
	js_define(j, name, body);
	free(body);
	return strdup(name);
}

static char *visit_typed(struct js *j, const cJSON *s, const char *type, const char *hint)
{
	if (strcmp(type, "object") == 0)
		return visit_object(j, s, hint);
	if (strcmp(type, "array") == 0) {
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
		const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
		int mn = 0, mx = -1;
		if (!get_count(j, s, "minItems", &mn) || !get_count(j, s, "maxItems", &mx))
			return NULL;
		if (mx >= 0 && mx < mn)
			return js_fail(j, BG_ERR_INVALID, "maxItems below minItems");
		/* both forms below use it, and their items may define nothing (an empty
		 * prefixItems, a $ref to a schema still being defined; found by fuzz_schema) */
		js_prim(j, "space");
		const cJSON *tuple = cJSON_IsArray(items) ? items : prefix;
		if (tuple) {
			if (!cJSON_IsArray(tuple))
				return js_fail(j, BG_ERR_FORMAT, "prefixItems must be an array");
			if (items && !cJSON_IsArray(items) && !cJSON_IsFalse(items))
				return js_fail(j, BG_ERR_UNSUPPORTED, "items beside prefixItems");
			struct strbuf b = {0};
			strbuf_puts(&b, "\"[\" space");
			int i = 0;
			const cJSON *it;
			cJSON_ArrayForEach(it, tuple)
			{
				char h[160];
				snprintf(h, sizeof h, "%s-tuple-%d", hint, i);
				char *r = visit_guarded(j, it, h);
				if (!r)
					break;
				strbuf_printf(&b, "%s %s", i ? " \",\" space" : "", r);
				free(r);
				i++;
			}
			strbuf_puts(&b, " \"]\" space");
			if (j->failed) {
				free(b.p);
				return NULL;
			}
			return define_new(j, hint, &b);
		}
		if (items && !cJSON_IsObject(items) && !cJSON_IsTrue(items))
			return js_fail(j, BG_ERR_FORMAT, "items must be a schema");
		char h[160];
		snprintf(h, sizeof h, "%s-item", hint);
		char *it = items && cJSON_IsObject(items) ? visit_guarded(j, items, h) : strdup(js_prim(j, "value"));
		if (!it)
			return NULL;
		struct strbuf b = {0};
		strbuf_puts(&b, "\"[\" space ");
		repetition(&b, it, mn, mx, "\",\" space");
		strbuf_puts(&b, " \"]\" space");
		free(it);
		return define_new(j, hint, &b);
	}
	if (strcmp(type, "string") == 0) {
		const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
		bool has_len = cJSON_GetObjectItemCaseSensitive(s, "minLength") ||
			       cJSON_GetObjectItemCaseSensitive(s, "maxLength");
		const char *f = enforced_format(s);
		/* the formats produced as themselves do not combine with a pattern or lengths:
		 * refused rather than one of them ignored (other formats are annotations) */
		if (f && (pat || has_len))
			return js_fail(j, BG_ERR_UNSUPPORTED,
				       "format \"%s\" beside pattern, minLength or maxLength is not "
				       "supported",
				       f);
		if (pat) {
			if (!cJSON_IsString(pat))
				return js_fail(j, BG_ERR_FORMAT, "pattern must be a string");
			if (has_len)
				return js_fail(j, BG_ERR_UNSUPPORTED, "pattern with minLength/maxLength");
			char *expr = NULL;
			struct bg_err e = {0};
			if (regex_to_gbnf_expr(pat->valuestring, true, &expr, &e) != BG_OK)
				return js_fail(j, e.status, "pattern: %s", e.msg);
			struct strbuf b = {0};
			strbuf_printf(&b, "\"\\\"\" %s \"\\\"\" space", expr);
			free(expr);
			js_prim(j, "space");
			return define_new(j, hint, &b);
		}
		if (f) {
			char pn[32];
			snprintf(pn, sizeof pn, "%s%s", f, strcmp(f, "uuid") ? "-string" : "");
			return strdup(js_prim(j, pn));
		}
		if (has_len) {
			int mn = 0, mx = -1;
			if (!get_count(j, s, "minLength", &mn) || !get_count(j, s, "maxLength", &mx))
				return NULL;
			if (mx >= 0 && mx < mn)
				return js_fail(j, BG_ERR_INVALID, "maxLength below minLength");
			struct strbuf b = {0};
			strbuf_puts(&b, "\"\\\"\" ");
			const char *c = js_prim(j, "char");
			if (mx < 0)
				strbuf_printf(&b, "%s{%d,}", c, mn);
			else
				strbuf_printf(&b, "%s{%d,%d}", c, mn, mx);
			strbuf_puts(&b, " \"\\\"\" space");
			js_prim(j, "space");
			return define_new(j, hint, &b);
		}
		return strdup(js_prim(j, "string"));
	}
	bool bounded = cJSON_GetObjectItemCaseSensitive(s, "minimum") ||
		       cJSON_GetObjectItemCaseSensitive(s, "maximum") ||
		       cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum") ||
		       cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
	if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0)
		return bounded ? visit_int_range(j, s, hint) : strdup(js_prim(j, type));
	if (strcmp(type, "boolean") == 0 || strcmp(type, "null") == 0)
		return strdup(js_prim(j, type));
	return js_fail(j, BG_ERR_UNSUPPORTED, "unknown type \"%s\"", type);
}

static char *visit_union(struct js *j, const cJSON *alts, const char *hint, const char *key,
			 const cJSON *with_types)
{
	struct strbuf b = {0};
	int i = 0;
	const cJSON *a;
	cJSON_ArrayForEach(a, alts)
	{
		char h[160];
		snprintf(h, sizeof h, "%s-%d", hint, i);
		char *r;
		if (with_types) {
			/* type: [..]: the same schema once per type */
			if (!cJSON_IsString(a)) {
				free(b.p);
				return js_fail(j, BG_ERR_FORMAT, "type must be a string or strings");
			}
			r = visit_typed(j, with_types, a->valuestring, h);
		} else {
			size_t plen = strlen(j->path);
			snprintf(j->path + plen, sizeof j->path - plen, "/%s/%d", key, i);
			r = visit(j, a, h);
			j->path[plen] = 0;
		}
		if (!r) {
			free(b.p);
			return NULL;
		}
		strbuf_printf(&b, "%s%s", i ? " | " : "", r);
		free(r);
		i++;
	}
	if (i == 0) {
		free(b.p);
		return js_fail(j, BG_ERR_INVALID, "%s is empty", key);
	}
	return define_new(j, hint, &b);
}

/* Whether JSON value v is of the type a schema's "type" names (a string, or an array of
 * them; NULL admits every value). */
static bool value_has_type(const cJSON *v, const cJSON *type)
{
	if (!type)
		return true;
	if (cJSON_IsArray(type)) {
		const cJSON *t;
		cJSON_ArrayForEach(t, type)
		{
			if (value_has_type(v, t))
				return true;
		}
		return false;
	}
	const char *n = cJSON_IsString(type) ? type->valuestring : "";
	if (strcmp(n, "integer") == 0)
		return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
	return (strcmp(n, "string") == 0 && cJSON_IsString(v)) ||
	       (strcmp(n, "number") == 0 && cJSON_IsNumber(v)) ||
	       (strcmp(n, "boolean") == 0 && cJSON_IsBool(v)) ||
	       (strcmp(n, "null") == 0 && cJSON_IsNull(v)) ||
	       (strcmp(n, "object") == 0 && cJSON_IsObject(v)) ||
	       (strcmp(n, "array") == 0 && cJSON_IsArray(v));
}

static const char *const TYPE_NAMES[] = {"string", "number",	"integer", "boolean",
					  "null",   "object", "array",	NULL};

/* A schema's "type", checked whatever branch the schema takes (beside const, enum, anyOf or
 * $ref it would otherwise go unread): a known name or a non-empty array of them. */
static bool check_type(struct js *j, const cJSON *type)
{
	if (!type)
		return true;
	if (cJSON_IsArray(type) && cJSON_GetArraySize(type) == 0) {
		js_fail(j, BG_ERR_FORMAT, "type must not be an empty array");
		return false;
	}
	const cJSON *t = cJSON_IsArray(type) ? type->child : type;
	for (; t; t = cJSON_IsArray(type) ? t->next : NULL) {
		if (!cJSON_IsString(t)) {
			js_fail(j, BG_ERR_FORMAT, "type must be a string or strings");
			return false;
		}
		if (!in_list(TYPE_NAMES, t->valuestring)) {
			js_fail(j, BG_ERR_UNSUPPORTED, "unknown type \"%s\"", t->valuestring);
			return false;
		}
	}
	return true;
}

/* Refuses a handled keyword of schema s other than those in allowed, beside keyword what:
 * a keyword that the branch taken for what would not read must not be ignored (a value
 * that meets what but not the other keyword would be produced). */
static bool only_beside(struct js *j, const cJSON *s, const char *what,
			const char *const *allowed)
{
	const cJSON *k;
	cJSON_ArrayForEach(k, s)
	{
		if (in_list(HANDLED, k->string) && !in_list(allowed, k->string)) {
			js_fail(j, BG_ERR_UNSUPPORTED, "keyword \"%s\" beside %s is not supported",
				k->string, what);
			return false;
		}
	}
	return true;
}

/* const or enum: the values themselves, each of which must be of the schema's type (an enum
 * keeps those that are; a const that is not, an enum left with none, or a const outside the
 * enum matches nothing: refused, as no instance could be valid). */
static char *visit_constants(struct js *j, const cJSON *s, const cJSON *cst, const cJSON *en,
			     const cJSON *type, const char *hint)
{
	static const char *const WITH_CONSTANTS[] = {"type", "const", "enum", NULL};
	if (!only_beside(j, s, cst ? "const" : "enum", WITH_CONSTANTS))
		return NULL;
	if (en && (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0))
		return js_fail(j, BG_ERR_FORMAT, "enum must be a non-empty array");
	if (cst) {
		bool listed = !en;
		const cJSON *v;
		cJSON_ArrayForEach(v, en)
		{
			listed = listed || cJSON_Compare(v, cst, true);
		}
		if (!value_has_type(cst, type) || !listed)
			return js_fail(j, BG_ERR_INVALID,
				       "const is not of the schema's type or not in its enum: no value "
				       "can match");
	}
	struct strbuf b = {0};
	strbuf_puts(&b, "(");
	int n = 0;
	const cJSON *v;
	if (cst) {
		n = put_constant(j, &b, cst) ? 1 : 0;
	} else {
		cJSON_ArrayForEach(v, en)
		{
			if (!value_has_type(v, type))
				continue;
			if (n++)
				strbuf_puts(&b, " | ");
			if (!put_constant(j, &b, v))
				break;
		}
	}
	if (!j->failed && n == 0)
		js_fail(j, BG_ERR_INVALID,
			"no value of enum is of the schema's type: no value can match");
	if (j->failed) {
		free(b.p);
		return NULL;
	}
	strbuf_puts(&b, ") space");
	js_prim(j, "space");
	return define_new(j, hint, &b);
}

static char *visit(struct js *j, const cJSON *s, const char *hint)
{
	if (j->failed)
		return NULL;
	if (cJSON_IsTrue(s))
		return strdup(js_prim(j, "value"));
	if (!cJSON_IsObject(s))
		return js_fail(j, BG_ERR_FORMAT, "a schema must be an object or true");
	if (j->depth >= JSON_SCHEMA_MAX_DEPTH)
		return js_fail(j, BG_ERR_CAPACITY, "schemas nest deeper than %d",
			       JSON_SCHEMA_MAX_DEPTH);
	const cJSON *k;
	cJSON_ArrayForEach(k, s)
	{
		if (!in_list(IGNORED, k->string) && !in_list(HANDLED, k->string))
			return js_fail(j, BG_ERR_UNSUPPORTED, "keyword \"%s\" is not supported",
				       k->string);
	}
	j->depth++;
	char *r = NULL;
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
	const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
	const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
	const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
	const char *const own[] = {ref ? "$ref" : any ? "anyOf" : "oneOf", NULL};
	const char *fmt = enforced_format(s);
	if (!check_type(j, type) || ((ref || any || one) && !only_beside(j, s, own[0], own))) {
		r = NULL;
	} else if (fmt && (!types_string(type) || ref || any || one || cst || en)) {
		/* produced only where a string schema is visited: elsewhere it would be dropped */
		r = js_fail(j, BG_ERR_UNSUPPORTED,
			    "format \"%s\" is supported on a schema of type string (without $ref, "
			    "anyOf, oneOf, const or enum)",
			    fmt);
	} else if (ref) {
		if (!cJSON_IsString(ref))
			r = js_fail(j, BG_ERR_FORMAT, "$ref must be a string");
		else
			r = visit_ref(j, ref->valuestring, hint);
	} else if (any || one) {
		const cJSON *alts = any ? any : one;
		if (!cJSON_IsArray(alts))
			r = js_fail(j, BG_ERR_FORMAT, "%s must be an array", any ? "anyOf" : "oneOf");
		else
			r = visit_union(j, alts, hint, any ? "anyOf" : "oneOf", NULL);
	} else if (cst || en) {
		r = visit_constants(j, s, cst, en, type, hint);
	} else if (cJSON_IsArray(type)) {
		r = visit_union(j, type, hint, "type", s);
	} else if (type) {
		if (!cJSON_IsString(type))
			r = js_fail(j, BG_ERR_FORMAT, "type must be a string or strings");
		else
			r = visit_typed(j, s, type->valuestring, hint);
	} else if (cJSON_GetObjectItemCaseSensitive(s, "properties") ||
		   cJSON_GetObjectItemCaseSensitive(s, "additionalProperties")) {
		r = visit_object(j, s, hint);
	} else if (cJSON_GetObjectItemCaseSensitive(s, "items") ||
		   cJSON_GetObjectItemCaseSensitive(s, "prefixItems")) {
		r = visit_typed(j, s, "array", hint);
	} else {
		bool other = false;
		cJSON_ArrayForEach(k, s) other = other || in_list(HANDLED, k->string);
		if (other)
			r = js_fail(j, BG_ERR_UNSUPPORTED,
				    "a schema with constraints must name its type");
		else
			r = strdup(js_prim(j, "value"));
	}
	j->depth--;
	if (!r && !j->failed)
		js_fail(j, BG_ERR_NOMEM, "out of memory");
	return r;
}

static enum bg_status finish(struct js *j, char *top, char **gbnf)
{
	enum bg_status st = BG_OK;
	if (!j->failed && j->out.oom)
		js_fail(j, BG_ERR_NOMEM, "out of memory");
	if (j->failed) {
		st = j->err ? j->err->status : BG_ERR_FORMAT;
		if (st == BG_OK)
			st = BG_ERR_FORMAT;
	} else {
		struct strbuf b = {0};
		strbuf_printf(&b, "root ::= %s\n", top);
		strbuf_put(&b, j->out.p, j->out.len);
		if (b.oom) {
			free(b.p);
			st = bg_fail(j->err, BG_ERR_NOMEM, "json_schema: out of memory");
		} else {
			*gbnf = b.p;
		}
	}
	free(top);
	free(j->out.p);
	for (size_t i = 0; i < j->n_names; i++)
		free(j->names[i]);
	free(j->names);
	for (size_t i = 0; i < j->n_refs; i++) {
		free(j->ref_keys[i]);
		free(j->ref_rules[i]);
	}
	free(j->ref_keys);
	free(j->ref_rules);
	free(j->ref_guard);
	return st;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that one object of the schema holds twice (depth first), or NULL; *oom
 * when memory ran out. JSON leaves duplicate names to the reader (RFC 8259, 4): cJSON
 * takes the first, Python's json and most validators the last, so a schema that depends
 * on which is ambiguous (found by fuzz/replay_schema.sh: {"pattern": "string", "pattern":
 * "..."} drew "string", which python-jsonschema rejects). Sorted, so a hostile object
 * with many keys costs k log k. */
static const char *dup_key(const cJSON *n, bool *oom)
{
	int k = cJSON_IsObject(n) ? cJSON_GetArraySize(n) : 0;
	if (k > 1) {
		const char **keys = malloc((size_t)k * sizeof *keys);
		if (!keys) {
			*oom = true;
			return NULL;
		}
		int i = 0;
		for (const cJSON *c = n->child; c && i < k; c = c->next)
			keys[i++] = c->string ? c->string : "";
		qsort(keys, (size_t)i, sizeof *keys, key_cmp);
		const char *d = NULL;
		for (int t = 1; t < i && !d; t++)
			if (strcmp(keys[t - 1], keys[t]) == 0)
				d = keys[t];
		free(keys);
		if (d)
			return d;
	}
	for (const cJSON *c = cJSON_IsArray(n) || cJSON_IsObject(n) ? n->child : NULL; c;
	     c = c->next) {
		const char *d = dup_key(c, oom);
		if (d || *oom)
			return d;
	}
	return NULL;
}

enum bg_status json_schema_to_gbnf(const cJSON *schema, char **gbnf, struct bg_err *err)
{
	*gbnf = NULL;
	struct js j = {.root = schema, .err = err};
	/* its keys and strings become GBNF literals, which must be UTF-8 (cJSON passes any
	 * bytes through; found by fuzz_schema: the grammar did not parse) */
	char *txt = cJSON_PrintUnformatted(schema);
	if (!txt)
		return bg_fail(err, BG_ERR_NOMEM, "json_schema: out of memory");
	bool ok = strbuf_utf8_valid(txt, strlen(txt));
	cJSON_free(txt);
	if (!ok)
		return bg_fail(err, BG_ERR_FORMAT, "json_schema: a key or string is not valid UTF-8");
	bool oom = false;
	const char *dup = dup_key(schema, &oom);
	if (oom)
		return bg_fail(err, BG_ERR_NOMEM, "json_schema: out of memory");
	if (dup)
		return bg_fail(err, BG_ERR_FORMAT,
			       "json_schema: key \"%.64s\" appears twice in one object (JSON readers "
			       "disagree on which one counts)",
			       dup);
	js_note(&j, "root");
	char *top = visit(&j, schema, "schema");
	return finish(&j, top, gbnf);
}

enum bg_status json_schema_object_gbnf(char **gbnf, struct bg_err *err)
{
	*gbnf = NULL;
	struct js j = {.err = err};
	js_note(&j, "root");
	const char *o = js_prim(&j, "object");
	return finish(&j, o ? strdup(o) : NULL, gbnf);
}
