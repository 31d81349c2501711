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
 * line's form, then the command line's flags). `null` counts as omitted. Unknown fields
 * are ignored and reported once per name (jsonl_warn).
 *
 * Error codes written into request.error.code by the parser: "empty_line",
 * "invalid_json", "invalid_request" (a wrong type, a missing or out-of-range field; the
 * message names the field), "unsupported" (valid but not supported here: n > 1, echo,
 * tools, a chat request without a chat template, ...). The line number is request.line.
 *
 * The module is split by direction: io/jsonl_read (request lines in), io/jsonl_write
 * (result lines out, and reading back the id of a result for --resume); this header
 * holds what both share (the forms, the parser's record for the writer, JSON strings);
 * each user includes the direction it needs.
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

#include "engine/request.h"
#include "sample/sampler.h"

struct strbuf;

#define JSONL_MAX_TOP  SAMPLER_MAX_TOP /* logprobs / prompt_logprobs upper bound (20) */
#define JSONL_MAX_STOP 64	       /* stop strings per request */

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

/* Attaches a new, zeroed record of the given form to r (replacing its user data);
 * NULL when memory runs out. */
struct jsonl_info *jsonl_info_attach(struct request *r, enum jsonl_form form);

/* The parser's record for r, or NULL for a request the parser did not make with one
 * (native requests need none). */
const struct jsonl_info *jsonl_request_info(const struct request *r);
enum jsonl_form jsonl_request_form(const struct request *r); /* NATIVE when no record */

/* Writes s[0, n) as a JSON string literal (quotes included) into a malloc'd buffer:
 * escapes as JSON requires, \u0000 for NUL, and U+FFFD for each maximal invalid UTF-8
 * subsequence. NULL on allocation failure. */
char *jsonl_quote(const char *s, size_t n, size_t *out_len);

void jsonl_sb_quote(struct strbuf *b, const char *s, size_t n); /* the same, into b */

/* The id of a line that has no usable id of its own in an OpenAI batch file (no
 * custom_id, one that is not a non-empty valid UTF-8 string without NUL, a blank line, a
 * line that is not a JSON object): byte 0xFF followed by the decimal line number. A
 * request id is always valid UTF-8, so this key never equals a real custom_id. It is
 * never written: the result says "custom_id": null and its error carries the line
 * number, from which jsonl_result_id makes the same key again for --resume. */
#define JSONL_KEY_BYTE '\xff'
void jsonl_line_key(int64_t line, char *buf, size_t cap); /* cap >= 24 */

/* Whether s[0, n) holds only spaces, tabs, CR and LF. */
bool jsonl_blank(const char *s, size_t n);

#endif
