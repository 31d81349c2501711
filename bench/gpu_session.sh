#!/usr/bin/env bash
# bench/gpu_session.sh: everything the CUDA issue asks to run on a GPU, in a few commands
# that fit the device tool's limits (10 minutes a command, 30 minutes of device time a
# session, a bare machine each time, nothing fetchable there).
#
#   bash bench/gpu_session.sh pack          here, before the first device call: fills .gpu/
#                                           (git-ignored) with what the GPU machine lacks
#   bash bench/gpu_session.sh tests         there: build, then `make test-gpu`
#   bash bench/gpu_session.sh bench [W...]  there: B1 (gpu_decode), PDL, CHAIN, V2, F1 and
#                                           128/128x1024 on an 8B-shaped bf16 model
#                                           through `batchgen bench` (or the W named;
#                                           W@off: W with --overlap off, to set beside
#                                           W's default, overlap on; PDL, CHAIN:
#                                           gpu_decode at batch 1 and 8 with
#                                           BG_CUDA_PDL=0 / BG_CUDA_CHAIN=0 and by
#                                           default, alternated, twice each)
#   bash bench/gpu_session.sh profile       there: ncu's per-node durations of one decode
#                                           step at batch 1 and 256 and each graph's whole
#                                           duration (the fixed cost a node, issue 17)
#   bash bench/gpu_session.sh hf [SPEC...]  there: the same workloads through Hugging Face
#                                           transformers (static cache and generate_batch)
#
# A device call (see /work/.library/device/README.md) then looks like
#   run(command="bash bench/gpu_session.sh tests", carry=[".gpu"], timeout_s=600)
# and each stage writes its logs to $OUT (at most 8 files come back): env.txt, build.log
# and one file per step. Each stage builds (incrementally when the machine is still warm).
#
# .gpu/ holds: debs/ (cJSON, PCRE2 and curl.h from this machine's Debian, unpacked on the GPU
# machine with dpkg -x when its compiler cannot find them), shared/models (the small
# models of ../shared the GPU tests read, through BG_SHARED, since ../shared does not
# travel), and prebuilt/ (this machine's build for sm_90 with the two libraries beside it,
# used only when building there fails, e.g. without make).
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:-}
shift || true
out=${OUT:-/tmp/bg-gpu-out}
mkdir -p "$out"
bld=build-gpu
arch='-gencode arch=compute_90,code=[sm_90,compute_90]'

pack()
{
	set -e
	rm -rf .gpu && mkdir -p .gpu/debs .gpu/shared/models .gpu/prebuilt/lib
	# .git does not travel: the commit goes along in a file, for --version and reports.
	echo "$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD || echo -dirty)" >.gpu/commit
	(cd .gpu/debs && apt-get download libcjson1 libcjson-dev libpcre2-8-0 libpcre2-dev)
	# curl.h only (batchgen loads libcurl at run time; hf: downloads are not used there)
	(cd .gpu/debs && apt-get download libcurl4-openssl-dev)
	cp -r ../shared/models/. .gpu/shared/models/
	make BUILD=.gpu/b CUDA=1 CUDA_ARCH="$arch" GIT_COMMIT="$(cat .gpu/commit)" gpu-progs >/dev/null
	cp .gpu/b/batchgen .gpu/b/libbatchgen-cuda.so .gpu/prebuilt/
	mkdir -p .gpu/prebuilt/tests .gpu/prebuilt/bench
	cp .gpu/b/tests/gpu_test_* .gpu/prebuilt/tests/ 2>/dev/null || true
	rm -f .gpu/prebuilt/tests/*.d .gpu/prebuilt/tests/*.o
	cp .gpu/b/bench/gpu_decode .gpu/prebuilt/bench/
	for l in libcjson.so.1 libpcre2-8.so.0; do
		cp -L "$(ldconfig -p | awk -v l=$l '$1 == l { print $NF; exit }')" .gpu/prebuilt/lib/
	done
	rm -rf .gpu/b
	du -sh .gpu
}

# The GPU machine: what it has, and the libraries it lacks from the carried packages.
setup()
{
	{
		date -u
		nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv
		command -v nvcc && nvcc --version | tail -2
		for t in gcc make python3 compute-sanitizer; do printf '%s: %s\n' $t "$(command -v $t)"; done
		echo "commit: $(cat .gpu/commit)"
		nproc
	} >"$out/env.txt" 2>&1
	export PATH=$PATH:/usr/local/cuda/bin
	export BG_SHARED=$PWD/.gpu/shared
	if ! echo '#include <cjson/cJSON.h>' | gcc -E -x c - >/dev/null 2>&1 ||
		! echo '#include <pcre2.h>' | gcc -E -DPCRE2_CODE_UNIT_WIDTH=8 -x c - >/dev/null 2>&1 ||
		! echo '#include <curl/curl.h>' | gcc -E -x c - >/dev/null 2>&1; then
		local d=/tmp/bgdeps
		mkdir -p $d
		for f in .gpu/debs/*.deb; do dpkg -x "$f" $d; done
		local lib=$d/usr/lib/x86_64-linux-gnu
		export CPATH=$d/usr/include:$d/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
		export LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
		export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
		echo "cJSON/PCRE2/curl.h from .gpu/debs" >>"$out/env.txt"
	fi
}

# Builds into build-gpu (incremental when the machine is still warm from an earlier stage).
build()
{
	# the built-in model from the carried models (../shared does not travel)
	if make -j"$(nproc)" BUILD=$bld CUDA=1 CUDA_ARCH="$arch" GIT_COMMIT="$(cat .gpu/commit)" \
		BUILTIN_GGUF=.gpu/shared/models/stories260K.gguf gpu-progs >"$out/build.log" 2>&1; then
		echo "built here into $bld" >>"$out/env.txt"
	else
		echo "build failed (see build.log): using .gpu/prebuilt" >>"$out/env.txt"
		rm -rf $bld && cp -r .gpu/prebuilt $bld
		export LD_LIBRARY_PATH=$PWD/$bld/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
}

case $stage in
pack)
	pack
	;;
tests)
	setup
	build
	# make test-gpu would rebuild with the default architectures; run its script directly.
	tests/run_gpu.sh $bld 2>&1 | tee "$out/test-gpu.log"
	;;
bench)
	setup
	build
	m=synthetic:llama-3-8b
	# B1 is bench/gpu_decode; 128/128x1024 is F1's shape at a count transformers can
	# finish (the hf stage). Each step has a time limit, so that one slow step leaves
	# time for the others; name fewer steps to split them over two commands.
	[ $# -gt 0 ] || set -- B1 PDL CHAIN V2 F1 128/128x1024
	for w in "$@"; do
		if [ "$w" = PDL ] || [ "$w" = CHAIN ]; then
			# pdl.log, chain.log: what programmatic dependent launch (p17; gpu/pdl.cuh)
			# or the GEMV chain (c17; gpu_gemv_chain's grid barriers against graph nodes)
			# is worth: the fused decode path (batch <= 8) with it off and on, alternated
			v=BG_CUDA_$w log=$out/$(echo "$w" | tr A-Z a-z).log
			for r in 1 2; do
				for p in 0 1; do
					echo "# $v=$p run $r" | tee -a "$log"
					env "$v=$p" timeout 60 $bld/bench/gpu_decode -m $m --batches 1,8 \
						--contexts 512 --steps 256 2>/dev/null | tee -a "$log"
				done
			done
			continue
		fi
		if [ "$w" = B1 ]; then
			# b1.log: gpu_decode's JSON lines and, between them, each decode graph's
			# node census ("batchgen-cuda graph census: ...", BG_CUDA_GRAPH_LOG)
			timeout 120 $bld/bench/gpu_decode -m $m 2>&1 | tee "$out/b1.log"
			continue
		fi
		ovl=()
		[ "${w%@off}" = "$w" ] || ovl=(--overlap off)
		timeout 200 $bld/batchgen bench --device cuda -m $m --workload "${w%@off}" \
			--warmup 32 "${ovl[@]}" --report "$out/$(echo "$w" | tr /@ __).json" 2>&1 |
			tee -a "$out/bench.log"
	done
	;;
profile)
	setup
	build
	m=synthetic:llama-3-8b
	# ncu profiles only gpu_decode's timed steps (--profile-from-start off: it brackets them
	# with cudaProfilerStart/Stop). Per node: each kernel of one step's graph, its duration
	# and DRAM bytes (the GEMMs' bandwidth at few columns, each node's ramp and tail); per
	# graph: the step as one launch, whose duration minus the sum of its nodes' is the gaps
	# between them. --clock-control none: leave the clocks as they are (METHOD.md).
	ncu_run() { # ncu_run OUTFILE NCU-ARGS... PROGRAM ARGS...
		local f=$1
		shift
		timeout 200 ncu --clock-control none --profile-from-start off --csv \
			--log-file "$out/$f" "$@" 2>&1 | tail -n 5
	}
	ncu_run ncu-b1-nodes.csv --graph-profiling node \
		--metrics gpu__time_duration.sum,dram__bytes_read.sum \
		$bld/bench/gpu_decode -m $m --batches 1 --contexts 512 --steps 1
	ncu_run ncu-b256-nodes.csv --graph-profiling node \
		--metrics gpu__time_duration.sum,dram__bytes_read.sum \
		$bld/bench/gpu_decode -m $m --batches 256 --contexts 512 --steps 1
	ncu_run ncu-graphs.csv --graph-profiling graph --metrics gpu__time_duration.sum \
		$bld/bench/gpu_decode -m $m --batches 1,8,256 --contexts 512 --steps 3
	;;
hf)
	setup
	# V2 by default; F1's 8192 requests take transformers far longer than one command may
	# run, so compare F1 as 128/128x1024 on both sides (bench stage: --workload 128/128x1024).
	[ $# -gt 0 ] || set -- 256/256x1000
	# one process per mode, each with its own time limit, so that a slow static run
	# leaves generate_batch its turn
	for w in "$@"; do
		for mode in static cb; do
			PYTHONUNBUFFERED=1 timeout 270 python3 bench/hf_transformers.py --workload "$w" \
				--mode $mode --static-batch 128 2>&1 | tee -a "$out/hf.jsonl"
		done
	done
	;;
*)
	sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
	;;
esac
