"""The training loop's named steps, each alone."""

import dataclasses

import pytest

from components.training.loop import steps_until_boundary
from components.training.schedule import Phase
from components.training.trainer_config import runlocal

PHASE = Phase("full", 0, 30, 1e-3, 0, True)


@pytest.mark.parametrize(
    ("step", "changes", "expected"),
    [
        (0, {}, 8),  # a full graph call
        (8, {}, 2),  # cut at the end of the first epoch (10 steps)
        (28, {}, 2),  # cut at the end of the phase
        (0, {"checkpoint_every_steps": 5}, 5),
        (0, {"profile_steps": (4, 6)}, 3),  # the profiler starts before step 4
        (3, {"profile_steps": (4, 6)}, 3),  # and stops after step 6
    ],
)
def test_a_graph_call_stops_at_the_next_boundary(step, changes, expected):
    settings = {"steps_per_execution": 8, "checkpoint_every_steps": 0, **changes}
    config = dataclasses.replace(runlocal(), **settings)
    assert steps_until_boundary(step, PHASE, 10, config) == expected
