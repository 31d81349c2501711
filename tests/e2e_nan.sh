#!/usr/bin/env bash
# e2e_nan: a request whose logits turn NaN (a numerical failure of the model) fails alone,
# with finish_reason "error" and code backend_error, and the requests batched with it are
# answered as they are alone; before, it sampled token 0 with null log-probs, silently.
# The model: a tiny synthetic f32 file whose tokens 100 and 213 have NaN embedding rows
# (tests/gguf_nan.py), so that exactly the sequences holding one of them see NaN logits.
# Beam search fails the same way, whether the NaN is in the prompt (every beam) or in one
# beam of several, mid-search (a beam of "beam2" takes token 213 at its 4th step on the
# intact model); before, the search ranked NaN candidates last and answered as if nothing
# had happened. tests/e2e_gpu_emu.sh runs the same file on the (emulated) CUDA backend.
. tests/check.sh
. tests/need_jq.sh
need_jq || { summary; exit; }

"$BATCHGEN" synth --layers 2 --embd 32 --heads 2 --kv-heads 1 --ffn 64 --vocab 260 --ctx 64 --no-tie \
	--dtype f32 -o "$TMP/base.gguf" 2>/dev/null
/usr/bin/python3 tests/gguf_nan.py "$TMP/base.gguf" "$TMP/nan1.gguf" token_embd.weight 100 &&
	/usr/bin/python3 tests/gguf_nan.py "$TMP/nan1.gguf" "$TMP/nan.gguf" token_embd.weight 213
check_eq "the NaN model is written" $? 0
# ok: never sees token 100 or 213; bad: 100 in its prompt; plp: prompt log-probs over it;
# beam: beam search over it; beam2: beam search whose 2nd beam takes 213 at step 4
cat >"$TMP/in.jsonl" <<'JSONL'
{"id":"ok","input_ids":[1,5,6,7],"max_tokens":4,"logprobs":1}
{"id":"bad","input_ids":[1,5,100,7],"max_tokens":4,"logprobs":1}
{"id":"plp","input_ids":[1,100,7],"max_tokens":2,"prompt_logprobs":1}
{"id":"ok2","input_ids":[1,8,9],"max_tokens":3,"temperature":0.8,"seed":4}
{"id":"beam","input_ids":[1,5,100,7],"max_tokens":4,"beam_width":3,"n":2}
{"id":"beam2","input_ids":[1,1,5],"max_tokens":6,"beam_width":4,"n":4}
JSONL
"$BATCHGEN" -q -m "$TMP/nan.gguf" --device cpu -i "$TMP/in.jsonl" -o "$TMP/out.jsonl"
check_eq "exit status 1 (some line failed; the run went on)" $? 1
code() { jq -r "select(.id == \"$2\") | [.finish_reason, .error.code] | join(\" \")" "$1"; }
check_eq "bad: error backend_error" "$(code "$TMP/out.jsonl" bad)" "error backend_error"
check_eq "plp: error backend_error" "$(code "$TMP/out.jsonl" plp)" "error backend_error"
check "bad: the message says NaN" grep -q '"id":"bad".*"message":"the logits at position 3 are NaN' \
	"$TMP/out.jsonl"
# beam search: the whole request fails, one line, no choices from the broken search
check_eq "beam (NaN in the prompt): error backend_error" "$(code "$TMP/out.jsonl" beam)" \
	"error backend_error"
check_eq "beam2 (NaN in one beam of four): error backend_error" "$(code "$TMP/out.jsonl" beam2)" \
	"error backend_error"
check "beam2: the message says NaN" grep -q '"id":"beam2".*"message":"the logits at position [0-9]* are NaN' \
	"$TMP/out.jsonl"
check_eq "beam, beam2: no choice returned" \
	"$(jq -r 'select(.id | startswith("beam")) | .choices // [] | length' "$TMP/out.jsonl" | tr '\n' ' ')" "0 0 "
check_eq "one line per input line" "$(jq -r .id "$TMP/out.jsonl" | tr '\n' ' ')" "ok bad plp ok2 beam beam2 "
# the case beam2 stands for: on the intact model, a live beam holds 213 and runs another
# step (213 is not its last token), while the best beam never holds it
grep '"id":"beam2"' "$TMP/in.jsonl" >"$TMP/beam2.jsonl"
"$BATCHGEN" -q -m "$TMP/base.gguf" --device cpu -i "$TMP/beam2.jsonl" -o "$TMP/beam2.out"
check_eq "beam2 on the intact model: 213 in a later beam, before its end, not in the best" \
	"$(jq -c '[.choices[] | .token_ids[:-1] | index(213) != null]' "$TMP/beam2.out")" \
	"[false,true,false,false]"
check_eq "no null log-prob anywhere" "$(grep -c 'logprob":null' "$TMP/out.jsonl")" 0
# the others, alone on the file without NaN, give the same results
grep -E '"id":"ok2?"' "$TMP/in.jsonl" >"$TMP/solo.jsonl"
"$BATCHGEN" -q -m "$TMP/base.gguf" --device cpu -i "$TMP/solo.jsonl" -o "$TMP/solo.out"
same() { jq -c 'select(.id == "ok" or .id == "ok2") | [.id, .token_ids, .logprobs, .finish_reason]' "$1"; }
check_eq "ok, ok2: the results they get alone" "$(same "$TMP/out.jsonl")" "$(same "$TMP/solo.out")"
summary
