/* tokenize_bench VOCAB.gguf CORPUS RUNS [special]: batchgen's side of
 * bench/tokenize_bench.sh (with "special": parse_special, for cross-checks).
 * Splits CORPUS into chunks at the byte 0x1E and tokenizes every chunk with tok_encode
 * (no BOS, special tokens as plain text) RUNS times. Prints one JSON line per run: bytes,
 * chunks, tokens, an FNV-1a hash of the id sequence (the same as llamacpp_tokenize.mjs
 * computes) and the seconds spent in tok_encode only. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gguf.h"
#include "text/tokenizer.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	bool special = argc == 5 && strcmp(argv[4], "special") == 0;
	if (argc != 4 && !special) {
		fprintf(stderr, "usage: tokenize_bench VOCAB.gguf CORPUS RUNS [special]\n");
		return 2;
	}
	int runs = atoi(argv[3]);
	FILE *f = fopen(argv[2], "rb");
	if (!f || runs < 1) {
		fprintf(stderr, "tokenize_bench: cannot read %s\n", argv[2]);
		return 2;
	}
	fseek(f, 0, SEEK_END);
	size_t len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *text = malloc(len + 1);
	if (!text || fread(text, 1, len, f) != len) {
		fprintf(stderr, "tokenize_bench: cannot read %s\n", argv[2]);
		return 2;
	}
	fclose(f);
	size_t n_chunks = 1;
	for (size_t i = 0; i < len; i++)
		n_chunks += text[i] == 0x1e;
	size_t *start = malloc((n_chunks + 1) * sizeof *start);
	size_t k = 0;
	start[k++] = 0;
	for (size_t i = 0; i < len; i++)
		if (text[i] == 0x1e)
			start[k++] = i + 1;
	start[k] = len + 1; /* chunk c is [start[c], start[c + 1] - 1) */

	struct bg_err err = {0};
	struct gguf_ctx *g;
	struct tok *t;
	if (gguf_open(argv[1], &g, &err) != BG_OK || tok_load(g, &t, &err) != BG_OK) {
		fprintf(stderr, "tokenize_bench: %s\n", err.msg);
		return 3;
	}
	gguf_close(g);
	int32_t **ids = calloc(n_chunks, sizeof *ids);
	size_t *n_ids = calloc(n_chunks, sizeof *n_ids);
	for (int r = 0; r < runs; r++) {
		double t0 = now();
		for (size_t c = 0; c < n_chunks; c++) {
			if (tok_encode(t, text + start[c], start[c + 1] - 1 - start[c], false,
				       special, &ids[c], &n_ids[c], &err) != BG_OK) {
				fprintf(stderr, "tokenize_bench: %s\n", err.msg);
				return 1;
			}
		}
		double sec = now() - t0;
		size_t tokens = 0;
		uint32_t h = 2166136261u;
		for (size_t c = 0; c < n_chunks; c++) {
			tokens += n_ids[c];
			for (size_t i = 0; i < n_ids[c]; i++)
				h = (h ^ (uint32_t)ids[c][i]) * 16777619u;
			free(ids[c]);
		}
		printf("{\"impl\": \"batchgen\", \"run\": %d, \"bytes\": %zu, \"chunks\": %zu, "
		       "\"tokens\": %zu, \"hash\": %u, \"seconds\": %.6f}\n",
		       r, len, n_chunks, tokens, h, sec);
		fflush(stdout);
	}
	free(ids);
	free(n_ids);
	free(start);
	free(text);
	tok_free(t);
	return 0;
}
