/* test_grammar: core/sample/grammar.h. GBNF parsing (accepted forms, errors with their
 * positions, left recursion, bounds), hand-derived accept/reject strings, masks on a small
 * hand-made vocabulary (every bit derived by hand), and on the real llama-spm / llama-bpe
 * vocabularies the trie mask equals the token-by-token check of every token. */
#include "sample/grammar.h"

#include <cjson/cJSON.h>

#include "check.h"
#include "strbuf.h"
#include "model/gguf.h"
#include "text/tokenizer.h"

static struct grammar *parse(const char *text)
{
	struct grammar *g = NULL;
	struct bg_err err = {0};
	if (grammar_parse(text, strlen(text), NULL, &g, &err) != BG_OK)
		fprintf(stderr, "parse failed: %s\n", err.msg);
	return g;
}

static bool matches(const struct grammar *g, const char *s)
{
	return grammar_matches(g, s, strlen(s));
}

/* Checks that every string in yes[] matches and every one in no[] does not. */
static void check_lang(const char *gbnf, const char *const *yes, const char *const *no)
{
	struct grammar *g = parse(gbnf);
	CHECK(g != NULL, "grammar parses: %s", gbnf);
	if (!g)
		return;
	for (; *yes; yes++)
		CHECK(matches(g, *yes), "'%s' should match %s", *yes, gbnf);
	for (; *no; no++)
		CHECK(!matches(g, *no), "'%s' should not match %s", *no, gbnf);
	grammar_free(g);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_languages(void)
{
	check_lang("root ::= \"ab\" | \"c\"", L("ab", "c"), L("", "a", "abc", "b", "cc"));
	check_lang("root ::= [a-c]+ \"!\"", L("a!", "abcabc!"), L("!", "d!", "a", "a!!"));
	check_lang("root ::= [^a-c\\n]*", L("", "xyz", "é"), L("a", "xa", "\n"));
	check_lang("root ::= \"x\"{2,3}", L("xx", "xxx"), L("x", "xxxx", ""));
	check_lang("root ::= \"x\"{2}", L("xx"), L("x", "xxx"));
	check_lang("root ::= \"x\"{2,}", L("xx", "xxxxxx"), L("x", ""));
	check_lang("root ::= \"a\"? \"b\"", L("ab", "b"), L("aab", "a"));
	check_lang("root ::= .  .", L("ab", "éé", "\xf0\x9f\x98\x80z"), L("a", "abc"));
	/* nested brackets, right recursion */
	check_lang("root ::= item*\nitem ::= \"(\" item* \")\" | \"[\" item* \"]\"",
		   L("", "()", "([])", "()[()]", "[[[[]]]]"), L("(", "(]", ")(", "([)]"));
	/* arithmetic, the usual shape */
	check_lang("root ::= expr\n"
		   "expr ::= term ([-+*/] term)*\n"
		   "term ::= num | \"(\" space expr space \")\"\n"
		   "num ::= [0-9]+\n"
		   "space ::= \" \"?\n",
		   L("1", "1+2", "(1+2)*3", "( 12 )/4"), L("", "+1", "1+", "(1", "1 +2"));
	/* escapes and comments; a group across lines */
	check_lang("# a comment\nroot ::= ( \"\\x41\" # A\n | \"\\u00e9\" | \"\\t\\\"\" ) [\\]]",
		   L("A]", "é]", "\t\"]"), L("A", "B]"));
	/* a nullable middle rule, a rule used before its definition */
	check_lang("root ::= a b a\na ::= \"\" | \"x\"\nb ::= \"-\"", L("-", "x-", "-x", "x-x"),
		   L("xx-", ""));
	/* a rule defined twice keeps the last definition (llama.cpp does the same) */
	check_lang("root ::= a\na ::= \"1\"\na ::= \"2\"", L("2"), L("1"));
	/* an empty class matches nothing and so adds nothing (llama.cpp's reading) */
	check_lang("root ::= \"a\" [] \"b\"", L("ab"), L("a", "b"));
}

/* Parse errors: the status and the text of the message, with its line and column. */
static void expect_error(const char *gbnf, enum bg_status want, const char *msg_part)
{
	struct grammar *g = NULL;
	struct bg_err err = {0};
	enum bg_status st = grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err);
	CHECK(st == want && g == NULL, "status %d for %s", (int)st, gbnf);
	CHECK_HAS(err.msg, msg_part, "grammar %s", gbnf);
	grammar_free(g);
}

static void test_errors(void)
{
	expect_error("root ::= \"a", BG_ERR_FORMAT, "line 1, column 12: unexpected end");
	expect_error("root ::= [a-", BG_ERR_FORMAT, "unexpected end");
	expect_error("root := \"a\"", BG_ERR_FORMAT, "line 1, column 6: expecting ::=");
	expect_error("root ::= x\n", BG_ERR_FORMAT, "line 1, column 10: undefined rule 'x'");
	expect_error("start ::= \"a\"", BG_ERR_FORMAT, "no rule named 'root'");
	expect_error("root ::= \"a\" )", BG_ERR_FORMAT, "expecting a newline");
	expect_error("root ::= (\"a\"", BG_ERR_FORMAT, "expecting ')'");
	expect_error("root ::= \"\\q\"", BG_ERR_FORMAT, "unknown escape \\q");
	expect_error("root ::= \"\\x4\"", BG_ERR_FORMAT, "expecting 2 hex digits");
	expect_error("root ::= * \"a\"", BG_ERR_FORMAT, "expecting an item before");
	expect_error("root ::= \"a\"{3,2}", BG_ERR_FORMAT, "maximum 2 below its minimum 3");
	expect_error("root ::= \"a\"{2001}", BG_ERR_CAPACITY, "more than 2000 repetitions");
	expect_error("root ::= \"a\"{1;}", BG_ERR_FORMAT, "expecting ',' or '}'");
	expect_error("root ::= <think>", BG_ERR_UNSUPPORTED, "token references");
	expect_error("", BG_ERR_FORMAT, "no rule named 'root'");
	/* left recursion: direct, indirect, and through a nullable rule */
	expect_error("root ::= root \"a\" | \"b\"", BG_ERR_FORMAT, "'root' is left-recursive");
	expect_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", BG_ERR_FORMAT, "left-recursive");
	expect_error("root ::= e a \"x\" | \"y\"\ne ::= f\nf ::= \"\"\na ::= root", BG_ERR_FORMAT,
		     "left-recursive");
	expect_error("root ::= \"a\"* root", BG_ERR_FORMAT, "left-recursive");
	/* right recursion is fine */
	struct grammar *g = parse("root ::= \"a\" root | \"b\"");
	CHECK(g && matches(g, "aaab"), "right recursion");
	grammar_free(g);
	/* groups nested past the bound */
	char deep[400] = "root ::= ";
	for (int i = 0; i < 70; i++)
		strcat(deep, "(");
	strcat(deep, "\"a\"");
	for (int i = 0; i < 70; i++)
		strcat(deep, ")");
	expect_error(deep, BG_ERR_CAPACITY, "nest deeper than 64");
	/* a NUL byte in the text */
	struct bg_err err = {0};
	CHECK(grammar_parse("root ::= \"a\"\0x", 14, NULL, &g, &err) == BG_ERR_FORMAT && !g,
	      "NUL refused");
	/* another start rule */
	CHECK(grammar_parse("a ::= \"z\"", 9, "a", &g, &err) == BG_OK && matches(g, "z"),
	      "root name");
	grammar_free(g);
}

/* A hand-made vocabulary; the expected masks below are derived by hand. */
static const char *const HV[] = {
    "a",	  /* 0 */
    "b",	  /* 1 */
    "ab",	  /* 2 */
    "ba",	  /* 3 */
    "",		  /* 4: empty: never */
    "</s>",	  /* 5: EOG */
    "\xc3",	  /* 6: first byte of é (U+00E9) */
    "\xa9",	  /* 7: continuation byte */
    "\xc3\xa9",	  /* 8: é */
    "a\xc3",	  /* 9 */
    "\x80",	  /* 10: a lone continuation byte */
    "aaaa",	  /* 11 */
    "\xe2\x82",	  /* 12: first two bytes of € (U+20AC) */
    "\x00" "a",	  /* 13: starts with NUL: never */
    "a\x00" "b",  /* 14: the grammar sees "a" */
};
#define NHV ((int32_t)(sizeof HV / sizeof HV[0]))

static uint32_t hv_mask(struct grammar_state *st, struct grammar_vocab *v, struct grammar_scratch *s)
{
	uint32_t m[1];
	struct bg_err err;
	CHECK(grammar_state_mask(st, v, s, m, &err) == BG_OK, "mask: %s", err.msg);
	return m[0];
}

static uint32_t bits(const int *ids, int n)
{
	uint32_t m = 0;
	for (int i = 0; i < n; i++)
		m |= 1u << ids[i];
	return m;
}
#define BITS(...) bits((const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

static void test_hand_vocab(void)
{
	const char *pieces[NHV];
	uint32_t lens[NHV];
	bool eog[NHV];
	for (int i = 0; i < NHV; i++) {
		pieces[i] = HV[i];
		lens[i] = i == 13 || i == 14 ? 2 + (i == 14) : (uint32_t)strlen(HV[i]);
		eog[i] = i == 5;
	}
	struct grammar_vocab *v = NULL;
	struct bg_err err = {0};
	CHECK(grammar_vocab_create(NHV, pieces, lens, eog, &v, &err) == BG_OK, "vocab");
	struct grammar_scratch *s = grammar_scratch_create();

	/* root ::= "a" [a-b]* : start: a, ab, aaaa, a\xc3? no (é not in [a-b]), "a\0b" -> "a" */
	struct grammar *g = parse("root ::= \"a\" [a-b]*");
	struct grammar_state *st = NULL;
	CHECK(grammar_state_create(g, s, &st, &err) == BG_OK, "state");
	uint32_t m = hv_mask(st, v, s);
	CHECK(m == BITS(0, 2, 11, 14), "start mask %#x", m);
	CHECK(grammar_state_accept_token(st, v, 2, s, &err) == BG_OK, "accept ab");
	m = hv_mask(st, v, s);
	CHECK(m == BITS(0, 1, 2, 3, 5, 11, 14), "after ab: %#x", m);
	/* after "aba" the stacks are those after "ab" (inside [a-b]*): the mask comes from
	 * the scratch's cache although the last character differs (it did not while the
	 * state kept its last code point as an unfinished UTF-8 value) */
	uint64_t hits = grammar_scratch_mask_hits(s);
	CHECK(grammar_state_accept_token(st, v, 0, s, &err) == BG_OK, "accept a");
	m = hv_mask(st, v, s);
	CHECK(m == BITS(0, 1, 2, 3, 5, 11, 14), "after aba: %#x", m);
	CHECK(grammar_scratch_mask_hits(s) == hits + 1, "after aba: %llu cache hits, want %llu",
	      (unsigned long long)grammar_scratch_mask_hits(s), (unsigned long long)hits + 1);
	CHECK(grammar_state_accept_token(st, v, 6, s, &err) == BG_ERR_INVALID, "\\xc3 refused");
	CHECK(grammar_state_accept_token(st, v, 5, s, &err) == BG_OK, "EOG accepted");
	CHECK(grammar_state_finished(st), "finished");
	CHECK(hv_mask(st, v, s) == 0, "nothing after EOG");
	grammar_state_free(st);
	grammar_free(g);

	/* root ::= "a" "é"? : partial UTF-8 across tokens */
	g = parse("root ::= \"a\" \"\\u00e9\"?");
	CHECK(grammar_state_create(g, s, &st, &err) == BG_OK, "state");
	m = hv_mask(st, v, s);
	/* a; a\xc3 (a then the start of a two-byte char: é's range fits); a\0b */
	CHECK(m == BITS(0, 9, 14), "start: %#x", m);
	CHECK(grammar_state_accept_token(st, v, 9, s, &err) == BG_OK, "a\\xc3");
	m = hv_mask(st, v, s);
	/* the row waits for one continuation byte: only \xa9 completes é; \x80 gives U+00C0;
	 * EOG allowed: the grammar accepted "a" (llama.cpp looks only at the stacks) */
	CHECK(m == BITS(5, 7), "after a\\xc3: %#x", m);
	CHECK(grammar_state_accept_token(st, v, 10, s, &err) == BG_ERR_INVALID, "\\x80 refused");
	CHECK(grammar_state_accept_token(st, v, 7, s, &err) == BG_OK, "\\xa9");
	CHECK(grammar_state_accepts(st), "aé accepted");
	CHECK(hv_mask(st, v, s) == BITS(5), "only EOG");
	grammar_state_free(st);
	grammar_free(g);

	/* root ::= [^a] : €'s first two bytes may complete to €; \xc3 and é too; a lone
	 * continuation byte never; b, ba? no (two chars) */
	g = parse("root ::= [^a]");
	CHECK(grammar_state_create(g, s, &st, &err) == BG_OK, "state");
	m = hv_mask(st, v, s);
	CHECK(m == BITS(1, 6, 8, 12), "[^a]: %#x", m);
	grammar_state_free(st);
	grammar_free(g);

	/* root ::= [\u0000-\u00ff] "x"?: \xe2\x82 can only complete to U+2080.. -> refused */
	g = parse("root ::= [\\x01-\\xff]");
	CHECK(grammar_state_create(g, s, &st, &err) == BG_OK, "state");
	m = hv_mask(st, v, s);
	CHECK(m == BITS(0, 1, 6, 8, 14), "latin-1: %#x", m);
	grammar_state_free(st);
	grammar_free(g);

	/* an empty language tail: root ::= "" allows only EOG */
	g = parse("root ::= \"\"");
	CHECK(grammar_state_create(g, s, &st, &err) == BG_OK, "state");
	CHECK(grammar_state_accepts(st) && hv_mask(st, v, s) == BITS(5), "empty grammar");
	grammar_state_free(st);
	grammar_free(g);

	/* a clone is independent */
	g = parse("root ::= \"ab\" | \"ba\"");
	CHECK(grammar_state_create(g, s, &st, &err) == BG_OK, "state");
	struct grammar_state *c = grammar_state_clone(st);
	CHECK(grammar_state_accept_token(st, v, 0, s, &err) == BG_OK, "a");
	CHECK(hv_mask(st, v, s) == BITS(1), "then b");
	CHECK(hv_mask(c, v, s) == BITS(0, 1, 2, 3, 14), "clone unchanged: %#x", hv_mask(c, v, s));
	grammar_state_free(c);
	grammar_state_free(st);
	grammar_free(g);

	grammar_scratch_free(s);
	grammar_vocab_free(v);
}

/* An ambiguous grammar whose stack count doubles per character stays within its budget
 * or fails with BG_ERR_CAPACITY; never hangs. */
static void test_budget(void)
{
	struct grammar *g = parse("root ::= (\"a\" | \"a\" \"a\")* x\nx ::= (\"\"|\"\")(\"\"|\"\")");
	CHECK(g != NULL, "parses");
	CHECK(matches(g, "aaaaaaaaaaaaaaaaaaaaaaa"), "ambiguous repetition");
	/* a lowered budget (fuzz_grammar's) fails the same step with its own number, and 0
	 * restores GRAMMAR_STEP_OPS */
	struct grammar_scratch *ls = grammar_scratch_create();
	for (int round = 0; round < 3; round++) {
		grammar_scratch_set_step_ops(ls, round == 1 ? 10 : round == 2 ? 0 : 1u << 30);
		struct grammar_state *st = NULL;
		struct bg_err err = {0};
		enum bg_status r = grammar_state_create(g, ls, &st, &err);
		if (r == BG_OK)
			r = grammar_state_accept_bytes(st, "aaaaaaaaaaaaaaaaaaaaaaa", 23, ls, &err);
		if (round == 1)
			CHECK(r == BG_ERR_CAPACITY && strstr(err.msg, "more than 10 stack operations"),
			      "budget 10: status %d %s", (int)r, err.msg);
		else
			CHECK(r == BG_OK, "budget round %d: status %d %s", round, (int)r, err.msg);
		grammar_state_free(st);
	}
	grammar_scratch_free(ls);
	grammar_free(g);
	/* x{0,2000} nested three deep: many stacks after a few characters */
	g = parse("root ::= ((\"a\"{0,2000}){0,2000}){0,2000} \"b\"");
	if (g) {
		struct grammar_scratch *s = grammar_scratch_create();
		struct grammar_state *st = NULL;
		struct bg_err err = {0};
		enum bg_status r = grammar_state_create(g, s, &st, &err);
		if (r == BG_OK)
			r = grammar_state_accept_bytes(st, "aaaa", 4, s, &err);
		CHECK(r == BG_OK || r == BG_ERR_CAPACITY, "status %d %s", (int)r, err.msg);
		grammar_state_free(st);
		grammar_scratch_free(s);
		grammar_free(g);
	} else {
		CHECK(1, "refused at parse");
	}
}

/* A real vocabulary as the grammar sees it: pieces rendered with control tokens as text. */
struct rv {
	struct gguf_ctx *gg;
	struct tok *t;
	int32_t n;
	char **pieces;
	uint32_t *lens;
	bool *eog;
	struct grammar_vocab *v;
};

static bool rv_load(struct rv *r, const char *rel)
{
	memset(r, 0, sizeof *r);
	const char *path = check_shared(rel);
	if (!path)
		return false;
	struct bg_err err = {0};
	if (gguf_open(path, &r->gg, &err) != BG_OK || tok_load(r->gg, &r->t, &err) != BG_OK) {
		CHECK(0, "load %s: %s", path, err.msg);
		gguf_close(r->gg);
		return false;
	}
	int32_t n = r->n = tok_n_vocab(r->t);
	r->pieces = calloc((size_t)n, sizeof *r->pieces);
	r->lens = calloc((size_t)n, sizeof *r->lens);
	r->eog = calloc((size_t)n, sizeof *r->eog);
	for (int32_t i = 0; i < n; i++) {
		char buf[256];
		size_t l = tok_piece(r->t, i, true, buf, sizeof buf);
		r->pieces[i] = malloc(l + 1);
		if (l > sizeof buf)
			tok_piece(r->t, i, true, r->pieces[i], l);
		else
			memcpy(r->pieces[i], buf, l);
		r->lens[i] = (uint32_t)l;
		r->eog[i] = tok_is_eog(r->t, i);
	}
	CHECK(grammar_vocab_create(n, (const char *const *)r->pieces, r->lens, r->eog, &r->v, &err) ==
		  BG_OK,
	      "vocab");
	return r->v != NULL;
}

static void rv_free(struct rv *r)
{
	grammar_vocab_free(r->v);
	for (int32_t i = 0; i < r->n; i++)
		free(r->pieces[i]);
	free(r->pieces);
	free(r->lens);
	free(r->eog);
	tok_free(r->t);
	gguf_close(r->gg);
}

static bool bit(const uint32_t *m, int32_t i)
{
	return (m[i >> 5] >> (i & 31)) & 1;
}

/* Walks up to max_steps tokens from the start state, each a pseudo-random pick among the
 * allowed ones (EOG only when nothing else is allowed); masks[k] is the mask before the
 * k-th token. Returns the number of tokens in path. */
static int walk_path(struct rv *r, const struct grammar *g, struct grammar_scratch *s, int max_steps,
		     uint32_t seed, int32_t *path, uint32_t **masks)

{
	struct grammar_state *st = NULL;
	struct bg_err err = {0};
	if (grammar_state_create(g, s, &st, &err) != BG_OK) {
		CHECK(0, "state: %s", err.msg);
		return 0;
	}
	int k = 0;
	for (; k <= max_steps; k++) {
		masks[k] = malloc((size_t)(r->n + 31) / 32 * 4);
		CHECK(grammar_state_mask(st, r->v, s, masks[k], &err) == BG_OK, "mask: %s", err.msg);
		if (k == max_steps)
			break;
		int32_t n_ok = 0, last_eog = -1;
		for (int32_t i = 0; i < r->n; i++)
			if (bit(masks[k], i)) {
				if (r->eog[i])
					last_eog = i;
				else
					n_ok++;
			}
		if (n_ok == 0)
			break;
		(void)last_eog;
		seed = seed * 1664525u + 1013904223u;
		int32_t want = (int32_t)((seed >> 8) % (uint32_t)n_ok), pick = -1;
		for (int32_t i = 0; i < r->n && pick < 0; i++)
			if (bit(masks[k], i) && !r->eog[i] && want-- == 0)
				pick = i;
		path[k] = pick;
		CHECK(grammar_state_accept_token(st, r->v, pick, s, &err) == BG_OK, "accept %d: %s",
		      pick, err.msg);
	}
	grammar_state_free(st);
	return k;
}

/* On a real vocabulary: the trie mask equals accepting each token on its own, for a few
 * grammars along pseudo-random paths. */
static void test_real_vocab(const char *rel)
{
	struct rv r;
	if (!rv_load(&r, rel))
		return;
	struct grammar_scratch *s = grammar_scratch_create();
	static const char *const grammars[] = {
	    ("root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws \"}\"\n"
	     "str ::= \"\\\"\" [^\"\\\\]{0,12} \"\\\"\"\nws ::= [ \\t\\n]{0,3}"),
	    "root ::= [0-9]+ (\".\" [0-9]+)?",
	    "root ::= (\"yes\" | \"no\" | \"maybe\" | \"日本\")",
	    "root ::= [^x]{0,5}",
	};
	int n_mismatch = 0, n_allowed_total = 0;
	for (size_t k = 0; k < sizeof grammars / sizeof grammars[0]; k++) {
		struct grammar *g = parse(grammars[k]);
		if (!g)
			continue;
		int32_t path[8];
		uint32_t *masks[9] = {0};
		int n = walk_path(&r, g, s, 8, (uint32_t)k, path, masks);
		struct grammar_state *st = NULL;
		grammar_state_create(g, s, &st, NULL);
		for (int step = 0; step <= n && masks[step]; step++) {
			for (int32_t i = 0; i < r.n; i++) {
				struct grammar_state *c = grammar_state_clone(st);
				bool ok = grammar_state_accept_token(c, r.v, i, s, NULL) == BG_OK;
				grammar_state_free(c);
				if (bit(masks[step], i) != ok && n_mismatch++ < 5)
					fprintf(stderr, "grammar %zu step %d token %d: mask %d accept %d\n",
						k, step, i, bit(masks[step], i), ok);
				n_allowed_total += ok;
			}
			if (step < n)
				grammar_state_accept_token(st, r.v, path[step], s, NULL);
		}
		for (int i = 0; i < 9; i++)
			free(masks[i]);
		grammar_state_free(st);
		grammar_free(g);
	}
	CHECK(n_mismatch == 0, "%s: %d mask/accept mismatches", rel, n_mismatch);
	CHECK(n_allowed_total > 100, "%s: %d allowed in all", rel, n_allowed_total);
	grammar_scratch_free(s);
	rv_free(&r);
}

/* ---- against llama.cpp's grammar engine (bench/llamacpp_grammar.mjs) ---- */

static bool have_llamacpp(void)
{
	if (access("bench/node_modules/node-llama-cpp", F_OK) == 0 &&
	    system("command -v node >/dev/null 2>&1") == 0)
		return true;
	const char *ci = getenv("CI");
	if (ci && strcmp(ci, "true") == 0) {
		check_n_fail++;
		fprintf(stderr, "FAIL: bench/node_modules/node-llama-cpp or node is missing\n");
	} else {
		check_n_skip++;
		fprintf(stderr, "SKIP: node-llama-cpp not installed; llama.cpp grammar cross-check skipped\n");
	}
	return false;
}

/* Same grammar, same vocabulary, same accepted tokens: llama.cpp's allowed set equals
 * ours at every step of a pseudo-random path (one node run per vocabulary). */
#define LC_MAX_STEPS 16
/* Does the piece hold a byte that begins no character: f5..ff, or f4 followed by 90..bf
 * (a code point past U+10FFFF)? batchgen's matcher refuses those tokens where llama.cpp's
 * decode_utf8 takes them as code points (0x140000 for f5 80 80 80) that a negated class or
 * `.` matches: the one place its masks differ from llama.cpp's, on purpose. */
static bool past_unicode(const char *piece, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t b = (uint8_t)piece[i];
		if (b >= 0xf5 || (b == 0xf4 && i + 1 < len && (uint8_t)piece[i + 1] >= 0x90))
			return true;
	}
	return false;
}

static void test_llamacpp(const char *rel, const char *const *grammars, int n_g, int steps)
{
	struct rv r;
	if (!rv_load(&r, rel))
		return;
	struct grammar_scratch *s = grammar_scratch_create();
	int32_t(*path)[LC_MAX_STEPS] = calloc((size_t)n_g, sizeof *path);
	uint32_t *(*masks)[LC_MAX_STEPS + 1] = calloc((size_t)n_g, sizeof *masks);
	int *n_path = calloc((size_t)n_g, sizeof *n_path);
	cJSON *cases = cJSON_CreateArray();
	for (int k = 0; k < n_g; k++) {
		struct grammar *g = parse(grammars[k]);
		CHECK(g != NULL, "grammar %d", k);
		if (g)
			n_path[k] = walk_path(&r, g, s, steps, 1000u + (uint32_t)k, path[k], masks[k]);
		grammar_free(g);
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "grammar", grammars[k]);
		cJSON_AddItemToObject(c, "path", cJSON_CreateIntArray(path[k], n_path[k]));
		cJSON_AddItemToArray(cases, c);
	}
	char cfile[] = "/tmp/bg_grammar_XXXXXX";
	int fd = mkstemp(cfile);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	char *txt = cJSON_PrintUnformatted(cases);
	if (f) {
		fputs(txt, f);
		fclose(f);
	}
	free(txt);
	cJSON_Delete(cases);
	struct strbuf cmd = {0};
	strbuf_printf(&cmd, "node bench/llamacpp_grammar.mjs '%s' %d %s 2>/dev/null", check_shared(rel),
		      (int)r.n, cfile);
	FILE *pp = popen(cmd.p, "r");
	int *answered = calloc((size_t)n_g, sizeof *answered), n_diff = 0, n_lines = 0;
	int n_beyond = 0;
	size_t cap = 1 << 22;
	char *line = malloc(cap);
	uint32_t *want = malloc((size_t)(r.n + 31) / 32 * 4);
	while (pp && fgets(line, (int)cap, pp)) {
		cJSON *j = cJSON_Parse(line);
		const cJSON *al = cJSON_GetObjectItemCaseSensitive(j, "allowed");
		const cJSON *cj = cJSON_GetObjectItemCaseSensitive(j, "case");
		const cJSON *sj = cJSON_GetObjectItemCaseSensitive(j, "step");
		int k = cJSON_IsNumber(cj) ? cj->valueint : -1, step = cJSON_IsNumber(sj) ? sj->valueint : -1;
		if (!cJSON_IsArray(al) || k < 0 || k >= n_g || step < 0 || step > n_path[k] ||
		    !masks[k][step]) {
			CHECK(0, "llama.cpp says %.200s", line);
			cJSON_Delete(j);
			continue;
		}
		n_lines++;
		answered[k]++;
		memset(want, 0, (size_t)(r.n + 31) / 32 * 4);
		const cJSON *x;
		cJSON_ArrayForEach(x, al) want[x->valueint >> 5] |= 1u << (x->valueint & 31);
		for (int32_t i = 0; i < r.n; i++)
			if (past_unicode(r.pieces[i], r.lens[i]) && bit(want, i) && !bit(masks[k][step], i))
				n_beyond++;
			else if (bit(want, i) != bit(masks[k][step], i) && n_diff++ < 8)
				fprintf(stderr, "%s grammar %d step %d token %d '%.*s': ours %d llama.cpp %d\n",
					rel, k, step, i, (int)r.lens[i], r.pieces[i],
					bit(masks[k][step], i), bit(want, i));
		cJSON_Delete(j);
	}
	if (pp)
		pclose(pp);
	for (int k = 0; k < n_g; k++)
		CHECK(answered[k] == n_path[k] + 1, "%s grammar %d: llama.cpp answered %d of %d steps",
		      rel, k, answered[k], n_path[k] + 1);
	CHECK(n_diff == 0, "%s: %d differences from llama.cpp in %d steps", rel, n_diff, n_lines);
	printf("%s: %d steps of %d grammars compared with llama.cpp, %d differences (and %d "
	       "tokens past U+10FFFF refused by us alone)\n",
	       rel, n_lines, n_g, n_diff, n_beyond);
	unlink(cfile);
	free(cmd.p);
	free(line);
	free(want);
	free(answered);
	for (int k = 0; k < n_g; k++)
		for (int i = 0; i <= LC_MAX_STEPS; i++)
			free(masks[k][i]);
	free(masks);
	free(path);
	free(n_path);
	grammar_scratch_free(s);
	rv_free(&r);
}

/* The shapes: arithmetic, lists, fixed-key objects, digits, nested brackets,
 * choices; plus non-ASCII classes and literals (partial UTF-8 across tokens). */
static const char *const LLAMA_GRAMMARS[] = {
    "root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
    "root ::= \"[\" (item (\", \" item)*)? \"]\"\nitem ::= [a-z]{1,8}",
    "root ::= \"{\\\"name\\\": \\\"\" [A-Za-z ]{1,20} \"\\\", \\\"age\\\": \" [0-9]{1,3} \"}\"",
    "root ::= [0-9]{4,6}",
    "root ::= item+\nitem ::= \"(\" item* \")\" | \"[\" item* \"]\"",
    "root ::= \"yes\" | \"no\" | \"maybe later\" | \"日本語\"",
    "root ::= [^a-z\\n]{2,10} \"é\"",
    "root ::= ([ぁ-ん] | [α-ω] | .){1,8}",
};

/* An empty rule: the matcher's first step copies a stack of 0 words into a buffer that
 * was never allocated (memcpy(NULL, ., 0), undefined; found by fuzz/fuzz_grammar). Its
 * language is the empty string alone. */
static void test_empty_rule(void)
{
	struct grammar *g = NULL;
	struct bg_err err = {0};
	CHECK(grammar_parse("root ::=\n", 9, NULL, &g, &err) == BG_OK, "%s", err.msg);
	if (!g)
		return;
	CHECK(grammar_matches(g, "", 0), "the empty rule matches the empty string");
	CHECK(!grammar_matches(g, "a", 1), "and nothing else");
	grammar_free(g);
}

/* Feeds text to a fresh state of grammar gtext one byte at a time: the index of the first
 * byte refused, or -1 when all are taken. */
static int first_refused_byte(const char *gtext, const char *text)
{
	struct grammar *g = NULL;
	struct bg_err err = {0};
	struct grammar_scratch *scr = grammar_scratch_create();
	struct grammar_state *st = NULL;
	int at = -2;
	if (scr && grammar_parse(gtext, strlen(gtext), NULL, &g, &err) == BG_OK &&
	    grammar_state_create(g, scr, &st, &err) == BG_OK) {
		at = -1;
		for (size_t i = 0; text[i] && at < 0; i++)
			if (grammar_state_accept_bytes(st, text + i, 1, scr, &err) != BG_OK)
				at = (int)i;
	}
	CHECK(at != -2, "%s: %s", gtext, err.msg);
	grammar_state_free(st);
	grammar_free(g);
	grammar_scratch_free(scr);
	return at;
}

/* A negated class takes the first bytes of a multi-byte character when some completion is
 * outside the class (found by fuzz_grammar: `[^🦙]+` took "🦼" whole but refused its first
 * byte fed alone, as llama.cpp's partial match does), and refuses them when every
 * completion is excluded, whatever the order of the class's ranges. */
static void expect_refused(const char *gtext, const char *text, int want)
{
	int got = first_refused_byte(gtext, text);
	CHECK(got == want, "%s on %s: first refused byte %d, expected %d", gtext, text, got, want);
}

static void test_partial_negated(void)
{
	expect_refused("root ::= [^🦙]+", "🦼🦼", -1);
	expect_refused("root ::= [^🦙]+", "🦼🦙", 7);
	expect_refused("root ::= [^é]+", "\xc3\xa8", -1);
	/* f0 begins U+10000..U+3FFFF: excluded whole in two ranges given out of order */
	expect_refused("root ::= [^\\U00020000-\\U0003FFFF\\U00010000-\\U0001FFFF]", "\xf0", 0);
	expect_refused("root ::= [^\\U00020000-\\U0003FFFF\\U00010000-\\U0001FFFE]", "\xf0\x9f\xbf\xbf", -1);
	expect_refused("root ::= [^\\U00020000-\\U0003FFFF\\U00010000-\\U0001FFFE]", "\xf0\x9f\xbf\xbe", 3);
	/* one-character ranges ([^a-a]) shrink to one element when the class is sorted: the
	 * grammar's element count must follow (fuzz_grammar: an assertion in grammar_parse) */
	expect_refused("root ::= [^a-a\"-\"x]+ \"!\"", "bc!", -1);
	expect_refused("root ::= [^a-a\"-\"x]+", "b\"", 1);
	expect_refused("root ::= [^a-a\"-\"x]+", "ba", 1);
	/* Code points past U+10FFFF are no characters: a negated class does not take the
	 * bytes f5..ff nor f4 90.. (before, `[^\x00-\U0010FFFF]`, which matches nothing,
	 * let a model emit f5 80 80 80 and end: invalid UTF-8 from a grammar) */
	expect_refused("root ::= [^\\x00-\\U0010FFFF]", "\xf5", 0);
	expect_refused("root ::= [^\\x00-\\U0010FFFF]", "\xff", 0);
	expect_refused("root ::= [^\\x00-\\U0010FFFF]", "\xf4\x90", 0); /* f4 begins only U+100000.. */
	expect_refused("root ::= [^a]+", "\xf4\x8f\xbf\xbf\xf7\xbf", 4);
	expect_refused("root ::= [^a]+", "\xf4\x90\x80\x80", 1);
}

int main(void)
{
	test_empty_rule();
	test_partial_negated();
	test_languages();
	test_errors();
	test_hand_vocab();
	test_budget();
	test_real_vocab("vocab/ggml-vocab-llama-spm.gguf");
	if (have_llamacpp()) {
		int n = (int)(sizeof LLAMA_GRAMMARS / sizeof LLAMA_GRAMMARS[0]);
		test_llamacpp("vocab/ggml-vocab-llama-spm.gguf", LLAMA_GRAMMARS, n, 10);
		test_llamacpp("vocab/ggml-vocab-llama-bpe.gguf", LLAMA_GRAMMARS, n, 3);
	}
	return check_summary();
}
