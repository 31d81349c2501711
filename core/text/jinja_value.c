/* jinja_value: the arena, errors and values of the Jinja interpreter, with Python's str(),
 * repr(), equality, ordering and json.dumps. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "text/jinja_int.h"

/* ---- arena ---- */

struct jx_chunk {
	struct jx_chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char mem[];
};

void jx_arena_free(struct jx_arena *a)
{
	struct jx_chunk *c = a->head;
	while (c) {
		struct jx_chunk *n = c->next;
		free(c);
		c = n;
	}
	a->head = NULL;
	a->used = 0;
}

void *jx_alloc(struct jx_env *e, size_t n)
{
	struct jx_arena *a = e->arena;
	n = (n + 15) & ~(size_t)15;
	struct jx_chunk *c = a->head;
	if (!c || c->size - c->used < n) {
		size_t sz = n > 65536 ? n : 65536;
		if (a->limit && a->used + sz > a->limit)
			jx_fail(e, 0, BG_ERR_CAPACITY, "template used more than %zu bytes of memory",
				a->limit);
		c = malloc(sizeof *c + sz);
		if (!c)
			jx_fail(e, 0, BG_ERR_NOMEM, "out of memory rendering the template");
		c->size = sz;
		c->used = 0;
		a->used += sz;
		/* a big block goes second, so that the current chunk keeps serving small ones */
		if (a->head && n > 65536 / 2) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	void *p = c->mem + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

char *jx_strdup(struct jx_env *e, const char *s, size_t n)
{
	char *p = jx_alloc(e, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void jx_fail(struct jx_env *e, int line, enum bg_status st, const char *fmt, ...)
{
	char msg[BG_ERR_MSG];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	free(e->pending);
	e->pending = NULL;
	if (line > 0)
		bg_fail(e->err, st, "chat template line %d: %s", line, msg);
	else
		bg_fail(e->err, st, "chat template: %s", msg);
	longjmp(e->jb, 1);
}

/* ---- constructors ---- */

struct jx_val jx_undef(void) { return (struct jx_val){.t = JX_UNDEF}; }
struct jx_val jx_none(void) { return (struct jx_val){.t = JX_NONE}; }
struct jx_val jx_bool(bool b) { return (struct jx_val){.t = JX_BOOL, .b = b}; }
struct jx_val jx_int(int64_t i) { return (struct jx_val){.t = JX_INT, .i = i}; }
struct jx_val jx_float(double f) { return (struct jx_val){.t = JX_FLOAT, .f = f}; }

struct jx_val jx_str(struct jx_env *e, const char *s, size_t n)
{
	struct jx_str *p = jx_alloc(e, sizeof *p + n + 1);
	p->n = n;
	if (n)
		memcpy(p->p, s, n);
	p->p[n] = 0;
	return (struct jx_val){.t = JX_STR, .s = p};
}

struct jx_val jx_cstr(struct jx_env *e, const char *s) { return jx_str(e, s, strlen(s)); }

struct jx_val jx_strbuf_val(struct jx_env *e, struct strbuf *b)
{
	if (b->oom) {
		free(b->p);
		*b = (struct strbuf){0};
		jx_fail(e, 0, BG_ERR_NOMEM, "out of memory rendering the template");
	}
	e->pending = b->p;
	struct jx_val v = jx_str(e, b->p ? b->p : "", b->len);
	e->pending = NULL;
	free(b->p);
	*b = (struct strbuf){0};
	return v;
}

struct jx_list *jx_list_new(struct jx_env *e, size_t cap)
{
	struct jx_list *l = jx_alloc(e, sizeof *l);
	if (cap) {
		l->v = jx_alloc(e, cap * sizeof *l->v);
		l->cap = cap;
	}
	return l;
}

void jx_list_push(struct jx_env *e, struct jx_list *l, struct jx_val v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		struct jx_val *nv = jx_alloc(e, cap * sizeof *nv);
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof *nv);
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
}

struct jx_val jx_list_val(struct jx_list *l) { return (struct jx_val){.t = JX_LIST, .l = l}; }

struct jx_dict *jx_dict_new(struct jx_env *e) { return jx_alloc(e, sizeof(struct jx_dict)); }

struct jx_val jx_dict_val(struct jx_dict *d) { return (struct jx_val){.t = JX_DICT, .d = d}; }

static bool key_eq(struct jx_val a, struct jx_val b)
{
	if (a.t == JX_STR && b.t == JX_STR)
		return a.s->n == b.s->n && memcmp(a.s->p, b.s->p, a.s->n) == 0;
	return jx_equal(a, b);
}

void jx_dict_set(struct jx_env *e, struct jx_dict *d, struct jx_val k, struct jx_val v)
{
	for (size_t i = 0; i < d->n; i++)
		if (key_eq(d->k[i], k)) {
			d->v[i] = v;
			return;
		}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 4;
		struct jx_val *nk = jx_alloc(e, cap * sizeof *nk), *nv = jx_alloc(e, cap * sizeof *nv);
		if (d->n) {
			memcpy(nk, d->k, d->n * sizeof *nk);
			memcpy(nv, d->v, d->n * sizeof *nv);
		}
		d->k = nk;
		d->v = nv;
		d->cap = cap;
	}
	d->k[d->n] = k;
	d->v[d->n] = v;
	d->n++;
}

bool jx_dict_get(const struct jx_dict *d, struct jx_val k, struct jx_val *out)
{
	for (size_t i = 0; i < d->n; i++)
		if (key_eq(d->k[i], k)) {
			*out = d->v[i];
			return true;
		}
	return false;
}

bool jx_dict_gets(const struct jx_dict *d, const char *k, struct jx_val *out)
{
	size_t n = strlen(k);
	for (size_t i = 0; i < d->n; i++)
		if (d->k[i].t == JX_STR && d->k[i].s->n == n && memcmp(d->k[i].s->p, k, n) == 0) {
			*out = d->v[i];
			return true;
		}
	return false;
}

struct jx_val jx_from_json(struct jx_env *e, const void *cj)
{
	const cJSON *j = cj;
	if (!j || cJSON_IsNull(j))
		return jx_none();
	if (cJSON_IsBool(j))
		return jx_bool(cJSON_IsTrue(j));
	if (cJSON_IsNumber(j)) {
		double f = j->valuedouble;
		if (f == floor(f) && fabs(f) < 9007199254740992.0)
			return jx_int((int64_t)f);
		return jx_float(f);
	}
	if (cJSON_IsString(j))
		return jx_cstr(e, j->valuestring ? j->valuestring : "");
	if (cJSON_IsArray(j)) {
		struct jx_list *l = jx_list_new(e, (size_t)cJSON_GetArraySize(j));
		for (const cJSON *c = j->child; c; c = c->next)
			jx_list_push(e, l, jx_from_json(e, c));
		return jx_list_val(l);
	}
	if (cJSON_IsObject(j)) {
		struct jx_dict *d = jx_dict_new(e);
		for (const cJSON *c = j->child; c; c = c->next)
			jx_dict_set(e, d, jx_cstr(e, c->string ? c->string : ""), jx_from_json(e, c));
		return jx_dict_val(d);
	}
	return jx_none();
}

/* ---- Python semantics ---- */

bool jx_truthy(struct jx_val v)
{
	switch (v.t) {
	case JX_UNDEF:
	case JX_NONE: return false;
	case JX_BOOL: return v.b;
	case JX_INT: return v.i != 0;
	case JX_FLOAT: return v.f != 0;
	case JX_STR: return v.s->n != 0;
	case JX_LIST: return v.l->n != 0;
	case JX_DICT: return v.d->ns || v.d->n != 0;
	default: return true;
	}
}

static bool is_num(struct jx_val v) { return v.t == JX_BOOL || v.t == JX_INT || v.t == JX_FLOAT; }
static double num(struct jx_val v)
{
	return v.t == JX_FLOAT ? v.f : v.t == JX_INT ? (double)v.i : (double)v.b;
}
static int64_t inum(struct jx_val v) { return v.t == JX_INT ? v.i : (int64_t)v.b; }

bool jx_equal(struct jx_val a, struct jx_val b)
{
	if (is_num(a) && is_num(b)) {
		if (a.t != JX_FLOAT && b.t != JX_FLOAT)
			return inum(a) == inum(b);
		return num(a) == num(b);
	}
	if (a.t != b.t)
		return false;
	switch (a.t) {
	case JX_UNDEF:
	case JX_NONE: return true;
	case JX_STR: return a.s->n == b.s->n && memcmp(a.s->p, b.s->p, a.s->n) == 0;
	case JX_LIST:
		if (a.l->n != b.l->n || a.l->tuple != b.l->tuple)
			return false;
		for (size_t i = 0; i < a.l->n; i++)
			if (!jx_equal(a.l->v[i], b.l->v[i]))
				return false;
		return true;
	case JX_DICT:
		if (a.d->ns || b.d->ns)
			return a.d == b.d;
		if (a.d->n != b.d->n)
			return false;
		for (size_t i = 0; i < a.d->n; i++) {
			struct jx_val o;
			if (!jx_dict_get(b.d, a.d->k[i], &o) || !jx_equal(a.d->v[i], o))
				return false;
		}
		return true;
	case JX_MACRO: return a.m == b.m;
	case JX_FUNC: return a.fn == b.fn;
	default: return false;
	}
}

int jx_compare(struct jx_val a, struct jx_val b, bool *ok)
{
	*ok = true;
	if (is_num(a) && is_num(b)) {
		if (a.t != JX_FLOAT && b.t != JX_FLOAT)
			return inum(a) < inum(b) ? -1 : inum(a) > inum(b);
		double x = num(a), y = num(b);
		return x < y ? -1 : x > y;
	}
	if (a.t == JX_STR && b.t == JX_STR) {
		size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
		int c = memcmp(a.s->p, b.s->p, n);
		if (c)
			return c < 0 ? -1 : 1;
		return a.s->n < b.s->n ? -1 : a.s->n > b.s->n;
	}
	if (a.t == JX_LIST && b.t == JX_LIST && a.l->tuple == b.l->tuple) {
		for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
			if (jx_equal(a.l->v[i], b.l->v[i]))
				continue;
			return jx_compare(a.l->v[i], b.l->v[i], ok);
		}
		return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
	}
	*ok = false;
	return 0;
}

const char *jx_type_name(struct jx_val v)
{
	switch (v.t) {
	case JX_UNDEF: return "Undefined";
	case JX_NONE: return "NoneType";
	case JX_BOOL: return "bool";
	case JX_INT: return "int";
	case JX_FLOAT: return "float";
	case JX_STR: return "str";
	case JX_LIST: return v.l->tuple ? "tuple" : "list";
	case JX_DICT: return v.d->ns ? "Namespace" : "dict";
	case JX_MACRO: return "Macro";
	default: return "function";
	}
}

/* Python's repr(float): the shortest digits that round-trip, scientific notation when
 * the exponent is < -4 or >= 16. */
void jx_format_float(struct strbuf *b, double f)
{
	if (isnan(f)) {
		strbuf_puts(b, "nan");
		return;
	}
	if (isinf(f)) {
		strbuf_puts(b, f < 0 ? "-inf" : "inf");
		return;
	}
	char buf[64];
	int prec;
	for (prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
		if (strtod(buf, NULL) == f)
			break;
	}
	/* buf: [-]d.ddde[+-]XX */
	char digits[32];
	int nd = 0;
	const char *p = buf;
	bool neg = false;
	if (*p == '-') {
		neg = true;
		p++;
	}
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[nd++] = *p;
	int exp = atoi(p + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	if (neg)
		strbuf_puts(b, "-");
	if (exp < -4 || exp >= 16) {
		strbuf_put(b, digits, 1);
		if (nd > 1) {
			strbuf_puts(b, ".");
			strbuf_put(b, digits + 1, (size_t)nd - 1);
		}
		strbuf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	} else if (exp < 0) {
		strbuf_puts(b, "0.");
		for (int i = 0; i < -exp - 1; i++)
			strbuf_puts(b, "0");
		strbuf_put(b, digits, (size_t)nd);
	} else {
		for (int i = 0; i <= exp; i++)
			strbuf_put(b, i < nd ? &digits[i] : "0", 1);
		strbuf_puts(b, ".");
		if (nd > exp + 1)
			strbuf_put(b, digits + exp + 1, (size_t)(nd - exp - 1));
		else
			strbuf_puts(b, "0");
	}
}

/* Python's str.isprintable() of a code point >= 0x80 for every assigned character: false
 * for the categories Cc, Cf, Cs, Co, Zl, Zp and Zs (other than the space). Ranges from
 * CPython 3.11's unicodedata (Unicode 14); unassigned code points (Cn, also unprintable
 * there) count as printable here, without Unicode's tables. */
static bool py_printable(uint32_t c)
{
	static const uint32_t np[][2] = {
	    {0x80, 0xA0},	{0xAD, 0xAD},	    {0x600, 0x605},	 {0x61C, 0x61C},
	    {0x6DD, 0x6DD},	{0x70F, 0x70F},	    {0x890, 0x891},	 {0x8E2, 0x8E2},
	    {0x1680, 0x1680},	{0x180E, 0x180E},   {0x2000, 0x200F},	 {0x2028, 0x202F},
	    {0x205F, 0x2064},	{0x2066, 0x206F},   {0x3000, 0x3000},	 {0xD800, 0xF8FF},
	    {0xFEFF, 0xFEFF},	{0xFFF9, 0xFFFB},   {0x110BD, 0x110BD},	 {0x110CD, 0x110CD},
	    {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},	 {0xE0001, 0xE0001},
	    {0xE0020, 0xE007F}, {0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD}};
	for (size_t k = 0; k < sizeof np / sizeof *np; k++)
		if (c >= np[k][0] && c <= np[k][1])
			return false;
	return true;
}

static void repr_str(struct strbuf *b, const struct jx_str *s)
{
	bool sq = memchr(s->p, '\'', s->n) != NULL, dq = memchr(s->p, '"', s->n) != NULL;
	char q = sq && !dq ? '"' : '\'';
	strbuf_put(b, &q, 1);
	for (size_t i = 0; i < s->n; i++) {
		unsigned char c = (unsigned char)s->p[i];
		if (c == (unsigned char)q || c == '\\')
			strbuf_printf(b, "\\%c", c);
		else if (c == '\n')
			strbuf_puts(b, "\\n");
		else if (c == '\r')
			strbuf_puts(b, "\\r");
		else if (c == '\t')
			strbuf_puts(b, "\\t");
		else if (c < 0x20 || c == 0x7f)
			strbuf_printf(b, "\\x%02x", c);
		else if (c < 0x80)
			strbuf_put(b, &s->p[i], 1);
		else {
			size_t j = i;
			uint32_t cp = jx_utf8_next(s->p, s->n, &j);
			if (cp == 0xFFFD &&
			    j == i + 1) /* not UTF-8 (Python has no such strings): as it is */
				strbuf_put(b, &s->p[i], 1);
			else if (!py_printable(cp))
				strbuf_printf(b,
					      cp < 0x100     ? "\\x%02x"
					      : cp < 0x10000 ? "\\u%04x"
							     : "\\U%08x",
					      cp);
			else
				strbuf_put(b, &s->p[i], j - i);
			i = j - 1;
		}
	}
	strbuf_put(b, &q, 1);
}

static void repr_at(struct strbuf *b, struct jx_val v, int depth);

void jx_repr(struct strbuf *b, struct jx_val v) { repr_at(b, v, 0); }

/* depth bounds the recursion: a namespace can hold itself ({% set ns.me = ns %}) */
static void repr_at(struct strbuf *b, struct jx_val v, int depth)
{
	if (depth > 200) {
		strbuf_puts(b, "...");
		return;
	}
	switch (v.t) {
	case JX_STR: repr_str(b, v.s); return;
	case JX_UNDEF: strbuf_puts(b, "Undefined"); return; /* jinja2's Undefined.__repr__ */
	case JX_LIST:
		strbuf_puts(b, v.l->tuple ? "(" : "[");
		for (size_t i = 0; i < v.l->n; i++) {
			if (i)
				strbuf_puts(b, ", ");
			repr_at(b, v.l->v[i], depth + 1);
		}
		strbuf_puts(b, v.l->tuple ? (v.l->n == 1 ? ",)" : ")") : "]");
		return;
	case JX_DICT:
		if (v.d->ns) {
			strbuf_puts(b, "<Namespace {");
		} else {
			strbuf_puts(b, "{");
		}
		for (size_t i = 0; i < v.d->n; i++) {
			if (i)
				strbuf_puts(b, ", ");
			repr_at(b, v.d->k[i], depth + 1);
			strbuf_puts(b, ": ");
			repr_at(b, v.d->v[i], depth + 1);
		}
		strbuf_puts(b, v.d->ns ? "}>" : "}");
		return;
	default: jx_to_str(b, v);
	}
}

void jx_to_str(struct strbuf *b, struct jx_val v)
{
	switch (v.t) {
	case JX_UNDEF: return;
	case JX_NONE: strbuf_puts(b, "None"); return;
	case JX_BOOL: strbuf_puts(b, v.b ? "True" : "False"); return;
	case JX_INT: strbuf_printf(b, "%lld", (long long)v.i); return;
	case JX_FLOAT: jx_format_float(b, v.f); return;
	case JX_STR: strbuf_put(b, v.s->p, v.s->n); return;
	case JX_LIST:
	case JX_DICT: jx_repr(b, v); return;
	case JX_MACRO: /* jinja2's Macro.__repr__; a call block's caller has no name */
		if (v.m->def->kind == N_MACRO)
			strbuf_printf(b, "<Macro '%s'>", v.m->def->s);
		else
			strbuf_puts(b, "<Macro anonymous>");
		return;
	default: strbuf_puts(b, "<built-in function>"); return;
	}
}

/* ---- json.dumps ---- */

void jx_put_utf8(struct strbuf *b, uint32_t c)
{
	char o[4];
	if (c < 0x80) {
		o[0] = (char)c;
		strbuf_put(b, o, 1);
	} else if (c < 0x800) {
		o[0] = (char)(0xC0 | (c >> 6));
		o[1] = (char)(0x80 | (c & 0x3F));
		strbuf_put(b, o, 2);
	} else if (c < 0x10000) {
		o[0] = (char)(0xE0 | (c >> 12));
		o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		o[2] = (char)(0x80 | (c & 0x3F));
		strbuf_put(b, o, 3);
	} else {
		o[0] = (char)(0xF0 | (c >> 18));
		o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
		o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
		o[3] = (char)(0x80 | (c & 0x3F));
		strbuf_put(b, o, 4);
	}
}

uint32_t jx_utf8_next(const char *s, size_t n, size_t *i)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char c = u[*i];
	if (c < 0x80) {
		(*i)++;
		return c;
	}
	int len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
	if (c >= 0xF5)
		len = 0;
	uint32_t cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0Fu : c & 0x1Fu;
	if (len == 0 || *i + (size_t)len > n) {
		(*i)++;
		return 0xFFFD;
	}
	for (int k = 1; k < len; k++) {
		if ((u[*i + (size_t)k] & 0xC0) != 0x80) {
			(*i)++;
			return 0xFFFD;
		}
		cp = cp << 6 | (u[*i + (size_t)k] & 0x3Fu);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
		(*i)++;
		return 0xFFFD;
	}
	*i += (size_t)len;
	return cp;
}

static void json_str(struct strbuf *b, const char *s, size_t n, bool ascii)
{
	strbuf_puts(b, "\"");
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x80) {
			strbuf_json_ascii(b, c);
			i++;
		} else if (!ascii) {
			strbuf_put(b, &c, 1); /* UTF-8 as it is (ensure_ascii=False) */
			i++;
		} else {
			uint32_t cp = jx_utf8_next(s, n, &i);
			if (cp >= 0x10000)
				strbuf_printf(b, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
					      0xDC00 + ((cp - 0x10000) & 0x3FF));
			else
				strbuf_printf(b, "\\u%04x", cp);
		}
	}
	strbuf_puts(b, "\"");
}

static void newline_indent(struct strbuf *b, const char *indent, int level)
{
	strbuf_puts(b, "\n");
	for (int i = 0; i < level; i++)
		strbuf_puts(b, indent);
}

static int cmp_keys(const void *x, const void *y)
{
	const struct jx_val *a = *(const struct jx_val *const *)x, *c = *(const struct jx_val *const *)y;
	bool ok;
	return jx_compare(a[0], c[0], &ok);
}

bool jx_tojson(struct strbuf *b, struct jx_val v, const struct jx_json_fmt *f, int level)
{
	const char *indent = f->indent;
	if (level > 500)
		return false;
	switch (v.t) {
	case JX_NONE: strbuf_puts(b, "null"); return true;
	case JX_BOOL: strbuf_puts(b, v.b ? "true" : "false"); return true;
	case JX_INT: strbuf_printf(b, "%lld", (long long)v.i); return true;
	case JX_FLOAT:
		if (isnan(v.f))
			strbuf_puts(b, "NaN");
		else if (isinf(v.f))
			strbuf_puts(b, v.f < 0 ? "-Infinity" : "Infinity");
		else
			jx_format_float(b, v.f);
		return true;
	case JX_STR: json_str(b, v.s->p, v.s->n, f->ascii); return true;
	case JX_LIST:
		if (v.l->n == 0) {
			strbuf_puts(b, "[]");
			return true;
		}
		strbuf_puts(b, "[");
		for (size_t i = 0; i < v.l->n; i++) {
			if (i)
				strbuf_puts(b, f->item_sep);
			if (indent)
				newline_indent(b, indent, level + 1);
			if (!jx_tojson(b, v.l->v[i], f, level + 1))
				return false;
		}
		if (indent)
			newline_indent(b, indent, level);
		strbuf_puts(b, "]");
		return true;
	case JX_DICT: {
		if (v.d->ns)
			return false;
		if (v.d->n == 0) {
			strbuf_puts(b, "{}");
			return true;
		}
		size_t n = v.d->n;
		const struct jx_val **order = malloc(n * sizeof *order);
		struct jx_val *pairs = malloc(2 * n * sizeof *pairs);
		if (!order || !pairs) {
			free(order);
			free(pairs);
			b->oom = true;
			return true;
		}
		for (size_t i = 0; i < n; i++) {
			pairs[2 * i] = v.d->k[i];
			pairs[2 * i + 1] = v.d->v[i];
			order[i] = &pairs[2 * i];
		}
		if (f->sort_keys)
			qsort(order, n, sizeof *order, cmp_keys);
		bool ok = true;
		strbuf_puts(b, "{");
		for (size_t i = 0; i < n && ok; i++) {
			if (i)
				strbuf_puts(b, f->item_sep);
			if (indent)
				newline_indent(b, indent, level + 1);
			struct jx_val k = order[i][0];
			if (k.t == JX_STR) {
				json_str(b, k.s->p, k.s->n, f->ascii);
			} else if (k.t == JX_INT || k.t == JX_FLOAT || k.t == JX_BOOL || k.t == JX_NONE) {
				struct strbuf t = {0};
				jx_tojson(&t, k, f, level);
				json_str(b, t.p ? t.p : "", t.len, f->ascii);
				free(t.p);
			} else {
				ok = false;
				break;
			}
			strbuf_puts(b, f->key_sep);
			ok = jx_tojson(b, order[i][1], f, level + 1);
		}
		free(order);
		free(pairs);
		if (!ok)
			return false;
		if (indent)
			newline_indent(b, indent, level);
		strbuf_puts(b, "}");
		return true;
	}
	default: return false;
	}
}

/* ---- UTF-8 ---- */

size_t jx_utf8_len(const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			k++;
	return k;
}

size_t jx_utf8_offset(const char *s, size_t n, size_t cp)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80) {
			if (k == cp)
				return i;
			k++;
		}
	return n;
}
