#!/usr/bin/env bash
# FSDP2 parameter gradients attributed to their modules (issue 27, torch
# 2.x): tests/e2e/torch/fsdp_model.py fsdp2 shards three blocks and the root
# with fully_shard on two gloo ranks under `gradtrace record` (torchrun).
# FSDP2 swaps unsharded parameters onto the modules for each forward and
# backward, which autograd accumulates into (python/gradtrace/_fsdp.py).
# Checks, on each rank's trace: every node but AccumulateGrad has its
# sequence number, also in the first pass; every AccumulateGrad node has a layer and
# a parameter name, each Linear's weight and bias among them; each
# Linear row of the report has AccumulateGrad time of its own; and its
# reduce-scatter is communication (tests/e2e/torch/check_comm.py fsdp2):
# inside the post-backward nodes, the sharded units' rows, and the rest
# (FSDP's end-of-backward callback) in no layer, counted.
# The same model under FSDP1 (FullyShardedDataParallel): flat parameters
# are their units', and their reduce-scatter communication.
# e2e-timeout: 400
set -u
. "$(dirname "$0")/torch/lib.sh"
torch2_require
"$PY" -c 'import torch.distributed as d, sys; sys.exit(not d.is_available() or not d.is_gloo_available())' ||
  e2e_missing "$PY: torch.distributed with gloo is not available"
GT=$ROOT/$BUILD/gradtrace
die() { echo "FAIL: $*" >&2; exit 1; }
cd "$E2E_TMP"
port=$((20000 + RANDOM % 20000))
"$GT" record -o out -- "$PY" -m torch.distributed.run --nproc_per_node 2 \
  --master_port "$port" "$TORCH_DIR/fsdp_model.py" fsdp2 >rec.out 2>rec.err \
  || { tail -20 rec.err; die "the recorded FSDP2 run failed"; }
for r in 0 1; do
  f=$(ls out/*rank$r-*.json 2>/dev/null | head -1)
  [ -n "$f" ] || die "no trace of rank $r: $(ls out)"
  "$GT" report --format json "$f" >rep$r.json 2>rep$r.err || { cat rep$r.err; die "report rank $r"; }
  "$PY" - "$f" rep$r.json "$r" <<'PYEOF' || die "rank $r: FSDP2 gradients not attributed"
import collections, json, sys
doc, rep, rank = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
acc = [e["args"] for e in doc["traceEvents"] if e.get("cat") == "backward"
       and e.get("ph") == "X" and e["name"].endswith("AccumulateGrad")]
# The node layout is known by the first backward (from FSDP2's first
# forward, agent/torch_layout.c): every other node has its number.
noseq = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "backward"
         and e.get("ph") == "X" and not e["name"].endswith("AccumulateGrad")
         and "seq" not in e["args"]]
assert not noseq, noseq
named = collections.Counter((a.get("layer"), a.get("param")) for a in acc
                            if a.get("layer") and a.get("param"))
print("rank %s: %d of %d AccumulateGrad nodes with a layer and a parameter"
      % (rank, sum(named.values()), len(acc)))
assert acc and sum(named.values()) == len(acc), collections.Counter(
    (a.get("layer"), a.get("param")) for a in acc)
linears = ["blocks.%d.fc%d" % (b, k) for b in range(3) for k in (1, 2)] + ["head"]
for l in linears:
    for p in ("weight", "bias"):
        assert named[(l, p)] > 0, (l, p, named)
rows = {r["path"]: r for r in rep["layers"]}
for l in linears:
    assert rows[l]["accumulate_grad_ms"] > 0, (l, rows[l])
PYEOF
  "$GT" report "$f" >rep$r.txt 2>>rep$r.err || die "report rank $r"
  "$PY" "$TORCH_DIR/check_comm.py" fsdp2 "$f" rep$r.json rep$r.txt ||
    { cat rep$r.txt; die "rank $r: FSDP2 communication"; }
done

# FSDP1: each unit's flat parameter (`_flat_param`) is its wrapped
# module's: the gradient FSDP1 accumulates is the whole flat one, so the
# unit is the finest owner there is (head's sits in the root's).
"$GT" record -o out1 -- "$PY" -m torch.distributed.run --nproc_per_node 2 \
  --master_port "$((port + 1))" "$TORCH_DIR/fsdp_model.py" fsdp1 >rec1.out 2>rec1.err \
  || { tail -20 rec1.err; die "the recorded FSDP1 run failed"; }
f=$(ls out1/*rank0-*.json 2>/dev/null | head -1)
[ -n "$f" ] || die "no FSDP1 trace of rank 0: $(ls out1)"
"$GT" report --format json "$f" >rep1.json 2>rep1.err || { cat rep1.err; die "report FSDP1"; }
"$GT" report "$f" >rep1.txt 2>>rep1.err || die "report FSDP1"
"$PY" - "$f" <<'PYEOF' || die "FSDP1 gradients not attributed"
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
acc = collections.Counter((e["args"].get("layer"), e["args"].get("param")) for e in ev
                          if e.get("cat") == "backward" and e["name"].endswith("AccumulateGrad"))
print("FSDP1 AccumulateGrad:", dict(acc))
units = ["blocks.0", "blocks.1", "blocks.2", "Net"]
assert set(acc) == {(u, "_flat_param") for u in units}, acc
assert len(set(acc.values())) == 1, acc  # once per unit and pass
PYEOF
"$PY" "$TORCH_DIR/check_comm.py" fsdp1 "$f" rep1.json rep1.txt ||
  { cat rep1.txt; die "FSDP1 communication"; }
echo ok
