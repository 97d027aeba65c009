"""existing_objects_frozen: objects alive before the block are out of collections inside it and
back in after it, even when the block raises, unless the process froze them before (then they
stay frozen). imports_frozen: no collection while a command imports, its objects frozen after."""

import gc

import pytest

from data_prep.gc_freeze import existing_objects_frozen, imports_frozen


@pytest.fixture(autouse=True)
def nothing_frozen():
    """Each test starts and ends with no object frozen: a command run in this test process
    (imports_frozen) leaves its objects frozen for good."""
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.enable()


def test_objects_alive_before_the_block_are_frozen_only_inside_it():
    assert gc.get_freeze_count() == 0
    with existing_objects_frozen():
        assert gc.get_freeze_count() > 1000
    assert gc.get_freeze_count() == 0


def test_a_failing_block_unfreezes_them_too():
    with pytest.raises(RuntimeError), existing_objects_frozen():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_garbage_made_inside_the_block_is_still_collected():
    with existing_objects_frozen():
        cycle = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1


def test_imports_run_without_collections_and_their_objects_stay_frozen():
    with imports_frozen():
        assert not gc.isenabled()
        loaded = [[] for _ in range(1000)]  # what an import leaves alive
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    assert frozen > len(loaded)
    cycle = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1  # what is made later is collected as usual
    # Still frozen: an unfreeze would empty the count (reference counting may free a few).
    assert gc.get_freeze_count() > frozen // 2


def test_a_block_of_work_after_the_imports_leaves_them_frozen():
    with imports_frozen():
        pass
    frozen = gc.get_freeze_count()
    with existing_objects_frozen():
        pass
    assert gc.get_freeze_count() > frozen // 2  # an unfreeze would have made it 0


def test_a_caller_s_disabled_collector_stays_disabled():
    gc.disable()
    with imports_frozen():
        pass
    assert not gc.isenabled()
