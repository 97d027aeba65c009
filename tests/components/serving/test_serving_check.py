"""The serving check: output checks catch each kind of wrong answer; the graph check finds what
only the saving process has (a Python callback, a custom op); the component loads the model in
another process, blesses a good export (with load time and latency measured) and refuses a broken
one, a model that answers in this process but not in a fresh one, and a serving process that
does not answer in time; and the Pusher pushes only with both its blessing and the
Evaluator's."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from google.protobuf import json_format
from tensorflow.python.saved_model import registration
from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts

from components.artifacts import ModelCard
from components.serving.pusher import BESIDE_KEY
from components.serving.pusher import Executor as PusherExecutor
from components.serving.serving_check import (
    BLESSED_FILE,
    NOT_BLESSED_FILE,
    REPORT_FILE,
    ServingCheck,
)
from components.serving.serving_probe import check_outputs, stock_tensorflow_problems
from components.serving.serving_verification import verify_serving
from components.training import export, serving_assets
from components.training.model import build_model
from components.training.trainer_config import runlocal
from tests.components.conftest import NORMALIZATION
from tests.components.training.conftest import LABEL_NAMES as LABELS


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
    target = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(destination))
    )
    card = ModelCard()
    card.uri = str(root / "model_card")
    os.makedirs(card.uri)
    PusherExecutor().Do(
        {
            "model": [model],
            "model_blessing": [model_blessing],
            "infra_blessing": [infra_blessing],
            BESIDE_KEY: [card],
        },
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
    assert report["checked_by_pid"] == os.getpid() != report["loaded_in_pid"]
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
    assert "does not load: " in blessing.get_string_custom_property("problems")


def _through_python(images):
    passed = tf.py_function(lambda pixels: pixels, [images], tf.float32)
    passed.set_shape(images.shape)
    return passed


@pytest.mark.slow
def test_a_model_that_calls_back_into_this_process_is_refused_though_it_answers_here(tmp_path):
    """tf.py_function saves a token of a callback that lives in this process only: the model
    answers here, and every request fails in a model server, and in the check's fresh process."""
    config = runlocal()
    network = build_model(config, len(LABELS))
    inputs = keras.Input(network.input_shape[1:])
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    serving_dir = os.path.join(model.uri, "Format-Serving")
    export.export_model(
        keras.Model(inputs, network(keras.layers.Lambda(_through_python)(inputs))),
        serving_dir,
        config.image_size,
        list(LABELS),
        NORMALIZATION,
    )
    [request, *_] = serving_assets.read_warmup_requests(serving_dir)
    answer = tf.saved_model.load(serving_dir).signatures[
        request.predict_log.request.model_spec.signature_name
    ](**serving_assets.request_inputs(request.predict_log.request))
    assert answer["probabilities"].shape == (1, len(LABELS))  # it does answer in this process

    blessing = _run_check(model, tmp_path / "blessing")

    assert blessing.get_int_custom_property("blessed") == 0
    assert "op EagerPyFunc calls back into the Python process" in (
        blessing.get_string_custom_property("problems")
    )


@pytest.mark.slow
def test_an_op_tensorflow_does_not_define_is_named(model_artifact, tmp_path):
    """An op from a custom op library loaded at run time is registered in the process that
    loaded it, not in tf.raw_ops; a fresh process could not even load the model."""
    from tensorflow.core.protobuf import saved_model_pb2

    copy = tmp_path / "model"
    shutil.copytree(os.path.join(model_artifact.uri, "Format-Serving"), copy)
    saved_model = saved_model_pb2.SavedModel.FromString((copy / "saved_model.pb").read_bytes())
    assert stock_tensorflow_problems(str(copy)) == []
    library = saved_model.meta_graphs[0].graph_def.library
    function = next(f for f in library.function if f.node_def)
    function.node_def[0].op = "ImgpipeCustomOp"
    (copy / "saved_model.pb").write_bytes(saved_model.SerializeToString())

    assert stock_tensorflow_problems(str(copy)) == [
        "op ImgpipeCustomOp is not a TensorFlow op (a custom op library?)"
    ]


@pytest.mark.slow
def test_the_serving_process_loads_this_code_whatever_the_working_folder(
    model_artifact, tmp_path, monkeypatch
):
    """`python -m` looks in the working folder first: one holding another checkout's
    `components` package must not stand in for this one."""
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    serving_dir = os.path.join(model_artifact.uri, "Format-Serving")
    report = verify_serving(serving_dir, latency_requests=1, timeout_s=600)
    assert report["problems"] == []
    assert report["loaded_in_pid"] != os.getpid()


@pytest.mark.slow
def test_a_serving_process_that_does_not_answer_in_time_is_refused(model_artifact):
    serving_dir = os.path.join(model_artifact.uri, "Format-Serving")
    report = verify_serving(serving_dir, latency_requests=1, timeout_s=0.05)
    assert report["problems"] == ["the serving process did not answer within 0.05 s"]


@registration.register_serializable(package="imgpipe_test")
class _RegisteredHere(tf.Module):
    """Rebuilt from a SavedModel by this class only where this module registered it."""

    def __init__(self):
        super().__init__()
        self.weight = tf.Variable(1.0)

    @classmethod
    def _deserialize_from_proto(cls, **kwargs):
        return cls()


def test_an_object_only_this_process_can_rebuild_is_named(tmp_path):
    root = tf.Module()
    root.part = _RegisteredHere()
    tf.saved_model.save(root, str(tmp_path))

    assert stock_tensorflow_problems(str(tmp_path)) == [
        f"object 'imgpipe_test._RegisteredHere' is rebuilt by {__name__}, which stock "
        "TensorFlow does not import"
    ]
