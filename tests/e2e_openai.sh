#!/usr/bin/env bash
# e2e_openai: an OpenAI batch input file (completions and chat completions) gives one
# line per request in OpenAI's batch output form: {id, custom_id, response: {status_code,
# request_id, body}, error}, custom_ids in input order, a text_completion or
# chat.completion body with usage that adds up; a bad request gets an error status and
# an error body.
. tests/check.sh
. tests/need_jq.sh
# Runs whose outputs are compared use --device cpu: a request's output is independent of
# its batch bitwise on the CPU reference only (DESIGN.md §3), and these runs batch differently.

need_jq || { summary; exit; }

in=$TMP/batch.jsonl
for i in $(seq 1 12); do
	if [ $((i % 3)) -eq 0 ]; then
		printf '{"custom_id":"chat-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"tiny","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say %d."}],"max_tokens":5,"temperature":0}}\n' $i $i
	else
		printf '{"custom_id":"cmpl-%d","method":"POST","url":"/v1/completions","body":{"model":"tiny","prompt":"Count to %d:","max_tokens":%d,"temperature":0,"logprobs":2}}\n' $i $i $((1 + i % 4))
	fi
done >"$in"
# a request OpenAI would refuse: no prompt
printf '{"custom_id":"bad-13","method":"POST","url":"/v1/completions","body":{"model":"tiny","max_tokens":3}}\n' >>"$in"

"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/out.jsonl" --chat-template chatml
check_eq "exit 1 (one bad request)" "$?" 1
check_eq "one line per request" "$(wc -l <"$TMP/out.jsonl" | tr -d ' ')" 13
check "every line is JSON" jq -e . "$TMP/out.jsonl" >/dev/null
check "custom_ids in input order" cmp -s <(jq -r .custom_id "$TMP/out.jsonl") <(jq -r .custom_id "$in")
check_eq "batch output shape" \
	"$(jq -r '[has("id"), has("custom_id"), has("response"), has("error")] | all' "$TMP/out.jsonl" | sort -u)" true
check_eq "ids are unique" "$(jq -r .id "$TMP/out.jsonl" | sort | uniq -d | wc -l | tr -d ' ')" 0

ok='select(.custom_id != "bad-13")'
check_eq "status 200 and no error for good requests" \
	"$(jq -r "$ok"' | (.response.status_code == 200 and .error == null)' "$TMP/out.jsonl" | sort -u)" true
check_eq "completions are text_completion objects" \
	"$(jq -r 'select(.custom_id | startswith("cmpl")) | .response.body | (.object == "text_completion" and (.choices[0].text | type) == "string" and (.choices[0].finish_reason | IN("stop", "length")))' "$TMP/out.jsonl" | sort -u)" true
check_eq "chats are chat.completion objects" \
	"$(jq -r 'select(.custom_id | startswith("chat")) | .response.body | (.object == "chat.completion" and .choices[0].message.role == "assistant" and (.choices[0].message.content | type) == "string")' "$TMP/out.jsonl" | sort -u)" true
check_eq "usage adds up" \
	"$(jq -r "$ok"' | .response.body.usage | (.total_tokens == .prompt_tokens + .completion_tokens and .prompt_tokens > 0)' "$TMP/out.jsonl" | sort -u)" true
check_eq "completion max_tokens respected" \
	"$(jq -r 'select(.custom_id | startswith("cmpl")) | .response.body.usage.completion_tokens <= 4' "$TMP/out.jsonl" | sort -u)" true
check_eq "completion logprobs in OpenAI's legacy schema" \
	"$(jq -r 'select(.custom_id | startswith("cmpl")) | .response.body.choices[0].logprobs | ((.tokens | length) == (.token_logprobs | length) and (.top_logprobs | length) == (.tokens | length))' "$TMP/out.jsonl" | sort -u)" true
check_eq "model echoed" "$(jq -r "$ok"' | .response.body.model' "$TMP/out.jsonl" | sort -u)" tiny
# as in OpenAI's batch output, a request the API refuses is a response with an error
# status and an error body (the top-level error is for requests that never ran)
check_eq "the bad request has an error" \
	"$(jq -r 'select(.custom_id == "bad-13") | ((.response.status_code >= 400 and (.response.body.error.message | length) > 0) or (.error != null and (.error.message | length) > 0))' "$TMP/out.jsonl")" true

# greedy completions equal the native form of the same prompts
jq -c 'select(.url == "/v1/completions" and .body.prompt != null) | {id: .custom_id, prompt: .body.prompt, max_tokens: .body.max_tokens, temperature: 0}' "$in" >"$TMP/native.jsonl"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/native.jsonl" -o "$TMP/native.out"
check "OpenAI and native forms generate the same text" cmp -s \
	<(jq -r 'select(.custom_id | startswith("cmpl")) | .response.body.choices[0].text' "$TMP/out.jsonl") \
	<(jq -r .text "$TMP/native.out")

# without a chat template (the built-in model has none unless it says so): chat requests
# fail, completions still run
"$BATCHGEN" -m synthetic:builtin -q -i "$in" -o "$TMP/nochat.jsonl" 2>/dev/null
rc=$?
if jq -e 'select(.custom_id | startswith("chat")) | .response.status_code != 200' "$TMP/nochat.jsonl" >/dev/null; then
	check_eq "no template: exit 1" "$rc" 1
	check_eq "no template: completions still fine" \
		"$(jq -r 'select(.custom_id | startswith("cmpl")) | .response.status_code == 200' "$TMP/nochat.jsonl" | sort -u)" true
fi

# an unknown template name is a usage error
"$BATCHGEN" -m synthetic:builtin -q -i "$in" --chat-template no-such-template >/dev/null 2>"$TMP/t.err"
check_eq "unknown template: exit 2" "$?" 2
check "unknown template: lists the known ones" grep -q chatml "$TMP/t.err"

# ---- OpenAI batch semantics (issue 13) --------------------------------------------------
# defaults as OpenAI defines them: no max_tokens -> to the end of the context, no
# temperature -> 1; native lines keep max_tokens 16 and greedy decoding
printf '%s\n' \
	'{"custom_id":"end","url":"/v1/completions","body":{"prompt":"Once upon a time","ignore_eos":true,"temperature":0}}' \
	'{"custom_id":"t1","url":"/v1/completions","body":{"prompt":"Once upon a time","max_tokens":24,"seed":5}}' \
	>"$TMP/sem.jsonl"
"$BATCHGEN" --device cpu -q --max-seq-len 40 -i "$TMP/sem.jsonl" -o "$TMP/sem.out"
check_eq "no max_tokens: to the end of the context" \
	"$(jq -r 'select(.custom_id == "end") | .response.body | "\(.usage.total_tokens) \(.choices[0].finish_reason)"' "$TMP/sem.out")" \
	"40 length"
printf '%s\n' '{"id":"n1","prompt":"Once upon a time","max_tokens":24,"seed":5,"temperature":1}' \
	'{"id":"n0","prompt":"Once upon a time","max_tokens":24,"seed":5}' \
	'{"id":"n16","prompt":"Once upon a time","ignore_eos":true}' >"$TMP/semn.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/semn.jsonl" -o "$TMP/semn.out"
t1=$(jq -r 'select(.custom_id == "t1") | .response.body.choices[0].text' "$TMP/sem.out")
check_eq "no temperature: samples at 1 (as a native line at temperature 1)" "$t1" \
	"$(jq -r 'select(.id == "n1") | .text' "$TMP/semn.out")"
check "no temperature: not greedy" test "$t1" != "$(jq -r 'select(.id == "n0") | .text' "$TMP/semn.out")"
check_eq "native lines keep max_tokens 16" \
	"$(jq -r 'select(.id == "n16") | .usage.completion_tokens' "$TMP/semn.out")" 16
"$BATCHGEN" --device cpu -q --max-tokens 3 -i "$TMP/sem.jsonl" -o "$TMP/sem3.out"
check_eq "a --max-tokens given applies to OpenAI lines too" \
	"$(jq -r 'select(.custom_id == "end") | .response.body.usage.completion_tokens' "$TMP/sem3.out")" 3

# lines without a usable custom_id, blank lines and non-objects: answered in the OpenAI
# shape with "custom_id": null (never another line's id), one result per input line, and
# --resume and merge keep the accounting
{
	printf '\n' # a leading blank line: the file's form is known from the next line
	printf '%s\n' '{"custom_id":"1","url":"/v1/completions","body":{"prompt":"a","max_tokens":2,"temperature":0}}' \
		'{"url":"/v1/completions","body":{"prompt":"b","max_tokens":2}}' \
		'[1, 2]' \
		'{"custom_id":"3","url":"/v1/completions","body":{"prompt":"c","max_tokens":2,"temperature":0}}' \
		'' \
		'{"custom_id":"s","url":"/v1/completions","body":{"prompt":"d","stream":true}}' \
		'{"custom_id":"2","url":"/v1/completions","body":{"prompt":"e","max_tokens":2,"temperature":0}}'
} >"$TMP/mix.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/mix.jsonl" -o "$TMP/mix.out"
check_eq "mixed file: one result per input line" "$(wc -l <"$TMP/mix.out" | tr -d ' ')" 8
check_eq "mixed file: every result in the OpenAI shape" \
	"$(jq -r '[has("id"), has("custom_id"), has("response"), has("error")] | all' "$TMP/mix.out" | sort -u)" true
check_eq "mixed file: custom_id null where the line has none" \
	"$(jq -r '.custom_id' "$TMP/mix.out" | tr '\n' ,)" "null,1,null,null,3,null,s,2,"
check_eq "mixed file: their errors name their lines" \
	"$(jq -r 'select(.custom_id == null) | "\(.response.status_code) \(.response.body.error.line)"' "$TMP/mix.out" | tr '\n' ,)" \
	"400 1,400 3,400 4,400 6,"
check_eq "stream: true is refused" \
	"$(jq -r 'select(.custom_id == "s") | .response.body.error.code' "$TMP/mix.out")" unsupported
normo() { jq -c 'del(.id, .response.request_id, .response.body.id, .response.body.created)' "$1"; }
head -n 5 "$TMP/mix.out" >"$TMP/mixr.out"
for i in 1 2; do
	"$BATCHGEN" --device cpu -q -i "$TMP/mix.jsonl" -o "$TMP/mixr.out" --resume
	check_eq "mixed file: resume $i keeps one result per line" "$(wc -l <"$TMP/mixr.out" | tr -d ' ')" 8
done
check "mixed file: resumed results equal a whole run" cmp -s <(normo "$TMP/mixr.out") <(normo "$TMP/mix.out")
for k in 0 1; do
	"$BATCHGEN" --device cpu -q -i "$TMP/mix.jsonl" --shard $k/2 -o "$TMP/mix.$k"
done
"$BATCHGEN" merge -i "$TMP/mix.jsonl" -o "$TMP/mix.merged" "$TMP/mix.0" "$TMP/mix.1"
check "mixed file: two shards merged equal a whole run" cmp -s <(normo "$TMP/mix.merged") <(normo "$TMP/mix.out")

# a model other than the loaded one: exactly one warning for the whole file
"$BATCHGEN" --device cpu -i "$in" -o "$TMP/w.out" --chat-template chatml 2>"$TMP/w.err"
check_eq "another model: one warning" "$(grep -c 'is not the loaded model' "$TMP/w.err")" 1

# NUL inside a prompt or a stop string is refused, never cut at (issue 16); an escaped
# backslash before u0000 is text
printf '%s\n' '{"id":"p","prompt":"abc\u0000def","max_tokens":2}' \
	'{"id":"s","prompt":"abc","stop":["x\u0000y"],"max_tokens":2}' \
	'{"custom_id":"c","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"\u0000hi"}],"max_tokens":2}}' \
	'{"id":"ok","prompt":"abc\\u0000def","max_tokens":2}' >"$TMP/nul.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/nul.jsonl" -o "$TMP/nul.out" --chat-template chatml
check_eq "NUL: refused, naming the field" \
	"$(jq -r '(.error.message // .response.body.error.message // "ok") | split(" ")[0]' "$TMP/nul.out" | tr '\n' ,)" \
	"prompt,stop[0],body.messages[0].content,ok,"

# a raw NUL byte (not the escape) is invalid JSON (RFC 8259 strings hold no control
# characters): the line is refused as such, never cut at the NUL (cJSON copies the byte,
# and the C string ended there: "ab<NUL>cd" ran as "ab"); native and OpenAI lines
printf '{"id":"r","prompt":"ab\000cd","max_tokens":2}\n{"id":"ok","prompt":"ab","max_tokens":2}\n{"custom_id":"c","url":"/v1/completions","body":{"prompt":"ab\000cd","max_tokens":2}}\n' \
	>"$TMP/rawnul.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/rawnul.jsonl" -o "$TMP/rawnul.out"
check_eq "raw NUL byte: exit 1" "$?" 1
check_eq "raw NUL byte: invalid_json, the others run" \
	"$(jq -r '(.error.code // .response.body.error.code // .error // "ok") | tostring' "$TMP/rawnul.out" | tr '\n' ,)" \
	"invalid_json,ok,invalid_json,"
check "raw NUL byte: the message names its place" \
	grep -q 'NUL byte at byte 23 ' "$TMP/rawnul.out"

# a field given twice: refused naming it (cJSON took the first value, Python's json, jq
# and so vLLM the last: "max_tokens":2,"max_tokens":5 ran 2 tokens here, 5 there); native
# lines, OpenAI lines and their body; a nested object (logit_bias) is not checked
printf '%s\n' '{"id":"a","prompt":"x","max_tokens":2,"max_tokens":5}' \
	'{"custom_id":"c","custom_id":"d","url":"/v1/completions","body":{"prompt":"x","max_tokens":2}}' \
	'{"custom_id":"e","url":"/v1/completions","body":{"prompt":"x","max_tokens":2,"temperature":0,"temperature":1}}' \
	'{"id":"ok","prompt":"x","max_tokens":2,"logit_bias":{"5":1}}' >"$TMP/dupkey.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/dupkey.jsonl" -o "$TMP/dupkey.out"
check_eq "field given twice: exit 1" "$?" 1
check_eq "field given twice: refused, naming it" \
	"$(jq -r '(.error.message // .response.body.error.message // "ok") | split(" ")[0]' "$TMP/dupkey.out" | tr '\n' ,)" \
	"max_tokens,custom_id,body.temperature,ok,"

summary
