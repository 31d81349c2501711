#!/usr/bin/env bash
# engine_memory.sh: peak RSS for 10k, 100k and 1M generated requests.
#
#   bench/engine_memory.sh [N ...]        the engine alone (null backend: only the engine's
#                                         own memory is measured; bench/engine_memory.c)
#   bench/engine_memory.sh --cli [N ...]  the whole CLI ($BATCHGEN, default build/batchgen,
#                                         synthetic:builtin (the old built-in model), max_tokens 1, -o /dev/null), for
#                                         inputs whose ids count up ("id":"q<i>"), inputs
#                                         without ids (ids are line numbers) and inputs of
#                                         random ids (what cli/idset.c keeps in its table);
#                                         KINDS="given lines random" picks some
#
# Builds into / generates inputs in $BUILD (default /tmp/batchgen-bench). Every run is
# appended to bench/results/engine_memory.txt with the date, the machine (lscpu model
# name), the commit and the command, so that earlier numbers stay there for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-/tmp/batchgen-bench}
CC=${CC:-cc}
mkdir -p "$BUILD" bench/results
out=bench/results/engine_memory.txt
machine=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
header() {
	echo
	echo "# $1 $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted') machine ${machine:-unknown} ($(nproc) CPUs)"
	echo "# command: ${KINDS:+KINDS=\"$KINDS\" }BUILD=$BUILD bench/engine_memory.sh $2"
}

if [ "${1:-}" != --cli ]; then
	src="core/status.c core/engine/kv.c core/engine/scheduler.c core/engine/engine.c
	     core/engine/request.c core/sample/sampler.c core/model/gguf.c core/text/tok*.c
	     bench/engine_memory.c"
	# shellcheck disable=SC2086
	$CC -std=c11 -O2 -D_GNU_SOURCE -Icore -I. -pthread $src -o "$BUILD/engine_memory" -lcjson -lpcre2-8 -lm
	{
		header engine_memory "$*"
		"$BUILD/engine_memory" "$@"
	} | tee -a "$out"
	exit "${PIPESTATUS[0]}"
fi

shift
BATCHGEN=${BATCHGEN:-build/batchgen}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000 1000000)
{
	header "cli_memory BATCHGEN=$BATCHGEN" "--cli ${sizes[*]}"
	echo "# each: /usr/bin/time -f %M \$BATCHGEN -m synthetic:builtin -i IN -o /dev/null --quiet (peak RSS in KB)"
	echo "# ids=given: {\"id\":\"q<i>\",\"input_ids\":[1,5+i%300,7],\"max_tokens\":1}; ids=lines: the same without \"id\";"
	echo "# ids=random: \"id\":\"u<16 random hex digits>z\" (srand(1), distinct in practice)"
	for n in "${sizes[@]}"; do
		for kind in ${KINDS:-given lines random}; do
			in="$BUILD/cli_${kind}_$n.jsonl"
			if [ ! -s "$in" ]; then
				awk -v n="$n" -v kind="$kind" 'BEGIN {
					srand(1)
					for (i = 0; i < n; i++) {
						id = kind == "given" ? sprintf("\"id\":\"q%d\",", i) : ""
						if (kind == "random")
							id = sprintf("\"id\":\"u%08x%08xz\",", int(rand() * 4294967296), int(rand() * 4294967296))
						printf "{%s\"input_ids\":[1,%d,7],\"max_tokens\":1}\n", id, 5 + i % 300
					}
				}' >"$in.tmp"
				mv "$in.tmp" "$in"
			fi
			t0=$(date +%s.%N)
			kb=$(/usr/bin/time -f %M "$BATCHGEN" -m synthetic:builtin -i "$in" -o /dev/null --quiet 2>&1 >/dev/null | tail -1)
			t1=$(date +%s.%N)
			printf 'cli ids=%s n=%d peak_rss_kb=%s secs=%.2f\n' "$kind" "$n" "$kb" "$(echo "$t1 - $t0" | bc)"
		done
	done
} | tee -a "$out"
