#!/usr/bin/env bash
# run.sh BUILD_DIR LABEL: runs the layering check (tests/layers.sh), every test program in
# BUILD_DIR/tests and every tests/e2e_*.sh against BUILD_DIR/batchgen, one line per test,
# then a total line "LABEL: N passed, N failed". Each test's output goes to BUILD_DIR/tests/NAME.log.
set -u
build=$1
label=${2:-tests}
. "$(dirname "$0")/run_lib.sh"
RUN_NAME_WIDTH=28
RUN_FAIL_RE='FAIL|ERROR|Sanitizer|runtime error'
run_init "$build"

run_one layers bash tests/layers.sh
# the CUDA build's compile-time gates: once, on the build that has CUDA objects,
# and the GPU test programs under the emulator (gpu/emu), once, beside that build
if [ -d "$build/gpu" ] && ls "$build"/gpu/*.cu.o >/dev/null 2>&1; then
	run_one gpu_gates bash tests/gpu_gates.sh "$build"
	run_one gpu_emu_tests bash tests/gpu_emu_tests.sh "$build"
fi

for t in "$logdir"/test_*; do
	[ -x "$t" ] && [ -f "$t" ] || continue
	case $t in *.log | *.d | *.o) continue ;; esac
	run_one "$(basename "$t")" "$t"
done
for s in tests/e2e_*.sh; do
	[ -f "$s" ] || continue
	run_one "$(basename "$s" .sh)" env BATCHGEN="$build/batchgen" bash "$s"
done
echo "$label: $total_pass passed, $total_fail failed"
[ $total_fail -eq 0 ]
