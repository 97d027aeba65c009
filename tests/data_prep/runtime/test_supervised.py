"""SupervisedWorker: a child that crashes, hangs or over-allocates costs its one item, with the
reason and the bound it overran; the next item gets a new child; exceptions come back."""

import ctypes
import dataclasses
import os
import pickle
import signal
import threading
import time

import pytest

from data_prep.runtime import supervised
from data_prep.runtime.supervised import Bounds, Failure, SupervisedWorker
from tests.data_prep.runtime.processes import alive

# Ordinary items get a time bound that no busy machine reaches; the one short bound is met only
# by an item that never answers, so the machine's load cannot decide a test.
BOUNDS = Bounds(memory_bytes=256 * 1024 * 1024, timeout_s=120.0)
HANG_BOUNDS = dataclasses.replace(BOUNDS, timeout_s=1.0)


# Run in the child: module-level functions, pickled by name.
def _behave(item):
    if item == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    if item == "abort":
        os.kill(os.getpid(), signal.SIGABRT)
    if item == "hang":
        time.sleep(3600)
    if item == "over-allocate":
        return len(bytearray(1024 * 1024 * 1024))  # four times the bound
    if item == "raise":
        raise ValueError("bad item")
    return os.getpid()


@pytest.fixture
def worker():
    made = SupervisedWorker(_behave, BOUNDS)
    yield made
    made.close()


def test_items_run_in_one_child_of_this_process_until_it_dies(worker):
    pids = {worker.call("fine") for _ in range(3)}
    assert len(pids) == 1 and os.getpid() not in pids


@pytest.mark.parametrize(
    ("item", "reason", "named"),
    [
        ("segfault", supervised.DECODER_CRASHED, "SIGSEGV"),
        ("abort", supervised.DECODER_CRASHED, "SIGABRT"),
        ("over-allocate", supervised.DECODER_MEMORY, f"decoder_memory_bytes {256 * 1024 * 1024}"),
    ],
)
def test_a_bad_item_costs_itself_only_and_the_next_one_gets_a_new_child(
    worker, item, reason, named
):
    before = worker.call("fine")
    failure = worker.call(item)
    assert isinstance(failure, Failure)
    assert failure.reason == reason and named in failure.detail
    after = worker.call("fine")
    assert isinstance(after, int) and after != before
    with pytest.raises(ProcessLookupError):  # the dead child was reaped or killed, not left
        os.kill(before, 0)


def test_an_item_that_never_answers_fails_at_the_time_bound_and_its_child_is_killed():
    worker = SupervisedWorker(_behave, HANG_BOUNDS)
    hung = worker._ready_child().pid  # the child the next item goes to
    try:
        failure = worker.call("hang")
    finally:
        worker.close()
    assert isinstance(failure, Failure) and failure.reason == supervised.DECODE_TIMEOUT
    assert "decode_timeout_s 1 s" in failure.detail
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left
        os.kill(hung, 0)


def test_an_exception_comes_back_and_the_child_goes_on(worker):
    before = worker.call("fine")
    with pytest.raises(ValueError, match="bad item"):
        worker.call("raise")
    assert worker.call("fine") == before


def test_a_child_killed_between_items_is_replaced_without_failing_the_next(worker):
    before = worker.call("fine")
    os.kill(before, signal.SIGKILL)
    time.sleep(0.1)
    assert worker.call("fine") not in (before, os.getpid())


def test_each_thread_has_its_own_child():
    pids = {}

    def call(name):
        pids[name] = supervised.call_bounded(_behave, "fine", BOUNDS)

    threads = [threading.Thread(target=call, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(pids.values())) == 2


def test_one_shared_child_serves_every_thread_and_outlives_them():
    pids = []

    def call():
        pids.append(supervised.call_shared(_behave, "fine", BOUNDS))

    for _ in range(2):  # one after the other, as a web server's per-request threads
        thread = threading.Thread(target=call)
        thread.start()
        thread.join()
    failure = supervised.call_shared(_behave, "segfault", BOUNDS)
    after = supervised.call_shared(_behave, "fine", BOUNDS)

    assert len(set(pids)) == 1 and os.getpid() not in pids
    assert isinstance(failure, Failure) and failure.reason == supervised.DECODER_CRASHED
    assert after not in (*pids, os.getpid())


def test_a_hung_child_whose_parent_died_ends_at_its_alarm():
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # a parent that starts a hanging item, says its child's pid, and dies
        os.close(reader)
        worker = SupervisedWorker(_behave, dataclasses.replace(HANG_BOUNDS, timeout_s=0.25))
        child = worker._ready_child()
        supervised._write_message(child.requests, pickle.dumps("hang"))  # and never waits
        os.write(writer, str(child.pid).encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        child_pid = int(pipe.read())
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 120  # its alarm is due after 1.5 s; a busy machine is slower
    while alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child_pid)


def test_the_child_holds_none_of_its_parents_pipes_or_sockets_but_keeps_its_files(worker, tmp_path):
    """A pipe's reader sees its end, and a socket's peer the close, when this process closes
    its side, though the child forked while they were open still lives; files stay open in it."""
    import socket

    read_end, write_end = os.pipe()
    near, far = socket.socketpair()
    with open(tmp_path / "log", "w") as log:
        child = worker.call("pid")
        assert child != os.getpid() and alive(child)
        held = {int(fd) for fd in os.listdir(f"/proc/{child}/fd")}
        assert write_end not in held and near.fileno() not in held
        assert log.fileno() in held
        os.close(write_end)
        near.close()
        assert os.read(read_end, 1) == b""  # no writer left anywhere: the end of the pipe
        assert far.recv(1) == b""  # the connection is closed
        assert worker.call("pid") == child
    os.close(read_end)
    far.close()
