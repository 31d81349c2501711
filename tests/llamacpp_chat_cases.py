#!/usr/bin/python3
"""llamacpp_chat_cases.py TEST_CHAT_TEMPLATE_CPP > tests/llamacpp_chat_cases.h

Copies the test cases of llama.cpp's tests/test-chat-template.cpp (its `test_cases` table)
into a C header for test_chat_llamacpp.c: the template text, bos/eos, the extra turns and
the text llama.cpp expects from its own Jinja engine (expected_output_jinja, or
expected_output when that is empty), for every case marked supported_with_jinja.

llama.cpp's Jinja path is not transformers': when its capability probe finds that a
template never reads a system message (common/jinja/caps.cpp), it merges the system
message into the next one with "\n" (workaround::system_message_not_supported in
common/chat.cpp). Python's jinja2 (Debian python3-jinja2, run as transformers runs it; see
jinja_oracle.py) decides which cases that is: a case where jinja2 renders llama.cpp's
expected text only after that merge is marked merges_system, with jinja2's rendering (or
its exception) of the unmerged conversation beside it. A case where jinja2 differs from
llama.cpp both ways stops this script: it needs a person to look at it.
"""
import json
import re
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# ---- the C++ table ----

ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "?": "?"}


def cpp_tokens(s, i):
    while i < len(s):
        c = s[i]
        if c.isspace():
            i += 1
        elif s.startswith("//", i):
            i = s.index("\n", i)
        elif s.startswith("/*", i):
            i = s.index("*/", i) + 2
        elif c == '"':
            j, out = i + 1, []
            while s[j] != '"':
                if s[j] == "\\":
                    out.append(ESC[s[j + 1]])
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            yield "str", "".join(out)
            i = j + 1
        elif c in "{},()":
            yield c, c
            i += 1
        else:
            m = re.match(r"[A-Za-z_0-9]+", s[i:])
            if not m:
                raise ValueError("unexpected %r at %d" % (s[i:i + 20], i))
            yield "id", m.group(0)
            i += len(m.group(0))


def cpp_value(kind, v, it):
    """A brace list as a list, a string literal (or U8C("...")) as str, true/false as bool."""
    if kind == "{":
        out = []
        for k2, v2 in it:
            if k2 == "}":
                return out
            if k2 != ",":
                out.append(cpp_value(k2, v2, it))
    if kind == "str":
        return v
    if kind == "id" and v in ("true", "false"):
        return v == "true"
    if kind == "id" and v == "U8C":
        assert next(it)[0] == "("
        k2, s = next(it)
        assert k2 == "str" and next(it)[0] == ")"
        return s
    raise ValueError("unexpected %s %r" % (kind, v))


src = open(sys.argv[1], encoding="utf-8").read()
at = src.index("std::vector<TestCase> test_cases")
it = cpp_tokens(src, src.index("{", at))
FIELDS = ["name", "template_str", "expected_output", "expected_output_jinja", "bos_token",
          "eos_token", "supported_with_jinja", "extra_conversation"]
cases = []
for row in cpp_value(*next(it), it):
    c = {"bos_token": "", "eos_token": "", "supported_with_jinja": True, "extra_conversation": []}
    c.update(zip(FIELDS, row))
    cases.append(c)

# ---- jinja2, as transformers runs it ----


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

CONV = [("system", "You are a helpful assistant"), ("user", "Hello"), ("assistant", "Hi there"),
        ("user", "Who are you"), ("assistant", "   I am an assistant   "), ("user", "Another question")]
# what llama.cpp's common_chat_templates_apply adds to the context (common_chat_extra_context
# and the inputs' enable_thinking default); test_chat_llamacpp.c passes the same
EXTRA = {"enable_thinking": True, "datetime": "Jan 15 2026", "date_string": "15 Jan 2026"}


def render(c, merge):
    msgs = [{"role": r, "content": t} for r, t in CONV + [tuple(x) for x in c["extra_conversation"]]]
    if merge:
        msgs[1]["content"] = msgs[0]["content"] + "\n" + msgs[1]["content"]
        msgs = msgs[1:]
    try:
        return True, env.from_string(c["template_str"]).render(
            messages=msgs, add_generation_prompt=True, bos_token=c["bos_token"],
            eos_token=c["eos_token"], **EXTRA)
    except jinja2.exceptions.TemplateError as e:
        return False, str(e)

# ---- the header ----


def cstr(s):
    """s as C string literals, split after each newline and near every 80 bytes."""
    if s is None:
        return "NULL"
    parts, cur, n = [], [], 0
    for ch in s:
        e = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", '"': '\\"'}.get(ch, ch)
        if ch == "?" and cur and cur[-1] == "?":
            e = "\\?"  # no trigraphs
        cur.append(e)
        n += len(ch.encode())
        if ch == "\n" or (ch == " " and n >= 70) or n >= 90:
            parts.append('"%s"' % "".join(cur))
            cur, n = [], 0
    if cur or not parts:
        parts.append('"%s"' % "".join(cur))
    return "\n\t\t".join(parts)


out = sys.stdout
out.write("/* llamacpp_chat_cases.h: GENERATED by tests/llamacpp_chat_cases.py from llama.cpp's\n"
          " * tests/test-chat-template.cpp; do not edit. See test_chat_llamacpp.c for the source. */\n")
out.write("/* clang-format off */\n")
out.write("static const struct lc_case lc_cases[] = {\n")
n_skip = 0
for c in cases:
    if not c["supported_with_jinja"]:
        n_skip += 1
        out.write("    /* %s: not supported_with_jinja in llama.cpp; not checked */\n" % c["name"])
        continue
    want = c["expected_output_jinja"] or c["expected_output"]
    ok, raw = render(c, False)
    merges = False
    if not (ok and raw == want):
        okm, merged = render(c, True)
        if not (okm and merged == want):
            sys.exit("%s: jinja2 differs from llama.cpp with and without the system merge" % c["name"])
        merges = True
    extra = "".join("{%s, %s}, " % (cstr(r), cstr(t)) for r, t in c["extra_conversation"])
    out.write("    {\n\t.name = %s,\n" % cstr(c["name"]))
    out.write("\t.tmpl = %s,\n" % cstr(c["template_str"]))
    out.write("\t.bos = %s,\n\t.eos = %s,\n" % (cstr(c["bos_token"]), cstr(c["eos_token"])))
    if extra:
        out.write("\t.extra = {%s},\n" % extra.rstrip(", "))
    out.write("\t.want = %s,\n" % cstr(want))
    if merges:
        out.write("\t.merges_system = true,\n")
        if ok:
            out.write("\t.jinja2 = %s,\n" % cstr(raw))
        else:
            out.write("\t.jinja2_error = %s,\n" % cstr(raw))
    out.write("    },\n")
out.write("};\n/* clang-format on */\n")
sys.stderr.write("%d cases, %d not supported with Jinja\n" % (len(cases), n_skip))
