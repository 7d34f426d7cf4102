"""Run a callback right after a module is first imported, without importing
it ourselves. A meta-path finder sees the import request, lets the other
finders locate the module, and wraps the loader's exec_module so the
callback runs once the module body has finished executing."""

import importlib.abc
import sys

_pending = {}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        callbacks = _pending.get(fullname)
        if callbacks is None:
            return None
        # Find the real spec with every other finder.
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        del _pending[fullname]
        if not _pending:
            _remove_finder()
        original = loader.exec_module

        def exec_module(module):
            original(module)
            for cb in callbacks:
                try:
                    cb()
                except Exception:  # never break the user's import
                    pass

        loader.exec_module = exec_module
        return spec


_finder = _Finder()


def _remove_finder():
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass


def after_import(name, callback):
    """Calls callback() after `name` is imported (now if it already was)."""
    if name in sys.modules:
        callback()
        return
    _pending.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
