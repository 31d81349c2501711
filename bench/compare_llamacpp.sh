#!/usr/bin/env bash
# compare_llamacpp.sh: batchgen against llama.cpp's CPU build on the same GGUF model and the
# same requests (random prompt token ids from one seed, greedy, EOS ignored), in one run on
# one machine, so that the ratio is meaningful even where the absolute numbers are noisy.
#
#   bench/compare_llamacpp.sh [SCENARIO...]      (run from the repository root)
#
# Scenarios (all by default):
#   decode    (a) one request, batch 1: decode tok/s on the F16 and the F32 model
#   batching  (b) one workload batched (PARALLEL sequences) and one request at a time, both
#                 engines: what continuous batching gains, and batchgen vs llama.cpp
#   shapes    (c) an F1-like (128/128) and a V2-like (256/256) workload at PARALLEL sequences
#   quant     (d) llama.cpp-quantized files (QUANT_PRESETS [Q4_K_M] of a QUANT_SHAPE
#                 [tinyllama-1.1b] F16 synth model, made with ../shared/tools/llama_quantize.c):
#                 Q_ISL/Q_OSL [32/32] at each batch size of Q_BATCHES [1 PARALLEL] (not in
#                 the default list: the models take minutes and gigabytes to make)
#   arch      (e) the published shapes of other architectures (ARCH_SHAPES [llama-3.2-1b
#                 gemma3-1b]: Llama 3.2 1B with its rope_freqs, tied output and 128k
#                 vocabulary; Gemma 3 1B with its 5:1 sliding-window layers and 262k
#                 vocabulary), synth files in ARCH_DTYPE [q8_0]: A_ISL/A_OSL [32/64] at
#                 batch 1 and batch 4 (A_BATCHES [1 4]; as many requests as the batch).
#                 Not in the default list: each file is 1-2 GB, made once
#
# Environment (defaults in brackets):
#   BATCHGEN [build/batchgen]     the binary under test
#   MODELS   [/tmp/batchgen-bench-models]  where the synthetic models are made (once)
#   THREADS  [all cores]          threads for both engines
#   LC_THREADS [THREADS]          llama.cpp's threads, if they should differ
#   LC_THREADS_1 [1]              llama.cpp's threads for one-at-a-time runs: at batch 1 on a
#                                 small machine node-llama-cpp is far slower with more
#                                 threads (see the decode scenario, which tries both)
#   PARALLEL [16]                 sequences decoded together
#   RUNS     [1]                  repetitions of each measurement; the median is reported
#   F1_N [32] V2_N [16] B_ISL/B_OSL/B_N [128/64/16] D_ISL/D_OSL [32/128]: workload sizes
#   OUT      [/tmp/batchgen-compare]  folder for the reports (JSON) of every run
#   BENCH_LOCK [unset]            a lock file: each run (batchgen then llama.cpp) holds it
#                                 (flock), so that timed runs of people sharing the machine
#                                 never overlap (leave it unset when the whole script runs
#                                 under that lock already)
# The load average before each run is printed on stderr and appended to $OUT/loadavg.txt.
# Prints a Markdown table on stdout (progress on stderr). Needs node and bench/node_modules
# (`npm install --prefix bench`).
set -euo pipefail
shopt -s inherit_errexit # a failing run inside $(...) stops the script

BATCHGEN=${BATCHGEN:-build/batchgen}
MODELS=${MODELS:-/tmp/batchgen-bench-models}
THREADS=${THREADS:-$(nproc)}
LC_THREADS=${LC_THREADS:-$THREADS}
LC_THREADS_1=${LC_THREADS_1:-1}
PARALLEL=${PARALLEL:-16}
RUNS=${RUNS:-1}
F1_N=${F1_N:-32}
V2_N=${V2_N:-16}
B_ISL=${B_ISL:-128} B_OSL=${B_OSL:-64} B_N=${B_N:-16}
D_ISL=${D_ISL:-32} D_OSL=${D_OSL:-128}
OUT=${OUT:-/tmp/batchgen-compare}
HERE=$(cd "$(dirname "$0")" && pwd)
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(decode batching shapes)

[ -x "$BATCHGEN" ] || { echo "compare_llamacpp: $BATCHGEN not built (make)" >&2; exit 2; }
[ -d "$HERE/node_modules/node-llama-cpp" ] ||
	{ echo "compare_llamacpp: run npm install --prefix bench first" >&2; exit 2; }
mkdir -p "$MODELS" "$OUT"

model() { # model DTYPE: prints the path of the llama-100m model in DTYPE, making it once
	local m=$MODELS/llama-100m-$1.gguf
	if [ ! -s "$m" ]; then
		echo "making $m" >&2
		"$BATCHGEN" synth --shape llama-100m --dtype "$1" -o "$m.tmp" >&2 && mv "$m.tmp" "$m"
	fi
	echo "$m"
}

smodel() { # smodel SHAPE DTYPE: the path of synth shape SHAPE in DTYPE, making it once
	local m=$MODELS/$1-$2.gguf
	if [ ! -s "$m" ]; then
		echo "making $m" >&2
		"$BATCHGEN" synth --shape "$1" --dtype "$2" -o "$m.tmp" >&2 && mv "$m.tmp" "$m"
	fi
	echo "$m"
}

field() { # field FILE EXPR: a Python expression over the JSON object `r`
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

median() { # median NUMBERS...
	python3 -c 'import sys,statistics; print(statistics.median(map(float, sys.argv[1:])))' "$@"
}

# pair NAME MODEL ISL OSL N MAXBATCH PARALLEL BG_THREADS LC_THREADS: RUNS repetitions of
# batchgen then llama.cpp on the same requests (interleaved, so that both see the same
# state of a shared machine); llama.cpp gets the seed and token range from batchgen's
# report and must produce the same content checksum. Reports: $OUT/NAME.{bg,lc}.RUN.json.
# Prints the medians: "bg_tok_s lc_tok_s ratio bg_decode lc_decode bg_cpu_ms lc_cpu_ms"
# (ratio = median of the per-run ratios; decode = 1000 / TPOT p50; cpu_ms = process CPU
# milliseconds per output token, which a busy machine inflates less than wall time).
pair() {
	local name=$1 model=$2 isl=$3 osl=$4 n=$5 mb=$6 par=$7 bth=$8 lth=$9 r
	local bt=() lt=() ra=() bd=() ld=() bc=() lcpu=()
	for r in $(seq 1 "$RUNS"); do
		local rb=$OUT/$name.bg.$r.json rl=$OUT/$name.lc.$r.json
		if [ -n "${BENCH_LOCK:-}" ]; then
			exec 9>>"$BENCH_LOCK"
			flock 9
		fi
		echo "$name run $r: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/loadavg.txt" >&2
		echo "batchgen  $name run $r: ${isl}/${osl}x${n}, max-batch-size $mb, $bth threads" >&2
		"$BATCHGEN" bench -q --device cpu --threads "$bth" -m "$model" \
			--workload "${isl}/${osl}x${n}" --max-batch-size "$mb" --warmup 1 --report "$rb"
		local lo hi seed want got
		lo=$(field "$rb" 'r["workload"]["token_id_range"][0]')
		hi=$(field "$rb" 'r["workload"]["token_id_range"][1]')
		seed=$(field "$rb" 'r["workload"]["seed"]')
		want=$(field "$rb" 'r["workload"]["content_checksum"]')
		echo "llama.cpp $name run $r: ${isl}/${osl}x${n}, $par sequences, $lth threads" >&2
		node "$HERE/llamacpp_bench.mjs" --model "$model" --isl "$isl" --osl "$osl" \
			--requests "$n" --parallel "$par" --seed "$seed" --id-lo "$lo" --id-hi "$hi" \
			--threads "$lth" --json "$rl" >/dev/null
		[ -z "${BENCH_LOCK:-}" ] || exec 9>&-
		got=$(field "$rl" 'r["content_checksum"]')
		if [ "$got" != "$want" ]; then
			echo "compare_llamacpp: $name: llama.cpp ran other requests ($got, batchgen $want)" >&2
			exit 1
		fi
		bt+=("$(field "$rb" 'r["results"]["output_tok_s"]')")
		lt+=("$(field "$rl" 'r["output_tok_s"]')")
		ra+=("$(python3 -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "${bt[-1]}" "${lt[-1]}")")
		bd+=("$(field "$rb" '1000 / r["results"]["tpot_ms"]["p50"]')")
		ld+=("$(field "$rl" 'r["decode_tok_s_p50"]')")
		bc+=("$(field "$rb" 'r["results"]["cpu_ms_per_output_token"]')")
		lcpu+=("$(field "$rl" 'r["cpu_ms_per_output_token"]')")
	done
	echo "$(median "${bt[@]}") $(median "${lt[@]}") $(median "${ra[@]}") $(median "${bd[@]}")" \
		"$(median "${ld[@]}") $(median "${bc[@]}") $(median "${lcpu[@]}")"
}

row() { # row LABEL BATCHGEN LLAMACPP RATIO BG_CPU_MS LC_CPU_MS
	python3 -c 'import sys; a=sys.argv; print("| %s | %.2f | %.2f | %.2f | %.1f / %.1f |" % (a[1], float(a[2]), float(a[3]), float(a[4]), float(a[5]), float(a[6])))' "$@"
}

echo "| measurement | batchgen | llama.cpp | batchgen / llama.cpp | CPU ms per output token (batchgen / llama.cpp) |"
echo "|---|---|---|---|---|"

qmodel() { # qmodel PRESET: the QUANT_SHAPE model in PRESET (F16 from synth, the rest from
	# llama.cpp's quantizer), made once
	local shape=${QUANT_SHAPE:-tinyllama-1.1b} lib=$HERE/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
	local f16=$MODELS/$shape-F16.gguf m=$MODELS/$shape-$1.gguf
	if [ ! -s "$f16" ]; then
		echo "making $f16" >&2
		"$BATCHGEN" synth --shape "$shape" --dtype f16 -o "$f16.tmp" >&2 && mv "$f16.tmp" "$f16"
	fi
	if [ ! -s "$m" ]; then
		echo "making $m" >&2
		cc -O1 "${BG_SHARED:-$HERE/../../shared}/tools/llama_quantize.c" -o "$MODELS/llama_quantize" -ldl >&2
		LD_LIBRARY_PATH=$lib "$MODELS/llama_quantize" "$lib/libllama.v0.5.0.so" "$f16" "$m.tmp" "$1" \
			>"$MODELS/quantize.log" 2>&1 && mv "$m.tmp" "$m"
	fi
	echo "$m"
}

for s in "${scenarios[@]}"; do
	case $s in
	decode)
		# Each engine at 1 thread and at THREADS: at batch 1 node-llama-cpp's main thread
		# competes with ggml's spinning workers on a small machine, so more threads can be
		# slower there. Every figure is printed; compare the best of each.
		for dt in f16 f32; do
			m=$(model $dt)
			for th in $(printf '%s\n' 1 "$THREADS" | sort -un); do
				res=$(pair "decode-$dt-t$th" "$m" "$D_ISL" "$D_OSL" 1 1 1 "$th" "$th")
				read -r _ _ _ bd ld bc lcm <<<"$res"
				row "(a) batch-1 decode tok/s, ${D_ISL}/${D_OSL}, ${dt^^}, $th threads" "$bd" "$ld" \
					"$(python3 -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "$bd" "$ld")" "$bc" "$lcm"
			done
		done
		;;
	batching)
		m=$(model f16)
		w="${B_ISL}/${B_OSL}x${B_N}"
		res=$(pair batched "$m" "$B_ISL" "$B_OSL" "$B_N" "$PARALLEL" "$PARALLEL" "$THREADS" "$LC_THREADS")
		read -r b16 l16 r16 _ _ bc16 lc16 <<<"$res"
		res=$(pair serial "$m" "$B_ISL" "$B_OSL" "$B_N" 1 1 "$THREADS" "$LC_THREADS_1")
		read -r b1 l1 r1 _ _ bc1 lc1 <<<"$res"
		row "(b) output tok/s, $w, $PARALLEL sequences, F16" "$b16" "$l16" "$r16" "$bc16" "$lc16"
		row "(b) output tok/s, $w, one at a time, F16 (llama.cpp $LC_THREADS_1 thread(s))" "$b1" "$l1" "$r1" "$bc1" "$lc1"
		python3 -c 'import sys; a=[float(x) for x in sys.argv[1:]]; print("| (b) batching gain (%s sequences / one at a time) | %.2fx | %.2fx | | |" % (int(a[4]), a[0]/a[1], a[2]/a[3]))' "$b16" "$b1" "$l16" "$l1" "$PARALLEL"
		;;
	shapes)
		m=$(model f16)
		res=$(pair f1 "$m" 128 128 "$F1_N" "$PARALLEL" "$PARALLEL" "$THREADS" "$LC_THREADS")
		read -r b l ra _ _ bc lcm <<<"$res"
		row "(c) F1-like 128/128x$F1_N output tok/s, $PARALLEL sequences, F16" "$b" "$l" "$ra" "$bc" "$lcm"
		res=$(pair v2 "$m" 256 256 "$V2_N" "$PARALLEL" "$PARALLEL" "$THREADS" "$LC_THREADS")
		read -r b l ra _ _ bc lcm <<<"$res"
		row "(c) V2-like 256/256x$V2_N output tok/s, $PARALLEL sequences, F16" "$b" "$l" "$ra" "$bc" "$lcm"
		;;
	quant)
		for p in ${QUANT_PRESETS:-Q4_K_M}; do
			m=$(qmodel "$p")
			qi=${Q_ISL:-32} qo=${Q_OSL:-32}
			for qb in ${Q_BATCHES:-1 $PARALLEL}; do
				res=$(pair "quant-$p-b$qb" "$m" "$qi" "$qo" "$qb" "$qb" "$qb" "$THREADS" "$LC_THREADS")
				read -r b l ra _ _ bc lcm <<<"$res"
				row "(d) $p ${qi}/${qo}x$qb output tok/s, batch $qb, $THREADS threads" "$b" "$l" "$ra" "$bc" "$lcm"
			done
		done
		;;
	arch)
		dt=${ARCH_DTYPE:-q8_0} ai=${A_ISL:-32} ao=${A_OSL:-64}
		for shape in ${ARCH_SHAPES:-llama-3.2-1b gemma3-1b}; do
			m=$(smodel "$shape" "$dt")
			for b in ${A_BATCHES:-1 4}; do
				res=$(pair "arch-$shape-$dt-b$b" "$m" "$ai" "$ao" "$b" "$b" "$b" "$THREADS" "$LC_THREADS")
				read -r bt lt ra _ _ bc lcm <<<"$res"
				row "(e) $shape ${dt^^} ${ai}/${ao}x$b output tok/s, batch $b, $THREADS/$LC_THREADS threads" \
					"$bt" "$lt" "$ra" "$bc" "$lcm"
			done
		done
		;;
	*)
		echo "compare_llamacpp: unknown scenario $s (decode, batching, shapes, quant, arch)" >&2
		exit 2
		;;
	esac
done
