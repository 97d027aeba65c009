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
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor


def _threads() -> int:
    return len(os.sched_getaffinity(0))  # the cores this process may run on


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(_threads(), thread_name_prefix="ingest")


# A forked child has the pool object but none of its threads: it makes its own.
os.register_at_fork(after_in_child=_pool.cache_clear)


def ordered_map(function: Callable, items: Iterable) -> Iterator:
    """function(item) for each item, computed on the process's threads and yielded in the
    items' order; at most two results per thread are in flight, so memory holds a few files,
    never a whole bundle or shard. An exception is raised where its item's result would be."""
    pool, window = _pool(), 2 * _threads()
    pending = collections.deque()
    for item in items:
        pending.append(pool.submit(function, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
