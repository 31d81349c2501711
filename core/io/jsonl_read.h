/* jsonl_read: one request line (native or OpenAI batch form) -> one struct request.
 *
 * Pure functions over buffers (io/jsonl.h describes the forms). Every input line gets
 * exactly one request back: an unparseable or impossible line gets a request that carries
 * its error, so that every input line gets exactly one result line. Parameters are read
 * and validated from io/params' table.
 *
 * Ids: a native line's "id" (or its line number), an OpenAI line's "custom_id". An id
 * must be a non-empty, valid UTF-8 string (so that the writer writes it unchanged and
 * --resume reads back exactly the id it skips): a line whose id is not gets an error,
 * and the id of a native line becomes its line number, that of an OpenAI line its
 * reserved key (jsonl_line_key; its result says "custom_id": null).
 *
 * NUL: batchgen's strings are C strings, so a line with a NUL character (\u0000) in any
 * string (prompt, message content, stop string, id, ...) is refused with an error naming
 * the field, never cut at the NUL.
 */
#ifndef BG_JSONL_READ_H
#define BG_JSONL_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/request.h"
#include "io/jsonl.h"
#include "status.h"
#include "text/chat.h"
#include "text/chat_jinja.h"
#include "text/tokenizer.h"

/* What an omitted field becomes. The parameter values are two request templates, of which
 * only the fields named by io/params' table are read: native lines take theirs from
 * `native`, OpenAI lines from `openai` (jsonl_defaults_init: the table's defaults for each
 * form; the CLI then writes the flags it was given into both). */
struct jsonl_defaults {
	struct request native; /* max_tokens 16, greedy, no log-probs, vocabulary BOS, ... */
	struct request openai; /* as native, but OpenAI's max_tokens (none) and temperature 1 */
	/* When a line has no "seed", the request's seed is sampling.seed + its line number,
	 * so that equal prompts on different lines differ while a run stays reproducible
	 * (and independent of batching, sharding or --resume). false: sampling.seed as is. */
	bool seed_plus_line;
	/* The chat template for "messages" (native or /v1/chat/completions); NULL: chat
	 * requests get the error "model has no chat template; pass --chat-template NAME". */
	const struct chat_template *chat;
	/* The Jinja chat template (the model's own, or --chat-template-file); when set it
	 * renders "messages" (with "tools" and "chat_template_kwargs") instead of chat, and the
	 * rendered prompt is tokenized without an added BOS, as transformers and vLLM do. */
	const struct chat_jinja *jinja;
	/* When set, a rendered chat prompt is tokenized here (parse_special = true, BOS as
	 * add_bos says), so that the template's control tokens become their ids; the request
	 * then carries input_ids. When NULL, the rendered text is left in prompt. */
	const struct tok *tok;
	/* The engine's max sequence length (engine_max_seq_len), or 0 for no bound. With tok
	 * set, a rendered chat prompt of more bytes than max_seq_len tokens can hold (no token
	 * stands for more than tok_max_token_bytes bytes), max_tokens included, is refused as
	 * "too_long" before it is tokenized, as the engine refuses such a prompt (memory
	 * stays bounded whatever the line: tokenizing takes ~25 bytes per byte). */
	int32_t max_seq_len;
	/* The loaded model's name: OpenAI "model" when the body has none (NULL: "batchgen"),
	 * and a body.model that differs from it is warned about once (jsonl_warn). */
	const char *model_name;
	/* The form of the input file (jsonl_sniff_form of its first non-blank line): a line
	 * that is blank or not a JSON object is answered in it, so that an OpenAI batch file
	 * gets OpenAI-shaped results on every line. JSONL_FORM_NATIVE by default. */
	enum jsonl_form file_form;
	int64_t created; /* OpenAI "created" (Unix seconds), stamped on each request */
};

/* The table's defaults for both forms (params_defaults), seed_plus_line true, no chat
 * template, created 0. */
void jsonl_defaults_init(struct jsonl_defaults *d);

/* Unknown field names already reported. Owned by the caller, zero-initialised (or
 * jsonl_warn_init), one per input stream. */
#define JSONL_WARN_NAMES 64
struct jsonl_warn {
	char names[JSONL_WARN_NAMES][48]; /* reported names ("body." prefix for body fields) */
	int n_names;
	bool full;	   /* the set overflowed: no further unknown fields are reported */
	bool model_warned; /* a body.model other than the loaded model's was reported */
	/* Called once per newly seen unknown field with a sentence like
	 * `line 3: unknown field "tmeperature" ignored (reported once)`. May be NULL. */
	void (*emit)(void *user, const char *message);
	void *user;
};
void jsonl_warn_init(struct jsonl_warn *w, void (*emit)(void *user, const char *message),
		     void *user);

/* Parses line[0, len) (no trailing newline needed; a trailing "\r" or whitespace is
 * fine) into a new request *out with (*out)->line = line_no. Always gives a request:
 * an invalid line yields one with error.code set, id set (the line's id when it could be
 * read, else the line number) and nothing to run. Returns BG_OK, or BG_ERR_NOMEM with
 * *out NULL when memory runs out. w may be NULL. */
enum bg_status jsonl_parse_request(const char *line, size_t len, int64_t line_no,
				   const struct jsonl_defaults *d, struct jsonl_warn *w,
				   struct request **out);

/* The form a non-blank line is in, judged as the parser judges it: OpenAI when it is a
 * JSON object with "custom_id" or "body" (or, not valid JSON, mentions either), else
 * native. */
enum jsonl_form jsonl_sniff_form(const char *line, size_t len);

#endif
