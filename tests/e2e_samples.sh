#!/usr/bin/env bash
# e2e_samples: n > 1 through the binary on the CPU backend. A request with n samples gives
# one line with a choices array (ERRATA), and sample i equals the same request run alone
# with seed + i, bitwise (ids, text, cum_logprob), under no-evict and under max-util in a
# pool small enough to preempt; OpenAI bodies get choices[index]. The same with constraints
# (grammar, json_schema, regex, choice and the logit controls).
. tests/check.sh
. tests/need_jq.sh
need_jq || { summary; exit; }

in=$TMP/in.jsonl
sep=$TMP/sep.jsonl
: >"$in"
: >"$sep"
for i in 1 2 3 4 5 6; do
	n=$((1 + i % 4))
	printf '{"id":"s%d","prompt":"Tale %d: once there was","max_tokens":%d,"temperature":0.9,"seed":%d,"n":%d,"logprobs":0}\n' \
		$i $i $((4 + i)) $((100 * i)) $n >>"$in"
	for k in $(seq 0 $((n - 1))); do
		printf '{"id":"s%d.%d","prompt":"Tale %d: once there was","max_tokens":%d,"temperature":0.9,"seed":%d,"logprobs":0}\n' \
			$i $k $i $((4 + i)) $((100 * i + k)) >>"$sep"
	done
done
"$BATCHGEN" --device cpu -q --block-size 4 -i "$sep" -o "$TMP/sep.out"
check_eq "separate requests: exit 0" "$?" 0
# expected: sample lines grouped per request, in sample order
jq -c '{id: (.id | split(".")[0]), text, token_ids, finish_reason, cum_logprob, logprobs}' "$TMP/sep.out" >"$TMP/want"
for pol in no-evict max-util; do
	"$BATCHGEN" --device cpu -q --block-size 4 --kv-tokens 96 --policy $pol -i "$in" -o "$TMP/$pol.out" \
		--stats "$TMP/$pol.stats"
	check_eq "$pol: exit 0" "$?" 0
	check_eq "$pol: one line per input line" "$(wc -l <"$TMP/$pol.out" | tr -d ' ')" 6
	jq -c '. as $r | if .choices then .choices[] | {id: $r.id, text, token_ids, finish_reason, cum_logprob, logprobs} else {id, text, token_ids, finish_reason, cum_logprob, logprobs} end' \
		"$TMP/$pol.out" >"$TMP/got.$pol"
	check "$pol: sample i = the request alone with seed + i" cmp -s "$TMP/want" "$TMP/got.$pol"
	check_eq "$pol: choices indexed 0..n-1, completion tokens summed" \
		"$(jq -r 'select(.choices) | ([.choices[].index] == [range(.choices | length)]) and (.usage.completion_tokens == ([.choices[].token_ids | length] | add))' "$TMP/$pol.out" | sort -u)" true
done
check "max-util preempted in the small pool" test "$(jq -s 'map(.inflight.num_paused_requests) | max' "$TMP/max-util.stats")" -gt 0

# ---- n > 1 with constraints (issue 15): every sample has its own grammar state, forked
# from the root's at its first token; sample i still equals the request alone with
# seed + i, and a choice sample is one of the choices
/usr/bin/python3 - "$TMP/con.jsonl" "$TMP/con_sep.jsonl" <<'PY'
import json, sys
cons = [
    {"json_schema": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["name", "n"]}},
    {"regex": "[A-Z][a-z]{2,5}( [a-z]{1,4}){0,2}\\."},
    {"choice": ["red fox", "blue whale", "green turtle"]},
    {"grammar": "root ::= (\"yes\" | \"no\") (\", \" (\"yes\" | \"no\"))*", "logit_bias": {"13": 2.5}},
    {"bad_words": ["the", "a"], "min_tokens": 6, "logit_bias": {"29": -100}},
]
with open(sys.argv[1], "w") as f, open(sys.argv[2], "w") as g:
    for i, c in enumerate(cons):
        base = {"prompt": "Tale %d: once there was" % i, "max_tokens": 24, "temperature": 0.9, "logprobs": 0}
        f.write(json.dumps(dict(base, id="c%d" % i, seed=10 * i, n=3, **c)) + "\n")
        for k in range(3):
            g.write(json.dumps(dict(base, id="c%d.%d" % (i, k), seed=10 * i + k, **c)) + "\n")
PY
"$BATCHGEN" --device cpu -q --block-size 4 -i "$TMP/con_sep.jsonl" -o "$TMP/con_sep.out"
check_eq "constrained, separate requests: exit 0" "$?" 0
jq -c '{id: (.id | split(".")[0]), text, token_ids, finish_reason, cum_logprob, logprobs}' "$TMP/con_sep.out" >"$TMP/con_want"
for pol in no-evict max-util; do
	"$BATCHGEN" --device cpu -q --block-size 4 --kv-tokens 96 --policy $pol -i "$TMP/con.jsonl" \
		-o "$TMP/con_$pol.out"
	check_eq "constrained, n = 3, $pol: exit 0" "$?" 0
	jq -c '. as $r | .choices[] | {id: $r.id, text, token_ids, finish_reason, cum_logprob, logprobs}' \
		"$TMP/con_$pol.out" >"$TMP/con_got.$pol"
	check "constrained, n = 3, $pol: sample i = the request alone with seed + i" \
		cmp -s "$TMP/con_want" "$TMP/con_got.$pol"
done
check_eq "constrained, n = 3: the choice samples are choices" \
	"$(jq -r 'select(.id == "c2") | .choices[] | select(.finish_reason != "length") | .text' "$TMP/con_no-evict.out" | grep -cvxE 'red fox|blue whale|green turtle')" 0
check "constrained, n = 3: the samples differ" \
	test "$(jq -r '.choices[].text' "$TMP/con_no-evict.out" | sort -u | wc -l)" -gt 8

printf '{"custom_id":"c1","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":"Tale 9","max_tokens":4,"temperature":0.8,"n":3}}\n' >"$TMP/oa.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/oa.jsonl" -o "$TMP/oa.out"
check_eq "openai: exit 0" "$?" 0
check_eq "openai: choices[index]" "$(jq -c '[.response.body.choices[].index]' "$TMP/oa.out")" "[0,1,2]"
summary
