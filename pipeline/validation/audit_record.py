"""`imgpipe audit` in ML Metadata: which dataset it audits (the pipeline's newest ingest, or the
one it ingested from --data, recorded as ImageExampleGen records its outputs) and the record of
its report: an execution that read the Examples and wrote a DataHealth artifact, as
DataHealthGen's does, so the lineage of a dataset shows its audits."""

from __future__ import annotations

import dataclasses
import json
import posixpath

import tensorflow as tf
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2
from tfx.types import artifact, standard_artifacts

from components import metadata_keys
from components.artifacts import DataHealth, IngestReport
from components.ingest.image_example_gen import describe_ingest
from components.ingest.ingest_report_reader import IngestReportRecord
from components.validation.data_health import describe_health
from components.validation.label_audit import AuditInput
from data_prep.contract.label_map import class_names
from data_prep.ingest import read_ingest_report
from data_prep.ingest_config import IngestConfig
from data_prep.writing.ingest_outputs import IngestOutputs
from pipeline.lineage.store import MetadataGraph
from pipeline.validation.data_snapshot import newest_examples

EXAMPLES_KEY = "examples"  # ImageExampleGen's output key, the DataHealthGen's input key


class NothingToAudit(LookupError):
    """The store holds no ingest of the pipeline, or its Examples hold no shards."""


@dataclasses.dataclass(frozen=True)
class AuditedDataset:
    examples_id: int
    data: AuditInput


def newest_ingest(store: metadata_store.MetadataStore, pipeline_name: str) -> AuditedDataset:
    """The newest span the pipeline ingested; NothingToAudit when it never ingested."""
    examples = newest_examples(store, pipeline_name)
    graph = MetadataGraph(store)
    producer = graph.producer(examples.id, EXAMPLES_KEY) if examples is not None else None
    reports = graph.outputs(producer.id, metadata_keys.INGEST_REPORT_OUTPUT_KEY) if producer else []
    if not reports:
        raise NothingToAudit(
            f"pipeline {pipeline_name!r} has no ingest in this metadata store; run `imgpipe run` "
            "first or name the images with --data"
        )
    ingest = IngestReportRecord.read(reports[0])
    return AuditedDataset(
        examples.id,
        AuditInput(
            _shards(examples.uri),
            class_names(ingest.label_map),
            read_ingest_report(IngestOutputs.under(ingest.uri)),
        ),
    )


def record_ingest(
    store: metadata_store.MetadataStore, outputs: IngestOutputs, config: IngestConfig
) -> AuditedDataset:
    """Records an ingest written by the audit itself (IngestOutputs.under one folder) as an
    execution that output the Examples and their IngestReport, its settings recorded as
    ImageExampleGen's are."""
    report = read_ingest_report(outputs)
    examples, ingest_report = standard_artifacts.Examples(), IngestReport()
    examples.uri = outputs.examples_dir
    ingest_report.uri = posixpath.dirname(outputs.report_path)
    describe_ingest(report, config.input, examples, ingest_report)
    _, (examples_id, _) = _put_execution(
        store,
        metadata_keys.AUDIT_INGEST_EXECUTION_TYPE,
        [
            (examples, EXAMPLES_KEY),
            (ingest_report, metadata_keys.INGEST_REPORT_OUTPUT_KEY),
        ],
        {metadata_keys.INGEST_CONFIG_PARAMETER: config.to_json()},
    )
    data = AuditInput(_shards(outputs.examples_dir), class_names(report["label_map"]), report)
    return AuditedDataset(examples_id, data)


def record_audit(
    store: metadata_store.MetadataStore, examples_id: int, report_dir: str, health: dict
) -> int:
    """Records the audit's report as a DataHealth made from the Examples; returns its id."""
    data_health = DataHealth()
    data_health.uri = report_dir
    describe_health(health, data_health)
    audit = health["audit"]
    data_health.set_int_custom_property(metadata_keys.AUDIT_FOLDS_PROPERTY, audit["folds"])
    data_health.set_float_custom_property(
        metadata_keys.AUDIT_ACCURACY_PROPERTY, audit["held_out_accuracy_overall"]
    )
    data_health.set_float_custom_property(
        metadata_keys.AUDIT_CHANCE_PROPERTY, audit["chance_accuracy"]
    )
    data_health.set_int_custom_property(
        metadata_keys.AUDIT_AT_CHANCE_PROPERTY, int(audit["at_chance"])
    )
    data_health.set_string_custom_property(
        metadata_keys.AUDIT_TRAINER_PROPERTY, json.dumps(audit["trainer"], sort_keys=True)
    )
    data_health.set_string_custom_property(metadata_keys.AUDIT_METHOD_PROPERTY, audit["method"])
    execution_id, (artifact_id,) = _put_execution(
        store,
        metadata_keys.AUDIT_EXECUTION_TYPE,
        [(data_health, metadata_keys.DATA_HEALTH_OUTPUT_KEY)],
    )
    # The Examples are linked by an event alone: putting their artifact with the execution
    # would write it back.
    read = mlmd_pb2.Event(
        type=mlmd_pb2.Event.INPUT, artifact_id=examples_id, execution_id=execution_id
    )
    read.path.steps.add().key = EXAMPLES_KEY
    store.put_events([read])
    return artifact_id


def _put_execution(
    store: metadata_store.MetadataStore,
    execution_type: str,
    outputs: list[tuple[artifact.Artifact, str]],
    settings: dict[str, str] | None = None,
) -> tuple[int, list[int]]:
    """A complete execution of `execution_type`, with `settings` as custom properties, that
    output each artifact under its key; the artifact types are TFX's own definitions, so a
    pipeline run later finds them unchanged."""
    type_id = store.put_execution_type(mlmd_pb2.ExecutionType(name=execution_type))
    pairs = []
    for made, key in outputs:
        made.type_id = store.put_artifact_type(
            made.artifact_type, can_add_fields=True, can_omit_fields=True
        )
        made.mlmd_artifact.state = mlmd_pb2.Artifact.LIVE
        event = mlmd_pb2.Event(type=mlmd_pb2.Event.OUTPUT)
        event.path.steps.add().key = key
        pairs.append((made.mlmd_artifact, event))
    execution = mlmd_pb2.Execution(type_id=type_id, last_known_state=mlmd_pb2.Execution.COMPLETE)
    for name, value in (settings or {}).items():
        execution.custom_properties[name].string_value = value
    execution_id, artifact_ids, _ = store.put_execution(execution, pairs, [])
    return execution_id, artifact_ids


def _shards(examples_uri: str) -> list[str]:
    """Every split's shards: the audit scores every image."""
    files = sorted(tf.io.gfile.glob(posixpath.join(examples_uri, "Split-*", "*")))
    if not files:
        raise NothingToAudit(f"the Examples at {examples_uri} hold no shards")
    return files
