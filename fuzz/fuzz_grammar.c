/* fuzz_grammar: GBNF grammars (core/sample/grammar.c) and the matcher that masks tokens.
 * Input: a grammar text, a 0xff byte, a candidate string. The vocabulary is fixed: the 95
 * printable ASCII bytes, newline and tab, some multi-byte pieces (words, JSON
 * punctuation, a two-byte character, its first byte alone, a piece with a NUL) and one
 * end-of-generation token.
 * Oracles:
 *  - parsing gives a grammar or an error with a message, within the time limit;
 *  - feeding a valid UTF-8 candidate one byte at a time agrees with feeding it whole
 *    (same acceptance, same "in the language" at the end), unless a step reports
 *    BG_ERR_CAPACITY (the documented per-step budget); the candidate ends at a NUL, as a
 *    piece does;
 *  - the mask agrees with accepting: at the start and after the first byte, every
 *    token the mask allows is accepted by a clone of the state, and every token it
 *    refuses is refused; the end-of-generation token is allowed iff the state accepts
 *    (at the start and after the first byte: each check costs ~110 steps).
 */
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "sample/grammar.h"

#define N_EXTRA 12
static struct grammar_vocab *voc;
static int32_t n_voc;
static struct grammar_scratch *scr;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	static const char *const extra[N_EXTRA] = {"true", "false", "null", "{\"", "\":", "\",",
						   "  ",   "ab",    "\xc3\xa9", "\xc3", "a\0b", ""};
	static const uint32_t extra_len[N_EXTRA] = {4, 5, 4, 2, 2, 2, 2, 2, 2, 1, 3, 0};
	const char *piece[128];
	uint32_t len[128];
	bool eog[128] = {0};
	static char bytes[128];
	int32_t n = 0;
	for (int c = 0x20; c < 0x7f; c++) {
		bytes[c] = (char)c;
		piece[n] = &bytes[c];
		len[n++] = 1;
	}
	bytes['\n'] = '\n';
	bytes['\t'] = '\t';
	piece[n] = &bytes['\n'];
	len[n++] = 1;
	piece[n] = &bytes['\t'];
	len[n++] = 1;
	for (int i = 0; i < N_EXTRA; i++) {
		piece[n] = extra[i];
		len[n++] = extra_len[i];
	}
	piece[n] = "</s>";
	len[n] = 4;
	eog[n++] = true;
	struct bg_err err = {0};
	FUZZ_CHECK(grammar_vocab_create(n, piece, len, eog, &voc, &err) == BG_OK, "vocab: %s",
		   err.msg);
	n_voc = n;
	scr = grammar_scratch_create();
	FUZZ_CHECK(scr, "scratch");
	/* 2^20 operations a step, not GRAMMAR_STEP_OPS (2^24): above the most a real mask
	 * takes (552,394 on 128k-token vocabularies, bench/grammar_mask), so what lies
	 * beyond it is the capacity path, reached 16 times sooner. On campaign 5's corpus
	 * (3.7 % of its inputs, ambiguous repetitions like `("ab" | [^a])*{88,2000}`, took
	 * 98 % of the time) the harness runs ~11 times as many inputs a second. */
	grammar_scratch_set_step_ops(scr, 1u << 20);
	return 0;
}

/* The mask of st agrees with accepting each token on a clone. False: a capacity error. */
static bool mask_agrees(const struct grammar_state *st)
{
	uint32_t mask[(128 + 31) / 32];
	struct bg_err err = {0};
	enum bg_status ms = grammar_state_mask(st, voc, scr, mask, &err);
	if (ms == BG_ERR_CAPACITY)
		return false;
	FUZZ_CHECK(ms == BG_OK, "mask: %s", err.msg);
	for (int32_t id = 0; id < n_voc; id++) {
		bool allowed = mask[id / 32] >> (id % 32) & 1;
		struct grammar_state *c = grammar_state_clone(st);
		FUZZ_CHECK(c, "clone");
		enum bg_status as = grammar_state_accept_token(c, voc, id, scr, &err);
		grammar_state_free(c);
		if (as == BG_ERR_CAPACITY)
			return false;
		FUZZ_CHECK(allowed == (as == BG_OK), "token %d: mask says %d, accepting gives %d (%s)",
			   id, allowed, (int)as, err.msg);
		if (id == n_voc - 1)
			FUZZ_CHECK(allowed == grammar_state_accepts(st),
				   "end of generation allowed %d, state accepts %d", allowed,
				   grammar_state_accepts(st));
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	const char *text, *cand;
	size_t tl = fuzz_piece(&in, &text, 8192);
	/* A step may cost up to the budget, and one mask check is ~110 steps: a short
	 * candidate, masks at two places. */
	size_t cl = fuzz_piece(&in, &cand, 16);
	const char *nul = memchr(cand, 0, cl); /* a piece ends at a NUL byte (grammar.h) */
	if (nul)
		cl = (size_t)(nul - cand);
	struct grammar *g = NULL;
	struct bg_err err = {0};
	if (grammar_parse(text, tl, NULL, &g, &err) != BG_OK) {
		FUZZ_CHECK(g == NULL && err.msg[0], "a refused grammar without a message");
		return 0;
	}
	struct grammar_state *whole = NULL, *step = NULL;
	if (grammar_state_create(g, scr, &whole, &err) != BG_OK) {
		grammar_free(g);
		return 0;
	}
	step = grammar_state_clone(whole);
	FUZZ_CHECK(step, "clone");
	bool budget = mask_agrees(step);
	enum bg_status ws = grammar_state_accept_bytes(whole, cand, cl, scr, &err);
	bool step_ok = true;
	for (size_t i = 0; i < cl && step_ok && budget; i++) {
		enum bg_status ss = grammar_state_accept_bytes(step, cand + i, 1, scr, &err);
		if (ss == BG_ERR_CAPACITY) {
			budget = false;
			break;
		}
		step_ok = ss == BG_OK;
		if (step_ok && i == 0)
			budget = mask_agrees(step);
	}
	/* Within one piece, bytes after a sequence's lead byte are not checked to be
	 * continuation bytes (llama.cpp's decode_utf8 does not either), across pieces they
	 * are: the split may differ on invalid UTF-8 by design. */
	if (budget && ws != BG_ERR_CAPACITY && fuzz_utf8_valid(cand, cl)) {
		FUZZ_CHECK(step_ok == (ws == BG_OK), "%zu bytes: whole %d, byte by byte %d", cl,
			   (int)ws, step_ok);
		if (step_ok)
			FUZZ_CHECK(grammar_state_accepts(step) == grammar_state_accepts(whole),
				   "in the language: whole %d, byte by byte %d",
				   grammar_state_accepts(whole), grammar_state_accepts(step));
	}
	grammar_state_free(whole);
	grammar_state_free(step);
	grammar_free(g);
	return 0;
}
