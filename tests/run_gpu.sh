#!/usr/bin/env bash
# run_gpu.sh BUILD_DIR: runs the GPU tests (BUILD_DIR/tests/gpu_test_*), one line each,
# then the same programs under compute-sanitizer --tool memcheck, then a total line
# "gpu: N passed, N failed". Without CUDA in the build or without a device every program
# prints a SKIP line and "0 passed, 0 failed", so this is a smoke test there.
set -u
build=$1
. "$(dirname "$0")/run_lib.sh"
RUN_NAME_WIDTH=32
RUN_FAIL_RE='FAIL|ERROR|Invalid|out of bounds|uninitialized'
run_init "$build"

progs=()
for t in "$logdir"/gpu_test_*; do
	[ -x "$t" ] && [ -f "$t" ] || continue
	case $t in *.log | *.d | *.o) continue ;; esac
	progs+=("$t")
done
if [ ${#progs[@]} -eq 0 ]; then
	echo "SKIP: no GPU test programs in $build/tests (built without CUDA?)"
fi
for t in "${progs[@]}"; do
	run_one "$(basename "$t")" "$t"
	# rates a test measures and reports (gpu_test_engine: greedy agreement, batched vs
	# alone and GPU vs CPU), shown here and not only kept in the log
	grep -E '^agreement ' "$logdir/$(basename "$t").log" | sed 's/^/    /'
done
# The full-width checks (BG_GPU_FULL=1: Llama-3-8B's widths with 2 layers and a 128256
# vocabulary, split-K attention in the decode graphs), which the programs' default runs
# leave out because they take minutes under gpu/emu; seconds on a GPU.
for t in gpu_test_model gpu_test_engine; do
	[ -x "$logdir/$t" ] || continue
	run_one "$t:full" env BG_GPU_FULL=1 "$logdir/$t"
	grep -E '^agreement ' "$logdir/$t:full.log" | sed 's/^/    /'
done

# Memory checking: every device access of every kernel, on the same programs.
san=$(command -v compute-sanitizer || true)
[ -n "$san" ] || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && san=/usr/local/cuda/bin/compute-sanitizer; }
have_dev=0
if [ ${#progs[@]} -gt 0 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	have_dev=1
fi
if [ -z "$san" ]; then
	echo "SKIP: compute-sanitizer not found; memcheck did not run"
elif [ $have_dev -eq 0 ]; then
	echo "SKIP: no CUDA device; memcheck did not run"
else
	# memcheck slows every kernel launch by orders of magnitude: gpu_test_engine runs a
	# reduced workload there (24 requests of at most 8 tokens, which still fills batches,
	# preempts under max-util and checks agreement) instead of its 200 requests
	# Each program under memcheck gets BG_MEMCHECK_TIMEOUT seconds (default 300; exit
	# 124 counts as a failure), so that one slow program cannot take a GPU session.
	for t in "${progs[@]}"; do
		run_one "memcheck:$(basename "$t")" env BG_GPU_ENGINE_N=24 \
			BG_GPU_ENGINE_MAX_TOKENS=8 timeout "${BG_MEMCHECK_TIMEOUT:-300}" \
			"$san" --tool memcheck --error-exitcode 99 "$t"
	done
fi

# The binary itself on a device: a lazy synthetic model runs, and stories260K's greedy
# outputs through the whole engine are the same on --device cuda as on --device cpu.
if [ $have_dev -eq 1 ] && [ -x "$build/batchgen" ]; then
	run_one "batchgen-cuda-synthetic" bash -c "
		printf '%s\n' '{\"id\":\"a\",\"input_ids\":[1,2,3],\"max_tokens\":8}' |
		'$build/batchgen' run --device cuda -m synthetic:tiny -i - -o - >/dev/null &&
		echo '1 passed, 0 failed'"
	# the built-in model (stories260K, embedded; no -m): the same greedy tokens as the CPU
	run_one "batchgen-cuda-builtin" bash -c "
		r='{\"prompt\":\"Once upon a time\",\"max_tokens\":32}'
		a=\$(echo \"\$r\" | '$build/batchgen' --device cpu -q | grep -o '\"token_ids\":\[[0-9,]*\]') &&
		b=\$(echo \"\$r\" | '$build/batchgen' --device cuda -q | grep -o '\"token_ids\":\[[0-9,]*\]') &&
		[ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ] && echo '1 passed, 0 failed'"
	model=${BG_SHARED:-../shared}/models/stories260K.gguf
	if [ -r "$model" ]; then
		tmp=$(mktemp -d)
		for p in 'Once upon a time' 'The little dog' 'Lily and Tom went' 'One day, a big' \
			'Sam had a red ball' 'The sun was' 'In the park, the' 'Mom said'; do
			printf '{"prompt": "%s", "max_tokens": 32, "temperature": 0}\n' "$p"
		done >"$tmp/in.jsonl"
		run_one "batchgen-cuda-vs-cpu" bash -c "
			'$build/batchgen' run --device cpu -m '$model' -i '$tmp/in.jsonl' -o '$tmp/cpu.jsonl' 2>/dev/null &&
			'$build/batchgen' run --device cuda -m '$model' -i '$tmp/in.jsonl' -o '$tmp/cuda.jsonl' 2>/dev/null &&
			grep -o '\"token_ids\":\[[0-9,]*\]' '$tmp/cpu.jsonl' >'$tmp/a' &&
			grep -o '\"token_ids\":\[[0-9,]*\]' '$tmp/cuda.jsonl' >'$tmp/b' &&
			[ \$(wc -l <'$tmp/a') -eq 8 ] && diff '$tmp/a' '$tmp/b' && echo '1 passed, 0 failed'"
		rm -rf "$tmp"
	else
		echo "SKIP: $model not found; the cuda-vs-cpu run did not run"
	fi
fi

echo "gpu: $total_pass passed, $total_fail failed"
[ $total_fail -eq 0 ]
