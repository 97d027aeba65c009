"""Compiles the pipeline for Vertex AI Pipelines (or Kubeflow Pipelines v2) with TFX's
KubeflowV2DagRunner: a PipelineJob spec (JSON) whose every component runs in one container image,
built from pipeline/runners/Dockerfile, which installs this project (Transform's and the Trainer's
code
are imported from it by name, see pipeline/factory.py, so nothing is packaged at compile time).

Vertex keeps its own ML Metadata, out of reach when compiling, so the span is the caller's to give
(one compile per data drop, e.g. from CI); the input fingerprint is still taken here, so a new data
drop changes the ingest's settings and invalidates Vertex's cache exactly as in local runs.
Needs kfp-pipeline-spec, which the orchestrators environment has (`make orchestrators`).
For the same reason the drift check's baseline is an explicit input there: the statistics the
blessed model was trained on (a StatisticsGen output folder), imported by the spec, since the
resolver that finds them locally is custom code Kubeflow V2 cannot compile. Each compile curates
its span's own schema.
"""

from __future__ import annotations

import dataclasses
import json
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from data_prep.contract.config_error import ConfigError
from pipeline.code_fingerprint import code_fingerprint
from pipeline.config.pipeline_config import PipelineConfig
from pipeline.factory import create_pipeline, imported_drift_baseline, latest_blessed_baseline
from pipeline.validation.data_snapshot import DataSnapshot, take_snapshot


def snapshot_for_vertex(input_path: str, span: int) -> DataSnapshot:
    """The input's fingerprint and classes, as the given span (see the module docstring)."""
    if span < 1:
        raise ValueError(f"span {span} must be 1 or more")
    empty_store = metadata_store.MetadataStore(
        metadata_store_pb2.ConnectionConfig(fake_database=metadata_store_pb2.FakeDatabaseConfig())
    )
    return dataclasses.replace(take_snapshot(input_path, empty_store, "vertex"), span=span)


def compile_vertex(
    config: PipelineConfig,
    data: DataSnapshot,
    image: str,
    output_path: str,
    drift_baseline: str | None = None,
) -> dict:
    """Writes the PipelineJob JSON to output_path and returns it. config.pipeline_root becomes
    the job's pipeline root (a gs:// folder on Vertex). drift_baseline: the URI of the
    statistics the span is compared with; needed from span 2 on (a first span has no blessed
    model to compare with, so its spec has no drift check)."""
    from tfx.v1.orchestration import experimental

    config.validate()
    if drift_baseline is None and data.span > 1:
        raise ConfigError(
            "drift-baseline",
            f"is needed for span {data.span}: the StatisticsGen folder of the data the blessed "
            "model was trained on, which the drift check compares the span with",
        )
    pipeline = create_pipeline(
        config,
        data,
        code_fingerprint,
        None,
        latest_blessed_baseline,
        imported_drift_baseline(drift_baseline) if drift_baseline else None,
    )
    runner = experimental.KubeflowV2DagRunner(
        config=experimental.KubeflowV2DagRunnerConfig(default_image=image),
        output_dir=os.path.dirname(os.path.abspath(output_path)),
        output_filename=os.path.basename(output_path),
    )
    runner.run(pipeline)
    with open(output_path) as handle:
        return json.load(handle)
