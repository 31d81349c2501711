#!/usr/bin/env bash
# e2e_tokenize: `batchgen tokenize` / `detokenize` on the vocab-only GGUF files and the
# small models. Expected ids come from ../shared/vocab/README.md and
# ../shared/models/README.md (llama.cpp's output), not from batchgen.
set -u
. tests/check.sh

once="Once upon a time"

# expect NAME VOCAB_REL WANT ARGS... : tokenize must print exactly WANT
expect() {
	local name=$1 rel=$2 want=$3
	shift 3
	local p
	p=$(shared "$rel") || return 0
	local got
	got=$("$BATCHGEN" tokenize -m "$p" "$@" 2>"$TMP/err")
	check_eq "$name" "$got" "$want"
}

v=vocab/ggml-vocab
# no BOS (README: "Once upon a time", without BOS)
expect spm-nobos $v-llama-spm.gguf "[9038, 2501, 263, 931]" --no-bos "$once"
expect bpe-nobos $v-llama-bpe.gguf "[12805, 5304, 264, 892]" --no-bos "$once"
expect qwen2-nobos $v-qwen2.gguf "[12522, 5193, 264, 882]" --no-bos "$once"
expect gpt2-nobos $v-gpt-2.gguf "[7454, 2402, 257, 640]" --no-bos "$once"
expect deepseek-nobos $v-deepseek-llm.gguf "[10492, 2065, 245, 766]" --no-bos "$once"
# default BOS policy (README table "llama.cpp adds BOS")
expect spm-default $v-llama-spm.gguf "[1, 9038, 2501, 263, 931]" "$once"
expect bpe-default $v-llama-bpe.gguf "[128000, 12805, 5304, 264, 892]" "$once"
expect qwen2-default $v-qwen2.gguf "[12522, 5193, 264, 882]" "$once"
expect gpt2-default $v-gpt-2.gguf "[7454, 2402, 257, 640]" "$once"
expect deepseek-default $v-deepseek-llm.gguf "[100000, 10492, 2065, 245, 766]" "$once"
expect gpt2-bos $v-gpt-2.gguf "[50256, 7454, 2402, 257, 640]" --bos "$once"
# the small models (models/README.md)
expect stories-bos models/stories260K.gguf "[1, 403, 407, 261, 378]" "$once"
expect stories-nobos models/stories260K.gguf "[403, 407, 261, 378]" --no-bos "$once"
expect tiny-random models/llama-2-tiny-random.gguf "[1, 9038, 2501, 263, 931]" "$once"
# special tokens: <|begin_of_text|> is 128000 only with --parse-special
expect bpe-special $v-llama-bpe.gguf "[128000, 12805, 5304, 264, 892]" --no-bos \
	--parse-special "<|begin_of_text|>$once"
if p=$(shared $v-llama-bpe.gguf); then
	got=$("$BATCHGEN" tokenize -m "$p" --no-bos "<|begin_of_text|>$once")
	check bpe-special-plain test "${got#\[128000}" = "$got"
	# and the text comes back from detokenize, byte for byte
	back=$("$BATCHGEN" detokenize -m "$p" "$got")
	check_eq bpe-special-roundtrip "$back" "<|begin_of_text|>$once"
fi
# a file and stdin give the same ids as the argument
if p=$(shared $v-llama-spm.gguf); then
	printf '%s' "$once" >"$TMP/once.txt"
	check_eq spm-file "$("$BATCHGEN" tokenize -m "$p" --no-bos -f "$TMP/once.txt")" \
		"[9038, 2501, 263, 931]"
	check_eq spm-stdin "$(printf '%s' "$once" | "$BATCHGEN" tokenize -m "$p" --no-bos -f -)" \
		"[9038, 2501, 263, 931]"
	# detokenize (and tokenize --detokenize) strip the SentencePiece leading space
	check_eq spm-detok "$("$BATCHGEN" detokenize -m "$p" "[1, 9038, 2501, 263, 931]")" "$once"
	check_eq spm-detok2 "$("$BATCHGEN" tokenize --detokenize -m "$p" "[9038, 2501, 263, 931]")" \
		"$once"
	check_eq spm-detok-keep \
		"$("$BATCHGEN" detokenize -m "$p" --keep-leading-space "[9038, 2501]")" " Once upon"
	echo '[9038, 2501, 263, 931]' >"$TMP/ids.json"
	check_eq spm-detok-file "$("$BATCHGEN" detokenize -m "$p" -f "$TMP/ids.json")" "$once"
	# multi-line text with a newline survives the round trip (trailing newline kept by x)
	text=$'line one\n\tline two  x'
	ids=$("$BATCHGEN" tokenize -m "$p" "$text")
	check_eq spm-roundtrip "$("$BATCHGEN" detokenize -m "$p" "$ids")" "$text"
fi

# exit codes: usage 2, bad model 3 with one line "batchgen: FILE: message"
"$BATCHGEN" tokenize --help >"$TMP/help" 2>&1
check help-rc test $? -eq 0
check help-text grep -q -- --parse-special "$TMP/help"
"$BATCHGEN" tokenize "two" "texts" >/dev/null 2>&1
check usage-rc test $? -eq 2
# without -m: the built-in model (stories260K, embedded), as `run` reads -m
if p=$(shared models/stories260K.gguf); then
	check_eq builtin-tokenize "$("$BATCHGEN" tokenize "Once upon a time")" \
		"$("$BATCHGEN" tokenize -m "$p" "Once upon a time")"
	check_eq builtin-detokenize "$("$BATCHGEN" detokenize "[1, 403, 407, 261, 378]")" \
		"$("$BATCHGEN" detokenize -m "$p" "[1, 403, 407, 261, 378]")"
fi
"$BATCHGEN" tokenize -m synthetic:tiny "x" >/dev/null 2>"$TMP/err"
check synthetic-rc test $? -eq 3
check synthetic-msg grep -q "synthetic model has no tokenizer file" "$TMP/err"
"$BATCHGEN" tokenize -m x --frobnicate y >/dev/null 2>&1
check usage-badopt test $? -eq 2
"$BATCHGEN" tokenize -m "$TMP/missing.gguf" "x" >/dev/null 2>"$TMP/err"
check missing-rc test $? -eq 3
check_eq missing-lines "$(wc -l <"$TMP/err" | tr -d ' ')" 1
check missing-msg grep -q "^batchgen: $TMP/missing.gguf: " "$TMP/err"
printf 'not a gguf file at all' >"$TMP/bad.gguf"
"$BATCHGEN" tokenize -m "$TMP/bad.gguf" "x" >/dev/null 2>"$TMP/err"
check bad-rc test $? -eq 3
check bad-msg grep -q "^batchgen: $TMP/bad.gguf: " "$TMP/err"
if p=$(shared vocab/ggml-vocab-bert-bge.gguf); then
	"$BATCHGEN" tokenize -m "$p" "x" >/dev/null 2>"$TMP/err"
	check bert-unsupported-rc test $? -eq 3
	check bert-unsupported-msg grep -q "unsupported tokenizer model 'bert'" "$TMP/err"
fi
# the kimi-k2 pre-tokenizer (Kimi-K2's files) against llama.cpp, which runs its own code
# for it (core/text/tok_split.c): no reference file exists, so Qwen2's vocabulary with its
# pre-tokenizer renamed (a byte-level BPE with many Han words), on llama.cpp's test strings
# and lines where Han meets other letters, marks, digits and contractions
. tests/need_llamacpp.sh
if p=$(shared $v-qwen2.gguf) && need_llamacpp "the kimi-k2 pre-tokenizer against llama.cpp"; then
	/usr/bin/python3 - "$p" "$TMP/kimi.gguf" "$p.inp" "$TMP/kimi.txt" <<'PY'
import struct, sys
src, dst, inp, out = sys.argv[1:5]
d = open(src, "rb").read()
key = b"tokenizer.ggml.pre"
i = d.index(key) + len(key)  # then the type (8: string), its length and bytes
assert struct.unpack_from("<I", d, i)[0] == 8
n = struct.unpack_from("<Q", d, i + 4)[0]
new = b"kimi-k2"
open(dst, "wb").write(d[:i + 4] + struct.pack("<Q", len(new)) + new + d[i + 12 + n:])
chunks = [c for c in open(inp, encoding="utf-8").read().split("\n__ggml_vocab_test__\n") if c]
chunks += ["Hello世界, it's 中文test", "HTTPServer's API 我們的 don'T 你'S", "x\U00020000y \u3005\u3006\u3007 \u2e80\u2f00",
           "cafe\u0301 na\u0308ive 12345678 \u0663\u0664\u0665\u0666 \uf900\ufa6e", " 中 \n\n 中文\t英文ABC's\r\n",
           "'hello 'Ll 'RE'VE \U0002b740\U0002ebe0\U0002f800abc", "時々人々 一〇〇 日本語の文章です",
           "नमस्ते दुनिया सामाजिक", "สวัสดีครับ ภาษาไทย", "مَرْحَبًا بِالْعَالَم", "Ünïcödé naïve façade"]
open(out, "w", encoding="utf-8").write("\x1e".join(chunks))
PY
	node bench/llamacpp_tokenize.mjs "$TMP/kimi.gguf" "$TMP/kimi.txt" ids >"$TMP/kimi.llama" \
		2>"$TMP/kimi.err" || cat "$TMP/kimi.err" >&2
	n=0 bad=""
	while IFS= read -r -d $'\x1e' c || [ -n "$c" ]; do
		n=$((n + 1))
		got=$(printf '%s' "$c" | "$BATCHGEN" tokenize -m "$TMP/kimi.gguf" --no-bos -f - | tr -d ' ')
		want=$(sed -n "${n}p" "$TMP/kimi.llama" | tr -d ' ')
		[ "$got" = "$want" ] || bad+=" $n"
	done <"$TMP/kimi.txt"
	check_eq "kimi-k2: llama.cpp tokenized the $n strings" "$(wc -l <"$TMP/kimi.llama")" "$n"
	check_eq "kimi-k2: llama.cpp's ids for each string (the strings that differ)" "$bad" ""
	# and the split is not qwen2's: a space does not lead a Han run (" 中文" is one qwen2 word)
	check "kimi-k2: not qwen2's split" test "$("$BATCHGEN" tokenize -m "$TMP/kimi.gguf" \
		--no-bos "a 中文")" != "$("$BATCHGEN" tokenize -m "$p" --no-bos "a 中文")"
fi
if p=$(shared $v-gpt-2.gguf); then
	"$BATCHGEN" detokenize -m "$p" "[1, 50257]" >/dev/null 2>&1
	check detok-range-rc test $? -eq 2
	"$BATCHGEN" detokenize -m "$p" "[1," >/dev/null 2>&1
	check detok-json-rc test $? -eq 2
fi

summary
