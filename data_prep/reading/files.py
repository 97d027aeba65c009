"""Bounded reads of local regular files: the one way imgpipe opens a path a user or a record names.

Opening a named pipe blocks until a writer appears, and a device such as /dev/zero never ends, so
a path is opened without blocking, its type is checked on the open descriptor (no window between
check and read), and at most a given number of bytes is read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

_READ_CHUNK_BYTES = 1 << 20
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnreadableFileError(OSError):
    """The path is not a regular file of a size we read; the message says which (callers name
    the path, kept in .path)."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path

    def __reduce__(self):  # pickled with its path, as Beam moves errors between processes
        return type(self), (self.path, str(self))


class NotRegularFileError(UnreadableFileError):
    """The path is a pipe, device, socket or folder: reading it could block or never end."""


class FileTooLargeError(UnreadableFileError):
    """The file holds more than the bytes the caller reads."""


def file_kind(mode: int) -> str:
    """What a stat mode names, in words: 'a named pipe', 'a character device', ..."""
    for is_kind, name in _KINDS:
        if is_kind(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


@contextlib.contextmanager
def open_regular(path: str, *, follow_symlinks: bool = True) -> Iterator[BinaryIO]:
    """An unbuffered binary handle on a regular file. Raises NotRegularFileError for anything
    else, without blocking on it; with follow_symlinks False a link is refused too (ELOOP)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    descriptor = os.open(path, flags)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, f"{file_kind(mode)}, not a regular file")
        os.set_blocking(descriptor, True)  # a regular file's reads never block; plain reads
        handle = os.fdopen(descriptor, "rb", buffering=0)
    except BaseException:
        os.close(descriptor)
        raise
    with handle:
        yield handle


def read_file(path: str, max_bytes: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most max_bytes. Raises NotRegularFileError (a pipe,
    device, ...), FileTooLargeError (checked on its size before reading, and on what a growing
    file gives: at most max_bytes + 1 bytes are ever read) or the OSError of opening it."""
    with open_regular(path, follow_symlinks=follow_symlinks) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise FileTooLargeError(path, f"{size} bytes, more than the {max_bytes} allowed")
        # One read of the size it has (plus a byte to see one that grew), then the rest if it did.
        data = handle.read(size + 1)
        if len(data) > size:
            data += read_upto(handle, max_bytes + 1 - len(data))
    if len(data) > max_bytes:
        raise FileTooLargeError(path, f"grew beyond the {max_bytes} bytes allowed")
    return data


def read_upto(handle: BinaryIO, limit: int) -> bytes:
    """Reads in chunks until the end or limit bytes: one read(limit) would allocate the whole
    limit up front, whatever the file's size."""
    chunks = []
    while limit > 0:
        chunk = handle.read(min(limit, _READ_CHUNK_BYTES))
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def empty_input_message(root: str) -> str:
    return f"input {root!r} is empty or does not exist"


def local_input_problem(path: str) -> str | None:
    """What is plainly wrong with a local input before any library loads: it does not exist, or
    it is a folder with nothing in it. Deeper emptiness and URIs are the listing's to find."""
    if "://" in path:
        return None
    try:
        with os.scandir(path) as entries:
            if next(entries, None) is None:
                return empty_input_message(path.rstrip("/"))
    except FileNotFoundError:
        return empty_input_message(path.rstrip("/"))
    except OSError:  # a file (a manifest), or a folder the listing will report on
        return None
    return None
