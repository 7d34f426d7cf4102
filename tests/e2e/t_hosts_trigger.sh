#!/usr/bin/env bash
# Job-wide triggers through the job's torch.distributed store: N gloo
# ranks (2, or HOSTS_N=4), each on its own simulated host with its own
# daemon (tests/e2e/hosts/lib.sh), train with capture off. While they run,
# `gradtrace trigger --job` is sent to the LAST host's daemon only: its
# agent hands the spec to Python, which writes it into the job's store
# with a common iteration; every rank's watcher arms it. Every host must
# then hold exactly one window file of its own rank, all for the same
# iteration (file name and window metadata), and no rank may have died
# at exit (a thread left inside the store's C++ code would abort it).
# The windows merged (`gradtrace merge`, the typical use: one layer's
# backward at one step on every rank) are aligned by the collectives
# their metadata carries, recovering the injected realtime shifts.
set -u
. "$(dirname "$0")/daemon_lib.sh"
. "$ROOT/tests/e2e/torch/lib.sh"
. "$ROOT/tests/e2e/hosts/lib.sh"
need "$B/gradtrace" "$B/gradtraced" "$B/libgradtrace.so"
torch_require "$PY"
hosts_require
N=${HOSTS_N:-2}
GT=$B/gradtrace
last=$((N - 1))
cd "$E2E_TMP"

ok_run=
for try in 1 2 3; do
  port=$(hosts_free_port "$PY")
  rm -f ready
  rm -rf host*/out
  hosts_start $port env GRADTRACE_CAPTURE=0 \
    "$ROOT/tests/e2e/hosts/with_daemon.sh" "$B" out \
    "$GT" record -- "$PY" "$ROOT/tests/e2e/hosts/trig.py" 80 "$E2E_TMP/ready"
  for _ in $(seq 1 600); do [ -e ready ] && break; sleep 0.1; done
  [ -e ready ] || echo "(the job did not start)"
  [ -e ready ] && env -u GRADTRACE_SOCKET -u GRADTRACE_CONTROL \
      XDG_RUNTIME_DIR=$E2E_TMP/host$last/run "$GT" trigger --job \
      layer=2,phase=backward >trigger.out 2>trigger.err
  hosts_wait; rc=$?
  [ $rc = 0 ] && [ -e ready ] && { ok_run=1; break; }
  [ $rc = 1 ] || break
done
[ -n "$ok_run" ] || die "ranks failed: $(tail -n 5 host*.err)"
grep -q "^job-wide trigger handed to pid [0-9]* (rank $last): layer=2,phase=backward" trigger.out \
  || die "trigger --job: $(cat trigger.out trigger.err)"
grep -i "terminate called" host*.err && die "a rank aborted at exit"

its=()
for ((h = 0; h < N; h++)); do
  files=$(ls host$h/out/*.json 2>/dev/null)
  [ "$(echo "$files" | grep -c .)" = 1 ] || die "host $h: want one window file, got: $files"
  echo "$files" | grep -Eq "/trig-rank$h-pid[0-9]+-w1-2-backward-it[0-9]+(\.pt\.trace)?\.json$" \
    || die "host $h: not a window of rank $h: $files"
  "$PY" "$VALIDATOR" $files >/dev/null || die "host $h: invalid window file"
  it=$(echo "$files" | sed -E 's/.*-it([0-9]+)(\.pt\.trace)?\.json$/\1/')
  meta=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["gradtrace"]["window"]["iteration"])' $files)
  [ "$meta" = "$it" ] || die "host $h: window metadata says iteration $meta, file it$it"
  its+=($it)
done
for it in "${its[@]}"; do
  [ "$it" = "${its[0]}" ] || die "windows at different iterations: ${its[*]}"
done
echo "every rank's window at iteration ${its[0]} (trigger sent to host $last only)"

"$GT" merge host*/out/*.json -o windows.json || die "merge of the windows"
"$PY" "$VALIDATOR" windows.json >/dev/null || die "merged windows invalid"
"$PY" - windows.json "${HOSTS_REAL[*]}" <<'PY' || die "merged windows"
import json, sys
real = [round(float(x) * 1e9) for x in sys.argv[2].split()]
ranks = json.load(open(sys.argv[1]))["gradtrace"]["merge"]["ranks"]
for r in ranks[1:]:
    want = real[0] - real[r["rank"]]
    assert r["method"] == "collectives", r
    assert abs(r["correction_ns"] - want) <= r["uncertainty_ns"], (r, want)
    print("windows, rank %d: realtime shift %+.3f ms recovered as %+.3f ms +/- %.1f us"
          % (r["rank"], want / 1e6, r["correction_ns"] / 1e6, r["uncertainty_ns"] / 1e3))
PY
echo ok
