#!/usr/bin/env bash
# with_daemon.sh BUILD_DIR OUT_DIR CMD...: a "host"'s own daemon (in
# $XDG_RUNTIME_DIR/gradtrace) writing to OUT_DIR, CMD run while it runs,
# then the daemon stopped (its conversions finished). Exit status: CMD's.
set -u
B=$1 out=$2; shift 2
"$B/gradtraced" --foreground --output-dir "$out" 2>daemon.log &
d=$!
for _ in $(seq 1 200); do
  "$B/gradtrace" status >/dev/null 2>&1 && break
  sleep 0.05
done
"$@"
rc=$?
"$B/gradtrace" daemon --stop >/dev/null 2>&1 || kill "$d"
wait "$d"
exit $rc
