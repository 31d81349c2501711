#!/usr/bin/env bash
# e2e_hub: -m hf:OWNER/REPO[:TAG|/FILE] against a local imitation of the Hugging Face hub
# (tests/hub_server.py, started and stopped here; no real network). Checked:
#  - a fresh download: the file, its place in the hub cache (blobs/<sha256>, a relative
#    link from snapshots/<commit>/, refs/main), its sha256, the model that runs;
#  - a second run makes no request (the server counts them), --offline and
#    HF_HUB_OFFLINE use the cache only; a file placed in the cache by hand is used as is;
#  - the tag (default Q4_K_M, case-insensitive, mmproj excluded), /FILE, @REVISION;
#  - a connection cut once (resumed in the same run with a Range request), cut every time
#    (exit 3, the .incomplete kept, then resumed by the next run), a corrupt byte (exit 3,
#    sha256, nothing kept), 401/403 naming HF_TOKEN, a missing repository, a missing tag
#    (naming the tags there), no network: each one line on stderr and exit 3, with nothing
#    half-written under blobs/ or snapshots/.
. tests/check.sh
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

# ---- the repositories the server offers ------------------------------------------------
stories=$(shared models/stories260K.gguf) || {
	summary
	exit $?
}
"$BATCHGEN" synth --shape tiny --dtype q8_0 --name tiny-q8 -o "$TMP/tiny-q8.gguf" 2>/dev/null
head -c 4096 "$stories" >"$TMP/mmproj.gguf"
mkdir -p "$TMP/state"
cat >"$TMP/hub.json" <<JSON
{
  "test/stories": {"files": {
    "README.md": "$stories",
    "stories260K-F32.gguf": "$stories",
    "stories260K-Q4_K_M.gguf": "$stories",
    "mmproj-stories-F32.gguf": "$TMP/mmproj.gguf",
    "sub/tiny-Q8_0.gguf": "$TMP/tiny-q8.gguf",
    "big-Q6_K-00001-of-00002.gguf": "$TMP/mmproj.gguf"}},
  "test/flaky": {"files": {"stories-F32.gguf": "$stories"}},
  "test/broken": {"files": {"stories-F32.gguf": "$stories"}},
  "test/corrupt": {"files": {"stories-F32.gguf": "$stories"}},
  "test/gated": {"files": {"stories-F32.gguf": "$stories"}, "token": "secret"},
  "test/slow": {"files": {"stories-F32.gguf": "$stories"}}
}
JSON
echo cut-once >"$TMP/state/test--flaky.mode"
echo cut >"$TMP/state/test--broken.mode"
echo corrupt >"$TMP/state/test--corrupt.mode"
echo slow >"$TMP/state/test--slow.mode"
$PY tests/hub_server.py "$TMP/hub.json" "$TMP/state" 2>"$TMP/server.err" &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$TMP"' EXIT
# python3 may take seconds to start on a loaded machine: wait up to 30 s
for _ in $(seq 600); do [ -s "$TMP/state/port" ] && break; sleep 0.05; done
check "the server started" test -s "$TMP/state/port"
port=$(cat "$TMP/state/port" 2>/dev/null)

unset HF_TOKEN HF_HOME HF_HUB_OFFLINE HF_TOKEN_PATH XDG_CACHE_HOME
export HF_ENDPOINT=http://127.0.0.1:$port HF_HUB_CACHE=$TMP/cache HOME=$TMP/home
log=$TMP/state/requests.log
touch "$log"
nreq() { wc -l <"$log" | tr -d ' '; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
want_sha=$(sha "$stories")
commit() { printf '%s' "$1" | sha1sum | cut -d' ' -f1; }
repo=$TMP/cache/models--test--stories
c_st=$(commit test/stories)

# exit 3 and exactly one line on stderr besides the progress lines; the line is left in
# $TMP/e.err
fails() {
	local name=$1
	shift
	"$@" </dev/null >"$TMP/e.out" 2>"$TMP/e.all"
	local rc=$?
	grep -v '^batchgen: downloading ' "$TMP/e.all" >"$TMP/e.err"
	check_eq "$name: exit 3" "$rc" 3
	check_eq "$name: one line on stderr" "$(wc -l <"$TMP/e.err" | tr -d ' ')" 1
	check_eq "$name: nothing on stdout" "$(wc -c <"$TMP/e.out" | tr -d ' ')" 0
}
# nothing but whole verified files under blobs/, links only to them
clean_cache() {
	local bad
	bad=$(find "$TMP/cache" -path '*/blobs/*' -type f ! -name '*.lock' ! -name '*.incomplete' |
		while read -r f; do [ "$(sha "$f")" = "$(basename "$f")" ] || echo "$f"; done)
	check_eq "$1: every blob is whole (its name is its sha256)" "$bad" ""
	check_eq "$1: no dangling snapshot link" "$(find "$TMP/cache" -xtype l)" ""
}

# ---- a fresh download -------------------------------------------------------------------
"$BATCHGEN" info -m hf:test/stories:F32 >"$TMP/info.txt" 2>"$TMP/info.err"
check_eq "fresh download: exit 0" "$?" 0
check "info prints the model fetched" grep -qx "n_layer: 5" "$TMP/info.txt"
check_eq "info names the file" "$(grep '^file: ' "$TMP/info.txt")" \
	"file: $repo/snapshots/$c_st/stories260K-F32.gguf"
check_eq "refs/main holds the commit" "$(cat "$repo/refs/main" 2>/dev/null)" "$c_st"
check_eq "the snapshot links to the blob" \
	"$(readlink "$repo/snapshots/$c_st/stories260K-F32.gguf")" "../../blobs/$want_sha"
check_eq "the blob's sha256" "$(sha "$repo/blobs/$want_sha" 2>/dev/null)" "$want_sha"
check "progress lines on a log file" grep -q "downloading stories260K-F32.gguf: 100%" "$TMP/info.err"
check_eq "listing and one download" "$(cut -d' ' -f1,2 "$log" | sed 's/?.*//' | tr '\n' ,)" \
	"GET /api/models/test/stories/tree/main,GET /test/stories/resolve/main/stories260K-F32.gguf,GET /_cdn/test/stories/stories260K-F32.gguf,"

# the model runs: the same tokens as the built-in (the same file); a tag in any case
req='{"prompt":"Once upon a time","max_tokens":12}'
echo "$req" | "$BATCHGEN" --device cpu -q -m hf:test/stories:f32 | sed 's/"metrics".*//' >"$TMP/hf.jsonl"
echo "$req" | "$BATCHGEN" --device cpu -q | sed 's/"metrics".*//' >"$TMP/builtin.jsonl"
check "hf:test/stories:f32 generates as the built-in model" cmp -s "$TMP/hf.jsonl" "$TMP/builtin.jsonl"

# ---- the cache first: no request ------------------------------------------------------
n0=$(nreq)
"$BATCHGEN" info -m hf:test/stories:F32 >/dev/null 2>&1
check_eq "second run: exit 0" "$?" 0
check_eq "second run: no request" "$(nreq)" "$n0"
"$BATCHGEN" info --offline -m hf:test/stories:F32 >/dev/null 2>&1
check_eq "--offline from the cache: exit 0" "$?" 0
"$BATCHGEN" info -m "hf:test/stories:F32@$c_st" >/dev/null 2>&1
check_eq "@COMMIT from the cache: exit 0" "$?" 0
check_eq "cache hits made no request" "$(nreq)" "$n0"
fails "--offline, not cached" "$BATCHGEN" info --offline -m hf:test/stories/sub/tiny-Q8_0.gguf
check "--offline, not cached: says offline" grep -q "offline" "$TMP/e.err"
printf '{"prompt":"x","max_tokens":1}\n' >"$TMP/x.jsonl"
HF_HUB_OFFLINE=1 fails "HF_HUB_OFFLINE=1, not cached" "$BATCHGEN" -q -i "$TMP/x.jsonl" -m hf:test/stories:Q8_0
check_eq "offline runs made no request" "$(nreq)" "$n0"

# a file placed in the cache by hand (as huggingface-cli leaves one, but a plain file)
hand=$TMP/cache/models--hand--made
mkdir -p "$hand/refs" "$hand/snapshots/0123456789abcdef0123456789abcdef01234567"
printf 0123456789abcdef0123456789abcdef01234567 >"$hand/refs/main"
cp "$TMP/tiny-q8.gguf" "$hand/snapshots/0123456789abcdef0123456789abcdef01234567/Tiny-q8_0.gguf"
HF_ENDPOINT=http://127.0.0.1:1 "$BATCHGEN" info -m hf:hand/made:Q8_0 >"$TMP/hand.txt" 2>&1
check_eq "a file placed by hand: exit 0" "$?" 0
check "a file placed by hand: its model" grep -qx "name: tiny-q8" "$TMP/hand.txt"
check_eq "a file placed by hand: no request" "$(nreq)" "$n0"

# ---- tags and files ----------------------------------------------------------------------
"$BATCHGEN" info -m hf:test/stories >"$TMP/def.txt" 2>/dev/null
check_eq "default tag Q4_K_M: exit 0" "$?" 0
check "default tag Q4_K_M picks its file" grep -q "/stories260K-Q4_K_M.gguf$" "$TMP/def.txt"
"$BATCHGEN" info -m hf:test/stories/sub/tiny-Q8_0.gguf >"$TMP/file.txt" 2>/dev/null
check_eq "/FILE in a folder: exit 0" "$?" 0
check_eq "/FILE: its link climbs out of the folder" \
	"$(readlink "$repo/snapshots/$c_st/sub/tiny-Q8_0.gguf")" "../../../blobs/$(sha "$TMP/tiny-q8.gguf")"
fails "a missing tag" "$BATCHGEN" info -m hf:test/stories:Q5_K_S
check "a missing tag: names the tags there" grep -q "(tags: Q6_K, F32, Q4_K_M, Q8_0)$" "$TMP/e.err"
fails "a split model" "$BATCHGEN" info -m hf:test/stories:Q6_K
check "a split model: says so" grep -q "split GGUF" "$TMP/e.err"
fails "a missing file" "$BATCHGEN" info -m hf:test/stories/nope.gguf
fails "a missing repository" "$BATCHGEN" info -m hf:test/nope:F32
check "a missing repository: says so" grep -q "no such repository" "$TMP/e.err"
fails "a missing revision" "$BATCHGEN" info -m hf:test/stories:F32@v9
check "a missing revision: says so" grep -q "not found" "$TMP/e.err"
fails "a malformed name" "$BATCHGEN" info -m hf:test
fails "a path outside the repository" "$BATCHGEN" info -m hf:test/stories/../x.gguf

# ---- gated: 401 and 403 name HF_TOKEN; the token is sent as a bearer ----------------------
fails "gated, no token (401)" "$BATCHGEN" info -m hf:test/gated:F32
check "401 names HF_TOKEN" grep -q "HF_TOKEN" "$TMP/e.err"
HF_TOKEN=wrong fails "gated, a wrong token (403)" "$BATCHGEN" info -m hf:test/gated:F32
check "403 names HF_TOKEN" grep -q "HF_TOKEN" "$TMP/e.err"
HF_TOKEN=secret "$BATCHGEN" info -m hf:test/gated:F32 >/dev/null 2>&1
check_eq "gated, the right token: exit 0" "$?" 0
check "the token went as a bearer" grep -q "GET /test/gated/resolve/main/stories-F32.gguf - Bearer_secret" "$log"
mkdir -p "$TMP/hfhome"
printf 'secret\n' >"$TMP/hfhome/token"
rm -rf "$TMP/cache/models--test--gated"
HF_HOME=$TMP/hfhome "$BATCHGEN" info -m hf:test/gated:F32 >/dev/null 2>&1
check_eq "gated, the token in \$HF_HOME/token: exit 0" "$?" 0

# ---- a connection cut once: resumed within the run -----------------------------------------
"$BATCHGEN" info -m hf:test/flaky:F32 >/dev/null 2>"$TMP/flaky.err"
check_eq "cut once: exit 0" "$?" 0
half=$((1185376 / 2))
check "cut once: resumed with a Range request" grep -q "GET /_cdn/test/flaky/stories-F32.gguf bytes=$half- " "$log"
check_eq "cut once: the blob is whole" "$(sha "$TMP/cache/models--test--flaky/blobs/$want_sha" 2>/dev/null)" "$want_sha"

# ---- cut every time: exit 3, .incomplete kept, then resumed by the next run -----------------
b=$TMP/cache/models--test--broken
fails "cut every time" "$BATCHGEN" info -m hf:test/broken:F32
check "cut every time: says run again to resume" grep -q "run again to resume" "$TMP/e.err"
check "cut every time: the .incomplete is kept" test -s "$b/blobs/$want_sha.incomplete"
check "cut every time: no blob" test ! -e "$b/blobs/$want_sha"
check "cut every time: no snapshot" test ! -e "$b/snapshots"
have=$(stat -c %s "$b/blobs/$want_sha.incomplete" 2>/dev/null)
echo ok >"$TMP/state/test--broken.mode"
"$BATCHGEN" info -m hf:test/broken:F32 >/dev/null 2>&1
check_eq "the next run: exit 0" "$?" 0
check "the next run resumed from the .incomplete" grep -q "GET /_cdn/test/broken/stories-F32.gguf bytes=$have- " "$log"
check_eq "the next run: the blob is whole" "$(sha "$b/blobs/$want_sha" 2>/dev/null)" "$want_sha"
check "the next run: no .incomplete left" test ! -e "$b/blobs/$want_sha.incomplete"

# ---- a corrupt byte: sha256, exit 3, nothing kept ------------------------------------------
c=$TMP/cache/models--test--corrupt
fails "a corrupt download" "$BATCHGEN" info -m hf:test/corrupt:F32
check "a corrupt download: names sha256" grep -q "sha256" "$TMP/e.err"
check_eq "a corrupt download: nothing under blobs/" "$(ls "$c/blobs" 2>/dev/null | grep -v '\.lock$')" ""
check "a corrupt download: no snapshot" test ! -e "$c/snapshots"

# ---- three processes at once (a sharded job on one machine): one download, all succeed ----
for k in 1 2 3; do
	"$BATCHGEN" info -m hf:test/slow:F32 >"$TMP/slow$k.txt" 2>/dev/null &
	eval "p$k=\$!"
done
for k in 1 2 3; do
	eval "wait \$p$k"
	check_eq "at once, process $k: exit 0" "$?" 0
done
check_eq "at once: one download" "$(grep -c 'GET /_cdn/test/slow/' "$log")" 1

# ---- no network ------------------------------------------------------------------------------
HF_HUB_CACHE=$TMP/cache2 HF_ENDPOINT=http://127.0.0.1:1 fails "no network" "$BATCHGEN" info -m hf:test/stories:F32
check "no network: says it cannot reach the hub" grep -q "cannot reach" "$TMP/e.err"

# ---- progress: a bar redrawn in place on a terminal; nothing with -q --------------------
if command -v script >/dev/null; then
	HF_HUB_CACHE=$TMP/cache3 script -qfec "$BATCHGEN info -m hf:test/stories:F32" /dev/null \
		>"$TMP/tty.txt" 2>&1 </dev/null
	check "a terminal: the bar is redrawn in place" grep -q $'\r''batchgen: stories260K-F32.gguf \[#' "$TMP/tty.txt"
	check "a terminal: it ends at 100%" grep -q '100% 1.1/1.1 MiB' "$TMP/tty.txt"
fi
HF_HUB_CACHE=$TMP/cache4 "$BATCHGEN" -q -m hf:test/stories:F32 -i "$TMP/x.jsonl" >/dev/null 2>"$TMP/q.err"
check_eq "-q: exit 0" "$?" 0
check_eq "-q: nothing on stderr" "$(wc -c <"$TMP/q.err" | tr -d ' ')" 0

clean_cache "after all runs"
check_eq "the server had no error" "$(cat "$TMP/server.err")" ""
summary
