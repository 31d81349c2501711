#!/usr/bin/env bash
# e2e_adaptive: --policy adaptive runs to the same results as no-evict (bitwise on the CPU)
# and its stats lines carry the AIMD token budget, which moves by +100 (a request did not
# fit, KV use under 90%) and -1000 per preemption, within [block size, 8 * pool tokens].
# max-util's preemptions show in kv_cache.swap_out_bytes / swap_in_bytes (--preempt swap)
# or recomputed_tokens (recompute), per iteration and in the report.
. tests/check.sh
. tests/need_jq.sh
need_jq || { summary; exit; }

in=$TMP/in.jsonl
for i in $(seq 1 40); do
	printf '{"id":"a%d","prompt":"Story %d begins","max_tokens":%d,"ignore_eos":true}\n' $i $i $((8 + i % 13))
done >"$in"
common=(--device cpu -q --block-size 4 --kv-tokens 160 -i "$in")
"$BATCHGEN" "${common[@]}" -o "$TMP/ne.jsonl"
check_eq "no-evict: exit 0" "$?" 0
"$BATCHGEN" "${common[@]}" -o "$TMP/ad.jsonl" --policy adaptive --stats "$TMP/ad.stats"
check_eq "adaptive: exit 0" "$?" 0
res='{id, text, token_ids, finish_reason}'
check "adaptive returns no-evict's results" \
	cmp -s <(jq -c "$res" "$TMP/ne.jsonl") <(jq -c "$res" "$TMP/ad.jsonl")
check_eq "every stats line has the budget" \
	"$(jq -r '.adaptive | (.token_budget >= 4 and .token_budget <= 8 * 160 and .promised_tokens >= 0)' "$TMP/ad.stats" | sort -u)" true
check_eq "the budget starts at the pool's size and grows by 100s before any preemption" \
	"$(jq -s -r '.[0].adaptive.token_budget | (. - 160) % 100 == 0 and . >= 160' "$TMP/ad.stats")" true
check "the budget moved" test "$(jq -r .adaptive.token_budget "$TMP/ad.stats" | sort -u | wc -l)" -gt 1

# preemption traffic: max-util in the same pool preempts; recompute re-feeds tokens, swap
# copies blocks out and back; the report's totals are the stats' sums
for pm in recompute swap; do
	"$BATCHGEN" "${common[@]}" -o "$TMP/mu.jsonl" --policy max-util --preempt $pm \
		--stats "$TMP/mu.stats" --report "$TMP/mu.rep"
	check_eq "max-util $pm: exit 0" "$?" 0
	check "max-util $pm returns no-evict's results" \
		cmp -s <(jq -c "$res" "$TMP/ne.jsonl") <(jq -c "$res" "$TMP/mu.jsonl")
	check "max-util $pm: preemptions happened" test "$(jq .preemptions "$TMP/mu.rep")" -gt 0
	for k in swap_out_bytes swap_in_bytes recomputed_tokens; do
		check_eq "max-util $pm: report's $k = the stats' sum" "$(jq .kv_cache.$k "$TMP/mu.rep")" \
			"$(jq -s "map(.kv_cache.$k) | add" "$TMP/mu.stats")"
	done
	out=$(jq .kv_cache.swap_out_bytes "$TMP/mu.rep")
	rec=$(jq .kv_cache.recomputed_tokens "$TMP/mu.rep")
	if [ $pm = swap ]; then
		check "swap: bytes swapped out ($out), all back in, nothing recomputed ($rec)" \
			test "$out" -gt 0 -a "$(jq .kv_cache.swap_in_bytes "$TMP/mu.rep")" = "$out" -a "$rec" = 0
	else
		check "recompute: tokens recomputed ($rec), nothing swapped ($out)" \
			test "$rec" -gt 0 -a "$out" = 0
	fi
done
check_eq "no-evict would not preempt: its traffic is 0" \
	"$(jq -r '.kv_cache | [.swap_out_bytes, .swap_in_bytes, .recomputed_tokens] | add' "$TMP/ad.stats" | sort -u | head -1)" 0
summary
