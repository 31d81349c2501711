/* tokenizer: loading the vocabulary from GGUF metadata (ids, scores, attributes, special
 * tokens, BOS/EOG policy, merges, decode pieces) and decoding. The behaviour follows
 * llama.cpp's llama-vocab.cpp (the reference the tests compare with). The encoders are in
 * tok_encode.c, the regex pre-tokenizers in tok_split.c, the shared struct in
 * tok_internal.h.
 *
 * Deliberate differences from llama.cpp, all on inputs it mishandles or on decoding:
 *  - invalid UTF-8 reaching a BPE vocabulary: llama.cpp turns each bad byte into U+FFFD
 *    (bytes EF BF BD); here the byte itself is encoded, so decode(encode(x)) == x. Word
 *    boundaries are still the ones llama.cpp computes.
 *  - invalid UTF-8 reaching SPM (or Gemma 4's BPE): llama.cpp cuts symbols by the lead
 *    byte's announced length, so a stray lead byte swallows what follows (even an escaped
 *    space); here a byte that does not start a complete sequence is a symbol of its own.
 *    Valid UTF-8 is cut identically.
 *  - an SPM byte with no <0xXX> token: llama.cpp throws; here the unknown token is used.
 *  - which of several EOT-looking tokens becomes "the" EOT: llama.cpp takes the first in
 *    hash-map order; here the first in its list of names.
 *  - a byte-level BPE token holding characters outside the byte alphabet (command-r has
 *    some): llama.cpp decodes them as "[UNK_BYTE_0x...]"; here the token's text is
 *    used as is, as the Hugging Face ByteLevel decoder does.
 *  - tok_decode returns the exact bytes: no clean_up_tokenization_spaces pass (llama.cpp's
 *    llama_detokenize drops the space in " ." etc. for some vocabularies; its generation
 *    output, a concatenation of pieces, does not), and strip_leading_space strips the
 *    first visible piece even after BOS (llama_detokenize would not).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/tokenizer.h"

/* ---- accessors ---- */

int32_t tok_n_vocab(const struct tok *t)
{
	return t->n_vocab;
}
size_t tok_max_token_bytes(const struct tok *t)
{
	return t->max_len ? t->max_len : 1;
}
const char *tok_model_name(const struct tok *t)
{
	return t->model;
}
int32_t tok_bos(const struct tok *t)
{
	return t->bos;
}
int32_t tok_eos(const struct tok *t)
{
	return t->eos;
}
int32_t tok_eot(const struct tok *t)
{
	return t->eot;
}
bool tok_add_bos(const struct tok *t)
{
	return t->add_bos && t->bos >= 0;
}

bool tok_is_eog(const struct tok *t, int32_t id)
{
	return id >= 0 && id < t->n_vocab && t->eog[id];
}

const char *tok_text(const struct tok *t, int32_t id)
{
	if (id < 0 || id >= t->n_vocab)
		return NULL;
	return t->arena + t->off[id];
}

/* ---- loading ---- */

/* tokenizer.ggml.pre values and what llama.cpp does with them */
static const struct pre_info {
	const char *name;
	enum tok_pre pre;
	bool ignore_merges, add_bos, no_bos;
} pre_table[] = {
    {"default", TOK_PRE_DEFAULT, 0, 0, 0},
    {"llama3", TOK_PRE_LLAMA3, 1, 1, 0},
    {"llama-v3", TOK_PRE_LLAMA3, 1, 1, 0},
    {"llama-bpe", TOK_PRE_LLAMA3, 1, 1, 0},
    {"falcon3", TOK_PRE_LLAMA3, 1, 1, 0},
    {"falcon-h1", TOK_PRE_LLAMA3, 1, 1, 0},
    {"pixtral", TOK_PRE_LLAMA3, 1, 1, 0},
    {"midm-2.0", TOK_PRE_LLAMA3, 1, 1, 0},
    {"lfm2", TOK_PRE_LLAMA3, 1, 1, 0},
    {"jina-v5-nano", TOK_PRE_LLAMA3, 1, 1, 0},
    {"dbrx", TOK_PRE_LLAMA3, 0, 0, 0},
    {"smaug-bpe", TOK_PRE_LLAMA3, 0, 0, 0},
    {"glm4", TOK_PRE_LLAMA3, 0, 0, 1},
    {"chatglm-bpe", TOK_PRE_LLAMA3, 0, 0, 1},
    {"deepseek-llm", TOK_PRE_DEEPSEEK_LLM, 0, 0, 0},
    {"deepseek-coder", TOK_PRE_DEEPSEEK_CODER, 0, 0, 0},
    {"deepseek-v3", TOK_PRE_DEEPSEEK3, 0, 0, 0},
    {"hunyuan-dense", TOK_PRE_DEEPSEEK3, 0, 0, 0},
    {"joyai-llm", TOK_PRE_DEEPSEEK3, 0, 0, 0},
    {"hy_v4", TOK_PRE_DEEPSEEK3, 0, 0, 0},
    {"falcon", TOK_PRE_FALCON, 0, 0, 0},
    {"starcoder", TOK_PRE_STARCODER, 0, 0, 0},
    {"refact", TOK_PRE_STARCODER, 0, 0, 0},
    {"command-r", TOK_PRE_STARCODER, 0, 0, 0},
    {"smollm", TOK_PRE_STARCODER, 0, 0, 0},
    {"codeshell", TOK_PRE_STARCODER, 0, 0, 0},
    {"exaone", TOK_PRE_STARCODER, 0, 0, 0},
    {"minerva-7b", TOK_PRE_STARCODER, 0, 0, 0},
    {"mellum2", TOK_PRE_STARCODER, 0, 0, 0},
    {"gpt-2", TOK_PRE_GPT2, 0, 0, 0},
    {"mpt", TOK_PRE_GPT2, 0, 0, 0},
    {"olmo", TOK_PRE_GPT2, 0, 0, 0},
    {"jais", TOK_PRE_GPT2, 0, 0, 0},
    {"trillion", TOK_PRE_GPT2, 0, 0, 0},
    {"granite-docling", TOK_PRE_GPT2, 0, 0, 0},
    {"phi-2", TOK_PRE_GPT2, 0, 0, 0},
    {"jina-es", TOK_PRE_GPT2, 0, 0, 0},
    {"jina-de", TOK_PRE_GPT2, 0, 0, 0},
    {"gigachat", TOK_PRE_GPT2, 0, 0, 0},
    {"jina-v2-es", TOK_PRE_GPT2, 0, 0, 0},
    {"jina-v2-de", TOK_PRE_GPT2, 0, 0, 0},
    {"jina-v1-en", TOK_PRE_GPT2, 0, 0, 0},
    {"jina-v2-code", TOK_PRE_GPT2, 0, 0, 0},
    {"roberta-bpe", TOK_PRE_GPT2, 0, 0, 0},
    {"a.x-4.0", TOK_PRE_GPT2, 0, 0, 0},
    {"mellum", TOK_PRE_GPT2, 0, 0, 0},
    {"modern-bert", TOK_PRE_GPT2, 0, 0, 0},
    {"exaone4", TOK_PRE_GPT2, 0, 0, 0},
    {"qwen2", TOK_PRE_QWEN2, 0, 0, 0},
    {"deepseek-r1-qwen", TOK_PRE_QWEN2, 0, 0, 0},
    {"kormo", TOK_PRE_QWEN2, 0, 0, 0},
    {"f2llmv2", TOK_PRE_QWEN2, 0, 0, 0},
    {"megrez", TOK_PRE_QWEN2, 0, 0, 0},
    {"stablelm2", TOK_PRE_QWEN2, 0, 0, 0},
    {"hunyuan", TOK_PRE_QWEN2, 0, 0, 0},
    {"solar-open", TOK_PRE_QWEN2, 0, 0, 0},
    {"qwen35", TOK_PRE_QWEN35, 0, 0, 0},
    {"poro-chat", TOK_PRE_PORO, 0, 0, 0},
    {"bloom", TOK_PRE_PORO, 0, 0, 0},
    {"gpt3-finnish", TOK_PRE_PORO, 0, 0, 0},
    {"viking", TOK_PRE_VIKING, 0, 0, 0},
    {"tekken", TOK_PRE_TEKKEN, 1, 1, 0},
    {"gpt-4o", TOK_PRE_GPT4O, 0, 0, 0},
    {"llama4", TOK_PRE_GPT4O, 0, 0, 0},
    {"kanana2", TOK_PRE_GPT4O, 0, 0, 0},
    {"talkie", TOK_PRE_GPT4O, 0, 0, 0},
    {"minimax-m2", TOK_PRE_GPT4O, 0, 0, 0},
    {"seed-coder", TOK_PRE_SEED_CODER, 0, 0, 0},
    {"bailingmoe", TOK_PRE_BAILINGMOE, 0, 0, 0},
    {"bailingmoe2", TOK_PRE_BAILINGMOE, 0, 0, 0},
    {"llada-moe", TOK_PRE_BAILINGMOE, 0, 0, 0},
    {"gemma4", TOK_PRE_GEMMA4, 0, 0, 0},
    {"granite-embed-multi-311m", TOK_PRE_GEMMA4, 0, 0, 0},
    {"kimi-k2", TOK_PRE_KIMI_K2, 0, 0, 0},
};

void tok_free(struct tok *t)
{
	if (!t)
		return;
	free(t->arena);
	free(t->off);
	free(t->len);
	free(t->score);
	free(t->attr);
	free(t->map.slot);
	free(t->pieces);
	free(t->poff);
	free(t->plen);
	free(t->eog);
	free(t->special);
	free(t->sp2_start);
	free(t->sp2_list);
	free(t->sp1_list);
	free(t->merges.e);
	free(t->merges_str.arena);
	free(t->merges_str.e);
	free(t->merges_str.slot);
	tok_split_free(&t->split);
	free(t);
}

static bool str_eq(struct gguf_str s, const char *c)
{
	size_t n = strlen(c);
	return s.len == n && memcmp(s.ptr, c, n) == 0;
}

/* Reads a special-token id key: ids outside the vocabulary keep the default. */
static void read_special(const struct gguf_ctx *g, const char *key, int32_t n_vocab, int32_t *id)
{
	if (*id >= n_vocab)
		*id = -1;
	int64_t v;
	if (gguf_get_i64(g, key, &v) && v >= 0 && v < n_vocab)
		*id = (int32_t)v;
}

static int32_t find_first(const struct tok *t, const char *const *names)
{
	for (; *names; names++) {
		int32_t id = lookup(t, *names, strlen(*names));
		if (id >= 0)
			return id;
	}
	return -1;
}

/* llama.cpp's text-based detection of a special token kind: when *id is unset, the first
 * present name becomes it and is forced to CONTROL. */
static void detect_special(struct tok *t, int32_t *id, const char *const *names)
{
	if (*id >= 0)
		return;
	*id = find_first(t, names);
	if (*id >= 0)
		t->attr[*id] |= TOK_ATTR_CONTROL;
}

static enum bg_status load_vocab(struct tok *t, const struct gguf_ctx *g, struct bg_err *err)
{
	enum gguf_type et;
	uint64_t n;
	if (!gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) || et != GGUF_TYPE_STRING)
		return bg_fail(err, BG_ERR_FORMAT,
			       "tokenizer.ggml.tokens is missing or not strings");
	if (n == 0 || n > INT32_MAX / 2)
		return bg_fail(err, BG_ERR_FORMAT, "tokenizer.ggml.tokens has %llu entries",
			       (unsigned long long)n);
	t->n_vocab = (int32_t)n;
	size_t total = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct gguf_str s = gguf_arr_str(g, "tokenizer.ggml.tokens", i);
		total += (s.len ? s.len : 32) + 1;
	}
	t->arena = malloc(total);
	t->off = malloc(n * sizeof *t->off);
	t->len = malloc(n * sizeof *t->len);
	t->score = calloc(n, sizeof *t->score);
	t->attr = malloc(n * sizeof *t->attr);
	t->map.mask = pow2_at_least(n * 2) - 1;
	t->map.slot = malloc((t->map.mask + 1) * sizeof *t->map.slot);
	if (!t->arena || !t->off || !t->len || !t->score || !t->attr || !t->map.slot)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory loading the vocabulary");
	memset(t->map.slot, 0xff, (t->map.mask + 1) * sizeof *t->map.slot);
	memset(t->tok1, 0xff, sizeof t->tok1);
	size_t o = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct gguf_str s = gguf_arr_str(g, "tokenizer.ggml.tokens", i);
		size_t l;
		if (s.len == 0) { /* as llama.cpp: an empty token gets a placeholder text */
			l = (size_t)snprintf(t->arena + o, 32, "[EMPTY_%llu]",
					     (unsigned long long)i);
		} else {
			memcpy(t->arena + o, s.ptr, s.len);
			l = s.len;
		}
		t->arena[o + l] = 0;
		t->off[i] = o;
		t->len[i] = (uint32_t)l;
		if (l > t->max_len)
			t->max_len = l;
		uint64_t hv = hash_bytes(t->arena + o, l);
		size_t h = hv & t->map.mask;
		for (;;) {
			int32_t id = t->map.slot[h].id;
			if (id < 0)
				break;
			if (t->len[id] == l && memcmp(t->arena + t->off[id], t->arena + o, l) == 0)
				return bg_fail(err, BG_ERR_FORMAT,
					       "duplicate token in vocabulary: ids %d and %llu", id,
					       (unsigned long long)i);
			h = (h + 1) & t->map.mask;
		}
		t->map.slot[h] = (struct tok_slot){(uint32_t)(hv >> 32), (int32_t)i};
		if (l == 1)
			t->tok1[(uint8_t)t->arena[o]] = (int32_t)i;
		o += l + 1;
	}

	if (gguf_find_key(g, "tokenizer.ggml.scores") >= 0 &&
	    !gguf_arr_copy_f32(g, "tokenizer.ggml.scores", t->score, n))
		return bg_fail(err, BG_ERR_FORMAT,
			       "tokenizer.ggml.scores does not match the tokens");

	for (uint64_t i = 0; i < n; i++)
		t->attr[i] = TOK_ATTR_NORMAL;
	if (gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
		int32_t *tt = malloc(n * sizeof *tt);
		if (!tt)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory loading token types");
		if (!gguf_arr_copy_i32(g, "tokenizer.ggml.token_type", tt, n)) {
			free(tt);
			return bg_fail(err, BG_ERR_FORMAT,
				       "tokenizer.ggml.token_type does not match the tokens");
		}
		for (uint64_t i = 0; i < n; i++) {
			switch (tt[i]) {
			case 1: t->attr[i] = TOK_ATTR_NORMAL; break;
			case 2: t->attr[i] = TOK_ATTR_UNKNOWN; break;
			case 3: t->attr[i] = TOK_ATTR_CONTROL; break;
			case 4: t->attr[i] = TOK_ATTR_USER_DEFINED; break;
			case 5: t->attr[i] = TOK_ATTR_UNUSED; break;
			case 6: t->attr[i] = TOK_ATTR_BYTE; break;
			default: t->attr[i] = 0; break; /* undefined */
			}
		}
		free(tt);
	}
	return BG_OK;
}

/* ---- special tokens: load_specials in named steps ---- */

/* Fill-in-the-middle ids (-1: none); pad, rep and sep also end generation. */
struct fim_ids {
	int32_t pre, suf, mid, pad, rep, sep;
};

/* The names llama.cpp recognises special tokens by, when the file does not say. */
static const char *const eot_names[] = {"<|eot_id|>",
					"<|im_end|>",
					"<|end|>",
					"<end_of_turn>",
					"<|endoftext|>",
					"<|end_of_text|>",
					"<EOT>",
					"_<EOT>",
					"[EOT]",
					"<\xef\xbd\x9c"
					"end" ESC_SPACE "of" ESC_SPACE "sentence\xef\xbd\x9c>",
					"<end_of_utterance>",
					NULL};
static const char *const eom_names[] = {"<|eom_id|>", NULL};
static const char *const pre_names[] = {"<|fim_prefix|>",
					"<fim-prefix>",
					"<fim_prefix>",
					"<\xef\xbd\x9c"
					"fim" ESC_SPACE "begin\xef\xbd\x9c>",
					"<PRE>",
					ESC_SPACE "<PRE>",
					"<|code_prefix|>",
					"<|prefix|>",
					NULL};
static const char *const suf_names[] = {"<|fim_suffix|>",
					"<fim-suffix>",
					"<fim_suffix>",
					"<\xef\xbd\x9c"
					"fim" ESC_SPACE "hole\xef\xbd\x9c>",
					"<SUF>",
					ESC_SPACE "<SUF>",
					"<|code_suffix|>",
					"<|suffix|>",
					NULL};
static const char *const mid_names[] = {"<|fim_middle|>",
					"<fim-middle>",
					"<fim_middle>",
					"<\xef\xbd\x9c"
					"fim" ESC_SPACE "end\xef\xbd\x9c>",
					"<MID>",
					ESC_SPACE "<MID>",
					"<|code_middle|>",
					"<|middle|>",
					NULL};
static const char *const pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
					"<PAD>",       "[PAD]",	    NULL};
static const char *const rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
					"<REPO>",	"<reponame>",	 NULL};
static const char *const sep_names[] = {"<|file_sep|>", NULL};
static const char *const eog_names[] = {"<|eot_id|>",
					"<|im_end|>",
					"<|end|>",
					"<|return|>",
					"<|call|>",
					"<|flush|>",
					"<|calls|>",
					"<end_of_turn>",
					"<|endoftext|>",
					"</s>",
					"<|eom_id|>",
					"<EOT>",
					"_<EOT>",
					"[EOT]",
					"[EOS]",
					"<|end_of_text|>",
					"<end_of_utterance>",
					"<eos>",
					"<turn|>",
					"<|tool_response>",
					"<\xef\xbd\x9c"
					"end" ESC_SPACE "of" ESC_SPACE "sentence\xef\xbd\x9c>",
					"[e~[",
					NULL};
static const char *const ud_names[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>",
				       NULL};

/* Step 1: the ids the file states (after the defaults of the vocabulary's type) and its
 * BOS policy. */
static void specials_from_keys(struct tok *t, const struct gguf_ctx *g, const struct pre_info *pi,
			       struct fim_ids *f)
{
	int32_t n = t->n_vocab;
	*f = (struct fim_ids){-1, -1, -1, -1, -1, -1};
	if (t->type == TOK_SPM) {
		t->bos = 1, t->eos = 2, t->unk = 0;
	} else if (t->pre == TOK_PRE_GEMMA4 && strcmp(t->model, "gemma4") == 0) {
		t->bos = t->eos = t->unk = -1;
	} else {
		t->bos = t->eos = 11, t->unk = -1;
	}
	if (pi && pi->no_bos)
		t->bos = -1;
	t->eot = t->eom = -1;
	read_special(g, "tokenizer.ggml.bos_token_id", n, &t->bos);
	read_special(g, "tokenizer.ggml.eos_token_id", n, &t->eos);
	read_special(g, "tokenizer.ggml.eot_token_id", n, &t->eot);
	read_special(g, "tokenizer.ggml.eom_token_id", n, &t->eom);
	read_special(g, "tokenizer.ggml.unknown_token_id", n, &t->unk);
	read_special(g, "tokenizer.ggml.fim_pre_token_id", n, &f->pre);
	read_special(g, "tokenizer.ggml.fim_suf_token_id", n, &f->suf);
	read_special(g, "tokenizer.ggml.fim_mid_token_id", n, &f->mid);
	read_special(g, "tokenizer.ggml.fim_pad_token_id", n, &f->pad);
	read_special(g, "tokenizer.ggml.fim_rep_token_id", n, &f->rep);
	read_special(g, "tokenizer.ggml.fim_sep_token_id", n, &f->sep);
	read_special(g, "tokenizer.ggml.prefix_token_id", n, &f->pre);
	read_special(g, "tokenizer.ggml.suffix_token_id", n, &f->suf);
	read_special(g, "tokenizer.ggml.middle_token_id", n, &f->mid);

	bool b;
	if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
		t->add_bos = b;
	if (t->pre == TOK_PRE_GEMMA4)
		t->add_bos = true; /* llama.cpp's Gemma 4 override */
}

/* Step 2: the ids the file left unset, found by name; control tokens named "unused..."
 * are unused. */
static void specials_by_name(struct tok *t, struct fim_ids *f)
{
	detect_special(t, &t->eot, eot_names);
	detect_special(t, &t->eom, eom_names);
	detect_special(t, &f->pre, pre_names);
	detect_special(t, &f->suf, suf_names);
	detect_special(t, &f->mid, mid_names);
	detect_special(t, &f->pad, pad_names);
	detect_special(t, &f->rep, rep_names);
	detect_special(t, &f->sep, sep_names);
	for (int32_t i = 0; i < t->n_vocab; i++)
		if ((t->attr[i] & TOK_ATTR_CONTROL) && strstr(t->arena + t->off[i], "unused"))
			t->attr[i] |= TOK_ATTR_UNUSED;
}

/* Step 3: the end-of-generation set: the FIM pad/rep/sep ids, the tokens named as ends
 * (made control tokens), EOS, EOT and EOM; gpt-oss's structural tokens always render. */
static enum bg_status specials_eog(struct tok *t, const struct fim_ids *f, struct bg_err *err)
{
	t->eog = calloc((size_t)t->n_vocab, 1);
	if (!t->eog)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	const int32_t fim_ends[] = {f->pad, f->rep, f->sep};
	for (size_t i = 0; i < sizeof fim_ends / sizeof fim_ends[0]; i++)
		if (fim_ends[i] >= 0)
			t->eog[fim_ends[i]] = 1;
	for (const char *const *p = eog_names; *p; p++) {
		int32_t id = lookup(t, *p, strlen(*p));
		if (id >= 0) {
			t->eog[id] = 1;
			t->attr[id] |= TOK_ATTR_CONTROL;
		}
	}
	for (const char *const *p = ud_names; *p; p++) {
		int32_t id = lookup(t, *p, strlen(*p));
		if (id >= 0)
			t->attr[id] = TOK_ATTR_USER_DEFINED;
	}
	if (t->eos >= 0)
		t->eog[t->eos] = 1;
	if (t->eot >= 0)
		t->eog[t->eot] = 1;
	if (t->eom >= 0)
		t->eog[t->eom] = 1;
	return BG_OK;
}

/* Step 4: the vocabularies where a name-based end is not one. */
static void specials_exceptions(struct tok *t)
{
	/* o200k_harmony / solar-open: <|end|> is not an end of generation there */
	int32_t id_return = lookup(t, "<|return|>", 10), id_call = lookup(t, "<|call|>", 8);
	int32_t id_calls = lookup(t, "<|calls|>", 9), id_flush = lookup(t, "<|flush|>", 9);
	int32_t id_end = lookup(t, "<|end|>", 7);
	bool has_return = id_return >= 0 && t->eog[id_return];
	bool has_call = (id_call >= 0 && t->eog[id_call]) || (id_calls >= 0 && t->eog[id_calls]);
	bool has_flush = id_flush >= 0 && t->eog[id_flush];
	if (id_end >= 0 && t->eog[id_end] &&
	    ((has_return && has_call) || (has_call && has_flush))) {
		t->eog[id_end] = 0;
		t->attr[id_end] = TOK_ATTR_USER_DEFINED;
	}
	/* Gemma 4: </s> is ordinary text */
	int32_t id_tr = lookup(t, "<|tool_response>", 16), id_s = lookup(t, "</s>", 4);
	if (id_tr >= 0 && t->eog[id_tr] && id_s >= 0 && t->eog[id_s]) {
		t->eog[id_s] = 0;
		t->attr[id_s] = TOK_ATTR_NORMAL;
	}
}

/* Special ids, BOS policy, EOG set and the attribute fix-ups llama.cpp applies by name. */
static enum bg_status load_specials(struct tok *t, const struct gguf_ctx *g,
				    const struct pre_info *pi, struct bg_err *err)
{
	struct fim_ids fim;
	specials_from_keys(t, g, pi, &fim);
	specials_by_name(t, &fim);
	enum bg_status st = specials_eog(t, &fim, err);
	if (st != BG_OK)
		return st;
	specials_exceptions(t);
	return BG_OK;
}

static int cmp_special(const void *a, const void *b, void *arg)
{
	const struct tok *t = arg;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	if (t->len[x] != t->len[y])
		return t->len[x] > t->len[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

static bool name_contains(const struct gguf_ctx *g, const char *key, const char *needle)
{
	struct gguf_str s;
	if (!gguf_get_str(g, key, &s))
		return false;
	char buf[256];
	size_t n = s.len < sizeof buf - 1 ? s.len : sizeof buf - 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)tolower((unsigned char)s.ptr[i]);
	buf[n] = 0;
	return strstr(buf, needle) != NULL;
}

static void set_attr_by_text(struct tok *t, const char *text, uint16_t bit, bool on)
{
	int32_t id = lookup(t, text, strlen(text));
	if (id < 0)
		return;
	if (on)
		t->attr[id] |= bit;
	else
		t->attr[id] &= (uint16_t)~bit;
}

static enum bg_status build_special_cache(struct tok *t, const struct gguf_ctx *g,
					  struct bg_err *err)
{
	const uint16_t sp = TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN;
	size_t k = 0;
	for (int32_t i = 0; i < t->n_vocab; i++)
		k += (t->attr[i] & sp) != 0;
	t->special = malloc((k ? k : 1) * sizeof *t->special);
	if (!t->special)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	k = 0;
	for (int32_t i = 0; i < t->n_vocab; i++)
		if (t->attr[i] & sp)
			t->special[k++] = i;
	t->n_special = k;
	qsort_r(t->special, k, sizeof *t->special, cmp_special, t);

	/* per-model attributes llama.cpp sets after building the cache */
	if (name_contains(g, "tokenizer.ggml.pre", "jina-v2-de") ||
	    name_contains(g, "tokenizer.ggml.pre", "jina-v2-es") ||
	    name_contains(g, "tokenizer.ggml.pre", "jina-v2-code") ||
	    name_contains(g, "general.architecture", "nomic-bert-moe") ||
	    name_contains(g, "general.architecture", "jina-bert-v3")) {
		set_attr_by_text(t, "<mask>", TOK_ATTR_LSTRIP, true);
	} else if (name_contains(g, "general.name", "phi-3") ||
		   name_contains(g, "general.name", "phi3")) {
		for (size_t i = 0; i < k; i++)
			t->attr[t->special[i]] |= TOK_ATTR_RSTRIP;
		set_attr_by_text(t, "</s>", TOK_ATTR_RSTRIP, true);
		set_attr_by_text(t, "<unk>", TOK_ATTR_RSTRIP, false);
		set_attr_by_text(t, "<s>", TOK_ATTR_RSTRIP, false);
		set_attr_by_text(t, "<|endoftext|>", TOK_ATTR_RSTRIP, false);
	} else if (name_contains(g, "general.name", "modern-bert")) {
		set_attr_by_text(t, "[MASK]", TOK_ATTR_LSTRIP, true);
	}

	/* buckets by first two bytes (one-byte specials by their byte) */
	t->sp2_start = calloc(65537, sizeof *t->sp2_start);
	t->sp2_list = malloc((k ? k : 1) * sizeof *t->sp2_list);
	t->sp1_list = malloc((k ? k : 1) * sizeof *t->sp1_list);
	if (!t->sp2_start || !t->sp2_list || !t->sp1_list)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	memset(t->sp1_start, 0, sizeof t->sp1_start);
	t->n_special_plain = 0;
	for (size_t i = 0; i < k; i++) {
		int32_t id = t->special[i];
		const uint8_t *s = (const uint8_t *)t->arena + t->off[id];
		if (!(t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)))
			t->n_special_plain++;
		if (t->len[id] >= 2)
			t->sp2_start[((size_t)s[0] << 8 | s[1]) + 1]++;
		else
			t->sp1_start[s[0] + 1]++;
	}
	for (size_t i = 0; i < 65536; i++)
		t->sp2_start[i + 1] += t->sp2_start[i];
	for (size_t i = 0; i < 256; i++)
		t->sp1_start[i + 1] += t->sp1_start[i];
	uint32_t *fill2 = malloc(65536 * sizeof *fill2);
	if (!fill2)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	memcpy(fill2, t->sp2_start, 65536 * sizeof *fill2);
	uint32_t fill1[256];
	memcpy(fill1, t->sp1_start, sizeof fill1);
	for (size_t i = 0; i < k; i++) {
		int32_t id = t->special[i];
		const uint8_t *s = (const uint8_t *)t->arena + t->off[id];
		if (t->len[id] >= 2)
			t->sp2_list[fill2[(size_t)s[0] << 8 | s[1]]++] = (uint32_t)i;
		else
			t->sp1_list[fill1[s[0]]++] = (uint32_t)i;
	}
	free(fill2);
	return BG_OK;
}

static void byte_level_tables(struct tok *t)
{
	memset(t->cp_to_byte, 0xff, sizeof t->cp_to_byte);
	int extra = 0;
	for (int b = 0; b < 256; b++) {
		bool keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
		uint32_t cp = keep ? (uint32_t)b : (uint32_t)(256 + extra++);
		char u[4];
		size_t l = tok_utf8_encode(cp, u);
		memcpy(t->byte_enc[b], u, l);
		t->byte_enc_len[b] = (uint8_t)l;
		t->cp_to_byte[cp] = (int16_t)b;
		t->byte_enc_tok[b] = lookup(t, u, l);
	}
	for (int b = 0; b < 256; b++) {
		char hex[8];
		snprintf(hex, sizeof hex, "<0x%02X>", b);
		t->hex_byte_tok[b] = lookup(t, hex, 6);
	}
}

static enum bg_status load_merges(struct tok *t, const struct gguf_ctx *g, struct bg_err *err)
{
	enum gguf_type et;
	uint64_t n;
	if (!gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n) || et != GGUF_TYPE_STRING)
		return bg_fail(err, BG_ERR_FORMAT, "cannot find tokenizer merges in model file");
	struct tok_pairs *p = &t->merges;
	p->mask = pow2_at_least(n * 2 + 16) - 1;
	p->e = malloc((p->mask + 1) * sizeof *p->e);
	char *tmp = NULL;
	size_t tmp_cap = 0;
	if (!p->e)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory loading merges");
	for (size_t i = 0; i <= p->mask; i++)
		p->e[i].key = UINT64_MAX;
	struct tok_strpair *m = &t->merges_str;
	size_t m_cap = 0, arena_len = 0, arena_cap = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct gguf_str w = gguf_arr_str(g, "tokenizer.ggml.merges", i);
		/* split at the first space after the first byte, as llama.cpp does */
		const char *sp = w.len > 1 ? memchr(w.ptr + 1, ' ', w.len - 1) : NULL;
		const char *a = w.ptr, *b = w.ptr;
		size_t la = 0, lb = 0;
		if (sp) {
			la = (size_t)(sp - w.ptr);
			b = sp + 1;
			lb = w.len - la - 1;
		}
		int32_t l = lookup(t, a, la), r = lookup(t, b, lb);
		if (l >= 0 && r >= 0) {
			uint64_t k = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
			size_t h = pair_hash(k) & p->mask;
			while (p->e[h].key != UINT64_MAX && p->e[h].key != k)
				h = (h + 1) & p->mask;
			if (p->e[h].key == k)
				continue; /* llama.cpp keeps the first rank */
			if (!tmp || la + lb > tmp_cap) { /* never NULL: memcpy(NULL, ., 0) is UB */
				tmp_cap = (la + lb) * 2 + 16;
				char *nt = realloc(tmp, tmp_cap);
				if (!nt) {
					free(tmp);
					return bg_fail(err, BG_ERR_NOMEM,
						       "out of memory loading merges");
				}
				tmp = nt;
			}
			memcpy(tmp, a, la);
			memcpy(tmp + la, b, lb);
			p->e[h] = (struct tok_pair){k, (int32_t)i, lookup(t, tmp, la + lb)};
			continue;
		}
		if (strpair_find(m, a, la, b, lb) >= 0)
			continue;
		if (m->n == m_cap) { /* rare path: the table is rebuilt as it grows */
			m_cap = m_cap ? m_cap * 2 : 64;
			struct strpair_entry *e = realloc(m->e, m_cap * sizeof *e);
			int32_t *slot = malloc(m_cap * 2 * sizeof *slot);
			if (!e || !slot) {
				free(slot);
				if (e)
					m->e = e;
				free(tmp);
				return bg_fail(err, BG_ERR_NOMEM, "out of memory loading merges");
			}
			m->e = e;
			free(m->slot);
			m->slot = slot;
			m->mask = m_cap * 2 - 1;
			memset(slot, 0xff, m_cap * 2 * sizeof *slot);
			for (size_t j = 0; j < m->n; j++) {
				size_t h = strpair_hash(m->arena + e[j].a, e[j].la,
							m->arena + e[j].b, e[j].lb) &
					   m->mask;
				while (slot[h] >= 0)
					h = (h + 1) & m->mask;
				slot[h] = (int32_t)j;
			}
		}
		/* allocated even for two empty halves (a merge without a space): the lookups
		 * below do arithmetic and memcmp on m->arena, which must not be NULL */
		if (!m->arena || arena_len + la + lb > arena_cap) {
			arena_cap = (arena_len + la + lb) * 2 + 256;
			char *na = realloc(m->arena, arena_cap);
			if (!na) {
				free(tmp);
				return bg_fail(err, BG_ERR_NOMEM, "out of memory loading merges");
			}
			m->arena = na;
		}
		struct strpair_entry *e = &m->e[m->n];
		e->a = arena_len;
		e->la = la;
		memcpy(m->arena + arena_len, a, la);
		arena_len += la;
		e->b = arena_len;
		e->lb = lb;
		memcpy(m->arena + arena_len, b, lb);
		arena_len += lb;
		e->rank = (int32_t)i;
		size_t h = strpair_hash(a, la, b, lb) & m->mask;
		while (m->slot[h] >= 0)
			h = (h + 1) & m->mask;
		m->slot[h] = (int32_t)m->n;
		m->n++;
	}
	free(tmp);
	return BG_OK;
}

/* Decoded bytes of each token, as llama.cpp's token_to_piece(special = true). */
static enum bg_status build_pieces(struct tok *t, struct bg_err *err)
{
	size_t n = (size_t)t->n_vocab, total = 0;
	for (size_t i = 0; i < n; i++)
		total += t->len[i] + 1;
	t->pieces = malloc(total);
	t->poff = malloc(n * sizeof *t->poff);
	t->plen = malloc(n * sizeof *t->plen);
	if (!t->pieces || !t->poff || !t->plen)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory building the piece cache");
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		const char *s = t->arena + t->off[i];
		size_t l = t->len[i], k = 0;
		char *d = t->pieces + o;
		uint16_t a = t->attr[i];
		if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
			memcpy(d, s, l);
			k = l;
		} else if (a & TOK_ATTR_NORMAL) {
			if (t->type == TOK_SPM || t->escape_ws) {
				for (size_t j = 0; j < l;) {
					if (j + 3 <= l && memcmp(s + j, ESC_SPACE, 3) == 0) {
						d[k++] = ' ';
						j += 3;
					} else {
						d[k++] = s[j++];
					}
				}
			} else {
				for (size_t j = 0; j < l;) {
					size_t adv;
					bool canon;
					uint32_t cp = tok_utf8_decode((const uint8_t *)s + j, l - j,
								      &adv, &canon);
					if (!canon || cp >= 324 || t->cp_to_byte[cp] < 0) {
						/* a character outside the byte-level alphabet: the
						 * whole token is plain text, as the Hugging Face
						 * ByteLevel decoder has it (llama.cpp writes
						 * "[UNK_BYTE_0x...]") */
						memcpy(d, s, l);
						k = l;
						break;
					}
					d[k++] = (char)t->cp_to_byte[cp];
					j += adv;
				}
			}
		} else if (a & TOK_ATTR_BYTE) {
			if (l >= 5) {
				char hex[3] = {s[3], s[4], 0};
				d[k++] = (char)strtol(hex, NULL, 16);
			}
		}
		t->poff[i] = o;
		t->plen[i] = (uint32_t)k;
		o += k;
	}
	return BG_OK;
}

/* SPM merges never cross a U+2581 that follows other text when no token contains one
 * there, so such positions split the work into independent words. */
static bool spm_cut_ok(const struct tok *t)
{
	for (int32_t i = 0; i < t->n_vocab; i++) {
		const char *s = t->arena + t->off[i];
		size_t l = t->len[i], j = 0;
		while (j + 3 <= l && memcmp(s + j, ESC_SPACE, 3) == 0)
			j += 3;
		if (j < l && memmem(s + j, l - j, ESC_SPACE, 3))
			return false;
	}
	return true;
}

enum bg_status tok_load(const struct gguf_ctx *g, struct tok **out, struct bg_err *err)
{
	*out = NULL;
	struct gguf_str model, pre = {NULL, 0};
	if (!gguf_get_str(g, "tokenizer.ggml.model", &model))
		return bg_fail(err, BG_ERR_FORMAT, "no tokenizer.ggml.model key (no tokenizer)");
	bool has_pre = gguf_get_str(g, "tokenizer.ggml.pre", &pre);
	struct tok *t = calloc(1, sizeof *t);
	if (!t)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	enum bg_status st;
	const struct pre_info *pi = NULL;
	if (str_eq(model, "llama")) {
		t->type = TOK_SPM;
		t->add_space_prefix = true;
		t->add_bos = true;
	} else if (str_eq(model, "gpt2") || str_eq(model, "gemma4")) {
		t->type = TOK_BPE;
		t->byte_encode = true;
		if (str_eq(model, "gemma4")) {
			pre.ptr = "gemma4";
			pre.len = 6;
			has_pre = true;
		}
		if (!has_pre || str_eq(pre, "default")) {
			pi = &pre_table[0];
		} else {
			for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++)
				if (str_eq(pre, pre_table[i].name))
					pi = &pre_table[i];
		}
		if (!pi) {
			st = bg_fail(err, BG_ERR_UNSUPPORTED, "unknown pre-tokenizer type: '%.*s'",
				     (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
			goto fail;
		}
		t->pre = pi->pre;
		t->ignore_merges = pi->ignore_merges;
		t->add_bos = pi->add_bos;
		if (t->pre == TOK_PRE_GEMMA4) {
			t->escape_ws = true;
			t->byte_encode = false;
		}
	} else {
		st = bg_fail(err, BG_ERR_UNSUPPORTED,
			     "unsupported tokenizer model '%.*s' (supported: llama, gpt2, gemma4)",
			     (int)(model.len > 32 ? 32 : model.len), model.ptr);
		goto fail;
	}
	snprintf(t->model, sizeof t->model, "%.*s", (int)model.len, model.ptr);
	bool b;
	if (gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b))
		t->add_space_prefix = b;

	if ((st = load_vocab(t, g, err)) != BG_OK)
		goto fail;
	if ((st = load_specials(t, g, pi, err)) != BG_OK)
		goto fail;
	if ((st = build_special_cache(t, g, err)) != BG_OK)
		goto fail;
	byte_level_tables(t);
	if ((st = build_pieces(t, err)) != BG_OK)
		goto fail;
	if (t->type == TOK_BPE) {
		if ((st = load_merges(t, g, err)) != BG_OK)
			goto fail;
		if ((st = tok_split_init(&t->split, tok_pre_regexes(t->pre), err)) != BG_OK)
			goto fail;
	} else {
		t->spm_cut_ok = spm_cut_ok(t);
	}
	*out = t;
	return BG_OK;
fail:
	tok_free(t);
	return st;
}

/* ---- decoding ---- */

size_t tok_piece(const struct tok *t, int32_t id, bool render_special, char *buf, size_t cap)
{
	if (id < 0 || id >= t->n_vocab)
		return 0;
	if (!render_special && (t->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL)))
		return 0;
	size_t l = t->plen[id];
	if (buf && cap)
		memcpy(buf, t->pieces + t->poff[id], l < cap ? l : cap);
	return l;
}

enum bg_status tok_decode(const struct tok *t, const int32_t *ids, size_t n,
			  bool strip_leading_space, char **text, size_t *len, struct bg_err *err)
{
	*text = NULL;
	*len = 0;
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->n_vocab)
			return bg_fail(err, BG_ERR_INVALID,
				       "token id %d at position %zu is outside "
				       "the vocabulary (%d tokens)",
				       ids[i], i, t->n_vocab);
		total += t->plen[ids[i]];
	}
	char *s = malloc(total + 1);
	if (!s)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory decoding %zu tokens", n);
	bool strip = strip_leading_space && t->add_space_prefix;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = tok_piece(t, ids[i], false, s + o, total - o);
		if (l == 0)
			continue;
		if (strip) { /* only the first visible piece carries the encoder's space */
			strip = false;
			if (s[o] == ' ') {
				memmove(s + o, s + o + 1, l - 1);
				l--;
			}
		}
		o += l;
	}
	s[o] = 0;
	*text = s;
	*len = o;
	return BG_OK;
}

void tok_stream_init(struct tok_stream *s, const struct tok *t)
{
	memset(s, 0, sizeof *s);
	s->t = t;
}

static long stream_append(struct tok_stream *s, const char *p, size_t l, bool flush, char **buf,
			  size_t *len, size_t *cap)
{
	size_t np = (size_t)s->n_pending, need = *len + np + l + 1;
	if (need > *cap || !*buf) {
		size_t c = *cap ? *cap : 64;
		while (c < need)
			c *= 2;
		char *q = realloc(*buf, c);
		if (!q)
			return -1;
		*buf = q;
		*cap = c;
	}
	char *d = *buf + *len;
	memcpy(d, s->pending, np);
	memcpy(d + np, p, l);
	size_t tot = np + l, keep = 0;
	if (!flush) {
		/* hold back a trailing lead byte whose continuation bytes have not all come */
		for (size_t back = 1; back <= 3 && back <= tot; back++) {
			uint8_t c = (uint8_t)d[tot - back];
			if ((c & 0xc0) == 0x80)
				continue; /* continuation byte: look further back */
			if (c >= 0xc0 && c <= 0xf7 && tok_utf8_len(c) > back)
				keep = back;
			break;
		}
	}
	memcpy(s->pending, d + tot - keep, keep);
	s->n_pending = (int)keep;
	*len += tot - keep;
	(*buf)[*len] = 0;
	return (long)(tot - keep);
}

long tok_stream_push(struct tok_stream *s, int32_t id, char **buf, size_t *len, size_t *cap)
{
	const struct tok *t = s->t;
	const char *p = "";
	size_t l = 0;
	if (id >= 0 && id < t->n_vocab && !(t->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) {
		p = t->pieces + t->poff[id];
		l = t->plen[id];
	}
	return stream_append(s, p, l, false, buf, len, cap);
}

long tok_stream_flush(struct tok_stream *s, char **buf, size_t *len, size_t *cap)
{
	return stream_append(s, "", 0, true, buf, len, cap);
}
