/* fuzz_jinja: the Jinja interpreter (core/text/jinja.h) on untrusted templates.
 * Input: a template text, a 0xff byte, then a JSON object of variables (when that part is
 * not a JSON object, a fixed conversation is used: messages with a tool call, tools,
 * bos_token, eos_token, add_generation_prompt).
 * Oracles:
 *  - compiling and rendering never crash, and stay within the limits set here (a smaller
 *    step, output and memory budget than the defaults, so one input stays fast);
 *  - a failure allocates nothing and has a message; a success gives a NUL-terminated text
 *    of out_len bytes, within the output limit;
 *  - rendering is deterministic: a second render gives the same status and bytes.
 */
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "text/jinja.h"

static cJSON *fixed_vars;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	static const char vars[] =
	    "{\"messages\": [{\"role\": \"system\", \"content\": \"You are kind.\"},"
	    " {\"role\": \"user\", \"content\": \"Hi \\u00e9\"},"
	    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
	    " \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]},"
	    " {\"role\": \"tool\", \"content\": \"42\"}],"
	    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\":"
	    " {\"type\": \"object\"}}}],"
	    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true}";
	fixed_vars = cJSON_Parse(vars);
	FUZZ_CHECK(fixed_vars, "the fixed variables do not parse");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sep = memchr(data, 0xff, size);
	size_t tlen = sep ? (size_t)(sep - data) : size;
	struct jinja_template *t = NULL;
	struct bg_err err = {0};
	if (jinja_compile((const char *)data, tlen, &t, &err) != BG_OK) {
		FUZZ_CHECK(!t && err.msg[0], "a failed compile left a template or no message");
		return 0;
	}
	cJSON *parsed = NULL;
	if (sep)
		parsed = cJSON_ParseWithLength((const char *)sep + 1, size - tlen - 1);
	const cJSON *vars = cJSON_IsObject(parsed) ? parsed : fixed_vars;
	struct jinja_opts o = {.year = 2026, .month = 11, .day = 28, .max_steps = 200000,
			       .max_output = 1 << 20, .max_memory = 32u << 20, .max_depth = 50};
	char *out[2] = {NULL, NULL};
	size_t len[2] = {0, 0};
	enum bg_status st[2];
	for (int k = 0; k < 2; k++) {
		struct bg_err e = {0};
		st[k] = jinja_render(t, vars, &o, &out[k], &len[k], &e);
		if (st[k] != BG_OK)
			FUZZ_CHECK(!out[k] && e.msg[0], "a failed render left output or no message");
		else
			FUZZ_CHECK(out[k] && out[k][len[k]] == 0 && len[k] <= o.max_output,
				   "a render's text is not NUL-terminated within the limit");
	}
	FUZZ_CHECK(st[0] == st[1] && len[0] == len[1] &&
		       (!out[0] || memcmp(out[0], out[1], len[0]) == 0),
		   "two renders of one input differ");
	free(out[0]);
	free(out[1]);
	cJSON_Delete(parsed);
	jinja_free(t);
	return 0;
}
