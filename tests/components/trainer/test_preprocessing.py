"""The shared preprocessing: the same result eagerly and inside tf.data.map, for any input."""

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from components.trainer import preprocessing
from components.trainer.preprocessing import Normalization
from data_prep import features
from data_prep.config import ConfigError
from tests.data_prep import image_files

NORMALIZATION = Normalization(mean=(120.0, 110.0, 100.0), std=(60.0, 50.0, 40.0))
SIZE = 32


def _in_map(fn, value):
    """fn applied inside tf.data.Dataset.map (graph mode, unknown shapes), as training runs it."""
    dataset = tf.data.Dataset.from_tensors(value).map(fn)
    return next(iter(dataset)).numpy()


def _gray_png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image_files.random_rgb(20, 30)[..., 0]).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    "encoded",
    [image_files.jpeg(seed=1, height=50, width=70), image_files.png(seed=2), _gray_png()],
    ids=["jpeg", "png", "grayscale_png"],
)
def test_decode_and_resize_eager_equals_map(encoded):
    def fn(value):
        return preprocessing.decode_and_resize(value, SIZE)

    eager = fn(tf.constant(encoded)).numpy()
    np.testing.assert_array_equal(eager, _in_map(fn, encoded))
    assert eager.shape == (SIZE, SIZE, 3)
    assert eager.dtype == np.float32
    assert 0.0 <= eager.min() and eager.max() <= 255.0


def test_decode_and_resize_matches_pixels():
    """A PNG already at the target size comes back unchanged (lossless, no resampling)."""
    pixels = image_files.random_rgb(SIZE, SIZE, seed=3)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    decoded = preprocessing.decode_and_resize(tf.constant(buffer.getvalue()), SIZE)
    np.testing.assert_allclose(decoded.numpy(), pixels.astype(np.float32), atol=1e-3)


def test_normalize_eager_equals_map_and_is_per_channel():
    image = np.full((4, 4, 3), [180.0, 160.0, 140.0], np.float32)

    def fn(value):
        return preprocessing.normalize(value, NORMALIZATION)

    eager = fn(tf.constant(image)).numpy()
    np.testing.assert_array_equal(eager, _in_map(fn, image))
    np.testing.assert_allclose(eager[0, 0], [1.0, 1.0, 1.0])


def test_preprocess_image_eager_equals_map():
    encoded = image_files.jpeg(seed=4, height=90, width=40)

    def fn(value):
        return preprocessing.preprocess_image(value, SIZE, NORMALIZATION)

    eager = fn(tf.constant(encoded)).numpy()
    np.testing.assert_array_equal(eager, _in_map(fn, encoded))
    expected = preprocessing.decode_and_resize(tf.constant(encoded), SIZE).numpy()
    expected = (expected - NORMALIZATION.mean) / NORMALIZATION.std
    np.testing.assert_allclose(eager, expected, rtol=1e-6, atol=1e-6)


def test_compute_normalization_matches_numpy(shard_dir):
    files = sorted(str(path) for path in shard_dir.iterdir())
    spec = {features.IMAGE: features.feature_spec()[features.IMAGE]}
    pixels = np.concatenate(
        [
            preprocessing.decode_and_resize(
                tf.io.parse_single_example(record, spec)[features.IMAGE], SIZE
            )
            .numpy()
            .reshape(-1, 3)
            for record in tf.data.TFRecordDataset(files, compression_type="GZIP")
        ]
    ).astype(np.float64)

    stats = preprocessing.compute_normalization(files, SIZE)

    np.testing.assert_allclose(stats.mean, pixels.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats.std, pixels.std(0), rtol=1e-6)


@pytest.mark.parametrize(
    ("normalization", "field"),
    [
        (Normalization(mean=(1.0, 2.0), std=(1.0, 1.0, 1.0)), "normalization.mean"),
        (Normalization(mean=(1.0, 2.0, 3.0), std=(1.0, 0.0, 1.0)), "normalization.std"),
    ],
)
def test_bad_normalization_names_the_field(normalization, field):
    with pytest.raises(ConfigError, match=f"^{field}: "):
        normalization.validate()


# Augmentation: every op eagerly and inside tf.data.map, with the same seed, gives the same image.

SEED = tf.constant([7, 3], tf.int64)


def _in_map_with_seed(fn, value, seed=SEED):
    dataset = tf.data.Dataset.from_tensors((value, seed)).map(fn)
    return next(iter(dataset)).numpy()


def test_crop_window_keeps_most_of_each_side_inside_the_image():
    for seed in range(20):
        top, left, height, width = preprocessing.crop_window(
            tf.constant(375), tf.constant(500), tf.constant([seed, 0], tf.int64)
        ).numpy()
        fraction = height / 375
        assert preprocessing.MIN_CROP_FRACTION - 0.01 <= fraction <= 1.0
        assert abs(width / 500 - fraction) < 0.01  # the aspect ratio is kept
        assert 0 <= top <= 375 - height and 0 <= left <= 500 - width


@pytest.mark.parametrize(
    "encoded",
    [image_files.jpeg(seed=1, height=50, width=70), image_files.png(seed=2), _gray_png()],
    ids=["jpeg", "png", "grayscale_png"],
)
def test_decode_and_random_crop_eager_equals_map(encoded):
    def fn(value, seed):
        return preprocessing.decode_and_random_crop(value, SIZE, seed)

    eager = fn(tf.constant(encoded), SEED).numpy()
    np.testing.assert_array_equal(eager, _in_map_with_seed(fn, encoded))
    assert eager.shape == (SIZE, SIZE, 3)
    assert not np.array_equal(eager, fn(tf.constant(encoded), SEED + 1).numpy())


def test_decode_and_random_crop_of_a_jpeg_matches_cropping_the_decoded_image():
    """decode_and_crop_jpeg decodes exactly the window that cropping the whole image gives."""
    encoded = tf.constant(image_files.jpeg(seed=5, height=60, width=80))
    top, left, height, width = preprocessing.crop_window(
        tf.constant(60), tf.constant(80), SEED
    ).numpy()
    whole = tf.io.decode_jpeg(encoded, channels=3)[top : top + height, left : left + width]
    expected = preprocessing.resize(whole, SIZE).numpy()

    cropped = preprocessing.decode_and_random_crop(encoded, SIZE, SEED).numpy()
    np.testing.assert_allclose(cropped, expected, atol=1e-3)


def test_random_crop_eager_equals_map_and_keeps_the_shape():
    image = tf.random.stateless_normal([SIZE, SIZE, 3], seed=[3, 4])

    eager = preprocessing.random_crop(image, SEED).numpy()
    np.testing.assert_allclose(
        eager, _in_map_with_seed(preprocessing.random_crop, image), rtol=1e-6, atol=1e-6
    )
    assert eager.shape == (SIZE, SIZE, 3)
    assert not np.allclose(eager, image.numpy())


def test_random_crop_takes_exactly_its_window():
    """On a horizontal ramp (pixel value = column) bilinear resampling is exact: the first and
    last output columns are the window's first and last columns."""
    ramp = tf.tile(tf.range(SIZE, dtype=tf.float32)[tf.newaxis, :, tf.newaxis], [SIZE, 1, 3])
    for seed in range(5):
        seed = tf.constant([seed, 9], tf.int64)
        _, left, _, width = preprocessing.crop_window(SIZE, SIZE, seed).numpy()
        cropped = preprocessing.random_crop(ramp, seed).numpy()
        np.testing.assert_allclose(cropped[:, 0], left, atol=1e-4)
        np.testing.assert_allclose(cropped[:, -1], left + width - 1, atol=1e-4)


def test_random_flip_and_color_eager_equals_map():
    image = tf.random.stateless_normal([SIZE, SIZE, 3], seed=[5, 6])

    eager = preprocessing.random_flip_and_color(image, SEED).numpy()
    in_map = _in_map_with_seed(preprocessing.random_flip_and_color, image)
    np.testing.assert_allclose(eager, in_map, rtol=1e-6, atol=1e-6)
    assert not np.allclose(eager, image.numpy())


def test_augment_encoded_eager_equals_map_and_varies_with_the_seed():
    encoded = image_files.jpeg(seed=6, height=90, width=40)

    def fn(value, seed):
        return preprocessing.augment_encoded(value, SIZE, NORMALIZATION, seed)

    eager = fn(tf.constant(encoded), SEED).numpy()
    np.testing.assert_allclose(eager, _in_map_with_seed(fn, encoded), rtol=1e-6, atol=1e-6)
    assert eager.shape == (SIZE, SIZE, 3)
    assert not np.allclose(eager, fn(tf.constant(encoded), SEED + 1).numpy())


def test_augment_decoded_eager_equals_map():
    image = preprocessing.preprocess_image(
        tf.constant(image_files.jpeg(seed=7)), SIZE, NORMALIZATION
    )

    eager = preprocessing.augment_decoded(image, SEED).numpy()
    in_map = _in_map_with_seed(preprocessing.augment_decoded, image)
    np.testing.assert_allclose(eager, in_map, rtol=1e-6, atol=1e-6)
    assert not np.allclose(eager, image.numpy())
