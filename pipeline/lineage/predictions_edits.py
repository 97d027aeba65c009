"""A recorded predictions file (`imgpipe predict --output`): which model wrote it, and which of its
rows were edited since. The record keeps the file's SHA-256 (on the Predictions artifact) and a
short digest of each row's cells as written, keyed by a digest of its file column (on the
Predict execution), so the file as it is now is compared cell by cell without a copy of it.
Only a local file is compared: one elsewhere keeps its record of the model alone."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from data_prep.reading.file_access import is_remote
from data_prep.reading.files import read_file
from pipeline.lineage.store import ArtifactRecord, LineageError, MetadataGraph, same_file
from pipeline.predictions_file import FORMATS, MAX_BYTES

# A bigger file keeps its SHA-256 alone: the digests of 100,000 rows take some 2 MB of the store.
MAX_ROW_DIGESTS = 100_000
DIGEST_CHARS = 10  # of a SHA-256 in hex: a changed row goes unseen once in 2**40
MAX_LISTED = 20  # rows named per kind of change; the rest are counted


@dataclasses.dataclass(frozen=True)
class PredictionsFileLineage:
    path: str
    predictions: ArtifactRecord  # the recorded file: its uri, counts and recorded sha256
    model: ArtifactRecord | None  # the PushedModel or Model that wrote it
    sha256: str | None  # of the file now; None when it cannot be read here
    unchanged: bool | None  # its bytes are the recorded ones; None: no SHA-256 to compare
    rows_compared: bool  # the record holds row digests and the file reads as predictions now
    edited: tuple[str, ...]  # the files whose rows differ from the recorded ones
    added: tuple[str, ...]  # rows of files the recorded file did not hold
    removed: int  # recorded rows no longer in the file
    unreadable: str = ""  # why the file does not read as predictions now


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:DIGEST_CHARS]


def _row_digests(path: str, data: bytes) -> dict[str, tuple[str, str]]:
    """Each row's file and digest of its cells (every column as the file holds it: an edited
    top_class or probability counts), by the digest of its file column. Raises ValueError,
    KeyError or TypeError for bytes that are no predictions rows."""
    text = data.decode("utf-8")
    if path.lower().endswith(".jsonl"):
        rows = [json.loads(line) for line in text.splitlines() if line]
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
    return {
        _digest(row["file"]): (row["file"], _digest(json.dumps(row, sort_keys=True)))
        for row in rows
    }


def written_contents(path: str) -> tuple[str | None, str | None]:
    """What the record keeps of a predictions file just written: its SHA-256, and its rows'
    digests as '<file digest>:<row digest>' pairs, space-separated (None above MAX_ROW_DIGESTS
    rows). (None, None) for a file elsewhere than on the local disk."""
    if is_remote(path):
        return None, None
    data = read_file(path, MAX_BYTES)
    digests = _row_digests(path, data)
    pairs = None
    if len(digests) <= MAX_ROW_DIGESTS:
        pairs = " ".join(f"{key}:{digest}" for key, (_, digest) in digests.items())
    return hashlib.sha256(data).hexdigest(), pairs


def _recorded_file(graph: MetadataGraph, path: str) -> mlmd_pb2.Artifact | None:
    """The live Predictions artifact written at path: the newest, as a later `--output` to the
    same path retires the ones before it."""
    found = [
        artifact
        for artifact in graph.artifacts_of_type(metadata_keys.PREDICTIONS_TYPE)
        if artifact.state == mlmd_pb2.Artifact.LIVE and same_file(artifact.uri, path)
    ]
    return max(found, key=lambda artifact: artifact.id) if found else None


def predictions_file_lineage(
    store: metadata_store.MetadataStore, path: str
) -> PredictionsFileLineage | None:
    """What the store recorded of the predictions file at path and how it changed since; None
    when path is no recorded predictions file. Raises LineageError for a CSV or JSON lines file
    that no `imgpipe predict --output` recorded."""
    graph = MetadataGraph(store)
    artifact = _recorded_file(graph, path)
    if artifact is None:
        if path.lower().endswith(FORMATS):
            raise LineageError(
                f"{path} is no predictions file recorded in this store (`imgpipe predict "
                "--output FILE` records the file it writes); give an image to find its scorings"
            )
        return None
    producer = graph.producer(artifact.id, metadata_keys.PREDICTIONS_OUTPUT_KEY)
    models = graph.inputs(producer.id, metadata_keys.PREDICT_MODEL_KEY) if producer else []
    recorded_sha256 = artifact.custom_properties.get(metadata_keys.FILE_SHA256_PROPERTY)
    executed = producer.custom_properties if producer else {}
    digests = executed.get(metadata_keys.ROW_DIGESTS_PROPERTY)
    now, unchanged, changes, unreadable = None, None, ((), (), 0), ""
    try:
        data = None if is_remote(path) else read_file(path, MAX_BYTES)
        if data is not None:
            now = hashlib.sha256(data).hexdigest()
            rows = _row_digests(path, data)
    except (OSError, ValueError, KeyError, TypeError) as error:
        unreadable = f"{type(error).__name__}: {error}".splitlines()[0]
    else:
        if data is None:
            unreadable = "only a file on the local disk is compared"
        elif digests:
            changes = _changes(rows, digests.string_value)
    if recorded_sha256 is not None and now is not None:
        unchanged = now == recorded_sha256.string_value
    return PredictionsFileLineage(
        path,
        graph.record(artifact),
        graph.record(models[0]) if models else None,
        now,
        unchanged,
        bool(digests) and not unreadable,
        *changes,
        unreadable=unreadable,
    )


def _changes(now: dict[str, tuple[str, str]], recorded: str) -> tuple[tuple, tuple, int]:
    """(the files whose rows were edited, the files added, how many recorded rows are gone)."""
    expected = dict(pair.split(":", 1) for pair in recorded.split())
    edited = tuple(
        file for key, (file, digest) in now.items() if expected.get(key, digest) != digest
    )
    added = tuple(file for key, (file, _) in now.items() if key not in expected)
    return edited, added, len(expected.keys() - now.keys())
