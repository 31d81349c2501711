#!/usr/bin/env bash
# e2e_gpu_emu: the binary on the CUDA backend as the user runs it, with the backend built
# against the CPU emulator (gpu/emu/run.sh --plugin-only) and loaded through
# $BATCHGEN_CUDA_LIB, so that every `make test` runs gpu/ end to end once under the strict
# emulator (H100 properties, so decode attention splits > 1; threads and blocks in the
# random order of a seed; NaN-filled shared memory; capture rules; queued stream work run
# late, early or at random: $BG_EMU_STREAMS):
#  - the emulator's stream policies themselves (tests/emu_test_streams.cpp), its dynamic
#    shared memory and the limits on it (tests/emu_test_smem.cu), its check of programmatic
#    dependent launches (tests/emu_test_pdl.cu; the binary's runs below use them too: the
#    emulated device is 9.0);
#  - greedy and seeded sampled requests give the CPU backend's tokens, and cumulative
#    log-probs within 1e-4 (the emulated kernels reduce in another order than the CPU's
#    SIMD code; a wrong kernel moves them by far more on this model), under seeds 7, 8
#    and 9 (streams late, early, random); the same for a tiny file of each architecture
#    of core/model/arch.h;
#  - BG_CUDA_CHAIN=0 (each decode GEMV its own launch) gives the chained run's tokens and
#    log-probs bit for bit;
#  - 16-bit models (bf16, f16) give the CPU backend's tokens with their prompts on the
#    tensor-core prefill kernel, under seeds 1, 2 and 3;
#  - block reuse, n > 1 and beam search give the CPU backend's sequences;
#  - overlap (tokens drawn and fed on the device, results read back behind an event):
#    the result lines of --overlap off, bitwise where the batches are the same; the CPU
#    backend's tokens; overlap on with streams at random ($BG_EMU_SEED, default 1), which
#    moves where the uploads and the read-back run against the host's writes and reads;
#  - constrained lines (grammar, json_schema, regex, choice, logit controls) give the CPU
#    backend's tokens (gpu/mask.cu);
#  - a request whose logits turn NaN fails alone with backend_error (tests/e2e_nan.sh),
#    beam searches too;
#  - a driver older than the build's CUDA (the emulator plays one with
#    $BG_EMU_DRIVER_VERSION): `--device cuda` exits 3 naming both versions; `--device
#    auto` warns with the same sentence and runs on the CPU; no driver at all says so.
. tests/check.sh
. tests/need_jq.sh
need_jq || { summary; exit; }
command -v g++ >/dev/null || { echo "SKIP: g++ not found"; summary; exit; }

plugin=${BG_EMU_PLUGIN_DIR:-$TMP/emu} # built once a run of the suite (tests/run.sh)
if ! bash gpu/emu/run.sh "$TMP/emu" --plugin-only >"$TMP/build.log" 2>&1; then
	cat "$TMP/build.log" >&2
	check "the emulated CUDA backend builds" false
	summary
	exit
fi
export BATCHGEN_CUDA_LIB=$plugin/libbatchgen-cuda.so

# the stream policies on a tiny program with hand-made expectations (its header says which)
if g++ -std=c++17 -O2 -Igpu/emu/inc -Icore -I. tests/emu_test_streams.cpp "$plugin/o/emu.o" \
	-o "$TMP/emu_streams" 2>"$TMP/streams.log"; then
	for pol in late early random; do
		BG_EMU_STREAMS=$pol "$TMP/emu_streams" >"$TMP/streams.log" 2>&1
		rc=$?
		check_eq "emulator, streams $pol: tests/emu_test_streams.cpp exits 0" $rc 0
		[ $rc -eq 0 ] || cat "$TMP/streams.log" >&2
	done
else
	cat "$TMP/streams.log" >&2
	check "tests/emu_test_streams.cpp builds" false
fi

# emu_test NAME WHAT [VAR=VALUE ...]: tests/emu_test_NAME.cu through the transform as gpu/*.cu
# go, linked with the emulator and run (with the variables given): it must exit 0
emu_test() {
	local name=$1 what=$2 log=$TMP/$1.log
	shift 2
	if python3 gpu/emu/transform.py "tests/emu_test_$name.cu" "$TMP/emu_test_$name.cpp" 2>"$log" &&
		g++ -std=c++17 -O2 -w -rdynamic -Igpu/emu/inc -Icore -I. "$TMP/emu_test_$name.cpp" \
			"$plugin/o/emu.o" -o "$TMP/emu_$name" 2>>"$log"; then
		env "$@" "$TMP/emu_$name" >"$log" 2>&1
		local rc=$?
		check_eq "emulator, $what: tests/emu_test_$name.cu exits 0 ($(tail -1 "$log"))" $rc 0
		[ $rc -eq 0 ] || cat "$log" >&2
	else
		cat "$log" >&2
		check "tests/emu_test_$name.cu builds" false
	fi
}
# dynamic shared memory and CUDA's limits on it (tests/emu_test_smem.cu says which)
emu_test smem "dynamic shared memory"
# programmatic dependent launch: the helpers of gpu/pdl.cuh and the emulator's strict check
# of their contract (tests/emu_test_pdl.cu says which), every block checked
emu_test pdl "dependent launches" BG_EMU_PDL=all

cat >"$TMP/in.jsonl" <<'JSONL'
{"id":"a","prompt":"Once upon a time","max_tokens":8,"temperature":0}
{"id":"b","prompt":"The cat sat on","max_tokens":8,"temperature":0}
{"id":"c","prompt":"hello","max_tokens":8,"temperature":0.8,"top_p":0.9,"seed":3}
JSONL
"$BATCHGEN" -q -i "$TMP/in.jsonl" -o "$TMP/cpu.jsonl" --device cpu
tokens() { jq -c '[.id, .token_ids, .error]' "$1" | sort; }
# lp_far CPU.jsonl GPU.jsonl TOL: the ids whose cumulative log-prob is more than TOL off the CPU's
lp_far() {
	jq -s -r '[.[] | {(.id): .cum_logprob}] | add' "$1" >"$TMP/far.lp" &&
		jq -r --slurpfile c "$TMP/far.lp" --argjson tol "$3" \
			'select(((.cum_logprob - $c[0][.id]) | fabs) > $tol or .cum_logprob == null) | .id' "$2"
}
# three seeds of the emulator's orders (threads between barriers, blocks, wmma layouts),
# each with another stream policy
for seed in 7:late 8:early 9:random; do
	pol=${seed#*:} seed=${seed%:*}
	BG_EMU_SEED=$seed BG_EMU_STREAMS=$pol "$BATCHGEN" -q -i "$TMP/in.jsonl" -o "$TMP/gpu.jsonl" \
		--device cuda 2>"$TMP/gpu.err"
	check_eq "cuda (emulated, seed $seed, streams $pol): exit status" $? 0
	check_eq "cuda (emulated, seed $seed, streams $pol): the CPU backend's tokens" "$(tokens "$TMP/gpu.jsonl")" \
		"$(tokens "$TMP/cpu.jsonl")"
	check_eq "cuda (emulated, seed $seed, streams $pol): cumulative log-probs within 1e-4 of the CPU's" \
		"$(lp_far "$TMP/cpu.jsonl" "$TMP/gpu.jsonl" 1e-4)" ""
	[ "$seed" = 9 ] && cp "$TMP/gpu.jsonl" "$TMP/gpu_chain.jsonl"
done
# the decode GEMVs chained (gpu_gemv_chain, the default) and one launch each (BG_CUDA_CHAIN=0):
# the same tokens and log-probs, bit for bit (the same arithmetic in the same order)
BG_EMU_SEED=9 BG_EMU_STREAMS=random BG_CUDA_CHAIN=0 "$BATCHGEN" -q -i "$TMP/in.jsonl" \
	-o "$TMP/gpu_nochain.jsonl" --device cuda 2>"$TMP/gpu.err"
check_eq "cuda (emulated), BG_CUDA_CHAIN=0: exit status" $? 0
lps() { jq -c '[.id, .token_ids, .cum_logprob]' "$1" | sort; }
check_eq "cuda (emulated): chained and unchained GEMVs give the same tokens and log-probs" \
	"$(lps "$TMP/gpu_nochain.jsonl")" "$(lps "$TMP/gpu_chain.jsonl")"

# ---- block reuse and n > 1 on the CUDA backend (issue 14): cached prompt blocks and
# samples whose shared last block is copied on write (the backend's kv_copy), one request
# at a time so that later ones hit the cache; the same tokens as the CPU backend
cat >"$TMP/reuse.jsonl" <<'JSONL'
{"id":"r1","prompt":"Once upon a time there was a little dog who liked to run","max_tokens":6,"temperature":0}
{"id":"r2","prompt":"Once upon a time there was a little dog who liked to run","max_tokens":6,"temperature":0.7,"seed":5,"n":3}
{"id":"r3","prompt":"Once upon a time there was a little dog who liked to sleep","max_tokens":6,"temperature":0}
JSONL
reuse=(-q -i "$TMP/reuse.jsonl" --block-size 4 --max-batch-size 3)
"$BATCHGEN" "${reuse[@]}" -o "$TMP/reuse_cpu.jsonl" --device cpu
"$BATCHGEN" "${reuse[@]}" -o "$TMP/reuse_gpu.jsonl" --device cuda
check_eq "cuda (emulated), reuse and n = 3: exit status" $? 0
samples() { jq -c '[.id, .usage.cached_tokens, (.choices // [.] | map(.token_ids))]' "$1"; }
check_eq "cuda (emulated), reuse and n = 3: the CPU backend's tokens and cached tokens" \
	"$(samples "$TMP/reuse_gpu.jsonl")" "$(samples "$TMP/reuse_cpu.jsonl")"
check "cuda (emulated): later requests took cached blocks" \
	test "$(jq -s 'map(.usage.cached_tokens) | add' "$TMP/reuse_gpu.jsonl")" -gt 0

# ---- constraints on the CUDA backend (issue 15): gpu/mask.cu applies each constrained
# row's mask and biases on the device; a batch mixing constrained and free rows gives the
# CPU backend's tokens for grammar, json_schema, regex, choice, the logit controls and
# n = 2 under a regex (both samples' first rows read one logits row)
cat >"$TMP/con.jsonl" <<'JSONL'
{"id":"g","prompt":"Once upon a time","max_tokens":5,"temperature":0,"grammar":"root ::= \"[\" [0-9]+ (\", \" [0-9]+)* \"]\""}
{"id":"j","prompt":"The cat","max_tokens":5,"temperature":0.8,"seed":4,"json_schema":{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer"}},"required":["name","age"]}}
{"id":"c","prompt":"hello","max_tokens":5,"temperature":0.9,"seed":5,"choice":["alpha","beta","gamma delta"]}
{"id":"u","prompt":"The cat sat on","max_tokens":5,"temperature":0.7,"seed":9}
{"id":"b","prompt":"The cat sat on","max_tokens":5,"temperature":0.7,"seed":9,"logit_bias":{"261":-100,"276":2.5},"bad_words":["big tree","He"],"min_tokens":8}
{"id":"n","prompt":"hello","max_tokens":5,"temperature":0.9,"seed":3,"n":2,"regex":"[a-z]{2,8}( [a-z]{2,8})?"}
JSONL
"$BATCHGEN" -q -i "$TMP/con.jsonl" -o "$TMP/con_cpu.jsonl" --device cpu
"$BATCHGEN" -q -i "$TMP/con.jsonl" -o "$TMP/con_gpu.jsonl" --device cuda
check_eq "cuda (emulated), constraints: exit status" $? 0
check_eq "cuda (emulated), constraints: no line refused" \
	"$(jq -c 'select(.error != null) | .id' "$TMP/con_gpu.jsonl")" ""
check_eq "cuda (emulated), constraints: the CPU backend's tokens" \
	"$(samples "$TMP/con_gpu.jsonl")" "$(samples "$TMP/con_cpu.jsonl")"
check "cuda (emulated), constraints: the choice is one of the choices" \
	grep -qxE 'alpha|beta|gamma delta' <(jq -r 'select(.id == "c") | .text' "$TMP/con_gpu.jsonl")
lp() { jq -c '{(.id): [(.choices // [.])[].cum_logprob]}' "$1" | jq -s add; }
far=$(lp "$TMP/con_cpu.jsonl" >"$TMP/con_cpu.lp" && lp "$TMP/con_gpu.jsonl" |
	jq -r --slurpfile c "$TMP/con_cpu.lp" \
		'to_entries[] | select([.key as $k | .value | to_entries[] | (.value - $c[0][$k][.key]) | fabs | select(. > 1e-4)] | length > 0) | .key')
check_eq "cuda (emulated), constraints: cumulative log-probs within 1e-4 of the CPU's" "$far" ""

# ---- beam search on the CUDA backend (issue 14): beams of widths 3 and 4 beside a greedy
# request, blocks of 4 tokens so that beams copy partly filled blocks on write and follow
# each other's tables; the same beams, in the same order, as the CPU backend, cumulative
# log-probs within 1e-4
cat >"$TMP/beam.jsonl" <<'JSONL'
{"id":"b1","prompt":"Once upon a time there was a little dog","max_tokens":7,"beam_width":3,"n":3}
{"id":"b2","prompt":"The cat sat on","max_tokens":5,"temperature":0}
{"id":"b3","prompt":"Lily and Ben went to the park.","max_tokens":6,"beam_width":4,"n":2,"length_penalty":0.5,"logprobs":1}
JSONL
beam=(-q -i "$TMP/beam.jsonl" --block-size 4)
"$BATCHGEN" "${beam[@]}" -o "$TMP/beam_cpu.jsonl" --device cpu
"$BATCHGEN" "${beam[@]}" -o "$TMP/beam_gpu.jsonl" --device cuda
check_eq "cuda (emulated), beam search: exit status" $? 0
beams() { jq -c '[.id, .error, (.choices // [.] | map([.token_ids, .finish_reason]))]' "$1"; }
check_eq "cuda (emulated), beam search: the CPU backend's beams" \
	"$(beams "$TMP/beam_gpu.jsonl")" "$(beams "$TMP/beam_cpu.jsonl")"
check_eq "beam search: the requests return 3, 1 and 2 sequences" \
	"$(jq -c '(.choices // [.]) | length' "$TMP/beam_cpu.jsonl" | tr '\n' ' ')" "3 1 2 "
far=$(jq -s -r '[.[] | {(.id): [(.choices // [.])[].cum_logprob]}] | add' "$TMP/beam_cpu.jsonl" \
	>"$TMP/beam.lp" && jq -r --slurpfile c "$TMP/beam.lp" \
	'. as $r | (.choices // [.]) | to_entries[] |
	 select(((.value.cum_logprob - $c[0][$r.id][.key]) | fabs) > 1e-4) | $r.id' \
	"$TMP/beam_gpu.jsonl")
check_eq "cuda (emulated), beam search: cumulative log-probs within 1e-4 of the CPU's" "$far" ""

# ---- overlap on the CUDA backend (engine.c, "Overlap"; BACKEND_CAP_ASYNC makes it the
# default there): the drawn tokens stay on the device, where the next forward's embedding
# gather reads the ones prev_rows names (gpu_embed), and the results come back behind an
# event. Stop strings, EOS, log-probs, prompt log-probs, penalties, n > 1, a beam search, a
# JSON constraint: under no-evict the batches are the same on and off, and --overlap on
# gives the result lines of --overlap off bitwise (timings excepted). In a pool small
# enough to preempt, overlap frees a finished request's blocks one step later, so the
# schedule differs from iteration 7 on; the CUDA backend is not batch invariant (split
# counts per batch bucket), so there the tokens are the same and log-probs within 1e-5
# (they differ by ~2e-6). Both: the CPU backend's tokens.
cat >"$TMP/ovl.jsonl" <<'JSONL'
{"id":"a","prompt":"Once upon a time","max_tokens":12,"temperature":0,"stop":[","]}
{"id":"b","prompt":"The cat sat on","max_tokens":10,"temperature":0.8,"seed":5,"logprobs":2,"repetition_penalty":1.3}
{"id":"c","prompt":"hello","max_tokens":8,"temperature":0.9,"top_p":0.9,"seed":3,"n":3}
{"id":"d","prompt":"Lily and Ben","max_tokens":6,"beam_width":3,"n":2}
{"id":"e","prompt":"Tom had a red ball","max_tokens":10,"temperature":0.7,"seed":9,"prompt_logprobs":1}
{"id":"f","prompt":"One day","max_tokens":10,"temperature":0,"response_format":{"type":"json_object"}}
{"id":"g","prompt":"The sun was","max_tokens":14,"temperature":1.0,"seed":11,"frequency_penalty":0.5,"stop":[" the"]}
JSONL
for setup in "--policy no-evict" "--policy max-util --kv-tokens 96 --block-size 8"; do
	# shellcheck disable=SC2086
	"$BATCHGEN" -q -i "$TMP/ovl.jsonl" -o "$TMP/ovl_cpu.jsonl" --device cpu $setup
	for o in off on; do
		pol=late
		[ $o = on ] && pol=random
		# shellcheck disable=SC2086
		BG_EMU_STREAMS=$pol "$BATCHGEN" -q -i "$TMP/ovl.jsonl" -o "$TMP/ovl_$o.jsonl" --device cuda \
			--overlap $o $setup
		check_eq "cuda (emulated), overlap $o ($setup): exit status" $? 0
		jq -c 'del(.metrics)' "$TMP/ovl_$o.jsonl" >"$TMP/ovl_$o.lines"
	done
	check_eq "cuda (emulated), overlap on ($setup): the CPU backend's tokens" \
		"$(samples "$TMP/ovl_on.jsonl")" "$(samples "$TMP/ovl_cpu.jsonl")"
	check_eq "cuda (emulated), overlap on ($setup): the tokens of overlap off" \
		"$(samples "$TMP/ovl_on.jsonl")" "$(samples "$TMP/ovl_off.jsonl")"
	if [ "$setup" = "--policy no-evict" ]; then
		check "cuda (emulated), no-evict: overlap on gives the result lines of overlap off" \
			cmp -s "$TMP/ovl_off.lines" "$TMP/ovl_on.lines"
	else
		far=$(lp "$TMP/ovl_off.jsonl" >"$TMP/ovl_off.lp" && lp "$TMP/ovl_on.jsonl" |
			jq -r --slurpfile c "$TMP/ovl_off.lp" \
				'to_entries[] | select([.key as $k | .value | to_entries[] | (.value - $c[0][$k][.key]) | fabs | select(. > 1e-5)] | length > 0) | .key')
		check_eq "cuda (emulated), max-util: cumulative log-probs of overlap on and off within 1e-5" \
			"$far" ""
	fi
done
check "cuda (emulated), overlap: the small pool preempted" \
	test "$(jq -s '[.[].metrics.preemptions] | add' "$TMP/ovl_on.jsonl")" -gt 0
check "cuda (emulated), overlap: a request stopped on its stop string" \
	test "$(jq -s '[.[] | select(.finish_reason == "stop")] | length' "$TMP/ovl_on.jsonl")" -gt 0

# two prompts for the tiny files below: 32 tokens (past their windows) and 4
printf '%s\n' '{"id":"w","input_ids":[1,290,291,292,293,294,295,296,297,298,299,300,301,302,303,304,305,306,307,308,309,310,311,312,313,314,315,316,317,318,319,320],"max_tokens":6,"temperature":0,"ignore_eos":true}' \
	'{"id":"s","input_ids":[1,5,77,260],"max_tokens":6,"temperature":0,"ignore_eos":true}' >"$TMP/arch.jsonl"
# The sweeps of the kernels (every architecture, the 16-bit models under three seeds, the
# i-quant files) run in the plain binary's pass only: the emulated plugin they check is the
# same unsanitized build under both binaries (gpu/emu/run.sh), and the sanitized binary's
# own part of them, the CPU backend's runs of each file, is e2e_llamacpp_arch's sanitized
# pass. The sections before and after (streams, reuse, beams, constraints, overlap, NaN,
# windows, drivers) run the binary's host side on the CUDA backend and run in both passes.
if ldd "$BATCHGEN" 2>/dev/null | grep -q libasan; then
	echo "note: the kernel sweeps run in the plain binary's pass (this binary is sanitized)"
else
	# ---- the architectures of core/model/arch.h (tiny f32 files, prompts past their windows) --
	# Every feature's kernel runs here: rope factors and YaRN, Q/K norms, embedding scale, GELU,
	# post-norms, soft-caps, windowed layers (tiled prompt and per-query decode), LongRoPE, and
	# the mixture-of-experts FFN (gpu/moe.cuh: both prompts' tokens routed and grouped in one
	# pass, then the batch-2 decode graph); gpt-oss's attention sinks, O bias, biased router and
	# experts and clamped SwiGLU; olmo2's whole-row Q/K norms and absent pre-norms; granite's
	# embedding, attention, residual and logit scales; mistral3's attention temperature (the
	# 32-token prompt crosses its floor of 16); smollm3's layers without RoPE; seed_oss's Q/K/V
	# biases and renamed FFN norm; apertus's Q/K norms, O bias and xIELU FFN (gpu_xielu); gemma4's
	# two layer geometries (head sizes 16 and 32, 2 and 1 K/V heads), V = K, V norm and output
	# scales; and at the released models' head sizes (256 windowed, 512 global: the per-query
	# kernel with 16 dimensions a lane); glm4's partial interleaved RoPE, Q/K/V biases,
	# post-norms and skipped NextN layer; glm4moe's dense layer, sigmoid routing with the
	# selection bias and scale, and shared expert; command-r's LayerNorms, parallel block,
	# logit scale and (64 layers) per-head Q/K LayerNorms; cohere2's RoPE on the windowed
	# layers only; deepseek2's latent attention (V read from the K row) and grouped routing;
	# minimax-m2's whole-row Q/K norms, partial NeoX RoPE and sigmoid routing with a
	# selection bias but no shared expert.
	# lfm2moe's short-conv layers (gpu_shortconv: the bx rows in the cache across blocks; its
	# first layer a conv with a dense FFN, so that it stands for lfm2-tiny too, which the
	# 16-bit sweep below runs), its sigmoid routing over experts of their own width.
	# qwen35's delta-net layers (gpu_gdn: the state in its slot from the prompt's pass through
	# the decode steps) and output-gated attention (gpu_q_gate_split, gpu_attn_gate);
	# granitehybrid-moe-tiny's Mamba2 layers (gpu_ssm, the state in each sequence's slot
	# across passes), its unrotated attention layer, softmax routing with a wider shared
	# expert; qwen35moe-tiny's shared expert times its sigmoid gate (gpu_moe_shexp_gate);
	# qwen3next-tiny's value heads reading key heads repeat-interleaved (gpu_gdn_args.k_grouped);
	# nemotron_h_moe-tiny's one-block layers (Mamba2 or attention without an FFN,
	# FFN alone: the residual adds between them), its ReLU^2 experts (sigmoid routing with
	# the selection bias) and ReLU^2 shared expert (gpu_relu2, as nemotron_h's dense FFN).
	# step35-tail's windowed layers with their own query heads, the head-wise attention gate
	# (gpu_head_gate), the SwiGLU clamps (experts, shared expert, dense FFN) and its last
	# layer dense after MoE ones.
	# qwen3vl-tiny's multi-section RoPE (a pair unturned for text: the rope table's
	# frequencies; qwen2vl and qwen3vlmoe share that path, checked by hand 2026-12-02).
	# exaone4-swa-tiny's per-head Q/K norms without pre-norms, post-norms, windows on 3 of 4
	# of its 64 layers and no RoPE on the 4th; olmoe-tiny's whole-row Q/K norms and softmax
	# routing whose chosen weights are not renormalized.
	# gemma4-moe-gu-tiny's MoE layers (the dense GELU FFN beside GELU experts read from the
	# fused ffn_gate_up_exps in place, each branch post-normed; the router's scaled input;
	# the experts' down scales folded into the weights: gpu_moe_scale_w).
	# ernie4_5-moe-tiny's dense first layer, softmax routing with the selection bias
	# (moe_grouped without groups) and shared expert (ernie4_5's dense layer is llama's with
	# Q/K/V biases: mistral3-bias-tiny's path; gpu_test_model checks both).
	# hunyuan-moe-tiny's per-head Q/K norms after RoPE (gpu_qkv_post's norm_post_rope), its
	# experts as wide as feed_forward_length and wider shared expert.
	# bailingmoe2-tiny's fused attn_qkv (row views of one tensor), grouped sigmoid routing
	# with the selection bias, a shared expert after one dense layer.
	# llama4-tiny's Q/K norm after RoPE (qkv_post), its layer without RoPE, routing by the
	# largest logits with each expert's weight on its input, the shared expert beside dense
	# layers (its chunks of 8192 and temperature are past these prompts: gpu_test_model's
	# BG_GPU_ONLY_LLAMA4 shrinks them).
	# exaone-tiny's NeoX RoPE with rope_freqs on the fused decode path; arcee-tiny's
	# non-gated ReLU^2 FFN behind its own ffn_norm (unfused: gpu_relu2); dots1-tiny's
	# per-head Q/K norms, grouped-routing machinery without groups (sigmoid, the selection
	# bias, scale 2.5) and two shared experts after a dense layer; exaone-moe-tiny's windows
	# with RoPE on them only beside that routing with one shared expert of its own width.
	# bailingmoe-tiny's softmax routing in every layer with two shared experts (the
	# grouped-routing machinery without groups or bias); falcon-h1-tiny's Mamba2 block beside
	# every layer's attention (gpu_ssm on ssm_in's rows after Q|K|V, ssm_out added to the
	# attention's output), without the grouped norm (no_norm), falcon-h1-norm-tiny with it.
	for sh in llama3-tiny llama-yarn-tiny qwen3-tiny gemma2-tiny gemma3-tiny phi3-tiny qwen3moe-tiny \
		mixtral-tiny gpt-oss-tiny olmo2-tiny olmo3-tiny granite-tiny granitemoe-tiny mistral3-tiny \
		mistral3-bias-tiny smollm3-tiny seed_oss-tiny apertus-tiny gemma4-tiny gemma4-hd512-tiny \
		glm4-tiny glm4moe-tiny command-r-plus-tiny cohere2-tiny deepseek2-tiny minimax-m2-tiny \
		lfm2moe-tiny qwen35-tiny granitehybrid-moe-tiny qwen35moe-tiny qwen3next-tiny \
		nemotron_h_moe-tiny step35-tail qwen3vl-tiny exaone4-swa-tiny olmoe-tiny gemma4-moe-gu-tiny \
		ernie4_5-moe-tiny hunyuan-moe-tiny bailingmoe2-tiny llama4-tiny exaone-tiny arcee-tiny \
		dots1-tiny exaone-moe-tiny bailingmoe-tiny falcon-h1-tiny falcon-h1-norm-tiny; do
		"$BATCHGEN" synth --shape "$sh" --dtype f32 --seed 3 -o "$TMP/$sh.gguf" 2>/dev/null
		"$BATCHGEN" -q -m "$TMP/$sh.gguf" -i "$TMP/arch.jsonl" -o "$TMP/$sh.cpu.jsonl" --device cpu
		"$BATCHGEN" -q -m "$TMP/$sh.gguf" -i "$TMP/arch.jsonl" -o "$TMP/$sh.gpu.jsonl" --device cuda
		check_eq "$sh (emulated cuda): the CPU backend's tokens" "$(tokens "$TMP/$sh.gpu.jsonl")" \
			"$(tokens "$TMP/$sh.cpu.jsonl")"
		far=$(jq -s -r '[.[] | {(.id): .cum_logprob}] | add' "$TMP/$sh.cpu.jsonl" >"$TMP/$sh.lp" &&
			jq -r --slurpfile c "$TMP/$sh.lp" \
				'select(((.cum_logprob - $c[0][.id]) | fabs) > 1e-4 or .cum_logprob == null) | .id' \
				"$TMP/$sh.gpu.jsonl")
		check_eq "$sh (emulated cuda): cumulative log-probs within 1e-4 of the CPU's" "$far" ""
	done
	# recurrent state (state_copy on the device): n = 3 greedy samples fork from the prompt's
	# state, beams take their parents' at every step; r1 and r2 share a 32-token block: r1
	# checkpoints its state there (into a slot past the batch's) and r2 takes the block and
	# the state (block reuse through state checkpoints); the CPU backend's choices
	w=$(head -1 "$TMP/arch.jsonl" | jq -c '.input_ids')
	printf '%s\n' '{"id":"n3","input_ids":[1,5,77,260,9],"max_tokens":5,"temperature":0,"n":3,"ignore_eos":true}' \
		'{"id":"bw","input_ids":[1,290,291,292],"max_tokens":5,"beam_width":3,"n":2,"ignore_eos":true}' \
		"{\"id\":\"r1\",\"input_ids\":${w%]},40,41],\"max_tokens\":5,\"temperature\":0,\"ignore_eos\":true}" \
		"{\"id\":\"r2\",\"input_ids\":${w%]},50,51,52],\"max_tokens\":5,\"temperature\":0,\"ignore_eos\":true}" \
		>"$TMP/fork.jsonl"
	for sh in qwen35-tiny granitehybrid-moe-tiny falcon-h1-tiny; do
		for d in cpu cuda; do
			"$BATCHGEN" -q -m "$TMP/$sh.gguf" -i "$TMP/fork.jsonl" -o "$TMP/$sh.fork.$d.jsonl" \
				--device $d
		done
		check_eq "$sh (emulated cuda): n = 3, beam and reused choices, the CPU backend's" \
			"$(jq -c '[.id, [(.choices // [.])[].token_ids]]' "$TMP/$sh.fork.cuda.jsonl")" \
			"$(jq -c '[.id, [(.choices // [.])[].token_ids]]' "$TMP/$sh.fork.cpu.jsonl")"
		check_eq "$sh (emulated cuda): r2 took r1's block and state" \
			"$(jq -c 'select(.id == "r2") | .usage.cached_tokens' "$TMP/$sh.fork.cuda.jsonl")" 32
		check_eq "$sh: the three greedy samples are one" \
			"$(jq -c 'select(.id == "n3") | [.choices[].token_ids] | unique | length' \
				"$TMP/$sh.fork.cuda.jsonl")" 1
	done
	# 16-bit models: prompt chunks (>= GPU_ATTN_TILE_MIN tokens) go to the tensor-core prefill
	# kernel (heads of 16 and 32 dimensions; gemma2: soft-cap and window), under three seeds
	# (which also draw the emulated wmma fragment layouts). Log-probs within 0.05: the CUDA
	# backend rounds activations to the model's 16-bit type before each GEMM (and the
	# tensor-core kernel its queries and probabilities), the CPU backend keeps them in fp32:
	# ~1e-2 apart over 6 tokens here; a wrong kernel changes the tokens.
	# The mixture-of-experts shapes too (routers in fp32 on both sides; the experts' inputs
	# rounded as above): 0.012 (mixtral bf16) and 0.002 (qwen3moe f16) apart here. lfm2's
	# conv state in the 16-bit cache (bx rows rounded to f16; the CPU keeps fp32): 0.0025
	# (f16; bf16 would be 0.065, over this bound: gpu_test_model's test_lfm2 checks it).
	for m in llama3-tiny:bf16 llama3-tiny:f16 gemma2-tiny:bf16 mixtral-tiny:bf16 qwen3moe-tiny:f16 \
		gpt-oss-tiny:bf16 olmo2-tiny:bf16 lfm2-tiny:f16; do
		sh=${m%:*} dt=${m#*:}
		"$BATCHGEN" synth --shape "$sh" --dtype "$dt" --seed 3 -o "$TMP/$sh.$dt.gguf" 2>/dev/null
		"$BATCHGEN" -q -m "$TMP/$sh.$dt.gguf" -i "$TMP/arch.jsonl" -o "$TMP/$m.cpu.jsonl" --device cpu
		for seed in 1 2 3; do
			BG_EMU_SEED=$seed "$BATCHGEN" -q -m "$TMP/$sh.$dt.gguf" -i "$TMP/arch.jsonl" \
				-o "$TMP/$m.gpu.jsonl" --device cuda 2>/dev/null
			check_eq "$sh $dt (emulated cuda, seed $seed): the CPU backend's tokens" \
				"$(tokens "$TMP/$m.gpu.jsonl")" "$(tokens "$TMP/$m.cpu.jsonl")"
			check_eq "$sh $dt (emulated cuda, seed $seed): cumulative log-probs within 0.05 of the CPU's" \
				"$(lp_far "$TMP/$m.cpu.jsonl" "$TMP/$m.gpu.jsonl" 0.05)" ""
		done
		# one request decodes at batch 1: with 16-bit K/V the chain runs each layer's
		# attention too (gpu_gemv_chain's attention step; lfm2: after its qkv_post node):
		# bit for bit what the separate kernels give (BG_CUDA_CHAIN=0)
		case $m in llama3-tiny:bf16 | llama3-tiny:f16 | lfm2-tiny:f16)
			BG_EMU_SEED=3 BG_CUDA_CHAIN=0 "$BATCHGEN" -q -m "$TMP/$sh.$dt.gguf" -i "$TMP/arch.jsonl" \
				-o "$TMP/$m.nochain.jsonl" --device cuda 2>/dev/null
			check_eq "$sh $dt (emulated cuda): the attention chained and not, the same tokens and log-probs" \
				"$(lps "$TMP/$m.nochain.jsonl")" "$(lps "$TMP/$m.gpu.jsonl")"
			;;
		esac
	done
	# qwen35moe's fused ffn_gate_up_exps, read in place (model.h: strided expert views), in
	# q8_0: with BG_CUDA_QUANT=1 the resident expert path copies each expert's gate rows and
	# up rows from the strided file view into packed device arrays (blocks as they are), with
	# =0 each expert is dequantized to BF16 through model_expert. Both give the same tokens
	# (the stride ignored in the first changes all 12; against the CPU's q8_0 this tiny
	# model's near-ties flip a token at seed 3 on either CUDA path: the CPU's 8-bit
	# activations). On a file with the tensors apart both paths give the same lines
	# bitwise (checked by hand, bench/results/gateupmmap-2026-12-02.md).
	"$BATCHGEN" synth --shape qwen35moe-gu-tiny --dtype q8_0 --seed 3 -o "$TMP/gu.gguf" 2>/dev/null
	for q in 0 1; do
		BG_CUDA_QUANT=$q "$BATCHGEN" -q -m "$TMP/gu.gguf" -i "$TMP/arch.jsonl" \
			-o "$TMP/gu.$q.jsonl" --device cuda
	done
	check_eq "qwen35moe-gu-tiny q8_0 (emulated cuda): resident experts, the BF16 path's tokens" \
		"$(tokens "$TMP/gu.1.jsonl")" "$(tokens "$TMP/gu.0.jsonl")"
	# the lattice i-quants (gpu/dequant.cu: dequantized to BF16 at load): files of one type each,
	# made by ggml's own quantizer (tests/ggml_requant.c, as tests/e2e_llamacpp.sh makes them).
	# The tokens must be the CPU's; the log-probs are further apart than the 16-bit models'
	# because the CPU backend multiplies block-quantized weights by activations rounded to
	# llama.cpp's 8-bit blocks (cpu_kernels.h) and the CUDA backend by BF16 ones: cumulative
	# over 6 tokens, 0.04-0.17 apart here (2026-12-01), as far as llama.cpp's own Q4_K_M file of
	# this model (0.14; its f16 file: 0.002). A wrong element moves the tokens; the bits of each
	# element are tests/gpu_test_dequant.cu's.
	. tests/need_llamacpp.sh
	requant=$(dirname "$BATCHGEN")/tests/ggml_requant
	if need_llamacpp "the i-quant files on the emulated CUDA backend" && [ -x "$requant" ]; then
		"$BATCHGEN" synth --shape tiny --embd 256 --ffn 512 --heads 4 --kv-heads 2 --seed 5 \
			--dtype f16 -o "$TMP/iq-f16.gguf" 2>/dev/null
		for t in iq2_xxs iq2_s iq3_xxs iq3_s iq1_m; do
			llamacpp_make "$TMP/iq-$t.gguf" "$TMP/iq-f16.gguf" "$requant" \
				bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so \
				"$TMP/iq-f16.gguf" "$TMP/iq-$t.gguf" $t 2>/dev/null
			"$BATCHGEN" -q -m "$TMP/iq-$t.gguf" -i "$TMP/arch.jsonl" -o "$TMP/iq-$t.cpu.jsonl" --device cpu
			"$BATCHGEN" -q -m "$TMP/iq-$t.gguf" -i "$TMP/arch.jsonl" -o "$TMP/iq-$t.gpu.jsonl" --device cuda
			check_eq "$t (emulated cuda): the CPU backend's tokens" \
				"$(tokens "$TMP/iq-$t.gpu.jsonl")" "$(tokens "$TMP/iq-$t.cpu.jsonl")"
			check_eq "$t (emulated cuda): cumulative log-probs within 0.3 of the CPU's" \
				"$(lp_far "$TMP/iq-$t.cpu.jsonl" "$TMP/iq-$t.gpu.jsonl" 0.3)" ""
		done
	fi
fi
# every layer windowed: blocks behind the window are given back (-1 in the block table) in
# a pool of 8 blocks of 4 tokens, smaller than the 32-token prompt + 6
sh=gemma2-swa-tiny small=(--block-size 4 --kv-tokens 32 --max-num-tokens 8)
"$BATCHGEN" synth --shape "$sh" --dtype f32 --seed 3 -o "$TMP/$sh.gguf" 2>/dev/null
"$BATCHGEN" -q -m "$TMP/$sh.gguf" -i "$TMP/arch.jsonl" -o "$TMP/$sh.cpu.jsonl" --device cpu "${small[@]}"
"$BATCHGEN" -q -m "$TMP/$sh.gguf" -i "$TMP/arch.jsonl" -o "$TMP/$sh.gpu.jsonl" --device cuda \
	"${small[@]}" --stats "$TMP/$sh.stats"
check_eq "$sh (emulated cuda, small pool): the CPU backend's tokens" \
	"$(tokens "$TMP/$sh.gpu.jsonl")" "$(tokens "$TMP/$sh.cpu.jsonl")"
check "$sh (emulated cuda): 12 tokens and blocks given back" test \
	"$(jq -s '[.[].token_ids | length] | add' "$TMP/$sh.gpu.jsonl")" = 12 -a \
	"$(jq -s 'map(.kv_cache.window_dropped_blocks) | add' "$TMP/$sh.stats")" -gt 0

# ---- NaN logits (tests/e2e_nan.sh): the request whose logits turn NaN fails alone with
# backend_error, the others in its batch get the CPU backend's tokens; the engine reads
# the NaN from the log-prob the CUDA sampler reports (backend.h), as from the CPU's
"$BATCHGEN" synth --layers 2 --embd 32 --heads 2 --kv-heads 1 --ffn 64 --vocab 260 --ctx 64 \
	--no-tie --dtype f32 -o "$TMP/nanbase.gguf" 2>/dev/null
/usr/bin/python3 tests/gguf_nan.py "$TMP/nanbase.gguf" "$TMP/nan1.gguf" token_embd.weight 100
/usr/bin/python3 tests/gguf_nan.py "$TMP/nan1.gguf" "$TMP/nan.gguf" token_embd.weight 213
# beam: NaN in the prompt; beam2: in one beam of four, mid-search (tests/e2e_nan.sh)
cat >"$TMP/nan.jsonl" <<'JSONL'
{"id":"ok","input_ids":[1,5,6,7],"max_tokens":4,"logprobs":1}
{"id":"bad","input_ids":[1,5,100,7],"max_tokens":4,"logprobs":1}
{"id":"plp","input_ids":[1,100,7],"max_tokens":2,"prompt_logprobs":1}
{"id":"ok2","input_ids":[1,8,9],"max_tokens":3,"temperature":0.8,"seed":4}
{"id":"beam","input_ids":[1,5,100,7],"max_tokens":4,"beam_width":3,"n":2}
{"id":"beam2","input_ids":[1,1,5],"max_tokens":6,"beam_width":4,"n":4}
JSONL
"$BATCHGEN" -q -m "$TMP/nan.gguf" -i "$TMP/nan.jsonl" -o "$TMP/nan.cpu.jsonl" --device cpu
"$BATCHGEN" -q -m "$TMP/nan.gguf" -i "$TMP/nan.jsonl" -o "$TMP/nan.gpu.jsonl" --device cuda
check_eq "NaN logits (emulated cuda): exit status 1 (four lines failed)" $? 1
nanres() { jq -c '[.id, .token_ids, .finish_reason, .error.code, .choices]' "$1"; }
check_eq "NaN logits (emulated cuda): the CPU backend's results" "$(nanres "$TMP/nan.gpu.jsonl")" \
	"$(nanres "$TMP/nan.cpu.jsonl")"
check_eq "NaN logits (emulated cuda): bad, plp and the beam searches fail with backend_error" \
	"$(jq -r 'select(.error) | .id + " " + .error.code' "$TMP/nan.gpu.jsonl" | tr '\n' ' ')" \
	"bad backend_error plp backend_error beam backend_error beam2 backend_error "
# beam2's case on this backend: the intact model's search feeds 213 to a beam
grep '"id":"beam2"' "$TMP/nan.jsonl" >"$TMP/beam2.jsonl"
"$BATCHGEN" -q -m "$TMP/nanbase.gguf" -i "$TMP/beam2.jsonl" -o "$TMP/beam2.gpu.jsonl" --device cuda
check_eq "NaN logits (emulated cuda): beam2 on the intact model feeds 213 to its 2nd beam" \
	"$(jq -c '[.choices[] | .token_ids[:-1] | index(213) != null]' "$TMP/beam2.gpu.jsonl")" \
	"[false,true,false,false]"

# ---- a driver too old for the build -----------------------------------------------------
BG_EMU_DRIVER_VERSION=12020 "$BATCHGEN" -q -i "$TMP/in.jsonl" -o "$TMP/old.jsonl" \
	--device cuda 2>"$TMP/old.err"
check_eq "old driver, --device cuda: exit status 3" $? 3
check "old driver: the message names the driver's CUDA version" grep -q 'supports CUDA 12.2' "$TMP/old.err"
check "old driver: ... and the build's" grep -qE 'needs CUDA [0-9]+\.[0-9]+ or newer' "$TMP/old.err"
check "old driver: no result is written" test ! -s "$TMP/old.jsonl"

BG_EMU_DRIVER_VERSION=12020 "$BATCHGEN" -q -i "$TMP/in.jsonl" -o "$TMP/auto.jsonl" \
	--device auto 2>"$TMP/auto.err"
check_eq "old driver, --device auto: exit status 0" $? 0
check "old driver, --device auto: warns that the driver is too old" \
	grep -q 'warning: the NVIDIA driver is too old.*running on the CPU' "$TMP/auto.err"
check_eq "old driver, --device auto: the CPU's results" "$(tokens "$TMP/auto.jsonl")" "$(tokens "$TMP/cpu.jsonl")"

# ---- a model the CUDA backend does not run (heads of 640; it takes up to 512): --device cuda exits 3 with the
# reason; auto (the default) said the same and exited 3 too, though the CPU runs it: now it
# warns with the reason and runs on the CPU
"$BATCHGEN" synth --shape tiny --head-dim 640 -o "$TMP/hd640.gguf" 2>/dev/null
printf '{"id":"a","prompt":"Once","max_tokens":4}\n' >"$TMP/hd640.jsonl"
"$BATCHGEN" -q -m "$TMP/hd640.gguf" -i "$TMP/hd640.jsonl" -o "$TMP/hd640.cuda.jsonl" \
	--device cuda 2>"$TMP/hd640.err"
check_eq "unsupported model, --device cuda: exit status 3" $? 3
check "unsupported model, --device cuda: says why" grep -q 'head sizes up to 576, not 640' "$TMP/hd640.err"
"$BATCHGEN" -q -m "$TMP/hd640.gguf" -i "$TMP/hd640.jsonl" -o "$TMP/hd640.cpu.jsonl" --device cpu
"$BATCHGEN" -q -m "$TMP/hd640.gguf" -i "$TMP/hd640.jsonl" -o "$TMP/hd640.auto.jsonl" \
	--device auto 2>"$TMP/hd640.auto.err"
check_eq "unsupported model, --device auto: exit status 0" $? 0
check "unsupported model, --device auto: warns why and that it runs on the CPU" \
	grep -q 'warning: .*head sizes up to 576, not 640; running on the CPU' "$TMP/hd640.auto.err"
check_eq "unsupported model, --device auto: the CPU's results" \
	"$(tokens "$TMP/hd640.auto.jsonl")" "$(tokens "$TMP/hd640.cpu.jsonl")"
# bench opens a synthetic model lazily for the GPU (weights filled there): the fallback
# must open it again with host weights ('the CPU backend cannot run a lazy synthetic
# model', exit 3, before). gpt-oss is the refused model only until the CUDA backend takes it.
if ! "$BATCHGEN" bench -m synthetic:gpt-oss-tiny --workload 8/4x1 --device cuda >/dev/null 2>&1; then
	"$BATCHGEN" bench -m synthetic:gpt-oss-tiny --workload 8/4x1 --device auto \
		>"$TMP/lazy.out" 2>"$TMP/lazy.err"
	check_eq "unsupported lazy synthetic model, bench --device auto: exit status 0" $? 0
	check "unsupported lazy synthetic model, bench --device auto: ran on the CPU" \
		grep -q 'running on the CPU' "$TMP/lazy.err"
fi

BG_EMU_DRIVER_VERSION=0 "$BATCHGEN" -q -i "$TMP/in.jsonl" -o "$TMP/none.jsonl" \
	--device cuda 2>"$TMP/none.err"
check_eq "no driver, --device cuda: exit status 3" $? 3
check "no driver: says so" grep -q 'no NVIDIA driver was found' "$TMP/none.err"
summary
