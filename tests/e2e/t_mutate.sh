#!/usr/bin/env bash
# Mutation loop (issue #13, item 5): structure-aware mutations of real
# recordings (tests/tools/mutate_gtr.py: hostile hello and record times,
# sizes, types, sequence jumps, chunks dropped, repeated or cut, CRCs made
# right) go into `gradtrace convert` and into the daemon. Neither may
# crash or trip a sanitizer (the ASan+UBSan build, build-address-undefined,
# is used when it exists: `make SANITIZER=address,undefined all`), and the
# project's validator is the oracle: every file written must pass it.
# Mutated trace files go into `gradtrace merge` and `convert --repair`.
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

# Issue 23, item 10: `gradtrace merge` and `gradtrace convert --repair`
# read trace files, which are untrusted too. Byte-level mutants of two
# converted traces (tests/tools/mutate_json.py: hostile bytes, damage, cuts)
# go into each: exit 0 must leave a file the validator reads as JSON with a
# trace's shape (its structural checks are about the events the input
# held, which a merge or a repair passes on as they are); exit 1 must say
# why in one line naming the command, and a failed merge leaves no output.
"$CONV" convert "$M/a.gtr" -o "$M/clean-a.json" -q && "$CONV" convert "$M/b.gtr" -o "$M/clean-b.json" -q ||
  die "converting the clean recordings failed"
J=$E2E_TMP/j; mkdir -p "$J"
"$PY" "$ROOT/tests/tools/mutate_json.py" "$M/clean-a.json" "$J/a-" $((N / 2)) 23
"$PY" "$ROOT/tests/tools/mutate_json.py" "$M/clean-b.json" "$J/b-" $((N - N / 2)) 29
echo "== $N trace mutants into gradtrace merge and gradtrace convert --repair"
crashed=0 badmsg=0
: >"$E2E_TMP/ok-merge.txt"; : >"$E2E_TMP/ok-repair.txt"
for f in "$J"/a-*.json "$J"/b-*.json; do
  o=${f%.json}.merged
  "$CONV" merge "$f" -o "$o" 2>"$E2E_TMP/merge.err"; rc=$?
  case $rc in
    0) echo "$o" >>"$E2E_TMP/ok-merge.txt" ;;
    1) if [ "$(wc -l <"$E2E_TMP/merge.err")" -ne 1 ] || ! grep -q '^gradtrace merge: ' "$E2E_TMP/merge.err" || [ -e "$o" ]; then
         badmsg=$((badmsg + 1)); echo "merge exit 1 on $f without one message line (or left $o):"; head -3 "$E2E_TMP/merge.err"
       fi ;;
    *) crashed=$((crashed + 1)); echo "merge crash (exit $rc) on $f:"; tail -20 "$E2E_TMP/merge.err" ;;
  esac
  r=${f%.json}.repaired.json
  cp "$f" "$r"
  "$CONV" convert --repair -q "$r" 2>"$E2E_TMP/repair.err"; rc=$?
  case $rc in
    0) echo "$r" >>"$E2E_TMP/ok-repair.txt" ;;
    1) if [ "$(wc -l <"$E2E_TMP/repair.err")" -ne 1 ] || ! grep -q '^gradtrace convert: ' "$E2E_TMP/repair.err"; then
         badmsg=$((badmsg + 1)); echo "repair exit 1 on $f without one message line:"; head -3 "$E2E_TMP/repair.err"
       fi ;;
    *) crashed=$((crashed + 1)); echo "repair crash (exit $rc) on $f:"; tail -20 "$E2E_TMP/repair.err" ;;
  esac
done
[ $crashed -eq 0 ] || die "$crashed trace mutants crashed merge or repair"
[ $badmsg -eq 0 ] || die "$badmsg failures without a one-line message"
"$PY" - "$ROOT/tests/tools" "$E2E_TMP/ok-merge.txt" "$E2E_TMP/ok-repair.txt" <<'PY' || die "merge or repair exited 0 leaving invalid JSON"
import sys
sys.path.insert(0, sys.argv[1])
import validate_trace as v
bad = 0
for what, lst in (("merge", sys.argv[2]), ("convert --repair", sys.argv[3])):
    files = [l.strip() for l in open(lst) if l.strip()]
    invalid = []
    for f in files:
        try:
            v.validate(f)
        except v.Invalid as e:
            m = str(e)
            # Only what the command wrote is its own: JSON syntax and the
            # trace's top-level shape; nesting, flows and names are the
            # input's events, passed on.
            if m.startswith(("not valid JSON", "non-finite", "top level", "no traceEvents",
                             "displayTimeUnit", "baseTimeNanoseconds", "no gradtrace",
                             "gradtrace.")) or m.startswith("event") and "not an object" in m:
                invalid.append((f, m))
    print(f"{what}: exit 0 on {len(files)} mutants, {len(invalid)} of them invalid JSON")
    for f, m in invalid[:3]:
        print(f"  {f}: {m}")
    bad += len(invalid)
sys.exit(1 if bad else 0)
PY

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
