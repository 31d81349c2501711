/* jsonl: one input line -> one struct request; one finished request -> one output line.
 *
 * Pure functions over buffers: no files, no engine, no globals. Every input line gets
 * exactly one request back (an unparseable or impossible line gets a request that carries
 * its error), so every input line gets exactly one result line.
 *
 * Input forms (DESIGN.md §5):
 *  - native: {"id", "prompt" | "input_ids" | "messages", "max_tokens", "temperature",
 *    "top_k", "top_p", "min_p", "seed", "repetition_penalty", "presence_penalty",
 *    "frequency_penalty", "stop", "stop_token_ids", "ignore_eos", "logprobs",
 *    "prompt_logprobs", "add_bos"}. A line is in the OpenAI form when it has "custom_id"
 *    or "body".
 *  - OpenAI batch: {"custom_id", "method": "POST", "url": "/v1/completions" |
 *    "/v1/chat/completions", "body": {...}}. Results come back in OpenAI's batch output
 *    form with OpenAI's completion / chat.completion objects.
 * The parameters (max_tokens, temperature, stop, ...) are the rows of io/params' table;
 * omitted ones take their values from struct jsonl_defaults (the table's defaults for the
 * line's form, then the command line's flags). `null` counts as omitted. Unknown fields are ignored and reported once per name (jsonl_warn).
 *
 * Error codes written into request.error.code by the parser: "empty_line",
 * "invalid_json", "invalid_request" (a wrong type, a missing or out-of-range field; the
 * message names the field), "unsupported" (valid but not supported here: n > 1, echo,
 * tools, a chat request without a chat template, ...). The line number is request.line.
 *
 * Output (DESIGN.md §6): jsonl_write_result writes one JSON object and a "\n"; every
 * string in it is valid UTF-8 (bytes that are not are replaced by U+FFFD), log-probs are
 * written with the fewest digits that read back as the same float.
 */
#ifndef BG_JSONL_H
#define BG_JSONL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/chat.h"
#include "engine/request.h"
#include "sample/sampler.h"
#include "status.h"
#include "text/tokenizer.h"

#define JSONL_MAX_TOP  SAMPLER_MAX_TOP /* logprobs / prompt_logprobs upper bound (20) */
#define JSONL_MAX_STOP 64	       /* stop strings per request */

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
	/* When set, a rendered chat prompt is tokenized here (parse_special = true, BOS as
	 * add_bos says), so that the template's control tokens become their ids; the request
	 * then carries input_ids. When NULL, the rendered text is left in prompt. */
	const struct tok *tok;
	const char *model_name; /* OpenAI "model" when the body has none; NULL: "batchgen" */
	int64_t created;	/* OpenAI "created" (Unix seconds), stamped on each request */
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
	bool full; /* the set overflowed: no further unknown fields are reported */
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

/* ---- what the parser records for the writer (request.user) ---- */

enum jsonl_form {
	JSONL_FORM_NATIVE = 0,
	JSONL_FORM_OPENAI_COMPLETION, /* url /v1/completions */
	JSONL_FORM_OPENAI_CHAT,	      /* url /v1/chat/completions */
};

struct jsonl_info {
	enum jsonl_form form;
	char *custom_id; /* OpenAI custom_id (also r->id) */
	char *url;
	char *model; /* body.model, else defaults.model_name */
	int64_t created;
	bool chat_logprobs; /* chat: "logprobs": true */
};

/* The parser's record for r, or NULL for a request the parser did not make with one
 * (native requests need none). */
const struct jsonl_info *jsonl_request_info(const struct request *r);
enum jsonl_form jsonl_request_form(const struct request *r); /* NATIVE when no record */

/* ---- output ---- */

struct jsonl_out_opts {
	/* Token strings in log-prob entries: control tokens (EOS, <|eot_id|>, ...) shown by
	 * their text (true, the default) or as "" (false). */
	bool render_special;
	/* Prefix for the OpenAI ids "batch_req_<run_id><line>", "req_...", "cmpl-...",
	 * "chatcmpl-...": a run identifier keeps them unique across runs. NULL: none. */
	const char *run_id;
	int64_t created; /* OpenAI "created" when the request has none */
	/* The form for requests that carry no parser record (an empty line, a request made
	 * elsewhere): the CLI sets JSONL_FORM_OPENAI_COMPLETION when the input is an OpenAI
	 * batch file, so that every line of the output has one shape. Lines that are not
	 * valid JSON but mention "custom_id" or "body" are given the OpenAI form by the
	 * parser itself. */
	enum jsonl_form default_form;
};
void jsonl_out_opts_init(struct jsonl_out_opts *o);

/* Formats the result of r as one JSON object followed by "\n" into a malloc'd buffer
 * (*line, *len bytes, NUL-terminated; no newline inside). The form follows the input
 * form. t turns token ids into strings for log-prob entries; it may be NULL (token
 * strings are then ""). o may be NULL (defaults). Returns BG_OK, or BG_ERR_NOMEM with
 * nothing allocated. */
enum bg_status jsonl_write_result(const struct request *r, const struct tok *t,
				  const struct jsonl_out_opts *o, char **line, size_t *len);

/* The id of an existing output line (for --resume): "custom_id" when present (OpenAI
 * form), else "id" (native). *id is malloc'd. A torn or foreign line (not a JSON object,
 * no id) gives BG_ERR_FORMAT and *id NULL. */
enum bg_status jsonl_result_id(const char *line, size_t len, char **id);

/* Writes s[0, n) as a JSON string literal (quotes included) into a malloc'd buffer:
 * escapes as JSON requires, \u0000 for NUL, and U+FFFD for each maximal invalid UTF-8
 * subsequence. NULL on allocation failure. */
char *jsonl_quote(const char *s, size_t n, size_t *out_len);

#endif
