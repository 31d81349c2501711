#!/usr/bin/env bash
# e2e_progress: what a run shows on stderr.
#  - stderr is a file: plain "progress:" lines every --progress-interval seconds, a
#    summary at the end, no carriage returns; stdout still holds only results;
#  - stderr is a terminal (under script(1)): one line redrawn in place with '\r';
#  - --quiet: nothing on stderr.
. tests/check.sh
. tests/need_jq.sh

in=$TMP/in.jsonl
awk 'BEGIN { for (i = 1; i <= 600; i++)
	printf "{\"id\":\"p%d\",\"prompt\":\"line %d\",\"max_tokens\":4,\"ignore_eos\":true}\n", i, i }' >"$in"

# a file: the total is known; with a 10 ms interval the run draws some lines
"$BATCHGEN" -m synthetic:builtin -i "$in" -o "$TMP/out.jsonl" --progress-interval 0.01 --report "$TMP/report.json" \
	2>"$TMP/err.txt"
check_eq "run exits 0" "$?" 0
check "progress lines count requests of the known total" grep -qE '^progress: [0-9]+/600 \(' "$TMP/err.txt"
check "progress lines have rates, KV use and ETA" \
	grep -qE '^progress: .*req/s, in [0-9]+ tok/s, out [0-9]+ tok/s, .*KV [0-9]+%, ETA ' "$TMP/err.txt"
check "no carriage return when stderr is a file" bash -c '! grep -q $'"'"'\r'"'"' "$1"' _ "$TMP/err.txt"
check "a summary at the end" grep -qE '600 requests \(600 ok, 0 failed' "$TMP/err.txt"
check_eq "results on the output" "$(wc -l <"$TMP/out.jsonl" | tr -d ' ')" 600

# periodic: input arrives in four bursts 0.4 s apart; with a 0.1 s interval there must
# be a line per gap at least, and no more than one per interval of the run's wall time
# (~2 s alone; a loaded machine and the sanitized build stretch it, and the lines with it)
t0=$(date +%s.%N)
{
	for b in 0 1 2 3; do
		sed -n "$((b * 50 + 1)),$((b * 50 + 50))p" "$in"
		sleep 0.4
	done
} | "$BATCHGEN" -m synthetic:builtin -o "$TMP/burst.jsonl" --max-queued 4 --progress-interval 0.1 \
	--stats "$TMP/stats.jsonl" 2>"$TMP/err4.txt"
t1=$(date +%s.%N)
n_prog=$(grep -c '^progress: ' "$TMP/err4.txt")
n_iter=$(wc -l <"$TMP/stats.jsonl" | tr -d ' ')
max_prog=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) / 0.1 + 2 }')
echo "bursts: $n_prog progress lines over $n_iter iterations, at most $max_prog (one per 0.1 s of the run, + 2)"
check "a progress line per pause at least" test "$n_prog" -ge 3
check "not more than a line per interval" test "$n_prog" -le "$max_prog"
check "not a line per iteration" test "$n_prog" -lt "$n_iter"
check "unknown total: a count without /N" grep -qE '^progress: [0-9]+ done' "$TMP/err4.txt"
check_eq "bursts: every result" "$(wc -l <"$TMP/burst.jsonl" | tr -d ' ')" 200

# --report: a JSON summary that agrees with the results
if need_jq; then
	out_tokens=$(jq -s 'map(.usage.completion_tokens) | add' "$TMP/out.jsonl")
	in_tokens=$(jq -s 'map(.usage.prompt_tokens) | add' "$TMP/out.jsonl")
	check_eq "report: requests" "$(jq -c '.requests' "$TMP/report.json")" '{"ok":600,"failed":0,"skipped":0}'
	check_eq "report: output tokens = sum of the results'" "$(jq '.tokens.output' "$TMP/report.json")" "$out_tokens"
	check_eq "report: input tokens = sum of the results'" "$(jq '.tokens.input' "$TMP/report.json")" "$in_tokens"
	check_eq "report: percentiles ordered and within [min, max]" \
		"$(jq '[.ttft_ms, .e2e_ms] | map(.p50 > 0 and .p50 <= .p90 and .p90 <= .p99 and .p99 <= .max) | all' "$TMP/report.json")" true
	check_eq "report: median TTFT near the results' median (1%)" \
		"$(jq --slurpfile r "$TMP/report.json" -s 'map(.metrics.ttft_ms) | sort | .[(length + 1) / 2 - 1 | floor] as $m | ($r[0].ttft_ms.p50 - $m | fabs) <= 0.011 * $m + 0.001' "$TMP/out.jsonl")" true
	check_eq "report: throughput = tokens / wall time" \
		"$(jq '(.throughput.output_tokens_per_s * .wall_s - .tokens.output | fabs) < 1' "$TMP/report.json")" true
	check_eq "report: KV peak within the pool" \
		"$(jq '.kv_cache.peak_used_blocks > 0 and .kv_cache.peak_used_blocks <= .kv_cache.max_num_blocks' "$TMP/report.json")" true
fi

# a long interval: no progress line at all for a short run, but the summary
head -n 5 "$in" | "$BATCHGEN" -m synthetic:builtin --progress-interval 1000 >/dev/null 2>"$TMP/err2.txt"
check_eq "no progress line before the interval" "$(grep -c '^progress: ' "$TMP/err2.txt")" 0
check "summary still there" grep -q 'requests (5 ok' "$TMP/err2.txt"

# --quiet
head -n 5 "$in" | "$BATCHGEN" -m synthetic:builtin -q --progress-interval 0.01 >/dev/null 2>"$TMP/err3.txt"
check_eq "--quiet: nothing on stderr" "$(wc -c <"$TMP/err3.txt" | tr -d ' ')" 0

# a terminal: script(1) gives the command a pty for stderr
if command -v script >/dev/null; then
	head -n 300 "$in" >"$TMP/in300.jsonl"
	script -qfec "$BATCHGEN -m synthetic:builtin -i $TMP/in300.jsonl -o $TMP/tty.jsonl" /dev/null >"$TMP/tty.txt" 2>&1 </dev/null
	check "terminal: the line is redrawn with CR" grep -q $'\r' "$TMP/tty.txt"
	check_eq "terminal: no plain progress lines" "$(grep -c 'progress: ' "$TMP/tty.txt")" 0
	check "terminal: the summary" grep -q '300 requests' "$TMP/tty.txt"
	check_eq "terminal: results still complete" "$(wc -l <"$TMP/tty.jsonl" | tr -d ' ')" 300
else
	echo "SKIP: script(1) not found; the terminal display is not checked" >&2
	n_skip=$((n_skip + 1))
fi

summary
