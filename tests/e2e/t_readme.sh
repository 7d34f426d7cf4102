#!/usr/bin/env bash
# The README's commands run as written: every ```sh block marked
# <!-- readme-test --> is run, in order, in one directory holding the
# bundled example as train.py, with the installed gradtrace (make install
# into a private prefix, $PREFIX) first on PATH and `python3` the
# interpreter with torch. Each block must exit 0 and leave only valid
# traces; the quick start must leave a report table, the no-daemon
# trigger recipe a window file (the README's recipe wrote nothing when it
# lacked PYTHONPATH: no layers, so no window).
set -u
. "$(dirname "$0")/daemon_lib.sh"
. "$ROOT/tests/e2e/torch/lib.sh"
torch_require "${PYTHON:-/usr/bin/python3}"
T=$E2E_TMP
export PREFIX=$T/prefix
(cd "$ROOT" && make -s install PREFIX="$PREFIX" BUILD="$BUILD") >"$T/install.log" 2>&1 ||
  die "make install: $(tail -5 "$T/install.log")"
mkdir -p "$T/bin" "$T/run"
ln -s "${PYTHON:-/usr/bin/python3}" "$T/bin/python3"
export PATH=$PREFIX/bin:$T/bin:$PATH
cp "$ROOT/examples/train_small.py" "$T/run/train.py"
unset GRADTRACE_SOCKET GRADTRACE_CONTROL GRADTRACE_FILE GRADTRACE_LOG
export XDG_RUNTIME_DIR=$T/xdg   # no daemon of the user's is found
mkdir -m 700 "$XDG_RUNTIME_DIR"

python3 - "$ROOT/README.md" "$T" <<'PY' || die "no readme-test block found"
import sys
lines = open(sys.argv[1]).read().split("\n")
n = 0
for i, l in enumerate(lines):
    if l.strip() != "<!-- readme-test -->":
        continue
    assert lines[i + 1].startswith("```sh"), lines[i + 1]
    j = lines.index("```", i + 2)
    n += 1
    open("%s/block%d.sh" % (sys.argv[2], n), "w").write("\n".join(lines[i + 2:j]) + "\n")
sys.exit(0 if n else 1)
PY
cd "$T/run"
for b in "$T"/block*.sh; do
  echo "== $(basename "$b")"; cat "$b"
  bash -euo pipefail "$b" >"$b.out" 2>"$b.err" || die "$(basename "$b") failed: $(tail -5 "$b.err")"
  cat "$b.out" "$b.err"
done
grep -q '^total ' "$T/block1.sh.out" || die "quick start: no report table"
ls gradtrace-traces/train-pid*.pt.trace.json >/dev/null || die "quick start: no trace"
# Capture off outside the window: the window's file, and no main trace.
ls run-w1-blocks.1-backward-it2.pt.trace.json >/dev/null 2>&1 ||
  die "trigger recipe: no window file, got: $(ls)"
"$PY" "$VALIDATOR" gradtrace-traces/*.json ./*.json >/dev/null || die "invalid traces"
echo ok
