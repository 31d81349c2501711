/* grammar: llama.cpp's GBNF grammars, a per-row matcher, and the per-step mask of the
 * tokens that keep a row's output inside the grammar's language.
 *
 * Format: llama.cpp's GBNF (grammars/README.md there): `name ::= alternatives` rules,
 * "literals" and [character classes] with the escapes \x \u \U \t \r \n \\ \" \[ \],
 * `.` (any character), ( groups ), rule references, and the repetitions * + ? {m} {m,}
 * {m,n} (n <= 2000, as llama.cpp). Rules are written one per line (newlines are allowed
 * inside parentheses and after `|`); `#` starts a comment. A rule defined twice keeps its
 * last definition (as llama.cpp). Refused, with the line and column of the problem:
 * syntax errors, undefined rules, a missing root rule, left recursion (rule A deriving A
 * first, nullable rules counted), llama.cpp's token references `<...>` (not supported),
 * and grammars beyond the size bounds below.
 *
 * Semantics (the same as llama.cpp's llama_grammar, so the allowed sets agree):
 *  - A row's state is a set of stacks of grammar positions plus an unfinished UTF-8
 *    sequence. The grammar matches code points; a token's bytes are decoded as UTF-8
 *    continuing the row's unfinished sequence.
 *  - A token is allowed iff its piece (the bytes it renders to, control tokens rendered as
 *    their text) is non-empty, does not start with a NUL byte (bytes after a NUL are not
 *    looked at), is valid UTF-8 as far as it goes, every complete code point extends the
 *    output to a prefix of a string of the language, and a trailing incomplete sequence
 *    can still complete to a code point the grammar accepts there.
 *  - An end-of-generation token is allowed iff the output so far is in the language.
 *
 * Cost bounds: a grammar has at most GRAMMAR_MAX_ELEMENTS elements and GRAMMAR_MAX_RULES
 * rules, and nests groups at most GRAMMAR_MAX_DEPTH deep; every step (a mask, an accepted
 * token) is bounded by a budget of stack operations (expanding a stack counts 1 plus its
 * length) and words of memory, and fails with BG_ERR_CAPACITY (never hangs) beyond it. Tokens longer than GRAMMAR_MAX_TOKEN_BYTES
 * bytes are never allowed under a grammar.
 *
 * Threads: a struct grammar and a struct grammar_vocab are immutable once built and may be
 * shared; a struct grammar_state and a struct grammar_scratch belong to one thread at a
 * time.
 */
#ifndef BG_GRAMMAR_H
#define BG_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define GRAMMAR_MAX_TEXT (1u << 20)	/* bytes of GBNF text */
#define GRAMMAR_MAX_ELEMENTS (1u << 20) /* elements of all rules together */
#define GRAMMAR_MAX_RULES (1u << 16)
#define GRAMMAR_MAX_DEPTH 64		 /* nesting of ( groups ) */
#define GRAMMAR_MAX_REPETITION 2000	 /* n in x{m,n}, as llama.cpp */
#define GRAMMAR_MAX_TOKEN_BYTES 1024	 /* longer tokens are never allowed */
#define GRAMMAR_STEP_OPS (1u << 24)	 /* stack operations per step */
#define GRAMMAR_STEP_WORDS (1u << 24)	 /* 32-bit words of scratch per step (64 MiB) */
#define GRAMMAR_MASK_CACHE 16		 /* recent masks a scratch keeps (see grammar.c) */

struct grammar;
struct grammar_vocab;
struct grammar_state;
struct grammar_scratch;

/* Parses GBNF text[len] with start rule `root` ("root" when NULL). On error *out is NULL
 * and err says what is wrong and where ("line 3, column 7: ..."). */
enum bg_status grammar_parse(const char *text, size_t len, const char *root, struct grammar **out,
			     struct bg_err *err);
void grammar_free(struct grammar *g); /* NULL-safe */

/* The vocabulary as the grammar sees it: piece[i][piece_len[i]] are the bytes token i
 * renders to (control tokens as their text), is_eog[i] marks end-of-generation tokens.
 * The pieces are copied. */
enum bg_status grammar_vocab_create(int32_t n_vocab, const char *const *piece,
				    const uint32_t *piece_len, const bool *is_eog,
				    struct grammar_vocab **out, struct bg_err *err);
void grammar_vocab_free(struct grammar_vocab *v); /* NULL-safe */
int32_t grammar_vocab_n(const struct grammar_vocab *v);

/* Working memory of mask and accept steps, and a cache of the masks of the last
 * GRAMMAR_MASK_CACHE states; one per thread, reused across steps and rows. */
struct grammar_scratch *grammar_scratch_create(void); /* NULL on allocation failure */
void grammar_scratch_free(struct grammar_scratch *s); /* NULL-safe */
/* Masks served from the scratch's cache since it was created (for tests and statistics). */
uint64_t grammar_scratch_mask_hits(const struct grammar_scratch *s);
/* Lowers the budget of stack operations of the steps run with s to ops (0, or more than
 * GRAMMAR_STEP_OPS, restores GRAMMAR_STEP_OPS). For tests and fuzzing: a pathological
 * grammar reaches BG_ERR_CAPACITY sooner, by the same path. */
void grammar_scratch_set_step_ops(struct grammar_scratch *s, uint64_t ops);

/* The state at the start of generation (nothing output yet). */
enum bg_status grammar_state_create(const struct grammar *g, struct grammar_scratch *s,
				    struct grammar_state **out, struct bg_err *err);
struct grammar_state *grammar_state_clone(const struct grammar_state *st); /* NULL on OOM */
void grammar_state_free(struct grammar_state *st);			   /* NULL-safe */

/* True when the output so far is a string of the language (end of generation allowed). */
bool grammar_state_accepts(const struct grammar_state *st);
/* True after an end-of-generation token was accepted: nothing more is allowed. */
bool grammar_state_finished(const struct grammar_state *st);
/* Number of stacks in the state (for tests and statistics). */
int32_t grammar_state_n_stacks(const struct grammar_state *st);

/* Sets bit i of mask[(n_vocab + 31) / 32] (bit i % 32 of word i / 32) iff token i is
 * allowed next; clears the others. On error the mask is undefined and st is unchanged. */
enum bg_status grammar_state_mask(const struct grammar_state *st, const struct grammar_vocab *v,
				  struct grammar_scratch *s, uint32_t *mask, struct bg_err *err);

/* Advances st by token id. BG_ERR_INVALID when the token is not allowed (st unchanged). */
enum bg_status grammar_state_accept_token(struct grammar_state *st,
					  const struct grammar_vocab *v, int32_t id,
					  struct grammar_scratch *s, struct bg_err *err);

/* Advances st by raw bytes, decoded as one token's piece would be (for tests and for
 * forced text). BG_ERR_INVALID when they leave the language's prefixes (st unchanged). */
enum bg_status grammar_state_accept_bytes(struct grammar_state *st, const char *bytes,
					  size_t len, struct grammar_scratch *s,
					  struct bg_err *err);

/* Convenience for tests and validation: does the whole text[len] belong to the language? */
bool grammar_matches(const struct grammar *g, const char *text, size_t len);

#endif
