#!/usr/bin/env bash
# tokenize_bench.sh [VOCAB...]: tokenizer throughput, batchgen against llama.cpp.
#
# Builds a deterministic ~10 MB corpus of mixed text from ../shared (the llama.cpp
# tokenizer test strings: many scripts, emoji, whitespace runs, digits; and the English
# Markdown documents), cut into prompt-sized chunks (one per test string / paragraph,
# separated by the byte 0x1E), then tokenizes every chunk with
#   - batchgen's tokenizer (bench/tokenize_bench.c, built here with -O2), and
#   - llama.cpp's (node-llama-cpp 3.22.1's prebuilt CPU build, bench/llamacpp_tokenize.mjs),
# both without BOS and with special tokens as plain text, RUNS times each (default 5, after
# one warm-up run), and prints the median MB/s of each and their ratio. The two must give
# the same number of tokens and the same hash of the id sequence, or the script fails.
# Default vocabularies: llama-bpe llama-spm. Writes bench/results/tokenize-DATE.md
# (RESULTS=path to override, RESULTS=- to skip). Needs gcc, libpcre2-dev, python3, node
# and `npm ci --prefix bench`.
set -eu
cd "$(dirname "$0")/.."
shared=${BG_SHARED:-../shared}
runs=${RUNS:-5}
vocabs=${*:-llama-bpe llama-spm}
work=${TMPDIR:-/tmp}/batchgen-tokbench.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

[ -d bench/node_modules/node-llama-cpp ] || {
	echo "tokenize_bench: run 'npm ci --prefix bench' first" >&2
	exit 2
}
cc=${CC:-cc}
$cc -std=c11 -O2 -D_GNU_SOURCE -Icore -I. core/status.c core/model/gguf.c core/text/tok_split.c \
	core/text/tokenizer.c core/text/tok_encode.c \
	bench/tokenize_bench.c -o "$work/tokenize_bench" -lpcre2-8

# ---- corpus: deterministic, valid UTF-8, ~10 MB ----
python3 - "$shared" "$work/corpus.txt" <<'PY'
import glob, sys
shared, out = sys.argv[1], sys.argv[2]
chunks = []
for p in sorted(glob.glob(shared + "/vocab/*.inp")):
    data = open(p, "rb").read().decode("utf-8")
    chunks += [c for c in data.split("\n__ggml_vocab_test__\n") if c]
for p in sorted(glob.glob(shared + "/*.md") + glob.glob(shared + "/*/README.md")):
    data = open(p, "rb").read().decode("utf-8")
    chunks += [c for c in data.split("\n\n") if c.strip()]
base = "\x1e".join(c.replace("\x1e", " ") for c in chunks)
target, parts, size = 10_000_000, [], 0
while size < target:
    parts.append(base)
    size += len(base.encode("utf-8")) + 1
open(out, "wb").write("\x1e".join(parts).encode("utf-8"))
PY
bytes=$(wc -c <"$work/corpus.txt")

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
field() { sed -E "s/.*\"$1\": ?([0-9.e+-]+).*/\1/"; }

machine=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- core/text/ 2>/dev/null || commit="$commit (tokenizer sources modified)"
date_utc=$(date -u +%Y-%m-%dT%H:%MZ)
load_start=$(cut -d" " -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
table="| vocab | chunks | tokens | batchgen MB/s | llama.cpp MB/s | ratio | ids identical |
|---|---|---|---|---|---|---|"
status=0
detail=
for v in $vocabs; do
	gguf=$shared/vocab/ggml-vocab-$v.gguf
	if ! "$work/tokenize_bench" "$gguf" "$work/corpus.txt" $((runs + 1)) >"$work/bg.$v" ||
		! node bench/llamacpp_tokenize.mjs "$gguf" "$work/corpus.txt" $((runs + 1)) \
			>"$work/ll.all.$v" 2>"$work/node.err"; then
		echo "tokenize_bench: $v failed" >&2
		cat "$work/node.err" >&2
		table="$table
| $v | failed | | | | | |"
		status=1
		continue
	fi
	grep '"impl"' "$work/ll.all.$v" >"$work/ll.$v"
	bg_s=$(tail -n +2 "$work/bg.$v" | field seconds | median)
	ll_s=$(tail -n +2 "$work/ll.$v" | field seconds | median)
	bg_tok=$(head -n 1 "$work/bg.$v" | field tokens)
	ll_tok=$(head -n 1 "$work/ll.$v" | field tokens)
	bg_h=$(head -n 1 "$work/bg.$v" | field hash)
	ll_h=$(head -n 1 "$work/ll.$v" | field hash)
	chunks=$(head -n 1 "$work/bg.$v" | field chunks)
	same=yes
	if [ "$bg_tok" != "$ll_tok" ] || [ "$bg_h" != "$ll_h" ]; then
		same="NO (batchgen $bg_tok tokens, hash $bg_h; llama.cpp $ll_tok, hash $ll_h)"
		status=1
	fi
	row=$(awk -v b="$bytes" -v bs="$bg_s" -v ls="$ll_s" \
		'BEGIN {printf "%.2f | %.2f | %.2fx", b/1e6/bs, b/1e6/ls, ls/bs}')
	table="$table
| $v | $chunks | $bg_tok | $row | $same |"
	detail="$detail
- $v, batchgen runs (s): $(tail -n +2 "$work/bg.$v" | field seconds | tr '\n' ' ')
- $v, llama.cpp runs (s): $(tail -n +2 "$work/ll.$v" | field seconds | tr '\n' ' ')"
done

report="# Tokenizer throughput: batchgen vs llama.cpp

- date: $date_utc
- machine: ${machine:-unknown} ($(nproc) CPUs visible; shared with other jobs; load
  average at start $load_start, at end $(cut -d" " -f1-3 /proc/loadavg 2>/dev/null))
- commit: $commit
- command: \`bench/tokenize_bench.sh $vocabs\` (RUNS=$runs)
- corpus: $bytes bytes of UTF-8 built from ../shared (tokenizer test strings in many
  scripts + Markdown prose), cut into prompt-sized chunks; each chunk tokenized
  separately, no BOS, no special-token parsing
- llama.cpp: node-llama-cpp 3.22.1 prebuilt CPU build, \`model.tokenize(chunk, false)\`
  on a vocab-only model; time of the tokenize calls only (includes the JS -> C++ string
  conversion)
- batchgen: \`tok_encode\` from bench/tokenize_bench.c (-O2); time of the calls only
- numbers: median of $runs runs after one warm-up run, single thread each

$table

ratio = batchgen MB/s / llama.cpp MB/s. \"ids identical\": same token count and the same
hash of the whole id sequence. Every timed run:
$detail
"
echo "$report"
if [ "${RESULTS:-}" != "-" ]; then
	out=${RESULTS:-bench/results/tokenize-$(date -u +%F).md}
	mkdir -p "$(dirname "$out")"
	printf '%s' "$report" >"$out"
	echo "written to $out" >&2
fi
exit $status
