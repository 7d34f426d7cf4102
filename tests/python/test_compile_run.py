"""A compiled graph's runs as regions (python/gradtrace/_compile_run.py,
schema/torch.md "Compiled models"), without the agent: ctypes callbacks
stand in for gt_compiled_begin/end, so each test reads which regions
began and ended, in C (_gthooks.region) and in the Python form alike.

  - the wrapped call passes its arguments (the boxed list, keywords) on
    unchanged and returns the callee's result;
  - every begin has its end, also when the callee raises, and the
    exception reaches the caller unchanged;
  - a call is wrapped once; the map number is readable from it.

Needs no torch. Runs under pytest, or as a script (exit 0).
"""
import ctypes
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

from gradtrace import _compile_run  # noqa: E402

log = []
_FN = ctypes.CFUNCTYPE(None, ctypes.c_uint32)
_b = _FN(lambda g: log.append(("begin", g)))
_e = _FN(lambda g: log.append(("end", g)))


def _forms():
    """(name, wrap) for each form this interpreter has."""
    _compile_run._begin, _compile_run._end = _b, _e
    forms = [("python", _compile_run._py_region)]
    c = _compile_run._c_region()
    if c is not None:
        forms.append(("c", c))
    return forms


def _callee(args, scale=1):
    out = [a * scale for a in args]
    args.clear()          # inductor's boxed convention: the callee clears
    return out


def test_arguments_and_result_pass_through():
    for name, region in _forms():
        del log[:]
        call = region(_callee, 7)
        boxed = [1, 2]
        assert call(boxed, scale=3) == [3, 6], name
        assert boxed == [], name + ": the same list reached the callee"
        assert log == [("begin", 7), ("end", 7)], (name, log)
        assert call._gradtrace_graph == 7, name
        assert call.__wrapped__ is _callee, name


def test_end_also_when_the_callee_raises():
    def bad(args):
        raise KeyError("x")

    for name, region in _forms():
        del log[:]
        call = region(bad, 3)
        try:
            call([])
        except KeyError as e:
            assert e.args == ("x",), name
        else:
            raise AssertionError(name + ": the exception was lost")
        assert log == [("begin", 3), ("end", 3)], (name, log)


def test_wrap_once_and_only_with_a_map():
    _forms()
    mod = types.SimpleNamespace(call=_callee)
    assert not _compile_run.wrap(mod, 0), "no map number: not wrapped"
    assert mod.call is _callee
    assert _compile_run.wrap(mod, 5)
    first = mod.call
    assert not _compile_run.wrap(mod, 6), "already a region"
    assert mod.call is first
    assert _compile_run.wrapped(mod) == 5
    assert _compile_run.wrapped(types.SimpleNamespace()) == 0
    del log[:]
    assert mod.call([2]) == [2]
    assert log == [("begin", 5), ("end", 5)], log


def test_c_form_is_used_where_built():
    # Where make built _gthooks for this interpreter the region must be
    # the C one (the Python form costs about 3 us a call).
    try:
        from gradtrace import _gthooks  # noqa: F401
    except ImportError:
        pyunit.skip("no _gthooks built for this interpreter", False)
    assert [n for n, _ in _forms()] == ["python", "c"]
    mod = types.SimpleNamespace(call=_callee)
    _compile_run._region[:] = []
    assert _compile_run.wrap(mod, 9)
    assert type(mod.call).__name__ == "Region", type(mod.call)


if __name__ == "__main__":
    pyunit.main(globals())
