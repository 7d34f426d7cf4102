"""gradtrace and torch.distributed: collectives recorded for clock
alignment, and job-wide triggers (_jobtrig.py).

Every synchronous call of torch.distributed's collectives made from Python
(all_reduce, barrier, broadcast, ...) is timed with the agent's clock and
recorded as one GT_R_COLLECTIVE (gt_collective): its name, its process
group (0 for the default one, else a number derived from the group's
ranks, the same on every member), the group's size, and its sequence
number among the group's recorded calls. Every member of a group makes the
same calls in the same order (torch requires it), so (group, seq) names
one collective on every rank, and `gradtrace merge` lines their ends up to
put the ranks on one clock. Asynchronous calls (async_op=True) are not
timed: their end is not the collective's. Nor are calls on an NCCL group:
they return once the work is enqueued on the GPU, so their host times
bracket nothing; the converter takes the NCCL kernels themselves as the
collectives instead (their start and end on the GPU do bracket it).

Every call, synchronous or not, is also communication on its thread:
gt_comm_begin/end (API minor 6) around it, which while capturing make a
scope the converter counts as the enclosing backward node's communication
rather than its compute (FSDP2's reduce-scatter inside its post-backward
node; an async call's launch). Calls nested in another recorded one (a
collective made of others) are inside its scope.

Cost: two clock reads and one record per collective, two more C calls
that record only while capturing; nothing per step.
Inert without the agent (or with an agent older than API minor 2).
"""

import ctypes
import functools
import threading
import zlib

from . import _agent

_now = _agent._load_optional("gt_now_ns", ctypes.c_uint64, [])
_comm_begin = _agent._load_optional("gt_comm_begin", None, [ctypes.c_uint32])
_comm_end = _agent._load_optional("gt_comm_end", None, [ctypes.c_uint32])
_collective = _agent._load_optional(
    "gt_collective", None,
    [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64,
     ctypes.c_uint64, ctypes.c_uint64])

# name -> index of the `group` positional argument (async_op follows it).
_COLLECTIVES = {
    "all_reduce": 2, "barrier": 0, "broadcast": 2, "all_gather": 2,
    "reduce": 3, "reduce_scatter": 3, "all_to_all": 2,
    "all_gather_into_tensor": 2, "reduce_scatter_tensor": 3,
    "all_to_all_single": 4, "gather": 3, "scatter": 3,
    # torch 2.15's single-tensor forms (what FSDP2 calls).
    "all_gather_single": 2, "reduce_scatter_single": 3,
}

_lock = threading.Lock()
_seq = {}            # group number -> calls recorded so far
_group_ids = {}      # id(group object) -> (group object, (number, size) or None)
_installed = False


def _not_compiling():
    return False


_compiling = _not_compiling


def _group_info(dist, group):
    """(number, size) of a process group, (0, world) for the default one;
    None for a group whose calls are not timed (NCCL)."""
    member = getattr(dist, "GroupMember", None)
    key = None if group is None or (member is not None and group is member.WORLD) \
        else group
    hit = _group_ids.get(id(key))
    if hit is not None and hit[0] is key:
        return hit[1]
    if "nccl" in str(dist.get_backend(key)).lower():
        info = None
    elif key is None:
        info = (0, dist.get_world_size())
    else:
        try:
            ranks = dist.get_process_group_ranks(key)
        except AttributeError:  # torch 1.13
            ranks = sorted(dist.distributed_c10d._pg_group_ranks[key].keys())
        info = (zlib.crc32(",".join(str(r) for r in ranks).encode()) or 1,
                len(ranks))
    _group_ids[id(key)] = (key, info)
    return info


def _wrap(dist, name, fn, gpos):
    op = _agent.intern(name)

    def call(args, kwargs):
        if _comm_begin is None:
            return fn(*args, **kwargs)
        _comm_begin(op)
        try:
            return fn(*args, **kwargs)
        finally:
            _comm_end(op)

    @functools.wraps(fn)
    def collective(*args, **kwargs):
        if _compiling():
            # Dynamo folds this to True and traces fn itself, which it
            # rewrites into its functional collective: a compiled region
            # compiles as without gradtrace (fullgraph included).
            return fn(*args, **kwargs)
        if kwargs.get("async_op") or (len(args) > gpos + 1 and args[gpos + 1]):
            return call(args, kwargs)
        t0 = _now()
        result = call(args, kwargs)
        t1 = _now()
        try:
            group = kwargs.get("group", args[gpos] if len(args) > gpos else None)
            info = _group_info(dist, group)
            if info is None:
                return result
            number, size = info
            with _lock:
                seq = _seq.get(number, 0)
                _seq[number] = seq + 1
            _collective(op, number, size, seq, t0, t1)
        except Exception:  # never the program's problem
            pass
        return result

    collective.__gradtrace_wrapped__ = fn
    return collective


def install():
    """Wraps torch.distributed's collectives (idempotent)."""
    global _installed
    if _installed or _now is None or _collective is None:
        return False
    try:
        import torch.distributed as dist
        if not dist.is_available():
            return False
        c10d = dist.distributed_c10d
    except Exception:
        return False
    _installed = True
    global _compiling
    try:
        import torch.compiler
        _compiling = torch.compiler.is_compiling
    except (ImportError, AttributeError):  # torch 1.13: nothing compiles
        pass
    for name, gpos in _COLLECTIVES.items():
        fn = getattr(c10d, name, None)
        if fn is None or hasattr(fn, "__gradtrace_wrapped__"):
            continue
        wrapped = _wrap(dist, name, fn, gpos)
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is fn:
            setattr(dist, name, wrapped)
    from . import _jobtrig
    _jobtrig.install()
    return True
