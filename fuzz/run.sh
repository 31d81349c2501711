#!/usr/bin/env bash
# run.sh [SECONDS] [NAME...]: runs each libFuzzer harness (default: all of
# build-fuzz/fuzz_*) for SECONDS (default 60) over its corpus, one at a time, and prints
# one line per harness: executions, coverage, corpus, and "ok" or where the reproducer is.
# The corpus of NAME lives in build-fuzz/corpus/NAME (kept between runs, so a campaign
# grows it) and starts from fuzz/seeds.sh's seeds; a crash, sanitizer report, timeout
# (> 10 s on one input, 60 s for grammar, 30 s for regex and schema), out-of-memory (> 2 GB) or leak stops that harness and leaves the
# input in build-fuzz/artifacts/. Logs: build-fuzz/logs/NAME.log. Exits 1 when any
# harness found something. Reproduce with: build-fuzz/fuzz_NAME ARTIFACT
# fuzz/NAME.dict, when present, is passed as the harness's dictionary.
# Environment: FUZZ_NICE=1 runs under nice -n 19; FUZZ_ARGS adds libFuzzer flags;
# FUZZ_JOBS=N runs N harnesses at a time (default 1: a campaign gives each harness the
# whole machine's other core; CI runs one per processor, each harness being one process).
set -u
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for b in build-fuzz/fuzz_*; do
		[ -x "$b" ] && [ -f "$b" ] && case $b in *.d) ;; *) names+=("${b#build-fuzz/fuzz_}") ;; esac
	done
fi
if [ ${#names[@]} -eq 0 ]; then
	echo "run.sh: no harness in build-fuzz/ (make fuzz first)" >&2
	exit 2
fi
[ -d build-fuzz/seeds ] || fuzz/seeds.sh >/dev/null
mkdir -p build-fuzz/logs build-fuzz/artifacts
nice=()
[ "${FUZZ_NICE:-0}" = 1 ] && nice=(nice -n 19)
# fuzz_one NAME: one harness for $secs; prints its line; writes 1 to build-fuzz/logs/NAME.found
# when it found something, else 0
fuzz_one() {
	local n=$1 timeout=10 max_len corpus log dict t0 rc execs cov files res art
	local fail=0
	case $n in
	gguf) max_len=131072 ;;
	tokenizer) max_len=4096 ;;
	# a grammar step is bounded by a budget of stack operations (fuzz_grammar's: 2^20),
	# not by time: `("ab"* | [^a]){0,2000}` runs in ~0.2 s (CPU, both runs of an input)
	grammar) max_len=8192 timeout=60 ;;
	jinja) max_len=32768 ;; # real chat templates run to ~20 KB
	# a walk's mask step costs ~100 grammar steps: 3 walks of up to 64 characters
	schema) max_len=4096 timeout=30 ;;
	# fuzz_regex reads at most 1 + 129 (pattern) + 3 x 25 (walks) + 6 x 10 (candidates)
	# = 265 bytes: longer inputs only make mutations land where nothing reads them
	regex) max_len=512 timeout=30 ;;
	*) max_len=8192 ;;
	esac
	corpus=build-fuzz/corpus/$n
	mkdir -p "$corpus"
	log=build-fuzz/logs/$n.log
	dict=()
	[ -f fuzz/"$n".dict ] && dict=(-dict=fuzz/"$n".dict)
	t0=$(date +%s)
	# shellcheck disable=SC2086
	"${nice[@]}" build-fuzz/fuzz_"$n" -max_total_time="$secs" -max_len="$max_len" -timeout="$timeout" \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/"$n"- \
		"${dict[@]}" ${FUZZ_ARGS:-} "$corpus" build-fuzz/seeds/"$n" >"$log" 2>&1
	rc=$?
	execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
	cov=$(grep -oE '(DONE|pulse|NEW|REDUCE|INITED) +cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 |
		sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+)/cov \1, ft \2/')
	files=$(ls "$corpus" | wc -l)
	if [ $rc -eq 0 ]; then
		res=ok
	else
		fail=1
		art=$(grep -o 'Test unit written to [^ ]*' "$log" | tail -1 | sed 's/Test unit written to //')
		res="FOUND (rc $rc): $(grep -m1 -E 'ERROR|ORACLE|runtime error|SUMMARY' "$log" | cut -c1-160); reproduce: build-fuzz/fuzz_$n $art"
	fi
	printf 'fuzz_%-10s %6ss  %10s execs  %-22s corpus %5s  %s\n' "$n" "$(($(date +%s) - t0))" \
		"${execs:-?}" "${cov:-?}" "$files" "$res"
	echo $fail >build-fuzz/logs/"$n".found
}
jobs_max=${FUZZ_JOBS:-1}
for n in "${names[@]}"; do
	rm -f build-fuzz/logs/"$n".found
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n
	done
	fuzz_one "$n" &
done
wait
fail=0
for n in "${names[@]}"; do
	[ "$(cat build-fuzz/logs/"$n".found 2>/dev/null)" = 0 ] || fail=1
done
exit $fail
