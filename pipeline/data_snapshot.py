"""What a run is about to ingest: a fingerprint of the input and its span number.

Runners compute it before building the pipeline, so create_pipeline() stays pure. A span numbers a
data drop: the first ingest of a pipeline is span 1; whenever the input's fingerprint differs from
the newest span's, the run ingests a new span (n + 1), so new images arriving in the same folder
(or a manifest that now lists more) retrain the model on fresh data. An unchanged input keeps its
span, and ImageExampleGen is answered from the cache.
"""

from __future__ import annotations

import dataclasses

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.metadata_keys import INPUT_FINGERPRINT_PROPERTY
from data_prep.sources import input_fingerprint, list_sources

EXAMPLE_GEN_NODE = "ImageExampleGen"
FIRST_SPAN = 1


@dataclasses.dataclass(frozen=True)
class DataSnapshot:
    """Attributes:
    fingerprint: sources.input_fingerprint of the input (paths, sizes, modification times).
    span: the span this input is ingested as.
    (The classes are not known before the ingest has read the images: they are its label map.)
    previous_span: the newest span already ingested, or None on a pipeline's first ingest.
    files: the files listed in the input; sizes the local Beam jobs (pipeline/beam_options.py).
    """

    fingerprint: str
    span: int
    previous_span: int | None = None
    files: int = 0

    @property
    def is_new_data(self) -> bool:
        return self.span != self.previous_span


def take_snapshot(
    input_path: str, store: metadata_store.MetadataStore, pipeline_name: str
) -> DataSnapshot:
    """Fingerprints the input, and numbers its span against the spans in the store."""
    fingerprint = input_fingerprint(input_path)
    files = len(list_sources(input_path))
    newest = newest_span(store, pipeline_name)
    if newest is None:
        return DataSnapshot(fingerprint, FIRST_SPAN, files=files)
    span, newest_fingerprint = newest
    next_span = span if fingerprint == newest_fingerprint else span + 1
    return DataSnapshot(fingerprint, next_span, previous_span=span, files=files)


def newest_span(store: metadata_store.MetadataStore, pipeline_name: str) -> tuple[int, str] | None:
    """(span, input fingerprint) of the newest live Examples ImageExampleGen wrote, if any.

    Looks in the pipeline's context, which every TFX runner records (the local and Vertex
    runners' node contexts and the Airflow runner's component_run contexts differ), so runs
    by any orchestrator sharing one store number their spans in one sequence.
    """
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:  # this pipeline never ran (or the store is new)
        return None
    examples_type = store.get_artifact_type("Examples")
    spans = [
        (artifact.properties["span"].int_value, artifact.id, artifact)
        for artifact in store.get_artifacts_by_context(pipeline.id)
        if artifact.type_id == examples_type.id
        and artifact.state == metadata_store_pb2.Artifact.LIVE
        and INPUT_FINGERPRINT_PROPERTY in artifact.custom_properties
    ]
    if not spans:
        return None
    span, _, artifact = max(spans, key=lambda found: found[:2])
    return span, artifact.custom_properties[INPUT_FINGERPRINT_PROPERTY].string_value
