"""The review of a run's likely label errors, and the corrected manifest made from it.

Each suspect is marked confirmed (its label is wrong: the class the audit suggests replaces it),
wrong (the audit erred: the label stays) or unsure (the label stays). The marks live in one JSON
file beside the metadata store, the only file the UI writes: replaced whole through a new file
and a rename (data_prep/writing/local_files.py), so a reader never sees half of it and a link
there is replaced, never written through; never inside the data a run read.
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading

from data_prep.reading.files import read_file
from data_prep.writing.local_files import write_atomically

CONFIRMED, WRONG, UNSURE = "confirmed", "wrong", "unsure"
VERDICTS = (CONFIRMED, WRONG, UNSURE)
REVIEW_FILE = "label-review.json"
MAX_BYTES = 64 << 20  # some half a million marks


class ReviewError(ValueError):
    """A mark that cannot be kept (an unknown verdict, a review file inside the data) or a
    manifest that cannot be made (the run's input is gone)."""


def review_path_beside(store_path: str) -> str:
    """The review file of a SQLite store: in the store's folder."""
    return os.path.join(os.path.dirname(os.path.abspath(store_path)), REVIEW_FILE)


class Review:
    """The marks in the review file: run id -> suspect's path -> {"verdict", "label"}."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()  # one mark at a time: each rewrites the whole file

    def marks(self, run_id: str) -> dict[str, dict]:
        return self._read().get(run_id, {})

    def mark(self, run_id: str, data_root: str, path: str, verdict: str, label: str) -> None:
        """Keeps a verdict on the suspect at path (relative to the run's data_root); `label` is
        the class a confirmed suspect takes."""
        if verdict not in VERDICTS:
            raise ReviewError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
        if data_root and _inside(self.path, data_root):
            raise ReviewError(f"the review file {self.path} would lie inside the data {data_root}")
        with self._lock:
            everything = self._read()
            everything.setdefault(run_id, {})[path] = {"verdict": verdict, "label": label}
            text = json.dumps(everything, indent=1, sort_keys=True) + "\n"
            write_atomically(self.path, text.encode("utf-8"))

    def _read(self) -> dict:
        try:
            return json.loads(read_file(self.path, MAX_BYTES))
        except FileNotFoundError:
            return {}


def _inside(path: str, data_root: str) -> bool:
    """Whether path lies in the data: under the class folders, or beside a manifest."""
    from data_prep.reading.sources import MANIFEST_EXTENSIONS

    if "://" in data_root:
        return False
    folder = data_root
    if data_root.lower().endswith(MANIFEST_EXTENSIONS):
        folder = os.path.dirname(os.path.abspath(data_root))
    folder = os.path.realpath(folder)
    return os.path.realpath(path).startswith(folder.rstrip(os.sep) + os.sep)


def corrected_manifest(data_root: str, marks: dict[str, dict]) -> str:
    """The run's input as a manifest (`path,label[,split]`, absolute paths), each confirmed
    suspect under the label its mark gives; `imgpipe run --data` reads it. Files outside any
    class folder (never trained on) are left out."""
    from data_prep.reading.sources import SourceError, list_sources

    try:
        listed = list_sources(data_root)
    except SourceError as error:
        raise ReviewError(f"the run's input cannot be listed again: {error}") from error
    sources = [source for source in listed if source.label is not None]
    with_split = any(source.split for source in sources)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["path", "label", *(["split"] if with_split else [])])
    for source in sources:
        mark = marks.get(source.relative_path, {})
        label = mark["label"] if mark.get("verdict") == CONFIRMED else source.label
        writer.writerow([source.path, label, *([source.split or ""] if with_split else [])])
    return out.getvalue()
