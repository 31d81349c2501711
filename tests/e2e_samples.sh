#!/usr/bin/env bash
# e2e_samples: n > 1 through the binary on the CPU backend. A request with n samples gives
# one line with a choices array (ERRATA), and sample i equals the same request run alone
# with seed + i, bitwise (ids, text, cum_logprob), under no-evict and under max-util in a
# pool small enough to preempt; OpenAI bodies get choices[index].
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

printf '{"custom_id":"c1","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":"Tale 9","max_tokens":4,"temperature":0.8,"n":3}}\n' >"$TMP/oa.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/oa.jsonl" -o "$TMP/oa.out"
check_eq "openai: exit 0" "$?" 0
check_eq "openai: choices[index]" "$(jq -c '[.response.body.choices[].index]' "$TMP/oa.out")" "[0,1,2]"
summary
