"""Per-file work on every core a worker has, in forked processes of it.

The ingest's per-file work holds the GIL for about half its time (Pillow parses each file's
header in Python), so threads of one process cannot keep two cores busy. Forked children can,
without what Beam's own worker processes cost: each of those imports Beam and
receives every element through the runner's data channel, while a forked child starts with the
parent's modules already imported. One pool per process, one child per core, shared by every
Beam thread in it, so a runner that runs several bundles at once does not multiply them. Tasks
are coarse (a bundle of files, a whole shard) so that a task's pickling is noise beside its work.
"""

from __future__ import annotations

import atexit
import collections
import functools
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from data_prep.gc_freeze import existing_objects_frozen
from data_prep.runtime.cores import usable_cores

_PARENT_CHECK_S = 0.5


@functools.cache
def _pool() -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(
        usable_cores(),
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_child,
        initargs=(os.getpid(),),
    )
    # Forked now (a pool that forks forks all its children at its first task), with the
    # parent's objects frozen (data_prep/gc_freeze.py): 0.8 s less of an ingest of 20,000
    # photos and 2 CPU s less of its children's time, side by side, three pairs.
    with existing_objects_frozen():
        pool.submit(int).result()
    # Stopped by the atexit handlers, which `imgpipe` runs before it ends without the
    # interpreter's teardown: the pool's own exit hook runs only in that teardown, and
    # multiprocessing's atexit handler waits for every child, so it would wait forever. Registered
    # after multiprocessing's, so it runs before it.
    atexit.register(pool.shutdown)
    return pool


def _start_child(parent: int) -> None:
    """A child leaves interrupts to its parent (Ctrl-C reaches the whole process group; the
    parent's Python handlers were copied by the fork), and ends once its parent is gone: a
    parent that is killed, or ends with os._exit before its atexit handlers, never tells its
    pool to stop, and the pool's queues never close for the child, whose siblings hold their
    ends too."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_end_with, args=(parent,), daemon=True).start()


def _end_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    os._exit(0)


# A forked child has the pool object but none of its processes: it makes its own.
os.register_at_fork(after_in_child=_pool.cache_clear)


def _submit(function: Callable, args: tuple):
    """Starts function(*args) on the pool; a pool broken by a child that died (killed, or a C
    library crashed it) failed the task that was running, and is replaced for the next one."""
    try:
        return _pool().submit(function, *args)
    except BrokenProcessPool:
        _pool.cache_clear()
        return _pool().submit(function, *args)


class OrderedWindow:
    """Tasks handed in one call at a time (a DoFn's bundles or shards, across its elements) run
    on the process's pool, at most per_worker per child in flight, so memory holds a few tasks'
    inputs, never a whole dataset's; their results come back in the order the tasks were
    submitted. An exception is raised where its task's result would be. A task's function and
    arguments are pickled to the child: a module-level function, picklable arguments."""

    def __init__(self, per_worker: int):
        self._size = per_worker * usable_cores()
        self._pending = collections.deque()

    def submit(self, function: Callable, *args) -> list:
        """Starts function(*args); returns the results now due (oldest first), waiting for them
        only while the window is full."""
        self._pending.append(_submit(function, args))
        due = []
        while len(self._pending) >= self._size:
            due.append(self._pending.popleft().result())
        return due

    def drain(self) -> Iterator:
        """Every result not returned yet, in order."""
        while self._pending:
            yield self._pending.popleft().result()
