/* regex: regex and choice -> GBNF (see regex.h).
 *
 * A recursive-descent parser writes the GBNF expression as it reads: alternation becomes
 * ( a | b ), a quantified atom ( atom ){m,n}, a class a GBNF class over code-point
 * ranges. Every character is written as an escape (\xHH, \uHHHH, \UHHHHHHHH) unless it
 * is a letter or digit, so no pattern character can change the GBNF's syntax.
 */
#include "sample/regex.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

struct rx {
	const char *src, *p, *end;
	bool json;
	int depth;
	bool nullable; /* the last atom, sequence or alternation parsed matches "" */
	bool failed;
	struct bg_err *err;
	struct strbuf out;
};

__attribute__((format(printf, 3, 4))) static bool rx_fail(struct rx *r, enum bg_status st,
							 const char *fmt, ...)
{
	if (r->failed)
		return false;
	r->failed = true;
	char pre[64];
	snprintf(pre, sizeof pre, "regex: at offset %zu: ", (size_t)(r->p - r->src));
	va_list ap;
	va_start(ap, fmt);
	bg_failv(r->err, st, pre, fmt, ap);
	va_end(ap);
	return false;
}

static void put_cp(struct strbuf *b, uint32_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		strbuf_printf(b, "%c", (char)c);
	else if (c <= 0xFF)
		strbuf_printf(b, "\\x%02X", c);
	else if (c <= 0xFFFF)
		strbuf_printf(b, "\\u%04X", c);
	else
		strbuf_printf(b, "\\U%08X", c);
}

/* One UTF-8 character of the pattern; false on invalid UTF-8. */
static bool next_cp(struct rx *r, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)r->p;
	size_t left = (size_t)(r->end - r->p);
	int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
	if (n == 0 || (size_t)n > left)
		return rx_fail(r, BG_ERR_FORMAT, "invalid UTF-8");
	uint32_t v = n == 1 ? s[0] : s[0] & (0x7F >> n);
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return rx_fail(r, BG_ERR_FORMAT, "invalid UTF-8");
		v = (v << 6) | (s[i] & 0x3F);
	}
	r->p += n;
	*cp = v;
	return true;
}

/* ---- classes as sorted range lists ---- */

#define RX_MAX_RANGES 512
struct cls {
	uint32_t lo[RX_MAX_RANGES], hi[RX_MAX_RANGES];
	int n;
	bool neg;
};

static bool cls_add(struct rx *r, struct cls *c, uint32_t lo, uint32_t hi)
{
	if (c->n >= RX_MAX_RANGES)
		return rx_fail(r, BG_ERR_CAPACITY, "a class with more than %d ranges", RX_MAX_RANGES);
	c->lo[c->n] = lo;
	c->hi[c->n] = hi;
	c->n++;
	return true;
}

/* The characters a JSON string never holds raw: control characters, '"', '\', DEL. */
static bool json_special(uint32_t c)
{
	return c < 0x20 || c == '"' || c == '\\' || c == 0x7F;
}

/* Writes a class; in JSON mode special characters are removed from positive classes
 * (with '"' and '\' added back as their escapes) and added to negated ones. */
static void put_class(struct rx *r, const struct cls *c)
{
	struct strbuf *b = &r->out;
	bool quote = false, bslash = false;
	strbuf_puts(b, r->json ? "(" : "");
	strbuf_puts(b, c->neg ? "[^" : "[");
	int written = 0;
	for (int i = 0; i < c->n; i++) {
		uint32_t lo = c->lo[i], hi = c->hi[i];
		if (r->json && !c->neg) {
			/* split around the specials */
			uint32_t a = lo;
			for (uint32_t x = lo; x <= hi && x <= 0x7F; x++)
				if (json_special(x)) {
					quote = quote || x == '"';
					bslash = bslash || x == '\\';
					if (a < x) {
						put_cp(b, a);
						if (x - 1 > a) {
							strbuf_puts(b, "-");
							put_cp(b, x - 1);
						}
						written++;
					}
					a = x + 1;
				}
			if (a > hi)
				continue;
			lo = a;
		}
		put_cp(b, lo);
		if (hi > lo) {
			strbuf_puts(b, "-");
			put_cp(b, hi);
		}
		written++;
	}
	if (r->json && c->neg) {
		strbuf_puts(b, "\"\\\\\\x7F\\x00-\\x1F");
		written++;
	}
	if (!written && !c->neg) {
		/* nothing left of a positive class: a class that matches nothing */
		strbuf_puts(b, "^\\x00-\\U0010FFFF");
	}
	strbuf_puts(b, "]");
	if (r->json) {
		if (quote)
			strbuf_puts(b, " | \"\\\\\\\"\"");
		if (bslash)
			strbuf_puts(b, " | \"\\\\\\\\\"");
		strbuf_puts(b, ")");
	}
}

/* \d \w \s (and their negations, neg set) into a class; false if e is not one. */
static bool shorthand(struct rx *r, char e, struct cls *c, bool *neg)
{
	char l = e >= 'A' && e <= 'Z' ? (char)(e - 'A' + 'a') : e;
	if (l != 'd' && l != 'w' && l != 's')
		return false;
	*neg = e != l;
	if (l == 'd') {
		cls_add(r, c, '0', '9');
	} else if (l == 'w') {
		cls_add(r, c, '0', '9');
		cls_add(r, c, 'A', 'Z');
		cls_add(r, c, '_', '_');
		cls_add(r, c, 'a', 'z');
	} else {
		cls_add(r, c, ' ', ' ');
		cls_add(r, c, '\t', '\r'); /* \t \n \v \f \r */
	}
	return true;
}

static bool hexval(struct rx *r, int n, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (r->p >= r->end)
			return rx_fail(r, BG_ERR_FORMAT, "expecting %d hex digits", n);
		int d = strbuf_hex_digit(*r->p++);
		if (d < 0)
			return rx_fail(r, BG_ERR_FORMAT, "expecting %d hex digits", n);
		*v = (*v << 4) | (uint32_t)d;
	}
	return true;
}

/* A single-character escape after '\' (r->p at the letter): its code point. */
static bool escape_char(struct rx *r, uint32_t *cp)
{
	char e = *r->p++;
	switch (e) {
	case 't': *cp = '\t'; return true;
	case 'n': *cp = '\n'; return true;
	case 'r': *cp = '\r'; return true;
	case 'f': *cp = '\f'; return true;
	case 'v': *cp = '\v'; return true;
	case '0':
		/* \0 then a digit: an octal escape in PCRE and Python (\00 is NUL), an error in
		 * ECMAScript's unicode mode; NUL then the digit, as it was read here, is a third
		 * meaning (found by fuzz_regex against PCRE2) */
		if (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
			r->p--;
			return rx_fail(r, BG_ERR_UNSUPPORTED, "\\0 followed by a digit is not supported");
		}
		*cp = 0;
		return true;
	case 'x': return hexval(r, 2, cp);
	case 'u': return hexval(r, 4, cp);
	default: break;
	}
	if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
		r->p--;
		return rx_fail(r, BG_ERR_UNSUPPORTED, "the escape \\%c is not supported", e);
	}
	*cp = (uint8_t)e;
	return true;
}

static bool parse_class(struct rx *r)
{
	struct cls c = {0};
	r->p++; /* [ */
	if (r->p < r->end && *r->p == '^') {
		c.neg = true;
		r->p++;
	}
	bool first = true;
	for (;;) {
		if (r->p >= r->end)
			return rx_fail(r, BG_ERR_FORMAT, "unterminated class");
		if (*r->p == ']' && !first)
			break;
		first = false;
		uint32_t lo;
		if (*r->p == '\\') {
			r->p++;
			if (r->p >= r->end)
				return rx_fail(r, BG_ERR_FORMAT, "a pattern ending in \\");
			bool neg;
			if (shorthand(r, *r->p, &c, &neg)) {
				if (neg)
					return rx_fail(r, BG_ERR_UNSUPPORTED,
						       "\\D \\W \\S inside a class");
				r->p++;
				continue;
			}
			if (!escape_char(r, &lo))
				return false;
		} else if (!next_cp(r, &lo)) {
			return false;
		}
		uint32_t hi = lo;
		if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
			r->p++;
			if (*r->p == '\\') {
				r->p++;
				if (r->p >= r->end || !escape_char(r, &hi))
					return rx_fail(r, BG_ERR_FORMAT, "a bad range end");
			} else if (!next_cp(r, &hi)) {
				return false;
			}
			if (hi < lo)
				return rx_fail(r, BG_ERR_FORMAT, "a range out of order");
		}
		if (!cls_add(r, &c, lo, hi))
			return false;
	}
	r->p++; /* ] */
	put_class(r, &c);
	return true;
}

static void put_literal_cp(struct rx *r, uint32_t cp)
{
	if (r->json && json_special(cp)) {
		static const char *const esc_ctl = "btnvfr";
		if (cp == '"')
			strbuf_puts(&r->out, "\"\\\\\\\"\"");
		else if (cp == '\\')
			strbuf_puts(&r->out, "\"\\\\\\\\\"");
		else if (cp >= 8 && cp <= 13 && cp != 11)
			strbuf_printf(&r->out, "\"\\\\%c\"", esc_ctl[cp - 8]);
		else
			strbuf_printf(&r->out, "\"\\\\u%04X\"", cp);
		return;
	}
	strbuf_puts(&r->out, "\"");
	put_cp(&r->out, cp);
	strbuf_puts(&r->out, "\"");
}

static bool parse_alt(struct rx *r);

static bool parse_atom(struct rx *r)
{
	char c = *r->p;
	if (c == '(') {
		if (r->depth >= REGEX_MAX_DEPTH)
			return rx_fail(r, BG_ERR_CAPACITY, "groups nest deeper than %d", REGEX_MAX_DEPTH);
		r->p++;
		if (r->p < r->end && *r->p == '?') {
			if (r->p + 1 < r->end && r->p[1] == ':')
				r->p += 2;
			else
				return rx_fail(r, BG_ERR_UNSUPPORTED,
					       "(? groups other than (?: are not supported");
		}
		r->depth++;
		strbuf_puts(&r->out, "(");
		if (!parse_alt(r)) /* sets r->nullable */
			return false;
		strbuf_puts(&r->out, ")");
		r->depth--;
		if (r->p >= r->end || *r->p != ')')
			return rx_fail(r, BG_ERR_FORMAT, "expecting )");
		r->p++;
		return true;
	}
	r->nullable = false;
	if (c == '[')
		return parse_class(r);
	if (c == '.') {
		r->p++;
		strbuf_puts(&r->out, r->json ? "[^\"\\\\\\x7F\\x00-\\x1F]" : "[^\\x0A]");
		return true;
	}
	if (c == '\\') {
		r->p++;
		if (r->p >= r->end)
			return rx_fail(r, BG_ERR_FORMAT, "a pattern ending in \\");
		struct cls cl = {0};
		bool neg;
		if (shorthand(r, *r->p, &cl, &neg)) {
			r->p++;
			cl.neg = neg;
			put_class(r, &cl);
			return true;
		}
		uint32_t cp;
		if (!escape_char(r, &cp))
			return false;
		put_literal_cp(r, cp);
		return true;
	}
	if (c == '^' || c == '$')
		return rx_fail(r, BG_ERR_UNSUPPORTED, "anchors are supported only at the ends");
	if (c == '*' || c == '+' || c == '?' || c == '{')
		return rx_fail(r, BG_ERR_FORMAT, "nothing to repeat");
	uint32_t cp;
	if (!next_cp(r, &cp))
		return false;
	put_literal_cp(r, cp);
	return true;
}

static bool parse_int(struct rx *r, int *v)
{
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return rx_fail(r, BG_ERR_FORMAT, "expecting a number");
	long x = 0;
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
		if (x < 100000)
			x = x * 10 + (*r->p - '0');
		r->p++;
	}
	*v = (int)x;
	return true;
}

static bool parse_seq(struct rx *r)
{
	bool any = false, all_nullable = true;
	while (r->p < r->end && *r->p != '|' && *r->p != ')') {
		if (*r->p == '$' && r->p + 1 == r->end && r->depth == 0) {
			r->p++;
			break;
		}
		if (any)
			strbuf_puts(&r->out, " ");
		strbuf_puts(&r->out, "(");
		if (!parse_atom(r))
			return false;
		strbuf_puts(&r->out, ")");
		any = true;
		if (r->p >= r->end)
			break;
		char q = *r->p;
		int mn = -1, mx = -1;
		if (q == '*') {
			mn = 0;
		} else if (q == '+') {
			mn = 1;
		} else if (q == '?') {
			mn = 0;
			mx = 1;
		} else if (q == '{') {
			r->p++;
			if (!parse_int(r, &mn))
				return false;
			if (r->p < r->end && *r->p == '}') {
				mx = mn;
			} else if (r->p < r->end && *r->p == ',') {
				r->p++;
				if (r->p < r->end && *r->p != '}' && !parse_int(r, &mx))
					return false;
			}
			if (r->p >= r->end || *r->p != '}')
				return rx_fail(r, BG_ERR_FORMAT, "expecting }");
			if (mn > 2000 || mx > 2000)
				return rx_fail(r, BG_ERR_UNSUPPORTED, "more than 2000 repetitions");
			if (mx >= 0 && mx < mn)
				return rx_fail(r, BG_ERR_FORMAT, "a repetition range out of order");
		}
		all_nullable = all_nullable && (r->nullable || mn == 0);
		if (mn < 0)
			continue;
		/* X{m,} of an X that matches "" is left-recursive in GBNF (the grammar refuses
		 * it, as llama.cpp's does): refused here with a hint */
		if (mx < 0 && r->nullable)
			return rx_fail(r, BG_ERR_UNSUPPORTED,
				       "an unbounded repetition of something that can match the empty "
				       "string (as in (a*)*); repeat its non-empty part");
		r->p++;
		if (r->p < r->end && *r->p == '+')
			return rx_fail(r, BG_ERR_UNSUPPORTED, "possessive quantifiers");
		if (r->p < r->end && *r->p == '?')
			r->p++; /* lazy: the same language */
		if (mx < 0)
			strbuf_printf(&r->out, "{%d,}", mn);
		else
			strbuf_printf(&r->out, "{%d,%d}", mn, mx);
		if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{'))
			return rx_fail(r, BG_ERR_FORMAT, "a quantifier after a quantifier");
	}
	if (!any)
		strbuf_puts(&r->out, "\"\"");
	r->nullable = all_nullable;
	return true;
}

static bool parse_alt(struct rx *r)
{
	if (!parse_seq(r))
		return false;
	bool nullable = r->nullable;
	while (r->p < r->end && *r->p == '|') {
		r->p++;
		strbuf_puts(&r->out, " | ");
		if (!parse_seq(r))
			return false;
		nullable = nullable || r->nullable;
	}
	r->nullable = nullable;
	return true;
}

enum bg_status regex_to_gbnf_expr(const char *pattern, bool json_string, char **expr,
				  struct bg_err *err)
{
	*expr = NULL;
	size_t len = strlen(pattern);
	if (len > REGEX_MAX_LEN)
		return bg_fail(err, BG_ERR_CAPACITY, "regex: longer than %d bytes", REGEX_MAX_LEN);
	struct rx r = {.src = pattern, .p = pattern, .end = pattern + len, .json = json_string, .err = err};
	if (r.p < r.end && *r.p == '^')
		r.p++;
	strbuf_puts(&r.out, "(");
	bool ok = parse_alt(&r);
	if (ok && r.p < r.end)
		ok = rx_fail(&r, BG_ERR_FORMAT, "unbalanced )");
	strbuf_puts(&r.out, ")");
	if (ok && r.out.oom)
		ok = rx_fail(&r, BG_ERR_NOMEM, "out of memory");
	if (!ok) {
		free(r.out.p);
		return err && err->status ? err->status : BG_ERR_FORMAT;
	}
	*expr = r.out.p;
	return BG_OK;
}

enum bg_status regex_to_gbnf(const char *pattern, char **gbnf, struct bg_err *err)
{
	*gbnf = NULL;
	char *e = NULL;
	enum bg_status st = regex_to_gbnf_expr(pattern, false, &e, err);
	if (st != BG_OK)
		return st;
	struct strbuf b = {0};
	strbuf_printf(&b, "root ::= %s\n", e);
	free(e);
	if (b.oom) {
		free(b.p);
		return bg_fail(err, BG_ERR_NOMEM, "regex: out of memory");
	}
	*gbnf = b.p;
	return BG_OK;
}

enum bg_status choice_to_gbnf(const char *const *choice, size_t n, char **gbnf, struct bg_err *err)
{
	*gbnf = NULL;
	if (n == 0)
		return bg_fail(err, BG_ERR_INVALID, "choice: the list is empty");
	struct strbuf b = {0};
	strbuf_puts(&b, "root ::= ");
	for (size_t i = 0; i < n; i++) {
		strbuf_puts(&b, i ? " | \"" : "\"");
		const unsigned char *s = (const unsigned char *)choice[i];
		for (; *s; s++) {
			/* bytes as \xHH would be code points: write UTF-8 text as is, escaping
			 * only what the literal syntax needs */
			if (*s == '"' || *s == '\\')
				strbuf_printf(&b, "\\%c", *s);
			else if (*s < 0x20 || *s == 0x7F)
				strbuf_printf(&b, "\\x%02X", *s);
			else
				strbuf_put(&b, s, 1);
		}
		strbuf_puts(&b, "\"");
	}
	strbuf_puts(&b, "\n");
	if (b.oom) {
		free(b.p);
		return bg_fail(err, BG_ERR_NOMEM, "choice: out of memory");
	}
	*gbnf = b.p;
	return BG_OK;
}
