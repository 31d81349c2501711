/* strbuf: a growable NUL-terminated byte buffer for building text (JSON lines, rendered
 * chat prompts).
 *
 * Appends never fail loudly: on an allocation failure the buffer sets oom, ignores every
 * later append, and keeps what it had; the caller checks oom once at the end. The content
 * is always NUL-terminated once anything was appended. Start from `struct strbuf b = {0};`
 * and free(b.p) when done (or take b.p).
 */
#ifndef BG_STRBUF_H
#define BG_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
	char *p; /* [cap] bytes, p[len] == 0 */
	size_t len;
	size_t cap;
	bool oom;
};

void strbuf_put(struct strbuf *b, const void *s, size_t n); /* appends n bytes (may be NUL) */
void strbuf_puts(struct strbuf *b, const char *s);
void strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends an ASCII byte c (< 0x80) as it stands inside a JSON string: the escapes JSON
 * names (\" \\ \n \r \t \b \f), \u00XX for the other control bytes, else c itself. */
void strbuf_json_ascii(struct strbuf *b, unsigned char c);
/* The value of the hex digit c (0-9, a-f, A-F), or -1 for any other byte. Here, in the base
 * text module, because the escape readers of the grammar, regex and template parsers
 * (\xHH, \uHHHH) sit in rooms that cannot include one another. */
int strbuf_hex_digit(char c);
/* Length of the valid UTF-8 sequence at s[0, n) (n >= 1), or 0 when it is not one: overlong
 * forms, surrogates and code points above U+10FFFF are invalid. *valid_prefix gets the
 * number of bytes that form a valid prefix of some sequence (>= 1), so that a writer can
 * replace a maximal invalid subpart with one U+FFFD, as Unicode recommends. */
size_t strbuf_utf8_seq(const unsigned char *s, size_t n, size_t *valid_prefix);
/* True when s[0, n) is valid UTF-8 in the sense of strbuf_utf8_seq. */
bool strbuf_utf8_valid(const char *s, size_t n);

#endif
