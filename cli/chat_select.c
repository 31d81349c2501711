/* chat_select: see chat_select.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/chat_select.h"

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			char *nb = cap <= (64u << 20) ? realloc(buf, cap + 1) : NULL;
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		n += k;
		if (k == 0)
			break;
	}
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

static const char *token_text(const struct tok *tok, int32_t id)
{
	const char *s = tok && id >= 0 ? tok_text(tok, id) : NULL;
	return s ? s : "";
}

bool chat_select(const char *template_file, const char *template_name, const char *date,
		 const struct gguf_ctx *g, const struct tok *tok,
		 const struct chat_template **builtin, struct chat_jinja **jinja)
{
	*builtin = NULL;
	*jinja = NULL;
	int y, m, d;
	if (date) {
		if (!chat_jinja_parse_date(date, &y, &m, &d)) {
			fprintf(stderr, "batchgen: --chat-date: '%s' is not a date YYYY-MM-DD\n", date);
			return false;
		}
	} else {
		time_t now = time(NULL);
		struct tm tm;
		localtime_r(&now, &tm);
		y = tm.tm_year + 1900;
		m = tm.tm_mon + 1;
		d = tm.tm_mday;
	}
	const char *bos = token_text(tok, tok ? tok_bos(tok) : -1);
	const char *eos = token_text(tok, tok ? tok_eos(tok) : -1);
	struct bg_err err = {0};
	if (template_file) {
		size_t len = 0;
		char *src = read_all(template_file, &len);
		if (!src) {
			fprintf(stderr, "batchgen: --chat-template-file: cannot read %s\n", template_file);
			return false;
		}
		enum bg_status st = chat_jinja_create(src, len, bos, eos, y, m, d, jinja, &err);
		free(src);
		if (st != BG_OK) {
			fprintf(stderr, "batchgen: --chat-template-file %s: %s\n", template_file, err.msg);
			return false;
		}
		return true;
	}
	if (template_name) {
		*builtin = chat_template_by_name(template_name);
		if (!*builtin)
			*builtin = chat_template_detect(template_name);
		if (!*builtin) {
			fprintf(stderr, "batchgen: --chat-template: unknown template '%s' (known: %s)\n",
				template_name, chat_template_names());
			return false;
		}
		return true;
	}
	struct gguf_str s;
	if (!g || !gguf_get_str(g, "tokenizer.chat_template", &s))
		return true;
	if (chat_jinja_create(s.ptr, (size_t)s.len, bos, eos, y, m, d, jinja, &err) == BG_OK)
		return true;
	char *text = strndup(s.ptr, (size_t)s.len);
	*builtin = text ? chat_template_detect(text) : NULL;
	free(text);
	fprintf(stderr, "batchgen: warning: the model's chat template does not run (%s); %s%s\n",
			err.msg, *builtin ? "using the built-in family " : "chat requests need --chat-template NAME",
			*builtin ? chat_template_name(*builtin) : "");
	return true;
}
