#!/usr/bin/env bash
# replay_schema.sh [DIR...]: replays fuzz_schema's corpus (default build-fuzz/corpus/schema
# and build-fuzz/seeds/schema) with FUZZ_SCHEMA_LOG set, then validates every drawn
# instance against its schema with python3-jsonschema (Draft 2020-12; of the formats, those
# the converter produces: date, time, date-time, uuid).
# The converter's language must be a subset of the schema's valid instances: prints
# "N instances of M schemas validated, K invalid (S skipped)" and exits 1 when K > 0 (the first
# invalid ones on stderr). Schemas with oneOf are skipped (json_schema.h: oneOf is
# treated as anyOf, exclusivity is not checked) and lines that are not UTF-8 (cJSON keeps
# such bytes in a schema's strings; python's json does not read them).
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(build-fuzz/corpus/schema build-fuzz/seeds/schema)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for d in "${dirs[@]}"; do
	[ -d "$d" ] || continue
	FUZZ_SCHEMA_LOG=$log build-fuzz/fuzz_schema -runs=0 "$d" >/dev/null 2>&1
done
/usr/bin/python3 - "$log" <<'PY'
import json, sys
import jsonschema
# the formats the converter produces as themselves; the others are annotations (Draft
# 2020-12's default, README), which python's full format checker would assert
FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checkers = {k: v for k, v in jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers.items()
                    if k in ("date", "time", "date-time", "uuid")}
n = bad = skipped = 0
schemas = set()
for raw in open(sys.argv[1], "rb"):
    try:  # cJSON keeps bytes that are not UTF-8 in a schema's strings: python cannot
        case = json.loads(raw.decode("utf-8"))
    except ValueError:
        skipped += 1
        continue
    schema, text = case["schema"], case["instance"]
    if "oneOf" in json.dumps(schema):
        skipped += 1
        continue
    n += 1
    schemas.add(json.dumps(schema, sort_keys=True))
    try:
        inst = json.loads(text)
        v = jsonschema.Draft202012Validator(schema, format_checker=FORMATS)
        errs = [e.message for e in v.iter_errors(inst)][:1]
    except Exception as e:  # a schema python cannot use, a recursion it cannot follow
        errs = ["python: %s" % type(e).__name__]
    if errs:
        bad += 1
        if bad <= 5:
            print("invalid: %r for %s: %s" % (text, json.dumps(schema)[:300], errs[0]), file=sys.stderr)
print("%d instances of %d schemas validated, %d invalid (%d skipped: oneOf, not UTF-8)" % (n, len(schemas), bad, skipped))
sys.exit(1 if bad else 0)
PY
