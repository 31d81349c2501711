#!/usr/bin/env node
// llamacpp_tokenize.mjs VOCAB.gguf CORPUS RUNS [special]
// llamacpp_tokenize.mjs VOCAB.gguf CORPUS ids
//
// llama.cpp's side of bench/tokenize_bench.sh: loads VOCAB (a vocab-only GGUF is enough)
// with node-llama-cpp's prebuilt CPU build of llama.cpp, splits CORPUS into chunks at the
// byte 0x1E, and tokenizes every chunk with model.tokenize(chunk, false) (no BOS, special
// tokens as plain text) RUNS times. Prints one JSON line per run: bytes, chunks, tokens,
// a hash of the id sequence (FNV-1a over the ids, to compare with batchgen's) and the
// seconds spent in tokenize calls only. A first line {"once": [...]} gives the ids of
// "Once upon a time", to check that no BOS is added. With "special", special tokens are
// parsed (model.tokenize(chunk, true)): a cross-check of the special-token partition.
// With "ids" instead of RUNS, it prints the ids of each chunk as a JSON array, one line a
// chunk, in order (no "once" line, no timing): a test's reference.
//
// Needs `npm ci --prefix bench` (or `npm install --prefix bench`) first.
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, corpusPath, runsStr, mode] = process.argv.slice(2);
const special = mode === "special";
const ids = runsStr === "ids" && !mode;
const runs = ids ? 0 : Number(runsStr);
if (!modelPath || !corpusPath || !Number.isInteger(runs) || (runs < 1 && !ids) || (mode && !special)) {
	process.stderr.write("usage: node bench/llamacpp_tokenize.mjs VOCAB.gguf CORPUS RUNS [special]\n" +
		"       node bench/llamacpp_tokenize.mjs VOCAB.gguf CORPUS ids\n");
	process.exit(2);
}
const raw = readFileSync(corpusPath);
const chunks = raw.toString("utf8").split("\x1e");
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0, vocabOnly: true });
if (ids) {
	for (const c of chunks) console.log(JSON.stringify(Array.from(model.tokenize(c, false))));
	await model.dispose();
	await llama.dispose();
	process.exit(0);
}
console.log(JSON.stringify({ once: Array.from(model.tokenize("Once upon a time", false)) }));

for (let r = 0; r < runs; r++) {
	const out = new Array(chunks.length);
	const t0 = process.hrtime.bigint();
	for (let i = 0; i < chunks.length; i++) out[i] = model.tokenize(chunks[i], special);
	const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
	let tokens = 0;
	let h = 2166136261;
	for (const ids of out) {
		tokens += ids.length;
		for (const id of ids) h = Math.imul(h ^ id, 16777619) >>> 0;
	}
	console.log(JSON.stringify({ impl: "llama.cpp", run: r, bytes: raw.length, chunks: chunks.length, tokens, hash: h, seconds }));
}
await model.dispose();
await llama.dispose();
