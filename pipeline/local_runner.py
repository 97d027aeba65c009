"""Runs the pipeline on this machine: LocalDagRunner, Beam DirectRunner, SQLite ML Metadata."""

from __future__ import annotations

import dataclasses
import json
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from components.image_example_gen import IngestReport
from pipeline.code_fingerprint import code_fingerprint
from pipeline.config import PipelineConfig
from pipeline.data_snapshot import EXAMPLE_GEN_NODE, take_snapshot
from pipeline.factory import create_pipeline

CLASS_SUB_KEY_PREFIX = "classId:"  # TFMA's sub key of metrics binarized by class id
_STATES = {
    metadata_store_pb2.Execution.COMPLETE: "ran",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.RUNNING: "running",
}


@dataclasses.dataclass(frozen=True)
class ComponentRun:
    node: str
    state: str  # ran, cached, failed
    seconds: float


@dataclasses.dataclass(frozen=True)
class RunSummary:
    run_id: str
    components: tuple[ComponentRun, ...]
    span: int | None = None  # the data span this run trained on
    new_data: bool | None = None  # True when this run ingested the span (not from the cache)
    class_names: tuple[str, ...] = ()  # by label id, from the ingest's label map
    eval_accuracy: float | None = None  # None when the Evaluator did not run
    # Precision and recall of each class on the eval split, by label id.
    per_class: dict[int, dict[str, float]] = dataclasses.field(default_factory=dict)
    blessed: bool | None = None
    pushed_to: str | None = None  # the pushed model's folder; None when nothing was pushed


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path)
    )


def run_local(config: PipelineConfig) -> RunSummary:
    """Validates, runs the whole pipeline, and summarizes this run from ML Metadata."""
    config.validate()
    os.makedirs(os.path.dirname(os.path.abspath(config.metadata_path)), exist_ok=True)
    store = open_store(config.metadata_path)
    data = take_snapshot(config.ingest.input, store, config.name)
    pipeline = create_pipeline(config, data, code_fingerprint())
    tfx.orchestration.LocalDagRunner().run(pipeline)
    return summarize_latest_run(store, config.name)


def summarize_latest_run(store: metadata_store.MetadataStore, pipeline_name: str) -> RunSummary:
    """The newest run of the pipeline: each component's outcome and time, in execution order."""
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        raise LookupError(f"no runs of pipeline {pipeline_name!r} in this metadata store")
    node_type = store.get_context_type("node").id
    runs = sorted(
        store.get_contexts_by_type("pipeline_run"),
        key=lambda context: (context.create_time_since_epoch, context.id),
        reverse=True,
    )
    for run in runs:
        executions = sorted(store.get_executions_by_context(run.id), key=lambda e: e.id)
        contexts = {e.id: store.get_contexts_by_execution(e.id) for e in executions}
        if not any(c.id == pipeline.id for found in contexts.values() for c in found):
            continue
        nodes = [
            next(c.name for c in contexts[e.id] if c.type_id == node_type).split(".", 1)[-1]
            for e in executions
        ]
        return summarize_executions(store, run.name, executions, nodes)
    raise LookupError(f"no runs of pipeline {pipeline_name!r} in this metadata store")


def summarize_executions(
    store: metadata_store.MetadataStore, run_id: str, executions: list, nodes: list[str]
) -> RunSummary:
    """One run's summary from its executions (in execution order) and their node ids; shared by
    runners whose ML Metadata contexts differ (the Airflow runner's are TFX's legacy ones)."""
    components = []
    for execution, node in zip(executions, nodes, strict=True):
        elapsed = execution.last_update_time_since_epoch - execution.create_time_since_epoch
        state = _STATES.get(execution.last_known_state, "unknown")
        components.append(ComponentRun(node, state, elapsed / 1000))
    outputs = _output_artifacts(store, [e.id for e in executions])
    return RunSummary(run_id, tuple(components), **_data(components, outputs), **_outcome(outputs))


def _output_artifacts(store, execution_ids: list[int]) -> dict[str, list]:
    """Artifacts the executions produced (or reused from the cache), by artifact type name."""
    outputs = [
        event.artifact_id
        for event in store.get_events_by_execution_ids(execution_ids)
        if event.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
    ]
    by_type: dict[str, list] = {}
    if not outputs:
        return by_type
    type_names = {t.id: t.name for t in store.get_artifact_types()}
    for found in store.get_artifacts_by_id(outputs):
        if found.state == metadata_store_pb2.Artifact.LIVE:  # not a failed execution's pending one
            by_type.setdefault(type_names[found.type_id], []).append(found)
    return by_type


def _data(components: list[ComponentRun], outputs: dict[str, list]) -> dict:
    spans = [examples.properties["span"].int_value for examples in outputs.get("Examples", [])]
    ingest = [c.state for c in components if c.node == EXAMPLE_GEN_NODE]
    label_maps = [
        json.loads(report.custom_properties["label_map"].string_value)
        for report in outputs.get(IngestReport.TYPE_NAME, [])
    ]
    return {
        "span": spans[0] if spans else None,
        "new_data": ingest[0] == "ran" if ingest else None,
        "class_names": tuple(sorted(label_maps[0], key=label_maps[0].get)) if label_maps else (),
    }


def _outcome(outputs: dict[str, list]) -> dict:
    outcome = {}
    for blessing in outputs.get("ModelBlessing", []):
        outcome["blessed"] = bool(blessing.custom_properties["blessed"].int_value)
    for pushed in outputs.get("PushedModel", []):
        if pushed.custom_properties["pushed"].int_value:
            outcome["pushed_to"] = pushed.custom_properties["pushed_destination"].string_value
    for evaluation in outputs.get("ModelEvaluation", []):
        outcome.update(_eval_metrics(evaluation.uri))
    return outcome


def _eval_metrics(evaluation_uri: str) -> dict:
    """Overall accuracy and per-class precision/recall of the overall slice."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(evaluation_uri)
    overall = next(metrics for key, metrics in result.slicing_metrics if key == ())[""]
    per_class: dict[int, dict[str, float]] = {}
    for sub_key, values in overall.items():
        if sub_key.startswith(CLASS_SUB_KEY_PREFIX):
            class_id = int(sub_key.removeprefix(CLASS_SUB_KEY_PREFIX))
            per_class[class_id] = {
                name: float(values[name]["doubleValue"])
                for name in ("precision", "recall")
                if name in values
            }
    accuracy = overall.get("", {}).get("sparse_categorical_accuracy")
    return {
        "eval_accuracy": float(accuracy["doubleValue"]) if accuracy else None,
        "per_class": dict(sorted(per_class.items())),
    }
