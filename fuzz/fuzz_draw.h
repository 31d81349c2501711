/* fuzz_draw: a character vocabulary and a walk through grammar masks that draws a string
 * of a grammar's language, the choices taken from the fuzzer's bytes (fuzz_regex,
 * fuzz_schema).
 *
 * The vocabulary: the 95 printable ASCII characters, \t \n \v \f \r, a two-byte, a
 * three-byte and a four-byte character, and one end-of-generation token (the last id).
 * A walk is at most max_chars steps; at each, the mask gives the allowed tokens and one
 * input byte picks among them (end of generation is picked when it is allowed and the
 * byte is below a threshold that grows with the length, or when nothing else is
 * allowed). It returns the drawn text only when the walk ended by end of generation.
 */
#ifndef BG_FUZZ_DRAW_H
#define BG_FUZZ_DRAW_H

#include "fuzz/fuzz_util.h"
#include "sample/grammar.h"
#include "strbuf.h"

#define FD_MAX 128
static const char *fd_piece[FD_MAX];
static uint32_t fd_len[FD_MAX];
static int32_t fd_n, fd_eog;

static inline struct grammar_vocab *fuzz_draw_vocab(void)
{
	static char bytes[128];
	static const char *const wide[] = {"\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80"};
	static const char ctl[] = "\t\n\v\f\r";
	bool eog[FD_MAX] = {0};
	int32_t n = 0;
	for (int c = 0x20; c < 0x7f; c++) {
		bytes[c] = (char)c;
		fd_piece[n] = &bytes[c];
		fd_len[n++] = 1;
	}
	for (const char *c = ctl; *c; c++) {
		bytes[(int)*c] = *c;
		fd_piece[n] = &bytes[(int)*c];
		fd_len[n++] = 1;
	}
	for (int i = 0; i < 3; i++) {
		fd_piece[n] = wide[i];
		fd_len[n++] = (uint32_t)strlen(wide[i]);
	}
	fd_piece[n] = "</s>";
	fd_len[n] = 4;
	eog[n] = true;
	fd_eog = n++;
	fd_n = n;
	struct grammar_vocab *v = NULL;
	struct bg_err err = {0};
	FUZZ_CHECK(grammar_vocab_create(n, fd_piece, fd_len, eog, &v, &err) == BG_OK, "vocab: %s",
		   err.msg);
	return v;
}

/* One string of g's language into *out (malloc'd, NUL-terminated, length *out_len), the
 * choices from in. False when the walk did not end (too long, a dead end, the step
 * budget). */
static inline bool fuzz_draw(const struct grammar *g, const struct grammar_vocab *v,
			     struct grammar_scratch *s, struct fuzz_in *in, int max_chars,
			     char **out, size_t *out_len)
{
	*out = NULL;
	struct grammar_state *st = NULL;
	if (grammar_state_create(g, s, &st, NULL) != BG_OK)
		return false;
	struct strbuf b = {0};
	bool done = false;
	for (int step = 0; step <= max_chars && !done; step++) {
		uint32_t mask[FD_MAX / 32];
		if (grammar_state_mask(st, v, s, mask, NULL) != BG_OK)
			break;
		int32_t ids[FD_MAX], k = 0;
		bool eog_ok = mask[fd_eog / 32] >> (fd_eog % 32) & 1;
		for (int32_t i = 0; i < fd_n; i++)
			if (i != fd_eog && (mask[i / 32] >> (i % 32) & 1))
				ids[k++] = i;
		uint8_t r = fuzz_byte(in);
		int32_t pick;
		if (eog_ok && (k == 0 || step == max_chars || r < 16 + step * 8))
			pick = fd_eog;
		else if (k > 0 && step < max_chars)
			pick = ids[r % k];
		else
			break;
		FUZZ_CHECK(grammar_state_accept_token(st, v, pick, s, NULL) == BG_OK,
			   "a token the mask allows (%d) is refused", pick);
		if (pick == fd_eog)
			done = true;
		else
			strbuf_put(&b, fd_piece[pick], fd_len[pick]);
	}
	grammar_state_free(st);
	FUZZ_CHECK(!b.oom, "out of memory");
	if (!done) {
		free(b.p);
		return false;
	}
	*out_len = b.len;
	*out = b.p ? b.p : strdup("");
	return true;
}

#endif
