"""What imgpipe may do in a serving root (`<serving_dir>/<name>/`), a folder it shares with
model servers, other tools and other pipelines.

It removes only a folder it staged itself (a name it recorded), renames aside a version it
pushed, and writes or removes only its own pin file (a rollback); it never follows a link to
do any of these, never works outside the root, and leaves every entry it has no record of as
it is. Two stores that push into one root take its lock (flock on
a file in the root) around each change, so one never touches the other's push mid-way.
Remote roots (gs://...) hold no links and take no lock: only local paths are checked here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
from collections.abc import Iterator

from components.serving.versions import PIN_FILE, PIN_HEADER, pinned_version
from data_prep.writing.local_files import write_atomically

LOCK_FILE = ".imgpipe-serving.lock"
ASIDE_SUFFIX = ".broken"


def is_local(path: str) -> bool:
    return "://" not in path


def is_real_directory(path: str) -> bool:
    """A directory itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _entry_of(path: str, base_directory: str) -> str:
    """path's name when path is an entry right inside base_directory; raises otherwise."""
    parent, name = os.path.split(os.path.abspath(path))
    if parent != os.path.abspath(base_directory) or name in ("", ".", ".."):
        raise ValueError(f"{path} is not an entry of {base_directory}")
    return name


@contextlib.contextmanager
def locked(base_directory: str) -> Iterator[None]:
    """Holds the serving root's lock for the block (creating the root when it is missing)."""
    if not is_local(base_directory):
        yield
        return
    os.makedirs(base_directory, exist_ok=True)
    path = os.path.join(base_directory, LOCK_FILE)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def remove_staged(path: str, base_directory: str) -> bool:
    """Removes a folder this pipeline staged in base_directory; False (nothing removed) when
    it is a link, a file, or gone. shutil.rmtree works through file descriptors and never
    follows a link inside the folder."""
    _entry_of(path, base_directory)
    if not is_real_directory(path):
        return False
    shutil.rmtree(path)
    return True


def move_aside(path: str, base_directory: str) -> str | None:
    """Renames a pushed version folder to `<version>.broken` (or .broken.2, ...), a name model
    servers do not load; returns the new path, None when path is not a real folder (a link is
    left as it is)."""
    name = _entry_of(path, base_directory)
    if not is_real_directory(path):
        return None
    for attempt in range(1, 1000):
        suffix = ASIDE_SUFFIX if attempt == 1 else f"{ASIDE_SUFFIX}.{attempt}"
        target = os.path.join(base_directory, name + suffix)
        if not os.path.lexists(target):
            os.rename(path, target)
            return target
    return None


class NotOurs(RuntimeError):
    """An entry of the serving root is a link or was not written by imgpipe: left as it is."""


def pin(base_directory: str, version: int) -> None:
    """Writes the pin file naming version: a new file beside it, then renamed over it, so a
    reader sees the old pin or the new one. Raises NotOurs when the pin's name holds a link or
    anything imgpipe did not write. The caller holds the root's lock."""
    path = _own_pin(base_directory)
    write_atomically(path, f"{PIN_HEADER}\n{version}\n".encode())


def unpin(base_directory: str) -> bool:
    """Removes imgpipe's pin file; False when there was none. Raises NotOurs as pin does."""
    path = _own_pin(base_directory)
    if not os.path.lexists(path):
        return False
    os.unlink(path)
    return True


def _own_pin(base_directory: str) -> str:
    path = os.path.join(base_directory, PIN_FILE)
    if os.path.lexists(path) and pinned_version(base_directory) is None:
        raise NotOurs(f"{path} is a link or a file imgpipe did not write; it is left as it is")
    return path
