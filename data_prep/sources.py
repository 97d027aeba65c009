"""Finds the files to ingest: class folders or a CSV/JSONL manifest, on any Beam filesystem.

Listing runs once, on the driver, and yields paths and labels only (no image bytes), so it is cheap
even for millions of files and works for local paths, gs:// and s3:// alike.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import posixpath

from apache_beam.io.filesystems import FileSystems

SPLITS = ("train", "eval", "test")
# A file with one of these names that is not an image is a broken image, not an unrelated file.
IMAGE_EXTENSIONS = frozenset(
    ".jpg .jpeg .jpe .jfif .png .gif .bmp .dib .tif .tiff .webp .avif .heic .heif .jp2 .ppm .pgm "
    ".pbm .ico".split()
)
MANIFEST_EXTENSIONS = (".csv", ".jsonl")


class SourceError(ValueError):
    """The input cannot be listed or the manifest is malformed; raised before any work starts."""


@dataclasses.dataclass(frozen=True, order=True)
class SourceFile:
    relative_path: str  # stable identity, recorded in every Example and in the report
    path: str  # full path or URI used to read the bytes
    label: str | None  # None: the file sits outside any class folder
    split: str | None = None  # fixed by the manifest; None: chosen by hash

    @property
    def has_image_extension(self) -> bool:
        return posixpath.splitext(self.relative_path)[1].lower() in IMAGE_EXTENSIONS


def list_sources(input_path: str) -> list[SourceFile]:
    """Lists a class-folder tree or reads a manifest, sorted by relative path."""
    if input_path.lower().endswith(MANIFEST_EXTENSIONS):
        return read_manifest(input_path)
    return list_class_folders(input_path)


def input_fingerprint(input_path: str) -> str:
    """A hash of every input file's path, size and modification time (and of the manifest), so
    a changed, added or removed image changes it without any image being read."""
    if input_path.lower().endswith(MANIFEST_EXTENSIONS):
        patterns = [input_path] + [source.path for source in read_manifest(input_path)]
    else:
        patterns = [FileSystems.join(input_path.rstrip("/"), "**")]
    items = [item for result in FileSystems.match(patterns) for item in result.metadata_list]
    digest = hashlib.sha256()
    for item in sorted(items, key=lambda item: item.path):
        digest.update(f"{item.path}|{item.size_in_bytes}|{item.last_updated_in_seconds}\n".encode())
    return digest.hexdigest()


def list_class_folders(root: str) -> list[SourceFile]:
    """Every file under root; its label is the first-level folder it sits in (at any depth)."""
    root = root.rstrip("/")
    try:
        matches = FileSystems.match([FileSystems.join(root, "**")])[0].metadata_list
    except Exception as error:  # noqa: BLE001  each filesystem raises its own type
        raise SourceError(f"cannot list input {root!r}: {error}") from error
    sources = []
    for metadata in matches:
        relative = posixpath.relpath(metadata.path, root)
        parts = relative.split("/")
        label = parts[0] if len(parts) > 1 else None
        sources.append(SourceFile(relative, metadata.path, label))
    if not sources:
        raise SourceError(f"input {root!r} is empty or does not exist")
    return sorted(sources)


def read_manifest(manifest_path: str) -> list[SourceFile]:
    """Reads `path,label[,split]` rows; relative paths resolve against the manifest's folder."""
    try:
        with FileSystems.open(manifest_path) as handle:
            text = handle.read().decode("utf-8")
    except Exception as error:  # noqa: BLE001
        raise SourceError(f"cannot read manifest {manifest_path!r}: {error}") from error
    rows = (
        _parse_jsonl(text, manifest_path)
        if manifest_path.endswith(".jsonl")
        else _parse_csv(text, manifest_path)
    )
    base = posixpath.dirname(manifest_path)
    sources, seen = [], set()
    for line_number, row in rows:
        where = f"{manifest_path}:{line_number}"
        path, label, split = row.get("path"), row.get("label"), row.get("split") or None
        if not path:
            raise SourceError(f"{where}: missing 'path'")
        if not label:
            raise SourceError(f"{where}: missing 'label' for {path!r}")
        if split is not None and split not in SPLITS:
            raise SourceError(f"{where}: split {split!r} is not one of {', '.join(SPLITS)}")
        full = path if path.startswith("/") or "://" in path else FileSystems.join(base, path)
        if full in seen:
            raise SourceError(f"{where}: {path!r} is listed twice")
        seen.add(full)
        sources.append(SourceFile(path, full, str(label), split))
    if not sources:
        raise SourceError(f"manifest {manifest_path!r} lists no files")
    return sorted(sources)


def _parse_csv(text: str, where: str) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"path", "label"} <= set(reader.fieldnames):
        raise SourceError(f"{where}: CSV header must name 'path' and 'label' columns")
    return [(number + 2, row) for number, row in enumerate(reader)]


def _parse_jsonl(text: str, where: str) -> list[tuple[int, dict]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise SourceError(f"{where}:{number}: not valid JSON ({error.msg})") from error
        if not isinstance(row, dict):
            raise SourceError(f"{where}:{number}: each line must be a JSON object")
        rows.append((number, row))
    return rows
