/* jsonl_write: one finished request -> one result line; and, for --resume, the id of a
 * result line written earlier.
 *
 * Every string written is valid UTF-8 (bytes that are not are replaced by U+FFFD);
 * log-probs are written with the fewest digits that read back as the same float.
 */
#ifndef BG_JSONL_WRITE_H
#define BG_JSONL_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/request.h"
#include "io/jsonl.h"
#include "status.h"
#include "text/tokenizer.h"

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

/* The id of an existing output line (for --resume): "custom_id" when it is a string
 * (OpenAI form); when it is null, the reserved key of the line number its error carries
 * (jsonl_line_key); else "id" (native). *id is malloc'd. A torn or foreign line (not a JSON object,
 * no id) gives BG_ERR_FORMAT and *id NULL. */
enum bg_status jsonl_result_id(const char *line, size_t len, char **id);

#endif
