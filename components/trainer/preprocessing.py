"""The one image preprocessing that training, evaluation and both serving signatures run.

Keeping a single function is what prevents training/serving skew: a model served with different
resizing or normalization than it was trained with degrades silently. Tf ops only, so it runs
inside tf.data maps and exported graphs alike.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from data_prep import features
from data_prep.config import ConfigError

CHANNELS = 3  # RGB; grayscale and RGBA inputs are converted by decode_and_resize


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
