"""Which profiler range holds an event: the legacy profiler's nesting.

torch.autograd.profiler.profile(use_kineto=False) is the tests' ground
truth. Its times are whole microseconds, and for nested ranges an inner
end is sometimes recorded up to 1 us after its outer one (seen 1 run in 8
on 2 busy cores: aten::mul [1482, 1484] inside evaluate_function
[1480, 1483]), so comparing ends alone puts such an op outside its range.
Start order is exact: an event's id is its range's handle, given at push.
So e is inside r when r started first and e started strictly before r's
end; only a start in r's last microsecond falls back on comparing ends.
"""


def inside(r, e):
    if r is e or r.id > e.id or r.thread != e.thread:
        return False
    if e.time_range.start < r.time_range.end:
        return True
    return (e.time_range.start == r.time_range.end
            and e.time_range.end <= r.time_range.end)


def innermost(ranges, e):
    """The innermost of ranges (one thread's, sorted by id) holding e."""
    best = None
    for r in ranges:
        if r.id > e.id:
            break
        if inside(r, e):
            best = r
    return best
