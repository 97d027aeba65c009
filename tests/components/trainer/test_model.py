"""The classifier is a tf_keras model with a float32 softmax head, whatever the backbone."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from components.trainer.config import TrainerConfig, runlocal
from components.trainer.model import build_model

CLASSES = 3


def _images(config, count=2):
    shape = [count, config.image_size, config.image_size, 3]
    return tf.random.stateless_normal(shape, seed=[0, 1])


def test_tf_keras_is_the_keras_in_use():
    """TFX 1.16 needs Keras 2; data_prep pins it before TensorFlow loads."""
    model = build_model(runlocal(), CLASSES)

    assert tf.keras.Model is tf_keras.Model
    assert isinstance(model, tf_keras.Model)


def test_small_cnn_outputs_probabilities():
    config = runlocal()
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
    model = build_model(config, CLASSES)

    assert model.output_shape == (None, CLASSES)
    assert model(_images(config), training=False).dtype == tf.float32


def test_weights_path_is_loaded_into_the_backbone(tmp_path):
    config = runlocal()
    source = build_model(config, CLASSES)
    path = str(tmp_path / "backbone.h5")
    source.get_layer("small_cnn").save_weights(path)

    tf_keras.utils.set_random_seed(1)  # different random initial weights
    loaded = build_model(dataclasses.replace(config, weights_path=path), CLASSES)

    expected_weights = source.get_layer("small_cnn").get_weights()
    loaded_weights = loaded.get_layer("small_cnn").get_weights()
    for expected, actual in zip(expected_weights, loaded_weights, strict=True):
        np.testing.assert_array_equal(expected, actual)
    assert not np.array_equal(
        source.get_layer("probabilities").get_weights()[0],
        loaded.get_layer("probabilities").get_weights()[0],
    )


def test_tf_keras_is_exempt_from_autograph_once():
    from tensorflow.python.autograph.core import config as autograph_config

    build_model(runlocal(), CLASSES)
    build_model(runlocal(), CLASSES)

    exempt = [rule for rule in autograph_config.CONVERSION_RULES if rule.matches("tf_keras")]
    assert len(exempt) == 1
    assert isinstance(exempt[0], autograph_config.DoNotConvert)


def test_fewer_than_two_classes_is_an_error():
    with pytest.raises(ValueError, match="at least 2 classes"):
        build_model(TrainerConfig(), 1)
