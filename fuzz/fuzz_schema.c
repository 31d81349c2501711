/* fuzz_schema: the JSON schema -> GBNF converter (core/sample/json_schema.c).
 * Input: a JSON schema text (at most 4096 bytes, up to a 0xff byte), then the bytes that
 * steer the string walks (fuzz_draw.h). Texts that are not JSON end the input (cJSON's
 * parser is not what is fuzzed here; fuzz/schema.dict holds the keywords).
 * Oracles:
 *  - the converter gives a grammar or an error with a message; a converted schema's
 *    grammar parses (a capacity error is the only other way out), and so does
 *    json_schema_object_gbnf's;
 *  - every string drawn from the grammar (up to 3 walks of <= 64 characters) is matched
 *    whole and is one JSON text (cJSON parses all of it);
 *  - with FUZZ_SCHEMA_LOG=FILE set, each (schema, drawn instance) pair is appended to FILE
 *    as a JSON line; fuzz/replay_schema.sh replays a corpus this way and validates the
 *    instances with python3-jsonschema (the converter's language must be a subset of the
 *    schema's valid instances).
 */
#include <cjson/cJSON.h>

#include "fuzz/fuzz_draw.h"
#include "sample/json_schema.h"

static struct grammar_vocab *voc;
static struct grammar_scratch *scr;
static FILE *log_file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	voc = fuzz_draw_vocab();
	scr = grammar_scratch_create();
	FUZZ_CHECK(scr, "scratch");
	const char *lf = getenv("FUZZ_SCHEMA_LOG");
	if (lf && *lf) {
		log_file = fopen(lf, "a");
		FUZZ_CHECK(log_file, "cannot open %s", lf);
	}
	char *gbnf = NULL;
	struct grammar *g = NULL;
	struct bg_err err = {0};
	FUZZ_CHECK(json_schema_object_gbnf(&gbnf, &err) == BG_OK &&
			   grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err) == BG_OK,
		   "json_object grammar: %s", err.msg);
	grammar_free(g);
	free(gbnf);
	return 0;
}

/* A copy of the JSON text s[n] in which every \u escape of a UTF-16 surrogate (D800-DFFF)
 * reads \u0020. JSON's grammar allows a lone surrogate escape (RFC 8259, 8.2), and so do
 * llama.cpp's schema grammar (its char rule takes any \u and four hex digits) and Python's
 * json; cJSON refuses one. The copy keeps the text's structure for the check that it is
 * one JSON text. */
static char *json_for_cjson(const char *s, size_t n)
{
	char *c = malloc(n + 1);
	if (!c)
		return NULL;
	memcpy(c, s, n);
	c[n] = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (c[i] != '\\')
			continue;
		if (c[i + 1] == 'u' && i + 6 <= n && (c[i + 2] == 'd' || c[i + 2] == 'D') &&
		    strchr("89abcdefABCDEF", c[i + 3]) && c[i + 3])
			memcpy(c + i + 2, "0020", 4);
		i++; /* the escaped character */
	}
	return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	const char *text;
	size_t tl = fuzz_piece(&in, &text, 4096);
	cJSON *schema = cJSON_ParseWithLength(text, tl);
	if (!schema)
		return 0;
	char *gbnf = NULL;
	struct bg_err err = {0};
	if (json_schema_to_gbnf(schema, &gbnf, &err) != BG_OK) {
		FUZZ_CHECK(!gbnf && err.msg[0], "a refused schema without a message");
		cJSON_Delete(schema);
		return 0;
	}
	struct grammar *g = NULL;
	enum bg_status gs = grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err);
	FUZZ_CHECK(gs == BG_OK || gs == BG_ERR_CAPACITY,
		   "schema %.*s converted, its grammar refused: %s\n%s", (int)tl, text, err.msg,
		   gbnf);
	for (int w = 0; g && w < 3 && in.n; w++) {
		char *s;
		size_t n;
		if (!fuzz_draw(g, voc, scr, &in, 64, &s, &n))
			continue;
		FUZZ_CHECK(grammar_matches(g, s, n), "a drawn string is not matched whole: '%s'",
			   s);
		const char *end = NULL;
		char *js = json_for_cjson(s, n);
		FUZZ_CHECK(js, "out of memory");
		cJSON *inst = cJSON_ParseWithLengthOpts(js, n, &end, false);
		while (inst && end < js + n && strchr(" \t\n\r", *end) && *end)
			end++; /* JSON whitespace after the value */
		FUZZ_CHECK(inst && end == js + n, "schema %.*s: drawn '%s' is not one JSON text",
			   (int)tl, text, s);
		free(js);
		if (log_file) {
			cJSON *line = cJSON_CreateObject();
			cJSON_AddItemToObject(line, "schema", cJSON_Duplicate(schema, true));
			cJSON_AddItemToObject(line, "instance", cJSON_CreateString(s));
			char *p = cJSON_PrintUnformatted(line);
			fprintf(log_file, "%s\n", p);
			fflush(log_file);
			free(p);
			cJSON_Delete(line);
		}
		cJSON_Delete(inst);
		free(s);
	}
	grammar_free(g);
	free(gbnf);
	cJSON_Delete(schema);
	return 0;
}
