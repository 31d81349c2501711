/* test_chat: chat template detection and rendering.
 *
 * Expected renderings are NOT produced by this code: they are copied from llama.cpp's
 * tests/test-chat-template.cpp ("expected_output", the legacy non-Jinja path that this
 * module reproduces), from llama.cpp's server log line `chat_example` (DeepSeek-V3) and
 * from the published prompt formats in model cards (Zephyr, Llama 4). Detection is checked
 * on the template texts quoted in llama.cpp's test and on the real templates stored in
 * the vocab GGUFs under ../shared/vocab. */
#include <string.h>

#include "check.h"
#include "text/chat.h"
#include "model/gguf.h"
#include "llamacpp_conv.h"

struct expect {
	const char *name;
	const char *rendering; /* of conv with add_generation_prompt */
};

/* From llama.cpp tests/test-chat-template.cpp, expected_output. */
static const struct expect expects[] = {
    {"chatml",
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_"
     "end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>"
     "\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother "
     "question<|im_end|>\n<|im_start|>assistant\n"},
    {"llama2",
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   "
     "I am an assistant   </s>[INST] Another question [/INST]"},
    {"llama2-sys-bos",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] "
     "Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"},
    {"llama2-sys-strip",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] "
     "Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]"},
    {"monarch", "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi "
		"there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   "
		"</s>\n<s>user\nAnother question</s>\n<s>assistant\n"},
    {"gemma",
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>"
     "model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are "
     "you<end_of_turn>\n<start_of_turn>model\nI am an "
     "assistant<end_of_turn>\n<start_of_turn>user\nAnother "
     "question<end_of_turn>\n<start_of_turn>model\n"},
    {"orion",
     "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are "
     "you\n\nAssistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: "
     "</s>"},
    {"openchat",
     "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 "
     "Correct Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are "
     "you<|end_of_turn|>GPT4 Correct Assistant:    I am an assistant   <|end_of_turn|>GPT4 "
     "Correct User: Another question<|end_of_turn|>GPT4 Correct Assistant:"},
    {"deepseek",
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### "
     "Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### "
     "Instruction:\nAnother question\n### Response:\n"},
    {"vicuna", "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are "
	       "you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {"vicuna-orca",
     "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are "
     "you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {"command-r",
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful "
     "assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_"
     "TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi "
     "there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are "
     "you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an "
     "assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another "
     "question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"llama3",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
     "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_"
     "header_id|>assistant<|end_header_id|>\n\nHi "
     "there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are "
     "you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an "
     "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother "
     "question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"phi3",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
     "there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
     "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
    {"chatglm3",
     "[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n Hi "
     "there<|user|>\n Who are you<|assistant|>\n    I am an assistant   <|user|>\n Another "
     "question<|assistant|>"},
    {"chatglm4",
     "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi "
     "there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother "
     "question<|assistant|>\n"},
    {"glmedge", "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi "
		"there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother "
		"question<|assistant|>"},
    {"minicpm", "You are a helpful assistant<\xe7\x94\xa8\xe6\x88\xb7>Hello<AI>Hi "
		"there<\xe7\x94\xa8\xe6\x88\xb7>Who are you<AI>I am an "
		"assistant<\xe7\x94\xa8\xe6\x88\xb7>Another question<AI>"},
    {"deepseek2", "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi "
		  "there<\xef\xbd\x9c"
		  "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>User: Who are "
		  "you\n\nAssistant:    I am an assistant   "
		  "<\xef\xbd\x9c"
		  "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>User: Another "
		  "question\n\nAssistant:"},
    {"granite",
     "<|start_of_role|>system<|end_of_role|>You are a helpful "
     "assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|"
     "start_of_role|>assistant<|end_of_role|>Hi "
     "there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are "
     "you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   "
     "<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another "
     "question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"},
    {"mistral-v1",
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you "
     "[/INST]    I am an assistant   </s> [INST] Another question [/INST]"},
    {"mistral-v3",
     "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I "
     "am an assistant</s>[INST] Another question[/INST]"},
    {"mistral-v3-tekken",
     "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I "
     "am an assistant   </s>[INST]Another question[/INST]"},
    {"mistral-v7",
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi "
     "there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another "
     "question[/INST]"},
    {"megrez", "<|role_start|>system<|role_end|>You are a helpful "
	       "assistant<|turn_end|><|role_start|>user<|role_end|>Hello<|turn_end|><|role_start|>"
	       "assistant<|role_end|>Hi there<|turn_end|><|role_start|>user<|role_end|>Who are "
	       "you<|turn_end|><|role_start|>assistant<|role_end|>   I am an assistant   "
	       "<|turn_end|><|role_start|>user<|role_end|>Another "
	       "question<|turn_end|><|role_start|>assistant<|role_end|>"},
    {"phi4",
     "<|im_start|>system<|im_sep|>You are a helpful "
     "assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_"
     "sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are "
     "you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   "
     "<|im_end|><|im_start|>user<|im_sep|>Another "
     "question<|im_end|><|im_start|>assistant<|im_sep|>"},
    {"bailing",
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</"
     "role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   "
     "<role>HUMAN</role>Another question<role>ASSISTANT</role>"},
};

/* Template texts from llama.cpp's test (abridged to the part that identifies them; the
 * detection is by substring, so a faithful excerpt exercises the same branch). */
struct detect_case {
	const char *text;
	const char *family;
};
static const struct detect_case detects[] = {
    {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
     "%}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "chatml"},
    {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ "
     "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' "
     "%}{{ message['content'] + eos_token}}{% endif %}{% endfor %}",
     "llama2"},
    {"{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}} {{- '[INST] "
     "<<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}",
     "llama2-sys-bos"},
    {"{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% "
     "elif message['role'] == 'system' %}{{ '<<SYS>>\\n' + content.strip() + "
     "'\\n<</SYS>>\\n\\n' }}",
     "llama2-sys-strip"},
    {"{{ '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + message['content'] + ' [/INST]' }}",
     "llama2-sys"},
    {"{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}",
     "mistral-v1"},
    {"{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}",
     "mistral-v3-tekken"},
    {"{{- \"[AVAILABLE_TOOLS] [\" }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}",
     "mistral-v3"},
    {"{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% "
     "elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + "
     "'[/SYSTEM_PROMPT]' }}",
     "mistral-v7"},
    {"{% for message in messages %}{{bos_token + message['role'] + '\\n' + "
     "message['content'] + eos_token + '\\n'}}{% endfor %}",
     "monarch"},
    {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}",
     "gemma"},
    {"{% if message['role'] == 'user' %}{{ 'Human: ' + message['content'] + '\\n\\nAssistant: "
     "' + eos_token }}",
     "orion"},
    {"{{ 'GPT4 Correct ' + message['role'].title() + ': ' + message['content'] + "
     "'<|end_of_turn|>'}}",
     "openchat"},
    {"{{'### Instruction:\\n' + message['content'] + '\\n'}}{{'### Response:\\n' + "
     "message['content'] + '\\n<|EOT|>\\n'}}",
     "deepseek"},
    {"{{-'USER: ' + message['content'] + '\\n'-}}{{-'ASSISTANT: ' + message['content'] + "
     "'</s>\\n' -}}",
     "vicuna"},
    {"{{-'SYSTEM: ' + message['content'] + '\\n' -}}{{-'USER: ' + message['content'] + "
     "'\\n'-}}{{-'ASSISTANT: ' + message['content'] + '</s>\\n' -}}",
     "vicuna-orca"},
    {"{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}",
     "command-r"},
    {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
     "message['content'] | trim + '<|eot_id|>' %}",
     "llama3"},
    {"{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n' }}{% if "
     "add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}",
     "phi3"},
    {"{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\\n {{ message['content'] }}",
     "chatglm3"},
    {"[gMASK]<sop>{% for item in messages %}<|{{ item['role'] }}|>", "chatglm4"},
    {"{% if item['role'] == 'user' %}<|user|>\\n{{ item['content'] }}{% elif item['role'] == "
     "'assistant' %}<|assistant|>\\n{{ item['content'] }}{% endif %}",
     "glmedge"},
    {"{{ 'User: ' + message['content'] + '\\n\\n' }}{{ 'Assistant: ' + message['content'] + "
     "eos_token }}",
     "deepseek2"},
    {"{{'<\xef\xbd\x9c"
     "User\xef\xbd\x9c>' + message['content']}}{{'<\xef\xbd\x9c"
     "Assistant\xef\xbd\x9c>' + content + '<\xef\xbd\x9c"
     "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>'}}",
     "deepseek3"},
    {"{{- '<|start_of_role|>system<|end_of_role|>' + message['content'] + '<|end_of_text|>\\n' }}",
     "granite"},
    {"{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}", "phi4"},
    {"{{ '<|role_start|>' + message['role'] + '<|role_end|>' + message['content'] + "
     "'<|turn_end|>' }}",
     "megrez"},
    {"{% if role == 'user' %}{% set role = 'HUMAN' %}{% endif %}{{ '<role>' + role + "
     "'</role>' + message['content'] }}{{ '<role>ASSISTANT</role>' }}",
     "bailing"},
    {"{{'<|user|>\\n' + message['content'] + '<|endoftext|>\\n'}}", "zephyr"},
    {"{{'<|user|>\\n' + message['content'] + '</s>\\n'}}{{ '<|assistant|>\\n' }}", "falcon3"},
    {"llama3", "llama3"},  /* a bare name is accepted, as llama.cpp does */
    {"mistral", "llama2"}, /* llama.cpp: a text starting with "mistral" */
};

static void test_rendering(void)
{
	for (size_t i = 0; i < sizeof expects / sizeof expects[0]; i++) {
		const struct chat_template *t = chat_template_by_name(expects[i].name);
		CHECK(t != NULL, "template %s exists", expects[i].name);
		if (!t)
			continue;
		CHECK(strcmp(chat_template_name(t), expects[i].name) == 0, "name round-trips");
		char *out = NULL;
		size_t len = 0;
		struct bg_err err = {0};
		enum bg_status st =
		    chat_render(t, llamacpp_conv, LLAMACPP_CONV_N, true, &out, &len, &err);
		CHECK(st == BG_OK, "%s: %s", expects[i].name, err.msg);
		if (st != BG_OK)
			continue;
		CHECK(len == strlen(out), "length");
		CHECK(strcmp(out, expects[i].rendering) == 0, "%s:\n got  [%s]\n want [%s]",
		      expects[i].name, out, expects[i].rendering);
		free(out);
	}
}

/* Families without a llama.cpp test expectation: a shorter conversation checked against
 * other published sources. */
static void test_other_sources(void)
{
	char *out = NULL;
	struct bg_err err = {0};
	/* DeepSeek-V3/R1: llama.cpp's server logs this chat_example for those models. */
	static const struct chat_message ex[] = {
	    {"system", "You are a helpful assistant"},
	    {"user", "Hello"},
	    {"assistant", "Hi there"},
	    {"user", "How are you?"},
	};
	CHECK(chat_render(chat_template_by_name("deepseek3"), ex, 4, true, &out, NULL, &err) ==
		  BG_OK,
	      "%s", err.msg);
	CHECK(out && strcmp(out, "You are a helpful assistant\n\n<\xef\xbd\x9cUser\xef\xbd\x9c>"
				 "Hello<\xef\xbd\x9c"
				 "Assistant\xef\xbd\x9c>Hi there<\xef\xbd\x9c"
				 "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef\xbd\x9c"
				 "User\xef\xbd\x9c>How are you?<\xef\xbd\x9c"
				 "Assistant\xef\xbd\x9c>") == 0,
	      "deepseek3: %s", out);
	free(out);

	/* StableLM-2-Zephyr model card: "<|user|>\n{prompt}<|endoftext|>\n<|assistant|>\n". */
	static const struct chat_message z[] = {
	    {"user", "Which famous math number begins with 1.6 ...?"}};
	CHECK(chat_render(chat_template_by_name("zephyr"), z, 1, true, &out, NULL, &err) == BG_OK,
	      "%s", err.msg);
	CHECK(out && strcmp(out, "<|user|>\nWhich famous math number begins with 1.6 "
				 "...?<|endoftext|>\n<|assistant|>\n") == 0,
	      "zephyr: %s", out);
	free(out);

	/* Llama 4 model card: <|header_start|>user<|header_end|>\n\n...<|eot|>
	 * <|header_start|>assistant<|header_end|>\n\n */
	static const struct chat_message l4[] = {{"system", "S"}, {"user", " U "}};
	CHECK(chat_render(chat_template_by_name("llama4"), l4, 2, true, &out, NULL, &err) == BG_OK,
	      "%s", err.msg);
	CHECK(out && strcmp(out, "<|header_start|>system<|header_end|>\n\nS<|eot|><|header_start|>"
				 "user<|header_end|>\n\nU<|eot|><|header_start|>assistant<|header_"
				 "end|>\n\n") == 0,
	      "llama4: %s", out);
	free(out);

	/* Without the generation prompt, ChatML stops after the last turn. */
	static const struct chat_message u[] = {{"user", "Hi"}};
	CHECK(chat_render(chat_template_by_name("chatml"), u, 1, false, &out, NULL, &err) == BG_OK,
	      "%s", err.msg);
	CHECK(out && strcmp(out, "<|im_start|>user\nHi<|im_end|>\n") == 0, "chatml no gen: %s",
	      out);
	free(out);

	/* llama2 without a system message: the published Llama-2-chat format (minus BOS). */
	CHECK(chat_render(chat_template_by_name("llama2-sys"), u, 1, true, &out, NULL, &err) ==
		  BG_OK,
	      "%s", err.msg);
	CHECK(out && strcmp(out, "[INST] Hi [/INST]") == 0, "llama2-sys: %s", out);
	free(out);
}

static void test_errors(void)
{
	char *out = (char *)1;
	struct bg_err err = {0};
	static const struct chat_message bad[] = {{"user", "a"}, {"tool", "b"}};
	CHECK(chat_render(chat_template_by_name("chatml"), bad, 2, true, &out, NULL, &err) ==
		  BG_ERR_INVALID,
	      "a tool role is refused");
	CHECK(out == NULL, "nothing allocated");
	CHECK(strstr(err.msg, "messages[1]") && strstr(err.msg, "tool"), "message: %s", err.msg);
	static const struct chat_message nocontent[] = {{"user", NULL}};
	CHECK(chat_render(chat_template_by_name("chatml"), nocontent, 1, true, &out, NULL, &err) ==
		  BG_ERR_INVALID,
	      "NULL content is refused");
	CHECK(chat_render(chat_template_by_name("chatml"), bad, 0, true, &out, NULL, &err) ==
		  BG_ERR_INVALID,
	      "no messages is refused");
	CHECK(chat_render(NULL, bad, 1, true, &out, NULL, &err) == BG_ERR_INVALID, "no template");
	CHECK(chat_template_by_name("no-such") == NULL, "unknown name");
	CHECK(chat_template_by_name(NULL) == NULL, "NULL name");
	CHECK(chat_template_detect("{{ messages }}") == NULL, "unrecognised template");
	CHECK(chat_template_detect(NULL) == NULL, "NULL template");
	/* every name in the list resolves */
	char names[1024];
	snprintf(names, sizeof names, "%s", chat_template_names());
	int n = 0;
	for (char *s = strtok(names, ", "); s; s = strtok(NULL, ", ")) {
		CHECK(chat_template_by_name(s) != NULL, "listed name %s resolves", s);
		n++;
	}
	CHECK(n >= 30, "%d names", n);
}

static void test_detect_texts(void)
{
	for (size_t i = 0; i < sizeof detects / sizeof detects[0]; i++) {
		const struct chat_template *t = chat_template_detect(detects[i].text);
		CHECK(t && strcmp(chat_template_name(t), detects[i].family) == 0,
		      "detect %s got %s", detects[i].family, chat_template_name(t));
	}
}

/* Real templates from the vocab GGUFs: the family llama.cpp detects for each model. */
static void test_detect_gguf(void)
{
	static const struct {
		const char *file;
		const char *family; /* NULL: not a supported family */
	} cases[] = {
	    {"vocab/ggml-vocab-phi-3.gguf", "phi3"},
	    {"vocab/ggml-vocab-qwen2.gguf", "chatml"},
	    {"vocab/ggml-vocab-qwen35.gguf", "chatml"},
	    {"vocab/ggml-vocab-command-r.gguf", "command-r"},
	    /* Gemma 4 uses a new <|turn> format that llama.cpp's legacy detector and this
	     * module do not know: detection must say so rather than guess. */
	    {"vocab/ggml-vocab-gemma-4.gguf", NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *path = check_shared(cases[i].file);
		if (!path)
			continue;
		struct gguf_ctx *g = NULL;
		struct bg_err err = {0};
		if (gguf_open(path, &g, &err) != BG_OK) {
			CHECK(0, "open %s: %s", path, err.msg);
			continue;
		}
		struct gguf_str s;
		bool ok = gguf_get_str(g, "tokenizer.chat_template", &s);
		CHECK(ok, "%s has tokenizer.chat_template", cases[i].file);
		if (ok) {
			char *text = malloc(s.len + 1);
			memcpy(text, s.ptr, s.len);
			text[s.len] = '\0';
			const struct chat_template *t = chat_template_detect(text);
			if (cases[i].family)
				CHECK(t && strcmp(chat_template_name(t), cases[i].family) == 0,
				      "%s: detected %s, want %s", cases[i].file,
				      chat_template_name(t), cases[i].family);
			else
				CHECK(t == NULL, "%s: detected %s, want none", cases[i].file,
				      chat_template_name(t));
			free(text);
		}
		gguf_close(g);
	}
	/* A vocab without a template has no key: the caller reports "no chat template". */
	const char *path = check_shared("vocab/ggml-vocab-llama-spm.gguf");
	if (path) {
		struct gguf_ctx *g = NULL;
		struct bg_err err = {0};
		if (gguf_open(path, &g, &err) == BG_OK) {
			struct gguf_str s;
			CHECK(!gguf_get_str(g, "tokenizer.chat_template", &s), "llama-spm: none");
			gguf_close(g);
		} else {
			CHECK(0, "open %s: %s", path, err.msg);
		}
	}
}

int main(void)
{
	test_rendering();
	test_other_sources();
	test_errors();
	test_detect_texts();
	test_detect_gguf();
	return check_summary();
}
