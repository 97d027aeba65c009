"""TFLite conversion: the float32 model answers as the Keras model does, float16 closely, the
full-integer int8 model within its quantization step; an int8 model that loses too much accuracy
is refused; the ops
that keep the bytes -> probabilities signature out of TFLite are named; the eval-split comparison
scores each TFLite model on the images the SavedModel's stored scores belong to, and refuses
scores of other images."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.lite.python.convert_phase import ConverterError

from components.evaluation import evaluation_report
from components.evaluation.eval_split import split_files
from components.serving import tflite_export
from components.training import export
from components.training import model as trainer_model
from components.training.export import IMAGES_SIGNATURE
from components.training.preprocessing import normalize
from components.training.trainer_config import runlocal
from tests.components.conftest import EVAL_EXAMPLES, NORMALIZATION

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def converted(model_artifact, examples_artifact):
    saved_model_dir = os.path.join(model_artifact.uri, "Format-Serving")
    model = export.rebuild_keras_model(saved_model_dir)
    size = int(model.input_shape[1])
    function = tflite_export.pixels_function(model, size, NORMALIZATION)
    representative = tflite_export.representative_pixels(
        split_files(examples_artifact, "eval"), size
    )
    flatbuffers = {
        name: tflite_export.convert(function, model, name, representative)
        for name in tflite_export.FILES
    }
    return saved_model_dir, model, size, flatbuffers


def test_tflite_models_answer_as_the_keras_model(converted):
    _, model, size, flatbuffers = converted
    pixels = np.random.default_rng(0).uniform(0, 255, (5, size, size, 3)).astype(np.float32)
    expected = model(normalize(pixels, NORMALIZATION), training=False).numpy()

    float32 = tflite_export.tflite_probabilities(flatbuffers["float32"], pixels)
    float16 = tflite_export.tflite_probabilities(flatbuffers["float16"], pixels)

    assert float32.shape == expected.shape == (5, 3)
    assert np.abs(float32 - expected).max() <= 1e-5
    assert np.abs(float16 - expected).max() <= 1e-2
    assert len(flatbuffers["float16"]) < 0.6 * len(flatbuffers["float32"])  # weights halved


def test_the_int8_model_is_full_integer_and_answers_as_the_keras_model(converted):
    _, model, size, flatbuffers = converted
    pixels = np.random.default_rng(3).uniform(0, 255, (5, size, size, 3)).astype(np.float32)
    expected = model(normalize(pixels, NORMALIZATION), training=False).numpy()

    types = tflite_export.tensor_types(flatbuffers["int8"])
    int8 = tflite_export.tflite_probabilities(flatbuffers["int8"], pixels)

    assert types["input"]["dtype"] == types["output"]["dtype"] == "uint8"
    assert types["output"]["scale"] == pytest.approx(1 / 256)
    interpreter = tf.lite.Interpreter(model_content=flatbuffers["int8"])
    float_tensors = [
        t["name"] for t in interpreter.get_tensor_details() if t["dtype"] == np.float32
    ]
    assert float_tensors == []  # no float op left: it runs on integer-only accelerators
    assert int8.shape == expected.shape
    assert np.abs(int8 - expected).max() <= 0.05
    assert len(flatbuffers["int8"]) < 0.35 * len(flatbuffers["float32"])  # int8 weights


def test_an_int8_conversion_needs_images_to_calibrate_on(converted):
    _, model, size, _ = converted
    function = tflite_export.pixels_function(model, size, NORMALIZATION)
    with pytest.raises(ValueError, match="representative"):
        tflite_export.convert(function, model, "int8", None)


def test_representative_pixels_are_the_first_images_decoded_as_the_models_input(
    examples_artifact,
):
    files = split_files(examples_artifact, "eval")
    pixels = tflite_export.representative_pixels(files, 16, count=5)
    assert pixels.shape == (5, 16, 16, 3) and pixels.dtype == np.float32
    everything = tflite_export.representative_pixels(files, 16, count=1000)
    assert len(everything) == EVAL_EXAMPLES
    assert np.array_equal(everything[:5], pixels)


@pytest.mark.parametrize(("gap", "refused"), [(0.0, False), (1.0, False), (1.5, True)])
def test_an_int8_model_further_below_the_saved_model_than_allowed_is_refused(gap, refused):
    compared = {
        "accuracy": {"saved_model": 0.9, "int8": 0.9 - gap / 100},
        "accuracy_gap_points": {"float32": 0.0, "int8": gap},
    }
    reason = tflite_export.int8_refusal(compared, max_gap_points=1.0)
    assert (reason is not None) == refused
    if refused:
        assert "1.50 points below" in reason and "int8_max_accuracy_gap_points (1)" in reason


def test_single_image_latency_times_every_model(converted):
    _, _, size, flatbuffers = converted
    for flatbuffer in flatbuffers.values():
        latency = tflite_export.single_image_latency(flatbuffer, size, requests=5)
        assert 0 < latency["p50"] <= latency["p99"]


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_model_trained_under_a_mixed_policy_converts_in_float32(tmp_path, policy):
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        trained = trainer_model.build_model(runlocal(), 3, NORMALIZATION)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    trained.save(tmp_path / "model", save_format="tf")
    pixels = np.random.default_rng(2).uniform(0, 255, (4, *trained.input_shape[1:]))
    pixels = pixels.astype(np.float32)

    rebuilt = export.rebuild_keras_model(str(tmp_path / "model"))
    size = int(rebuilt.input_shape[1])
    function = tflite_export.pixels_function(rebuilt, size, NORMALIZATION)
    flatbuffer = tflite_export.convert(function, rebuilt, "float32")

    assert {layer.compute_dtype for layer in rebuilt.layers} == {"float32"}
    for mine, theirs in zip(rebuilt.weights, trained.weights, strict=True):
        assert np.array_equal(mine.numpy(), theirs.numpy())
    expected = rebuilt(normalize(pixels, NORMALIZATION), training=False).numpy()
    got = tflite_export.tflite_probabilities(flatbuffer, pixels)
    assert np.abs(got - expected).max() <= 1e-5


def test_unconvertible_ops_of_the_bytes_signature_are_the_ones_the_report_names(converted):
    saved_model_dir, *_ = converted
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir, [IMAGES_SIGNATURE])
    with pytest.raises(ConverterError) as refused:
        converter.convert()
    assert tflite_export.refused_ops(refused.value) == list(
        tflite_export.IMAGES_SIGNATURE_REFUSED_OPS
    )


def test_eval_split_comparison_scores_every_model_on_the_same_images(converted, examples_artifact):
    saved_model_dir, _, size, flatbuffers = converted
    files = split_files(examples_artifact, "eval")
    scores = evaluation_report.score_split(saved_model_dir, files)

    compared = tflite_export.compare_on_split(scores, flatbuffers, files, size)

    assert compared["examples"] == EVAL_EXAMPLES
    accuracy = compared["accuracy"]
    assert set(accuracy) == {"saved_model", *tflite_export.FILES}
    assert accuracy["saved_model"] == np.mean(scores.probabilities.argmax(1) == scores.labels)
    for name in tflite_export.FILES:
        gap = 100 * (accuracy["saved_model"] - accuracy[name])
        assert compared["accuracy_gap_points"][name] == pytest.approx(gap)
    # Same preprocessing, same weights: float32 TFLite matches the SavedModel exactly.
    assert compared["max_abs_probability_difference"]["float32"] <= 1e-5
    assert compared["top1_agreement"]["float32"] == 1.0


def test_scores_of_other_examples_are_refused(converted, examples_artifact):
    saved_model_dir, _, size, flatbuffers = converted
    files = split_files(examples_artifact, "eval")
    scores = evaluation_report.score_split(saved_model_dir, files)
    reordered = dataclasses.replace(scores, source_paths=scores.source_paths[::-1])
    fewer = dataclasses.replace(
        scores,
        labels=scores.labels[:-1],
        probabilities=scores.probabilities[:-1],
        source_paths=scores.source_paths[:-1],
    )

    with pytest.raises(ValueError, match="do not belong"):
        tflite_export.compare_on_split(reordered, flatbuffers, files, size)
    with pytest.raises(ValueError, match="do not belong"):
        tflite_export.compare_on_split(fewer, flatbuffers, files, size)


def test_a_model_tflite_cannot_express_gets_the_refused_ops_not_a_crash():
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def classify(pixels):
        lengths = tf.strings.length(tf.strings.as_string(pixels))  # no TFLite builtin
        return {"probabilities": tf.nn.softmax(tf.cast(lengths, tf.float32))}

    representative = np.zeros((2, 4), np.float32)
    converted, failed = tflite_export.convert_all(
        classify.get_concrete_function(), tf.Module(), representative
    )

    assert converted == {}
    assert set(failed) == set(tflite_export.FILES)
    assert all("tf.AsString" in ops for ops in failed.values())


def test_component_compares_with_the_evaluation_reports_stored_scores(
    model_artifact, examples_artifact, tmp_path
):
    report = evaluation_report.EvaluationReport()
    report.uri = str(tmp_path / "report")
    evaluation_report.EvaluationReportGen.EXECUTOR_SPEC.executor_class().Do(
        {"model": [model_artifact], "examples": [examples_artifact]},
        {"report": [report]},
        {"eval_split": "eval"},
    )
    output = tflite_export.TFLiteModel()
    output.uri = str(tmp_path / "tflite")

    tflite_export.TFLiteExport.EXECUTOR_SPEC.executor_class().Do(
        {
            "model": [model_artifact],
            "examples": [examples_artifact],
            "readable_evaluation": [report],
        },
        {"tflite": [output]},
        # Every gap refuses the int8 model: the tiny artifact has no train split to calibrate on.
        {"eval_split": "eval", "train_split": "eval", "int8_max_accuracy_gap_points": 0.0},
    )

    with open(tmp_path / "tflite" / tflite_export.REPORT_FILE) as handle:
        written = json.load(handle)
    readable = evaluation_report.read_report(report.uri)
    assert written["eval"]["examples"] == readable["examples"] == EVAL_EXAMPLES
    assert written["eval"]["accuracy"]["saved_model"] == readable["accuracy"]
    assert output.get_float_custom_property("saved_model_accuracy") == readable["accuracy"]
    gap = written["eval"]["accuracy_gap_points"]["int8"]
    refused = gap > 0
    assert sorted(written["files"]) == ["float16", "float32"] + ([] if refused else ["int8"])
    assert ("int8" in written["refused"]) == refused
    assert (tmp_path / "tflite" / tflite_export.FILES["int8"]).exists() == (not refused)
    assert output.has_custom_property("int8_refused") == refused
    for name in tflite_export.FILES:
        assert written["bytes"][name] == output.get_int_custom_property(f"{name}_bytes") > 0
        assert 0 < written["latency_ms"][name]["p50"] <= written["latency_ms"][name]["p99"]
    assert written["calibration_images"] == EVAL_EXAMPLES


def test_efficientnet_lite0_with_imagenet_weights_converts_to_every_tflite_model(
    tmp_path, monkeypatch
):
    """Lite0 as the Trainer exports it (ImageNet weights, its input scaling inside the model):
    every quantization converts, and the float models answer as the Keras model on real
    photographs."""
    import skimage.data

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = dataclasses.replace(
        runlocal(), image_size=64, model="efficientnet_lite0", weights="imagenet"
    )
    keras.utils.set_random_seed(0)  # the head's random weights
    trained = trainer_model.build_model(config, 3, NORMALIZATION)
    saved_model_dir = str(tmp_path / "model")
    export.export_model(trained, saved_model_dir, 64, ["a", "b", "c"], NORMALIZATION)
    model = export.rebuild_keras_model(saved_model_dir)
    photos = [
        getattr(skimage.data, name)()
        for name in ("astronaut", "chelsea", "coffee", "rocket", "retina", "immunohistochemistry")
    ]
    pixels = np.concatenate(
        [tf.image.resize(photo[np.newaxis], (64, 64), antialias=True) for photo in photos]
    ).astype(np.float32)
    function = tflite_export.pixels_function(model, 64, NORMALIZATION)
    expected = model(normalize(pixels, NORMALIZATION), training=False).numpy()
    exported = trained(normalize(pixels, NORMALIZATION), training=False).numpy()

    flatbuffers = {
        name: tflite_export.convert(function, model, name, pixels) for name in tflite_export.FILES
    }
    answers = {
        name: tflite_export.tflite_probabilities(flatbuffer, pixels)
        for name, flatbuffer in flatbuffers.items()
    }

    np.testing.assert_allclose(expected, exported, atol=1e-5)  # Lite0's input scaling too
    assert np.abs(answers["float32"] - expected).max() <= 1e-5
    assert np.abs(answers["float16"] - expected).max() <= 1e-2
    # Its accuracy is the pipeline's to judge (int8_max_accuracy_gap_points refuses it): six
    # calibration images and an untrained head say nothing about it. It converts, integer-only.
    assert answers["int8"].shape == expected.shape
    assert tflite_export.tensor_types(flatbuffers["int8"])["input"]["dtype"] == "uint8"
    assert len(flatbuffers["int8"]) < 0.35 * len(flatbuffers["float32"])
