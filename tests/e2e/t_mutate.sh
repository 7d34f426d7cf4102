#!/usr/bin/env bash
# Mutation loop (issue #13, item 5): structure-aware mutations of real
# recordings (tests/tools/mutate_gtr.py: hostile hello and record times,
# sizes, types, sequence jumps, chunks dropped, repeated or cut, CRCs made
# right) go into `gradtrace convert` and into the daemon. Neither may
# crash or trip a sanitizer (the ASan+UBSan build, build-address-undefined,
# is used when it exists: `make SANITIZER=address,undefined all`), and the
# project's validator is the oracle: every file written must pass it.
# GT_MUTATIONS mutants (default 200; `make soak` runs 3000).
. "$(dirname "$0")/daemon_lib.sh"
N=${GT_MUTATIONS:-200}
SB=${SAN_BUILD:-$ROOT/build-address-undefined}
if [ -x "$SB/gradtrace" ] && [ -x "$SB/gradtraced" ]; then
  CONV=$SB/gradtrace DAEMON=$SB/gradtraced; echo "sanitizer build: $SB"
else
  CONV=$B/gradtrace DAEMON=$B/gradtraced; echo "no sanitizer build; using $B"
fi
need "$CONV" "$DAEMON" "$B/progs/gen_gtr"
export ASAN_OPTIONS="exitcode=99:detect_leaks=0" UBSAN_OPTIONS="halt_on_error=1:exitcode=99:print_stacktrace=1"
M=$E2E_TMP/m; mkdir -p "$M"
"$B/progs/gen_gtr" -o "$M/a.gtr" --level 0 --chunk-kb 8 --gpu --steps --iterations 4 >/dev/null
"$B/progs/gen_gtr" -o "$M/b.gtr" --level 0 --chunk-kb 64 --layers 4 --worker >/dev/null
"$PY" "$ROOT/tests/tools/mutate_gtr.py" "$M/a.gtr" "$M/a-" $((N / 2)) 13
"$PY" "$ROOT/tests/tools/mutate_gtr.py" "$M/b.gtr" "$M/b-" $((N - N / 2)) 17

echo "== $N mutants into gradtrace convert"
crashed=0
for f in "$M"/a-*.gtr "$M"/b-*.gtr; do
  "$CONV" convert "$f" -o "${f%.gtr}.json" -q 2>"$E2E_TMP/conv.err"; rc=$?
  if [ $rc -gt 1 ]; then
    crashed=$((crashed + 1)); echo "crash (exit $rc) on $f:"; tail -20 "$E2E_TMP/conv.err"
    cp "$f" "$E2E_TMP/crash-$crashed.gtr"
  fi
done
[ $crashed -eq 0 ] || die "$crashed mutants crashed the converter"
ls "$M"/*.json >/dev/null 2>&1 || die "no output at all"
"$PY" "$VALIDATOR" --quiet "$M"/*.json 2>"$E2E_TMP/invalid.txt" || {
  head -5 "$E2E_TMP/invalid.txt"; die "$(wc -l <"$E2E_TMP/invalid.txt") converter outputs rejected by the validator"; }
echo "converter: $(ls "$M"/*.json | wc -l) outputs, all valid"

echo "== mutants into the daemon"
B_SAVE=$B; B=$(dirname "$DAEMON")
start_daemon
B=$B_SAVE
"$PY" - "$GRADTRACE_SOCKET" "$M" <<'PY'
import glob, os, socket, sys
n = 0
for f in sorted(glob.glob(os.path.join(sys.argv[2], "*-*.gtr")))[:60]:
    s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
    try:
        s.sendall(open(f, "rb").read())
    except OSError:
        pass
    s.close(); n += 1
print(f"{n} mutant streams sent")
PY
sleep 0.5
kill -0 "$DAEMON_PID" || die "the daemon died"
stop_daemon || die "daemon exit $? (a sanitizer report?)"
ls "$OUT"/*.json >/dev/null 2>&1 || die "the daemon wrote nothing"
"$PY" "$VALIDATOR" --quiet "$OUT"/*.json 2>"$E2E_TMP/invalid.txt" || {
  head -5 "$E2E_TMP/invalid.txt"; die "$(wc -l <"$E2E_TMP/invalid.txt") daemon outputs rejected by the validator"; }
echo "daemon: $(ls "$OUT"/*.json | wc -l) outputs, all valid"
echo ok
