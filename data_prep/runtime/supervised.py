"""Runs a function on one item at a time in a forked child bounded in memory and time, so that a
C library that crashes, hangs or blows up its memory on one item costs that item, never the job.

The child is started on first use and serves items until it dies; then the item it held gets a
`Failure` naming what happened (the signal, the bound it overran) and the next item starts a
new child. Its address space may grow by `memory_bytes` above what it had when it was forked
(RLIMIT_AS), so an allocation beyond that fails inside the decoder instead of growing the
machine's memory; the parent kills a child that does not answer within `timeout_s`, and a child
whose parent is gone ends at its own alarm. With `call_bounded` a child is per thread of its
parent, so threads never wait on each other's items; with `call_shared` one child serves every
thread in turn, for servers whose threads come and go (a child per thread would outlive it).
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import pickle
import resource
import select
import signal
import stat
import struct
import threading
from collections.abc import Callable

from data_prep.runtime.fork_memory import share_parent_memory_with_forked_children

DECODER_MEMORY = "decoder_memory"
DECODE_TIMEOUT = "decode_timeout"
DECODER_CRASHED = "decoder_crashed"

_HEADER = struct.Struct(">Q")


@dataclasses.dataclass(frozen=True)
class Bounds:
    memory_bytes: int  # address space an item may add to the child's
    timeout_s: float  # wall-clock seconds an item may take


@dataclasses.dataclass(frozen=True)
class Failure:
    """An item that cost its child: reason is DECODER_MEMORY, DECODE_TIMEOUT or DECODER_CRASHED."""

    reason: str
    detail: str


class _Child:
    """One forked child and the two pipes it is served through."""

    def __init__(self, function: Callable, bounds: Bounds):
        requests_read, self.requests = os.pipe()
        self.answers, answers_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: serves until its requests pipe closes, never returns
            code = 1
            try:
                os.close(self.requests)
                os.close(self.answers)
                _serve(function, bounds, requests_read, answers_write)
                code = 0
            finally:
                os._exit(code)
        os.close(requests_read)
        os.close(answers_write)
        self.status: int | None = None  # the wait status, once it has ended and been reaped

    def alive(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is None

    def end(self, kill: bool) -> int:
        """Closes the pipes (a child between items then leaves by itself), or kills it first;
        returns its wait status, never leaves a zombie."""
        if kill and self.alive():
            os.kill(self.pid, signal.SIGKILL)
        for fd in (self.requests, self.answers):
            os.close(fd)
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]
        return self.status


class SupervisedWorker:
    """Calls function(item) in a child of this process bounded by `bounds`; see the module's doc.

    function and its results must pickle (results travel back through a pipe); an exception it
    raises is raised again here. Not for concurrent use: one worker per thread (`call_bounded`).
    """

    def __init__(self, function: Callable, bounds: Bounds):
        self._function, self._bounds = function, bounds
        self._child: _Child | None = None

    def call(self, item):
        """function(item), or a Failure when the child died, overran its memory or its time."""
        request = pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
        child = self._ready_child()
        try:
            _write_message(child.requests, request)
        except BrokenPipeError:  # it died between items (killed from outside): not this item's
            self._end_child(kill=True)
            child = self._ready_child()
            _write_message(child.requests, request)
        ready, _, _ = select.select([child.answers], [], [], self._bounds.timeout_s)
        if not ready:
            self._end_child(kill=True)
            return Failure(
                DECODE_TIMEOUT,
                f"no result within decode_timeout_s {self._bounds.timeout_s:g} s; the decoder "
                "was stopped",
            )
        message = _read_message(child.answers)
        if message is None:
            return _death(self._end_child(kill=True))
        kind, value = pickle.loads(message)
        if kind == "memory":
            self._end_child(kill=False)  # it leaves by itself: its decoder may be half-made
            return Failure(
                DECODER_MEMORY,
                f"needed more than decoder_memory_bytes {self._bounds.memory_bytes} ({value})",
            )
        if kind == "raised":
            raise value
        return value

    def close(self) -> None:
        if self._child is not None:
            self._end_child(kill=False)

    def _ready_child(self) -> _Child:
        if self._child is not None and not self._child.alive():
            self._end_child(kill=False)
        if self._child is None:
            self._child = _Child(self._function, self._bounds)
        return self._child

    def _end_child(self, kill: bool) -> int:
        child, self._child = self._child, None
        return child.end(kill)


def _death(status: int) -> Failure:
    """What a child's wait status says about how it died."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return Failure(DECODER_CRASHED, f"the decoder was killed by signal {name}")
    code = os.waitstatus_to_exitcode(status)
    return Failure(DECODER_CRASHED, f"the decoder's process ended with status {code}")


def _serve(function: Callable, bounds: Bounds, requests: int, answers: int) -> None:
    """The child's loop: an item in, its answer out, until the parent closes the requests."""
    # A crash is the parent's to report (as the item's Failure): no traceback dump of its own
    # on a console that faulthandler may hold open.
    faulthandler.disable()
    _close_inherited_channels(keep={requests, answers})
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to decide
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the alarm ends a child whose parent is gone
    _limit_address_space(bounds.memory_bytes)
    while True:
        message = _read_message(requests)
        if message is None:
            return
        # The parent kills a late child at timeout_s; this ends one that hangs after its
        # parent died, as no parent is left to kill it.
        signal.setitimer(signal.ITIMER_REAL, 2 * bounds.timeout_s + 1)
        try:
            answer = ("ok", function(pickle.loads(message)))
        except MemoryError as error:
            answer = ("memory", f"MemoryError: {error}" if str(error) else "MemoryError")
        except Exception as error:  # noqa: BLE001  the parent raises it again
            answer = ("raised", error)
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            reply = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        except Exception as error:  # noqa: BLE001  an exception or result that does not pickle
            reply = pickle.dumps(("raised", RuntimeError(f"{type(error).__name__}: {error}")))
        _write_message(answers, reply)
        if answer[0] == "memory":
            return


def _close_inherited_channels(keep: set[int]) -> None:
    """Closes the pipes and sockets the fork copied from the parent, but for stdio and `keep`.
    A child holding another end of a pipe or a connection keeps that channel open after its
    parent closes it: the process on the other side (a browser, a driver waiting for the end of
    its input, a Beam runner watching its worker's connection) would wait for ever. Files stay
    open: closing a log file under a handler would cost its lines."""
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except FileNotFoundError:  # no /proc: nothing to walk
        return
    for fd in descriptors:
        if fd <= 2 or fd in keep:
            continue
        try:
            kind = os.fstat(fd).st_mode
        except OSError:  # the listing's own descriptor, closed since
            continue
        if stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind):
            os.close(fd)


def _limit_address_space(extra_bytes: int) -> None:
    """The child's address space: what it has now (its parent's, copied by the fork), plus
    extra_bytes."""
    with open("/proc/self/statm") as handle:
        now = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = now + extra_bytes
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _write_message(fd: int, payload: bytes) -> None:
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_message(fd: int) -> bytes | None:
    """One message, or None at the end of the pipe (the other side closed or died)."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    return _read_exactly(fd, _HEADER.unpack(header)[0])


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


_workers = threading.local()
_shared: dict[tuple[Callable, Bounds], SupervisedWorker] = {}
_shared_lock = threading.Lock()  # held for a whole call_shared: one item at a time
_all_children: list[SupervisedWorker] = []  # every worker of this process, for a forked child
_registry_lock = threading.Lock()


def _registered(worker: SupervisedWorker) -> SupervisedWorker:
    with _registry_lock:
        _all_children.append(worker)
    return worker


def call_bounded(function: Callable, item, bounds: Bounds):
    """function(item) in this thread's supervised child for (function, bounds); see
    SupervisedWorker.call."""
    per_thread = _workers.__dict__.setdefault("by_key", {})
    worker = per_thread.get((function, bounds))
    if worker is None:
        worker = per_thread[(function, bounds)] = _registered(SupervisedWorker(function, bounds))
    return worker.call(item)


def call_shared(function: Callable, item, bounds: Bounds):
    """function(item) in the one supervised child of this process for (function, bounds), whichever
    thread asks; callers wait for each other's items. See SupervisedWorker.call."""
    with _shared_lock:
        worker = _shared.get((function, bounds))
        if worker is None:
            worker = _shared[(function, bounds)] = _registered(SupervisedWorker(function, bounds))
        return worker.call(item)


def _forget_in_forked_child() -> None:
    """A process forked from this one (another supervised child, a pool's child) inherits the
    pipes of this process's children: it closes its copies, so each child still sees the end of
    its requests when its own parent goes, and starts workers of its own."""
    global _workers, _registry_lock, _shared_lock
    for worker in _all_children:
        child = worker._child  # noqa: SLF001  this module's own class
        if child is not None:
            for fd in (child.requests, child.answers):
                try:
                    os.close(fd)
                except OSError:
                    pass
            worker._child = None  # noqa: SLF001
    _all_children.clear()
    _shared.clear()
    _workers = threading.local()
    _registry_lock = threading.Lock()
    _shared_lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_in_forked_child)
share_parent_memory_with_forked_children()
