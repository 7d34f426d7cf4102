"""What the Python package's unit tests share: a skip that works under
pytest and as a script, and the script runner (scripts/run-pyunit.sh runs
each tests/python/test_*.py as a script: exit 0 passes, 77 skips).

A missing torch is a skip on a bare machine and a failure under CI (CI is
set there), so a CI machine without torch never passes silently.
"""
import os
import sys
import time

# The package under test is this checkout's, whoever runs the test.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))


def torch_or_reason():
    """(the torch module, None), or (None, why it cannot be imported): a
    skip (pytest and main()), a failure under CI."""
    try:
        import torch
        return torch, None
    except ImportError as e:
        return None, str(e)


def skip(why, torch_missing):
    """Skips the calling test (pytest.skip, or exit 77 as a script).
    torch_missing: the reason is that torch is absent (a failure in CI)."""
    if torch_missing and os.environ.get("CI"):
        raise AssertionError("CI: " + why)
    try:
        import pytest
        pytest.skip(why)
    except ImportError:
        raise SystemExit(77)


def main(tests, missing=None):
    """Runs every test_* of the dict tests (a module's globals()) in name
    order, printing ok/skip per test; missing: why torch is absent (then
    nothing runs: exit 77, 1 under CI)."""
    if missing is not None:
        print("skip:", missing)
        sys.exit(1 if os.environ.get("CI") else 77)
    for name, fn in sorted(tests.items()):
        if name.startswith("test_") and callable(fn):
            t = time.monotonic()
            try:
                fn()
            except SystemExit as e:
                if e.code != 77:
                    raise
                print("skip", name)
                continue
            print("ok %s (%.1f s)" % (name, time.monotonic() - t))
