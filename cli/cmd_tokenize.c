/* cmd_tokenize: `batchgen tokenize` prints the token ids of a text as a JSON array;
 * `batchgen detokenize` (or `tokenize --detokenize`) prints the text of a JSON array of
 * ids. Both read only the tokenizer (gguf_open + tok_load), so vocab-only GGUF files work. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/chat_select.h"
#include "cli/commands.h"
#include "cli/model_spec.h"
#include "io/jsonl_read.h"
#include "model/builtin.h"
#include "model/gguf.h"
#include "text/tokenizer.h"

static void tokenize_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: batchgen tokenize [-m MODEL] [--bos|--no-bos] [--parse-special] [TEXT | -f "
	    "FILE]\n"
	    "       batchgen tokenize --detokenize [-m MODEL] [JSON-ARRAY | -f FILE]\n"
	    "\n"
	    "Prints the token ids of TEXT (or of the bytes of FILE, '-' for stdin) as a JSON\n"
	    "array, the way llama.cpp's llama_tokenize does. MODEL is any GGUF file with a\n"
	    "tokenizer (a vocab-only file is enough) or an hf: name, as for `batchgen run`;\n"
	    "without -m, the built-in model.\n"
	    "\n"
	    "  -m, --model MODEL     GGUF file or hf:OWNER/REPO[:TAG|/FILE.gguf] (default: the\n"
	    "                        built-in model)\n"
	    "  -f, --file FILE       read the text from FILE ('-' = stdin) instead of TEXT\n"
	    "      --bos             prepend BOS\n"
	    "      --no-bos          do not prepend BOS (default: what llama.cpp does for this\n"
	    "                        vocabulary)\n"
	    "      --parse-special   turn the text of special tokens (<|eot_id|>, <s>, ...) into\n"
	    "                        their ids; without it they are plain text\n"
	    "      --detokenize      the reverse: see `batchgen detokenize --help`\n"
	    "      --chat            TEXT is a request line ({\"messages\": [...], \"tools\": "
	    "[...]});\n"
	    "                        print the prompt ids `run` gives it (the chat template\n"
	    "                        rendered and tokenized), or its error\n"
	    "      --print-prompt    with --chat: print the rendered prompt text instead\n"
	    "      --chat-template NAME, --chat-template-file FILE, --chat-date YYYY-MM-DD\n"
	    "                        with --chat: as for `batchgen run`\n"
	    "  -h, --help            this help\n");
}

static void detokenize_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: batchgen detokenize [-m MODEL] [--render-special] [--keep-leading-space]\n"
	    "                           [JSON-ARRAY | -f FILE]\n"
	    "\n"
	    "Prints the text of a JSON array of token ids (from the argument, or FILE, '-' for\n"
	    "stdin), byte for byte, with no newline added.\n"
	    "\n"
	    "  -m, --model MODEL       GGUF file or hf: name, as for tokenize (default: the\n"
	    "                          built-in model)\n"
	    "  -f, --file FILE         read the JSON array from FILE ('-' = stdin)\n"
	    "      --render-special    print control tokens (<s>, <|eot_id|>, ...) as their text\n"
	    "      --keep-leading-space  keep the space a SentencePiece encoder put in front of\n"
	    "                        the text (removed by default, as llama.cpp does)\n"
	    "  -h, --help              this help\n");
}

/* Reads a whole file ('-' = stdin) into a malloc'd buffer. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *s = malloc(cap + 1);
	while (s) {
		size_t k = fread(s + n, 1, cap - n, f);
		n += k;
		if (n < cap) {
			if (ferror(f)) {
				free(s);
				s = NULL;
			}
			break;
		}
		cap *= 2;
		char *q = realloc(s, cap + 1);
		if (!q) {
			free(s);
			s = NULL;
		}
		s = q;
	}
	if (f != stdin)
		fclose(f);
	if (s) {
		s[n] = 0;
		*len = n;
	}
	return s;
}

/* The GGUF file -m names, as `run` reads -m: none = the built-in model's embedded bytes,
 * hf:OWNER/REPO... resolved through the hub cache (downloading when needed), else a path.
 * A synthetic:NAME model has no file (its vocabulary is made with its weights): refused.
 * Prints the one-line error and returns NULL on failure. */
static struct gguf_ctx *open_model_gguf(const char *model)
{
	struct bg_err err = {0};
	struct gguf_ctx *g = NULL;
	if (!model) {
		if (gguf_parse(builtin_gguf_data(), builtin_gguf_size(), false, &g, &err) != BG_OK)
			fprintf(stderr, "batchgen: built-in model: %s\n", err.msg);
		return g;
	}
	if (strncmp(model, "synthetic:", strlen("synthetic:")) == 0) {
		fprintf(stderr,
			"batchgen: -m %s: a synthetic model has no tokenizer file; give a GGUF "
			"file, an hf: name, or no -m (the built-in model)\n",
			model);
		return NULL;
	}
	char *path = NULL;
	if (model_spec_resolve(model, false, false, &path, &err) != BG_OK) {
		fprintf(stderr, "batchgen: %s\n", err.msg);
		return NULL;
	}
	if (gguf_open(path, &g, &err) != BG_OK)
		fprintf(stderr, "batchgen: %s\n", err.msg); /* gguf's message names the file */
	free(path);
	return g;
}

/* Opens MODEL's tokenizer; prints the one-line error and returns NULL on failure. */
static struct tok *open_tok(const char *model)
{
	struct bg_err err = {0};
	struct gguf_ctx *g = open_model_gguf(model);
	if (!g)
		return NULL;
	struct tok *t = NULL;
	if (tok_load(g, &t, &err) != BG_OK)
		fprintf(stderr, "batchgen: %s: %s\n", model ? model : "built-in model", err.msg);
	gguf_close(g);
	return t;
}

/* Parses a JSON array of integers. Returns false with a message on stderr. */
static bool parse_ids(const char *s, size_t len, int32_t n_vocab, int32_t **ids, size_t *n)
{
	cJSON *j = cJSON_ParseWithLength(s, len);
	if (!j || !cJSON_IsArray(j)) {
		fprintf(stderr, "batchgen: detokenize: expected a JSON array of token ids\n");
		cJSON_Delete(j);
		return false;
	}
	size_t m = (size_t)cJSON_GetArraySize(j), i = 0;
	*ids = malloc((m ? m : 1) * sizeof **ids);
	if (!*ids) {
		cJSON_Delete(j);
		fprintf(stderr, "batchgen: out of memory\n");
		return false;
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, j)
	{
		double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
		if (!cJSON_IsNumber(e) || v != (double)(int64_t)v || v < 0 || v >= n_vocab) {
			fprintf(stderr,
				"batchgen: detokenize: element %zu is not a token id in [0, %d)\n",
				i, n_vocab);
			free(*ids);
			*ids = NULL;
			cJSON_Delete(j);
			return false;
		}
		(*ids)[i++] = (int32_t)v;
	}
	*n = i;
	cJSON_Delete(j);
	return true;
}

int cmd_detokenize(int argc, char **argv)
{
	enum { O_RENDER = 1000, O_KEEP };
	static const struct option longopts[] = {
	    {"model", required_argument, NULL, 'm'},
	    {"file", required_argument, NULL, 'f'},
	    {"render-special", no_argument, NULL, O_RENDER},
	    {"keep-leading-space", no_argument, NULL, O_KEEP},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *model = NULL, *file = NULL;
	bool render = false, keep = false;
	optind = 0; /* argv[0] is the subcommand; restart getopt for this argv */
	int c;
	while ((c = getopt_long(argc, argv, "m:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 'f': file = optarg; break;
		case O_RENDER: render = true; break;
		case O_KEEP: keep = true; break;
		case 'h': detokenize_usage(stdout); return CLI_EXIT_OK;
		default: detokenize_usage(stderr); return CLI_EXIT_USAGE;
		}
	}
	int n_args = argc - optind;
	if ((file && n_args > 0) || (!file && n_args != 1) || n_args > 1) {
		fprintf(stderr, "batchgen: detokenize needs one JSON array or -f FILE\n");
		detokenize_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	size_t len = 0;
	char *input = file ? slurp(file, &len) : strdup(argv[optind]);
	if (!input) {
		fprintf(stderr, "batchgen: %s: cannot read\n", file ? file : "argument");
		return CLI_EXIT_USAGE;
	}
	if (!file)
		len = strlen(input);
	struct tok *t = open_tok(model);
	if (!t) {
		free(input);
		return CLI_EXIT_MODEL;
	}
	int32_t *ids = NULL;
	size_t n = 0;
	int rc = CLI_EXIT_OK;
	if (!parse_ids(input, len, tok_n_vocab(t), &ids, &n)) {
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	char *text = NULL;
	size_t tl = 0;
	struct bg_err err = {0};
	if (render) { /* tok_decode hides control tokens: concatenate pieces ourselves */
		size_t cap = 0;
		for (size_t i = 0; i < n; i++)
			cap += tok_piece(t, ids[i], true, NULL, 0);
		text = malloc(cap + 1);
		if (text) {
			for (size_t i = 0; i < n; i++)
				tl += tok_piece(t, ids[i], true, text + tl, cap - tl);
			if (!keep && tl && text[0] == ' ' &&
			    strcmp(tok_model_name(t), "llama") == 0) {
				memmove(text, text + 1, tl - 1);
				tl--;
			}
		}
	} else if (tok_decode(t, ids, n, !keep, &text, &tl, &err) != BG_OK) {
		fprintf(stderr, "batchgen: detokenize: %s\n", err.msg);
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	if (!text) {
		fprintf(stderr, "batchgen: out of memory\n");
		rc = CLI_EXIT_SOME_FAILED;
		goto out;
	}
	fwrite(text, 1, tl, stdout);
	free(text);
out:
	free(ids);
	free(input);
	tok_free(t);
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK)
		rc = CLI_EXIT_SOME_FAILED;
	return rc;
}

/* tokenize --chat: the request line text is parsed as `run` parses it, its messages
 * rendered with the chat template run would pick, and the prompt ids (or, with
 * print_prompt, the rendered text) printed. */
static int tokenize_chat(const char *model, const char *text, size_t len, const char *tfile,
			 const char *tname, const char *date, bool print_prompt)
{
	struct bg_err err = {0};
	struct gguf_ctx *g = open_model_gguf(model);
	if (!g)
		return CLI_EXIT_MODEL;
	struct tok *t = NULL;
	if (tok_load(g, &t, &err) != BG_OK) {
		fprintf(stderr, "batchgen: %s: %s\n", model ? model : "built-in model", err.msg);
		gguf_close(g);
		return CLI_EXIT_MODEL;
	}
	const struct chat_template *ct = NULL;
	struct chat_jinja *cj = NULL;
	int rc = CLI_EXIT_OK;
	if (!chat_select(tfile, tname, date, g, t, &ct, &cj)) {
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	struct jsonl_defaults d;
	jsonl_defaults_init(&d);
	d.chat = ct;
	d.jinja = cj;
	d.tok = print_prompt ? NULL : t;
	struct request *r = NULL;
	if (jsonl_parse_request(text, len, 1, &d, NULL, &r) != BG_OK) {
		fprintf(stderr, "batchgen: out of memory\n");
		rc = CLI_EXIT_SOME_FAILED;
		goto out;
	}
	if (r->error.code[0]) {
		fprintf(stderr, "batchgen: tokenize --chat: %s: %s\n", r->error.code,
			r->error.message);
		rc = CLI_EXIT_SOME_FAILED;
	} else if (print_prompt) {
		if (r->prompt)
			fwrite(r->prompt, 1, r->prompt_len, stdout);
	} else {
		printf("[");
		for (int32_t i = 0; i < r->n_input_ids; i++)
			printf(i ? ", %d" : "%d", r->input_ids[i]);
		printf("]\n");
	}
	req_free(r);
out:
	chat_jinja_destroy(cj);
	tok_free(t);
	gguf_close(g);
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK)
		rc = CLI_EXIT_SOME_FAILED;
	return rc;
}

int cmd_tokenize(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) { /* --detokenize: the same command line, reversed */
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--detokenize") == 0) {
			char **av = malloc((size_t)argc * sizeof *av);
			if (!av)
				return CLI_EXIT_SOME_FAILED;
			int k = 0;
			for (int j = 0; j < argc; j++)
				if (j != i)
					av[k++] = argv[j];
			int rc = cmd_detokenize(k, av);
			free(av);
			return rc;
		}
	}
	enum { O_BOS = 1000, O_NO_BOS, O_SPECIAL, O_CHAT, O_PRINT, O_CT, O_CTF, O_DATE };
	static const struct option longopts[] = {
	    {"model", required_argument, NULL, 'm'},
	    {"file", required_argument, NULL, 'f'},
	    {"chat", no_argument, NULL, O_CHAT},
	    {"print-prompt", no_argument, NULL, O_PRINT},
	    {"chat-template", required_argument, NULL, O_CT},
	    {"chat-template-file", required_argument, NULL, O_CTF},
	    {"chat-date", required_argument, NULL, O_DATE},
	    {"bos", no_argument, NULL, O_BOS},
	    {"no-bos", no_argument, NULL, O_NO_BOS},
	    {"parse-special", no_argument, NULL, O_SPECIAL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *model = NULL, *file = NULL;
	int bos = -1; /* -1 = the vocabulary's default */
	bool special = false, chat = false, print_prompt = false;
	const char *tname = NULL, *tfile = NULL, *date = NULL;
	optind = 0;
	int c;
	while ((c = getopt_long(argc, argv, "m:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 'f': file = optarg; break;
		case O_BOS: bos = 1; break;
		case O_NO_BOS: bos = 0; break;
		case O_SPECIAL: special = true; break;
		case O_CHAT: chat = true; break;
		case O_PRINT: print_prompt = true; break;
		case O_CT: tname = optarg; break;
		case O_CTF: tfile = optarg; break;
		case O_DATE: date = optarg; break;
		case 'h': tokenize_usage(stdout); return CLI_EXIT_OK;
		default: tokenize_usage(stderr); return CLI_EXIT_USAGE;
		}
	}
	int n_args = argc - optind;
	if ((file && n_args > 0) || (!file && n_args != 1)) {
		fprintf(stderr, "batchgen: tokenize needs one TEXT or -f FILE\n");
		tokenize_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	size_t len = 0;
	char *text = file ? slurp(file, &len) : strdup(argv[optind]);
	if (!text) {
		fprintf(stderr, "batchgen: %s: cannot read\n", file ? file : "argument");
		return CLI_EXIT_USAGE;
	}
	if (!file)
		len = strlen(text);
	if (chat) {
		int rc = tokenize_chat(model, text, len, tfile, tname, date, print_prompt);
		free(text);
		return rc;
	}
	struct tok *t = open_tok(model);
	if (!t) {
		free(text);
		return CLI_EXIT_MODEL;
	}
	int32_t *ids = NULL;
	size_t n = 0;
	struct bg_err err = {0};
	int rc = CLI_EXIT_OK;
	bool add_bos = bos < 0 ? tok_add_bos(t) : bos == 1;
	if (tok_encode(t, text, len, add_bos, special, &ids, &n, &err) != BG_OK) {
		fprintf(stderr, "batchgen: tokenize: %s\n", err.msg);
		rc = CLI_EXIT_SOME_FAILED;
	} else {
		/* one buffered write: outputs can be millions of ids */
		char *out = malloc(n * 12 + 4);
		if (!out) {
			fprintf(stderr, "batchgen: out of memory\n");
			rc = CLI_EXIT_SOME_FAILED;
		} else {
			size_t o = 0;
			out[o++] = '[';
			for (size_t i = 0; i < n; i++)
				o += (size_t)sprintf(out + o, i ? ", %d" : "%d", ids[i]);
			out[o++] = ']';
			out[o++] = '\n';
			fwrite(out, 1, o, stdout);
			free(out);
		}
	}
	free(ids);
	free(text);
	tok_free(t);
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK)
		rc = CLI_EXIT_SOME_FAILED;
	return rc;
}
