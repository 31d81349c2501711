#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes and the NUL; false (and oom set) when it cannot. */
static bool strbuf_reserve(struct strbuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->len + n + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void strbuf_put(struct strbuf *b, const void *s, size_t n)
{
	if (!strbuf_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void strbuf_puts(struct strbuf *b, const char *s)
{
	strbuf_put(b, s, strlen(s));
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !strbuf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

int strbuf_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void strbuf_json_ascii(struct strbuf *b, unsigned char c)
{
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
}

size_t strbuf_utf8_seq(const unsigned char *s, size_t n, size_t *valid_prefix)
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

bool strbuf_utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t prefix;
	for (size_t i = 0; i < n;) {
		size_t k = strbuf_utf8_seq(u + i, n - i, &prefix);
		if (!k)
			return false;
		i += k;
	}
	return true;
}
