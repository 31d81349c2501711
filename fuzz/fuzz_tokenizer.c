/* fuzz_tokenizer: encoding and decoding with real vocabularies: SentencePiece (llama-spm,
 * phi-3), byte-level BPE with several pre-tokenizers (llama-bpe, gpt-2, qwen2, mpt,
 * deepseek-coder, command-r), Gemma 4's BPE, and the built-in model's. The first byte
 * picks the vocabulary, BOS and special-token parsing; the rest is the text.
 * Oracles:
 *  - encoding succeeds and every id is in [0, n_vocab);
 *  - round trip: decode(encode(s)) == s without special parsing, when every byte of s is
 *    some token's whole piece (the condition test_tokenizer uses; SentencePiece: s has no
 *    U+2581, which decodes as a space);
 *  - streamed decoding (tok_stream_push per id, then flush) gives exactly tok_decode's
 *    bytes, and never a partial UTF-8 character before the flush when the text is valid;
 *  - the size bound behind the too_long check (tokenizer.h): n_ids *
 *    tok_max_token_bytes >= len, for texts whose bytes are all pieces and without special
 *    parsing (the bound does not hold where the tokenizer drops bytes, by design).
 */
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "model/gguf.h"
#include "model/model.h"
#include "text/tokenizer.h"

#define MAX_VOCABS 12
static struct voc {
	const char *name;
	struct tok *t;
	bool repr[256]; /* some token's piece is exactly this byte */
	bool spm;
} vocabs[MAX_VOCABS];
static int n_vocabs;

static void add(const char *name, struct tok *t)
{
	struct voc *v = &vocabs[n_vocabs++];
	v->name = name;
	v->t = t;
	for (int32_t id = 0; id < tok_n_vocab(t); id++) {
		char c[2];
		if (tok_piece(t, id, false, c, 2) == 1)
			v->repr[(unsigned char)c[0]] = true;
	}
	v->spm = !strcmp(tok_model_name(t), "llama") || !strcmp(tok_model_name(t), "gemma4");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	struct bg_err err = {0};
	struct model *m = NULL;
	struct tok *t = NULL;
	if (model_open(NULL, false, &m, &err) != BG_OK || tok_load(m->gguf, &t, &err) != BG_OK) {
		fprintf(stderr, "fuzz_tokenizer: built-in model: %s\n", err.msg);
		abort();
	}
	model_free(m);
	add("builtin", t);
	static const char *const names[] = {"llama-spm", "phi-3",	   "llama-bpe", "gpt-2",
					    "qwen2",	 "mpt",		   "deepseek-coder",
					    "command-r", "gemma-4"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char rel[128], buf[4096];
		snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", names[i]);
		const char *p = fuzz_shared(rel, buf, sizeof buf);
		struct gguf_ctx *g = NULL;
		if (!p) {
			fprintf(stderr, "fuzz_tokenizer: %s not found (BG_SHARED); skipped\n", rel);
			continue;
		}
		if (gguf_open(p, &g, &err) != BG_OK || tok_load(g, &t, &err) != BG_OK) {
			fprintf(stderr, "fuzz_tokenizer: %s: %s\n", p, err.msg);
			abort();
		}
		gguf_close(g);
		add(names[i], t);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	uint8_t sel = fuzz_byte(&in);
	const struct voc *v = &vocabs[(sel & 15) % n_vocabs];
	const struct tok *t = v->t;
	bool bos = sel & 16, special = sel & 32;
	const char *s = (const char *)in.p;
	size_t n = in.n;
	int32_t *ids = NULL;
	size_t ni = 0;
	struct bg_err err = {0};
	FUZZ_CHECK(tok_encode(t, s, n, bos, special, &ids, &ni, &err) == BG_OK, "%s: encode: %s",
		   v->name, err.msg);
	for (size_t i = 0; i < ni; i++)
		FUZZ_CHECK(ids[i] >= 0 && ids[i] < tok_n_vocab(t), "%s: id %d out of range", v->name,
			   ids[i]);
	bool all_repr = true;
	for (size_t i = 0; i < n; i++)
		all_repr &= v->repr[(unsigned char)s[i]];
	if (!special && !bos && all_repr)
		FUZZ_CHECK(ni * tok_max_token_bytes(t) >= n,
			   "%s: %zu bytes in %zu ids, but no token is longer than %zu bytes", v->name,
			   n, ni, tok_max_token_bytes(t));
	/* the whole decode and the streamed one */
	char *d = NULL;
	size_t dl = 0;
	FUZZ_CHECK(tok_decode(t, ids, ni, false, &d, &dl, &err) == BG_OK, "%s: decode: %s",
		   v->name, err.msg);
	struct tok_stream st;
	tok_stream_init(&st, t);
	char *b = NULL;
	size_t bl = 0, bc = 0;
	bool valid = fuzz_utf8_valid(s, n);
	for (size_t i = 0; i < ni; i++) {
		FUZZ_CHECK(tok_stream_push(&st, ids[i], &b, &bl, &bc) >= 0, "stream: out of memory");
		if (valid && !special)
			FUZZ_CHECK(fuzz_utf8_valid(b, bl), "%s: a partial character streamed out",
				   v->name);
	}
	FUZZ_CHECK(tok_stream_flush(&st, &b, &bl, &bc) >= 0, "flush: out of memory");
	FUZZ_CHECK(bl == dl && (dl == 0 || memcmp(b, d, dl) == 0),
		   "%s: streamed decode (%zu bytes) != decode (%zu bytes)", v->name, bl, dl);
	free(b);
	free(d);
	/* the round trip */
	if (!special && all_repr && !(v->spm && memmem(s, n, "\xe2\x96\x81", 3))) {
		int32_t *ids2 = ids;
		size_t n2 = ni;
		if (bos) {
			free(ids);
			FUZZ_CHECK(tok_encode(t, s, n, false, false, &ids2, &n2, &err) == BG_OK,
				   "encode: %s", err.msg);
		}
		ids = ids2;
		ni = n2;
		FUZZ_CHECK(tok_decode(t, ids, ni, true, &d, &dl, &err) == BG_OK, "decode: %s",
			   err.msg);
		FUZZ_CHECK(dl == n && (n == 0 || memcmp(d, s, n) == 0),
			   "%s: round trip of %zu bytes gave %zu bytes", v->name, n, dl);
		free(d);
	}
	free(ids);
	return 0;
}
