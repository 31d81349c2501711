/* jinja_builtins: the filters, tests, methods and global functions of the Jinja
 * interpreter, each as jinja2 3.1 (filters.py, tests.py, defaults.py) and Python's str,
 * dict and list define them, plus transformers' raise_exception, strftime_now and tojson.
 * Case mapping is ASCII-only. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja_int.h"

#define E (&r->env)

struct jx_val jx_arg(const struct jx_args *a, int i, const char *name, struct jx_val def)
{
	if (name)
		for (int k = 0; k < a->nkw; k++)
			if (!strcmp(a->kn[k], name))
				return a->kv[k];
	if (i >= 0 && i < a->npos)
		return a->pos[i];
	return def;
}

static struct jx_val sval(struct jx_render *r, struct jx_val v)
{
	if (v.t == JX_STR)
		return v;
	struct strbuf b = {0};
	jx_to_str(&b, v);
	return jx_strbuf_val(E, &b);
}

static int64_t ival(struct jx_render *r, struct jx_val v, const char *what)
{
	if (v.t == JX_INT)
		return v.i;
	if (v.t == JX_BOOL)
		return v.b;
	jx_rfail(r, "%s must be an integer, not %s", what, jx_type_name(v));
}

static struct jx_list *as_list(struct jx_render *r, struct jx_val v)
{
	switch (v.t) {
	case JX_LIST: return v.l;
	case JX_UNDEF: return jx_list_new(E, 0);
	case JX_DICT: {
		struct jx_list *l = jx_list_new(E, v.d->n);
		for (size_t i = 0; i < v.d->n; i++)
			jx_list_push(E, l, v.d->k[i]);
		return l;
	}
	case JX_STR: {
		struct jx_list *l = jx_list_new(E, v.s->n);
		for (size_t i = 0; i < v.s->n;) {
			size_t j = i + 1;
			while (j < v.s->n && ((unsigned char)v.s->p[j] & 0xC0) == 0x80)
				j++;
			jx_list_push(E, l, jx_str(E, v.s->p + i, j - i));
			i = j;
		}
		return l;
	}
	default: jx_rfail(r, "'%s' object is not iterable", jx_type_name(v));
	}
}

static struct jx_val tuple2(struct jx_render *r, struct jx_val a, struct jx_val b)
{
	struct jx_list *l = jx_list_new(E, 2);
	jx_list_push(E, l, a);
	jx_list_push(E, l, b);
	l->tuple = true;
	return jx_list_val(l);
}

/* ---- attribute and item access ---- */

static const char *const STR_METHODS[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
					  "upper", "lower", "title", "capitalize", "replace", "find", "rfind", "count",
					  "join", "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "isupper",
					  "islower", "format", "index", NULL};
static const char *const DICT_METHODS[] = {"get", "items", "keys", "values", "copy", NULL};
static const char *const DICT_UNSAFE[] = {"pop", "popitem", "update", "setdefault", "clear", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", NULL};
static const char *const LIST_UNSAFE[] = {"append", "pop", "insert", "extend", "remove", "sort", "reverse", "clear", NULL};

static bool in_set(const char *const *set, const char *name)
{
	for (; *set; set++)
		if (!strcmp(*set, name))
			return true;
	return false;
}

/* jinja2 3.1's built-in filters and tests (jinja2.filters.FILTERS, jinja2.tests.TESTS;
 * transformers replaces tojson and adds none). jinja2 refuses any other name when it
 * compiles a template, also in code that never runs; of these, those not implemented here
 * fail when they run. */
static const char *const JINJA2_FILTERS[] = {
    "abs",    "attr",	    "batch",	   "capitalize", "center",   "count",
    "d",      "default",    "dictsort",	   "e",		 "escape",   "filesizeformat",
    "first",  "float",	    "forceescape", "format",	 "groupby",  "indent",
    "int",    "items",	    "join",	   "last",	 "length",   "list",
    "lower",  "map",	    "max",	   "min",	 "pprint",   "random",
    "reject", "rejectattr", "replace",	   "reverse",	 "round",    "safe",
    "select", "selectattr", "slice",	   "sort",	 "string",   "striptags",
    "sum",    "title",	    "tojson",	   "trim",	 "truncate", "unique",
    "upper",  "urlencode",  "urlize",	   "wordcount",	 "wordwrap", "xmlattr",
    NULL};
static const char *const JINJA2_TESTS[] = {
    "!=",	"<",	    "<=",	   "==",       ">",	      ">=",	  "boolean",
    "callable", "defined",  "divisibleby", "eq",       "equalto",     "escaped",  "even",
    "false",	"filter",   "float",	   "ge",       "greaterthan", "gt",	  "in",
    "integer",	"iterable", "le",	   "lessthan", "lower",	      "lt",	  "mapping",
    "ne",	"none",	    "number",	   "odd",      "sameas",      "sequence", "string",
    "test",	"true",	    "undefined",   "upper",    NULL};

bool jx_jinja2_filter(const char *name)
{
	return in_set(JINJA2_FILTERS, name);
}
bool jx_jinja2_test(const char *name)
{
	return in_set(JINJA2_TESTS, name);
}

static struct jx_val method(struct jx_render *r, struct jx_val self, const char *name)
{
	struct jx_method *m = jx_alloc(E, sizeof *m);
	m->self = self;
	m->name = name;
	return (struct jx_val){.t = JX_METHOD, .bm = m};
}

struct jx_val jx_getattr(struct jx_render *r, struct jx_val obj, const char *name)
{
	switch (obj.t) {
	case JX_UNDEF: jx_rfail(r, "an undefined value has no attribute '%s'", name);
	case JX_DICT: {
		struct jx_val v;
		if (!obj.d->ns) {
			if (in_set(DICT_METHODS, name))
				return method(r, obj, name);
			if (in_set(DICT_UNSAFE, name))
				jx_rfail(r, "access to attribute '%s' of 'dict' object is unsafe", name);
		}
		if (jx_dict_gets(obj.d, name, &v))
			return v;
		return jx_undef();
	}
	case JX_STR:
		if (in_set(STR_METHODS, name))
			return method(r, obj, name);
		return jx_undef();
	case JX_LIST:
		if (in_set(LIST_METHODS, name))
			return method(r, obj, name);
		if (in_set(LIST_UNSAFE, name))
			jx_rfail(r, "access to attribute '%s' of 'list' object is unsafe", name);
		return jx_undef();
	default: return jx_undef();
	}
}

struct jx_val jx_getitem(struct jx_render *r, struct jx_val obj, struct jx_val key)
{
	switch (obj.t) {
	case JX_UNDEF: jx_rfail(r, "an undefined value was indexed");
	case JX_DICT: {
		struct jx_val v;
		if (jx_dict_get(obj.d, key, &v))
			return v;
		if (key.t == JX_STR && !obj.d->ns)
			return jx_getattr(r, obj, key.s->p);
		return jx_undef();
	}
	case JX_LIST:
	case JX_STR: {
		if (key.t == JX_STR)
			return jx_getattr(r, obj, key.s->p);
		if (key.t != JX_INT && key.t != JX_BOOL)
			return jx_undef();
		int64_t i = key.t == JX_INT ? key.i : key.b;
		int64_t n = obj.t == JX_LIST ? (int64_t)obj.l->n : (int64_t)jx_utf8_len(obj.s->p, obj.s->n);
		if (i < 0)
			i += n;
		if (i < 0 || i >= n)
			return jx_undef();
		if (obj.t == JX_LIST)
			return obj.l->v[i];
		size_t p0 = jx_utf8_offset(obj.s->p, obj.s->n, (size_t)i);
		size_t p1 = jx_utf8_offset(obj.s->p, obj.s->n, (size_t)i + 1);
		return jx_str(E, obj.s->p + p0, p1 - p0);
	}
	default: return jx_undef();
	}
}

/* ---- string helpers ---- */

static bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* Python's str.isspace() of one code point (what split() and strip() take as whitespace) */
static bool py_space_cp(uint32_t c)
{
	return c < 0x80
		   ? py_space((char)c)
		   : c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
			 c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The start of the code point that ends at p[e] (e > 0): back over at most 3 continuation
 * bytes. */
static size_t cp_start(const char *p, size_t e)
{
	size_t s = e - 1;
	while (s > 0 && e - s < 4 && ((unsigned char)p[s] & 0xC0) == 0x80)
		s--;
	size_t j = s;
	jx_utf8_next(p, e, &j);
	return j == e ? s : e - 1; /* not one whole sequence: its last byte alone */
}

static bool cp_in(struct jx_val set, uint32_t c)
{
	for (size_t i = 0; i < set.s->n;)
		if (jx_utf8_next(set.s->p, set.s->n, &i) == c)
			return true;
	return false;
}

/* str.strip/lstrip/rstrip and the trim filter, by code point as Python does: Unicode
 * whitespace (U+00A0, U+3000, ...) by default, else the characters of chars. */
static struct jx_val strip(struct jx_render *r, struct jx_val s, struct jx_val chars, bool left, bool right)
{
	s = sval(r, s);
	const char *p = s.s->p;
	size_t b = 0, e = s.s->n;
	bool dflt = chars.t == JX_NONE || chars.t == JX_UNDEF;
	if (!dflt && chars.t != JX_STR)
		jx_rfail(r, "strip arg must be None or str");
#define STRIPPABLE(c) (dflt ? py_space_cp(c) : cp_in(chars, (c)))
	if (left)
		while (b < e) {
			size_t j = b;
			if (!STRIPPABLE(jx_utf8_next(p, e, &j)))
				break;
			b = j;
		}
	if (right)
		while (e > b) {
			size_t st = cp_start(p, e), j = st;
			if (st < b || !STRIPPABLE(jx_utf8_next(p, e, &j)))
				break;
			e = st;
		}
#undef STRIPPABLE
	return jx_str(E, p + b, e - b);
}

/* The bytes of the code point at p[i] (i < n) when it is Python whitespace, else 0. */
static size_t space_at(const char *p, size_t n, size_t i)
{
	if ((unsigned char)p[i] < 0x80)
		return py_space(p[i]);
	size_t j = i;
	return py_space_cp(jx_utf8_next(p, n, &j)) ? j - i : 0;
}

/* The text of a number as Python's int() and float() read it: whitespace around it
 * stripped, and the underscores between digits dropped (1_000); NULL when an underscore is
 * elsewhere, or the text has a NUL. */
static const char *py_number_text(struct jx_render *r, struct jx_val s)
{
	s = strip(r, s, jx_none(), true, true);
	char *o = jx_alloc(E, s.s->n + 1);
	size_t n = 0;
	for (size_t i = 0; i < s.s->n; i++) {
		char c = s.s->p[i];
		if (c == 0)
			return NULL;
		if (c == '_') {
			if (i == 0 || i + 1 == s.s->n || !isalnum((unsigned char)s.s->p[i - 1]) ||
			    !isalnum((unsigned char)s.s->p[i + 1]))
				return NULL;
			continue;
		}
		o[n++] = c;
	}
	return o;
}

static struct jx_val split(struct jx_render *r, struct jx_val s, struct jx_val sep, struct jx_val maxv)
{
	int64_t max = maxv.t == JX_INT ? maxv.i : -1;
	struct jx_list *l = jx_list_new(E, 0);
	const char *p = s.s->p;
	size_t n = s.s->n, i = 0;
	if (sep.t == JX_NONE || sep.t == JX_UNDEF) {
		size_t k;
		while (i < n) {
			while (i < n && (k = space_at(p, n, i)) > 0)
				i += k;
			if (i >= n)
				break;
			if (max >= 0 && (int64_t)l->n >= max) {
				size_t e = n;
				while (e > i) {
					size_t st = cp_start(p, e);
					if (space_at(p, n, st) != e - st)
						break;
					e = st;
				}
				jx_list_push(E, l, jx_str(E, p + i, e - i));
				break;
			}
			size_t j = i;
			while (j < n && space_at(p, n, j) == 0)
				j++; /* a continuation byte never starts whitespace */
			jx_list_push(E, l, jx_str(E, p + i, j - i));
			i = j;
		}
		return jx_list_val(l);
	}
	if (sep.t != JX_STR)
		jx_rfail(r, "split: separator must be a string");
	if (sep.s->n == 0)
		jx_rfail(r, "empty separator");
	for (;;) {
		const char *f = max >= 0 && (int64_t)l->n >= max ? NULL : memmem(p + i, n - i, sep.s->p, sep.s->n);
		if (!f) {
			jx_list_push(E, l, jx_str(E, p + i, n - i));
			break;
		}
		size_t k = (size_t)(f - p);
		jx_list_push(E, l, jx_str(E, p + i, k - i));
		i = k + sep.s->n;
	}
	return jx_list_val(l);
}

static struct jx_val replace(struct jx_render *r, struct jx_val s, struct jx_val old, struct jx_val nw, int64_t count)
{
	s = sval(r, s);
	old = sval(r, old);
	nw = sval(r, nw);
	struct strbuf b = {0};
	size_t i = 0;
	int64_t done = 0;
	if (old.s->n == 0) {
		/* Python inserts new before every character and at the end */
		for (size_t k = 0; k <= s.s->n;) {
			if (count < 0 || done < count) {
				strbuf_put(&b, nw.s->p, nw.s->n);
				done++;
			}
			if (k == s.s->n)
				break;
			size_t j = k;
			jx_utf8_next(s.s->p, s.s->n, &j);
			strbuf_put(&b, s.s->p + k, j - k);
			k = j;
			if (b.len > (64u << 20))
				break;
		}
		return jx_strbuf_val(E, &b);
	}
	while (i <= s.s->n) {
		const char *f = (count >= 0 && done >= count) ? NULL : memmem(s.s->p + i, s.s->n - i, old.s->p, old.s->n);
		if (!f) {
			strbuf_put(&b, s.s->p + i, s.s->n - i);
			break;
		}
		size_t k = (size_t)(f - s.s->p);
		strbuf_put(&b, s.s->p + i, k - i);
		strbuf_put(&b, nw.s->p, nw.s->n);
		i = k + old.s->n;
		done++;
		if (b.len > (64u << 20)) {
			free(b.p);
			jx_rfail(r, "replace result too large");
		}
	}
	return jx_strbuf_val(E, &b);
}

static struct jx_val casemap(struct jx_render *r, struct jx_val s, int mode)
{
	s = sval(r, s);
	struct jx_val o = jx_str(E, s.s->p, s.s->n);
	char *p = o.s->p;
	bool prev_cased = false;
	for (size_t i = 0; i < o.s->n; i++) {
		unsigned char c = (unsigned char)p[i];
		switch (mode) {
		case 'u': p[i] = (char)toupper(c); break;
		case 'l': p[i] = (char)tolower(c); break;
		case 'c': p[i] = (char)(i == 0 ? toupper(c) : tolower(c)); break;
		case 't': /* str.title() */
			p[i] = (char)(prev_cased ? tolower(c) : toupper(c));
			prev_cased = isalpha(c);
			break;
		case 'T': /* jinja2's title filter: words start after [-\s({\[<] */
			p[i] = (char)(prev_cased ? tolower(c) : toupper(c));
			prev_cased = !(py_space((char)c) || strchr("-({[<", c));
			break;
		}
	}
	return o;
}

static bool starts_ends(struct jx_render *r, struct jx_val s, struct jx_val x, bool end)
{
	if (x.t == JX_LIST && x.l->tuple) {
		for (size_t i = 0; i < x.l->n; i++)
			if (starts_ends(r, s, x.l->v[i], end))
				return true;
		return false;
	}
	if (x.t != JX_STR)
		jx_rfail(r, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
			 jx_type_name(x));
	if (x.s->n > s.s->n)
		return false;
	return memcmp(s.s->p + (end ? s.s->n - x.s->n : 0), x.s->p, x.s->n) == 0;
}

static struct jx_val join(struct jx_render *r, struct jx_val seq, struct jx_val sep, struct jx_val attr)
{
	struct jx_list *l = as_list(r, seq);
	sep = sep.t == JX_UNDEF ? jx_cstr(E, "") : sval(r, sep);
	struct strbuf b = {0};
	for (size_t i = 0; i < l->n; i++) {
		if (i)
			strbuf_put(&b, sep.s->p, sep.s->n);
		struct jx_val v = l->v[i];
		if (attr.t != JX_UNDEF && attr.t != JX_NONE)
			v = attr.t == JX_STR ? jx_getattr(r, v, attr.s->p) : jx_getitem(r, v, attr);
		jx_to_str(&b, v);
		if (b.len > (64u << 20)) {
			free(b.p);
			jx_rfail(r, "join result too large");
		}
	}
	return jx_strbuf_val(E, &b);
}

/* Python %-formatting, enough for templates: %s %r %c %d %i %u %o %x %X %e %E %f %F %g %G %%
 * (not %(name)s). Every argument must be used, as in Python, unless the one argument is
 * what Python takes for a mapping (mapping_arg: `%` with a dict, list or undefined value
 * that is not a tuple). */
struct jx_val jx_percent_format(struct jx_render *r, struct jx_val fmt, const struct jx_args *a,
				bool mapping_arg)
{
	fmt = sval(r, fmt);
	struct strbuf b = {0};
	int k = 0;
	for (size_t i = 0; i < fmt.s->n; i++) {
		char c = fmt.s->p[i];
		if (c != '%') {
			strbuf_put(&b, &c, 1);
			continue;
		}
		/* '%', at most 24 flag, width and precision characters, "ll", the conversion, the
		 * NUL; a byte of the string may be NUL (strchr would find the set's terminator) */
		char spec[32] = "%";
		size_t sn = 1;
		i++;
		while (i < fmt.s->n && fmt.s->p[i] && strchr("-+ #0123456789.", fmt.s->p[i])) {
			if (sn > 24) {
				free(b.p);
				jx_rfail(r, "format specification too long");
			}
			spec[sn++] = fmt.s->p[i++];
		}
		if (i >= fmt.s->n) {
			free(b.p);
			jx_rfail(r, "incomplete format");
		}
		char conv = fmt.s->p[i];
		if (!conv) {
			free(b.p);
			jx_rfail(r, "unsupported format character '\\x00'");
		}
		if (conv == '%') {
			strbuf_puts(&b, "%");
			continue;
		}
		if (k >= a->npos) {
			free(b.p);
			jx_rfail(r, "not enough arguments for format string");
		}
		struct jx_val v = a->pos[k++];
		if (conv == 's' || conv == 'r') {
			struct strbuf t = {0};
			if (conv == 's')
				jx_to_str(&t, v);
			else
				jx_repr(&t, v);
			spec[sn++] = 's';
			spec[sn] = 0;
			strbuf_printf(&b, spec, t.p ? t.p : "");
			free(t.p);
		} else if (conv == 'c') {
			struct strbuf t = {0};
			if (v.t == JX_STR && jx_utf8_len(v.s->p, v.s->n) == 1)
				strbuf_put(&t, v.s->p, v.s->n);
			else if ((v.t == JX_INT && v.i >= 0 && v.i <= 0x10FFFF) || v.t == JX_BOOL)
				jx_put_utf8(&t, v.t == JX_INT ? (uint32_t)v.i : v.b);
			else {
				free(b.p);
				jx_rfail(r, "%%c requires an int or a single character");
			}
			spec[sn++] = 's';
			spec[sn] = 0;
			strbuf_printf(&b, spec, t.p ? t.p : "");
			free(t.p);
		} else if (strchr("diuoxXeEfFgG", conv)) {
			if (v.t != JX_INT && v.t != JX_FLOAT && v.t != JX_BOOL) {
				free(b.p);
				jx_rfail(r, "%%%c format: a number is required, not %s", conv, jx_type_name(v));
			}
			double f = v.t == JX_FLOAT ? v.f : v.t == JX_INT ? (double)v.i : v.b;
			if (strchr("diuoxX", conv)) {
				spec[sn++] = 'l';
				spec[sn++] = 'l';
				spec[sn++] = conv == 'i' || conv == 'u' ? 'd' : conv;
				spec[sn] = 0;
				strbuf_printf(&b, spec, v.t == JX_INT ? (long long)v.i : (long long)f);
			} else {
				spec[sn++] = conv;
				spec[sn] = 0;
				strbuf_printf(&b, spec, f);
			}
		} else {
			free(b.p);
			jx_rfail(r, "unsupported format character '%c'", conv);
		}
	}
	if (k < a->npos && !mapping_arg) {
		free(b.p);
		jx_rfail(r, "not all arguments converted during string formatting");
	}
	return jx_strbuf_val(E, &b);
}

static struct jx_val indent(struct jx_render *r, struct jx_val s, struct jx_val width, bool first, bool blank)
{
	if (s.t != JX_STR) /* jinja2 appends "\n" to it first: a str only */
		jx_rfail(r, "indent needs a string, not %s",
			 s.t == JX_UNDEF ? "an undefined value" : jx_type_name(s));
	struct jx_val ind;
	if (width.t == JX_STR)
		ind = width;
	else {
		int64_t w = width.t == JX_UNDEF ? 4 : ival(r, width, "indent width");
		if (w < 0)
			w = 0;
		if (w > 1000)
			jx_rfail(r, "indent width too large");
		char sp[1001];
		memset(sp, ' ', (size_t)w);
		ind = jx_str(E, sp, (size_t)w);
	}
	/* s += "\n"; lines = s.splitlines() */
	struct jx_list *lines = jx_list_new(E, 0);
	const char *p = s.s->p;
	size_t n = s.s->n, i = 0, st = 0;
	while (i <= n) {
		if (i == n) {
			jx_list_push(E, lines, jx_str(E, p + st, i - st)); /* the appended "\n" ends it */
			break;
		}
		char c = p[i];
		if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
			jx_list_push(E, lines, jx_str(E, p + st, i - st));
			if (c == '\r' && i + 1 < n && p[i + 1] == '\n')
				i++;
			st = i + 1;
			if (st == n + 0 && i + 1 == n) {
				/* the string ended with a newline: the appended one adds an empty line */
				jx_list_push(E, lines, jx_str(E, "", 0));
				break;
			}
		}
		i++;
	}
	struct strbuf b = {0};
	for (size_t k = 0; k < lines->n; k++) {
		struct jx_str *ln = lines->v[k].s;
		if (k)
			strbuf_puts(&b, "\n");
		if (k && (blank || ln->n))
			strbuf_put(&b, ind.s->p, ind.s->n);
		strbuf_put(&b, ln->p, ln->n);
	}
	struct jx_val o = jx_strbuf_val(E, &b);
	if (first) {
		struct strbuf c = {0};
		strbuf_put(&c, ind.s->p, ind.s->n);
		strbuf_put(&c, o.s->p, o.s->n);
		o = jx_strbuf_val(E, &c);
	}
	return o;
}

/* ---- sorting ---- */

struct sort_ctx {
	struct jx_render *r;
	bool case_sensitive, bad;
};

static struct jx_val sort_key(struct sort_ctx *c, struct jx_val v)
{
	if (!c->case_sensitive && v.t == JX_STR)
		return casemap(c->r, v, 'l');
	return v;
}

static int cmp_vals(struct sort_ctx *c, struct jx_val a, struct jx_val b)
{
	bool ok;
	int k = jx_compare(sort_key(c, a), sort_key(c, b), &ok);
	if (!ok)
		c->bad = true;
	return k;
}

/* A stable merge sort of v[n] by keys[n]. */
static void msort(struct sort_ctx *c, struct jx_val *v, struct jx_val *keys, size_t n, struct jx_val *tv,
		  struct jx_val *tk)
{
	if (n < 2)
		return;
	size_t h = n / 2;
	msort(c, v, keys, h, tv, tk);
	msort(c, v + h, keys + h, n - h, tv, tk);
	size_t i = 0, j = h, o = 0;
	while (i < h && j < n) {
		if (cmp_vals(c, keys[j], keys[i]) < 0) {
			tv[o] = v[j];
			tk[o++] = keys[j++];
		} else {
			tv[o] = v[i];
			tk[o++] = keys[i++];
		}
	}
	while (i < h) {
		tv[o] = v[i];
		tk[o++] = keys[i++];
	}
	while (j < n) {
		tv[o] = v[j];
		tk[o++] = keys[j++];
	}
	memcpy(v, tv, n * sizeof *v);
	memcpy(keys, tk, n * sizeof *keys);
}

static struct jx_list *sorted(struct jx_render *r, struct jx_list *in, struct jx_val *keys, bool cs, bool reverse)
{
	size_t n = in->n;
	struct jx_list *l = jx_list_new(E, n);
	struct jx_val *k = jx_alloc(E, (n + 1) * sizeof *k), *tv = jx_alloc(E, (n + 1) * sizeof *tv),
		      *tk = jx_alloc(E, (n + 1) * sizeof *tk);
	for (size_t i = 0; i < n; i++) {
		jx_list_push(E, l, in->v[n - 1 - i]);
		k[i] = keys ? keys[n - 1 - i] : in->v[n - 1 - i];
	}
	/* reverse=True in Python keeps equal items in order: sort the reversed list stably,
	 * then reverse; otherwise sort the original order */
	if (!reverse)
		for (size_t i = 0; i < n; i++) {
			l->v[i] = in->v[i];
			k[i] = keys ? keys[i] : in->v[i];
		}
	struct sort_ctx c = {.r = r, .case_sensitive = cs};
	msort(&c, l->v, k, n, tv, tk);
	if (c.bad)
		jx_rfail(r, "cannot sort values of different types");
	if (reverse)
		for (size_t i = 0; i < n / 2; i++) {
			struct jx_val t = l->v[i];
			l->v[i] = l->v[n - 1 - i];
			l->v[n - 1 - i] = t;
		}
	return l;
}

static struct jx_val attr_path(struct jx_render *r, struct jx_val v, struct jx_val attr)
{
	if (attr.t == JX_INT)
		return jx_getitem(r, v, attr);
	attr = sval(r, attr);
	/* "a.b" walks, and numeric parts index, as jinja2's make_attrgetter */
	const char *p = attr.s->p;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		char part[256];
		if (n >= sizeof part)
			n = sizeof part - 1;
		memcpy(part, p, n);
		part[n] = 0;
		char *end;
		long long idx = strtoll(part, &end, 10);
		if (n && *end == 0)
			v = jx_getitem(r, v, jx_int(idx));
		else if (v.t == JX_UNDEF)
			return v;
		else
			v = jx_getitem(r, v, jx_cstr(E, part));
		if (!dot)
			break;
		p = dot + 1;
	}
	return v;
}

/* ---- filters ---- */

static struct jx_val do_map(struct jx_render *r, struct jx_val seq, const struct jx_args *a)
{
	if (!jx_truthy(seq)) /* jinja2: `if seq:` before iterating */
		seq = jx_undef();
	struct jx_list *in = as_list(r, seq), *out = jx_list_new(E, in->n);
	struct jx_val attr = jx_arg(a, -1, "attribute", jx_undef());
	if (attr.t != JX_UNDEF) {
		struct jx_val def = jx_arg(a, -1, "default", jx_undef());
		for (size_t i = 0; i < in->n; i++) {
			struct jx_val v = attr_path(r, in->v[i], attr);
			jx_list_push(E, out, v.t == JX_UNDEF && def.t != JX_UNDEF ? def : v);
		}
		return jx_list_val(out);
	}
	if (a->npos < 1 || a->pos[0].t != JX_STR)
		jx_rfail(r, "map needs a filter name or attribute=");
	struct jx_args sub = {.pos = a->pos + 1, .npos = a->npos - 1, .kn = a->kn, .kv = a->kv, .nkw = a->nkw};
	for (size_t i = 0; i < in->n; i++)
		jx_list_push(E, out, jx_apply_filter(r, a->pos[0].s->p, in->v[i], &sub));
	return jx_list_val(out);
}

/* select/reject (attr false) and selectattr/rejectattr (attr true). */
static struct jx_val do_select(struct jx_render *r, struct jx_val seq, const struct jx_args *a, bool attr, bool keep)
{
	if (!jx_truthy(seq)) /* jinja2: `if seq:` before iterating */
		seq = jx_undef();
	struct jx_list *in = as_list(r, seq), *out = jx_list_new(E, in->n);
	int off = attr ? 1 : 0;
	if (attr && a->npos < 1)
		jx_rfail(r, "selectattr needs an attribute");
	const char *test = a->npos > off && a->pos[off].t == JX_STR ? a->pos[off].s->p : NULL;
	if (a->npos > off && !test &&
	    in->n) { /* jinja2 looks the test up by whatever it is given */
		struct strbuf b = {0};
		jx_repr(&b, a->pos[off]);
		struct jx_val nm = jx_strbuf_val(E, &b);
		jx_rfail(r, "no test named %s", nm.s->p);
	}
	struct jx_args sub = {.pos = a->pos + off + 1, .npos = a->npos - off - 1, .kn = a->kn, .kv = a->kv, .nkw = a->nkw};
	if (sub.npos < 0)
		sub.npos = 0;
	for (size_t i = 0; i < in->n; i++) {
		struct jx_val v = attr ? attr_path(r, in->v[i], a->pos[0]) : in->v[i];
		bool t = test ? jx_apply_test(r, test, v, &sub) : jx_truthy(v);
		if (t == keep)
			jx_list_push(E, out, in->v[i]);
	}
	return jx_list_val(out);
}

static struct jx_val do_tojson(struct jx_render *r, struct jx_val v, const struct jx_args *a)
{
	/* transformers' tojson(x, ensure_ascii=False, indent=None, separators=None,
	 * sort_keys=False), positions included */
	struct jx_val ind = jx_arg(a, 1, "indent", jx_none());
	struct jx_val sk = jx_arg(a, 3, "sort_keys", jx_bool(false));
	struct jx_val seps = jx_arg(a, 2, "separators", jx_none());
	/* json.dumps: a string indent is used as it is, a number n as n spaces (none when n <= 0,
	 * but still newlines) */
	const char *indent = NULL;
	if (ind.t == JX_STR) {
		indent = ind.s->p;
	} else if (ind.t != JX_NONE && ind.t != JX_UNDEF) {
		int64_t n = ival(r, ind, "indent");
		if (n > 100)
			jx_rfail(r, "tojson indent too large");
		char *sp = jx_alloc(E, n > 0 ? (size_t)n + 1 : 1); /* zeroed */
		memset(sp, ' ', n > 0 ? (size_t)n : 0);
		indent = sp;
	}
	struct jx_json_fmt fmt = {.indent = indent,
				  .item_sep = indent ? "," : ", ",
				  .key_sep = ": ",
				  .sort_keys = jx_truthy(sk),
				  .ascii = jx_truthy(jx_arg(a, 0, "ensure_ascii", jx_bool(false)))};
	if (seps.t == JX_LIST && seps.l->n == 2 && seps.l->v[0].t == JX_STR && seps.l->v[1].t == JX_STR) {
		fmt.item_sep = seps.l->v[0].s->p;
		fmt.key_sep = seps.l->v[1].s->p;
	}
	struct strbuf b = {0};
	if (!jx_tojson(&b, v, &fmt, 0)) {
		free(b.p);
		jx_rfail(r, "Object of type %s is not JSON serializable", jx_type_name(v));
	}
	return jx_strbuf_val(E, &b);
}

/* jinja2's round: "common" is Python's round(value, precision), which rounds half to even
 * on the exact binary value (2.5 -> 2.0, 2.675 -> 2.67) and keeps an int an int; "ceil" and
 * "floor" are math.ceil/floor(value * 10**precision) / 10**precision, a float. */
static struct jx_val do_round(struct jx_render *r, struct jx_val v, const struct jx_args *a)
{
	int64_t prec = ival(r, jx_arg(a, 0, "precision", jx_int(0)), "precision");
	struct jx_val m = jx_arg(a, 1, "method", jx_cstr(E, "common"));
	const char *ms = m.t == JX_STR ? m.s->p : "";
	bool common = !strcmp(ms, "common");
	if (!common && strcmp(ms, "ceil") && strcmp(ms, "floor"))
		jx_rfail(r, "method must be common, ceil or floor");
	if (v.t == JX_BOOL)
		v = jx_int(v.b);
	if (v.t != JX_INT && v.t != JX_FLOAT)
		jx_rfail(r, "round needs a number");
	if (common && v.t == JX_INT) {
		if (prec >= 0)
			return v;
		if (prec < -18) /* 10**19 / 2 is past every int64 */
			return jx_int(0);
		int64_t p10 = 1;
		for (int64_t k = 0; k < -prec; k++)
			p10 *= 10;
		int64_t q = v.i / p10, rem = v.i % p10; /* C truncates: rem has v's sign */
		if (rem < 0)
			q--, rem += p10;
		if (2 * rem > p10 || (2 * rem == p10 && (q & 1)))
			q++;
		if (q > INT64_MAX / p10 ||
		    q < INT64_MIN / p10) /* past int64: a float, as + and * give */
			return jx_float((double)q * (double)p10);
		return jx_int(q * p10);
	}
	double x = v.t == JX_INT ? (double)v.i : v.f;
	if (!common) {
		double p10 = pow(10, (double)prec);
		return jx_float((ms[0] == 'c' ? ceil(x * p10) : floor(x * p10)) / p10);
	}
	if (!isfinite(x) || prec > 323) /* CPython: no digit of a double lies further right */
		return jx_float(x);
	if (prec >= 0) {
		/* glibc's printf rounds the exact binary value, ties to even, as CPython's dtoa */
		char buf[700];
		snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
		return jx_float(strtod(buf, NULL));
	}
	if (prec < -308)
		return jx_float(0.0 * x);
	double p10 = pow(10, (double)-prec), y = x / p10, z = nearbyint(y); /* half to even */
	return jx_float(z * p10);
}

static struct jx_val escape_html(struct jx_render *r, struct jx_val v)
{
	if (v.t == JX_STR && v.safe)
		return v;
	v = sval(r, v);
	struct strbuf b = {0};
	for (size_t i = 0; i < v.s->n; i++) {
		char c = v.s->p[i];
		switch (c) {
		case '&': strbuf_puts(&b, "&amp;"); break;
		case '<': strbuf_puts(&b, "&lt;"); break;
		case '>': strbuf_puts(&b, "&gt;"); break;
		case '"': strbuf_puts(&b, "&#34;"); break;
		case '\'': strbuf_puts(&b, "&#39;"); break;
		default: strbuf_put(&b, &c, 1);
		}
	}
	struct jx_val o = jx_strbuf_val(E, &b);
	o.safe = true;
	return o;
}

static int64_t length(struct jx_render *r, struct jx_val v)
{
	switch (v.t) {
	case JX_STR: return (int64_t)jx_utf8_len(v.s->p, v.s->n);
	case JX_LIST: return (int64_t)v.l->n;
	case JX_DICT: return (int64_t)v.d->n;
	case JX_UNDEF: return 0;
	default: jx_rfail(r, "object of type '%s' has no len()", jx_type_name(v));
	}
}

static struct jx_val minmax(struct jx_render *r, struct jx_val seq, const struct jx_args *a, bool max)
{
	struct jx_list *l = as_list(r, seq);
	if (!l->n)
		return jx_undef();
	struct jx_val cs = jx_arg(a, 0, "case_sensitive", jx_bool(false)), attr = jx_arg(a, 1, "attribute", jx_none());
	struct sort_ctx c = {.r = r, .case_sensitive = jx_truthy(cs)};
	struct jx_val best = l->v[0];
	for (size_t i = 1; i < l->n; i++) {
		struct jx_val x = l->v[i], kx = x, kb = best;
		if (attr.t != JX_NONE) {
			kx = attr_path(r, x, attr);
			kb = attr_path(r, best, attr);
		}
		int k = cmp_vals(&c, kx, kb);
		if (max ? k > 0 : k < 0)
			best = x;
	}
	if (c.bad)
		jx_rfail(r, "cannot compare values of different types");
	return best;
}

/* The parameters of jinja2's filter functions after the value (transformers' tojson), in
 * order, space-separated; the filters with *args (map, select, format, ...) are not here.
 * Python refuses a call with more positional arguments or another keyword. */
static const char *const FILTER_PARAMS[][2] = {
    {"abs", ""},
    {"attr", "name"},
    {"capitalize", ""},
    {"center", "width"},
    {"count", ""},
    {"d", "default_value boolean"},
    {"default", "default_value boolean"},
    {"dictsort", "case_sensitive by reverse"},
    {"e", ""},
    {"escape", ""},
    {"first", ""},
    {"float", "default"},
    {"indent", "width first blank"},
    {"int", "default base"},
    {"items", ""},
    {"join", "d attribute"},
    {"last", ""},
    {"length", ""},
    {"list", ""},
    {"lower", ""},
    {"max", "case_sensitive attribute"},
    {"min", "case_sensitive attribute"},
    {"replace", "old new count"},
    {"reverse", ""},
    {"round", "precision method"},
    {"safe", ""},
    {"sort", "reverse case_sensitive attribute"},
    {"string", ""},
    {"sum", "attribute start"},
    {"title", ""},
    {"tojson", "ensure_ascii indent separators sort_keys"},
    {"trim", "chars"},
    {"unique", "case_sensitive attribute"},
    {"upper", ""},
    {"wordcount", ""}};

static void check_filter_args(struct jx_render *r, const char *f, const struct jx_args *a)
{
	for (size_t k = 0; k < sizeof FILTER_PARAMS / sizeof *FILTER_PARAMS; k++) {
		if (strcmp(FILTER_PARAMS[k][0], f))
			continue;
		const char *ps = FILTER_PARAMS[k][1];
		int np = 0;
		for (const char *q = ps; *q; q++)
			np += q == ps || q[-1] == ' ';
		if (a->npos > np)
			jx_rfail(r, "the filter '%s' takes at most %d argument(s), %d given", f, np,
				 a->npos);
		for (int i = 0; i < a->nkw; i++) {
			size_t n = strlen(a->kn[i]);
			const char *q = ps;
			while ((q = strstr(q, a->kn[i])) &&
			       !((q == ps || q[-1] == ' ') && (q[n] == ' ' || !q[n])))
				q++;
			if (!q)
				jx_rfail(r, "the filter '%s' takes no argument named '%s'", f,
					 a->kn[i]);
		}
		return;
	}
}

struct jx_val jx_apply_filter(struct jx_render *r, const char *f, struct jx_val v, const struct jx_args *a)
{
	struct jx_val U = jx_undef();
	check_filter_args(r, f, a);
	if (!strcmp(f, "safe")) {
		v = sval(r, v);
		v.safe = true;
		return v;
	}
	if (!strcmp(f, "trim"))
		return strip(r, v, jx_arg(a, 0, "chars", jx_none()), true, true);
	if (!strcmp(f, "tojson"))
		return do_tojson(r, v, a);
	if (!strcmp(f, "length") || !strcmp(f, "count"))
		return jx_int(length(r, v));
	if (!strcmp(f, "string"))
		return sval(r, v);
	if (!strcmp(f, "upper"))
		return casemap(r, v, 'u');
	if (!strcmp(f, "lower"))
		return casemap(r, v, 'l');
	if (!strcmp(f, "capitalize"))
		return casemap(r, v, 'c');
	if (!strcmp(f, "title"))
		return casemap(r, v, 'T');
	if (!strcmp(f, "default") || !strcmp(f, "d")) {
		struct jx_val def = jx_arg(a, 0, "default_value", jx_cstr(E, ""));
		bool boolean = jx_truthy(jx_arg(a, 1, "boolean", jx_bool(false)));
		if (v.t == JX_UNDEF || (boolean && !jx_truthy(v)))
			return def;
		return v;
	}
	if (!strcmp(f, "replace")) {
		struct jx_val c = jx_arg(a, 2, "count", jx_none());
		struct jx_val o = jx_arg(a, 0, "old", U), nw = jx_arg(a, 1, "new", U);
		if (o.t == JX_UNDEF || nw.t == JX_UNDEF)
			jx_rfail(r, "replace needs the arguments old and new");
		return replace(r, v, o, nw, c.t == JX_NONE ? -1 : ival(r, c, "count"));
	}
	if (!strcmp(f, "join"))
		return join(r, v, jx_arg(a, 0, "d", U), jx_arg(a, 1, "attribute", jx_none()));
	if (!strcmp(f, "first") || !strcmp(f, "last")) {
		struct jx_list *l = as_list(r, v);
		if (!l->n)
			return U;
		return f[0] == 'f' ? l->v[0] : l->v[l->n - 1];
	}
	if (!strcmp(f, "items")) {
		struct jx_list *l = jx_list_new(E, 0);
		if (v.t == JX_UNDEF)
			return jx_list_val(l);
		if (v.t != JX_DICT)
			jx_rfail(r, "can only get item pairs from a mapping");
		for (size_t i = 0; i < v.d->n; i++)
			jx_list_push(E, l, tuple2(r, v.d->k[i], v.d->v[i]));
		return jx_list_val(l);
	}
	if (!strcmp(f, "list"))
		return jx_list_val(as_list(r, v));
	if (!strcmp(f, "map"))
		return do_map(r, v, a);
	if (!strcmp(f, "selectattr") || !strcmp(f, "rejectattr"))
		return do_select(r, v, a, true, f[0] == 's');
	if (!strcmp(f, "select") || !strcmp(f, "reject"))
		return do_select(r, v, a, false, f[0] == 's');
	if (!strcmp(f, "indent"))
		return indent(r, v, jx_arg(a, 0, "width", U), jx_truthy(jx_arg(a, 1, "first", jx_bool(false))),
			      jx_truthy(jx_arg(a, 2, "blank", jx_bool(false))));
	if (!strcmp(f, "int")) {
		struct jx_val def = jx_arg(a, 0, "default", jx_int(0));
		int base = (int)ival(r, jx_arg(a, 1, "base", jx_int(10)), "base");
		if (v.t == JX_INT)
			return v;
		if (v.t == JX_BOOL)
			return jx_int(v.b);
		if (v.t == JX_FLOAT)
			return isfinite(v.f) && fabs(v.f) < 9e18 ? jx_int((int64_t)v.f) : def;
		const char *p = v.t == JX_STR ? py_number_text(r, v) : NULL;
		if (p) {
			char *end;
			errno = 0;
			long long x = base >= 2 && base <= 36 ? strtoll(p, &end, base) : 0;
			if (base >= 2 && base <= 36 && end != p && !*end && !errno)
				return jx_int(x);
			double d = strtod(p, &end);
			if (end != p && !*end && !strpbrk(p, "xX") && isfinite(d) && fabs(d) < 9e18)
				return jx_int((int64_t)d);
		}
		return def;
	}
	if (!strcmp(f, "float")) {
		struct jx_val def = jx_arg(a, 0, "default", jx_float(0));
		if (v.t == JX_FLOAT)
			return v;
		if (v.t == JX_INT || v.t == JX_BOOL)
			return jx_float(v.t == JX_INT ? (double)v.i : v.b);
		const char *p = v.t == JX_STR ? py_number_text(r, v) : NULL;
		if (p && !strpbrk(p, "xX")) { /* Python's float() reads no hexadecimal */
			char *end;
			double d = strtod(p, &end);
			if (end != p && !*end)
				return jx_float(d);
		}
		return def;
	}
	if (!strcmp(f, "abs")) {
		if (v.t == JX_INT)
			return v.i == INT64_MIN ? jx_float(-(double)v.i) : jx_int(v.i < 0 ? -v.i : v.i);
		if (v.t == JX_FLOAT)
			return jx_float(fabs(v.f));
		jx_rfail(r, "bad operand type for abs()");
	}
	if (!strcmp(f, "round"))
		return do_round(r, v, a);
	if (!strcmp(f, "unique")) {
		struct jx_list *in = as_list(r, v), *out = jx_list_new(E, in->n);
		bool cs = jx_truthy(jx_arg(a, 0, "case_sensitive", jx_bool(false)));
		struct jx_val attr = jx_arg(a, 1, "attribute", jx_none());
		struct jx_list *seen = jx_list_new(E, in->n);
		struct sort_ctx c = {.r = r, .case_sensitive = cs};
		for (size_t i = 0; i < in->n; i++) {
			struct jx_val k = attr.t == JX_NONE ? in->v[i] : attr_path(r, in->v[i], attr);
			k = sort_key(&c, k);
			bool dup = false;
			for (size_t j = 0; j < seen->n && !dup; j++)
				dup = jx_equal(seen->v[j], k);
			if (!dup) {
				jx_list_push(E, seen, k);
				jx_list_push(E, out, in->v[i]);
			}
		}
		return jx_list_val(out);
	}
	if (!strcmp(f, "dictsort")) {
		if (v.t != JX_DICT)
			jx_rfail(r, "dictsort needs a dict");
		bool cs = jx_truthy(jx_arg(a, 0, "case_sensitive", jx_bool(false)));
		struct jx_val by = jx_arg(a, 1, "by", jx_cstr(E, "key"));
		bool rev = jx_truthy(jx_arg(a, 2, "reverse", jx_bool(false)));
		bool byval = by.t == JX_STR && !strcmp(by.s->p, "value");
		struct jx_list *items = jx_list_new(E, v.d->n);
		struct jx_val *keys = jx_alloc(E, (v.d->n + 1) * sizeof *keys);
		for (size_t i = 0; i < v.d->n; i++) {
			jx_list_push(E, items, tuple2(r, v.d->k[i], v.d->v[i]));
			keys[i] = byval ? v.d->v[i] : v.d->k[i];
		}
		return jx_list_val(sorted(r, items, keys, cs, rev));
	}
	if (!strcmp(f, "sort")) {
		struct jx_list *in = as_list(r, v);
		bool rev = jx_truthy(jx_arg(a, 0, "reverse", jx_bool(false)));
		bool cs = jx_truthy(jx_arg(a, 1, "case_sensitive", jx_bool(false)));
		struct jx_val attr = jx_arg(a, 2, "attribute", jx_none());
		struct jx_val *keys = NULL;
		if (attr.t != JX_NONE) {
			keys = jx_alloc(E, (in->n + 1) * sizeof *keys);
			for (size_t i = 0; i < in->n; i++)
				keys[i] = attr_path(r, in->v[i], attr);
		}
		return jx_list_val(sorted(r, in, keys, cs, rev));
	}
	if (!strcmp(f, "reverse")) {
		if (v.t == JX_STR) {
			struct jx_list *cs = as_list(r, v);
			struct strbuf b = {0};
			for (size_t i = cs->n; i-- > 0;)
				strbuf_put(&b, cs->v[i].s->p, cs->v[i].s->n);
			return jx_strbuf_val(E, &b);
		}
		struct jx_list *in = as_list(r, v), *out = jx_list_new(E, in->n);
		for (size_t i = in->n; i-- > 0;)
			jx_list_push(E, out, in->v[i]);
		return jx_list_val(out);
	}
	if (!strcmp(f, "sum")) {
		struct jx_list *in = as_list(r, v);
		struct jx_val attr = jx_arg(a, 0, "attribute", jx_none());
		struct jx_val acc = jx_arg(a, 1, "start", jx_int(0));
		for (size_t i = 0; i < in->n; i++) {
			struct jx_val x = attr.t == JX_NONE ? in->v[i] : attr_path(r, in->v[i], attr);
			if ((acc.t != JX_INT && acc.t != JX_FLOAT) || (x.t != JX_INT && x.t != JX_FLOAT && x.t != JX_BOOL))
				jx_rfail(r, "sum needs numbers");
			if (acc.t == JX_INT && x.t != JX_FLOAT)
				acc = jx_int(acc.i + (x.t == JX_INT ? x.i : x.b));
			else
				acc = jx_float((acc.t == JX_INT ? (double)acc.i : acc.f) + (x.t == JX_FLOAT ? x.f : x.t == JX_INT ? (double)x.i : x.b));
		}
		return acc;
	}
	if (!strcmp(f, "min") || !strcmp(f, "max"))
		return minmax(r, v, a, f[1] == 'a');
	if (!strcmp(f, "escape") || !strcmp(f, "e"))
		return escape_html(r, v);
	if (!strcmp(f, "format")) { /* jinja2: value % (kwargs or args), a tuple */
		if (a->npos && a->nkw)
			jx_rfail(r, "format: can't handle positional and keyword arguments at the "
				    "same time");
		return jx_percent_format(r, v, a, a->nkw > 0);
	}
	if (!strcmp(f, "attr"))
		return jx_getattr(r, v, sval(r, jx_arg(a, 0, "name", jx_cstr(E, ""))).s->p);
	if (!strcmp(f, "wordcount")) {
		/* jinja2: len(re.findall(r"\w+", s)); \w is exact for ASCII ([A-Za-z0-9_]); of the
		 * other characters, whitespace, Latin-1 punctuation and symbols, the punctuation,
		 * symbol and emoji blocks and private use are not word characters, the rest
		 * (letters of every script, mostly) are, without Unicode's tables */
		struct jx_val sv = sval(r, v);
		int64_t words = 0;
		bool in = false;
		for (size_t i = 0; i < sv.s->n;) {
			uint32_t c = jx_utf8_next(sv.s->p, sv.s->n, &i);
			bool w =
			    c < 0x80 ? isalnum((int)c) || c == '_'
			    : c < 0xC0
				? c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 ||
				      c == 0xBA || (c >= 0xBC && c <= 0xBE)
				: !(c == 0xD7 || c == 0xF7 || py_space_cp(c) ||
				    (c >= 0x2000 && c <= 0x206F) || (c >= 0x2190 && c <= 0x2BFF) ||
				    (c >= 0x3000 && c <= 0x3004) || (c >= 0x3008 && c <= 0x3020) ||
				    (c >= 0xE000 && c <= 0xF8FF) || (c >= 0xFF01 && c <= 0xFF0F) ||
				    (c >= 0x1F000 && c <= 0x1FAFF) || c == 0xFFFD);
			words += w && !in;
			in = w;
		}
		return jx_int(words);
	}
	if (!strcmp(f, "center")) {
		struct jx_val s = sval(r, v);
		int64_t w = ival(r, jx_arg(a, 0, "width", jx_int(80)), "width");
		int64_t n = (int64_t)jx_utf8_len(s.s->p, s.s->n);
		if (w <= n || w > 100000)
			return s;
		int64_t pad = w - n, left = pad / 2 + (pad & w & 1);
		struct strbuf b = {0};
		for (int64_t i = 0; i < left; i++)
			strbuf_puts(&b, " ");
		strbuf_put(&b, s.s->p, s.s->n);
		for (int64_t i = 0; i < pad - left; i++)
			strbuf_puts(&b, " ");
		return jx_strbuf_val(E, &b);
	}
	jx_rfail(r,
		 jx_jinja2_filter(f) ? "the filter '%s' is not supported" : "no filter named '%s'",
		 f);
}

/* ---- tests ---- */

static const char *const TESTS[] = {
    "defined", "undefined", "none",	   "string",	  "mapping", "iterable", "sequence",
    "number",  "integer",   "float",	   "boolean",	  "true",    "false",	 "callable",
    "sameas",  "equalto",   "eq",	   "==",	  "ne",	     "!=",	 "lt",
    "<",       "le",	    "<=",	   "gt",	  ">",	     "ge",	 ">=",
    "in",      "odd",	    "even",	   "divisibleby", "lower",   "upper",	 "escaped",
    "filter",  "test",	    "greaterthan", "lessthan",	  NULL};

bool jx_test_exists(const char *name) { return in_set(TESTS, name); }

/* The tests that compare with an argument; the others take none. */
static const char *const TESTS_WITH_ARG[] = {
    "sameas", "equalto", "eq", "==", "ne", "!=",	  "lt",	      "<",	     "le", "<=",
    "gt",     ">",	 "ge", ">=", "in", "divisibleby", "lessthan", "greaterthan", NULL};

bool jx_apply_test(struct jx_render *r, const char *t, struct jx_val v, const struct jx_args *a)
{
	/* Python's arity errors: a test function takes exactly its parameters */
	int want = in_set(TESTS_WITH_ARG, t) ? 1 : 0;
	if (in_set(TESTS, t) && a->npos + a->nkw != want)
		jx_rfail(r, "the test '%s' takes %d argument(s), %d given", t, want,
			 a->npos + a->nkw);
	if (a->nkw) { /* by keyword: only the parameters jinja2's test functions name */
		const char *kw = !strcmp(t, "divisibleby") ? "num"
				 : !strcmp(t, "sameas")	   ? "other"
				 : !strcmp(t, "in")	   ? "seq"
							   : "";
		if (strcmp(a->kn[0], kw))
			jx_rfail(r, "the test '%s' takes no argument named '%s'", t, a->kn[0]);
	}
	if (!strcmp(t, "lessthan") || !strcmp(t, "greaterthan")) /* jinja2's aliases */
		t = t[0] == 'l' ? "lt" : "gt";
	struct jx_val x = a->npos ? a->pos[0] : a->nkw ? a->kv[0] : jx_undef();
	if (!strcmp(t, "defined"))
		return v.t != JX_UNDEF;
	if (!strcmp(t, "undefined"))
		return v.t == JX_UNDEF;
	if (!strcmp(t, "none"))
		return v.t == JX_NONE;
	if (!strcmp(t, "string"))
		return v.t == JX_STR;
	if (!strcmp(t, "mapping"))
		return v.t == JX_DICT && !v.d->ns;
	if (!strcmp(t, "iterable"))
		return v.t == JX_STR || v.t == JX_LIST || (v.t == JX_DICT && !v.d->ns) || v.t == JX_UNDEF;
	if (!strcmp(t, "sequence"))
		return v.t == JX_STR || v.t == JX_LIST || (v.t == JX_DICT && !v.d->ns) || v.t == JX_UNDEF;
	if (!strcmp(t, "number"))
		return v.t == JX_INT || v.t == JX_FLOAT || v.t == JX_BOOL;
	if (!strcmp(t, "integer"))
		return v.t == JX_INT;
	if (!strcmp(t, "float"))
		return v.t == JX_FLOAT;
	if (!strcmp(t, "boolean"))
		return v.t == JX_BOOL;
	if (!strcmp(t, "true"))
		return v.t == JX_BOOL && v.b;
	if (!strcmp(t, "false"))
		return v.t == JX_BOOL && !v.b;
	if (!strcmp(t, "callable"))
		return v.t == JX_MACRO || v.t == JX_FUNC || v.t == JX_METHOD;
	if (!strcmp(t, "sameas")) {
		if (v.t != x.t)
			return false;
		if (v.t == JX_NONE || v.t == JX_UNDEF)
			return true;
		if (v.t == JX_BOOL)
			return v.b == x.b;
		if (v.t == JX_LIST)
			return v.l == x.l;
		if (v.t == JX_DICT)
			return v.d == x.d;
		if (v.t == JX_INT)
			return v.i == x.i && v.i >= -5 && v.i <= 256; /* CPython's small-int cache */
		return false;
	}
	if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "=="))
		return jx_equal(v, x);
	if (!strcmp(t, "ne") || !strcmp(t, "!="))
		return !jx_equal(v, x);
	if (!strcmp(t, "in")) {
		if (x.t == JX_STR)
			return v.t == JX_STR && (v.s->n == 0 || memmem(x.s->p, x.s->n, v.s->p, v.s->n));
		if (x.t == JX_LIST) {
			for (size_t i = 0; i < x.l->n; i++)
				if (jx_equal(x.l->v[i], v))
					return true;
			return false;
		}
		if (x.t == JX_DICT) {
			struct jx_val o;
			return jx_dict_get(x.d, v, &o);
		}
		if (x.t == JX_UNDEF)
			return false;
		jx_rfail(r, "argument of type '%s' is not iterable", jx_type_name(x));
	}
	if (!strcmp(t, "lt") || !strcmp(t, "<") || !strcmp(t, "le") || !strcmp(t, "<=") || !strcmp(t, "gt") ||
	    !strcmp(t, ">") || !strcmp(t, "ge") || !strcmp(t, ">=")) {
		bool ok;
		int c = jx_compare(v, x, &ok);
		if (!ok)
			jx_rfail(r, "'%s' not supported between instances of '%s' and '%s'", t, jx_type_name(v), jx_type_name(x));
		if (t[0] == 'l' || t[0] == '<')
			return t[1] == 'e' || t[1] == '=' ? c <= 0 : c < 0;
		return t[1] == 'e' || t[1] == '=' ? c >= 0 : c > 0;
	}
	if (!strcmp(t, "odd") || !strcmp(t, "even")) {
		int64_t i = ival(r, v, "odd/even test value");
		return (i % 2 != 0) == (t[0] == 'o');
	}
	if (!strcmp(t, "divisibleby")) {
		int64_t i = ival(r, v, "divisibleby value"), d = ival(r, x, "divisor");
		if (d == 0)
			jx_rfail(r, "integer division or modulo by zero");
		return d == -1 || i % d == 0;
	}
	if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
		struct jx_val s = sval(r, v);
		bool cased = false;
		for (size_t i = 0; i < s.s->n; i++) {
			unsigned char c = (unsigned char)s.s->p[i];
			if (t[0] == 'l' ? isupper(c) : islower(c))
				return false;
			cased |= isalpha(c) != 0;
		}
		return cased;
	}
	if (!strcmp(t, "escaped"))
		return false;
	jx_rfail(r, jx_jinja2_test(t) ? "the test '%s' is not supported" : "no test named '%s'", t);
}

/* ---- methods ---- */

struct jx_val jx_call_method(struct jx_render *r, struct jx_method *m, const struct jx_args *a)
{
	struct jx_val s = m->self, U = jx_undef();
	const char *n = m->name;
	if (s.t == JX_DICT) {
		if (!strcmp(n, "get")) {
			struct jx_val v;
			if (jx_dict_get(s.d, jx_arg(a, 0, NULL, jx_none()), &v))
				return v;
			return jx_arg(a, 1, NULL, jx_none());
		}
		struct jx_list *l = jx_list_new(E, s.d->n);
		for (size_t i = 0; i < s.d->n; i++)
			jx_list_push(E, l, !strcmp(n, "items") ? tuple2(r, s.d->k[i], s.d->v[i]) : !strcmp(n, "keys") ? s.d->k[i] : s.d->v[i]);
		if (!strcmp(n, "copy")) {
			struct jx_dict *d = jx_dict_new(E);
			for (size_t i = 0; i < s.d->n; i++)
				jx_dict_set(E, d, s.d->k[i], s.d->v[i]);
			return jx_dict_val(d);
		}
		return jx_list_val(l);
	}
	if (s.t == JX_LIST) {
		struct jx_val x = jx_arg(a, 0, NULL, U);
		if (!strcmp(n, "copy")) {
			struct jx_list *l = jx_list_new(E, s.l->n);
			for (size_t i = 0; i < s.l->n; i++)
				jx_list_push(E, l, s.l->v[i]);
			return jx_list_val(l);
		}
		int64_t k = 0;
		for (size_t i = 0; i < s.l->n; i++)
			if (jx_equal(s.l->v[i], x)) {
				if (!strcmp(n, "index"))
					return jx_int((int64_t)i);
				k++;
			}
		if (!strcmp(n, "index"))
			jx_rfail(r, "list.index(x): x not in list");
		return jx_int(k);
	}
	/* str */
	if (!strcmp(n, "strip") || !strcmp(n, "lstrip") || !strcmp(n, "rstrip"))
		return strip(r, s, jx_arg(a, 0, NULL, jx_none()), n[0] != 'r', n[0] != 'l');
	if (!strcmp(n, "split"))
		return split(r, s, jx_arg(a, 0, "sep", jx_none()), jx_arg(a, 1, "maxsplit", jx_int(-1)));
	if (!strcmp(n, "rsplit")) {
		struct jx_val mx = jx_arg(a, 1, "maxsplit", jx_int(-1));
		if (mx.t == JX_INT && mx.i >= 0) {
			/* rsplit with a limit: split fully, then rejoin the leading parts */
			struct jx_val sep = jx_arg(a, 0, "sep", jx_none());
			struct jx_list *all = split(r, s, sep, jx_int(-1)).l;
			if ((int64_t)all->n <= mx.i + 1 || sep.t != JX_STR)
				return jx_list_val(all);
			size_t head = all->n - (size_t)mx.i;
			struct jx_list *hl = jx_list_new(E, head);
			for (size_t i = 0; i < head; i++)
				jx_list_push(E, hl, all->v[i]);
			struct jx_list *out = jx_list_new(E, (size_t)mx.i + 1);
			jx_list_push(E, out, join(r, jx_list_val(hl), sep, jx_none()));
			for (size_t i = head; i < all->n; i++)
				jx_list_push(E, out, all->v[i]);
			return jx_list_val(out);
		}
		return split(r, s, jx_arg(a, 0, "sep", jx_none()), jx_int(-1));
	}
	if (!strcmp(n, "startswith") || !strcmp(n, "endswith"))
		return jx_bool(starts_ends(r, s, jx_arg(a, 0, NULL, U), n[0] == 'e'));
	if (!strcmp(n, "upper"))
		return casemap(r, s, 'u');
	if (!strcmp(n, "lower"))
		return casemap(r, s, 'l');
	if (!strcmp(n, "title"))
		return casemap(r, s, 't');
	if (!strcmp(n, "capitalize"))
		return casemap(r, s, 'c');
	if (!strcmp(n, "replace")) {
		struct jx_val c = jx_arg(a, 2, "count", jx_int(-1));
		return replace(r, s, jx_arg(a, 0, NULL, U), jx_arg(a, 1, NULL, U), ival(r, c, "count"));
	}
	if (!strcmp(n, "find") || !strcmp(n, "rfind") || !strcmp(n, "index") || !strcmp(n, "count")) {
		struct jx_val x = jx_arg(a, 0, NULL, U);
		if (x.t != JX_STR)
			jx_rfail(r, "%s: must be str, not %s", n, jx_type_name(x));
		int64_t found = -1, cnt = 0;
		for (size_t i = 0; i + x.s->n <= s.s->n;) {
			if (memcmp(s.s->p + i, x.s->p, x.s->n) == 0) {
				if (found < 0 || n[0] == 'r')
					found = (int64_t)jx_utf8_len(s.s->p, i);
				cnt++;
				i += x.s->n ? x.s->n : 1;
			} else {
				i++;
			}
		}
		if (!strcmp(n, "count"))
			return jx_int(cnt);
		if (found < 0 && n[0] == 'i')
			jx_rfail(r, "substring not found");
		return jx_int(found);
	}
	if (!strcmp(n, "join"))
		return join(r, jx_arg(a, 0, NULL, U), s, jx_none());
	if (!strcmp(n, "splitlines")) {
		struct jx_list *l = jx_list_new(E, 0);
		size_t st = 0;
		for (size_t i = 0; i < s.s->n; i++) {
			char c = s.s->p[i];
			if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
				jx_list_push(E, l, jx_str(E, s.s->p + st, i - st));
				if (c == '\r' && i + 1 < s.s->n && s.s->p[i + 1] == '\n')
					i++;
				st = i + 1;
			}
		}
		if (st < s.s->n)
			jx_list_push(E, l, jx_str(E, s.s->p + st, s.s->n - st));
		return jx_list_val(l);
	}
	if (!strcmp(n, "isspace")) {
		size_t i = 0, k;
		while (i < s.s->n && (k = space_at(s.s->p, s.s->n, i)) > 0)
			i += k;
		return jx_bool(s.s->n > 0 && i == s.s->n);
	}
	if (!strncmp(n, "is", 2)) {
		bool ok = s.s->n > 0, cased = false;
		for (size_t i = 0; i < s.s->n; i++) {
			unsigned char c = (unsigned char)s.s->p[i];
			if (!strcmp(n, "isdigit"))
				ok &= isdigit(c) != 0;
			else if (!strcmp(n, "isalpha"))
				ok &= isalpha(c) != 0;
			else if (!strcmp(n, "isalnum"))
				ok &= isalnum(c) != 0;
			else if (!strcmp(n, "isupper"))
				ok &= !islower(c), cased |= isupper(c) != 0;
			else
				ok &= !isupper(c), cased |= islower(c) != 0;
		}
		if (!strcmp(n, "isupper") || !strcmp(n, "islower"))
			ok = ok && cased;
		return jx_bool(ok);
	}
	jx_rfail(r, "str.%s() is not supported", n);
}

/* ---- globals ---- */

static const char *const GLOBALS[] = {"range", "namespace", "dict", "raise_exception", "strftime_now", NULL};

int jx_global_index(const char *name)
{
	for (int i = 0; GLOBALS[i]; i++)
		if (!strcmp(GLOBALS[i], name))
			return i;
	return -1;
}

struct jx_val jx_call_global(struct jx_render *r, int fn, const struct jx_args *a)
{
	switch (fn) {
	case 0: { /* range */
		int64_t lo = 0, hi, st = 1;
		if (a->npos == 1)
			hi = ival(r, a->pos[0], "range argument");
		else if (a->npos >= 2) {
			lo = ival(r, a->pos[0], "range argument");
			hi = ival(r, a->pos[1], "range argument");
			if (a->npos >= 3)
				st = ival(r, a->pos[2], "range argument");
		} else
			jx_rfail(r, "range expected at least 1 argument");
		if (st == 0)
			jx_rfail(r, "range() arg 3 must not be zero");
		double cnt = ceil(((double)hi - (double)lo) / (double)st);
		if (cnt > 1000000)
			jx_rfail(r, "range too large (more than 1000000 items)");
		struct jx_list *l = jx_list_new(E, cnt > 0 ? (size_t)cnt : 0);
		for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st)
			jx_list_push(E, l, jx_int(i));
		return jx_list_val(l);
	}
	case 1:
	case 2: { /* namespace(...), dict(...): Python's dict(mapping or pairs, **kw) */
		struct jx_dict *d = jx_dict_new(E);
		d->ns = fn == 1;
		if (a->npos > 1)
			jx_rfail(r, "dict expected at most 1 argument, got %d", a->npos);
		if (a->npos == 1 && a->pos[0].t == JX_DICT && !a->pos[0].d->ns) {
			for (size_t k = 0; k < a->pos[0].d->n; k++)
				jx_dict_set(E, d, a->pos[0].d->k[k], a->pos[0].d->v[k]);
		} else if (a->npos == 1 && a->pos[0].t == JX_LIST) {
			for (size_t k = 0; k < a->pos[0].l->n; k++) {
				struct jx_val e = a->pos[0].l->v[k];
				if (e.t != JX_LIST || e.l->n != 2)
					jx_rfail(
					    r,
					    "dictionary update sequence element #%zu is not a pair",
					    k);
				jx_dict_set(E, d, e.l->v[0], e.l->v[1]);
			}
		} else if (a->npos == 1) {
			jx_rfail(r, "cannot make a dict of %s",
				 a->pos[0].t == JX_UNDEF ? "an undefined value"
							 : jx_type_name(a->pos[0]));
		}
		for (int i = 0; i < a->nkw; i++)
			jx_dict_set(E, d, jx_cstr(E, a->kn[i]), a->kv[i]);
		return jx_dict_val(d);
	}
	case 3: { /* raise_exception */
		struct jx_val m = sval(r, jx_arg(a, 0, NULL, jx_cstr(E, "")));
		jx_rfail(r, "raise_exception: %s", m.s->p);
	}
	case 4: { /* strftime_now(fmt) */
		struct jx_val f = jx_arg(a, 0, "fmt", jx_undef());
		if (f.t != JX_STR || a->npos + a->nkw != 1)
			jx_rfail(r, "strftime_now takes one string, the format");
		struct tm tm = {.tm_year = r->year - 1900, .tm_mon = r->month - 1, .tm_mday = r->day};
		time_t t = timegm(&tm);
		struct tm out;
		gmtime_r(&t, &out);
		char buf[512];
		size_t n = f.s->n ? strftime(buf, sizeof buf, f.s->p, &out) : 0;
		return jx_str(E, buf, n);
	}
	}
	jx_rfail(r, "internal error: unknown global");
}
