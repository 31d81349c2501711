#!/usr/bin/env node
// llamacpp_bench.mjs: the llama.cpp side of bench/compare_llamacpp.sh.
//
// Runs the same fixed-shape workload as `batchgen bench --workload ISL/OSLxN` through
// llama.cpp's CPU build (node-llama-cpp from bench/node_modules): the same requests (random
// prompt token ids re-generated here with core/io/workload.c's generator, checked by the
// content checksum), greedy, EOS ignored (an end-of-generation token is yielded and fed
// back like any other), OSL tokens per request. One context with `sequences: P`; P workers
// each own one sequence and take the next request when theirs is done, so up to P
// sequences are decoded together in one llama_decode batch (node-llama-cpp gathers the
// tokens queued in one event-loop cycle into one batch).
//
// Usage: node bench/llamacpp_bench.mjs --model M.gguf --isl 128 --osl 128 --requests 32
//          [--parallel 16] [--seed 0] [--id-lo 3] [--id-hi 32000] [--threads 2]
//          [--batch-size 512] [--warmup 1] [--json OUT.json]
// Prints one JSON object (also written to --json): output/total tok/s, wall time, TTFT and
// TPOT percentiles, the checksums.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { writeFileSync } from "node:fs";

function parseArgs(argv) {
	const a = {
		model: null, isl: 128, osl: 128, requests: 32, parallel: 16, seed: 0n, idLo: 3,
		idHi: null, threads: 0, batchSize: 512, warmup: 1, json: null,
	};
	for (let i = 2; i < argv.length; i++) {
		const k = argv[i], v = argv[i + 1];
		const take = () => { i++; if (v === undefined) throw new Error(`${k} needs a value`); return v; };
		switch (k) {
		case "--model": a.model = take(); break;
		case "--isl": a.isl = Number(take()); break;
		case "--osl": a.osl = Number(take()); break;
		case "--requests": a.requests = Number(take()); break;
		case "--parallel": a.parallel = Number(take()); break;
		case "--seed": a.seed = BigInt(take()); break;
		case "--id-lo": a.idLo = Number(take()); break;
		case "--id-hi": a.idHi = Number(take()); break;
		case "--threads": a.threads = Number(take()); break;
		case "--batch-size": a.batchSize = Number(take()); break;
		case "--warmup": a.warmup = Number(take()); break;
		case "--json": a.json = take(); break;
		default: throw new Error(`unknown option ${k}`);
		}
	}
	if (!a.model) throw new Error("--model is required");
	return a;
}

// ---- core/io/workload.c's generator, transcribed (BigInt for 64-bit arithmetic) ----------
const M64 = (1n << 64n) - 1n;
function fmix(z) {
	z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & M64;
	z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & M64;
	return z ^ (z >> 31n);
}
const FNV_OFFSET = 0xcbf29ce484222325n, FNV_PRIME = 0x100000001b3n;
function fnvU32(h, v) {
	v = BigInt(v >>> 0);
	for (let b = 0n; b < 4n; b++) {
		h ^= (v >> (8n * b)) & 0xffn;
		h = (h * FNV_PRIME) & M64;
	}
	return h;
}
// Request i of a fixed ISL/OSL workload: ISL ids in [lo, hi) from the token stream (1).
function makeRequests(a) {
	const reqs = [];
	let shape = FNV_OFFSET, content = FNV_OFFSET;
	const range = BigInt(a.idHi - a.idLo);
	for (let i = 0; i < a.requests; i++) {
		let st = a.seed ^ fmix(BigInt(i) * 2n + 1n + 1n);
		const ids = new Array(a.isl);
		content = fnvU32(fnvU32(content, a.isl), a.osl);
		for (let k = 0; k < a.isl; k++) {
			st = (st + 0x9E3779B97F4A7C15n) & M64;
			ids[k] = a.idLo + Number(fmix(st) % range);
			content = fnvU32(content, ids[k]);
		}
		shape = fnvU32(fnvU32(shape, a.isl), a.osl);
		reqs.push({ i, ids, osl: a.osl });
	}
	const hex = (h) => h.toString(16).padStart(16, "0");
	return { reqs, shapeChecksum: hex(shape), contentChecksum: hex(content) };
}

function percentile(v, q) {
	if (v.length === 0) return 0;
	const s = [...v].sort((x, y) => x - y);
	const pos = (q / 100) * (s.length - 1);
	const lo = Math.floor(pos), hi = Math.min(lo + 1, s.length - 1);
	return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}
const dist = (v) => ({
	mean: v.length ? v.reduce((x, y) => x + y, 0) / v.length : 0,
	p50: percentile(v, 50), p90: percentile(v, 90), p99: percentile(v, 99),
});

// Generates req.osl tokens greedily on seq after clearing it. Returns timings in ms, TTFT
// and e2e from `arrival` (the start of the run: every request arrives at once, as in
// batchgen bench, whose TTFT counts the time a request waits for a free slot).
async function runOne(seq, req, arrival) {
	await seq.clearHistory();
	const t0 = arrival ?? performance.now();
	let tFirst = 0, n = 0;
	const out = [];
	for await (const tok of seq.evaluate(req.ids, { temperature: 0, yieldEogToken: true })) {
		if (n === 0) tFirst = performance.now();
		out.push(tok);
		if (++n >= req.osl) break; // leaving the loop ends the generator
	}
	const t1 = performance.now();
	// TPOT as batchgen reports it: (e2e - ttft) / (n - 1)
	return { ttft: tFirst - t0, e2e: t1 - t0, n, out };
}

async function main() {
	const a = parseArgs(process.argv);
	const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error,
		...(a.threads > 0 ? { maxThreads: a.threads } : {}) });
	const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
	if (a.idHi == null) a.idHi = 32000; // the Llama-2 vocabulary; compare_llamacpp.sh passes the report's range
	const { reqs, shapeChecksum, contentChecksum } = makeRequests(a);
	const parallel = Math.max(1, Math.min(a.parallel, a.requests));
	const context = await model.createContext({
		sequences: parallel,
		contextSize: a.isl + a.osl + 8,
		batchSize: a.batchSize,
		...(a.threads > 0 ? { threads: a.threads } : {}),
	});
	const seqs = [];
	for (let p = 0; p < parallel; p++) seqs.push(context.getSequence());

	// warm-up: a few short requests from other token ids, not counted
	for (let w = 0; w < a.warmup; w++)
		await runOne(seqs[0], { ids: reqs[0].ids.slice(0, Math.min(16, a.isl)).map((x) => x ^ 1), osl: 4 });

	let next = 0;
	const ttft = [], tpot = [], e2e = [];
	let outTokens = 0;
	const c0 = process.cpuUsage(); // the whole process: JavaScript and ggml's threads
	const t0 = performance.now();
	await Promise.all(seqs.map(async (seq) => {
		while (next < reqs.length) {
			const r = reqs[next++];
			const m = await runOne(seq, r, t0);
			outTokens += m.n;
			ttft.push(m.ttft);
			e2e.push(m.e2e);
			if (m.n >= 2) tpot.push((m.e2e - m.ttft) / (m.n - 1));
		}
	}));
	const wall = (performance.now() - t0) / 1000;
	const cpu = process.cpuUsage(c0);
	const cpuS = (cpu.user + cpu.system) / 1e6;
	const promptTokens = a.isl * a.requests;
	const result = {
		engine: "llama.cpp (node-llama-cpp 3.22.1, CPU)",
		model: a.model,
		workload: `${a.isl}/${a.osl}x${a.requests}`,
		parallel, threads: context.currentThreads, batch_size: a.batchSize,
		seed: a.seed.toString(), token_id_range: [a.idLo, a.idHi],
		shape_checksum: shapeChecksum, content_checksum: contentChecksum,
		requests: a.requests, prompt_tokens: promptTokens, output_tokens: outTokens,
		wall_s: wall, cpu_s: cpuS, cpu_ms_per_output_token: outTokens ? (cpuS * 1000) / outTokens : 0,
		output_tok_s: outTokens / wall,
		total_tok_s: (outTokens + promptTokens) / wall, requests_s: a.requests / wall,
		ttft_ms: dist(ttft), tpot_ms: dist(tpot), e2e_ms: dist(e2e),
		decode_tok_s_p50: tpot.length ? 1000 / percentile(tpot, 50) : 0,
	};
	const text = JSON.stringify(result, null, 2);
	if (a.json) writeFileSync(a.json, text + "\n");
	console.log(text);
	await context.dispose();
	await model.dispose();
	await llama.dispose();
}

main().catch((e) => {
	console.error(`llamacpp_bench: ${e.message}`);
	process.exit(2);
});
