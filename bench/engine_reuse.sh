#!/usr/bin/env bash
# engine_reuse.sh: the engine workloads of issue 14 with `batchgen bench`, each feature on
# and off in the same run, on the same machine:
#   P1   1000-token shared system prompt + 100-token question, 128 output tokens:
#        block reuse on (default) vs --no-prefix-cache (prompt tokens/s)
#   N8   8 samples of each prompt (n = 8, one prefill) vs N8S, the same as 8 separate
#        requests with --no-prefix-cache (output tokens/s), at 128/128
#   N8L  the same with 1024-token prompts (N8L vs N8LS, 1024/128)
#   S1   the three scheduling policies + adaptive, each preemptive one with --preempt
#        recompute and swap, in the default pool and a memory-tight one (--kv-tokens 2048);
#        S1_KV (default "default 2048") picks the pools
#
#   bench/engine_reuse.sh [COUNT]    COUNT requests of P1 and S1 (default 64; the issue's
#                                    P1 is 256), COUNT/8 prompts of N8
#   PARTS="P1 N8 N8L S1" (default: P1 N8 S1) picks some; N8_COUNT (default COUNT) sets the
#   sequences of N8 and N8L alone; RUNS (default 1) repeats every line, for medians;
#   P1_OFF=0 skips P1's --no-prefix-cache run; ARGS (e.g. "--policy static") are added to
#   every run; LABEL (e.g. the commit a $BATCHGEN was built from) goes into the header.
#   N8 and N8L also run N8S / N8LS with the prefix cache on ("separate+cache"): 8 separate
#   requests as a user would send them, sharing the prompt's full blocks through the cache.
#
# $BATCHGEN (default build/batchgen), the built-in model on the CPU (--device cpu) unless
# $MODEL is set. Wall time on a shared machine is noisy: each line also has the process
# CPU seconds. llama.cpp has no counterpart to these switches in node-llama-cpp's API, so
# there is no llama.cpp ratio here (bench/compare_llamacpp.sh compares the plain engine).
# Appends to bench/results/engine_reuse.txt with date, machine, commit and command.
set -euo pipefail
cd "$(dirname "$0")/.."
BATCHGEN=${BATCHGEN:-build/batchgen}
N=${1:-64}
N8=${N8_COUNT:-$N}
PARTS=${PARTS:-P1 N8 S1}
extra=(${ARGS:-})
RUNS=${RUNS:-1}
P1_OFF=${P1_OFF:-1}
S1_KV=${S1_KV:-default 2048}
out=bench/results/engine_reuse.txt
mkdir -p bench/results
machine=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
model=(${MODEL:+-m "$MODEL"})
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # name, extra args...
	local name=$1
	shift
	local load
	for ((k = 0; k < RUNS; k++)); do
		load=$(cut -d' ' -f1 /proc/loadavg)
		"$BATCHGEN" bench "${model[@]}" --device cpu --max-seq-len 2048 -q --report "$tmp/r.json" "$@" "${extra[@]}" >/dev/null 2>&1
		jq -r --arg n "$name" --arg load "$load" '.results | "\($n)\twall_s \(.wall_s | . * 100 | round / 100)\tcpu_s \(.cpu_s | . * 100 | round / 100)\tprompt_tok_s \(.prompt_tok_s | round)\toutput_tok_s \(.output_tok_s | round)\tpreemptions \(.preemptions)\tttft_p50_ms \(.ttft_ms.p50 | round)\treused \(.reused_blocks)\tmissed \(.missed_blocks)\thit_rate \(.cache_hit_rate | . * 1000 | round / 1000)\tswap_out_mb \((.swap_out_bytes // 0) / 1048576 | . * 100 | round / 100)\trecomputed \(.recomputed_tokens // 0)\tload_before \($load)"' "$tmp/r.json"
	done
}
{
	echo
	echo "# engine_reuse $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted') machine ${machine:-unknown} ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))${LABEL:+ label $LABEL}"
	echo "# command: PARTS=\"$PARTS\" N8_COUNT=$N8 RUNS=$RUNS P1_OFF=$P1_OFF S1_KV=\"$S1_KV\"${ARGS:+ ARGS=\"$ARGS\"}${LABEL:+ LABEL=$LABEL} BATCHGEN=$BATCHGEN${MODEL:+ MODEL=$MODEL} bench/engine_reuse.sh $N"
	if [[ " $PARTS " == *" P1 "* ]]; then
		run "P1x$N cache" --workload "P1x$N"
		[ "$P1_OFF" = 0 ] || run "P1x$N no-cache" --workload "P1x$N" --no-prefix-cache
	fi
	if [[ " $PARTS " == *" N8 "* ]]; then
		run "N8x$((N8 / 8)) n=8" --workload "N8x$((N8 / 8))"
		run "N8Sx$N8 separate" --workload "N8Sx$N8" --no-prefix-cache
		run "N8Sx$N8 separate+cache" --workload "N8Sx$N8"
	fi
	if [[ " $PARTS " == *" N8L "* ]]; then
		run "N8Lx$((N8 / 8)) n=8" --workload "N8Lx$((N8 / 8))"
		run "N8LSx$N8 separate" --workload "N8LSx$N8" --no-prefix-cache
		run "N8LSx$N8 separate+cache" --workload "N8LSx$N8"
	fi
	if [[ " $PARTS " == *" S1 "* ]]; then
		for kv in $S1_KV; do
			kvarg=()
			[ "$kv" = default ] || kvarg=(--kv-tokens "$kv")
			for p in no-evict max-util max-util/swap adaptive adaptive/swap static; do
				pm=recompute
				[[ $p == */swap ]] && pm=swap
				run "S1x$N $p kv=$kv" --workload "S1x$N" --policy "${p%/swap}" --preempt $pm "${kvarg[@]}"
			done
		done
	fi
} | tee -a "$out"
