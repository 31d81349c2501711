#!/usr/bin/env node
// llamacpp_grammar.mjs VOCAB.gguf N_VOCAB CASES.json
//
// llama.cpp's grammar engine as the reference for batchgen's grammar masks
// (tests/test_grammar.c): loads VOCAB (a vocab-only GGUF is enough) with node-llama-cpp's
// prebuilt CPU build. CASES.json is an array of {"grammar": GBNF text (root rule "root"),
// "path": [token ids]}. For each case c and k = 0 .. len(path) it prints one JSON line
// {"case": c, "step": k, "allowed": [ids]}: every token id below N_VOCAB that llama.cpp's
// grammar sampler lets through after accepting path[0..k) (asked token by token through
// canBeNextTokenForGrammarEvaluationState, i.e. llama_grammar_apply on one candidate).
// End-of-generation tokens are included when llama.cpp allows them. A path token that
// llama.cpp refuses ends that case with {"case": c, "step": k, "refused": id}.
//
// llamacpp_grammar.mjs --greedy MODEL.gguf CASES.json
//
// Grammar-constrained greedy decoding by llama.cpp: CASES.json is an array of
// {"grammar", "prompt": [ids], "n": max new tokens}. Per case it evaluates the prompt ids as
// given (no BOS added) and then, n times, takes the token with the highest raw logit
// (ties to the lower id) among those llama.cpp's grammar allows, accepts it into the
// grammar state, and stops after an end-of-generation token. Prints one line per case:
// {"case": c, "token_ids": [...]}.
//
// Needs `npm ci --prefix bench` first.
import { readFileSync } from "node:fs";
import { getLlama, LlamaGrammar, LlamaGrammarEvaluationState, LlamaLogLevel } from "node-llama-cpp";

if (process.argv[2] === "--greedy") {
	await greedyMode(process.argv[3], process.argv[4]);
	process.exit(0);
}
const [vocabPath, nVocabStr, casesPath] = process.argv.slice(2);
const nVocab = Number(nVocabStr);
if (!vocabPath || !Number.isInteger(nVocab) || !casesPath) {
	process.stderr.write("usage: node bench/llamacpp_grammar.mjs VOCAB.gguf N_VOCAB CASES.json\n");
	process.exit(2);
}
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: vocabPath, gpuLayers: 0, vocabOnly: true });
const S = llama._bindings.AddonSampler;
cases.forEach(({ grammar: text, path }, c) => {
	const grammar = new LlamaGrammar(llama, { grammar: text });
	const state = new LlamaGrammarEvaluationState({ model, grammar });
	for (let k = 0; k <= path.length; k++) {
		const allowed = [];
		for (let i = 0; i < nVocab; i++) if (S.canBeNextTokenForGrammarEvaluationState(state._state, i)) allowed.push(i);
		console.log(JSON.stringify({ case: c, step: k, allowed }));
		if (k === path.length) break;
		if (!allowed.includes(path[k])) {
			console.log(JSON.stringify({ case: c, step: k, refused: path[k] }));
			break;
		}
		S.acceptGrammarEvaluationStateToken(state._state, path[k]);
	}
});
await model.dispose();
await llama.dispose();

async function greedyMode(modelPath, casesPath) {
	const cases = JSON.parse(readFileSync(casesPath, "utf8"));
	const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
	const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
	const longest = Math.max(...cases.map((c) => c.prompt.length + c.n));
	const context = await model.createContext({
		contextSize: Math.max(64, longest + 8),
		batchSize: Math.max(64, longest + 1),
		sequences: 1,
		threads: 1,
	});
	const seq = context.getSequence();
	const S = llama._bindings.AddonSampler;
	for (const [c, { grammar: text, prompt, n }] of cases.entries()) {
		await seq.clearHistory();
		const grammar = new LlamaGrammar(llama, { grammar: text });
		const state = new LlamaGrammarEvaluationState({ model, grammar });
		const tokens = [];
		let input = prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: { logits: true } }] : t));
		for (let step = 0; step < n; step++) {
			const res = await seq.controlledEvaluate(input);
			const out = res[input.length - 1];
			let best = -1;
			let bestLogit = -Infinity;
			for (const [id, v] of out.next.logits) {
				if (v < bestLogit || (v === bestLogit && id > best)) continue;
				if (!S.canBeNextTokenForGrammarEvaluationState(state._state, id)) continue;
				best = id;
				bestLogit = v;
			}
			if (best < 0) break;
			tokens.push(best);
			if (model.isEogToken(best)) break;
			S.acceptGrammarEvaluationStateToken(state._state, best);
			input = [[best, { generateNext: { logits: true } }]];
		}
		console.log(JSON.stringify({ case: c, token_ids: tokens }));
	}
	await context.dispose();
	await model.dispose();
	await llama.dispose();
}
