"""Keeps what C libraries (libtiff, libjpeg, libwebp, ...) print while decoding off the console.

Those libraries write warnings straight to file descriptor 2, below Python's sys.stderr, so only
redirecting the descriptor itself silences them. The text is kept: it often says why a file
could not be decoded, and the ingest report shows it as the rejected file's detail.

The redirection is process-wide, and Beam runs bundles on several threads of one process, so it
is reference-counted: the first open capture redirects, the last one to close restores. A capture
nested in an open one costs no system call to redirect, so callers wrap a whole batch of files in
one capture and each file in its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading

_lock = threading.Lock()
_open_captures = 0
_saved_fd: int | None = None
_sink = None  # one temporary file per process, reused by every capture
_REUSE_BYTES = 1 << 20  # emptied once it holds more than this


@contextlib.contextmanager
def capture_native_stderr():
    """Yields a list that holds, on exit, the text written to fd 2 inside the block (one string;
    with concurrent captures, possibly also some of another thread's)."""
    global _open_captures, _saved_fd, _sink
    text: list[str] = []
    with _lock:
        if _open_captures == 0:
            if _sink is None:
                _sink = tempfile.TemporaryFile()
            sys.stderr.flush()
            if os.lseek(_sink.fileno(), 0, os.SEEK_CUR) > _REUSE_BYTES:
                _sink.seek(0)
                _sink.truncate()
            _saved_fd = os.dup(2)
            os.dup2(_sink.fileno(), 2)
        _open_captures += 1
        start = os.lseek(_sink.fileno(), 0, os.SEEK_CUR)
    try:
        yield text
    finally:
        with _lock:
            sys.stderr.flush()
            end = os.lseek(_sink.fileno(), 0, os.SEEK_CUR)
            if end > start:
                text.append(os.pread(_sink.fileno(), end - start, start).decode(errors="replace"))
            _open_captures -= 1
            if _open_captures == 0:
                os.dup2(_saved_fd, 2)
                os.close(_saved_fd)
                _saved_fd = None


def _reset_in_forked_child() -> None:
    """A forked child (data_prep/runtime/parallel.py) starts with no capture open: fd 2 back where
    the
    parent's open capture took it from, and a sink of its own, since the parent's shares its
    file offset with the child's copy. The fork happens with _lock held (see below), so the
    state copied is never half-changed."""
    global _lock, _open_captures, _saved_fd, _sink
    if _open_captures:
        os.dup2(_saved_fd, 2)
        os.close(_saved_fd)
    if _sink is not None:
        _sink.close()  # the child's copy of the descriptor; the parent's stays open
    _lock, _open_captures, _saved_fd, _sink = threading.Lock(), 0, None, None


def _hold_lock() -> None:
    _lock.acquire()


def _release_lock() -> None:
    _lock.release()


os.register_at_fork(
    before=_hold_lock, after_in_parent=_release_lock, after_in_child=_reset_in_forked_child
)
