# run_lib.sh: sourced by the suite runners (run.sh, run_gpu.sh).
#   run_init BUILD_DIR   sets logdir=BUILD_DIR/tests (created), total_pass=0, total_fail=0
#   run_one NAME CMD...  runs CMD with its output in $logdir/NAME.log; reads its last
#                        "N passed, N failed" line into the totals and into $logdir/NAME.count
#                        ("P F": a runner that runs tests in subshells sums those) (a nonzero
#                        exit without a failed check counts as one failure: a crash, or a
#                        sanitizer's error exit); prints "$RUN_TAG NAME ok|FAILED summary (time)",
#                        then on failure the log's lines matching $RUN_FAIL_RE, then its SKIP
#                        lines, in one write (tests that run at once do not mix their lines).
# The caller sets RUN_NAME_WIDTH (the name column) and RUN_FAIL_RE (what shows a failure);
# RUN_TAG (default empty) names the pass.
run_init() {
	total_pass=0
	total_fail=0
	logdir=$1/tests
	mkdir -p "$logdir"
}

run_one() {
	local name=$1
	shift
	local log=$logdir/$name.log
	local t0=$SECONDS
	"$@" >"$log" 2>&1
	local rc=$?
	local line p f
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
	f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
	[ -n "$p" ] || p=0
	[ -n "$f" ] || f=0
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	echo "$p $f" >"$logdir/$name.count"
	local verdict=ok
	[ "$f" -eq 0 ] || verdict=FAILED
	local out lines
	out=$(printf "%s%-${RUN_NAME_WIDTH}s %-6s %s (%ds)" "${RUN_TAG:+$RUN_TAG }" "$name" "$verdict" \
		"${line:-no summary, exit $rc}" $((SECONDS - t0)))
	[ "$f" -eq 0 ] || lines=$(grep -E "$RUN_FAIL_RE" "$log" | head -n 20 | sed 's/^/    /')
	[ -z "${lines:-}" ] || out+=$'\n'$lines
	lines=$(grep -E '^SKIP' "$log" | sort -u | sed 's/^/    /')
	[ -z "$lines" ] || out+=$'\n'$lines
	printf '%s\n' "$out"
}
