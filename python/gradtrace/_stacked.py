"""Layers applied by a loop over stacked parameters: each application of
one module with other parameters gets a layer name of its own,
"<layer>[i]" (schema/torch.md, "Applications").

Layer-stacked models keep one module and N sets of parameters (a leading
dimension of N, or a list) and apply the module N times per forward with
`torch.func.functional_call` (`torch.nn.utils.stateless.functional_call`
on 1.13), the apply_layers/scan pattern. Every application opens the
same module scope, so the N applications were one row and one backward
span per pass, and the i-th could not be seen or triggered. Both torch
versions swap the parameters in with `stateless._reparametrize_module`;
this wraps it, and while the swap holds, the module and its sub-modules
carry the names "<layer>[i]" and "<layer>[i].<sub>" in the root's map
(which both forms of the scope hooks read at each call), so their scopes,
nodes and spans are the i-th application's, and a trigger can name one
(`layer=blocks[3]`: an index after a name is literal, not a glob class).

i is the application's place among the distinct parameter sets the
module was applied with in this iteration (the agent's, gt_iteration):
a set is known by its tensors' storage addresses, so the slices of one
stacked tensor keep their indices across micro-batches and steps, and a
restart of the loop finds index 0 again. A module called plainly, with
its own parameters, keeps its one name, however often it is called.
Index 0 is given too (a module applied once with other parameters is
still an application). At most 1024 indices per module and iteration;
beyond, the plain name. Every failure leaves the names as they were.
"""
import contextlib
import ctypes
import sys
import threading

from . import _agent, _importhook, _naming

_MAX = 1024
_lock = threading.Lock()
_apps = {}  # id(module) -> (iteration, [key of each parameter set seen])
stats = {"applications": 0, "failures": 0, "over": 0}
_iteration = _agent._load_optional("gt_iteration", ctypes.c_uint64, [])
_is_compiling = None  # torch.compiler.is_compiling, where torch has it


def _key(params):
    out = []
    try:
        for v in (params.values() if hasattr(params, "values") else ()):
            if hasattr(v, "data_ptr"):
                out.append((v.data_ptr(), tuple(v.shape)))
            if len(out) == 2:
                break
    except Exception:
        return None
    return tuple(out) or None


def _index(module, params):
    key = _key(params)
    if key is None:
        return None
    it = _iteration() if _iteration is not None else 0
    with _lock:
        ent = _apps.get(id(module))
        if ent is None or ent[0] != it:
            ent = (it, [])
            _apps[id(module)] = ent
        keys = ent[1]
        try:
            return keys.index(key)
        except ValueError:
            if len(keys) >= _MAX:
                stats["over"] += 1
                return None
            keys.append(key)
            return len(keys) - 1


def _rename(module, i):
    """Gives module and its sub-modules their i-th application's names in
    their root's map. @return what to restore, or None."""
    ent = _naming._known.get(id(module))
    if ent is None or ent[0]() is not module:
        return None
    m, r = ent[4], ent[5]
    base = ent[1]
    saved = []
    info = _agent.layer_info
    for sub_path, sub in module.named_modules():
        old = m.get(id(sub))
        if old is None or old[0]() is not sub:
            continue
        name = "%s[%d]%s" % (base, i, "." + sub_path if sub_path else "")
        nid = _naming._intern(name)
        new = (old[0], name, nid, old[3], m, r, old[6])
        saved.append((id(sub), old, _naming._known.get(id(sub))))
        m[id(sub)] = new
        if _naming._known.get(id(sub)) is old:
            _naming._known[id(sub)] = new
        if info is not None:
            flags = _agent.LAYER_F_ROOT_CHILD if r.bare and "." not in name else 0
            k = (nid, old[3], flags)
            if k not in r.sent:
                r.sent.add(k)
                info(*k)
    return (m, saved)


def _restore(tok):
    m, saved = tok
    for key, old, known in reversed(saved):
        m[key] = old
        if known is not None:
            _naming._known[key] = known


def _hook():
    global _is_compiling
    torch = sys.modules.get("torch")
    _is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    st = sys.modules.get("torch.nn.utils.stateless")
    real = getattr(st, "_reparametrize_module", None)
    if real is None or getattr(real, "_gradtrace", False):
        return

    @contextlib.contextmanager
    def _reparametrize_module(module, parameters_and_buffers, *args, **kwargs):
        if _is_compiling is not None and _is_compiling():
            # Traced by dynamo: folded to True, so the graph holds torch's
            # own swap and nothing of ours (the same graphs and breaks).
            with real(module, parameters_and_buffers, *args, **kwargs) as out:
                yield out
            return
        with real(module, parameters_and_buffers, *args, **kwargs) as out:
            tok = None
            try:
                i = _index(module, parameters_and_buffers)
                if i is not None:
                    tok = _rename(module, i)
                    stats["applications"] += 1
            except Exception:
                stats["failures"] += 1
            try:
                yield out
            finally:
                if tok is not None:
                    try:
                        _restore(tok)
                    except Exception:
                        stats["failures"] += 1

    _reparametrize_module._gradtrace = True
    _reparametrize_module.__wrapped__ = real
    st._reparametrize_module = _reparametrize_module


def install():
    _importhook.after_import("torch.nn.utils.stateless", _hook)
