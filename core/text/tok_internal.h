/* tok_internal: private parts of the tokenizer module shared by core/text/tokenizer.c (vocabulary,
 * encoders, decoders) and core/text/tok_split.c (UTF-8 handling and the regex pre-tokenizers).
 * Not a public contract: only the tokenizer's own sources include it.
 *
 * Everything here mirrors llama.cpp's llama-vocab.cpp / unicode.cpp behaviour (the
 * reference), re-expressed in C: token attributes use llama.cpp's bit values so that the
 * rules copied from it (which tokens are partitioned, rendered, treated as EOG) read the
 * same.
 */
#ifndef BG_TOK_INTERNAL_H
#define BG_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include "status.h"

/* llama_token_attr bits */
enum {
	TOK_ATTR_UNKNOWN = 1 << 0,
	TOK_ATTR_UNUSED = 1 << 1,
	TOK_ATTR_NORMAL = 1 << 2,
	TOK_ATTR_CONTROL = 1 << 3,
	TOK_ATTR_USER_DEFINED = 1 << 4,
	TOK_ATTR_BYTE = 1 << 5,
	TOK_ATTR_LSTRIP = 1 << 7,
	TOK_ATTR_RSTRIP = 1 << 8,
};

/* ---- UTF-8, as llama.cpp reads it ---- */

/* Length of the UTF-8 sequence announced by lead byte c (llama.cpp's unicode_len_utf8:
 * 1 for ASCII and for stray continuation bytes, 2/3/4 from the high nibble). */
static inline size_t tok_utf8_len(uint8_t c)
{
	static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
	return lookup[c >> 4];
}

/* Decodes one code point at s[0, n) (n >= 1) the way llama.cpp's unicode_cpt_from_utf8
 * does (lenient: overlong forms and values up to 0x1FFFFF pass). Sets *adv to the bytes
 * consumed; an invalid byte yields 0xFFFD with *adv = 1. *canonical is false when
 * re-encoding the code point would not give back the same bytes (invalid, overlong,
 * surrogate, beyond U+10FFFF). */
uint32_t tok_utf8_decode(const uint8_t *s, size_t n, size_t *adv, bool *canonical);

/* Encodes cp (<= 0x10FFFF) into out[4]; returns the length. */
size_t tok_utf8_encode(uint32_t cp, char *out);

/* ---- pre-tokenizer (regex splitting) ---- */

#define TOK_MAX_REGEX 8

struct tok_splitter {
	int n_regex;
	void *code[TOK_MAX_REGEX]; /* pcre2_code_8 *, compiled once, shared read-only */
};

/* A growable list of byte ranges [start, end) into a text. */
struct tok_spans {
	size_t *v; /* [2 * n]: start, end pairs */
	size_t n, cap;
};

/* Compiles the regex list (NULL-terminated, llama.cpp syntax: \s means Unicode
 * White_Space) with PCRE2 (UTF, UCP, JIT when available). On failure nothing is kept. */
enum bg_status tok_split_init(struct tok_splitter *s, const char *const *regexes,
			      struct bg_err *err);
void tok_split_free(struct tok_splitter *s);

/* Splits text[0, len) like llama.cpp's unicode_regex_split: each regex in turn cuts every
 * current piece into its matches and the gaps between them (both kept). Invalid UTF-8
 * bytes take part as U+FFFD would (llama.cpp's view) but the ranges returned are in the
 * original bytes, so nothing is lost. out is reset first. */
enum bg_status tok_split_run(const struct tok_splitter *s, const char *text, size_t len,
			     struct tok_spans *out, struct bg_err *err);

void tok_spans_free(struct tok_spans *sp);

/* The regex list llama.cpp uses for a pre-tokenizer family (see tok_split.c). */
enum tok_pre {
	TOK_PRE_DEFAULT,
	TOK_PRE_LLAMA3,
	TOK_PRE_DEEPSEEK_LLM,
	TOK_PRE_DEEPSEEK_CODER,
	TOK_PRE_DEEPSEEK3,
	TOK_PRE_FALCON,
	TOK_PRE_STARCODER,
	TOK_PRE_GPT2,
	TOK_PRE_QWEN2,
	TOK_PRE_QWEN35,
	TOK_PRE_PORO,
	TOK_PRE_VIKING,
	TOK_PRE_TEKKEN,
	TOK_PRE_GPT4O,
	TOK_PRE_SEED_CODER,
	TOK_PRE_BAILINGMOE,
	TOK_PRE_GEMMA4,
	TOK_PRE_KIMI_K2,
};

const char *const *tok_pre_regexes(enum tok_pre pre);

/* ---- the tokenizer object (core/text/tokenizer.c builds it, core/text/tok_encode.c reads it) ----
 */

#define ESC_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's visible space */

enum tok_type { TOK_SPM, TOK_BPE };

/* Open-addressing map from a token's text to its id (the text lives in tok.arena). */
struct tok_map {
	struct tok_slot {
		uint32_t tag; /* high bits of the hash: most misses never touch the text */
		int32_t id;   /* -1 = empty */
	} * slot;	      /* [mask + 1] */
	size_t mask;
};

/* Merge ranks keyed by (left id, right id) for the merges whose two halves are tokens. */
struct tok_pairs {
	struct tok_pair {     /* one cache line holds four: a probe costs one miss */
		uint64_t key; /* left << 32 | right, UINT64_MAX = empty */
		int32_t rank;
		int32_t result; /* id of left+right, -1 if that is not a token */
	} * e;			/* [mask + 1] */
	size_t mask;
};

/* Merges with a half that is not a token (rare; malformed vocabularies), by strings. */
struct tok_strpair {
	char *arena;
	struct strpair_entry {
		size_t a, la, b, lb; /* offsets into arena */
		int32_t rank;
	} * e;
	size_t n;
	int32_t *slot; /* [mask + 1], index into e, -1 = empty */
	size_t mask;
};

struct tok {
	enum tok_type type;
	char model[16];
	enum tok_pre pre;
	int32_t n_vocab;

	char *arena;	/* token texts, each NUL-terminated */
	size_t *off;	/* [n_vocab] */
	uint32_t *len;	/* [n_vocab] */
	size_t max_len; /* max(len[]), at least 1: see tok_max_token_bytes */
	float *score;	/* [n_vocab] */
	uint16_t *attr; /* [n_vocab], TOK_ATTR_* bits */
	struct tok_map map;
	int32_t tok1[256]; /* single-byte texts, the most frequent lookup */

	char *pieces;	/* decoded bytes of every token (control tokens as their text) */
	size_t *poff;	/* [n_vocab] */
	uint32_t *plen; /* [n_vocab] */
	uint8_t *eog;	/* [n_vocab] 1 = ends generation */

	int32_t bos, eos, eot, eom, unk;
	bool add_bos, add_space_prefix, escape_ws, byte_encode, ignore_merges;

	/* special tokens in partition order (longest text first), with buckets by the first
	 * two bytes so that one pass over a text finds which of them occur at all */
	int32_t *special;		   /* [n_special] */
	size_t n_special, n_special_plain; /* plain: partitioned even without parse_special */
	uint32_t *sp2_start;		   /* [65537] */
	uint32_t *sp2_list;		   /* indices into special[] */
	uint32_t sp1_start[257];
	uint32_t *sp1_list;

	struct tok_pairs merges;
	struct tok_strpair merges_str;
	char byte_enc[256][2]; /* GPT-2 bytes_to_unicode, UTF-8 */
	uint8_t byte_enc_len[256];
	int32_t byte_enc_tok[256]; /* token of each mapped byte */
	int16_t cp_to_byte[324];   /* inverse map for code points < 324, -1 = none */
	int32_t hex_byte_tok[256]; /* "<0xXX>" tokens, -1 = absent */

	struct tok_splitter split;
	bool spm_cut_ok; /* no token holds U+2581 after other text: SPM can work per word */
};

/* ---- hashing ---- */

static inline uint64_t tok_load64(const uint8_t *s)
{
	uint64_t v;
	memcpy(&v, s, 8);
	return v;
}

static inline uint32_t tok_load32(const uint8_t *s)
{
	uint32_t v;
	memcpy(&v, s, 4);
	return v;
}

/* A fast hash of s[0, n): token texts are short, so the tail is read with overlapping
 * fixed-size loads instead of a variable-length copy. */
static inline uint64_t hash_bytes(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
	size_t len = n;
	while (n > 8) {
		h = (h ^ tok_load64(s)) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
		s += 8;
		n -= 8;
	}
	uint64_t v;
	if (len >= 8)
		v = tok_load64(s + n - 8); /* the last 8 bytes, overlapping what came before */
	else if (n >= 4)
		v = tok_load32(s) | (uint64_t)tok_load32(s + n - 4) << 32;
	else if (n > 0)
		v = s[0] | (uint64_t)s[n / 2] << 8 | (uint64_t)s[n - 1] << 16;
	else
		v = 0;
	h = (h ^ v) * 0x94d049bb133111ebull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h;
}

static inline size_t pow2_at_least(size_t n)
{
	size_t c = 16;
	while (c < n)
		c <<= 1;
	return c;
}

/* Id of the token whose text is s[0, n), or -1. */
static inline int32_t lookup(const struct tok *t, const char *s, size_t n)
{
	if (n == 1)
		return t->tok1[(uint8_t)s[0]];
	uint64_t h = hash_bytes(s, n);
	uint32_t tag = (uint32_t)(h >> 32);
	size_t i = h & t->map.mask;
	for (;;) {
		const struct tok_slot *sl = &t->map.slot[i];
		if (sl->id < 0)
			return -1;
		if (sl->tag == tag && t->len[sl->id] == n &&
		    memcmp(t->arena + t->off[sl->id], s, n) == 0)
			return sl->id;
		i = (i + 1) & t->map.mask;
	}
}

static inline uint64_t pair_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static inline bool pair_find(const struct tok_pairs *p, int32_t l, int32_t r, int32_t *rank,
			     int32_t *result)
{
	if (!p->e)
		return false;
	uint64_t k = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
	size_t i = pair_hash(k) & p->mask;
	for (;;) {
		const struct tok_pair *e = &p->e[i];
		if (e->key == UINT64_MAX)
			return false;
		if (e->key == k) {
			*rank = e->rank;
			*result = e->result;
			return true;
		}
		i = (i + 1) & p->mask;
	}
}

static inline uint64_t strpair_hash(const char *a, size_t la, const char *b, size_t lb)
{
	return hash_bytes(a, la) * 31 + hash_bytes(b, lb);
}

static inline int32_t strpair_find(const struct tok_strpair *m, const char *a, size_t la,
				   const char *b, size_t lb)
{
	if (!m->n)
		return -1;
	size_t i = strpair_hash(a, la, b, lb) & m->mask;
	for (;;) {
		int32_t k = m->slot[i];
		if (k < 0)
			return -1;
		const struct strpair_entry *e = &m->e[k];
		if (e->la == la && e->lb == lb && memcmp(m->arena + e->a, a, la) == 0 &&
		    memcmp(m->arena + e->b, b, lb) == 0)
			return e->rank;
		i = (i + 1) & m->mask;
	}
}

#endif
