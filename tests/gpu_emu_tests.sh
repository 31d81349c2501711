#!/usr/bin/env bash
# gpu_emu_tests.sh BUILD_DIR: the GPU test programs under the CPU emulator of CUDA, once per
# `make test` (tests/run.sh runs it for the build that has CUDA objects, not per tree):
# tests/gpu_test_kernels.cu at its reduced sizes (every kernel against a CPU reference,
# decode attention split up to 128 ways) and tests/gpu_test_engine.c at 20 requests of <= 8
# tokens (greedy and sampled requests, alone, batched under no-evict and max-util with
# preemption, overlap on, against the CPU backend; each sampled token replayed from its
# seed), with queued stream work run in the seeded random order (BG_EMU_STREAMS=random,
# BG_EMU_SEED=5). ~2 min of CPU. The full widths and the model test take minutes more
# each: gpu/emu/run.sh --full / --model / --engine --full, by hand.
# Prints each program's summary, then their sum as "N passed, M failed"; exit 0 when every
# program ran checks and none failed.
set -u
build=${1:-build}
command -v g++ >/dev/null || { echo "SKIP: g++ not found"; echo "0 passed, 0 failed"; exit 0; }
out=$build/tests/gpu-emu
mkdir -p "$build/tests"
rm -rf "$out"
BUILD=$build BG_EMU_STREAMS=random BG_EMU_SEED=5 bash gpu/emu/run.sh "$out" --engine >"$out.log" 2>&1
rc=$?
cat "$out.log"
pass=0 fail=0 programs=0
while read -r p f; do
	programs=$((programs + 1))
	pass=$((pass + p))
	fail=$((fail + f))
done < <(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p' "$out.log")
# run.sh stops at the first program that exits nonzero: both summaries must be there
if [ $rc -ne 0 ] || [ $programs -ne 2 ]; then
	echo "FAIL: gpu/emu/run.sh exited $rc with $programs of 2 program summaries"
	fail=$((fail + 1))
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
