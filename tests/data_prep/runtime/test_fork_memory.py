"""A garbage collection in a forked child leaves its parent's heap shared, not copied."""

import gc

import psutil

from data_prep.runtime.supervised import Bounds, SupervisedWorker


# Run in the child: what a collection copies as the child is forked, then what the same
# collection copies once the parent's objects are the child's to collect (the reference, measured
# in the same process, so other processes' memory and the machine's load do not enter).
def _bytes_copied_by_a_collection(_):
    child = psutil.Process()
    start = child.memory_full_info().uss
    gc.collect()
    shared = child.memory_full_info().uss
    gc.unfreeze()
    gc.collect()
    return shared - start, child.memory_full_info().uss - shared


def test_a_collection_in_a_supervised_child_copies_none_of_the_parent_heap():
    heap = [[index] for index in range(600_000)]  # lists: always tracked by the collector
    worker = SupervisedWorker(
        _bytes_copied_by_a_collection, Bounds(memory_bytes=256 * 2**20, timeout_s=60.0)
    )
    try:
        copied, reference = worker.call(None)
    finally:
        worker.close()
    assert len(heap) == 600_000
    assert reference > 20 * 2**20  # the heap's pages, copied once the collector walks them
    assert copied < reference / 10
