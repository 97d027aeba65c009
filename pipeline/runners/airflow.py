"""Runs the pipeline on Apache Airflow 2 with TFX's AirflowDagRunner: one Airflow task per
component, run on the config's schedule, plus a last task that logs the run's summary.

The data snapshot (input fingerprint and span) is taken when the DAG file is parsed, because
TFX's Airflow runner bakes component settings into the DAG then. That is at run time where it
matters: `airflow dags test` parses the file when the run starts, and Airflow's workers parse the
DAG file afresh for every task they run (`airflow tasks run`), so ImageExampleGen's task numbers
its span from the data and ML Metadata as they are when it starts, and images added since the last
run become the next span. The scheduler's own periodic parses only read the DAG's shape.

Airflow is imported only here and only when a DAG is built: it lives in its own environment
(`make orchestrators`), not in the project's main one.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import shlex
from collections.abc import Mapping

from data_prep.ingest_config import ConfigError
from pipeline.pipeline_config import PRESETS, PipelineConfig, with_absolute_paths

LOGGER = logging.getLogger(__name__)
SUMMARY_TASK = "run_summary"
SUMMARIES_DIR = "run_summaries"  # under the pipeline root: <run_id>.json per scheduled run
# A scheduled DAG needs a start date; with catchup off, only the latest interval runs.
START_DATE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
# The DAG file shipped in pipeline/runners/airflow_dags/ reads these; docs/operations.md shows how
# to set them.
ENVIRONMENT = {
    "IMGPIPE_DATA": "folder of class folders or manifest (required)",
    "IMGPIPE_BUILD_DIR": "pipeline root, ML Metadata and pushed models (default: build)",
    "IMGPIPE_PRESET": "config preset: local or runlocal (default: local)",
    "IMGPIPE_SCHEDULE": "preset or cron expression; 'none' for manual runs (default: @daily)",
    "IMGPIPE_BEAM_ARGS": "Beam options for every Beam job, e.g. '--runner=FlinkRunner ...'",
}


def config_from_environment(environ: Mapping[str, str]) -> PipelineConfig:
    """The pipeline config the shipped DAG file runs, from IMGPIPE_* variables (ENVIRONMENT)."""
    data = environ.get("IMGPIPE_DATA")
    if not data:
        raise ConfigError("IMGPIPE_DATA", "is not set: the DAG needs the input to ingest")
    preset = environ.get("IMGPIPE_PRESET", "local")
    if preset not in PRESETS:
        raise ConfigError("IMGPIPE_PRESET", f"{preset!r} is not one of {sorted(PRESETS)}")
    config = PRESETS[preset](data, environ.get("IMGPIPE_BUILD_DIR", "build"))
    if "IMGPIPE_SCHEDULE" in environ:
        schedule = environ["IMGPIPE_SCHEDULE"]
        config = dataclasses.replace(
            config, schedule=None if schedule.lower() == "none" else schedule
        )
    beam_args = shlex.split(environ.get("IMGPIPE_BEAM_ARGS", ""))
    if beam_args:
        config = dataclasses.replace(config, beam_args=(*config.beam_args, *beam_args))
    return config.validate()


def airflow_dag(config: PipelineConfig):
    """An airflow.models.DAG named after the pipeline that runs it on config.schedule."""
    from airflow.operators.python import PythonOperator
    from ml_metadata.metadata_store import metadata_store
    from tfx.orchestration.airflow.airflow_dag_runner import (
        AirflowDagRunner,
        AirflowPipelineConfig,
    )

    from pipeline.code_fingerprint import code_fingerprint
    from pipeline.factory import create_pipeline
    from pipeline.gate.data_snapshot import take_snapshot

    config = with_absolute_paths(config.validate())
    os.makedirs(os.path.dirname(os.path.abspath(config.metadata_path)), exist_ok=True)
    connection = _store_target(config.metadata_path).connection_config(read_only=False)
    store = metadata_store.MetadataStore(connection)
    data = take_snapshot(config.ingest.input, store, config.name)
    dag_settings = {
        "schedule": config.schedule,
        "start_date": START_DATE,
        "catchup": False,
        # One run at a time: runs share the SQLite store, and spans are numbered in run order.
        "max_active_runs": 1,
        "description": f"imgpipe: {config.ingest.input} -> model pushed under {config.serving_dir}",
    }
    # No drift check on Airflow yet: TFX's legacy launcher fails DistributionValidator's run
    # (seen in `make airflow-test`); the schema, anomaly and class gates still run.
    pipeline = create_pipeline(config, data, code_fingerprint, connection, drift_resolver=None)
    dag = AirflowDagRunner(AirflowPipelineConfig(airflow_dag_config=dag_settings)).run(pipeline)
    component_tasks = list(dag.tasks)
    summary = PythonOperator(
        task_id=SUMMARY_TASK,
        python_callable=log_run_summary,
        op_kwargs={
            "metadata_path": config.metadata_path,
            "pipeline_name": config.name,
            "summaries_dir": os.path.join(config.pipeline_root, SUMMARIES_DIR),
        },
        trigger_rule="all_done",  # a failed run is summarized too: which component failed
        dag=dag,
    )
    summary.set_upstream(component_tasks)
    return dag


def log_run_summary(
    metadata_path: str, pipeline_name: str, summaries_dir: str, ti, dag_run
) -> dict:
    """The Airflow run's summary from ML Metadata: logged, written to <summaries_dir>/<run_id>.json
    and returned (Airflow keeps it as the task's XCom). Fails when a component task did not
    succeed: this task runs whatever happened upstream, and as the DAG's last task it decides the
    run's state."""
    from pipeline.lineage import run_record
    from pipeline.lineage.formatting import format_run_summary

    task_states = {task.task_id: task.state for task in dag_run.get_task_instances()}
    recorded = run_record(_store_target(metadata_path).open(), pipeline_name, ti.run_id)
    components = tuple(  # the legacy launcher leaves a failed component 'running'
        dataclasses.replace(component, state="failed")
        if task_states.get(component.node) == "failed"
        else component
        for component in recorded.components
    )
    recorded = dataclasses.replace(recorded, components=components)
    for component in recorded.components:  # Airflow's own log shows no line per component
        LOGGER.info("  %-24s %-7s %7.1f s", component.node, component.state, component.seconds)
    for line in format_run_summary(recorded).splitlines():
        LOGGER.info("%s", line)
    summary = dataclasses.asdict(recorded)
    os.makedirs(summaries_dir, exist_ok=True)
    with open(os.path.join(summaries_dir, f"{summary_file_name(ti.run_id)}.json"), "w") as handle:
        json.dump(summary, handle, indent=2, default=str)
    unsuccessful = sorted(
        f"{task} ({state})"
        for task, state in task_states.items()
        if task != ti.task_id and state != "success"
    )
    if unsuccessful:
        raise RuntimeError(f"run {ti.run_id} did not complete: {', '.join(unsuccessful)}")
    return summary


def _store_target(metadata_path: str):
    """The store the DAG writes: IMGPIPE_MLMD_* in the scheduler's environment (MySQL for a
    shared Airflow), else the SQLite file at metadata_path. Never in the DAG's task arguments,
    which Airflow shows in its UI: the password stays in the environment."""
    from pipeline.mlmd_connection import MlmdTarget

    return MlmdTarget.resolve({}, os.environ, default_sqlite=metadata_path)


def summary_file_name(run_id: str) -> str:
    """A run id as a file name (Airflow's ids hold ':' and '+'); also names the run's report."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
