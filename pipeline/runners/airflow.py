"""Runs the pipeline on Apache Airflow 2 with TFX's AirflowDagRunner: one Airflow task per
component, run on the config's schedule, plus a last task that logs the run's summary and
shows it as the DAG run's note in Airflow's UI.

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
import functools
import json
import logging
import os
import shlex
from collections.abc import Callable, Mapping

from data_prep.contract.config_error import ConfigError
from pipeline.config.loader import Override, build_dir_overrides, load_config
from pipeline.config.pipeline_config import PRESETS, PipelineConfig, with_absolute_paths

LOGGER = logging.getLogger(__name__)
SUMMARY_TASK = "run_summary"
TASK_LOG = "its Airflow task log has the cause"
# A scheduled DAG needs a start date; with catchup off, only the latest interval runs.
START_DATE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
# The DAG file shipped in pipeline/runners/airflow_dags/ reads these; docs/operations.md shows how
# to set them.
ENVIRONMENT = {
    "IMGPIPE_DATA": "folder of class folders or manifest (required)",
    "IMGPIPE_CONFIG": "pipeline config file applied over the preset (as `imgpipe run --config`)",
    "IMGPIPE_BUILD_DIR": "pipeline root, ML Metadata and pushed models (default: build)",
    "IMGPIPE_PRESET": "config preset: local or runlocal (default: local)",
    "IMGPIPE_SCHEDULE": "preset or cron expression; 'none' for manual runs (default: @daily)",
    "IMGPIPE_BEAM_ARGS": "Beam options for every Beam job, e.g. '--runner=FlinkRunner ...'",
}


def config_from_environment(environ: Mapping[str, str]) -> PipelineConfig:
    """The pipeline config the shipped DAG file runs, from IMGPIPE_* variables (ENVIRONMENT),
    layered as `imgpipe run` layers its flags: the variables beat the config file."""
    data = environ.get("IMGPIPE_DATA")
    if not data:
        raise ConfigError("IMGPIPE_DATA", "is not set: the DAG needs the input to ingest")
    preset = environ.get("IMGPIPE_PRESET", "local")
    if preset not in PRESETS:
        raise ConfigError("IMGPIPE_PRESET", f"{preset!r} is not one of {sorted(PRESETS)}")
    overrides = [Override.of("IMGPIPE_DATA", "ingest.input", data)]
    if environ.get("IMGPIPE_BUILD_DIR"):
        overrides += build_dir_overrides(preset, environ["IMGPIPE_BUILD_DIR"], "IMGPIPE_BUILD_DIR")
    if "IMGPIPE_SCHEDULE" in environ:
        schedule = environ["IMGPIPE_SCHEDULE"]
        schedule = None if schedule.lower() == "none" else schedule
        overrides.append(Override.of("IMGPIPE_SCHEDULE", "schedule", schedule))
    return load_config(
        preset,
        environ.get("IMGPIPE_CONFIG"),
        overrides,
        data=data,
        build_dir=environ.get("IMGPIPE_BUILD_DIR", "build"),
        beam_args=shlex.split(environ.get("IMGPIPE_BEAM_ARGS", "")),
    ).config


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
    from pipeline.ui.report import SUMMARIES_DIR
    from pipeline.validation.data_snapshot import take_snapshot

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
        # TFX's legacy launcher records nothing when a component fails: each task says why.
        "default_args": {
            "on_failure_callback": functools.partial(
                record_task_failure, metadata_path=config.metadata_path, pipeline_name=config.name
            )
        },
    }
    pipeline = create_pipeline(config, data, code_fingerprint, connection)
    dag = AirflowDagRunner(AirflowPipelineConfig(airflow_dag_config=dag_settings)).run(pipeline)
    component_tasks = list(dag.tasks)
    summary = PythonOperator(
        task_id=SUMMARY_TASK,
        python_callable=log_run_summary,
        op_kwargs={
            "metadata_path": config.metadata_path,
            "pipeline_name": config.name,
            "summaries_dir": os.path.join(config.pipeline_root, SUMMARIES_DIR),
            "serving_folder": os.path.join(config.serving_dir, config.name),
        },
        trigger_rule="all_done",  # a failed run is summarized too: which component failed
        dag=dag,
    )
    summary.set_upstream(component_tasks)
    return dag


def note_on_dag_run(dag_run, text: str) -> None:
    """Shows the run's summary as the DAG run's note (Airflow's grid view and run details)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        run = session.get(DagRun, dag_run.id)
        run.note = text


def log_run_summary(
    metadata_path: str,
    pipeline_name: str,
    summaries_dir: str,
    serving_folder: str,
    ti,
    dag_run,
    show: Callable[[object, str], None] = note_on_dag_run,
) -> dict:
    """The Airflow run's summary from ML Metadata: logged, shown (as the DAG run's note in the UI),
    written to <summaries_dir>/<run_id>.json and returned (Airflow keeps it as the task's XCom).
    Fails when a component task did not succeed: this task runs whatever happened upstream, and
    as the DAG's last task it decides the run's state. Before that, the serving folder gets the
    repair the local runner gives it before a run (pipeline/serving/serving_folder.py): every
    run of the DAG is over then (max_active_runs=1), so the staging folders of pushes that did
    not finish are removed, and a push whose folder changed is pushed again by the next run."""
    from pipeline.lineage import run_record
    from pipeline.lineage.formatting import format_run_summary
    from pipeline.serving.serving_folder import repair_serving_folder
    from pipeline.ui.report import summary_file_name

    task_states = {task.task_id: task.state for task in dag_run.get_task_instances()}
    store = _writable_store(metadata_path)
    for task, state in task_states.items():  # a task killed before its callback ran
        if state == "failed":
            mark_failed(store, pipeline_name, ti.run_id, task, f"{task} failed; {TASK_LOG}")
    close_dead_runs(store, pipeline_name, ti.run_id)
    for line in repair_serving_folder(store, serving_folder, pipeline_name):
        LOGGER.info("%s", line)
    recorded = run_record(store, pipeline_name, ti.run_id)
    for component in recorded.components:  # Airflow's own log shows no line per component
        LOGGER.info("  %-24s %-7s %7.1f s", component.node, component.state, component.seconds)
    text = format_run_summary(recorded)
    for line in text.splitlines():
        LOGGER.info("%s", line)
    show(dag_run, text)
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


def record_task_failure(context, metadata_path: str, pipeline_name: str) -> None:
    """Airflow's on_failure_callback of every component task: the failed component's execution
    in ML Metadata becomes failed, with the exception's message as its result (a span the data
    gate stopped: the gate's reasons), as the local runner records it."""
    ti, error = context["ti"], context.get("exception")
    message = str(error) if error else f"{ti.task_id} failed; {TASK_LOG}"
    store = _writable_store(metadata_path)
    mark_failed(store, pipeline_name, ti.run_id, ti.task_id, message)


def mark_failed(store, pipeline_name: str, run_id: str, node: str, message: str) -> None:
    """Marks the unfinished execution of `node` in the legacy run `run_id` failed, with
    `message` as its result; does nothing when there is none (a finished or never started
    component)."""
    from pipeline.lineage.store import LEGACY_RUN_CONTEXT

    run = store.get_context_by_type_and_name(LEGACY_RUN_CONTEXT, f"{pipeline_name}.{run_id}")
    if run is not None:
        _fail_unfinished(store, run, message, node)


def close_dead_runs(store, pipeline_name: str, run_id: str) -> None:
    """Marks failed what earlier runs of the pipeline left unfinished: the DAG runs one run at a
    time (max_active_runs=1), so their processes are gone (killed, or their host lost), and a
    killed run must not show as running."""
    from pipeline.lineage.store import LEGACY_PIPELINE_PROPERTY, LEGACY_RUN_CONTEXT

    for run in store.get_contexts_by_type(LEGACY_RUN_CONTEXT):
        if run.properties[LEGACY_PIPELINE_PROPERTY].string_value != pipeline_name:
            continue
        if run.name != f"{pipeline_name}.{run_id}":
            _fail_unfinished(store, run, "killed: the run ended before this task finished")


def _fail_unfinished(store, run, message: str, node: str | None = None) -> None:
    """Marks the run's unfinished executions (of `node` only, when given) failed, with `message`
    as their result."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

    from pipeline.lineage.store import EXECUTION_RESULT_PROPERTY, LEGACY_COMPONENT_PROPERTY

    unfinished = (mlmd_pb2.Execution.NEW, mlmd_pb2.Execution.RUNNING)
    for execution in store.get_executions_by_context(run.id):
        component = execution.properties[LEGACY_COMPONENT_PROPERTY].string_value
        if node in (None, component) and execution.last_known_state in unfinished:
            execution.last_known_state = mlmd_pb2.Execution.FAILED
            execution.custom_properties[EXECUTION_RESULT_PROPERTY].string_value = json.dumps(
                {"resultMessage": message}
            )
            store.put_executions([execution])


def _writable_store(metadata_path: str):
    from ml_metadata.metadata_store import metadata_store

    return metadata_store.MetadataStore(
        _store_target(metadata_path).connection_config(read_only=False)
    )


def _store_target(metadata_path: str):
    """The store the DAG writes: IMGPIPE_MLMD_* in the scheduler's environment (MySQL for a
    shared Airflow), else the SQLite file at metadata_path. Never in the DAG's task arguments,
    which Airflow shows in its UI: the password stays in the environment."""
    from pipeline.mlmd_connection import MlmdTarget

    return MlmdTarget.resolve({}, os.environ, default_sqlite=metadata_path)
