# Shared helpers for the daemon and CLI end-to-end scripts (t_daemon_*,
# t_cli_*). Sourced, not run. Each script gets a private E2E_TMP (0700) and
# points both sockets into it, so tests never meet a user's daemon.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-build}
case $BUILD in /*) B=$BUILD ;; *) B=$ROOT/$BUILD ;; esac
E2E_TMP=${E2E_TMP:-$(mktemp -d /tmp/gt-e2e.XXXXXX)}
chmod 700 "$E2E_TMP"
export GRADTRACE_SOCKET=$E2E_TMP/agent.sock
export GRADTRACE_CONTROL=$E2E_TMP/control.sock
OUT=$E2E_TMP/out
PY=${PYTHON:-python3}
FAKE=$B/progs/fake_agent
VALIDATOR=$ROOT/tests/tools/validate_trace.py
DAEMON_PID=

die() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
need() { for f in "$@"; do [ -x "$f" ] || skip "missing $f (build first)"; done; }

# Starts gradtraced in the foreground (background job) and waits until the
# control socket answers.
start_daemon() {
  "$B/gradtraced" --foreground --output-dir "$OUT" "$@" 2>>"$E2E_TMP/daemon.log" &
  DAEMON_PID=$!
  for _ in $(seq 1 200); do
    ctl '{"cmd":"status"}' >/dev/null 2>&1 && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$E2E_TMP/daemon.log" >&2; die "daemon exited at start"; }
    sleep 0.05
  done
  die "daemon did not answer"
}

# Sends request lines (arguments) on one control connection; prints replies.
ctl() {
  "$PY" - "$GRADTRACE_CONTROL" "$@" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for line in sys.argv[2:]:
    f.write(line.encode() + b"\n"); f.flush()
    r = f.readline()
    if not r:
        sys.exit("connection closed without reply")
    sys.stdout.write(r.decode())
PY
}

# Prints the value of a python expression over the JSON reply of one request.
ctl_q() {
  local req=$1 expr=$2
  ctl "$req" | "$PY" -c "import json,sys; r=json.load(sys.stdin); print($expr)"
}

# mount_small SIZE: a private tmpfs of SIZE at $SMALL ($E2E_TMP/small)
# for disk-full tests; needs root (CI is root and never skips). The
# caller's EXIT trap unmounts it.
mount_small() {
  if [ "$(id -u)" -ne 0 ]; then
    [ -n "${CI:-}" ] && die "CI must run this as root"
    skip "needs root to mount a small tmpfs"
  fi
  SMALL=$E2E_TMP/small
  mkdir -p "$SMALL"
  mount -t tmpfs -o size="$1",mode=700 tmpfs "$SMALL" 2>"$E2E_TMP/mount.err" || {
    [ -n "${CI:-}" ] && die "cannot mount tmpfs: $(cat "$E2E_TMP/mount.err")"
    skip "cannot mount tmpfs here: $(cat "$E2E_TMP/mount.err")"; }
}

stop_daemon() {
  [ -n "$DAEMON_PID" ] || return 0
  ctl '{"cmd":"shutdown"}' >/dev/null || true
  wait "$DAEMON_PID"; local rc=$?
  DAEMON_PID=
  return $rc
}

# CPU hogs, one per core, for the loss-accounting tests (users' machines
# are loaded, CONVENTIONS.md): on unless GT_HOG=0. Stopped at exit.
HOGS=
start_hogs() {
  [ "${GT_HOG:-1}" = 0 ] && return 0
  for _ in $(seq 1 "$(nproc)"); do
    (exec yes >/dev/null) & HOGS="$HOGS $!"
  done
  echo "CPU hogs on $(nproc) cores (GT_HOG=0 for none)"
}
stop_hogs() {
  for h in $HOGS; do kill "$h" 2>/dev/null; wait "$h" 2>/dev/null; done
  HOGS=
}

cleanup_daemon() {
  stop_hogs
  if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
  fi
  echo "--- daemon log" >&2; cat "$E2E_TMP/daemon.log" >&2 2>/dev/null || true
}
trap cleanup_daemon EXIT

# Validates trace files: the project's validator when present, else JSON
# parse + object form.
validate() {
  if [ -f "$VALIDATOR" ]; then
    "$PY" "$VALIDATOR" "$@" || die "validator rejected $*"
  else
    for f in "$@"; do
      "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d.get("traceEvents"), list)' "$f" \
        || die "$f is not a valid trace"
    done
  fi
}

# Number of complete "fake_scope" spans over every file of one stem.
count_fake_spans() {
  "$PY" - "$@" <<'PY'
import json, sys
n = 0
for p in sys.argv[1:]:
    for e in json.load(open(p))["traceEvents"]:
        if e.get("name") == "fake_scope" and e.get("ph") == "X":
            n += 1
print(n)
PY
}
