#!/usr/bin/env bash
# engine_memory.sh: peak RSS of the engine for 10k, 100k and 1M generated requests (null
# backend: only the engine's own memory is measured). Builds bench/engine_memory.c into
# $BUILD (default /tmp/batchgen-bench) and records the output with the date and commit in
# bench/results/engine_memory.txt. Usage: bench/engine_memory.sh [N ...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-/tmp/batchgen-bench}
CC=${CC:-cc}
mkdir -p "$BUILD" bench/results
src="core/status.c core/kv.c core/scheduler.c core/engine.c core/request.c core/sampler.c
     core/gguf.c core/tok*.c bench/engine_memory.c"
# shellcheck disable=SC2086
$CC -std=c11 -O2 -D_GNU_SOURCE -I. -pthread $src -o "$BUILD/engine_memory" -lcjson -lpcre2-8 -lm
out=bench/results/engine_memory.txt
{
	echo "# engine_memory $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) host $(uname -m)"
	"$BUILD/engine_memory" "$@"
} | tee "$out"
