#!/usr/bin/env bash
# e2e_prefix: block reuse (prefix caching) through the binary. Requests sharing a long
# system prompt return the same results with the cache (default) and without it
# (--no-prefix-cache); with it, later requests report cached_tokens and the stats and the
# report count reused blocks consistently; without it every reused_blocks is 0. A repeated
# prompt run one request at a time reuses exactly its full blocks before its last token.
# Requests admitted in the same wave share the prefix too (the later ones wait for it).
# A model with recurrent state (qwen35-tiny) reuses blocks through state checkpoints, with
# the same results, and not at all with --state-checkpoints 0.
. tests/check.sh
. tests/need_jq.sh
need_jq || { summary; exit; }

sys="You are a careful assistant who answers questions about small animals, the weather and simple sums in one short sentence."
in=$TMP/in.jsonl
for i in $(seq 1 24); do
	printf '{"id":"q%d","prompt":"%s Question %d: what is %d plus %d?","max_tokens":6,"temperature":0.7,"seed":%d}\n' \
		$i "$sys" $i $i $((i * 3)) $i
done >"$in"
common=(--device cpu -q --block-size 8 --max-batch-size 4 -i "$in")
"$BATCHGEN" "${common[@]}" -o "$TMP/on.jsonl" --stats "$TMP/on.stats" --report "$TMP/on.rep"
check_eq "cache on: exit 0" "$?" 0
"$BATCHGEN" "${common[@]}" -o "$TMP/off.jsonl" --stats "$TMP/off.stats" --report "$TMP/off.rep" \
	--no-prefix-cache
check_eq "cache off: exit 0" "$?" 0
res='{id, text, token_ids, finish_reason, cum_logprob}'
check "the same results with and without the cache" \
	cmp -s <(jq -c "$res" "$TMP/on.jsonl") <(jq -c "$res" "$TMP/off.jsonl")
on_cached=$(jq -s 'map(.usage.cached_tokens) | add' "$TMP/on.jsonl")
check "cache on: later requests take cached tokens ($on_cached)" test "$on_cached" -gt 0
check_eq "cached tokens are whole blocks below the prompt length" \
	"$(jq -r '.usage | (.cached_tokens % 8 == 0 and .cached_tokens < .prompt_tokens)' "$TMP/on.jsonl" | sort -u)" true
check_eq "cache off: no cached tokens" "$(jq -s 'map(.usage.cached_tokens) | add' "$TMP/off.jsonl")" 0
check_eq "cache off: every reused_blocks is 0" \
	"$(jq -r '.kv_cache.reused_blocks' "$TMP/off.stats" | sort -u)" 0
st_reused=$(jq -s 'map(.kv_cache.reused_blocks) | add' "$TMP/on.stats")
st_missed=$(jq -s 'map(.kv_cache.missed_blocks) | add' "$TMP/on.stats")
check_eq "report's reused_blocks = the stats' sum" "$(jq .kv_cache.reused_blocks "$TMP/on.rep")" "$st_reused"
check_eq "report's missed_blocks = the stats' sum" "$(jq .kv_cache.missed_blocks "$TMP/on.rep")" "$st_missed"
check_eq "reused blocks * 8 = cached tokens" "$((st_reused * 8))" "$on_cached"
check_eq "reused + missed = the prompts' blocks" "$((st_reused + st_missed))" \
	"$(jq -s 'map((.usage.prompt_tokens + 7) / 8 | floor) | add' "$TMP/on.jsonl")"
check_eq "hit rate per iteration = reused / (reused + missed)" \
	"$(jq -r '.kv_cache | if .reused_blocks + .missed_blocks > 0 then ((.cache_hit_rate - .reused_blocks / (.reused_blocks + .missed_blocks)) | fabs < 1e-3) else .cache_hit_rate == 0 end' "$TMP/on.stats" | sort -u)" true
check_eq "report: input tokens are the same" "$(jq .tokens.input "$TMP/on.rep")" "$(jq .tokens.input "$TMP/off.rep")"

# first wave: all 24 admitted together (room for all): the first computes the system
# prompt, the others wait for its blocks and take them; without that wait none would
"$BATCHGEN" --device cpu -q --block-size 8 --max-batch-size 32 -i "$in" -o "$TMP/fw.jsonl" \
	--report "$TMP/fw.rep"
check_eq "first wave: exit 0" "$?" 0
check "first wave: the same results as without the cache" \
	cmp -s <(jq -c "$res" "$TMP/fw.jsonl") <(jq -c "$res" "$TMP/off.jsonl")
check_eq "first wave: the first request computes its prompt" \
	"$(jq -s '.[0].usage.cached_tokens' "$TMP/fw.jsonl")" 0
check_eq "first wave: each of the 23 others takes cached tokens" \
	"$(jq -s '.[1:] | map(select(.usage.cached_tokens > 0)) | length' "$TMP/fw.jsonl")" 23

# one at a time, the same OpenAI request twice: the second takes floor((P - 1) / 8) blocks
body='{"model":"tiny","prompt":"'"$sys"'","max_tokens":3,"temperature":0}'
for i in 1 2; do
	printf '{"custom_id":"c%d","method":"POST","url":"/v1/completions","body":%s}\n' $i "$body"
done >"$TMP/oa.jsonl"
"$BATCHGEN" --device cpu -q --block-size 8 --max-batch-size 1 -i "$TMP/oa.jsonl" -o "$TMP/oa.out"
check_eq "openai: exit 0" "$?" 0
P=$(jq -s '.[1].response.body.usage.prompt_tokens' "$TMP/oa.out")
check_eq "openai: the first request computes everything" \
	"$(jq -s '.[0].response.body.usage.prompt_tokens_details.cached_tokens' "$TMP/oa.out")" 0
check_eq "openai: the second reuses floor((P - 1) / 8) blocks (P = $P)" \
	"$(jq -s '.[1].response.body.usage.prompt_tokens_details.cached_tokens' "$TMP/oa.out")" \
	"$(((P - 1) / 8 * 8))"
check_eq "openai: the same text" "$(jq -c .response.body.choices[0].text "$TMP/oa.out" | sort -u | wc -l | tr -d ' ')" 1

# recurrent state: the first wave on qwen35-tiny (16 requests): the first request
# checkpoints its state after the 11 blocks the prompts share, the others take them
hy=(--model synthetic:qwen35-tiny --device cpu -q --block-size 8 --max-batch-size 32)
head -16 "$in" | jq -c '. + {logprobs: 2}' >"$TMP/hy.in"
"$BATCHGEN" "${hy[@]}" -i "$TMP/hy.in" -o "$TMP/hy_on.jsonl" --report "$TMP/hy_on.rep"
check_eq "recurrent: exit 0" "$?" 0
"$BATCHGEN" "${hy[@]}" -i "$TMP/hy.in" -o "$TMP/hy_off.jsonl" --no-prefix-cache
check_eq "recurrent, cache off: exit 0" "$?" 0
"$BATCHGEN" "${hy[@]}" -i "$TMP/hy.in" -o "$TMP/hy_k0.jsonl" --report "$TMP/hy_k0.rep" \
	--state-checkpoints 0
check_eq "recurrent, no checkpoints: exit 0" "$?" 0
hres='del(.usage, .metrics)'
check "recurrent: the same results (tokens, log-probs) with and without the cache" \
	cmp -s <(jq -c "$hres" "$TMP/hy_on.jsonl") <(jq -c "$hres" "$TMP/hy_off.jsonl")
check "recurrent: the same results without checkpoints" \
	cmp -s <(jq -c "$hres" "$TMP/hy_k0.jsonl") <(jq -c "$hres" "$TMP/hy_off.jsonl")
check_eq "recurrent: each of the 15 later requests takes 88 cached tokens" \
	"$(jq -s '.[1:] | map(select(.usage.cached_tokens == 88)) | length' "$TMP/hy_on.jsonl")" 15
check_eq "recurrent: the report's reused_blocks (15 x 11)" \
	"$(jq .kv_cache.reused_blocks "$TMP/hy_on.rep")" 165
check_eq "recurrent, no checkpoints: no reuse" "$(jq .kv_cache.reused_blocks "$TMP/hy_k0.rep")" 0

summary
