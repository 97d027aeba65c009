"""Lineage and run history against a real store: the pipeline runs twice on tiny data (the
second time with another learning rate), then every question is asked through the library and
the CLI and checked against what the runs, the files and the input really were."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import tensorflow_model_analysis as tfma

from components.ingest import image_example_gen
from components.serving import model_card
from components.training import trainer as trainer_module
from data_prep.reading.sources import input_fingerprint
from pipeline import exit_codes, lineage
from pipeline.cli import build_parser, main
from pipeline.code_fingerprint import code_fingerprint
from pipeline.runners.local import open_store
from tests.data_prep import image_files
from tests.pipeline.tiny_pipeline import FIRST_RATE, SECOND_RATE
from tests.pipeline.two_run_store import ACCEPTED, FOUND


@pytest.fixture
def runs(two_runs):
    """The session's two-run store (tests/pipeline/two_run_store.py)."""
    return two_runs


def _tfma_accuracy(evaluation_uri: str, model_name: str) -> float:
    """The overall accuracy as TFMA's notebook API reads it (a second, independent reader)."""
    result = tfma.load_eval_result(evaluation_uri, model_name=model_name or None)
    overall = dict(result.slicing_metrics)[()]
    return overall[""][""]["sparse_categorical_accuracy"]["doubleValue"]


@pytest.mark.slow
def test_runs_newest_first_with_component_states_metrics_and_push(runs, capsys):
    found = lineage.list_runs(runs.store)
    assert [run.run_id for run in found] == [runs.second.run_id, runs.first.run_id]
    newest, oldest = found
    assert {c.node: c.state for c in oldest.components} == {
        c.node: c.state for c in runs.first.components
    }
    states = {c.node: c.state for c in newest.components}
    assert states["ImageExampleGen"] == states["Transform"] == "cached"
    assert states["Trainer"] == "ran"
    assert oldest.status == newest.status == "complete"
    assert oldest.pushed_to == runs.first.pushed_to and os.path.isdir(oldest.pushed_to)
    assert newest.pushed_to == runs.second.pushed_to
    first_eval, second_eval = sorted(
        runs.store.get_artifacts_by_type("ModelEvaluation"), key=lambda a: a.id
    )
    assert oldest.eval_accuracy == pytest.approx(_tfma_accuracy(first_eval.uri, ""))
    assert newest.eval_accuracy == pytest.approx(_tfma_accuracy(second_eval.uri, "candidate"))
    assert newest.examples_id == oldest.examples_id
    assert newest.model_id != oldest.model_id

    code, out, _ = runs.cli(capsys, "runs")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["RUN", "PIPELINE", "STARTED"]
    rows = [line for line in lines[1:] if not line.startswith("    ")]
    assert rows[0].startswith(runs.second.run_id) and rows[1].startswith(runs.first.run_id)
    assert "cached: ImageExampleGen" in lines[2] and "Trainer" in lines[2].split("ran:")[1]
    # The tiny eval split (a few images per class) is flagged under each run.
    assert lines[3].startswith("    caution: small eval split (")
    assert newest.eval_warning and "want at least 10 per class and 50 in all" in newest.eval_warning
    code, out, _ = runs.cli(capsys, "runs", "--json")
    assert [run["run_id"] for run in json.loads(out)] == [runs.second.run_id, runs.first.run_id]


@pytest.mark.slow
def test_a_store_built_with_a_relative_build_folder_answers_alike_from_anywhere(
    runs, tmp_path, monkeypatch, capsys
):
    """The two runs ran with a relative build folder; every path they recorded is absolute."""
    store = runs.store
    uris = [artifact.uri for artifact in store.get_artifacts()]
    assert uris and all(os.path.isabs(uri) for uri in uris)
    assert all(uri.startswith(runs.config.pipeline_root) for uri in uris)
    assert os.path.isabs(runs.first.pushed_to)

    monkeypatch.chdir(tmp_path)
    code, out, _ = runs.cli(capsys, "runs", "--json")
    assert code == 0
    assert [run["eval_accuracy"] for run in json.loads(out)] == pytest.approx(
        [runs.second.eval_accuracy, runs.first.eval_accuracy]
    )
    image = runs.images / "dog" / "3.jpg"
    (match,) = lineage.image_lineage(store, str(image)).matches
    assert match.match == "path and bytes"


_HEAVY = ("tensorflow", "tensorflow_model_analysis", "tfx", "apache_beam")
_IMPORTS_AFTER = f"""
import contextlib, io, json, sys
from pipeline.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({{"code": code, "heavy": [m for m in {_HEAVY!r} if m in sys.modules]}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["runs", "--json"],
        ["runs", "diff", "latest~1", "latest"],
        ["lineage", "model", "--latest-pushed"],
        ["lineage", "examples", "EXAMPLES"],
        ["lineage", "image", "IMAGE"],
        ["schema", "show"],
        ["schema", "show", "--json"],
        ["config", "show"],
    ],
)
def test_read_only_commands_load_no_tensorflow_tfma_tfx_or_beam(runs, command):
    """They answer from ML Metadata and a few small files, in a fresh process each."""
    values = {"EXAMPLES": str(runs.first.examples_id), "IMAGE": str(runs.images / "cat" / "1.jpg")}
    argv = [values.get(word, word) for word in command]
    if command[0] != "config":
        argv += ["--mlmd-sqlite", runs.config.metadata_path]
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTS_AFTER, *argv], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout.splitlines()[-1]) == {"code": 0, "heavy": []}


@pytest.mark.slow
def test_the_console_script_lists_runs_with_nothing_on_stderr(runs):
    """TensorFlow's import logs three C++ errors (CUDA factories registered twice) that a query,
    which keeps no run log, must not show."""
    script = os.path.join(os.path.dirname(sys.executable), "imgpipe")
    # A user's shell, not this process (an in-process command set TensorFlow's log level here).
    shell = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [script, "runs", "--mlmd-sqlite", runs.config.metadata_path],
        capture_output=True,
        text=True,
        check=True,
        env=shell,
    )
    assert runs.second.run_id in result.stdout
    assert result.stderr == ""


@pytest.mark.slow
def test_model_lineage_reaches_the_images_code_and_settings(runs, capsys):
    first_run = lineage.list_runs(runs.store, metrics=False)[-1]
    answer = lineage.model_lineage(runs.store, first_run.pushed_model_id)
    assert answer.pushed_model.properties["pushed_destination"] == runs.first.pushed_to
    assert answer.model.id == first_run.model_id
    assert answer.trainer_config["learning_rate"] == FIRST_RATE
    assert answer.code_fingerprint == code_fingerprint(trainer_module.__name__)
    assert answer.evaluation.blessed is True
    first_eval = min(runs.store.get_artifacts_by_type("ModelEvaluation"), key=lambda a: a.id)
    assert answer.evaluation.accuracy == pytest.approx(_tfma_accuracy(first_eval.uri, ""))
    assert answer.evaluation.baseline_model_id is None  # the first model had no baseline
    dataset = answer.dataset
    assert dataset.examples.id == first_run.examples_id
    assert dataset.label_map == {"cat": 0, "dog": 1, "owl": 2}
    assert sum(dataset.split_counts.values()) == dataset.totals["accepted"] == ACCEPTED
    assert set(dataset.split_counts) == {"train", "eval"}
    assert dataset.input == str(runs.images)
    assert dataset.input_fingerprint == input_fingerprint(str(runs.images))
    assert answer.transform is not None and answer.transform_graph is not None

    for folder in (runs.first.pushed_to, os.path.abspath(runs.first.pushed_to) + "/"):
        by_folder = lineage.model_lineage(runs.store, lineage.find_model(runs.store, folder))
        assert by_folder.model.id == answer.model.id
    code, out, _ = runs.cli(capsys, "lineage", "model", str(first_run.pushed_model_id))
    assert code == 0
    assert f"learning_rate={FIRST_RATE}" in out
    assert re.search(rf"input +{re.escape(str(runs.images))}, {FOUND} files", out)
    assert code_fingerprint(trainer_module.__name__) in out


@pytest.mark.slow
def test_model_lineage_names_the_baseline_but_does_not_walk_into_it(runs, capsys):
    newest, oldest = lineage.list_runs(runs.store, metrics=False)
    answer = lineage.model_lineage(runs.store, newest.model_id)
    assert answer.trainer_config["learning_rate"] == SECOND_RATE
    assert answer.evaluation.baseline_model_id == oldest.model_id
    nodes = {node for edge in answer.edges for node in (edge.source, edge.target)}
    models = {node for node in nodes if node.startswith("Model ")}
    assert models == {f"Model {newest.model_id}"}
    trainers = {node for node in nodes if node.startswith("Trainer ")}
    assert trainers == {answer.trainer.label}
    assert {edge.key for edge in answer.edges} >= {"model", "examples", "transform_graph"}

    code, out, _ = runs.cli(capsys, "lineage", "model", "--latest-pushed", "--json")
    assert code == 0
    pushed = json.loads(out)
    assert pushed["pushed_model"]["properties"]["pushed_destination"] == (
        runs.second.pushed_to or runs.first.pushed_to
    )


@pytest.mark.slow
def test_examples_lineage_lists_both_models_and_what_was_pushed(runs, capsys):
    newest, oldest = lineage.list_runs(runs.store, metrics=False)
    answer = lineage.examples_lineage(runs.store, oldest.examples_id)
    models = {trained.model.id: trained for trained in answer.models}
    assert set(models) == {oldest.model_id, newest.model_id}
    assert models[oldest.model_id].runs == (oldest.run_id,)
    assert models[oldest.model_id].pushed_to == (runs.first.pushed_to,)
    second_pushes = (runs.second.pushed_to,) if runs.second.pushed_to else ()
    assert models[newest.model_id].pushed_to == second_pushes
    code, out, _ = runs.cli(capsys, "lineage", "examples", str(oldest.examples_id))
    assert code == 0
    assert runs.first.pushed_to in out and "MODEL" in out


@pytest.mark.slow
def test_diff_shows_the_changed_setting_and_what_it_caused(runs, capsys):
    diff = lineage.diff_runs(runs.store, runs.first.run_id, runs.second.run_id)
    changes = {(c.section, c.key): (c.a, c.b) for c in diff.changes}
    assert changes[("config", "trainer.learning_rate")] == (FIRST_RATE, SECOND_RATE)
    assert ("artifacts", "model") in changes
    assert changes[("components", "ImageExampleGen")] == ("ran", "cached")
    assert not {c.section for c in diff.changes} & {"code", "data"}
    assert diff.unchanged > 20
    facts = lineage.run_facts(runs.store, lineage.find_run(lineage.list_runs(runs.store), "latest"))
    for node, module in (
        ("ImageExampleGen", image_example_gen),
        ("Trainer", trainer_module),
        ("ModelCardGen", model_card),
    ):  # each component's own code, what a diff after an edit names
        assert facts[f"code.{node}"] == code_fingerprint(module.__name__)

    same = lineage.diff_runs(runs.store, "latest", "latest")
    assert same.changes == ()
    code, out, _ = runs.cli(capsys, "runs", "--pipeline", "imgpipe", "diff", "latest~1", "latest")
    assert code == 0
    assert re.search(rf"config +trainer.learning_rate +{FIRST_RATE} +{SECOND_RATE}", out)


@pytest.mark.slow
def test_image_lineage_by_path_by_bytes_and_after_a_change(runs, tmp_path, monkeypatch, capsys):
    newest, oldest = lineage.list_runs(runs.store, metrics=False)
    image = runs.images / "dog" / "3.jpg"
    (match,) = lineage.image_lineage(runs.store, str(image)).matches
    assert match.match == "path and bytes"
    assert (match.examples_id, match.label, match.path) == (oldest.examples_id, "dog", "dog/3.jpg")
    assert match.split in ("train", "eval")
    assert {trained.model.id for trained in match.models} == {oldest.model_id, newest.model_id}

    copy = tmp_path / "renamed.jpg"
    shutil.copy(image, copy)
    (match,) = lineage.image_lineage(runs.store, str(copy)).matches
    assert match.match == "bytes only (recorded as dog/3.jpg)"

    (tmp_path / "dog").mkdir()
    (tmp_path / "dog" / "3.jpg").write_bytes(image_files.jpeg(seed=12345))
    monkeypatch.chdir(tmp_path)
    (match,) = lineage.image_lineage(runs.store, "dog/3.jpg").matches
    assert match.match == "path only (the file changed since)"

    (tmp_path / "new.jpg").write_bytes(image_files.jpeg(seed=54321))
    assert lineage.image_lineage(runs.store, "new.jpg").matches == ()
    code, out, _ = runs.cli(capsys, "lineage", "image", "new.jpg")
    assert code == 0 and "no dataset in this metadata store includes it" in out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["lineage", "model", "999999"], "no artifact with id 999999"),
        (["lineage", "examples", "999999"], "no artifact with id 999999"),
        (["lineage", "model", "/no/such/folder"], "neither an artifact id nor a pushed model"),
        (["lineage", "model"], "give a model id or folder, or --latest-pushed"),
        (["runs", "diff", "latest", "2001-01-01"], "no run '2001-01-01'"),
        (["runs", "diff", "latest", "latest~5"], "only 2 run"),
    ],
)
def test_unknown_ids_are_clear_errors(runs, capsys, command, message):
    code, out, err = runs.cli(capsys, *command)
    assert code == 2 and out == ""
    assert message in err


@pytest.mark.slow
def test_an_id_of_another_type_is_a_clear_error(runs, capsys):
    newest = lineage.list_runs(runs.store, metrics=False)[0]
    code, _, err = runs.cli(capsys, "lineage", "model", str(newest.examples_id))
    assert code == 2
    assert f"artifact {newest.examples_id} is an artifact of type Examples" in err


def test_an_empty_store_gives_clear_messages(tmp_path, capsys):
    path = str(tmp_path / "metadata.db")
    open_store(path)  # creates an empty store, as a fresh deployment has
    for command, message in [
        (["runs"], "no runs in this metadata store"),
        (["lineage", "model", "--latest-pushed"], "no pushed model in this metadata store"),
        (["lineage", "examples", "1"], "no artifact with id 1"),
    ]:
        assert main([*command, "--mlmd-sqlite", path]) == 2
        assert message in capsys.readouterr().err


def test_a_missing_store_names_the_path(tmp_path, capsys):
    assert main(["runs", "--build-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no ML Metadata store at {tmp_path}/tfx/metadata.db" in err


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["runs", "diff"],
        ["lineage"],
        ["lineage", "model"],
        ["lineage", "examples"],
        ["lineage", "image"],
        ["schema"],
        ["schema", "show"],
        ["schema", "export"],
    ],
)
def test_each_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: imgpipe" in capsys.readouterr().out


def test_store_options_work_before_and_after_diff():
    parser = build_parser()
    args = parser.parse_args(["runs", "--json", "--mlmd-sqlite", "a.db", "diff", "x", "y"])
    assert (args.json, args.mlmd_sqlite, args.run_a, args.run_b) == (True, "a.db", "x", "y")
    args = parser.parse_args(["runs", "diff", "x", "y", "--mlmd-sqlite", "b.db"])
    assert (args.json, args.mlmd_sqlite, args.build_dir) == (False, "b.db", "build")


def test_diff_shows_the_config_of_an_evaluator_that_failed(tmp_path):
    """A failed Evaluator has no outputs, only its execution's settings: diff still shows them."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

    store = open_store(str(tmp_path / "m.db"))
    kind = store.put_execution_type(mlmd_pb2.ExecutionType(name="Evaluator"))
    failed = mlmd_pb2.Execution(type_id=kind, last_known_state=mlmd_pb2.Execution.FAILED)
    failed.custom_properties["eval_config"].string_value = json.dumps(
        {"metrics_specs": [{"thresholds": {"accuracy": {"lower_bound": 0.9}}}]}
    )
    [execution_id] = store.put_executions([failed])
    node_type = store.put_context_type(mlmd_pb2.ContextType(name="node"))
    [node] = store.put_contexts([mlmd_pb2.Context(type_id=node_type, name="p.Evaluator")])
    store.put_attributions_and_associations(
        [], [mlmd_pb2.Association(execution_id=execution_id, context_id=node)]
    )
    run = lineage.PipelineRun(
        "r",
        "p",
        "",
        0.0,
        "failed",
        (lineage.ComponentRun("Evaluator", "failed", 0.0, execution_id),),
    )
    facts = lineage.run_facts(store, run)
    assert facts["config.eval.metrics_specs[0].thresholds.accuracy.lower_bound"] == 0.9
    assert run.exit_code == exit_codes.COMPONENT_FAILED


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"pushed_to": "/serving/m/1"}, exit_codes.OK),
        ({"stopped_by": lineage.STOPPED_BY_GATE, "status": "failed"}, exit_codes.GATE_STOPPED),
        ({"stopped_by": lineage.STOPPED_BY_EVALUATOR}, exit_codes.NOT_PUSHED),
        ({"stopped_by": lineage.STOPPED_BY_SERVING_CHECK}, exit_codes.NOT_PUSHED),
        ({"stopped_by": "Transform", "status": "failed"}, exit_codes.COMPONENT_FAILED),
    ],
)
def test_each_outcome_has_its_exit_code(changes, code):
    run = dataclasses.replace(lineage.PipelineRun("r", "p", "", 0.0, "complete", ()), **changes)
    assert run.exit_code == code
