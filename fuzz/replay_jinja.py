#!/usr/bin/python3
"""replay_jinja.py LOG [--out FILE] [--show N]: the differential check of fuzz_jinja's results
(a FUZZ_JINJA_LOG file, fuzz/fuzz_jinja.c) against python3-jinja2; fuzz/replay_jinja.sh runs it.

Each logged input (template, variables, our result) is rendered again by jinja2 the way
Hugging Face transformers' apply_chat_template renders (tests/jinja_oracle.py: an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loopcontrols, its tojson,
raise_exception and strftime_now), with the harness's date (2026-11-28) and the variables
as our side reads them (jx_from_json: a JSON number is a double, an integral one below 2^53
an int). jinja2 gets 2 s of CPU, 2 GiB of address space and the harness's 1 MiB of output.

Outcomes, per input: "same" (both render, byte-identical), "both fail" (error messages are
not compared), "limit" (either side stopped at a resource limit: ours are smaller than
jinja2's on purpose, jinja.h), or a disagreement: "output differs", "only ours fails", "only
jinja2 fails". A disagreement is explained by the first entry of KNOWN below whose test
matches: a deliberate difference (documented), a quirk of jinja2's (where we follow Python
or transformers instead), or a bug of ours not fixed yet. What no entry explains is
"unexplained": printed (the first --show, default 5) and written whole to --out as JSON
lines; the exit status is 1 when there is one. Inputs whose template or variables are not
UTF-8 are skipped (jinja2 takes str; we take bytes): replay_jinja.sh makes them UTF-8 first.
"""
import datetime
import json
import math
import re
import resource
import signal
import sys
import unicodedata

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATE = datetime.datetime(2026, 11, 28)  # fuzz_jinja's jinja_opts
MAX_OUTPUT = 1 << 20
CPU_SECONDS = 2.0
# our limit errors (jinja_eval.c, jinja_value.c, jinja_parse.c)
OUR_LIMIT = re.compile(r"ran more than \d+ steps|output exceeds|nested more than \d+ deep|"
                       r"more than \d+ bytes of memory|out of memory")


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override of jinja2's tojson (no HTML escaping, json.dumps options)
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return DATE.strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now


class Limit(BaseException):  # not an Exception: jinja2 and templates cannot catch it
    pass


def on_alarm(*_):
    raise Limit("more than %g s of CPU" % CPU_SECONDS)


def number(text):
    # jx_from_json: every JSON number is a double; an integral one below 2^53 is an int
    f = float(text)
    return int(f) if math.isfinite(f) and f == math.floor(f) and abs(f) < 2.0 ** 53 else f


def render(src, variables):
    """jinja2's result: ("ok", text) | ("error", message) | ("limit", why)."""
    signal.setitimer(signal.ITIMER_VIRTUAL, CPU_SECONDS)
    try:
        parts, n = [], 0
        for piece in env.from_string(src).generate(**variables):
            parts.append(piece)
            n += len(piece)
            if n > MAX_OUTPUT:  # characters >= bytes / 4; the byte count is checked below
                raise Limit("output beyond %d" % MAX_OUTPUT)
        return "ok", "".join(parts)
    except Limit as e:
        return "limit", str(e)
    except (MemoryError, RecursionError) as e:
        return "limit", type(e).__name__
    except Exception as e:  # noqa: BLE001 - any error of the template is a result
        return "error", "%s: %s" % (type(e).__name__, e)
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)


def unescape_unassigned(s):
    """s with repr()'s escapes of unassigned code points (category Cn) made characters."""
    def one(m):
        c = chr(int(m.group(1) or m.group(2) or m.group(3), 16))
        return c if unicodedata.category(c) == "Cn" else m.group(0)
    return re.sub(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})|\\U([0-9a-f]{8})", one, s)


def has(pat, s):
    return s is not None and re.search(pat, s) is not None


# What explains a disagreement: (class, name, test on the record r). r has "t" (template),
# "v" (variables), "stage", "ours_ok", "ours" (our output or error), "py_kind", "py" (its
# output or error), "outcome". The first match wins; keep each test narrow.
DELIBERATE, QUIRK, OPEN = "deliberate", "jinja2 quirk", "open (ours)"
PY_OBJECT = r"<(generator|built-in method|bound method|function|jinja2\.|markupsafe\.|[a-z_]+ object)[^>]* at 0x"
KNOWN = [
    # -- deliberate differences (jinja.h, README "Chat templates are executed") --
    (DELIBERATE, "integers are 64-bit: beyond, arithmetic gives a float, a literal is refused",
     lambda r: has(r"integer literal too large", r["ours"]) or
     (r["outcome"] == "output differs" and has(r"\d{19,}", r["py"]) and has(r"e\+(1[89]|[2-9]\d|\d{3})", r["ours"]))),
    (DELIBERATE, "filters jinja2 has and chat templates do not use: not implemented (a clear error)",
     lambda r: has(r"the (filter|test) '[a-z]+' is not supported", r["ours"])),
    (DELIBERATE, "str methods not implemented (format, partition, zfill, ...): a clear error",
     lambda r: has(r"str\.[a-z_]+\(\) is not supported|unsupported format character", r["ours"])),
    (DELIBERATE, "a %-format specification of more than 24 flag, width and precision characters is refused",
     lambda r: has(r"format specification too long", r["ours"])),
    (DELIBERATE, "loop.cycle, loop.changed and recursive loops are not implemented",
     lambda r: has(r"recursive loops are not supported", r["ours"]) or has(r"loop\.(cycle|changed)", r["t"])),
    (DELIBERATE, "case mapping is ASCII-only (no Unicode tables): outputs equal but for letter case",
     lambda r: r["outcome"] == "output differs" and r["ours"].casefold() == r["py"].casefold()),
    (DELIBERATE, "str.isalpha/isdigit/isalnum/isupper/islower are ASCII-only (no Unicode tables)",
     lambda r: has(r"\.is(alpha|digit|alnum|upper|lower)\(", r["t"]) and any(ord(c) > 127 for c in r["t"] + json.dumps(r["v"], ensure_ascii=False))),
    (DELIBERATE, "wordcount: Python's \\w for non-ASCII characters approximated (no Unicode tables)",
     lambda r: r["outcome"] == "output differs" and has(r"wordcount", r["t"]) and
     any(ord(c) > 127 for c in r["t"] + json.dumps(r["v"], ensure_ascii=False))),
    (DELIBERATE, "repr() prints unassigned code points as they are (Python escapes them: no Unicode tables)",
     lambda r: r["outcome"] == "output differs" and unescape_unassigned(r["py"]) == r["ours"]),
    (DELIBERATE, "string escapes \\N{NAME} (Unicode names) are not decoded",
     lambda r: has(r"\\N\{", r["t"])),
    # -- jinja2's quirks: where it prints Python internals or its implementation shows --
    (QUIRK, "prints a Python object with its address (a generator of select/map, a bound method)",
     lambda r: has(PY_OBJECT, r["py"])),
    (QUIRK, "prints range/dict_keys/dict_values/dict_items objects, not their items",
     lambda r: has(r"range\(-?\d+, -?\d+(, -?\d+)?\)|dict_(keys|values|items)\(", r["py"])),
    (QUIRK, "select/reject/selectattr/map are lazy: their argument errors show only when iterated",
     lambda r: r["outcome"] == "only ours fails" and r["stage"] == "render" and
     has(r"\b(select|reject|selectattr|rejectattr|map)\b", r["t"]) and
     has(r"(selectattr|map) needs|is not iterable|no test named", r["ours"])),
    (QUIRK, "constant folding: an inf/nan constant compiles to a name Python does not have",
     lambda r: has(r"NameError: name '(inf|nan)' is not defined", r["py"])),
    (QUIRK, "constant folding: a slice of constants that fails folds to Undefined",
     lambda r: r["outcome"] == "only ours fails" and has(r"slice indices", r["ours"])),
    (QUIRK, "an unclosed {# at the very end of the template is dropped",
     lambda r: has(r"comment not closed", r["ours"]) and has(r"\{#[-+]?$", r["t"])),
]


def explain(r):
    for cls, name, test in KNOWN:
        try:
            if test(r):
                return cls, name
        except Exception:  # noqa: BLE001 - a test that does not apply
            pass
    return "unexplained", None


def main():
    args = sys.argv[1:]
    out_path, show = None, 5
    if "--out" in args:
        i = args.index("--out")
        out_path = args[i + 1]
        del args[i:i + 2]
    if "--show" in args:
        i = args.index("--show")
        show = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(2 << 30, hard) if hard > 0 else 2 << 30, hard))
    signal.signal(signal.SIGVTALRM, on_alarm)
    counts = {}
    explained = {}
    unexplained = []
    seen = set()
    for line in open(args[0], encoding="ascii"):
        rec = json.loads(line)
        key = (rec["t"], rec["v"])
        if key in seen:  # the corpus and the seeds share inputs
            continue
        seen.add(key)
        try:
            t = bytes.fromhex(rec["t"]).decode("utf-8")
            v = json.loads(bytes.fromhex(rec["v"]).decode("utf-8"), parse_int=number, parse_float=number)
        except ValueError:
            counts["skipped"] = counts.get("skipped", 0) + 1
            continue
        ours_ok = rec["ok"]
        ours = bytes.fromhex(rec["out"] if ours_ok else rec["err"])
        kind, py = render(t, v)
        if kind == "ok":
            pyb = py.encode("utf-8", "surrogatepass")
            if len(pyb) > MAX_OUTPUT:
                kind, py = "limit", "output beyond %d" % MAX_OUTPUT
        ours_s = ours.decode("utf-8", "replace")
        if kind == "limit" or (not ours_ok and OUR_LIMIT.search(ours_s)):
            outcome = "limit"
        elif ours_ok and kind == "ok":
            outcome = "same" if ours == pyb else "output differs"
        elif not ours_ok and kind == "error":
            outcome = "both fail"
        elif ours_ok:
            outcome = "only jinja2 fails"
        else:
            outcome = "only ours fails"
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome in ("same", "both fail", "limit"):
            continue
        r = {"t": t, "v": v, "stage": rec["stage"], "ours_ok": ours_ok, "ours": ours_s, "py_kind": kind,
             "py": py, "outcome": outcome}
        cls, name = explain(r)
        if name:
            explained[(cls, name)] = explained.get((cls, name), 0) + 1
        else:
            unexplained.append(r)
    n = sum(counts.values()) - counts.get("skipped", 0)
    dis = sum(counts.get(k, 0) for k in ("output differs", "only ours fails", "only jinja2 fails"))
    print("%d inputs replayed (%d skipped: not UTF-8): %d same, %d both fail, %d limit, %d disagree "
          "(output differs %d, only ours fails %d, only jinja2 fails %d)" % (
              n, counts.get("skipped", 0), counts.get("same", 0), counts.get("both fail", 0),
              counts.get("limit", 0), dis, counts.get("output differs", 0),
              counts.get("only ours fails", 0), counts.get("only jinja2 fails", 0)))
    by_cls = {}
    for (cls, name), k in sorted(explained.items()):
        by_cls[cls] = by_cls.get(cls, 0) + k
        print("  %-13s %4d  %s" % (cls, k, name))
    print("  %-13s %4d" % ("unexplained", len(unexplained)))
    if out_path:
        with open(out_path, "w") as f:
            for r in unexplained:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    for r in unexplained[:show]:
        ours, py, at = r["ours"], str(r["py"]), 0
        if r["outcome"] == "output differs":  # from a little before the first difference
            while at < min(len(ours), len(py)) and ours[at] == py[at]:
                at += 1
            at = max(0, at - 60)
        print("unexplained (%s, %s): template %r\n  ours:   %s%r\n  jinja2: %s%r" % (
            r["outcome"], r["stage"], r["t"][:300], "[%d:] " % at if at else "", ours[at:at + 300],
            "[%d:] " % at if at else "", py[at:at + 300]), file=sys.stderr)
    sys.exit(1 if unexplained else 0)


if __name__ == "__main__":
    main()
