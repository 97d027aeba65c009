"""The one image preprocessing that training, evaluation and both serving signatures run, and the
random augmentation that training adds to it.

Keeping a single function is what prevents training/serving skew: a model served with different
resizing or normalization than it was trained with degrades silently. Tf ops only, so it runs
inside tf.data maps and exported graphs alike. The augmentation uses stateless random ops keyed by
an explicit seed, so an op gives the same result eagerly and inside tf.data.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from components.training.trainer_config import DEFAULT_AUGMENT, AugmentConfig
from data_prep.contract import features
from data_prep.contract.config_error import ConfigError

CHANNELS = 3  # RGB; grayscale and RGBA inputs are converted by decode_and_resize
_EDGE_EPSILON = 1e-6  # see random_crop


@dataclasses.dataclass(frozen=True)
class Normalization:
    """Per-channel (R, G, B) mean and standard deviation of the train split's pixels, on the
    0-255 scale of decode_and_resize's output. The Transform component computes them in the
    pipeline; compute_normalization does the same in plain TensorFlow, outside it."""

    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    def validate(self) -> Normalization:
        if len(self.mean) != CHANNELS:
            raise ConfigError("normalization.mean", f"needs {CHANNELS} values, got {self.mean}")
        if len(self.std) != CHANNELS or min(self.std) <= 0:
            raise ConfigError("normalization.std", f"needs {CHANNELS} values > 0, got {self.std}")
        return self


def decode_and_resize(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    """Encoded JPEG/PNG/GIF/BMP bytes -> float32 [image_size, image_size, 3] RGB in [0, 255].

    The whole image is resized (aspect ratio not kept), with antialiasing so that downscaling
    large photos does not alias.
    """
    image = tf.io.decode_image(encoded, channels=CHANNELS, expand_animations=False)
    return resize(image, image_size)


def resize(image: tf.Tensor, image_size: int) -> tf.Tensor:
    """A decoded [height, width, 3] image -> float32 [image_size, image_size, 3], antialiased."""
    image = tf.image.resize(image, [image_size, image_size], antialias=True)
    return tf.ensure_shape(image, [image_size, image_size, CHANNELS])


def normalize(image: tf.Tensor, normalization: Normalization) -> tf.Tensor:
    """Scales each channel to zero mean and unit variance over the train split."""
    mean = tf.constant(normalization.mean, tf.float32)
    std = tf.constant(normalization.std, tf.float32)
    return (image - mean) / std


def preprocess_image(
    encoded: tf.Tensor, image_size: int, normalization: Normalization
) -> tf.Tensor:
    """Encoded image bytes -> the model's float32 [image_size, image_size, 3] input."""
    return normalize(decode_and_resize(encoded, image_size), normalization)


def compute_normalization(files: list[str], image_size: int) -> Normalization:
    """Per-channel mean and std of decode_and_resize's output over every image in `files`
    (gzip TFRecords of tf.Examples): for training outside the pipeline (the transfer benchmark)
    and as the tests' independent check of Transform's statistics."""
    spec = {features.IMAGE: features.feature_spec()[features.IMAGE]}

    def pixels(record):
        encoded = tf.io.parse_single_example(record, spec)[features.IMAGE]
        image = tf.reshape(decode_and_resize(encoded, image_size), [-1, CHANNELS])
        return tf.cast(image, tf.float64)

    def accumulate(totals, image):
        count, total, squares = totals
        count += tf.cast(tf.shape(image)[0], tf.float64)
        return count, total + tf.reduce_sum(image, 0), squares + tf.reduce_sum(image**2, 0)

    zeros = tf.zeros([CHANNELS], tf.float64)
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
    dataset = dataset.map(pixels, num_parallel_calls=tf.data.AUTOTUNE)
    count, total, squares = dataset.reduce((tf.constant(0.0, tf.float64), zeros, zeros), accumulate)
    if count == 0:
        raise ValueError(f"no images in {files}")
    mean = total / count
    std = tf.sqrt(tf.maximum(squares / count - mean**2, 0.0))
    return Normalization(
        tuple(float(v) for v in mean.numpy()), tuple(float(v) for v in std.numpy())
    ).validate()


# Training augmentation. Every op takes a stateless seed (int tensor of shape [2]); ops on a batch
# draw for each image separately from that one seed. Their strengths are an AugmentConfig.


def crop_window(
    height: tf.Tensor,
    width: tf.Tensor,
    seed: tf.Tensor,
    shape: tuple[int, ...] = (),
    min_fraction: float = AugmentConfig.crop,
) -> tf.Tensor:
    """Random windows [top, left, crop_height, crop_width] (int32, last axis) of `shape` images
    of height x width, each keeping min_fraction..1 of each side (the same fraction for both,
    so the aspect ratio is kept), at a random position."""
    size_seed, position_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    fraction = tf.random.stateless_uniform(shape, size_seed, min_fraction, 1.0)
    sides = tf.cast(tf.stack([height, width]), tf.float32)
    crop = tf.maximum(tf.cast(sides * fraction[..., tf.newaxis], tf.int32), 1)
    free = tf.cast(tf.stack([height, width]) - crop + 1, tf.float32)
    position = tf.random.stateless_uniform([*shape, 2], position_seed, 0.0, 1.0)
    top_left = tf.minimum(tf.cast(position * free, tf.int32), tf.cast(free, tf.int32) - 1)
    return tf.concat([top_left, crop], axis=-1)


def decode_and_random_crop(
    encoded: tf.Tensor, image_size: int, seed: tf.Tensor, min_fraction: float = AugmentConfig.crop
) -> tf.Tensor:
    """Encoded image bytes -> a random crop_window of it, resized like decode_and_resize.

    JPEGs go through decode_and_crop_jpeg, which decodes only the rows of the crop; the header
    alone gives the image's size. Other formats are decoded whole, then cropped.
    """

    def jpeg():
        shape = tf.image.extract_jpeg_shape(encoded)
        window = crop_window(shape[0], shape[1], seed, min_fraction=min_fraction)
        return tf.io.decode_and_crop_jpeg(encoded, window, channels=CHANNELS)

    def other():
        image = tf.io.decode_image(encoded, channels=CHANNELS, expand_animations=False)
        shape = tf.shape(image)
        window = crop_window(shape[0], shape[1], seed, min_fraction=min_fraction)
        top, left, height, width = tf.unstack(window)
        return image[top : top + height, left : left + width]

    return resize(tf.cond(tf.io.is_jpeg(encoded), jpeg, other), image_size)


def random_crop_and_flip(
    images: tf.Tensor, seed: tf.Tensor, augment: AugmentConfig = DEFAULT_AUGMENT
) -> tf.Tensor:
    """A random crop_window of each image of a decoded batch [batch, height, width, channels],
    resized back to its size and flipped left-right at random (when augment.flip), all in one
    resampling pass: the crop for images cached after decoding, where decode_and_random_crop is
    no longer possible."""
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    count, height, width = images.shape[0], images.shape[1], images.shape[2]
    window = crop_window(height, width, crop_seed, (count,), augment.crop)
    windows = tf.cast(window, tf.float32)
    top, left, crop_height, crop_width = tf.unstack(windows, axis=-1)
    # crop_and_resize boxes are normalized corners [y1, x1, y2, x2] of pixel centres; x1 > x2
    # samples the window mirrored. A window that ends at the image's edge (1.0) can land a
    # rounding error past it, where crop_and_resize fills zeros instead of pixels; so the edge
    # is pulled in by a hair.
    first_column = left / (width - 1)
    last_column = (left + crop_width - 1) / (width - 1)
    flip = tf.random.stateless_uniform([count], flip_seed) < (0.5 if augment.flip else 0.0)
    boxes = tf.stack(
        [
            top / (height - 1),
            tf.where(flip, last_column, first_column),
            (top + crop_height - 1) / (height - 1),
            tf.where(flip, first_column, last_column),
        ],
        axis=-1,
    )
    boxes = tf.minimum(boxes, 1.0 - _EDGE_EPSILON)
    return tf.image.crop_and_resize(images, boxes, tf.range(count), [height, width])


def random_color(
    images: tf.Tensor, seed: tf.Tensor, augment: AugmentConfig = DEFAULT_AUGMENT
) -> tf.Tensor:
    """A random brightness shift and contrast factor for each image of a normalized batch
    [batch, height, width, channels].

    As tf.image's brightness then contrast (each channel moves away from its mean by the
    factor), folded into one multiply-add: with m the channel's mean,
    (x + b - (m + b)) * c + (m + b) = x * c + (m + b - m * c).
    """
    brightness_seed, contrast_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    per_image = [images.shape[0], 1, 1, 1]
    brightness = tf.random.stateless_uniform(
        per_image, brightness_seed, -augment.brightness, augment.brightness
    )
    contrast = tf.random.stateless_uniform(
        per_image, contrast_seed, 1.0 - augment.contrast, 1.0 + augment.contrast
    )
    mean = tf.reduce_mean(images, axis=[1, 2], keepdims=True)
    return images * contrast + (mean + brightness - mean * contrast)


def augment_encoded(
    encoded: tf.Tensor,
    image_size: int,
    normalization: Normalization,
    seed: tf.Tensor,
    augment: AugmentConfig = DEFAULT_AUGMENT,
) -> tf.Tensor:
    """Encoded bytes -> an augmented model input: decode with a random crop, resize, normalize,
    flip and color, as `augment` sets them. The per-image training map when images are not
    cached."""
    crop_seed, flip_seed, color_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    cropped = decode_and_random_crop(encoded, image_size, crop_seed, augment.crop)
    image = normalize(cropped, normalization)
    if augment.flip:
        image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    return random_color(image[tf.newaxis], color_seed, augment)[0]


def augment_batch(
    images: tf.Tensor, seed: tf.Tensor, augment: AugmentConfig = DEFAULT_AUGMENT
) -> tf.Tensor:
    """A batch of preprocess_image outputs -> augmented model inputs: the same crop, flip and
    color as augment_encoded, for images cached after decoding. Whole batches at a time: these
    cheap ops cost far less per image than a per-image map's overhead."""
    crop_seed, color_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    return random_color(random_crop_and_flip(images, crop_seed, augment), color_seed, augment)
