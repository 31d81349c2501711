/* chat: rendering a list of chat messages into the prompt text of a model's chat format.
 *
 * There is no Jinja interpreter here. Like llama.cpp's llm_chat_detect_template /
 * llm_chat_apply_template (src/llama-chat.cpp), the template family is recognised from
 * characteristic substrings of the `tokenizer.chat_template` text stored in the GGUF, and
 * each family is rendered by hand-written code that reproduces llama.cpp's output byte for
 * byte. Names (for `--chat-template NAME`) are llama.cpp's.
 *
 * BOS: the rendered text never starts with a BOS token, as in llama.cpp: the tokenizer
 * adds BOS when the vocabulary asks for it (tok_add_bos), so a template that writes
 * `{{ bos_token }}` in Jinja would otherwise get it twice. BOS/EOS strings that appear in
 * the middle of a conversation (`</s>` after an assistant turn, `<s>[INST]` in
 * llama2-sys-bos) are written as text; the prompt must be tokenized with parse_special so
 * that they become the control tokens.
 *
 * Roles: "system", "user" and "assistant". Any other role is refused (BG_ERR_INVALID).
 * A struct chat_template is a static, immutable description: nothing to free.
 */
#ifndef BG_CHAT_H
#define BG_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

struct chat_template;

struct chat_message {
	const char *role;    /* "system" | "user" | "assistant" */
	const char *content; /* NUL-terminated UTF-8 */
};

/* The template called name (llama.cpp's names: "chatml", "llama2", "llama2-sys",
 * "llama3", "mistral-v7", ...), or NULL when there is none. */
const struct chat_template *chat_template_by_name(const char *name);

/* The family of a Jinja chat template text (or of a bare name, as llama.cpp accepts),
 * recognised by substring. NULL when the text matches no supported family: the caller
 * must say so and suggest --chat-template. */
const struct chat_template *chat_template_detect(const char *jinja_text);

const char *chat_template_name(const struct chat_template *t); /* e.g. "chatml" */

/* All supported names, separated by ", " (for help and error messages). Static. */
const char *chat_template_names(void);

/* Renders msgs[n] with template t into a malloc'd NUL-terminated string (*out; *out_len
 * its length, may be NULL). add_generation_prompt appends the assistant's turn header
 * (for families that have one; llama2/mistral end a user turn with [/INST] anyway).
 * On error (an unsupported role, NULL content, out of memory) nothing is allocated and
 * err says which message is at fault. */
enum bg_status chat_render(const struct chat_template *t, const struct chat_message *msgs, size_t n,
			   bool add_generation_prompt, char **out, size_t *out_len,
			   struct bg_err *err);

#endif
