#include "text/chat.h"
#include "strbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- families ---- */

enum chat_family {
	CHAT_CHATML,
	CHAT_LLAMA2,
	CHAT_LLAMA2_SYS,
	CHAT_LLAMA2_SYS_BOS,
	CHAT_LLAMA2_SYS_STRIP,
	CHAT_MISTRAL_V1,
	CHAT_MISTRAL_V3,
	CHAT_MISTRAL_V3_TEKKEN,
	CHAT_MISTRAL_V7,
	CHAT_MISTRAL_V7_TEKKEN,
	CHAT_PHI3,
	CHAT_PHI4,
	CHAT_FALCON3,
	CHAT_ZEPHYR,
	CHAT_MONARCH,
	CHAT_GEMMA,
	CHAT_ORION,
	CHAT_OPENCHAT,
	CHAT_VICUNA,
	CHAT_VICUNA_ORCA,
	CHAT_DEEPSEEK,
	CHAT_DEEPSEEK2,
	CHAT_DEEPSEEK3,
	CHAT_COMMAND_R,
	CHAT_LLAMA3,
	CHAT_CHATGLM3,
	CHAT_CHATGLM4,
	CHAT_GLMEDGE,
	CHAT_MINICPM,
	CHAT_EXAONE3,
	CHAT_GRANITE,
	CHAT_MEGREZ,
	CHAT_BAILING,
	CHAT_LLAMA4,
	CHAT_SMOLVLM,
	CHAT_N_FAMILIES
};

struct chat_template {
	const char *name;
	enum chat_family family;
};

/* Indexed by family. */
static const struct chat_template chat_table[CHAT_N_FAMILIES] = {
    {"chatml", CHAT_CHATML},
    {"llama2", CHAT_LLAMA2},
    {"llama2-sys", CHAT_LLAMA2_SYS},
    {"llama2-sys-bos", CHAT_LLAMA2_SYS_BOS},
    {"llama2-sys-strip", CHAT_LLAMA2_SYS_STRIP},
    {"mistral-v1", CHAT_MISTRAL_V1},
    {"mistral-v3", CHAT_MISTRAL_V3},
    {"mistral-v3-tekken", CHAT_MISTRAL_V3_TEKKEN},
    {"mistral-v7", CHAT_MISTRAL_V7},
    {"mistral-v7-tekken", CHAT_MISTRAL_V7_TEKKEN},
    {"phi3", CHAT_PHI3},
    {"phi4", CHAT_PHI4},
    {"falcon3", CHAT_FALCON3},
    {"zephyr", CHAT_ZEPHYR},
    {"monarch", CHAT_MONARCH},
    {"gemma", CHAT_GEMMA},
    {"orion", CHAT_ORION},
    {"openchat", CHAT_OPENCHAT},
    {"vicuna", CHAT_VICUNA},
    {"vicuna-orca", CHAT_VICUNA_ORCA},
    {"deepseek", CHAT_DEEPSEEK},
    {"deepseek2", CHAT_DEEPSEEK2},
    {"deepseek3", CHAT_DEEPSEEK3},
    {"command-r", CHAT_COMMAND_R},
    {"llama3", CHAT_LLAMA3},
    {"chatglm3", CHAT_CHATGLM3},
    {"chatglm4", CHAT_CHATGLM4},
    {"glmedge", CHAT_GLMEDGE},
    {"minicpm", CHAT_MINICPM},
    {"exaone3", CHAT_EXAONE3},
    {"granite", CHAT_GRANITE},
    {"megrez", CHAT_MEGREZ},
    {"bailing", CHAT_BAILING},
    {"llama4", CHAT_LLAMA4},
    {"smolvlm", CHAT_SMOLVLM},
};

const struct chat_template *chat_template_by_name(const char *name)
{
	if (!name)
		return NULL;
	for (int i = 0; i < CHAT_N_FAMILIES; i++)
		if (strcmp(chat_table[i].name, name) == 0)
			return &chat_table[i];
	return NULL;
}

const char *chat_template_name(const struct chat_template *t)
{
	return t ? t->name : "(none)";
}

const char *chat_template_names(void)
{
	return "chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1, "
	       "mistral-v3, mistral-v3-tekken, mistral-v7, mistral-v7-tekken, phi3, phi4, "
	       "falcon3, zephyr, monarch, gemma, orion, openchat, vicuna, vicuna-orca, "
	       "deepseek, deepseek2, deepseek3, command-r, llama3, chatglm3, chatglm4, "
	       "glmedge, minicpm, exaone3, granite, megrez, bailing, llama4, smolvlm";
}

/* ---- detection ----
 * The order of the tests is llama.cpp's: some markers appear in several families (e.g.
 * `<|assistant|>`), so the first match wins. Families llama.cpp knows but this module
 * does not render (gigachat, yandex, hunyuan, kimi-k2, dots1, rwkv-world, exaone4) are
 * tested at their place in the chain and give NULL, so that they are never mistaken for
 * a later family. */

static bool has(const char *s, const char *needle)
{
	return strstr(s, needle) != NULL;
}

static const struct chat_template *fam(enum chat_family f)
{
	return &chat_table[f];
}

const struct chat_template *chat_template_detect(const char *t)
{
	if (!t)
		return NULL;
	const struct chat_template *by_name = chat_template_by_name(t);
	if (by_name)
		return by_name;

	if (has(t, "<|im_start|>")) {
		if (has(t, "<|im_sep|>"))
			return fam(CHAT_PHI4);
		if (has(t, "<end_of_utterance>"))
			return fam(CHAT_SMOLVLM);
		return fam(CHAT_CHATML);
	}
	if (strncmp(t, "mistral", 7) == 0 || has(t, "[INST]")) {
		if (has(t, "[SYSTEM_PROMPT]"))
			return fam(CHAT_MISTRAL_V7);
		if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
			if (has(t, " [INST]"))
				return fam(CHAT_MISTRAL_V1);
			if (has(t, "\"[INST]\""))
				return fam(CHAT_MISTRAL_V3_TEKKEN);
			return fam(CHAT_MISTRAL_V3);
		}
		if (has(t, "content.strip()"))
			return fam(CHAT_LLAMA2_SYS_STRIP);
		if (has(t, "bos_token + '[INST]"))
			return fam(CHAT_LLAMA2_SYS_BOS);
		if (has(t, "<<SYS>>"))
			return fam(CHAT_LLAMA2_SYS);
		return fam(CHAT_LLAMA2);
	}
	if (has(t, "<|assistant|>") && has(t, "<|end|>"))
		return fam(CHAT_PHI3);
	if (has(t, "[gMASK]<sop>"))
		return fam(CHAT_CHATGLM4);
	if (has(t, "<|assistant|>") && has(t, "<|user|>"))
		return has(t, "</s>") ? fam(CHAT_FALCON3) : fam(CHAT_GLMEDGE);
	if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>"))
		return fam(CHAT_GLMEDGE);
	if (has(t, "<|user|>") && has(t, "<|endoftext|>"))
		return fam(CHAT_ZEPHYR);
	if (has(t, "bos_token + message['role']"))
		return fam(CHAT_MONARCH);
	if (has(t, "<start_of_turn>"))
		return fam(CHAT_GEMMA);
	if (has(t, "'\\n\\nAssistant: ' + eos_token"))
		return fam(CHAT_ORION);
	if (has(t, "GPT4 Correct "))
		return fam(CHAT_OPENCHAT);
	if (has(t, "USER: ") && has(t, "ASSISTANT: "))
		return has(t, "SYSTEM: ") ? fam(CHAT_VICUNA_ORCA) : fam(CHAT_VICUNA);
	if (has(t, "### Instruction:") && has(t, "<|EOT|>"))
		return fam(CHAT_DEEPSEEK);
	if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>"))
		return fam(CHAT_COMMAND_R);
	if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>"))
		return fam(CHAT_LLAMA3);
	if (has(t, "[gMASK]sop"))
		return fam(CHAT_CHATGLM3);
	if (has(t, "<\xe7\x94\xa8\xe6\x88\xb7>")) /* "<用户>" */
		return fam(CHAT_MINICPM);
	if (has(t, "'Assistant: ' + message['content'] + eos_token"))
		return fam(CHAT_DEEPSEEK2);
	/* "<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>" (fullwidth bars) */
	if (has(t, "<\xef\xbd\x9c"
		   "Assistant\xef\xbd\x9c>") &&
	    has(t, "<\xef\xbd\x9c"
		   "User\xef\xbd\x9c>") &&
	    has(t, "<\xef\xbd\x9c"
		   "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"))
		return fam(CHAT_DEEPSEEK3);
	if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
		return has(t, "[|tool|]") ? NULL /* exaone4 */ : fam(CHAT_EXAONE3);
	if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
		return NULL; /* rwkv-world */
	if (has(t, "<|start_of_role|>"))
		return fam(CHAT_GRANITE);
	if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + "
		   "additional_special_tokens[1]"))
		return NULL; /* gigachat */
	if (has(t, "<|role_start|>"))
		return fam(CHAT_MEGREZ);
	if (has(t, " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:"))
		return NULL; /* yandex (" Ассистент:") */
	if (has(t, "<role>ASSISTANT</role>") && has(t, "'HUMAN'"))
		return fam(CHAT_BAILING);
	if (has(t, "<|header_start|>") && has(t, "<|header_end|>"))
		return fam(CHAT_LLAMA4);
	return NULL;
}

/* ---- rendering ---- */

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Appends s with ASCII whitespace removed at both ends (Python's str.strip / Jinja trim
 * as llama.cpp implements it). */
static void sb_trimmed(struct strbuf *b, const char *s)
{
	size_t a = 0, e = strlen(s);
	while (a < e && is_ws(s[a]))
		a++;
	while (e > a && is_ws(s[e - 1]))
		e--;
	strbuf_put(b, s + a, e - a);
}

enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

#define FULLBAR	  "\xef\xbd\x9c" /* U+FF5C FULLWIDTH VERTICAL LINE, DeepSeek's markers */
#define SPM_SPACE "\xe2\x96\x81" /* U+2581 */

static void render(enum chat_family f, const struct chat_message *m, const enum role *roles,
		   size_t n, bool add_ass, struct strbuf *b)
{
	switch (f) {
	case CHAT_CHATML:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|im_start|>");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "\n");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "<|im_end|>\n");
		}
		if (add_ass)
			strbuf_puts(b, "<|im_start|>assistant\n");
		break;
	case CHAT_MISTRAL_V7:
	case CHAT_MISTRAL_V7_TEKKEN: {
		const char *sp = f == CHAT_MISTRAL_V7 ? " " : "";
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, "[SYSTEM_PROMPT]");
				strbuf_puts(b, sp);
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "[/SYSTEM_PROMPT]");
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "[INST]");
				strbuf_puts(b, sp);
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "[/INST]");
			} else {
				strbuf_puts(b, sp);
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "</s>");
			}
		}
		break;
	}
	case CHAT_MISTRAL_V1:
	case CHAT_MISTRAL_V3:
	case CHAT_MISTRAL_V3_TEKKEN: {
		const char *lead = f == CHAT_MISTRAL_V1 ? " " : "";
		const char *trail = f == CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
		bool trim_ass = f == CHAT_MISTRAL_V3;
		bool inside = false;
		for (size_t i = 0; i < n; i++) {
			if (!inside) {
				strbuf_puts(b, lead);
				strbuf_puts(b, "[INST]");
				strbuf_puts(b, trail);
				inside = true;
			}
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n\n");
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, lead);
				strbuf_puts(b, "[/INST]");
			} else {
				strbuf_puts(b, trail);
				if (trim_ass)
					sb_trimmed(b, m[i].content);
				else
					strbuf_puts(b, m[i].content);
				strbuf_puts(b, "</s>");
				inside = false;
			}
		}
		break;
	}
	case CHAT_LLAMA2:
	case CHAT_LLAMA2_SYS:
	case CHAT_LLAMA2_SYS_BOS:
	case CHAT_LLAMA2_SYS_STRIP: {
		bool sys = f != CHAT_LLAMA2;
		bool bos_inside = f == CHAT_LLAMA2_SYS_BOS;
		bool strip = f == CHAT_LLAMA2_SYS_STRIP;
		bool inside = true; /* the first BOS is the tokenizer's */
		strbuf_puts(b, "[INST] ");
		for (size_t i = 0; i < n; i++) {
			if (!inside) {
				inside = true;
				strbuf_puts(b, bos_inside ? "<s>[INST] " : "[INST] ");
			}
			if (roles[i] == ROLE_SYSTEM)
				strbuf_puts(b, sys ? "<<SYS>>\n" : "");
			if (strip)
				sb_trimmed(b, m[i].content);
			else
				strbuf_puts(b, m[i].content);
			if (roles[i] == ROLE_SYSTEM) {
				/* without <<SYS>> support the system text leads the first turn */
				strbuf_puts(b, sys ? "\n<</SYS>>\n\n" : "\n");
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, " [/INST]");
			} else {
				strbuf_puts(b, "</s>");
				inside = false;
			}
		}
		break;
	}
	case CHAT_PHI3:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "|>\n");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "<|end|>\n");
		}
		if (add_ass)
			strbuf_puts(b, "<|assistant|>\n");
		break;
	case CHAT_PHI4:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|im_start|>");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "<|im_sep|>");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "<|im_end|>");
		}
		if (add_ass)
			strbuf_puts(b, "<|im_start|>assistant<|im_sep|>");
		break;
	case CHAT_FALCON3:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "|>\n");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "\n");
		}
		if (add_ass)
			strbuf_puts(b, "<|assistant|>\n");
		break;
	case CHAT_ZEPHYR:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "|>\n");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "<|endoftext|>\n");
		}
		if (add_ass)
			strbuf_puts(b, "<|assistant|>\n");
		break;
	case CHAT_MONARCH:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, i == 0 ? "" : "<s>");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "\n");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "</s>\n");
		}
		if (add_ass)
			strbuf_puts(b, "<s>assistant\n");
		break;
	case CHAT_GEMMA: {
		/* Gemma has no system turn: the (trimmed) system text is put in front of the
		 * next user turn. */
		struct strbuf sys = {0};
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				sb_trimmed(&sys, m[i].content);
				continue;
			}
			bool model = roles[i] == ROLE_ASSISTANT;
			strbuf_puts(b, "<start_of_turn>");
			strbuf_puts(b, model ? "model" : m[i].role);
			strbuf_puts(b, "\n");
			if (sys.len && !model) {
				strbuf_put(b, sys.p, sys.len);
				strbuf_puts(b, "\n\n");
				sys.len = 0;
			}
			sb_trimmed(b, m[i].content);
			strbuf_puts(b, "<end_of_turn>\n");
		}
		if (sys.oom)
			b->oom = true;
		free(sys.p);
		if (add_ass)
			strbuf_puts(b, "<start_of_turn>model\n");
		break;
	}
	case CHAT_ORION: {
		struct strbuf sys = {0};
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(&sys, m[i].content);
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "Human: ");
				if (sys.len) {
					strbuf_put(b, sys.p, sys.len);
					strbuf_puts(b, "\n\n");
					sys.len = 0;
				}
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n\nAssistant: </s>");
			} else {
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "</s>");
			}
		}
		if (sys.oom)
			b->oom = true;
		free(sys.p);
		break;
	}
	case CHAT_OPENCHAT:
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, m[i].content);
			} else {
				strbuf_puts(b, roles[i] == ROLE_USER ? "GPT4 Correct User: "
								     : "GPT4 Correct Assistant: ");
				strbuf_puts(b, m[i].content);
			}
			strbuf_puts(b, "<|end_of_turn|>");
		}
		if (add_ass)
			strbuf_puts(b, "GPT4 Correct Assistant:");
		break;
	case CHAT_VICUNA:
	case CHAT_VICUNA_ORCA:
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				if (f == CHAT_VICUNA_ORCA) {
					strbuf_puts(b, "SYSTEM: ");
					strbuf_puts(b, m[i].content);
					strbuf_puts(b, "\n");
				} else {
					strbuf_puts(b, m[i].content);
					strbuf_puts(b, "\n\n");
				}
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "USER: ");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n");
			} else {
				strbuf_puts(b, "ASSISTANT: ");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "</s>\n");
			}
		}
		if (add_ass)
			strbuf_puts(b, "ASSISTANT:");
		break;
	case CHAT_DEEPSEEK:
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, m[i].content);
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "### Instruction:\n");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n");
			} else {
				strbuf_puts(b, "### Response:\n");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n<|EOT|>\n");
			}
		}
		if (add_ass)
			strbuf_puts(b, "### Response:\n");
		break;
	case CHAT_COMMAND_R:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, roles[i] == ROLE_SYSTEM
					   ? "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>"
				       : roles[i] == ROLE_USER
					   ? "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
					   : "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
			sb_trimmed(b, m[i].content);
			strbuf_puts(b, "<|END_OF_TURN_TOKEN|>");
		}
		if (add_ass)
			strbuf_puts(b, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
		break;
	case CHAT_LLAMA3:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|start_header_id|>");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "<|end_header_id|>\n\n");
			sb_trimmed(b, m[i].content);
			strbuf_puts(b, "<|eot_id|>");
		}
		if (add_ass)
			strbuf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
		break;
	case CHAT_CHATGLM3:
		strbuf_puts(b, "[gMASK]sop");
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "|>\n ");
			strbuf_puts(b, m[i].content);
		}
		if (add_ass)
			strbuf_puts(b, "<|assistant|>");
		break;
	case CHAT_CHATGLM4:
	case CHAT_GLMEDGE:
		if (f == CHAT_CHATGLM4)
			strbuf_puts(b, "[gMASK]<sop>");
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "|>\n");
			strbuf_puts(b, m[i].content);
		}
		if (add_ass)
			strbuf_puts(b, f == CHAT_CHATGLM4 ? "<|assistant|>\n" : "<|assistant|>");
		break;
	case CHAT_MINICPM:
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "<\xe7\x94\xa8\xe6\x88\xb7>"); /* "<用户>" */
				sb_trimmed(b, m[i].content);
				strbuf_puts(b, "<AI>");
			} else {
				sb_trimmed(b, m[i].content);
			}
		}
		break;
	case CHAT_DEEPSEEK2:
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n\n");
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "User: ");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n\n");
			} else {
				strbuf_puts(b, "Assistant: ");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "<" FULLBAR "end" SPM_SPACE "of" SPM_SPACE
					       "sentence" FULLBAR ">");
			}
		}
		if (add_ass)
			strbuf_puts(b, "Assistant:");
		break;
	case CHAT_DEEPSEEK3:
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n\n");
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "<" FULLBAR "User" FULLBAR ">");
				strbuf_puts(b, m[i].content);
			} else {
				strbuf_puts(b, "<" FULLBAR "Assistant" FULLBAR ">");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "<" FULLBAR "end" SPM_SPACE "of" SPM_SPACE
					       "sentence" FULLBAR ">");
			}
		}
		if (add_ass)
			strbuf_puts(b, "<" FULLBAR "Assistant" FULLBAR ">");
		break;
	case CHAT_EXAONE3:
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, "[|system|]");
				sb_trimmed(b, m[i].content);
				strbuf_puts(b, "[|endofturn|]\n");
			} else if (roles[i] == ROLE_USER) {
				strbuf_puts(b, "[|user|]");
				sb_trimmed(b, m[i].content);
				strbuf_puts(b, "\n");
			} else {
				strbuf_puts(b, "[|assistant|]");
				sb_trimmed(b, m[i].content);
				strbuf_puts(b, "[|endofturn|]\n");
			}
		}
		if (add_ass)
			strbuf_puts(b, "[|assistant|]");
		break;
	case CHAT_GRANITE:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|start_of_role|>");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "<|end_of_role|>");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "<|end_of_text|>\n");
		}
		if (add_ass)
			strbuf_puts(b, "<|start_of_role|>assistant<|end_of_role|>");
		break;
	case CHAT_MEGREZ:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|role_start|>");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "<|role_end|>");
			strbuf_puts(b, m[i].content);
			strbuf_puts(b, "<|turn_end|>");
		}
		if (add_ass)
			strbuf_puts(b, "<|role_start|>assistant<|role_end|>");
		break;
	case CHAT_BAILING:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, roles[i] == ROLE_SYSTEM ? "<role>SYSTEM</role>"
				       : roles[i] == ROLE_USER ? "<role>HUMAN</role>"
							       : "<role>ASSISTANT</role>");
			strbuf_puts(b, m[i].content);
		}
		if (add_ass)
			strbuf_puts(b, "<role>ASSISTANT</role>");
		break;
	case CHAT_LLAMA4:
		for (size_t i = 0; i < n; i++) {
			strbuf_puts(b, "<|header_start|>");
			strbuf_puts(b, m[i].role);
			strbuf_puts(b, "<|header_end|>\n\n");
			sb_trimmed(b, m[i].content);
			strbuf_puts(b, "<|eot|>");
		}
		if (add_ass)
			strbuf_puts(b, "<|header_start|>assistant<|header_end|>\n\n");
		break;
	case CHAT_SMOLVLM:
		strbuf_puts(b, "<|im_start|>");
		for (size_t i = 0; i < n; i++) {
			if (roles[i] == ROLE_SYSTEM) {
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "\n\n");
			} else {
				strbuf_puts(b, roles[i] == ROLE_USER ? "User: " : "Assistant: ");
				strbuf_puts(b, m[i].content);
				strbuf_puts(b, "<end_of_utterance>\n");
			}
		}
		if (add_ass)
			strbuf_puts(b, "Assistant:");
		break;
	case CHAT_N_FAMILIES: break;
	}
}

enum bg_status chat_render(const struct chat_template *t, const struct chat_message *msgs, size_t n,
			   bool add_generation_prompt, char **out, size_t *out_len,
			   struct bg_err *err)
{
	*out = NULL;
	if (out_len)
		*out_len = 0;
	if (!t)
		return bg_fail(err, BG_ERR_INVALID, "no chat template");
	if (n == 0)
		return bg_fail(err, BG_ERR_INVALID, "messages is empty");
	enum role *roles = malloc(n * sizeof *roles);
	if (!roles)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory rendering a chat");
	for (size_t i = 0; i < n; i++) {
		const char *r = msgs[i].role;
		if (!r || !msgs[i].content) {
			free(roles);
			return bg_fail(err, BG_ERR_INVALID, "messages[%zu] has no %s", i,
				       r ? "content" : "role");
		}
		if (strcmp(r, "system") == 0) {
			roles[i] = ROLE_SYSTEM;
		} else if (strcmp(r, "user") == 0) {
			roles[i] = ROLE_USER;
		} else if (strcmp(r, "assistant") == 0) {
			roles[i] = ROLE_ASSISTANT;
		} else {
			free(roles);
			return bg_fail(err, BG_ERR_INVALID,
				       "messages[%zu]: role \"%.64s\" is not supported (system, "
				       "user or assistant)",
				       i, r);
		}
	}
	struct strbuf b = {0};
	strbuf_put(&b, "", 0); /* an empty rendering is still a valid string */
	render(t->family, msgs, roles, n, add_generation_prompt, &b);
	free(roles);
	if (b.oom) {
		free(b.p);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory rendering a chat");
	}
	*out = b.p;
	if (out_len)
		*out_len = b.len;
	return BG_OK;
}
