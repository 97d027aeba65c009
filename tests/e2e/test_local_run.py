"""The whole pipeline end to end on tiny data with the local runner, tuning and warm start on:
every component runs, the Tuner's best values reach the Trainer through TFX's hyperparameters
channel (and ML Metadata), the model is blessed (by the Evaluator and the serving check) and
pushed with its model card, TFLite models and readable evaluation, and answers raw JPEG bytes; a
class folder with no usable image (a README, or only corrupt files) is left out and named;
re-runs come from the cache, changes invalidate exactly what they should, the next span's
Trainer starts from the first span's blessed model (which `lineage model` shows), and a model
below the threshold is not pushed. (The default pipeline, without Tuner and warm start, runs end
to end in test_run_console, test_data_gate_spans and the two-run store.)"""

import csv
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from components.metadata_keys import WARM_STARTED_FROM_PROPERTY
from components.serving import model_card
from components.training.export import IMAGES_SIGNATURE
from components.training.runtime import choose_precision
from components.training.serving_assets import ASSETS_EXTRA, WARMUP_FILE
from components.training.trainer import TUNED_FILE
from components.training.trainer_config import TuningConfig, runlocal
from components.training.transform import normalization_from_transform
from components.training.tuner import BEST_PROPERTY_PREFIX
from pipeline import exit_codes
from pipeline.factory import BASELINE_NODE, DRIFT_BASELINE_NODE, WARM_START_NODE
from pipeline.lineage import model_lineage, run_record
from pipeline.lineage.formatting import format_model_lineage
from pipeline.runners import local as local_runner
from pipeline.runners.local import open_store, run_local
from tests.data_prep import image_files
from tests.pipeline.expected import COMPONENTS, SCHEMA_IMPORTER
from tests.pipeline.tiny_pipeline import IMAGES_PER_CLASS, LABELS, tiny_config, write_images

pytestmark = pytest.mark.slow
LEARNING_RATES = (1e-3, 3e-3)
TUNER = "Tuner"
RESOLVERS = {BASELINE_NODE, DRIFT_BASELINE_NODE, WARM_START_NODE}  # they resolve on every run


def _states(summary) -> dict[str, str]:
    return {c.node: c.state for c in summary.components}


def _outputs(store, execution_id: int) -> list:
    events = store.get_events_by_execution_ids([execution_id])
    return store.get_artifacts_by_id([e.artifact_id for e in events if e.type == e.OUTPUT])


def _trainer_run_file(config, summary, name: str) -> str:
    """A file the run's Trainer wrote beside its model (TFX's model_run/<execution id>/)."""
    [trainer] = [c for c in summary.components if c.node == "Trainer"]
    return os.path.join(
        config.pipeline_root, "Trainer", "model_run", str(trainer.execution_id), name
    )


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    images = write_images(root / "images")
    (images / "docs").mkdir()
    (images / "docs" / "README.txt").write_text("Photos of cats, dogs and owls.\n")
    (images / "broken").mkdir()
    (images / "broken" / "cut.jpg").write_bytes(image_files.jpeg(seed=900, height=64)[:-400])
    (images / "broken" / "garbage.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG")
    # The threshold test below raises min_accuracy.
    config = tiny_config(images, root / "build", warm_start=True, warm_start_epochs=2)
    config = dataclasses.replace(
        config,
        tuning=TuningConfig(
            enabled=True, max_trials=2, learning_rate=LEARNING_RATES, dropout=(0.2,)
        ),
    )
    return config, images, run_local(config)


def test_first_run_runs_every_component_and_pushes_a_blessed_model(first_run):
    _, _, summary = first_run
    nodes = (*COMPONENTS, TUNER, WARM_START_NODE)
    assert sorted(_states(summary).items()) == sorted((name, "ran") for name in nodes)
    assert summary.blessed is True
    assert 0.0 <= summary.eval_accuracy <= 1.0
    assert summary.pushed_to is not None
    assert (summary.span, summary.new_data) == (1, True)
    # The class folders with no usable image are left out and named; the rest trains.
    assert summary.class_names == LABELS
    assert summary.classes_left_out == ("broken", "docs")
    assert summary.ingest_counts == {"found": 33, "accepted": 30, "rejected": 2, "ignored": 1}
    assert sum(summary.rejected_per_reason.values()) == 2  # the summary's line by reason
    assert os.path.exists(summary.ingest_report)
    per_class = summary.evaluation["per_class"]
    assert [row["class"] for row in per_class] == list(LABELS)
    for row in per_class:
        # None where undefined: runlocal's model may never predict a class (precision 0/0).
        values = [row[key] for key in ("precision", "recall", "f1")]
        assert all(value is None or 0.0 <= value <= 1.0 for value in values)

    # The Trainer's performance report, read back from the Model artifact in MLMD.
    performance = summary.training_performance
    assert performance["retraces"] == 0 and performance["replicas"] == 1
    # precision "auto": what this machine's device picks (mixed_bfloat16 on CPUs with native bf16).
    assert performance["precision"] == choose_precision(runlocal()) and performance["xla"] == 0
    assert performance["global_batch_size"] == runlocal().batch_size


def test_the_tuners_best_values_reach_the_trainer_and_the_first_model_is_trained_afresh(
    first_run,
):
    config, _, summary = first_run
    store = open_store(config.metadata_path)
    [tuner] = [c for c in summary.components if c.node == TUNER]
    [hyperparameters] = [
        artifact
        for artifact in _outputs(store, tuner.execution_id)
        if artifact.type_id == store.get_artifact_type("HyperParameters").id
    ]
    best_rate = hyperparameters.custom_properties[BEST_PROPERTY_PREFIX + "learning_rate"]
    assert best_rate.double_value in LEARNING_RATES
    with open(_trainer_run_file(config, summary, TUNED_FILE)) as handle:
        assert json.load(handle)["learning_rate"] == best_rate.double_value
    [model] = store.get_artifacts_by_id([summary.model_id])
    assert WARM_STARTED_FROM_PROPERTY not in model.custom_properties


def test_pushed_model_carries_both_blessings_its_card_tflite_and_evaluation(first_run):
    config, _, summary = first_run
    pushed = summary.pushed_to
    assert summary.serving_check["blessed"] is True
    assert 0 < summary.serving_check["latency_p50_ms"] <= summary.serving_check["latency_p99_ms"]
    assert summary.model_card == pushed
    for name in (
        "saved_model.pb",
        os.path.join(ASSETS_EXTRA, WARMUP_FILE),
        "model_card.json",
        "model_card.md",
        "tflite/model_float32.tflite",
        "tflite/model_float16.tflite",
        "tflite/tflite_report.json",
        "evaluation/evaluation.json",
        "evaluation/confusion_matrix.png",
        "evaluation/misclassified.csv",
    ):
        assert os.path.isfile(os.path.join(pushed, name)), name

    with open(os.path.join(pushed, "model_card.json")) as handle:
        card = json.load(handle)
    assert card["blessings"] == {"evaluator": True, "serving_check": True}
    assert card["labels"] == list(LABELS)
    assert card["model"]["mlmd_artifact_id"] == summary.model_id  # the version is its folder
    # The MLMD ids lead back to this model and the Examples it was trained on.
    store = open_store(config.metadata_path)
    [model] = store.get_artifacts_by_id([card["model"]["mlmd_artifact_id"]])
    [examples] = store.get_artifacts_by_id([card["training_data"]["examples_mlmd_artifact_id"]])
    assert (
        model.uri == card["model"]["uri"] and examples.uri == card["training_data"]["examples_uri"]
    )
    data = card["training_data"]
    counted = sum(data["train_examples_per_class"].values()) + sum(
        data["eval_examples_per_class"].values()
    )
    assert counted == IMAGES_PER_CLASS * len(LABELS)
    tfma_overall = card["metrics"]["tfma"]["candidate"]["overall"]
    assert tfma_overall["example_count"] == sum(data["eval_examples_per_class"].values())
    assert tfma_overall["sparse_categorical_crossentropy"] > 0  # the loss, asked for by name
    assert "training_metrics.json" in card["trainer_reports"]
    # Same weights, same preprocessing: the float32 TFLite model matches the SavedModel.
    assert card["tflite"]["eval"]["max_abs_probability_difference"]["float32"] <= 1e-5
    assert "tf.DecodeImage" in card["tflite"]["not_convertible"]["ops"]
    # The int8 model lies beside the pushed model unless it was refused, and the card says which.
    int8_placed = os.path.isfile(os.path.join(pushed, "tflite", "model_int8.tflite"))
    assert int8_placed == ("int8" not in card["tflite"]["refused"])
    assert set(card["tflite"]["latency_ms"]) == {"float32", "float16", "int8"}
    # The data's health: distinct images, every eval image checked for a likely label error,
    # recorded on an artifact whose execution read these Examples.
    health = card["data_health"]
    assert health["near_duplicate_clusters"] == 0
    assert health["eval_images_checked"] == sum(data["eval_examples_per_class"].values())
    assert summary.data_health["eval_images_checked"] == health["eval_images_checked"]
    [made] = [
        e
        for e in store.get_events_by_artifact_ids([health["mlmd_artifact_id"]])
        if e.type == e.OUTPUT
    ]
    read = store.get_events_by_execution_ids([made.execution_id])
    assert examples.id in {e.artifact_id for e in read if e.type == e.INPUT}

    evaluation = summary.evaluation
    assert [row["class"] for row in evaluation["per_class"]] == list(LABELS)
    with open(os.path.join(pushed, "evaluation", "misclassified.csv")) as handle:
        assert len(list(csv.DictReader(handle))) == evaluation["misclassified_count"]
    assert summary.tflite["saved_model_accuracy"] == pytest.approx(summary.eval_accuracy)


def test_pushed_model_classifies_raw_jpeg_bytes(first_run):
    _, images, summary = first_run
    model = tf.saved_model.load(summary.pushed_to)
    raw = tf.constant([(images / "dog" / "3.jpg").read_bytes(), image_files.png(seed=5)])
    outputs = model.signatures[IMAGES_SIGNATURE](images=raw)
    probabilities = outputs["probabilities"].numpy()
    assert probabilities.shape == (2, len(LABELS))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert {name.decode() for name in outputs["class_names"].numpy()} <= set(LABELS)


def test_reruns_use_the_cache_and_changes_invalidate_exactly_what_they_should(
    first_run, monkeypatch
):
    config, images, first = first_run
    again = run_local(config)
    assert again.run_id != first.run_id
    states = _states(again)
    # Everything is answered from the cache, the Tuner, Evaluator and Pusher included: the
    # resolvers give the cached Trainer, candidate and statistics the same (empty) baselines and
    # base model they first had, and the importer hands out the very schema decided on the first
    # run.
    assert {name: state for name, state in states.items() if state != "cached"} == {
        name: "ran" for name in RESOLVERS
    }
    assert SCHEMA_IMPORTER in states and "CuratedSchemaGen" not in states
    assert (again.span, again.new_data) == (1, False)
    assert again.blessed is True and again.pushed_to == first.pushed_to

    # An edit to the model card's code (its module's fingerprint changes; test_code_fingerprint
    # shows an edit of model_card.py changes that one) re-writes the card, and the Pusher pushes
    # the model with its new card as a new version: nothing writes into the version served.
    real = local_runner.code_fingerprint
    monkeypatch.setattr(
        local_runner,
        "code_fingerprint",
        lambda name: f"{real(name)} edited" if name == model_card.__name__ else real(name),
    )
    edited = _states(run_local(config))
    assert {name for name, state in edited.items() if state != "cached"} == {
        "ModelCardGen",
        "Pusher",
        *RESOLVERS,
    }

    (images / "cat" / "0.jpg").write_bytes(image_files.jpeg(seed=999))
    changed = run_local(config)
    assert (changed.span, changed.new_data) == (2, True)
    states = _states(changed)
    assert states["ImageExampleGen"] == states["Transform"] == states["Trainer"] == "ran"
    # The new span's Trainer starts from the first span's blessed model, for warm_start_epochs.
    store = open_store(config.metadata_path)
    [model] = store.get_artifacts_by_id([changed.model_id])
    assert model.custom_properties[WARM_STARTED_FROM_PROPERTY].int_value == first.model_id
    with open(_trainer_run_file(config, changed, "training_metrics.json")) as handle:
        metrics = json.load(handle)
    assert metrics["phases"] == ["warm_start"] and metrics["epochs"] == 2
    lineage = model_lineage(store, changed.model_id)
    assert [record.id for record in lineage.warm_started_from] == [first.model_id]
    assert f"Model {first.model_id}" in format_model_lineage(lineage)


def test_a_model_below_the_threshold_is_not_pushed(first_run):
    config, _, _ = first_run
    strict = run_local(dataclasses.replace(config, min_accuracy=1.0))
    assert _states(strict)["Evaluator"] == "ran"
    assert strict.blessed is False
    assert strict.pushed_to is None
    # Why, in one place: the TFMA threshold that failed, with the measured value.
    assert strict.stopped_by == "evaluator" and strict.exit_code == exit_codes.NOT_PUSHED
    assert strict.not_pushed_reason.startswith("sparse_categorical_accuracy ")
    assert '"lowerBound": 1.0' in strict.not_pushed_reason
    # The card is still written, to its artifact, saying why; nothing lands beside a model.
    assert strict.serving_check["blessed"] is True
    assert not strict.model_card.startswith(config.serving_dir)
    with open(os.path.join(strict.model_card, "model_card.json")) as handle:
        card = json.load(handle)
    assert card["blessings"]["evaluator"] is False


def test_summary_of_an_unknown_run_is_a_clear_error(tmp_path):
    with pytest.raises(LookupError, match="no run 'nope' of pipeline 'imgpipe' in this metadata"):
        run_record(open_store(str(tmp_path / "m.db")), "imgpipe", "nope")


def test_transform_writes_its_graph_and_no_analyzer_cache(first_run):
    """Nothing feeds Transform's analyzer cache back, so it writes none (its writes were Beam
    stages of every run)."""
    config, _, _ = first_run
    store = open_store(config.metadata_path)
    graph = min(store.get_artifacts_by_type("TransformGraph"), key=lambda artifact: artifact.id)
    normalization = normalization_from_transform(tft.TFTransformOutput(graph.uri))
    assert len(normalization.mean) == len(normalization.std) == 3
    assert store.get_artifacts_by_type("TransformCache") == []


def test_the_local_run_does_not_import_the_ai_platform_client():
    """`from tfx import v1` imports TFX's Google Cloud extensions, whose AI Platform client was a
    third of what `imgpipe run` imports (CPU seconds, measured): the local path imports TFX's
    modules directly, and only compile-vertex pays for Vertex."""
    code = "import sys, pipeline.runners.local; print('google.cloud.aiplatform' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"
