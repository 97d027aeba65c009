"""The Airflow DAG: its config from IMGPIPE_* variables, the run summary task (from ML Metadata,
after a failed task too) and the shipped DAG file as Airflow parses it, the drift check
included. A season of scheduled runs on a real Airflow is test_airflow_season.py. The DAG tests
need the orchestrators environment (`make airflow-test`); skipped without Airflow."""

import importlib.util
import json
import logging
import os
import pathlib
import subprocess
import sys
import types

import pytest
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from data_prep.contract.config_error import ConfigError
from pipeline.lineage.store import LEGACY_COMPONENT_PROPERTY
from pipeline.runners.airflow import (
    SUMMARY_TASK,
    config_from_environment,
    log_run_summary,
    record_task_failure,
)
from pipeline.runners.local import open_store
from pipeline.ui.report import SUMMARIES_DIR
from tests.data_prep import image_files
from tests.pipeline.expected import COMPONENTS
from tests.pipeline.lineage.test_runs import add_legacy_types, legacy_run
from tests.pipeline.serving.test_serving_folder import legacy_push

SHIPPED_DAGS = pathlib.Path(__file__).parents[3] / "pipeline" / "runners" / "airflow_dags"


def test_config_from_environment_reads_data_preset_schedule_and_beam_options():
    config = config_from_environment(
        {
            "IMGPIPE_DATA": "gs://bucket/images",
            "IMGPIPE_BUILD_DIR": "/state",
            "IMGPIPE_SCHEDULE": "0 3 * * *",
            "IMGPIPE_BEAM_ARGS": "--runner=FlinkRunner --flink_master=host:8081",
        }
    )
    assert config.ingest.input == "gs://bucket/images"
    assert config.metadata_path == "/state/tfx/metadata.db"
    assert config.schedule == "0 3 * * *"
    assert config.beam_args[-2:] == ("--runner=FlinkRunner", "--flink_master=host:8081")
    manual = config_from_environment({"IMGPIPE_DATA": "x", "IMGPIPE_SCHEDULE": "none"})
    assert manual.schedule is None
    assert config_from_environment({"IMGPIPE_DATA": "x"}).schedule == "@daily"


def test_a_config_file_applies_over_the_preset_and_the_schedule_variable_over_both(tmp_path):
    settings = tmp_path / "imgpipe.yaml"
    settings.write_text("name: birds\nschedule: '@hourly'\ngate:\n  allow_class_changes: true\n")
    environ = {"IMGPIPE_DATA": "x", "IMGPIPE_PRESET": "runlocal", "IMGPIPE_CONFIG": str(settings)}
    config = config_from_environment(environ)
    assert (config.name, config.schedule, config.gate.allow_class_changes) == (
        "birds",
        "@hourly",
        True,
    )
    assert config.min_accuracy == 0.0  # the runlocal preset's, which the file leaves alone
    assert config_from_environment({**environ, "IMGPIPE_SCHEDULE": "none"}).schedule is None


def test_the_variables_beat_the_config_file_as_flags_do(tmp_path):
    settings = tmp_path / "imgpipe.yaml"
    settings.write_text("ingest:\n  input: /old\npipeline_root: /old/tfx\n")
    config = config_from_environment(
        {"IMGPIPE_DATA": "/new", "IMGPIPE_BUILD_DIR": "/state", "IMGPIPE_CONFIG": str(settings)}
    )
    assert (config.ingest.input, config.pipeline_root) == ("/new", "/state/tfx")


@pytest.mark.parametrize(
    ("environ", "field"),
    [
        ({}, "IMGPIPE_DATA"),
        ({"IMGPIPE_DATA": "x", "IMGPIPE_PRESET": "huge"}, "IMGPIPE_PRESET"),
        ({"IMGPIPE_DATA": "x", "IMGPIPE_SCHEDULE": "every day"}, "schedule"),
    ],
)
def test_bad_environment_fails_naming_the_variable(environ, field):
    with pytest.raises(ConfigError) as error:
        config_from_environment(environ)
    assert error.value.field == field


def _legacy_store(tmp_path, run_id):
    """A store as TFX's legacy launcher leaves a run whose Trainer task failed: the Trainer's
    execution still 'running' (the launcher records nothing when a component fails)."""
    metadata_path = str(tmp_path / "metadata.db")
    store = open_store(metadata_path)
    add_legacy_types(store)
    legacy_run(store, run_id)
    [trainer] = [
        e
        for e in store.get_executions()
        if e.properties[LEGACY_COMPONENT_PROPERTY].string_value == "Trainer"
    ]
    trainer.last_known_state = mlmd_pb2.Execution.RUNNING
    store.put_executions([trainer])
    return metadata_path


def test_a_failed_tasks_exception_is_its_components_reason_in_ml_metadata(tmp_path):
    from pipeline.lineage import run_record

    run_id = "scheduled__2026-01-01"
    metadata_path = _legacy_store(tmp_path, run_id)
    context = {
        "ti": types.SimpleNamespace(run_id=run_id, task_id="Trainer"),
        "exception": ValueError("cannot warm-start: other classes"),
    }
    record_task_failure(context, metadata_path=metadata_path, pipeline_name="imgpipe")
    run = run_record(open_store(metadata_path), "imgpipe", run_id)
    assert run.status == "failed"
    assert (run.stopped_by, run.not_pushed_reason) == (
        "Trainer",
        "cannot warm-start: other classes",
    )


def test_the_summary_task_logs_shows_and_writes_the_run_record_and_fails_with_a_failed_task(
    tmp_path, caplog
):
    """The run_summary callable, given what Airflow passes it, on a store the legacy launcher
    wrote; the Trainer's task died before its failure callback ran, and an earlier run was
    killed in the middle of its Trainer."""
    killed_id, run_id = "scheduled__2025-12-31", "scheduled__2026-01-01"
    metadata_path = _legacy_store(tmp_path, killed_id)
    store = open_store(metadata_path)
    legacy_run(store, run_id)
    [_, trainer] = [
        e
        for e in store.get_executions()
        if e.properties[LEGACY_COMPONENT_PROPERTY].string_value == "Trainer"
    ]
    trainer.last_known_state = mlmd_pb2.Execution.RUNNING
    store.put_executions([trainer])
    # The killed run's push, staged under its output folder's name: removed now it is over.
    serving = tmp_path / "serving" / "imgpipe"
    pipeline_root = str(tmp_path / "tfx")
    staged = legacy_push(store, "imgpipe", killed_id, pipeline_root, mlmd_pb2.Execution.RUNNING)
    (serving / staged / "variables").mkdir(parents=True)
    (serving / ".pushing-not-ours").mkdir()
    states = {"baseline_model_resolver": "success", "Trainer": "failed", SUMMARY_TASK: "running"}
    dag_run = types.SimpleNamespace(
        get_task_instances=lambda: [
            types.SimpleNamespace(task_id=task, state=state) for task, state in states.items()
        ]
    )
    ti = types.SimpleNamespace(run_id=run_id, task_id=SUMMARY_TASK)
    summaries, shown = tmp_path / SUMMARIES_DIR, []
    with caplog.at_level(logging.INFO), pytest.raises(RuntimeError, match=r"Trainer \(failed\)"):
        log_run_summary(
            metadata_path,
            "imgpipe",
            str(summaries),
            str(serving),
            ti=ti,
            dag_run=dag_run,
            show=lambda run, text: shown.append((run, text)),
        )
    logged = [record.getMessage() for record in caplog.records]
    assert f"run {run_id} of pipeline imgpipe: failed" in logged
    assert "pushed: no" in logged
    [(shown_run, text)] = shown  # the DAG run's note: the summary as logged
    assert (
        shown_run is dag_run and text.splitlines()[0] == f"run {run_id} of pipeline imgpipe: failed"
    )
    assert "Trainer failed; its Airflow task log has the cause" in text
    assert any(line.split()[:2] == ["Trainer", "failed"] for line in logged)
    written = json.loads((summaries / "scheduled__2026-01-01.json").read_text())
    assert {c["node"]: c["state"] for c in written["components"]} == {
        "baseline_model_resolver": "ran",
        "Trainer": "failed",
    }
    from pipeline.lineage import run_record

    killed = run_record(open_store(metadata_path), "imgpipe", killed_id)
    assert killed.status == "failed" and killed.not_pushed_reason.startswith("killed")
    assert sorted(os.listdir(serving)) == [".imgpipe-serving.lock", ".pushing-not-ours"]
    removed = f"removed {serving / staged}: the staging folder of a push that did not finish"
    assert removed in logged


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    # Only subprocesses import Airflow: importing it here would set it up under ~/airflow.
    if importlib.util.find_spec("airflow") is None:
        pytest.skip("Airflow is not installed here; `make airflow-test` runs these tests")
    root = tmp_path_factory.mktemp("airflow")
    for index, label in enumerate(("cat", "dog")):
        path = root / "images" / label / "0.jpg"
        path.parent.mkdir(parents=True)
        path.write_bytes(image_files.jpeg(seed=index))
    return {
        **os.environ,
        "AIRFLOW_HOME": str(root / "airflow_home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "IMGPIPE_DATA": str(root / "images"),
        "IMGPIPE_BUILD_DIR": str(root / "build"),
        "IMGPIPE_SCHEDULE": "0 3 * * *",
    }


@pytest.mark.slow
@pytest.mark.orchestrators
def test_shipped_dag_runs_on_the_configured_schedule_one_run_at_a_time(airflow_env):
    env = airflow_env
    inspect = (
        "import json; from airflow.models import DagBag; "
        f"bag = DagBag(dag_folder={str(SHIPPED_DAGS)!r}, include_examples=False); "
        "dag = bag.dags['imgpipe']; "
        "print(json.dumps({'errors': list(bag.import_errors), 'schedule': dag.schedule_interval, "
        "'max_active_runs': dag.max_active_runs, 'catchup': dag.catchup, "
        "'tasks': sorted(dag.task_ids), "
        "'gate_after': sorted(dag.get_task('DataGate').upstream_task_ids), "
        "'drift_after': sorted(dag.get_task('DistributionValidator').upstream_task_ids), "
        f"'summary_after': sorted(dag.get_task({SUMMARY_TASK!r}).upstream_task_ids)}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", inspect], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    dag = json.loads(done.stdout.strip().splitlines()[-1])
    assert dag["errors"] == []
    assert dag["schedule"] == env["IMGPIPE_SCHEDULE"] == "0 3 * * *"
    assert (dag["max_active_runs"], dag["catchup"]) == (1, False)
    assert dag["tasks"] == sorted([*COMPONENTS, SUMMARY_TASK])  # the first span's DAG
    assert dag["summary_after"] == sorted(COMPONENTS)
    # The drift check: this span's statistics against the blessed model's, before the gate.
    assert dag["drift_after"] == ["StatisticsGen", "drift_baseline_resolver"]
    assert "DistributionValidator" in dag["gate_after"]
