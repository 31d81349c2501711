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
// llamacpp_greedy.mjs --jobs FILE: many runs in one process (llama.cpp's start, ~1 s, is
// paid once). FILE has a JSON line per run, {"args": [MODEL, IDS_JSON, N, options...],
// "out": PATH}; each run's lines go to PATH (written whole, through PATH.tmp), and a run
// that fails is reported on stderr without stopping the others (exit 1 at the end).
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
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { getLlama, GgmlType, LlamaLogLevel } from "node-llama-cpp";

function usage(msg) {
	if (msg) process.stderr.write(`llamacpp_greedy: ${msg}\n`);
	process.stderr.write(
		"usage: node bench/llamacpp_greedy.mjs MODEL.gguf IDS_JSON N [--logprobs] [--top K]\n" +
			"       [--kv-type T[,T]] [--flash-attn auto|on|off] [--context-size C]\n",
	);
	process.exit(2);
}

// parse(args): one run's settings from its command-line arguments; throws a usage message.
function parse(args) {
	const o = { withLogprobs: false, top: 0, kvTypes: null, flashAttention: null, contextSize: null };
	const pos = [];
	for (let i = 0; i < args.length; i++) {
		const a = args[i];
		const value = () => {
			if (i + 1 >= args.length) throw new Error(`${a} needs a value`);
			return args[++i];
		};
		if (a === "--logprobs") o.withLogprobs = true;
		else if (a === "--top") {
			o.top = Number(value());
			if (!Number.isInteger(o.top) || o.top < 1) throw new Error("--top needs a positive integer");
			o.withLogprobs = true;
		} else if (a === "--kv-type") {
			const t = value().toUpperCase().split(",");
			// node-llama-cpp silently falls back to F16 for a name it does not know: refuse it here
			if (t.length > 2 || t.some((x) => !Object.hasOwn(GgmlType, x) || typeof GgmlType[x] !== "number"))
				throw new Error(`unknown --kv-type ${t.join(",")}`);
			o.kvTypes = t.length === 1 ? [t[0], t[0]] : t;
		} else if (a === "--flash-attn") {
			const v = value();
			const map = { auto: "auto", on: true, off: false };
			if (!(v in map)) throw new Error("--flash-attn takes auto, on or off");
			o.flashAttention = map[v];
		} else if (a === "--context-size") {
			o.contextSize = Number(value());
			if (!Number.isInteger(o.contextSize) || o.contextSize < 1) throw new Error("bad --context-size");
		} else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
		else pos.push(a);
	}
	if (pos.length !== 3) throw new Error("needs MODEL.gguf IDS_JSON N");
	const [modelPath, idsJson, nStr] = pos;
	let ids;
	try {
		ids = JSON.parse(idsJson);
	} catch (e) {
		throw new Error(`IDS_JSON is not JSON: ${e.message}`);
	}
	o.modelPath = modelPath;
	o.n = Number(nStr);
	o.prompts = Array.isArray(ids) && ids.length > 0 && Array.isArray(ids[0]) ? ids : [ids];
	const valid = (p) => Array.isArray(p) && p.length > 0 && p.every(Number.isInteger);
	if (!o.prompts.every(valid) || !Number.isInteger(o.n) || o.n < 0) throw new Error("bad IDS_JSON or N");
	return o;
}

// Argmax over the raw logits with ties to the lower id, the log-softmax of the winner, and
// the top K log-probs.
function pick(logits, top) {
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

async function greedy(seq, o, prompt) {
	await seq.clearHistory();
	const tokens = [];
	const logprobs = [];
	const logits = [];
	const tops = [];
	let input = prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: { logits: true } }] : t));
	for (let step = 0; step < o.n; step++) {
		const res = await seq.controlledEvaluate(input);
		const out = res[input.length - 1];
		if (!out || !out.next || !out.next.logits) throw new Error("llama.cpp returned no logits");
		const p = pick(out.next.logits, o.top);
		tokens.push(p.id);
		logprobs.push(p.logprob);
		logits.push(p.logit);
		tops.push(p.topK);
		input = [[p.id, { generateNext: { logits: true } }]];
	}
	if (!o.withLogprobs) return tokens;
	if (o.top === 0) return { token_ids: tokens, logprobs };
	return { token_ids: tokens, logprobs, logits, top_logprobs: tops };
}

// run(llama, o): the output lines of one run (one per prompt)
async function run(llama, o) {
	const longest = Math.max(...o.prompts.map((p) => p.length));
	const model = await llama.loadModel({ modelPath: o.modelPath, gpuLayers: 0 });
	const ctxOptions = {
		contextSize: o.contextSize ?? Math.max(64, longest + o.n + 8),
		batchSize: Math.max(64, longest + 1),
		sequences: 1,
		threads: 1, // deterministic and frugal
	};
	if (o.kvTypes) {
		ctxOptions.experimentalKvCacheKeyType = o.kvTypes[0];
		ctxOptions.experimentalKvCacheValueType = o.kvTypes[1];
	}
	if (o.flashAttention !== null) ctxOptions.flashAttention = o.flashAttention;
	const context = await model.createContext(ctxOptions);
	const lines = [];
	try {
		const seq = context.getSequence();
		for (const prompt of o.prompts) lines.push(JSON.stringify(await greedy(seq, o, prompt)));
	} finally {
		await context.dispose();
		await model.dispose();
	}
	return lines;
}

const args = process.argv.slice(2);
let jobs; // [{o, out}]: out null for stdout
try {
	if (args[0] === "--jobs") {
		if (args.length !== 2) throw new Error("--jobs takes one file");
		jobs = readFileSync(args[1], "utf8")
			.split("\n")
			.filter((l) => l.trim())
			.map((l) => {
				const j = JSON.parse(l);
				if (!Array.isArray(j.args) || typeof j.out !== "string") throw new Error(`bad job line: ${l}`);
				return { o: parse(j.args.map(String)), out: j.out };
			});
	} else jobs = [{ o: parse(args), out: null }];
} catch (e) {
	usage(e.message);
}
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
let failed = 0;
for (const { o, out } of jobs) {
	if (out === null) {
		for (const l of await run(llama, o)) console.log(l);
		continue;
	}
	// a job's output appears whole or not at all; a failed job does not stop the others
	try {
		const lines = await run(llama, o);
		writeFileSync(`${out}.tmp`, lines.map((l) => l + "\n").join(""));
		renameSync(`${out}.tmp`, out);
	} catch (e) {
		failed++;
		process.stderr.write(`llamacpp_greedy: ${o.modelPath}: ${e.message}\n`);
	}
}
await llama.dispose();
if (failed) process.exit(1);
