#!/usr/bin/python3
"""jinja_conversations.py OUT_DIR: fuzz_jinja inputs that pair every real chat template of
../shared/chat_templates (or $BG_SHARED/chat_templates) with 9 conversations the oracle of
tests/test_jinja.c does not use: Unicode whitespace around contents (U+3000, U+00A0,
U+200B), a reasoning_content, tool calls with non-ASCII, nested, float, null and boolean
arguments, two tool calls and two results, two system messages, an empty user turn, a
developer role, template syntax inside a content. For a campaign:
    fuzz/jinja_conversations.py /tmp/conv && fuzz/replay_jinja.sh /tmp/conv
(53 templates: 477 inputs, ~40 s.) Prints the number of inputs written."""
import glob
import json
import os
import sys

shared = os.environ.get("BG_SHARED") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
TOOL = {"type": "function", "function": {
    "name": "get_wéather", "description": "Get the weather — in °C.\n  Multi-line.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "e.g. Zürich"}, "days": {"type": "integer", "minimum": 1},
        "opts": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}, "required": ["city"]}}}
CONVS = [
    {"messages": [{"role": "user", "content": "\u3000こんにちは、元気？\u3000"}], "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "Sys\u00a0prompt\n\n"}, {"role": "user", "content": "Hi 😀 \u200b"},
                  {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!"}, {"role": "user", "content": "again"}],
     "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "weather?"},
                  {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                      "name": "get_wéather",
                      "arguments": {"city": "Zürich", "days": 3, "opts": ["a"], "f": 1.5, "n": None, "t": True}}}]},
                  {"role": "tool", "tool_call_id": "c1", "name": "get_wéather", "content": "{\"temp\": 21.5, \"sky\": \"☀\"}"},
                  {"role": "assistant", "content": "Sunny."}], "tools": [TOOL], "add_generation_prompt": False},
    {"messages": [{"role": "user", "content": "two calls"},
                  {"role": "assistant", "content": "ok", "tool_calls": [
                      {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": "ü\"q\"\n"}}},
                      {"id": "b", "type": "function", "function": {"name": "g", "arguments": {}}}]},
                  {"role": "tool", "tool_call_id": "a", "content": "1"}, {"role": "tool", "tool_call_id": "b", "content": "2"}],
     "tools": [TOOL], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "x"},
                  {"role": "assistant", "content": "answer", "reasoning_content": "thinking\u3000about it "},
                  {"role": "user", "content": "y"}], "add_generation_prompt": True, "enable_thinking": False},
    {"messages": [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}, {"role": "user", "content": ""}],
     "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "  padded  \n"}, {"role": "assistant", "content": "\n reply \t"}],
     "add_generation_prompt": False},
    {"messages": [{"role": "developer", "content": "dev msg"}, {"role": "user", "content": "hi"}], "tools": [TOOL],
     "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "100% \"quoted\" {{ not a tag }} {% raw %} \\ backslash"}],
     "add_generation_prompt": True},
]
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for path in sorted(glob.glob(os.path.join(shared, "chat_templates", "*.jinja"))):
    src = open(path, "rb").read().replace(b"\xff", b"")
    for k, conv in enumerate(CONVS):
        v = dict(conv, bos_token="<s>", eos_token="</s>")
        with open(os.path.join(out, "%s.%d" % (os.path.basename(path), k)), "wb") as f:
            f.write(src + b"\xff" + json.dumps(v, ensure_ascii=False).encode())
        n += 1
print(n)
