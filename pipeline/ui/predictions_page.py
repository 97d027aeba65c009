"""The predictions files `imgpipe predict --output` recorded in ML Metadata, shown like a span on
the data page: each scored file's thumbnail with its answer and probability, its label and
whether the answer is right where the file had one, and why a file was not scored."""

from __future__ import annotations

import dataclasses

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline import lineage
from pipeline.lineage.store import MetadataGraph
from pipeline.ui import media
from pipeline.ui.dataset_page import Gallery, Item

LOW_CONFIDENCE = "low confidence"


@dataclasses.dataclass(frozen=True)
class Recorded:
    predictions: lineage.ArtifactRecord  # the file (its uri) and its counts
    model: lineage.ArtifactRecord | None  # the PushedModel or Model that scored it


@dataclasses.dataclass(frozen=True)
class Predictions(Gallery):
    recorded: Recorded


def recorded(store: metadata_store.MetadataStore) -> list[Recorded]:
    """Every live predictions file (not overwritten by a later one), newest first."""
    graph = MetadataGraph(store)
    found = [
        _recorded(graph, artifact)
        for artifact in graph.artifacts_of_type(metadata_keys.PREDICTIONS_TYPE)
        if artifact.state == mlmd_pb2.Artifact.LIVE
    ]
    return found[::-1]


def _recorded(graph: MetadataGraph, artifact: mlmd_pb2.Artifact) -> Recorded:
    producer = graph.producer(artifact.id, metadata_keys.PREDICTIONS_OUTPUT_KEY)
    models = graph.inputs(producer.id, metadata_keys.PREDICT_MODEL_KEY) if producer else []
    return Recorded(graph.record(artifact), graph.record(models[0]) if models else None)


def predictions(store: metadata_store.MetadataStore, artifact_id: int) -> Predictions:
    """The rows of a recorded predictions file as images to filter, with their thumbnails."""
    from pipeline.predictions_file import SCORED, read_rows

    chosen = next((r for r in recorded(store) if r.predictions.id == artifact_id), None)
    if chosen is None:
        raise lineage.LineageError(f"no live predictions file {artifact_id} in this store")
    try:
        rows = read_rows(chosen.predictions.uri)
    except (OSError, ValueError, KeyError) as error:
        message = f"predictions file {chosen.predictions.uri} cannot be read: {error}"
        raise lineage.LineageError(message) from error
    items, images = [], {}
    for index, row in enumerate(rows):
        scored = row.status == SCORED
        flags = (LOW_CONFIDENCE,) if row.low_confidence else ()
        if not scored:
            flags = (f"{row.status}: {row.reason}" if row.reason else row.status,)
        items.append(
            Item(
                index,
                row.file,
                row.label,
                "",
                flags,
                row.top_class if scored else None,
                row.probability if scored else None,
            )
        )
        small = media.file_thumbnail(row.file)
        if small is not None:
            images[index] = small
    return Predictions(tuple(items), images, chosen)
