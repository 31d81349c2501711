/* fuzz_chat: chat templates as core/text/chat.c has them (family detection from a Jinja
 * text, and hand-written renderers; no Jinja interpreter yet, see fuzz/README.md for the
 * harness it will need). The first bytes pick the template (any of chat_template_names, or the detected
 * family) and the generation prompt; then pieces separated by 0xff: a template text for detection, then (role, content)
 * pairs, the role byte picking system/user/assistant/an unknown role.
 * Oracles:
 *  - detection never crashes, and a detected family has a name that finds it again;
 *  - rendering succeeds for known roles (an unknown role is an error with a message and
 *    nothing allocated);
 *  - the output is NUL-terminated at out_len, the same on a second call, and valid UTF-8
 *    when every content is.
 */
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "text/chat.h"

static const struct chat_template *all[128];
static size_t n_all;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char *names = strdup(chat_template_names()), *save = NULL;
	for (char *q = strtok_r(names, ", ", &save); q && n_all < 128; q = strtok_r(NULL, ", ", &save)) {
		all[n_all] = chat_template_by_name(q);
		FUZZ_CHECK(all[n_all], "listed template %s not found by name", q);
		n_all++;
	}
	free(names);
	FUZZ_CHECK(n_all > 0, "no templates");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	uint8_t sel = fuzz_byte(&in);
	const char *p;
	size_t l = fuzz_piece(&in, &p, 4096);
	char *text = strndup(p, l);
	if (!text)
		return 0;
	const struct chat_template *det = chat_template_detect(text);
	free(text);
	if (det)
		FUZZ_CHECK(chat_template_by_name(chat_template_name(det)) == det,
			   "detected %s, which its name does not find", chat_template_name(det));
	uint8_t which = fuzz_byte(&in);
	const struct chat_template *t = det && (sel & 0x80) ? det : all[which % n_all];
	struct chat_message msgs[16];
	char *owned[16];
	size_t n = 0;
	bool known = true, valid = true;
	while (in.n && n < 16) {
		static const char *const roles[] = {"system", "user", "assistant", "tool"};
		uint8_t r = fuzz_byte(&in);
		l = fuzz_piece(&in, &p, 1024);
		owned[n] = strndup(p, l);
		if (!owned[n])
			break;
		valid &= fuzz_utf8_valid(owned[n], strlen(owned[n]));
		msgs[n].role = roles[r & 3];
		known &= (r & 3) != 3;
		msgs[n].content = owned[n];
		n++;
	}
	char *out = NULL, *out2 = NULL;
	size_t ol = 0, ol2 = 0;
	struct bg_err err = {0};
	bool gen = sel & 0x40;
	enum bg_status st = chat_render(t, msgs, n, gen, &out, &ol, &err);
	if (st == BG_OK) {
		FUZZ_CHECK(out && strlen(out) == ol, "%s: output length %zu, strlen %zu",
			   chat_template_name(t), ol, out ? strlen(out) : 0);
		FUZZ_CHECK(!valid || fuzz_utf8_valid(out, ol), "%s: invalid UTF-8 from valid contents",
			   chat_template_name(t));
		FUZZ_CHECK(chat_render(t, msgs, n, gen, &out2, &ol2, &err) == BG_OK && ol2 == ol &&
			       memcmp(out, out2, ol) == 0,
			   "%s: a second rendering differs", chat_template_name(t));
	} else {
		FUZZ_CHECK(!out && err.msg[0], "%s: an error with output or without a message",
			   chat_template_name(t));
		FUZZ_CHECK(st == BG_ERR_NOMEM || !known || n == 0,
			   "%s: known roles refused: %s", chat_template_name(t), err.msg);
	}
	free(out);
	free(out2);
	for (size_t i = 0; i < n; i++)
		free(owned[i]);
	return 0;
}
