"""The layer naming rules (python/gradtrace/_naming.py, schema/torch.md
"Module names"), without the agent: the package's Python scope hooks run
as torch global module hooks, and a recorder stands in for the agent's
gt_module_begin/end and gt_intern, so each test reads the names of the
scopes opened.

  - the first root keeps bare named_modules() paths and is named by its
    class; later roots get their class as prefix, "#2"... when taken;
  - a module known from a root's map that runs with nothing open (a block
    called on its own, one recomputed by checkpointing in the backward)
    keeps its full path;
  - a new root containing an earlier one takes it over; a root's names
    are released when it is collected;
  - wrapper segments are in no path and a wrapper pair opens one scope;
  - a module registered under no root is "<enclosing path>.<Class>", a
    shared one has its first path;
  - scopes stay balanced when a forward raises and the exception is
    caught inside an outer forward (1.13's global hooks skip post-hooks).

Runs under pytest, or as a script (exit 0, 77 when torch is missing);
`make pyunit` runs it with each interpreter that has torch.
"""
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

torch, MISSING = pyunit.torch_or_reason()
if torch is not None:
    from torch import nn
    import torch.nn.modules.module as MM
    from gradtrace import _naming, _scopes

opened = []      # names of the scopes open now, innermost last
log = []         # every scope opened, in order
_names = {}      # interned string -> id, and back
_ids = {}


def _intern(s):
    if s not in _names:
        _names[s] = len(_names) + 1
        _ids[_names[s]] = s
    return _names[s]


def _begin(path_id, class_id):
    opened.append(_ids[path_id])
    log.append((_ids[path_id], _ids[class_id]))


def _end():
    opened.pop()


class _Hooks:
    """The package's Python hooks as torch global hooks, on a clean
    registry, for the length of a with block."""

    def __enter__(self):
        for d in (_naming._known, _naming._roots, _naming._taken,
                  _naming._params):
            d.clear()
        _scopes._tls.stack, _scopes._tls.ents = [], []
        _scopes._tls.root_map = None
        _naming._intern = _intern
        _scopes._begin, _scopes._end = _begin, _end
        del opened[:], log[:]
        self.h = (MM.register_module_forward_pre_hook(_scopes._pre_hook),
                  MM.register_module_forward_hook(_scopes._post_hook))
        return self

    def __exit__(self, *exc):
        for h in self.h:
            h.remove()
        return False


def names():
    return [n for n, _ in log]


if torch is not None:
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(4, 4)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.up(x))

    class Net(nn.Module):
        def __init__(self, n=2):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(n)])
            self.head = nn.Linear(4, 1)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    class DistributedDataParallel(nn.Module):
        """Shaped like torch's DDP for the wrapper rule (named by class)."""

        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, x):
            return self.module(x)


def test_first_root_bare_later_roots_prefixed():
    if torch is None:
        return _skip()
    with _Hooks():
        net, x = Net(), torch.randn(2, 4)
        loss = nn.MSELoss()
        loss(net(x), torch.zeros(2, 1))
        assert names() == ["Net", "blocks.0", "blocks.0.up", "blocks.0.act",
                           "blocks.1", "blocks.1.up", "blocks.1.act", "head",
                           "MSELoss"], names()
        assert log[0] == ("Net", "Net") and log[2] == ("blocks.0.up", "Linear")
        assert opened == []


def test_same_class_roots_get_numbers():
    if torch is None:
        return _skip()
    with _Hooks():
        g = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        d = nn.Sequential(nn.Linear(4, 1))
        x = torch.randn(2, 4)
        d(g(x))
        assert names() == ["Sequential", "0", "1",
                           "Sequential#2", "Sequential#2.0"], names()


def test_root_named_like_a_taken_path_gets_a_number():
    if torch is None:
        return _skip()
    with _Hooks():
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.Linear = nn.Linear(4, 4)   # the path "Linear"

            def forward(self, x):
                return self.Linear(x)

        x, outer = torch.randn(1, 4), Outer()
        outer(x)
        nn.Linear(4, 4)(x)          # a second root of class Linear
        assert names() == ["Outer", "Linear", "Linear#2"], names()
        del outer                   # collected: its names are free again
        gc.collect()
        del log[:]
        nn.Linear(4, 4)(x)
        assert names() == ["Linear"], names()


def test_known_module_run_alone_keeps_its_path():
    if torch is None:
        return _skip()
    with _Hooks():
        net, x = Net(), torch.randn(2, 4)
        net(x)
        del log[:]
        net.blocks[1](x)            # nothing open: known from Net's map
        assert names() == ["blocks.1", "blocks.1.up", "blocks.1.act"], names()


def test_checkpoint_recompute_in_backward_keeps_its_path():
    if torch is None:
        return _skip()
    from torch.utils.checkpoint import checkpoint

    class CkNet(Net):
        def forward(self, x):
            x = checkpoint(self.blocks[0], x, use_reentrant=True)
            return self.head(self.blocks[1](x))

    with _Hooks():
        net = CkNet()
        x = torch.randn(2, 4, requires_grad=True)
        out = net(x).sum()
        del log[:]
        out.backward()
        assert names() == ["blocks.0", "blocks.0.up", "blocks.0.act"], names()
        assert not any(n.startswith(("Block", "Linear")) for n in names())


def test_new_root_takes_over_an_earlier_root():
    if torch is None:
        return _skip()
    with _Hooks():
        net, x = Net(), torch.randn(2, 4)
        net.blocks[0](x)            # first seen alone: the bare root "Block"
        assert names() == ["Block", "up", "act"], names()
        del log[:]
        net(x)                      # contains it: takes it over, bare
        assert names()[:3] == ["Net", "blocks.0", "blocks.0.up"], names()
        del log[:]
        net.blocks[0](x)
        assert names() == ["blocks.0", "blocks.0.up", "blocks.0.act"], names()


def test_collected_root_releases_its_name():
    if torch is None:
        return _skip()
    with _Hooks():
        net, x = Net(1), torch.randn(2, 4)
        for _ in range(3):
            y = net(x)
            nn.MSELoss()(y, torch.zeros(2, 1))  # a new loss module each step
            gc.collect()
        assert [n for n in names() if n.startswith("MSELoss")] == \
            ["MSELoss"] * 3, names()


def test_live_roots_keep_distinct_names():
    if torch is None:
        return _skip()
    with _Hooks():
        x = torch.randn(2, 4)
        keep = [nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)]
        for m in keep:
            m(x)
        for m in keep:
            m(x)
        assert names() == ["Linear", "Linear#2", "Linear#3"] * 2, names()


def test_wrapper_segment_is_in_no_path_and_opens_no_scope():
    if torch is None:
        return _skip()
    with _Hooks():
        net, x = Net(1), torch.randn(2, 4)
        ddp = DistributedDataParallel(net)
        ddp(x)
        assert names() == ["Net", "blocks.0", "blocks.0.up", "blocks.0.act",
                           "head"], names()
        assert opened == []


def test_torch_checkpoint_wrapper_named_as_what_it_wraps():
    if torch is None:
        return _skip()
    try:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper \
            import checkpoint_wrapper
    except ImportError:
        return _skip("torch without checkpoint_wrapper")
    with _Hooks():
        net, x = Net(1), torch.randn(2, 4, requires_grad=True)
        net.blocks[0] = checkpoint_wrapper(net.blocks[0])
        net(x)
        assert names() == ["Net", "blocks.0", "blocks.0.up", "blocks.0.act",
                           "head"], names()


def test_unregistered_and_shared_modules():
    if torch is None:
        return _skip()

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = self.a          # shared: registered twice
            self.loose = [nn.Tanh()]  # in a plain list: under no root

        def forward(self, x):
            return self.loose[0](self.b(self.a(x)))

    with _Hooks():
        Odd()(torch.randn(1, 4))
        assert names() == ["Odd", "a", "a", "Odd.Tanh"], names()


def test_scopes_balanced_when_a_forward_raises():
    if torch is None:
        return _skip()

    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(4, 4)

        def forward(self, x):
            self.inner(x)
            raise KeyError("k")

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.bad = Bad()
            self.ok = nn.Linear(4, 4)

        def forward(self, x):
            try:
                self.bad(x)
            except KeyError:
                pass
            return self.ok(x)

    with _Hooks():
        m, x = Outer(), torch.randn(1, 4)
        m(x)
        m(x)
        assert opened == [], opened
        assert names() == ["Outer", "bad", "bad.inner", "ok"] * 2, names()


def test_names_and_classes_are_told_once_with_the_bare_root():
    # gt_layer_info: every name of a root's map with its class, once; the
    # bare root flagged (compiled regions' layers open no scope), and its
    # direct children.
    from gradtrace import _agent
    told = []
    old = _agent.layer_info
    _agent.layer_info = lambda layer, cls, flags: told.append(
        (_ids[layer], _ids[cls], flags))
    try:
        with _Hooks():
            a, b = Net(), Net(1)
            x = torch.randn(1, 4)
            a(x)
            a(x)
            b(x)
    finally:
        _agent.layer_info = old
    F, C = _agent.LAYER_F_BARE_ROOT, _agent.LAYER_F_ROOT_CHILD
    assert ("Net", "Net", F) in told, told
    assert ("blocks.0.up", "Linear", 0) in told, told
    # The bare root's direct children say so (their rows nest under it
    # also when they run no forward); another root's never do.
    assert ("blocks", "ModuleList", C) in told, told
    assert ("Net#2", "Net", 0) in told and ("Net#2.blocks.0", "Block", 0) in told, told
    assert ("Net#2.blocks", "ModuleList", 0) in told, told
    assert len(told) == len(set(told)), "each name once: %s" % told
    assert [t for t in told if t[2] & F] == [("Net", "Net", F)], "one bare root"
    assert all("." not in t[0] for t in told if t[2] & C), told


def _skip(why=None):
    pyunit.skip(why or MISSING, torch is None)


if __name__ == "__main__":
    pyunit.main(globals(), MISSING if torch is None else None)
