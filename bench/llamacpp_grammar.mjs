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
// Needs `npm ci --prefix bench` first.
import { readFileSync } from "node:fs";
import { getLlama, LlamaGrammar, LlamaGrammarEvaluationState, LlamaLogLevel } from "node-llama-cpp";

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
