#!/usr/bin/env bash
# Disk full (issue #13, item 4), on a 3 MiB tmpfs: an agent whose output
# hits ENOSPC is not a bad stream; its output pauses (logged, status says
# disk_full, records counted as lost), and when space returns the cut file
# is finished (valid, truncated) and writing resumes in a new file. Every
# file left is valid. Needs root to mount (CI is root and never skips).
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"
mount_small 3m
trap 'cleanup_daemon; umount "$SMALL" 2>/dev/null' EXIT
OUT=$SMALL/out
start_daemon
dd if=/dev/zero of="$SMALL/filler" bs=1k count=2600 2>/dev/null || true

"$FAKE" --chunks 60 --records 2000 --hold-ms 4000 2>/dev/null & big=$!
for _ in $(seq 1 100); do grep -q "disk full writing" "$E2E_TMP/daemon.log" && break; sleep 0.05; done
grep -q "disk full writing" "$E2E_TMP/daemon.log" || die "disk full not reported: $(df -k "$SMALL" | tail -1)"
[ "$(ctl_q '{"cmd":"status"}' 'r["agents"][0]["disk_full"]')" = True ] || die "status does not say disk full"
[ "$(ctl_q '{"cmd":"status"}' 'r["totals"]["bad_streams"]')" = 0 ] || die "disk full counted as a bad stream"

rm -f "$SMALL/filler"
for _ in $(seq 1 60); do grep -q "disk space is back" "$E2E_TMP/daemon.log" && break; sleep 0.1; done
grep -q "disk space is back" "$E2E_TMP/daemon.log" || die "writing did not resume"
wait $big || die "agent failed"
"$FAKE" --chunks 2 --records 100 --rank 3 2>/dev/null || die "agent after the pause failed"
stop_daemon || die "daemon exit $?"
grep "disk" "$E2E_TMP/daemon.log" | sed 's/.*gradtraced: //'
ls -l "$OUT"
validate "$OUT"/*.json
"$PY" - "$OUT" <<'PY' || die "the disk-full stream's files do not say what happened"
import glob, json, os, sys
fs = sorted(glob.glob(os.path.join(sys.argv[1], "fake_agent-pid*.json")))
docs = [json.load(open(f))["gradtrace"] for f in fs]
assert any(d.get("repaired") for d in docs), "no finished cut file"
lost = max(d["lost"].get("disk_full_records", 0) for d in docs)
assert lost > 0, "records lost while full not counted"
print(f"{len(fs)} files of the paused stream, {lost} records counted as lost while full")
PY
ls "$OUT"/fake_agent-rank3-pid*.json >/dev/null || die "no trace for the agent after the pause"
echo ok
