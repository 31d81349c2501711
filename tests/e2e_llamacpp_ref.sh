#!/usr/bin/env bash
# e2e_llamacpp_ref: batchgen's CPU backend against llama.cpp itself, regenerated at test time,
# on stories260K, "Once upon a time" with BOS [1, 403, 407, 261, 378] and without
# [403, 407, 261, 378], greedy, 32 tokens, top-5 log-probs.
#
# Which llama.cpp settings made ../shared/models/ref_outputs: its README says "F32 KV cache",
# but node-llama-cpp 3.22.1's defaults are flash attention "auto" (on, for this CPU build)
# and an F16 K/V cache; and with flash attention on, llama.cpp casts F32 K/V to F16 before
# ggml_flash_attn_ext anyway (llama-graph.cpp, build_attn_mha), so an "F32 KV cache" there
# computes exactly as an F16 one. This test checks it: llama.cpp with its defaults (a)
# reproduces the stored references (observed: to 1.7e-15, top-5 exactly), and with an F32
# KV cache and flash attention off (b) it does not (1.5e-3).
#
# batchgen's CPU backend is fp32 throughout with an fp32 KV cache, so its reference is (b):
# the token ids must be equal and every chosen and top-5 log-prob within 1e-4 (observed:
# 2.1e-6 chosen, 7.0e-6 top-5). Against (a) and the stored references it differs by the F16
# K/V rounding, up to 1.5e-3 (chosen) and 1.0e-2 (top-5); that is reported, not asserted
# (tests/test_backend_cpu.c bounds it). Emulating llama.cpp's F16 attention would not get
# within 1e-4 of (a) either: every F16 rounding of Q, K, V and of the V accumulator amplifies
# fp32 summation-order differences (~1e-7 relative) to an F16 step (2^-11); in a double
# precision emulation of ggml's CPU flash attention, the first step matches (a) to 7e-8 but
# the 32 steps only to 4.9e-4 (top-5: 7.9e-3), and merely changing the emulation's matvecs
# from double to sequential fp32 sums moves its own log-probs by 6.2e-4 (top-5: 5.6e-3),
# against 3.5e-6 with an F32 KV cache. Only a bit-exact copy of ggml's arithmetic would match.
#
# llama.cpp is node-llama-cpp 3.22.1's prebuilt CPU build (bench/llamacpp_greedy.mjs). Needs
# `npm ci --prefix bench`; skips visibly without it (fails under CI=true).
source tests/check.sh
source tests/need_llamacpp.sh

if ! need_llamacpp "llama.cpp reference check"; then
	summary
	exit $?
fi
# not m=$(shared ...): its skip/fail count would stay in the subshell
if ! shared models/stories260K.gguf >"$TMP/model.path"; then
	summary
	exit $?
fi
m=$(cat "$TMP/model.path")
refdir=$(dirname "$m")/ref_outputs

N=32
TOL=1e-4
BOS='[1, 403, 407, 261, 378]'
NOBOS='[403, 407, 261, 378]'

# batchgen, both prompts in one job
printf '{"id":"bos","input_ids":%s,"max_tokens":%d,"temperature":0,"logprobs":5,"ignore_eos":true}\n{"id":"nobos","input_ids":%s,"max_tokens":%d,"temperature":0,"logprobs":5,"ignore_eos":true}\n' \
	"$BOS" "$N" "$NOBOS" "$N" >"$TMP/in.jsonl"
check "batchgen runs" "$BATCHGEN" -m "$m" --device cpu -i "$TMP/in.jsonl" -o "$TMP/bg.jsonl"

# llama.cpp: (a) its defaults, (b) F32 KV cache without flash attention; one start each,
# one output line per prompt (bos, then nobos)
llama() {
	local out=$1
	shift
	llamacpp_greedy "$m" "[$BOS, $NOBOS]" "$N" --top 5 "$@" >"$out" 2>"$TMP/llama.err" ||
		echo "FAIL: llama.cpp $* failed: $(tail -n 3 "$TMP/llama.err")" >&2
}
llama "$TMP/ll_default.jsonl"
llama "$TMP/ll_f32.jsonl" --kv-type f32 --flash-attn off

# compare KIND_A FILE_A KIND_B FILE_B PROMPT: prints "ids=same|differ chosen=MAX top=MAX"
# for one prompt (bos or nobos): the max |difference| of the chosen log-probs and of the
# top-5 log-probs compared rank by rank. KIND is bg (batchgen JSONL), ll (llamacpp_greedy
# output, line 1 bos, line 2 nobos) or ref (the stored reference JSON file's folder). Top-5
# ids must agree rank by rank except where two neighbours are within 1e-4 (a near-tie may
# legitimately swap); a disagreement shows as "top=ids@STEP".
compare() {
	node -e '
		const fs = require("fs");
		const [ka, fa, kb, fb, prompt] = process.argv.slice(1);
		function load(kind, file) {
			if (kind === "bg") {
				for (const line of fs.readFileSync(file, "utf8").split("\n")) {
					if (!line.trim()) continue;
					const r = JSON.parse(line);
					if (r.id === prompt)
						return { ids: r.token_ids, lp: r.logprobs,
							 top: (r.top_logprobs || []).map((t) => t.map((e) => [e.id, e.logprob])) };
				}
				return null;
			}
			if (kind === "ll") {
				const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim());
				const r = JSON.parse(lines[prompt === "bos" ? 0 : 1]);
				return { ids: r.token_ids, lp: r.logprobs,
					 top: r.top_logprobs.map((t) => t.map((e) => [e.id, e.logprob])) };
			}
			const g = JSON.parse(fs.readFileSync(`${file}/stories260K.once_upon_a_time.${prompt}.n32.json`, "utf8")).generated;
			return { ids: g.token_ids, lp: g.logprobs,
				 top: g.steps.map((s) => s.top.map((e) => [e.token, e.logprob])) };
		}
		let a, b;
		try {
			a = load(ka, fa);
			b = load(kb, fb);
		} catch (e) {
			console.log("error " + e.message.split("\n")[0]);
			process.exit(0);
		}
		if (!a || !b || !Array.isArray(a.ids) || !Array.isArray(b.ids)) {
			console.log("error no-result");
			process.exit(0);
		}
		const same = a.ids.length === b.ids.length && a.ids.every((t, i) => t === b.ids[i]);
		let chosen = 0, top = 0, topIds = "";
		for (let i = 0; i < Math.min(a.lp.length, b.lp.length); i++)
			chosen = Math.max(chosen, Math.abs(a.lp[i] - b.lp[i]));
		for (let s = 0; s < Math.min(a.top.length, b.top.length); s++) {
			const ta = a.top[s], tb = b.top[s];
			if (ta.length < 5 || tb.length < 5) topIds = topIds || `short@${s}`;
			for (let r = 0; r < Math.min(ta.length, tb.length); r++) {
				top = Math.max(top, Math.abs(ta[r][1] - tb[r][1]));
				const tie = (r > 0 && ta[r - 1][1] - ta[r][1] < 1e-4) ||
					    (r + 1 < ta.length && ta[r][1] - ta[r + 1][1] < 1e-4);
				if (ta[r][0] !== tb[r][0] && !tie) topIds = topIds || `ids@${s}`;
			}
		}
		if (!same || a.lp.length !== b.lp.length) chosen = "n/a";
		console.log(`ids=${same ? "same" : "differ"} chosen=${chosen === "n/a" ? chosen : chosen.toExponential(2)} top=${topIds || top.toExponential(2)}`);
	' "$@"
}

# within RESULT TOL: the comparison has the same ids and both maxima <= TOL
within() {
	local r=$1 tol=$2
	[[ $r == "ids=same "* ]] || return 1
	local c=${r#*chosen=} t=${r#*top=}
	c=${c%% *}
	node -e 'const [c, t, tol] = process.argv.slice(1).map(Number);
		process.exit(Number.isFinite(c) && Number.isFinite(t) && c <= tol && t <= tol ? 0 : 1)' "$c" "$t" "$tol"
}

# beyond RESULT TOL: same ids, and a maximum above TOL (a comparison that failed is not beyond)
beyond() {
	[[ $1 == "ids=same chosen=0."* || $1 == "ids=same chosen="[1-9]* ]] && ! within "$1" "$2"
}

for p in bos nobos; do
	r_b=$(compare bg "$TMP/bg.jsonl" ll "$TMP/ll_f32.jsonl" $p)
	r_a=$(compare bg "$TMP/bg.jsonl" ll "$TMP/ll_default.jsonl" $p)
	r_ref=$(compare bg "$TMP/bg.jsonl" ref "$refdir" $p)
	a_ref=$(compare ll "$TMP/ll_default.jsonl" ref "$refdir" $p)
	b_ref=$(compare ll "$TMP/ll_f32.jsonl" ref "$refdir" $p)
	b_a=$(compare ll "$TMP/ll_f32.jsonl" ll "$TMP/ll_default.jsonl" $p)
	echo "$p: batchgen vs llama.cpp F32 KV, no flash attn (b): $r_b"
	echo "$p: batchgen vs llama.cpp defaults (a):               $r_a"
	echo "$p: batchgen vs stored ../shared reference:           $r_ref"
	echo "$p: llama.cpp (a) vs stored reference:                $a_ref"
	echo "$p: llama.cpp (b) vs stored reference:                $b_ref"
	# the requirement, against the llama.cpp configuration that computes as batchgen does
	check "$p: batchgen = llama.cpp (F32 KV, no flash attn): ids, log-probs within $TOL ($r_b)" \
		within "$r_b" "$TOL"
	# the ids are the same whatever the KV type
	check_eq "$p: batchgen ids = stored reference ids" "${r_ref%% *}" ids=same
	# llama.cpp's defaults are what made the stored references (observed 1.7e-15). The
	# tolerance allows another ggml-cpu variant (node-llama-cpp picks one per CPU: without
	# AVX-512 the sums round differently, which can flip an F16 rounding of K or V) and is
	# still 15 times below what separates F16 from F32 K/V here (1.5e-3)
	check "$p: llama.cpp defaults reproduce the stored reference ($a_ref)" within "$a_ref" 1e-4
	# the settings must take effect, or (b) would be (a) again and prove nothing: F16 vs
	# F32 K/V moves log-probs by ~1e-3 here
	check "$p: --kv-type f32 --flash-attn off changes llama.cpp's log-probs ($b_a)" \
		beyond "$b_a" 1e-4
done

summary
