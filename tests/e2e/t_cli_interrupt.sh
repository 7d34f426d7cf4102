#!/usr/bin/env bash
# Ctrl-C under `gradtrace record`: a SIGINT sent to record's process group
# (what the terminal's ^C does) reaches the command, not the private
# daemon; record waits for the command, drains its stream and lists the
# file; the trace is valid and holds the steps run before the interrupt,
# and it is whole (issue 24, item 6): CPython kills itself with SIGINT
# after a KeyboardInterrupt, past the agent's exit handlers, so the
# package ends the stream first; the trace is not marked truncated and
# `report` does not call its numbers lower bounds (torch 1.13 and, when
# its venv exists, torch 2.x).
# A second interrupt stops the wait for a command that ignores SIGINT,
# and the files so far are still listed.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/gradtraced" "$B/libgradtrace.so"
PY=${PYTHON:-/usr/bin/python3}
. "$ROOT/tests/e2e/torch/lib.sh"
torch_require "$PY"
command -v setsid >/dev/null || skip "no setsid"
GT=$B/gradtrace
cd "$E2E_TMP"
cat >loop.py <<'PYEOF'
import signal, sys, time
import torch
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                        torch.nn.Linear(8, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for i in range(1, 100000):
    opt.zero_grad()
    m(torch.randn(4, 8)).sum().backward()
    opt.step()
    print("step", i, flush=True)
    time.sleep(0.02)
PYEOF

# run_record NAME MODE N: record in a new session (its own process group),
# then N SIGINTs to the whole group once a few steps are done.
run_record() {
  local name=$1 mode=$2 n=$3
  setsid bash -c 'echo $$ >"$0.pgid"; exec "$@"' "$name" \
      "$GT" record -o "$name" -- "${RPY:-$PY}" -u loop.py "$mode" \
      >"$name.stdout" 2>"$name.stderr" &
  local job=$!
  for _ in $(seq 1 300); do
    grep -q "^step 5$" "$name.stdout" 2>/dev/null && break; sleep 0.05
  done
  grep -q "^step 5$" "$name.stdout" || die "$name: no steps: $(cat "$name.stderr")"
  local pg; pg=$(cat "$name.pgid")
  for _ in $(seq 1 "$n"); do kill -INT -- "-$pg"; sleep 0.3; done
  for _ in $(seq 1 200); do kill -0 "$job" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$job" 2>/dev/null && die "$name: record still running"
  wait "$job"
}

run_record once plain 1
rc=$?
[ "$rc" = 130 ] || die "once: exit $rc, want 130 (128+SIGINT): $(cat once.stderr)"
grep -q "no daemon" once.stderr && die "the private daemon died: $(cat once.stderr)"
grep -q "gradtrace: 1 trace file:" once.stderr || die "no file list: $(cat once.stderr)"
f=$(sed -n 's/^  \(.*\.json\)$/\1/p' once.stderr)
[ -f "$f" ] || die "listed file missing: $f"
validate "$f"
last=$(sed -n 's/^step \([0-9]*\)$/\1/p' once.stdout | tail -1)
"$PY" - "$f" "$last" <<'PYEOF' || die "steps missing from the trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
steps = {e["args"]["step"] for e in ev if e.get("name", "").startswith("ProfilerStep#")}
last = int(sys.argv[2])
# ProfilerStep#N spans step N to N+1: the one after the last printed
# step is the one the interrupt cut.
want = set(range(1, last))
if not want <= steps:
    sys.exit("steps %s missing (last printed %d)" % (sorted(want - steps)[:5], last))
PYEOF

# whole NAME: the interrupted run's trace $f is whole.
whole() {
  "$PY" - "$f" <<'PYEOF' || die "$1: the trace of an interrupted run is not whole"
import json, sys
st = json.load(open(sys.argv[1]))["gradtrace"]["stream"]
print("stream:", st)
if st["truncated"] or not st["goodbye"]:
    sys.exit("truncated %s, goodbye %s" % (st["truncated"], st["goodbye"]))
PYEOF
  "$GT" report "$f" >"$1.report" 2>&1 || die "$1: report failed: $(cat "$1.report")"
  grep -q "lower bound" "$1.report" && die "$1: report: $(grep "lower bound" "$1.report")"
  return 0
}
whole once

VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
if [ -x "$VENV/bin/python" ]; then
  RPY=$VENV/bin/python run_record once2 plain 1
  rc=$?
  [ "$rc" = 130 ] || die "once2: exit $rc, want 130: $(cat once2.stderr)"
  f=$(sed -n 's/^  \(.*\.json\)$/\1/p' once2.stderr)
  [ -f "$f" ] || die "once2: listed file missing: $f"
  validate "$f"
  whole once2
fi

run_record twice stubborn 2
grep -q "interrupted again" twice.stderr || die "second interrupt: $(cat twice.stderr)"
grep -q "gradtrace: 1 trace file:" twice.stderr || die "twice: no file list: $(cat twice.stderr)"
f=$(sed -n 's/^  \(.*\.json\)$/\1/p' twice.stderr)
validate "$f"
# The command ignored both interrupts and outlived record: end it.
pid=${f##*-pid}; pid=${pid%%.*}
kill "$pid" 2>/dev/null
echo ok
