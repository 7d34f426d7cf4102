#!/usr/bin/env bash
# Another user cannot receive a job's stream or speak for the daemon
# (issue #13, item 10). A rogue "daemon" run by uid 65534 (tests/tools/
# rogue_daemon.py) counts every byte it gets and forges status replies:
#  A. in a directory uid 65534 made (as it could make the default
#     /tmp/gradtrace-<uid> before the user's daemon): the agent sends it
#     nothing and the CLI refuses it, naming the owner;
#  B. in our own 0700 directory but listening as uid 65534 (SO_PEERCRED on
#     the connecting side): the same, naming the peer uid;
#  C. the default directory /tmp/gradtrace-65533 pre-created by 65534,
#     with the job running as uid 65533 and no socket variables set.
# Needs root (setpriv); CI runs as root, so CI never skips it.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/progs/agent_threads"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
  [ -n "${CI:-}" ] && die "CI must run this as root with setpriv"
  skip "needs root and setpriv to act as another uid"
fi
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
AS_VICTIM=(setpriv --reuid=65533 --regid=65533 --clear-groups)
ROGUE=$ROOT/tests/tools/rogue_daemon.py
"${AS_NOBODY[@]}" test -r "$ROGUE" -a -x "$B/progs/agent_threads" || skip "build not readable by other uids"
ROGUE_PID=
stop_rogue() { [ -n "$ROGUE_PID" ] && kill "$ROGUE_PID" 2>/dev/null; wait "$ROGUE_PID" 2>/dev/null; ROGUE_PID=; }
ATK=$(mktemp -d /tmp/gt-rogue.XXXXXX)
DEF=/tmp/gradtrace-65533
made_def=
trap 'stop_rogue; rm -rf "$ATK"; [ -n "$made_def" ] && rm -rf "$DEF"; cleanup_daemon' EXIT

wait_rogue() {
  for _ in $(seq 1 100); do [ -S "$1/control.sock" ] && [ -f "$2" ] && return 0; sleep 0.05; done
  die "rogue daemon did not start"
}

# $1 dir, $2 byte-count file, $3 what the refusal must name; the rest is
# how to run the victim's programs.
victim_refuses() {
  local dir=$1 got=$2 want=$3; shift 3
  GRADTRACE_LOG=1 "$@" env LD_PRELOAD="$B/libgradtrace.so" "$B/progs/agent_threads" 2 2000 \
    --then-sleep 300 2>"$E2E_TMP/agent.err" || die "the job failed: $(cat "$E2E_TMP/agent.err")"
  grep -q "$want" "$E2E_TMP/agent.err" || die "agent did not say why it refused ($want): $(cat "$E2E_TMP/agent.err")"
  if "$@" "$B/gradtrace" status >"$E2E_TMP/status.out" 2>"$E2E_TMP/status.err"; then
    die "CLI accepted the rogue daemon: $(cat "$E2E_TMP/status.out")"
  fi
  grep -q "$want" "$E2E_TMP/status.err" || die "CLI did not say why ($want): $(cat "$E2E_TMP/status.err")"
  grep -q forged "$E2E_TMP/status.out" && die "CLI printed a forged status"
  sleep 0.3
  [ "$(cat "$got")" = "" ] || [ "$(cat "$got")" = 0 ] || die "rogue daemon received $(cat "$got") bytes"
  echo "refused ($want), rogue got 0 bytes"
}

echo "== A: directory made by another user"
chown 65534:65534 "$ATK"; chmod 700 "$ATK"
"${AS_NOBODY[@]}" "$PY" "$ROGUE" "$ATK" "$ATK/got" & ROGUE_PID=$!
wait_rogue "$ATK" "$ATK/got"
export GRADTRACE_SOCKET=$ATK/agent.sock GRADTRACE_CONTROL=$ATK/control.sock
victim_refuses "$ATK" "$ATK/got" "owned by uid 65534"
stop_rogue

echo "== B: our directory, another user's listener"
OWN=$E2E_TMP/own; mkdir -m 700 "$OWN"
"$PY" "$ROGUE" "$OWN" "$E2E_TMP/got" --drop-to 65534 & ROGUE_PID=$!
wait_rogue "$OWN" "$E2E_TMP/got"
export GRADTRACE_SOCKET=$OWN/agent.sock GRADTRACE_CONTROL=$OWN/control.sock
victim_refuses "$OWN" "$E2E_TMP/got" "peer uid 65534"
stop_rogue

echo "== C: the default directory, pre-created"
if [ -e "$DEF" ]; then
  echo "$DEF exists already; part C not run"
else
  made_def=1
  "${AS_NOBODY[@]}" mkdir -m 755 "$DEF"
  : >"$ATK/got"; chmod 666 "$ATK/got"
  "${AS_NOBODY[@]}" "$PY" "$ROGUE" "$DEF" "$ATK/got" & ROGUE_PID=$!
  wait_rogue "$DEF" "$ATK/got"
  unset GRADTRACE_SOCKET GRADTRACE_CONTROL XDG_RUNTIME_DIR
  victim_refuses "$DEF" "$ATK/got" "owned by uid 65534" "${AS_VICTIM[@]}"
  stop_rogue
fi
echo ok
