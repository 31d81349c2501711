#!/usr/bin/env bash
# seeds.sh [OUT_DIR]: writes the seed corpora of the harnesses into OUT_DIR/NAME/
# (default build-fuzz/seeds). Everything is made here from the tree, the built binary and
# ../shared (or $BG_SHARED, optional): no binary seed is kept in the repository.
#   gguf       small synthetic models (batchgen synth: every dtype, llama and qwen2, MoE,
#              gpt-oss, olmo2/3, granite, mistral3, smollm3, seed_oss, apertus, gemma4, glm4,
#              glm4moe, deepseek2, command-r, cohere2, minimax-m2, the recurrent lfm2,
#              lfm2moe, qwen35, qwen35moe, qwen3next, granitehybrid, nemotron_h(_moe),
#              qwen2moe, step35, qwen2vl, qwen3vl, qwen3vlmoe, ernie4_5(-moe), hunyuan-*; tied
#              and not), hand-made GGUFs (the issue 16 inputs, a BPE vocabulary, v2)
#   request    native and OpenAI lines (valid, invalid, the issue 16 lines), raw and built
#   tokenizer  the vocabulary test texts of ../shared/vocab/*.inp, for each vocabulary
#   chat       template texts (../shared/chat_templates, cut at 4 KiB) and conversations
#   resume     result files written by batchgen, whole, torn and foreign
#   grammar    GBNF grammars (JSON-like, arithmetic, classes, repetitions, the empty rule)
#   jinja      the Jinja chat templates of ../shared/chat_templates whole, with and without
#              a JSON object of variables after the 0xff separator; the probes of
#              fuzz/jinja_probes.txt with a small conversation
#   regex      the patterns of tests/test_json_schema.c (and a few hostile ones), in plain
#              and json_string mode, then walk/candidate bytes
#   schema     the schemas of tests/test_json_schema.c (and a few hostile ones), then walk bytes
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-fuzz/seeds}
BATCHGEN=${BATCHGEN:-build/batchgen}
shared=${BG_SHARED:-../shared}
[ -x "$BATCHGEN" ] || make -j2 "$BATCHGEN" >/dev/null
rm -rf "$out"
mkdir -p "$out"/{gguf,request,tokenizer,chat,resume,grammar,jinja,regex,schema}

# ---- gguf: synthetic models, small enough for a forward pass in the harness ----
small=(--layers 1 --embd 32 --heads 2 --kv-heads 1 --ffn 64 --vocab 260 --ctx 32)
for dt in f32 f16 bf16 q8_0; do
	"$BATCHGEN" synth "${small[@]}" --dtype $dt -o "$out/gguf/llama-$dt.gguf" 2>/dev/null
	"$BATCHGEN" synth --shape qwen2-tiny "${small[@]}" --dtype $dt \
		-o "$out/gguf/qwen2-$dt.gguf" 2>/dev/null
done
"$BATCHGEN" synth "${small[@]}" --layers 2 --tie -o "$out/gguf/llama-tied.gguf" 2>/dev/null
# mixtures of experts: stacked 3-D expert tensors and a router (qwen3moe, Mixtral = llama)
"$BATCHGEN" synth --shape qwen3moe-tiny "${small[@]}" --head-dim 16 --experts 4 \
	--experts-used 2 --ffn-exp 32 --dtype f16 -o "$out/gguf/qwen3moe-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape mixtral-tiny "${small[@]}" --experts 4 --experts-used 2 --dtype q8_0 \
	-o "$out/gguf/mixtral-q8_0.gguf" 2>/dev/null
# gpt-oss: attention sinks, O bias, router and expert biases (2-D, presented stacked)
"$BATCHGEN" synth --shape gpt-oss-tiny "${small[@]}" --head-dim 16 --ffn-exp 32 --dtype q8_0 \
	-o "$out/gguf/gpt-oss-q8_0.gguf" 2>/dev/null
# olmo2 / OLMo 3 (no pre-norms, whole-row Q/K norms, the per-layer bool list of windowed
# layers), granite (four f32 scales), mistral3 (attention temperature, optional biases),
# smollm3 (layers without RoPE), gemma4 (windowed layers of head size 16 with 2 K/V heads,
# the global one of 16 with 1 and no attn_v, V norm, layer output scales)
"$BATCHGEN" synth --shape olmo3-tiny "${small[@]}" --layers 4 --sliding-window 8 \
	--dtype q8_0 -o "$out/gguf/olmo3-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape granitemoe-tiny "${small[@]}" --experts 4 --experts-used 2 \
	--dtype q8_0 -o "$out/gguf/granitemoe-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape mistral3-bias-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/mistral3-bias-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape smollm3-tiny "${small[@]}" --layers 4 --dtype bf16 \
	-o "$out/gguf/smollm3-bf16.gguf" 2>/dev/null
# seed_oss (Q/K/V biases, the FFN norm named post_attention_norm, head_dim 32 != 32 / 2),
# apertus (Q/K norms, rope_freqs, biases, no gate, the xielu.* arrays of one value a layer)
"$BATCHGEN" synth --shape seed_oss-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/seed_oss-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape apertus-tiny "${small[@]}" --layers 2 --dtype q8_0 \
	-o "$out/gguf/apertus-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape gemma4-tiny "${small[@]}" --layers 3 --head-dim 16 --dtype f16 \
	-o "$out/gguf/gemma4-f16.gguf" 2>/dev/null
# glm4 (partial RoPE, post-norms, gate|up ffn_up, a NextN layer whose tensors are skipped),
# glm4moe (a dense layer, then experts with exp_probs_b and a shared expert; its NextN
# layer): 83 and 92 KiB
"$BATCHGEN" synth --shape glm4-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/glm4-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape glm4moe-tiny "${small[@]}" --layers 2 --experts 4 --experts-used 2 \
	--ffn-exp 32 --dtype q8_0 -o "$out/gguf/glm4moe-q8_0.gguf" 2>/dev/null
# deepseek2 (MLA: q_a / q_b, kv_a_mqa, the per-head attn_k_b / attn_v_b; grouped sigmoid
# routing with exp_probs_b and a shared expert): 148 KiB
"$BATCHGEN" synth --shape deepseek2-tiny "${small[@]}" --layers 2 --dtype f16 \
	-o "$out/gguf/deepseek2-f16.gguf" 2>/dev/null
# command-r and cohere2 (LayerNorms, parallel block, logit scale; cohere2's windows),
# minimax-m2 (whole-row Q/K norms, partial RoPE, sigmoid routing with a selection bias)
"$BATCHGEN" synth --shape command-r-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/command-r-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape cohere2-tiny "${small[@]}" --dtype q8_0 \
	-o "$out/gguf/cohere2-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape minimax-m2-tiny "${small[@]}" --ffn 32 --dtype q8_0 \
	-o "$out/gguf/minimax-m2-q8_0.gguf" 2>/dev/null
# layers with recurrent state (the harness runs them in slot 0): lfm2 and lfm2moe (short
# convs), qwen35 (gated delta nets), granitehybrid with experts and nemotron_h (Mamba2;
# nemotron_h's attention, FFN-only and Mamba2 layers in 4): 95-200 KiB
"$BATCHGEN" synth --shape lfm2-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/lfm2-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape lfm2moe-tiny "${small[@]}" --dtype q8_0 \
	-o "$out/gguf/lfm2moe-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape qwen35-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/qwen35-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape granitehybrid-moe-tiny "${small[@]}" --experts 4 --experts-used 2 \
	--dtype q8_0 -o "$out/gguf/granitehybrid-moe-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape nemotron_h-tiny "${small[@]}" --layers 4 --dtype f16 \
	-o "$out/gguf/nemotron_h-f16.gguf" 2>/dev/null
# mixtures with a shared expert beside the routed ones: gated by a sigmoid (qwen35moe on
# delta nets, its fused ffn_gate_up_exps, qwen3next's fused ssm_in, qwen2moe), ReLU^2
# (nemotron_h_moe); step35 (per-layer query heads, the head-wise attention gate, clamps, a
# dense layer after the MoE ones)
"$BATCHGEN" synth --shape qwen35moe-tiny "${small[@]}" --dtype q8_0 \
	-o "$out/gguf/qwen35moe-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape qwen35moe-gu-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/qwen35moe-gu-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape qwen3next-ssmin-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/qwen3next-ssmin-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape qwen2moe-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/qwen2moe-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape nemotron_h_moe-tiny "${small[@]}" --layers 4 --dtype q8_0 \
	-o "$out/gguf/nemotron_h_moe-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape step35-tail "${small[@]}" --layers 4 --dtype q8_0 \
	-o "$out/gguf/step35-tail-q8_0.gguf" 2>/dev/null
# multi-section RoPE (qwen2vl, qwen3vl, qwen3vlmoe): rope.dimension_sections whose pairs
# text leaves unturned, n_deepstack_layers
"$BATCHGEN" synth --shape qwen2vl-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/qwen2vl-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape qwen3vl-tiny "${small[@]}" --dtype q8_0 \
	-o "$out/gguf/qwen3vl-q8_0.gguf" 2>/dev/null
"$BATCHGEN" synth --shape qwen3vlmoe-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/qwen3vlmoe-f16.gguf" 2>/dev/null
# ernie4_5 (Q/K/V biases, tied) and ernie4_5-moe (interleave_moe_layer_step, a dense layer,
# then experts with exp_probs_b and a shared expert of its own width)
"$BATCHGEN" synth --shape ernie4_5-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/ernie4_5-f16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape ernie4_5-moe-tiny "${small[@]}" --layers 2 --dtype q8_0 \
	-o "$out/gguf/ernie4_5-moe-q8_0.gguf" 2>/dev/null
# hunyuan-dense, hunyuan-moe (Q/K norms after RoPE; experts feed_forward_length wide, a
# shared expert of its own width)
"$BATCHGEN" synth --shape hunyuan-dense-tiny "${small[@]}" --dtype bf16 \
	-o "$out/gguf/hunyuan-dense-bf16.gguf" 2>/dev/null
"$BATCHGEN" synth --shape hunyuan-moe-tiny "${small[@]}" --dtype f16 \
	-o "$out/gguf/hunyuan-moe-f16.gguf" 2>/dev/null

/usr/bin/python3 - "$out" <<'PY'
import base64, json, struct, sys
out = sys.argv[1]

def s(x):
    b = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(b)) + b

def kv(key, typ, val):
    return s(key) + struct.pack("<I", typ) + val

def arr_str(items):
    return struct.pack("<IQ", 8, len(items)) + b"".join(s(i) for i in items)

def gguf(kvs, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs)) + b"".join(kvs)

def write(name, data):
    open(f"{out}/{name}", "wb").write(data)

# issue 16: merges without a space (defect 3), a key with NUL (defect 4)
write("gguf/issue16-merges.gguf", base64.b64decode(
    "R0dVRgMAAAAAAAAAAAAAAAMAAAAAAAAAFAAAAAAAAAB0b2tlbml6ZXIuZ2dtbC5tb2RlbAgAAAAEAAAAAAAAAGd"
    "wdDIVAAAAAAAAAHRva2VuaXplci5nZ21sLnRva2VucwkAAAAIAAAAAgAAAAAAAAABAAAAAAAAAGEBAAAAAAAAAGI"
    "VAAAAAAAAAHRva2VuaXplci5nZ21sLm1lcmdlcwkAAAAIAAAAAgAAAAAAAAABAAAAAAAAAHgBAAAAAAAAAHk="))
write("gguf/issue16-nul-key.gguf", base64.b64decode(
    "R0dVRgMAAAAAAAAAAAAAAAEAAAAAAAAAAgAAAAAAAAAAawgAAAABAAAAAAAAAHY="))
# a small byte-level BPE vocabulary with merges, special tokens and a pre-tokenizer
toks = ["<|begin|>", "<|end|>"] + [chr(c) for c in range(0x21, 0x7f)] + ["\u0120", "\u0120t", "he", "\u0120the", "in", "er"]
merges = ["\u0120 t", "h e", "\u0120t he", "i n", "e r"]
types = struct.pack("<IQ", 5, len(toks)) + b"".join(struct.pack("<i", 3 if i < 2 else 1) for i in range(len(toks)))
for pre in ("llama-bpe", "gpt-2", "qwen2", "default"):
    write(f"gguf/bpe-{pre}.gguf", gguf([
        kv("tokenizer.ggml.model", 8, s("gpt2")),
        kv("tokenizer.ggml.pre", 8, s(pre)),
        kv("tokenizer.ggml.tokens", 9, arr_str(toks)),
        kv("tokenizer.ggml.token_type", 9, types),
        kv("tokenizer.ggml.merges", 9, arr_str(merges)),
        kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 0)),
        kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 1)),
    ]))
# every value type, nested arrays, version 2
vals = [kv("u8", 0, b"\x01"), kv("i8", 1, b"\xff"), kv("u16", 2, b"\x01\x00"),
        kv("i16", 3, b"\xff\xff"), kv("u32", 4, struct.pack("<I", 7)),
        kv("i32", 5, struct.pack("<i", -7)), kv("f32", 6, struct.pack("<f", 0.5)),
        kv("bool", 7, b"\x01"), kv("str", 8, s("text")),
        kv("u64", 10, struct.pack("<Q", 1 << 40)), kv("i64", 11, struct.pack("<q", -1)),
        kv("f64", 12, struct.pack("<d", 2.5)),
        kv("nested", 9, struct.pack("<IQ", 9, 2) + struct.pack("<IQ", 4, 1) + struct.pack("<I", 3)
           + struct.pack("<IQ", 8, 1) + s("x")),
        kv("general.alignment", 4, struct.pack("<I", 64))]
write("gguf/all-types.gguf", gguf(vals))
write("gguf/v2-empty.gguf", gguf([], version=2))
PY

# ---- request: raw lines (first byte: the harness's mode, see fuzz_request.c) ----
/usr/bin/python3 - "$out" <<'PY'
import base64, json, sys
out = sys.argv[1]
lines = [
    {"id": "a", "prompt": "Once upon a time", "max_tokens": 4},
    {"prompt": "hi", "temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.05, "seed": 3,
     "stop": ["\n", "The"], "stop_token_ids": [2], "logprobs": 2, "prompt_logprobs": 1},
    {"id": 17, "input_ids": [1, 2, 3], "max_tokens": 2, "ignore_eos": True, "add_bos": False},
    {"id": "m", "messages": [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
    {"custom_id": "c1", "method": "POST", "url": "/v1/completions",
     "body": {"model": "x", "prompt": "Hello", "max_tokens": 3, "logprobs": 1, "echo": False}},
    {"custom_id": "c2", "method": "POST", "url": "/v1/chat/completions",
     "body": {"model": "x", "messages": [{"role": "user", "content": "Hi"}], "logprobs": True,
              "top_logprobs": 2, "max_completion_tokens": 5, "n": 1}},
    {"id": "e", "prompt": "", "max_tokens": -1, "temperature": "hot"},
    {"id": "nul", "prompt": "abc\u0000def", "stop": ["x\u0000"]},
    {"id": "big", "prompt": "x", "max_tokens": 2147483647, "repetition_penalty": 1e308},
]
raw = [json.dumps(l).encode() for l in lines] + [
    b"", b"   ", b"{", b"[]", b"null", b'{"id":"x","prompt":"\\ud800"}',
    b'{"id":"dup","id":"dup","prompt":"a"}',
]
# issue 16 defect 1: ids that are not valid UTF-8
raw += base64.b64decode(
    "eyJpZCI6Inj/IiwicHJvbXB0IjoiaGkiLCJtYXhfdG9rZW5zIjoyfQp7ImlkIjoief4iLCJwcm9tcHQiOiJ5byIsIm1heF90b2tlbnMiOjJ9Cg==").split(b"\n")[:2]
n = 0
for mode in (0x00, 0x01, 0x0a, 0x0f):
    for r in raw:
        open(f"{out}/request/raw-{n:03d}", "wb").write(bytes([mode]) + r)
        n += 1
built = [(b"id-1", b"Once upon a time", b"\n"), (b"x\xff", b"caf\xc3\xa9 \xe2\x96\x81", b"The"),
         (b"", b"a\x00b", b""), (b"id-nul", b"a\x00b", b"s\x00t")]  # the last: defect 2
for mode in (0x10, 0x21, 0x3a, 0x3b):
    for i, p, s in built:
        open(f"{out}/request/built-{n:03d}", "wb").write(bytes([mode]) + i.replace(b"\xff", b"") + b"\xff" + p + b"\xff" + s)
        n += 1
PY

# ---- tokenizer: the vocabulary test texts, for each vocabulary slot ----
/usr/bin/python3 - "$out" "$shared" <<'PY'
import glob, sys
out, shared = sys.argv[1], sys.argv[2]
texts = [b"Hello world", b" leading space", b"\xe2\x96\x81escaped", b"<s>[INST] hi [/INST]",
         b"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
         b"\xff\xfe invalid \xc3", b"\t\n\r  \n\n\n", b"1234567890 3.14", "你好世界 🦙".encode()]
for f in sorted(glob.glob(shared + "/vocab/*.inp"))[:4]:
    texts += [t.encode()[:512] for t in open(f, encoding="utf-8").read().split("\n__ggml_vocab_test__\n") if t][:12]
n = 0
for slot in range(10):
    for t in texts:
        sel = slot | (32 if b"<" in t else 0) | (16 if n % 3 == 0 else 0)
        open(f"{out}/tokenizer/{n:04d}", "wb").write(bytes([sel]) + t)
        n += 1
PY

# ---- chat: template texts, then (role byte, content) pieces ----
/usr/bin/python3 - "$out" "$shared" <<'PY'
import glob, sys
out, shared = sys.argv[1], sys.argv[2]
conv = b"\x00You are kind.\xff\x01Hi there\xff\x02Hello!\xff\x01\xc3\xa9 and \xe2\x96\x81\xff"
tmpls = [b"chatml", b"llama3", b"<|im_start|>", b"[INST]", b""]
tmpls += [open(f, "rb").read()[:4096].replace(b"\xff", b"") for f in sorted(glob.glob(shared + "/chat_templates/*.jinja"))[:40]]
for n, t in enumerate(tmpls):
    sel = (0x80 if n % 2 else 0) | (0x40 if n % 3 else 0)
    open(f"{out}/chat/{n:03d}", "wb").write(bytes([sel]) + t + b"\xff" + bytes([n]) + conv)
PY

# ---- resume: output files as batchgen writes them, whole, torn, foreign ----
printf '{"id":"r1","prompt":"Once","max_tokens":2}\n{"id":"r2","prompt":"Lily","max_tokens":2}\n{"id":"r1","prompt":"x","max_tokens":1}\n{"prompt":""}\n' >"$out/resume/in.jsonl"
"$BATCHGEN" --device cpu -q -i "$out/resume/in.jsonl" -o "$out/resume/native" 2>/dev/null || true
printf '{"custom_id":"c1","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":"Hi","max_tokens":2}}\n' |
	"$BATCHGEN" --device cpu -q -o "$out/resume/openai" 2>/dev/null || true
rm "$out/resume/in.jsonl"
head -c -7 "$out/resume/native" >"$out/resume/torn"
printf 'not json\n{"id":"z"}\n' >"$out/resume/foreign"
printf '' >"$out/resume/empty"

# ---- grammar: GBNF texts, then a candidate string ----
/usr/bin/python3 - "$out" <<'PY'
import sys
out = sys.argv[1]
g = [
    (r'root ::= "a" [b-d]* ("x" | "yz"){1,3}', "abbyz"),
    ("root ::= object\nobject ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\"\n"
     "value ::= object | string | \"true\" | \"null\" | [0-9]+\nstring ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\nws ::= [ \\t\\n]*", '{"a": true, "b": 12}'),
    ("root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"", "(1+2)-3"),
    ("root ::= [\\u00e9\\U0001F999]+ . # comment", "\u00e9\U0001F999x"),
    ("root ::=", ""),
    ("root ::= a\na ::= \"x\"? a?", "xx"),
    ("root ::= (\"ab\" | [^a]){0,2000}", "abab"),
]
for n, (t, c) in enumerate(g):
    open(f"{out}/grammar/{n:02d}", "wb").write(t.encode().decode("unicode_escape").encode("utf-8") + b"\xff" + c.encode("utf-8"))
PY

# ---- jinja: real templates, then (optionally) 0xff and a JSON object of variables ----
/usr/bin/python3 - "$out" "$shared" <<'PY'
import glob, sys
out, shared = sys.argv[1], sys.argv[2]
tmpls = [b"{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}",
         b"{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
         b"{% macro f(x) %}{{ x ~ x }}{% endmacro %}{{ f('a') | upper }}{{ [1, 2] | tojson }}"]
tmpls += [open(f, "rb").read().replace(b"\xff", b"") for f in sorted(glob.glob(shared + "/chat_templates/*.jinja"))]
vars_ = b'{"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": false, "x": [1, "a", null]}'
for n, t in enumerate(tmpls):
    open(f"{out}/jinja/{n:03d}", "wb").write(t if n % 2 else t + b"\xff" + vars_)
# the hand-written probes of fuzz/jinja_probes.txt, with a small conversation
conv = (b'{"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": "  Hello w\xc3\xb6rld  "}],'
        b' "add_generation_prompt": true, "tools": null, "bos_token": "<s>"}')
for n, t in enumerate(open("fuzz/jinja_probes.txt", "rb").read().split(b"\n#---\n")):
    open(f"{out}/jinja/probe{n:03d}", "wb").write(t + b"\xff" + conv)
PY

# ---- regex and schema: the test file's patterns and schemas, then walk bytes ----
/usr/bin/python3 - "$out" tests/test_json_schema.c <<'PY'
import json, re, sys
out, src = sys.argv[1], open(sys.argv[2]).read()
def c_strings(block):
    """The C string literals of block (adjacent ones joined), unescaped."""
    res, cur, prev_end = [], None, None
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', block):
        lit = m.group(1).encode().decode("unicode_escape")
        if cur is not None and block[prev_end:m.start()].strip() == "":
            cur += lit
        else:
            if cur is not None:
                res.append(cur)
            cur = lit
        prev_end = m.end()
    if cur is not None:
        res.append(cur)
    return res
def table(name):
    m = re.search(name + r"\[\] = \{(.*?)\n\s*\};", src, re.S)
    return m.group(1) if m else ""
walk = bytes(range(1, 255, 3))
schemas = [t for t in c_strings(table("SCHEMAS")) if t.startswith("{")]
good = []
for t in schemas:
    try:
        json.loads(t)
        good.append(t)
    except ValueError:
        pass
# refused ones and hostile ones: deep nesting, $ref cycles, huge bounds
good += ['{"type": "string", "not": {}}', '{"$ref": "#"}',
         '{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}',
         '{"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807}',
         '{"type": "array", "items": {"type": "array", "items": {"type": "array", "minItems": 2000}}}',
         '{"type": "string", "pattern": "(a*)*"}', '{"type": "number", "exclusiveMinimum": 0.5}',
         '{"type": ["object", "array"], "properties": {"a": {}}, "items": {"type": "null"}}']
for n, t in enumerate(good):
    open(f"{out}/schema/{n:03d}", "wb").write(t.encode() + b"\xff" + walk)
pats = []
for blk in ("REGEXES", "BAD"):
    b = table(blk)
    for line in b.split("\n"):
        # REGEXES: the pattern first on its line; BAD: pattern, message pairs
        pats += c_strings(line)[:1] if blk == "REGEXES" else c_strings(line)[::2]
pats += ["(((a)|b)*)*", "[]a-]x\\v\\0", "a.b??c+?", "((a{2000}){2000}){2000}", "(" * 70 + ")" * 70,
         "[\\d-z]+", "x{2}|y{0,}|"]
n = 0
for p in pats:
    for mode in (0, 1):
        open(f"{out}/regex/{n:03d}", "wb").write(bytes([mode]) + p.encode() + b"\xff" + walk)
        n += 1
PY

for d in gguf request tokenizer chat resume grammar jinja regex schema; do
	printf '%s: %d seeds, %d bytes\n' "$d" "$(ls "$out/$d" | wc -l)" "$(cat "$out/$d"/* | wc -c)"
done
