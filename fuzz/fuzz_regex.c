/* fuzz_regex: the regex -> GBNF converter (core/sample/regex.c), checked against PCRE2.
 * Input: a flags byte (bit 0: json_string mode, as a JSON schema `pattern`), a pattern
 * (at most 128 bytes, up to a 0xff byte, cut at a NUL), then the bytes that steer the
 * string walks and make the candidate strings (fuzz_draw.h).
 * Oracles:
 *  - the converter gives a grammar or an error with a message; a converted pattern's
 *    grammar parses (a capacity error is the only other way out);
 *  - when PCRE2 compiles the pattern too (UTF, \u by ALT_BSUX, $ only at the end; the
 *    converter's \v, one character in ECMAScript and Python, is passed as \x0B), full
 *    match (anchored at both ends) is the reference:
 *    - soundness: every string drawn from the grammar (up to 3 walks of <= 24
 *      characters over ASCII, \t \n \v \f \r and three wider characters) matches; in
 *      json_string mode the drawn text is the inside of a JSON string literal: it
 *      parses as one, and its decoded value matches;
 *    - agreement: 6 candidate strings over a small alphabet (the pattern's own ASCII
 *      characters, "a0 _\n\té") are in the grammar's language iff PCRE2 matches them
 *      (in json_string mode candidates with '"', '\' or control characters are skipped:
 *      the converter keeps those out of negated classes and `.`, a documented subset).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>

#include "fuzz/fuzz_draw.h"
#include "sample/regex.h"

static struct grammar_vocab *voc;
static struct grammar_scratch *scr;
static pcre2_compile_context *cctx;
static pcre2_match_context *mctx;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	voc = fuzz_draw_vocab();
	scr = grammar_scratch_create();
	cctx = pcre2_compile_context_create(NULL);
	mctx = pcre2_match_context_create(NULL);
	FUZZ_CHECK(scr && cctx && mctx, "init");
	/* 2^20 operations a grammar step, as fuzz_grammar: the string walks' masks of
	 * ambiguous repetitions such as `(a..{2,}....??|){2000}` took 10-45 s an input at
	 * the default 2^24 (86 % of the time in grammar_state_mask); beyond 2^20 lies the
	 * capacity path, where a walk ends without a string. */
	grammar_scratch_set_step_ops(scr, 1u << 20);
	pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
	pcre2_set_match_limit(mctx, 200000);
	pcre2_set_depth_limit(mctx, 10000);
	return 0;
}

/* 1 match, 0 no match, -1 PCRE2 gave up (match limit). */
static int pcre_full(const pcre2_code *code, pcre2_match_data *md, const char *s, size_t n)
{
	int rc = pcre2_match(code, (PCRE2_SPTR)s, n, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md,
			     mctx);
	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	return -1;
}

static bool json_special(unsigned char c)
{
	return c < 0x20 || c == '"' || c == '\\' || c == 0x7f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	bool json = fuzz_byte(&in) & 1;
	const char *praw;
	size_t pl = fuzz_piece(&in, &praw, 128);
	char pat[129];
	memcpy(pat, praw, pl);
	pat[pl] = 0;
	pl = strlen(pat);

	char *expr = NULL;
	struct bg_err err = {0};
	if (regex_to_gbnf_expr(pat, json, &expr, &err) != BG_OK) {
		FUZZ_CHECK(!expr && err.msg[0], "a refused pattern without a message");
		return 0;
	}
	struct strbuf gb = {0};
	strbuf_printf(&gb, "root ::= %s\n", expr);
	free(expr);
	FUZZ_CHECK(!gb.oom, "out of memory");
	struct grammar *g = NULL;
	enum bg_status gs = grammar_parse(gb.p, gb.len, NULL, &g, &err);
	FUZZ_CHECK(gs == BG_OK || gs == BG_ERR_CAPACITY,
		   "pattern /%s/ (json %d) converted, its grammar refused: %s\n%s", pat, json,
		   err.msg, gb.p);
	if (gs != BG_OK) {
		free(gb.p);
		return 0;
	}

	/* the pattern in PCRE2's dialect: \v is one character (VT) here */
	struct strbuf pb = {0};
	for (size_t i = 0; i < pl; i++) {
		if (pat[i] == '\\' && i + 1 < pl) {
			if (pat[i + 1] == 'v')
				strbuf_puts(&pb, "\\x0B");
			else
				strbuf_put(&pb, pat + i, 2);
			i++;
		} else {
			strbuf_put(&pb, pat + i, 1);
		}
	}
	int ecode;
	PCRE2_SIZE eoff;
	pcre2_code *code = pcre2_compile((PCRE2_SPTR)(pb.p ? pb.p : ""), pb.len,
					 PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY, &ecode,
					 &eoff, cctx);
	free(pb.p);
	if (!code) { /* a pattern only the converter takes (e.g. nothing PCRE2 refuses) */
		grammar_free(g);
		free(gb.p);
		return 0;
	}
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
	FUZZ_CHECK(md, "match data");

	/* soundness: drawn strings match */
	for (int w = 0; w < 3 && in.n; w++) {
		char *s;
		size_t n;
		if (!fuzz_draw(g, voc, scr, &in, 24, &s, &n))
			continue;
		FUZZ_CHECK(grammar_matches(g, s, n), "a drawn string is not matched whole: '%s'",
			   s);
		if (json) {
			struct strbuf q = {0};
			strbuf_puts(&q, "\"");
			strbuf_put(&q, s, n);
			strbuf_puts(&q, "\"");
			cJSON *j = cJSON_ParseWithLength(q.p, q.len);
			FUZZ_CHECK(j && cJSON_IsString(j),
				   "/%s/ json_string: drawn %s is not a JSON string", pat, q.p);
			const char *v = cJSON_GetStringValue(j);
			/* cJSON stops a string at \u0000: the value is what precedes it */
			int m = pcre_full(code, md, v, strlen(v));
			if (!strstr(s, "\\u0000"))
				FUZZ_CHECK(m != 0, "/%s/ json_string: drawn %s decodes to '%s', which PCRE2 does not match",
					   pat, q.p, v);
			cJSON_Delete(j);
			free(q.p);
		} else {
			FUZZ_CHECK(pcre_full(code, md, s, n) != 0,
				   "/%s/: drawn '%s' (%zu bytes) is not matched by PCRE2", pat, s, n);
		}
		free(s);
	}

	/* agreement on candidates over a small alphabet */
	char alpha[160][4];
	int na = 0;
	static const char *const base[] = {"a", "0", " ", "_", "\n", "\t", "\xc3\xa9"};
	for (int i = 0; i < 7; i++)
		strcpy(alpha[na++], base[i]);
	for (size_t i = 0; i < pl && na < 150; i++) {
		unsigned char c = (unsigned char)pat[i];
		if (c < 0x20 || c >= 0x7f)
			continue;
		bool seen = false;
		for (int k = 0; k < na && !seen; k++)
			seen = alpha[k][0] == (char)c && !alpha[k][1];
		if (!seen) {
			alpha[na][0] = (char)c;
			alpha[na++][1] = 0;
		}
	}
	for (int t = 0; t < 6 && in.n; t++) {
		char cand[64];
		size_t cl = 0;
		int len = fuzz_byte(&in) % 10;
		bool special = false;
		for (int i = 0; i < len; i++) {
			const char *a = alpha[fuzz_byte(&in) % na];
			special = special || json_special((unsigned char)a[0]);
			memcpy(cand + cl, a, strlen(a));
			cl += strlen(a);
		}
		cand[cl] = 0;
		if (json && special)
			continue;
		int m = pcre_full(code, md, cand, cl);
		if (m < 0)
			continue;
		bool gm = grammar_matches(g, cand, cl);
		FUZZ_CHECK(gm == (m == 1), "/%s/ (json %d) on '%s': grammar %d, PCRE2 %d", pat, json,
			   cand, gm, m);
	}
	pcre2_match_data_free(md);
	pcre2_code_free(code);
	grammar_free(g);
	free(gb.p);
	return 0;
}
