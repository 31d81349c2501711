#!/usr/bin/env bash
# quant_logprob_gap.sh: how closely batchgen's chosen-token log-probs follow llama.cpp's on
# the quantized files of tests/e2e_llamacpp.sh (llama.cpp's own quantizer, 12 presets of a
# 256-wide synthetic llama and qwen2), greedy, 3 prompts x N steps, llama.cpp with an f32 KV
# cache and flash attention off (as the test runs it). Per file: the steps compared (while
# the tokens agree), the steps whose tokens differ, and the median and largest |log-prob
# difference| of the chosen token. A measurement, not a test.
#
#   bench/quant_logprob_gap.sh [BATCHGEN]     (run from the repository root)
#
# Environment: N [12] steps per prompt; WORK [/tmp/batchgen-qgap] for the models (made once);
# PRESETS [all 12] the presets to measure, e.g. PRESETS=Q8_0.
set -euo pipefail
BATCHGEN=${1:-build/batchgen}
N=${N:-12}
WORK=${WORK:-/tmp/batchgen-qgap}
PRESETS=${PRESETS:-Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS}
LIB=bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
mkdir -p "$WORK"
[ -x "$WORK/llama_quantize" ] ||
	cc -O1 "${BG_SHARED:-../shared}/tools/llama_quantize.c" -o "$WORK/llama_quantize" -ldl
PROMPTS='[[1, 300, 301, 302], [1, 5, 77, 260, 261, 400, 12, 13], [1, 290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321, 322, 323, 324, 325, 326, 327, 328, 329]]'
echo "| file | steps compared | tokens differ | median abs dlogprob | max abs dlogprob |"
echo "|---|---|---|---|---|"
for arch in tiny qwen2-tiny; do
	f16=$WORK/$arch-f16.gguf
	[ -s "$f16" ] || "$BATCHGEN" synth --shape $arch --embd 256 --ffn 512 --heads 4 \
		--kv-heads 2 --seed 5 --dtype f16 -o "$f16" 2>/dev/null
	for preset in $PRESETS; do
		f=$WORK/$arch-$preset.gguf
		[ -s "$f" ] || LD_LIBRARY_PATH=$LIB "$WORK/llama_quantize" $LIB/libllama.v0.5.0.so \
			"$f16" "$f" $preset >/dev/null 2>&1
		python3 -c '
import json, sys
for i, p in enumerate(json.loads(sys.argv[1])):
    print(json.dumps({"id": "p%d" % i, "input_ids": p, "max_tokens": int(sys.argv[2]),
                      "temperature": 0, "ignore_eos": True, "logprobs": 1}))' "$PROMPTS" "$N" >"$WORK/in.jsonl"
		"$BATCHGEN" -m "$f" -i "$WORK/in.jsonl" -o "$WORK/out.jsonl" 2>/dev/null
		node bench/llamacpp_greedy.mjs "$f" "$PROMPTS" "$N" --logprobs --kv-type f32 \
			--flash-attn off >"$WORK/llama.txt" 2>/dev/null
		python3 -c '
import json, sys, statistics
ours = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    ours[r["id"]] = r
theirs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
gaps, differ = [], 0
for i, t in enumerate(theirs):
    o = ours["p%d" % i]
    lp = [x["logprob"] if isinstance(x, dict) else x for x in o.get("logprobs", [])]
    for n, tok in enumerate(t["token_ids"]):
        if o["token_ids"][n] != tok:
            differ += 1
            break
        gaps.append(abs(lp[n] - t["logprobs"][n]))
print("| %s | %d | %d | %.2g | %.2g |" % (sys.argv[3], len(gaps), differ,
      statistics.median(gaps), max(gaps)))' "$WORK/out.jsonl" "$WORK/llama.txt" "$arch-$preset"
	done
done
