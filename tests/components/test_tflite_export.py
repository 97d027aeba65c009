"""TFLite conversion: the float32 model answers as the Keras model does, float16 closely; the ops
that keep the bytes -> probabilities signature out of TFLite are named; the eval-split comparison
scores each TFLite model on the images the SavedModel's stored scores belong to, and refuses
scores of other images."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.lite.python.convert_phase import ConverterError

from components import evaluation_report, tflite_export
from components.eval_split import split_files
from components.trainer import model as trainer_model
from components.trainer.export import IMAGES_SIGNATURE
from components.trainer.preprocessing import normalize
from components.trainer.trainer_config import runlocal
from tests.components.conftest import EVAL_EXAMPLES, NORMALIZATION

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def converted(model_artifact):
    saved_model_dir = os.path.join(model_artifact.uri, "Format-Serving")
    model = tflite_export.rebuild_keras_model(saved_model_dir)
    size = int(model.input_shape[1])
    function = tflite_export.pixels_function(model, size, NORMALIZATION)
    flatbuffers = {
        name: tflite_export.convert(function, model, name) for name in ("float32", "float16")
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


def test_the_rebuilt_keras_model_is_the_exported_one(tmp_path):
    config = dataclasses.replace(runlocal(), backbone_preprocessing=True)  # a custom layer too
    exported = trainer_model.build_model(config, 3, NORMALIZATION)
    exported.save(tmp_path / "model", save_format="tf")
    images = np.random.default_rng(1).normal(size=(4, *exported.input_shape[1:]))

    rebuilt = tflite_export.rebuild_keras_model(str(tmp_path / "model"))
    loaded = keras.models.load_model(tmp_path / "model", compile=False)

    assert any(isinstance(layer, trainer_model.BackboneInput) for layer in rebuilt.layers)
    assert [w.name for w in rebuilt.weights] == [w.name for w in loaded.weights]
    for mine, theirs in zip(rebuilt.weights, loaded.weights, strict=True):
        assert np.array_equal(mine.numpy(), theirs.numpy())
    assert np.array_equal(rebuilt(images, training=False), loaded(images, training=False))


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

    rebuilt = tflite_export.rebuild_keras_model(str(tmp_path / "model"))
    size = int(rebuilt.input_shape[1])
    function = tflite_export.pixels_function(rebuilt, size, NORMALIZATION)
    flatbuffer = tflite_export.convert(function, rebuilt, "float32")

    assert {layer.compute_dtype for layer in rebuilt.layers} == {"float32"}
    for mine, theirs in zip(rebuilt.weights, trained.weights, strict=True):
        assert np.array_equal(mine.numpy(), theirs.numpy())
    expected = rebuilt(normalize(pixels, NORMALIZATION), training=False).numpy()
    got = tflite_export.tflite_probabilities(flatbuffer, pixels)
    assert np.abs(got - expected).max() <= 1e-5


def test_rebuilding_refuses_variables_that_miss_part_of_the_architecture(tmp_path):
    inputs = keras.Input((4,))
    smaller = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    larger = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(3)(inputs)))
    smaller.save(tmp_path / "smaller", save_format="tf")
    larger.save(tmp_path / "larger", save_format="tf")
    shutil.rmtree(tmp_path / "larger" / "variables")
    shutil.copytree(tmp_path / "smaller" / "variables", tmp_path / "larger" / "variables")

    with pytest.raises(AssertionError):
        tflite_export.rebuild_keras_model(str(tmp_path / "larger"))


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
    assert set(accuracy) == {"saved_model", "float32", "float16"}
    assert accuracy["saved_model"] == np.mean(scores.probabilities.argmax(1) == scores.labels)
    for name in ("float32", "float16"):
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

    converted, failed = tflite_export.convert_all(classify.get_concrete_function(), tf.Module())

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
        {"eval_split": "eval"},
    )

    with open(tmp_path / "tflite" / tflite_export.REPORT_FILE) as handle:
        written = json.load(handle)
    readable = evaluation_report.read_report(report.uri)
    assert written["eval"]["examples"] == readable["examples"] == EVAL_EXAMPLES
    assert written["eval"]["accuracy"]["saved_model"] == readable["accuracy"]
    assert output.get_float_custom_property("saved_model_accuracy") == readable["accuracy"]
    assert sorted(written["files"]) == ["float16", "float32"]
