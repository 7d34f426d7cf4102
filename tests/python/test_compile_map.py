"""The attribution rules of the compile-time map (python/gradtrace/
_compile_rules.py; schema/torch.md "Compiled models: the compile-time
map"), on made-up node metadata: dynamo's path forms, wrapper segments,
a node's module and phase, the owner of a kernel (one module; fused
modules -> their deepest common ancestor on the call stack; no module ->
unowned), kernels called at several sites.

Runs under pytest, or as a script (exit 0, 77 when torch is missing);
`make pyunit` runs it with each interpreter that has torch.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))

try:
    import torch
except ImportError as e:  # a skip (pytest and main()), a failure under CI
    torch = None
    MISSING = str(e)
if torch is not None:
    from gradtrace import _compile_rules as R


# --- the rules (any torch) -------------------------------------------------

def _stack(*paths):
    return {"k%d" % i: (p, "Linear") for i, p in enumerate(paths)}


def test_paths_in_dynamos_forms():
    if torch is None:
        return _skip()
    for s in ("L['self'].blocks.0.up", "L['self'].blocks[0].up",
              "L['self']._modules['blocks']._modules['0']._modules['up']",
              "getattr(L['self'].blocks, '0').up", "self.blocks.0.up"):
        assert R.parse_path(s) == ("self", ["blocks", "0", "up"]), s
    assert R.parse_path("L['s']") == ("s", [])
    assert R.parse_path("G['model'].head") == ("model", ["head"])
    assert R.parse_path("not a path!") is None
    assert R.parse_path(None) is None


def test_wrapper_segments_removed():
    if torch is None:
        return _skip()
    stack = {"a": ("L['self'].blocks.0", "CheckpointWrapper"),
             "b": ("L['self'].blocks.0._checkpoint_wrapped_module",
                   "Block"),
             "c": ("L['self'].blocks.0._checkpoint_wrapped_module.up",
                   "Linear")}
    assert R.user_stack(stack) == ("self", ("blocks.0", "blocks.0.up"))
    stack = {"a": ("L['m']", "OptimizedModule"),
             "b": ("L['m']._orig_mod.head", "Linear")}
    assert R.user_stack(stack) == ("m", ("", "head"))
    assert R.user_stack("junk") is None


def test_node_module_and_phase():
    if torch is None:
        return _skip()
    fwd = {"nn_module_stack": _stack("L['self'].b", "L['self'].b.up"),
           "seq_nr": 3, "partitioner_tag": "is_forward"}
    assert R.node_entry(fwd, False) == ("self", ("b", "b.up"), "forward")
    # The same forward node inside a backward graph is recomputed.
    assert R.node_entry(fwd, True)[1:] == (("b", "b.up"), "recompute")
    bwd = {"fwd_nn_module_stack": _stack("L['self'].b"), "seq_nr": 3,
           "partitioner_tag": "is_backward"}
    assert R.node_entry(bwd, True) == ("self", ("b",), "backward")
    # Forward op in the frame itself: its backward has a None copy.
    top = {"fwd_nn_module_stack": None, "seq_nr": 9,
           "partitioner_tag": "is_backward"}
    assert R.node_entry(top, True) == (None, (), "backward")
    assert R.node_entry({"seq_nr": 1}, False) == (None, (), "forward")
    made_up = {"partitioner_tag": "is_backward"}  # a pass's node
    assert R.node_entry(made_up, True) == (None, None, "backward")
    # Older 2.x: no partitioner tags; backward nodes lack nn_module_stack.
    old_bwd = {"seq_nr": 4}
    assert R.node_entry(old_bwd, True) == (None, None, "backward")
    old_fwd = {"nn_module_stack": _stack("L['self'].b"), "seq_nr": 4}
    assert R.node_entry(old_fwd, True)[2] == "recompute"
    # A backward op the partitioner moved into the forward graph.
    assert R.node_entry(bwd, False) == ("self", ("b",), "forward")


def test_owner_of_a_kernel():
    if torch is None:
        return _skip()
    one = R.attribute([(("b0", "b0.act"), "forward"),
                       (None, "forward")])
    assert (one["owner"], one["mark"], one["fused"]) == \
        ("b0.act", "module", [])
    fused = R.attribute([(("body", "body.b0"), "forward"),
                         (("body", "body.b1", "body.b1.up"), "forward")])
    assert (fused["owner"], fused["mark"], fused["fused"]) == \
        ("body", "fused", ["body.b0", "body.b1.up"])
    top = R.attribute([((), "forward"), (("head",), "forward")])
    assert (top["owner"], top["fused"]) == ("", ["", "head"])
    none = R.attribute([(None, "backward")])
    assert (none["owner"], none["mark"], none["phase"]) == \
        (None, "unowned", "backward")
    mixed = R.attribute([(("a",), "recompute"), (("a",), "backward")])
    assert (mixed["phase"], mixed["recompute"]) == ("backward", True)
    rec = R.attribute([(("a",), "recompute")])
    assert (rec["phase"], rec["recompute"]) == ("recompute", False)


def test_kernel_called_at_several_sites():
    if torch is None:
        return _skip()
    a = R.attribute([(("b0", "b0.act"), "forward")])
    b = R.attribute([(("b1", "b1.act"), "forward")])
    m = R.merge_sites([a, b])
    assert (m["owner"], m["mark"], m["fused"]) == \
        ("", "shared", ["b0.act", "b1.act"]), m
    assert R.merge_sites([a])["owner"] == "b0.act"
    assert "stack" not in R.merge_sites([a])


def _skip(why=None):
    why = why or MISSING
    if torch is None and os.environ.get("CI"):
        raise AssertionError("CI: " + why)
    try:
        import pytest
        pytest.skip(why)
    except ImportError:
        raise SystemExit(77)


if __name__ == "__main__":
    if torch is None:
        print("skip:", MISSING)
        sys.exit(1 if os.environ.get("CI") else 77)
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            t = time.time()
            try:
                fn()
            except SystemExit as e:
                if e.code != 77:
                    raise
                print("skip", name)
                continue
            print("ok %s (%.1f s)" % (name, time.time() - t))
