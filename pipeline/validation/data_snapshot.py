"""What a run is about to ingest (a fingerprint of the input, its span number and its size) and
what the data gate checks it against (the pipeline's label ids and its decided schema).

Runners compute it before building the pipeline, so create_pipeline() stays pure. A span numbers a
data drop: the first ingest of a pipeline is span 1; whenever the input's fingerprint differs from
the newest span's, the run ingests a new span (n + 1), so new images arriving in the same folder
(or a manifest that now lists more) retrain the model on fresh data. An unchanged input keeps its
span, and ImageExampleGen is answered from the cache.
"""

from __future__ import annotations

import dataclasses
import json

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components import metadata_keys
from components.metadata_keys import INPUT_FINGERPRINT_PROPERTY
from pipeline import lineage

EXAMPLE_GEN_NODE = "ImageExampleGen"
SCHEMA_NODE = "CuratedSchemaGen"
SCHEMA_OUTPUT_KEY = "schema"
REFERENCE_LABEL_MAP = "reference_label_map"  # ImageExampleGen's exec properties
PREVIOUS_SOURCE_INDEX = "previous_source_index"
FIRST_SPAN = 1


@dataclasses.dataclass(frozen=True)
class DataSnapshot:
    """Attributes:
    fingerprint: sources.input_fingerprint of the input (paths, sizes, modification times).
    span: the span this input is ingested as.
    (The classes are not known before the ingest has read the images: they are its label map.)
    files: the files listed in the input; sizes the local Beam jobs
    (pipeline/config/beam_options.py).
    reference_label_map: the label ids this span keeps and the class set the gate checks: the
      label map of the data the newest blessed model was trained on, else the pipeline's first
      span's; {} on the first span.
    schema_uri: the Schema artifact the pipeline decided on its first span (CuratedSchemaGen's),
      which every later span is validated against; None until it exists.
    previous_source_index: the newest earlier span's source index, whose images keep their
      splits in this one; "" on the first span.
    """

    fingerprint: str
    span: int
    files: int = 0
    reference_label_map: dict[str, int] = dataclasses.field(default_factory=dict)
    schema_uri: str | None = None
    previous_source_index: str = ""


def take_snapshot(
    input_path: str, store: metadata_store.MetadataStore, pipeline_name: str
) -> DataSnapshot:
    """Fingerprints the input, and numbers its span against the spans in the store."""
    from data_prep.reading.sources import (  # Beam: only a run needs it
        input_fingerprint,
        list_sources,
    )

    fingerprint = input_fingerprint(input_path)
    files = len(list_sources(input_path))
    newest = newest_span(store, pipeline_name)
    if newest is None:
        return DataSnapshot(fingerprint, FIRST_SPAN, files=files)
    span, newest_fingerprint = newest
    unchanged = fingerprint == newest_fingerprint
    return DataSnapshot(
        fingerprint,
        span if unchanged else span + 1,
        files=files,
        # An unchanged span keeps the reference it was ingested and gated with (so the re-run is
        # answered from the cache); a new one takes today's.
        reference_label_map=(
            json.loads(_ingested_setting(store, pipeline_name, REFERENCE_LABEL_MAP) or "{}")
            if unchanged
            else reference_label_map(store, pipeline_name)
        ),
        schema_uri=decided_schema_uri(store, pipeline_name),
        previous_source_index=(
            _ingested_setting(store, pipeline_name, PREVIOUS_SOURCE_INDEX)
            if unchanged
            else lineage.examples_source_index(store, newest_examples(store, pipeline_name).id)
        ),
    )


def _ingested_setting(store: metadata_store.MetadataStore, pipeline_name: str, name: str) -> str:
    """An exec property the newest span's ImageExampleGen was given ("" if none)."""
    producer = lineage.producer_of(store, newest_examples(store, pipeline_name).id, "examples")
    if producer is None:
        return ""
    # The IR-based launchers record settings as custom properties, TFX's legacy one (Airflow's)
    # as properties.
    given = producer.custom_properties.get(name) or producer.properties.get(name)
    return given.string_value if given else ""


def _live_artifacts(store, pipeline_name: str, type_name: str) -> list[metadata_store_pb2.Artifact]:
    """The pipeline's live artifacts of one type, oldest first."""
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    kinds = {kind.name: kind.id for kind in store.get_artifact_types()}
    if pipeline is None or type_name not in kinds:  # never ran, or never made one
        return []
    return sorted(
        (
            artifact
            for artifact in store.get_artifacts_by_context(pipeline.id)
            if artifact.type_id == kinds[type_name]
            and artifact.state == metadata_store_pb2.Artifact.LIVE
        ),
        key=lambda artifact: artifact.id,
    )


def reference_label_map(store: metadata_store.MetadataStore, pipeline_name: str) -> dict[str, int]:
    """The label map of the newest blessed model's training data, else of the first span."""
    blessed = [
        blessing.custom_properties[metadata_keys.CURRENT_MODEL_ID_PROPERTY].int_value
        for blessing in _live_artifacts(store, pipeline_name, "ModelBlessing")
        if blessing.custom_properties.get(metadata_keys.BLESSED_PROPERTY)
        and blessing.custom_properties[metadata_keys.BLESSED_PROPERTY].int_value
    ]
    if blessed:
        return lineage.model_label_map(store, max(blessed))
    first = min(
        (
            artifact
            for artifact in _live_artifacts(store, pipeline_name, "Examples")
            if INPUT_FINGERPRINT_PROPERTY in artifact.custom_properties
        ),
        key=lambda a: (a.properties["span"].int_value, a.id),
        default=None,
    )
    return lineage.examples_label_map(store, first.id) if first else {}


def pipelines_in_store(store: metadata_store.MetadataStore) -> list[str]:
    """The names of the pipelines that ran in the store."""
    return sorted(context.name for context in store.get_contexts_by_type("pipeline"))


def decided_schema_uri(store: metadata_store.MetadataStore, pipeline_name: str) -> str | None:
    """The newest schema CuratedSchemaGen wrote for the pipeline (its first span's): the Schema
    output under the key 'schema' (Transform's are pre_/post_transform_schema, the importer's
    'result')."""
    curated = [
        schema
        for schema in _live_artifacts(store, pipeline_name, "Schema")
        if lineage.producer_of(store, schema.id, SCHEMA_OUTPUT_KEY) is not None
    ]
    return curated[-1].uri if curated else None


def newest_span(store: metadata_store.MetadataStore, pipeline_name: str) -> tuple[int, str] | None:
    """(span, input fingerprint) of the newest live Examples ImageExampleGen wrote, if any.

    Looks in the pipeline's context, which every TFX runner records (the local and Vertex
    runners' node contexts and the Airflow runner's component_run contexts differ), so runs
    by any orchestrator sharing one store number their spans in one sequence.
    """
    artifact = newest_examples(store, pipeline_name)
    if artifact is None:  # this pipeline never ingested (or the store is new)
        return None
    return (
        artifact.properties["span"].int_value,
        artifact.custom_properties[INPUT_FINGERPRINT_PROPERTY].string_value,
    )


def newest_examples(
    store: metadata_store.MetadataStore, pipeline_name: str
) -> metadata_store_pb2.Artifact | None:
    """The live Examples ImageExampleGen wrote with the highest span (the newest among equals)."""
    spans = [
        artifact
        for artifact in _live_artifacts(store, pipeline_name, "Examples")
        if INPUT_FINGERPRINT_PROPERTY in artifact.custom_properties
    ]
    return max(spans, key=lambda a: (a.properties["span"].int_value, a.id), default=None)
