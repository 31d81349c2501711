#!/usr/bin/env bash
# e2e_cli: the command line as users meet it, on synthetic:builtin (the random-weight model
# that was the default before stories260K; these checks were written for its shape).
#  - a 10,000-line input with 100 bad lines of eight kinds gives exactly 10,000 result
#    lines, in input order, an error result for exactly the bad lines (with their line
#    numbers), and exit status 1; stdout carries nothing but results;
#  - --help / --version / usage errors (exit 2, nothing on stdout) / a bad model (exit 3,
#    one line on stderr).
. tests/check.sh
. tests/need_jq.sh
# Runs whose outputs are compared use --device cpu: a request's output is independent of
# its batch bitwise on the CPU reference only (DESIGN.md §3), and these runs batch differently.

# ---- the 10,000-line file ----------------------------------------------------------
# Line i (1-based) is bad when i % 100 == 37; its kind cycles through eight faults.
# Good lines are greedy, a one-letter prompt (two tokens with BOS), 1 token out, ids "r<i>"
# (tokens are what costs time, and the suite also runs under ASan).
in=$TMP/in.jsonl
awk 'BEGIN {
	long = "300"; for (k = 1; k < 1100; k++) long = long ",300"
	for (i = 1; i <= 10000; i++) {
		if (i % 100 == 37) {
			kind = int(i / 100) % 8
			if (kind == 0) print "{\"id\":\"r" i "\",\"prompt\":\"truncated"
			else if (kind == 1) print "{\"id\":\"r" i "\",\"prompt\":\"x\",\"max_tokens\":\"ten\"}"
			else if (kind == 2) print "{\"id\":\"r" i "\",\"max_tokens\":1}"
			else if (kind == 3) print "{\"id\":\"r" i "\",\"prompt\":\"\",\"max_tokens\":1}"
			else if (kind == 4) print "{\"id\":\"r" i "\",\"input_ids\":[1,999999],\"max_tokens\":1}"
			else if (kind == 5) print "{\"id\":\"r1\",\"prompt\":\"dup\",\"max_tokens\":1}"
			else if (kind == 6) print "{\"id\":\"r" i "\",\"input_ids\":[" long "],\"max_tokens\":1}"
			else print ""
		} else {
			printf "{\"id\":\"r%d\",\"prompt\":\"%s\",\"max_tokens\":1,\"temperature\":0}\n", i, substr("abcdefghij", i % 10 + 1, 1)
		}
	}
}' >"$in"
check_eq "input lines" "$(wc -l <"$in" | tr -d ' ')" 10000
awk 'BEGIN { for (i = 1; i <= 10000; i++) if (i % 100 == 37) print i }' >"$TMP/bad.want"

"$BATCHGEN" -m synthetic:builtin --device cpu -i "$in" --progress-interval 1000 >"$TMP/out.jsonl" 2>"$TMP/err.txt"
rc=$?
check_eq "exit status with some bad lines" "$rc" 1
check_eq "one result per input line" "$(wc -l <"$TMP/out.jsonl" | tr -d ' ')" 10000
if need_jq; then
	# every stdout line is a JSON object with an id: nothing else went to stdout
	check_eq "stdout holds only results" \
		"$(jq -r 'if type == "object" and has("id") then "ok" else "bad" end' \
			<"$TMP/out.jsonl" 2>&1 | sort | uniq -c | tr -s ' ')" " 10000 ok"
	jq -r 'select(.error != null) | .error.line' <"$TMP/out.jsonl" >"$TMP/bad.got"
	check "error results exactly on the bad lines" cmp -s "$TMP/bad.got" "$TMP/bad.want"
	# results come in input order: good line i carries id r<i>
	jq -r 'select(.error == null) | .id' <"$TMP/out.jsonl" >"$TMP/ids.got"
	awk 'BEGIN { for (i = 1; i <= 10000; i++) if (i % 100 != 37) print "r" i }' >"$TMP/ids.want"
	check "good results in input order" cmp -s "$TMP/ids.got" "$TMP/ids.want"
	check_eq "good results generated at most 1 token" \
		"$(jq -r 'select(.error == null) | (.token_ids | length) == .usage.completion_tokens and .usage.completion_tokens <= 1' \
			<"$TMP/out.jsonl" | sort -u)" true
	check_eq "error results say finish_reason error" \
		"$(jq -r 'select(.error != null) | .finish_reason' <"$TMP/out.jsonl" | sort -u)" error
	check_eq "the duplicate id is reported as such" \
		"$(jq -r 'select(.error != null and .error.line == 537) | .error.code' <"$TMP/out.jsonl")" \
		duplicate_id
	check_eq "the empty line is reported as such" \
		"$(jq -r 'select(.error != null and .error.line == 737) | .error.code' <"$TMP/out.jsonl")" \
		empty_line
	check_eq "invalid JSON is reported as such" \
		"$(jq -r 'select(.error != null and .error.line == 837) | .error.code' <"$TMP/out.jsonl")" \
		invalid_json
fi
check "the summary went to stderr" grep -q "requests" "$TMP/err.txt"

# A line without "id" is known by its line number: an explicit id equal to another line's
# number is the same id, whichever comes first (cli/idset keeps line numbers apart from
# explicit ids, so both orders must be caught).
if command -v jq >/dev/null; then
	printf '%s\n' '{"id":"3","prompt":"a","max_tokens":1}' '{"prompt":"b","max_tokens":1}' \
		'{"prompt":"c","max_tokens":1}' '{"id":"2","prompt":"d","max_tokens":1}' \
		'{"id":"03","prompt":"e","max_tokens":1}' >"$TMP/lineids.jsonl"
	"$BATCHGEN" run -m synthetic:builtin -i "$TMP/lineids.jsonl" -o "$TMP/lineids.out" 2>/dev/null
	check_eq "ids equal to another line's number are duplicates, in both orders" \
		"$(jq -r '"\(.id) \(.error.code // "ok")"' <"$TMP/lineids.out" | tr '\n' ,)" \
		"3 ok,2 ok,3 duplicate_id,2 duplicate_id,03 ok,"
fi

# ---- the first 1000 lines through stdin and -o: the same results ----------------------
head -n 1000 "$in" | "$BATCHGEN" -m synthetic:builtin --device cpu -q -o "$TMP/out2.jsonl" >"$TMP/stdout2.txt" 2>"$TMP/err2.txt"
check_eq "exit status via stdin" "$?" 1
check_eq "nothing on stdout with -o FILE" "$(wc -c <"$TMP/stdout2.txt" | tr -d ' ')" 0
check_eq "nothing on stderr with -q" "$(wc -c <"$TMP/err2.txt" | tr -d ' ')" 0
if need_jq; then
	norm() { jq -c 'del(.metrics)' "$1"; }
	check "stdin and file give the same results" cmp -s <(head -n 1000 "$TMP/out.jsonl" | norm /dev/stdin) \
		<(norm "$TMP/out2.jsonl")
fi

# ---- CRLF line ends (a file from Windows): the same results ------------------------------
head -n 300 "$in" | sed 's/$/\r/' >"$TMP/crlf.jsonl"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/crlf.jsonl" -o "$TMP/crlf.out"
check_eq "CRLF: exit status" "$?" 1
if need_jq; then
	check "CRLF: same results as LF" cmp -s <(head -n 300 "$TMP/out.jsonl" | norm /dev/stdin) \
		<(norm "$TMP/crlf.out")
fi

# ---- all good: exit 0 ----------------------------------------------------------------
printf '{"id":"a","prompt":"hello","max_tokens":2}\n{"prompt":"world","max_tokens":1}\n' |
	"$BATCHGEN" -m synthetic:builtin -q >"$TMP/ok.jsonl"
check_eq "exit status when every request succeeds" "$?" 0
check_eq "two results" "$(wc -l <"$TMP/ok.jsonl" | tr -d ' ')" 2
if need_jq; then
	check_eq "a request without id gets its line number" "$(jq -r .id <"$TMP/ok.jsonl" | tail -n 1)" 2
fi

# -q keeps warnings: a misspelled field runs with the default, said once even when quiet
printf '{"prompt":"x","max_token":3}\n{"prompt":"y","max_token":3}\n' |
	"$BATCHGEN" -m synthetic:builtin -q -o "$TMP/q.out" 2>"$TMP/q.err"
check_eq "-q with an unknown field: exit 0" "$?" 0
check_eq "-q with an unknown field: one warning naming it" \
	"$(grep -c 'warning: line 1: unknown field "max_token" ignored' "$TMP/q.err")" 1
check_eq "-q with an unknown field: nothing else on stderr" "$(wc -l <"$TMP/q.err" | tr -d ' ')" 1

# ---- help and version ----------------------------------------------------------------
"$BATCHGEN" --help >"$TMP/help.txt" 2>&1
check_eq "--help exits 0" "$?" 0
for flag in --model --input --output --stats --report --device --policy --max-tokens \
	--temperature --resume --shard --progress-interval --quiet --version; do
	check "--help lists $flag" grep -q -- "$flag" "$TMP/help.txt"
done
check "--help shows defaults" grep -q "(default: 256)" "$TMP/help.txt"
v=$("$BATCHGEN" --version)
check_eq "--version exits 0" "$?" 0
check "--version names the version and the commit" \
	bash -c '[[ $1 =~ ^batchgen\ [0-9]+\.[0-9]+\.[0-9]+.*commit ]]' _ "$v"
check_eq "run --version is the same" "$("$BATCHGEN" run --version)" "$v"
"$BATCHGEN" help >/dev/null
check_eq "help exits 0" "$?" 0

# ---- usage errors: exit 2, nothing on stdout -------------------------------------------
usage_error() {
	local name=$1
	shift
	"$@" </dev/null >"$TMP/u.out" 2>"$TMP/u.err"
	local rc=$?
	check_eq "$name: exit 2" "$rc" 2
	check_eq "$name: nothing on stdout" "$(wc -c <"$TMP/u.out" | tr -d ' ')" 0
	check "$name: a message on stderr" test -s "$TMP/u.err"
}
usage_error "unknown option" "$BATCHGEN" --bogus
usage_error "unknown command" "$BATCHGEN" frobnicate
# expert flags on a shape without experts were ignored without a word (a dense model written)
usage_error "synth --experts-used without experts" "$BATCHGEN" synth --shape tiny --experts-used 2 -o "$TMP/dense.gguf"
check "synth --experts-used without experts: says why" grep -q -- "--experts-used and --ffn-exp need experts" "$TMP/u.err"
check "synth --experts-used without experts: no file" test ! -e "$TMP/dense.gguf"
usage_error "synth --ffn-exp without experts" "$BATCHGEN" synth --shape qwen3-tiny --ffn-exp 64 -o "$TMP/dense.gguf"
# the line synth writes names the experts (a mixtral file's arch is llama: it looked dense)
"$BATCHGEN" synth --shape mixtral-tiny -o "$TMP/mix.gguf" 2>"$TMP/mix.err"
check "synth of a mixture of experts: its line names the experts" grep -q "ffn 64, 2 of 8 experts 64 wide" "$TMP/mix.err"
usage_error "not a number" "$BATCHGEN" --max-tokens ten
usage_error "out of range" "$BATCHGEN" --top-p 1.5
usage_error "bad policy" "$BATCHGEN" --policy sometimes
usage_error "bad device" "$BATCHGEN" --device tpu
usage_error "missing argument" "$BATCHGEN" -m
usage_error "stray argument" "$BATCHGEN" run extra.jsonl
usage_error "missing input file" "$BATCHGEN" -i "$TMP/does-not-exist.jsonl"
# a folder as the input opens but cannot be read: a usage error (exit 2), not an I/O
# failure that tells to rerun with --resume
usage_error "input is a folder" "$BATCHGEN" -i "$TMP"
check "input is a folder: says so" grep -q "is a folder" "$TMP/u.err"
# --stats - is standard output, as -o - is (it made a file named "-"); beside results on
# standard output too it is refused
usage_error "--stats - beside results on stdout" "$BATCHGEN" --stats -
bg_abs=$(realpath "$BATCHGEN")
(cd "$TMP" && printf '{"id":"a","prompt":"x","max_tokens":2}\n' |
	"$bg_abs" -m synthetic:builtin -q -o "$TMP/s.out" --stats - >"$TMP/s.stdout")
check_eq "--stats -: exit 0" "$?" 0
check "--stats -: no file named -" test ! -e "$TMP/-"
check_eq "--stats -: statistics lines on stdout" "$(jq -r 'has("iter")' "$TMP/s.stdout" | sort -u)" true
check_eq "--stats -: the result in -o" "$(jq -r .id "$TMP/s.out")" a
# --report - likewise (one JSON object after the run), refused beside results or
# statistics on standard output
usage_error "--report - beside results on stdout" "$BATCHGEN" --report -
usage_error "--report - beside --stats -" "$BATCHGEN" -o "$TMP/r.out" --stats - --report -
(cd "$TMP" && printf '{"id":"a","prompt":"x","max_tokens":2}\n' |
	"$bg_abs" -m synthetic:builtin -q -o "$TMP/r.out" --report - >"$TMP/r.stdout")
check_eq "--report -: exit 0" "$?" 0
check "--report -: no file named -" test ! -e "$TMP/-"
check_eq "--report -: the report on stdout" "$(jq -r .requests.ok "$TMP/r.stdout")" 1
usage_error "--resume without -o" "$BATCHGEN" --resume
usage_error "bad shard" "$BATCHGEN" --shard 4/4
usage_error "bench option in run" "$BATCHGEN" --workload F1
head -n 3 "$in" >"$TMP/same.jsonl"
usage_error "output = input" "$BATCHGEN" -i "$TMP/same.jsonl" -o "$TMP/same.jsonl"
check_eq "output = input: the input is intact" "$(wc -l <"$TMP/same.jsonl" | tr -d ' ')" 3
# two outputs naming one file: the report overwrote the results at the end (exit 0), the
# statistics were interleaved with them; refused, whether the file exists or not
usage_error "-o = --report" "$BATCHGEN" -i "$TMP/same.jsonl" -o "$TMP/one.out" --report "$TMP/./one.out"
usage_error "-o = --stats" "$BATCHGEN" -i "$TMP/same.jsonl" -o "$TMP/same.out2" --stats "$TMP/same.out2"
: >"$TMP/exists.out"
usage_error "--stats = --report, existing" "$BATCHGEN" -i "$TMP/same.jsonl" -o "$TMP/r.jsonl" \
	--stats "$TMP/exists.out" --report "$TMP/../$(basename "$TMP")/exists.out"
check "two outputs naming one file: the message names both options" grep -q -- '--stats and --report name the same file' "$TMP/u.err"

# ---- model and device errors: exit 3, one line --------------------------------------
model_error() {
	local name=$1
	shift
	printf '{"prompt":"x"}\n' | "$@" >"$TMP/m.out" 2>"$TMP/m.err"
	local rc=$?
	check_eq "$name: exit 3" "$rc" 3
	check_eq "$name: one line on stderr" "$(wc -l <"$TMP/m.err" | tr -d ' ')" 1
	check_eq "$name: nothing on stdout" "$(wc -c <"$TMP/m.out" | tr -d ' ')" 0
}
model_error "missing model" "$BATCHGEN" -m "$TMP/nope.gguf"
head -c 4096 /dev/urandom >"$TMP/garbage.gguf"
model_error "garbage model" "$BATCHGEN" -m "$TMP/garbage.gguf"
printf 'GGUF\003\000\000\000' >"$TMP/short.gguf"
model_error "truncated model" "$BATCHGEN" -m "$TMP/short.gguf"
# a directory (a hub download's folder): names the .gguf files in it, so the user can pick
mkdir -p "$TMP/mdir" && : >"$TMP/mdir/model-Q8_0.gguf" && : >"$TMP/mdir/README.md"
model_error "directory as model" "$BATCHGEN" -m "$TMP/mdir"
check "directory as model: says it is a directory and names its .gguf file" \
	grep -q "is a directory.*model-Q8_0.gguf" "$TMP/m.err"
# an output that cannot be written (a full disk): exit 3, and the reason
if [ -w /dev/full ]; then
	printf '{"prompt":"x","max_tokens":1}\n' | "$BATCHGEN" -m synthetic:builtin -q >/dev/full 2>"$TMP/full.err"
	check_eq "full disk: exit 3" "$?" 3
	check "full disk: says so" grep -q "No space left" "$TMP/full.err"
	# ... and the summary does not count the lost result as done ("1 ok" before)
	printf '{"prompt":"x","max_tokens":1}\n' | "$BATCHGEN" -m synthetic:builtin >/dev/full 2>"$TMP/full.err"
	check "full disk: the summary counts no result written" grep -q "(0 ok, 0 failed" "$TMP/full.err"
	# the statistics and the report on a full disk: exit 3 naming the file, not 0 with
	# the file lost; the results are still written whole
	for what in stats report; do
		printf '{"prompt":"x","max_tokens":2}\n' |
			"$BATCHGEN" -m synthetic:builtin -q --$what /dev/full >"$TMP/full.$what.out" 2>"$TMP/full.$what.err"
		check_eq "--$what on a full disk: exit 3" "$?" 3
		check "--$what on a full disk: says which file" grep -q "/dev/full" "$TMP/full.$what.err"
		check_eq "--$what on a full disk: the result is written" \
			"$(jq -r .finish_reason "$TMP/full.$what.out")" length
	done
fi
# --device cuda: exit 3 with one line where CUDA is missing; a GPU machine runs it
printf '{"prompt":"x","max_tokens":1}\n' | "$BATCHGEN" -m synthetic:builtin -q --device cuda >/dev/null 2>"$TMP/c.err"
rc=$?
if [ $rc -ne 0 ]; then
	check_eq "--device cuda without CUDA: exit 3" "$rc" 3
	check_eq "--device cuda without CUDA: one line" "$(wc -l <"$TMP/c.err" | tr -d ' ')" 1
fi

# beam search on a model whose every layer is windowed (blocks behind the window are given
# back, which beams' shared tables do not follow): that line is refused, the others run
"$BATCHGEN" synth --shape gemma2-swa-tiny --dtype f32 --seed 3 -o "$TMP/swa.gguf" 2>/dev/null
printf '%s\n' '{"id":"b","prompt":"Once","max_tokens":3,"temperature":0,"beam_width":2}' \
	'{"id":"g","prompt":"Once","max_tokens":3,"temperature":0}' |
	"$BATCHGEN" -m "$TMP/swa.gguf" -q -i - -o "$TMP/swa.out" 2>/dev/null
check_eq "beam on an all-windowed model: refused" "$(jq -r 'select(.id=="b") | .error.message' "$TMP/swa.out" | grep -c 'sliding window')" 1
check_eq "beam on an all-windowed model: the other line runs" "$(jq -r 'select(.id=="g") | .finish_reason' "$TMP/swa.out")" length

summary
