#!/usr/bin/env bash
# run.sh BUILD_DIR LABEL: runs every test program in BUILD_DIR/tests and every
# tests/e2e_*.sh against BUILD_DIR/batchgen, one line per test, then a total line
# "LABEL: N passed, N failed". Each test's output goes to BUILD_DIR/tests/NAME.log.
set -u
build=$1
label=${2:-tests}
total_pass=0
total_fail=0
logdir=$build/tests
mkdir -p "$logdir"

run_one() {
	local name=$1
	shift
	local log=$logdir/$name.log
	local t0=$SECONDS
	"$@" >"$log" 2>&1
	local rc=$?
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	local p f
	p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
	f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
	[ -n "$p" ] || p=0
	[ -n "$f" ] || f=0
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed or exited nonzero without reporting a failure
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	local verdict=ok
	[ "$f" -eq 0 ] || verdict=FAILED
	printf '%-28s %-6s %s (%ds)\n' "$name" "$verdict" "${line:-no summary, exit $rc}" \
		$((SECONDS - t0))
	if [ "$f" -ne 0 ]; then
		grep -E 'FAIL|ERROR|Sanitizer|runtime error' "$log" | head -n 20 | sed 's/^/    /'
	fi
	grep -E '^SKIP' "$log" | sort -u | sed 's/^/    /'
}

for t in "$logdir"/test_*; do
	[ -x "$t" ] && [ -f "$t" ] || continue
	case $t in *.log | *.d | *.o) continue ;; esac
	run_one "$(basename "$t")" "$t"
done
for s in tests/e2e_*.sh; do
	[ -f "$s" ] || continue
	run_one "$(basename "$s" .sh)" env BATCHGEN="$build/batchgen" bash "$s"
done
echo "$label: $total_pass passed, $total_fail failed"
[ $total_fail -eq 0 ]
