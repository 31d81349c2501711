#!/usr/bin/python3
"""jinja_oracle.py TEMPLATE_DIR [YYYY-MM-DD]: the reference renderings for test_jinja.
jinja_oracle.py --render TEMPLATE GGUF REQUEST_JSON [YYYY-MM-DD]: prints the rendering of
one request line's messages (and tools), add_generation_prompt on, with bos_token and
eos_token read from the GGUF's vocabulary, or the template of that GGUF when TEMPLATE is
"gguf" (for e2e_chat_jinja.sh).

Renders every *.jinja file of TEMPLATE_DIR for a set of conversations, with
add_generation_prompt on and off, the way Hugging Face transformers' apply_chat_template
does (render_jinja_template: ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks
and loopcontrols, its tojson, raise_exception and strftime_now, messages/tools/documents/
add_generation_prompt plus the special tokens), with Debian's python3-jinja2. strftime_now
formats the fixed date given (default 2026-01-15) so that the C side can match it.

Prints one JSON object per line: {"template", "case", "vars", "ok", "out" | "error"}.
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

import struct

render_mode = sys.argv[1] == "--render"
darg = sys.argv[5] if render_mode and len(sys.argv) > 5 else sys.argv[2] if not render_mode and len(sys.argv) > 2 else "2026-01-15"
date = datetime.datetime.strptime(darg, "%Y-%m-%d")


def gguf_kv(path):
    """The metadata of a GGUF file as a dict (a minimal reader: v2/v3 little-endian)."""
    with open(path, "rb") as f:
        d = f.read()
    assert d[:4] == b"GGUF"
    off = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", d, off)
    off += 16
    fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def val(t, off):
        if t == 8:
            n = struct.unpack_from("<Q", d, off)[0]
            return d[off + 8:off + 8 + n].decode("utf-8", "replace"), off + 8 + n
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, off)
            off += 12
            out = []
            for _ in range(n):
                v, off = val(et, off)
                out.append(v)
            return out, off
        v = struct.unpack_from("<" + fmt[t], d, off)[0]
        return v, off + struct.calcsize(fmt[t])

    kv = {}
    for _ in range(n_kv):
        n = struct.unpack_from("<Q", d, off)[0]
        key = d[off + 8:off + 8 + n].decode()
        off += 8 + n
        t = struct.unpack_from("<I", d, off)[0]
        kv[key], off = val(t, off + 4)
    return kv


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override of jinja2's tojson (no HTML escaping, json.dumps options)
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return date.strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]}}}]
CASES = {
    "system_user": {"messages": [SYSTEM, {"role": "user", "content": "Hello, how are you?"}]},
    "user": {"messages": [{"role": "user", "content": "What is 2+2? Answer briefly.\nThanks."}]},
    "multi_turn": {"messages": [
        SYSTEM, {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        {"role": "user", "content": "Tell me a joke about \"quotes\" & <tags>, ünïcödé."}]},
    "tools": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_0001", "type": "function",
            "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call_0001", "name": "get_weather", "content": "{\"temperature\": 22}"},
        {"role": "user", "content": "Thanks! And in Rome?"}]},
    "tools_only": {"tools": TOOLS, "messages": [SYSTEM, {"role": "user", "content": "Weather in Oslo?"}]},
}

if render_mode:
    kv = gguf_kv(sys.argv[3])
    toks = kv["tokenizer.ggml.tokens"]
    def tok(key):
        i = kv.get(key)
        return toks[i] if i is not None and 0 <= i < len(toks) else ""
    if sys.argv[2] == "gguf":
        src = kv["tokenizer.chat_template"]
    else:
        with open(sys.argv[2], encoding="utf-8") as f:
            src = f.read()
    req = json.loads(sys.argv[4])
    msgs = req["messages"]
    for m in msgs:  # vLLM: tool-call arguments given as a JSON string reach the template parsed
        for c in m.get("tool_calls") or []:
            if isinstance(c.get("function", {}).get("arguments"), str):
                c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    sys.stdout.write(env.from_string(src).render(
        messages=msgs, tools=req.get("tools"), documents=None, add_generation_prompt=True,
        bos_token=tok("tokenizer.ggml.bos_token_id"), eos_token=tok("tokenizer.ggml.eos_token_id")))
    sys.exit(0)

tdir = sys.argv[1]
for name in sorted(os.listdir(tdir)):
    if not name.endswith(".jinja"):
        continue
    with open(os.path.join(tdir, name), encoding="utf-8") as f:
        src = f.read()
    try:
        tmpl = env.from_string(src)
    except Exception as e:  # a template jinja2 cannot compile
        tmpl = None
        cerr = "%s: %s" % (type(e).__name__, e)
    for cname, case in CASES.items():
        for agp in (False, True):
            vars = {"messages": case["messages"], "tools": case.get("tools"), "documents": None,
                    "add_generation_prompt": agp, "bos_token": "<s>", "eos_token": "</s>",
                    "unk_token": "<unk>", "pad_token": "<pad>"}
            # the vars travel as JSON: render from the parsed JSON, as the C side does
            vjson = json.dumps(vars, ensure_ascii=False)
            rec = {"template": name, "case": "%s%s" % (cname, "+gen" if agp else ""), "vars": json.loads(vjson)}
            if tmpl is None:
                rec.update(ok=False, error=cerr)
            else:
                try:
                    rec.update(ok=True, out=tmpl.render(**json.loads(vjson)))
                except Exception as e:
                    rec.update(ok=False, error="%s: %s" % (type(e).__name__, e))
            print(json.dumps(rec, ensure_ascii=False))
