"""gradtrace's sitecustomize, put on PYTHONPATH by `gradtrace record`.

It arranges for gradtrace's module hooks to be installed when (and only
when) the program imports torch, then runs the sitecustomize that would
have run without us (the next one on sys.path, e.g. Debian's
/usr/lib/python3.11/sitecustomize.py or a user's own), so adding gradtrace
changes nothing else about start-up. Errors are reported the way site.py
reports them and never stop the program.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _gradtrace_setup():
    try:
        import gradtrace
        gradtrace.install_when_torch_imported()
    except Exception as e:  # never break the host program
        if os.environ.get("GRADTRACE_LOG"):
            sys.stderr.write("gradtrace: python hooks not installed: %r\n" % (e,))


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path
            if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    if spec.origin and os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                         "%s: %s\n" % (type(e).__name__, e))


_gradtrace_setup()
_chain()
