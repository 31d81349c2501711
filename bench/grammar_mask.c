/* grammar_mask: the cost of one grammar mask step (core/sample/grammar.h) on a real
 * vocabulary.
 *
 *   build/bench/grammar_mask VOCAB.gguf [STEPS]
 *
 * For a JSON schema (an object with a string, an integer, an enum and an array of
 * strings), a regex and a GBNF grammar, walks STEPS tokens (default 64) along a seeded
 * pseudo-random allowed path and times grammar_state_mask at every step (one row, one
 * thread; a batch of B rows costs B of these, spread over the CPU threads). Prints one
 * JSON line per grammar: vocabulary size, steps, mean / p50 / p90 / max microseconds per
 * mask, and the mean number of allowed tokens. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gguf.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "sample/regex.h"
#include "text/tokenizer.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: grammar_mask VOCAB.gguf [STEPS]\n");
		return 2;
	}
	int steps = argc > 2 ? atoi(argv[2]) : 64;
	if (steps < 1 || steps > 100000)
		steps = 64;
	struct gguf_ctx *g = NULL;
	struct tok *t = NULL;
	struct bg_err err = {0};
	if (gguf_open(argv[1], &g, &err) != BG_OK || tok_load(g, &t, &err) != BG_OK) {
		fprintf(stderr, "grammar_mask: %s\n", err.msg);
		return 1;
	}
	int32_t n = tok_n_vocab(t);
	char **pieces = calloc((size_t)n, sizeof *pieces);
	uint32_t *lens = calloc((size_t)n, sizeof *lens);
	bool *eog = calloc((size_t)n, sizeof *eog);
	for (int32_t i = 0; i < n; i++) {
		size_t l = tok_piece(t, i, true, NULL, 0);
		pieces[i] = malloc(l + 1);
		tok_piece(t, i, true, pieces[i], l);
		lens[i] = (uint32_t)l;
		eog[i] = tok_is_eog(t, i);
	}
	struct grammar_vocab *v = NULL;
	double t0 = now_us();
	if (grammar_vocab_create(n, (const char *const *)pieces, lens, eog, &v, &err) != BG_OK) {
		fprintf(stderr, "grammar_mask: %s\n", err.msg);
		return 1;
	}
	double t_vocab = now_us() - t0;
	const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", "
			     "\"maxLength\": 40}, \"age\": {\"type\": \"integer\", \"minimum\": 0, "
			     "\"maximum\": 150}, \"color\": {\"enum\": [\"red\", \"green\", \"blue\"]}, "
			     "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}, "
			     "\"required\": [\"name\", \"age\", \"color\", \"tags\"]}";
	char *texts[3] = {0};
	const char *names[3] = {"json_schema", "regex", "gbnf"};
	cJSON *sj = cJSON_Parse(schema);
	json_schema_to_gbnf(sj, &texts[0], &err);
	cJSON_Delete(sj);
	regex_to_gbnf("([A-Z][a-z]+ ){2,6}[0-9]{3}-[0-9]{4}\\.", &texts[1], &err);
	texts[2] = strdup("root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | \"(\" expr \")\"");
	struct grammar_scratch *s = grammar_scratch_create();
	uint32_t *mask = malloc((size_t)(n + 31) / 32 * 4);
	double *us = malloc((size_t)steps * sizeof *us);
	for (int k = 0; k < 3; k++) {
		struct grammar *gr = NULL;
		struct grammar_state *st = NULL;
		if (!texts[k] || grammar_parse(texts[k], strlen(texts[k]), NULL, &gr, &err) != BG_OK ||
		    grammar_state_create(gr, s, &st, &err) != BG_OK) {
			fprintf(stderr, "grammar_mask: %s: %s\n", names[k], err.msg);
			return 1;
		}
		uint32_t seed = 1;
		int done = 0;
		double allowed = 0;
		for (; done < steps; done++) {
			double a = now_us();
			if (grammar_state_mask(st, v, s, mask, &err) != BG_OK) {
				fprintf(stderr, "grammar_mask: %s\n", err.msg);
				return 1;
			}
			us[done] = now_us() - a;
			int32_t cnt = 0;
			for (int32_t i = 0; i < n; i++)
				cnt += !eog[i] && ((mask[i >> 5] >> (i & 31)) & 1);
			allowed += cnt;
			if (cnt == 0) {
				done++;
				break;
			}
			seed = seed * 1664525u + 1013904223u;
			int32_t want = (int32_t)((seed >> 8) % (uint32_t)cnt), pick = -1;
			for (int32_t i = 0; i < n && pick < 0; i++)
				if (!eog[i] && ((mask[i >> 5] >> (i & 31)) & 1) && want-- == 0)
					pick = i;
			if (grammar_state_accept_token(st, v, pick, s, &err) != BG_OK) {
				fprintf(stderr, "grammar_mask: %s\n", err.msg);
				return 1;
			}
		}
		double sum = 0;
		for (int i = 0; i < done; i++)
			sum += us[i];
		qsort(us, (size_t)done, sizeof *us, cmp_d);
		printf("{\"vocab\": \"%s\", \"n_vocab\": %d, \"trie_build_ms\": %.1f, \"grammar\": \"%s\", "
		       "\"steps\": %d, \"mask_us_mean\": %.1f, \"mask_us_p50\": %.1f, \"mask_us_p90\": "
		       "%.1f, \"mask_us_max\": %.1f, \"allowed_mean\": %.0f}\n",
		       argv[1], (int)n, t_vocab / 1e3, names[k], done, sum / done, us[done / 2],
		       us[done * 9 / 10], us[done - 1], allowed / done);
		grammar_state_free(st);
		grammar_free(gr);
		free(texts[k]);
	}
	free(us);
	free(mask);
	grammar_scratch_free(s);
	grammar_vocab_free(v);
	for (int32_t i = 0; i < n; i++)
		free(pieces[i]);
	free(pieces);
	free(lens);
	free(eog);
	tok_free(t);
	gguf_close(g);
	return 0;
}
