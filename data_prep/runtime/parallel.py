"""Per-file work on every core of the local DirectRunner's one process, in forked children of it.

The ingest's per-file work holds the GIL for about half its time (Pillow parses each file's
header in Python), so threads of one process cannot keep two cores busy. Forked children can,
without what Beam's own worker processes cost: each of those imports Beam and
receives every element through the runner's data channel, while a forked child starts with the
parent's modules already imported. One pool per process, shared by every Beam thread in it, so a
runner that runs several bundles at once does not multiply them. Tasks are coarse (a bundle of
files, a whole shard) so that a task's pickling is noise beside its work. How many children a
job may have is the runner's to say (data_prep/runtime/running_mode.py pool_workers): none on any
runner but the local DirectRunner in one process, whose workers are the parallelism.
"""

from __future__ import annotations

import atexit
import collections
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from data_prep.runtime.fork_memory import share_parent_memory_with_forked_children

_PARENT_CHECK_S = 0.5
LOGGER = logging.getLogger(__name__)


_pools: dict[int, ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(workers: int) -> ProcessPoolExecutor:
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_start_child,
                initargs=(os.getpid(),),
            )
            # Stopped before multiprocessing's own atexit handler, which waits for every child.
            atexit.register(pool.shutdown)
        return pool


def release_pools() -> None:
    """Stops the process's pools once its job is done. A forked child keeps the pages its parent
    had when it forked, which the parent then copies as it writes them: a pool left idle for the
    rest of `imgpipe run` holds hundreds of MB while the Trainer and Evaluator work."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        atexit.unregister(pool.shutdown)
        pool.shutdown()


def _forget_pools() -> None:
    """A forked child has the pool objects but none of their processes: it makes its own."""
    global _pools_lock
    _pools_lock = threading.Lock()
    _pools.clear()


def _start_child(parent: int) -> None:
    """A child leaves interrupts to its parent (Ctrl-C reaches the whole process group; the
    parent's Python handlers were copied by the fork), and ends once its parent is gone: a
    parent that is killed never tells its pool to stop, and the pool's queues never close for
    the child, whose siblings hold their ends too."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_end_with, args=(parent,), daemon=True).start()


def _end_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    os._exit(0)


os.register_at_fork(after_in_child=_forget_pools)
share_parent_memory_with_forked_children()


def _submit(workers: int, function: Callable, args: tuple) -> Future:
    """Starts function(*args) on the pool; a pool broken by a child that died (killed, or a C
    library crashed it) failed the task that was running, and is replaced for the next one."""
    try:
        return _pool(workers).submit(function, *args)
    except BrokenProcessPool:
        with _pools_lock:
            _pools.pop(workers, None)
        return _pool(workers).submit(function, *args)


def _run_here(function: Callable, args: tuple) -> Future:
    """function(*args) in the calling thread, as a finished Future (its result or exception)."""
    future = Future()
    try:
        future.set_result(function(*args))
    except Exception as error:  # noqa: BLE001  raised again where its result is due
        future.set_exception(error)
    return future


class OrderedWindow:
    """Tasks handed in one call at a time (a DoFn's bundles or shards, across its elements) run
    on the process's pool of `workers` children, at most per_worker per child in flight, so
    memory holds a few tasks' inputs, never a whole dataset's; their results come back in the
    order the tasks were submitted. An exception is raised where its task's result would be. A
    task whose child died runs once more on a new pool: a file's own decoding is bounded in a
    child of that child (data_prep/runtime/supervised.py), so a lost pool child is the process's
    misfortune (a C library aborting at fork), not a task's; a second loss fails it. A task's
    function and arguments are pickled to the child: a module-level function, picklable
    arguments. With no workers, each task runs in the calling thread as it is submitted."""

    def __init__(self, workers: int, per_worker: int):
        self._workers = workers
        self._size = max(1, per_worker * workers)
        self._pending = collections.deque()

    def submit(self, function: Callable, *args) -> list:
        """Starts function(*args); returns the results now due (oldest first), waiting for them
        only while the window is full."""
        if self._workers:
            future = _submit(self._workers, function, args)
        else:
            future = _run_here(function, args)
        self._pending.append((future, function, args))
        due = []
        while len(self._pending) >= self._size:
            due.append(self._result(*self._pending.popleft()))
        return due

    def drain(self) -> Iterator:
        """Every result not returned yet, in order."""
        while self._pending:
            yield self._result(*self._pending.popleft())

    def _result(self, future: Future, function: Callable, args: tuple):
        try:
            return future.result()
        except BrokenProcessPool as error:
            LOGGER.warning("a pool child ended abruptly (%s); its task runs again", error)
            return _submit(self._workers, function, args).result()
