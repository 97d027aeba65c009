"""ordered_map: results in the items' order, a bounded window in flight, errors where they occur."""

import os
import signal
import threading
import time

import pytest

from data_prep import parallel


def test_results_keep_the_items_order_whichever_finishes_first():
    def slow_first(item):
        time.sleep(0.02 if item == 0 else 0.0)
        return item * 10

    assert list(parallel.ordered_map(slow_first, range(12))) == [i * 10 for i in range(12)]


def test_runs_items_on_several_threads(monkeypatch):
    monkeypatch.setattr(parallel, "_threads", lambda: 2)
    monkeypatch.setattr(parallel, "_pool", parallel._pool.__wrapped__)  # a pool of 2 for this test
    both_started = threading.Barrier(2, timeout=5)

    def meet(item):
        both_started.wait()  # only returns when two items run at the same time
        return item

    assert list(parallel.ordered_map(meet, range(4))) == [0, 1, 2, 3]


def test_reads_ahead_at_most_two_items_per_thread():
    pulled = []

    def items():
        for i in range(100):
            pulled.append(i)
            yield i

    results = parallel.ordered_map(lambda item: item, items())
    assert next(results) == 0
    assert len(pulled) <= 2 * parallel._threads()


def test_an_error_is_raised_at_its_item():
    def fail_on_three(item):
        if item == 3:
            raise ValueError("three")
        return item

    results = parallel.ordered_map(fail_on_three, range(6))
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="three"):
        next(results)


def test_a_forked_child_runs_items_on_threads_of_its_own():
    assert list(parallel.ordered_map(abs, [-1])) == [1]  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if its items ran; killed if they hang
        signal.alarm(10)
        os._exit(0 if list(parallel.ordered_map(abs, [-2, -3])) == [2, 3] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_window_returns_results_in_submit_order_once_it_is_full(monkeypatch):
    monkeypatch.setattr(parallel, "_threads", lambda: 2)
    monkeypatch.setattr(parallel, "_pool", parallel._pool.__wrapped__)  # a pool of 2 for this test
    window = parallel.OrderedWindow(per_thread=1)
    release_first = threading.Event()

    def first():
        release_first.wait(timeout=5)
        return "first"

    assert window.submit(first) == []  # one task in flight: nothing is due
    threading.Timer(0.05, release_first.set).start()
    # The window is full with two: the oldest result is due, waited for, even though the later
    # task finished first.
    assert window.submit(lambda: "second") == ["first"]
    assert list(window.drain()) == ["second"]
    assert list(window.drain()) == []


def test_a_window_runs_as_many_tasks_at_once_as_it_holds(monkeypatch):
    monkeypatch.setattr(parallel, "_threads", lambda: 2)
    monkeypatch.setattr(parallel, "_pool", parallel._pool.__wrapped__)
    both_started = threading.Barrier(2, timeout=5)
    window = parallel.OrderedWindow(per_thread=1)
    due = window.submit(lambda: both_started.wait() is not None)
    due += window.submit(lambda: both_started.wait() is not None)  # returns: both ran at once
    assert due + list(window.drain()) == [True, True]
