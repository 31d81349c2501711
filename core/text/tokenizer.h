/* tokenizer: text <-> token ids, from the tokenizer stored in a GGUF file.
 *
 * Supported `tokenizer.ggml.model` values: "llama" (SentencePiece-style: score-ordered
 * merges, byte fallback <0xXX>, a leading space added per tokenizer.ggml.add_space_prefix),
 * "gpt2" (byte-level BPE with merge ranks from tokenizer.ggml.merges and a
 * pre-tokenizer chosen by tokenizer.ggml.pre) and "gemma4" (Gemma 4's BPE over
 * U+2581-escaped text). Others ("bert", "t5", ...) fail to load with BG_ERR_UNSUPPORTED.
 * Encoding matches llama.cpp's llama_tokenize(add_special, parse_special) exactly on
 * valid UTF-8 (the differences on invalid UTF-8 are listed in tokenizer.c); decoding
 * returns the exact bytes (for SentencePiece, U+2581 becomes a space).
 *
 * A struct tok is immutable after tok_load and safe to share between threads.
 */
#ifndef BG_TOKENIZER_H
#define BG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"
#include "status.h"

struct tok;

/* Builds the tokenizer from g's metadata (g may be vocab-only; the tokenizer copies what
 * it keeps, so g may be closed afterwards). */
enum bg_status tok_load(const struct gguf_ctx *g, struct tok **out, struct bg_err *err);
void tok_free(struct tok *t); /* NULL-safe */

int32_t tok_n_vocab(const struct tok *t);
/* The length in bytes of the longest token text (at least 1). No token stands for more
 * bytes of input than its text (U+2581 and byte-level characters are never shorter than
 * the bytes they stand for, <0xXX> stands for one), so a text of len bytes encodes to at
 * least ceil(len / tok_max_token_bytes) ids, unless the tokenizer drops bytes (bytes
 * without a token, whitespace stripped around special tokens): what callers use to refuse
 * a text that cannot fit before tokenizing it, in bounded memory. */
size_t tok_max_token_bytes(const struct tok *t);
const char *tok_model_name(const struct tok *t); /* "llama", "gpt2" */
int32_t tok_bos(const struct tok *t);		 /* -1 when the vocabulary has none */
int32_t tok_eos(const struct tok *t);		 /* -1 when none */
int32_t tok_eot(const struct tok *t);		 /* -1 when none */
bool tok_add_bos(const struct tok *t);		 /* what llama.cpp does by default for this vocab */
/* True for ids that end generation: EOS, EOT and the other end-of-generation tokens
 * llama.cpp recognises for this vocabulary. */
bool tok_is_eog(const struct tok *t, int32_t id);

/* Tokenizes text[0, len) (arbitrary bytes; invalid UTF-8 is encoded by bytes, nothing is
 * lost as long as the vocabulary has a token for each byte: byte-level vocabularies such
 * as mpt's lack tokens for some bytes that never occur in valid UTF-8, and those are
 * dropped, as llama.cpp drops them). add_bos prepends BOS when the vocabulary has one;
 * EOS is never appended. parse_special turns the text of control tokens into their ids;
 * otherwise it is plain text (user-defined tokens are always matched, as in llama.cpp).
 * *ids is malloc'd (caller frees), *n its length. On error nothing is allocated. */
enum bg_status tok_encode(const struct tok *t, const char *text, size_t len, bool add_bos,
			  bool parse_special, int32_t **ids, size_t *n, struct bg_err *err);

/* The raw vocabulary string of id (as stored in the GGUF, NUL-terminated), for display.
 * NULL for an id out of range. */
const char *tok_text(const struct tok *t, int32_t id);

/* The bytes id stands for when decoded (U+2581 -> ' ', <0x0A> -> '\n', byte-level BPE
 * characters -> their bytes; control tokens -> empty unless render_special). Writes at
 * most cap bytes; returns the full length (call again with more room if it is larger). */
size_t tok_piece(const struct tok *t, int32_t id, bool render_special, char *buf, size_t cap);

/* Decodes a whole sequence into a malloc'd NUL-terminated buffer (*len excludes the NUL).
 * For SentencePiece vocabularies with add_space_prefix, strip_leading_space removes the
 * one space the encoder added in front (so decode(encode(s)) == s). */
enum bg_status tok_decode(const struct tok *t, const int32_t *ids, size_t n,
			  bool strip_leading_space, char **text, size_t *len, struct bg_err *err);

/* Incremental detokenizer: feed generated ids one at a time and get back only whole
 * UTF-8 characters; bytes of an incomplete character are held until it completes.
 * tok_stream_flush releases held bytes at the end (an invalid sequence comes out as is).
 * The caller appends what is returned to its text. */
struct tok_stream {
	const struct tok *t;
	char pending[8]; /* bytes of an incomplete UTF-8 character */
	int n_pending;
};
void tok_stream_init(struct tok_stream *s, const struct tok *t);
/* Appends the newly complete bytes to *buf (a malloc'd buffer of *len bytes used and *cap
 * allocated, grown as needed; keeps a NUL after the text). Returns the number of bytes
 * appended, or -1 on allocation failure (nothing changed). */
long tok_stream_push(struct tok_stream *s, int32_t id, char **buf, size_t *len, size_t *cap);
long tok_stream_flush(struct tok_stream *s, char **buf, size_t *len, size_t *cap);

#endif
