"""Writing a local file so that no one's file is clobbered and no reader sees half of it.

`replace_atomically` writes beside the target under a hidden name it creates exclusively, then
renames over the target: a full disk or a kill leaves the target as it was (and no half file
under its name); a link at the target is replaced, never written through. `create_exclusively`
opens a new file, refusing one that exists or is a link.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import BinaryIO

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def create_exclusively(path: str) -> BinaryIO:
    """A new file opened for writing; FileExistsError when path exists (a link too)."""
    return os.fdopen(os.open(path, _NEW, 0o644), "wb")


@contextlib.contextmanager
def replace_atomically(path: str) -> Iterator[BinaryIO]:
    """Yields a file to write path's new content into; path is replaced when the block ends
    without an exception, and left as it was otherwise."""
    directory, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    handle = create_exclusively(temporary)
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def write_atomically(path: str, data: bytes) -> None:
    with replace_atomically(path) as handle:
        handle.write(data)
