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

# llamacpp_greedy MODEL ARGS...: node bench/llamacpp_greedy.mjs MODEL ARGS... (stdout, stderr
# and exit status as its). With $BG_LLAMACPP_CACHE set (tests/run.sh sets it for one run of
# the suite and empties it first), a run that exits 0 keeps its output there under the
# sha256 of the model file and the arguments, and a later call with the same file and
# arguments prints it instead of running llama.cpp again: the sanitized build's run of a
# test reads what the plain build's run computed, since llama.cpp is the same program for
# both and its output is a function of the file and the arguments (~1.4 s a start). One
# run at a time computes a key (flock): a test that asks while another computes it waits.
llamacpp_greedy() {
	if [ -z "${BG_LLAMACPP_CACHE:-}" ]; then
		node bench/llamacpp_greedy.mjs "$@"
		return
	fi
	local key
	key=$({ sha256sum <"$1" && printf '%s\n' "${@:2}"; } | sha256sum | cut -c1-32)
	local hit=$BG_LLAMACPP_CACHE/$key
	mkdir -p "$BG_LLAMACPP_CACHE"
	(
		flock 9
		if [ ! -f "$hit" ]; then
			node bench/llamacpp_greedy.mjs "$@" >"$hit.tmp" || exit
			mv "$hit.tmp" "$hit"
		fi
		cat "$hit"
	) 9>"$hit.lock"
}
