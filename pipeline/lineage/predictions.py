"""Which models scored an image: the predictions files `imgpipe predict --output` recorded, each
linked to the model it loaded, searched for the image's path and its bytes' sha256."""

from __future__ import annotations

import dataclasses

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline.lineage.images import file_sha256
from pipeline.lineage.store import ArtifactRecord, MetadataGraph, same_file
from pipeline.predictions_file import PredictionRow, read_rows


@dataclasses.dataclass(frozen=True)
class Scoring:
    predictions: ArtifactRecord  # the predictions file (its uri) and its counts
    model: ArtifactRecord | None  # the PushedModel or Model that scored it
    match: str  # "path and bytes", "path only (the file changed since)", "bytes only (...)"
    row: dict  # the file's row (PredictionRow.as_dict)


@dataclasses.dataclass(frozen=True)
class PredictionsLineage:
    query: str
    sha256: str | None  # of the file now; None when it cannot be read
    scorings: tuple[Scoring, ...]
    unreadable: tuple[ArtifactRecord, ...]  # recorded predictions files gone or unreadable
    # Overwritten predictions files (a later `--output` to the same path) are left out.


def _how_matched(same_path: bool, digest: str | None, row: PredictionRow) -> str:
    if not same_path:
        return f"bytes only (scored as {row.file})"
    if digest is None or not row.sha256:
        return "path"
    return "path and bytes" if row.sha256 == digest else "path only (the file changed since)"


def predictions_lineage(store: metadata_store.MetadataStore, path: str) -> PredictionsLineage:
    """Every recorded prediction of the image at path (by path, or by content under any name),
    with the model that made it, oldest first."""
    graph = MetadataGraph(store)
    digest = file_sha256(path)
    scorings, unreadable = [], []
    for artifact in graph.artifacts_of_type(metadata_keys.PREDICTIONS_TYPE):
        if artifact.state != mlmd_pb2.Artifact.LIVE:  # overwritten by later predictions
            continue
        record = graph.record(artifact)
        try:
            rows = read_rows(artifact.uri)
        except (OSError, ValueError, KeyError):
            unreadable.append(record)
            continue
        found = [
            row
            for row in rows
            if same_file(row.file, path) or (digest is not None and row.sha256 == digest)
        ]
        if not found:
            continue
        producer = graph.producer(artifact.id, metadata_keys.PREDICTIONS_OUTPUT_KEY)
        models = graph.inputs(producer.id, metadata_keys.PREDICT_MODEL_KEY) if producer else []
        model = graph.record(models[0]) if models else None
        for row in found:
            match = _how_matched(same_file(row.file, path), digest, row)
            scorings.append(Scoring(record, model, match, row.as_dict()))
    return PredictionsLineage(path, digest, tuple(scorings), tuple(unreadable))
