#!/usr/bin/env bash
# layers.sh [ROOT]: the include graph of core/, cli/ and gpu/ follows the declared layers.
#
# Reads every `#include "..."` line (an include is resolved as the compiler does: the
# including file's folder, then core/, then the repository root) and fails, naming file
# and line, when
#  - a file includes from a layer above its own, or from another room of its own layer;
#  - anything under core/ includes from cli/ or gpu/;
#  - two rooms include each other;
#  - a file directly in core/ is not one of the base files named below.
# Then it checks itself: the same check on a copy of core/ with a planted upward include
# (model/ including engine/) must fail. Prints "N passed, N failed".
#
# The order, lowest first, is declared here once (README.md's map draws it). A room may
# include its own files and any room of a lower layer.
LAYERS=(
	"core/status core/strbuf core/cpufeat" # base: error values, the text buffer, CPU features
	"core/threadpool"         # worker threads for data-parallel loops (status.h below it)
	"core/model core/sample"  # GGUF, model, synthetic shapes | sampling
	"core/text"               # tokenizers, chat templates
	"core/backend"            # the backend contract
	"core/engine core/cpu gpu" # the batching engine | the CPU backend | the CUDA backend
	"core/io"                 # request and result lines, workloads
	"cli"                     # the command line
)
set -u
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
n_pass=0
n_fail=0

# room_of PATH (relative to a root): the room a file belongs to, or "" when unchecked.
room_of() {
	case $1 in
	core/*/*) echo "${1%/*}" ;;
	core/*) local b=${1#core/}; echo "core/${b%%.*}" ;;
	cli/*) echo cli ;;
	gpu/emu/*) echo "" ;;
	gpu/*) echo gpu ;;
	*) echo "" ;;
	esac
}

# rank_of ROOM: the index of its layer, or -1 when undeclared.
rank_of() {
	local i r
	for i in "${!LAYERS[@]}"; do
		for r in ${LAYERS[$i]}; do
			[ "$r" = "$1" ] && { echo "$i"; return; }
		done
	done
	echo -1
}

# check_tree DIR: prints one line per violation; returns the number of violations.
check_tree() {
	local dir=$1 bad=0 f line no inc target from to rf rt
	declare -A edge=()
	cd "$dir" || return 1
	while IFS= read -r f; do
		from=$(room_of "$f")
		[ -n "$from" ] || continue
		rf=$(rank_of "$from")
		if [ "$rf" -lt 0 ]; then
			echo "$f: room $from is in no declared layer (a file directly in core/ must be a base file)"
			bad=$((bad + 1))
			continue
		fi
		while IFS=: read -r no line; do
			inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"$line")
			target=""
			for cand in "$(dirname "$f")/$inc" "core/$inc" "$inc"; do
				[ -f "$cand" ] && { target=$(realpath -m --relative-to=. "$cand"); break; }
			done
			[ -n "$target" ] || continue # a generated or system-like header
			to=$(room_of "$target")
			[ -n "$to" ] && [ "$to" != "$from" ] || continue
			edge["$from>$to"]="$f:$no"
			if [[ $from == core/* && ( $to == cli || $to == gpu ) ]]; then
				echo "$f:$no: core/ includes $target from $to/"
				bad=$((bad + 1))
				continue
			fi
			rt=$(rank_of "$to")
			if [ "$rt" -ge "$rf" ]; then
				echo "$f:$no: $from includes $target from $to, which is not a lower layer"
				bad=$((bad + 1))
			fi
		done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$f")
	done < <(find core cli gpu -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
		-o -name '*.cuh' -o -name '*.inc' \) | sort)
	local e a b
	for e in "${!edge[@]}"; do
		a=${e%%>*}
		b=${e##*>}
		if [[ $a < $b ]] && [ -n "${edge[$b>$a]:-}" ]; then
			echo "${edge[$e]} and ${edge[$b>$a]}: $a and $b include each other"
			bad=$((bad + 1))
		fi
	done
	return $bad
}

out=$(check_tree "$root")
if [ -z "$out" ]; then
	n_pass=$((n_pass + 1))
else
	n_fail=$((n_fail + 1))
	echo "FAIL layering:"
	echo "$out" | sed 's/^/  /'
fi

# The check must fail on a planted upward include.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/core" "$root/cli" "$root/gpu" "$tmp/"
printf '#include "engine/engine.h"\n' >>"$tmp/core/model/gguf.h"
planted=$(check_tree "$tmp")
if grep -q 'core/model/gguf.h:.*core/model includes core/engine/engine.h' <<<"$planted"; then
	n_pass=$((n_pass + 1))
else
	n_fail=$((n_fail + 1))
	echo "FAIL layering self-check: a planted upward include was not reported (got: $planted)"
fi

echo "$n_pass passed, $n_fail failed"
[ $n_fail -eq 0 ]
