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

from data_prep import features
from data_prep.config import ConfigError

CHANNELS = 3  # RGB; grayscale and RGBA inputs are converted by decode_and_resize
# Augmentation strengths. Shapes keep their class under flips and mild zoom; brightness is in
# normalized units (about 1 std of pixel values per 1.0).
MIN_CROP_FRACTION = 0.85  # a crop keeps 85-100% of each side, at a random position
BRIGHTNESS_DELTA = 0.2
CONTRAST_RANGE = (0.8, 1.2)


@dataclasses.dataclass(frozen=True)
class Normalization:
    """Per-channel (R, G, B) mean and standard deviation of the train split's pixels, on the
    0-255 scale of decode_and_resize's output. The TFX Transform component will compute them;
    compute_normalization does the same in plain TensorFlow."""

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
    (gzip TFRecords of tf.Examples). For tests and the CLI, until Transform supplies them."""
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


# Training augmentation. Every op takes a stateless seed (int tensor of shape [2]).


def crop_window(height: tf.Tensor, width: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """A random [top, left, crop_height, crop_width] keeping MIN_CROP_FRACTION..1 of each side
    (the same fraction for both, so the aspect ratio is kept), at a random position."""
    size_seed, top_seed, left_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    fraction = tf.random.stateless_uniform([], size_seed, MIN_CROP_FRACTION, 1.0)
    crop_height = tf.maximum(tf.cast(tf.cast(height, tf.float32) * fraction, tf.int32), 1)
    crop_width = tf.maximum(tf.cast(tf.cast(width, tf.float32) * fraction, tf.int32), 1)
    top = tf.random.stateless_uniform([], top_seed, 0, height - crop_height + 1, tf.int32)
    left = tf.random.stateless_uniform([], left_seed, 0, width - crop_width + 1, tf.int32)
    return tf.stack([top, left, crop_height, crop_width])


def decode_and_random_crop(encoded: tf.Tensor, image_size: int, seed: tf.Tensor) -> tf.Tensor:
    """Encoded image bytes -> a random crop_window of it, resized like decode_and_resize.

    JPEGs go through decode_and_crop_jpeg, which decodes only the rows of the crop; the header
    alone gives the image's size. Other formats are decoded whole, then cropped.
    """

    def jpeg():
        shape = tf.image.extract_jpeg_shape(encoded)
        window = crop_window(shape[0], shape[1], seed)
        return tf.io.decode_and_crop_jpeg(encoded, window, channels=CHANNELS)

    def other():
        image = tf.io.decode_image(encoded, channels=CHANNELS, expand_animations=False)
        shape = tf.shape(image)
        top, left, height, width = tf.unstack(crop_window(shape[0], shape[1], seed))
        return image[top : top + height, left : left + width]

    return resize(tf.cond(tf.io.is_jpeg(encoded), jpeg, other), image_size)


def random_crop(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """A random crop_window of an already decoded image, resized back to its size: the crop for
    images that were cached decoded, where decode_and_random_crop is no longer possible."""
    height, width = image.shape[0], image.shape[1]
    top, left, crop_height, crop_width = tf.unstack(
        tf.cast(crop_window(height, width, seed), tf.float32)
    )
    # crop_and_resize boxes are normalized corners [y1, x1, y2, x2] of pixel centres.
    box = tf.stack(
        [
            top / (height - 1),
            left / (width - 1),
            (top + crop_height - 1) / (height - 1),
            (left + crop_width - 1) / (width - 1),
        ]
    )
    return tf.image.crop_and_resize(image[tf.newaxis], box[tf.newaxis], [0], [height, width])[0]


def random_flip_and_color(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Random horizontal flip, brightness and contrast of a normalized image."""
    flip_seed, brightness_seed, contrast_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3)
    )
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    image = tf.image.stateless_random_brightness(image, BRIGHTNESS_DELTA, brightness_seed)
    return tf.image.stateless_random_contrast(image, *CONTRAST_RANGE, contrast_seed)


def augment_encoded(
    encoded: tf.Tensor, image_size: int, normalization: Normalization, seed: tf.Tensor
) -> tf.Tensor:
    """Encoded bytes -> an augmented model input: decode with a random crop, resize, normalize,
    flip and color. The training map when images are not cached."""
    crop_seed, pixel_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    image = normalize(decode_and_random_crop(encoded, image_size, crop_seed), normalization)
    return random_flip_and_color(image, pixel_seed)


def augment_decoded(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """A preprocess_image output -> an augmented model input: the same crop, flip and color as
    augment_encoded, on an image that was cached after decoding."""
    crop_seed, pixel_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    return random_flip_and_color(random_crop(image, crop_seed), pixel_seed)
