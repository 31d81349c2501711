#!/usr/bin/env bash
# engine_n8.sh: n = 8 samples of a prompt (one prefill, blocks shared copy-on-write) against
# the same 8 samples sent as 8 separate requests with the same per-sample seeds (sample i
# of a request with seed s samples with seed s + i), through `batchgen` on JSONL files, for
# several prompt lengths. `batchgen bench`'s N8/N8S fix ISL/OSL at 128/128 and are greedy;
# here the samples are drawn (temperature 0.8, top_p 0.95) and the prompt length varies, to
# show where the shared prefill pays. Every sample's tokens must equal its separate
# request's (checked: "same" below), so both sides do the same work.
#
#   bench/engine_n8.sh [ISL ...]     default 128 512 1024; OSL = $OSL (128), $PROMPTS (4)
#                                    prompts of random ids (awk srand(ISL)), 8 samples each
#
# Three runs per ISL, one after another: n=8; 8 separate requests with --no-prefix-cache;
# 8 separate requests with the cache on (the default: later ones may reuse the prompt's
# full blocks). $BATCHGEN (build/batchgen), the built-in model unless $MODEL, --device cpu,
# --max-seq-len 2048. Appends to bench/results/engine_n8.txt with date, machine, load,
# commit and command. The ratio is wall(separate) / wall(n=8) (the same output tokens).
set -euo pipefail
cd "$(dirname "$0")/.."
BATCHGEN=${BATCHGEN:-build/batchgen}
OSL=${OSL:-128}
PROMPTS=${PROMPTS:-4}
isls=("$@")
[ ${#isls[@]} -gt 0 ] || isls=(128 512 1024)
out=bench/results/engine_n8.txt
machine=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
model=(${MODEL:+-m "$MODEL"})
vocab=$("$BATCHGEN" info "${model[@]}" 2>/dev/null | sed -n 's/^n_vocab: *//p')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # key, label, input, extra args...
	local key=$1 label=$2 in=$3
	shift 3
	local load
	load=$(cut -d' ' -f1 /proc/loadavg)
	"$BATCHGEN" "${model[@]}" --device cpu --max-seq-len 2048 -q -i "$in" -o "$tmp/$key.out" \
		--report "$tmp/$key.json" "$@" || true
	jq -r --arg n "$label" --arg load "$load" '"\($n)\twall_s \(.wall_s | . * 100 | round / 100)\toutput_tok_s \(.throughput.output_tokens_per_s | round)\tok \(.requests.ok)\tfailed \(.requests.failed)\treused \(.kv_cache.reused_blocks)\tload_before \($load)"' "$tmp/$key.json"
}
ratio() { jq -n --slurpfile a "$tmp/$1.json" --slurpfile b "$tmp/$2.json" '$a[0].wall_s / $b[0].wall_s * 100 | round / 100'; }
{
	echo
	echo "# engine_n8 $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted') machine ${machine:-unknown} ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
	echo "# command: OSL=$OSL PROMPTS=$PROMPTS BATCHGEN=$BATCHGEN${MODEL:+ MODEL=$MODEL} bench/engine_n8.sh ${isls[*]}"
	for isl in "${isls[@]}"; do
		rm -f "$tmp/in_n8.jsonl" "$tmp/in_sep.jsonl"
		awk -v isl="$isl" -v osl="$OSL" -v np="$PROMPTS" -v v="$vocab" -v tag="$tmp/in" 'BEGIN {
			srand(isl)
			for (p = 0; p < np; p++) {
				ids = ""
				for (k = 0; k < isl; k++)
					ids = ids (k ? "," : "") (3 + int(rand() * (v - 3)))
				common = sprintf("\"input_ids\":[%s],\"max_tokens\":%d,\"ignore_eos\":true,\"temperature\":0.8,\"top_p\":0.95", ids, osl)
				printf "{\"id\":\"p%d\",%s,\"seed\":%d,\"n\":8}\n", p, common, 1000 * p >>(tag "_n8.jsonl")
				for (i = 0; i < 8; i++)
					printf "{\"id\":\"p%d_%d\",%s,\"seed\":%d}\n", p, i, common, 1000 * p + i >>(tag "_sep.jsonl")
			}
		}'
		run n8 "ISL$isl/OSL$OSL n=8" "$tmp/in_n8.jsonl"
		run sep "ISL$isl/OSL$OSL separate" "$tmp/in_sep.jsonl" --no-prefix-cache
		run sepc "ISL$isl/OSL$OSL separate+cache" "$tmp/in_sep.jsonl"
		# sample i of p<k> against request p<k>_<i>: the same tokens
		same=$(jq -r '.id as $id | .choices[] | "\($id)_\(.index) \(.token_ids)"' "$tmp/n8.out" | sort |
			cmp -s - <(jq -r '"\(.id) \(.token_ids)"' "$tmp/sep.out" | sort) && echo yes || echo NO)
		echo "ISL$isl/OSL$OSL ratio separate/n=8 $(ratio sep n8)x  separate+cache/n=8 $(ratio sepc n8)x  same tokens: $same"
	done
} | tee -a "$out"
