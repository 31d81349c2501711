# check.sh: the shell twin of check.h, sourced by the end-to-end tests.
#   check NAME CMD...        passes when CMD exits 0
#   check_eq NAME GOT WANT   passes when the two strings are equal
#   shared REL               prints the path under ../shared, or skips (fails under CI=true)
#   summary                  prints "N passed, N failed" and exits nonzero on failure
# $BATCHGEN is the binary under test: $BATCHGEN when set, else BUILD/batchgen when the
# sourcing script's first argument is a build folder that holds one (`bash tests/e2e_X.sh
# build-asan`), else build/batchgen. $TMP is a scratch folder removed at exit.
n_pass=0
n_fail=0
n_skip=0
if [ -z "${BATCHGEN:-}" ] && [ -n "${1:-}" ] && [ -x "${1:-}/batchgen" ]; then
	BATCHGEN=$1/batchgen
fi
BATCHGEN=${BATCHGEN:-build/batchgen}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

check() {
	local name=$1
	shift
	if "$@"; then
		n_pass=$((n_pass + 1))
	else
		n_fail=$((n_fail + 1))
		echo "FAIL $name: $*" >&2
	fi
}

check_eq() {
	if [ "$2" = "$3" ]; then
		n_pass=$((n_pass + 1))
	else
		n_fail=$((n_fail + 1))
		echo "FAIL $1: got [$2] want [$3]" >&2
	fi
}

shared() {
	local p=${BG_SHARED:-../shared}/$1
	if [ -r "$p" ]; then
		echo "$p"
		return 0
	fi
	if [ "${CI:-}" = true ]; then
		n_fail=$((n_fail + 1))
		echo "FAIL: $p is missing (required in CI)" >&2
	else
		n_skip=$((n_skip + 1))
		echo "SKIP: $p not found; tests that need it are skipped" >&2
	fi
	return 1
}

summary() {
	if [ $n_skip -gt 0 ]; then
		echo "$n_pass passed, $n_fail failed, $n_skip skipped"
	else
		echo "$n_pass passed, $n_fail failed"
	fi
	[ $n_fail -eq 0 ]
}
