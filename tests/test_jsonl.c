/* test_jsonl: the input parser, the result writer and the --resume id reader.
 *
 * Requests are built by hand with chosen token ids and log-probs; the writer's output is
 * parsed back with cJSON and compared field by field, including the exact set of keys.
 * Token strings come from the real Llama-2 SentencePiece vocabulary in ../shared/vocab
 * (byte tokens such as <0xE2> are partial UTF-8 and must come out as U+FFFD). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "strbuf.h"
#include "text/chat.h"
#include "text/chat_jinja.h"
#include "model/gguf.h"
#include "io/jsonl_read.h"
#include "io/jsonl_write.h"
#include "text/tokenizer.h"

/* ---- helpers ---- */

static struct request *parse(const char *line, int64_t line_no, const struct jsonl_defaults *d,
			     struct jsonl_warn *w)
{
	struct request *r = NULL;
	enum bg_status st = jsonl_parse_request(line, strlen(line), line_no, d, w, &r);
	CHECK(st == BG_OK && r, "parse returns a request for %s", line);
	return r;
}

/* Parses line and checks that it is an error with code and a message containing what. */
static void expect_error(const char *line, const char *code, const char *what)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	struct request *r = parse(line, 7, &d, NULL);
	if (!r)
		return;
	CHECK(strcmp(r->error.code, code) == 0, "%s: code %s, want %s (%s)", line, r->error.code,
	      code, r->error.message);
	CHECK(strstr(r->error.message, what) != NULL, "%s: message \"%s\" lacks \"%s\"", line,
	      r->error.message, what);
	CHECK(r->line == 7, "line number kept");
	CHECK(r->finish == REQ_FINISH_ERROR, "finish is error");
	CHECK(r->prompt == NULL && r->input_ids == NULL, "nothing to run");
	CHECK(r->id != NULL, "an error result still has an id");
	req_free(r);
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* True when o has exactly the keys in the NULL-terminated list (in any order). */
static bool exact_keys(const cJSON *o, const char *const *keys)
{
	int n = 0;
	for (const char *const *k = keys; *k; k++, n++)
		if (!get(o, *k))
			return false;
	return cJSON_IsObject(o) && cJSON_GetArraySize(o) == n;
}

static bool str_is(const cJSON *it, const char *s)
{
	return cJSON_IsString(it) && strcmp(it->valuestring, s) == 0;
}

static bool num_is(const cJSON *it, double v)
{
	return cJSON_IsNumber(it) && it->valuedouble == v;
}

/* A float log-prob read back from JSON must be the float that was written. */
static bool float_is(const cJSON *it, float v)
{
	return cJSON_IsNumber(it) && (float)it->valuedouble == v;
}

static cJSON *write_and_parse(const struct request *r, const struct tok *t,
			      const struct jsonl_out_opts *o, char **raw)
{
	char *line = NULL;
	size_t len = 0;
	enum bg_status st = jsonl_write_result(r, t, o, &line, &len);
	CHECK(st == BG_OK && line, "write ok");
	if (!line)
		return NULL;
	CHECK(len == strlen(line), "length");
	CHECK(len > 0 && line[len - 1] == '\n', "ends with a newline");
	CHECK(memchr(line, '\n', len - 1) == NULL, "no newline inside: %s", line);
	cJSON *j = cJSON_ParseWithLength(line, len);
	CHECK(j != NULL, "output parses: %s", line);
	if (raw)
		*raw = line;
	else
		free(line);
	return j;
}

/* ---- parser: constraints (issue 15) ---- */

static void test_constraints(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	struct request *r = parse(
	    "{\"prompt\": \"a\", \"json_schema\": {\"type\": \"integer\"}, \"logit_bias\": "
	    "{\"5\": -100, \"7\": 2.5}, \"bad_words\": [\"x y\"], \"min_tokens\": 3}",
	    1, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	CHECK(r->grammar && grammar_matches(r->grammar, "-12", 3) &&
		  !grammar_matches(r->grammar, "1.5", 3),
	      "json_schema compiled");
	CHECK(r->n_bias == 2 && r->bias_ids[0] == 5 && r->bias_vals[0] == -100 &&
		  r->bias_ids[1] == 7 && r->bias_vals[1] == 2.5f,
	      "logit_bias");
	CHECK(r->n_bad_words == 1 && strcmp(r->bad_words[0], "x y") == 0, "bad_words");
	CHECK(r->min_tokens == 3, "min_tokens");
	req_free(r);
	static const struct {
		const char *line, *match, *nomatch;
	} ok[] = {
	    {"{\"prompt\": \"a\", \"grammar\": \"root ::= [a-c]+\"}", "abc", "abd"},
	    {"{\"prompt\": \"a\", \"regex\": \"[0-9]{2}\"}", "42", "4"},
	    {"{\"prompt\": \"a\", \"choice\": [\"yes\", \"no\"]}", "no", "yes no"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"response_format\": {\"type\": \"json_object\"}}}",
	     "{\"k\": [1]}", "[1]"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", "
	     "\"strict\": true, \"schema\": {\"type\": \"boolean\"}}}}}",
	     "true", "1"},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		r = parse(ok[i].line, 1, &d, NULL);
		CHECK(r->error.code[0] == 0 && r->grammar, "%s: %s", ok[i].line, r->error.message);
		if (r->grammar) {
			CHECK(grammar_matches(r->grammar, ok[i].match, strlen(ok[i].match)), "%s",
			      ok[i].match);
			CHECK(!grammar_matches(r->grammar, ok[i].nomatch, strlen(ok[i].nomatch)),
			      "%s", ok[i].nomatch);
		}
		req_free(r);
	}
	static const struct {
		const char *line, *msg;
	} bad[] = {
	    {"{\"prompt\": \"a\", \"grammar\": \"root ::= (\"}", "grammar: line 1, column 11"},
	    {"{\"prompt\": \"a\", \"grammar\": 3}", "grammar must be a string"},
	    {"{\"prompt\": \"a\", \"regex\": \"(\", \"choice\": [\"a\"]}", "at most one of"},
	    {"{\"prompt\": \"a\", \"choice\": []}", "choice must be a non-empty array"},
	    {"{\"prompt\": \"a\", \"json_schema\": {\"type\": \"tuple\"}}", "unknown type"},
	    {"{\"prompt\": \"a\", \"logit_bias\": {\"1\": 101}}", "[-100, 100]"},
	    {"{\"prompt\": \"a\", \"bad_words\": [\"\"]}", "non-empty strings"},
	    {"{\"prompt\": \"a\", \"min_tokens\": -1}", "min_tokens must be in"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		r = parse(bad[i].line, 1, &d, NULL);
		CHECK(strcmp(r->error.code, "invalid_request") == 0 &&
			  strstr(r->error.message, bad[i].msg),
		      "%s: %s %s", bad[i].line, r->error.code, r->error.message);
		req_free(r);
	}
}

/* ---- parser: native form ---- */

static void test_defaults(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.native.max_tokens = 33;
	d.native.sampling.temperature = 0.7f;
	d.native.sampling.top_k = 40;
	d.native.sampling.top_p = 0.9f;
	d.native.sampling.min_p = 0.05f;
	d.native.sampling.seed = 100;
	d.native.sampling.repetition_penalty = 1.1f;
	d.native.sampling.presence_penalty = 0.25f;
	d.native.sampling.frequency_penalty = -0.5f;
	d.native.logprobs = 2;
	d.native.prompt_logprobs = 1;
	d.native.add_bos = 0;
	d.native.ignore_eos = true;
	struct request *r = parse("{\"prompt\": \"Once upon a time\"}", 5, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	CHECK(strcmp(r->id, "5") == 0, "missing id -> line number, got %s", r->id);
	CHECK(r->line == 5, "line");
	CHECK(r->prompt && strcmp(r->prompt, "Once upon a time") == 0 && r->prompt_len == 16,
	      "prompt");
	CHECK(r->input_ids == NULL, "no ids");
	CHECK(r->max_tokens == 33, "max_tokens default");
	CHECK(r->sampling.temperature == 0.7f && r->sampling.top_k == 40 &&
		  r->sampling.top_p == 0.9f && r->sampling.min_p == 0.05f &&
		  r->sampling.repetition_penalty == 1.1f && r->sampling.presence_penalty == 0.25f &&
		  r->sampling.frequency_penalty == -0.5f,
	      "sampling defaults");
	CHECK(r->sampling.seed == 105, "seed = default + line, got %llu",
	      (unsigned long long)r->sampling.seed);
	CHECK(r->logprobs == 2 && r->sampling.n_top == 2, "logprobs default");
	CHECK(r->prompt_logprobs == 1, "prompt_logprobs default");
	CHECK(r->add_bos == 0 && r->ignore_eos, "add_bos, ignore_eos defaults");
	CHECK(r->n_stop == 0 && r->n_stop_token_ids == 0, "no stops");
	req_free(r);

	d.seed_plus_line = false;
	r = parse("{\"prompt\": \"x\"}", 5, &d, NULL);
	CHECK(r->sampling.seed == 100, "seed_plus_line off");
	req_free(r);

	/* null means omitted */
	r = parse("{\"prompt\": \"x\", \"temperature\": null, \"id\": null, \"stop\": null}", 9, &d,
		  NULL);
	CHECK(r->error.code[0] == 0, "nulls are fine: %s", r->error.message);
	CHECK(r->sampling.temperature == 0.7f && strcmp(r->id, "9") == 0, "nulls -> defaults");
	req_free(r);

	/* the library defaults themselves */
	jsonl_defaults_init(&d);
	r = parse("{\"prompt\": \"x\"}", 1, &d, NULL);
	CHECK(r->max_tokens == 16 && r->sampling.temperature == 0.0f && r->logprobs == -1 &&
		  r->prompt_logprobs == -1 && r->add_bos == -1 && !r->ignore_eos,
	      "library defaults");
	req_free(r);
	r = NULL;
	CHECK(jsonl_parse_request("{\"prompt\": \"x\"}", 15, 3, NULL, NULL, &r) == BG_OK && r &&
		  r->max_tokens == 16,
	      "NULL defaults");
	req_free(r);
}

static void test_native_full(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	const char *line =
	    "{\"id\": \"q17\", \"prompt\": \"Once upon a time\", \"max_tokens\": 64, "
	    "\"temperature\": 0.8, \"top_k\": 40, \"top_p\": 0.95, \"min_p\": 0.1, \"seed\": 7, "
	    "\"repetition_penalty\": 1.2, \"presence_penalty\": 0.5, \"frequency_penalty\": "
	    "-0.5, \"stop\": [\"\\n\\n\", \"END\"], \"stop_token_ids\": [2, 13], "
	    "\"ignore_eos\": true, \"logprobs\": 5, \"prompt_logprobs\": 0, \"add_bos\": false}"
	    "\r\n";
	struct request *r = parse(line, 1, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	CHECK(strcmp(r->id, "q17") == 0, "id");
	CHECK(strcmp(r->prompt, "Once upon a time") == 0, "prompt");
	CHECK(r->max_tokens == 64, "max_tokens");
	CHECK(r->sampling.temperature == 0.8f && r->sampling.top_k == 40 &&
		  r->sampling.top_p == 0.95f && r->sampling.min_p == 0.1f,
	      "sampling");
	CHECK(r->sampling.seed == 7, "an explicit seed is used as is");
	CHECK(r->sampling.repetition_penalty == 1.2f && r->sampling.presence_penalty == 0.5f &&
		  r->sampling.frequency_penalty == -0.5f,
	      "penalties");
	CHECK(r->n_stop == 2 && strcmp(r->stop[0], "\n\n") == 0 && strcmp(r->stop[1], "END") == 0,
	      "stop");
	CHECK(r->n_stop_token_ids == 2 && r->stop_token_ids[0] == 2 && r->stop_token_ids[1] == 13,
	      "stop_token_ids");
	CHECK(r->ignore_eos, "ignore_eos");
	CHECK(r->logprobs == 5 && r->sampling.n_top == 5, "logprobs");
	CHECK(r->prompt_logprobs == 0, "prompt_logprobs");
	CHECK(r->add_bos == 0, "add_bos");
	req_free(r);

	r = parse("{\"input_ids\": [1, 15043, 0], \"stop\": \"x\", \"logprobs\": true, "
		  "\"prompt_logprobs\": false, \"top_k\": -1, \"seed\": -1, \"add_bos\": true, "
		  "\"max_tokens\": 1e2}",
		  2, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	CHECK(r->prompt == NULL && r->n_input_ids == 3 && r->input_ids[0] == 1 &&
		  r->input_ids[1] == 15043 && r->input_ids[2] == 0,
	      "input_ids");
	CHECK(r->n_stop == 1 && strcmp(r->stop[0], "x") == 0, "a single stop string");
	CHECK(r->logprobs == 0 && r->sampling.n_top == 0, "logprobs true = chosen token only");
	CHECK(r->prompt_logprobs == -1, "prompt_logprobs false = none");
	CHECK(r->sampling.top_k == 0, "top_k -1 = disabled");
	CHECK(r->sampling.seed == UINT64_MAX, "seed -1 wraps to 2^64-1");
	CHECK(r->add_bos == 1, "add_bos true");
	CHECK(r->max_tokens == 100, "1e2 is an integer");
	req_free(r);
	/* seeds of 2^63 and above are integers too (vLLM and others print unsigned 64-bit
	 * seeds); before, they were refused as "seed must be an integer" */
	r = parse("{\"prompt\": \"a\", \"seed\": 9223372036854775808}", 2, &d, NULL);
	CHECK(r->error.code[0] == 0 && r->sampling.seed == 9223372036854775808ull,
	      "seed 2^63: %s", r->error.message);
	req_free(r);
	r = parse("{\"prompt\": \"a\", \"seed\": 1e19}", 2, &d, NULL);
	CHECK(r->error.code[0] == 0 && r->sampling.seed == 10000000000000000000ull,
	      "seed 1e19: %s", r->error.message);
	req_free(r);
}

static void test_errors(void)
{
	expect_error("", "empty_line", "empty");
	expect_error("  \t\r", "empty_line", "empty");
	expect_error("{", "invalid_json", "not valid JSON");
	expect_error("{\"prompt\": \"a\",}", "invalid_json", "not valid JSON");
	/* where: the byte (1-based) at which the parser stopped, for a long line */
	expect_error("{\"prompt\": \"a\" x}", "invalid_json", "not valid JSON at byte 16");
	expect_error("{\"prompt\": \"a\", \"max_tokens\": 1O}", "invalid_json", "at byte 32");
	expect_error("{\"prompt\": \"a\"} {\"prompt\": \"b\"}", "invalid_json", "after");
	expect_error("[1, 2]", "invalid_request", "object");
	expect_error("\"text\"", "invalid_request", "object");
	expect_error("{\"id\": \"a\"}", "invalid_request", "missing prompt");
	expect_error("{\"prompt\": \"a\", \"input_ids\": [1]}", "invalid_request", "exactly one");
	expect_error("{\"prompt\": \"\"}", "invalid_request", "prompt is empty");
	expect_error("{\"prompt\": 5}", "invalid_request", "prompt must be a string");
	expect_error("{\"prompt\": [\"a\"]}", "invalid_request", "prompt must be a string");
	expect_error("{\"input_ids\": \"1 2\"}", "invalid_request", "input_ids must be an array");
	expect_error("{\"input_ids\": []}", "invalid_request", "input_ids is empty");
	expect_error("{\"input_ids\": [1, -2]}", "invalid_request", "input_ids[1]");
	expect_error("{\"input_ids\": [1.5]}", "invalid_request", "input_ids[0]");
	expect_error("{\"input_ids\": [\"1\"]}", "invalid_request", "input_ids[0]");
	expect_error("{\"input_ids\": [4294967296]}", "invalid_request", "input_ids[0]");
	expect_error("{\"id\": 5, \"prompt\": \"a\"}", "invalid_request", "id must be");
	expect_error("{\"id\": \"\", \"prompt\": \"a\"}", "invalid_request", "id must be");
	expect_error("{\"prompt\": \"a\", \"max_tokens\": -1}", "invalid_request",
		     "max_tokens must be in");
	expect_error("{\"prompt\": \"a\", \"max_tokens\": 0}", "invalid_request",
		     "max_tokens must be in");
	expect_error("{\"prompt\": \"a\", \"max_tokens\": 2.5}", "invalid_request",
		     "max_tokens must be an integer");
	expect_error("{\"prompt\": \"a\", \"max_tokens\": \"5\"}", "invalid_request",
		     "max_tokens must be an integer");
	expect_error("{\"prompt\": \"a\", \"max_tokens\": 3000000000}", "invalid_request",
		     "max_tokens must be in");
	/* the value as written, not its double's 17 digits (-0.10000000000000001) */
	expect_error("{\"prompt\": \"a\", \"temperature\": -0.1}", "invalid_request",
		     "temperature must be in [0, 1e+06], got -0.1");
	expect_error("{\"prompt\": \"a\", \"presence_penalty\": 2.01}", "invalid_request",
		     "presence_penalty must be in [-2, 2], got 2.01");
	expect_error("{\"prompt\": \"a\", \"min_p\": 1.0000000000000002}", "invalid_request",
		     "got 1.0000000000000002");
	expect_error("{\"prompt\": \"a\", \"top_k\": 100000000000}", "invalid_request",
		     "got 100000000000");
	/* a bad logit_bias value names its key and the value (before: only the range) */
	expect_error("{\"prompt\": \"a\", \"logit_bias\": {\"3\": 1, \"5\": 101}}", "invalid_request",
		     "logit_bias[\"5\"] must be a number in [-100, 100], got 101");
	expect_error("{\"prompt\": \"a\", \"logit_bias\": {\"5\": \"x\"}}", "invalid_request",
		     "logit_bias[\"5\"] must be a number in [-100, 100]");
	expect_error("{\"prompt\": \"a\", \"temperature\": \"hot\"}", "invalid_request",
		     "temperature must be a number");
	expect_error("{\"prompt\": \"a\", \"top_p\": 0}", "invalid_request", "top_p must be in");
	expect_error("{\"prompt\": \"a\", \"top_p\": 1.5}", "invalid_request", "top_p must be in");
	expect_error("{\"prompt\": \"a\", \"top_p\": true}", "invalid_request",
		     "top_p must be a number");
	expect_error("{\"prompt\": \"a\", \"top_k\": -2}", "invalid_request", "top_k must be in");
	expect_error("{\"prompt\": \"a\", \"top_k\": 1.5}", "invalid_request",
		     "top_k must be an integer");
	expect_error("{\"prompt\": \"a\", \"min_p\": 1.5}", "invalid_request", "min_p must be in");
	expect_error("{\"prompt\": \"a\", \"min_p\": -0.1}", "invalid_request", "min_p must be in");
	expect_error("{\"prompt\": \"a\", \"min_p\": [0]}", "invalid_request",
		     "min_p must be a number");
	expect_error("{\"prompt\": \"a\", \"seed\": 1.5}", "invalid_request",
		     "seed must be an integer");
	expect_error("{\"prompt\": \"a\", \"seed\": \"7\"}", "invalid_request",
		     "seed must be an integer");
	/* 2^64 - 1 reads as the double 2^64, past every 64-bit integer: the range is named */
	expect_error("{\"prompt\": \"a\", \"seed\": 18446744073709551615}", "invalid_request",
		     "seed must be an integer in [-2^63, 2^64)");
	expect_error("{\"prompt\": \"a\", \"seed\": -1e19}", "invalid_request",
		     "seed must be an integer in [-2^63, 2^64)");
	expect_error("{\"prompt\": \"a\", \"repetition_penalty\": 0}", "invalid_request",
		     "repetition_penalty must be in");
	expect_error("{\"prompt\": \"a\", \"repetition_penalty\": \"x\"}", "invalid_request",
		     "repetition_penalty must be a number");
	expect_error("{\"prompt\": \"a\", \"presence_penalty\": 3}", "invalid_request",
		     "presence_penalty must be in");
	expect_error("{\"prompt\": \"a\", \"presence_penalty\": {}}", "invalid_request",
		     "presence_penalty must be a number");
	expect_error("{\"prompt\": \"a\", \"frequency_penalty\": -2.5}", "invalid_request",
		     "frequency_penalty must be in");
	expect_error("{\"prompt\": \"a\", \"frequency_penalty\": []}", "invalid_request",
		     "frequency_penalty must be a number");
	expect_error("{\"prompt\": \"a\", \"stop\": 5}", "invalid_request", "stop must be");
	expect_error("{\"prompt\": \"a\", \"stop\": [\"x\", 1]}", "invalid_request", "stop[1]");
	expect_error("{\"prompt\": \"a\", \"stop\": [\"\"]}", "invalid_request",
		     "stop strings must not be empty");
	expect_error("{\"prompt\": \"a\", \"stop\": \"\"}", "invalid_request",
		     "stop strings must not be empty");
	expect_error("{\"prompt\": \"a\", \"stop_token_ids\": 2}", "invalid_request",
		     "stop_token_ids must be an array");
	expect_error("{\"prompt\": \"a\", \"stop_token_ids\": [-1]}", "invalid_request",
		     "stop_token_ids[0]");
	expect_error("{\"prompt\": \"a\", \"ignore_eos\": 1}", "invalid_request",
		     "ignore_eos must be true or false");
	expect_error("{\"prompt\": \"a\", \"logprobs\": 21}", "invalid_request",
		     "logprobs must be in");
	expect_error("{\"prompt\": \"a\", \"logprobs\": -1}", "invalid_request",
		     "logprobs must be in");
	expect_error("{\"prompt\": \"a\", \"logprobs\": \"5\"}", "invalid_request",
		     "logprobs must be an integer");
	expect_error("{\"prompt\": \"a\", \"prompt_logprobs\": 1.5}", "invalid_request",
		     "prompt_logprobs must be an integer");
	expect_error("{\"prompt\": \"a\", \"add_bos\": \"yes\"}", "invalid_request",
		     "add_bos must be true or false");
	expect_error("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "unsupported",
		     "no chat template; pass --chat-template");

	/* a readable id survives an error elsewhere on the line */
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	struct request *r =
	    parse("{\"id\": \"keep\", \"prompt\": \"a\", \"top_p\": 2}", 4, &d, NULL);
	CHECK(strcmp(r->id, "keep") == 0 && r->error.code[0], "id kept on error");
	req_free(r);
	/* the first problem is the one reported */
	r = parse("{\"prompt\": \"a\", \"max_tokens\": -1, \"temperature\": -1}", 4, &d, NULL);
	CHECK(strstr(r->error.message, "max_tokens") != NULL, "first error: %s", r->error.message);
	req_free(r);
	/* a line number id for lines whose id cannot be read */
	r = parse("{nope", 12, &d, NULL);
	CHECK(strcmp(r->id, "12") == 0, "invalid JSON id is the line number");
	req_free(r);
}

struct warn_log {
	int n;
	char last[256];
};

static void on_warn(void *user, const char *msg)
{
	struct warn_log *l = user;
	l->n++;
	snprintf(l->last, sizeof l->last, "%s", msg);
}

static void test_unknown_fields(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	struct warn_log log = {0};
	struct jsonl_warn w;
	jsonl_warn_init(&w, on_warn, &log);
	struct request *r = parse("{\"prompt\": \"a\", \"tmeperature\": 1}", 3, &d, &w);
	CHECK(r->error.code[0] == 0, "an unknown field is not an error");
	CHECK(r->sampling.temperature == 0.0f, "and is ignored");
	req_free(r);
	CHECK(log.n == 1 && strstr(log.last, "tmeperature") && strstr(log.last, "line 3"),
	      "warned: %s", log.last);
	r = parse("{\"prompt\": \"b\", \"tmeperature\": 2, \"foo\": 1}", 4, &d, &w);
	req_free(r);
	CHECK(log.n == 2 && strstr(log.last, "\"foo\""), "foo warned once, tmeperature not again");
	r = parse("{\"prompt\": \"c\", \"foo\": 1, \"tmeperature\": 2}", 5, &d, &w);
	req_free(r);
	CHECK(log.n == 2, "no repeat");
	/* a body field is its own name; warnings happen on lines with errors too */
	r = parse("{\"custom_id\": \"x\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "\"a\", \"foo\": 1, \"stream\": false}}",
		  6, &d, &w);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	req_free(r);
	CHECK(log.n == 3 && strstr(log.last, "body.foo"), "body.foo warned: %s", log.last);
	CHECK(w.n_names == 3, "three names remembered");
	/* no emitter: names are still remembered */
	struct jsonl_warn w2;
	jsonl_warn_init(&w2, NULL, NULL);
	r = parse("{\"prompt\": \"a\", \"zzz\": 1}", 1, &d, &w2);
	req_free(r);
	CHECK(w2.n_names == 1 && strcmp(w2.names[0], "zzz") == 0, "recorded without emitter");
	/* many distinct names: bounded, then silent */
	struct warn_log log3 = {0};
	struct jsonl_warn w3;
	jsonl_warn_init(&w3, on_warn, &log3);
	for (int i = 0; i < JSONL_WARN_NAMES + 5; i++) {
		char line[64];
		snprintf(line, sizeof line, "{\"prompt\": \"a\", \"f%d\": 1}", i);
		r = parse(line, i + 1, &d, &w3);
		req_free(r);
	}
	CHECK(w3.full && w3.n_names == JSONL_WARN_NAMES, "bounded set");
	CHECK(log3.n == JSONL_WARN_NAMES + 1, "one last message when full, got %d", log3.n);
}

/* ---- parser: OpenAI batch form ---- */

static void test_openai_parse(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.openai.max_tokens = 50;
	d.model_name = "tiny";
	d.created = 1700000000;
	struct request *r = parse(
	    "{\"custom_id\": \"request-1\", \"method\": \"POST\", \"url\": \"/v1/completions\", "
	    "\"body\": {\"model\": \"gpt-3.5-turbo-instruct\", \"prompt\": \"Say this is a "
	    "test\", \"max_tokens\": 7, \"temperature\": 0.5, \"top_p\": 0.5, \"seed\": 3, "
	    "\"logprobs\": 2, \"stop\": \"\\n\", \"n\": 1, \"presence_penalty\": 0.1, "
	    "\"frequency_penalty\": 0.2, \"top_k\": 5}}",
	    1, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	CHECK(strcmp(r->id, "request-1") == 0, "id = custom_id");
	const struct jsonl_info *info = jsonl_request_info(r);
	CHECK(info && info->form == JSONL_FORM_OPENAI_COMPLETION, "completion form");
	CHECK(jsonl_request_form(r) == JSONL_FORM_OPENAI_COMPLETION, "form accessor");
	CHECK(info && strcmp(info->model, "gpt-3.5-turbo-instruct") == 0, "model");
	CHECK(info && strcmp(info->custom_id, "request-1") == 0 &&
		  strcmp(info->url, "/v1/completions") == 0 && info->created == 1700000000,
	      "custom_id, url, created");
	CHECK(strcmp(r->prompt, "Say this is a test") == 0, "prompt");
	CHECK(r->max_tokens == 7 && r->sampling.temperature == 0.5f && r->sampling.top_p == 0.5f &&
		  r->sampling.seed == 3 && r->logprobs == 2 && r->n_stop == 1 &&
		  r->sampling.presence_penalty == 0.1f && r->sampling.frequency_penalty == 0.2f &&
		  r->sampling.top_k == 5,
	      "body params");
	req_free(r);

	/* defaults, model name fallback, max_completion_tokens, prompt forms */
	r = parse("{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "[\"Hi\"], \"max_tokens\": 3, \"max_completion_tokens\": 9}}",
		  2, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	CHECK(strcmp(r->prompt, "Hi") == 0 && r->max_tokens == 9, "[string], "
								  "max_completion_tokens");
	CHECK(strcmp(jsonl_request_info(r)->model, "tiny") == 0, "model from defaults");
	CHECK(r->logprobs == -1, "no logprobs");
	req_free(r);
	r = parse("{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "[1, 2, 3]}}",
		  2, &d, NULL);
	CHECK(r->error.code[0] == 0 && r->n_input_ids == 3 && r->input_ids[2] == 3 &&
		  r->max_tokens == 50,
	      "token-id prompt, default max_tokens");
	req_free(r);
	r = parse("{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "[[4, 5]]}}",
		  2, &d, NULL);
	CHECK(r->error.code[0] == 0 && r->n_input_ids == 2 && r->input_ids[0] == 4,
	      "[[ids]] prompt");
	req_free(r);

	struct {
		const char *line, *code, *what;
	} errs[] = {
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": [\"a\", "
	     "\"b\"]}}",
	     "unsupported", "one per line"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"n\": 2, \"best_of\": 3}}",
	     "unsupported", "best_of"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"n\": 0}}",
	     "invalid_request", "n"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"echo\": true}}",
	     "unsupported", "echo"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"logprobs\": true}}",
	     "invalid_request", "body.logprobs must be an integer"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"response_format\": {\"type\": \"xml\"}}}",
	     "unsupported", "response_format.type \"xml\""},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"logit_bias\": {\"x\": -100}}}",
	     "invalid_request", "body.logit_bias keys must be token ids"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"response_format\": {\"type\": \"json_object\"}, \"regex\": \"a\"}}",
	     "invalid_request", "at most one of body.grammar"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\"}}}}",
	     "invalid_request", "json_schema.schema is missing"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"\"}}",
	     "invalid_request", "prompt is empty"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"messages\": []}}",
	     "invalid_request", "takes body.prompt"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {}}",
	     "invalid_request", "missing prompt"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/embeddings\", \"body\": {\"input\": \"a\"}}",
	     "unsupported", "/v1/embeddings"},
	    {"{\"custom_id\": \"a\", \"method\": \"GET\", \"url\": \"/v1/completions\", \"body\": "
	     "{\"prompt\": \"a\"}}",
	     "invalid_request", "POST"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\"}", "invalid_request",
	     "body must be an object"},
	    {"{\"body\": {\"prompt\": \"a\"}, \"url\": \"/v1/completions\"}", "invalid_request",
	     "custom_id"},
	    {"{\"custom_id\": 3, \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\"}}",
	     "invalid_request", "custom_id"},
	    {"{\"custom_id\": \"a\", \"body\": {\"prompt\": \"a\"}}", "invalid_request", "url"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\", "
	     "\"temperature\": -1}}",
	     "invalid_request", "temperature must be in"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\", \"content\": \"hi\"}]}}",
	     "unsupported", "model has no chat template; pass --chat-template"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/chat/completions\", \"body\": {\"prompt\": "
	     "\"a\"}}",
	     "invalid_request", "takes body.messages"},
	    {"{\"custom_id\": \"a\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": [{\"type\": "
	     "\"function\"}]}}",
	     "unsupported", "tools"},
	};
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		expect_error(errs[i].line, errs[i].code, errs[i].what);

	/* the error result of an OpenAI line keeps the custom_id when it is readable */
	r = parse("{\"custom_id\": \"zz\", \"url\": \"/v1/completions\", \"body\": {\"echo\": true, "
		  "\"prompt\": \"a\"}}",
		  8, &d, NULL);
	CHECK(strcmp(r->id, "zz") == 0 && jsonl_request_form(r) == JSONL_FORM_OPENAI_COMPLETION,
	      "error keeps custom_id and form");
	req_free(r);
}

static void test_chat_parse(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.chat = chat_template_by_name("chatml");
	const char *line =
	    "{\"custom_id\": \"c1\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", "
	    "\"body\": {\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": "
	    "\"Be brief.\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
	    "\"Hi \"}, {\"type\": \"text\", \"text\": \"there\"}]}], \"logprobs\": true, "
	    "\"top_logprobs\": 3, \"max_completion_tokens\": 12}}";
	struct request *r = parse(line, 1, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	const struct jsonl_info *info = jsonl_request_info(r);
	CHECK(info && info->form == JSONL_FORM_OPENAI_CHAT && info->chat_logprobs, "chat form");
	/* ChatML as published: <|im_start|>role\ncontent<|im_end|>\n ...; content parts
	 * joined with "\n", as vLLM does for a template that takes a string */
	CHECK(r->prompt && strcmp(r->prompt, "<|im_start|>system\nBe brief.<|im_end|>\n"
					     "<|im_start|>user\nHi \nthere<|im_end|>\n"
					     "<|im_start|>assistant\n") == 0,
	      "rendered: %s", r->prompt);
	CHECK(r->logprobs == 3 && r->max_tokens == 12, "top_logprobs -> logprobs");
	/* the same line through a ChatML Jinja template: the same prompt, byte for byte */
	static const char chatml_jinja[] =
	    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
	    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
	struct chat_jinja *cj = NULL;
	CHECK(chat_jinja_create(chatml_jinja, strlen(chatml_jinja), NULL, NULL, 2025, 1, 1, &cj,
				NULL) == BG_OK,
	      "chatml jinja");
	struct jsonl_defaults dj = d;
	dj.jinja = cj;
	struct request *rj = parse(line, 1, &dj, NULL);
	CHECK(rj->error.code[0] == 0 && rj->prompt && r->prompt && strcmp(rj->prompt, r->prompt) == 0,
	      "content parts: built-in '%s', Jinja '%s'", r->prompt ? r->prompt : "",
	      rj->prompt ? rj->prompt : rj->error.message);
	req_free(rj);
	chat_jinja_destroy(cj);
	req_free(r);

	r = parse("{\"custom_id\": \"c2\", \"url\": \"/v1/chat/completions\", \"body\": "
		  "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}}",
		  2, &d, NULL);
	CHECK(r->error.code[0] == 0 && r->logprobs == -1 && !jsonl_request_info(r)->chat_logprobs,
	      "no logprobs by default");
	req_free(r);

	/* native messages */
	r = parse("{\"id\": \"n1\", \"messages\": [{\"role\": \"user\", \"content\": \"Yo\"}]}", 3,
		  &d, NULL);
	CHECK(r->error.code[0] == 0 && jsonl_request_form(r) == JSONL_FORM_NATIVE &&
		  strcmp(r->prompt, "<|im_start|>user\nYo<|im_end|>\n<|im_start|>assistant\n") == 0,
	      "native messages: %s", r->error.message);
	req_free(r);

	struct {
		const char *line, *code, *what;
	} errs[] = {
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}}",
	     "invalid_request", "requires body.logprobs"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"tool\", \"content\": \"x\"}]}}",
	     "invalid_request", "role \"tool\""},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"content\": \"x\"}]}}",
	     "invalid_request", "messages[0].role"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[]}}",
	     "invalid_request", "body.messages is empty"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "\"hi\"}}",
	     "invalid_request", "array"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\", \"content\": 5}]}}",
	     "invalid_request", "content"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}}",
	     "unsupported", "text"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": 3}}",
	     "invalid_request", "body.logprobs must be true or false"},
	    /* a turn without content is not an empty turn: only an assistant's may omit it */
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\"}]}}",
	     "invalid_request", "messages[0] (role \"user\") has no content"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"system\", \"content\": null}, {\"role\": \"user\", \"content\": "
	     "\"x\"}]}}",
	     "invalid_request", "messages[0] (role \"system\") has no content"},
	};
	/* ... an assistant turn (one with tool calls, say) may */
	r = parse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": "
		  "\"assistant\"}, {\"role\": \"user\", \"content\": \"b\"}]}",
		  4, &d, NULL);
	CHECK(r->error.code[0] == 0, "an assistant turn without content: %s", r->error.message);
	req_free(r);
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
		r = parse(errs[i].line, 5, &d, NULL);
		CHECK(strcmp(r->error.code, errs[i].code) == 0 &&
			  strstr(r->error.message, errs[i].what),
		      "%s: %s %s", errs[i].line, r->error.code, r->error.message);
		req_free(r);
	}
}

/* ---- writer ---- */

static const struct tok *g_tok; /* llama-spm, or NULL when ../shared is absent */
static int32_t id_hello = -1, id_world = -1, id_e2 = -1, id_eos = 2;

static int32_t find_id(const struct tok *t, const char *text)
{
	for (int32_t i = 0; i < tok_n_vocab(t); i++) {
		const char *s = tok_text(t, i);
		if (s && strcmp(s, text) == 0)
			return i;
	}
	return -1;
}

static void load_vocab(struct gguf_ctx **g, struct tok **t)
{
	*g = NULL;
	*t = NULL;
	const char *path = check_shared("vocab/ggml-vocab-llama-spm.gguf");
	if (!path)
		return;
	struct bg_err err = {0};
	if (gguf_open(path, g, &err) != BG_OK || tok_load(*g, t, &err) != BG_OK) {
		CHECK(0, "load %s: %s", path, err.msg);
		return;
	}
	g_tok = *t;
	id_hello = find_id(*t, "\xe2\x96\x81Hello");
	id_world = find_id(*t, "\xe2\x96\x81world");
	id_e2 = find_id(*t, "<0xE2>");
	CHECK(id_hello > 0 && id_world > 0 && id_e2 > 0, "vocab ids %d %d %d", id_hello, id_world,
	      id_e2);
}

/* Moves the parser's record (request.user) of p onto r and frees p. */
static void adopt_record(struct request *r, struct request *p)
{
	r->user = p->user;
	r->user_free = p->user_free;
	p->user = NULL;
	p->user_free = NULL;
	req_free(p);
}

/* A finished request as the engine would leave it: 3 tokens " Hello", " world", <0xE2>. */
static struct request *made_result(void)
{
	struct request *r = req_new();
	r->id = strdup("q17");
	r->line = 3;
	r->prompt = strdup("Say");
	r->prompt_len = 3;
	r->logprobs = 2;
	r->finish = REQ_FINISH_LENGTH;
	r->n_out = 3;
	r->out_ids = malloc(3 * sizeof(int32_t));
	r->out_ids[0] = id_hello;
	r->out_ids[1] = id_world;
	r->out_ids[2] = id_e2;
	r->out_logprobs = malloc(3 * sizeof(float));
	r->out_logprobs[0] = -0.0318f;
	r->out_logprobs[1] = -1.25f;
	r->out_logprobs[2] = -2.5f;
	r->out_top = calloc(3, sizeof(struct sampler_result));
	for (int i = 0; i < 3; i++) {
		r->out_top[i].token = r->out_ids[i];
		r->out_top[i].logprob = r->out_logprobs[i];
		r->out_top[i].n_top = 2;
	}
	/* position 0: the chosen token first; position 2: chosen token not in the top 2 */
	r->out_top[0].top_ids[0] = id_hello;
	r->out_top[0].top_logprobs[0] = -0.0318f;
	r->out_top[0].top_ids[1] = id_world;
	r->out_top[0].top_logprobs[1] = -3.5f;
	r->out_top[1].top_ids[0] = id_world;
	r->out_top[1].top_logprobs[0] = -1.25f;
	r->out_top[1].top_ids[1] = id_eos;
	r->out_top[1].top_logprobs[1] = -1.5f;
	r->out_top[2].top_ids[0] = id_hello;
	r->out_top[2].top_logprobs[0] = -0.5f;
	r->out_top[2].top_ids[1] = id_world;
	r->out_top[2].top_logprobs[1] = -1.0f;
	r->text = strdup(" Hello world\xe2");
	r->text_len = strlen(r->text);
	r->cum_logprob = -3.7818;
	r->n_prompt = 4;
	r->prompt_ids = malloc(4 * sizeof(int32_t));
	r->prompt_ids[0] = 1;
	r->prompt_ids[1] = id_hello;
	r->prompt_ids[2] = id_world;
	r->prompt_ids[3] = id_e2;
	r->queue_ms = 1.25;
	r->ttft_ms = 8.5;
	r->e2e_ms = 140.0;
	r->preemptions = 1;
	r->cached_tokens = 2;
	return r;
}

static void test_native_writer(void)
{
	if (!g_tok)
		return;
	struct request *r = made_result();
	char *raw = NULL;
	cJSON *j = write_and_parse(r, g_tok, NULL, &raw);
	if (!j) {
		req_free(r);
		return;
	}
	static const char *const keys[] = {
	    "id",	   "text",  "token_ids", "finish_reason", "logprobs", "top_logprobs",
	    "cum_logprob", "usage", "metrics",	 "error",	  NULL};
	CHECK(exact_keys(j, keys), "native keys: %s", raw);
	CHECK(str_is(get(j, "id"), "q17"), "id");
	/* the dangling 0xE2 byte of the text is not valid UTF-8: U+FFFD */
	CHECK(str_is(get(j, "text"), " Hello world\xef\xbf\xbd"), "text");
	const cJSON *ids = get(j, "token_ids");
	CHECK(cJSON_GetArraySize(ids) == 3 && num_is(cJSON_GetArrayItem(ids, 0), id_hello) &&
		  num_is(cJSON_GetArrayItem(ids, 2), id_e2),
	      "token_ids");
	CHECK(str_is(get(j, "finish_reason"), "length"), "finish_reason");
	const cJSON *lp = get(j, "logprobs");
	CHECK(cJSON_GetArraySize(lp) == 3 && float_is(cJSON_GetArrayItem(lp, 0), -0.0318f) &&
		  float_is(cJSON_GetArrayItem(lp, 1), -1.25f) &&
		  float_is(cJSON_GetArrayItem(lp, 2), -2.5f),
	      "logprobs");
	CHECK(strstr(raw, "[-0.0318,-1.25,-2.5]") != NULL, "shortest float digits: %s", raw);
	const cJSON *top = get(j, "top_logprobs");
	CHECK(cJSON_GetArraySize(top) == 3, "top per position");
	const cJSON *t0 = cJSON_GetArrayItem(top, 0);
	CHECK(cJSON_GetArraySize(t0) == 2, "2 alternatives");
	const cJSON *e = cJSON_GetArrayItem(t0, 1);
	static const char *const ekeys[] = {"id", "token", "logprob", NULL};
	CHECK(exact_keys(e, ekeys), "entry keys");
	CHECK(num_is(get(e, "id"), id_world) && str_is(get(e, "token"), " world") &&
		  float_is(get(e, "logprob"), -3.5f),
	      "entry values");
	const cJSON *e1 = cJSON_GetArrayItem(cJSON_GetArrayItem(top, 1), 1);
	CHECK(num_is(get(e1, "id"), id_eos) && str_is(get(e1, "token"), "</s>"),
	      "a control token shows its text with render_special");
	CHECK(cJSON_IsNumber(get(j, "cum_logprob")) &&
		  get(j, "cum_logprob")->valuedouble == -3.7818,
	      "cum_logprob round-trips");
	const cJSON *u = get(j, "usage");
	static const char *const ukeys[] = {"prompt_tokens", "completion_tokens", "cached_tokens",
					    NULL};
	CHECK(exact_keys(u, ukeys) && num_is(get(u, "prompt_tokens"), 4) &&
		  num_is(get(u, "completion_tokens"), 3) && num_is(get(u, "cached_tokens"), 2),
	      "usage");
	const cJSON *m = get(j, "metrics");
	static const char *const mkeys[] = {"queue_ms", "ttft_ms", "e2e_ms", "preemptions", NULL};
	CHECK(exact_keys(m, mkeys) && num_is(get(m, "queue_ms"), 1.25) &&
		  num_is(get(m, "ttft_ms"), 8.5) && num_is(get(m, "e2e_ms"), 140) &&
		  num_is(get(m, "preemptions"), 1),
	      "metrics");
	CHECK(cJSON_IsNull(get(j, "error")), "error null");
	cJSON_Delete(j);
	free(raw);

	/* render_special off: control tokens are "" */
	struct jsonl_out_opts o;
	jsonl_out_opts_init(&o);
	o.render_special = false;
	j = write_and_parse(r, g_tok, &o, NULL);
	e1 = cJSON_GetArrayItem(cJSON_GetArrayItem(get(j, "top_logprobs"), 1), 1);
	CHECK(str_is(get(e1, "token"), ""), "control token hidden");
	cJSON_Delete(j);

	/* the byte token in a top list: U+FFFD, not raw bytes */
	r->out_top[1].top_ids[1] = id_e2;
	j = write_and_parse(r, g_tok, NULL, NULL);
	e1 = cJSON_GetArrayItem(cJSON_GetArrayItem(get(j, "top_logprobs"), 1), 1);
	CHECK(str_is(get(e1, "token"), "\xef\xbf\xbd"), "partial UTF-8 token -> U+FFFD");
	cJSON_Delete(j);

	/* logprobs 0: logprobs but no top_logprobs; none: neither */
	r->logprobs = 0;
	r->finish = REQ_FINISH_EOS;
	j = write_and_parse(r, g_tok, NULL, NULL);
	CHECK(get(j, "logprobs") && !get(j, "top_logprobs"), "logprobs 0");
	CHECK(str_is(get(j, "finish_reason"), "eos"), "eos");
	cJSON_Delete(j);
	r->logprobs = -1;
	r->finish = REQ_FINISH_STOP;
	j = write_and_parse(r, g_tok, NULL, NULL);
	static const char *const keys2[] = {"id",	   "text",  "token_ids", "finish_reason",
					    "cum_logprob", "usage", "metrics",	 "error",
					    NULL};
	CHECK(exact_keys(j, keys2), "no logprob fields when not asked");
	CHECK(str_is(get(j, "finish_reason"), "stop"), "stop");
	cJSON_Delete(j);

	/* prompt log-probs: one per prompt token, the first null */
	r->prompt_logprobs = 1;
	r->prompt_lp = malloc(4 * sizeof(float));
	r->prompt_lp[0] = NAN;
	r->prompt_lp[1] = -5.0f;
	r->prompt_lp[2] = -0.75f;
	r->prompt_lp[3] = -9.0f;
	r->prompt_top = calloc(4, sizeof(struct sampler_result));
	for (int i = 1; i < 4; i++) {
		r->prompt_top[i].n_top = 1;
		r->prompt_top[i].top_ids[0] = id_world;
		r->prompt_top[i].top_logprobs[0] = -0.25f;
	}
	j = write_and_parse(r, g_tok, NULL, &raw);
	const cJSON *pids = get(j, "prompt_token_ids");
	const cJSON *plp = get(j, "prompt_logprobs");
	const cJSON *ptop = get(j, "prompt_top_logprobs");
	CHECK(cJSON_GetArraySize(pids) == 4 && num_is(cJSON_GetArrayItem(pids, 0), 1),
	      "prompt_token_ids");
	CHECK(cJSON_GetArraySize(plp) == 4 && cJSON_IsNull(cJSON_GetArrayItem(plp, 0)) &&
		  float_is(cJSON_GetArrayItem(plp, 2), -0.75f),
	      "prompt_logprobs: %s", raw);
	CHECK(cJSON_GetArraySize(ptop) == 4 && cJSON_IsNull(cJSON_GetArrayItem(ptop, 0)) &&
		  num_is(get(cJSON_GetArrayItem(cJSON_GetArrayItem(ptop, 3), 0), "id"), id_world),
	      "prompt_top_logprobs");
	cJSON_Delete(j);
	free(raw);
	req_free(r);
}

static void test_native_error_writer(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.native.logprobs = 3;
	struct request *r =
	    parse("{\"id\": \"bad\", \"prompt\": \"a\", \"top_p\": 7}", 42, &d, NULL);
	char *raw = NULL;
	cJSON *j = write_and_parse(r, NULL, NULL, &raw);
	if (j) {
		CHECK(str_is(get(j, "id"), "bad"), "id");
		CHECK(str_is(get(j, "finish_reason"), "error"), "finish error");
		CHECK(str_is(get(j, "text"), "") && cJSON_GetArraySize(get(j, "token_ids")) == 0,
		      "empty output");
		CHECK(cJSON_GetArraySize(get(j, "logprobs")) == 0 &&
			  cJSON_GetArraySize(get(j, "top_logprobs")) == 0,
		      "empty log-prob arrays when asked");
		const cJSON *e = get(j, "error");
		static const char *const ekeys[] = {"code", "message", "line", NULL};
		CHECK(exact_keys(e, ekeys), "error keys: %s", raw);
		CHECK(str_is(get(e, "code"), "invalid_request") &&
			  strstr(get(e, "message")->valuestring, "top_p") &&
			  num_is(get(e, "line"), 42),
		      "error fields");
		CHECK(num_is(get(get(j, "usage"), "prompt_tokens"), 0), "no usage");
		cJSON_Delete(j);
		/* --resume reads the id back */
		char *id = NULL;
		CHECK(jsonl_result_id(raw, strlen(raw), &id) == BG_OK && id &&
			  strcmp(id, "bad") == 0,
		      "result id");
		free(id);
		free(raw);
	}
	req_free(r);

	/* an engine error (set after parsing) is written the same way */
	r = req_new();
	r->id = strdup("long");
	r->line = 9;
	snprintf(r->error.code, sizeof r->error.code, "too_long");
	snprintf(r->error.message, sizeof r->error.message, "prompt + max_tokens > 2048");
	r->finish = REQ_FINISH_ERROR;
	j = write_and_parse(r, NULL, NULL, NULL);
	CHECK(j && str_is(get(get(j, "error"), "code"), "too_long") &&
		  num_is(get(get(j, "error"), "line"), 9),
	      "engine error");
	cJSON_Delete(j);
	req_free(r);
}

static void test_openai_writer(void)
{
	if (!g_tok)
		return;
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.created = 1711111111;
	d.chat = chat_template_by_name("chatml");

	/* completion: parse a line, then fill in what the engine would */
	struct request *p =
	    parse("{\"custom_id\": \"req-1\", \"method\": \"POST\", \"url\": "
		  "\"/v1/completions\", \"body\": {\"model\": \"tiny\", \"prompt\": "
		  "\"Say\", \"logprobs\": 2}}",
		  3, &d, NULL);
	CHECK(p->error.code[0] == 0 && p->logprobs == 2, "valid: %s", p->error.message);
	struct request *r = made_result();
	adopt_record(r, p);
	CHECK(jsonl_request_form(r) == JSONL_FORM_OPENAI_COMPLETION, "record moved");

	struct jsonl_out_opts o;
	jsonl_out_opts_init(&o);
	o.run_id = "R";
	char *raw = NULL;
	cJSON *j = write_and_parse(r, g_tok, &o, &raw);
	static const char *const top_keys[] = {"id", "custom_id", "response", "error", NULL};
	CHECK(exact_keys(j, top_keys), "batch output keys: %s", raw);
	CHECK(str_is(get(j, "id"), "batch_req_R3") && str_is(get(j, "custom_id"), "req-1") &&
		  cJSON_IsNull(get(j, "error")),
	      "batch line");
	const cJSON *resp = get(j, "response");
	static const char *const resp_keys[] = {"status_code", "request_id", "body", NULL};
	CHECK(exact_keys(resp, resp_keys) && num_is(get(resp, "status_code"), 200) &&
		  str_is(get(resp, "request_id"), "req_R3"),
	      "response");
	const cJSON *body = get(resp, "body");
	static const char *const body_keys[] = {"id",	   "object", "created", "model",
						"choices", "usage",  NULL};
	CHECK(exact_keys(body, body_keys), "completion keys");
	CHECK(str_is(get(body, "id"), "cmpl-R3") &&
		  str_is(get(body, "object"), "text_completion") &&
		  num_is(get(body, "created"), 1711111111) && str_is(get(body, "model"), "tiny"),
	      "completion header");
	const cJSON *ch = cJSON_GetArrayItem(get(body, "choices"), 0);
	static const char *const ch_keys[] = {"text", "index", "logprobs", "finish_reason", NULL};
	CHECK(cJSON_GetArraySize(get(body, "choices")) == 1 && exact_keys(ch, ch_keys),
	      "choice keys");
	CHECK(str_is(get(ch, "text"), " Hello world\xef\xbf\xbd") && num_is(get(ch, "index"), 0) &&
		  str_is(get(ch, "finish_reason"), "length"),
	      "choice");
	const cJSON *lp = get(ch, "logprobs");
	static const char *const lp_keys[] = {"tokens", "token_logprobs", "top_logprobs",
					      "text_offset", NULL};
	CHECK(exact_keys(lp, lp_keys), "logprobs keys");
	const cJSON *toks = get(lp, "tokens");
	CHECK(cJSON_GetArraySize(toks) == 3 && str_is(cJSON_GetArrayItem(toks, 0), " Hello") &&
		  str_is(cJSON_GetArrayItem(toks, 1), " world") &&
		  str_is(cJSON_GetArrayItem(toks, 2), "\xef\xbf\xbd"),
	      "tokens");
	CHECK(float_is(cJSON_GetArrayItem(get(lp, "token_logprobs"), 0), -0.0318f), "token_lp");
	const cJSON *tl = get(lp, "top_logprobs");
	const cJSON *tl0 = cJSON_GetArrayItem(tl, 0), *tl1 = cJSON_GetArrayItem(tl, 1),
		    *tl2 = cJSON_GetArrayItem(tl, 2);
	/* position 0: chosen token is in the top 2 -> 2 keys; position 2: not -> 3 keys */
	CHECK(cJSON_GetArraySize(tl0) == 2 && float_is(get(tl0, " Hello"), -0.0318f) &&
		  float_is(get(tl0, " world"), -3.5f),
	      "top 0");
	CHECK(cJSON_GetArraySize(tl1) == 2 && float_is(get(tl1, "</s>"), -1.5f), "top 1");
	CHECK(cJSON_GetArraySize(tl2) == 3 && float_is(get(tl2, "\xef\xbf\xbd"), -2.5f) &&
		  float_is(get(tl2, " Hello"), -0.5f),
	      "top 2 includes the chosen token");
	const cJSON *off = get(lp, "text_offset");
	CHECK(cJSON_GetArraySize(off) == 3 && num_is(cJSON_GetArrayItem(off, 0), 0) &&
		  num_is(cJSON_GetArrayItem(off, 1), 6) && num_is(cJSON_GetArrayItem(off, 2), 12),
	      "text_offset");
	const cJSON *u = get(body, "usage");
	static const char *const u_keys[] = {"prompt_tokens", "completion_tokens", "total_tokens",
					     "prompt_tokens_details", NULL};
	CHECK(exact_keys(u, u_keys) && num_is(get(u, "prompt_tokens"), 4) &&
		  num_is(get(u, "completion_tokens"), 3) && num_is(get(u, "total_tokens"), 7) &&
		  num_is(get(get(u, "prompt_tokens_details"), "cached_tokens"), 2),
	      "usage");
	char *id = NULL;
	CHECK(jsonl_result_id(raw, strlen(raw), &id) == BG_OK && strcmp(id, "req-1") == 0,
	      "result id is the custom_id");
	free(id);
	cJSON_Delete(j);
	free(raw);

	/* EOS maps to "stop"; no logprobs -> null */
	r->finish = REQ_FINISH_EOS;
	r->logprobs = -1;
	j = write_and_parse(r, g_tok, &o, NULL);
	ch = cJSON_GetArrayItem(get(get(get(j, "response"), "body"), "choices"), 0);
	CHECK(str_is(get(ch, "finish_reason"), "stop") && cJSON_IsNull(get(ch, "logprobs")),
	      "eos -> stop, logprobs null");
	cJSON_Delete(j);
	req_free(r);

	/* chat completion with logprobs */
	p = parse(
	    "{\"custom_id\": \"chat-1\", \"url\": \"/v1/chat/completions\", \"body\": "
	    "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
	    "\"logprobs\": true, \"top_logprobs\": 2}}",
	    4, &d, NULL);
	CHECK(p->error.code[0] == 0, "chat valid: %s", p->error.message);
	r = made_result();
	r->line = 4;
	r->logprobs = p->logprobs;
	r->finish = REQ_FINISH_STOP;
	adopt_record(r, p);
	j = write_and_parse(r, g_tok, NULL, &raw);
	body = get(get(j, "response"), "body");
	CHECK(str_is(get(body, "object"), "chat.completion") &&
		  str_is(get(body, "id"), "chatcmpl-4"),
	      "chat header: %s", raw);
	ch = cJSON_GetArrayItem(get(body, "choices"), 0);
	static const char *const cch_keys[] = {"index", "message", "logprobs", "finish_reason",
					       NULL};
	CHECK(exact_keys(ch, cch_keys) && str_is(get(ch, "finish_reason"), "stop"), "chat choice");
	const cJSON *msg = get(ch, "message");
	static const char *const msg_keys[] = {"role", "content", NULL};
	CHECK(exact_keys(msg, msg_keys) && str_is(get(msg, "role"), "assistant") &&
		  str_is(get(msg, "content"), " Hello world\xef\xbf\xbd"),
	      "message");
	const cJSON *content = get(get(ch, "logprobs"), "content");
	CHECK(cJSON_GetArraySize(content) == 3, "one entry per token");
	const cJSON *c2 = cJSON_GetArrayItem(content, 2);
	static const char *const c_keys[] = {"token", "logprob", "bytes", "top_logprobs", NULL};
	CHECK(exact_keys(c2, c_keys), "content entry keys");
	CHECK(str_is(get(c2, "token"), "\xef\xbf\xbd") && float_is(get(c2, "logprob"), -2.5f),
	      "byte token: U+FFFD text");
	const cJSON *bytes = get(c2, "bytes");
	CHECK(cJSON_GetArraySize(bytes) == 1 && num_is(cJSON_GetArrayItem(bytes, 0), 0xE2),
	      "byte token: exact bytes");
	const cJSON *c0 = cJSON_GetArrayItem(content, 0);
	const cJSON *b0 = get(c0, "bytes");
	CHECK(cJSON_GetArraySize(b0) == 6 && num_is(cJSON_GetArrayItem(b0, 0), ' ') &&
		  num_is(cJSON_GetArrayItem(b0, 1), 'H'),
	      "bytes of \" Hello\"");
	const cJSON *ct = get(c0, "top_logprobs");
	static const char *const ct_keys[] = {"token", "logprob", "bytes", NULL};
	CHECK(cJSON_GetArraySize(ct) == 2 && exact_keys(cJSON_GetArrayItem(ct, 1), ct_keys) &&
		  str_is(get(cJSON_GetArrayItem(ct, 1), "token"), " world"),
	      "chat top_logprobs");
	cJSON_Delete(j);
	free(raw);

	/* cancelled: response null, error set */
	r->finish = REQ_FINISH_CANCELLED;
	j = write_and_parse(r, g_tok, NULL, NULL);
	CHECK(cJSON_IsNull(get(j, "response")) &&
		  str_is(get(get(j, "error"), "code"), "batch_cancelled"),
	      "cancelled");
	cJSON_Delete(j);
	req_free(r);
}

static void test_openai_error_writer(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	struct request *r = parse("{\"custom_id\": \"e1\", \"url\": \"/v1/completions\", \"body\": "
				  "{\"prompt\": \"a\", \"echo\": true}}",
				  11, &d, NULL);
	char *raw = NULL;
	cJSON *j = write_and_parse(r, NULL, NULL, &raw);
	if (j) {
		CHECK(str_is(get(j, "custom_id"), "e1") && cJSON_IsNull(get(j, "error")),
		      "error line: %s", raw);
		const cJSON *resp = get(j, "response");
		CHECK(num_is(get(resp, "status_code"), 400), "400");
		const cJSON *err = get(get(resp, "body"), "error");
		static const char *const keys[] = {"message", "type", "param",
						   "code",    "line", NULL};
		CHECK(exact_keys(err, keys) && str_is(get(err, "code"), "unsupported") &&
			  str_is(get(err, "type"), "invalid_request_error") &&
			  num_is(get(err, "line"), 11),
		      "OpenAI error object");
		cJSON_Delete(j);
	}
	free(raw);
	req_free(r);
	/* a broken line of an OpenAI file still gets an OpenAI-shaped result */
	r = parse("{\"custom_id\": \"e3\", \"url\": ", 13, &d, NULL);
	j = write_and_parse(r, NULL, NULL, NULL);
	/* its custom_id cannot be read: null, never an id another line may have (issue 13) */
	CHECK(j && cJSON_IsNull(get(j, "custom_id")) &&
		  num_is(get(get(j, "response"), "status_code"), 400) &&
		  str_is(get(get(get(get(j, "response"), "body"), "error"), "code"),
			 "invalid_json") &&
		  num_is(get(get(get(get(j, "response"), "body"), "error"), "line"), 13),
	      "invalid JSON in OpenAI form: custom_id null, the line in the error");
	cJSON_Delete(j);
	{
		/* --resume reads back the line's reserved key, which is the request's id */
		char *line = NULL, *id = NULL;
		size_t len = 0;
		CHECK(jsonl_write_result(r, NULL, NULL, &line, &len) == BG_OK &&
			  jsonl_result_id(line, len - 1, &id) == BG_OK && id &&
			  strcmp(id, r->id) == 0 && (unsigned char)id[0] == 0xFF &&
			  strcmp(id + 1, "13") == 0,
		      "result id of a line without custom_id is its reserved key");
		free(line);
		free(id);
	}
	req_free(r);
	/* an empty line: native unless the writer is told the file is OpenAI */
	r = parse("", 14, &d, NULL);
	j = write_and_parse(r, NULL, NULL, NULL);
	CHECK(j && str_is(get(j, "id"), "14") && !get(j, "custom_id"), "empty line, native");
	cJSON_Delete(j);
	struct jsonl_out_opts o;
	jsonl_out_opts_init(&o);
	o.default_form = JSONL_FORM_OPENAI_COMPLETION;
	j = write_and_parse(r, NULL, &o, NULL);
	CHECK(j && cJSON_IsNull(get(j, "custom_id")) &&
		  str_is(get(get(get(get(j, "response"), "body"), "error"), "code"), "empty_line"),
	      "empty line, OpenAI default form");
	cJSON_Delete(j);
	req_free(r);
	/* the parser told the file's form answers blank and non-object lines in it */
	d.file_form = JSONL_FORM_OPENAI_COMPLETION;
	static const char *const shapeless[] = {"", "  ", "[1, 2]", "42", "{oops", NULL};
	for (int k = 0; shapeless[k]; k++) {
		r = parse(shapeless[k], 20 + k, &d, NULL);
		j = write_and_parse(r, NULL, NULL, NULL);
		CHECK(j && cJSON_IsNull(get(j, "custom_id")) &&
			  num_is(get(get(j, "response"), "status_code"), 400) &&
			  num_is(get(get(get(get(j, "response"), "body"), "error"), "line"),
				 20 + k) &&
			  (unsigned char)r->id[0] == 0xFF,
		      "'%s' in an OpenAI file: OpenAI shape, custom_id null", shapeless[k]);
		cJSON_Delete(j);
		req_free(r);
	}
	d.file_form = JSONL_FORM_NATIVE;
	CHECK(jsonl_sniff_form("{\"custom_id\": \"a\"}", 17) == JSONL_FORM_OPENAI_COMPLETION &&
		  jsonl_sniff_form("{\"prompt\": \"a\"}", 15) == JSONL_FORM_NATIVE &&
		  jsonl_sniff_form("{\"body\": ", 9) == JSONL_FORM_OPENAI_COMPLETION &&
		  jsonl_sniff_form("[1]", 3) == JSONL_FORM_NATIVE,
	      "jsonl_sniff_form");
	/* a server-side failure is a 500 */
	r = parse("{\"custom_id\": \"e2\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "\"a\"}}",
		  12, &d, NULL);
	snprintf(r->error.code, sizeof r->error.code, "device_error");
	snprintf(r->error.message, sizeof r->error.message, "the GPU failed");
	j = write_and_parse(r, NULL, NULL, NULL);
	CHECK(
	    j && num_is(get(get(j, "response"), "status_code"), 500) &&
		str_is(get(get(get(get(j, "response"), "body"), "error"), "type"), "server_error"),
	    "500");
	cJSON_Delete(j);
	req_free(r);
}

/* ---- strings ---- */

static void test_quote(void)
{
	struct {
		const char *in;
		size_t n;
		const char *want;
		bool valid; /* strbuf_utf8_valid */
	} cases[] = {
	    {"a\"b\\c\n\t\x01", 8, "\"a\\\"b\\\\c\\n\\t\\u0001\"", true},
	    {"x\0y", 3, "\"x\\u0000y\"", true},
	    {"\xe2\x82\xac", 3, "\"\xe2\x82\xac\"", true},	   /* U+20AC kept */
	    {"\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"", true}, /* U+1F600 kept */
	    {"\xe2\x82", 2, "\"\xef\xbf\xbd\"", false},	   /* truncated: one U+FFFD */
	    {"\xff", 1, "\"\xef\xbf\xbd\"", false},		   /* never valid */
	    {"\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"", false}, /* overlong: two */
	    {"\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", false}, /* surrogate */
	    /* U+110000: F4 allows 80-8F after it, so F4 alone is the invalid subpart */
	    {"\xf4\x90\x80\x80", 4,
	     "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", false},
	    {"\xf4\x8f\xbf\xbf", 4, "\"\xf4\x8f\xbf\xbf\"", true}, /* U+10FFFF kept */
	    {"a\xe2z", 3, "\"a\xef\xbf\xbdz\"", false},
	    {"", 0, "\"\"", true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t len = 0;
		char *q = jsonl_quote(cases[i].in, cases[i].n, &len);
		CHECK(q && strcmp(q, cases[i].want) == 0 && len == strlen(q), "quote case %zu: %s",
		      i, q ? q : "(null)");
		/* and it is a JSON string cJSON reads back */
		cJSON *j = q ? cJSON_Parse(q) : NULL;
		CHECK(cJSON_IsString(j), "case %zu parses", i);
		cJSON_Delete(j);
		free(q);
		CHECK(strbuf_utf8_valid(cases[i].in, cases[i].n) == cases[i].valid,
		      "case %zu: valid UTF-8 is %d", i, cases[i].valid);
	}
}

static void test_result_id(void)
{
	char *id = (char *)1;
	const char *native = "{\"id\":\"q1\",\"text\":\"x\",\"error\":null}\n";
	CHECK(jsonl_result_id(native, strlen(native), &id) == BG_OK && strcmp(id, "q1") == 0,
	      "native");
	free(id);
	const char *oa = "{\"id\":\"batch_req_1\",\"custom_id\":\"c-9\",\"response\":null}";
	CHECK(jsonl_result_id(oa, strlen(oa), &id) == BG_OK && strcmp(id, "c-9") == 0, "openai");
	free(id);
	/* torn lines: every proper prefix of a line fails */
	int torn_ok = 0;
	for (size_t n = 0; n + 1 < strlen(native); n++) {
		if (jsonl_result_id(native, n, &id) == BG_ERR_FORMAT && id == NULL)
			torn_ok++;
		else
			free(id);
	}
	CHECK(torn_ok == (int)strlen(native) - 1, "every torn prefix refused (%d)", torn_ok);
	const char *bad[] = {"{}", "[\"id\"]", "{\"id\": 5}", "{\"id\":\"a\"} trailing", "null"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(jsonl_result_id(bad[i], strlen(bad[i]), &id) == BG_ERR_FORMAT && id == NULL,
		      "refused: %s", bad[i]);
	}
	CHECK(jsonl_result_id(NULL, 0, &id) == BG_ERR_FORMAT, "NULL");
}

/* Chat prompts tokenized by the parser: control tokens become their ids and BOS is
 * added once. Uses the Phi-3 vocabulary (its template is phi3; <|user|> is a control
 * token there). */
static void test_chat_tokenized(void)
{
	const char *path = check_shared("vocab/ggml-vocab-phi-3.gguf");
	if (!path)
		return;
	struct gguf_ctx *g = NULL;
	test_constraints();
	struct tok *t = NULL;
	struct bg_err err = {0};
	if (gguf_open(path, &g, &err) != BG_OK || tok_load(g, &t, &err) != BG_OK) {
		CHECK(0, "load %s: %s", path, err.msg);
		gguf_close(g);
		return;
	}
	int32_t user = find_id(t, "<|user|>"), end = find_id(t, "<|end|>"),
		ass = find_id(t, "<|assistant|>");
	CHECK(user > 0 && end > 0 && ass > 0, "phi-3 control tokens %d %d %d", user, end, ass);
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.chat = chat_template_by_name("phi3");
	d.tok = t;
	struct request *r =
	    parse("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", 1, &d, NULL);
	CHECK(r->error.code[0] == 0, "valid: %s", r->error.message);
	CHECK(r->prompt == NULL && r->n_input_ids >= 5, "tokenized (%d ids)", r->n_input_ids);
	if (r->n_input_ids >= 5) {
		/* BOS <|user|> \n ... Hi <|end|> \n <|assistant|> \n */
		CHECK(r->input_ids[0] == tok_bos(t), "BOS first");
		CHECK(r->input_ids[1] == user, "<|user|> is one control token");
		int n_bos = 0, has_end = 0, has_ass = 0;
		for (int32_t i = 0; i < r->n_input_ids; i++) {
			n_bos += r->input_ids[i] == tok_bos(t);
			has_end += r->input_ids[i] == end;
			has_ass += r->input_ids[i] == ass;
		}
		CHECK(n_bos == 1 && has_end == 1 && has_ass == 1, "BOS once, markers as ids");
		CHECK(r->add_bos == 0, "the engine must not add a second BOS");
	}
	req_free(r);
	tok_free(t);
	gguf_close(g);
}

/* ---- ids, NUL, and OpenAI batch semantics (issues 13 and 16) ---- */

static void test_ids_and_nul(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.chat = chat_template_by_name("chatml");
	d.model_name = "stories";
	/* an id that is not valid UTF-8: an error, and the line number as its id (native) or
	 * the reserved key (OpenAI), so the writer never changes an id --resume reads back */
	struct request *r = parse("{\"id\": \"x\xff\", \"prompt\": \"hi\"}", 1, &d, NULL);
	CHECK(strcmp(r->error.code, "invalid_request") == 0 && strstr(r->error.message, "UTF-8") &&
		  strcmp(r->id, "1") == 0,
	      "native id not UTF-8: %s, id %s", r->error.message, r->id);
	req_free(r);
	r = parse("{\"custom_id\": \"y\xfe\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "\"a\"}}",
		  2, &d, NULL);
	CHECK(strstr(r->error.message, "UTF-8") && (unsigned char)r->id[0] == 0xFF &&
		  jsonl_request_info(r) && !jsonl_request_info(r)->custom_id,
	      "custom_id not UTF-8: %s", r->error.message);
	req_free(r);
	/* no custom_id: an error, and the reserved key of its line, never "3" */
	r = parse("{\"url\": \"/v1/completions\", \"body\": {\"prompt\": \"a\"}}", 3, &d, NULL);
	CHECK(strstr(r->error.message, "custom_id") && (unsigned char)r->id[0] == 0xFF &&
		  strcmp(r->id + 1, "3") == 0,
	      "no custom_id: %s", r->error.message);
	req_free(r);

	/* NUL inside strings: refused, naming the field, never cut at it */
	static const struct {
		const char *line, *where;
	} nul[] = {
	    {"{\"id\": \"a\", \"prompt\": \"abc\\u0000def\"}", "prompt"},
	    {"{\"id\": \"a\", \"prompt\": \"\\u0000abc\"}", "prompt"},
	    {"{\"id\": \"a\", \"prompt\": \"x\", \"stop\": [\"ok\", \"s\\u0000t\"]}", "stop[1]"},
	    {"{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\\u0000\"}]}",
	     "messages[0].content"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": "
	     "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
	     "\"a\\u0000\"}]}]}}",
	     "body.messages[0].content[0].text"},
	    {"{\"custom_id\": \"c\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
	     "\"p\\u0000\", \"stop\": \"x\"}}",
	     "body.prompt"},
	};
	for (size_t i = 0; i < sizeof nul / sizeof nul[0]; i++) {
		r = parse(nul[i].line, 4, &d, NULL);
		CHECK(strcmp(r->error.code, "invalid_request") == 0 &&
			  strstr(r->error.message, "NUL") &&
			  strncmp(r->error.message, nul[i].where, strlen(nul[i].where)) == 0 &&
			  !r->prompt && !r->input_ids,
		      "%s: '%s'", nul[i].line, r->error.message);
		/* the id is still the line's own */
		CHECK(strcmp(r->id, nul[i].line[2] == 'i' ? "a" : "c") == 0, "id kept: %s", r->id);
		req_free(r);
	}
	/* a NUL in the id itself: the id cannot be trusted either */
	r = parse("{\"id\": \"a\\u0000b\", \"prompt\": \"x\"}", 5, &d, NULL);
	CHECK(strstr(r->error.message, "NUL") && strcmp(r->id, "5") == 0, "NUL in id: %s, id %s",
	      r->error.message, r->id);
	req_free(r);
	r = parse("{\"custom_id\": \"a\\u0000b\", \"url\": \"/v1/completions\", \"body\": "
		  "{\"prompt\": \"x\"}}",
		  6, &d, NULL);
	CHECK(strstr(r->error.message, "NUL") && (unsigned char)r->id[0] == 0xFF,
	      "NUL in custom_id: %s", r->error.message);
	req_free(r);
	/* an escaped backslash before u0000 is text, not a NUL */
	r = parse("{\"id\": \"a\", \"prompt\": \"C:\\\\u0000\"}", 7, &d, NULL);
	CHECK(r->error.code[0] == 0 && strcmp(r->prompt, "C:\\u0000") == 0 && r->prompt_len == 8,
	      "\\\\u0000 is text: %s", r->error.message);
	req_free(r);

	/* stream: true is refused, false is fine */
	r = parse("{\"custom_id\": \"s\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "\"a\", \"stream\": true}}",
		  8, &d, NULL);
	CHECK(strcmp(r->error.code, "unsupported") == 0 && strstr(r->error.message, "stream"),
	      "stream true: %s", r->error.message);
	req_free(r);
	r = parse("{\"custom_id\": \"s\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "\"a\", \"stream\": false}}",
		  8, &d, NULL);
	CHECK(r->error.code[0] == 0, "stream false: %s", r->error.message);
	req_free(r);

	/* a body.model other than the loaded model: one warning for the whole stream */
	struct warn_log log = {0};
	struct jsonl_warn w;
	jsonl_warn_init(&w, on_warn, &log);
	const char *same = "{\"custom_id\": \"m1\", \"url\": \"/v1/completions\", \"body\": "
			   "{\"model\": \"stories\", \"prompt\": \"a\"}}";
	const char *other = "{\"custom_id\": \"m2\", \"url\": \"/v1/completions\", \"body\": "
			    "{\"model\": \"gpt-4o\", \"prompt\": \"a\"}}";
	req_free(parse(same, 1, &d, &w));
	CHECK(log.n == 0, "the loaded model's name: no warning");
	req_free(parse(other, 2, &d, &w));
	req_free(parse(other, 3, &d, &w));
	req_free(parse(same, 4, &d, &w));
	CHECK(log.n == 1 && strstr(log.last, "gpt-4o") && strstr(log.last, "stories") &&
		  strstr(log.last, "line 2"),
	      "one warning: %d, %s", log.n, log.last);
}

/* n > 1: the native choices array (ERRATA) and OpenAI's choices[index]. */
static void fill_choices(struct request *r)
{
	r->n_choices = 2;
	r->choices = calloc(2, sizeof *r->choices);
	for (int i = 0; i < 2; i++) {
		struct req_choice *c = &r->choices[i];
		c->finish = i ? REQ_FINISH_STOP : REQ_FINISH_LENGTH;
		c->n_out = 1 + i;
		c->out_ids = malloc(2 * sizeof(int32_t));
		c->out_ids[0] = 7;
		c->out_ids[1] = 8;
		c->text = strdup(i ? "BB" : "A");
		c->text_len = strlen(c->text);
		c->cum_logprob = -1.5 * (i + 1);
	}
	r->n_prompt = 3;
	r->n_out = 3;
	r->finish = REQ_FINISH_LENGTH;
}

static void test_choices_writer(void)
{
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	struct request *r = parse("{\"id\": \"s\", \"prompt\": \"a\", \"n\": 2}", 1, &d, NULL);
	CHECK(r && r->n == 2, "native n parsed");
	fill_choices(r);
	char *raw = NULL;
	cJSON *j = write_and_parse(r, NULL, NULL, &raw);
	if (j) {
		static const char *const keys[] = {"id", "choices", "usage", "metrics", "error", NULL};
		static const char *const ck[] = {"index",	  "text",	 "token_ids",
						 "finish_reason", "cum_logprob", NULL};
		const cJSON *ch = get(j, "choices");
		const cJSON *c1 = cJSON_GetArrayItem(ch, 1);
		CHECK(exact_keys(j, keys) && cJSON_GetArraySize(ch) == 2 && exact_keys(c1, ck),
		      "native shape: %s", raw);
		CHECK(num_is(get(c1, "index"), 1) && str_is(get(c1, "text"), "BB") &&
			  cJSON_GetArraySize(get(c1, "token_ids")) == 2 &&
			  str_is(get(c1, "finish_reason"), "stop") &&
			  num_is(get(c1, "cum_logprob"), -3.0) &&
			  num_is(get(get(j, "usage"), "completion_tokens"), 3),
		      "native choice 1 and usage");
		cJSON_Delete(j);
	}
	free(raw);
	req_free(r);
	r = parse("{\"custom_id\": \"o\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": "
		  "\"a\", \"n\": 2, \"best_of\": 2}}",
		  2, &d, NULL);
	CHECK(r && r->n == 2 && !r->error.code[0], "openai n parsed");
	fill_choices(r);
	raw = NULL;
	j = write_and_parse(r, NULL, NULL, &raw);
	if (j) {
		const cJSON *ch = get(get(get(j, "response"), "body"), "choices");
		const cJSON *c1 = cJSON_GetArrayItem(ch, 1);
		CHECK(cJSON_GetArraySize(ch) == 2 && num_is(get(c1, "index"), 1) &&
			  str_is(get(c1, "text"), "BB") && str_is(get(c1, "finish_reason"), "stop") &&
			  num_is(get(cJSON_GetArrayItem(ch, 0), "index"), 0),
		      "openai choices[index]: %s", raw);
		cJSON_Delete(j);
	}
	free(raw);
	req_free(r);
}

int main(void)
{
	test_choices_writer();
	test_defaults();
	test_native_full();
	test_errors();
	test_unknown_fields();
	test_openai_parse();
	test_chat_parse();
	test_quote();
	test_result_id();
	test_native_error_writer();
	test_openai_error_writer();
	test_ids_and_nul();
	struct gguf_ctx *g = NULL;
	struct tok *t = NULL;
	load_vocab(&g, &t);
	test_native_writer();
	test_openai_writer();
	tok_free(t);
	gguf_close(g);
	test_chat_tokenized();
	return check_summary();
}
