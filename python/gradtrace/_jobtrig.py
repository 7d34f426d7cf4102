"""Job-wide triggers carried by the job's own torch.distributed store.

`gradtrace trigger --job SPEC` against any one host's daemon hands SPEC to
one agent there (GT_CTL_JOB_TRIGGER). That agent's process publishes it
in the job's rendezvous store (the TCPStore at MASTER_ADDR:MASTER_PORT
that init_process_group or torchrun created) with a common iteration a
few steps ahead; every rank's watcher thread, blocked on the store, reads
it and arms it locally (gt_trigger_arm), so every rank opens its window at
the same iteration. Nothing here listens on the network: the store is the
job's, and gradtrace only connects to it as one more client.

Store keys (all under "gradtrace/jobtrig/"):
  n        a counter (store.add): triggers published so far;
  <r>/<k>  trigger k (from 0) for rank r: "<iteration> <spec>", set by
           the publisher for every rank of the job (a key per rank, so a
           rank can wake its own watcher at exit without waking others).

Threads, daemon threads started once the default process group exists,
each with its own store client (a client is one socket, so a thread
blocked on it must own it):
  - the watcher blocks in store.wait for its key <rank>/<k>, arms trigger
    k (unless its iteration is already past: a process that joined late
    sees the job's earlier triggers) and waits for k + 1;
  - the poller asks the agent every POLL_S whether the daemon handed it a
    job trigger (a ctypes call, no I/O) and, when it did, publishes it.
A training step pays nothing: no call of this module runs in it. At exit
(atexit) the watcher is woken through its own key and joined: a thread
still blocked inside the store's C++ code when the interpreter finalizes
would abort the process.

Iteration: the publishing rank's current iteration (gt_iteration) plus
GRADTRACE_JOBTRIG_LEAD (default 3): ranks of a data-parallel job are
within a step of each other, so every rank reads the trigger before that
iteration starts. A spec with iteration=N keeps N.
"""

import ctypes
import datetime
import os
import re
import socket
import threading

from . import _agent

_take = _agent._load_optional("gt_job_trigger_take", ctypes.c_int,
                              [ctypes.c_char_p, ctypes.c_size_t])
_arm = _agent._load_optional("gt_trigger_arm", ctypes.c_int, [ctypes.c_char_p])
_iteration = _agent._load_optional("gt_iteration", ctypes.c_uint64, [])
# Tells the daemon this process can carry job triggers (API minor 3; an
# older agent hands them to any agent, as before).
_route = _agent._load_optional("gt_job_route", None, [ctypes.c_int])

PREFIX = "gradtrace/jobtrig/"
POLL_S = 0.1
WAIT_S = 3600
_started = False
_lock = threading.Lock()
_stop = threading.Event()
_state = {}          # "rank", "k" (the key the watcher waits for), "thread"
armed = []           # (k, iteration, spec) armed here: for tests and status


def _lead():
    try:
        return max(1, int(os.environ.get("GRADTRACE_JOBTRIG_LEAD", "3")))
    except ValueError:
        return 3


def _client(dist, timeout=WAIT_S):
    """A store client of our own on the job's rendezvous store, or None
    when nothing answers there (a job whose process group rendezvoused
    elsewhere): TCPStore's constructor retries its connection while
    holding the GIL, which would stall the training threads, so a plain
    socket (GIL released) asks first."""
    host = os.environ.get("MASTER_ADDR")
    port = os.environ.get("MASTER_PORT")
    if not host or not port:
        return None
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except (OSError, ValueError):
        return None
    return dist.TCPStore(host, int(port), None, False,
                         datetime.timedelta(seconds=timeout))


def _with_iteration(spec, it):
    """spec with iteration=it, unless it names a number already."""
    m = re.search(r"(^|,)iteration=([^,]*)", spec)
    if m and m.group(2).isdigit():
        return spec, int(m.group(2))
    if m:
        return spec[:m.start(2)] + str(it) + spec[m.end(2):], it
    return spec + ",iteration=%d" % it, it


def publish(store, spec, world):
    """Publishes a job trigger. @return (k, iteration, spec as published)."""
    spec, it = _with_iteration(spec, int(_iteration()) + _lead())
    k = store.add(PREFIX + "n", 1) - 1
    value = "%d %s" % (it, spec)
    for r in range(world):
        store.set("%s%d/%d" % (PREFIX, r, k), value)
    return k, it, spec


def _arm_one(k, value):
    it, _, spec = value.partition(" ")
    if not it.isdigit() or int(it) < int(_iteration()):
        return  # not a trigger, or one whose iteration has passed
    if _arm(spec.encode("utf-8", "replace")) == 0:
        with _lock:
            armed.append((k, int(it), spec))


def _watch(dist):
    store = _client(dist)
    if store is None:
        return
    rank = _state["rank"]
    k = 0
    while not _stop.is_set():
        _state["k"] = k
        key = "%s%d/%d" % (PREFIX, rank, k)
        try:
            store.wait([key], datetime.timedelta(seconds=WAIT_S))
        except RuntimeError as e:
            if "imeout" in str(e):
                continue
            return  # the store went away: the job is ending
        if _stop.is_set():
            return
        _arm_one(k, store.get(key).decode("utf-8", "replace"))
        k += 1


def _poll(dist):
    store = None
    buf = ctypes.create_string_buffer(4096)
    while not _stop.wait(POLL_S):
        n = _take(buf, len(buf))
        if n <= 0:
            continue
        if store is None:
            store = _client(dist)
            if store is None:
                return
        publish(store, buf.value[:n].decode("utf-8", "replace"),
                dist.get_world_size())


def _at_exit():
    t = _state.get("thread")
    _stop.set()
    if _route is not None:
        try:
            _route(0)
        except Exception:
            pass
    if t is None or not t.is_alive():
        return
    try:
        # Made while the store was up: at exit it may be gone, and a new
        # client would retry its connection for the whole timeout.
        _state["waker"].set("%s%d/%d" % (PREFIX, _state["rank"],
                                         _state.get("k", 0)), "exit")
    except Exception:
        pass  # the store is gone: so is the watcher's wait
    t.join(2.0)


def _run(fn, dist):
    # Every failure (no store, a store gone at the end of the job) only
    # ends this thread.
    try:
        fn(dist)
    except Exception:  # never the program's problem
        pass


def _start(dist):
    import atexit
    _state["rank"] = dist.get_rank()
    _state["waker"] = _client(dist, 5)
    if _state["waker"] is None:
        return
    threads = [threading.Thread(target=_run, args=(fn, dist), daemon=True,
                                name="gradtrace-jobtrig") for fn in (_watch, _poll)]
    _state["thread"] = threads[0]
    atexit.register(_at_exit)
    for t in threads:
        t.start()
    if _route is not None:
        _route(1)


def _wait_for_group(dist):
    # The threads start once the default group exists (its store is up).
    while not _stop.wait(0.2):
        try:
            if dist.is_initialized():
                break
        except Exception:
            return
    else:
        return
    _start(dist)


def install():
    """Starts the job-trigger threads (idempotent; inert without the agent
    API or GRADTRACE_JOBTRIG=0)."""
    global _started
    if _started or None in (_take, _arm, _iteration) or \
            os.environ.get("GRADTRACE_JOBTRIG", "1") == "0" or \
            not os.environ.get("MASTER_PORT"):
        return False
    try:
        import torch.distributed as dist
        if not dist.is_available():
            return False
    except Exception:
        return False
    _started = True
    threading.Thread(target=_run, args=(_wait_for_group, dist), daemon=True,
                     name="gradtrace-jobtrig").start()
    return True
