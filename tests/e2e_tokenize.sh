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
if p=$(shared $v-gpt-2.gguf); then
	"$BATCHGEN" detokenize -m "$p" "[1, 50257]" >/dev/null 2>&1
	check detok-range-rc test $? -eq 2
	"$BATCHGEN" detokenize -m "$p" "[1," >/dev/null 2>&1
	check detok-json-rc test $? -eq 2
fi

summary
