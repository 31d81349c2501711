# need_jq.sh: sourced by end-to-end tests (after check.sh) that read JSON with jq.
#   need_jq    returns 0 when jq is there; otherwise counts a skip (a failure under
#              CI=true, as shared() does for ../shared) and returns 1
need_jq() {
	command -v jq >/dev/null && return 0
	if [ "${CI:-}" = true ]; then
		n_fail=$((n_fail + 1))
		echo "FAIL: jq is missing (required in CI)" >&2
	else
		n_skip=$((n_skip + 1))
		echo "SKIP: jq not found; the checks that read JSON are skipped" >&2
	fi
	return 1
}
