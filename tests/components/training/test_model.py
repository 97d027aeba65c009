"""The classifier is a tf_keras model with a float32 softmax head, whatever the backbone."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from components.training.model import (
    BATCH_NORM_MOMENTUM,
    BackboneInput,
    backbone_of,
    build_model,
    float32_twin,
)
from components.training.preprocessing import Normalization, normalize
from components.training.trainer_config import (
    APPLICATIONS,
    MIN_IMAGE_SIZE,
    TrainerConfig,
    runlocal,
)

CLASSES = 3
NORMALIZATION = Normalization((100.0, 110.0, 120.0), (50.0, 55.0, 60.0))


def _images(config, count=2):
    shape = [count, config.image_size, config.image_size, 3]
    return tf.random.stateless_normal(shape, seed=[0, 1])


def test_tf_keras_is_the_keras_in_use():
    """TFX 1.16 needs Keras 2; data_prep pins it before TensorFlow loads."""
    model = build_model(runlocal(), CLASSES)

    assert tf.keras.Model is tf_keras.Model
    assert isinstance(model, tf_keras.Model)


@pytest.mark.parametrize("size", [MIN_IMAGE_SIZE["small_cnn"], 28, 32])
def test_small_cnn_outputs_probabilities(size):
    config = dataclasses.replace(runlocal(), image_size=size)
    probabilities = build_model(config, CLASSES)(_images(config), training=False)

    assert probabilities.shape == (2, CLASSES)
    assert probabilities.dtype == tf.float32
    np.testing.assert_allclose(tf.reduce_sum(probabilities, -1).numpy(), 1.0, rtol=1e-5)


def test_head_stays_float32_under_mixed_precision():
    tf_keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = build_model(runlocal(), CLASSES)
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")

    assert model.layers[1].compute_dtype == "float16"  # the backbone runs in half precision
    assert model.output.dtype == tf.float32


@pytest.mark.parametrize(
    "name",
    [
        "mobilenet_v3_small",
        # Seconds each to build on a CPU: out of make test-fast.
        pytest.param("resnet50", marks=pytest.mark.slow),
        pytest.param("efficientnet_b0", marks=pytest.mark.slow),
    ],
)
def test_application_backbones_build_from_random_weights(name):
    config = dataclasses.replace(runlocal(), model=name)
    model = build_model(config, CLASSES, NORMALIZATION)  # EfficientNetB0 takes pixels

    assert model.output_shape == (None, CLASSES)
    assert model(_images(config), training=False).dtype == tf.float32


def test_weights_path_is_loaded_into_the_backbone(tmp_path):
    config = runlocal()
    source = build_model(config, CLASSES)
    path = str(tmp_path / "backbone.h5")
    source.get_layer("small_cnn").save_weights(path)

    tf_keras.utils.set_random_seed(1)  # different random initial weights
    loaded = build_model(dataclasses.replace(config, weights_path=path), CLASSES, NORMALIZATION)

    expected_weights = source.get_layer("small_cnn").get_weights()
    loaded_weights = loaded.get_layer("small_cnn").get_weights()
    for expected, actual in zip(expected_weights, loaded_weights, strict=True):
        np.testing.assert_array_equal(expected, actual)
    assert not np.array_equal(
        source.get_layer("probabilities").get_weights()[0],
        loaded.get_layer("probabilities").get_weights()[0],
    )


def test_building_a_model_leaves_autograph_conversion_rules_alone():
    """No exemption of tf_keras by assignment to TensorFlow's AutoGraph settings, at import or
    build time: the trainer's graphs turn AutoGraph off through tf.function instead."""
    from tensorflow.python.autograph.core import config as autograph_config

    rules = autograph_config.CONVERSION_RULES
    build_model(runlocal(), CLASSES)
    assert autograph_config.CONVERSION_RULES is rules
    assert not any(rule.matches("tf_keras") for rule in rules)


def test_fewer_than_two_classes_is_an_error():
    with pytest.raises(ValueError, match="at least 2 classes"):
        build_model(TrainerConfig(), 1)


def _features(model):
    """The classifier up to its backbone's pooled features (the input of the head's dropout)."""
    return tf_keras.Model(model.input, model.get_layer(index=-2).input)


def _pixels(config, count=2):
    shape = [count, config.image_size, config.image_size, 3]
    return tf.random.stateless_uniform(shape, seed=[0, 2], minval=0.0, maxval=255.0)


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        # The application as its weights are published: its own preprocess_input on 0..255
        # pixels, and (MobileNetV3, EfficientNet) the rescaling built into the model.
        # Each builds its backbone twice, seconds on a CPU: make test only.
        pytest.param(
            "resnet50",
            lambda pixels: tf_keras.applications.resnet50.preprocess_input(pixels),
            marks=pytest.mark.slow,
        ),
        pytest.param("mobilenet_v3_small", lambda pixels: pixels, marks=pytest.mark.slow),
        pytest.param("efficientnet_b0", lambda pixels: pixels, marks=pytest.mark.slow),
    ],
)
def test_backbone_sees_the_preprocessing_its_weights_expect(name, reference, tmp_path):
    """Fed the pipeline's normalized images, the fine-tuned model's backbone gets exactly what
    the published application gets from raw pixels."""
    config = dataclasses.replace(runlocal(), model=name, backbone_preprocessing=True)
    model = build_model(config, CLASSES, NORMALIZATION)
    published = getattr(tf_keras.applications, APPLICATIONS[name])(
        include_top=False, weights=None, input_shape=(32, 32, 3), pooling="avg"
    )
    published.set_weights(backbone_of(model).get_weights())
    pixels = _pixels(config)

    normalized = normalize(pixels, NORMALIZATION)
    features = _features(model)
    np.testing.assert_allclose(
        features(normalized).numpy(), published(reference(pixels)).numpy(), rtol=1e-4, atol=1e-4
    )


def test_small_cnn_weights_expect_pixels_scaled_to_plus_minus_one():
    config = dataclasses.replace(runlocal(), backbone_preprocessing=True)
    model = build_model(config, CLASSES, NORMALIZATION)
    pixels = _pixels(config)
    backbone_input = model.get_layer(index=1)
    assert isinstance(backbone_input, BackboneInput)
    np.testing.assert_allclose(
        backbone_input(normalize(pixels, NORMALIZATION)).numpy(),
        pixels.numpy() / 127.5 - 1.0,
        atol=1e-4,
    )


def test_from_scratch_models_take_the_dataset_normalization_directly():
    model = build_model(runlocal(), CLASSES)
    assert not any(isinstance(layer, BackboneInput) for layer in model.layers)


def test_efficientnet_lite0_from_scratch_gets_the_pixels_its_builder_rescales():
    """The EfficientNet builder divides its input by 255 inside the network: fed the normalized
    image, its stem's outputs would be smaller than batch normalization's epsilon."""
    config = dataclasses.replace(runlocal(), model="efficientnet_lite0")
    model = build_model(config, CLASSES, NORMALIZATION)
    pixels = _pixels(config)
    np.testing.assert_allclose(
        _features(model)(normalize(pixels, NORMALIZATION)).numpy(),
        backbone_of(model)(pixels).numpy(),
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.slow  # 66 training passes of a whole backbone each
@pytest.mark.parametrize(
    "name",
    [
        "efficientnet_lite0",
        "mobilenet_v3_small",  # Keras' own momentum: 0.99, and 0.999 for MobileNetV3.
    ],
)
def test_from_scratch_batch_norm_statistics_follow_training_within_a_run(name):
    """A few dozen training steps bring the stem's moving statistics to its batch statistics,
    as inference (evaluation, serving) needs them."""
    config = dataclasses.replace(runlocal(), model=name)
    backbone = backbone_of(build_model(config, CLASSES, NORMALIZATION))
    stem = next(
        layer for layer in backbone.layers if isinstance(layer, tf_keras.layers.BatchNormalization)
    )
    pixels = _pixels(config, count=8)
    steps = round(np.log(1e-3) / np.log(BATCH_NORM_MOMENTUM))  # 0.1% of the start left
    for _ in range(steps):
        backbone(pixels, training=True)
    stem_input = tf_keras.Model(backbone.input, stem.input)(pixels).numpy()
    batch_variance = stem_input.reshape(-1, stem_input.shape[-1]).var(axis=0, ddof=1)
    # What is left of the start (variance 1) is 1e-3; Keras' 0.99 would leave 0.5.
    np.testing.assert_allclose(stem.moving_variance.numpy(), batch_variance, rtol=0.05, atol=2e-3)


def test_fine_tuned_backbone_runs_batch_norm_in_inference_mode(tmp_path):
    config = runlocal()
    path = str(tmp_path / "backbone.h5")
    backbone_of(build_model(config, CLASSES)).save_weights(path)
    model = build_model(dataclasses.replace(config, weights_path=path), CLASSES, NORMALIZATION)
    images = _images(config, count=4)
    # Dropout aside (the head's), training=True gives the same output as inference when every
    # batch normalization uses its moving statistics.
    features = _features(model)
    np.testing.assert_allclose(
        features(images, training=True).numpy(), features(images, training=False).numpy(), atol=1e-5
    )


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_the_float32_twin_of_a_mixed_precision_model_computes_in_float32_with_its_weights(policy):
    config = dataclasses.replace(runlocal(), backbone_preprocessing=True)  # a custom layer too
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        mixed = build_model(config, CLASSES, NORMALIZATION)
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)
    twin = float32_twin(mixed)
    pixels = _pixels(config)

    twin_layers = [*twin.layers, *backbone_of(twin).layers]
    assert {layer.compute_dtype for layer in twin_layers} == {"float32"}
    assert "float32" not in {layer.compute_dtype for layer in backbone_of(mixed).layers[1:]}
    for mine, theirs in zip(twin.weights, mixed.weights, strict=True):
        assert mine.name == theirs.name and np.array_equal(mine.numpy(), theirs.numpy())
    np.testing.assert_allclose(twin(pixels), mixed(pixels), atol=0.05)


def test_a_float32_model_is_its_own_twin():
    model = build_model(runlocal(), CLASSES)
    assert float32_twin(model) is model
