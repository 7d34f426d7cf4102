#!/usr/bin/env bash
# Status reports the lost counts the trace holds (issue 25, item 5): the
# daemon decodes each chunk once and reads an agent's lost counts from
# its converter, so a live agent's entry, the finished entry, the totals
# and the trace's gradtrace.lost all say the same number. Two agents at
# once, so that one's counts cannot stand in for the other's.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"
start_daemon

"$FAKE" --chunks 6 --records 1000 --lost 1234 --hold-ms 3000 \
  >"$E2E_TMP/a.out" 2>"$E2E_TMP/a.err" & pa=$!
"$FAKE" --chunks 3 --records 500 --lost 77 --gap 2 --hold-ms 3000 \
  >"$E2E_TMP/b.out" 2>"$E2E_TMP/b.err" & pb=$!

# While both are connected (all sent, holding): their live entries.
live=
for _ in $(seq 1 100); do
  live=$(ctl_q '{"cmd":"status"}' \
    '" ".join("%d:%d:%d" % (a["pid"], a["lost_events"], a["lost_chunks"]) for a in sorted(r["agents"], key=lambda a: a["pid"]))')
  case " $live " in *" $pa:1234:0 "*) case " $live " in *" $pb:77:2 "*) break ;; esac ;; esac
  sleep 0.05
done
echo "live: $live"
case " $live " in *" $pa:1234:0 "*) ;; *) die "live agent $pa: want lost_events 1234, lost_chunks 0: $live" ;; esac
# The gap of 2 is the framer's (sequence numbers skipped), added to the
# agent's own GT_LOST_CHUNKS (none here).
case " $live " in *" $pb:77:2 "*) ;; *) die "live agent $pb: want lost_events 77, lost_chunks 2: $live" ;; esac

wait $pa || die "agent a failed: $(cat "$E2E_TMP/a.err")"
wait $pb || die "agent b failed: $(cat "$E2E_TMP/b.err")"
for _ in $(seq 1 100); do
  [ "$(ctl_q '{"cmd":"status"}' 'len(r["finished"])')" -ge 2 ] && break
  sleep 0.05
done

ctl '{"cmd":"status"}' >"$E2E_TMP/status.json"
"$PY" - "$E2E_TMP/status.json" "$pa" 1234 0 "$pb" 77 2 <<'PY' || die "status and traces disagree"
import json, sys
st = json.load(open(sys.argv[1]))
want = {int(sys.argv[i]): (int(sys.argv[i + 1]), int(sys.argv[i + 2]))
        for i in (2, 5)}
fin = {d["pid"]: d for d in st["finished"]}
for pid, (ev, ch) in want.items():
    d = fin.get(pid)
    assert d, "no finished entry for %d" % pid
    assert (d["lost_events"], d["lost_chunks"]) == (ev, ch), (pid, d)
    main = [f for f in d["files"] if f.endswith(".json")]
    assert main, d
    lost = json.load(open(main[0]))["gradtrace"]["lost"]
    assert lost["events"] == ev, ("trace", pid, lost)
    print("pid %d: status and trace say %d events lost" % (pid, ev))
tot = st["totals"]
assert tot["lost_events_finished"] == 1234 + 77, tot
assert tot["lost_chunks_finished"] == 2, tot
PY
echo "ok"
