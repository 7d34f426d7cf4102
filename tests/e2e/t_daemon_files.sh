#!/usr/bin/env bash
# Where and how the daemon creates trace files (issue #13, items 11, 12):
#  1. the output directory is created 0700 and traces (.json, .gtr) 0600,
#     since they hold command lines;
#  2. a dangling symlink planted where an agent's trace will go is never
#     followed: nothing is created outside the output directory, and the
#     trace lands under another name;
#  3. an output directory others may write in is refused, unless it is
#     sticky and ours; one owned by another user is refused (root only).
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"

# Waits until the daemon has logged n disconnections (files written).
wait_disc() {
  for _ in $(seq 1 200); do
    [ "$(grep -c ' disconnected: ' "$E2E_TMP/daemon.log")" -ge "$1" ] && return 0; sleep 0.05
  done
  die "daemon did not finish $1 streams"
}

echo "== modes"
start_daemon --raw
"$FAKE" --chunks 1 --records 10 2>/dev/null || die "agent failed"
wait_disc 1
[ "$(stat -c %a "$OUT")" = 700 ] || die "output dir mode $(stat -c %a "$OUT")"
for f in "$OUT"/*.json "$OUT"/*.gtr; do
  [ "$(stat -c %a "$f")" = 600 ] || die "$f has mode $(stat -c %a "$f")"
done

echo "== planted symlink"
VICTIM=$E2E_TMP/victim
bash -c 'ln -s "$1" "$2/fake_agent-pid$$.json"; ln -s "$1" "$2/fake_agent-pid$$.pt.trace.json"; ln -s "$1.gtr" "$2/fake_agent-pid$$.gtr"; exec "$3" --chunks 1 --records 10' \
  _ "$VICTIM" "$OUT" "$FAKE" 2>/dev/null || die "agent failed"
wait_disc 2
stop_daemon || die "daemon exit $?"
[ ! -e "$VICTIM" ] && [ ! -e "$VICTIM.gtr" ] || die "the daemon wrote through a planted symlink"
n=$(find "$OUT" -name 'fake_agent-pid*.json' -type f | wc -l)
[ "$n" -eq 2 ] || die "want 2 real traces, got $n: $(ls -l "$OUT")"
validate $(find "$OUT" -name '*.json' -type f)

echo "== output directories open to others"
mkdir -m 777 "$E2E_TMP/open"; chmod 777 "$E2E_TMP/open"
"$B/gradtraced" --foreground --output-dir "$E2E_TMP/open" 2>"$E2E_TMP/open.err" && die "started with a 0777 output dir"
grep -q "writable by others" "$E2E_TMP/open.err" || die "0777: $(cat "$E2E_TMP/open.err")"
mkdir "$E2E_TMP/sticky"; chmod 1777 "$E2E_TMP/sticky"
OUT=$E2E_TMP/sticky start_daemon
stop_daemon || die "a sticky directory of ours was refused"
if [ "$(id -u)" -eq 0 ]; then
  mkdir -m 700 "$E2E_TMP/theirs"; chown 65534 "$E2E_TMP/theirs"
  "$B/gradtraced" --foreground --output-dir "$E2E_TMP/theirs" 2>"$E2E_TMP/theirs.err" && die "started in another user's dir"
  grep -q "owned by uid 65534" "$E2E_TMP/theirs.err" || die "foreign: $(cat "$E2E_TMP/theirs.err")"
elif [ -n "${CI:-}" ]; then
  die "CI must run as root"
fi
echo ok
