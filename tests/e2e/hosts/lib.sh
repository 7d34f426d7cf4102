# One machine playing several hosts, for the multi-"host" tests
# (t_hosts_*.sh). Sourced. Each "host" h runs its rank under
#   unshare --user --map-root-user --time --monotonic=MONO_h
# (its own CLOCK_MONOTONIC, shifted by whole seconds) with libfaketime
# shifting its CLOCK_REALTIME by REAL_h seconds (FAKETIME_DONT_FAKE_MONOTONIC:
# the monotonic shift is the namespace's alone), and its own gradtrace
# daemon: XDG_RUNTIME_DIR=$E2E_TMP/host<h>/run, so `gradtrace record`
# starts a private daemon there. The ranks meet through torch's TCPStore on
# 127.0.0.1, as the ranks of a real job meet at MASTER_ADDR.
HOSTS_FAKETIME=${HOSTS_FAKETIME:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}
. "$ROOT/tests/e2e/require.sh"
# Per host: monotonic shift (s) and realtime shift (s, libfaketime syntax).
HOSTS_MONO=(3000 7000 11000 5000)
HOSTS_REAL=(+0.1 +0.45 -0.2 +1.3)

# hosts_require: skip (fail under CI) without libfaketime. Where time
# namespaces are not allowed (unprivileged user namespaces off, as some
# container runtimes and distributions have them), the "hosts" share
# CLOCK_MONOTONIC (every MONO shift 0) and differ by their realtime only,
# which is still what the alignment has to recover; said once
# (HOSTS_NO_TIMENS=1 forces it, to test that path).
HOSTS_TIMENS=1
hosts_require() {
  [ -f "$HOSTS_FAKETIME" ] ||
    e2e_missing "no libfaketime at $HOSTS_FAKETIME (scripts/install-deps.sh)"
  if [ -n "${HOSTS_NO_TIMENS:-}" ] ||
     ! unshare --user --map-root-user --time --monotonic=5 true 2>/dev/null; then
    echo "(unshare --time does not work here: hosts share CLOCK_MONOTONIC)"
    HOSTS_TIMENS=0
    HOSTS_MONO=(0 0 0 0)
  fi
}

hosts_free_port() {
  "$1" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# host_run H WORLD PORT CMD...: CMD as rank H of WORLD on "host" H (its own
# clocks and runtime directory), from $E2E_TMP/host<H>.
host_run() {
  local h=$1 world=$2 port=$3; shift 3
  local dir=$E2E_TMP/host$h
  mkdir -p "$dir/run" && chmod 700 "$dir/run"
  local ns=(unshare --user --map-root-user --time --monotonic="${HOSTS_MONO[$h]}" --)
  [ "$HOSTS_TIMENS" = 1 ] || ns=()
  ( cd "$dir" &&
    env -u GRADTRACE_SOCKET -u GRADTRACE_CONTROL "${ns[@]}" \
      env XDG_RUNTIME_DIR="$dir/run" FAKETIME="${HOSTS_REAL[$h]}" \
          FAKETIME_DONT_FAKE_MONOTONIC=1 LD_PRELOAD="$HOSTS_FAKETIME" \
          RANK=$h LOCAL_RANK=0 WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 \
          MASTER_PORT=$port OMP_NUM_THREADS=1 "$@" )
}

# hosts_start PORT CMD...: CMD as every rank 0..N-1, each on its "host",
# in the background, output to $E2E_TMP/host<h>.out and .err; their pids
# in HOSTS_PIDS.
hosts_start() {
  local port=$1 h; shift
  HOSTS_PIDS=()
  for ((h = 0; h < N; h++)); do
    host_run $h $N $port "$@" >"$E2E_TMP/host$h.out" 2>"$E2E_TMP/host$h.err" &
    HOSTS_PIDS+=($!)
  done
}

# hosts_wait: waits for every rank of hosts_start, at most HOSTS_WAIT_S
# (120) seconds. 0: all succeeded; 1: start again on another port, because
# one failed as the port was taken between choosing and binding it (the
# rendezvous fails), or because a rank was still running at the deadline
# while another had finished (seen once in CI: torch 1.13's gloo teardown
# of rank 1 waiting after rank 0, which hosts the store, had left); its
# threads' stacks go to $E2E_TMP/hang-<try>.txt first, named in the log;
# 2: another failure.
HOSTS_TRY=0
hosts_wait() {
  local p fails=0 t0=$SECONDS left
  HOSTS_TRY=$((HOSTS_TRY + 1))
  while :; do
    left=0
    for p in "${HOSTS_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
    [ $left = 0 ] && break
    if [ $((SECONDS - t0)) -ge "${HOSTS_WAIT_S:-120}" ]; then
      hosts_stacks >"$E2E_TMP/hang-$HOSTS_TRY.txt" 2>&1
      echo "(ranks still running after ${HOSTS_WAIT_S:-120} s, try $HOSTS_TRY:" \
           "stacks in $E2E_TMP/hang-$HOSTS_TRY.txt; starting again)"
      # The ranks' Python processes (record around each then exits).
      pkill -KILL -f "$ROOT/tests/e2e/hosts/" 2>/dev/null
      for p in "${HOSTS_PIDS[@]}"; do wait "$p" 2>/dev/null; done
      return 1
    fi
    sleep 0.2
  done
  for p in "${HOSTS_PIDS[@]}"; do wait "$p" || fails=$((fails + 1)); done
  [ $fails = 0 ] && return 0
  grep -qi "address already in use" "$E2E_TMP"/host*.err && return 1
  return 2
}

# hosts_stacks: every thread's stack of each rank's Python processes still
# running (gdb where installed, else the kernel's wait channel).
hosts_stacks() {
  local p
  for p in $(pgrep -f "$ROOT/tests/e2e/hosts/" 2>/dev/null); do
    echo "== pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
    for t in /proc/$p/task/*; do
      echo "  thread ${t##*/} $(cat $t/comm 2>/dev/null): $(cat $t/wchan 2>/dev/null)"
    done
    command -v gdb >/dev/null &&
      timeout 60 gdb -p "$p" -batch -ex "thread apply all bt 30" 2>&1 | grep -v "^\[New LWP"
  done
}
