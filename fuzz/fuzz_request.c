/* fuzz_request: request lines, native and OpenAI batch form (completions and chat), as
 * `batchgen run` parses them, with real tokenizers (the built-in model's, and llama-bpe's
 * from ../shared/vocab when present) and the chatml template, then the result line the
 * writer makes for each. The first byte picks the set-up and the mode:
 *  - raw: the rest is the line;
 *  - built: the rest is split into pieces (id, prompt, stop string) that are quoted with
 *    jsonl_quote into a native, OpenAI completion or OpenAI chat line.
 * Oracles:
 *  - every line gives a request; an error has a code and a message; the request has an id;
 *  - the result line is one line of valid JSON, valid UTF-8, ending in "\n";
 *  - --resume reads back the id that was written (jsonl_result_id == the request's id;
 *    FUZZ_EXACT_IDS: for every id, else for valid UTF-8 ids);
 *  - built lines: a request without error has exactly the prompt and stop string that
 *    were quoted (valid UTF-8; with NUL only under FUZZ_NUL_TEXT).
 */
#include <cjson/cJSON.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "io/jsonl_read.h"
#include "io/jsonl_write.h"
#include "model/gguf.h"
#include "model/model.h"
#include "text/chat.h"
#include "text/tokenizer.h"

static struct tok *toks[2];
static int n_toks;

static struct tok *load_tok_file(const char *rel)
{
	char buf[4096];
	const char *p = fuzz_shared(rel, buf, sizeof buf);
	if (!p) {
		fprintf(stderr, "fuzz_request: %s not found (set BG_SHARED); skipped\n", rel);
		return NULL;
	}
	struct gguf_ctx *g = NULL;
	struct tok *t = NULL;
	struct bg_err err = {0};
	if (gguf_open(p, &g, &err) == BG_OK && tok_load(g, &t, &err) == BG_OK) {
		gguf_close(g);
		return t;
	}
	gguf_close(g);
	fprintf(stderr, "fuzz_request: %s: %s\n", p, err.msg);
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	struct model *m = NULL;
	struct bg_err err = {0};
	if (model_open(NULL, false, &m, &err) != BG_OK || tok_load(m->gguf, &toks[0], &err) != BG_OK) {
		fprintf(stderr, "fuzz_request: built-in model: %s\n", err.msg);
		abort();
	}
	model_free(m);
	n_toks = 1;
	if ((toks[1] = load_tok_file("vocab/ggml-vocab-llama-bpe.gguf")))
		n_toks = 2;
	return 0;
}

static bool ids_readable(const char *id)
{
	return FUZZ_EXACT_IDS || fuzz_utf8_valid(id, strlen(id));
}

static bool text_comparable(const char *s, size_t n)
{
	return fuzz_utf8_valid(s, n) && (FUZZ_NUL_TEXT || !memchr(s, 0, n));
}

static void check_result(const struct request *r, const struct tok *t)
{
	FUZZ_CHECK(r->id != NULL, "a request without id");
	if (r->error.code[0])
		FUZZ_CHECK(r->error.message[0], "error %s without a message", r->error.code);
	char *line = NULL;
	size_t len = 0;
	if (jsonl_write_result(r, t, NULL, &line, &len) != BG_OK)
		return; /* out of memory */
	FUZZ_CHECK(len > 0 && line[len - 1] == '\n' && !memchr(line, '\n', len - 1),
		   "the result is not one line");
	FUZZ_CHECK(fuzz_utf8_valid(line, len), "the result is not valid UTF-8");
	cJSON *j = cJSON_ParseWithLength(line, len);
	FUZZ_CHECK(j && cJSON_IsObject(j), "the result is not a JSON object: %.200s", line);
	cJSON_Delete(j);
	char *id = NULL;
	FUZZ_CHECK(jsonl_result_id(line, len, &id) == BG_OK, "no id in the result: %.200s", line);
	if (ids_readable(r->id))
		FUZZ_CHECK(strcmp(id, r->id) == 0, "--resume would read id '%s' for '%s'", id,
			   r->id);
	free(id);
	free(line);
}

static void put_quoted(char *dst, size_t *o, const char *s, size_t n)
{
	size_t ql = 0;
	char *q = jsonl_quote(s, n, &ql);
	if (!q)
		abort();
	memcpy(dst + *o, q, ql);
	*o += ql;
	free(q);
}

static void put(char *dst, size_t *o, const char *s)
{
	memcpy(dst + *o, s, strlen(s));
	*o += strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	uint8_t mode = fuzz_byte(&in);
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	const struct tok *t = toks[(mode & 1) % n_toks];
	if (mode & 2)
		d.chat = chat_template_by_name((mode & 4) ? "llama3" : "chatml");
	if (mode & 8)
		d.tok = t;
	if (!(mode & 0x30)) { /* raw line */
		struct request *r = NULL;
		if (jsonl_parse_request((const char *)in.p, in.n, 7, &d, NULL, &r) != BG_OK)
			return 0;
		FUZZ_CHECK(r != NULL, "BG_OK without a request");
		check_result(r, t);
		req_free(r);
		return 0;
	}
	const char *id, *prompt, *stop;
	size_t lid = fuzz_piece(&in, &id, 256), lp = fuzz_piece(&in, &prompt, 4096),
	       ls = fuzz_piece(&in, &stop, 256);
	char *line = malloc(6 * (lid + lp + ls) + 512);
	if (!line)
		return 0;
	size_t o = 0;
	int form = (mode >> 4) & 3; /* 1 native, 2 completion, 3 chat */
	if (form == 1) {
		put(line, &o, "{\"id\":");
		put_quoted(line, &o, id, lid);
		put(line, &o, ",\"prompt\":");
	} else {
		put(line, &o, "{\"custom_id\":");
		put_quoted(line, &o, id, lid);
		put(line, &o, form == 2 ? ",\"method\":\"POST\",\"url\":\"/v1/completions\","
					  "\"body\":{\"model\":\"m\",\"prompt\":"
					: ",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
					  "\"body\":{\"model\":\"m\",\"messages\":[{\"role\":"
					  "\"user\",\"content\":");
	}
	put_quoted(line, &o, prompt, lp);
	put(line, &o, form == 3 ? "}],\"stop\":[" : ",\"stop\":[");
	put_quoted(line, &o, stop, ls);
	put(line, &o, form == 1 ? "],\"max_tokens\":3}" : "],\"max_tokens\":3}}");
	struct request *r = NULL;
	if (jsonl_parse_request(line, o, 1, &d, NULL, &r) != BG_OK) {
		free(line);
		return 0;
	}
	check_result(r, t);
	if (!r->error.code[0]) {
		if (form != 3 && text_comparable(prompt, lp))
			FUZZ_CHECK(r->prompt && r->prompt_len == lp && memcmp(r->prompt, prompt, lp) == 0,
				   "the prompt (%zu bytes) became %zu bytes", lp,
				   r->prompt ? r->prompt_len : 0);
		if (ls && text_comparable(stop, ls))
			FUZZ_CHECK(r->n_stop == 1 && strlen(r->stop[0]) == ls &&
				       memcmp(r->stop[0], stop, ls) == 0,
				   "the stop string (%zu bytes) changed", ls);
		if (form == 3 && d.tok)
			FUZZ_CHECK(r->input_ids && r->n_input_ids > 0, "a chat request without ids");
	}
	req_free(r);
	free(line);
	return 0;
}
