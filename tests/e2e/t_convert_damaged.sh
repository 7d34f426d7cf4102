#!/usr/bin/env bash
# gradtrace convert on damaged input: a truncated file converts what is
# whole and says so in the metadata (exit 0); a corrupt chunk is skipped
# and counted; a file with no readable header, garbage, a missing file and
# bad usage fail with one clear line and the documented status.
set -eu
B=$ROOT/$BUILD
PY=${PYTHON:-/usr/bin/python3}
VALIDATE="$PY $ROOT/tests/tools/validate_trace.py"
[ -x "$B/gradtrace" ] && [ -x "$B/progs/gen_gtr" ] || { echo "run make" >&2; exit 1; }
T=$E2E_TMP
"$B/progs/gen_gtr" -o "$T/full.gtr" --iterations 30 --layers 3 --gpu \
  --chunk-kb 8 >/dev/null
size=$(stat -c %s "$T/full.gtr")
"$B/gradtrace" convert "$T/full.gtr" -o "$T/full.json" -q

meta() { # meta FILE EXPR: prints a python expression over d["gradtrace"]
  "$PY" -c 'import json,sys; g=json.load(open(sys.argv[1]))["gradtrace"]; print(eval(sys.argv[2]))' "$1" "$2"
}
nevents() { "$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["traceEvents"]))' "$1"; }

echo "== truncated mid-chunk"
head -c $((size * 6 / 10 + 7)) "$T/full.gtr" >"$T/trunc.gtr"
"$B/gradtrace" convert "$T/trunc.gtr" -o "$T/trunc.json" 2>"$T/trunc.err"
cat "$T/trunc.err"
grep -q truncated "$T/trunc.err"
$VALIDATE "$T/trunc.json"
[ "$(meta "$T/trunc.json" 'g["stream"]["truncated"]')" = True ]
[ "$(meta "$T/trunc.json" 'g["stream"]["skipped_bytes"] > 0')" = True ]
full_n=$(nevents "$T/full.json"); trunc_n=$(nevents "$T/trunc.json")
echo "events: full $full_n, truncated $trunc_n"
[ "$trunc_n" -gt 100 ] && [ "$trunc_n" -lt "$full_n" ]

echo "== one corrupt byte in the middle"
cp "$T/full.gtr" "$T/corrupt.gtr"
printf '\xff\x00\xff' | dd of="$T/corrupt.gtr" bs=1 seek=$((size / 2)) \
  conv=notrunc 2>/dev/null
"$B/gradtrace" convert "$T/corrupt.gtr" -o "$T/corrupt.json"
$VALIDATE "$T/corrupt.json"
[ "$(meta "$T/corrupt.json" 'g["stream"]["corrupt_chunks"] >= 1')" = True ]
[ "$(meta "$T/corrupt.json" 'g["stream"]["truncated"]')" = False ]

echo "== header cut short: nothing readable"
head -c 30 "$T/full.gtr" >"$T/hdr.gtr"
set +e
"$B/gradtrace" convert "$T/hdr.gtr" -o "$T/hdr.json" 2>"$T/hdr.err"; rc=$?
set -e
cat "$T/hdr.err"
[ $rc -eq 1 ] && [ "$(wc -l <"$T/hdr.err")" -eq 1 ]

echo "== header only, every chunk unreadable: exit 1"
hl=$("$PY" -c 'import struct,sys; print(struct.unpack_from("<I", open(sys.argv[1],"rb").read(), 12)[0])' "$T/full.gtr")
{ head -c "$hl" "$T/full.gtr"; head -c 5000 /dev/urandom; } >"$T/junk.gtr"
set +e
"$B/gradtrace" convert "$T/junk.gtr" -o "$T/junk.json" 2>"$T/junk.err"; rc=$?
set -e
cat "$T/junk.err"
[ $rc -eq 1 ]
$VALIDATE "$T/junk.json"   # still a valid (empty) trace

echo "== garbage, missing file, usage"
head -c 4096 /dev/urandom >"$T/garbage.gtr"
set +e
"$B/gradtrace" convert "$T/garbage.gtr" -o "$T/g.json" 2>"$T/g.err"; rc1=$?
"$B/gradtrace" convert "$T/nope.gtr" 2>"$T/n.err"; rc2=$?
"$B/gradtrace" convert 2>"$T/u.err"; rc3=$?
"$B/gradtrace" convert "$T/full.gtr" --max-file-mb x 2>"$T/u2.err"; rc4=$?
"$B/gradtrace" convert --help >"$T/help.out"; rc5=$?
set -e
cat "$T/g.err" "$T/n.err" "$T/u2.err"
[ $rc1 -eq 1 ] && grep -q "not a gradtrace recording" "$T/g.err"
[ "$(wc -l <"$T/g.err")" -eq 1 ]
# A JSON trace given to convert is named as such, once.
printf ' {"traceEvents":[]}\n' >"$T/already.json"
set +e
"$B/gradtrace" convert "$T/already.json" 2>"$T/j.err"; rc7=$?
set -e
cat "$T/j.err"
[ $rc7 -eq 1 ] && [ "$(wc -l <"$T/j.err")" -eq 1 ] && grep -q "already a JSON trace" "$T/j.err"
cp "$T/full.gtr" "$T/same.gtr"
set +e
"$B/gradtrace" convert "$T/same.gtr" -o "$T/same.gtr" 2>"$T/s.err"; rc6=$?
set -e
cat "$T/s.err"
[ $rc6 -eq 1 ] && cmp -s "$T/full.gtr" "$T/same.gtr"   # input untouched
[ $rc2 -eq 1 ] && grep -q "No such file" "$T/n.err"
[ $rc3 -eq 2 ] && [ $rc4 -eq 2 ] && [ $rc5 -eq 0 ]
grep -q "usage: gradtrace convert" "$T/help.out"
echo ok
