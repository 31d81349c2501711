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
#                                         KINDS="given lines random" picks some; two more
#                                         kinds share prompt prefixes, so that block reuse
#                                         (on by default) holds cached blocks: "shared" (one
#                                         64-token prefix, 2 full blocks of 32, for every
#                                         line) and "prefixes" (8 distinct 64-token
#                                         prefixes in turn: 16 blocks to cache beside the
#                                         running requests' in a pool of 128 on the
#                                         built-in model; 64 prefixes (the whole pool) hit
#                                         nothing and ran 20x slower)
#
# Builds build/bench/engine_memory with make; generates the CLI's inputs in $BUILD
# (default /tmp/batchgen-bench). Every run is appended to bench/results/engine_memory.txt
# with the date, the machine (lscpu model name), the commit and the command, so that
# earlier numbers stay there for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-/tmp/batchgen-bench}
mkdir -p "$BUILD" bench/results
out=bench/results/engine_memory.txt
machine=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
header() {
	echo
	echo "# $1 $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted') machine ${machine:-unknown} ($(nproc) CPUs)"
	echo "# command: ${KINDS:+KINDS=\"$KINDS\" }BUILD=$BUILD bench/engine_memory.sh $2"
}

if [ "${1:-}" != --cli ]; then
	# the Makefile's build of bench/engine_memory.c against the library (a source list here
	# went stale as the engine grew)
	make -s build/bench/engine_memory
	{
		header engine_memory "$*"
		build/bench/engine_memory "$@"
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
	echo "# ids=shared: as given, input_ids [1,10..72,5+i%300,7] (66 tokens, the first 64 the same);"
	echo "# ids=prefixes: as given, input_ids [1,5+i%8,10..71,5+i%300,7] (8 prefixes in turn)"
	echo "# reused/missed/hit_rate: kv_cache of --report (reused blocks over the run)"
	for n in "${sizes[@]}"; do
		for kind in ${KINDS:-given lines random}; do
			in="$BUILD/cli_${kind}_$n.jsonl"
			if [ ! -s "$in" ]; then
				awk -v n="$n" -v kind="$kind" 'BEGIN {
					srand(1)
					for (i = 0; i < n; i++) {
						id = kind == "lines" ? "" : sprintf("\"id\":\"q%d\",", i)
						if (kind == "random")
							id = sprintf("\"id\":\"u%08x%08xz\",", int(rand() * 4294967296), int(rand() * 4294967296))
						pre = ""
						if (kind == "shared")
							for (k = 0; k < 63; k++)
								pre = pre sprintf("%d,", 10 + k)
						if (kind == "prefixes") {
							pre = sprintf("%d,", 5 + i % 8)
							for (k = 0; k < 62; k++)
								pre = pre sprintf("%d,", 10 + k)
						}
						printf "{%s\"input_ids\":[1,%s%d,7],\"max_tokens\":1}\n", id, pre, 5 + i % 300
					}
				}' >"$in.tmp"
				mv "$in.tmp" "$in"
			fi
			t0=$(date +%s.%N)
			kb=$(/usr/bin/time -f %M "$BATCHGEN" -m synthetic:builtin -i "$in" -o /dev/null --quiet \
				--report "$BUILD/cli_report.json" 2>&1 >/dev/null | tail -1)
			t1=$(date +%s.%N)
			reuse=$(jq -r '.kv_cache | "reused=\(.reused_blocks) missed=\(.missed_blocks) hit_rate=\(.cache_hit_rate * 1000 | round / 1000)"' \
				"$BUILD/cli_report.json" 2>/dev/null || echo "reuse=?")
			printf 'cli ids=%s n=%d peak_rss_kb=%s secs=%.2f %s\n' "$kind" "$n" "$kb" "$(echo "$t1 - $t0" | bc)" "$reuse"
		done
	done
} | tee -a "$out"
