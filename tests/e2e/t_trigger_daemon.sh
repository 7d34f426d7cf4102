#!/usr/bin/env bash
# Capture windows under a daemon (Debian torch, CPU): a trigger naming a
# layer that never runs is sent at connect and stays "armed" for that
# agent (status --json and the table), leaving no file; `gradtrace trigger
# ...,iteration=next` armed while the 48-block model trains yields one
# window at an iteration after the arming, listed with its file in status
# and collect; malformed triggers on the control socket get errors naming
# the field and leave the daemon working. Every trace is validated.
set -u
. "$(dirname "$0")/trigger/lib.sh"
trig_require
. "$(dirname "$0")/daemon_lib.sh"
PY=${PYTHON:-/usr/bin/python3}
GT=$B/gradtrace

start_daemon
"$GT" trigger layer=nosuch.layer,phase=backward,iteration=0 >/dev/null || die "arming nosuch"

prog=$E2E_TMP/progress
env LD_PRELOAD="$AGENT" GRADTRACE_CAPTURE=0 PYTHONPATH="$ROOT/python" \
    "$PY" "$MODEL" --iters 60 --sleep 0.05 --progress "$prog" \
    >"$E2E_TMP/train.stdout" 2>"$E2E_TMP/train.stderr" &
train=$!
for _ in $(seq 1 600); do
  [ "$(cat "$prog" 2>/dev/null || echo 0)" -ge 3 ] && break
  kill -0 $train 2>/dev/null || die "training ended early: $(cat "$E2E_TMP/train.stderr")"
  sleep 0.05
done
armed_after=$(cat "$prog")
"$GT" trigger layer=blocks.17,phase=backward,iteration=next >"$E2E_TMP/t2" || die "arming next"
grep -q "iteration=next" "$E2E_TMP/t2" || die "trigger reply: $(cat "$E2E_TMP/t2")"

# Malformed triggers over the control socket: one error each, naming the
# field; the connection and the daemon keep working.
ctl '{"cmd":"trigger","layer":"x","phase":"sideways"}' \
    '{"cmd":"trigger","layer":"x","count":0}' \
    '{"cmd":"trigger","phase":"forward"}' \
    '{"cmd":"trigger","layer":"x","iteration":-4}' \
    '{"cmd":"trigger","layer":"x","ranks":"zero"}' \
    '{"cmd":"trigger","layer":"x","colour":"red"}' \
    '{"cmd":"trigger","layer":7}' \
    '{"cmd":"status"}' >"$E2E_TMP/bad" || die "control connection dropped on bad triggers"
"$PY" - "$E2E_TMP/bad" <<'PY' || die "malformed trigger replies: $(cat "$E2E_TMP/bad")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
fields = ["phase", "count", "layer", "iteration", "ranks", "colour", "layer"]
assert len(lines) == len(fields) + 1, lines
for r, f in zip(lines, fields):
    assert r["ok"] is False and f in r["error"], (f, r)
assert lines[-1]["ok"] is True and len(lines[-1]["triggers"]) == 2, lines[-1]
PY

# Wait until the blocks.17 window is done for this agent.
status_q() { "$GT" status --json | "$PY" -c "import json,sys; r=json.load(sys.stdin); $1"; }
for _ in $(seq 1 400); do
  status_q "a=[a for a in r['agents'] if a['pid']==$train]; sys.exit(not(a and any(t['state']=='fired' for t in a[0]['triggers'])))" && break
  kill -0 $train 2>/dev/null || break
  sleep 0.05
done
"$GT" status --json >"$E2E_TMP/st.json" || die "status --json"
"$GT" status >"$E2E_TMP/st.txt" || die "status"
cat "$E2E_TMP/st.txt"
"$PY" - "$E2E_TMP/st.json" $train $armed_after <<'PY' || die "status while training: see above"
import json, os, sys
r = json.load(open(sys.argv[1])); pid = int(sys.argv[2]); armed_after = int(sys.argv[3])
a = [a for a in r["agents"] if a["pid"] == pid]
assert a, "training agent not in status"
a = a[0]
t = {x["spec"].split(",")[0]: x for x in a["triggers"]}
assert t["layer=nosuch.layer"]["state"] == "armed", t
assert t["layer=nosuch.layer"]["windows"] == 0, t
assert t["layer=blocks.17"]["state"] == "fired", t
w = a["fired"]
assert len(w) == 1, w
w = w[0]
assert w["spec"] == t["layer=blocks.17"]["spec"] and w["state"] == "done", w
assert w["iteration"] >= armed_after + 1, ("window before the arming", w, armed_after)
assert os.path.exists(w["file"]) and w["file"] in a["files"], w
assert "nosuch" not in " ".join(a["files"])
assert [x["spec"] for x in r["triggers"]][0].startswith("layer=nosuch.layer"), r["triggers"]
print("window at iteration %d, armed after %d iterations" % (w["iteration"], armed_after))
PY
grep -Eq "trigger #1 layer=nosuch.layer.*: armed" "$E2E_TMP/st.txt" || die "status table: nosuch not armed"
grep -Eq "window 1 iteration [0-9]+ blocks.17 backward: done, .*-w1-blocks.17-backward-it[0-9]+(\.pt\.trace)?\.json" "$E2E_TMP/st.txt" \
  || die "status table lacks the fired window"

wait $train || die "training failed: $(cat "$E2E_TMP/train.stderr")"
[ -s "$E2E_TMP/train.stdout" ] && die "output on the program's stdout"
# Finished: the window file is all this agent left (capture was off
# outside it), and the never-run trigger is still armed.
for _ in $(seq 1 100); do
  status_q "sys.exit(not r['finished'])" && break; sleep 0.05
done
"$GT" status --json >"$E2E_TMP/fin.json" || die "status after the run"
files=$("$PY" - "$E2E_TMP/fin.json" $train <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); pid = int(sys.argv[2])
d = [d for d in r["finished"] if d["pid"] == pid][0]
assert len(d["files"]) == 1 and "-w1-blocks.17-backward-it" in d["files"][0], d["files"]
t = {x["spec"].split(",")[0]: x["state"] for x in d["triggers"]}
assert t == {"layer=nosuch.layer": "armed", "layer=blocks.17": "fired"}, t
print(d["files"][0])
PY
) || die "finished agent in status"
[ "$(ls "$OUT" | wc -l)" = 1 ] || die "unexpected files in the output dir: $(ls "$OUT")"
it=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["gradtrace"]["window"]["iteration"])' "$files")
$CHECK backward --layer blocks.17 --iteration "$it" "$files" || die "daemon window contents"
$VALIDATE "$files" || die "daemon window invalid"
[ "$(ctl_q '{"cmd":"collect","pid":'$train',"since_ns":0}' 'r["files"]')" = "['$files']" ] \
  || die "collect does not list the window file"
stop_daemon || die "daemon exit $?"
echo ok
