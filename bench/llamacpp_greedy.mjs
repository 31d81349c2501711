#!/usr/bin/env node
// llamacpp_greedy.mjs MODEL.gguf IDS_JSON N [--logprobs] [--top K] [--kv-type T[,T]]
//                     [--flash-attn auto|on|off] [--context-size C]
//
// The llama.cpp reference for batchgen's tests: loads MODEL with node-llama-cpp's prebuilt
// CPU build of llama.cpp (no GPU, no source build), evaluates the prompt token ids
// IDS_JSON (e.g. "[1, 403, 407]", used exactly as given: no BOS is added), and prints the
// N greedy next tokens as a JSON array. Greedy = argmax of the raw logits, ties to the
// lower id, so that it does not depend on llama.cpp's sampler settings. With --logprobs it
// prints {"token_ids": [...], "logprobs": [...]} instead, logprob = logit - logsumexp
// (in double). --top K (implies --logprobs) adds "logits" (the chosen raw logits) and
// "top_logprobs": per step the K most likely [{"id", "logprob"}], highest first, ties to
// the lower id.
// IDS_JSON may also be an array of prompts ("[[1, 2], [1, 5, 6]]"): each is evaluated from
// an empty context and gets its own output line, in order (one llama.cpp start for all).
//
// Context settings (they change llama.cpp's numerics, not only its speed):
//   --kv-type T[,T]  KV cache type of K and V (f16, f32, ...; one value sets both).
//                    Default: node-llama-cpp's default, F16 for both.
//   --flash-attn M   auto (the default: on wherever the CPU build supports it), on, off.
//                    With flash attention on, llama.cpp casts F32 K/V to F16 before
//                    ggml_flash_attn_ext (llama-graph.cpp, build_attn_mha), so an fp32
//                    attention needs both `--kv-type f32` and `--flash-attn off`.
//   --context-size C default max(64, prompt + N + 8).
// With none of these, the context is llama.cpp's default one (what node-llama-cpp users
// get), which is how ../shared/models/ref_outputs were made.
//
// Needs `npm ci --prefix bench` (or `npm install --prefix bench`) first.
import { getLlama, GgmlType, LlamaLogLevel } from "node-llama-cpp";

function usage(msg) {
	if (msg) process.stderr.write(`llamacpp_greedy: ${msg}\n`);
	process.stderr.write(
		"usage: node bench/llamacpp_greedy.mjs MODEL.gguf IDS_JSON N [--logprobs] [--top K]\n" +
			"       [--kv-type T[,T]] [--flash-attn auto|on|off] [--context-size C]\n",
	);
	process.exit(2);
}

const args = process.argv.slice(2);
let withLogprobs = false;
let top = 0;
let kvTypes = null; // [K, V] as GgmlType names, or null for the default
let flashAttention = null; // "auto" | true | false, or null for the default
let contextSizeOpt = null;
const pos = [];
for (let i = 0; i < args.length; i++) {
	const a = args[i];
	const value = () => {
		if (i + 1 >= args.length) usage(`${a} needs a value`);
		return args[++i];
	};
	if (a === "--logprobs") withLogprobs = true;
	else if (a === "--top") {
		top = Number(value());
		if (!Number.isInteger(top) || top < 1) usage("--top needs a positive integer");
		withLogprobs = true;
	} else if (a === "--kv-type") {
		const t = value().toUpperCase().split(",");
		// node-llama-cpp silently falls back to F16 for a name it does not know: refuse it here
		if (t.length > 2 || t.some((x) => !Object.hasOwn(GgmlType, x) || typeof GgmlType[x] !== "number"))
			usage(`unknown --kv-type ${t.join(",")}`);
		kvTypes = t.length === 1 ? [t[0], t[0]] : t;
	} else if (a === "--flash-attn") {
		const v = value();
		const map = { auto: "auto", on: true, off: false };
		if (!(v in map)) usage("--flash-attn takes auto, on or off");
		flashAttention = map[v];
	} else if (a === "--context-size") {
		contextSizeOpt = Number(value());
		if (!Number.isInteger(contextSizeOpt) || contextSizeOpt < 1) usage("bad --context-size");
	} else if (a.startsWith("--")) usage(`unknown option ${a}`);
	else pos.push(a);
}
if (pos.length !== 3) usage();
const [modelPath, idsJson, nStr] = pos;
let ids;
try {
	ids = JSON.parse(idsJson);
} catch (e) {
	usage(`IDS_JSON is not JSON: ${e.message}`);
}
const n = Number(nStr);
const prompts = Array.isArray(ids) && ids.length > 0 && Array.isArray(ids[0]) ? ids : [ids];
const valid = (p) => Array.isArray(p) && p.length > 0 && p.every(Number.isInteger);
if (!prompts.every(valid) || !Number.isInteger(n) || n < 0) usage();
const longest = Math.max(...prompts.map((p) => p.length));

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const ctxOptions = {
	contextSize: contextSizeOpt ?? Math.max(64, longest + n + 8),
	batchSize: Math.max(64, longest + 1),
	sequences: 1,
	threads: 1, // deterministic and frugal
};
if (kvTypes) {
	ctxOptions.experimentalKvCacheKeyType = kvTypes[0];
	ctxOptions.experimentalKvCacheValueType = kvTypes[1];
}
if (flashAttention !== null) ctxOptions.flashAttention = flashAttention;
const context = await model.createContext(ctxOptions);
const seq = context.getSequence();

// Argmax over the raw logits with ties to the lower id, the log-softmax of the winner, and
// the top K log-probs.
function pick(logits) {
	let best = -1;
	let bestLogit = -Infinity;
	let max = -Infinity;
	for (const [id, v] of logits) {
		if (v > bestLogit || (v === bestLogit && id < best)) {
			best = id;
			bestLogit = v;
		}
		if (v > max) max = v;
	}
	let sum = 0;
	for (const v of logits.values()) sum += Math.exp(v - max);
	const lse = max + Math.log(sum);
	let topK = null;
	if (top > 0) {
		topK = [...logits]
			.sort((a, b) => b[1] - a[1] || a[0] - b[0])
			.slice(0, top)
			.map(([id, v]) => ({ id, logprob: v - lse }));
	}
	return { id: best, logit: bestLogit, logprob: bestLogit - max - Math.log(sum), topK };
}

async function greedy(prompt) {
	await seq.clearHistory();
	const tokens = [];
	const logprobs = [];
	const logits = [];
	const tops = [];
	let input = prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: { logits: true } }] : t));
	for (let step = 0; step < n; step++) {
		const res = await seq.controlledEvaluate(input);
		const out = res[input.length - 1];
		if (!out || !out.next || !out.next.logits) throw new Error("llama.cpp returned no logits");
		const p = pick(out.next.logits);
		tokens.push(p.id);
		logprobs.push(p.logprob);
		logits.push(p.logit);
		tops.push(p.topK);
		input = [[p.id, { generateNext: { logits: true } }]];
	}
	if (!withLogprobs) return tokens;
	if (top === 0) return { token_ids: tokens, logprobs };
	return { token_ids: tokens, logprobs, logits, top_logprobs: tops };
}

for (const prompt of prompts) console.log(JSON.stringify(await greedy(prompt)));
await context.dispose();
await model.dispose();
await llama.dispose();
