/* jinja_lex: the lexer of the Jinja interpreter, following jinja2's lexer.py (3.1) with
 * trim_blocks and lstrip_blocks on and keep_trailing_newline off: the same newline
 * normalisation, whitespace rules ('-', '+', lstrip of a block's line, the newline after a
 * block), raw blocks, and tag-end detection (an end marker only counts outside brackets). */
#include <stdlib.h>
#include <string.h>

#include "text/jinja_int.h"

/* ---- lexer ---- */

/* ASCII characters of Python's \s (str.isspace), which jinja2's lexer rules use */
static bool is_ws(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void push(struct jx_parser *p, struct jx_tok t)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct jx_tok *nt = jx_alloc(p->e, cap * sizeof *nt);
		if (p->n)
			memcpy(nt, p->tk, p->n * sizeof *nt);
		p->tk = nt;
		p->cap = cap;
	}
	p->tk[p->n++] = t;
}

static int count_nl(const char *s, size_t n)
{
	int k = 0;
	for (size_t i = 0; i < n; i++)
		k += s[i] == '\n';
	return k;
}

/* A string literal at s[*i] (the quote); Python escapes. */
static void lex_string(struct jx_parser *p, const char *s, size_t len, size_t *i, int *line)
{
	char q = s[*i];
	size_t j = *i + 1;
	struct strbuf b = {0};
	int start_line = *line;
	for (;;) {
		if (j >= len) {
			free(b.p);
			jx_fail(p->e, start_line, BG_ERR_FORMAT, "unterminated string");
		}
		char c = s[j];
		if (c == q)
			break;
		if (c == '\n')
			(*line)++;
		if (c != '\\' || j + 1 >= len) {
			strbuf_put(&b, &c, 1);
			j++;
			continue;
		}
		char d = s[j + 1];
		j += 2;
		switch (d) {
		case 'n': strbuf_puts(&b, "\n"); break;
		case 't': strbuf_puts(&b, "\t"); break;
		case 'r': strbuf_puts(&b, "\r"); break;
		case 'a': strbuf_puts(&b, "\a"); break;
		case 'b': strbuf_puts(&b, "\b"); break;
		case 'f': strbuf_puts(&b, "\f"); break;
		case 'v': strbuf_puts(&b, "\v"); break;
		case '\\': strbuf_puts(&b, "\\"); break;
		case '\'': strbuf_puts(&b, "'"); break;
		case '"': strbuf_puts(&b, "\""); break;
		case '\n': (*line)++; break;
		case 'x':
		case 'u':
		case 'U': {
			int nd = d == 'x' ? 2 : d == 'u' ? 4 : 8;
			uint32_t c2 = 0;
			int k;
			for (k = 0; k < nd && j + (size_t)k < len; k++) {
				int h = strbuf_hex_digit(s[j + (size_t)k]);
				if (h < 0)
					break;
				c2 = c2 * 16 + (uint32_t)h;
			}
			if (k < nd || c2 > 0x10FFFF) {
				free(b.p);
				jx_fail(p->e, *line, BG_ERR_FORMAT, "bad \\%c escape in a string", d);
			}
			j += (size_t)nd;
			jx_put_utf8(&b, c2);
			break;
		}
		default:
			if (d >= '0' && d <= '7') {
				uint32_t c2 = (uint32_t)(d - '0');
				for (int k = 0; k < 2 && j < len && s[j] >= '0' && s[j] <= '7'; k++)
					c2 = c2 * 8 + (uint32_t)(s[j++] - '0');
				jx_put_utf8(&b, c2);
			} else {
				strbuf_put(&b, "\\", 1);
				strbuf_put(&b, &d, 1);
				if (d == '\n')
					(*line)++;
			}
		}
	}
	*i = j + 1;
	struct jx_val v = jx_strbuf_val(p->e, &b);
	push(p, (struct jx_tok){.t = T_STRING, .line = start_line, .s = v.s->p, .n = v.s->n});
}

static const char *const OPS2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char OPS1[] = "+-*/%~<>=()[]{},.:|";

/* Tokens of one tag starting at s[*i]; stops after the end marker. Returns the index
 * after the tag (and whatever whitespace control consumed). */
static size_t lex_tag(struct jx_parser *p, const char *s, size_t len, size_t i, int *line, bool block,
		      bool *line_starting)
{
	int depth = 0;
	int tag_line = *line;
	for (;;) {
		while (i < len && is_ws(s[i])) {
			if (s[i] == '\n')
				(*line)++;
			i++;
		}
		if (i >= len)
			jx_fail(p->e, tag_line, BG_ERR_FORMAT, "unexpected end of template: %s not closed",
				block ? "'{%'" : "'{{'");
		if (depth == 0) {
			const char *end = block ? "%}" : "}}";
			size_t m = 0;
			char sign = 0;
			if ((s[i] == '-' || (block && s[i] == '+')) && i + 2 < len && memcmp(s + i + 1, end, 2) == 0) {
				sign = s[i];
				m = 3;
			} else if (i + 1 < len && memcmp(s + i, end, 2) == 0) {
				m = 2;
			}
			if (m) {
				push(p, (struct jx_tok){.t = block ? T_BLOCK_END : T_VAR_END, .line = *line});
				i += m;
				*line_starting = false;
				if (sign == '-') {
					while (i < len && is_ws(s[i])) {
						*line_starting = s[i] == '\n';
						if (s[i] == '\n')
							(*line)++;
						i++;
					}
				} else if (block && sign != '+' && i < len && s[i] == '\n') {
					(*line)++;
					i++;
					*line_starting = true;
				}
				return i;
			}
		}
		char c = s[i];
		if (is_name0(c)) {
			size_t j = i;
			while (j < len && (is_name0(s[j]) || is_digit(s[j])))
				j++;
			push(p, (struct jx_tok){.t = T_NAME, .line = *line, .s = jx_strdup(p->e, s + i, j - i), .n = j - i});
			i = j;
		} else if (is_digit(c)) {
			size_t j = i;
			bool fl = false;
			while (j < len && (is_digit(s[j]) || s[j] == '_'))
				j++;
			if (j + 1 < len && s[j] == '.' && is_digit(s[j + 1])) {
				fl = true;
				j++;
				while (j < len && (is_digit(s[j]) || s[j] == '_'))
					j++;
			}
			if (j < len && (s[j] == 'e' || s[j] == 'E')) {
				size_t k = j + 1;
				if (k < len && (s[k] == '+' || s[k] == '-'))
					k++;
				if (k < len && is_digit(s[k])) {
					fl = true;
					j = k;
					while (j < len && is_digit(s[j]))
						j++;
				}
			}
			char buf[64];
			size_t n = 0;
			for (size_t k = i; k < j && n < sizeof buf - 1; k++)
				if (s[k] != '_')
					buf[n++] = s[k];
			buf[n] = 0;
			struct jx_tok t = {.t = fl ? T_FLOAT : T_INT, .line = *line};
			if (fl) {
				t.f = strtod(buf, NULL);
			} else {
				char *endp;
				unsigned long long u = strtoull(buf, &endp, 10);
				if (u > INT64_MAX)
					jx_fail(p->e, *line, BG_ERR_UNSUPPORTED, "integer literal too large");
				t.i = (int64_t)u;
			}
			push(p, t);
			i = j;
		} else if (c == '\'' || c == '"') {
			lex_string(p, s, len, &i, line);
		} else {
			size_t m = 0;
			for (size_t k = 0; k < sizeof OPS2 / sizeof *OPS2; k++)
				if (i + 1 < len && memcmp(s + i, OPS2[k], 2) == 0)
					m = 2;
			if (!m && strchr(OPS1, c) && c)
				m = 1;
			if (!m)
				jx_fail(p->e, *line, BG_ERR_FORMAT, "unexpected character '%c'", c);
			if (c == '(' || c == '[' || c == '{')
				depth++;
			else if ((c == ')' || c == ']' || c == '}') && depth > 0)
				depth--;
			push(p, (struct jx_tok){.t = T_OP, .line = *line, .s = jx_strdup(p->e, s + i, m), .n = m});
			i += m;
		}
	}
}

void jx_lex(struct jx_parser *p, const char *src, size_t srclen)
{
	/* jinja2 joins the lines of the source with "\n" (\r\n and \r are newlines) and, with
	 * keep_trailing_newline off, drops one final newline. */
	char *s = jx_alloc(p->e, srclen + 1);
	size_t len = 0;
	for (size_t i = 0; i < srclen; i++) {
		if (src[i] == '\r') {
			s[len++] = '\n';
			if (i + 1 < srclen && src[i + 1] == '\n')
				i++;
		} else {
			s[len++] = src[i];
		}
	}
	if (len && s[len - 1] == '\n')
		len--;
	s[len] = 0;

	size_t i = 0;
	int line = 1;
	bool line_starting = true;
	while (i < len) {
		size_t q = i;
		int kind = 0; /* '{', '%', '#' */
		while (q + 1 < len) {
			if (s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')) {
				kind = s[q + 1];
				break;
			}
			q++;
		}
		if (!kind)
			q = len;
		size_t tn = q - i;
		char sign = kind && q + 2 < len && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
		if (sign == '-') {
			while (tn > 0 && is_ws(s[i + tn - 1]))
				tn--;
		} else if (kind && kind != '{' && sign != '+') {
			size_t l = tn;
			while (l > 0 && s[i + l - 1] != '\n')
				l--;
			bool nl = l > 0;
			bool all_ws = l < tn;
			for (size_t k = l; k < tn; k++)
				if (!is_ws(s[i + k]))
					all_ws = false;
			if ((nl || line_starting) && all_ws)
				tn = l;
		}
		if (tn)
			push(p, (struct jx_tok){.t = T_DATA, .line = line, .s = jx_strdup(p->e, s + i, tn), .n = tn});
		line += count_nl(s + i, q - i);
		if (!kind)
			break;
		size_t j = q + 2 + (sign ? 1 : 0);
		if (kind == '#') {
			const char *e = NULL;
			for (size_t k = q + 2; k + 1 < len; k++)
				if (s[k] == '#' && s[k + 1] == '}') {
					e = s + k;
					break;
				}
			if (!e)
				jx_fail(p->e, line, BG_ERR_FORMAT, "unexpected end of template: comment not closed");
			size_t k = (size_t)(e - s);
			line += count_nl(s + q, k - q);
			/* the sign of -#} (not the begin sign's own '-': {#-#}) */
			char esign = k > j && (s[k - 1] == '-' || s[k - 1] == '+') ? s[k - 1] : 0;
			i = k + 2;
			line_starting = false;
			if (esign == '-') {
				while (i < len && is_ws(s[i])) {
					line_starting = s[i] == '\n';
					line += s[i] == '\n';
					i++;
				}
			} else if (esign != '+' && i < len && s[i] == '\n') {
				i++;
				line++;
				line_starting = true;
			}
			continue;
		}
		bool block = kind == '%';
		/* {% raw %} ... {% endraw %}: the body is data */
		if (block) {
			size_t k = j;
			while (k < len && is_ws(s[k]))
				k++;
			if (len - k >= 3 && memcmp(s + k, "raw", 3) == 0 && (k + 3 >= len || !is_name0(s[k + 3]))) {
				size_t m = k + 3;
				while (m < len && is_ws(s[m]))
					m++;
				char rs = m < len && s[m] == '-' ? '-' : 0;
				if (rs)
					m++;
				if (m + 1 < len && s[m] == '%' && s[m + 1] == '}') {
					m += 2;
					/* no trim_blocks here: jinja2's raw_begin rule has no block
					 * suffix */
					size_t body = m;
					if (rs == '-')
						while (m < len && is_ws(s[m]))
							m++;
					/* the first {% endraw %} ({%-/{%+, -%}/+%}) after the tag
					 */
					size_t b = m, close_at = 0;
					char bs = 0;
					for (; b + 1 < len; b++) {
						if (s[b] != '{' || s[b + 1] != '%')
							continue;
						size_t k2 = b + 2;
						bs = k2 < len && (s[k2] == '-' || s[k2] == '+')
							 ? s[k2++]
							 : 0;
						while (k2 < len && is_ws(s[k2]))
							k2++;
						if (len - k2 < 6 ||
						    memcmp(s + k2, "endraw", 6) != 0)
							continue;
						k2 += 6;
						while (k2 < len && is_ws(s[k2]))
							k2++;
						if (k2 < len && (s[k2] == '-' || s[k2] == '+'))
							k2++;
						if (k2 + 1 < len && s[k2] == '%' &&
						    s[k2 + 1] == '}') {
							close_at = k2;
							break;
						}
					}
					if (!close_at)
						jx_fail(p->e, line, BG_ERR_FORMAT, "missing endraw");
					size_t dn = b - m;
					if (bs == '-') {
						while (dn > 0 && is_ws(s[m + dn - 1]))
							dn--;
					} else if (bs != '+') { /* lstrip_blocks, as before any
								   block tag */
						size_t l = dn;
						while (l > 0 && s[m + l - 1] != '\n')
							l--;
						bool all_ws = true;
						for (size_t k2 = l; k2 < dn; k2++)
							all_ws &= is_ws(s[m + k2]);
						/* jinja2's line_starting: the raw tag's match ended
						 * a line */
						bool ls = m > body && s[m - 1] == '\n';
						if ((l > 0 || ls) && all_ws)
							dn = l;
					}
					if (dn)
						push(p, (struct jx_tok){.t = T_DATA, .line = line, .s = jx_strdup(p->e, s + m, dn), .n = dn});
					const char *close = s + close_at;
					line += count_nl(s + q, (size_t)(close - s) - q);
					i = (size_t)(close - s) + 2;
					line_starting = false;
					if (close > s && close[-1] == '-') {
						while (i < len && is_ws(s[i]))
							line += s[i++] == '\n';
					} else if (close[-1] != '+' && i < len && s[i] == '\n') {
						i++;
						line++;
						line_starting = true;
					}
					continue;
				}
			}
		}
		push(p, (struct jx_tok){.t = block ? T_BLOCK_BEGIN : T_VAR_BEGIN, .line = line});
		i = lex_tag(p, s, len, j, &line, block, &line_starting);
	}
	push(p, (struct jx_tok){.t = T_EOF, .line = line});
}

