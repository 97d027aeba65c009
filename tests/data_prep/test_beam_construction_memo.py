"""data_prep/beam_construction_memo.py: Beam's answers unchanged, asked once, and only inside."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import DebugOptions, DirectOptions, PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, userstate

from data_prep import beam_construction_memo


class _CountPerKey(beam.DoFn):
    """A stateful DoFn: Beam finds its state parameter through the memoized inspection."""

    COUNT = userstate.CombiningValueStateSpec("count", sum)

    def process(self, element, count=beam.DoFn.StateParam(COUNT)):  # noqa: B008 - Beam's idiom
        count.add(1)
        yield element[0], count.read()


def _run_stateful_job() -> None:
    options = PipelineOptions(["--direct_running_mode=in_memory", "--direct_num_workers=1"])
    with beam.Pipeline(options=options) as pipeline:
        counted = (
            pipeline
            | beam.Create([("a", 1), ("a", 2), ("b", 3)])
            | beam.ParDo(_CountPerKey())
            | beam.combiners.Count.PerKey()
        )
        assert_that(counted, equal_to([("a", 2), ("b", 1)]))


@pytest.fixture
def inspections(monkeypatch):
    """Calls of Beam's own get_function_args_defaults, counted."""
    calls = []
    original = core.get_function_args_defaults

    def counted(f):
        calls.append(f)
        return original(f)

    monkeypatch.setattr(core, "get_function_args_defaults", counted)
    return calls


def test_a_view_is_built_once_per_class_and_shares_the_options():
    options = PipelineOptions(["--direct_num_workers=3"])
    with beam_construction_memo.memoized():
        view = options.view_as(DirectOptions)
        assert options.view_as(DirectOptions) is view
        assert view.direct_num_workers == 3  # the flags a user passed still decide
        options.view_as(DebugOptions).experiments = ["one"]
        assert options.view_as(DebugOptions).experiments == ["one"]
        assert PipelineOptions(["--direct_num_workers=5"]).view_as(DirectOptions) is not view
    assert options.view_as(DirectOptions) is not options.view_as(DirectOptions)
    assert options.view_as(DebugOptions).experiments == ["one"]


def test_a_function_is_inspected_once_while_its_signature_holds(inspections):
    def step(element, scale=2):
        return element * scale

    with beam_construction_memo.memoized():
        first = core.get_function_args_defaults(step)
        first[0].append("changed by a caller")
        assert core.get_function_args_defaults(step) == (["element", "scale"], [2])
        assert len(inspections) == 1
        step.__defaults__ = (3,)
        assert core.get_function_args_defaults(step) == (["element", "scale"], [3])
        assert len(inspections) == 2
        bound = _CountPerKey().process
        args, defaults = core.get_function_args_defaults(bound)
        assert args == ["element", "count"]  # bound: no self
        assert isinstance(defaults[0], beam.DoFn.StateParam)
    core.get_function_args_defaults(step)
    assert len(inspections) == 4  # restored: every call inspects again


def test_a_dofns_state_specs_are_found_once_per_dofn(monkeypatch):
    walks = []
    original = userstate.get_dofn_specs
    monkeypatch.setattr(
        userstate, "get_dofn_specs", lambda dofn: walks.append(dofn) or original(dofn)
    )
    dofn, other = _CountPerKey(), _CountPerKey()
    with beam_construction_memo.memoized():
        state_specs, timer_specs = userstate.get_dofn_specs(dofn)
        state_specs.clear()  # a caller's change stays its own
        assert userstate.is_stateful_dofn(dofn)
        assert userstate.get_dofn_specs(dofn) == ({_CountPerKey.COUNT}, set())
        assert walks == [dofn]
        assert userstate.is_stateful_dofn(other) and walks == [dofn, other]
    assert userstate.is_stateful_dofn(dofn) and walks == [dofn, other, dofn]


def test_a_stateful_job_runs_alike_with_a_fraction_of_the_inspections(inspections):
    _run_stateful_job()
    plain = len(inspections)
    inspections.clear()
    with beam_construction_memo.memoized():
        _run_stateful_job()
    assert 0 < len(inspections) < plain / 3
