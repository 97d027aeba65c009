"""Reading an artifact's small files (reports, indexes, cards) from a local path or any Beam
URI. Local files are read directly, so a command that reads a few of them (lineage, `runs`)
does not load Beam; a URI (gs://...) loads Beam's file systems when first read."""

from __future__ import annotations

import os


def is_remote(path: str) -> bool:
    """Whether path is a URI (gs://...), read through Beam's file systems; a local path is read
    without importing Beam (seconds a short command does not spend)."""
    return "://" in path


def exists(path: str) -> bool:
    if not is_remote(path):
        return os.path.exists(path)
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.exists(path)


def read_bytes(path: str) -> bytes:
    """The file's bytes as stored (a .gz file is not decompressed)."""
    if not is_remote(path):
        with open(path, "rb") as handle:
            return handle.read()
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read()
