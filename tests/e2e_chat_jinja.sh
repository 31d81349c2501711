#!/usr/bin/env bash
# e2e_chat_jinja: chat requests rendered by the Jinja interpreter, end to end.
#  - With real vocabularies (../shared/vocab) and their templates (the one stored in the
#    GGUF, or the model's published template from ../shared/chat_templates): the prompt
#    token ids of a chat request (`tokenize --chat`, the request parser `run` uses) equal
#    the tokenization (special tokens parsed, no BOS added) of Python jinja2's rendering
#    (tests/jinja_oracle.py --render), and the rendered text is byte-identical.
#  - Template errors and hostile templates give that request an error naming the template
#    line, in bounded time, in `run` too; --chat-date fixes strftime_now.
. tests/check.sh
. tests/need_jq.sh
PY=/usr/bin/python3
DATE=2026-01-15

USER_ONLY='{"messages":[{"role":"user","content":"What is 2+2? Answer briefly."}]}'
SYS_MULTI='{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi there"},{"role":"assistant","content":"Hello! How can I help?"},{"role":"user","content":"Tell me a joke about ünïcödé."}]}'
TOOLS='{"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather.","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}],"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\": \"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","name":"get_weather","content":"22 C"},{"role":"user","content":"Thanks"}]}'

# compare VOCAB TEMPLATE(file or "gguf") REQUEST LABEL
compare() {
	local vocab=$1 tmpl=$2 req=$3 label=$4 targs=()
	[ "$tmpl" != gguf ] && targs=(--chat-template-file "$tmpl")
	$PY tests/jinja_oracle.py --render "$tmpl" "$vocab" "$req" $DATE >"$TMP/ref.txt" 2>"$TMP/py.err" ||
		{ check "$label: jinja2 renders it" false; return; }
	"$BATCHGEN" tokenize -m "$vocab" --chat --print-prompt "${targs[@]}" --chat-date $DATE "$req" >"$TMP/ours.txt"
	check "$label: rendering byte-identical to jinja2" cmp -s "$TMP/ref.txt" "$TMP/ours.txt"
	local ref ours
	ref=$("$BATCHGEN" tokenize -m "$vocab" --no-bos --parse-special -f "$TMP/ref.txt")
	ours=$("$BATCHGEN" tokenize -m "$vocab" --chat "${targs[@]}" --chat-date $DATE "$req")
	check_eq "$label: prompt ids = tokenization of jinja2's rendering" "$ours" "$ref"
	check "$label: a non-trivial prompt" test "$(echo "$ours" | tr -cd , | wc -c)" -gt 5
}

V=$(shared vocab) && T=$(shared chat_templates) && {
	for v in qwen2 qwen35 phi-3 gemma-4; do
		compare "$V/ggml-vocab-$v.gguf" gguf "$USER_ONLY" "$v (GGUF template), user"
		compare "$V/ggml-vocab-$v.gguf" gguf "$SYS_MULTI" "$v (GGUF template), multi-turn"
	done
	compare "$V/ggml-vocab-llama-bpe.gguf" "$T/meta-llama-Llama-3.1-8B-Instruct.jinja" "$SYS_MULTI" "llama-3.1"
	compare "$V/ggml-vocab-llama-bpe.gguf" "$T/meta-llama-Llama-3.1-8B-Instruct.jinja" "$TOOLS" "llama-3.1 tools"
	compare "$V/ggml-vocab-qwen2.gguf" "$T/Qwen-Qwen2.5-7B-Instruct.jinja" "$USER_ONLY" "qwen2.5"
	compare "$V/ggml-vocab-qwen2.gguf" "$T/Qwen-Qwen2.5-7B-Instruct.jinja" "$TOOLS" "qwen2.5 tools"
	compare "$V/ggml-vocab-qwen35.gguf" "$T/Qwen3.5-4B.jinja" "$TOOLS" "qwen3.5 tools"
	compare "$V/ggml-vocab-gemma-4.gguf" "$T/google-gemma-4-31B-it.jinja" "$TOOLS" "gemma-4 tools"
	compare "$V/ggml-vocab-phi-3.gguf" "$T/microsoft-Phi-3.5-mini-instruct.jinja" "$SYS_MULTI" "phi-3.5"
	compare "$V/ggml-vocab-deepseek-llm.gguf" "$T/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja" "$SYS_MULTI" "r1-distill"

	# --chat-date fixes strftime_now (Llama 3.2 writes "Today Date: 15 Jan 2026")
	"$BATCHGEN" tokenize -m "$V/ggml-vocab-llama-bpe.gguf" --chat --print-prompt --chat-date 2026-01-15 \
		--chat-template-file "$T/meta-llama-Llama-3.2-3B-Instruct.jinja" "$USER_ONLY" >"$TMP/d.txt"
	check "--chat-date reaches strftime_now" grep -q "Today Date: 15 Jan 2026" "$TMP/d.txt"
	"$BATCHGEN" tokenize -m "$V/ggml-vocab-llama-bpe.gguf" --chat --chat-date 2026-02-30 "$USER_ONLY" 2>"$TMP/e.txt"
	check_eq "a bad --chat-date is a usage error" "$?" 2

	# template errors name the line; hostile templates stop in bounded time
	printf 'line 1\n{{ raise_exception("no system role") }}\n' >"$TMP/raise.jinja"
	"$BATCHGEN" tokenize -m "$V/ggml-vocab-qwen2.gguf" --chat --chat-template-file "$TMP/raise.jinja" "$USER_ONLY" 2>"$TMP/e.txt"
	check_eq "raise_exception fails the request" "$?" 1
	check "the error names the template line" grep -q "line 2: raise_exception: no system role" "$TMP/e.txt"
	for h in '{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}' \
		'{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}' \
		'{% for i in range(1000000) %}{{ "x" * 100000 }}{% endfor %}'; do
		printf '%s' "$h" >"$TMP/h.jinja"
		start=$(date +%s)
		timeout 60 "$BATCHGEN" tokenize -m "$V/ggml-vocab-qwen2.gguf" --chat --chat-template-file "$TMP/h.jinja" "$USER_ONLY" 2>"$TMP/e.txt"
		rc=$?
		check_eq "hostile template is a request error: $h" "$rc" 1
		check "hostile template stops quickly ($(($(date +%s) - start)) s)" test $(($(date +%s) - start)) -le 60
		check "hostile template's error is named: $(head -c 160 "$TMP/e.txt")" grep -qE "steps|nested|exceeds|memory" "$TMP/e.txt"
	done
}

# `run`: a template error is that request's error line, the run goes on
need_jq && {
	printf '%s' '{% if messages[0].content == "boom" %}{{ raise_exception("boom") }}{% endif %}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>' >"$TMP/t.jinja"
	printf '%s\n' '{"id":"a","messages":[{"role":"user","content":"boom"}],"max_tokens":2}' \
		'{"id":"b","messages":[{"role":"developer","content":"hi"}],"max_tokens":2}' >"$TMP/in.jsonl"
	"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/in.jsonl" -o "$TMP/out.jsonl" --chat-template-file "$TMP/t.jinja"
	check_eq "run: exit 1 (one request failed)" "$?" 1
	check_eq "run: the failing request's error" "$(jq -r 'select(.id == "a") | .error.message' "$TMP/out.jsonl")" \
		"messages: chat template line 1: raise_exception: boom"
	check_eq "run: the developer role passes through" "$(jq -r 'select(.id == "b") | .error' "$TMP/out.jsonl")" null
	# a user turn without content is refused (it rendered as an empty turn); an assistant's
	# (tool calls only) is not
	printf '%s\n' '{"id":"u","messages":[{"role":"user"}],"max_tokens":2}' \
		'{"id":"t","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null},{"role":"user","content":"y"}],"max_tokens":2}' >"$TMP/nc.jsonl"
	"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/nc.jsonl" -o "$TMP/nc.out" --chat-template-file "$TMP/t.jinja"
	check_eq "run: a user turn without content is the request's error" \
		"$(jq -r 'select(.id == "u") | .error.message' "$TMP/nc.out")" 'messages: messages[0] (role "user") has no content'
	check_eq "run: an assistant turn without content renders" "$(jq -r 'select(.id == "t") | .error' "$TMP/nc.out")" null
}
summary
