"""Runs the pipeline on this machine: LocalDagRunner, Beam DirectRunner, SQLite ML Metadata."""

from __future__ import annotations

import dataclasses
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from data_prep.sources import input_fingerprint
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


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path)
    )


def run_local(config: PipelineConfig) -> RunSummary:
    """Validates, runs the whole pipeline, and summarizes this run from ML Metadata."""
    config.validate()
    os.makedirs(os.path.dirname(os.path.abspath(config.metadata_path)), exist_ok=True)
    fingerprint = input_fingerprint(config.ingest.input)
    tfx.orchestration.LocalDagRunner().run(create_pipeline(config, fingerprint))
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
        for execution in executions:
            node = next(c.name for c in contexts[execution.id] if c.type_id == node_type)
            elapsed = execution.last_update_time_since_epoch - execution.create_time_since_epoch
            state = _STATES.get(execution.last_known_state, "unknown")
            components.append(ComponentRun(node.split(".", 1)[-1], state, elapsed / 1000))
        return RunSummary(run.name, tuple(components))
    raise LookupError(f"no runs of pipeline {pipeline_name!r} in this metadata store")
