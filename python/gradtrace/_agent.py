"""ctypes binding to the gradtrace agent's public C API.

The agent (libgradtrace.so) is normally LD_PRELOADed, so its functions are
in the process's global symbol scope: ctypes.CDLL(None) finds them without
knowing where the library lives. When they are not there (no agent, or
GRADTRACE_PYTHON=0) `lib` is None and every caller stays inert: nothing is
hooked, nothing is called, nothing costs anything.

Signatures mirror include/gradtrace/gradtrace.h; keep them in step.
"""

import ctypes
import os

_SIGNATURES = {
    "gt_intern": (ctypes.c_uint32, [ctypes.c_char_p]),
    "gt_scope_begin": (None, [ctypes.c_uint32]),
    "gt_scope_end": (None, []),
    "gt_module_begin": (None, [ctypes.c_uint32, ctypes.c_uint32]),
    "gt_module_end": (None, []),
    "gt_step": (None, [ctypes.c_uint64]),
    "gt_instant": (None, [ctypes.c_uint32]),
    "gt_capture_start": (None, []),
    "gt_capture_stop": (None, []),
    "gt_capture_active": (ctypes.c_int, []),
}


def _load():
    if os.environ.get("GRADTRACE_PYTHON", "1") == "0":
        return None
    try:
        handle = ctypes.CDLL(None)
        fns = {}
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = argtypes
            fns[name] = fn
    except (OSError, AttributeError):
        return None
    return fns


lib = _load()


def _load_optional(name, restype, argtypes):
    # Functions newer than the first agent API: absent from an older agent,
    # which then simply does without them.
    if lib is None:
        return None
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except AttributeError:
        return None
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


# gt_set_rank(rank, world_size): API minor 1.
set_rank = _load_optional("gt_set_rank", None,
                          [ctypes.c_int32, ctypes.c_int32])

# gt_step_expect(): API minor 2.
step_expect = _load_optional("gt_step_expect", None, [])

# gt_hooks_wanted(): API minor 2; without it module hooks stay installed.
hooks_wanted = _load_optional("gt_hooks_wanted", ctypes.c_int, [])

# gt_finish(): API minor 3; an older agent's stream then ends cut short
# when the interpreter kills itself after a KeyboardInterrupt.
finish = _load_optional("gt_finish", None, [])

# gt_layer_info(layer, cls, flags): API minor 5; without it a compiled
# region's layers have no class, and inside the bare root its layer names
# have the root's name in front.
layer_info = _load_optional("gt_layer_info", None, [ctypes.c_uint32] * 3)
LAYER_F_BARE_ROOT = 0x1
LAYER_F_ROOT_CHILD = 0x2  # a direct child of the bare root

# gt_torch_param(tensor_impl, module path id, parameter name id).
torch_param = _load_optional("gt_torch_param", None,
                             [ctypes.c_uint64, ctypes.c_uint32,
                              ctypes.c_uint32])


def intern(s):
    """Agent string id of s (0 when the agent is absent or out of memory)."""
    if lib is None:
        return 0
    return lib["gt_intern"](s.encode("utf-8", "replace"))
