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
inputs=$(mktemp -d)
trap 'rm -rf "$log" "$inputs"' EXIT
# The inputs, each once, made UTF-8 (jinja2 takes str): in the template (before the first
# 0xff) and in the variables (after it), each byte of an invalid sequence becomes "?".
# Mutated inputs are mostly not UTF-8 (~40% of a grown corpus); "?" keeps them replayable.
/usr/bin/python3 - "$inputs" "${dirs[@]}" <<'PY'
import hashlib, os, sys
out, seen, fixed = sys.argv[1], set(), 0
for d in sys.argv[2:]:
    if not os.path.isdir(d):
        continue
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        parts = data.split(b"\xff", 1)
        clean = b"\xff".join(p.decode("utf-8", "replace").replace("\ufffd", "?").encode() for p in parts)
        fixed += clean != data
        h = hashlib.sha1(clean).hexdigest()
        if h not in seen:
            seen.add(h)
            open(os.path.join(out, h), "wb").write(clean)
print("replay_jinja.sh: %d distinct inputs (%d made UTF-8)" % (len(seen), fixed))
PY
# -runs=0: each input once; -max_len: inputs longer than this would be cut (run.sh's 32768)
FUZZ_JINJA_LOG=$log build-fuzz/fuzz_jinja -runs=0 -max_len=1048576 "$inputs" >/dev/null 2>&1
# shellcheck disable=SC2086
/usr/bin/python3 fuzz/replay_jinja.py "$log" ${REPLAY_JINJA_ARGS:-}
