"""The serving check: output checks catch each kind of wrong answer; the component blesses a good
export (with load time and latency measured in a fresh process) and refuses a broken one; and the
standard Pusher pushes only with both its blessing and the Evaluator's."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import json_format
from tfx import v1 as tfx
from tfx.components.pusher.executor import Executor as PusherExecutor
from tfx.types import standard_artifacts

from components.serving_check import BLESSED_FILE, NOT_BLESSED_FILE, REPORT_FILE, ServingCheck
from components.serving_probe import check_outputs
from components.trainer import export, serving_assets
from tests.components.trainer.conftest import LABEL_NAMES as LABELS


def _outputs(probabilities, ids=None, names=None):
    probabilities = tf.constant(probabilities, tf.float32)
    ids = np.argmax(probabilities, -1) if ids is None else np.array(ids)
    names = [LABELS[i] for i in ids] if names is None else names
    return {
        "class_ids": tf.constant(ids, tf.int64),
        "class_names": tf.constant(names),
        "probabilities": probabilities,
    }


def test_check_outputs_accepts_a_right_answer():
    assert check_outputs("s", _outputs([[0.2, 0.7, 0.1], [0.5, 0.25, 0.25]]), 2, LABELS) == []


@pytest.mark.parametrize(
    ("outputs", "problem"),
    [
        (_outputs([[0.2, 0.7, 0.2]]), "sum to"),
        (_outputs([[0.2, 0.8]]), "probabilities has shape (1, 2), not (1, 3)"),
        (_outputs([[0.2, 0.7, 0.1]], ids=[0], names=["cat"]), "not the most probable"),
        (_outputs([[0.2, 0.7, 0.1]], names=["emu"]), "do not match class_ids"),
        ({"probabilities": tf.constant([[1.0, 0.0, 0.0]])}, "outputs ['probabilities']"),
    ],
)
def test_check_outputs_names_each_problem(outputs, problem):
    problems = check_outputs("serving_images", outputs, 1, LABELS)
    assert problems and all(p.startswith("serving_images: ") for p in problems)
    assert problem in " ".join(problems)


def _run_check(model, root) -> standard_artifacts.InfraBlessing:
    blessing = standard_artifacts.InfraBlessing()
    blessing.uri = str(root)
    os.makedirs(blessing.uri, exist_ok=True)
    ServingCheck.EXECUTOR_SPEC.executor_class().Do(
        {"model": [model]}, {"blessing": [blessing]}, {"latency_requests": 20}
    )
    return blessing


def _push(model, infra_blessing, destination, root) -> standard_artifacts.PushedModel:
    model_blessing = standard_artifacts.ModelBlessing()
    model_blessing.uri = str(root / "model_blessing")
    model_blessing.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(root / "pushed")
    target = tfx.proto.PushDestination(
        filesystem=tfx.proto.PushDestination.Filesystem(base_directory=str(destination))
    )
    PusherExecutor().Do(
        {"model": [model], "model_blessing": [model_blessing], "infra_blessing": [infra_blessing]},
        {"pushed_model": [pushed]},
        {"push_destination": json_format.MessageToJson(target)},
    )
    return pushed


@pytest.mark.slow
def test_a_good_export_is_blessed_with_measured_load_time_and_latency(model_artifact, tmp_path):
    blessing = _run_check(model_artifact, tmp_path / "blessing")

    assert blessing.get_int_custom_property("blessed") == 1
    assert os.path.exists(os.path.join(blessing.uri, BLESSED_FILE))
    with open(os.path.join(blessing.uri, REPORT_FILE)) as handle:
        report = json.load(handle)
    assert report["problems"] == [] and report["warmup_requests"] == 2
    assert len(report["warmup_request_ms"]) == 2
    assert report["signatures"] == [export.EXAMPLES_SIGNATURE, export.IMAGES_SIGNATURE]
    assert report["load_seconds"] > 0
    latency = report["latency_ms"]
    assert 0 < latency["p50"] <= latency["p99"] and latency["requests"] == 20
    assert blessing.get_float_custom_property("latency_p99_ms") == latency["p99"]

    pushed = _push(model_artifact, blessing, tmp_path / "serving", tmp_path)
    assert pushed.get_int_custom_property("pushed") == 1
    assert os.listdir(tmp_path / "serving")


@pytest.mark.slow
def test_a_broken_export_is_refused_and_not_pushed(model_artifact, tmp_path):
    broken = standard_artifacts.Model()
    broken.uri = str(tmp_path / "broken")
    shutil.copytree(model_artifact.uri, broken.uri)
    labels = os.path.join(
        broken.uri, "Format-Serving", serving_assets.ASSETS_EXTRA, serving_assets.LABELS_FILE
    )
    with open(labels, "w") as handle:
        handle.write("".join(f"{name}\n" for name in LABELS[:2]))  # the model answers 3 classes

    blessing = _run_check(broken, tmp_path / "blessing")

    assert blessing.get_int_custom_property("blessed") == 0
    assert os.path.exists(os.path.join(blessing.uri, NOT_BLESSED_FILE))
    assert "not (1, 2)" in blessing.get_string_custom_property("problems")
    pushed = _push(broken, blessing, tmp_path / "serving", tmp_path)
    assert pushed.get_int_custom_property("pushed") == 0
    assert not (tmp_path / "serving").exists()


@pytest.mark.slow
def test_a_model_that_does_not_load_is_refused_with_the_reason(tmp_path):
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    os.makedirs(os.path.join(model.uri, "Format-Serving"))
    with open(os.path.join(model.uri, "Format-Serving", "saved_model.pb"), "wb") as handle:
        handle.write(b"not a protobuf")

    blessing = _run_check(model, tmp_path / "blessing")

    assert blessing.get_int_custom_property("blessed") == 0
    assert "probe exited with" in blessing.get_string_custom_property("problems")
