"""The process's rank, when the environment does not give it: learnt
from torch.distributed once its default process group exists, checked
when a new root is mapped and after each optimizer step until known, then
passed to the agent (gt_set_rank)."""

import os
import sys

from . import _agent

# Whether the rank is still to be learnt from torch.distributed. RANK is
# the launcher's (torchrun), read once at import like every setting.
_unknown = (_agent.set_rank is not None and
            os.environ.get("RANK", "") == "")


def check():
    """Passes the rank to the agent if it is unknown and can be known."""
    global _unknown
    if not _unknown:
        return
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is None or not dist.is_available() or \
                not dist.is_initialized():
            return
        rank, world = dist.get_rank(), dist.get_world_size()
    except Exception:
        return
    _unknown = False
    if rank >= 0:
        _agent.set_rank(rank, world)
