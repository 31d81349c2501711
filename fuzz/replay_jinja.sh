#!/usr/bin/env bash
# replay_jinja.sh [DIR...]: the differential check of the Jinja interpreter against
# python3-jinja2 (fuzz/replay_jinja.py). Replays fuzz_jinja's corpus (default
# build-fuzz/corpus/jinja and build-fuzz/seeds/jinja) with FUZZ_JINJA_LOG set, so that each
# input's template, variables and our rendering are logged, then renders each again with
# jinja2 under Hugging Face's settings and compares. Prints "N inputs replayed: ..." and
# the disagreements by explanation (REPLAY_JINJA_ARGS is passed on, e.g. "--out FILE");
# exits 1 when a disagreement is not explained by replay_jinja.py's KNOWN list.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(build-fuzz/corpus/jinja build-fuzz/seeds/jinja)
[ -x build-fuzz/fuzz_jinja ] || { echo "replay_jinja.sh: no build-fuzz/fuzz_jinja (make fuzz first)" >&2; exit 2; }
[ -d build-fuzz/seeds ] || fuzz/seeds.sh >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for d in "${dirs[@]}"; do
	[ -d "$d" ] || continue
	# -runs=0: each input once; -max_len: inputs longer than this would be cut (run.sh's 32768)
	FUZZ_JINJA_LOG=$log build-fuzz/fuzz_jinja -runs=0 -max_len=1048576 "$d" >/dev/null 2>&1
done
# shellcheck disable=SC2086
/usr/bin/python3 fuzz/replay_jinja.py "$log" ${REPLAY_JINJA_ARGS:-}
