"""A season of scheduled data drops on a real Airflow 2 (`airflow dags test` of the shipped DAG,
every component an Airflow task run by TFX's legacy launcher), writing ML Metadata to a MariaDB
server started here: a first drop, a drifted one, a new class with the class policy off and
then on, a drop of corrupt files, a run killed during training and its re-run. Each run's
decision is the one the local runner makes on the same drops (SEASON), every run says why it
pushed nothing, warm starts chain from blessed model to blessed model, and a killed run is
never shown as running. Needs the orchestrators environment and MariaDB (`make airflow-test`);
skipped without them."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from pipeline.factory import WARM_START_NODE
from pipeline.runners.airflow import SUMMARY_TASK
from pipeline.ui.report import SUMMARIES_DIR, summary_file_name
from tests.data_prep import image_files
from tests.mysql_server import PASSWORD, USER, mysql_server, server_binaries
from tests.pipeline.expected import COMPONENTS, SCHEMA_IMPORTER
from tests.required import require

pytestmark = [pytest.mark.slow, pytest.mark.orchestrators]
SHIPPED_DAGS = pathlib.Path(__file__).parents[3] / "pipeline" / "runners" / "airflow_dags"
LABELS = ("cat", "dog", "owl")
NEW_CLASS = "fox"
PER_CLASS = 10
EPOCHS_WHEN_KILLED = 60  # ~6 steps each on this data: long enough to be killed mid-training
CHECKPOINT_EVERY = 4
# Gate stop, failure or training: what each drop's run decides, on Airflow as on the local
# runner (the Evaluator's push decision after training is not compared: the runlocal trainer
# learns nothing, so its no-regression check goes either way).
TRAINED, GATE, FAILED = "trained", "stopped by the data gate", "failed"
SEASON = (
    ("first", TRAINED),
    ("drifted", GATE),
    ("new_class", GATE),
    ("new_class_allowed", TRAINED),
    ("corrupt", FAILED),
    ("killed", FAILED),
    ("resumed", TRAINED),
)


def _write(images: pathlib.Path, labels, image=image_files.jpeg, first_seed=0, extension="jpg"):
    if images.exists():
        shutil.rmtree(images)
    for label_index, label in enumerate(labels):
        for i in range(PER_CLASS):
            path = images / label / f"{i}.{extension}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image(seed=first_seed + 100 * label_index + i))


def _grayscale_png(seed):
    from PIL import Image

    pixels = image_files.random_rgb(height=64, width=48, seed=seed)
    return image_files.encode(Image.fromarray(pixels).convert("L"), "PNG")


def _settings(path: pathlib.Path, allow_class_changes=False, epochs=1) -> None:
    """The DAG's config file (IMGPIPE_CONFIG): warm starts on, the class policy as asked, every
    drift threshold at its default."""
    settings = {
        "gate": {"allow_class_changes": allow_class_changes},
        "trainer": {
            "epochs": epochs,
            "warm_start": True,
            "warm_start_epochs": epochs,
            "checkpoint_every_steps": CHECKPOINT_EVERY,
        },
    }
    path.write_text(json.dumps(settings))


@pytest.fixture(scope="module")
def season(tmp_path_factory):
    """Runs the season's drops in order; returns (env, root, {drop: run record})."""
    if importlib.util.find_spec("airflow") is None:
        pytest.skip("needs Airflow; `make airflow-test` runs these tests")
    require(server_binaries(), "MariaDB", "mariadb-server")
    root = tmp_path_factory.mktemp("season")
    with mysql_server(root / "mariadb") as server:
        images, config = root / "images", root / "imgpipe.json"
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(root / "airflow_home"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(SHIPPED_DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # Parsing the DAG file imports TensorFlow and TFX: more than Airflow's 30 s default
            # on a busy machine.
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "600",
            "IMGPIPE_DATA": str(images),
            "IMGPIPE_BUILD_DIR": str(root / "build"),
            "IMGPIPE_PRESET": "runlocal",
            "IMGPIPE_CONFIG": str(config),
            "IMGPIPE_BEAM_ARGS": "--direct_running_mode=in_memory --direct_num_workers=1",
            "IMGPIPE_MLMD_MYSQL": server.address,
            "IMGPIPE_MLMD_USER": USER,
            "IMGPIPE_MLMD_PASSWORD": PASSWORD,
        }
        _airflow(env, "db", "migrate")
        runs = {}
        dates = iter(f"2026-03-{day:02d}" for day in range(1, 29))

        _settings(config)
        _write(images, LABELS)
        runs["first"] = _run_dag(env, next(dates))
        _write(images, LABELS, image=_grayscale_png, extension="png")
        runs["drifted"] = _run_dag(env, next(dates))
        _write(images, (*LABELS, NEW_CLASS))
        runs["new_class"] = _run_dag(env, next(dates))
        _settings(config, allow_class_changes=True)
        runs["new_class_allowed"] = _run_dag(env, next(dates))
        for index in range(PER_CLASS):  # a fifth of the files: over the 10% reject budget
            (images / "dog" / f"broken{index}.jpg").write_bytes(b"not an image")
        runs["corrupt"] = _run_dag(env, next(dates))
        _write(images, (*LABELS, NEW_CLASS), first_seed=1000)  # new images of the four classes
        _settings(config, allow_class_changes=True, epochs=EPOCHS_WHEN_KILLED)
        runs["killed"] = _run_dag_killed_in_training(env, next(dates), root)
        runs["resumed"] = _run_dag(env, next(dates))
        store = _store(server)
        from pipeline.lineage import run_record

        records = {drop: run_record(store, "imgpipe", run_id) for drop, run_id in runs.items()}
        yield env, root, server, records


def _store(server):
    from pipeline.mlmd_connection import MlmdTarget

    return MlmdTarget(mysql=server.address, user=USER, password=PASSWORD).open()


def _airflow(env, *args, check=True) -> str:
    airflow = pathlib.Path(sys.executable).parent / "airflow"
    done = subprocess.run(
        [str(airflow), *args], env=env, capture_output=True, text=True, timeout=1500
    )
    if check:
        assert done.returncode == 0, f"airflow {' '.join(args)} failed:\n{done.stdout[-5000:]}"
    return done.stdout


def _run_id(logical_date: str) -> str:
    return f"manual__{logical_date}T00:00:00+00:00"


def _run_dag(env, logical_date: str) -> str:
    """One scheduled run (`airflow dags test` exits 0 whatever its tasks did); its run id."""
    _airflow(env, "dags", "test", "imgpipe", logical_date, check=False)
    return _run_id(logical_date)


def _run_dag_killed_in_training(env, logical_date: str, root: pathlib.Path) -> str:
    """A run whose process is killed (SIGKILL) once the Trainer has written two checkpoints."""
    airflow = pathlib.Path(sys.executable).parent / "airflow"
    child = subprocess.Popen(
        [str(airflow), "dags", "test", "imgpipe", logical_date],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 1200
    while (
        _latest_checkpoint_step(root) < 2 * CHECKPOINT_EVERY
        and child.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert child.poll() is None, "the run ended before it could be killed"
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    return _run_id(logical_date)


def _latest_checkpoint_step(root: pathlib.Path) -> int:
    import tensorflow as tf

    steps = [0]
    for folder in glob.glob(str(root / "build" / "tfx" / "Trainer" / "checkpoints" / "*")):
        latest = tf.train.latest_checkpoint(folder)
        if latest:
            steps.append(int(latest.rsplit("-", 1)[-1]))
    return max(steps)


def _airflow_states(env, run_id):
    """(the DAG run's state, {task: state}, the DAG run's note) from Airflow's own database."""
    with sqlite3.connect(pathlib.Path(env["AIRFLOW_HOME"]) / "airflow.db") as db:
        [(run_state, run_pk)] = db.execute(
            "SELECT state, id FROM dag_run WHERE dag_id = 'imgpipe' AND run_id = ?", (run_id,)
        ).fetchall()
        tasks = dict(
            db.execute(
                "SELECT task_id, state FROM task_instance WHERE dag_id = 'imgpipe' AND run_id = ?",
                (run_id,),
            )
        )
        note = db.execute("SELECT content FROM dag_run_note WHERE dag_run_id = ?", (run_pk,))
        return run_state, tasks, (note.fetchone() or [None])[0]


def decision(run) -> str:
    """A run's decision, as SEASON names them."""
    states = {c.node: c.state for c in run.components}
    if run.stopped_by == "data gate":
        return GATE
    if states.get("Trainer") in ("ran", "cached") and run.status == "complete":
        return TRAINED
    return FAILED if run.status == "failed" else run.status


def _states(run):
    return {c.node: c.state for c in run.components}


def test_each_drop_is_decided_as_the_local_runner_decides_it(season):
    *_, runs = season
    assert {drop: decision(runs[drop]) for drop, _ in SEASON} == dict(SEASON)
    assert [runs[drop].span for drop, _ in SEASON[:4]] == [1, 2, 3, 3]


def test_every_component_runs_as_a_task_with_the_drift_check(season):
    env, _, _, runs = season
    first = runs["first"]
    # The legacy TFX launcher records a resolver as 'cached': it resolves, it does not execute.
    resolvers = ("baseline_model_resolver", "drift_baseline_resolver", WARM_START_NODE)
    assert _states(first) == {
        **{name: "ran" for name in COMPONENTS},
        **{name: "cached" for name in resolvers},
    }
    assert first.pushed_to and os.path.isdir(first.pushed_to)
    run_state, tasks, _ = _airflow_states(env, first.run_id)
    assert run_state == "success"
    assert tasks == {task: "success" for task in (*COMPONENTS, WARM_START_NODE, SUMMARY_TASK)}


def test_drift_and_class_changes_stop_with_the_reason_in_ml_metadata(season):
    env, _, _, runs = season
    drifted, new_class = runs["drifted"], runs["new_class"]
    for feature in ("image_format", "height", "width"):
        assert f"drift: train_train: feature '{feature}'" in drifted.not_pushed_reason
    assert f"new class(es) {NEW_CLASS}" in new_class.not_pushed_reason
    assert "gate.allow_class_changes=true" in new_class.not_pushed_reason
    for run in (drifted, new_class):
        assert _states(run)["DataGate"] == "failed" and "Transform" not in _states(run)
        assert _states(run)[SCHEMA_IMPORTER] == "cached"  # the first span's schema
        run_state, tasks, _ = _airflow_states(env, run.run_id)
        assert run_state == "failed" and tasks["DataGate"] == "failed"
        assert tasks["Transform"] == tasks["Trainer"] == tasks["Pusher"] == "upstream_failed"


def test_with_the_policy_the_new_class_trains_from_scratch_with_no_baseline(season):
    *_, runs = season
    allowed = runs["new_class_allowed"]
    assert allowed.class_names == (*LABELS, NEW_CLASS)
    assert NEW_CLASS in allowed.baseline_skipped
    assert allowed.pushed_to  # no baseline to regress against, no accuracy floor
    # The new class's images (0.233 of the split's brightness moved, over the whole split)
    # move no drift distance: only the classes the baseline data has are compared.
    assert allowed.gate_classes["new"] == [NEW_CLASS]
    assert all(d["passed"] for d in allowed.gate_distances)


def test_corrupt_files_over_the_reject_budget_fail_the_ingest_saying_so(season):
    env, _, _, runs = season
    corrupt = runs["corrupt"]
    assert corrupt.stopped_by == "ImageExampleGen"
    assert "reject" in corrupt.not_pushed_reason
    _, tasks, _ = _airflow_states(env, corrupt.run_id)
    assert tasks["ImageExampleGen"] == tasks[SUMMARY_TASK] == "failed"


def test_a_run_killed_in_training_is_failed_and_its_rerun_resumes(season):
    from pipeline.lineage import run_artifacts

    _, _, server, runs = season
    killed, resumed = runs["killed"], runs["resumed"]
    assert killed.status == "failed" and _states(killed)["Trainer"] == "failed"
    assert killed.not_pushed_reason.startswith("killed")
    assert resumed.span == killed.span and _states(resumed)["Trainer"] == "ran"
    assert _states(resumed)["Transform"] == "cached"
    model_run = run_artifacts(_store(server), resumed)["model_run"]
    with open(os.path.join(model_run.uri, "training_metrics.json")) as handle:
        assert json.load(handle)["resumed_from_step"] >= 2 * CHECKPOINT_EVERY


def test_warm_starts_chain_from_the_newest_blessed_model_of_the_same_classes(season):
    from pipeline.lineage import model_lineage

    _, _, server, runs = season
    store, allowed = _store(server), runs["new_class_allowed"]
    bases = {
        drop: [m.id for m in model_lineage(store, runs[drop].model_id).warm_started_from]
        for drop in ("first", "new_class_allowed", "resumed")
    }
    # The first span has nothing to start from; the new class set trains from scratch; the
    # resumed run continues the newest blessed model of its four classes.
    assert bases == {"first": [], "new_class_allowed": [], "resumed": [allowed.model_id]}
    assert allowed.blessed


def test_imgpipe_runs_and_the_airflow_ui_show_each_runs_reason(season, capsys, monkeypatch):
    from pipeline.cli import main

    env, root, server, runs = season
    monkeypatch.setenv("IMGPIPE_MLMD_PASSWORD", PASSWORD)
    code = main(["runs", "--mlmd-mysql", server.address, "--mlmd-user", USER])
    listed = capsys.readouterr().out
    assert code == 0
    for drop in ("drifted", "new_class", "corrupt", "killed"):
        run = runs[drop]
        line = next(line for line in listed.splitlines() if line.startswith(run.run_id))
        assert " running " not in line and f" {run.stopped_by}: " in line
    for drop, _ in SEASON:
        if drop == "killed":  # its summary task never ran
            continue
        run_id = runs[drop].run_id
        _, _, note = _airflow_states(env, run_id)
        assert note.startswith(f"run {run_id} of pipeline imgpipe"), note
        written = root / "build" / "tfx" / SUMMARIES_DIR / f"{summary_file_name(run_id)}.json"
        assert json.loads(written.read_text())["run_id"] == run_id
