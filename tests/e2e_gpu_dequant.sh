#!/usr/bin/env bash
# e2e_gpu_dequant: gpu/dequant.cu (the block types' dequantization on the device) under the
# CPU emulator, against the CPU's quant_dequant bit for bit (tests/gpu_test_dequant.cu,
# built by gpu/emu/run.sh --dequant: only that kernel and its test, so it stays quick).
. tests/check.sh
command -v g++ >/dev/null || { echo "SKIP: g++ not found"; summary; exit; }
# the emulated objects link with the plain build's library (as e2e_gpu_emu's do)
bash gpu/emu/run.sh "$TMP/emu" --dequant >"$TMP/out.log" 2>&1
rc=$?
sed 's/^/  emu: /' "$TMP/out.log"
check_eq "emulated gpu_test_dequant exits 0" "$rc" 0
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$TMP/out.log" | tail -1)
check "emulated gpu_test_dequant ran its checks ($line)" test -n "$line" -a "${line#0 passed}" = "$line"
summary
