#!/usr/bin/env bash
# fuzz_rate.sh BINDIR SECONDS NAME:MAX_LEN[:TIMEOUT]...: the executions per second of
# libFuzzer harnesses BINDIR/fuzz_NAME, each run once for SECONDS from a fresh corpus
# holding only build-fuzz/seeds/NAME (fuzz/seeds.sh), with -seed=1 and the flags fuzz/run.sh
# uses (dictionary, -rss_limit_mb=2048), so that two builds of a harness start from the
# same inputs. Prints per harness: executions, exec/s, libFuzzer's last cov and ft, peak RSS.
# Run it under `flock /work/lead/bench.lock` on a shared machine (bench/results/fuzzspeed-*).
set -u
cd "$(dirname "$0")/.."
bin=$1 secs=$2
shift 2
for spec in "$@"; do
	IFS=: read -r n max_len timeout <<<"$spec"
	tmp=$(mktemp -d)
	dict=()
	[ -f fuzz/"$n".dict ] && dict=(-dict=fuzz/"$n".dict)
	"$bin"/fuzz_"$n" -seed=1 -max_total_time="$secs" -max_len="$max_len" -timeout="${timeout:-10}" \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$tmp"/ "${dict[@]}" \
		"$tmp" build-fuzz/seeds/"$n" >"$tmp.log" 2>&1
	rc=$?
	st() { grep -o "stat::$1: *[0-9]*" "$tmp.log" | grep -o '[0-9]*$' | tail -1; }
	cov=$(grep -oE '(DONE|pulse|NEW|REDUCE|INITED) +cov: [0-9]+ ft: [0-9]+' "$tmp.log" | tail -1 |
		sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+)/cov \1 ft \2/')
	printf 'fuzz_%-10s rc %d  %9s execs  %6s exec/s  %-18s rss %s MB  load %s\n' "$n" "$rc" \
		"$(st number_of_executed_units)" "$(st average_exec_per_sec)" "$cov" \
		"$(st peak_rss_mb)" "$(cut -d' ' -f1-3 /proc/loadavg)"
	if [ $rc -eq 0 ]; then
		rm -rf "$tmp" "$tmp.log"
	else
		echo "  found something: log $tmp.log, corpus and artifact in $tmp/"
	fi
done
