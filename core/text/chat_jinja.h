/* chat_jinja: rendering chat requests with the model's own Jinja chat template, as Hugging
 * Face transformers' apply_chat_template and vLLM do (see jinja.h for the interpreter).
 *
 * The template sees: messages (each message as the request gave it, roles passed through
 * as written; content parts of type "text" joined with "\n" into one string, as vLLM's
 * "string" content format does; tool-call `function.arguments` given as a JSON string
 * parsed into an object, as vLLM does), tools (the request's array, or none), documents
 * (none), add_generation_prompt, bos_token and eos_token (the vocabulary's texts, "" when
 * it has none), strftime_now (the date fixed at creation) and the members of an optional
 * extra object (vLLM's chat_template_kwargs), which cannot replace the names above.
 *
 * The rendered text carries whatever BOS the template writes: tokenize it with special
 * tokens parsed and no BOS added, as transformers and vLLM do (add_special_tokens=False).
 * A struct chat_jinja is immutable after creation; renders may run concurrently.
 */
#ifndef BG_CHAT_JINJA_H
#define BG_CHAT_JINJA_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "status.h"

struct chat_jinja;

/* Compiles the template src[len]. bos/eos: the special tokens' texts (NULL: ""). The
 * date (year, month 1..12, day) is what strftime_now formats. On error *out is NULL and
 * err names the template line. */
enum bg_status chat_jinja_create(const char *src, size_t len, const char *bos, const char *eos,
				 int year, int month, int day, struct chat_jinja **out,
				 struct bg_err *err);

void chat_jinja_destroy(struct chat_jinja *cj); /* NULL-safe */

/* Renders messages (a JSON array of message objects), tools (a JSON array or NULL) and
 * extra (a JSON object or NULL) into a malloc'd NUL-terminated *out of *out_len bytes.
 * On error (a malformed message, a template error or limit) nothing is allocated and err
 * says what, naming the template line for template errors. */
enum bg_status chat_jinja_render(const struct chat_jinja *cj, const cJSON *messages,
				 const cJSON *tools, const cJSON *extra, bool add_generation_prompt,
				 char **out, size_t *out_len, struct bg_err *err);

/* The text of an OpenAI content-parts array: the "text" of its {"type": "text"} parts
 * joined with "\n", as vLLM joins them for a template that takes a string (its "string"
 * content format); both the Jinja and the built-in chat paths use it. A malloc'd string
 * in *out ("" for no parts). Another kind of part: BG_ERR_UNSUPPORTED, err saying
 * "content[J]: ..."; out of memory: BG_ERR_NOMEM. */
enum bg_status chat_content_text(const cJSON *parts, char **out, struct bg_err *err);

/* Whether a message of this role may come without content (absent or null): only an
 * assistant turn (one that makes tool calls), as the OpenAI API and vLLM accept; any other
 * role without content is a request error on both chat paths, not an empty turn. */
bool chat_role_may_omit_content(const char *role);

/* Parses "YYYY-MM-DD" into *y, *m, *d; false when it is not a valid date. */
bool chat_jinja_parse_date(const char *s, int *y, int *m, int *d);

#endif
