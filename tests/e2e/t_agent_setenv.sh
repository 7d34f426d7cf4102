#!/usr/bin/env bash
# The agent never reads the environment after it starts threads: the
# application's setenv (Python's os.environ[...] = ...) may move and free
# the environ array while another thread walks it. Two checks:
#  - by construction: of the agent's objects only config.o refers to
#    getenv, secure_getenv or environ (the constructor's one reading, and a
#    fork child's, alone in its process);
#  - in a job: tests/progs/agent_setenv churns its environment on one
#    thread while two others arm triggers through the agent (the path a
#    daemon's trigger takes on the streamer thread, which called
#    getenv("RANK") each time and crashed 9 of 10 such 1 s runs); every
#    run must exit 0.
set -u
. "$(dirname "$0")/daemon_lib.sh"
AGENT=$B/libgradtrace.so
PROG=$B/progs/agent_setenv
need "$PROG"
[ -e "$AGENT" ] || skip "missing $AGENT (build first)"

objs=$(ls "$B"/pic/agent/*.o 2>/dev/null)
[ -n "$objs" ] || die "no agent objects under $B/pic/agent"
for o in $objs; do
  [ "$(basename "$o")" = config.o ] && continue
  refs=$(nm -u "$o" | awk '{print $2}' | grep -xE 'getenv|secure_getenv|__environ|environ|__libc_getenv' || true)
  [ -z "$refs" ] || die "$(basename "$o") reads the environment ($refs): only agent/config.c may"
done

runs=${GT_SETENV_RUNS:-5}
for i in $(seq 1 "$runs"); do
  GRADTRACE_FILE=$E2E_TMP/setenv.%p.gtr LD_PRELOAD=$AGENT "$PROG" 1 \
    2>"$E2E_TMP/run$i.err"
  rc=$?
  [ $rc -eq 0 ] || die "run $i of $runs exited $rc with the agent: $(tail -n 3 "$E2E_TMP/run$i.err")"
done
echo "ok: $runs setenv-churning runs with the agent exited 0"
