#!/usr/bin/env bash
# setup.sh: installs what a fresh Debian/Ubuntu machine lacks, builds batchgen, and runs
# the main job on the built-in model (stories260K: short English stories) over
# testdata/prompts.jsonl.
#   ./setup.sh              install, build, run the sample job
#   ./setup.sh --deps-only  install the build and test dependencies only
set -euo pipefail
cd "$(dirname "$0")"

pkgs=(build-essential libcjson-dev libpcre2-dev groff-base pkg-config jq
	clang-19 # the CUDA gates' second front end (tests/gpu_gates.sh)
	libcurl4-openssl-dev # hf: downloads (curl.h; libcurl itself is loaded at run time)
	python3 # tests/hub_server.py, the local hub that tests/e2e_hub.sh downloads from
	python3-jinja2 python3-jsonschema) # the oracles of tests/e2e_chat_jinja.sh, e2e_grammar.sh
# `make CC=clang` (clang) and `make fuzz` (libFuzzer and the sanitizer runtimes of clang 19)
pkgs+=(clang libclang-rt-19-dev)
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
[ "${1:-}" = --deps-only ] && exit 0

make -j"$(nproc)"
build/batchgen -i testdata/prompts.jsonl -o - --stats build/stats.jsonl
