/* jinja: a Jinja2 interpreter for chat templates, rendering them as Python's jinja2 does
 * under Hugging Face transformers' conventions (apply_chat_template, also vLLM's).
 *
 * Conventions fixed here, as transformers sets them: trim_blocks and lstrip_blocks on,
 * keep_trailing_newline off, autoescape off, the loopcontrols extension (break/continue),
 * `{% generation %}` blocks rendered as plain bodies, an immutable sandbox (list.append,
 * dict.update, ... are errors), and the globals raise_exception(msg), strftime_now(fmt)
 * (formats the fixed date of jinja_opts, at 00:00:00) and tojson as transformers defines it
 * (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
 *
 * Templates are untrusted input (they come from model files). Every failure is a status
 * and a sentence naming the template line; rendering is bounded by jinja_opts' limits on
 * steps, call depth, output bytes and memory; parsing bounds nesting depth. Nothing here
 * crashes or exits on any input.
 *
 * A compiled template is immutable: jinja_render may be called on it from several threads
 * at once. All memory of a render lives in one arena freed before jinja_render returns.
 *
 * Deliberate differences from jinja2 (fuzz/replay_jinja.sh checks the rest against
 * python3-jinja2; its KNOWN list names each): integers are 64-bit (beyond, arithmetic
 * gives a float); without Unicode's tables, case mapping and str.is*() are ASCII-only,
 * wordcount's \w is approximated for non-ASCII characters and repr() leaves unassigned
 * code points unescaped; filters, tests and str methods that chat templates do not use
 * (groupby, batch, urlencode, str.format, ...), loop.cycle and recursive loops fail with a
 * clear error; select/map/... give lists where jinja2 gives lazy generators; a %-format
 * specification of more than 24 flag, width and precision characters is refused.
 */
#ifndef BG_JINJA_H
#define BG_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "status.h"

struct jinja_template;

struct jinja_opts {
	int year, month, day;	/* the date strftime_now formats (month 1..12) */
	uint64_t max_steps;	/* statements + expression nodes evaluated; 0: default */
	size_t max_output;	/* bytes of rendered text; 0: default */
	size_t max_memory;	/* bytes of the render's arena; 0: default */
	int max_depth;		/* macro call nesting; 0: default */
};

#define JINJA_DEFAULT_STEPS 10000000ull
#define JINJA_DEFAULT_OUTPUT (16u << 20)
#define JINJA_DEFAULT_MEMORY (256u << 20)
#define JINJA_DEFAULT_DEPTH 200

/* Compiles src[len] (need not be NUL-terminated). On error *out is NULL and err names the
 * line. */
enum bg_status jinja_compile(const char *src, size_t len, struct jinja_template **out,
			     struct bg_err *err);

void jinja_free(struct jinja_template *t); /* NULL-safe */

/* Renders t with the members of the JSON object vars as its variables (JSON objects become
 * ordered dicts, arrays lists, integral numbers ints). On success *out is a malloc'd
 * NUL-terminated string (the caller frees it) and *out_len its length (may be NULL). On
 * error nothing is allocated and err says what failed and on which template line; a
 * raise_exception call gives its own message. */
enum bg_status jinja_render(const struct jinja_template *t, const cJSON *vars,
			    const struct jinja_opts *opts, char **out, size_t *out_len,
			    struct bg_err *err);

#endif
