"""Runs the pipeline on this machine: LocalDagRunner, Beam DirectRunner, SQLite ML Metadata."""

from __future__ import annotations

import logging
import os

from ml_metadata.metadata_store import metadata_store
from tfx import v1 as tfx

from pipeline.code_fingerprint import code_fingerprint
from pipeline.config import PipelineConfig
from pipeline.data_snapshot import take_snapshot
from pipeline.factory import create_pipeline
from pipeline.lineage import PipelineRun, list_runs

LOGGER = logging.getLogger(__name__)


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path)
    )


def run_local(config: PipelineConfig) -> PipelineRun:
    """Validates, numbers the input's span, runs the whole pipeline, and summarizes this run from
    ML Metadata. A failed component (the data gate stopping a span among them) ends the run; its
    record says which and why (PipelineRun.stopped_by, not_pushed_reason)."""
    config.validate()
    os.makedirs(os.path.dirname(os.path.abspath(config.metadata_path)), exist_ok=True)
    store = open_store(config.metadata_path)
    data = take_snapshot(config.ingest.input, store, config.name)
    pipeline = create_pipeline(config, data, code_fingerprint())
    try:
        tfx.orchestration.LocalDagRunner().run(pipeline)
    except Exception:
        summary = summarize_latest_run(store, config.name)
        if summary.status != "failed":
            raise  # not a component's failure: nothing in ML Metadata explains it
        LOGGER.info("run %s failed", summary.run_id, exc_info=True)
        return summary
    return summarize_latest_run(store, config.name)


def summarize_latest_run(store: metadata_store.MetadataStore, pipeline_name: str) -> PipelineRun:
    """The newest run of the pipeline: each component's outcome and time, in execution order."""
    return list_runs(store, pipeline_name, limit=1)[0]
