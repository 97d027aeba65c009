"""Finds the files to ingest: class folders or a CSV/JSONL manifest, on any Beam filesystem.

Listing runs once, on the driver, and yields paths and labels only (no image bytes), so it is cheap
even for millions of files and works for local paths, gs:// and s3:// alike.
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import hashlib
import io
import json
import os
import posixpath
import stat

from data_prep.reading.file_access import is_remote
from data_prep.reading.files import FileTooLargeError, empty_input_message, read_file, read_upto
from data_prep.reading.image_validation import Reason

SPLITS = ("train", "eval", "test")
# What other tools call the eval split; a manifest may use either name.
SPLIT_ALIASES = {"val": "eval", "validation": "eval"}
MAX_REPORTED_PROBLEMS = 20  # a manifest's problems listed in its error; the rest are counted
# A file with one of these names that is not an image is a broken image, not an unrelated file.
# (Which images are used is decided by their bytes alone.)
IMAGE_EXTENSIONS = frozenset(
    ".jpg .jpeg .jpe .jfif .png .apng .gif .bmp .dib .tif .tiff .webp .avif .heic .heif .jp2 .j2k "
    ".jpx .ppm .pgm .pbm .pnm .ico .icns .tga .dds .psd .sgi .rgb .pcx .qoi".split()
)
MANIFEST_EXTENSIONS = (".csv", ".jsonl")
# A manifest lists paths, about 100 bytes a row: this allows some ten million rows.
MANIFEST_MAX_BYTES = 1 << 30


class SourceError(ValueError):
    """The input cannot be listed or the manifest is malformed; raised before any work starts."""


@dataclasses.dataclass(frozen=True, order=True)
class SourceFile:
    relative_path: str  # stable identity, recorded in every Example and in the report
    path: str  # full path or URI used to read the bytes
    label: str | None  # None: the file sits outside any class folder
    split: str | None = None  # fixed by the manifest; None: chosen by hash
    problem: str | None = None  # a Reason when the entry is no readable file (a broken link, ...)
    problem_detail: str = ""

    @property
    def has_image_extension(self) -> bool:
        return posixpath.splitext(self.relative_path)[1].lower() in IMAGE_EXTENSIONS


def list_sources(input_path: str) -> list[SourceFile]:
    """Lists a class-folder tree or reads a manifest, sorted by relative path."""
    if input_path.lower().endswith(MANIFEST_EXTENSIONS):
        return read_manifest(input_path)
    return list_class_folders(input_path)


def input_fingerprint(input_path: str) -> str:
    """A hash of every input entry's path, size and modification time (and of the manifest), so
    a changed, added or removed image changes it without any image being read."""
    from apache_beam.io.filesystems import FileSystems

    if input_path.lower().endswith(MANIFEST_EXTENSIONS):
        patterns = [input_path] + [source.path for source in read_manifest(input_path)]
        entries = [
            _Entry(item.path, item.size_in_bytes, item.last_updated_in_seconds)
            for result in FileSystems.match(patterns)
            for item in result.metadata_list
        ]
    else:
        entries = _list_entries(input_path.rstrip("/"))
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda entry: entry.path):
        line = f"{entry.path}|{entry.size}|{entry.mtime}|{entry.problem or ''}\n"
        digest.update(line.encode("utf-8", "surrogateescape"))  # names need not be UTF-8
    return digest.hexdigest()


def list_class_folders(root: str) -> list[SourceFile]:
    """Every entry under root; its label is the first-level folder it sits in (at any depth).
    Entries that are no readable file (broken links, symlink loops, unreadable folders) are
    listed too, with their problem, so the report accounts for them."""
    root = root.rstrip("/")
    sources = []
    for entry in _list_entries(root):
        relative = _printable(_relative(entry.path, root))
        parts = relative.split("/")
        label = parts[0] if len(parts) > 1 else None
        sources.append(SourceFile(relative, entry.path, label, None, entry.problem, entry.detail))
    if not sources:
        raise SourceError(empty_input_message(root))
    return sorted(sources)


def _relative(path: str, root: str) -> str:
    """path relative to root. A local walk names every entry root + "/" + ...: cut the prefix
    (posixpath.relpath makes both paths absolute first, which dominated a large listing's time);
    relpath for what a filesystem's match names otherwise."""
    prefix = root + "/"
    return path[len(prefix) :] if path.startswith(prefix) else posixpath.relpath(path, root)


@dataclasses.dataclass(frozen=True)
class _Entry:
    path: str
    size: int = -1
    mtime: float = 0.0
    problem: str | None = None
    detail: str = ""


def _list_entries(root: str) -> list[_Entry]:
    if not is_remote(root):
        if not os.path.isdir(root):
            return []
        if not os.access(root, os.R_OK | os.X_OK):
            raise SourceError(f"cannot list input {root!r}: permission denied")
        real_root = os.path.realpath(root)
        return _walk_local(root, real_root, frozenset({real_root}))
    from apache_beam.io.filesystems import FileSystems

    try:
        matches = FileSystems.match([FileSystems.join(root, "**")])[0].metadata_list
    except Exception as error:  # noqa: BLE001  each filesystem raises its own type
        raise SourceError(f"cannot list input {root!r}: {error}") from error
    return [_Entry(item.path, item.size_in_bytes, item.last_updated_in_seconds) for item in matches]


def _walk_local(folder: str, real_folder: str, ancestors: frozenset[str]) -> list[_Entry]:
    """Every entry below a local folder (whose resolved path is real_folder), following links to
    files and folders, except a link back to a folder it sits in (a loop). An entry that is no
    link costs one stat (its type comes with the listing); only links are resolved."""
    try:
        with os.scandir(folder) as listing:
            children = sorted(listing, key=lambda child: child.name)
    except OSError as error:
        return [_Entry(folder, problem=Reason.UNREADABLE, detail=f"cannot list: {error.strerror}")]
    entries = []
    for child in children:
        if child.is_symlink():
            try:
                target = os.path.realpath(child.path, strict=True)
            except OSError as error:
                entries.append(_unresolvable(child.path, error))
                continue
            is_folder = os.path.isdir(target)
        else:
            target = posixpath.join(real_folder, child.name)
            is_folder = child.is_dir(follow_symlinks=False)
        if is_folder:
            if target in ancestors:
                entries.append(
                    _Entry(
                        child.path,
                        problem=Reason.SYMLINK_LOOP,
                        detail=f"links back to its own parent folder {_printable(target)}",
                    )
                )
            else:
                entries.extend(_walk_local(child.path, target, ancestors | {target}))
            continue
        try:
            status = child.stat()  # follows a link: the target's type and size
        except OSError as error:
            entries.append(_Entry(child.path, problem=Reason.UNREADABLE, detail=error.strerror))
            continue
        if not stat.S_ISREG(status.st_mode):  # a pipe or device: reading could block forever
            entries.append(
                _Entry(child.path, problem=Reason.UNREADABLE, detail="not a regular file")
            )
            continue
        entries.append(_Entry(child.path, status.st_size, status.st_mtime))
    return entries


def _unresolvable(path: str, error: OSError) -> _Entry:
    if not os.path.islink(path):
        return _Entry(path, problem=Reason.UNREADABLE, detail=error.strerror)
    reason = Reason.SYMLINK_LOOP if error.errno == errno.ELOOP else Reason.BROKEN_LINK
    detail = f"link to {_printable(os.readlink(path))}: {error.strerror}"
    return _Entry(path, problem=reason, detail=detail)


def _printable(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (kept by Python as surrogates) are written as
    \\xNN escapes, so the report and the Examples can name the file."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def read_manifest(manifest_path: str, labelled: bool = True) -> list[SourceFile]:
    """Reads `path,label[,split]` rows; relative paths resolve against the manifest's folder.
    labelled=False for images to classify: the label column may then be left out."""
    try:
        text = _read_manifest_bytes(manifest_path).decode("utf-8")
    except Exception as error:  # noqa: BLE001
        raise SourceError(f"cannot read manifest {manifest_path!r}: {error}") from error
    rows = (
        _parse_jsonl(text, manifest_path)
        if manifest_path.endswith(".jsonl")
        else _parse_csv(text, manifest_path, labelled)
    )
    base = posixpath.dirname(manifest_path)
    sources, seen, problems = [], set(), []
    for line_number, row in rows:
        where = f"{manifest_path}:{line_number}"
        try:
            source = _manifest_source(row, base, labelled, seen)
        except SourceError as error:
            problems.append(f"{where}: {error}")
            continue
        seen.add(source.path)
        sources.append(source)
    if problems:
        raise SourceError(_problems_message(manifest_path, problems))
    if not sources:
        raise SourceError(f"manifest {manifest_path!r} lists no files")
    return sorted(sources)


def _manifest_source(row: dict, base: str, labelled: bool, seen: set[str]) -> SourceFile:
    """One manifest row as a SourceFile; SourceError naming its problem."""
    path, label, split = row.get("path"), row.get("label"), row.get("split") or None
    if not path:
        raise SourceError("missing 'path'")
    if not label and labelled:
        raise SourceError(f"missing 'label' for {path!r}")
    split = SPLIT_ALIASES.get(split, split)
    if split is not None and split not in SPLITS:
        names = ", ".join([*SPLITS, *SPLIT_ALIASES])
        raise SourceError(f"split {split!r} is not one of {names}")
    full = path if path.startswith("/") or "://" in path else _join(base, path)
    if full in seen:
        raise SourceError(f"{path!r} is listed twice")
    return SourceFile(path, full, str(label) if label else None, split)


def _join(base: str, path: str) -> str:
    if not is_remote(base):
        return os.path.join(base, path)
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.join(base, path)


def _problems_message(manifest_path: str, problems: list[str]) -> str:
    """Every problem of a manifest, so one run finds them all: the first
    MAX_REPORTED_PROBLEMS, one a line, then how many more."""
    if len(problems) == 1:
        return problems[0]
    shown = problems[:MAX_REPORTED_PROBLEMS]
    lines = [f"manifest {manifest_path!r} has {len(problems)} problems:", *shown]
    if len(problems) > len(shown):
        lines.append(f"... and {len(problems) - len(shown)} more")
    return "\n  ".join(lines)


def _read_manifest_bytes(manifest_path: str) -> bytes:
    """A local manifest is read as a regular file only (a pipe would block); any other
    filesystem through Beam. Both bounded, so a wrong path cannot fill the memory."""
    if not is_remote(manifest_path):
        return read_file(manifest_path, MANIFEST_MAX_BYTES)
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(manifest_path) as handle:
        data = read_upto(handle, MANIFEST_MAX_BYTES + 1)
    if len(data) > MANIFEST_MAX_BYTES:
        raise FileTooLargeError(manifest_path, f"more than {MANIFEST_MAX_BYTES} bytes")
    return data


def _parse_csv(text: str, where: str, labelled: bool) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(text))
    required = {"path", "label"} if labelled else {"path"}
    if not reader.fieldnames or not required <= set(reader.fieldnames):
        columns = "'path' and 'label' columns" if labelled else "a 'path' column"
        raise SourceError(f"{where}: CSV header must name {columns}")
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
