#include "io/jsonl.h"
#include "strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== UTF-8 and JSON strings ==== */

void jsonl_sb_quote(struct strbuf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	strbuf_put(b, "\"", 1);
	size_t i = 0;
	while (i < n) {
		unsigned char c = u[i];
		if (c < 0x80) {
			strbuf_json_ascii(b, c);
			i++;
			continue;
		}
		size_t prefix;
		size_t k = strbuf_utf8_seq(u + i, n - i, &prefix);
		if (k) {
			strbuf_put(b, u + i, k);
			i += k;
		} else {
			strbuf_puts(b, "\xEF\xBF\xBD");
			i += prefix;
		}
	}
	strbuf_put(b, "\"", 1);
}

char *jsonl_quote(const char *s, size_t n, size_t *out_len)
{
	struct strbuf b = {0};
	jsonl_sb_quote(&b, s ? s : "", s ? n : 0);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	if (out_len)
		*out_len = b.len;
	return b.p;
}

void jsonl_line_key(int64_t line, char *buf, size_t cap)
{
	snprintf(buf, cap, "%c%" PRId64, JSONL_KEY_BYTE, line);
}

bool jsonl_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
			return false;
	return true;
}

/* ==== the request record (request.user) ==== */

static void info_free(void *p)
{
	struct jsonl_info *i = p;
	if (!i)
		return;
	free(i->custom_id);
	free(i->url);
	free(i->model);
	free(i);
}

const struct jsonl_info *jsonl_request_info(const struct request *r)
{
	/* user belongs to whoever made the request: it is ours only with our destructor */
	if (!r || !r->user || r->user_free != info_free)
		return NULL;
	return r->user;
}

enum jsonl_form jsonl_request_form(const struct request *r)
{
	const struct jsonl_info *i = jsonl_request_info(r);
	return i ? i->form : JSONL_FORM_NATIVE;
}

struct jsonl_info *jsonl_info_attach(struct request *r, enum jsonl_form form)
{
	struct jsonl_info *info = calloc(1, sizeof *info);
	if (!info)
		return NULL;
	if (r->user && r->user_free)
		r->user_free(r->user);
	r->user = info;
	r->user_free = info_free;
	info->form = form;
	return info;
}
