#!/usr/bin/env bash
# e2e_man: the man page documents exactly the long options the --help texts list (both
# directions), and groff renders it without a single warning.
. tests/check.sh

man=man/batchgen.1
check "the man page exists" test -r $man

if command -v groff >/dev/null; then
	check_eq "groff -man -ww -z is silent" "$(groff -man -ww -z $man 2>&1)" ""
	check_eq "groff renders for a terminal without warnings" \
		"$(groff -man -ww -Tutf8 $man 2>&1 >/dev/null)" ""
else
	echo "SKIP: groff not found" >&2
	n_skip=$((n_skip + 1))
fi

# long options in every --help text
for c in "" bench tokenize detokenize info synth merge; do
	"$BATCHGEN" $c --help 2>&1
done | grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]' | sort -u >"$TMP/help.flags"
# long options in the man page's OPTIONS section (roff writes - as \-)
sed -n '/^\.SH OPTIONS/,/^\.SH [^O]/p' $man | sed 's/\\-/-/g' |
	grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]' | sort -u >"$TMP/man.flags"

check "--help lists options" test "$(wc -l <"$TMP/help.flags")" -gt 20
missing=$(comm -23 "$TMP/help.flags" "$TMP/man.flags" | tr '\n' ' ')
extra=$(comm -13 "$TMP/help.flags" "$TMP/man.flags" | tr '\n' ' ')
check_eq "every --help option is in the man page" "$missing" ""
check_eq "every man page option is in some --help" "$extra" ""

# the sections a reader looks for
for s in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS INPUT OUTPUT STATISTICS "EXIT STATUS" \
	ENVIRONMENT EXAMPLES; do
	check "section $s" grep -q "^\.SH \"\?$s" $man
done
# every exit status of DESIGN.md §8 is documented
for code in 0 1 2 3 4 130; do
	check "exit status $code documented" grep -qx "\.B $code" $man
done

summary
