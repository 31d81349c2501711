#!/usr/bin/env bash
# e2e_resume: an interrupted run finished with --resume gives the same results as an
# uninterrupted one.
#  - SIGKILL at several pseudo-random moments (seeded), each time resumed: in the end the
#    same set of (id, token_ids, text, finish_reason) as the reference run, no id twice,
#    none missing;
#  - a torn last line is cut off and redone;
#  - SIGINT while the input is still arriving: exit 130, every line valid JSON, and
#    --resume completes it;
#  - duplicate ids stay duplicates across a resume.
. tests/check.sh
. tests/need_jq.sh
# Runs whose outputs are compared use --device cpu: a request's output is independent of
# its batch bitwise on the CPU reference only (DESIGN.md §3), and these runs batch differently.

need_jq || { summary; exit; }

N=200
in=$TMP/in.jsonl
awk -v n=$N 'BEGIN {
	for (i = 1; i <= n; i++)
		printf "{\"id\":\"q%d\",\"prompt\":\"story number %d begins\",\"max_tokens\":%d,\"temperature\":0}\n", i, i, 2 + i % 8
}' >"$in"
# what a result is, timings aside, sorted by id
norm() { jq -c '{id, token_ids, text, finish_reason, error}' "$1" | sort; }

# the reference, timed to place the kills inside a run
t0=$(date +%s%N)
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/ref.jsonl"
check_eq "reference run exits 0" "$?" 0
dur_ms=$((($(date +%s%N) - t0) / 1000000))
[ $dur_ms -ge 60 ] || dur_ms=60
check_eq "reference has every result" "$(wc -l <"$TMP/ref.jsonl" | tr -d ' ')" $N

# ---- SIGKILL at seeded moments, then resume --------------------------------------------
out=$TMP/out.jsonl
rm -f "$out"
RANDOM=20261122
kills=0
for attempt in 1 2 3 4 5; do
	delay_ms=$((RANDOM % (dur_ms / 3)))
	"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$out" --resume &
	pid=$!
	sleep "$(awk -v d=$delay_ms 'BEGIN { printf "%.3f", d / 1000 }')"
	if kill -KILL $pid 2>/dev/null; then
		kills=$((kills + 1))
	fi
	wait $pid 2>/dev/null
	# after a kill, the file holds whole lines only (one write per line)
	if [ -s "$out" ]; then
		check_eq "after kill $attempt: the file ends with a newline" \
			"$(tail -c 1 "$out" | od -An -c | tr -d ' ')" '\n'
		check "after kill $attempt: every line is JSON" jq -e . "$out" >/dev/null
	fi
done
echo "killed $kills of 5 runs (a whole run takes ${dur_ms} ms)"
check "at least one run was killed mid-way" test $kills -ge 1
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$out" --resume
check_eq "final resume exits 0" "$?" 0
check_eq "no id twice" "$(jq -r .id "$out" | sort | uniq -d | wc -l | tr -d ' ')" 0
check_eq "every id once" "$(jq -r .id "$out" | sort -u | wc -l | tr -d ' ')" $N
check "same results as the uninterrupted run" cmp -s <(norm "$out") <(norm "$TMP/ref.jsonl")
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$out" --resume
check_eq "resuming a finished run exits 0" "$?" 0
check_eq "and adds nothing" "$(wc -l <"$out" | tr -d ' ')" $N

# ---- --order completion: results in any order, resumed by id ----------------------------
rm -f "$TMP/oc.jsonl"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/oc.jsonl" --order completion &
pid=$!
sleep "$(awk -v d=$((dur_ms / 3)) 'BEGIN { printf "%.3f", d / 1000 }')"
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/oc.jsonl" --order completion --resume
check_eq "completion order: resume exits 0" "$?" 0
check_eq "completion order: no id twice" "$(jq -r .id "$TMP/oc.jsonl" | sort | uniq -d | wc -l | tr -d ' ')" 0
check "completion order: same results" cmp -s <(norm "$TMP/oc.jsonl") <(norm "$TMP/ref.jsonl")

# ---- a torn last line -------------------------------------------------------------------
head -n 100 "$TMP/ref.jsonl" >"$TMP/torn.jsonl"
sed -n 101p "$TMP/ref.jsonl" | head -c 25 >>"$TMP/torn.jsonl" # no newline: torn
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/torn.jsonl" --resume
check_eq "resume after a torn line exits 0" "$?" 0
check_eq "torn: every id once" "$(jq -r .id "$TMP/torn.jsonl" | sort | uniq | wc -l | tr -d ' ')" $N
check_eq "torn: no extra line" "$(wc -l <"$TMP/torn.jsonl" | tr -d ' ')" $N
check "torn: same results" cmp -s <(norm "$TMP/torn.jsonl") <(norm "$TMP/ref.jsonl")

# a damaged line in the middle is not silently dropped: resume refuses (exit 2)
{ head -n 10 "$TMP/ref.jsonl"; echo 'not json'; sed -n 11,20p "$TMP/ref.jsonl"; } >"$TMP/bad.jsonl"
cp "$TMP/bad.jsonl" "$TMP/bad.orig"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/bad.jsonl" --resume 2>/dev/null
check_eq "a damaged middle line: exit 2" "$?" 2
check "a damaged middle line: file untouched" cmp -s "$TMP/bad.jsonl" "$TMP/bad.orig"

# ---- SIGINT while input is still arriving ------------------------------------------------
# Half the input arrives, then the writer stalls: the run cannot finish on its own.
fifo=$TMP/fifo
mkfifo "$fifo"
(head -n 100 "$in"; exec sleep 30) >"$fifo" &
feeder=$!
# (a short look-ahead, so that the engine runs what it has instead of waiting to fill it)
"$BATCHGEN" -m synthetic:builtin --device cpu -i "$fifo" -o "$TMP/int.jsonl" --max-queued 8 2>"$TMP/int.err" &
pid=$!
# wait until some results are out, then interrupt
for _ in $(seq 1 200); do
	[ -s "$TMP/int.jsonl" ] && break
	sleep 0.05
done
sleep 0.2
kill -INT $pid
wait $pid
rc=$?
kill $feeder 2>/dev/null
wait $feeder 2>/dev/null
check_eq "SIGINT: exit 130" "$rc" 130
check "SIGINT: says how to finish" grep -q -- "--resume" "$TMP/int.err"
check "SIGINT: every line is valid JSON" jq -e . "$TMP/int.jsonl" >/dev/null
n_int=$(wc -l <"$TMP/int.jsonl" | tr -d ' ')
check "SIGINT: some but not all results" test "$n_int" -gt 0 -a "$n_int" -lt $N
# input order is kept: the results are the first n_int lines' ids
check_eq "SIGINT: an in-order prefix" "$(jq -r .id "$TMP/int.jsonl" | tr '\n' ' ')" \
	"$(head -n "$n_int" "$in" | jq -r .id | tr '\n' ' ')"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/int.jsonl" --resume
check_eq "SIGINT then resume: exit 0" "$?" 0
check "SIGINT then resume: same results" cmp -s <(norm "$TMP/int.jsonl") <(norm "$TMP/ref.jsonl")
# input order is kept across the resume too
check "SIGINT then resume: input order" cmp -s <(jq -r .id "$TMP/int.jsonl") <(jq -r .id "$in")

# ---- duplicates across a resume --------------------------------------------------------
printf '%s\n' '{"id":"a","prompt":"one","max_tokens":2}' '{"id":"b","prompt":"two","max_tokens":2}' \
	'{"id":"a","prompt":"three","max_tokens":2}' >"$TMP/dup.jsonl"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/dup.jsonl" -o "$TMP/dup.ref"
check_eq "duplicate: exit 1" "$?" 1
head -n 1 "$TMP/dup.ref" >"$TMP/dup.out"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/dup.jsonl" -o "$TMP/dup.out" --resume
check_eq "duplicate: resume exits 1" "$?" 1
check "duplicate: the same three results" cmp -s <(norm "$TMP/dup.out") <(norm "$TMP/dup.ref")

# ---- ids that are not valid UTF-8 (issue 16): an error each, and resume stays exact ------
# The writer could not write such an id back unchanged (it would hold U+FFFD), so --resume
# would never find it and run the line again on every resume (2 -> 4 -> 6 lines before).
echo 'eyJpZCI6Inj/IiwicHJvbXB0IjoiaGkiLCJtYXhfdG9rZW5zIjoyfQp7ImlkIjoief4iLCJwcm9tcHQiOiJ5byIsIm1heF90b2tlbnMiOjJ9Cg==' |
	base64 -d >"$TMP/utf8.jsonl"
"$BATCHGEN" --device cpu -q -i "$TMP/utf8.jsonl" -o "$TMP/utf8.out"
check_eq "id not UTF-8: exit 1" "$?" 1
check_eq "id not UTF-8: an error known by the line number" \
	"$(jq -r '"\(.id) \(.error.code) \(.error.message)"' "$TMP/utf8.out" | tr '\n' ,)" \
	"1 invalid_request id is not valid UTF-8,2 invalid_request id is not valid UTF-8,"
for i in 1 2; do
	"$BATCHGEN" --device cpu -q -i "$TMP/utf8.jsonl" -o "$TMP/utf8.out" --resume
	check_eq "id not UTF-8: resume $i writes nothing again" "$(wc -l <"$TMP/utf8.out" | tr -d ' ')" 2
done

# --resume into the output of another input: its results are kept (their ids are no line's
# here), so the file ends with more lines than the input; the run warns, naming how many
printf '{"id":"other","text":"x","token_ids":[],"finish_reason":"length","error":null}\n' >"$TMP/foreign.out"
printf '{"id":"a","prompt":"hi","max_tokens":2}\n' >"$TMP/foreign.jsonl"
"$BATCHGEN" --device cpu -i "$TMP/foreign.jsonl" -o "$TMP/foreign.out" --resume 2>"$TMP/foreign.err"
check_eq "foreign results: exit 0 (the input is done)" "$?" 0
check "foreign results: a warning naming them" grep -q 'warning: 1 result kept in .*foreign.out has an id that no line of' "$TMP/foreign.err"
"$BATCHGEN" --device cpu -i "$TMP/foreign.jsonl" -o "$TMP/foreign.out" --resume 2>"$TMP/again.err"
check_eq "foreign results: a resume of the same input after them is quiet about its own" \
	"$(grep -c 'warning: 1 result kept' "$TMP/again.err")" 1
"$BATCHGEN" --device cpu -i "$TMP/utf8.jsonl" -o "$TMP/utf8.out" --resume 2>"$TMP/utf8.err"
check_eq "foreign results: no warning for a plain resume" "$(grep -c 'no line of' "$TMP/utf8.err")" 0

summary
