#!/usr/bin/env bash
# gpu/emu/run.sh [OUT_DIR] [--model] [--engine] [--no-kernels] [--plugin-only] [--dequant] [--full]: builds gpu/*.cu and
# tests/gpu_test_kernels.cu (sizes reduced, for speed, unless --full: the vocabularies of
# 128256, 4096-wide GEMMs and 1500-token contexts the GPU runs), tests/gpu_test_model.c and
# tests/gpu_test_engine.c against the CUDA emulator in gpu/emu, and runs:
#   the kernel test, unless --no-kernels (~75 s of CPU at the --full sizes; the CPU times here
#   are bench/results/e17x-2026-11-30.md's, on a loaded 2-core machine);
#   with --model, the model test (~4.3 min of CPU);
#   with --model --full, its full-width check alone instead (BG_GPU_FULL=1:
#   Llama-3-8B's widths with 2 layers, ~1.5-1.8 min of CPU and 9 GB; bench/results/e17w-2026-11-29.md);
#   with --engine, the engine test reduced to BG_GPU_ENGINE_N requests (default 20) of at
#   most BG_GPU_ENGINE_MAX_TOKENS tokens (default 8; ~20 s of CPU); with --engine --full,
#   at the sizes the GPU runs (200 requests of up to 48 tokens; ~6 min of CPU), then its
#   full-width workload (BG_GPU_FULL=1: Llama-3-8B's widths with 2 layers, greedy and
#   sampled; ~8 min of CPU and 6 GB; bench/results/e17g-2026-11-30.md).
# A debugging aid for machines without a GPU: it checks indexing, synchronization and host
# logic, not speed. $BG_EMU_SEED (thread and block orders) and $BG_EMU_STREAMS (late, early
# or random: when queued stream work runs) reach the tests (gpu/emu/inc/emu.h).
# --plugin-only builds the plugin alone (OUT_DIR/libbatchgen-cuda.so, or in
# $BG_EMU_PLUGIN_DIR: below) and runs nothing (tests/e2e_gpu_emu.sh runs the binary on it).
# --dequant builds only gpu/dequant.cu and tests/gpu_test_dequant.cu and runs that test
# (tests/e2e_gpu_dequant.sh). Needs a built libbatchgen.a of the CPU modules in $BUILD
# (default build/). OUT_DIR defaults to /tmp/bg-emu.
set -eu
out=/tmp/bg-emu
kernels=1 model=0 engine=0 plugin_only=0 dequant=0 full=0
for a in "$@"; do
	case $a in
	--model) model=1 ;;
	--engine) engine=1 ;;
	--no-kernels) kernels=0 ;;
	--plugin-only) plugin_only=1 kernels=0 ;;
	--dequant) dequant=1 ;;
	--full) full=1 ;;
	-*)
		echo "usage: $0 [OUT_DIR] [--model] [--engine] [--no-kernels] [--plugin-only] [--dequant] [--full]" >&2
		exit 2
		;;
	*) out=$a ;;
	esac
done
build=${BUILD:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# the plugin (transformed gpu/ sources, objects, libbatchgen-cuda.so) goes to OUT_DIR, or
# to $BG_EMU_PLUGIN_DIR when set (not with --dequant), where the first run builds it under
# a lock and later runs use it (tests/run.sh: once a run of the suite, for every test)
plugin=${BG_EMU_PLUGIN_DIR:-$out}
[ $dequant -eq 0 ] || plugin=$out
mkdir -p "$plugin/src/gpu" "$plugin/o" "$out/src/tests"
ln -sfn "$root/core" "$plugin/src/core"
cp "$root/tests/check.h" "$root/tests/quant_util.h" "$out/src/tests/"
python3 "$here/transform.py" "$root/tests/gpu_test_kernels.cu" "$out/src/tests/gpu_test_kernels.cu"
[ $full -eq 1 ] || sed -i 's/{512, 32000, 128256}/{512, 3000, 5000}/; s/{4096, 4096, 7}/{256, 700, 7}/; s/{{1500, 1}, {100, 37}, {0, 1}}/{{300, 1}, {100, 37}, {0, 1}}/' \
	"$out/src/tests/gpu_test_kernels.cu"
# nvcc contracts a*b+c into an FMA; so does this build, with FMA instructions where the CPU
# has them (else fmaf in software: slow, but the same results)
fma=""
grep -qw fma /proc/cpuinfo && fma=-mfma
F="-std=c++17 -O2 -g -fPIC -ffp-contract=fast $fma -I$here/inc -I$plugin/src -I$plugin/src/gpu -I$root/core -I$root -w"
transform_gpu() {
	cp "$root/gpu/backend_cuda.h" "$root/gpu/plugin.h" "$root"/gpu/*.cuh "$plugin/src/gpu/"
	for f in "$root"/gpu/*.cu; do python3 "$here/transform.py" "$f" "$plugin/src/gpu/$(basename "$f")"; done
	gcc -std=c11 -I"$root/core" -I"$root" "$root/gpu/abi_layout.c" -o "$plugin/abi_layout"
	"$plugin/abi_layout" >"$plugin/src/gpu/abi_layout.h"
}
if [ $dequant -eq 1 ]; then
	transform_gpu
	python3 "$here/transform.py" "$root/tests/gpu_test_dequant.cu" "$out/src/tests/gpu_test_dequant.cu"
	g++ $F -x c++ -c "$plugin/src/gpu/dequant.cu" -o "$out/dequant.o"
	g++ $F -x c++ -c "$out/src/tests/gpu_test_dequant.cu" -o "$out/test_dequant.o"
	g++ $F -c "$here/emu.cpp" -o "$out/emu.o"
	g++ -o "$out/emu_dequant" "$out/test_dequant.o" "$out/dequant.o" "$out/emu.o" "$build/libbatchgen.a" \
		-lcjson -lpcre2-8 -lm -ldl -lpthread
	cd "$root"
	exec "$out/emu_dequant"
fi
# the plugin's objects, compiled side by side ($BG_EMU_JOBS at a time, default the processor
# count: under tests/run.sh the test that builds it holds the others waiting on its lock)
build_plugin() {
	transform_gpu
	printf '%s\n' "$plugin"/src/gpu/*.cu "$here/emu.cpp" |
		F=$F O=$plugin/o xargs -P "${BG_EMU_JOBS:-$(nproc 2>/dev/null || echo 1)}" -n 1 \
			sh -c 'n=${0##*/}; g++ $F -x c++ -c "$0" -o "$O/${n%.*}.o"'
	# the model and engine tests reach the backend as the binary does: through the plugin loader
	g++ -shared -o "$plugin/libbatchgen-cuda.so.tmp" "$plugin"/o/*.o
	mv "$plugin/libbatchgen-cuda.so.tmp" "$plugin/libbatchgen-cuda.so"
}
if [ "$plugin" != "$out" ]; then
	(
		flock 9
		if [ ! -f "$plugin/libbatchgen-cuda.so" ]; then build_plugin; fi
	) 9>"$plugin.lock"
else
	build_plugin
fi
[ $plugin_only -eq 1 ] && exit 0
if [ $kernels -eq 1 ]; then
	g++ $F -x c++ -c "$out/src/tests/gpu_test_kernels.cu" -o "$out/kernels.o"
	# -rdynamic: the emulator names kernels from the dynamic symbol table (its messages)
	g++ -rdynamic -o "$out/emu_kernels" "$out/kernels.o" "$plugin"/o/*.o "$build/libbatchgen.a" -lcjson -lpcre2-8 -lm -ldl -lpthread
fi
for t in model engine; do
	gcc -std=c11 -O2 -g -D_GNU_SOURCE -I"$root/core" -I"$root" -c "$root/tests/gpu_test_$t.c" -o "$out/$t.o"
	g++ -o "$out/emu_$t" "$out/$t.o" -rdynamic -Wl,--whole-archive "$build/libbatchgen.a" \
		-Wl,--no-whole-archive -lcjson -lpcre2-8 -lm -ldl -lpthread
done
cd "$root"
if [ $kernels -eq 1 ]; then
	"$out/emu_kernels"
fi
if [ $model -eq 1 ]; then
	if [ $full -eq 1 ]; then
		BG_GPU_FULL=1 BATCHGEN_CUDA_LIB="$plugin/libbatchgen-cuda.so" "$out/emu_model"
	else
		BATCHGEN_CUDA_LIB="$plugin/libbatchgen-cuda.so" "$out/emu_model"
	fi
fi
if [ $engine -eq 1 ]; then
	n=20 max=8
	[ $full -eq 1 ] && n=200 max=48
	BATCHGEN_CUDA_LIB="$plugin/libbatchgen-cuda.so" BG_GPU_ENGINE_N=${BG_GPU_ENGINE_N:-$n} \
		BG_GPU_ENGINE_MAX_TOKENS=${BG_GPU_ENGINE_MAX_TOKENS:-$max} "$out/emu_engine"
	if [ $full -eq 1 ]; then
		BG_GPU_FULL=1 BATCHGEN_CUDA_LIB="$plugin/libbatchgen-cuda.so" "$out/emu_engine"
	fi
fi
