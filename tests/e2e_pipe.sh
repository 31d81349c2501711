#!/usr/bin/env bash
# e2e_pipe: batchgen in a pipeline whose producer is slow does not make the requests it
# already has wait for the next line (cli/cmd_run.c's reader thread + the engine's
# ENGINE_SOURCE_PENDING).
#  - a producer that sleeps between two lines: the first result is out before the second
#    line is written (both --order values);
#  - a feedback loop (a coprocess that writes the next request only after it has read the
#    previous result): completes, where a reader that blocks the engine deadlocks; the
#    results equal a plain run from a file;
#  - lines longer than the read buffer, CRLF, no final newline: as from a file;
#  - SIGINT while the input is silent (the reader blocked on a FIFO, the engine idle):
#    exit 130, and the results written are whole.
# Time limits below are hang guards (seconds, far above what a run takes), not timings.
. tests/check.sh
. tests/need_jq.sh
need_jq || { summary; exit; }

req() { printf '{"id":"%s","prompt":"%s","max_tokens":%d,"temperature":0}\n' "$1" "$2" "$3"; }
norm() { jq -c '{id, token_ids, text, finish_reason, error}' "$1" | sort; }

# ---- a slow producer --------------------------------------------------------------------
for order in completion input; do
	marker=$TMP/second_sent.$order
	fifo=$TMP/out.$order
	mkfifo "$fifo"
	(
		req a "the first line" 4
		sleep 6
		touch "$marker"
		req b "the second line" 4
	) | "$BATCHGEN" -m synthetic:builtin --device cpu -q -i - -o - --order $order >"$fifo" &
	pid=$!
	exec 3<"$fifo"
	first=
	read -r -t 5 first <&3
	got_first=$?
	sent_before=no
	[ -e "$marker" ] && sent_before=yes
	check_eq "$order: the first result arrives while the producer sleeps" "$got_first" 0
	check_eq "$order: ... before the second line is written" "$sent_before" no
	check_eq "$order: it is the first request's" "$(jq -r .id <<<"$first" 2>/dev/null)" a
	second=
	read -r -t 20 second <&3
	check_eq "$order: then the second" "$(jq -r .id <<<"$second" 2>/dev/null)" b
	exec 3<&-
	wait $pid
	check_eq "$order: exit 0" "$?" 0
done

# ---- a feedback loop: the next request is written after the previous result is read ----
N=6
rm -f "$TMP/loop.in"
coproc BG { "$BATCHGEN" -m synthetic:builtin --device cpu -q -i - -o - --order completion; }
bg_pid=$BG_PID
n_got=0
prev="once upon a time"
for i in $(seq 1 $N); do
	line=$(req "c$i" "$prev" $((2 + i % 3)))
	echo "$line" >>"$TMP/loop.in"
	echo "$line" >&"${BG[1]}"
	out=
	read -r -t 20 out <&"${BG[0]}" || break
	echo "$out" >>"$TMP/loop.out"
	n_got=$((n_got + 1))
	# the next prompt depends on this result: a real feedback loop
	prev="step $i $(jq -r '.token_ids | length' <<<"$out")"
done
[ -n "${BG[1]:-}" ] && exec {BG[1]}>&-
wait $bg_pid
rc=$?
check_eq "feedback loop: every result came back before the next request" "$n_got" $N
check_eq "feedback loop: exit 0 at the end of the input" "$rc" 0
if [ "$n_got" = $N ]; then
	"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/loop.in" -o "$TMP/loop.ref"
	check "feedback loop: same results as a run from a file" \
		cmp -s <(norm "$TMP/loop.out") <(norm "$TMP/loop.ref")
fi

# ---- odd lines through a pipe: longer than any buffer, CRLF, no final newline ----------
long=$(head -c 150000 /dev/zero | tr '\0' a | sed 's/aa/a /g')
{
	req o1 "short" 2
	printf '{"id":"o2","prompt":"%s","max_tokens":2}\r\n' "$long"
	req o3 "after the long one" 2
	req o4 "no newline at the end" 2 | tr -d '\n'
} >"$TMP/odd.jsonl"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/odd.jsonl" -o "$TMP/odd.ref"
rc_file=$?
cat "$TMP/odd.jsonl" | "$BATCHGEN" -m synthetic:builtin --device cpu -q -i - -o "$TMP/odd.out"
check_eq "odd lines: the same exit code from a pipe as from the file" "$?" "$rc_file"
check_eq "odd lines: one result per line" "$(jq -r .id "$TMP/odd.out" | tr '\n' ' ')" "o1 o2 o3 o4 "
check "odd lines: the same results as from the file" \
	cmp -s <(norm "$TMP/odd.out") <(norm "$TMP/odd.ref")

# ---- SIGINT while the input is silent -----------------------------------------------------
fifo=$TMP/in.fifo
mkfifo "$fifo"
(req s1 "a story" 3; exec sleep 60) >"$fifo" &
feeder=$!
"$BATCHGEN" -m synthetic:builtin --device cpu -i "$fifo" -o "$TMP/int.jsonl" 2>"$TMP/int.err" &
pid=$!
for _ in $(seq 1 200); do
	[ -s "$TMP/int.jsonl" ] && break
	sleep 0.05
done
check "silent input: the result of the line that came is out" test -s "$TMP/int.jsonl"
kill -INT $pid
gone=no
for _ in $(seq 1 200); do # up to 10 s: a hang guard
	if ! kill -0 $pid 2>/dev/null; then
		gone=yes
		break
	fi
	sleep 0.05
done
check_eq "silent input: SIGINT ends the run (the reader does not hold it)" "$gone" yes
[ $gone = yes ] || kill -KILL $pid 2>/dev/null
wait $pid
rc=$?
kill $feeder 2>/dev/null
wait $feeder 2>/dev/null
check_eq "silent input: exit 130" "$rc" 130
check "silent input: every line is valid JSON" jq -e . "$TMP/int.jsonl" >/dev/null
check_eq "silent input: the one result" "$(jq -r .id "$TMP/int.jsonl" | tr '\n' ' ')" "s1 "

# ---- the reader of the results goes away (| head -1): the man page's exit status 141 ----
for i in $(seq 1 300); do req "h$i" "the line $i" 8; done >"$TMP/head.in"
timeout 120 "$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/head.in" | head -n 1 >"$TMP/head.out"
check_eq "| head -1: batchgen ends by SIGPIPE (141), no hang (124)" "${PIPESTATUS[0]}" 141
check_eq "| head -1: the first result, whole" "$(jq -r .id "$TMP/head.out")" h1
# SIGPIPE ignored by the parent: the write fails, exit 3 naming standard output
(
	trap '' PIPE
	timeout 120 "$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/head.in" 2>"$TMP/head.err" | head -n 1 >/dev/null
	echo "${PIPESTATUS[0]}" >"$TMP/head.rc"
)
check_eq "| head -1, SIGPIPE ignored: exit 3" "$(cat "$TMP/head.rc")" 3
check "| head -1, SIGPIPE ignored: says so" grep -q "standard output: Broken pipe" "$TMP/head.err"

summary
