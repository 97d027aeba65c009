"""existing_objects_frozen: objects alive before the block are out of collections inside it and
back in after it, even when the block raises."""

import gc

import pytest

from data_prep.gc_freeze import existing_objects_frozen


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
