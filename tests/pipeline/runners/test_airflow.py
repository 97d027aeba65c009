"""The pipeline as an Airflow DAG, run end to end by a real Airflow 2 (`airflow dags test`, its
SQLite database) on tiny data: every component runs as an Airflow task and is recorded in ML
Metadata, the run summary task reports the run, and images added before the next run are ingested
as span 2. Needs the orchestrators environment (`make airflow-test`); skipped without Airflow."""

import importlib.util
import json
import logging
import os
import pathlib
import sqlite3
import subprocess
import sys
import types

import pytest

from data_prep.ingest_config import ConfigError
from pipeline.runners.airflow import (
    SUMMARIES_DIR,
    SUMMARY_TASK,
    config_from_environment,
    log_run_summary,
)
from pipeline.runners.local import open_store
from tests.data_prep import image_files
from tests.pipeline.expected import COMPONENTS as ALL_COMPONENTS
from tests.pipeline.expected import DRIFT_NODES, SCHEMA_IMPORTER
from tests.pipeline.lineage.test_runs import add_legacy_types, legacy_run

LABELS = ("cat", "dog", "owl")
COMPONENTS = tuple(node for node in ALL_COMPONENTS if node not in DRIFT_NODES)  # Airflow's
# A later span imports the schema the first span decided.
LATER_SPAN = tuple(SCHEMA_IMPORTER if node == "CuratedSchemaGen" else node for node in COMPONENTS)
TEST_DAGS = pathlib.Path(__file__).parent / "airflow_dags"  # tiny_dag.py: runlocal trainer
SHIPPED_DAGS = pathlib.Path(__file__).parents[3] / "pipeline" / "runners" / "airflow_dags"
FIRST, SECOND = "2026-01-01", "2026-01-02"  # logical dates of two daily runs


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


def test_the_summary_task_logs_and_writes_the_run_record_and_fails_with_a_failed_task(
    tmp_path, caplog
):
    """The run_summary callable, given what Airflow passes it, on a store the legacy launcher
    wrote: the legacy launcher leaves a failed component 'running', Airflow knows it failed."""
    metadata_path = str(tmp_path / "metadata.db")
    store = open_store(metadata_path)
    add_legacy_types(store)
    run_id = "scheduled__2026-01-01"
    legacy_run(store, run_id)
    states = {"baseline_model_resolver": "success", "Trainer": "failed", SUMMARY_TASK: "running"}
    dag_run = types.SimpleNamespace(
        get_task_instances=lambda: [
            types.SimpleNamespace(task_id=task, state=state) for task, state in states.items()
        ]
    )
    ti = types.SimpleNamespace(run_id=run_id, task_id=SUMMARY_TASK)
    summaries = tmp_path / SUMMARIES_DIR
    with caplog.at_level(logging.INFO), pytest.raises(RuntimeError, match=r"Trainer \(failed\)"):
        log_run_summary(metadata_path, "imgpipe", str(summaries), ti=ti, dag_run=dag_run)
    logged = [record.getMessage() for record in caplog.records]
    assert f"run {run_id} of pipeline imgpipe: complete" in logged
    assert "pushed: no" in logged
    assert any(line.split()[:2] == ["Trainer", "failed"] for line in logged)
    written = json.loads((summaries / "scheduled__2026-01-01.json").read_text())
    assert {c["node"]: c["state"] for c in written["components"]} == {
        "baseline_model_resolver": "ran",
        "Trainer": "failed",
    }


def _write_images(images, label, seeds):
    for seed in seeds:
        path = images / label / f"{seed}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(image_files.jpeg(seed=seed))


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    # Only subprocesses import Airflow: importing it here would set it up under ~/airflow.
    if importlib.util.find_spec("airflow") is None:
        pytest.skip("Airflow is not installed here; `make airflow-test` runs these tests")
    root = tmp_path_factory.mktemp("airflow")
    images = root / "images"
    for index, label in enumerate(LABELS):
        _write_images(images, label, range(100 * index, 100 * index + 10))
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(root / "airflow_home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # Parsing the DAG file imports TensorFlow and TFX: more than Airflow's 30 s default on a
        # busy machine.
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "600",
        "IMGPIPE_DATA": str(images),
        "IMGPIPE_BUILD_DIR": str(root / "build"),
        "IMGPIPE_SCHEDULE": "0 3 * * *",
    }
    _airflow(env, "db", "migrate")
    return env, root


def _airflow(env, *args, check=True) -> str:
    airflow = pathlib.Path(sys.executable).parent / "airflow"
    done = subprocess.run(
        [str(airflow), *args], env=env, capture_output=True, text=True, timeout=1500
    )
    if check:
        assert done.returncode == 0, f"airflow {' '.join(args)} failed:\n{done.stdout[-5000:]}"
    return done.stdout


def _summary(root, logical_date):
    from pipeline.lineage import run_record
    from pipeline.runners.local import open_store

    run_id = f"manual__{logical_date}T00:00:00+00:00"
    store = open_store(str(root / "build" / "tfx" / "metadata.db"))
    written = root / "build" / "tfx" / SUMMARIES_DIR / f"manual__{logical_date}T00_00_00_00_00.json"
    return run_record(store, "imgpipe", run_id), json.loads(written.read_text())


@pytest.fixture(scope="module")
def two_runs(airflow_env):
    """Two runs a day apart; three new cat images arrive between them."""
    env, root = airflow_env
    _run_dag(env, FIRST)
    first = _summary(root, FIRST)
    _write_images(pathlib.Path(env["IMGPIPE_DATA"]), "cat", (500, 501, 502))
    _run_dag(env, SECOND)
    return first, _summary(root, SECOND)


def _run_dag(env, logical_date):
    """`airflow dags test` can exit 0 when a task failed: the run's state in Airflow's
    database says whether it succeeded."""
    log = _airflow(env, "dags", "test", "imgpipe", logical_date)
    run_state, _ = _airflow_states(env, f"manual__{logical_date}T00:00:00+00:00")
    errors = [line for line in log.splitlines() if "ERROR" in line or "Error:" in line]
    assert run_state == "success", "\n".join(errors[-30:]) or log[-5000:]


def _airflow_states(env, run_id):
    """(the DAG run's state, {task: state}) from Airflow's own database."""
    with sqlite3.connect(pathlib.Path(env["AIRFLOW_HOME"]) / "airflow.db") as db:
        [run_state] = db.execute(
            "SELECT state FROM dag_run WHERE dag_id = 'imgpipe' AND run_id = ?", (run_id,)
        ).fetchone()
        tasks = db.execute(
            "SELECT task_id, state FROM task_instance WHERE dag_id = 'imgpipe' AND run_id = ?",
            (run_id,),
        )
        return run_state, dict(tasks)


def _states(summary):
    return {component.node: component.state for component in summary.components}


@pytest.mark.slow
def test_every_component_runs_as_an_airflow_task_recorded_in_ml_metadata(airflow_env, two_runs):
    env, _ = airflow_env
    (first, written), (second, _) = two_runs
    # The legacy TFX launcher records a resolver as 'cached': it resolves, it does not execute.
    assert _states(first) == {
        **{name: "ran" for name in COMPONENTS},
        "baseline_model_resolver": "cached",
    }
    assert (first.span, first.new_data, first.class_names) == (1, True, LABELS)
    assert first.blessed is True and first.pushed_to is not None
    assert os.path.isdir(first.pushed_to)
    # The summary task wrote what ML Metadata says about this run.
    assert (written["run_id"], written["span"], written["new_data"]) == (first.run_id, 1, True)
    assert written["pushed_to"] == first.pushed_to
    # Airflow's own database recorded both runs and every task as successful.
    for run, nodes in ((first, COMPONENTS), (second, LATER_SPAN)):
        assert _airflow_states(env, run.run_id) == (
            "success",
            {task: "success" for task in (*nodes, SUMMARY_TASK)},
        )


@pytest.mark.slow
def test_images_added_before_the_next_run_are_ingested_as_span_2(two_runs):
    (first, _), (second, written) = two_runs
    assert (second.span, second.new_data) == (2, True)
    assert (written["span"], written["new_data"]) == (2, True)
    states = _states(second)
    assert states["ImageExampleGen"] == states["Transform"] == states["Trainer"] == "ran"
    assert states["Evaluator"] == "ran"
    # Against the first run's model as its baseline (runlocal learns nothing, so either outcome).
    assert second.blessed is not None and (second.pushed_to is not None) == second.blessed
    assert second.pushed_to != first.pushed_to


@pytest.mark.slow
def test_airflow_runs_are_listed_like_local_runs_each_with_its_own_model(airflow_env, two_runs):
    from pipeline.lineage import list_runs, model_lineage
    from pipeline.runners.local import open_store

    _, root = airflow_env
    (first, _), (second, _) = two_runs
    store = open_store(str(root / "build" / "tfx" / "metadata.db"))
    listed = {run.run_id: run for run in list_runs(store, "imgpipe")}
    assert {first.run_id, second.run_id} <= set(listed)
    assert {c.node for c in listed[second.run_id].components} == set(LATER_SPAN)
    # The legacy resolver publishes the baseline (the first run's model) as an OUTPUT under the
    # key 'model': the second run's record still names the model its own Trainer made.
    assert second.model_id != first.model_id
    trainer = model_lineage(store, second.model_id).trainer
    assert trainer.component == "Trainer" and trainer.runs == (second.run_id,)


@pytest.mark.slow
def test_a_failed_component_fails_the_airflow_run_and_is_summarized(airflow_env, two_runs):
    env, root = airflow_env
    broken = pathlib.Path(env["IMGPIPE_DATA"]) / "dog"
    for index in range(10):  # a quarter of the images: over the 10% reject budget
        (broken / f"broken{index}.jpg").write_bytes(b"not an image")
    third = "2026-01-03"
    _airflow(env, "dags", "test", "imgpipe", third, check=False)
    run_state, tasks = _airflow_states(env, f"manual__{third}T00:00:00+00:00")
    assert run_state == "failed"
    assert tasks["ImageExampleGen"] == tasks[SUMMARY_TASK] == "failed"
    assert tasks["Trainer"] == tasks["Pusher"] == "upstream_failed"
    written = json.loads(
        (
            root / "build" / "tfx" / SUMMARIES_DIR / f"manual__{third}T00_00_00_00_00.json"
        ).read_text()
    )
    assert {c["node"]: c["state"] for c in written["components"]} == {
        SCHEMA_IMPORTER: "cached",  # the importer needs no upstream task
        "ImageExampleGen": "failed",
    }
    assert written["span"] is None and written["pushed_to"] is None


@pytest.mark.slow
def test_shipped_dag_runs_on_the_configured_schedule_one_run_at_a_time(airflow_env):
    env, _ = airflow_env
    inspect = (
        "import json; from airflow.models import DagBag; "
        f"bag = DagBag(dag_folder={str(SHIPPED_DAGS)!r}, include_examples=False); "
        "dag = bag.dags['imgpipe']; "
        "print(json.dumps({'errors': list(bag.import_errors), 'schedule': dag.schedule_interval, "
        "'max_active_runs': dag.max_active_runs, 'catchup': dag.catchup, "
        "'tasks': sorted(dag.task_ids), "
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
    nodes = LATER_SPAN if SCHEMA_IMPORTER in dag["tasks"] else COMPONENTS  # a schema decided yet?
    assert dag["tasks"] == sorted([*nodes, SUMMARY_TASK])
    assert dag["summary_after"] == sorted(nodes)
