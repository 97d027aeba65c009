"""The rows `imgpipe predict` writes, one per input file, as CSV or JSON lines (by the output's
extension), and read back by the lineage: no TensorFlow or Beam import until a file outside the
local disk is opened.

A scored file's row holds its top classes with probabilities, most probable first, and whether
the top one falls below the confidence threshold; a file that is not scored holds the ingest's
status (rejected or ignored) and reason instead. A file with a label (its class folder, or the
manifest's label column) holds it, and whether the top class is it (`correct`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os

from data_prep.reading.files import read_file
from data_prep.writing.local_files import write_atomically

SCORED, REJECTED, IGNORED = "scored", "rejected", "ignored"
FORMATS = (".csv", ".jsonl")
COLUMNS = (
    "file",
    "status",
    "top_class",
    "probability",
    "low_confidence",
    "top_k",
    "model_version",
    "reason",
    "detail",
    "sha256",
    "label",
    "correct",
)
# Beam's filesystems for URIs (gs://, s3://); plain files otherwise, read without Beam.
_URI = "://"
MAX_BYTES = 1 << 30  # some three million rows: what a lineage query reads at most


@dataclasses.dataclass(frozen=True)
class PredictionRow:
    file: str  # absolute path (or URI): as given, or found under a given folder or manifest
    status: str  # SCORED, REJECTED or IGNORED
    top_k: tuple[tuple[str, float], ...] = ()  # (class, probability), most probable first
    low_confidence: bool = False
    model_version: str = ""
    reason: str = ""  # why a file was not scored: the ingest's reason
    detail: str = ""
    sha256: str = ""  # of the bytes scored
    label: str = ""  # the file's class folder or manifest label, when it has one

    @property
    def correct(self) -> bool | None:
        """Whether the top class is the file's label; None for a file unlabelled or unscored."""
        if not self.label or self.status != SCORED:
            return None
        return self.top_class == self.label

    @property
    def top_class(self) -> str:
        return self.top_k[0][0] if self.top_k else ""

    @property
    def probability(self) -> float | None:
        return self.top_k[0][1] if self.top_k else None

    @property
    def shown_file(self) -> str:
        """The file relative to this process's folder when it lies below it, for the console."""
        if "://" in self.file or not self.file.startswith(os.getcwd() + os.sep):
            return self.file
        return os.path.relpath(self.file)

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "status": self.status,
            "top_class": self.top_class,
            "probability": self.probability,
            "low_confidence": self.low_confidence,
            "top_k": [[name, round(probability, 6)] for name, probability in self.top_k],
            "model_version": self.model_version,
            "reason": self.reason,
            "detail": self.detail,
            "sha256": self.sha256,
            "label": self.label,
            "correct": self.correct,
        }

    @classmethod
    def from_dict(cls, row: dict) -> PredictionRow:
        top_k = row.get("top_k") or []
        if isinstance(top_k, str):  # a CSV cell
            top_k = json.loads(top_k) if top_k else []
        low = row.get("low_confidence")
        return cls(
            file=row["file"],
            status=row["status"],
            top_k=tuple((str(name), float(probability)) for name, probability in top_k),
            low_confidence=low is True or low == "true",
            model_version=row.get("model_version") or "",
            reason=row.get("reason") or "",
            detail=row.get("detail") or "",
            sha256=row.get("sha256") or "",
            label=row.get("label") or "",
        )


def check_output_path(path: str, inputs: list[str]) -> None:
    """Raises ValueError unless the path names a format predictions are written in and a
    place that clobbers no input: not an input file or manifest, not inside an input folder
    (it would be scored next time), not a folder."""
    if not path.lower().endswith(FORMATS):
        raise ValueError(f"--output {path!r} must end with {' or '.join(FORMATS)}")
    if _URI in path:
        return
    if os.path.isdir(path):
        raise ValueError(f"--output {path} is a folder; name a file in it")
    target = os.path.realpath(path)
    for source in inputs:
        if _URI in source:
            continue
        real = os.path.realpath(source)
        if target == real or (os.path.isdir(real) and target.startswith(real + os.sep)):
            raise ValueError(
                f"--output {path} would overwrite or add to the input {source}; write it elsewhere"
            )


def format_rows(rows: list[PredictionRow], path: str) -> str:
    """The file's text: CSV with a header, or one JSON object per line."""
    if path.lower().endswith(".jsonl"):
        return "".join(json.dumps(row.as_dict(), sort_keys=True) + "\n" for row in rows)
    text = io.StringIO()
    writer = csv.DictWriter(text, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cells = row.as_dict()
        cells["top_k"] = json.dumps(cells["top_k"])
        cells["low_confidence"] = "true" if row.low_confidence else "false"
        cells["probability"] = "" if row.probability is None else f"{row.probability:.6f}"
        cells["correct"] = "" if row.correct is None else str(row.correct).lower()
        writer.writerow(cells)
    return text.getvalue()


def write_rows(rows: list[PredictionRow], path: str) -> None:
    """Writes the rows sorted by file, on any Beam filesystem; a local file through a temporary
    one beside it, renamed over it when whole (data_prep/writing/local_files.py)."""
    ordered = sorted(rows, key=lambda row: row.file)
    data = format_rows(ordered, path).encode("utf-8")
    if _URI not in path:
        write_atomically(path, data)
        return
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(path) as handle:
        handle.write(data)


def read_rows(path: str) -> list[PredictionRow]:
    """The rows of a predictions file, CSV or JSON lines. A local file is read as a regular file
    of at most MAX_BYTES (data_prep.reading.files)."""
    if _URI in path:
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems

        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            text = handle.read().decode("utf-8")
    else:
        text = read_file(path, MAX_BYTES).decode("utf-8")
    if path.lower().endswith(".jsonl"):
        return [PredictionRow.from_dict(json.loads(line)) for line in text.splitlines() if line]
    return [PredictionRow.from_dict(row) for row in csv.DictReader(io.StringIO(text))]
