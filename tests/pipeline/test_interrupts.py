"""Ctrl-C and SIGTERM during a run: a stop that the code it reached swallowed still ends the run,
at the component's end or the next one's start, naming the component it came in; one that a
library turned into its own error ends it as interrupted too."""

import gc
import signal
import weakref

import pytest

from pipeline import interrupts
from pipeline.cli.failures import describe_failure
from tests.pipeline.test_console import _handler, _log


class _Freed:
    """An object whose weakref callback runs when it is freed."""


def _ctrl_c_while_freeing(number=signal.SIGINT) -> None:
    """The signal arrives while the interpreter runs a weakref callback, which is where a run
    once lost it: the KeyboardInterrupt is printed as "Exception ignored" and the code goes on."""
    freed = _Freed()
    watch = weakref.ref(freed, lambda ref: signal.raise_signal(number))
    del freed
    gc.collect()
    assert watch() is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_lost_inside_a_component_stops_the_run_as_the_component_ends():
    shown, handler, out = _handler()
    with interrupts.handled():
        _log(handler, "Component %s is running.", "StatisticsGen")
        _ctrl_c_while_freeing()  # lost: the component goes on
        with pytest.raises(KeyboardInterrupt) as raised:
            _log(handler, "Component %s is finished.", "StatisticsGen")
    assert describe_failure(raised.value, shown.component)[1] == "interrupted in StatisticsGen"
    assert out.getvalue().split() == ["StatisticsGen", "started"]  # never shown as ran


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_lost_between_components_stops_the_run_before_the_next_one():
    shown, handler, out = _handler()
    with interrupts.handled():
        _ctrl_c_while_freeing(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            _log(handler, "Component %s is running.", "Transform")
    assert out.getvalue() == ""


def test_an_error_raised_in_place_of_the_interrupt_is_the_interrupt():
    def beam_bundle():  # what Beam makes of a KeyboardInterrupt inside a DoFn
        try:
            signal.raise_signal(signal.SIGINT)
        except BaseException as error:
            raise RuntimeError(f"{type(error).__name__} [while running 'Size']") from None

    with interrupts.handled():
        with pytest.raises(KeyboardInterrupt) as raised:
            with interrupts.failures_as_interrupt():
                beam_bundle()
    assert isinstance(raised.value.__cause__, RuntimeError)
    # Without a stop requested, an error stays what it is.
    with pytest.raises(RuntimeError):
        with interrupts.failures_as_interrupt():
            raise RuntimeError("bad shard")


def test_the_signal_itself_raises_keyboard_interrupt_and_the_handlers_come_back():
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    for number in before:
        with interrupts.handled():
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(number)
    assert {number: signal.getsignal(number) for number in before} == before
    # Outside the block no request is left over: components start and end as usual.
    shown, handler, out = _handler()
    _log(handler, "Component %s is running.", "Trainer")
    _log(handler, "Component %s is finished.", "Trainer")
    assert [line.split()[:2] for line in out.getvalue().splitlines()] == [
        ["Trainer", "started"],
        ["Trainer", "ran"],
    ]


def test_a_ctrl_c_ignored_when_the_run_starts_still_stops_it():
    """A shell without job control starts background jobs with SIGINT ignored; a `kill -INT`
    sent to the run must stop it all the same, and the ignoring comes back after it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts.handled():
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
