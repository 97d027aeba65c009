"""OrderedWindow: results in submit order, a bounded window in flight, errors where they occur."""

import os
import signal
import threading
import time

import pytest

from data_prep import parallel


def _map(function, items, per_thread=2):
    """Every item through one window, as the ingest's DoFns use it across their elements."""
    window = parallel.OrderedWindow(per_thread)
    for item in items:
        yield from window.submit(function, item)
    yield from window.drain()


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(parallel, "usable_cores", lambda: 2)
    monkeypatch.setattr(parallel, "_pool", parallel._pool.__wrapped__)  # a pool of 2 for a test


def test_results_keep_the_submit_order_whichever_finishes_first():
    def slow_first(item):
        time.sleep(0.02 if item == 0 else 0.0)
        return item * 10

    assert list(_map(slow_first, range(12))) == [i * 10 for i in range(12)]


def test_runs_tasks_on_several_threads(two_threads):
    both_started = threading.Barrier(2, timeout=5)

    def meet(item):
        both_started.wait()  # only returns when two items run at the same time
        return item

    assert list(_map(meet, range(4), per_thread=1)) == [0, 1, 2, 3]


def test_holds_at_most_per_thread_tasks_per_thread_in_flight():
    pulled = []

    def items():
        for i in range(100):
            pulled.append(i)
            yield i

    results = _map(lambda item: item, items())
    assert next(results) == 0
    assert len(pulled) <= 2 * parallel.usable_cores()


def test_a_result_is_due_only_once_the_window_is_full(two_threads):
    window = parallel.OrderedWindow(per_thread=1)
    release_first = threading.Event()

    def first():
        release_first.wait(timeout=5)
        return "first"

    assert window.submit(first) == []  # one task in flight of two: nothing is due
    threading.Timer(0.05, release_first.set).start()
    # Full: the oldest result is due, waited for, though the later task finished first.
    assert window.submit(lambda: "second") == ["first"]
    assert list(window.drain()) == ["second"]
    assert list(window.drain()) == []


def test_an_error_is_raised_at_its_task():
    def fail_on_three(item):
        if item == 3:
            raise ValueError("three")
        return item

    results = _map(fail_on_three, range(6))
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="three"):
        next(results)


def test_a_forked_child_runs_tasks_on_threads_of_its_own():
    assert list(_map(abs, [-1])) == [1]  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if its tasks ran; killed if they hang
        signal.alarm(10)
        os._exit(0 if list(_map(abs, [-2, -3])) == [2, 3] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
