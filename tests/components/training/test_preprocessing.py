"""The shared preprocessing: the same result eagerly and inside tf.data.map, for any input."""

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from components.training import preprocessing
from components.training.preprocessing import Normalization
from components.training.trainer_config import AugmentConfig
from data_prep.contract import features
from data_prep.contract.config_error import ConfigError
from tests.data_prep import image_files

NORMALIZATION = Normalization(mean=(120.0, 110.0, 100.0), std=(60.0, 50.0, 40.0))
SIZE = 32
BATCH = 4


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
    windows = preprocessing.crop_window(375, 500, SEED, shape=(200,)).numpy()
    top, left, height, width = windows.T
    fraction = height / 375

    assert windows.shape == (200, 4)
    assert (fraction >= AugmentConfig().crop - 0.01).all() and (fraction <= 1).all()
    assert (abs(width / 500 - fraction) < 0.01).all()  # the aspect ratio is kept
    assert (top >= 0).all() and (top + height <= 375).all()
    assert (left >= 0).all() and (left + width <= 500).all()
    assert len(set(top)) > 20 and len(set(height)) > 20  # windows vary image to image
    single = preprocessing.crop_window(375, 500, SEED).numpy()
    assert single.shape == (4,) and (single[2:] <= [375, 500]).all()


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
    top, left, height, width = preprocessing.crop_window(60, 80, SEED).numpy()
    whole = tf.io.decode_jpeg(encoded, channels=3)[top : top + height, left : left + width]
    expected = preprocessing.resize(whole, SIZE).numpy()

    cropped = preprocessing.decode_and_random_crop(encoded, SIZE, SEED).numpy()
    np.testing.assert_allclose(cropped, expected, atol=1e-3)


def _batch(seed=(3, 4)):
    return tf.random.stateless_normal([BATCH, SIZE, SIZE, 3], seed=seed)


def test_random_crop_and_flip_eager_equals_map_and_keeps_the_shape():
    images = _batch()

    eager = preprocessing.random_crop_and_flip(images, SEED).numpy()
    in_map = _in_map_with_seed(preprocessing.random_crop_and_flip, images)
    np.testing.assert_allclose(eager, in_map, rtol=1e-6, atol=1e-6)
    assert eager.shape == (BATCH, SIZE, SIZE, 3)
    assert not np.allclose(eager, images.numpy())


def test_random_crop_and_flip_takes_exactly_each_images_window():
    """On a horizontal ramp (pixel value = column) bilinear resampling is exact: each image's
    outer output columns are its window's outer columns, swapped where it was flipped."""
    ramp = tf.tile(tf.range(SIZE, dtype=tf.float32)[tf.newaxis, :, tf.newaxis], [SIZE, 1, 3])
    images = tf.stack([ramp] * 16)
    crop_seed, _ = tf.unstack(tf.random.experimental.stateless_split(SEED, 2))
    _, left, _, width = preprocessing.crop_window(SIZE, SIZE, crop_seed, (16,)).numpy().T

    cropped = preprocessing.random_crop_and_flip(images, SEED).numpy()
    flipped = 0
    for index in range(16):
        outer = sorted([cropped[index, 0, 0, 0], cropped[index, 0, -1, 0]])
        np.testing.assert_allclose(outer, [left[index], left[index] + width[index] - 1], atol=1e-4)
        assert np.allclose(cropped[index], cropped[index, :1], atol=1e-4)  # rows alike
        flipped += cropped[index, 0, 0, 0] > cropped[index, 0, -1, 0]
    assert 0 < flipped < 16
    assert len(set(left)) > 1


def test_random_color_eager_equals_map_and_matches_tf_image():
    images = _batch(seed=(5, 6))

    eager = preprocessing.random_color(images, SEED).numpy()
    in_map = _in_map_with_seed(preprocessing.random_color, images)
    np.testing.assert_allclose(eager, in_map, rtol=1e-6, atol=1e-6)
    brightness_seed, contrast_seed = tf.unstack(tf.random.experimental.stateless_split(SEED, 2))
    shape = [BATCH, 1, 1, 1]
    delta = AugmentConfig().brightness
    brightness = tf.random.stateless_uniform(shape, brightness_seed, -delta, delta).numpy()
    contrast = tf.random.stateless_uniform(
        shape, contrast_seed, 1 - AugmentConfig().contrast, 1 + AugmentConfig().contrast
    ).numpy()
    for index, image in enumerate(images):
        expected = tf.image.adjust_brightness(image, brightness[index].item())
        expected = tf.image.adjust_contrast(expected, contrast[index].item())
        np.testing.assert_allclose(eager[index], expected.numpy(), rtol=1e-5, atol=1e-5)
    assert len(set(brightness.ravel())) == len(set(contrast.ravel())) == BATCH


def test_augment_encoded_eager_equals_map_and_varies_with_the_seed():
    encoded = image_files.jpeg(seed=6, height=90, width=40)

    def fn(value, seed):
        return preprocessing.augment_encoded(value, SIZE, NORMALIZATION, seed)

    eager = fn(tf.constant(encoded), SEED).numpy()
    np.testing.assert_allclose(eager, _in_map_with_seed(fn, encoded), rtol=1e-6, atol=1e-6)
    assert eager.shape == (SIZE, SIZE, 3)
    assert not np.allclose(eager, fn(tf.constant(encoded), SEED + 1).numpy())


def test_augment_batch_eager_equals_map_and_augments_each_image_differently():
    image = preprocessing.preprocess_image(
        tf.constant(image_files.jpeg(seed=7)), SIZE, NORMALIZATION
    )
    images = tf.stack([image] * BATCH)

    eager = preprocessing.augment_batch(images, SEED).numpy()
    in_map = _in_map_with_seed(preprocessing.augment_batch, images)
    np.testing.assert_allclose(eager, in_map, rtol=1e-6, atol=1e-6)
    assert eager.shape == (BATCH, SIZE, SIZE, 3)
    flat = eager.reshape(BATCH, -1)
    assert len(np.unique(flat.round(4), axis=0)) == BATCH


OFF = AugmentConfig(flip=False, crop=1.0, brightness=0.0, contrast=0.0)


def test_augmentation_switched_off_leaves_the_preprocessed_image():
    encoded = tf.constant(image_files.jpeg(seed=8, height=48, width=64))
    plain = preprocessing.preprocess_image(encoded, SIZE, NORMALIZATION).numpy()
    for seed in range(4):
        seeds = tf.constant([seed, 1], tf.int64)
        augmented = preprocessing.augment_encoded(encoded, SIZE, NORMALIZATION, seeds, OFF)
        np.testing.assert_allclose(augmented.numpy(), plain, atol=1e-5)
        batch = preprocessing.augment_batch(tf.constant(plain[np.newaxis]), seeds, OFF)
        np.testing.assert_allclose(batch.numpy()[0], plain, atol=1e-3)


@pytest.mark.parametrize("flip", [True, False])
def test_flip_alone_mirrors_some_images_only_when_on(flip):
    encoded = tf.constant(image_files.jpeg(seed=9, height=SIZE, width=SIZE))
    plain = preprocessing.preprocess_image(encoded, SIZE, NORMALIZATION).numpy()
    mirrored = plain[:, ::-1]
    augment = AugmentConfig(flip=flip, crop=1.0, brightness=0.0, contrast=0.0)
    outcomes = set()
    for seed in range(16):
        seeds = tf.constant([seed, 2], tf.int64)
        image = preprocessing.augment_encoded(encoded, SIZE, NORMALIZATION, seeds, augment)
        batch = preprocessing.augment_batch(tf.constant(plain[np.newaxis]), seeds, augment)
        for result, atol in ((image.numpy(), 1e-5), (batch.numpy()[0], 1e-3)):
            is_plain = np.allclose(result, plain, atol=atol)
            assert is_plain or np.allclose(result, mirrored, atol=atol)
            outcomes.add(is_plain)
    assert outcomes == ({True, False} if flip else {True})
