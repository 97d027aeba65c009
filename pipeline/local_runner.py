"""Runs the pipeline on this machine: LocalDagRunner, Beam DirectRunner, SQLite ML Metadata."""

from __future__ import annotations

import dataclasses
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from data_prep.sources import input_fingerprint
from pipeline.code_fingerprint import code_fingerprint
from pipeline.config import PipelineConfig
from pipeline.factory import create_pipeline

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
    eval_accuracy: float | None = None  # None when the Evaluator did not run
    blessed: bool | None = None
    pushed_to: str | None = None  # the pushed model's folder; None when nothing was pushed
    # The trained model's performance report (images/s, step time, ...) from its MLMD properties.
    training_performance: dict | None = None


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path)
    )


def run_local(config: PipelineConfig) -> RunSummary:
    """Validates, runs the whole pipeline, and summarizes this run from ML Metadata."""
    config.validate()
    os.makedirs(os.path.dirname(os.path.abspath(config.metadata_path)), exist_ok=True)
    pipeline = create_pipeline(config, input_fingerprint(config.ingest.input), code_fingerprint())
    tfx.orchestration.LocalDagRunner().run(pipeline)
    return summarize_latest_run(open_store(config.metadata_path), config.name)


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
        components = []
        outputs = _output_artifacts(store, [e.id for e in executions])
        for execution in executions:
            node = next(c.name for c in contexts[execution.id] if c.type_id == node_type)
            elapsed = execution.last_update_time_since_epoch - execution.create_time_since_epoch
            state = _STATES.get(execution.last_known_state, "unknown")
            components.append(ComponentRun(node.split(".", 1)[-1], state, elapsed / 1000))
        return RunSummary(run.name, tuple(components), **_outcome(outputs))
    raise LookupError(f"no runs of pipeline {pipeline_name!r} in this metadata store")


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
        by_type.setdefault(type_names[found.type_id], []).append(found)
    return by_type


def _outcome(outputs: dict[str, list]) -> dict:
    outcome = {}
    for blessing in outputs.get("ModelBlessing", []):
        outcome["blessed"] = bool(blessing.custom_properties["blessed"].int_value)
    for pushed in outputs.get("PushedModel", []):
        if pushed.custom_properties["pushed"].int_value:
            outcome["pushed_to"] = pushed.custom_properties["pushed_destination"].string_value
    for model in outputs.get("Model", []):
        outcome["training_performance"] = _performance(model)
    for evaluation in outputs.get("ModelEvaluation", []):
        outcome["eval_accuracy"] = _accuracy(evaluation.uri)
    return outcome


def _performance(model) -> dict | None:
    """The Trainer's performance report, from the Model artifact's custom properties."""
    from components.trainer_module import REPORT_PROPERTY_PREFIX

    report = {
        name.removeprefix(REPORT_PROPERTY_PREFIX): getattr(value, value.WhichOneof("value"))
        for name, value in model.custom_properties.items()
        if name.startswith(REPORT_PROPERTY_PREFIX)
    }
    return report or None


def _accuracy(evaluation_uri: str) -> float | None:
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(evaluation_uri)
    for _, metrics in result.slicing_metrics:
        value = metrics.get("", {}).get("", {}).get("sparse_categorical_accuracy")
        if value:
            return float(value["doubleValue"])
    return None
