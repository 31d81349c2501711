#!/usr/bin/env bash
# engine_beam.sh: beam search (issue 14) with `batchgen bench`, on the same machine in the
# same run:
#   BW4   beam_width 4, every beam returned (4 sequences of 128 tokens per prompt, one
#         prefill, beams sharing blocks copy-on-write and re-pointed every step)
#   128/128 the same number of sequences as separate greedy requests (no cache), the cost
#         of plain decoding for as many tokens
#
#   bench/engine_beam.sh [COUNT]    COUNT prompts of BW4 (default 8), 4 * COUNT requests
#                                   of 128/128
#
# $BATCHGEN (default build/batchgen), the built-in model on the CPU unless $MODEL is set.
# Wall time on a shared machine is noisy: each line also has the process CPU seconds.
# node-llama-cpp's API has no beam search, so there is no llama.cpp ratio here.
# Appends to bench/results/engine_beam.txt with date, machine, commit and command.
set -euo pipefail
cd "$(dirname "$0")/.."
BATCHGEN=${BATCHGEN:-build/batchgen}
N=${1:-8}
out=bench/results/engine_beam.txt
mkdir -p bench/results
machine=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
model=(${MODEL:+-m "$MODEL"})
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # name, extra args...
	local name=$1
	shift
	"$BATCHGEN" bench "${model[@]}" --device cpu -q --report "$tmp/r.json" "$@" >/dev/null 2>&1
	jq -r --arg n "$name" '.results | "\($n)\twall_s \(.wall_s | . * 100 | round / 100)\tcpu_s \(.cpu_s | . * 100 | round / 100)\toutput_tok_s \(.output_tok_s | round)\tpreemptions \(.preemptions)\tttft_p50_ms \(.ttft_ms.p50 | round)"' "$tmp/r.json"
}
{
	echo
	echo "# engine_beam $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted') machine ${machine:-unknown} ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
	echo "# command: BATCHGEN=$BATCHGEN${MODEL:+ MODEL=$MODEL} bench/engine_beam.sh $N"
	run "BW4x$N beams" --workload "BW4x$N"
	run "128/128x$((4 * N)) separate" --workload "128/128x$((4 * N))" --no-prefix-cache
} | tee -a "$out"
