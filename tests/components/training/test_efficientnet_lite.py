"""EfficientNet-Lite0's ImageNet weights in tf_keras' EfficientNet builder: they classify real
photographs as ImageNet does, are cached once and checked by hash, and reach the classifier's
backbone with the preprocessing they were trained with."""

import dataclasses
import hashlib
import os

import numpy as np
import pytest
import skimage.data
import tensorflow as tf
import tf_keras

from components.training import efficientnet_lite
from components.training.model import backbone_of, build_model
from components.training.preprocessing import Normalization, normalize
from components.training.torch_weights import read_legacy_pth
from components.training.trainer_config import runlocal

# Each builds Lite0 (seconds on a CPU) or converts its weights: make test only.
pytestmark = pytest.mark.slow

NORMALIZATION = Normalization((100.0, 110.0, 120.0), (50.0, 55.0, 60.0))


def _photo(name: str, size: int = efficientnet_lite.DEFAULT_SIZE) -> np.ndarray:
    image = getattr(skimage.data, name)()
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return tf.image.resize(image[np.newaxis].astype(np.float32), (size, size), antialias=True)


@pytest.fixture(scope="module")
def imagenet_model():
    model = efficientnet_lite.efficientnet_lite0((224, 224, 3), include_top=True)
    efficientnet_lite.load_imagenet_state(model, read_legacy_pth(efficientnet_lite.source_path()))
    return model


@pytest.mark.parametrize(
    ("photo", "classes"),
    [
        ("chelsea", {281, 282, 283, 284, 285}),  # a tabby: tabby .. Egyptian cat
        ("coffee", {967, 968}),  # espresso, cup
        ("camera", {872}),  # the cameraman's tripod
        ("checkerboard", {918}),  # crossword puzzle
    ],
)
def test_imagenet_weights_classify_photographs_as_imagenet_does(imagenet_model, photo, classes):
    probabilities = imagenet_model(_photo(photo), training=False).numpy()[0]

    assert int(np.argmax(probabilities)) in classes


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "imgpipe"


def test_weights_are_converted_once_and_reconverted_when_their_hash_differs(cache):
    path = efficientnet_lite.imagenet_weights_file()
    converted = os.stat(path).st_mtime_ns

    assert os.path.dirname(path) == str(cache)
    assert efficientnet_lite.imagenet_weights_file() == path
    assert os.stat(path).st_mtime_ns == converted  # reused
    with open(path, "r+b") as handle:  # damaged after it was written
        handle.seek(4096)
        handle.write(b"\0" * 64)
    efficientnet_lite.imagenet_weights_file()
    with open(path + ".sha256") as handle, open(path, "rb") as weights:
        assert handle.read() == hashlib.sha256(weights.read()).hexdigest()
    assert os.stat(path).st_mtime_ns != converted
    name = os.path.basename(path)
    assert sorted(os.listdir(cache)) == [name, f"{name}.sha256"]  # no scratch left behind


def test_the_classifier_backbone_gets_imagenet_weights_and_lite0_pixel_scaling(cache):
    del cache
    config = dataclasses.replace(
        runlocal(), image_size=64, model="efficientnet_lite0", weights="imagenet"
    )
    model = build_model(config, 3, NORMALIZATION)
    reference = efficientnet_lite.efficientnet_lite0((64, 64, 3))
    efficientnet_lite.load_imagenet_state(
        reference, read_legacy_pth(efficientnet_lite.source_path())
    )
    pixels = _photo("chelsea", 64)
    features = tf_keras.Model(model.input, model.get_layer(index=-2).input)

    # The reference gets (pixels - 127) / 128 from its normalization layer; check it once by hand.
    stem_input = tf_keras.Model(reference.input, reference.get_layer("stem_conv_pad").input)
    np.testing.assert_allclose(stem_input(pixels), (pixels - 127.0) / 128.0, atol=1e-5)
    np.testing.assert_allclose(
        features(normalize(pixels, NORMALIZATION)).numpy(), reference(pixels).numpy(), atol=1e-4
    )
    for mine, theirs in zip(backbone_of(model).weights, reference.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_imagenet_weights_load_under_a_mixed_policy(cache, policy):
    """The builder's input normalization keeps its constants in the compute dtype under a mixed
    policy, which Keras' own .h5 loader cannot fill from float32."""
    del cache
    config = dataclasses.replace(
        runlocal(), image_size=64, model="efficientnet_lite0", weights="imagenet"
    )
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        mixed = build_model(config, 3, NORMALIZATION)
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)
    full = build_model(config, 3, NORMALIZATION)

    for mine, theirs in zip(backbone_of(mixed).weights, backbone_of(full).weights, strict=True):
        np.testing.assert_allclose(
            np.asarray(mine.numpy(), np.float32), theirs.numpy(), rtol=1e-2, atol=1e-6
        )
