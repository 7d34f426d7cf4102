"""torch.distributed's collectives as the package wraps them
(python/gradtrace/_dist.py), without the agent: the agent's functions
replaced by recorders.

  - a synchronous call is communication (gt_comm_begin before it runs,
    gt_comm_end after it returned, same name) and one collective record
    with its group, size, sequence number and times;
  - an asynchronous call (async_op=True, by keyword or position) is
    communication and no collective record (its end is not the
    collective's);
  - a call that raises still ends its communication, and raises;
  - while dynamo compiles (torch.compiler.is_compiling), the wrapper calls
    the collective alone and records nothing; on torch 2.x a fullgraph
    compile of a function calling the wrapped all_reduce (one gloo rank)
    has no graph break and the same result.
The real thing (DDP, a Function's all_reduce, FSDP2's reduce-scatter on
two gloo ranks) is tests/e2e/t_torch_comm.sh.

Runs under pytest, or as a script (exit 0, 77 when torch is missing).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

torch, MISSING = pyunit.torch_or_reason()
if torch is not None:
    import torch.distributed as dist
    from gradtrace import _dist


class Recorder:
    def __init__(self):
        self.log = []
        self.clock = 100

    def now(self):
        self.clock += 1
        return self.clock

    def begin(self, op):
        self.log.append(("begin", op))

    def end(self, op):
        self.log.append(("end", op))

    def collective(self, *args):
        self.log.append(("collective",) + args)


def _patched(fn, body, compiling=False):
    rec = Recorder()
    saved = (_dist._now, _dist._collective, _dist._comm_begin, _dist._comm_end,
             _dist._compiling, _dist._group_info, _dist._agent.intern)
    _dist._now, _dist._collective = rec.now, rec.collective
    _dist._comm_begin, _dist._comm_end = rec.begin, rec.end
    _dist._compiling = (lambda: True) if compiling else (lambda: False)
    _dist._group_info = lambda d, g: (7, 2)
    _dist._agent.intern = lambda s: 42
    try:
        wrapped = _dist._wrap(None, "all_reduce", fn, 2)
        body(wrapped, rec)
    finally:
        (_dist._now, _dist._collective, _dist._comm_begin, _dist._comm_end,
         _dist._compiling, _dist._group_info, _dist._agent.intern) = saved
    return rec


def test_a_synchronous_call_is_communication_and_a_collective():
    if torch is None:
        return _skip()
    calls = []

    def fn(t, op=None, group=None, async_op=False):
        calls.append(("fn",))
        return "done"

    def body(w, rec):
        assert w("t") == "done"
        assert w("t") == "done"
    rec = _patched(fn, body)
    assert rec.log == [("begin", 42), ("end", 42), ("collective", 42, 7, 2, 0, 101, 102),
                       ("begin", 42), ("end", 42), ("collective", 42, 7, 2, 1, 103, 104)], rec.log
    assert len(calls) == 2


def test_an_asynchronous_call_is_communication_only():
    if torch is None:
        return _skip()

    def fn(t, op=None, group=None, async_op=False):
        return "work"

    def body(w, rec):
        assert w("t", async_op=True) == "work"
        assert w("t", None, None, True) == "work"
    rec = _patched(fn, body)
    assert rec.log == [("begin", 42), ("end", 42)] * 2, rec.log


def test_a_raising_call_ends_its_communication():
    if torch is None:
        return _skip()

    def fn(*a, **k):
        raise RuntimeError("peer gone")

    def body(w, rec):
        try:
            w("t")
        except RuntimeError as e:
            assert str(e) == "peer gone"
        else:
            raise AssertionError("not raised")
    rec = _patched(fn, body)
    assert rec.log == [("begin", 42), ("end", 42)], rec.log


def test_while_compiling_the_collective_runs_alone():
    if torch is None:
        return _skip()

    def fn(*a, **k):
        return "traced"

    def body(w, rec):
        assert w("t") == "traced"
        assert w("t", async_op=True) == "traced"
    rec = _patched(fn, body, compiling=True)
    assert rec.log == [], rec.log


def test_a_fullgraph_compile_through_the_wrapper_has_no_break():
    if torch is None:
        return _skip()
    compiler = getattr(torch, "compiler", None)
    if compiler is None or not hasattr(compiler, "is_compiling") or \
            not dist.is_available() or not dist.is_gloo_available():
        return _skip("no torch.compile with gloo here (torch 1.x)")
    import torch._dynamo as dynamo
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0,
                                world_size=1)
    rec = Recorder()
    saved = (_dist._now, _dist._collective, _dist._comm_begin, _dist._comm_end,
             _dist._compiling)
    _dist._now, _dist._collective = rec.now, rec.collective
    _dist._comm_begin, _dist._comm_end = rec.begin, rec.end
    _dist._compiling = compiler.is_compiling
    real = dist.all_reduce
    try:
        wrapped = _dist._wrap(dist, "all_reduce", dist.distributed_c10d.all_reduce, 2)

        def f(x):
            y = x * 2
            wrapped(y)
            return y + 1
        x = torch.arange(4.0)
        eager = f(x.clone())
        assert rec.log and rec.log[0][0] == "begin", rec.log
        dynamo.reset()
        explain = dynamo.explain(f)(x.clone())
        assert explain.graph_break_count == 0, explain.break_reasons
        compiled = torch.compile(f, fullgraph=True, backend="eager")
        assert torch.equal(compiled(x.clone()), eager)
    finally:
        (_dist._now, _dist._collective, _dist._comm_begin, _dist._comm_end,
         _dist._compiling) = saved
        dist.all_reduce = real
        dynamo.reset()


def _skip(why=None):
    pyunit.skip(why or MISSING, torch is None)


if __name__ == "__main__":
    pyunit.main(globals(), MISSING if torch is None else None)
