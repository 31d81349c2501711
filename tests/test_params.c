/* test_params: the one table of request parameters (core/io/params) is consistent and
 * documented: every row is named in man/batchgen.1 (its native and its OpenAI field name),
 * every command-line flag of the table is in `batchgen run --help` and in the man page,
 * names are unique per form, each default parses and lies in its row's range (or is a
 * documented special value), and the CLI's defaults, the parser's and the table's agree.
 *
 * cli/ is not part of libbatchgen.a, so the option code is compiled into this program. */
#include "cli/model_spec.c"
#include "cli/options.c"
#include "cli/version.c"

#include <ctype.h>

#include "check.h"
#include "io/jsonl_read.h"
#include "io/params.h"

/* Whether the man page names field as a term: on a macro line (".B name", ".BR a ", " b",
 * ".TP" items) as a whole word. roff writes "-" as "\-". */
static bool man_names(const char *man, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = man; (p = strstr(p, name)); p += n) {
		const char *bol = p;
		while (bol > man && bol[-1] != '\n')
			bol--;
		bool word = (p == man || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
			    !(isalnum((unsigned char)p[n]) || p[n] == '_');
		if (word && bol[0] == '.' && bol[1] == 'B')
			return true;
	}
	return false;
}

/* Whether text has "--flag" as a whole option name. */
static bool has_flag(const char *text, const char *flag)
{
	size_t n = strlen(flag);
	for (const char *p = text; (p = strstr(p, "--")); p += 2)
		if (strncmp(p + 2, flag, n) == 0 &&
		    !(isalnum((unsigned char)p[2 + n]) || p[2 + n] == '-'))
			return true;
	return false;
}

static char *man_text(void)
{
	size_t len;
	char *raw = check_read_file("man/batchgen.1", &len);
	if (!raw)
		return NULL;
	/* "\-" -> "-" so that flags read as they are typed */
	char *w = raw;
	for (const char *r = raw; *r; r++) {
		if (r[0] == '\\' && r[1] == '-')
			continue;
		*w++ = *r;
	}
	*w = 0;
	return raw;
}

static char *help_text(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	opt_usage(f, OPT_CMD_RUN);
	fclose(f);
	return buf;
}

static void test_documented(void)
{
	char *man = man_text();
	char *help = help_text();
	CHECK(man != NULL, "man/batchgen.1 readable (run from the repository root)");
	CHECK(help != NULL, "--help text");
	if (!man || !help) {
		free(man);
		free(help);
		return;
	}
	for (size_t i = 0; i < params_count; i++) {
		const struct param_def *p = &params_table[i];
		if (p->name)
			CHECK(man_names(man, p->name), "the man page names the field %s", p->name);
		if (p->openai)
			CHECK(man_names(man, p->openai), "the man page names the OpenAI field %s",
			      p->openai);
		if (p->cli) {
			CHECK(has_flag(help, p->cli), "--help lists --%s", p->cli);
			CHECK(has_flag(man, p->cli), "the man page has --%s", p->cli);
		}
		CHECK(p->help && p->help[0], "row %zu has help", i);
	}
	free(man);
	free(help);
}

static void test_rows(void)
{
	CHECK(params_count <= PARAMS_MAX, "%zu rows fit PARAMS_MAX", params_count);
	for (size_t i = 0; i < params_count; i++) {
		const struct param_def *p = &params_table[i];
		CHECK(p->name || p->openai, "row %zu has a name", i);
		for (size_t j = 0; j < i; j++) {
			const struct param_def *q = &params_table[j];
			CHECK(!(p->name && q->name && strcmp(p->name, q->name) == 0),
			      "native name %s once", p->name);
			CHECK(!(p->cli && q->cli && strcmp(p->cli, q->cli) == 0), "flag %s once",
			      p->cli);
		}
		/* a flag's default is what --help shows and what the flag itself accepts */
		if (p->cli && p->def) {
			struct request r;
			memset(&r, 0, sizeof r);
			char msg[160];
			CHECK(params_set_text(&r, p, p->meta ? p->def : NULL, msg, sizeof msg),
			      "--%s default %s parses: %s", p->cli, p->def, msg);
		}
		CHECK((p->type == PARAM_STOP || p->type == PARAM_IDS) == (p->off_n != 0),
		      "row %zu: lists and only lists have a count", i);
	}
	/* a value out of range is refused, the field unchanged */
	const struct param_def *t = params_find("temperature", false);
	const struct param_def *mt = params_find("max_tokens", false);
	const struct param_def *tk = params_find("top_k", false);
	CHECK(t && mt && tk && params_find("max_completion_tokens", true) &&
		  !params_find("max_completion_tokens", false),
	      "params_find");
	if (t && mt && tk) {
		struct request r;
		memset(&r, 0, sizeof r);
		char msg[160];
		r.sampling.temperature = 0.5f;
		CHECK(!params_set_text(&r, t, "-1", msg, sizeof msg) &&
			  r.sampling.temperature == 0.5f && strstr(msg, "range"),
		      "temperature -1 refused: %s", msg);
		CHECK(!params_set_text(&r, mt, "0", msg, sizeof msg), "max_tokens 0 refused");
		CHECK(params_set_text(&r, tk, "-1", msg, sizeof msg) && r.sampling.top_k == 0,
		      "top_k -1 = disabled, stored as 0");
	}
}

/* The command line, the parser and the table agree on every default. */
static void test_defaults_agree(void)
{
	struct opt_config c;
	opt_defaults(&c);
	struct jsonl_defaults d;
	opt_jsonl_defaults(&c, &d);
	struct request native, openai;
	memset(&native, 0, sizeof native);
	memset(&openai, 0, sizeof openai);
	params_defaults(&native, false);
	params_defaults(&openai, true);
	CHECK(memcmp(&c.req.sampling, &native.sampling, sizeof native.sampling) == 0 &&
		  c.req.max_tokens == native.max_tokens && c.req.logprobs == native.logprobs &&
		  c.req.ignore_eos == native.ignore_eos,
	      "the CLI's defaults are the table's");
	CHECK(d.native.max_tokens == 16 && d.native.sampling.temperature == 0.0f &&
		  d.native.sampling.top_p == 1.0f && d.native.logprobs == -1 &&
		  d.native.prompt_logprobs == -1 && d.native.add_bos == -1 &&
		  !d.native.ignore_eos && d.native.sampling.repetition_penalty == 1.0f,
	      "native defaults as documented");
	CHECK(d.openai.max_tokens == PARAMS_TO_END && d.openai.sampling.temperature == 1.0f &&
		  d.openai.sampling.top_p == 1.0f && d.openai.logprobs == -1,
	      "OpenAI defaults: to the end, temperature 1");
	/* a request parsed without any field has the table's values */
	struct request *r = NULL;
	const char *line = "{\"prompt\": \"x\"}";
	jsonl_parse_request(line, strlen(line), 1, &d, NULL, &r);
	CHECK(r && r->max_tokens == 16 && r->sampling.temperature == 0.0f, "parsed native");
	req_free(r);
	line =
	    "{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"x\"}}";
	jsonl_parse_request(line, strlen(line), 1, &d, NULL, &r);
	CHECK(r && r->max_tokens == PARAMS_TO_END && r->sampling.temperature == 1.0f,
	      "parsed OpenAI");
	req_free(r);
}

int main(void)
{
	test_rows();
	test_defaults_agree();
	test_documented();
	return check_summary();
}
