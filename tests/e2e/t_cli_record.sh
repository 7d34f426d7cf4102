#!/usr/bin/env bash
# `gradtrace record -- CMD` with no daemon running: CMD's stdout and exit
# status pass through untouched, the traces of CMD and its children are
# printed on stderr and validate, and no daemon or runtime directory is
# left behind. Then with a running daemon: record uses it.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/gradtraced" "$FAKE"
GT=$B/gradtrace
cd "$E2E_TMP"

# Parts 1-3 and 5 check record's mechanics with fake agents, which connect
# on their own, so record preloads a harmless library instead of the agent
# (GRADTRACE_AGENT); part 4 runs the real agent when it is built.
REAL=0
[ -f "$B/libgradtrace.so" ] && [ -x "$B/progs/agent_threads" ] && REAL=1
export GRADTRACE_AGENT=$(ldconfig -p | awk '/libm\.so\.6 /{print $NF; exit}')
# Record must find no daemon: the sockets point into an empty directory.
export GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock GRADTRACE_CONTROL=$E2E_TMP/none/control.sock
before=$(ls -d /tmp/gradtrace-rec-* 2>/dev/null | sort)

# 1. A shell with two agent children; exit status 3; stdout preserved.
"$GT" record -o traces -- sh -c "
  \"$FAKE\" --chunks 3 --records 100 & \"$FAKE\" --chunks 2 --records 10 --rank 1
  wait; echo cmd-stdout; exit 3" >"$E2E_TMP/stdout" 2>"$E2E_TMP/stderr"
rc=$?
cat "$E2E_TMP/stderr"
[ $rc -eq 3 ] || die "record exit status $rc, want the command's 3"
[ "$(cat "$E2E_TMP/stdout")" = cmd-stdout ] || die "stdout changed: $(cat "$E2E_TMP/stdout")"
grep -q "2 trace files:" "$E2E_TMP/stderr" || die "record did not list the two traces"
listed=$(grep "^  /" "$E2E_TMP/stderr" | sed 's/^  //')
for f in $listed; do [ -f "$f" ] || die "listed file missing: $f"; done
validate $listed
[ "$(count_fake_spans $listed)" -eq 160 ] || die "traces incomplete: $(count_fake_spans $listed) of 160 spans"
case $listed in *"$E2E_TMP/traces/"*) ;; *) die "traces not under -o: $listed" ;; esac

# The list starts on its own line even when the command's last message
# has no newline (stderr a file here: exactly one newline between them).
"$GT" record -o glued -- sh -c "\"$FAKE\" --chunks 1 --records 5; printf 'no newline' >&2" \
  2>"$E2E_TMP/glued.err" || die "record failed: $(cat "$E2E_TMP/glued.err")"
grep -qx "no newline" "$E2E_TMP/glued.err" || die "list glued to the message: $(cat "$E2E_TMP/glued.err")"
grep -qx "gradtrace: 1 trace file:" "$E2E_TMP/glued.err" || die "no list: $(cat "$E2E_TMP/glued.err")"
grep -q "^$" "$E2E_TMP/glued.err" && die "blank line before the list: $(cat "$E2E_TMP/glued.err")"

# Rotation: a 1 MB limit splits one agent's trace; every part is listed,
# valid, and together complete.
"$GT" record -o rot --max-file-mb 1 -- "$FAKE" --chunks 50 --records 4000 2>"$E2E_TMP/rot.err" \
  || die "record with rotation failed: $(cat "$E2E_TMP/rot.err")"
rot=$(grep "^  /" "$E2E_TMP/rot.err" | sed 's/^  //')
[ "$(echo "$rot" | wc -l)" -ge 3 ] || die "expected rotated files, got: $rot"
validate $rot
[ "$(count_fake_spans $rot)" -eq 100000 ] || die "rotated traces incomplete: $(count_fake_spans $rot) of 100000"
"$GT" record --max-file-mb zero -- true 2>"$E2E_TMP/e" && die "bad --max-file-mb accepted"

# 2. Nothing left behind.
pgrep -f "gradtraced --foreground --output-dir traces" && die "private daemon still running"
after=$(ls -d /tmp/gradtrace-rec-* 2>/dev/null | sort)
[ "$before" = "$after" ] || die "runtime directory left behind: $(comm -13 <(echo "$before") <(echo "$after"))"

# 3. Exit statuses: signal, missing command, usage.
"$GT" record -o traces -- sh -c 'kill -TERM $$' 2>/dev/null; rc=$?
[ $rc -eq 143 ] || die "killed command: exit $rc, want 143"
"$GT" record -o traces -- /nonexistent/cmd 2>"$E2E_TMP/e"; rc=$?
[ $rc -eq 127 ] || die "missing command: exit $rc, want 127"
"$GT" record --trigger layer=x,phase=sideways -- true 2>"$E2E_TMP/e"; rc=$?
[ $rc -eq 2 ] || die "bad trigger: exit $rc, want 2"
grep -q "phase" "$E2E_TMP/e" || die "bad trigger error does not name the field: $(cat "$E2E_TMP/e")"
"$GT" record 2>/dev/null; [ $? -eq 2 ] || die "record without a command must exit 2"
"$GT" record --help | grep -q "usage: gradtrace record" || die "record --help"

# 4. The real agent, preloaded by record (LD_PRELOAD built by record).
if [ $REAL -eq 1 ]; then
  env -u GRADTRACE_AGENT "$GT" record -o real -- "$B/progs/agent_threads" 2 5000 >"$E2E_TMP/real.out" 2>"$E2E_TMP/real.err" \
    || die "record of agent_threads failed: $(cat "$E2E_TMP/real.err")"
  [ ! -s "$E2E_TMP/real.out" ] || die "stdout not clean: $(head -c 200 "$E2E_TMP/real.out")"
  rf=$(grep "^  /" "$E2E_TMP/real.err" | sed 's/^  //')
  [ -n "$rf" ] || die "no trace listed for agent_threads: $(cat "$E2E_TMP/real.err")"
  validate $rf
  echo "real agent trace: $rf"
fi

# 5. With a daemon running, record uses it (files land in its directory)
# and leaves it running.
export GRADTRACE_SOCKET=$E2E_TMP/agent.sock GRADTRACE_CONTROL=$E2E_TMP/control.sock
start_daemon
"$GT" record -- "$FAKE" --chunks 1 --records 20 2>"$E2E_TMP/shared.err" || die "record with daemon failed"
grep -q "^  $OUT/fake_agent-pid" "$E2E_TMP/shared.err" || die "shared daemon not used: $(cat "$E2E_TMP/shared.err")"
kill -0 "$DAEMON_PID" || die "record stopped the shared daemon"
stop_daemon || die "daemon exit $?"

# No trace: record says why, and blames the agent only when no process of
# the command loaded it (a static program: ldconfig is static-pie on
# Debian, checked with file(1) where it is there).
no_trace() { # WANT CMD...
  local want=$1; shift
  env -u GRADTRACE_AGENT "$GT" record -o "$E2E_TMP/none" -- "$@" >/dev/null 2>"$E2E_TMP/none.err"
  grep -q "^gradtrace: no trace written: $want" "$E2E_TMP/none.err" ||
    die "record -- $*: want '$want': $(cat "$E2E_TMP/none.err")"
}
no_trace "the agent ran but recorded nothing" /bin/true
no_trace "the command ended before anything was recorded" /bin/false
no_trace "the command could not be run" "$E2E_TMP/no-such-command"
if ldd /sbin/ldconfig 2>&1 | grep -qiE 'statically|not a dynamic'; then
  no_trace "no process of the command loaded the agent" /sbin/ldconfig -p
fi
echo ok
