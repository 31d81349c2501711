#!/usr/bin/env bash
# run.sh [-j N] BUILD_DIR LABEL [BUILD_DIR LABEL ...]: the suite over one or more builds
# (`make test`: the plain build and the sanitized one). The layering check (tests/layers.sh)
# once; for each build that has CUDA objects, the compile-time gates and the GPU test
# programs under the emulator; for each build, every test program in BUILD_DIR/tests and
# every tests/e2e_*.sh against BUILD_DIR/batchgen.
# N tests run at a time (default: the processor count). Each test is one process on one
# core at a time, and writes only its own log and its own mktemp folders, so they do not
# see each other, except for the work that is the same for every build, done once a run
# under a lock by the first test that needs it: llama.cpp's outputs ($BG_LLAMACPP_CACHE)
# and the emulated CUDA plugin ($BG_EMU_PLUGIN_DIR). The longest start first ($RUN_LONG),
# so that the suite does not end with one of them running alone. Each test prints one line
# as it ends, "LABEL NAME ok|FAILED summary (time)", its output in BUILD_DIR/tests/NAME.log;
# then, in the order given, one total line per build, "LABEL: N passed, N failed", and the
# failed tests again.
set -u
jobs_max=$(nproc 2>/dev/null || echo 1)
if [ "${1:-}" = -j ]; then
	jobs_max=$2
	shift 2
fi
if [ $# -lt 2 ] || [ $(($# % 2)) -ne 0 ] || ! [ "$jobs_max" -ge 1 ] 2>/dev/null; then
	echo "usage: $0 [-j N] BUILD_DIR LABEL [BUILD_DIR LABEL ...]" >&2
	exit 2
fi
. "$(dirname "$0")/run_lib.sh"
RUN_NAME_WIDTH=28
RUN_FAIL_RE='FAIL|ERROR|Sanitizer|runtime error'
# a minute or more each on a 2-core machine (the ordering only: any test may be slow)
RUN_LONG="gpu_emu_tests e2e_gpu_emu e2e_llamacpp test_invariance gpu_gates"

builds=() labels=() label_width=0
while [ $# -gt 0 ]; do
	builds+=("$1")
	labels+=("$2")
	[ ${#2} -le $label_width ] || label_width=${#2}
	shift 2
done

# llama.cpp's outputs (tests/need_llamacpp.sh, llamacpp_greedy) and the emulated CUDA
# plugin (gpu/emu/run.sh), made once a run for all builds
export BG_LLAMACPP_CACHE=${builds[0]}/tests/llamacpp-cache
export BG_EMU_PLUGIN_DIR=${builds[0]}/tests/emu-plugin
rm -rf "$BG_LLAMACPP_CACHE" "$BG_EMU_PLUGIN_DIR" "$BG_EMU_PLUGIN_DIR.lock"

# the jobs, "PASS NAME KIND PATH": PASS indexes builds[]
jobs=()
for i in "${!builds[@]}"; do
	b=${builds[$i]}
	mkdir -p "$b/tests"
	rm -f "$b"/tests/*.count
	[ "$i" -eq 0 ] && jobs+=("$i layers sh tests/layers.sh")
	if [ -d "$b/gpu" ] && ls "$b"/gpu/*.cu.o >/dev/null 2>&1; then
		jobs+=("$i gpu_gates sh-build tests/gpu_gates.sh" "$i gpu_emu_tests sh-build tests/gpu_emu_tests.sh")
	fi
	for t in "$b"/tests/test_*; do
		[ -x "$t" ] && [ -f "$t" ] || continue
		case $t in *.log | *.d | *.o | *.count) continue ;; esac
		jobs+=("$i $(basename "$t") prog $t")
	done
	for s in tests/e2e_*.sh; do
		[ -f "$s" ] && jobs+=("$i $(basename "$s" .sh) e2e $s")
	done
done
# the long tests of the first build, then those of the others: a later build's run of a
# test that shares work with the first's (llama.cpp's outputs) then finds it done instead
# of waiting for it on the lock with its slot idle
order=()
for i in "${!builds[@]}"; do
	for long in $RUN_LONG; do
		for j in "${jobs[@]}"; do
			read -r pi name _ _ <<<"$j"
			[ "$pi" = "$i" ] && [ "$name" = "$long" ] && order+=("$j")
		done
	done
done
for j in "${jobs[@]}"; do
	read -r _ name _ _ <<<"$j"
	case " $RUN_LONG " in *" $name "*) ;; *) order+=("$j") ;; esac
done

# run_job PASS NAME KIND PATH: KIND sh runs bash PATH, sh-build bash PATH BUILD_DIR, prog
# the program, e2e the script against the build's binary (in a subshell: the totals come
# from the .count files)
run_job() {
	local b=${builds[$1]}
	run_init "$b"
	RUN_TAG=$(printf '%-*s' "$label_width" "${labels[$1]}")
	case $3 in
	sh) run_one "$2" bash "$4" ;;
	sh-build) run_one "$2" bash "$4" "$b" ;;
	prog) run_one "$2" "$4" ;;
	e2e) run_one "$2" env BATCHGEN="$b/batchgen" bash "$4" ;;
	esac
}
for j in "${order[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n
	done
	# shellcheck disable=SC2086
	run_job $j &
done
wait

status=0 failed=""
for i in "${!builds[@]}"; do
	pass=0 fail=0
	for j in "${jobs[@]}"; do
		read -r pi name _ _ <<<"$j"
		[ "$pi" = "$i" ] || continue
		c=${builds[$i]}/tests/$name.count
		if [ -f "$c" ]; then
			read -r p f <"$c"
		else
			p=0 f=1 # killed before it could count
		fi
		pass=$((pass + p))
		fail=$((fail + f))
		[ "$f" -eq 0 ] || failed+=" ${labels[$i]}/$name"
	done
	echo "${labels[$i]}: $pass passed, $fail failed"
	[ $fail -eq 0 ] || status=1
done
[ -z "$failed" ] || echo "failed:$failed"
exit $status
