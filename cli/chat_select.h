/* chat_select: which renderer chat requests get, for `run` and `tokenize --chat`.
 *
 * Order: --chat-template-file FILE (a Jinja template); else --chat-template NAME (a
 * built-in family, llama.cpp's names); else the model's tokenizer.chat_template, run by
 * the Jinja interpreter; when that template does not compile, the built-in family it
 * resembles, with a warning; else none (chat requests then get an error result).
 * strftime_now formats --chat-date (YYYY-MM-DD), default today (local time).
 */
#ifndef BG_CLI_CHAT_SELECT_H
#define BG_CLI_CHAT_SELECT_H

#include <stdbool.h>

#include "model/gguf.h"
#include "text/chat.h"
#include "text/chat_jinja.h"
#include "text/tokenizer.h"

/* Sets at most one of *builtin and *jinja (the caller destroys *jinja). Returns false
 * after printing the reason on a usage error (unreadable file, template that does not
 * compile, unknown NAME, bad date). A model template that does not run is a warning on
 * stderr (the built-in family its text names is used, if any). */
bool chat_select(const char *template_file, const char *template_name, const char *date,
		 const struct gguf_ctx *g, const struct tok *tok,
		 const struct chat_template **builtin, struct chat_jinja **jinja);

#endif
