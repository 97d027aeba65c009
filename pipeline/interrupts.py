"""Ctrl-C and SIGTERM during a run: a request to stop that outlives the code it reached.

Python raises KeyboardInterrupt wherever the main thread is when the signal arrives. When that is
a weakref callback or a __del__ (Beam and TensorFlow free objects all the time), the interpreter
prints "Exception ignored in ..." and goes on; code that catches BaseException drops it too, or
raises its own error instead (Beam: RuntimeError("KeyboardInterrupt [while running ...]")). So
the handler records the request as well as raising it: `honour_request`, called where the run
passes from one component to the next, raises it again while one is recorded, and
`failures_as_interrupt` turns an error raised after it back into a KeyboardInterrupt.

SIGINT is handled even when the process started with it ignored: a shell without job control
ignores it in every background job (`make test &`, a script's `imgpipe run &`), and every
process started from there inherits that, so a scheduler's or a test's `kill -INT` would
otherwise do nothing and the run would go on to push.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_requested: str | None = None  # the signal's name, from the handler until the block ends


def _request_stop(signum, frame) -> None:
    global _requested
    _requested = signal.Signals(signum).name
    raise KeyboardInterrupt


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """For the duration: SIGINT and SIGTERM raise KeyboardInterrupt and are recorded (for
    `honour_request` and `failures_as_interrupt`), whatever their handlers were, ignored
    included (see the module's doc). Call from the main thread."""
    global _requested
    _requested = None
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, _request_stop) for number in signals}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _requested = None


def honour_request() -> None:
    """Raises KeyboardInterrupt when a stop was requested in the current `handled` block: the code
    it interrupted may have swallowed it. Only in the main thread, which a KeyboardInterrupt ends
    (elsewhere it would end just that thread)."""
    if _requested is not None and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt(f"{_requested} received earlier; the code it reached went on")


@contextlib.contextmanager
def failures_as_interrupt() -> Iterator[None]:
    """For the duration: an Exception raised once a stop was requested in the current `handled`
    block is raised as a KeyboardInterrupt (caused by it), whatever the code the stop reached
    made of it."""
    try:
        yield
    except Exception as error:
        if _requested is None:
            raise
        raise KeyboardInterrupt(f"{_requested} received; then {type(error).__name__}") from error
