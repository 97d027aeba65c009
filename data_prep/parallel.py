"""Per-file work on every core a worker process has, on threads.

The ingest's per-file work is reading, hashing and decoding, which release the GIL (file reads,
hashlib, Pillow's decoders), so threads of one process share the cores without what worker
processes cost: their start-up (each imports Beam and the decoders) and a copy of every element
between processes. One pool per process, shared by every Beam thread in it, so a runner that runs
several bundles at once does not multiply the threads.
"""

from __future__ import annotations

import collections
import functools
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from data_prep.cores import usable_cores


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(usable_cores(), thread_name_prefix="ingest")


# A forked child has the pool object but none of its threads: it makes its own.
os.register_at_fork(after_in_child=_pool.cache_clear)


class OrderedWindow:
    """Tasks handed in one call at a time (a DoFn's files or shards, across its elements) run on
    the process's threads, at most per_thread per thread in flight, so memory holds a few files,
    never a whole bundle or shard; their results come back in the order the tasks were
    submitted. An exception is raised where its task's result would be. A task must not wait on
    a window itself (it would wait on the pool it occupies)."""

    def __init__(self, per_thread: int):
        self._size = per_thread * usable_cores()
        self._pending = collections.deque()

    def submit(self, function: Callable, *args) -> list:
        """Starts function(*args); returns the results now due (oldest first), waiting for them
        only while the window is full."""
        self._pending.append(_pool().submit(function, *args))
        due = []
        while len(self._pending) >= self._size:
            due.append(self._pending.popleft().result())
        return due

    def drain(self) -> Iterator:
        """Every result not returned yet, in order."""
        while self._pending:
            yield self._pending.popleft().result()
