"""OrderedWindow: results in submit order, a bounded window in flight, errors where they occur,
the work in forked children (or in the caller with no workers), and a pool broken by a dead child
replaced."""

import os
import signal
import subprocess
import sys
import time

import pytest

from data_prep.runtime import parallel
from tests.data_prep.runtime.processes import alive

WORKERS = 2


def _map(function, items, per_worker=2, workers=WORKERS):
    """Every item through one window, as the ingest's DoFns use it across their elements."""
    window = parallel.OrderedWindow(workers, per_worker)
    for item in items:
        yield from window.submit(function, item)
    yield from window.drain()


# Tasks run in a child: module-level functions, pickled by name.
def _slow_first(item):
    time.sleep(0.2 if item == 0 else 0.0)
    return item * 10


def _pid_after_a_while(item):
    time.sleep(0.3)
    return os.getpid()


def _fail_on_three(item):
    if item == 3:
        raise ValueError("three")
    return item


def _die(item):
    os._exit(1)


def _getppid(item):
    return os.getppid()


def _die_once(marker):
    """Ends its child the first time it runs for marker (a path), returns the second time."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return "ran again"
    os._exit(1)


def test_results_keep_the_submit_order_whichever_finishes_first():
    assert list(_map(_slow_first, range(12))) == [i * 10 for i in range(12)]


def test_runs_tasks_in_several_forked_children():
    pids = list(_map(_pid_after_a_while, range(2), per_worker=1))
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert set(_map(_getppid, range(4))) == {os.getpid()}


def test_holds_at_most_per_worker_tasks_per_worker_in_flight():
    pulled = []

    def items():
        for i in range(100):
            pulled.append(i)
            yield i

    results = _map(abs, items())
    assert next(results) == 0
    assert len(pulled) <= 2 * WORKERS


def test_without_workers_each_task_runs_in_the_caller_as_it_is_submitted():
    window = parallel.OrderedWindow(0, per_worker=2)
    assert window.submit(_getppid, 0) == [os.getppid()]  # this process's parent: no child
    assert window.submit(_pid_after_a_while, 0) == [os.getpid()]
    with pytest.raises(ValueError, match="three"):
        window.submit(_fail_on_three, 3)
    assert list(window.drain()) == []


def test_a_result_is_due_only_once_the_window_is_full():
    window = parallel.OrderedWindow(WORKERS, per_worker=1)
    assert window.submit(_slow_first, 0) == []  # one task in flight of two: nothing is due
    # Full: the oldest result is due, waited for, though the later task finished first.
    assert window.submit(_slow_first, 1) == [0]
    assert list(window.drain()) == [10]
    assert list(window.drain()) == []


def test_an_error_is_raised_at_its_task():
    results = _map(_fail_on_three, range(6))
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="three"):
        next(results)


def test_a_task_whose_child_died_once_runs_again_on_a_new_pool(tmp_path):
    assert list(_map(_die_once, [str(tmp_path / "marker")])) == ["ran again"]


def test_a_task_that_kills_its_child_twice_fails_and_the_next_window_gets_a_new_pool():
    from concurrent.futures.process import BrokenProcessPool

    with pytest.raises(BrokenProcessPool):
        list(_map(_die, [1]))
    assert list(_map(abs, [-1, -2])) == [1, 2]


def test_released_pools_stop_their_children_and_the_next_task_gets_a_new_pool():
    children = set(_map(_pid_after_a_while, range(2), per_worker=1))
    parallel.release_pools()
    assert not [pid for pid in children if alive(pid)]
    assert set(_map(_pid_after_a_while, range(2), per_worker=1)).isdisjoint(children)


def test_a_forked_child_runs_tasks_on_a_pool_of_its_own():
    assert list(_map(abs, [-1])) == [1]  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if its tasks ran; killed if they hang
        signal.alarm(120)  # a bound on a hang only: a busy machine takes seconds
        ran = list(_map(abs, [-2, -3])) == [2, 3]
        parallel.release_pools()  # its own children end with it
        os._exit(0 if ran else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_children_end_once_their_parent_ends_without_stopping_them():
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # a parent that ends without stopping its pool
        os.close(reader)
        signal.alarm(120)  # a bound on a hang only: a busy machine takes seconds
        pids = set(_map(_pid_after_a_while, range(2), per_worker=1))
        os.write(writer, ",".join(map(str, pids)).encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        children = [int(p) for p in pipe.read().split(",")]
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 120  # each checks every 0.5 s; a busy machine is slower
    while any(alive(child) for child in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(child) for child in children)


def test_a_process_with_a_pool_exits_normally():
    """multiprocessing's atexit handler waits for every child: the pool is stopped before it."""
    script = (
        "from data_prep.runtime import parallel\n"
        "window = parallel.OrderedWindow(2, per_worker=1)\n"
        "window.submit(abs, -1)\n"
        "assert list(window.drain()) == [1]\n"
    )
    finished = subprocess.run([sys.executable, "-c", script], timeout=60, check=False)
    assert finished.returncode == 0
