"""Grad-CAM: on a model trained to find a bright square, the heatmap follows the square wherever
it is; the explained probabilities are the exported model's own (same preprocessing); the
overlay is a PNG coloured where the heatmap is high."""

import dataclasses
import io

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from PIL import Image

from components.evaluation import gradcam
from components.training import export
from components.training.model import build_model
from components.training.preprocessing import Normalization, normalize
from components.training.trainer_config import MODELS, runlocal

pytestmark = pytest.mark.slow  # trains a small network for a few seconds

SIZE, SIDE = 32, 10  # image and square, pixels
LABELS = ["blank", "square"]
CORNERS = {
    "top left": (2, 2),
    "top right": (2, 20),
    "bottom left": (20, 2),
    "bottom right": (20, 20),
}


def _image(rng, corner: tuple[int, int] | None) -> np.ndarray:
    image = rng.uniform(0, 60, (SIZE, SIZE, 3))
    if corner is not None:
        top, left = corner
        image[top : top + SIDE, left : left + SIDE] = 230
    return image.astype(np.float32)


def _png(image: np.ndarray) -> bytes:
    return tf.io.encode_png(image.astype(np.uint8)).numpy()


@pytest.fixture(scope="module")
def square_model(tmp_path_factory):
    """A small_cnn trained to tell a square anywhere from no square, exported as the Trainer
    exports; its folder."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 512)
    images = np.stack(
        [_image(rng, tuple(rng.integers(0, SIZE - SIDE, 2)) if label else None) for label in labels]
    )
    images = np.round(images)  # what a PNG round trip keeps
    normalization = Normalization(
        tuple(images.mean(axis=(0, 1, 2)).tolist()), tuple(images.std(axis=(0, 1, 2)).tolist())
    )
    config = dataclasses.replace(runlocal(), image_size=SIZE, dropout=0.0)
    model = build_model(config, len(LABELS), normalization)
    model.compile(keras.optimizers.Adam(0.003), "sparse_categorical_crossentropy", ["accuracy"])
    history = model.fit(
        normalize(images, normalization), labels, batch_size=32, epochs=6, verbose=0
    )
    assert history.history["accuracy"][-1] > 0.95  # it learned to find the square
    folder = str(tmp_path_factory.mktemp("square") / "model")
    export.export_model(model, folder, SIZE, LABELS, normalization)
    return folder


def test_the_heatmap_follows_the_square_when_it_moves(square_model):
    rng = np.random.default_rng(1)
    explainer = gradcam.Explainer(square_model)
    images = [_png(_image(rng, corner)) for corner in CORNERS.values()]

    explained = explainer.explain(images, class_ids=[LABELS.index("square")] * len(images))

    for (where, (top, left)), explanation in zip(CORNERS.items(), explained, strict=True):
        rows, columns = explanation.heatmap.shape
        peak = np.unravel_index(explanation.heatmap.argmax(), explanation.heatmap.shape)
        centre = ((top + SIDE / 2) / SIZE * rows, (left + SIDE / 2) / SIZE * columns)
        assert explanation.heatmap.max() == 1.0, where
        assert abs(peak[0] + 0.5 - centre[0]) <= 1 and abs(peak[1] + 0.5 - centre[1]) <= 1, (
            f"square at the {where}: heatmap peak at cell {peak} of {rows}x{columns}"
        )


def test_explanations_are_of_the_exported_models_top_class_and_probabilities(square_model):
    rng = np.random.default_rng(2)
    images = [_png(_image(rng, (5, 12))), _png(_image(rng, None))]
    served = tf.saved_model.load(square_model).signatures[export.IMAGES_SIGNATURE]
    probabilities = served(images=tf.constant(images))["probabilities"].numpy()

    explained = gradcam.Explainer(square_model).explain(images)

    assert [e.class_name for e in explained] == ["square", "blank"]
    for explanation, row in zip(explained, probabilities, strict=True):
        assert explanation.class_id == row.argmax()
        assert explanation.probability == pytest.approx(row.max(), abs=1e-5)
        assert explanation.pixels.shape == (SIZE, SIZE, 3)


def test_the_overlay_is_a_png_reddest_where_the_heatmap_is_high(square_model):
    pixels = np.full((SIZE, SIZE, 3), 128, np.uint8)
    heatmap = np.zeros((4, 4), np.float32)
    heatmap[0, 0] = 1.0
    explanation = gradcam.Explanation(1, "square", 0.9, heatmap, pixels)

    png = gradcam.overlay(explanation)

    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.shape == (gradcam.OVERLAY_SIDE, gradcam.OVERLAY_SIDE, 3)
    hot, cold = image[5, 5], image[-5, -5]
    assert hot[0] - hot[2] > 50 and cold[2] - cold[0] > 50  # red over the peak, blue far off


@pytest.mark.parametrize("backbone", MODELS)
def test_every_backbone_splits_at_its_last_feature_map_into_the_same_classifier(backbone):
    # The applications with their own input layer (BackboneInput), small_cnn without.
    own_preprocessing = backbone != "small_cnn"
    config = dataclasses.replace(
        runlocal(), model=backbone, backbone_preprocessing=own_preprocessing
    )
    normalization = Normalization((120.0, 110.0, 100.0), (60.0, 50.0, 40.0))
    model = build_model(config, 3, normalization)
    images = np.random.default_rng(3).normal(size=(2, *model.input_shape[1:])).astype(np.float32)

    before, features_model, after, head = gradcam.split_at_feature_map(model)
    x = images
    for layer in before:
        x = layer(x, training=False)
    features = features_model(x, training=False)
    x = features
    for layer in after:
        x = layer(x, training=False)
    logits = tf.matmul(x, head.kernel) + head.bias

    assert len(features.shape) == 4 and features.shape[1] > 0
    np.testing.assert_allclose(
        tf.nn.softmax(logits).numpy(), model(images, training=False).numpy(), atol=1e-5
    )
