"""The package's torch side, installed once torch is imported: layer
names (_naming.py), the forward scopes (_scopes.py, run in C by _hooks.c),
the hook switch (_switch.py), training steps (_steps.py) and the rank
(_rank.py), and on torch 2.x the compile-time map of compiled graphs
(_compile.py, sent to the agent and run as regions by _compile_run.py).
schema/torch.md, "The Python package", gives the rules they follow and
why.
"""

import sys
import threading
import warnings

from . import _naming
from . import _steps
from . import _switch

_installed = False


def hooks_installed():
    """Whether module scopes are being reported now (tests, benchmarks)."""
    return _switch.hooks_installed()


def hooks_now():
    """The program started a capture itself (gradtrace.capture_start):
    the hooks go in now, not at the next boundary, so what it runs next
    has its layers (a module already running keeps its root's names)."""
    if not _installed or _switch._hooks_wanted is None or \
            _switch._handles is not None:
        return
    try:
        with _switch._install_lock:
            if _switch._hooks_wanted():
                _switch._hooks_on()
    except Exception:
        pass


def install():
    """Installs the module and optimizer hooks once. @return True."""
    global _installed
    with _switch._install_lock:
        if _installed:
            return True
        if _switch._hooks_wanted is None or _switch._hooks_wanted():
            _switch._hooks_on()
        _installed = True
        if _switch._is_compiling is not None and not _switch._use_global:
            if "torch._dynamo.callback" in sys.modules:
                _switch._watch_dynamo()
            else:
                from . import _importhook
                _importhook.after_import("torch._dynamo.callback",
                                         _switch._watch_dynamo)
        if _naming._seen_dir is not None:
            import atexit
            atexit.register(_naming._write_seen)
        # torch.compile warns on every call of an OptimizedModule while
        # global module hooks exist (ours), that they fire for it as well
        # as for the module it wraps: this package expects that (the pair
        # opens one scope), so exactly that warning is not the user's to
        # see. Other warnings are left alone.
        warnings.filterwarnings(
            "ignore", category=UserWarning,
            message=r"Using `torch\.compile\(module\)` when there are "
                    r"global hooks on modules")
        try:
            _steps.install(_switch._step_boundary
                           if _switch._hooks_wanted is not None else None)
        except Exception:  # scopes still work without step marks, and
            pass           # without boundaries the watcher does it all
        if _switch._hooks_wanted is not None:
            threading.Thread(target=_switch._watch, name="gradtrace-hooks",
                             daemon=True).start()
        from . import _dist  # collectives; job-wide triggers
        _dist.install()
        try:
            from . import _fsdp  # FSDP2's unsharded parameters
            _fsdp.install()
            from . import _stacked  # layers applied with stacked parameters
            _stacked.install()
        except Exception:
            pass
        _install_compile()
    return True


def _install_compile():
    # Only where the agent takes maps: elsewhere the map would cost
    # compile time and a changed inductor cache key for nothing.
    # GRADTRACE_COMPILE_MAP=0 leaves compiled graphs as they are.
    import os
    if os.environ.get("GRADTRACE_COMPILE_MAP", "1") == "0":
        return
    try:
        from . import _compile, _compile_run
        if _compile_run.available():
            _compile.install()
    except Exception:
        pass
