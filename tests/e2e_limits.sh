#!/usr/bin/env bash
# e2e_limits: memory stays bounded on a huge request line (issue 16, defect 5).
#  - a 16 MB prompt with no space (one word: the tokenizer's worst case, ~25 bytes of
#    memory per prompt byte) is refused as too_long by its size, before tokenizing: the
#    run's peak RSS grows by less than 8 bytes per line byte over a tiny request's (it
#    grew by ~25 before; what is left is the line, its JSON string and the prompt copy);
#  - a prompt that fits by size is still tokenized and answered;
#  - the same for a chat request: its rendered prompt is measured before it is tokenized.
. tests/check.sh

MB=16
/usr/bin/python3 - "$TMP" "$MB" <<'PY'
import json, sys
d, mb = sys.argv[1], int(sys.argv[2])
with open(d + "/big.jsonl", "w") as f:
    f.write(json.dumps({"id": "big", "prompt": "a" * (mb << 20), "max_tokens": 2}) + "\n")
with open(d + "/small.jsonl", "w") as f:
    f.write(json.dumps({"id": "small", "prompt": "a", "max_tokens": 2}) + "\n")
PY
# peak RSS (KiB) of a run of the binary on $1 (output $2, more flags after), through
# getrusage of the child
peak() {
	/usr/bin/python3 -c '
import resource, subprocess, sys
subprocess.run([sys.argv[1], "-m", "synthetic:builtin", "--device", "cpu", "-q", "-i", sys.argv[2], "-o", sys.argv[3]] + sys.argv[4:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$BATCHGEN" "$@"
}
# ASan keeps freed memory in quarantine; without it the peak is the live memory
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0
small=$(peak "$TMP/small.jsonl" "$TMP/small.out")
big=$(peak "$TMP/big.jsonl" "$TMP/big.out")
grow=$(((big - small) * 1024 / (MB << 20)))
check "peak RSS grows by $grow bytes per line byte (< 8; small $small KiB, big $big KiB)" \
	test "$grow" -lt 8
check_eq "the huge prompt is too_long" "$(grep -o '"code":"[a-z_]*"' "$TMP/big.out")" \
	'"code":"too_long"'
check "the error names the size" grep -q 'prompt is 16777216 bytes, at least' "$TMP/big.out"
check "a small prompt is answered" grep -q '"finish_reason":"length"' "$TMP/small.out"

# ---- the chat path (messages): the rendered prompt is refused by its size before it is
# tokenized too (jsonl_read.h; before: 16 MB of content peaked at 481,880 KiB, ~29 bytes
# per line byte, tokenized in the reader before the engine's size check)
/usr/bin/python3 - "$TMP" "$MB" <<'PY'
import json, sys
d, mb = sys.argv[1], int(sys.argv[2])
with open(d + "/bigchat.jsonl", "w") as f:
    f.write(json.dumps({"id": "bigchat", "messages": [{"role": "user", "content": "a" * (mb << 20)}],
                        "max_tokens": 2}) + "\n")
with open(d + "/smallchat.jsonl", "w") as f:
    f.write(json.dumps({"id": "smallchat", "messages": [{"role": "user", "content": "a"}],
                        "max_tokens": 2}) + "\n")
PY
small=$(peak "$TMP/smallchat.jsonl" "$TMP/smallchat.out" --chat-template chatml)
big=$(peak "$TMP/bigchat.jsonl" "$TMP/bigchat.out" --chat-template chatml)
grow=$(((big - small) * 1024 / (MB << 20)))
check "chat: peak RSS grows by $grow bytes per line byte (< 8; small $small KiB, big $big KiB)" \
	test "$grow" -lt 8
check_eq "chat: the huge message is too_long" "$(grep -o '"code":"[a-z_]*"' "$TMP/bigchat.out")" \
	'"code":"too_long"'
check "chat: the error names the chat prompt's size" \
	grep -q 'messages: the chat prompt is 167772[0-9][0-9] bytes, at least' "$TMP/bigchat.out"
check "chat: a small message is answered" grep -q '"finish_reason":"length"' "$TMP/smallchat.out"
# max_tokens alone at or past the max sequence length: said so, not as a prompt size
# ("prompt is 2 bytes, at least 1 tokens ...; with max_tokens (100000000) that is beyond")
printf '{"prompt":"Hi","max_tokens":100000000}\n' | "$BATCHGEN" -q >"$TMP/mt.out"
check_eq "max_tokens past the context: too_long" "$(jq -r .error.code "$TMP/mt.out")" too_long
check "max_tokens past the context: the message names max_tokens first" \
	grep -q '"message":"max_tokens (100000000) leaves no room for the prompt' "$TMP/mt.out"
summary
