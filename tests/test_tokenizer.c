/* test_tokenizer: the tokenizer against llama.cpp's own test data (../shared/vocab: the
 * ggml-vocab-*.gguf files with .inp/.out pairs whose expected ids come from the Hugging
 * Face tokenizers), the reference prompt tokenizations of ../shared/models/README.md,
 * round trips, special tokens, the incremental detokenizer and a seeded fuzz loop.
 *
 * Round trips: decode(encode(s)) == s with strip_leading_space, which removes the one
 * space a SentencePiece encoder puts in front of the text (add_space_prefix). SPM-style
 * vocabularies also turn a literal U+2581 in the input into a space on the way back (as
 * llama.cpp does), so those inputs are left out of their round-trip checks. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "b64_util.h"
#include "check.h"
#include "model/gguf.h"
#include "text/tokenizer.h"

#define SEP "\n__ggml_vocab_test__\n"

static struct tok *load(const char *path, struct gguf_ctx **gout)
{
	struct bg_err err = {0};
	struct gguf_ctx *g = NULL;
	struct tok *t = NULL;
	if (gguf_open(path, &g, &err) != BG_OK) {
		CHECK(0, "gguf_open %s: %s", path, err.msg);
		return NULL;
	}
	if (tok_load(g, &t, &err) != BG_OK) {
		CHECK(0, "tok_load %s: %s", path, err.msg);
		gguf_close(g);
		return NULL;
	}
	if (gout)
		*gout = g;
	else
		gguf_close(g); /* the tokenizer keeps its own copies */
	return t;
}

static bool has_esc_space(const char *s, size_t n)
{
	return memmem(s, n, "\xe2\x96\x81", 3) != NULL;
}

static bool spm_like(const struct tok *t)
{
	return strcmp(tok_model_name(t), "llama") == 0 || strcmp(tok_model_name(t), "gemma4") == 0;
}

/* decode(encode(s)) == s; returns true when it holds (or does not apply) */
static bool round_trip(const struct tok *t, const char *s, size_t n, bool parse_special)
{
	if (spm_like(t) && has_esc_space(s, n))
		return true;
	int32_t *ids;
	size_t ni;
	struct bg_err err = {0};
	if (tok_encode(t, s, n, false, parse_special, &ids, &ni, &err) != BG_OK)
		return false;
	char *d;
	size_t dl;
	bool ok =
	    tok_decode(t, ids, ni, true, &d, &dl, &err) == BG_OK && dl == n && memcmp(d, s, n) == 0;
	if (ok)
		free(d);
	free(ids);
	return ok;
}

static bool ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void print_ids(const char *what, const int32_t *v, size_t n)
{
	fprintf(stderr, "  %s:", what);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %d", v[i]);
	fputc('\n', stderr);
}

/* ---- the llama.cpp vocab test pairs ---- */

static void run_vocab_pair(const char *dir, const char *name)
{
	char path[2200], pin[2300], pout[2300];
	snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
	snprintf(pin, sizeof pin, "%s.inp", path);
	snprintf(pout, sizeof pout, "%s.out", path);
	if (strcmp(name, "bert-bge") == 0) {
		printf("vocab %s: not run (WordPiece/BERT tokenizer, out of scope)\n", name);
		return;
	}
	struct gguf_ctx *g = NULL;
	struct bg_err err = {0};
	if (gguf_open(path, &g, &err) != BG_OK) {
		CHECK(0, "%s", err.msg);
		return;
	}
	struct tok *t = NULL;
	enum bg_status st = tok_load(g, &t, &err);
	gguf_close(g);
	if (st == BG_ERR_UNSUPPORTED) {
		printf("vocab %s: UNSUPPORTED tokenizer (%s)\n", name, err.msg);
		CHECK(0, "vocab %s is unsupported: %s", name, err.msg);
		return;
	}
	CHECK(st == BG_OK, "tok_load %s: %s", name, err.msg);
	if (st != BG_OK)
		return;
	size_t lin, lout;
	char *inp = check_read_file(pin, &lin), *outp = check_read_file(pout, &lout);
	CHECK(inp && outp, "cannot read %s / %s", pin, pout);
	if (!inp || !outp) {
		free(inp);
		free(outp);
		tok_free(t);
		return;
	}
	/* expected lines */
	size_t n_lines = 0;
	char **lines = malloc((lout + 2) * sizeof *lines);
	for (char *p = outp; *p;) {
		char *e = strchr(p, '\n');
		if (e)
			*e = 0;
		lines[n_lines++] = p;
		if (!e)
			break;
		p = e + 1;
	}
	size_t pass = 0, total = 0, rt_fail = 0;
	const char *p = inp, *end = inp + lin;
	while (p < end) {
		/* a test string ends at a separator; the piece after the last one is a test
		 * only when it is not empty (gemma-4's file lacks the final separator) */
		const char *e = memmem(p, (size_t)(end - p), SEP, strlen(SEP));
		if (!e)
			e = end;
		size_t n = (size_t)(e - p);
		/* expected ids */
		int32_t want[1024];
		size_t nw = 0;
		if (total < n_lines) {
			char *q = lines[total];
			while (*q) {
				while (*q == ' ' || *q == '\r' || *q == '\t')
					q++;
				if (!*q)
					break;
				want[nw++] = (int32_t)strtol(q, &q, 10);
			}
		}
		int32_t *got = NULL;
		size_t ng = 0;
		st = tok_encode(t, p, n, false, false, &got, &ng, &err);
		bool ok = st == BG_OK && total < n_lines && ids_eq(got, ng, want, nw);
		if (ok) {
			pass++;
		} else {
			fprintf(stderr, "vocab %s test %zu [%.*s]: mismatch\n", name, total,
				(int)(n > 60 ? 60 : n), p);
			print_ids("want", want, nw);
			print_ids("got ", got, ng);
		}
		if (!round_trip(t, p, n, false)) {
			rt_fail++;
			fprintf(stderr, "vocab %s test %zu: round trip differs\n", name, total);
		}
		free(got);
		total++;
		p = e == end ? end : e + strlen(SEP);
	}
	CHECK(total == n_lines, "%s: %zu tests but %zu expected lines", name, total, n_lines);
	CHECK(pass == total && total > 0, "vocab %s: %zu/%zu passed", name, pass, total);
	CHECK(rt_fail == 0, "vocab %s: %zu round trips failed", name, rt_fail);
	printf("vocab %s: %zu/%zu passed (round trip %zu/%zu)\n", name, pass, total,
	       total - rt_fail, total);
	free(lines);
	free(inp);
	free(outp);
	tok_free(t);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_vocab_pairs(void)
{
	const char *readme = check_shared("vocab/README.md");
	if (!readme)
		return;
	char dir[1024];
	snprintf(dir, sizeof dir, "%s", readme);
	*strrchr(dir, '/') = 0;
	DIR *d = opendir(dir);
	CHECK(d != NULL, "cannot open %s", dir);
	if (!d)
		return;
	char *names[128];
	size_t nn = 0;
	struct dirent *de;
	while ((de = readdir(d)) && nn < 128) {
		const char *s = de->d_name;
		size_t l = strlen(s);
		if (strncmp(s, "ggml-vocab-", 11) == 0 && l > 20 &&
		    strcmp(s + l - 9, ".gguf.inp") == 0)
			names[nn++] = strndup(s + 11, l - 11 - 9);
	}
	closedir(d);
	qsort(names, nn, sizeof *names, cmp_str);
	CHECK(nn >= 15, "only %zu .inp files in %s", nn, dir);
	for (size_t i = 0; i < nn; i++) {
		run_vocab_pair(dir, names[i]);
		free(names[i]);
	}
}

/* ---- reference prompts (../shared/models/README.md, ../shared/vocab/README.md) ---- */

static void expect_ids(const struct tok *t, const char *text, bool bos, bool special,
		       const int32_t *want, size_t nw, const char *what)
{
	int32_t *got = NULL;
	size_t ng = 0;
	struct bg_err err = {0};
	enum bg_status st = tok_encode(t, text, strlen(text), bos, special, &got, &ng, &err);
	CHECK(st == BG_OK && ids_eq(got, ng, want, nw), "%s", what);
	if (st != BG_OK || !ids_eq(got, ng, want, nw)) {
		print_ids("want", want, nw);
		print_ids("got ", got, ng);
	}
	free(got);
}

static void test_once_upon(void)
{
	const char *once = "Once upon a time";
	const char *p = check_shared("models/stories260K.gguf");
	if (p) {
		struct tok *t = load(p, NULL);
		if (t) {
			const int32_t nob[] = {403, 407, 261, 378}, wb[] = {1, 403, 407, 261, 378};
			expect_ids(t, once, false, false, nob, 4, "stories260K no BOS");
			expect_ids(t, once, tok_add_bos(t), false, wb, 5, "stories260K with BOS");
			CHECK(tok_add_bos(t) && tok_bos(t) == 1 && tok_eos(t) == 2,
			      "stories260K BOS");
			CHECK(tok_n_vocab(t) == 512, "stories260K n_vocab %d", tok_n_vocab(t));
			CHECK(tok_is_eog(t, 2) && !tok_is_eog(t, 1), "stories260K EOG");
			tok_free(t);
		}
	}
	p = check_shared("models/llama-2-tiny-random.gguf");
	if (p) {
		struct tok *t = load(p, NULL);
		if (t) {
			const int32_t wb[] = {1, 9038, 2501, 263, 931};
			expect_ids(t, once, tok_add_bos(t), false, wb, 5,
				   "llama-2-tiny-random BOS");
			tok_free(t);
		}
	}
	static const struct {
		const char *name;
		int32_t ids[4];
		bool adds_bos;
		int32_t bos, eos;
	} v[] = {
	    {"llama-spm", {9038, 2501, 263, 931}, true, 1, 2},
	    {"llama-bpe", {12805, 5304, 264, 892}, true, 128000, 128001},
	    {"qwen2", {12522, 5193, 264, 882}, false, 151643, 151643},
	    {"gpt-2", {7454, 2402, 257, 640}, false, 50256, 50256},
	    {"deepseek-llm", {10492, 2065, 245, 766}, true, 100000, 100001},
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		char rel[256];
		snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", v[i].name);
		p = check_shared(rel);
		if (!p)
			continue;
		struct tok *t = load(p, NULL);
		if (!t)
			continue;
		char what[128];
		snprintf(what, sizeof what, "%s: Once upon a time", v[i].name);
		expect_ids(t, once, false, false, v[i].ids, 4, what);
		int32_t wb[5] = {v[i].bos, v[i].ids[0], v[i].ids[1], v[i].ids[2], v[i].ids[3]};
		snprintf(what, sizeof what, "%s: Once upon a time with default BOS", v[i].name);
		if (v[i].adds_bos)
			expect_ids(t, once, tok_add_bos(t), false, wb, 5, what);
		else
			expect_ids(t, once, tok_add_bos(t), false, v[i].ids, 4, what);
		CHECK(tok_add_bos(t) == v[i].adds_bos, "%s add_bos", v[i].name);
		CHECK(tok_bos(t) == v[i].bos && tok_eos(t) == v[i].eos, "%s bos %d eos %d",
		      v[i].name, tok_bos(t), tok_eos(t));
		CHECK(tok_is_eog(t, v[i].eos), "%s eos is EOG", v[i].name);
		tok_free(t);
	}
	p = check_shared("vocab/ggml-vocab-phi-3.gguf");
	if (p) {
		struct tok *t = load(p, NULL);
		if (t) {
			CHECK(tok_add_bos(t) && tok_bos(t) == 1 && tok_eos(t) == 32000,
			      "phi-3 specials");
			tok_free(t);
		}
	}
}

/* ---- llama-bpe: special tokens, EOG, pieces ---- */

static void test_llama_bpe_special(void)
{
	const char *p = check_shared("vocab/ggml-vocab-llama-bpe.gguf");
	if (!p)
		return;
	struct tok *t = load(p, NULL);
	if (!t)
		return;
	CHECK(strcmp(tok_model_name(t), "gpt2") == 0, "model %s", tok_model_name(t));
	CHECK(tok_n_vocab(t) == 128256, "n_vocab %d", tok_n_vocab(t));
	CHECK(tok_eot(t) == 128009, "eot %d", tok_eot(t));
	CHECK(tok_is_eog(t, 128001) && tok_is_eog(t, 128009), "EOG 128001/128009");
	CHECK(!tok_is_eog(t, 128000) && !tok_is_eog(t, 12805) && !tok_is_eog(t, -1) &&
		  !tok_is_eog(t, 1 << 30),
	      "not EOG");
	CHECK(strcmp(tok_text(t, 128000), "<|begin_of_text|>") == 0, "tok_text");
	CHECK(tok_text(t, -1) == NULL && tok_text(t, 128256) == NULL, "tok_text out of range");

	const char *s = "<|begin_of_text|>Hello";
	int32_t *ids;
	size_t n;
	struct bg_err err = {0};
	CHECK(tok_encode(t, s, strlen(s), false, true, &ids, &n, &err) == BG_OK, "%s", err.msg);
	CHECK(n == 2 && ids[0] == 128000 && strcmp(tok_text(t, ids[1]), "Hello") == 0,
	      "parse_special: %zu tokens", n);
	free(ids);
	CHECK(tok_encode(t, s, strlen(s), false, false, &ids, &n, &err) == BG_OK, "%s", err.msg);
	bool has_bos = false;
	for (size_t i = 0; i < n; i++)
		has_bos |= ids[i] == 128000;
	CHECK(!has_bos && n > 2, "without parse_special the special text is plain (%zu tokens)", n);
	free(ids);
	CHECK(round_trip(t, s, strlen(s), false), "round trip of special-looking text");
	/* BOS + parse_special BOS text gives two BOS, as llama.cpp */
	CHECK(tok_encode(t, s, strlen(s), true, true, &ids, &n, &err) == BG_OK, "%s", err.msg);
	CHECK(n == 3 && ids[0] == 128000 && ids[1] == 128000, "double BOS");
	/* control tokens render only on request */
	char buf[64];
	CHECK(tok_piece(t, 128000, false, buf, sizeof buf) == 0, "control piece hidden");
	size_t l = tok_piece(t, 128000, true, buf, sizeof buf);
	CHECK(l == 17 && memcmp(buf, "<|begin_of_text|>", 17) == 0, "control piece rendered");
	char *d;
	size_t dl;
	CHECK(tok_decode(t, ids, n, false, &d, &dl, &err) == BG_OK && strcmp(d, "Hello") == 0,
	      "decode skips control tokens");
	free(d);
	free(ids);
	/* byte-level pieces: "Ġ" is a space, "Ċ" a newline */
	int32_t sp = -1, nl = -1;
	for (int32_t i = 0; i < 1000; i++) {
		if (strcmp(tok_text(t, i), "\xc4\xa0") == 0)
			sp = i;
		if (strcmp(tok_text(t, i), "\xc4\x8a") == 0)
			nl = i;
	}
	CHECK(sp >= 0 && tok_piece(t, sp, false, buf, sizeof buf) == 1 && buf[0] == ' ', "Ġ");
	CHECK(nl >= 0 && tok_piece(t, nl, false, buf, sizeof buf) == 1 && buf[0] == '\n', "Ċ");
	/* small cap: returns the full length, writes at most cap */
	buf[0] = 'x';
	CHECK(tok_piece(t, 128000, true, buf, 0) == 17 && buf[0] == 'x', "cap 0");
	CHECK(tok_decode(t, (int32_t[]){5, 128256}, 2, false, &d, &dl, &err) == BG_ERR_INVALID,
	      "decode rejects ids outside the vocabulary");
	tok_free(t);

	p = check_shared("vocab/ggml-vocab-qwen2.gguf");
	if (p && (t = load(p, NULL))) {
		CHECK(tok_eot(t) == 151645 && tok_is_eog(t, 151645) && tok_is_eog(t, 151643),
		      "qwen2 eot %d", tok_eot(t));
		tok_free(t);
	}
}

/* ---- SPM details ---- */

static void test_spm(void)
{
	const char *p = check_shared("vocab/ggml-vocab-llama-spm.gguf");
	if (!p)
		return;
	struct tok *t = load(p, NULL);
	if (!t)
		return;
	CHECK(strcmp(tok_model_name(t), "llama") == 0, "model");
	char buf[16];
	/* <0x0A> is id 13 in the Llama-2 vocabulary (type BYTE) */
	CHECK(strcmp(tok_text(t, 13), "<0x0A>") == 0, "id 13 text %s", tok_text(t, 13));
	CHECK(tok_piece(t, 13, false, buf, sizeof buf) == 1 && buf[0] == '\n', "byte piece");
	/* "▁Once" decodes with its space; decode strips only the first */
	int32_t ids[] = {9038, 2501};
	char *d;
	size_t dl;
	struct bg_err err = {0};
	CHECK(tok_decode(t, ids, 2, false, &d, &dl, &err) == BG_OK && strcmp(d, " Once upon") == 0,
	      "decode keeps the leading space: [%s]", d);
	free(d);
	CHECK(tok_decode(t, ids, 2, true, &d, &dl, &err) == BG_OK && strcmp(d, "Once upon") == 0,
	      "decode strips the leading space");
	free(d);
	/* BOS first: the strip applies to the first visible piece */
	int32_t ids2[] = {1, 9038};
	CHECK(tok_decode(t, ids2, 2, true, &d, &dl, &err) == BG_OK && strcmp(d, "Once") == 0,
	      "strip after BOS: [%s]", d);
	free(d);
	/* parse_special: text after a special token gets its own leading space (llama.cpp) */
	int32_t *v;
	size_t n;
	CHECK(tok_encode(t, "<s>Once", 7, false, true, &v, &n, &err) == BG_OK && n == 2 &&
		  v[0] == 1 && v[1] == 9038,
	      "parse_special <s>");
	free(v);
	/* byte fallback: U+10348 (𐍈) has no token: four byte tokens <0xF0><0x90><0x8D><0x88>,
	 * after the "▁" prefix token */
	const char *goth = "\xf0\x90\x8d\x88";
	CHECK(tok_encode(t, goth, 4, false, false, &v, &n, &err) == BG_OK, "%s", err.msg);
	CHECK(n == 5 && v[1] == 0xF0 + 3 && v[2] == 0x90 + 3 && v[3] == 0x8D + 3 &&
		  v[4] == 0x88 + 3,
	      "byte fallback (%zu tokens)", n);
	free(v);
	/* invalid UTF-8 goes through byte fallback, nothing lost */
	const char bad[] = "a\xff\xc3(b\x80";
	CHECK(round_trip(t, bad, sizeof bad - 1, false), "invalid UTF-8 round trip (SPM)");
	tok_free(t);
}

/* ---- incremental detokenizer ---- */

static bool utf8_complete(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
		if (k == 0 || i + k > n)
			return false;
		for (size_t j = 1; j < k; j++)
			if (((unsigned char)s[i + j] & 0xc0) != 0x80)
				return false;
		i += k;
	}
	return true;
}

static void stream_check(const char *vocab)
{
	char rel[256];
	snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab);
	const char *p = check_shared(rel);
	if (!p)
		return;
	struct tok *t = load(p, NULL);
	if (!t)
		return;
	const char *text = "Hi \xf0\x9f\xa6\x99 llama! \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9"
			   "\xe2\x80\x8d\xf0\x9f\x91\xa7 family, \xe1\x9e\x80\xe1\x9e\xb6 "
			   "\xf0\x90\x8d\x88 end";
	int32_t *ids;
	size_t n;
	struct bg_err err = {0};
	CHECK(tok_encode(t, text, strlen(text), false, false, &ids, &n, &err) == BG_OK, "encode");
	struct tok_stream s;
	tok_stream_init(&s, t);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	bool ok = true, held = false;
	for (size_t i = 0; i < n; i++) {
		long k = tok_stream_push(&s, ids[i], &buf, &len, &cap);
		ok &= k >= 0 && utf8_complete(buf, len);
		held |= s.n_pending > 0;
	}
	CHECK(ok, "%s: stream emitted a partial UTF-8 sequence", vocab);
	CHECK(held, "%s: the emoji never split across tokens (test is not testing)", vocab);
	CHECK(tok_stream_flush(&s, &buf, &len, &cap) == 0, "nothing left to flush");
	char *d;
	size_t dl;
	CHECK(tok_decode(t, ids, n, false, &d, &dl, &err) == BG_OK && dl == len &&
		  memcmp(d, buf, len) == 0 && buf[len] == 0,
	      "%s: stream == decode", vocab);
	free(d);
	/* an incomplete sequence at the end comes out on flush */
	struct tok_stream s2;
	tok_stream_init(&s2, t);
	size_t before = len;
	for (size_t i = 0; i < n; i++) {
		if (tok_piece(t, ids[i], false, NULL, 0) == 1) {
			char c;
			tok_piece(t, ids[i], false, &c, 1);
			if ((unsigned char)c >= 0xf0) { /* a lone lead byte token */
				CHECK(tok_stream_push(&s2, ids[i], &buf, &len, &cap) == 0, "held");
				CHECK(tok_stream_flush(&s2, &buf, &len, &cap) == 1 &&
					  len == before + 1,
				      "flushed");
				break;
			}
		}
	}
	free(buf);
	free(ids);
	tok_free(t);
}

/* ---- fuzz ---- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static size_t random_text(char *s, size_t cap)
{
	static const char *const pieces[] = {
	    " ",
	    "  ",
	    "\n",
	    "\t",
	    "\r\n",
	    "a",
	    "Hello",
	    " world",
	    "'s",
	    "'LL",
	    "123456",
	    "\xc3\xa9",
	    "\xd0\x9f\xd1\x80",
	    "\xe4\xb8\xad\xe6\x96\x87",
	    "\xf0\x9f\x98\x80",
	    "\xe2\x80\x8d",
	    "<s>",
	    "<|endoftext|>",
	    "[PAD1]",
	    "!!",
	    "...",
	    "\xe1\x9e\x80",
	};
	size_t n = 0, want = rnd() % cap;
	while (n < want) {
		uint32_t k = rnd() % 4;
		if (k == 0) { /* random byte: often invalid UTF-8 */
			s[n++] = (char)(rnd() & 0xff);
		} else {
			const char *p = pieces[rnd() % (sizeof pieces / sizeof pieces[0])];
			size_t l = strlen(p);
			if (n + l > cap)
				break;
			memcpy(s + n, p, l);
			n += l;
		}
	}
	return n;
}

static void fuzz(const char *vocab, int iters)
{
	char rel[256];
	snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab);
	const char *p = check_shared(rel);
	if (!p)
		return;
	struct tok *t = load(p, NULL);
	if (!t)
		return;
	/* A byte can only come back if some token decodes to exactly that byte: byte-level
	 * vocabularies lack some bytes that never occur in valid UTF-8 (mpt: 0xF8; in
	 * deepseek-llm they are user-defined tokens that decode to two bytes). Inputs with
	 * such bytes are encoded (checked for errors and ids) but not round-tripped. */
	bool repr[256] = {0};
	for (int32_t id = 0; id < tok_n_vocab(t); id++) {
		char c[2];
		if (tok_piece(t, id, false, c, 2) == 1)
			repr[(unsigned char)c[0]] = true;
	}
	char s[256];
	int fails = 0, enc_fail = 0, skipped = 0;
	for (int i = 0; i < iters; i++) {
		size_t n = random_text(s, sizeof s);
		int32_t *ids;
		size_t ni;
		struct bg_err err = {0};
		bool special = (i & 7) == 0;
		if (tok_encode(t, s, n, (i & 1) != 0, special, &ids, &ni, &err) != BG_OK) {
			enc_fail++;
			continue;
		}
		for (size_t j = 0; j < ni; j++)
			if (ids[j] < 0 || ids[j] >= tok_n_vocab(t))
				enc_fail++;
		free(ids);
		bool all_repr = true;
		for (size_t j = 0; j < n; j++)
			all_repr &= repr[(unsigned char)s[j]];
		if (!all_repr) {
			skipped++;
			continue;
		}
		if (!round_trip(t, s, n, false)) {
			if (fails++ < 3) {
				fprintf(stderr,
					"fuzz %s: round trip failed for iteration %d:", vocab, i);
				for (size_t j = 0; j < n; j++)
					fprintf(stderr, " %02x", (unsigned char)s[j]);
				fputc('\n', stderr);
			}
		}
	}
	CHECK(enc_fail == 0, "fuzz %s: %d encode failures", vocab, enc_fail);
	CHECK(fails == 0, "fuzz %s: %d/%d round trips failed", vocab, fails, iters - skipped);
	CHECK(skipped < iters / 2, "fuzz %s: %d/%d inputs not round-trippable", vocab, skipped,
	      iters);
	printf("fuzz %s: %d inputs, %d round trips checked\n", vocab, iters, iters - skipped);
	tok_free(t);
}

/* ---- long inputs and errors ---- */

static void test_long(const char *vocab)
{
	char rel[256];
	snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab);
	const char *p = check_shared(rel);
	if (!p)
		return;
	struct tok *t = load(p, NULL);
	if (!t)
		return;
	size_t n = 1 << 20;
	char *s = malloc(n);
	memset(s, 'a', n); /* one 1 MiB word */
	clock_t c0 = clock();
	CHECK(round_trip(t, s, n, false), "%s: 1 MiB single word round trip", vocab);
	for (size_t i = 0; i < n; i++) /* 1 MiB of mixed short words */
		s[i] = " ab\ncd  efg, hij"[i % 16];
	CHECK(round_trip(t, s, n, false), "%s: 1 MiB text round trip", vocab);
	fprintf(stderr, "%s: 2 MiB of long inputs in %.2f s\n", vocab,
		(double)(clock() - c0) / CLOCKS_PER_SEC);
	free(s);
	tok_free(t);
}

static void test_errors(void)
{
	struct gguf_writer *w = gguf_writer_create();
	gguf_writer_set_str(w, "general.architecture", "llama");
	void *buf;
	size_t len;
	struct bg_err err = {0};
	CHECK(gguf_writer_to_buffer(w, &buf, &len, &err) == BG_OK, "%s", err.msg);
	struct gguf_ctx *g;
	struct tok *t = (struct tok *)1;
	CHECK(gguf_parse(buf, len, true, &g, &err) == BG_OK, "%s", err.msg);
	CHECK(tok_load(g, &t, &err) == BG_ERR_FORMAT && t == NULL, "no tokenizer: %s", err.msg);
	gguf_close(g);
	gguf_writer_destroy(w);

	/* a tiny hand-made SPM vocabulary: checks merges by score independently of files */
	w = gguf_writer_create();
	const char *toks[] = {"<unk>",
			      "<s>",
			      "</s>",
			      "\xe2\x96\x81",
			      "a",
			      "b",
			      "ab",
			      "\xe2\x96\x81"
			      "a",
			      "\xe2\x96\x81"
			      "ab"};
	float scores[] = {0, 0, 0, -1, -2, -2, -3, -4, -1};
	int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
	gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 9);
	gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, 9);
	gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, 9);
	CHECK(gguf_writer_to_buffer(w, &buf, &len, &err) == BG_OK, "%s", err.msg);
	gguf_writer_destroy(w);
	CHECK(gguf_parse(buf, len, true, &g, &err) == BG_OK, "%s", err.msg);
	CHECK(tok_load(g, &t, &err) == BG_OK, "%s", err.msg);
	gguf_close(g);
	if (t) {
		/* "▁ab": candidates ▁a (-4), ab (-3): ab merges first, then ▁+ab (-1) -> [8] */
		const int32_t want[] = {8};
		expect_ids(t, "ab", false, false, want, 1, "hand SPM: score order");
		/* "ba": b, a never merge; no byte tokens -> unk for nothing? b and a are tokens */
		const int32_t want2[] = {3, 5, 4};
		expect_ids(t, "ba", false, false, want2, 3, "hand SPM: no merge");
		/* a character with no token and no byte tokens becomes <unk> per byte */
		const int32_t want3[] = {7, 0, 0};
		expect_ids(t, "a\xc3\xa9", false, false, want3, 3, "hand SPM: unk fallback");
		CHECK(tok_add_bos(t) && tok_bos(t) == 1, "SPM default BOS");
		tok_free(t);
	}

	const char *p = check_shared("vocab/ggml-vocab-bert-bge.gguf");
	if (p) {
		CHECK(gguf_open(p, &g, &err) == BG_OK, "%s", err.msg);
		t = (struct tok *)1;
		CHECK(tok_load(g, &t, &err) == BG_ERR_UNSUPPORTED && t == NULL,
		      "bert is unsupported: %s", err.msg);
		gguf_close(g);
	}
	tok_free(NULL);
}

/* Issue 16, defect 3: a gpt2 vocabulary {a, b} whose merges hold "x" and "y" (no space:
 * two empty halves, not tokens). Loading it left the merge arena NULL and did arithmetic,
 * memcpy and memcmp on it (the sanitized build aborted here). It must load and encode. */
static void test_merge_without_space(void)
{
	size_t len;
	unsigned char *buf = b64_decode(
	    "R0dVRgMAAAAAAAAAAAAAAAMAAAAAAAAAFAAAAAAAAAB0b2tlbml6ZXIuZ2dtbC5tb2RlbAgAAAAEAAAAAAAAAGd"
	    "wdDIVAAAAAAAAAHRva2VuaXplci5nZ21sLnRva2VucwkAAAAIAAAAAgAAAAAAAAABAAAAAAAAAGEBAAAAAAAAAGI"
	    "VAAAAAAAAAHRva2VuaXplci5nZ21sLm1lcmdlcwkAAAAIAAAAAgAAAAAAAAABAAAAAAAAAHgBAAAAAAAAAHk=",
	    &len);
	CHECK(buf != NULL, "base64");
	struct gguf_ctx *g = NULL;
	struct tok *t = NULL;
	struct bg_err err = {0};
	CHECK(buf && gguf_parse(buf, len, true, &g, &err) == BG_OK, "%s", err.msg);
	if (!g)
		return;
	CHECK(tok_load(g, &t, &err) == BG_OK, "merges without a space: %s", err.msg);
	gguf_close(g);
	if (t) {
		const int32_t want[] = {0, 1, 0};
		expect_ids(t, "aba", false, false, want, 3, "merges without a space");
		tok_free(t);
	}
}

/* ---- one struct tok shared by threads (immutable after tok_load) ---- */

struct thread_arg {
	const struct tok *t;
	uint32_t seed;
	uint64_t hash;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < 200; i++) {
		char s[128];
		size_t n = 0;
		uint32_t x = a->seed + (uint32_t)i * 2654435761u;
		while (n < 100) { /* deterministic text, the same in every thread for a seed */
			x = x * 1103515245u + 12345u;
			const char *w[] = {"Hello", " world", " \xe4\xb8\xad", "123", "\n",
					   "!!",    " a"};
			const char *q = w[(x >> 16) % 7];
			memcpy(s + n, q, strlen(q));
			n += strlen(q);
		}
		int32_t *ids;
		size_t ni;
		struct bg_err err = {0};
		if (tok_encode(a->t, s, n, true, true, &ids, &ni, &err) != BG_OK)
			return NULL;
		for (size_t j = 0; j < ni; j++)
			h = (h ^ (uint64_t)ids[j]) * 1099511628211ull;
		free(ids);
	}
	a->hash = h;
	return NULL;
}

static void test_threads(void)
{
	const char *p = check_shared("vocab/ggml-vocab-llama-bpe.gguf");
	if (!p)
		return;
	struct tok *t = load(p, NULL);
	if (!t)
		return;
	struct thread_arg a[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (struct thread_arg){t, 7, 0};
		pthread_create(&th[i], NULL, thread_main, &a[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	struct thread_arg one = {t, 7, 0};
	thread_main(&one); /* the same work on one thread */
	for (int i = 0; i < 4; i++)
		CHECK(a[i].hash == one.hash && one.hash != 0, "thread %d got different ids", i);
	tok_free(t);
}

int main(void)
{
	clock_t c0 = clock();
	test_errors();
	test_merge_without_space();
	test_vocab_pairs();
	fprintf(stderr, "vocab pairs: %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
	test_once_upon();
	test_llama_bpe_special();
	test_spm();
	stream_check("llama-bpe");
	stream_check("llama-spm");
	c0 = clock();
	fuzz("llama-bpe", 3000);
	fuzz("llama-spm", 3000);
	fuzz("gpt-2", 1500);
	fuzz("qwen2", 1500);
	fuzz("deepseek-llm", 1500);
	fuzz("mpt", 1500);
	fprintf(stderr, "fuzz: %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
	test_long("llama-bpe");
	test_long("llama-spm");
	test_threads();
	return check_summary();
}
