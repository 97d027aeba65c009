"""Which version of a Pusher's base folder (`<serving_dir>/<name>/<version>/`) is served.

One function decides it for every reader of a serving folder (`imgpipe serve`, `imgpipe
predict`), as TensorFlow Serving's default version policy does: the highest numbered version
that holds a whole SavedModel. A half-copied folder or a push's hidden temporary folder is
never picked.
"""

from __future__ import annotations

import os

SAVED_MODEL_FILE = "saved_model.pb"
VARIABLES_INDEX = os.path.join("variables", "variables.index")


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


def served_version(base_directory: str) -> int | None:
    """The version a server of base_directory serves: the highest whole one (None when there is
    none). The one place a pinned version (a rollback) would be honoured."""
    versions = whole_versions(base_directory)
    return versions[0] if versions else None


def version_dir(base_directory: str, version: int) -> str:
    return os.path.join(base_directory, str(version))
