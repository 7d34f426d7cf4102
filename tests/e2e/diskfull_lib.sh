# Shared by the disk-full scripts that account per thread
# (t_daemon_diskfull_paced, t_daemon_diskfull_end): a tmpfs of SIZE for
# the output, a real agent (agent_paced, 4 threads) streaming into it, and
# helpers that wait on what the daemon says (status, the files), never on
# time alone. Sourced after daemon_lib.sh. With GT_HOG=1, a CPU hog runs
# on both cores meanwhile.
need "$B/gradtraced" "$B/progs/agent_paced"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
# 32 MiB: the agent (burst 5, ~1.5 MB of trace a second) never fills it
# by itself; only the filler does, when the script says so.
mount_small 32m
hogs=()
trap 'cleanup_daemon; [ -n "${paced:-}" ] && kill "$paced" 2>/dev/null; for h in "${hogs[@]}"; do kill "$h" 2>/dev/null; done; umount "$SMALL" 2>/dev/null' EXIT
if [ "${GT_HOG:-0}" = 1 ]; then
  for _ in 1 2; do (while :; do :; done) & hogs+=($!); done
fi
OUT=$SMALL/out

# Waits (at most ~60 s, however loaded) until the python expression over
# the status reply is true. $1: what, for the failure; $2: expression.
wait_status() {
  for _ in $(seq 1 600); do
    [ "$(ctl_q '{"cmd":"status"}' "$2" 2>/dev/null)" = True ] && return 0
    sleep 0.1
  done
  die "$1: status never said so: $(ctl '{"cmd":"status"}')"
}

# Starts agent_paced (4 threads, bursts of 5 a millisecond; $1: a layer
# the first thread calls) as $paced.
start_paced() {
  LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_paced" 4 3600000 5 0 0 "$@" \
    >"$E2E_TMP/paced.txt" 2>"$E2E_TMP/paced.err" & paced=$!
  wait_status "agent connected" "any(a['pid'] == $paced for a in r['agents'])"
}

# Waits until the agent's newest file (of its windows with $1 = -w)
# holds an ACK mark after its header (a tab: the header has one), so a
# cut keeps acknowledged events.
wait_mark() {
  local f
  for _ in $(seq 1 600); do
    f=$(ls "$OUT"/agent_paced-pid$paced${1:-.}*.json 2>/dev/null | sort -V | tail -1)
    [ -n "$f" ] && [ "$(tr -cd '\t' <"$f" | wc -c)" -ge 2 ] && return 0
    sleep 0.1
  done
  die "no ACK mark in $f"
}

# Fills the tmpfs; waits until the daemon says the agent's output paused.
fill() {
  dd if=/dev/zero of="$SMALL/filler" bs=64k 2>/dev/null || true
  wait_status "disk full" "any(a['pid'] == $paced and a['disk_full'] for a in r['agents'])"
}

free_space() { rm -f "$SMALL/filler"; }

# Moves the agent's cut files that the daemon finished (repaired: never
# written again) off the tmpfs, so that many cycles fit in it; the
# accounting reads them where they went.
move_finished() {
  mkdir -p "$E2E_TMP/moved"
  for f in "$OUT"/agent_paced-pid$paced*.json; do
    tail -c 4096 "$f" | grep -q '"repaired":true' && mv "$f" "$E2E_TMP/moved/"
  done
  return 0
}

# Per-thread accounting over every file of the agent, kept for a look
# after a failure (the tmpfs goes with the script).
check_paced() {
  local moved=()
  [ -d "$E2E_TMP/moved" ] && moved=("$E2E_TMP"/moved/*.json)
  validate "$OUT"/*.json "${moved[@]}"
  cp -r "$OUT" "$E2E_TMP/kept"
  "$PY" "$ROOT/tests/tools/paced_check.py" "$E2E_TMP/paced.txt" "$OUT"/agent_paced-pid$paced*.json "${moved[@]}" \
    || die "records neither in the trace nor counted lost, or counted twice"
}
