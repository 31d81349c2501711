# need_llamacpp.sh: sourced by end-to-end tests (after check.sh) that run llama.cpp
# through node-llama-cpp (bench/llamacpp_greedy.mjs; installed by `npm ci --prefix bench`).
#   need_llamacpp WHAT   returns 0 when node and bench/node_modules/node-llama-cpp are
#                        there; otherwise counts a skip (a failure under CI=true, as
#                        shared() does for ../shared), says that WHAT is skipped, returns 1
need_llamacpp() {
	[ -d bench/node_modules/node-llama-cpp ] && command -v node >/dev/null && return 0
	if [ "${CI:-}" = true ]; then
		n_fail=$((n_fail + 1))
		echo "FAIL: bench/node_modules/node-llama-cpp is missing (run npm ci --prefix bench)" >&2
	else
		n_skip=$((n_skip + 1))
		echo "SKIP: bench/node_modules/node-llama-cpp not installed (npm ci --prefix bench); $1 skipped" >&2
	fi
	return 1
}
