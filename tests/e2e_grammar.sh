#!/usr/bin/env bash
# e2e_grammar: constrained generation end to end on ../shared/models/stories260K.gguf (a
# model that never writes JSON by itself), CPU backend.
#  - 60 json_schema requests (12 schemas x 5 prompts/seeds, temperature 0.8): every output
#    that ends by end-of-generation parses and validates against its schema (Debian's
#    python3-jsonschema); most of them do end so.
#  - OpenAI lines with response_format json_object / json_schema: the same.
#  - regex outputs fullmatch (Python's re), choice outputs are one of the choices.
#  - the same 60 requests one at a time give the same tokens (batch invariance).
#  - GBNF outputs: every token is one llama.cpp's grammar engine allows at that step, and
#    the end-of-generation token too (bench/llamacpp_grammar.mjs; same grammar text).
#  - greedy GBNF decoding: batchgen's tokens equal llama.cpp's grammar-constrained greedy
#    tokens (llama.cpp's logits, llama.cpp's grammar) for the same prompt ids.
#  - line errors: a bad grammar / schema / regex names the position; two constraints on one
#    line are refused; the rest of the file runs; exit status 1.
#  - logit_bias, min_tokens and bad_words change what is generated as asked.
source tests/check.sh
source tests/need_llamacpp.sh
PY=/usr/bin/python3
M=$(shared models/stories260K.gguf) || {
	summary
	exit $?
}
run() { "$BATCHGEN" -m "$M" --device cpu -i "$1" -o "$2" 2>"$2.err"; }

# ---- JSON schemas at temperature 0.8 ----
$PY - "$TMP/schema.jsonl" <<'PY'
import json, sys
schemas = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"]},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 1, "maxItems": 4},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}}, "required": ["ok"]},
    {"enum": ["red", "green", "blue", 7, None]},
    {"type": "string", "minLength": 3, "maxLength": 8},
    {"type": ["string", "null"], "maxLength": 5},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"}}, "required": ["when", "id"]},
    {"anyOf": [{"type": "integer", "minimum": 100}, {"type": "object", "properties": {"k": {"const": "v"}}, "required": ["k"]}]},
    {"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "number"}}, "required": ["x", "y"]}}, "type": "array", "items": {"$ref": "#/$defs/pt"}, "maxItems": 2},
    {"type": "object", "properties": {"title": {"type": "string", "pattern": "^[A-Z][a-z]{1,6}$"}, "n": {"type": "integer", "exclusiveMinimum": 0}}, "required": ["title"]},
    {"type": "object", "additionalProperties": {"type": "boolean"}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}}, "required": ["b"]}}, "required": ["a"]},
]
prompts = ["Once upon a time", "The cat", "Lily and Tom", "One day", "The big dog"]
with open(sys.argv[1], "w") as f:
    for i, s in enumerate(schemas):
        for j, p in enumerate(prompts):
            f.write(json.dumps({"id": f"s{i}-{j}", "prompt": p, "max_tokens": 160, "temperature": 0.8, "seed": 100 * i + j, "json_schema": s}) + "\n")
PY
check "schema run" run "$TMP/schema.jsonl" "$TMP/schema.out"
# validate: prints "total eos valid"
validate() {
	$PY - "$1" "$2" <<'PY'
import json, sys
import jsonschema
reqs = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "custom_id" in r:
        rf = r["body"]["response_format"]
        reqs[r["custom_id"]] = rf["json_schema"]["schema"] if rf["type"] == "json_schema" else {"type": "object"}
    else:
        reqs[r["id"]] = r["json_schema"]
total = eos = valid = 0
for l in open(sys.argv[2]):
    r = json.loads(l)
    if "custom_id" in r:
        rid, body = r["custom_id"], (r.get("response") or {}).get("body") or {}
        ch = (body.get("choices") or [{}])[0]
        text, fin = ch.get("text", ch.get("message", {}).get("content")), ch.get("finish_reason")
        ended = fin == "stop"
    else:
        rid, text, fin = r["id"], r.get("text"), r.get("finish_reason")
        ended = fin in ("eos", "stop")
    total += 1
    if not ended:
        continue
    eos += 1
    try:
        inst = json.loads(text)
        jsonschema.Draft202012Validator(reqs[rid], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(inst)
        valid += 1
    except Exception as e:
        print("INVALID", rid, repr(text), e, file=sys.stderr)
print(total, eos, valid)
PY
}
read -r total eos valid < <(validate "$TMP/schema.jsonl" "$TMP/schema.out")
echo "json_schema: $total results, $eos ended by end-of-generation, $valid valid"
check_eq "schema results" "$total" 60
check_eq "every ended output validates" "$valid" "$eos"
check "most outputs end (>= 45 of 60)" test "${eos:-0}" -ge 45

# batch invariance: the same requests one at a time give the same tokens, bit for bit
"$BATCHGEN" -m "$M" --device cpu --max-batch-size 1 -i "$TMP/schema.jsonl" -o "$TMP/schema1.out" 2>/dev/null
tokens_of() { $PY -c 'import json,sys; [print(r["id"], r["token_ids"], r["finish_reason"]) for r in map(json.loads, open(sys.argv[1]))]' "$1"; }
check_eq "constrained tokens independent of batching" "$(tokens_of "$TMP/schema1.out" | md5sum)" "$(tokens_of "$TMP/schema.out" | md5sum)"

# ---- OpenAI response_format ----
$PY - "$TMP/oai.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for j in range(6):
        rf = {"type": "json_object"} if j % 2 == 0 else {"type": "json_schema", "json_schema": {"name": "p", "strict": True, "schema": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}}}
        f.write(json.dumps({"custom_id": f"o{j}", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "Once upon a time", "max_tokens": 300, "temperature": 0.8, "seed": j, "response_format": rf}}) + "\n")
PY
check "openai run" run "$TMP/oai.jsonl" "$TMP/oai.out"
read -r total eos valid < <(validate "$TMP/oai.jsonl" "$TMP/oai.out")
echo "response_format: $total results, $eos ended, $valid valid"
check_eq "openai results" "$total" 6
check_eq "openai ended outputs validate" "$valid" "$eos"
check "openai outputs end" test "${eos:-0}" -ge 3

# ---- regex and choice ----
cat >"$TMP/rc.jsonl" <<'EOF'
{"id": "r0", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0.8, "seed": 1, "regex": "[0-9]{3}-[0-9]{4}"}
{"id": "r1", "prompt": "The cat", "max_tokens": 40, "temperature": 0.8, "seed": 2, "regex": "(yes|no|maybe), [a-z]+\\."}
{"id": "r2", "prompt": "One day", "max_tokens": 40, "temperature": 0.8, "seed": 3, "regex": "[A-Z][a-z]{2,5} (is|was) [a-z ]{1,12}!"}
{"id": "c0", "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0.8, "seed": 4, "choice": ["happy", "sad", "very tired"]}
{"id": "c1", "prompt": "The dog was", "max_tokens": 10, "choice": ["big", "small"]}
EOF
check "regex/choice run" run "$TMP/rc.jsonl" "$TMP/rc.out"
check "regex and choice outputs match" $PY - "$TMP/rc.jsonl" "$TMP/rc.out" <<'PY'
import json, re, sys
req = {json.loads(l)["id"]: json.loads(l) for l in open(sys.argv[1])}
ok = True
for l in open(sys.argv[2]):
    r = json.loads(l); q = req[r["id"]]
    if r.get("finish_reason") not in ("eos", "stop"):
        print("not ended", r, file=sys.stderr); ok = False; continue
    good = re.fullmatch(q["regex"], r["text"]) if "regex" in q else r["text"] in q["choice"]
    if not good:
        print("no match", q, r["text"], file=sys.stderr); ok = False
sys.exit(0 if ok else 1)
PY

# ---- GBNF: every token allowed by llama.cpp's grammar engine; greedy equals llama.cpp ----
$PY - "$TMP/gbnf.jsonl" <<'PY'
import json, sys
G = [
    'root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]{1,3} | "(" expr ")"',
    'root ::= "[" (item (", " item)*)? "]"\nitem ::= [a-z]{1,8}',
    'root ::= "{\\"name\\": \\"" [A-Za-z ]{1,20} "\\", \\"age\\": " [0-9]{1,3} "}"',
    'root ::= [0-9]{4,6}',
    'root ::= item+\nitem ::= "(" item* ")" | "[" item* "]"',
    'root ::= "yes" | "no" | "maybe later"',
    'root ::= "The " [a-z]+ " was " ("happy" | "sad") "."',
]
with open(sys.argv[1], "w") as f:
    for i, g in enumerate(G):
        f.write(json.dumps({"id": f"g{i}", "input_ids": [1, 403, 407, 261, 378], "max_tokens": 40, "grammar": g}) + "\n")
        f.write(json.dumps({"id": f"t{i}", "input_ids": [1, 403, 407, 261, 378], "max_tokens": 40, "temperature": 0.8, "seed": i, "grammar": g}) + "\n")
PY
check "gbnf run" run "$TMP/gbnf.jsonl" "$TMP/gbnf.out"
if need_llamacpp "llama.cpp grammar checks"; then
	# every generated token (sampled and greedy) allowed by llama.cpp at its step
	$PY - "$TMP/gbnf.jsonl" "$TMP/gbnf.out" "$TMP/cases.json" "$TMP/greedy.json" <<'PY'
import json, sys
req = {json.loads(l)["id"]: json.loads(l) for l in open(sys.argv[1])}
cases, greedy = [], []
for l in open(sys.argv[2]):
    r = json.loads(l); q = req[r["id"]]
    cases.append({"grammar": q["grammar"], "path": r["token_ids"], "id": r["id"]})
    if r["id"].startswith("g"):
        greedy.append({"grammar": q["grammar"], "prompt": q["input_ids"], "n": q["max_tokens"], "id": r["id"], "ours": r["token_ids"]})
json.dump(cases, open(sys.argv[3], "w")); json.dump(greedy, open(sys.argv[4], "w"))
PY
	node bench/llamacpp_grammar.mjs "$M" 512 "$TMP/cases.json" >"$TMP/allowed.out" 2>/dev/null
	check "llama.cpp allows every token batchgen chose" $PY - "$TMP/cases.json" "$TMP/allowed.out" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ok = len(cases) == 14
for c, case in enumerate(cases):
    mine = [x for x in lines if x["case"] == c]
    if any("refused" in x for x in mine) or len(mine) != len(case["path"]) + 1:
        print("case", case["id"], "llama.cpp refused or answered", len(mine), "of", len(case["path"]) + 1, file=sys.stderr); ok = False
print(sum(len(c["path"]) for c in cases), "tokens checked")
sys.exit(0 if ok else 1)
PY
	node bench/llamacpp_grammar.mjs --greedy "$M" "$TMP/greedy.json" >"$TMP/greedy.out" 2>/dev/null
	check "greedy constrained tokens equal llama.cpp's" $PY - "$TMP/greedy.json" "$TMP/greedy.out" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))
lines = {json.loads(l)["case"]: json.loads(l)["token_ids"] for l in open(sys.argv[2]) if l.strip()}
ok = len(lines) == len(cases) == 7
for c, case in enumerate(cases):
    if lines.get(c) != case["ours"]:
        print("greedy", case["id"], "ours", case["ours"], "llama.cpp", lines.get(c), file=sys.stderr); ok = False
sys.exit(0 if ok else 1)
PY
fi

# ---- errors: one line each, the rest runs, exit 1 ----
cat >"$TMP/err.jsonl" <<'EOF'
{"id": "ok", "prompt": "Once", "max_tokens": 3}
{"id": "g", "prompt": "Once", "grammar": "root ::= \"a\" (b"}
{"id": "s", "prompt": "Once", "json_schema": {"type": "object", "properties": {"a": {"type": "string", "minLength": "x"}}}}
{"id": "r", "prompt": "Once", "regex": "ab(c"}
{"id": "two", "prompt": "Once", "regex": "a", "choice": ["b"]}
{"id": "lr", "prompt": "Once", "grammar": "root ::= root \"a\" | \"b\""}
{"id": "lb", "prompt": "Once", "logit_bias": {"x": 1}}
{"id": "none", "prompt": "Once", "max_tokens": 6, "grammar": "root ::= [^\\x00-\\U0010FFFF]"}
EOF
"$BATCHGEN" -m "$M" --device cpu -i "$TMP/err.jsonl" -o "$TMP/err.out" 2>/dev/null
check_eq "exit status with line errors" "$?" 1
msgs=$($PY -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); e = r.get("error") or {}
    print(r["id"], e.get("message", r.get("finish_reason")))' "$TMP/err.out")
check "the good line ran" grep -q "^ok length" <<<"$msgs"
check "grammar error has a position" grep -q "^g grammar: line 1, column 16: expecting ')'" <<<"$msgs"
check "schema error names the property" grep -q "^s json_schema at '/properties/a': minLength" <<<"$msgs"
check "regex error has an offset" grep -q "^r regex: at offset 4" <<<"$msgs"
check "two constraints refused" grep -q "^two give at most one of" <<<"$msgs"
# a class that matches no character: bytes f5.. (code points past U+10FFFF) once got through
check "a grammar that matches nothing ends in the grammar error" grep -q "^none no token of the vocabulary can continue" <<<"$msgs"
check "left recursion refused" grep -q "^lr grammar: .*'root' is left-recursive" <<<"$msgs"
check "bad logit_bias key" grep -q "^lb logit_bias keys must be token ids" <<<"$msgs"

# ---- logit controls ----
# greedy baseline; then ban its first token, force a token, keep its sixth token (made a
# stop token) out of the first 20 with min_tokens, ban a word it writes
printf '{"id":"base","input_ids":[1,403,407,261,378],"max_tokens":30}\n' >"$TMP/b.jsonl"
run "$TMP/b.jsonl" "$TMP/b.out"
first=$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["token_ids"][0])' "$TMP/b.out")
sixth=$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["token_ids"][5])' "$TMP/b.out")
base_text=$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["text"])' "$TMP/b.out")
cat >"$TMP/lc.jsonl" <<EOF
{"id":"ban","input_ids":[1,403,407,261,378],"max_tokens":5,"logit_bias":{"$first":-100}}
{"id":"force","input_ids":[1,403,407,261,378],"max_tokens":5,"logit_bias":{"300":100}}
{"id":"min","input_ids":[1,403,407,261,378],"max_tokens":30,"stop_token_ids":[$sixth],"min_tokens":20}
{"id":"free","input_ids":[1,403,407,261,378],"max_tokens":30,"stop_token_ids":[$sixth]}
{"id":"bad","input_ids":[1,403,407,261,378],"max_tokens":30,"bad_words":["Lily"]}
EOF
run "$TMP/lc.jsonl" "$TMP/lc.out"
check "logit_bias -100 bans, +100 forces; min_tokens; bad_words" $PY - "$TMP/lc.out" "$first" "$base_text" "$sixth" <<'PY'
import json, sys
r = {json.loads(l)["id"]: json.loads(l) for l in open(sys.argv[1])}
first, base, sixth = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ok = True
def bad(msg):
    global ok; ok = False; print(msg, file=sys.stderr)
if r["ban"]["token_ids"][0] == first: bad("ban: first token still %d" % first)
if r["force"]["token_ids"] != [300] * 5: bad("force: %s" % r["force"]["token_ids"])
if r["free"]["finish_reason"] != "stop" or len(r["free"]["token_ids"]) > 6: bad("free run should stop by token %d: %s" % (sixth, r["free"]))
m = r["min"]["token_ids"]
if len(m) < 20 or sixth in m[:19]: bad("min_tokens: %s" % m)
if "Lily" not in base: bad("baseline lacks Lily: %r" % base)
if "Lily" in r["bad"]["text"]: bad("bad_words: %r" % r["bad"]["text"])
sys.exit(0 if ok else 1)
PY

summary
