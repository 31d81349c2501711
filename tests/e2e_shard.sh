#!/usr/bin/env bash
# e2e_shard: four --shard K/4 runs merged with `batchgen merge` equal the unsharded run
# (every field but the timings); --shard auto reads the launcher's rank; merge refuses
# incomplete or misordered shards.
. tests/check.sh
. tests/need_jq.sh
# Runs whose outputs are compared use --device cpu: a request's output is independent of
# its batch bitwise on the CPU reference only (DESIGN.md §3), and these runs batch differently.

need_jq || { summary; exit; }

# 203 lines (not a multiple of 4), sampled requests without ids or seeds: the ids are line
# numbers and the seeds --seed + line number, so both must come out as in one run.
in=$TMP/in.jsonl
awk 'BEGIN { for (i = 1; i <= 203; i++) {
	if (i == 50) { print "{\"prompt\": broken"; continue }
	printf "{\"prompt\":\"shard test %d\",\"max_tokens\":%d,\"temperature\":0.9,\"top_k\":20}\n", i, 1 + i % 7 } }' >"$in"
strip() { jq -c 'del(.metrics)' "$1"; }

"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/all.jsonl" --seed 5
check_eq "unsharded: exit 1 (one bad line)" "$?" 1
for k in 0 1 2 3; do
	"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/s$k.jsonl" --seed 5 --shard $k/4
	rc=$?
	# line 50 (index 49) is in shard 1
	if [ $k -eq 1 ]; then check_eq "shard $k: exit 1" "$rc" 1; else check_eq "shard $k: exit 0" "$rc" 0; fi
done
check_eq "shard sizes" "$(wc -l <"$TMP/s0.jsonl" | tr -d ' ') $(wc -l <"$TMP/s1.jsonl" | tr -d ' ') $(wc -l <"$TMP/s2.jsonl" | tr -d ' ') $(wc -l <"$TMP/s3.jsonl" | tr -d ' ')" "51 51 51 50"
check_eq "shard 2 holds lines 3, 7, 11, ..." "$(jq -r .id "$TMP/s2.jsonl" | head -n 3 | tr '\n' ' ')" "3 7 11 "

"$BATCHGEN" merge -o "$TMP/merged.jsonl" "$TMP"/s{0,1,2,3}.jsonl
check_eq "merge exits 0" "$?" 0
check "merged == unsharded" cmp -s <(strip "$TMP/merged.jsonl") <(strip "$TMP/all.jsonl")
"$BATCHGEN" merge -i "$in" "$TMP"/s{0,1,2,3}.jsonl >"$TMP/merged2.jsonl"
check_eq "merge -i to stdout exits 0" "$?" 0
check "merge to stdout is the same" cmp -s "$TMP/merged.jsonl" "$TMP/merged2.jsonl"

# a shard cut short (here: its last 30 results lost, as after a kill) and finished with
# --resume still merges into the same output: the resumed file stays in input order
head -n 21 "$TMP/s1.jsonl" >"$TMP/s1r.jsonl"
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/s1r.jsonl" --seed 5 --shard 1/4 --resume
check_eq "resumed shard: exit 1 (its bad line)" "$?" 1
"$BATCHGEN" merge -i "$in" "$TMP/s0.jsonl" "$TMP/s1r.jsonl" "$TMP"/s{2,3}.jsonl >"$TMP/merged3.jsonl"
check "merge with a resumed shard == unsharded" cmp -s <(strip "$TMP/merged3.jsonl") <(strip "$TMP/all.jsonl")

# incomplete and misordered shards are refused before anything is written
head -n 40 "$TMP/s3.jsonl" >"$TMP/s3short.jsonl"
"$BATCHGEN" merge -o "$TMP/m3.jsonl" "$TMP"/s{0,1,2}.jsonl "$TMP/s3short.jsonl" 2>/dev/null
check_eq "merge: a short shard is refused" "$?" 2
check "merge: nothing written" test ! -e "$TMP/m3.jsonl"
head -n 50 "$TMP/s2.jsonl" >"$TMP/s2short.jsonl"
"$BATCHGEN" merge -i "$in" "$TMP"/s{0,1}.jsonl "$TMP/s2short.jsonl" "$TMP/s3.jsonl" >/dev/null 2>&1
check_eq "merge -i: a shard one line short is refused" "$?" 2
"$BATCHGEN" merge "$TMP"/s{3,0,1,2}.jsonl >/dev/null 2>&1
check_eq "merge: misordered shards are refused" "$?" 2
# shards of equal counts named out of order (a shell glob puts out.10 before out.2): with
# -i the results' ids are checked against the input's lines (here line numbers, for lines
# without an id), so the swap is refused, naming the line, before anything is written
"$BATCHGEN" merge -i "$in" -o "$TMP/swapped.jsonl" "$TMP"/s{1,0,2,3}.jsonl 2>"$TMP/swapped.err"
check_eq "merge -i: equal-count shards out of order are refused" "$?" 2
check "merge -i: ... naming the input line and the ids" grep -q 'input line 1 .* id "1" .* "2"' "$TMP/swapped.err"
check "merge -i: ... nothing written" test ! -e "$TMP/swapped.jsonl"
# -o naming a shard output or the input truncated it before it was read (the shard was
# lost): refused, whatever path names it, and the file kept
cp "$TMP/s0.jsonl" "$TMP/keep0.jsonl"
"$BATCHGEN" merge -o "$TMP/./s0.jsonl" "$TMP"/s{0,1,2,3}.jsonl 2>"$TMP/self.err"
check_eq "merge: -o naming a shard output is refused" "$?" 2
check "merge: ... saying so" grep -q 'is one of the shard outputs' "$TMP/self.err"
check "merge: ... the shard intact" cmp -s "$TMP/s0.jsonl" "$TMP/keep0.jsonl"
cp "$TMP/keep0.jsonl" "$TMP/s0.jsonl" # whatever the check above did to it
cp "$in" "$TMP/keepin.jsonl"
"$BATCHGEN" merge -i "$in" -o "$in" "$TMP"/s{0,1,2,3}.jsonl 2>/dev/null
check_eq "merge: -o naming the input is refused" "$?" 2
check "merge: ... the input intact" cmp -s "$in" "$TMP/keepin.jsonl"
# with ids of its own (native and OpenAI lines): a swap is seen by id; in order it merges
awk 'BEGIN { for (i = 1; i <= 9; i++) {
	if (i % 3 == 0) printf "{\"custom_id\":\"c%d\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"p %d\",\"max_tokens\":2}}\n", i, i
	else printf "{\"id\":\"n%d\",\"prompt\":\"p %d\",\"max_tokens\":2}\n", i, i } }' >"$TMP/ids.jsonl"
for k in 0 1 2; do
	"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$TMP/ids.jsonl" -o "$TMP/i$k.jsonl" --shard $k/3
done
"$BATCHGEN" merge -i "$TMP/ids.jsonl" -o "$TMP/ids.out" "$TMP"/i{0,1,2}.jsonl
check_eq "merge -i, own ids: in order, exit 0" "$?" 0
check_eq "merge -i, own ids: in input order" "$(jq -r '.custom_id // .id' "$TMP/ids.out" | tr '\n' ' ')" \
	"n1 n2 c3 n4 n5 c6 n7 n8 c9 "
"$BATCHGEN" merge -i "$TMP/ids.jsonl" -o "$TMP/ids2.out" "$TMP"/i{0,2,1}.jsonl 2>"$TMP/ids2.err"
check_eq "merge -i, own ids: swapped shards refused" "$?" 2
check "merge -i, own ids: ... naming the ids" grep -q 'input line 2 .* id "n2" .* "c3"' "$TMP/ids2.err"
printf '{"id":"x"' >>"$TMP/s3short.jsonl"
"$BATCHGEN" merge "$TMP"/s{0,1,2}.jsonl "$TMP/s3short.jsonl" >/dev/null 2>&1
check_eq "merge: a torn shard is refused" "$?" 2

# --shard auto from the launchers' variables
SLURM_PROCID=2 SLURM_NTASKS=4 "$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/auto.jsonl" --seed 5 --shard auto
check_eq "slurm auto: exit 0" "$?" 0
check "slurm auto == --shard 2/4" cmp -s <(strip "$TMP/auto.jsonl") <(strip "$TMP/s2.jsonl")
OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 "$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/auto3.jsonl" --seed 5 --shard auto
check "open mpi auto == --shard 3/4" cmp -s <(strip "$TMP/auto3.jsonl") <(strip "$TMP/s3.jsonl")
PMI_RANK=0 PMI_SIZE=4 "$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" -o "$TMP/auto0.jsonl" --seed 5 --shard auto
check "pmi auto == --shard 0/4" cmp -s <(strip "$TMP/auto0.jsonl") <(strip "$TMP/s0.jsonl")
env -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE \
	-u PMI_RANK -u PMI_SIZE "$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" --shard auto >/dev/null 2>&1
check_eq "auto without a launcher: exit 2" "$?" 2
"$BATCHGEN" -m synthetic:builtin --device cpu -q -i "$in" --shard 1/4 --order completion >/dev/null 2>&1
check_eq "--shard with --order completion: exit 2" "$?" 2

summary
