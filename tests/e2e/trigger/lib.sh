# Shared by tests/e2e/t_trigger_*.sh: runs tests/e2e/trigger/model48.py
# with the agent preloaded and checks capture-window files with
# tests/e2e/trigger/check_window.py and tests/tools/validate_trace.py.
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
BUILD=${BUILD:-build}
case $BUILD in /*) B=$BUILD ;; *) B=$ROOT/$BUILD ;; esac
E2E_TMP=${E2E_TMP:-$(mktemp -d /tmp/gt-e2e.XXXXXX)}
PY=${PYTHON:-/usr/bin/python3}
AGENT=$B/libgradtrace.so
TRIG=$ROOT/tests/e2e/trigger
MODEL=$TRIG/model48.py
CHECK="$PY $TRIG/check_window.py"
VALIDATE="$PY $ROOT/tests/tools/validate_trace.py"

die() { echo "FAIL: $*" >&2; exit 1; }

trig_require() {
  for f in "$AGENT" "$B/gradtrace" "$B/gradtraced"; do
    [ -e "$f" ] || die "not built: $f"
  done
  "$PY" -c "import torch" 2>/dev/null || { echo "skip: $PY cannot import torch"; exit 77; }
}

# file_run NAME SPEC [model args...]: a run capturing into $E2E_TMP/NAME.gtr
# (capture off, SPEC armed at start; SPEC "" = full capture), converted to
# $E2E_TMP/NAME.json (+ window files). The program's stdout must be empty.
file_run() {
  local name=$1 spec=$2; shift 2
  local capture=0
  [ -z "$spec" ] && capture=1
  rm -f "$E2E_TMP/$name".* "$E2E_TMP/$name"-w*
  env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/$name.gtr" \
      GRADTRACE_CAPTURE=$capture GRADTRACE_TRIGGER="$spec" \
      PYTHONPATH="$ROOT/python" "$PY" "$MODEL" "$@" \
      >"$E2E_TMP/$name.stdout" 2>"$E2E_TMP/$name.stderr" \
    || { cat "$E2E_TMP/$name.stderr" >&2; die "$name: training failed"; }
  [ -s "$E2E_TMP/$name.stdout" ] && die "$name: output on the program's stdout"
  "$B/gradtrace" convert -q "$E2E_TMP/$name.gtr" -o "$E2E_TMP/$name.json" \
    || die "$name: convert failed"
}

# window_files NAME: the window files of a file_run, sorted by window id.
window_files() {
  ls "$E2E_TMP/$1"-w*.json 2>/dev/null | sort -V
}
