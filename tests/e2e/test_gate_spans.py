"""Months of data drops in one metadata store, on tiny spans with the runlocal trainer: the first
span pushes; a new class stops at the gate naming it, and trains with a new head (no baseline
comparison, its images left out of the drift distances) once the class policy allows it; a
swapped class stops; grayscale PNGs of another size stop on drift; a new span like the blessed
model's data passes. Every run that pushes nothing says why, with the exit code a scheduler can
act on."""

import dataclasses
import json
import shutil

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline import exit_codes
from pipeline.cli import main
from pipeline.lineage import STOPPED_BY_GATE
from pipeline.runners.local import open_store, run_local
from tests.data_prep import image_files
from tests.pipeline.tiny_pipeline import IMAGES_PER_CLASS, LABELS, tiny_config

pytestmark = pytest.mark.slow
NEW_CLASS = "fox"
SWAPPED_IN = "emu"


def _write(folder, labels, image=image_files.jpeg):
    if folder.exists():
        shutil.rmtree(folder)
    for label_index, label in enumerate(labels):
        for i in range(IMAGES_PER_CLASS):
            path = folder / label / f"{i}.{'jpg' if image is image_files.jpeg else 'png'}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image(seed=100 * label_index + i))
    return folder


def _grayscale_png(seed):
    from PIL import Image

    pixels = image_files.random_rgb(height=64, width=48, seed=seed)
    return image_files.encode(Image.fromarray(pixels).convert("L"), "PNG")


@pytest.fixture(scope="module")
def drops(tmp_path_factory):
    """Runs the drops in order against one store; returns each run's summary by name."""
    root = tmp_path_factory.mktemp("drops")
    images = root / "images"
    config = tiny_config(images, root / "build")
    allow = dataclasses.replace(
        config, gate=dataclasses.replace(config.gate, allow_class_changes=True)
    )
    runs = {}
    _write(images, LABELS)
    runs["first"] = run_local(config)
    _write(images, (*LABELS, NEW_CLASS))
    runs["new_class"] = run_local(config)
    runs["new_class_allowed"] = run_local(allow)
    _write(images, (*LABELS[:-1], NEW_CLASS, SWAPPED_IN))  # the last label swapped for another
    runs["swapped"] = run_local(allow)
    _write(images, (*LABELS, NEW_CLASS), image=_grayscale_png)
    runs["drifted"] = run_local(config)
    _write(images, (*LABELS, NEW_CLASS))  # the blessed model's kind of data, as a new span
    runs["like_blessed"] = run_local(config)
    return config, runs


def _states(run):
    return {c.node: c.state for c in run.components}


def test_the_first_span_pushes(drops):
    _, runs = drops
    first = runs["first"]
    assert first.pushed_to and first.exit_code == exit_codes.OK
    assert first.not_pushed_reason is None and first.baseline_skipped is None
    assert _states(first)["CuratedSchemaGen"] == "ran"


def test_a_new_class_stops_at_the_gate_naming_it(drops):
    _, runs = drops
    run = runs["new_class"]
    assert run.stopped_by == STOPPED_BY_GATE and run.exit_code == exit_codes.GATE_STOPPED
    assert _states(run)["DataGate"] == "failed" and "Transform" not in _states(run)
    assert (run.status, run.status_words) == ("stopped", "stopped by the data gate")
    assert "--set gate.allow_class_changes=true" in run.not_pushed_reason
    assert f"new class(es) {NEW_CLASS}" in run.not_pushed_reason
    assert "gate.allow_class_changes" in run.not_pushed_reason
    # Later spans are validated against the first span's schema, not a new inference.
    # (The importer finds the artifact in ML Metadata, so ML Metadata records it as cached.)
    assert "schema_importer" in _states(run) and "CuratedSchemaGen" not in _states(run)


def test_with_the_policy_a_new_class_trains_skips_the_baseline_and_pushes(drops):
    config, runs = drops
    run = runs["new_class_allowed"]
    assert run.pushed_to and run.exit_code == exit_codes.OK
    assert run.class_names == (*LABELS, NEW_CLASS)  # known ids kept, the new class is next
    assert NEW_CLASS in run.baseline_skipped
    # The gate measured size and brightness drift on the classes the baseline data has.
    assert run.gate_classes == {
        "shared": sorted(LABELS),
        "new": [NEW_CLASS],
        "gone": [],
        "whole_split": "",
    }
    assert {d["feature"] for d in run.gate_distances} == {"height", "width", "brightness"}
    store = open_store(config.metadata_path)
    evaluator = next(c for c in run.components if c.node == "Evaluator")
    inputs = {
        next(step.key for step in event.path.steps if step.HasField("key"))
        for event in store.get_events_by_execution_ids([evaluator.execution_id])
        if event.type == event.INPUT
    }
    assert "baseline_model" not in inputs  # never compared with the 3-class model


def test_a_swapped_class_stops_even_under_the_policy(drops):
    _, runs = drops
    run = runs["swapped"]
    assert run.exit_code == exit_codes.GATE_STOPPED
    assert f"new class(es) {SWAPPED_IN}" in run.not_pushed_reason
    assert f"class(es) gone {LABELS[-1]}" in run.not_pushed_reason


def test_grayscale_pngs_of_another_size_stop_on_drift(drops):
    config, runs = drops
    run = runs["drifted"]
    assert run.exit_code == exit_codes.GATE_STOPPED
    reason = run.not_pushed_reason
    for feature in ("image_format", "height", "width"):
        assert f"drift: train_train: feature '{feature}'" in reason
    assert f"above the threshold {config.gate.image_format_linf}" in reason
    assert "share of images moved) is 1.000" in reason


def test_a_span_like_the_blessed_models_data_passes(drops):
    _, runs = drops
    run = runs["like_blessed"]
    assert _states(run)["DataGate"] == "ran" and _states(run)["Trainer"] == "ran"
    # Same label map: compared with the baseline again, so the Evaluator decides (runlocal
    # learns nothing, so its no-regression check may go either way).
    assert run.baseline_skipped is None
    assert [(d["feature"], d["distance"], d["passed"]) for d in run.gate_distances] == [
        ("height", 0.0, True),
        ("width", 0.0, True),
        ("brightness", 0.0, True),
    ]
    assert run.gate_classes["shared"] == sorted((*LABELS, NEW_CLASS))
    # The same images as the baseline model's data, so the same eval set.
    overlap = run.eval_overlap
    assert overlap["compared"] == overlap["kept"] > 0
    assert overlap["gone"] == overlap["trained_on"] == 0
    assert run.exit_code in (exit_codes.OK, exit_codes.NOT_PUSHED)
    assert (run.exit_code == exit_codes.OK) == bool(run.pushed_to)


def test_runs_and_schema_commands_say_why_and_show_the_decided_schema(drops, capsys, tmp_path):
    config, runs = drops
    store = ["--mlmd-sqlite", config.metadata_path]
    assert main(["runs", *store]) == 0
    table = capsys.readouterr().out
    assert "WHY NOT PUSHED" in table.splitlines()[0]
    drifted_row = next(line for line in table.splitlines() if runs["drifted"].run_id in line)
    assert "data gate: drift: train_train: feature 'image_format'" in drifted_row
    assert main(["runs", "--json", *store]) == 0
    by_id = {run["run_id"]: run for run in json.loads(capsys.readouterr().out)}
    assert by_id[runs["swapped"].run_id]["not_pushed_reason"] == runs["swapped"].not_pushed_reason
    assert by_id[runs["new_class"].run_id]["stopped_by"] == STOPPED_BY_GATE

    assert main(["schema", "show", *store]) == 0
    shown = capsys.readouterr().out
    schema = text_format.Parse(shown, schema_pb2.Schema())
    formats = {f.name: list(f.string_domain.value) for f in schema.feature}["image_format"]
    assert formats == ["jpeg", "png"]
    exported = tmp_path / "schema.pbtxt"
    assert main(["schema", "export", str(exported), *store]) == 0
    assert exported.read_text() == shown
