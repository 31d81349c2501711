#!/usr/bin/env bash
# e2e_llamacpp_arch: the architectures of core/model/arch.h against llama.cpp's own graphs
# (node-llama-cpp's CPU build, bench/llamacpp_greedy.mjs --logprobs): Llama 3.1 rope_freqs,
# linear and YaRN rope scaling, qwen3 (Q/K norms, head_dim != n_embd / n_head), gemma2
# (embedding scale, GELU, post-norms, attention and final soft-caps, every other layer
# windowed), gemma3 (Q/K norms, 5:1 windowed layers with their own RoPE base), phi3 (fused
# attn_qkv and gate|up, LongRoPE long factors, a window in the file that is not applied),
# the mixtures of experts qwen3moe, Mixtral (llama with experts) and gpt-oss (sinks,
# biases, clamped SwiGLU), olmo2 (post-norms only, whole-row Q/K norms; OLMo 3's windows),
# granite and granitemoe (embedding, attention, residual and logit scales), mistral3 (llama
# 4's attention temperature), smollm3 (every 4th layer without RoPE), seed_oss (its FFN norm
# under the post-attention name, Q/K/V biases), apertus (Q/K norms, the xIELU FFN) and gemma4
# (windowed and global layers of different head sizes, V norm, V = K, attention scale 1, layer
# output scales), glm4 (partial interleaved RoPE, post-norms, a skipped NextN layer) and
# glm4moe (sigmoid routing with a selection bias, a shared expert, a leading dense layer),
# deepseek2 (MLA, grouped softmax / sigmoid routing, YaRN's attention scale), command-r
# and cohere2 (LayerNorms, parallel attention and FFN, per-head Q/K LayerNorms, logit scale,
# RoPE on the windowed layers only), minimax-m2 (whole-row Q/K norms, partial NeoX RoPE,
# sigmoid routing with a selection bias), lfm2 (short-conv layers) and lfm2moe (its layers,
# a leading dense layer, then sigmoid routing over experts of their own width), granitehybrid
# (Mamba2 layers, their state carried across forwards, a shared expert), nemotron_h
# (Mamba2, attention and ReLU^2 FFN layers, one block each), nemotron_h_moe (its FFN
# layers routed ReLU^2 experts, sigmoid with a selection bias, and a ReLU^2 shared expert),
# qwen35moe and qwen2moe (a shared expert times its sigmoid gate beside the routed experts),
# qwen2vl, qwen3vl and qwen3vlmoe (multi-section RoPE: pairs that text positions leave unturned),
# step35 (per-kind head counts, a head-wise attention gate, SwiGLU clamps), ernie4_5 and
# ernie4_5-moe (softmax routing with a selection bias, a shared expert, a leading dense layer).
# ARCH_ONLY=PREFIX runs only the rows whose label starts with PREFIX.
# Tiny synthetic files (`batchgen synth --shape <arch>-tiny`), 3 prompts of 4, 8 and 41
# tokens (41 > the files' windows of 16 and original contexts of 64 - 41 + 12 positions
# reach past both), 12 greedy tokens each, run as one batchgen job.
#
# Per step: the greedy tokens equal llama.cpp's, and the chosen token's log-prob agrees
# within TOL. Tolerances (measured worst cases in brackets, on these seeds and others):
#   f32 weights, llama.cpp with f32 KV and flash attention off: both compute in f32 and
#     differ in summation order only: 2e-5 [2.5e-6]; gemma 5e-3 [2.1e-3], because
#     llama.cpp's CPU GELU rounds its input to f16 and looks the result up in an f16
#     table (ggml-cpu vec.h, GGML_GELU_FP16), a relative error up to 2^-11 per activation;
#   f16 weights, llama.cpp's default context (f16 KV cache, flash attention): llama.cpp
#     also rounds activations and K/V to f16: 0.03 [0.011];
#   q8_0 weights: both quantize the activations to Q8_0 blocks and multiply in int8 with
#     the same per-row arithmetic (cpu/qdot.h), so with llama.cpp's f32 KV and flash
#     attention off the rest differs in summation order only: [1e-7 on llama, qwen3, phi3,
#     2026-11-29]; but a last-bit difference may flip one activation's Q8 rounding, which
#     moved log-probs by up to 0.13 on other block types (e2e_llamacpp.sh), hence 0.25 and
#     a MARGIN of 0.1. gemma keeps llama.cpp's default context (its GELU table differs
#     anyway): 0.25 [0.16]. (Before Q8_0 multiplied in int8 here, batchgen's fp32
#     activations were 0.05-0.08 from llama.cpp and the margin 0.25.)
# As in e2e_llamacpp.sh, comparison stops at the first step whose top-2 margin (in
# batchgen's top_logprobs) is below MARGIN, where rounding may pick the other branch; at
# least half of all steps must be compared (MIN_COMPARED sets another minimum).
# Needs `npm ci --prefix bench`; skips visibly without it (fails under CI=true).
source tests/check.sh
source tests/need_llamacpp.sh

if ! need_llamacpp "llama.cpp architecture cross-check"; then
	summary
	exit $?
fi

N=12
PROMPTS='[[1, 300, 301, 302], [1, 5, 77, 260, 261, 400, 12, 13], [1, 290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321, 322, 323, 324, 325, 326, 327, 328, 329]]'
F32KV=(--kv-type f32 --flash-attn off)
BGOPTS="" # extra batchgen options

# write_prompts: $TMP/prompts.in.jsonl, batchgen's requests for $PROMPTS
write_prompts() {
	node -e '
	const p = JSON.parse(process.argv[1]);
	p.forEach((ids, i) => console.log(JSON.stringify({id: "p" + i, input_ids: ids,
		max_tokens: Number(process.argv[2]), temperature: 0, ignore_eos: true,
		logprobs: 2})));' "$PROMPTS" "$N" >"$TMP/prompts.in.jsonl"
}
write_prompts

# arch_compare LABEL MARGIN TOL "LLAMA_OPTS" SYNTH_ARGS...: writes $TMP/LABEL.gguf (a copy of
# $FROM when set), runs batchgen on it and queues llama.cpp's run (llamacpp_queue);
# arch_verdicts, at the end, runs every queued llama.cpp job in one process and checks
# each row's tokens and log-probs per prompt (see the header).
arch_compare() {
	local label=$1 margin=$2 tol=$3 lopts=$4
	shift 4
	case $label in "${ARCH_ONLY:-}"*) ;; *) return 0 ;; esac # ARCH_ONLY=PREFIX: those rows only
	local model=$TMP/$label.gguf
	if [ -n "${FROM:-}" ]; then # a file made elsewhere (llama.cpp's quantizer) instead
		cp "$FROM" "$model"
	else
		check "synth $label" "$BATCHGEN" synth "$@" -o "$model"
	fi
	# shellcheck disable=SC2086
	check "$label: batchgen runs" "$BATCHGEN" -m "$model" -i "$TMP/prompts.in.jsonl" \
		-o "$TMP/$label.out.jsonl" -q $BGOPTS
	# shellcheck disable=SC2086
	llamacpp_queue "$TMP/$label.llama" "$model" "$PROMPTS" "$N" --logprobs --context-size 128 $lopts
	echo "$label $margin $tol ${MIN_COMPARED:-$(((3 * N + 1) / 2))}" >>"$TMP/rows"
}

# arch_verdicts: llama.cpp's queued runs, then per row (one node process for all): the
# greedy tokens and the chosen log-probs of the 3 prompts, up to the first step whose top-2
# margin is below the row's MARGIN; at least the row's minimum of steps compared.
arch_verdicts() {
	[ -s "$TMP/rows" ] || return 0
	llamacpp_flush || echo "FAIL: llama.cpp failed on a file (above); its rows have no result" >&2
	node -e '
		const fs = require("fs");
		const [rowsF, dir] = process.argv.slice(1);
		for (const row of fs.readFileSync(rowsF, "utf8").trim().split("\n")) {
			const [label, marginS, tolS, min] = row.split(" ");
			const margin = Number(marginS), tol = Number(tolS);
			const read = (f) => fs.existsSync(f) ? fs.readFileSync(f, "utf8").split("\n").filter((l) => l.trim()).map(JSON.parse) : [];
			const ll = read(`${dir}/${label}.llama`);
			const got = {};
			for (const r of read(`${dir}/${label}.out.jsonl`)) got[r.id] = r;
			let compared = 0, worst = 0, bad = [];
			for (let i = 0; i < 3; i++) {
				const r = got["p" + i], w = ll[i];
				if (!r || !r.token_ids || !w) { bad.push(`p${i}: no result`); continue; }
				for (let n = 0; n < w.token_ids.length; n++) {
					const top = (r.top_logprobs || [])[n] || [];
					if (margin > 0 && (top.length < 2 || top[0].logprob - top[1].logprob < margin)) break;
					if (r.token_ids[n] !== w.token_ids[n]) {
						bad.push(`p${i} step ${n}: got ${r.token_ids} want ${w.token_ids}`);
						break;
					}
					const d = Math.abs(r.logprobs[n] - w.logprobs[n]);
					worst = Math.max(worst, d);
					if (!(d <= tol)) bad.push(`p${i} step ${n}: logprob ${r.logprobs[n]} vs ${w.logprobs[n]}`);
					compared++;
				}
			}
			console.log(`${label} ${min} ${bad.length ? "bad" : "ok"} ${compared} ${worst.toExponential(2)} ${bad.slice(0, 2).join("; ")}`);
		}' "$TMP/rows" "$TMP" >"$TMP/verdicts"
	check_eq "a verdict for every row" "$(wc -l <"$TMP/verdicts")" "$(wc -l <"$TMP/rows")"
	local label min verdict compared rest
	while read -r label min verdict compared rest; do
		echo "$label: $verdict $compared $rest"
		check_eq "$label: tokens and log-probs vs llama.cpp" "$verdict" ok
		check "$label: $compared of $((3 * N)) steps compared (at least $min)" test "$compared" -ge "$min"
	done <"$TMP/verdicts"
}

# Llama 3.1 rope_freqs ("llama3" factors over an original context of 64), linear and YaRN
arch_compare llama3-f32 0 2e-5 "${F32KV[*]}" --shape llama3-tiny --dtype f32 --seed 3
arch_compare llama3-q8_0 0.1 0.25 "${F32KV[*]}" --shape llama3-tiny --dtype q8_0 --seed 5
arch_compare llama3-f16 0.02 0.03 "" --shape llama3-tiny --dtype f16 --seed 5
arch_compare llama-linear-f32 0 2e-5 "${F32KV[*]}" --shape llama-linear-tiny --dtype f32 --seed 3
arch_compare llama-linear-f16 0.02 0.03 "" --shape llama-linear-tiny --dtype f16 --seed 5
arch_compare llama-linear-q8_0 0.1 0.25 "${F32KV[*]}" --shape llama-linear-tiny --dtype q8_0 --seed 5
arch_compare llama-yarn-f32 0 2e-5 "${F32KV[*]}" --shape llama-yarn-tiny --dtype f32 --seed 3
arch_compare llama-yarn-f16 0.02 0.03 "" --shape llama-yarn-tiny --dtype f16 --seed 5
arch_compare llama-yarn-q8_0 0.1 0.25 "${F32KV[*]}" --shape llama-yarn-tiny --dtype q8_0 --seed 5
# qwen3: per-head Q/K norms, head_dim 32 with n_embd 64 / 4 heads
arch_compare qwen3-f32 0 2e-5 "${F32KV[*]}" --shape qwen3-tiny --dtype f32 --seed 3
arch_compare qwen3-f16 0.02 0.03 "" --shape qwen3-tiny --dtype f16 --seed 5
arch_compare qwen3-q8_0 0.1 0.25 "${F32KV[*]}" --shape qwen3-tiny --dtype q8_0 --seed 9
# gemma2 (tied, soft-caps 2 and 3 so that they bite) and gemma3 (untied, window 16)
arch_compare gemma2-f32 0 5e-3 "${F32KV[*]}" --shape gemma2-tiny --dtype f32 --seed 3
arch_compare gemma2-f16 0.02 0.03 "" --shape gemma2-tiny --dtype f16 --seed 5
# q8_0 gemma: the soft-capped logits (gemma2-tiny's final cap is 3) leave most top-2
# margins below q8_0's 0.25, so fewer steps are comparable: at least MIN_COMPARED
MIN_COMPARED=10 arch_compare gemma2-q8_0 0.25 0.25 "" --shape gemma2-tiny --dtype q8_0 --seed 8
arch_compare gemma3-f32 0 5e-3 "${F32KV[*]}" --shape gemma3-tiny --dtype f32 --seed 3
arch_compare gemma3-f16 0.02 0.03 "" --shape gemma3-tiny --dtype f16 --seed 5
MIN_COMPARED=10 arch_compare gemma3-q8_0 0.25 0.25 "" --shape gemma3-tiny --dtype q8_0 --seed 4
# phi3: llama.cpp gives Phi-3 tokenizer treatment to a general.name containing "phi3",
# which needs a Phi-3 vocabulary, hence the neutral name. Context 128 > the original 64:
# llama.cpp picks the long factors, as batchgen does for n_ctx_train 256 > 64.
arch_compare phi3-f32 0 2e-5 "${F32KV[*]}" --shape phi3-tiny --dtype f32 --seed 3 --name "tiny p3"
arch_compare phi3-f16 0.02 0.03 "" --shape phi3-tiny --dtype f16 --seed 5 --name "tiny p3"
arch_compare phi3-q8_0 0.1 0.25 "${F32KV[*]}" --shape phi3-tiny --dtype q8_0 --seed 3 --name "tiny p3"
# mixtures of experts (model.h's routing; cpu_moe.h): qwen3moe (qwen3's attention, 8 experts
# of 32, 2 used) and Mixtral (llama with 8 experts as wide as feed_forward_length, 2 used).
# The q8_0 files keep the router f32, as llama.cpp's converter and quantizer do.
arch_compare qwen3moe-f32 0 2e-5 "${F32KV[*]}" --shape qwen3moe-tiny --dtype f32 --seed 3
arch_compare qwen3moe-f16 0.02 0.03 "" --shape qwen3moe-tiny --dtype f16 --seed 5
arch_compare qwen3moe-q8_0 0.1 0.25 "${F32KV[*]}" --shape qwen3moe-tiny --dtype q8_0 --seed 9
arch_compare mixtral-f32 0 2e-5 "${F32KV[*]}" --shape mixtral-tiny --dtype f32 --seed 3
arch_compare mixtral-f16 0.02 0.03 "" --shape mixtral-tiny --dtype f16 --seed 5
arch_compare mixtral-q8_0 0.1 0.25 "${F32KV[*]}" --shape mixtral-tiny --dtype q8_0 --seed 9
# qwen2moe (llama.cpp's qwen2moe graph; qwen2moe-tiny): qwen2's attention (Q/K/V biases),
# 4 experts of 32, 2 a token, weighted by the softmax's p without renormalizing, plus a
# shared expert of 64 times its sigmoid gate
arch_compare qwen2moe-f32 0 2e-5 "${F32KV[*]}" --shape qwen2moe-tiny --dtype f32 --seed 3
# qwen2vl, qwen3vl, qwen3vlmoe (the Qwen2-VL / Qwen3-VL text towers; qwen2-tiny, qwen3-tiny
# and qwen3moe-tiny with rope.dimension_sections): llama.cpp's text positions are (p, p, p,
# 0), so the pairs of the 4th section (M-RoPE) or beyond 3 x a section (IMROPE) do not turn:
# pairs 4 of 8, 10 of 16 and 7 of 16 here, the others wrapping past the sections' sum
arch_compare qwen2vl-f32 0 2e-5 "${F32KV[*]}" --shape qwen2vl-tiny --dtype f32 --seed 3
arch_compare qwen3vl-f32 0 2e-5 "${F32KV[*]}" --shape qwen3vl-tiny --dtype f32 --seed 3
arch_compare qwen3vlmoe-f32 0 2e-5 "${F32KV[*]}" --shape qwen3vlmoe-tiny --dtype f32 --seed 3
# gpt-oss (4 experts of 32, 2 used; router and expert biases, the clamped SwiGLU reached by
# ~8 % of the gate/up outputs; Q/K/V/O biases; a sink per head; window 16 on layer 0 only;
# YaRN factor 32 over 64; head_dim 32 != 64 / 4). Measured 2026-11-30: f32 3.7e-6, f16
# 7.3e-3, q8_0 5.9e-8; dropping the sinks, the +1, either clamp, the router, down or O
# bias fails the f32 comparison.
arch_compare gpt-oss-f32 0 2e-5 "${F32KV[*]}" --shape gpt-oss-tiny --dtype f32 --seed 3
arch_compare gpt-oss-f16 0.02 0.03 "" --shape gpt-oss-tiny --dtype f16 --seed 5
arch_compare gpt-oss-q8_0 0.1 0.25 "${F32KV[*]}" --shape gpt-oss-tiny --dtype q8_0 --seed 9
# olmo2: no pre-norms, Q/K RMS norms over the whole Q (64) and K (32: GQA) rows before NeoX
# RoPE, post-attention and post-FFN norms; norm weights 1 + N(0, 0.25^2)
arch_compare olmo2-f32 0 2e-5 "${F32KV[*]}" --shape olmo2-tiny --dtype f32 --seed 3
arch_compare olmo2-f16 0.02 0.03 "" --shape olmo2-tiny --dtype f16 --seed 5
arch_compare olmo2-q8_0 0.1 0.25 "${F32KV[*]}" --shape olmo2-tiny --dtype q8_0 --seed 9
# OLMo 3 (olmo2 with windows): layers 0-2 windowed (16, the pattern a per-layer bool list as
# the converter writes it), layer 3 global; YaRN factor 4 over 64 on the global layer only.
# q8_0 seed 5 compares 36 steps; seeds 3, 4, 7, 8, 9, 11 stop at a top-2 margin < 0.1 after
# 7-30 (worst 0.108, seed 7: a flipped Q8 rounding, as the header says)
arch_compare olmo3-f32 0 2e-5 "${F32KV[*]}" --shape olmo3-tiny --dtype f32 --seed 3
arch_compare olmo3-f16 0.02 0.03 "" --shape olmo3-tiny --dtype f16 --seed 5
arch_compare olmo3-q8_0 0.1 0.25 "${F32KV[*]}" --shape olmo3-tiny --dtype q8_0 --seed 5
# granite (llama.cpp's granite graph): embeddings x12, q.k x0.125 instead of 1/sqrt(16), each
# branch output x0.22 before its residual add, logits / 8 (the output projection 8x larger
# in the file so that they still spread). Measured 2026-11-30: f32 1.4e-6, f16 8.9e-4, q8_0
# 9.6e-8 (seed 13: on seeds 3, 7, 11 fewer than half the q8_0 steps have a top-2 margin of
# 0.1 and were compared, 3-15 of 36, none failing); dropping the
# attention branch's residual scale, the logit scale, the embedding scale or the attention
# scale fails the f32 comparison.
arch_compare granite-f32 0 2e-5 "${F32KV[*]}" --shape granite-tiny --dtype f32 --seed 3
arch_compare granite-f16 0.02 0.03 "" --shape granite-tiny --dtype f16 --seed 5
arch_compare granite-q8_0 0.1 0.25 "${F32KV[*]}" --shape granite-tiny --dtype q8_0 --seed 13
# granitemoe: granite-tiny's scales with 8 experts of 64, 2 a token (the routing of model.h,
# as llama.cpp's build_moe_ffn computes it for granitemoe). Measured 2026-11-30: f32 1.7e-6,
# f16 1.4e-3, q8_0 8.9e-8 (q8_0 seed 5: 5.8e-3, a Q8 rounding flip); dropping the FFN
# branch's residual scale fails granitemoe-f32 (token mismatch at step 0) and granite-f32.
arch_compare granitemoe-f32 0 2e-5 "${F32KV[*]}" --shape granitemoe-tiny --dtype f32 --seed 3
arch_compare granitemoe-f16 0.02 0.03 "" --shape granitemoe-tiny --dtype f16 --seed 5
arch_compare granitemoe-q8_0 0.1 0.25 "${F32KV[*]}" --shape granitemoe-tiny --dtype q8_0 --seed 13
# mistral3 (llama.cpp's mistral3 graph): llama 4's attention temperature, Q after RoPE times
# log(floor(pos / 16) + 1) * 0.5 + 1 (the floor scale is YaRN's original context, 16; the
# prompts reach positions 16, 32 and 48), and YaRN factor 4 whose magnitude the graph
# cancels (attn_factor 1 / (1 + 0.1 ln 4)). Measured 2026-11-30: f32 1.8e-6, f16 7.2e-3,
# q8_0 9.2e-8 (q8_0 seed 13: 6.6e-2, one activation's Q8 rounding flipped); dropping the
# temperature (3.7e-1), scaling K by it too (2.2e-1), offsetting the position by 1 (7.8e-2)
# or keeping YaRN's magnitude (9.2e-1) fails the f32 comparison.
arch_compare mistral3-f32 0 2e-5 "${F32KV[*]}" --shape mistral3-tiny --dtype f32 --seed 3
arch_compare mistral3-f16 0.02 0.03 "" --shape mistral3-tiny --dtype f16 --seed 5
arch_compare mistral3-q8_0 0.1 0.25 "${F32KV[*]}" --shape mistral3-tiny --dtype q8_0 --seed 5
# mistral3 with Q/K/V and O biases, which llama.cpp loads and adds when a file has them
# (measured: f32 2.0e-6, q8_0 1.1e-7)
arch_compare mistral3-bias-f32 0 2e-5 "${F32KV[*]}" --shape mistral3-bias-tiny --dtype f32 --seed 3
arch_compare mistral3-bias-q8_0 0.1 0.25 "${F32KV[*]}" --shape mistral3-bias-tiny --dtype q8_0 --seed 3
# smollm3 (llama.cpp's smollm3 graph): no RoPE in layers 3 and 7 of 8 ((il + 1) % 4 == 0, a
# constant in llama.cpp). Measured 2026-11-30: f32 1.8e-6, f16 5.5e-3, q8_0 8.0e-8; RoPE on
# every layer (1.9e-1), on layers 0 and 4 instead (token mismatch) or K rotated in the
# unrotated layers (1.3e-1) fails the f32 comparison.
arch_compare smollm3-f32 0 2e-5 "${F32KV[*]}" --shape smollm3-tiny --dtype f32 --seed 3
arch_compare smollm3-f16 0.02 0.03 "" --shape smollm3-tiny --dtype f16 --seed 5
arch_compare smollm3-q8_0 0.1 0.25 "${F32KV[*]}" --shape smollm3-tiny --dtype q8_0 --seed 5
# seed_oss (llama.cpp's seed_oss graph): NeoX RoPE, Q/K/V biases (no O bias), the pre-FFN
# norm stored as post_attention_norm, head_dim 32 != 64 / 4; apertus (llama.cpp's apertus
# graph): per-head Q/K norms, llama3 rope_freqs, Q/K/V and O biases, the non-gated xIELU FFN
# with different alpha_n, alpha_p, beta per layer. Norm weights 1 + N(0, 0.25^2). Their
# q8_0 rows (below) are quantized by llama.cpp. Measured 2026-12-01: seed_oss f32 2.1e-6,
# f16 4.0e-3 (seed 3), q8_0 1.1e-7; apertus f32 1.9e-6, f16 4.7e-3, q8_0 7.1e-8. Planted,
# each failing the f32 row (and q8_0 where run): seed_oss's biases dropped, its FFN normed
# with attn_norm's weights; apertus's Q/K norms dropped, xIELU's alpha_n without + beta,
# alpha_p without softplus, the x <= 0 branch without - x, layer 0's parameters everywhere,
# the O bias dropped.
arch_compare seed_oss-f32 0 2e-5 "${F32KV[*]}" --shape seed_oss-tiny --dtype f32 --seed 3
arch_compare apertus-f32 0 2e-5 "${F32KV[*]}" --shape apertus-tiny --dtype f32 --seed 3
# command-r (llama.cpp's command-r graph; command-r-plus-tiny, 64 layers of 32): LayerNorms
# (mean-subtracted) for attn_norm and output_norm, attention and FFN in parallel from one
# norm, Command R+'s per-head Q/K LayerNorms (a weight row per head) before interleaved
# RoPE, the tied output, logits times logit_scale 0.5; cohere2 (cohere2-tiny): no Q/K
# norms, layers 0-2 windowed (16) and rotated, layer 3 global without RoPE.
arch_compare command-r-f32 0 2e-5 "${F32KV[*]}" --shape command-r-plus-tiny --dtype f32 --seed 3
arch_compare command-r-q8_0 0.1 0.25 "${F32KV[*]}" --shape command-r-plus-tiny --dtype q8_0 --seed 9
arch_compare cohere2-f32 0 2e-5 "${F32KV[*]}" --shape cohere2-tiny --dtype f32 --seed 3
arch_compare cohere2-q8_0 0.1 0.25 "${F32KV[*]}" --shape cohere2-tiny --dtype q8_0 --seed 5
# minimax-m2 (llama.cpp's minimax-m2 graph; minimax-m2-tiny): Q/K RMS norms over the whole Q
# (128) and K (64: GQA) rows with weights 1 + N(0, 0.25^2), NeoX RoPE on 16 of each head's 32
# dimensions, 8 experts of 32 with sigmoid gating, the selection bias exp_probs_b in the
# choice only, 2 chosen weights renormalized
arch_compare minimax-m2-f32 0 2e-5 "${F32KV[*]}" --shape minimax-m2-tiny --dtype f32 --seed 3
arch_compare minimax-m2-q8_0 0.1 0.25 "${F32KV[*]}" --shape minimax-m2-tiny --dtype q8_0 --seed 9
# lfm2 (llama.cpp's lfm2 graph; lfm2-tiny: conv, attention, conv, conv): the short-conv
# blocks (in_proj's B, C, x; the 3-tap causal conv over B*x; C times it; out_proj) whose
# state batchgen keeps in the KV cache, attention with per-head Q/K norms and NeoX RoPE,
# the output norm named token_embd_norm, tied output. Blocks of 4 tokens, so that the
# conv reads rows across block boundaries in prefill and decode.
BGOPTS="--block-size 4"
arch_compare lfm2-f32 0 2e-5 "${F32KV[*]}" --shape lfm2-tiny --dtype f32 --seed 3
# lfm2moe (llama.cpp's lfm2moe graph; lfm2moe-tiny: lfm2-tiny's layers): layer 0's dense
# SwiGLU (leading_dense_block_count 1), then 4 experts of 32 (expert_feed_forward_length,
# not the dense 128) with sigmoid gating, the selection bias in the choice only, 2 chosen
# weights renormalized and not scaled. Its q8_0 row stands for lfm2's too (the same conv
# and attention layers; lfm2-q8_0 was 32 of 36 steps, 6.1e-8, when it ran), to save CI time.
arch_compare lfm2moe-f32 0 2e-5 "${F32KV[*]}" --shape lfm2moe-tiny --dtype f32 --seed 3
arch_compare lfm2moe-q8_0 0.1 0.25 "${F32KV[*]}" --shape lfm2moe-tiny --dtype q8_0 --seed 3
# qwen35 (llama.cpp's qwen35 and qwen35moe graphs; qwen35-tiny: delta net, attention,
# delta net): the gated delta net's conv (4 taps), L2-normed Q/K, 4 V heads over 2 K heads,
# decay and beta, the delta rule, the gated output norm; the attention layer's output gate,
# per-head Q/K norms, partial NeoX RoPE (IMROPE with text positions); qwen35moe-tiny: those
# layers, every FFN 4 experts of 32, 2 a token, renormalized, plus a shared expert of 64
# times its sigmoid gate (no feed_forward_length key). At most 8 tokens an iteration, so
# that the prompts' prefill runs in chunks, the state carried in its slot between them.
BGOPTS="--block-size 4 --max-num-tokens 8"
arch_compare qwen35-f32 0 2e-5 "${F32KV[*]}" --shape qwen35-tiny --dtype f32 --seed 3
arch_compare qwen35moe-f32 0 2e-5 "${F32KV[*]}" --shape qwen35moe-tiny --dtype f32 --seed 3
# qwen35moe-gu: the experts' gate and up fused in ffn_gate_up_exps (per expert [gate | up]
# rows: llama.cpp's create_tensor_gate_up_exps), split at load time
arch_compare qwen35moe-gu-f32 0 2e-5 "${F32KV[*]}" --shape qwen35moe-gu-tiny --dtype f32 --seed 3
# qwen3next (llama.cpp's qwen3next graph; qwen3next-tiny: qwen35moe-tiny's layers and FFN
# with Qwen3-Next's layouts): V head h reads K head h / 2 (repeat-interleave), beta and alpha
# from the fused ssm_ba (per K head [beta | alpha]), plain NeoX RoPE; -ssmin: the older
# files' fused ssm_in (per K head [q | k | v | z]) reordered at load time.
arch_compare qwen3next-f32 0 2e-5 "${F32KV[*]}" --shape qwen3next-tiny --dtype f32 --seed 3
arch_compare qwen3next-ssmin-f32 0 2e-5 "${F32KV[*]}" --shape qwen3next-ssmin-tiny --dtype f32 --seed 5
# block reuse through state checkpoints (core/engine/scheduler.h): three prompts sharing 32
# and 16 tokens (8 and 4 blocks) arrive together; the first checkpoints its state after 4
# and 8 blocks, the others take the blocks and the state there and prefill the rest, where
# llama.cpp computes every prompt whole
PROMPTS0=$PROMPTS
pre=$(seq -s ', ' 290 320)
PROMPTS="[[1, $pre, 40, 41], [1, $pre, 50, 51, 52], [1, $(seq -s ', ' 290 304), 60, 61, 62]]"
write_prompts
arch_compare qwen35-reuse-f32 0 2e-5 "${F32KV[*]}" --shape qwen35-tiny --dtype f32 --seed 3
case qwen35-reuse in "${ARCH_ONLY:-}"*)
	check_eq "qwen35-reuse: p1 and p2 took 32 and 16 cached tokens" \
		"$(node -e 'for (const l of require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n")) { const r = JSON.parse(l); if (r.id !== "p0") console.log(r.usage.cached_tokens) }' "$TMP/qwen35-reuse-f32.out.jsonl" | tr '\n' ' ')" "32 16 "
	;;
esac
PROMPTS=$PROMPTS0
write_prompts
BGOPTS="--block-size 4"
BGOPTS=""
# granitehybrid (llama.cpp's granite-hybrid graph, build_mamba2_layer; granitehybrid-moe-tiny:
# Mamba2, attention without RoPE, Mamba2, Mamba2; 8 heads in 2 groups; 4 experts of 32, 2 a
# token, a shared expert of 64): the recurrent state in its slot across forwards, the
# 41-token prompt prefilled in chunks of at most 16 tokens (--max-num-tokens) and decoded
# beside the others. One row stands for the dense shape (granitehybrid-tiny: 36 steps,
# 1.4e-6) and q8_0 (26 steps, 8.0e-8), measured 2026-12-01; planted conv tap order, softplus,
# D skip, group norm span, head-to-group map, conv and SSM state carry each fail it.
BGOPTS="--max-num-tokens 16"
arch_compare granitehybrid-moe-f32 0 2e-5 "${F32KV[*]}" --shape granitehybrid-moe-tiny --dtype f32 --seed 3
# nemotron_h (llama.cpp's nemotron-h graph; nemotron_h-tiny "M-*M-": Mamba2 of inner size 96
# (not 2 n_embd), ReLU^2 FFN layers, an attention layer without RoPE, no ffn_norm), the same
# chunked prefill.
arch_compare nemotron_h-f32 0 2e-5 "${F32KV[*]}" --shape nemotron_h-tiny --dtype f32 --seed 3
# nemotron_h_moe (Nemotron 3 Nano; nemotron_h_moe-tiny: those layers, the FFN layers 8 ReLU^2
# experts of 32, 2 a token, sigmoid routing with the selection bias, weights normalized and
# times 2.5, a ReLU^2 shared expert of 64), the same chunked prefill.
arch_compare nemotron_h_moe-f32 0 2e-5 "${F32KV[*]}" --shape nemotron_h_moe-tiny --dtype f32 --seed 3
# step35 (Step-3.5-Flash; step35-tiny: per-kind query and K/V heads (4/2 global, 8/4
# windowed), the window list starting with a global layer, the windowed layers' own RoPE base
# and rotation (12 of 16; the global ones 8), the head-wise attention gate on 3 of 4 layers,
# a dense first layer, then sigmoid-routed experts with the selection bias plus a shared
# expert, SwiGLU clamps per layer (dense, experts, shared expert)).
arch_compare step35-f32 0 2e-5 "${F32KV[*]}" --shape step35-tiny --dtype f32 --seed 3
# step35-tail: the same with its last layer dense after the MoE layers (llama.cpp: dense
# wherever ffn_gate_inp is absent).
arch_compare step35-tail-f32 0 2e-5 "${F32KV[*]}" --shape step35-tail --dtype f32 --seed 3
# llama4 (Llama 4; llama4-tiny: RoPE layers 0-2 with the unweighted Q/K norm after RoPE and
# rope_freqs, layer 3 without RoPE, MoE layers 1 and 3 routed by the largest logits with the
# sigmoid weight on the experts' input plus the shared expert, dense layers 0 and 2; the
# chunks of 8192 and the temperature beyond position 8190 are test_model's, out of these
# prompts' reach; test_backend_cpu checks them against its double forward); llama4-128e:
# Maverick's 128 experts, no Q/K norm. Measured 2026-12-02: f32 2.1e-6, q8_0 1.1e-7, 128e
# 2.1e-6; failed by RoPE on the NoPE layer, the Q/K norm dropped, on every layer, or with
# 128 experts, and the router weight after the FFN (bench/results/llama4-2026-12-02b.md).
arch_compare llama4-f32 0 2e-5 "${F32KV[*]}" --shape llama4-tiny --dtype f32 --seed 3
arch_compare llama4-q8_0 0.1 0.25 "${F32KV[*]}" --shape llama4-tiny --dtype q8_0 --seed 5
arch_compare llama4-128e-f32 0 2e-5 "${F32KV[*]}" --shape llama4-128e --dtype f32 --seed 3
# ernie4_5 (ERNIE 4.5 0.3B; ernie4_5-tiny: llama's layer with interleaved RoPE, Q/K/V
# biases, tied output) and ernie4_5-moe (ernie4_5-moe-tiny: a dense first layer, then
# softmax-routed experts with the selection bias and normalized weights plus a shared
# expert of its own width). Measured 2026-12-02: f32 1.4e-6 / 2.0e-6 (36 steps); q8_0
# 4.0e-8 (32) / 9.0e-8 (36); other moe q8_0 seeds 3-9 compare 10-32 steps, worst 4.9e-2.
arch_compare ernie4_5-f32 0 2e-5 "${F32KV[*]}" --shape ernie4_5-tiny --dtype f32 --seed 3
arch_compare ernie4_5-q8_0 0.1 0.25 "${F32KV[*]}" --shape ernie4_5-tiny --dtype q8_0 --seed 5
arch_compare ernie4_5-moe-f32 0 2e-5 "${F32KV[*]}" --shape ernie4_5-moe-tiny --dtype f32 --seed 3
arch_compare ernie4_5-moe-q8_0 0.1 0.25 "${F32KV[*]}" --shape ernie4_5-moe-tiny --dtype q8_0 --seed 4
# hunyuan-dense (Hunyuan 0.5B-7B; hunyuan-dense-tiny: NeoX RoPE, then the per-head Q/K norms,
# tied output) and hunyuan-moe (hunyuan-moe-tiny: experts as wide as feed_forward_length,
# softmax, renormalized, plus a shared expert of 96)
arch_compare hunyuan-dense-f32 0 2e-5 "${F32KV[*]}" --shape hunyuan-dense-tiny --dtype f32 --seed 3
arch_compare hunyuan-dense-q8_0 0.1 0.25 "${F32KV[*]}" --shape hunyuan-dense-tiny --dtype q8_0 --seed 5
arch_compare hunyuan-moe-f32 0 2e-5 "${F32KV[*]}" --shape hunyuan-moe-tiny --dtype f32 --seed 3
arch_compare hunyuan-moe-q8_0 0.1 0.25 "${F32KV[*]}" --shape hunyuan-moe-tiny --dtype q8_0 --seed 5
BGOPTS=""
# exaone4 (llama.cpp's exaone4 graph): no pre-norms, per-head Q/K norms, NeoX RoPE with
# rope_freqs (llama3 factors over 64), post-attention and post-FFN norms, norm weights 1 +
# N(0, 0.25^2). exaone4-tiny (4 layers, tied): its file's window (16) and pattern list are
# ignored below 64 layers, every layer rotates; exaone4-swa-tiny (64 layers of 32): layers
# l % 4 < 3 windowed (16) and rotated, every 4th global without RoPE.
arch_compare exaone4-f32 0 2e-5 "${F32KV[*]}" --shape exaone4-tiny --dtype f32 --seed 3
arch_compare exaone4-q8_0 0.1 0.25 "${F32KV[*]}" --shape exaone4-tiny --dtype q8_0 --seed 5
arch_compare exaone4-swa-f32 0 2e-5 "${F32KV[*]}" --shape exaone4-swa-tiny --dtype f32 --seed 3
arch_compare exaone4-swa-q8_0 0.1 0.25 "${F32KV[*]}" --shape exaone4-swa-tiny --dtype q8_0 --seed 7
# olmoe (llama.cpp's olmoe graph; olmoe-tiny): Q/K RMS norms over the whole Q and K rows
# (64 each: no GQA), NeoX RoPE, 8 experts of 64, 4 a token by softmax, their weights the
# softmax's p as they are (norm_w false: not renormalized)
arch_compare olmoe-f32 0 2e-5 "${F32KV[*]}" --shape olmoe-tiny --dtype f32 --seed 3
arch_compare olmoe-q8_0 0.1 0.25 "${F32KV[*]}" --shape olmoe-tiny --dtype q8_0 --seed 3
# bailingmoe2 (llama.cpp's bailingmoe2 graph; bailingmoe2-tiny): fused attn_qkv, per-head
# Q/K norms, NeoX RoPE over 8 of 16 dimensions, one dense layer, then sigmoid routing with
# the exp_probs_b selection bias among the 2 best of 4 expert groups (top-2 sums), 2 of 8
# experts renormalized and scaled by 2.5, plus a shared expert; a NextN layer skipped; norm
# weights 1 + N(0, 0.25^2)
arch_compare bailingmoe2-f32 0 2e-5 "${F32KV[*]}" --shape bailingmoe2-tiny --dtype f32 --seed 3
arch_compare bailingmoe2-q8_0 0.1 0.25 "${F32KV[*]}" --shape bailingmoe2-tiny --dtype q8_0 --seed 3
# exaone (llama.cpp's exaone graph; exaone-tiny): llama's layer with NeoX RoPE and EXAONE
# 3.5's "llama3" rope_freqs over an original context of 64, tied output; arcee (arcee-tiny):
# llama's attention (interleaved RoPE, YaRN x4), a non-gated ReLU^2 FFN; dots1 (dots1-tiny):
# per-head Q/K norms, one dense layer, then sigmoid routing with the selection bias, 2 of
# 8 experts renormalized and scaled by 2.5, plus 2 shared experts. Norm weights 1 + N(0,
# 0.25^2). Measured 2026-12-02: f32 1.4e-6 / 2.8e-6 / 1.8e-6 (36 steps each); q8_0 9.4e-9
# (36) / 8.2e-8 (36) / 1.0e-7 (26); arcee q8_0 on seeds 3, 5-8: 12-35 steps, worst 8.6e-2
# (seed 3: a Q8 rounding flip of the ReLU^2 activations; f32 there 2.8e-6).
arch_compare exaone-f32 0 2e-5 "${F32KV[*]}" --shape exaone-tiny --dtype f32 --seed 3
arch_compare exaone-q8_0 0.1 0.25 "${F32KV[*]}" --shape exaone-tiny --dtype q8_0 --seed 3
arch_compare arcee-f32 0 2e-5 "${F32KV[*]}" --shape arcee-tiny --dtype f32 --seed 3
arch_compare arcee-q8_0 0.1 0.25 "${F32KV[*]}" --shape arcee-tiny --dtype q8_0 --seed 4
arch_compare dots1-f32 0 2e-5 "${F32KV[*]}" --shape dots1-tiny --dtype f32 --seed 3
arch_compare dots1-q8_0 0.1 0.25 "${F32KV[*]}" --shape dots1-tiny --dtype q8_0 --seed 3
# exaone-moe (llama.cpp's exaone-moe graph; exaone-moe-tiny): layers 0-2 windowed (16) and
# rotated (NeoX, rope_freqs), layer 3 global without RoPE, per-head Q/K norms, a dense layer,
# then sigmoid routing with the selection bias, 2 of 8 experts renormalized, x 2.5, plus a
# shared expert of its own width (64). Measured 2026-12-02: f32 3.7e-6 (36 steps), q8_0
# 8.0e-8 (36; seeds 3, 4, 6, 7: 10-24 steps, worst 5.9e-2, flipped Q8 roundings)
arch_compare exaone-moe-f32 0 2e-5 "${F32KV[*]}" --shape exaone-moe-tiny --dtype f32 --seed 3
arch_compare exaone-moe-q8_0 0.1 0.25 "${F32KV[*]}" --shape exaone-moe-tiny --dtype q8_0 --seed 5
# bailingmoe (llama.cpp's bailingmoe graph; bailingmoe-tiny): llama's attention (interleaved
# RoPE, separate Q/K/V), every layer 8 experts of 32, 2 a token by softmax, renormalized and
# x 2.5, plus 2 shared experts (64 wide).
arch_compare bailingmoe-f32 0 2e-5 "${F32KV[*]}" --shape bailingmoe-tiny --dtype f32 --seed 3
arch_compare bailingmoe-q8_0 0.1 0.25 "${F32KV[*]}" --shape bailingmoe-tiny --dtype q8_0 --seed 3
# falcon-h1 (llama.cpp's falcon-h1 graph, build_mamba2_layer; falcon-h1-tiny): every layer
# attention (NeoX RoPE, 4 heads of 32 over n_embd 64) and a Mamba2 block (inner 96, 8 heads in
# 2 groups, no grouped norm) of the same normed input, added together to the residual, then
# the SwiGLU FFN behind blk.N.ffn_norm (no .weight); falcon-h1-norm-tiny with the grouped
# ssm_norm, untied, Q/K/V biases and an O bias (loaded, not added: a plant adding it fails
# the row). The recurrent state in its slot across forwards, the 41-token prompt prefilled
# in chunks of at most 16 tokens, as granitehybrid's rows. Measured 2026-12-02: f32 5.7e-6,
# q8_0 4.7e-8 (24 steps), norm f32 2.4e-6 (36); seeds 4-7: f32 <= 4.1e-6, q8_0 <= 1.0e-7
# but seed 5's 6.0e-2 (a flipped Q8 rounding).
BGOPTS="--max-num-tokens 16"
arch_compare falcon-h1-f32 0 2e-5 "${F32KV[*]}" --shape falcon-h1-tiny --dtype f32 --seed 3
arch_compare falcon-h1-q8_0 0.1 0.25 "${F32KV[*]}" --shape falcon-h1-tiny --dtype q8_0 --seed 3
arch_compare falcon-h1-norm-f32 0 2e-5 "${F32KV[*]}" --shape falcon-h1-norm-tiny --dtype f32 --seed 3
BGOPTS=""
# gemma4 (llama.cpp's gemma4 graph; gemma4-tiny): attention scale 1, V RMS-normalized per
# head without a weight, the global layers (2, 5) without attn_v (V = K's projection),
# head size 32 and 1 K/V head there, 16 and 2 on the windowed ones (window 16, base
# 10000), proportional RoPE on the global layers (rope_freqs: 4 of 16 pairs turn, base
# 1e6), a layer_output_scale per layer, final soft-cap 30, norm weights 1 + N(0, 0.25^2)
# (Q/K norms half that). Measured 2026-12-01: f32 2.5e-3 (seeds 3-7: <= 3.1e-3), f16
# 1.0e-2, q8_0 9.6e-2 (15 steps; other seeds 3-15 steps, worst 0.20: the GELU table's
# differences flip activations' Q8 roundings, as gemma3's). q8_0: the f32 file quantized
# by llama.cpp's own quantizer (Q8_0: every matrix; norms, scales and rope_freqs f32).
arch_compare gemma4-f32 0 5e-3 "${F32KV[*]}" --shape gemma4-tiny --dtype f32 --seed 3
arch_compare gemma4-f16 0.02 0.03 "" --shape gemma4-tiny --dtype f16 --seed 5
if q=$(shared tools/llama_quantize.c) && [[ gemma4-q8_0 == "${ARCH_ONLY:-}"* ]]; then
	LLAMA_LIB=bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
	cc -O1 "$q" -o "$TMP/llama_quantize_g4" -ldl
	check "synth gemma4 f32 (to quantize)" "$BATCHGEN" synth --shape gemma4-tiny --dtype f32 \
		--seed 13 -o "$TMP/gemma4-src.gguf"
	LD_LIBRARY_PATH=$LLAMA_LIB "$TMP/llama_quantize_g4" $LLAMA_LIB/libllama.v0.5.0.so \
		"$TMP/gemma4-src.gguf" "$TMP/gemma4-q8.gguf" Q8_0 >"$TMP/quantize-g4.log" 2>&1
	check_eq "llama.cpp quantizes gemma4 to Q8_0" "$?" 0
	FROM=$TMP/gemma4-q8.gguf MIN_COMPARED=10 arch_compare gemma4-q8_0 0.25 0.25 ""
fi
# gemma4 E2B/E4B-style (gemma4-e-tiny): per-layer token embeddings (32 a layer: the
# projected and normed input plus the token's rows, gelu-gated into each layer's output),
# the last 3 layers sharing KV (3, 4 read layer 1's cache, 5 layer 2's; the KV cache holds
# layers 0-2 only) with FFNs twice as wide (feed_forward_length a per-layer list, as the
# converter writes use_double_wide_mlp). Measured 2026-12-01: f32 2.0e-3 (seeds 3-5 <=
# 3.5e-3; more GELU table lookups than gemma4-tiny, hence 1e-2), f16 7.3e-3, q8_0 7.2e-2
# (25 steps; seeds 3-13: 7-25 steps, worst 0.12, none failing).
arch_compare gemma4-e-f32 0 1e-2 "${F32KV[*]}" --shape gemma4-e-tiny --dtype f32 --seed 3
arch_compare gemma4-e-f16 0.02 0.03 "" --shape gemma4-e-tiny --dtype f16 --seed 3
MIN_COMPARED=10 arch_compare gemma4-e-q8_0 0.25 0.25 "" --shape gemma4-e-tiny --dtype q8_0 --seed 8
# gemma4 with experts (26B-A4B; gemma4-moe-tiny): layer 0 dense, layers 1-2 the dense GELU
# FFN (ffn_norm, post_ffw_norm_1) plus 4 GELU experts of 32, 2 a token (pre_ffw_norm_2,
# post_ffw_norm_2), summed before post_ffw_norm; the router on rmsnorm(x) / sqrt(n_embd) x
# ffn_gate_inp.scale, softmax, renormalized; per-expert down scales (ffn_down_exps.scale).
# -gu: the experts' gate and up in one ffn_gate_up_exps. q8_0: the f32 file quantized by
# llama.cpp's own quantizer.
arch_compare gemma4-moe-f32 0 5e-3 "${F32KV[*]}" --shape gemma4-moe-tiny --dtype f32 --seed 3
arch_compare gemma4-moe-gu-f32 0 5e-3 "${F32KV[*]}" --shape gemma4-moe-gu-tiny --dtype f32 --seed 4
if q=$(shared tools/llama_quantize.c) && [[ gemma4-moe-q8_0 == "${ARCH_ONLY:-}"* ]]; then
	LLAMA_LIB=bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
	[ -x "$TMP/llama_quantize_g4" ] || cc -O1 "$q" -o "$TMP/llama_quantize_g4" -ldl
	check "synth gemma4-moe-gu f32 (to quantize)" "$BATCHGEN" synth \
		--shape gemma4-moe-gu-tiny --dtype f32 --seed 13 -o "$TMP/gemma4-moe-src.gguf"
	LD_LIBRARY_PATH=$LLAMA_LIB "$TMP/llama_quantize_g4" $LLAMA_LIB/libllama.v0.5.0.so \
		"$TMP/gemma4-moe-src.gguf" "$TMP/gemma4-moe-q8.gguf" Q8_0 >"$TMP/quantize-g4m.log" 2>&1
	check_eq "llama.cpp quantizes gemma4-moe-gu to Q8_0" "$?" 0
	FROM=$TMP/gemma4-moe-q8.gguf MIN_COMPARED=10 arch_compare gemma4-moe-q8_0 0.25 0.25 ""
fi
# glm4 (llama.cpp's glm4 graph; glm4-tiny): interleaved RoPE over 8 of 16 head dimensions
# (the converter's partial_rotary_factor 0.5), Q/K/V biases, post_attention_norm and
# post_ffw_norm on the branch outputs, SwiGLU over ffn_up's gate|up halves, one NextN layer
# after the 2 computed ones (skipped by both), norm weights 1 + N(0, 0.25^2). q8_0: the
# f32 file quantized by llama.cpp's own quantizer (norms and biases kept f32).
arch_compare glm4-f32 0 2e-5 "${F32KV[*]}" --shape glm4-tiny --dtype f32 --seed 3
if q=$(shared tools/llama_quantize.c) && [[ glm4-q8_0 == "${ARCH_ONLY:-}"* ]]; then
	LLAMA_LIB=bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
	cc -O1 "$q" -o "$TMP/llama_quantize_glm4" -ldl
	check "synth glm4 f32 (to quantize)" "$BATCHGEN" synth --shape glm4-tiny --dtype f32 \
		--seed 4 -o "$TMP/glm4-src.gguf"
	LD_LIBRARY_PATH=$LLAMA_LIB "$TMP/llama_quantize_glm4" $LLAMA_LIB/libllama.v0.5.0.so \
		"$TMP/glm4-src.gguf" "$TMP/glm4-q8.gguf" Q8_0 >"$TMP/quantize-glm4.log" 2>&1
	check_eq "llama.cpp quantizes glm4 to Q8_0" "$?" 0
	FROM=$TMP/glm4-q8.gguf arch_compare glm4-q8_0 0.1 0.25 "${F32KV[*]}"
fi
# glm4moe (llama.cpp's glm4moe graph; glm4moe-tiny): NeoX RoPE over 16 of 32 head
# dimensions, Q/K norms, Q/K/V biases, post_attention_norm as the FFN's input norm; layer 0
# dense, layers 1-2 routed: sigmoid gating, the exp_probs_b selection bias (the choice
# only), norm, scale 2.5, plus the shared expert; one NextN layer skipped.
arch_compare glm4moe-f32 0 2e-5 "${F32KV[*]}" --shape glm4moe-tiny --dtype f32 --seed 3
if q=$(shared tools/llama_quantize.c) && [[ glm4moe-q8_0 == "${ARCH_ONLY:-}"* ]]; then
	LLAMA_LIB=bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
	cc -O1 "$q" -o "$TMP/llama_quantize_glm4moe" -ldl
	check "synth glm4moe f32 (to quantize)" "$BATCHGEN" synth --shape glm4moe-tiny \
		--dtype f32 --seed 5 -o "$TMP/glm4moe-src.gguf"
	LD_LIBRARY_PATH=$LLAMA_LIB "$TMP/llama_quantize_glm4moe" $LLAMA_LIB/libllama.v0.5.0.so \
		"$TMP/glm4moe-src.gguf" "$TMP/glm4moe-q8.gguf" Q8_0 \
		>"$TMP/quantize-glm4moe.log" 2>&1
	check_eq "llama.cpp quantizes glm4moe to Q8_0" "$?" 0
	FROM=$TMP/glm4moe-q8.gguf arch_compare glm4moe-q8_0 0.1 0.25 "${F32KV[*]}"
fi
# deepseek2 (llama.cpp's deepseek2 graph, MLA in its absorbed form; deepseek2-tiny): q
# through attn_q_a, its norm and attn_q_b; the latent through attn_kv_a_mqa and its norm,
# the rope part rotated (interleaved, 16 of the cache row's 48); attn_k_b absorbed into the
# queries, attn_v_b on each head's output; YaRN 4 with mscale_all_dim 0.707 (the attention
# scale x 1.21); layer 0 dense, layers 1-2 sigmoid-routed with the selection bias in 4
# groups of which 2, norm, scale 2.5, a shared expert. deepseek2-lite-tiny: a plain
# attn_q, softmax gating in 2 groups of which 1, no norm, no scale, 2 shared experts.
# deepseek2-gu: deepseek2-tiny with the experts' gate and up in one ffn_gate_up_exps
arch_compare deepseek2-gu-f32 0 2e-5 "${F32KV[*]}" --shape deepseek2-gu-tiny --dtype f32 --seed 3
for ds in deepseek2:3:5 deepseek2-lite:3:4; do
	IFS=: read -r dn sf sq <<<"$ds"
	arch_compare "$dn-f32" 0 2e-5 "${F32KV[*]}" --shape "$dn-tiny" --dtype f32 --seed "$sf"
	if q=$(shared tools/llama_quantize.c) && [[ $dn-q8_0 == "${ARCH_ONLY:-}"* ]]; then
		LLAMA_LIB=bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
		[ -x "$TMP/llama_quantize_ds2" ] || cc -O1 "$q" -o "$TMP/llama_quantize_ds2" -ldl
		check "synth $dn f32 (to quantize)" "$BATCHGEN" synth --shape "$dn-tiny" \
			--dtype f32 --seed "$sq" -o "$TMP/$dn-src.gguf"
		LD_LIBRARY_PATH=$LLAMA_LIB "$TMP/llama_quantize_ds2" $LLAMA_LIB/libllama.v0.5.0.so \
			"$TMP/$dn-src.gguf" "$TMP/$dn-q8.gguf" Q8_0 >"$TMP/quantize-$dn.log" 2>&1
		check_eq "llama.cpp quantizes $dn to Q8_0" "$?" 0
		FROM=$TMP/$dn-q8.gguf arch_compare "$dn-q8_0" 0.1 0.25 "${F32KV[*]}"
	fi
done
# gpt-oss as released: MXFP4 experts, the rest Q8_0, written by llama.cpp's own quantizer
# (ftype MOSTLY_MXFP4_MOE, 38, which ../shared/tools/llama_quantize.c does not list: a copy
# here adds it). Both multiply MXFP4 and Q8_0 by Q8_0 activations in int8 (cpu/qdot.h);
# the q8_0 margin and bound.
if [ -z "${ARCH_ONLY:-}" ] && q=$(shared tools/llama_quantize.c); then
	LLAMA_LIB=bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
	sed 's/{"TQ2_0", 37},/{"TQ2_0", 37}, {"MXFP4_MOE", 38},/' "$q" >"$TMP/llama_quantize.c"
	cc -O1 "$TMP/llama_quantize.c" -o "$TMP/llama_quantize" -ldl
	check "synth gpt-oss f16" "$BATCHGEN" synth --shape gpt-oss-tiny --dtype f16 --seed 7 \
		-o "$TMP/gpt-oss-src.gguf"
	LD_LIBRARY_PATH=$LLAMA_LIB "$TMP/llama_quantize" $LLAMA_LIB/libllama.v0.5.0.so \
		"$TMP/gpt-oss-src.gguf" "$TMP/gpt-oss-mx.gguf" MXFP4_MOE >"$TMP/quantize.log" 2>&1
	check_eq "llama.cpp quantizes gpt-oss to MXFP4_MOE" "$?" 0
	check_eq "MXFP4_MOE: the experts in mxfp4, the rest q8_0" \
		"$("$BATCHGEN" info -m "$TMP/gpt-oss-mx.gguf" | awk '/ffn_(gate|up|down)_exps |attn_q / {print $2}' | tr '\n' ' ')" \
		"q8_0 mxfp4 mxfp4 mxfp4 "
	FROM=$TMP/gpt-oss-mx.gguf arch_compare gpt-oss-mxfp4 0.1 0.25 "${F32KV[*]}"
	# seed_oss and apertus in Q8_0 by llama.cpp's quantizer (norms, biases kept f32), from
	# f32 files: seeds 9 and 7 compare 35 and 36 steps (others stop at a top-2 margin < 0.1
	# after 13-32 steps, none failing)
	for qa in seed_oss:9 apertus:7; do
		check "synth ${qa%:*} f32" "$BATCHGEN" synth --shape "${qa%:*}-tiny" --dtype f32 \
			--seed "${qa#*:}" -o "$TMP/${qa%:*}-src.gguf"
		LD_LIBRARY_PATH=$LLAMA_LIB "$TMP/llama_quantize" $LLAMA_LIB/libllama.v0.5.0.so \
			"$TMP/${qa%:*}-src.gguf" "$TMP/${qa%:*}-q8.gguf" Q8_0 \
			>"$TMP/quantize.log" 2>&1
		check_eq "llama.cpp quantizes ${qa%:*} to Q8_0" "$?" 0
		FROM=$TMP/${qa%:*}-q8.gguf arch_compare "${qa%:*}-q8_0" 0.1 0.25 "${F32KV[*]}"
	done
fi

# Every layer windowed (gemma2 with sliding_window_pattern 0, window 16): the engine gives
# back the KV blocks behind the window. A pool of 8 blocks of 4 tokens holds the 41-token
# prompt + 12 only that way; the interleaved file (gemma2-tiny) keeps every block and is
# refused in the same pool.
if [ -z "${ARCH_ONLY:-}" ]; then
BGOPTS="--block-size 4 --kv-tokens 32 --max-num-tokens 8 --stats $TMP/swa.stats"
arch_compare gemma2-swa-f32 0 5e-3 "${F32KV[*]}" --shape gemma2-swa-tiny --dtype f32 --seed 3
check "gemma2-swa: blocks behind the window were given back" \
	test "$(node -e 'let n = 0; for (const l of require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n")) n += JSON.parse(l).kv_cache.window_dropped_blocks; console.log(n)' "$TMP/swa.stats")" -gt 0
BGOPTS=""
"$BATCHGEN" -m "$TMP/gemma2-f32.gguf" -i "$TMP/prompts.in.jsonl" -o "$TMP/inter.out.jsonl" \
	-q --block-size 4 --kv-tokens 32 --max-num-tokens 8 2>/dev/null
check_eq "gemma2 (interleaved global layers) in the same pool: the long prompt is refused" \
	"$(node -e 'for (const l of require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n")) { const r = JSON.parse(l); if (r.id === "p2") console.log(r.error ? r.error.code : "ran") }' "$TMP/inter.out.jsonl")" too_long
fi

arch_verdicts
summary
