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

summary
