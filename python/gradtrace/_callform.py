"""The package's nn.Module.__call__, apart from everything that needs the
agent, so that its rule can be tested without one (tests/python).

make() returns a real Python function around torch's __call__ and the
one-element list that switches its hooks on. A function, and not a C
object, because torch.compile's dynamo traces whatever it finds as
nn.Module.__call__ (read from the class, raw from the class dict, or
bound once by torch.compile(module)); its first test on torch 2.x is
torch.compiler.is_compiling(), which dynamo folds to True, so dynamo
traces torch's __call__ and reads none of our state (no guard on the on
switch). With the C hooks (_gthooks) the same function gets a C
vectorcall (_gthooks.fast_call) doing what its bytecode does, so eager
module calls pay no Python frame: _switch.py, "How the hooks reach
torch", and _hooks.c say the rest.
"""


def make(orig, compiling, pre, post, c_hooks=None):
    """Our __call__ around orig, calling pre(module, args) before and
    post(module, args, None) after (also when orig raises) while on[0]
    is True. compiling: torch.compiler.is_compiling, or None (torch
    without it). c_hooks: the _gthooks module, when pre and post are its
    pre_hook and post_hook: the function then runs in C.
    @return (function, on)."""
    on = [False]

    if compiling is not None:
        def __call__(self, *args, **kwargs):
            # Folded first by dynamo: it traces torch's __call__ alone.
            if compiling() or not on[0]:
                return orig(self, *args, **kwargs)
            pre(self, args)
            try:
                return orig(self, *args, **kwargs)
            finally:
                post(self, args, None)
    else:
        def __call__(self, *args, **kwargs):
            if not on[0]:
                return orig(self, *args, **kwargs)
            pre(self, args)
            try:
                return orig(self, *args, **kwargs)
            finally:
                post(self, args, None)
    if c_hooks is not None and pre is c_hooks.pre_hook and \
            post is c_hooks.post_hook:
        try:
            c_hooks.fast_call(__call__, on, orig)
        except Exception:  # the bytecode does the same, more slowly
            pass
    return __call__, on
