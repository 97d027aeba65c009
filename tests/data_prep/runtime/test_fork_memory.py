"""A garbage collection in a forked child leaves its parent's heap shared, not copied."""

import gc

import psutil

from data_prep.runtime.supervised import Bounds, SupervisedWorker


# Run in the child.
def _private_bytes_after_a_collection(_):
    gc.collect()
    return psutil.Process().memory_full_info().uss


def test_a_collection_in_a_supervised_child_copies_none_of_the_parent_heap():
    before = psutil.Process().memory_full_info().uss
    heap = [[index] for index in range(600_000)]  # lists: always tracked by the collector
    heap_bytes = psutil.Process().memory_full_info().uss - before
    worker = SupervisedWorker(
        _private_bytes_after_a_collection, Bounds(memory_bytes=256 * 2**20, timeout_s=60.0)
    )
    try:
        private = worker.call(None)
    finally:
        worker.close()
    assert len(heap) == 600_000
    assert heap_bytes > 40 * 2**20
    assert private < heap_bytes / 2
