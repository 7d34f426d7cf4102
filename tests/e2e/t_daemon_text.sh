#!/usr/bin/env bash
# Agent text is cleaned before any output (issue #13, item 6): a command
# line with invalid UTF-8 and C1 controls (U+009B is a one-byte CSI for
# some terminals) reaches `status --json` only as valid UTF-8 JSON without
# control characters, and neither the terminal nor the log sees them.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$B/gradtrace" "$FAKE"
start_daemon
EVIL=$'evil\xc2\x9b31m\xff\xfe\xc0\xafx\xed\xa0\x80\xc2\x85y\x1b]0;t\x07'
"$FAKE" --cmd "$EVIL" --chunks 2 --records 10 --hold-ms 1500 2>/dev/null & live=$!
"$FAKE" --cmd "$EVIL" --chunks 1 --records 10 2>/dev/null || die "agent failed"
sleep 0.3
for i in $(seq 1 30); do
  ctl '{"cmd":"status"}' >>"$E2E_TMP/replies"
done
"$B/gradtrace" status --json >"$E2E_TMP/status.json" || die "status --json failed"
"$B/gradtrace" status >"$E2E_TMP/status.txt" || die "status failed"
wait $live || die "live agent failed"
"$PY" - "$E2E_TMP/replies" "$E2E_TMP/status.json" "$E2E_TMP/status.txt" "$E2E_TMP/daemon.log" <<'PY' || die "agent bytes reached an output"
import json, re, sys
ctl = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
def check_str(s, where):
    assert not ctl.search(s), f"control character in {where}: {s!r}"
def walk(o, where):
    if isinstance(o, str): check_str(o, where)
    elif isinstance(o, list): [walk(x, where) for x in o]
    elif isinstance(o, dict): [walk(k, where) or walk(v, where) for k, v in o.items()]
replies = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
assert len(replies) == 30, len(replies)
seen = 0
for r in replies:
    d = json.loads(r.decode("utf-8"))   # strict: invalid UTF-8 raises
    walk(d, "status reply")
    seen += "evil" in r.decode()
assert seen == 30, f"the agent is missing from {30 - seen} replies"
walk(json.loads(open(sys.argv[2], "rb").read().decode("utf-8")), "status --json")
for p in sys.argv[3:]:
    t = open(p, "rb").read().decode("utf-8")
    for line in t.split("\n"):
        check_str(line.replace("\t", " "), p)
print("30 replies, status --json, status and the log: valid UTF-8, no controls")
PY
grep -q 'evil?31m' "$E2E_TMP/status.txt" || die "command not shown cleaned: $(cat "$E2E_TMP/status.txt")"
stop_daemon || die "daemon exit $?"
validate "$OUT"/*.json
echo ok
