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
# llamacpp_key FILE LINE...: the cache key of FILE's contents and the LINEs (32 hex digits)
llamacpp_key() {
	{ sha256sum <"$1" && printf '%s\n' "${@:2}"; } | sha256sum | cut -c1-32
}

llamacpp_greedy() {
	if [ -z "${BG_LLAMACPP_CACHE:-}" ]; then
		node bench/llamacpp_greedy.mjs "$@"
		return
	fi
	local hit
	hit=$BG_LLAMACPP_CACHE/$(llamacpp_key "$@")
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

# llamacpp_queue OUT MODEL ARGS...: llamacpp_greedy MODEL ARGS... >OUT, deferred to the next
# llamacpp_flush, which runs every queued job in one node process (llamacpp_greedy.mjs
# --jobs: llama.cpp's start, ~1 s, paid once; with $BG_LLAMACPP_CACHE, a hit is copied and
# a miss computed and kept). MODEL must stay in place until then; OUT is absent after the
# flush when its run failed (the reason is on stderr). Arguments hold no control characters.
LLAMACPP_QUEUE=() # one "OUT<US>KEY<US>JOB_JSON" per queued run (US: \x1f; KEY empty without a cache)
llamacpp_queue() {
	local out=$1 key="" a json="" sep=""
	shift
	for a in "$@"; do
		a=${a//\\/\\\\}
		json+="$sep\"${a//\"/\\\"}\""
		sep=","
	done
	[ -z "${BG_LLAMACPP_CACHE:-}" ] || key=$(llamacpp_key "$@")
	LLAMACPP_QUEUE+=("$out"$'\x1f'"$key"$'\x1f'"{\"args\":[$json],\"out\":")
}

# llamacpp_flush: runs the queued jobs (llamacpp_queue); returns 1 when one failed.
llamacpp_flush() {
	local dir=${BG_LLAMACPP_CACHE:-} jobs=$TMP/llamacpp.jobs q out key job rc=0
	: >"$jobs"
	[ -z "$dir" ] || mkdir -p "$dir"
	# one flush at a time computes its misses (with the cache, the other build's run of the
	# same test waits, then finds them all); without the cache each job writes its OUT
	(
		flock 9
		for q in "${LLAMACPP_QUEUE[@]}"; do
			IFS=$'\x1f' read -r out key job <<<"$q"
			[ -z "$dir" ] || out=$dir/$key
			[ -n "$dir" ] && [ -f "$out" ] && continue
			printf '%s"%s"}\n' "$job" "$out" >>"$jobs"
		done
		[ ! -s "$jobs" ] || node bench/llamacpp_greedy.mjs --jobs "$jobs"
	) 9>"${dir:-$TMP}/queue.lock" || rc=1
	if [ -n "$dir" ]; then
		for q in "${LLAMACPP_QUEUE[@]}"; do
			IFS=$'\x1f' read -r out key job <<<"$q"
			rm -f "$out"
			[ ! -f "$dir/$key" ] || cp "$dir/$key" "$out"
		done
	fi
	LLAMACPP_QUEUE=()
	return $rc
}

# llamacpp_make OUT IN CMD...: runs CMD, which writes the file OUT from the file IN with
# llama.cpp's own code (its quantizers: a function of IN and CMD's other arguments). With
# $BG_LLAMACPP_CACHE, OUT is kept there under the sha256 of IN and of CMD's arguments other
# than the program, IN and OUT (the program is built per build tree or test, the library it
# loads named among its arguments), and a later call copies it instead (the sanitized build's run of a test
# reuses the plain one's files: the lattice i-quants take ~40 s to make). CMD's output goes
# to stdout/stderr; returns its exit status (0 on a hit).
llamacpp_make() {
	local out=$1 in=$2
	shift 2
	if [ -z "${BG_LLAMACPP_CACHE:-}" ]; then
		"$@"
		return
	fi
	local a lines=() hit
	for a in "${@:2}"; do [ "$a" = "$in" ] || [ "$a" = "$out" ] || lines+=("$a"); done
	hit=$BG_LLAMACPP_CACHE/$(llamacpp_key "$in" "${lines[@]}").file
	mkdir -p "$BG_LLAMACPP_CACHE"
	(
		flock 9
		if [ ! -f "$hit" ]; then
			"$@" || exit
			cp "$out" "$hit.tmp" && mv "$hit.tmp" "$hit"
		fi
		cp "$hit" "$out"
	) 9>"$hit.lock"
}
