#!/usr/bin/env bash
# e2e_overlap: --overlap on gives the result lines of --overlap off (timings excepted), on
# the CPU backend: stop strings, EOS, max_tokens, log-probs and prompt log-probs, n > 1,
# a beam search and a JSON constraint, under no-evict and under max-util in a pool small
# enough to preempt (engine.c, "Overlap"; tests/test_invariance.c covers every policy).
. tests/check.sh
. tests/need_jq.sh
need_jq || { summary; exit; }

cat testdata/prompts.jsonl - >"$TMP/in.jsonl" <<'JSONL'
{"id":"a","prompt":"Once upon a time","max_tokens":40,"temperature":0,"stop":["."]}
{"id":"b","prompt":"The cat sat on","max_tokens":30,"temperature":0.8,"seed":5,"logprobs":2}
{"id":"c","prompt":"hello","max_tokens":20,"temperature":0.9,"top_p":0.9,"seed":3,"n":3}
{"id":"d","prompt":"Lily and Ben","max_tokens":12,"beam_width":3,"n":2}
{"id":"e","prompt":"Tom had a red ball","max_tokens":50,"temperature":0.7,"seed":9,"prompt_logprobs":1}
{"id":"f","prompt":"One day","max_tokens":64,"temperature":0,"response_format":{"type":"json_object"}}
{"id":"g","prompt":"The sun was","max_tokens":60,"temperature":1.0,"seed":11}
JSONL
for setup in "--policy no-evict" "--policy max-util --kv-tokens 160 --block-size 8"; do
	for o in off on; do
		# shellcheck disable=SC2086
		"$BATCHGEN" -q -i "$TMP/in.jsonl" -o "$TMP/$o.jsonl" --device cpu --overlap $o $setup
		check "overlap $o ($setup) runs" test $? -eq 0
		jq -c 'del(.metrics)' "$TMP/$o.jsonl" >"$TMP/$o.lines"
	done
	check "overlap on and off give the same results ($setup)" cmp -s "$TMP/off.lines" "$TMP/on.lines"
	check_eq "every line has a result ($setup)" "$(wc -l <"$TMP/on.lines")" "$(wc -l <"$TMP/in.jsonl")"
done
check "max-util preempted" test "$(jq -s '[.[].metrics.preemptions] | add' "$TMP/on.jsonl")" -gt 0
summary
