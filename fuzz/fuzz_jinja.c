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
 * With FUZZ_JINJA_LOG=FILE set, each input's first result is appended to FILE as a JSON
 * line (fuzz/replay_jinja.sh renders the same inputs with python3-jinja2 and compares):
 *   {"t": template, "v": the variables as cJSON prints them, "stage": "compile"|"render",
 *    "ok": bool, "out": the rendering, "err": the message}
 * with t, v, out and err as hex of their bytes (any of them may be invalid UTF-8).
 */
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "text/jinja.h"

static cJSON *fixed_vars;
static FILE *log_file;

static void log_hex(const char *key, const void *p, size_t n)
{
	fprintf(log_file, "\"%s\": \"", key);
	for (size_t i = 0; i < n; i++)
		fprintf(log_file, "%02x", ((const unsigned char *)p)[i]);
	fputc('"', log_file);
}

/* One line of FUZZ_JINJA_LOG. */
static void log_result(const uint8_t *tmpl, size_t tlen, const cJSON *vars, const char *stage,
		       bool ok, const char *out, size_t out_len, const char *err)
{
	fputc('{', log_file);
	log_hex("t", tmpl, tlen);
	char *v = cJSON_PrintUnformatted(vars);
	FUZZ_CHECK(v, "printing the variables");
	fputs(", ", log_file);
	log_hex("v", v, strlen(v));
	free(v);
	fprintf(log_file, ", \"stage\": \"%s\", \"ok\": %s, ", stage, ok ? "true" : "false");
	if (ok)
		log_hex("out", out, out_len);
	else
		log_hex("err", err, strlen(err));
	fputs("}\n", log_file);
	fflush(log_file);
}

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
	const char *lf = getenv("FUZZ_JINJA_LOG");
	if (lf && *lf) {
		log_file = fopen(lf, "a");
		FUZZ_CHECK(log_file, "cannot open %s", lf);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sep = memchr(data, 0xff, size);
	size_t tlen = sep ? (size_t)(sep - data) : size;
	cJSON *parsed = NULL;
	if (sep)
		parsed = cJSON_ParseWithLength((const char *)sep + 1, size - tlen - 1);
	const cJSON *vars = cJSON_IsObject(parsed) ? parsed : fixed_vars;
	struct jinja_template *t = NULL;
	struct bg_err err = {0};
	if (jinja_compile((const char *)data, tlen, &t, &err) != BG_OK) {
		FUZZ_CHECK(!t && err.msg[0], "a failed compile left a template or no message");
		if (log_file)
			log_result(data, tlen, vars, "compile", false, NULL, 0, err.msg);
		cJSON_Delete(parsed);
		return 0;
	}
	struct jinja_opts o = {.year = 2026, .month = 11, .day = 28, .max_steps = 200000,
			       .max_output = 1 << 20, .max_memory = 32u << 20, .max_depth = 50};
	char *out[2] = {NULL, NULL};
	size_t len[2] = {0, 0};
	enum bg_status st[2];
	for (int k = 0; k < 2; k++) {
		struct bg_err e = {0};
		st[k] = jinja_render(t, vars, &o, &out[k], &len[k], &e);
		if (k == 0 && log_file)
			log_result(data, tlen, vars, "render", st[0] == BG_OK, out[0], len[0],
				   e.msg);
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
