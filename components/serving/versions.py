"""Which version of a Pusher's base folder (`<serving_dir>/<name>/<version>/`) is served.

One function decides it for every reader of a serving folder (`imgpipe serve`, `imgpipe
predict`), as TensorFlow Serving's default version policy does: the highest numbered version
that holds a whole SavedModel. A half-copied folder or a push's hidden temporary folder is
never picked. A rollback (`imgpipe models rollback`) pins a version in a small file in the
folder, so that every reader, a server with only the folder included, serves it while it is
whole.
"""

from __future__ import annotations

import os

SAVED_MODEL_FILE = "saved_model.pb"
VARIABLES_INDEX = os.path.join("variables", "variables.index")
PIN_FILE = ".imgpipe-served-version"
PIN_HEADER = "imgpipe served version"  # the pin file's first line: imgpipe wrote it


def whole_versions(base_directory: str) -> list[int]:
    """The numbered versions under base_directory holding a SavedModel and its variables,
    highest first; empty when there are none or the folder cannot be read."""
    try:
        names = os.listdir(base_directory)
    except OSError:
        return []
    versions = []
    for name in names:
        folder = os.path.join(base_directory, name)
        parts = (SAVED_MODEL_FILE, VARIABLES_INDEX)
        if name.isdigit() and all(os.path.isfile(os.path.join(folder, p)) for p in parts):
            versions.append(int(name))
    return sorted(versions, reverse=True)


def pinned_version(base_directory: str) -> int | None:
    """The version the pin file names, None when there is no pin, or the file is a link or
    not one imgpipe wrote."""
    try:
        descriptor = os.open(
            os.path.join(base_directory, PIN_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except OSError:
        return None
    with os.fdopen(descriptor, encoding="utf-8", errors="replace") as pin:
        lines = pin.read(200).splitlines()
    if len(lines) == 2 and lines[0] == PIN_HEADER and lines[1].isdigit():
        return int(lines[1])
    return None


def served_version(base_directory: str) -> int | None:
    """The version a server of base_directory serves: the pinned one while it is whole, else
    the highest whole one (None when there is none)."""
    versions = whole_versions(base_directory)
    pinned = pinned_version(base_directory)
    if pinned in versions:
        return pinned
    return versions[0] if versions else None


def version_dir(base_directory: str, version: int) -> str:
    return os.path.join(base_directory, str(version))
