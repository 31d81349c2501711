#!/usr/bin/env bash
# e2e_bench: `batchgen bench` on synthetic:builtin (the old default). Two runs of one workload do the same
# work (token counts, shape and content checksums); the report is complete and consistent
# with --stats; --baseline passes a matching report, fails a regressed one with status 4,
# and refuses (status 2) a report of another workload or configuration. No timing is
# asserted: the regressed baseline claims 1000x the measured speed and the passing one
# 1/1000 of it, so that the verdicts hold on any machine however noisy.
source tests/check.sh

W=24/8x6
json() { # json FILE EXPR: prints a Python expression over the report `r`
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
edit() { # edit IN OUT EXPR: applies a Python statement to `r`
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(r,open(sys.argv[2],"w"))' "$1" "$2" "$3"
}

"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --warmup 2 --report "$TMP/a.json" \
	--stats "$TMP/a.stats" 2>"$TMP/a.err"
check_eq "first run exit status" "$?" 0
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --warmup 0 --report "$TMP/b.json" -q 2>"$TMP/b.err"
check_eq "second run exit status" "$?" 0
check_eq "quiet: nothing on stderr" "$(wc -c <"$TMP/b.err" | tr -d ' ')" 0
check "table on stderr" grep -q 'output tok/s' "$TMP/a.err"

if [ -s "$TMP/a.json" ] && [ -s "$TMP/b.json" ]; then
	# the same work: 6 requests x 24 prompt tokens, 8 output tokens each
	check_eq "output tokens" "$(json "$TMP/a.json" 'r["results"]["output_tokens"]')" 48
	check_eq "prompt tokens" "$(json "$TMP/a.json" 'r["results"]["prompt_tokens"]')" 144
	check_eq "same output tokens" "$(json "$TMP/b.json" 'r["results"]["output_tokens"]')" \
		"$(json "$TMP/a.json" 'r["results"]["output_tokens"]')"
	check_eq "same shapes" "$(json "$TMP/b.json" 'r["workload"]["shape_checksum"]')" \
		"$(json "$TMP/a.json" 'r["workload"]["shape_checksum"]')"
	check_eq "same prompts" "$(json "$TMP/b.json" 'r["workload"]["content_checksum"]')" \
		"$(json "$TMP/a.json" 'r["workload"]["content_checksum"]')"
	check_eq "no failures" "$(json "$TMP/a.json" 'r["results"]["failed"]')" 0
	check_eq "spec" "$(json "$TMP/a.json" 'r["workload"]["spec"]')" "$W"
	check_eq "requests" "$(json "$TMP/a.json" 'r["results"]["requests"]')" 6
	# the shape checksum of 6 x (24, 8): FNV-1a 64 over little-endian u32 pairs, computed here
	want=$(python3 -c '
h=0xcbf29ce484222325
for _ in range(6):
    for v in (24, 8):
        for b in range(4):
            h ^= (v >> (8*b)) & 0xff; h = (h * 0x100000001b3) % 2**64
print("%016x" % h)')
	check_eq "shape checksum" "$(json "$TMP/a.json" 'r["workload"]["shape_checksum"]')" "$want"
	# internal consistency of the numbers
	check_eq "tok/s = tokens / wall" "$(json "$TMP/a.json" \
		'abs(r["results"]["output_tok_s"] * r["results"]["wall_s"] - 48) < 1e-6 * 48')" True
	check_eq "percentiles ordered" "$(json "$TMP/a.json" \
		'all(r["results"][k]["p50"] <= r["results"][k]["p90"] <= r["results"][k]["p99"] for k in ("ttft_ms","tpot_ms","e2e_ms"))')" True
	check_eq "ttft <= e2e" "$(json "$TMP/a.json" \
		'0 <= r["results"]["ttft_ms"]["p50"] <= r["results"]["e2e_ms"]["p50"]')" True
	check_eq "stats lines = iterations" "$(wc -l <"$TMP/a.stats" | tr -d ' ')" \
		"$(json "$TMP/a.json" 'r["results"]["iterations"]')"
	check_eq "peak KV within the pool" "$(json "$TMP/a.json" \
		'0 < r["results"]["peak_kv_blocks"] <= r["results"]["kv_blocks_total"]')" True
	check_eq "batch size in range" "$(json "$TMP/a.json" \
		'1 <= r["results"]["mean_batch_size"] <= 6')" True
	check_eq "commit recorded" "$(json "$TMP/a.json" 'len(r["batchgen"]["commit"]) > 0')" True
	check_eq "device recorded" "$(json "$TMP/a.json" 'r["config"]["device"]["backend"]')" cpu

	# --baseline: a report claiming 1000x the speed is a regression (4) ...
	edit "$TMP/a.json" "$TMP/fast.json" 'r["results"]["output_tok_s"] *= 1000'
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --baseline "$TMP/fast.json" \
		--max-regression 5 -q 2>"$TMP/fast.err"
	check_eq "regression exit status" "$?" 4
	check "regression message" grep -q REGRESSION "$TMP/fast.err"
	# ... one claiming 1/1000 of it passes, and so does the report itself with a 99% margin
	edit "$TMP/a.json" "$TMP/slow.json" 'r["results"]["output_tok_s"] /= 1000'
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --baseline "$TMP/slow.json" -q 2>"$TMP/slow.err"
	check_eq "matching baseline exit status" "$?" 0
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --baseline "$TMP/a.json" --max-regression 99 \
		-q 2>/dev/null
	check_eq "own report as baseline" "$?" 0
	# ... another workload, count or configuration is refused (2), with a sentence
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload 24/4x6 --baseline "$TMP/a.json" -q \
		--report "$TMP/refused.json" 2>"$TMP/w.err"
	check_eq "other workload refused" "$?" 2
	check "other workload message" grep -q 'different workload' "$TMP/w.err"
	check "refused before running: no report" test ! -e "$TMP/refused.json"
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload 24/8x5 --baseline "$TMP/a.json" -q 2>/dev/null
	check_eq "other count refused" "$?" 2
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --block-size 16 --baseline "$TMP/a.json" \
		-q 2>"$TMP/c.err"
	check_eq "other configuration refused" "$?" 2
	check "configuration message names the option" grep -q 'block_size' "$TMP/c.err"
	# --overlap joins the configuration only when given, so that a default run still
	# compares with a report made before the option existed
	check_eq "default overlap not in the configuration" \
		"$(json "$TMP/a.json" '"overlap" in r["config"]')" False
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --overlap on --baseline "$TMP/a.json" \
		-q 2>"$TMP/o.err"
	check_eq "--overlap on vs a default baseline refused" "$?" 2
	check "overlap message names the option" grep -q 'overlap' "$TMP/o.err"
	edit "$TMP/a.json" "$TMP/other.json" 'r["schema"] = "something-else"'
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --baseline "$TMP/other.json" -q 2>/dev/null
	check_eq "not a bench report refused" "$?" 2
fi

# --requests wins over the spec's count
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload 24/8x2 --requests 3 --warmup 0 -q --report "$TMP/n.json"
check_eq "--requests exit status" "$?" 0
if [ -s "$TMP/n.json" ]; then
	check_eq "--requests spec" "$(json "$TMP/n.json" 'r["workload"]["spec"]')" 24/8x3
	check_eq "--requests tokens" "$(json "$TMP/n.json" 'r["results"]["output_tokens"]')" 24
fi

# usage errors: nothing runs
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload F9 2>"$TMP/u.err"
check_eq "unknown workload" "$?" 2
check "unknown workload message" grep -q 'unknown workload' "$TMP/u.err"
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload B1 2>"$TMP/b1.err"
check_eq "B1 refused on the CPU" "$?" 2
check "B1 message" grep -q 'CUDA only' "$TMP/b1.err"
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W --baseline "$TMP/missing.json" 2>/dev/null
check_eq "missing baseline" "$?" 2
# --stats on a full disk: not a silent success (the table and the report were fine, the
# statistics lost): exit 2 naming the file, as a report that cannot be written
if [ -w /dev/full ]; then
	"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W -q --stats /dev/full 2>"$TMP/full.err"
	check_eq "--stats on a full disk: exit 2" "$?" 2
	check "--stats on a full disk: says so" grep -q 'cannot write --stats /dev/full' "$TMP/full.err"
fi

# --report - is standard output (the table goes to stderr): bench ... --report - | jq
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W -q --report - >"$TMP/rep.stdout" 2>"$TMP/rep.err"
check_eq "--report -: exit 0" "$?" 0
check_eq "--report -: the report on stdout" "$(json "$TMP/rep.stdout" 'r["results"]["output_tokens"]')" 48
check "--report -: no file named -" test ! -e ./-
# --stats - likewise (it wrote a file named "-"): one JSON line per iteration on stdout
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W -q --stats - >"$TMP/st.stdout" 2>"$TMP/st.err"
check_eq "--stats -: exit 0" "$?" 0
check_eq "--stats -: iteration lines on stdout" \
	"$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(len(r) > 0 and all("iter" in x for x in r))' "$TMP/st.stdout")" True
check "--stats -: no file named -" test ! -e ./-
# both on stdout, or both naming one file (the report overwrote the statistics): refused
# before any work
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W -q --stats - --report - >/dev/null 2>"$TMP/both.err"
check_eq "--stats - --report -: exit 2" "$?" 2
check "--stats - --report -: says so" grep -q 'would both go to standard output' "$TMP/both.err"
"$BATCHGEN" bench -m synthetic:builtin --device cpu --workload $W -q --stats "$TMP/one.json" \
	--report "$TMP/./one.json" 2>"$TMP/one.err"
check_eq "--stats X --report X: exit 2" "$?" 2
check "--stats X --report X: names both options" grep -q -- '--stats and --report name the same file' "$TMP/one.err"
check "--stats X --report X: nothing written" test ! -e "$TMP/one.json"

summary
